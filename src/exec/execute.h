/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EXEC_EXECUTE_H
#define AIRLOCK_EXEC_EXECUTE_H
/*
 * Execute, once for every mechanism: one command in a provisioned sandbox
 * as named phases over one struct (exec_run) with one cleanup. The walk
 * before, the working directory, the pipes and the counters' baselines,
 * the start under the sandbox's start lock, the loop that pumps stdio and
 * watches the limits (the reason is exec_kill_decide's, kill.h), the walk
 * after and the rule at exit, the result. A mechanism is its hooks: how a
 * command starts and is killed, what it observes beyond the common signals,
 * and what it does around the walks. Each phase is a fault point
 * ("execute.<phase>", util/fault.h) that fails the way its own failure
 * does.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "airlock/error.h"
#include "airlock/port/exec.h"
#include "airlock/types.h"
#include "core/snapshot.h"
#include "exec/boxes.h"
#include "exec/io.h"
#include "exec/kill.h"
#include "host/cgroup/cgroup.h"
#include "host/volume.h"

/* How often the loop reads the limit counters. */
#define EXEC_POLL_MS 20
/* Bound on draining the output once the command has exited: a pipe still
 * open then is held by something that is not the command (a concurrent
 * fork's copy, a runtime), and must not hang the execute. */
#define EXEC_DRAIN_MS 2000

/* Why a command never ran (its result is 127 with the reason on stderr,
 * like a shell's). */
typedef enum exec_never_ran {
	EXEC_RAN = 0,
	EXEC_NEVER_RAN_CWD,  /* the working directory is not there */
	EXEC_NEVER_RAN_EXEC, /* argv[0] could not be executed */
	EXEC_NEVER_RAN_STEP, /* a step of the start (never_ran_step names it) */
} exec_never_ran;

typedef struct exec_run exec_run;

/* A mechanism's part. NULL hooks are optional, except start, kill, abort
 * and release. */
typedef struct exec_hooks {
	/* execute.snapshot_before: fill x->before from a snapshot the
	 * mechanism kept of the workspace as the last command left it; false
	 * when it has none (the runner walks). */
	bool (*kept_take)(exec_run *x);
	/* execute.cwd, after the working directory resolved inside the
	 * workspace: the mechanism's own checks (a directory that is not
	 * there may be set as x->never_ran). */
	int (*cwd_check)(exec_run *x, airlock_error *err);
	/* execute.environment (skipped without it): what the start needs. */
	int (*prepare)(exec_run *x, airlock_error *err);
	/* execute.pipes, after the common baselines: the mechanism's own. */
	int (*baselines)(exec_run *x, airlock_error *err);
	/* execute.start, under the start lock with the sandbox not destroyed:
	 * refuse a sandbox that cannot run commands any more, or start the
	 * command with in_r, out_w and err_w as its stdio; x->pidfd is then
	 * the process whose exit is the command's end. With x->never_ran set
	 * already (cwd_check): refuse or not, but start nothing. */
	int (*start)(exec_run *x, int in_r, int out_w, int err_w, airlock_error *err);
	/* A descriptor the loop also polls while the command runs (-1: none),
	 * and what its readiness means. */
	int (*watch_fd)(const exec_run *x);
	void (*watch_fired)(exec_run *x);
	/* x->pidfd was reaped (x->status is set). */
	void (*reaped)(exec_run *x);
	/* Each round, before the reason is decided. */
	void (*round)(exec_run *x, bool exited);
	/* What the mechanism observes beyond the common signals. */
	void (*observe)(exec_run *x, exec_observed *o, bool exited);
	/* Each round until it answers 1: end every process of the command if
	 * x->kill_reason (or the mechanism's own state) says so; 1 when
	 * they are ending (or already gone), 0 when nothing is to be killed
	 * yet, or an error that fails the execute. */
	int (*kill)(exec_run *x, bool exited, airlock_error *err);
	/* execute.after, before the walk after: what the end of the command
	 * leaves for the mechanism to read or wait for. */
	int (*settle)(exec_run *x, airlock_error *err);
	/* Before the walk after: watch the workspace from here on; true when
	 * armed (kept_store may keep the walk). */
	bool (*kept_arm)(exec_run *x);
	void (*kept_store)(exec_run *x);
	/* A phase failed with the command running: end its processes (the
	 * runner then reaps x->pidfd, bounded). */
	void (*abort)(exec_run *x);
	/* The execute's own state is freed (optional), and the sandbox's
	 * last reference was dropped (release). */
	void (*fini)(exec_run *x);
	void (*release)(exec_run *x);
} exec_hooks;

struct exec_run {
	/* Set by the mechanism before exec_run_command. */
	const exec_hooks *hooks;
	void *mech;               /* the adapter */
	void *state;              /* the mechanism's per-execute state */
	exec_boxes *boxes;        /* the adapter's live sandboxes */
	exec_box *box;            /* this one, entered (exec_boxes_enter) */
	host_volume *vol;         /* its workspace volume */
	host_cgroup *cg;          /* its cgroups */
	const airlock_resource_limits *limits;
	int shutdown_efd;         /* readable once the service is stopping */
	const airlock_environment_handle *handle;
	const airlock_exec_request *req;
	airlock_execution_result *ret;
	int64_t start;            /* monotonic ms at the call */
	/* A last stderr line starting with this is held back until the end
	 * (exec_stream.hold_prefix): the mechanism may cut it. NULL: none. */
	const char *errs_hold_prefix;

	/* The runner's. */
	const airlock_execution_command *cmd;
	int rootfd; /* the volume's root (the volume's own: not closed here) */
	int pipes[3][2]; /* 0: stdin, 1: stdout, 2: stderr */
	exec_stream out, errs;
	int in_w; /* our end of stdin, non-blocking, until all of it is written */
	size_t in_off;
	airlock_snapshot before, after;
	int pidfd;
	bool reaped;
	int status; /* the wait status of pidfd */
	char cwd[AIRLOCK_PATH_MAX + 16];
	uint64_t oom0;
	exec_disk_watch disk;
	bool full;
	int64_t timeout_at, expiry_at;
	int64_t cmd_start, cmd_end; /* the command's own time */
	airlock_kill_reason kill_reason;
	exec_never_ran never_ran;
	int never_ran_errno;
	const char *never_ran_step;
	bool armed;
};

/* Run the command; the result in x->ret. Leaves the box (and releases the
 * sandbox when that was its last reference) whatever happens. */
int exec_run_command(exec_run *x, airlock_error *err);

#endif
