/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cost of files_changed beside the cheapest thing it could be compared
 * with, measured side by side in one process on one tree:
 *
 *   listing  what the service does around a command that changed one file
 *            of a 10,000-file workspace: the walk before, the walk after,
 *            the diff, and hashing the one change (snapshot_walk,
 *            snapshot_diff, snapshot_hash_fd);
 *   kept     the same when the walk after the previous command stands in
 *            for the walk before (the native mechanism does so while a
 *            fanotify mark saw no write in between): one walk, the diff
 *            and the hash;
 *   nftw     one walk of the same tree with nftw(FTW_PHYS), which lstat()s
 *            every entry as the service's walk does, visiting each and
 *            keeping nothing: the floor of "look at every file once".
 *
 * The two are interleaved in rounds (the side that goes first alternates),
 * so a burst of noise on the machine lands on both sides alike. Between
 * rounds one file's content changes (not timed). The program prints the
 * machine's nproc and load average, p50 and p99 of each side and their
 * ratio, and asserts no time. Every listing is checked: exactly the one
 * file, MODIFIED, with the digest of what was written; a wrong listing is
 * an error, never a figure.
 *
 *   bench_files_changed [files [rounds]]   (default 10000 files, 200 rounds)
 *   bench_files_changed --short             (1000 files, 5 rounds: the test)
 *
 * The tree lives in a fresh directory under $TMPDIR (default /tmp), 100
 * files per directory, and is removed at the end.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/snapshot.h"
#include "util/util.h"

#include "bench_util.h"

#define BENCH_FILES_DEFAULT 10000
#define BENCH_ROUNDS_DEFAULT 200
#define BENCH_FILES_MAX 1000000L
#define BENCH_ROUNDS_MAX 100000L
#define BENCH_PER_DIR 100
#define BENCH_WARMUP 3

static long arg_count(const char *s, long max, const char *what)
{
	char *end = NULL;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || !end || *end || v < 1 || v > max) {
		fprintf(stderr, "bench_files_changed: %s must be 1..%ld, got '%s'\n", what, max, s);
		exit(64);
	}
	return v;
}

static void die(const char *what)
{
	fprintf(stderr, "bench_files_changed: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void write_at(int dfd, const char *name, const char *data)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		die(name);
	size_t n = strlen(data);
	if (write(fd, data, n) != (ssize_t)n)
		die("write");
	close(fd);
}

static void make_tree(const char *root, long files)
{
	int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		die(root);
	char name[64], data[64];
	for (long i = 0; i < files; i++) {
		char dir[32];
		snprintf(dir, sizeof(dir), "d%03ld", i / BENCH_PER_DIR);
		if (i % BENCH_PER_DIR == 0 && mkdirat(rfd, dir, 0755) < 0)
			die("mkdir");
		snprintf(name, sizeof(name), "%s/file-%06ld.txt", dir, i);
		snprintf(data, sizeof(data), "content of file %ld\n", i);
		write_at(rfd, name, data);
	}
	close(rfd);
}

static long nftw_seen;

static int nftw_visit(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)path, (void)st, (void)f;
	if (flag != FTW_D && flag != FTW_DP)
		nftw_seen++;
	return 0;
}

static int rm_visit(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)f;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* The service's work around one command: walk, (the command), walk, diff.
 * With kept, the walk before is the one kept from the last call. */
static int64_t listing_once(int rfd, long files, const char *changed, airlock_snapshot *kept)
{
	airlock_error err = { 0 };
	airlock_snapshot before = { 0 }, after = { 0 };
	airlock_execution_result r = { 0 };
	int64_t t0 = bench_now_ns();
	if (kept && kept->n) {
		before = *kept;
		*kept = (airlock_snapshot){ 0 };
	} else if (snapshot_walk(rfd, (size_t)files + 16, AIRLOCK_SNAPSHOT_PATH_BYTES_MAX,
	                                 &before, &err) < 0) {
		fprintf(stderr, "bench_files_changed: walk: %s\n", err.message);
		exit(1);
	}
	int64_t t_before = bench_now_ns() - t0;
	/* The command: one file's content changes (not timed). */
	char data[96];
	snprintf(data, sizeof(data), "changed at %lld\n", (long long)t0);
	write_at(rfd, changed, data);
	char hex[65];
	util_sha256_hex(data, strlen(data), hex);
	/* The service's own context for the hash: the root, and no CPU bound
	 * (the bench measures the listing's whole cost). */
	snapshot_hash_root hr = { .fd = rfd };
	int64_t t1 = bench_now_ns();
	if (snapshot_walk(rfd, (size_t)files + 16, AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &after,
	                          &err) < 0 ||
	    snapshot_diff(&before, &after, 1000, UINT64_MAX,
	                          util_monotonic_ms() + AIRLOCK_SNAPSHOT_HASH_MS,
	                          snapshot_hash_fd, &hr, &r, &err) < 0) {
		fprintf(stderr, "bench_files_changed: walk/diff: %s\n", err.message);
		exit(1);
	}
	int64_t t_after = bench_now_ns() - t1;
	if (before.n != (size_t)files || after.n != (size_t)files || r.n_files_changed != 1 ||
	    r.files_changed_truncated || strcmp(r.files_changed[0].path, changed) != 0 ||
	    r.files_changed[0].change != AIRLOCK_CHANGE_MODIFIED ||
	    strcmp(r.files_changed[0].sha256, hex) != 0) {
		fprintf(stderr,
		        "bench_files_changed: wrong listing: %zu/%zu entries, %zu changes (%s)\n",
		        before.n, after.n, r.n_files_changed,
		        r.n_files_changed ? r.files_changed[0].path : "none");
		exit(1);
	}
	airlock_execution_result_clear(&r);
	snapshot_clear(&before);
	if (kept)
		*kept = after;
	else
		snapshot_clear(&after);
	return t_before + t_after;
}

static int64_t nftw_once(const char *root, long files)
{
	nftw_seen = 0;
	int64_t t0 = bench_now_ns();
	if (nftw(root, nftw_visit, 64, FTW_PHYS) != 0)
		die("nftw");
	int64_t t = bench_now_ns() - t0;
	if (nftw_seen != files) {
		fprintf(stderr, "bench_files_changed: nftw saw %ld files of %ld\n", nftw_seen, files);
		exit(1);
	}
	return t;
}

int main(int argc, char **argv)
{
	long files = BENCH_FILES_DEFAULT, rounds = BENCH_ROUNDS_DEFAULT;
	if (argc > 1 && strcmp(argv[1], "--short") == 0) {
		files = 1000;
		rounds = 5;
	} else {
		if (argc > 1)
			files = arg_count(argv[1], BENCH_FILES_MAX, "files");
		if (argc > 2)
			rounds = arg_count(argv[2], BENCH_ROUNDS_MAX, "rounds");
	}
	const char *tmp = getenv("TMPDIR");
	char root[512];
	snprintf(root, sizeof(root), "%s/airlock-bench-fc-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root))
		die("mkdtemp");
	double load[3] = { -1, -1, -1 };
	if (getloadavg(load, 3) != 3)
		load[0] = load[1] = load[2] = -1;
	printf("bench_files_changed: nproc %ld, load average %.2f %.2f %.2f; %ld files in %s, "
	       "%ld rounds\n",
	       sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2], files, root, rounds);
	fflush(stdout);
	make_tree(root, files);
	int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		die(root);
	char changed[64];
	snprintf(changed, sizeof(changed), "d%03ld/file-%06ld.txt", (files / 2) / BENCH_PER_DIR,
	         files / 2);

	int64_t *ls = calloc((size_t)rounds, sizeof(*ls)), *nf = calloc((size_t)rounds, sizeof(*nf));
	int64_t *kp = calloc((size_t)rounds, sizeof(*kp));
	if (!ls || !nf || !kp)
		die("calloc");
	airlock_snapshot kept = { 0 };
	for (int i = 0; i < BENCH_WARMUP; i++) {
		listing_once(rfd, files, changed, NULL);
		listing_once(rfd, files, changed, &kept);
		nftw_once(root, files);
	}
	/* The order of the three rotates each round. */
	for (long i = 0; i < rounds; i++) {
		for (int k = 0; k < 3; k++) {
			switch ((i + k) % 3) {
			case 0: ls[i] = listing_once(rfd, files, changed, NULL); break;
			case 1: kp[i] = listing_once(rfd, files, changed, &kept); break;
			default: nf[i] = nftw_once(root, files); break;
			}
		}
	}
	snapshot_clear(&kept);
	double ls50 = bench_ms(bench_pct(ls, (size_t)rounds, 50));
	double ls99 = bench_ms(bench_pct(ls, (size_t)rounds, 99));
	double nf50 = bench_ms(bench_pct(nf, (size_t)rounds, 50));
	double nf99 = bench_ms(bench_pct(nf, (size_t)rounds, 99));
	double kp50 = bench_ms(bench_pct(kp, (size_t)rounds, 50));
	double kp99 = bench_ms(bench_pct(kp, (size_t)rounds, 99));
	printf("listing (walk + walk + diff + hash of one change): p50 %.2f ms, p99 %.2f ms\n", ls50,
	       ls99);
	printf("kept (walk kept + walk + diff + hash):              p50 %.2f ms, p99 %.2f ms\n", kp50,
	       kp99);
	printf("nftw (one walk, lstat of each):                    p50 %.2f ms, p99 %.2f ms\n", nf50,
	       nf99);
	printf("ratio listing/nftw: p50 %.2f, p99 %.2f; kept/nftw: p50 %.2f, p99 %.2f\n", ls50 / nf50,
	       ls99 / nf99, kp50 / nf50, kp99 / nf99);
	if (getloadavg(load, 3) == 3)
		printf("bench_files_changed: load average at the end %.2f %.2f %.2f\n", load[0],
		       load[1], load[2]);
	close(rfd);
	free(ls);
	free(nf);
	free(kp);
	if (nftw(root, rm_visit, 64, FTW_PHYS | FTW_DEPTH) != 0)
		die("removing the tree");
	return 0;
}
