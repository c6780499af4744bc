/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_HOST_TREE_H
#define AIRLOCK_HOST_TREE_H

/*
 * Removing a tree, safely (tree.c). The image store's stale-tmp sweep and
 * the image builder use it on build trees.
 *
 * The build tree is a root-owned Debian system. Removing it must never
 * follow a symlink out of it (/etc/alternatives, /bin -> usr/bin) nor
 * descend into a file system mounted inside it: every entry is looked at
 * with AT_SYMLINK_NOFOLLOW, directories are opened O_DIRECTORY|O_NOFOLLOW
 * (a directory swapped for a symlink fails to open) and checked to be on the
 * tree's root's mount (device and mount id: a bind mount of the same file
 * system is still another mount), and entries are removed with unlinkat on
 * the parent's descriptor.
 */

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "airlock/caps.h"

/* How deep a walk goes before it refuses (-ELOOP): AIRLOCK_HOST_TREE_DEPTH_MAX
 * (airlock/caps.h). */

typedef struct host_tree_id {
	dev_t dev;
	uint64_t mnt_id;
	bool have_mnt_id;
} host_tree_id;

/* The device and mount id of fd/name (flags: AT_EMPTY_PATH for fd itself),
 * never following a symlink; ret_stx (may be NULL) gets the whole statx.
 * 0 or -errno. */
int host_tree_id_of(int fd, const char *name, int flags, host_tree_id *ret, struct statx *ret_stx);

/* The subdirectory name of dfd, opened without following a symlink and
 * checked to be on root's mount: its descriptor, -EXDEV for a mount point. */
int host_tree_open_dir(int dfd, const char *name, const host_tree_id *root);

/* Remove everything inside dfd, on root's mount only. 0 or the first error
 * (the rest of the tree is still removed where possible). */
int host_tree_remove_contents(int dfd, const host_tree_id *root, unsigned depth);

/* Remove parent/name recursively, on parent's mount only. */
int host_tree_remove_at(int parent, const char *name);

/* A directory stream over dfd's directory with its own file offset (tree.c
 * says why not a dup). */
DIR *host_dir_stream(int dfd);

#endif
