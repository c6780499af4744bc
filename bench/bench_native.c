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

/* ---- what the mechanism is compared with ------------------------------------ */

static int bench_bwrap_side(void *bwrap, int64_t *out, size_t *k, size_t count)
{
	char a0[] = "bwrap", a1[] = "--unshare-all", a2[] = "--die-with-parent", a3[] = "--ro-bind",
	     a4[] = "/", a5[] = "/", a6[] = "/bin/true";
	char *argv[] = { a0, a1, a2, a3, a4, a5, a6, NULL };
	for (size_t i = 0; i < count; i++, (*k)++)
		if (bench_spawn(bwrap, argv, &out[*k]) < 0)
			return -1;
	return 0;
}

static int bench_host_side(void *unused, int64_t *out, size_t *k, size_t count)
{
	(void)unused;
	char a0[] = "/bin/true";
	char *argv[] = { a0, NULL };
	for (size_t i = 0; i < count; i++, (*k)++)
		if (bench_spawn("/bin/true", argv, &out[*k]) < 0)
			return -1;
	return 0;
}

typedef struct bench_ctx {
	airlock_exec *exec;
	airlock_environment_spec spec;
	char *bwrap;
} bench_ctx;

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
	bench_theirs bwrap = { "bwrap --unshare-all /bin/true", bench_bwrap_side, c.bwrap, 3.0,
		               "within 3x of bwrap" };
	if (bench_provision_all(c.exec, &c.spec, (size_t)runs, "native", &bwrap) < 0)
		goto out;
	fflush(stdout);
	bench_theirs host = { "host fork+execve /bin/true", bench_host_side, NULL, 2.0,
		              "within 2x of fork+exec" };
	if (bench_execute_all(c.exec, &c.spec, (size_t)execs, "native", &host) < 0)
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
