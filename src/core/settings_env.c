/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The AIRLOCK_* environment overrides of settings: one variable per key
 * they may override, each converted like the key in a file, applied all or
 * none.
 */
#include "airlock/settings.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/settings_schema.h"
#include "util/util.h"

#define ST(m) offsetof(airlock_settings, m)
static const struct env_override {
	const char *var;
	const char *setting; /* the key it overrides, for messages */
	field f;
} env_overrides[] = {
	{ "AIRLOCK_DEPLOYMENT_MODE", "deployment_mode", { "deployment_mode", F_DEPLOYMENT, ST(deployment_mode), 0, NULL } },
	{ "AIRLOCK_AUTH_MODE", "auth_mode", { "auth_mode", F_AUTH, ST(auth_mode), 0, NULL } },
	{ "AIRLOCK_SANDBOX_MECHANISM", "sandbox.mechanism", { "mechanism", F_MECHANISM, ST(mechanism), 0, NULL } },
	{ "AIRLOCK_SANDBOX_IMAGE", "sandbox.image", { "image", F_STRING, ST(image), 0, NULL } },
	{ "AIRLOCK_HARD_CAP_SECONDS", "sandbox.hard_cap_seconds", { "hard_cap_seconds", F_INT, ST(hard_cap_seconds), 0, NULL } },
	{ "AIRLOCK_IMAGE_STORE", "sandbox.image_store", { "image_store", F_STRING, ST(image_store), 0, NULL } },
	{ "AIRLOCK_GVISOR_PLATFORM", "sandbox.gvisor_platform", { "gvisor_platform", F_PLATFORM, ST(gvisor_platform), 0, NULL } },
	{ "AIRLOCK_SERVICE_LISTEN", "service.listen", { "listen", F_STRING, ST(service.listen), 0, NULL } },
	{ "AIRLOCK_SERVICE_SOCKET_GROUP", "service.socket_group", { "socket_group", F_STRING, ST(service.socket_group), 0, NULL } },
	{ "AIRLOCK_SERVICE_CREDENTIAL_FILE", "service.credential_file", { "credential_file", F_STRING, ST(service.credential_file), 0, NULL } },
	{ "AIRLOCK_SERVICE_METRICS_LISTEN", "service.metrics_listen", { "metrics_listen", F_STRING, ST(service.metrics_listen), 0, NULL } },
	{ "AIRLOCK_SERVICE_MAX_SANDBOXES", "service.max_sandboxes", { "max_sandboxes", F_INT, ST(service.max_sandboxes), 0, NULL } },
	{ "AIRLOCK_SERVICE_MAX_CONNECTIONS", "service.max_connections", { "max_connections", F_INT, ST(service.max_connections), 0, NULL } },
	{ "AIRLOCK_SERVICE_TLS_CERT_FILE", "service.tls_cert_file", { "tls_cert_file", F_STRING, ST(service.tls_cert_file), 0, NULL } },
	{ "AIRLOCK_SERVICE_TLS_KEY_FILE", "service.tls_key_file", { "tls_key_file", F_STRING, ST(service.tls_key_file), 0, NULL } },
	{ "AIRLOCK_SERVICE_TLS_CLIENT_CA_FILE", "service.tls_client_ca_file", { "tls_client_ca_file", F_STRING, ST(service.tls_client_ca_file), 0, NULL } },
	{ "AIRLOCK_SERVICE_POLICY_FILE", "service.policy_file", { "policy_file", F_STRING, ST(service.policy_file), 0, NULL } },
	{ "AIRLOCK_SERVICE_REAPER_ADDRESS", "service.reaper_address", { "reaper_address", F_STRING, ST(service.reaper_address), 0, NULL } },
	{ "AIRLOCK_SERVICE_REAPER_CREDENTIAL_FILE", "service.reaper_credential_file", { "reaper_credential_file", F_STRING, ST(service.reaper_credential_file), 0, NULL } },
	{ "AIRLOCK_SERVICE_BRIDGE_ADDRESS", "service.bridge_address", { "bridge_address", F_STRING, ST(service.bridge_address), 0, NULL } },
	{ "AIRLOCK_SERVICE_REAPER_TLS_CA_FILE", "service.reaper_tls_ca_file", { "reaper_tls_ca_file", F_STRING, ST(service.reaper_tls_ca_file), 0, NULL } },
	{ "AIRLOCK_SERVICE_REAPER_INTERVAL_SECONDS", "service.reaper_interval_seconds", { "reaper_interval_seconds", F_INT, ST(service.reaper_interval_seconds), 0, NULL } },
	{ "AIRLOCK_SERVICE_REAPER_DESTROY_ALERT_AFTER", "service.reaper_destroy_alert_after", { "reaper_destroy_alert_after", F_INT, ST(service.reaper_destroy_alert_after), 0, NULL } },
	{ "AIRLOCK_SERVICE_POOL_SIZE", "service.pool.size", { "size", F_INT, ST(service.pool.size), 0, NULL } },
	{ "AIRLOCK_SERVICE_POOL_PER_KEY", "service.pool.per_key", { "per_key", F_INT, ST(service.pool.per_key), 0, NULL } },
	{ "AIRLOCK_SERVICE_POOL_MAX_IDLE_SECONDS", "service.pool.max_idle_seconds", { "max_idle_seconds", F_INT, ST(service.pool.max_idle_seconds), 0, NULL } },
	{ "AIRLOCK_WORKER_LISTEN", "worker.listen", { "listen", F_STRING, ST(worker.listen), 0, NULL } },
	{ "AIRLOCK_WORKER_TLS_CERT_FILE", "worker.tls_cert_file", { "tls_cert_file", F_STRING, ST(worker.tls_cert_file), 0, NULL } },
	{ "AIRLOCK_WORKER_TLS_KEY_FILE", "worker.tls_key_file", { "tls_key_file", F_STRING, ST(worker.tls_key_file), 0, NULL } },
	{ "AIRLOCK_WORKER_STATE_DIR", "worker.state_dir", { "state_dir", F_STRING, ST(worker.state_dir), 0, NULL } },
	{ "AIRLOCK_WORKER_DATABASE", "worker.database", { "database", F_STRING, ST(worker.database), 0, NULL } },
	{ "AIRLOCK_WORKER_DATABASE_CONNECTION_FILE", "worker.database_connection_file", { "database_connection_file", F_STRING, ST(worker.database_connection_file), 0, NULL } },
	{ "AIRLOCK_WORKER_AUTH_MODE", "worker.auth_mode", { "auth_mode", F_AUTH, ST(worker.auth_mode), 0, NULL } },
	{ "AIRLOCK_WORKER_TOKENS_FILE", "worker.tokens_file", { "tokens_file", F_STRING, ST(worker.tokens_file), 0, NULL } },
	{ "AIRLOCK_WORKER_METRICS_LISTEN", "worker.metrics_listen", { "metrics_listen", F_STRING, ST(worker.metrics_listen), 0, NULL } },
	{ "AIRLOCK_WORKER_SERVICE_ADDRESS", "worker.service_address", { "service_address", F_STRING, ST(worker.service_address), 0, NULL } },
	{ "AIRLOCK_WORKER_SERVICE_CREDENTIAL_FILE", "worker.service_credential_file", { "service_credential_file", F_STRING, ST(worker.service_credential_file), 0, NULL } },
	{ "AIRLOCK_WORKER_SERVICE_TLS_CA_FILE", "worker.service_tls_ca_file", { "service_tls_ca_file", F_STRING, ST(worker.service_tls_ca_file), 0, NULL } },
	{ "AIRLOCK_WORKER_SERVICE_TLS_CERT_FILE", "worker.service_tls_cert_file", { "service_tls_cert_file", F_STRING, ST(worker.service_tls_cert_file), 0, NULL } },
	{ "AIRLOCK_WORKER_SERVICE_TLS_KEY_FILE", "worker.service_tls_key_file", { "service_tls_key_file", F_STRING, ST(worker.service_tls_key_file), 0, NULL } },
	{ "AIRLOCK_WORKER_TENANT_MAX_SANDBOXES", "worker.tenant_max_sandboxes", { "tenant_max_sandboxes", F_INT, ST(worker.tenant_max_sandboxes), 0, NULL } },
	{ "AIRLOCK_WORKER_BRIDGE_LISTEN", "worker.bridge_listen", { "bridge_listen", F_STRING, ST(worker.bridge_listen), 0, NULL } },
	{ "AIRLOCK_WORKER_BRIDGE_UPSTREAM", "worker.bridge_upstream", { "bridge_upstream", F_STRING, ST(worker.bridge_upstream), 0, NULL } },
	{ "AIRLOCK_WORKER_ARTIFACTS_DIR", "worker.artifacts_dir", { "artifacts_dir", F_STRING, ST(worker.artifacts_dir), 0, NULL } },
	{ "AIRLOCK_WORKER_ARTIFACT_SIZE_MAX", "worker.artifact_size_max", { "artifact_size_max", F_INT, ST(worker.artifact_size_max), 0, NULL } },
	{ "AIRLOCK_WORKER_ARTIFACT_TENANT_BYTES_MAX", "worker.artifact_tenant_bytes_max", { "artifact_tenant_bytes_max", F_INT, ST(worker.artifact_tenant_bytes_max), 0, NULL } },
	{ "AIRLOCK_WORKER_ARTIFACT_RETENTION_DAYS", "worker.artifact_retention_days", { "artifact_retention_days", F_INT, ST(worker.artifact_retention_days), 0, NULL } },
	{ "AIRLOCK_WORKER_ARTIFACT_UPLOAD_UNCLAIMED_HOURS", "worker.artifact_upload_unclaimed_hours", { "artifact_upload_unclaimed_hours", F_INT, ST(worker.artifact_upload_unclaimed_hours), 0, NULL } },
	{ "AIRLOCK_WORKER_ARTIFACT_SWEEP_INTERVAL_SECONDS", "worker.artifact_sweep_interval_seconds", { "artifact_sweep_interval_seconds", F_INT, ST(worker.artifact_sweep_interval_seconds), 0, NULL } },
	{ "AIRLOCK_WORKER_POLICY_FILE", "worker.policy_file", { "policy_file", F_STRING, ST(worker.policy_file), 0, NULL } },
	{ "AIRLOCK_WORKER_REAPER_CREDENTIAL_FILE", "worker.reaper_credential_file", { "reaper_credential_file", F_STRING, ST(worker.reaper_credential_file), 0, NULL } },
};
#undef ST

bool airlock_settings_env_name(const char *name)
{
	for (size_t k = 0; name && k < ARRAY_SIZE(env_overrides); k++)
		if (strcmp(env_overrides[k].var, name) == 0)
			return true;
	return false;
}

int airlock_settings_apply_env(airlock_settings *s, char *const *envp, airlock_error *err)
{
	if (!s)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "settings: missing");
	if (!envp)
		return 0;

	/* Everything is converted into a scratch struct first and committed only
	 * when every override is valid, so a bad override leaves s as it was. */
	airlock_settings tmp = { 0 };
	bool set[ARRAY_SIZE(env_overrides)] = { false };
	int r = 0;

	for (size_t k = 0; k < ARRAY_SIZE(env_overrides); k++) {
		const struct env_override *o = &env_overrides[k];
		size_t vlen = strlen(o->var);
		/* First occurrence wins, as getenv(3) does. */
		for (char *const *e = envp; *e; e++) {
			if (strncmp(*e, o->var, vlen) != 0 || (*e)[vlen] != '=')
				continue;
			const char *v = *e + vlen + 1;
			char where[128];
			snprintf(where, sizeof(where), "%s (overrides %s)", o->var, o->setting);
			r = settings_scalar_store(&o->f, &tmp, v, strlen(v), true, where, err);
			if (r < 0)
				goto out;
			set[k] = true;
			break;
		}
	}
	for (size_t k = 0; k < ARRAY_SIZE(env_overrides); k++) {
		if (!set[k])
			continue;
		const field *f = &env_overrides[k].f;
		char *dst = (char *)s + f->off, *src = (char *)&tmp + f->off;
		/* A switch naming every kind (-Wswitch-enum): an override of a
		 * new kind cannot be validated and then silently not applied. */
		switch (f->kind) {
		case F_STRING:
		case F_AUTH: {
			char **d = (char **)(void *)dst, **sp = (char **)(void *)src;
			free(*d);
			*d = TAKE_PTR(*sp);
			break;
		}
		case F_INT:
		case F_BYTES:
			memcpy(dst, src, sizeof(int64_t));
			break;
		case F_DEPLOYMENT:
			memcpy(dst, src, sizeof(airlock_deployment_mode));
			break;
		case F_MECHANISM:
			memcpy(dst, src, sizeof(airlock_mechanism));
			break;
		case F_PLATFORM:
			memcpy(dst, src, sizeof(airlock_gvisor_platform));
			break;
		case F_MAP:
		case F_NAMES:
			break; /* no override has these kinds */
		}
	}
out:
	airlock_settings_clear(&tmp);
	return r;
}
