/* SPDX-License-Identifier: Apache-2.0 */
/* Execute, once for every mechanism (execute.h). */
#include "exec/execute.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/port/workspace.h"
#include "util/fault.h"
#include "util/spawn.h"
#include "util/util.h"

/* The walk before: the mechanism's kept snapshot, or a walk. */
static int exec_snapshot_before(exec_run *x, airlock_error *err)
{
	int r = host_volume_check_identity(x->vol, err);
	if (r < 0)
		return r;
	if (x->hooks->kept_take && x->hooks->kept_take(x))
		return 0;
	return snapshot_walk(x->rootfd, (size_t)x->limits->inodes_max + 16,
	                     AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &x->before, err);
}

static int exec_cwd(exec_run *x, airlock_error *err)
{
	const airlock_execution_command *cmd = x->cmd;
	/* The working directory is resolved here, through the volume's own
	 * descriptor and while this execute holds the sandbox, so a symlink
	 * the sandbox planted is refused rather than followed. */
	if (strcmp(cmd->working_directory, ".") != 0) {
		_cleanup_free_ char *resolved = NULL;
		int r = airlock_workspace_resolve(x->box->ws, cmd->working_directory,
		                                  strlen(cmd->working_directory), &resolved, err);
		if (r < 0)
			return r;
	}
	if (exec_make_cwd(cmd->working_directory, x->cwd, sizeof(x->cwd)) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_WORKSPACE_ESCAPE, 0,
		                         "working_directory is too long");
	return x->hooks->cwd_check ? x->hooks->cwd_check(x, err) : 0;
}

static int exec_prepare(exec_run *x, airlock_error *err)
{
	return x->hooks->prepare(x, err);
}

/* The pipes, and the counters as they stand before the command. */
static int exec_pipes(exec_run *x, airlock_error *err)
{
	for (int i = 0; i < 3; i++)
		if (pipe2(x->pipes[i], O_CLOEXEC) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "the command's pipes");
	int r;
	if ((r = host_cgroup_oom_kills(x->cg, &x->oom0, err)) < 0 ||
	    (r = exec_disk_sample(x->vol, &x->disk, true, util_monotonic_ms(), &x->full, err)) < 0)
		return r;
	return x->hooks->baselines ? x->hooks->baselines(x, err) : 0;
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int exec_start(exec_run *x, airlock_error *err)
{
	x->timeout_at = x->start + x->req->effective_timeout_ms;
	x->expiry_at = x->start + (x->req->expires_at_ms - util_now_ms());
	/* duration_ms is the command's own time: from here to the end of its
	 * output, not the walks and hashing around it. */
	x->cmd_start = util_monotonic_ms();
	/* Checked and started under one lock: a destroy that has marked the
	 * sandbox dead is never followed by a new command in it. */
	int r = 0;
	pthread_mutex_lock(&x->box->start_lock);
	if (x->box->dead)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                      "environment %s was destroyed", x->handle->environment_id);
	else
		r = x->hooks->start(x, x->pipes[0][0], x->pipes[1][1], x->pipes[2][1], err);
	pthread_mutex_unlock(&x->box->start_lock);
	/* The child ends of the pipes are the command's now (or nobody's). */
	for (int i = 0; i < 3; i++) {
		close(x->pipes[i][i == 0 ? 0 : 1]);
		x->pipes[i][i == 0 ? 0 : 1] = -1;
	}
	if (r < 0)
		return r;
	if (x->never_ran)
		x->reaped = true; /* nothing was started */
	x->out.fd = x->pipes[1][0];
	x->errs.fd = x->pipes[2][0];
	x->pipes[1][0] = x->pipes[2][0] = -1;
	set_nonblock(x->out.fd);
	set_nonblock(x->errs.fd);
	x->in_w = x->pipes[0][1];
	x->pipes[0][1] = -1;
	set_nonblock(x->in_w);
	if (!x->cmd->has_stdin || x->cmd->stdin_len == 0) {
		close(x->in_w);
		x->in_w = -1;
	}
	return 0;
}

/* What this round of the loop saw, for exec_kill_decide. */
static exec_observed exec_observe(exec_run *x, bool cap_hit, bool exited)
{
	int64_t now = util_monotonic_ms();
	uint64_t v = 0;
	if (!exited && exec_disk_sample(x->vol, &x->disk, false, now, &x->full, NULL) < 0)
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
		 * cancellation, never an exit of its own. */
		.destroyed = exec_box_destroyed(x->boxes, x->box),
	};
	o.oom_killed = host_cgroup_oom_kills(x->cg, &v, NULL) == 0 && v > x->oom0;
	if (!exited) {
		/* Looked at, never read: it stays readable for every other
		 * execute in flight. */
		struct pollfd sp = { .fd = x->shutdown_efd, .events = POLLIN };
		o.shutdown = poll(&sp, 1, 0) > 0;
	}
	if (x->hooks->observe)
		x->hooks->observe(x, &o, exited);
	return o;
}

static void exec_reap(exec_run *x, int64_t deadline)
{
	spawn_wait(x->pidfd, deadline, &x->status);
	x->reaped = true;
	if (x->hooks->reaped)
		x->hooks->reaped(x);
}

/* The loop: pump stdio, watch the command and the limits, kill once a
 * reason is found (or the mechanism's hook says), until its output ends. */
static int exec_pump(exec_run *x, airlock_error *err)
{
	if (x->never_ran) {
		x->cmd_end = x->cmd_start;
		return 0;
	}
	bool exited = false, killed = false;
	int64_t killed_at = 0, exited_at = 0;
	for (;;) {
		struct pollfd p[7];
		int np = 0, i_out = -1, i_err = -1, i_in = -1, i_pid = -1, i_watch = -1;
		if (x->out.fd >= 0)
			p[i_out = np++] = (struct pollfd){ .fd = x->out.fd, .events = POLLIN };
		if (x->errs.fd >= 0)
			p[i_err = np++] = (struct pollfd){ .fd = x->errs.fd, .events = POLLIN };
		if (x->in_w >= 0)
			p[i_in = np++] = (struct pollfd){ .fd = x->in_w, .events = POLLOUT };
		if (!exited)
			p[i_pid = np++] = (struct pollfd){ .fd = x->pidfd, .events = POLLIN };
		int wfd = x->hooks->watch_fd ? x->hooks->watch_fd(x) : -1;
		if (wfd >= 0)
			p[i_watch = np++] = (struct pollfd){ .fd = wfd, .events = POLLIN };
		/* Once a reason is set, or the command has exited, these would
		 * stay readable and spin the loop. */
		if (x->req->cancel && !x->kill_reason && !exited)
			p[np++] = (struct pollfd){ .fd = airlock_cancel_fd(x->req->cancel),
				                   .events = POLLIN };
		if (!x->kill_reason && !exited)
			p[np++] = (struct pollfd){ .fd = x->shutdown_efd, .events = POLLIN };
		if (exited && x->out.fd < 0 && x->errs.fd < 0)
			break;
		if (exited && util_monotonic_ms() - exited_at > EXEC_DRAIN_MS)
			break;
		poll(p, (nfds_t)np, EXEC_POLL_MS);

		bool cap_hit = false;
		if (i_out >= 0 && p[i_out].revents && exec_stream_read(&x->out))
			cap_hit = true;
		if (i_err >= 0 && p[i_err].revents && exec_stream_read(&x->errs))
			cap_hit = true;
		if (i_in >= 0 && p[i_in].revents)
			exec_stdin_feed(&x->in_w, x->cmd, &x->in_off);
		if (i_watch >= 0 && p[i_watch].revents)
			x->hooks->watch_fired(x);
		if (i_pid >= 0 && p[i_pid].revents) {
			exec_reap(x, 0);
			exited = true;
			exited_at = util_monotonic_ms();
		}
		if (x->hooks->round)
			x->hooks->round(x, exited);
		/* The first reason found wins; later ones are consequences of
		 * the kill. */
		if (!x->kill_reason) {
			exec_observed o = exec_observe(x, cap_hit, exited);
			x->kill_reason = exec_kill_decide(&o);
		}
		if (!killed) {
			int r = x->hooks->kill(x, exited, err);
			if (r < 0)
				return r;
			if (r > 0) {
				killed = true;
				killed_at = util_monotonic_ms();
			}
		}
		/* A process that outlives its kill by the drain bound (a runtime
		 * that no longer answers) is ended and reaped here. */
		if (killed && !exited && util_monotonic_ms() - killed_at > EXEC_DRAIN_MS) {
			exec_reap(x, 0);
			exited = true;
			exited_at = util_monotonic_ms();
		}
	}
	x->cmd_end = util_monotonic_ms();
	return 0;
}

/* The mechanism's settling, the walk after, and the rule at exit. */
static int exec_after(exec_run *x, airlock_error *err)
{
	if (x->in_w >= 0) {
		close(x->in_w);
		x->in_w = -1;
	}
	int r = x->hooks->settle ? x->hooks->settle(x, err) : 0;
	if (r < 0)
		return r;
	/* The walk after, before the reason: the rule at exit for DISK asks
	 * whether the command changed the workspace. */
	r = host_volume_check_identity(x->vol, err);
	if (r < 0)
		return r;
	/* Armed before the walk: a change after this point, by anyone, is an
	 * event; the command's processes are all gone by now. */
	x->armed = x->hooks->kept_arm && x->hooks->kept_arm(x);
	r = snapshot_walk(x->rootfd, (size_t)x->limits->inodes_max + 16,
	                  AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &x->after, err);
	if (r < 0)
		return r;
	if (!x->kill_reason) {
		/* The rule at exit (kill.h): on the state after every process is
		 * gone. Its costlier observations are made only when the cheaper
		 * ones leave the question open. */
		exec_observed o = {
			.finished = true,
			.never_ran = x->never_ran != EXEC_RAN,
			.exit_failed = !WIFEXITED(x->status) || WEXITSTATUS(x->status) != 0,
		};
		if (!o.never_ran && o.exit_failed) {
			o.full_after = host_volume_full(x->vol, &x->full, NULL) == 0 && x->full;
			o.changed = o.full_after && snapshot_differs(&x->before, &x->after);
		}
		x->kill_reason = exec_kill_decide(&o);
	}
	return 0;
}

/* Like a shell: the command never ran, and why goes on its stderr. The
 * names are quoted (control bytes escaped, a long one cut with its length
 * shown), so the message always fits: an argv[0] of any size never turns
 * it into silence. */
static void never_ran_message(exec_run *x)
{
	char msg[AIRLOCK_WORKSPACE_QUOTE_MAX + 256], q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	const char *e = strerror(x->never_ran_errno);
	int len;
	switch (x->never_ran) {
	case EXEC_NEVER_RAN_CWD:
		len = snprintf(msg, sizeof(msg), "airlock: working directory %s: %s\n",
		               airlock_workspace_quote(x->cwd, strlen(x->cwd), q), e);
		break;
	case EXEC_NEVER_RAN_EXEC:
		len = snprintf(msg, sizeof(msg), "airlock: cannot execute %s: %s\n",
		               airlock_workspace_quote(x->cmd->argv[0], strlen(x->cmd->argv[0]), q),
		               e);
		break;
	case EXEC_RAN:
	case EXEC_NEVER_RAN_STEP:
	default:
		len = snprintf(msg, sizeof(msg), "airlock: starting the command: %s: %s\n",
		               x->never_ran_step ? x->never_ran_step : "?", e);
		break;
	}
	if (len < 0)
		len = 0;
	/* Bounded above; should it ever not be, the cut message still says why. */
	util_buf_append(&x->errs.buf, msg, (size_t)len < sizeof(msg) ? (size_t)len : sizeof(msg) - 1);
}

/* The result: the reason or the exit code, the output, files_changed. */
static int exec_result(exec_run *x, airlock_error *err)
{
	airlock_execution_result *ret = x->ret;
	if (x->kill_reason) {
		ret->killed_by = x->kill_reason;
		ret->has_exit_code = false;
	} else if (x->never_ran) {
		never_ran_message(x);
		ret->has_exit_code = true;
		ret->exit_code = 127;
	} else {
		/* A signal the service did not send (the program crashed or killed
		 * itself) is an exit of its own: the shell's 128 + signal. */
		ret->has_exit_code = true;
		ret->exit_code = WIFEXITED(x->status) ? WEXITSTATUS(x->status)
		                                      : 128 + WTERMSIG(x->status);
	}
	int r = exec_result_common(ret, &x->out, &x->errs, &x->before, &x->after,
	                           x->req->files_changed_max, x->limits, x->rootfd,
	                           x->cmd_end - x->cmd_start, err);
	if (r == 0 && x->armed && x->hooks->kept_store)
		x->hooks->kept_store(x);
	return r;
}

/* The one cleanup, whichever phase failed or none. */
static void exec_cleanup(exec_run *x)
{
	if (x->pidfd >= 0) {
		if (!x->reaped) {
			/* A phase failed with the command running: end it, and reap
			 * what was started (bounded, killed by its pidfd too). */
			x->hooks->abort(x);
			spawn_wait(x->pidfd, util_monotonic_ms() + SPAWN_KILL_WAIT_MS, NULL);
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
	if (x->hooks->fini)
		x->hooks->fini(x);
	if (exec_boxes_leave(x->boxes, x->box))
		x->hooks->release(x);
}

typedef struct exec_phase {
	const char *point;    /* "execute.<phase>": its name for util_fault */
	airlock_errclass cls; /* the class its own failure has */
	const char *what;     /* its own failure message's first words */
	int (*run)(exec_run *x, airlock_error *err);
	bool needs_prepare; /* skipped for a mechanism without a prepare hook */
} exec_phase;

static const exec_phase exec_phases[] = {
	{ "execute.snapshot_before", AIRLOCK_ERR_SYSTEM, "files_changed", exec_snapshot_before, false },
	{ "execute.cwd", AIRLOCK_ERR_WORKSPACE_ESCAPE, "working_directory", exec_cwd, false },
	{ "execute.environment", AIRLOCK_ERR_SYSTEM, "the command's environment", exec_prepare, true },
	{ "execute.pipes", AIRLOCK_ERR_SYSTEM, "the command's pipes", exec_pipes, false },
	{ "execute.start", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "starting the command",
	  exec_start, false },
	{ "execute.pump", AIRLOCK_ERR_SYSTEM, "the command's output", exec_pump, false },
	{ "execute.after", AIRLOCK_ERR_SYSTEM, "files_changed", exec_after, false },
	{ "execute.result", AIRLOCK_ERR_SYSTEM, "the result", exec_result, false },
};

int exec_run_command(exec_run *x, airlock_error *err)
{
	x->cmd = x->req->command;
	x->rootfd = host_volume_root_fd(x->vol);
	for (int i = 0; i < 3; i++)
		x->pipes[i][0] = x->pipes[i][1] = -1;
	x->in_w = -1;
	x->pidfd = -1;
	exec_streams_init(&x->out, &x->errs, x->req);
	x->errs.hold_prefix = x->errs_hold_prefix;
	int r = 0;
	for (size_t i = 0; i < ARRAY_SIZE(exec_phases) && r == 0; i++) {
		const exec_phase *ph = &exec_phases[i];
		if (ph->needs_prepare && !x->hooks->prepare)
			continue;
		/* The one place a phase runs: a fault-injection build may fail
		 * it first, the way its own failure fails (util/fault.h). */
		if (util_fault(ph->point))
			r = airlock_error_set(err, ph->cls, EIO, "%s (fault injected at %s)", ph->what,
			                      ph->point);
		else
			r = ph->run(x, err);
	}
	exec_cleanup(x);
	return r;
}
