/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Density: the host memory an idle sandbox holds, with many held at once,
 * beside the floor of the same count of idle bubblewrap sandboxes.
 *
 *   ours    N sandboxes provisioned through the port from the default image
 *           at small limits and held (idle: no command running), for
 *           native and, where runsc runs, gvisor;
 *   floor   N `bwrap --unshare-all --die-with-parent --ro-bind / / sleep`
 *           processes held (namespaces, a process each, no limits).
 *
 * Two readings of the memory, each taken before and after the N are up,
 * the difference divided by N:
 *
 *   charged  cgroup v1's memory.usage_in_bytes of a cgroup the benchmark
 *            moves itself into first (its own process, the runtime's
 *            processes before they move, the bwrap processes), plus that
 *            of each sandbox's cgroup (airlock-env_*, which the mechanisms
 *            place under the cgroup the benchmark came from): nothing else
 *            on the machine is counted. It holds
 *            the processes' memory, their page cache (an empty
 *            workspace's among it) and the kernel memory charged to them
 *            (dentries, inodes, socket buffers). Other work on the machine
 *            does not move it.
 *   host     MemTotal - MemAvailable from /proc/meminfo: everything,
 *            kernel objects that are charged to no cgroup included, and
 *            everything else the machine is doing: read it on a quiet
 *            machine only.
 *
 * Each side is measured twice, in the order ours, floor, ours, floor,
 * and the mean kept. The aims (issue "Speed"): native under 1 MiB, gvisor
 * under 25 MiB a sandbox, charged. No figure is asserted; a failure to
 * provision is.
 *
 *   bench_density [native_count [gvisor_count]]   (default 500 100)
 *   bench_density --until-fail MAX                 native sandboxes until one fails
 *                                                  or MAX are held: how many
 *
 * Needs root and the default image; without the native mechanism it exits
 * 77 with the reason; without runsc the gvisor side says why and is left
 * out. AIRLOCK_BENCH_IMAGE_STORE names a store other than the default.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "airlock/gvisor.h"
#include "airlock/native.h"

#include "bench_sandbox.h"

#define DENSITY_NATIVE_DEFAULT 500
#define DENSITY_GVISOR_DEFAULT 100
#define DENSITY_MAX 100000L

/* The memory cgroup's usage file ("" when there is none of our own). */
static char cg_usage[700], cg_dir[512], cg_home[450];

/* Move this process into a memory cgroup of its own, below the one it is
 * in (cgroup v1's memory hierarchy): what it and the processes it starts
 * are charged is then apart from the rest of the machine. The sandboxes'
 * own cgroups stay where the library placed them (it read this process's
 * place once, at the probe, before the move): meminfo adds theirs. 0, or
 * -1 with the charged reading left out (said on stdout). */
static int cg_enter(void)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return -1;
	char line[512], v1[400] = "", v2[400] = "";
	bool have_v1 = false, have_v2 = false;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		if (!b)
			continue;
		*b = 0;
		if (strcmp(a + 1, "memory") == 0) {
			snprintf(v1, sizeof(v1), "%s", b + 1);
			have_v1 = true;
		} else if (strncmp(line, "0:", 2) == 0 && a[1] == 0) {
			snprintf(v2, sizeof(v2), "%s", b + 1);
			have_v2 = true;
		}
	}
	fclose(f);
	const char *file;
	if (have_v1) {
		snprintf(cg_home, sizeof(cg_home), "/sys/fs/cgroup/memory%s", v1);
		file = "memory.usage_in_bytes";
	} else if (have_v2) {
		/* v2: a cgroup with a process cannot give its children
		 * controllers, which the sandboxes' cgroups need: no move. */
		printf("bench_density: cgroup v2: the charged reading needs the benchmark in a "
		       "cgroup of its own with no sandbox beside it; host reading only\n");
		return -1;
	} else {
		return -1;
	}
	if (snprintf(cg_dir, sizeof(cg_dir), "%s/bench-density-%d", cg_home, (int)getpid()) >=
	            (int)sizeof(cg_dir) ||
	    mkdir(cg_dir, 0755) < 0) {
		printf("bench_density: %s: %s; host reading only\n", cg_dir, strerror(errno));
		cg_dir[0] = 0;
		return -1;
	}
	char procs[600];
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg_dir);
	FILE *p = fopen(procs, "we");
	bool moved = p && fprintf(p, "%d\n", (int)getpid()) > 0;
	if (p && fclose(p) != 0)
		moved = false;
	if (!moved) {
		printf("bench_density: cannot move into %s; host reading only\n", cg_dir);
		rmdir(cg_dir);
		cg_dir[0] = 0;
		return -1;
	}
	snprintf(cg_usage, sizeof(cg_usage), "%s/%s", cg_dir, file);
	return 0;
}

/* Back to where it was, and the cgroup removed (its sandboxes' are gone). */
static void cg_leave(void)
{
	if (!cg_dir[0])
		return;
	char procs[600];
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg_home);
	FILE *p = fopen(procs, "we");
	if (p) {
		fprintf(p, "%d\n", (int)getpid());
		fclose(p);
	}
	if (rmdir(cg_dir) < 0)
		fprintf(stderr, "bench_density: %s was not removed: %s\n", cg_dir, strerror(errno));
}

static int read_bytes(const char *path, long long *ret)
{
	FILE *c = fopen(path, "re");
	bool ok = c && fscanf(c, "%lld", ret) == 1;
	if (c)
		fclose(c);
	if (!ok)
		fprintf(stderr, "bench_density: %s: cannot read\n", path);
	return ok ? 0 : -1;
}

/* kB charged to this benchmark's cgroup and to the sandboxes' (the
 * mechanisms place those beside it, under the cgroup it came from, as
 * airlock-env_*; a sandbox's runtime processes are moved into its own),
 * -1 when not read; and of MemTotal - MemAvailable. */
static int meminfo(int64_t *ret_charged, int64_t *ret_host)
{
	*ret_charged = -1;
	if (cg_usage[0]) {
		long long b;
		if (read_bytes(cg_usage, &b) < 0)
			return -1;
		DIR *d = opendir(cg_home);
		struct dirent *de;
		while (d && (de = readdir(d))) {
			if (strncmp(de->d_name, "airlock-env_", 12) != 0)
				continue;
			char path[1024];
			long long e;
			snprintf(path, sizeof(path), "%s/%s/memory.usage_in_bytes", cg_home, de->d_name);
			/* One destroyed between the listing and the read is gone. */
			if (access(path, R_OK) == 0 && read_bytes(path, &e) == 0)
				b += e;
		}
		if (d)
			closedir(d);
		*ret_charged = b / 1024;
	}
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f) {
		perror("bench_density: /proc/meminfo");
		return -1;
	}
	int64_t total = -1, avail = -1, mfree = -1;
	char line[256];
	while (fgets(line, sizeof(line), f)) {
		long long v;
		if (sscanf(line, "MemTotal: %lld kB", &v) == 1)
			total = v;
		else if (sscanf(line, "MemAvailable: %lld kB", &v) == 1)
			avail = v;
		else if (sscanf(line, "MemFree: %lld kB", &v) == 1)
			mfree = v;
	}
	fclose(f);
	if (total < 0 || avail < 0 || mfree < 0) {
		fputs("bench_density: /proc/meminfo lacks MemTotal, MemAvailable or MemFree\n", stderr);
		return -1;
	}
	(void)mfree;
	*ret_host = total - avail;
	return 0;
}

/* Let the kernel's deferred work (RCU frees, writeback) settle before a
 * reading, so a figure is the held state, not a transient. */
static void settle(void)
{
	struct timespec ts = { 1, 0 };
	nanosleep(&ts, NULL);
}

typedef struct density {
	double charged_kib, host_kib; /* per sandbox; charged < 0: not read */
} density;

static void add_half(density *sum, const density *d)
{
	sum->charged_kib += d->charged_kib / 2;
	sum->host_kib += d->host_kib / 2;
}

static void per_sandbox(density *d, int64_t c0, int64_t h0, int64_t c1, int64_t h1, size_t n)
{
	d->charged_kib = c0 < 0 ? -1 : (double)(c1 - c0) / (double)n;
	d->host_kib = (double)(h1 - h0) / (double)n;
}

/* N sandboxes of e held at once: the memory each adds. */
static int ours(airlock_exec *e, const airlock_environment_spec *spec, size_t n, density *ret)
{
	airlock_environment_handle *h = calloc(n, sizeof(*h));
	if (!h)
		return -1;
	int64_t u0, c0, u1, c1, ns;
	size_t up = 0;
	int rc = -1;
	settle();
	if (meminfo(&u0, &c0) < 0)
		goto out;
	for (; up < n; up++)
		if (bench_provision(e, spec, &h[up], &ns) < 0)
			goto out;
	settle();
	if (meminfo(&u1, &c1) < 0)
		goto out;
	per_sandbox(ret, u0, c0, u1, c1, n);
	rc = 0;
out:
	for (size_t i = 0; i < up; i++)
		if (bench_destroy(e, &h[i], &ns) < 0)
			rc = -1;
	free(h);
	return rc;
}

/* N idle bwrap sandboxes held at once: the memory each adds. */
static int floor_side(const char *bwrap, size_t n, density *ret)
{
	pid_t *pids = calloc(n, sizeof(*pids));
	if (!pids)
		return -1;
	char a0[] = "bwrap", a1[] = "--unshare-all", a2[] = "--die-with-parent", a3[] = "--ro-bind",
	     a4[] = "/", a5[] = "/", a6[] = "/bin/sleep", a7[] = "3600";
	char *argv[] = { a0, a1, a2, a3, a4, a5, a6, a7, NULL };
	int64_t u0, c0, u1, c1;
	size_t up = 0;
	int rc = -1;
	settle();
	if (meminfo(&u0, &c0) < 0)
		goto out;
	for (; up < n; up++) {
		pid_t p = fork();
		if (p < 0) {
			perror("bench_density: fork");
			goto out;
		}
		if (p == 0) {
			execve(bwrap, argv, environ);
			_exit(127);
		}
		pids[up] = p;
	}
	settle();
	/* Every one still there: a bwrap that failed is not a sandbox held. */
	for (size_t i = 0; i < up; i++) {
		int st;
		if (waitpid(pids[i], &st, WNOHANG) != 0) {
			fprintf(stderr, "bench_density: bwrap %zu of %zu ended early\n", i + 1, n);
			pids[i] = 0;
			goto out;
		}
	}
	if (meminfo(&u1, &c1) < 0)
		goto out;
	per_sandbox(ret, u0, c0, u1, c1, n);
	rc = 0;
out:
	for (size_t i = 0; i < up; i++)
		if (pids[i] > 0) {
			kill(pids[i], SIGKILL);
			while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
				;
		}
	free(pids);
	return rc;
}

static void print_density(const char *label, size_t n, const density *d)
{
	if (d->charged_kib >= -0.5)
		printf("  %-30s %5zu held   charged %9.1f KiB each   host %9.1f KiB each\n", label, n,
		       d->charged_kib, d->host_kib);
	else
		printf("  %-30s %5zu held   host %9.1f KiB each\n", label, n, d->host_kib);
}

/* ours, floor, ours, floor; the mean of each side. */
static int measure(const char *name, airlock_exec *e, const airlock_environment_spec *spec,
                   const char *bwrap, size_t n, double aim_mib)
{
	density best_ours = { 0 }, best_floor = { 0 };
	for (int round = 0; round < 2; round++) {
		density d = { 0 };
		if (ours(e, spec, n, &d) < 0) {
			fprintf(stderr, "bench_density: %s: %zu sandboxes could not all be held\n", name, n);
			return -1;
		}
		add_half(&best_ours, &d);
		if (floor_side(bwrap, n, &d) < 0)
			return -1;
		add_half(&best_floor, &d);
	}
	printf("bench_density: %s, %zu idle sandboxes held at once (host memory each)\n", name, n);
	print_density(name, n, &best_ours);
	print_density("bwrap --unshare-all sleep", n, &best_floor);
	bool charged = best_ours.charged_kib >= -0.5;
	double o = charged ? best_ours.charged_kib : best_ours.host_kib;
	double f = charged ? best_floor.charged_kib : best_floor.host_kib;
	printf("  %-30s %.2fx (%s)   aim: under %.0f MiB each (%s): %s\n", "ratio (ours / bwrap)",
	       o / (f > 1 ? f : 1), charged ? "charged" : "host", aim_mib,
	       charged ? "charged" : "host", o < aim_mib * 1024 ? "met" : "not met");
	fflush(stdout);
	return 0;
}

/* Native sandboxes until one fails or max are held. */
static int until_fail(airlock_exec *e, const airlock_environment_spec *spec, size_t max)
{
	airlock_environment_handle *h = calloc(max, sizeof(*h));
	if (!h)
		return -1;
	size_t up = 0;
	int64_t ns, u0, c0, u1 = -1, c1 = 0;
	if (meminfo(&u0, &c0) < 0) {
		free(h);
		return -1;
	}
	airlock_error err = { 0 };
	for (; up < max; up++) {
		memset(&h[up], 0, sizeof(h[up]));
		if (airlock_exec_provision(e, spec, &h[up], &err) < 0)
			break;
	}
	if (meminfo(&u1, &c1) < 0)
		u1 = c1 = 0;
	printf("bench_density: native: %zu sandboxes held at once", up);
	if (up < max)
		printf("; the next failed: %s: %s\n", airlock_errclass_name(err.cls), err.message);
	else
		printf(" (the limit asked for; none failed)\n");
	if (up > 0 && u0 >= 0 && u1 >= 0)
		printf("  %.1f KiB charged each at that count\n", (double)(u1 - u0) / (double)up);
	int rc = 0;
	for (size_t i = 0; i < up; i++)
		if (bench_destroy(e, &h[i], &ns) < 0)
			rc = -1;
	free(h);
	return rc;
}

int main(int argc, char **argv)
{
	bench_prog = "bench_density";
	long n_native = DENSITY_NATIVE_DEFAULT, n_gvisor = DENSITY_GVISOR_DEFAULT, fail_max = 0;
	const char *usage = "[native_count [gvisor_count]] | --until-fail MAX";
	if (argc == 3 && strcmp(argv[1], "--until-fail") == 0) {
		if ((fail_max = bench_parse(argv[2], 1, usage)) < 0 || fail_max > DENSITY_MAX)
			return 2;
	} else if (argc > 3 || (argc > 1 && (n_native = bench_parse(argv[1], 1, usage)) < 0) ||
	           (argc > 2 && (n_gvisor = bench_parse(argv[2], 0, usage)) < 0) ||
	           n_native > DENSITY_MAX || n_gvisor > DENSITY_MAX) {
		fprintf(stderr, "usage: %s %s (counts up to %ld)\n", argv[0], usage, DENSITY_MAX);
		return 2;
	}
	char why[256];
	if (airlock_native_probe(why, sizeof(why)) < 0) {
		fprintf(stderr, "bench_density: the native mechanism is unavailable here: %s\n", why);
		return BENCH_SKIP;
	}
	cg_enter();
	const char *store_dir = NULL;
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	int found = bench_default_image(&store_dir, digest);
	char *bwrap = found == 0 ? bench_find_bwrap() : NULL;
	if (found == 0 && !bwrap) {
		fprintf(stderr, "bench_density: bwrap not found in /usr/bin, /bin or /usr/local/bin: "
		                "apt-get install bubblewrap (scripts/setup.sh does)\n");
		found = BENCH_SKIP;
	}
	if (found != 0) {
		cg_leave();
		return found;
	}
	airlock_environment_spec spec;
	airlock_exec *native = NULL, *gvisor = NULL;
	airlock_error err = { 0 };
	int rc = 1;
	if (bench_spec(&spec, digest) < 0) {
		fputs("bench_density: cannot build the spec\n", stderr);
		goto out;
	}
	airlock_native_config nc = { .image_store = store_dir, .start_budget_seconds = 30 };
	airlock_native *nat = NULL;
	if (airlock_native_new(&nc, &nat, &err) < 0 ||
	    airlock_exec_new(airlock_native_ops(), nat, NULL, &native, &err) < 0) {
		fprintf(stderr, "bench_density: native: %s\n", err.message);
		goto out;
	}
	printf("bench_density: nproc %ld; image %.19s...; limits workspace 64 MiB, 1000 inodes, "
	       "memory 256 MiB, pids 64; %s\n",
	       sysconf(_SC_NPROCESSORS_ONLN), digest, bwrap);
	fflush(stdout);
	if (fail_max > 0) {
		rc = until_fail(native, &spec, (size_t)fail_max) < 0 ? 1 : 0;
		goto out;
	}
	if (measure("native", native, &spec, bwrap, (size_t)n_native, 1) < 0)
		goto out;
	airlock_gvisor_platform platform = AIRLOCK_GVISOR_PLATFORM__MAX;
	char state[] = "/tmp/airlock-bench-density-XXXXXX";
	if (n_gvisor == 0) {
		printf("bench_density: gvisor: not asked for (count 0)\n");
	} else if (airlock_gvisor_probe(AIRLOCK_GVISOR_PLATFORM_AUTO, NULL, &platform, why,
	                                sizeof(why)) < 0) {
		printf("bench_density: gvisor: unavailable here (runsc): %s\n", why);
	} else if (!mkdtemp(state)) {
		perror("bench_density: the gvisor state directory");
		goto out;
	} else {
		/* The adapter's state in a directory of this run's own: one
		 * service per state directory. */
		airlock_gvisor_config gc = { .image_store = store_dir, .state_dir = state,
			                     .platform = platform, .start_budget_seconds = 60 };
		airlock_gvisor *g = NULL;
		int r = airlock_gvisor_new(&gc, &g, &err) < 0 ||
		                        airlock_exec_new(airlock_gvisor_ops(), g, NULL, &gvisor, &err) < 0
		                ? -1
		                : measure("gvisor", gvisor, &spec, bwrap, (size_t)n_gvisor, 25);
		if (r < 0 && err.message[0])
			fprintf(stderr, "bench_density: gvisor: %s\n", err.message);
		airlock_exec_free(gvisor);
		gvisor = NULL;
		char cmd[96];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", state);
		if (system(cmd) != 0)
			fprintf(stderr, "bench_density: %s was not removed\n", state);
		if (r < 0)
			goto out;
	}
	rc = 0;
out:
	airlock_exec_free(native);
	cg_leave();
	airlock_environment_spec_clear(&spec);
	free(bwrap);
	if (rc != 0)
		fputs("bench_density: no figures: the run did not complete\n", stderr);
	return rc;
}
