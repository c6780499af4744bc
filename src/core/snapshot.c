/* SPDX-License-Identifier: Apache-2.0 */
#include "core/snapshot.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

int airlock_snapshot_add(airlock_snapshot *s, const char *path, int64_t size, uint64_t ino,
                         int64_t mtime_ns, int64_t ctime_ns, uint64_t version)
{
	if (s->n == s->alloc) {
		size_t n = s->alloc ? s->alloc * 2 : 64;
		airlock_snap_entry *p = reallocarray(s->entries, n, sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->entries = p;
		s->alloc = n;
	}
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	s->entries[s->n++] = (airlock_snap_entry){
		.path = copy, .size = size, .ino = ino,
		.mtime_ns = mtime_ns, .ctime_ns = ctime_ns, .version = version,
	};
	return 0;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const airlock_snap_entry *)a)->path, ((const airlock_snap_entry *)b)->path);
}

void airlock_snapshot_sort(airlock_snapshot *s)
{
	if (s->n > 1)
		qsort(s->entries, s->n, sizeof(*s->entries), entry_cmp);
}

void airlock_snapshot_clear(airlock_snapshot *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->entries[i].path);
	free(s->entries);
	*s = (airlock_snapshot){ 0 };
}

/* ctime is part of the comparison because userspace cannot set it: a command
 * that rewrites a file and restores its size and mtime (touch -r) still
 * moves ctime, so the change is reported. */
static bool entry_changed(const airlock_snap_entry *a, const airlock_snap_entry *b)
{
	return a->size != b->size || a->ino != b->ino || a->mtime_ns != b->mtime_ns ||
	       a->ctime_ns != b->ctime_ns || a->version != b->version;
}

typedef struct change_list {
	airlock_file_change *items;
	size_t n;
	size_t max;
	bool truncated;
} change_list;

static int push_change(change_list *l, const char *path, airlock_change_kind kind,
                       airlock_snapshot_hash_fn hash, void *hash_ctx, int64_t old_size,
                       airlock_error *err)
{
	if (l->n == l->max) {
		l->truncated = true;
		return 0;
	}
	airlock_file_change fc = { .change = kind, .size_bytes = old_size };
	fc.path = strdup(path);
	if (!fc.path)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "files_changed");
	if (kind != AIRLOCK_CHANGE_DELETED) {
		int r = hash(hash_ctx, path, fc.sha256, &fc.size_bytes, err);
		if (r == -ENOENT) {
			/* Gone between the walk and the hash: a process still running
			 * would be a bug (the mechanism kills all before computing), so
			 * treat it as not created rather than invent a digest. */
			free(fc.path);
			return 0;
		}
		if (r < 0) {
			free(fc.path);
			return r;
		}
		fc.has_sha256 = true;
	}
	l->items[l->n++] = fc;
	return 0;
}

int airlock_snapshot_diff(const airlock_snapshot *before, const airlock_snapshot *after, size_t max,
                          airlock_snapshot_hash_fn hash, void *hash_ctx,
                          airlock_execution_result *ret, airlock_error *err)
{
	/* There are never more changes than entries in both walks, so the array
	 * is sized by the smaller of that and the listing cap. */
	size_t total = before->n + after->n;
	change_list l = { .max = max };
	l.items = calloc((max < total ? max : total) + 1, sizeof(*l.items));
	if (!l.items)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "files_changed");

	size_t i = 0, j = 0;
	int r = 0;
	while (r == 0 && (i < before->n || j < after->n)) {
		int c;
		if (i == before->n)
			c = 1;
		else if (j == after->n)
			c = -1;
		else
			c = strcmp(before->entries[i].path, after->entries[j].path);
		if (c < 0) {
			r = push_change(&l, before->entries[i].path, AIRLOCK_CHANGE_DELETED, hash,
			                hash_ctx, before->entries[i].size, err);
			i++;
		} else if (c > 0) {
			r = push_change(&l, after->entries[j].path, AIRLOCK_CHANGE_CREATED, hash,
			                hash_ctx, after->entries[j].size, err);
			j++;
		} else {
			if (entry_changed(&before->entries[i], &after->entries[j]))
				r = push_change(&l, after->entries[j].path, AIRLOCK_CHANGE_MODIFIED,
				                hash, hash_ctx, after->entries[j].size, err);
			i++;
			j++;
		}
		if (l.truncated)
			break;
	}
	if (r < 0) {
		for (size_t k = 0; k < l.n; k++)
			airlock_file_change_clear(&l.items[k]);
		free(l.items);
		return r;
	}
	ret->files_changed = l.items;
	ret->n_files_changed = l.n;
	ret->files_changed_truncated = l.truncated;
	return 0;
}
