/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Execute: one command in a gVisor sandbox, as named phases over one struct
 * with one cleanup, like native's: the walk before, the working directory,
 * the pipes and the counters' baselines, the start (`runsc exec` of `guest
 * exec --seccomp HEX -- ARGV` as the sandbox user), the loop that pumps
 * stdio and watches the limits (the reason is chosen by exec_kill_decide,
 * the one order of the reasons for every mechanism), the walk after, the
 * result.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/guest.h"
#include "airlock/json.h"
#include "airlock/caps.h"
#include "core/json_internal.h"
#include "core/snapshot.h"
#include "exec/gvisor/events.h"
#include "exec/gvisor/gvisor_internal.h"
#include "exec/io.h"
#include "exec/kill.h"
#include "util/fault.h"
#include "util/syscalls.h"
#include "util/util.h"

/* How often the loop reads the limit counters. */
#define GV_POLL_MS 20
/* Bound on draining output after the command was killed. */
#define GV_DRAIN_MS 2000
/* pids: how often the runtime is asked for the sandbox's process count
 * (`runsc events --stats`, ~20 ms of a core) while the host's task count
 * says the sandbox has many processes. */
#define GV_PIDS_ASK_MS 250
#define GV_PIDS_ASK_KVM_MS 1000
/* After an OOM kill in the sandbox's cgroup, how long the sentry is given
 * to die of it before it is killed. */
#define GV_OOM_SETTLE_MS 1000
/* Bound on that wait. */
#define GV_SETTLE_MS 10000

typedef struct execution {
	airlock_gvisor *g;
	gv_sandbox *b;
	const airlock_environment_handle *handle;
	const airlock_exec_request *req;
	const airlock_execution_command *cmd;
	airlock_execution_result *ret;
	int64_t start;
	int rootfd;
	int pipes[3][2]; /* 0: stdin, 1: stdout, 2: stderr */
	exec_stream out, errs;
	int in_w;
	size_t in_off;
	airlock_snapshot before, after;
	int pidfd; /* runsc exec */
	bool reaped;
	char cwd[AIRLOCK_PATH_MAX + 16];
	uint64_t oom0, tasks0;
	int64_t pids_next; /* monotonic ms: the earliest next ask */
	exec_disk_watch disk;
	bool full;
	int64_t timeout_at, expiry_at, cmd_start, cmd_end;
	airlock_kill_reason kill_reason;
	int status;        /* runsc exec's wait status */
	bool runtime_died; /* the sentry died while the command ran */
	int cwd_errno;     /* the working directory is not there: never started */
	bool started;      /* runsc exec wrote the guest pid: the wrapper ran */
	bool killed;       /* the service killed the command's processes */
} execution;

/* What runsc exec itself prints on its stderr, which is the command's: only
 * when it fails, and after the command started only when the sandbox died
 * under it ("waiting on pid N: ..."). That last line is the runtime's, not
 * the command's, and is cut from the partial output. */
#define GV_RUNSC_WAIT_FAILED "waiting on pid "

static void strip_runtime_line(util_buf *b)
{
	size_t n = b->len;
	if (n && b->data[n - 1] == '\n')
		n--;
	size_t start = n;
	while (start > 0 && b->data[start - 1] != '\n')
		start--;
	size_t plen = strlen(GV_RUNSC_WAIT_FAILED);
	if (n - start >= plen && memcmp(b->data + start, GV_RUNSC_WAIT_FAILED, plen) == 0)
		b->len = start;
}

static int exec_snapshot_before(execution *x, airlock_error *err)
{
	int r = host_volume_check_identity(x->b->vol, err);
	if (r < 0)
		return r;
	return snapshot_walk(x->rootfd, (size_t)x->b->limits.inodes_max + 16,
	                     AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &x->before, err);
}

static int exec_cwd(execution *x, airlock_error *err)
{
	const airlock_execution_command *cmd = x->cmd;
	/* Resolved through the volume's own descriptor while this execute
	 * holds the sandbox: a symlink the sandbox planted is refused. */
	if (strcmp(cmd->working_directory, ".") != 0) {
		_cleanup_free_ char *resolved = NULL;
		int r = airlock_workspace_resolve(x->b->box.ws, cmd->working_directory,
		                                  strlen(cmd->working_directory), &resolved, err);
		if (r < 0)
			return r;
	}
	if (exec_make_cwd(cmd->working_directory, x->cwd, sizeof(x->cwd)) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_WORKSPACE_ESCAPE, 0,
		                         "working_directory is too long");
	/* A working directory that is not there is the command's failure, as
	 * on native (127 and why on stderr): looked up on the volume from the
	 * service's side, because runsc exec's own refusal names the runtime's
	 * internals and goes to the command's stderr. */
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
		                           RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
	int fd = sys_openat2(x->rootfd, cmd->working_directory, &how);
	if (fd < 0)
		x->cwd_errno = errno;
	else
		close(fd);
	return 0;
}

static int exec_pipes(execution *x, airlock_error *err)
{
	for (int i = 0; i < 3; i++)
		if (pipe2(x->pipes[i], O_CLOEXEC) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "execute: pipes");
	int r;
	if ((r = host_cgroup_oom_kills(x->b->cg, &x->oom0, err)) < 0 ||
	    (r = host_cgroup_pids_current(x->b->cg, &x->tasks0, err)) < 0 ||
	    (r = exec_disk_sample(x->b->vol, &x->disk, true, util_monotonic_ms(), &x->full, err)) < 0)
		return r;
	return 0;
}

/* `runsc exec` of the guest wrapper as the sandbox user, in the working
 * directory, with PWD; the rest of the environment is the container's. */
static int start_command(execution *x, airlock_error *err)
{
	gv_sandbox *b = x->b;
	const airlock_execution_command *cmd = x->cmd;
	char user[32], pwd[AIRLOCK_PATH_MAX + 32];
	snprintf(user, sizeof(user), "%d:%d", GV_SANDBOX_UID, GV_SANDBOX_UID);
	snprintf(pwd, sizeof(pwd), "PWD=%s", x->cwd);
	char pid_file[4096 + 16];
	snprintf(pid_file, sizeof(pid_file), "%s/exec.pid", b->dir);
	unlinkat(b->dir_fd, "exec.pid", 0);
	/* --internal-pid-file: runsc writes it once the wrapper runs, so its
	 * absence afterwards says runsc failed before the command started. */
	const char *head[] = { "exec", "--user", user, "--cwd", x->cwd, "--env", pwd,
		               "--internal-pid-file", pid_file, b->box.id, AIRLOCK_GUEST_PROGRAM, "exec",
		               AIRLOCK_GUEST_SECCOMP_OPTION, x->g->seccomp_hex, "--" };
	size_t nh = ARRAY_SIZE(head);
	_cleanup_free_ const char **words = calloc(nh + cmd->argc, sizeof(*words));
	if (!words)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "execute");
	memcpy(words, head, sizeof(head));
	for (size_t i = 0; i < cmd->argc; i++)
		words[nh + i] = cmd->argv[i];
	char **argv = gv_argv(x->g, b->network_host, words, nh + cmd->argc);
	if (!argv)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "execute");
	/* runsc exec hands these three descriptors to the sandbox as the
	 * command's stdio; it is the service's child, outside the sandbox's
	 * cgroups (a host helper, like the native starter). */
	gv_spawn_opts o = { .argv = argv, .in_fd = x->pipes[0][0], .out_fd = x->pipes[1][1],
		            .err_fd = x->pipes[2][1],
		            .netns_pidfd = b->network_host ? b->keeper_pidfd : -1 };
	int r = gv_spawn(&o, NULL, &x->pidfd, err);
	gv_argv_free(argv);
	return r;
}

static int exec_start(execution *x, airlock_error *err)
{
	gv_sandbox *b = x->b;
	x->timeout_at = x->start + x->req->effective_timeout_ms;
	x->expiry_at = x->start + (x->req->expires_at_ms - util_now_ms());
	x->cmd_start = util_monotonic_ms();
	int r = 0;
	pthread_mutex_lock(&b->start_lock);
	if (b->box.dead)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                      "environment %s was destroyed", x->handle->environment_id);
	else if (b->ended || gv_runtime_gone(b))
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "environment %s has ended (gVisor ends the whole sandbox when it "
		                      "runs out of memory): provision a new one",
		                      x->handle->environment_id);
	else if (!x->cwd_errno)
		r = start_command(x, err);
	pthread_mutex_unlock(&b->start_lock);
	if (r == 0 && x->cwd_errno) {
		char msg[AIRLOCK_WORKSPACE_QUOTE_MAX + 256], q[AIRLOCK_WORKSPACE_QUOTE_MAX];
		int len = snprintf(msg, sizeof(msg), "airlock: working directory %s: %s\n",
		                   airlock_workspace_quote(x->cwd, strlen(x->cwd), q),
		                   strerror(x->cwd_errno));
		util_buf_append(&x->errs.buf, msg,
		                len < 0 ? 0 : (size_t)len < sizeof(msg) ? (size_t)len : sizeof(msg) - 1);
		x->status = AIRLOCK_GUEST_EXEC_FAILED << 8;
		x->reaped = x->started = true;
	}
	for (int i = 0; i < 3; i++) {
		close(x->pipes[i][i == 0 ? 0 : 1]);
		x->pipes[i][i == 0 ? 0 : 1] = -1;
	}
	if (r < 0)
		return r;
	x->out.fd = x->pipes[1][0];
	x->errs.fd = x->pipes[2][0];
	x->pipes[1][0] = x->pipes[2][0] = -1;
	fcntl(x->out.fd, F_SETFL, O_NONBLOCK);
	fcntl(x->errs.fd, F_SETFL, O_NONBLOCK);
	x->in_w = x->pipes[0][1];
	x->pipes[0][1] = -1;
	fcntl(x->in_w, F_SETFL, O_NONBLOCK);
	if (!x->cmd->has_stdin || x->cmd->stdin_len == 0) {
		close(x->in_w);
		x->in_w = -1;
	}
	return 0;
}

static int events_pids_read(json_t *root, void *ctx, airlock_error *err)
{
	json_t *cur = json_object_get(json_object_get(json_object_get(root, "data"), "pids"), "current");
	if (!json_is_integer(cur) || json_integer_value(cur) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "runsc events --stats: no data.pids.current count");
	*(int64_t *)ctx = (int64_t)json_integer_value(cur);
	return 0;
}

int gv_events_pids(const char *out, size_t len, int64_t *ret, airlock_error *err)
{
	int64_t n = -1;
	int r = core_json_decode(out, len, AIRLOCK_GVISOR_RUNSC_OUTPUT_MAX, "runsc events --stats",
	                         events_pids_read, &n, err);
	if (r < 0)
		return r;
	*ret = n;
	return 0;
}

/* The sandbox's own process count, from the runtime: `runsc events
 * --stats` reports gVisor's count (init included). -1 when unknown (the
 * runtime did not answer, or its answer did not decode: gv_events_pids). */
static int64_t guest_pids(execution *x)
{
	const char *words[] = { "events", "--stats", x->b->box.id };
	int st = 0;
	_cleanup_free_ char *out = NULL;
	if (gv_runsc_call(x->g, x->b, words, ARRAY_SIZE(words), GV_RUNSC_CALL_MS, &st,
	                  &out) < 0 ||
	    !out)
		return -1;
	int64_t n = -1;
	airlock_error err = { 0 };
	if (gv_events_pids(out, strlen(out), &n, &err) < 0)
		return -1;
	return n;
}

/* pids_max reached: the guest's count, less init, past the limit. The
 * sandbox user's processes (the wrapper and the command's) may number
 * pids_max, as init's cgroup and the command's may on native; one more is
 * the fork native refuses, which gVisor allows (bundle.c: RLIMIT_NPROC is
 * pids_max + 1) because a failed fork there leaves no trace the service can
 * read. A count at the limit is a command that never met it (found: 14
 * children under pids 16, every fork succeeded, killed PIDS). Asked of
 * the runtime only while the host's task count for the sandbox has grown
 * by at least pids_max since the command started (each guest process
 * costs the runtime a host task or more under ptrace), and at most every
 * GV_PIDS_ASK_MS: a command with few processes never pays for the ask. */
static bool pids_reached(execution *x, int64_t now)
{
	if (now < x->pids_next)
		return false;
	/* Under ptrace every guest address space is a host process of the
	 * runtime's, so the host's count is a cheap first sign; under kvm it
	 * is not, and the runtime is asked every GV_PIDS_ASK_KVM_MS instead. */
	if (x->g->platform == AIRLOCK_GVISOR_PLATFORM_PTRACE) {
		uint64_t tasks = 0;
		if (host_cgroup_pids_current(x->b->cg, &tasks, NULL) < 0 ||
		    tasks < x->tasks0 + (uint64_t)x->b->limits.pids_max)
			return false;
		x->pids_next = now + GV_PIDS_ASK_MS;
	} else {
		x->pids_next = now + GV_PIDS_ASK_KVM_MS;
	}
	int64_t n = guest_pids(x);
	return n >= 0 && n - 1 > x->b->limits.pids_max;
}

/* The other way processes run out: the runtime's host tasks for them at
 * half the sandbox's host bound (gvisor_internal.h), where the sentry would
 * die. A fork loop under ptrace costs ~19-30 host tasks per guest process,
 * more while it is being killed, and can get there before gVisor's own
 * count reaches pids_max; the command is then killed with PIDS (it is its
 * processes that cost them) while the sandbox still lives. */
static bool host_tasks_near_bound(execution *x)
{
	uint64_t tasks = 0;
	uint64_t bound = (uint64_t)gv_host_tasks_bound(x->g, x->b->limits.pids_max);
	return host_cgroup_pids_current(x->b->cg, &tasks, NULL) == 0 && tasks * 2 >= bound;
}

static exec_observed exec_observe(execution *x, bool cap_hit, bool exited)
{
	gv_sandbox *b = x->b;
	int64_t now = util_monotonic_ms();
	uint64_t v = 0;
	if (!exited && exec_disk_sample(b->vol, &x->disk, false, now, &x->full, NULL) < 0)
		x->full = false;
	exec_observed o = {
		.output_cap_hit = cap_hit,
		.exited = exited,
		.now = now,
		.expiry_at = x->expiry_at,
		.timeout_at = x->timeout_at,
		.disk_full = x->full,
		.disk_moved = x->disk.moved,
		.disk_full_since = x->disk.full_since,
		.cancelled = airlock_cancel_fired(x->req->cancel),
		/* A destroy while the command runs (the caller's DELETE, or the
		 * core after a forged handle) kills it: that is the caller's
		 * cancellation, never an exit of its own (exit 137 with
		 * killed_by null, found by the red team). */
		.destroyed = exec_box_destroyed(&x->g->boxes, &x->b->box),
	};
	o.oom_killed = host_cgroup_oom_kills(b->cg, &v, NULL) == 0 && v > x->oom0;
	if (!exited && !x->runtime_died)
		o.pids_hit = pids_reached(x, now) || host_tasks_near_bound(x);
	if (!exited) {
		struct pollfd sp = { .fd = x->g->shutdown_efd, .events = POLLIN };
		o.shutdown = poll(&sp, 1, 0) > 0;
	}
	return o;
}

static int exec_pump(execution *x, airlock_error *err)
{
	(void)err;
	if (x->cwd_errno) {
		x->cmd_end = x->cmd_start;
		return 0; /* never started (exec_start) */
	}
	bool exited = false, killed = false;
	int64_t killed_at = 0, exited_at = 0;
	for (;;) {
		struct pollfd p[7];
		int np = 0, i_out = -1, i_err = -1, i_in = -1, i_pid = -1, i_rt = -1;
		if (x->out.fd >= 0)
			p[i_out = np++] = (struct pollfd){ .fd = x->out.fd, .events = POLLIN };
		if (x->errs.fd >= 0)
			p[i_err = np++] = (struct pollfd){ .fd = x->errs.fd, .events = POLLIN };
		if (x->in_w >= 0)
			p[i_in = np++] = (struct pollfd){ .fd = x->in_w, .events = POLLOUT };
		if (!exited)
			p[i_pid = np++] = (struct pollfd){ .fd = x->pidfd, .events = POLLIN };
		if (!x->runtime_died && x->b->sentry_pidfd >= 0)
			p[i_rt = np++] = (struct pollfd){ .fd = x->b->sentry_pidfd, .events = POLLIN };
		/* Once a reason is set, or runsc exec has exited, these would
		 * stay readable and spin the loop. */
		if (x->req->cancel && !x->kill_reason && !exited)
			p[np++] = (struct pollfd){ .fd = airlock_cancel_fd(x->req->cancel),
				                   .events = POLLIN };
		if (!x->kill_reason && !exited)
			p[np++] = (struct pollfd){ .fd = x->g->shutdown_efd, .events = POLLIN };
		if (exited && x->out.fd < 0 && x->errs.fd < 0)
			break;
		/* The output is drained for at most GV_DRAIN_MS after runsc exec
		 * exited, killed or not: when it has, no process of the command
		 * is left, and a pipe still open is held by the runtime itself
		 * (this gVisor never frees unix sockets that hold each other in
		 * flight, and a command can put its stdio in such a cycle). */
		if (exited && util_monotonic_ms() - exited_at > GV_DRAIN_MS)
			break;
		poll(p, (nfds_t)np, GV_POLL_MS);

		bool cap_hit = false;
		if (i_out >= 0 && p[i_out].revents && exec_stream_read(&x->out))
			cap_hit = true;
		if (i_err >= 0 && p[i_err].revents && exec_stream_read(&x->errs))
			cap_hit = true;
		if (i_in >= 0 && p[i_in].revents)
			exec_stdin_feed(&x->in_w, x->cmd, &x->in_off);
		if (i_rt >= 0 && p[i_rt].revents)
			x->runtime_died = true;
		if (i_pid >= 0 && p[i_pid].revents) {
			gv_wait(x->pidfd, 0, &x->status);
			exited = x->reaped = true;
			exited_at = util_monotonic_ms();
			x->started = faccessat(x->b->dir_fd, "exec.pid", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
		}
		if (!x->kill_reason) {
			exec_observed o = exec_observe(x, cap_hit, exited);
			x->kill_reason = exec_kill_decide(&o);
		}
		/* A runtime that died ends every process in it; the reason, if
		 * any, was decided above (MEMORY from the oom_kill count). */
		if (x->runtime_died && !killed) {
			killed = true;
			killed_at = util_monotonic_ms();
		}
		/* A reason, or a wrapper that died of a signal (a command can
		 * kill its own wrapper, which then cannot clean up): every
		 * process of the sandbox user dies now, the wrapper with them,
		 * and runsc exec returns. */
		bool wrapper_killed = exited && WIFEXITED(x->status) && WEXITSTATUS(x->status) >= 128;
		if ((x->kill_reason || wrapper_killed) && !killed && !x->runtime_died) {
			killed = x->killed = true;
			killed_at = util_monotonic_ms();
			gv_kill_commands(x->g, x->b);
		}
		/* runsc exec that outlives its command by the drain bound (a
		 * runtime that no longer answers) is ended here. */
		if (killed && !exited && util_monotonic_ms() - killed_at > GV_DRAIN_MS) {
			gv_wait(x->pidfd, 0, &x->status);
			exited = x->reaped = true;
			exited_at = util_monotonic_ms();
		}
	}
	x->cmd_end = util_monotonic_ms();
	return 0;
}

/* After a kill, gVisor takes a while to tear the processes down (a fork
 * loop's, under ptrace, seconds): until it has, they still count against
 * RLIMIT_NPROC and the next command could not start. Wait, bounded, until
 * gVisor's own count, which is what RLIMIT_NPROC sees, is init alone. Not
 * the host's task count: the sentry is a Go program whose OS threads, once
 * started, stay (measured: of three sandboxes killed at once, one kept 71
 * host tasks where its command had started at 36, for the whole bound, and
 * its caller's result waited 10 s for it; under SIGTERM the service's drain
 * ran out first and the caller got none). Not at all when the service is
 * stopping: the sandbox is destroyed next and no command follows. */
static void settle_runtime(execution *x)
{
	if (x->kill_reason == AIRLOCK_KILL_SERVICE_SHUTDOWN)
		return;
	int64_t deadline = util_monotonic_ms() + GV_SETTLE_MS;
	while (util_monotonic_ms() < deadline) {
		int64_t n = guest_pids(x);
		if (n < 0 || n <= 1)
			break;
		usleep(50 * 1000);
	}
}

static int exec_after(execution *x, airlock_error *err)
{
	gv_sandbox *b = x->b;
	if (x->in_w >= 0) {
		close(x->in_w);
		x->in_w = -1;
	}
	uint64_t ooms = 0;
	if (!x->runtime_died && host_cgroup_oom_kills(b->cg, &ooms, NULL) == 0 && ooms > x->oom0 &&
	    b->sentry_pidfd >= 0) {
		/* The OOM killer chose one of the runtime's processes: the sentry,
		 * and the sandbox ends with it, or another, after which the
		 * sandbox is in no state to trust. Either way it ends: memory
		 * means the same thing every time. */
		struct pollfd pf = { .fd = b->sentry_pidfd, .events = POLLIN };
		if (poll(&pf, 1, GV_OOM_SETTLE_MS) <= 0) {
			sys_pidfd_send_signal(b->sentry_pidfd, SIGKILL, NULL, 0);
			poll(&pf, 1, GV_KILL_WAIT_MS);
		}
		x->runtime_died = true;
	}
	if (x->runtime_died || gv_runtime_gone(b)) {
		/* gVisor ended the whole sandbox. With a reason (MEMORY, or one
		 * of ours) the result says it and carries the partial output;
		 * the handle is dead for executes either way. */
		pthread_mutex_lock(&b->start_lock);
		b->ended = true;
		bool destroyed = b->box.dead;
		pthread_mutex_unlock(&b->start_lock);
		if (!x->kill_reason) {
			uint64_t v = 0;
			if (host_cgroup_oom_kills(b->cg, &v, NULL) == 0 && v > x->oom0)
				x->kill_reason = AIRLOCK_KILL_MEMORY;
			else if (destroyed)
				return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
				                         "environment %s was destroyed",
				                         x->handle->environment_id);
			else
				return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
				                         "environment %s ended: the gvisor sandbox died "
				                         "while the command ran; provision a new one",
				                         x->handle->environment_id);
		}
		strip_runtime_line(&x->errs.buf);
	} else if (!x->started) {
		/* runsc exec never started the wrapper: all its stderr holds is
		 * runsc's own words, which name the runtime's internals. */
		x->errs.buf.len = 0;
		if (x->errs.buf.data)
			x->errs.buf.data[0] = 0;
	}
	if (!x->runtime_died && !gv_runtime_gone(b) && !x->started && !x->kill_reason) {
		/* runsc refused the command before it started; what it printed
		 * names the runtime's internals and is not the command's. */
		int st = WIFEXITED(x->status) ? WEXITSTATUS(x->status) : 128 + WTERMSIG(x->status);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "execute: the gvisor runtime could not start the command "
		                         "(runsc exec exited with status %d)",
		                         st);
	}
	if (x->killed && !x->runtime_died)
		settle_runtime(x);
	int r = host_volume_check_identity(b->vol, err);
	if (r < 0)
		return r;
	r = snapshot_walk(x->rootfd, (size_t)b->limits.inodes_max + 16,
	                  AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &x->after, err);
	if (r < 0)
		return r;
	if (!x->kill_reason) {
		exec_observed o = {
			.finished = true,
			.exit_failed = !WIFEXITED(x->status) || WEXITSTATUS(x->status) != 0,
		};
		if (o.exit_failed) {
			o.full_after = host_volume_full(b->vol, &x->full, NULL) == 0 && x->full;
			o.changed = o.full_after && snapshot_differs(&x->before, &x->after);
		}
		x->kill_reason = exec_kill_decide(&o);
	}
	return 0;
}

static int exec_result(execution *x, airlock_error *err)
{
	airlock_execution_result *ret = x->ret;
	if (x->kill_reason) {
		ret->killed_by = x->kill_reason;
		ret->has_exit_code = false;
	} else {
		/* The wrapper's status is the command's: its exit code, or 128 +
		 * its signal, as the shell and the native mechanism report it. */
		ret->has_exit_code = true;
		ret->exit_code = WIFEXITED(x->status) ? WEXITSTATUS(x->status) : 128 + WTERMSIG(x->status);
	}
	return exec_result_common(ret, &x->out, &x->errs, &x->before, &x->after,
	                          x->req->files_changed_max, &x->b->limits, x->rootfd,
	                          x->cmd_end - x->cmd_start, err);
}

static void exec_cleanup(execution *x, int r)
{
	if (x->pidfd >= 0) {
		if (!x->reaped) {
			/* A phase failed with the command running: end it. */
			if (!gv_runtime_gone(x->b))
				gv_kill_commands(x->g, x->b);
			gv_wait(x->pidfd, util_monotonic_ms() + GV_KILL_WAIT_MS, NULL);
		}
		close(x->pidfd);
	}
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 2; j++)
			if (x->pipes[i][j] >= 0)
				close(x->pipes[i][j]);
	if (x->in_w >= 0)
		close(x->in_w);
	if (x->out.fd >= 0)
		close(x->out.fd);
	if (x->errs.fd >= 0)
		close(x->errs.fd);
	util_buf_clear(&x->out.buf);
	util_buf_clear(&x->errs.buf);
	snapshot_clear(&x->before);
	snapshot_clear(&x->after);
	if (exec_boxes_leave(&x->g->boxes, &x->b->box))
		gv_sandbox_release(x->g, x->b);
}

typedef struct exec_phase {
	const char *point;
	airlock_errclass cls;
	const char *what;
	int (*run)(execution *x, airlock_error *err);
} exec_phase;

static const exec_phase exec_phases[] = {
	{ "execute.snapshot_before", AIRLOCK_ERR_SYSTEM, "files_changed", exec_snapshot_before },
	{ "execute.cwd", AIRLOCK_ERR_WORKSPACE_ESCAPE, "working_directory", exec_cwd },
	{ "execute.pipes", AIRLOCK_ERR_SYSTEM, "execute: pipes", exec_pipes },
	{ "execute.start", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "execute: starting the command",
	  exec_start },
	{ "execute.pump", AIRLOCK_ERR_SYSTEM, "execute", exec_pump },
	{ "execute.after", AIRLOCK_ERR_SYSTEM, "files_changed", exec_after },
	{ "execute.result", AIRLOCK_ERR_SYSTEM, "execute", exec_result },
};

static int exec_run(execution *x, const exec_phase *ph, airlock_error *err)
{
	if (util_fault(ph->point))
		return airlock_error_set(err, ph->cls, EIO, "%s (fault injected at %s)", ph->what,
		                         ph->point);
	return ph->run(x, err);
}

int gv_execute(void *ctx, const airlock_environment_handle *handle,
               const airlock_exec_request *req, airlock_execution_result *ret,
               airlock_error *err)
{
	airlock_gvisor *g = ctx;
	int64_t start = util_monotonic_ms();
	exec_box *box = NULL;
	int r = exec_boxes_enter(&g->boxes, handle, &box, err);
	if (r < 0)
		return r;
	gv_sandbox *b = (gv_sandbox *)box;
	execution x = {
		.g = g, .b = b, .handle = handle, .req = req, .cmd = req->command, .ret = ret,
		.start = start,
		.rootfd = host_volume_root_fd(b->vol),
		.pipes = { { -1, -1 }, { -1, -1 }, { -1, -1 } },
		.in_w = -1,
		.pidfd = -1,
	};
	exec_streams_init(&x.out, &x.errs, req);
	/* runsc's own last line may still be cut (strip_runtime_line). */
	x.errs.hold_prefix = GV_RUNSC_WAIT_FAILED;
	for (size_t i = 0; i < ARRAY_SIZE(exec_phases) && r == 0; i++)
		r = exec_run(&x, &exec_phases[i], err);
	exec_cleanup(&x, r);
	return r;
}
