/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's cgroups (issue 3, "Provision": cgroups nested under the
 * service's own cgroup, applying cpu_millicores, memory_bytes and pids_max,
 * on hybrid and pure v2 hosts; "Destroy": removes every cgroup it made; on
 * start, removes what a crashed run left).
 *
 * Hierarchies. On a hybrid host (these machines, DESIGN.md "Mechanisms on
 * these machines") the memory, pids and cpu controllers live in three v1
 * hierarchies, and the v2 hierarchy (usually /sys/fs/cgroup/unified) has no
 * controllers but gives cgroup.kill and cgroup.events; a sandbox gets the
 * same three-level layout (cgroup.h) in each of the four. On a pure v2 host
 * one hierarchy does everything. Mount points come from
 * /proc/self/mountinfo and the service's place in each hierarchy from
 * /proc/self/cgroup; no path under /sys/fs/cgroup is assumed.
 *
 * Pure v2 and the "no internal processes" rule: limits go on
 * <own>/airlock-<id>, which needs memory, pids and cpu enabled in <own>'s
 * cgroup.subtree_control, and the kernel refuses that while <own> itself
 * holds processes (usually: the service). When it does, every process in
 * <own> is moved into a leaf <own>/airlockd first (what systemd asks of a
 * service with Delegate=yes), and the service's own cgroup is from then on
 * read as the leaf's parent. The sandbox's groups stay leaf-only themselves:
 * processes are only ever placed in init and cmd.
 *
 * Crash recovery and concurrent services. Several services (or test
 * binaries) can share a parent cgroup: here every process sits in the root
 * of the pids and cpu hierarchies. A live host_cgroup therefore holds an
 * exclusive flock(2) on its sandbox directory in every hierarchy, and the
 * sweep only touches groups whose lock it can take: the kernel drops the
 * lock when the owner dies, which is exactly "left by a crashed run". The
 * create-time window between mkdir and flock is closed by a shared lock on
 * the parent directory, which the sweep takes exclusively while it scans.
 *
 * Every descriptor is O_CLOEXEC, and every open below a group directory is
 * an openat on that group's descriptor with O_NOFOLLOW.
 */
#include "host/cgroup/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

/* The leaf the service moves itself into on pure v2 (see above). It does
 * not start with HOST_CGROUP_PREFIX, so the sweep never touches it. */
#define CG_SERVICE_LEAF "airlockd"

/* A CFS period of 100 ms; the quota is cpu_millicores * 100 us of it. The
 * kernel's smallest quota is 1 ms, so fewer than 10 millicores round up. */
#define CG_CPU_PERIOD_US 100000
#define CG_CPU_QUOTA_MIN_US 1000

/* pids.max takes at most PID_MAX_LIMIT (4M on 64-bit); above it "max" says
 * the same thing, since no more pids than that can exist. */
#define CG_PIDS_LIMIT_MAX 4194304

/* On v1, socket buffers are capped at this fraction of the memory limit
 * (cg_apply_limits). */
#define CG_V1_TCP_SHARE 4

/* Bounds for walking groups: the sandbox makes none of its own (it has no
 * write access to cgroupfs), so anything deeper is refused rather than
 * followed. */
#define CG_MAX_DEPTH 8
#define CG_MAX_ENTRIES 65536
/* Pids signalled per pass of the cgroup.procs fallback. */
#define CG_KILL_BATCH 256
/* How long the sweep waits for one leftover group to empty. */
#define CG_SWEEP_WAIT_MS 5000

#define CG_SMALL_FILE 4096

enum cg_kind { CG_UNIFIED, CG_MEMORY, CG_PIDS, CG_CPU, CG__KIND_MAX };
static const char *const cg_kind_name[CG__KIND_MAX] = {
	[CG_UNIFIED] = "unified", [CG_MEMORY] = "memory", [CG_PIDS] = "pids", [CG_CPU] = "cpu",
};

enum cg_leaf { CG_INIT, CG_CMD, CG__LEAF_MAX };
static const char *const cg_leaf_name[CG__LEAF_MAX] = { [CG_INIT] = "init", [CG_CMD] = "cmd" };

/* Counter files: in the sandbox group and (on v1, where the kernel keeps
 * these counters only in the cgroup of the task concerned) in each leaf. */
enum cg_counter { CG_OOM, CG_PIDS_EVENTS, CG__COUNTER_MAX };
enum { CG_AT_SANDBOX, CG_AT_INIT, CG_AT_CMD, CG__AT_MAX };

static bool cg_force_kill_fallback;

/* Where the service sits: the directory of its own cgroup in each
 * hierarchy the mode uses (NULL where unused). */
typedef struct cg_layout {
	host_cgroup_mode mode;
	char *dir[CG__KIND_MAX];
} cg_layout;

typedef struct cg_hier {
	bool used;
	bool v2;      /* a cgroup2 hierarchy: cgroup.events, maybe cgroup.kill */
	bool created; /* we made the sandbox directory: ours to remove */
	int own_fd;
	int sandbox_fd; /* holds LOCK_EX for the group's lifetime */
	int leaf_fd[CG__LEAF_MAX];
} cg_hier;

struct host_cgroup {
	host_cgroup_mode mode;
	bool kill_file; /* the v2 groups have cgroup.kill */
	char name[sizeof(HOST_CGROUP_PREFIX) + AIRLOCK_ENVIRONMENT_ID_MAX];
	cg_hier h[CG__KIND_MAX];
	/* Kept open and read with pread: execute polls them on every event. */
	int counter_fd[CG__COUNTER_MAX][CG__AT_MAX];
	int cmd_events_fd; /* cmd's cgroup.events in the v2 hierarchy, or -1 */
};

void host_cgroup_testing_force_kill_fallback(bool on) { cg_force_kill_fallback = on; }

/* ---- small helpers -------------------------------------------------------- */

static bool cg_id_valid(const char *id)
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

static void cg_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int cg_open_dir(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	return fd < 0 ? -errno : fd;
}

static int cg_flock(int fd, int op)
{
	for (;;) {
		if (flock(fd, op) == 0)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}

static void cg_sleep_us(long us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Write one value to a control file. cgroupfs reports a refused value as
 * the write's error, so the whole value goes in one write. */
static int cg_write(int dfd, const char *file, const char *value)
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

/* Read a small file from offset 0 into buf (NUL-terminated). -EFBIG when it
 * does not fit: none of the files read this way is near 4 KiB. */
static int cg_pread_all(int fd, char *buf, size_t size)
{
	size_t off = 0;
	for (;;) {
		if (off + 1 >= size)
			return -EFBIG;
		ssize_t n = pread(fd, buf + off, size - 1 - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		off += (size_t)n;
	}
	buf[off] = 0;
	return (int)off;
}

static int cg_read(int dfd, const char *file, char *buf, size_t size)
{
	_cleanup_close_ int fd = openat(dfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	return cg_pread_all(fd, buf, size);
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

static int cg_keyed_fd(int fd, const char *key, uint64_t *ret)
{
	char buf[CG_SMALL_FILE];
	int r = cg_pread_all(fd, buf, sizeof(buf));
	if (r < 0)
		return r;
	return cg_keyed(buf, key, ret) ? 0 : -EBADMSG;
}

/* Whether a space- or comma-separated list holds word. */
static bool cg_has_word(const char *list, const char *word, char sep)
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

static int cg_pid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/* Read up to max pids from dfd's cgroup.procs, sorted. The file can be
 * long (a fork bomb), so it is parsed as it streams; what does not fit in
 * max is left for a later pass. */
static int cg_procs_read(int dfd, size_t max, pid_t **ret, size_t *ret_n)
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

/* Subdirectory names of dfd (cgroups are directories; control files are
 * not), filtered by prefix when one is given. */
typedef struct cg_names {
	char **v;
	size_t n;
} cg_names;

static void cg_names_clear(cg_names *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static bool cg_names_has(const cg_names *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return true;
	return false;
}

static int cg_names_add(cg_names *l, const char *s)
{
	if (l->n >= CG_MAX_ENTRIES)
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

static void cg_closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

static int cg_subdirs(int dfd, const char *prefix, cg_names *ret)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	__attribute__((cleanup(cg_closedirp))) DIR *d = fdopendir(fd);
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

/* ---- where the service's cgroups are --------------------------------------- */

static void cg_layout_clear(cg_layout *l)
{
	for (int k = 0; k < CG__KIND_MAX; k++) {
		free(l->dir[k]);
		l->dir[k] = NULL;
	}
	l->mode = HOST_CGROUP_INVALID;
}

static void cg_filep(FILE **f)
{
	if (*f)
		fclose(*f);
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void cg_unescape(char *s)
{
	char *o = s;
	for (char *p = s; *p;) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			*o++ = (char)(((p[1] - '0') << 6) | ((p[2] - '0') << 3) | (p[3] - '0'));
			p += 4;
		} else {
			*o++ = *p++;
		}
	}
	*o = 0;
}

/* A cgroup path from /proc/self/cgroup: absolute, without "." or ".."
 * components (a process outside its cgroup namespace's root sees "/.."),
 * so joining it to a mount point cannot climb out of the hierarchy. */
static bool cg_path_sane(const char *p)
{
	if (p[0] != '/')
		return false;
	for (const char *s = p; *s;) {
		while (*s == '/')
			s++;
		size_t len = strcspn(s, "/");
		if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
			return false;
		s += len;
	}
	return true;
}

typedef struct cg_want {
	char *ctl;  /* v1: the hierarchy's controller list, "cpu,cpuacct"; v2: "" */
	char *path; /* the service's cgroup in it */
} cg_want;

static void cg_want_clear(cg_want *w)
{
	for (int k = 0; k < CG__KIND_MAX; k++) {
		free(w[k].ctl);
		free(w[k].path);
		w[k].ctl = w[k].path = NULL;
	}
}

static int cg_read_self(cg_want *want, airlock_error *err)
{
	__attribute__((cleanup(cg_filep))) FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "cgroups: cannot read /proc/self/cgroup");
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] == '\n')
			line[len - 1] = 0;
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c1 = *c2 = 0;
		const char *id = line, *ctls = c1 + 1, *path = c2 + 1;
		int kinds[CG__KIND_MAX], nk = 0;
		if (strcmp(id, "0") == 0 && !*ctls)
			kinds[nk++] = CG_UNIFIED;
		else {
			if (cg_has_word(ctls, "memory", ','))
				kinds[nk++] = CG_MEMORY;
			if (cg_has_word(ctls, "pids", ','))
				kinds[nk++] = CG_PIDS;
			if (cg_has_word(ctls, "cpu", ','))
				kinds[nk++] = CG_CPU;
		}
		for (int i = 0; i < nk; i++) {
			int k = kinds[i];
			if (!cg_path_sane(path))
				return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
				                         "cgroups: the service's %s cgroup is outside "
				                         "its cgroup namespace",
				                         cg_kind_name[k]);
			free(want[k].ctl);
			free(want[k].path);
			want[k].ctl = strdup(ctls);
			want[k].path = strdup(path);
			if (!want[k].ctl || !want[k].path)
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "cgroups");
		}
	}
	if (ferror(f))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, EIO,
		                         "cgroups: reading /proc/self/cgroup");
	return 0;
}

/* Map each wanted hierarchy to a directory through /proc/self/mountinfo:
 * fields 4 (root within the filesystem) and 5 (mount point), then after
 * the "-" separator the fstype and the super options (a v1 hierarchy's
 * controllers). */
static int cg_read_mounts(cg_want *want, cg_layout *l, airlock_error *err)
{
	__attribute__((cleanup(cg_filep))) FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "cgroups: cannot read /proc/self/mountinfo");
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] == '\n')
			line[len - 1] = 0;
		char *field[6] = { 0 };
		char *save = NULL, *tok = strtok_r(line, " ", &save);
		int nf = 0;
		while (tok && nf < 6) {
			field[nf++] = tok;
			if (nf < 6)
				tok = strtok_r(NULL, " ", &save);
		}
		if (nf < 6)
			continue;
		/* Skip optional fields up to the separator. */
		const char *fstype = NULL, *superopts = NULL;
		while ((tok = strtok_r(NULL, " ", &save))) {
			if (strcmp(tok, "-") == 0) {
				fstype = strtok_r(NULL, " ", &save);
				if (fstype && strtok_r(NULL, " ", &save))
					superopts = strtok_r(NULL, " ", &save);
				break;
			}
		}
		if (!fstype || !superopts)
			continue;
		bool v2 = strcmp(fstype, "cgroup2") == 0;
		if (!v2 && strcmp(fstype, "cgroup") != 0)
			continue;
		char *root = field[3], *mnt = field[4];
		cg_unescape(root);
		cg_unescape(mnt);
		for (int k = 0; k < CG__KIND_MAX; k++) {
			if (!want[k].path || l->dir[k] || v2 != (k == CG_UNIFIED))
				continue;
			if (!v2) {
				/* Every controller of the hierarchy must be a super option. */
				bool all = true;
				_cleanup_free_ char *ctls = strdup(want[k].ctl);
				if (!ctls)
					return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "cgroups");
				char *s2 = NULL;
				for (char *c = strtok_r(ctls, ",", &s2); c; c = strtok_r(NULL, ",", &s2))
					all = all && cg_has_word(superopts, c, ',');
				if (!all)
					continue;
			}
			/* The mount shows the subtree at root; the service's cgroup
			 * must lie inside it (a bind mount of another subtree does
			 * not count). */
			const char *rel = want[k].path;
			if (strcmp(root, "/") != 0) {
				size_t rl = strlen(root);
				if (strncmp(rel, root, rl) != 0 || (rel[rl] != '/' && rel[rl] != 0))
					continue;
				rel += rl;
			}
			if (strcmp(rel, "/") == 0)
				rel = "";
			if (asprintf(&l->dir[k], "%s%s", mnt, rel) < 0) {
				l->dir[k] = NULL;
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "cgroups");
			}
		}
	}
	return 0;
}

/* Pure v2: the controllers must be available to the service's cgroup
 * (enabled in its parent's cgroup.subtree_control). */
static int cg_v2_check(const char *dir, airlock_error *err)
{
	static const int ctls[] = { CG_MEMORY, CG_PIDS, CG_CPU };
	char buf[CG_SMALL_FILE];
	_cleanup_close_ int own = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (own < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "cgroups: cannot open the service's v2 cgroup");
	int r = cg_read(own, "cgroup.controllers", buf, sizeof(buf));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -r,
		                         "cgroups: cannot read cgroup.controllers of the service's "
		                         "v2 cgroup");
	for (size_t i = 0; i < ARRAY_SIZE(ctls); i++)
		if (!cg_has_word(buf, cg_kind_name[ctls[i]], ' '))
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                         "cgroups: the %s controller is not available to the "
			                         "service's v2 cgroup (enable it in the parent's "
			                         "cgroup.subtree_control, or delegate it)",
			                         cg_kind_name[ctls[i]]);
	return 0;
}

/* Decide the mode and fill l; EXECUTION_UNAVAILABLE with a reason a person
 * can act on (for `airlock doctor`). */
static int cg_layout_load(cg_layout *l, airlock_error *err)
{
	cg_want want[CG__KIND_MAX] = { 0 };
	int r = cg_read_self(want, err);
	if (r >= 0)
		r = cg_read_mounts(want, l, err);
	if (r < 0)
		goto out;

	static const int ctls[] = { CG_MEMORY, CG_PIDS, CG_CPU };
	bool any_v1 = false, all_v1 = true;
	for (size_t i = 0; i < ARRAY_SIZE(ctls); i++) {
		int k = ctls[i];
		any_v1 = any_v1 || want[k].path;
		all_v1 = all_v1 && want[k].path;
		if (want[k].path && !l->dir[k]) {
			r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                      "cgroups: the v1 %s hierarchy is not mounted here",
			                      cg_kind_name[k]);
			goto out;
		}
	}
	if (any_v1 && !all_v1) {
		for (size_t i = 0; i < ARRAY_SIZE(ctls); i++)
			if (!want[ctls[i]].path) {
				r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
				                      "cgroups: the %s controller is in no v1 hierarchy "
				                      "while others are (mixed layout)",
				                      cg_kind_name[ctls[i]]);
				goto out;
			}
	}
	if (all_v1) {
		/* Hybrid. The v2 hierarchy is optional: without it, kill and
		 * emptiness fall back to cgroup.procs. */
		l->mode = HOST_CGROUP_HYBRID;
		r = 0;
		goto out;
	}

	if (!want[CG_UNIFIED].path || !l->dir[CG_UNIFIED]) {
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "cgroups: no v1 memory/pids/cpu hierarchies and no mounted "
		                      "cgroup2 hierarchy");
		goto out;
	}
	/* Pure v2. A service that was moved into its leaf reads its own cgroup
	 * as the leaf's parent (file comment). */
	char *d = l->dir[CG_UNIFIED];
	char *slash = strrchr(d, '/');
	if (slash && strcmp(slash + 1, CG_SERVICE_LEAF) == 0)
		*slash = 0;
	r = cg_v2_check(d, err);
	if (r < 0)
		goto out;
	l->mode = HOST_CGROUP_V2;
	r = 0;
out:
	cg_want_clear(want);
	if (r < 0)
		cg_layout_clear(l);
	return r;
}

static bool cg_kind_used(host_cgroup_mode mode, const cg_layout *l, int k)
{
	if (mode == HOST_CGROUP_V2)
		return k == CG_UNIFIED;
	return l->dir[k] != NULL;
}

int host_cgroup_detect(host_cgroup_mode *ret, airlock_error *err)
{
	cg_layout l = { 0 };
	int r = cg_layout_load(&l, err);
	if (r < 0)
		return r;
	/* Creating groups needs write access to the service's cgroups: root,
	 * or a delegated subtree. */
	for (int k = 0; k < CG__KIND_MAX; k++) {
		if (!cg_kind_used(l.mode, &l, k))
			continue;
		if (faccessat(AT_FDCWD, l.dir[k], W_OK, AT_EACCESS) < 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
			                      "cgroups: the service's %s cgroup is not writable "
			                      "(run as root or delegate it)",
			                      cg_kind_name[k]);
			break;
		}
	}
	if (r >= 0)
		*ret = l.mode;
	cg_layout_clear(&l);
	return r;
}

/* ---- killing and waiting ---------------------------------------------------- */

static int cg_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

static int cg_pidfd_kill(int pidfd)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
}

/* One pass of SIGKILL to what dfd's cgroup.procs lists, without cgroup.kill.
 * A pid read from the file may be reaped and reused by an unrelated process
 * before we signal it, so: read the list, pin each pid's process with a
 * pidfd, read the list again, and signal only pidfds whose pid is still
 * listed. A pidfd whose process is still alive at the second read and whose
 * pid is listed there is that listed process (a live process keeps its
 * pid); one whose process has died can only fail with ESRCH. */
static int cg_kill_listed(int dfd, bool *ret_seen)
{
	_cleanup_free_ pid_t *a = NULL;
	_cleanup_free_ pid_t *b = NULL;
	_cleanup_free_ int *fds = NULL;
	size_t na = 0, nb = 0;
	int r = cg_procs_read(dfd, CG_KILL_BATCH, &a, &na);
	if (r < 0)
		return r;
	*ret_seen = na > 0;
	if (na == 0)
		return 0;
	fds = malloc(na * sizeof(*fds));
	if (!fds)
		return -ENOMEM;
	for (size_t i = 0; i < na; i++) {
		fds[i] = cg_pidfd_open(a[i]);
		if (fds[i] >= 0 || errno == ESRCH)
			continue;
		if ((errno == EMFILE || errno == ENFILE) && i > 0) {
			/* Out of descriptors: signal what is open, and let the
			 * caller's next pass take the rest. */
			na = i;
			break;
		}
		r = -errno;
		for (size_t j = 0; j < i; j++)
			cg_close(&fds[j]);
		return r;
	}
	r = cg_procs_read(dfd, SIZE_MAX, &b, &nb);
	for (size_t i = 0; i < na; i++) {
		if (fds[i] < 0)
			continue;
		if (r >= 0 && bsearch(&a[i], b, nb, sizeof(*b), cg_pid_cmp))
			(void)cg_pidfd_kill(fds[i]); /* ESRCH: it died meanwhile */
		cg_close(&fds[i]);
	}
	return r;
}

/* Kill a hierarchy's subtree at dfd once: cgroup.kill when the group has
 * it (the kernel kills every process in the subtree, and any fork racing
 * with it), else a pass over cgroup.procs of the group and, when recurse,
 * of every group below it. *ret_seen: whether the pass saw a process (with
 * cgroup.kill: always true, the caller reads cgroup.events). */
static int cg_kill_tree(int dfd, bool use_kill_file, bool recurse, int depth, bool *ret_seen)
{
	if (depth > CG_MAX_DEPTH)
		return -ELOOP;
	if (use_kill_file) {
		*ret_seen = true;
		return cg_write(dfd, "cgroup.kill", "1");
	}
	bool seen = false;
	int r = cg_kill_listed(dfd, &seen);
	if (r < 0 && r != -ENOENT)
		return r;
	*ret_seen = *ret_seen || seen;
	if (!recurse)
		return 0;
	cg_names subs = { 0 };
	r = cg_subdirs(dfd, NULL, &subs);
	if (r < 0)
		return r;
	for (size_t i = 0; i < subs.n && r >= 0; i++) {
		_cleanup_close_ int sfd = cg_open_dir(dfd, subs.v[i]);
		if (sfd == -ENOENT)
			continue;
		r = sfd < 0 ? sfd : cg_kill_tree(sfd, false, true, depth + 1, ret_seen);
	}
	cg_names_clear(&subs);
	return r;
}

/* Whether any process is left in the subtree at dfd (v1: listed in the
 * cgroup.procs of the group or of a group below it). */
static int cg_v1_populated(int dfd, int depth, bool *ret)
{
	if (depth > CG_MAX_DEPTH)
		return -ELOOP;
	_cleanup_free_ pid_t *p = NULL;
	size_t n = 0;
	int r = cg_procs_read(dfd, 1, &p, &n);
	if (r < 0)
		return r;
	if (n) {
		*ret = true;
		return 0;
	}
	cg_names subs = { 0 };
	r = cg_subdirs(dfd, NULL, &subs);
	if (r < 0)
		return r;
	bool any = false;
	for (size_t i = 0; i < subs.n && r >= 0 && !any; i++) {
		_cleanup_close_ int sfd = cg_open_dir(dfd, subs.v[i]);
		if (sfd == -ENOENT)
			continue;
		r = sfd < 0 ? sfd : cg_v1_populated(sfd, depth + 1, &any);
	}
	cg_names_clear(&subs);
	if (r >= 0)
		*ret = any;
	return r;
}

/* Kill the subtree at dfd and wait until it is empty or deadline passes;
 * *ret_empty says which. recurse: also the groups below dfd (v1; a v2
 * group's cgroup.kill and cgroup.events cover its subtree anyway).
 *
 * The wait backs off from 50 us to 1 ms. On v2 it sleeps in ppoll(2) on
 * cgroup.events, which the kernel wakes (POLLPRI) when "populated" changes;
 * the kernel rate-limits that notification to one per 10 ms per file, and
 * a group that just got its process has used it up, so the short timeouts
 * are what make a kill return in well under a millisecond. */
static int cg_kill_wait(int dfd, bool v2, bool use_kill_file, bool recurse, int64_t deadline,
                        bool *ret_empty)
{
	_cleanup_close_ int efd = -1;
	long backoff_us = 50;
	if (v2) {
		efd = openat(dfd, "cgroup.events", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (efd < 0)
			return -errno;
	}
	for (;;) {
		bool seen = false;
		int r = cg_kill_tree(dfd, use_kill_file, recurse, 0, &seen);
		if (r < 0)
			return r;
		bool populated = false;
		if (v2) {
			uint64_t v = 0;
			r = cg_keyed_fd(efd, "populated", &v);
			populated = v != 0;
		} else if (seen) {
			populated = true; /* the processes just signalled may still be exiting */
		} else if (recurse) {
			r = cg_v1_populated(dfd, 0, &populated);
		}
		if (r < 0)
			return r;
		if (!populated) {
			*ret_empty = true;
			return 0;
		}
		int64_t left_ms = deadline - util_monotonic_ms();
		if (left_ms <= 0) {
			*ret_empty = false;
			return 0;
		}
		long us = backoff_us < left_ms * 1000 ? backoff_us : (long)(left_ms * 1000);
		if (backoff_us < 1000)
			backoff_us *= 2;
		if (v2) {
			struct pollfd p = { .fd = efd, .events = POLLPRI };
			struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };
			if (ppoll(&p, 1, &ts, NULL) < 0 && errno != EINTR)
				return -errno;
		} else {
			cg_sleep_us(us);
		}
	}
}

/* rmdir name under parent, its subgroups first. A v1 group can report
 * EBUSY for a moment after its last task exited, so EBUSY is retried until
 * the deadline. */
static int cg_remove_tree(int parent, const char *name, int depth, int64_t deadline)
{
	if (depth > CG_MAX_DEPTH)
		return -ELOOP;
	{
		_cleanup_close_ int fd = cg_open_dir(parent, name);
		if (fd == -ENOENT)
			return 0;
		if (fd < 0)
			return fd;
		cg_names subs = { 0 };
		int r = cg_subdirs(fd, NULL, &subs);
		for (size_t i = 0; i < subs.n && r >= 0; i++)
			r = cg_remove_tree(fd, subs.v[i], depth + 1, deadline);
		cg_names_clear(&subs);
		if (r < 0)
			return r;
	}
	for (;;) {
		if (unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY || util_monotonic_ms() >= deadline)
			return -errno;
		cg_sleep_us(1000);
	}
}

/* ---- the sandbox's groups ------------------------------------------------------ */

static host_cgroup *cg_new(void)
{
	host_cgroup *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return NULL;
	for (int k = 0; k < CG__KIND_MAX; k++) {
		cg->h[k].own_fd = cg->h[k].sandbox_fd = -1;
		for (int i = 0; i < CG__LEAF_MAX; i++)
			cg->h[k].leaf_fd[i] = -1;
	}
	for (int c = 0; c < CG__COUNTER_MAX; c++)
		for (int i = 0; i < CG__AT_MAX; i++)
			cg->counter_fd[c][i] = -1;
	cg->cmd_events_fd = -1;
	return cg;
}

static void cg_free(host_cgroup *cg)
{
	if (!cg)
		return;
	for (int c = 0; c < CG__COUNTER_MAX; c++)
		for (int i = 0; i < CG__AT_MAX; i++)
			cg_close(&cg->counter_fd[c][i]);
	cg_close(&cg->cmd_events_fd);
	for (int k = 0; k < CG__KIND_MAX; k++) {
		for (int i = 0; i < CG__LEAF_MAX; i++)
			cg_close(&cg->h[k].leaf_fd[i]);
		/* Closing the sandbox directory drops its flock: from here the
		 * sweep may take what is left. */
		cg_close(&cg->h[k].sandbox_fd);
		cg_close(&cg->h[k].own_fd);
	}
	free(cg);
}

/* The hierarchy that holds a controller's files. */
static cg_hier *cg_ctl(host_cgroup *cg, int kind)
{
	return &cg->h[cg->mode == HOST_CGROUP_V2 ? CG_UNIFIED : kind];
}

/* Kill everything in the groups we created, wait, and remove them. On a
 * survivor: SANDBOX_ESCAPE_SUSPECTED, and the directories stay for the
 * sweep (rmdir could not succeed anyway). */
static int cg_teardown(host_cgroup *cg, int64_t deadline, airlock_error *err)
{
	/* The v2 hierarchy first: cgroup.kill there reaches every process of
	 * the sandbox at once, so the v1 passes after it normally find the
	 * groups already empty; they still run, for a process that entered
	 * some hierarchies and not others. */
	for (int k = 0; k < CG__KIND_MAX; k++) {
		cg_hier *h = &cg->h[k];
		if (!h->created || h->sandbox_fd < 0)
			continue;
		bool empty = false;
		int r = cg_kill_wait(h->sandbox_fd, h->v2, h->v2 && cg->kill_file, true, deadline,
		                     &empty);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
			                         "cgroup %s/%s: killing its processes", cg_kind_name[k],
			                         cg->name);
		if (!empty)
			return airlock_error_set(err, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
			                         "cgroup %s/%s: a process survived SIGKILL",
			                         cg_kind_name[k], cg->name);
	}
	/* Empty groups can still answer EBUSY for a moment (v1); give rmdir a
	 * little time of its own even when the kill used up the caller's. */
	int64_t rm_deadline = util_monotonic_ms() + 1000;
	if (rm_deadline < deadline)
		rm_deadline = deadline;
	int first = 0;
	for (int k = 0; k < CG__KIND_MAX; k++) {
		cg_hier *h = &cg->h[k];
		if (!h->created)
			continue;
		int r = cg_remove_tree(h->own_fd, cg->name, 0, rm_deadline);
		if (r < 0 && first == 0)
			first = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s/%s: rmdir",
			                          cg_kind_name[k], cg->name);
		else if (r == 0)
			h->created = false;
	}
	return first;
}

/* Pure v2: make memory, pids and cpu available to the sandbox groups. */
static int cg_v2_enable(int own_fd, airlock_error *err)
{
	char buf[CG_SMALL_FILE];
	int r = cg_read(own_fd, "cgroup.subtree_control", buf, sizeof(buf));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
		                         "cgroups: reading cgroup.subtree_control");
	if (cg_has_word(buf, "memory", ' ') && cg_has_word(buf, "pids", ' ') &&
	    cg_has_word(buf, "cpu", ' '))
		return 0;
	/* A few rounds: a process the service forks while we move the others
	 * is born in the old cgroup and needs another round. */
	for (int round = 0; round < 8; round++) {
		r = cg_write(own_fd, "cgroup.subtree_control", "+memory +pids +cpu");
		if (r == 0)
			return 0;
		if (r != -EBUSY)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -r,
			                         "cgroups: enabling memory, pids and cpu for the "
			                         "service's v2 cgroup");
		/* EBUSY: "no internal processes". Move what lives in our cgroup
		 * (the service; under systemd only the unit's processes) into
		 * the leaf; nothing else changes for them. */
		if (mkdirat(own_fd, CG_SERVICE_LEAF, 0755) < 0 && errno != EEXIST)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
			                         "cgroups: creating the service leaf");
		_cleanup_close_ int leaf = cg_open_dir(own_fd, CG_SERVICE_LEAF);
		if (leaf < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -leaf,
			                         "cgroups: opening the service leaf");
		_cleanup_free_ pid_t *pids = NULL;
		size_t n = 0;
		r = cg_procs_read(own_fd, SIZE_MAX, &pids, &n);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
			                         "cgroups: reading the service's cgroup.procs");
		for (size_t i = 0; i < n; i++) {
			char v[24];
			snprintf(v, sizeof(v), "%d", (int)pids[i]);
			r = cg_write(leaf, "cgroup.procs", v);
			if (r < 0 && r != -ESRCH)
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
				                         "cgroups: moving pid %d into the service leaf",
				                         (int)pids[i]);
		}
	}
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, EBUSY,
	                         "cgroups: the service's v2 cgroup keeps gaining processes");
}

static int cg_set(host_cgroup *cg, int kind, const char *file, const char *value,
                  bool optional, airlock_error *err)
{
	int r = cg_write(cg_ctl(cg, kind)->sandbox_fd, file, value);
	if (r == -ENOENT && optional)
		return 0;
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s: writing %s=%s",
		                         cg->name, file, value);
	return 0;
}

static int cg_apply_limits(host_cgroup *cg, const airlock_resource_limits *lim,
                           airlock_error *err)
{
	char mem[24], pids[24], quota[24], cpumax[48];
	int64_t q = lim->cpu_millicores * (CG_CPU_PERIOD_US / 1000);
	if (q < CG_CPU_QUOTA_MIN_US)
		q = CG_CPU_QUOTA_MIN_US;
	snprintf(mem, sizeof(mem), "%" PRId64, lim->memory_bytes);
	if (lim->pids_max > CG_PIDS_LIMIT_MAX)
		snprintf(pids, sizeof(pids), "max");
	else
		snprintf(pids, sizeof(pids), "%" PRId64, lim->pids_max);
	snprintf(quota, sizeof(quota), "%" PRId64, q);
	snprintf(cpumax, sizeof(cpumax), "%" PRId64 " %d", q, CG_CPU_PERIOD_US);
	int r;

	if (cg->mode == HOST_CGROUP_V2) {
		/* memory.swap.max=0: swap cannot stretch the limit. It is absent
		 * only on kernels without swap, where there is nothing to cap. */
		if ((r = cg_set(cg, CG_MEMORY, "memory.max", mem, false, err)) < 0 ||
		    (r = cg_set(cg, CG_MEMORY, "memory.swap.max", "0", true, err)) < 0 ||
		    (r = cg_set(cg, CG_PIDS, "pids.max", pids, false, err)) < 0 ||
		    (r = cg_set(cg, CG_CPU, "cpu.max", cpumax, false, err)) < 0)
			return r;
		return 0;
	}

	/* v1 memory: memsw (memory + swap) equal to the limit, so swap cannot
	 * extend it. The kernel requires memsw >= limit at every step, and both
	 * start unlimited, so the limit goes first. Without swap accounting
	 * (no memsw file), swappiness 0 keeps the group's pages out of swap. */
	if ((r = cg_set(cg, CG_MEMORY, "memory.limit_in_bytes", mem, false, err)) < 0)
		return r;
	r = cg_write(cg_ctl(cg, CG_MEMORY)->sandbox_fd, "memory.memsw.limit_in_bytes", mem);
	if (r == -ENOENT)
		r = cg_set(cg, CG_MEMORY, "memory.swappiness", "0", false, err);
	else if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
		                         "cgroup %s: writing memory.memsw.limit_in_bytes=%s",
		                         cg->name, mem);
	if (r < 0)
		return r;
	/* v1 socket buffers. A v1 memory cgroup charges no socket buffer
	 * anywhere until memory.kmem.tcp.limit_in_bytes is written: then every
	 * socket created in it afterwards (none exists yet) charges TCP and UDP
	 * buffers to the group's own tcp counter, outside memory.usage_in_bytes,
	 * and past the limit TCP shrinks its windows and UDP drops datagrams.
	 * Before this, 200 loopback TCP connections in a 64 MiB group queued
	 * 780 MB of host memory. A quarter of the memory limit: total kernel
	 * and user memory stays within 1.25 times the limit (plus the few pages
	 * per socket the kernel always grants), and a build's downloads through
	 * the proxy need a few MiB. Required: without it the limit does not
	 * hold. (v2 charges socket buffers to memory.current itself.) Unix
	 * socket buffers are charged to the memory limit by the kernel. */
	char tcp[24];
	snprintf(tcp, sizeof(tcp), "%" PRId64, lim->memory_bytes / CG_V1_TCP_SHARE);
	/* The write turns accounting on for that group only, and a socket is
	 * charged to the group of the process that made it: the leaves, where
	 * the processes are, need it as much as the sandbox group, whose
	 * counter their charges also go to (the tcp counters are hierarchical,
	 * so the sandbox group's limit holds for init and cmd together). */
	const cg_hier *mh = cg_ctl(cg, CG_MEMORY);
	const int tcp_dirs[] = { mh->sandbox_fd, mh->leaf_fd[CG_INIT], mh->leaf_fd[CG_CMD] };
	for (size_t i = 0; i < ARRAY_SIZE(tcp_dirs); i++) {
		r = cg_write(tcp_dirs[i], "memory.kmem.tcp.limit_in_bytes", tcp);
		if (r == -ENOENT)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                         "cgroup %s: this kernel has no "
			                         "memory.kmem.tcp.limit_in_bytes, so socket buffers "
			                         "would escape the memory limit",
			                         cg->name);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
			                         "cgroup %s: writing memory.kmem.tcp.limit_in_bytes=%s",
			                         cg->name, tcp);
	}
	if ((r = cg_set(cg, CG_PIDS, "pids.max", pids, false, err)) < 0 ||
	    (r = cg_set(cg, CG_CPU, "cpu.cfs_period_us", "100000", false, err)) < 0 ||
	    (r = cg_set(cg, CG_CPU, "cpu.cfs_quota_us", quota, false, err)) < 0)
		return r;
	return 0;
}

/* Open the counter files once: execute polls them after every event. */
static int cg_open_counters(host_cgroup *cg, airlock_error *err)
{
	static const struct {
		int kind;
		const char *v1, *v2;
	} files[CG__COUNTER_MAX] = {
		[CG_OOM] = { CG_MEMORY, "memory.oom_control", "memory.events" },
		[CG_PIDS_EVENTS] = { CG_PIDS, "pids.events", "pids.events" },
	};
	for (int c = 0; c < CG__COUNTER_MAX; c++) {
		cg_hier *h = cg_ctl(cg, files[c].kind);
		int dirs[CG__AT_MAX] = { h->sandbox_fd, h->leaf_fd[CG_INIT], h->leaf_fd[CG_CMD] };
		/* v2 keeps these counters hierarchically in the group whose limit
		 * was hit (the sandbox group: its leaves have no controllers of
		 * their own); v1 keeps them only in the group of the task
		 * concerned, so the leaves are read too and summed. */
		int n = cg->mode == HOST_CGROUP_V2 ? 1 : CG__AT_MAX;
		const char *file = cg->mode == HOST_CGROUP_V2 ? files[c].v2 : files[c].v1;
		for (int i = 0; i < n; i++) {
			cg->counter_fd[c][i] = openat(dirs[i], file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			if (cg->counter_fd[c][i] < 0)
				return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
				                         "cgroup %s: opening %s", cg->name, file);
		}
	}
	if (cg->h[CG_UNIFIED].used) {
		cg->cmd_events_fd = openat(cg->h[CG_UNIFIED].leaf_fd[CG_CMD], "cgroup.events",
		                           O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (cg->cmd_events_fd < 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
			                         "cgroup %s: opening cmd/cgroup.events", cg->name);
	}
	return 0;
}

/* mkdir the sandbox directory in one hierarchy and lock it. The shared lock
 * on the parent keeps a concurrent sweep (which holds it exclusively) from
 * seeing the directory before it is locked. */
static int cg_make_sandbox_dir(host_cgroup *cg, int k, airlock_error *err)
{
	cg_hier *h = &cg->h[k];
	int r = cg_flock(h->own_fd, LOCK_SH);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s: locking the parent",
		                         cg_kind_name[k]);
	if (mkdirat(h->own_fd, cg->name, 0755) < 0) {
		int e = errno;
		(void)cg_flock(h->own_fd, LOCK_UN);
		if (e == EEXIST)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                         "cgroup %s/%s already exists (a live sandbox with "
			                         "this id, or a leftover for the sweep)",
			                         cg_kind_name[k], cg->name);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "cgroup %s/%s: mkdir",
		                         cg_kind_name[k], cg->name);
	}
	h->created = true;
	h->sandbox_fd = cg_open_dir(h->own_fd, cg->name);
	r = h->sandbox_fd < 0 ? h->sandbox_fd : cg_flock(h->sandbox_fd, LOCK_EX | LOCK_NB);
	(void)cg_flock(h->own_fd, LOCK_UN);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s/%s: open and lock",
		                         cg_kind_name[k], cg->name);
	for (int i = 0; i < CG__LEAF_MAX; i++) {
		if (mkdirat(h->sandbox_fd, cg_leaf_name[i], 0755) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "cgroup %s/%s/%s: mkdir",
			                         cg_kind_name[k], cg->name, cg_leaf_name[i]);
		h->leaf_fd[i] = cg_open_dir(h->sandbox_fd, cg_leaf_name[i]);
		if (h->leaf_fd[i] < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -h->leaf_fd[i],
			                         "cgroup %s/%s/%s: open", cg_kind_name[k], cg->name,
			                         cg_leaf_name[i]);
	}
	return 0;
}

int host_cgroup_create(const char *environment_id, const airlock_resource_limits *limits,
                       host_cgroup **ret, airlock_error *err)
{
	if (!cg_id_valid(environment_id))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "cgroup: environment id must be 1-%d of [A-Za-z0-9_-]",
		                         AIRLOCK_ENVIRONMENT_ID_MAX - 1);
	if (!limits || limits->cpu_millicores <= 0 || limits->memory_bytes <= 0 ||
	    limits->pids_max <= 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "cgroup: cpu_millicores, memory_bytes and pids_max must be "
		                         "positive");
	/* The quota must not overflow; a million cores is beyond any host. */
	if (limits->cpu_millicores > INT64_C(1000000000))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "cgroup: cpu_millicores is out of range");

	cg_layout l = { 0 };
	int r = cg_layout_load(&l, err);
	if (r < 0)
		return r;
	host_cgroup *cg = cg_new();
	if (!cg) {
		cg_layout_clear(&l);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "cgroup");
	}
	cg->mode = l.mode;
	snprintf(cg->name, sizeof(cg->name), "%s%s", HOST_CGROUP_PREFIX, environment_id);

	for (int k = 0; k < CG__KIND_MAX && r >= 0; k++) {
		if (!cg_kind_used(l.mode, &l, k))
			continue;
		cg_hier *h = &cg->h[k];
		h->used = true;
		h->v2 = k == CG_UNIFIED;
		/* The mount point and the path below it come from the kernel
		 * (mountinfo, /proc/self/cgroup), not from anything a tenant
		 * controls. */
		h->own_fd = open(l.dir[k], O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (h->own_fd < 0)
			r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
			                      "cgroup: opening the service's %s cgroup", cg_kind_name[k]);
	}
	cg_layout_clear(&l);
	if (r >= 0 && cg->mode == HOST_CGROUP_V2)
		r = cg_v2_enable(cg->h[CG_UNIFIED].own_fd, err);
	for (int k = 0; k < CG__KIND_MAX && r >= 0; k++)
		if (cg->h[k].used)
			r = cg_make_sandbox_dir(cg, k, err);
	if (r >= 0)
		r = cg_apply_limits(cg, limits, err);
	if (r >= 0 && cg->h[CG_UNIFIED].used)
		cg->kill_file = !cg_force_kill_fallback &&
		                faccessat(cg->h[CG_UNIFIED].sandbox_fd, "cgroup.kill", W_OK, 0) == 0;
	if (r >= 0)
		r = cg_open_counters(cg, err);
	if (r < 0) {
		/* Nothing has entered the groups yet, so this only removes them;
		 * its own error is secondary to the one being returned. */
		airlock_error ignored;
		(void)cg_teardown(cg, util_monotonic_ms() + 1000, &ignored);
		cg_free(cg);
		return r;
	}
	*ret = cg;
	return 0;
}

static int cg_enter(host_cgroup *cg, int leaf, pid_t pid, airlock_error *err)
{
	if (!cg || pid <= 0)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, EINVAL, "cgroup: enter");
	char v[24];
	snprintf(v, sizeof(v), "%d", (int)pid);
	/* The v2 hierarchy first, so that from the first write on, the
	 * sandbox's cgroup.kill reaches the process. */
	for (int k = 0; k < CG__KIND_MAX; k++) {
		cg_hier *h = &cg->h[k];
		if (!h->used)
			continue;
		int r = cg_write(h->leaf_fd[leaf], "cgroup.procs", v);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
			                         "cgroup %s/%s/%s: moving pid %d", cg_kind_name[k],
			                         cg->name, cg_leaf_name[leaf], (int)pid);
	}
	return 0;
}

int host_cgroup_enter_init(host_cgroup *cg, pid_t pid, airlock_error *err)
{
	return cg_enter(cg, CG_INIT, pid, err);
}

int host_cgroup_enter_cmd(host_cgroup *cg, pid_t pid, airlock_error *err)
{
	return cg_enter(cg, CG_CMD, pid, err);
}

static int cg_counter(host_cgroup *cg, int c, const char *key, uint64_t *ret,
                      airlock_error *err)
{
	if (!cg)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, EINVAL, "cgroup: counter");
	uint64_t sum = 0;
	for (int i = 0; i < CG__AT_MAX; i++) {
		if (cg->counter_fd[c][i] < 0)
			continue;
		uint64_t v;
		int r = cg_keyed_fd(cg->counter_fd[c][i], key, &v);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s: reading %s",
			                         cg->name, key);
		sum += v;
	}
	*ret = sum;
	return 0;
}

int host_cgroup_oom_kills(host_cgroup *cg, uint64_t *ret, airlock_error *err)
{
	/* The OOM killer's kill counter, never failcnt: failcnt counts every
	 * charge that hit the limit and was then satisfied by reclaim
	 * (DESIGN.md, "MEMORY"). */
	return cg_counter(cg, CG_OOM, "oom_kill", ret, err);
}

int host_cgroup_pids_max_events(host_cgroup *cg, uint64_t *ret, airlock_error *err)
{
	return cg_counter(cg, CG_PIDS_EVENTS, "max", ret, err);
}

int host_cgroup_cmd_populated(host_cgroup *cg, bool *ret, airlock_error *err)
{
	if (!cg)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, EINVAL, "cgroup: populated");
	int r;
	if (cg->cmd_events_fd >= 0) {
		uint64_t v;
		r = cg_keyed_fd(cg->cmd_events_fd, "populated", &v);
		if (r >= 0)
			*ret = v != 0;
	} else {
		r = cg_v1_populated(cg->h[CG_PIDS].leaf_fd[CG_CMD], 0, ret);
	}
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s/cmd: populated",
		                         cg->name);
	return 0;
}

int host_cgroup_kill_cmd(host_cgroup *cg, int timeout_ms, airlock_error *err)
{
	if (!cg)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, EINVAL, "cgroup: kill");
	int64_t deadline = util_monotonic_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	/* Every hierarchy's cmd group: the v2 one through cgroup.kill (nothing
	 * forked by the command escapes it), the v1 ones by pid, which normally
	 * finds them already empty. */
	for (int k = 0; k < CG__KIND_MAX; k++) {
		cg_hier *h = &cg->h[k];
		if (!h->used)
			continue;
		bool empty = false;
		int r = cg_kill_wait(h->leaf_fd[CG_CMD], h->v2, h->v2 && cg->kill_file, false,
		                     deadline, &empty);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s/%s/cmd: kill",
			                         cg_kind_name[k], cg->name);
		if (!empty)
			return airlock_error_set(err, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
			                         "cgroup %s/%s/cmd: a process survived SIGKILL",
			                         cg_kind_name[k], cg->name);
	}
	return 0;
}

int host_cgroup_destroy(host_cgroup *cg, int timeout_ms, airlock_error *err)
{
	if (!cg)
		return 0;
	int64_t deadline = util_monotonic_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	int r = cg_teardown(cg, deadline, err);
	cg_free(cg);
	return r;
}

/* ---- crash recovery ---------------------------------------------------------- */

/* Remove the leftover groups of one hierarchy. Groups whose lock is held
 * belong to a live host_cgroup (in this process or another) and are
 * left alone. */
static int cg_sweep_one(int k, const char *dir, bool v2, cg_names *removed, airlock_error *err)
{
	_cleanup_close_ int own = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (own < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
		                         "cgroup sweep: opening the service's %s cgroup",
		                         cg_kind_name[k]);
	/* Held until the scan ends; closing own releases it on every path. */
	int r = cg_flock(own, LOCK_EX);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup sweep: locking %s",
		                         cg_kind_name[k]);
	cg_names l = { 0 };
	r = cg_subdirs(own, HOST_CGROUP_PREFIX, &l);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup sweep: listing %s",
		                         cg_kind_name[k]);
	int first = 0;
	for (size_t i = 0; i < l.n; i++) {
		const char *name = l.v[i];
		if (!cg_id_valid(name + strlen(HOST_CGROUP_PREFIX)))
			continue; /* not a name this module makes */
		_cleanup_close_ int fd = cg_open_dir(own, name);
		if (fd == -ENOENT)
			continue;
		r = fd < 0 ? fd : cg_flock(fd, LOCK_EX | LOCK_NB);
		if (r == -EWOULDBLOCK)
			continue; /* live */
		bool empty = false;
		if (r >= 0) {
			bool kill_file = v2 && !cg_force_kill_fallback &&
			                 faccessat(fd, "cgroup.kill", W_OK, 0) == 0;
			r = cg_kill_wait(fd, v2, kill_file, true,
			                 util_monotonic_ms() + CG_SWEEP_WAIT_MS, &empty);
		}
		if (r >= 0 && !empty) {
			if (!first)
				first = airlock_error_set(err, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
				                          "cgroup sweep %s/%s: a process survived SIGKILL",
				                          cg_kind_name[k], name);
			continue;
		}
		if (r >= 0)
			r = cg_remove_tree(own, name, 0, util_monotonic_ms() + CG_SWEEP_WAIT_MS);
		if (r < 0) {
			if (!first)
				first = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
				                          "cgroup sweep %s/%s", cg_kind_name[k], name);
			continue;
		}
		if (!cg_names_has(removed, name) && (r = cg_names_add(removed, name)) < 0 && !first)
			first = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup sweep");
	}
	cg_names_clear(&l);
	return first;
}

int host_cgroup_sweep(unsigned *ret_removed, airlock_error *err)
{
	cg_layout l = { 0 };
	int r = cg_layout_load(&l, err);
	if (r < 0)
		return r;
	cg_names removed = { 0 };
	int first = 0;
	for (int k = 0; k < CG__KIND_MAX; k++) {
		if (!cg_kind_used(l.mode, &l, k))
			continue;
		r = cg_sweep_one(k, l.dir[k], k == CG_UNIFIED, &removed, first ? NULL : err);
		if (r < 0 && !first)
			first = r;
	}
	if (ret_removed)
		*ret_removed = (unsigned)removed.n;
	cg_names_clear(&removed);
	cg_layout_clear(&l);
	return first;
}
