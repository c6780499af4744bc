/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's own cost per execute: /bin/true in one live sandbox,
 * through the API (the remote adapter over a Unix socket to an
 * airlock_service in this process) beside the same core called in
 * process, in interleaved rounds (the side that goes first alternates).
 *
 * First over the fake mechanism, which runs nothing: its in-process side
 * costs microseconds, so the difference is the API alone (the client's
 * request, the HTTP core, the routes, the execute's job and its thread,
 * the streamed answer). Then, where this host has it (root, the default
 * image), over the native mechanism, where the same difference sits on
 * top of a real command.
 *
 * The aim (issue 23): the API adds under 0.3 ms per execute at p50. It
 * prints p50 and p99 of both sides and the difference at each, and asserts
 * no time; it exits non-zero when any call failed. Without the native
 * mechanism or the default image the native pair is skipped, said so.
 *
 *   bench_service_exec [executes]   (default 2000)
 *
 * AIRLOCK_BENCH_IMAGE_STORE names a store other than
 * /var/lib/airlock/images.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "airlock/fake.h"
#include "airlock/native.h"

#include "bench_sandbox.h"
#include "bench_api.h"

#define BENCH_EXECS_DEFAULT 2000
#define AIM_MS 0.3
#define CREDENTIAL "bench-service-exec-credential-3c81f0a27e5d9b64"

static int run_fake(size_t execs)
{
	bench_api c = { 0 };
	airlock_error err = { 0 };
	airlock_fake *fake = NULL;
	airlock_environment_spec spec = { 0 };
	int rc = -1;
	/* The fake runs no image: a digest of the right form (the core checks
	 * the form) is all it needs. */
	if (airlock_fake_new(&fake, &err) < 0 ||
	    airlock_exec_new(airlock_fake_ops(), fake, NULL, &c.local, &err) < 0) {
		fprintf(stderr, "bench_service_exec: fake: %s\n", err.message);
		goto out;
	}
	if (bench_spec(&spec, "sha256:0000000000000000000000000000000000000000000000000000000000000000") <
	            0 ||
	    bench_api_open(&c, CREDENTIAL) < 0)
		goto out;
	rc = bench_api_execute_pair(&c, &spec, "fake", execs, AIM_MS);
out:
	bench_api_close(&c);
	airlock_environment_spec_clear(&spec);
	return rc;
}

/* 0 done, BENCH_SKIP when this host has no native mechanism or image. */
static int run_native(size_t execs)
{
	char why[256];
	if (airlock_native_probe(why, sizeof(why)) < 0) {
		printf("native: skipped: the native mechanism is unavailable here: %s\n", why);
		return BENCH_SKIP;
	}
	const char *store_dir = NULL;
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	int found = bench_default_image(&store_dir, digest);
	if (found == BENCH_SKIP)
		printf("native: skipped: no default image in %s\n", store_dir);
	if (found != 0)
		return found == BENCH_SKIP ? BENCH_SKIP : -1;
	bench_api c = { 0 };
	airlock_error err = { 0 };
	airlock_environment_spec spec = { 0 };
	int rc = -1;
	airlock_native_config nc = { .image_store = store_dir, .start_budget_seconds = 30 };
	airlock_native *n = NULL;
	if (airlock_native_new(&nc, &n, &err) < 0 ||
	    airlock_exec_new(airlock_native_ops(), n, NULL, &c.local, &err) < 0) {
		fprintf(stderr, "bench_service_exec: native: %s\n", err.message);
		goto out;
	}
	if (bench_spec(&spec, digest) < 0 || bench_api_open(&c, CREDENTIAL) < 0)
		goto out;
	rc = bench_api_execute_pair(&c, &spec, "native", execs, AIM_MS);
out:
	bench_api_close(&c);
	airlock_environment_spec_clear(&spec);
	return rc;
}

int main(int argc, char **argv)
{
	bench_prog = "bench_service_exec";
	long execs = BENCH_EXECS_DEFAULT;
	if (argc > 2 || (argc > 1 && (execs = bench_parse(argv[1], BENCH_ROUNDS, "[executes]")) < 0)) {
		if (argc > 2)
			fprintf(stderr, "usage: %s [executes]\n", argv[0]);
		return 2;
	}
	double load[3] = { -1, -1, -1 };
	if (getloadavg(load, 3) != 3)
		load[0] = load[1] = load[2] = -1;
	printf("bench_service_exec: nproc %ld, load average %.2f %.2f %.2f; "
	       "the API over a Unix socket to a service in this process\n",
	       sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2]);
	fflush(stdout);
	if (run_fake((size_t)execs) < 0)
		goto fail;
	fflush(stdout);
	int n = run_native((size_t)execs);
	if (n < 0)
		goto fail;
	if (getloadavg(load, 3) == 3)
		printf("bench_service_exec: load average at the end %.2f %.2f %.2f\n", load[0], load[1],
		       load[2]);
	return 0;
fail:
	fprintf(stderr, "bench_service_exec: no figures: the run did not complete\n");
	return 1;
}
