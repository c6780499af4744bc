/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EXEC_STEP_H
#define AIRLOCK_EXEC_STEP_H

/*
 * A mechanism's named steps (provision's tables in native/provision.c and
 * gvisor/provision.c): how one step's failure is made and said, the same
 * for every mechanism. The runner of a table calls exec_step_fault before
 * the step and exec_step_said after it, so every failure of a step,
 * injected or real, reads "<step>: <what failed>: <reason>", and the core's
 * wrapper adds the verb and the mechanism above it ("provision (native):
 * workspace volume: fsopen ext4: Input/output error", docs/failure-paths.md).
 */

#include "airlock/error.h"

/* In a fault-injection build, when util_fault(point) fails the step here:
 * err is the step's own failure (class cls, EIO) naming the point, and the
 * class's code is returned. 0 otherwise (always, in any other build). */
int exec_step_fault(const char *point, airlock_errclass cls, airlock_error *err);

/*
 * A step's result r, said under the step's name what: when r < 0, err's
 * message becomes "what: " and the message the step's facility set, unless
 * that already starts with what (a facility that names itself, as the
 * workspace volume and the cgroups do, is not named twice); a step that
 * failed without a message is said as what and its code. The class and
 * errnum stay the facility's. Returns r.
 */
int exec_step_said(const char *what, int r, airlock_error *err);

#endif
