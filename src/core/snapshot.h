/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_CORE_SNAPSHOT_H
#define AIRLOCK_CORE_SNAPSHOT_H

/*
 * files_changed is computed by the execution service from two walks of the
 * workspace (sandbox-isolation.md: "A command that reports its own changes
 * is a command that can lie about them"). A mechanism takes a snapshot before
 * and after a command; this module diffs them. Stat fields decide what
 * changed; only created or modified files are hashed, through the
 * mechanism's callback. Only regular files are reported.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/error.h"
#include "airlock/types.h"

typedef struct airlock_snap_entry {
	char *path; /* relative to /workspace */
	int64_t size;
	uint64_t ino;
	int64_t mtime_ns;
	int64_t ctime_ns;
	uint64_t version; /* a change counter where a mechanism has one (fake); else 0 */
} airlock_snap_entry;

typedef struct airlock_snapshot {
	airlock_snap_entry *entries;
	size_t n;
	size_t alloc;
	/* The walk met a bound (see airlock_snapshot_walk) and stopped: entries
	 * is an arbitrary part of the workspace, not all of it. */
	bool truncated;
} airlock_snapshot;

/* Append an entry (path copied). 0 or -ENOMEM. */
int airlock_snapshot_add(airlock_snapshot *s, const char *path, int64_t size, uint64_t ino,
                         int64_t mtime_ns, int64_t ctime_ns, uint64_t version);
/* Sort by path (bytewise); call once after the walk. */
void airlock_snapshot_sort(airlock_snapshot *s);
void airlock_snapshot_clear(airlock_snapshot *s);

/* Hash the current content of a workspace file (relative path). */
typedef int (*airlock_snapshot_hash_fn)(void *ctx, const char *path, char hex[65],
                                        int64_t *ret_size, airlock_error *err);

/*
 * Fill ret->files_changed / n_files_changed / files_changed_truncated from
 * the difference between two sorted snapshots, at most max entries, in path
 * order. A file present in both whose stat fields differ is MODIFIED; the
 * size reported for created and modified files is the size hashed.
 *
 * hash_budget bounds the bytes hashed (by the files' sizes in `after`): a
 * sparse file costs its full apparent size to hash, and a command can make
 * a terabyte of holes in a moment. The listing stops, truncated, before the
 * change that would pass the budget.
 *
 * When either snapshot is truncated the listing is empty and
 * files_changed_truncated is set, and nothing is hashed: a file missing from
 * an incomplete walk may exist all the same, so an incomplete walk yields no
 * listing rather than a wrong one (invented deletions or creations).
 */
int airlock_snapshot_diff(const airlock_snapshot *before, const airlock_snapshot *after, size_t max,
                          uint64_t hash_budget, airlock_snapshot_hash_fn hash, void *hash_ctx,
                          airlock_execution_result *ret, airlock_error *err);

/*
 * Walk a workspace held by a directory descriptor and snapshot every regular
 * file (relative paths), for mechanisms whose workspace is a real filesystem.
 * The walk never follows a symlink and never crosses into another mount
 * (st_dev differs from the root's). Hard links are not merged: each path to
 * a file is an entry of its own, as the diff is by path.
 *
 * The workspace's shape is the sandboxed command's choice, so it never makes
 * the walk fail: a walk that meets one of these bounds stops there and sets
 * ret->truncated (the diff then reports no listing, truncated):
 *  - more than max_entries regular files (set it to the workspace's
 *    inodes_max; hard links can still pass it);
 *  - directories nested AIRLOCK_SNAPSHOT_DEPTH_MAX levels deep;
 *  - a path longer than fits in AIRLOCK_PATH_MAX once under /workspace/;
 *  - more than max_path_bytes of stored paths in all (each path counted
 *    with its terminating NUL): the snapshot lives in the service while the
 *    command runs, and 100k files with 4 KB paths would be 400 MB;
 *  - an entry the service may not read, or one replaced while it looked.
 * Only a failure of the system (ENOMEM, EIO, out of descriptors) is an
 * error. The result is sorted.
 */
#define AIRLOCK_SNAPSHOT_DEPTH_MAX 256
/* The max_path_bytes for a service's walks: 16 MiB of path text bounds one
 * snapshot's strings (entries add ~48 bytes each, bounded by max_entries)
 * and is 4000 paths of the longest kind or 500k of 32 bytes. */
#define AIRLOCK_SNAPSHOT_PATH_BYTES_MAX ((size_t)16 << 20)
int airlock_snapshot_walk(int root_fd, size_t max_entries, size_t max_path_bytes,
                          airlock_snapshot *ret, airlock_error *err);

/* A snapshot_hash_fn for a workspace directory descriptor: ctx points to an
 * int holding the root fd. Opens the file beneath the root without following
 * any symlink, hashes it streaming, reports the bytes hashed. -ENOENT when
 * the file is gone. */
int airlock_snapshot_hash_fd(void *ctx, const char *path, char hex[65], int64_t *ret_size,
                             airlock_error *err);

#endif
