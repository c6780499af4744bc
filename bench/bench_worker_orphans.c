/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How long a dead worker's sandboxes outlive it (the specification,
 * "Nothing outlives its lease"; docs/worker-api.md, docs/reaper.md),
 * against the reaper's interval. One `airlock serve` (its reaper asking
 * the second worker every INTERVAL_S seconds) and two airlock-worker
 * processes, A and B, sharing one SQLite database, as
 * tests/test_gate_sandbox_no_orphans.c sets them up. A trial: A claims two
 * runs (TTL TTL_S) and makes a call in each (each call's sandbox is
 * recorded before it is used), then A is killed with SIGKILL, and the
 * platform's two choices are measured, one run each:
 *   (a) re-queued at once: B claims the run with the next epoch (the fence
 *       destroys A's sandbox): the time from the SIGKILL to the sandbox
 *       gone from the service's list;
 *   (b) not renewed: the lease expires; B's sweeper (every second) and the
 *       service's reaper end it: the time from the lease's expiry (its
 *       expires_at_ms) to the sandbox gone.
 * Then (c), its own trials: a sandbox provisioned straight on the service
 * (the remote adapter from this process) for an epoch older than its
 * run's current one, which no worker recorded: only the reaper can find
 * it. The time from its provision's answer to its destroy. A build whose
 * service has no reaper never destroys it: after NO_REAPER_INTERVALS
 * intervals the benchmark says "no reaper in this build", destroys it
 * itself and runs no more (c) trials; that is not a failure.
 *
 * Each trial starts at a phase of its own within the interval (below).
 * "Gone" is seen by listing the service's sandboxes every POLL_MS. Each
 * figure prints p50 and max in ms and as a ratio of the interval, beside
 * the aim: always within two intervals. It asserts no time; it exits 1
 * when a call failed or a sandbox of (a) or (b) was never destroyed.
 *
 *   bench_worker_orphans [trials [fake|native]]   (default 20, fake)
 *
 * native needs root and the store's default image. AIRLOCK_BENCH_WORKER and
 * AIRLOCK_BENCH_AIRLOCK name the programs (default: the ones built beside
 * this benchmark).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "airlock/remote.h"
#include "airlock/run_command.h"
#include "airlock/settings.h"

#include "bench_util.h"
#include "bench_worker_proc.h"

#define TRIALS_DEFAULT 20
#define TRIALS_MAX 1000
#define INTERVAL_S 1
#define INTERVAL_MS (INTERVAL_S * 1000)
#define TTL_S 2
#define POLL_MS 10
/* Each trial waits (t * PHASE_STEP_MS) mod the interval first: phases
 * spread over the interval, none repeated within 1000 trials. */
#define PHASE_STEP_MS 617
/* A sandbox of (a) or (b) not gone within this is a failure; one of (c)
 * means the service has no reaper. */
#define NO_REAPER_INTERVALS 10
#define SERVICE_TOKEN "bench-svc-0123456789abcdef0123456789abcdef"
#define REAPER_TOKEN "bench-reaper-0123456789abcdef01234567"
#define ANSWER_MAX 262144

enum { FIG_FENCE, FIG_EXPIRY, FIG_UNRECORDED, FIG__MAX };
static const char *const fig_label[FIG__MAX] = {
	"(a) re-queued: SIGKILL to destroyed",
	"(b) not renewed: expiry to destroyed",
	"(c) unrecorded: provision to destroyed",
};

typedef struct world {
	bool native;
	char digest[96];
	char dir[64], svc_sock[128], sock[2][128], config[2][128], log[96];
	pid_t svc, w[2];
	bw_conn svc_conn, conn[2];
	char answer[ANSWER_MAX];
	/* (c): the remote adapter in this process. */
	airlock_settings settings;
	bool has_settings;
	airlock_exec *exec;
} world;

static bool failed;

/* ---- requests ----------------------------------------------------------------------- */

/* A request to worker i (token NULL: auth_mode dev) or the service (i < 0)
 * that must answer want with has in its body (NULL: anything); the body
 * stays in w->answer. 0, or -1 (said). */
static int req(world *w, int i, const char *method, const char *target, const char *body,
               int want, const char *has)
{
	return bw_expect(i < 0 ? &w->svc_conn : &w->conn[i], method, target,
	                 i < 0 ? SERVICE_TOKEN : NULL, body, want, has, w->answer,
	                 sizeof(w->answer));
}

/* Claim run at epoch on worker i as outcome: 0 and the lease's expiry
 * (Unix ms) in *ret_expires, or -1. */
static int claim(world *w, int i, const char *run, int epoch, int ttl, const char *outcome,
                 int64_t *ret_expires)
{
	char target[160], body[160], want[64];
	snprintf(target, sizeof(target), "/v1/runs/%s/lease", run);
	snprintf(body, sizeof(body), "{\"tenant_id\":\"dev\",\"epoch\":%d,\"ttl_seconds\":%d}",
	         epoch, ttl);
	snprintf(want, sizeof(want), "\"outcome\":\"%s\"", outcome);
	if (req(w, i, "PUT", target, body, 200, want) < 0)
		return -1;
	const char *e = strstr(w->answer, "\"expires_at_ms\":");
	if (ret_expires)
		*ret_expires = e ? strtoll(e + 16, NULL, 10) : 0;
	return 0;
}

static int release(world *w, int i, const char *run, int epoch)
{
	char target[160];
	snprintf(target, sizeof(target), "/v1/runs/%s/lease?epoch=%d", run, epoch);
	return req(w, i, "DELETE", target, NULL, 204, NULL);
}

static int call_true(world *w, int i, const char *run, int epoch)
{
	char target[160], body[160];
	snprintf(target, sizeof(target), "/v1/runs/%s/tools/sandbox.run_command", run);
	snprintf(body, sizeof(body), "{\"epoch\":%d,\"arguments\":{\"command\":[\"true\"]}}",
	         epoch);
	return req(w, i, "POST", target, body, 200, "\"exit_code\":0");
}

/* Whether the service lists a sandbox whose member key is value (a run
 * id or an environment id): 1, 0, or -1 when the list failed. */
static int listed(world *w, const char *key, const char *value)
{
	if (req(w, -1, "GET", "/v1/sandboxes", NULL, 200, "\"sandboxes\"") < 0)
		return -1;
	char needle[256];
	snprintf(needle, sizeof(needle), "\"%s\":\"%s\"", key, value);
	return strstr(w->answer, needle) != NULL;
}

/* Poll until nothing listed has key value or deadline (monotonic ms): the
 * monotonic ms when it was first seen gone, 0 when the deadline passed,
 * -1 when a list failed. */
static int64_t wait_gone(world *w, const char *key, const char *value, int64_t deadline)
{
	for (;;) {
		int l = listed(w, key, value);
		int64_t now = util_monotonic_ms();
		if (l < 0)
			return -1;
		if (l == 0)
			return now;
		if (now >= deadline)
			return 0;
		usleep(POLL_MS * 1000);
	}
}

/* ---- the world ---------------------------------------------------------------------- */

static int start_worker(world *w, int i)
{
	char prog_buf[PATH_MAX + 32];
	char *argv[] = { "airlock-worker", "--config", w->config[i], NULL };
	bw_conn_close(&w->conn[i]);
	w->w[i] = bw_start(bw_program("AIRLOCK_BENCH_WORKER", "airlock-worker", prog_buf,
	                              sizeof(prog_buf)),
	                   argv, w->log, w->sock[i]);
	return w->w[i] > 0 ? 0 : -1;
}

static int world_up(world *w)
{
	char svc_token[160], reaper_token[160], text[4096], image[160] = "";
	char prog_buf[PATH_MAX + 32];
	if (bw_make_dir(w->dir, sizeof(w->dir), "bwo") < 0)
		return -1;
	snprintf(w->svc_sock, sizeof(w->svc_sock), "%s/svc.sock", w->dir);
	snprintf(w->log, sizeof(w->log), "/dev/shm/airlock-bwo-%d.log", (int)getpid());
	snprintf(svc_token, sizeof(svc_token), "%s/svc.token", w->dir);
	snprintf(reaper_token, sizeof(reaper_token), "%s/reaper.token", w->dir);
	if (bw_write_file(svc_token, SERVICE_TOKEN "\n") < 0 ||
	    bw_write_file(reaper_token, REAPER_TOKEN "\n") < 0)
		return -1;
	if (w->native)
		snprintf(image, sizeof(image), "  image: %s\n", w->digest);
	for (int i = 0; i < 2; i++) {
		snprintf(w->sock[i], sizeof(w->sock[i]), "%s/w%d.sock", w->dir, i);
		snprintf(w->config[i], sizeof(w->config[i]), "%s/w%d.yaml", w->dir, i);
		w->conn[i] = (bw_conn){ .sock = w->sock[i], .fd = -1 };
	}
	for (int i = 0; i < 2; i++) {
		/* One settings file per worker (its own socket), one database
		 * (the state directory); the service's reaper asks the second
		 * worker, which outlives the first in every trial. */
		snprintf(text, sizeof(text),
		         "sandbox:\n  mechanism: %s\n%s"
		         "service:\n  listen: unix:%s\n  credential_file: %s\n"
		         "  reaper_address: unix:%s\n  reaper_credential_file: %s\n"
		         "  reaper_interval_seconds: %d\n"
		         "worker:\n  listen: unix:%s\n  state_dir: %s\n  auth_mode: dev\n"
		         "  service_address: unix:%s\n  service_credential_file: %s\n"
		         "  reaper_credential_file: %s\n",
		         w->native ? "native" : "fake", image, w->svc_sock, svc_token, w->sock[1],
		         reaper_token, INTERVAL_S, w->sock[i], w->dir, w->svc_sock, svc_token,
		         reaper_token);
		if (bw_write_file(w->config[i], text) < 0)
			return -1;
	}
	w->svc_conn = (bw_conn){ .sock = w->svc_sock, .fd = -1 };
	char *argv[] = { "airlock", "serve", "--config", w->config[1], NULL };
	w->svc = bw_start(bw_program("AIRLOCK_BENCH_AIRLOCK", "airlock", prog_buf,
	                             sizeof(prog_buf)),
	                  argv, w->log, w->svc_sock);
	if (w->svc < 0 || start_worker(w, 0) < 0 || start_worker(w, 1) < 0)
		return -1;
	airlock_error err = { 0 };
	if (airlock_settings_load(w->config[1], &w->settings, &err) < 0) {
		fprintf(stderr, "%s: settings: %s\n", bw_prog, err.message);
		return -1;
	}
	w->has_settings = true;
	airlock_remote_open_config rc = { .address = w->settings.worker.service_address,
		                          .credential_file =
		                                  w->settings.worker.service_credential_file };
	if (airlock_remote_open(&rc, &w->settings, &w->exec, &err) < 0) {
		fprintf(stderr, "%s: the service: %s\n", bw_prog, err.message);
		return -1;
	}
	return 0;
}

static void world_down(world *w)
{
	airlock_exec_free(w->exec);
	if (w->has_settings)
		airlock_settings_clear(&w->settings);
	for (int i = 0; i < 2; i++) {
		bw_conn_close(&w->conn[i]);
		if (!bw_stop_clean(w->w[i], i == 0 ? "worker A" : "worker B"))
			failed = true;
	}
	if (w->svc > 0) {
		if (req(w, -1, "GET", "/v1/sandboxes", NULL, 200, "\"sandboxes\":[]") < 0) {
			fprintf(stderr, "%s: sandboxes left live at the end\n", bw_prog);
			failed = true;
		}
		bw_conn_close(&w->svc_conn);
		if (!bw_stop_clean(w->svc, "airlock serve"))
			failed = true;
	}
	if (!bw_remove(w->dir, w->log, failed))
		failed = true;
}

/* ---- the trials ------------------------------------------------------------------------ */

/* One trial of (a) and (b): a sample of each into out. */
static int trial_kill(world *w, int t, int64_t out[2])
{
	char run_a[32], run_b[32];
	int64_t expires_b = 0;
	/* A phase of its own against the sweeper's and the reaper's periods:
	 * a trial begun as soon as the previous one's sandbox went would
	 * begin in step with worker B's sweeper, and every (b) sample would
	 * be the same distance from its next pass. */
	usleep((useconds_t)((t * PHASE_STEP_MS) % INTERVAL_MS) * 1000);
	snprintf(run_a, sizeof(run_a), "bwo-a-%d", t);
	snprintf(run_b, sizeof(run_b), "bwo-b-%d", t);
	if (claim(w, 0, run_a, 1, TTL_S, "new", NULL) < 0 ||
	    claim(w, 0, run_b, 1, TTL_S, "new", &expires_b) < 0 || call_true(w, 0, run_a, 1) < 0 ||
	    call_true(w, 0, run_b, 1) < 0)
		return -1;
	if (listed(w, "run_id", run_a) != 1 || listed(w, "run_id", run_b) != 1) {
		fprintf(stderr, "%s: trial %d: a call's sandbox is not listed\n", bw_prog, t);
		return -1;
	}
	/* No cleanup: SIGKILL, then the platform re-queues run_a at once. */
	bw_conn_close(&w->conn[0]);
	int64_t killed = util_monotonic_ms();
	if (bw_stop(w->w[0], SIGKILL) != 128 + SIGKILL)
		return -1;
	w->w[0] = 0;
	if (claim(w, 1, run_a, 2, 60, "fenced", NULL) < 0)
		return -1;
	int64_t gone = wait_gone(w, "run_id", run_a, killed + NO_REAPER_INTERVALS * INTERVAL_MS);
	if (gone <= 0) {
		fprintf(stderr, "%s: trial %d: %s's sandbox %s\n", bw_prog, t, run_a,
		        gone == 0 ? "outlived the fence" : "could not be listed");
		return -1;
	}
	out[0] = gone - killed;
	/* run_b: nobody renews it. Its expiry is on the wall clock. */
	int64_t wall_deadline = expires_b + NO_REAPER_INTERVALS * INTERVAL_MS;
	gone = wait_gone(w, "run_id", run_b,
	                 util_monotonic_ms() + (wall_deadline - util_now_ms()));
	int64_t gone_wall = util_now_ms();
	if (gone <= 0) {
		fprintf(stderr, "%s: trial %d: %s's sandbox %s\n", bw_prog, t, run_b,
		        gone == 0 ? "was not destroyed within 10 intervals of its expiry"
		                  : "could not be listed");
		return -1;
	}
	out[1] = gone_wall - expires_b;
	if (release(w, 1, run_a, 2) < 0 || start_worker(w, 0) < 0)
		return -1;
	return 0;
}

/* One trial of (c): 1 and a sample in *out, 0 when the sandbox was never
 * destroyed (no reaper), -1 on a failure. */
static int trial_unrecorded(world *w, int t, int64_t *out)
{
	char run[32];
	snprintf(run, sizeof(run), "bwo-c-%d", t);
	if (claim(w, 1, run, 2, 60, "new", NULL) < 0)
		return -1;
	static char *const no_env[] = { NULL };
	airlock_run_command_spec_input in = { .settings = &w->settings, .tenant_id = "dev",
		                              .run_id = run, .lease_epoch = 1, .parent = no_env };
	airlock_environment_spec spec;
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	if (airlock_run_command_spec(&in, &spec, NULL, &err) < 0) {
		fprintf(stderr, "%s: spec: %s\n", bw_prog, err.message);
		return -1;
	}
	int r = airlock_exec_provision(w->exec, &spec, &h, &err);
	int64_t created = util_monotonic_ms();
	airlock_environment_spec_clear(&spec);
	if (r < 0) {
		fprintf(stderr, "%s: provision: %s\n", bw_prog, err.message);
		return -1;
	}
	int64_t gone = wait_gone(w, "environment_id", h.environment_id,
	                         created + NO_REAPER_INTERVALS * INTERVAL_MS);
	/* Gone already (the reaper's destroy) is a 204 all the same. */
	r = airlock_exec_destroy(w->exec, &h, &err);
	airlock_environment_handle_clear(&h);
	if (r < 0) {
		fprintf(stderr, "%s: destroy: %s\n", bw_prog, err.message);
		return -1;
	}
	if (gone < 0 || release(w, 1, run, 2) < 0)
		return -1;
	if (gone == 0)
		return 0;
	*out = gone - created;
	return 1;
}

/* ---- main ---------------------------------------------------------------------------- */

static void print_figure(int f, int64_t *v, size_t n)
{
	if (n == 0)
		return;
	int64_t p50 = bench_pct(v, n, 50), max = v[n - 1];
	printf("  %-40s n %3zu  p50 %6lld ms (%.2f)  max %6lld ms (%.2f)  %s\n", fig_label[f], n,
	       (long long)p50, (double)p50 / INTERVAL_MS, (long long)max,
	       (double)max / INTERVAL_MS, max <= 2 * INTERVAL_MS ? "met" : "NOT met");
}

int main(int argc, char **argv)
{
	bw_prog = "bench_worker_orphans";
	long trials = argc > 1 ? strtol(argv[1], NULL, 10) : TRIALS_DEFAULT;
	const char *mech = argc > 2 ? argv[2] : "fake";
	if (argc > 3 || trials < 1 || trials > TRIALS_MAX ||
	    (strcmp(mech, "fake") != 0 && strcmp(mech, "native") != 0)) {
		fprintf(stderr, "usage: bench_worker_orphans [trials [fake|native]]   (trials 1..%d)\n",
		        TRIALS_MAX);
		return 64;
	}
	signal(SIGPIPE, SIG_IGN);
	static world w;
	w.native = strcmp(mech, "native") == 0;
	if (w.native && (geteuid() != 0 || !bw_default_image(w.digest))) {
		printf("%s: skipped: native needs root and the image store's default image\n",
		       bw_prog);
		return 77;
	}
	double la[3] = { 0 };
	if (getloadavg(la, 3) != 3)
		la[0] = la[1] = la[2] = -1.0;
	printf("bench_worker_orphans: nproc %ld, load average %.2f %.2f %.2f; %ld trials, %s, "
	       "SQLite shared by two workers; reaper interval %d s, TTL %d s, the service listed "
	       "every %d ms\n",
	       sysconf(_SC_NPROCESSORS_ONLN), la[0], la[1], la[2], trials, mech, INTERVAL_S, TTL_S,
	       POLL_MS);
	fflush(stdout);

	static int64_t figs[FIG__MAX][TRIALS_MAX];
	size_t n[FIG__MAX] = { 0 };
	bool no_reaper = false;
	if (world_up(&w) < 0)
		failed = true;
	for (long t = 0; t < trials && !failed; t++) {
		int64_t out[2];
		if (trial_kill(&w, (int)t, out) < 0) {
			failed = true;
			break;
		}
		figs[FIG_FENCE][n[FIG_FENCE]++] = out[0];
		figs[FIG_EXPIRY][n[FIG_EXPIRY]++] = out[1];
	}
	for (long t = 0; t < trials && !failed && !no_reaper; t++) {
		int64_t ms = 0;
		int r = trial_unrecorded(&w, (int)t, &ms);
		if (r < 0)
			failed = true;
		else if (r == 0)
			no_reaper = true;
		else
			figs[FIG_UNRECORDED][n[FIG_UNRECORDED]++] = ms;
	}
	if (!failed) {
		printf("time to the last sandbox destroyed (p50 and max in ms, and ÷ the interval; "
		       "aim: max within two intervals):\n");
		for (int f = 0; f < FIG__MAX; f++)
			print_figure(f, figs[f], n[f]);
		if (no_reaper)
			printf("  (c) no reaper in this build: the unrecorded sandbox was not destroyed "
			       "within %d intervals (%d ms); it was destroyed by the benchmark\n",
			       NO_REAPER_INTERVALS, NO_REAPER_INTERVALS * INTERVAL_MS);
	}
	world_down(&w);
	if (failed) {
		fprintf(stderr, "%s: a trial failed (above)\n", bw_prog);
		return 1;
	}
	return 0;
}
