/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image store: EROFS images built from Debian packages and kept under
 * their SHA-256 (include/airlock/image.h has the contracts).
 *
 * Three rules run through this file:
 *   - a digest name is only ever created by linking a complete, fsynced file
 *     whose digest was computed from its bytes, never by writing in place;
 *   - every file-system operation is relative to a directory descriptor and
 *     refuses symlinks, so a path inside the store or the build tree cannot
 *     be redirected;
 *   - external programs run without a shell, from a fixed PATH, with a time
 *     limit, and everything they leave behind is removed on every path out.
 */
#include "airlock/image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "airlock/types.h"
#include "util/run.h"
#include "util/util.h"

#define SHA256_PREFIX "sha256:"
#define SHA256_PREFIX_LEN (sizeof(SHA256_PREFIX) - 1)
#define IMAGE_SUFFIX ".erofs"
#define SIDECAR_SUFFIX ".packages"

/* External programs are found here and nowhere else: the caller's PATH is
 * not consulted, so a directory an unprivileged user controls cannot supply
 * a "debootstrap" that we would then run as root. */
static const char *const fixed_path_dirs[] = { "/usr/sbin", "/usr/bin", "/sbin", "/bin" };
#define FIXED_PATH "/usr/sbin:/usr/bin:/sbin:/bin"

/* A fixed filesystem UUID makes two builds of the same tree byte-identical
 * (mkfs.erofs picks a random one otherwise). */
#define IMAGE_UUID "61697266-6c6f-636b-0000-000000000000"

#define VERIFY_CACHE_MAX 64
#define READ_CHUNK (1u << 20)
#define OUTPUT_TAIL_MAX 8192
#define OUTPUT_IN_MESSAGE 240
#define LOG_IN_MESSAGE 160
#define APT_FILE_MAX (1u << 20)
#define APT_FIELD_MAX 8192
#define APT_FILES_MAX 64
#define SIDECAR_MAX (64u * 1024u)
#define MIRROR_MAX 1024
#define TREE_DEPTH_MAX 256
/* Every tmp/ entry is flock()ed by its maker for as long as it works on it;
 * an entry at least this old whose lock can be taken belongs to a process
 * that died, and is removed. The age only covers the instant between
 * creating an entry and locking it. */
#define STALE_TMP_SECONDS 60

/* ---- small helpers -------------------------------------------------------- */

static int set_sys(airlock_error *err, int errnum, const char *what)
{
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errnum ? errnum : EIO, "%s", what);
}

static int random_name(const char *prefix, char *out, size_t size)
{
	unsigned char b[8];
	int r = util_random(b, sizeof(b));
	if (r < 0)
		return r;
	snprintf(out, size, "%s%02x%02x%02x%02x%02x%02x%02x%02x", prefix, b[0], b[1], b[2], b[3],
	         b[4], b[5], b[6], b[7]);
	return 0;
}

static int write_full(int fd, const void *data, size_t len)
{
	const unsigned char *p = data;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read a whole file through fd, at most max bytes; -EFBIG past it. */
static int read_capped(int fd, size_t max, char **ret, size_t *ret_len)
{
	util_buf b;
	util_buf_init(&b, max);
	char chunk[16384];
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			util_buf_clear(&b);
			return -e;
		}
		if (n == 0)
			break;
		int r = util_buf_append(&b, chunk, (size_t)n);
		if (r != 0) {
			util_buf_clear(&b);
			return r > 0 ? -EFBIG : r;
		}
	}
	size_t len = 0;
	unsigned char *data = util_buf_steal(&b, &len);
	if (!data)
		return -ENOMEM;
	*ret = (char *)data;
	*ret_len = len;
	return 0;
}

/* SHA-256 of everything fd holds, read with pread so the descriptor's
 * offset (which the caller may hand on) is not moved. */
static int hash_fd(int fd, char out[AIRLOCK_SHA256_HEX_LEN + 1])
{
	_cleanup_free_ unsigned char *buf = malloc(READ_CHUNK);
	if (!buf)
		return -ENOMEM;
	util_sha256 *h = util_sha256_new();
	if (!h)
		return -ENOMEM;
	off_t off = 0;
	for (;;) {
		ssize_t n = pread(fd, buf, READ_CHUNK, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			util_sha256_free(h);
			return -e;
		}
		if (n == 0)
			break;
		int r = util_sha256_update(h, buf, (size_t)n);
		if (r < 0) {
			util_sha256_free(h);
			return r;
		}
		off += n;
	}
	return util_sha256_final_hex(h, out);
}

/* A directory stream over dfd's directory with its own file offset. A
 * dup() of dfd would share the offset, so a second listing through another
 * dup would start where the first one ended and see nothing. */
static DIR *dir_stream(int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return d;
}

static bool timespec_eq(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* ---- the store ------------------------------------------------------------ */

typedef struct verify_entry {
	bool used;
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtim, ctim;
	uint64_t stamp;
} verify_entry;

struct airlock_image_store {
	char *path; /* canonical, absolute */
	int dir_fd; /* the store */
	int sha_fd; /* sha256/ */
	int tmp_fd; /* tmp/ */
	dev_t dev;  /* of the store directory, to re-check its path */
	ino_t ino;
	pthread_mutex_t lock; /* guards cache, stamp and hashes */
	verify_entry cache[VERIFY_CACHE_MAX];
	uint64_t stamp;
	uint64_t hashes;
};

/* The store and its subdirectories: a directory, ours, writable by no one
 * else. Read access for others is allowed: images are not secret, and
 * reading one cannot change what a digest names. */
static int check_store_dir(int fd, const char *what, airlock_error *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store %s", what);
	if (!S_ISDIR(st.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "image store %s is not a directory",
		                         what);
	if (st.st_uid != geteuid())
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "image store %s is owned by uid %u, not by this process's uid %u: a store someone else can write is a supply-chain hole (they could put any image under a digest name)",
		                         what, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "image store %s is writable by %s (mode %04o): a store someone else can write is a supply-chain hole (they could put any image under a digest name); chmod 0700 it",
		                         what, (st.st_mode & S_IWOTH) ? "everyone" : "its group",
		                         (unsigned)(st.st_mode & 07777));
	return 0;
}

/* mkdir -p: missing parents 0755, the store itself 0700. Existing
 * directories are left as they are; their owner and mode are checked
 * afterwards, never repaired. */
static int mkdir_parents(const char *dir, airlock_error *err)
{
	_cleanup_free_ char *p = strdup(dir);
	if (!p)
		return set_sys(err, ENOMEM, "image store");
	size_t len = strlen(p);
	while (len > 1 && p[len - 1] == '/')
		p[--len] = 0;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
			                         "image store: cannot create %s", p);
		*s = '/';
	}
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store: cannot create %s",
		                         p);
	return 0;
}

/* Every ancestor of the canonical store path must be owned by root or by
 * us, and writable by no one else unless sticky: otherwise its owner or
 * writers could rename the store away and put their own in its place before
 * a path-based step (debootstrap, mkfs.erofs) runs. */
static int check_ancestors(const char *canon, airlock_error *err)
{
	_cleanup_free_ char *p = strdup(canon);
	if (!p)
		return set_sys(err, ENOMEM, "image store");
	for (;;) {
		char *slash = strrchr(p, '/');
		if (!slash || (slash == p && p[1] == 0))
			break;
		if (slash == p)
			p[1] = 0;
		else
			*slash = 0;
		struct stat st;
		if (lstat(p, &st) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store: %s", p);
		if (st.st_uid != 0 && st.st_uid != geteuid())
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "image store %s: its parent directory %s is owned by uid %u, who could replace the store; a store someone else can write is a supply-chain hole",
			                         canon, p, (unsigned)st.st_uid);
		if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "image store %s: its parent directory %s is writable by others (mode %04o) without the sticky bit, so they could replace the store; a store someone else can write is a supply-chain hole",
			                         canon, p, (unsigned)(st.st_mode & 07777));
	}
	return 0;
}

static int open_subdir(int parent, const char *name, const char *what, int *ret,
                       airlock_error *err)
{
	if (mkdirat(parent, name, 0700) < 0 && errno != EEXIST)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store %s", what);
	/* O_NOFOLLOW: a symlink planted as sha256/ would point the store at a
	 * directory nobody checked. */
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP || e == ENOTDIR)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "image store %s is not a directory (or is a symlink)", what);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "image store %s", what);
	}
	int r = check_store_dir(fd, what, err);
	if (r < 0) {
		close(fd);
		return r;
	}
	*ret = fd;
	return 0;
}

void airlock_image_store_free(airlock_image_store *store)
{
	if (!store)
		return;
	util_closep(&store->dir_fd);
	util_closep(&store->sha_fd);
	util_closep(&store->tmp_fd);
	pthread_mutex_destroy(&store->lock);
	free(store->path);
	free(store);
}

int airlock_image_store_open(const char *dir, airlock_image_store **ret, airlock_error *err)
{
	if (!dir || !*dir)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "image store: no directory given");
	int r = mkdir_parents(dir, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *canon = realpath(dir, NULL);
	if (!canon)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store %s", dir);
	r = check_ancestors(canon, err);
	if (r < 0)
		return r;

	airlock_image_store *s = calloc(1, sizeof(*s));
	if (!s)
		return set_sys(err, ENOMEM, "image store");
	s->dir_fd = s->sha_fd = s->tmp_fd = -1;
	if (pthread_mutex_init(&s->lock, NULL) != 0) {
		free(s);
		return set_sys(err, ENOMEM, "image store lock");
	}
	/* The canonical path has no symlinks left, so O_NOFOLLOW only refuses
	 * one swapped in since realpath. */
	s->dir_fd = open(canon, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s->dir_fd < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store %s", canon);
		goto fail;
	}
	r = check_store_dir(s->dir_fd, canon, err);
	if (r < 0)
		goto fail;
	struct stat st;
	if (fstat(s->dir_fd, &st) < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store %s", canon);
		goto fail;
	}
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	char what[PATH_MAX + 16];
	snprintf(what, sizeof(what), "%s/sha256", canon);
	r = open_subdir(s->dir_fd, "sha256", what, &s->sha_fd, err);
	if (r < 0)
		goto fail;
	snprintf(what, sizeof(what), "%s/tmp", canon);
	r = open_subdir(s->dir_fd, "tmp", what, &s->tmp_fd, err);
	if (r < 0)
		goto fail;
	s->path = TAKE_PTR(canon);
	*ret = s;
	return 0;
fail:
	airlock_image_store_free(s);
	return r;
}

const char *airlock_image_store_path(const airlock_image_store *store)
{
	return store->path;
}

uint64_t airlock_image_store_hash_count(airlock_image_store *store)
{
	pthread_mutex_lock(&store->lock);
	uint64_t n = store->hashes;
	pthread_mutex_unlock(&store->lock);
	return n;
}

/* The store's path still names the directory we opened (checked before a
 * path is handed to an external program). */
static int store_path_check(airlock_image_store *store, airlock_error *err)
{
	struct stat st;
	if (lstat(store->path, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store %s", store->path);
	if (!S_ISDIR(st.st_mode) || st.st_dev != store->dev || st.st_ino != store->ino)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "image store %s was replaced while open; refusing to build into it",
		                         store->path);
	return 0;
}

/* ---- removing a tree, safely ------------------------------------------------
 * The build tree is a root-owned Debian system. Removing it must never
 * follow a symlink out of it (/etc/alternatives, /bin -> usr/bin) nor
 * descend into a file system mounted inside it: every entry is looked at
 * with AT_SYMLINK_NOFOLLOW, directories are opened O_DIRECTORY|O_NOFOLLOW
 * (a directory swapped for a symlink fails to open) and checked to be on the
 * tree's root's mount (device and mount id: a bind mount of the same file
 * system is still another mount), and entries are removed with unlinkat on
 * the parent's descriptor. */

typedef struct tree_id {
	dev_t dev;
	uint64_t mnt_id;
	bool have_mnt_id;
} tree_id;

static int tree_id_of(int fd, const char *name, int flags, tree_id *ret, struct statx *ret_stx)
{
	struct statx stx;
	if (statx(fd, name, flags | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
	          STATX_TYPE | STATX_MODE | STATX_INO | STATX_MNT_ID | STATX_MTIME, &stx) < 0)
		return -errno;
	ret->dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
	ret->have_mnt_id = (stx.stx_mask & STATX_MNT_ID) != 0;
	ret->mnt_id = stx.stx_mnt_id;
	if (ret_stx)
		*ret_stx = stx;
	return 0;
}

static bool tree_same_mount(const tree_id *a, const tree_id *b)
{
	if (a->dev != b->dev)
		return false;
	return !(a->have_mnt_id && b->have_mnt_id) || a->mnt_id == b->mnt_id;
}

/* Open the subdirectory name of dfd without following a symlink, check it is
 * on the tree's mount, and return its descriptor. -EXDEV for a mount point. */
static int tree_open_dir(int dfd, const char *name, const tree_id *root)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	tree_id id;
	int r = tree_id_of(fd, "", AT_EMPTY_PATH, &id, NULL);
	if (r < 0 || !tree_same_mount(&id, root)) {
		close(fd);
		return r < 0 ? r : -EXDEV;
	}
	return fd;
}

static int tree_remove_contents(int dfd, const tree_id *root, unsigned depth);

/* Remove dfd/name, whatever it is. Returns 0 or the first error (the rest of
 * the tree is still removed where possible). */
static int tree_remove_entry(int dfd, const char *name, const tree_id *root, unsigned depth)
{
	struct statx stx;
	tree_id id;
	int r = tree_id_of(dfd, name, 0, &id, &stx);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (!S_ISDIR(stx.stx_mode))
		return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	if (depth >= TREE_DEPTH_MAX)
		return -ELOOP;
	int cfd = tree_open_dir(dfd, name, root);
	if (cfd < 0)
		return cfd;
	r = tree_remove_contents(cfd, root, depth + 1);
	close(cfd);
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
		r = -errno;
	return r;
}

static int tree_remove_contents(int dfd, const tree_id *root, unsigned depth)
{
	int first = 0;
	/* Removing entries while reading the directory may make readdir skip
	 * some; passes repeat until one finds nothing it could remove. */
	for (int pass = 0; pass < 8; pass++) {
		DIR *d = dir_stream(dfd);
		if (!d)
			return -errno;
		size_t removed = 0, failed = 0;
		struct dirent *de;
		errno = 0;
		while ((de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			int r = tree_remove_entry(dfd, de->d_name, root, depth);
			if (r < 0) {
				failed++;
				if (first == 0)
					first = r;
			} else {
				removed++;
			}
			errno = 0;
		}
		int e = errno;
		closedir(d);
		if (e && first == 0)
			first = -e;
		if (failed > 0 || removed == 0)
			break;
	}
	return first;
}

/* Remove parent/name recursively, on parent's mount only. */
static int tree_remove_at(int parent, const char *name)
{
	tree_id root;
	int r = tree_id_of(parent, "", AT_EMPTY_PATH, &root, NULL);
	if (r < 0)
		return r;
	return tree_remove_entry(parent, name, &root, 0);
}

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

#define PROG_ENV_MAX 16
#define PROG_ENV_VALUE_MAX 2048

typedef struct prog_env {
	char storage[PROG_ENV_MAX][PROG_ENV_VALUE_MAX];
	char *envp[PROG_ENV_MAX + 1];
} prog_env;

static void prog_env_build(prog_env *e)
{
	size_t n = 0;
	static const char *const fixed[] = { ("PATH=" FIXED_PATH), "LC_ALL=C", "HOME=/root",
		                             "DEBIAN_FRONTEND=noninteractive" };
	for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
		snprintf(e->storage[n++], PROG_ENV_VALUE_MAX, "%s", fixed[i]);
	for (size_t i = 0; i < ARRAY_SIZE(passed_env) && n < PROG_ENV_MAX; i++) {
		const char *v = getenv(passed_env[i]);
		if (!v)
			continue;
		/* A value too long to keep whole is left out, never cut short. */
		int k = snprintf(e->storage[n], PROG_ENV_VALUE_MAX, "%s=%s", passed_env[i], v);
		if (k > 0 && k < PROG_ENV_VALUE_MAX)
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
		return set_sys(err, ENOMEM, "program environment");
	prog_env_build(env);

	const util_run_options o = {
		.path = path,
		.argv = vec,
		.envp = env->envp,
		.output_max = OUTPUT_TAIL_MAX,
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
		return set_sys(err, -r, res.failed);
	char summary[OUTPUT_IN_MESSAGE + 64];
	summarize_tail(res.output, res.output_len, OUTPUT_IN_MESSAGE, summary, sizeof(summary));
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
		                         "%s exited with status %d%s; its output ended with: %s", argv[0],
		                         code,
		                         code == UTIL_RUN_EXIT_NO_MOUNT_NS ?
		                                 " (no private mount namespace: needs CAP_SYS_ADMIN)" :
		                         code == UTIL_RUN_EXIT_SETUP ? " (could not set up the child)" :
		                         code == UTIL_RUN_EXIT_EXEC  ? " (could not execute it)" :
		                                                       "",
		                         summary);
	}
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
	                         "%s was killed by signal %d; its output ended with: %s", argv[0],
	                         WIFSIGNALED(status) ? WTERMSIG(status) : 0, summary);
}

/* ---- publishing a file under its digest ----------------------------------------- */

static void digest_from_hex(const char *hex, char out[AIRLOCK_IMAGE_DIGEST_SIZE])
{
	snprintf(out, AIRLOCK_IMAGE_DIGEST_SIZE, SHA256_PREFIX "%s", hex);
}

static void image_name(const char *hex, char *out, size_t size)
{
	snprintf(out, size, "%s" IMAGE_SUFFIX, hex);
}

static int verify_open(airlock_image_store *store, const char *hex, int *ret_fd,
                       airlock_error *err);
static void sweep_stale_tmp(airlock_image_store *store);

/*
 * Give src_dir/src_name (complete, fsynced, 0444, hashing to hex; under the
 * store's tmp/) its digest name. linkat never replaces an existing name, so a concurrent publisher
 * of the same digest cannot be overwritten and no reader ever sees a
 * partial file. When the name exists and its file still verifies, it is
 * kept (same bytes by definition); when it no longer does, it was altered
 * or damaged after it was stored and the fresh copy replaces it with an
 * atomic rename. *ret_new says whether this call stored the bytes. The
 * source name is removed in every case.
 */
static int publish(airlock_image_store *store, int src_dir, const char *src_name, const char *hex,
                   bool *ret_new, airlock_error *err)
{
	char final[AIRLOCK_SHA256_HEX_LEN + sizeof(IMAGE_SUFFIX)];
	image_name(hex, final, sizeof(final));
	int r = 0;
	bool fresh = false;
	if (linkat(src_dir, src_name, store->sha_fd, final, 0) == 0) {
		fresh = true;
	} else if (errno == EEXIST) {
		airlock_error verr = { 0 };
		int fd = -1;
		r = verify_open(store, hex, &fd, &verr);
		if (r == 0) {
			close(fd);
		} else if (airlock_errcode_class(r) == AIRLOCK_ERR_EXECUTION_REJECTED) {
			if (renameat(src_dir, src_name, store->sha_fd, final) < 0)
				r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
				                      "image store: replacing the damaged sha256:%s", hex);
			else
				r = 0, fresh = true;
		} else if (err) {
			*err = verr;
		}
	} else {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store: storing sha256:%s",
		                      hex);
	}
	unlinkat(src_dir, src_name, 0);
	if (r == 0 && fresh && fsync(store->sha_fd) < 0)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image store: fsync sha256/");
	if (r == 0 && ret_new)
		*ret_new = fresh;
	return r;
}

/* fsync, hash, make read-only: the steps between writing a temporary image
 * and publishing it. The hash is of the bytes on disk after fsync, read
 * back through the same descriptor. */
static int seal_tmp(int fd, char hex[AIRLOCK_SHA256_HEX_LEN + 1], airlock_error *err)
{
	if (fsync(fd) < 0)
		return set_sys(err, errno, "image store: fsync");
	int r = hash_fd(fd, hex);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image store: hashing");
	if (fchmod(fd, 0444) < 0)
		return set_sys(err, errno, "image store: chmod 0444");
	return 0;
}

int airlock_image_import(airlock_image_store *store, int fd,
                         char ret_digest[AIRLOCK_IMAGE_DIGEST_SIZE], airlock_error *err)
{
	char tmp_name[64];
	int r = random_name("import-", tmp_name, sizeof(tmp_name));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image import");
	sweep_stale_tmp(store);
	/* tmp/ is ours and 0700; O_EXCL|O_NOFOLLOW makes sure the name is a
	 * new file of ours and not something planted under it. */
	_cleanup_close_ int out = openat(store->tmp_fd, tmp_name,
	                                 O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image import: temporary file");
	/* Held until the descriptor closes: a sweep by another process leaves
	 * the file alone while we live (see STALE_TMP_SECONDS). */
	flock(out, LOCK_EX | LOCK_NB);
	_cleanup_free_ unsigned char *buf = malloc(READ_CHUNK);
	if (!buf) {
		r = set_sys(err, ENOMEM, "image import");
		goto fail;
	}
	for (;;) {
		ssize_t n = read(fd, buf, READ_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image import: reading");
			goto fail;
		}
		if (n == 0)
			break;
		r = write_full(out, buf, (size_t)n);
		if (r < 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image import: writing");
			goto fail;
		}
	}
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
	r = seal_tmp(out, hex, err);
	if (r < 0)
		goto fail;
	r = publish(store, store->tmp_fd, tmp_name, hex, NULL, err);
	if (r < 0)
		return r;
	digest_from_hex(hex, ret_digest);
	return 0;
fail:
	unlinkat(store->tmp_fd, tmp_name, 0);
	return r;
}

/* ---- verification ------------------------------------------------------------- */

static verify_entry *cache_find(airlock_image_store *store, const char *hex)
{
	for (size_t i = 0; i < VERIFY_CACHE_MAX; i++)
		if (store->cache[i].used && strcmp(store->cache[i].hex, hex) == 0)
			return &store->cache[i];
	return NULL;
}

static bool cache_matches(const verify_entry *e, const struct stat *st)
{
	return e->dev == st->st_dev && e->ino == st->st_ino && e->size == st->st_size &&
	       timespec_eq(&e->mtim, &st->st_mtim) && timespec_eq(&e->ctim, &st->st_ctim);
}

static void cache_store(airlock_image_store *store, const char *hex, const struct stat *st)
{
	verify_entry *e = cache_find(store, hex);
	if (!e) {
		e = &store->cache[0];
		for (size_t i = 0; i < VERIFY_CACHE_MAX; i++) {
			if (!store->cache[i].used) {
				e = &store->cache[i];
				break;
			}
			if (store->cache[i].stamp < e->stamp)
				e = &store->cache[i];
		}
	}
	*e = (verify_entry){ .used = true, .dev = st->st_dev, .ino = st->st_ino,
		             .size = st->st_size, .mtim = st->st_mtim, .ctim = st->st_ctim,
		             .stamp = ++store->stamp };
	memcpy(e->hex, hex, sizeof(e->hex));
}

static void cache_drop(airlock_image_store *store, const char *hex)
{
	verify_entry *e = cache_find(store, hex);
	if (e)
		e->used = false;
}

/* Open sha256/<hex>.erofs and check its bytes hash to hex (see the header). */
static int verify_open(airlock_image_store *store, const char *hex, int *ret_fd,
                       airlock_error *err)
{
	char name[AIRLOCK_SHA256_HEX_LEN + sizeof(IMAGE_SUFFIX)];
	image_name(hex, name, sizeof(name));
	/* O_NOFOLLOW: the digest name must be the file itself, not a pointer
	 * to one somewhere else. */
	_cleanup_close_ int fd = openat(store->sha_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == ENOENT)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "image sha256:%s is not in the image store: build it with `airlock image build` or import it",
			                         hex);
		if (errno == ELOOP)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "image sha256:%s: the store holds a symlink under its name, not an image; refusing it",
			                         hex);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image sha256:%s", hex);
	}
	struct stat before;
	if (fstat(fd, &before) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image sha256:%s", hex);
	if (!S_ISREG(before.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "image sha256:%s: the store holds something that is not a regular file under its name; refusing it",
		                         hex);

	pthread_mutex_lock(&store->lock);
	verify_entry *e = cache_find(store, hex);
	bool cached = e && cache_matches(e, &before);
	if (!cached)
		store->hashes++;
	pthread_mutex_unlock(&store->lock);
	if (cached) {
		*ret_fd = TAKE_FD(fd);
		return 0;
	}

	/* Hashed outside the lock: a few hundred megabytes take a while, and
	 * other images' opens must not wait behind it. */
	char got[AIRLOCK_SHA256_HEX_LEN + 1];
	int r = hash_fd(fd, got);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image sha256:%s: hashing", hex);
	struct stat after;
	if (fstat(fd, &after) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "image sha256:%s", hex);

	pthread_mutex_lock(&store->lock);
	if (strcmp(got, hex) != 0 || !timespec_eq(&before.st_ctim, &after.st_ctim) ||
	    before.st_size != after.st_size) {
		cache_drop(store, hex);
		pthread_mutex_unlock(&store->lock);
		if (strcmp(got, hex) != 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "image sha256:%s was altered after it was stored: its content hashes to sha256:%s; refusing it (rebuild or re-import it)",
			                         hex, got);
		/* Changed while we read it: what we hashed is not a file that
		 * existed at any one moment, so it proves nothing. */
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "image sha256:%s changed while it was being verified; refusing it",
		                         hex);
	}
	cache_store(store, hex, &after);
	pthread_mutex_unlock(&store->lock);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* A digest argument: "sha256:<64 lowercase hex>" or a refusal that says
 * why. Writes the hex part to hex. */
static int digest_check(const char *digest, char hex[AIRLOCK_SHA256_HEX_LEN + 1],
                        airlock_error *err)
{
	if (!digest)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "no image digest given: images are named by digest (sha256:<64 lowercase hex>)");
	if (!airlock_image_digest_valid(digest)) {
		char shown[96];
		size_t n = strnlen(digest, 80);
		size_t o = 0;
		for (size_t i = 0; i < n && o + 1 < sizeof(shown); i++)
			shown[o++] = ((unsigned char)digest[i] >= 0x20 && digest[i] != 0x7f) ? digest[i] : '?';
		shown[o] = 0;
		if (strncmp(digest, SHA256_PREFIX, SHA256_PREFIX_LEN) == 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "image \"%s\" is not a valid digest: expected sha256: followed by 64 lowercase hex digits",
			                         shown);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "image \"%s\" is a tag, not a digest: images are named by digest (sha256:<64 lowercase hex>), because a tag is a mutable pointer and an image that changes underneath a tenant is a supply-chain hole",
		                         shown);
	}
	memcpy(hex, digest + SHA256_PREFIX_LEN, AIRLOCK_SHA256_HEX_LEN + 1);
	return 0;
}

int airlock_image_open_verified(airlock_image_store *store, const char *digest, int *ret_fd,
                                airlock_error *err)
{
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
	int r = digest_check(digest, hex, err);
	if (r < 0)
		return r;
	return verify_open(store, hex, ret_fd, err);
}

/* ---- listing ------------------------------------------------------------------ */

/* "<64 hex><suffix>" exactly; writes the hex. */
static bool name_is(const char *name, const char *suffix, char hex[AIRLOCK_SHA256_HEX_LEN + 1])
{
	size_t sl = strlen(suffix);
	if (strlen(name) != AIRLOCK_SHA256_HEX_LEN + sl ||
	    strcmp(name + AIRLOCK_SHA256_HEX_LEN, suffix) != 0)
		return false;
	memcpy(hex, name, AIRLOCK_SHA256_HEX_LEN);
	hex[AIRLOCK_SHA256_HEX_LEN] = 0;
	return airlock_sha256_hex_valid(hex);
}

/* Read sha256/<hex>.packages: the suite and package list a build recorded.
 * 0 with both NULL when there is none. */
static int sidecar_read(airlock_image_store *store, const char *hex, char **ret_suite,
                        char **ret_packages, unsigned *ret_recipe)
{
	char name[AIRLOCK_SHA256_HEX_LEN + sizeof(SIDECAR_SUFFIX)];
	snprintf(name, sizeof(name), "%s" SIDECAR_SUFFIX, hex);
	_cleanup_close_ int fd = openat(store->sha_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	*ret_suite = *ret_packages = NULL;
	*ret_recipe = 0;
	if (fd < 0)
		return errno == ENOENT || errno == ELOOP ? 0 : -errno;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = read_capped(fd, SIDECAR_MAX, &text, &len);
	if (r < 0)
		return r;
	if (memchr(text, 0, len))
		return 0;
	_cleanup_free_ char *suite = NULL, *packages = NULL;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char **slot = NULL;
		const char *value = NULL;
		if (strncmp(line, "recipe: ", 8) == 0) {
			int64_t v = 0;
			if (util_parse_i64(line + 8, &v) && v > 0 && v < 1000000)
				*ret_recipe = (unsigned)v;
			continue;
		}
		if (strncmp(line, "suite: ", 7) == 0)
			slot = &suite, value = line + 7;
		else if (strncmp(line, "packages: ", 10) == 0)
			slot = &packages, value = line + 10;
		if (!slot || *slot)
			continue;
		*slot = strdup(value);
		if (!*slot)
			return -ENOMEM;
	}
	if (!suite || !packages)
		return 0;
	*ret_suite = TAKE_PTR(suite);
	*ret_packages = TAKE_PTR(packages);
	return 0;
}

void airlock_image_list_free(airlock_image_info *infos, size_t n)
{
	if (!infos)
		return;
	for (size_t i = 0; i < n; i++) {
		free(infos[i].suite);
		free(infos[i].packages);
	}
	free(infos);
}

static int info_cmp(const void *a, const void *b)
{
	const airlock_image_info *x = a, *y = b;
	if (x->mtime_ms != y->mtime_ms)
		return x->mtime_ms > y->mtime_ms ? -1 : 1;
	return strcmp(x->digest, y->digest);
}

int airlock_image_list(airlock_image_store *store, airlock_image_info **ret_infos, size_t *ret_n,
                       airlock_error *err)
{
	DIR *d = dir_stream(store->sha_fd);
	if (!d)
		return set_sys(err, errno, "image store: sha256/");
	airlock_image_info *infos = NULL;
	size_t n = 0, alloc = 0;
	int r = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		char hex[AIRLOCK_SHA256_HEX_LEN + 1];
		struct stat st;
		if (!name_is(de->d_name, IMAGE_SUFFIX, hex) ||
		    fstatat(store->sha_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode)) {
			errno = 0;
			continue;
		}
		if (n == alloc) {
			size_t na = alloc ? alloc * 2 : 16;
			airlock_image_info *p = realloc(infos, na * sizeof(*p));
			if (!p) {
				r = set_sys(err, ENOMEM, "image list");
				goto out;
			}
			infos = p;
			alloc = na;
		}
		airlock_image_info *info = &infos[n];
		*info = (airlock_image_info){ .size_bytes = st.st_size,
			                      .mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 +
			                                  st.st_mtim.tv_nsec / 1000000 };
		digest_from_hex(hex, info->digest);
		n++;
		r = sidecar_read(store, hex, &info->suite, &info->packages, &info->recipe);
		if (r < 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image list: sha256:%s sidecar",
			                      hex);
			goto out;
		}
		errno = 0;
	}
	if (errno) {
		r = set_sys(err, errno, "image store: reading sha256/");
		goto out;
	}
	if (n > 1)
		qsort(infos, n, sizeof(*infos), info_cmp);
out:
	closedir(d);
	if (r < 0) {
		airlock_image_list_free(infos, n);
		return r;
	}
	if (n == 0) {
		free(infos);
		infos = NULL;
	}
	*ret_infos = infos;
	*ret_n = n;
	return 0;
}

/* ---- package lists ---------------------------------------------------------------- */

/* Debian policy 5.6.1: lowercase letters, digits, + - ., at least two
 * characters, starting with an alphanumeric. Nothing here can start with a
 * dash (an option to debootstrap) or carry a comma (a second package). */
static bool package_name_valid(const char *p)
{
	size_t n = strnlen(p, AIRLOCK_IMAGE_PACKAGE_NAME_MAX + 1);
	if (n < 2 || n > AIRLOCK_IMAGE_PACKAGE_NAME_MAX)
		return false;
	if (!((p[0] >= 'a' && p[0] <= 'z') || (p[0] >= '0' && p[0] <= '9')))
		return false;
	for (size_t i = 1; i < n; i++) {
		char c = p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' ||
		      c == '.'))
			return false;
	}
	return true;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The default packages plus the extras, sorted and without repeats, joined
 * with commas: the --include argument and the sidecar's record. */
static int package_list(const airlock_image_build_options *opts, char **ret, airlock_error *err)
{
	size_t n_extra = opts ? opts->n_extra_packages : 0;
	if (n_extra > AIRLOCK_IMAGE_EXTRA_PACKAGES_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "image build: %zu extra packages is more than the %d allowed",
		                         n_extra, AIRLOCK_IMAGE_EXTRA_PACKAGES_MAX);
	_cleanup_free_ char *defaults = strdup(AIRLOCK_IMAGE_DEFAULT_PACKAGES);
	_cleanup_free_ const char **names = calloc(n_extra + 64, sizeof(*names));
	if (!defaults || !names)
		return set_sys(err, ENOMEM, "image build");
	size_t n = 0;
	char *save = NULL;
	for (char *t = strtok_r(defaults, ",", &save); t && n < 64; t = strtok_r(NULL, ",", &save))
		names[n++] = t;
	for (size_t i = 0; i < n_extra; i++) {
		const char *p = opts->extra_packages[i];
		if (!p || !package_name_valid(p)) {
			char shown[64];
			size_t o = 0;
			for (size_t k = 0; p && p[k] && o + 1 < sizeof(shown); k++)
				shown[o++] = ((unsigned char)p[k] >= 0x20 && p[k] != 0x7f) ? p[k] : '?';
			shown[o] = 0;
			return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
			                         "image build: \"%s\" is not a Debian package name (lowercase letters, digits, '+', '-', '.'; at least two characters, starting with a letter or digit)",
			                         shown);
		}
		names[n++] = p;
	}
	qsort(names, n, sizeof(*names), str_cmp);
	size_t total = 1;
	for (size_t i = 0; i < n; i++)
		total += strlen(names[i]) + 1;
	char *out = malloc(total);
	if (!out)
		return set_sys(err, ENOMEM, "image build");
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
			continue;
		if (o > 0)
			out[o++] = ',';
		size_t l = strlen(names[i]);
		memcpy(out + o, names[i], l);
		o += l;
	}
	out[o] = 0;
	*ret = out;
	return 0;
}

static int sidecar_text(const char *packages, char **ret)
{
	char *text = NULL;
	if (asprintf(&text, "recipe: %u\nsuite: %s\npackages: %s\n", AIRLOCK_IMAGE_RECIPE,
	             AIRLOCK_IMAGE_SUITE, packages) < 0)
		return -ENOMEM;
	*ret = text;
	return 0;
}

int airlock_image_find_built(airlock_image_store *store, const airlock_image_build_options *opts,
                             char ret_digest[AIRLOCK_IMAGE_DIGEST_SIZE], airlock_error *err)
{
	_cleanup_free_ char *packages = NULL;
	int r = package_list(opts, &packages, err);
	if (r < 0)
		return r;
	airlock_image_info *infos = NULL;
	size_t n = 0;
	r = airlock_image_list(store, &infos, &n, err);
	if (r < 0)
		return r;
	/* Newest first: the most recent build of this list wins. */
	int found = 0;
	for (size_t i = 0; i < n && !found; i++) {
		if (infos[i].suite && infos[i].packages && infos[i].recipe == AIRLOCK_IMAGE_RECIPE &&
		    strcmp(infos[i].suite, AIRLOCK_IMAGE_SUITE) == 0 &&
		    strcmp(infos[i].packages, packages) == 0) {
			memcpy(ret_digest, infos[i].digest, AIRLOCK_IMAGE_DIGEST_SIZE);
			found = 1;
		}
	}
	airlock_image_list_free(infos, n);
	return found;
}

int airlock_image_find_default(airlock_image_store *store,
                               char ret_digest[AIRLOCK_IMAGE_DIGEST_SIZE], airlock_error *err)
{
	return airlock_image_find_built(store, NULL, ret_digest, err);
}

/* ---- apt sources ---------------------------------------------------------------- */

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Does the whitespace-separated list hold word exactly? */
static bool words_contain(const char *list, const char *word)
{
	size_t wl = strlen(word);
	const char *p = list;
	while (*p) {
		while (*p && (is_space(*p) || *p == '\n'))
			p++;
		const char *s = p;
		while (*p && !is_space(*p) && *p != '\n')
			p++;
		if ((size_t)(p - s) == wl && wl > 0 && strncmp(s, word, wl) == 0)
			return true;
	}
	return false;
}

static bool ascii_ieq(const char *a, size_t an, const char *b)
{
	size_t bn = strlen(b);
	if (an != bn)
		return false;
	for (size_t i = 0; i < an; i++) {
		char x = a[i], y = b[i];
		if (x >= 'A' && x <= 'Z')
			x = (char)(x - 'A' + 'a');
		if (y >= 'A' && y <= 'Z')
			y = (char)(y - 'A' + 'a');
		if (x != y)
			return false;
	}
	return true;
}

/* A URI debootstrap can fetch from: http, https or file, printable ASCII
 * without spaces or quotes, bounded. Returns a malloc'd copy without a
 * trailing slash, or NULL (unusable, or ENOMEM with *oom set). */
static char *usable_uri(const char *s, size_t n, bool *oom)
{
	if (n == 0 || n > MIRROR_MAX)
		return NULL;
	if (!(n > 7 && strncmp(s, "http://", 7) == 0) && !(n > 8 && strncmp(s, "https://", 8) == 0) &&
	    !(n > 6 && strncmp(s, "file:/", 6) == 0))
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\'' || c == '\\')
			return NULL;
	}
	while (n > 1 && s[n - 1] == '/' && s[n - 2] != '/')
		n--;
	char *u = strndup(s, n);
	if (!u)
		*oom = true;
	return u;
}

static char *first_usable_uri(const char *list, bool *oom)
{
	const char *p = list;
	while (*p) {
		while (*p && (is_space(*p) || *p == '\n'))
			p++;
		const char *s = p;
		while (*p && !is_space(*p) && *p != '\n')
			p++;
		if (p > s) {
			char *u = usable_uri(s, (size_t)(p - s), oom);
			if (u || *oom)
				return u;
		}
	}
	return NULL;
}

typedef struct deb822_stanza {
	util_buf types, uris, suites, enabled;
	bool any;
} deb822_stanza;

static void stanza_reset(deb822_stanza *st)
{
	util_buf_clear(&st->types);
	util_buf_clear(&st->uris);
	util_buf_clear(&st->suites);
	util_buf_clear(&st->enabled);
	util_buf_init(&st->types, APT_FIELD_MAX);
	util_buf_init(&st->uris, APT_FIELD_MAX);
	util_buf_init(&st->suites, APT_FIELD_MAX);
	util_buf_init(&st->enabled, 64);
	st->any = false;
}

static const char *buf_str(const util_buf *b)
{
	return b->data ? (const char *)b->data : "";
}

/* 1 with *ret when the stanza serves suite, 0 when not, -ENOMEM. */
static int stanza_match(const deb822_stanza *st, const char *suite, char **ret)
{
	if (!st->any)
		return 0;
	const char *enabled = buf_str(&st->enabled);
	while (is_space(*enabled))
		enabled++;
	if (ascii_ieq(enabled, strcspn(enabled, " \t\r\n"), "no"))
		return 0;
	if (!words_contain(buf_str(&st->types), "deb") || !words_contain(buf_str(&st->suites), suite))
		return 0;
	bool oom = false;
	char *u = first_usable_uri(buf_str(&st->uris), &oom);
	if (oom)
		return -ENOMEM;
	if (!u)
		return 0;
	*ret = u;
	return 1;
}

static void stanza_free(deb822_stanza *st)
{
	util_buf_clear(&st->types);
	util_buf_clear(&st->uris);
	util_buf_clear(&st->suites);
	util_buf_clear(&st->enabled);
}

static int parse_deb822(const char *buf, size_t len, const char *suite, char **ret)
{
	deb822_stanza st = { 0 };
	stanza_reset(&st);
	util_buf *field = NULL; /* the field a continuation line extends */
	int r = 0;
	size_t pos = 0;
	while (pos < len && r == 0) {
		size_t end = pos;
		while (end < len && buf[end] != '\n')
			end++;
		const char *line = buf + pos;
		size_t n = end - pos;
		pos = end + 1;
		size_t k = 0;
		while (k < n && is_space(line[k]))
			k++;
		if (k == n) { /* a blank line ends a stanza */
			r = stanza_match(&st, suite, ret);
			stanza_reset(&st);
			field = NULL;
			continue;
		}
		if (line[0] == '#')
			continue;
		if (k > 0) { /* a continuation of the previous field */
			if (field) {
				util_buf_append(field, " ", 1);
				util_buf_append(field, line + k, n - k);
			}
			continue;
		}
		const char *colon = memchr(line, ':', n);
		field = NULL;
		if (!colon)
			continue; /* not a field: apt refuses such a file; we skip the line */
		size_t nl = (size_t)(colon - line);
		if (ascii_ieq(line, nl, "Types"))
			field = &st.types;
		else if (ascii_ieq(line, nl, "URIs"))
			field = &st.uris;
		else if (ascii_ieq(line, nl, "Suites"))
			field = &st.suites;
		else if (ascii_ieq(line, nl, "Enabled"))
			field = &st.enabled;
		st.any = true;
		/* Appends past a field's cap are cut short; a field that long is
		 * not a mirror list anyone wrote, and a cut list still parses. */
		if (field) {
			util_buf_append(field, " ", 1);
			util_buf_append(field, colon + 1, n - nl - 1);
		}
	}
	if (r == 0)
		r = stanza_match(&st, suite, ret);
	stanza_free(&st);
	return r;
}

/* "deb [ options ] uri suite component..." */
static int parse_one_line(const char *buf, size_t len, const char *suite, char **ret)
{
	size_t pos = 0;
	while (pos < len) {
		size_t end = pos;
		while (end < len && buf[end] != '\n')
			end++;
		const char *line = buf + pos;
		size_t n = end - pos;
		pos = end + 1;
		const char *hash = memchr(line, '#', n);
		if (hash)
			n = (size_t)(hash - line);
		const char *tok[4];
		size_t tl[4];
		size_t nt = 0, k = 0;
		bool in_options = false;
		while (k < n && nt < 4) {
			while (k < n && is_space(line[k]))
				k++;
			if (k >= n)
				break;
			size_t s = k;
			while (k < n && !is_space(line[k]))
				k++;
			/* Options in brackets are skipped, spaces inside them included. */
			if (nt == 1 && !in_options && line[s] == '[') {
				in_options = line[k - 1] != ']';
				continue;
			}
			if (in_options) {
				if (line[k - 1] == ']' || memchr(line + s, ']', k - s))
					in_options = false;
				continue;
			}
			tok[nt] = line + s;
			tl[nt] = k - s;
			nt++;
		}
		if (nt < 3 || in_options || !ascii_ieq(tok[0], tl[0], "deb"))
			continue;
		if (tl[2] != strlen(suite) || strncmp(tok[2], suite, tl[2]) != 0)
			continue;
		bool oom = false;
		char *u = usable_uri(tok[1], tl[1], &oom);
		if (oom)
			return -ENOMEM;
		if (u) {
			*ret = u;
			return 1;
		}
	}
	return 0;
}

int airlock_image_mirror_parse(const char *name, const char *buf, size_t len,
                               airlock_apt_format format, const char *suite, char **ret_uri,
                               airlock_error *err)
{
	if (!suite || !*suite)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0, "mirror: no suite given");
	if (memchr(buf, 0, len))
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: contains a NUL byte", name);
	char *uri = NULL;
	int r;
	if (format == AIRLOCK_APT_FORMAT_DEB822)
		r = parse_deb822(buf, len, suite, &uri);
	else if (format == AIRLOCK_APT_FORMAT_ONE_LINE)
		r = parse_one_line(buf, len, suite, &uri);
	else
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0, "%s: unknown apt sources format",
		                         name);
	if (r < 0)
		return set_sys(err, -r, name);
	if (r > 0)
		*ret_uri = uri;
	return r;
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a > b && strcmp(s + a - b, suffix) == 0;
}

/* Names in dir ending with suffix (not hidden), sorted; a missing dir is an
 * empty list. */
static int list_suffix(const char *dir, const char *suffix, char ***ret, size_t *ret_n)
{
	*ret = NULL;
	*ret_n = 0;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	char **names = NULL;
	size_t n = 0;
	struct dirent *de;
	int r = 0;
	while ((de = readdir(d)) && n < APT_FILES_MAX) {
		if (de->d_name[0] == '.' || !has_suffix(de->d_name, suffix))
			continue;
		char **p = realloc(names, (n + 1) * sizeof(*p));
		if (!p || !(p[n] = strdup(de->d_name))) {
			if (p)
				names = p;
			r = -ENOMEM;
			break;
		}
		names = p;
		n++;
	}
	closedir(d);
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return r;
	}
	if (n > 1)
		qsort(names, n, sizeof(*names), str_cmp);
	*ret = names;
	*ret_n = n;
	return 0;
}

static void names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Try one sources file; 1 found, 0 not (missing file included), < 0 error. */
static int try_sources_file(const char *path, airlock_apt_format format, const char *suite,
                            char **ret, util_buf *read_list, airlock_error *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	int open_errno = errno;
	if (read_list->len > 0)
		util_buf_append(read_list, ", ", 2);
	util_buf_append(read_list, path, strlen(path));
	if (fd < 0) {
		if (open_errno != ENOENT)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, open_errno, "apt sources %s",
			                         path);
		util_buf_append(read_list, " (missing)", 10);
		return 0;
	}
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = read_capped(fd, APT_FILE_MAX, &text, &len);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, -r, "apt sources %s", path);
	return airlock_image_mirror_parse(path, text, len, format, suite, ret, err);
}

int airlock_image_find_mirror(const char *apt_dir, const char *suite, char **ret_uri,
                              char **ret_source, airlock_error *err)
{
	if (!apt_dir)
		apt_dir = "/etc/apt";
	_cleanup_free_ char *dir_d = NULL, *list = NULL;
	if (asprintf(&dir_d, "%s/sources.list.d", apt_dir) < 0 ||
	    asprintf(&list, "%s/sources.list", apt_dir) < 0)
		return set_sys(err, ENOMEM, "apt sources");
	char **deb822 = NULL, **one_line = NULL;
	size_t n822 = 0, n1 = 0;
	int r = list_suffix(dir_d, ".sources", &deb822, &n822);
	if (r == 0)
		r = list_suffix(dir_d, ".list", &one_line, &n1);
	if (r < 0) {
		names_free(deb822, n822);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, -r, "apt sources %s", dir_d);
	}
	util_buf read_list;
	util_buf_init(&read_list, 400);
	char *uri = NULL;
	_cleanup_free_ char *source = NULL;
	size_t total = n822 + 1 + n1;
	for (size_t i = 0; i < total && r == 0; i++) {
		free(source);
		source = NULL;
		int fr;
		if (i < n822)
			fr = asprintf(&source, "%s/%s", dir_d, deb822[i]);
		else if (i == n822)
			fr = asprintf(&source, "%s", list);
		else
			fr = asprintf(&source, "%s/%s", dir_d, one_line[i - n822 - 1]);
		if (fr < 0) {
			source = NULL;
			r = set_sys(err, ENOMEM, "apt sources");
			break;
		}
		r = try_sources_file(source, i < n822 ? AIRLOCK_APT_FORMAT_DEB822 :
		                                        AIRLOCK_APT_FORMAT_ONE_LINE,
		                     suite, &uri, &read_list, err);
	}
	names_free(deb822, n822);
	names_free(one_line, n1);
	if (r == 0)
		r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                      "no apt source names a mirror for the suite %s with type deb (read %s); add one or pass a mirror explicitly",
		                      suite, read_list.len ? (const char *)read_list.data : "nothing");
	util_buf_clear(&read_list);
	if (r < 0)
		return r;
	*ret_uri = uri;
	if (ret_source)
		*ret_source = TAKE_PTR(source);
	return 0;
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

/* Open rel (no leading slash) beneath root, one component at a time, never
 * following a symlink and never leaving root's mount. The tree was written
 * by package maintainer scripts: /var/log could be a symlink to anywhere on
 * the host, and this walk refuses it instead of cleaning the host. */
static int open_beneath(int root, const char *rel, const tree_id *id)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", rel);
	int fd = fcntl(root, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return -errno;
	char *save = NULL;
	for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int next = tree_open_dir(fd, c, id);
		close(fd);
		if (next < 0)
			return next;
		fd = next;
	}
	return fd;
}

/* Remove everything inside root/rel (a missing or symlinked rel is left
 * alone: there is nothing of ours to clean through it). */
static int clean_contents(int root, const char *rel, const tree_id *id)
{
	int fd = open_beneath(root, rel, id);
	if (fd == -ENOENT || fd == -ELOOP || fd == -ENOTDIR)
		return 0;
	if (fd < 0)
		return fd;
	int r = tree_remove_contents(fd, id, 0);
	close(fd);
	return r;
}

/* Remove entries of root/rel whose names end with suffix (files only). */
static int clean_suffix(int root, const char *rel, const char *suffix, const tree_id *id)
{
	int fd = open_beneath(root, rel, id);
	if (fd == -ENOENT || fd == -ELOOP || fd == -ENOTDIR)
		return 0;
	if (fd < 0)
		return fd;
	DIR *d = dir_stream(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (!has_suffix(de->d_name, suffix) ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
			continue;
		if (unlinkat(fd, de->d_name, 0) < 0 && errno != ENOENT && r == 0)
			r = -errno;
	}
	closedir(d);
	close(fd);
	return r;
}

/* Truncate root/rel when it is a regular file (a symlink is left alone). */
static int clean_truncate(int root, const char *dir, const char *name, const tree_id *id)
{
	int dfd = open_beneath(root, dir, id);
	if (dfd == -ENOENT || dfd == -ELOOP || dfd == -ENOTDIR)
		return 0;
	if (dfd < 0)
		return dfd;
	struct stat st;
	int r = 0;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
		/* O_NOFOLLOW|O_NONBLOCK: if it was swapped for a symlink or a FIFO
		 * since the stat, the open fails or does not hang. */
		int fd = openat(dfd, name, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			r = -errno;
		else
			close(fd);
	}
	close(dfd);
	return r;
}

/* Walk the whole tree: remove device nodes (the sandbox gets its own minimal
 * /dev; a node in a read-only image is only a way around it) and clear
 * setuid and setgid bits on files (nothing in a sandbox may gain
 * privileges by exec, and a bit that is not there cannot be misused if a
 * mount flag is ever forgotten). */
static int tree_normalize(int dfd, const tree_id *root, unsigned depth)
{
	if (depth >= TREE_DEPTH_MAX)
		return -ELOOP;
	DIR *d = dir_stream(dfd);
	if (!d)
		return -errno;
	int r = 0;
	/* A pass that removed a node is repeated, in case the removal made
	 * readdir skip an entry; the rest of the work is idempotent. */
	for (int pass = 0; pass < 8 && r == 0; pass++) {
		bool removed = false;
		struct dirent *de;
		while (r == 0 && (de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			struct stat st;
			if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				r = -errno;
				break;
			}
			if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
				if (unlinkat(dfd, de->d_name, 0) < 0)
					r = -errno;
				removed = true;
			} else if (S_ISREG(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID))) {
				int fd = openat(dfd, de->d_name,
				                O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
				if (fd < 0) {
					r = -errno;
					break;
				}
				/* Changed through the descriptor, after checking it is the
				 * file just looked at. */
				struct stat fst;
				if (fstat(fd, &fst) < 0)
					r = -errno;
				else if (fst.st_ino != st.st_ino || fst.st_dev != st.st_dev)
					r = -ESTALE;
				else if (fchmod(fd, fst.st_mode & 0777) < 0)
					r = -errno;
				close(fd);
			} else if (S_ISDIR(st.st_mode)) {
				int cfd = tree_open_dir(dfd, de->d_name, root);
				if (cfd < 0) {
					r = cfd;
					break;
				}
				r = tree_normalize(cfd, root, depth + 1);
				close(cfd);
			}
		}
		if (!removed)
			break;
		rewinddir(d);
	}
	closedir(d);
	return r;
}

/* Replace root/dir/name with a regular file holding text: whatever is there
 * (a file debootstrap copied from the build host, a symlink a package made)
 * is unlinked and a new file is created exclusively, never through a link. */
static int write_neutral(int root, const char *dir, const char *name, const char *text,
                         const tree_id *id)
{
	int dfd = open_beneath(root, dir, id);
	if (dfd < 0)
		return dfd;
	int r = 0;
	if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
		r = -errno;
	int fd = r < 0 ? -1 :
	                 openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (r == 0 && fd < 0)
		r = -errno;
	if (fd >= 0) {
		size_t len = strlen(text);
		ssize_t n = write(fd, text, len);
		if (n != (ssize_t)len)
			r = n < 0 ? -errno : -EIO;
		/* The umask must not decide what the sandbox user may read. */
		if (r == 0 && fchmod(fd, 0644) < 0)
			r = -errno;
		close(fd);
	}
	close(dfd);
	return r;
}

/* Files that would otherwise describe the build host to every sandbox:
 * debootstrap copies the host's /etc/resolv.conf (naming its resolver) and
 * /etc/hostname, and writes the mirror it fetched from into
 * /etc/apt/sources.list. A sandbox has no resolver (its network namespace
 * holds lo and, with egress, the proxy's listener, reached by address), its
 * uts namespace is named "sandbox" (child.c), and it has no route to a
 * mirror; so these say exactly that and nothing of the host. */
static const struct {
	const char *dir, *name, *text;
} neutral_files[] = {
	{ "etc", "resolv.conf", "# A sandbox has no resolver.\n" },
	{ "etc", "hostname", "sandbox\n" },
	{ "etc", "hosts", "127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n" },
	{ "etc/apt", "sources.list", "# A sandbox has no package mirror.\n" },
};

/* What a built tree should not carry into an image: caches and logs (size,
 * and bytes that differ between two builds of the same packages), the
 * machine-id (each sandbox is not this machine), the build host's resolver,
 * name and mirror (neutral_files), device nodes and setuid bits. */
static int clean_tree(int rootfd, airlock_error *err)
{
	tree_id id;
	int r = tree_id_of(rootfd, "", AT_EMPTY_PATH, &id, NULL);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build: clean");
	static const char *const contents[] = { "var/lib/apt/lists", "var/cache/apt", "var/log",
		                                "tmp", "var/tmp", "var/cache/ldconfig" };
	for (size_t i = 0; i < ARRAY_SIZE(contents); i++) {
		r = clean_contents(rootfd, contents[i], &id);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build: cleaning /%s",
			                         contents[i]);
	}
	static const char *const old_dirs[] = { "var/cache/debconf", "var/lib/dpkg" };
	for (size_t i = 0; i < ARRAY_SIZE(old_dirs); i++) {
		r = clean_suffix(rootfd, old_dirs[i], "-old", &id);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build: cleaning /%s",
			                         old_dirs[i]);
	}
	r = clean_truncate(rootfd, "etc", "machine-id", &id);
	if (r == 0)
		r = clean_truncate(rootfd, "var/lib/dbus", "machine-id", &id);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build: emptying machine-id");
	for (size_t i = 0; i < ARRAY_SIZE(neutral_files); i++) {
		r = write_neutral(rootfd, neutral_files[i].dir, neutral_files[i].name,
		                  neutral_files[i].text, &id);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build: writing /%s/%s",
			                         neutral_files[i].dir, neutral_files[i].name);
	}
	/* The mount points every sandbox needs, which a minbase tree may lack:
	 * the native mechanism mounts its /workspace volume, /proc, /dev and
	 * /tmp over these, and the image itself is read-only. */
	static const struct {
		const char *name;
		mode_t mode;
	} mount_points[] = { { "workspace", 0755 }, { "proc", 0555 }, { "dev", 0755 }, { "tmp", 01777 } };
	for (size_t i = 0; i < ARRAY_SIZE(mount_points); i++) {
		struct stat st;
		if (mkdirat(rootfd, mount_points[i].name, mount_points[i].mode) < 0 && errno != EEXIST)
			return set_sys(err, errno, "image build: mount point");
		if (fstatat(rootfd, mount_points[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOTDIR,
			                         "image build: /%s is not a directory", mount_points[i].name);
		if (fchmodat(rootfd, mount_points[i].name, mount_points[i].mode, 0) < 0)
			return set_sys(err, errno, "image build: mount point");
	}
	r = tree_normalize(rootfd, &id, 0);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
		                         "image build: removing device nodes and setuid bits");
	/* The tree's root was made 0755 by us, but a package could have
	 * changed it: the image's / must be searchable by the sandbox's
	 * unprivileged uid. */
	if (fchmod(rootfd, 0755) < 0)
		return set_sys(err, errno, "image build: chmod /");
	return 0;
}

/* Remove tmp/ entries left by a build or import whose process died: old
 * enough, and nobody holds their lock. The lock is taken through a
 * descriptor opened without following a symlink and kept while removing,
 * so a live owner cannot start using the entry meanwhile. */
static void sweep_stale_tmp(airlock_image_store *store)
{
	DIR *d = dir_stream(store->tmp_fd);
	if (!d)
		return;
	time_t now = time(NULL);
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    fstatat(store->tmp_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    now - st.st_mtime < STALE_TMP_SECONDS)
			continue;
		if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
			unlinkat(store->tmp_fd, de->d_name, 0); /* never ours to keep */
			continue;
		}
		int fd = openat(store->tmp_fd, de->d_name,
		                O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			tree_remove_at(store->tmp_fd, de->d_name);
		close(fd);
	}
	closedir(d);
}

static int write_sidecar(airlock_image_store *store, const char *hex, const char *packages,
                         airlock_error *err)
{
	_cleanup_free_ char *text = NULL;
	if (sidecar_text(packages, &text) < 0)
		return set_sys(err, ENOMEM, "image build: sidecar");
	char tmp_name[64];
	int r = random_name("sidecar-", tmp_name, sizeof(tmp_name));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build: sidecar");
	_cleanup_close_ int fd = openat(store->tmp_fd, tmp_name,
	                                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return set_sys(err, errno, "image build: sidecar");
	flock(fd, LOCK_EX | LOCK_NB);
	r = write_full(fd, text, strlen(text));
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
	_cleanup_free_ char *u = usable_uri(m, strlen(m), &oom);
	if (oom)
		return set_sys(err, ENOMEM, "image build");
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
	tree_id id;
	if (tree_id_of(build_fd, "", AT_EMPTY_PATH, &id, NULL) < 0)
		return;
	int dfd = open_beneath(build_fd, "root/debootstrap", &id);
	if (dfd < 0)
		return;
	int fd = openat(dfd, "debootstrap.log", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return;
	struct stat st;
	char buf[LOG_IN_MESSAGE * 2];
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		off_t off = st.st_size > (off_t)sizeof(buf) ? st.st_size - (off_t)sizeof(buf) : 0;
		n = pread(fd, buf, sizeof(buf), off);
	}
	close(fd);
	if (n <= 0)
		return;
	char summary[LOG_IN_MESSAGE + 64];
	summarize_tail(buf, (size_t)n, LOG_IN_MESSAGE, summary, sizeof(summary));
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
		return set_sys(err, errno, "image build: tree directory");
	_cleanup_free_ char *root_path = NULL, *image_path = NULL, *include = NULL,
	                    *keyring = NULL;
	if (asprintf(&root_path, "%s/tmp/%s/root", store->path, build_name) < 0 ||
	    asprintf(&image_path, "%s/tmp/%s/image.erofs", store->path, build_name) < 0 ||
	    asprintf(&include, "--include=%s", packages) < 0 ||
	    asprintf(&keyring, "--keyring=%s", AIRLOCK_IMAGE_KEYRING) < 0)
		return set_sys(err, ENOMEM, "image build");

	int r = store_path_check(store, err);
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
		return set_sys(err, errno, "image build: tree");
	progress_line(progress, ctx,
	              "clean: apt lists and caches, logs, temporary files, device nodes, setuid bits, machine-id, host names");
	r = clean_tree(root_fd, err);
	if (r < 0)
		return r;

	r = store_path_check(store, err);
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
		return set_sys(err, errno, "image build: image file");
	struct stat st;
	if (fstat(img, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "image build: mkfs.erofs left no image");
	progress_line(progress, ctx, "sha256");
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
	r = seal_tmp(img, hex, err);
	if (r < 0)
		return r;
	r = publish(store, build_fd, "image.erofs", hex, ret_new, err);
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
	char buf[256];
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
	int r = package_list(opts, &packages, err);
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
			return set_sys(err, ENOMEM, "image build");
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

	sweep_stale_tmp(store);
	char build_name[64];
	r = random_name("build-", build_name, sizeof(build_name));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "image build");
	if (mkdirat(store->tmp_fd, build_name, 0700) < 0)
		return set_sys(err, errno, "image build: build directory");
	int build_fd = openat(store->tmp_fd, build_name,
	                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (build_fd < 0) {
		r = set_sys(err, errno, "image build: build directory");
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
	int rr = tree_remove_at(store->tmp_fd, build_name);
	if (r < 0)
		return r;
	if (rr < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -rr,
		                         "image build: removing the build tree %s/tmp/%s", store->path,
		                         build_name);
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	digest_from_hex(hex, digest);
	progress_line(progress, progress_ctx, "%s %s", fresh ? "stored" : "already stored", digest);
	memcpy(ret_digest, digest, sizeof(digest));
	return 0;
}
