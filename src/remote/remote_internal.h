/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_REMOTE_INTERNAL_H
#define AIRLOCK_REMOTE_INTERNAL_H

/*
 * The remote adapter's pieces: the HTTP transport (http.c: one request over
 * libcurl, capped, with descriptors watched while it runs and every failure
 * turned into an airlock_error naming the service's address and never the
 * credential), the execution ops (remote.c) and the workspace ops
 * (workspace.c).
 *
 * The caps, in one place (docs/remote.md repeats them):
 *   REMOTE_ERROR_BODY_MAX    an error body (the error shape is one short
 *                            object; the service's messages are < 512 bytes)
 *   REMOTE_JSON_BODY_MAX     a JSON answer (handle, listing, health):
 *                            AIRLOCK_JSON_INPUT_MAX, what the decoders take
 *   REMOTE_STREAM_LINE_MAX   one NDJSON line of a streamed execute: the final
 *                            result line is the longest (two 16 MiB streams
 *                            as base64 and the listing): the decoders' cap
 *   REMOTE_STREAM_BODY_MAX   a whole streamed execute: every output event's
 *                            bytes (at most the two capped streams, as
 *                            base64) plus the result line: twice the line cap
 *   a workspace read         the caller's max_bytes
 *   a workspace stream       nothing held: each piece goes to the sink as
 *                            it arrives, counted against the announced size
 *                            and the caller's max_bytes
 */

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "airlock/port/exec.h"
#include "airlock/remote.h"
#include "util/util.h"

#define REMOTE_ERROR_BODY_MAX (64u * 1024u)
#define REMOTE_JSON_BODY_MAX ((size_t)AIRLOCK_JSON_INPUT_MAX)
#define REMOTE_STREAM_LINE_MAX ((size_t)AIRLOCK_JSON_INPUT_MAX)
#define REMOTE_STREAM_BODY_MAX (2 * (size_t)AIRLOCK_JSON_INPUT_MAX)
/* A result within its caps always reaches the client: the service's worst
 * stream for one (caps.h, AIRLOCK_SERVICE_STREAM_WORST_BYTES) fits. */
_Static_assert(AIRLOCK_SERVICE_STREAM_WORST_BYTES <= REMOTE_STREAM_BODY_MAX,
               "a streamed execute within its caps must fit the remote adapter's cap");

typedef struct remote_http remote_http;

int remote_http_new(const airlock_remote_config *cfg, remote_http **ret, airlock_error *err);

/* Whom a transport talks to, as its messages name it. remote_http_new's
 * is the execution service (a credential required); the worker's API
 * client (src/worker/client.c) talks to the worker, whose dev mode takes
 * no token: then no Authorization header is sent. */
typedef struct remote_peer {
	const char *who;        /* "remote adapter": the lead of a settings error */
	const char *peer;       /* "the execution service": starts with "the " */
	const char *credential; /* "service credential" */
	bool credential_required;
} remote_peer;
int remote_http_new_peer(const airlock_remote_config *cfg, const remote_peer *peer,
                         remote_http **ret, airlock_error *err);
void remote_http_free(remote_http *h);
/* The address as configured, for messages ("unix:/run/airlock/api.sock"). */
const char *remote_http_address(const remote_http *h);

/* Called with each piece of a 2xx body as it arrives; return 0 to go on,
 * or a negative code with err set to abort the transfer. */
typedef int (*remote_sink_fn)(void *arg, const char *data, size_t len, airlock_error *err);
/* Called when a watched descriptor is readable (then no longer watched) and
 * every tick_ms while the transfer runs (fd -1). */
typedef void (*remote_watch_fn)(void *arg, int fd);
/* Called with each header line as it arrives (CRLF included), the status
 * line, the blank line ending the block and a chunked body's trailer lines
 * after it included: libcurl hands trailers to the same callback. */
typedef void (*remote_header_fn)(void *arg, const char *line, size_t len);
/* Fills buf with up to room bytes of a streamed request body: the count
 * (0 only at its end), or a negative code with err set to abort the
 * transfer. */
typedef ssize_t (*remote_source_fn)(void *arg, char *buf, size_t room, airlock_error *err);

typedef struct remote_call {
	const char *method;      /* "GET", "POST", "PUT", "DELETE" */
	const char *path;        /* "/v1/...", with its query string */
	const char *handle_b64;  /* the Airlock-Handle header's value, or NULL */
	const void *body;        /* a request body (JSON or the bytes of a write) */
	size_t body_len;
	bool has_body;
	const char *content_type; /* of the body */
	int64_t timeout_ms;      /* the whole call, connection included */
	size_t max_body;         /* cap of a 2xx body kept in resp->body (no sink) */
	remote_sink_fn sink;     /* a 2xx body goes here instead, piece by piece */
	void *sink_arg;
	int watch_fds[2];        /* -1: none */
	remote_watch_fn on_watch; /* NULL: a watched descriptor only ends the call (below) */
	/* A watched descriptor that becomes readable ends the transfer:
	 * ExecutionRejected "cancelled", the connection closed (the far
	 * side sees its client gone). */
	bool watch_aborts;
	void *watch_arg;
	int64_t tick_ms;         /* 0: no ticks */
	remote_header_fn on_header; /* NULL: headers are not looked at */
	void *header_arg;
	/* A transfer slower than low_speed_bytes a second for low_speed_s
	 * seconds is cut (a stalled stream), whatever its total deadline;
	 * 0: no such limit. */
	long low_speed_bytes, low_speed_s;
	size_t buffer_size;      /* libcurl's receive buffer; 0: its default */
	/* A POST body streamed from source instead of body: exactly
	 * source_len bytes, sent as they are read (never held whole); a
	 * source that ends short fails the call. */
	remote_source_fn source;
	void *source_arg;
	uint64_t source_len;
	/* One more request header, "Name: value" of visible ASCII and
	 * spaces (ExecutionRejected otherwise, nothing sent); NULL: none. */
	const char *extra_header;
} remote_call;

typedef struct remote_response {
	long status;
	util_buf body;     /* a 2xx body without a sink, or an error body */
	bool over_cap;     /* the body passed its cap; the transfer was stopped */
} remote_response;

void remote_response_clear(remote_response *r);

/* Run one call. 0 with resp->status set whenever the service answered (any
 * status: the caller maps a non-2xx one with remote_http_status_error);
 * ExecutionUnavailable when it could not be reached or did not finish in
 * time, naming the address; a sink's own error when it aborted. */
int remote_http_perform(remote_http *h, const remote_call *c, remote_response *resp,
                        airlock_error *err);

/* A non-2xx answer as the error it carries (docs/service-api.md "Errors"):
 * the class and message of the JSON error shape; 503, or a body that does
 * not decode, ExecutionUnavailable; 401 a configuration error (the service
 * refused the credential). Returns the negative code. what names the
 * call ("listdir", "cancel"); NULL for the port's verbs the core names
 * above the message (provision, execute, destroy). */
int remote_http_status_error(remote_http *h, const char *what, const remote_response *resp,
                             airlock_error *err);

/* An error for a 2xx answer whose body does not have the documented shape:
 * ExecutionUnavailable (the service is not one this adapter can talk to). */
int remote_http_protocol_error(remote_http *h, const char *what, const airlock_error *why,
                               airlock_error *err);

/* A JSON 2xx answer to a call: perform, map the error, decode the body as
 * an object. *ret is the jansson object (json_t *), owned by the caller.
 * want is the status a success has (200, 201, 204). */
int remote_http_json(remote_http *h, const char *what, const remote_call *c, long want,
                     void **ret_json, airlock_error *err);

/* Percent-encode bytes for a query value (everything but RFC 3986's
 * unreserved characters). malloc'd; NULL on ENOMEM. */
char *remote_query_escape(const char *s);

/* base64url without padding of the handle's JSON: the Airlock-Handle
 * header. malloc'd; NULL with err set. */
char *remote_handle_header(const airlock_environment_handle *h, airlock_error *err);

/* What a workspace stream's answer says besides its body
 * (docs/service-api.md, "The workspace stream"): the header block's
 * Airlock-Size (the body's exact length, plain decimal digits) and the
 * trailer's Airlock-Sha256 (64 lowercase hex characters), read line by line as libcurl hands them over (status line,
 * headers, the blank line, trailers). A digest in the header block is not
 * the digest of bytes read and is ignored; a second value of either, or
 * one of the wrong shape, sets bad_*. */
typedef struct remote_stream_meta {
	bool have_size, bad_size, in_trailers, have_digest, bad_digest;
	uint64_t size;
	char digest[AIRLOCK_SHA256_HEX_LEN + 1];
} remote_stream_meta;
void remote_stream_meta_line(remote_stream_meta *m, const char *line, size_t len);

/* A download's ETag as the header block gives it (the worker's artifact
 * content, "sha256:<hex>" quoted): read line by line as libcurl hands
 * them over. The value without its surrounding blanks and CRLF, kept
 * when it is at most AIRLOCK_WORKER_CLIENT_ETAG_MAX bytes of visible
 * ASCII; a second ETag, a longer one or another byte sets bad and keeps
 * none. Lines after the blank one (a trailer) are not the header block's
 * and are ignored. */
typedef struct remote_etag {
	bool in_trailers, have, bad;
	char value[AIRLOCK_WORKER_CLIENT_ETAG_MAX + 1];
} remote_etag;
void remote_etag_line(remote_etag *e, const char *line, size_t len);

/* The workspace of one remote sandbox: its calls go to the service with the
 * sandbox's id and handle (copied). */
int remote_workspace_new(remote_http *h, const char *environment_id, const char *handle_b64,
                         airlock_workspace **ret, airlock_error *err);

#endif
