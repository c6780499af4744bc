/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_TESTS_FAULT_ADAPTER_H
#define AIRLOCK_TESTS_FAULT_ADAPTER_H

/*
 * A wrapper adapter that fails the Nth port call of any adapter (SQLite's
 * test_vfs.c, one layer up): an airlock_exec_ops that sits between the core
 * and a real ExecutionEnvironment adapter, and an airlock_workspace_ops that
 * sits in front of every workspace it hands out (and of any workspace a test
 * wraps directly). Every port call (provision, execute, destroy, workspace;
 * contain, read, write, listdir, provenance) counts once on one shared plan;
 * the call the plan is armed for fails with a clean error of a class the
 * port allows for that call, the way such a failure really happens:
 *
 *   provision   the inner provision ran, then a later step "failed": the
 *               wrapper destroys what the inner one made (the port says "on
 *               failure nothing is left behind") and reports
 *               ExecutionUnavailable, as a start past its budget is.
 *   execute     the inner execute ran (the command ran, the sandbox may have
 *               changed) and its result is lost: cleared, ExecutionUnavailable.
 *   destroy     the inner destroy ran, then the call reports
 *               ExecutionUnavailable: the core keeps its record, so a later
 *               destroy (or the adapter's free) retries and finds it gone.
 *   workspace   the inner reference was taken and is released again:
 *               ExecutionUnavailable.
 *   contain     no inner call: WorkspaceEscape (a containment that cannot be
 *               decided fails closed).
 *   read, write, listdir, provenance
 *               no inner call: a system error, EIO (the disk failed).
 *
 * Nothing here counts free or shutdown: they cannot fail.
 *
 * Test code only: the wrapper is not part of the library, and its counter
 * works in every build (it is not util_fault's, which exists only in a
 * fault-injection build and counts the library's own steps).
 */

#include <stdatomic.h>

#include "airlock/port/exec.h"
#include "airlock/port/workspace.h"

typedef struct fault_plan {
	atomic_uint nth;  /* the call to fail, 1-based; 0 fails none */
	atomic_uint seen; /* port calls since the last arm */
	const char *_Atomic fired; /* the call that was failed, or NULL */
} fault_plan;

/* Fail the nth port call from now (0: none); resets the count. */
void fault_plan_arm(fault_plan *p, unsigned nth);
/* Port calls seen since the last arm. */
unsigned fault_plan_calls(const fault_plan *p);
/* The call that was failed since the last arm ("exec.provision", ...), or NULL. */
const char *fault_plan_fired(const fault_plan *p);

/* The exec wrapper: ctx for airlock_exec_new (which then owns it). Takes
 * inner_ctx (freed through inner->free, also on failure); plan is the
 * caller's and must outlive the wrapper. */
const airlock_exec_ops *fault_exec_ops(void);
int fault_exec_new(const airlock_exec_ops *inner, void *inner_ctx, fault_plan *plan, void **ret,
                   airlock_error *err);

/* A workspace whose calls count on plan and go on to inner. Takes the
 * caller's reference on inner (released when the last reference on *ret
 * is, or by airlock_workspace_free of *ret). */
int fault_workspace_new(airlock_workspace *inner, fault_plan *plan, airlock_workspace **ret,
                        airlock_error *err);

#endif
