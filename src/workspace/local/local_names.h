/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_WORKSPACE_LOCAL_NAMES_H
#define AIRLOCK_WORKSPACE_LOCAL_NAMES_H

/*
 * The bounded heap of names a local workspace's listdir keeps
 * (local_names.c).
 */

#include <stddef.h>

/* A max-heap of names holding the smallest seen that can still be in the
 * listing: at most cap of them (max_entries), and of at most limit bytes of
 * path (AIRLOCK_WORKSPACE_LISTDIR_BYTES_MAX; a name costs the directory's
 * prefix, the name and a NUL). A directory of any size is listed in
 * O(n log k) time and memory within both bounds: past the byte bound the
 * largest name held cannot be in the listing (the listing is the sorted
 * prefix, and the names held are its first ones), so it goes, and the cap
 * shrinks to what is left, so no larger name comes back in. */
typedef struct local_names {
	char **v;
	size_t n;
	size_t alloc;
	size_t cap;
	size_t bytes;  /* the cost of the names held */
	size_t limit;  /* of bytes */
	size_t prefix; /* the cost of the directory's path before each name */
} local_names;

/* Free the names held and empty the heap. */
void local_names_clear(local_names *h);
/* Offer one name: kept when it can still be in the listing. 0, or -ENOMEM. */
int local_names_offer(local_names *h, const char *name);
/* qsort's comparison of two names (char * elements). */
int local_names_cmp(const void *a, const void *b);

#endif
