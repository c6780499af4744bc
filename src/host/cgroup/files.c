/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading and writing cgroupfs files and listing groups, for every other
 * file of the driver (cgroup_internal.h). Every descriptor is O_CLOEXEC,
 * and every open below a group directory is an openat on that group's
 * descriptor with O_NOFOLLOW.
 */
#include "host/cgroup/cgroup_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

const char *const cg_kind_name[CG__KIND_MAX] = {
	[CG_UNIFIED] = "unified", [CG_MEMORY] = "memory", [CG_PIDS] = "pids", [CG_CPU] = "cpu",
};
const char *const cg_leaf_name[CG__LEAF_MAX] = { [CG_INIT] = "init", [CG_CMD] = "cmd" };

bool cg_force_kill_fallback;

void host_cgroup_testing_force_kill_fallback(bool on) { cg_force_kill_fallback = on; }

bool cg_id_valid(const char *id)
{
	if (!id || !*id)
		return false;
	size_t n = strnlen(id, AIRLOCK_ENVIRONMENT_ID_MAX);
	if (n >= AIRLOCK_ENVIRONMENT_ID_MAX)
		return false;
	/* [A-Za-z0-9_-] only: no '/', no '.', so the name cannot leave the
	 * parent directory or alias "." and "..". */
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return false;
	}
	return true;
}

void cg_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int cg_open_dir(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	return fd < 0 ? -errno : fd;
}

int cg_flock(int fd, int op)
{
	for (;;) {
		if (flock(fd, op) == 0)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}

void cg_sleep_us(long us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Write one value to a control file. cgroupfs reports a refused value as
 * the write's error, so the whole value goes in one write. */
int cg_write(int dfd, const char *file, const char *value)
{
	_cleanup_close_ int fd = openat(dfd, file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	size_t len = strlen(value);
	ssize_t n;
	do
		n = write(fd, value, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if ((size_t)n != len)
		return -EIO;
	return 0;
}

/* A small file from offset 0 into buf (NUL-terminated). -EFBIG when it
 * does not fit: none of the files read this way is near 4 KiB. */
int cg_read(int dfd, const char *file, char *buf, size_t size)
{
	_cleanup_close_ int fd = openat(dfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	return util_pread_small(fd, buf, size);
}

/* Find "key value\n" in a flat keyed file (cgroup.events, memory.events,
 * pids.events, memory.oom_control). */
static bool cg_keyed(const char *buf, const char *key, uint64_t *ret)
{
	size_t klen = strlen(key);
	for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, klen) != 0 || p[klen] != ' ')
			continue;
		const char *v = p + klen + 1;
		if (*v < '0' || *v > '9')
			return false;
		char *end;
		errno = 0;
		unsigned long long x = strtoull(v, &end, 10);
		if (errno || (*end != '\n' && *end != 0))
			return false;
		*ret = x;
		return true;
	}
	return false;
}

int cg_keyed_fd(int fd, const char *key, uint64_t *ret)
{
	char buf[AIRLOCK_CG_SMALL_FILE];
	int r = util_pread_small(fd, buf, sizeof(buf));
	if (r < 0)
		return r;
	return cg_keyed(buf, key, ret) ? 0 : -EBADMSG;
}

/* Whether a space- or comma-separated list holds word. */
bool cg_has_word(const char *list, const char *word, char sep)
{
	size_t wlen = strlen(word);
	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, sep);
		size_t len = e ? (size_t)(e - p) : strcspn(p, "\n");
		if (len == wlen && memcmp(p, word, wlen) == 0)
			return true;
		p = e ? e + 1 : NULL;
	}
	return false;
}

int cg_pid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/* Read up to max pids from dfd's cgroup.procs, sorted. The file can be
 * long (a fork bomb), so it is parsed as it streams; what does not fit in
 * max is left for a later pass. */
int cg_procs_read(int dfd, size_t max, pid_t **ret, size_t *ret_n)
{
	_cleanup_close_ int fd = openat(dfd, "cgroup.procs", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	_cleanup_free_ pid_t *pids = NULL;
	size_t n = 0, alloc = 0;
	char chunk[4096];
	long long cur = 0;
	bool digit = false;
	while (n < max) {
		ssize_t k = read(fd, chunk, sizeof(chunk));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		for (ssize_t i = 0; i < k && n < max; i++) {
			char c = chunk[i];
			if (c >= '0' && c <= '9') {
				cur = cur * 10 + (c - '0');
				digit = true;
				if (cur > INT32_MAX)
					return -EBADMSG;
				continue;
			}
			if (c != '\n' || !digit)
				return -EBADMSG;
			if (n == alloc) {
				size_t na = alloc ? alloc * 2 : 16;
				pid_t *np = realloc(pids, na * sizeof(*np));
				if (!np)
					return -ENOMEM;
				pids = np;
				alloc = na;
			}
			pids[n++] = (pid_t)cur;
			cur = 0;
			digit = false;
		}
	}
	if (n > 1)
		qsort(pids, n, sizeof(*pids), cg_pid_cmp);
	*ret = TAKE_PTR(pids);
	*ret_n = n;
	return 0;
}

void cg_names_clear(cg_names *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

bool cg_names_has(const cg_names *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return true;
	return false;
}

int cg_names_add(cg_names *l, const char *s)
{
	if (l->n >= AIRLOCK_CG_MAX_ENTRIES)
		return -E2BIG;
	char **nv = realloc(l->v, (l->n + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	l->v = nv;
	if (!(l->v[l->n] = strdup(s)))
		return -ENOMEM;
	l->n++;
	return 0;
}

int cg_subdirs(int dfd, const char *prefix, cg_names *ret)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	_cleanup_closedir_ DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	cg_names l = { 0 };
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			if (errno) {
				int e = errno;
				cg_names_clear(&l);
				return -e;
			}
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (prefix && strncmp(de->d_name, prefix, strlen(prefix)) != 0)
			continue;
		bool is_dir = de->d_type == DT_DIR;
		if (de->d_type == DT_UNKNOWN) {
			struct stat st;
			is_dir = fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			         S_ISDIR(st.st_mode);
		}
		if (!is_dir)
			continue;
		int r = cg_names_add(&l, de->d_name);
		if (r < 0) {
			cg_names_clear(&l);
			return r;
		}
	}
	*ret = l;
	return 0;
}
