/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The native mechanism's adapter: provision, execute, destroy, in that order
 * of trust. The kernel facilities live one per file, each holding the
 * service's half and the child's half: the user namespace (user.c), the
 * mounts (mounts.c), the network (net.c), cgroups (cgroup.c), the workspace
 * volume (volume.c), the filter (seccomp.c). provision.c runs them in order,
 * execute.c runs a command; this file is the instance and its sandboxes.
 */
#include "airlock/native.h"
#include "airlock/volume.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/native/service.h"
#include "host/crash_sweep.h"
#include "exec/starter/starter.h"
#include "host/sockbudget.h"
#include "util/fault.h"
#include "util/syscalls.h"
#include "util/util.h"

/* ---- sync with a child ----------------------------------------------------- */

int native_send_msg(int fd, int kind)
{
	native_msg m = { .kind = kind };
	return send(fd, &m, sizeof(m), MSG_NOSIGNAL) == (ssize_t)sizeof(m) ? 0 : -errno;
}

int native_recv_msg(int fd, int64_t deadline, native_msg *m)
{
	for (;;) {
		int64_t left = deadline - util_monotonic_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		ssize_t n = recv(fd, m, sizeof(*m), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			return -EPIPE;
		if (n != (ssize_t)sizeof(*m))
			return -EPROTO;
		return 0;
	}
}

int native_child_error(const char *what, int r, const native_msg *m, spawn_child *c,
                       int64_t deadline, airlock_error *err)
{
	if (r == -ETIMEDOUT)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "%s did not finish within the start budget", what);
	/* The sealed program's own report (it speaks on the sync socket once
	 * init has executed it). */
	if (r == 0 && m->kind == NATIVE_MSG_FAILED)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, m->value,
		                         "%s: %s", what, native_step_name(m->step));
	/* The socket ended: the child exited (or executed), so its spawn
	 * pipe has ended too, with a report when it failed at a step. */
	spawn_failure sf;
	if (r == -EPIPE && spawn_finish(c, deadline, &sf) < 0 && sf.step != SPAWN_STEP_NONE)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, sf.errnum, "%s: %s",
		                         what, spawn_failure_step(&sf, native_step_name));
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, r < 0 ? -r : EPROTO,
	                         "%s: lost contact with the child", what);
}

/* SIGKILL init and reap it, bounded: 0 once reaped (its pid namespace,
 * every process of the sandbox, died with it), else -errno. */
static int kill_and_reap(int pidfd)
{
	sys_pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
	siginfo_t si = { 0 };
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	if (poll(&p, 1, NATIVE_KILL_WAIT_MS) < 0)
		return -errno;
	if (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG) < 0)
		return -errno;
	return si.si_pid != 0 ? 0 : -ETIMEDOUT;
}

/* ---- the instance --------------------------------------------------------- */

int airlock_native_probe(char *why, size_t size)
{
	airlock_error err = { 0 };
	host_cgroup_mode mode;
	if (geteuid() != 0) {
		snprintf(why, size, "the native mechanism needs root to create namespaces, cgroups and loop devices");
		return -EPERM;
	}
	if (host_cgroup_detect(&mode, &err) < 0) {
		snprintf(why, size, "%s", err.message);
		return -ENOTSUP;
	}
	if (host_sock_budget_probe(&err) < 0) {
		snprintf(why, size, "%s", err.message);
		return -ENOTSUP;
	}
	if (access("/dev/loop-control", R_OK | W_OK) < 0) {
		snprintf(why, size, "no /dev/loop-control: loop devices are needed for images and workspaces");
		return -ENOTSUP;
	}
	int fd = sys_fsopen("erofs", FSOPEN_CLOEXEC);
	if (fd < 0) {
		snprintf(why, size, "the kernel cannot mount erofs images with the new mount API: %s",
		         strerror(errno));
		return -ENOTSUP;
	}
	close(fd);
	return 0;
}

static void native_free(void *ctx);

/* The host-wide host-id lock file: root's, in a directory only root may
 * change, so no one else can take or fake a slot (a lock needs a descriptor
 * open for writing). The parent directory is made if missing (/run/airlock
 * after a boot). */
static int id_lock_open(const char *path, int *ret_fd, airlock_error *err)
{
	_cleanup_free_ char *dir = strdup(path);
	if (!dir)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "native");
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir || !slash[1])
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "native: host id lock %s: an absolute path to a file is needed",
		                         path);
	*slash = 0;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "native: host id lock directory %s", dir);
	struct stat st;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "native: host id lock directory %s must be a directory owned "
		                         "by root that only root can write",
		                         dir);
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "native: host id lock %s", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077)) {
		close(fd);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "native: host id lock %s must be a regular file owned by root "
		                         "with mode 0600",
		                         path);
	}
	*ret_fd = fd;
	return 0;
}

int airlock_native_new(const airlock_native_config *cfg, airlock_native **ret, airlock_error *err)
{
	char why[256];
	if (airlock_native_probe(why, sizeof(why)) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0, "native: %s", why);
	airlock_native *n = calloc(1, sizeof(*n));
	if (!n)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "native");
	n->cfg = *cfg;
	exec_mech_init(&n->m);
	n->starter_fd = -1;
	n->id_lock_fd = -1;
	if (n->cfg.start_budget_seconds <= 0)
		n->cfg.start_budget_seconds = 30;
	n->slots = calloc(NATIVE_HOST_ID_SLOTS / 8, 1);
	n->image_store_path = strdup(cfg->image_store ? cfg->image_store : "/var/lib/airlock/images");
	if (!n->slots || !n->image_store_path) {
		native_free(n);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "native");
	}
	int r = exec_mech_open(&n->m, "native", n->image_store_path,
	                       cfg->volume_dir ? cfg->volume_dir : AIRLOCK_VOLUME_DIR, err);
	if (r < 0)
		goto fail;
	r = exec_seccomp_build(&n->seccomp, err);
	if (r < 0)
		goto fail;
	r = exec_starter_open(&n->starter_fd, err);
	if (r < 0)
		goto fail;
	r = id_lock_open(cfg->host_id_lock ? cfg->host_id_lock : AIRLOCK_NATIVE_HOST_ID_LOCK,
	                 &n->id_lock_fd, err);
	if (r < 0)
		goto fail;
	/* Every capability the kernel knows is dropped from the bounding set;
	 * when the number cannot be read, all 64 bits are tried. */
	n->last_cap = 63;
	FILE *lc = fopen("/proc/sys/kernel/cap_last_cap", "re");
	if (lc) {
		int v = 0;
		if (fscanf(lc, "%d", &v) == 1 && v > 0 && v < 64)
			n->last_cap = v;
		fclose(lc);
	}
	/* Whatever a crashed earlier run left (host_crash_sweep): its cgroups,
	 * killing what is in them, and the image store's stale scratch entries.
	 * Its loop devices autoclear and its backing files were never named, so
	 * they went with the processes. */
	unsigned removed = 0;
	r = host_crash_sweep(n->m.images, &removed, err);
	if (r < 0)
		goto fail;
	*ret = n;
	return 0;
fail:
	native_free(n);
	return r;
}

size_t airlock_native_live_count(airlock_native *n)
{
	return exec_boxes_count(&n->m.boxes);
}

/* ---- sandboxes ------------------------------------------------------------ */

void native_sandbox_free(exec_box *box)
{
	sandbox *b = (sandbox *)box;
	if (!b)
		return;
	/* What a failed teardown left and nobody retries: the cgroup's
	 * directories go to the crash sweep at the next start (host_crash_sweep
	 * kills what is in them), init is killed once more and its descriptor
	 * closed (a zombie of ours is reaped when this service exits). */
	exec_bridge_stop(b->bridge);
	host_cgroup_abandon(b->cg);
	if (b->init_pidfd >= 0) {
		sys_pidfd_send_signal(b->init_pidfd, SIGKILL, NULL, 0);
		close(b->init_pidfd);
	}
	snapshot_clear(&b->kept);
	if (b->kept_fan >= 0) {
		close(b->kept_fan);
		atomic_fetch_sub(&native_kept_groups, 1);
	}
	exec_box_clear(&b->box);
	if (b->envp)
		for (size_t i = 0; i < b->n_env; i++)
			free(b->envp[i]);
	free(b->envp);
	free(b);
}

int native_sandbox_teardown(void *mech, exec_box *box, airlock_error *err)
{
	airlock_native *n = mech;
	sandbox *b = (sandbox *)box;
	/* Every step runs whatever an earlier one did; one that fails keeps
	 * its state in b (proxied, cg, init_pidfd), so the teardown again
	 * (exec_boxes_release's retry) does only what is left. */
	/* The bridge first: its listener and every relayed connection are
	 * closed and its threads joined, so nothing of the sandbox's reaches
	 * the worker tier from here on. */
	exec_bridge_stop(b->bridge);
	b->bridge = NULL;
	int r = exec_box_detach(n->cfg.egress_proxy, &b->box, &b->proxied, 0, err);
	airlock_error step = { 0 };
	if (b->cg) {
		int t = host_cgroup_destroy(b->cg, NATIVE_KILL_WAIT_MS, &step);
		if (t < 0)
			r = exec_box_step_failed(r, err, &step);
		else
			b->cg = NULL;
	}
	if (b->lifeline_w >= 0) {
		close(b->lifeline_w);
		b->lifeline_w = -1;
	}
	if (b->init_pidfd >= 0) {
		int t = UTIL_FAULT_RET("teardown.init", kill_and_reap(b->init_pidfd));
		if (t < 0) {
			airlock_error_set(&step, AIRLOCK_ERR_SYSTEM, -t, "reaping init");
			r = exec_box_step_failed(r, err, &step);
		} else {
			close(b->init_pidfd);
			b->init_pidfd = -1;
		}
	}
	/* The volume goes whatever failed above (its steps are closes and
	 * an erase that cannot be undone): the workspace's data never waits
	 * for a retry. */
	airlock_workspace_free(b->box.ws);
	b->box.ws = NULL;
	host_volume_destroy(b->vol);
	b->vol = NULL;
	pthread_mutex_lock(&n->m.lock);
	if (b->host_id && !b->cg && b->init_pidfd < 0) {
		/* Every process that ran as this id is gone (init reaped, its
		 * pid namespace with it): the id may be handed out again. While
		 * one may survive (a failed kill, or SandboxEscapeSuspected) the
		 * slot stays taken, for this service's life if no retry
		 * succeeds, so no other sandbox on the host ever runs as the id
		 * a live process of this one still holds. */
		native_user_slot_release(n, b->slot);
		b->host_id = 0;
	}
	pthread_mutex_unlock(&n->m.lock);
	return r;
}

/* ---- destroy, workspace, free --------------------------------------------- */

/* destroy's kill: the command's cgroup (init stays until the teardown). */
static int native_box_kill(void *mech, exec_box *box, airlock_error *err)
{
	(void)mech;
	sandbox *b = (sandbox *)box;
	return b->cg ? host_cgroup_kill_cmd(b->cg, NATIVE_KILL_WAIT_MS, err) : 0;
}

const exec_box_ops native_box_ops = {
	.kill = native_box_kill,
	.teardown = native_sandbox_teardown,
	.free = native_sandbox_free,
};

static int native_destroy(void *ctx, const char *environment_id, airlock_error *err)
{
	return exec_boxes_destroy(&((airlock_native *)ctx)->m.boxes, environment_id, &native_box_ops,
	                          ctx, err);
}

static int native_workspace(void *ctx, const char *environment_id, airlock_workspace **ret,
                            airlock_error *err)
{
	airlock_native *n = ctx;
	return exec_boxes_workspace(&n->m.boxes, environment_id, ret, err);
}

/* Commands in flight end with SERVICE_SHUTDOWN: their loops poll this
 * eventfd, which stays readable. */
static void native_shutdown(void *ctx)
{
	if (ctx)
		exec_shutdown_signal(((airlock_native *)ctx)->m.shutdown_efd);
}

static void native_free(void *ctx)
{
	airlock_native *n = ctx;
	if (!n)
		return;
	/* The core calls shutdown first; a direct free still ends what runs. */
	native_shutdown(n);
	exec_boxes_release_all(&n->m.boxes, &native_box_ops, n);
	exec_seccomp_clear(&n->seccomp);
	if (n->starter_fd >= 0)
		close(n->starter_fd);
	if (n->id_lock_fd >= 0)
		close(n->id_lock_fd);
	free(n->slots);
	free(n->image_store_path);
	exec_mech_fini(&n->m);
	free(n);
}

static const airlock_exec_ops native_ops = {
	.version = AIRLOCK_EXEC_OPS_VERSION,
	.name = "native",
	.provision = native_provision,
	.execute = native_execute,
	.destroy = native_destroy,
	.workspace = native_workspace,
	.free = native_free,
	.shutdown = native_shutdown,
	.claim = native_claim,
};

const airlock_exec_ops *airlock_native_ops(void)
{
	return &native_ops;
}

