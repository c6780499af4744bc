/* SPDX-License-Identifier: Apache-2.0 */
#include "util/fault.h"

#ifdef AIRLOCK_FAULT_INJECTION
#include <stdatomic.h>
#include <stddef.h>

static atomic_uint fault_nth;
static atomic_uint fault_seen;
static const char *_Atomic fault_point;

bool util_fault(const char *point)
{
	unsigned n = atomic_fetch_add(&fault_seen, 1) + 1;
	if (n != atomic_load(&fault_nth))
		return false;
	atomic_store(&fault_point, point);
	return true;
}

void util_fault_arm(unsigned nth)
{
	atomic_store(&fault_seen, 0);
	atomic_store(&fault_point, NULL);
	atomic_store(&fault_nth, nth);
}

unsigned util_fault_hits(void) { return atomic_load(&fault_seen); }

const char *util_fault_fired(void) { return atomic_load(&fault_point); }
#else
/* ISO C forbids an empty translation unit. */
typedef int util_fault_unused;
#endif
