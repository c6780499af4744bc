/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_WORKSPACE_MEMWS_H
#define AIRLOCK_WORKSPACE_MEMWS_H

/*
 * The in-memory workspace's state, for the fake mechanism: it plays what a
 * sandbox would have written (recorded as SANDBOX_WRITTEN, never as
 * TOOL_WRITTEN) and takes snapshots for files_changed. Paths are relative
 * to /workspace and must already have passed the containment string rules.
 * Directories are implied by the files under them.
 */

#include "airlock/port/workspace.h"
#include "core/snapshot.h"

/* Create or replace a file as the sandbox. 0, -ENOMEM, or -ENOSPC when the
 * workspace's byte or file limit would be exceeded. */
int memws_sandbox_write(airlock_memws *m, const char *rel, const void *data, size_t len);
/* Delete a file as the sandbox; 0 also when it did not exist. */
int memws_sandbox_delete(airlock_memws *m, const char *rel);
/* Limits the fake applies from ResourceLimits (0 = none). */
void memws_set_limits(airlock_memws *m, int64_t max_bytes, int64_t max_files);
/* Snapshot every file (version = the file's change counter). */
int memws_snapshot(airlock_memws *m, airlock_snapshot *ret);
/* A snapshot_hash_fn over this workspace (ctx is the airlock_memws). */
int memws_hash(void *ctx, const char *path, int64_t deadline_ms,
               airlock_snapshot_hashed *ret, airlock_error *err);

#endif
