/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_TIMEOUT_H
#define AIRLOCK_TIMEOUT_H

/*
 * Timeouts compose by minimum, and the model is the weakest input
 * (the specification):
 *
 *   effective = min(service hard cap,
 *                   limits.wall_clock_seconds,
 *                   remaining run budget,
 *                   min(command.timeout_seconds, tool timeout_s))
 *
 * The model's value is clamped to the tool's declared timeout (300) and can
 * only lower the result. The hard cap applies whether or not anything else
 * was supplied. A command is not started when the remaining budget is under
 * the floor (default 5 s): that returns
 * AIRLOCK_ERR_TOOL_VALIDATION with a message naming the budget and the floor,
 * because starting a command certain to be killed wastes the sandbox start.
 */

#include <stdint.h>

#include "airlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AIRLOCK_BUDGET_NONE INT64_MIN /* no run deadline */

typedef struct airlock_timeout_inputs {
	int64_t hard_cap_seconds;     /* > 0, operator */
	int64_t wall_clock_seconds;   /* > 0, spec.limits */
	int64_t remaining_budget_ms;  /* AIRLOCK_BUDGET_NONE, or ms to the run deadline */
	int64_t command_seconds;      /* > 0, from the model */
	int64_t tool_timeout_seconds; /* > 0, the tool's declared timeout_s */
	int64_t floor_seconds;        /* >= 0, don't start under this budget */
} airlock_timeout_inputs;

/* *ret_ms is the effective timeout in milliseconds. Inputs that are not
 * positive where required are AIRLOCK_ERR_TOOL_VALIDATION (naming the input);
 * a budget under the floor is AIRLOCK_ERR_TOOL_VALIDATION too. */
int airlock_timeout_effective(const airlock_timeout_inputs *in, int64_t *ret_ms, airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
