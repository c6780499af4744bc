/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The filesystem artifact store's put beside `openssl dgst -sha256` of the
 * same file (issue 21, "Measure": aim at least 0.8x of openssl's
 * throughput, and the worker's peak RSS flat within 16 MiB from the
 * smallest size to the largest).
 *
 * For each size a file of pseudo-random bytes is written under a fresh
 * directory in /var/tmp (a disk, not the tmpfs /tmp may be), then:
 *
 *   openssl  `openssl dgst -sha256 FILE`, once to warm the page cache and
 *            once timed (the process's start is in its time; at 16 MiB and
 *            up it is noise);
 *   put      a child process (one per size, so each peak RSS is its own:
 *            wait4's ru_maxrss) opens the store and puts the file through
 *            airlock_artifact_put_begin/write/seal/commit from a read()
 *            loop of AIRLOCK_ARTIFACT_STREAM_BUF_BYTES, with openssl's
 *            digest as the expected one: the comparison is part of the
 *            run, and a put whose digest differed would fail it. Its time
 *            is split into write (read + SHA-256 + write), seal (fsync and
 *            the digest) and commit (rename and the directory's fsync).
 *
 * The ratio is openssl's time over put's whole time (put throughput as a
 * fraction of openssl's). put also writes and fsyncs the bytes, which
 * openssl does not: the write-phase ratio says what the hashing path
 * costs without the disk's flush; and the same child then copies the
 * same bytes through the same buffer into the same file system and fsyncs
 * them (no hash, no store): put over copy says what the store adds to the
 * disk's own cost. A child that opens the store and puts nothing gives the
 * RSS floor.
 *
 *   bench_artifact_put            16 MiB, 256 MiB, 1 GiB
 *   bench_artifact_put --short    1 MiB and 8 MiB (the test suite's run)
 *
 * The same files are then uploaded through the real airlock-worker
 * (POST /v1/artifacts, auth_mode dev, its state and store under the same
 * directory), the body sent with sendfile and the worker's digest checked
 * against openssl's by the header it must match; after each size the
 * worker's own peak RSS (VmHWM) is read, the figure the aim names:
 * flat from the smallest size to the largest means the worker streams.
 * AIRLOCK_BENCH_WORKER names the program (default: the one built beside
 * this benchmark); without it that part is skipped and said.
 *
 * Without openssl it exits 77 (a visible skip). Everything it wrote is
 * removed at the end, also on failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/ids.h"
#include "airlock/port/artifact.h"

#include "bench_util.h"
#include "bench_worker_proc.h"

extern char **environ;

static char g_base[4096];
static char g_root[4200];

typedef struct put_times {
	int64_t write_ns, seal_ns, commit_ns;
	int64_t copy_ns; /* the same bytes copied and fsync'd, no hash, no store */
} put_times;

static void cleanup(void)
{
	if (!g_base[0])
		return;
	char *argv[] = { "rm", "-rf", "--one-file-system", g_base, NULL };
	pid_t pid;
	if (posix_spawnp(&pid, "rm", NULL, NULL, argv, environ) == 0)
		waitpid(pid, NULL, 0);
}

static void die(const char *what)
{
	fprintf(stderr, "bench_artifact_put: %s\n", what);
	cleanup();
	exit(1);
}

/* size bytes of xorshift output: incompressible, and cheap to make. */
static void make_file(const char *path, int64_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		die("create the source file");
	static uint64_t buf[1 << 17]; /* 1 MiB */
	uint64_t st = 0x9e3779b97f4a7c15ull ^ (uint64_t)size;
	for (int64_t left = size; left > 0;) {
		for (size_t i = 0; i < sizeof(buf) / sizeof(*buf); i++) {
			st ^= st << 13;
			st ^= st >> 7;
			st ^= st << 17;
			buf[i] = st;
		}
		size_t n = left < (int64_t)sizeof(buf) ? (size_t)left : sizeof(buf);
		if (write(fd, buf, n) != (ssize_t)n)
			die("write the source file");
		left -= (int64_t)n;
	}
	/* On disk before anything is timed: dirty pages of this file being
	 * written back during the put would throttle the put's own writes
	 * (measured: 1 GiB put at a third of its speed). */
	if (fsync(fd) < 0)
		die("fsync the source file");
	close(fd);
}

/* openssl dgst -sha256 path: its digest in out, its wall time. */
static int64_t openssl_sha(const char *path, char out[65])
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe");
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	char *argv[] = { "openssl", "dgst", "-sha256", (char *)path, NULL };
	pid_t pid;
	int64_t t0 = bench_now_ns();
	if (posix_spawnp(&pid, "openssl", &fa, NULL, argv, environ) != 0)
		die("spawn openssl");
	close(p[1]);
	char line[8192];
	size_t have = 0;
	ssize_t n;
	while ((n = read(p[0], line + have, sizeof(line) - 1 - have)) > 0)
		have += (size_t)n;
	int status = 0;
	waitpid(pid, &status, 0);
	int64_t t = bench_now_ns() - t0;
	close(p[0]);
	posix_spawn_file_actions_destroy(&fa);
	line[have] = 0;
	/* "SHA2-256(path)= <hex>" (3.x) or "SHA256(path)= <hex>". */
	char *eq = strstr(line, "= ");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !eq || strlen(eq + 2) < 64)
		die("openssl dgst failed");
	memcpy(out, eq + 2, 64);
	out[64] = 0;
	return t;
}

/* The same read/write loop through the same buffer into the same file
 * system, and fsync: no hash, no store. Its time, or -1. */
static int64_t copy_fsync(int fd, unsigned char *buf)
{
	char copy[4300];
	snprintf(copy, sizeof(copy), "%s/copy", g_base);
	int out = open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0 || lseek(fd, 0, SEEK_SET) < 0)
		return -1;
	int64_t c0 = bench_now_ns();
	for (;;) {
		ssize_t n = read(fd, buf, AIRLOCK_ARTIFACT_STREAM_BUF_BYTES);
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		if (write(out, buf, (size_t)n) != n)
			return -1;
	}
	if (fsync(out) < 0)
		return -1;
	int64_t t = bench_now_ns() - c0;
	close(out);
	unlink(copy);
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -1;
	return t;
}

/* In the child: the put, its phases' times written to wfd. */
static int child_put(const char *path, int64_t size, const char *sha, int wfd)
{
	airlock_error e = { 0 };
	airlock_artifact_store *s = NULL;
	if (airlock_artifact_store_fs_open(g_root, &s, &e) < 0) {
		fprintf(stderr, "%s\n", e.message);
		return 1;
	}
	put_times t = { 0 };
	if (size > 0) {
		char id[AIRLOCK_UUID_STR_LEN + 1];
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		unsigned char *buf = malloc(AIRLOCK_ARTIFACT_STREAM_BUF_BYTES);
		airlock_artifact_put *p = NULL;
		if (fd < 0 || !buf || airlock_uuidv7_new(id, &e) < 0)
			return 1;
		/* Untimed: on this machine (a VM) the first write of a size's
		 * worth of new page cache runs at a fifth of the speed of the
		 * next (measured with dd: 4.5 s, then 1.1 s for 1 GiB): memory
		 * the guest has not touched yet. Whichever side ran first would
		 * pay it. */
		if (copy_fsync(fd, buf) < 0)
			return 1;
		int64_t t0 = bench_now_ns();
		if (airlock_artifact_put_begin(s, "bench", id, size, &p, &e) < 0) {
			fprintf(stderr, "%s\n", e.message);
			return 1;
		}
		for (;;) {
			ssize_t n = read(fd, buf, AIRLOCK_ARTIFACT_STREAM_BUF_BYTES);
			if (n < 0)
				return 1;
			if (n == 0)
				break;
			if (airlock_artifact_put_write(p, buf, (size_t)n, &e) < 0) {
				fprintf(stderr, "%s\n", e.message);
				return 1;
			}
		}
		int64_t t1 = bench_now_ns();
		int64_t got = 0;
		if (airlock_artifact_put_seal(p, sha, NULL, &got, &e) < 0 || got != size) {
			fprintf(stderr, "seal: %s\n", e.message);
			return 1;
		}
		int64_t t2 = bench_now_ns();
		if (airlock_artifact_put_commit(p, &e) < 0) {
			fprintf(stderr, "%s\n", e.message);
			return 1;
		}
		int64_t t3 = bench_now_ns();
		airlock_artifact_put_free(p);
		t = (put_times){ t1 - t0, t2 - t1, t3 - t2, 0 };
		if (airlock_artifact_store_remove(s, "bench", id, &e) < 0)
			return 1;
		/* The floor of any put to this disk (see copy_fsync). */
		t.copy_ns = copy_fsync(fd, buf);
		if (t.copy_ns < 0)
			return 1;
		free(buf);
		close(fd);
	}
	airlock_artifact_store_free(s);
	return write(wfd, &t, sizeof(t)) == (ssize_t)sizeof(t) ? 0 : 1;
}

/* A child per run: its times, and its peak RSS in KiB. */
static put_times run_put(const char *path, int64_t size, const char *sha, long *ret_rss_kib)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(p[0]);
		_exit(child_put(path, size, sha, p[1]));
	}
	close(p[1]);
	put_times t = { 0 };
	ssize_t n = read(p[0], &t, sizeof(t));
	close(p[0]);
	int status = 0;
	struct rusage ru;
	if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
	    n != (ssize_t)sizeof(t))
		die("the put failed (see above)");
	*ret_rss_kib = ru.ru_maxrss;
	return t;
}

/* The worker's peak RSS in KiB (VmHWM), or -1. */
static long worker_hwm_kib(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	long kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

/* path (size bytes, digest sha) uploaded to the worker on sock: its wall
 * time, or -1 (said). */
static int64_t worker_upload(const char *sock, const char *path, int64_t size, const char *sha)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int c = fd < 0 ? -1 : unix_connect(sock);
	int64_t t = -1;
	char head[512], buf[8192];
	int n = snprintf(head, sizeof(head),
	                 "POST /v1/artifacts?filename=f.bin HTTP/1.1\r\nHost: airlock\r\n"
	                 "Airlock-Content-SHA256: %s\r\nContent-Length: %lld\r\n\r\n",
	                 sha, (long long)size);
	int64_t t0 = bench_now_ns();
	if (c >= 0 && util_write_all(c, head, (size_t)n) == 0) {
		off_t off = 0;
		while (off < size) {
			ssize_t k = sendfile(c, fd, &off, (size_t)(size - off));
			if (k <= 0 && errno != EINTR)
				break;
		}
		int status = 0;
		const char *body = NULL;
		bool closing = false;
		const char *why = off == size ? bw_read_answer(c, buf, sizeof(buf), &status, &body,
		                                               &closing)
		                              : "the body could not be sent";
		if (!why && status == 201 && strstr(body, sha))
			t = bench_now_ns() - t0;
		else
			fprintf(stderr, "bench_artifact_put: upload: %s %d %.200s\n", why ? why : "",
			        status, body ? body : "");
	}
	if (c >= 0)
		close(c);
	if (fd >= 0)
		close(fd);
	return t;
}

static double mib_s(int64_t bytes, int64_t ns)
{
	return ns > 0 ? (double)bytes / (1 << 20) / ((double)ns / 1e9) : 0;
}

int main(int argc, char **argv)
{
	const int64_t full[] = { 16ll << 20, 256ll << 20, 1ll << 30 };
	const int64_t shorter[] = { 1ll << 20, 8ll << 20 };
	bool is_short = argc > 1 && strcmp(argv[1], "--short") == 0;
	if (argc > 2 || (argc == 2 && !is_short)) {
		fprintf(stderr, "usage: bench_artifact_put [--short]\n");
		return 2;
	}
	const int64_t *sizes = is_short ? shorter : full;
	size_t nsizes = is_short ? 2 : 3;
	if (access("/usr/bin/openssl", X_OK) != 0 && access("/bin/openssl", X_OK) != 0) {
		printf("SKIP: no openssl program to compare with\n");
		return 77;
	}
	snprintf(g_base, sizeof(g_base), "/var/tmp/airlock-bench-artifact-XXXXXX");
	if (!mkdtemp(g_base)) {
		g_base[0] = 0;
		die("mkdtemp under /var/tmp");
	}
	snprintf(g_root, sizeof(g_root), "%s/store", g_base);
	if (mkdir(g_root, 0700) < 0)
		die("mkdir the store");
	long nproc = sysconf(_SC_NPROCESSORS_ONLN);
	double load[1] = { 0 };
	getloadavg(load, 1);
	printf("bench_artifact_put: fs store under /var/tmp, buffer %zu KiB, nproc %ld, load %.2f\n",
	       AIRLOCK_ARTIFACT_STREAM_BUF_BYTES >> 10, nproc, load[0]);
	long floor_kib = 0;
	run_put(NULL, 0, NULL, &floor_kib);
	printf("peak RSS of a child that opens the store and puts nothing: %.1f MiB\n",
	       (double)floor_kib / 1024);
	printf("%10s %12s %12s %7s %14s %12s %12s %10s\n", "size", "openssl", "put", "ratio",
	       "write phase", "seal", "commit", "peak RSS");
	/* The worker, for the same files through its API. */
	bw_prog = "bench_artifact_put";
	char wprog_buf[PATH_MAX + 32], wsock[4300], wconf[4300], wlog[4300], wtext[9000];
	const char *wprog = bw_program("AIRLOCK_BENCH_WORKER", "airlock-worker", wprog_buf,
	                               sizeof(wprog_buf));
	snprintf(wsock, sizeof(wsock), "%s/w.sock", g_base);
	snprintf(wconf, sizeof(wconf), "%s/airlock.yaml", g_base);
	snprintf(wlog, sizeof(wlog), "%s.worker.log", g_base);
	snprintf(wtext, sizeof(wtext),
	         "worker:\n  listen: unix:%s\n  state_dir: %s\n  auth_mode: dev\n"
	         "  artifact_size_max: 2147483648\n  artifact_tenant_bytes_max: 8589934592\n",
	         wsock, g_base);
	char *wargv[] = { "airlock-worker", "--config", wconf, NULL };
	pid_t worker = -1;
	if (wprog && access(wprog, X_OK) == 0 && bw_write_file(wconf, wtext) == 0)
		worker = bw_start(wprog, wargv, wlog, wsock);
	if (worker < 0)
		printf("no airlock-worker to upload through (AIRLOCK_BENCH_WORKER): that part is "
		       "skipped\n");
	long hwm_first = -1, hwm_last = -1;
	long rss_min = -1, rss_max = 0;
	for (size_t i = 0; i < nsizes; i++) {
		char path[4200];
		snprintf(path, sizeof(path), "%s/src-%zu", g_base, i);
		make_file(path, sizes[i]);
		char sha[65];
		openssl_sha(path, sha); /* warm the page cache */
		int64_t ossl = openssl_sha(path, sha);
		long rss = 0;
		put_times t = run_put(path, sizes[i], sha, &rss);
		int64_t whole = t.write_ns + t.seal_ns + t.commit_ns;
		printf("%7lld MiB %8.0f MiB/s %8.0f MiB/s %6.2fx %8.0f MiB/s %9.1f ms %9.1f ms %6.1f MiB\n",
		       (long long)(sizes[i] >> 20), mib_s(sizes[i], ossl), mib_s(sizes[i], whole),
		       (double)ossl / (double)whole, mib_s(sizes[i], t.write_ns), bench_ms(t.seal_ns),
		       bench_ms(t.commit_ns), (double)rss / 1024);
		printf("%10s write-phase ratio to openssl %.2fx; a plain copy+fsync to the same disk "
		       "%.0f MiB/s, put/copy %.2fx\n",
		       "", (double)ossl / (double)t.write_ns, mib_s(sizes[i], t.copy_ns),
		       (double)t.copy_ns / (double)whole);
		rss_min = rss_min < 0 || rss < rss_min ? rss : rss_min;
		rss_max = rss > rss_max ? rss : rss_max;
		if (worker > 0) {
			int64_t up = worker_upload(wsock, path, sizes[i], sha);
			long hwm = worker_hwm_kib(worker);
			if (up < 0 || hwm < 0) {
				bw_stop(worker, SIGKILL);
				die("the upload through the worker failed");
			}
			if (hwm_first < 0)
				hwm_first = hwm;
			hwm_last = hwm;
			printf("%10s through the worker's API: %.0f MiB/s, the worker's peak RSS "
			       "so far %.1f MiB\n",
			       "", mib_s(sizes[i], up), (double)hwm / 1024);
		}
		unlink(path);
	}
	printf("peak RSS from the smallest to the largest: +%.1f MiB (aim: within 16 MiB)\n",
	       (double)(rss_max - rss_min) / 1024);
	if (worker > 0) {
		printf("the worker's peak RSS after the smallest upload %.1f MiB, after the largest "
		       "%.1f MiB: +%.1f MiB (aim: within 16 MiB)\n",
		       (double)hwm_first / 1024, (double)hwm_last / 1024,
		       (double)(hwm_last - hwm_first) / 1024);
		if (!bw_stop_clean(worker, "airlock-worker"))
			die("the worker did not stop cleanly");
		unlink(wlog);
	}
	cleanup();
	return 0;
}
