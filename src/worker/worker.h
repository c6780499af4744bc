/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_WORKER_WORKER_H
#define AIRLOCK_WORKER_WORKER_H

/*
 * The worker's daemon (airlock-worker, docs/worker-api.md): its API on the
 * HTTP core, its authentication, its metrics, and what it decodes from a
 * request. The decoders take a client's bytes with their lengths and
 * never unescape anything before it is checked; every buffer they fill
 * has its cap (airlock/caps.h, AIRLOCK_WORKER_*).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "airlock/settings.h"
#include "airlock/tools.h"
#include "airlock/types.h"

/* ---- routes ---------------------------------------------------------------- */

typedef enum worker_verb {
	WORKER_NONE = 0,
	WORKER_HEALTH,        /* GET /v1/health */
	WORKER_LEASE_CLAIM,   /* PUT /v1/runs/{run_id}/lease */
	WORKER_LEASE_RELEASE, /* DELETE /v1/runs/{run_id}/lease?epoch=N */
	WORKER_TOOLS,         /* GET /v1/tools */
	WORKER_RUN_COMMAND,   /* POST /v1/runs/{run_id}/tools/sandbox.run_command */
	WORKER_REAPER_STALE,  /* POST /v1/reaper/stale (the reaper's credential) */
	WORKER_ARTIFACT_EXPORT, /* POST /v1/runs/{run_id}/tools/artifact.export */
	/* The artifact routes (worker_artifact_route). */
	WORKER_ARTIFACT_UPLOAD,  /* POST /v1/artifacts?tenant_id=T&filename=F&media_type=M */
	WORKER_ARTIFACT_LIST,    /* GET /v1/artifacts?run_id=R&after=ID&limit=N&tenant_id=T */
	WORKER_ARTIFACT_GET,     /* GET /v1/artifacts/{id} */
	WORKER_ARTIFACT_CONTENT, /* GET /v1/artifacts/{id}/content */
	WORKER_ARTIFACT_DELETE,  /* DELETE /v1/artifacts/{id} */
	WORKER_ARTIFACT_ATTACH,  /* POST /v1/runs/{run_id}/artifacts/{id}/attach */
	WORKER__MAX
} worker_verb;

/* Decode the raw request target and the method: 0 with *ret_verb and the
 * run id (empty for health) and the query (NULL when none, never
 * unescaped); 404 for a path no route has (a run id outside the core's id
 * rule among them: it names no run), 405 for a route's path with another
 * method. */
int worker_route(const char *target, size_t target_len, const char *method,
                 worker_verb *ret_verb, char ret_run_id[AIRLOCK_ID_MAX + 1],
                 const char **ret_query, size_t *ret_query_len);

/* The lease's body: {"tenant_id", "epoch", "ttl_seconds"}, each
 * required, and "bridge" (true or false, optional: false), no other
 * member; tenant_id by the core's id rule, epoch >= 0, ttl_seconds
 * 1..WORKER_DB_TTL_SECONDS_MAX, integers written as integers.
 * At most AIRLOCK_WORKER_LEASE_BODY_MAX bytes. ToolValidationError-class
 * (DECODE) naming the member otherwise; *ret untouched on failure. */
typedef struct worker_lease_request {
	char tenant_id[AIRLOCK_ID_MAX + 1];
	int64_t epoch;
	int64_t ttl_seconds;
	bool bridge; /* the claim asks for the orchestration bridge (docs/bridge.md) */
} worker_lease_request;
int worker_lease_request_decode(const char *body, size_t len, worker_lease_request *ret,
                                airlock_error *err);

/* The release's query: "epoch=N" (required, a decimal >= 0) and, for a
 * token of every tenant, "tenant_id=T" (the core's id rule), in any order,
 * each once, nothing else. *ret_tenant is "" when absent. */
int worker_release_query_decode(const char *q, size_t len, int64_t *ret_epoch,
                                char ret_tenant[AIRLOCK_ID_MAX + 1], airlock_error *err);

/* A tool call's body (POST /v1/runs/{run_id}/tools/sandbox.run_command):
 *   {"epoch": N, "tenant_id": T (a token of every tenant only),
 *    "network_enabled": false, "deadline_ms": D (optional: the run's
 *    deadline, Unix milliseconds), "arguments": {the tool's request}}
 * The arguments are the specification's request, checked in its order
 * (command a non-empty array of strings, no NUL, under the size cap,
 * command[0] absolute or a bare name; working_directory a string;
 * timeout_seconds a positive integer), ToolValidationError naming the
 * member otherwise; containment of working_directory is the core's
 * (airlock_run_command_prepare). At most AIRLOCK_WORKER_TOOL_BODY_MAX
 * bytes. *ret is cleared on failure. */
typedef struct worker_tool_request {
	char tenant_id[AIRLOCK_ID_MAX + 1]; /* "" when absent */
	int64_t epoch;
	bool network_enabled;
	bool has_deadline;
	int64_t deadline_ms;
	char **argv; /* argc strings and a NULL */
	size_t argc;
	char *working_directory; /* NULL: "." */
	int64_t timeout_seconds; /* 0: absent */
} worker_tool_request;
int worker_tool_request_decode(const char *body, size_t len, worker_tool_request *ret,
                               airlock_error *err);
void worker_tool_request_clear(worker_tool_request *q);

/* artifact.export's body (POST /v1/runs/{run_id}/tools/artifact.export):
 *   {"epoch": N, "tenant_id": T (a token of every tenant only),
 *    "arguments": {"path": P | "text": X, "filename": F, "media_type": M}}
 * Exactly one of path (a workspace path: the core's containment rules
 * apply when it is resolved) and text (at most
 * AIRLOCK_WORKER_EXPORT_TEXT_MAX bytes); filename any text (NUL included,
 * at most AIRLOCK_ARTIFACT_FILENAME_MAX bytes; metadata, never a path);
 * media_type type/subtype. ToolValidationError naming the member
 * otherwise; at most AIRLOCK_WORKER_EXPORT_BODY_MAX bytes. *ret is
 * cleared on failure. */
typedef struct worker_export_request {
	char tenant_id[AIRLOCK_ID_MAX + 1]; /* "" when absent */
	int64_t epoch;
	airlock_export_arguments args; /* the tool's arguments (airlock/tools.h) */
} worker_export_request;
int worker_export_request_decode(const char *body, size_t len, worker_export_request *ret,
                                 airlock_error *err);
void worker_export_request_clear(worker_export_request *q);

/* The reaper's question: {"sandboxes": [{"environment_id", "run_id",
 * "lease_epoch"}, ...]}, at most AIRLOCK_WORKER_REAPER_ENTRIES_MAX entries
 * and AIRLOCK_WORKER_REAPER_BODY_MAX bytes, each entry exactly those
 * members by the core's rules. *ret (malloc'd, *ret_n entries) is the
 * caller's. */
struct worker_db_sandbox;
int worker_reaper_request_decode(const char *body, size_t len, struct worker_db_sandbox **ret,
                                 size_t *ret_n, airlock_error *err);

/* ---- artifacts (docs/worker-api.md, "Artifacts") ----------------------------------
 * The artifact routes, as worker_route (0, 404, 405; the query never
 * unescaped). The {id} segment is any non-empty segment: copied to
 * ret_artifact_id when it is AIRLOCK_UUID_STR_LEN bytes, else "" (so an
 * id that is not a UUIDv7 reaches the lookup and is answered the same 404
 * as a missing one, never a route's 404). ret_run_id for the attach
 * route, by the core's id rule. */
int worker_artifact_route(const char *target, size_t target_len, const char *method,
                          worker_verb *ret_verb, char ret_run_id[AIRLOCK_ID_MAX + 1],
                          char ret_artifact_id[AIRLOCK_UUID_STR_LEN + 1], const char **ret_query,
                          size_t *ret_query_len);

/* An upload's query: "tenant_id=T" (a token of every tenant only; "" when
 * absent), "filename=F" (percent-encoded, any bytes, at most
 * AIRLOCK_ARTIFACT_FILENAME_MAX decoded; "" when absent) and
 * "media_type=M" (percent-encoded or not, type/subtype by
 * airlock_media_type_valid; application/octet-stream when absent), in any
 * order, each at most once, nothing else; at most
 * AIRLOCK_WORKER_ARTIFACT_QUERY_MAX bytes. '+' is a '+' (this is RFC
 * 3986's query, not a form's). filename is malloc'd (never NULL on
 * success): worker_upload_query_clear. ToolValidationError naming the
 * parameter otherwise, *ret cleared. */
typedef struct worker_upload_query {
	char tenant_id[AIRLOCK_ID_MAX + 1];
	unsigned char *filename;
	size_t filename_len;
	char media_type[256];
} worker_upload_query;
int worker_upload_query_decode(const char *q, size_t len, worker_upload_query *ret,
                               airlock_error *err);
void worker_upload_query_clear(worker_upload_query *q);

/* A listing's query: "run_id=R" (the core's id rule), "after=ID" (a
 * canonical UUIDv7: the last id of the page before), "limit=N"
 * (1..AIRLOCK_WORKER_DB_ARTIFACTS_MAX, default that), "tenant_id=T" (a
 * token of every tenant), each optional and at most once, nothing else.
 * Absent strings are "". */
typedef struct worker_list_query {
	char tenant_id[AIRLOCK_ID_MAX + 1];
	char run_id[AIRLOCK_ID_MAX + 1];
	char after[AIRLOCK_UUID_STR_LEN + 1];
	size_t limit;
} worker_list_query;
int worker_list_query_decode(const char *q, size_t len, worker_list_query *ret,
                             airlock_error *err);

/* The attach body: empty, or {"tenant_id": T} (optional; a token of every
 * tenant names it), at most AIRLOCK_WORKER_ATTACH_BODY_MAX bytes.
 * ret_tenant "" when absent. */
int worker_attach_request_decode(const char *body, size_t len,
                                 char ret_tenant[AIRLOCK_ID_MAX + 1], airlock_error *err);

/* Airlock-Content-SHA256: exactly 64 hex digits (either case; spaces
 * around allowed), lowercased into ret. */
bool worker_sha256_header_decode(const char *v, size_t len,
                                 char ret[AIRLOCK_SHA256_HEX_LEN + 1]);

/* ---- authentication ---------------------------------------------------------- */

/* The tokens file (auth_mode: tokens): lines "TOKEN TENANT" or "TOKEN *",
 * blank lines and "#" comments; a token is AIRLOCK_WORKER_TOKEN_MIN..
 * AIRLOCK_WORKER_TOKEN_MAX printable non-space ASCII bytes, a tenant the
 * core's id rule; at most AIRLOCK_WORKER_TOKENS_MAX lines with a token, no
 * token twice. */
typedef struct worker_tokens worker_tokens;

/* Parse the file's text (the caller read it as a credential file). Errors
 * name the line number, never a token. */
int worker_tokens_parse(const char *text, size_t len, worker_tokens **ret, airlock_error *err);
/* Read path (airlock_credential_file_read_text: regular, this user's,
 * 0600 or stricter) and parse it; the text is wiped. */
int worker_tokens_load(const char *path, worker_tokens **ret, airlock_error *err);
/* Wipes every token. */
void worker_tokens_free(worker_tokens *t);
/* The Authorization header's value: true with the token's tenant copied
 * to ret_tenant ("*" for a token of every tenant) when it is "Bearer T"
 * for a token T of the file. Every token is compared, in constant time
 * each, whatever matched before. */
bool worker_tokens_lookup(const worker_tokens *t, const char *value, size_t value_len,
                          char ret_tenant[AIRLOCK_ID_MAX + 1]);

/* ---- the daemon ----------------------------------------------------------------- */

/* Run the worker with checked settings (airlock_settings_check passed)
 * until SIGTERM or SIGINT: open the database (migrations at open), read
 * the tokens, listen, serve, and stop cleanly. s->mechanism becomes the
 * execution service's once the worker has reached it. Returns 0 after a clean
 * stop; an error (naming the setting) when it could not start. The
 * caller blocked SIGTERM and SIGINT in every thread. */
int worker_serve(airlock_settings *s, airlock_error *err);

#endif
