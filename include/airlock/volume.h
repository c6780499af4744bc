/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_VOLUME_H
#define AIRLOCK_VOLUME_H

/*
 * The shape of a workspace volume (the ext4 image a mechanism gives each
 * sandbox for /workspace) that a caller needs before any volume exists:
 * the spec builder says what a small workspace will hold. Pure arithmetic,
 * on the core side, so a client that builds specs links no host code.
 */

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where a mechanism keeps its sandboxes' volume images by default. */
#define AIRLOCK_VOLUME_DIR "/var/lib/airlock/volumes"

/* The volume's block and inode sizes (mkfs.ext4 -b, -I). */
#define AIRLOCK_VOLUME_BLOCK 4096
#define AIRLOCK_VOLUME_INODE_SIZE 256
/* ext4 reserves inodes 1..10 (the root directory is inode 2) and mkfs puts
 * lost+found at 11; the volume removes it, so the sandbox gets (count - 10). */
#define AIRLOCK_VOLUME_RESERVED_INODES 10

/* The inodes a workspace volume of workspace_bytes is provisioned with for
 * inodes_max: inodes_max itself, or, when its inode table would take more
 * than half the volume, the most that fit. A limit is a maximum: a small
 * workspace with the default inodes gets the inodes it holds, and the
 * caller can say so. */
int64_t airlock_volume_workspace_inodes(int64_t workspace_bytes, int64_t inodes_max);

#ifdef __cplusplus
}
#endif
#endif
