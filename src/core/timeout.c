/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Timeouts compose by minimum, and the model is the weakest input
 * (the specification). The arithmetic is in milliseconds because the run
 * budget is; seconds are converted with saturation, so an absurd operator
 * value becomes "no bound from this input" rather than a wrapped negative.
 */
#include "airlock/timeout.h"

static int64_t seconds_to_ms(int64_t s)
{
	if (s > INT64_MAX / 1000)
		return INT64_MAX;
	return s * 1000;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

int airlock_timeout_effective(const airlock_timeout_inputs *in, int64_t *ret_ms, airlock_error *err)
{
	if (!in || !ret_ms)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "timeout: missing input");

	/* Every bound is required and positive. A zero here is a forgotten
	 * value, and a forgotten bound must not read as "unbounded". */
	const struct {
		const char *name;
		int64_t v;
	} required[] = {
		{ "hard_cap_seconds", in->hard_cap_seconds },
		{ "wall_clock_seconds", in->wall_clock_seconds },
		{ "timeout_seconds", in->command_seconds },
		{ "tool timeout_s", in->tool_timeout_seconds },
	};
	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
		if (required[i].v <= 0)
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "timeout: %s must be a positive integer (got %lld)",
			                         required[i].name, (long long)required[i].v);
	if (in->floor_seconds < 0)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "timeout: budget floor must be >= 0 (got %lld)",
		                         (long long)in->floor_seconds);

	/* The model's value is clamped to the tool's declared timeout before it
	 * takes part: it can lower the result, never raise it. */
	int64_t model_ms = seconds_to_ms(min64(in->command_seconds, in->tool_timeout_seconds));
	/* The hard cap applies whatever else was or was not supplied. */
	int64_t eff = min64(seconds_to_ms(in->hard_cap_seconds), seconds_to_ms(in->wall_clock_seconds));
	eff = min64(eff, model_ms);

	if (in->remaining_budget_ms != AIRLOCK_BUDGET_NONE) {
		int64_t floor_ms = seconds_to_ms(in->floor_seconds);
		/* Not started under the floor: a command certain to be killed
		 * wastes the sandbox start and produces a confusing result. A budget
		 * already spent is refused even with a zero floor. */
		if (in->remaining_budget_ms <= 0 || in->remaining_budget_ms < floor_ms)
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "timeout: remaining run budget %lld ms is under the floor of %lld s; the command is not started",
			                         (long long)in->remaining_budget_ms,
			                         (long long)in->floor_seconds);
		eff = min64(eff, in->remaining_budget_ms);
	}
	*ret_ms = eff;
	return 0;
}
