/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The choice of kill reason (src/exec/native/kill.h), without root: every
 * reason alone, every pair observed in one round decided in the order
 * execute has always decided them, what an exited command can still be
 * killed for, the disk hold time, and the rule at exit.
 */
#include <criterion/criterion.h>

#include "exec/kill.h"

/* The order: the first of these that is observed wins. */
static const airlock_kill_reason order[] = {
	AIRLOCK_KILL_OUTPUT_LIMIT, AIRLOCK_KILL_EXPIRED, AIRLOCK_KILL_TIMEOUT,
	AIRLOCK_KILL_MEMORY,       AIRLOCK_KILL_PIDS,    AIRLOCK_KILL_DISK,
	AIRLOCK_KILL_CANCELLED,    AIRLOCK_KILL_SERVICE_SHUTDOWN,
};
#define N_ORDER (sizeof(order) / sizeof(order[0]))

/* A round in which nothing is wrong: the deadlines are ahead. */
static exec_observed calm(void)
{
	return (exec_observed){ .now = 10000, .expiry_at = 20000, .timeout_at = 15000 };
}

/* Make o show what reason k needs. */
static void observe(exec_observed *o, airlock_kill_reason k)
{
	switch (k) {
	case AIRLOCK_KILL_OUTPUT_LIMIT:
		o->output_cap_hit = true;
		break;
	case AIRLOCK_KILL_EXPIRED:
		o->expiry_at = o->now;
		break;
	case AIRLOCK_KILL_TIMEOUT:
		o->timeout_at = o->now;
		break;
	case AIRLOCK_KILL_MEMORY:
		o->oom_killed = true;
		break;
	case AIRLOCK_KILL_PIDS:
		o->pids_hit = true;
		break;
	case AIRLOCK_KILL_DISK:
		o->disk_full = true;
		o->disk_moved = true;
		o->disk_full_since = o->now - EXEC_DISK_HOLD_MS;
		break;
	case AIRLOCK_KILL_CANCELLED:
		o->cancelled = true;
		break;
	case AIRLOCK_KILL_SERVICE_SHUTDOWN:
		o->shutdown = true;
		break;
	case AIRLOCK_KILL_NONE:
	case AIRLOCK_KILL__MAX:
		cr_assert_fail("not a reason");
	}
}

/* What an exited command can still be killed for: what its cgroup or
 * its output recorded. The clock, the disk, cancel and shutdown concern a
 * running command only. */
static bool counts_after_exit(airlock_kill_reason k)
{
	return k == AIRLOCK_KILL_OUTPUT_LIMIT || k == AIRLOCK_KILL_MEMORY || k == AIRLOCK_KILL_PIDS;
}

Test(native_kill, nothing_observed_is_no_reason)
{
	exec_observed o = calm();
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_NONE);
	o.exited = true;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_NONE);
}

Test(native_kill, every_reason_alone)
{
	for (size_t i = 0; i < N_ORDER; i++) {
		exec_observed o = calm();
		observe(&o, order[i]);
		cr_assert_eq(exec_kill_decide(&o), order[i], "reason %zu alone", i);
		o.exited = true;
		cr_assert_eq(exec_kill_decide(&o),
		             counts_after_exit(order[i]) ? order[i] : AIRLOCK_KILL_NONE,
		             "reason %zu after the command exited", i);
	}
}

Test(native_kill, every_pair_is_decided_in_the_one_order)
{
	for (size_t i = 0; i < N_ORDER; i++)
		for (size_t j = i + 1; j < N_ORDER; j++) {
			exec_observed o = calm();
			observe(&o, order[j]);
			observe(&o, order[i]);
			cr_assert_eq(exec_kill_decide(&o), order[i], "reasons %zu and %zu", i, j);
			/* Once it exited, the first that still counts wins. */
			o.exited = true;
			airlock_kill_reason want = counts_after_exit(order[i])   ? order[i]
			                           : counts_after_exit(order[j]) ? order[j]
			                                                         : AIRLOCK_KILL_NONE;
			cr_assert_eq(exec_kill_decide(&o), want, "reasons %zu and %zu, exited", i, j);
		}
}

Test(native_kill, every_reason_at_once_is_the_output_limit)
{
	exec_observed o = calm();
	for (size_t i = 0; i < N_ORDER; i++)
		observe(&o, order[i]);
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_OUTPUT_LIMIT);
	o.output_cap_hit = false;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_EXPIRED);
	o.exited = true;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_MEMORY);
}

Test(native_kill, deadlines_are_reached_at_their_instant)
{
	exec_observed o = calm();
	o.timeout_at = o.now + 1;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_NONE);
	o.timeout_at = o.now;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_TIMEOUT);
	o.expiry_at = o.now + 1;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_TIMEOUT);
	o.expiry_at = o.now - 1;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_EXPIRED);
}

Test(native_kill, a_full_disk_kills_after_the_hold_and_only_when_this_command_filled_it)
{
	exec_observed o = calm();
	o.disk_full = true;
	o.disk_moved = true;
	o.disk_full_since = o.now - EXEC_DISK_HOLD_MS + 1;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_NONE, "not held long enough");
	o.disk_full_since = o.now - EXEC_DISK_HOLD_MS;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_DISK);
	o.disk_moved = false;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_NONE, "full from before and left alone");
	o.disk_moved = true;
	o.disk_full = false;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_NONE, "not full now");
}

Test(native_kill, the_rule_at_exit_needs_all_four)
{
	exec_observed all = { .finished = true, .exit_failed = true, .full_after = true,
		                .changed = true };
	cr_assert_eq(exec_kill_decide(&all), AIRLOCK_KILL_DISK);
	exec_observed o = all;
	o.never_ran = true;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_NONE, "it never ran");
	o = all;
	o.exit_failed = false;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_NONE, "it exited 0");
	o = all;
	o.full_after = false;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_NONE, "not full after");
	o = all;
	o.changed = false;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_NONE, "it changed nothing");
}

Test(native_kill, the_rule_at_exit_looks_at_nothing_the_loop_saw)
{
	/* The loop's observations were decided in the loop; a reason found
	 * there is never reconsidered at exit. */
	exec_observed o = calm();
	for (size_t i = 0; i < N_ORDER; i++)
		observe(&o, order[i]);
	o.finished = true;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_NONE);
}

/* A destroy under a running command kills it: CANCELLED, also when the
 * command is seen exited in the same round (it exited of that kill), and
 * after every reason the command met first. */
Test(native_kill, a_destroy_under_the_command_is_cancelled_even_once_exited)
{
	exec_observed o = calm();
	o.destroyed = true;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_CANCELLED);
	o.exited = true;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_CANCELLED);
	o.oom_killed = true;
	cr_assert_eq(exec_kill_decide(&o), AIRLOCK_KILL_MEMORY, "a reason met first wins");
	exec_observed f = { .finished = true, .destroyed = true };
	cr_assert_eq(exec_kill_decide(&f), AIRLOCK_KILL_NONE, "the rule at exit looks at its own");
}
