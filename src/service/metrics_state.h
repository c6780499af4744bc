/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_SERVICE_METRICS_STATE_H
#define AIRLOCK_SERVICE_METRICS_STATE_H

/*
 * What the metrics' files share (service/metrics.h has the module's
 * contract): the histograms' bounds, the closed vocabularies, the counters
 * and the service_metrics struct, and the lifecycle log's writer that the
 * observer (metrics.c) and the proxy-log follower (metrics_follow.c) use.
 */

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "airlock/egress.h"
#include "service/metrics.h"

/* ---- histograms --------------------------------------------------------- */

/* Provision latency, 1 ms to 60 s (the start budget's range): a
 * container start is in the low milliseconds, a gVisor or microVM start in
 * the hundreds, a cold image past a second. Upper bounds in ms and as the
 * exposition writes them (seconds, the Prometheus base unit), kept side by
 * side so no float is formatted at render time. */
static const int64_t latency_bounds_ms[] = { 1,    2,    5,    10,   20,    50,    100,   200,
	                                     500,  1000, 2000, 5000, 10000, 20000, 30000, 60000 };
static const char *const latency_bounds_text[] = { "0.001", "0.002", "0.005", "0.01",
	                                           "0.02",  "0.05",  "0.1",   "0.2",
	                                           "0.5",   "1",     "2",     "5",
	                                           "10",    "20",    "30",    "60" };
#define LATENCY_BUCKETS (sizeof(latency_bounds_ms) / sizeof(latency_bounds_ms[0]))
_Static_assert(LATENCY_BUCKETS == sizeof(latency_bounds_text) / sizeof(latency_bounds_text[0]),
               "one text per latency bound");

/* Utilization, busy_ms / lifetime: the low end is resolved finely because a
 * low share is the finding ("held across waits that should have released
 * them"). In parts per million, the precision the sum is kept in. */
static const int64_t util_bounds_ppm[] = { 10000,  50000,  100000, 250000,
	                                   500000, 750000, 900000, 1000000 };
static const char *const util_bounds_text[] = { "0.01", "0.05", "0.1", "0.25",
	                                        "0.5",  "0.75", "0.9", "1" };
#define UTIL_BUCKETS (sizeof(util_bounds_ppm) / sizeof(util_bounds_ppm[0]))
_Static_assert(UTIL_BUCKETS == sizeof(util_bounds_text) / sizeof(util_bounds_text[0]),
               "one text per utilization bound");
#define PPM 1000000

/* Non-cumulative counts per bucket (the last one is +Inf), the sum in the
 * bucket's unit (ms, ppm). */
typedef struct histogram {
	uint64_t bucket[LATENCY_BUCKETS + 1];
	uint64_t count;
	uint64_t sum;
} histogram;
_Static_assert(UTIL_BUCKETS <= LATENCY_BUCKETS, "the histogram holds both");

/* A pooled sandbox's idle age at its claim, 0.1 s to a day (the pool's
 * idle bound, service.pool.max_idle_seconds, is at most that). */
static const int64_t idle_bounds_ms[] = { 100,    1000,    5000,    10000,   30000,   60000,
	                                  120000, 300000,  600000,  1800000, 3600000, 86400000 };
static const char *const idle_bounds_text[] = { "0.1", "1",   "5",    "10",   "30",   "60",
	                                        "120", "300", "600",  "1800", "3600", "86400" };
#define IDLE_BUCKETS (sizeof(idle_bounds_ms) / sizeof(idle_bounds_ms[0]))
_Static_assert(IDLE_BUCKETS == sizeof(idle_bounds_text) / sizeof(idle_bounds_text[0]),
               "one text per idle bound");
_Static_assert(IDLE_BUCKETS <= LATENCY_BUCKETS, "the histogram holds it");

/* ---- the closed vocabularies -------------------------------------------- */

/* At most this many mechanisms are told apart (a service runs one; the
 * tests several); the last slot is "other", for a name past the table or
 * one that is not a plain identifier. */
#define METRICS_MECHANISMS_MAX 8
#define MECHANISM_NAME_MAX 32
#define MECHANISM_OTHER (METRICS_MECHANISMS_MAX - 1)

/* The destroy reasons the core gives (airlock_exec_event.reason). */
static const char *const destroy_reasons[] = { "request",   "expired",      "suspicion",
	                                       "shutdown",  "reaped",       "pool_idle",
	                                       "pool_evicted", "pool_claim_failed", "other" };
/* The reaper's destroys: airlock_sandbox_orphan_reaps_total. */
#define DESTROY_REASON_REAPED 4
#define DESTROY_REASONS (sizeof(destroy_reasons) / sizeof(destroy_reasons[0]))

/* The egress proxy's decision lines (include/airlock/proxy.h). Outcomes: */
enum { OUT_ALLOWED, OUT_REFUSED, OUT_FAILED, OUT__MAX };
static const char *const outcomes[OUT__MAX] = { "allowed", "refused", "failed" };

/* Reasons: the evaluation's (airlock_egress_reason, by its own name table,
 * so a reason added there is known here at once) and then the proxy's own,
 * which the proxy process's files (src/egress/proxy_loop.h) write as
 * literals (tests/test_service_metrics.c reads them and checks that each of
 * those is known here). Each with the
 * outcome it is written under, so the series an operator alerts on exist
 * at 0 before the first decision. */
typedef struct proxy_reason {
	const char *name;
	int outcome;
} proxy_reason;
static const proxy_reason proxy_reasons[] = {
	{ "METHOD_NOT_ALLOWED", OUT_REFUSED }, { "BAD_REQUEST", OUT_REFUSED },
	{ "REQUEST_TIMEOUT", OUT_REFUSED },    { "CLIENT_CLOSED", OUT_REFUSED },
	{ "DIAL_TIMEOUT", OUT_FAILED },        { "DIAL_FAILED", OUT_FAILED },
	{ "PROXY_RESOURCES", OUT_FAILED },     { "PROXY_BUSY", OUT_FAILED },
	{ "PROXY_FULL", OUT_FAILED },
};
#define EVAL_REASONS ((size_t)AIRLOCK_EGRESS_REASON__MAX - 1) /* without INVALID */
#define PROXY_REASONS (sizeof(proxy_reasons) / sizeof(proxy_reasons[0]))
#define REASON_OTHER (EVAL_REASONS + PROXY_REASONS)
#define REASONS (REASON_OTHER + 1)

static inline const char *reason_name(size_t i)
{
	if (i < EVAL_REASONS)
		return airlock_egress_reason_name((airlock_egress_reason)(i + 1));
	if (i < REASON_OTHER)
		return proxy_reasons[i - EVAL_REASONS].name;
	return "OTHER";
}

/* The outcome a reason is normally written under, or -1 (OTHER). */
static inline int reason_outcome(size_t i)
{
	if (i < EVAL_REASONS)
		return i + 1 == AIRLOCK_EGRESS_ALLOWED ? OUT_ALLOWED : OUT_REFUSED;
	if (i < REASON_OTHER)
		return proxy_reasons[i - EVAL_REASONS].outcome;
	return -1;
}

static inline size_t reason_index(const char *s)
{
	for (size_t i = 0; i < REASON_OTHER; i++)
		if (strcmp(s, reason_name(i)) == 0)
			return i;
	return REASON_OTHER;
}

/* ---- the state ------------------------------------------------------------ */

typedef struct mechanism {
	char name[MECHANISM_NAME_MAX];
	histogram latency;     /* ms */
	histogram utilization; /* ppm */
} mechanism;

typedef struct counters {
	mechanism mech[METRICS_MECHANISMS_MAX];
	size_t n_mech; /* used slots before MECHANISM_OTHER */
	uint64_t other_used; /* the "other" slot has been counted into */
	uint64_t executions[AIRLOCK_KILL__MAX];
	uint64_t provision_failures[AIRLOCK_ERR__MAX];
	uint64_t execute_failures[AIRLOCK_ERR__MAX];
	uint64_t destroyed[DESTROY_REASONS];
	uint64_t destroy_failures;
	uint64_t egress[OUT__MAX][REASONS];
	uint64_t egress_delayed;      /* connections held past the accept rate */
	uint64_t egress_log_dropped;  /* lines the proxy could not queue */
	uint64_t egress_malformed;    /* lines that are not a decision */
	uint64_t log_lines;
	uint64_t log_dropped;
	uint64_t reaper_errors[SERVICE_REAPER_ERROR__MAX]; /* passes or batches that failed */
	uint64_t reaper_unasked;  /* ids an answer named that its question did not */
	uint64_t destroy_alerts;  /* failed reaper destroys at or past the alert count */
	/* The warm pool (service/pool.h). */
	uint64_t pool_hits, pool_misses, pool_refill_failures;
	histogram pool_refill; /* ms, a refill's provision */
	histogram pool_idle;   /* ms, a claimed sandbox's time in the pool */
} counters;

struct service_metrics {
	pthread_mutex_t lock;
	counters c;
	int log_fd;
	bool log_send; /* a socket: send(MSG_DONTWAIT) */
	/* The egress log follower (service_metrics_egress_follow). */
	int follow_fd, stop_efd;
	pthread_t follow_thread;
	bool following;
};

static inline size_t errclass_index(const airlock_error *e)
{
	if (!e || (unsigned)e->cls >= AIRLOCK_ERR__MAX)
		return AIRLOCK_ERR_INVALID;
	return (size_t)e->cls;
}

/* ---- the lifecycle log (metrics_log.c) ------------------------------------------ */

/* Longest line written: a write of at most PIPE_BUF bytes to a pipe is
 * atomic, so on a pipe a line is written whole or not at all (EAGAIN),
 * never half; lines from several threads then never interleave either. */
#define LINE_MAX_BYTES PIPE_BUF

/* The lifecycle log's descriptor for fd (a new one; *ret_send: a socket),
 * or -errno. */
int metrics_log_open(int fd, bool *ret_send);
/* The line for build(cap) at the largest cap that fits LINE_MAX_BYTES with
 * its newline (malloc'd, newline-terminated), or NULL. */
char *metrics_fitted_line(char *(*build)(const void *arg, size_t cap), const void *arg,
                          size_t *ret_len);
/* A lifecycle event's line (arg: the airlock_exec_event), for metrics_fitted_line. */
char *metrics_build_event(const void *arg, size_t cap);
/* One write(2) that never waits; the line counted as written or dropped
 * (line NULL: dropped). */
void metrics_log_write(service_metrics *m, const char *line, size_t len);

/* ---- the proxy's decision lines (metrics.c, metrics_follow.c) ------------------------ */

/* A decision line is a parser's input from another process: one that does
 * not have the shape is counted, and nothing of it is kept. */
#define EGRESS_LINE_MAX 65536

#endif
