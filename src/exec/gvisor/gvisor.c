/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gvisor mechanism's adapter: the instance (probe, state directory,
 * crash sweep), its sandboxes, destroy, workspace, free. provision.c makes a
 * sandbox, execute.c runs a command, bundle.c writes the OCI bundle,
 * runsc.c runs the runtime.
 */
#include "airlock/gvisor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/guest.h"
#include "airlock/volume.h"
#include "exec/gvisor/gvisor_internal.h"
#include "exec/seccomp.h"
#include "host/cgroup/cgroup.h"
#include "host/crash_sweep.h"
#include "host/sockbudget.h"
#include "util/fault.h"
#include "util/run.h"
#include "util/syscalls.h"
#include "util/util.h"

/* ---- the probe ---------------------------------------------------------------- */

/* Whether the CPU says it runs under a hypervisor (the "hypervisor" flag in
 * /proc/cpuinfo). */
static bool cpu_is_virtual(void)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/cpuinfo", "re");
	char line[8192];
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "flags", 5) == 0)
			return strstr(line, " hypervisor") != NULL;
	return false;
}

int airlock_gvisor_probe(airlock_gvisor_platform want, const char *runsc,
                         airlock_gvisor_platform *ret_platform, char *why, size_t size)
{
	char scratch[8];
	if (!why) {
		why = scratch;
		size = sizeof(scratch);
	}
	const char *bin = runsc ? runsc : AIRLOCK_GVISOR_RUNSC;
	if (geteuid() != 0) {
		snprintf(why, size, "the gvisor mechanism needs root (runsc runs rootful here)");
		return -EPERM;
	}
	if (access(bin, X_OK) < 0) {
		snprintf(why, size, "runsc not found at %s: install Debian's runsc package", bin);
		return -ENOENT;
	}
	airlock_error err = { 0 };
	host_cgroup_mode mode;
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
	/* The platform. runsc 20221219 has ptrace and kvm (systrap came later).
	 * kvm needs hardware virtualization the sentry can drive directly: on a
	 * virtual CPU (the hypervisor flag) or without /dev/kvm, auto picks
	 * ptrace, because runsc's kvm platform there hangs at start instead of
	 * failing (measured on this project's hosts, whose KVM is a software
	 * hypervisor). */
	airlock_gvisor_platform p = want;
	bool kvm_ok = access("/dev/kvm", R_OK | W_OK) == 0 && !cpu_is_virtual();
	if (want == AIRLOCK_GVISOR_PLATFORM_AUTO) {
		p = kvm_ok ? AIRLOCK_GVISOR_PLATFORM_KVM : AIRLOCK_GVISOR_PLATFORM_PTRACE;
		snprintf(why, size, "%s", kvm_ok ? "kvm: /dev/kvm on a bare-metal CPU"
		                    : access("/dev/kvm", F_OK) == 0
		                            ? "ptrace: /dev/kvm is there but the CPU is virtual, where "
		                              "runsc's kvm platform hangs"
		                            : "ptrace: no /dev/kvm");
	} else if (want == AIRLOCK_GVISOR_PLATFORM_KVM && access("/dev/kvm", R_OK | W_OK) < 0) {
		snprintf(why, size, "platform kvm: /dev/kvm is not usable: %s", strerror(errno));
		return -ENOTSUP;
	} else {
		snprintf(why, size, "%s: set by the configuration", airlock_gvisor_platform_name(want));
	}
	if (ret_platform)
		*ret_platform = p;
	return 0;
}

/* ---- the state directory ------------------------------------------------------ */

/* A directory only root can change, made if missing. */
static int dir_private(const char *path, airlock_error *err)
{
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "gvisor: the state directory");
	struct stat st;
	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "gvisor: the state directory must be a directory owned by root "
		                         "with mode 0700");
	return 0;
}

/* Several services may share a state directory (every `airlock run` is a
 * service): each holds an flock on what is its own, and the sweep removes
 * only what no live service holds, the way the cgroup sweep does
 * (host/cgroup/sweep.c):
 *   - a bundle directory, sandboxes/<id>, is flocked (LOCK_EX) by its
 *     service from just after mkdir to its teardown; the window between
 *     the two is closed by a shared flock on sandboxes/ during creation,
 *     which the sweep takes exclusively while it scans;
 *   - a service's image mounts live in images/<instance>/, flocked by it
 *     for its life. */

/* Take dir's exclusive flock without waiting: 1 when it was free (the
 * owner is dead, or there is none), 0 when a live service holds it. */
static int lock_if_free(int fd)
{
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 1;
	return errno == EWOULDBLOCK ? 0 : -errno;
}

/* The directory name in parent and everything below it, depth first:
 * the bundle's GV_BRIDGE_DIR, whose tree (exec/bridge.h) is the service's
 * own and at most a socket address deep, so depth bounds the recursion. */
static void tree_remove(int parent, const char *name, int depth)
{
	int fd = depth > 64 ? -1
	                    : openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		unlinkat(parent, name, AT_REMOVEDIR);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno == EISDIR)
			tree_remove(dirfd(d), de->d_name, depth + 1);
	}
	closedir(d);
	unlinkat(parent, name, AT_REMOVEDIR);
}

/* A dead service's bundle: runsc's state of its sandbox, the workspace
 * mount, the files, the directory. */
static void sweep_bundle(airlock_gvisor *g, int sandboxes_fd, const char *id)
{
	_cleanup_close_ int fd = openat(sandboxes_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || lock_if_free(fd) != 1)
		return;
	gv_runsc_delete(g, id);
	char p[4096 + 2 * AIRLOCK_ENVIRONMENT_ID_MAX];
	snprintf(p, sizeof(p), "%s/sandboxes/%s/workspace", g->state_dir, id);
	umount2(p, MNT_DETACH);
	unlinkat(fd, "workspace", AT_REMOVEDIR);
	tree_remove(fd, GV_BRIDGE_DIR, 0);
	for (size_t i = 0; i < ARRAY_SIZE(gv_bundle_files); i++)
		unlinkat(fd, gv_bundle_files[i], 0);
	unlinkat(sandboxes_fd, id, AT_REMOVEDIR);
}

/* A dead service's image mounts. */
static void sweep_images(airlock_gvisor *g)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/images", g->state_dir);
	_cleanup_closedir_ DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.' || strcmp(de->d_name, g->instance) == 0)
			continue;
		_cleanup_close_ int fd = openat(dirfd(d), de->d_name,
		                                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || lock_if_free(fd) != 1)
			continue;
		char p[4096 + 512];
		_cleanup_closedir_ DIR *m = fdopendir(dup(fd));
		struct dirent *me;
		while (m && (me = readdir(m))) {
			if (me->d_name[0] == '.')
				continue;
			snprintf(p, sizeof(p), "%s/%s/%s", dir, de->d_name, me->d_name);
			umount2(p, MNT_DETACH);
			rmdir(p);
		}
		/* An image mounted at the entry itself (an earlier layout kept
		 * images/<hex>): unmounted too, or the directory stays. */
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		umount2(p, MNT_DETACH);
		unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
	}
}

/* The crash sweep: the cgroups first (host_crash_sweep kills every process
 * in a dead service's groups: keepers, runsc, sentries, gofers), then each
 * dead bundle with runsc's state of its sandbox, then runsc's state of any
 * sandbox without a bundle (none is being made: the scan holds sandboxes/
 * exclusively), then dead services' image mounts. */
static int gv_sweep(airlock_gvisor *g, airlock_error *err)
{
	unsigned removed = 0;
	int r = host_crash_sweep(g->m.images, &removed, err);
	if (r < 0)
		return r;
	char p[4096];
	snprintf(p, sizeof(p), "%s/sandboxes", g->state_dir);
	_cleanup_close_ int sfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0 || flock(sfd, LOCK_EX) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "gvisor: the state directory's sandboxes");
	_cleanup_closedir_ DIR *d = fdopendir(dup(sfd));
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			sweep_bundle(g, sfd, de->d_name);
	const char *words[] = { "list", "--quiet" };
	int st = 0;
	_cleanup_free_ char *out = NULL;
	if (gv_runsc_call(g, NULL, words, ARRAY_SIZE(words), GV_RUNSC_CALL_MS, &st, &out) == 0 &&
	    out) {
		for (char *save = NULL, *id = strtok_r(out, "\n", &save); id;
		     id = strtok_r(NULL, "\n", &save))
			if (*id && faccessat(sfd, id, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
				gv_runsc_delete(g, id);
	}
	sweep_images(g);
	return 0;
}

/* ---- the instance --------------------------------------------------------------- */

static void gv_free(void *ctx);

int airlock_gvisor_new(const airlock_gvisor_config *cfg, airlock_gvisor **ret, airlock_error *err)
{
	char why[256];
	airlock_gvisor_platform platform;
	if (airlock_gvisor_probe(cfg->platform, cfg->runsc, &platform, why, sizeof(why)) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0, "gvisor: %s", why);
	airlock_gvisor *g = calloc(1, sizeof(*g));
	if (!g)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "gvisor");
	_cleanup_free_ char *parent = NULL;
	g->cfg = *cfg;
	g->platform = platform;
	g->instance_fd = g->state_fd = -1;
	exec_mech_init(&g->m);
	if (g->cfg.start_budget_seconds <= 0)
		g->cfg.start_budget_seconds = 30;
	g->state_dir = strdup(cfg->state_dir ? cfg->state_dir : AIRLOCK_GVISOR_STATE_DIR);
	g->runsc = strdup(cfg->runsc ? cfg->runsc : AIRLOCK_GVISOR_RUNSC);
	if (!g->state_dir || !g->runsc || asprintf(&g->runsc_root, "%s/runsc", g->state_dir) < 0) {
		g->runsc_root = NULL;
		gv_free(g);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "gvisor");
	}
	/* The sandbox's seccomp filter: native's, the same program, which
	 * `guest exec` installs in every command (airlock/guest.h). runsc
	 * 20221219 cannot carry it: its --oci-seccomp applies linux.seccomp
	 * to the container's first process only (never to a `runsc exec`,
	 * which is how every command starts), and it drops each rule's
	 * errnoRet (every denial answers EPERM), both measured here. */
	exec_seccomp filter = { 0 };
	int r = exec_seccomp_build(&filter, err);
	if (r < 0)
		goto fail;
	g->seccomp_hex = exec_seccomp_hex(&filter);
	exec_seccomp_clear(&filter);
	if (!g->seccomp_hex) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "gvisor: the seccomp filter");
		goto fail;
	}
	r = exec_mech_open(&g->m, "gvisor",
	                   cfg->image_store ? cfg->image_store : "/var/lib/airlock/images",
	                   cfg->volume_dir ? cfg->volume_dir : AIRLOCK_VOLUME_DIR, err);
	if (r < 0)
		goto fail;
	/* The state directory's parent (/run/airlock after a boot) is made if
	 * missing; the directory itself must be root's alone. */
	parent = strdup(g->state_dir);
	char *slash = parent ? strrchr(parent, '/') : NULL;
	if (slash && slash != parent) {
		*slash = 0;
		mkdir(parent, 0700);
	}
	if ((r = dir_private(g->state_dir, err)) < 0)
		goto fail;
	g->state_fd = open(g->state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (g->state_fd < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                      "gvisor: the state directory");
		goto fail;
	}
	const char *subs[] = { "runsc", "images", "sandboxes" };
	for (size_t i = 0; i < ARRAY_SIZE(subs); i++) {
		char p[4096];
		snprintf(p, sizeof(p), "%s/%s", g->state_dir, subs[i]);
		if ((r = dir_private(p, err)) < 0)
			goto fail;
	}
	/* This service's image mounts: images/<pid>-<random>, flocked for its
	 * life (a pid alone may be reused by the time a sweep looks). */
	uint32_t rnd = 0;
	if (util_random(&rnd, sizeof(rnd)) < 0 ||
	    snprintf(g->instance, sizeof(g->instance), "%d-%08x", (int)getpid(), rnd) < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO, "gvisor: the instance name");
		goto fail;
	}
	char ipath[4096];
	snprintf(ipath, sizeof(ipath), "%s/images/%s", g->state_dir, g->instance);
	if ((r = dir_private(ipath, err)) < 0)
		goto fail;
	g->instance_fd = open(ipath, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (g->instance_fd < 0 || flock(g->instance_fd, LOCK_EX | LOCK_NB) < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                      "gvisor: the state directory's images");
		goto fail;
	}
	/* A quarter of the host's pids for one sandbox's runtime at most. */
	g->host_tasks_cap = 32768 / 4;
	char pm[32];
	int pmfd = open("/proc/sys/kernel/pid_max", O_RDONLY | O_CLOEXEC);
	int64_t pid_max = 0;
	if (pmfd >= 0 && util_pread_small(pmfd, pm, sizeof(pm)) > 0) {
		pm[strcspn(pm, "\n")] = 0;
		if (util_parse_i64(pm, &pid_max) && pid_max >= 4 * GV_HOST_TASKS_BASE)
			g->host_tasks_cap = pid_max / 4;
	}
	if (pmfd >= 0)
		close(pmfd);
	if ((r = gv_sweep(g, err)) < 0)
		goto fail;
	*ret = g;
	return 0;
fail:
	gv_free(g);
	return r;
}

size_t airlock_gvisor_live_count(airlock_gvisor *g)
{
	return exec_boxes_count(&g->m.boxes);
}

/* ---- sandboxes -------------------------------------------------------------------- */

int64_t gv_host_tasks_bound(const airlock_gvisor *g, int64_t pids_max)
{
	int64_t want = GV_HOST_TASKS_BASE + pids_max * GV_HOST_TASKS_PER_PROCESS;
	return want < g->host_tasks_cap ? want : g->host_tasks_cap;
}

bool gv_runtime_gone(const gv_sandbox *b)
{
	struct pollfd p = { .fd = b->sentry_pidfd, .events = POLLIN };
	return b->sentry_pidfd < 0 || poll(&p, 1, 0) > 0;
}

int gv_kill_commands(airlock_gvisor *g, gv_sandbox *b)
{
	/* As guest root, which no process of the command can signal, with
	 * CAP_SETUID: `guest kill` forks killers that become the sandbox user
	 * (a command at its RLIMIT_NPROC could not be joined through runsc
	 * exec by another process of its uid; a fork by root and a setresuid
	 * can), so the kernel's own permission check picks the command's
	 * processes, never text a process wrote (guest.c, kill_pass). CAP_KILL
	 * as well for an image built by an earlier airlock, whose guest kills
	 * as root; this guest's killers drop every capability. */
	char uid[16];
	snprintf(uid, sizeof(uid), "%d", GV_SANDBOX_UID);
	const char *words[] = { "exec",      "--user", "0:0",  "--cap", "CAP_KILL", "--cap",
		                "CAP_SETUID", "--cwd", "/",    b->box.id, AIRLOCK_GUEST_PROGRAM,
		                "kill",      uid };
	int st = 0;
	int r = gv_runsc_call(g, b, words, ARRAY_SIZE(words), GV_RUNSC_CALL_MS, &st, NULL);
	return r < 0 ? r : WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -ESRCH;
}

void gv_sandbox_free(exec_box *box)
{
	gv_sandbox *b = (gv_sandbox *)box;
	if (!b)
		return;
	/* What a failed teardown left and nobody retries goes to the crash
	 * sweep at the next start: the cgroup's directories (their flocks
	 * drop here), the bundle directory (its flock drops with dir_fd) and
	 * the runtime's state. */
	exec_bridge_stop(b->bridge);
	free(b->bridge_at);
	host_cgroup_abandon(b->cg);
	if (b->keeper_pidfd >= 0)
		close(b->keeper_pidfd);
	if (b->sentry_pidfd >= 0)
		close(b->sentry_pidfd);
	if (b->dir_fd >= 0)
		close(b->dir_fd);
	free(b->dir);
	exec_box_clear(&b->box);
	free(b);
}

int gv_sandbox_teardown(void *mech, exec_box *box, airlock_error *err)
{
	airlock_gvisor *g = mech;
	gv_sandbox *b = (gv_sandbox *)box;
	/* Every step runs whatever an earlier one did; one that fails keeps
	 * its state in b (proxied, cg, keeper_pidfd, ws_mounted with dir_fd),
	 * so the teardown again (exec_boxes_release's retry) does only what
	 * is left. The bridge first: its listener and every relayed
	 * connection closed, its threads joined. */
	exec_bridge_stop(b->bridge);
	b->bridge = NULL;
	int r = exec_box_detach(g->cfg.egress_proxy, &b->box, &b->proxied, 0, err);
	airlock_error step = { 0 };
	/* The sentry first: runsc run sees its sandbox die, removes its state
	 * and exits, and the keeper reaps everything before it exits (~10 ms;
	 * killing the whole group at once would orphan the runtime's children
	 * to the host's init instead). */
	if (b->sentry_pidfd >= 0) {
		sys_pidfd_send_signal(b->sentry_pidfd, SIGKILL, NULL, 0);
		close(b->sentry_pidfd);
		b->sentry_pidfd = -1;
	} else if (b->cg) {
		/* No sandbox yet (a start that failed or hung): the group,
		 * keeper and all, at once. */
		if (host_cgroup_destroy(b->cg, GV_KILL_WAIT_MS, &step) < 0)
			r = exec_box_step_failed(r, err, &step);
		else
			b->cg = NULL;
	}
	if (b->keeper_pidfd >= 0) {
		/* When the keeper does not end here the runtime may still be
		 * removing its state: killing the group now would leave that
		 * half-removed, so the group stays too, for the retry (or, at
		 * the service's free, for the sweep, which deletes the state). */
		int t = UTIL_FAULT_RET("teardown.keeper",
		                       spawn_wait(b->keeper_pidfd,
		                                  util_monotonic_ms() + GV_KILL_WAIT_MS, NULL));
		if (t < 0) {
			airlock_error_set(&step, AIRLOCK_ERR_SYSTEM, -t, "waiting for the runtime");
			r = exec_box_step_failed(r, err, &step);
		} else {
			close(b->keeper_pidfd);
			b->keeper_pidfd = -1;
		}
	}
	/* Whatever is left in the groups dies with them. */
	if (b->cg && b->keeper_pidfd < 0) {
		if (host_cgroup_destroy(b->cg, GV_KILL_WAIT_MS, &step) < 0)
			r = exec_box_step_failed(r, err, &step);
		else
			b->cg = NULL;
	}
	/* runsc run removed its state on the way out; a runtime that was
	 * killed some other way leaves it, and delete --force takes it (the
	 * sweep at the next start does too). */
	char state[32 + 2 * AIRLOCK_ENVIRONMENT_ID_MAX];
	snprintf(state, sizeof(state), "runsc/%s_sandbox:%s.state", b->box.id, b->box.id);
	if (faccessat(g->state_fd, state, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		gv_runsc_delete(g, b->box.id);
	airlock_workspace_free(b->box.ws);
	b->box.ws = NULL;
	if (b->dir_fd >= 0 && b->ws_mounted) {
		char p[4096 + 16];
		snprintf(p, sizeof(p), "%s/workspace", b->dir);
		if (UTIL_FAULT_CALL("teardown.unmount", umount2(p, MNT_DETACH)) == 0) {
			b->ws_mounted = false;
		} else {
			airlock_error_set(&step, AIRLOCK_ERR_SYSTEM, errno,
			                  "unmounting the bundle's workspace");
			r = exec_box_step_failed(r, err, &step);
		}
	}
	/* The bundle directory stays, locked, while its workspace is mounted
	 * there: a retry unmounts and removes it. Removed while still locked:
	 * a sweep never finds it free and full. */
	if (!b->ws_mounted) {
		if (b->dir_fd >= 0) {
			unlinkat(b->dir_fd, "workspace", AT_REMOVEDIR);
			tree_remove(b->dir_fd, GV_BRIDGE_DIR, 0);
			for (size_t i = 0; i < ARRAY_SIZE(gv_bundle_files); i++)
				unlinkat(b->dir_fd, gv_bundle_files[i], 0);
		}
		if (b->made_dir)
			rmdir(b->dir);
		b->made_dir = false;
		if (b->dir_fd >= 0) {
			close(b->dir_fd);
			b->dir_fd = -1;
		}
	}
	/* The volume goes whatever failed above (its data is erased now; a
	 * bind mount still in the bundle only keeps the emptied filesystem
	 * until the retry's unmount). */
	host_volume_destroy(b->vol);
	b->vol = NULL;
	return r;
}

/* ---- destroy, workspace, free --------------------------------------------------- */

/* destroy's kill: the sentry, whose death ends every process in the
 * sandbox and the runsc exec of an execute in flight. */
static int gv_box_kill(void *mech, exec_box *box, airlock_error *err)
{
	(void)mech, (void)err;
	gv_sandbox *b = (gv_sandbox *)box;
	if (b->sentry_pidfd >= 0)
		sys_pidfd_send_signal(b->sentry_pidfd, SIGKILL, NULL, 0);
	return 0;
}

const exec_box_ops gv_box_ops = {
	.kill = gv_box_kill,
	.teardown = gv_sandbox_teardown,
	.free = gv_sandbox_free,
};

static int gv_destroy(void *ctx, const char *environment_id, airlock_error *err)
{
	return exec_boxes_destroy(&((airlock_gvisor *)ctx)->m.boxes, environment_id, &gv_box_ops, ctx,
	                          err);
}

static int gv_workspace(void *ctx, const char *environment_id, airlock_workspace **ret,
                        airlock_error *err)
{
	airlock_gvisor *g = ctx;
	return exec_boxes_workspace(&g->m.boxes, environment_id, ret, err);
}

static void gv_shutdown(void *ctx)
{
	if (ctx)
		exec_shutdown_signal(((airlock_gvisor *)ctx)->m.shutdown_efd);
}

static void gv_free(void *ctx)
{
	airlock_gvisor *g = ctx;
	if (!g)
		return;
	gv_shutdown(g);
	exec_boxes_release_all(&g->m.boxes, &gv_box_ops, g);
	for (size_t i = 0; i < g->n_mounted; i++) {
		umount2(g->mounted[i].path, MNT_DETACH);
		rmdir(g->mounted[i].path);
		free(g->mounted[i].path);
	}
	free(g->mounted);
	if (g->instance_fd >= 0) {
		char ipath[4096];
		snprintf(ipath, sizeof(ipath), "%s/images/%s", g->state_dir, g->instance);
		rmdir(ipath);
		close(g->instance_fd); /* after the rmdir: a sweep never sees it free and full */
	}
	free(g->seccomp_hex);
	if (g->state_fd >= 0)
		close(g->state_fd);
	free(g->state_dir);
	free(g->runsc);
	free(g->runsc_root);
	exec_mech_fini(&g->m);
	free(g);
}

static const airlock_exec_ops gvisor_ops = {
	.version = AIRLOCK_EXEC_OPS_VERSION,
	.name = "gvisor",
	.provision = gv_provision,
	.execute = gv_execute,
	.destroy = gv_destroy,
	.workspace = gv_workspace,
	.free = gv_free,
	.shutdown = gv_shutdown,
};

const airlock_exec_ops *airlock_gvisor_ops(void)
{
	return &gvisor_ops;
}
