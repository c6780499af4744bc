/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Execute on the native mechanism: the hooks of the one execute
 * (exec/execute.h). A command is started by the starter inside the
 * sandbox's namespaces (start_command), killed with its cgroup, observed
 * through its pids cgroup's max events; its environment is the sandbox's
 * with this command's PWD; the exec report says whether it ran; the walk
 * before may be the snapshot kept.c kept.
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

#include "exec/execute.h"
#include "exec/io.h"
#include "exec/kobjects.h"
#include "exec/kill.h"
#include "exec/native/service.h"
#include "exec/starter/starter.h"
#include "util/fault.h"
#include "util/syscalls.h"
#include "util/util.h"

/* ---- starting the command ---------------------------------------------------- */

/* The launcher's placement, made by spawn before it runs anything: the
 * sandbox's command cgroup, so the launcher and the command it starts are
 * charged there and die with the group. */
typedef struct cmd_place {
	host_cgroup *cg;
	airlock_error *err;
	bool failed; /* err is set */
} cmd_place;

static int cmd_enter_cgroup(pid_t pid, void *ctx)
{
	cmd_place *pl = ctx;
	int r = host_cgroup_enter_cmd(pl->cg, pid, pl->err);
	pl->failed = r < 0;
	return r;
}

static int cmd_child(void *ctx, int report_fd)
{
	native_cmd_main(ctx, report_fd);
}

/* Start the command in the sandbox; returns its pidfd via *ret_pidfd. */
static int start_command(airlock_native *n, sandbox *b, const airlock_execution_command *cmd,
                         char *const *envp, const char *cwd, int in_r, int out_w, int err_w,
                         int exec_err_w, int *ret_pidfd, airlock_error *err)
{
	int64_t deadline = util_monotonic_ms() + n->cfg.start_budget_seconds * 1000;
	/* The starter's argv: its marker, then the command's (starter.h). */
	_cleanup_free_ char **sargv = calloc(cmd->argc + 2, sizeof(*sargv));
	if (!sargv)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the starter's arguments");
	sargv[0] = (char *)(uintptr_t)NATIVE_STARTER_ARGV0;
	for (size_t i = 0; i < cmd->argc; i++)
		sargv[i + 1] = cmd->argv[i];
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "the launcher's sync socket");
	native_cmd_args ca = {
		.sync_fd = sv[1], .init_pidfd = b->init_pidfd,
		.stdin_fd = in_r, .stdout_fd = out_w, .stderr_fd = err_w, .exec_err_fd = exec_err_w,
		.starter_fd = n->starter_fd,
		.argv = sargv, .envp = envp, .cwd = cwd, .seccomp = &n->seccomp,
		.fsize_limit = (uint64_t)b->limits.workspace_bytes,
		.nofile = exec_sandbox_nofile(&b->limits),
		.last_cap = n->last_cap,
	};
	/* A fork (the launcher enters the sandbox's namespaces by setns, not
	 * by new ones), held by spawn until it is in the command cgroup;
	 * asynchronous, since it reports the command's pid on the sync socket
	 * and then exits. */
	cmd_place pl = { .cg = b->cg, .err = err };
	/* Every descriptor the launcher and the command use (native_cmd_main):
	 * spawn closes all others in it before anything, so neither holds the
	 * service's (its end of the sync socket, other commands' pipes). */
	const int keep[] = { ca.sync_fd, ca.init_pidfd, ca.stdin_fd, ca.stdout_fd,
		             ca.stderr_fd, ca.exec_err_fd, ca.starter_fd };
	const spawn_options so = {
		.child_fn = cmd_child, .child_fn_ctx = &ca,
		.parent_hook = cmd_enter_cgroup, .parent_hook_ctx = &pl,
		.keep = keep, .n_keep = ARRAY_SIZE(keep),
		.async = true,
	};
	_cleanup_spawn_child_ spawn_child h = SPAWN_CHILD_NONE;
	spawn_failure sf;
	int r = spawn_start(&so, &h, &sf);
	close(sv[1]);
	native_msg m = { 0 };
	if (r < 0 && !pl.failed)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -r, "starting the command: %s",
		                      spawn_failure_step(&sf, NULL));
	if (r == 0) {
		int rr = native_recv_msg(sv[0], deadline, &m);
		if (rr < 0 || m.kind != NATIVE_MSG_PID)
			r = native_child_error("starting the command", rr, &m, &h, deadline,
			                       err);
	}
	close(sv[0]);
	/* The launcher exits right after reporting (or failing): reaped. A
	 * command it may have started before we gave up must not run
	 * unobserved: the cmd group is emptied. */
	if (r < 0) {
		spawn_child_kill_reap(&h);
		host_cgroup_kill_cmd(b->cg, NATIVE_KILL_WAIT_MS, NULL);
		return r;
	}
	spawn_child_reap(&h);
	int pfd = sys_pidfd_open((pid_t)m.value, 0);
	if (pfd < 0) {
		int e = errno;
		host_cgroup_kill_cmd(b->cg, NATIVE_KILL_WAIT_MS, NULL);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, e,
		                         "the pidfd of the command");
	}
	*ret_pidfd = pfd;
	return 0;
}

/* ---- the hooks of the one execute (exec/execute.h) ------------------------- */

/* What a native execute holds beyond the common run. */
typedef struct native_exec {
	airlock_native *n;
	sandbox *b;
	char **envp;
	char *pwd;
	int report[2];          /* the exec report pipe: (step, errno), or EOF once executed */
	uint64_t pids0;         /* the pids cgroup's max events at the start */
} native_exec;

#define NX(x) ((native_exec *)(x)->state)

static bool nx_kept_take(exec_run *x)
{
	return native_kept_take(NX(x)->n, NX(x)->b, &x->before);
}

/* The sandbox's environment and this command's PWD. */
static int nx_prepare(exec_run *x, airlock_error *err)
{
	native_exec *nx = NX(x);
	sandbox *b = nx->b;
	nx->envp = calloc(b->n_env + 2, sizeof(char *));
	if (!nx->envp)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the command's environment");
	memcpy(nx->envp, b->envp, b->n_env * sizeof(char *));
	if (asprintf(&nx->pwd, "PWD=%s", x->cwd) < 0) {
		nx->pwd = NULL;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the command's environment");
	}
	nx->envp[b->n_env] = nx->pwd;
	return 0;
}

/* The exec report's pipe, and the pids count before the command. */
static int nx_baselines(exec_run *x, airlock_error *err)
{
	if (pipe2(NX(x)->report, O_CLOEXEC) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "the exec report's pipe");
	return host_cgroup_pids_max_events(x->cg, &NX(x)->pids0, err);
}

static int nx_start(exec_run *x, int in_r, int out_w, int err_w, airlock_error *err)
{
	native_exec *nx = NX(x);
	int r = start_command(nx->n, nx->b, x->cmd, nx->envp, x->cwd, in_r, out_w, err_w,
	                      nx->report[1], &x->pidfd, err);
	/* The report's write end is the command's now (or nobody's). */
	close(nx->report[1]);
	nx->report[1] = -1;
	return r;
}

/* Reclaimable kernel memory is freed before the command can meet the limit
 * with it (host_cgroup_reclaim_kernel): MEMORY is for memory reclaim could
 * not free. A failure to read leaves it to the kernel. */
static void nx_round(exec_run *x, bool exited)
{
	if (!exited && !x->kill_reason)
		(void)host_cgroup_reclaim_kernel(x->cg, NULL);
}

static void nx_observe(exec_run *x, exec_observed *o, bool exited)
{
	(void)exited;
	uint64_t v = 0;
	o->pids_hit = host_cgroup_pids_max_events(x->cg, &v, NULL) == 0 && v > NX(x)->pids0;
}

/* Every process the command started dies with it or with the kill: nothing
 * runs unobserved between commands. */
static int nx_kill(exec_run *x, bool exited, airlock_error *err)
{
	if (!x->kill_reason && !exited)
		return 0;
	int r = host_cgroup_kill_cmd(x->cg, NATIVE_KILL_WAIT_MS, err);
	return r < 0 ? r : 1;
}

/* The exec report: EOF means the command was executed. */
static int nx_settle(exec_run *x, airlock_error *err)
{
	(void)err;
	int32_t report[2] = { 0, 0 };
	int fd = NX(x)->report[0];
	fcntl(fd, F_SETFL, O_NONBLOCK);
	if (read(fd, report, sizeof(report)) != sizeof(report) || report[1] == 0)
		return 0;
	x->never_ran = report[0] == NATIVE_STEP_CWD    ? EXEC_NEVER_RAN_CWD
	               : report[0] == NATIVE_STEP_EXEC ? EXEC_NEVER_RAN_EXEC
	                                               : EXEC_NEVER_RAN_STEP;
	x->never_ran_errno = report[1];
	x->never_ran_step = native_step_name(report[0]);
	return 0;
}

static bool nx_kept_arm(exec_run *x)
{
	return native_kept_arm(NX(x)->b, x->rootfd);
}

static void nx_kept_store(exec_run *x)
{
	native_kept_store(NX(x)->n, NX(x)->b, &x->after);
}

/* The group reads empty as soon as the command leaves it, a moment before
 * the kernel makes it reapable, and the command is the service's own child
 * (CLONE_PARENT): the group is killed, then the runner kills it by pidfd
 * too and waits for it, bounded, so the service is left no zombie. */
static void nx_abort(exec_run *x)
{
	host_cgroup_kill_cmd(x->cg, NATIVE_KILL_WAIT_MS, NULL);
}

static void nx_fini(exec_run *x)
{
	native_exec *nx = NX(x);
	for (int i = 0; i < 2; i++)
		if (nx->report[i] >= 0)
			close(nx->report[i]);
	free(nx->envp);
	free(nx->pwd);
}

static void nx_release(exec_run *x)
{
	airlock_error derr;
	exec_boxes_release(&NX(x)->n->m.boxes, &NX(x)->b->box, &native_box_ops, NX(x)->n, &derr);
}

static const exec_hooks native_exec_hooks = {
	.kept_take = nx_kept_take,
	.prepare = nx_prepare,
	.baselines = nx_baselines,
	.start = nx_start,
	.round = nx_round,
	.observe = nx_observe,
	.kill = nx_kill,
	.settle = nx_settle,
	.kept_arm = nx_kept_arm,
	.kept_store = nx_kept_store,
	.abort = nx_abort,
	.fini = nx_fini,
	.release = nx_release,
};

int native_execute(void *ctx, const airlock_environment_handle *handle,
                   const airlock_exec_request *req, airlock_execution_result *ret,
                   airlock_error *err)
{
	airlock_native *n = ctx;
	int64_t start = util_monotonic_ms();
	exec_box *box = NULL;
	int r = exec_boxes_enter(&n->m.boxes, handle, &box, err);
	if (r < 0)
		return r;
	sandbox *b = (sandbox *)box;
	native_exec nx = { .n = n, .b = b, .report = { -1, -1 } };
	exec_run x = {
		.hooks = &native_exec_hooks, .mech = n, .state = &nx,
		.boxes = &n->m.boxes, .box = box, .vol = b->vol, .cg = b->cg, .limits = &b->limits,
		.shutdown_efd = n->m.shutdown_efd,
		.handle = handle, .req = req, .ret = ret, .start = start,
	};
	return exec_run_command(&x, err);
}
