/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The local workspace's provenance record table: path -> the identity the
 * file had right after write() put it there (local.c says why that answers
 * provenance), bounded in paths and bytes (AIRLOCK_LOCAL_RECORDS_MAX,
 * AIRLOCK_LOCAL_RECORDS_BYTES_MAX), and swept, at most once a
 * LOCAL_SWEEP_INTERVAL_MS, of records that no longer match their file when
 * a new one does not fit.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "util/util.h"
#include "workspace/local/local_state.h"

static size_t local_record_cost(const char *rel)
{
	return strlen(rel) + 1 + LOCAL_RECORD_OVERHEAD;
}

/* Out of the table and freed. Under l->lock. */
void local_record_drop(local_ws *l, local_record *rec)
{
	tdelete(rec, &l->records, local_record_cmp);
	l->record_bytes -= local_record_cost(rec->path);
	l->n_records--;
	free(rec);
}

/* Whether a new record of cost bytes fits both bounds. Under l->lock. */
static bool local_record_fits(const local_ws *l, size_t cost)
{
	return l->n_records < AIRLOCK_LOCAL_RECORDS_MAX &&
	       cost <= AIRLOCK_LOCAL_RECORDS_BYTES_MAX - l->record_bytes;
}

/* A sweep's list of records to drop: the walk cannot delete as it goes. */
typedef struct local_sweep {
	local_ws *l;
	local_record **v;
	size_t n;
} local_sweep;

/* The identity of the entry at rel itself (not followed), beneath the root:
 * 0, or -errno. */
static int local_identity(local_ws *l, const char *rel, struct stat *st)
{
	_cleanup_close_ int fd = local_open(l->dirfd, rel, O_PATH | O_NOFOLLOW);
	if (fd < 0)
		return fd;
	return fstat(fd, st) < 0 ? -errno : 0;
}

static void local_sweep_visit(const void *node, VISIT which, void *arg)
{
	local_sweep *sw = arg;
	if (which != postorder && which != leaf)
		return;
	local_record *rec = *(local_record *const *)node;
	struct stat st;
	/* A record that does not match its file now never will again (its
	 * ctime only moves forward), so it can only ever say "not the tool's":
	 * dropping it gives the same answer. Any failure to look counts the
	 * same way, which errs toward the foreign answer. */
	if (local_identity(sw->l, rec->path, &st) < 0 || !local_identity_equal(rec, &st))
		sw->v[sw->n++] = rec;
}

/* Drop every record whose file is gone or no longer the one write() made
 * (a sandbox deletes and replaces files without telling anyone). Under
 * l->lock; at most once per LOCAL_SWEEP_INTERVAL_MS. 0 or -ENOMEM. */
static int local_records_sweep(local_ws *l)
{
	int64_t now = util_monotonic_ms();
	if (l->last_sweep_ms && now - l->last_sweep_ms < LOCAL_SWEEP_INTERVAL_MS)
		return 0;
	l->last_sweep_ms = now;
	local_sweep sw = { .l = l, .v = calloc(l->n_records ? l->n_records : 1, sizeof(*sw.v)) };
	if (!sw.v)
		return -ENOMEM;
	twalk_r(l->records, local_sweep_visit, &sw);
	for (size_t i = 0; i < sw.n; i++)
		local_record_drop(l, sw.v[i]);
	free(sw.v);
	return 0;
}

/* Whether rel can be recorded: it has a record already, or a new one fits
 * (after a sweep when the table is at its bound). Under l->lock. */
static bool local_record_room_locked(local_ws *l, const char *rel)
{
	local_record key = { .path = rel };
	if (tfind(&key, &l->records, local_record_cmp))
		return true;
	size_t cost = local_record_cost(rel);
	if (local_record_fits(l, cost))
		return true;
	return local_records_sweep(l) == 0 && local_record_fits(l, cost);
}

/* Refuse early, before the filesystem is touched, when recording this path
 * would pass the table's bounds. */
int local_record_room(local_ws *l, const char *rel, airlock_error *err)
{
	pthread_mutex_lock(&l->lock);
	bool ok = local_record_room_locked(l, rel);
	size_t n = l->n_records, bytes = l->record_bytes;
	pthread_mutex_unlock(&l->lock);
	if (ok)
		return 0;
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOSPC,
	                         "write %s: the provenance record is full (%zu paths in %zu bytes; "
	                         "at most %d paths and %zu bytes)",
	                         airlock_workspace_quote(rel, strlen(rel), q), n, bytes,
	                         AIRLOCK_LOCAL_RECORDS_MAX, (size_t)AIRLOCK_LOCAL_RECORDS_BYTES_MAX);
}

/* Set rel's record to st's identity, inserting it if needed. */
int local_record_set(local_ws *l, const char *rel, const struct stat *st)
{
	local_record key = { .path = rel };
	int r = 0;
	pthread_mutex_lock(&l->lock);
	local_record **found = tfind(&key, &l->records, local_record_cmp);
	local_record *rec = found ? *found : NULL;
	if (!rec) {
		size_t n = strlen(rel) + 1;
		if (!local_record_room_locked(l, rel)) {
			r = -ENOSPC;
			goto out;
		}
		rec = malloc(sizeof(*rec) + n);
		if (!rec) {
			r = -ENOMEM;
			goto out;
		}
		memcpy(rec->name, rel, n);
		rec->path = rec->name;
		if (!tsearch(rec, &l->records, local_record_cmp)) {
			free(rec);
			r = -ENOMEM;
			goto out;
		}
		l->n_records++;
		l->record_bytes += local_record_cost(rel);
	}
	rec->dev = st->st_dev;
	rec->ino = st->st_ino;
	rec->ctime = st->st_ctim;
	rec->size = st->st_size;
out:
	pthread_mutex_unlock(&l->lock);
	return r;
}
