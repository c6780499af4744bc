/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_UTIL_SPAWN_H
#define AIRLOCK_UTIL_SPAWN_H

/*
 * Starting a child program, one way for every caller: the descriptors it
 * gets placed where it wants them and every other one closed, signals
 * blocked across fork and reset to their defaults before exec, an optional
 * hook for what only the caller knows (entering a namespace, a process
 * group), and one failure protocol: a child that fails before exec writes
 * (step, errno) on a close-on-exec pipe and exits; the parent reads it, so
 * the error names the step and the system's reason, never a bare exit code.
 * Knows nothing about sandboxes.
 *
 * A child may be made with new namespaces (clone_flags: clone3, which
 * returns its pidfd with it), may run a function of the caller's in place
 * of the placement and the exec (child_fn: the function reports its own
 * failing step through the same pipe, spawn_child_fail), and may be started
 * asynchronously (async): spawn_start returns once the child exists, the
 * caller runs its own handshake with it, and spawn_finish then reads the
 * report.
 *
 * Between fork and exec the child runs in a copy of a possibly
 * multi-threaded process: it makes system calls only and allocates nothing.
 * Everything it needs is prepared by spawn_start before the fork.
 *
 * Its first act is to close every descriptor from 3 up but those it is
 * given (fds, exec_fd), those its hook or child_fn names (keep) and spawn's
 * own pipes: it is a copy of the service's whole table, which holds other
 * threads' failure pipes and output pipes at that moment, and a copy held
 * open would keep their reader waiting for its end as long as this child
 * lives (a function child may live as long as a sandbox). 0-2 stay until
 * the placement (a child_fn moves or closes them itself): the service's
 * own streams, which no start waits on, and where a stray write (a
 * sanitizer's report) lands harmlessly rather than in a descriptor the
 * child opened in their place.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The steps of the child, for the failure report. */
typedef enum spawn_step {
	SPAWN_STEP_NONE = 0,
	SPAWN_STEP_PARENT,    /* the caller's parent_hook, in the parent */
	SPAWN_STEP_PGRP,      /* setpgid */
	SPAWN_STEP_PDEATHSIG, /* prctl(PR_SET_PDEATHSIG) or the parent already gone */
	SPAWN_STEP_HOOK,      /* the caller's hook */
	SPAWN_STEP_FDS,       /* placing the descriptors */
	SPAWN_STEP_EXEC,      /* execve / execveat */
	SPAWN_STEP_CHILD,     /* the caller's child_fn, at its own step (detail) */
	SPAWN_STEP__MAX,
} spawn_step;
const char *spawn_step_name(spawn_step s);

/* One descriptor the child gets: the parent's fd at target. fd -1 is
 * /dev/null (read-write). */
typedef struct spawn_fd {
	int fd;
	int target;
} spawn_fd;

#define SPAWN_FDS_MAX 8
#define SPAWN_KEEP_MAX 8
/* How long a synchronous start waits for its child's exec or report. */
#define SPAWN_START_WAIT_MS 30000

typedef struct spawn_options {
	/* What runs: exec_fd >= 0 is executed (execveat AT_EMPTY_PATH: a
	 * sealed memfd), else path (absolute). argv and envp NULL-terminated,
	 * prepared by the caller. */
	int exec_fd;
	const char *path;
	char *const *argv;
	char *const *envp;
	/* The child's descriptors (at most SPAWN_FDS_MAX): each placed at its
	 * target; every other descriptor is closed at exec. A target of 0-2
	 * not listed gets /dev/null: a child never inherits the service's
	 * standard streams by accident. */
	const spawn_fd *fds;
	size_t n_fds;
	bool own_process_group; /* setpgid(0, 0) */
	int pdeathsig;          /* 0: none; else sent to it when the parent thread exits
	                         * (not with CLONE_NEWPID: EINVAL) */
	/* Run in the child after the process group and the death signal and
	 * before the descriptors are placed; async-signal-safe only. 0, or a
	 * negative errno that fails the start at SPAWN_STEP_HOOK. */
	int (*hook)(void *ctx);
	void *hook_ctx;
	/* Run in the parent after the fork, before the child does anything
	 * (it waits for this first): what must be true of the child before
	 * it runs, such as being in the sandbox's cgroups so that everything
	 * it makes is charged there. 0, or a negative errno that kills the
	 * child and fails the start at SPAWN_STEP_PARENT. */
	int (*parent_hook)(pid_t pid, void *ctx);
	void *parent_hook_ctx;
	/* CLONE_NEW* flags: the child is made by clone3 with these and
	 * CLONE_PIDFD, so its namespaces exist from its first instruction and
	 * its pidfd comes back with it (no pid is ever looked up). 0: fork,
	 * then pidfd_open. */
	uint64_t clone_flags;
	/* Run in the child in place of the placement and the exec (exec_fd,
	 * path, argv, envp and fds are then unused), after the process group,
	 * the death signal and the hook; async-signal-safe only. report_fd is
	 * the failure pipe (close-on-exec): the function reports its own
	 * failure with spawn_child_fail(report_fd, step, errno), and a
	 * function that moves its descriptors keeps report_fd (or a copy of
	 * it, close-on-exec) for that. What it returns is the child's exit
	 * status, with nothing reported. */
	int (*child_fn)(void *ctx, int report_fd);
	void *child_fn_ctx;
	/* The descriptors hook or child_fn uses (at most SPAWN_KEEP_MAX;
	 * negative ones are ignored): with fds, exec_fd and spawn's own pipes,
	 * all that the child keeps open from its first instruction. */
	const int *keep;
	size_t n_keep;
	/* Return once the child exists (after parent_hook), not once it has
	 * executed: the caller runs its own handshake with it, then calls
	 * spawn_finish for the report. The child is the caller's to reap. */
	bool async;
} spawn_options;

/* A started child. pidfd is close-on-exec; report_fd is the failure pipe's
 * read end, held by an async start until spawn_finish (else -1). */
typedef struct spawn_child {
	pid_t pid;
	int pidfd;
	int report_fd;
} spawn_child;
#define SPAWN_CHILD_NONE ((spawn_child){ .pid = -1, .pidfd = -1, .report_fd = -1 })

/* The failure: the step and its errno; at SPAWN_STEP_CHILD, detail is the
 * child_fn's own step. */
typedef struct spawn_failure {
	spawn_step step;
	int detail;
	int errnum;
	const char *what; /* at SPAWN_STEP_NONE: what failed in the parent
	                   * ("failure pipe", "clone3", ...), static */
} spawn_failure;

/* The failing step's name: spawn's own, at SPAWN_STEP_NONE what failed in
 * the parent, or at SPAWN_STEP_CHILD the caller's
 * (child_step_name(detail)). */
const char *spawn_failure_step(const spawn_failure *f, const char *(*child_step_name)(int));

/* 0 with *ret once the program is executing (the failure pipe closed on
 * exec) or, async, once the child exists; or a negative errno with *fail
 * saying where (SPAWN_STEP_NONE: in the parent, fail->what); a child that
 * failed is reaped. A synchronous start waits at most SPAWN_START_WAIT_MS
 * for the exec or the report: a child stuck before its exec (a hook that
 * blocks) is killed and the start fails with -ETIMEDOUT. */
int spawn_start(const spawn_options *o, spawn_child *ret, spawn_failure *fail);

/* The report of an async start, waited for until deadline (monotonic ms):
 * 0 when the pipe ended without one (the child executed, or its function
 * returned), a negative errno with *fail when the child reported a failure
 * (it exits by itself after a report), -ETIMEDOUT when neither came in
 * time. A report already in the pipe is read even past the deadline. The
 * report's pipe is closed; the child is left as it is. */
int spawn_finish(spawn_child *c, int64_t deadline, spawn_failure *fail);

/* In a child_fn: report (SPAWN_STEP_CHILD, step, errnum) and exit.
 * Async-signal-safe. */
_Noreturn void spawn_child_fail(int report_fd, int step, int errnum);

/* Reap it (it has exited or is about to: no signal) and close its
 * descriptors; *c becomes SPAWN_CHILD_NONE. */
void spawn_child_reap(spawn_child *c);

/* SIGKILL it (when still there), reap it, close its descriptors; *c
 * becomes SPAWN_CHILD_NONE. For a cleanup attribute: spawn_child_kill_reapp. */
void spawn_child_kill_reap(spawn_child *c);
static inline void spawn_child_kill_reapp(spawn_child *c)
{
	spawn_child_kill_reap(c);
}
/* How long a killed child is waited for. */
#define SPAWN_KILL_WAIT_MS 5000

/* Wait for the child behind pidfd until deadline (monotonic ms; a past
 * one: not at all), then reap it: if it has not exited by then it is
 * killed and waited for SPAWN_KILL_WAIT_MS more. *ret_status (if not NULL)
 * is its wait status (WIFEXITED and so on; 0 when it could not be
 * reaped). 0, or -ETIMEDOUT when it had to be killed. */
int spawn_wait(int pidfd, int64_t deadline, int *ret_status);

#define _cleanup_spawn_child_ __attribute__((cleanup(spawn_child_kill_reapp)))

#endif
