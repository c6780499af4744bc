/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ArtifactStore's filesystem adapter (include/airlock/port/artifact.h,
 * docs/artifacts.md).
 *
 *   root/<tenant_id>/<ab>/<artifact_id>                 a committed object, 0600
 *   root/<tenant_id>/<ab>/.tmp-<artifact_id>-<16 hex>   a put in flight, 0600
 *
 * Why each choice:
 * - The root is held by descriptor from open on, and everything below it is
 *   opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 *   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV): a symlink or a mount planted
 *   inside the store (by anyone who can write there) makes the call fail
 *   instead of sending bytes elsewhere. The names opened are the key's
 *   components, and the key is derived from (tenant_id, artifact_id)
 *   alone (key.c); nothing here joins a string a caller wrote.
 * - A temporary object in the target shard directory, so the commit is a
 *   rename within one directory (atomic, no copy, never across file
 *   systems). Its name starts with a dot and cannot be an artifact id, so
 *   neither open nor the walk's objects can see it, and the walk removes
 *   one left over by a crash once it is old.
 * - The commit is renameat2(RENAME_NOREPLACE): an existing object is never
 *   overwritten, decided by the kernel in the same step, not by a check
 *   before it (which two concurrent puts would both pass).
 * - fsync of the file before the digest is compared (seal), and of the
 *   directory after the rename (commit): a commit that returned 0 survives
 *   a power cut. When the directory's fsync fails the object is removed
 *   again and the commit fails: nothing half-done is reported as stored.
 * - Writeback is started every FS_WRITEBACK_WINDOW bytes as the stream
 *   comes, and the window before waited for: the disk writes while the
 *   bytes are hashed, so the seal's fsync is short, and one put holds at
 *   most two windows of dirty pages, so a large put does not fill the page
 *   cache with bytes whose writeback then stalls everyone else's.
 * - A tenant or shard directory made by a put is fsync'd into its parent
 *   before the temporary is created, for the same reason.
 * Each step that can fail has a fault point (src/util/fault.h) so
 * tests/test_fault_artifact.c fails each in turn.
 */
#include "airlock/port/artifact.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/ids.h"
#include "util/cleanup.h"
#include "util/fault.h"
#include "util/syscalls.h"
#include "util/util.h"

#define FS_TMP_PREFIX ".tmp-"
#define FS_TMP_PREFIX_LEN (sizeof(FS_TMP_PREFIX) - 1)
/* ".tmp-" + the UUID + "-" + 16 hex + NUL. */
#define FS_TMP_NAME_MAX (FS_TMP_PREFIX_LEN + AIRLOCK_UUID_STR_LEN + 1 + 16 + 1)
#define FS_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

typedef struct fs_store {
	int root_fd;
} fs_store;

/* Writeback of a put is started every this many bytes (sync_file_range),
 * so the disk writes while the stream is still being hashed and the seal's
 * fsync finds little left to flush; the previous window is waited for, so
 * one put holds at most two windows of dirty pages (and a stream faster
 * than the disk is paced by it instead of filling the page cache). */
#define FS_WRITEBACK_WINDOW ((off_t)8 << 20)

typedef struct fs_put {
	int shard_fd;
	int fd;
	/* Bytes written; where the window whose writeback was started last
	 * begins; where it ends. */
	off_t written, window, flushed;
	bool committed;
	bool tmp_gone; /* renamed away: nothing to unlink */
	char key[AIRLOCK_ARTIFACT_KEY_MAX];
	char name[AIRLOCK_UUID_STR_LEN + 1];
	char tmp[FS_TMP_NAME_MAX];
} fs_put;

typedef struct fs_reader {
	int fd;
} fs_reader;

/* A key's three components: "tenant/ab/id". The wrapper only hands over
 * keys from the key function; this re-check costs nothing and keeps the
 * adapter from ever opening a name with a '/' in it. */
typedef struct fs_key {
	char tenant[AIRLOCK_ID_MAX + 1];
	char shard[3];
	char name[AIRLOCK_UUID_STR_LEN + 1];
} fs_key;

static int fs_split(const char *key, fs_key *k, airlock_error *err)
{
	const char *a = strchr(key, '/');
	const char *b = a ? strchr(a + 1, '/') : NULL;
	if (!a || !b || a == key || (size_t)(a - key) > AIRLOCK_ID_MAX || b - a != 3 ||
	    strlen(b + 1) != AIRLOCK_UUID_STR_LEN || strchr(b + 1, '/'))
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "artifact store (fs): %s is not a storage key", key);
	memcpy(k->tenant, key, (size_t)(a - key));
	k->tenant[a - key] = 0;
	memcpy(k->shard, a + 1, 2);
	k->shard[2] = 0;
	memcpy(k->name, b + 1, AIRLOCK_UUID_STR_LEN + 1);
	return 0;
}

static int fs_openat(int dirfd, const char *name, int flags, mode_t mode)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
		                .mode = (flags & O_CREAT) ? mode : 0,
		                .resolve = FS_RESOLVE };
	int fd;
	do
		fd = sys_openat2(dirfd, name, &how);
	while (fd < 0 && errno == EINTR);
	return fd;
}

/* One directory below dirfd, made 0700 when create and missing; a new one
 * is fsync'd into its parent before it is used, so an object committed in
 * it is not lost with the directory's own entry. -ENOENT when missing and
 * not create. */
static int fs_dir(int dirfd, const char *name, bool create, const char *key, airlock_error *err)
{
	if (create) {
		if (UTIL_FAULT_CALL("artifact.mkdir", mkdirat(dirfd, name, 0700)) == 0) {
			if (UTIL_FAULT_CALL("artifact.mkdir_sync", fsync(dirfd)) < 0)
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
				                         "artifact %s: fsync of the directory holding %s",
				                         key, name);
		} else if (errno != EEXIST) {
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
			                         "artifact %s: mkdir %s", key, name);
		}
	}
	int fd = fs_openat(dirfd, name, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "artifact %s: open directory %s", key, name);
	return fd;
}

/* ---- puts ------------------------------------------------------------------ */

static void fs_put_free(void *v)
{
	fs_put *p = v;
	if (!p)
		return;
	/* An unlink that fails leaves a temporary the walk removes once old. */
	if (!p->committed && !p->tmp_gone && p->shard_fd >= 0)
		(void)unlinkat(p->shard_fd, p->tmp, 0);
	if (p->fd >= 0)
		close(p->fd);
	if (p->shard_fd >= 0)
		close(p->shard_fd);
	free(p);
}

static int fs_put_begin(void *ctx, const char *key, int64_t size_cap, void **ret_put,
                        airlock_error *err)
{
	fs_store *st = ctx;
	(void)size_cap; /* a file needs no size up front; the core enforces it */
	fs_key k;
	int r = fs_split(key, &k, err);
	if (r < 0)
		return r;
	fs_put *p = calloc(1, sizeof(*p));
	if (!p)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact %s", key);
	p->shard_fd = p->fd = -1;
	memcpy(p->key, key, strlen(key) + 1);
	memcpy(p->name, k.name, sizeof(k.name));

	_cleanup_close_ int tenant_fd = fs_dir(st->root_fd, k.tenant, true, key, err);
	if (tenant_fd < 0) {
		fs_put_free(p);
		return tenant_fd;
	}
	p->shard_fd = fs_dir(tenant_fd, k.shard, true, key, err);
	if (p->shard_fd < 0) {
		r = p->shard_fd;
		fs_put_free(p);
		return r;
	}
	/* A random suffix: two puts of one id (a retry racing the first) get
	 * temporaries of their own, and the commit's RENAME_NOREPLACE decides
	 * between them. */
	unsigned char rnd[8];
	if (util_random(rnd, sizeof(rnd)) < 0) {
		fs_put_free(p);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO, "artifact %s: getrandom", key);
	}
	char hex[2 * sizeof(rnd) + 1];
	util_hex(rnd, sizeof(rnd), hex);
	memcpy(p->tmp, FS_TMP_PREFIX, FS_TMP_PREFIX_LEN);
	memcpy(p->tmp + FS_TMP_PREFIX_LEN, k.name, AIRLOCK_UUID_STR_LEN);
	p->tmp[FS_TMP_PREFIX_LEN + AIRLOCK_UUID_STR_LEN] = '-';
	memcpy(p->tmp + FS_TMP_PREFIX_LEN + AIRLOCK_UUID_STR_LEN + 1, hex, sizeof(hex));

	p->fd = UTIL_FAULT_CALL("artifact.create",
	                        fs_openat(p->shard_fd, p->tmp, O_WRONLY | O_CREAT | O_EXCL, 0600));
	if (p->fd < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                      "artifact %s: create the temporary object", key);
		p->tmp_gone = true; /* never made: nothing of ours to unlink */
		fs_put_free(p);
		return r;
	}
	*ret_put = p;
	return 0;
}

static int fs_put_write(void *v, const void *buf, size_t len, airlock_error *err)
{
	fs_put *p = v;
	int r = UTIL_FAULT_RET("artifact.write", util_write_all(p->fd, buf, len));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
		                         "artifact %s: write to the temporary object", p->key);
	p->written += (off_t)len;
	if (p->written - p->flushed >= FS_WRITEBACK_WINDOW) {
		/* A head start for the seal's fsync. Its failure is the put's:
		 * waiting on a range (WAIT_BEFORE, WAIT_AFTER) reports a
		 * writeback error and advances the descriptor's error cursor
		 * (errseq), so the seal's fsync would no longer see it and
		 * would answer 0 over pages that never reached the disk. */
		if ((p->flushed > p->window &&
		     UTIL_FAULT_CALL("artifact.writeback_wait",
		                     sync_file_range(p->fd, p->window, p->flushed - p->window,
		                                     SYNC_FILE_RANGE_WAIT_BEFORE |
		                                             SYNC_FILE_RANGE_WRITE |
		                                             SYNC_FILE_RANGE_WAIT_AFTER)) < 0) ||
		    UTIL_FAULT_CALL("artifact.writeback",
		                    sync_file_range(p->fd, p->flushed, p->written - p->flushed,
		                                    SYNC_FILE_RANGE_WRITE)) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
			                         "artifact %s: writeback of the temporary object",
			                         p->key);
		p->window = p->flushed;
		p->flushed = p->written;
	}
	return 0;
}

static int fs_put_sync(void *v, airlock_error *err)
{
	fs_put *p = v;
	if (UTIL_FAULT_CALL("artifact.fsync", fsync(p->fd)) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "artifact %s: fsync of the temporary object", p->key);
	return 0;
}

static int fs_put_commit(void *v, airlock_error *err)
{
	fs_put *p = v;
	if (UTIL_FAULT_CALL("artifact.rename",
	                    renameat2(p->shard_fd, p->tmp, p->shard_fd, p->name, RENAME_NOREPLACE)) < 0) {
		int e = errno;
		if (e == EEXIST)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e,
			                         "artifact %s: an object is never overwritten", p->key);
		if (e == EINVAL)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e,
			                         "artifact %s: rename with RENAME_NOREPLACE (the store's "
			                         "file system must support it: ext4, xfs, btrfs, tmpfs)",
			                         p->key);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e,
		                         "artifact %s: rename of the temporary object", p->key);
	}
	p->tmp_gone = true;
	if (UTIL_FAULT_CALL("artifact.dirsync", fsync(p->shard_fd)) < 0) {
		int e = errno;
		/* The rename may not be durable: take the object back so the
		 * caller's failure is the whole truth (nothing stored). */
		(void)unlinkat(p->shard_fd, p->name, 0);
		(void)fsync(p->shard_fd);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e,
		                         "artifact %s: fsync of its directory after the rename", p->key);
	}
	p->committed = true;
	return 0;
}

/* ---- reading, removing --------------------------------------------------- */

static int fs_open(void *ctx, const char *key, int64_t offset, void **ret_reader,
                   int64_t *ret_size, airlock_error *err)
{
	fs_store *st = ctx;
	fs_key k;
	int r = fs_split(key, &k, err);
	if (r < 0)
		return r;
	/* The key as one relative path under the root's descriptor: the kernel
	 * resolves it beneath the root without following a symlink. */
	_cleanup_close_ int fd = fs_openat(st->root_fd, key, O_RDONLY, 0);
	if (fd < 0) {
		int e = errno == ENOTDIR ? ENOENT : errno;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "artifact %s", key);
	}
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "artifact %s: fstat", key);
	if (!S_ISREG(sb.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "artifact %s is not a regular file in the store", key);
	if (offset > 0 && offset <= sb.st_size && lseek(fd, offset, SEEK_SET) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "artifact %s: seek", key);
	fs_reader *rd = calloc(1, sizeof(*rd));
	if (!rd)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact %s", key);
	rd->fd = TAKE_FD(fd);
	*ret_reader = rd;
	*ret_size = sb.st_size;
	return 0;
}

static ssize_t fs_read(void *v, void *buf, size_t len, airlock_error *err)
{
	fs_reader *rd = v;
	ssize_t n;
	do
		n = read(rd->fd, buf, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "artifact read");
	return n;
}

static void fs_reader_free(void *v)
{
	fs_reader *rd = v;
	if (!rd)
		return;
	close(rd->fd);
	free(rd);
}

static int fs_remove(void *ctx, const char *key, airlock_error *err)
{
	fs_store *st = ctx;
	fs_key k;
	int r = fs_split(key, &k, err);
	if (r < 0)
		return r;
	/* A missing directory is a missing object: 0, and no message left in
	 * err for a call that succeeded. */
	_cleanup_close_ int tenant_fd = fs_dir(st->root_fd, k.tenant, false, key, err);
	if (tenant_fd == -ENOENT) {
		airlock_error_clear(err);
		return 0;
	}
	if (tenant_fd < 0)
		return tenant_fd;
	_cleanup_close_ int shard_fd = fs_dir(tenant_fd, k.shard, false, key, err);
	if (shard_fd == -ENOENT) {
		airlock_error_clear(err);
		return 0;
	}
	if (shard_fd < 0)
		return shard_fd;
	if (unlinkat(shard_fd, k.name, 0) < 0) {
		if (errno == ENOENT)
			return 0;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "artifact %s: unlink", key);
	}
	/* Durable like a commit: a removal the sweeper reported is not undone
	 * by a crash after it (its row is gone by then). */
	if (fsync(shard_fd) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "artifact %s: fsync of its directory after the unlink", key);
	return 0;
}

/* ---- the walk ---------------------------------------------------------------- */

/* A directory stream over a descriptor of our own (fdopendir takes it). */
static DIR *fs_opendir(int dirfd, const char *name)
{
	int fd = fs_openat(dirfd, name, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return NULL;
	DIR *d = fdopendir(fd);
	if (!d)
		close(fd);
	return d;
}

static bool fs_shard_name(const char *s)
{
	for (int i = 0; i < 2; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[2] == 0;
}

typedef struct fs_walk {
	int64_t cutoff_ms;
	int (*cb)(void *arg, const char *key, int64_t size, int64_t mtime_ms);
	void *arg;
	size_t removed;
} fs_walk;

static int fs_walk_shard(fs_walk *w, const char *tenant, DIR *shard, const char *shard_name,
                         airlock_error *err)
{
	int sfd = dirfd(shard);
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(shard);
		if (!de) {
			if (errno)
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
				                         "artifact walk: read directory %s/%s", tenant,
				                         shard_name);
			return 0;
		}
		const char *n = de->d_name;
		bool tmp = strncmp(n, FS_TMP_PREFIX, FS_TMP_PREFIX_LEN) == 0;
		if (!tmp && !airlock_uuidv7_valid(n))
			continue; /* ".", "..", or not ours: never reported, never removed */
		struct stat sb;
		if (fstatat(sfd, n, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue; /* removed since the listing: a concurrent remove */
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
			                         "artifact walk: stat in %s/%s", tenant, shard_name);
		}
		if (!S_ISREG(sb.st_mode))
			continue;
		int64_t mtime_ms = (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
		if (tmp) {
			if (mtime_ms >= w->cutoff_ms)
				continue; /* a put may still be writing it */
			if (unlinkat(sfd, n, 0) == 0)
				w->removed++;
			else if (errno != ENOENT)
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
				                         "artifact walk: unlink a stale temporary in %s/%s",
				                         tenant, shard_name);
			continue;
		}
		/* The key is the key function's, from the tenant directory's name
		 * and the object's; an object in the wrong shard is not ours. */
		char key[AIRLOCK_ARTIFACT_KEY_MAX];
		if (airlock_artifact_storage_key(tenant, n, key, NULL) < 0 ||
		    memcmp(key + strlen(tenant) + 1, shard_name, 2) != 0)
			continue;
		int r = w->cb(w->arg, key, sb.st_size, mtime_ms);
		if (r < 0)
			return r;
	}
}

static int fs_walk_fn(void *ctx, int64_t older_than_ms,
                      int (*cb)(void *arg, const char *key, int64_t size, int64_t mtime_ms),
                      void *arg, size_t *ret_temps_removed, airlock_error *err)
{
	fs_store *st = ctx;
	fs_walk w = { .cutoff_ms = util_now_ms() - older_than_ms, .cb = cb, .arg = arg };
	/* Three directory streams at most at once (root, tenant, shard), each
	 * read entry by entry: memory is bounded whatever the store holds. */
	_cleanup_closedir_ DIR *root = fs_opendir(st->root_fd, ".");
	if (!root)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "artifact walk: open the store's root");
	int r = 0;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(root);
		if (!de) {
			if (errno)
				r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
				                      "artifact walk: read the store's root");
			break;
		}
		if (!airlock_id_valid(de->d_name))
			continue;
		_cleanup_closedir_ DIR *tenant = fs_opendir(dirfd(root), de->d_name);
		if (!tenant)
			continue; /* not a directory, a symlink, or gone */
		for (;;) {
			errno = 0;
			struct dirent *se = readdir(tenant);
			if (!se) {
				if (errno)
					r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
					                      "artifact walk: read directory %s", de->d_name);
				break;
			}
			if (!fs_shard_name(se->d_name))
				continue;
			_cleanup_closedir_ DIR *shard = fs_opendir(dirfd(tenant), se->d_name);
			if (!shard)
				continue;
			r = fs_walk_shard(&w, de->d_name, shard, se->d_name, err);
			if (r < 0)
				break;
		}
		if (r < 0)
			break;
	}
	*ret_temps_removed = w.removed;
	return r;
}

/* ---- the identity and the database it serves ---------------------------------- */

/* Two records in the root, each a UUIDv7 and a newline, each made once and
 * never rewritten here: .store-id names the store, .database-id the worker
 * database it serves. A dot name is no tenant id, so neither a key nor the
 * walk reaches them. */
#define FS_STORE_ID ".store-id"
#define FS_DATABASE_ID ".database-id"

/* 1 and the record's UUID when it is there, 0 when it is not. Opened
 * without blocking and refused unless regular: a FIFO planted there would
 * hang the worker's start. */
static int fs_record_read(const fs_store *st, const char *name, char ret[AIRLOCK_UUID_STR_LEN + 1],
                          airlock_error *err)
{
	_cleanup_close_ int fd = fs_openat(st->root_fd, name, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "artifact store: open %s in its root", name);
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "artifact store: fstat %s in its root", name);
	_cleanup_free_ char *buf = NULL;
	size_t n = 0;
	int r = S_ISREG(sb.st_mode) ? util_read_capped(fd, AIRLOCK_UUID_STR_LEN + 1, &buf, &n)
	                            : -EFBIG;
	if (r < 0 && r != -EFBIG)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
		                         "artifact store: read %s in its root", name);
	if (r < 0 || n != AIRLOCK_UUID_STR_LEN + 1 || buf[AIRLOCK_UUID_STR_LEN] != '\n')
		goto bad;
	buf[AIRLOCK_UUID_STR_LEN] = 0;
	if (!airlock_uuidv7_valid(buf))
		goto bad;
	memcpy(ret, buf, AIRLOCK_UUID_STR_LEN + 1);
	return 1;
bad:
	return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
	                         "artifact store: %s in its root is not a regular file holding "
	                         "a UUIDv7 and a newline; it is never rewritten here "
	                         "(docs/artifacts.md, \"The identity\")",
	                         name);
}

/* The record name holds, made with proposed when it is missing: written
 * whole and synced under a temporary name of this call's own (a random
 * suffix, as a put's: a shared name would let one process unlink or rename
 * another's file half-written), then renamed without replacing, so a crash
 * leaves no record or a whole one, and processes making it at once agree
 * on the first renamed. The root is synced before any answer: a record a
 * database is bound to must not vanish with a power cut. */
static int fs_record(fs_store *st, const char *name, const char *proposed,
                     char ret[AIRLOCK_UUID_STR_LEN + 1], airlock_error *err)
{
	int r = fs_record_read(st, name, ret, err);
	if (r == 0) {
		char line[AIRLOCK_UUID_STR_LEN + 1];
		memcpy(line, proposed, AIRLOCK_UUID_STR_LEN);
		line[AIRLOCK_UUID_STR_LEN] = '\n';
		unsigned char rnd[8];
		char hex[2 * sizeof(rnd) + 1], tmp[64];
		if (util_random(rnd, sizeof(rnd)) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO,
			                         "artifact store: getrandom");
		util_hex(rnd, sizeof(rnd), hex);
		snprintf(tmp, sizeof(tmp), "%s.tmp-%s", name, hex);
		_cleanup_close_ int fd = UTIL_FAULT_CALL(
			"artifact.record_create",
			fs_openat(st->root_fd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600));
		if (fd < 0 || util_write_all(fd, line, sizeof(line)) < 0 ||
		    UTIL_FAULT_CALL("artifact.record_fsync", fsync(fd)) < 0) {
			int e = errno;
			if (fd >= 0)
				(void)unlinkat(st->root_fd, tmp, 0);
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e,
			                         "artifact store: write %s in its root", tmp);
		}
		if (UTIL_FAULT_CALL("artifact.record_rename",
		                    renameat2(st->root_fd, tmp, st->root_fd, name,
		                              RENAME_NOREPLACE)) < 0) {
			int e = errno;
			(void)unlinkat(st->root_fd, tmp, 0);
			if (e != EEXIST)
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e,
				                         "artifact store: rename %s into place", name);
		}
		r = fs_record_read(st, name, ret, err);
		if (r == 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOENT,
			                         "artifact store: %s vanished as it was made", name);
	}
	if (r < 0)
		return r;
	if (UTIL_FAULT_CALL("artifact.record_sync", fsync(st->root_fd)) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "artifact store: fsync of its root after %s", name);
	return 0;
}

static int fs_identity(void *ctx, char ret[AIRLOCK_UUID_STR_LEN + 1], airlock_error *err)
{
	char fresh[AIRLOCK_UUID_STR_LEN + 1];
	int r = airlock_uuidv7_new(fresh, err);
	return r < 0 ? r : fs_record(ctx, FS_STORE_ID, fresh, ret, err);
}

static int fs_bind_database(void *ctx, const char *database_id,
                            char ret_bound[AIRLOCK_UUID_STR_LEN + 1], airlock_error *err)
{
	return fs_record(ctx, FS_DATABASE_ID, database_id, ret_bound, err);
}

static void fs_free(void *ctx)
{
	fs_store *st = ctx;
	if (!st)
		return;
	close(st->root_fd);
	free(st);
}

static const airlock_artifact_store_ops fs_ops = {
	.version = AIRLOCK_ARTIFACT_STORE_OPS_VERSION,
	.name = "fs",
	.put_begin = fs_put_begin,
	.put_write = fs_put_write,
	.put_sync = fs_put_sync,
	.put_commit = fs_put_commit,
	.put_free = fs_put_free,
	.open = fs_open,
	.read = fs_read,
	.reader_free = fs_reader_free,
	.remove = fs_remove,
	.walk = fs_walk_fn,
	.identity = fs_identity,
	.bind_database = fs_bind_database,
	.free = fs_free,
};

/* ---- opening the root ------------------------------------------------------- */

/* Neither root nor an ancestor holds .git (the specification, "Artifacts":
 * the store is outside the source tree): walked by descriptor through
 * "..", so what is checked is the directory that was opened. *ret_depth is
 * how many levels up the .git was found. */
static int fs_in_source_tree(int root_fd, int *ret_depth)
{
	_cleanup_close_ int cur = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return -errno;
	for (int depth = 0; depth < 4096; depth++) {
		struct stat gs;
		if (fstatat(cur, ".git", &gs, AT_SYMLINK_NOFOLLOW) == 0) {
			*ret_depth = depth;
			return 1;
		}
		if (errno != ENOENT)
			return -errno;
		int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (up < 0)
			return -errno;
		struct stat a, b;
		if (fstat(cur, &a) < 0 || fstat(up, &b) < 0) {
			int e = errno;
			close(up);
			return -e;
		}
		close(cur);
		cur = up;
		if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			return 0; /* "/" is its own parent */
	}
	return -ELOOP;
}

int airlock_artifact_store_fs_open(const char *root, airlock_artifact_store **ret,
                                   airlock_error *err)
{
	if (!root || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "artifact store (fs): no root or no place for the store");
	char q[256];
	util_escape(q, sizeof(q), root, strlen(root));
	if (root[0] != '/')
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "artifact store root %s is not an absolute path", q);
	struct stat ls;
	if (lstat(root, &ls) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno,
		                         "artifact store root %s (create it as a directory of mode "
		                         "0700)",
		                         q);
	/* The last component a symlink: the directory in use would be
	 * whatever the link names when it is read, not what was configured. */
	if (S_ISLNK(ls.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "artifact store root %s is a symlink: configure the directory "
		                         "itself",
		                         q);
	if (!S_ISDIR(ls.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "artifact store root %s is not a directory", q);
	_cleanup_close_ int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno, "artifact store root %s", q);
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno,
		                         "artifact store root %s: fstat", q);
	if (sb.st_dev != ls.st_dev || sb.st_ino != ls.st_ino)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "artifact store root %s changed while it was opened", q);
	/* Another user's directory: that user can read and replace every
	 * artifact of every tenant. */
	if (sb.st_uid != geteuid())
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "artifact store root %s is owned by uid %u, not by this "
		                         "process's uid %u (chown it)",
		                         q, (unsigned)sb.st_uid, (unsigned)geteuid());
	/* Group or others with any access could list tenants and artifact
	 * ids, or read objects whose own mode a later change loosened. */
	if ((sb.st_mode & 07777) != 0700)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "artifact store root %s has mode 0%o: it must be 0700 (chmod "
		                         "700 it)",
		                         q, (unsigned)(sb.st_mode & 07777));
	int depth = 0;
	int g = fs_in_source_tree(fd, &depth);
	if (g < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, -g,
		                         "artifact store root %s: looking for a .git above it", q);
	if (g > 0) {
		if (depth == 0)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "artifact store root %s holds .git: the store must be "
			                         "outside any source tree",
			                         q);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "artifact store root %s is inside a source tree (the "
		                         "directory %d level%s above it holds .git): the store must be "
		                         "outside any source tree",
		                         q, depth, depth == 1 ? "" : "s");
	}
	/* openat2 is what keeps every name below the root; without it there is
	 * no safe way to open one, so the store refuses to start. */
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC, .resolve = FS_RESOLVE };
	int probe = sys_openat2(fd, ".", &how);
	if (probe < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno,
		                         "artifact store root %s: openat2 with RESOLVE_BENEATH is "
		                         "required",
		                         q);
	close(probe);
	fs_store *st = calloc(1, sizeof(*st));
	if (!st)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact store (fs)");
	st->root_fd = TAKE_FD(fd);
	return airlock_artifact_store_new(&fs_ops, st, ret, err);
}
