/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's limits: cpu_millicores as a CFS quota over a 100 ms period,
 * memory_bytes as the hard limit with swap disabled for the group,
 * pids_max; written from the mode's table (cg_driver.limits in v1.c and
 * v2.c), in its order. And the counters that say a limit was hit.
 */
#include "host/cgroup/cgroup_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"
#include "util/fault.h"

/* ---- the values a table writes -------------------------------------------- */

void cg_value_zero(const airlock_resource_limits *lim, char *out, size_t size)
{
	snprintf(out, size, "0");
}

void cg_value_memory(const airlock_resource_limits *lim, char *out, size_t size)
{
	snprintf(out, size, "%" PRId64, lim->memory_bytes);
}

void cg_value_pids(const airlock_resource_limits *lim, char *out, size_t size)
{
	if (lim->pids_max > AIRLOCK_CG_PIDS_LIMIT_MAX)
		snprintf(out, size, "max");
	else
		snprintf(out, size, "%" PRId64, lim->pids_max);
}

static int64_t cg_cpu_quota_us(const airlock_resource_limits *lim)
{
	int64_t q = lim->cpu_millicores * (CG_CPU_PERIOD_US / 1000);
	return q < CG_CPU_QUOTA_MIN_US ? CG_CPU_QUOTA_MIN_US : q;
}

void cg_value_cpu_quota(const airlock_resource_limits *lim, char *out, size_t size)
{
	snprintf(out, size, "%" PRId64, cg_cpu_quota_us(lim));
}

void cg_value_cpu_period(const airlock_resource_limits *lim, char *out, size_t size)
{
	snprintf(out, size, "%d", CG_CPU_PERIOD_US);
}

void cg_value_cpu_max(const airlock_resource_limits *lim, char *out, size_t size)
{
	snprintf(out, size, "%" PRId64 " %d", cg_cpu_quota_us(lim), CG_CPU_PERIOD_US);
}

/* ---- applying the table --------------------------------------------------- */

/* One entry in one group directory. cgroupfs reports a refused value as
 * the write's error (cg_write). */
static int cg_apply_one(host_cgroup *cg, const cg_limit *e, int dfd,
                        const airlock_resource_limits *lim, airlock_error *err)
{
	char v[48];
	e->value(lim, v, sizeof(v));
	int r = UTIL_FAULT_RET("cgroup.limits", cg_write(dfd, e->file, v));
	if (r == -ENOENT && e->optional)
		return 0;
	if (r == -ENOENT && e->absent_file) {
		char av[48];
		e->absent_value(lim, av, sizeof(av));
		r = cg_write(dfd, e->absent_file, av);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s: writing %s=%s",
			                         cg->name, e->absent_file, av);
		return 0;
	}
	if (r == -ENOENT && e->absent_refusal)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0, "cgroup %s: %s",
		                         cg->name, e->absent_refusal);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s: writing %s=%s",
		                         cg->name, e->file, v);
	return 0;
}

int cg_apply_limits(host_cgroup *cg, const airlock_resource_limits *lim, airlock_error *err)
{
	for (size_t i = 0; i < cg->drv->n_limits; i++) {
		const cg_limit *e = &cg->drv->limits[i];
		const cg_hier *h = cg_ctl(cg, e->kind);
		const int dirs[] = { h->sandbox_fd, h->leaf_fd[CG_INIT], h->leaf_fd[CG_CMD] };
		size_t n = e->in_leaves ? ARRAY_SIZE(dirs) : 1;
		for (size_t d = 0; d < n; d++) {
			int r = cg_apply_one(cg, e, dirs[d], lim, err);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/* ---- the counters ----------------------------------------------------------- */

/* Open the counter files once: execute polls them after every event. */
int cg_open_counters(host_cgroup *cg, airlock_error *err)
{
	static const int kind[CG__COUNTER_MAX] = { [CG_OOM] = CG_MEMORY,
		                                   [CG_PIDS_EVENTS] = CG_PIDS };
	for (int c = 0; c < CG__COUNTER_MAX; c++) {
		cg_hier *h = cg_ctl(cg, kind[c]);
		int dirs[CG__AT_MAX] = { h->sandbox_fd, h->leaf_fd[CG_INIT], h->leaf_fd[CG_CMD] };
		/* Where the kernel keeps a counter differs by mode (the drivers
		 * say why): in the sandbox group alone, or in each leaf too,
		 * summed when read. */
		int n = cg->drv->counters_in_leaves ? CG__AT_MAX : 1;
		const char *file = cg->drv->counter_file[c];
		for (int i = 0; i < n; i++) {
			cg->counter_fd[c][i] = openat(dirs[i], file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			if (cg->counter_fd[c][i] < 0)
				return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
				                         "cgroup %s: opening %s", cg->name, file);
		}
	}
	if (cg->h[CG_UNIFIED].used) {
		cg->cmd_events_fd = openat(cg->h[CG_UNIFIED].leaf_fd[CG_CMD], "cgroup.events",
		                           O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (cg->cmd_events_fd < 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
			                         "cgroup %s: opening cmd/cgroup.events", cg->name);
	}
	return 0;
}

static int cg_counter(host_cgroup *cg, int c, const char *key, uint64_t *ret,
                      airlock_error *err)
{
	if (!cg)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, EINVAL, "cgroup: counter");
	uint64_t sum = 0;
	for (int i = 0; i < CG__AT_MAX; i++) {
		if (cg->counter_fd[c][i] < 0)
			continue;
		uint64_t v;
		int r = cg_keyed_fd(cg->counter_fd[c][i], key, &v);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s: reading %s",
			                         cg->name, key);
		sum += v;
	}
	*ret = sum;
	return 0;
}

int host_cgroup_oom_kills(host_cgroup *cg, uint64_t *ret, airlock_error *err)
{
	/* The OOM killer's kill counter, never failcnt: failcnt counts every
	 * charge that hit the limit and was then satisfied by reclaim
	 * (docs/design-notes.md, "How each kill reason is observed"). */
	return cg_counter(cg, CG_OOM, "oom_kill", ret, err);
}

int host_cgroup_pids_max_events(host_cgroup *cg, uint64_t *ret, airlock_error *err)
{
	return cg_counter(cg, CG_PIDS_EVENTS, "max", ret, err);
}

int host_cgroup_pids_current(host_cgroup *cg, uint64_t *ret, airlock_error *err)
{
	const cg_hier *h = cg ? cg_ctl(cg, CG_PIDS) : NULL;
	char buf[32];
	int64_t v = 0;
	int r = h ? cg_read(h->sandbox_fd, "pids.current", buf, sizeof(buf)) : -EINVAL;
	if (r >= 0) {
		buf[strcspn(buf, "\n")] = 0;
		if (!util_parse_i64(buf, &v) || v < 0)
			r = -EPROTO;
	}
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup: reading pids.current");
	*ret = (uint64_t)v;
	return 0;
}
