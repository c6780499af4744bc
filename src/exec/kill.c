/* SPDX-License-Identifier: Apache-2.0 */
/* The choice of kill reason (kill.h). */
#include "exec/kill.h"

airlock_kill_reason exec_kill_decide(const exec_observed *o)
{
	if (o->finished) {
		/* The rule at exit (docs/native.md, "Kill reasons"): a command that
		 * exited on its own with a failure, leaving the volume full,
		 * having changed the workspace, met the limit: DISK. Decided on
		 * the state after every process is gone, which the sampling
		 * cannot race: the same command from the same workspace gets the
		 * same reason. One that exits 0 finished its work; one that
		 * changed nothing (`false` in a full workspace) failed for a
		 * reason of its own. */
		if (!o->never_ran && o->exit_failed && o->full_after && o->changed)
			return AIRLOCK_KILL_DISK;
		return AIRLOCK_KILL_NONE;
	}
	/* Output past the cap is seen while reading, before any limit. */
	if (o->output_cap_hit)
		return AIRLOCK_KILL_OUTPUT_LIMIT;
	/* The limits, in the order the specification lists them. */
	if (!o->exited && o->now >= o->expiry_at)
		return AIRLOCK_KILL_EXPIRED;
	if (!o->exited && o->now >= o->timeout_at)
		return AIRLOCK_KILL_TIMEOUT;
	if (o->oom_killed)
		return AIRLOCK_KILL_MEMORY;
	if (o->pids_hit)
		return AIRLOCK_KILL_PIDS;
	/* Full for the hold time while it runs, after this command filled it
	 * (it was not full, or its counts moved): a filler that keeps trying.
	 * A volume full from before and left alone kills nothing. */
	if (!o->exited && o->disk_full && o->disk_moved &&
	    o->now - o->disk_full_since >= EXEC_DISK_HOLD_MS)
		return AIRLOCK_KILL_DISK;
	if ((!o->exited && o->cancelled) || o->destroyed)
		return AIRLOCK_KILL_CANCELLED;
	if (!o->exited && o->shutdown)
		return AIRLOCK_KILL_SERVICE_SHUTDOWN;
	return AIRLOCK_KILL_NONE;
}
