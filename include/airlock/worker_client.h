/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_WORKER_CLIENT_H
#define AIRLOCK_WORKER_CLIENT_H

/*
 * A client of the worker's API (docs/worker-api.md, docs/worker-openapi.yaml):
 * one call to a running airlock-worker, on a Unix socket or HTTPS, with a
 * bearer token or none (the worker's dev mode). For people and tools that
 * try the worker by hand (`airlock tool`, `airlock doctor`); a platform
 * speaks HTTP to the worker itself.
 *
 * The transport is the remote adapter's (libcurl, in libairlock-worker.so):
 * TCP is always TLS, a redirect is never followed, every body has a cap set
 * before its first byte (a 2xx body AIRLOCK_JSON_INPUT_MAX, an error body
 * 64 KiB). The token is read from its file as a credential
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

#ifdef __cplusplus
}
#endif
#endif
