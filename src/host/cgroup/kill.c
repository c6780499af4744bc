/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Killing what is in a group and waiting until it is empty, and removing
 * groups: cgroup.kill where the v2 hierarchy has it, else SIGKILL by pid
 * from cgroup.procs, pinned with pidfds.
 */
#include "host/cgroup/cgroup_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "util/fault.h"
#include "util/syscalls.h"
#include "util/util.h"

/* One pass of SIGKILL to what dfd's cgroup.procs lists, without cgroup.kill.
 * A pid read from the file may be reaped and reused by an unrelated process
 * before we signal it, so: read the list, pin each pid's process with a
 * pidfd, read the list again, and signal only pidfds whose pid is still
 * listed. A pidfd whose process is still alive at the second read and whose
 * pid is listed there is that listed process (a live process keeps its
 * pid); one whose process has died can only fail with ESRCH. */
static int cg_kill_listed(int dfd, bool *ret_seen)
{
	_cleanup_free_ pid_t *a = NULL;
	_cleanup_free_ int *fds = NULL;
	size_t na = 0;
	int r = cg_procs_read(dfd, AIRLOCK_CG_KILL_BATCH, &a, &na);
	if (r < 0)
		return r;
	*ret_seen = na > 0;
	if (na == 0)
		return 0;
	fds = malloc(na * sizeof(*fds));
	if (!fds)
		return -ENOMEM;
	for (size_t i = 0; i < na; i++) {
		fds[i] = sys_pidfd_open(a[i], 0);
		if (fds[i] >= 0 || errno == ESRCH)
			continue;
		if ((errno == EMFILE || errno == ENFILE) && i > 0) {
			/* Out of descriptors: signal what is open, and let the
			 * caller's next pass take the rest. */
			na = i;
			break;
		}
		r = -errno;
		for (size_t j = 0; j < i; j++)
			cg_close(&fds[j]);
		return r;
	}
	_cleanup_free_ pid_t *b = NULL;
	size_t nb = 0;
	r = cg_procs_read(dfd, SIZE_MAX, &b, &nb);
	for (size_t i = 0; i < na; i++) {
		if (fds[i] < 0)
			continue;
		if (r >= 0 && bsearch(&a[i], b, nb, sizeof(*b), cg_pid_cmp))
			(void)sys_pidfd_send_signal(fds[i], SIGKILL, NULL, 0); /* ESRCH: it died meanwhile */
		cg_close(&fds[i]);
	}
	return r;
}

/* Kill a hierarchy's subtree at dfd once: cgroup.kill when the group has
 * it (the kernel kills every process in the subtree, and any fork racing
 * with it), else a pass over cgroup.procs of the group and, when recurse,
 * of every group below it. *ret_seen: whether the pass saw a process (with
 * cgroup.kill: always true, the caller reads cgroup.events). */
static int cg_kill_tree(int dfd, bool use_kill_file, bool recurse, int depth, bool *ret_seen)
{
	if (depth > AIRLOCK_CG_MAX_DEPTH)
		return -ELOOP;
	if (use_kill_file) {
		*ret_seen = true;
		return cg_write(dfd, "cgroup.kill", "1");
	}
	bool seen = false;
	int r = cg_kill_listed(dfd, &seen);
	if (r < 0 && r != -ENOENT)
		return r;
	*ret_seen = *ret_seen || seen;
	if (!recurse)
		return 0;
	cg_names subs = { 0 };
	r = cg_subdirs(dfd, NULL, &subs);
	if (r < 0)
		return r;
	for (size_t i = 0; i < subs.n && r >= 0; i++) {
		_cleanup_close_ int sfd = cg_open_dir(dfd, subs.v[i]);
		if (sfd == -ENOENT)
			continue;
		r = sfd < 0 ? sfd : cg_kill_tree(sfd, false, true, depth + 1, ret_seen);
	}
	cg_names_clear(&subs);
	return r;
}

/* Kill the subtree at dfd and wait until it is empty or deadline passes;
 * *ret_empty says which. recurse: also the groups below dfd (v1; a v2
 * group's cgroup.kill and cgroup.events cover its subtree anyway), asking
 * walk_populated whether a v1 subtree is empty.
 *
 * The wait backs off from 50 us to 1 ms. On v2 it sleeps in ppoll(2) on
 * cgroup.events, which the kernel wakes (POLLPRI) when "populated" changes;
 * the kernel rate-limits that notification to one per 10 ms per file, and
 * a group that just got its process has used it up, so the short timeouts
 * are what make a kill return in well under a millisecond. */
int cg_kill_wait(int dfd, bool v2, bool use_kill_file, bool recurse,
                 int (*walk_populated)(int dfd, int depth, bool *ret), int64_t deadline,
                 bool *ret_empty)
{
	_cleanup_close_ int efd = -1;
	long backoff_us = 50;
	if (v2) {
		efd = openat(dfd, "cgroup.events", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (efd < 0)
			return -errno;
	}
	for (;;) {
		bool seen = false;
		int r = cg_kill_tree(dfd, use_kill_file, recurse, 0, &seen);
		if (r < 0)
			return r;
		bool populated = false;
		if (v2) {
			uint64_t v = 0;
			r = cg_keyed_fd(efd, "populated", &v);
			populated = v != 0;
		} else if (seen) {
			populated = true; /* the processes just signalled may still be exiting */
		} else if (recurse) {
			r = walk_populated ? walk_populated(dfd, 0, &populated) : -ENOTSUP;
		}
		if (r < 0)
			return r;
		if (!populated) {
			*ret_empty = true;
			return 0;
		}
		int64_t left_ms = deadline - util_monotonic_ms();
		if (left_ms <= 0) {
			*ret_empty = false;
			return 0;
		}
		long us = backoff_us < left_ms * 1000 ? backoff_us : (long)(left_ms * 1000);
		if (backoff_us < 1000)
			backoff_us *= 2;
		if (v2) {
			struct pollfd p = { .fd = efd, .events = POLLPRI };
			struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };
			if (ppoll(&p, 1, &ts, NULL) < 0 && errno != EINTR)
				return -errno;
		} else {
			cg_sleep_us(us);
		}
	}
}

/* rmdir name under parent, its subgroups first. A v1 group can report
 * EBUSY for a moment after its last task exited, so EBUSY is retried until
 * the deadline. */
int cg_remove_tree(int parent, const char *name, int depth, int64_t deadline)
{
	if (depth > AIRLOCK_CG_MAX_DEPTH)
		return -ELOOP;
	{
		_cleanup_close_ int fd = cg_open_dir(parent, name);
		if (fd == -ENOENT)
			return 0;
		if (fd < 0)
			return fd;
		cg_names subs = { 0 };
		int r = cg_subdirs(fd, NULL, &subs);
		for (size_t i = 0; i < subs.n && r >= 0; i++)
			r = cg_remove_tree(fd, subs.v[i], depth + 1, deadline);
		cg_names_clear(&subs);
		if (r < 0)
			return r;
	}
	for (;;) {
		if (unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY || util_monotonic_ms() >= deadline)
			return -errno;
		cg_sleep_us(1000);
	}
}

/* Kill everything in the groups we created, wait, and remove them. On a
 * survivor: SANDBOX_ESCAPE_SUSPECTED, and the directories stay (rmdir
 * could not succeed anyway). A group removed is marked so (created false),
 * so a second call after a failure does only what is left. */
int cg_teardown(host_cgroup *cg, int64_t deadline, airlock_error *err)
{
	/* The v2 hierarchy first: cgroup.kill there reaches every process of
	 * the sandbox at once, so the v1 passes after it normally find the
	 * groups already empty; they still run, for a process that entered
	 * some hierarchies and not others. */
	for (int k = 0; k < CG__KIND_MAX; k++) {
		cg_hier *h = &cg->h[k];
		if (!h->created || h->sandbox_fd < 0)
			continue;
		bool empty = false;
		int r = UTIL_FAULT_RET("cgroup.kill",
		                       cg_kill_wait(h->sandbox_fd, h->v2, h->v2 && cg->kill_file, true,
		                                    cg->drv->walk_populated, deadline, &empty));
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
			                         "cgroup %s/%s: killing its processes", cg_kind_name[k],
			                         cg->name);
		if (!empty)
			return airlock_error_set(err, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
			                         "cgroup %s/%s: a process survived SIGKILL",
			                         cg_kind_name[k], cg->name);
	}
	/* Empty groups can still answer EBUSY for a moment (v1); give rmdir a
	 * little time of its own even when the kill used up the caller's. */
	int64_t rm_deadline = util_monotonic_ms() + 1000;
	if (rm_deadline < deadline)
		rm_deadline = deadline;
	int first = 0;
	for (int k = 0; k < CG__KIND_MAX; k++) {
		cg_hier *h = &cg->h[k];
		if (!h->created)
			continue;
		int r = UTIL_FAULT_RET("cgroup.rmdir",
		                       cg_remove_tree(h->own_fd, cg->name, 0, rm_deadline));
		if (r < 0 && first == 0)
			first = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s/%s: rmdir",
			                          cg_kind_name[k], cg->name);
		else if (r == 0)
			h->created = false;
	}
	return first;
}

int host_cgroup_cmd_populated(host_cgroup *cg, bool *ret, airlock_error *err)
{
	if (!cg)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, EINVAL, "cgroup: populated");
	int r;
	if (cg->cmd_events_fd >= 0) {
		uint64_t v;
		r = cg_keyed_fd(cg->cmd_events_fd, "populated", &v);
		if (r >= 0)
			*ret = v != 0;
	} else {
		r = cg->drv->walk_populated ?
		            cg->drv->walk_populated(cg->h[CG_PIDS].leaf_fd[CG_CMD], 0, ret) :
		            -ENOTSUP;
	}
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s/cmd: populated",
		                         cg->name);
	return 0;
}

int host_cgroup_kill_cmd(host_cgroup *cg, int timeout_ms, airlock_error *err)
{
	if (!cg)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, EINVAL, "cgroup: kill");
	int64_t deadline = util_monotonic_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	/* Every hierarchy's cmd group: the v2 one through cgroup.kill (nothing
	 * forked by the command escapes it), the v1 ones by pid, which normally
	 * finds them already empty. */
	for (int k = 0; k < CG__KIND_MAX; k++) {
		cg_hier *h = &cg->h[k];
		if (!h->used)
			continue;
		bool empty = false;
		int r = cg_kill_wait(h->leaf_fd[CG_CMD], h->v2, h->v2 && cg->kill_file, false,
		                     cg->drv->walk_populated, deadline, &empty);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s/%s/cmd: kill",
			                         cg_kind_name[k], cg->name);
		if (!empty)
			return airlock_error_set(err, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
			                         "cgroup %s/%s/cmd: a process survived SIGKILL",
			                         cg_kind_name[k], cg->name);
	}
	return 0;
}
