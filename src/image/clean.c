/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cleaning a built tree before it becomes an image: what debootstrap and
 * package scripts leave that an image should not carry (image_clean_tree).
 * Every step walks beneath the tree's root by descriptor, never following a
 * symlink and never leaving its mount (host/tree.h).
 */
#include "image/build.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/image_store.h"
#include "util/util.h"

/* Open rel (no leading slash) beneath root, one component at a time, never
 * following a symlink and never leaving root's mount. The tree was written
 * by package maintainer scripts: /var/log could be a symlink to anywhere on
 * the host, and this walk refuses it instead of cleaning the host. */
int image_open_beneath(int root, const char *rel, const host_tree_id *id)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", rel);
	int fd = fcntl(root, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return -errno;
	char *save = NULL;
	for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int next = host_tree_open_dir(fd, c, id);
		close(fd);
		if (next < 0)
			return next;
		fd = next;
	}
	return fd;
}

/* Open root/rel to clean it: *ret_fd is -1 when rel is missing or is (or
 * passes through) a symlink, which is left alone: there is nothing of ours
 * to clean through it. */
static int open_to_clean(int root, const char *rel, const host_tree_id *id, int *ret_fd)
{
	int fd = image_open_beneath(root, rel, id);
	*ret_fd = -1;
	if (fd == -ENOENT || fd == -ELOOP || fd == -ENOTDIR)
		return 0;
	if (fd < 0)
		return fd;
	*ret_fd = fd;
	return 0;
}

/* Remove everything inside root/rel. */
static int clean_contents(int root, const char *rel, const host_tree_id *id)
{
	_cleanup_close_ int fd = -1;
	int r = open_to_clean(root, rel, id, &fd);
	if (r < 0 || fd < 0)
		return r;
	return host_tree_remove_contents(fd, id, 0);
}

/* Remove entries of root/rel whose names end with suffix (files only). */
static int clean_suffix(int root, const char *rel, const char *suffix, const host_tree_id *id)
{
	_cleanup_close_ int fd = -1;
	int r = open_to_clean(root, rel, id, &fd);
	if (r < 0 || fd < 0)
		return r;
	DIR *d = host_dir_stream(fd);
	if (!d)
		return -errno;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (!image_has_suffix(de->d_name, suffix) ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
			continue;
		if (unlinkat(fd, de->d_name, 0) < 0 && errno != ENOENT && r == 0)
			r = -errno;
	}
	closedir(d);
	return r;
}

/* Truncate root/rel when it is a regular file (a symlink is left alone). */
static int clean_truncate(int root, const char *dir, const char *name, const host_tree_id *id)
{
	_cleanup_close_ int dfd = -1;
	int r = open_to_clean(root, dir, id, &dfd);
	if (r < 0 || dfd < 0)
		return r;
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
		/* O_NOFOLLOW|O_NONBLOCK: if it was swapped for a symlink or a FIFO
		 * since the stat, the open fails or does not hang. */
		int fd = openat(dfd, name, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			r = -errno;
		else
			close(fd);
	}
	return r;
}

/* Walk the whole tree: remove device nodes (the sandbox gets its own minimal
 * /dev; a node in a read-only image is only a way around it) and clear
 * setuid and setgid bits on files (nothing in a sandbox may gain
 * privileges by exec, and a bit that is not there cannot be misused if a
 * mount flag is ever forgotten). */
static int tree_normalize(int dfd, const host_tree_id *root, unsigned depth)
{
	if (depth >= AIRLOCK_HOST_TREE_DEPTH_MAX)
		return -ELOOP;
	DIR *d = host_dir_stream(dfd);
	if (!d)
		return -errno;
	int r = 0;
	/* A pass that removed a node is repeated, in case the removal made
	 * readdir skip an entry; the rest of the work is idempotent. */
	for (int pass = 0; pass < 8 && r == 0; pass++) {
		bool removed = false;
		struct dirent *de;
		while (r == 0 && (de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			struct stat st;
			if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				r = -errno;
				break;
			}
			if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
				if (unlinkat(dfd, de->d_name, 0) < 0)
					r = -errno;
				removed = true;
			} else if (S_ISREG(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID))) {
				int fd = openat(dfd, de->d_name,
				                O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
				if (fd < 0) {
					r = -errno;
					break;
				}
				/* Changed through the descriptor, after checking it is the
				 * file just looked at. */
				struct stat fst;
				if (fstat(fd, &fst) < 0)
					r = -errno;
				else if (fst.st_ino != st.st_ino || fst.st_dev != st.st_dev)
					r = -ESTALE;
				else if (fchmod(fd, fst.st_mode & 0777) < 0)
					r = -errno;
				close(fd);
			} else if (S_ISDIR(st.st_mode)) {
				int cfd = host_tree_open_dir(dfd, de->d_name, root);
				if (cfd < 0) {
					r = cfd;
					break;
				}
				r = tree_normalize(cfd, root, depth + 1);
				close(cfd);
			}
		}
		if (!removed)
			break;
		rewinddir(d);
	}
	closedir(d);
	return r;
}

/* Replace root/dir/name with a regular file holding len bytes of data,
 * mode mode: whatever is there (a file debootstrap copied from the build
 * host, a symlink a package made) is unlinked and a new file is created
 * exclusively, never through a link. */
int image_write_file(int root, const char *dir, const char *name, const void *data, size_t len,
                     mode_t mode, const host_tree_id *id)
{
	int dfd = image_open_beneath(root, dir, id);
	if (dfd < 0)
		return dfd;
	int r = 0;
	if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
		r = -errno;
	int fd = r < 0 ? -1 :
	                 openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (r == 0 && fd < 0)
		r = -errno;
	if (fd >= 0) {
		r = util_write_all(fd, data, len);
		/* The umask must not decide what the sandbox user may read. */
		if (r == 0 && fchmod(fd, mode) < 0)
			r = -errno;
		close(fd);
	}
	close(dfd);
	return r;
}

/* Files that would otherwise describe the build host to every sandbox:
 * debootstrap copies the host's /etc/resolv.conf (naming its resolver) and
 * /etc/hostname, and writes the mirror it fetched from into
 * /etc/apt/sources.list. A sandbox has no resolver (its network namespace
 * holds lo and, with egress, the proxy's listener, reached by address), its
 * uts namespace is named "sandbox" (child.c), and it has no route to a
 * mirror; so these say exactly that and nothing of the host. */
static const struct {
	const char *dir, *name, *text;
} neutral_files[] = {
	{ "etc", "resolv.conf", "# A sandbox has no resolver.\n" },
	{ "etc", "hostname", "sandbox\n" },
	{ "etc", "hosts", "127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n" },
	{ "etc/apt", "sources.list", "# A sandbox has no package mirror.\n" },
};

/* What a built tree should not carry into an image: caches and logs (size,
 * and bytes that differ between two builds of the same packages), the
 * machine-id (each sandbox is not this machine), the build host's resolver,
 * name and mirror (neutral_files), device nodes and setuid bits. */
int image_clean_tree(int rootfd, airlock_error *err)
{
	host_tree_id id;
	int r = host_tree_id_of(rootfd, "", AT_EMPTY_PATH, &id, NULL);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build: clean");
	static const char *const contents[] = { "var/lib/apt/lists", "var/cache/apt", "var/log",
		                                "tmp", "var/tmp", "var/cache/ldconfig" };
	for (size_t i = 0; i < ARRAY_SIZE(contents); i++) {
		r = clean_contents(rootfd, contents[i], &id);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build: cleaning /%s",
			                         contents[i]);
	}
	static const char *const old_dirs[] = { "var/cache/debconf", "var/lib/dpkg" };
	for (size_t i = 0; i < ARRAY_SIZE(old_dirs); i++) {
		r = clean_suffix(rootfd, old_dirs[i], "-old", &id);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build: cleaning /%s",
			                         old_dirs[i]);
	}
	r = clean_truncate(rootfd, "etc", "machine-id", &id);
	if (r == 0)
		r = clean_truncate(rootfd, "var/lib/dbus", "machine-id", &id);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build: emptying machine-id");
	for (size_t i = 0; i < ARRAY_SIZE(neutral_files); i++) {
		r = image_write_file(rootfd, neutral_files[i].dir, neutral_files[i].name,
		                     neutral_files[i].text, strlen(neutral_files[i].text), 0644, &id);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build: writing /%s/%s",
			                         neutral_files[i].dir, neutral_files[i].name);
	}
	/* The mount points every sandbox needs, which a minbase tree may lack:
	 * the native mechanism mounts its /workspace volume, /proc, /dev and
	 * /tmp over these, and the image itself is read-only. */
	static const struct {
		const char *name;
		mode_t mode;
	} mount_points[] = { { "workspace", 0755 }, { "proc", 0555 }, { "dev", 0755 }, { "tmp", 01777 } };
	for (size_t i = 0; i < ARRAY_SIZE(mount_points); i++) {
		struct stat st;
		if (mkdirat(rootfd, mount_points[i].name, mount_points[i].mode) < 0 && errno != EEXIST)
			return host_image_sys_error(err, errno, "image build: mount point");
		if (fstatat(rootfd, mount_points[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOTDIR,
			                         "image build: /%s is not a directory", mount_points[i].name);
		if (fchmodat(rootfd, mount_points[i].name, mount_points[i].mode, 0) < 0)
			return host_image_sys_error(err, errno, "image build: mount point");
	}
	r = tree_normalize(rootfd, &id, 0);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
		                         "image build: removing device nodes and setuid bits");
	/* The tree's root was made 0755 by us, but a package could have
	 * changed it: the image's / must be searchable by the sandbox's
	 * unprivileged uid. */
	if (fchmod(rootfd, 0755) < 0)
		return host_image_sys_error(err, errno, "image build: chmod /");
	return 0;
}
