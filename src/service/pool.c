/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's warm pool (pool.h). The records of the pooled sandboxes are
 * the core's (src/core/exec.c): what this file holds is which pooled ids
 * belong to which key, in the order they were made, and the threads that
 * refill them. An id here may be gone from the core (its idle bound
 * reached, the expiry timer destroyed it): a claim of it is refused and the
 * next one is tried, so this list is a hint the core checks, never the
 * account of what lives.
 */
#include "service/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "airlock/settings.h"
#include "service/metrics.h"
#include "util/util.h"

/* After a failed refill a key waits this long before the next one, doubled
 * per failure up to the maximum: an image that cannot be provisioned must
 * not cost a provision attempt per second forever. */
#define POOL_BACKOFF_MS 1000
#define POOL_BACKOFF_MAX_MS 30000
/* How long a refill thread sleeps when there is nothing to do: the next
 * look at the idle bounds and the capacity (a claim or a learned key wakes
 * it at once). */
#define POOL_TICK_MS 1000

typedef struct pool_entry {
	char id[AIRLOCK_ENVIRONMENT_ID_MAX];
	int64_t born_ms; /* monotonic: when its provision ended */
} pool_entry;

typedef struct pool_key {
	bool used;
	uint64_t serial; /* which key this slot holds: a refill finds its key again by it */
	char *image_digest;
	airlock_resource_limits limits;
	airlock_egress_mode egress;
	pool_entry *v; /* per_key of them */
	size_t n;
	unsigned inflight; /* refills of this key inside the adapter */
	/* Claims of this key's sandboxes in flight: counted as the key's
	 * until they end, so a claim the spec's refusal puts back is never
	 * refilled for meanwhile (the refill would find the key full). */
	unsigned claiming;
	int64_t last_used_ms;
	int64_t retry_at_ms;
	int64_t backoff_ms;
} pool_key;

struct svc_pool {
	airlock_exec *exec;
	svc_pool_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pool_key *keys;
	size_t max_keys;
	uint64_t next_serial;
	bool stopping;
	pthread_t *threads;
	unsigned n_threads;
	svc_pool_stats st;
};

static int64_t now_ms(void)
{
	return util_monotonic_ms();
}

/* ---- keys ------------------------------------------------------------------ */

static bool limits_equal(const airlock_resource_limits *a, const airlock_resource_limits *b)
{
	return a->cpu_millicores == b->cpu_millicores && a->memory_bytes == b->memory_bytes &&
	       a->pids_max == b->pids_max && a->workspace_bytes == b->workspace_bytes &&
	       a->inodes_max == b->inodes_max && a->wall_clock_seconds == b->wall_clock_seconds;
}

/* Whether spec can be served by a pooled sandbox at all: what a sandbox is
 * built from before its claim is the key; the bridge is made per run at
 * provision (never at a claim), so a spec with one is always provisioned
 * the plain way. */
static bool spec_poolable(const airlock_environment_spec *spec)
{
	return spec && !spec->bridge && spec->image_digest &&
	       (spec->egress.mode == AIRLOCK_EGRESS_DENY ||
	        spec->egress.mode == AIRLOCK_EGRESS_ALLOWLIST);
}

/* Caller holds the lock. */
static pool_key *key_find(svc_pool *p, const airlock_environment_spec *spec)
{
	for (size_t i = 0; i < p->max_keys; i++) {
		pool_key *k = &p->keys[i];
		if (k->used && k->egress == spec->egress.mode &&
		    strcmp(k->image_digest, spec->image_digest) == 0 &&
		    limits_equal(&k->limits, &spec->limits))
			return k;
	}
	return NULL;
}

static size_t pooled_total(const svc_pool *p)
{
	size_t t = 0;
	for (size_t i = 0; i < p->max_keys; i++)
		t += p->keys[i].n + p->keys[i].inflight + p->keys[i].claiming;
	return t;
}

/* Forget the ids whose idle bound has passed: the core's expiry timer
 * destroys them (reason "pool_idle"). Caller holds the lock. */
static void key_prune(svc_pool *p, pool_key *k, int64_t now)
{
	size_t keep = 0;
	for (size_t i = 0; i < k->n; i++)
		if (now - k->v[i].born_ms < p->cfg.max_idle_ms)
			k->v[keep++] = k->v[i];
	k->n = keep;
}

/* Learn spec's key into a free slot, or into the slot of the key used least
 * recently, whose idle ids are moved to *evicted (the caller discards them
 * outside the lock). Caller holds the lock. NULL without memory. */
static pool_key *key_learn(svc_pool *p, const airlock_environment_spec *spec, pool_entry *evicted,
                           size_t *n_evicted)
{
	char *img = strdup(spec->image_digest);
	if (!img)
		return NULL;
	pool_key *k = NULL;
	for (size_t i = 0; i < p->max_keys && !k; i++)
		if (!p->keys[i].used)
			k = &p->keys[i];
	if (!k) {
		k = &p->keys[0];
		for (size_t i = 1; i < p->max_keys; i++)
			if (p->keys[i].last_used_ms < k->last_used_ms)
				k = &p->keys[i];
		memcpy(evicted, k->v, k->n * sizeof(*evicted));
		*n_evicted = k->n;
		free(k->image_digest);
	}
	/* A refill of the old key in flight finds its serial gone and
	 * discards what it made. */
	pool_entry *v = k->v;
	*k = (pool_key){ .used = true, .serial = ++p->next_serial, .image_digest = img,
		         .limits = spec->limits, .egress = spec->egress.mode, .v = v,
		         .last_used_ms = now_ms(), .backoff_ms = POOL_BACKOFF_MS };
	return k;
}

static pool_key *key_by_serial(svc_pool *p, uint64_t serial)
{
	for (size_t i = 0; i < p->max_keys; i++)
		if (p->keys[i].used && p->keys[i].serial == serial)
			return &p->keys[i];
	return NULL;
}

/* ---- the refill threads -------------------------------------------------------- */

/* The key to refill now: below per_key, not backing off, the one with the
 * fewest sandboxes (ties: the one used last). NULL when none, or when the
 * pool or the service is full. Caller holds the lock. */
static pool_key *refill_pick(svc_pool *p, int64_t now)
{
	if ((int64_t)pooled_total(p) >= p->cfg.size)
		return NULL;
	/* One place stays free for a plain provision: the pool never takes
	 * the last one from a tenant whose spec matches no key. */
	if (p->cfg.max_sandboxes > 0 && airlock_exec_live(p->exec) + 1 >= p->cfg.max_sandboxes)
		return NULL;
	pool_key *best = NULL;
	for (size_t i = 0; i < p->max_keys; i++) {
		pool_key *k = &p->keys[i];
		size_t have = k->n + k->inflight + k->claiming;
		size_t best_have = best ? best->n + best->inflight + best->claiming : 0;
		if (!k->used || (int64_t)have >= p->cfg.per_key || k->retry_at_ms > now)
			continue;
		if (!best || have < best_have ||
		    (have == best_have && k->last_used_ms > best->last_used_ms))
			best = k;
	}
	return best;
}

static void wait_tick(svc_pool *p)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += POOL_TICK_MS / 1000;
	pthread_cond_timedwait(&p->wake, &p->lock, &ts);
}

static void *refill_main(void *arg)
{
	svc_pool *p = arg;
	pthread_mutex_lock(&p->lock);
	while (!p->stopping) {
		int64_t now = now_ms();
		for (size_t i = 0; i < p->max_keys; i++)
			if (p->keys[i].used)
				key_prune(p, &p->keys[i], now);
		pool_key *k = refill_pick(p, now);
		if (!k) {
			wait_tick(p);
			continue;
		}
		k->inflight++;
		uint64_t serial = k->serial;
		char *img = strdup(k->image_digest);
		char tenant[] = AIRLOCK_POOL_TENANT, run[] = AIRLOCK_POOL_RUN;
		airlock_environment_spec spec = {
			.tenant_id = tenant, .run_id = run,
			.image_digest = img, .limits = k->limits,
			.egress = { .mode = AIRLOCK_EGRESS_DENY },
		};
		pthread_mutex_unlock(&p->lock);
		char id[AIRLOCK_ENVIRONMENT_ID_MAX] = { 0 };
		airlock_error err = { 0 };
		int64_t t0 = now_ms();
		int r = img ? airlock_exec_pool_provision(p->exec, &spec, p->cfg.max_idle_ms, id, &err)
		            : airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOMEM, "pool refill");
		int64_t took = now_ms() - t0;
		free(img);
		service_metrics_pool_refill(p->cfg.metrics, r == 0, took);
		pthread_mutex_lock(&p->lock);
		k = key_by_serial(p, serial);
		if (k)
			k->inflight--;
		bool orphan = r == 0 && (!k || p->stopping || (int64_t)k->n >= p->cfg.per_key);
		if (r == 0 && !orphan) {
			k->v[k->n++] = (pool_entry){ .born_ms = now_ms() };
			memcpy(k->v[k->n - 1].id, id, sizeof(id));
			k->backoff_ms = POOL_BACKOFF_MS;
			p->st.refills++;
		} else if (r < 0 && !p->stopping) {
			/* (A refill the shutdown refused is no failure.) */
			p->st.refill_failures++;
			if (k) {
				k->retry_at_ms = now_ms() + k->backoff_ms;
				k->backoff_ms = k->backoff_ms * 2 > POOL_BACKOFF_MAX_MS
				                        ? POOL_BACKOFF_MAX_MS
				                        : k->backoff_ms * 2;
			}
			char msg[AIRLOCK_ERROR_MESSAGE_MAX + 64];
			snprintf(msg, sizeof(msg), "pool refill: %s", err.message);
			if (p->cfg.metrics)
				service_metrics_log_level(p->cfg.metrics, "error", "pool_refill_failed",
				                          msg);
		}
		if (orphan) {
			/* Its key was replaced, or the pool stops: the sandbox
			 * goes now rather than at its idle bound. */
			pthread_mutex_unlock(&p->lock);
			airlock_exec_pool_discard(p->exec, id, "pool_evicted", NULL);
			pthread_mutex_lock(&p->lock);
		}
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* ---- the instance ------------------------------------------------------------ */

static void pool_release(svc_pool *p)
{
	for (size_t i = 0; p->keys && i < p->max_keys; i++) {
		free(p->keys[i].image_digest);
		free(p->keys[i].v);
	}
	free(p->keys);
	free(p->threads);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->wake);
	free(p);
}

int svc_pool_new(airlock_exec *exec, const svc_pool_config *cfg, svc_pool **ret,
                 airlock_error *err)
{
	if (!exec || !cfg || cfg->size <= 0 || cfg->per_key <= 0 || cfg->per_key > cfg->size ||
	    cfg->per_key > AIRLOCK_POOL_PER_KEY_MAX || cfg->max_idle_ms <= 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.pool: size, per_key (at most size and %d) and "
		                         "max_idle_seconds must be positive",
		                         AIRLOCK_POOL_PER_KEY_MAX);
	if (!airlock_exec_pool_capable(exec))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.pool.size=%lld: the %s mechanism has no warm pool; "
		                         "set service.pool.size to 0",
		                         (long long)cfg->size, airlock_exec_name(exec));
	svc_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "service.pool");
	p->exec = exec;
	p->cfg = *cfg;
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->wake, &ca);
	pthread_condattr_destroy(&ca);
	p->max_keys = (size_t)(cfg->size / cfg->per_key);
	unsigned nt = cfg->refill_threads ? cfg->refill_threads : 2;
	p->keys = calloc(p->max_keys, sizeof(*p->keys));
	p->threads = calloc(nt, sizeof(*p->threads));
	bool oom = !p->keys || !p->threads;
	for (size_t i = 0; !oom && i < p->max_keys; i++)
		oom = !(p->keys[i].v = calloc((size_t)cfg->per_key, sizeof(pool_entry)));
	if (oom) {
		pool_release(p);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "service.pool");
	}
	for (unsigned i = 0; i < nt; i++) {
		int e = pthread_create(&p->threads[i], NULL, refill_main, p);
		if (e != 0) {
			svc_pool_stop(p);
			svc_pool_free(p);
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "service.pool: threads");
		}
		p->n_threads++;
	}
	*ret = p;
	return 0;
}

void svc_pool_stop(svc_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);
}

void svc_pool_free(svc_pool *p)
{
	if (!p)
		return;
	svc_pool_stop(p);
	for (unsigned i = 0; i < p->n_threads; i++)
		pthread_join(p->threads[i], NULL);
	pool_release(p);
}

void svc_pool_stats_get(svc_pool *p, svc_pool_stats *ret)
{
	pthread_mutex_lock(&p->lock);
	*ret = p->st;
	ret->idle = 0;
	ret->keys = 0;
	for (size_t i = 0; i < p->max_keys; i++) {
		ret->idle += p->keys[i].n;
		ret->keys += p->keys[i].used;
	}
	pthread_mutex_unlock(&p->lock);
}

/* ---- the claim ---------------------------------------------------------------- */

/* The oldest idle id of any key, taken out of its list (for room at the
 * cap). Caller holds the lock. */
static bool take_oldest(svc_pool *p, pool_entry *ret)
{
	pool_key *from = NULL;
	for (size_t i = 0; i < p->max_keys; i++)
		if (p->keys[i].n > 0 && (!from || p->keys[i].v[0].born_ms < from->v[0].born_ms))
			from = &p->keys[i];
	if (!from)
		return false;
	*ret = from->v[0];
	memmove(from->v, from->v + 1, (from->n - 1) * sizeof(*from->v));
	from->n--;
	return true;
}

int svc_pool_take(svc_pool *p, const airlock_environment_spec *spec, const char *want_id,
                  airlock_environment_handle *ret)
{
	if (!p)
		return 0;
	pool_entry discard;
	bool has_discard = false;
	pthread_mutex_lock(&p->lock);
	pool_key *k = spec_poolable(spec) && !p->stopping ? key_find(p, spec) : NULL;
	if (k) {
		k->last_used_ms = now_ms();
		/* Oldest first: the one nearest its idle bound is used before
		 * it expires unclaimed. */
		while (k && k->n > 0) {
			pool_entry e = k->v[0];
			memmove(k->v, k->v + 1, (k->n - 1) * sizeof(*k->v));
			k->n--;
			k->claiming++;
			uint64_t serial = k->serial;
			pthread_mutex_unlock(&p->lock);
			airlock_error err = { 0 };
			int r = airlock_exec_pool_claim(p->exec, e.id, spec, want_id, ret, &err);
			pthread_mutex_lock(&p->lock);
			k = key_by_serial(p, serial);
			if (k)
				k->claiming--;
			if (r == 0) {
				p->st.hits++;
				/* One fewer: a refill starts now. */
				pthread_cond_signal(&p->wake);
				pthread_mutex_unlock(&p->lock);
				service_metrics_pool_take(p->cfg.metrics, true, now_ms() - e.born_ms);
				return 1;
			}
			pthread_cond_signal(&p->wake);
			if (airlock_exec_pool_ready(p->exec, e.id)) {
				/* The spec was refused with the sandbox untouched
				 * (its validation, an id already live, an egress
				 * the policy refuses): it goes back, first, and the
				 * plain provision says why. */
				if (k && (int64_t)k->n < p->cfg.per_key) {
					memmove(k->v + 1, k->v, k->n * sizeof(*k->v));
					k->v[0] = e;
					k->n++;
				} else {
					/* Its key was replaced meanwhile: the
					 * sandbox is no key's, and goes now. */
					discard = e;
					has_discard = true;
				}
				break;
			}
			/* Gone (its idle bound), or its claim failed and the core
			 * destroyed it: the next one. */
		}
	}
	p->st.misses++;
	/* The plain provision must not be refused for the pool's sake: at
	 * the cap, an idle pooled sandbox makes room. */
	pool_entry room;
	bool make_room = p->cfg.max_sandboxes > 0 &&
	                 airlock_exec_live(p->exec) >= p->cfg.max_sandboxes && take_oldest(p, &room);
	pthread_mutex_unlock(&p->lock);
	service_metrics_pool_take(p->cfg.metrics, false, 0);
	if (has_discard)
		airlock_exec_pool_discard(p->exec, discard.id, "pool_evicted", NULL);
	if (make_room)
		airlock_exec_pool_discard(p->exec, room.id, "pool_evicted", NULL);
	return 0;
}

void svc_pool_learn(svc_pool *p, const airlock_environment_spec *spec)
{
	if (!p || !spec_poolable(spec))
		return;
	pool_entry evicted[AIRLOCK_POOL_PER_KEY_MAX];
	size_t n_evicted = 0;
	pthread_mutex_lock(&p->lock);
	if (!p->stopping && !key_find(p, spec) && key_learn(p, spec, evicted, &n_evicted))
		pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);
	for (size_t i = 0; i < n_evicted; i++)
		airlock_exec_pool_discard(p->exec, evicted[i].id, "pool_evicted", NULL);
}
