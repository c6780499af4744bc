/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_NATIVE_TESTLIB_H
#define AIRLOCK_NATIVE_TESTLIB_H

/*
 * What the native suites share: the default image (scripts/test.sh builds it
 * into the store once; AIRLOCK_TEST_IMAGE_STORE points elsewhere), a native
 * service, and a sandbox to run Python in. A host that cannot run the
 * mechanism skips with the reason; it never passes silently.
 */

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/envbuild.h"
#include "airlock/image.h"
#include "airlock/native.h"
#include "airlock/port/exec.h"
#include "testlib.h"

#define NATIVE_TEST_STORE_DEFAULT "/var/lib/airlock/images"

static inline const char *native_test_store(void)
{
	const char *s = getenv("AIRLOCK_TEST_IMAGE_STORE");
	return s && *s ? s : NATIVE_TEST_STORE_DEFAULT;
}

/* Skip (with the reason) unless the host can run native and the default
 * image is in the store; fills digest. */
static inline void native_test_require(char digest[AIRLOCK_IMAGE_DIGEST_SIZE])
{
	char why[256];
	if (airlock_native_probe(why, sizeof(why)) < 0)
		cr_skip_test("native mechanism unavailable here: %s", why);
	airlock_image_store *store = NULL;
	airlock_error err = { 0 };
	if (airlock_image_store_open(native_test_store(), &store, &err) < 0)
		cr_skip_test("image store %s: %s", native_test_store(), err.message);
	int r = airlock_image_find_default(store, digest, &err);
	airlock_image_store_free(store);
	if (r <= 0)
		cr_skip_test("no default image in %s: run ./build/airlock image build (scripts/test.sh does)",
		             native_test_store());
}

/* A native service with cfg (NULL: defaults); *ret_n (when not NULL) is
 * its adapter, owned by the service, for airlock_native_live_count. */
static inline airlock_exec *native_test_open_with(const airlock_exec_config *cfg,
                                                  airlock_native **ret_n)
{
	airlock_native_config nc = { .image_store = native_test_store(), .start_budget_seconds = 30 };
	airlock_native *n = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_native_new(&nc, &n, &err), 0, "%s", err.message);
	airlock_exec *e = NULL;
	cr_assert_eq(airlock_exec_new(airlock_native_ops(), n, cfg, &e, &err), 0, "%s", err.message);
	if (ret_n)
		*ret_n = n;
	return e;
}

static inline airlock_exec *native_test_open(const airlock_exec_config *cfg)
{
	return native_test_open_with(cfg, NULL);
}

/* A spec for the default image with a built environment (tier 2 only). */
static inline void native_test_spec(airlock_environment_spec *s, const char *tenant,
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
static inline void native_test_run(airlock_exec *e, const airlock_environment_handle *h,
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
	native_test_require(digest);
	memset(b, 0, sizeof(*b));
	b->e = native_test_open(NULL);
	native_test_spec(&b->spec, tenant, digest, l);
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

/* ---- leak counters ------------------------------------------------------------
 * What a sandbox can leave behind on the host, counted from outside the code
 * under test: mounts, cgroups, loop devices, descriptors and processes
 * (test_native_leaks.c, test_native_faults.c). */

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

/* The native mechanism runs every sandbox process (init and commands) as a
 * host id at or above this base; any such process after destroy is a leak.
 * Reading /proc/PID/status for Uid and PPid keeps this independent of the
 * code under test. */
#define SANDBOX_HOST_ID_BASE 1500000000u

typedef struct leak_procs {
	long sandbox_tasks; /* processes running as a sandbox host id */
	long sandbox_mntns; /* distinct mount namespaces among them */
	long children;      /* our own children, zombies included */
} leak_procs;

static inline leak_procs leak_count_processes(void)
{
	leak_procs c = { 0 };
	DIR *d = opendir("/proc");
	if (!d)
		return (leak_procs){ -1, -1, -1 };
	char seen[256][64];
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!leak_is_pid(de->d_name))
			continue;
		char p[300], line[256];
		snprintf(p, sizeof(p), "/proc/%s/status", de->d_name);
		FILE *f = fopen(p, "re");
		if (!f)
			continue;
		unsigned long uid = 0;
		long ppid = -1;
		char state = 0;
		while (fgets(line, sizeof(line), f)) {
			sscanf(line, "Uid: %lu", &uid);
			sscanf(line, "PPid: %ld", &ppid);
			sscanf(line, "State: %c", &state);
		}
		fclose(f);
		if (ppid == (long)getpid())
			c.children++;
		/* A zombie has released its namespaces, mounts and memory; it
		 * waits only for whoever adopted it (a subreaper) to reap it. */
		if (uid < SANDBOX_HOST_ID_BASE || state == 'Z')
			continue;
		c.sandbox_tasks++;
		char target[64];
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
	return c;
}

static inline long leak_count_airlock_cgroups(void)
{
	FILE *f = popen("find /sys/fs/cgroup -maxdepth 6 -type d -name 'airlock-*' 2>/dev/null | wc -l", "re");
	if (!f)
		return -1;
	long n = -1;
	if (fscanf(f, "%ld", &n) != 1)
		n = -1;
	pclose(f);
	return n;
}

typedef struct leak_counts {
	long mounts, cgroups, loops, fds;
	leak_procs p;
} leak_counts;

static inline leak_counts leak_measure(void)
{
	return (leak_counts){
		.mounts = leak_count_lines_matching("/proc/self/mountinfo", NULL),
		.cgroups = leak_count_airlock_cgroups(),
		.loops = leak_count_dir("/sys/block", leak_is_loop),
		.fds = leak_count_dir("/proc/self/fd", NULL),
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
	native_test_run(b->e, &b->h, argv, timeout_s, NULL, r);
}

/* stdout as a NUL-terminated string (the result's buffers are). */
#define OUT(r) ((const char *)(r)->stdout_data)
#define ERR(r) ((const char *)(r)->stderr_data)

#endif
