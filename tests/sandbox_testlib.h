/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_SANDBOX_TESTLIB_H
#define AIRLOCK_SANDBOX_TESTLIB_H

/*
 * What the sandbox suites share: the default image (scripts/test.sh builds
 * it into the store once; AIRLOCK_TEST_IMAGE_STORE points elsewhere), a
 * service of the mechanism under test, and a sandbox to run Python in. A
 * host that cannot run the mechanism skips with the reason; it never passes
 * silently.
 *
 * The mechanism is chosen when a suite is compiled: native, or gvisor with
 * TEST_MECHANISM_GVISOR defined (tests/meson.build compiles the gate, leak
 * and egress suites once for each). The sandbox_test_* functions and box_*
 * run against that mechanism; native_test_* and gvisor_test_* name theirs,
 * for suites that hold both (the contract suite).
 */

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <linux/bpf.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "airlock/envbuild.h"
#include "airlock/gvisor.h"
#include "airlock/image.h"
#include "airlock/native.h"
#include "airlock/port/exec.h"
#include "testlib.h"

#define SANDBOX_TEST_STORE_DEFAULT "/var/lib/airlock/images"

static inline const char *sandbox_test_store(void)
{
	const char *s = getenv("AIRLOCK_TEST_IMAGE_STORE");
	return s && *s ? s : SANDBOX_TEST_STORE_DEFAULT;
}

/* Skip (with the reason) unless the default image is in the store; fills
 * digest. */
static inline void sandbox_test_require_image(char digest[AIRLOCK_IMAGE_DIGEST_SIZE])
{
	airlock_image_store *store = NULL;
	airlock_error err = { 0 };
	if (airlock_image_store_open(sandbox_test_store(), &store, &err) < 0)
		cr_skip_test("image store %s: %s", sandbox_test_store(), err.message);
	int r = airlock_image_find_default(store, digest, &err);
	airlock_image_store_free(store);
	if (r <= 0)
		cr_skip_test("no default image in %s: run ./build/airlock image build (scripts/test.sh does)",
		             sandbox_test_store());
}

/* Skip (with the reason) unless the host can run native and the default
 * image is in the store; fills digest. */
static inline void native_test_require(char digest[AIRLOCK_IMAGE_DIGEST_SIZE])
{
	char why[256];
	if (airlock_native_probe(why, sizeof(why)) < 0)
		cr_skip_test("native mechanism unavailable here: %s", why);
	sandbox_test_require_image(digest);
}

/* A new adapter with the operator's egress (policy and proxy both NULL:
 * none configured) into *ret: 0, or the error. One per mechanism. */
typedef int (*sandbox_test_adapter_fn)(const airlock_egress_policy *policy, airlock_proxy *proxy,
                                       void **ret, airlock_error *err);

/* A service over a new adapter of mk with ops and cfg (NULL: defaults);
 * *ret_a (when not NULL) is the adapter, owned by the service, for its
 * live count. */
static inline airlock_exec *sandbox_test_open_adapter(sandbox_test_adapter_fn mk,
                                                      const airlock_exec_ops *ops,
                                                      const airlock_exec_config *cfg,
                                                      const airlock_egress_policy *policy,
                                                      airlock_proxy *proxy, void **ret_a)
{
	void *a = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(mk(policy, proxy, &a, &err), 0, "%s", err.message);
	airlock_exec *e = NULL;
	cr_assert_eq(airlock_exec_new(ops, a, cfg, &e, &err), 0, "%s", err.message);
	if (ret_a)
		*ret_a = a;
	return e;
}

static inline int native_test_adapter(const airlock_egress_policy *policy, airlock_proxy *proxy,
                                      void **ret, airlock_error *err)
{
	airlock_native_config c = { .image_store = sandbox_test_store(), .start_budget_seconds = 30,
		                    .egress_policy = policy, .egress_proxy = proxy };
	return airlock_native_new(&c, (airlock_native **)ret, err);
}

/* A native service with cfg (NULL: defaults); *ret_n (when not NULL) is
 * its adapter, owned by the service, for airlock_native_live_count. */
static inline airlock_exec *native_test_open_with(const airlock_exec_config *cfg,
                                                  airlock_native **ret_n)
{
	return sandbox_test_open_adapter(native_test_adapter, airlock_native_ops(), cfg, NULL, NULL,
	                                 (void **)ret_n);
}

static inline airlock_exec *native_test_open(const airlock_exec_config *cfg)
{
	return native_test_open_with(cfg, NULL);
}

/* Skip (with the reason: scripts/test.sh accepts skips that name runsc or
 * gVisor) unless the host can run gvisor and the default image is in the
 * store; fills digest. */
static inline void gvisor_test_require(char digest[AIRLOCK_IMAGE_DIGEST_SIZE])
{
	char why[256];
	if (airlock_gvisor_probe(AIRLOCK_GVISOR_PLATFORM_AUTO, NULL, NULL, why, sizeof(why)) < 0)
		cr_skip_test("gvisor mechanism unavailable here: %s", why);
	sandbox_test_require_image(digest);
}

/* The tests' gvisor services share this state directory (services may:
 * each holds what is its own, airlock/gvisor.h), never
 * AIRLOCK_GVISOR_STATE_DIR, which a real service on the machine may hold:
 * the leak counts count what is in here. */
#define GVISOR_TEST_STATE_ROOT "/run/airlock/gvisor-tests"

static inline int gvisor_test_adapter(const airlock_egress_policy *policy, airlock_proxy *proxy,
                                      void **ret, airlock_error *err)
{
	const char *state = GVISOR_TEST_STATE_ROOT;
	mkdir("/run/airlock", 0700);
	airlock_gvisor_config c = { .image_store = sandbox_test_store(), .state_dir = state,
		                    .start_budget_seconds = 30, .egress_policy = policy,
		                    .egress_proxy = proxy };
	return airlock_gvisor_new(&c, (airlock_gvisor **)ret, err);
}

/* A gvisor service, as native_test_open_with; *ret_g for
 * airlock_gvisor_live_count. */
static inline airlock_exec *gvisor_test_open_with(const airlock_exec_config *cfg,
                                                  airlock_gvisor **ret_g)
{
	return sandbox_test_open_adapter(gvisor_test_adapter, airlock_gvisor_ops(), cfg, NULL, NULL,
	                                 (void **)ret_g);
}

/* A provision failed at the fault point fired, said once on its whole path
 * (docs/failure-paths.md, "Messages"): "provision (mech): " once and no
 * other "provision:", the injected reason at most once, and a facility's
 * point (any but "provision.*") under the step whose own point came before
 * it in a walk over the checks in order. ctx keeps that step's head from
 * one call to the next (empty at first). */
static inline void sandbox_test_expect_said_once(const char *mech, const char *fired,
                                                 const char *msg, char *ctx, size_t ctx_size)
{
	char head[64];
	snprintf(head, sizeof(head), "provision (%s): ", mech);
	cr_expect_eq(strncmp(msg, head, strlen(head)), 0, "%s: not under \"%s\": %s", fired, head,
	             msg);
	cr_expect_null(strstr(msg + 1, "provision ("), "%s: the verb twice: %s", fired, msg);
	cr_expect_null(strstr(msg, "provision:"), "%s: the verb twice: %s", fired, msg);
	const char *why = strerror(EIO);
	const char *first = strstr(msg, why);
	cr_expect(!first || !strstr(first + 1, why), "%s: the reason twice: %s", fired, msg);
	if (strcmp(fired, "provision.host_files") == 0) {
		ctx[0] = 0; /* before every step */
		return;
	}
	if (strncmp(fired, "provision.", 10) == 0) {
		/* The step's own point: its head is what stands before the
		 * injected failure. */
		char own[128];
		snprintf(own, sizeof(own), ": fault injected at %s", fired);
		const char *at = strstr(msg, own);
		cr_assert_not_null(at, "%s: %s", fired, msg);
		snprintf(ctx, ctx_size, "%.*s", (int)(at - msg), msg);
		cr_expect_gt(strlen(ctx), strlen(head), "%s: the step has no name: %s", fired,
		             msg);
		return;
	}
	size_t n = strlen(ctx);
	cr_expect(n && strncmp(msg, ctx, n) == 0 && (msg[n] == ':' || msg[n] == ' '),
	          "%s: a facility's failure not under its step \"%s\": %s", fired, ctx, msg);
}

/* ---- the mechanism this suite was compiled for ------------------------------ */

#ifdef TEST_MECHANISM_GVISOR
#define SANDBOX_TEST_MECHANISM "gvisor"
typedef airlock_gvisor sandbox_test_adapter;
/* Processes in a sandbox besides a command's own: the guest's init and
 * the guest's exec that runs each command (airlock/guest.h). */
#define SANDBOX_TEST_HELPER_PROCS 2
/* What connect() to an address with no route answers. A sandbox without
 * egress has gVisor's own network stack with loopback only
 * (--network=none), which answers EHOSTUNREACH where Linux answers
 * ENETUNREACH; one with egress uses the host's stack (in a namespace
 * holding lo and the proxy's listener), which is Linux's. */
#define SANDBOX_TEST_NO_ROUTE_DENY "EHOSTUNREACH"
#define SANDBOX_TEST_NO_ROUTE_PROXY "ENETUNREACH"
#else
#define SANDBOX_TEST_MECHANISM "native"
typedef airlock_native sandbox_test_adapter;
/* The sandbox's init. */
#define SANDBOX_TEST_HELPER_PROCS 1
/* Linux's answer for no route, in the sandbox's own network namespace. */
#define SANDBOX_TEST_NO_ROUTE_DENY "ENETUNREACH"
#define SANDBOX_TEST_NO_ROUTE_PROXY "ENETUNREACH"
#endif

static inline void sandbox_test_require(char digest[AIRLOCK_IMAGE_DIGEST_SIZE])
{
#ifdef TEST_MECHANISM_GVISOR
	gvisor_test_require(digest);
#else
	native_test_require(digest);
#endif
}

static inline const airlock_exec_ops *sandbox_test_ops(void)
{
#ifdef TEST_MECHANISM_GVISOR
	return airlock_gvisor_ops();
#else
	return airlock_native_ops();
#endif
}

static inline int sandbox_test_adapter_new(const airlock_egress_policy *policy,
                                           airlock_proxy *proxy, void **ret, airlock_error *err)
{
#ifdef TEST_MECHANISM_GVISOR
	return gvisor_test_adapter(policy, proxy, ret, err);
#else
	return native_test_adapter(policy, proxy, ret, err);
#endif
}

/* A service with cfg (NULL: defaults) and the operator's egress (policy
 * and proxy both NULL: none configured); *ret (NULL ok) its adapter. */
static inline airlock_exec *sandbox_test_open_egress(const airlock_exec_config *cfg,
                                                     const airlock_egress_policy *policy,
                                                     airlock_proxy *proxy,
                                                     sandbox_test_adapter **ret)
{
	return sandbox_test_open_adapter(sandbox_test_adapter_new, sandbox_test_ops(), cfg, policy,
	                                 proxy, (void **)ret);
}

static inline airlock_exec *sandbox_test_open(const airlock_exec_config *cfg)
{
	return sandbox_test_open_egress(cfg, NULL, NULL, NULL);
}

/* A service at defaults without assertions (for a forked child, which
 * reports by its exit status): 0, or the error. */
static inline int sandbox_test_service_new(airlock_exec **ret, airlock_error *err)
{
	void *a = NULL;
	int r = sandbox_test_adapter_new(NULL, NULL, &a, err);
	return r < 0 ? r : airlock_exec_new(sandbox_test_ops(), a, NULL, ret, err);
}

static inline size_t sandbox_test_live_count(sandbox_test_adapter *a)
{
#ifdef TEST_MECHANISM_GVISOR
	return airlock_gvisor_live_count(a);
#else
	return airlock_native_live_count(a);
#endif
}

/* A spec for the default image with a built environment (tier 2 only). */
static inline void sandbox_test_spec(airlock_environment_spec *s, const char *tenant,
                                    const char *digest, const airlock_resource_limits *limits)
{
	test_spec(s, tenant, "run-1");
	free(s->image_digest);
	s->image_digest = strdup(digest);
	if (limits)
		s->limits = *limits;
	airlock_env_clear(&s->environment);
	extern char **environ;
	airlock_envbuild_input in = { .parent = environ };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_envbuild(&in, &s->environment, &err), 0, "%s", err.message);
}

/* Run argv in the sandbox; asserts the call itself succeeded. */
static inline void sandbox_test_run(airlock_exec *e, const airlock_environment_handle *h,
                                   char **argv, int timeout_s, const char *stdin_text,
                                   airlock_execution_result *r)
{
	airlock_execution_command cmd = test_command(argv);
	cmd.timeout_seconds = timeout_s;
	if (stdin_text) {
		cmd.has_stdin = true;
		cmd.stdin_data = (unsigned char *)stdin_text;
		cmd.stdin_len = strlen(stdin_text);
	}
	airlock_exec_call call = { .tenant_id = h->tenant_id,
		                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_error err = { 0 };
	memset(r, 0, sizeof(*r));
	cr_assert_eq(airlock_exec_execute(e, &call, h, &cmd, r, &err), 0, "%s", err.message);
}

/* One sandbox of one service, for a test: opened (provisioned) and closed
 * (destroyed, the service freed) with assertions. */
typedef struct box {
	airlock_exec *e;
	airlock_environment_spec spec;
	airlock_environment_handle h;
} box;

static inline void box_open(box *b, const char *tenant, const airlock_resource_limits *l)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	sandbox_test_require(digest);
	memset(b, 0, sizeof(*b));
	b->e = sandbox_test_open(NULL);
	sandbox_test_spec(&b->spec, tenant, digest, l);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(b->e, &b->spec, &b->h, &err), 0, "%s", err.message);
}

static inline void box_close(box *b)
{
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_destroy(b->e, &b->h, &err), 0, "%s", err.message);
	airlock_exec_free(b->e);
	airlock_environment_handle_clear(&b->h);
	airlock_environment_spec_clear(&b->spec);
}

/* A provision of spec that the host's file table refuses
 * (src/host/filetable.h): ExecutionUnavailable, the message naming
 * fs.file-max and holding want; no handle is kept. */
static inline void sandbox_test_expect_file_table_refusal(airlock_exec *e,
                                                          const airlock_environment_spec *spec,
                                                          const char *want)
{
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	int r = airlock_exec_provision(e, spec, &h, &err);
	cr_expect_eq(r, airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE), "%d: %s", r, err.message);
	cr_expect(strstr(err.message, "the host's file table has no room for this sandbox: "
	                              "fs.file-max is ") &&
	                  strstr(err.message, want),
	          "want \"%s\" in: %s", want, err.message);
	if (r == 0) /* admitted after all: not left running */
		airlock_exec_destroy(e, &h, &err);
	airlock_environment_handle_clear(&h);
}

/* ---- leak counters ------------------------------------------------------------
 * What a sandbox can leave behind on the host, counted from outside the code
 * under test: mounts, cgroups, loop devices, descriptors and processes, and
 * for gvisor its runtime's processes and state (test_native_leaks.c,
 * test_native_faults.c). */

static inline long leak_count_lines_matching(const char *path, const char *needle)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char line[4096];
	long n = 0;
	while (fgets(line, sizeof(line), f))
		if (!needle || strstr(line, needle))
			n++;
	fclose(f);
	return n;
}

static inline long leak_count_dir(const char *path, bool (*keep)(const char *name))
{
	DIR *d = opendir(path);
	if (!d)
		return -1;
	long n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && (!keep || keep(de->d_name)))
			n++;
	closedir(d);
	return n;
}

static inline bool leak_is_loop(const char *name)
{
	if (strncmp(name, "loop", 4) != 0)
		return false;
	char p[300]; /* a d_name of up to 255 bytes and the rest */
	snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file", name);
	FILE *f = fopen(p, "re");
	if (!f)
		return false; /* not attached */
	fclose(f);
	return true;
}

static inline bool leak_is_pid(const char *name)
{
	return name[0] >= '0' && name[0] <= '9';
}

/* The real uid, parent and state of process pid from /proc/PID/status
 * (independent of the code under test): false when it is gone. */
static inline bool leak_proc_status(const char *pid, unsigned long *uid, long *ppid, char *state)
{
	char p[300], line[256];
	snprintf(p, sizeof(p), "/proc/%s/status", pid);
	FILE *f = fopen(p, "re");
	if (!f)
		return false;
	*uid = 0;
	*ppid = -1;
	*state = 0;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "Uid: %lu", uid);
		sscanf(line, "PPid: %ld", ppid);
		sscanf(line, "State: %c", state);
	}
	fclose(f);
	return true;
}

/* The native mechanism runs every sandbox process (init and commands) as a
 * host id at or above this base; any such process after destroy is a leak.
 * Reading /proc/PID/status for Uid and PPid keeps this independent of the
 * code under test. */
#define SANDBOX_HOST_ID_BASE 1500000000u

typedef struct leak_procs {
	long sandbox_tasks; /* processes running as a sandbox host id */
	long sandbox_mntns; /* distinct mount namespaces among them */
	long children;      /* our own children, zombies included */
	long zombies;       /* of which zombies */
	long runtime;       /* the tests' gVisor runtime processes (sandbox_test_runtime_pids) */
} leak_procs;

/* The gvisor mechanism's runtime processes (runsc, its sandbox: the
 * sentry and its ptrace stubs, its gofer) are all the runtime's binary
 * re-executed, whatever their names (runsc calls some "exe"). */
static inline bool leak_is_runtime(const char *pid)
{
	static char runsc[4096];
	if (!runsc[0] && !realpath(AIRLOCK_GVISOR_RUNSC, runsc))
		snprintf(runsc, sizeof(runsc), "%s", AIRLOCK_GVISOR_RUNSC);
	char p[300], exe[4096];
	snprintf(p, sizeof(p), "/proc/%s/exe", pid);
	ssize_t len = readlink(p, exe, sizeof(exe) - 1);
	if (len <= 0)
		return false;
	exe[len] = 0;
	/* " (deleted)" when the binary was replaced meanwhile: still it. */
	return strncmp(exe, runsc, strlen(runsc)) == 0;
}

/* Whether pid's command line names the tests' state root: runsc, its
 * sandbox and its gofer carry --root=GVISOR_TEST_STATE_ROOT/runsc. */
static inline bool leak_names_test_root(const char *pid)
{
	char p[300], cmd[4096];
	snprintf(p, sizeof(p), "/proc/%s/cmdline", pid);
	FILE *f = fopen(p, "re");
	if (!f)
		return false;
	size_t len = fread(cmd, 1, sizeof(cmd) - 1, f);
	fclose(f);
	static const char root[] = "--root=" GVISOR_TEST_STATE_ROOT "/";
	return memmem(cmd, len, root, sizeof(root) - 1) != NULL;
}

typedef struct leak_proc {
	long pid, ppid;
	bool names_root;
} leak_proc;

/* Whether the process at t[i] or one of its ancestors names the tests'
 * state root, by the parent links in t[0..n). */
static inline bool leak_under_test_root(const leak_proc *t, size_t n, size_t i)
{
	for (int depth = 0; depth < 64; depth++) {
		if (t[i].names_root)
			return true;
		size_t k = 0;
		while (k < n && t[k].pid != t[i].ppid)
			k++;
		if (k == n)
			return false;
		i = k;
	}
	return false;
}

/* The host pids of the runtime's live processes that belong to the tests'
 * gvisor services (leak_is_runtime, under a runsc whose --root is in
 * GVISOR_TEST_STATE_ROOT, whoever adopted them after a crash; another
 * runsc on the machine is not counted); the first cap of them in pids
 * (NULL: count only). */
static inline size_t sandbox_test_runtime_pids(int *pids, size_t cap)
{
	DIR *d = opendir("/proc");
	cr_assert_not_null(d);
	leak_proc *t = NULL;
	bool *runtime = NULL;
	size_t n_t = 0, cap_t = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		unsigned long uid;
		long ppid;
		char state;
		if (!leak_is_pid(de->d_name) || !leak_proc_status(de->d_name, &uid, &ppid, &state))
			continue;
		if (n_t == cap_t) {
			cap_t = cap_t ? 2 * cap_t : 1024;
			t = realloc(t, cap_t * sizeof(*t));
			runtime = realloc(runtime, cap_t * sizeof(*runtime));
			cr_assert(t && runtime);
		}
		t[n_t] = (leak_proc){ atol(de->d_name), ppid, leak_names_test_root(de->d_name) };
		/* A zombie is counted as one (leak_procs.zombies). */
		runtime[n_t++] = state != 'Z' && leak_is_runtime(de->d_name);
	}
	closedir(d);
	size_t n = 0;
	for (size_t i = 0; i < n_t; i++) {
		if (!runtime[i] || !leak_under_test_root(t, n_t, i))
			continue;
		if (pids && n < cap)
			pids[n] = (int)t[i].pid;
		n++;
	}
	free(t);
	free(runtime);
	return n;
}

static inline leak_procs leak_count_processes(void)
{
	leak_procs c = { 0 };
	DIR *d = opendir("/proc");
	if (!d)
		return (leak_procs){ -1, -1, -1, -1, -1 };
	char seen[256][64];
	struct dirent *de;
	while ((de = readdir(d))) {
		unsigned long uid;
		long ppid;
		char state;
		if (!leak_is_pid(de->d_name) || !leak_proc_status(de->d_name, &uid, &ppid, &state))
			continue;
		if (ppid == (long)getpid()) {
			c.children++;
			c.zombies += state == 'Z';
		}
		/* A zombie has released its namespaces, mounts and memory; it
		 * waits only for whoever adopted it (a subreaper) to reap it. */
		if (uid < SANDBOX_HOST_ID_BASE || state == 'Z')
			continue;
		c.sandbox_tasks++;
		char p[300], target[64];
		snprintf(p, sizeof(p), "/proc/%s/ns/mnt", de->d_name);
		ssize_t len = readlink(p, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = 0;
		bool dup = false;
		for (long i = 0; i < c.sandbox_mntns && !dup; i++)
			dup = strcmp(seen[i], target) == 0;
		if (!dup && c.sandbox_mntns < 256)
			strcpy(seen[c.sandbox_mntns++], target);
	}
	closedir(d);
	c.runtime = (long)sandbox_test_runtime_pids(NULL, 0);
	return c;
}

/* The output of a shell pipeline that prints one number; -1 when it
 * printed none. */
static inline long leak_count_shell(const char *cmd)
{
	FILE *f = popen(cmd, "re");
	if (!f)
		return -1;
	long n = -1;
	if (fscanf(f, "%ld", &n) != 1)
		n = -1;
	pclose(f);
	return n;
}

static inline long leak_count_airlock_cgroups(void)
{
	return leak_count_shell("find /sys/fs/cgroup -maxdepth 6 -type d -name 'airlock-*' 2>/dev/null | wc -l");
}

/* What the tests' gvisor services keep in their state directory (bundles,
 * image mount points, runsc's state): every entry below its skeleton
 * (runsc, images, sandboxes, which stay for the next service), not into
 * mounts (a mount point is one entry; the mounts are counted below), and
 * every mount under it in our mount namespace and in init's (where runsc's
 * own mounts would show). 0 when no gvisor service ran. */
static inline long leak_count_gvisor_state(void)
{
	return leak_count_shell("find " GVISOR_TEST_STATE_ROOT " -xdev -mindepth 2 2>/dev/null | wc -l");
}

static inline long leak_count_gvisor_mounts(void)
{
	return leak_count_lines_matching("/proc/self/mountinfo", " " GVISOR_TEST_STATE_ROOT "/") +
	       leak_count_lines_matching("/proc/1/mountinfo", " " GVISOR_TEST_STATE_ROOT "/");
}

/* The BPF objects of every sandbox's socket budget alive on the host
 * (src/host/sockbudget.c names them "airlock_*"): programs and maps, found
 * by walking the kernel's ids. The kernel frees them after their cgroup is
 * removed, from a work queue: leak_wait_bpf waits for that. */
static inline long leak_count_bpf_kind(int next_cmd, int by_id_cmd, bool prog)
{
	long n = 0;
	uint32_t id = 0;
	for (int guard = 0; guard < 100000; guard++) {
		union bpf_attr a;
		memset(&a, 0, sizeof(a));
		a.start_id = id;
		if (syscall(SYS_bpf, next_cmd, &a, sizeof(a)) < 0)
			break;
		id = a.next_id;
		memset(&a, 0, sizeof(a));
		if (prog)
			a.prog_id = id;
		else
			a.map_id = id;
		int fd = (int)syscall(SYS_bpf, by_id_cmd, &a, sizeof(a));
		if (fd < 0)
			continue; /* freed meanwhile */
		char name[BPF_OBJ_NAME_LEN] = "";
		struct bpf_prog_info pi;
		struct bpf_map_info mi;
		memset(&pi, 0, sizeof(pi));
		memset(&mi, 0, sizeof(mi));
		memset(&a, 0, sizeof(a));
		a.info.bpf_fd = (uint32_t)fd;
		a.info.info_len = prog ? sizeof(pi) : sizeof(mi);
		a.info.info = prog ? (uint64_t)(uintptr_t)&pi : (uint64_t)(uintptr_t)&mi;
		if (syscall(SYS_bpf, BPF_OBJ_GET_INFO_BY_FD, &a, sizeof(a)) == 0)
			memcpy(name, prog ? pi.name : mi.name, sizeof(name));
		close(fd);
		name[sizeof(name) - 1] = 0;
		if (strncmp(name, "airlock_", 8) == 0)
			n++;
	}
	return n;
}

static inline long leak_count_bpf(void)
{
	return leak_count_bpf_kind(BPF_PROG_GET_NEXT_ID, BPF_PROG_GET_FD_BY_ID, true) +
	       leak_count_bpf_kind(BPF_MAP_GET_NEXT_ID, BPF_MAP_GET_FD_BY_ID, false);
}

/* The count once it is at most want, or after 10 s what it is then. */
static inline long leak_wait_bpf(long want)
{
	long n = leak_count_bpf();
	for (int i = 0; i < 100 && n > want; i++) {
		usleep(100 * 1000);
		n = leak_count_bpf();
	}
	return n;
}

typedef struct leak_counts {
	long mounts, cgroups, loops, fds, bpf;
	long gvisor_state, gvisor_mounts;
	leak_procs p;
} leak_counts;

static inline leak_counts leak_measure(void)
{
	return (leak_counts){
		.mounts = leak_count_lines_matching("/proc/self/mountinfo", NULL),
		.cgroups = leak_count_airlock_cgroups(),
		.loops = leak_count_dir("/sys/block", leak_is_loop),
		.fds = leak_count_dir("/proc/self/fd", NULL),
		.bpf = leak_count_bpf(),
		.gvisor_state = leak_count_gvisor_state(),
		.gvisor_mounts = leak_count_gvisor_mounts(),
		.p = leak_count_processes(),
	};
}

/* Host-id slots held on the lock file at path: the open-file-description
 * locks /proc/locks lists on its inode (each live sandbox holds one). */
static inline long leak_count_id_slots(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return -1;
	char needle[64];
	snprintf(needle, sizeof(needle), ":%lu ", (unsigned long)st.st_ino);
	FILE *f = fopen("/proc/locks", "re");
	if (!f)
		return -1;
	char line[512];
	long n = 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "OFDLCK") && strstr(line, needle))
			n++;
	fclose(f);
	return n;
}

/* Python code in the box, with a timeout. */
static inline void py(box *b, const char *code, int timeout_s, airlock_execution_result *r)
{
	char *argv[] = { "python3", "-c", (char *)code, NULL };
	sandbox_test_run(b->e, &b->h, argv, timeout_s, NULL, r);
}

/* ---- reading a probe's answers ------------------------------------------------ */

static inline const char *json_str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : "(missing or not a string)";
}

/* Append to the list of failures. */
static inline void fail_add(char *fails, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static inline void fail_add(char *fails, size_t cap, const char *fmt, ...)
{
	size_t len = strlen(fails);
	if (len + 1 >= cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(fails + len, cap - len, fmt, ap);
	va_end(ap);
}

/* answers maps host pids (as text) to what kill(pid, 0) answered inside a
 * sandbox: each must be ESRCH, not EPERM (EPERM means the pid is visible);
 * COLLISION (a pid the sandbox itself holds) proves nothing and is
 * skipped. Returns how many were probed; what differs is added to fails. */
static inline int expect_pids_unseen(json_t *answers, const char *whose, char *fails, size_t cap)
{
	const char *key;
	json_t *v;
	int probed = 0;
	json_object_foreach(answers, key, v) {
		if (strcmp(json_string_value(v), "COLLISION") == 0)
			continue;
		probed++;
		if (strcmp(json_string_value(v), "ESRCH") != 0)
			fail_add(fails, cap, "%s pid %s: kill(pid, 0) answered %s, want ESRCH; ", whose, key,
			         json_string_value(v));
	}
	return probed;
}

/* stdout as a NUL-terminated string (the result's buffers are). */
#define OUT(r) ((const char *)(r)->stdout_data)
#define ERR(r) ((const char *)(r)->stderr_data)

/* Python for a probe (needs json and os imported): forked(fn) runs fn in a
 * child and returns what it returned (through a pipe, as JSON), so that a
 * call that got through cannot change what the next one sees; "SIGn" when
 * the child died of signal n, "PROBE-ERROR ..." when fn raised,
 * "PROBE-DIED" when it left without an answer. */
#define SANDBOX_TEST_PY_FORKED                                                  \
	"def forked(fn):\n"                                                     \
	"    r, w = os.pipe()\n"                                                \
	"    pid = os.fork()\n"                                                 \
	"    if pid == 0:\n"                                                    \
	"        os.close(r)\n"                                                 \
	"        try: out = fn()\n"                                             \
	"        except BaseException as e: out = 'PROBE-ERROR ' + repr(e)\n"   \
	"        os.write(w, json.dumps(out).encode()); os._exit(0)\n"         \
	"    os.close(w)\n"                                                     \
	"    data = b''\n"                                                      \
	"    while True:\n"                                                     \
	"        chunk = os.read(r, 65536)\n"                                   \
	"        if not chunk: break\n"                                         \
	"        data += chunk\n"                                               \
	"    os.close(r)\n"                                                     \
	"    _, st = os.waitpid(pid, 0)\n"                                      \
	"    if os.WIFSIGNALED(st): return 'SIG%d' % os.WTERMSIG(st)\n"         \
	"    return json.loads(data) if data else 'PROBE-DIED'\n"

/* A probe's answer: Python code in the box that must exit 0 and print one
 * JSON value, parsed (the caller frees it and clears r). */
static inline json_t *py_json(box *b, const char *code, int timeout_s, airlock_execution_result *r)
{
	py(b, code, timeout_s, r);
	cr_assert_eq(r->exit_code, 0, "probe failed: %s", ERR(r));
	json_error_t jerr;
	json_t *out = json_loads(OUT(r), 0, &jerr);
	cr_assert_not_null(out, "probe output is not JSON (%s): %.400s", jerr.text, OUT(r));
	return out;
}

#endif
