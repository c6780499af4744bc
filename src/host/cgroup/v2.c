/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure v2 mode: one hierarchy does everything (cgroup_internal.h,
 * cg_driver).
 *
 * Pure v2 and the "no internal processes" rule: limits go on
 * <own>/airlock-<id>, which needs memory, pids and cpu enabled in <own>'s
 * cgroup.subtree_control, and the kernel refuses that while <own> itself
 * holds processes (usually: the service). When it does, every process in
 * <own> is moved into a leaf <own>/airlockd first (what systemd asks of a
 * service with Delegate=yes), and the service's own cgroup is from then on
 * read as the leaf's parent. The sandbox's groups stay leaf-only themselves:
 * processes are only ever placed in init and cmd.
 */
#include "host/cgroup/cgroup_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

/* Pure v2: the controllers must be available to the service's cgroup
 * (enabled in its parent's cgroup.subtree_control). */
static int cg_v2_check(const char *dir, airlock_error *err)
{
	static const int ctls[] = { CG_MEMORY, CG_PIDS, CG_CPU };
	char buf[AIRLOCK_CG_SMALL_FILE];
	_cleanup_close_ int own = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (own < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "cgroups: cannot open the service's v2 cgroup");
	int r = cg_read(own, "cgroup.controllers", buf, sizeof(buf));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -r,
		                         "cgroups: cannot read cgroup.controllers of the service's "
		                         "v2 cgroup");
	for (size_t i = 0; i < ARRAY_SIZE(ctls); i++)
		if (!cg_has_word(buf, cg_kind_name[ctls[i]], ' '))
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                         "cgroups: the %s controller is not available to the "
			                         "service's v2 cgroup (enable it in the parent's "
			                         "cgroup.subtree_control, or delegate it)",
			                         cg_kind_name[ctls[i]]);
	return 0;
}

/* Pure v2: a mounted cgroup2 hierarchy holding the service. A service that
 * was moved into its leaf reads its own cgroup as the leaf's parent (file
 * comment). */
static int cg_v2_claim(const cg_want want[CG__KIND_MAX], cg_layout *l, airlock_error *err)
{
	if (!want[CG_UNIFIED].path || !l->dir[CG_UNIFIED])
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "cgroups: no v1 memory/pids/cpu hierarchies and no mounted "
		                         "cgroup2 hierarchy");
	char *d = l->dir[CG_UNIFIED];
	char *slash = strrchr(d, '/');
	if (slash && strcmp(slash + 1, CG_SERVICE_LEAF) == 0)
		*slash = 0;
	int r = cg_v2_check(d, err);
	return r < 0 ? r : 1;
}

static bool cg_v2_kind_used(const cg_layout *l, int k)
{
	return k == CG_UNIFIED;
}

/* Pure v2: make memory, pids and cpu available to the sandbox groups. */
static int cg_v2_enable(int own_fd, airlock_error *err)
{
	char buf[AIRLOCK_CG_SMALL_FILE];
	int r = cg_read(own_fd, "cgroup.subtree_control", buf, sizeof(buf));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
		                         "cgroups: reading cgroup.subtree_control");
	if (cg_has_word(buf, "memory", ' ') && cg_has_word(buf, "pids", ' ') &&
	    cg_has_word(buf, "cpu", ' '))
		return 0;
	/* A few rounds: a process the service forks while we move the others
	 * is born in the old cgroup and needs another round. */
	for (int round = 0; round < 8; round++) {
		r = cg_write(own_fd, "cgroup.subtree_control", "+memory +pids +cpu");
		if (r == 0)
			return 0;
		if (r != -EBUSY)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -r,
			                         "cgroups: enabling memory, pids and cpu for the "
			                         "service's v2 cgroup");
		/* EBUSY: "no internal processes". Move what lives in our cgroup
		 * (the service; under systemd only the unit's processes) into
		 * the leaf; nothing else changes for them. */
		if (mkdirat(own_fd, CG_SERVICE_LEAF, 0755) < 0 && errno != EEXIST)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
			                         "cgroups: creating the service leaf");
		_cleanup_close_ int leaf = cg_open_dir(own_fd, CG_SERVICE_LEAF);
		if (leaf < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -leaf,
			                         "cgroups: opening the service leaf");
		_cleanup_free_ pid_t *pids = NULL;
		size_t n = 0;
		r = cg_procs_read(own_fd, SIZE_MAX, &pids, &n);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
			                         "cgroups: reading the service's cgroup.procs");
		for (size_t i = 0; i < n; i++) {
			char v[24];
			snprintf(v, sizeof(v), "%d", (int)pids[i]);
			r = cg_write(leaf, "cgroup.procs", v);
			if (r < 0 && r != -ESRCH)
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
				                         "cgroups: moving pid %d into the service leaf",
				                         (int)pids[i]);
		}
	}
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, EBUSY,
	                         "cgroups: the service's v2 cgroup keeps gaining processes");
}

static int cg_v2_prepare(host_cgroup *cg, airlock_error *err)
{
	return cg_v2_enable(cg->h[CG_UNIFIED].own_fd, err);
}

static const cg_limit cg_v2_limits[] = {
	{ .kind = CG_MEMORY, .file = "memory.max", .value = cg_value_memory },
	/* memory.swap.max=0: swap cannot stretch the limit. It is absent
	 * only on kernels without swap, where there is nothing to cap. */
	{ .kind = CG_MEMORY, .file = "memory.swap.max", .value = cg_value_zero, .optional = true },
	{ .kind = CG_PIDS, .file = "pids.max", .value = cg_value_pids },
	{ .kind = CG_CPU, .file = "cpu.max", .value = cg_value_cpu_max },
};

const cg_driver cg_driver_v2 = {
	.mode = HOST_CGROUP_V2,
	.claim = cg_v2_claim,
	.kind_used = cg_v2_kind_used,
	.controllers_in_unified = true,
	.prepare = cg_v2_prepare,
	.limits = cg_v2_limits,
	.n_limits = ARRAY_SIZE(cg_v2_limits),
	.counter_file = { [CG_OOM] = "memory.events", [CG_PIDS_EVENTS] = "pids.events" },
	/* v2 keeps these counters hierarchically in the group whose limit was
	 * hit (the sandbox group: its leaves have no controllers of their
	 * own). */
	.counters_in_leaves = false,
	.walk_populated = NULL,
	.usage_file = "memory.current",
	.kmem_file = "memory.stat",
	.kmem_key = "slab_reclaimable",
	.reclaim_file = "memory.reclaim",
};
