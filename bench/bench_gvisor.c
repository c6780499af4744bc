/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gvisor mechanism's two costs, each beside runsc driven by hand on a
 * bundle of the same kind, measured side by side in one process (issue
 * "The gVisor mechanism", Measure):
 *
 *   provision  provision + destroy of a sandbox from the default image at
 *              small limits through the adapter, beside `runsc run` of
 *              /bin/true in a bundle this program builds: the same image
 *              (its .erofs mounted read-only as the root), a workspace
 *              directory, a private /tmp, uid 1000 without capabilities,
 *              and the adapter's runsc flags (the platform the probe picks,
 *              --network=none, --ignore-cgroups, a --root of its own). The
 *              adapter does more in that time: limits, the quota'd volume,
 *              the crash sweep's bookkeeping; the aim is within 1.1x;
 *   execute    /bin/true run in one live sandbox through
 *              airlock_exec_execute, beside `runsc exec` of /bin/true in a
 *              live sandbox of the hand-made bundle; the aim is no slower.
 *
 * Each pair is interleaved in rounds (the side that goes first alternates),
 * so a burst of noise lands on both sides alike. CLOCK_MONOTONIC; p50 and
 * p99 of each side and the ratios are printed, no time is asserted. A host
 * without runsc, or without the default image, exits 77 (a skip) with the
 * reason; it never prints a figure it did not measure.
 *
 *   bench_gvisor [runs [executes]]   (default 50 each; the suite's short
 *                                    mode is 3 3)
 *
 * Needs root (the gvisor mechanism does, and so does mounting the image).
 * AIRLOCK_BENCH_IMAGE_STORE names a store other than /var/lib/airlock/images.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/tiers.h"
#include "airlock/gvisor.h"
#include "airlock/guest.h"

#include "bench_sandbox.h"

#define BENCH_RUNS_DEFAULT 50
#define BENCH_EXECS_DEFAULT 50

/* ---- the hand-made bundle ------------------------------------------------------ */

typedef struct raw {
	char dir[64];         /* mkdtemp: rootfs/, workspace/, state/, run/, init/, and the
	                       * adapter's service/ */
	char rootfs[128];     /* the image's .erofs, mounted read-only */
	char state[128];      /* runsc --root */
	char platform[32];    /* --platform=NAME */
	const char *runsc;
	bool mounted;
	bool init_live;       /* the execute side's sandbox */
	unsigned long serial; /* container ids */
	char init_id[64];
} raw;

#define RAW_WORDS_MAX 32

/* words[0] with words (NULL-terminated, at most RAW_WORDS_MAX), which must
 * succeed; *ret_ns (NULL ok) the wall time. execve wants them writable:
 * copies, made before the clock starts. */
static int raw_spawn(const char *const *words, int64_t *ret_ns)
{
	char *argv[RAW_WORDS_MAX + 1] = { 0 };
	size_t n = 0;
	int r = -1;
	for (; words[n]; n++)
		if (n == RAW_WORDS_MAX || !(argv[n] = strdup(words[n])))
			goto out;
	int64_t ns = 0;
	r = bench_spawn(argv[0], argv, &ns);
	if (ret_ns)
		*ret_ns = ns;
out:
	for (size_t i = 0; i < n; i++)
		free(argv[i]);
	return r;
}

/* runsc with the adapter's global flags, then the command's words. */
static int raw_runsc(raw *w, int64_t *ret_ns, const char *const *words)
{
	char root[160];
	snprintf(root, sizeof(root), "--root=%s", w->state);
	const char *argv[RAW_WORDS_MAX + 1] = { w->runsc, root, w->platform, "--network=none",
		                                "--ignore-cgroups" };
	size_t n = 5;
	for (size_t i = 0; words[i] && n < RAW_WORDS_MAX; i++)
		argv[n++] = words[i];
	argv[n] = NULL;
	return raw_spawn(argv, ret_ns);
}

/* config.json of a bundle in dir whose process is args (NULL-terminated),
 * the adapter's (src/exec/gvisor/bundle.c) but for the environment: the
 * image as a read-only root, /proc, /tmp a tmpfs of the sentry, the
 * workspace directory read-write, root's process without capabilities
 * and without new privileges, the limits as rlimits (pids 64, files no
 * larger than the 64 MiB workspace, no core), the same namespaces. */
static int raw_bundle(raw *w, const char *dir, const char *const *args)
{
	json_t *jargs = json_array();
	for (size_t i = 0; args[i]; i++)
		json_array_append_new(jargs, json_string(args[i]));
	char ws[160];
	snprintf(ws, sizeof(ws), "%s/workspace", w->dir);
	json_t *caps = json_pack("{s:[], s:[], s:[], s:[], s:[]}", "bounding", "effective",
	                         "inheritable", "permitted", "ambient");
	json_t *rlimits = json_pack("[{s:s, s:i, s:i}, {s:s, s:I, s:I}, {s:s, s:i, s:i}]",
	                            "type", "RLIMIT_NPROC", "hard", 64, "soft", 64,
	                            "type", "RLIMIT_FSIZE", "hard", (json_int_t)(64ll << 20), "soft",
	                            (json_int_t)(64ll << 20), "type", "RLIMIT_CORE", "hard", 0, "soft", 0);
	json_t *cfg = json_pack(
		"{s:s, s:{s:b, s:{s:i, s:i}, s:o, s:[s, s], s:s, s:o, s:o, s:b}, s:{s:s, s:b}, s:s,"
		" s:[{s:s, s:s, s:s, s:[s, s, s]}, {s:s, s:s, s:s, s:[s, s, s]},"
		" {s:s, s:s, s:s, s:[s, s, s, s]}],"
		" s:{s:[{s:s}, {s:s}, {s:s}, {s:s}, {s:s}]}}",
		"ociVersion", "1.0.2",
		"process", "terminal", 0, "user", "uid", 0, "gid", 0, "args", jargs, "env",
		"PATH=" AIRLOCK_SANDBOX_PATH, "HOME=/workspace", "cwd", "/", "capabilities", caps,
		"rlimits", rlimits, "noNewPrivileges", 1,
		"root", "path", w->rootfs, "readonly", 1,
		"hostname", "sandbox",
		"mounts", "destination", "/proc", "type", "proc", "source", "proc", "options", "nosuid",
		"noexec", "nodev",
		"destination", "/tmp", "type", "tmpfs", "source", "tmpfs", "options", "nosuid", "nodev",
		"mode=1777",
		"destination", "/workspace", "type", "bind", "source", ws, "options", "rbind", "rw",
		"nosuid", "nodev",
		"linux", "namespaces", "type", "pid", "type", "ipc", "type", "uts", "type", "mount", "type",
		"network");
	if (!cfg) {
		fprintf(stderr, "%s: cannot build config.json\n", bench_prog);
		return -1;
	}
	char path[192];
	snprintf(path, sizeof(path), "%s/config.json", dir);
	int r = mkdir(dir, 0700) < 0 && errno != EEXIST ? -1 : json_dump_file(cfg, path, JSON_INDENT(1));
	json_decref(cfg);
	if (r < 0)
		fprintf(stderr, "%s: %s: %s\n", bench_prog, path, strerror(errno));
	return r;
}

static void raw_down(raw *w)
{
	if (w->init_live) {
		const char *kill[] = { "kill", w->init_id, "KILL", NULL };
		const char *del[] = { "delete", "--force", w->init_id, NULL };
		raw_runsc(w, NULL, kill);
		raw_runsc(w, NULL, del);
		w->init_live = false;
	}
	if (w->mounted) {
		const char *um[] = { "/bin/umount", "-d", w->rootfs, NULL };
		if (raw_spawn(um, NULL) == 0)
			w->mounted = false;
	}
	if (w->dir[0] && !w->mounted) {
		const char *rm[] = { "/bin/rm", "-rf", "--one-file-system", w->dir, NULL };
		raw_spawn(rm, NULL);
		w->dir[0] = 0;
	}
}

/* The bundles over the image at store/sha256/HEX.erofs (digest
 * "sha256:HEX"). */
static int raw_up(raw *w, const char *store, const char *digest, airlock_gvisor_platform platform)
{
	memset(w, 0, sizeof(*w));
	w->runsc = AIRLOCK_GVISOR_RUNSC;
	snprintf(w->platform, sizeof(w->platform), "--platform=%s", airlock_gvisor_platform_name(platform));
	snprintf(w->dir, sizeof(w->dir), "/tmp/bench-gvisor.XXXXXX");
	if (!mkdtemp(w->dir)) {
		fprintf(stderr, "%s: mkdtemp: %s\n", bench_prog, strerror(errno));
		w->dir[0] = 0;
		return -1;
	}
	snprintf(w->rootfs, sizeof(w->rootfs), "%s/rootfs", w->dir);
	snprintf(w->state, sizeof(w->state), "%s/state", w->dir);
	char ws[160], image[4096];
	snprintf(ws, sizeof(ws), "%s/workspace", w->dir);
	const char *hex = strchr(digest, ':');
	snprintf(image, sizeof(image), "%s/sha256/%s.erofs", store, hex ? hex + 1 : digest);
	if (mkdir(w->rootfs, 0755) < 0 || mkdir(w->state, 0700) < 0 || mkdir(ws, 0777) < 0 ||
	    chmod(ws, 0777) < 0) {
		fprintf(stderr, "%s: %s: %s\n", bench_prog, w->dir, strerror(errno));
		return -1;
	}
	const char *mnt[] = { "/bin/mount", "-t", "erofs", "-o", "ro,loop", image, w->rootfs, NULL };
	if (raw_spawn(mnt, NULL) < 0)
		return -1;
	w->mounted = true;
	char run[160], init[160];
	snprintf(run, sizeof(run), "%s/run", w->dir);
	snprintf(init, sizeof(init), "%s/init", w->dir);
	const char *true_args[] = { "/bin/true", NULL };
	/* The execute side's pid 1: the guest's init, as in the adapter's
	 * sandboxes (an image without it cannot run under the adapter either). */
	const char *init_args[] = { AIRLOCK_GUEST_PROGRAM, "init", NULL };
	if (raw_bundle(w, run, true_args) < 0 || raw_bundle(w, init, init_args) < 0)
		return -1;
	printf("%s: raw side: bundles in %s over %s\n", bench_prog, w->dir, image);
	return 0;
}

/* runsc run of /bin/true, count times. */
static int raw_run_side(void *ctx, int64_t *out, size_t *k, size_t count)
{
	raw *w = ctx;
	char bundle[160];
	snprintf(bundle, sizeof(bundle), "--bundle=%s/run", w->dir);
	for (size_t i = 0; i < count; i++, (*k)++) {
		char id[64];
		snprintf(id, sizeof(id), "bench-raw-%d-%lu", (int)getpid(), w->serial++);
		const char *run[] = { "run", bundle, id, NULL };
		if (raw_runsc(w, &out[*k], run) < 0)
			return -1;
	}
	return 0;
}

static int raw_init_up(raw *w)
{
	char bundle[160];
	snprintf(bundle, sizeof(bundle), "--bundle=%s/init", w->dir);
	snprintf(w->init_id, sizeof(w->init_id), "bench-raw-%d-init", (int)getpid());
	const char *create[] = { "create", bundle, w->init_id, NULL };
	const char *start[] = { "start", w->init_id, NULL };
	/* The sandbox keeps the stdout runsc create had: the guest's init
	 * says it is ready there, which is no figure of ours. */
	fflush(stdout);
	int saved = dup(STDOUT_FILENO), null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (saved < 0 || null < 0 || dup2(null, STDOUT_FILENO) < 0) {
		fprintf(stderr, "%s: /dev/null: %s\n", bench_prog, strerror(errno));
		return -1;
	}
	int r = raw_runsc(w, NULL, create);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	close(null);
	if (r < 0)
		return -1;
	w->init_live = true;
	return raw_runsc(w, NULL, start);
}

static int raw_exec_side(void *ctx, int64_t *out, size_t *k, size_t count)
{
	raw *w = ctx;
	for (size_t i = 0; i < count; i++, (*k)++) {
		/* As the adapter's commands run: uid 1000 in the workspace (the
		 * adapter's goes through the guest's exec, which waits for it). */
		const char *exec[] = { "exec", "--user", "1000:1000", "--cwd", "/workspace", w->init_id,
			               "/bin/true", NULL };
		if (raw_runsc(w, &out[*k], exec) < 0)
			return -1;
	}
	return 0;
}

typedef struct bench_ctx {
	airlock_exec *exec;
	airlock_environment_spec spec;
	raw raw;
} bench_ctx;

int main(int argc, char **argv)
{
	bench_prog = "bench_gvisor";
	long runs = BENCH_RUNS_DEFAULT, execs = BENCH_EXECS_DEFAULT;
	const char *usage = "[runs [executes]]";
	if (argc > 3 || (argc > 1 && (runs = bench_parse(argv[1], 1, usage)) < 0) ||
	    (argc > 2 && (execs = bench_parse(argv[2], 1, usage)) < 0)) {
		if (argc > 3)
			fprintf(stderr, "usage: %s %s\n", argv[0], usage);
		return 2;
	}
	char why[256];
	airlock_gvisor_platform platform = AIRLOCK_GVISOR_PLATFORM__MAX;
	if (airlock_gvisor_probe(AIRLOCK_GVISOR_PLATFORM_AUTO, NULL, &platform, why, sizeof(why)) < 0) {
		fprintf(stderr, "%s: the gvisor mechanism is unavailable here (runsc): %s\n", bench_prog, why);
		return BENCH_SKIP;
	}
	const char *store_dir = NULL;
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	int found = bench_default_image(&store_dir, digest);
	if (found != 0)
		return found;

	bench_ctx c = { 0 };
	int rc = 1;
	airlock_error err = { 0 };
	if (raw_up(&c.raw, store_dir, digest, platform) < 0)
		goto out;
	if (bench_spec(&c.spec, digest) < 0) {
		fprintf(stderr, "%s: cannot build the spec\n", bench_prog);
		goto out;
	}
	/* The adapter's state in a directory of this run's own: one service
	 * per state directory, and a service may be running on the default. */
	char service_state[96];
	snprintf(service_state, sizeof(service_state), "%s/service", c.raw.dir);
	airlock_gvisor_config gc = { .image_store = store_dir, .state_dir = service_state,
		                     .platform = platform, .start_budget_seconds = 30 };
	airlock_gvisor *g = NULL;
	if (airlock_gvisor_new(&gc, &g, &err) < 0) {
		fprintf(stderr, "%s: %s\n", bench_prog, err.message);
		goto out;
	}
	if (airlock_exec_new(airlock_gvisor_ops(), g, NULL, &c.exec, &err) < 0) {
		fprintf(stderr, "%s: %s\n", bench_prog, err.message);
		goto out;
	}
	double load[3] = { 0, 0, 0 };
	if (getloadavg(load, 3) != 3)
		load[0] = load[1] = load[2] = -1;
	printf("%s: nproc %ld, load average %.2f %.2f %.2f; platform %s (%s); image %.19s...; "
	       "limits workspace 64 MiB, 1000 inodes, memory 256 MiB, pids 64\n",
	       bench_prog, sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2],
	       airlock_gvisor_platform_name(platform), why, digest);
	fflush(stdout);
	bench_theirs run = { "runsc run /bin/true (by hand)", raw_run_side, &c.raw, 1.1,
		             "within 1.1x of runsc run" };
	if (bench_provision_all(c.exec, &c.spec, (size_t)runs, "gvisor", &run) < 0)
		goto out;
	fflush(stdout);
	/* runsc exec needs a live sandbox of the hand-made bundle. */
	if (raw_init_up(&c.raw) < 0)
		goto out;
	bench_theirs exec = { "runsc exec /bin/true (by hand)", raw_exec_side, &c.raw, 1.0,
		              "no slower than runsc exec" };
	if (bench_execute_all(c.exec, &c.spec, (size_t)execs, "gvisor", &exec) < 0)
		goto out;
	if (getloadavg(load, 3) == 3)
		printf("%s: load average at the end %.2f %.2f %.2f\n", bench_prog, load[0], load[1], load[2]);
	rc = 0;
out:
	airlock_exec_free(c.exec);
	airlock_environment_spec_clear(&c.spec);
	raw_down(&c.raw);
	if (rc != 0)
		fprintf(stderr, "%s: no figures: the run did not complete\n", bench_prog);
	return rc;
}
