/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_NATIVE_SERVICE_H
#define AIRLOCK_NATIVE_SERVICE_H

/*
 * The service's side of the native mechanism, shared by its files: the
 * instance (native.c), provision (provision.c) and execute (execute.c), and
 * the service halves of the facilities (user.c, mounts.c, net.c). What the
 * children run is in native_internal.h.
 */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "airlock/egress.h"
#include "airlock/image_store.h"
#include "airlock/native.h"
#include "airlock/port/exec.h"
#include "core/snapshot.h"
#include "exec/boxes.h"
#include "exec/bridge.h"
#include "exec/mech.h"
#include "host/cgroup/cgroup.h"
#include "exec/native/native_internal.h"
#include "exec/seccomp.h"
#include "host/volume.h"
#include "host/image_mount.h"
#include "util/spawn.h"

/* Host ids for sandbox users: one per live sandbox, far above any account a
 * distribution creates, so a sandbox's files and processes belong to nobody
 * on the host and no two sandboxes share an id, across every service on the
 * host: slot N is taken by an open-file-description lock (F_OFD_SETLK) on
 * byte N of one host-wide lock file (AIRLOCK_NATIVE_HOST_ID_LOCK). The
 * kernel drops a process's locks when it dies, so a crashed service's slots
 * come free by themselves; no record has to be cleaned up. What that leaves:
 * a crashed service's sandboxes end when their inits see the lifeline hang
 * up, a few milliseconds after the locks went, and in that window a new
 * sandbox of another service may already run as the same id (in namespaces
 * of its own, so neither can signal or see the other). Letting init hold
 * the lock would close it, but would hand init a writable descriptor to a
 * host file. */
#define NATIVE_HOST_ID_BASE 1500000000u
#define NATIVE_HOST_ID_SLOTS 65536u

/* Kept fanotify groups in this process, at most
 * AIRLOCK_NATIVE_KEPT_GROUPS_MAX (airlock/caps.h; see native_kept_arm, kept.c). */
extern atomic_int native_kept_groups;

/* Bound on waiting for a killed group to empty. */
#define NATIVE_KILL_WAIT_MS 5000

typedef struct sandbox {
	exec_box box; /* first: id, tenant, workspace, references (exec/boxes.h) */
	airlock_resource_limits limits;
	uint32_t slot;
	uid_t host_id;
	pid_t init_pid;
	int init_pidfd;
	int lifeline_w;  /* our end of init's lifeline; closing it ends the sandbox */
	host_cgroup *cg;
	host_volume *vol;
	char **envp; /* "NAME=value", NULL-terminated, from the spec; PWD replaced per command */
	size_t n_env;
	bool proxied;   /* attached to the egress proxy: detach at teardown */
	exec_bridge *bridge; /* the bridge's relay (NULL: no bridge); stopped at teardown */
	/* files_changed: the last command's after-walk, and the fanotify group
	 * that has watched the volume since just before that walk (see
	 * native_kept_take). The snapshot is owned by n->m.lock while stored
	 * here; the group lives as long as the sandbox and is used only by the
	 * one execute in flight. */
	airlock_snapshot kept;
	bool kept_valid; /* kept holds a walk the group has watched since */
	int kept_fan;    /* -1: no group (yet, or fanotify is missing) */
} sandbox;

struct airlock_native {
	airlock_native_config cfg;
	int last_cap; /* the kernel's highest capability number */
	exec_mech m;  /* lock, boxes, image store and mounts, volume dir, shutdown (exec/mech.h) */
	char *image_store_path;
	exec_seccomp seccomp;
	int starter_fd;   /* the sealed memfd every command is started through (starter.h) */
	unsigned char *slots; /* bitmap of host-id slots in use here (our locks do not
	                       * conflict with each other: one description) */
	int id_lock_fd;       /* the host-wide host-id lock file */
};

/* ---- sync with a child (native.c) ----------------------------------------- */
int native_send_msg(int fd, int kind);
/* Receive one message within deadline (monotonic ms). -ETIMEDOUT, -EPIPE
 * (the child died), or 0. */
int native_recv_msg(int fd, int64_t deadline, native_msg *m);
/* What went wrong with a child the sync socket could not finish with (r
 * and m from native_recv_msg), as an error naming the step and the
 * system's reason: the timeout; the sealed program's FAILED message; or,
 * when the socket ended, the child's (step, errno) from its spawn pipe
 * (c, read until deadline). */
int native_child_error(const char *what, int r, const native_msg *m, spawn_child *c,
                       int64_t deadline, airlock_error *err);

/* ---- sandboxes (native.c) ------------------------------------------------- */
/* A sandbox's end, for exec_boxes_release and destroy (boxes.h): the
 * kill, the teardown in the specification's order (the processes, then
 * the workspace volume; SandboxEscapeSuspected when a process survives;
 * mech is the airlock_native, box a sandbox whose caller owns it with no
 * execute in flight) and the free. */
extern const exec_box_ops native_box_ops;
int native_sandbox_teardown(void *mech, exec_box *box, airlock_error *err);
void native_sandbox_free(exec_box *box);

/* ---- the user namespace's service half (user.c) --------------------------- */
/* Caller holds n->m.lock. Take a free host-id slot: 0, -EAGAIN when every
 * slot is taken, or another -errno. */
int native_user_slot_take(airlock_native *n, uint32_t *ret);
/* Caller holds n->m.lock. Give slot back to the host. */
void native_user_slot_release(airlock_native *n, uint32_t slot);
/* Write the id maps of the user namespace init (pid) created. */
int native_user_write_id_maps(pid_t pid, uid_t host_id, airlock_error *err);

/* ---- the mounts' service half (mounts.c) ---------------------------------- */
/* A fresh detached mount of the image digest for one sandbox. Takes n->m.lock. */
int native_mounts_image(airlock_native *n, const char *digest, int *ret_fd, airlock_error *err);
/* The options of /tmp and /dev/shm for limits: "size=N,mode=1777". */
void native_mounts_tmp_options(const airlock_resource_limits *limits, char *buf, size_t size);

/* ---- the network's service half (net.c) ----------------------------------- */
/* Plant the proxy's listener in the sandbox's namespace and attach it to the
 * egress proxy with this sandbox's policy; sets b->proxied. */
int native_net_plant_proxy(airlock_native *n, sandbox *b, const airlock_environment_spec *spec,
                           airlock_error *err);

/* ---- files_changed's kept snapshot (kept.c) -------------------------------- */
/* Arm the sandbox's fanotify group just before an after-walk; false when
 * it cannot be (the next command then walks twice). */
bool native_kept_arm(sandbox *b, int rootfd);
/* Take the kept snapshot if the volume has not changed since it was made;
 * false (and nothing taken) otherwise. */
bool native_kept_take(airlock_native *n, sandbox *b, airlock_snapshot *ret);
/* Keep s (taken from the caller) as the next command's walk before, unless
 * it is larger than the bound. */
void native_kept_store(airlock_native *n, sandbox *b, airlock_snapshot *s);

/* ---- the adapter's operations (provision.c, execute.c) -------------------- */
int native_provision(void *ctx, const airlock_environment_spec *spec,
                     const airlock_environment_handle *handle, airlock_error *err);
/* The warm pool's claim (airlock_exec_ops.claim), provision.c. */
int native_claim(void *ctx, const char *pool_id, const airlock_environment_spec *spec,
                 const airlock_environment_handle *handle, airlock_error *err);
int native_execute(void *ctx, const airlock_environment_handle *handle,
                   const airlock_exec_request *req, airlock_execution_result *ret,
                   airlock_error *err);

#endif
