/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_WORKER_DAEMON_H
#define AIRLOCK_WORKER_DAEMON_H

/*
 * The worker daemon's state, shared by its API (api.c: routes, handlers,
 * the log lines, the metrics' text) and its start and stop (serve.c).
 */

#include <stdatomic.h>
#include <stdint.h>

#include "http/http.h"
#include "worker/db.h"
#include "worker/worker.h"

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
} worker_counters;

typedef struct worker_daemon {
	worker_db *db;
	worker_tokens *tokens; /* NULL: auth_mode dev (one tenant, "dev", no token) */
	worker_counters c;
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

/* The sandboxes of ended claims the database hands back (a fence, a
 * release, a start after a stop): the caller destroys each, then clears
 * its record. This worker provisions no sandbox, so no record can be of
 * its making: one that exists is logged and refused (NOT_IMPLEMENTED),
 * never forgotten, and its record stays for a worker that can destroy it. */
int worker_end_sandboxes(worker_daemon *w, const worker_db_sandbox *list, size_t n,
                         const char *why, airlock_error *err);

#endif
