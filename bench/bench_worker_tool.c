/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the worker adds to a tool call (docs/worker-api.md): `POST
 * /v1/runs/{id}/tools/sandbox.run_command` of /bin/true in a warm claim
 * (its sandbox provisioned by an earlier call) through the real
 * airlock-worker and `airlock serve`, beside the same execute through the
 * service's API alone (the remote adapter from this process, as the
 * worker itself calls it: airlock_remote_open, the same settings, the same
 * spec and command built by airlock_run_command_spec and _prepare), on the
 * same service, in interleaved rounds (the side that goes first
 * alternates). The worker's calls go over one keep-alive connection.
 *
 * The mechanism: native when this process is root and the image store
 * has a default image (the settings then name it as sandbox.image, as a
 * worker's must), else fake, which runs nothing (what remains is the
 * programs' own cost); it prints which. A second argument forces one.
 *
 * The aim (the issue): the worker adds under 0.3 ms at p50. It prints p50
 * and p99 of both sides and the p50 difference against the aim, then what
 * the worker's part is made of, each measured the same way on the same
 * worker (p50 of CALLS each, interleaved):
 *   GET /v1/tools                  the HTTP hop and the route, no database;
 *   a call refused at validation   + the body's decode, the checks, the
 *                                  log line (400, before the database);
 *   a call of another epoch        + the lease's check in the database
 *                                  (409, before the service);
 *   worker_db_check in process     the database's check alone, on a handle
 *                                  of this process to the worker's SQLite.
 * It asserts no time; it exits 1 when a call failed.
 *
 *   bench_worker_tool [calls [native|fake]]   (default 500)
 *
 * AIRLOCK_BENCH_WORKER and AIRLOCK_BENCH_AIRLOCK name the programs
 * (default: the ones built beside this benchmark); AIRLOCK_BENCH_IMAGE_STORE
 * a store other than /var/lib/airlock/images.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "airlock/remote.h"
#include "airlock/run_command.h"
#include "airlock/settings.h"
#include "worker/db.h"

#include "bench_util.h"
#include "bench_worker_proc.h"

#define CALLS_DEFAULT 500
#define CALLS_MAX 100000
#define ROUNDS 10
#define WARMUP 5
#define AIM_MS 0.3
#define SERVICE_TOKEN "bench-svc-0123456789abcdef0123456789abcdef"
/* auth_mode dev: every request is this tenant. */
#define TENANT "dev"
#define RUN "bench-tool"
#define EPOCH 1
#define ANSWER_MAX 65536

static const char call_true[] = "{\"epoch\":1,\"arguments\":{\"command\":[\"/bin/true\"]}}";
/* A string command: refused at validation, before the database. */
static const char call_invalid[] = "{\"epoch\":1,\"arguments\":{\"command\":\"/bin/true\"}}";
/* Another epoch than the claim's: refused after the lease's check. */
static const char call_other_epoch[] =
	"{\"epoch\":2,\"arguments\":{\"command\":[\"/bin/true\"]}}";
static const char target_call[] = "/v1/runs/" RUN "/tools/sandbox.run_command";

typedef struct bench {
	bool native;
	char digest[96];
	char dir[64], svc_sock[128], sock[128], config[128], log[96];
	pid_t svc, worker;
	bw_conn conn;
	/* The service alone: the remote adapter in this process. */
	airlock_settings settings;
	bool has_settings;
	airlock_exec *svc_exec;
	airlock_environment_handle h;
	bool live;
	char *argv[2];
	airlock_execution_command cmd;
	worker_db *db;
	char answer[ANSWER_MAX];
} bench;

static bool failed;

/* ---- one sample of each kind ------------------------------------------------------ */

/* A request to the worker on the keep-alive connection that must answer
 * want with has in its body (NULL: anything): its time in *ret_ns. */
static int worker_req(bench *b, const char *method, const char *target, const char *body,
                      int want, const char *has, int64_t *ret_ns)
{
	if (bw_conn_ready(&b->conn) < 0) {
		fprintf(stderr, "%s: connect %s failed\n", bw_prog, b->sock);
		return -1;
	}
	int64_t t0 = bench_now_ns();
	int r = bw_expect(&b->conn, method, target, NULL, body, want, has, b->answer,
	                  sizeof(b->answer));
	int64_t t1 = bench_now_ns();
	if (r < 0)
		return -1;
	*ret_ns = t1 - t0;
	return 0;
}

static int worker_true(bench *b, int64_t *ret_ns)
{
	return worker_req(b, "POST", target_call, call_true, 200, "\"exit_code\":0", ret_ns);
}

static int service_true(bench *b, int64_t *ret_ns)
{
	airlock_exec_call call = { .tenant_id = TENANT, .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_execution_result res = { 0 };
	airlock_error err = { 0 };
	int64_t t0 = bench_now_ns();
	int r = airlock_exec_execute(b->svc_exec, &call, &b->h, &b->cmd, &res, &err);
	int64_t t1 = bench_now_ns();
	bool ok = r == 0 && res.has_exit_code && res.exit_code == 0;
	if (r < 0)
		fprintf(stderr, "%s: the service's execute: %s: %s\n", bw_prog,
		        airlock_errclass_name(err.cls), err.message);
	else if (!ok)
		fprintf(stderr, "%s: /bin/true through the service did not exit 0\n", bw_prog);
	airlock_execution_result_clear(&res);
	*ret_ns = t1 - t0;
	return ok ? 0 : -1;
}

enum { PART_TOOLS, PART_INVALID, PART_OTHER_EPOCH, PART_DB, PART__MAX };
static const char *const part_label[PART__MAX] = {
	"GET /v1/tools",
	"a call refused at validation (400)",
	"a call of another epoch (409)",
	"worker_db_check in process",
};

static int part_sample(bench *b, int part, int64_t *ret_ns)
{
	switch (part) {
	case PART_TOOLS: return worker_req(b, "GET", "/v1/tools", NULL, 200, "sandbox.run_command", ret_ns);
	case PART_INVALID: return worker_req(b, "POST", target_call, call_invalid, 400, "command", ret_ns);
	case PART_OTHER_EPOCH:
		return worker_req(b, "POST", target_call, call_other_epoch, 409, "epoch", ret_ns);
	default: break;
	}
	worker_db_check_result res;
	airlock_error err = { 0 };
	int64_t t0 = bench_now_ns();
	int r = worker_db_check(b->db, RUN, TENANT, EPOCH, util_now_ms(), &res, &err);
	*ret_ns = bench_now_ns() - t0;
	if (r < 0 || res.state != WORKER_DB_LEASE_CURRENT || !res.has_environment) {
		fprintf(stderr, "%s: worker_db_check: %s\n", bw_prog,
		        r < 0 ? err.message : "not the current claim with its sandbox");
		return -1;
	}
	return 0;
}

/* ---- set-up and tear-down ------------------------------------------------------------ */

static int setup(bench *b)
{
	char path[160], text[2048], image[160] = "", prog_buf[PATH_MAX + 32];
	if (bw_make_dir(b->dir, sizeof(b->dir), "bwt") < 0)
		return -1;
	snprintf(b->svc_sock, sizeof(b->svc_sock), "%s/svc.sock", b->dir);
	snprintf(b->sock, sizeof(b->sock), "%s/w.sock", b->dir);
	snprintf(b->config, sizeof(b->config), "%s/airlock.yaml", b->dir);
	/* Both programs' logs (a JSON line per call) go to tmpfs. */
	snprintf(b->log, sizeof(b->log), "/dev/shm/airlock-bwt-%d.log", (int)getpid());
	snprintf(path, sizeof(path), "%s/svc.token", b->dir);
	if (bw_write_file(path, SERVICE_TOKEN "\n") < 0)
		return -1;
	if (b->native)
		snprintf(image, sizeof(image), "  image: %s\n", b->digest);
	snprintf(text, sizeof(text),
	         "sandbox:\n  mechanism: %s\n%s"
	         "service:\n  listen: unix:%s\n  credential_file: %s\n"
	         "worker:\n  listen: unix:%s\n  state_dir: %s\n  auth_mode: dev\n"
	         "  service_address: unix:%s\n  service_credential_file: %s\n",
	         b->native ? "native" : "fake", image, b->svc_sock, path, b->sock, b->dir,
	         b->svc_sock, path);
	if (bw_write_file(b->config, text) < 0)
		return -1;
	char *svc_argv[] = { "airlock", "serve", "--config", b->config, NULL };
	b->svc = bw_start(bw_program("AIRLOCK_BENCH_AIRLOCK", "airlock", prog_buf, sizeof(prog_buf)),
	                  svc_argv, b->log, b->svc_sock);
	if (b->svc < 0)
		return -1;
	char *w_argv[] = { "airlock-worker", "--config", b->config, NULL };
	b->worker = bw_start(bw_program("AIRLOCK_BENCH_WORKER", "airlock-worker", prog_buf,
	                                sizeof(prog_buf)),
	                     w_argv, b->log, b->sock);
	if (b->worker < 0)
		return -1;
	b->conn = (bw_conn){ .sock = b->sock, .fd = -1 };

	/* The claim, and its first call (the provision), timed apart. */
	int64_t ns = 0, first = 0;
	if (worker_req(b, "PUT", "/v1/runs/" RUN "/lease",
	               "{\"tenant_id\":\"" TENANT "\",\"epoch\":1,\"ttl_seconds\":86400}", 200,
	               "\"outcome\":\"new\"", &ns) < 0 ||
	    worker_true(b, &first) < 0)
		return -1;
	printf("the claim's first call (its sandbox provisioned): %.3f ms (not in the samples)\n",
	       bench_ms(first));

	/* The service alone, opened as the worker opens it. */
	airlock_error err = { 0 };
	if (airlock_settings_load(b->config, &b->settings, &err) < 0) {
		fprintf(stderr, "%s: settings: %s\n", bw_prog, err.message);
		return -1;
	}
	b->has_settings = true;
	airlock_remote_open_config rc = { .address = b->settings.worker.service_address,
		                          .credential_file =
		                                  b->settings.worker.service_credential_file };
	if (airlock_remote_open(&rc, &b->settings, &b->svc_exec, &err) < 0) {
		fprintf(stderr, "%s: the service: %s\n", bw_prog, err.message);
		return -1;
	}
	static char *const clean_env[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
		                           "/usr/bin:/sbin:/bin",
		                           NULL };
	airlock_run_command_spec_input in = { .settings = &b->settings, .tenant_id = TENANT,
		                              .run_id = "bench-service", .lease_epoch = EPOCH,
		                              .parent = clean_env };
	airlock_environment_spec spec;
	if (airlock_run_command_spec(&in, &spec, NULL, &err) < 0) {
		fprintf(stderr, "%s: spec: %s\n", bw_prog, err.message);
		return -1;
	}
	int64_t t0 = bench_now_ns();
	int r = airlock_exec_provision(b->svc_exec, &spec, &b->h, &err);
	airlock_environment_spec_clear(&spec);
	if (r < 0) {
		fprintf(stderr, "%s: provision: %s\n", bw_prog, err.message);
		return -1;
	}
	b->live = true;
	printf("the service's provision from this process: %.3f ms (not in the samples)\n",
	       bench_ms(bench_now_ns() - t0));
	b->argv[0] = "/bin/true";
	b->argv[1] = NULL;
	airlock_run_command_request req = { .argv = b->argv, .argc = 1 };
	if (airlock_run_command_prepare(&req, &b->settings, &b->cmd, &err) < 0) {
		fprintf(stderr, "%s: command: %s\n", bw_prog, err.message);
		return -1;
	}
	/* A second handle to the worker's database (WAL: readers do not
	 * block its writer). */
	if (worker_db_open_sqlite(b->dir, &b->db, &err) < 0) {
		fprintf(stderr, "%s: the worker's database: %s\n", bw_prog, err.message);
		return -1;
	}
	return 0;
}

static void teardown(bench *b)
{
	airlock_error err = { 0 };
	if (b->live && airlock_exec_destroy(b->svc_exec, &b->h, &err) < 0) {
		fprintf(stderr, "%s: destroy: %s\n", bw_prog, err.message);
		failed = true;
	}
	airlock_environment_handle_clear(&b->h);
	airlock_exec_free(b->svc_exec);
	worker_db_free(b->db);
	if (b->has_settings)
		airlock_settings_clear(&b->settings);
	int64_t ns;
	if (b->worker > 0 && worker_req(b, "DELETE", "/v1/runs/" RUN "/lease?epoch=1", NULL, 204,
	                                NULL, &ns) < 0)
		failed = true;
	bw_conn_close(&b->conn);
	if (!bw_stop_clean(b->worker, "airlock-worker") || !bw_stop_clean(b->svc, "airlock serve"))
		failed = true;
	if (!bw_remove(b->dir, b->log, failed))
		failed = true;
}

/* ---- main ---------------------------------------------------------------------------- */

static size_t share(size_t n, int r)
{
	return n / ROUNDS + ((size_t)r < n % ROUNDS ? 1 : 0);
}

static int measure(bench *b, size_t calls, int64_t *w, int64_t *s)
{
	int64_t scratch;
	for (int i = 0; i < WARMUP; i++)
		if (worker_true(b, &scratch) < 0 || service_true(b, &scratch) < 0)
			return -1;
	size_t kw = 0, ks = 0;
	for (int r = 0; r < ROUNDS; r++) {
		size_t n = share(calls, r);
		for (int side = 0; side < 2; side++) {
			bool worker = (side == 0) == (r % 2 == 0);
			for (size_t i = 0; i < n; i++)
				if (worker ? worker_true(b, &w[kw++]) < 0 : service_true(b, &s[ks++]) < 0)
					return -1;
		}
	}
	return 0;
}

static int measure_parts(bench *b, size_t calls, int64_t *parts[PART__MAX])
{
	size_t k[PART__MAX] = { 0 };
	for (int r = 0; r < ROUNDS; r++) {
		size_t n = share(calls, r);
		for (int j = 0; j < PART__MAX; j++) {
			int p = r % 2 == 0 ? j : PART__MAX - 1 - j;
			for (size_t i = 0; i < n; i++)
				if (part_sample(b, p, &parts[p][k[p]++]) < 0)
					return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	bw_prog = "bench_worker_tool";
	long calls = argc > 1 ? strtol(argv[1], NULL, 10) : CALLS_DEFAULT;
	const char *force = argc > 2 ? argv[2] : NULL;
	if (argc > 3 || calls < ROUNDS || calls > CALLS_MAX ||
	    (force && strcmp(force, "native") != 0 && strcmp(force, "fake") != 0)) {
		fprintf(stderr, "usage: bench_worker_tool [calls [native|fake]]   (calls %d..%d)\n",
		        ROUNDS, CALLS_MAX);
		return 64;
	}
	/* A program that dies mid-answer must fail a write, not this process. */
	signal(SIGPIPE, SIG_IGN);
	static bench b;
	b.conn.fd = -1;
	bool can_native = geteuid() == 0 && bw_default_image(b.digest);
	b.native = force ? strcmp(force, "native") == 0 : can_native;
	if (b.native && !can_native) {
		fprintf(stderr, "%s: native asked for, but %s\n", bw_prog,
		        geteuid() != 0 ? "not root" : "the store has no default image");
		return 77;
	}
	double la[3] = { 0 };
	if (getloadavg(la, 3) != 3)
		la[0] = la[1] = la[2] = -1.0;
	printf("bench_worker_tool: nproc %ld, load average %.2f %.2f %.2f; %ld calls each side in "
	       "%d interleaved rounds\n",
	       sysconf(_SC_NPROCESSORS_ONLN), la[0], la[1], la[2], calls, ROUNDS);
	printf("mechanism: %s%s%s\n", b.native ? "native, the default image " : "fake",
	       b.native ? b.digest : "",
	       b.native || force ? "" : " (not root, or no default image in the store)");
	fflush(stdout);

	int64_t *w = calloc((size_t)calls, sizeof(int64_t));
	int64_t *s = calloc((size_t)calls, sizeof(int64_t));
	int64_t *parts[PART__MAX];
	bool mem = w && s;
	for (int p = 0; p < PART__MAX; p++)
		mem = (parts[p] = calloc((size_t)calls, sizeof(int64_t))) && mem;
	if (!mem || setup(&b) < 0 || measure(&b, (size_t)calls, w, s) < 0 ||
	    measure_parts(&b, (size_t)calls, parts) < 0)
		failed = true;
	if (!failed) {
		double wp50 = bench_ms(bench_pct(w, (size_t)calls, 50));
		double wp99 = bench_ms(bench_pct(w, (size_t)calls, 99));
		double sp50 = bench_ms(bench_pct(s, (size_t)calls, 50));
		double sp99 = bench_ms(bench_pct(s, (size_t)calls, 99));
		printf("sandbox.run_command of /bin/true in a warm claim (%s):\n",
		       b.native ? "native" : "fake");
		printf("  %-40s p50 %8.3f ms   p99 %8.3f ms\n", "through the worker and the service",
		       wp50, wp99);
		printf("  %-40s p50 %8.3f ms   p99 %8.3f ms\n", "the service's API alone (remote)",
		       sp50, sp99);
		printf("  %-40s p50 %+8.3f ms   ratio %.3fx\n", "the worker adds", wp50 - sp50,
		       wp50 / sp50);
		printf("  aim: the worker adds under %.1f ms at p50: %s (%+.3f ms, %.2f of the aim)\n",
		       AIM_MS, wp50 - sp50 < AIM_MS ? "met" : "NOT met", wp50 - sp50,
		       (wp50 - sp50) / AIM_MS);
		printf("  connections to the worker: %lld\n", (long long)b.conn.connects);
		printf("what the worker's part is made of (p50 / p99, %ld each, interleaved):\n",
		       calls);
		for (int p = 0; p < PART__MAX; p++)
			printf("  %-40s p50 %8.3f ms   p99 %8.3f ms\n", part_label[p],
			       bench_ms(bench_pct(parts[p], (size_t)calls, 50)),
			       bench_ms(bench_pct(parts[p], (size_t)calls, 99)));
	}
	teardown(&b);
	free(w);
	free(s);
	for (int p = 0; p < PART__MAX; p++)
		free(parts[p]);
	if (failed) {
		fprintf(stderr, "%s: a call failed (above)\n", bw_prog);
		return 1;
	}
	return 0;
}
