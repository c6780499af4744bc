/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What is specific to the gvisor mechanism (issue "The gVisor mechanism"):
 * the escape_denied probes of what gVisor adds to the host (its runtime:
 * the sentry, the gofer, their state directory, their cgroups), on top of
 * the native list that test_gvisor_gates runs (tests/test_native_gates.c
 * compiled for gvisor); and the real programs of the default image that
 * must work under this runsc (GNU ls -l, stat and find needed the statx
 * shim: airlock/guest.h). Compiled with TEST_MECHANISM_GVISOR only.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/guest.h"
#include "sandbox_testlib.h"

#ifndef TEST_MECHANISM_GVISOR
#error "test_gvisor_escape.c runs against gvisor only (tests/meson.build)"
#endif

static const airlock_resource_limits small = {
	.cpu_millicores = 1000, .memory_bytes = 256ll << 20, .pids_max = 64,
	.workspace_bytes = 64ll << 20, .inodes_max = 2000, .wall_clock_seconds = 120,
};

/* ---- gate.sandbox.escape_denied: the runtime ------------------------------- */

/*
 * From inside, with the test's host facts as its first lines (RUNTIME_PIDS:
 * the host pids of the runtime's processes, this test's and its parent's;
 * HOST_PATHS: every path of the runtime's state directory on the host, and
 * the image store's; RUNSC_SIZE: the size of the runtime's binary):
 *   - no host pid is visible (kill answers ESRCH) and /proc lists only
 *     the sandbox's own processes, each a program of the image;
 *   - /proc/self/exe is the probe's own interpreter of the image, not the
 *     sentry's binary: it reads as the file its link names;
 *   - the only descriptors open are stdio and the listing's own;
 *   - no path of the host's state directory or image store exists;
 *   - /sys/fs/cgroup and /proc/self/cgroup show nothing of the host's
 *     cgroups, and no mount names a host path;
 *   - the root is mounted read-only;
 *   - pid 1 is the guest's init;
 *   - a block device node made in /tmp (mknod succeeds in the sentry)
 *     opens no device.
 */
static const char runtime_probe[] =
	"import errno, hashlib, json, os, stat, sys\n"
	"def en(e): return errno.errorcode.get(e, str(e))\n"
	"out = {}\n"
	"own = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
	"out['own_pids'] = own\n"
	"def host_pid(pid):\n"
	"    if pid in own: return 'COLLISION'\n"
	"    try: os.kill(pid, 0); return 'VISIBLE'\n"
	"    except OSError as e: return en(e.errno)\n"
	"out['runtime_pids'] = {str(p): host_pid(p) for p in RUNTIME_PIDS}\n"
	"cmds = {}\n"
	"for p in own:\n"
	"    try: cmds[str(p)] = open('/proc/%d/cmdline' % p, 'rb').read().split(b'\\0')[0].decode()\n"
	"    except OSError as e: cmds[str(p)] = en(e.errno)\n"
	"out['cmds'] = cmds\n"
	"exe = os.readlink('/proc/self/exe')\n"
	"out['exe'] = exe\n"
	"h = lambda f: hashlib.sha256(open(f, 'rb').read()).hexdigest()\n"
	"out['exe_is_its_link'] = h('/proc/self/exe') == h(exe)\n"
	"out['exe_size'] = os.stat('/proc/self/exe').st_size\n"
	"out['exe_is_not_runsc'] = out['exe_size'] != RUNSC_SIZE\n"
	/* The listing's own descriptor is closed once it returns: the one
	 * whose link is gone was it. */
	"fds = {}\n"
	"for n in os.listdir('/proc/self/fd'):\n"
	"    try: fds[n] = os.readlink('/proc/self/fd/' + n)\n"
	"    except FileNotFoundError: fds[n] = 'LISTING'\n"
	"    except OSError as e: fds[n] = en(e.errno)\n"
	"out['fds'] = fds\n"
	"def lst(p):\n"
	"    try: os.lstat(p); return 'EXISTS'\n"
	"    except OSError as e: return en(e.errno)\n"
	"out['host_paths'] = {p: lst(p) for p in HOST_PATHS}\n"
	"try: out['cgroupfs'] = os.listdir('/sys/fs/cgroup')\n"
	"except OSError as e: out['cgroupfs'] = en(e.errno)\n"
	"try: out['proc_cgroup'] = open('/proc/self/cgroup').read()\n"
	"except OSError as e: out['proc_cgroup'] = en(e.errno)\n"
	"out['mountinfo'] = open('/proc/self/mountinfo').read()\n"
	"out['root_ro'] = any(l.split()[4] == '/' and 'ro' in l.split()[5].split(',')\n"
	"                     for l in out['mountinfo'].splitlines())\n"
	"out['init'] = open('/proc/1/cmdline', 'rb').read().decode('utf-8', 'replace').split('\\0')\n"
	"try:\n"
	"    os.mknod('/tmp/sda', 0o600 | stat.S_IFBLK, os.makedev(8, 0))\n"
	"    try: open('/tmp/sda', 'rb').read(512); out['mknod_open'] = 'READ'\n"
	"    except OSError as e: out['mknod_open'] = en(e.errno)\n"
	"except OSError as e: out['mknod_open'] = 'mknod ' + en(e.errno)\n"
	"print(json.dumps(out))\n";

/* Every path under dir on the host (depth-first, at most 2000, not into
 * mounts), appended to buf as Python string literals. */
static void host_paths(const char *dir, int depth, char *buf, size_t cap, int *count)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)) && *count < 2000) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		size_t len = strlen(buf);
		snprintf(buf + len, cap - len, "%s%s", *count ? ", " : "", "'");
		/* Paths the adapter makes are plain names; one with a quote or a
		 * backslash would be a probe bug, not a finding. */
		cr_assert_null(strpbrk(path, "'\\\n"), "an unusual host path: %s", path);
		len = strlen(buf);
		snprintf(buf + len, cap - len, "%s'", path);
		(*count)++;
		/* Not into mounts: an image's root is one path, its files are
		 * the image's (the sandbox has them at other paths). */
		struct stat st, parent;
		if (depth > 0 && lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && stat(dir, &parent) == 0 &&
		    st.st_dev == parent.st_dev)
			host_paths(path, depth - 1, buf, cap, count);
	}
	closedir(d);
}

static char *runtime_probe_for_host(int *n_paths)
{
	size_t cap = sizeof(runtime_probe) + (1 << 20);
	char *code = malloc(cap);
	cr_assert_not_null(code);
	int runtime[64];
	size_t n_rt = sandbox_test_runtime_pids(runtime, 64);
	cr_assert_geq(n_rt, 2, "the live sandbox's sentry and gofer are not among our descendants: %zu",
	              n_rt);
	int n = snprintf(code, cap, "RUNTIME_PIDS = [%d, %d", (int)getpid(), (int)getppid());
	for (size_t i = 0; i < n_rt && i < 64; i++)
		n += snprintf(code + n, cap - n, ", %d", runtime[i]);
	struct stat st;
	cr_assert_eq(stat(AIRLOCK_GVISOR_RUNSC, &st), 0, "%s", AIRLOCK_GVISOR_RUNSC);
	n += snprintf(code + n, cap - n, "]\nRUNSC_SIZE = %lld\nHOST_PATHS = ['%s', '%s', '%s', ",
	              (long long)st.st_size, AIRLOCK_GVISOR_STATE_DIR, GVISOR_TEST_STATE_ROOT,
	              sandbox_test_store());
	*n_paths = 0;
	code[n] = 0;
	host_paths(GVISOR_TEST_STATE_ROOT, 5, code, cap, n_paths);
	n = (int)strlen(code);
	n += snprintf(code + n, cap - n, "]\n%s", runtime_probe);
	cr_assert_lt((size_t)n, cap);
	return code;
}

Test(gate_sandbox_escape_denied, the_runtime_is_out_of_reach, .timeout = 180)
{
	box b;
	box_open(&b, "tenant-gvisor-escape", &small);
	int n_paths = 0;
	char *code = runtime_probe_for_host(&n_paths);
	airlock_execution_result r;
	json_t *out = py_json(&b, code, 120, &r);
	free(code);
	char fails[8192] = "";
	const char *key;
	json_t *v;

	/* The runtime's host processes (the sentry, the gofer) and ours are
	 * not there. */
	int probed = expect_pids_unseen(json_object_get(out, "runtime_pids"), "host", fails,
	                                sizeof(fails));
	cr_assert_geq(probed, 3, "too few host pids were probed: %s", OUT(&r));
	/* /proc lists the guest's init, the guest's exec and the probe: each
	 * a program of the image, none the runtime's binary. */
	json_object_foreach(json_object_get(out, "cmds"), key, v) {
		const char *c = json_string_value(v);
		if (!c || (strcmp(c, AIRLOCK_GUEST_PROGRAM) != 0 && strcmp(c, "python3") != 0))
			fail_add(fails, sizeof(fails), "process %s in the sandbox runs %s; ", key,
			         c ? c : "?");
	}
	if (json_array_size(json_object_get(out, "own_pids")) > SANDBOX_TEST_HELPER_PROCS + 1)
		fail_add(fails, sizeof(fails), "more processes than init, exec and the probe; ");

	/* /proc/self/exe of the probe is python of the image, not the sentry. */
	if (strncmp(json_str(out, "exe"), "/usr/bin/python3", 16) != 0)
		fail_add(fails, sizeof(fails), "/proc/self/exe is %s; ", json_str(out, "exe"));
	if (!json_is_true(json_object_get(out, "exe_is_its_link")))
		fail_add(fails, sizeof(fails), "/proc/self/exe does not read as %s; ", json_str(out, "exe"));
	if (!json_is_true(json_object_get(out, "exe_is_not_runsc")))
		fail_add(fails, sizeof(fails), "/proc/self/exe has the runtime binary's size; ");

	/* Descriptors: stdio (the host's pipes, donated: "host:[N]") and the
	 * listing's own, nothing else of the host's. */
	json_t *fds = json_object_get(out, "fds");
	int listing = 0;
	json_object_foreach(fds, key, v) {
		int fd = atoi(key);
		listing += strcmp(json_string_value(v), "LISTING") == 0;
		if (fd > 2 && strcmp(json_string_value(v), "LISTING") != 0)
			fail_add(fails, sizeof(fails), "descriptor %s is open: %s; ", key,
			         json_string_value(v));
	}
	if (json_object_size(fds) != 4 || listing != 1)
		fail_add(fails, sizeof(fails), "%zu descriptors, want stdio and the listing's; ",
		         json_object_size(fds));

	/* The state directory and the image store, by every host path. */
	/* The live sandbox's bundle and runsc's state are in the state
	 * directory now: the probe met live targets. */
	cr_assert_gt(n_paths, 0, "%s is empty while a sandbox is live", GVISOR_TEST_STATE_ROOT);
	json_object_foreach(json_object_get(out, "host_paths"), key, v)
		if (strcmp(json_string_value(v), "ENOENT") != 0)
			fail_add(fails, sizeof(fails), "host path %s inside: %s; ", key, json_string_value(v));
	fprintf(stderr, "the_runtime_is_out_of_reach: %d host paths of the state directory probed\n",
	        n_paths);

	/* cgroups: the sentry's own, empty or absent; nothing names the
	 * host's hierarchy (its cgroups are airlock-*) or a host path. */
	json_t *cg = json_object_get(out, "cgroupfs");
	if (json_is_array(cg) && json_array_size(cg) != 0)
		fail_add(fails, sizeof(fails), "/sys/fs/cgroup lists %s...; ",
		         json_string_value(json_array_get(cg, 0)));
	static const char *const host_words[] = { "airlock-", AIRLOCK_GVISOR_STATE_DIR, GVISOR_TEST_STATE_ROOT, "/var/lib/airlock",
		                                  ".slice", "/run/" };
	const char *texts[] = { json_str(out, "proc_cgroup"), json_str(out, "mountinfo") };
	for (size_t t = 0; t < 2; t++)
		for (size_t w = 0; w < sizeof(host_words) / sizeof(host_words[0]); w++)
			if (strstr(texts[t], host_words[w]))
				fail_add(fails, sizeof(fails), "%s names %s: %.200s; ",
				         t ? "/proc/self/mountinfo" : "/proc/self/cgroup", host_words[w], texts[t]);

	/* The image is the root, read-only (the gates' write probes meet the
	 * permission check first under gVisor). */
	if (!json_is_true(json_object_get(out, "root_ro")))
		fail_add(fails, sizeof(fails), "/ is not mounted read-only; ");

	/* pid 1 is the guest's init. */
	json_t *init = json_object_get(out, "init");
	const char *init0 = json_string_value(json_array_get(init, 0)),
	           *init1 = json_string_value(json_array_get(init, 1));
	if (!init0 || !init1 || strcmp(init0, AIRLOCK_GUEST_PROGRAM) != 0 || strcmp(init1, "init") != 0)
		fail_add(fails, sizeof(fails), "/proc/1/cmdline is %s %s; ", init0 ? init0 : "?",
		         init1 ? init1 : "?");

	/* The sentry's device node reaches no device. */
	const char *mk = json_str(out, "mknod_open");
	if (strcmp(mk, "ENXIO") != 0 && strcmp(mk, "ENODEV") != 0)
		fail_add(fails, sizeof(fails), "a block device node made in /tmp opened: %s; ", mk);
	cr_assert_str_empty(fails, "the runtime was reachable: %s\nprobe: %.2000s", fails, OUT(&r));
	json_decref(out);
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* ---- real programs (issue item 5) ---------------------------------------- */

/* Each tool of the default image, with what its output must show. */
static const struct {
	const char *name, *script, *want;
} programs[] = {
	/* GNU ls -l and stat call statx with AT_NO_AUTOMOUNT, which this
	 * gVisor rejects; the shim clears it (airlock/guest.h). */
	{ "ls -l", "ls -l /usr/bin/env /workspace", "/usr/bin/env" },
	{ "stat", "stat -c '%n %s %U' /etc/passwd", "/etc/passwd " },
	{ "find", "mkdir -p d/e && : > d/e/f && find d -type f", "d/e/f" },
	{ "python3", "python3 -c 'import sys, json; print(json.dumps({\"v\": sys.version_info[0]}))'",
	  "{\"v\": 3}" },
	{ "git", "git init -q repo && cd repo && echo hi > a && git add a && "
	         "git -c user.name=t -c user.email=t@example.com commit -q -m one && git log --oneline",
	  " one" },
	{ "tar", "mkdir -p t && echo data > t/x && tar -cf t.tar t && rm -r t && tar -xf t.tar && "
	         "cat t/x && tar -tf t.tar",
	  "data\nt/\nt/x" },
	{ "pip", "pip --version", "pip " },
};

Test(gvisor_programs, the_default_images_tools_work, .timeout = 300)
{
	box b;
	box_open(&b, "tenant-programs", &small);
	char fails[8192] = "";
	for (size_t i = 0; i < sizeof(programs) / sizeof(programs[0]); i++) {
		char *argv[] = { "bash", "-c", (char *)programs[i].script, NULL };
		airlock_execution_result r;
		sandbox_test_run(b.e, &b.h, argv, 120, NULL, &r);
		if (!r.has_exit_code || r.exit_code != 0 || !strstr(OUT(&r), programs[i].want))
			fail_add(fails, sizeof(fails), "%s: exit %d%s, stdout %.300s, stderr %.300s\n",
			         programs[i].name, r.exit_code, r.has_exit_code ? "" : " (killed)", OUT(&r),
			         ERR(&r));
		airlock_execution_result_clear(&r);
	}
	cr_assert_str_empty(fails, "programs failed under gvisor:\n%s", fails);
	box_close(&b);
}
