/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_BENCH_SANDBOX_H
#define AIRLOCK_BENCH_SANDBOX_H

/*
 * What the mechanism benchmarks (bench_native.c, bench_gvisor.c) share: a
 * spec at small limits, provision, destroy and execute through the port,
 * each timed; a program started and timed; the figures printed in pairs;
 * the interleaved rounds. Each benchmark sets bench_prog to its name, which
 * prefixes its messages.
 */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/envbuild.h"
#include "airlock/image.h"
#include "airlock/port/exec.h"

#include "bench_util.h"

#define BENCH_STORE_DEFAULT "/var/lib/airlock/images"
#define BENCH_RUNS_MAX 1000000L
#define BENCH_ROUNDS 10
/* What is missing (the mechanism, the image, a tool) is a skip with its
 * reason, not a failure: meson's and the test script's skip status. */
#define BENCH_SKIP 77
#define BENCH_WARMUP 5

extern char **environ;
static const char *bench_prog;

typedef struct bench_stat {
	double p50_ms;
	double p99_ms;
} bench_stat;

static inline bench_stat bench_stats(int64_t *v, size_t n)
{
	bench_stat s = { bench_ms(bench_pct(v, n, 50)), bench_ms(bench_pct(v, n, 99)) };
	return s;
}

/* fork + execve(path, argv) + waitpid; the wall time in *ret_ns. The
 * program must exit 0, or the sample is not a measurement. */
static inline int bench_spawn(const char *path, char *const *argv, int64_t *ret_ns)
{
	int64_t t0 = bench_now_ns();
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return -1;
	}
	if (pid == 0) {
		execve(path, argv, environ);
		_exit(127);
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			perror("waitpid");
			return -1;
		}
	}
	int64_t t1 = bench_now_ns();
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "%s: %s exited with status %d%s\n", bench_prog, path,
		        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
		        WIFEXITED(status) ? "" : " (signal)");
		return -1;
	}
	*ret_ns = t1 - t0;
	return 0;
}

/* The store the benchmark reads (AIRLOCK_BENCH_IMAGE_STORE, else
 * BENCH_STORE_DEFAULT) and its default image's digest: 0, BENCH_SKIP when
 * there is no default image, 1 on an error (each said on stderr). */
static inline int bench_default_image(const char **ret_store, char digest[AIRLOCK_IMAGE_DIGEST_SIZE])
{
	const char *store_dir = getenv("AIRLOCK_BENCH_IMAGE_STORE");
	if (!store_dir || !*store_dir)
		store_dir = BENCH_STORE_DEFAULT;
	*ret_store = store_dir;
	airlock_image_store *store = NULL;
	airlock_error err = { 0 };
	if (airlock_image_store_open(store_dir, &store, &err) < 0) {
		fprintf(stderr, "%s: image store %s: %s\n", bench_prog, store_dir, err.message);
		return 1;
	}
	int found = airlock_image_find_default(store, digest, &err);
	airlock_image_store_free(store);
	if (found < 0) {
		fprintf(stderr, "%s: image store %s: %s\n", bench_prog, store_dir, err.message);
		return 1;
	}
	if (found == 0) {
		fprintf(stderr, "%s: no default image in %s: run ./build/airlock image build\n",
		        bench_prog, store_dir);
		return BENCH_SKIP;
	}
	return 0;
}

/* Debian's bubblewrap, the floor the native mechanism is compared with:
 * its path (freed by the caller), or NULL when it is not installed. */
static inline char *bench_find_bwrap(void)
{
	static const char *const dirs[] = { "/usr/bin", "/bin", "/usr/local/bin" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char *p = NULL;
		if (asprintf(&p, "%s/bwrap", dirs[i]) < 0)
			return NULL;
		if (access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
}

/* ---- the sandbox side ------------------------------------------------------ */

static inline int bench_spec(airlock_environment_spec *s, const char *digest)
{
	memset(s, 0, sizeof(*s));
	s->tenant_id = strdup("bench");
	s->run_id = strdup("bench-run");
	s->image_digest = strdup(digest);
	if (!s->tenant_id || !s->run_id || !s->image_digest)
		return -1;
	s->lease_epoch = 1;
	s->limits = (airlock_resource_limits){
		.cpu_millicores = 1000,
		.memory_bytes = 256ll << 20,
		.pids_max = 64,
		.workspace_bytes = 64ll << 20,
		.inodes_max = 1000,
		.wall_clock_seconds = 60,
	};
	s->egress.mode = AIRLOCK_EGRESS_DENY;
	/* Tier 2 only: nothing of this process's environment goes in. */
	char *no_parent[] = { NULL };
	airlock_envbuild_input in = { .parent = no_parent };
	airlock_error err = { 0 };
	if (airlock_envbuild(&in, &s->environment, &err) < 0) {
		fprintf(stderr, "%s: environment: %s\n", bench_prog, err.message);
		return -1;
	}
	return 0;
}

static inline int bench_provision(airlock_exec *e, const airlock_environment_spec *spec,
                                  airlock_environment_handle *h, int64_t *ret_ns)
{
	airlock_error err = { 0 };
	memset(h, 0, sizeof(*h));
	int64_t t0 = bench_now_ns();
	int r = airlock_exec_provision(e, spec, h, &err);
	int64_t t1 = bench_now_ns();
	if (r < 0) {
		fprintf(stderr, "%s: provision: %s: %s\n", bench_prog, airlock_errclass_name(err.cls),
		        err.message);
		return -1;
	}
	*ret_ns = t1 - t0;
	return 0;
}

static inline int bench_destroy(airlock_exec *e, airlock_environment_handle *h, int64_t *ret_ns)
{
	airlock_error err = { 0 };
	int64_t t0 = bench_now_ns();
	int r = airlock_exec_destroy(e, h, &err);
	int64_t t1 = bench_now_ns();
	airlock_environment_handle_clear(h);
	if (r < 0) {
		fprintf(stderr, "%s: destroy: %s: %s\n", bench_prog, airlock_errclass_name(err.cls),
		        err.message);
		return -1;
	}
	*ret_ns = t1 - t0;
	return 0;
}

static inline int bench_execute(airlock_exec *e, const airlock_environment_handle *h, int64_t *ret_ns)
{
	char a0[] = "/bin/true";
	char *argv[] = { a0, NULL };
	char cwd[] = ".";
	airlock_execution_command cmd = {
		.argv = argv, .argc = 1, .working_directory = cwd,
		.timeout_seconds = 30, .maximum_output_bytes = 1 << 20,
	};
	airlock_exec_call call = { .tenant_id = h->tenant_id,
		                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_execution_result res;
	memset(&res, 0, sizeof(res));
	airlock_error err = { 0 };
	int64_t t0 = bench_now_ns();
	int r = airlock_exec_execute(e, &call, h, &cmd, &res, &err);
	int64_t t1 = bench_now_ns();
	if (r < 0) {
		fprintf(stderr, "%s: execute: %s: %s\n", bench_prog, airlock_errclass_name(err.cls),
		        err.message);
		return -1;
	}
	bool ok = res.has_exit_code && res.exit_code == 0;
	if (!ok)
		fprintf(stderr, "%s: /bin/true in the sandbox: %s %d\n", bench_prog,
		        res.has_exit_code ? "exit code" : "killed, reason",
		        res.has_exit_code ? res.exit_code : (int)res.killed_by);
	airlock_execution_result_clear(&res);
	*ret_ns = t1 - t0;
	return ok ? 0 : -1;
}

/* provision + destroy, count times, into total/prov/dest from index *k. */
static inline int bench_provision_side(airlock_exec *e, const airlock_environment_spec *spec,
                                       int64_t *total, int64_t *prov, int64_t *dest, size_t *k,
                                       size_t count)
{
	for (size_t i = 0; i < count; i++, (*k)++) {
		airlock_environment_handle h;
		if (bench_provision(e, spec, &h, &prov[*k]) < 0)
			return -1;
		if (bench_destroy(e, &h, &dest[*k]) < 0)
			return -1;
		total[*k] = prov[*k] + dest[*k];
	}
	return 0;
}

/* ---- figures ------------------------------------------------------------------ */

static inline void bench_print_pair(const char *ours, bench_stat a, const char *theirs, bench_stat b)
{
	printf("  %-34s p50 %8.3f ms   p99 %8.3f ms\n", ours, a.p50_ms, a.p99_ms);
	printf("  %-34s p50 %8.3f ms   p99 %8.3f ms\n", theirs, b.p50_ms, b.p99_ms);
	printf("  %-34s p50 %8.2fx     p99 %8.2fx\n", "ratio (ours / theirs)", a.p50_ms / b.p50_ms,
	       a.p99_ms / b.p99_ms);
}

/* How many of n samples round r of BENCH_ROUNDS takes. */
static inline size_t bench_share(size_t n, int r)
{
	return n / BENCH_ROUNDS + ((size_t)r < n % BENCH_ROUNDS ? 1 : 0);
}

/* ---- the two measurements, each beside another program --------------------- */

/* The side a measurement is compared with: count samples into out from
 * *k on (advancing it). */
typedef int (*bench_side_fn)(void *ctx, int64_t *out, size_t *k, size_t count);

typedef struct bench_theirs {
	const char *label; /* what it runs, for the figures */
	bench_side_fn run;
	void *ctx;
	double aim;        /* ours / theirs at p50 the aim allows */
	const char *aim_text;
} bench_theirs;

static inline void bench_print_aim(const bench_theirs *t, bench_stat ours, bench_stat theirs)
{
	double ratio = ours.p50_ms / theirs.p50_ms;
	printf("  aim: %s at p50: %s (%.2fx)\n", t->aim_text, ratio <= t->aim ? "met" : "NOT met", ratio);
}

/* provision + destroy (ours: name), runs times, beside t. */
static inline int bench_provision_all(airlock_exec *e, const airlock_environment_spec *spec,
                                      size_t runs, const char *name, const bench_theirs *t)
{
	int rc = -1;
	int64_t *total = calloc(runs, sizeof(int64_t));
	int64_t *prov = calloc(runs, sizeof(int64_t));
	int64_t *dest = calloc(runs, sizeof(int64_t));
	int64_t *other = calloc(runs, sizeof(int64_t));
	if (!total || !prov || !dest || !other) {
		fprintf(stderr, "%s: out of memory\n", bench_prog);
		goto out;
	}

	/* The first provision of an image pays once for verifying it (native
	 * also attaches its loop device) and for formatting the first volume
	 * of this shape; it is reported on its own, then both sides warm up. */
	int64_t cold_p = 0, cold_d = 0, scratch = 0;
	airlock_environment_handle h;
	if (bench_provision(e, spec, &h, &cold_p) < 0 || bench_destroy(e, &h, &cold_d) < 0)
		goto out;
	printf("provision: first (cold) provision %.3f ms, destroy %.3f ms (not in the samples)\n",
	       bench_ms(cold_p), bench_ms(cold_d));
	for (int i = 0; i < BENCH_WARMUP; i++) {
		size_t k1 = 0;
		if (bench_provision_side(e, spec, &scratch, &scratch, &scratch, &k1, 1) < 0)
			goto out;
		k1 = 0;
		if (t->run(t->ctx, &scratch, &k1, 1) < 0)
			goto out;
	}

	size_t ka = 0, kb = 0;
	for (int r = 0; r < BENCH_ROUNDS; r++) {
		size_t n = bench_share(runs, r);
		int ok = (r % 2 == 0) ? (bench_provision_side(e, spec, total, prov, dest, &ka, n) == 0 &&
		                         t->run(t->ctx, other, &kb, n) == 0)
		                      : (t->run(t->ctx, other, &kb, n) == 0 &&
		                         bench_provision_side(e, spec, total, prov, dest, &ka, n) == 0);
		if (!ok)
			goto out;
	}

	bench_stat s_total = bench_stats(total, runs);
	bench_stat s_other = bench_stats(other, runs);
	bench_stat s_prov = bench_stats(prov, runs);
	bench_stat s_dest = bench_stats(dest, runs);
	char ours[64];
	snprintf(ours, sizeof(ours), "%s provision + destroy", name);
	printf("provision latency, %zu runs each, %d interleaved rounds:\n", runs, BENCH_ROUNDS);
	bench_print_pair(ours, s_total, t->label, s_other);
	printf("  %-34s p50 %8.3f ms   p99 %8.3f ms\n", "  of which provision alone", s_prov.p50_ms,
	       s_prov.p99_ms);
	printf("  %-34s p50 %8.3f ms   p99 %8.3f ms\n", "  of which destroy alone", s_dest.p50_ms,
	       s_dest.p99_ms);
	bench_print_aim(t, s_total, s_other);
	rc = 0;
out:
	free(total);
	free(prov);
	free(dest);
	free(other);
	return rc;
}

/* /bin/true in one live sandbox (ours: name), execs times, beside t. */
static inline int bench_execute_all(airlock_exec *e, const airlock_environment_spec *spec,
                                    size_t execs, const char *name, const bench_theirs *t)
{
	int rc = -1;
	int64_t *ours = calloc(execs, sizeof(int64_t));
	int64_t *other = calloc(execs, sizeof(int64_t));
	airlock_environment_handle h;
	bool live = false;
	int64_t scratch = 0;
	if (!ours || !other) {
		fprintf(stderr, "%s: out of memory\n", bench_prog);
		goto out;
	}
	if (bench_provision(e, spec, &h, &scratch) < 0)
		goto out;
	live = true;
	for (int i = 0; i < BENCH_WARMUP; i++) {
		size_t k1 = 0;
		if (bench_execute(e, &h, &scratch) < 0 || t->run(t->ctx, &scratch, &k1, 1) < 0)
			goto out;
	}

	size_t ka = 0, kb = 0;
	for (int r = 0; r < BENCH_ROUNDS; r++) {
		size_t n = bench_share(execs, r);
		if (r % 2 == 1 && t->run(t->ctx, other, &kb, n) < 0)
			goto out;
		for (size_t i = 0; i < n; i++, ka++)
			if (bench_execute(e, &h, &ours[ka]) < 0)
				goto out;
		if (r % 2 == 0 && t->run(t->ctx, other, &kb, n) < 0)
			goto out;
	}

	bench_stat s_ours = bench_stats(ours, execs);
	bench_stat s_other = bench_stats(other, execs);
	char label[64];
	snprintf(label, sizeof(label), "%s execute /bin/true", name);
	printf("execute overhead, %zu runs each in one live sandbox, %d interleaved rounds:\n", execs,
	       BENCH_ROUNDS);
	bench_print_pair(label, s_ours, t->label, s_other);
	bench_print_aim(t, s_ours, s_other);
	rc = 0;
out:
	if (live) {
		int64_t d = 0;
		if (bench_destroy(e, &h, &d) < 0)
			rc = -1;
	}
	free(ours);
	free(other);
	return rc;
}

/* A count argument between min and BENCH_RUNS_MAX; -1 (usage said) when
 * s is not one. */
static inline long bench_parse(const char *s, long min, const char *usage)
{
	char *end = NULL;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || !end || *end || v < min || v > BENCH_RUNS_MAX) {
		fprintf(stderr, "usage: %s %s   (each %ld..%ld)\n", bench_prog, usage, min, BENCH_RUNS_MAX);
		return -1;
	}
	return v;
}

#endif
