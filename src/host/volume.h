/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_HOST_VOLUME_H
#define AIRLOCK_HOST_VOLUME_H

/*
 * A sandbox's workspace volume: an ext4 filesystem of workspace_bytes with
 * inodes_max inodes, on a loop device backed by an unnamed (O_TMPFILE)
 * file whose every block is reserved at creation (so live volumes never
 * overcommit the host's disk), mounted detached with the new mount API (fsopen, fsconfig,
 * fsmount: nosuid, nodev). It has no host path at any time: the service
 * holds the mount by descriptor and the sandbox sees it at /workspace.
 *
 * Why not tmpfs: tmpfs pages are charged to the sandbox's memory cgroup, so
 * under default limits (memory 2 GiB, workspace 4 GiB) a disk filler would
 * end as MEMORY instead of DISK.
 *
 * Destroy erases rather than unlinks: the volume's blocks are discarded
 * (the backing file's range is punched) before the descriptors close.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "airlock/error.h"
#include "airlock/port/workspace.h"

typedef struct host_volume host_volume;

/* backing_dir_fd: a service-owned directory on a filesystem that supports
 * O_TMPFILE and hole punching (not taken). uid/gid: the host ids that own
 * the volume's root directory (the sandbox user's mapped ids). */
int host_volume_create(int backing_dir_fd, int64_t bytes, int64_t inodes, uid_t uid, gid_t gid,
                       host_volume **ret, airlock_error *err);

/* The detached mount (fsmount's fd), to be moved to /workspace inside the
 * sandbox with move_mount. Owned by the volume. */
int host_volume_mount_fd(const host_volume *v);

/* An O_PATH|O_DIRECTORY descriptor of the volume's root, for the service's
 * own access (WorkspaceHandle). Owned by the volume. */
int host_volume_root_fd(const host_volume *v);

/* The backing file (O_TMPFILE, no name). Owned by the volume. For tests
 * and diagnostics: a test dups it before destroy to show that the blocks
 * were punched (erased) rather than only unlinked. */
int host_volume_backing_fd(const host_volume *v);

/* True when the volume has no free blocks or no free inodes left
 * (fstatfs on the root): the DISK kill reason. */
int host_volume_full(const host_volume *v, bool *ret, airlock_error *err);

/* The root's (st_dev, st_ino) at creation; a later mismatch means the
 * workspace under the descriptor was swapped: SandboxEscapeSuspected. */
int host_volume_check_identity(const host_volume *v, airlock_error *err);

/* The WorkspaceHandle over this volume: the local adapter on a duplicate of
 * the root descriptor, with files the sandbox wrote reporting
 * SANDBOX_WRITTEN. Owned by the caller; valid until the volume is destroyed. */
int host_volume_workspace(const host_volume *v, airlock_workspace **ret, airlock_error *err);

/* Unmount (drop the mount fd), discard every block, release the loop
 * device and the backing file. NULL ok. */
void host_volume_destroy(host_volume *v);

#endif
