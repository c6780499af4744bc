/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Nothing of the service's secrets reaches what a sandbox can touch (issue
 * 12, item 5): the processes that live beside a sandbox for its whole life
 * (native's init, gvisor's keeper and runtime, the egress proxy) are started
 * from executables of their own, so none of them holds a copy of the
 * service's memory, where the service credential and TLS keys live.
 *
 * The proof reads memory, not code: a random 48-byte "credential" is put in
 * this process's heap and in a static buffer, kept live, then the proxy is
 * started and a sandbox with an allowlist provisioned (so both exist), and
 * every readable mapping of each of those processes is read as root through
 * /proc/PID/maps and /proc/PID/mem. Not one of them may hold the
 * credential's bytes; this process's own memory must (two copies at least),
 * or the reader proves nothing. A process that was a fork of this one (the
 * code before the change) fails here: its copy of the heap and of the data
 * segment holds both buffers.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "airlock/egress.h"
#include "airlock/proxy.h"
#include "sandbox_testlib.h"

#define CREDENTIAL_LEN 48
/* Mappings larger than this are skipped (see credential_hits). */
#define SHADOW_MIN (64ull << 30)

/* The "service credential": the same random bytes in the data segment and
 * on the heap. volatile pointers in static storage keep both live and keep
 * the compiler from proving them unused. */
static unsigned char credential_static[CREDENTIAL_LEN];
static unsigned char *volatile credential_heap;
static unsigned char *volatile credential_keep = credential_static;

static void credential_make(void)
{
	/* getrandom never returns short for 48 bytes. */
	cr_assert_eq(getrandom(credential_static, CREDENTIAL_LEN, 0), CREDENTIAL_LEN);
	/* All-zero or repeated bytes would match pages of anything. */
	bool varied = false;
	for (int i = 1; i < CREDENTIAL_LEN; i++)
		varied |= credential_static[i] != credential_static[0];
	cr_assert(varied);
	credential_heap = malloc(CREDENTIAL_LEN);
	cr_assert(credential_heap);
	memcpy(credential_heap, credential_static, CREDENTIAL_LEN);
}

static void credential_drop(void)
{
	explicit_bzero(credential_heap, CREDENTIAL_LEN);
	free(credential_heap);
	credential_heap = NULL;
	explicit_bzero(credential_keep, CREDENTIAL_LEN);
}

/* Occurrences of the credential in every readable mapping of pid, read
 * through /proc/PID/mem. *ret_bytes counts what was read (a reader that
 * read nothing proves nothing). -1 when the process is gone. */
static long credential_hits(pid_t pid, unsigned long long *ret_bytes)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *maps = fopen(path, "re");
	if (!maps)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	int mem = open(path, O_RDONLY | O_CLOEXEC);
	if (mem < 0) {
		fclose(maps);
		return -1;
	}
	/* A copy of the needle taken once: comparing against the live buffers
	 * while this process reads itself is the same bytes either way. */
	unsigned char needle[CREDENTIAL_LEN];
	memcpy(needle, credential_static, CREDENTIAL_LEN);
	const size_t chunk = 1u << 20;
	/* Each read keeps the last CREDENTIAL_LEN - 1 bytes of the one before,
	 * so a copy across a chunk boundary is found. */
	unsigned char *buf = malloc(chunk + CREDENTIAL_LEN);
	cr_assert(buf);
	long hits = 0;
	unsigned long long total = 0;
	char line[4096];
	while (fgets(line, sizeof(line), maps)) {
		unsigned long long start, end;
		char perms[8];
		int name_at = 0;
		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &start, &end, perms, &name_at) < 3)
			continue;
		if (perms[0] != 'r')
			continue;
		/* The kernel's own pages ([vvar], [vvar_vclock]) refuse to be
		 * read; [vsyscall] is the same fixed page in every process. */
		const char *name = line + name_at;
		if (strncmp(name, "[vvar", 5) == 0 || strncmp(name, "[vsyscall]", 10) == 0)
			continue;
		/* A sanitizer's shadow (the ASan build's test and proxy): one
		 * reservation of terabytes, holding state about memory, never a
		 * copy of it; reading it page by page would take hours. Nothing
		 * else here maps anything near this size (gVisor's sentry, the
		 * largest, has a few hundred MiB readable). */
		if (end - start > SHADOW_MIN) {
			cr_log_info("pid %d: skipped a %llu GiB mapping (a sanitizer's shadow)", (int)pid,
			            (end - start) >> 30);
			continue;
		}
		size_t kept = 0;
		for (unsigned long long at = start; at < end;) {
			size_t want = end - at < chunk ? (size_t)(end - at) : chunk;
			ssize_t n = pread(mem, buf + kept, want, (off_t)at);
			if (n <= 0) {
				/* An unreadable page (a guard, a hole): skip it. */
				kept = 0;
				at += 4096;
				continue;
			}
			total += (unsigned long long)n;
			size_t have = kept + (size_t)n;
			for (unsigned char *p = buf;
			     (p = memmem(p, have - (size_t)(p - buf), needle, CREDENTIAL_LEN));
			     p++)
				hits++;
			kept = have < CREDENTIAL_LEN - 1 ? have : CREDENTIAL_LEN - 1;
			memmove(buf, buf + have - kept, kept);
			at += (unsigned long long)n;
		}
	}
	explicit_bzero(needle, sizeof(needle));
	explicit_bzero(buf, chunk + CREDENTIAL_LEN);
	free(buf);
	close(mem);
	fclose(maps);
	*ret_bytes = total;
	return hits;
}

/* The reader finds both copies in this process: it works. */
static void assert_reader_works(void)
{
	unsigned long long bytes = 0;
	long self = credential_hits(getpid(), &bytes);
	cr_assert_geq(self, 2, "the reader found %ld copies of the credential in this process "
	              "(%llu bytes read): it cannot prove their absence elsewhere", self, bytes);
}

/* Reads pid's memory; appends what holds a copy to bad. Every process is
 * read before anything is asserted, so a failure names all of them. */
static bool check_clean(pid_t pid, const char *what, char *bad, size_t bad_size)
{
	unsigned long long bytes = 0;
	long hits = credential_hits(pid, &bytes);
	if (hits < 0)
		return false; /* gone meanwhile (gvisor's short-lived helpers) */
	cr_assert_gt(bytes, 0, "nothing of %s (pid %d) was readable", what, (int)pid);
	cr_log_info("%s (pid %d): %llu bytes read, %ld copies of the credential", what, (int)pid,
	            bytes, hits);
	if (hits > 0) {
		size_t used = strlen(bad);
		snprintf(bad + used, bad_size - used, "; %s (pid %d) holds %ld copies (%llu bytes read)",
		         what, (int)pid, hits, bytes);
	}
	return true;
}

/* The pids whose cgroup (any hierarchy) is the environment's (its name ends
 * in the environment's id: src/host/cgroup) or below it: the sandbox's own
 * processes, whatever the mechanism. */
static size_t sandbox_pids(const char *environment_id, pid_t *out, size_t max)
{
	DIR *d = opendir("/proc");
	cr_assert(d);
	size_t n = 0;
	size_t idlen = strlen(environment_id);
	struct dirent *de;
	while ((de = readdir(d)) && n < max) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		char path[300], line[4096];
		snprintf(path, sizeof(path), "/proc/%s/cgroup", de->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		bool in = false;
		while (!in && fgets(line, sizeof(line), f)) {
			for (char *p = line; (p = strstr(p, environment_id)); p++)
				if (p[idlen] == '/' || p[idlen] == '\n' || p[idlen] == '\0')
					in = true;
		}
		fclose(f);
		if (in)
			out[n++] = (pid_t)atoi(de->d_name);
	}
	closedir(d);
	return n;
}

static const char policy_text[] = "egress:\n"
                                  "  mode: allowlist\n"
                                  "  destinations:\n"
                                  "    - host: a.example.com\n"
                                  "      ports: [443]\n";

static void parse_policy(airlock_egress_policy *p)
{
	airlock_error err = { 0 };
	memset(p, 0, sizeof(*p));
	cr_assert_eq(airlock_egress_policy_parse("test.yaml", policy_text, strlen(policy_text), p,
	                                         &err),
	             0, "%s", err.message);
}

/* One mechanism under test: how to skip, how to open it, what its
 * sandbox's own processes are at least. */
typedef struct mechanism {
	const char *name;
	void (*require)(char digest[AIRLOCK_IMAGE_DIGEST_SIZE]);
	sandbox_test_adapter_fn adapter;
	const airlock_exec_ops *(*ops)(void);
	size_t helpers; /* native: init; gvisor: the keeper and the runtime */
	bool sealed_init; /* its processes are the sealed program under the filter */
} mechanism;

/* native's init, after its exec, keeps what the copy of the service had
 * set up: the filter, no_new_privs, no capabilities; and it is the sealed
 * program (exec/starter/starter.h), not the service's binary. */
static void assert_sealed_init(pid_t pid)
{
	char path[64], line[256], exe[256] = { 0 };
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	cr_assert_gt(readlink(path, exe, sizeof(exe) - 1), 0, "%s", path);
	cr_assert(strstr(exe, "memfd:airlock-starter"), "init's exe is %s", exe);
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	cr_assert(f, "%s", path);
	int seen = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "CapEff:", 7) == 0 || strncmp(line, "CapPrm:", 7) == 0 ||
		    strncmp(line, "CapBnd:", 7) == 0 || strncmp(line, "CapAmb:", 7) == 0) {
			cr_assert(strstr(line, "0000000000000000"), "init: %s", line);
			seen++;
		}
		if (strncmp(line, "NoNewPrivs:", 11) == 0) {
			cr_assert(strstr(line, "1"), "init: %s", line);
			seen++;
		}
		if (strncmp(line, "Seccomp:", 8) == 0) {
			cr_assert(strstr(line, "2"), "init: %s", line); /* SECCOMP_MODE_FILTER */
			seen++;
		}
	}
	fclose(f);
	cr_assert_eq(seen, 6, "init's status lacks fields");
}

static void check_mechanism(const mechanism *m)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	m->require(digest);
	if (geteuid() != 0)
		cr_skip_test("reading other processes' memory needs root");
	credential_make();
	assert_reader_works();

	int log_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	cr_assert(log_fd >= 0);
	airlock_proxy_config pc;
	airlock_proxy_config_default(&pc);
	pc.log_fd = log_fd;
	airlock_proxy *proxy = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_proxy_spawn(&pc, &proxy, &err), 0, "%s", err.message);

	airlock_egress_policy op;
	parse_policy(&op);
	airlock_exec *e = sandbox_test_open_adapter(m->adapter, m->ops(), NULL, &op, proxy, NULL);
	airlock_environment_spec s;
	airlock_environment_handle h = { 0 };
	static const airlock_resource_limits limits = {
		.cpu_millicores = 1000, .memory_bytes = 256ll << 20, .pids_max = 64,
		.workspace_bytes = 64ll << 20, .inodes_max = 2000, .wall_clock_seconds = 300,
	};
	sandbox_test_spec(&s, "tenant-secret", digest, &limits);
	airlock_egress_policy_clear(&s.egress);
	parse_policy(&s.egress);
	cr_assert_eq(airlock_exec_provision(e, &s, &h, &err), 0, "%s", err.message);
	/* One command, so that whatever a command leaves (gvisor's exec of
	 * it, a reaped child of init) has happened before the read. */
	airlock_execution_result res;
	sandbox_test_run(e, &h, (char *[]){ "true", NULL }, 30, NULL, &res);
	cr_assert_eq(res.exit_code, 0);
	airlock_execution_result_clear(&res);

	char bad[2048] = "";
	cr_assert(check_clean(airlock_proxy_pid(proxy), "the egress proxy", bad, sizeof(bad)),
	          "the egress proxy is gone");
	pid_t pids[64];
	size_t n = sandbox_pids(h.environment_id, pids, 64);
	size_t read = 0;
	for (size_t i = 0; i < n; i++) {
		char what[64];
		snprintf(what, sizeof(what), "%s sandbox process %zu of %zu", m->name, i + 1, n);
		if (check_clean(pids[i], what, bad, sizeof(bad)))
			pids[read++] = pids[i];
	}
	cr_assert_geq(read, m->helpers, "%zu processes of the %s sandbox's cgroup read, expected at "
	              "least %zu", read, m->name, m->helpers);
	cr_assert_str_empty(bad, "the service's credential is in processes beside the sandbox%s", bad);
	/* Then what the exec must have kept (after the credential, so that a
	 * fork of the service fails on what matters here first). */
	for (size_t i = 0; m->sealed_init && i < read; i++)
		assert_sealed_init(pids[i]);
	/* And the reader still finds this process's copies now. */
	assert_reader_works();

	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	airlock_exec_free(e);
	airlock_environment_handle_clear(&h);
	airlock_environment_spec_clear(&s);
	airlock_egress_policy_clear(&op);
	airlock_proxy_free(proxy);
	close(log_fd);
	credential_drop();
}

Test(secret_memory, native_init_and_the_proxy_hold_no_copy_of_the_service, .timeout = 300)
{
	static const mechanism m = { "native", native_test_require, native_test_adapter,
		                     airlock_native_ops, 1, true };
	check_mechanism(&m);
}

Test(secret_memory, gvisor_processes_and_the_proxy_hold_no_copy_of_the_service, .timeout = 600)
{
	static const mechanism m = { "gvisor", gvisor_test_require, gvisor_test_adapter,
		                     airlock_gvisor_ops, 2, false };
	check_mechanism(&m);
}
