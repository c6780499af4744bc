/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Throughput of the containment function on deep paths that exist, beside
 * the cheapest thing it could be compared with: a plain openat(O_PATH) of the
 * same path, which checks nothing. Both run the same bounded number of
 * iterations in one process; the ratio says what containment costs.
 *
 *   bench_resolve [iterations]     (default 200000 per measurement, in
 *                                   5 alternating rounds; best round kept)
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "airlock/port/workspace.h"

#define BENCH_DEPTH_MAX 64
#define BENCH_ITER_DEFAULT 200000
#define BENCH_ITER_MAX 100000000L
#define BENCH_ROUNDS 5

static double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int bench_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p) < 0 ? -1 : 0;
}

/* "d00/d01/..." with depth components; out must hold 4 * depth bytes. */
static void bench_path(char *out, int depth)
{
	size_t len = 0;
	for (int i = 0; i < depth; i++)
		len += (size_t)sprintf(out + len, "%sd%02d", i ? "/" : "", i);
}

static int bench_one(airlock_workspace *ws, int dfd, int depth, long iters)
{
	char path[BENCH_DEPTH_MAX * 4 + 1];
	bench_path(path, depth);
	size_t len = strlen(path);

	/* Warm the dentry cache for both sides equally. */
	for (int i = 0; i < 1000; i++) {
		int fd = openat(dfd, path, O_PATH | O_CLOEXEC);
		if (fd < 0) {
			perror("openat");
			return -1;
		}
		close(fd);
	}

	/* Alternate the three measurements over a few rounds and keep each
	 * one's best round, so a burst of noise on the machine hits one round of
	 * one side rather than skewing the ratio. */
	double t_resolve = 1e30, t_open = 1e30, t_string = 1e30;
	long per = iters / BENCH_ROUNDS > 0 ? iters / BENCH_ROUNDS : 1;
	for (int round = 0; round < BENCH_ROUNDS; round++) {
		double t0 = bench_now();
		for (long i = 0; i < per; i++) {
			char *out = NULL;
			airlock_error e;
			if (airlock_workspace_resolve(ws, path, len, &out, &e) < 0) {
				fprintf(stderr, "resolve: %s\n", e.message);
				return -1;
			}
			free(out);
		}
		double t = bench_now() - t0;
		t_resolve = t < t_resolve ? t : t_resolve;

		t0 = bench_now();
		for (long i = 0; i < per; i++) {
			int fd = openat(dfd, path, O_PATH | O_CLOEXEC);
			if (fd < 0) {
				perror("openat");
				return -1;
			}
			close(fd);
		}
		t = bench_now() - t0;
		t_open = t < t_open ? t : t_open;

		t0 = bench_now();
		for (long i = 0; i < per; i++) {
			if (airlock_workspace_check_string(path, len, NULL, NULL) < 0)
				return -1;
		}
		t = bench_now() - t0;
		t_string = t < t_string ? t : t_string;
	}
	iters = per;

	double r_resolve = (double)iters / t_resolve;
	double r_open = (double)iters / t_open;
	double r_string = (double)iters / t_string;
	printf("depth %2d (%3zu bytes): resolve %10.0f calls/s | openat(O_PATH) %10.0f calls/s | "
	       "ratio %.2f | string rules alone %11.0f calls/s\n",
	       depth, len, r_resolve, r_open, r_open / r_resolve, r_string);
	return 0;
}

int main(int argc, char **argv)
{
	long iters = BENCH_ITER_DEFAULT;
	if (argc > 1) {
		iters = strtol(argv[1], NULL, 10);
		if (iters <= 0 || iters > BENCH_ITER_MAX) {
			fprintf(stderr, "usage: %s [iterations 1..%ld]\n", argv[0], BENCH_ITER_MAX);
			return 2;
		}
	}

	char root[] = "/tmp/airlock-bench-XXXXXX";
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	int rc = 1;
	airlock_workspace *ws = NULL;
	int dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		perror("open");
		goto out;
	}
	char path[BENCH_DEPTH_MAX * 4 + 1];
	for (int d = 1; d <= BENCH_DEPTH_MAX; d++) {
		bench_path(path, d);
		if (mkdirat(dfd, path, 0755) < 0) {
			perror("mkdirat");
			goto out;
		}
	}
	int wfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	airlock_error e = { 0 };
	if (wfd < 0 || airlock_workspace_local_new(wfd, AIRLOCK_PROVENANCE_UNKNOWN, &ws, &e) < 0) {
		fprintf(stderr, "workspace: %s\n", e.message);
		goto out;
	}

	printf("bench_resolve: %ld iterations per measurement, split in %d rounds (best kept), local "
	       "workspace, existing directories\n",
	       iters, BENCH_ROUNDS);
	if (bench_one(ws, dfd, 16, iters) < 0 || bench_one(ws, dfd, 64, iters) < 0)
		goto out;
	rc = 0;
out:
	airlock_workspace_free(ws);
	if (dfd >= 0)
		close(dfd);
	nftw(root, bench_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	return rc;
}
