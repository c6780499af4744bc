/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_SERVICE_REAPER_H
#define AIRLOCK_SERVICE_REAPER_H

/*
 * The reaper (the specification, "Nothing outlives its lease", the third
 * mechanism; docs/reaper.md): every interval the service lists its live
 * sandboxes, asks the worker tier which of them are stale (POST
 * /v1/reaper/stale, at most AIRLOCK_REAPER_BATCH_MAX a request) and
 * destroys those (airlock_exec_destroy_id, reason "reaped"). Only
 * environment_id, run_id and lease_epoch go out; only ids come back.
 *
 * The client (reaper_client.c) is a small blocking HTTP/1.1 client on the
 * reaper's own thread: a Unix socket, or TCP with TLS (gnutls) verified
 * against the configured CA and the address's host name. Every wait polls
 * the stop descriptor too, so a stop ends a request in flight at once.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/error.h"
#include "airlock/port/exec.h"
#include "service/metrics.h"

/* ---- the client ---------------------------------------------------------------- */

typedef struct reaper_client reaper_client;

/* address: "unix:/abs/path" or "HOST:PORT" (TLS; tls_ca_file required,
 * read now). token: the bearer token's bytes (copied; printable ASCII
 * without spaces, as a header value must be), wiped at free. Config error
 * naming the setting otherwise. */
int reaper_client_new(const char *address, const char *tls_ca_file, const void *token,
                      size_t token_len, reaper_client **ret, airlock_error *err);
void reaper_client_free(reaper_client *c);

/* The client's answer to one request. */
typedef struct reaper_answer {
	unsigned status;
	char *body; /* malloc'd, NUL-terminated past len */
	size_t len;
} reaper_answer;

/* POST body (JSON) to path and read the whole answer: connecting (and the
 * TLS handshake) within connect_ms, everything within total_ms, at most
 * AIRLOCK_REAPER_ANSWER_MAX bytes. 0 with *ret filled (any status); a
 * negative code with *ret_why (the error's reason) and *err otherwise;
 * -ECANCELED when stop_fd became readable. Never raises SIGPIPE; the
 * request's copy of the token is wiped before it returns. */
int reaper_client_post(reaper_client *c, const char *path, const char *body, size_t len,
                       int64_t connect_ms, int64_t total_ms, int stop_fd, reaper_answer *ret,
                       service_reaper_error *ret_why, airlock_error *err);
void reaper_answer_clear(reaper_answer *a);

/* The framing of an answer read so far (buf[0..have), have at most
 * AIRLOCK_REAPER_ANSWER_MAX; eof: the peer closed): 1 when it is whole,
 * with *ret (the status, and the body at buf + body_off, body_len bytes,
 * a chunked one decoded in place); 0 when more is needed; -1 with
 * ret->why: MALFORMED (not an HTTP/1.x status line and header block of
 * at most AIRLOCK_REAPER_HEADER_MAX, a Content-Length and chunks both, a
 * transfer coding other than chunked, bad chunks), TOO_LARGE (a length
 * past the cap), IO (closed before the end). Fuzzed (fuzz_reaper_answer). */
typedef struct reaper_frame {
	unsigned status;
	size_t body_off, body_len;
	service_reaper_error why;
} reaper_frame;
int reaper_answer_frame(char *buf, size_t have, bool eof, reaper_frame *ret);

/* ---- the reaper -------------------------------------------------------------- */

typedef struct svc_reaper_config {
	const char *address;      /* service.reaper_address */
	const char *tls_ca_file;  /* service.reaper_tls_ca_file (TCP) */
	const void *credential;   /* service.reaper_credential_file's token (copied) */
	size_t credential_len;
	int64_t interval_ms;      /* service.reaper_interval_seconds */
	unsigned alert_after;     /* service.reaper_destroy_alert_after */
	/* 0: AIRLOCK_REAPER_CONNECT_TIMEOUT_MS, and min(interval,
	 * AIRLOCK_REAPER_REQUEST_TIMEOUT_MS) */
	int64_t connect_timeout_ms;
	int64_t request_timeout_ms;
	service_metrics *metrics; /* its log and counters; may be NULL */
} svc_reaper_config;

typedef struct svc_reaper svc_reaper;

/* A reaper over exec (borrowed: free the reaper first). No thread yet. */
int svc_reaper_new(airlock_exec *exec, const svc_reaper_config *cfg, svc_reaper **ret,
                   airlock_error *err);
/* The reaper's thread: a pass every interval until svc_reaper_stop. */
int svc_reaper_start(svc_reaper *r, airlock_error *err);
/* Ask the thread (and a pass in flight) to end; does not block;
 * thread-safe. */
void svc_reaper_stop(svc_reaper *r);
/* Stop, join, wipe the credential, release. NULL is a no-op. */
void svc_reaper_free(svc_reaper *r);

/* What one pass did (for tests and the benchmark). */
typedef struct svc_reaper_pass_stats {
	size_t live;        /* sandboxes listed */
	size_t asked;       /* named in questions that were answered */
	size_t requests;    /* questions sent */
	size_t stale;       /* answered stale (asked ones) */
	size_t unasked;     /* ids answered that were not asked (ignored) */
	size_t destroyed;   /* destroyed by this pass */
	size_t failed;      /* destroys that failed (retried next pass) */
	size_t alerts;      /* of those, at or past alert_after */
	bool error;         /* a question got no usable answer: the pass ended there */
	service_reaper_error why;
	bool stopped;       /* svc_reaper_stop ended it */
} svc_reaper_pass_stats;

/* One pass now, on the caller's thread (the reaper's thread runs the same);
 * not to be run by two threads at once. */
void svc_reaper_pass(svc_reaper *r, svc_reaper_pass_stats *ret);

/* Failed destroys counted for environment_id (0: none, or not live). */
unsigned svc_reaper_failures(svc_reaper *r, const char *environment_id);

/* The service's reaper (server.c): made over the service's airlock_exec
 * and its thread started; the service owns it from then on, stops it at
 * airlock_service_shutdown and frees it first in airlock_service_free.
 * At most one per service. */
struct airlock_service;
int svc_service_reaper_start(struct airlock_service *s, const svc_reaper_config *cfg,
                             airlock_error *err);

#endif
