/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cgroup driver's layout decision (host_cgroup_detect) on layouts this
 * host does not have. These hosts are hybrid: memory, pids and cpu are bound
 * to v1 hierarchies, and no cgroup2 mount of our own can take them while
 * those hierarchies hold cgroups, so the pure v2 driver never runs here
 * (scripts/test.sh says so in its summary). What can run without the kernel
 * is the decision itself: which mode, which directory, which refusal. Each
 * test forks a child into a mount namespace of its own, builds a cgroup tree
 * on a tmpfs, and bind-mounts a /proc/PID/cgroup and /proc/PID/mountinfo
 * describing that layout over the child's own; the driver reads those.
 * Nothing leaves the child's mount namespace, which ends with it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/cgroup/cgroup.h"

typedef struct layout {
	const char *proc_cgroup; /* the child's /proc/self/cgroup */
	/* mountinfo lines, "@" standing for the tmpfs root */
	const char *mountinfo[4];
	/* directories under the tmpfs root, and files as "path=content" */
	const char *dirs[7];
	const char *files[6];
} layout;

typedef struct outcome {
	int rc;
	host_cgroup_mode mode;
	char message[512];
	int v2_rc; /* host_cgroup_v2_check's, after a detection that succeeded */
	char v2_message[512];
} outcome;

static void write_file(const char *path, const char *content)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, content, strlen(content)) != (ssize_t)strlen(content))
		_exit(100);
	close(fd);
}

/* In the child: build the layout, run the detection, report through fd. */
static void child(const layout *l, const char *root, int fd)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("airlock-test-cg", root, "tmpfs", 0, "mode=0755,size=1m") < 0)
		_exit(101);
	char path[512];
	for (size_t i = 0; i < 7 && l->dirs[i]; i++) {
		snprintf(path, sizeof(path), "%s/%s", root, l->dirs[i]);
		if (mkdir(path, 0755) < 0)
			_exit(102);
	}
	for (size_t i = 0; i < 6 && l->files[i]; i++) {
		const char *eq = strchr(l->files[i], '=');
		snprintf(path, sizeof(path), "%s/%.*s", root, (int)(eq - l->files[i]), l->files[i]);
		write_file(path, eq + 1);
	}
	/* The fake /proc files live on the tmpfs too. */
	char cg[512], mi[512], text[4096] = "";
	snprintf(cg, sizeof(cg), "%s/proc-cgroup", root);
	write_file(cg, l->proc_cgroup);
	for (size_t i = 0; i < 4 && l->mountinfo[i]; i++) {
		/* "@" stands for the tmpfs root. */
		const char *at = strchr(l->mountinfo[i], '@');
		size_t len = strlen(text);
		if (at)
			snprintf(text + len, sizeof(text) - len, "%.*s%s%s\n",
			         (int)(at - l->mountinfo[i]), l->mountinfo[i], root, at + 1);
		else
			snprintf(text + len, sizeof(text) - len, "%s\n", l->mountinfo[i]);
	}
	snprintf(mi, sizeof(mi), "%s/proc-mountinfo", root);
	write_file(mi, text);
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)getpid());
	if (mount(cg, path, NULL, MS_BIND, NULL) < 0)
		_exit(103);
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)getpid());
	if (mount(mi, path, NULL, MS_BIND, NULL) < 0)
		_exit(104);
	outcome o = { 0 };
	airlock_error err = { 0 };
	o.rc = host_cgroup_detect(&o.mode, &err);
	snprintf(o.message, sizeof(o.message), "%s", err.message);
	if (o.rc == 0) {
		airlock_error v2err = { 0 };
		o.v2_rc = host_cgroup_v2_check(&v2err);
		snprintf(o.v2_message, sizeof(o.v2_message), "%s", v2err.message);
	}
	if (write(fd, &o, sizeof(o)) != (ssize_t)sizeof(o))
		_exit(105);
	_exit(0);
}

static outcome detect_on(const layout *l)
{
	if (geteuid() != 0)
		cr_skip_test("needs root (a mount namespace and bind mounts over /proc)");
	char root[] = "/tmp/airlock-cg-layout-XXXXXX";
	cr_assert_not_null(mkdtemp(root));
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(p[0]);
		child(l, root, p[1]);
	}
	close(p[1]);
	outcome o = { 0 };
	ssize_t n = read(p[0], &o, sizeof(o));
	close(p[0]);
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	rmdir(root);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	          "the layout child failed at step %d (101 namespace/tmpfs, 102 mkdir, "
	          "103/104 bind over /proc)",
	          WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	cr_assert_eq(n, (ssize_t)sizeof(o));
	return o;
}

#define V2_MOUNT "30 1 0:26 / @ rw,nosuid - cgroup2 cgroup2 rw,nsdelegate"
#define UNAVAILABLE airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE)

Test(cgroup_layout, pure_v2_is_the_v2_driver)
{
	layout l = {
		.proc_cgroup = "0::/svc\n",
		.mountinfo = { V2_MOUNT },
		.dirs = { "svc" },
		.files = { "svc/cgroup.controllers=cpuset cpu io memory pids\n" },
	};
	outcome o = detect_on(&l);
	cr_assert_eq(o.rc, 0, "%s", o.message);
	cr_assert_eq(o.mode, HOST_CGROUP_V2);
}

/* A service that already moved itself into its leaf reads its cgroup as
 * the leaf; the controllers are checked on the leaf's parent. */
Test(cgroup_layout, pure_v2_service_in_its_leaf)
{
	layout l = {
		.proc_cgroup = "0::/svc/airlockd\n",
		.mountinfo = { V2_MOUNT },
		.dirs = { "svc", "svc/airlockd" },
		.files = { "svc/cgroup.controllers=cpu memory pids\n",
		           "svc/airlockd/cgroup.controllers=\n" },
	};
	outcome o = detect_on(&l);
	cr_assert_eq(o.rc, 0, "%s", o.message);
	cr_assert_eq(o.mode, HOST_CGROUP_V2);
}

Test(cgroup_layout, pure_v2_without_a_controller_is_refused_by_name)
{
	static const char *const missing[][2] = {
		{ "cpu pids\n", "memory" }, { "cpu memory\n", "pids" }, { "memory pids\n", "cpu" },
		/* a word is a whole word: cpuset is not cpu */
		{ "cpuset memory pids\n", "cpu" },
	};
	for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
		char file[128];
		snprintf(file, sizeof(file), "svc/cgroup.controllers=%s", missing[i][0]);
		layout l = {
			.proc_cgroup = "0::/svc\n",
			.mountinfo = { V2_MOUNT },
			.dirs = { "svc" },
			.files = { file },
		};
		outcome o = detect_on(&l);
		cr_assert_eq(o.rc, UNAVAILABLE, "controllers %s: rc %d", missing[i][0], o.rc);
		char want[64];
		snprintf(want, sizeof(want), "the %s controller is not available", missing[i][1]);
		cr_assert(strstr(o.message, want), "controllers %s: %s", missing[i][0], o.message);
	}
}

/* The mount shows a subtree; a service cgroup outside it does not count. */
Test(cgroup_layout, pure_v2_mount_of_another_subtree_does_not_count)
{
	layout l = {
		.proc_cgroup = "0::/svc\n",
		.mountinfo = { "30 1 0:26 /other @ rw - cgroup2 cgroup2 rw" },
		.dirs = { "svc" },
		.files = { "svc/cgroup.controllers=cpu memory pids\n" },
	};
	outcome o = detect_on(&l);
	cr_assert_eq(o.rc, UNAVAILABLE);
	cr_assert(strstr(o.message, "no mounted cgroup2 hierarchy"), "%s", o.message);
}

Test(cgroup_layout, no_hierarchy_at_all_is_refused)
{
	layout l = {
		.proc_cgroup = "0::/svc\n",
		.mountinfo = { "25 1 0:22 / /proc rw - proc proc rw" },
		.dirs = { "svc" },
	};
	outcome o = detect_on(&l);
	cr_assert_eq(o.rc, UNAVAILABLE);
	cr_assert(strstr(o.message, "no v1 memory/pids/cpu hierarchies"), "%s", o.message);
}

/* v1 for some controllers and not others is neither driver's layout. */
Test(cgroup_layout, mixed_v1_and_v2_is_refused)
{
	layout l = {
		.proc_cgroup = "4:memory:/svc\n0::/svc\n",
		.mountinfo = { "31 1 0:27 / @/memory rw - cgroup cgroup rw,memory", V2_MOUNT },
		.dirs = { "memory", "memory/svc", "svc" },
		.files = { "svc/cgroup.controllers=cpu memory pids\n" },
	};
	outcome o = detect_on(&l);
	cr_assert_eq(o.rc, UNAVAILABLE);
	cr_assert(strstr(o.message, "mixed layout"), "%s", o.message);
}

/* Hybrid, as on these hosts, decided from the same fake files: the control
 * that the fake layout is what the driver reads. */
Test(cgroup_layout, hybrid_is_the_v1_driver)
{
	layout l = {
		.proc_cgroup = "8:pids:/svc\n4:memory:/svc\n1:cpu:/svc\n0::/svc\n",
		.mountinfo = { "31 1 0:27 / @/memory rw - cgroup cgroup rw,memory",
		               "32 1 0:28 / @/pids rw - cgroup cgroup rw,pids",
		               "33 1 0:29 / @/cpu rw - cgroup cgroup rw,cpu", V2_MOUNT },
		.dirs = { "memory", "memory/svc", "pids", "pids/svc", "cpu", "cpu/svc", "svc" },
		.files = { NULL },
	};
	outcome o = detect_on(&l);
	cr_assert_eq(o.rc, 0, "%s", o.message);
	cr_assert_eq(o.mode, HOST_CGROUP_HYBRID);
	cr_assert_eq(o.v2_rc, 0, "%s", o.v2_message);
}

/* Without its cgroup2 mount a hybrid host still runs the v1 driver (kill
 * falls back to cgroup.procs), but the socket budget has nowhere to attach:
 * the mechanisms' probes and provisions say so (host/sockbudget.h). */
Test(cgroup_layout, hybrid_without_cgroup2_has_no_socket_budget)
{
	layout l = {
		.proc_cgroup = "8:pids:/svc\n4:memory:/svc\n1:cpu:/svc\n0::/svc\n",
		.mountinfo = { "31 1 0:27 / @/memory rw - cgroup cgroup rw,memory",
		               "32 1 0:28 / @/pids rw - cgroup cgroup rw,pids",
		               "33 1 0:29 / @/cpu rw - cgroup cgroup rw,cpu" },
		.dirs = { "memory", "memory/svc", "pids", "pids/svc", "cpu", "cpu/svc" },
		.files = { NULL },
	};
	outcome o = detect_on(&l);
	cr_assert_eq(o.rc, 0, "%s", o.message);
	cr_assert_eq(o.mode, HOST_CGROUP_HYBRID);
	cr_assert_eq(o.v2_rc, UNAVAILABLE, "%s", o.v2_message);
	cr_assert(strstr(o.v2_message, "cgroup2") && strstr(o.v2_message, "socket budget"), "%s",
	          o.v2_message);
}
