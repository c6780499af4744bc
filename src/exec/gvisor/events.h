/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EXEC_GVISOR_EVENTS_H
#define AIRLOCK_EXEC_GVISOR_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "airlock/error.h"

/* The sandbox's process count (data.pids.current, init included) from
 * `runsc events --stats` output (out, len bytes). runsc is another
 * process, one a sandbox can make misbehave: its output is decoded under
 * the core's memory budget (core/json_internal.h) and at most
 * AIRLOCK_GVISOR_RUNSC_OUTPUT_MAX bytes. DECODE naming the output for input
 * over that, invalid JSON, a tree over the budget or no integer count. */
int gv_events_pids(const char *out, size_t len, int64_t *ret, airlock_error *err);

#endif
