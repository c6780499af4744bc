/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reaper's pass and thread (service/reaper.h; docs/reaper.md).
 *
 * A pass: list the live sandboxes; for each batch of at most
 * AIRLOCK_REAPER_BATCH_MAX, ask the worker tier which are stale and
 * destroy those the answer names (an id the batch did not ask about is
 * ignored, counted and logged). A question without a usable answer
 * (unreachable, not 200, malformed, too large, too slow) destroys nothing
 * of its batch and ends the pass: the next interval asks again.
 *
 * A failed destroy leaves the sandbox live, so the next pass asks about it
 * and destroys it again; from service.reaper_destroy_alert_after failures
 * of one sandbox on, each further failure is logged at level "alert" and
 * counted (the specification: a sandbox that cannot be destroyed should
 * page someone). The failure counts are a table sorted by id, rebuilt each
 * pass from the sandboxes still live, so it never holds more entries than
 * there are live sandboxes.
 *
 * Cost: the listing and the table's rebuild are n log n; an answer's ids
 * are found in their batch by binary search; the core's destroy finds its
 * record by a scan of the live table, the one part linear per destroy.
 */
#include "service/reaper.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "core/json_internal.h"
#include "util/util.h"

#define REAPER_PATH "/v1/reaper/stale"

typedef struct failure {
	char id[AIRLOCK_ENVIRONMENT_ID_MAX];
	unsigned count;
} failure;

struct svc_reaper {
	airlock_exec *exec;
	reaper_client *client;
	char address[300];
	int64_t interval_ms, connect_ms, request_ms;
	unsigned alert_after;
	service_metrics *metrics;
	int stop_efd;
	pthread_t thread;
	bool started;
	/* The failure counts, sorted by id; the reaper's thread (or the one
	 * caller of svc_reaper_pass) alone touches them, svc_reaper_failures
	 * reads them under the lock. */
	pthread_mutex_t lock;
	failure *failures;
	size_t n_failures;
};

static void log_line(svc_reaper *r, const char *level, const char *event, const char *msg)
{
	if (r->metrics)
		service_metrics_log_level(r->metrics, level, event, msg);
}

int svc_reaper_new(airlock_exec *exec, const svc_reaper_config *cfg, svc_reaper **ret,
                   airlock_error *err)
{
	if (!exec || !cfg || !cfg->address || cfg->interval_ms <= 0 || cfg->alert_after == 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "reaper: an address, a positive interval and a positive "
		                         "alert count are required");
	svc_reaper *r = calloc(1, sizeof(*r));
	if (!r)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "reaper");
	r->exec = exec;
	r->stop_efd = -1;
	pthread_mutex_init(&r->lock, NULL);
	snprintf(r->address, sizeof(r->address), "%s", cfg->address);
	r->interval_ms = cfg->interval_ms;
	r->connect_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms :
	                                              AIRLOCK_REAPER_CONNECT_TIMEOUT_MS;
	int64_t req = cfg->interval_ms < AIRLOCK_REAPER_REQUEST_TIMEOUT_MS ?
	                      cfg->interval_ms :
	                      AIRLOCK_REAPER_REQUEST_TIMEOUT_MS;
	r->request_ms = cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : req;
	r->alert_after = cfg->alert_after;
	r->metrics = cfg->metrics;
	int rc = reaper_client_new(cfg->address, cfg->tls_ca_file, cfg->credential,
	                           cfg->credential_len, &r->client, err);
	if (rc == 0) {
		r->stop_efd = eventfd(0, EFD_CLOEXEC);
		if (r->stop_efd < 0)
			rc = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "reaper");
	}
	if (rc < 0) {
		svc_reaper_free(r);
		return rc;
	}
	*ret = r;
	return 0;
}

static bool stopped(const svc_reaper *r)
{
	struct pollfd p = { .fd = r->stop_efd, .events = POLLIN };
	return poll(&p, 1, 0) > 0;
}

void svc_reaper_stop(svc_reaper *r)
{
	uint64_t one = 1;
	if (r && r->stop_efd >= 0 && write(r->stop_efd, &one, sizeof(one)) < 0) {
		/* an eventfd write fails only on overflow, which cannot come
		 * from these few writes */
	}
}

static void *reaper_main(void *arg)
{
	svc_reaper *r = arg;
	/* Belt and braces beside MSG_NOSIGNAL: a SIGPIPE raised by a write on
	 * this thread stays pending here rather than ending the service. */
	sigset_t pipe_set;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
	struct pollfd p = { .fd = r->stop_efd, .events = POLLIN };
	for (;;) {
		/* The wait is the stop descriptor's: a stop ends it at once. */
		int64_t left = r->interval_ms;
		int n = 0;
		while (left > 0) {
			int64_t t0 = util_monotonic_ms();
			n = poll(&p, 1, left > 3600000 ? 3600000 : (int)left);
			if (n > 0 || (n < 0 && errno != EINTR))
				break;
			left -= util_monotonic_ms() - t0;
		}
		if (n != 0)
			return NULL;
		svc_reaper_pass_stats st;
		svc_reaper_pass(r, &st);
		if (st.stopped)
			return NULL;
	}
}

int svc_reaper_start(svc_reaper *r, airlock_error *err)
{
	int e = pthread_create(&r->thread, NULL, reaper_main, r);
	if (e != 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "reaper: its thread");
	r->started = true;
	return 0;
}

void svc_reaper_free(svc_reaper *r)
{
	if (!r)
		return;
	svc_reaper_stop(r);
	if (r->started)
		pthread_join(r->thread, NULL);
	reaper_client_free(r->client);
	if (r->stop_efd >= 0)
		close(r->stop_efd);
	free(r->failures);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* ---- the failure counts --------------------------------------------------------- */

static int failure_cmp(const void *a, const void *b)
{
	return strcmp(((const failure *)a)->id, ((const failure *)b)->id);
}

static unsigned failures_of(const failure *v, size_t n, const char *id)
{
	failure key;
	snprintf(key.id, sizeof(key.id), "%s", id);
	const failure *f = v ? bsearch(&key, v, n, sizeof(*v), failure_cmp) : NULL;
	return f ? f->count : 0;
}

unsigned svc_reaper_failures(svc_reaper *r, const char *environment_id)
{
	pthread_mutex_lock(&r->lock);
	unsigned n = failures_of(r->failures, r->n_failures, environment_id);
	pthread_mutex_unlock(&r->lock);
	return n;
}

/* The table anew from the live sandboxes' counts (fails[i] for v[i]):
 * what is not live any more is dropped. Without memory the old table
 * stays (counts are then one pass stale, never unbounded). */
static void failures_rebuild(svc_reaper *r, const airlock_exec_entry *v, const unsigned *fails,
                             size_t n)
{
	size_t cap = 0, k = 0;
	for (size_t i = 0; i < n; i++)
		cap += fails[i] > 0;
	failure *t = NULL;
	if (cap && !(t = calloc(cap, sizeof(*t))))
		return;
	for (size_t i = 0; t && i < n && k < cap; i++)
		if (fails[i] > 0) {
			memcpy(t[k].id, v[i].environment_id, sizeof(t[k].id));
			t[k++].count = fails[i];
		}
	if (t)
		qsort(t, k, sizeof(*t), failure_cmp);
	pthread_mutex_lock(&r->lock);
	free(r->failures);
	r->failures = t;
	r->n_failures = k;
	pthread_mutex_unlock(&r->lock);
}

/* ---- one question ------------------------------------------------------------------ */

/* The question for v[0..n): environment_id, run_id and lease_epoch each,
 * nothing else (no tenant, no spec): malloc'd compact JSON, or NULL. */
static char *question(const airlock_exec_entry *v, size_t n, size_t *ret_len)
{
	json_t *arr = json_array();
	json_t *root = arr ? json_pack("{s:o}", "sandboxes", arr) : NULL;
	if (!root) {
		json_decref(arr);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_pack("{s:s,s:s,s:I}", "environment_id", v[i].environment_id, "run_id",
		                      v[i].run_id, "lease_epoch", (json_int_t)v[i].lease_epoch);
		if (!o || json_array_append_new(arr, o) < 0) {
			json_decref(root);
			return NULL;
		}
	}
	char *s = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (s)
		*ret_len = strlen(s);
	return s;
}

/* The batch's ids sorted, to find an answered id in log n. */
typedef struct batch {
	const airlock_exec_entry *v;
	size_t n;
	size_t *order; /* indices into v, sorted by environment_id */
	bool *stale;   /* by index into v */
	size_t n_stale, unasked;
	char first_unasked[AIRLOCK_ENVIRONMENT_ID_MAX + 16];
} batch;

static int order_cmp(const void *a, const void *b, void *arg)
{
	const batch *t = arg;
	return strcmp(t->v[*(const size_t *)a].environment_id,
	              t->v[*(const size_t *)b].environment_id);
}

static long batch_find(const batch *b, const char *id)
{
	size_t lo = 0, hi = b->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(b->v[b->order[mid]].environment_id, id);
		if (c == 0)
			return (long)b->order[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* {"stale": ["<environment_id>", ...]}: every element a string; an id the
 * batch did not ask about is counted (and the first kept for the log),
 * never acted on. */
static int answer_from(json_t *root, void *arg, airlock_error *err)
{
	batch *b = arg;
	json_t *stale = json_is_object(root) ? json_object_get(root, "stale") : NULL;
	if (!json_is_array(stale))
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "the answer is not an object with a \"stale\" array");
	size_t i;
	json_t *el;
	json_array_foreach(stale, i, el) {
		const char *id = json_string_value(el);
		if (!id)
			return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
			                         "stale[%zu] is not a string", i);
		long k = batch_find(b, id);
		if (k < 0) {
			if (b->unasked++ == 0) {
				char esc[AIRLOCK_ENVIRONMENT_ID_MAX + 16];
				snprintf(b->first_unasked, sizeof(b->first_unasked), "%s",
				         util_escape(esc, sizeof(esc), id, strlen(id)));
			}
			continue;
		}
		if (!b->stale[k]) {
			b->stale[k] = true;
			b->n_stale++;
		}
	}
	return 0;
}

static void count_error(svc_reaper *r, svc_reaper_pass_stats *st, service_reaper_error why,
                        const char *message)
{
	st->error = true;
	st->why = why;
	if (r->metrics)
		service_metrics_reaper_error(r->metrics, why);
	char line[AIRLOCK_ERROR_MESSAGE_MAX + 256];
	snprintf(line, sizeof(line), "%s (%s); nothing of this question is destroyed, the next "
	                             "pass asks again",
	         message, service_reaper_error_name(why));
	log_line(r, "error", "reaper_failed", line);
}

/* Ask about v[0..n) and fill b; false when the pass must end (an error
 * counted and logged, or a stop). */
static bool ask(svc_reaper *r, batch *b, svc_reaper_pass_stats *st)
{
	size_t len = 0;
	char *body = question(b->v, b->n, &len);
	if (!body) {
		count_error(r, st, SERVICE_REAPER_INTERNAL, "reaper: out of memory for the question");
		return false;
	}
	airlock_error err = { 0 };
	reaper_answer a = { 0 };
	service_reaper_error why = SERVICE_REAPER_INTERNAL;
	st->requests++;
	int rc = reaper_client_post(r->client, REAPER_PATH, body, len, r->connect_ms, r->request_ms,
	                            r->stop_efd, &a, &why, &err);
	free(body);
	if (rc == -ECANCELED) {
		st->stopped = true;
		return false;
	}
	if (rc < 0) {
		count_error(r, st, why, err.message);
		return false;
	}
	if (a.status != 200) {
		/* The worker's error body ({"error", "message"}) is its own
		 * words about its own failure: quoted, escaped and cut. */
		char esc[256], msg[1024];
		snprintf(msg, sizeof(msg), "reaper: the worker tier at %s answered %u: %s", r->address,
		         a.status, util_escape(esc, sizeof(esc), a.body, a.len));
		reaper_answer_clear(&a);
		count_error(r, st, SERVICE_REAPER_STATUS, msg);
		return false;
	}
	rc = core_json_decode(a.body, a.len, AIRLOCK_REAPER_ANSWER_MAX, "reaper answer", answer_from,
	                      b, &err);
	reaper_answer_clear(&a);
	if (rc < 0) {
		char msg[AIRLOCK_ERROR_MESSAGE_MAX + 400];
		snprintf(msg, sizeof(msg), "reaper: the worker tier at %s: %s", r->address, err.message);
		count_error(r, st, rc == -ENOMEM ? SERVICE_REAPER_INTERNAL : SERVICE_REAPER_MALFORMED,
		            msg);
		return false;
	}
	st->asked += b->n;
	st->stale += b->n_stale;
	if (b->unasked) {
		st->unasked += b->unasked;
		if (r->metrics)
			service_metrics_reaper_unasked(r->metrics, b->unasked);
		char msg[512];
		snprintf(msg, sizeof(msg),
		         "reaper: the worker tier at %s named %zu id(s) this question did not ask "
		         "about (first: %s); ignored",
		         r->address, b->unasked, b->first_unasked);
		log_line(r, "error", "reaper_unasked", msg);
	}
	return true;
}

/* Destroy what b's answer called stale; fails[] counts by index of b->v. */
static void destroy_stale(svc_reaper *r, batch *b, unsigned *fails, svc_reaper_pass_stats *st)
{
	for (size_t i = 0; i < b->n; i++) {
		if (!b->stale[i])
			continue;
		if (stopped(r)) {
			st->stopped = true;
			return;
		}
		const airlock_exec_entry *e = &b->v[i];
		airlock_error err = { 0 };
		int rc = airlock_exec_destroy_id(r->exec, e->environment_id, e->run_id, e->lease_epoch,
		                                 "reaped", &err);
		if (rc >= 0) {
			/* Destroyed (counted by the observer as reason "reaped"),
			 * or already gone: either way no longer live. */
			st->destroyed += rc > 0;
			fails[i] = 0;
			continue;
		}
		st->failed++;
		if (++fails[i] < r->alert_after)
			continue;
		st->alerts++;
		if (r->metrics)
			service_metrics_destroy_alert(r->metrics);
		char msg[AIRLOCK_ERROR_MESSAGE_MAX + 512];
		snprintf(msg, sizeof(msg),
		         "reaper: sandbox %s (run %s, epoch %lld) has failed to be destroyed %u "
		         "times (alert after %u): %s; it stays live and is retried every interval",
		         e->environment_id, e->run_id, (long long)e->lease_epoch, fails[i],
		         r->alert_after, err.message);
		log_line(r, "alert", "reaper_destroy_alert", msg);
	}
}

void svc_reaper_pass(svc_reaper *r, svc_reaper_pass_stats *st)
{
	*st = (svc_reaper_pass_stats){ 0 };
	airlock_exec_entry *v = NULL;
	size_t n = 0;
	airlock_error err = { 0 };
	if (airlock_exec_list(r->exec, &v, &n, &err) < 0) {
		count_error(r, st, SERVICE_REAPER_INTERNAL, err.message);
		return;
	}
	/* A pooled sandbox belongs to no lease (the pool's idle bound ends
	 * it): the worker tier is never asked about it. Kept at the end of v
	 * so the list's free still sees every entry. */
	size_t all = n, kept = 0;
	for (size_t i = 0; i < n; i++)
		if (!v[i].pooled) {
			airlock_exec_entry t = v[kept];
			v[kept++] = v[i];
			v[i] = t;
		}
	n = kept;
	st->live = n;
	unsigned *fails = calloc(n ? n : 1, sizeof(*fails));
	size_t bmax = n < AIRLOCK_REAPER_BATCH_MAX ? n : AIRLOCK_REAPER_BATCH_MAX;
	size_t *order = calloc(bmax ? bmax : 1, sizeof(*order));
	bool *stale = calloc(bmax ? bmax : 1, sizeof(*stale));
	if (!fails || !order || !stale) {
		count_error(r, st, SERVICE_REAPER_INTERNAL, "reaper: out of memory for the pass");
		goto out;
	}
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < n; i++)
		fails[i] = failures_of(r->failures, r->n_failures, v[i].environment_id);
	pthread_mutex_unlock(&r->lock);
	for (size_t off = 0; off < n && !st->stopped; off += bmax) {
		if (stopped(r)) {
			st->stopped = true;
			break;
		}
		batch b = { .v = v + off, .n = n - off < bmax ? n - off : bmax, .order = order,
			    .stale = stale };
		memset(stale, 0, b.n * sizeof(*stale));
		for (size_t i = 0; i < b.n; i++)
			order[i] = i;
		qsort_r(order, b.n, sizeof(*order), order_cmp, &b);
		if (!ask(r, &b, st))
			break;
		destroy_stale(r, &b, fails + off, st);
	}
	failures_rebuild(r, v, fails, n);
	if (st->stale || st->failed || st->unasked) {
		char msg[512];
		snprintf(msg, sizeof(msg),
		         "reaper: %zu live, %zu asked in %zu question(s), %zu stale, %zu destroyed, "
		         "%zu destroy(s) failed, %zu unasked id(s) ignored",
		         st->live, st->asked, st->requests, st->stale, st->destroyed, st->failed,
		         st->unasked);
		log_line(r, "info", "reaper_pass", msg);
	}
out:
	free(fails);
	free(order);
	free(stale);
	airlock_exec_list_free(v, all);
}
