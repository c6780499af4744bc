/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The local-directory workspace adapter (Milestone 4; the specification,
 * "WorkspaceHandle").
 *
 * The adapter holds a directory descriptor and nothing else that names the
 * directory: no path string exists anywhere in it, so none can leak into an
 * error message (gate spec_has_no_host_path) and none can be re-resolved
 * after a rename. Every lookup goes through openat2 on that descriptor with
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV: the kernel
 * refuses any step of the walk that would leave the directory (a "..", an
 * absolute symlink, a /proc magic link, a mount crossing), so containment is
 * decided at the moment of use rather than by an earlier check a concurrent
 * writer could invalidate.
 *
 * Provenance (the specification, "Provenance, and why the handle answers
 * it") is an in-memory map beside the descriptor: relative path -> the
 * identity (st_dev, st_ino, st_ctim, st_size) the file had right after
 * write() put it there. provenance() answers TOOL_WRITTEN only while the file
 * at that path still has exactly that identity. Anything that replaces or
 * modifies it changes the inode or the ctime (no unprivileged call can set
 * ctime back), so bytes someone else put there are never laundered as the
 * tool's own. This relies on the filesystem giving a fresh ctime to a change
 * made after the ctime was observed, which multigrain timestamps guarantee
 * (tmpfs and ext4 on the kernels we measured: docs/design-notes.md).
 *
 * Thread safety: every method may be called concurrently; the map has its
 * own lock and the filesystem operations need none.
 */
#include "airlock/port/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <search.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "util/syscalls.h"
#include "util/util.h"

/* Every lookup below the descriptor uses these; see the file comment. */
#define LOCAL_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
/* openat2 returns EAGAIN when a rename raced a scoped ".." walk; a retry is
 * the documented answer, and a bounded one keeps a hostile renamer from
 * spinning us forever. */
#define LOCAL_OPEN_RETRIES 16
#define LOCAL_TMP_PREFIX ".airlock-write-"
#define LOCAL_TMP_ATTEMPTS 8
#define LOCAL_IO_CHUNK ((size_t)1 << 16)

typedef struct local_record {
	const char *path; /* points at name[] */
	dev_t dev;
	ino_t ino;
	struct timespec ctime;
	off_t size;
	char name[];
} local_record;

/* What one record costs the service besides its path and NUL: the record's
 * fields, the search tree's node (three words) and the two allocations'
 * headers and rounding. AIRLOCK_LOCAL_RECORDS_BYTES_MAX is counted in it. */
#define LOCAL_RECORD_OVERHEAD (sizeof(local_record) + 48)
/* A table at its bound is swept for records that no longer match their file
 * (deleted, replaced or changed by someone else) at most this often: a
 * sweep stats every record, and a client writing into a full table must not
 * make the service do that on every write. */
#define LOCAL_SWEEP_INTERVAL_MS 1000

typedef struct local_ws {
	int dirfd;
	airlock_provenance foreign;
	uid_t owner_uid; /* the root directory's owner: files write() creates are theirs */
	gid_t owner_gid;
	pthread_mutex_t lock; /* guards the record fields below */
	void *records;        /* tsearch tree of local_record *, by path */
	size_t n_records;
	size_t record_bytes;  /* their cost: path, NUL and LOCAL_RECORD_OVERHEAD each */
	int64_t last_sweep_ms; /* monotonic; 0: never */
} local_ws;

/* ---- helpers ------------------------------------------------------------- */

/* openat2 beneath the workspace; "" is the directory itself. Returns a
 * descriptor (always O_CLOEXEC) or -errno. */
static int local_open(int dirfd, const char *rel, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)(unsigned)(flags | O_CLOEXEC),
		.resolve = LOCAL_RESOLVE,
	};
	for (int i = 0;; i++) {
		int fd = sys_openat2(dirfd, *rel ? rel : ".", &how);
		if (fd >= 0)
			return fd;
		int e = errno;
		if ((e == EAGAIN || e == EINTR) && i < LOCAL_OPEN_RETRIES)
			continue;
		return -e;
	}
}

/* An openat2 failure at use: a way out of the workspace is WorkspaceEscape
 * (the path passed contain() earlier, so something changed underneath), the
 * rest is the plain system error it is. */
static int local_open_error(airlock_error *err, int e, const char *op, const char *rel)
{
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	airlock_workspace_quote(rel, strlen(rel), q);
	if (e == EXDEV)
		return airlock_error_set(err, AIRLOCK_ERR_WORKSPACE_ESCAPE, 0,
		                         "%s %s: rule 3: resolves outside the workspace", op, q);
	if (e == ELOOP)
		return airlock_error_set(err, AIRLOCK_ERR_WORKSPACE_ESCAPE, 0,
		                         "%s %s: rule 3: symlink loop or magic link", op, q);
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "%s %s", op, q);
}

static int local_record_cmp(const void *a, const void *b)
{
	return strcmp(((const local_record *)a)->path, ((const local_record *)b)->path);
}

static bool local_identity_equal(const local_record *r, const struct stat *st)
{
	return r->dev == st->st_dev && r->ino == st->st_ino && r->size == st->st_size &&
	       r->ctime.tv_sec == st->st_ctim.tv_sec && r->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

/* ---- contain ------------------------------------------------------------- */

static int local_contain(void *ctx, const char *rel, airlock_error *err)
{
	local_ws *l = ctx;
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];

	/* O_PATH opens without reading or side effects (a FIFO does not block,
	 * a device is not opened) and follows every symlink, the final one
	 * included: a final link pointing outward is an escape even though
	 * write() would replace the link rather than follow it. */
	int fd = local_open(l->dirfd, rel, O_PATH);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	int e = -fd;
	if (e == ENOENT || e == ENOTDIR) {
		/* Not there yet. The kernel walks left to right and would have
		 * reported EXDEV for an escaping step before the missing one, but the
		 * parent chain is opened again here so that a "does not exist" can
		 * never stand in for a verdict: the longest existing prefix must
		 * itself resolve beneath. "" (the root) always does. */
		_cleanup_free_ char *prefix = strdup(rel);
		if (!prefix)
			return airlock_error_set(err, AIRLOCK_ERR_WORKSPACE_ESCAPE, ENOMEM,
			                         "contain %s",
			                         airlock_workspace_quote(rel, strlen(rel), q));
		for (;;) {
			char *slash = strrchr(prefix, '/');
			if (!slash)
				return 0;
			*slash = 0;
			fd = local_open(l->dirfd, prefix, O_PATH);
			if (fd >= 0) {
				close(fd);
				return 0;
			}
			e = -fd;
			if (e != ENOENT && e != ENOTDIR)
				break;
		}
	}
	airlock_workspace_quote(rel, strlen(rel), q);
	if (e == EXDEV)
		return airlock_error_set(err, AIRLOCK_ERR_WORKSPACE_ESCAPE, 0,
		                         "path %s rejected: rule 3: resolves outside the workspace", q);
	if (e == ELOOP)
		return airlock_error_set(err, AIRLOCK_ERR_WORKSPACE_ESCAPE, 0,
		                         "path %s rejected: rule 3: symlink loop or magic link", q);
	/* Anything else (EACCES, EMFILE, ...) means containment was not shown;
	 * rule 5 says that is a rejection, and the errno says why. */
	return airlock_error_set(err, AIRLOCK_ERR_WORKSPACE_ESCAPE, e,
	                         "path %s rejected: rule 3: containment not established", q);
}

/* ---- read ---------------------------------------------------------------- */

static int local_read(void *ctx, const char *rel, size_t max_bytes, unsigned char **ret_data,
                      size_t *ret_len, airlock_error *err)
{
	local_ws *l = ctx;
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];

	/* A final symlink is followed: RESOLVE_BENEATH keeps wherever it leads
	 * inside the workspace. O_NONBLOCK keeps a planted FIFO from hanging the
	 * open; O_NOCTTY keeps a terminal from becoming ours. */
	_cleanup_close_ int fd = local_open(l->dirfd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return local_open_error(err, -fd, "read", rel);

	struct stat st;
	if (fstat(fd, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "read %s",
		                         airlock_workspace_quote(rel, strlen(rel), q));
	if (S_ISDIR(st.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EISDIR, "read %s",
		                         airlock_workspace_quote(rel, strlen(rel), q));
	if (!S_ISREG(st.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "read %s: not a regular file",
		                         airlock_workspace_quote(rel, strlen(rel), q));
	if (st.st_size < 0 || (uint64_t)st.st_size > max_bytes)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "read %s: file is %jd bytes, more than the %zu allowed",
		                         airlock_workspace_quote(rel, strlen(rel), q),
		                         (intmax_t)st.st_size, max_bytes);

	/* The size can change between fstat and read, so the loop enforces the
	 * cap on its own: it reads at most max_bytes + 1 bytes and refuses if the
	 * extra byte arrived. The buffer starts at the observed size and grows
	 * geometrically, never past the cap. */
	size_t cap = max_bytes >= SIZE_MAX - 1 ? SIZE_MAX - 1 : max_bytes + 1;
	size_t alloc = (size_t)st.st_size + 1;
	if (alloc > cap)
		alloc = cap;
	if (alloc < 64)
		alloc = cap < 64 ? cap : 64;
	_cleanup_free_ unsigned char *buf = malloc(alloc + 1);
	if (!buf)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "read %s",
		                         airlock_workspace_quote(rel, strlen(rel), q));
	size_t len = 0;
	for (;;) {
		if (len == alloc) {
			if (alloc == cap)
				break;
			size_t n = alloc > cap / 2 ? cap : alloc * 2;
			unsigned char *p = realloc(buf, n + 1);
			if (!p)
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "read %s",
				                         airlock_workspace_quote(rel, strlen(rel), q));
			buf = p;
			alloc = n;
		}
		size_t want = alloc - len;
		if (want > LOCAL_IO_CHUNK)
			want = LOCAL_IO_CHUNK;
		ssize_t n = read(fd, buf + len, want);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "read %s",
			                         airlock_workspace_quote(rel, strlen(rel), q));
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > max_bytes)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "read %s: file grew past the %zu bytes allowed",
		                         airlock_workspace_quote(rel, strlen(rel), q), max_bytes);
	buf[len] = 0; /* a convenience for text callers; not counted */
	*ret_data = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

/* ---- write --------------------------------------------------------------- */

static size_t local_record_cost(const char *rel)
{
	return strlen(rel) + 1 + LOCAL_RECORD_OVERHEAD;
}

/* Out of the table and freed. Under l->lock. */
static void local_record_drop(local_ws *l, local_record *rec)
{
	tdelete(rec, &l->records, local_record_cmp);
	l->record_bytes -= local_record_cost(rec->path);
	l->n_records--;
	free(rec);
}

/* Whether a new record of cost bytes fits both bounds. Under l->lock. */
static bool local_record_fits(const local_ws *l, size_t cost)
{
	return l->n_records < AIRLOCK_LOCAL_RECORDS_MAX &&
	       cost <= AIRLOCK_LOCAL_RECORDS_BYTES_MAX - l->record_bytes;
}

/* A sweep's list of records to drop: the walk cannot delete as it goes. */
typedef struct local_sweep {
	local_ws *l;
	local_record **v;
	size_t n;
} local_sweep;

/* The identity of the entry at rel itself (not followed), beneath the root:
 * 0, or -errno. */
static int local_identity(local_ws *l, const char *rel, struct stat *st)
{
	_cleanup_close_ int fd = local_open(l->dirfd, rel, O_PATH | O_NOFOLLOW);
	if (fd < 0)
		return fd;
	return fstat(fd, st) < 0 ? -errno : 0;
}

static void local_sweep_visit(const void *node, VISIT which, void *arg)
{
	local_sweep *sw = arg;
	if (which != postorder && which != leaf)
		return;
	local_record *rec = *(local_record *const *)node;
	struct stat st;
	/* A record that does not match its file now never will again (its
	 * ctime only moves forward), so it can only ever say "not the tool's":
	 * dropping it gives the same answer. Any failure to look counts the
	 * same way, which errs toward the foreign answer. */
	if (local_identity(sw->l, rec->path, &st) < 0 || !local_identity_equal(rec, &st))
		sw->v[sw->n++] = rec;
}

/* Drop every record whose file is gone or no longer the one write() made
 * (a sandbox deletes and replaces files without telling anyone). Under
 * l->lock; at most once per LOCAL_SWEEP_INTERVAL_MS. 0 or -ENOMEM. */
static int local_records_sweep(local_ws *l)
{
	int64_t now = util_monotonic_ms();
	if (l->last_sweep_ms && now - l->last_sweep_ms < LOCAL_SWEEP_INTERVAL_MS)
		return 0;
	l->last_sweep_ms = now;
	local_sweep sw = { .l = l, .v = calloc(l->n_records ? l->n_records : 1, sizeof(*sw.v)) };
	if (!sw.v)
		return -ENOMEM;
	twalk_r(l->records, local_sweep_visit, &sw);
	for (size_t i = 0; i < sw.n; i++)
		local_record_drop(l, sw.v[i]);
	free(sw.v);
	return 0;
}

/* Whether rel can be recorded: it has a record already, or a new one fits
 * (after a sweep when the table is at its bound). Under l->lock. */
static bool local_record_room_locked(local_ws *l, const char *rel)
{
	local_record key = { .path = rel };
	if (tfind(&key, &l->records, local_record_cmp))
		return true;
	size_t cost = local_record_cost(rel);
	if (local_record_fits(l, cost))
		return true;
	return local_records_sweep(l) == 0 && local_record_fits(l, cost);
}

/* Refuse early, before the filesystem is touched, when recording this path
 * would pass the table's bounds. */
static int local_record_room(local_ws *l, const char *rel, airlock_error *err)
{
	pthread_mutex_lock(&l->lock);
	bool ok = local_record_room_locked(l, rel);
	size_t n = l->n_records, bytes = l->record_bytes;
	pthread_mutex_unlock(&l->lock);
	if (ok)
		return 0;
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOSPC,
	                         "write %s: the provenance record is full (%zu paths in %zu bytes; "
	                         "at most %d paths and %zu bytes)",
	                         airlock_workspace_quote(rel, strlen(rel), q), n, bytes,
	                         AIRLOCK_LOCAL_RECORDS_MAX, (size_t)AIRLOCK_LOCAL_RECORDS_BYTES_MAX);
}

/* Set rel's record to st's identity, inserting it if needed. */
static int local_record_set(local_ws *l, const char *rel, const struct stat *st)
{
	local_record key = { .path = rel };
	int r = 0;
	pthread_mutex_lock(&l->lock);
	local_record **found = tfind(&key, &l->records, local_record_cmp);
	local_record *rec = found ? *found : NULL;
	if (!rec) {
		size_t n = strlen(rel) + 1;
		if (!local_record_room_locked(l, rel)) {
			r = -ENOSPC;
			goto out;
		}
		rec = malloc(sizeof(*rec) + n);
		if (!rec) {
			r = -ENOMEM;
			goto out;
		}
		memcpy(rec->name, rel, n);
		rec->path = rec->name;
		if (!tsearch(rec, &l->records, local_record_cmp)) {
			free(rec);
			r = -ENOMEM;
			goto out;
		}
		l->n_records++;
		l->record_bytes += local_record_cost(rel);
	}
	rec->dev = st->st_dev;
	rec->ino = st->st_ino;
	rec->ctime = st->st_ctim;
	rec->size = st->st_size;
out:
	pthread_mutex_unlock(&l->lock);
	return r;
}

/* 1 when the file behind fd holds exactly data, 0 when not, -errno. */
static int local_same_bytes(int fd, const void *data, size_t len)
{
	unsigned char buf[4096];
	const unsigned char *p = data;
	size_t off = 0;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return off == len;
		if ((size_t)n > len - off || memcmp(buf, p + off, (size_t)n) != 0)
			return 0;
		off += (size_t)n;
	}
}

static int local_write(void *ctx, const char *rel, const void *data, size_t len, airlock_error *err)
{
	local_ws *l = ctx;
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	airlock_workspace_quote(rel, strlen(rel), q);

	int r = local_record_room(l, rel, err);
	if (r < 0)
		return r;

	const char *slash = strrchr(rel, '/');
	const char *leaf = slash ? slash + 1 : rel;
	_cleanup_free_ char *parent = slash ? strndup(rel, (size_t)(slash - rel)) : strdup("");
	if (!parent)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "write %s", q);

	/* The parent is resolved beneath the root (intermediate symlinks that
	 * stay inside are fine); from here on every call is relative to this
	 * descriptor with a single-component name, which no symlink elsewhere
	 * can redirect. Parents must exist: nothing is created on the way. */
	_cleanup_close_ int pfd = local_open(l->dirfd, parent, O_PATH | O_DIRECTORY);
	if (pfd < 0)
		return local_open_error(err, -pfd, "write", rel);

	/* The bytes go to a fresh temporary in the same directory first.
	 * O_CREAT|O_EXCL never follows a symlink and never opens an existing
	 * file, so the temporary is a new inode that only we hold. */
	_cleanup_close_ int fd = -1;
	char tmp[sizeof(LOCAL_TMP_PREFIX) + 16];
	for (int attempt = 0; fd < 0; attempt++) {
		uint64_t rnd;
		r = util_random(&rnd, sizeof(rnd));
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "write %s", q);
		snprintf(tmp, sizeof(tmp), LOCAL_TMP_PREFIX "%016" PRIx64, rnd);
		fd = openat(pfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
		            0644);
		if (fd < 0 && (errno != EEXIST || attempt + 1 >= LOCAL_TMP_ATTEMPTS))
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "write %s", q);
	}

	/* A file the tool writes belongs to whoever owns the workspace, as if
	 * they had written it: on a sandbox's volume that is the sandbox user,
	 * who must be able to change what a tool put there. */
	if ((l->owner_uid != geteuid() || l->owner_gid != getegid()) &&
	    fchown(fd, l->owner_uid, l->owner_gid) < 0) {
		r = -errno;
		goto fail;
	}
	r = util_write_all(fd, data, len);
	if (r < 0)
		goto fail;

	/* rename replaces the directory entry itself: a symlink at the leaf is
	 * replaced, never followed, and a directory there fails with EISDIR.
	 * Readers see the old bytes or the new ones, never a partial file. The
	 * workspace is a cache (the specification, "The workspace is a cache,
	 * not state"), so no fsync. */
	if (renameat(pfd, tmp, pfd, leaf) < 0) {
		r = -errno;
		goto fail;
	}

	/* Provenance in the same operation. The identity is taken after the
	 * rename (which itself changes ctime) and observing it here makes any
	 * later change get a newer ctime. Then the bytes are compared with what
	 * we wrote: if another writer touched the file in the window before the
	 * fstat, it is not recorded as ours. A change after the fstat moves the
	 * ctime past the recorded one and provenance() stops saying
	 * TOOL_WRITTEN. */
	struct stat st;
	if (fstat(fd, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "write %s: written but provenance not recorded", q);
	r = local_same_bytes(fd, data, len);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
		                         "write %s: written but provenance not recorded", q);
	if (r == 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EAGAIN,
		                         "write %s: another writer changed the file during the "
		                         "write; not recorded as tool_written",
		                         q);
	r = local_record_set(l, rel, &st);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
		                         "write %s: written but provenance not recorded", q);
	return 0;

fail:
	/* The temporary is ours by construction (O_EXCL), so removing it by
	 * name in the parent we hold cannot remove anything else. */
	(void)unlinkat(pfd, tmp, 0);
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "write %s", q);
}

/* ---- listdir ------------------------------------------------------------- */

/* A max-heap of names holding the smallest seen that can still be in the
 * listing: at most cap of them (max_entries), and of at most limit bytes of
 * path (AIRLOCK_WORKSPACE_LISTDIR_BYTES_MAX; a name costs the directory's
 * prefix, the name and a NUL). A directory of any size is listed in
 * O(n log k) time and memory within both bounds: past the byte bound the
 * largest name held cannot be in the listing (the listing is the sorted
 * prefix, and the names held are its first ones), so it goes, and the cap
 * shrinks to what is left, so no larger name comes back in. */
typedef struct local_names {
	char **v;
	size_t n;
	size_t alloc;
	size_t cap;
	size_t bytes;  /* the cost of the names held */
	size_t limit;  /* of bytes */
	size_t prefix; /* the cost of the directory's path before each name */
} local_names;

static size_t local_name_cost(const local_names *h, const char *name)
{
	return h->prefix + strlen(name) + 1;
}

static void local_names_clear(local_names *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->v[i]);
	free(h->v);
	*h = (local_names){ 0 };
}

static void local_names_sift_down(local_names *h, size_t i)
{
	for (;;) {
		size_t big = i, a = 2 * i + 1, b = 2 * i + 2;
		if (a < h->n && strcmp(h->v[a], h->v[big]) > 0)
			big = a;
		if (b < h->n && strcmp(h->v[b], h->v[big]) > 0)
			big = b;
		if (big == i)
			return;
		char *t = h->v[i];
		h->v[i] = h->v[big];
		h->v[big] = t;
		i = big;
	}
}

/* Drop the largest names while the ones held cost more than the limit. */
static void local_names_fit(local_names *h)
{
	if (h->bytes <= h->limit)
		return;
	while (h->n > 0 && h->bytes > h->limit) {
		h->bytes -= local_name_cost(h, h->v[0]);
		free(h->v[0]);
		h->v[0] = h->v[--h->n];
		local_names_sift_down(h, 0);
	}
	h->cap = h->n;
}

/* 0, or -ENOMEM. */
static int local_names_offer(local_names *h, const char *name)
{
	if (h->cap == 0)
		return 0;
	if (h->n == h->cap) {
		if (strcmp(name, h->v[0]) >= 0)
			return 0;
		char *s = strdup(name);
		if (!s)
			return -ENOMEM;
		h->bytes -= local_name_cost(h, h->v[0]);
		free(h->v[0]);
		h->v[0] = s;
		h->bytes += local_name_cost(h, s);
		local_names_sift_down(h, 0);
		local_names_fit(h);
		return 0;
	}
	if (h->n == h->alloc) {
		size_t n = h->alloc ? h->alloc * 2 : 64;
		if (n > h->cap)
			n = h->cap;
		char **p = reallocarray(h->v, n, sizeof(*p));
		if (!p)
			return -ENOMEM;
		h->v = p;
		h->alloc = n;
	}
	char *s = strdup(name);
	if (!s)
		return -ENOMEM;
	size_t i = h->n++;
	h->v[i] = s;
	h->bytes += local_name_cost(h, s);
	while (i > 0) {
		size_t up = (i - 1) / 2;
		if (strcmp(h->v[up], h->v[i]) >= 0)
			break;
		char *t = h->v[i];
		h->v[i] = h->v[up];
		h->v[up] = t;
		i = up;
	}
	local_names_fit(h);
	return 0;
}

static int local_names_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int local_listdir(void *ctx, const char *rel, size_t max_entries, airlock_dir_listing *ret,
                         airlock_error *err)
{
	local_ws *l = ctx;
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	airlock_workspace_quote(rel, strlen(rel), q);

	_cleanup_close_ int fd = local_open(l->dirfd, rel, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return local_open_error(err, -fd, "listdir", rel);
	_cleanup_closedir_ DIR *d = fdopendir(fd);
	if (!d)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "listdir %s", q);
	fd = -1; /* the DIR owns it now */

	__attribute__((cleanup(local_names_clear))) local_names names = {
		.cap = max_entries,
		.limit = AIRLOCK_WORKSPACE_LISTDIR_BYTES_MAX,
		.prefix = *rel ? strlen(rel) + 1 : 0,
	};
	size_t seen = 0;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			if (errno)
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "listdir %s", q);
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		seen++;
		if (local_names_offer(&names, de->d_name) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "listdir %s", q);
	}
	if (names.n > 1)
		qsort(names.v, names.n, sizeof(*names.v), local_names_cmp);

	airlock_dir_listing out = { .truncated = seen > names.n };
	if (names.n) {
		out.entries = calloc(names.n, sizeof(*out.entries));
		if (!out.entries)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "listdir %s", q);
	}
	for (size_t i = 0; i < names.n; i++) {
		/* A single name under a descriptor we hold, not followed: the stat
		 * describes the entry itself, wherever a symlink would point. */
		struct stat st;
		if (fstatat(dirfd(d), names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue; /* removed since readdir: not listed */
			int e = errno;
			airlock_dir_listing_clear(&out);
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "listdir %s", q);
		}
		airlock_dir_entry *ent = &out.entries[out.n];
		if (*rel) {
			if (asprintf(&ent->path, "%s/%s", rel, names.v[i]) < 0)
				ent->path = NULL;
		} else {
			ent->path = strdup(names.v[i]);
		}
		if (!ent->path) {
			airlock_dir_listing_clear(&out);
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "listdir %s", q);
		}
		out.n++;
		if (S_ISREG(st.st_mode)) {
			ent->type = AIRLOCK_ENTRY_FILE;
			ent->size_bytes = st.st_size;
		} else if (S_ISDIR(st.st_mode)) {
			ent->type = AIRLOCK_ENTRY_DIRECTORY;
		} else if (S_ISLNK(st.st_mode)) {
			ent->type = AIRLOCK_ENTRY_SYMLINK;
		} else {
			ent->type = AIRLOCK_ENTRY_OTHER;
		}
	}
	*ret = out;
	return 0;
}

/* ---- provenance ---------------------------------------------------------- */

static int local_provenance(void *ctx, const char *rel, airlock_provenance *ret, airlock_error *err)
{
	local_ws *l = ctx;

	/* O_NOFOLLOW: the identity is of the entry at this path itself. If it
	 * is now a symlink (even to a tool-written file) it is not the inode
	 * write() put here, and the answer is the foreign one. */
	_cleanup_close_ int fd = local_open(l->dirfd, rel, O_PATH | O_NOFOLLOW);
	local_record key = { .path = rel };
	if (fd < 0) {
		if (fd == -ENOENT || fd == -ENOTDIR) {
			/* A path nobody has put anything at: UNKNOWN, the same answer
			 * as for an untrusted file, so a missing record fails safe.
			 * A record of a file deleted since is dropped: a file made
			 * there later is a new inode it could never match. */
			pthread_mutex_lock(&l->lock);
			local_record **found = tfind(&key, &l->records, local_record_cmp);
			if (found)
				local_record_drop(l, *found);
			pthread_mutex_unlock(&l->lock);
			*ret = AIRLOCK_PROVENANCE_UNKNOWN;
			return 0;
		}
		return local_open_error(err, -fd, "provenance", rel);
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "provenance %s",
		                         airlock_workspace_quote(rel, strlen(rel), q));
	}

	airlock_provenance p = l->foreign;
	pthread_mutex_lock(&l->lock);
	local_record **found = tfind(&key, &l->records, local_record_cmp);
	if (found) {
		local_record *rec = *found;
		if (local_identity_equal(rec, &st))
			p = AIRLOCK_PROVENANCE_TOOL_WRITTEN;
		else
			/* The file was replaced or changed since write(): the ctime
			 * never returns to the recorded value, so the record can never
			 * match again and is dropped to keep the map small. */
			local_record_drop(l, rec);
	}
	pthread_mutex_unlock(&l->lock);
	*ret = p;
	return 0;
}

/* ---- lifecycle ----------------------------------------------------------- */

static void local_free(void *ctx)
{
	local_ws *l = ctx;
	if (!l)
		return;
	tdestroy(l->records, free);
	pthread_mutex_destroy(&l->lock);
	if (l->dirfd >= 0)
		close(l->dirfd);
	free(l);
}

static const airlock_workspace_ops local_ops = {
	.version = AIRLOCK_WORKSPACE_OPS_VERSION,
	.name = "local",
	.contain = local_contain,
	.read = local_read,
	.write = local_write,
	.listdir = local_listdir,
	.provenance = local_provenance,
	.free = local_free,
};

int airlock_workspace_local_new(int dirfd, airlock_provenance foreign, airlock_workspace **ret,
                                airlock_error *err)
{
	_cleanup_close_ int fd = dirfd;
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EBADF, "local workspace");
	/* TOOL_WRITTEN as the foreign answer would label every file nobody
	 * recorded as the tool's own: exactly the laundering the record exists
	 * to prevent. */
	if (foreign != AIRLOCK_PROVENANCE_UNKNOWN && foreign != AIRLOCK_PROVENANCE_SANDBOX_WRITTEN)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "local workspace: foreign provenance must be unknown or "
		                         "sandbox_written");
	struct stat st;
	if (fstat(fd, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "local workspace");
	if (!S_ISDIR(st.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOTDIR, "local workspace");
	/* The caller's descriptor becomes ours; it must not reach a child. */
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "local workspace");
	/* There is no fallback without openat2: a path walk checked in user
	 * space races with whoever else writes the directory. Refuse instead. */
	int probe = local_open(fd, "", O_PATH | O_DIRECTORY);
	if (probe < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -probe,
		                         "local workspace: openat2 with RESOLVE_BENEATH is required");
	close(probe);

	local_ws *l = calloc(1, sizeof(*l));
	if (!l)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "local workspace");
	l->owner_uid = st.st_uid;
	l->owner_gid = st.st_gid;
	int r = pthread_mutex_init(&l->lock, NULL);
	if (r != 0) {
		free(l);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, r, "local workspace");
	}
	l->dirfd = TAKE_FD(fd);
	l->foreign = foreign;
	return airlock_workspace_new(&local_ops, l, ret, err);
}
