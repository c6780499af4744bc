/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the execution service's API costs: the same native core and adapter
 * called in process and through the API (the remote adapter over a Unix
 * socket to an airlock_service in this process serving that core), side by
 * side in interleaved rounds (the side that goes first alternates):
 *
 *   provision  provision + destroy of a sandbox from the default image;
 *   execute    /bin/true in one live sandbox;
 *   concurrent N sandboxes provisioned at once through the API, each then
 *              running a short command EXECS_EACH times from its own thread:
 *              errors (must be 0), provision p99, execute throughput and
 *              p99; and the process's VmRSS before and after the N idle
 *              sandboxes, divided by N (the service is in this process, so
 *              this is the service's memory per idle sandbox, the client's
 *              few records included).
 *
 * Then the same two pairs over the fake mechanism (which runs nothing, so
 * its in-process side costs microseconds): what the API itself costs, the
 * mechanism's time and its scheduling taken out.
 *
 * The aims: the API adds at most 0.5 ms at p50 to a provision + destroy,
 * under 0.3 ms to an execute (issue 23). It prints p50 and
 * p99 of both sides, the difference and the ratio at p50, and asserts no
 * time; it exits non-zero when any call failed. Without the native
 * mechanism or the default image it exits 77 with the reason.
 *
 *   bench_service [runs [executes [concurrent]]]   (default 200, 500, 64)
 *
 * Needs root (the native mechanism does). AIRLOCK_BENCH_IMAGE_STORE names a
 * store other than /var/lib/airlock/images.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "airlock/fake.h"
#include "airlock/native.h"
#include "airlock/remote.h"
#include "airlock/service.h"

#include "bench_sandbox.h"
#include "bench_api.h"

#define BENCH_RUNS_DEFAULT 200
#define BENCH_EXECS_DEFAULT 500
#define BENCH_CONCURRENT_DEFAULT 64
#define EXECS_EACH 5
#define CREDENTIAL "bench-service-credential-6a0f2c9d4e7b1358"
/* Issue 23's aim for an execute (bench_service_exec.c is its benchmark). */
#define AIM_EXECUTE_MS 0.3

typedef struct bench_ctx {
	bench_api api; /* api.local: the native core, then the fake one */
	airlock_environment_spec spec;
} bench_ctx;

static const char *local_label = "in process (native)";

static void print_pair(const char *what, size_t n, int64_t *api, int64_t *local)
{
	bench_stat a = bench_stats(api, n), l = bench_stats(local, n);
	printf("%s, %zu runs each, %d interleaved rounds:\n", what, n, BENCH_ROUNDS);
	printf("  %-34s p50 %8.3f ms   p99 %8.3f ms\n", "through the API (remote)", a.p50_ms, a.p99_ms);
	printf("  %-34s p50 %8.3f ms   p99 %8.3f ms\n", local_label, l.p50_ms, l.p99_ms);
	printf("  %-34s p50 %+8.3f ms   ratio %.3fx\n", "the API adds", a.p50_ms - l.p50_ms,
	       a.p50_ms / l.p50_ms);
	printf("  aim: the API adds at most 0.5 ms at p50: %s (%+.3f ms)\n",
	       a.p50_ms - l.p50_ms <= 0.5 ? "met" : "NOT met", a.p50_ms - l.p50_ms);
}

static int provision_pair(bench_ctx *c, size_t runs)
{
	int rc = -1;
	int64_t *api = calloc(runs, sizeof(int64_t)), *local = calloc(runs, sizeof(int64_t));
	int64_t *p = calloc(runs, sizeof(int64_t)), *d = calloc(runs, sizeof(int64_t));
	int64_t scratch = 0;
	if (!api || !local || !p || !d)
		goto out;
	for (int i = 0; i < BENCH_WARMUP; i++) {
		size_t k = 0;
		if (bench_provision_side(c->api.remote, &c->spec, &scratch, &scratch, &scratch, &k, 1) < 0)
			goto out;
		k = 0;
		if (bench_provision_side(c->api.local, &c->spec, &scratch, &scratch, &scratch, &k, 1) < 0)
			goto out;
	}
	size_t ka = 0, kl = 0;
	for (int r = 0; r < BENCH_ROUNDS; r++) {
		size_t n = bench_share(runs, r);
		bool ok = r % 2 == 0
		                  ? bench_provision_side(c->api.remote, &c->spec, api, p, d, &ka, n) == 0 &&
		                            bench_provision_side(c->api.local, &c->spec, local, p, d, &kl, n) == 0
		                  : bench_provision_side(c->api.local, &c->spec, local, p, d, &kl, n) == 0 &&
		                            bench_provision_side(c->api.remote, &c->spec, api, p, d, &ka, n) == 0;
		if (!ok)
			goto out;
	}
	print_pair("provision + destroy", runs, api, local);
	rc = 0;
out:
	free(api);
	free(local);
	free(p);
	free(d);
	return rc;
}

/* ---- concurrent ------------------------------------------------------------ */

typedef struct worker {
	bench_ctx *c;
	pthread_barrier_t *start;
	airlock_environment_handle h;
	bool live;
	int64_t provision_ns;
	int64_t exec_ns[EXECS_EACH];
	int n_exec; /* executes made (none when the provision failed) */
	int errors;
	char first_error[256];
} worker;

static void worker_error(worker *w, const char *what, const airlock_error *err)
{
	if (w->errors++ == 0)
		snprintf(w->first_error, sizeof(w->first_error), "%s: %s: %.200s", what,
		         airlock_errclass_name(err->cls), err->message);
}

static void *worker_provision(void *arg)
{
	worker *w = arg;
	pthread_barrier_wait(w->start);
	airlock_error err = { 0 };
	int64_t t0 = bench_now_ns();
	if (airlock_exec_provision(w->c->api.remote, &w->c->spec, &w->h, &err) < 0)
		worker_error(w, "provision", &err);
	else
		w->live = true;
	w->provision_ns = bench_now_ns() - t0;
	return NULL;
}

static void *worker_execute(void *arg)
{
	worker *w = arg;
	pthread_barrier_wait(w->start);
	char a0[] = "/bin/sh", a1[] = "-c", a2[] = "echo $$";
	char *argv[] = { a0, a1, a2, NULL };
	char cwd[] = ".";
	airlock_execution_command cmd = { .argv = argv, .argc = 3, .working_directory = cwd,
		                          .timeout_seconds = 60, .maximum_output_bytes = 4096 };
	airlock_exec_call call = { .tenant_id = w->h.tenant_id,
		                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	for (int i = 0; i < EXECS_EACH && w->live; i++) {
		airlock_execution_result res = { 0 };
		airlock_error err = { 0 };
		int64_t t0 = bench_now_ns();
		int r = airlock_exec_execute(w->c->api.remote, &call, &w->h, &cmd, &res, &err);
		w->exec_ns[w->n_exec++] = bench_now_ns() - t0;
		if (r < 0)
			worker_error(w, "execute", &err);
		else if (!res.has_exit_code || res.exit_code != 0 || res.stdout_len < 2) {
			airlock_error e = { 0 };
			airlock_error_set(&e, AIRLOCK_ERR_INVALID, 0, "exit %d, killed_by %d",
			                  res.has_exit_code ? res.exit_code : -1, (int)res.killed_by);
			worker_error(w, "execute result", &e);
		}
		airlock_execution_result_clear(&res);
	}
	return NULL;
}

static long vm_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return -1;
	char line[256];
	long v = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &v) == 1)
			break;
	fclose(f);
	return v;
}

static int run_phase(worker *w, size_t n, void *(*fn)(void *))
{
	pthread_barrier_t start;
	pthread_t *t = calloc(n, sizeof(*t));
	if (!t || pthread_barrier_init(&start, NULL, (unsigned)n) != 0) {
		free(t);
		return -1;
	}
	size_t made = 0;
	for (; made < n; made++) {
		w[made].start = &start;
		if (pthread_create(&t[made], NULL, fn, &w[made]) != 0)
			break;
	}
	if (made < n) {
		/* The barrier would never open: not a measurement. */
		fprintf(stderr, "bench_service: only %zu of %zu threads started\n", made, n);
		abort();
	}
	for (size_t i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
	free(t);
	return 0;
}

static int concurrent(bench_ctx *c, size_t n)
{
	worker *w = calloc(n, sizeof(*w));
	int64_t *prov = calloc(n, sizeof(int64_t)), *ex = calloc(n * EXECS_EACH, sizeof(int64_t));
	if (!w || !prov || !ex) {
		free(w);
		free(prov);
		free(ex);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		w[i].c = c;
	long rss0 = vm_rss_kib();
	if (run_phase(w, n, worker_provision) < 0)
		return -1;
	long rss1 = vm_rss_kib();
	int64_t t0 = bench_now_ns();
	if (run_phase(w, n, worker_execute) < 0)
		return -1;
	int64_t wall = bench_now_ns() - t0;
	int errors = 0;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		prov[i] = w[i].provision_ns;
		for (int j = 0; j < w[i].n_exec; j++)
			ex[k++] = w[i].exec_ns[j];
		if (w[i].live) {
			airlock_error err = { 0 };
			if (airlock_exec_destroy(c->api.remote, &w[i].h, &err) < 0)
				worker_error(&w[i], "destroy", &err);
			airlock_environment_handle_clear(&w[i].h);
		}
		if (w[i].errors && errors == 0)
			fprintf(stderr, "bench_service: sandbox %zu: %s\n", i, w[i].first_error);
		errors += w[i].errors;
	}
	bench_stat sp = bench_stats(prov, n), se = k ? bench_stats(ex, k) : (bench_stat){ 0, 0 };
	printf("concurrent: %zu sandboxes through the API at once, %d executes of sh -c 'echo $$' each:\n",
	       n, EXECS_EACH);
	printf("  errors                             %d%s\n", errors, errors ? " (must be 0)" : "");
	printf("  %-34s p50 %8.3f ms   p99 %8.3f ms\n", "provision (all at once)", sp.p50_ms,
	       sp.p99_ms);
	printf("  %-34s p50 %8.3f ms   p99 %8.3f ms\n", "execute (all at once)", se.p50_ms, se.p99_ms);
	printf("  throughput                         %.1f executes/s (%zu in %.3f s)\n",
	       (double)k / ((double)wall / 1e9), k, (double)wall / 1e9);
	if (rss0 > 0 && rss1 > 0)
		printf("  service RSS per idle sandbox       %.1f KiB (VmRSS %ld -> %ld KiB over %zu)\n",
		       (double)(rss1 - rss0) / (double)n, rss0, rss1, n);
	free(w);
	free(prov);
	free(ex);
	return errors ? -1 : 0;
}

int main(int argc, char **argv)
{
	bench_prog = "bench_service";
	long runs = BENCH_RUNS_DEFAULT, execs = BENCH_EXECS_DEFAULT, conc = BENCH_CONCURRENT_DEFAULT;
	const char *usage = "[runs [executes [concurrent]]]";
	if (argc > 4 || (argc > 1 && (runs = bench_parse(argv[1], BENCH_ROUNDS, usage)) < 0) ||
	    (argc > 2 && (execs = bench_parse(argv[2], BENCH_ROUNDS, usage)) < 0) ||
	    (argc > 3 && (conc = bench_parse(argv[3], 1, usage)) < 0)) {
		if (argc > 4)
			fprintf(stderr, "usage: %s %s\n", argv[0], usage);
		return 2;
	}
	char why[256];
	if (airlock_native_probe(why, sizeof(why)) < 0) {
		fprintf(stderr, "bench_service: the native mechanism is unavailable here: %s\n", why);
		return BENCH_SKIP;
	}
	const char *store_dir = NULL;
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	int found = bench_default_image(&store_dir, digest);
	if (found != 0)
		return found;

	bench_ctx c = { 0 };
	int rc = 1;
	airlock_error err = { 0 };
	airlock_native_config nc = { .image_store = store_dir, .start_budget_seconds = 30 };
	airlock_native *n = NULL;
	if (airlock_native_new(&nc, &n, &err) < 0 ||
	    airlock_exec_new(airlock_native_ops(), n, NULL, &c.api.local, &err) < 0) {
		fprintf(stderr, "bench_service: %s\n", err.message);
		goto out;
	}
	if (bench_spec(&c.spec, digest) < 0 || bench_api_open(&c.api, CREDENTIAL) < 0)
		goto out;
	double load[3] = { 0, 0, 0 };
	if (getloadavg(load, 3) != 3)
		load[0] = load[1] = load[2] = -1;
	printf("bench_service: nproc %ld, load average %.2f %.2f %.2f; native, image %.19s...; "
	       "the API over a Unix socket to a service in this process\n",
	       sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2], digest);
	fflush(stdout);
	/* The first provision verifies the image and attaches its loop device;
	 * it belongs to neither side. */
	airlock_environment_handle h;
	int64_t cold = 0, scratch = 0;
	if (bench_provision(c.api.local, &c.spec, &h, &cold) < 0 || bench_destroy(c.api.local, &h, &scratch) < 0)
		goto out;
	if (provision_pair(&c, (size_t)runs) < 0)
		goto out;
	fflush(stdout);
	if (bench_api_execute_pair(&c.api, &c.spec, "native", (size_t)execs, AIM_EXECUTE_MS) < 0)
		goto out;
	fflush(stdout);
	if (concurrent(&c, (size_t)conc) < 0)
		goto out;
	fflush(stdout);
	/* The API's own cost: the same pairs over fake. */
	bench_api_close(&c.api);
	airlock_fake *fake = NULL;
	if (airlock_fake_new(&fake, &err) < 0 ||
	    airlock_exec_new(airlock_fake_ops(), fake, NULL, &c.api.local, &err) < 0 || bench_api_open(&c.api, CREDENTIAL) < 0) {
		fprintf(stderr, "bench_service: fake: %s\n", err.message);
		goto out;
	}
	local_label = "in process (fake)";
	printf("the API's own cost, over the fake mechanism (runs nothing):\n");
	if (provision_pair(&c, (size_t)execs) < 0 ||
	    bench_api_execute_pair(&c.api, &c.spec, "fake", (size_t)execs, AIM_EXECUTE_MS) < 0)
		goto out;
	if (getloadavg(load, 3) == 3)
		printf("bench_service: load average at the end %.2f %.2f %.2f\n", load[0], load[1],
		       load[2]);
	rc = 0;
out:
	bench_api_close(&c.api);
	airlock_environment_spec_clear(&c.spec);
	if (rc != 0)
		fprintf(stderr, "bench_service: no figures: the run did not complete\n");
	return rc;
}
