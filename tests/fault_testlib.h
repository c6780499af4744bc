/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_FAULT_TESTLIB_H
#define AIRLOCK_FAULT_TESTLIB_H

/* The fault suites' shared steps (built only with -Dfault_injection=true). */

#include "sandbox_testlib.h"
#include "util/fault.h"

/* One provision and destroy with spec, before a walk's baseline: what a
 * service keeps for its life once a sandbox has run (the image's mount or
 * loop device) is then in it. */
static inline void fault_test_warm_up(airlock_exec *e, const airlock_environment_spec *spec)
{
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(e, spec, &h, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	airlock_environment_handle_clear(&h);
}

/* A destroy of h with the nth fault-injection check from now failed: the
 * destroy's result; the checks it saw in *ret_hits, and the point failed
 * (NULL: none) in *ret_fired. */
static inline int sandbox_test_destroy_failing(airlock_exec *e, const airlock_environment_handle *h,
                                               unsigned nth, airlock_error *err,
                                               unsigned *ret_hits, const char **ret_fired)
{
	util_fault_arm(nth);
	memset(err, 0, sizeof(*err));
	int r = airlock_exec_destroy(e, h, err);
	*ret_hits = util_fault_hits();
	*ret_fired = util_fault_fired();
	util_fault_arm(0);
	return r;
}
#endif
