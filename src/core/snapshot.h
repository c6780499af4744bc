/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_CORE_SNAPSHOT_H
#define AIRLOCK_CORE_SNAPSHOT_H

/*
 * files_changed is computed by the execution service from two walks of the
 * workspace (the specification: "A command that reports its own changes
 * is a command that can lie about them"). A mechanism takes a snapshot before
 * and after a command; this module diffs them. Stat fields decide what
 * changed; only created or modified entries are hashed, through the
 * mechanism's callback. Every non-directory entry is reported (regular
 * files, symlinks, FIFOs, sockets, device nodes), each with its kind.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "airlock/types.h"

typedef struct airlock_snap_entry {
	char *path; /* relative to /workspace */
	airlock_file_kind kind;
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
	/* The walk met a bound (see snapshot_walk) and stopped: entries
	 * is an arbitrary part of the workspace, not all of it. */
	bool truncated;
} airlock_snapshot;

/* Append a regular file's entry (path copied). 0 or -ENOMEM. */
int snapshot_add(airlock_snapshot *s, const char *path, int64_t size, uint64_t ino,
                         int64_t mtime_ns, int64_t ctime_ns, uint64_t version);
/* Append an entry of any kind (e->path copied). 0 or -ENOMEM. */
int snapshot_add_entry(airlock_snapshot *s, const airlock_snap_entry *e);
/* Sort by path (bytewise); call once after the walk. */
void snapshot_sort(airlock_snapshot *s);
void snapshot_clear(airlock_snapshot *s);

/* What a hash callback found at a path: the entry's kind now, and its
 * sha256 and size_bytes as airlock_file_change defines them for that kind. */
typedef struct airlock_snapshot_hashed {
	airlock_file_kind kind;
	int64_t size;
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
} airlock_snapshot_hashed;

/* Hash the entry now at a workspace path (relative). deadline_ms is a
 * util_monotonic_ms() time (0: none) past which the callback gives up:
 * -ETIME. -ENOENT when nothing is there; any other negative value is an
 * error set in err. */
typedef int (*airlock_snapshot_hash_fn)(void *ctx, const char *path, int64_t deadline_ms,
                                        airlock_snapshot_hashed *ret, airlock_error *err);

/*
 * Fill ret->files_changed / n_files_changed / files_changed_truncated from
 * the difference between two sorted snapshots, at most max entries, in path
 * order. An entry present in both whose kind or stat fields differ is
 * MODIFIED (with the kind it has now); kind and size of created and
 * modified entries are what the hash callback found.
 *
 * hash_budget bounds the bytes hashed (by the files' sizes in `after`): a
 * sparse file costs its full apparent size to hash, and a command can make
 * a terabyte of holes in a moment. The listing stops, truncated, before the
 * change that would pass the budget. hash_deadline_ms (util_monotonic_ms
 * time; 0: none) bounds the hashing in time the same way: a change whose
 * hash is not done by then, and every one after it, is left out and the
 * listing is truncated (a 4 GiB sparse file takes seconds to hash).
 *
 * When either snapshot is truncated the listing is empty and
 * files_changed_truncated is set, and nothing is hashed: a file missing from
 * an incomplete walk may exist all the same, so an incomplete walk yields no
 * listing rather than a wrong one (invented deletions or creations).
 */
/* The service's bound on hashing one listing (docs/native.md, files_changed). */
#define AIRLOCK_SNAPSHOT_HASH_MS 2000
int snapshot_diff(const airlock_snapshot *before, const airlock_snapshot *after, size_t max,
                          uint64_t hash_budget, int64_t hash_deadline_ms,
                          airlock_snapshot_hash_fn hash, void *hash_ctx,
                          airlock_execution_result *ret, airlock_error *err);

/* Whether the two snapshots differ at all (an entry added, removed or
 * changed), without hashing; true when either is truncated (unknown). */
bool snapshot_differs(const airlock_snapshot *before, const airlock_snapshot *after);

/*
 * Walk a workspace held by a directory descriptor and snapshot every
 * non-directory entry (relative paths), for mechanisms whose workspace is a
 * real filesystem. A mount point (a directory on another device) is neither
 * entered nor reported.
 * The walk never follows a symlink and never crosses into another mount
 * (st_dev differs from the root's). Hard links are not merged: each path to
 * a file is an entry of its own, as the diff is by path.
 *
 * The workspace's shape is the sandboxed command's choice, so it never makes
 * the walk fail: a walk that meets one of these bounds stops there and sets
 * ret->truncated (the diff then reports no listing, truncated):
 *  - more than max_entries entries (set it to the workspace's inodes_max;
 *    hard links can still pass it);
 *  - directories nested AIRLOCK_SNAPSHOT_DEPTH_MAX levels deep;
 *  - a path longer than fits in AIRLOCK_PATH_MAX once under /workspace/;
 *  - more than max_path_bytes of stored paths in all (each path counted
 *    with its terminating NUL): the snapshot lives in the service while the
 *    command runs, and 100k files with 4 KB paths would be 400 MB;
 *  - an entry the service may not read, or one replaced while it looked.
 * Only a failure of the system (ENOMEM, EIO, out of descriptors) is an
 * error. The result is sorted.
 */
/* (AIRLOCK_SNAPSHOT_DEPTH_MAX and the service's max_path_bytes,
 * AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, are in airlock/caps.h.) */
int snapshot_walk(int root_fd, size_t max_entries, size_t max_path_bytes,
                          airlock_snapshot *ret, airlock_error *err);

/* The context of snapshot_hash_fd: the workspace's root directory and the
 * bound on the hashing thread's CPU time (snapshot_thread_cpu_ns time; 0:
 * none), past which it gives up with -ETIME as at the deadline. */
typedef struct snapshot_hash_root {
	int fd;
	int64_t cpu_deadline_ns;
} snapshot_hash_root;

/* CLOCK_THREAD_CPUTIME_ID of the calling thread, in ns. */
int64_t snapshot_thread_cpu_ns(void);

/* A snapshot_hash_fn for a workspace directory descriptor: ctx points to a
 * snapshot_hash_root. Opens the entry beneath the root without following
 * any symlink (O_PATH for what it only stats or reads the link of), hashes
 * a regular file streaming (holes without reading them, its cache dropped
 * once read) and stops at the deadline or the CPU bound. */
int snapshot_hash_fd(void *ctx, const char *path, int64_t deadline_ms,
                             airlock_snapshot_hashed *ret, airlock_error *err);

#endif
