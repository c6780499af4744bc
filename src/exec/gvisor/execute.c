/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Execute on the gvisor mechanism: the hooks of the one execute
 * (exec/execute.h). A command is `runsc exec` of `guest exec --seccomp HEX
 * -- ARGV` as the sandbox user; it is killed through the runtime
 * (gv_kill_commands); its processes are counted by the runtime (`runsc
 * events --stats`) and the host's tasks; the sentry's death ends the
 * sandbox, and after a kill the runtime is given time to tear the
 * processes down.
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
#include "exec/execute.h"
#include "exec/io.h"
#include "exec/kill.h"
#include "util/fault.h"
#include "util/syscalls.h"
#include "util/util.h"

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

/* What a gvisor execute holds beyond the common run. */
typedef struct gv_exec {
	airlock_gvisor *g;
	gv_sandbox *b;
	uint64_t tasks0;   /* the host's task count for the sandbox at the start */
	int64_t pids_next; /* monotonic ms: the earliest next ask of the runtime */
	bool runtime_died; /* the sentry died while the command ran */
	bool started;      /* runsc exec wrote the guest pid: the wrapper ran */
	bool killed;       /* the service killed the command's processes */
} gv_exec;

#define GX(x) ((gv_exec *)(x)->state)

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

/* A working directory that is not there is the command's failure, as on
 * native (127 and why on stderr): looked up on the volume from the
 * service's side, because runsc exec's own refusal names the runtime's
 * internals and goes to the command's stderr. */
static int gx_cwd_check(exec_run *x, airlock_error *err)
{
	(void)err;
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
		                           RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
	int fd = sys_openat2(x->rootfd, x->cmd->working_directory, &how);
	if (fd < 0) {
		x->never_ran = EXEC_NEVER_RAN_CWD;
		x->never_ran_errno = errno;
	} else {
		close(fd);
	}
	return 0;
}

static int gx_baselines(exec_run *x, airlock_error *err)
{
	return host_cgroup_pids_current(x->cg, &GX(x)->tasks0, err);
}

/* `runsc exec` of the guest wrapper as the sandbox user, in the working
 * directory, with PWD; the rest of the environment is the container's. */
static int start_command(exec_run *x, int in_r, int out_w, int err_w, airlock_error *err)
{
	gv_exec *gx = GX(x);
	gv_sandbox *b = gx->b;
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
		               AIRLOCK_GUEST_SECCOMP_OPTION, gx->g->seccomp_hex, "--" };
	size_t nh = ARRAY_SIZE(head);
	_cleanup_free_ const char **words = calloc(nh + cmd->argc, sizeof(*words));
	if (!words)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "runsc exec's arguments");
	memcpy(words, head, sizeof(head));
	for (size_t i = 0; i < cmd->argc; i++)
		words[nh + i] = cmd->argv[i];
	char **argv = gv_argv(gx->g, b, words, nh + cmd->argc);
	if (!argv)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "runsc exec's arguments");
	/* runsc exec hands these three descriptors to the sandbox as the
	 * command's stdio; it is the service's child, outside the sandbox's
	 * cgroups (a host helper, like the native starter). */
	gv_spawn_opts o = { .argv = argv, .in_fd = in_r, .out_fd = out_w, .err_fd = err_w,
		            .netns_pidfd = b->network_host ? b->keeper_pidfd : -1 };
	int r = gv_spawn(&o, NULL, &x->pidfd, err);
	gv_argv_free(argv);
	return r;
}

/* A sandbox gVisor ended (out of memory) runs nothing more; a command
 * that never ran (gx_cwd_check) is not started. */
static int gx_start(exec_run *x, int in_r, int out_w, int err_w, airlock_error *err)
{
	gv_sandbox *b = GX(x)->b;
	if (b->ended || gv_runtime_gone(b))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "environment %s has ended (gVisor ends the whole sandbox "
		                         "when it runs out of memory): provision a new one",
		                         x->handle->environment_id);
	if (x->never_ran)
		return 0;
	return start_command(x, in_r, out_w, err_w, err);
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
static int64_t guest_pids(exec_run *x)
{
	gv_exec *gx = GX(x);
	const char *words[] = { "events", "--stats", gx->b->box.id };
	int st = 0;
	_cleanup_free_ char *out = NULL;
	if (gv_runsc_call(gx->g, gx->b, words, ARRAY_SIZE(words), GV_RUNSC_CALL_MS, &st,
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
static bool pids_reached(exec_run *x, int64_t now)
{
	gv_exec *gx = GX(x);
	if (now < gx->pids_next)
		return false;
	/* Under ptrace every guest address space is a host process of the
	 * runtime's, so the host's count is a cheap first sign; under kvm it
	 * is not, and the runtime is asked every GV_PIDS_ASK_KVM_MS instead. */
	if (gx->g->platform == AIRLOCK_GVISOR_PLATFORM_PTRACE) {
		uint64_t tasks = 0;
		if (host_cgroup_pids_current(x->cg, &tasks, NULL) < 0 ||
		    tasks < gx->tasks0 + (uint64_t)x->limits->pids_max)
			return false;
		gx->pids_next = now + GV_PIDS_ASK_MS;
	} else {
		gx->pids_next = now + GV_PIDS_ASK_KVM_MS;
	}
	int64_t n = guest_pids(x);
	return n >= 0 && n - 1 > x->limits->pids_max;
}

/* The other way processes run out: the runtime's host tasks for them at
 * half the sandbox's host bound (gvisor_internal.h), where the sentry would
 * die. A fork loop under ptrace costs ~19-30 host tasks per guest process,
 * more while it is being killed, and can get there before gVisor's own
 * count reaches pids_max; the command is then killed with PIDS (it is its
 * processes that cost them) while the sandbox still lives.
 *
 * Only when this command grew the count, by pids_max tasks or more since it
 * started (as pids_reached asks): the ptrace platform keeps the stub
 * processes of dead address spaces for reuse, with their threads, so after
 * a fork loop the count stays where the loop left it with the guest's
 * processes gone (measured: 2,250 host tasks of a 3,328 bound, 69 stubs,
 * the guest's count 1). A later command that forks nothing starts above
 * the half mark; without its own growth it reached no limit and is not
 * killed for one. */
static bool host_tasks_near_bound(exec_run *x)
{
	uint64_t tasks = 0;
	uint64_t bound = (uint64_t)gv_host_tasks_bound(GX(x)->g, x->limits->pids_max);
	return host_cgroup_pids_current(x->cg, &tasks, NULL) == 0 &&
	       tasks >= GX(x)->tasks0 + (uint64_t)x->limits->pids_max && tasks * 2 >= bound;
}

static void gx_observe(exec_run *x, exec_observed *o, bool exited)
{
	if (!exited && !GX(x)->runtime_died)
		o->pids_hit = pids_reached(x, o->now) || host_tasks_near_bound(x);
}

/* The sentry, polled while it lives: its death ends every process in the
 * sandbox. */
static int gx_watch_fd(const exec_run *x)
{
	const gv_exec *gx = x->state;
	return !gx->runtime_died ? gx->b->sentry_pidfd : -1;
}

static void gx_watch_fired(exec_run *x)
{
	GX(x)->runtime_died = true;
}

static void gx_reaped(exec_run *x)
{
	GX(x)->started = faccessat(GX(x)->b->dir_fd, "exec.pid", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A runtime that died ended every process in it (the reason, if any, was
 * decided: MEMORY from the oom_kill count). A reason, or a wrapper that
 * died of a signal (a command can kill its own wrapper, which then cannot
 * clean up): every process of the sandbox user dies now, the wrapper with
 * them, and runsc exec returns. A command that exits by itself is ended by
 * its wrapper. */
static int gx_kill(exec_run *x, bool exited, airlock_error *err)
{
	(void)err;
	gv_exec *gx = GX(x);
	if (gx->runtime_died)
		return 1;
	bool wrapper_killed = exited && WIFEXITED(x->status) && WEXITSTATUS(x->status) >= 128;
	if (!x->kill_reason && !wrapper_killed)
		return 0;
	gx->killed = true;
	gv_kill_commands(gx->g, gx->b);
	return 1;
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
static void settle_runtime(exec_run *x)
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

static int gx_settle(exec_run *x, airlock_error *err)
{
	gv_exec *gx = GX(x);
	gv_sandbox *b = gx->b;
	if (x->never_ran)
		return 0; /* nothing was started */
	uint64_t ooms = 0;
	if (!gx->runtime_died && host_cgroup_oom_kills(b->cg, &ooms, NULL) == 0 && ooms > x->oom0 &&
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
		gx->runtime_died = true;
	}
	if (gx->runtime_died || gv_runtime_gone(b)) {
		/* gVisor ended the whole sandbox. With a reason (MEMORY, or one
		 * of ours) the result says it and carries the partial output;
		 * the handle is dead for executes either way. */
		pthread_mutex_lock(&b->box.start_lock);
		b->ended = true;
		bool destroyed = b->box.dead;
		pthread_mutex_unlock(&b->box.start_lock);
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
	} else if (!gx->started) {
		/* runsc exec never started the wrapper: all its stderr holds is
		 * runsc's own words, which name the runtime's internals. */
		x->errs.buf.len = 0;
		if (x->errs.buf.data)
			x->errs.buf.data[0] = 0;
	}
	if (!gx->runtime_died && !gv_runtime_gone(b) && !gx->started && !x->kill_reason) {
		/* runsc refused the command before it started; what it printed
		 * names the runtime's internals and is not the command's. */
		int st = WIFEXITED(x->status) ? WEXITSTATUS(x->status) : 128 + WTERMSIG(x->status);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "the gvisor runtime could not start the command "
		                         "(runsc exec exited with status %d)",
		                         st);
	}
	if (gx->killed && !gx->runtime_died)
		settle_runtime(x);
	return 0;
}

/* A phase failed with the command running: end it through the runtime
 * (the runner then reaps runsc exec, bounded). */
static void gx_abort(exec_run *x)
{
	if (!gv_runtime_gone(GX(x)->b))
		gv_kill_commands(GX(x)->g, GX(x)->b);
}

static void gx_release(exec_run *x)
{
	airlock_error derr;
	exec_boxes_release(&GX(x)->g->m.boxes, &GX(x)->b->box, &gv_box_ops, GX(x)->g, &derr);
}

static const exec_hooks gvisor_exec_hooks = {
	.cwd_check = gx_cwd_check,
	.baselines = gx_baselines,
	.start = gx_start,
	.watch_fd = gx_watch_fd,
	.watch_fired = gx_watch_fired,
	.reaped = gx_reaped,
	.observe = gx_observe,
	.kill = gx_kill,
	.settle = gx_settle,
	.abort = gx_abort,
	.release = gx_release,
};

int gv_execute(void *ctx, const airlock_environment_handle *handle,
               const airlock_exec_request *req, airlock_execution_result *ret,
               airlock_error *err)
{
	airlock_gvisor *g = ctx;
	int64_t start = util_monotonic_ms();
	exec_box *box = NULL;
	int r = exec_boxes_enter(&g->m.boxes, handle, &box, err);
	if (r < 0)
		return r;
	gv_sandbox *b = (gv_sandbox *)box;
	gv_exec gx = { .g = g, .b = b };
	exec_run x = {
		.hooks = &gvisor_exec_hooks, .mech = g, .state = &gx,
		.boxes = &g->m.boxes, .box = box, .vol = b->vol, .cg = b->cg, .limits = &b->limits,
		.shutdown_efd = g->m.shutdown_efd,
		.handle = handle, .req = req, .ret = ret, .start = start,
		/* runsc's own last line may still be cut (strip_runtime_line). */
		.errs_hold_prefix = GV_RUNSC_WAIT_FAILED,
	};
	return exec_run_command(&x, err);
}
