/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The resolved settings printed as YAML (airlock_settings_print), which
 * parses back to the same settings.
 */
#include "airlock/settings.h"

#include <stdio.h>
#include <string.h>

#include "core/settings_schema.h"
#include "util/util.h"

/* A string as YAML: plain when it cannot be misread, double-quoted with
 * escapes otherwise, so the output parses back to the same settings. */
static void print_string(FILE *out, const char *s)
{
	bool plain = s[0] != 0;
	for (const char *c = s; *c && plain; c++)
		plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		        *c == '_' || *c == '/' || *c == '.' || (*c == '-' && c != s) ||
		        (*c == ':' && c != s && c[1] != 0);
	static const char *const words[] = { "null", "Null", "NULL", "true", "True", "TRUE", "false",
		                             "False", "FALSE", "yes", "Yes", "YES", "no", "No", "NO",
		                             "on", "On", "ON", "off", "Off", "OFF" };
	for (size_t i = 0; plain && i < ARRAY_SIZE(words); i++)
		plain = strcmp(s, words[i]) != 0;
	if (plain) {
		fputs(s, out);
		return;
	}
	fputc('"', out);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(out, "\\%c", *c);
		else if (*c < 0x20 || *c == 0x7f)
			fprintf(out, "\\x%02x", *c);
		else
			fputc(*c, out);
	}
	fputc('"', out);
}

struct key_value {
	const char *key, *value;
};

/* A section's string keys that are set, one line each. */
static void print_set(FILE *out, const struct key_value *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!kv[i].value)
			continue;
		fprintf(out, "  %s: ", kv[i].key);
		print_string(out, kv[i].value);
		fputc('\n', out);
	}
}

static void print_limits(FILE *out, const char *title, const airlock_limit_table *t, bool ceiling)
{
	fprintf(out, "  %s:\n", title);
	for (size_t i = 0; i < ARRAY_SIZE(settings_limit_fields); i++) {
		const field *f = &settings_limit_fields[i];
		int64_t v = limit_value(t, f);
		fprintf(out, "    %s: %lld", f->key, (long long)v);
		if (ceiling && v == 0)
			fputs("  # no ceiling (operator)", out);
		fputc('\n', out);
	}
}

void airlock_settings_print(const airlock_settings *s, FILE *out)
{
	if (!s || !out)
		return;
	fputs("# airlock settings, resolved\n", out);
	fprintf(out, "deployment_mode: %s\n", deployment_label(s->deployment_mode));
	fputs("auth_mode: ", out);
	print_string(out, s->auth_mode ? s->auth_mode : "(unset)");
	fputs("\nsandbox:\n", out);
	fprintf(out, "  mechanism: %s\n", mechanism_label(s->mechanism));
	if (s->image) {
		/* The resolved digest goes in the log at startup (spec,
		 * EnvironmentSpec): what image a deployment runs is then a fact in
		 * the log rather than a question for a registry. */
		fputs("  image: ", out);
		print_string(out, s->image);
		fputc('\n', out);
	} else {
		fputs("  # image: none configured\n", out);
	}
	fprintf(out, "  hard_cap_seconds: %lld\n", (long long)s->hard_cap_seconds);
	fputs("  image_store: ", out);
	print_string(out, s->image_store ? s->image_store : "(unset)");
	fprintf(out, "\n  gvisor_platform: %s", airlock_gvisor_platform_name(s->gvisor_platform));
	fputs("\nlimits:\n", out);
	print_limits(out, "defaults", &s->defaults, false);
	print_limits(out, "ceilings", &s->ceilings, true);
	fputs("environment:\n", out);
	if (s->passthrough_file) {
		fputs("  passthrough_file: ", out);
		print_string(out, s->passthrough_file);
		fputc('\n', out);
		fputs("  # names read from it:", out);
		for (size_t i = 0; i < s->n_passthrough; i++)
			fprintf(out, " %s", s->passthrough[i]);
		fputc('\n', out);
	} else {
		fputs("  passthrough: [", out);
		for (size_t i = 0; i < s->n_passthrough; i++)
			fprintf(out, "%s%s", i ? ", " : "", s->passthrough[i]);
		fputs("]\n", out);
	}
	if (s->tier1_error) {
		char q[AIRLOCK_ERROR_MESSAGE_MAX + 256];
		fprintf(out, "  # tier-1 list error: %s\n",
		        quote(q, sizeof(q), s->tier1_error, strlen(s->tier1_error)));
	}
	fputs("service:\n", out);
	const struct key_value strs[] = {
		{ "listen", s->service.listen },
		{ "socket_group", s->service.socket_group },
		{ "credential_file", s->service.credential_file },
		{ "metrics_listen", s->service.metrics_listen },
		{ "tls_cert_file", s->service.tls_cert_file },
		{ "tls_key_file", s->service.tls_key_file },
		{ "tls_client_ca_file", s->service.tls_client_ca_file },
		{ "policy_file", s->service.policy_file },
		{ "reaper_address", s->service.reaper_address },
		{ "reaper_credential_file", s->service.reaper_credential_file },
		{ "bridge_address", s->service.bridge_address },
		{ "reaper_tls_ca_file", s->service.reaper_tls_ca_file },
	};
	print_set(out, strs, ARRAY_SIZE(strs));
	fprintf(out, "  max_sandboxes: %lld\n", (long long)s->service.max_sandboxes);
	fprintf(out, "  max_connections: %lld\n", (long long)s->service.max_connections);
	fprintf(out, "  reaper_interval_seconds: %lld\n",
	        (long long)s->service.reaper_interval_seconds);
	fprintf(out, "  reaper_destroy_alert_after: %lld\n",
	        (long long)s->service.reaper_destroy_alert_after);
	fprintf(out, "  pool:\n    size: %lld\n    per_key: %lld\n    max_idle_seconds: %lld\n",
	        (long long)s->service.pool.size, (long long)s->service.pool.per_key,
	        (long long)s->service.pool.max_idle_seconds);
	fputs("worker:\n", out);
	const airlock_worker_settings *w = &s->worker;
	const struct key_value wstrs[] = {
		{ "listen", w->listen },
		{ "tls_cert_file", w->tls_cert_file },
		{ "tls_key_file", w->tls_key_file },
		{ "state_dir", w->state_dir },
		{ "database", w->database },
		{ "database_connection_file", w->database_connection_file },
		{ "auth_mode", w->auth_mode },
		{ "tokens_file", w->tokens_file },
		{ "metrics_listen", w->metrics_listen },
		{ "service_address", w->service_address },
		{ "service_credential_file", w->service_credential_file },
		{ "service_tls_ca_file", w->service_tls_ca_file },
		{ "service_tls_cert_file", w->service_tls_cert_file },
		{ "service_tls_key_file", w->service_tls_key_file },
		{ "reaper_credential_file", w->reaper_credential_file },
		{ "policy_file", w->policy_file },
		{ "bridge_listen", w->bridge_listen },
		{ "bridge_upstream", w->bridge_upstream },
		{ "artifacts_dir", w->artifacts_dir },
	};
	print_set(out, wstrs, ARRAY_SIZE(wstrs));
	fprintf(out, "  tenant_max_sandboxes: %lld\n", (long long)w->tenant_max_sandboxes);
	fprintf(out, "  artifact_size_max: %lld\n", (long long)w->artifact_size_max);
	fprintf(out, "  artifact_tenant_bytes_max: %lld\n", (long long)w->artifact_tenant_bytes_max);
	fprintf(out, "  artifact_retention_days: %lld\n", (long long)w->artifact_retention_days);
	fprintf(out, "  artifact_upload_unclaimed_hours: %lld\n",
	        (long long)w->artifact_upload_unclaimed_hours);
	fprintf(out, "  artifact_sweep_interval_seconds: %lld\n",
	        (long long)w->artifact_sweep_interval_seconds);
}
