/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's workspace volume (volume.h has the contract;
 * docs/design-notes.md, "The workspace").
 *
 * create:   unnamed sparse file -> loop device -> mkfs.ext4 (or, for a shape
 *           formatted before, mkfs's bytes written from memory) -> detached
 *           mount -> root owned by the sandbox user, lost+found removed
 * destroy:  drop the mount -> punch every block of the file -> discard the
 *           loop device -> release it -> close the file
 *
 * Nothing here has or produces a directory path. The backing file is
 * O_TMPFILE (no name, so it vanishes with its last descriptor, also when the
 * service crashes), the loop device is bound by descriptor, and the mount is
 * never attached to any tree the service can see. The one path string is
 * the loop device's "/dev/loopN", which names a device, not a place where
 * workspace files live, and which mkfs needs. The mount's source, which the
 * sandbox reads in mountinfo, is "airlock-workspace": a symlink to the
 * device that exists, in a root-only scratch directory under the backing
 * directory, only while the superblock is created (loop.c).
 *
 * mkfs and the cache of formatted images are volume_mkfs.c.
 *
 * Sizes, as mkfs.ext4 makes them (measured with tests/test_native_volume.c):
 *   - inodes: we ask for inodes_max plus ext4's ten reserved inodes (the
 *     root is one of them) and remove lost+found, so the sandbox can create
 *     at least inodes_max files; ext4 rounds the count up to whole inode
 *     table blocks per block group (16 inodes of 256 bytes a block).
 *   - bytes: the file is exactly workspace_bytes (rounded down to 4 KiB), so
 *     a sandbox can never make it take more of the host's disk than that;
 *     inode tables, bitmaps and ext4's small reserve for metadata come out
 *     of it, so a little less is writable as file data (97.6% at 64 MiB,
 *     99.0% at 4 GiB/100000 inodes).
 */
#include "host/volume.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "airlock/volume.h"
#include "host/loop.h"
#include "host/volume_state.h"
#include "util/run.h"
#include "util/syscalls.h"
#include "util/util.h"
#include "util/fault.h"

#define VOLUME_INODE_SIZE AIRLOCK_VOLUME_INODE_SIZE
/* mkfs.ext4 refuses a filesystem of 64 KiB with these options and accepts
 * 256 KiB; a floor of 1 MiB leaves room for a root directory and a file. */
#define VOLUME_MIN_BYTES ((int64_t)1 << 20)
/* ext4 counts inodes in 32 bits; keep clear of the top. */
#define VOLUME_MAX_INODES ((int64_t)UINT32_MAX - 65536)

/* ---- direct I/O ------------------------------------------------------------
 * The loop driver reads and writes the backing file like any program: by
 * default through the page cache, where those pages are charged to the
 * loop's worker (the root memory cgroup), not to the sandbox. Everything a
 * sandbox writes would then sit in the host's memory twice, once as the
 * workspace file's pages (charged to the sandbox, bounded by its
 * memory_bytes) and once as the backing file's (charged to nobody, bounded
 * by nothing: measured, a --memory 64M sandbox writing 2,500 MiB grew the
 * host's page cache by 3.4-4.0 GiB). With direct I/O the loop device goes
 * to the backing file's blocks without caching them, so the workspace's
 * data is cached once, in the sandbox's own cgroup.
 *
 * Direct I/O through the loop needs the device's logical block size to be
 * at least the backing filesystem's direct-I/O alignment: 4096, the
 * volume's ext4 block size, is both. A backing filesystem that cannot do
 * direct I/O is refused (a configuration error naming the directory's
 * filesystem): the fallback would be the unbounded cache above.
 *
 * The formatted image (written with pwrite before the device exists, at
 * most AIRLOCK_VOLUME_IMAGE_MAX) went through the cache. A direct read of
 * the loop device writes back any cached dirty range of the file before
 * reading it (the kernel keeps direct and buffered I/O of one file
 * coherent), so no flush is needed here; the advice drops what is clean
 * and starts the rest on its way out. */
static int volume_direct_io(host_volume *v, airlock_error *err)
{
	/* LOOP_CONFIGURE takes LO_FLAGS_DIRECT_IO as a wish: where the
	 * backing file cannot do it, the device is configured buffered. The
	 * status says what it does. */
	struct loop_info64 info;
	if (ioctl(v->loop.fd, LOOP_GET_STATUS64, &info) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "workspace volume: loop status");
	if (!(info.lo_flags & LO_FLAGS_DIRECT_IO))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "workspace volume: the backing directory's filesystem "
		                         "does not support direct I/O, so the volume's data "
		                         "would be cached outside the sandbox's memory limit");
	(void)posix_fadvise(v->backing_fd, 0, 0, POSIX_FADV_DONTNEED);
	return 0;
}

/* ---- mounting -------------------------------------------------------------- */

/* The filesystem context keeps the kernel's own explanation of a failed
 * fsconfig; append the first message to the error (it names the option and
 * the device, never a directory). */
static int volume_fs_error(int fsfd, airlock_error *err, int e, const char *step)
{
	char log[AIRLOCK_VOLUME_FS_LOG_MAX];
	ssize_t n = read(fsfd, log, sizeof(log) - 1);
	if (n > 0) {
		char shown[160];
		util_escape(shown, sizeof(shown), log, (size_t)n);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "workspace volume: %s (%s)", step,
		                         shown);
	}
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "workspace volume: %s", step);
}

/* The workspace mount's source, as /proc/self/mountinfo shows it in the
 * sandbox: a name of ours, not the loop device's number (loop.c says why). */
#define VOLUME_SOURCE_NAME "airlock-workspace"

/* Mount the device detached; returns the fsmount descriptor via ret.
 * scratch_dir_fd: a root-only directory for naming the source (loop.c). */
static int volume_mount(const host_loop *loop, int scratch_dir_fd, int *ret, airlock_error *err)
{
	_cleanup_close_ int fsfd = UTIL_FAULT_CALL("volume.mount", sys_fsopen("ext4", FSOPEN_CLOEXEC));
	if (fsfd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "workspace volume: fsopen ext4");

	/* errors=remount-ro: if the kernel ever finds this filesystem
	 * inconsistent it stops writing rather than carrying on (continue) or
	 * taking the host down (panic).
	 * nobarrier: a flush would become an fsync of the backing file on the
	 * host's disk; the workspace dies with the sandbox and its file has no
	 * name to survive a host crash under, so durability buys nothing and a
	 * sandbox calling fsync in a loop would only load the host's disk.
	 * noinit_itable: the inode tables mkfs left unwritten already read as
	 * zeros (a sparse file); a background thread zeroing them would only
	 * allocate 25 MiB of backing blocks per 100000 inodes. */
	if (sys_fsconfig(fsfd, FSCONFIG_SET_STRING, "errors", "remount-ro", 0) < 0)
		return volume_fs_error(fsfd, err, errno, "fsconfig errors=remount-ro");
	if (sys_fsconfig(fsfd, FSCONFIG_SET_FLAG, "nobarrier", NULL, 0) < 0)
		return volume_fs_error(fsfd, err, errno, "fsconfig nobarrier");
	if (sys_fsconfig(fsfd, FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0) < 0)
		return volume_fs_error(fsfd, err, errno, "fsconfig noinit_itable");
	if (host_loop_create_fs(loop, fsfd, scratch_dir_fd, VOLUME_SOURCE_NAME, err) < 0) {
		char step[sizeof(err->message)];
		snprintf(step, sizeof(step), "%s", err ? err->message : "mount ext4 from the loop device");
		return volume_fs_error(fsfd, err, err ? err->errnum : EIO, step);
	}

	/* nosuid, nodev: nothing the sandbox writes can raise privilege or
	 * reach a device. exec stays allowed: a program compiled in the
	 * workspace must run. */
	int mfd = sys_fsmount(fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mfd < 0)
		return volume_fs_error(fsfd, err, errno, "fsmount");
	*ret = mfd;
	return 0;
}

/* Hand the root to the sandbox user and leave it empty. */
static int volume_prepare_root(int mount_fd, uid_t uid, gid_t gid, int64_t inodes,
                               airlock_error *err)
{
	/* The mount is detached and only we hold it, so nothing can have
	 * replaced its root or planted an entry between mkfs and here. */
	_cleanup_close_ int dfd = UTIL_FAULT_CALL(
		"volume.root", openat(mount_fd, ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
	if (dfd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "workspace volume: open root");
	if (fchown(dfd, uid, gid) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "workspace volume: chown root to %u:%u", (unsigned)uid,
		                         (unsigned)gid);
	if (fchmod(dfd, 0755) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "workspace volume: chmod root");
	/* lost+found is for fsck, which never runs on a volume that lives as
	 * long as a sandbox; it costs an inode and shows in every listing. */
	if (unlinkat(dfd, "lost+found", AT_REMOVEDIR) < 0 && errno != ENOENT)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "workspace volume: remove lost+found");

	/* The contract is that the sandbox can create inodes_max files; mkfs
	 * only rounds up, and this proves it did. */
	struct statfs sfs;
	if (fstatfs(dfd, &sfs) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "workspace volume: fstatfs");
	if ((int64_t)sfs.f_ffree < inodes)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO,
		                         "workspace volume: mkfs made %" PRIu64
		                         " free inodes, fewer than the %" PRId64 " asked for",
		                         (uint64_t)sfs.f_ffree, inodes);
	return 0;
}

/* ---- the volume ------------------------------------------------------------ */

static host_volume *volume_new(void)
{
	host_volume *v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	v->backing_fd = -1;
	v->loop.fd = -1;
	v->loop.number = -1;
	v->mount_fd = -1;
	v->root_fd = -1;
	return v;
}

static void volume_destroyp(host_volume **v)
{
	host_volume_destroy(*v);
}

int host_volume_create(int backing_dir_fd, int64_t bytes, int64_t inodes, uid_t uid, gid_t gid,
                       host_volume **ret, airlock_error *err)
{
	if (backing_dir_fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EBADF,
		                         "workspace volume: backing directory");
	bytes -= bytes % VOLUME_BLOCK;
	if (bytes < VOLUME_MIN_BYTES)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "workspace_bytes: the native workspace volume needs at least "
		                         "%" PRId64 " bytes",
		                         VOLUME_MIN_BYTES);
	if (inodes <= 0 || inodes > VOLUME_MAX_INODES)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "inodes_max: %" PRId64 " is outside 1..%" PRId64, inodes,
		                         VOLUME_MAX_INODES);
	inodes = airlock_volume_workspace_inodes(bytes, inodes);

	__attribute__((cleanup(volume_destroyp))) host_volume *v = volume_new();
	if (!v)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "workspace volume");

	/* A sparse file takes no space until written, so the host's free space
	 * is the real bound: a volume on a filesystem with less room than it
	 * may fill would turn a disk filler into I/O errors instead of ENOSPC
	 * (the DISK kill reason). Refuse while the service is out of room. */
	struct statfs host;
	if (fstatfs(backing_dir_fd, &host) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "workspace volume: fstatfs backing directory");
	uint64_t avail = (uint64_t)host.f_bavail * (uint64_t)host.f_bsize;
	if (avail < (uint64_t)bytes)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "workspace volume: %" PRIu64 " bytes free for backing files, "
		                         "less than the %" PRId64 " a workspace may use",
		                         avail, bytes);

	/* O_TMPFILE: the file never has a name, so no path to it exists to
	 * leak or to be reached, and it is freed when its last descriptor
	 * closes, including when the service dies. 0600 and never linked. */
	v->backing_fd = UTIL_FAULT_CALL("volume.backing_file",
	                                openat(backing_dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
	if (v->backing_fd < 0) {
		int e = errno;
		if (e == EOPNOTSUPP || e == EISDIR)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "workspace volume: the backing directory's filesystem "
			                         "does not support O_TMPFILE");
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e,
		                         "workspace volume: create backing file");
	}
	if (ftruncate(v->backing_fd, (off_t)bytes) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "workspace volume: size backing file");
	v->bytes = bytes;
	/* Destroy erases by punching the file; a filesystem that cannot would
	 * leave the blocks behind, so find out now, on an empty file where the
	 * punch changes nothing. */
	if (fallocate(v->backing_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes) <
	    0) {
		int e = errno;
		if (e == EOPNOTSUPP)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "workspace volume: the backing directory's filesystem "
			                         "cannot punch holes, so a volume could not be erased");
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "workspace volume: punch test");
	}
	/* Reserve every byte now: sparse volumes would overcommit the host's
	 * disk, and the sandbox that filled the last of it would see its
	 * writes lost to I/O errors (and take the host's disk with it) instead
	 * of ENOSPC in its own workspace. Allocated extents read as zeros, so
	 * the lazy formatting below stays correct. */
	if (UTIL_FAULT_CALL("volume.reserve", fallocate(v->backing_fd, 0, 0, (off_t)bytes)) < 0) {
		int e = errno;
		if (e == ENOSPC)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                         "workspace volume: the host has no room to reserve "
			                         "%" PRId64 " bytes for a workspace",
			                         bytes);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "workspace volume: reserve");
	}

	/* A shape formatted before is written from memory (see "formatted
	 * images"); a new one is formatted by mkfs and remembered. Either way
	 * the file holds a fresh filesystem no sandbox has seen. */
	__attribute__((cleanup(volume_image_unrefp))) volume_image *img =
		volume_image_get(bytes, inodes);
	int r;
	if (img) {
		r = volume_image_write(img, v->backing_fd);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
			                         "workspace volume: write the formatted image");
	}
	r = host_loop_attach_direct(v->backing_fd, VOLUME_BLOCK, &v->loop, err);
	if (r < 0) {
		airlock_error_prefix(err, "workspace volume: ");
		return r;
	}
	r = volume_direct_io(v, err);
	if (r < 0)
		return r;
	if (!img) {
		r = volume_mkfs(&v->loop, inodes, err);
		if (r < 0)
			return r;
		/* Remembering is an optimisation: a capture that fails or does
		 * not fit only means the next volume of this shape runs mkfs. */
		volume_image *fresh = NULL;
		if (volume_image_capture(v, inodes, &fresh) == 0 && fresh)
			volume_image_put(fresh);
		/* The capture read the backing file through the cache. */
		(void)posix_fadvise(v->backing_fd, 0, 0, POSIX_FADV_DONTNEED);
	}
	r = volume_mount(&v->loop, backing_dir_fd, &v->mount_fd, err);
	if (r < 0)
		return r;
	r = volume_prepare_root(v->mount_fd, uid, gid, inodes, err);
	if (r < 0)
		return r;

	v->root_fd = openat(v->mount_fd, ".", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (v->root_fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "workspace volume: open root");
	struct stat root, dev;
	if (fstat(v->root_fd, &root) < 0 || fstat(v->loop.fd, &dev) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "workspace volume: fstat");
	/* The mount was made from a device path; proving that the filesystem
	 * under the root is the one on the device we hold closes the gap
	 * between binding the device and naming it. */
	if (!S_ISBLK(dev.st_mode) || root.st_dev != dev.st_rdev)
		return airlock_error_set(err, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
		                         "workspace volume: the filesystem mounted from %s is not on "
		                         "that device",
		                         v->loop.path);
	v->dev = root.st_dev;
	v->ino = root.st_ino;
	*ret = TAKE_PTR(v);
	return 0;
}

int host_volume_mount_fd(const host_volume *v)
{
	return v ? v->mount_fd : -1;
}

int host_volume_root_fd(const host_volume *v)
{
	return v ? v->root_fd : -1;
}

int host_volume_backing_fd(const host_volume *v)
{
	return v ? v->backing_fd : -1;
}

/* What ext4 may give back after it refused a write (host_volume_full). */
#define HOST_VOLUME_FULL_SLACK (64u * 1024u)

int host_volume_full(const host_volume *v, bool *ret, airlock_error *err)
{
	struct statfs s;
	if (fstatfs(v->root_fd, &s) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "workspace volume: fstatfs");
	/* Full means a write is refused (docs/native.md, "Kill reasons"): not one
	 * block an ordinary writer can still get (mkfs -m 0 leaves no root
	 * reserve, and f_bavail already excludes ext4's own reserve for
	 * delayed allocation's metadata), or no inode. A write is refused
	 * exactly then because the volume is formatted without large folios
	 * ("verity" in volume_mkfs): ext4 reserves a buffered write's blocks
	 * one page at a time and ends a write short at the last free block,
	 * so ENOSPC means no block was left (measured: writes of 4 KiB to
	 * 16 MiB all end at f_bavail 0). With large folios a 1 MiB write is
	 * refused while up to a folio's worth (here 112 blocks at 64 MiB)
	 * is free, and no count could tell a volume that refused a write
	 * from one written to just short of that.
	 *
	 * Not exactly 0: once the refused writer's dirty pages are written
	 * back, ext4 gives back what delayed allocation held for them beyond
	 * what it allocated (measured at 64 MiB: f_bavail 0 at the ENOSPC and
	 * 1 some 20 ms later, with the writer still alive and writing
	 * nothing), and the rule at exit reads the volume after that. So
	 * full is under HOST_VOLUME_FULL_SLACK: a volume written to within
	 * 64 KiB of full without a refused write is the one case counted
	 * full that was not, against 896 KiB with the old 1 MiB slack. */
	*ret = (uint64_t)s.f_bavail * (uint64_t)s.f_bsize < HOST_VOLUME_FULL_SLACK ||
	       s.f_ffree == 0;
	return 0;
}

static int volume_identity_of(int fd, const host_volume *v, const char *which,
                              airlock_error *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "workspace volume: fstat %s",
		                         which);
	if (st.st_dev != v->dev || st.st_ino != v->ino)
		return airlock_error_set(err, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
		                         "workspace volume: %s was device %u:%u inode %" PRIu64
		                         " and is now device %u:%u inode %" PRIu64,
		                         which, major(v->dev), minor(v->dev), (uint64_t)v->ino,
		                         major(st.st_dev), minor(st.st_dev), (uint64_t)st.st_ino);
	return 0;
}

int host_volume_check_identity(const host_volume *v, airlock_error *err)
{
	/* Both descriptors must still be the root we made: the one the
	 * service walks and the one that is moved into the sandbox. */
	int r = volume_identity_of(v->root_fd, v, "the workspace root", err);
	if (r < 0)
		return r;
	return volume_identity_of(v->mount_fd, v, "the workspace mount", err);
}

int host_volume_workspace(const host_volume *v, airlock_workspace **ret, airlock_error *err)
{
	int r = host_volume_check_identity(v, err);
	if (r < 0)
		return r;
	/* The handle gets its own descriptor so its lifetime is its own; it
	 * walks only beneath it (openat2 RESOLVE_BENEATH|RESOLVE_NO_XDEV), and
	 * every file it did not write reports SANDBOX_WRITTEN. */
	int fd = fcntl(v->root_fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "workspace volume: dup root");
	return airlock_workspace_local_new(fd, AIRLOCK_PROVENANCE_SANDBOX_WRITTEN, ret, err);
}

void host_volume_destroy(host_volume *v)
{
	if (!v)
		return;
	int saved = errno;

	/* The sandbox is gone first (spec, "Destruction means the sandbox and
	 * the workspace volume, in that order"), so these are the last
	 * references to the filesystem: closing the detached mount unmounts
	 * it, and the unmount, with its final writeback, is done when close
	 * returns. (A mount moved into a sandbox's namespace is released the
	 * same way, in the exiting sandbox's own task work, before its reaper
	 * sees it die; test destroy_right_after_the_sandbox_still_erases.) */
	if (v->root_fd >= 0)
		close(v->root_fd);
	if (v->mount_fd >= 0)
		close(v->mount_fd);
	v->root_fd = v->mount_fd = -1;

	/* Erase, not unlink: every block of the backing file is returned, so
	 * the volume's bytes read back as zeros from here on. A holder that
	 * outlived the sandbox (a caller bug) would see zeros too, which is
	 * what destroy means; it must never see the old data. */
	if (v->backing_fd >= 0 && v->bytes > 0)
		(void)fallocate(v->backing_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
		                (off_t)v->bytes);
	/* Discarding through the device drops its cached copies of the
	 * punched blocks (the block device has a page cache of its own) and
	 * punches again through the loop driver. It fails with EBUSY only
	 * while a filesystem still has those pages in use, and the punch
	 * above has erased the file regardless. */
	if (v->loop.fd >= 0 && v->bytes > 0) {
		uint64_t range[2] = { 0, (uint64_t)v->bytes };
		(void)ioctl(v->loop.fd, BLKDISCARD, &range);
	}
	host_loop_release(&v->loop);
	if (v->backing_fd >= 0)
		close(v->backing_fd);
	free(v);
	errno = saved;
}
