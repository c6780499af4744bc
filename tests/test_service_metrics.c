/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The execution service's metrics and lifecycle log (src/service/metrics.h):
 * the exposition is parsed back (text format 0.0.4: HELP and TYPE lines,
 * label escapes, histogram buckets cumulative up to +Inf == _count) and
 * every family, label and value checked; egress lines that are not a
 * decision are counted and never crash; events from 8 threads add up
 * exactly; every lifecycle event is one line of valid JSON with its fields,
 * whatever bytes a tenant id holds; a log that stops reading never blocks.
 * No root needed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "airlock/egress.h"
#include "airlock/fake.h"
#include "service/metrics.h"
#include "testlib.h"
#include "util/util.h"

/* ---- a parser of the exposition ----------------------------------------- */

#define SAMPLES_MAX 1024

typedef struct sample {
	char name[96];
	char labels[256]; /* k=v,k=v, values unescaped, in the order written */
	char value[48];
} sample;

typedef struct family_t {
	char name[96];
	char type[16];
	bool help;
} family_t;

typedef struct expo {
	sample s[SAMPLES_MAX];
	size_t n;
	family_t f[64];
	size_t nf;
} expo;

static bool name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       (!first && c >= '0' && c <= '9');
}

static const char *read_name(const char *p, char *out, size_t size)
{
	size_t n = 0;
	cr_assert(name_char(*p, true), "a metric or label name starts at '%.20s'", p);
	while (name_char(*p, n == 0)) {
		cr_assert(n + 1 < size);
		out[n++] = *p++;
	}
	out[n] = 0;
	return p;
}

static family_t *family_of(expo *e, const char *name)
{
	for (size_t i = 0; i < e->nf; i++)
		if (strcmp(e->f[i].name, name) == 0)
			return &e->f[i];
	return NULL;
}

/* The family a sample belongs to: its own name, or a histogram's with the
 * suffix taken off. */
static family_t *family_of_sample(expo *e, const char *name)
{
	family_t *f = family_of(e, name);
	if (f)
		return f;
	static const char *const suffix[] = { "_bucket", "_sum", "_count" };
	for (size_t i = 0; i < 3; i++) {
		size_t n = strlen(name), k = strlen(suffix[i]);
		if (n > k && strcmp(name + n - k, suffix[i]) == 0) {
			char base[96];
			memcpy(base, name, n - k);
			base[n - k] = 0;
			f = family_of(e, base);
			if (f && strcmp(f->type, "histogram") == 0)
				return f;
		}
	}
	return NULL;
}

/* Strictly the format: every line a comment of HELP/TYPE or a sample; a
 * TYPE once per family and before its samples; a sample's value a number. */
static void expo_parse(expo *e, const char *text, size_t len)
{
	memset(e, 0, sizeof(*e));
	cr_assert(len > 0 && text[len - 1] == '\n', "the exposition ends with a line feed");
	cr_assert_eq(strlen(text), len, "no NUL inside the exposition");
	const char *p = text;
	while (*p) {
		const char *eol = strchr(p, '\n');
		cr_assert(eol);
		if (*p == '#') {
			char name[96];
			if (strncmp(p, "# HELP ", 7) == 0) {
				const char *q = read_name(p + 7, name, sizeof(name));
				cr_assert(*q == ' ' && q + 1 < eol, "HELP text: %.60s", p);
				family_t *f = family_of(e, name);
				cr_assert(!f, "HELP before TYPE, once: %s", name);
				cr_assert(e->nf < 64);
				f = &e->f[e->nf++];
				snprintf(f->name, sizeof(f->name), "%s", name);
				f->help = true;
			} else {
				cr_assert(strncmp(p, "# TYPE ", 7) == 0, "comment: %.40s", p);
				const char *q = read_name(p + 7, name, sizeof(name));
				cr_assert(*q == ' ');
				size_t tl = (size_t)(eol - q - 1);
				family_t *f = family_of(e, name);
				cr_assert(tl < sizeof(f->type));
				cr_assert(f && f->help && !f->type[0], "one TYPE after HELP: %s", name);
				memcpy(f->type, q + 1, tl);
				f->type[tl] = 0;
				cr_assert(strcmp(f->type, "counter") == 0 || strcmp(f->type, "gauge") == 0 ||
				                  strcmp(f->type, "histogram") == 0,
				          "type %s", f->type);
			}
			p = eol + 1;
			continue;
		}
		cr_assert(e->n < SAMPLES_MAX);
		sample *s = &e->s[e->n++];
		const char *q = read_name(p, s->name, sizeof(s->name));
		family_t *f = family_of_sample(e, s->name);
		cr_assert(f && f->type[0], "sample %s after its family's TYPE", s->name);
		/* A family's samples follow its TYPE without another family between. */
		cr_assert_eq(f, &e->f[e->nf - 1], "sample %s in its family's block", s->name);
		size_t ln = 0;
		if (*q == '{') {
			q++;
			while (*q != '}') {
				char lname[64];
				q = read_name(q, lname, sizeof(lname));
				cr_assert(*q == '=' && q[1] == '"', "label %s=\"", lname);
				q += 2;
				ln += (size_t)snprintf(s->labels + ln, sizeof(s->labels) - ln, "%s%s=",
				                       ln ? "," : "", lname);
				while (*q != '"') {
					cr_assert(q < eol, "label value ends on its line");
					char c = *q++;
					if (c == '\\') {
						char x = *q++;
						cr_assert(x == '\\' || x == '"' || x == 'n', "escape \\%c", x);
						c = x == 'n' ? '\n' : x;
					}
					cr_assert(ln + 1 < sizeof(s->labels));
					s->labels[ln++] = c;
					s->labels[ln] = 0;
				}
				q++;
				if (*q == ',')
					q++;
				else
					cr_assert(*q == '}', "labels: %.40s", q);
			}
			q++;
		}
		cr_assert(*q == ' ', "a space before the value: %.60s", p);
		q++;
		size_t vl = (size_t)(eol - q);
		cr_assert(vl > 0 && vl < sizeof(s->value));
		memcpy(s->value, q, vl);
		s->value[vl] = 0;
		char *end;
		strtod(s->value, &end);
		cr_assert(*end == 0, "value %s is a number", s->value);
		for (size_t i = 0; i + 1 < e->n; i++)
			cr_assert(strcmp(e->s[i].name, s->name) != 0 ||
			                  strcmp(e->s[i].labels, s->labels) != 0,
			          "one sample per series: %s{%s}", s->name, s->labels);
		p = eol + 1;
	}
	for (size_t i = 0; i < e->nf; i++)
		cr_assert(e->f[i].type[0], "family %s has a TYPE", e->f[i].name);
}

static const char *get(const expo *e, const char *name, const char *labels)
{
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->s[i].name, name) == 0 && strcmp(e->s[i].labels, labels) == 0)
			return e->s[i].value;
	return NULL;
}

static void expect(const expo *e, const char *name, const char *labels, const char *value)
{
	const char *v = get(e, name, labels);
	cr_assert(v, "series %s{%s} present", name, labels);
	cr_assert_str_eq(v, value, "%s{%s}", name, labels);
}

static size_t series_of(const expo *e, const char *name)
{
	size_t n = 0;
	for (size_t i = 0; i < e->n; i++)
		n += strcmp(e->s[i].name, name) == 0;
	return n;
}

static void expect_type(const expo *e, const char *name, const char *type)
{
	for (size_t i = 0; i < e->nf; i++)
		if (strcmp(e->f[i].name, name) == 0) {
			cr_assert_str_eq(e->f[i].type, type, "%s", name);
			return;
		}
	cr_assert_fail("family %s is exposed", name);
}

static expo *scrape(service_metrics *m, size_t live, char **ret_text)
{
	size_t len = 0;
	char *text = service_metrics_render(m, live, &len);
	cr_assert(text);
	expo *e = malloc(sizeof(*e));
	cr_assert(e);
	expo_parse(e, text, len);
	if (ret_text)
		*ret_text = text;
	else
		free(text);
	return e;
}

static const char *const families[][2] = {
	{ "airlock_sandbox_provision_duration_seconds", "histogram" },
	{ "airlock_sandbox_utilization_ratio", "histogram" },
	{ "airlock_sandbox_executions_total", "counter" },
	{ "airlock_sandbox_execute_failures_total", "counter" },
	{ "airlock_sandbox_provision_failures_total", "counter" },
	{ "airlock_sandbox_destroyed_total", "counter" },
	{ "airlock_sandbox_destroy_failures_total", "counter" },
	{ "airlock_sandbox_orphan_reaps_total", "counter" },
	{ "airlock_sandbox_destroy_alerts_total", "counter" },
	{ "airlock_reaper_errors_total", "counter" },
	{ "airlock_reaper_unasked_ids_total", "counter" },
	{ "airlock_pool_hits_total", "counter" },
	{ "airlock_pool_misses_total", "counter" },
	{ "airlock_pool_refill_failures_total", "counter" },
	{ "airlock_pool_refill_duration_seconds", "histogram" },
	{ "airlock_pool_idle_age_seconds", "histogram" },
	{ "airlock_sandboxes_live", "gauge" },
	{ "airlock_egress_decisions_total", "counter" },
	{ "airlock_egress_delayed_connections_total", "counter" },
	{ "airlock_egress_log_dropped_total", "counter" },
	{ "airlock_egress_lines_malformed_total", "counter" },
	{ "airlock_lifecycle_log_lines_total", "counter" },
	{ "airlock_lifecycle_log_dropped_total", "counter" },
};

static const char *const kill_labels[] = { "none",   "TIMEOUT",   "MEMORY",  "OUTPUT_LIMIT",
	                                   "PIDS",   "DISK",      "CANCELLED", "EXPIRED",
	                                   "SERVICE_SHUTDOWN" };

static const char *const latency_le[] = { "0.001", "0.002", "0.005", "0.01", "0.02", "0.05",
	                                  "0.1",   "0.2",   "0.5",   "1",    "2",    "5",
	                                  "10",    "20",    "30",    "60",   "+Inf" };
static const char *const util_le[] = { "0.01", "0.05", "0.1", "0.25", "0.5",
	                               "0.75", "0.9",  "1",   "+Inf" };

static service_metrics *metrics(int log_fd)
{
	service_metrics *m = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(service_metrics_new(log_fd, &m, &err), 0, "%s", err.message);
	return m;
}

static void event(service_metrics *m, airlock_exec_event ev)
{
	if (!ev.mechanism)
		ev.mechanism = "native";
	if (!ev.environment_id)
		ev.environment_id = "env_0123456789abcdef";
	service_metrics_observer()->event(m, &ev);
}

static void egress(service_metrics *m, const char *line)
{
	service_metrics_egress_line(m, line, strlen(line));
}

static void histogram_expect(const expo *e, const char *name, const char *mech,
                             const char *const *le, size_t n, const uint64_t *cum,
                             const char *sum)
{
	char labels[128], bucket[128];
	snprintf(bucket, sizeof(bucket), "%s_bucket", name);
	for (size_t i = 0; i < n; i++) {
		char v[32];
		snprintf(labels, sizeof(labels), "mechanism=%s,le=%s", mech, le[i]);
		snprintf(v, sizeof(v), "%llu", (unsigned long long)cum[i]);
		expect(e, bucket, labels, v);
	}
	snprintf(labels, sizeof(labels), "mechanism=%s", mech);
	char v[32];
	snprintf(v, sizeof(v), "%llu", (unsigned long long)cum[n - 1]);
	snprintf(bucket, sizeof(bucket), "%s_count", name);
	expect(e, bucket, labels, v);
	snprintf(bucket, sizeof(bucket), "%s_sum", name);
	expect(e, bucket, labels, sum);
}

/* ---- the exposition -------------------------------------------------------- */

Test(metrics, empty_exposes_every_family_at_zero)
{
	service_metrics *m = metrics(-1);
	expo *e = scrape(m, 3, NULL);
	for (size_t i = 0; i < ARRAY_SIZE(families); i++)
		expect_type(e, families[i][0], families[i][1]);
	cr_assert_eq(e->nf, ARRAY_SIZE(families), "no family beyond the list");
	/* Every kill reason, and none, before any execute. */
	cr_assert_eq(series_of(e, "airlock_sandbox_executions_total"), ARRAY_SIZE(kill_labels));
	for (size_t i = 0; i < ARRAY_SIZE(kill_labels); i++) {
		char l[64];
		snprintf(l, sizeof(l), "killed_by=%s", kill_labels[i]);
		expect(e, "airlock_sandbox_executions_total", l, "0");
	}
	cr_assert_eq(ARRAY_SIZE(kill_labels), AIRLOCK_KILL__MAX);
	expect(e, "airlock_sandboxes_live", "", "3");
	expect(e, "airlock_sandbox_destroy_failures_total", "", "0");
	expect(e, "airlock_egress_decisions_total", "outcome=allowed,reason=ALLOWED", "0");
	expect(e, "airlock_egress_decisions_total", "outcome=refused,reason=NOT_ALLOWLISTED", "0");
	expect(e, "airlock_egress_decisions_total", "outcome=refused,reason=DENIED_ADDRESS", "0");
	expect(e, "airlock_egress_decisions_total", "outcome=refused,reason=METADATA_ADDRESS", "0");
	expect(e, "airlock_egress_decisions_total", "outcome=failed,reason=DIAL_FAILED", "0");
	cr_assert_null(get(e, "airlock_egress_decisions_total", "outcome=refused,reason=OTHER"));
	/* Every refusal reason of the evaluation is a series at 0. */
	for (int r = AIRLOCK_EGRESS_MODE_DENY; r < AIRLOCK_EGRESS_REASON__MAX; r++) {
		char l[96];
		snprintf(l, sizeof(l), "outcome=refused,reason=%s",
		         airlock_egress_reason_name((airlock_egress_reason)r));
		expect(e, "airlock_egress_decisions_total", l, "0");
	}
	expect(e, "airlock_sandbox_provision_failures_total", "class=ExecutionUnavailable", "0");
	expect(e, "airlock_sandbox_provision_failures_total", "class=ExecutionRejected", "0");
	expect(e, "airlock_sandbox_destroyed_total", "reason=request", "0");
	/* No mechanism named yet: the histograms have no series. */
	cr_assert_eq(series_of(e, "airlock_sandbox_provision_duration_seconds_bucket"), 0);
	free(e);

	service_metrics_mechanism(m, "native");
	e = scrape(m, 0, NULL);
	uint64_t zeros[17] = { 0 };
	histogram_expect(e, "airlock_sandbox_provision_duration_seconds", "native", latency_le, 17,
	                 zeros, "0.000");
	histogram_expect(e, "airlock_sandbox_utilization_ratio", "native", util_le, 9, zeros,
	                 "0.000000");
	expect(e, "airlock_sandboxes_live", "", "0");
	free(e);
	service_metrics_free(m);
}

Test(metrics, lifecycle_events_counted)
{
	service_metrics *m = metrics(-1);
	/* Latency: the bounds are inclusive (le), past 60 s is +Inf only. */
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISIONED, .duration_ms = 3 });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISIONED, .duration_ms = 700 });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISIONED,
	                               .duration_ms = 90000 });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISIONED,
	                               .mechanism = "fake", .duration_ms = 1 });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISIONED,
	                               .mechanism = "fake", .duration_ms = 60000 });
	/* Executions by kill reason. */
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_EXECUTED, .has_exit_code = true });
	for (int i = 0; i < 2; i++)
		event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_EXECUTED,
		                               .killed_by = AIRLOCK_KILL_MEMORY });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_EXECUTED,
	                               .killed_by = AIRLOCK_KILL_SERVICE_SHUTDOWN });
	airlock_error rej = { .cls = AIRLOCK_ERR_EXECUTION_REJECTED };
	airlock_error una = { .cls = AIRLOCK_ERR_EXECUTION_UNAVAILABLE };
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_EXECUTE_FAILED, .error = &una });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISION_FAILED, .error = &rej });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISION_FAILED, .error = &rej });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISION_FAILED, .error = &una });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISION_FAILED });
	/* Utilization: 0.25, 0, over 1 clamped to 1, 0.003, an instant sandbox. */
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_DESTROYED, .duration_ms = 1000,
	                               .busy_ms = 250, .reason = "request" });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_DESTROYED, .duration_ms = 1000,
	                               .busy_ms = 0, .reason = "expired" });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_DESTROYED, .duration_ms = 1000,
	                               .busy_ms = 2000, .reason = "suspicion" });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_DESTROYED, .duration_ms = 1000,
	                               .busy_ms = 3, .reason = "shutdown" });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_DESTROYED, .duration_ms = 0,
	                               .busy_ms = 0, .reason = "reaped" });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_DESTROYED, .duration_ms = 0,
	                               .busy_ms = 0, .reason = "tenant-chosen\"} 1" });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_DESTROY_FAILED, .error = &una });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_DESTROY_FAILED, .error = &una });

	char *text = NULL;
	expo *e = scrape(m, 7, &text);
	uint64_t native_lat[17] = { 0, 0, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 3 };
	histogram_expect(e, "airlock_sandbox_provision_duration_seconds", "native", latency_le, 17,
	                 native_lat, "90.703");
	uint64_t fake_lat[17] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2 };
	histogram_expect(e, "airlock_sandbox_provision_duration_seconds", "fake", latency_le, 17,
	                 fake_lat, "60.001");
	uint64_t native_util[9] = { 4, 4, 4, 5, 5, 5, 5, 6, 6 };
	histogram_expect(e, "airlock_sandbox_utilization_ratio", "native", util_le, 9, native_util,
	                 "1.253000");
	/* fake was destroyed never: its utilization histogram is all zero. */
	uint64_t zeros[9] = { 0 };
	histogram_expect(e, "airlock_sandbox_utilization_ratio", "fake", util_le, 9, zeros,
	                 "0.000000");
	expect(e, "airlock_sandbox_executions_total", "killed_by=none", "1");
	expect(e, "airlock_sandbox_executions_total", "killed_by=MEMORY", "2");
	expect(e, "airlock_sandbox_executions_total", "killed_by=SERVICE_SHUTDOWN", "1");
	expect(e, "airlock_sandbox_executions_total", "killed_by=TIMEOUT", "0");
	expect(e, "airlock_sandbox_execute_failures_total", "class=ExecutionUnavailable", "1");
	expect(e, "airlock_sandbox_provision_failures_total", "class=ExecutionRejected", "2");
	expect(e, "airlock_sandbox_provision_failures_total", "class=ExecutionUnavailable", "1");
	/* No error object: the generic class, shown once it counts. */
	expect(e, "airlock_sandbox_provision_failures_total", "class=Error", "1");
	expect(e, "airlock_sandbox_destroyed_total", "reason=request", "1");
	expect(e, "airlock_sandbox_destroyed_total", "reason=expired", "1");
	expect(e, "airlock_sandbox_destroyed_total", "reason=suspicion", "1");
	expect(e, "airlock_sandbox_destroyed_total", "reason=shutdown", "1");
	expect(e, "airlock_sandbox_destroyed_total", "reason=reaped", "1");
	expect(e, "airlock_sandbox_destroyed_total", "reason=other", "1");
	expect(e, "airlock_sandbox_destroyed_total", "reason=pool_idle", "0");
	expect(e, "airlock_sandbox_destroyed_total", "reason=pool_evicted", "0");
	expect(e, "airlock_sandbox_destroyed_total", "reason=pool_claim_failed", "0");
	cr_assert_eq(series_of(e, "airlock_sandbox_destroyed_total"), 9);
	/* The reaper's destroys are the orphan reap count. */
	expect(e, "airlock_sandbox_orphan_reaps_total", "", "1");
	expect(e, "airlock_sandbox_destroy_failures_total", "", "2");
	expect(e, "airlock_sandboxes_live", "", "7");
	cr_assert_null(strstr(text, "tenant-chosen"), "a free-form reason never becomes a label");
	free(text);
	free(e);
	service_metrics_free(m);
}

Test(metrics, labels_hold_no_tenant_or_run)
{
	service_metrics *m = metrics(-1);
	airlock_error err = { .cls = AIRLOCK_ERR_EXECUTION_REJECTED };
	snprintf(err.message, sizeof(err.message), "tenant tenant-secret-7 message-secret-9");
	airlock_exec_event base = { .tenant_id = "tenant-secret-7", .run_id = "run-secret-8",
		                    .environment_id = "env_secret00000000", .lease_epoch = 4,
		                    .error = &err, .reason = "request", .duration_ms = 5 };
	for (int k = AIRLOCK_EXEC_EVENT_PROVISIONED; k < AIRLOCK_EXEC_EVENT__MAX; k++) {
		base.kind = (airlock_exec_event_kind)k;
		event(m, base);
	}
	char *text = NULL;
	expo *e = scrape(m, 1, &text);
	cr_assert_null(strstr(text, "secret"), "no tenant, run, environment or message in a scrape");
	free(text);
	free(e);
	service_metrics_free(m);
}

Test(metrics, mechanism_names_bounded_and_escaped)
{
	service_metrics *m = metrics(-1);
	/* A quote and a backslash are written escaped and parse back. */
	service_metrics_mechanism(m, "we\"ird\\name");
	char name[16];
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "mech%d", i);
		event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISIONED,
		                               .mechanism = name, .duration_ms = 10 });
	}
	/* Not one printable word: "other", never the bytes. */
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISIONED,
	                               .mechanism = "a b\n", .duration_ms = 10 });
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISIONED, .mechanism = "",
	                               .duration_ms = 10 });
	char *text = NULL;
	expo *e = scrape(m, 0, &text);
	cr_assert(strstr(text, "mechanism=\"we\\\"ird\\\\name\""), "escaped in the text");
	expect(e, "airlock_sandbox_provision_duration_seconds_count", "mechanism=we\"ird\\name", "0");
	/* 7 slots: the escaped one and mech0..mech5; mech6..9 and the two bad
	 * names are "other". */
	for (int i = 0; i < 6; i++) {
		char l[32];
		snprintf(l, sizeof(l), "mechanism=mech%d", i);
		expect(e, "airlock_sandbox_provision_duration_seconds_count", l, "1");
	}
	cr_assert_null(get(e, "airlock_sandbox_provision_duration_seconds_count", "mechanism=mech6"));
	expect(e, "airlock_sandbox_provision_duration_seconds_count", "mechanism=other", "6");
	cr_assert_eq(series_of(e, "airlock_sandbox_provision_duration_seconds_count"), 8);
	free(text);
	free(e);
	service_metrics_free(m);
}

/* ---- egress lines ----------------------------------------------------------- */

Test(metrics, egress_lines_counted_by_outcome_and_reason)
{
	service_metrics *m = metrics(-1);
	egress(m, "{\"ts_ms\":1,\"run\":\"r\",\"tenant\":\"t\",\"environment\":\"e\",\"transport\":"
	          "\"policy\",\"host\":\"a.example.com\",\"port\":443,\"addresses\":[],\"dial\":null,"
	          "\"outcome\":\"allowed\",\"reason\":\"ALLOWED\",\"detail\":\"closed\",\"status\":200,"
	          "\"bytes_up\":1,\"bytes_down\":2,\"duration_ms\":3}");
	egress(m, "{\"outcome\":\"refused\",\"reason\":\"NOT_ALLOWLISTED\"}");
	egress(m, "{\"outcome\":\"refused\",\"reason\":\"NOT_ALLOWLISTED\",\"host\":\"x\"}");
	egress(m, "{\"outcome\":\"refused\",\"reason\":\"METADATA_ADDRESS\"}");
	egress(m, "{\"outcome\":\"refused\",\"reason\":\"BAD_REQUEST\"}");
	egress(m, "{\"outcome\":\"failed\",\"reason\":\"DIAL_TIMEOUT\"}");
	/* A reason outside the vocabulary, one built to break the text out of
	 * its label: counted under OTHER, its bytes nowhere. */
	egress(m, "{\"outcome\":\"refused\",\"reason\":\"X\\\"} 999\\n# TYPE evil counter\"}");
	egress(m, "{\"outcome\":\"failed\",\"reason\":\"SOMETHING_NEW\"}");
	egress(m, "{\"outcome\":\"delayed\",\"reason\":\"RATE_LIMITED\",\"count\":5}");
	egress(m, "{\"outcome\":\"delayed\",\"reason\":\"RATE_LIMITED\",\"count\":2}");
	egress(m, "{\"ts_ms\":9,\"outcome\":\"failed\",\"reason\":\"LOG_DROPPED\",\"count\":3}");
	/* With its newline, as read off the pipe. */
	egress(m, "{\"outcome\":\"allowed\",\"reason\":\"ALLOWED\"}\n");

	char *text = NULL;
	expo *e = scrape(m, 0, &text);
	expect(e, "airlock_egress_decisions_total", "outcome=allowed,reason=ALLOWED", "2");
	expect(e, "airlock_egress_decisions_total", "outcome=refused,reason=NOT_ALLOWLISTED", "2");
	expect(e, "airlock_egress_decisions_total", "outcome=refused,reason=METADATA_ADDRESS", "1");
	expect(e, "airlock_egress_decisions_total", "outcome=refused,reason=BAD_REQUEST", "1");
	expect(e, "airlock_egress_decisions_total", "outcome=refused,reason=IP_LITERAL", "0");
	expect(e, "airlock_egress_decisions_total", "outcome=failed,reason=DIAL_TIMEOUT", "1");
	expect(e, "airlock_egress_decisions_total", "outcome=refused,reason=OTHER", "1");
	expect(e, "airlock_egress_decisions_total", "outcome=failed,reason=OTHER", "1");
	cr_assert_null(get(e, "airlock_egress_decisions_total", "outcome=allowed,reason=OTHER"));
	expect(e, "airlock_egress_delayed_connections_total", "", "7");
	expect(e, "airlock_egress_log_dropped_total", "", "3");
	expect(e, "airlock_egress_lines_malformed_total", "", "0");
	cr_assert_null(strstr(text, "evil"));
	cr_assert_null(strstr(text, "999"));
	cr_assert_null(strstr(text, "SOMETHING_NEW"));
	free(text);
	free(e);
	service_metrics_free(m);
}

Test(metrics, malformed_egress_lines_counted_never_trusted)
{
	service_metrics *m = metrics(-1);
	static const char *const bad[] = {
		"",
		"not json",
		"{",
		"[1,2]",
		"\"allowed\"",
		"{\"outcome\":1,\"reason\":\"ALLOWED\"}",
		"{\"outcome\":\"allowed\"}",
		"{\"reason\":\"ALLOWED\"}",
		"{\"outcome\":\"maybe\",\"reason\":\"ALLOWED\"}",
		"{\"outcome\":\"allowed\",\"reason\":null}",
		"{\"outcome\":\"allowed\",\"reason\":\"ALLOWED\",\"outcome\":\"refused\"}",
		"{\"outcome\":\"delayed\",\"reason\":\"RATE_LIMITED\"}",
		"{\"outcome\":\"delayed\",\"reason\":\"RATE_LIMITED\",\"count\":-4}",
		"{\"outcome\":\"delayed\",\"reason\":\"RATE_LIMITED\",\"count\":\"5\"}",
		"{\"outcome\":\"delayed\",\"reason\":\"OTHER\",\"count\":1}",
		"{\"outcome\":\"\xff\xfe\",\"reason\":\"ALLOWED\"}",
		"{\"outcome\":\"allowed\",\"reason\":\"ALLOWED\"} trailing",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		egress(m, bad[i]);
	/* A NUL inside the line, a NULL line, a deep nesting, a huge line. */
	static const char nul[] = "{\"outcome\":\"allowed\"\0,\"reason\":\"ALLOWED\"}";
	service_metrics_egress_line(m, nul, sizeof(nul) - 1);
	service_metrics_egress_line(m, NULL, 0);
	size_t deep = 100000;
	char *d = malloc(2 * deep + 1);
	memset(d, '[', deep);
	memset(d + deep, ']', deep);
	d[2 * deep] = 0;
	service_metrics_egress_line(m, d, 2 * deep);
	service_metrics_egress_line(m, d, 20000); /* under the cap, deep, unterminated */
	free(d);
	size_t huge = 1 << 20;
	char *h = malloc(huge + 64);
	int n = snprintf(h, 64, "{\"outcome\":\"allowed\",\"reason\":\"ALLOWED\",\"x\":\"");
	memset(h + n, 'a', huge);
	memcpy(h + n + huge, "\"}", 3);
	service_metrics_egress_line(m, h, strlen(h));
	free(h);
	size_t total = ARRAY_SIZE(bad) + 5;

	expo *e = scrape(m, 0, NULL);
	char want[16];
	snprintf(want, sizeof(want), "%zu", total);
	expect(e, "airlock_egress_lines_malformed_total", "", want);
	expect(e, "airlock_egress_decisions_total", "outcome=allowed,reason=ALLOWED", "0");
	expect(e, "airlock_egress_delayed_connections_total", "", "0");
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->s[i].name, "airlock_egress_decisions_total") == 0)
			cr_assert_str_eq(e->s[i].value, "0", "%s", e->s[i].labels);
	free(e);
	service_metrics_free(m);
}

/* Every reason the proxy process's files (src/egress/proxy_loop.h lists
 * them) write as a literal is known here: a reason added there and not to
 * the table would be counted as OTHER. */
Test(metrics, every_proxy_reason_known)
{
	const char *root = getenv("AIRLOCK_TEST_SOURCE_ROOT");
	cr_assert(root, "AIRLOCK_TEST_SOURCE_ROOT (set by meson)");
	static const char *const files[] = { "proxy_log.c",    "proxy_conn.c",       "proxy_check.c",
		                             "proxy_listen.c", "proxy_ctl_server.c", "proxy_process.c" };
	char *src = NULL;
	size_t len = 0;
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/src/egress/%s", root, files[i]);
		FILE *f = fopen(path, "re");
		cr_assert(f, "%s", path);
		char *one = NULL;
		size_t cap = 0;
		ssize_t n = getdelim(&one, &cap, 0, f);
		fclose(f);
		cr_assert(n > 0, "%s", path);
		src = realloc(src, len + (size_t)n + 1);
		cr_assert(src);
		memcpy(src + len, one, (size_t)n);
		len += (size_t)n;
		src[len] = 0;
		free(one);
	}
	/* conn_end(c, "OUTCOME", "REASON" ...), refuse(c, STATUS, "TEXT", "REASON" ...),
	 * and the two log lines written by hand. */
	static const char *const patterns[] = {
		"conn_end\\(c, \"([a-z]+)\", \"([A-Z_]+)\"",
		"conn_end\\(c, \"([a-z]+)\", timeout \\? \"([A-Z_]+)\"",
		"conn_end\\(c, \"([a-z]+)\", timeout \\? \"[A-Z_]+\" : \"([A-Z_]+)\"",
		"refuse\\(c, [0-9]+, \"[^\"]*\", ()\"([A-Z_]+)\"",
	};
	service_metrics *m = metrics(-1);
	size_t found = 0;
	char lines[64][128];
	for (size_t p = 0; p < ARRAY_SIZE(patterns); p++) {
		regex_t re;
		cr_assert_eq(regcomp(&re, patterns[p], REG_EXTENDED), 0);
		regmatch_t mt[3];
		for (const char *s = src; regexec(&re, s, 3, mt, 0) == 0; s += mt[0].rm_eo) {
			char out[16] = "refused", rsn[64];
			if (mt[1].rm_eo > mt[1].rm_so)
				snprintf(out, sizeof(out), "%.*s", (int)(mt[1].rm_eo - mt[1].rm_so),
				         s + mt[1].rm_so);
			snprintf(rsn, sizeof(rsn), "%.*s", (int)(mt[2].rm_eo - mt[2].rm_so),
			         s + mt[2].rm_so);
			cr_assert(found < 64);
			snprintf(lines[found++], 128, "%s=%s", out, rsn);
			char line[160];
			snprintf(line, sizeof(line), "{\"outcome\":\"%s\",\"reason\":\"%s\"}", out, rsn);
			egress(m, line);
		}
		regfree(&re);
	}
	free(src);
	cr_assert_geq(found, 15, "the patterns still match the proxy's files (%zu found)", found);
	expo *e = scrape(m, 0, NULL);
	expect(e, "airlock_egress_lines_malformed_total", "", "0");
	cr_assert_null(get(e, "airlock_egress_decisions_total", "outcome=refused,reason=OTHER"));
	cr_assert_null(get(e, "airlock_egress_decisions_total", "outcome=failed,reason=OTHER"));
	cr_assert_null(get(e, "airlock_egress_decisions_total", "outcome=allowed,reason=OTHER"));
	for (size_t i = 0; i < found; i++) {
		char l[160];
		char *eq = strchr(lines[i], '=');
		*eq = 0;
		snprintf(l, sizeof(l), "outcome=%s,reason=%s", lines[i], eq + 1);
		const char *v = get(e, "airlock_egress_decisions_total", l);
		cr_assert(v && strcmp(v, "0") != 0, "%s counted", l);
	}
	free(e);
	service_metrics_free(m);
}

/* ---- concurrency --------------------------------------------------------------- */

#define THREADS 8
#define ROUNDS 3000

static void *hammer(void *arg)
{
	service_metrics *m = arg;
	for (int i = 0; i < ROUNDS; i++) {
		event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISIONED,
		                               .duration_ms = i % 100, .tenant_id = "t", .run_id = "r",
		                               .lease_epoch = 1 });
		event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_EXECUTED,
		                               .killed_by = (airlock_kill_reason)(i % AIRLOCK_KILL__MAX),
		                               .has_exit_code = i % AIRLOCK_KILL__MAX == 0 });
		event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_DESTROYED,
		                               .duration_ms = 100, .busy_ms = 50, .reason = "request" });
		egress(m, "{\"outcome\":\"refused\",\"reason\":\"DENIED_ADDRESS\"}");
		egress(m, "garbage");
	}
	return NULL;
}

Test(metrics, eight_threads_add_up_exactly)
{
	char path[] = "/tmp/airlock-metrics-XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	unlink(path);
	service_metrics *m = metrics(fd);
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, hammer, m), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	expo *e = scrape(m, 0, NULL);
	char v[32];
	snprintf(v, sizeof(v), "%d", THREADS * ROUNDS);
	expect(e, "airlock_sandbox_provision_duration_seconds_count", "mechanism=native", v);
	expect(e, "airlock_sandbox_utilization_ratio_count", "mechanism=native", v);
	expect(e, "airlock_sandbox_utilization_ratio_bucket", "mechanism=native,le=0.5", v);
	expect(e, "airlock_sandbox_utilization_ratio_bucket", "mechanism=native,le=0.25", "0");
	snprintf(v, sizeof(v), "%d.000000", THREADS * ROUNDS / 2);
	expect(e, "airlock_sandbox_utilization_ratio_sum", "mechanism=native", v);
	/* sum of i % 100 over ROUNDS (a multiple of 100), per thread, in ms */
	long long sum_ms = (long long)THREADS * (ROUNDS / 100) * 4950;
	snprintf(v, sizeof(v), "%lld.%03lld", sum_ms / 1000, sum_ms % 1000);
	expect(e, "airlock_sandbox_provision_duration_seconds_sum", "mechanism=native", v);
	/* durations 0..99: le=0.001 holds 0 and 1, le=0.05 holds 0..50 */
	snprintf(v, sizeof(v), "%d", THREADS * (ROUNDS / 100) * 2);
	expect(e, "airlock_sandbox_provision_duration_seconds_bucket", "mechanism=native,le=0.001", v);
	snprintf(v, sizeof(v), "%d", THREADS * (ROUNDS / 100) * 51);
	expect(e, "airlock_sandbox_provision_duration_seconds_bucket", "mechanism=native,le=0.05", v);
	for (int k = 0; k < AIRLOCK_KILL__MAX; k++) {
		int per = 0;
		for (int i = 0; i < ROUNDS; i++)
			per += i % AIRLOCK_KILL__MAX == k;
		char l[64];
		snprintf(l, sizeof(l), "killed_by=%s", kill_labels[k]);
		snprintf(v, sizeof(v), "%d", THREADS * per);
		expect(e, "airlock_sandbox_executions_total", l, v);
	}
	snprintf(v, sizeof(v), "%d", THREADS * ROUNDS);
	expect(e, "airlock_egress_decisions_total", "outcome=refused,reason=DENIED_ADDRESS", v);
	expect(e, "airlock_egress_lines_malformed_total", "", v);
	expect(e, "airlock_sandbox_destroyed_total", "reason=request", v);
	snprintf(v, sizeof(v), "%d", THREADS * ROUNDS * 3);
	expect(e, "airlock_lifecycle_log_lines_total", "", v);
	expect(e, "airlock_lifecycle_log_dropped_total", "", "0");
	free(e);

	/* Every line whole: as many lines as events, each one JSON object. */
	char *all = NULL;
	size_t len = 0;
	lseek(fd, 0, SEEK_SET);
	cr_assert_eq(util_read_capped(fd, 64 << 20, &all, &len), 0);
	size_t lines = 0;
	for (char *p = all, *nl; (nl = memchr(p, '\n', len - (size_t)(p - all))); p = nl + 1) {
		json_error_t je;
		json_t *o = json_loadb(p, (size_t)(nl - p), 0, &je);
		cr_assert(o, "line %zu: %s", lines, je.text);
		cr_assert(json_is_string(json_object_get(o, "event")));
		json_decref(o);
		lines++;
	}
	cr_assert_eq(lines, (size_t)THREADS * ROUNDS * 3);
	cr_assert_eq(all[len - 1], '\n');
	free(all);
	service_metrics_free(m);
	close(fd);
}

/* ---- the lifecycle log ---------------------------------------------------------- */

typedef struct logfile {
	int fd;
	char *text;
	size_t len;
	size_t pos;
} logfile;

static logfile log_open_tmp(void)
{
	char path[] = "/tmp/airlock-metrics-XXXXXX";
	logfile l = { .fd = mkstemp(path) };
	cr_assert(l.fd >= 0);
	unlink(path);
	return l;
}

/* The next line of the log as a JSON object; asserts it is one line. */
static json_t *next_line(logfile *l)
{
	/* Read the whole file again: lines may have been added since. */
	free(l->text);
	l->text = NULL;
	lseek(l->fd, 0, SEEK_SET);
	cr_assert_eq(util_read_capped(l->fd, 16 << 20, &l->text, &l->len), 0);
	cr_assert(l->pos < l->len, "another line");
	char *p = l->text + l->pos;
	char *nl = memchr(p, '\n', l->len - l->pos);
	cr_assert(nl, "the line ends with a line feed");
	size_t n = (size_t)(nl - p);
	cr_assert_leq(n + 1, (size_t)PIPE_BUF, "a line is at most PIPE_BUF bytes");
	for (size_t i = 0; i < n; i++)
		cr_assert((unsigned char)p[i] >= 0x20, "no control byte inside the line (%zu)", i);
	json_error_t je;
	json_t *o = json_loadb(p, n, JSON_REJECT_DUPLICATES, &je);
	cr_assert(o, "valid JSON: %s: %.*s", je.text, (int)n, p);
	cr_assert(json_is_object(o));
	l->pos += n + 1;
	return o;
}

static void logfile_done(logfile *l)
{
	cr_assert_eq(l->pos, l->len, "no line beyond those expected");
	free(l->text);
	close(l->fd);
}

static void field_str(json_t *o, const char *k, const char *want)
{
	json_t *v = json_object_get(o, k);
	if (!want) {
		cr_assert(json_is_null(v), "%s is null", k);
		return;
	}
	cr_assert(json_is_string(v), "%s is a string", k);
	cr_assert_str_eq(json_string_value(v), want, "%s", k);
}

static void field_int(json_t *o, const char *k, long long want)
{
	json_t *v = json_object_get(o, k);
	cr_assert(json_is_integer(v), "%s is an integer", k);
	cr_assert_eq(json_integer_value(v), want, "%s", k);
}

static void owner_fields(json_t *o, const char *event, const char *env)
{
	field_str(o, "event", event);
	field_str(o, "mechanism", "native");
	field_str(o, "environment", env);
	field_str(o, "tenant", "tenant-a");
	field_str(o, "run", "run-1");
	field_int(o, "epoch", 3);
	json_t *ts = json_object_get(o, "ts_ms");
	cr_assert(json_is_integer(ts));
	int64_t now = util_now_ms();
	cr_assert(json_integer_value(ts) <= now && json_integer_value(ts) > now - 60000);
}

Test(metrics, one_log_line_per_event_with_its_fields)
{
	logfile l = log_open_tmp();
	service_metrics *m = metrics(l.fd);
	const char *env = "env_00112233445566778899aabbccddeeff";
	airlock_exec_event base = { .environment_id = env, .tenant_id = "tenant-a",
		                    .run_id = "run-1", .lease_epoch = 3 };
	airlock_error err = { .cls = AIRLOCK_ERR_EXECUTION_REJECTED };
	snprintf(err.message, sizeof(err.message), "limits.memory_bytes above the ceiling");

	airlock_exec_event ev = base;
	ev.kind = AIRLOCK_EXEC_EVENT_PROVISIONED;
	ev.duration_ms = 42;
	event(m, ev);
	ev = base;
	ev.kind = AIRLOCK_EXEC_EVENT_EXECUTED;
	ev.duration_ms = 17;
	ev.has_exit_code = true;
	ev.exit_code = 3;
	event(m, ev);
	ev = base;
	ev.kind = AIRLOCK_EXEC_EVENT_EXECUTED;
	ev.duration_ms = 5000;
	ev.killed_by = AIRLOCK_KILL_TIMEOUT;
	event(m, ev);
	ev = base;
	ev.kind = AIRLOCK_EXEC_EVENT_EXECUTE_FAILED;
	ev.duration_ms = 2;
	ev.error = &err;
	event(m, ev);
	ev = base;
	ev.kind = AIRLOCK_EXEC_EVENT_DESTROYED;
	ev.duration_ms = 9000;
	ev.busy_ms = 5017;
	ev.reason = "request";
	event(m, ev);
	ev = base;
	ev.kind = AIRLOCK_EXEC_EVENT_DESTROY_FAILED;
	ev.error = &err;
	event(m, ev);
	ev = base;
	ev.kind = AIRLOCK_EXEC_EVENT_PROVISION_FAILED;
	ev.duration_ms = 1;
	ev.error = &err;
	event(m, ev);
	/* Refused before the spec was read: no owner, epoch null. */
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISION_FAILED,
	                               .environment_id = "", .error = &err });
	service_metrics_log(m, "started", "listening on the API socket");

	json_t *o = next_line(&l);
	owner_fields(o, "provisioned", env);
	field_int(o, "duration_ms", 42);
	json_decref(o);

	o = next_line(&l);
	owner_fields(o, "executed", env);
	field_int(o, "duration_ms", 17);
	field_str(o, "killed_by", NULL);
	field_int(o, "exit_code", 3);
	json_decref(o);

	o = next_line(&l);
	owner_fields(o, "executed", env);
	field_int(o, "duration_ms", 5000);
	field_str(o, "killed_by", "TIMEOUT");
	cr_assert(json_is_null(json_object_get(o, "exit_code")));
	json_decref(o);

	o = next_line(&l);
	owner_fields(o, "execute_failed", env);
	field_int(o, "duration_ms", 2);
	field_str(o, "error", "ExecutionRejected");
	field_str(o, "message", "limits.memory_bytes above the ceiling");
	json_decref(o);

	o = next_line(&l);
	owner_fields(o, "destroyed", env);
	field_int(o, "duration_ms", 9000);
	field_int(o, "busy_ms", 5017);
	field_str(o, "reason", "request");
	json_decref(o);

	o = next_line(&l);
	owner_fields(o, "destroy_failed", env);
	field_str(o, "error", "ExecutionRejected");
	field_str(o, "message", "limits.memory_bytes above the ceiling");
	json_decref(o);

	o = next_line(&l);
	owner_fields(o, "provision_failed", env);
	field_int(o, "duration_ms", 1);
	field_str(o, "error", "ExecutionRejected");
	json_decref(o);

	o = next_line(&l);
	field_str(o, "event", "provision_failed");
	field_str(o, "environment", "");
	field_str(o, "tenant", NULL);
	field_str(o, "run", NULL);
	cr_assert(json_is_null(json_object_get(o, "epoch")));
	json_decref(o);

	o = next_line(&l);
	field_str(o, "event", "started");
	field_str(o, "message", "listening on the API socket");
	cr_assert(json_is_integer(json_object_get(o, "ts_ms")));
	cr_assert_eq(json_object_size(o), 3);
	json_decref(o);
	logfile_done(&l);

	expo *e = scrape(m, 0, NULL);
	expect(e, "airlock_lifecycle_log_lines_total", "", "9");
	expect(e, "airlock_lifecycle_log_dropped_total", "", "0");
	free(e);
	service_metrics_free(m);
}

Test(metrics, hostile_tenant_stays_one_valid_line)
{
	logfile l = log_open_tmp();
	service_metrics *m = metrics(l.fd);
	/* Valid UTF-8 with a newline, control bytes, an escape sequence, a
	 * quote and a brace: jansson escapes them and the value reads back. */
	const char *hostile = "t\nx\r\x01\x1b[31m\"},{\"event\":\"forged\"\\\u2028";
	airlock_error err = { .cls = AIRLOCK_ERR_EXECUTION_REJECTED };
	snprintf(err.message, sizeof(err.message), "bad tenant \n\"%s\"", hostile);
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISION_FAILED,
	                               .tenant_id = hostile, .run_id = hostile, .error = &err });
	json_t *o = next_line(&l);
	field_str(o, "tenant", hostile);
	field_str(o, "run", hostile);
	field_str(o, "message", err.message);
	json_decref(o);

	/* Not UTF-8: escaped to printable ASCII, still one line. */
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISION_FAILED,
	                               .tenant_id = "a\xff\xfe\nb", .error = &err });
	o = next_line(&l);
	const char *t = json_string_value(json_object_get(o, "tenant"));
	cr_assert(t);
	cr_assert_str_eq(t, "a\\xff\\xfe\\x0ab");
	json_decref(o);

	/* Long and all control bytes (six bytes each in JSON): cut, never
	 * over PIPE_BUF, never split. */
	size_t n = 5000;
	char *big = malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		big[i] = (char)(1 + i % 31);
	big[n] = 0;
	memset(err.message, '\n', sizeof(err.message) - 1);
	err.message[sizeof(err.message) - 1] = 0;
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISION_FAILED,
	                               .tenant_id = big, .run_id = big, .environment_id = big,
	                               .error = &err });
	/* Short enough to be kept as they are, but six bytes each in JSON:
	 * three of them and the message do not fit one line until cut. */
	big[200] = 0;
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISION_FAILED,
	                               .tenant_id = big, .run_id = big, .environment_id = big,
	                               .error = &err });
	big[200] = 1;
	service_metrics_log(m, "stopping", big);
	free(big);
	o = next_line(&l);
	t = json_string_value(json_object_get(o, "tenant"));
	cr_assert(t && strlen(t) > 0 && strstr(t, "..."), "cut with ...");
	field_str(o, "error", "ExecutionRejected");
	json_decref(o);
	o = next_line(&l);
	t = json_string_value(json_object_get(o, "tenant"));
	cr_assert(t && strlen(t) < 200 && strstr(t, "..."), "cut with ...");
	field_str(o, "error", "ExecutionRejected");
	json_decref(o);
	o = next_line(&l);
	field_str(o, "event", "stopping");
	cr_assert(json_is_string(json_object_get(o, "message")));
	json_decref(o);
	logfile_done(&l);
	service_metrics_free(m);
}

/* A log reader that stopped: the pipe fills, the events go on, the lines
 * that did not fit are counted, and what the pipe holds is whole lines.
 * The caller's descriptor keeps blocking mode. */
Test(metrics, full_pipe_drops_never_blocks, .timeout = 30)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	int size = fcntl(p[1], F_SETPIPE_SZ, 4096);
	cr_assert(size >= 4096);
	service_metrics *m = metrics(p[1]);
	cr_assert_eq(fcntl(p[1], F_GETFL) & O_NONBLOCK, 0, "the caller's pipe stays blocking");
	airlock_error err = { .cls = AIRLOCK_ERR_EXECUTION_UNAVAILABLE };
	memset(err.message, 'm', 400);
	int events = 200;
	for (int i = 0; i < events; i++)
		event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_EXECUTE_FAILED,
		                               .tenant_id = "t", .run_id = "r", .error = &err });
	expo *e = scrape(m, 0, NULL);
	long written = strtol(get(e, "airlock_lifecycle_log_lines_total", ""), NULL, 10);
	long dropped = strtol(get(e, "airlock_lifecycle_log_dropped_total", ""), NULL, 10);
	cr_assert_eq(written + dropped, events);
	cr_assert_gt(dropped, 0);
	cr_assert_gt(written, 0);
	free(e);
	/* Close both write ends (the metrics' own and ours), then read. */
	service_metrics_free(m);
	close(p[1]);
	char *all = NULL;
	size_t len = 0;
	cr_assert_eq(util_read_capped(p[0], 1 << 20, &all, &len), 0);
	close(p[0]);
	size_t lines = 0;
	for (char *q = all, *nl; q < all + len; q = nl + 1) {
		nl = memchr(q, '\n', len - (size_t)(q - all));
		cr_assert(nl, "the pipe holds whole lines only");
		json_t *o = json_loadb(q, (size_t)(nl - q), 0, NULL);
		cr_assert(o);
		json_decref(o);
		lines++;
	}
	cr_assert_eq(lines, (size_t)written);
	free(all);
}

/* The same over a socket (what systemd gives a service's stderr). */
Test(metrics, full_socket_drops_never_blocks, .timeout = 30)
{
	int sp[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	int small = 4096;
	setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(sp[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	service_metrics *m = metrics(sp[0]);
	int events = 2000;
	for (int i = 0; i < events; i++)
		service_metrics_log(m, "tick", "a line the reader never reads");
	expo *e = scrape(m, 0, NULL);
	long written = strtol(get(e, "airlock_lifecycle_log_lines_total", ""), NULL, 10);
	long dropped = strtol(get(e, "airlock_lifecycle_log_dropped_total", ""), NULL, 10);
	cr_assert_eq(written + dropped, events);
	cr_assert_gt(dropped, 0);
	free(e);
	/* The reader gone: EPIPE is a drop, and no SIGPIPE. */
	close(sp[1]);
	service_metrics_log(m, "tick", "after the reader left");
	e = scrape(m, 0, NULL);
	char v[32];
	snprintf(v, sizeof(v), "%ld", dropped + 1);
	expect(e, "airlock_lifecycle_log_dropped_total", "", v);
	free(e);
	service_metrics_free(m);
	close(sp[0]);
}

Test(metrics, no_log_fd_counts_nothing_written)
{
	service_metrics *m = metrics(-1);
	event(m, (airlock_exec_event){ .kind = AIRLOCK_EXEC_EVENT_PROVISIONED, .duration_ms = 1 });
	service_metrics_log(m, "started", NULL);
	expo *e = scrape(m, 0, NULL);
	expect(e, "airlock_lifecycle_log_lines_total", "", "0");
	expect(e, "airlock_lifecycle_log_dropped_total", "", "0");
	free(e);
	service_metrics_free(m);
	airlock_error err = { 0 };
	cr_assert_lt(service_metrics_new(987654, &m, &err), 0, "a descriptor that is not open");
	cr_assert_eq(err.cls, AIRLOCK_ERR_SYSTEM);
}

/* ---- wired to the core ------------------------------------------------------ */

/* The observer in a real airlock_exec over the fake mechanism: what the
 * core reports is what the exposition and the log show. */
Test(metrics, fed_by_the_core_over_fake)
{
	logfile l = log_open_tmp();
	service_metrics *m = metrics(l.fd);
	service_metrics_mechanism(m, "fake");
	airlock_error err = { 0 };
	airlock_fake *f = NULL;
	cr_assert_eq(airlock_fake_new(&f, &err), 0, "%s", err.message);
	const char *const oom[] = { "oom", NULL };
	airlock_fake_behaviour b = { .killed_by = AIRLOCK_KILL_MEMORY };
	cr_assert_eq(airlock_fake_script(f, oom, &b, &err), 0, "%s", err.message);
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.ceilings.memory_bytes = 512ll << 20;
	cfg.observer = service_metrics_observer();
	cfg.observer_arg = m;
	airlock_exec *e = NULL;
	cr_assert_eq(airlock_exec_new(airlock_fake_ops(), f, &cfg, &e, &err), 0, "%s", err.message);

	airlock_environment_spec s;
	test_spec(&s, "tenant-m", "run-1");
	airlock_environment_handle h = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &s, &h, &err), 0, "%s", err.message);
	airlock_exec_call call = { .tenant_id = "tenant-m", .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	char *argv_true[] = { "true", NULL }, *argv_oom[] = { "oom", NULL };
	airlock_execution_command c1 = test_command(argv_true), c2 = test_command(argv_oom);
	airlock_execution_result r = { 0 };
	cr_assert_eq(airlock_exec_execute(e, &call, &h, &c1, &r, &err), 0, "%s", err.message);
	airlock_execution_result_clear(&r);
	cr_assert_eq(airlock_exec_execute(e, &call, &h, &c2, &r, &err), 0, "%s", err.message);
	cr_assert_eq(r.killed_by, AIRLOCK_KILL_MEMORY);
	airlock_execution_result_clear(&r);
	airlock_environment_spec over = s;
	over.limits.memory_bytes = 1ll << 30;
	airlock_environment_handle h2 = { 0 };
	cr_assert_lt(airlock_exec_provision(e, &over, &h2, &err), 0);
	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	airlock_exec_free(e);

	expo *x = scrape(m, 0, NULL);
	expect(x, "airlock_sandbox_provision_duration_seconds_count", "mechanism=fake", "1");
	expect(x, "airlock_sandbox_utilization_ratio_count", "mechanism=fake", "1");
	expect(x, "airlock_sandbox_executions_total", "killed_by=none", "1");
	expect(x, "airlock_sandbox_executions_total", "killed_by=MEMORY", "1");
	expect(x, "airlock_sandbox_provision_failures_total", "class=ExecutionRejected", "1");
	expect(x, "airlock_sandbox_destroyed_total", "reason=request", "1");
	expect(x, "airlock_lifecycle_log_lines_total", "", "5");
	free(x);

	static const char *const events[] = { "provisioned", "executed", "executed",
		                              "provision_failed", "destroyed" };
	for (size_t i = 0; i < ARRAY_SIZE(events); i++) {
		json_t *o = next_line(&l);
		field_str(o, "event", events[i]);
		field_str(o, "mechanism", "fake");
		field_str(o, "tenant", "tenant-m");
		field_str(o, "run", "run-1");
		field_int(o, "epoch", 1);
		if (strcmp(events[i], "provision_failed") != 0)
			field_str(o, "environment", h.environment_id);
		json_decref(o);
	}
	logfile_done(&l);
	airlock_environment_handle_clear(&h);
	airlock_environment_spec_clear(&s);
	service_metrics_free(m);
}

/* ---- the proxy's log, followed ------------------------------------------------ */

Test(metrics, egress_log_followed, .timeout = 30)
{
	logfile l = log_open_tmp();
	service_metrics *m = metrics(l.fd);
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	airlock_error err = { 0 };
	cr_assert_eq(service_metrics_egress_follow(m, p[0], &err), 0, "%s", err.message);
	/* Lines split across writes, a line past the 64 KiB cap, and a last
	 * line without its newline. */
	const char *a = "{\"outcome\":\"allowed\",\"reason\":\"ALLOWED\"}\n{\"outcome\":\"ref";
	const char *b = "used\",\"reason\":\"IP_LITERAL\"}\n";
	cr_assert_eq(util_write_all(p[1], a, strlen(a)), 0);
	usleep(50000);
	cr_assert_eq(util_write_all(p[1], b, strlen(b)), 0);
	size_t big = 70000;
	char *junk = malloc(big + 1);
	memset(junk, '{', big);
	junk[big] = '\n';
	cr_assert_eq(util_write_all(p[1], junk, big + 1), 0);
	free(junk);
	const char *c = "{\"outcome\":\"failed\",\"reason\":\"DIAL_FAILED\"}\n"
	                "{\"outcome\":\"refused\",\"reason\":\"NOT_ALLOWLISTED\"}";
	cr_assert_eq(util_write_all(p[1], c, strlen(c)), 0);
	close(p[1]);

	expo *e = NULL;
	for (int i = 0; i < 500; i++) {
		free(e);
		e = scrape(m, 0, NULL);
		const char *v = get(e, "airlock_egress_decisions_total",
		                    "outcome=refused,reason=NOT_ALLOWLISTED");
		if (v && strcmp(v, "1") == 0)
			break;
		usleep(10000);
	}
	expect(e, "airlock_egress_decisions_total", "outcome=allowed,reason=ALLOWED", "1");
	expect(e, "airlock_egress_decisions_total", "outcome=refused,reason=IP_LITERAL", "1");
	expect(e, "airlock_egress_decisions_total", "outcome=failed,reason=DIAL_FAILED", "1");
	expect(e, "airlock_egress_decisions_total", "outcome=refused,reason=NOT_ALLOWLISTED", "1");
	expect(e, "airlock_egress_lines_malformed_total", "", "1");
	expect(e, "airlock_lifecycle_log_lines_total", "", "4");
	free(e);
	static const char *const reasons[] = { "ALLOWED", "IP_LITERAL", "DIAL_FAILED",
		                               "NOT_ALLOWLISTED" };
	for (size_t i = 0; i < ARRAY_SIZE(reasons); i++) {
		json_t *o = next_line(&l);
		field_str(o, "reason", reasons[i]);
		json_decref(o);
	}
	logfile_done(&l);
	service_metrics_free(m);
}

Test(metrics, follower_stops_at_free, .timeout = 30)
{
	service_metrics *m = metrics(-1);
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	airlock_error err = { 0 };
	cr_assert_eq(service_metrics_egress_follow(m, p[0], &err), 0, "%s", err.message);
	int q[2];
	cr_assert_eq(pipe2(q, O_CLOEXEC), 0);
	cr_assert_lt(service_metrics_egress_follow(m, q[0], &err), 0, "one follower");
	/* The writer is still open: free must not wait for its end. */
	service_metrics_free(m);
	close(p[1]);
	close(q[1]);
}

/* ---- the operator listener ------------------------------------------------------- */

static size_t live_three(void *arg)
{
	(void)arg;
	return 3;
}

static char *http(const char *sock, const char *req, size_t *ret_len)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(util_write_all(fd, req, strlen(req)), 0);
	char *all = NULL;
	cr_assert_eq(util_read_capped(fd, 1 << 20, &all, ret_len), 0);
	close(fd);
	return all;
}

Test(metrics, operator_listener_serves_the_exposition, .timeout = 30)
{
	service_metrics *m = metrics(-1);
	service_metrics_mechanism(m, "native");
	char dir[] = "/tmp/airlock-metrics-XXXXXX";
	cr_assert(mkdtemp(dir));
	char sock[64];
	snprintf(sock, sizeof(sock), "%s/metrics.sock", dir);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 16), 0);
	service_metrics_listener *l = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(service_metrics_listener_new(m, fd, live_three, NULL, &l, &err), 0, "%s",
	             err.message);

	size_t len = 0;
	char *r = http(sock, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &len);
	cr_assert(strncmp(r, "HTTP/1.1 200", 12) == 0, "%.200s", r);
	cr_assert(strcasestr(r, "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
	          "%.400s", r);
	char *body = strstr(r, "\r\n\r\n");
	cr_assert(body);
	body += 4;
	expo *e = malloc(sizeof(*e));
	expo_parse(e, body, len - (size_t)(body - r));
	expect(e, "airlock_sandboxes_live", "", "3");
	expect(e, "airlock_sandbox_provision_duration_seconds_count", "mechanism=native", "0");
	free(e);
	free(r);
	r = http(sock, "GET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &len);
	cr_assert(strncmp(r, "HTTP/1.1 404", 12) == 0, "%.200s", r);
	free(r);
	r = http(sock, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
	         &len);
	cr_assert(strncmp(r, "HTTP/1.1 405", 12) == 0, "%.200s", r);
	free(r);
	service_metrics_listener_free(l);
	cr_assert_eq(fcntl(fd, F_GETFD), -1, "the listener closed its socket");
	unlink(sock);
	rmdir(dir);
	service_metrics_free(m);
}

/* The warm pool's counts: hits with their idle age, misses, refills with
 * their latency, failed refills. */
Test(metrics, pool_counted)
{
	service_metrics *m = metrics(-1);
	service_metrics_pool_take(m, true, 2500);
	service_metrics_pool_take(m, false, 0);
	service_metrics_pool_take(m, false, 0);
	service_metrics_pool_refill(m, true, 150);
	service_metrics_pool_refill(m, false, 9);
	service_metrics_pool_take(NULL, true, 1); /* no metrics: nothing, no crash */
	expo *e = scrape(m, 0, NULL);
	expect(e, "airlock_pool_hits_total", "", "1");
	expect(e, "airlock_pool_misses_total", "", "2");
	expect(e, "airlock_pool_refill_failures_total", "", "1");
	expect(e, "airlock_pool_refill_duration_seconds_count", "", "1");
	expect(e, "airlock_pool_refill_duration_seconds_sum", "", "0.150");
	expect(e, "airlock_pool_refill_duration_seconds_bucket", "le=0.1", "0");
	expect(e, "airlock_pool_refill_duration_seconds_bucket", "le=0.2", "1");
	expect(e, "airlock_pool_idle_age_seconds_count", "", "1");
	expect(e, "airlock_pool_idle_age_seconds_sum", "", "2.500");
	expect(e, "airlock_pool_idle_age_seconds_bucket", "le=1", "0");
	expect(e, "airlock_pool_idle_age_seconds_bucket", "le=5", "1");
	expect(e, "airlock_pool_idle_age_seconds_bucket", "le=+Inf", "1");
	free(e);
	service_metrics_free(m);
}
