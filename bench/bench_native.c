/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The native mechanism's two costs, each beside the cheapest thing it could
 * be compared with, measured side by side in one process:
 *
 *   provision  provision + destroy of a sandbox from the default image at
 *              small limits, beside `bwrap --unshare-all --die-with-parent
 *              --ro-bind / / /bin/true` (Debian bubblewrap) started with
 *              fork + execve + waitpid;
 *   execute    /bin/true run in one live sandbox through
 *              airlock_exec_execute, beside a plain fork + execve("/bin/true")
 *              + waitpid on the host.
 *
 * Each pair is interleaved in rounds (the side that goes first alternates),
 * so a burst of noise on the machine lands on both sides alike. Latencies
 * are CLOCK_MONOTONIC; the program prints p50 and p99 of each side and the
 * ratios, and asserts no time. It refuses to run (non-zero, with the reason)
 * when the host cannot run the native mechanism, the default image is not
 * in the store, or bwrap is missing: it never prints a figure it did not
 * measure.
 *
 *   bench_native [runs [executes]]   (default 200 provisions, 500 executes)
 *
 * Needs root (the native mechanism does). AIRLOCK_BENCH_IMAGE_STORE names a
 * store other than /var/lib/airlock/images.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "airlock/native.h"

#include "bench_sandbox.h"

#define BENCH_RUNS_DEFAULT 200
#define BENCH_EXECS_DEFAULT 500

static const char *const bwrap_dirs[] = { "/usr/bin", "/bin", "/usr/local/bin" };

/* ---- the two measurements -------------------------------------------------- */

typedef struct bench_ctx {
	airlock_exec *exec;
	airlock_environment_spec spec;
	char *bwrap;
} bench_ctx;

static int bench_bwrap_side(bench_ctx *c, int64_t *out, size_t *k, size_t count)
{
	char a0[] = "bwrap", a1[] = "--unshare-all", a2[] = "--die-with-parent", a3[] = "--ro-bind",
	     a4[] = "/", a5[] = "/", a6[] = "/bin/true";
	char *argv[] = { a0, a1, a2, a3, a4, a5, a6, NULL };
	for (size_t i = 0; i < count; i++, (*k)++)
		if (bench_spawn(c->bwrap, argv, &out[*k]) < 0)
			return -1;
	return 0;
}

static int bench_host_side(int64_t *out, size_t *k, size_t count)
{
	char a0[] = "/bin/true";
	char *argv[] = { a0, NULL };
	for (size_t i = 0; i < count; i++, (*k)++)
		if (bench_spawn("/bin/true", argv, &out[*k]) < 0)
			return -1;
	return 0;
}

static int bench_provision_all(bench_ctx *c, size_t runs)
{
	int rc = -1;
	int64_t *total = calloc(runs, sizeof(int64_t));
	int64_t *prov = calloc(runs, sizeof(int64_t));
	int64_t *dest = calloc(runs, sizeof(int64_t));
	int64_t *bw = calloc(runs, sizeof(int64_t));
	if (!total || !prov || !dest || !bw) {
		fprintf(stderr, "bench_native: out of memory\n");
		goto out;
	}

	/* The first provision of an image pays once for hashing it, attaching
	 * its loop device and formatting the first volume of this shape; it is
	 * reported on its own, then both sides warm up. */
	int64_t cold_p = 0, cold_d = 0, scratch = 0;
	airlock_environment_handle h;
	if (bench_provision(c->exec, &c->spec, &h, &cold_p) < 0 || bench_destroy(c->exec, &h, &cold_d) < 0)
		goto out;
	printf("provision: first (cold) provision %.3f ms, destroy %.3f ms (not in the samples)\n",
	       bench_ms(cold_p), bench_ms(cold_d));
	for (int i = 0; i < BENCH_WARMUP; i++) {
		size_t k1 = 0;
		if (bench_provision_side(c->exec, &c->spec, &scratch, &scratch, &scratch, &k1, 1) < 0)
			goto out;
		k1 = 0;
		if (bench_bwrap_side(c, &scratch, &k1, 1) < 0)
			goto out;
	}

	size_t ka = 0, kb = 0;
	for (int r = 0; r < BENCH_ROUNDS; r++) {
		size_t n = bench_share(runs, r);
		int ok = (r % 2 == 0)
		                 ? (bench_provision_side(c->exec, &c->spec, total, prov, dest, &ka, n) == 0 &&
		                    bench_bwrap_side(c, bw, &kb, n) == 0)
		                 : (bench_bwrap_side(c, bw, &kb, n) == 0 &&
		                    bench_provision_side(c->exec, &c->spec, total, prov, dest, &ka, n) == 0);
		if (!ok)
			goto out;
	}

	bench_stat s_total = bench_stats(total, runs);
	bench_stat s_bwrap = bench_stats(bw, runs);
	bench_stat s_prov = bench_stats(prov, runs);
	bench_stat s_dest = bench_stats(dest, runs);
	printf("provision latency, %zu runs each, %d interleaved rounds:\n", runs, BENCH_ROUNDS);
	bench_print_pair("native provision + destroy", s_total,
	                 "bwrap --unshare-all /bin/true", s_bwrap);
	printf("  %-34s p50 %8.3f ms   p99 %8.3f ms\n", "  of which provision alone", s_prov.p50_ms,
	       s_prov.p99_ms);
	printf("  %-34s p50 %8.3f ms   p99 %8.3f ms\n", "  of which destroy alone", s_dest.p50_ms,
	       s_dest.p99_ms);
	printf("  aim: within 3x of bwrap at p50: %s (%.2fx)\n",
	       s_total.p50_ms <= 3.0 * s_bwrap.p50_ms ? "met" : "NOT met",
	       s_total.p50_ms / s_bwrap.p50_ms);
	rc = 0;
out:
	free(total);
	free(prov);
	free(dest);
	free(bw);
	return rc;
}

static int bench_execute_all(bench_ctx *c, size_t execs)
{
	int rc = -1;
	int64_t *ours = calloc(execs, sizeof(int64_t));
	int64_t *host = calloc(execs, sizeof(int64_t));
	airlock_environment_handle h;
	bool live = false;
	int64_t scratch = 0;
	if (!ours || !host) {
		fprintf(stderr, "bench_native: out of memory\n");
		goto out;
	}
	if (bench_provision(c->exec, &c->spec, &h, &scratch) < 0)
		goto out;
	live = true;
	for (int i = 0; i < BENCH_WARMUP; i++) {
		size_t k1 = 0;
		if (bench_execute(c->exec, &h, &scratch) < 0 || bench_host_side(&scratch, &k1, 1) < 0)
			goto out;
	}

	size_t ka = 0, kb = 0;
	for (int r = 0; r < BENCH_ROUNDS; r++) {
		size_t n = bench_share(execs, r);
		if (r % 2 == 1 && bench_host_side(host, &kb, n) < 0)
			goto out;
		for (size_t i = 0; i < n; i++, ka++)
			if (bench_execute(c->exec, &h, &ours[ka]) < 0)
				goto out;
		if (r % 2 == 0 && bench_host_side(host, &kb, n) < 0)
			goto out;
	}

	bench_stat s_ours = bench_stats(ours, execs);
	bench_stat s_host = bench_stats(host, execs);
	printf("execute overhead, %zu runs each in one live sandbox, %d interleaved rounds:\n", execs,
	       BENCH_ROUNDS);
	bench_print_pair("native execute /bin/true", s_ours, "host fork+execve /bin/true", s_host);
	printf("  aim: within 2x of fork+exec at p50: %s (%.2fx)\n",
	       s_ours.p50_ms <= 2.0 * s_host.p50_ms ? "met" : "NOT met",
	       s_ours.p50_ms / s_host.p50_ms);
	rc = 0;
out:
	if (live) {
		int64_t d = 0;
		if (bench_destroy(c->exec, &h, &d) < 0)
			rc = -1;
	}
	free(ours);
	free(host);
	return rc;
}

/* ---- setup ----------------------------------------------------------------- */

static char *bench_find_bwrap(void)
{
	for (size_t i = 0; i < sizeof(bwrap_dirs) / sizeof(bwrap_dirs[0]); i++) {
		char *p = NULL;
		if (asprintf(&p, "%s/bwrap", bwrap_dirs[i]) < 0)
			return NULL;
		if (access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	bench_prog = "bench_native";
	long runs = BENCH_RUNS_DEFAULT, execs = BENCH_EXECS_DEFAULT;
	const char *usage = "[runs [executes]]";
	if (argc > 3 || (argc > 1 && (runs = bench_parse(argv[1], BENCH_ROUNDS, usage)) < 0) ||
	    (argc > 2 && (execs = bench_parse(argv[2], BENCH_ROUNDS, usage)) < 0)) {
		if (argc > 3)
			fprintf(stderr, "usage: %s [runs [executes]]\n", argv[0]);
		return 2;
	}

	char why[256];
	if (airlock_native_probe(why, sizeof(why)) < 0) {
		fprintf(stderr, "bench_native: the native mechanism is unavailable here: %s\n", why);
		return BENCH_SKIP;
	}
	const char *store_dir = NULL;
	airlock_error err = { 0 };
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	int found = bench_default_image(&store_dir, digest);
	if (found != 0)
		return found;

	bench_ctx c = { 0 };
	int rc = 1;
	c.bwrap = bench_find_bwrap();
	if (!c.bwrap) {
		fprintf(stderr, "bench_native: bwrap not found in /usr/bin, /bin or /usr/local/bin: "
		                "apt-get install bubblewrap (scripts/setup.sh does)\n");
		rc = BENCH_SKIP;
		goto out;
	}
	if (bench_spec(&c.spec, digest) < 0) {
		fprintf(stderr, "bench_native: cannot build the spec\n");
		goto out;
	}
	airlock_native_config nc = { .image_store = store_dir, .start_budget_seconds = 30 };
	airlock_native *n = NULL;
	if (airlock_native_new(&nc, &n, &err) < 0) {
		fprintf(stderr, "bench_native: %s\n", err.message);
		goto out;
	}
	if (airlock_exec_new(airlock_native_ops(), n, NULL, &c.exec, &err) < 0) {
		fprintf(stderr, "bench_native: %s\n", err.message);
		goto out;
	}

	double load[3] = { 0, 0, 0 };
	if (getloadavg(load, 3) != 3)
		load[0] = load[1] = load[2] = -1;
	printf("bench_native: nproc %ld, load average %.2f %.2f %.2f; image %.19s...; "
	       "limits workspace 64 MiB, 1000 inodes, memory 256 MiB, pids 64; %s\n",
	       sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2], digest, c.bwrap);
	fflush(stdout);
	if (bench_provision_all(&c, (size_t)runs) < 0)
		goto out;
	fflush(stdout);
	if (bench_execute_all(&c, (size_t)execs) < 0)
		goto out;
	if (getloadavg(load, 3) == 3)
		printf("bench_native: load average at the end %.2f %.2f %.2f\n", load[0], load[1],
		       load[2]);
	rc = 0;
out:
	airlock_exec_free(c.exec);
	airlock_environment_spec_clear(&c.spec);
	free(c.bwrap);
	if (rc != 0)
		fprintf(stderr, "bench_native: no figures: the run did not complete\n");
	return rc;
}
