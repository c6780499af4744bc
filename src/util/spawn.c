/* SPDX-License-Identifier: Apache-2.0 */
/* Starting a child program, one way for every caller (spawn.h). */
#include "util/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
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
};

const char *spawn_step_name(spawn_step s)
{
	return (unsigned)s < SPAWN_STEP__MAX ? step_names[s] : "start";
}

/* What the child reports on its failure pipe. */
typedef struct spawn_report {
	int32_t step;
	int32_t errnum;
} spawn_report;

static _Noreturn void child_fail(int report_fd, spawn_step step, int errnum)
{
	spawn_report m = { .step = (int32_t)step, .errnum = errnum > 0 ? errnum : EIO };
	/* One write of 8 bytes to a pipe is atomic. Were it to fail, the
	 * parent would read EOF as from an exec, and the caller would then see
	 * the child exit with status 127. */
	ssize_t w = write(report_fd, &m, sizeof(m));
	(void)w;
	_exit(127);
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
                                 int go_fd, int go_w)
{
	int exec_fd = o->exec_fd;
	char go;
	/* Our copy of the write end would keep the pipe from ending if the
	 * parent died. */
	if (go_w >= 0)
		close(go_w);
	/* The parent's hook first: EOF without the byte is the parent giving
	 * up, which reports nothing (it kills us). */
	if (go_fd >= 0 && read(go_fd, &go, 1) != 1)
		_exit(127);
	if (o->own_process_group && setpgid(0, 0) < 0)
		child_fail(report_fd, SPAWN_STEP_PGRP, errno);
	/* The getppid check closes the race with the parent's exit. */
	if (o->pdeathsig &&
	    (prctl(PR_SET_PDEATHSIG, o->pdeathsig, 0, 0, 0) < 0 || getppid() != parent))
		child_fail(report_fd, SPAWN_STEP_PDEATHSIG, errno ? errno : ESRCH);
	int r;
	if (o->hook && (r = o->hook(o->hook_ctx)) < 0)
		child_fail(report_fd, SPAWN_STEP_HOOK, -r);
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

int spawn_start(const spawn_options *o, spawn_child *ret, spawn_failure *fail)
{
	*ret = SPAWN_CHILD_NONE;
	if (fail)
		*fail = (spawn_failure){ 0 };
	if (!o->argv || !o->argv[0] || !o->envp || o->n_fds > SPAWN_FDS_MAX ||
	    (o->exec_fd < 0 && (!o->path || o->path[0] != '/')))
		return fail_at(fail, SPAWN_STEP_NONE, EINVAL);
	for (size_t i = 0; i < o->n_fds; i++)
		if (o->fds[i].target < 0 || o->fds[i].target > 64)
			return fail_at(fail, SPAWN_STEP_NONE, EINVAL);
	/* Everything the child needs is made before fork. */
	_cleanup_close_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
	if (null_fd < 0)
		return fail_at(fail, SPAWN_STEP_NONE, errno);
	int report[2];
	if (pipe2(report, O_CLOEXEC) < 0)
		return fail_at(fail, SPAWN_STEP_NONE, errno);
	_cleanup_close_ int report_r = report[0];
	_cleanup_close_ int report_w = report[1];
	_cleanup_close_pair_ int go[2] = { -1, -1 };
	if (o->parent_hook && pipe2(go, O_CLOEXEC) < 0)
		return fail_at(fail, SPAWN_STEP_NONE, errno);
	sigset_t all, old;
	sigfillset(&all);
	pid_t parent = getpid();
	/* Signals are blocked across fork so that no handler of ours runs in
	 * the child before it resets them. */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = fork();
	if (pid == 0)
		child_main(o, parent, null_fd, report_w, go[0], go[1]);
	int fork_errno = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid < 0)
		return fail_at(fail, SPAWN_STEP_NONE, fork_errno);
	close(TAKE_FD(report_w));
	/* Also from here, so the group exists before the caller may signal
	 * it (fails harmlessly once the child has exec'd). */
	if (o->own_process_group)
		setpgid(pid, pid);
	spawn_child c = { .pid = pid, .pidfd = sys_pidfd_open(pid, 0) };
	if (c.pidfd >= 0)
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
	/* EOF: the pipe closed on exec. A report: the child failed and exits. */
	spawn_report m;
	ssize_t n;
	do
		n = read(report_r, &m, sizeof(m));
	while (n < 0 && errno == EINTR);
	if (n == 0) {
		*ret = c;
		return 0;
	}
	spawn_child_kill_reap(&c);
	if (n == (ssize_t)sizeof(m) && m.step > SPAWN_STEP_NONE && m.step < SPAWN_STEP__MAX)
		return fail_at(fail, (spawn_step)m.step, m.errnum);
	return fail_at(fail, SPAWN_STEP_NONE, n < 0 ? errno : EPROTO);
}

void spawn_child_kill_reap(spawn_child *c)
{
	if (!c || c->pid <= 0) {
		if (c && c->pidfd >= 0)
			close(c->pidfd);
		if (c)
			*c = SPAWN_CHILD_NONE;
		return;
	}
	/* By pidfd when there is one: the pid cannot have been reused while
	 * it is unreaped, but the pidfd says so without reasoning. */
	if (c->pidfd >= 0)
		sys_pidfd_send_signal(c->pidfd, SIGKILL, NULL, 0);
	else
		kill(c->pid, SIGKILL);
	while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (c->pidfd >= 0)
		close(c->pidfd);
	*c = SPAWN_CHILD_NONE;
}
