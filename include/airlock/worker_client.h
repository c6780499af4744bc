/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_WORKER_CLIENT_H
#define AIRLOCK_WORKER_CLIENT_H

/*
 * A client of the worker's API (docs/worker-api.md, docs/worker-openapi.yaml):
 * one call to a running airlock-worker, on a Unix socket or HTTPS, with a
 * bearer token or none (the worker's dev mode). For people and tools that
 * try the worker by hand (`airlock tool`, `airlock doctor`, `airlock
 * artifact`); a platform speaks HTTP to the worker itself.
 *
 * The transport is the remote adapter's (libcurl, in libairlock-worker.so):
 * TCP is always TLS, a redirect is never followed, every body has a cap set
 * before its first byte (a 2xx body AIRLOCK_JSON_INPUT_MAX, an error body
 * 64 KiB; a download's bytes go to the caller's descriptor, at most the
 * metadata's size). An upload or a download has the call's timeout plus a
 * second per 64 KiB (the worker's own rule) and is cut when under 1 KiB/s
 * for 30 s. The token is read from its file as a credential
 * (airlock_credential_file_read: regular, this user's, 0600, at most
 * 4 KiB), held only for the call and wiped; no message names it.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct airlock_worker_client_config {
	const char *address;     /* "unix:/absolute/path" or "HOST:PORT" (https) */
	const char *token_file;  /* the bearer token's file; NULL: no token (dev mode) */
	const char *tls_ca_file; /* TCP: the CA the worker's certificate chains to; NULL: the system's */
	int64_t timeout_ms;      /* the whole call, connection included; 0: 30000 */
	/* Fired while a call (airlock_worker_client_call, _tool_call) runs, it
	 * ends that call at once: ExecutionRejected (errnum ECANCELED), the
	 * connection closed, which the worker takes as its client gone (a
	 * command it runs for the call is cancelled). NULL: none. */
	const struct airlock_cancel *cancel;
} airlock_worker_client_config;

/* What the worker answered. */
typedef struct airlock_worker_answer {
	long status; /* the HTTP status */
	/* A 2xx body: the JSON object it holds, re-encoded with two-space
	 * indentation and a final newline (members in the worker's order);
	 * NULL when there is none (204). */
	char *json;
	/* Anything else: the worker's error shape, its class and its message
	 * ({"error": CLASS, "message": TEXT}). A body that is not that shape
	 * is ExecutionUnavailable saying so. The message is the worker's:
	 * escape it before it reaches a terminal. */
	airlock_error error;
	/* A tool call answered 200 with the sandbox.run_command result: its
	 * exit_code when it has one (it is null when killed_by is set). */
	bool has_exit_code;
	int64_t exit_code;
} airlock_worker_answer;

void airlock_worker_answer_clear(airlock_worker_answer *a);

/* One request: method "GET", "PUT", "POST" or "DELETE"; path "/v1/..."
 * with its query, at most 2048 bytes of [A-Za-z0-9._~/?&=%-] (a caller
 * escapes what it puts in a segment: airlock_worker_client_tool_call
 * does); body a JSON text or NULL. 0 whenever the worker answered, at any
 * status, with *ret filled (cleared by the caller); the worker not
 * reachable, not answering in time, or answering past the cap:
 * ExecutionUnavailable naming the address; the token file refused:
 * ConfigurationError naming the file. */
int airlock_worker_client_call(const airlock_worker_client_config *cfg, const char *method,
                               const char *path, const char *body, airlock_worker_answer *ret,
                               airlock_error *err);

/* A tool call: POST /v1/runs/{run_id}/tools/{tool} with the body
 * {"epoch", "tenant_id"?, "network_enabled"?, "deadline_ms"?,
 *  "arguments"}. run_id and tool are escaped into their segments (the
 * worker answers 404 for a name it does not serve); arguments_json must be
 * a JSON object (ToolValidationError before anything is sent otherwise). */
typedef struct airlock_worker_tool_request {
	const char *run_id;
	const char *tool;           /* "sandbox.run_command" */
	int64_t epoch;              /* >= 0 */
	const char *tenant_id;      /* NULL: not sent (a token of one tenant, or dev) */
	bool network_enabled;       /* sent only when true */
	int64_t deadline_ms;        /* Unix ms; 0: not sent */
	const char *arguments_json; /* {"command": [...], ...} */
} airlock_worker_tool_request;

int airlock_worker_client_tool_call(const airlock_worker_client_config *cfg,
                                    const airlock_worker_tool_request *req,
                                    airlock_worker_answer *ret, airlock_error *err);

/* The worker's health (GET /v1/health) when it answered 200. */
typedef struct airlock_worker_health {
	char database[16];  /* "sqlite", "postgresql" */
	int64_t schema_version;
	char auth_mode[16]; /* "dev", "tokens" */
} airlock_worker_health;

/* 0 with *ret filled when the worker answered 200 with its health; its
 * error (the class it answered, under "the worker at ADDRESS answered
 * HTTP N") when it answered anything else (503: its database does not
 * answer); ExecutionUnavailable when it could not be reached. */
int airlock_worker_client_health(const airlock_worker_client_config *cfg,
                                 airlock_worker_health *ret, airlock_error *err);

/* ---- the artifact store's routes (docs/worker-api.md, "Artifacts") ------ */

/* An upload: POST /v1/artifacts. fd is a regular file read from offset 0
 * (pread: its own offset is not moved) twice: once to hash it (SHA-256,
 * streamed, never held whole), once to send it, streamed, with that digest
 * in Airlock-Content-SHA256, so a file that changed between the two reads
 * is the worker's 422 and nothing is kept. filename any bytes but NUL
 * (percent-encoded into the query); media_type and tenant_id NULL: not
 * sent. 0 whenever the worker answered (ret->json the ArtifactRef on 201,
 * ret->error the worker's refusal otherwise: 400, 409, 413, 422); an fd
 * that is not a regular file or cannot be read: SystemError naming it. */
typedef struct airlock_worker_artifact_upload {
	int fd;
	const char *filename;
	const char *media_type;
	const char *tenant_id;
} airlock_worker_artifact_upload;

int airlock_worker_client_artifact_put(const airlock_worker_client_config *cfg,
                                       const airlock_worker_artifact_upload *req,
                                       airlock_worker_answer *ret, airlock_error *err);

/* A download: GET /v1/artifacts/{id} (the metadata: size_bytes, sha256),
 * then GET /v1/artifacts/{id}/content written to out_fd as it arrives,
 * hashed on the way and at most the metadata's size. 0 with ret->json the
 * metadata (indented, every non-ASCII character escaped) when the bytes written are exactly the artifact: their
 * SHA-256 equal to the metadata's and to the answer's ETag
 * ("sha256:<hex>"), their count its size_bytes. 0 with ret->status and
 * ret->error when the worker refused either request (404 no such
 * artifact). A digest, a size or an ETag that differs:
 * ArtifactIntegrityError naming both digests; a transfer cut short:
 * ExecutionUnavailable; out_fd refusing a write: SystemError. In every
 * failure the bytes already written to out_fd are not the artifact: the
 * caller discards them (a temporary file) or says so (a pipe). artifact_id
 * 1 to 64 of [0-9A-Za-z-] (ExecutionRejected before anything is sent
 * otherwise). */
int airlock_worker_client_artifact_get(const airlock_worker_client_config *cfg,
                                       const char *artifact_id, int out_fd,
                                       airlock_worker_answer *ret, airlock_error *err);

/* A listing: GET /v1/artifacts, page after page (the worker's next_after)
 * until the last or until limit artifacts (0: no limit), each artifact's
 * metadata handed to each as one line of compact JSON (no newline, every
 * non-ASCII character escaped) as its
 * page arrives; only one page is held at a time. each returns 0 to go on,
 * or a negative code with err set to stop. 0 whenever the worker answered
 * every page (ret->status the last page's; on a refusal ret->error, the
 * pages before it already handed over). run_id, tenant_id and after
 * NULL: not sent; each 1 to 128 of [A-Za-z0-9_-]. */
typedef struct airlock_worker_artifact_query {
	const char *run_id;
	const char *tenant_id;
	const char *after;
	int64_t limit;
} airlock_worker_artifact_query;

typedef int (*airlock_worker_item_fn)(void *arg, const char *json, airlock_error *err);

int airlock_worker_client_artifact_list(const airlock_worker_client_config *cfg,
                                        const airlock_worker_artifact_query *q,
                                        airlock_worker_item_fn each, void *arg,
                                        airlock_worker_answer *ret, airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
