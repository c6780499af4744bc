/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The crash sweep of every host facility, in one call (crash_sweep.h).
 */
#include "host/crash_sweep.h"

#include "host/cgroup/cgroup.h"
#include "host/image_store.h"

int host_crash_sweep(airlock_image_store *images, unsigned *ret_cgroups_removed,
                     airlock_error *err)
{
	if (images)
		host_image_sweep_tmp(images);
	return host_cgroup_sweep(ret_cgroups_removed, err);
}
