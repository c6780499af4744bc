/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_NATIVE_INTERNAL_H
#define AIRLOCK_NATIVE_INTERNAL_H

/*
 * What the service prepares for the two kinds of child it starts. Both run
 * between fork and exec (init: until it executes its own program, starter.h)
 * in a copy of a possibly multi-threaded process: they make system calls
 * only, allocate nothing, and report a failure as (step, errno) on
 * util/spawn's failure pipe (spawn_child_fail) before exiting: each is a
 * spawn child_fn, report_fd its pipe.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "airlock/caps.h"

#include "exec/seccomp.h"
#include "exec/starter/sync.h"

/* The sandbox user inside the user namespace. */
#define NATIVE_SANDBOX_UID 1000
#define NATIVE_SANDBOX_GID 1000

const char *native_step_name(int step);

typedef struct native_init_args {
	int sync_fd;
	int image_mount_fd;  /* a detached read-only mount of the image */
	int volume_mount_fd; /* the detached workspace mount */
	const char *tmp_options; /* "size=N,mode=1777" for /tmp and /dev/shm */
	const exec_seccomp *seccomp;
	int last_cap;
	uid_t host_id;   /* the sandbox's own host id (uid and gid) */
	uint64_t nofile; /* RLIMIT_NOFILE: exec_sandbox_nofile (exec/kobjects.h) */
	int lifeline_fd; /* read end: hang-up means the service is gone */
	int starter_fd;  /* the sealed program (starter.h) init executes in init mode */
	/* The orchestration bridge (exec/bridge.h): a detached tmpfs holding
	 * the socket, mounted read-only at bridge_target ("/tmp/root" and the
	 * plan's mount_at) before the pivot; -1: no bridge. */
	int bridge_mount_fd;
	const char *bridge_target;
} native_init_args;

/* The sandbox's init: builds the root, becomes the sandbox user, then
 * executes the sealed program in init mode (starter.h), which reaps orphans
 * until it is killed or the lifeline hangs up. Never returns. */
_Noreturn void native_init_main(const native_init_args *a, int report_fd);

typedef struct native_cmd_args {
	int sync_fd;
	int init_pidfd;
	int stdin_fd, stdout_fd, stderr_fd;
	int exec_err_fd; /* O_CLOEXEC: EOF on a successful exec, else (step, errno) */
	int starter_fd;  /* the sealed starter (starter.h), executed last */
	char *const *argv; /* the starter's: NATIVE_STARTER_ARGV0, then the command's */
	char *const *envp;
	const char *cwd; /* "/workspace" or "/workspace/<checked relative path>" */
	const exec_seccomp *seccomp;
	uint64_t fsize_limit; /* RLIMIT_FSIZE: no file larger than the volume */
	uint64_t nofile;      /* RLIMIT_NOFILE: exec_sandbox_nofile (exec/kobjects.h) */
	int last_cap;
} native_cmd_args;

/* The command's launcher (a fork of the service, started by spawn once it
 * is in the command cgroup): enters the sandbox and starts the command as a
 * child of the service (CLONE_PARENT), reports its pid on the sync socket,
 * exits. The child executes the sealed starter program, which executes the
 * command. */
_Noreturn void native_cmd_main(const native_cmd_args *a, int report_fd);

/* ---- the child halves of the facilities --------------------------------------
 * Each returns the step that failed (0 on success) with errno set; the
 * caller reports it and exits. */

/* The sync socket, from the child's side (child.c): send never fails
 * visibly; recv is true when the next message is of kind want. */
void native_child_send(int fd, int kind, int step, int value);
bool native_child_recv(int fd, int want);

/* mounts.c: make every mount private (nothing propagates to the host);
 * then assemble the root from a's mounts under /tmp/root and pivot into it. */
int native_mounts_private(void);
int native_mounts_build_root(const native_init_args *a);

/* net.c: bring lo up. */
int native_net_loopback_up(void);

/* user.c: become host_id with the namespace's ceilings (nofile among them), make the user
 * namespace, and wait on sync_fd for the service to write its id maps. */
int native_user_enter(int sync_fd, uid_t host_id, uint64_t nofile);

/* user.c: drop to the sandbox user: no capabilities in any set, no_new_privs, the
 * seccomp filter. last_cap is the kernel's highest capability
 * (/proc/sys/kernel/cap_last_cap, read by the service). For init and for
 * every command. Returns the step that failed (0 on success), errno set. */
int native_become_sandbox_user(const exec_seccomp *s, int last_cap);

#endif
