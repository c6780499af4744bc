/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_SERVICE_POOL_H
#define AIRLOCK_SERVICE_POOL_H

/*
 * The service's warm pool (docs/service.md, "The warm pool"): sandboxes
 * provisioned ahead of demand per pool key (the mechanism is the service's
 * one; the image digest, the limits and the egress mode are the key), under
 * the pool's identity (airlock_exec_pool_provision), handed to a provision
 * whose spec matches a key (airlock_exec_pool_claim), refilled by threads
 * of their own.
 *
 * Keys are learned from demand: a provision whose key the pool does not
 * hold is a miss, provisioned the plain way, and once that succeeded
 * (svc_pool_learn) its key is kept warm. At most size / per_key keys are held; a new one past that
 * replaces the one used least recently (its idle sandboxes are destroyed).
 * A spec with a bridge has no key (the bridge is per run), and neither has
 * any spec when the mechanism has no claim (airlock_exec_pool_capable).
 */

#include <stdbool.h>
#include <stdint.h>

#include "airlock/port/exec.h"

struct service_metrics;

typedef struct svc_pool_config {
	int64_t size;        /* pooled sandboxes at most, every key (service.pool.size) */
	int64_t per_key;     /* kept warm per key (service.pool.per_key) */
	int64_t max_idle_ms; /* a pooled sandbox's life unclaimed (service.pool.max_idle_seconds) */
	size_t max_sandboxes; /* the service's cap: a refill leaves one place free */
	/* How many refills may run at once (0: 2). */
	unsigned refill_threads;
	struct service_metrics *metrics; /* may be NULL */
} svc_pool_config;

typedef struct svc_pool svc_pool;

/* Starts the refill threads (which wait for a key). CONFIG when size is
 * 0 or the mechanism has no warm pool. */
int svc_pool_new(airlock_exec *exec, const svc_pool_config *cfg, svc_pool **ret,
                 airlock_error *err);

/* A provision through the pool: 1 when a pooled sandbox was claimed for
 * spec (*ret set, as airlock_exec_provision[_as] would set it), 0 when the
 * caller is to provision the plain way (a miss; when the service is at
 * max_sandboxes an idle pooled sandbox is destroyed first so the plain
 * provision has room). */
int svc_pool_take(svc_pool *p, const airlock_environment_spec *spec, const char *want_id,
                  airlock_environment_handle *ret);
/* After a miss whose plain provision succeeded: spec's key is kept warm
 * from now on (a spec the core refuses never becomes a key, so it never
 * costs a refill). */
void svc_pool_learn(svc_pool *p, const airlock_environment_spec *spec);

/* Stop refilling: no new refill starts, the threads are told to end (a
 * refill inside the adapter ends by itself). Does not block. */
void svc_pool_stop(svc_pool *p);
/* Join the threads and free; the pooled sandboxes stay the core's (the
 * adapter's free destroys them with every other). NULL is a no-op. */
void svc_pool_free(svc_pool *p);

/* Start the warm pool on s's adapter (server.c); at most once. The
 * service's shutdown stops it and its free joins it. */
struct airlock_service;
int svc_service_pool_start(struct airlock_service *s, const svc_pool_config *cfg,
                           airlock_error *err);

/* Counts for tests and the health answer. */
typedef struct svc_pool_stats {
	uint64_t hits, misses, refills, refill_failures;
	size_t idle; /* pooled and ready now */
	size_t keys;
} svc_pool_stats;
void svc_pool_stats_get(svc_pool *p, svc_pool_stats *ret);

#endif
