/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's metrics: their state's life (service_metrics_new, _free),
 * the counters fed by the core's lifecycle events (the observer) and by the
 * egress proxy's decision lines. The lifecycle log is metrics_log.c, the
 * proxy-log follower metrics_follow.c, the exposition metrics_expo.c, the
 * operator listener metrics_listen.c.
 *
 * The counters are fixed arrays under one mutex: every event is a few
 * additions, a scrape copies the whole struct under the lock and formats
 * the copy without it, so a slow scrape never holds an event up and the
 * memory the module uses does not grow with what it is told. Labels come
 * from closed tables (the kill reasons, the error classes, the proxy's
 * outcomes and reasons, the destroy reasons) or from the mechanism names,
 * of which there are at most METRICS_MECHANISMS_MAX: a value outside a
 * table is counted under "other"/"OTHER", never copied into a label, so
 * nothing a tenant controls reaches a scrape and its size is bounded.
 */
#include "service/metrics.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "airlock/egress.h"
#include "core/json_internal.h"
#include "service/metrics_state.h"
#include "util/util.h"

static void histogram_add(histogram *h, const int64_t *bounds, size_t n, int64_t v)
{
	size_t i = 0;
	while (i < n && v > bounds[i])
		i++;
	h->bucket[i]++;
	h->count++;
	h->sum += (uint64_t)v;
}

/* A mechanism name as it may stand in a label: an identifier of the
 * adapter table ("fake", "native", "gvisor", "remote(native)"). */
static bool mechanism_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n >= MECHANISM_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x21 || s[i] > 0x7e)
			return false;
	return true;
}

/* The slot of a mechanism, taking a free one; under the lock. */
static mechanism *mechanism_slot(counters *c, const char *name)
{
	if (mechanism_name_ok(name)) {
		for (size_t i = 0; i < c->n_mech; i++)
			if (strcmp(c->mech[i].name, name) == 0)
				return &c->mech[i];
		if (c->n_mech < MECHANISM_OTHER) {
			mechanism *s = &c->mech[c->n_mech++];
			memcpy(s->name, name, strlen(name) + 1);
			return s;
		}
	}
	c->other_used = 1;
	return &c->mech[MECHANISM_OTHER];
}

static size_t destroy_reason_index(const char *s)
{
	for (size_t i = 0; s && i + 1 < DESTROY_REASONS; i++)
		if (strcmp(s, destroy_reasons[i]) == 0)
			return i;
	return DESTROY_REASONS - 1;
}

/* ---- the entry points ------------------------------------------------------- */

int service_metrics_new(int log_fd, service_metrics **ret, airlock_error *err)
{
	service_metrics *m = calloc(1, sizeof(*m));
	if (!m)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "metrics");
	m->log_fd = -1;
	m->follow_fd = -1;
	m->stop_efd = -1;
	if (log_fd >= 0) {
		int fd = metrics_log_open(log_fd, &m->log_send);
		if (fd < 0) {
			free(m);
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -fd,
			                         "the lifecycle log descriptor");
		}
		m->log_fd = fd;
	}
	int r = pthread_mutex_init(&m->lock, NULL);
	if (r != 0) {
		if (m->log_fd >= 0)
			close(m->log_fd);
		free(m);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, r, "metrics lock");
	}
	*ret = m;
	return 0;
}

void service_metrics_free(service_metrics *m)
{
	if (!m)
		return;
	if (m->following) {
		uint64_t one = 1;
		(void)!write(m->stop_efd, &one, sizeof(one));
		pthread_join(m->follow_thread, NULL);
	}
	if (m->follow_fd >= 0)
		close(m->follow_fd);
	if (m->stop_efd >= 0)
		close(m->stop_efd);
	if (m->log_fd >= 0)
		close(m->log_fd);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void service_metrics_mechanism(service_metrics *m, const char *name)
{
	pthread_mutex_lock(&m->lock);
	(void)mechanism_slot(&m->c, name);
	pthread_mutex_unlock(&m->lock);
}

/* Busy over lifetime in ppm, within [0, 1]: busy_ms is measured inside
 * execute and the lifetime around it, so busy can exceed the lifetime only
 * by clock granularity; a zero lifetime with no busy time is an idle
 * sandbox, with some a busy one. */
static int64_t utilization_ppm(int64_t busy, int64_t lifetime)
{
	if (busy <= 0)
		return 0;
	if (busy >= lifetime)
		return PPM;
	return busy * PPM / lifetime;
}

static void on_event(void *arg, const airlock_exec_event *ev)
{
	service_metrics *m = arg;
	pthread_mutex_lock(&m->lock);
	counters *c = &m->c;
	switch (ev->kind) {
	case AIRLOCK_EXEC_EVENT_PROVISIONED:
		histogram_add(&mechanism_slot(c, ev->mechanism)->latency, latency_bounds_ms,
		              LATENCY_BUCKETS, ev->duration_ms > 0 ? ev->duration_ms : 0);
		break;
	case AIRLOCK_EXEC_EVENT_PROVISION_FAILED:
		c->provision_failures[errclass_index(ev->error)]++;
		break;
	case AIRLOCK_EXEC_EVENT_EXECUTED:
		/* The core's result check refuses a reason outside the
		 * vocabulary before the event; one that got past it anyway
		 * is not invented a label. */
		if ((unsigned)ev->killed_by < AIRLOCK_KILL__MAX)
			c->executions[ev->killed_by]++;
		break;
	case AIRLOCK_EXEC_EVENT_EXECUTE_FAILED:
		c->execute_failures[errclass_index(ev->error)]++;
		break;
	case AIRLOCK_EXEC_EVENT_DESTROYED:
		histogram_add(&mechanism_slot(c, ev->mechanism)->utilization, util_bounds_ppm,
		              UTIL_BUCKETS, utilization_ppm(ev->busy_ms, ev->duration_ms));
		c->destroyed[destroy_reason_index(ev->reason)]++;
		break;
	case AIRLOCK_EXEC_EVENT_DESTROY_FAILED:
		c->destroy_failures++;
		break;
	case AIRLOCK_EXEC_EVENT_INVALID:
	case AIRLOCK_EXEC_EVENT__MAX:
		pthread_mutex_unlock(&m->lock);
		return;
	}
	pthread_mutex_unlock(&m->lock);
	if (m->log_fd >= 0) {
		size_t len = 0;
		char *line = metrics_fitted_line(metrics_build_event, ev, &len);
		metrics_log_write(m, line, len);
		free(line);
	}
}

static const airlock_exec_observer metrics_observer = { .event = on_event };

const airlock_exec_observer *service_metrics_observer(void) { return &metrics_observer; }

/* Reads the tree, allocates nothing with jansson, keeps no pointer into it. */
static int egress_line_from(json_t *o, void *arg, airlock_error *err)
{
	(void)err;
	service_egress_line *l = arg;
	const char *out = json_string_value(json_object_get(o, "outcome"));
	const char *rsn = json_string_value(json_object_get(o, "reason"));
	json_t *cnt = json_object_get(o, "count");
	if (!out || !rsn)
		return 0;
	int outcome = -1;
	for (int i = 0; i < OUT__MAX; i++)
		if (strcmp(out, outcomes[i]) == 0)
			outcome = i;
	bool counted = json_is_integer(cnt) && json_integer_value(cnt) >= 0;
	if (counted)
		l->count = (uint64_t)json_integer_value(cnt);
	if (strcmp(out, "delayed") == 0 && strcmp(rsn, "RATE_LIMITED") == 0 && counted) {
		l->kind = SERVICE_EGRESS_DELAYED;
	} else if (outcome == OUT_FAILED && strcmp(rsn, "LOG_DROPPED") == 0 && counted) {
		l->kind = SERVICE_EGRESS_DROPPED;
	} else if (outcome >= 0) {
		l->kind = SERVICE_EGRESS_DECISION;
		l->outcome = outcome;
		l->reason = reason_index(rsn);
	}
	return 0;
}

int service_metrics_egress_line_decode(const char *line, size_t len, service_egress_line *ret,
                                       airlock_error *err)
{
	service_egress_line l = { .kind = SERVICE_EGRESS_MALFORMED, .reason = REASON_OTHER };
	if (!line || len == 0)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "egress decision line: empty");
	int r = core_json_decode(line, len, EGRESS_LINE_MAX, "egress decision line",
	                         egress_line_from, &l, err);
	if (r < 0)
		return r;
	*ret = l;
	return 0;
}

void service_metrics_egress_line(service_metrics *m, const char *line, size_t len)
{
	/* A line that does not decode (not JSON, over its memory budget, or
	 * out of memory) is counted as malformed like one of another shape. */
	service_egress_line l = { .kind = SERVICE_EGRESS_MALFORMED };
	if (service_metrics_egress_line_decode(line, len, &l, NULL) < 0)
		l.kind = SERVICE_EGRESS_MALFORMED;
	pthread_mutex_lock(&m->lock);
	switch (l.kind) {
	case SERVICE_EGRESS_DECISION: m->c.egress[l.outcome][l.reason]++; break;
	case SERVICE_EGRESS_DELAYED: m->c.egress_delayed += l.count; break;
	case SERVICE_EGRESS_DROPPED: m->c.egress_log_dropped += l.count; break;
	case SERVICE_EGRESS_MALFORMED: m->c.egress_malformed++; break;
	}
	pthread_mutex_unlock(&m->lock);
}

/* ---- the reaper's counts ----------------------------------------------------- */

static const char *const reaper_error_names[SERVICE_REAPER_ERROR__MAX] = {
	[SERVICE_REAPER_UNREACHABLE] = "unreachable", [SERVICE_REAPER_TLS] = "tls",
	[SERVICE_REAPER_TIMEOUT] = "timeout",         [SERVICE_REAPER_IO] = "io",
	[SERVICE_REAPER_STATUS] = "status",           [SERVICE_REAPER_MALFORMED] = "malformed",
	[SERVICE_REAPER_TOO_LARGE] = "too_large",     [SERVICE_REAPER_INTERNAL] = "internal",
};

const char *service_reaper_error_name(service_reaper_error e)
{
	return (unsigned)e < SERVICE_REAPER_ERROR__MAX ? reaper_error_names[e] : NULL;
}

void service_metrics_reaper_error(service_metrics *m, service_reaper_error e)
{
	if ((unsigned)e >= SERVICE_REAPER_ERROR__MAX)
		e = SERVICE_REAPER_INTERNAL;
	pthread_mutex_lock(&m->lock);
	m->c.reaper_errors[e]++;
	pthread_mutex_unlock(&m->lock);
}

void service_metrics_reaper_unasked(service_metrics *m, uint64_t n)
{
	pthread_mutex_lock(&m->lock);
	m->c.reaper_unasked += n;
	pthread_mutex_unlock(&m->lock);
}

void service_metrics_destroy_alert(service_metrics *m)
{
	pthread_mutex_lock(&m->lock);
	m->c.destroy_alerts++;
	pthread_mutex_unlock(&m->lock);
}

void service_metrics_pool_take(service_metrics *m, bool hit, int64_t idle_ms)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	if (hit) {
		m->c.pool_hits++;
		histogram_add(&m->c.pool_idle, idle_bounds_ms, IDLE_BUCKETS, idle_ms < 0 ? 0 : idle_ms);
	} else {
		m->c.pool_misses++;
	}
	pthread_mutex_unlock(&m->lock);
}

void service_metrics_pool_refill(service_metrics *m, bool ok, int64_t ms)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	if (ok)
		histogram_add(&m->c.pool_refill, latency_bounds_ms, LATENCY_BUCKETS, ms < 0 ? 0 : ms);
	else
		m->c.pool_refill_failures++;
	pthread_mutex_unlock(&m->lock);
}
