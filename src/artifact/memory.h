/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_ARTIFACT_MEMORY_H
#define AIRLOCK_ARTIFACT_MEMORY_H

/*
 * The in-memory ArtifactStore adapter: the port's second adapter, so the
 * contract suite (tests/test_artifact_contract.c) runs one set of tests
 * against two implementations, the way an object store's adapter would
 * join it. Bounded: every byte it holds (objects and puts in flight) counts
 * against max_bytes, and a write past it fails with ENOSPC, as a full disk
 * does. Not for production: everything goes with the process.
 */

#include <stddef.h>
#include <stdint.h>

#include "airlock/port/artifact.h"

typedef struct artifact_memstore artifact_memstore;

/* *ret_state is the adapter's state behind *ret, for the hooks below; it
 * lives as long as the store. */
int artifact_memory_open(size_t max_bytes, airlock_artifact_store **ret,
                         artifact_memstore **ret_state, airlock_error *err);

/* A temporary object left by a put that never finished (what a crash
 * leaves in another adapter), last written at mtime_ms. */
int artifact_memory_plant_temp(artifact_memstore *m, const char *key, int64_t mtime_ms);
/* How many temporaries (of puts in flight and planted) and committed
 * objects it holds, and their bytes. */
void artifact_memory_count(artifact_memstore *m, size_t *ret_temps, size_t *ret_objects,
                           size_t *ret_bytes);
/* Whether a committed object is held under exactly this key. */
int artifact_memory_has(artifact_memstore *m, const char *key);

#endif
