/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_SERVICE_METRICS_H
#define AIRLOCK_SERVICE_METRICS_H

/*
 * The execution service's tracked metrics (the specification, "Tracked
 * metrics") and its lifecycle log: both fed by the core's lifecycle events
 * (airlock_exec_observer) and by the egress proxy's decision lines.
 *
 * Metrics are rendered in the Prometheus text exposition format (0.0.4) on
 * the operator listener; labels carry the mechanism and closed vocabularies
 * (kill reasons, refusal reasons, event kinds) only, never a tenant or a
 * run, so a scrape holds no tenant data and its size is bounded.
 *
 * The log is one JSON object per line per lifecycle event, with
 * environment, tenant, run and epoch, written with one write(2) each so
 * lines from several threads never interleave.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/port/exec.h"

typedef struct service_metrics service_metrics;

/* log_fd: where the lifecycle lines go (duplicated; -1: none). A pipe,
 * FIFO or terminal is opened anew non-blocking (the caller's descriptor
 * keeps its flags); a socket is written with MSG_DONTWAIT. A line that
 * would block or fails is dropped and counted
 * (airlock_lifecycle_log_dropped_total), never waited for. A line is at
 * most PIPE_BUF bytes (untrusted strings in it are cut to fit), so a pipe
 * takes it whole or not at all. */
int service_metrics_new(int log_fd, service_metrics **ret, airlock_error *err);
void service_metrics_free(service_metrics *m);

/* Name a mechanism before its first event, so that its histograms are
 * exposed (at 0) from the first scrape. At most 7 mechanisms are told
 * apart; later ones, and names that are not one printable-ASCII word of
 * under 32 bytes, are counted as mechanism="other". */
void service_metrics_mechanism(service_metrics *m, const char *name);

/* The observer to put in airlock_exec_config (observer_arg = m). */
const airlock_exec_observer *service_metrics_observer(void);

/* One decision line of the egress proxy (its JSON log line, without the
 * newline): counted by outcome and reason. Lines that do not parse are
 * counted as such, never trusted. */
void service_metrics_egress_line(service_metrics *m, const char *line, size_t len);

/* What one decision line says. Decoded in the library's budgeted decode
 * (core/json_internal.h): jansson out of memory, or the line's budget
 * spent, is an error here (counted by the caller as a malformed line),
 * never an abort of the service. 0, or DECODE (not JSON, empty, over
 * 64 KiB or over budget), or SYSTEM/ENOMEM. */
typedef struct service_egress_line {
	enum {
		SERVICE_EGRESS_MALFORMED, /* JSON, but not a decision's shape */
		SERVICE_EGRESS_DECISION,  /* outcome and reason (an index each) */
		SERVICE_EGRESS_DELAYED,   /* count connections delayed */
		SERVICE_EGRESS_DROPPED,   /* count lines the proxy dropped */
	} kind;
	int outcome;
	size_t reason;
	uint64_t count;
} service_egress_line;
int service_metrics_egress_line_decode(const char *line, size_t len, service_egress_line *ret,
                                       airlock_error *err);

/* Write one service-level line (start, stop, refusal to start) in the same
 * JSON shape: {"ts_ms", "event", "message"}. */
void service_metrics_log(service_metrics *m, const char *event, const char *message);

/* A service-level line with a level ("info", "error", "alert"):
 * {"ts_ms", "level", "event", "message"}. "alert" is the one an operator
 * pages on (docs/reaper.md). */
void service_metrics_log_level(service_metrics *m, const char *level, const char *event,
                               const char *message);

/* The reaper's counts (docs/reaper.md). Why a question to the worker tier
 * got no usable answer, a closed vocabulary
 * (airlock_reaper_errors_total{reason}): */
typedef enum service_reaper_error {
	SERVICE_REAPER_UNREACHABLE, /* no connection (refused, no socket, no route, DNS) */
	SERVICE_REAPER_TLS,         /* handshake or certificate verification failed */
	SERVICE_REAPER_TIMEOUT,     /* connect or the whole request past its bound */
	SERVICE_REAPER_IO,          /* the connection failed or closed mid-answer */
	SERVICE_REAPER_STATUS,      /* an answer other than 200 */
	SERVICE_REAPER_MALFORMED,   /* not HTTP/1.x, or a body that is not the answer's shape */
	SERVICE_REAPER_TOO_LARGE,   /* past AIRLOCK_REAPER_ANSWER_MAX */
	SERVICE_REAPER_INTERNAL,    /* the service's own failure: memory, the listing */
	SERVICE_REAPER_ERROR__MAX
} service_reaper_error;
const char *service_reaper_error_name(service_reaper_error e); /* "unreachable", ... */
void service_metrics_reaper_error(service_metrics *m, service_reaper_error e);
/* n ids an answer named that its question had not asked about (ignored). */
void service_metrics_reaper_unasked(service_metrics *m, uint64_t n);
/* One failed reaper destroy of a sandbox that has failed
 * service.reaper_destroy_alert_after times or more
 * (airlock_sandbox_destroy_alerts_total). */
void service_metrics_destroy_alert(service_metrics *m);

/* The warm pool (service/pool.h): a provision the pool served (hit, with
 * the sandbox's idle age) or did not; a refill's provision, its latency.
 * m NULL: nothing counted. */
void service_metrics_pool_take(service_metrics *m, bool hit, int64_t idle_ms);
void service_metrics_pool_refill(service_metrics *m, bool ok, int64_t ms);

/* The whole exposition; live is the current number of live sandboxes.
 * malloc'd, NUL-terminated; NULL on allocation failure. */
char *service_metrics_render(service_metrics *m, size_t live, size_t *ret_len);

/* Follow the egress proxy's log: a thread reads lines from fd (the read
 * end of the pipe given to the proxy as its log_fd; owned from now on, also
 * on failure), counts each (service_metrics_egress_line) and copies it to
 * the lifecycle log (one write each, as the lifecycle lines; a line past
 * PIPE_BUF is counted as a dropped log line rather than split). A line
 * longer than 64 KiB is counted as malformed and skipped to its end. The thread ends at end of file or at
 * service_metrics_free. At most one follower per service_metrics. */
int service_metrics_egress_follow(service_metrics *m, int fd, airlock_error *err);

/* The operator listener: GET /metrics answers the exposition (text format
 * 0.0.4) with live from live_fn(live_arg) (airlock_exec_live, say); any
 * other path is 404, any other method 405. listen_fd is a bound, listening
 * socket (Unix or TCP), owned from now on, also on failure. No credential:
 * a scrape holds no tenant data and no secret (labels are closed
 * vocabularies), so the listener belongs on an operator network or a Unix
 * socket of the operator's group, never the worker network. Bounded: at
 * most 16 connections, 16 KiB of request memory each, 10 s idle. */
typedef struct service_metrics_listener service_metrics_listener;
int service_metrics_listener_new(service_metrics *m, int listen_fd, size_t (*live_fn)(void *),
                                 void *live_arg, service_metrics_listener **ret,
                                 airlock_error *err);
/* Stops serving and waits for the requests in flight. NULL is a no-op.
 * Free the listener before its service_metrics. */
void service_metrics_listener_free(service_metrics_listener *l);

#endif
