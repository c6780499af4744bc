/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Settings: the embedded defaults, a YAML file over them (settings_yaml.c),
 * AIRLOCK_* overrides over that (settings_env.c), and the startup checks
 * (settings_check.c; the specification, "Development, production, and the
 * refusal in between"; "Resource limits, as numbers").
 *
 * This file holds what they are written in: the vocabularies (mechanism,
 * gVisor platform, deployment mode), the embedded defaults, the schema of
 * keys every mapping may hold, and the conversion of one scalar for a key.
 */
#include "airlock/settings.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "core/settings_schema.h"
#include "util/util.h"

/* The input caps (settings file, tier-1 file, a scalar, auth_mode) are in
 * airlock/caps.h. */

/* ---- vocabularies -------------------------------------------------------- */

static const char *const mechanism_names[AIRLOCK_MECHANISM__MAX] = {
	[AIRLOCK_MECHANISM_FAKE] = "fake",
	[AIRLOCK_MECHANISM_NATIVE] = "native",
	[AIRLOCK_MECHANISM_GVISOR] = "gvisor",
	[AIRLOCK_MECHANISM_MICROVM] = "microvm",
	[AIRLOCK_MECHANISM_DOCKER] = "docker",
};

static const char *const platform_names[AIRLOCK_GVISOR_PLATFORM__MAX] = {
	[AIRLOCK_GVISOR_PLATFORM_AUTO] = "auto",
	[AIRLOCK_GVISOR_PLATFORM_PTRACE] = "ptrace",
	[AIRLOCK_GVISOR_PLATFORM_KVM] = "kvm",
};

const char *airlock_gvisor_platform_name(airlock_gvisor_platform p)
{
	if ((unsigned)p >= AIRLOCK_GVISOR_PLATFORM__MAX)
		return NULL;
	return platform_names[p];
}

airlock_gvisor_platform airlock_gvisor_platform_parse(const char *s)
{
	for (unsigned i = 0; s && i < AIRLOCK_GVISOR_PLATFORM__MAX; i++)
		if (strcmp(platform_names[i], s) == 0)
			return (airlock_gvisor_platform)i;
	return AIRLOCK_GVISOR_PLATFORM__MAX;
}

static const char *const deployment_names[AIRLOCK_DEPLOYMENT__MAX] = {
	[AIRLOCK_DEPLOYMENT_DEVELOPMENT] = "development",
	[AIRLOCK_DEPLOYMENT_PRODUCTION] = "production",
};

const char *airlock_mechanism_name(airlock_mechanism m)
{
	if ((unsigned)m >= AIRLOCK_MECHANISM__MAX)
		return NULL;
	return mechanism_names[m];
}

airlock_mechanism airlock_mechanism_parse(const char *s)
{
	if (!s)
		return AIRLOCK_MECHANISM_INVALID;
	for (unsigned i = 1; i < AIRLOCK_MECHANISM__MAX; i++)
		if (mechanism_names[i] && strcmp(mechanism_names[i], s) == 0)
			return (airlock_mechanism)i;
	return AIRLOCK_MECHANISM_INVALID;
}

bool airlock_mechanism_production_allowed(airlock_mechanism m)
{
	/* Written as the allowed set, never as the refused one: a mechanism
	 * added to the enum later lands in default and is refused until someone
	 * decides, here, that it isolates a kernel (spec, gate
	 * production_refuses_dev: "a fifth value inherits the check"). An
	 * expression, not a switch: -Wswitch-enum would make a switch name
	 * every refused value too. */
	return m == AIRLOCK_MECHANISM_MICROVM || m == AIRLOCK_MECHANISM_GVISOR;
}

const char *airlock_deployment_mode_name(airlock_deployment_mode m)
{
	if ((unsigned)m >= AIRLOCK_DEPLOYMENT__MAX)
		return NULL;
	return deployment_names[m];
}

airlock_deployment_mode airlock_deployment_mode_parse(const char *s)
{
	if (!s)
		return AIRLOCK_DEPLOYMENT_INVALID;
	for (unsigned i = 1; i < AIRLOCK_DEPLOYMENT__MAX; i++)
		if (deployment_names[i] && strcmp(deployment_names[i], s) == 0)
			return (airlock_deployment_mode)i;
	return AIRLOCK_DEPLOYMENT_INVALID;
}

/* ---- the embedded defaults ------------------------------------------------
 * Parsed by the same code as an operator's file, so the defaults are a
 * document anyone can read (and `airlock config` can print) rather than
 * numbers scattered through initializers. The numbers are the
 * specification's table ("Resource limits, as numbers"); a ceiling of 0 is
 * the table's "operator": no ceiling until an operator sets one. */
#define SETTINGS_STR_(x) #x
#define SETTINGS_STR(x) SETTINGS_STR_(x)
static const char settings_defaults_yaml[] =
	"deployment_mode: development\n"
	"auth_mode: dev\n"
	"sandbox:\n"
	"  mechanism: native\n"
	"  hard_cap_seconds: 1800\n"
	"  image_store: /var/lib/airlock/images\n"
	"limits:\n"
	"  defaults:\n"
	"    cpu_millicores: 2000\n"
	"    memory_bytes: 2G\n"
	"    pids_max: 512\n"
	"    workspace_bytes: 4G\n"
	"    inodes_max: 100000\n"
	"    wall_clock_seconds: 300\n"
	"    files_changed_max: 1000\n"
	"    start_budget_seconds: 30\n"
	"  ceilings:\n"
	"    cpu_millicores: 0\n"
	"    memory_bytes: 0\n"
	"    pids_max: 4096\n"
	"    workspace_bytes: 0\n"
	"    inodes_max: 1000000\n"
	"    wall_clock_seconds: 1800\n"
	"    files_changed_max: " SETTINGS_STR(AIRLOCK_FILES_CHANGED_MAX) "\n"
	"    start_budget_seconds: 60\n"
	"environment:\n"
	"  passthrough: []\n"
	"service:\n"
	"  listen: unix:/run/airlock/airlock.sock\n"
	"  max_sandboxes: 64\n"
	"  max_connections: 256\n"
	"  reaper_interval_seconds: 60\n"
	"  reaper_destroy_alert_after: 3\n"
	"  pool:\n"
	"    size: 0\n"
	"    per_key: 2\n"
	"    max_idle_seconds: 600\n"
	"worker:\n"
	"  listen: unix:/run/airlock/worker.sock\n"
	"  state_dir: /var/lib/airlock/worker\n"
	"  database: sqlite\n";

/* ---- small helpers -------------------------------------------------------- */

/* Strict non-negative decimal: digits only, no sign, no spaces, no base
 * prefixes (YAML 1.1 would read 0x10 and 010 as numbers; a limit written
 * that way is a mistake, not a feature). */
static bool parse_u63(const char *s, size_t len, int64_t *ret)
{
	if (len == 0 || len > 19)
		return false;
	int64_t v = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		int d = s[i] - '0';
		if (v > (INT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*ret = v;
	return true;
}

static bool parse_bytes_value(const char *s, size_t len, int64_t *ret)
{
	if (len == 0)
		return false;
	int shift = 0;
	switch (s[len - 1]) {
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	default:
		break;
	}
	if (shift)
		len--;
	int64_t v;
	if (!parse_u63(s, len, &v))
		return false;
	if (v > (INT64_MAX >> shift))
		return false;
	*ret = v << shift;
	return true;
}

int airlock_parse_bytes(const char *s, const char *what, int64_t *ret, airlock_error *err)
{
	char q[QUOTE_MAX];
	int64_t v;
	if (!what)
		what = "value";
	if (!s || !parse_bytes_value(s, strlen(s), &v))
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "%s: invalid byte count \"%s\" (expected a non-negative integer, optionally with a K, M or G suffix)",
		                         what, s ? Q(q, s) : "");
	*ret = v;
	return 0;
}

/* "a, b or c" from a name table, skipping index 0. */
/* names[first..n): index 0 is the invalid value of most vocabularies here,
 * and a valid one (auto) of the platform's. */
static void list_names(char *buf, size_t size, const char *const *names, size_t first, size_t n)
{
	size_t o = 0;
	buf[0] = 0;
	for (size_t i = first; i < n; i++) {
		if (!names[i])
			continue;
		int w = snprintf(buf + o, size - o, "%s%s", o ? ", " : "", names[i]);
		if (w < 0 || (size_t)w >= size - o)
			return;
		o += (size_t)w;
	}
}

/* The allowed set, generated from the predicate so the message can never
 * disagree with the check. */
void settings_list_production_allowed(char *buf, size_t size)
{
	size_t o = 0;
	buf[0] = 0;
	/* Two passes put microvm first, the specification's table order; any
	 * other allowed value follows in enum order. */
	for (int pass = 0; pass < 2; pass++)
		for (unsigned i = 1; i < AIRLOCK_MECHANISM__MAX; i++) {
			if (!airlock_mechanism_production_allowed((airlock_mechanism)i))
				continue;
			bool is_microvm = i == AIRLOCK_MECHANISM_MICROVM;
			if ((pass == 0) != is_microvm)
				continue;
			int w = snprintf(buf + o, size - o, "%s%s", o ? ", " : "", mechanism_names[i]);
			if (w < 0 || (size_t)w >= size - o)
				return;
			o += (size_t)w;
		}
}

/* ---- the schema ------------------------------------------------------------ */

#define LT(m) offsetof(airlock_limit_table, m)
const field settings_limit_fields[] = {
	{ "cpu_millicores", F_INT, LT(limits.cpu_millicores), 0, NULL },
	{ "memory_bytes", F_BYTES, LT(limits.memory_bytes), 0, NULL },
	{ "pids_max", F_INT, LT(limits.pids_max), 0, NULL },
	{ "workspace_bytes", F_BYTES, LT(limits.workspace_bytes), 0, NULL },
	{ "inodes_max", F_INT, LT(limits.inodes_max), 0, NULL },
	{ "wall_clock_seconds", F_INT, LT(limits.wall_clock_seconds), 0, NULL },
	{ "files_changed_max", F_INT, LT(files_changed_max), 0, NULL },
	{ "start_budget_seconds", F_INT, LT(start_budget_seconds), 0, NULL },
};
#undef LT

static const schema defaults_schema = { "limits.defaults.", settings_limit_fields,
	                                ARRAY_SIZE(settings_limit_fields), -1, -1 };
static const schema ceilings_schema = { "limits.ceilings.", settings_limit_fields,
	                                ARRAY_SIZE(settings_limit_fields), -1, -1 };

#define ST(m) offsetof(airlock_settings, m)
static const field limits_fields[] = {
	{ "defaults", F_MAP, ST(defaults), 0, &defaults_schema },
	{ "ceilings", F_MAP, ST(ceilings), 0, &ceilings_schema },
};
static const schema limits_schema = { "limits.", limits_fields, ARRAY_SIZE(limits_fields), -1, -1 };

static const field sandbox_fields[] = {
	{ "mechanism", F_MECHANISM, ST(mechanism), 0, NULL },
	{ "image", F_STRING, ST(image), 0, NULL },
	{ "hard_cap_seconds", F_INT, ST(hard_cap_seconds), 0, NULL },
	{ "image_store", F_STRING, ST(image_store), 0, NULL },
	{ "gvisor_platform", F_PLATFORM, ST(gvisor_platform), 0, NULL },
};
static const schema sandbox_schema = { "sandbox.", sandbox_fields, ARRAY_SIZE(sandbox_fields), -1,
	                               -1 };

static const field environment_fields[] = {
	{ "passthrough", F_NAMES, ST(passthrough), ST(n_passthrough), NULL },
	{ "passthrough_file", F_STRING, ST(passthrough_file), 0, NULL },
};
/* One place names the tier-1 list: two would need a rule for which wins,
 * and any such rule is one an operator can get wrong without noticing. */
static const schema environment_schema = { "environment.", environment_fields,
	                                   ARRAY_SIZE(environment_fields), 0, 1 };

static const field pool_fields[] = {
	{ "size", F_INT, ST(service.pool.size), 0, NULL },
	{ "per_key", F_INT, ST(service.pool.per_key), 0, NULL },
	{ "max_idle_seconds", F_INT, ST(service.pool.max_idle_seconds), 0, NULL },
};
static const schema pool_schema = { "service.pool.", pool_fields, ARRAY_SIZE(pool_fields), -1,
	                            -1 };

static const field service_fields[] = {
	{ "listen", F_STRING, ST(service.listen), 0, NULL },
	{ "socket_group", F_STRING, ST(service.socket_group), 0, NULL },
	{ "credential_file", F_STRING, ST(service.credential_file), 0, NULL },
	{ "metrics_listen", F_STRING, ST(service.metrics_listen), 0, NULL },
	{ "max_sandboxes", F_INT, ST(service.max_sandboxes), 0, NULL },
	{ "max_connections", F_INT, ST(service.max_connections), 0, NULL },
	{ "tls_cert_file", F_STRING, ST(service.tls_cert_file), 0, NULL },
	{ "tls_key_file", F_STRING, ST(service.tls_key_file), 0, NULL },
	{ "tls_client_ca_file", F_STRING, ST(service.tls_client_ca_file), 0, NULL },
	{ "policy_file", F_STRING, ST(service.policy_file), 0, NULL },
	{ "reaper_address", F_STRING, ST(service.reaper_address), 0, NULL },
	{ "reaper_credential_file", F_STRING, ST(service.reaper_credential_file), 0, NULL },
	{ "bridge_address", F_STRING, ST(service.bridge_address), 0, NULL },
	{ "reaper_tls_ca_file", F_STRING, ST(service.reaper_tls_ca_file), 0, NULL },
	{ "reaper_interval_seconds", F_INT, ST(service.reaper_interval_seconds), 0, NULL },
	{ "reaper_destroy_alert_after", F_INT, ST(service.reaper_destroy_alert_after), 0, NULL },
	{ "pool", F_MAP, 0, 0, &pool_schema },
};
static const schema service_schema = { "service.", service_fields, ARRAY_SIZE(service_fields), -1,
	                               -1 };

static const field worker_fields[] = {
	{ "listen", F_STRING, ST(worker.listen), 0, NULL },
	{ "tls_cert_file", F_STRING, ST(worker.tls_cert_file), 0, NULL },
	{ "tls_key_file", F_STRING, ST(worker.tls_key_file), 0, NULL },
	{ "state_dir", F_STRING, ST(worker.state_dir), 0, NULL },
	{ "database", F_STRING, ST(worker.database), 0, NULL },
	{ "database_connection_file", F_STRING, ST(worker.database_connection_file), 0, NULL },
	{ "auth_mode", F_AUTH, ST(worker.auth_mode), 0, NULL },
	{ "tokens_file", F_STRING, ST(worker.tokens_file), 0, NULL },
	{ "metrics_listen", F_STRING, ST(worker.metrics_listen), 0, NULL },
	{ "service_address", F_STRING, ST(worker.service_address), 0, NULL },
	{ "service_credential_file", F_STRING, ST(worker.service_credential_file), 0, NULL },
	{ "service_tls_ca_file", F_STRING, ST(worker.service_tls_ca_file), 0, NULL },
	{ "service_tls_cert_file", F_STRING, ST(worker.service_tls_cert_file), 0, NULL },
	{ "service_tls_key_file", F_STRING, ST(worker.service_tls_key_file), 0, NULL },
	{ "reaper_credential_file", F_STRING, ST(worker.reaper_credential_file), 0, NULL },
	{ "policy_file", F_STRING, ST(worker.policy_file), 0, NULL },
	{ "tenant_max_sandboxes", F_INT, ST(worker.tenant_max_sandboxes), 0, NULL },
	{ "bridge_listen", F_STRING, ST(worker.bridge_listen), 0, NULL },
	{ "bridge_upstream", F_STRING, ST(worker.bridge_upstream), 0, NULL },
	{ "artifacts_dir", F_STRING, ST(worker.artifacts_dir), 0, NULL },
	{ "artifact_size_max", F_INT, ST(worker.artifact_size_max), 0, NULL },
	{ "artifact_tenant_bytes_max", F_INT, ST(worker.artifact_tenant_bytes_max), 0, NULL },
	{ "artifact_retention_days", F_INT, ST(worker.artifact_retention_days), 0, NULL },
	{ "artifact_upload_unclaimed_hours", F_INT, ST(worker.artifact_upload_unclaimed_hours), 0, NULL },
	{ "artifact_sweep_interval_seconds", F_INT, ST(worker.artifact_sweep_interval_seconds), 0, NULL },
};
static const schema worker_schema = { "worker.", worker_fields, ARRAY_SIZE(worker_fields), -1, -1 };

static const field root_fields[] = {
	{ "deployment_mode", F_DEPLOYMENT, ST(deployment_mode), 0, NULL },
	{ "auth_mode", F_AUTH, ST(auth_mode), 0, NULL },
	{ "sandbox", F_MAP, 0, 0, &sandbox_schema },
	{ "limits", F_MAP, 0, 0, &limits_schema },
	{ "environment", F_MAP, 0, 0, &environment_schema },
	{ "service", F_MAP, 0, 0, &service_schema },
	{ "worker", F_MAP, 0, 0, &worker_schema },
};
const schema settings_root_schema = { "", root_fields, ARRAY_SIZE(root_fields), -1, -1 };
#undef ST

/* parse_mapping tracks each key's first line in a MAX_FIELDS array. */
_Static_assert(ARRAY_SIZE(root_fields) <= MAX_FIELDS, "root schema too large");
_Static_assert(ARRAY_SIZE(sandbox_fields) <= MAX_FIELDS, "sandbox schema too large");
_Static_assert(ARRAY_SIZE(limits_fields) <= MAX_FIELDS, "limits schema too large");
_Static_assert(ARRAY_SIZE(settings_limit_fields) <= MAX_FIELDS, "limit table schema too large");
_Static_assert(ARRAY_SIZE(environment_fields) <= MAX_FIELDS, "environment schema too large");
_Static_assert(ARRAY_SIZE(service_fields) <= MAX_FIELDS, "service schema too large");
_Static_assert(ARRAY_SIZE(worker_fields) <= MAX_FIELDS, "worker schema too large");

/*
 * Convert one scalar for a field and store it at base. `where` names the
 * value for messages ("settings.yaml:4: sandbox.mechanism" or
 * "AIRLOCK_SANDBOX_MECHANISM"). `plain` is false for a quoted YAML scalar:
 * numbers must be written as numbers. On failure base is unchanged.
 */
int settings_scalar_store(const field *f, void *base, const char *v, size_t len, bool plain,
                        const char *where, airlock_error *err)
{
	char q[QUOTE_MAX], names[128];
	char *slot = (char *)base + f->off;

	if (len > AIRLOCK_SETTINGS_STRING_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: value longer than %d bytes",
		                         where, AIRLOCK_SETTINGS_STRING_MAX);
	if (strnlen(v, len) != len)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: value contains a NUL byte",
		                         where);

	switch (f->kind) {
	case F_STRING:
	case F_AUTH: {
		if (len == 0)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: must not be empty", where);
		if (f->kind == F_AUTH && !auth_mode_valid(v, len))
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "%s: invalid value \"%s\" (expected a word such as dev, token or oidc)",
			                         where, quote(q, sizeof(q), v, len));
		char *copy = strndup(v, len);
		if (!copy)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", where);
		char **p = (char **)(void *)slot;
		free(*p);
		*p = copy;
		return 0;
	}
	case F_DEPLOYMENT: {
		airlock_deployment_mode m = airlock_deployment_mode_parse(v);
		if (m == AIRLOCK_DEPLOYMENT_INVALID) {
			list_names(names, sizeof(names), deployment_names, 1, ARRAY_SIZE(deployment_names));
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "%s: unknown value \"%s\" (expected one of %s)", where,
			                         quote(q, sizeof(q), v, len), names);
		}
		memcpy(slot, &m, sizeof(m));
		return 0;
	}
	case F_MECHANISM: {
		airlock_mechanism m = airlock_mechanism_parse(v);
		if (m == AIRLOCK_MECHANISM_INVALID) {
			list_names(names, sizeof(names), mechanism_names, 1, ARRAY_SIZE(mechanism_names));
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "%s: unknown value \"%s\" (expected one of %s)", where,
			                         quote(q, sizeof(q), v, len), names);
		}
		memcpy(slot, &m, sizeof(m));
		return 0;
	}
	case F_PLATFORM: {
		airlock_gvisor_platform pl = airlock_gvisor_platform_parse(v);
		if (pl == AIRLOCK_GVISOR_PLATFORM__MAX) {
			list_names(names, sizeof(names), platform_names, 0, ARRAY_SIZE(platform_names));
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "%s: unknown value \"%s\" (expected one of %s)", where,
			                         quote(q, sizeof(q), v, len), names);
		}
		memcpy(slot, &pl, sizeof(pl));
		return 0;
	}
	case F_INT:
	case F_BYTES: {
		int64_t n;
		bool ok = plain && (f->kind == F_INT ? parse_u63(v, len, &n) : parse_bytes_value(v, len, &n));
		if (!ok)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "%s: invalid value \"%s\" (expected %s)", where,
			                         quote(q, sizeof(q), v, len),
			                         f->kind == F_INT ?
			                                 "a non-negative decimal integer" :
			                                 "a non-negative integer, optionally with a K, M or G suffix");
		memcpy(slot, &n, sizeof(n));
		return 0;
	}
	case F_MAP:
	case F_NAMES:
		break;
	}
	return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: expected a %s", where,
	                         f->kind == F_MAP ? "mapping" : "list");
}

/* ---- the defaults, and the settings freed ------------------------------------ */

int airlock_settings_default(airlock_settings *ret, airlock_error *err)
{
	airlock_settings s = { 0 };
	int r = settings_apply_yaml(&s, "embedded defaults", settings_defaults_yaml,
	                            sizeof(settings_defaults_yaml) - 1, err);
	if (r < 0) {
		airlock_settings_clear(&s);
		return r;
	}
	*ret = s;
	return 0;
}

void airlock_settings_clear(airlock_settings *s)
{
	if (!s)
		return;
	free(s->auth_mode);
	free(s->image);
	free(s->image_store);
	names_free(s->passthrough, s->n_passthrough);
	free(s->passthrough_file);
	free(s->tier1_error);
	free(s->service.listen);
	free(s->service.socket_group);
	free(s->service.credential_file);
	free(s->service.metrics_listen);
	free(s->service.tls_cert_file);
	free(s->service.tls_key_file);
	free(s->service.tls_client_ca_file);
	free(s->service.policy_file);
	free(s->service.reaper_address);
	free(s->service.reaper_credential_file);
	free(s->service.reaper_tls_ca_file);
	free(s->service.bridge_address);
	airlock_worker_settings *w = &s->worker;
	char **worker_strings[] = { &w->listen, &w->tls_cert_file, &w->tls_key_file, &w->state_dir,
		                    &w->database, &w->database_connection_file, &w->auth_mode,
		                    &w->tokens_file, &w->metrics_listen, &w->service_address,
		                    &w->service_credential_file, &w->service_tls_ca_file,
		                    &w->service_tls_cert_file, &w->service_tls_key_file,
		                    &w->reaper_credential_file, &w->policy_file, &w->bridge_listen,
		                    &w->bridge_upstream, &w->artifacts_dir };
	for (size_t i = 0; i < ARRAY_SIZE(worker_strings); i++)
		free(*worker_strings[i]);
	*s = (airlock_settings){ 0 };
}
