/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The local-directory workspace adapter (the specification,
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
 *
 * The map is local_records.c, listdir's bounded heap of names
 * local_names.c; the state they share is local_state.h.
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
#include "workspace/local/local_names.h"
#include "workspace/local/local_state.h"

#define LOCAL_TMP_PREFIX ".airlock-write-"
#define LOCAL_TMP_ATTEMPTS 8
#define LOCAL_IO_CHUNK ((size_t)1 << 16)

/* ---- helpers ------------------------------------------------------------- */

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
	/* open(2) of a socket (or of a device with nothing behind it) is
	 * ENXIO: a file the sandbox made that no read can take, the same
	 * caller's mistake as a FIFO's, never the workspace failing (an errno
	 * the API does not carry would reach the caller as the service
	 * unavailable). */
	if (e == ENXIO)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "%s %s: not a regular file", op, q);
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "%s %s", op, q);
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

/* ---- stream ----------------------------------------------------------------- */

/* An open file being streamed: its own descriptor (so the reader outlives
 * the adapter's ctx, as the port asks) and the identity it had at the
 * open, compared again at the end. */
typedef struct local_reader {
	int fd;
	struct stat st;
	uint64_t off;
	char *rel; /* for messages */
} local_reader;

static void local_stream_close(void *reader)
{
	local_reader *lr = reader;
	if (!lr)
		return;
	if (lr->fd >= 0)
		close(lr->fd);
	free(lr->rel);
	free(lr);
}

static int local_stream_open(void *ctx, const char *rel, uint64_t max_bytes, void **ret_reader,
                             uint64_t *ret_size, airlock_error *err)
{
	local_ws *l = ctx;
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	airlock_workspace_quote(rel, strlen(rel), q);

	/* RESOLVE_NO_SYMLINKS on top of the usual resolution: no link is
	 * followed anywhere on the path, so the bytes that leave are those at
	 * exactly the path named, never a file a sandbox pointed a link at
	 * between a check and the open (read follows a link that stays
	 * inside; an export is stricter because what it carries out is kept).
	 * O_NONBLOCK keeps a planted FIFO from hanging the open. */
	int fd = local_open_resolve(l->dirfd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW,
	                            RESOLVE_NO_SYMLINKS);
	if (fd == -ELOOP)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "stream %s: a symbolic link is on the path, and a stream "
		                         "follows none (name the file itself)",
		                         q);
	if (fd < 0)
		return local_open_error(err, -fd, "stream", rel);
	_cleanup_free_ local_reader *lr = calloc(1, sizeof(*lr));
	if (!lr) {
		close(fd);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "stream %s", q);
	}
	lr->fd = fd;
	int r = 0;
	if (fstat(fd, &lr->st) < 0)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "stream %s", q);
	else if (S_ISDIR(lr->st.st_mode))
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EISDIR, "stream %s", q);
	else if (!S_ISREG(lr->st.st_mode))
		r = airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                      "stream %s: not a regular file", q);
	else if (lr->st.st_size < 0 || (uint64_t)lr->st.st_size > max_bytes)
		r = airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                      "stream %s: file is %jd bytes, more than the %llu allowed", q,
		                      (intmax_t)lr->st.st_size, (unsigned long long)max_bytes);
	else if (!(lr->rel = strdup(rel)))
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "stream %s", q);
	if (r < 0) {
		local_stream_close(TAKE_PTR(lr));
		return r;
	}
	/* Read once, front to back: the kernel may read ahead further. */
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	*ret_size = (uint64_t)lr->st.st_size;
	*ret_reader = TAKE_PTR(lr);
	return 0;
}

/* The file is still the one opened, untouched since: same inode, size,
 * modification and change times. A write after the open moves the ctime
 * (no unprivileged call sets it back), so a file that changed while it
 * was read is never passed off as one version. */
static bool local_reader_unchanged(const local_reader *lr, const struct stat *now)
{
	return now->st_dev == lr->st.st_dev && now->st_ino == lr->st.st_ino &&
	       now->st_size == lr->st.st_size &&
	       now->st_mtim.tv_sec == lr->st.st_mtim.tv_sec &&
	       now->st_mtim.tv_nsec == lr->st.st_mtim.tv_nsec &&
	       now->st_ctim.tv_sec == lr->st.st_ctim.tv_sec &&
	       now->st_ctim.tv_nsec == lr->st.st_ctim.tv_nsec;
}

static int local_stream_read(void *ctx, void *reader, void *buf, size_t max, size_t *ret_n,
                             airlock_error *err)
{
	(void)ctx;
	local_reader *lr = reader;
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	uint64_t left = (uint64_t)lr->st.st_size - lr->off;
	if (left == 0) {
		struct stat now;
		if (fstat(lr->fd, &now) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "stream %s",
			                         airlock_workspace_quote(lr->rel, strlen(lr->rel), q));
		if (!local_reader_unchanged(lr, &now))
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EAGAIN,
			                         "stream %s: the file changed while it was read; "
			                         "export it again once nothing writes it",
			                         airlock_workspace_quote(lr->rel, strlen(lr->rel), q));
		*ret_n = 0;
		return 0;
	}
	size_t want = left < max ? (size_t)left : max;
	for (;;) {
		ssize_t n = pread(lr->fd, buf, want, (off_t)lr->off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "stream %s",
			                         airlock_workspace_quote(lr->rel, strlen(lr->rel), q));
		if (n == 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EAGAIN,
			                         "stream %s: the file shrank while it was read; "
			                         "export it again once nothing writes it",
			                         airlock_workspace_quote(lr->rel, strlen(lr->rel), q));
		lr->off += (uint64_t)n;
		*ret_n = (size_t)n;
		return 0;
	}
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
	.stream_open = local_stream_open,
	.stream_read = local_stream_read,
	.stream_close = local_stream_close,
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
