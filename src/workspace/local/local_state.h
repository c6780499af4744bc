/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_WORKSPACE_LOCAL_STATE_H
#define AIRLOCK_WORKSPACE_LOCAL_STATE_H

/*
 * The local-directory workspace adapter's state (local.c has the design):
 * the directory descriptor, the provenance record table (local_records.c)
 * and the lookup beneath the descriptor that both files use.
 */

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "airlock/port/workspace.h"
#include "util/syscalls.h"

/* Every lookup below the descriptor uses these; local.c's opening comment
 * says why. */
#define LOCAL_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
/* openat2 returns EAGAIN when a rename raced a scoped ".." walk; a retry is
 * the documented answer, and a bounded one keeps a hostile renamer from
 * spinning us forever. */
#define LOCAL_OPEN_RETRIES 16

typedef struct local_record {
	const char *path; /* points at name[] */
	dev_t dev;
	ino_t ino;
	struct timespec ctime;
	off_t size;
	char name[];
} local_record;

/* What one record costs the service besides its path and NUL: the record's
 * fields, the search tree's node (three words) and the two allocations'
 * headers and rounding. AIRLOCK_LOCAL_RECORDS_BYTES_MAX is counted in it. */
#define LOCAL_RECORD_OVERHEAD (sizeof(local_record) + 48)
/* A table at its bound is swept for records that no longer match their file
 * (deleted, replaced or changed by someone else) at most this often: a
 * sweep stats every record, and a client writing into a full table must not
 * make the service do that on every write. */
#define LOCAL_SWEEP_INTERVAL_MS 1000

typedef struct local_ws {
	int dirfd;
	airlock_provenance foreign;
	uid_t owner_uid; /* the root directory's owner: files write() creates are theirs */
	gid_t owner_gid;
	pthread_mutex_t lock; /* guards the record fields below */
	void *records;        /* tsearch tree of local_record *, by path */
	size_t n_records;
	size_t record_bytes;  /* their cost: path, NUL and LOCAL_RECORD_OVERHEAD each */
	int64_t last_sweep_ms; /* monotonic; 0: never */
} local_ws;

/* openat2 beneath the workspace; "" is the directory itself. Returns a
 * descriptor (always O_CLOEXEC) or -errno. */
static inline int local_open_resolve(int dirfd, const char *rel, int flags, uint64_t resolve)
{
	struct open_how how = {
		.flags = (uint64_t)(unsigned)(flags | O_CLOEXEC),
		.resolve = LOCAL_RESOLVE | resolve,
	};
	for (int i = 0;; i++) {
		int fd = sys_openat2(dirfd, *rel ? rel : ".", &how);
		if (fd >= 0)
			return fd;
		int e = errno;
		if ((e == EAGAIN || e == EINTR) && i < LOCAL_OPEN_RETRIES)
			continue;
		return -e;
	}
}

static inline int local_open(int dirfd, const char *rel, int flags)
{
	return local_open_resolve(dirfd, rel, flags, 0);
}

static inline int local_record_cmp(const void *a, const void *b)
{
	return strcmp(((const local_record *)a)->path, ((const local_record *)b)->path);
}

static inline bool local_identity_equal(const local_record *r, const struct stat *st)
{
	return r->dev == st->st_dev && r->ino == st->st_ino && r->size == st->st_size &&
	       r->ctime.tv_sec == st->st_ctim.tv_sec && r->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

/* ---- the record table (local_records.c) ------------------------------------ */

/* Out of the table and freed. Under l->lock. */
void local_record_drop(local_ws *l, local_record *rec);
/* Refuse early, before the filesystem is touched, when recording this path
 * would pass the table's bounds: 0, or SYSTEM/ENOSPC naming the bounds. */
int local_record_room(local_ws *l, const char *rel, airlock_error *err);
/* Set rel's record to st's identity, inserting it if needed: 0, -ENOSPC,
 * -ENOMEM. */
int local_record_set(local_ws *l, const char *rel, const struct stat *st);

#endif
