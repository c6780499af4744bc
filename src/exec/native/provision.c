/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Provision: the steps that make a sandbox, in order, each named. One place
 * runs them (provision_run): it asks util_fault("provision.<step>") first,
 * so a fault-injection build can fail each step in turn the way a real
 * failure of it fails, and on any failure one cleanup (provision_release)
 * undoes whatever the steps before made (tests/test_native_faults.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/egress.h"
#include "airlock/tiers.h"
#include "exec/bridge.h"
#include "exec/io.h"
#include "exec/kobjects.h"
#include "exec/native/service.h"
#include "exec/step.h"
#include "host/filetable.h"
#include "host/netns.h"
#include "host/sockbudget.h"
#include "util/fault.h"
#include "util/spawn.h"
#include "util/syscalls.h"
#include "util/util.h"

/* What the steps share while one sandbox is made. */
typedef struct provision {
	airlock_native *n;
	const airlock_environment_spec *spec;
	const airlock_environment_handle *handle;
	int64_t deadline; /* monotonic ms: the start budget */
	sandbox *b;
	bool proxied;     /* the sandbox gets the egress proxy's listener */
	int image_fd;     /* the detached image mount, until init has it */
	int sv[2];        /* the sync socket: ours, init's */
	int lifeline_r;   /* init's end of the lifeline, until init has it */
	spawn_child init; /* init's failure pipe (its pid and pidfd are b's) */
	char tmp_options[64];
	int bridge_mnt;   /* the bridge's detached tmpfs, until init has it */
	exec_bridge_plan bridge;
	char bridge_target[PATH_MAX + 16]; /* "/tmp/root" and bridge.mount_at */
} provision;

typedef struct provision_step {
	const char *point;    /* "provision.<step>": its name for util_fault */
	airlock_errclass cls; /* the class its own failure has */
	const char *what;     /* its name: the first words of its failure's message */
	bool (*applies)(const provision *p); /* NULL: always */
	int (*run)(provision *p, airlock_error *err);
} provision_step;

/* ---- the steps ------------------------------------------------------------ */

static int step_sandbox(provision *p, airlock_error *err)
{
	p->b->limits = p->spec->limits;
	return exec_box_setup(&p->b->box, p->handle->environment_id, p->spec->tenant_id, err);
}

static bool egress_allowlist(const provision *p)
{
	return p->spec->egress.mode == AIRLOCK_EGRESS_ALLOWLIST;
}

/* The two yeses, decided before anything is created. */
static int step_egress_policy(provision *p, airlock_error *err)
{
	return exec_egress_decide(p->n->cfg.egress_policy, p->n->cfg.egress_proxy, p->spec,
	                          &p->proxied, err);
}

static int step_environment(provision *p, airlock_error *err)
{
	return exec_env_build(&p->spec->environment, p->proxied, &p->b->envp, &p->b->n_env, err);
}

static int step_host_id(provision *p, airlock_error *err)
{
	airlock_native *n = p->n;
	sandbox *b = p->b;
	pthread_mutex_lock(&n->m.lock);
	int r = native_user_slot_take(n, &b->slot);
	if (r == 0)
		b->host_id = NATIVE_HOST_ID_BASE + b->slot;
	pthread_mutex_unlock(&n->m.lock);
	if (r == -EAGAIN)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "sandbox user ids: none free (%u sandboxes are live on "
		                         "this host)",
		                         NATIVE_HOST_ID_SLOTS);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -r,
		                         "sandbox user ids: locking a slot in the host-wide lock file");
	return 0;
}

static int step_image(provision *p, airlock_error *err)
{
	return native_mounts_image(p->n, p->spec->image_digest, &p->image_fd, err);
}

static bool has_bridge(const provision *p)
{
	return p->spec->bridge != NULL;
}

/* The bridge's socket (exec/bridge.h) in a tmpfs of its own, detached
 * until init mounts it over the plan's directory: no host path ever names
 * it, so nothing on the host but this service and the sandbox's own
 * processes can reach it, and it goes with the sandbox's mount namespace.
 * The tmpfs holds the plan's tree (exec_bridge_tree_make), the socket
 * owned by the sandbox's host id. */
static int step_bridge(provision *p, airlock_error *err)
{
	const exec_bridge_plan *pl = &p->bridge;
	int r = exec_bridge_address_check(p->n->cfg.bridge_address, err);
	if (r == 0)
		r = exec_bridge_plan_make(p->image_fd, p->spec->bridge->socket_path, &p->bridge, err);
	if (r < 0)
		return r;
	char opts[64];
	snprintf(opts, sizeof(opts), "%o", (unsigned)pl->mode);
	_cleanup_close_ int fsfd = sys_fsopen("tmpfs", FSOPEN_CLOEXEC);
	/* Its source is what the sandbox's mountinfo shows. */
	if (fsfd < 0 || sys_fsconfig(fsfd, FSCONFIG_SET_STRING, "source", "airlock-bridge", 0) < 0 ||
	    sys_fsconfig(fsfd, FSCONFIG_SET_STRING, "size", "64k", 0) < 0 ||
	    sys_fsconfig(fsfd, FSCONFIG_SET_STRING, "nr_inodes", "128", 0) < 0 ||
	    sys_fsconfig(fsfd, FSCONFIG_SET_STRING, "mode", opts, 0) < 0 ||
	    sys_fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
	    (p->bridge_mnt = sys_fsmount(fsfd, FSMOUNT_CLOEXEC,
	                                 MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "its tmpfs");
	int lfd = -1;
	r = exec_bridge_tree_make(p->bridge_mnt, pl, p->b->host_id, p->b->host_id, &lfd, err);
	if (r < 0)
		return r;
	snprintf(p->bridge_target, sizeof(p->bridge_target), "/tmp/root%s", pl->mount_at);
	return exec_bridge_start(lfd, p->n->cfg.bridge_address, p->b->box.id, &p->b->bridge, err);
}

static int step_volume(provision *p, airlock_error *err)
{
	const airlock_resource_limits *l = &p->spec->limits;
	sandbox *b = p->b;
	return host_volume_create(p->n->m.volume_dir_fd, l->workspace_bytes, l->inodes_max,
	                            b->host_id, b->host_id, &b->vol, err);
}

static int step_workspace(provision *p, airlock_error *err)
{
	return host_volume_workspace(p->b->vol, &p->b->box.ws, err);
}

static int step_cgroup(provision *p, airlock_error *err)
{
	return host_cgroup_create(p->b->box.id, &p->spec->limits, &p->b->cg, err);
}

/* The sandbox's budget of inet sockets (host/sockbudget.h), on its group
 * before init enters it, so every socket of the sandbox counts. */
static int step_sockets(provision *p, airlock_error *err)
{
	return host_sock_budget_attach(host_cgroup_v2_dir(p->b->cg),
	                               exec_sandbox_sockets(&p->spec->limits), err);
}

static int step_sync(provision *p, airlock_error *err)
{
	native_mounts_tmp_options(&p->spec->limits, p->tmp_options, sizeof(p->tmp_options));
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p->sv) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "socketpair");
	return 0;
}

static int step_lifeline(provision *p, airlock_error *err)
{
	/* init's lifeline: we keep the write end for the sandbox's life and
	 * never write it; when this process dies the kernel closes it and init,
	 * seeing the hang-up, ends the sandbox. */
	int life[2];
	if (pipe2(life, O_CLOEXEC) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "pipe2");
	p->lifeline_r = life[0];
	p->b->lifeline_w = life[1];
	return 0;
}

static int init_child(void *ctx, int report_fd)
{
	native_init_main(ctx, report_fd);
}

static int step_init(provision *p, airlock_error *err)
{
	airlock_native *n = p->n;
	sandbox *b = p->b;
	native_init_args ia = {
		.sync_fd = p->sv[1],
		.image_mount_fd = p->image_fd,
		.volume_mount_fd = host_volume_mount_fd(b->vol),
		.tmp_options = p->tmp_options,
		.seccomp = &n->seccomp,
		.last_cap = n->last_cap,
		.host_id = b->host_id,
		.nofile = exec_sandbox_nofile(&b->limits),
		.lifeline_fd = p->lifeline_r,
		/* What init executes once the sandbox is built, so that what
		 * stays as its pid 1 is no copy of this process (starter.h). */
		.starter_fd = n->starter_fd,
		.bridge_mount_fd = p->bridge_mnt,
		.bridge_target = p->bridge_target,
	};
	/* By spawn with these namespaces: clone3 creates them with the child
	 * and returns its pidfd, so no pid is ever reused under us. The user
	 * namespace comes later, from init itself (native_user_enter), once it
	 * has built the root as root of these. Asynchronous: init waits for GO
	 * on the sync socket before it does anything, so the service moves it
	 * into its cgroup first (step_init_cgroup); the steps after run the
	 * handshake, and a failure init reports comes through spawn's pipe
	 * (native_child_error). */
	/* Every descriptor init uses (native_init_main and the child halves
	 * it runs): spawn closes all others in it before anything, so from its
	 * first instruction init holds none of the service's (the service's
	 * end of the sync socket, other sandboxes' pipes and mounts). */
	const int keep[] = { ia.sync_fd, ia.image_mount_fd, ia.volume_mount_fd, ia.lifeline_fd,
		             ia.starter_fd, ia.bridge_mount_fd };
	const spawn_options so = {
		.clone_flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS,
		.child_fn = init_child, .child_fn_ctx = &ia, .async = true,
		.keep = keep, .n_keep = ARRAY_SIZE(keep),
	};
	/* An async start without a parent_hook fails only in the service
	 * (its pipe, the clone3), which sf names. */
	spawn_failure sf;
	int r = spawn_start(&so, &p->init, &sf);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -r, "%s",
		                         spawn_failure_step(&sf, NULL));
	/* The sandbox owns init: its teardown kills it by this pidfd. */
	b->init_pid = TAKE_PID(p->init.pid);
	b->init_pidfd = TAKE_FD(p->init.pidfd);
	/* What init holds now is its own. */
	close(p->sv[1]);
	p->sv[1] = -1;
	close(p->lifeline_r);
	p->lifeline_r = -1;
	close(p->image_fd);
	p->image_fd = -1;
	if (p->bridge_mnt >= 0)
		close(p->bridge_mnt);
	p->bridge_mnt = -1;
	return 0;
}

static int step_init_cgroup(provision *p, airlock_error *err)
{
	/* The cgroup before anything runs, so every page init touches is
	 * charged to the sandbox. */
	return host_cgroup_enter_init(p->b->cg, p->b->init_pid, err);
}

static int step_user(provision *p, airlock_error *err)
{
	if (native_send_msg(p->sv[0], NATIVE_MSG_GO) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "sync socket");
	native_msg m = { 0 };
	int r = native_recv_msg(p->sv[0], p->deadline, &m);
	if (r < 0 || m.kind != NATIVE_MSG_MAP)
		return native_child_error("sandbox init", r, &m, &p->init, p->deadline, err);
	r = native_user_write_id_maps(p->b->init_pid, p->b->host_id, err);
	if (r < 0)
		return r;
	if (native_send_msg(p->sv[0], NATIVE_MSG_MAPPED) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "sync socket");
	return 0;
}

static int step_ready(provision *p, airlock_error *err)
{
	native_msg m = { 0 };
	int r = native_recv_msg(p->sv[0], p->deadline, &m);
	if (r < 0 || m.kind != NATIVE_MSG_READY)
		return native_child_error("sandbox init", r, &m, &p->init, p->deadline, err);
	/* READY comes from init's own program: init has executed it, and
	 * its spawn pipe has nothing more to say (provision_release closes
	 * it). */
	close(p->sv[0]);
	p->sv[0] = -1;
	return 0;
}

/* The sandbox's network namespace bounds what its sockets hold of the
 * host's TCP memory (host_netns_harden), before any command runs. */
static int step_network(provision *p, airlock_error *err)
{
	const char *step = NULL;
	int e = host_netns_harden(p->b->init_pidfd, &step);
	if (e < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -e,
		                         "network namespace: %s", step ? step : "thread");
	return 0;
}

static bool proxied(const provision *p)
{
	return p->proxied;
}

static int step_egress(provision *p, airlock_error *err)
{
	return native_net_plant_proxy(p->n, p->b, p->spec, err);
}

static int step_register(provision *p, airlock_error *err)
{
	return exec_boxes_add(&p->n->m.boxes, &p->b->box, err);
}

/* ---- the list, and the one place that runs it ------------------------------ */

static const provision_step provision_steps[] = {
	{ "provision.sandbox", AIRLOCK_ERR_SYSTEM, "sandbox record", NULL, step_sandbox },
	{ "provision.egress_policy", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "egress", egress_allowlist,
	  step_egress_policy },
	{ "provision.environment", AIRLOCK_ERR_SYSTEM, "environment", NULL, step_environment },
	{ "provision.host_id", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "sandbox user ids", NULL,
	  step_host_id },
	{ "provision.image", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "image", NULL, step_image },
	{ "provision.bridge", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "bridge", has_bridge,
	  step_bridge },
	{ "provision.volume", AIRLOCK_ERR_SYSTEM, "workspace volume", NULL, step_volume },
	{ "provision.workspace", AIRLOCK_ERR_SYSTEM, "workspace volume", NULL, step_workspace },
	{ "provision.cgroup", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "cgroup", NULL, step_cgroup },
	{ "provision.sockets", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "socket budget", NULL,
	  step_sockets },
	{ "provision.sync", AIRLOCK_ERR_SYSTEM, "sync socket", NULL, step_sync },
	{ "provision.lifeline", AIRLOCK_ERR_SYSTEM, "lifeline", NULL, step_lifeline },
	{ "provision.init", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "sandbox init", NULL, step_init },
	{ "provision.init_cgroup", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "cgroup", NULL,
	  step_init_cgroup },
	{ "provision.user", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "user namespace", NULL, step_user },
	{ "provision.ready", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "sandbox init", NULL,
	  step_ready },
	{ "provision.network", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "network namespace", NULL,
	  step_network },
	{ "provision.egress", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "egress", proxied, step_egress },
	{ "provision.register", AIRLOCK_ERR_SYSTEM, "live sandbox list", NULL, step_register },
};

static int provision_run(provision *p, const provision_step *s, airlock_error *err)
{
	if (s->applies && !s->applies(p))
		return 0;
	int r = exec_step_fault(s->point, s->cls, err);
	if (r == 0)
		r = s->run(p, err);
	return exec_step_said(s->what, r, err);
}

/* The one cleanup: what the steps hold is closed; on failure the sandbox
 * is torn down (every step's work is undone by the teardown, which takes
 * what exists) and freed. */
static void provision_release(provision *p, bool failed)
{
	if (p->lifeline_r >= 0)
		close(p->lifeline_r);
	if (p->sv[0] >= 0)
		close(p->sv[0]);
	if (p->sv[1] >= 0)
		close(p->sv[1]);
	if (p->image_fd >= 0)
		close(p->image_fd);
	if (p->bridge_mnt >= 0)
		close(p->bridge_mnt);
	spawn_child_reap(&p->init); /* the pipe only: b owns init */
	if (failed) {
		airlock_error derr;
		native_sandbox_teardown(p->n, &p->b->box, &derr);
		native_sandbox_free(&p->b->box);
	}
}

int native_provision(void *ctx, const airlock_environment_spec *spec,
                     const airlock_environment_handle *handle, airlock_error *err)
{
	airlock_native *n = ctx;
	provision p = {
		.n = n, .spec = spec, .handle = handle,
		.deadline = util_monotonic_ms() + n->cfg.start_budget_seconds * 1000,
		.image_fd = -1, .sv = { -1, -1 }, .lifeline_r = -1, .init = SPAWN_CHILD_NONE,
		.bridge_mnt = -1,
	};
	p.b = calloc(1, sizeof(*p.b));
	if (!p.b)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the sandbox's state");
	p.b->init_pidfd = -1;
	p.b->lifeline_w = -1;
	p.b->kept_fan = -1;
	/* The host's file table first: a full one fails every step, and one
	 * without room for what this sandbox's memory can hold is refused
	 * (host/filetable.h); the caller is told which table (and explained so
	 * after a step saw it). */
	int r = host_files_check(spec->limits.memory_bytes, err);
	for (size_t i = 0; i < ARRAY_SIZE(provision_steps) && r == 0; i++)
		r = provision_run(&p, &provision_steps[i], err);
	r = host_files_explain(r, err);
	provision_release(&p, r < 0);
	return r;
}

/* ---- the warm pool's claim ------------------------------------------------- */

static void envp_free(char **envp, size_t n)
{
	for (size_t i = 0; envp && i < n; i++)
		free(envp[i]);
	free(envp);
}

/*
 * What of a native sandbox depends on whom it is for, and where that is
 * bound. The pooled sandbox was provisioned (native_provision) for the pool
 * key alone: the image, the limits (its cgroup's, volume's, /tmp's and
 * rlimits' numbers) and no egress, under the pool's identity. At the claim:
 *   - its name in the live list and its tenant (exec_boxes_rebind): every
 *     execute and destroy finds it by these. The cgroup directory keeps the
 *     pool id it was made under: a name for the host, which the crash sweep
 *     removes like any other, never shown to a tenant;
 *   - its environment: b->envp is what every command is started with, so
 *     the claim's variables (secrets among them) are the only ones it ever
 *     runs with; the pool's was empty;
 *   - egress: the proxy's listener is planted now, with this tenant's and
 *     run's identity and policy (the proxy logs and decides by them), which
 *     is why a pooled sandbox is built without one;
 *   - the bridge is per run: a spec with one is never claimed (the service
 *     provisions it the plain way), and refused here if it comes.
 * Nothing else a tenant gives reaches the sandbox, and no command ran in it
 * before this: its workspace, /tmp and process table are as provision left
 * them.
 */
int native_claim(void *ctx, const char *pool_id, const airlock_environment_spec *spec,
                 const airlock_environment_handle *handle, airlock_error *err)
{
	airlock_native *n = ctx;
	if (spec->bridge)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "EnvironmentSpec.bridge: a pooled sandbox has none");
	/* What can refuse without changing the sandbox comes before the
	 * rename: a refusal then leaves it pooled (the core keeps it). */
	bool proxied = false;
	int r = 0;
	if (spec->egress.mode == AIRLOCK_EGRESS_ALLOWLIST) {
		r = exec_egress_decide(n->cfg.egress_policy, n->cfg.egress_proxy, spec, &proxied, err);
		if (r < 0)
			return exec_step_said("egress", r, err);
	}
	char **envp = NULL;
	size_t n_env = 0;
	r = exec_env_build(&spec->environment, proxied, &envp, &n_env, err);
	if (r < 0) {
		envp_free(envp, n_env);
		return exec_step_said("environment", r, err);
	}
	exec_box *box = NULL;
	r = exec_boxes_rebind(&n->m.boxes, pool_id, handle->environment_id, spec->tenant_id, &box,
	                      err);
	if (r < 0) {
		envp_free(envp, n_env);
		return r;
	}
	sandbox *b = (sandbox *)box;
	envp_free(b->envp, b->n_env);
	b->envp = envp;
	b->n_env = n_env;
	if (proxied) {
		r = native_net_plant_proxy(n, b, spec, err);
		if (r < 0)
			return exec_step_said("egress", r, err);
	}
	return 0;
}
