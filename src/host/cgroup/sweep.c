/* SPDX-License-Identifier: Apache-2.0 */
/*
 * On start, remove what a crashed run left (cgroup.h, host_cgroup_sweep).
 *
 * Crash recovery and concurrent services. Several services (or test
 * binaries) can share a parent cgroup: here every process sits in the root
 * of the pids and cpu hierarchies. A live host_cgroup therefore holds an
 * exclusive flock(2) on its sandbox directory in every hierarchy, and the
 * sweep only touches groups whose lock it can take: the kernel drops the
 * lock when the owner dies, which is exactly "left by a crashed run". The
 * create-time window between mkdir and flock is closed by a shared lock on
 * the parent directory, which the sweep takes exclusively while it scans
 * (group.c).
 */
#include "host/cgroup/cgroup_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "util/util.h"

/* Remove the leftover groups of one hierarchy. Groups whose lock is held
 * belong to a live host_cgroup (in this process or another) and are
 * left alone. */
static int cg_sweep_one(const cg_driver *drv, int k, const char *dir, bool v2, cg_names *removed,
                        airlock_error *err)
{
	_cleanup_close_ int own = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (own < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "cgroup sweep: opening the service's %s cgroup",
		                         cg_kind_name[k]);
	/* Held until the scan ends; closing own releases it on every path. */
	int r = cg_flock(own, LOCK_EX);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup sweep: locking %s",
		                         cg_kind_name[k]);
	cg_names l = { 0 };
	r = cg_subdirs(own, HOST_CGROUP_PREFIX, &l);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup sweep: listing %s",
		                         cg_kind_name[k]);
	int first = 0;
	for (size_t i = 0; i < l.n; i++) {
		const char *name = l.v[i];
		if (!cg_id_valid(name + strlen(HOST_CGROUP_PREFIX)))
			continue; /* not a name this module makes */
		_cleanup_close_ int fd = cg_open_dir(own, name);
		if (fd == -ENOENT)
			continue;
		r = fd < 0 ? fd : cg_flock(fd, LOCK_EX | LOCK_NB);
		if (r == -EWOULDBLOCK)
			continue; /* live */
		bool empty = false;
		if (r >= 0) {
			bool kill_file = v2 && !cg_force_kill_fallback &&
			                 faccessat(fd, "cgroup.kill", W_OK, 0) == 0;
			r = cg_kill_wait(fd, v2, kill_file, true, drv->walk_populated,
			                 util_monotonic_ms() + CG_SWEEP_WAIT_MS, &empty);
		}
		if (r >= 0 && !empty) {
			if (!first)
				first = airlock_error_set(err, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
				                          "cgroup sweep %s/%s: a process survived SIGKILL",
				                          cg_kind_name[k], name);
			continue;
		}
		if (r >= 0)
			r = cg_remove_tree(own, name, 0, util_monotonic_ms() + CG_SWEEP_WAIT_MS);
		if (r < 0) {
			if (!first)
				first = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
				                          "cgroup sweep %s/%s", cg_kind_name[k], name);
			continue;
		}
		if (!cg_names_has(removed, name) && (r = cg_names_add(removed, name)) < 0 && !first)
			first = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup sweep");
	}
	cg_names_clear(&l);
	return first;
}

int host_cgroup_sweep(unsigned *ret_removed, airlock_error *err)
{
	const cg_layout *l = NULL;
	int r = cg_layout_get(&l, err);
	if (r < 0)
		return r;
	cg_names removed = { 0 };
	int first = 0;
	for (int k = 0; k < CG__KIND_MAX; k++) {
		if (!l->drv->kind_used(l, k))
			continue;
		r = cg_sweep_one(l->drv, k, l->dir[k], k == CG_UNIFIED, &removed, first ? NULL : err);
		if (r < 0 && !first)
			first = r;
	}
	if (ret_removed)
		*ret_removed = (unsigned)removed.n;
	cg_names_clear(&removed);
	return first;
}
