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
 * Between fork and exec the child runs in a copy of a possibly
 * multi-threaded process: it makes system calls only and allocates nothing.
 * Everything it needs is prepared by spawn_start before the fork.
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
	int pdeathsig;          /* 0: none; else sent to it when the parent thread exits */
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
} spawn_options;

/* A started child. pidfd is close-on-exec. */
typedef struct spawn_child {
	pid_t pid;
	int pidfd;
} spawn_child;
#define SPAWN_CHILD_NONE ((spawn_child){ .pid = -1, .pidfd = -1 })

/* The failure, when spawn_start fails: the step and its errno. */
typedef struct spawn_failure {
	spawn_step step;
	int errnum;
} spawn_failure;

/* 0 with *ret once the program is executing (the failure pipe closed on
 * exec), or a negative errno with *fail saying where (SPAWN_STEP_NONE: in
 * the parent, before the fork); a child that failed is reaped. */
int spawn_start(const spawn_options *o, spawn_child *ret, spawn_failure *fail);

/* SIGKILL it (when still there), reap it, close the pidfd; *c becomes
 * SPAWN_CHILD_NONE. For a cleanup attribute: spawn_child_kill_reapp. */
void spawn_child_kill_reap(spawn_child *c);
static inline void spawn_child_kill_reapp(spawn_child *c)
{
	spawn_child_kill_reap(c);
}
#define _cleanup_spawn_child_ __attribute__((cleanup(spawn_child_kill_reapp)))

#endif
