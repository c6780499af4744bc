/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The native mechanism's adapter: provision, execute, destroy, in that order
 * of trust. The kernel facilities live one per file (cgroup.c, volume.c,
 * loop.c, seccomp.c, child.c); this file runs them in order.
 */
#include "airlock/native.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/egress.h"
#include "airlock/envbuild.h"
#include "airlock/image.h"
#include "core/snapshot.h"
#include "host/cgroup/cgroup.h"
#include "host/crash_sweep.h"
#include "host/loop.h"
#include "exec/native/native_internal.h"
#include "exec/native/seccomp.h"
#include "exec/native/starter.h"
#include "host/volume.h"
#include "util/util.h"

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

/* The planted proxy listener's accept queue (see plant_thread). */
#define NATIVE_PROXY_BACKLOG 64
/* Kept fanotify groups, in this process (see kept_arm). */
#define NATIVE_KEPT_GROUPS_MAX 32
static atomic_int kept_groups;

/* The image mount's source as the sandbox's mountinfo shows it. */
#define NATIVE_IMAGE_SOURCE_NAME "airlock-image"

/* How often the execute loop reads the limit counters. */
#define NATIVE_POLL_MS 20
/* Bound on draining output after the command's group is empty. */
#define NATIVE_DRAIN_MS 2000
/* Bound on waiting for a killed group to empty. */
#define NATIVE_KILL_WAIT_MS 5000
/* How long the workspace must stay full while the command runs before it
 * is killed with DISK (README, "Kill reasons"): a filler that keeps trying
 * is killed, one that stops at ENOSPC exits first and the rule at its exit
 * decides, whatever the 20 ms sampling caught. */
#define NATIVE_DISK_HOLD_MS 500

typedef struct native_image {
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	int file_fd;
	host_loop loop;
} native_image;

typedef struct sandbox {
	char id[AIRLOCK_ENVIRONMENT_ID_MAX];
	char *tenant_id;
	airlock_resource_limits limits;
	uint32_t slot;
	uid_t host_id;
	pid_t init_pid;
	int init_pidfd;
	int lifeline_w;  /* our end of init's lifeline; closing it ends the sandbox */
	pthread_mutex_t start_lock; /* orders "is it dead?" with starting a command */
	host_cgroup *cg;
	host_volume *vol;
	airlock_workspace *ws;
	char **envp; /* "NAME=value", NULL-terminated, from the spec; PWD replaced per command */
	size_t n_env;
	bool proxied;   /* attached to the egress proxy: detach at teardown */
	/* files_changed: the last command's after-walk, and the fanotify group
	 * that has watched the volume since just before that walk (see
	 * kept_take). The snapshot is owned by n->lock while stored here; the
	 * group lives as long as the sandbox and is used only by the one
	 * execute in flight. */
	airlock_snapshot kept;
	bool kept_valid; /* kept holds a walk the group has watched since */
	int kept_fan;    /* -1: no group (yet, or fanotify is missing) */
	unsigned refs;  /* the list's reference + one per execute in flight */
	bool dead;      /* destroyed: no new execute may start */
} sandbox;

struct airlock_native {
	airlock_native_config cfg;
	int last_cap; /* the kernel's highest capability number */
	char *image_store_path;
	airlock_image_store *images;
	native_seccomp seccomp;
	int volume_dir_fd;
	int starter_fd;   /* the sealed memfd every command is started through (starter.h) */
	int shutdown_efd; /* readable once the service is stopping */
	pthread_mutex_t lock;
	pthread_cond_t idle;
	sandbox **boxes;
	size_t n_boxes;
	native_image *imgs;
	size_t n_imgs;
	unsigned char *slots; /* bitmap of host-id slots in use here (our locks do not
	                       * conflict with each other: one description) */
	int id_lock_fd;       /* the host-wide host-id lock file */
	unsigned executing;
};

/* ---- small helpers -------------------------------------------------------- */

static int write_file_at(int dirfd, const char *name, const char *data)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(data);
	ssize_t n = write(fd, data, len);
	int e = n == (ssize_t)len ? 0 : (n < 0 ? errno : EIO);
	close(fd);
	return -e;
}

static int send_msg(int fd, int kind)
{
	native_msg m = { .kind = kind };
	return send(fd, &m, sizeof(m), MSG_NOSIGNAL) == (ssize_t)sizeof(m) ? 0 : -errno;
}

/* Receive one message within deadline (monotonic ms). -ETIMEDOUT, -EPIPE
 * (the child died), or 0. */
static int recv_msg(int fd, int64_t deadline, native_msg *m)
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

/* A child's failure message, or the timeout, as an error. */
static int child_error(const char *what, int r, const native_msg *m, airlock_error *err)
{
	if (r == -ETIMEDOUT)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "%s did not finish within the start budget", what);
	if (r == 0 && m->kind == NATIVE_MSG_FAILED)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, m->value,
		                         "%s: %s", what, native_step_name(m->step));
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, r < 0 ? -r : EPROTO,
	                         "%s: lost contact with the child", what);
}

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* SIGKILL through the pidfd and reap; never blocks forever. */
static void kill_and_reap(int pidfd)
{
	if (pidfd < 0)
		return;
	syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	siginfo_t si;
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	poll(&p, 1, NATIVE_KILL_WAIT_MS);
	waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG);
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
	if (access("/dev/loop-control", R_OK | W_OK) < 0) {
		snprintf(why, size, "no /dev/loop-control: loop devices are needed for images and workspaces");
		return -ENOTSUP;
	}
	int fd = (int)syscall(SYS_fsopen, "erofs", FSOPEN_CLOEXEC);
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
	n->volume_dir_fd = -1;
	n->starter_fd = -1;
	n->id_lock_fd = -1;
	n->shutdown_efd = -1;
	pthread_mutex_init(&n->lock, NULL);
	pthread_cond_init(&n->idle, NULL);
	if (n->cfg.start_budget_seconds <= 0)
		n->cfg.start_budget_seconds = 30;
	n->slots = calloc(NATIVE_HOST_ID_SLOTS / 8, 1);
	n->image_store_path = strdup(cfg->image_store ? cfg->image_store : "/var/lib/airlock/images");
	if (!n->slots || !n->image_store_path) {
		native_free(n);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "native");
	}
	int r = airlock_image_store_open(n->image_store_path, &n->images, err);
	if (r < 0)
		goto fail;
	r = native_seccomp_build(&n->seccomp, err);
	if (r < 0)
		goto fail;
	r = native_starter_open(&n->starter_fd, err);
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
	/* The volumes' backing files are unnamed (O_TMPFILE): this directory
	 * only picks the filesystem they live on. */
	const char *vdir = cfg->volume_dir ? cfg->volume_dir : AIRLOCK_NATIVE_VOLUME_DIR;
	if (mkdir(vdir, 0700) < 0 && errno != EEXIST) {
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                      "native: the volume directory");
		goto fail;
	}
	n->volume_dir_fd = open(vdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	n->shutdown_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (n->volume_dir_fd < 0 || n->shutdown_efd < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno, "native: setup");
		goto fail;
	}
	struct stat st;
	if (fstat(n->volume_dir_fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 077)) {
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "native: the volume directory must be owned by root with mode 0700");
		goto fail;
	}
	/* Whatever a crashed earlier run left: its cgroups (killing what is in
	 * them). Its loop devices autoclear and its backing files were never
	 * named, so they went with the processes. */
	unsigned removed = 0;
	r = host_crash_sweep(n->images, &removed, err);
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
	pthread_mutex_lock(&n->lock);
	size_t c = n->n_boxes;
	pthread_mutex_unlock(&n->lock);
	return c;
}

/* ---- images --------------------------------------------------------------- */

/* A fresh detached read-only mount of the image for one sandbox. The loop
 * device is shared by every sandbox of the image; each mount of it shares
 * the one superblock. Caller holds the lock. */
static int image_mount(airlock_native *n, const char *digest, int *ret_fd, airlock_error *err)
{
	native_image *img = NULL;
	for (size_t i = 0; i < n->n_imgs; i++)
		if (strcmp(n->imgs[i].digest, digest) == 0)
			img = &n->imgs[i];
	if (img) {
		/* Cheap re-verification: the store re-hashes only when the file's
		 * identity or ctime changed since it was verified. */
		int fd = -1;
		int r = airlock_image_open_verified(n->images, digest, &fd, err);
		if (r < 0)
			return r;
		struct stat a, b;
		bool same = fstat(fd, &a) == 0 && fstat(img->file_fd, &b) == 0 && a.st_ino == b.st_ino &&
		            a.st_dev == b.st_dev;
		close(fd);
		if (!same)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "image %s was replaced in the store after it was first used",
			                         digest);
	} else {
		native_image *p = reallocarray(n->imgs, n->n_imgs + 1, sizeof(*p));
		if (!p)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "image");
		n->imgs = p;
		native_image fresh = { .file_fd = -1, .loop = { .fd = -1 } };
		snprintf(fresh.digest, sizeof(fresh.digest), "%s", digest);
		int r = airlock_image_open_verified(n->images, digest, &fresh.file_fd, err);
		if (r < 0)
			return r;
		r = host_loop_attach(fresh.file_fd, true, &fresh.loop, err);
		if (r < 0) {
			close(fresh.file_fd);
			return r;
		}
		n->imgs[n->n_imgs++] = fresh;
		img = &n->imgs[n->n_imgs - 1];
	}

	_cleanup_close_ int fs = (int)syscall(SYS_fsopen, "erofs", FSOPEN_CLOEXEC);
	if (fs < 0 ||
	    /* The loop device is read-only; so is the superblock. */
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, errno,
		                         "image %s does not mount as erofs", digest);
	/* The source the sandbox sees in its mountinfo is this name, not
	 * "/dev/loopN" (loop.c: the number tells of other tenants' devices). */
	if (host_loop_create_fs(&img->loop, fs, n->volume_dir_fd, NATIVE_IMAGE_SOURCE_NAME, err) <
	    0) {
		char why[sizeof(err->message)];
		snprintf(why, sizeof(why), "%s", err->message);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "image %s does not mount as erofs (%s)", digest, why);
	}
	int m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
	                     MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (m < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "image %s: fsmount", digest);
	*ret_fd = m;
	return 0;
}

/* ---- sandboxes ------------------------------------------------------------ */

static void sandbox_free(sandbox *b)
{
	if (!b)
		return;
	pthread_mutex_destroy(&b->start_lock);
	airlock_snapshot_clear(&b->kept);
	if (b->kept_fan >= 0) {
		close(b->kept_fan);
		atomic_fetch_sub(&kept_groups, 1);
	}
	free(b->tenant_id);
	if (b->envp)
		for (size_t i = 0; i < b->n_env; i++)
			free(b->envp[i]);
	free(b->envp);
	free(b);
}

/* Tear a sandbox down in the specification's order: the processes (the
 * sandbox), then the workspace volume. Returns SandboxEscapeSuspected when a
 * process survives. Caller owns b and no execute is in flight. */
static int sandbox_teardown(airlock_native *n, sandbox *b, airlock_error *err)
{
	int r = 0;
	/* The proxy's copy of the listener keeps the network namespace alive:
	 * it lets go first. A proxy that is gone holds nothing. */
	if (b->proxied) {
		airlock_error derr;
		airlock_proxy_detach(n->cfg.egress_proxy, b->id, &derr);
		b->proxied = false;
	}
	if (b->cg) {
		r = host_cgroup_destroy(b->cg, NATIVE_KILL_WAIT_MS, err);
		b->cg = NULL;
	}
	if (b->lifeline_w >= 0) {
		close(b->lifeline_w);
		b->lifeline_w = -1;
	}
	if (b->init_pidfd >= 0) {
		kill_and_reap(b->init_pidfd);
		close(b->init_pidfd);
		b->init_pidfd = -1;
	}
	airlock_workspace_free(b->ws);
	b->ws = NULL;
	host_volume_destroy(b->vol);
	b->vol = NULL;
	pthread_mutex_lock(&n->lock);
	if (b->host_id && r == 0) {
		/* Every process that ran as this id is gone (init reaped, its
		 * pid namespace with it): the id may be handed out again. When
		 * one survived (SandboxEscapeSuspected) the slot stays taken for
		 * this service's life, so no other sandbox on the host ever runs
		 * as the id a live process of this one still holds. */
		struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = b->slot,
			            .l_len = 1 };
		(void)fcntl(n->id_lock_fd, F_OFD_SETLK, &fl);
		n->slots[b->slot / 8] &= (unsigned char)~(1u << (b->slot % 8));
	}
	pthread_mutex_unlock(&n->lock);
	b->host_id = 0;
	return r;
}

/* Caller holds the lock. A slot is ours when our bitmap says it is free
 * (our own locks never conflict with each other) and the host-wide lock on
 * its byte is granted (no other service holds it). 0, -EAGAIN when every
 * slot is taken, or another -errno. */
static int slot_take(airlock_native *n, uint32_t *ret)
{
	uint32_t start = 0;
	util_random(&start, sizeof(start));
	for (uint32_t i = 0; i < NATIVE_HOST_ID_SLOTS; i++) {
		uint32_t s = (start + i) % NATIVE_HOST_ID_SLOTS;
		if (n->slots[s / 8] & (1u << (s % 8)))
			continue;
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = s, .l_len = 1 };
		if (fcntl(n->id_lock_fd, F_OFD_SETLK, &fl) < 0) {
			if (errno == EAGAIN || errno == EACCES || errno == EINTR)
				continue; /* another service's sandbox has it */
			return -errno;
		}
		n->slots[s / 8] |= (unsigned char)(1u << (s % 8));
		*ret = s;
		return 0;
	}
	return -EAGAIN;
}

static int build_envp(sandbox *b, const airlock_env *env, bool proxied, airlock_error *err)
{
	/* +2: PWD (set per command) and the NULL; + the proxy variables. */
	b->envp = calloc(env->n + 2 + AIRLOCK_SANDBOX_PROXY_VARS_N, sizeof(char *));
	if (!b->envp)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "environment");
	/* Tier 2 wins: with the proxy, its variables replace any tier-1 value. */
	for (size_t i = 0; proxied && i < AIRLOCK_SANDBOX_PROXY_VARS_N; i++) {
		if (asprintf(&b->envp[b->n_env], "%s=%s", airlock_sandbox_proxy_vars[i],
		             AIRLOCK_SANDBOX_PROXY_URL) < 0) {
			b->envp[b->n_env] = NULL;
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "environment");
		}
		b->n_env++;
	}
	for (size_t i = 0; i < env->n; i++) {
		if (strcmp(env->vars[i].name, "PWD") == 0 ||
		    (proxied && airlock_sandbox_proxy_var(env->vars[i].name)))
			continue;
		if (asprintf(&b->envp[b->n_env], "%s=%s", env->vars[i].name, env->vars[i].value) < 0) {
			b->envp[b->n_env] = NULL;
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "environment");
		}
		b->n_env++;
	}
	return 0;
}

static int write_id_maps(pid_t pid, uid_t host_id, airlock_error *err)
{
	char dir[64], map[64];
	snprintf(dir, sizeof(dir), "/proc/%d", (int)pid);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno, "user namespace");
	/* One id each way: the sandbox user and nothing else. Root inside is
	 * unmapped, and setgroups is denied for good. */
	snprintf(map, sizeof(map), "%u %u 1\n", NATIVE_SANDBOX_UID, (unsigned)host_id);
	int r = write_file_at(dfd, "setgroups", "deny");
	if (r == 0)
		r = write_file_at(dfd, "uid_map", map);
	snprintf(map, sizeof(map), "%u %u 1\n", NATIVE_SANDBOX_GID, (unsigned)host_id);
	if (r == 0)
		r = write_file_at(dfd, "gid_map", map);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -r,
		                         "user namespace: id maps");
	return 0;
}

/* ---- egress ---------------------------------------------------------------- */

typedef struct plant {
	int pidfd;  /* init's pidfd: its network namespace is the sandbox's */
	int fd;     /* the listener, or -1 */
	int err;
	const char *step;
} plant;

/* Runs on a thread of its own: setns(CLONE_NEWNET) changes only the calling
 * thread, so the service's other threads never see the sandbox's namespace,
 * and if returning to ours fails this thread ends without running anything
 * else there. */
static void *plant_thread(void *arg)
{
	plant *p = arg;
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0) {
		p->err = errno, p->step = "open our network namespace";
		return NULL;
	}
	if (setns(p->pidfd, CLONE_NEWNET) < 0) {
		p->err = errno, p->step = "setns into the sandbox";
		close(self);
		return NULL;
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(AIRLOCK_SANDBOX_PROXY_PORT) };
	inet_pton(AF_INET, AIRLOCK_SANDBOX_PROXY_ADDR, &sa.sin_addr);
	if (fd < 0)
		p->err = errno, p->step = "socket";
	else if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		p->err = errno, p->step = "bind";
	/* A short queue: a connection waiting in it is established, takes the
	 * client's bytes into its receive buffer, and belongs to no memory
	 * cgroup until the proxy accepts it; past the accept rate the proxy
	 * leaves connections waiting there, so SOMAXCONN (4096) would let a
	 * sandbox pin ~200 MB of host TCP memory outside its limits. Past
	 * this many, the kernel drops the SYN and the client retries. */
	else if (listen(fd, NATIVE_PROXY_BACKLOG) < 0)
		p->err = errno, p->step = "listen";
	if (setns(self, CLONE_NEWNET) < 0 && !p->err)
		p->err = errno, p->step = "setns back";
	close(self);
	if (p->err && fd >= 0)
		close(fd);
	else
		p->fd = fd;
	return NULL;
}

/* Plant the proxy's listener in the sandbox's namespace (the sandbox still
 * has no route and no resolver: lo and this socket are all there is) and
 * hand it to the proxy with this sandbox's copy of the policy. */
static int proxy_plant(airlock_native *n, sandbox *b, const airlock_environment_spec *spec,
                       airlock_error *err)
{
	/* Entered through init's pidfd (setns accepts one since Linux 5.8): the
	 * process, not a pid that could name another one. */
	plant p = { .pidfd = b->init_pidfd, .fd = -1 };
	pthread_t t;
	int e = pthread_create(&t, NULL, plant_thread, &p);
	if (e != 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, e, "egress: thread");
	pthread_join(t, NULL);
	if (p.fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, p.err,
		                         "egress: planting the proxy listener: %s", p.step);
	airlock_proxy_owner owner = {
		.run_id = spec->run_id, .tenant_id = spec->tenant_id, .environment_id = b->id,
	};
	int r = airlock_proxy_attach(n->cfg.egress_proxy, p.fd, &owner, &spec->egress, err);
	close(p.fd); /* the proxy holds its own copy now */
	if (r == 0)
		b->proxied = true;
	return r;
}

static int native_provision(void *ctx, const airlock_environment_spec *spec,
                            const airlock_environment_handle *handle, airlock_error *err)
{
	airlock_native *n = ctx;
	int64_t deadline = util_monotonic_ms() + n->cfg.start_budget_seconds * 1000;
	sandbox *b = calloc(1, sizeof(*b));
	if (!b)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "provision");
	snprintf(b->id, sizeof(b->id), "%s", handle->environment_id);
	b->limits = spec->limits;
	b->init_pidfd = -1;
	b->lifeline_w = -1;
	b->kept_fan = -1;
	pthread_mutex_init(&b->start_lock, NULL);
	b->refs = 1;
	b->tenant_id = strdup(spec->tenant_id);
	int image_fd = -1;
	int sv[2] = { -1, -1 };
	int lifeline_r = -1;
	int r;
	if (!b->tenant_id) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "provision");
		goto fail;
	}
	/* The two yeses, decided before anything is created. */
	bool proxied = false;
	if (spec->egress.mode == AIRLOCK_EGRESS_ALLOWLIST) {
		static const airlock_egress_policy deny = { .mode = AIRLOCK_EGRESS_DENY };
		r = airlock_egress_policy_covers(n->cfg.egress_policy ? n->cfg.egress_policy : &deny,
		                                 &spec->egress, err);
		if (r < 0)
			goto fail;
		if (!n->cfg.egress_proxy) {
			r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                      "egress: no egress proxy is running for this service");
			goto fail;
		}
		proxied = spec->egress.n_destinations > 0;
	}
	r = build_envp(b, &spec->environment, proxied, err);
	if (r < 0)
		goto fail;

	pthread_mutex_lock(&n->lock);
	r = slot_take(n, &b->slot);
	if (r == 0) {
		b->host_id = NATIVE_HOST_ID_BASE + b->slot;
		r = image_mount(n, spec->image_digest, &image_fd, err);
	} else if (r == -EAGAIN) {
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "no free sandbox user ids: %u sandboxes are live on this host",
		                      NATIVE_HOST_ID_SLOTS);
	} else {
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -r,
		                      "sandbox user ids: locking a slot in the host-wide lock file");
	}
	pthread_mutex_unlock(&n->lock);
	if (r < 0)
		goto fail;

	r = host_volume_create(n->volume_dir_fd, spec->limits.workspace_bytes,
	                         spec->limits.inodes_max, b->host_id, b->host_id, &b->vol, err);
	if (r < 0)
		goto fail;
	r = host_volume_workspace(b->vol, &b->ws, err);
	if (r < 0)
		goto fail;
	r = host_cgroup_create(b->id, &spec->limits, &b->cg, err);
	if (r < 0)
		goto fail;

	char tmp_options[64];
	snprintf(tmp_options, sizeof(tmp_options), "size=%" PRId64 ",mode=1777",
	         spec->limits.memory_bytes);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "provision");
		goto fail;
	}
	/* init's lifeline: we keep the write end for the sandbox's life and
	 * never write it; when this process dies the kernel closes it and init,
	 * seeing the hang-up, ends the sandbox. */
	int life[2];
	if (pipe2(life, O_CLOEXEC) < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "provision: lifeline");
		goto fail;
	}
	lifeline_r = life[0];
	b->lifeline_w = life[1];
	native_init_args ia = {
		.sync_fd = sv[1],
		.image_mount_fd = image_fd,
		.volume_mount_fd = host_volume_mount_fd(b->vol),
		.tmp_options = tmp_options,
		.seccomp = &n->seccomp,
		.last_cap = n->last_cap,
		.host_id = b->host_id,
		.lifeline_fd = lifeline_r,
	};
	/* clone3 rather than fork: the namespaces are created with the child,
	 * and a pidfd comes back with it, so no pid is ever reused under us. */
	struct clone_args ca = {
		.flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
		         CLONE_PIDFD,
		.pidfd = (uint64_t)(uintptr_t)&b->init_pidfd,
		.exit_signal = SIGCHLD,
	};
	pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno, "provision: clone3");
		goto fail;
	}
	if (pid == 0) {
		close(sv[0]);
		native_init_main(&ia);
	}
	b->init_pid = pid;
	close(sv[1]);
	sv[1] = -1;
	close(lifeline_r);
	lifeline_r = -1;
	close(image_fd);
	image_fd = -1;

	/* The cgroup before anything runs, so every page init touches is
	 * charged to the sandbox. */
	r = host_cgroup_enter_init(b->cg, pid, err);
	if (r < 0)
		goto fail;
	if (send_msg(sv[0], NATIVE_MSG_GO) < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno, "provision: sync");
		goto fail;
	}
	native_msg m = { 0 };
	r = recv_msg(sv[0], deadline, &m);
	if (r < 0 || m.kind != NATIVE_MSG_MAP) {
		r = child_error("provision: sandbox init", r, &m, err);
		goto fail;
	}
	r = write_id_maps(pid, b->host_id, err);
	if (r < 0)
		goto fail;
	if (send_msg(sv[0], NATIVE_MSG_MAPPED) < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno, "provision: sync");
		goto fail;
	}
	r = recv_msg(sv[0], deadline, &m);
	if (r < 0 || m.kind != NATIVE_MSG_READY) {
		r = child_error("provision: sandbox init", r, &m, err);
		goto fail;
	}
	close(sv[0]);
	sv[0] = -1;

	if (proxied) {
		r = proxy_plant(n, b, spec, err);
		if (r < 0)
			goto fail;
	}

	pthread_mutex_lock(&n->lock);
	sandbox **p = reallocarray(n->boxes, n->n_boxes + 1, sizeof(*p));
	if (p) {
		n->boxes = p;
		n->boxes[n->n_boxes++] = b;
	}
	pthread_mutex_unlock(&n->lock);
	if (!p) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "provision");
		goto fail;
	}
	return 0;
fail:
	if (lifeline_r >= 0)
		close(lifeline_r);
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	if (image_fd >= 0)
		close(image_fd);
	{
		airlock_error derr;
		sandbox_teardown(n, b, &derr);
	}
	sandbox_free(b);
	return r;
}

/* Find a live sandbox and take a reference. */
static sandbox *sandbox_get(airlock_native *n, const char *id)
{
	sandbox *b = NULL;
	pthread_mutex_lock(&n->lock);
	for (size_t i = 0; i < n->n_boxes; i++)
		if (strcmp(n->boxes[i]->id, id) == 0 && !n->boxes[i]->dead) {
			b = n->boxes[i];
			b->refs++;
			break;
		}
	pthread_mutex_unlock(&n->lock);
	return b;
}

static void sandbox_put(airlock_native *n, sandbox *b)
{
	pthread_mutex_lock(&n->lock);
	bool last = --b->refs == 0;
	pthread_mutex_unlock(&n->lock);
	if (last) {
		airlock_error derr;
		sandbox_teardown(n, b, &derr);
		sandbox_free(b);
	}
}

/* ---- execute -------------------------------------------------------------- */

typedef struct stream {
	int fd;
	util_buf buf;
	bool truncated;
} stream;

/* Read what is there; true when the cap was hit. */
static bool stream_read(stream *s)
{
	unsigned char chunk[65536];
	for (;;) {
		ssize_t r = read(s->fd, chunk, sizeof(chunk));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
				close(s->fd);
				s->fd = -1;
			}
			return false;
		}
		if (util_buf_append(&s->buf, chunk, (size_t)r) != 0) {
			/* The cap: stop reading; the caller kills the command. */
			s->truncated = true;
			close(s->fd);
			s->fd = -1;
			return true;
		}
	}
}

/* A write to the command's stdin that cannot raise SIGPIPE: a command that
 * does not read its input (or exits before reading all of it) is not an
 * error, and the service must not die of it whatever its embedding process
 * did with SIGPIPE. The signal is blocked on this thread for the write, and
 * one the write raised is taken off the thread's pending set before the
 * mask is restored; EPIPE is what the caller sees. */
static ssize_t write_stdin_nosigpipe(int fd, const void *p, size_t n)
{
	sigset_t pipe_set, old, pending;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
	ssize_t w = write(fd, p, n);
	int e = errno;
	if (w < 0 && e == EPIPE && !was_pending) {
		const struct timespec zero = { 0, 0 };
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return w;
}

static int make_cwd(const char *rel, char *out, size_t size)
{
	if (strcmp(rel, ".") == 0)
		return snprintf(out, size, "%s", AIRLOCK_WORKSPACE_ROOT) < (int)size ? 0 : -ENAMETOOLONG;
	return snprintf(out, size, "%s/%s", AIRLOCK_WORKSPACE_ROOT, rel) < (int)size ? 0 : -ENAMETOOLONG;
}

/* Start the command in the sandbox; returns its pidfd via *ret_pidfd. */
static int start_command(airlock_native *n, sandbox *b, const airlock_execution_command *cmd,
                         char *const *envp, const char *cwd, int in_r, int out_w, int err_w,
                         int exec_err_w, int *ret_pidfd, airlock_error *err)
{
	int64_t deadline = util_monotonic_ms() + n->cfg.start_budget_seconds * 1000;
	/* The starter's argv: its marker, then the command's (starter.h). */
	_cleanup_free_ char **sargv = calloc(cmd->argc + 2, sizeof(*sargv));
	if (!sargv)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "execute");
	sargv[0] = (char *)(uintptr_t)NATIVE_STARTER_ARGV0;
	for (size_t i = 0; i < cmd->argc; i++)
		sargv[i + 1] = cmd->argv[i];
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "execute");
	native_cmd_args ca = {
		.sync_fd = sv[1], .init_pidfd = b->init_pidfd,
		.stdin_fd = in_r, .stdout_fd = out_w, .stderr_fd = err_w, .exec_err_fd = exec_err_w,
		.starter_fd = n->starter_fd,
		.argv = sargv, .envp = envp, .cwd = cwd, .seccomp = &n->seccomp,
		.fsize_limit = (uint64_t)b->limits.workspace_bytes,
		.last_cap = n->last_cap,
	};
	pid_t h = fork();
	if (h < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, e, "execute: fork");
	}
	if (h == 0) {
		close(sv[0]);
		native_cmd_main(&ca);
	}
	close(sv[1]);
	int r = host_cgroup_enter_cmd(b->cg, h, err);
	native_msg m = { 0 };
	if (r == 0 && send_msg(sv[0], NATIVE_MSG_GO) < 0)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno, "execute: sync");
	if (r == 0) {
		int rr = recv_msg(sv[0], deadline, &m);
		if (rr < 0 || m.kind != NATIVE_MSG_PID)
			r = child_error("execute: starting the command", rr, &m, err);
	}
	close(sv[0]);
	/* The starter exits right after reporting (or failing); reap it. A
	 * command it may have started before we gave up must not run
	 * unobserved: the cmd group is emptied. */
	if (r < 0) {
		kill(h, SIGKILL);
		host_cgroup_kill_cmd(b->cg, NATIVE_KILL_WAIT_MS, NULL);
	}
	while (waitpid(h, NULL, 0) < 0 && errno == EINTR)
		;
	if (r < 0)
		return r;
	int pfd = pidfd_open_((pid_t)m.value);
	if (pfd < 0) {
		int e = errno;
		host_cgroup_kill_cmd(b->cg, NATIVE_KILL_WAIT_MS, NULL);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, e,
		                         "execute: pidfd of the command");
	}
	*ret_pidfd = pfd;
	return 0;
}

/* ---- files_changed's kept snapshot ------------------------------------------
 * Between two commands nothing runs in the sandbox (every process of a
 * command is killed before its result is computed), so the volume can
 * change only through the service's workspace handle (a tool's write).
 * The walk after one command is therefore the walk before the next one,
 * unless something wrote in between: a fanotify group with a mark on the
 * volume's filesystem (the superblock: every mount of it, every path)
 * is armed before the after-walk, and any event it holds at the next
 * command's start, or an overflow, or any doubt, means walk again. The
 * walk itself only reads, and reads are not in the mask. The group reports
 * file handles (FAN_REPORT_FID), never open descriptors, lives as long as
 * the sandbox and is drained before each after-walk (kept_arm). Groups
 * count against host root's fs.fanotify.max_user_groups (128 by default),
 * which every root daemon shares, so one service keeps at most
 * NATIVE_KEPT_GROUPS_MAX of them; past that, and where fanotify is
 * missing, both walks are made, as before. */

#define KEPT_FAN_MASK                                                                              \
	(FAN_MODIFY | FAN_ATTRIB | FAN_CLOSE_WRITE | FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM |    \
	 FAN_MOVED_TO | FAN_DELETE_SELF | FAN_MOVE_SELF | FAN_ONDIR)

/* Arm the sandbox's group just before an after-walk: made at the first
 * command, then kept for the sandbox's life and drained instead, because
 * closing a fanotify group waits for the kernel's notification grace
 * period (measured here: 0.3 ms per make and close on average, 16 ms at
 * worst), which every execute would pay. The command's processes are all
 * gone by now and fanotify queues an event synchronously with the write
 * that makes it, so what remains in the queue after the drain is a change
 * made after this point. False when it cannot be armed (no fanotify, or a
 * queue that does not empty within the bound): the next command walks
 * twice. */
#define KEPT_DRAIN_READS_MAX 4096 /* x 4 KiB: more than the 16384 events a queue holds */

static bool kept_arm(sandbox *b, int rootfd)
{
	if (b->kept_fan < 0) {
		if (atomic_fetch_add(&kept_groups, 1) >= NATIVE_KEPT_GROUPS_MAX) {
			atomic_fetch_sub(&kept_groups, 1);
			return false;
		}
		int fan = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_CLOEXEC | FAN_NONBLOCK,
		                        O_RDONLY | O_CLOEXEC);
		if (fan < 0) {
			atomic_fetch_sub(&kept_groups, 1);
			return false;
		}
		/* "." beneath the root: the root descriptor is O_PATH, which
		 * fanotify_mark refuses as the object itself (EBADF). */
		if (fanotify_mark(fan, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, KEPT_FAN_MASK, rootfd,
		                  ".") < 0) {
			close(fan);
			atomic_fetch_sub(&kept_groups, 1);
			return false;
		}
		b->kept_fan = fan;
		return true;
	}
	char buf[4096];
	for (int i = 0; i < KEPT_DRAIN_READS_MAX; i++) {
		ssize_t got = read(b->kept_fan, buf, sizeof(buf));
		if (got < 0 && errno == EAGAIN)
			return true;
		if (got <= 0 && errno != EINTR)
			return false;
	}
	return false;
}

/* Take the kept snapshot if the volume has not changed since it was made;
 * false (and nothing taken) otherwise. */
static bool kept_take(airlock_native *n, sandbox *b, airlock_snapshot *ret)
{
	pthread_mutex_lock(&n->lock);
	airlock_snapshot s = b->kept;
	bool valid = b->kept_valid;
	b->kept = (airlock_snapshot){ 0 };
	b->kept_valid = false;
	pthread_mutex_unlock(&n->lock);
	if (!valid || b->kept_fan < 0) {
		airlock_snapshot_clear(&s);
		return false;
	}
	/* Any event at all, or any error but "none queued", is a change (the
	 * read consumes some events; the next arm drains the rest). */
	char buf[256];
	ssize_t got = read(b->kept_fan, buf, sizeof(buf));
	bool clean = got < 0 && errno == EAGAIN;
	if (!clean) {
		airlock_snapshot_clear(&s);
		return false;
	}
	*ret = s;
	return true;
}

/* A kept snapshot stays in the service while the sandbox is idle, one per
 * sandbox: only one of at most this many bytes is kept (entries and path
 * text; 8 MiB is ~60,000 entries of 100-byte paths). A larger workspace
 * is walked twice, as before. */
#define NATIVE_KEPT_BYTES_MAX ((size_t)8 << 20)

static void kept_store(airlock_native *n, sandbox *b, airlock_snapshot *s)
{
	size_t bytes = s->alloc * sizeof(*s->entries);
	for (size_t i = 0; i < s->n && bytes <= NATIVE_KEPT_BYTES_MAX; i++)
		bytes += strlen(s->entries[i].path) + 1;
	if (bytes > NATIVE_KEPT_BYTES_MAX)
		return; /* the caller clears s */
	pthread_mutex_lock(&n->lock);
	airlock_snapshot old = b->kept;
	b->kept = *s;
	b->kept_valid = true;
	pthread_mutex_unlock(&n->lock);
	*s = (airlock_snapshot){ 0 };
	airlock_snapshot_clear(&old);
}

/* The workspace volume's fullness, sampled while a command runs. */
typedef struct disk_watch {
	uint64_t bfree0, ffree0; /* at the command's start */
	bool moved;              /* not full, or the counts moved, at some sample */
	int64_t full_since;      /* monotonic ms of the first of the full samples now running; 0 */
} disk_watch;

static int disk_sample(sandbox *b, disk_watch *d, bool first, int64_t now, bool *ret_full,
                       airlock_error *err)
{
	bool full = false;
	int r = host_volume_full(b->vol, &full, err);
	struct statfs s;
	if (r == 0 && fstatfs(host_volume_root_fd(b->vol), &s) < 0)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "workspace volume: fstatfs");
	if (r < 0)
		return r;
	if (first) {
		d->bfree0 = s.f_bfree;
		d->ffree0 = s.f_ffree;
	}
	d->moved = d->moved || !full || s.f_bfree != d->bfree0 || s.f_ffree != d->ffree0;
	if (!full)
		d->full_since = 0;
	else if (!d->full_since)
		d->full_since = now;
	*ret_full = full;
	return 0;
}

static int native_execute(void *ctx, const airlock_environment_handle *handle,
                          const airlock_exec_request *req, airlock_execution_result *ret,
                          airlock_error *err)
{
	airlock_native *n = ctx;
	const airlock_execution_command *cmd = req->command;
	int64_t start = util_monotonic_ms();
	sandbox *b = sandbox_get(n, handle->environment_id);
	if (!b)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0, "environment %s is gone",
		                         handle->environment_id);
	if (!util_streq0(b->tenant_id, handle->tenant_id)) {
		sandbox_put(n, b);
		return airlock_error_set(err, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
		                         "environment %s belongs to another tenant", handle->environment_id);
	}
	pthread_mutex_lock(&n->lock);
	n->executing++;
	pthread_mutex_unlock(&n->lock);

	int rootfd = host_volume_root_fd(b->vol);
	int pipes[4][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 } };
	stream out = { .fd = -1 }, errs = { .fd = -1 };
	util_buf_init(&out.buf, (size_t)cmd->maximum_output_bytes);
	util_buf_init(&errs.buf, (size_t)cmd->maximum_output_bytes);
	airlock_snapshot before = { 0 }, after = { 0 };
	int pidfd = -1;
	char **envp = NULL;
	/* Declared before the first goto: a cleanup variable jumped over
	 * would be freed uninitialized. */
	_cleanup_free_ char *pwd = NULL;
	airlock_kill_reason kill_reason = AIRLOCK_KILL_NONE;
	int64_t cmd_start = 0, cmd_end = 0;
	bool armed = false;
	int r;

	r = host_volume_check_identity(b->vol, err);
	if (r < 0)
		goto out;
	if (!kept_take(n, b, &before)) {
		r = airlock_snapshot_walk(rootfd, (size_t)b->limits.inodes_max + 16,
		                          AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &before, err);
		if (r < 0)
			goto out;
	}

	/* The working directory is resolved here, through the volume's own
	 * descriptor and while this execute holds the sandbox, so a symlink
	 * the sandbox planted is refused rather than followed. */
	if (strcmp(cmd->working_directory, ".") != 0) {
		_cleanup_free_ char *resolved = NULL;
		r = airlock_workspace_resolve(b->ws, cmd->working_directory,
		                              strlen(cmd->working_directory), &resolved, err);
		if (r < 0)
			goto out;
	}
	char cwd[AIRLOCK_PATH_MAX + 16];
	if (make_cwd(cmd->working_directory, cwd, sizeof(cwd)) < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_WORKSPACE_ESCAPE, 0, "working_directory is too long");
		goto out;
	}
	envp = calloc(b->n_env + 2, sizeof(char *));
	if (!envp) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "execute");
		goto out;
	}
	memcpy(envp, b->envp, b->n_env * sizeof(char *));
	if (asprintf(&pwd, "PWD=%s", cwd) < 0) {
		pwd = NULL;
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "execute");
		goto out;
	}
	envp[b->n_env] = pwd;

	for (int i = 0; i < 4; i++)
		if (pipe2(pipes[i], O_CLOEXEC) < 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "execute: pipes");
			goto out;
		}
	/* 0: stdin, 1: stdout, 2: stderr, 3: exec error report. */
	uint64_t oom0 = 0, pids0 = 0;
	disk_watch disk = { 0 };
	bool full = false;
	if ((r = host_cgroup_oom_kills(b->cg, &oom0, err)) < 0 ||
	    (r = host_cgroup_pids_max_events(b->cg, &pids0, err)) < 0 ||
	    (r = disk_sample(b, &disk, true, util_monotonic_ms(), &full, err)) < 0)
		goto out;

	int64_t timeout_at = start + req->effective_timeout_ms;
	int64_t expiry_at = start + (req->expires_at_ms - util_now_ms());
	/* duration_ms is the command's own time: from here to the end of its
	 * output, not the walks and hashing around it. */
	cmd_start = util_monotonic_ms();
	/* Checked and started under one lock: a destroy that has marked the
	 * sandbox dead is never followed by a new command in it. */
	pthread_mutex_lock(&b->start_lock);
	if (b->dead)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                      "environment %s was destroyed", handle->environment_id);
	else
		r = start_command(n, b, cmd, envp, cwd, pipes[0][0], pipes[1][1], pipes[2][1],
		                  pipes[3][1], &pidfd, err);
	pthread_mutex_unlock(&b->start_lock);
	/* The child ends of the pipes are the command's now (or nobody's). */
	for (int i = 0; i < 4; i++) {
		close(pipes[i][i == 0 ? 0 : 1]);
		pipes[i][i == 0 ? 0 : 1] = -1;
	}
	if (r < 0)
		goto out;

	out.fd = pipes[1][0];
	errs.fd = pipes[2][0];
	pipes[1][0] = pipes[2][0] = -1;
	fcntl(out.fd, F_SETFL, O_NONBLOCK);
	fcntl(errs.fd, F_SETFL, O_NONBLOCK);
	int in_w = pipes[0][1];
	pipes[0][1] = -1;
	fcntl(in_w, F_SETFL, O_NONBLOCK);
	size_t in_off = 0;
	if (!cmd->has_stdin || cmd->stdin_len == 0) {
		close(in_w);
		in_w = -1;
	}

	bool exited = false, killed = false;
	int64_t exited_at = 0;
	siginfo_t si = { 0 };
	for (;;) {
		struct pollfd p[6];
		int np = 0, i_out = -1, i_err = -1, i_in = -1, i_pid = -1;
		if (out.fd >= 0)
			p[i_out = np++] = (struct pollfd){ .fd = out.fd, .events = POLLIN };
		if (errs.fd >= 0)
			p[i_err = np++] = (struct pollfd){ .fd = errs.fd, .events = POLLIN };
		if (in_w >= 0)
			p[i_in = np++] = (struct pollfd){ .fd = in_w, .events = POLLOUT };
		if (!exited)
			p[i_pid = np++] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
		/* Once a reason is set these stay readable; polling them then
		 * would spin. */
		if (req->cancel && !kill_reason)
			p[np++] = (struct pollfd){ .fd = airlock_cancel_fd(req->cancel), .events = POLLIN };
		if (!kill_reason)
			p[np++] = (struct pollfd){ .fd = n->shutdown_efd, .events = POLLIN };
		if (exited && out.fd < 0 && errs.fd < 0) {
			cmd_end = util_monotonic_ms();
			break;
		}
		/* Every writer is dead once the group is empty; a copy of a pipe
		 * held a moment longer by a concurrent fork must not hang us. */
		if (exited && killed && util_monotonic_ms() - exited_at > NATIVE_DRAIN_MS) {
			cmd_end = util_monotonic_ms();
			break;
		}
		poll(p, (nfds_t)np, NATIVE_POLL_MS);

		if (i_out >= 0 && p[i_out].revents && stream_read(&out) && !kill_reason)
			kill_reason = AIRLOCK_KILL_OUTPUT_LIMIT;
		if (i_err >= 0 && p[i_err].revents && stream_read(&errs) && !kill_reason)
			kill_reason = AIRLOCK_KILL_OUTPUT_LIMIT;
		if (i_in >= 0 && p[i_in].revents) {
			ssize_t w = write_stdin_nosigpipe(in_w, cmd->stdin_data + in_off,
			                                  cmd->stdin_len - in_off);
			if (w > 0)
				in_off += (size_t)w;
			if ((w < 0 && errno != EAGAIN && errno != EINTR) || in_off == cmd->stdin_len) {
				close(in_w);
				in_w = -1;
			}
		}
		if (i_pid >= 0 && p[i_pid].revents &&
		    waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG) == 0 && si.si_pid) {
			exited = true;
			exited_at = util_monotonic_ms();
		}

		/* The limits, in the order the specification lists them. The first
		 * reason found wins; later ones are consequences of the kill. */
		if (!kill_reason) {
			int64_t now = util_monotonic_ms();
			uint64_t v = 0;
			if (!exited && disk_sample(b, &disk, false, now, &full, NULL) < 0)
				full = false;
			if (!exited && now >= expiry_at)
				kill_reason = AIRLOCK_KILL_EXPIRED;
			else if (!exited && now >= timeout_at)
				kill_reason = AIRLOCK_KILL_TIMEOUT;
			else if (host_cgroup_oom_kills(b->cg, &v, NULL) == 0 && v > oom0)
				kill_reason = AIRLOCK_KILL_MEMORY;
			else if (host_cgroup_pids_max_events(b->cg, &v, NULL) == 0 && v > pids0)
				kill_reason = AIRLOCK_KILL_PIDS;
			else if (!exited && full && disk.moved &&
			         now - disk.full_since >= NATIVE_DISK_HOLD_MS)
				/* Full for the hold time while it runs, after this
				 * command filled it (it was not full, or its counts
				 * moved): a filler that keeps trying. A volume full
				 * from before and left alone kills nothing. */
				kill_reason = AIRLOCK_KILL_DISK;
			else if (!exited && airlock_cancel_fired(req->cancel))
				kill_reason = AIRLOCK_KILL_CANCELLED;
			else if (!exited) {
				/* Looked at, never read: it stays readable for every
				 * other execute in flight. */
				struct pollfd sp = { .fd = n->shutdown_efd, .events = POLLIN };
				if (poll(&sp, 1, 0) > 0)
					kill_reason = AIRLOCK_KILL_SERVICE_SHUTDOWN;
			}
		}
		/* Every process the command started dies with it or with the
		 * kill: nothing runs unobserved between commands. */
		if ((kill_reason || exited) && !killed) {
			killed = true;
			r = host_cgroup_kill_cmd(b->cg, NATIVE_KILL_WAIT_MS, err);
			if (r < 0)
				goto out;
		}
	}
	if (in_w >= 0)
		close(in_w);

	/* The exec report: EOF means the command was executed. */
	int32_t report[2] = { 0, 0 };
	fcntl(pipes[3][0], F_SETFL, O_NONBLOCK);
	if (read(pipes[3][0], report, sizeof(report)) != sizeof(report))
		report[1] = 0;

	/* The walk after, before the reason: the rule at exit for DISK asks
	 * whether the command changed the workspace. */
	r = host_volume_check_identity(b->vol, err);
	if (r < 0)
		goto out;
	/* Armed before the walk: a change after this point, by anyone, is an
	 * event; the command's processes are all gone by now. */
	armed = kept_arm(b, rootfd);
	r = airlock_snapshot_walk(rootfd, (size_t)b->limits.inodes_max + 16,
	                          AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &after, err);
	if (r < 0)
		goto out;
	/* The rule at exit (README, "Kill reasons"): a command that exited on
	 * its own with a failure, leaving the volume full, having changed the
	 * workspace, met the limit: DISK. Decided on the state after every
	 * process is gone, which the sampling cannot race: the same command
	 * from the same workspace gets the same reason. One that exits 0
	 * finished its work; one that changed nothing (`false` in a full
	 * workspace) failed for a reason of its own. */
	bool failed = si.si_code != CLD_EXITED || si.si_status != 0;
	if (!kill_reason && !report[1] && failed &&
	    host_volume_full(b->vol, &full, NULL) == 0 && full &&
	    airlock_snapshot_differs(&before, &after))
		kill_reason = AIRLOCK_KILL_DISK;

	if (kill_reason) {
		ret->killed_by = kill_reason;
		ret->has_exit_code = false;
	} else if (report[1]) {
		/* Like a shell: the command never ran, status 127, and why on
		 * stderr. The names are quoted (control bytes escaped, a long one
		 * cut with its length shown), so the message always fits: an
		 * argv[0] of any size never turns it into silence. */
		char msg[AIRLOCK_WORKSPACE_QUOTE_MAX + 256], q[AIRLOCK_WORKSPACE_QUOTE_MAX];
		int len = report[0] == NATIVE_STEP_CWD
		                  ? snprintf(msg, sizeof(msg), "airlock: working directory %s: %s\n",
		                             airlock_workspace_quote(cwd, strlen(cwd), q),
		                             strerror(report[1]))
		          : report[0] == NATIVE_STEP_EXEC
		                  ? snprintf(msg, sizeof(msg), "airlock: cannot execute %s: %s\n",
		                             airlock_workspace_quote(cmd->argv[0], strlen(cmd->argv[0]), q),
		                             strerror(report[1]))
		                  : snprintf(msg, sizeof(msg), "airlock: starting the command: %s: %s\n",
		                             native_step_name(report[0]), strerror(report[1]));
		if (len < 0)
			len = 0;
		/* Bounded above; should it ever not be, the cut message still says why. */
		util_buf_append(&errs.buf, msg, (size_t)len < sizeof(msg) ? (size_t)len : sizeof(msg) - 1);
		ret->has_exit_code = true;
		ret->exit_code = 127;
	} else {
		ret->has_exit_code = true;
		/* A signal the service did not send (the program crashed or killed
		 * itself) is an exit of its own: the shell's 128 + signal. */
		ret->exit_code = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
	}
	ret->timed_out = kill_reason == AIRLOCK_KILL_TIMEOUT;
	ret->stdout_truncated = out.truncated;
	ret->stderr_truncated = errs.truncated;

	/* At most the volume's size is hashed: the real data it can hold.
	 * RLIMIT_FSIZE already keeps any one file under it. And for at most
	 * AIRLOCK_SNAPSHOT_HASH_MS: holes are free to make and cost their
	 * apparent size to hash, so the byte budget alone is seconds. */
	r = airlock_snapshot_diff(&before, &after, (size_t)req->files_changed_max,
	                          (uint64_t)b->limits.workspace_bytes,
	                          util_monotonic_ms() + AIRLOCK_SNAPSHOT_HASH_MS,
	                          airlock_snapshot_hash_fd, &rootfd, ret, err);
	if (r < 0)
		goto out;
	ret->stdout_data = util_buf_steal(&out.buf, &ret->stdout_len);
	ret->stderr_data = util_buf_steal(&errs.buf, &ret->stderr_len);
	if (!ret->stdout_data || !ret->stderr_data)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "execute");
	ret->duration_ms = cmd_end - cmd_start;
	if (r == 0 && armed)
		kept_store(n, b, &after);
out:
	if (pidfd >= 0) {
		if (r < 0)
			host_cgroup_kill_cmd(b->cg, NATIVE_KILL_WAIT_MS, NULL);
		waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG);
		close(pidfd);
	}
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 2; j++)
			if (pipes[i][j] >= 0)
				close(pipes[i][j]);
	if (out.fd >= 0)
		close(out.fd);
	if (errs.fd >= 0)
		close(errs.fd);
	util_buf_clear(&out.buf);
	util_buf_clear(&errs.buf);
	airlock_snapshot_clear(&before);
	airlock_snapshot_clear(&after);
	free(envp);
	pthread_mutex_lock(&n->lock);
	if (--n->executing == 0)
		pthread_cond_broadcast(&n->idle);
	pthread_mutex_unlock(&n->lock);
	sandbox_put(n, b);
	return r;
}

/* ---- destroy, workspace, free --------------------------------------------- */

static int native_destroy(void *ctx, const char *environment_id, airlock_error *err)
{
	airlock_native *n = ctx;
	sandbox *b = NULL;
	pthread_mutex_lock(&n->lock);
	for (size_t i = 0; i < n->n_boxes; i++)
		if (strcmp(n->boxes[i]->id, environment_id) == 0) {
			b = n->boxes[i];
			memmove(&n->boxes[i], &n->boxes[i + 1], (n->n_boxes - i - 1) * sizeof(*n->boxes));
			n->n_boxes--;
			b->dead = true;
			break;
		}
	pthread_mutex_unlock(&n->lock);
	if (!b)
		return 0; /* already gone */
	pthread_mutex_lock(&b->start_lock);
	b->dead = true;
	pthread_mutex_unlock(&b->start_lock);
	/* Kill first, even with an execute in flight: its loop sees the command
	 * die and returns; the last reference frees the rest. */
	int r = 0;
	if (b->cg)
		r = host_cgroup_kill_cmd(b->cg, NATIVE_KILL_WAIT_MS, err);
	pthread_mutex_lock(&n->lock);
	bool last = --b->refs == 0;
	pthread_mutex_unlock(&n->lock);
	if (last) {
		int t = sandbox_teardown(n, b, err);
		if (r == 0)
			r = t;
		sandbox_free(b);
	}
	return r;
}

static int native_workspace(void *ctx, const char *environment_id, airlock_workspace **ret,
                            airlock_error *err)
{
	airlock_native *n = ctx;
	airlock_workspace *ws = NULL;
	/* The reference is taken under the lock destroy takes the sandbox out
	 * of the list with, so it is never taken on a freed workspace. */
	pthread_mutex_lock(&n->lock);
	for (size_t i = 0; i < n->n_boxes; i++)
		if (strcmp(n->boxes[i]->id, environment_id) == 0 && !n->boxes[i]->dead)
			ws = airlock_workspace_ref(n->boxes[i]->ws);
	pthread_mutex_unlock(&n->lock);
	if (!ws)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0, "environment %s is gone",
		                         environment_id);
	*ret = ws;
	return 0;
}

/* Commands in flight end with SERVICE_SHUTDOWN: their loops poll this
 * eventfd, which stays readable. */
static void native_shutdown(void *ctx)
{
	airlock_native *n = ctx;
	if (n && n->shutdown_efd >= 0) {
		uint64_t one = 1;
		ssize_t w = write(n->shutdown_efd, &one, sizeof(one));
		(void)w;
	}
}

static void native_free(void *ctx)
{
	airlock_native *n = ctx;
	if (!n)
		return;
	/* The core calls shutdown first; a direct free still ends what runs. */
	native_shutdown(n);
	pthread_mutex_lock(&n->lock);
	while (n->executing > 0)
		pthread_cond_wait(&n->idle, &n->lock);
	sandbox **boxes = n->boxes;
	size_t nb = n->n_boxes;
	n->boxes = NULL;
	n->n_boxes = 0;
	pthread_mutex_unlock(&n->lock);
	for (size_t i = 0; i < nb; i++) {
		airlock_error derr;
		sandbox_teardown(n, boxes[i], &derr);
		sandbox_free(boxes[i]);
	}
	free(boxes);
	for (size_t i = 0; i < n->n_imgs; i++) {
		host_loop_release(&n->imgs[i].loop);
		close(n->imgs[i].file_fd);
	}
	free(n->imgs);
	native_seccomp_clear(&n->seccomp);
	airlock_image_store_free(n->images);
	if (n->volume_dir_fd >= 0)
		close(n->volume_dir_fd);
	if (n->starter_fd >= 0)
		close(n->starter_fd);
	if (n->id_lock_fd >= 0)
		close(n->id_lock_fd);
	if (n->shutdown_efd >= 0)
		close(n->shutdown_efd);
	free(n->slots);
	free(n->image_store_path);
	pthread_mutex_destroy(&n->lock);
	pthread_cond_destroy(&n->idle);
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
};

const airlock_exec_ops *airlock_native_ops(void)
{
	return &native_ops;
}
