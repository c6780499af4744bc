/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The code that runs in the service's children before they become the
 * sandbox: the init process that builds the sandbox, and the starter of each
 * command. Both are copies of a possibly multi-threaded service, so they make
 * system calls only: no allocation, no stdio, no locks. A failure is reported
 * as (step, errno) on the sync socket and the child exits; the service turns
 * it into an error and cleans up.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/native/native_internal.h"

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
};

const char *native_step_name(int step)
{
	if (step <= 0 || step >= NATIVE_STEP__MAX || !step_names[step])
		return "setup";
	return step_names[step];
}

static void send_msg(int fd, int kind, int step, int value)
{
	native_msg m = { .kind = kind, .step = step, .value = value };
	ssize_t n;
	do
		n = send(fd, &m, sizeof(m), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
}

static bool recv_msg(int fd, int want)
{
	native_msg m;
	ssize_t n;
	do
		n = recv(fd, &m, sizeof(m), 0);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(m) && m.kind == want;
}

_Noreturn static void fail(int fd, int step)
{
	send_msg(fd, NATIVE_MSG_FAILED, step, errno ? errno : EIO);
	_exit(126);
}

/* ---- dropping privilege -------------------------------------------------- */

int native_become_sandbox_user(const native_seccomp *s, int last_cap)
{
	/* The bounding set first, while CAP_SETPCAP is still held: after it no
	 * execve can give a capability back. */
	for (int cap = 0; cap <= last_cap; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return NATIVE_STEP_DROP;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return NATIVE_STEP_DROP;
	/* Raw system calls: glibc's wrappers broadcast the change to every
	 * thread the service had, which a clone3 child does not have, and
	 * could wait for them forever. */
	if (syscall(SYS_setresgid, NATIVE_SANDBOX_GID, NATIVE_SANDBOX_GID, NATIVE_SANDBOX_GID) < 0 ||
	    syscall(SYS_setresuid, NATIVE_SANDBOX_UID, NATIVE_SANDBOX_UID, NATIVE_SANDBOX_UID) < 0)
		return NATIVE_STEP_DROP;
	/* A uid change inside a user namespace whose uid 0 is unmapped does not
	 * clear capabilities by itself (the kernel compares with the namespace's
	 * root), so every set is emptied explicitly. */
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0)
		return NATIVE_STEP_DROP;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return NATIVE_STEP_DROP;
	if (native_seccomp_install(s) < 0)
		return NATIVE_STEP_SECCOMP;
	return 0;
}

/* ---- signals ------------------------------------------------------------- */

/* Every disposition back to the default and the mask emptied, first thing
 * in init and in the command starter, like util/run.c does for its
 * children: a fork keeps the caller's blocked signals and ignored
 * dispositions across execve, so a service that blocks SIGINT/SIGTERM (to
 * wait for them itself) and ignores SIGPIPE (so a reader cannot kill it)
 * would hand both to the sandboxed command: a `yes | head` printing
 * "Broken pipe", a command deaf to its own signals. Only async-signal-safe
 * calls: the caller may have other threads. */
static void reset_signals(void)
{
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		sigaction(s, &dfl, NULL); /* SIGKILL, SIGSTOP and glibc's own refuse; harmless */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* ---- init ---------------------------------------------------------------- */

/* Open descriptors per sandboxed process, soft and hard (the hard limit
 * equal, so it cannot be raised back). Commands would otherwise inherit the
 * service's limit (20000 here): ten processes held 200k open files, and the
 * host's fs.file-max is shared by every tenant (past it, only host root
 * opens files). 1024 is the soft limit programs are written against
 * (select's FD_SETSIZE is 1024, and the usual distribution default), so
 * nothing ordinary meets it. It also caps what one sandbox user can have in
 * flight in SCM_RIGHTS messages (the kernel compares that count with
 * RLIMIT_NOFILE). A sandbox's total is this times pids_max; every open
 * file's kernel objects are charged to its memory cgroup besides. */
#define NATIVE_NOFILE 1024

static void on_sigchld(int sig)
{
	(void)sig;
}

static int mknod_dev(const char *path, unsigned major_, unsigned minor_)
{
	if (mknod(path, S_IFCHR | 0666, makedev(major_, minor_)) < 0)
		return -1;
	return chmod(path, 0666);
}

_Noreturn void native_init_main(const native_init_args *a)
{
	int fd = a->sync_fd;
	reset_signals();
	errno = 0;
	if (!recv_msg(fd, NATIVE_MSG_GO))
		fail(fd, NATIVE_STEP_SYNC);
	umask(0);

	/* Nothing mounted here may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		fail(fd, NATIVE_STEP_PRIVATE);
	/* The service placed us in the sandbox's init cgroup first, so the new
	 * cgroup namespace is rooted there and hides the host's tree. */
	if (unshare(CLONE_NEWCGROUP) < 0)
		fail(fd, NATIVE_STEP_CGROUPNS);

	/* A scratch tmpfs, private to this namespace, to assemble the root in. */
	if (mount("airlock", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	          "size=64k,nr_inodes=64,mode=0700") < 0 ||
	    mkdir("/tmp/root", 0700) < 0)
		fail(fd, NATIVE_STEP_STAGING);
	if (syscall(SYS_move_mount, a->image_mount_fd, "", AT_FDCWD, "/tmp/root",
	            MOVE_MOUNT_F_EMPTY_PATH) < 0)
		fail(fd, NATIVE_STEP_ROOT);

	/* We are pid 1 of the new pid namespace, so this proc shows only the
	 * sandbox; hidepid=invisible hides other users' processes and
	 * subset=pid leaves out /proc/sys and the rest of the host's knobs. */
	if (mount("proc", "/tmp/root/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	          "hidepid=invisible,subset=pid") < 0)
		fail(fd, NATIVE_STEP_PROC);

	/* /dev: the five harmless character devices and the usual links, on a
	 * tmpfs made read-only afterwards. No host path is bound in. */
	if (mount("airlock-dev", "/tmp/root/dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
	          "size=64k,nr_inodes=64,mode=0755") < 0 ||
	    mknod_dev("/tmp/root/dev/null", 1, 3) < 0 || mknod_dev("/tmp/root/dev/zero", 1, 5) < 0 ||
	    mknod_dev("/tmp/root/dev/full", 1, 7) < 0 || mknod_dev("/tmp/root/dev/random", 1, 8) < 0 ||
	    mknod_dev("/tmp/root/dev/urandom", 1, 9) < 0 ||
	    symlink("/proc/self/fd", "/tmp/root/dev/fd") < 0 ||
	    symlink("/proc/self/fd/0", "/tmp/root/dev/stdin") < 0 ||
	    symlink("/proc/self/fd/1", "/tmp/root/dev/stdout") < 0 ||
	    symlink("/proc/self/fd/2", "/tmp/root/dev/stderr") < 0 ||
	    mkdir("/tmp/root/dev/shm", 01777) < 0)
		fail(fd, NATIVE_STEP_DEV);
	if (mount("airlock-shm", "/tmp/root/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	          a->tmp_options) < 0)
		fail(fd, NATIVE_STEP_SHM);
	if (mount(NULL, "/tmp/root/dev", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
	          NULL) < 0)
		fail(fd, NATIVE_STEP_DEV);
	/* tmpfs pages are charged to the sandbox's memory cgroup. */
	if (mount("airlock-tmp", "/tmp/root/tmp", "tmpfs", MS_NOSUID | MS_NODEV, a->tmp_options) < 0)
		fail(fd, NATIVE_STEP_TMP);
	if (syscall(SYS_move_mount, a->volume_mount_fd, "", AT_FDCWD, "/tmp/root/workspace",
	            MOVE_MOUNT_F_EMPTY_PATH) < 0)
		fail(fd, NATIVE_STEP_WORKSPACE);

	/* Swap roots and drop the host's tree from this namespace entirely. */
	if (chdir("/tmp/root") < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		fail(fd, NATIVE_STEP_PIVOT);

	/* The network namespace has only lo; bring it up so programs that talk
	 * to themselves work. Nothing else exists to reach. */
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		fail(fd, NATIVE_STEP_LOOPBACK);
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		fail(fd, NATIVE_STEP_LOOPBACK);
	close(s);
	if (sethostname("sandbox", 7) < 0)
		fail(fd, NATIVE_STEP_HOSTNAME);

	/* Become the sandbox's own host id before creating the user namespace:
	 * the namespace's per-user counts (pending signals, message queues,
	 * inotify and fanotify instances, processes) are then charged to this
	 * sandbox's id, not to host root's, which every sandbox and every root
	 * daemon share. The limits set first become the namespace's ceilings. */
	static const struct {
		int resource;
		rlim_t value;
	} ceilings[] = {
		{ RLIMIT_SIGPENDING, 4096 },
		{ RLIMIT_MSGQUEUE, 819200 },
		{ RLIMIT_MEMLOCK, 8u << 20 },
		{ RLIMIT_NOFILE, NATIVE_NOFILE },
	};
	for (size_t i = 0; i < sizeof(ceilings) / sizeof(ceilings[0]); i++) {
		struct rlimit rl = { ceilings[i].value, ceilings[i].value };
		if (setrlimit(ceilings[i].resource, &rl) < 0)
			fail(fd, NATIVE_STEP_USERNS);
	}
	if (syscall(SYS_setgroups, 0, NULL) < 0 ||
	    syscall(SYS_setresgid, a->host_id, a->host_id, a->host_id) < 0 ||
	    syscall(SYS_setresuid, a->host_id, a->host_id, a->host_id) < 0)
		fail(fd, NATIVE_STEP_USERNS);

	/* The user namespace comes last: every mount and the network namespace
	 * stay owned by the host's user namespace, so nothing inside can change
	 * them even with a capability in its own namespace. */
	if (unshare(CLONE_NEWUSER) < 0)
		fail(fd, NATIVE_STEP_USERNS);
	send_msg(fd, NATIVE_MSG_MAP, 0, 0);
	if (!recv_msg(fd, NATIVE_MSG_MAPPED))
		fail(fd, NATIVE_STEP_SYNC);

	/* init itself runs as the sandbox user with the filter: it reaps
	 * orphans and does nothing else, and holds nothing worth attacking. */
	int step = native_become_sandbox_user(a->seccomp, a->last_cap);
	if (step)
		fail(fd, step);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigchld;
	sigaction(SIGCHLD, &sa, NULL);

	send_msg(fd, NATIVE_MSG_READY, 0, 0);
	/* Every descriptor goes, the sync socket and stdio included, except the
	 * lifeline: init keeps nothing of the service's. */
	int life = a->lifeline_fd;
	if (life > 0)
		syscall(SYS_close_range, 0, (unsigned)life - 1, 0);
	syscall(SYS_close_range, (unsigned)life + 1, ~0U, 0);
	/* Reap orphans; when the service goes away without destroying the
	 * sandbox, its end of the lifeline closes and init exits, which ends
	 * every process of the pid namespace: a sandbox never outlives the
	 * service that started it. (PR_SET_PDEATHSIG would follow the thread
	 * that cloned us, not the service.) */
	for (;;) {
		while (waitpid(-1, NULL, __WALL | WNOHANG) > 0)
			;
		struct pollfd p = { .fd = life, .events = POLLIN };
		int r = poll(&p, 1, -1);
		if (r > 0 && (p.revents & (POLLHUP | POLLERR | POLLIN)))
			_exit(0);
	}
}

/* ---- a command ----------------------------------------------------------- */

_Noreturn void native_cmd_main(const native_cmd_args *a)
{
	int fd = a->sync_fd;
	reset_signals();
	errno = 0;
	if (!recv_msg(fd, NATIVE_MSG_GO))
		fail(fd, NATIVE_STEP_SYNC);
	/* Supplementary groups go while it is still allowed: the sandbox's user
	 * namespace denies setgroups. */
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		fail(fd, NATIVE_STEP_DROP);
	if (setns(a->init_pidfd, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC |
	                             CLONE_NEWUTS | CLONE_NEWPID | CLONE_NEWCGROUP) < 0)
		fail(fd, NATIVE_STEP_SETNS);

	/* A child, because only children enter the pid namespace; made the
	 * service's child (CLONE_PARENT) so the service waits on it directly. */
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_PARENT, 0, NULL, NULL, 0);
	if (pid < 0)
		fail(fd, NATIVE_STEP_FORK);
	if (pid > 0) {
		send_msg(fd, NATIVE_MSG_PID, 0, pid);
		_exit(0);
	}

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
	if (syscall(SYS_close_range, 5, ~0U, 0) < 0) {
		e = errno;
		goto out;
	}
	/* No file larger than the workspace (a sparse file's apparent size is
	 * what hashing it for files_changed costs), no core dumps left in the
	 * workspace, and NATIVE_NOFILE descriptors (see there) instead of the
	 * service's own limit. */
	struct rlimit fsize = { .rlim_cur = a->fsize_limit, .rlim_max = a->fsize_limit };
	struct rlimit core = { 0, 0 };
	struct rlimit nofile = { NATIVE_NOFILE, NATIVE_NOFILE };
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
	syscall(SYS_execveat, 4, "", a->argv, a->envp, AT_EMPTY_PATH);
	e = errno;
out:;
	int32_t v[2] = { step, e ? e : EIO };
	ssize_t n = write(efd, v, sizeof(v));
	(void)n;
	_exit(127);
}
