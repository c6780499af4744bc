/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_IMAGE_STORE_H
#define AIRLOCK_IMAGE_STORE_H

/*
 * Sandbox images, named by digest (the specification, EnvironmentSpec:
 * "image_digest is a digest, never a tag").
 *
 * An image is a read-only EROFS filesystem image file. The store keeps each
 * one under the SHA-256 of its bytes:
 *
 *   <store>/sha256/<64 hex>.erofs     the image, mode 0444
 *   <store>/sha256/<64 hex>.packages  how `build` made it (suite, package
 *                                     list); absent for imported images
 *   <store>/tmp/                      builds and imports in progress
 *
 * The store directories are 0700 and owned by the caller's uid. A name in the
 * store is only ever created by an atomic link of a complete, fsynced file
 * whose hash was computed from the bytes written, so a digest name never
 * points at a half-written image. Opening an image for use re-checks its
 * bytes against its name (airlock_image_open_verified), so a file altered
 * after it was stored is refused rather than run.
 *
 * Every operation works relative to descriptors opened by
 * airlock_image_store_open; the store path is used again only to hand the
 * build tree to debootstrap and mkfs.erofs, which take paths, and is checked
 * to still name the same directory before each of them runs.
 *
 * Errors follow airlock/error.h: 0 or a negative code, a message in err,
 * ret_ parameters untouched on failure. The library neither logs nor exits;
 * build progress goes to the caller's callback.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "sha256:" + 64 hex + NUL. */
#define AIRLOCK_IMAGE_DIGEST_SIZE 72

typedef struct airlock_image_store airlock_image_store;

/*
 * Open the store at dir (absolute or relative path), creating dir (with
 * missing parents, 0755) and its sha256/ and tmp/ subdirectories (0700) when
 * they are missing.
 *
 * Refuses (AIRLOCK_ERR_CONFIG, the message naming the directory and why):
 *   - a store directory or subdirectory not owned by the caller's effective
 *     uid, or writable by group or others: whoever can write the store can
 *     put an image under a digest name, which is a supply-chain hole;
 *   - an ancestor of the store that someone other than root or the caller
 *     owns, or that group or others can write without the sticky bit: they
 *     could rename the store away and put their own in its place;
 *   - a store, sha256/ or tmp/ that is not a directory, or a sha256/ or
 *     tmp/ that is a symlink. The store path itself is resolved first
 *     (realpath), and every check applies to the directory it names.
 *
 * On success *ret is owned by the caller and released with
 * airlock_image_store_free. A store may be used from several threads at
 * once; it must outlive every call made on it.
 */
int airlock_image_store_open(const char *dir, airlock_image_store **ret, airlock_error *err);

/* Release a store (NULL is fine). Descriptors returned by
 * airlock_image_open_verified stay valid. */
void airlock_image_store_free(airlock_image_store *store);

/* The store's canonical absolute path (owned by the store). */
const char *airlock_image_store_path(const airlock_image_store *store);

/* How many times this store has hashed an image's full content for
 * airlock_image_open_verified (a cache miss). For tests and metrics. */
uint64_t airlock_image_store_hash_count(airlock_image_store *store);

/*
 * Store the bytes readable from fd (from its current offset to end of file)
 * under their digest, as a 0444 file. fd stays owned by the caller. When an
 * image with that digest is already stored it is kept and the copy is
 * discarded. The bytes are not checked to be EROFS: the store is
 * content-addressed, and whether an image mounts is the mechanism's concern.
 * Thread-safe.
 */
int airlock_image_import(airlock_image_store *store, int fd,
                         char ret_digest[AIRLOCK_IMAGE_DIGEST_SIZE], airlock_error *err);

typedef struct airlock_image_info {
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	int64_t size_bytes;
	int64_t mtime_ms; /* when it was stored (Unix ms) */
	/* From the .packages sidecar; NULL when there is none (imported). */
	char *suite;
	char *packages;
	unsigned recipe; /* the build recipe's version; 0 when unrecorded */
} airlock_image_info;

/*
 * The stored images, newest first. Only names of the exact form
 * "<64 hex>.erofs" that are regular files are listed; listing does not hash
 * (open_verified does). *ret_infos (NULL when *ret_n is 0) is owned by the
 * caller: airlock_image_list_free. Thread-safe.
 */
int airlock_image_list(airlock_image_store *store, airlock_image_info **ret_infos, size_t *ret_n,
                       airlock_error *err);
void airlock_image_list_free(airlock_image_info *infos, size_t n);

/*
 * Open the image named digest for use, with its content verified.
 *
 * A digest that is not "sha256:<64 lowercase hex>" is refused with
 * AIRLOCK_ERR_EXECUTION_REJECTED saying images are named by digest (a tag is
 * a mutable pointer). A digest not in the store, or whose file's bytes do
 * not hash to it, is AIRLOCK_ERR_EXECUTION_REJECTED naming the digest.
 *
 * The file is opened O_RDONLY | O_CLOEXEC | O_NOFOLLOW and hashed through the
 * returned descriptor, so what was checked is what the caller gets. Hashing
 * a large image on every provision is slow, so the store remembers a
 * verified (st_dev, st_ino, st_size, st_mtim, st_ctim) per digest and skips
 * the hash when the opened file still matches it. The change time is set by
 * the kernel on every write, chmod or rename and cannot be set from
 * userspace, so any modification after verification forces a re-hash. The
 * guarantee is "as of this call": a process with write access to the store
 * (the store's owner) can still change the file afterwards, and the next
 * open sees it.
 *
 * On success *ret_fd is owned by the caller, positioned at offset 0.
 * Thread-safe; hashing runs outside the store's lock.
 */
int airlock_image_open_verified(airlock_image_store *store, const char *digest, int *ret_fd,
                                airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
