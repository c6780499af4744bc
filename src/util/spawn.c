/* SPDX-License-Identifier: Apache-2.0 */
/* Starting a child program, one way for every caller (spawn.h). */
#include "util/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/syscalls.h"
#include "util/util.h"

static const char *const step_names[SPAWN_STEP__MAX] = {
	[SPAWN_STEP_NONE] = "start",
	[SPAWN_STEP_PARENT] = "placement",
	[SPAWN_STEP_PGRP] = "process group",
	[SPAWN_STEP_PDEATHSIG] = "death signal",
	[SPAWN_STEP_HOOK] = "setup",
	[SPAWN_STEP_FDS] = "descriptors",
	[SPAWN_STEP_EXEC] = "exec",
	[SPAWN_STEP_CHILD] = "child",
};

const char *spawn_step_name(spawn_step s)
{
	return (unsigned)s < SPAWN_STEP__MAX ? step_names[s] : "start";
}

const char *spawn_failure_step(const spawn_failure *f, const char *(*child_step_name)(int))
{
	if (f->step == SPAWN_STEP_CHILD && child_step_name)
		return child_step_name(f->detail);
	if (f->step == SPAWN_STEP_NONE && f->what)
		return f->what;
	return spawn_step_name(f->step);
}

_Static_assert(4 + SPAWN_FDS_MAX + SPAWN_KEEP_MAX <= UTIL_KEEP_MAX,
               "a child's keep list fits util_close_all_but");

/* What the child reports on its failure pipe. */
typedef struct spawn_report {
	int32_t step;
	int32_t detail;
	int32_t errnum;
} spawn_report;

static _Noreturn void child_report(int report_fd, spawn_step step, int detail, int errnum)
{
	spawn_report m = { .step = (int32_t)step, .detail = detail,
	                   .errnum = errnum > 0 ? errnum : EIO };
	/* One write of 12 bytes to a pipe is atomic. Were it to fail, the
	 * parent would read EOF as from an exec, and the caller would then see
	 * the child exit with status 127. */
	ssize_t w = write(report_fd, &m, sizeof(m));
	(void)w;
	_exit(127);
}

static _Noreturn void child_fail(int report_fd, spawn_step step, int errnum)
{
	child_report(report_fd, step, 0, errnum);
}

void spawn_child_fail(int report_fd, int step, int errnum)
{
	child_report(report_fd, SPAWN_STEP_CHILD, step, errnum);
}

/* Every descriptor the child keeps, placed at its target: each source is
 * first copied above every target (so that placing one never overwrites
 * another's source), then put in place; every descriptor from `above` up is
 * marked close-on-exec in one call, so whatever the caller holds (a loop
 * device, a store directory, a socket) never reaches the program. */
static int child_fds(const spawn_options *o, int null_fd, int above, int *report_fd, int *exec_fd)
{
	int copy[SPAWN_FDS_MAX];
	bool placed[3] = { false, false, false };
	int r = fcntl(*report_fd, F_DUPFD_CLOEXEC, above);
	if (r < 0)
		return -errno;
	*report_fd = r;
	if (*exec_fd >= 0) {
		if ((r = fcntl(*exec_fd, F_DUPFD_CLOEXEC, above)) < 0)
			return -errno;
		*exec_fd = r;
	}
	if (null_fd >= 0) {
		if ((r = fcntl(null_fd, F_DUPFD_CLOEXEC, above)) < 0)
			return -errno;
		null_fd = r;
	}
	for (size_t i = 0; i < o->n_fds; i++) {
		int src = o->fds[i].fd >= 0 ? o->fds[i].fd : null_fd;
		if ((copy[i] = fcntl(src, F_DUPFD_CLOEXEC, above)) < 0)
			return -errno;
	}
	for (size_t i = 0; i < o->n_fds; i++) {
		/* dup2 leaves the target without FD_CLOEXEC: it survives exec. */
		if (dup2(copy[i], o->fds[i].target) < 0)
			return -errno;
		if (o->fds[i].target < 3)
			placed[o->fds[i].target] = true;
	}
	for (int t = 0; t < 3; t++)
		if (!placed[t] && dup2(null_fd, t) < 0)
			return -errno;
	for (int t = 3; t < above; t++) {
		bool target = false;
		for (size_t i = 0; i < o->n_fds; i++)
			target = target || o->fds[i].target == t;
		if (!target)
			close(t);
	}
	if (sys_close_range((unsigned)above, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		return -errno;
	return 0;
}

static _Noreturn void child_main(const spawn_options *o, pid_t parent, int null_fd, int report_fd,
                                 int go_fd, const int *keep, size_t n_keep)
{
	int exec_fd = o->exec_fd;
	char go;
	/* Every descriptor but the kept ones, first (spawn.h): another
	 * thread's failure or output pipe copied into this child would keep
	 * its reader waiting for as long as this child lives. This closes our
	 * copies of the go pipe's write end (which would keep it from ending
	 * if the parent died) and of the report's read end too. */
	int cr = util_close_all_but(keep, n_keep);
	/* The parent's hook first: EOF without the byte is the parent giving
	 * up, which reports nothing (it kills us). A failed close is reported
	 * after it, so that the parent's write of the byte never meets a
	 * closed pipe. */
	if (go_fd >= 0 && read(go_fd, &go, 1) != 1)
		_exit(127);
	if (cr < 0)
		child_fail(report_fd, SPAWN_STEP_FDS, -cr);
	if (o->own_process_group && setpgid(0, 0) < 0)
		child_fail(report_fd, SPAWN_STEP_PGRP, errno);
	/* The getppid check closes the race with the parent's exit. */
	if (o->pdeathsig &&
	    (prctl(PR_SET_PDEATHSIG, o->pdeathsig, 0, 0, 0) < 0 || getppid() != parent))
		child_fail(report_fd, SPAWN_STEP_PDEATHSIG, errno ? errno : ESRCH);
	int r;
	if (o->hook && (r = o->hook(o->hook_ctx)) < 0)
		child_fail(report_fd, SPAWN_STEP_HOOK, -r);
	/* The caller's function in place of the rest. The signals stay as
	 * they are (every one blocked): what the function needs of them it
	 * sets itself, before it lets anything untrusted run. */
	if (o->child_fn)
		_exit(o->child_fn(o->child_fn_ctx, report_fd));
	int above = 3;
	for (size_t i = 0; i < o->n_fds; i++)
		if (o->fds[i].target + 1 > above)
			above = o->fds[i].target + 1;
	int fr = child_fds(o, null_fd, above, &report_fd, &exec_fd);
	if (fr < 0)
		child_fail(report_fd, SPAWN_STEP_FDS, -fr);
	/* Default dispositions and an empty mask, last before exec: a SIGPIPE
	 * the service ignores must not be inherited. Every signal is blocked
	 * until here (the parent blocked them across fork), so no handler of
	 * the service's runs in the child. */
	util_signals_reset();
	if (exec_fd >= 0)
		sys_execveat(exec_fd, "", o->argv, o->envp, AT_EMPTY_PATH);
	else
		execve(o->path, o->argv, o->envp);
	child_fail(report_fd, SPAWN_STEP_EXEC, errno);
}

static int fail_at(spawn_failure *fail, spawn_step step, int errnum)
{
	if (fail)
		*fail = (spawn_failure){ .step = step, .errnum = errnum > 0 ? errnum : EIO };
	return -(errnum > 0 ? errnum : EIO);
}

/* A failure in the parent, named by what failed. */
static int fail_parent(spawn_failure *fail, const char *what, int errnum)
{
	int r = fail_at(fail, SPAWN_STEP_NONE, errnum);
	if (fail)
		fail->what = what;
	return r;
}

/* The failure pipe, read once (blocking): 0 at EOF, else the report. */
static int report_read(int fd, spawn_failure *fail)
{
	spawn_report m;
	ssize_t n;
	do
		n = read(fd, &m, sizeof(m));
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return 0;
	if (n == (ssize_t)sizeof(m) && m.step > SPAWN_STEP_NONE && m.step < SPAWN_STEP__MAX) {
		int e = fail_at(fail, (spawn_step)m.step, m.errnum);
		if (fail)
			fail->detail = m.detail;
		return e;
	}
	return fail_parent(fail, "failure report", n < 0 ? errno : EPROTO);
}

/* The failure pipe, waited for until deadline, then read. Past the
 * deadline it is polled once more without waiting: a report already there
 * is read, so the error names the child's step rather than the time. */
static int report_wait(int fd, int64_t deadline, spawn_failure *fail)
{
	for (;;) {
		int64_t left = deadline - util_monotonic_ms();
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = poll(&p, 1, left <= 0 ? 0 : (int)(left > 1000 ? 1000 : left));
		if (n > 0)
			return report_read(fd, fail);
		if (n < 0 && errno != EINTR)
			return fail_parent(fail, "failure report", errno);
		if (n == 0 && left <= 0)
			return fail_parent(fail, "waiting for the child", ETIMEDOUT);
	}
}

int spawn_start(const spawn_options *o, spawn_child *ret, spawn_failure *fail)
{
	*ret = SPAWN_CHILD_NONE;
	if (fail)
		*fail = (spawn_failure){ 0 };
	if (!o->child_fn && (!o->argv || !o->argv[0] || !o->envp || o->n_fds > SPAWN_FDS_MAX ||
	                     (o->exec_fd < 0 && (!o->path || o->path[0] != '/'))))
		return fail_parent(fail, "arguments", EINVAL);
	if (o->n_keep > SPAWN_KEEP_MAX || (o->n_keep && !o->keep))
		return fail_parent(fail, "arguments", EINVAL);
	/* Namespaces only: every other clone flag changes what a child is. */
	const uint64_t ns = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
	                    CLONE_NEWUSER | CLONE_NEWCGROUP;
	if (o->clone_flags & ~ns)
		return fail_parent(fail, "arguments", EINVAL);
	/* In a new pid namespace getppid() is 0: the death signal's check
	 * against the parent's exit could never pass. */
	if (o->pdeathsig && (o->clone_flags & CLONE_NEWPID))
		return fail_parent(fail, "arguments", EINVAL);
	for (size_t i = 0; i < o->n_fds; i++)
		if (o->fds[i].target < 0 || o->fds[i].target > 64)
			return fail_parent(fail, "arguments", EINVAL);
	/* Everything the child needs is made before fork (/dev/null only for
	 * the placement, which a child_fn does not get). */
	_cleanup_close_ int null_fd = -1;
	if (!o->child_fn && (null_fd = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY)) < 0)
		return fail_parent(fail, "/dev/null", errno);
	int report[2];
	if (pipe2(report, O_CLOEXEC) < 0)
		return fail_parent(fail, "failure pipe", errno);
	_cleanup_close_ int report_r = report[0];
	_cleanup_close_ int report_w = report[1];
	_cleanup_close_pair_ int go[2] = { -1, -1 };
	if (o->parent_hook && pipe2(go, O_CLOEXEC) < 0)
		return fail_parent(fail, "go pipe", errno);
	/* What the child keeps open (spawn.h), listed before the fork: its
	 * pipes' ends, /dev/null and the program, what it is given and what
	 * the caller's functions use. A child_fn gets no placement, so fds
	 * and exec_fd are not its own. */
	int keep[4 + SPAWN_FDS_MAX + SPAWN_KEEP_MAX];
	size_t n_keep = 0;
	keep[n_keep++] = report_w;
	keep[n_keep++] = go[0];
	keep[n_keep++] = null_fd;
	if (!o->child_fn) {
		keep[n_keep++] = o->exec_fd;
		for (size_t i = 0; i < o->n_fds; i++)
			keep[n_keep++] = o->fds[i].fd;
	}
	for (size_t i = 0; i < o->n_keep; i++)
		keep[n_keep++] = o->keep[i];
	sigset_t all, old;
	sigfillset(&all);
	pid_t parent = getpid();
	/* Signals are blocked across fork so that no handler of ours runs in
	 * the child before it resets them. */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int pidfd = -1;
	pid_t pid;
	if (o->clone_flags) {
		/* clone3 rather than fork: the namespaces are created with the
		 * child, and its pidfd comes back with it (close-on-exec), so no
		 * pid is ever reused under us. */
		struct clone_args ca = {
			.flags = o->clone_flags | CLONE_PIDFD,
			.pidfd = (uint64_t)(uintptr_t)&pidfd,
			.exit_signal = SIGCHLD,
		};
		pid = sys_clone3(&ca, sizeof(ca));
	} else {
		pid = fork();
	}
	if (pid == 0)
		child_main(o, parent, null_fd, report_w, go[0], keep, n_keep);
	int fork_errno = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid < 0)
		return fail_parent(fail, o->clone_flags ? "clone3" : "fork", fork_errno);
	close(TAKE_FD(report_w));
	/* Also from here, so the group exists before the caller may signal
	 * it (fails harmlessly once the child has exec'd). */
	if (o->own_process_group)
		setpgid(pid, pid);
	spawn_child c = { .pid = pid, .pidfd = pidfd, .report_fd = -1 };
	if (c.pidfd < 0 && (c.pidfd = sys_pidfd_open(pid, 0)) >= 0)
		fcntl(c.pidfd, F_SETFD, FD_CLOEXEC);
	if (o->parent_hook) {
		int hr = o->parent_hook(pid, o->parent_hook_ctx);
		if (hr >= 0 && write(go[1], "g", 1) != 1)
			hr = -errno;
		if (hr < 0) {
			spawn_child_kill_reap(&c);
			return fail_at(fail, SPAWN_STEP_PARENT, -hr);
		}
	}
	if (o->async) {
		c.report_fd = TAKE_FD(report_r);
		*ret = c;
		return 0;
	}
	/* EOF: the pipe closed on exec. A report: the child failed and exits.
	 * Bounded: no other process holds the pipe (every spawn child closes
	 * what it was not given first thing), so a child neither executed nor
	 * failed by then is stuck in its own steps, and is killed rather than
	 * holding the caller forever. */
	int r = report_wait(report_r, util_monotonic_ms() + SPAWN_START_WAIT_MS, fail);
	if (r == 0) {
		*ret = c;
		return 0;
	}
	spawn_child_kill_reap(&c);
	return r;
}

int spawn_finish(spawn_child *c, int64_t deadline, spawn_failure *fail)
{
	if (fail)
		*fail = (spawn_failure){ 0 };
	if (c->report_fd < 0)
		return 0;
	_cleanup_close_ int fd = c->report_fd;
	c->report_fd = -1;
	return report_wait(fd, deadline, fail);
}

void spawn_child_reap(spawn_child *c)
{
	if (c->pid > 0)
		while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
			;
	if (c->pidfd >= 0)
		close(c->pidfd);
	if (c->report_fd >= 0)
		close(c->report_fd);
	*c = SPAWN_CHILD_NONE;
}

void spawn_child_kill_reap(spawn_child *c)
{
	if (!c)
		return;
	if (c->pid <= 0) {
		spawn_child_reap(c);
		return;
	}
	/* By pidfd when there is one: the pid cannot have been reused while
	 * it is unreaped, but the pidfd says so without reasoning. */
	if (c->pidfd >= 0)
		sys_pidfd_send_signal(c->pidfd, SIGKILL, NULL, 0);
	else
		kill(c->pid, SIGKILL);
	spawn_child_reap(c);
}

int spawn_wait(int pidfd, int64_t deadline, int *ret_status)
{
	int r = 0;
	for (;;) {
		int64_t left = deadline - util_monotonic_ms();
		if (left <= 0)
			break;
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		int n = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
		if (n > 0)
			break;
	}
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	if (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG) < 0 || !si.si_pid) {
		/* Past the deadline: killed, then waited for (bounded). */
		r = -ETIMEDOUT;
		sys_pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		poll(&p, 1, SPAWN_KILL_WAIT_MS);
		memset(&si, 0, sizeof(si));
		waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG);
	}
	if (ret_status)
		*ret_status = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : si.si_status & 0x7f;
	return r;
}
