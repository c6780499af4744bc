/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Provision: a gVisor sandbox as named steps over one struct, run through
 * one place (a fault-injection build may fail any step there), with one
 * cleanup: the sandbox's teardown, which releases whatever the steps made.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "airlock/tiers.h"
#include "airlock/guest.h"
#include "exec/gvisor/gvisor_internal.h"
#include "exec/io.h"
#include "exec/kobjects.h"
#include "exec/step.h"
#include "host/filetable.h"
#include "host/netns.h"
#include "host/sockbudget.h"
#include "util/fault.h"
#include "util/syscalls.h"
#include "util/util.h"

/* What the sandbox's mountinfo shows as its root's source. */
#define GV_IMAGE_SOURCE_NAME "airlock-image"
/* The planted proxy listener's accept queue: short, for the reason the
 * native mechanism gives (net.c there): a connection waiting in it is
 * charged to no sandbox. */
#define GV_PROXY_BACKLOG 64

typedef struct provision {
	airlock_gvisor *g;
	const airlock_environment_spec *spec;
	const airlock_environment_handle *handle;
	int64_t deadline; /* monotonic ms: the start budget */
	gv_sandbox *b;
	const char *image_path; /* g->mounted[i].path, for the image's life (the service's) */
	int ready[2];           /* runsc run's stdout and stderr: the guest's ready line */
} provision;

typedef struct provision_step {
	const char *point;    /* "provision.<step>": its name for util_fault */
	airlock_errclass cls; /* the class its own failure has */
	const char *what;     /* its name: the first words of its failure's message */
	int (*run)(provision *p, airlock_error *err);
} provision_step;

static int step_sandbox(provision *p, airlock_error *err)
{
	gv_sandbox *b = p->b;
	b->limits = p->spec->limits;
	int r = exec_box_setup(&b->box, p->handle->environment_id, p->spec->tenant_id, err);
	if (r < 0)
		return r;
	if (asprintf(&b->dir, "%s/sandboxes/%s", p->g->state_dir, b->box.id) < 0) {
		b->dir = NULL;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "its directory's name");
	}
	return 0;
}

static int step_egress_policy(provision *p, airlock_error *err)
{
	if (p->spec->egress.mode != AIRLOCK_EGRESS_ALLOWLIST)
		return 0;
	int r = exec_egress_decide(p->g->cfg.egress_policy, p->g->cfg.egress_proxy, p->spec,
	                           &p->b->proxied, err);
	/* proxied is set only once attached (step_proxy); until then it says
	 * the sandbox is to get the listener. */
	p->b->network_host = p->b->proxied;
	p->b->proxied = false;
	return r;
}

/* Caller holds g->m.lock. Mount the verified image at images/<hex> and
 * record it. */
static int image_attach(airlock_gvisor *g, const char *digest, const char **ret,
                        airlock_error *err)
{
	gv_image *grown = realloc(g->mounted, (g->n_mounted + 1) * sizeof(*grown));
	if (!grown)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM,
		                         "image: the list of mounted images");
	g->mounted = grown;
	const char *colon = strchr(digest, ':');
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, "%s/images/%s/%s", g->state_dir, g->instance, colon ? colon + 1 : digest) <
	    0) {
		path = NULL;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM,
		                         "image: its mount point's name");
	}
	_cleanup_close_ int fd = -1;
	int r = host_image_mount(&g->m.imgs, g->m.images, digest, g->m.volume_dir_fd, GV_IMAGE_SOURCE_NAME,
	                         &fd, err);
	if (r < 0)
		return r;
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "image: mounting it for the runtime");
	if (sys_move_mount(fd, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                      "image: mounting it for the runtime");
		rmdir(path);
		return r;
	}
	gv_image *m = &g->mounted[g->n_mounted++];
	snprintf(m->digest, sizeof(m->digest), "%s", digest);
	m->path = TAKE_PTR(path);
	*ret = m->path;
	return 0;
}

/* The verified image, mounted once per service under images/<hex>: the
 * root of every sandbox of that image (read-only, so shared). */
static int step_image(provision *p, airlock_error *err)
{
	airlock_gvisor *g = p->g;
	const char *digest = p->spec->image_digest;
	int r = 0;
	pthread_mutex_lock(&g->m.lock);
	for (size_t i = 0; i < g->n_mounted; i++)
		if (strcmp(g->mounted[i].digest, digest) == 0)
			p->image_path = g->mounted[i].path;
	if (!p->image_path)
		r = image_attach(g, digest, &p->image_path, err);
	pthread_mutex_unlock(&g->m.lock);
	return r;
}

static int step_cgroups(provision *p, airlock_error *err)
{
	/* The sandbox's limits, with the runtime's share: memory_bytes plus
	 * the runtime's own memory; the host's pids bound its threads (the
	 * sandbox's processes are counted inside, gvisor_internal.h). */
	airlock_resource_limits hl = p->spec->limits;
	hl.memory_bytes += AIRLOCK_GVISOR_RUNTIME_MEMORY;
	hl.pids_max = gv_host_tasks_bound(p->g, hl.pids_max);
	/* (execute kills the command with PIDS at half of it.) */
	return host_cgroup_create(p->b->box.id, &hl, &p->b->cg, err);
}

/* The sandbox's budget of inet sockets (host/sockbudget.h), on its group
 * before the runtime enters it: the host sockets the runtime opens for the
 * sandbox (egress mode) count. The budget is the sandbox's own limit's, as
 * on native, not the runtime's share added above. */
static int step_sockets(provision *p, airlock_error *err)
{
	return host_sock_budget_attach(host_cgroup_v2_dir(p->b->cg),
	                               exec_sandbox_sockets(&p->spec->limits), err);
}

static int step_volume(provision *p, airlock_error *err)
{
	const airlock_resource_limits *l = &p->spec->limits;
	return host_volume_create(p->g->m.volume_dir_fd, l->workspace_bytes, l->inodes_max,
	                          GV_SANDBOX_UID, GV_SANDBOX_UID, &p->b->vol, err);
}

/* The bundle directory, with the volume mounted at its workspace/ for the
 * gofer to serve. */
static int step_bundle_dir(provision *p, airlock_error *err)
{
	gv_sandbox *b = p->b;
	/* Made and flocked under a shared flock of sandboxes/ (a descriptor of
	 * this call's own: flock is per open file), so another service's sweep
	 * never sees it made and not yet locked (gvisor.c). */
	char parent[4096];
	snprintf(parent, sizeof(parent), "%s/sandboxes", p->g->state_dir);
	_cleanup_close_ int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0 || flock(pfd, LOCK_SH) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "making it");
	if (mkdirat(pfd, b->box.id, 0700) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "making it");
	b->made_dir = true;
	b->dir_fd = openat(pfd, b->box.id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (b->dir_fd < 0 || flock(b->dir_fd, LOCK_EX | LOCK_NB) < 0 ||
	    mkdirat(b->dir_fd, "workspace", 0700) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "making it");
	if (sys_move_mount(host_volume_mount_fd(b->vol), "", b->dir_fd, "workspace",
	                   MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "mounting the workspace in it");
	b->ws_mounted = true;
	return 0;
}

/* The bridge's socket (exec/bridge.h) in the bundle's GV_BRIDGE_DIR/,
 * which the bundle binds at the plan's directory in the sandbox. The
 * plan is checked against the image as on native, and the directory
 * holds the same tree as native's tmpfs: the gofer makes a bind mount's
 * target in the image itself, so the target is a directory the image has
 * (the socket's own, or the nearest above it, whose empty directories the
 * tree makes again). On the host only root reaches it: the bundle and the
 * state directory are 0700. The socket is the sandbox user's, mode 0600. */
static int step_bridge(provision *p, airlock_error *err)
{
	gv_sandbox *b = p->b;
	if (!p->spec->bridge)
		return 0;
	int r = exec_bridge_address_check(p->g->cfg.bridge_address, err);
	if (r < 0)
		return r;
	_cleanup_free_ exec_bridge_plan *pl = calloc(1, sizeof(*pl));
	if (!pl)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "its plan");
	_cleanup_close_ int root = open(p->image_path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "opening the image");
	r = exec_bridge_plan_make(root, p->spec->bridge->socket_path, pl, err);
	if (r < 0)
		return r;
	b->bridge_at = strdup(pl->mount_at);
	if (!b->bridge_at)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "its mount's target");
	if (mkdirat(b->dir_fd, GV_BRIDGE_DIR, 0700) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "its directory");
	_cleanup_close_ int dir = openat(b->dir_fd, GV_BRIDGE_DIR,
	                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "its directory");
	int lfd = -1;
	r = exec_bridge_tree_make(dir, pl, GV_SANDBOX_UID, GV_SANDBOX_UID, &lfd, err);
	if (r < 0)
		return r;
	/* The mode of the directory it stands for in the sandbox. */
	if (fchmod(dir, pl->mode) < 0) {
		close(lfd);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "its directory");
	}
	return exec_bridge_start(lfd, p->g->cfg.bridge_address, b->box.id, &b->bridge, err);
}

static int step_bundle(provision *p, airlock_error *err)
{
	return gv_bundle_write(p->g, p->b, p->image_path, p->spec, err);
}

/* The keeper and `runsc run` in the sandbox's cgroups, in a new network
 * namespace holding only lo when the sandbox gets the proxy. */
static int step_start(provision *p, airlock_error *err)
{
	gv_sandbox *b = p->b;
	if (pipe2(p->ready, O_CLOEXEC) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "the ready line's pipe");
	char pid_file[4096 + 16];
	snprintf(pid_file, sizeof(pid_file), "%s/sentry.pid", b->dir);
	const char *words[] = { "run", "--bundle", b->dir, "--pid-file", pid_file, b->box.id };
	char **argv = gv_argv(p->g, b, words, ARRAY_SIZE(words));
	if (!argv)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "runsc's arguments");
	gv_spawn_opts o = {
		.argv = argv, .in_fd = -1, .out_fd = p->ready[1], .err_fd = p->ready[1],
		.cg = b->cg, .keeper = true, .new_netns = b->network_host, .netns_pidfd = -1,
	};
	int r = gv_spawn(&o, NULL, &b->keeper_pidfd, err);
	gv_argv_free(argv);
	close(p->ready[1]);
	p->ready[1] = -1;
	return r;
}

/* The guest's ready line on init's stdout, within the start budget. */
static int step_ready(provision *p, airlock_error *err)
{
	gv_sandbox *b = p->b;
	static const char want[] = AIRLOCK_GUEST_READY;
	char seen[AIRLOCK_GVISOR_READY_READ_MAX + 1];
	size_t n = 0;
	for (;;) {
		int64_t left = p->deadline - util_monotonic_ms();
		if (left <= 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                         "the gvisor sandbox did not start within the start budget");
		struct pollfd pf = { .fd = p->ready[0], .events = POLLIN };
		int k = poll(&pf, 1, (int)(left > 1000 ? 1000 : left));
		if (k <= 0)
			continue;
		if (n == sizeof(seen) - 1) {
			/* Keep the tail: the line may follow runsc's warnings. */
			memmove(seen, seen + sizeof(want), n - sizeof(want));
			n -= sizeof(want);
		}
		ssize_t got = read(p->ready[0], seen + n, sizeof(seen) - 1 - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			/* runsc ended before the guest was ready. Its words carry
			 * host paths: they are not the caller's to read. */
			int st = 0;
			spawn_wait(b->keeper_pidfd, util_monotonic_ms() + GV_KILL_WAIT_MS, &st);
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                         "the gvisor runtime failed to start the sandbox "
			                         "(runsc run exited with status %d)",
			                         WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		}
		n += (size_t)got;
		seen[n] = 0;
		if (memmem(seen, n, want, sizeof(want) - 1))
			break;
	}
	/* The sentry's pid, written by runsc before it started the sandbox;
	 * opened as a pidfd while the sandbox provably runs (it just spoke). */
	char buf[AIRLOCK_GVISOR_PID_FILE_MAX];
	int fd = openat(b->dir_fd, "sentry.pid", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int64_t pid = 0;
	int r = fd < 0 ? -errno : util_pread_small(fd, buf, sizeof(buf));
	if (fd >= 0)
		close(fd);
	if (r >= 0)
		buf[strcspn(buf, "\n")] = 0;
	if (r < 0 || !util_parse_i64(buf, &pid) || pid <= 1 ||
	    (b->sentry_pidfd = sys_pidfd_open((pid_t)pid, 0)) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, r < 0 ? -r : errno,
		                         "the sentry's pid");
	return 0;
}

/* Plant the proxy's listener in the keeper's network namespace (the
 * runtime's: it holds only lo) and hand it to the proxy. With the
 * allowlist the sentry's sockets are host sockets in that namespace, so it
 * first gets the same bounds as a native sandbox's (host_netns_harden),
 * before the guest runs any command. */
static int step_proxy(provision *p, airlock_error *err)
{
	gv_sandbox *b = p->b;
	if (!b->network_host)
		return 0;
	int fd = -1;
	const char *step = NULL;
	int e = host_netns_harden(b->keeper_pidfd, &step);
	if (e < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -e,
		                         "network namespace: %s", step ? step : "thread");
	e = host_netns_listen(b->keeper_pidfd, AIRLOCK_SANDBOX_PROXY_ADDR,
	                          AIRLOCK_SANDBOX_PROXY_PORT, GV_PROXY_BACKLOG, &fd, &step);
	if (e < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -e,
		                         "egress: planting the proxy listener: %s",
		                         step ? step : "thread");
	airlock_proxy_owner owner = {
		.run_id = p->spec->run_id, .tenant_id = p->spec->tenant_id, .environment_id = b->box.id,
	};
	int r = airlock_proxy_attach(p->g->cfg.egress_proxy, fd, &owner, &p->spec->egress, err);
	close(fd);
	if (r == 0)
		b->proxied = true;
	return r;
}

static int step_workspace(provision *p, airlock_error *err)
{
	return host_volume_workspace(p->b->vol, &p->b->box.ws, err);
}

static int step_register(provision *p, airlock_error *err)
{
	return exec_boxes_add(&p->g->m.boxes, &p->b->box, err);
}

static const provision_step provision_steps[] = {
	{ "provision.sandbox", AIRLOCK_ERR_SYSTEM, "sandbox record", step_sandbox },
	{ "provision.egress_policy", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "egress", step_egress_policy },
	{ "provision.image", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "image", step_image },
	{ "provision.cgroups", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "cgroup", step_cgroups },
	{ "provision.sockets", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "socket budget", step_sockets },
	{ "provision.volume", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "workspace volume", step_volume },
	{ "provision.bundle_dir", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "the bundle directory",
	  step_bundle_dir },
	{ "provision.bridge", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "bridge", step_bridge },
	{ "provision.bundle", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "the bundle",
	  step_bundle },
	{ "provision.start", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "starting the runtime",
	  step_start },
	{ "provision.ready", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "the gvisor sandbox", step_ready },
	{ "provision.proxy", AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "egress", step_proxy },
	{ "provision.workspace", AIRLOCK_ERR_SYSTEM, "workspace volume", step_workspace },
	{ "provision.register", AIRLOCK_ERR_SYSTEM, "live sandbox list", step_register },
};

static int provision_run(provision *p, const provision_step *st, airlock_error *err)
{
	int r = exec_step_fault(st->point, st->cls, err);
	if (r == 0)
		r = st->run(p, err);
	return exec_step_said(st->what, r, err);
}

int gv_provision(void *ctx, const airlock_environment_spec *spec,
                 const airlock_environment_handle *handle, airlock_error *err)
{
	airlock_gvisor *g = ctx;
	gv_sandbox *b = calloc(1, sizeof(*b));
	if (!b)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the sandbox's state");
	b->dir_fd = b->keeper_pidfd = b->sentry_pidfd = -1;
	provision p = {
		.g = g, .spec = spec, .handle = handle, .b = b,
		.deadline = util_monotonic_ms() + g->cfg.start_budget_seconds * 1000,
		.ready = { -1, -1 },
	};
	/* The host's file table first, with room for what this sandbox's
	 * memory can hold (host/filetable.h): past it runsc only says it
	 * exited with status 128. */
	int r = host_files_check(spec->limits.memory_bytes, err);
	for (size_t i = 0; i < ARRAY_SIZE(provision_steps) && r == 0; i++)
		r = provision_run(&p, &provision_steps[i], err);
	r = host_files_explain(r, err);
	for (int i = 0; i < 2; i++)
		if (p.ready[i] >= 0)
			close(p.ready[i]);
	if (r < 0) {
		airlock_error derr;
		gv_sandbox_teardown(g, &b->box, &derr);
		gv_sandbox_free(&b->box);
	}
	return r;
}
