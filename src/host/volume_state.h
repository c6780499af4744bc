/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_HOST_VOLUME_STATE_H
#define AIRLOCK_HOST_VOLUME_STATE_H

/*
 * A workspace volume's state (volume.c has the design) and the formatting
 * calls create makes (volume_mkfs.c): mkfs.ext4 on the loop device, and the
 * cache of formatted images that spares it for a shape formatted before.
 */

#include <stdint.h>
#include <sys/types.h>

#include "airlock/error.h"
#include "airlock/volume.h"
#include "host/loop.h"
#include "host/volume.h"

#define VOLUME_BLOCK AIRLOCK_VOLUME_BLOCK

struct host_volume {
	int backing_fd; /* the O_TMPFILE file: the volume's bytes */
	host_loop loop;
	int mount_fd; /* fsmount's descriptor: the detached mount */
	int root_fd;  /* O_PATH|O_DIRECTORY on the mount's root */
	dev_t dev;    /* the root's identity at creation */
	ino_t ino;
	int64_t bytes; /* the backing file's size */
};

/* mkfs.ext4 on the loop device, for inodes files: 0, or
 * EXECUTION_UNAVAILABLE (no mkfs, it failed or hung) or SYSTEM. */
int volume_mkfs(const host_loop *loop, int64_t inodes, airlock_error *err);

/* A formatted image: what mkfs wrote for one (bytes, inodes), kept in
 * memory (volume_mkfs.c says why that is safe). */
typedef struct volume_image volume_image;
/* The image for this shape with a reference taken, or NULL. */
volume_image *volume_image_get(int64_t bytes, int64_t inodes);
/* Drop a reference (for a cleanup attribute; *img may be NULL). */
void volume_image_unrefp(volume_image **img);
/* Keep img (its reference passes to the cache) unless the shape is already
 * there, in which case img is dropped. */
void volume_image_put(volume_image *img);
/* Read back what mkfs wrote into v's backing file: 0 with *ret set, or
 * NULL when it does not fit the bounds; -errno. */
int volume_image_capture(const host_volume *v, int64_t inodes, volume_image **ret);
/* Write a cached image into a new, empty, sparse backing file. 0 or -errno. */
int volume_image_write(const volume_image *img, int fd);

#endif
