/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Execute: one command in a provisioned sandbox, as named phases over one
 * struct (execution) with one cleanup: the walk before, the working
 * directory, the environment, the pipes and the counters' baselines, the
 * start, the loop that pumps stdio and watches the limits (the reason is
 * chosen by exec_kill_decide, kill.h), the walk after and the rule at
 * exit, the result (files_changed's kept snapshot is kept.c's).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/io.h"
#include "exec/kobjects.h"
#include "exec/kill.h"
#include "exec/native/service.h"
#include "exec/starter/starter.h"
#include "util/fault.h"
#include "util/syscalls.h"
#include "util/util.h"

/* How often the execute loop reads the limit counters. */
#define NATIVE_POLL_MS 20
/* Bound on draining output after the command's group is empty. */
#define NATIVE_DRAIN_MS 2000

/* ---- starting the command ---------------------------------------------------- */

/* Start the command in the sandbox; returns its pidfd via *ret_pidfd. */
static int start_command(airlock_native *n, sandbox *b, const airlock_execution_command *cmd,
                         char *const *envp, const char *cwd, int in_r, int out_w, int err_w,
                         int exec_err_w, int *ret_pidfd, airlock_error *err)
{
	int64_t deadline = util_monotonic_ms() + n->cfg.start_budget_seconds * 1000;
	/* The starter's argv: its marker, then the command's (starter.h). */
	_cleanup_free_ char **sargv = calloc(cmd->argc + 2, sizeof(*sargv));
	if (!sargv)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "execute");
	sargv[0] = (char *)(uintptr_t)NATIVE_STARTER_ARGV0;
	for (size_t i = 0; i < cmd->argc; i++)
		sargv[i + 1] = cmd->argv[i];
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "execute");
	native_cmd_args ca = {
		.sync_fd = sv[1], .init_pidfd = b->init_pidfd,
		.stdin_fd = in_r, .stdout_fd = out_w, .stderr_fd = err_w, .exec_err_fd = exec_err_w,
		.starter_fd = n->starter_fd,
		.argv = sargv, .envp = envp, .cwd = cwd, .seccomp = &n->seccomp,
		.fsize_limit = (uint64_t)b->limits.workspace_bytes,
		.nofile = exec_sandbox_nofile(&b->limits),
		.last_cap = n->last_cap,
	};
	pid_t h = fork();
	if (h < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, e, "execute: fork");
	}
	if (h == 0) {
		close(sv[0]);
		native_cmd_main(&ca);
	}
	close(sv[1]);
	int r = host_cgroup_enter_cmd(b->cg, h, err);
	native_msg m = { 0 };
	if (r == 0 && native_send_msg(sv[0], NATIVE_MSG_GO) < 0)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno, "execute: sync");
	if (r == 0) {
		int rr = native_recv_msg(sv[0], deadline, &m);
		if (rr < 0 || m.kind != NATIVE_MSG_PID)
			r = native_child_error("execute: starting the command", rr, &m, err);
	}
	close(sv[0]);
	/* The starter exits right after reporting (or failing); reap it. A
	 * command it may have started before we gave up must not run
	 * unobserved: the cmd group is emptied. */
	if (r < 0) {
		kill(h, SIGKILL);
		host_cgroup_kill_cmd(b->cg, NATIVE_KILL_WAIT_MS, NULL);
	}
	while (waitpid(h, NULL, 0) < 0 && errno == EINTR)
		;
	if (r < 0)
		return r;
	int pfd = sys_pidfd_open((pid_t)m.value, 0);
	if (pfd < 0) {
		int e = errno;
		host_cgroup_kill_cmd(b->cg, NATIVE_KILL_WAIT_MS, NULL);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, e,
		                         "execute: pidfd of the command");
	}
	*ret_pidfd = pfd;
	return 0;
}

/* ---- the phases ------------------------------------------------------------ */

/* One execute's state: every phase reads and fills it, and exec_cleanup
 * releases whatever it holds, whichever phase failed. */
typedef struct execution {
	airlock_native *n;
	sandbox *b;
	const airlock_environment_handle *handle;
	const airlock_exec_request *req;
	const airlock_execution_command *cmd;
	airlock_execution_result *ret;
	int64_t start; /* monotonic ms at the call */
	int rootfd;    /* the volume's root (the volume's own: not closed here) */
	/* 0: stdin, 1: stdout, 2: stderr, 3: exec error report. */
	int pipes[4][2];
	exec_stream out, errs;
	int in_w; /* our end of stdin, non-blocking, until all of it is written */
	size_t in_off;
	airlock_snapshot before, after;
	int pidfd;
	char **envp;
	char *pwd;
	char cwd[AIRLOCK_PATH_MAX + 16];
	uint64_t oom0, pids0; /* the cgroup's counts at the start */
	exec_disk_watch disk;
	bool full;
	int64_t timeout_at, expiry_at;
	int64_t cmd_start, cmd_end; /* the command's own time (exec_start) */
	airlock_kill_reason kill_reason;
	bool armed; /* the kept group was armed before the walk after */
	siginfo_t si;
	int32_t report[2]; /* the exec report: (step, errno), or zeros */
} execution;

/* The walk before. */
static int exec_snapshot_before(execution *x, airlock_error *err)
{
	int r = host_volume_check_identity(x->b->vol, err);
	if (r < 0)
		return r;
	if (!native_kept_take(x->n, x->b, &x->before)) {
		r = snapshot_walk(x->rootfd, (size_t)x->b->limits.inodes_max + 16,
		                          AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &x->before, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int exec_cwd(execution *x, airlock_error *err)
{
	const airlock_execution_command *cmd = x->cmd;
	/* The working directory is resolved here, through the volume's own
	 * descriptor and while this execute holds the sandbox, so a symlink
	 * the sandbox planted is refused rather than followed. */
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
	return 0;
}

/* The sandbox's environment and this command's PWD. */
static int exec_environment(execution *x, airlock_error *err)
{
	sandbox *b = x->b;
	x->envp = calloc(b->n_env + 2, sizeof(char *));
	if (!x->envp)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "execute");
	memcpy(x->envp, b->envp, b->n_env * sizeof(char *));
	if (asprintf(&x->pwd, "PWD=%s", x->cwd) < 0) {
		x->pwd = NULL;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "execute");
	}
	x->envp[b->n_env] = x->pwd;
	return 0;
}

/* The pipes, and the counters as they stand before the command. */
static int exec_pipes(execution *x, airlock_error *err)
{
	for (int i = 0; i < 4; i++)
		if (pipe2(x->pipes[i], O_CLOEXEC) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "execute: pipes");
	int r;
	if ((r = host_cgroup_oom_kills(x->b->cg, &x->oom0, err)) < 0 ||
	    (r = host_cgroup_pids_max_events(x->b->cg, &x->pids0, err)) < 0 ||
	    (r = exec_disk_sample(x->b->vol, &x->disk, true, util_monotonic_ms(), &x->full, err)) < 0)
		return r;
	return 0;
}

static int exec_start(execution *x, airlock_error *err)
{
	sandbox *b = x->b;
	x->timeout_at = x->start + x->req->effective_timeout_ms;
	x->expiry_at = x->start + (x->req->expires_at_ms - util_now_ms());
	/* duration_ms is the command's own time: from here to the end of its
	 * output, not the walks and hashing around it. */
	x->cmd_start = util_monotonic_ms();
	/* Checked and started under one lock: a destroy that has marked the
	 * sandbox dead is never followed by a new command in it. */
	int r;
	pthread_mutex_lock(&b->start_lock);
	if (b->box.dead)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                      "environment %s was destroyed", x->handle->environment_id);
	else
		r = start_command(x->n, b, x->cmd, x->envp, x->cwd, x->pipes[0][0], x->pipes[1][1],
		                  x->pipes[2][1], x->pipes[3][1], &x->pidfd, err);
	pthread_mutex_unlock(&b->start_lock);
	/* The child ends of the pipes are the command's now (or nobody's). */
	for (int i = 0; i < 4; i++) {
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

/* What this round of the loop saw, for exec_kill_decide. */
static exec_observed exec_observe(execution *x, bool cap_hit, bool exited)
{
	sandbox *b = x->b;
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
		.destroyed = exec_box_destroyed(&x->n->boxes, &x->b->box),
	};
	o.oom_killed = host_cgroup_oom_kills(b->cg, &v, NULL) == 0 && v > x->oom0;
	o.pids_hit = host_cgroup_pids_max_events(b->cg, &v, NULL) == 0 && v > x->pids0;
	if (!exited) {
		/* Looked at, never read: it stays readable for every other
		 * execute in flight. */
		struct pollfd sp = { .fd = x->n->shutdown_efd, .events = POLLIN };
		o.shutdown = poll(&sp, 1, 0) > 0;
	}
	return o;
}

/* Write what stdin can take now; close it when done or refused. */
/* The loop: pump stdio, watch the command and the limits, kill once a
 * reason is found or the command exits, until its output ends. */
static int exec_pump(execution *x, airlock_error *err)
{
	bool exited = false, killed = false;
	int64_t exited_at = 0;
	for (;;) {
		struct pollfd p[6];
		int np = 0, i_out = -1, i_err = -1, i_in = -1, i_pid = -1;
		if (x->out.fd >= 0)
			p[i_out = np++] = (struct pollfd){ .fd = x->out.fd, .events = POLLIN };
		if (x->errs.fd >= 0)
			p[i_err = np++] = (struct pollfd){ .fd = x->errs.fd, .events = POLLIN };
		if (x->in_w >= 0)
			p[i_in = np++] = (struct pollfd){ .fd = x->in_w, .events = POLLOUT };
		if (!exited)
			p[i_pid = np++] = (struct pollfd){ .fd = x->pidfd, .events = POLLIN };
		/* Once a reason is set these stay readable; polling them then
		 * would spin. */
		if (x->req->cancel && !x->kill_reason)
			p[np++] = (struct pollfd){ .fd = airlock_cancel_fd(x->req->cancel),
				                   .events = POLLIN };
		if (!x->kill_reason)
			p[np++] = (struct pollfd){ .fd = x->n->shutdown_efd, .events = POLLIN };
		if (exited && x->out.fd < 0 && x->errs.fd < 0) {
			x->cmd_end = util_monotonic_ms();
			return 0;
		}
		/* Every writer is dead once the group is empty; a copy of a pipe
		 * held a moment longer by a concurrent fork must not hang us. */
		if (exited && killed && util_monotonic_ms() - exited_at > NATIVE_DRAIN_MS) {
			x->cmd_end = util_monotonic_ms();
			return 0;
		}
		poll(p, (nfds_t)np, NATIVE_POLL_MS);

		bool cap_hit = false;
		if (i_out >= 0 && p[i_out].revents && exec_stream_read(&x->out))
			cap_hit = true;
		if (i_err >= 0 && p[i_err].revents && exec_stream_read(&x->errs))
			cap_hit = true;
		if (i_in >= 0 && p[i_in].revents)
			exec_stdin_feed(&x->in_w, x->cmd, &x->in_off);
		if (i_pid >= 0 && p[i_pid].revents &&
		    waitid((idtype_t)P_PIDFD, (id_t)x->pidfd, &x->si, WEXITED | WNOHANG) == 0 &&
		    x->si.si_pid) {
			exited = true;
			exited_at = util_monotonic_ms();
		}

		/* Reclaimable kernel memory is freed before the command can meet
		 * the limit with it (host_cgroup_reclaim_kernel): MEMORY is for
		 * memory reclaim could not free. A failure to read leaves it to
		 * the kernel, as before. */
		if (!exited && !x->kill_reason)
			(void)host_cgroup_reclaim_kernel(x->b->cg, NULL);
		/* The first reason found wins; later ones are consequences of
		 * the kill. */
		if (!x->kill_reason) {
			exec_observed o = exec_observe(x, cap_hit, exited);
			x->kill_reason = exec_kill_decide(&o);
		}
		/* Every process the command started dies with it or with the
		 * kill: nothing runs unobserved between commands. */
		if ((x->kill_reason || exited) && !killed) {
			killed = true;
			int r = host_cgroup_kill_cmd(x->b->cg, NATIVE_KILL_WAIT_MS, err);
			if (r < 0)
				return r;
		}
	}
}

/* The exec report, the walk after, and the rule at exit. */
static int exec_after(execution *x, airlock_error *err)
{
	if (x->in_w >= 0) {
		close(x->in_w);
		x->in_w = -1;
	}
	/* The exec report: EOF means the command was executed. */
	fcntl(x->pipes[3][0], F_SETFL, O_NONBLOCK);
	if (read(x->pipes[3][0], x->report, sizeof(x->report)) != sizeof(x->report))
		x->report[1] = 0;

	/* The walk after, before the reason: the rule at exit for DISK asks
	 * whether the command changed the workspace. */
	int r = host_volume_check_identity(x->b->vol, err);
	if (r < 0)
		return r;
	/* Armed before the walk: a change after this point, by anyone, is an
	 * event; the command's processes are all gone by now. */
	x->armed = native_kept_arm(x->b, x->rootfd);
	r = snapshot_walk(x->rootfd, (size_t)x->b->limits.inodes_max + 16,
	                          AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &x->after, err);
	if (r < 0)
		return r;
	if (!x->kill_reason) {
		/* The rule at exit (kill.h): on the state after every process is
		 * gone. Its costlier observations are made only when the cheaper
		 * ones leave the question open. */
		exec_observed o = {
			.finished = true,
			.never_ran = x->report[1] != 0,
			.exit_failed = x->si.si_code != CLD_EXITED || x->si.si_status != 0,
		};
		if (!o.never_ran && o.exit_failed) {
			o.full_after = host_volume_full(x->b->vol, &x->full, NULL) == 0 && x->full;
			o.changed = o.full_after && snapshot_differs(&x->before, &x->after);
		}
		x->kill_reason = exec_kill_decide(&o);
	}
	return 0;
}

/* The result: the reason or the exit code, the output, files_changed. */
static int exec_result(execution *x, airlock_error *err)
{
	airlock_execution_result *ret = x->ret;
	const airlock_execution_command *cmd = x->cmd;
	if (x->kill_reason) {
		ret->killed_by = x->kill_reason;
		ret->has_exit_code = false;
	} else if (x->report[1]) {
		/* Like a shell: the command never ran, status 127, and why on
		 * stderr. The names are quoted (control bytes escaped, a long one
		 * cut with its length shown), so the message always fits: an
		 * argv[0] of any size never turns it into silence. */
		char msg[AIRLOCK_WORKSPACE_QUOTE_MAX + 256], q[AIRLOCK_WORKSPACE_QUOTE_MAX];
		int len = x->report[0] == NATIVE_STEP_CWD
		                  ? snprintf(msg, sizeof(msg), "airlock: working directory %s: %s\n",
		                             airlock_workspace_quote(x->cwd, strlen(x->cwd), q),
		                             strerror(x->report[1]))
		          : x->report[0] == NATIVE_STEP_EXEC
		                  ? snprintf(msg, sizeof(msg), "airlock: cannot execute %s: %s\n",
		                             airlock_workspace_quote(cmd->argv[0], strlen(cmd->argv[0]), q),
		                             strerror(x->report[1]))
		                  : snprintf(msg, sizeof(msg), "airlock: starting the command: %s: %s\n",
		                             native_step_name(x->report[0]), strerror(x->report[1]));
		if (len < 0)
			len = 0;
		/* Bounded above; should it ever not be, the cut message still says why. */
		util_buf_append(&x->errs.buf, msg,
		                (size_t)len < sizeof(msg) ? (size_t)len : sizeof(msg) - 1);
		ret->has_exit_code = true;
		ret->exit_code = 127;
	} else {
		ret->has_exit_code = true;
		/* A signal the service did not send (the program crashed or killed
		 * itself) is an exit of its own: the shell's 128 + signal. */
		ret->exit_code = x->si.si_code == CLD_EXITED ? x->si.si_status : 128 + x->si.si_status;
	}
	int r = exec_result_common(ret, &x->out, &x->errs, &x->before, &x->after,
	                           x->req->files_changed_max, &x->b->limits, x->rootfd,
	                           x->cmd_end - x->cmd_start, err);
	if (r < 0)
		return r;
	if (r == 0 && x->armed)
		native_kept_store(x->n, x->b, &x->after);
	return r;
}

/* The one cleanup, whichever phase failed (r < 0) or none. */
static void exec_cleanup(execution *x, int r)
{
	if (x->pidfd >= 0) {
		if (r < 0) {
			host_cgroup_kill_cmd(x->b->cg, NATIVE_KILL_WAIT_MS, NULL);
			/* The group reads empty as soon as the command leaves it, a
			 * moment before the kernel makes it reapable; and the command
			 * is the service's own child (CLONE_PARENT), so a waitid that
			 * came too early would leave the service a zombie. Kill it by
			 * pidfd too (the group kill may have failed) and wait for the
			 * pidfd to say it exited, bounded like every kill wait. */
			sys_pidfd_send_signal(x->pidfd, SIGKILL, NULL, 0);
			struct pollfd p = { .fd = x->pidfd, .events = POLLIN };
			poll(&p, 1, NATIVE_KILL_WAIT_MS);
		}
		waitid((idtype_t)P_PIDFD, (id_t)x->pidfd, &x->si, WEXITED | WNOHANG);
		close(x->pidfd);
	}
	for (int i = 0; i < 4; i++)
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
	free(x->envp);
	free(x->pwd);
	if (exec_boxes_leave(&x->n->boxes, &x->b->box))
		native_sandbox_release(x->n, x->b);
}

typedef struct exec_phase {
	const char *point;    /* "execute.<phase>": its name for util_fault */
	airlock_errclass cls; /* the class its own failure has */
	const char *what;     /* its own failure message's first words */
	int (*run)(execution *x, airlock_error *err);
} exec_phase;

static const exec_phase exec_phases[] = {
	{ "execute.snapshot_before", AIRLOCK_ERR_SYSTEM, "files_changed", exec_snapshot_before },
	{ "execute.cwd", AIRLOCK_ERR_WORKSPACE_ESCAPE, "working_directory", exec_cwd },
	{ "execute.environment", AIRLOCK_ERR_SYSTEM, "execute", exec_environment },
	{ "execute.pipes", AIRLOCK_ERR_SYSTEM, "execute: pipes", exec_pipes },
	{ "execute.start", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "execute: starting the command",
	  exec_start },
	{ "execute.pump", AIRLOCK_ERR_SYSTEM, "cgroup: kill", exec_pump },
	{ "execute.after", AIRLOCK_ERR_SYSTEM, "files_changed", exec_after },
	{ "execute.result", AIRLOCK_ERR_SYSTEM, "execute", exec_result },
};

/* The one place a phase runs: a fault-injection build may fail it first,
 * the way its own failure fails (util/fault.h). */
static int exec_run(execution *x, const exec_phase *ph, airlock_error *err)
{
	if (util_fault(ph->point))
		return airlock_error_set(err, ph->cls, EIO, "%s (fault injected at %s)", ph->what,
		                         ph->point);
	return ph->run(x, err);
}

int native_execute(void *ctx, const airlock_environment_handle *handle,
                   const airlock_exec_request *req, airlock_execution_result *ret,
                   airlock_error *err)
{
	airlock_native *n = ctx;
	int64_t start = util_monotonic_ms();
	exec_box *box = NULL;
	int r = exec_boxes_enter(&n->boxes, handle, &box, err);
	if (r < 0)
		return r;
	sandbox *b = (sandbox *)box;

	execution x = {
		.n = n, .b = b, .handle = handle, .req = req, .cmd = req->command, .ret = ret,
		.start = start,
		.rootfd = host_volume_root_fd(b->vol),
		.pipes = { { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 } },
		.in_w = -1,
		.pidfd = -1,
	};
	exec_streams_init(&x.out, &x.errs, req);
	for (size_t i = 0; i < ARRAY_SIZE(exec_phases) && r == 0; i++)
		r = exec_run(&x, &exec_phases[i], err);
	exec_cleanup(&x, r);
	return r;
}
