/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_GVISOR_INTERNAL_H
#define AIRLOCK_GVISOR_INTERNAL_H

/*
 * The gvisor mechanism's files share this: the instance and its sandboxes
 * (gvisor.c), running runsc (runsc.c), the OCI bundle (bundle.c), provision
 * (provision.c) and execute (execute.c).
 *
 * The service's state directory (AIRLOCK_GVISOR_STATE_DIR), root's, 0700,
 * shared by every service on the host (each holds flocks on what is its
 * own: gvisor.c, and the crash sweep removes only what no live one holds):
 *   runsc/            runsc's --root: its state files
 *   images/<instance>/<hex>
 *                     a verified image mounted read-only by one service,
 *                     the root of every sandbox of that image it runs
 *   sandboxes/<id>/   one sandbox's bundle: the files gv_bundle_files names
 *                     (config.json, sentry.pid, exec.pid), workspace/
 *                     where its volume is mounted, and with a bridge
 *                     GV_BRIDGE_DIR/ holding the bridge's socket in the
 *                     plan's tree (exec/bridge.h), bound into the sandbox
 * None of these paths ever reaches a sandbox, a result or an error message.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "airlock/egress.h"
#include "airlock/gvisor.h"
#include "airlock/image_store.h"
#include "airlock/port/exec.h"
#include "exec/boxes.h"
#include "exec/bridge.h"
#include "exec/mech.h"
#include "util/spawn.h"
#include "host/cgroup/cgroup.h"
#include "host/image_mount.h"
#include "host/volume.h"

/* The bundle's directory of the bridge's socket. */
#define GV_BRIDGE_DIR "bridge"
/* The sandbox user inside gVisor (the image's uid 1000). */
#define GV_SANDBOX_UID 1000
/* Bound on waiting for a killed runtime to be gone. */
#define GV_KILL_WAIT_MS 5000
/* Bound on a runsc housekeeping call (kill, delete, list, events). */
#define GV_RUNSC_CALL_MS 10000
/* The host's pids limit for a sandbox: its runtime's host threads, not
 * its processes (those are RLIMIT_NPROC inside gVisor). Measured here under
 * ptrace: ~29 tasks idle, and a fork loop at 64 guest processes held 1205
 * host tasks after 4 s and 1958 after 7 s (~19-30 each), and kept growing
 * while it was being killed. A breach kills the sentry, so execute kills
 * the command with PIDS at half the bound (execute.c). The bound is also at
 * most a quarter of the host's kernel.pid_max, so no one sandbox takes the
 * host's pids: there a command is killed with PIDS below pids_max, its
 * processes having cost the host what it allows one sandbox. */
#define GV_HOST_TASKS_BASE 256
#define GV_HOST_TASKS_PER_PROCESS 48

typedef struct gv_image {
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	char *path; /* images/<hex>, mounted */
} gv_image;

typedef struct gv_sandbox {
	exec_box box; /* first: id, tenant, workspace, references (exec/boxes.h) */
	airlock_resource_limits limits;
	char *dir;      /* sandboxes/<id> */
	int dir_fd;     /* dir, flocked (LOCK_EX) by this service until teardown */
	bool made_dir;  /* dir is this sandbox's (removed at teardown) */
	bool network_host; /* allowlist: runsc's host network inside our netns */
	host_cgroup *cg;
	host_volume *vol;
	bool ws_mounted; /* the volume is mounted at dir/workspace */
	/* The keeper: a subreaper child of the service running `runsc run`,
	 * which reaps everything the runtime leaves (runsc run does not wait
	 * for all its children). Exits when runsc run has and all is reaped. */
	int keeper_pidfd;
	int sentry_pidfd; /* the sandbox process (sentry): readable once it died */
	bool proxied;
	exec_bridge *bridge; /* the bridge's relay (NULL: no bridge); stopped at teardown */
	/* With a bridge: where GV_BRIDGE_DIR is bound in the sandbox (the
	 * plan's mount_at, exec/bridge.h), and runsc runs with
	 * --host-uds=open. NULL: no bridge. */
	char *bridge_at;
	/* The runtime ended by itself (gVisor ends the whole sandbox on a
	 * memory breach): every later execute is ExecutionUnavailable. */
	bool ended;
} gv_sandbox;

struct airlock_gvisor {
	airlock_gvisor_config cfg;
	airlock_gvisor_platform platform;
	char *state_dir, *runsc, *runsc_root;
	char instance[32]; /* images/<instance>: this service's image mounts */
	int instance_fd;   /* images/<instance>, flocked for the service's life */
	int state_fd;      /* the state directory */
	int64_t host_tasks_cap; /* a quarter of kernel.pid_max (gvisor_internal.h) */
	/* The sandbox's seccomp filter as `guest exec --seccomp` takes it:
	 * native's program (exec/native/seccomp.h), built once. */
	char *seccomp_hex;
	exec_mech m;       /* lock, boxes, image store and mounts, volume dir, shutdown (exec/mech.h) */
	gv_image *mounted; /* under m.lock */
	size_t n_mounted;
};

/* ---- runsc (runsc.c) ------------------------------------------------------ */

/* runsc's argv for one call on sandbox b (NULL: none): its path, the
 * global flags every call must repeat (they are not remembered between
 * calls: a start without the create's --network fails), then the
 * subcommand's words. Freed with
 * gv_argv_free. NULL on ENOMEM. */
char **gv_argv(const airlock_gvisor *g, const gv_sandbox *b, const char *const *words,
               size_t n_words);
void gv_argv_free(char **argv);

/* The environment every runsc call gets: a fixed PATH, nothing of the
 * service's own (which may hold credentials). */
extern char *const gv_runsc_env[];

/* How a child is started (gv_spawn). */
typedef struct gv_spawn_opts {
	char *const *argv;      /* argv[0] is the program's absolute path */
	int in_fd, out_fd, err_fd; /* -1: /dev/null */
	host_cgroup *cg;        /* NULL: stays in the service's cgroup */
	/* A new network namespace holding only lo (up), made by the child
	 * before it execs (the keeper: before it starts argv), so the runtime
	 * runs inside it with host networking. */
	bool new_netns;
	/* Or enter the network namespace of this process (a pidfd): runsc's
	 * control socket is an abstract one, in the namespace runsc run was
	 * started in, so every later call on that sandbox must be there. */
	int netns_pidfd;
	/* The keeper: a child subreaper that runs argv as its own child and
	 * reaps everything orphaned below it until argv has exited and nothing
	 * is left; it exits with argv's status. */
	bool keeper;
} gv_spawn_opts;

/* Fork, move the child into the cgroup (and network namespace), exec.
 * *ret_pidfd: the child's pidfd; *ret_pid (NULL ok). */
int gv_spawn(const gv_spawn_opts *o, pid_t *ret_pid, int *ret_pidfd, airlock_error *err);

/* One housekeeping call on sandbox b (NULL: none, the service's network
 * namespace): run runsc with words, stdout and stderr captured (the first
 * AIRLOCK_GVISOR_RUNSC_OUTPUT_MAX bytes, NUL-terminated), within
 * timeout_ms. 0 and the wait status; -errno when it could not run. */
int gv_runsc_call(const airlock_gvisor *g, const gv_sandbox *b, const char *const *words,
                  size_t n_words, int64_t timeout_ms, int *ret_status, char **ret_out);

/* `runsc delete --force ID`, quietly. */
void gv_runsc_delete(const airlock_gvisor *g, const char *id);

/* ---- the bundle (bundle.c) ------------------------------------------------- */

/* Every file a bundle directory holds, for its teardown and the sweep. */
extern const char *const gv_bundle_files[3];

/* Write dir/config.json for the sandbox: root the image's mount,
 * /workspace the volume's, the built environment, the limits as rlimits. */
int gv_bundle_write(const airlock_gvisor *g, gv_sandbox *b, const char *image_path,
                    const airlock_environment_spec *spec, airlock_error *err);

/* ---- sandboxes (gvisor.c) -------------------------------------------------- */
/* A sandbox's end, for exec_boxes_release and destroy (boxes.h): the
 * kill, the teardown (the runtime, its state, the cgroups, the workspace,
 * the bundle; mech is the airlock_gvisor, box a gv_sandbox whose caller
 * owns it with no execute in flight) and the free. */
extern const exec_box_ops gv_box_ops;
int gv_sandbox_teardown(void *mech, exec_box *box, airlock_error *err);
void gv_sandbox_free(exec_box *box);
/* The host's pids bound of a sandbox with pids_max processes. */
int64_t gv_host_tasks_bound(const airlock_gvisor *g, int64_t pids_max);
/* Kill every command process in the sandbox (`guest kill`), bounded. */
int gv_kill_commands(airlock_gvisor *g, gv_sandbox *b);
/* Whether the runtime is gone (the sentry died). */
bool gv_runtime_gone(const gv_sandbox *b);

/* ---- operations (provision.c, execute.c) ----------------------------------- */
int gv_provision(void *ctx, const airlock_environment_spec *spec,
                 const airlock_environment_handle *handle, airlock_error *err);
int gv_execute(void *ctx, const airlock_environment_handle *handle,
               const airlock_exec_request *req, airlock_execution_result *ret,
               airlock_error *err);

#endif
