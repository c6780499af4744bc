/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An export's transport beside a plain copy (issue 21's aim: an export of
 * 256 MiB from a sandbox into the store through service and worker at
 * least 0.5x a plain `cp` of the same bytes).
 *
 *   export  a file a native sandbox wrote in its workspace, streamed by the
 *           service (an airlock_service in this process on a Unix socket,
 *           what `airlock serve` runs) through the remote adapter
 *           (airlock_workspace_read_stream: the service's SHA-256 in the
 *           trailer compared with the client's own) into a sink that writes
 *           a file and fsyncs it;
 *   store   the same stream into the artifact store (the fs adapter): a put,
 *           sealed at its end, the store's SHA-256 of what it received
 *           compared with the service's by the stream wrapper (one hash on
 *           the receiving side: airlock_workspace_read_stream_hashed),
 *           committed (fsync, rename, directory fsync), as artifact.export
 *           does less its database row;
 *   cp      /bin/cp of the same bytes (a host copy of the file, exported
 *           once before the rounds) to the same directory, then an fsync
 *           of the copy.
 *
 * Both read from the page cache (the sandbox's file was just written; the
 * host copy was just made) and write to the same directory. The sides
 * alternate in interleaved rounds; it prints each side's median time and
 * MB/s and the ratio (cp's time over the export's: the export's share of
 * cp's throughput), asserts no time, and exits non-zero when any call
 * failed. Without root, the native mechanism or the default image it
 * exits 77 with the reason.
 *
 *   bench_export [MiB [rounds]]   (default 256, 5)
 *   bench_export --short          (16 MiB, 1 round: the suite's check)
 *
 * AIRLOCK_BENCH_IMAGE_STORE names a store other than /var/lib/airlock/images;
 * AIRLOCK_BENCH_DIR the directory both sides write into (default /var/tmp).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/ids.h"
#include "airlock/native.h"
#include "airlock/port/artifact.h"
#include "airlock/port/workspace.h"
#include "airlock/remote.h"
#include "airlock/service.h"

#include "bench_sandbox.h"

#define CREDENTIAL "bench-export-credential-3b8e1f6a0c4d7259"
#define EXPORT_MIB_DEFAULT 256
#define EXPORT_ROUNDS_DEFAULT 5

typedef struct export_ctx {
	airlock_exec *local, *remote;
	airlock_service *svc;
	airlock_environment_spec spec;
	airlock_environment_handle h;
	bool provisioned;
	airlock_workspace *ws;
	char dir[64], sock[96];
	char out_dir[PATH_MAX];
	uint64_t bytes;
	airlock_artifact_store *store; /* the fs store under out_dir/store */
} export_ctx;

/* The store's stand-in: every piece written as it comes, fsync at the end. */
typedef struct file_sink {
	int fd;
} file_sink;

static int file_sink_take(void *arg, const void *buf, size_t len, airlock_error *err)
{
	file_sink *f = arg;
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(f->fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "bench sink write");
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* One export into path: its wall time, fsync included. */
static int export_once(export_ctx *c, const char *path, int64_t *ret_ns)
{
	int64_t t0 = bench_now_ns();
	file_sink f = { .fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) };
	if (f.fd < 0) {
		fprintf(stderr, "%s: %s: %s\n", bench_prog, path, strerror(errno));
		return -1;
	}
	uint64_t size = 0;
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
	airlock_error err = { 0 };
	int r = airlock_workspace_read_stream(c->ws, "big.bin", c->bytes, file_sink_take, &f, &size,
	                                      hex, &err);
	if (r == 0 && fsync(f.fd) < 0)
		r = airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, errno, "fsync %s", path);
	close(f.fd);
	int64_t t1 = bench_now_ns();
	if (r < 0 || size != c->bytes) {
		fprintf(stderr, "%s: export: %s: %s\n", bench_prog, airlock_errclass_name(err.cls),
		        err.message);
		return -1;
	}
	*ret_ns = t1 - t0;
	return 0;
}

static int store_sink_take(void *arg, const void *buf, size_t len, airlock_error *err)
{
	return airlock_artifact_put_write(arg, buf, len, err);
}

/* The put sealed (fsync, its SHA-256 of what it received), for the stream
 * wrapper to compare with the service's: one hash on this side, as
 * artifact.export does it. */
typedef struct store_sink {
	airlock_artifact_put *put;
	int64_t stored;
} store_sink;

static int store_sink_write(void *arg, const void *buf, size_t len, airlock_error *err)
{
	return store_sink_take(((store_sink *)arg)->put, buf, len, err);
}

static int store_sink_digest(void *arg, char ret[AIRLOCK_SHA256_HEX_LEN + 1], airlock_error *err)
{
	store_sink *k = arg;
	return airlock_artifact_put_seal(k->put, NULL, ret, &k->stored, err);
}

/* One export into the artifact store, as artifact.export does it: the
 * stream into a put, sealed at its end (the store's own SHA-256 of what it
 * received, which the stream wrapper compares with the service's: one hash
 * on this side, airlock_workspace_read_stream_hashed), the commit (fsync,
 * rename, directory fsync); the object removed after the clock stops, so
 * every round makes a new one. */
static int export_store_once(export_ctx *c, int64_t *ret_ns)
{
	char id[AIRLOCK_UUID_STR_LEN + 1], hex[AIRLOCK_SHA256_HEX_LEN + 1];
	airlock_error err = { 0 };
	store_sink k = { 0 };
	uint64_t size = 0;
	int64_t t0 = bench_now_ns();
	int r = airlock_uuidv7_new(id, &err);
	if (r == 0)
		r = airlock_artifact_put_begin(c->store, "bench", id, (int64_t)c->bytes, &k.put, &err);
	if (r == 0)
		r = airlock_workspace_read_stream_hashed(c->ws, "big.bin", c->bytes, store_sink_write,
		                                         store_sink_digest, &k, &size, hex, &err);
	if (r == 0)
		r = airlock_artifact_put_commit(k.put, &err);
	int64_t t1 = bench_now_ns();
	int64_t stored = k.stored;
	airlock_artifact_put_free(k.put);
	if (r == 0)
		r = airlock_artifact_store_remove(c->store, "bench", id, &err);
	if (r < 0 || (uint64_t)stored != c->bytes) {
		fprintf(stderr, "%s: export into the store: %s: %s\n", bench_prog,
		        airlock_errclass_name(err.cls), err.message);
		return -1;
	}
	*ret_ns = t1 - t0;
	return 0;
}

/* cp src dst, then fsync dst: its wall time. */
static int cp_once(char *src, char *dst, int64_t *ret_ns)
{
	char a0[] = "/bin/cp";
	char *argv[] = { a0, src, dst, NULL };
	int64_t spawn_ns = 0, t0 = bench_now_ns();
	if (bench_spawn("/bin/cp", argv, &spawn_ns) < 0)
		return -1;
	int fd = open(dst, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0) {
		fprintf(stderr, "%s: fsync %s: %s\n", bench_prog, dst, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	*ret_ns = bench_now_ns() - t0;
	return 0;
}

static int open_all(export_ctx *c, const char *store_dir, const char *digest)
{
	airlock_error err = { 0 };
	airlock_native_config nc = { .image_store = store_dir, .start_budget_seconds = 30 };
	airlock_native *n = NULL;
	if (airlock_native_new(&nc, &n, &err) < 0 ||
	    airlock_exec_new(airlock_native_ops(), n, NULL, &c->local, &err) < 0)
		goto fail;
	snprintf(c->dir, sizeof(c->dir), "/tmp/airlock-bench-XXXXXX");
	if (!mkdtemp(c->dir)) {
		c->dir[0] = 0;
		perror("bench_export: mkdtemp");
		return -1;
	}
	snprintf(c->sock, sizeof(c->sock), "%s/api.sock", c->dir);
	char listen[128];
	snprintf(listen, sizeof(listen), "unix:%s", c->sock);
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.listen = listen;
	sc.credential = CREDENTIAL;
	sc.credential_len = strlen(CREDENTIAL);
	if (airlock_service_new(&sc, c->local, &c->svc, &err) < 0)
		goto fail;
	airlock_remote_config rc = { .address = listen, .credential = CREDENTIAL,
		                     .credential_len = strlen(CREDENTIAL) };
	airlock_remote *rm = NULL;
	if (airlock_remote_new(&rc, &rm, &err) < 0 ||
	    airlock_exec_new(airlock_remote_ops(), rm, NULL, &c->remote, &err) < 0)
		goto fail;
	if (bench_spec(&c->spec, digest) < 0)
		return -1;
	/* Room for the file and ext4's own blocks; the page cache the write
	 * fills is charged to the sandbox and reclaimable. */
	c->spec.limits.workspace_bytes = (int64_t)c->bytes + (96ll << 20);
	c->spec.limits.memory_bytes = 512ll << 20;
	if (airlock_exec_provision(c->remote, &c->spec, &c->h, &err) < 0)
		goto fail;
	c->provisioned = true;

	char cmdline[128];
	snprintf(cmdline, sizeof(cmdline), "head -c %llu /dev/urandom > big.bin",
	         (unsigned long long)c->bytes);
	char a0[] = "sh", a1[] = "-c", cwd[] = ".";
	char *argv[] = { a0, a1, cmdline, NULL };
	airlock_execution_command cmd = { .argv = argv, .argc = 3, .working_directory = cwd,
		                           .timeout_seconds = 120, .maximum_output_bytes = 1 << 16 };
	airlock_exec_call call = { .tenant_id = c->h.tenant_id,
		                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_execution_result res;
	memset(&res, 0, sizeof(res));
	if (airlock_exec_execute(c->remote, &call, &c->h, &cmd, &res, &err) < 0)
		goto fail;
	bool ok = res.has_exit_code && res.exit_code == 0;
	if (!ok)
		fprintf(stderr, "%s: the sandbox's write: %.*s\n", bench_prog, (int)res.stderr_len,
		        res.stderr_data);
	airlock_execution_result_clear(&res);
	if (!ok)
		return -1;
	if (airlock_exec_workspace(c->remote, &call, &c->h, &c->ws, &err) < 0)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "%s: %s: %s\n", bench_prog, airlock_errclass_name(err.cls), err.message);
	return -1;
}

static void close_all(export_ctx *c)
{
	airlock_workspace_release(c->ws);
	airlock_error err = { 0 };
	if (c->provisioned && airlock_exec_destroy(c->remote, &c->h, &err) < 0)
		fprintf(stderr, "%s: destroy: %s\n", bench_prog, err.message);
	airlock_environment_handle_clear(&c->h);
	airlock_exec_free(c->remote);
	airlock_service_free(c->svc);
	airlock_exec_free(c->local);
	airlock_environment_spec_clear(&c->spec);
	if (c->sock[0])
		unlink(c->sock);
	if (c->dir[0])
		rmdir(c->dir);
}

static void print_side(const char *what, int64_t *v, size_t n, uint64_t bytes)
{
	bench_stat s = bench_stats(v, n);
	printf("  %-46s p50 %9.1f ms  %8.1f MB/s\n", what, s.p50_ms,
	       (double)bytes / 1e6 / (s.p50_ms / 1e3));
}

int main(int argc, char **argv)
{
	bench_prog = "bench_export";
	long mib = EXPORT_MIB_DEFAULT, rounds = EXPORT_ROUNDS_DEFAULT;
	const char *usage = "[MiB [rounds]] | --short";
	if (argc == 2 && strcmp(argv[1], "--short") == 0) {
		mib = 16;
		rounds = 1;
	} else if (argc > 3 || (argc > 1 && (mib = bench_parse(argv[1], 1, usage)) < 0) ||
	           (argc > 2 && (rounds = bench_parse(argv[2], 1, usage)) < 0)) {
		if (argc > 3)
			fprintf(stderr, "usage: %s %s\n", argv[0], usage);
		return 2;
	}
	char why[256];
	if (airlock_native_probe(why, sizeof(why)) < 0) {
		fprintf(stderr, "bench_export: the native mechanism is unavailable here: %s\n", why);
		return BENCH_SKIP;
	}
	const char *store_dir = NULL;
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	int found = bench_default_image(&store_dir, digest);
	if (found != 0)
		return found;

	export_ctx c = { .bytes = (uint64_t)mib << 20 };
	const char *base = getenv("AIRLOCK_BENCH_DIR");
	snprintf(c.out_dir, sizeof(c.out_dir), "%s/airlock-bench-export-XXXXXX",
	         base && *base ? base : "/var/tmp");
	if (!mkdtemp(c.out_dir)) {
		fprintf(stderr, "bench_export: mkdtemp %s: %s\n", c.out_dir, strerror(errno));
		return 1;
	}
	char src[PATH_MAX + 16], dst_export[PATH_MAX + 16], dst_cp[PATH_MAX + 16];
	snprintf(src, sizeof(src), "%s/source", c.out_dir);
	snprintf(dst_export, sizeof(dst_export), "%s/exported", c.out_dir);
	snprintf(dst_cp, sizeof(dst_cp), "%s/copied", c.out_dir);

	int rc = 1;
	int64_t *ex = calloc((size_t)rounds, sizeof(int64_t));
	int64_t *cp = calloc((size_t)rounds, sizeof(int64_t));
	int64_t *xs = calloc((size_t)rounds, sizeof(int64_t));
	int64_t scratch = 0;
	char store_root[PATH_MAX + 16];
	snprintf(store_root, sizeof(store_root), "%s/store", c.out_dir);
	airlock_error serr = { 0 };
	if (mkdir(store_root, 0700) < 0 ||
	    airlock_artifact_store_fs_open(store_root, &c.store, &serr) < 0) {
		fprintf(stderr, "bench_export: the store at %s: %s\n", store_root,
		        serr.message[0] ? serr.message : strerror(errno));
		goto out;
	}
	if (!ex || !cp || !xs || open_all(&c, store_dir, digest) < 0)
		goto out;
	/* The host copy cp reads: the first export, which also warms both. */
	if (export_once(&c, src, &scratch) < 0 || cp_once(src, dst_cp, &scratch) < 0)
		goto out;
	double load[3] = { -1, -1, -1 };
	if (getloadavg(load, 3) != 3)
		load[0] = load[1] = load[2] = -1;
	printf("bench_export: nproc %ld, load average %.2f %.2f %.2f; %ld MiB, %ld rounds; "
	       "native, image %.19s...; into %s\n",
	       sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2], mib, rounds, digest,
	       c.out_dir);
	for (long r = 0; r < rounds; r++) {
		bool ok = r % 2 == 0 ? export_once(&c, dst_export, &ex[r]) == 0 &&
		                               export_store_once(&c, &xs[r]) == 0 &&
		                               cp_once(src, dst_cp, &cp[r]) == 0
		                     : cp_once(src, dst_cp, &cp[r]) == 0 &&
		                               export_store_once(&c, &xs[r]) == 0 &&
		                               export_once(&c, dst_export, &ex[r]) == 0;
		if (!ok)
			goto out;
		/* Each side writes a fresh file: the last one's blocks go first. */
		unlink(dst_export);
		unlink(dst_cp);
	}
	printf("%ld MiB, %ld rounds each (page cache warm, fsync at the end of both):\n", mib,
	       rounds);
	print_side("export (service -> remote adapter -> file)", ex, (size_t)rounds, c.bytes);
	print_side("export into the artifact store (put, one hash, seal, commit)",
	           xs, (size_t)rounds, c.bytes);
	print_side("cp + fsync", cp, (size_t)rounds, c.bytes);
	bench_stat se = bench_stats(ex, (size_t)rounds), sc = bench_stats(cp, (size_t)rounds);
	bench_stat sx = bench_stats(xs, (size_t)rounds);
	double ratio = sc.p50_ms / se.p50_ms, sratio = sc.p50_ms / sx.p50_ms;
	printf("  export into a file / cp throughput: %.2fx\n", ratio);
	printf("  export into the store / cp throughput: %.2fx (aim at least 0.5x: %s)\n", sratio,
	       sratio >= 0.5 ? "met" : "NOT met");
	rc = 0;
out:
	close_all(&c);
	airlock_artifact_store_free(c.store);
	unlink(src);
	unlink(dst_export);
	unlink(dst_cp);
	/* The store's empty tenant and shard directories (it never removes
	 * them itself), then its root. */
	char sub[PATH_MAX + 64];
	for (int i = 0; i < 256; i++) {
		snprintf(sub, sizeof(sub), "%s/bench/%02x", store_root, i);
		rmdir(sub);
	}
	snprintf(sub, sizeof(sub), "%s/bench", store_root);
	rmdir(sub);
	rmdir(store_root);
	rmdir(c.out_dir);
	free(ex);
	free(cp);
	free(xs);
	return rc;
}
