/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_WORKER_DAEMON_H
#define AIRLOCK_WORKER_DAEMON_H

/*
 * The worker daemon's state, shared by its API (api.c: routes, handlers,
 * the log lines, the metrics' text) and its start and stop (serve.c).
 */

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "airlock/egress.h"
#include "airlock/port/exec.h"
#include "airlock/remote.h"

#include "http/http.h"
#include "worker/artifacts.h"
#include "worker/db.h"
#include "worker/worker.h"

/* Tool calls by outcome (metrics and the log). */
typedef enum worker_tool_outcome {
	WORKER_TOOL_OK = 0,       /* a result, whatever the command's exit */
	WORKER_TOOL_VALIDATION,   /* ToolValidationError, WorkspaceEscape */
	WORKER_TOOL_REFUSED,      /* the lease, another call running, the tenant */
	WORKER_TOOL_UNAVAILABLE,  /* the service or the database: retriable */
	WORKER_TOOL_FAILED,       /* any other error */
	WORKER_TOOL_OUTCOME__MAX
} worker_tool_outcome;
const char *worker_tool_outcome_name(worker_tool_outcome o);

/* Artifact puts (uploads) by outcome (metrics). */
typedef enum worker_put_outcome {
	WORKER_PUT_CREATED = 0, /* committed: 201 */
	WORKER_PUT_INTEGRITY,   /* the digest differed from the client's: 422 */
	WORKER_PUT_TOO_LARGE,   /* past worker.artifact_size_max: 413 */
	WORKER_PUT_REFUSED,     /* a bad request, the tenant's cap: 4xx */
	WORKER_PUT_ABORTED,     /* the client went away mid-body */
	WORKER_PUT_FAILED,      /* the store or the database: 503 */
	WORKER_PUT_OUTCOME__MAX
} worker_put_outcome;
const char *worker_put_outcome_name(worker_put_outcome o);

/* The provision latency histogram's upper bounds, in ms (then +Inf). */
#define WORKER_PROVISION_BUCKETS 8
extern const int64_t worker_provision_bucket_ms[WORKER_PROVISION_BUCKETS];

/* Counters, each only ever incremented (Prometheus counters). */
typedef struct worker_counters {
	atomic_uint_fast64_t claims[WORKER_DB_CLAIM__MAX];     /* by outcome */
	atomic_uint_fast64_t refusals[WORKER_DB_LEASE__MAX];   /* refused claims, by reason */
	atomic_uint_fast64_t releases;                         /* releases that ended a claim */
	/* Leases a call found expired: the database keeps no event when a TTL
	 * passes, so an expiry is counted when a claim or a release finds it;
	 * one nobody names again is never counted. */
	atomic_uint_fast64_t expiries_seen;
	atomic_uint_fast64_t auth_failures;                    /* 401s */
	atomic_uint_fast64_t errors;                           /* 5xx answers */
	atomic_uint_fast64_t tool_calls[WORKER_TOOL_OUTCOME__MAX]; /* sandbox.run_command */
	atomic_uint_fast64_t provisions;                       /* sandboxes provisioned */
	atomic_uint_fast64_t provision_ms_sum;
	atomic_uint_fast64_t provision_buckets[WORKER_PROVISION_BUCKETS]; /* cumulative counts */
	atomic_uint_fast64_t destroys;                         /* sandboxes destroyed (any path) */
	atomic_uint_fast64_t destroy_failures;
	atomic_uint_fast64_t reaper_questions;                 /* reaper requests answered */
	atomic_uint_fast64_t reaper_stale;                     /* ids answered stale */
	atomic_uint_fast64_t bridge_accepted;                  /* bridge connections relayed */
	atomic_uint_fast64_t bridge_refused;                   /* bridge connections closed unrelayed */
	atomic_uint_fast64_t artifact_puts[WORKER_PUT_OUTCOME__MAX]; /* uploads, by outcome */
	atomic_uint_fast64_t artifact_bytes_in;                /* upload bytes taken into the store */
	atomic_uint_fast64_t artifact_bytes_out;               /* download bytes sent */
	atomic_uint_fast64_t artifact_deletes;                 /* DELETEs that removed one */
} worker_counters;

/* A run this worker has a tool call or a sandbox for (sandboxes.c). */
typedef struct worker_claim worker_claim;
/* The bridge's listener and its connections (bridge.c). */
typedef struct worker_bridge worker_bridge;

typedef struct worker_daemon {
	worker_db *db;
	worker_tokens *tokens; /* NULL: auth_mode dev (one tenant, "dev", no token) */
	worker_counters c;
	airlock_settings *settings; /* the caller's; its mechanism is the service's once open */
	/* The reaper's bearer token (worker.reaper_credential_file); NULL: the
	 * reaper's route is 404. */
	unsigned char *reaper_token;
	size_t reaper_token_len;
	/* The operator's egress policy (worker.policy_file): mode deny without one. */
	airlock_egress_policy policy;

	/* The execution service, opened at the first call that needs it
	 * (worker_service): a service that is down when the worker starts
	 * only makes those calls ExecutionUnavailable. */
	pthread_mutex_t service_lock;
	airlock_exec *exec;
	airlock_remote *remote; /* exec's adapter */

	/* The runs with a tool call or a sandbox here, under claims_lock. */
	pthread_mutex_t claims_lock;
	worker_claim **claims;
	size_t n_claims;
	size_t reconcile_next; /* where the sweeper's next look at held sandboxes starts */

	/* The sweeper (sandboxes.c): destroys the sandboxes of claims that
	 * ended without a call saying so (a lease not renewed). */
	pthread_t sweeper;
	bool sweeper_started;
	int stop_fd; /* eventfd, readable once the worker stops */

	worker_bridge *bridge; /* NULL: no worker.bridge_listen */

	/* The artifact store and its rows (artifacts.h), with its retention
	 * sweeper's thread. */
	worker_artifacts *artifacts;
} worker_daemon;

/* The tenant auth_mode dev admits every request as. */
#define WORKER_DEV_TENANT "dev"

/* The API's routes (api.c), and the metrics' text (an http_metrics_render_fn
 * over a worker_daemon). */
extern const http_routes worker_api_routes;
char *worker_metrics_render(void *ctx, size_t *ret_len);

/* One JSON line on stderr: {"ts", "level", "event", ...fields}; every
 * string escaped by jansson. fields is a jansson object, taken (NULL: no
 * fields). */
struct json_t;
void worker_log(const char *level, const char *event, struct json_t *fields);

/* ---- artifacts (api_artifacts.c, docs/worker-api.md "Artifacts") ---------------- */

/* An artifact request's state, owned by the API's request state. */
typedef struct worker_artifact_request worker_artifact_request;
/* routes->start for an artifact verb (after authentication and the
 * route): decodes the query, checks the tenant, and for an upload begins
 * the put and gives the request its body sink. Answers a refusal itself
 * (the result is then the answer's); else HTTP_NEXT with *ret set. */
http_result worker_artifact_start(worker_daemon *w, http_request *r, worker_verb verb,
                                  const char *token_tenant, const char *run_id,
                                  const char *artifact_id, const char *query, size_t query_len,
                                  worker_artifact_request **ret);
http_result worker_artifact_handle(worker_daemon *w, http_request *r, worker_artifact_request *q);
/* NULL is a no-op; an upload not finished is abandoned (nothing kept). */
void worker_artifact_request_free(worker_artifact_request *q);

/* ---- sandboxes (sandboxes.c) ---------------------------------------------- */

/* The sandboxes of ended claims the database hands back (a fence, a
 * release, the sweeper, a start after a stop): each is destroyed (through
 * this worker's core when it is one of its own, else by the handle its
 * record holds) and then its record cleared; a failed destroy keeps the
 * record for the next try and fails the call. */
int worker_end_sandboxes(worker_daemon *w, const worker_db_sandbox *list, size_t n,
                         const char *why, airlock_error *err);
/* The execution service, opened once (airlock_remote_open_adapter with
 * worker.service_*); ExecutionUnavailable while it cannot be. */
int worker_service(worker_daemon *w, airlock_error *err);
/* Start and stop the sweeper; stop also destroys every sandbox this
 * worker holds (its own shutdown ends its claims) after the commands in
 * flight were ended. */
int worker_sandboxes_start(worker_daemon *w, airlock_error *err);
void worker_sandboxes_stop(worker_daemon *w);
void worker_sandboxes_free(worker_daemon *w);

/* sandbox.run_command for run_id under a request whose token names
 * token_tenant ("*": every tenant): the body decoded and validated, the
 * lease checked, the claim's sandbox provisioned at its first call and
 * reused after, the command run (cancelled when the client's socket,
 * peer_fd, goes away; -1: not watched). 0 with *ret_json (the result object's
 * text); else err and *ret_status (the HTTP status: 400, 403, 404, 409,
 * 503, 500). *ret_outcome either way. */
int worker_run_command(worker_daemon *w, const char *run_id, const char *token_tenant,
                       const char *body, size_t len, int peer_fd, char **ret_json,
                       unsigned *ret_status, worker_tool_outcome *ret_outcome, airlock_error *err);
/* POST /v1/runs/{run_id}/tools/artifact.export (worker-api.md): a
 * workspace path streamed from the service into the store with the two
 * digests compared (SANDBOX_EXPORT), or text the model wrote
 * (MODEL_OUTPUT); *ret_json is the ArtifactRef. Same lease and tenant
 * rules as run_command; it never provisions a sandbox. */
int worker_artifact_export(worker_daemon *w, const char *run_id, const char *token_tenant,
                           const char *body, size_t len, char **ret_json, unsigned *ret_status,
                           worker_tool_outcome *ret_outcome, airlock_error *err);

/* ---- the orchestration bridge (bridge.c, docs/bridge.md) ------------------------ */

/* A sandbox's one-time bridge token: 32 bytes of getrandom in base64url
 * without padding. */
#define WORKER_BRIDGE_TOKEN_LEN 43
/* A new token and its SHA-256 (lowercase hex), the one the database
 * keeps. The caller wipes the token once it is in the spec. */
int worker_bridge_token_new(char ret_token[WORKER_BRIDGE_TOKEN_LEN + 1], char ret_sha256[65],
                            airlock_error *err);
/* The listener on worker.bridge_listen (nothing when it is not set) and
 * its threads; stop closes it, ends every connection (its relay too) and
 * joins every thread before it returns. Start leaves what it made for
 * stop on failure. */
int worker_bridge_start(worker_daemon *w, airlock_error *err);
void worker_bridge_stop(worker_daemon *w);

#endif
