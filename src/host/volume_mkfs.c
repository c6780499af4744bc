/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Formatting a workspace volume: mkfs.ext4 run on its loop device, and the
 * cache of formatted images that writes mkfs's bytes from memory for a
 * shape formatted before (volume.c's create uses both).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "host/volume_state.h"
#include "util/run.h"
#include "util/util.h"

#define VOLUME_RESERVED_INODES AIRLOCK_VOLUME_RESERVED_INODES

/* mkfs takes a few milliseconds (measured); this bound is only for a hung
 * one, and sits inside the specification's 30 s start budget. */
#define VOLUME_MKFS_TIMEOUT_MS 20000

/* The only places mkfs.ext4 is looked for: the caller's PATH is not
 * consulted, so no directory an unprivileged user controls can supply a
 * program we would run as root. */
static const char *const volume_mkfs_paths[] = { "/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4" };

/* ---- running mkfs ---------------------------------------------------------- */

static const char *volume_mkfs_path(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(volume_mkfs_paths); i++)
		if (access(volume_mkfs_paths[i], X_OK) == 0)
			return volume_mkfs_paths[i];
	return NULL;
}

int volume_mkfs(const host_loop *loop, int64_t inodes, airlock_error *err)
{
	const char *bin = volume_mkfs_path();
	if (!bin)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "workspace volume: mkfs.ext4 not found in /usr/sbin or "
		                         "/sbin (Debian package e2fsprogs)");

	char ninodes[32];
	snprintf(ninodes, sizeof(ninodes), "%" PRId64, inodes + VOLUME_RESERVED_INODES);
	/* -m 0: no blocks reserved for root, so "no free blocks" is the same
	 *   fact for the sandbox and for fstatfs's f_bavail.
	 * ^has_journal: the workspace is a cache (the specification) that
	 *   dies with the sandbox; a journal protects nothing and costs space.
	 * ^resize_inode: the volume is never grown; no blocks kept for it.
	 * verity: ext4 caches a file of a filesystem with this feature in
	 *   single pages, never in large folios, so a buffered write is
	 *   refused with ENOSPC only when not one block is free, which is
	 *   what host_volume_full observes (DISK only when the volume refused
	 *   a write). The feature enables nothing on a file until
	 *   FS_IOC_ENABLE_VERITY, which makes a file of the sandbox's
	 *   read-only and is refused where the kernel has no fs-verity
	 *   (CONFIG_FS_VERITY, not set here).
	 * lazy_itable_init=1: the inode tables are not written. Safe because
	 *   the backing file is new and sparse and reads as zeros, which is
	 *   what the writing would put there; measured at 4 GiB/100000 inodes
	 *   it saves 25 MiB of backing-file writes per volume.
	 * nodiscard: nothing to discard on a new sparse file.
	 * execve takes char *const[]; writable copies of the literals keep
	 * the qualifiers honest without a cast. */
	char a_prog[] = "mkfs.ext4", a_q[] = "-q", a_f[] = "-F", a_m[] = "-m", a_zero[] = "0";
	char a_n[] = "-N", a_b[] = "-b", a_bs[] = "4096", a_i[] = "-I", a_is[] = "256";
	char a_o[] = "-O", a_feat[] = "^has_journal,^resize_inode,verity", a_e[] = "-E";
	char a_ext[] = "nodiscard,lazy_itable_init=1";
	char dev[sizeof(loop->path)];
	memcpy(dev, loop->path, sizeof(dev));
	char *const argv[] = {
		a_prog, a_q, a_f,                  /* quiet; a regular device, go ahead */
		a_m,    a_zero,                    /* -m 0 */
		a_n,    ninodes,                   /* -N inodes */
		a_b,    a_bs,   a_i, a_is,         /* 4 KiB blocks, 256-byte inodes */
		a_o,    a_feat, a_e, a_ext,        /* features, extended options */
		dev,    NULL,
	};
	/* An empty environment: nothing from the service's (MKE2FS_CONFIG,
	 * MKE2FS_DEVICE_SECTSIZE, ...) can change what gets built. */
	char *const envp[] = { NULL };

	const util_run_options o = {
		.path = bin,
		.argv = argv,
		.envp = envp,
		.output_max = AIRLOCK_VOLUME_MKFS_OUTPUT_MAX,
		.timeout_ms = VOLUME_MKFS_TIMEOUT_MS,
	};
	__attribute__((cleanup(util_run_result_clear))) util_run_result res;
	int r = util_run(&o, &res);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "workspace volume: %s",
		                         res.failed);
	if (res.timed_out || !res.output_eof)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "workspace volume: mkfs.ext4 on %s took longer than %d ms",
		                         loop->path, VOLUME_MKFS_TIMEOUT_MS);
	int status = res.status;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;

	char shown[AIRLOCK_ERROR_MESSAGE_MAX / 2];
	util_escape(shown, sizeof(shown), res.output, res.output_len);
	if (WIFEXITED(status))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "workspace volume: mkfs.ext4 on %s exited with status %d: %s",
		                         loop->path, WEXITSTATUS(status), shown);
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
	                         "workspace volume: mkfs.ext4 on %s killed by signal %d: %s",
	                         loop->path, WIFSIGNALED(status) ? WTERMSIG(status) : 0, shown);
}

/* ---- formatted images ------------------------------------------------------
 * mkfs.ext4 is most of create: measured, 2.7 of 3.3 ms at 64 MiB/1000 inodes
 * and 3.4 of 4.2 ms at 4 GiB/100000, nearly all of it fork, exec and
 * mke2fs's own start-up. What it writes for one (bytes, inodes) is a few
 * hundred KiB of metadata scattered over an otherwise sparse file (172 KiB
 * at 4 GiB/100000 inodes). So the first volume of a shape is formatted by
 * mkfs and the bytes it wrote are kept in this process's memory; later
 * volumes of that shape get those bytes written into their own new sparse
 * file, which makes the two files identical in content.
 *
 * Why this is safe:
 *   - the image is captured from the file mkfs wrote, before anything is
 *     mounted, so no sandbox has ever touched it;
 *   - it lives only in this process's memory and is never written back:
 *     there is no template file to tamper with, verify or share, and a
 *     restart formats afresh;
 *   - the capture is complete by definition: SEEK_HOLE may report data
 *     where there is a hole but never a hole where there is data, and a
 *     hole reads as zeros, which is what a new sparse file holds;
 *   - what volumes of one shape share is mkfs's random choices (the UUID,
 *     the directory hash seed). Neither is a secret a sandbox could use
 *     against another: each volume is private to its sandbox, and a seed
 *     only affects lookups in the volume it belongs to.
 */
#define VOLUME_IMAGE_SLOTS 8
/* The most of the formatted file read to find what mkfs wrote: measured,
 * 7 MiB of data ranges at 64 MiB and at 4 GiB (mostly zeros, 40 and
 * 100 KiB of them not). A shape past it (5 GiB here) is formatted by
 * mkfs each time, as one past the image bounds always was. */
#define VOLUME_IMAGE_SCAN_MAX ((size_t)16 << 20)
/* How big a formatted image is kept: AIRLOCK_VOLUME_IMAGE_MAX and
 * AIRLOCK_VOLUME_IMAGE_EXTENTS_MAX (airlock/caps.h). */

typedef struct volume_extent {
	off_t off;  /* in the volume */
	size_t len;
	size_t at;  /* in data */
} volume_extent;

typedef struct volume_image {
	int64_t bytes, inodes; /* the shape */
	unsigned refs;         /* the cache's own + one per volume being written */
	uint64_t used;         /* for eviction: least recently used goes */
	size_t n;
	volume_extent ext[AIRLOCK_VOLUME_IMAGE_EXTENTS_MAX];
	size_t len;
	unsigned char data[];
} volume_image;

static pthread_mutex_t volume_images_lock = PTHREAD_MUTEX_INITIALIZER;
static volume_image *volume_images[VOLUME_IMAGE_SLOTS]; /* guarded by the lock */
static uint64_t volume_images_clock;                    /* guarded by the lock */

static void volume_image_unref(volume_image *img)
{
	if (!img)
		return;
	pthread_mutex_lock(&volume_images_lock);
	bool last = --img->refs == 0;
	pthread_mutex_unlock(&volume_images_lock);
	if (last)
		free(img);
}

void volume_image_unrefp(volume_image **img)
{
	volume_image_unref(*img);
}

/* The image for this shape with a reference taken, or NULL. */
volume_image *volume_image_get(int64_t bytes, int64_t inodes)
{
	volume_image *found = NULL;
	pthread_mutex_lock(&volume_images_lock);
	for (size_t i = 0; i < VOLUME_IMAGE_SLOTS; i++) {
		volume_image *img = volume_images[i];
		if (img && img->bytes == bytes && img->inodes == inodes) {
			img->refs++;
			img->used = ++volume_images_clock;
			found = img;
			break;
		}
	}
	pthread_mutex_unlock(&volume_images_lock);
	return found;
}

/* Keep img (its reference passes to the cache) unless the shape is already
 * there, in which case img is dropped. */
void volume_image_put(volume_image *img)
{
	volume_image *evicted = NULL;
	pthread_mutex_lock(&volume_images_lock);
	size_t slot = 0;
	for (size_t i = 0; i < VOLUME_IMAGE_SLOTS; i++) {
		volume_image *cur = volume_images[i];
		if (cur && cur->bytes == img->bytes && cur->inodes == img->inodes) {
			evicted = img; /* another thread got there first */
			slot = SIZE_MAX;
			break;
		}
		if (!cur || (volume_images[slot] && cur->used < volume_images[slot]->used))
			slot = i;
	}
	if (slot != SIZE_MAX) {
		volume_image *old = volume_images[slot];
		if (old && --old->refs == 0)
			evicted = old;
		img->used = ++volume_images_clock;
		volume_images[slot] = img;
	}
	pthread_mutex_unlock(&volume_images_lock);
	free(evicted);
}

/* Read back what mkfs wrote: every data range of the backing file. NULL
 * when it does not fit the bounds (the shape is then not cached). */
int volume_image_capture(const host_volume *v, int64_t inodes, volume_image **ret)
{
	*ret = NULL;
	/* mkfs wrote through the loop device; flushing it makes every block
	 * it wrote part of the backing file before we look at the file. */
	if (fsync(v->loop.fd) < 0)
		return -errno;

	_cleanup_free_ volume_image *img = NULL;
	size_t alloc = 0;
	size_t n = 0, len = 0;
	off_t off = 0;
	/* What is read to find the image is bounded too: a capture runs
	 * inside a provision's start budget. */
	size_t scan_left = VOLUME_IMAGE_SCAN_MAX;
	while (off < (off_t)v->bytes) {
		off_t d = lseek(v->backing_fd, off, SEEK_DATA);
		if (d < 0) {
			if (errno == ENXIO)
				break;
			return -errno;
		}
		off_t h = lseek(v->backing_fd, d, SEEK_HOLE);
		if (h < 0)
			return -errno;
		if (h > (off_t)v->bytes)
			h = (off_t)v->bytes;
		/* Block by block, keeping only blocks that are not all zeros:
		 * the new file reads as zeros wherever nothing is written, so
		 * leaving them out changes nothing, and ext4 makes a data range
		 * of zeros when it converts part of a reserved (unwritten)
		 * extent (mkfs's scattered writes through a direct-I/O loop
		 * device come back as one 7 MiB range, mostly zeros). */
		for (off_t at = d; at < h; at += VOLUME_BLOCK) {
			unsigned char blk[VOLUME_BLOCK];
			size_t want_n = (size_t)(h - at < VOLUME_BLOCK ? h - at : VOLUME_BLOCK);
			if (want_n > scan_left)
				return 0;
			scan_left -= want_n;
			size_t got = 0;
			while (got < want_n) {
				ssize_t r = pread(v->backing_fd, blk + got, want_n - got, at + (off_t)got);
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0)
					return r < 0 ? -errno : -EIO;
				got += (size_t)r;
			}
			bool zero = blk[0] == 0 && memcmp(blk, blk + 1, want_n - 1) == 0;
			if (zero)
				continue;
			bool extend = n > 0 && img->ext[n - 1].off + (off_t)img->ext[n - 1].len == at;
			if ((!extend && n == AIRLOCK_VOLUME_IMAGE_EXTENTS_MAX) ||
			    want_n > AIRLOCK_VOLUME_IMAGE_MAX - len)
				return 0;
			if (len + want_n > alloc) {
				size_t grow = alloc ? alloc * 2 : 256 << 10;
				if (grow > AIRLOCK_VOLUME_IMAGE_MAX)
					grow = AIRLOCK_VOLUME_IMAGE_MAX;
				volume_image *p = realloc(img, sizeof(*img) + grow);
				if (!p)
					return -ENOMEM;
				if (!img)
					memset(p, 0, sizeof(*p));
				img = p;
				alloc = grow;
			}
			memcpy(img->data + len, blk, want_n);
			if (extend)
				img->ext[n - 1].len += want_n;
			else
				img->ext[n++] = (volume_extent){ .off = at, .len = want_n, .at = len };
			len += want_n;
		}
		off = h;
	}
	if (!img)
		return 0; /* nothing written at all: not an image worth keeping */
	img->bytes = v->bytes;
	img->inodes = inodes;
	img->refs = 1;
	img->n = n;
	img->len = len;
	*ret = TAKE_PTR(img);
	return 0;
}

/* Write a cached image into a new, empty, sparse backing file. */
int volume_image_write(const volume_image *img, int fd)
{
	for (size_t i = 0; i < img->n; i++) {
		const volume_extent *e = &img->ext[i];
		for (size_t put = 0; put < e->len;) {
			ssize_t r = pwrite(fd, img->data + e->at + put, e->len - put,
			                   e->off + (off_t)put);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return r < 0 ? -errno : -EIO;
			put += (size_t)r;
		}
	}
	return 0;
}
