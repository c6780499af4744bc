/* SPDX-License-Identifier: Apache-2.0 */
/* What a workspace volume of a size holds (airlock/volume.h). */
#include "airlock/volume.h"

/* An inode table bigger than half the volume leaves a volume of inodes;
 * no one asking for it means it. inodes_max is a maximum, so the volume
 * gets what fits (at least 1 MiB holds 2038). */
int64_t airlock_volume_workspace_inodes(int64_t workspace_bytes, int64_t inodes_max)
{
	int64_t bytes = workspace_bytes - workspace_bytes % AIRLOCK_VOLUME_BLOCK;
	int64_t fit = bytes / 2 / AIRLOCK_VOLUME_INODE_SIZE - AIRLOCK_VOLUME_RESERVED_INODES;
	if (fit < 1)
		fit = 1;
	return inodes_max > fit ? fit : inodes_max;
}
