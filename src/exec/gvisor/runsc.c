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
#include <sys/wait.h>
#include <unistd.h>

#include "exec/gvisor/gvisor_internal.h"
#include "exec/starter/starter.h"
#include "host/netns.h"
#include "util/spawn.h"
#include "util/syscalls.h"
#include "util/util.h"

/* runsc never sees the service's environment: it may hold the service's
 * credentials, and everything runsc has, its sandbox processes (the
 * sentry, the gofer) inherit. */
static char runsc_path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
char *const gv_runsc_env[] = { runsc_path, NULL };

char **gv_argv(const airlock_gvisor *g, const gv_sandbox *b, const char *const *words,
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
	 *     with it, taking the oom_kill count the MEMORY reason is read from;
	 *   --host-uds=open, only for a sandbox with a bridge: its programs may
	 *     connect to a host Unix socket its tree shows. The bundle binds
	 *     two host directories: the bridge's, whose one socket is the
	 *     service's, and the workspace volume, which no host process
	 *     makes sockets in (a socket the sandbox binds there is gVisor's
	 *     own, not the host's: connecting to it from inside fails). */
	char root[32 + 4096], platform[64];
	snprintf(root, sizeof(root), "--root=%s", g->runsc_root);
	snprintf(platform, sizeof(platform), "--platform=%s",
	         airlock_gvisor_platform_name(g->platform));
	bool network_host = b && b->network_host;
	const char *flags[] = { g->runsc, root, platform,
		                network_host ? "--network=host" : "--network=none",
		                "--ignore-cgroups", "--host-uds=open" };
	size_t nf = ARRAY_SIZE(flags) - (b && b->bridge_at ? 0 : 1);
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

/* The keeper's program (exec/starter/starter.h, keeper mode): the sealed
 * program's descriptor and its argv, both made before the fork. */
typedef struct gv_keeper_exec {
	int prog_fd;
	char **argv; /* NATIVE_KEEPER_ARGV0, then the runtime's argv */
} gv_keeper_exec;

/* ---- the child ---------------------------------------------------------------
 * Started by util/spawn.h. In the child, before its descriptors are placed:
 * the network namespace the runtime must be born in (system calls only:
 * the service is multithreaded). */
static int child_netns(void *ctx)
{
	const gv_spawn_opts *o = ctx;
	if (o->new_netns) {
		if (unshare(CLONE_NEWNET) < 0)
			return -errno;
		int r = host_netns_loopback_up();
		if (r < 0)
			return r;
	}
	if (o->netns_pidfd >= 0 && setns(o->netns_pidfd, CLONE_NEWNET) < 0)
		return -errno;
	return 0;
}

/* In the parent, before the child goes on: into the sandbox's cgroups, so
 * the runtime is born there and every page and thread it has is charged
 * to the sandbox. */
typedef struct gv_placement {
	host_cgroup *cg;
	airlock_error *err;
} gv_placement;

static int child_placement(pid_t pid, void *ctx)
{
	gv_placement *p = ctx;
	int r = host_cgroup_enter_init(p->cg, pid, p->err);
	return r < 0 ? (p->err && p->err->errnum ? -p->err->errnum : -EIO) : 0;
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
		airlock_error_prefix(err, "starting the runtime: the keeper: ");
		return r;
	}
	size_t n = 0;
	while (o->argv[n])
		n++;
	if (!(k->argv = calloc(n + 2, sizeof(*k->argv))))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, ENOMEM,
		                         "starting the runtime");
	static char keeper_argv0[] = NATIVE_KEEPER_ARGV0;
	k->argv[0] = keeper_argv0;
	for (size_t i = 0; i < n; i++)
		k->argv[i + 1] = o->argv[i];
	return 0;
}

int gv_spawn(const gv_spawn_opts *o, pid_t *ret_pid, int *ret_pidfd, airlock_error *err)
{
	gv_keeper_exec k = { .prog_fd = -1 };
	int r = o->keeper ? keeper_exec_make(o, &k, err) : 0;
	if (r < 0) {
		keeper_exec_clear(&k);
		return r;
	}
	/* stdio as given (-1: /dev/null). The keeper lives as long as the
	 * sandbox, in its cgroup, so what stays is not this copy of the
	 * service (whose memory holds its credential and TLS keys) but the
	 * sealed program in keeper mode, with /dev/null on 3 (its own stdio
	 * once the runtime runs). Nothing else of the service's reaches
	 * runsc: its cgroup locks (a held flock would make a crashed
	 * sandbox's group look live to the sweep), the image store, other
	 * sandboxes' pipes. */
	const spawn_fd fds[] = { { o->in_fd, 0 }, { o->out_fd, 1 }, { o->err_fd, 2 }, { -1, 3 } };
	gv_placement place = { .cg = o->cg, .err = err };
	const spawn_options so = {
		.exec_fd = o->keeper ? k.prog_fd : -1,
		.path = o->argv[0],
		.argv = o->keeper ? k.argv : o->argv,
		.envp = gv_runsc_env,
		.fds = fds,
		.n_fds = o->keeper ? 4 : 3,
		.hook = child_netns,
		.hook_ctx = (void *)(uintptr_t)o,
		/* The hook's: the sandbox's network namespace to enter. */
		.keep = &o->netns_pidfd,
		.n_keep = 1,
		.parent_hook = o->cg ? child_placement : NULL,
		.parent_hook_ctx = &place,
	};
	spawn_child child;
	spawn_failure sf;
	r = spawn_start(&so, &child, &sf);
	keeper_exec_clear(&k);
	if (r < 0) {
		/* The placement's own message names the cgroup. */
		if (sf.step == SPAWN_STEP_PARENT && err && err->message[0]) {
			airlock_error_prefix(err, "starting the runtime: ");
			return r;
		}
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, sf.errnum,
		                         "starting the runtime: %s%s", spawn_failure_step(&sf, NULL),
		                         sf.step == SPAWN_STEP_HOOK ? " (its network namespace)" : "");
	}
	if (ret_pid)
		*ret_pid = child.pid;
	*ret_pidfd = child.pidfd;
	return 0;
}

int gv_runsc_call(const airlock_gvisor *g, const gv_sandbox *b, const char *const *words,
                  size_t n_words, int64_t timeout_ms, int *ret_status, char **ret_out)
{
	int64_t deadline = util_monotonic_ms() + timeout_ms;
	_cleanup_close_pair_ int out[2] = { -1, -1 };
	if (pipe2(out, O_CLOEXEC) < 0)
		return -errno;
	char **argv = gv_argv(g, b, words, n_words);
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
	r = spawn_wait(pidfd, deadline, &st);
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
