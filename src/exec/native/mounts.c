/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's mounts, both halves. The service's: a detached read-only
 * mount of the image (host/image_mount.h) and the sizes of the memory-backed
 * mounts. The child's: init, in its own mount namespace, assembles the root
 * from the image, /proc, a minimal /dev, /dev/shm, /tmp and the workspace,
 * and pivots into it. The child's half runs between fork and exec: system
 * calls only, no allocation (native_internal.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "exec/native/native_internal.h"
#include "exec/native/service.h"
#include "util/syscalls.h"

/* The image mount's source as the sandbox's mountinfo shows it. */
#define NATIVE_IMAGE_SOURCE_NAME "airlock-image"

/* ---- the service's half ---------------------------------------------------- */

int native_mounts_image(airlock_native *n, const char *digest, int *ret_fd, airlock_error *err)
{
	pthread_mutex_lock(&n->m.lock);
	/* The source the sandbox sees in its mountinfo is this name, not
	 * "/dev/loopN" (loop.c: the number tells of other tenants' devices). */
	int r = host_image_mount(&n->m.imgs, n->m.images, digest, n->m.volume_dir_fd,
	                         NATIVE_IMAGE_SOURCE_NAME, ret_fd, err);
	pthread_mutex_unlock(&n->m.lock);
	return r;
}

void native_mounts_tmp_options(const airlock_resource_limits *limits, char *buf, size_t size)
{
	snprintf(buf, size, "size=%" PRId64 ",mode=1777", limits->memory_bytes);
}

/* ---- the child's half -------------------------------------------------------- */

int native_mounts_private(void)
{
	/* Nothing mounted here may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return NATIVE_STEP_PRIVATE;
	return 0;
}

static int mknod_dev(const char *path, unsigned major_, unsigned minor_)
{
	if (mknod(path, S_IFCHR | 0666, makedev(major_, minor_)) < 0)
		return -1;
	return chmod(path, 0666);
}

int native_mounts_build_root(const native_init_args *a)
{
	/* A scratch tmpfs, private to this namespace, to assemble the root in. */
	if (mount("airlock", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	          "size=64k,nr_inodes=64,mode=0700") < 0 ||
	    mkdir("/tmp/root", 0700) < 0)
		return NATIVE_STEP_STAGING;
	if (sys_move_mount(a->image_mount_fd, "", AT_FDCWD, "/tmp/root", MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return NATIVE_STEP_ROOT;

	/* We are pid 1 of the new pid namespace, so this proc shows only the
	 * sandbox; hidepid=invisible hides other users' processes and
	 * subset=pid leaves out /proc/sys and the rest of the host's knobs. */
	if (mount("proc", "/tmp/root/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	          "hidepid=invisible,subset=pid") < 0)
		return NATIVE_STEP_PROC;

	/* /dev: the five harmless character devices and the usual links, on a
	 * tmpfs made read-only afterwards. No host path is bound in. */
	if (mount("airlock-dev", "/tmp/root/dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
	          "size=64k,nr_inodes=64,mode=0755") < 0 ||
	    mknod_dev("/tmp/root/dev/null", 1, 3) < 0 || mknod_dev("/tmp/root/dev/zero", 1, 5) < 0 ||
	    mknod_dev("/tmp/root/dev/full", 1, 7) < 0 || mknod_dev("/tmp/root/dev/random", 1, 8) < 0 ||
	    mknod_dev("/tmp/root/dev/urandom", 1, 9) < 0 ||
	    symlink("/proc/self/fd", "/tmp/root/dev/fd") < 0 ||
	    symlink("/proc/self/fd/0", "/tmp/root/dev/stdin") < 0 ||
	    symlink("/proc/self/fd/1", "/tmp/root/dev/stdout") < 0 ||
	    symlink("/proc/self/fd/2", "/tmp/root/dev/stderr") < 0 ||
	    mkdir("/tmp/root/dev/shm", 01777) < 0)
		return NATIVE_STEP_DEV;
	if (mount("airlock-shm", "/tmp/root/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	          a->tmp_options) < 0)
		return NATIVE_STEP_SHM;
	if (mount(NULL, "/tmp/root/dev", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
	          NULL) < 0)
		return NATIVE_STEP_DEV;
	/* tmpfs pages are charged to the sandbox's memory cgroup. */
	if (mount("airlock-tmp", "/tmp/root/tmp", "tmpfs", MS_NOSUID | MS_NODEV, a->tmp_options) < 0)
		return NATIVE_STEP_TMP;
	if (sys_move_mount(a->volume_mount_fd, "", AT_FDCWD, "/tmp/root/workspace",
	                   MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return NATIVE_STEP_WORKSPACE;
	/* The bridge's tmpfs, last, over a directory of the image (the plan
	 * keeps it clear of the mounts above, exec/bridge.h). Read-only once
	 * in place: the service made the socket and the directories in it,
	 * and connecting to a socket needs no write access to its
	 * filesystem. */
	if (a->bridge_mount_fd >= 0 &&
	    (sys_move_mount(a->bridge_mount_fd, "", AT_FDCWD, a->bridge_target,
	                    MOVE_MOUNT_F_EMPTY_PATH) < 0 ||
	     mount(NULL, a->bridge_target, NULL,
	           MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0))
		return NATIVE_STEP_BRIDGE;

	/* Swap roots and drop the host's tree from this namespace entirely. */
	if (chdir("/tmp/root") < 0 || sys_pivot_root(".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
	    chdir("/") < 0)
		return NATIVE_STEP_PIVOT;
	return 0;
}
