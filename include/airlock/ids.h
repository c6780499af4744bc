/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_IDS_H
#define AIRLOCK_IDS_H

/*
 * Identifiers the platform generates. Both come from getrandom(2); neither
 * carries anything a caller supplied.
 *
 * environment_id: "env_" + 32 lowercase hex characters (128 random bits).
 *   Opaque: it names a sandbox and encodes nothing about it.
 * artifact_id: a UUIDv7 (RFC 9562 section 5.7): 48-bit Unix milliseconds,
 *   version 7, 12 bits of sub-millisecond counter that keeps ids generated in
 *   one process strictly increasing, variant 10, 62 random bits.
 */

#include <stdbool.h>
#include <stdint.h>

#include "airlock/error.h"
#include "airlock/types.h"

#ifdef __cplusplus
extern "C" {
#endif

int airlock_environment_id_new(char ret[AIRLOCK_ENVIRONMENT_ID_MAX], airlock_error *err);
bool airlock_environment_id_valid(const char *id);

/* ret receives the canonical 36-character lowercase form plus NUL. */
int airlock_uuidv7_new(char ret[AIRLOCK_UUID_STR_LEN + 1], airlock_error *err);
/* Same, at a given time (for tests and for the ordering property). */
int airlock_uuidv7_at(int64_t unix_ms, char ret[AIRLOCK_UUID_STR_LEN + 1], airlock_error *err);
bool airlock_uuidv7_valid(const char *s);
/* The 48-bit timestamp of a valid UUIDv7, or -1. */
int64_t airlock_uuidv7_time_ms(const char *s);

#ifdef __cplusplus
}
#endif
#endif
