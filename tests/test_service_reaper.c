/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reaper (src/service/reaper.h, docs/reaper.md) over the fake
 * mechanism, against a double of the worker tier's POST /v1/reaper/stale:
 * a thread serving a Unix socket that answers by lease epoch (an epoch
 * below the run's current one is stale), or with garbage, 503, nothing at
 * all, or ids nobody asked about. A destroy is failed on purpose by a
 * wrapper of the fake's operations table.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "airlock/fake.h"
#include "airlock/ids.h"
#include "airlock/port/exec.h"
#include "airlock/remote.h"
#include "airlock/service.h"
#include "airlock/settings.h"
#include "service/metrics.h"
#include "service/reaper.h"
#include "testlib.h"
#include "util/util.h"

#define TOKEN "reaper-test-token-0123456789abcdef"
#define CURRENT_EPOCH 2

/* ---- the worker tier's double ------------------------------------------------ */

/* A listening socket served one connection at a time by a thread,
 * until stop. */
typedef struct listener {
	int lfd, stop;
	pthread_t thread;
	void (*serve)(void *arg, int fd);
	void *arg;
} listener;

static void *listener_main(void *arg)
{
	listener *l = arg;
	for (;;) {
		struct pollfd p[2] = { { .fd = l->lfd, .events = POLLIN }, { .fd = l->stop, .events = POLLIN } };
		if (poll(p, 2, -1) < 0 || p[1].revents)
			return NULL;
		int fd = accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			l->serve(l->arg, fd);
	}
}

/* lfd is bound; it listens from now on. */
static void listener_start(listener *l, int lfd, void (*serve)(void *, int), void *arg)
{
	*l = (listener){ .lfd = lfd, .stop = eventfd(0, EFD_CLOEXEC), .serve = serve, .arg = arg };
	cr_assert_geq(l->stop, 0);
	cr_assert_eq(listen(lfd, 16), 0);
	cr_assert_eq(pthread_create(&l->thread, NULL, listener_main, l), 0);
}

static void listener_stop(listener *l)
{
	uint64_t one = 1;
	cr_assert_eq(write(l->stop, &one, sizeof(one)), 8);
	pthread_join(l->thread, NULL);
	close(l->lfd);
	close(l->stop);
}

typedef enum mode {
	ANSWER_BY_EPOCH, /* stale: lease_epoch < CURRENT_EPOCH */
	ANSWER_GARBAGE,
	ANSWER_WRONG_SHAPE,
	ANSWER_503,
	ANSWER_NEVER, /* read the question, then say nothing */
	ANSWER_CHUNKED, /* by epoch, chunked */
	ANSWER_HUGE,    /* 2 MiB of JSON whitespace, its length said */
	ANSWER_HUGE_UNFRAMED, /* the same, ended by the close */
} mode;

typedef struct worker {
	char dir[64];
	char sock[128];
	char addr[160]; /* "unix:" and sock */
	listener l;
	_Atomic mode mode;
	const char *extra_id; /* named in the next extra_left answers (-1: every one) */
	atomic_int extra_left;
	atomic_int requests;
	atomic_int max_entries;
	atomic_bool bad_entry; /* an entry with a member other than the three */
	char auth[256];        /* the last Authorization header */
	pthread_mutex_t lock;
} worker;

static void put_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static char *stale_answer(worker *w, const char *body, size_t len)
{
	json_t *root = json_loadb(body, len, 0, NULL);
	json_t *arr = json_object_get(root, "sandboxes");
	json_t *stale = json_array();
	size_t i;
	json_t *el;
	int n = (int)json_array_size(arr);
	if (n > atomic_load(&w->max_entries))
		atomic_store(&w->max_entries, n);
	json_array_foreach(arr, i, el) {
		if (json_object_size(el) != 3 || !json_string_value(json_object_get(el, "run_id")))
			atomic_store(&w->bad_entry, true);
		if (json_integer_value(json_object_get(el, "lease_epoch")) < CURRENT_EPOCH)
			json_array_append(stale, json_object_get(el, "environment_id"));
	}
	if (w->extra_id && atomic_load(&w->extra_left) != 0) {
		if (atomic_load(&w->extra_left) > 0)
			atomic_fetch_sub(&w->extra_left, 1);
		json_array_append_new(stale, json_string(w->extra_id));
	}
	json_t *o = json_pack("{s:o}", "stale", stale);
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	json_decref(root);
	return s;
}

static void serve_one(void *arg, int fd)
{
	worker *w = arg;
	size_t cap = 4u << 20, have = 0;
	char *buf = malloc(cap + 1);
	size_t body_off = 0, clen = 0;
	bool head = false;
	char *ans = NULL;
	while (have < cap) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = w->l.stop, .events = POLLIN } };
		if (poll(p, 2, 5000) <= 0 || p[1].revents)
			goto out;
		ssize_t n = recv(fd, buf + have, cap - have, 0);
		if (n <= 0)
			goto out;
		have += (size_t)n;
		buf[have] = 0;
		if (!head) {
			char *e = strstr(buf, "\r\n\r\n");
			if (!e)
				continue;
			head = true;
			body_off = (size_t)(e - buf) + 4;
			char *cl = strcasestr(buf, "\r\ncontent-length:");
			clen = cl ? strtoul(cl + 17, NULL, 10) : 0;
			char *au = strcasestr(buf, "\r\nauthorization:");
			pthread_mutex_lock(&w->lock);
			w->auth[0] = 0;
			if (au) {
				char *eol = strstr(au + 2, "\r\n");
				snprintf(w->auth, sizeof(w->auth), "%.*s", (int)(eol - au - 2), au + 2);
			}
			pthread_mutex_unlock(&w->lock);
		}
		if (head && have - body_off >= clen)
			break;
	}
	atomic_fetch_add(&w->requests, 1);
	char hdr[256];
	switch (atomic_load(&w->mode)) {
	case ANSWER_BY_EPOCH:
	case ANSWER_CHUNKED:
		ans = stale_answer(w, buf + body_off, clen);
		break;
	case ANSWER_GARBAGE: ans = strdup("{\"stale\": [\"env_"); break;
	case ANSWER_WRONG_SHAPE: ans = strdup("{\"stale\": \"everything\"}"); break;
	case ANSWER_503:
		ans = strdup("{\"error\":\"database\",\"message\":\"the database failed\"}");
		snprintf(hdr, sizeof(hdr),
		         "HTTP/1.1 503 Service Unavailable\r\nContent-Length: %zu\r\n\r\n", strlen(ans));
		put_all(fd, hdr, strlen(hdr));
		put_all(fd, ans, strlen(ans));
		goto out;
	case ANSWER_HUGE:
	case ANSWER_HUGE_UNFRAMED: {
		size_t n = 2u << 20;
		ans = malloc(n + 3);
		memset(ans, ' ', n);
		memcpy(ans + n, "{}", 3);
		if (atomic_load(&w->mode) == ANSWER_HUGE)
			snprintf(hdr, sizeof(hdr), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n",
			         n + 2);
		else
			snprintf(hdr, sizeof(hdr), "HTTP/1.1 200 OK\r\n\r\n");
		put_all(fd, hdr, strlen(hdr));
		put_all(fd, ans, n + 2);
		goto out;
	}
	case ANSWER_NEVER: {
		struct pollfd p = { .fd = w->l.stop, .events = POLLIN };
		poll(&p, 1, 60000);
		goto out;
	}
	}
	if (atomic_load(&w->mode) == ANSWER_CHUNKED) {
		size_t n = strlen(ans), half = n / 2;
		snprintf(hdr, sizeof(hdr),
		         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n", half);
		put_all(fd, hdr, strlen(hdr));
		put_all(fd, ans, half);
		/* The reader sees the first chunk alone, then the rest. */
		usleep(20000);
		snprintf(hdr, sizeof(hdr), "\r\n%zx\r\n", n - half);
		put_all(fd, hdr, strlen(hdr));
		put_all(fd, ans + half, n - half);
		put_all(fd, "\r\n0\r\n\r\n", 7);
	} else {
		snprintf(hdr, sizeof(hdr),
		         "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
		         strlen(ans));
		put_all(fd, hdr, strlen(hdr));
		put_all(fd, ans, strlen(ans));
	}
out:
	free(ans);
	free(buf);
	close(fd);
}

static void worker_start(worker *w, mode m)
{
	memset(w, 0, sizeof(*w));
	strcpy(w->dir, "/tmp/airlock-reaper-XXXXXX");
	cr_assert_not_null(mkdtemp(w->dir));
	snprintf(w->sock, sizeof(w->sock), "%s/worker.sock", w->dir);
	snprintf(w->addr, sizeof(w->addr), "unix:%s", w->sock);
	w->mode = m;
	pthread_mutex_init(&w->lock, NULL);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	cr_assert_lt(strlen(w->sock), sizeof(sun.sun_path));
	memcpy(sun.sun_path, w->sock, strlen(w->sock) + 1);
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	listener_start(&w->l, lfd, serve_one, w);
}

static void worker_stop(worker *w)
{
	listener_stop(&w->l);
	unlink(w->sock);
	rmdir(w->dir);
	pthread_mutex_destroy(&w->lock);
}

/* ---- the service's side ------------------------------------------------------- */

/* Destroys of fail_id fail while fail_left > 0 (then succeed). */
static char fail_id[AIRLOCK_ENVIRONMENT_ID_MAX];
static atomic_int fail_left;
static airlock_exec_ops failing_ops;

static int failing_destroy(void *ctx, const char *id, airlock_error *err)
{
	if (strcmp(id, fail_id) == 0 && atomic_load(&fail_left) > 0) {
		atomic_fetch_sub(&fail_left, 1);
		return airlock_error_set(err, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
		                         "test: a process survived");
	}
	return airlock_fake_ops()->destroy(ctx, id, err);
}

typedef struct side {
	airlock_fake *fake;
	airlock_exec *exec;
	service_metrics *metrics;
	svc_reaper *reaper;
	char log_path[64];
	int log_fd;
} side;

static void side_open(side *t, const char *address, int64_t request_ms)
{
	memset(t, 0, sizeof(*t));
	airlock_error err = { 0 };
	failing_ops = *airlock_fake_ops();
	failing_ops.destroy = failing_destroy;
	fail_id[0] = 0;
	atomic_store(&fail_left, 0);
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.observer = service_metrics_observer();
	strcpy(t->log_path, "/tmp/airlock-reaper-log-XXXXXX");
	t->log_fd = mkstemp(t->log_path);
	cr_assert_geq(t->log_fd, 0);
	cr_assert_eq(service_metrics_new(t->log_fd, &t->metrics, &err), 0, "%s", err.message);
	cfg.observer_arg = t->metrics;
	cr_assert_eq(airlock_fake_new(&t->fake, &err), 0);
	cr_assert_eq(airlock_exec_new(&failing_ops, t->fake, &cfg, &t->exec, &err), 0, "%s",
	             err.message);
	svc_reaper_config rc = {
		.address = address, .credential = TOKEN, .credential_len = strlen(TOKEN),
		.interval_ms = 60000, .alert_after = 3, .request_timeout_ms = request_ms,
		.metrics = t->metrics,
	};
	cr_assert_eq(svc_reaper_new(t->exec, &rc, &t->reaper, &err), 0, "%s", err.message);
}

static void side_close(side *t)
{
	svc_reaper_free(t->reaper);
	airlock_exec_free(t->exec);
	service_metrics_free(t->metrics);
	close(t->log_fd);
	unlink(t->log_path);
}

/* A sandbox of run at epoch, its id in ret. */
static void provision(side *t, const char *run, int64_t epoch, char ret[AIRLOCK_ENVIRONMENT_ID_MAX])
{
	airlock_environment_spec spec;
	test_spec(&spec, "tenant-a", run);
	spec.lease_epoch = epoch;
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(t->exec, &spec, &h, &err), 0, "%s", err.message);
	if (ret)
		memcpy(ret, h.environment_id, AIRLOCK_ENVIRONMENT_ID_MAX);
	airlock_environment_handle_clear(&h);
	airlock_environment_spec_clear(&spec);
}

static bool live(side *t, const char *id)
{
	char buf[256];
	return airlock_exec_tenant_of(t->exec, id, buf, sizeof(buf), NULL) == 0;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static char *metrics_text(side *t)
{
	static char copy[1 << 16];
	char *m = service_metrics_render(t->metrics, airlock_exec_live(t->exec), NULL);
	cr_assert_not_null(m);
	snprintf(copy, sizeof(copy), "%s", m);
	free(m);
	return copy;
}

/* The double in mode m and the service's side asking it. */
static void fixture_open(worker *w, side *t, mode m, int64_t request_ms)
{
	worker_start(w, m);
	side_open(t, w->addr, request_ms);
}

static void fixture_close(worker *w, side *t)
{
	side_close(t);
	worker_stop(w);
}

/* ---- the tests ------------------------------------------------------------------ */

Test(reaper, stale_destroyed_current_kept_token_sent_never_logged)
{
	worker w;
	side t;
	fixture_open(&w, &t, ANSWER_BY_EPOCH, 0);
	char stale1[64], stale2[64], cur[64];
	provision(&t, "run-1", 1, stale1);
	provision(&t, "run-2", 1, stale2);
	provision(&t, "run-3", CURRENT_EPOCH, cur);

	svc_reaper_pass_stats st;
	svc_reaper_pass(t.reaper, &st);
	cr_assert(!st.error, "the pass failed: %s", slurp(t.log_path));
	cr_assert_eq(st.live, 3);
	cr_assert_eq(st.asked, 3);
	cr_assert_eq(st.stale, 2);
	cr_assert_eq(st.destroyed, 2);
	cr_assert(!live(&t, stale1) && !live(&t, stale2), "the stale sandboxes are destroyed");
	cr_assert(live(&t, cur), "the current one is kept");
	cr_assert(!atomic_load(&w.bad_entry), "only environment_id, run_id and lease_epoch go out");
	cr_assert_str_eq(w.auth, "Authorization: Bearer " TOKEN);

	const char *m = metrics_text(&t);
	cr_assert(strstr(m, "airlock_sandbox_orphan_reaps_total 2\n"), "%s", m);
	cr_assert(strstr(m, "airlock_sandbox_destroyed_total{reason=\"reaped\"} 2\n"), "%s", m);
	const char *log = slurp(t.log_path);
	cr_assert(strstr(log, "\"reason\":\"reaped\""), "%s", log);
	cr_assert_null(strstr(log, TOKEN), "the token is never logged");

	/* A second pass finds nothing more to do. */
	svc_reaper_pass(t.reaper, &st);
	cr_assert_eq(st.live, 1);
	cr_assert_eq(st.destroyed, 0);
	fixture_close(&w, &t);
}

Test(reaper, chunked_answer_is_read)
{
	worker w;
	side t;
	fixture_open(&w, &t, ANSWER_CHUNKED, 0);
	char stale[64], cur[64];
	provision(&t, "run-1", 1, stale);
	provision(&t, "run-2", CURRENT_EPOCH, cur);
	svc_reaper_pass_stats st;
	svc_reaper_pass(t.reaper, &st);
	cr_assert(!st.error, "%s", slurp(t.log_path));
	cr_assert(!live(&t, stale) && live(&t, cur));
	fixture_close(&w, &t);
}

Test(reaper, unasked_ids_are_ignored_and_logged)
{
	worker w;
	side t;
	fixture_open(&w, &t, ANSWER_BY_EPOCH, 0);
	char cur[64], other[64];
	provision(&t, "run-1", CURRENT_EPOCH, cur);
	provision(&t, "run-2", CURRENT_EPOCH, other);
	/* An id no sandbox here has, with a quote and a newline in it: named
	 * in the log escaped, on one line. */
	w.extra_id = "env_00000000000000000000000000000000\"\n";
	atomic_store(&w.extra_left, -1);
	svc_reaper_pass_stats st;
	svc_reaper_pass(t.reaper, &st);
	cr_assert(!st.error);
	cr_assert_eq(st.unasked, 1);
	cr_assert_eq(st.destroyed, 0);
	cr_assert(live(&t, cur) && live(&t, other));
	const char *m = metrics_text(&t);
	cr_assert(strstr(m, "airlock_reaper_unasked_ids_total 1\n"), "%s", m);
	const char *log = slurp(t.log_path);
	cr_assert(strstr(log, "\"event\":\"reaper_unasked\""), "%s", log);
	cr_assert(strstr(log, "env_00000000000000000000000000000000"), "%s", log);
	fixture_close(&w, &t);
}

/* An answer naming a live sandbox that was not in its question (the
 * question was about another set) is not acted on, even though the
 * sandbox is live and a later question of the same pass asks about it. */
Test(reaper, an_unasked_live_id_is_not_destroyed)
{
	worker w;
	side t;
	fixture_open(&w, &t, ANSWER_BY_EPOCH, 0);
	/* 1025 sandboxes, two questions; the first answer (about the first
	 * 1024) also names the last sandbox, which only the second asks
	 * about, and the second answer does not call it stale. */
	char last[64];
	for (int i = 0; i <= AIRLOCK_REAPER_BATCH_MAX; i++)
		provision(&t, "run-cur", CURRENT_EPOCH, NULL);
	/* The pass asks in the listing's order (created_at, then id). */
	airlock_exec_entry *v = NULL;
	size_t n = 0;
	cr_assert_eq(airlock_exec_list(t.exec, &v, &n, NULL), 0);
	cr_assert_eq(n, AIRLOCK_REAPER_BATCH_MAX + 1);
	memcpy(last, v[AIRLOCK_REAPER_BATCH_MAX].environment_id, sizeof(last));
	airlock_exec_list_free(v, n);
	w.extra_id = last;
	atomic_store(&w.extra_left, 1);
	svc_reaper_pass_stats st;
	svc_reaper_pass(t.reaper, &st);
	cr_assert(!st.error);
	cr_assert_eq(st.requests, 2);
	cr_assert_eq(st.unasked, 1);
	cr_assert_eq(st.stale, 0);
	cr_assert_eq(st.destroyed, 0);
	cr_assert(live(&t, last), "an id answered to another question is not destroyed");
	fixture_close(&w, &t);
}

static void failed_pass(mode m, service_reaper_error want, const char *reason, int64_t request_ms,
                        bool has_listener)
{
	worker w;
	worker_start(&w, m);
	if (!has_listener)
		snprintf(w.addr, sizeof(w.addr), "unix:%s/nobody.sock", w.dir);
	side t;
	side_open(&t, w.addr, request_ms);
	char stale[64];
	provision(&t, "run-1", 1, stale);
	svc_reaper_pass_stats st;
	int64_t t0 = util_monotonic_ms();
	svc_reaper_pass(t.reaper, &st);
	int64_t took = util_monotonic_ms() - t0;
	cr_assert(st.error, "the pass fails");
	cr_assert_eq(st.why, want, "reason %s, want %s", service_reaper_error_name(st.why), reason);
	cr_assert_eq(st.destroyed, 0);
	cr_assert(live(&t, stale), "nothing is destroyed without a usable answer");
	if (request_ms)
		cr_assert_lt(took, request_ms + 1000, "bounded by the request timeout: %lld ms",
		             (long long)took);
	char want_line[128];
	snprintf(want_line, sizeof(want_line), "airlock_reaper_errors_total{reason=\"%s\"} 1\n",
	         reason);
	const char *mt = metrics_text(&t);
	cr_assert(strstr(mt, want_line), "%s", mt);
	const char *log = slurp(t.log_path);
	cr_assert(strstr(log, "\"level\":\"error\",\"event\":\"reaper_failed\""), "%s", log);
	cr_assert_null(strstr(log, TOKEN));
	/* The next pass asks again. */
	svc_reaper_pass(t.reaper, &st);
	cr_assert(st.error);
	fixture_close(&w, &t);
}

Test(reaper, no_listener_is_unreachable)
{
	failed_pass(ANSWER_BY_EPOCH, SERVICE_REAPER_UNREACHABLE, "unreachable", 0, false);
}

Test(reaper, garbage_is_malformed)
{
	failed_pass(ANSWER_GARBAGE, SERVICE_REAPER_MALFORMED, "malformed", 0, true);
}

Test(reaper, wrong_shape_is_malformed)
{
	failed_pass(ANSWER_WRONG_SHAPE, SERVICE_REAPER_MALFORMED, "malformed", 0, true);
}

Test(reaper, status_503_is_counted)
{
	failed_pass(ANSWER_503, SERVICE_REAPER_STATUS, "status", 0, true);
}

Test(reaper, an_answer_over_1_mib_is_refused)
{
	failed_pass(ANSWER_HUGE, SERVICE_REAPER_TOO_LARGE, "too_large", 0, true);
	failed_pass(ANSWER_HUGE_UNFRAMED, SERVICE_REAPER_TOO_LARGE, "too_large", 0, true);
}

Test(reaper, a_worker_that_never_answers_times_out)
{
	failed_pass(ANSWER_NEVER, SERVICE_REAPER_TIMEOUT, "timeout", 300, true);
}

Test(reaper, failed_destroy_is_retried_and_alerts_after_n)
{
	worker w;
	side t;
	fixture_open(&w, &t, ANSWER_BY_EPOCH, 0);
	char stuck[64];
	provision(&t, "run-1", 1, stuck);
	memcpy(fail_id, stuck, sizeof(fail_id));
	atomic_store(&fail_left, 4);
	svc_reaper_pass_stats st;
	for (unsigned pass = 1; pass <= 4; pass++) {
		svc_reaper_pass(t.reaper, &st);
		cr_assert(!st.error);
		cr_assert_eq(st.failed, 1, "pass %u", pass);
		cr_assert(live(&t, stuck), "a failed destroy leaves the sandbox live");
		cr_assert_eq(svc_reaper_failures(t.reaper, stuck), pass);
		cr_assert_eq(st.alerts, pass >= 3 ? 1u : 0u, "pass %u", pass);
	}
	const char *m = metrics_text(&t);
	cr_assert(strstr(m, "airlock_sandbox_destroy_alerts_total 2\n"), "%s", m);
	cr_assert(strstr(m, "airlock_sandbox_orphan_reaps_total 0\n"), "%s", m);
	const char *log = slurp(t.log_path);
	size_t alerts = 0;
	for (const char *p = log; (p = strstr(p, "\"level\":\"alert\"")); p++)
		alerts++;
	cr_assert_eq(alerts, 2, "one alert line per failure from the third on: %s", log);
	/* The fifth pass destroys it, and its count goes with it. */
	svc_reaper_pass(t.reaper, &st);
	cr_assert_eq(st.destroyed, 1);
	cr_assert(!live(&t, stuck));
	cr_assert_eq(svc_reaper_failures(t.reaper, stuck), 0);
	m = metrics_text(&t);
	cr_assert(strstr(m, "airlock_sandbox_orphan_reaps_total 1\n"), "%s", m);
	fixture_close(&w, &t);
}

Test(reaper, batches_of_at_most_1024)
{
	worker w;
	side t;
	fixture_open(&w, &t, ANSWER_BY_EPOCH, 0);
	size_t n = 2 * AIRLOCK_REAPER_BATCH_MAX + 5;
	for (size_t i = 0; i < n; i++)
		provision(&t, i % 2 ? "run-a" : "run-b", i % 2 ? 1 : CURRENT_EPOCH, NULL);
	svc_reaper_pass_stats st;
	svc_reaper_pass(t.reaper, &st);
	cr_assert(!st.error, "%s", slurp(t.log_path));
	cr_assert_eq(st.requests, 3);
	cr_assert_eq(atomic_load(&w.requests), 3);
	cr_assert_eq(atomic_load(&w.max_entries), AIRLOCK_REAPER_BATCH_MAX);
	cr_assert_eq(st.asked, n);
	cr_assert_eq(st.destroyed, n / 2);
	cr_assert_eq(airlock_exec_live(t.exec), n - n / 2);
	fixture_close(&w, &t);
}

typedef struct pass_arg {
	svc_reaper *r;
	svc_reaper_pass_stats st;
} pass_arg;

static void *pass_thread(void *arg)
{
	pass_arg *a = arg;
	svc_reaper_pass(a->r, &a->st);
	return NULL;
}

Test(reaper, stop_during_a_pass_is_prompt)
{
	worker w;
	side t;
	fixture_open(&w, &t, ANSWER_NEVER, 30000);
	char stale[64];
	provision(&t, "run-1", 1, stale);
	pass_arg a = { .r = t.reaper };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, pass_thread, &a), 0);
	while (atomic_load(&w.requests) == 0)
		usleep(5000);
	int64_t t0 = util_monotonic_ms();
	svc_reaper_stop(t.reaper);
	pthread_join(th, NULL);
	int64_t took = util_monotonic_ms() - t0;
	cr_assert_lt(took, 500, "the pass ended %lld ms after the stop", (long long)took);
	cr_assert(a.st.stopped);
	cr_assert(!a.st.error, "a stop is not counted as the worker tier's failure");
	cr_assert(live(&t, stale));
	fixture_close(&w, &t);
}

/* The service's own reaper thread: its pass runs on the interval, and
 * airlock_service_free during a pass waiting on the worker returns at once. */
Test(reaper, the_service_runs_it_and_stops_it_promptly)
{
	worker w;
	side t;
	fixture_open(&w, &t, ANSWER_BY_EPOCH, 0);
	svc_reaper_free(t.reaper);
	t.reaper = NULL;
	char stale[64], cur[64];
	provision(&t, "run-1", 1, stale);
	provision(&t, "run-2", CURRENT_EPOCH, cur);

	char sock[160];
	snprintf(sock, sizeof(sock), "unix:%s/airlock.sock", w.dir);
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.listen = sock;
	sc.credential = "svc-token-0123456789abcdef";
	sc.credential_len = strlen(sc.credential);
	airlock_service *s = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_service_new(&sc, t.exec, &s, &err), 0, "%s", err.message);
	svc_reaper_config rc = { .address = w.addr, .credential = TOKEN,
		                 .credential_len = strlen(TOKEN), .interval_ms = 50,
		                 .alert_after = 3, .metrics = t.metrics };
	cr_assert_eq(svc_service_reaper_start(s, &rc, &err), 0, "%s", err.message);
	for (int i = 0; i < 200 && live(&t, stale); i++)
		usleep(10000);
	cr_assert(!live(&t, stale), "the service's reaper destroyed the stale sandbox");
	cr_assert(live(&t, cur));

	/* Now a worker that never answers, with the default timeouts (min
	 * of the interval and 30 s: 50 ms here would end it anyway, so the
	 * interval is long and the request timeout 30 s). */
	atomic_store(&w.mode, ANSWER_NEVER);
	airlock_service_free(s);
	s = NULL;
	cr_assert_eq(airlock_service_new(&sc, t.exec, &s, &err), 0, "%s", err.message);
	rc.interval_ms = 20;
	rc.request_timeout_ms = 30000;
	int before = atomic_load(&w.requests);
	cr_assert_eq(svc_service_reaper_start(s, &rc, &err), 0, "%s", err.message);
	while (atomic_load(&w.requests) == before)
		usleep(5000);
	int64_t t0 = util_monotonic_ms();
	airlock_service_free(s);
	int64_t took = util_monotonic_ms() - t0;
	cr_assert_lt(took, 1000, "airlock_service_free took %lld ms", (long long)took);
	fixture_close(&w, &t);
}

Test(reaper, the_client_refuses_bad_configuration)
{
	reaper_client *c = NULL;
	airlock_error err = { 0 };
	cr_assert_lt(reaper_client_new("unix:/x", NULL, "tok en", 6, &c, &err), 0);
	cr_assert(strstr(err.message, "printable"), "%s", err.message);
	cr_assert_null(strstr(err.message, "tok en"), "the token is not quoted");
	cr_assert_lt(reaper_client_new("127.0.0.1:443", NULL, TOKEN, strlen(TOKEN), &c, &err), 0);
	cr_assert(strstr(err.message, "reaper_tls_ca_file"), "%s", err.message);
	cr_assert_lt(reaper_client_new("127.0.0.1:0", "/nonexistent", TOKEN, strlen(TOKEN), &c, &err),
	             0);
	cr_assert_lt(reaper_client_new("nohostport", "/nonexistent", TOKEN, strlen(TOKEN), &c, &err),
	             0);
}

/* ---- TLS on loopback -------------------------------------------------------------- */

typedef struct tls_worker {
	listener l;
	int port;
	gnutls_certificate_credentials_t cred;
	atomic_int handshakes;
} tls_worker;

/* One question over TLS, answered by epoch. */
static void serve_tls(void *arg, int fd)
{
	tls_worker *w = arg;
	struct timeval tv = { .tv_sec = 5 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	gnutls_session_t s;
	gnutls_init(&s, GNUTLS_SERVER);
	gnutls_set_default_priority(s);
	gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, w->cred);
	gnutls_transport_set_int(s, fd);
	if (gnutls_handshake(s) == 0) {
		atomic_fetch_add(&w->handshakes, 1);
		static char buf[1 << 20];
		size_t have = 0, body_off = 0, clen = 0;
		for (;;) {
			ssize_t n = gnutls_record_recv(s, buf + have, sizeof(buf) - 1 - have);
			if (n <= 0)
				break;
			have += (size_t)n;
			buf[have] = 0;
			char *e = strstr(buf, "\r\n\r\n");
			if (!e)
				continue;
			body_off = (size_t)(e - buf) + 4;
			char *cl = strcasestr(buf, "\r\ncontent-length:");
			clen = cl ? strtoul(cl + 17, NULL, 10) : 0;
			if (have - body_off >= clen)
				break;
		}
		worker by_epoch = { 0 };
		char *ans = stale_answer(&by_epoch, buf + body_off, clen);
		char hdr[128];
		snprintf(hdr, sizeof(hdr), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n",
		         strlen(ans));
		gnutls_record_send(s, hdr, strlen(hdr));
		gnutls_record_send(s, ans, strlen(ans));
		gnutls_bye(s, GNUTLS_SHUT_WR);
		free(ans);
	}
	gnutls_deinit(s);
	close(fd);
}

static void tls_worker_start(tls_worker *w, const char *cert, const char *key)
{
	memset(w, 0, sizeof(*w));
	cr_assert_eq(gnutls_certificate_allocate_credentials(&w->cred), 0);
	cr_assert_eq(gnutls_certificate_set_x509_key_file(w->cred, cert, key, GNUTLS_X509_FMT_PEM), 0);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	socklen_t sl = sizeof(sin);
	cr_assert_eq(getsockname(lfd, (struct sockaddr *)&sin, &sl), 0);
	w->port = ntohs(sin.sin_port);
	listener_start(&w->l, lfd, serve_tls, w);
}

static void tls_worker_stop(tls_worker *w)
{
	listener_stop(&w->l);
	gnutls_certificate_free_credentials(w->cred);
}

static bool make_cert(const char *dir, const char *name, const char *san)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
	         "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s/%s.key -out %s/%s.pem "
	         "-days 1 -subj /CN=%s -addext subjectAltName=%s >/dev/null 2>&1",
	         dir, name, dir, name, name, san);
	return system(cmd) == 0;
}

/* One pass against the TLS double serving name's certificate, trusting
 * ca's: the pass's stats. */
static svc_reaper_pass_stats tls_pass(const char *dir, const char *name, const char *ca,
                                      int *ret_handshakes)
{
	char cert[160], key[160], ca_path[160], addr[64];
	snprintf(cert, sizeof(cert), "%s/%s.pem", dir, name);
	snprintf(key, sizeof(key), "%s/%s.key", dir, name);
	snprintf(ca_path, sizeof(ca_path), "%s/%s.pem", dir, ca);
	tls_worker w;
	tls_worker_start(&w, cert, key);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", w.port);
	side t;
	memset(&t, 0, sizeof(t));
	airlock_error err = { 0 };
	failing_ops = *airlock_fake_ops();
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cr_assert_eq(airlock_fake_new(&t.fake, &err), 0);
	cr_assert_eq(airlock_exec_new(&failing_ops, t.fake, &cfg, &t.exec, &err), 0);
	svc_reaper_config rc = { .address = addr, .tls_ca_file = ca_path, .credential = TOKEN,
		                 .credential_len = strlen(TOKEN), .interval_ms = 60000,
		                 .alert_after = 3 };
	cr_assert_eq(svc_reaper_new(t.exec, &rc, &t.reaper, &err), 0, "%s", err.message);
	char stale[64], cur[64];
	provision(&t, "run-1", 1, stale);
	provision(&t, "run-2", CURRENT_EPOCH, cur);
	svc_reaper_pass_stats st;
	svc_reaper_pass(t.reaper, &st);
	cr_assert(live(&t, cur));
	cr_assert_eq(live(&t, stale), st.error, "destroyed exactly when the pass succeeded");
	svc_reaper_free(t.reaper);
	airlock_exec_free(t.exec);
	tls_worker_stop(&w);
	*ret_handshakes = atomic_load(&w.handshakes);
	return st;
}

Test(reaper, tls_verifies_the_ca_and_the_host)
{
	char dir[] = "/tmp/airlock-reaper-tls-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	if (!make_cert(dir, "loopback", "IP:127.0.0.1,DNS:localhost") ||
	    !make_cert(dir, "elsewhere", "DNS:worker.example"))
		cr_skip_test("openssl cannot make a test certificate here");
	int hs = 0;
	svc_reaper_pass_stats st = tls_pass(dir, "loopback", "loopback", &hs);
	cr_assert(!st.error, "the certificate for 127.0.0.1 under the trusted CA: reason %s",
	          service_reaper_error_name(st.why));
	cr_assert_eq(st.destroyed, 1);
	cr_assert_eq(hs, 1);
	/* Trusted, but for another name: refused before anything is sent. */
	st = tls_pass(dir, "elsewhere", "elsewhere", &hs);
	cr_assert(st.error);
	cr_assert_eq(st.why, SERVICE_REAPER_TLS, "reason %s", service_reaper_error_name(st.why));
	/* The right name, but not chained to the CA the reaper trusts. */
	st = tls_pass(dir, "loopback", "elsewhere", &hs);
	cr_assert(st.error);
	cr_assert_eq(st.why, SERVICE_REAPER_TLS, "reason %s", service_reaper_error_name(st.why));
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/* The core's destroy by id takes only the sandbox the question named:
 * the id at the run and epoch it carried. */
Test(reaper, destroy_id_takes_only_the_named_run_and_epoch)
{
	side t;
	side_open(&t, "unix:/nonexistent/worker.sock", 0);
	char id[64];
	provision(&t, "run-1", 3, id);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_destroy_id(t.exec, id, "run-1", 2, "reaped", &err), 0);
	cr_assert_eq(airlock_exec_destroy_id(t.exec, id, "run-2", 3, "reaped", &err), 0);
	cr_assert(live(&t, id), "another epoch's or run's question does not take it");
	memcpy(fail_id, id, sizeof(fail_id));
	atomic_store(&fail_left, 1);
	cr_assert_lt(airlock_exec_destroy_id(t.exec, id, "run-1", 3, "reaped", &err), 0);
	cr_assert(live(&t, id), "a failed destroy keeps the record");
	cr_assert_eq(airlock_exec_destroy_id(t.exec, id, "run-1", 3, "reaped", &err), 1, "%s",
	             err.message);
	cr_assert(!live(&t, id));
	cr_assert_eq(airlock_exec_destroy_id(t.exec, id, "run-1", 3, "reaped", &err), 0,
	             "already gone");
	side_close(&t);
}

/* The whole service as `airlock serve` opens it (airlock_service_host_open)
 * with service.reaper_address set: its reaper asks the double every
 * interval and a sandbox provisioned through the API under a stale epoch
 * is destroyed, with reason "reaped" in the lifecycle log. */
static void write_token(const char *path, const char *token)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, token, strlen(token)), (ssize_t)strlen(token));
	close(fd);
}

Test(reaper, airlock_serve_runs_the_reaper_from_its_settings)
{
	worker w;
	worker_start(&w, ANSWER_BY_EPOCH);
	char svc_tok[128], reap_tok[128], listen_addr[160], log_path[] = "/tmp/airlock-reaper-host-XXXXXX";
	snprintf(svc_tok, sizeof(svc_tok), "%s/service.token", w.dir);
	snprintf(reap_tok, sizeof(reap_tok), "%s/reaper.token", w.dir);
	snprintf(listen_addr, sizeof(listen_addr), "unix:%s/airlock.sock", w.dir);
	write_token(svc_tok, "svc-host-token-0123456789abcdef");
	write_token(reap_tok, TOKEN);
	int log_fd = mkstemp(log_path);
	cr_assert_geq(log_fd, 0);

	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_default(&s, &err), 0, "%s", err.message);
	s.mechanism = AIRLOCK_MECHANISM_FAKE;
	free(s.service.listen);
	s.service.listen = strdup(listen_addr);
	s.service.credential_file = strdup(svc_tok);
	s.service.reaper_address = strdup(w.addr);
	s.service.reaper_credential_file = strdup(reap_tok);
	s.service.reaper_interval_seconds = 1;
	cr_assert_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	airlock_service_host_options o = { .log_fd = log_fd };
	airlock_service_host *h = NULL;
	cr_assert_eq(airlock_service_host_open(&s, &o, &h, &err), 0, "%s", err.message);

	airlock_remote_config rc = { .address = listen_addr,
		                     .credential = "svc-host-token-0123456789abcdef",
		                     .credential_len = strlen("svc-host-token-0123456789abcdef") };
	airlock_remote *rm = NULL;
	airlock_exec *e = NULL;
	cr_assert_eq(airlock_remote_new(&rc, &rm, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_new(airlock_remote_ops(), rm, NULL, &e, &err), 0, "%s", err.message);
	airlock_environment_spec spec;
	test_spec(&spec, "tenant-a", "run-old");
	airlock_environment_handle stale = { 0 }, cur = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &stale, &err), 0, "%s", err.message);
	spec.lease_epoch = CURRENT_EPOCH;
	cr_assert_eq(airlock_exec_provision(e, &spec, &cur, &err), 0, "%s", err.message);

	const char *log = NULL;
	for (int i = 0; i < 100; i++) {
		log = slurp(log_path);
		if (strstr(log, "\"reason\":\"reaped\""))
			break;
		usleep(50000);
	}
	cr_assert(strstr(log, "\"reason\":\"reaped\""), "reaped within 5 s: %s", log);
	/* Exactly the stale one: its destroyed line, and none of the other's. */
	char cur_destroyed[200];
	snprintf(cur_destroyed, sizeof(cur_destroyed),
	         "\"event\":\"destroyed\",\"mechanism\":\"fake\",\"environment\":\"%s\"",
	         cur.environment_id);
	cr_assert_null(strstr(log, cur_destroyed), "%s", log);
	char stale_destroyed[200];
	snprintf(stale_destroyed, sizeof(stale_destroyed),
	         "\"event\":\"destroyed\",\"mechanism\":\"fake\",\"environment\":\"%s\"",
	         stale.environment_id);
	cr_assert(strstr(log, stale_destroyed), "%s", log);
	cr_assert_null(strstr(log, TOKEN), "the reaper's token is never logged");
	cr_assert_str_eq(w.auth, "Authorization: Bearer " TOKEN);

	airlock_exec_free(e);
	airlock_environment_handle_clear(&stale);
	airlock_environment_handle_clear(&cur);
	airlock_environment_spec_clear(&spec);
	airlock_service_host_free(h);
	airlock_settings_clear(&s);
	close(log_fd);
	unlink(log_path);
	unlink(svc_tok);
	unlink(reap_tok);
	worker_stop(&w);
}

/* A warm-pool sandbox belongs to no lease: the reaper never asks about it
 * (the double would call its epoch 0 stale) and never destroys it. */
Test(reaper, pooled_sandboxes_are_not_asked_about)
{
	worker w;
	side t;
	fixture_open(&w, &t, ANSWER_BY_EPOCH, 0);
	char cur[64];
	provision(&t, "run-3", CURRENT_EPOCH, cur);
	airlock_environment_spec spec;
	test_spec(&spec, AIRLOCK_POOL_TENANT, AIRLOCK_POOL_RUN);
	spec.lease_epoch = 0;
	airlock_env_clear(&spec.environment);
	char pooled[AIRLOCK_ENVIRONMENT_ID_MAX];
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_pool_provision(t.exec, &spec, 60000, pooled, &err), 0, "%s",
	             err.message);
	airlock_environment_spec_clear(&spec);
	svc_reaper_pass_stats st;
	svc_reaper_pass(t.reaper, &st);
	cr_assert(!st.error, "the pass failed: %s", slurp(t.log_path));
	cr_assert_eq(st.live, 1, "the pooled sandbox is not the reaper's");
	cr_assert_eq(st.asked, 1);
	cr_assert_eq(st.destroyed, 0);
	cr_assert(airlock_exec_pool_ready(t.exec, pooled), "the pooled sandbox is still there");
	cr_assert(live(&t, cur));
	fixture_close(&w, &t);
}
