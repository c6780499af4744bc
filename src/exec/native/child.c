/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The code that runs in the service's children before they become the
 * sandbox: the init process that builds the sandbox (and then executes the
 * sealed program's init mode, starter.h), and the launcher of each command. Each runs the child halves of the facilities (mounts.c,
 * net.c, user.c) in order. Both are copies of a possibly multi-threaded
 * service, so they make system calls only: no allocation, no stdio, no
 * locks. Both are started by util/spawn (a child_fn each), and a failure
 * is reported the way spawn reports its own: (step, errno) on spawn's
 * failure pipe (spawn_child_fail), after which the child exits; the service
 * reads it through spawn_finish, turns it into an error naming the step
 * (native_step_name) and the system's reason, and cleans up.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/native/native_internal.h"
#include "exec/starter/starter.h"
#include "util/spawn.h"
#include "util/syscalls.h"
#include "util/util.h"

static const char *const step_names[NATIVE_STEP__MAX] = {
	[NATIVE_STEP_SYNC] = "sync with the service",
	[NATIVE_STEP_PRIVATE] = "make mounts private",
	[NATIVE_STEP_CGROUPNS] = "cgroup namespace",
	[NATIVE_STEP_STAGING] = "staging mount",
	[NATIVE_STEP_ROOT] = "read-only root from the image",
	[NATIVE_STEP_PROC] = "/proc (hidepid=invisible,subset=pid)",
	[NATIVE_STEP_DEV] = "minimal /dev",
	[NATIVE_STEP_SHM] = "/dev/shm",
	[NATIVE_STEP_TMP] = "private /tmp",
	[NATIVE_STEP_WORKSPACE] = "/workspace (the image needs a /workspace directory)",
	[NATIVE_STEP_PIVOT] = "pivot_root",
	[NATIVE_STEP_LOOPBACK] = "bring lo up",
	[NATIVE_STEP_HOSTNAME] = "hostname",
	[NATIVE_STEP_USERNS] = "user namespace",
	[NATIVE_STEP_DROP] = "drop to the sandbox user",
	[NATIVE_STEP_SECCOMP] = "seccomp filter",
	[NATIVE_STEP_SETNS] = "enter the sandbox's namespaces",
	[NATIVE_STEP_FORK] = "start the command",
	[NATIVE_STEP_STDIO] = "standard streams",
	[NATIVE_STEP_CWD] = "working directory",
	[NATIVE_STEP_EXEC] = "execute",
	[NATIVE_STEP_INIT] = "start the sandbox's init program",
	[NATIVE_STEP_BRIDGE] = "the bridge socket's mount",
};

const char *native_step_name(int step)
{
	if (step <= 0 || step >= NATIVE_STEP__MAX || !step_names[step])
		return "setup";
	return step_names[step];
}

void native_child_send(int fd, int kind, int step, int value)
{
	native_msg m = { .kind = kind, .step = step, .value = value };
	ssize_t n;
	do
		n = send(fd, &m, sizeof(m), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
}

bool native_child_recv(int fd, int want)
{
	native_msg m;
	ssize_t n;
	do
		n = recv(fd, &m, sizeof(m), 0);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(m) && m.kind == want;
}

_Noreturn static void fail(int report_fd, int step)
{
	spawn_child_fail(report_fd, step, errno ? errno : EIO);
}

/* ---- init ---------------------------------------------------------------- */

_Noreturn void native_init_main(const native_init_args *a, int report_fd)
{
	int fd = a->sync_fd;
	/* Every disposition back to the default and the mask emptied, first
	 * thing in init and in the command starter, like util/run.c does for
	 * its children: a fork keeps the caller's blocked signals and ignored
	 * dispositions across execve, so a service that blocks SIGINT/SIGTERM
	 * (to wait for them itself) and ignores SIGPIPE (so a reader cannot
	 * kill it) would hand both to the sandboxed command: a `yes | head`
	 * printing "Broken pipe", a command deaf to its own signals. */
	util_signals_reset();
	errno = 0;
	if (!native_child_recv(fd, NATIVE_MSG_GO))
		fail(report_fd, NATIVE_STEP_SYNC);
	umask(0);

	int step = native_mounts_private();
	if (step)
		fail(report_fd, step);
	/* The service placed us in the sandbox's init cgroup first, so the new
	 * cgroup namespace is rooted there and hides the host's tree. */
	if (unshare(CLONE_NEWCGROUP) < 0)
		fail(report_fd, NATIVE_STEP_CGROUPNS);
	if ((step = native_mounts_build_root(a)) || (step = native_net_loopback_up()))
		fail(report_fd, step);
	if (sethostname("sandbox", 7) < 0)
		fail(report_fd, NATIVE_STEP_HOSTNAME);
	if ((step = native_user_enter(fd, a->host_id, a->nofile)))
		fail(report_fd, step);

	/* init itself runs as the sandbox user with the filter: it reaps
	 * orphans and does nothing else, and holds nothing worth attacking. */
	if ((step = native_become_sandbox_user(a->seccomp, a->last_cap)))
		fail(report_fd, step);

	/* Until here init is a copy of the service (a clone3 of it), and the
	 * service's memory holds its credential and TLS keys; init lives as
	 * long as the sandbox, in its pid namespace, charged to its cgroup. So
	 * what stays is not this copy: the sealed program in init mode
	 * (starter.h), with only what it needs, the lifeline on 3 and the sync
	 * socket on 4 (it says READY there itself, so a sandbox is never handed
	 * out before its init is that program), and spawn's failure pipe on 6,
	 * close-on-exec, until the exec: its end is how the service tells an
	 * executed init from a failed one. exec keeps what the steps
	 * above made: the namespaces, the root, the cgroup, the uid, the empty
	 * capability sets, no_new_privs and the filter (which allows execveat:
	 * every command is started the same way), and the pid, so the
	 * service's pidfd and the kill and settle logic of execute.c see the
	 * same process. Every descriptor goes but those two, the service's
	 * stdio included: init keeps nothing of the service's. Each source is
	 * first copied above 5 so that none is overwritten by another's move. */
	/* First every other descriptor goes: spawn left init only what it
	 * keeps (provision.c), and of that the image and volume mounts are
	 * spent (moved into the root), as is anything the steps above left
	 * open; none of them may reach the program. */
	if (util_close_all_but((const int[]){ fd, a->lifeline_fd, a->starter_fd, report_fd }, 4) < 0)
		fail(report_fd, NATIVE_STEP_INIT);
	int rep = fcntl(report_fd, F_DUPFD_CLOEXEC, 7);
	if (rep < 0)
		fail(report_fd, NATIVE_STEP_INIT);
	/* The copy reports from here: the original may be one of 3-6. */
	report_fd = rep;
	int life = fcntl(a->lifeline_fd, F_DUPFD_CLOEXEC, 7);
	int sync = fcntl(fd, F_DUPFD_CLOEXEC, 7);
	int prog = fcntl(a->starter_fd, F_DUPFD_CLOEXEC, 7);
	if (life < 0 || sync < 0 || prog < 0)
		fail(report_fd, NATIVE_STEP_INIT);
	/* dup2 clears close-on-exec on 3 and 4; the program's own descriptor
	 * and the failure pipe need to live only until the execveat of an ELF
	 * file. */
	if (dup2(sync, 4) < 0 || dup2(life, 3) < 0 || dup3(prog, 5, O_CLOEXEC) < 0 ||
	    dup3(rep, 6, O_CLOEXEC) < 0)
		fail(report_fd, NATIVE_STEP_INIT);
	report_fd = 6;
	if (sys_close_range(0, 2, 0) < 0 || sys_close_range(7, ~0U, 0) < 0)
		fail(report_fd, NATIVE_STEP_INIT);
	static char init_argv0[] = NATIVE_INIT_ARGV0;
	char *const argv[] = { init_argv0, NULL };
	char *const envp[] = { NULL };
	sys_execveat(5, "", argv, envp, AT_EMPTY_PATH);
	fail(report_fd, NATIVE_STEP_INIT);
}

/* ---- a command ----------------------------------------------------------- */

_Noreturn void native_cmd_main(const native_cmd_args *a, int report_fd)
{
	/* spawn runs this only once the service has moved the launcher into
	 * the sandbox's command cgroup (its parent_hook), so the command and
	 * everything it makes are charged there. */
	int fd = a->sync_fd;
	util_signals_reset(); /* see native_init_main */
	errno = 0;
	/* Supplementary groups go while it is still allowed: the sandbox's user
	 * namespace denies setgroups. */
	if (sys_setgroups(0, NULL) < 0)
		fail(report_fd, NATIVE_STEP_DROP);
	if (setns(a->init_pidfd, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC |
	                             CLONE_NEWUTS | CLONE_NEWPID | CLONE_NEWCGROUP) < 0)
		fail(report_fd, NATIVE_STEP_SETNS);

	/* A child, because only children enter the pid namespace; made the
	 * service's child (CLONE_PARENT) so the service waits on it directly. */
	pid_t pid = sys_clone(CLONE_PARENT);
	if (pid < 0)
		fail(report_fd, NATIVE_STEP_FORK);
	if (pid > 0) {
		native_child_send(fd, NATIVE_MSG_PID, 0, pid);
		_exit(0);
	}
	/* The launcher's failure pipe is not the command's: the command
	 * reports on exec_err_fd. */
	close(report_fd);

	/* The command. Its failures go to exec_err_fd as (step, errno), and
	 * the service reports them as the command's own. */
	int efd = a->exec_err_fd;
	int step = NATIVE_STEP_STDIO;
	int e = 0;
	/* A session of its own: a Ctrl-C or a hang-up on the operator's
	 * terminal goes to `airlock run` alone, which ends the command with
	 * SERVICE_SHUTDOWN; the terminal's signals never reach the command
	 * directly (it would die with 130 before the service said why). */
	if (setsid() < 0) {
		e = errno;
		goto out;
	}
	/* The starter's descriptor first goes out of the way of 0-4 (it may
	 * be any of them in a young process), then lands on 4, close-on-exec:
	 * execveat of an ELF file needs it only until the exec. fd 3, the
	 * exec-error pipe, stays open into the starter, which marks it
	 * close-on-exec itself before it executes the command. */
	int sfd = fcntl(a->starter_fd, F_DUPFD_CLOEXEC, 5);
	if (sfd < 0 || dup2(a->stdin_fd, 0) < 0 || dup2(a->stdout_fd, 1) < 0 ||
	    dup2(a->stderr_fd, 2) < 0 || dup2(efd, 3) < 0 || dup3(sfd, 4, O_CLOEXEC) < 0) {
		e = errno;
		goto out;
	}
	efd = 3;
	/* Every other descriptor of the service goes before any untrusted code
	 * runs. */
	if (sys_close_range(5, ~0U, 0) < 0) {
		e = errno;
		goto out;
	}
	/* No file larger than the workspace (a sparse file's apparent size is
	 * what hashing it for files_changed costs), no core dumps left in the
	 * workspace, and the sandbox's share of descriptors (airlock/caps.h,
	 * AIRLOCK_SANDBOX_NOFILE) instead of the service's own limit. */
	struct rlimit fsize = { .rlim_cur = a->fsize_limit, .rlim_max = a->fsize_limit };
	struct rlimit core = { 0, 0 };
	struct rlimit nofile = { a->nofile, a->nofile };
	if (setrlimit(RLIMIT_FSIZE, &fsize) < 0 || setrlimit(RLIMIT_CORE, &core) < 0 ||
	    setrlimit(RLIMIT_NOFILE, &nofile) < 0) {
		e = errno;
		goto out;
	}
	step = NATIVE_STEP_CWD;
	if (chdir(a->cwd) < 0) {
		e = errno;
		goto out;
	}
	step = native_become_sandbox_user(a->seccomp, a->last_cap);
	if (step) {
		e = errno ? errno : EPERM;
		goto out;
	}
	/* Not the command yet: the starter, from its sealed memfd. Until this
	 * execveat the process is a copy of the service, so anything that
	 * resolved /proc/self/exe now (the command's path, its script's
	 * interpreter, its ELF loader) would be the host's airlock binary;
	 * from here on it is the starter, which refuses (starter.h). */
	step = NATIVE_STEP_EXEC;
	sys_execveat(4, "", a->argv, a->envp, AT_EMPTY_PATH);
	e = errno;
out:;
	int32_t v[2] = { step, e ? e : EIO };
	ssize_t n = write(efd, v, sizeof(v));
	(void)n;
	_exit(127);
}
