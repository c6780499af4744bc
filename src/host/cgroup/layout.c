/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where the service's cgroups are, and which mode that is (cgroup.h). Mount
 * points come from /proc/self/mountinfo and the service's place in each
 * hierarchy from /proc/self/cgroup; no path under /sys/fs/cgroup is
 * assumed. Each mode's driver (v1.c, v2.c) claims the layout it handles.
 *
 * Read once per process: a provision does not re-read two /proc files and
 * the controller list. A forked child reads its own (it may have been moved
 * to another cgroup, and the layout tests fake /proc files in one); a
 * failed read is not kept, so a host fixed since is seen at the next call.
 * What the cache costs: a service that an operator moves to another cgroup
 * after its first provision keeps creating sandboxes under the old one, and
 * a controller taken away from its parent later is reported when enabling
 * it fails rather than by the first check; restart the service after
 * either. (Readers hold the cached layout without a lock, so it is never
 * replaced in a running process.)
 */
#include "host/cgroup/cgroup_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

/* In the order they are asked: the first that claims the host is its mode. */
static const cg_driver *const cg_drivers[] = { &cg_driver_hybrid, &cg_driver_v2 };

static void cg_layout_clear(cg_layout *l)
{
	for (int k = 0; k < CG__KIND_MAX; k++) {
		free(l->dir[k]);
		l->dir[k] = NULL;
	}
	l->mode = HOST_CGROUP_INVALID;
	l->drv = NULL;
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

static void cg_want_clear(cg_want *w)
{
	for (int k = 0; k < CG__KIND_MAX; k++) {
		free(w[k].ctl);
		free(w[k].path);
		w[k].ctl = w[k].path = NULL;
	}
}

/* Open one of the service's /proc files. */
static int cg_proc_open(const char *path, FILE **ret, airlock_error *err)
{
	*ret = fopen(path, "re");
	if (!*ret)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "cgroups: cannot read %s", path);
	return 0;
}

/* The next line of f, its newline cut off: what getline returns. */
static ssize_t cg_proc_line(char **line, size_t *cap, FILE *f)
{
	ssize_t len = getline(line, cap, f);
	if (len > 0 && (*line)[len - 1] == '\n')
		(*line)[len - 1] = 0;
	return len;
}

static int cg_read_self(cg_want *want, airlock_error *err)
{
	_cleanup_fclose_ FILE *f = NULL;
	int r = cg_proc_open("/proc/self/cgroup", &f, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	while (cg_proc_line(&line, &cap, f) > 0) {
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
	_cleanup_fclose_ FILE *f = NULL;
	int r = cg_proc_open("/proc/self/mountinfo", &f, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	while (cg_proc_line(&line, &cap, f) > 0) {
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

/* Decide the mode and fill l; EXECUTION_UNAVAILABLE with a reason a person
 * can act on (for `airlock doctor`). */
static int cg_layout_load(cg_layout *l, airlock_error *err)
{
	cg_want want[CG__KIND_MAX] = { 0 };
	int r = cg_read_self(want, err);
	if (r >= 0)
		r = cg_read_mounts(want, l, err);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(cg_drivers); i++) {
		r = cg_drivers[i]->claim(want, l, err);
		if (r > 0) {
			l->mode = cg_drivers[i]->mode;
			l->drv = cg_drivers[i];
			r = 0;
			break;
		}
	}
	if (r == 0 && !l->drv)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "cgroups: no mode of this driver fits the host's hierarchies");
	cg_want_clear(want);
	if (r < 0)
		cg_layout_clear(l);
	return r;
}

static pthread_mutex_t cg_layout_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t cg_layout_once = PTHREAD_ONCE_INIT;
static cg_layout cg_layout_cached;
static pid_t cg_layout_pid; /* the process that read cg_layout_cached; 0: none */

/* Held across fork, so a child never inherits the lock taken or the cache
 * half written by another thread. */
static void cg_layout_prefork(void) { pthread_mutex_lock(&cg_layout_lock); }
static void cg_layout_postfork(void) { pthread_mutex_unlock(&cg_layout_lock); }
/* A child reads its own layout (its cgroup may differ): the pid comparison
 * alone would keep a stale copy in a descendant that happens to get the
 * reader's pid again. One store, safe in a fork handler. */
static void cg_layout_postfork_child(void)
{
	cg_layout_pid = 0;
	pthread_mutex_unlock(&cg_layout_lock);
}
static void cg_layout_atfork(void)
{
	pthread_atfork(cg_layout_prefork, cg_layout_postfork, cg_layout_postfork_child);
}

int cg_layout_get(const cg_layout **ret, airlock_error *err)
{
	pthread_once(&cg_layout_once, cg_layout_atfork);
	pthread_mutex_lock(&cg_layout_lock);
	int r = 0;
	pid_t self = getpid();
	if (cg_layout_pid != self) {
		cg_layout_clear(&cg_layout_cached);
		cg_layout_pid = 0;
		r = cg_layout_load(&cg_layout_cached, err);
		if (r >= 0)
			cg_layout_pid = self;
	}
	pthread_mutex_unlock(&cg_layout_lock);
	if (r < 0)
		return r;
	/* Written only by the process's first successful call, under the lock,
	 * and never changed afterwards: readers need no lock. */
	*ret = &cg_layout_cached;
	return 0;
}

int host_cgroup_detect(host_cgroup_mode *ret, airlock_error *err)
{
	const cg_layout *l = NULL;
	int r = cg_layout_get(&l, err);
	if (r < 0)
		return r;
	/* Creating groups needs write access to the service's cgroups: root,
	 * or a delegated subtree. */
	for (int k = 0; k < CG__KIND_MAX; k++) {
		if (!l->drv->kind_used(l, k))
			continue;
		if (faccessat(AT_FDCWD, l->dir[k], W_OK, AT_EACCESS) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
			                         "cgroups: the service's %s cgroup is not writable "
			                         "(run as root or delegate it)",
			                         cg_kind_name[k]);
	}
	*ret = l->mode;
	return 0;
}

int host_cgroup_v2_check(airlock_error *err)
{
	const cg_layout *l = NULL;
	int r = cg_layout_get(&l, err);
	if (r < 0)
		return r;
	if (!l->dir[CG_UNIFIED])
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "cgroups: no cgroup2 hierarchy is mounted for the service, and "
		                         "the sandbox's socket budget attaches its BPF programs there "
		                         "(mount cgroup2, e.g. at /sys/fs/cgroup/unified)");
	return 0;
}

