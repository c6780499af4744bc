/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_HOST_LOOP_H
#define AIRLOCK_HOST_LOOP_H

/*
 * Loop devices, by descriptor. A loop device is configured over a backing
 * file descriptor with LOOP_CTL_GET_FREE + LOOP_CONFIGURE, and set to
 * autoclear: when the last reference (our descriptor, a mount) goes, the
 * kernel detaches it, so a crashed service leaks no loop device.
 */

#include <stdbool.h>
#include <stdint.h>

#include "airlock/error.h"

typedef struct host_loop {
	int fd;        /* the loop device, O_CLOEXEC */
	int number;    /* N of /dev/loopN */
	char path[32]; /* "/dev/loopN": a device path, never a workspace path */
	bool made;     /* added for this attach (LOOP_CTL_ADD): removed on release */
} host_loop;

/* Attach backing_fd (not taken). read_only sets LO_FLAGS_READ_ONLY.
 * Retries when another process takes the free device first. */
int host_loop_attach(int backing_fd, bool read_only, host_loop *ret, airlock_error *err);

/* The same, read-write, for a device that does direct I/O on its backing
 * file with the given logical block size (LO_FLAGS_DIRECT_IO, set in the
 * configuring step): the kernel keeps no page cache of the backing file.
 * Whether it could is for the caller to check (LOOP_GET_STATUS64). */
int host_loop_attach_direct(int backing_fd, unsigned block_size, host_loop *ret,
                            airlock_error *err);

/* Create the superblock of the filesystem context fsfd (fsopen) from the
 * device l, with `name` as the mount's source: what /proc/<pid>/mountinfo
 * shows in its source field, inside the sandbox too. The kernel records the
 * "source" string as given and resolves it as a path when the superblock is
 * created, so it is resolved from a private directory under scratch_dir_fd
 * (a root-only directory) in which `name` is a symlink to the device; the
 * directory is removed before returning. name is a single path component.
 * Returns 0 or -errno (err set; the kernel's own message, if any, is left
 * in fsfd's log for the caller to read). */
int host_loop_create_fs(const host_loop *l, int fsfd, int scratch_dir_fd, const char *name,
                        airlock_error *err);

/* Close our reference (autoclear detaches once nothing else holds it). A
 * device this attach added is removed again when nothing holds it, so the
 * host's count of devices does not grow with every lost race. */
void host_loop_release(host_loop *l);

#endif
