/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-memory workspace adapter: the workspace the fake mechanism runs
 * against, and a production adapter in the same sense fake is
 * (the specification, Decisions: "fake ... runs the contract suite
 * unchanged").
 *
 * Files live in one array sorted bytewise by path. Directories are implied by
 * the files under them: "a" is a directory exactly when some file's path
 * starts with "a/", so every file under a directory forms one contiguous run
 * of the array, which is what listdir and the conflict checks use. A path
 * that is a file cannot be used as a directory and the reverse (ENOTDIR /
 * EISDIR, as the kernel would say).
 *
 * There are no symlinks, so once the core's string rules have passed a path
 * cannot leave the root: contain() has nothing left to decide.
 *
 * Provenance is stored on each file by the call that wrote it: write()
 * records TOOL_WRITTEN, memws_sandbox_write() records
 * SANDBOX_WRITTEN. A sandbox write over a tool-written file replaces the
 * label with its own, so it is never laundered.
 *
 * Thread safety: every function takes the workspace's lock.
 */
#include "workspace/memory/memws.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "airlock/caps.h"
#include "util/util.h"

typedef struct memws_file {
	char *path;
	unsigned char *data;
	size_t len;
	airlock_provenance prov;
	uint64_t version; /* bumped on every write */
	uint64_t id;      /* stable for the file's life: the snapshot's inode */
} memws_file;

struct airlock_memws {
	pthread_mutex_t lock;
	memws_file **files; /* sorted by path, strcmp order */
	size_t n;
	size_t alloc;
	size_t total_bytes;
	size_t path_bytes; /* the files' paths, each with its NUL */
	int64_t max_bytes; /* 0 = no limit beyond the hard ceiling */
	int64_t max_files;
	uint64_t next_id;
};

typedef enum memws_kind {
	MEMWS_NONE,
	MEMWS_FILE,
	MEMWS_DIR,
	MEMWS_NOTDIR, /* a leading part of the path is a file */
} memws_kind;

/* ---- the sorted array ---------------------------------------------------- */

/* First index whose path is >= key. */
static size_t memws_lower_bound(const airlock_memws *m, const char *key)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(m->files[mid]->path, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static memws_file *memws_find(const airlock_memws *m, const char *path, size_t *ret_idx)
{
	size_t i = memws_lower_bound(m, path);
	if (ret_idx)
		*ret_idx = i;
	if (i < m->n && strcmp(m->files[i]->path, path) == 0)
		return m->files[i];
	return NULL;
}

/* The first file at or after the run of files under "dir/" ("" = all). */
static size_t memws_under(const airlock_memws *m, const char *dir, size_t dlen, char *prefix,
                          size_t *ret_plen)
{
	size_t plen = 0;
	if (dlen) {
		memcpy(prefix, dir, dlen);
		prefix[dlen] = '/';
		plen = dlen + 1;
	}
	prefix[plen] = 0;
	*ret_plen = plen;
	return memws_lower_bound(m, prefix);
}

static bool memws_is_dir(const airlock_memws *m, const char *dir, size_t dlen)
{
	if (dlen == 0)
		return true;
	if (dlen > AIRLOCK_PATH_MAX)
		return false;
	char prefix[AIRLOCK_PATH_MAX + 2];
	size_t plen;
	size_t i = memws_under(m, dir, dlen, prefix, &plen);
	return i < m->n && strncmp(m->files[i]->path, prefix, plen) == 0;
}

/* Paths reaching here passed the string rules, so they are at most 4085
 * bytes and fit the stack buffers used below. */
static memws_kind memws_lookup(const airlock_memws *m, const char *path, memws_file **ret_file,
                               size_t *ret_idx)
{
	char part[AIRLOCK_PATH_MAX + 2];
	size_t len = strlen(path);
	if (len > AIRLOCK_PATH_MAX)
		return MEMWS_NONE;
	/* A file at any leading part ("a" for "a/b") makes the rest unreachable,
	 * as a regular file in the middle of a path is for the kernel. */
	for (size_t i = 0; i < len; i++) {
		if (path[i] != '/')
			continue;
		memcpy(part, path, i);
		part[i] = 0;
		if (memws_find(m, part, NULL))
			return MEMWS_NOTDIR;
	}
	memws_file *f = memws_find(m, path, ret_idx);
	if (f) {
		if (ret_file)
			*ret_file = f;
		return MEMWS_FILE;
	}
	if (memws_is_dir(m, path, len))
		return MEMWS_DIR;
	return MEMWS_NONE;
}

static void memws_file_free(memws_file *f)
{
	if (!f)
		return;
	free(f->path);
	free(f->data);
	free(f);
}

/* Create or replace path with data under the workspace's limits. The caller
 * has ruled out the directory conflicts. 0, -ENOMEM or -ENOSPC; on failure
 * nothing changed. */
static int memws_put(airlock_memws *m, const char *path, const void *data, size_t len,
                     airlock_provenance prov)
{
	size_t idx;
	memws_file *f = memws_find(m, path, &idx);
	size_t old = f ? f->len : 0;

	if (len > AIRLOCK_MEMWS_BYTES_HARD || m->total_bytes - old > AIRLOCK_MEMWS_BYTES_HARD - len)
		return -ENOSPC;
	size_t total = m->total_bytes - old + len;
	if (m->max_bytes > 0 && (uint64_t)total > (uint64_t)m->max_bytes)
		return -ENOSPC;
	if (!f && (m->n >= AIRLOCK_MEMWS_FILES_HARD ||
	           (m->max_files > 0 && (uint64_t)m->n >= (uint64_t)m->max_files)))
		return -ENOSPC;
	size_t plen = strlen(path) + 1;
	if (!f && plen > AIRLOCK_MEMWS_PATH_BYTES_HARD - m->path_bytes)
		return -ENOSPC;

	/* Copy first, so a failed allocation leaves the old bytes in place. */
	unsigned char *copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	if (len)
		memcpy(copy, data, len);

	if (!f) {
		if (m->n == m->alloc) {
			size_t n = m->alloc ? m->alloc * 2 : 16;
			memws_file **p = reallocarray(m->files, n, sizeof(*p));
			if (!p) {
				free(copy);
				return -ENOMEM;
			}
			m->files = p;
			m->alloc = n;
		}
		f = calloc(1, sizeof(*f));
		if (!f || !(f->path = strdup(path))) {
			free(f);
			free(copy);
			return -ENOMEM;
		}
		f->id = m->next_id++;
		memmove(&m->files[idx + 1], &m->files[idx], (m->n - idx) * sizeof(*m->files));
		m->files[idx] = f;
		m->n++;
		m->path_bytes += plen;
	}
	free(f->data);
	f->data = copy;
	f->len = len;
	f->prov = prov;
	f->version++;
	m->total_bytes = total;
	return 0;
}

/* ---- the port ------------------------------------------------------------ */

static int memory_contain(void *ctx, const char *rel, airlock_error *err)
{
	/* No symlinks and no "..": a path that passed rules 1, 2 and 4 names a
	 * place under the root by construction. */
	(void)ctx;
	(void)rel;
	(void)err;
	return 0;
}

static int memory_read(void *ctx, const char *rel, size_t max_bytes, unsigned char **ret_data,
                       size_t *ret_len, airlock_error *err)
{
	airlock_memws *m = ctx;
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	airlock_workspace_quote(rel, strlen(rel), q);

	pthread_mutex_lock(&m->lock);
	memws_file *f = NULL;
	int r = 0;
	memws_kind k = memws_lookup(m, rel, &f, NULL);
	if (k == MEMWS_NONE)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOENT, "read %s", q);
	else if (k == MEMWS_DIR)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EISDIR, "read %s", q);
	else if (k == MEMWS_NOTDIR)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOTDIR,
		                      "read %s: a leading part of the path is a file", q);
	else if (f->len > max_bytes)
		r = airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                      "read %s: file is %zu bytes, more than the %zu allowed", q,
		                      f->len, max_bytes);
	if (r == 0) {
		unsigned char *copy = malloc(f->len + 1);
		if (!copy) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "read %s", q);
		} else {
			if (f->len)
				memcpy(copy, f->data, f->len);
			copy[f->len] = 0;
			*ret_data = copy;
			*ret_len = f->len;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return r;
}

/* The directory checks every writer shares; the tool additionally needs the
 * parent to exist (the port's contract: parents are never created). */
static int memws_write_check(const airlock_memws *m, const char *rel, bool need_parent)
{
	memws_kind k = memws_lookup(m, rel, NULL, NULL);
	if (k == MEMWS_NOTDIR)
		return -ENOTDIR;
	if (k == MEMWS_DIR)
		return -EISDIR;
	const char *slash = strrchr(rel, '/');
	if (need_parent && slash && !memws_is_dir(m, rel, (size_t)(slash - rel)))
		return -ENOENT;
	return 0;
}

static int memory_write(void *ctx, const char *rel, const void *data, size_t len,
                        airlock_error *err)
{
	airlock_memws *m = ctx;
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];

	pthread_mutex_lock(&m->lock);
	int r = memws_write_check(m, rel, true);
	if (r == 0)
		r = memws_put(m, rel, data, len, AIRLOCK_PROVENANCE_TOOL_WRITTEN);
	pthread_mutex_unlock(&m->lock);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "write %s",
		                         airlock_workspace_quote(rel, strlen(rel), q));
	return 0;
}

typedef struct memws_child {
	const char *name; /* into a file's path, valid under the lock */
	size_t nlen;
	airlock_entry_type type;
	int64_t size;
} memws_child;

static int memws_child_cmp(const void *a, const void *b)
{
	const memws_child *x = a, *y = b;
	size_t n = x->nlen < y->nlen ? x->nlen : y->nlen;
	int c = memcmp(x->name, y->name, n);
	if (c)
		return c;
	return x->nlen < y->nlen ? -1 : x->nlen > y->nlen;
}

static int memws_listdir_locked(airlock_memws *m, const char *rel, size_t max_entries,
                                airlock_dir_listing *ret, airlock_error *err)
{
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	airlock_workspace_quote(rel, strlen(rel), q);
	size_t rlen = strlen(rel);

	if (rlen) {
		memws_kind k = memws_lookup(m, rel, NULL, NULL);
		if (k == MEMWS_NONE)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOENT, "listdir %s", q);
		if (k != MEMWS_DIR)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOTDIR, "listdir %s", q);
	}

	char prefix[AIRLOCK_PATH_MAX + 2];
	size_t plen;
	size_t first = memws_under(m, rel, rlen, prefix, &plen);
	size_t last = first;
	while (last < m->n && strncmp(m->files[last]->path, prefix, plen) == 0)
		last++;

	/* One child per file at most; the files under one subdirectory are
	 * adjacent, so a repeated directory child is always the previous one. */
	_cleanup_free_ memws_child *kids = NULL;
	size_t nk = 0;
	if (last > first) {
		kids = calloc(last - first, sizeof(*kids));
		if (!kids)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "listdir %s", q);
	}
	for (size_t i = first; i < last; i++) {
		const memws_file *f = m->files[i];
		const char *rest = f->path + plen;
		const char *slash = strchr(rest, '/');
		size_t nlen = slash ? (size_t)(slash - rest) : strlen(rest);
		if (slash && nk && kids[nk - 1].type == AIRLOCK_ENTRY_DIRECTORY &&
		    kids[nk - 1].nlen == nlen && memcmp(kids[nk - 1].name, rest, nlen) == 0)
			continue;
		kids[nk++] = (memws_child){
			.name = rest,
			.nlen = nlen,
			.type = slash ? AIRLOCK_ENTRY_DIRECTORY : AIRLOCK_ENTRY_FILE,
			.size = slash ? 0 : (int64_t)f->len,
		};
	}
	/* Array order is by full path, and "a-b" < "a/x" bytewise while the
	 * names sort "a" < "a-b": the children are sorted by name here. */
	if (nk > 1)
		qsort(kids, nk, sizeof(*kids), memws_child_cmp);

	/* The sorted prefix within both bounds (the port's listdir). */
	size_t take = 0, bytes = 0;
	while (take < nk && take < max_entries &&
	       plen + kids[take].nlen + 1 <= AIRLOCK_WORKSPACE_LISTDIR_BYTES_MAX - bytes) {
		bytes += plen + kids[take].nlen + 1;
		take++;
	}
	airlock_dir_listing out = { .truncated = nk > take };
	if (take) {
		out.entries = calloc(take, sizeof(*out.entries));
		if (!out.entries)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "listdir %s", q);
	}
	for (size_t i = 0; i < take; i++) {
		airlock_dir_entry *e = &out.entries[i];
		e->path = malloc(plen + kids[i].nlen + 1);
		if (!e->path) {
			airlock_dir_listing_clear(&out);
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "listdir %s", q);
		}
		memcpy(e->path, prefix, plen);
		memcpy(e->path + plen, kids[i].name, kids[i].nlen);
		e->path[plen + kids[i].nlen] = 0;
		e->type = kids[i].type;
		e->size_bytes = kids[i].size;
		out.n++;
	}
	*ret = out;
	return 0;
}

static int memory_listdir(void *ctx, const char *rel, size_t max_entries, airlock_dir_listing *ret,
                          airlock_error *err)
{
	airlock_memws *m = ctx;
	pthread_mutex_lock(&m->lock);
	int r = memws_listdir_locked(m, rel, max_entries, ret, err);
	pthread_mutex_unlock(&m->lock);
	return r;
}

static int memory_provenance(void *ctx, const char *rel, airlock_provenance *ret,
                             airlock_error *err)
{
	airlock_memws *m = ctx;
	(void)err;
	pthread_mutex_lock(&m->lock);
	memws_file *f = NULL;
	/* A file carries the label of whoever wrote it last. A directory, or a
	 * path nothing was written to, has no writer on record: UNKNOWN. */
	memws_kind k = memws_lookup(m, rel, &f, NULL);
	*ret = k == MEMWS_FILE ? f->prov : AIRLOCK_PROVENANCE_UNKNOWN;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

/* A stream of one file: the file is found again by path for every piece
 * and must still be the one opened (its id) at the version opened, so a
 * file replaced or rewritten while it is read fails the stream instead of
 * handing out a mixture. Nothing of the file is held between pieces. */
typedef struct memory_reader {
	char *path;
	uint64_t id, version, size, off;
} memory_reader;

static void memory_stream_close(void *reader)
{
	memory_reader *mr = reader;
	if (!mr)
		return;
	free(mr->path);
	free(mr);
}

static int memory_stream_open(void *ctx, const char *rel, uint64_t max_bytes, void **ret_reader,
                              uint64_t *ret_size, airlock_error *err)
{
	airlock_memws *m = ctx;
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	airlock_workspace_quote(rel, strlen(rel), q);
	memory_reader *mr = calloc(1, sizeof(*mr));
	if (!mr || !(mr->path = strdup(rel))) {
		free(mr);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "stream %s", q);
	}
	pthread_mutex_lock(&m->lock);
	memws_file *f = NULL;
	int r = 0;
	/* There are no symlinks here: the path names the file itself. */
	memws_kind k = memws_lookup(m, rel, &f, NULL);
	if (k == MEMWS_NONE)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOENT, "stream %s", q);
	else if (k == MEMWS_DIR)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EISDIR, "stream %s", q);
	else if (k == MEMWS_NOTDIR)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOTDIR,
		                      "stream %s: a leading part of the path is a file", q);
	else if (!f) /* MEMWS_FILE always comes with its file */
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOENT, "stream %s", q);
	else if ((uint64_t)f->len > max_bytes)
		r = airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                      "stream %s: file is %zu bytes, more than the %llu allowed", q,
		                      f->len, (unsigned long long)max_bytes);
	if (r == 0 && f) {
		mr->id = f->id;
		mr->version = f->version;
		mr->size = f->len;
	}
	pthread_mutex_unlock(&m->lock);
	if (r < 0) {
		memory_stream_close(mr);
		return r;
	}
	*ret_size = mr->size;
	*ret_reader = mr;
	return 0;
}

static int memory_stream_read(void *ctx, void *reader, void *buf, size_t max, size_t *ret_n,
                              airlock_error *err)
{
	airlock_memws *m = ctx;
	memory_reader *mr = reader;
	pthread_mutex_lock(&m->lock);
	memws_file *f = memws_find(m, mr->path, NULL);
	bool same = f && f->id == mr->id && f->version == mr->version;
	size_t n = 0;
	if (same) {
		uint64_t left = mr->size - mr->off;
		n = left < max ? (size_t)left : max;
		if (n)
			memcpy(buf, f->data + mr->off, n);
	}
	pthread_mutex_unlock(&m->lock);
	if (!same) {
		char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EAGAIN,
		                         "stream %s: the file changed while it was read; export it "
		                         "again once nothing writes it",
		                         airlock_workspace_quote(mr->path, strlen(mr->path), q));
	}
	mr->off += n;
	*ret_n = n;
	return 0;
}

static void memory_free(void *ctx)
{
	airlock_memws *m = ctx;
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		memws_file_free(m->files[i]);
	free(m->files);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static const airlock_workspace_ops memory_ops = {
	.version = AIRLOCK_WORKSPACE_OPS_VERSION,
	.name = "memory",
	.contain = memory_contain,
	.read = memory_read,
	.write = memory_write,
	.listdir = memory_listdir,
	.provenance = memory_provenance,
	.free = memory_free,
	.stream_open = memory_stream_open,
	.stream_read = memory_stream_read,
	.stream_close = memory_stream_close,
};

int airlock_workspace_memory_new(airlock_workspace **ret, airlock_error *err)
{
	airlock_memws *m = calloc(1, sizeof(*m));
	if (!m)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "memory workspace");
	int r = pthread_mutex_init(&m->lock, NULL);
	if (r != 0) {
		free(m);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, r, "memory workspace");
	}
	m->next_id = 1;
	return airlock_workspace_new(&memory_ops, m, ret, err);
}

airlock_memws *airlock_workspace_memory_state(airlock_workspace *w)
{
	/* The table's address identifies the adapter: only a workspace this file
	 * created carries it, so no other adapter's ctx is ever reinterpreted. */
	if (!w || w->ops != &memory_ops)
		return NULL;
	return w->ctx;
}

/* ---- memws.h: the fake mechanism's side ---------------------------------- */

int memws_sandbox_write(airlock_memws *m, const char *rel, const void *data, size_t len)
{
	/* The fake is trusted code, but a path it plays back came from a command
	 * line: the string rules are re-checked rather than assumed. */
	if (!rel || airlock_workspace_check_string(rel, strlen(rel), NULL, NULL) < 0)
		return -EINVAL;
	if (!data && len)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	/* A sandbox creates directories as it pleases; only the file/directory
	 * conflicts apply. */
	int r = memws_write_check(m, rel, false);
	if (r == 0)
		r = memws_put(m, rel, data, len, AIRLOCK_PROVENANCE_SANDBOX_WRITTEN);
	pthread_mutex_unlock(&m->lock);
	return r;
}

int memws_sandbox_delete(airlock_memws *m, const char *rel)
{
	if (!rel || airlock_workspace_check_string(rel, strlen(rel), NULL, NULL) < 0)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	size_t idx;
	memws_file *f = memws_find(m, rel, &idx);
	if (f) {
		m->total_bytes -= f->len;
		m->path_bytes -= strlen(f->path) + 1;
		memmove(&m->files[idx], &m->files[idx + 1], (m->n - idx - 1) * sizeof(*m->files));
		m->n--;
		memws_file_free(f);
	}
	pthread_mutex_unlock(&m->lock);
	return 0;
}

void memws_set_limits(airlock_memws *m, int64_t max_bytes, int64_t max_files)
{
	pthread_mutex_lock(&m->lock);
	m->max_bytes = max_bytes > 0 ? max_bytes : 0;
	m->max_files = max_files > 0 ? max_files : 0;
	pthread_mutex_unlock(&m->lock);
}

int memws_snapshot(airlock_memws *m, airlock_snapshot *ret)
{
	airlock_snapshot s = { 0 };
	int r = 0;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->n && r == 0; i++) {
		const memws_file *f = m->files[i];
		/* No clock is involved: the version counter is what changes on
		 * every write, and the id stands in for the inode. */
		r = snapshot_add(&s, f->path, (int64_t)f->len, f->id, 0, 0, f->version);
	}
	pthread_mutex_unlock(&m->lock);
	if (r < 0) {
		snapshot_clear(&s);
		return r;
	}
	snapshot_sort(&s);
	*ret = s;
	return 0;
}

int memws_hash(void *ctx, const char *path, int64_t deadline_ms,
               airlock_snapshot_hashed *ret, airlock_error *err)
{
	/* Bounded by the workspace's own byte cap, in memory: no deadline. */
	(void)deadline_ms;
	airlock_memws *m = ctx;
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	pthread_mutex_lock(&m->lock);
	memws_file *f = path ? memws_find(m, path, NULL) : NULL;
	int r = 0;
	if (!f) {
		r = -ENOENT;
	} else {
		/* Only regular files exist here. */
		ret->kind = AIRLOCK_FILE_REGULAR;
		r = util_sha256_hex(f->data, f->len, ret->hex);
		ret->size = (int64_t)f->len;
	}
	pthread_mutex_unlock(&m->lock);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "hash %s",
		                         airlock_workspace_quote(path, path ? strlen(path) : 0, q));
	return 0;
}
