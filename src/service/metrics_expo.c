/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics' exposition (Prometheus text format 0.0.4): a copy of the
 * counters taken under the lock, formatted without it.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "service/metrics_state.h"
#include "util/util.h"

/* A label value: backslash, double quote and line feed escaped as the
 * format requires. The values are from the tables of metrics_state.h or checked
 * mechanism names, so this is the format's rule applied, not a filter. */
static void label_value(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '"')
			fputs("\\\"", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void one_label(FILE *f, const char *name, const char *label, const char *value,
                      uint64_t v)
{
	fprintf(f, "%s{%s=\"", name, label);
	label_value(f, value);
	fprintf(f, "\"} %" PRIu64 "\n", v);
}

/* sum in units of 1/scale, written as a decimal with exactly the digits
 * scale has (1000: ms as seconds, PPM: a ratio). */
static void histogram_series(FILE *f, const char *name, const char *mech, const histogram *h,
                             const char *const *bounds, size_t n, uint64_t scale,
                             int decimals)
{
	uint64_t cum = 0;
	for (size_t i = 0; i <= n; i++) {
		cum += h->bucket[i];
		fprintf(f, "%s_bucket{mechanism=\"", name);
		label_value(f, mech);
		fprintf(f, "\",le=\"%s\"} %" PRIu64 "\n", i < n ? bounds[i] : "+Inf", cum);
	}
	fprintf(f, "%s_sum{mechanism=\"", name);
	label_value(f, mech);
	fprintf(f, "\"} %" PRIu64 ".%0*" PRIu64 "\n", h->sum / scale, decimals, h->sum % scale);
	fprintf(f, "%s_count{mechanism=\"", name);
	label_value(f, mech);
	fprintf(f, "\"} %" PRIu64 "\n", h->count);
}

/* A histogram without labels (the warm pool's: the service runs one
 * mechanism, and its other series carry that). */
static void histogram_plain(FILE *f, const char *name, const char *help, const histogram *h,
                            const char *const *bounds, size_t n)
{
	family(f, name, "histogram", help);
	uint64_t cum = 0;
	for (size_t i = 0; i <= n; i++) {
		cum += h->bucket[i];
		fprintf(f, "%s_bucket{le=\"%s\"} %" PRIu64 "\n", name, i < n ? bounds[i] : "+Inf", cum);
	}
	fprintf(f, "%s_sum %" PRIu64 ".%03" PRIu64 "\n", name, h->sum / 1000, h->sum % 1000);
	fprintf(f, "%s_count %" PRIu64 "\n", name, h->count);
}

/* The mechanisms to write: the named slots, and "other" once used. */
static size_t mech_rows(const counters *c, size_t idx[METRICS_MECHANISMS_MAX])
{
	size_t n = 0;
	for (size_t i = 0; i < c->n_mech; i++)
		idx[n++] = i;
	if (c->other_used)
		idx[n++] = MECHANISM_OTHER;
	return n;
}

static const char *mech_name(const counters *c, size_t i)
{
	return i == MECHANISM_OTHER ? "other" : c->mech[i].name;
}

/* A family of one series without labels. */
static void scalar(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
	family(f, name, type, help);
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/* A counter by error class: every class of the specification at 0 and up;
 * the generic class (an event without an error object) once it counts. */
static void by_class(FILE *f, const char *name, const char *help,
                     const uint64_t v[AIRLOCK_ERR__MAX])
{
	family(f, name, "counter", help);
	for (size_t k = 1; k < AIRLOCK_ERR__MAX; k++)
		one_label(f, name, "class", airlock_errclass_name((airlock_errclass)k), v[k]);
	if (v[AIRLOCK_ERR_INVALID])
		one_label(f, name, "class", airlock_errclass_name(AIRLOCK_ERR_INVALID),
		          v[AIRLOCK_ERR_INVALID]);
}

static void render(FILE *f, const counters *c, size_t live)
{
	size_t idx[METRICS_MECHANISMS_MAX];
	size_t nm = mech_rows(c, idx);

	family(f, "airlock_sandbox_provision_duration_seconds", "histogram",
	       "Time a successful provision took, per mechanism.");
	for (size_t i = 0; i < nm; i++)
		histogram_series(f, "airlock_sandbox_provision_duration_seconds",
		                 mech_name(c, idx[i]), &c->mech[idx[i]].latency,
		                 latency_bounds_text, LATENCY_BUCKETS, 1000, 3);

	family(f, "airlock_sandbox_utilization_ratio", "histogram",
	       "Share of a destroyed sandbox's lifetime spent inside execute, per mechanism.");
	for (size_t i = 0; i < nm; i++)
		histogram_series(f, "airlock_sandbox_utilization_ratio", mech_name(c, idx[i]),
		                 &c->mech[idx[i]].utilization, util_bounds_text, UTIL_BUCKETS,
		                 PPM, 6);

	family(f, "airlock_sandbox_executions_total", "counter",
	       "Commands that produced a result, by kill reason (none: not killed).");
	for (size_t k = 0; k < AIRLOCK_KILL__MAX; k++) {
		const char *n = airlock_kill_reason_name((airlock_kill_reason)k);
		one_label(f, "airlock_sandbox_executions_total", "killed_by", n ? n : "none",
		          c->executions[k]);
	}

	by_class(f, "airlock_sandbox_execute_failures_total",
	         "Executes that produced no result, by error class.", c->execute_failures);
	by_class(f, "airlock_sandbox_provision_failures_total",
	         "Provisions refused or failed, by error class.", c->provision_failures);

	family(f, "airlock_sandbox_destroyed_total", "counter",
	       "Sandboxes destroyed, by why (request, expired, suspicion, shutdown, reaped).");
	for (size_t k = 0; k < DESTROY_REASONS; k++)
		one_label(f, "airlock_sandbox_destroyed_total", "reason", destroy_reasons[k],
		          c->destroyed[k]);

	scalar(f, "airlock_sandbox_destroy_failures_total", "counter",
	       "Destroys that failed (the sandbox's record stays for a retry).", c->destroy_failures);

	scalar(f, "airlock_sandbox_orphan_reaps_total", "counter",
	       "Sandboxes the reaper destroyed because the worker tier called their lease stale.",
	       c->destroyed[DESTROY_REASON_REAPED]);

	scalar(f, "airlock_sandbox_destroy_alerts_total", "counter",
	       "Failed reaper destroys of a sandbox at or past service.reaper_destroy_alert_after "
	       "failures (each one logged at level alert).",
	       c->destroy_alerts);

	family(f, "airlock_reaper_errors_total", "counter",
	       "Reaper questions to the worker tier without a usable answer, by reason.");
	for (size_t k = 0; k < SERVICE_REAPER_ERROR__MAX; k++)
		one_label(f, "airlock_reaper_errors_total", "reason",
		          service_reaper_error_name((service_reaper_error)k), c->reaper_errors[k]);

	scalar(f, "airlock_reaper_unasked_ids_total", "counter",
	       "Ids a worker tier's answer named that its question did not ask about (ignored).",
	       c->reaper_unasked);

	scalar(f, "airlock_pool_hits_total", "counter",
	       "Provisions served by a warm-pool sandbox (service.pool).", c->pool_hits);
	scalar(f, "airlock_pool_misses_total", "counter",
	       "Provisions the warm pool could not serve (provisioned the plain way).",
	       c->pool_misses);
	scalar(f, "airlock_pool_refill_failures_total", "counter",
	       "Warm-pool refills whose provision failed.", c->pool_refill_failures);
	histogram_plain(f, "airlock_pool_refill_duration_seconds",
	                "Time a successful warm-pool refill's provision took.", &c->pool_refill,
	                latency_bounds_text, LATENCY_BUCKETS);
	histogram_plain(f, "airlock_pool_idle_age_seconds",
	                "Time a claimed warm-pool sandbox had waited in the pool.", &c->pool_idle,
	                idle_bounds_text, IDLE_BUCKETS);

	scalar(f, "airlock_sandboxes_live", "gauge", "Sandboxes provisioned and not destroyed.",
	       (uint64_t)live);

	family(f, "airlock_egress_decisions_total", "counter",
	       "Egress proxy connections by outcome and reason.");
	for (int o = 0; o < OUT__MAX; o++)
		for (size_t r = 0; r < REASONS; r++) {
			if (reason_outcome(r) != o && !c->egress[o][r])
				continue;
			fprintf(f, "airlock_egress_decisions_total{outcome=\"%s\",reason=\"", outcomes[o]);
			label_value(f, reason_name(r));
			fprintf(f, "\"} %" PRIu64 "\n", c->egress[o][r]);
		}

	scalar(f, "airlock_egress_delayed_connections_total", "counter",
	       "Connections held in the listen queue past a sandbox's accept rate.", c->egress_delayed);

	scalar(f, "airlock_egress_log_dropped_total", "counter",
	       "Decision lines the egress proxy dropped (its log queue was full).", c->egress_log_dropped);

	scalar(f, "airlock_egress_lines_malformed_total", "counter",
	       "Egress proxy log lines that were not a decision or did not decode.", c->egress_malformed);

	scalar(f, "airlock_lifecycle_log_lines_total", "counter",
	       "Lifecycle log lines written.", c->log_lines);

	scalar(f, "airlock_lifecycle_log_dropped_total", "counter",
	       "Lifecycle log lines not written (the log would have blocked or failed).", c->log_dropped);
}

char *service_metrics_render(service_metrics *m, size_t live, size_t *ret_len)
{
	/* A copy, so the formatting (and its allocations) happens without the
	 * lock; the struct is a few kilobytes of counters. */
	counters *snap = malloc(sizeof(*snap));
	if (!snap)
		return NULL;
	pthread_mutex_lock(&m->lock);
	*snap = m->c;
	pthread_mutex_unlock(&m->lock);

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f) {
		free(snap);
		return NULL;
	}
	render(f, snap, live);
	free(snap);
	bool bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		free(buf);
		return NULL;
	}
	if (ret_len)
		*ret_len = len;
	return buf;
}
