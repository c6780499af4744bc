/* SPDX-License-Identifier: Apache-2.0 */
/* Running an external program (run.h has the contract). */
#include "util/run.h"
#include "util/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/syscalls.h"
#include "util/util.h"

#define RUN_READ_CHUNK 4096
/* How long the rest of a killed process group is waited for. */
#define RUN_GROUP_WAIT_STEPS 1000
#define RUN_GROUP_WAIT_STEP_NS (5 * 1000 * 1000)

void util_run_result_clear(util_run_result *r)
{
	free(r->output);
	r->output = NULL;
	r->output_len = 0;
}

/* Keep the last cap bytes of everything appended. */
static void tail_append(char *data, size_t *len, size_t cap, const char *p, size_t n)
{
	if (n > cap) {
		p += n - cap;
		n = cap;
	}
	size_t keep = *len + n > cap ? cap - n : *len;
	if (keep < *len)
		memmove(data, data + (*len - keep), keep);
	memcpy(data + keep, p, n);
	*len = keep + n;
	data[*len] = 0;
}

/* Kill the program (its whole process group with own_group). Called while
 * the leader is unreaped (a zombie at worst), so its pid, which is the
 * group's id, cannot have been reused by anyone else. */
static void run_kill(pid_t pid, bool own_group)
{
	if (own_group)
		kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
}

/* Reap the leader; with own_group, then wait (at most 5 s) until the rest of
 * its group is gone too: SIGKILL is delivered at once but a process takes a
 * moment to die, and a caller told the program is over must not find its
 * children still running (still writing into a tree being removed). Probing
 * with signal 0 after the reap is safe: the kernel does not reuse a pid
 * while a process group of that id has members. */
static int run_reap(pid_t pid, bool own_group, int *ret_status)
{
	int status = 0, r = 0;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			r = -errno;
			break;
		}
	}
	*ret_status = status;
	for (int i = 0; own_group && i < RUN_GROUP_WAIT_STEPS && kill(-pid, 0) == 0; i++) {
		struct timespec ts = { 0, RUN_GROUP_WAIT_STEP_NS };
		nanosleep(&ts, NULL);
	}
	return r;
}

/* In the child, before the descriptors are placed (spawn.h's hook): a
 * mount namespace of its own whose mounts propagate nowhere, so whatever
 * the program mounts disappears with it. */
static int private_mounts(void *ctx)
{
	(void)ctx;
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	return 0;
}

static int run_fail(util_run_result *ret, const char *what, int errnum)
{
	ret->failed = what;
	return -(errnum ? errnum : EIO);
}

int util_run(const util_run_options *o, util_run_result *ret)
{
	*ret = (util_run_result){ 0 };
	if (!o->path || o->path[0] != '/' || !o->argv || !o->argv[0] || !o->envp)
		return run_fail(ret, "arguments", EINVAL);
	/* Everything the child needs is prepared before fork. */
	size_t cap = o->output_max;
	ret->output = calloc(1, cap + 1);
	if (!ret->output)
		return run_fail(ret, "output buffer", ENOMEM);
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return run_fail(ret, "pipe", errno);
	_cleanup_close_ int out_r = pipefd[0];
	_cleanup_close_ int out_w = pipefd[1];
	const bool group = o->own_process_group;
	/* stdin is /dev/null (spawn's default), stdout and stderr the one
	 * pipe; the program dies with us: a crashed caller must not leave a
	 * program it started as root running. */
	const spawn_fd fds[] = { { out_w, 1 }, { out_w, 2 } };
	spawn_options so = {
		.exec_fd = -1, .path = o->path, .argv = o->argv, .envp = o->envp,
		.fds = fds, .n_fds = ARRAY_SIZE(fds),
		.own_process_group = group, .pdeathsig = SIGKILL,
		.hook = o->private_mounts ? private_mounts : NULL,
	};
	spawn_child child;
	spawn_failure sf;
	int sr = spawn_start(&so, &child, &sf);
	close(TAKE_FD(out_w));
	if (sr < 0)
		return run_fail(ret, sf.step == SPAWN_STEP_HOOK ? "private mount namespace (needs CAP_SYS_ADMIN)"
		                                                : spawn_failure_step(&sf, NULL),
		                -sr);
	pid_t pid = child.pid;
	_cleanup_close_ int pidfd = child.pidfd;
	int64_t deadline = util_monotonic_ms() + o->timeout_ms;
	int64_t drain_until = 0;
	bool exited = false, eof = false;
	int r = 0;
	while (!eof || !exited) {
		int64_t now = util_monotonic_ms();
		/* After the program exited, its output is drained for drain_ms
		 * only: a descendant that escaped its process group must not turn
		 * a success into a timeout. */
		int64_t limit = exited && o->drain_ms > 0 && drain_until < deadline ? drain_until :
		                                                                       deadline;
		if (now >= limit) {
			ret->timed_out = !exited;
			break;
		}
		struct pollfd pfd[2] = { { .fd = eof ? -1 : out_r, .events = POLLIN },
			                 { .fd = exited ? -1 : pidfd, .events = POLLIN } };
		/* Without a pidfd (old kernel) the exit is checked every 100 ms. */
		int64_t wait_ms = limit - now > 1000 ? 1000 : limit - now;
		if (pidfd < 0 && wait_ms > 100)
			wait_ms = 100;
		int pr = poll(pfd, 2, (int)wait_ms);
		if (pr < 0 && errno != EINTR) {
			r = run_fail(ret, "poll", errno);
			break;
		}
		if (!eof && pr > 0 && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			char buf[RUN_READ_CHUNK];
			ssize_t n = read(out_r, buf, sizeof(buf));
			if (n > 0)
				tail_append(ret->output, &ret->output_len, cap, buf, (size_t)n);
			else if (n == 0 || (errno != EINTR && errno != EAGAIN))
				eof = true;
		}
		if (!exited) {
			siginfo_t si = { 0 };
			if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
			    si.si_pid == pid) {
				exited = true;
				drain_until = util_monotonic_ms() + o->drain_ms;
				/* Whatever it left running in its group would hold the pipe
				 * and outlive the call: kill it now, while the unreaped
				 * leader still pins the group id. */
				if (group)
					kill(-pid, SIGKILL);
			}
		}
	}
	ret->output_eof = eof;
	if (r < 0 || ret->timed_out)
		run_kill(pid, group);
	int wr = run_reap(pid, group, &ret->status);
	if (r == 0 && wr < 0)
		r = run_fail(ret, "waitpid", -wr);
	return r;
}
