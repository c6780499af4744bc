/* SPDX-License-Identifier: Apache-2.0 */
/* The EROFS mount of a verified image (image_mount.h). */
#include "host/image_mount.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/syscalls.h"
#include "util/util.h"

int host_image_mount(host_image_cache *c, airlock_image_store *store, const char *digest,
                     int scratch_dir_fd, const char *source_name, int *ret_fd, airlock_error *err)
{
	host_image *img = NULL;
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->imgs[i].digest, digest) == 0)
			img = &c->imgs[i];
	if (img) {
		/* Cheap re-verification: the store re-hashes only when the file's
		 * identity or ctime changed since it was verified. */
		int fd = -1;
		int r = airlock_image_open_verified(store, digest, &fd, err);
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
		host_image *p = reallocarray(c->imgs, c->n + 1, sizeof(*p));
		if (!p)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "image");
		c->imgs = p;
		host_image fresh = { .file_fd = -1, .loop = { .fd = -1 } };
		snprintf(fresh.digest, sizeof(fresh.digest), "%s", digest);
		int r = airlock_image_open_verified(store, digest, &fresh.file_fd, err);
		if (r < 0)
			return r;
		r = host_loop_attach(fresh.file_fd, true, &fresh.loop, err);
		if (r < 0) {
			close(fresh.file_fd);
			return r;
		}
		c->imgs[c->n++] = fresh;
		img = &c->imgs[c->n - 1];
	}

	_cleanup_close_ int fs = sys_fsopen("erofs", FSOPEN_CLOEXEC);
	if (fs < 0 ||
	    /* The loop device is read-only; so is the superblock. */
	    sys_fsconfig(fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, errno,
		                         "image %s does not mount as erofs", digest);
	/* The source the sandbox sees in its mountinfo is this name, not
	 * "/dev/loopN" (loop.c: the number tells of other tenants' devices). */
	if (host_loop_create_fs(&img->loop, fs, scratch_dir_fd, source_name, err) < 0) {
		char why[sizeof(err->message)];
		snprintf(why, sizeof(why), "%s", err->message);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "image %s does not mount as erofs (%s)", digest, why);
	}
	int m = sys_fsmount(fs, FSMOUNT_CLOEXEC,
	                 MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (m < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "image %s: fsmount", digest);
	*ret_fd = m;
	return 0;
}

void host_image_cache_clear(host_image_cache *c)
{
	for (size_t i = 0; i < c->n; i++) {
		host_loop_release(&c->imgs[i].loop);
		close(c->imgs[i].file_fd);
	}
	free(c->imgs);
	c->imgs = NULL;
	c->n = 0;
}
