/* SPDX-License-Identifier: Apache-2.0 */
#include "core/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "airlock/port/workspace.h"

#include "util/util.h"

int airlock_snapshot_add(airlock_snapshot *s, const char *path, int64_t size, uint64_t ino,
                         int64_t mtime_ns, int64_t ctime_ns, uint64_t version)
{
	if (s->n == s->alloc) {
		size_t n = s->alloc ? s->alloc * 2 : 64;
		airlock_snap_entry *p = reallocarray(s->entries, n, sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->entries = p;
		s->alloc = n;
	}
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	s->entries[s->n++] = (airlock_snap_entry){
		.path = copy, .size = size, .ino = ino,
		.mtime_ns = mtime_ns, .ctime_ns = ctime_ns, .version = version,
	};
	return 0;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const airlock_snap_entry *)a)->path, ((const airlock_snap_entry *)b)->path);
}

void airlock_snapshot_sort(airlock_snapshot *s)
{
	if (s->n > 1)
		qsort(s->entries, s->n, sizeof(*s->entries), entry_cmp);
}

void airlock_snapshot_clear(airlock_snapshot *s)
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
	return a->size != b->size || a->ino != b->ino || a->mtime_ns != b->mtime_ns ||
	       a->ctime_ns != b->ctime_ns || a->version != b->version;
}

typedef struct change_list {
	airlock_file_change *items;
	size_t n;
	size_t max;
	uint64_t budget; /* bytes that may still be hashed */
	bool truncated;
} change_list;

static int push_change(change_list *l, const char *path, airlock_change_kind kind,
                       airlock_snapshot_hash_fn hash, void *hash_ctx, int64_t old_size,
                       airlock_error *err)
{
	if (l->n == l->max) {
		l->truncated = true;
		return 0;
	}
	if (kind != AIRLOCK_CHANGE_DELETED) {
		if ((uint64_t)old_size > l->budget) {
			l->truncated = true;
			return 0;
		}
		l->budget -= (uint64_t)old_size;
	}
	airlock_file_change fc = { .change = kind, .size_bytes = old_size };
	fc.path = strdup(path);
	if (!fc.path)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "files_changed");
	if (kind != AIRLOCK_CHANGE_DELETED) {
		int r = hash(hash_ctx, path, fc.sha256, &fc.size_bytes, err);
		if (r == -ENOENT) {
			/* Gone between the walk and the hash: a process still running
			 * would be a bug (the mechanism kills all before computing), so
			 * treat it as not created rather than invent a digest. */
			free(fc.path);
			return 0;
		}
		if (r < 0) {
			free(fc.path);
			return r;
		}
		fc.has_sha256 = true;
	}
	l->items[l->n++] = fc;
	return 0;
}

int airlock_snapshot_diff(const airlock_snapshot *before, const airlock_snapshot *after, size_t max,
                          uint64_t hash_budget, airlock_snapshot_hash_fn hash, void *hash_ctx,
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
	change_list l = { .max = max, .budget = hash_budget };
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
			r = push_change(&l, before->entries[i].path, AIRLOCK_CHANGE_DELETED, hash,
			                hash_ctx, before->entries[i].size, err);
			i++;
		} else if (c > 0) {
			r = push_change(&l, after->entries[j].path, AIRLOCK_CHANGE_CREATED, hash,
			                hash_ctx, after->entries[j].size, err);
			j++;
		} else {
			if (entry_changed(&before->entries[i], &after->entries[j]))
				r = push_change(&l, after->entries[j].path, AIRLOCK_CHANGE_MODIFIED,
				                hash, hash_ctx, after->entries[j].size, err);
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

static int64_t ts_ns(struct timespec t)
{
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* path holds the directory's relative path ("" for the root) of len bytes;
 * dfd is the directory, owned here. Returns 0 (w->snap->truncated set when a
 * bound ended the walk) or an error. */
static int walk_dir(walk *w, int dfd, size_t len, unsigned depth, airlock_error *err)
{
	DIR *d = fdopendir(dfd);
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
		bool is_dir = S_ISDIR(st.st_mode) && st.st_dev == w->dev;
		/* Nothing else is reported or entered, so its name needs no room. */
		if (!S_ISREG(st.st_mode) && !is_dir)
			continue;
		size_t nlen = strlen(name);
		size_t plen = len + (len ? 1 : 0) + nlen;
		if (plen > WALK_PATH_MAX) {
			r = walk_stop(w);
			break;
		}
		if (len)
			w->path[len] = '/';
		memcpy(w->path + len + (len ? 1 : 0), name, nlen + 1);
		if (S_ISREG(st.st_mode)) {
			if (w->snap->n >= w->max || plen + 1 > w->bytes_left) {
				r = walk_stop(w);
			} else {
				w->bytes_left -= plen + 1;
				r = airlock_snapshot_add(w->snap, w->path, st.st_size, st.st_ino,
				                         ts_ns(st.st_mtim), ts_ns(st.st_ctim), 0);
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
	closedir(d);
	return r;
}

int airlock_snapshot_walk(int root_fd, size_t max_entries, size_t max_path_bytes,
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
		airlock_snapshot_clear(&s);
		return r;
	}
	airlock_snapshot_sort(&s);
	*ret = s;
	return 0;
}

int airlock_snapshot_hash_fd(void *ctx, const char *path, char hex[65], int64_t *ret_size,
                             airlock_error *err)
{
	int root = *(const int *)ctx;
	struct open_how how = {
		.flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	int fd = (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
	if (fd < 0) {
		if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
			return -ENOENT; /* replaced by something that is not the file */
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "files_changed: open");
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -ENOENT;
	}
	util_sha256 *h = util_sha256_new();
	_cleanup_free_ unsigned char *buf = malloc(SNAPSHOT_HASH_CHUNK);
	if (!h || !buf) {
		util_sha256_free(h);
		close(fd);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "files_changed");
	}
	int64_t total = 0;
	for (;;) {
		ssize_t n = read(fd, buf, SNAPSHOT_HASH_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			util_sha256_free(h);
			close(fd);
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "files_changed: read");
		}
		if (n == 0)
			break;
		util_sha256_update(h, buf, (size_t)n);
		total += n;
	}
	close(fd);
	*ret_size = total;
	return util_sha256_final_hex(h, hex);
}
