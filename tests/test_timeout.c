/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Timeouts compose by minimum, and the model is the weakest input
 * (the specification). One table, one loop: each row is a case the
 * specification names or an edge of the arithmetic.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "airlock/timeout.h"

#define NONE AIRLOCK_BUDGET_NONE

typedef struct row {
	const char *what;
	airlock_timeout_inputs in;
	int64_t want_ms; /* when ok */
	bool ok;
	const char *msg_has; /* a substring of the refusal message */
} row;

/* hard cap, wall clock, budget ms, command, tool timeout_s, floor */
#define IN(h, w, b, c, t, f)                                                                       \
	{ .hard_cap_seconds = (h), .wall_clock_seconds = (w), .remaining_budget_ms = (b),           \
	  .command_seconds = (c), .tool_timeout_seconds = (t), .floor_seconds = (f) }

static const row rows[] = {
	/* The specification's two sentences about the model's value. */
	{ "model asks 3600, gets the tool's 300", IN(1800, 1800, NONE, 3600, 300, 5), 300000, true, NULL },
	{ "model asks 5, gets 5", IN(1800, 300, NONE, 5, 300, 5), 5000, true, NULL },
	/* Each of the four inputs as the lowest. */
	{ "hard cap lowest", IN(60, 300, 900000, 300, 300, 5), 60000, true, NULL },
	{ "wall clock lowest", IN(1800, 120, 900000, 300, 300, 5), 120000, true, NULL },
	{ "budget lowest", IN(1800, 300, 42000, 300, 300, 5), 42000, true, NULL },
	{ "budget lowest, sub-second precision kept", IN(1800, 300, 12345, 300, 300, 5), 12345, true, NULL },
	{ "model lowest", IN(1800, 300, 900000, 7, 300, 5), 7000, true, NULL },
	{ "tool timeout lowest", IN(1800, 300, 900000, 300, 30, 5), 30000, true, NULL },
	/* No run deadline: the other three still bound it. */
	{ "budget none", IN(1800, 300, NONE, 300, 300, 5), 300000, true, NULL },
	{ "budget none, hard cap still applies", IN(10, 300, NONE, 300, 300, 5), 10000, true, NULL },
	/* The floor. */
	{ "budget under floor refused", IN(1800, 300, 4999, 300, 300, 5), 0, false, "floor" },
	{ "budget exactly at floor allowed", IN(1800, 300, 5000, 300, 300, 5), 5000, true, NULL },
	{ "budget just above floor", IN(1800, 300, 5001, 300, 300, 5), 5001, true, NULL },
	{ "zero floor, positive budget", IN(1800, 300, 1, 300, 300, 0), 1, true, NULL },
	{ "zero floor, budget spent", IN(1800, 300, 0, 300, 300, 0), 0, false, "budget" },
	{ "negative budget (deadline passed)", IN(1800, 300, -1000, 300, 300, 5), 0, false, "budget" },
	/* Non-positive inputs name the input. */
	{ "hard cap zero", IN(0, 300, NONE, 300, 300, 5), 0, false, "hard_cap_seconds" },
	{ "hard cap negative", IN(-1, 300, NONE, 300, 300, 5), 0, false, "hard_cap_seconds" },
	{ "wall clock zero", IN(1800, 0, NONE, 300, 300, 5), 0, false, "wall_clock_seconds" },
	{ "command zero", IN(1800, 300, NONE, 0, 300, 5), 0, false, "timeout_seconds" },
	{ "command negative", IN(1800, 300, NONE, -5, 300, 5), 0, false, "timeout_seconds" },
	{ "tool timeout zero", IN(1800, 300, NONE, 300, 0, 5), 0, false, "timeout_s" },
	{ "floor negative", IN(1800, 300, NONE, 300, 300, -1), 0, false, "floor" },
	{ "INT64_MIN command", IN(1800, 300, NONE, INT64_MIN, 300, 5), 0, false, "timeout_seconds" },
	/* Overflow-ish: seconds that do not fit in ms saturate instead of
	 * wrapping, and the smallest real bound still wins. */
	{ "huge hard cap", IN(INT64_MAX, 300, NONE, 300, 300, 5), 300000, true, NULL },
	{ "all huge, no budget", IN(INT64_MAX, INT64_MAX, NONE, INT64_MAX, INT64_MAX, 0), INT64_MAX, true, NULL },
	{ "all huge, budget bounds", IN(INT64_MAX, INT64_MAX, INT64_MAX - 1, INT64_MAX, INT64_MAX, 0), INT64_MAX - 1, true, NULL },
	{ "just over the ms range", IN(INT64_MAX / 1000 + 1, 300, NONE, 300, 300, 5), 300000, true, NULL },
	{ "exactly at the ms range", IN(INT64_MAX / 1000, INT64_MAX / 1000, NONE, INT64_MAX / 1000, INT64_MAX / 1000, 0), (INT64_MAX / 1000) * 1000, true, NULL },
	{ "huge floor refuses any finite budget", IN(1800, 300, INT64_MAX - 1, 300, 300, INT64_MAX), 0, false, "floor" },
	{ "huge floor, no budget: floor unused", IN(1800, 300, NONE, 300, 300, INT64_MAX), 300000, true, NULL },
};

Test(timeout, table)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const row *r = &rows[i];
		airlock_error err = { 0 };
		int64_t got = -12345;
		int rc = airlock_timeout_effective(&r->in, &got, &err);
		if (r->ok) {
			cr_expect_eq(rc, 0, "[%s] rc %d: %s", r->what, rc, err.message);
			cr_expect_eq(got, r->want_ms, "[%s] got %lld ms, want %lld", r->what,
			             (long long)got, (long long)r->want_ms);
		} else {
			cr_expect_eq(rc, airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION), "[%s] rc %d",
			             r->what, rc);
			cr_expect_eq(err.cls, AIRLOCK_ERR_TOOL_VALIDATION, "[%s]", r->what);
			cr_expect(strstr(err.message, r->msg_has) != NULL, "[%s] message \"%s\" lacks \"%s\"",
			          r->what, err.message, r->msg_has);
			cr_expect_eq(got, -12345, "[%s] ret_ms written on failure", r->what);
		}
	}
}

/* The model's value only ever lowers the result: for every other input
 * fixed, raising command_seconds never raises the effective timeout, and the
 * result never exceeds the hard cap. */
Test(timeout, model_only_lowers)
{
	for (int64_t cmd = 1; cmd <= 4000; cmd += 37) {
		airlock_timeout_inputs in = IN(1800, 300, NONE, cmd, 300, 5);
		airlock_timeout_inputs lower = in;
		lower.command_seconds = cmd > 1 ? cmd - 1 : 1;
		int64_t a, b;
		cr_assert_eq(airlock_timeout_effective(&in, &a, NULL), 0);
		cr_assert_eq(airlock_timeout_effective(&lower, &b, NULL), 0);
		cr_expect(b <= a);
		cr_expect(a <= 300000);
		cr_expect(a <= cmd * 1000);
	}
}

Test(timeout, null_inputs)
{
	int64_t ms;
	airlock_error err = { 0 };
	cr_expect_eq(airlock_timeout_effective(NULL, &ms, &err), airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION));
	airlock_timeout_inputs in = IN(1800, 300, NONE, 300, 300, 5);
	cr_expect_eq(airlock_timeout_effective(&in, NULL, &err), airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION));
}
