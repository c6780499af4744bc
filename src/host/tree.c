/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Walking and removing a directory tree without following a symlink out of
 * it or crossing into another mount (tree.h has the contract). The image
 * store removes stale build trees with it, and the image builder removes and
 * cleans the trees debootstrap made.
 */
#include "host/tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* A directory stream over dfd's directory with its own file offset. A
 * dup() of dfd would share the offset, so a second listing through another
 * dup would start where the first one ended and see nothing. */
DIR *host_dir_stream(int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return d;
}

int host_tree_id_of(int fd, const char *name, int flags, host_tree_id *ret, struct statx *ret_stx)
{
	struct statx stx;
	if (statx(fd, name, flags | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
	          STATX_TYPE | STATX_MODE | STATX_INO | STATX_MNT_ID | STATX_MTIME, &stx) < 0)
		return -errno;
	ret->dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
	ret->have_mnt_id = (stx.stx_mask & STATX_MNT_ID) != 0;
	ret->mnt_id = stx.stx_mnt_id;
	if (ret_stx)
		*ret_stx = stx;
	return 0;
}

static bool tree_same_mount(const host_tree_id *a, const host_tree_id *b)
{
	if (a->dev != b->dev)
		return false;
	return !(a->have_mnt_id && b->have_mnt_id) || a->mnt_id == b->mnt_id;
}

/* Open the subdirectory name of dfd without following a symlink, check it is
 * on the tree's mount, and return its descriptor. -EXDEV for a mount point. */
int host_tree_open_dir(int dfd, const char *name, const host_tree_id *root)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	host_tree_id id;
	int r = host_tree_id_of(fd, "", AT_EMPTY_PATH, &id, NULL);
	if (r < 0 || !tree_same_mount(&id, root)) {
		close(fd);
		return r < 0 ? r : -EXDEV;
	}
	return fd;
}

/* Remove dfd/name, whatever it is. Returns 0 or the first error (the rest of
 * the tree is still removed where possible). */
static int tree_remove_entry(int dfd, const char *name, const host_tree_id *root, unsigned depth)
{
	struct statx stx;
	host_tree_id id;
	int r = host_tree_id_of(dfd, name, 0, &id, &stx);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (!S_ISDIR(stx.stx_mode))
		return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	if (depth >= AIRLOCK_HOST_TREE_DEPTH_MAX)
		return -ELOOP;
	int cfd = host_tree_open_dir(dfd, name, root);
	if (cfd < 0)
		return cfd;
	r = host_tree_remove_contents(cfd, root, depth + 1);
	close(cfd);
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
		r = -errno;
	return r;
}

int host_tree_remove_contents(int dfd, const host_tree_id *root, unsigned depth)
{
	int first = 0;
	/* Removing entries while reading the directory may make readdir skip
	 * some; passes repeat until one finds nothing it could remove. */
	for (int pass = 0; pass < 8; pass++) {
		DIR *d = host_dir_stream(dfd);
		if (!d)
			return -errno;
		size_t removed = 0, failed = 0;
		struct dirent *de;
		errno = 0;
		while ((de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			int r = tree_remove_entry(dfd, de->d_name, root, depth);
			if (r < 0) {
				failed++;
				if (first == 0)
					first = r;
			} else {
				removed++;
			}
			errno = 0;
		}
		int e = errno;
		closedir(d);
		if (e && first == 0)
			first = -e;
		if (failed > 0 || removed == 0)
			break;
	}
	return first;
}

/* Remove parent/name recursively, on parent's mount only. */
int host_tree_remove_at(int parent, const char *name)
{
	host_tree_id root;
	int r = host_tree_id_of(parent, "", AT_EMPTY_PATH, &root, NULL);
	if (r < 0)
		return r;
	return tree_remove_entry(parent, name, &root, 0);
}
