/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_HOST_IMAGE_STORE_H
#define AIRLOCK_HOST_IMAGE_STORE_H

/*
 * Inside the image store (include/airlock/image_store.h has the contract):
 * its layout on disk, the store object, and the steps the image builder
 * (src/image/) uses to put what it built into the store. The store's own
 * files (src/host/image_*.c) reference nothing of the builder's
 * (tests/test_host_links.sh checks it), so a mechanism links no build code.
 */

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "airlock/error.h"
#include "airlock/image_store.h"
#include "airlock/types.h"

#define SHA256_PREFIX "sha256:"
#define SHA256_PREFIX_LEN (sizeof(SHA256_PREFIX) - 1)
#define IMAGE_SUFFIX ".erofs"
#define SIDECAR_SUFFIX ".packages"
#define READ_CHUNK (1u << 20)
/* Every tmp/ entry is flock()ed by its maker for as long as it works on it;
 * an entry at least this old whose lock can be taken belongs to a process
 * that died, and is removed. The age only covers the instant between
 * creating an entry and locking it. */
#define STALE_TMP_SECONDS 60

#define VERIFY_CACHE_MAX 64

typedef struct verify_entry {
	bool used;
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtim, ctim;
	uint64_t stamp;
} verify_entry;

struct airlock_image_store {
	char *path; /* canonical, absolute */
	int dir_fd; /* the store */
	int sha_fd; /* sha256/ */
	int tmp_fd; /* tmp/ */
	dev_t dev;  /* of the store directory, to re-check its path */
	ino_t ino;
	pthread_mutex_t lock; /* guards cache, stamp and hashes */
	verify_entry cache[VERIFY_CACHE_MAX];
	uint64_t stamp;
	uint64_t hashes;
};

static inline int host_image_sys_error(airlock_error *err, int errnum, const char *what)
{
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errnum ? errnum : EIO, "%s", what);
}

/* prefix followed by 16 random hex digits, for a tmp/ entry. */
int host_image_random_name(const char *prefix, char *out, size_t size);
void host_image_digest_from_hex(const char *hex, char out[AIRLOCK_IMAGE_DIGEST_SIZE]);
/* "<hex>.erofs", the image's name in sha256/. */
void host_image_file_name(const char *hex, char *out, size_t size);

/* SHA-256 of everything fd holds; fd's offset is not moved. */
int host_image_hash_fd(int fd, char out[AIRLOCK_SHA256_HEX_LEN + 1]);

/* airlock_image_open_verified for a digest already checked to be hex. */
int host_image_verify_open(airlock_image_store *store, const char *hex, int *ret_fd,
                           airlock_error *err);

/* The store's path still names the directory we opened (checked before a
 * path is handed to an external program). */
int host_image_store_path_check(airlock_image_store *store, airlock_error *err);

/* Give src_dir/src_name (complete, fsynced, 0444, hashing to hex; under
 * the store's tmp/) its digest name; *ret_new (may be NULL) says whether
 * this call stored the bytes. image_store.c says how a concurrent publisher
 * and a damaged stored copy are handled. */
int host_image_publish(airlock_image_store *store, int src_dir, const char *src_name,
                       const char *hex, bool *ret_new, airlock_error *err);

/* fsync, hash, make read-only: the steps between writing a temporary image
 * and publishing it. */
int host_image_seal_tmp(int fd, char hex[AIRLOCK_SHA256_HEX_LEN + 1], airlock_error *err);

/* Remove tmp/ entries left by a build or import whose process died (the
 * crash sweep; builds and imports also run it before they start). */
void host_image_sweep_tmp(airlock_image_store *store);

#endif
