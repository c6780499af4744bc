/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EXEC_BRIDGE_H
#define AIRLOCK_EXEC_BRIDGE_H

/*
 * The service's end of the orchestration bridge (docs/bridge.md), the same
 * for every mechanism that makes the socket (native, gvisor): where the
 * socket goes in a sandbox's tree (a plan checked against the image), the
 * listening socket itself, and the relay that serves it.
 *
 * The relay is one thread per sandbox that accepts on the listener, and one
 * thread per accepted connection (at most
 * AIRLOCK_SERVICE_BRIDGE_CONNECTIONS_MAX at once, airlock/caps.h;
 * one past that is accepted and closed at once) that connects to the
 * service's bridge_address, writes the preface
 * "AIRLOCK-BRIDGE/1 <environment_id>\n" before any byte of the sandbox's
 * (so the sandbox can neither write nor forge it) and then relays both
 * ways (util/relay.h: two bounded buffers, backpressure). exec_bridge_stop
 * ends all of it and returns only when every thread is joined and every
 * descriptor closed.
 */

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "airlock/types.h"

/* The preface's protocol word. */
#define EXEC_BRIDGE_PREFACE "AIRLOCK-BRIDGE/1 "

/*
 * Where the socket appears in a sandbox whose root is the image at
 * image_root. The sandbox's path (spec.bridge.socket_path) must be an
 * absolute, normalized path shorter than a Unix socket address
 * allows, below a directory other than / and outside the mounts every
 * sandbox has (/proc, /dev, /sys, /tmp, /workspace). Its directory D
 * either exists in the image as an empty directory (the socket's directory
 * is mounted over it, hiding nothing), or does not exist: then the nearest
 * directory above it that does (A, not /) may hold only empty directories,
 * which the mount on A makes again (a tmpfs holding them and the path down
 * to D), so nothing the image has is hidden.
 */
typedef struct exec_bridge_plan {
	char mount_at[PATH_MAX]; /* A (or D), absolute, in the sandbox: the mount's target */
	char sub[PATH_MAX];      /* D below mount_at, relative ("" when mount_at is D) */
	char name[NAME_MAX + 1]; /* the socket's file name */
	mode_t mode;             /* mount_at's mode in the image */
	char keep[AIRLOCK_SERVICE_BRIDGE_KEEP_MAX][NAME_MAX + 1]; /* A's empty directories */
	mode_t keep_mode[AIRLOCK_SERVICE_BRIDGE_KEEP_MAX];
	size_t n_keep;
} exec_bridge_plan;

/* The plan for socket_path in the image whose root directory image_root is
 * (a descriptor of its mount). ExecutionRejected naming
 * EnvironmentSpec.bridge.socket_path when the path is not one the
 * mechanism can make. */
int exec_bridge_plan_make(int image_root, const char *socket_path, exec_bridge_plan *ret,
                          airlock_error *err);

/* The refusal of a spec with a bridge by a mechanism whose service has no
 * service.bridge_address (ExecutionRejected naming the setting): 0 when
 * address is set. */
int exec_bridge_address_check(const char *address, airlock_error *err);

/* A listening Unix socket named name in the directory dir_fd (the caller
 * made it, only root may reach it), owned by uid and gid with mode 0600:
 * the sandbox user alone may connect. *ret_fd: the listener, nonblocking,
 * close-on-exec. */
int exec_bridge_listen(int dir_fd, const char *name, uid_t uid, gid_t gid, int *ret_fd,
                       airlock_error *err);

/* The plan's tree in the directory root_fd (what is mounted at
 * pl->mount_at): the empty directories the mount hides, with their modes,
 * the path down to the socket's directory (0755) and the listening socket
 * there (exec_bridge_listen, owned by uid and gid). */
int exec_bridge_tree_make(int root_fd, const exec_bridge_plan *pl, uid_t uid, gid_t gid,
                          int *ret_fd, airlock_error *err);

typedef struct exec_bridge exec_bridge;

/* Start the relay of one sandbox: takes listen_fd (closed on failure too);
 * address is service.bridge_address ("unix:/path"). */
int exec_bridge_start(int listen_fd, const char *address, const char *environment_id,
                      exec_bridge **ret, airlock_error *err);

/* Stop: the listener and every connection closed, every thread joined, br
 * freed. NULL is a no-op. Never fails. */
void exec_bridge_stop(exec_bridge *br);

#endif
