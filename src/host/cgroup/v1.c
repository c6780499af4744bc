/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hybrid mode: cgroup v1 controllers (cgroup_internal.h, cg_driver).
 *
 * On a hybrid host (these machines, docs/design-notes.md, "Cgroups") the memory, pids and cpu controllers live in three v1
 * hierarchies, and the v2 hierarchy (usually /sys/fs/cgroup/unified) has no
 * controllers but gives cgroup.kill and cgroup.events; a sandbox gets the
 * same three-level layout (cgroup.h) in each of the four. The v2 hierarchy
 * is optional here: without it, kill and emptiness fall back to
 * cgroup.procs (but a sandbox's socket budget, host/sockbudget.h, needs a
 * v2 group, so provisions then fail).
 *
 * Everything that exists only because of v1 is in this file, so that
 * dropping v1 is deleting it and its entry in layout.c's cg_drivers.
 */
#include "host/cgroup/cgroup_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/util.h"

/* On v1, socket buffers are capped at this fraction of the memory limit
 * (the memory.kmem.tcp.limit_in_bytes entry below). */
#define CG_V1_TCP_SHARE 4

static const int cg_v1_ctls[] = { CG_MEMORY, CG_PIDS, CG_CPU };

/* Hybrid when every controller is in a v1 hierarchy, each mounted here;
 * a refusal when some are and others are not. */
static int cg_v1_claim(const cg_want want[CG__KIND_MAX], cg_layout *l, airlock_error *err)
{
	bool any_v1 = false, all_v1 = true;
	for (size_t i = 0; i < ARRAY_SIZE(cg_v1_ctls); i++) {
		int k = cg_v1_ctls[i];
		any_v1 = any_v1 || want[k].path;
		all_v1 = all_v1 && want[k].path;
		if (want[k].path && !l->dir[k])
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                         "cgroups: the v1 %s hierarchy is not mounted here",
			                         cg_kind_name[k]);
	}
	if (any_v1 && !all_v1) {
		for (size_t i = 0; i < ARRAY_SIZE(cg_v1_ctls); i++)
			if (!want[cg_v1_ctls[i]].path)
				return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
				                         "cgroups: the %s controller is in no v1 hierarchy "
				                         "while others are (mixed layout)",
				                         cg_kind_name[cg_v1_ctls[i]]);
	}
	return all_v1 ? 1 : 0;
}

/* Every hierarchy that is mounted: the three v1 ones, and the v2 one when
 * there is one. */
static bool cg_v1_kind_used(const cg_layout *l, int k)
{
	return l->dir[k] != NULL;
}

/* Whether any process is left in the subtree at dfd (v1: listed in the
 * cgroup.procs of the group or of a group below it). */
static int cg_v1_populated(int dfd, int depth, bool *ret)
{
	if (depth > AIRLOCK_CG_MAX_DEPTH)
		return -ELOOP;
	_cleanup_free_ pid_t *p = NULL;
	size_t n = 0;
	int r = cg_procs_read(dfd, 1, &p, &n);
	if (r < 0)
		return r;
	if (n) {
		*ret = true;
		return 0;
	}
	cg_names subs = { 0 };
	r = cg_subdirs(dfd, NULL, &subs);
	if (r < 0)
		return r;
	bool any = false;
	for (size_t i = 0; i < subs.n && r >= 0 && !any; i++) {
		_cleanup_close_ int sfd = cg_open_dir(dfd, subs.v[i]);
		if (sfd == -ENOENT)
			continue;
		r = sfd < 0 ? sfd : cg_v1_populated(sfd, depth + 1, &any);
	}
	cg_names_clear(&subs);
	if (r >= 0)
		*ret = any;
	return r;
}

static void cg_v1_value_tcp(const airlock_resource_limits *lim, char *out, size_t size)
{
	snprintf(out, size, "%" PRId64, lim->memory_bytes / CG_V1_TCP_SHARE);
}

static const cg_limit cg_v1_limits[] = {
	/* v1 memory: memsw (memory + swap) equal to the limit, so swap cannot
	 * extend it. The kernel requires memsw >= limit at every step, and both
	 * start unlimited, so the limit goes first. Without swap accounting
	 * (no memsw file), swappiness 0 keeps the group's pages out of swap. */
	{ .kind = CG_MEMORY, .file = "memory.limit_in_bytes", .value = cg_value_memory },
	{ .kind = CG_MEMORY, .file = "memory.memsw.limit_in_bytes", .value = cg_value_memory,
	  .absent_file = "memory.swappiness", .absent_value = cg_value_zero },
	/* v1 socket buffers. A v1 memory cgroup charges no socket buffer
	 * anywhere until memory.kmem.tcp.limit_in_bytes is written: then every
	 * socket created in it afterwards (none exists yet) charges TCP and UDP
	 * buffers to the group's own tcp counter, outside memory.usage_in_bytes,
	 * and past the limit TCP shrinks its windows and UDP drops datagrams.
	 * Before this, 200 loopback TCP connections in a 64 MiB group queued
	 * 780 MB of host memory. A quarter of the memory limit: total kernel
	 * and user memory stays within 1.25 times the limit (plus the few pages
	 * per socket the kernel always grants), and a build's downloads through
	 * the proxy need a few MiB. Required: without it the limit does not
	 * hold. (v2 charges socket buffers to memory.current itself.) Unix
	 * socket buffers are charged to the memory limit by the kernel.
	 *
	 * The write turns accounting on for that group only, and a socket is
	 * charged to the group of the process that made it: the leaves, where
	 * the processes are, need it as much as the sandbox group, whose
	 * counter their charges also go to (the tcp counters are hierarchical,
	 * so the sandbox group's limit holds for init and cmd together). */
	{ .kind = CG_MEMORY, .file = "memory.kmem.tcp.limit_in_bytes", .value = cg_v1_value_tcp,
	  .in_leaves = true,
	  .absent_refusal = "this kernel has no memory.kmem.tcp.limit_in_bytes, so socket buffers "
	                    "would escape the memory limit" },
	{ .kind = CG_PIDS, .file = "pids.max", .value = cg_value_pids },
	{ .kind = CG_CPU, .file = "cpu.cfs_period_us", .value = cg_value_cpu_period },
	{ .kind = CG_CPU, .file = "cpu.cfs_quota_us", .value = cg_value_cpu_quota },
};

const cg_driver cg_driver_hybrid = {
	.mode = HOST_CGROUP_HYBRID,
	.claim = cg_v1_claim,
	.kind_used = cg_v1_kind_used,
	.controllers_in_unified = false,
	.limits = cg_v1_limits,
	.n_limits = ARRAY_SIZE(cg_v1_limits),
	.counter_file = { [CG_OOM] = "memory.oom_control", [CG_PIDS_EVENTS] = "pids.events" },
	/* The kernel keeps these counters only in the group of the task
	 * concerned: the leaves are read too, and summed. */
	.counters_in_leaves = true,
	.walk_populated = cg_v1_populated,
	/* v1 has no memory.reclaim: force_empty reclaims all it can from the
	 * group, tasks or not, until a fatal signal (reclaim.c bounds it). Its
	 * kmem counter holds every kernel charge, the reclaimable ones among
	 * them (v1's memory.stat does not tell slab apart). */
	.usage_file = "memory.usage_in_bytes",
	.kmem_file = "memory.kmem.usage_in_bytes",
	.reclaim_file = "memory.force_empty",
};
