/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loop devices, by descriptor (loop.h has the contract).
 *
 * A free device number comes from LOOP_CTL_GET_FREE and is configured in one
 * step with LOOP_CONFIGURE: the backing descriptor, the flags and the size
 * are set atomically, so there is no moment where the device is bound but
 * not yet marked autoclear (LOOP_SET_FD followed by LOOP_SET_STATUS64 has
 * one, and a crash in it leaks the device).
 *
 * The number LOOP_CTL_GET_FREE hands out is only a hint: it is the lowest
 * unbound device, and it stays the answer for every caller until one of
 * them has bound it, so callers that ask at the same time all race for one
 * device; the losers' LOOP_CONFIGURE fails with EBUSY (the device is bound,
 * or another LOOP_CONFIGURE holds its claim). Nothing of ours is attached
 * at that point, so asking again is always safe, but a herd of callers
 * that lose together and ask again together lose again together: 64
 * provisions at once saw up to 14 losses in a row. So the threads of this
 * process take turns (attach_lock): none of them races another, and a race
 * is lost only to another process (losetup, another service). After a lost
 * race the next try is on a device made for it (LOOP_CTL_ADD with -1: the
 * kernel picks a number no device has), not on the lowest free one again:
 * that one may be held by its claimer for a while (a LOOP_CONFIGURE in
 * progress, or an exclusive open), and a device just made is known to no
 * one else until GET_FREE hands it out. Retries are bounded by the devices
 * in use when the attach began, not by a small fixed count.
 */
#include "host/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/syscalls.h"
#include "util/util.h"
#include "util/fault.h"

/* How many races for a device may be lost to other processes, beyond the
 * devices in use when the attach began: each loss means another process
 * bound a device in the window between two syscalls, so more losses than
 * the devices in use plus this many mean something is binding devices as
 * fast as we ask, and giving up with EBUSY is better than spinning.
 * LOOP_CTL_GET_FREE answers the lowest unbound number, so its first answer
 * is the count of devices in use below it. */
#define LOOP_ATTACH_RETRIES_MIN 64
/* The node of a device LOOP_CTL_GET_FREE just created is made by devtmpfs
 * before the ioctl returns on the kernels we run; on a /dev that is filled
 * by a user-space manager it can lag. Wait for it a little, boundedly. */
#define LOOP_NODE_RETRIES 50
#define LOOP_NODE_WAIT_NS (10 * 1000 * 1000)

static void loop_nap(void)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = LOOP_NODE_WAIT_NS };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The threads of this process attach one at a time (see the top). Held
 * from LOOP_CTL_GET_FREE to the end of LOOP_CONFIGURE: a few milliseconds,
 * the time the racing callers spent losing before. */
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;

static int loop_attach_locked(int ctl, const struct loop_config *cfg, bool read_only,
                              host_loop *ret, airlock_error *err);

/* Open /dev/loopN, waiting a bounded time for a node that is not there yet.
 * Returns the descriptor or -errno. */
static int loop_open_node(const char *path, bool read_only)
{
	int flags = (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOCTTY;
	for (int i = 0;; i++) {
		int fd = open(path, flags);
		if (fd >= 0)
			return fd;
		int e = errno;
		if (e == EINTR)
			continue;
		if (e == ENOENT && i < LOOP_NODE_RETRIES) {
			loop_nap();
			continue;
		}
		return -e;
	}
}

/* direct_block_size: 0, or the logical block size of a device that does
 * direct I/O on its backing file (LO_FLAGS_DIRECT_IO). */
static int loop_attach(int backing_fd, bool read_only, unsigned direct_block_size, host_loop *ret,
                       airlock_error *err)
{
	if (backing_fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EBADF, "loop: backing descriptor");

	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC | O_NOCTTY);
	if (ctl < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "loop: open /dev/loop-control");

	/* The backing file is named by descriptor only: lo_file_name stays
	 * empty, so the kernel's status record carries no path of ours.
	 * LO_FLAGS_PARTSCAN stays off: the content is the sandbox's, and the
	 * kernel must never parse a partition table a sandbox wrote.
	 * LO_FLAGS_DIRECT_IO only when asked (host_loop_attach_direct): it
	 * is set here, with the block size, in the one configuring step. */
	struct loop_config cfg = { 0 };
	cfg.fd = (__u32)backing_fd;
	cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | (read_only ? LO_FLAGS_READ_ONLY : 0);
	if (direct_block_size) {
		cfg.info.lo_flags |= LO_FLAGS_DIRECT_IO;
		cfg.block_size = direct_block_size;
	}

	pthread_mutex_lock(&attach_lock);
	int r = loop_attach_locked(ctl, &cfg, read_only, ret, err);
	pthread_mutex_unlock(&attach_lock);
	return r;
}

/* A device number to try: the lowest free one, or after a lost race
 * (fresh) a new device (*made). A kernel that cannot add one (the minor
 * numbers are used up) still has the lowest free one. Returns n or -errno. */
static int loop_pick(int ctl, bool fresh, bool *made)
{
	int n = -1;
	*made = false;
	if (fresh) {
		n = ioctl(ctl, LOOP_CTL_ADD, -1);
		*made = n >= 0;
	}
	if (n < 0)
		n = ioctl(ctl, LOOP_CTL_GET_FREE);
	return n < 0 ? -errno : n;
}

/* Remove device n if nothing holds it: the kernel refuses (EBUSY) a device
 * that is bound or open, so this never takes one from anyone. */
static void loop_remove(int n)
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC | O_NOCTTY);
	if (ctl >= 0) {
		(void)ioctl(ctl, LOOP_CTL_REMOVE, n);
		close(ctl);
	}
}

/* The attach itself, under attach_lock: races are lost only to other
 * processes. */
static int loop_attach_locked(int ctl, const struct loop_config *cfg, bool read_only,
                              host_loop *ret, airlock_error *err)
{
	int last = 0, attempts = 0, bound = -1;
	bool fresh = false;
	char path[sizeof(ret->path)];
	for (; bound < 0 || attempts < bound; attempts++) {
		bool made = false;
		int n = loop_pick(ctl, fresh, &made);
		if (n == -EINTR)
			continue;
		if (n < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -n, "loop: LOOP_CTL_GET_FREE");
		if (bound < 0)
			bound = n + LOOP_ATTACH_RETRIES_MIN;
		snprintf(path, sizeof(path), "/dev/loop%d", n);

		_cleanup_close_ int fd = loop_open_node(path, read_only);
		if (fd < 0) {
			/* A device removed (LOOP_CTL_REMOVE) between GET_FREE and the
			 * open is another lost race; anything else is final. */
			if (fd == -ENXIO || fd == -ENOENT) {
				last = -fd;
				fresh = true;
				continue;
			}
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -fd, "loop: open %s", path);
		}
		if (UTIL_FAULT_CALL("loop.configure", ioctl(fd, LOOP_CONFIGURE, cfg)) < 0) {
			int e = errno;
			/* EBUSY: someone bound this number first, or holds its claim.
			 * Our descriptor on it holds nothing of ours, so dropping it
			 * and asking again cannot disturb their device. */
			if (e == EBUSY || e == EINTR) {
				last = e;
				fresh = fresh || e == EBUSY;
				continue;
			}
			if (made) {
				close(TAKE_FD(fd));
				loop_remove(n);
			}
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "loop: LOOP_CONFIGURE %s",
			                         path);
		}
		*ret = (host_loop){ .fd = TAKE_FD(fd), .number = n, .made = made };
		memcpy(ret->path, path, sizeof(ret->path));
		return 0;
	}
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, last ? last : EBUSY,
	                         "loop: no free device after %d attempts (other processes bound "
	                         "devices as fast as they were asked for)",
	                         attempts);
}

int host_loop_attach(int backing_fd, bool read_only, host_loop *ret, airlock_error *err)
{
	return loop_attach(backing_fd, read_only, 0, ret, err);
}

int host_loop_attach_direct(int backing_fd, unsigned block_size, host_loop *ret,
                            airlock_error *err)
{
	if (block_size == 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "loop: block size 0");
	return loop_attach(backing_fd, false, block_size, ret, err);
}

/* ---- the mount's source name ------------------------------------------------ */

/*
 * A mount's source string is whatever "source" was set to, and a sandbox
 * reads it in /proc/self/mountinfo. "/dev/loop3" would tell every sandbox
 * which loop device number it got, and so how many devices other tenants
 * (and the host) hold and when they come and go. The kernel takes the
 * string as a path (lookup_bdev, relative to the calling thread's working
 * directory), so the name we want is made to resolve: a symlink named
 * `name` in a fresh directory, and the superblock created by a short-lived
 * thread that has its own working directory (unshare(CLONE_FS) detaches
 * only that thread's; the service's other threads never see the change).
 */

typedef struct create_job {
	int fsfd;
	int dir_fd;
	const char *name;
	int err;
	const char *step;
} create_job;

static void *create_thread(void *arg)
{
	create_job *j = arg;
	if (unshare(CLONE_FS) < 0)
		j->err = errno, j->step = "unshare(CLONE_FS)";
	else if (fchdir(j->dir_fd) < 0)
		j->err = errno, j->step = "fchdir";
	else if (sys_fsconfig(j->fsfd, FSCONFIG_SET_STRING, "source", j->name, 0) < 0)
		j->err = errno, j->step = "fsconfig source";
	else if (sys_fsconfig(j->fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		j->err = errno, j->step = "create the filesystem";
	return NULL;
}

int host_loop_create_fs(const host_loop *l, int fsfd, int scratch_dir_fd, const char *name,
                        airlock_error *err)
{
	if (!l || l->fd < 0 || fsfd < 0 || scratch_dir_fd < 0 || !name || !*name ||
	    strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "mount source: bad arguments");
	/* A directory of our own per call: concurrent mounts each resolve the
	 * same name to their own device. */
	char dir[40];
	int r = -EEXIST;
	for (int attempt = 0; attempt < 8 && r == -EEXIST; attempt++) {
		uint64_t tag = 0;
		util_random(&tag, sizeof(tag));
		snprintf(dir, sizeof(dir), ".src-%016llx", (unsigned long long)tag);
		r = mkdirat(scratch_dir_fd, dir, 0700) < 0 ? -errno : 0;
	}
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "mount source: scratch directory");
	int dfd = openat(scratch_dir_fd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "mount source: scratch directory");
		unlinkat(scratch_dir_fd, dir, AT_REMOVEDIR);
		return r;
	}
	create_job j = { .fsfd = fsfd, .dir_fd = dfd, .name = name };
	if (symlinkat(l->path, dfd, name) < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "mount source: symlink");
	} else {
		pthread_t t;
		int e = pthread_create(&t, NULL, create_thread, &j);
		if (e != 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "mount source: thread");
		} else {
			pthread_join(t, NULL);
			if (j.err)
				/* The loop device's path is the host's: not in the
				 * message (gate spec_has_no_host_path). */
				r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, j.err, "mount %s: %s", name,
				                      j.step);
		}
		unlinkat(dfd, name, 0);
	}
	close(dfd);
	unlinkat(scratch_dir_fd, dir, AT_REMOVEDIR);
	return r;
}

void host_loop_release(host_loop *l)
{
	if (!l)
		return;
	/* Autoclear: the kernel detaches the device when its last opener goes.
	 * If a mount still holds it, it is detached when that mount goes, which
	 * is exactly when it stops being needed. */
	if (l->fd >= 0 && l->made) {
		/* Under attach_lock: no attach of ours is between GET_FREE naming
		 * this number and opening it while it goes. Another process's
		 * attach can be, and sees ENXIO or ENOENT, as after anyone's
		 * LOOP_CTL_REMOVE. */
		pthread_mutex_lock(&attach_lock);
		close(l->fd);
		loop_remove(l->number);
		pthread_mutex_unlock(&attach_lock);
	} else if (l->fd >= 0) {
		close(l->fd);
	}
	l->fd = -1;
	l->made = false;
}
