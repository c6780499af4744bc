/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_SETTINGS_H
#define AIRLOCK_SETTINGS_H

/*
 * Settings: a YAML file (libyaml) with environment overrides, and the startup
 * checks (the specification, "Development, production, and the refusal in
 * between"; "Resource limits, as numbers").
 *
 * File shape (every key optional; unknown keys are an error naming the line):
 *
 *   deployment_mode: development      # development | production
 *   auth_mode: dev                    # dev | anything else (token, oidc, ...)
 *   sandbox:
 *     mechanism: native               # fake | native | gvisor | microvm | docker
 *     image: sha256:<64 hex>          # a digest; a tag is refused
 *     hard_cap_seconds: 1800
 *     image_store: /var/lib/airlock/images
 *     gvisor_platform: auto           # auto | ptrace | kvm (the gvisor mechanism)
 *   limits:
 *     defaults:  { cpu_millicores: 2000, memory_bytes: 2G, pids_max: 512,
 *                  workspace_bytes: 4G, inodes_max: 100000,
 *                  wall_clock_seconds: 300, files_changed_max: 1000,
 *                  start_budget_seconds: 30 }
 *     ceilings:  { same keys; pids_max 4096, inodes_max 1000000,
 *                  wall_clock_seconds 1800, files_changed_max 10000,
 *                  start_budget_seconds 60; the others "operator" (unset) }
 *   environment:
 *     passthrough: [LANG_EXTRA, HTTP_PROXY]   # tier-1 names
 *     passthrough_file: /etc/airlock/tier1    # or: one name per line
 *   service:                          # airlock serve (docs/service.md)
 *     listen: unix:/run/airlock/airlock.sock  # or HOST:PORT (TLS required)
 *     socket_group: airlock           # the Unix socket's group (a name or a gid)
 *     credential_file: /etc/airlock/service.token   # the bearer token, 0600
 *     metrics_listen: 127.0.0.1:9464  # the operator's metrics listener
 *     max_sandboxes: 64               # past it, provision is ExecutionUnavailable
 *     max_connections: 256
 *     tls_cert_file: /etc/airlock/tls/server.pem    # TCP: both required
 *     tls_key_file: /etc/airlock/tls/server.key
 *     tls_client_ca_file: /etc/airlock/tls/clients.pem  # client certificates
 *     policy_file: /etc/airlock/egress.yaml          # the operator's egress policy
 *     reaper_address: unix:/run/airlock/worker.sock  # the worker tier's reaper endpoint
 *     reaper_credential_file: /etc/airlock/reaper.token  # its bearer token, 0600
 *     reaper_tls_ca_file: /etc/airlock/tls/ca.pem     # a TCP reaper address
 *     reaper_interval_seconds: 60     # one pass per interval
 *     reaper_destroy_alert_after: 3   # failed destroys of one sandbox before an alert
 *     bridge_address: unix:/run/airlock/bridge.sock  # the worker tier's bridge listener
 *     pool:                           # the warm pool (docs/service.md)
 *       size: 8                       # pooled sandboxes at most; 0 (the default): no pool
 *       per_key: 2                    # kept warm per pool key
 *       max_idle_seconds: 600         # a pooled sandbox's life unclaimed
 *   worker:                           # airlock-worker (docs/worker-api.md)
 *     listen: unix:/run/airlock/worker.sock  # or HOST:PORT (TLS required)
 *     tls_cert_file: /etc/airlock/tls/worker.pem    # TCP: both required
 *     tls_key_file: /etc/airlock/tls/worker.key
 *     state_dir: /var/lib/airlock/worker   # sqlite: its worker.db is here
 *     database: sqlite                # sqlite | postgresql
 *     database_connection_file: /etc/airlock/worker-db.conn  # postgresql: 0600
 *     auth_mode: tokens               # dev | tokens; no default (dev is refused in production)
 *     tokens_file: /etc/airlock/worker.tokens  # tokens: "TOKEN TENANT|*" lines, 0600
 *     metrics_listen: 127.0.0.1:9465  # the operator's metrics listener
 *     service_address: unix:/run/airlock/airlock.sock  # the execution service
 *     service_credential_file: /etc/airlock/service.token
 *     service_tls_ca_file: /etc/airlock/tls/ca.pem  # a TCP service address
 *     service_tls_cert_file: /etc/airlock/tls/worker-client.pem
 *     service_tls_key_file: /etc/airlock/tls/worker-client.key
 *     reaper_credential_file: /etc/airlock/reaper.token  # the reaper's token, 0600
 *     policy_file: /etc/airlock/egress.yaml   # the operator's allowlist for its sandboxes
 *     tenant_max_sandboxes: 16        # one tenant's sandboxes in this worker (0: max_sandboxes / 4)
 *     bridge_listen: unix:/run/airlock/bridge.sock  # the bridge's listener (the service relays to it)
 *     bridge_upstream: unix:/run/platform/orchestration.sock  # the platform's orchestration endpoint
 *     artifacts_dir: /var/lib/airlock/worker/artifacts  # the artifact store, 0700 (default: state_dir/artifacts)
 *     artifact_size_max: 536870912    # one artifact's bytes (0: 512 MiB)
 *     artifact_tenant_bytes_max: 10737418240  # a tenant's bytes in all its artifacts (0: 10 GiB)
 *     artifact_retention_days: 30     # expires_at = created_at + this (0: 30)
 *     artifact_upload_unclaimed_hours: 24  # an upload no run claimed (0: 24)
 *     artifact_sweep_interval_seconds: 600  # the retention sweeper's pass (0: 600)
 *
 * Environment overrides (applied after the file, same validation):
 *   AIRLOCK_DEPLOYMENT_MODE, AIRLOCK_AUTH_MODE, AIRLOCK_SANDBOX_MECHANISM,
 *   AIRLOCK_SANDBOX_IMAGE, AIRLOCK_HARD_CAP_SECONDS, AIRLOCK_IMAGE_STORE,
 *   AIRLOCK_SERVICE_LISTEN, AIRLOCK_SERVICE_SOCKET_GROUP,
 *   AIRLOCK_SERVICE_CREDENTIAL_FILE, AIRLOCK_SERVICE_METRICS_LISTEN,
 *   AIRLOCK_SERVICE_MAX_SANDBOXES, AIRLOCK_SERVICE_MAX_CONNECTIONS,
 *   AIRLOCK_SERVICE_TLS_CERT_FILE, AIRLOCK_SERVICE_TLS_KEY_FILE,
 *   AIRLOCK_SERVICE_TLS_CLIENT_CA_FILE, AIRLOCK_SERVICE_POLICY_FILE, and
 *   AIRLOCK_WORKER_<KEY> for every key of worker: (AIRLOCK_WORKER_LISTEN,
 *   AIRLOCK_WORKER_AUTH_MODE, AIRLOCK_WORKER_SERVICE_ADDRESS, ...).
 *
 * Byte values accept an integer or an integer with a K, M or G suffix
 * (powers of 1024).
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "airlock/error.h"
#include "airlock/tiers.h"
#include "airlock/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum airlock_mechanism {
	AIRLOCK_MECHANISM_INVALID = 0,
	AIRLOCK_MECHANISM_FAKE,
	AIRLOCK_MECHANISM_NATIVE,
	AIRLOCK_MECHANISM_GVISOR,
	AIRLOCK_MECHANISM_MICROVM,
	AIRLOCK_MECHANISM_DOCKER,
	AIRLOCK_MECHANISM__MAX
} airlock_mechanism;
const char *airlock_mechanism_name(airlock_mechanism m);
airlock_mechanism airlock_mechanism_parse(const char *s);
/* The kernel-isolating set production allows: {microvm, gvisor}. Every other
 * value, including one added later, is refused by the complement check. */
bool airlock_mechanism_production_allowed(airlock_mechanism m);

/* sandbox.gvisor_platform: how the gvisor mechanism's runtime traps the
 * sandbox's system calls (runsc --platform). */
typedef enum airlock_gvisor_platform {
	AIRLOCK_GVISOR_PLATFORM_AUTO = 0, /* kvm where it works, else ptrace */
	AIRLOCK_GVISOR_PLATFORM_PTRACE,
	AIRLOCK_GVISOR_PLATFORM_KVM,
	AIRLOCK_GVISOR_PLATFORM__MAX
} airlock_gvisor_platform;
const char *airlock_gvisor_platform_name(airlock_gvisor_platform p);
/* AIRLOCK_GVISOR_PLATFORM__MAX when s names none. */
airlock_gvisor_platform airlock_gvisor_platform_parse(const char *s);

typedef enum airlock_deployment_mode {
	AIRLOCK_DEPLOYMENT_INVALID = 0,
	AIRLOCK_DEPLOYMENT_DEVELOPMENT,
	AIRLOCK_DEPLOYMENT_PRODUCTION,
	AIRLOCK_DEPLOYMENT__MAX
} airlock_deployment_mode;
const char *airlock_deployment_mode_name(airlock_deployment_mode m);
airlock_deployment_mode airlock_deployment_mode_parse(const char *s);

/* A limit with no operator ceiling has ceiling 0 ("operator": unset). */
typedef struct airlock_limit_table {
	airlock_resource_limits limits;
	int64_t files_changed_max;
	int64_t start_budget_seconds;
} airlock_limit_table;

/* service.pool: the warm pool (docs/service.md, "The warm pool"). */
typedef struct airlock_service_pool_settings {
	int64_t size;             /* pooled sandboxes at most, all keys; 0: no pool */
	int64_t per_key;          /* 1..size: kept warm per pool key */
	int64_t max_idle_seconds; /* 1..AIRLOCK_POOL_IDLE_MAX: a pooled sandbox's life unclaimed */
} airlock_service_pool_settings;

#define AIRLOCK_POOL_IDLE_MAX 86400
#define AIRLOCK_POOL_PER_KEY_MAX 64

/* The service: section (airlock serve). Strings are NULL when unset. */
typedef struct airlock_service_settings {
	char *listen;             /* "unix:/abs/path" or "HOST:PORT" */
	char *socket_group;
	char *credential_file;
	char *metrics_listen;
	int64_t max_sandboxes;    /* > 0 */
	int64_t max_connections;  /* > 0, at most AIRLOCK_SERVICE_CONNECTIONS_MAX */
	char *tls_cert_file;
	char *tls_key_file;
	char *tls_client_ca_file;
	char *policy_file;
	/* The reaper (docs/reaper.md): off while reaper_address is unset. */
	char *reaper_address;             /* "unix:/abs/path" or "HOST:PORT" (https) */
	char *reaper_credential_file;     /* required with reaper_address */
	char *reaper_tls_ca_file;         /* TCP: the CA the worker tier's certificate chains to */
	int64_t reaper_interval_seconds;  /* 1..AIRLOCK_REAPER_INTERVAL_MAX; 60 */
	int64_t reaper_destroy_alert_after; /* 1..AIRLOCK_REAPER_ALERT_AFTER_MAX; 3 */
	/* The orchestration bridge (docs/bridge.md): the worker tier's bridge
	 * listener, "unix:/abs/path" only (the stream carries the one-time
	 * token). NULL: a spec with a bridge is refused at provision. */
	char *bridge_address;
	airlock_service_pool_settings pool;
} airlock_service_settings;

#define AIRLOCK_REAPER_INTERVAL_MAX 86400
#define AIRLOCK_REAPER_ALERT_AFTER_MAX 1000

/* The most connections a service may be configured for: each is a thread
 * while it lasts. */
#define AIRLOCK_SERVICE_CONNECTIONS_MAX 4096

/* The worker: section (airlock-worker). Strings are NULL when unset. The
 * PostgreSQL connection string is a credential: the settings name the
 * file that holds it, never the string. */
typedef struct airlock_worker_settings {
	char *listen;                   /* "unix:/abs/path" or "HOST:PORT" */
	char *tls_cert_file;
	char *tls_key_file;
	char *state_dir;                /* absolute */
	char *database;                 /* "sqlite" or "postgresql" */
	char *database_connection_file; /* postgresql only */
	char *auth_mode;                /* "dev" or "tokens"; NULL: the worker refuses to start */
	char *tokens_file;              /* tokens only */
	char *metrics_listen;
	char *service_address;
	char *service_credential_file;
	char *service_tls_ca_file;
	char *service_tls_cert_file;
	char *service_tls_key_file;
	/* The token the execution service's reaper presents (0600 file); it
	 * authorizes the reaper's question and nothing else. NULL: the
	 * reaper's route answers 404. */
	char *reaper_credential_file;
	/* The operator's egress policy for the sandboxes this worker asks for
	 * (the operator's yes; a call's network_enabled is the other). NULL:
	 * every sandbox is denied the network. */
	char *policy_file;
	/* Runs of one tenant with a sandbox (or a call provisioning one) in
	 * this worker at once; past it the tenant's next first call is
	 * ExecutionUnavailable. 0: a quarter of service.max_sandboxes, at
	 * least 1, so one tenant cannot take every sandbox of the service. */
	int64_t tenant_max_sandboxes;
	/* The orchestration bridge (docs/bridge.md), both "unix:/abs/path"
	 * only: the listener the execution service relays a sandbox's bridge
	 * connections to, and the platform's orchestration endpoint the
	 * worker forwards an authenticated one to. A claim asks for a bridge
	 * only where both are set. */
	char *bridge_listen;
	char *bridge_upstream;
	/* Artifacts (docs/artifacts.md). The store's directory: absolute, mode
	 * 0700, this user's, in no source tree; NULL: state_dir/artifacts,
	 * made 0700 at start when missing. The rest 0 for the default in
	 * parentheses: one artifact's bytes (512 MiB), one tenant's bytes in
	 * all its artifacts (10 GiB), an artifact's retention (30 days), an
	 * unclaimed upload's life (24 hours), the retention sweeper's
	 * interval (600 s). */
	char *artifacts_dir;
	int64_t artifact_size_max;
	int64_t artifact_tenant_bytes_max;
	int64_t artifact_retention_days;
	int64_t artifact_upload_unclaimed_hours;
	int64_t artifact_sweep_interval_seconds;
} airlock_worker_settings;

typedef struct airlock_settings {
	airlock_deployment_mode deployment_mode;
	char *auth_mode;
	airlock_mechanism mechanism;
	char *image; /* "sha256:..." or NULL when none is configured */
	int64_t hard_cap_seconds;
	char *image_store;
	airlock_gvisor_platform gvisor_platform; /* sandbox.gvisor_platform (auto) */
	airlock_limit_table defaults;
	airlock_limit_table ceilings;
	/* tier 1 */
	char **passthrough;
	size_t n_passthrough;
	char *passthrough_file;
	/* Set when the tier-1 list could not be read or parsed: the environment
	 * is then tier 2 alone (fail closed) and this message is logged. */
	char *tier1_error;
	airlock_service_settings service;
	airlock_worker_settings worker;
} airlock_settings;

/* The embedded defaults (development, dev, native, the table's numbers). */
int airlock_settings_default(airlock_settings *ret, airlock_error *err);

/* Parse a YAML document over the embedded defaults. name is used in error
 * messages ("settings.yaml:12: ..."). */
int airlock_settings_parse(const char *name, const char *buf, size_t len, airlock_settings *ret,
                           airlock_error *err);
int airlock_settings_load(const char *path, airlock_settings *ret, airlock_error *err);

/* Apply AIRLOCK_* overrides from envp (a NULL-terminated "NAME=value" list). */
int airlock_settings_apply_env(airlock_settings *s, char *const *envp, airlock_error *err);
/* True for a name airlock_settings_apply_env reads (AIRLOCK_SERVICE_LISTEN,
 * ...): a setting, not a credential, in the service's own environment
 * (airlock serve refuses every other tier-0 name there). */
bool airlock_settings_env_name(const char *name);

/* Read passthrough_file into the tier-1 list. Failure does not fail: it sets
 * tier1_error and empties the list (fail closed). */
void airlock_settings_load_tier1(airlock_settings *s);

/*
 * The startup checks. Each failure is AIRLOCK_ERR_CONFIG and the message
 * names the settings involved and their values:
 *   - deployment_mode == production requires a mechanism in {microvm, gvisor};
 *   - auth_mode != dev requires a mechanism in {microvm, gvisor};
 *   - the image, when set, is a sha256 digest (a tag is refused, and why);
 *   - every default is positive and under its ceiling where one is set;
 *   - no tier-1 name is a tier-0 name;
 *   - service: the listen address is unix:/absolute or HOST:PORT, TCP has
 *     both TLS files, a client CA or one TLS file alone is refused without
 *     the other, max_sandboxes and max_connections are in range;
 *   - worker: its listen and metrics addresses as the service's (TCP needs
 *     both TLS files), state_dir absolute, database sqlite (no connection
 *     file) or postgresql (with one), auth_mode unset (the worker then
 *     refuses to start), dev (no tokens file; refused with deployment_mode
 *     production) or tokens (with one), the service's
 *     address of the same forms, its TLS client files together.
 * A warning is never enough: the caller must not start.
 */
int airlock_settings_check(const airlock_settings *s, airlock_error *err);

/* Human-readable resolved settings (for `airlock config check`). */
void airlock_settings_print(const airlock_settings *s, FILE *out);

void airlock_settings_clear(airlock_settings *s);

/* "2G" -> 2147483648. AIRLOCK_ERR_DECODE naming `what` on a bad value. */
int airlock_parse_bytes(const char *s, const char *what, int64_t *ret, airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
