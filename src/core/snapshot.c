/* SPDX-License-Identifier: Apache-2.0 */
#include "core/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "airlock/port/workspace.h"
#include "airlock/run_command.h"

#include "util/syscalls.h"
#include "util/util.h"

int snapshot_add_entry(airlock_snapshot *s, const airlock_snap_entry *e)
{
	if (s->n == s->alloc) {
		size_t n = s->alloc ? s->alloc * 2 : 64;
		airlock_snap_entry *p = reallocarray(s->entries, n, sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->entries = p;
		s->alloc = n;
	}
	char *copy = strdup(e->path);
	if (!copy)
		return -ENOMEM;
	s->entries[s->n] = *e;
	s->entries[s->n++].path = copy;
	return 0;
}

int snapshot_add(airlock_snapshot *s, const char *path, int64_t size, uint64_t ino,
                         int64_t mtime_ns, int64_t ctime_ns, uint64_t version)
{
	/* add_entry copies the path (the entry's own char *): the const is cast
	 * away only for the struct that carries it there. */
	airlock_snap_entry e = {
		.path = (char *)(uintptr_t)path, .kind = AIRLOCK_FILE_REGULAR, .size = size, .ino = ino,
		.mtime_ns = mtime_ns, .ctime_ns = ctime_ns, .version = version,
	};
	return snapshot_add_entry(s, &e);
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const airlock_snap_entry *)a)->path, ((const airlock_snap_entry *)b)->path);
}

void snapshot_sort(airlock_snapshot *s)
{
	if (s->n > 1)
		qsort(s->entries, s->n, sizeof(*s->entries), entry_cmp);
}

void snapshot_clear(airlock_snapshot *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->entries[i].path);
	free(s->entries);
	*s = (airlock_snapshot){ 0 };
}

/* ctime is part of the comparison because userspace cannot set it: a command
 * that rewrites a file and restores its size and mtime (touch -r) still
 * moves ctime, so the change is reported. */
static bool entry_changed(const airlock_snap_entry *a, const airlock_snap_entry *b)
{
	return a->kind != b->kind || a->size != b->size || a->ino != b->ino || a->mtime_ns != b->mtime_ns ||
	       a->ctime_ns != b->ctime_ns || a->version != b->version;
}

typedef struct change_list {
	airlock_file_change *items;
	size_t n;
	size_t max;
	uint64_t budget; /* bytes that may still be hashed */
	int64_t deadline_ms; /* of the hashing; 0: none */
	bool truncated;
} change_list;

/* e is the entry after the command (before it, for a deletion). */
static int push_change(change_list *l, const airlock_snap_entry *e, airlock_change_kind change,
                       airlock_snapshot_hash_fn hash, void *hash_ctx, airlock_error *err)
{
	if (l->n == l->max) {
		l->truncated = true;
		return 0;
	}
	airlock_file_change fc = { .change = change, .kind = e->kind, .size_bytes = e->size };
	if (change != AIRLOCK_CHANGE_DELETED) {
		/* A symlink's size is its target's length, which is what is
		 * hashed; the other kinds hash nothing. */
		uint64_t cost = e->kind == AIRLOCK_FILE_REGULAR || e->kind == AIRLOCK_FILE_SYMLINK
		                        ? (uint64_t)e->size : 0;
		if (cost > l->budget) {
			l->truncated = true;
			return 0;
		}
		l->budget -= cost;
		if (l->deadline_ms && util_monotonic_ms() >= l->deadline_ms) {
			l->truncated = true;
			return 0;
		}
		airlock_snapshot_hashed h = { 0 };
		int r = hash(hash_ctx, e->path, l->deadline_ms, &h, err);
		if (r == -ENOENT) {
			/* Gone between the walk and the hash: a process still running
			 * would be a bug (the mechanism kills all before computing), so
			 * treat it as not created rather than invent a digest. */
			return 0;
		}
		if (r == -ETIME) {
			l->truncated = true;
			return 0;
		}
		if (r < 0)
			return r;
		fc.kind = h.kind;
		fc.size_bytes = h.size;
		memcpy(fc.sha256, h.hex, sizeof(fc.sha256));
		fc.has_sha256 = true;
	}
	fc.path = strdup(e->path);
	if (!fc.path)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "files_changed");
	l->items[l->n++] = fc;
	return 0;
}

bool snapshot_differs(const airlock_snapshot *before, const airlock_snapshot *after)
{
	if (before->truncated || after->truncated || before->n != after->n)
		return true;
	for (size_t i = 0; i < before->n; i++)
		if (strcmp(before->entries[i].path, after->entries[i].path) != 0 ||
		    entry_changed(&before->entries[i], &after->entries[i]))
			return true;
	return false;
}

int snapshot_diff(const airlock_snapshot *before, const airlock_snapshot *after, size_t max,
                          uint64_t hash_budget, int64_t hash_deadline_ms,
                          airlock_snapshot_hash_fn hash, void *hash_ctx,
                          airlock_execution_result *ret, airlock_error *err)
{
	/* An incomplete walk cannot tell a file it did not reach from a file
	 * that is not there: any listing from it could be wrong. */
	if (before->truncated || after->truncated) {
		airlock_file_change *none = calloc(1, sizeof(*none));
		if (!none)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "files_changed");
		ret->files_changed = none;
		ret->n_files_changed = 0;
		ret->files_changed_truncated = true;
		return 0;
	}
	/* There are never more changes than entries in both walks, so the array
	 * is sized by the smaller of that and the listing cap. */
	size_t total = before->n + after->n;
	change_list l = { .max = max, .budget = hash_budget, .deadline_ms = hash_deadline_ms };
	l.items = calloc((max < total ? max : total) + 1, sizeof(*l.items));
	if (!l.items)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "files_changed");

	size_t i = 0, j = 0;
	int r = 0;
	while (r == 0 && (i < before->n || j < after->n)) {
		int c;
		if (i == before->n)
			c = 1;
		else if (j == after->n)
			c = -1;
		else
			c = strcmp(before->entries[i].path, after->entries[j].path);
		if (c < 0) {
			r = push_change(&l, &before->entries[i], AIRLOCK_CHANGE_DELETED, hash, hash_ctx, err);
			i++;
		} else if (c > 0) {
			r = push_change(&l, &after->entries[j], AIRLOCK_CHANGE_CREATED, hash, hash_ctx, err);
			j++;
		} else {
			/* One entry per path: a kind that changed (a file replaced
			 * by a symlink) is MODIFIED with the new kind, so a reader
			 * keyed by path never sees the path twice. */
			if (entry_changed(&before->entries[i], &after->entries[j]))
				r = push_change(&l, &after->entries[j], AIRLOCK_CHANGE_MODIFIED, hash,
				                hash_ctx, err);
			i++;
			j++;
		}
		if (l.truncated)
			break;
	}
	if (r < 0) {
		for (size_t k = 0; k < l.n; k++)
			airlock_file_change_clear(&l.items[k]);
		free(l.items);
		return r;
	}
	ret->files_changed = l.items;
	ret->n_files_changed = l.n;
	ret->files_changed_truncated = l.truncated;
	return 0;
}

/* ---- walking a real workspace -------------------------------------------- */

#define SNAPSHOT_HASH_CHUNK (1u << 16)

/* The longest relative path that still fits in AIRLOCK_PATH_MAX once
 * "/workspace/" is put in front of it. */
#define WALK_PATH_MAX (AIRLOCK_PATH_MAX - sizeof(AIRLOCK_WORKSPACE_ROOT))

typedef struct walk {
	dev_t dev;
	size_t max;
	size_t bytes_left; /* of path text that may still be stored */
	airlock_snapshot *snap;
	char path[WALK_PATH_MAX + 1];
} walk;

/* Errors an entry's own state can cause (a mode the service may not read, a
 * name swapped for a symlink or a file while it looked): the workspace's
 * shape, which ends the walk truncated rather than failed. Anything else
 * (EIO, ENOMEM, EMFILE) is the system's. */
static bool shape_errno(int e)
{
	return e == EACCES || e == EPERM || e == ELOOP || e == ENOTDIR || e == ENAMETOOLONG;
}

static int walk_stop(walk *w)
{
	w->snap->truncated = true;
	return 0;
}

static airlock_file_kind snapshot_kind(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG: return AIRLOCK_FILE_REGULAR;
	case S_IFLNK: return AIRLOCK_FILE_SYMLINK;
	case S_IFIFO: return AIRLOCK_FILE_FIFO;
	case S_IFSOCK: return AIRLOCK_FILE_SOCKET;
	case S_IFCHR: return AIRLOCK_FILE_CHAR_DEVICE;
	case S_IFBLK: return AIRLOCK_FILE_BLOCK_DEVICE;
	default: return AIRLOCK_FILE_INVALID;
	}
}

static int64_t ts_ns(struct timespec t)
{
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* path holds the directory's relative path ("" for the root) of len bytes;
 * dfd is the directory, owned here. Returns 0 (w->snap->truncated set when a
 * bound ended the walk) or an error. */
static int walk_dir(walk *w, int dfd, size_t len, unsigned depth, airlock_error *err)
{
	_cleanup_closedir_ DIR *d = fdopendir(dfd);
	if (!d) {
		int e = errno;
		close(dfd);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "files_changed: open a directory");
	}
	int r = 0;
	while (r == 0 && !w->snap->truncated) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			if (errno)
				r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
				                      "files_changed: read a directory");
			break;
		}
		const char *name = de->d_name;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		struct stat st;
		/* No following: a symlink the sandbox planted is recorded as what
		 * it is (not a regular file) and never walked through. */
		if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			if (shape_errno(errno))
				r = walk_stop(w);
			else
				r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "files_changed: stat");
			break;
		}
		/* A directory on another device is a mount point: not the
		 * workspace's, neither entered nor reported. Every other
		 * non-directory entry is reported, whatever its kind: a symlink
		 * or FIFO a command planted is a change like any file. */
		if (S_ISDIR(st.st_mode) && st.st_dev != w->dev)
			continue;
		bool is_dir = S_ISDIR(st.st_mode);
		airlock_file_kind kind = is_dir ? AIRLOCK_FILE_INVALID : snapshot_kind(st.st_mode);
		if (!is_dir && kind == AIRLOCK_FILE_INVALID)
			continue; /* no other kind exists on Linux */
		size_t nlen = strlen(name);
		size_t plen = len + (len ? 1 : 0) + nlen;
		if (plen > WALK_PATH_MAX) {
			r = walk_stop(w);
			break;
		}
		if (len)
			w->path[len] = '/';
		memcpy(w->path + len + (len ? 1 : 0), name, nlen + 1);
		if (!is_dir) {
			if (w->snap->n >= w->max || plen + 1 > w->bytes_left) {
				r = walk_stop(w);
			} else {
				w->bytes_left -= plen + 1;
				/* Sizes only mean bytes for files and symlinks (the
				 * target's length); the others report 0. */
				airlock_snap_entry e = {
					.path = w->path, .kind = kind,
					.size = kind == AIRLOCK_FILE_REGULAR || kind == AIRLOCK_FILE_SYMLINK
					                ? st.st_size : 0,
					.ino = st.st_ino, .mtime_ns = ts_ns(st.st_mtim),
					.ctime_ns = ts_ns(st.st_ctim),
					/* A device node's number is part of what it is. */
					.version = (uint64_t)st.st_rdev,
				};
				r = snapshot_add_entry(w->snap, &e);
				if (r < 0)
					r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "files_changed");
			}
		} else if (depth + 1 >= AIRLOCK_SNAPSHOT_DEPTH_MAX) {
			r = walk_stop(w);
		} else {
			int sub = openat(dirfd(d), name,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			struct stat sst;
			if (sub < 0) {
				/* ENOENT: gone since the stat, like a file. */
				if (shape_errno(errno))
					r = walk_stop(w);
				else if (errno != ENOENT)
					r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
					                      "files_changed: open a directory");
			} else if (fstat(sub, &sst) < 0) {
				r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
				                      "files_changed: stat a directory");
				close(sub);
			} else if (sst.st_dev != st.st_dev || sst.st_ino != st.st_ino) {
				/* Replaced (or mounted over) since the stat. */
				r = walk_stop(w);
				close(sub);
			} else {
				r = walk_dir(w, sub, plen, depth + 1, err);
			}
		}
		w->path[len] = 0;
	}
	return r;
}

int snapshot_walk(int root_fd, size_t max_entries, size_t max_path_bytes,
                          airlock_snapshot *ret, airlock_error *err)
{
	struct stat st;
	if (fstat(root_fd, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "files_changed: workspace root");
	walk *w = calloc(1, sizeof(*w));
	if (!w)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "files_changed");
	airlock_snapshot s = { 0 };
	*w = (walk){ .dev = st.st_dev, .max = max_entries, .bytes_left = max_path_bytes, .snap = &s };
	int dfd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = dfd < 0 ? airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "files_changed: workspace root")
	                : walk_dir(w, dfd, 0, 0, err);
	free(w);
	if (r < 0) {
		snapshot_clear(&s);
		return r;
	}
	snapshot_sort(&s);
	*ret = s;
	return 0;
}

/* SHA-256 of no bytes: the digest of every entry without content. */
static const char sha256_of_nothing[] = AIRLOCK_SHA256_EMPTY_HEX;

static int hash_symlink(int fd, airlock_snapshot_hashed *ret, airlock_error *err)
{
	/* The target is read, never followed; a target longer than PATH_MAX
	 * cannot be made (symlink(2) refuses it). */
	char target[AIRLOCK_PATH_MAX + 1];
	ssize_t n = readlinkat(fd, "", target, sizeof(target));
	if (n < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "files_changed: readlink");
	if ((size_t)n >= sizeof(target))
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENAMETOOLONG,
		                         "files_changed: a symlink target longer than %d bytes",
		                         AIRLOCK_PATH_MAX);
	ret->size = n;
	return util_sha256_hex(target, (size_t)n, ret->hex);
}

int64_t snapshot_thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* What a hole reads as. */
static const unsigned char snapshot_zeros[SNAPSHOT_HASH_CHUNK];

/* Whether hashing must stop now: the wall clock's deadline or the thread's
 * CPU bound has passed. */
static bool hash_out_of_time(const snapshot_hash_root *hr, int64_t deadline_ms)
{
	if (deadline_ms && util_monotonic_ms() >= deadline_ms)
		return true;
	return hr->cpu_deadline_ns && snapshot_thread_cpu_ns() >= hr->cpu_deadline_ns;
}

/*
 * The digest of every byte of the file, read the cheapest way that keeps it
 * the true SHA-256:
 *   - a hole (SEEK_DATA/SEEK_HOLE) is fed from a static buffer of zeros
 *     instead of being read: no system call copies zeros and no page of the
 *     file's cache is made for it. SHA-256 still has to process those
 *     bytes, which is what the CPU bound is for;
 *   - data is read and its pages are dropped from the cache once hashed
 *     (POSIX_FADV_DONTNEED): what the service reads back is charged to the
 *     service's cgroup, not to the sandbox that wrote it, so keeping it
 *     would let a sandbox grow the host's cache by its whole workspace.
 *     Pages still dirty are only queued for writeback by the advice; those
 *     are the sandbox's and charged to it;
 *   - the clocks every 16 chunks (1 MiB): the wall deadline and the CPU
 *     bound of this thread.
 * SEEK_DATA may report data where there is a hole, never a hole where there
 * is data, so reading what it calls data is always right.
 */
static int hash_regular(int root, const snapshot_hash_root *hr, const char *path,
                        const struct stat *want, int64_t deadline_ms,
                        airlock_snapshot_hashed *ret, airlock_error *err)
{
	struct open_how how = {
		.flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	_cleanup_close_ int fd = sys_openat2(root, path, &how);
	if (fd < 0) {
		if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
			return -ENOENT; /* replaced by something that is not the file */
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "files_changed: open");
	}
	/* The same inode the O_PATH look found: nothing runs in the sandbox
	 * now, so a difference is a bug, not a race to report. */
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_ino != want->st_ino ||
	    st.st_dev != want->st_dev)
		return -ENOENT;
	util_sha256 *h = util_sha256_new();
	_cleanup_free_ unsigned char *buf = malloc(SNAPSHOT_HASH_CHUNK);
	if (!h || !buf) {
		util_sha256_free(h);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "files_changed");
	}
	int r = 0;
	off_t pos = 0, size = st.st_size;
	off_t data_end = 0; /* the end of the data range pos is in (pos < data_end) */
	off_t dropped = 0;  /* the cache before this offset is dropped */
	for (unsigned chunks = 0; pos < size; chunks++) {
		if (chunks % 16 == 0 && hash_out_of_time(hr, deadline_ms)) {
			r = -ETIME;
			break;
		}
		if (pos >= data_end) {
			/* Where the next data is, and where it ends. ENXIO: only
			 * a hole from here to the end. */
			off_t d = lseek(fd, pos, SEEK_DATA);
			if (d < 0 && errno != ENXIO) {
				r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
				                      "files_changed: SEEK_DATA");
				break;
			}
			if (d < 0 || d > size)
				d = size;
			if (d > pos) {
				size_t n = (size_t)(d - pos < SNAPSHOT_HASH_CHUNK ? d - pos
				                                                  : SNAPSHOT_HASH_CHUNK);
				util_sha256_update(h, snapshot_zeros, n);
				pos += (off_t)n;
				continue;
			}
			off_t e = lseek(fd, pos, SEEK_HOLE);
			if (e < 0) {
				r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
				                      "files_changed: SEEK_HOLE");
				break;
			}
			data_end = e > size ? size : e;
			if (data_end <= pos)
				data_end = size; /* cannot be; read to the end then */
		}
		size_t want_n = (size_t)(data_end - pos < SNAPSHOT_HASH_CHUNK ? data_end - pos
		                                                             : SNAPSHOT_HASH_CHUNK);
		ssize_t n = pread(fd, buf, want_n, pos);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "files_changed: read");
			break;
		}
		if (n == 0)
			break; /* shorter than it was: what was there is hashed */
		util_sha256_update(h, buf, (size_t)n);
		pos += n;
		if (pos - dropped >= (off_t)SNAPSHOT_HASH_CHUNK * 16) {
			(void)posix_fadvise(fd, dropped, pos - dropped, POSIX_FADV_DONTNEED);
			dropped = pos;
		}
	}
	/* The whole file at the end: a page read ahead was still being read
	 * when its range was dropped above, and a locked page is skipped. */
	if (pos > 0)
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	if (r < 0) {
		util_sha256_free(h);
		return r;
	}
	ret->size = pos;
	return util_sha256_final_hex(h, ret->hex);
}

int snapshot_hash_fd(void *ctx, const char *path, int64_t deadline_ms,
                             airlock_snapshot_hashed *ret, airlock_error *err)
{
	const snapshot_hash_root *hr = ctx;
	int root = hr->fd;
	/* O_PATH | O_NOFOLLOW names the entry itself, whatever it is, without
	 * opening it: a FIFO is not opened (no writer could be woken), a
	 * device node never reaches its driver, and a symlink yields the
	 * link. RESOLVE_NO_SYMLINKS still refuses one on the way. */
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	_cleanup_close_ int fd = sys_openat2(root, path, &how);
	if (fd < 0) {
		if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
			return -ENOENT;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "files_changed: open");
	}
	struct stat st;
	if (fstat(fd, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "files_changed: fstat");
	*ret = (airlock_snapshot_hashed){ .kind = snapshot_kind(st.st_mode) };
	switch (ret->kind) {
	case AIRLOCK_FILE_REGULAR:
		return hash_regular(root, hr, path, &st, deadline_ms, ret, err);
	case AIRLOCK_FILE_SYMLINK:
		return hash_symlink(fd, ret, err);
	case AIRLOCK_FILE_INVALID:
		return -ENOENT; /* a directory now: not an entry of the listing */
	case AIRLOCK_FILE_FIFO:
	case AIRLOCK_FILE_SOCKET:
	case AIRLOCK_FILE_CHAR_DEVICE:
	case AIRLOCK_FILE_BLOCK_DEVICE:
	case AIRLOCK_FILE__MAX:
	default:
		memcpy(ret->hex, sha256_of_nothing, sizeof(sha256_of_nothing));
		return 0;
	}
}
