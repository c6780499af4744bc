/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_HOST_IMAGE_MOUNT_H
#define AIRLOCK_HOST_IMAGE_MOUNT_H

/*
 * A verified image from the store, mounted read-only as EROFS for one
 * sandbox: a detached mount (fsmount), which the caller moves into place or
 * hands to a child. Every mechanism that runs a sandbox from an image
 * (native now, gvisor later) mounts it this way. The loop device is shared
 * by every sandbox of the image, kept for the cache's life; each mount of
 * it shares the one superblock.
 */

#include <stddef.h>

#include "airlock/error.h"
#include "airlock/image_store.h"
#include "host/loop.h"

typedef struct host_image {
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	int file_fd;
	host_loop loop;
} host_image;

/* The images mounted so far, with their loop devices. The caller
 * serializes calls on one cache. */
typedef struct host_image_cache {
	host_image *imgs;
	size_t n;
} host_image_cache;

/* A fresh detached read-only mount of the image `digest` of store into
 * *ret_fd (O_CLOEXEC). scratch_dir_fd is a root-only directory for the
 * mount's source name (host_loop_create_fs); source_name is what the
 * sandbox's mountinfo shows as the mount's source. */
int host_image_mount(host_image_cache *c, airlock_image_store *store, const char *digest,
                     int scratch_dir_fd, const char *source_name, int *ret_fd, airlock_error *err);

/* Release every loop device and image file of the cache. */
void host_image_cache_clear(host_image_cache *c);

#endif
