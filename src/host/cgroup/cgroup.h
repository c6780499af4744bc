/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_HOST_CGROUP_H
#define AIRLOCK_HOST_CGROUP_H

/*
 * A sandbox's cgroups. Works on the v1/v2 hybrid hosts we run on (v1
 * hierarchies hold the memory, pids and cpu controllers; the v2 mount at
 * /sys/fs/cgroup/unified has no controllers but gives cgroup.kill and
 * cgroup.events) and on pure v2 hosts (one hierarchy does everything).
 *
 * Every group is nested under the service's own cgroup in each hierarchy
 * (read from /proc/self/cgroup), never at a hierarchy root. Layout, in every
 * hierarchy used:
 *
 *   <own>/airlock-<environment_id>/        limits: cpu, memory (no swap), pids
 *   <own>/airlock-<environment_id>/init    the sandbox's init process
 *   <own>/airlock-<environment_id>/cmd     the running command and all it forks
 *
 * (leaf groups hold the processes, so the v2 "no internal processes" rule is
 * met). All functions are safe to call from one thread at a time per group.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "airlock/error.h"
#include "airlock/types.h"

typedef struct host_cgroup host_cgroup;

#define HOST_CGROUP_PREFIX "airlock-"

/* What this host offers, decided once. */
typedef enum host_cgroup_mode {
	HOST_CGROUP_INVALID = 0,
	HOST_CGROUP_HYBRID, /* v1 controllers + v2 unified for kill/events */
	HOST_CGROUP_V2,     /* pure v2 */
	HOST_CGROUP__MAX
} host_cgroup_mode;

/* Detect the host's layout; AIRLOCK_ERR_EXECUTION_UNAVAILABLE with a reason
 * (for `airlock doctor`) when a required controller is missing or the
 * service's cgroups are not writable. A missing cgroup.kill (kernels before
 * 5.14, or a hybrid host without a v2 mount) is not fatal: kills then fall
 * back to SIGKILL by pid from cgroup.procs until the group is empty. */
int host_cgroup_detect(host_cgroup_mode *ret, airlock_error *err);

/* Create the sandbox's groups and apply the limits: cpu_millicores as a CFS
 * quota over a 100 ms period (at least 1 ms: below 10 millicores rounds
 * up), memory_bytes as the hard limit with swap disabled for the group,
 * pids_max. Leaves nothing behind on failure. environment_id: 1-63 of
 * [A-Za-z0-9_-], else AIRLOCK_ERR_EXECUTION_REJECTED; an id whose groups
 * exist already is AIRLOCK_ERR_EXECUTION_UNAVAILABLE. cg holds O_CLOEXEC
 * descriptors with flocks (see the sweep): a child forked from the service
 * that does not exec must close inherited descriptors (close_range), or the
 * group looks live to a sweep after the service dies. */
int host_cgroup_create(const char *environment_id, const airlock_resource_limits *limits,
                       host_cgroup **ret, airlock_error *err);

/* Move pid into the init group or the cmd group, in every hierarchy. Safe
 * to call from the service for a stopped or just-forked child. */
int host_cgroup_enter_init(host_cgroup *cg, pid_t pid, airlock_error *err);
int host_cgroup_enter_cmd(host_cgroup *cg, pid_t pid, airlock_error *err);

/* The sandbox's group in the v2 hierarchy (a directory descriptor cg owns,
 * for attaching cgroup BPF programs: they reach init and cmd below it), or
 * -1 when the host has no v2 hierarchy (a hybrid host without one). */
int host_cgroup_v2_dir(const host_cgroup *cg);

/* 0 when the service's cgroups include a v2 hierarchy (so every sandbox
 * group has its host_cgroup_v2_dir), else EXECUTION_UNAVAILABLE saying
 * so. */
int host_cgroup_v2_check(airlock_error *err);

/* The group's counters, for kill reasons. oom_kills: the memory
 * controller's oom_kill counter for the sandbox (never failcnt). pids_max:
 * the number of forks refused by pids.max. Both only grow. */
int host_cgroup_oom_kills(host_cgroup *cg, uint64_t *ret, airlock_error *err);
int host_cgroup_pids_max_events(host_cgroup *cg, uint64_t *ret, airlock_error *err);
/* The tasks in the sandbox's groups now (pids.current): for a mechanism
 * whose sandbox runs under a kernel of its own (gvisor), its runtime's host
 * threads, not the sandbox's processes. */
int host_cgroup_pids_current(host_cgroup *cg, uint64_t *ret, airlock_error *err);

/* Reclaim the sandbox's reclaimable kernel memory (dentries, inodes) from
 * outside the group when it is near its memory limit (reclaim.c says why
 * the kernel's own reclaim can miss it and kill). Called on every round of
 * an execute; 1 when it reclaimed, 0 when there was no need, < 0 on error
 * (nothing was done). Not thread-safe for one cg. */
int host_cgroup_reclaim_kernel(host_cgroup *cg, airlock_error *err);

/* Whether any process is left in the cmd group. */
int host_cgroup_cmd_populated(host_cgroup *cg, bool *ret, airlock_error *err);

/* SIGKILL every process in the cmd group and wait (bounded by timeout_ms)
 * until it is empty. AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED when a process
 * survives. */
int host_cgroup_kill_cmd(host_cgroup *cg, int timeout_ms, airlock_error *err);

/* Kill everything in the sandbox's groups, wait until empty, remove every
 * group, free cg: 0. On failure (SANDBOX_ESCAPE_SUSPECTED when a process
 * survives, a system error when a kill or an rmdir fails) cg stays the
 * caller's, still holding what is left and its flocks, so destroying it
 * again retries only that; host_cgroup_abandon lets it go. NULL ok. */
int host_cgroup_destroy(host_cgroup *cg, int timeout_ms, airlock_error *err);

/* Free cg without removing its groups: closing its directories drops their
 * flocks, and host_cgroup_sweep at the next start takes what is left. For
 * a caller that cannot retry a failed host_cgroup_destroy. NULL ok. */
void host_cgroup_abandon(host_cgroup *cg);

/* On start: remove what a crashed run left behind: groups named
 * airlock-* under the service's own cgroup, killing what is in them.
 * Groups of a live host_cgroup, in this process or another sharing the
 * parent cgroup, are left alone: each holds a flock on its directories,
 * which the kernel drops when its owner dies. *ret_removed counts the
 * sandbox groups removed. */
int host_cgroup_sweep(unsigned *ret_removed, airlock_error *err);

/* Tests only: ignore cgroup.kill in groups created (and swept) from now on,
 * so the cgroup.procs fallback runs on hosts that have cgroup.kill. Not
 * thread safe. */
void host_cgroup_testing_force_kill_fallback(bool on);

#endif
