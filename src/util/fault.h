/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_UTIL_FAULT_H
#define AIRLOCK_UTIL_FAULT_H

/*
 * Fault injection (SQLite's test_vfs.c, curl's torture mode): a step that
 * can fail asks util_fault("name") first and, when it answers true, takes
 * its own failure path as if the step had failed (with -EIO unless the
 * caller has a better errno to fake). Only a build configured with
 * -Dfault_injection=true compiles the counter in; every other build gets an
 * inline false the compiler removes, so a production binary has no switch
 * a caller could reach.
 *
 * The counter is process-wide: util_fault_arm(N) makes the Nth check from
 * then on answer true (once); util_fault_hits() says how many checks were
 * seen since the last arm, so a test can fail each step in turn with
 * N = 1, 2, ... until a run sees fewer than N checks. A check in a forked
 * child counts in the child's copy only: put checks on the caller's side.
 */

#include <errno.h>
#include <stdbool.h>

#ifdef AIRLOCK_FAULT_INJECTION
bool util_fault(const char *point);
/* Fail the nth check from now (1-based); 0 disarms. Resets the hit count. */
void util_fault_arm(unsigned nth);
/* Checks seen since the last arm. */
unsigned util_fault_hits(void);
/* The point that was failed since the last arm, or NULL. */
const char *util_fault_fired(void);
/* A system call's result, or -1 with errno EIO when this build fails the
 * point here: the call's own failure path then runs as for a real
 * failure. For the facilities' steps (volume, loop, cgroups, netns). */
#define UTIL_FAULT_CALL(point, call) (util_fault(point) ? (errno = EIO, -1) : (call))
/* The same for a call that returns 0 or -errno: -EIO. */
#define UTIL_FAULT_RET(point, call) (util_fault(point) ? -EIO : (call))
#else
#define UTIL_FAULT_CALL(point, call) (call)
#define UTIL_FAULT_RET(point, call) (call)
static inline bool util_fault(const char *point)
{
	(void)point;
	return false;
}
#endif

#endif
