/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Opening a stored image with its content verified, and the cache that
 * spares re-hashing an image that has not changed since it was last
 * verified (include/airlock/image_store.h, airlock_image_open_verified).
 */
#include "host/image_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

/* SHA-256 of everything fd holds, read with pread so the descriptor's
 * offset (which the caller may hand on) is not moved. */
int host_image_hash_fd(int fd, char out[AIRLOCK_SHA256_HEX_LEN + 1])
{
	_cleanup_free_ unsigned char *buf = malloc(READ_CHUNK);
	if (!buf)
		return -ENOMEM;
	util_sha256 *h = util_sha256_new();
	if (!h)
		return -ENOMEM;
	off_t off = 0;
	for (;;) {
		ssize_t n = pread(fd, buf, READ_CHUNK, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			util_sha256_free(h);
			return -e;
		}
		if (n == 0)
			break;
		int r = util_sha256_update(h, buf, (size_t)n);
		if (r < 0) {
			util_sha256_free(h);
			return r;
		}
		off += n;
	}
	return util_sha256_final_hex(h, out);
}

static bool timespec_eq(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* ---- verification ------------------------------------------------------------- */

static verify_entry *cache_find(airlock_image_store *store, const char *hex)
{
	for (size_t i = 0; i < VERIFY_CACHE_MAX; i++)
		if (store->cache[i].used && strcmp(store->cache[i].hex, hex) == 0)
			return &store->cache[i];
	return NULL;
}

static bool cache_matches(const verify_entry *e, const struct stat *st)
{
	return e->dev == st->st_dev && e->ino == st->st_ino && e->size == st->st_size &&
	       timespec_eq(&e->mtim, &st->st_mtim) && timespec_eq(&e->ctim, &st->st_ctim);
}

static void cache_store(airlock_image_store *store, const char *hex, const struct stat *st)
{
	verify_entry *e = cache_find(store, hex);
	if (!e) {
		e = &store->cache[0];
		for (size_t i = 0; i < VERIFY_CACHE_MAX; i++) {
			if (!store->cache[i].used) {
				e = &store->cache[i];
				break;
			}
			if (store->cache[i].stamp < e->stamp)
				e = &store->cache[i];
		}
	}
	*e = (verify_entry){ .used = true, .dev = st->st_dev, .ino = st->st_ino,
		             .size = st->st_size, .mtim = st->st_mtim, .ctim = st->st_ctim,
		             .stamp = ++store->stamp };
	memcpy(e->hex, hex, sizeof(e->hex));
}

static void cache_drop(airlock_image_store *store, const char *hex)
{
	verify_entry *e = cache_find(store, hex);
	if (e)
		e->used = false;
}

/* Open sha256/<hex>.erofs and check its bytes hash to hex (see the header). */
int host_image_verify_open(airlock_image_store *store, const char *hex, int *ret_fd,
                       airlock_error *err)
{
	char name[AIRLOCK_SHA256_HEX_LEN + sizeof(IMAGE_SUFFIX)];
	host_image_file_name(hex, name, sizeof(name));
	/* O_NOFOLLOW: the digest name must be the file itself, not a pointer
	 * to one somewhere else. */
	_cleanup_close_ int fd = openat(store->sha_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == ENOENT)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "image sha256:%s is not in the image store: build it with `airlock image build` or import it",
			                         hex);
		if (errno == ELOOP)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "image sha256:%s: the store holds a symlink under its name, not an image; refusing it",
			                         hex);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image sha256:%s", hex);
	}
	struct stat before;
	if (fstat(fd, &before) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image sha256:%s", hex);
	if (!S_ISREG(before.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "image sha256:%s: the store holds something that is not a regular file under its name; refusing it",
		                         hex);

	pthread_mutex_lock(&store->lock);
	verify_entry *e = cache_find(store, hex);
	bool cached = e && cache_matches(e, &before);
	if (!cached)
		store->hashes++;
	pthread_mutex_unlock(&store->lock);
	if (cached) {
		*ret_fd = TAKE_FD(fd);
		return 0;
	}

	/* Hashed outside the lock: a few hundred megabytes take a while, and
	 * other images' opens must not wait behind it. */
	char got[AIRLOCK_SHA256_HEX_LEN + 1];
	int r = host_image_hash_fd(fd, got);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image sha256:%s: hashing", hex);
	struct stat after;
	if (fstat(fd, &after) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image sha256:%s", hex);

	pthread_mutex_lock(&store->lock);
	if (strcmp(got, hex) != 0 || !timespec_eq(&before.st_ctim, &after.st_ctim) ||
	    before.st_size != after.st_size) {
		cache_drop(store, hex);
		pthread_mutex_unlock(&store->lock);
		if (strcmp(got, hex) != 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "image sha256:%s was altered after it was stored: its content hashes to sha256:%s; refusing it (rebuild or re-import it)",
			                         hex, got);
		/* Changed while we read it: what we hashed is not a file that
		 * existed at any one moment, so it proves nothing. */
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "image sha256:%s changed while it was being verified; refusing it",
		                         hex);
	}
	cache_store(store, hex, &after);
	pthread_mutex_unlock(&store->lock);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* A digest argument: "sha256:<64 lowercase hex>" or a refusal that says
 * why. Writes the hex part to hex. */
static int digest_check(const char *digest, char hex[AIRLOCK_SHA256_HEX_LEN + 1],
                        airlock_error *err)
{
	if (!digest)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "no image digest given: images are named by digest (sha256:<64 lowercase hex>)");
	if (!airlock_image_digest_valid(digest)) {
		char shown[96];
		size_t n = strnlen(digest, 80);
		size_t o = 0;
		for (size_t i = 0; i < n && o + 1 < sizeof(shown); i++)
			shown[o++] = ((unsigned char)digest[i] >= 0x20 && digest[i] != 0x7f) ? digest[i] : '?';
		shown[o] = 0;
		if (strncmp(digest, SHA256_PREFIX, SHA256_PREFIX_LEN) == 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "image \"%s\" is not a valid digest: expected sha256: followed by 64 lowercase hex digits",
			                         shown);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "image \"%s\" is a tag, not a digest: images are named by digest (sha256:<64 lowercase hex>), because a tag is a mutable pointer and an image that changes underneath a tenant is a supply-chain hole",
		                         shown);
	}
	memcpy(hex, digest + SHA256_PREFIX_LEN, AIRLOCK_SHA256_HEX_LEN + 1);
	return 0;
}

int airlock_image_open_verified(airlock_image_store *store, const char *digest, int *ret_fd,
                                airlock_error *err)
{
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
	int r = digest_check(digest, hex, err);
	if (r < 0)
		return r;
	return host_image_verify_open(store, hex, ret_fd, err);
}
