/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Running runsc: its argv with the global flags, a clean environment, the
 * child started inside the sandbox's cgroup (and network namespace), the
 * keeper that reaps what the runtime orphans (the sealed program's keeper
 * mode, exec/starter/starter.h), bounded waits.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/gvisor/gvisor_internal.h"
#include "exec/starter/starter.h"
#include "host/netns.h"
#include "util/syscalls.h"
#include "util/util.h"

/* runsc never sees the service's environment: it may hold the service's
 * credentials, and everything runsc has, its sandbox processes (the
 * sentry, the gofer) inherit. */
static char runsc_path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
char *const gv_runsc_env[] = { runsc_path, NULL };

char **gv_argv(const airlock_gvisor *g, bool network_host, const char *const *words,
               size_t n_words)
{
	/* The flags, and why each:
	 *   --root: runsc's state lives in the service's state directory, so
	 *     the crash sweep finds exactly this service's sandboxes;
	 *   --platform: the one the probe chose;
	 *   --network: none (loopback only) unless the sandbox reaches the
	 *     egress proxy; then host, inside a network namespace the service
	 *     made holding only lo and the planted listener;
	 *   --ignore-cgroups: the service made the sandbox's cgroups, wrote
	 *     their limits and starts runsc inside them; runsc writing its own
	 *     would leave groups behind when it is killed (measured: a failed
	 *     create leaked 9 directories), and runsc's cgroups would vanish
	 *     with it, taking the oom_kill count the MEMORY reason is read from. */
	char root[32 + 4096], platform[64];
	snprintf(root, sizeof(root), "--root=%s", g->runsc_root);
	snprintf(platform, sizeof(platform), "--platform=%s",
	         airlock_gvisor_platform_name(g->platform));
	const char *flags[] = { g->runsc, root, platform,
		                network_host ? "--network=host" : "--network=none",
		                "--ignore-cgroups" };
	size_t nf = ARRAY_SIZE(flags);
	char **argv = calloc(nf + n_words + 1, sizeof(*argv));
	if (!argv)
		return NULL;
	for (size_t i = 0; i < nf + n_words; i++) {
		argv[i] = strdup(i < nf ? flags[i] : words[i - nf]);
		if (!argv[i]) {
			gv_argv_free(argv);
			return NULL;
		}
	}
	return argv;
}

void gv_argv_free(char **argv)
{
	if (!argv)
		return;
	for (char **p = argv; *p; p++)
		free(*p);
	free(argv);
}

/* ---- the child ---------------------------------------------------------------
 * Between fork and exec: system calls only, no allocation (the service is
 * multithreaded). */

/* Put fd on target (0, 1, 2) without clobbering another one still needed:
 * every source was first copied above the stdio range. */
static int child_stdio(int fds[3])
{
	int high[3];
	for (int i = 0; i < 3; i++)
		if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10)) < 0)
			return -1;
	for (int i = 0; i < 3; i++)
		if (dup2(high[i], i) < 0)
			return -1;
	return 0;
}

/* The keeper's program (exec/starter/starter.h, keeper mode): the sealed
 * program's descriptor and its argv, both made before the fork. */
typedef struct gv_keeper_exec {
	int prog_fd;
	char **argv; /* NATIVE_KEEPER_ARGV0, then the runtime's argv */
} gv_keeper_exec;

static _Noreturn void child_main(const gv_spawn_opts *o, const gv_keeper_exec *k, int sync_r,
                                 int devnull)
{
	char c;
	/* Wait until the service has moved us into the sandbox's cgroups: the
	 * runtime must be born there, so every page and thread it has is
	 * charged to the sandbox. EOF without the byte: the service gave up. */
	if (read(sync_r, &c, 1) != 1)
		_exit(126);
	if (o->new_netns && (unshare(CLONE_NEWNET) < 0 || host_netns_loopback_up() < 0))
		_exit(126);
	if (o->netns_pidfd >= 0 && setns(o->netns_pidfd, CLONE_NEWNET) < 0)
		_exit(126);
	util_signals_reset();
	int fds[3] = { o->in_fd >= 0 ? o->in_fd : devnull, o->out_fd >= 0 ? o->out_fd : devnull,
		       o->err_fd >= 0 ? o->err_fd : devnull };
	/* Room for the copies below in a table that can be near the limit. */
	if (util_close_all_but((const int[]){ fds[0], fds[1], fds[2], devnull,
	                                      o->keeper ? k->prog_fd : -1 }, 5) < 0 ||
	    child_stdio(fds) < 0)
		_exit(126);
	/* The keeper lives as long as the sandbox, in its cgroup, so what
	 * stays is not this copy of the service (whose memory holds its
	 * credential and TLS keys) but the sealed program in keeper mode:
	 * /dev/null on 3 (its own stdio once the runtime runs), the program
	 * on 4 (close-on-exec: needed only until the exec of an ELF file).
	 * Each is first copied above 4 so that neither is overwritten by the
	 * other's move. */
	if (o->keeper) {
		int dn = fcntl(devnull, F_DUPFD_CLOEXEC, 5);
		int prog = fcntl(k->prog_fd, F_DUPFD_CLOEXEC, 5);
		if (dn < 0 || prog < 0 || dup2(dn, 3) < 0 || dup3(prog, 4, O_CLOEXEC) < 0 ||
		    sys_close_range(5, ~0u, 0) < 0)
			_exit(126);
		sys_execveat(4, "", k->argv, gv_runsc_env, AT_EMPTY_PATH);
		_exit(126);
	}
	/* Nothing of the service's but stdio: its cgroup locks (a held flock
	 * would make a crashed sandbox's group look live to the sweep), the
	 * image store, other sandboxes' pipes. */
	sys_close_range(3, ~0u, 0);
	execve(o->argv[0], o->argv, gv_runsc_env);
	_exit(127);
}

static void keeper_exec_clear(gv_keeper_exec *k)
{
	if (k->prog_fd >= 0)
		close(k->prog_fd);
	free(k->argv);
}

static int keeper_exec_make(const gv_spawn_opts *o, gv_keeper_exec *k, airlock_error *err)
{
	int r = exec_starter_open(&k->prog_fd, err);
	if (r < 0) {
		airlock_error_prefix(err, "gvisor: the keeper: ");
		return r;
	}
	size_t n = 0;
	while (o->argv[n])
		n++;
	if (!(k->argv = calloc(n + 2, sizeof(*k->argv))))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, ENOMEM,
		                         "gvisor: starting the runtime");
	static char keeper_argv0[] = NATIVE_KEEPER_ARGV0;
	k->argv[0] = keeper_argv0;
	for (size_t i = 0; i < n; i++)
		k->argv[i + 1] = o->argv[i];
	return 0;
}

int gv_spawn(const gv_spawn_opts *o, pid_t *ret_pid, int *ret_pidfd, airlock_error *err)
{
	_cleanup_close_ int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	int sync[2];
	if (devnull < 0 || pipe2(sync, O_CLOEXEC) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "gvisor: starting the runtime");
	gv_keeper_exec k = { .prog_fd = -1 };
	int made = o->keeper ? keeper_exec_make(o, &k, err) : 0;
	if (made < 0) {
		keeper_exec_clear(&k);
		close(sync[0]);
		close(sync[1]);
		return made;
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		keeper_exec_clear(&k);
		close(sync[0]);
		close(sync[1]);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, e,
		                         "gvisor: starting the runtime: fork");
	}
	if (pid == 0) {
		close(sync[1]);
		child_main(o, &k, sync[0], devnull);
	}
	keeper_exec_clear(&k);
	close(sync[0]);
	int pidfd = sys_pidfd_open(pid, 0);
	int r = 0;
	if (pidfd < 0)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                      "gvisor: starting the runtime: pidfd");
	if (r == 0 && o->cg)
		r = host_cgroup_enter_init(o->cg, pid, err);
	if (r == 0 && write(sync[1], "g", 1) != 1)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                      "gvisor: starting the runtime: sync");
	close(sync[1]);
	if (r < 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (pidfd >= 0)
			close(pidfd);
		return r;
	}
	if (ret_pid)
		*ret_pid = pid;
	*ret_pidfd = pidfd;
	return 0;
}

int gv_wait(int pidfd, int64_t deadline, int *ret_status)
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
		poll(&p, 1, GV_KILL_WAIT_MS);
		memset(&si, 0, sizeof(si));
		waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG);
	}
	if (ret_status)
		*ret_status = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : si.si_status & 0x7f;
	return r;
}

int gv_runsc_call(const airlock_gvisor *g, const gv_sandbox *b, const char *const *words,
                  size_t n_words, int64_t timeout_ms, int *ret_status, char **ret_out)
{
	int64_t deadline = util_monotonic_ms() + timeout_ms;
	_cleanup_close_pair_ int out[2] = { -1, -1 };
	if (pipe2(out, O_CLOEXEC) < 0)
		return -errno;
	char **argv = gv_argv(g, b && b->network_host, words, n_words);
	if (!argv)
		return -ENOMEM;
	gv_spawn_opts o = { .argv = argv, .in_fd = -1, .out_fd = out[1], .err_fd = out[1],
		            .netns_pidfd = b && b->network_host ? b->keeper_pidfd : -1 };
	int pidfd = -1;
	airlock_error err = { 0 };
	int r = gv_spawn(&o, NULL, &pidfd, &err);
	gv_argv_free(argv);
	close(out[1]);
	out[1] = -1;
	if (r < 0)
		return -(err.errnum ? err.errnum : EIO);
	/* Read until EOF or the deadline, keeping the head: runsc's answers
	 * (JSON, a list) come first and are short. */
	_cleanup_free_ char *buf = malloc(AIRLOCK_GVISOR_RUNSC_OUTPUT_MAX + 1);
	size_t n = 0;
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	for (bool eof = false; !eof && buf;) {
		int64_t left = deadline - util_monotonic_ms();
		if (left <= 0)
			break;
		struct pollfd p = { .fd = out[0], .events = POLLIN };
		if (poll(&p, 1, (int)(left > 1000 ? 1000 : left)) <= 0)
			continue;
		char chunk[4096];
		ssize_t got = read(out[0], chunk, sizeof(chunk));
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0) {
			eof = true;
			break;
		}
		size_t keep = (size_t)got;
		if (keep > AIRLOCK_GVISOR_RUNSC_OUTPUT_MAX - n)
			keep = AIRLOCK_GVISOR_RUNSC_OUTPUT_MAX - n;
		memcpy(buf + n, chunk, keep);
		n += keep;
	}
	int st = 0;
	r = gv_wait(pidfd, deadline, &st);
	close(pidfd);
	if (r < 0)
		return r;
	*ret_status = st;
	if (ret_out && buf) {
		buf[n] = 0;
		*ret_out = TAKE_PTR(buf);
	}
	return 0;
}

void gv_runsc_delete(const airlock_gvisor *g, const char *id)
{
	const char *words[] = { "delete", "--force", id };
	int st;
	gv_runsc_call(g, NULL, words, ARRAY_SIZE(words), GV_RUNSC_CALL_MS, &st, NULL);
}
