/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image store: EROFS images kept under their SHA-256
 * (include/airlock/image_store.h has the contracts). Verification and its
 * cache are in image_verify.c; building images is src/image/'s.
 *
 * Two rules run through the store:
 *   - a digest name is only ever created by linking a complete, fsynced file
 *     whose digest was computed from its bytes, never by writing in place;
 *   - every file-system operation is relative to a directory descriptor and
 *     refuses symlinks, so a path inside the store cannot be redirected.
 */
#include "host/image_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "host/tree.h"
#include "util/util.h"

/* ---- small helpers -------------------------------------------------------- */

int host_image_random_name(const char *prefix, char *out, size_t size)
{
	unsigned char b[8];
	int r = util_random(b, sizeof(b));
	if (r < 0)
		return r;
	snprintf(out, size, "%s%02x%02x%02x%02x%02x%02x%02x%02x", prefix, b[0], b[1], b[2], b[3],
	         b[4], b[5], b[6], b[7]);
	return 0;
}

void host_image_digest_from_hex(const char *hex, char out[AIRLOCK_IMAGE_DIGEST_SIZE])
{
	snprintf(out, AIRLOCK_IMAGE_DIGEST_SIZE, SHA256_PREFIX "%s", hex);
}

void host_image_file_name(const char *hex, char *out, size_t size)
{
	snprintf(out, size, "%s" IMAGE_SUFFIX, hex);
}

/* ---- the store ------------------------------------------------------------ */

/* The store and its subdirectories: a directory, ours, writable by no one
 * else. Read access for others is allowed: images are not secret, and
 * reading one cannot change what a digest names. */
static int check_store_dir(int fd, const char *what, airlock_error *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store %s", what);
	if (!S_ISDIR(st.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "image store %s is not a directory",
		                         what);
	if (st.st_uid != geteuid())
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "image store %s is owned by uid %u, not by this process's uid %u: a store someone else can write is a supply-chain hole (they could put any image under a digest name)",
		                         what, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "image store %s is writable by %s (mode %04o): a store someone else can write is a supply-chain hole (they could put any image under a digest name); chmod 0700 it",
		                         what, (st.st_mode & S_IWOTH) ? "everyone" : "its group",
		                         (unsigned)(st.st_mode & 07777));
	return 0;
}

/* mkdir -p: missing parents 0755, the store itself 0700. Existing
 * directories are left as they are; their owner and mode are checked
 * afterwards, never repaired. */
static int mkdir_parents(const char *dir, airlock_error *err)
{
	_cleanup_free_ char *p = strdup(dir);
	if (!p)
		return host_image_sys_error(err, ENOMEM, "image store");
	size_t len = strlen(p);
	while (len > 1 && p[len - 1] == '/')
		p[--len] = 0;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
			                         "image store: cannot create %s", p);
		*s = '/';
	}
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store: cannot create %s",
		                         p);
	return 0;
}

/* Every ancestor of the canonical store path must be owned by root or by
 * us, and writable by no one else unless sticky: otherwise its owner or
 * writers could rename the store away and put their own in its place before
 * a path-based step (debootstrap, mkfs.erofs) runs. */
static int check_ancestors(const char *canon, airlock_error *err)
{
	_cleanup_free_ char *p = strdup(canon);
	if (!p)
		return host_image_sys_error(err, ENOMEM, "image store");
	for (;;) {
		char *slash = strrchr(p, '/');
		if (!slash || (slash == p && p[1] == 0))
			break;
		if (slash == p)
			p[1] = 0;
		else
			*slash = 0;
		struct stat st;
		if (lstat(p, &st) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store: %s", p);
		if (st.st_uid != 0 && st.st_uid != geteuid())
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "image store %s: its parent directory %s is owned by uid %u, who could replace the store; a store someone else can write is a supply-chain hole",
			                         canon, p, (unsigned)st.st_uid);
		if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "image store %s: its parent directory %s is writable by others (mode %04o) without the sticky bit, so they could replace the store; a store someone else can write is a supply-chain hole",
			                         canon, p, (unsigned)(st.st_mode & 07777));
	}
	return 0;
}

static int open_subdir(int parent, const char *name, const char *what, int *ret,
                       airlock_error *err)
{
	if (mkdirat(parent, name, 0700) < 0 && errno != EEXIST)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store %s", what);
	/* O_NOFOLLOW: a symlink planted as sha256/ would point the store at a
	 * directory nobody checked. */
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP || e == ENOTDIR)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "image store %s is not a directory (or is a symlink)", what);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "image store %s", what);
	}
	int r = check_store_dir(fd, what, err);
	if (r < 0) {
		close(fd);
		return r;
	}
	*ret = fd;
	return 0;
}

void airlock_image_store_free(airlock_image_store *store)
{
	if (!store)
		return;
	util_closep(&store->dir_fd);
	util_closep(&store->sha_fd);
	util_closep(&store->tmp_fd);
	pthread_mutex_destroy(&store->lock);
	free(store->path);
	free(store);
}

int airlock_image_store_open(const char *dir, airlock_image_store **ret, airlock_error *err)
{
	if (!dir || !*dir)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "image store: no directory given");
	int r = mkdir_parents(dir, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *canon = realpath(dir, NULL);
	if (!canon)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store %s", dir);
	r = check_ancestors(canon, err);
	if (r < 0)
		return r;

	airlock_image_store *s = calloc(1, sizeof(*s));
	if (!s)
		return host_image_sys_error(err, ENOMEM, "image store");
	s->dir_fd = s->sha_fd = s->tmp_fd = -1;
	if (pthread_mutex_init(&s->lock, NULL) != 0) {
		free(s);
		return host_image_sys_error(err, ENOMEM, "image store lock");
	}
	/* The canonical path has no symlinks left, so O_NOFOLLOW only refuses
	 * one swapped in since realpath. */
	s->dir_fd = open(canon, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s->dir_fd < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store %s", canon);
		goto fail;
	}
	r = check_store_dir(s->dir_fd, canon, err);
	if (r < 0)
		goto fail;
	struct stat st;
	if (fstat(s->dir_fd, &st) < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store %s", canon);
		goto fail;
	}
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	char what[PATH_MAX + 16];
	snprintf(what, sizeof(what), "%s/sha256", canon);
	r = open_subdir(s->dir_fd, "sha256", what, &s->sha_fd, err);
	if (r < 0)
		goto fail;
	snprintf(what, sizeof(what), "%s/tmp", canon);
	r = open_subdir(s->dir_fd, "tmp", what, &s->tmp_fd, err);
	if (r < 0)
		goto fail;
	s->path = TAKE_PTR(canon);
	*ret = s;
	return 0;
fail:
	airlock_image_store_free(s);
	return r;
}

const char *airlock_image_store_path(const airlock_image_store *store)
{
	return store->path;
}

uint64_t airlock_image_store_hash_count(airlock_image_store *store)
{
	pthread_mutex_lock(&store->lock);
	uint64_t n = store->hashes;
	pthread_mutex_unlock(&store->lock);
	return n;
}

/* The store's path still names the directory we opened (checked before a
 * path is handed to an external program). */
int host_image_store_path_check(airlock_image_store *store, airlock_error *err)
{
	struct stat st;
	if (lstat(store->path, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store %s", store->path);
	if (!S_ISDIR(st.st_mode) || st.st_dev != store->dev || st.st_ino != store->ino)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "image store %s was replaced while open; refusing to build into it",
		                         store->path);
	return 0;
}

/* ---- publishing a file under its digest ----------------------------------------- */

/*
 * Give src_dir/src_name (complete, fsynced, 0444, hashing to hex; under the
 * store's tmp/) its digest name. linkat never replaces an existing name, so a concurrent publisher
 * of the same digest cannot be overwritten and no reader ever sees a
 * partial file. When the name exists and its file still verifies, it is
 * kept (same bytes by definition); when it no longer does, it was altered
 * or damaged after it was stored and the fresh copy replaces it with an
 * atomic rename. *ret_new says whether this call stored the bytes. The
 * source name is removed in every case.
 */
int host_image_publish(airlock_image_store *store, int src_dir, const char *src_name, const char *hex,
                   bool *ret_new, airlock_error *err)
{
	char final[AIRLOCK_SHA256_HEX_LEN + sizeof(IMAGE_SUFFIX)];
	host_image_file_name(hex, final, sizeof(final));
	int r = 0;
	bool fresh = false;
	if (linkat(src_dir, src_name, store->sha_fd, final, 0) == 0) {
		fresh = true;
	} else if (errno == EEXIST) {
		airlock_error verr = { 0 };
		int fd = -1;
		r = host_image_verify_open(store, hex, &fd, &verr);
		if (r == 0) {
			close(fd);
		} else if (airlock_errcode_class(r) == AIRLOCK_ERR_EXECUTION_REJECTED) {
			if (renameat(src_dir, src_name, store->sha_fd, final) < 0)
				r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
				                      "image store: replacing the damaged sha256:%s", hex);
			else
				r = 0, fresh = true;
		} else if (err) {
			*err = verr;
		}
	} else {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store: storing sha256:%s",
		                      hex);
	}
	unlinkat(src_dir, src_name, 0);
	if (r == 0 && fresh && fsync(store->sha_fd) < 0)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store: fsync sha256/");
	if (r == 0 && ret_new)
		*ret_new = fresh;
	return r;
}

/* fsync, hash, make read-only: the steps between writing a temporary image
 * and publishing it. The hash is of the bytes on disk after fsync, read
 * back through the same descriptor. */
int host_image_seal_tmp(int fd, char hex[AIRLOCK_SHA256_HEX_LEN + 1], airlock_error *err)
{
	if (fsync(fd) < 0)
		return host_image_sys_error(err, errno, "image store: fsync");
	int r = host_image_hash_fd(fd, hex);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image store: hashing");
	if (fchmod(fd, 0444) < 0)
		return host_image_sys_error(err, errno, "image store: chmod 0444");
	return 0;
}

int airlock_image_import(airlock_image_store *store, int fd,
                         char ret_digest[AIRLOCK_IMAGE_DIGEST_SIZE], airlock_error *err)
{
	char tmp_name[64];
	int r = host_image_random_name("import-", tmp_name, sizeof(tmp_name));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image import");
	host_image_sweep_tmp(store);
	/* tmp/ is ours and 0700; O_EXCL|O_NOFOLLOW makes sure the name is a
	 * new file of ours and not something planted under it. */
	_cleanup_close_ int out = openat(store->tmp_fd, tmp_name,
	                                 O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image import: temporary file");
	/* Held until the descriptor closes: a sweep by another process leaves
	 * the file alone while we live (see STALE_TMP_SECONDS). */
	flock(out, LOCK_EX | LOCK_NB);
	_cleanup_free_ unsigned char *buf = malloc(READ_CHUNK);
	if (!buf) {
		r = host_image_sys_error(err, ENOMEM, "image import");
		goto fail;
	}
	for (;;) {
		ssize_t n = read(fd, buf, READ_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image import: reading");
			goto fail;
		}
		if (n == 0)
			break;
		r = util_write_all(out, buf, (size_t)n);
		if (r < 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image import: writing");
			goto fail;
		}
	}
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
	r = host_image_seal_tmp(out, hex, err);
	if (r < 0)
		goto fail;
	r = host_image_publish(store, store->tmp_fd, tmp_name, hex, NULL, err);
	if (r < 0)
		return r;
	host_image_digest_from_hex(hex, ret_digest);
	return 0;
fail:
	unlinkat(store->tmp_fd, tmp_name, 0);
	return r;
}

/* ---- listing ------------------------------------------------------------------ */

/* "<64 hex><suffix>" exactly; writes the hex. */
static bool name_is(const char *name, const char *suffix, char hex[AIRLOCK_SHA256_HEX_LEN + 1])
{
	size_t sl = strlen(suffix);
	if (strlen(name) != AIRLOCK_SHA256_HEX_LEN + sl ||
	    strcmp(name + AIRLOCK_SHA256_HEX_LEN, suffix) != 0)
		return false;
	memcpy(hex, name, AIRLOCK_SHA256_HEX_LEN);
	hex[AIRLOCK_SHA256_HEX_LEN] = 0;
	return airlock_sha256_hex_valid(hex);
}

/* Read sha256/<hex>.packages: the suite and package list a build recorded.
 * 0 with both NULL when there is none. */
static int sidecar_read(airlock_image_store *store, const char *hex, char **ret_suite,
                        char **ret_packages, unsigned *ret_recipe)
{
	char name[AIRLOCK_SHA256_HEX_LEN + sizeof(SIDECAR_SUFFIX)];
	snprintf(name, sizeof(name), "%s" SIDECAR_SUFFIX, hex);
	_cleanup_close_ int fd = openat(store->sha_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	*ret_suite = *ret_packages = NULL;
	*ret_recipe = 0;
	if (fd < 0)
		return errno == ENOENT || errno == ELOOP ? 0 : -errno;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = util_read_capped(fd, AIRLOCK_IMAGE_SIDECAR_MAX, &text, &len);
	if (r < 0)
		return r;
	if (memchr(text, 0, len))
		return 0;
	_cleanup_free_ char *suite = NULL, *packages = NULL;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char **slot = NULL;
		const char *value = NULL;
		if (strncmp(line, "recipe: ", 8) == 0) {
			int64_t v = 0;
			if (util_parse_i64(line + 8, &v) && v > 0 && v < 1000000)
				*ret_recipe = (unsigned)v;
			continue;
		}
		if (strncmp(line, "suite: ", 7) == 0)
			slot = &suite, value = line + 7;
		else if (strncmp(line, "packages: ", 10) == 0)
			slot = &packages, value = line + 10;
		if (!slot || *slot)
			continue;
		*slot = strdup(value);
		if (!*slot)
			return -ENOMEM;
	}
	if (!suite || !packages)
		return 0;
	*ret_suite = TAKE_PTR(suite);
	*ret_packages = TAKE_PTR(packages);
	return 0;
}

void airlock_image_list_free(airlock_image_info *infos, size_t n)
{
	if (!infos)
		return;
	for (size_t i = 0; i < n; i++) {
		free(infos[i].suite);
		free(infos[i].packages);
	}
	free(infos);
}

static int info_cmp(const void *a, const void *b)
{
	const airlock_image_info *x = a, *y = b;
	if (x->mtime_ms != y->mtime_ms)
		return x->mtime_ms > y->mtime_ms ? -1 : 1;
	return strcmp(x->digest, y->digest);
}

int airlock_image_list(airlock_image_store *store, airlock_image_info **ret_infos, size_t *ret_n,
                       airlock_error *err)
{
	DIR *d = host_dir_stream(store->sha_fd);
	if (!d)
		return host_image_sys_error(err, errno, "image store: sha256/");
	airlock_image_info *infos = NULL;
	size_t n = 0, alloc = 0;
	int r = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		char hex[AIRLOCK_SHA256_HEX_LEN + 1];
		struct stat st;
		if (!name_is(de->d_name, IMAGE_SUFFIX, hex) ||
		    fstatat(store->sha_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode)) {
			errno = 0;
			continue;
		}
		if (n == alloc) {
			size_t na = alloc ? alloc * 2 : 16;
			airlock_image_info *p = realloc(infos, na * sizeof(*p));
			if (!p) {
				r = host_image_sys_error(err, ENOMEM, "image list");
				goto out;
			}
			infos = p;
			alloc = na;
		}
		airlock_image_info *info = &infos[n];
		*info = (airlock_image_info){ .size_bytes = st.st_size,
			                      .mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 +
			                                  st.st_mtim.tv_nsec / 1000000 };
		host_image_digest_from_hex(hex, info->digest);
		n++;
		r = sidecar_read(store, hex, &info->suite, &info->packages, &info->recipe);
		if (r < 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image list: sha256:%s sidecar",
			                      hex);
			goto out;
		}
		errno = 0;
	}
	if (errno) {
		r = host_image_sys_error(err, errno, "image store: reading sha256/");
		goto out;
	}
	if (n > 1)
		qsort(infos, n, sizeof(*infos), info_cmp);
out:
	closedir(d);
	if (r < 0) {
		airlock_image_list_free(infos, n);
		return r;
	}
	if (n == 0) {
		free(infos);
		infos = NULL;
	}
	*ret_infos = infos;
	*ret_n = n;
	return 0;
}

/* ---- crash recovery -------------------------------------------------------- */

/* Remove tmp/ entries left by a build or import whose process died: old
 * enough, and nobody holds their lock. The lock is taken through a
 * descriptor opened without following a symlink and kept while removing,
 * so a live owner cannot start using the entry meanwhile. */
void host_image_sweep_tmp(airlock_image_store *store)
{
	DIR *d = host_dir_stream(store->tmp_fd);
	if (!d)
		return;
	time_t now = time(NULL);
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    fstatat(store->tmp_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    now - st.st_mtime < STALE_TMP_SECONDS)
			continue;
		if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
			unlinkat(store->tmp_fd, de->d_name, 0); /* never ours to keep */
			continue;
		}
		int fd = openat(store->tmp_fd, de->d_name,
		                O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			host_tree_remove_at(store->tmp_fd, de->d_name);
		close(fd);
	}
	closedir(d);
}
