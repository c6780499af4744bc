/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Building an image from Debian packages and storing it under its digest
 * (include/airlock/image_build.h has the contract). The store it builds into
 * is src/host/'s; the tree cleaning is clean.c, the mirror apt.c, the
 * package list packages.c.
 *
 * Two rules run through the build:
 *   - every file-system operation is relative to a directory descriptor and
 *     refuses symlinks, so a path inside the store or the build tree cannot
 *     be redirected;
 *   - external programs run without a shell, from a fixed PATH, with a time
 *     limit, and everything they leave behind is removed on every path out.
 */
#include "image/build.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "airlock/guest.h"
#include "host/image_store.h"
#include "util/run.h"
#include "util/util.h"

/* External programs are found here and nowhere else: the caller's PATH is
 * not consulted, so a directory an unprivileged user controls cannot supply
 * a "debootstrap" that we would then run as root. */
static const char *const fixed_path_dirs[] = { "/usr/sbin", "/usr/bin", "/sbin", "/bin" };
#define FIXED_PATH "/usr/sbin:/usr/bin:/sbin:/bin"

/* A fixed filesystem UUID makes two builds of the same tree byte-identical
 * (mkfs.erofs picks a random one otherwise). */
#define IMAGE_UUID "61697266-6c6f-636b-0000-000000000000"

/* ---- running a program -------------------------------------------------------- */

/* The last max bytes of data, made printable for a one-line message: line
 * breaks become " | ", other control bytes (terminal escapes from progress
 * output) are dropped. */
static void summarize_tail(const char *data, size_t len, size_t max, char *out, size_t size)
{
	while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' '))
		len--;
	size_t start = len > max ? len - max : 0;
	size_t o = 0;
	for (size_t i = start; i < len && o + 4 < size; i++) {
		unsigned char c = (unsigned char)data[i];
		if (c == '\n') {
			if (o > 0)
				o += (size_t)snprintf(out + o, size - o, " | ");
		} else if (c >= 0x20 && c != 0x7f) {
			out[o++] = (char)c;
		}
	}
	out[o] = 0;
	if (o == 0)
		snprintf(out, size, "(no output)");
}

/* Find name in the fixed PATH. */
static int resolve_program(const char *name, char *out, size_t size)
{
	for (size_t i = 0; i < ARRAY_SIZE(fixed_path_dirs); i++) {
		snprintf(out, size, "%s/%s", fixed_path_dirs[i], name);
		struct stat st;
		if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

/* Environment variables a program inherits from ours: only the proxy
 * settings an operator may need to reach the mirror. */
static const char *const passed_env[] = { "http_proxy", "https_proxy", "no_proxy",
	                                  "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY" };

typedef struct prog_env {
	char storage[AIRLOCK_IMAGE_PROG_ENV_MAX][AIRLOCK_IMAGE_PROG_ENV_VALUE_MAX];
	char *envp[AIRLOCK_IMAGE_PROG_ENV_MAX + 1];
} prog_env;

static void prog_env_build(prog_env *e)
{
	size_t n = 0;
	static const char *const fixed[] = { ("PATH=" FIXED_PATH), "LC_ALL=C", "HOME=/root",
		                             "DEBIAN_FRONTEND=noninteractive" };
	for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
		snprintf(e->storage[n++], AIRLOCK_IMAGE_PROG_ENV_VALUE_MAX, "%s", fixed[i]);
	for (size_t i = 0; i < ARRAY_SIZE(passed_env) && n < AIRLOCK_IMAGE_PROG_ENV_MAX; i++) {
		const char *v = getenv(passed_env[i]);
		if (!v)
			continue;
		/* A value too long to keep whole is left out, never cut short. */
		int k = snprintf(e->storage[n], AIRLOCK_IMAGE_PROG_ENV_VALUE_MAX, "%s=%s", passed_env[i], v);
		if (k > 0 && k < AIRLOCK_IMAGE_PROG_ENV_VALUE_MAX)
			n++;
	}
	for (size_t i = 0; i < n; i++)
		e->envp[i] = e->storage[i];
	e->envp[n] = NULL;
}

/*
 * Run argv (argv[0] a bare program name, found in the fixed PATH) with stdin
 * from /dev/null and stdout and stderr captured to a bounded tail, in a
 * process group of its own (util/run.h). With private_mounts, the program
 * runs in a new mount namespace whose mounts propagate nowhere, so whatever
 * it mounts disappears with it. Fails with AIRLOCK_ERR_EXECUTION_UNAVAILABLE
 * when the program is missing, exits non-zero, dies by a signal or passes
 * timeout_ms (its whole process group is then killed).
 */
static int run_program(const char *const *argv, bool private_mounts, int64_t timeout_ms,
                       const char *package, airlock_error *err)
{
	char path[PATH_MAX];
	if (resolve_program(argv[0], path, sizeof(path)) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "%s is not installed in %s (Debian package %s; scripts/setup.sh installs it)",
		                         argv[0], FIXED_PATH, package);
	char *vec[32];
	size_t n_args = 0;
	while (argv[n_args] && n_args + 1 < ARRAY_SIZE(vec)) {
		/* execve's prototype predates const; it does not write argv. */
		memcpy(&vec[n_args], &argv[n_args], sizeof(vec[0]));
		n_args++;
	}
	if (argv[n_args])
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0, "%s: too many arguments", argv[0]);
	vec[n_args] = NULL;
	_cleanup_free_ prog_env *env = calloc(1, sizeof(*env));
	if (!env)
		return host_image_sys_error(err, ENOMEM, "program environment");
	prog_env_build(env);

	const util_run_options o = {
		.path = path,
		.argv = vec,
		.envp = env->envp,
		.output_max = AIRLOCK_IMAGE_OUTPUT_TAIL_MAX,
		.timeout_ms = timeout_ms,
		/* After the program exited, its output is drained for a short
		 * while only: a descendant that escaped its process group must not
		 * turn a success into a timeout. */
		.drain_ms = 5000,
		.own_process_group = true,
		.private_mounts = private_mounts,
	};
	__attribute__((cleanup(util_run_result_clear))) util_run_result res;
	int r = util_run(&o, &res);
	if (r < 0)
		return host_image_sys_error(err, -r, res.failed);
	char summary[AIRLOCK_IMAGE_OUTPUT_IN_MESSAGE + 64];
	summarize_tail(res.output, res.output_len, AIRLOCK_IMAGE_OUTPUT_IN_MESSAGE, summary, sizeof(summary));
	if (res.timed_out)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "%s did not finish within %lld s and was killed; its output ended with: %s",
		                         argv[0], (long long)(timeout_ms / 1000), summary);
	int status = res.status;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status)) {
		int code = WEXITSTATUS(status);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "%s exited with status %d; its output ended with: %s", argv[0],
		                         code, summary);
	}
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
	                         "%s was killed by signal %d; its output ended with: %s", argv[0],
	                         WIFSIGNALED(status) ? WTERMSIG(status) : 0, summary);
}

/* ---- the build ------------------------------------------------------------------ */

static void progress_line(airlock_image_progress_fn fn, void *ctx, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void progress_line(airlock_image_progress_fn fn, void *ctx, const char *fmt, ...)
{
	if (!fn)
		return;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fn(ctx, line);
}

/* What the build made from what: the recipe, the suite, the packages and
 * the guest files (their fingerprint: find_built reuses an image only when
 * it carries this airlock's). */
static int sidecar_text(const char *packages, char **ret)
{
	char guest[AIRLOCK_SHA256_HEX_LEN + 1];
	int r = image_guest_fingerprint(guest);
	if (r < 0)
		return r;
	char *text = NULL;
	if (asprintf(&text, "recipe: %u\nsuite: %s\npackages: %s\n" SIDECAR_GUEST_KEY "%s\n",
	             AIRLOCK_IMAGE_RECIPE, AIRLOCK_IMAGE_SUITE, packages, guest) < 0)
		return -ENOMEM;
	*ret = text;
	return 0;
}

static int write_sidecar(airlock_image_store *store, const char *hex, const char *packages,
                         airlock_error *err)
{
	_cleanup_free_ char *text = NULL;
	int r = sidecar_text(packages, &text);
	if (r < 0 || !text)
		return host_image_sys_error(err, r < 0 ? -r : ENOMEM, "image build: sidecar");
	char tmp_name[64];
	r = host_image_random_name("sidecar-", tmp_name, sizeof(tmp_name));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build: sidecar");
	_cleanup_close_ int fd = openat(store->tmp_fd, tmp_name,
	                                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return host_image_sys_error(err, errno, "image build: sidecar");
	flock(fd, LOCK_EX | LOCK_NB);
	r = util_write_all(fd, text, strlen(text));
	if (r == 0 && (fsync(fd) < 0 || fchmod(fd, 0444) < 0))
		r = -errno;
	char final[AIRLOCK_SHA256_HEX_LEN + sizeof(SIDECAR_SUFFIX)];
	snprintf(final, sizeof(final), "%s" SIDECAR_SUFFIX, hex);
	/* rename may replace: the record is written after the image is stored
	 * and describes it, and an older record of the same digest says the
	 * same thing or less. */
	if (r == 0 && renameat(store->tmp_fd, tmp_name, store->sha_fd, final) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(store->tmp_fd, tmp_name, 0);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build: sidecar");
	}
	fsync(store->sha_fd);
	return 0;
}

static int mirror_check(const char *m, airlock_error *err)
{
	bool oom = false;
	_cleanup_free_ char *u = image_usable_uri(m, strlen(m), &oom);
	if (oom)
		return host_image_sys_error(err, ENOMEM, "image build");
	if (!u)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "image build: mirror \"%.200s\" is not an http://, https:// or file:/ URI of printable characters",
		                         m);
	return 0;
}

/* debootstrap's own log explains the failures its output only points at (a
 * maintainer script that failed, a package that did not unpack), by a path
 * that is about to be removed: put the log's end in the message. */
static void append_debootstrap_log(airlock_error *err, int build_fd)
{
	/* An "E:" line in the output already says what went wrong. */
	if (!err || strstr(err->message, "E: "))
		return;
	host_tree_id id;
	if (host_tree_id_of(build_fd, "", AT_EMPTY_PATH, &id, NULL) < 0)
		return;
	int dfd = image_open_beneath(build_fd, "root/debootstrap", &id);
	if (dfd < 0)
		return;
	int fd = openat(dfd, "debootstrap.log", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return;
	struct stat st;
	char buf[AIRLOCK_IMAGE_LOG_IN_MESSAGE * 2];
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		off_t off = st.st_size > (off_t)sizeof(buf) ? st.st_size - (off_t)sizeof(buf) : 0;
		n = pread(fd, buf, sizeof(buf), off);
	}
	close(fd);
	if (n <= 0)
		return;
	char summary[AIRLOCK_IMAGE_LOG_IN_MESSAGE + 64];
	summarize_tail(buf, (size_t)n, AIRLOCK_IMAGE_LOG_IN_MESSAGE, summary, sizeof(summary));
	size_t used = strnlen(err->message, sizeof(err->message));
	if (used + 40 < sizeof(err->message))
		snprintf(err->message + used, sizeof(err->message) - used,
		         "; debootstrap.log ended with: %s", summary);
}

/* The build's steps after the tree directory exists; build_dir is
 * tmp/<build_name>, removed by the caller on every path. */
static int build_in(airlock_image_store *store, const char *build_name, int build_fd,
                    const airlock_image_build_options *opts, const char *packages,
                    const char *mirror, airlock_image_progress_fn progress, void *ctx,
                    char ret_hex[AIRLOCK_SHA256_HEX_LEN + 1], bool *ret_new, airlock_error *err)
{
	/* root/ is 0755 (the image's /), inside the 0700 build directory,
	 * which keeps everyone else out while the tree is being made. */
	if (mkdirat(build_fd, "root", 0755) < 0 || fchmodat(build_fd, "root", 0755, 0) < 0)
		return host_image_sys_error(err, errno, "image build: tree directory");
	_cleanup_free_ char *root_path = NULL, *image_path = NULL, *include = NULL,
	                    *keyring = NULL;
	if (asprintf(&root_path, "%s/tmp/%s/root", store->path, build_name) < 0 ||
	    asprintf(&image_path, "%s/tmp/%s/image.erofs", store->path, build_name) < 0 ||
	    asprintf(&include, "--include=%s", packages) < 0 ||
	    asprintf(&keyring, "--keyring=%s", AIRLOCK_IMAGE_KEYRING) < 0)
		return host_image_sys_error(err, ENOMEM, "image build");

	int r = host_image_store_path_check(store, err);
	if (r < 0)
		return r;
	int64_t timeout_s = opts && opts->debootstrap_timeout_seconds > 0 ?
	                            opts->debootstrap_timeout_seconds :
	                            AIRLOCK_IMAGE_DEBOOTSTRAP_TIMEOUT_SECONDS;
	progress_line(progress, ctx, "debootstrap: fetching and unpacking (this takes a few minutes)");
	/* --force-check-gpg with an explicit keyring: debootstrap fails rather
	 * than install packages whose Release signature it could not check. */
	const char *const debootstrap[] = { "debootstrap", "--variant=minbase", include, keyring,
		                            "--force-check-gpg", "--merged-usr",
		                            AIRLOCK_IMAGE_SUITE, root_path, mirror, NULL };
	r = run_program(debootstrap, true, timeout_s * 1000, "debootstrap", err);
	if (r < 0) {
		append_debootstrap_log(err, build_fd);
		airlock_error_prefix(err, "image build: ");
		return r;
	}

	_cleanup_close_ int root_fd = openat(build_fd, "root",
	                                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root_fd < 0)
		return host_image_sys_error(err, errno, "image build: tree");
	progress_line(progress, ctx,
	              "clean: apt lists and caches, logs, temporary files, device nodes, setuid bits, machine-id, host names");
	r = image_clean_tree(root_fd, err);
	if (r < 0)
		return r;
	progress_line(progress, ctx, "guest files: " AIRLOCK_GUEST_PROGRAM ", " AIRLOCK_GUEST_STATX_SHIM
	              ", " AIRLOCK_GUEST_PRELOAD);
	r = image_install_guest(root_fd, err);
	if (r < 0)
		return r;

	r = host_image_store_path_check(store, err);
	if (r < 0)
		return r;
	progress_line(progress, ctx, "mkfs.erofs");
	/* -T0: every timestamp 0; --all-root: the image is read-only and
	 * everything in it runs as the sandbox's unprivileged uid, so host
	 * ownership means nothing; -x-1: no xattrs, so no file capabilities;
	 * a fixed UUID. With those, the same tree gives the same bytes. */
	const char *const mkfs[] = { "mkfs.erofs", "--quiet", "-zlz4hc", "-T0", "--all-root",
		                     "-x-1", "-U", IMAGE_UUID, image_path, root_path, NULL };
	r = run_program(mkfs, false, (int64_t)AIRLOCK_IMAGE_MKFS_TIMEOUT_SECONDS * 1000,
	                "erofs-utils", err);
	if (r < 0) {
		airlock_error_prefix(err, "image build: ");
		return r;
	}

	/* Opened through the build directory's descriptor, O_NOFOLLOW: the file
	 * hashed and published is the one mkfs.erofs wrote. */
	_cleanup_close_ int img = openat(build_fd, "image.erofs", O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (img < 0)
		return host_image_sys_error(err, errno, "image build: image file");
	struct stat st;
	if (fstat(img, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "image build: mkfs.erofs left no image");
	progress_line(progress, ctx, "sha256");
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
	r = host_image_seal_tmp(img, hex, err);
	if (r < 0)
		return r;
	r = host_image_publish(store, build_fd, "image.erofs", hex, ret_new, err);
	if (r < 0)
		return r;
	r = write_sidecar(store, hex, packages, err);
	if (r < 0)
		return r;
	memcpy(ret_hex, hex, sizeof(hex));
	return 0;
}

/* Whether this process runs in the initial user namespace (its uid map is
 * the identity over the whole range). Root in another user namespace cannot
 * make device nodes, which debootstrap needs, and debootstrap's own message
 * for that blames a noexec mount. */
static bool initial_userns(void)
{
	_cleanup_close_ int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true; /* no /proc: let debootstrap say what is wrong */
	char buf[AIRLOCK_IMAGE_UID_MAP_READ_MAX];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return true;
	buf[n] = 0;
	unsigned long inside = 1, outside = 1, count = 0;
	if (sscanf(buf, "%lu %lu %lu", &inside, &outside, &count) != 3)
		return true;
	return inside == 0 && outside == 0 && count == 4294967295UL;
}

int airlock_image_build(airlock_image_store *store, const airlock_image_build_options *opts,
                        airlock_image_progress_fn progress, void *progress_ctx,
                        char ret_digest[AIRLOCK_IMAGE_DIGEST_SIZE], airlock_error *err)
{
	_cleanup_free_ char *packages = NULL;
	int r = image_package_list(opts, &packages, err);
	if (r < 0)
		return r;
	if (geteuid() != 0 || !initial_userns())
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "image build needs root%s: debootstrap creates device nodes, changes ownership and chroots",
		                         geteuid() == 0 ? " in the initial user namespace (this is root in a user namespace)" : "");
	if (access(AIRLOCK_IMAGE_KEYRING, R_OK) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "image build: the Debian archive keyring %s is missing (Debian package debian-archive-keyring); refusing to build from packages whose signatures cannot be checked",
		                         AIRLOCK_IMAGE_KEYRING);

	_cleanup_free_ char *mirror = NULL, *source = NULL;
	if (opts && opts->mirror) {
		r = mirror_check(opts->mirror, err);
		if (r < 0)
			return r;
		mirror = strdup(opts->mirror);
		source = strdup("given");
		if (!mirror || !source)
			return host_image_sys_error(err, ENOMEM, "image build");
	} else {
		r = airlock_image_find_mirror(opts ? opts->apt_dir : NULL, AIRLOCK_IMAGE_SUITE, &mirror,
		                              &source, err);
		if (r < 0) {
			airlock_error_prefix(err, "image build: ");
			return r;
		}
	}
	progress_line(progress, progress_ctx, "mirror: %s (%s)", mirror, source);
	progress_line(progress, progress_ctx, "packages: minbase + %s", packages);

	host_image_sweep_tmp(store);
	char build_name[64];
	r = host_image_random_name("build-", build_name, sizeof(build_name));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build");
	if (mkdirat(store->tmp_fd, build_name, 0700) < 0)
		return host_image_sys_error(err, errno, "image build: build directory");
	int build_fd = openat(store->tmp_fd, build_name,
	                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (build_fd < 0) {
		r = host_image_sys_error(err, errno, "image build: build directory");
		unlinkat(store->tmp_fd, build_name, AT_REMOVEDIR);
		return r;
	}
	/* Held for the whole build: if this process dies, the lock goes with
	 * it and the next build's sweep removes the tree. */
	flock(build_fd, LOCK_EX | LOCK_NB);
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
	bool fresh = false;
	r = build_in(store, build_name, build_fd, opts, packages, mirror, progress, progress_ctx,
	             hex, &fresh, err);
	close(build_fd);
	/* Every path: the tree and the build's files go. debootstrap ran in a
	 * private mount namespace that died with it, so nothing is mounted in
	 * the tree; the walk would refuse to cross a mount if something were. */
	int rr = host_tree_remove_at(store->tmp_fd, build_name);
	if (r < 0)
		return r;
	if (rr < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -rr,
		                         "image build: removing the build tree %s/tmp/%s", store->path,
		                         build_name);
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	host_image_digest_from_hex(hex, digest);
	progress_line(progress, progress_ctx, "%s %s", fresh ? "stored" : "already stored", digest);
	memcpy(ret_digest, digest, sizeof(digest));
	return 0;
}
