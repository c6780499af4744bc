/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gate.sandbox.no_orphans (the specification, "Nothing outlives its
 * lease"), with real processes: one `airlock serve` (its reaper asking the
 * worker tier every REAPER_S seconds) and two airlock-worker processes
 * sharing one database, against fake and native, over SQLite and
 * PostgreSQL. The cases:
 *   - a worker killed with SIGKILL in the middle of an execute, without
 *     cleanup: every sandbox it made is gone within two reaper intervals of
 *     its lease ending;
 *   - a worker alive but fenced by a claim with a higher epoch on the
 *     other worker: its sandbox is gone before that claim is answered;
 *   - a platform that stops renewing: gone within two intervals of the
 *     expiry;
 *   - a sandbox no worker recorded (a worker that died between the
 *     provision and the record): only the reaper knows of it, and it is
 *     gone within two intervals; one of the current claim is left alone.
 * Throughout, a monitor lists the service's sandboxes every 50 ms and asks
 * the database which are stale: no sandbox stays live and stale longer
 * than two reaper intervals (the invariant the gate states: never a
 * sandbox live for long with a lease_epoch older than its run's).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "airlock/json.h"
#include "airlock/run_command.h"
#include "util/util.h"
#include "worker/db.h"

#include "pg_server.h"
#include "worker_testlib.h"

#define SERVICE_TOKEN "svc-0123456789abcdef0123456789abcdef"
#define REAPER_TOKEN "reaper-0123456789abcdef0123456789"
#define REAPER_S 1
#define BOUND_MS (2 * REAPER_S * 1000)
/* What a pass itself takes beyond its interval (a list, one question, the
 * destroys) and the monitor's own period. */
#define SLACK_MS 1500

typedef struct world {
	char dir[64];
	char svc_sock[128], sock[2][128], config[2][128], log[128];
	char db_settings[512];
	bool native, pg;
	pid_t svc, w[2];
	/* The monitor. */
	pthread_t monitor;
	atomic_bool stop;
	worker_db *db;
	int64_t worst_stale_ms;
	char worst_id[AIRLOCK_ENVIRONMENT_ID_MAX];
} world;

static void start_worker(world *w, int i)
{
	char *argv[] = { "airlock-worker", "--config", w->config[i], NULL };
	w->w[i] = wt_start(getenv("AIRLOCK_TEST_WORKER"), argv, w->log, w->sock[i]);
}

/* ---- the service's view ---------------------------------------------------------- */

typedef struct live_box {
	char id[AIRLOCK_ENVIRONMENT_ID_MAX];
	char run[AIRLOCK_ID_MAX + 1];
	int64_t epoch;
} live_box;

/* The service's live sandboxes (at most max). */
static size_t list_live(world *w, live_box *out, size_t max)
{
	/* Called from the monitor's thread too: no assertion here. */
	static __thread wt_reply r;
	char why[512];
	if (wt_request_try(w->svc_sock, "GET", "/v1/sandboxes", SERVICE_TOKEN, NULL, 5000, &r, why,
	                   sizeof(why)) < 0 ||
	    r.status != 200)
		return 0;
	json_t *o = json_loads(r.body, 0, NULL);
	json_t *a = json_object_get(o, "sandboxes");
	size_t n = 0;
	for (size_t i = 0; i < json_array_size(a) && n < max; i++) {
		json_t *e = json_array_get(a, i);
		const char *id = json_string_value(json_object_get(e, "environment_id"));
		const char *run = json_string_value(json_object_get(e, "run_id"));
		if (!id || !run)
			continue;
		snprintf(out[n].id, sizeof(out[n].id), "%s", id);
		snprintf(out[n].run, sizeof(out[n].run), "%s", run);
		out[n].epoch = json_integer_value(json_object_get(e, "lease_epoch"));
		n++;
	}
	json_decref(o);
	return n;
}

static size_t live_of(world *w, const char *run, int64_t epoch)
{
	live_box b[64];
	size_t n = list_live(w, b, 64), k = 0;
	for (size_t i = 0; i < n; i++)
		if (strcmp(b[i].run, run) == 0 && (epoch < 0 || b[i].epoch == epoch))
			k++;
	return k;
}

/* Wait until run has no live sandbox (of epoch, or any: -1); the ms it took. */
static int64_t wait_gone(world *w, const char *run, int64_t epoch, int64_t max_ms)
{
	int64_t t0 = util_monotonic_ms();
	while (live_of(w, run, epoch) > 0 && util_monotonic_ms() - t0 < max_ms)
		usleep(50000);
	return util_monotonic_ms() - t0;
}

/* Wait until the claim's sandbox is recorded (its first call is past the
 * provision: a command runs in it, or is about to). */
static void wait_recorded(world *w, const char *run, int64_t epoch)
{
	worker_db_check_result c = { 0 };
	airlock_error err = { 0 };
	for (int i = 0; i < 400; i++) {
		cr_assert_eq(worker_db_check(w->db, run, "dev", epoch, util_now_ms(), &c, &err), 0,
		             "%s", err.message);
		if (c.has_environment)
			return;
		usleep(50000);
	}
	cr_assert_fail("%s's sandbox was not recorded within 20 s", run);
}

/* ---- the monitor ------------------------------------------------------------------- */

typedef struct seen {
	char id[AIRLOCK_ENVIRONMENT_ID_MAX];
	int64_t since;
} seen;

static void *monitor_main(void *arg)
{
	world *w = arg;
	static seen stale_since[256];
	size_t n_seen = 0;
	while (!atomic_load(&w->stop)) {
		live_box b[64];
		size_t n = list_live(w, b, 64);
		worker_db_sandbox q[64];
		bool stale[64] = { false };
		for (size_t i = 0; i < n; i++) {
			memset(&q[i], 0, sizeof(q[i]));
			memcpy(q[i].environment_id, b[i].id, sizeof(q[i].environment_id));
			memcpy(q[i].run_id, b[i].run, sizeof(q[i].run_id));
			q[i].epoch = b[i].epoch;
		}
		airlock_error err = { 0 };
		int64_t now = util_monotonic_ms();
		if (n && worker_db_stale(w->db, q, n, util_now_ms(), stale, &err) == 0) {
			for (size_t i = 0; i < n; i++) {
				if (!stale[i])
					continue;
				size_t k = 0;
				while (k < n_seen && strcmp(stale_since[k].id, b[i].id) != 0)
					k++;
				if (k == n_seen && n_seen < 256) {
					memcpy(stale_since[k].id, b[i].id, sizeof(stale_since[k].id));
					stale_since[k].since = now;
					n_seen++;
				}
				if (k < n_seen && now - stale_since[k].since > w->worst_stale_ms) {
					w->worst_stale_ms = now - stale_since[k].since;
					memcpy(w->worst_id, b[i].id, sizeof(w->worst_id));
				}
			}
		}
		usleep(50000);
	}
	return NULL;
}

/* ---- the world ----------------------------------------------------------------------- */

static void world_up(world *w, bool native, bool pg)
{
	memset(w, 0, sizeof(*w));
	w->native = native;
	w->pg = pg;
	const char *image = native ? wt_default_image() : "";
	if (native && !*image)
		cr_skip_test("no default image in /var/lib/airlock/images (airlock image build)");
	snprintf(w->dir, sizeof(w->dir), "/tmp/airlock-orphans-XXXXXX");
	cr_assert(mkdtemp(w->dir));
	snprintf(w->svc_sock, sizeof(w->svc_sock), "%s/svc.sock", w->dir);
	snprintf(w->log, sizeof(w->log), "%s/log", w->dir);
	char path[160], text[4096];
	snprintf(path, sizeof(path), "%s/svc.token", w->dir);
	wt_write_file(path, SERVICE_TOKEN "\n", 0600);
	snprintf(path, sizeof(path), "%s/reaper.token", w->dir);
	wt_write_file(path, REAPER_TOKEN "\n", 0600);
	if (pg)
		wt_pg_settings(w->dir, w->db_settings, sizeof(w->db_settings));
	for (int i = 0; i < 2; i++)
		snprintf(w->sock[i], sizeof(w->sock[i]), "%s/w%d.sock", w->dir, i);
	for (int i = 0; i < 2; i++) {
		snprintf(w->config[i], sizeof(w->config[i]), "%s/w%d.yaml", w->dir, i);
		/* One settings file per worker (its own socket), one database;
		 * the service's reaper asks the second worker. */
		snprintf(text, sizeof(text),
		         "sandbox:\n  mechanism: %s\n%s%s%s"
		         "service:\n  listen: unix:%s\n  credential_file: %s/svc.token\n"
		         "  reaper_address: unix:%s\n  reaper_credential_file: %s/reaper.token\n"
		         "  reaper_interval_seconds: %d\n"
		         "worker:\n  listen: unix:%s\n  state_dir: %s\n  auth_mode: dev\n"
		         "  service_address: unix:%s\n  service_credential_file: %s/svc.token\n"
		         "  reaper_credential_file: %s/reaper.token\n%s",
		         native ? "native" : "fake", native ? "  image: " : "", image,
		         native ? "\n" : "", w->svc_sock, w->dir, w->sock[1], w->dir, REAPER_S,
		         w->sock[i], w->dir, w->svc_sock, w->dir, w->dir, w->db_settings);
		wt_write_file(w->config[i], text, 0600);
	}
	char *argv[] = { "airlock", "serve", "--config", w->config[1], NULL };
	w->svc = wt_start(getenv("AIRLOCK_TEST_AIRLOCK"), argv, w->log, w->svc_sock);
	start_worker(w, 0);
	start_worker(w, 1);
	airlock_error err = { 0 };
	if (pg) {
		const char *conn = strstr(w->db_settings, "database_connection_file: ");
		cr_assert(conn);
		char file[160];
		snprintf(file, sizeof(file), "%s", conn + strlen("database_connection_file: "));
		file[strcspn(file, "\n")] = 0;
		cr_assert_eq(worker_db_open_pg_file(file, &w->db, &err), 0, "%s", err.message);
	} else {
		cr_assert_eq(worker_db_open_sqlite(w->dir, &w->db, &err), 0, "%s", err.message);
	}
	cr_assert_eq(pthread_create(&w->monitor, NULL, monitor_main, w), 0);
}

static void world_down(world *w)
{
	atomic_store(&w->stop, true);
	pthread_join(w->monitor, NULL);
	if (w->worst_stale_ms > BOUND_MS + SLACK_MS) {
		/* The service's and the workers' log, for the failure's reader. */
		const char *log = wt_read_log(w->log);
		size_t len = strlen(log);
		cr_log_error("the log's end:\n%s", log + (len > 6000 ? len - 6000 : 0));
	}
	cr_expect_leq(w->worst_stale_ms, BOUND_MS + SLACK_MS,
	              "sandbox %s was live and stale for %lld ms (two reaper intervals: %d ms)",
	              w->worst_id, (long long)w->worst_stale_ms, BOUND_MS);
	for (int i = 0; i < 2; i++)
		if (w->w[i] > 0)
			cr_expect_eq(wt_stop(w->w[i], SIGTERM), 0, "worker %d stops cleanly", i);
	/* Every sandbox goes: a reaper pass under way may still be finishing
	 * one. */
	live_box left[8];
	size_t n_left = 0;
	for (int i = 0; i < 50 && (n_left = list_live(w, left, 8)) > 0; i++)
		usleep((BOUND_MS + SLACK_MS) * 20);
	for (size_t i = 0; i < n_left; i++)
		cr_expect_fail("left live: %s of %s at epoch %lld", left[i].id, left[i].run,
		               (long long)left[i].epoch);
	cr_expect_eq(wt_stop(w->svc, SIGTERM), 0, "the service stops cleanly");
	worker_db_free(w->db);
	const char *log = wt_read_log(w->log);
	cr_expect(!strstr(log, REAPER_TOKEN) && !strstr(log, SERVICE_TOKEN),
	          "no token in any log line");
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", w->dir);
	cr_expect_eq(system(cmd), 0);
}

static wt_reply *to(world *w, int i, const char *method, const char *target, const char *body)
{
	static wt_reply r;
	wt_request(w->sock[i], method, target, NULL, body, 60000, &r);
	return &r;
}

static void claim(world *w, int i, const char *run, long epoch, long ttl, const char *outcome)
{
	char target[160], body[160], want[64];
	snprintf(target, sizeof(target), "/v1/runs/%s/lease", run);
	snprintf(body, sizeof(body), "{\"tenant_id\":\"dev\",\"epoch\":%ld,\"ttl_seconds\":%ld}",
	         epoch, ttl);
	wt_reply *r = to(w, i, "PUT", target, body);
	cr_assert_eq(r->status, 200, "%s", r->body);
	snprintf(want, sizeof(want), "\"outcome\":\"%s\"", outcome);
	cr_assert(strstr(r->body, want), "%s", r->body);
}

typedef struct bg_call {
	world *w;
	int worker;
	char run[32];
	long epoch;
	wt_reply r;
	bool killed; /* the worker will die: no answer is expected */
} bg_call;

static void *bg_main(void *arg)
{
	bg_call *c = arg;
	char target[160], body[256];
	snprintf(target, sizeof(target), "/v1/runs/%s/tools/sandbox.run_command", c->run);
	/* native: a command still running when the worker goes; fake runs
	 * nothing and answers at once. */
	snprintf(body, sizeof(body), "{\"epoch\":%ld,\"arguments\":{\"command\":%s}}", c->epoch,
	         c->w->native ? "[\"sleep\",\"30\"]" : "[\"true\"]");
	int fd = wt_connect(c->w->sock[c->worker]);
	if (fd < 0)
		return NULL;
	close(fd);
	if (c->killed) {
		/* The answer never comes when the worker is killed: a raw
		 * write, then the socket is left to the kill. */
		fd = wt_connect(c->w->sock[c->worker]);
		char head[512];
		int n = snprintf(head, sizeof(head),
		                 "POST %s HTTP/1.1\r\nHost: w\r\nContent-Length: %zu\r\n\r\n%s",
		                 target, strlen(body), body);
		ssize_t k = write(fd, head, (size_t)n);
		(void)k;
		sleep(2);
		close(fd);
		return NULL;
	}
	char why[512];
	if (wt_request_try(c->w->sock[c->worker], "POST", target, NULL, body, 60000, &c->r, why,
	                   sizeof(why)) < 0)
		c->r.status = -1;
	return NULL;
}

/* ---- the cases ------------------------------------------------------------------------- */

static void killed_mid_execute(world *w)
{
	claim(w, 0, "run-a", 1, 2, "new");
	bg_call c = { .w = w, .worker = 0, .run = "run-a", .epoch = 1, .killed = true };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, bg_main, &c), 0);
	/* The sandbox is recorded and (native) its command running. A worker
	 * killed before its record is the reaper's alone: the last case. */
	wait_recorded(w, "run-a", 1);
	usleep(300 * 1000);
	cr_expect_eq(wt_stop(w->w[0], SIGKILL), 128 + SIGKILL);
	w->w[0] = 0;
	pthread_join(t, NULL);
	/* Nobody renews: the lease ends at its TTL, and then the sandbox
	 * goes within two reaper intervals. */
	int64_t ms = wait_gone(w, "run-a", -1, 2000 + BOUND_MS + SLACK_MS + 2000);
	cr_expect_leq(ms, 2000 + BOUND_MS + SLACK_MS, "run-a's sandbox took %lld ms to go",
	              (long long)ms);
	start_worker(w, 0);
}

static void fenced_alive(world *w)
{
	claim(w, 0, "run-b", 1, 60, "new");
	bg_call c = { .w = w, .worker = 0, .run = "run-b", .epoch = 1 };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, bg_main, &c), 0);
	wait_recorded(w, "run-b", 1);
	usleep(300 * 1000);
	/* The other worker takes the run: the fenced claim's sandbox is gone
	 * before that claim is answered. (One still being provisioned when
	 * the fence commits is not recorded yet: its own worker destroys it
	 * when the record is refused, and the monitor bounds it.) */
	claim(w, 1, "run-b", 2, 60, "fenced");
	cr_expect_eq(live_of(w, "run-b", 1), 0, "the fenced sandbox outlived the fence's answer");
	pthread_join(t, NULL);
	if (w->native)
		cr_expect(c.r.status != 200 || strstr(c.r.body, "\"killed_by\":\"CANCELLED\""),
		          "the fenced call's command ended: %d %s", c.r.status, c.r.body);
	wt_reply *r = to(w, 0, "POST", "/v1/runs/run-b/tools/sandbox.run_command",
	                 "{\"epoch\":1,\"arguments\":{\"command\":[\"true\"]}}");
	cr_expect_eq(r->status, 409, "the fenced epoch is refused: %s", r->body);
	r = to(w, 1, "DELETE", "/v1/runs/run-b/lease?epoch=2", NULL);
	cr_expect_eq(r->status, 204, "%s", r->body);
}

static void stops_renewing(world *w)
{
	claim(w, 0, "run-c", 1, 2, "new");
	wt_reply *r = to(w, 0, "POST", "/v1/runs/run-c/tools/sandbox.run_command",
	                 "{\"epoch\":1,\"arguments\":{\"command\":[\"true\"]}}");
	cr_assert_eq(r->status, 200, "%s", r->body);
	cr_expect_eq(live_of(w, "run-c", 1), 1);
	int64_t ms = wait_gone(w, "run-c", -1, 2000 + BOUND_MS + SLACK_MS + 2000);
	cr_expect_leq(ms, 2000 + BOUND_MS + SLACK_MS, "run-c's sandbox took %lld ms to go",
	              (long long)ms);
}

/* A sandbox provisioned on the service for (run, epoch) that no worker
 * recorded: its environment id. */
static void provision_unrecorded(world *w, const char *run, int64_t epoch, char *ret_id)
{
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_load(w->config[1], &s, &err), 0, "%s", err.message);
	airlock_run_command_spec_input in = { .settings = &s, .tenant_id = "dev", .run_id = run,
		                              .lease_epoch = epoch };
	airlock_environment_spec spec;
	cr_assert_eq(airlock_run_command_spec(&in, &spec, NULL, &err), 0, "%s", err.message);
	char *sj = airlock_environment_spec_to_json(&spec, &err);
	cr_assert(sj, "%s", err.message);
	static char body[16384];
	snprintf(body, sizeof(body), "{\"spec\":%s}", sj);
	free(sj);
	airlock_environment_spec_clear(&spec);
	airlock_settings_clear(&s);
	static wt_reply r;
	wt_request(w->svc_sock, "POST", "/v1/sandboxes", SERVICE_TOKEN, body, 60000, &r);
	cr_assert_eq(r.status, 201, "%s", r.body);
	const char *p = strstr(r.body, "\"environment_id\":\"");
	cr_assert(p, "%s", r.body);
	snprintf(ret_id, AIRLOCK_ENVIRONMENT_ID_MAX, "%.*s",
	         (int)strcspn(p + 18, "\""), p + 18);
}

static void unrecorded_only_the_reaper_knows(world *w)
{
	claim(w, 1, "run-d", 2, 60, "new");
	char stale_id[AIRLOCK_ENVIRONMENT_ID_MAX], current_id[AIRLOCK_ENVIRONMENT_ID_MAX];
	provision_unrecorded(w, "run-d", 1, stale_id);
	provision_unrecorded(w, "run-d", 2, current_id);
	int64_t ms = wait_gone(w, "run-d", 1, BOUND_MS + SLACK_MS + 2000);
	cr_expect_leq(ms, BOUND_MS + SLACK_MS, "the unrecorded stale sandbox %s took %lld ms",
	              stale_id, (long long)ms);
	/* The current claim's is not the reaper's to take. */
	usleep(BOUND_MS * 1000);
	cr_expect_eq(live_of(w, "run-d", 2), 1, "the current claim's sandbox was reaped");
	wt_reply *r = to(w, 1, "DELETE", "/v1/runs/run-d/lease?epoch=2", NULL);
	cr_expect_eq(r->status, 204, "%s", r->body);
	ms = wait_gone(w, "run-d", -1, BOUND_MS + SLACK_MS + 2000);
	cr_expect_leq(ms, BOUND_MS + SLACK_MS, "released: the reaper takes it (%lld ms)",
	              (long long)ms);
}

static void gate(bool native, bool pg)
{
	world w;
	world_up(&w, native, pg);
	killed_mid_execute(&w);
	fenced_alive(&w);
	stops_renewing(&w);
	unrecorded_only_the_reaper_knows(&w);
	world_down(&w);
}

Test(gate_no_orphans, fake_sqlite, .timeout = 120)
{
	gate(false, false);
}

Test(gate_no_orphans, fake_postgresql, .timeout = 120)
{
	gate(false, true);
}

Test(gate_no_orphans, native_sqlite, .timeout = 180)
{
	gate(true, false);
}

Test(gate_no_orphans, native_postgresql, .timeout = 180)
{
	gate(true, true);
}
