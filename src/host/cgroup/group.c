/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's cgroups (the specification's "Provision": cgroups nested under the
 * service's own cgroup, applying cpu_millicores, memory_bytes and pids_max,
 * on hybrid and pure v2 hosts; "Destroy": removes every cgroup it made).
 * Creating, entering and destroying a sandbox's groups; cgroup.h has the
 * layout, cgroup_internal.h the files that do the rest.
 */
#include "host/cgroup/cgroup_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"
#include "util/fault.h"

static host_cgroup *cg_new(void)
{
	host_cgroup *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return NULL;
	for (int k = 0; k < CG__KIND_MAX; k++) {
		cg->h[k].own_fd = cg->h[k].sandbox_fd = -1;
		for (int i = 0; i < CG__LEAF_MAX; i++)
			cg->h[k].leaf_fd[i] = -1;
	}
	for (int c = 0; c < CG__COUNTER_MAX; c++)
		for (int i = 0; i < CG__AT_MAX; i++)
			cg->counter_fd[c][i] = -1;
	cg->cmd_events_fd = -1;
	return cg;
}

static void cg_free(host_cgroup *cg)
{
	if (!cg)
		return;
	for (int c = 0; c < CG__COUNTER_MAX; c++)
		for (int i = 0; i < CG__AT_MAX; i++)
			cg_close(&cg->counter_fd[c][i]);
	cg_close(&cg->cmd_events_fd);
	for (int k = 0; k < CG__KIND_MAX; k++) {
		for (int i = 0; i < CG__LEAF_MAX; i++)
			cg_close(&cg->h[k].leaf_fd[i]);
		/* Closing the sandbox directory drops its flock: from here the
		 * sweep may take what is left. */
		cg_close(&cg->h[k].sandbox_fd);
		cg_close(&cg->h[k].own_fd);
	}
	free(cg);
}

cg_hier *cg_ctl(host_cgroup *cg, int kind)
{
	return &cg->h[cg->drv->controllers_in_unified ? CG_UNIFIED : kind];
}

/* mkdir the sandbox directory in one hierarchy and lock it. The shared lock
 * on the parent keeps a concurrent sweep (which holds it exclusively) from
 * seeing the directory before it is locked. */
static int cg_make_sandbox_dir(host_cgroup *cg, int k, airlock_error *err)
{
	cg_hier *h = &cg->h[k];
	int r = cg_flock(h->own_fd, LOCK_SH);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s: locking the parent",
		                         cg_kind_name[k]);
	if (UTIL_FAULT_CALL("cgroup.mkdir", mkdirat(h->own_fd, cg->name, 0755)) < 0) {
		int e = errno;
		(void)cg_flock(h->own_fd, LOCK_UN);
		if (e == EEXIST)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                         "cgroup %s/%s already exists (a live sandbox with "
			                         "this id, or a leftover for the sweep)",
			                         cg_kind_name[k], cg->name);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "cgroup %s/%s: mkdir",
		                         cg_kind_name[k], cg->name);
	}
	h->created = true;
	h->sandbox_fd = cg_open_dir(h->own_fd, cg->name);
	r = h->sandbox_fd < 0 ? h->sandbox_fd : cg_flock(h->sandbox_fd, LOCK_EX | LOCK_NB);
	(void)cg_flock(h->own_fd, LOCK_UN);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s/%s: open and lock",
		                         cg_kind_name[k], cg->name);
	for (int i = 0; i < CG__LEAF_MAX; i++) {
		if (UTIL_FAULT_CALL("cgroup.leaf", mkdirat(h->sandbox_fd, cg_leaf_name[i], 0755)) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "cgroup %s/%s/%s: mkdir",
			                         cg_kind_name[k], cg->name, cg_leaf_name[i]);
		h->leaf_fd[i] = cg_open_dir(h->sandbox_fd, cg_leaf_name[i]);
		if (h->leaf_fd[i] < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -h->leaf_fd[i],
			                         "cgroup %s/%s/%s: open", cg_kind_name[k], cg->name,
			                         cg_leaf_name[i]);
	}
	return 0;
}

int host_cgroup_create(const char *environment_id, const airlock_resource_limits *limits,
                       host_cgroup **ret, airlock_error *err)
{
	if (!cg_id_valid(environment_id))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "cgroup: environment id must be 1-%d of [A-Za-z0-9_-]",
		                         AIRLOCK_ENVIRONMENT_ID_MAX - 1);
	if (!limits || limits->cpu_millicores <= 0 || limits->memory_bytes <= 0 ||
	    limits->pids_max <= 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "cgroup: cpu_millicores, memory_bytes and pids_max must be "
		                         "positive");
	/* The quota must not overflow; a million cores is beyond any host. */
	if (limits->cpu_millicores > INT64_C(1000000000))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "cgroup: cpu_millicores is out of range");

	const cg_layout *l = NULL;
	int r = cg_layout_get(&l, err);
	if (r < 0)
		return r;
	host_cgroup *cg = cg_new();
	if (!cg)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "cgroup");
	cg->drv = l->drv;
	cg->memory_bytes = limits->memory_bytes;
	snprintf(cg->name, sizeof(cg->name), "%s%s", HOST_CGROUP_PREFIX, environment_id);

	for (int k = 0; k < CG__KIND_MAX && r >= 0; k++) {
		if (!l->drv->kind_used(l, k))
			continue;
		cg_hier *h = &cg->h[k];
		h->used = true;
		h->v2 = k == CG_UNIFIED;
		/* The mount point and the path below it come from the kernel
		 * (mountinfo, /proc/self/cgroup), not from anything a tenant
		 * controls. */
		h->own_fd = open(l->dir[k], O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (h->own_fd < 0)
			r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
			                      "cgroup: opening the service's %s cgroup", cg_kind_name[k]);
	}
	if (r >= 0 && cg->drv->prepare)
		r = cg->drv->prepare(cg, err);
	for (int k = 0; k < CG__KIND_MAX && r >= 0; k++)
		if (cg->h[k].used)
			r = cg_make_sandbox_dir(cg, k, err);
	if (r >= 0)
		r = cg_apply_limits(cg, limits, err);
	if (r >= 0 && cg->h[CG_UNIFIED].used)
		cg->kill_file = !cg_force_kill_fallback &&
		                faccessat(cg->h[CG_UNIFIED].sandbox_fd, "cgroup.kill", W_OK, 0) == 0;
	if (r >= 0)
		r = cg_open_counters(cg, err);
	if (r < 0) {
		/* Nothing has entered the groups yet, so this only removes them;
		 * its own error is secondary to the one being returned. */
		airlock_error ignored;
		(void)cg_teardown(cg, util_monotonic_ms() + 1000, &ignored);
		cg_free(cg);
		return r;
	}
	*ret = cg;
	return 0;
}

static int cg_enter(host_cgroup *cg, int leaf, pid_t pid, airlock_error *err)
{
	if (!cg || pid <= 0)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, EINVAL, "cgroup: enter");
	char v[24];
	snprintf(v, sizeof(v), "%d", (int)pid);
	/* The v2 hierarchy first, so that from the first write on, the
	 * sandbox's cgroup.kill reaches the process. */
	for (int k = 0; k < CG__KIND_MAX; k++) {
		cg_hier *h = &cg->h[k];
		if (!h->used)
			continue;
		int r = UTIL_FAULT_RET("cgroup.enter", cg_write(h->leaf_fd[leaf], "cgroup.procs", v));
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
			                         "cgroup %s/%s/%s: moving pid %d", cg_kind_name[k],
			                         cg->name, cg_leaf_name[leaf], (int)pid);
	}
	return 0;
}

int host_cgroup_enter_init(host_cgroup *cg, pid_t pid, airlock_error *err)
{
	return cg_enter(cg, CG_INIT, pid, err);
}

int host_cgroup_enter_cmd(host_cgroup *cg, pid_t pid, airlock_error *err)
{
	return cg_enter(cg, CG_CMD, pid, err);
}

int host_cgroup_v2_dir(const host_cgroup *cg)
{
	return cg && cg->h[CG_UNIFIED].used ? cg->h[CG_UNIFIED].sandbox_fd : -1;
}

int host_cgroup_destroy(host_cgroup *cg, int timeout_ms, airlock_error *err)
{
	if (!cg)
		return 0;
	int64_t deadline = util_monotonic_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	int r = cg_teardown(cg, deadline, err);
	if (r == 0)
		cg_free(cg);
	return r;
}

void host_cgroup_abandon(host_cgroup *cg)
{
	cg_free(cg);
}
