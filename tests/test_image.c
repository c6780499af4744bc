/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image store (include/airlock/image.h): images named by digest
 * (the specification, EnvironmentSpec: "image_digest is a digest, never a
 * tag").
 *
 * Most tests use small EROFS images made here with mkfs.erofs from a temp
 * directory. One test, image_build_default, runs the real debootstrap build
 * (network access to the Debian mirror, minutes) and mounts the result on a
 * loop device. With AIRLOCK_TEST_IMAGE_STORE set it builds into that store
 * and reuses a default image already there, so the native mechanism's tests
 * and repeated runs share one build; AIRLOCK_TEST_SKIP_IMAGE_BUILD=1 skips it.
 *
 * Only image_build_default sets a Criterion .timeout: with two timed tests
 * running in parallel, Criterion 2.4's runner leaks 48 bytes, which fails
 * the ASan build; meson's suite timeout bounds the others.
 *
 * Every test registers what it creates (temp directories, a mount, a loop
 * device) in one fixture whose fini removes them, so a failed assertion
 * leaves nothing behind.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/loop.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "airlock/guest.h"
#include "airlock/image.h"
#include "airlock/types.h"
#include "image/build.h"
#include "util/util.h"

extern char **environ;

#define REJECTED airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED)
#define PBUF (2 * PATH_MAX)

/* snprintf into an array, failing the test rather than cutting a path short. */
#define fmt_path(buf, ...)                                                                         \
	cr_assert_lt((size_t)snprintf((buf), sizeof(buf), __VA_ARGS__), sizeof(buf),                 \
	             "path too long")

/* ---- fixture: everything a test made, removed in fini ----------------------- */

#define MAX_TMP 8

static struct {
	char tmp[MAX_TMP][PATH_MAX];
	size_t n_tmp;
	char mnt[PATH_MAX]; /* mounted when non-empty */
	char bind[PATH_MAX];
	int loop_fd;
	airlock_image_store *stores[4];
	size_t n_stores;
} g;

static void fx_init(void)
{
	memset(&g, 0, sizeof(g));
	g.loop_fd = -1;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)f;
	if (flag == FTW_DP)
		rmdir(p);
	else
		unlink(p);
	return 0;
}

/* FTW_PHYS: never follow a symlink; FTW_MOUNT: never cross into a mount. */
static void rm_rf(const char *path)
{
	nftw(path, rm_cb, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static void fx_fini(void)
{
	for (size_t i = 0; i < g.n_stores; i++)
		airlock_image_store_free(g.stores[i]);
	if (g.mnt[0])
		umount2(g.mnt, MNT_DETACH);
	if (g.bind[0])
		umount2(g.bind, MNT_DETACH);
	if (g.loop_fd >= 0) {
		ioctl(g.loop_fd, LOOP_CLR_FD, 0);
		close(g.loop_fd);
	}
	for (size_t i = g.n_tmp; i > 0; i--)
		rm_rf(g.tmp[i - 1]);
	memset(&g, 0, sizeof(g));
	g.loop_fd = -1;
}

TestSuite(image, .init = fx_init, .fini = fx_fini);

/* Root with real privileges: uid 0 in the initial user namespace. Root in
 * another user namespace cannot chown to unmapped ids, bind-mount, make
 * device nodes or attach loop devices. */
static bool host_root(void)
{
	if (geteuid() != 0)
		return false;
	FILE *f = fopen("/proc/self/uid_map", "re");
	if (!f)
		return false;
	unsigned long a = 1, b = 1, c = 0;
	int n = fscanf(f, "%lu %lu %lu", &a, &b, &c);
	fclose(f);
	return n == 3 && a == 0 && b == 0 && c == 4294967295UL;
}

/* A new temp directory, removed in fini. */
static const char *tmpdir(void)
{
	cr_assert_lt(g.n_tmp, MAX_TMP);
	char *p = g.tmp[g.n_tmp];
	snprintf(p, PATH_MAX, "/tmp/airlock-image-test-XXXXXX");
	cr_assert_not_null(mkdtemp(p), "mkdtemp: %s", strerror(errno));
	g.n_tmp++;
	return p;
}

static airlock_image_store *open_store(const char *dir)
{
	airlock_error err = { 0 };
	airlock_image_store *s = NULL;
	int r = airlock_image_store_open(dir, &s, &err);
	cr_assert_eq(r, 0, "store_open %s: %s", dir, err.message);
	cr_assert_lt(g.n_stores, ARRAY_SIZE(g.stores));
	g.stores[g.n_stores++] = s;
	return s;
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	size_t n = strlen(text);
	cr_assert_eq(write(fd, text, n), (ssize_t)n);
	close(fd);
}

static int run(char *const argv[])
{
	pid_t pid;
	int r = posix_spawn(&pid, argv[0], NULL, NULL, argv, environ);
	cr_assert_eq(r, 0, "spawn %s: %s", argv[0], strerror(r));
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A small EROFS image whose content depends on `salt`; returns its path. */
static void make_image(const char *salt, char out[PBUF])
{
	const char *dir = tmpdir();
	char src[PBUF], p[PBUF];
	fmt_path(src, "%s/src", dir);
	cr_assert_eq(mkdir(src, 0755), 0);
	fmt_path(p, "%s/hello.txt", src);
	write_file(p, salt);
	fmt_path(p, "%s/bin", src);
	cr_assert_eq(mkdir(p, 0755), 0);
	fmt_path(p, "%s/bin/tool", src);
	write_file(p, "#!/bin/sh\necho tool\n");
	snprintf(out, PBUF, "%s/small.erofs", dir);
	char *argv[] = { "/usr/bin/mkfs.erofs", "--quiet", "-zlz4hc", "-T0", out, src, NULL };
	cr_assert_eq(run(argv), 0, "mkfs.erofs failed (erofs-utils installed?)");
}

static void file_sha256(const char *path, char hex[65])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	util_sha256 *h = util_sha256_new();
	cr_assert_not_null(h);
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		cr_assert_eq(util_sha256_update(h, buf, (size_t)n), 0);
	close(fd);
	cr_assert_eq(util_sha256_final_hex(h, hex), 0);
}

static void import_file(airlock_image_store *s, const char *path, char digest[72])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	airlock_error err = { 0 };
	int r = airlock_image_import(s, fd, digest, &err);
	close(fd);
	cr_assert_eq(r, 0, "import: %s", err.message);
}

static void stored_path(airlock_image_store *s, const char *digest, char out[PBUF])
{
	snprintf(out, PBUF, "%s/sha256/%s.erofs", airlock_image_store_path(s), digest + 7);
}

static size_t dir_entries(const char *path)
{
	DIR *d = opendir(path);
	cr_assert_not_null(d, "%s: %s", path, strerror(errno));
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* ---- the store's directories --------------------------------------------------- */

Test(image, store_open_creates_private_dirs)
{
	const char *d = tmpdir();
	char dir[PBUF], p[PBUF];
	fmt_path(dir, "%s/a/b/store", d);
	airlock_image_store *s = open_store(dir);
	cr_expect_str_eq(airlock_image_store_path(s), dir);
	const char *subs[] = { "", "/sha256", "/tmp" };
	for (size_t i = 0; i < ARRAY_SIZE(subs); i++) {
		struct stat st;
		fmt_path(p, "%s%s", dir, subs[i]);
		cr_assert_eq(lstat(p, &st), 0, "%s", p);
		cr_expect(S_ISDIR(st.st_mode));
		cr_expect_eq(st.st_mode & 07777, 0700, "%s is %o", p, st.st_mode & 07777);
		cr_expect_eq(st.st_uid, geteuid());
	}
	/* Opening again is fine. */
	open_store(dir);
}

static void expect_refused(const char *dir, const char *needle)
{
	airlock_error err = { 0 };
	airlock_image_store *s = NULL;
	int r = airlock_image_store_open(dir, &s, &err);
	cr_assert_eq(r, airlock_errcode(AIRLOCK_ERR_CONFIG), "store %s was accepted (%d, %s)", dir, r,
	             err.message);
	cr_expect_null(s);
	cr_expect(strstr(err.message, "supply-chain") != NULL, "%s", err.message);
	cr_expect(strstr(err.message, needle) != NULL, "'%s' not in: %s", needle, err.message);
}

Test(image, store_refuses_group_or_world_writable)
{
	const char *d = tmpdir();
	char dir[PBUF], sub[PBUF];
	fmt_path(dir, "%s/store", d);
	cr_assert_eq(mkdir(dir, 0700), 0);
	cr_assert_eq(chmod(dir, 0770), 0);
	expect_refused(dir, "its group");
	cr_assert_eq(chmod(dir, 0703), 0);
	expect_refused(dir, "everyone");

	/* A subdirectory made writable after the fact is refused too. */
	cr_assert_eq(chmod(dir, 0700), 0);
	open_store(dir);
	fmt_path(sub, "%s/sha256", dir);
	cr_assert_eq(chmod(sub, 0777), 0);
	expect_refused(dir, "sha256");
}

Test(image, store_refuses_other_owner)
{
	if (!host_root())
		cr_skip_test("needs root (in the initial user namespace) to give a directory to another uid");
	const char *d = tmpdir();
	char dir[PBUF];
	fmt_path(dir, "%s/store", d);
	cr_assert_eq(mkdir(dir, 0700), 0);
	cr_assert_eq(chown(dir, 65534, 65534), 0);
	expect_refused(dir, "owned by uid 65534");
}

Test(image, store_refuses_replaceable_parent)
{
	const char *d = tmpdir();
	char parent[PBUF], dir[PBUF];
	fmt_path(parent, "%s/shared", d);
	cr_assert_eq(mkdir(parent, 0700), 0);
	cr_assert_eq(chmod(parent, 0777), 0);
	fmt_path(dir, "%s/store", parent);
	expect_refused(dir, "parent directory");
	/* The sticky bit (as on /tmp) stops others renaming our store. */
	cr_assert_eq(chmod(parent, 01777), 0);
	open_store(dir);
}

Test(image, store_refuses_symlinked_subdir)
{
	const char *d = tmpdir();
	char dir[PBUF], other[PBUF], link[PBUF];
	fmt_path(dir, "%s/store", d);
	fmt_path(other, "%s/elsewhere", d);
	cr_assert_eq(mkdir(dir, 0700), 0);
	cr_assert_eq(mkdir(other, 0700), 0);
	fmt_path(link, "%s/sha256", dir);
	cr_assert_eq(symlink(other, link), 0);
	airlock_error err = { 0 };
	airlock_image_store *s = NULL;
	cr_assert_eq(airlock_image_store_open(dir, &s, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_expect(strstr(err.message, "symlink") != NULL, "%s", err.message);
}

/* ---- tmp/: what a dead build or import left ----------------------------------------- */

static void make_old(const char *path)
{
	struct timespec old[2] = { { time(NULL) - 600, 0 }, { time(NULL) - 600, 0 } };
	cr_assert_eq(utimensat(AT_FDCWD, path, old, AT_SYMLINK_NOFOLLOW), 0, "%s", path);
}

Test(image, sweep_removes_only_what_nobody_holds)
{
	airlock_image_store *s = open_store(tmpdir());
	const char *outside = tmpdir();
	char tmp[PBUF], dead[PBUF], held[PBUF], young[PBUF], link[PBUF], p[PBUF], keep[PBUF];
	fmt_path(tmp, "%s/tmp", airlock_image_store_path(s));
	fmt_path(keep, "%s/precious", outside);
	write_file(keep, "keep");

	fmt_path(dead, "%s/build-dead", tmp);
	cr_assert_eq(mkdir(dead, 0700), 0);
	fmt_path(p, "%s/inner", dead);
	cr_assert_eq(mkdir(p, 0700), 0);
	fmt_path(p, "%s/inner/file", dead);
	write_file(p, "x");
	make_old(dead);

	fmt_path(held, "%s/build-held", tmp);
	cr_assert_eq(mkdir(held, 0700), 0);
	make_old(held);
	int lock = open(held, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(lock, 0);
	cr_assert_eq(flock(lock, LOCK_EX | LOCK_NB), 0);

	fmt_path(young, "%s/import-young", tmp);
	write_file(young, "just made, not locked yet");

	fmt_path(link, "%s/planted", tmp);
	cr_assert_eq(symlink(outside, link), 0);
	make_old(link);

	/* An import sweeps first. */
	char img[PBUF], digest[72];
	make_image("sweep", img);
	import_file(s, img, digest);

	cr_expect_neq(access(dead, F_OK), 0, "a dead build's tree was kept");
	cr_expect_eq(access(held, F_OK), 0, "a live build's tree was removed");
	cr_expect_eq(access(young, F_OK), 0, "a new entry was removed before its maker could lock it");
	struct stat st;
	cr_expect_neq(lstat(link, &st), 0, "a planted symlink was kept");
	cr_expect_eq(access(keep, F_OK), 0, "the sweep followed a symlink");
	close(lock);
}

/* ---- import and verified open ---------------------------------------------------- */

Test(image, import_and_open_verified_round_trip)
{
	char img[PBUF], hex[65], digest[72], stored[PBUF];
	make_image("one", img);
	file_sha256(img, hex);
	airlock_image_store *s = open_store(tmpdir());
	import_file(s, img, digest);
	cr_expect(airlock_image_digest_valid(digest), "%s", digest);
	cr_expect_str_eq(digest + 7, hex);

	stored_path(s, digest, stored);
	struct stat st;
	cr_assert_eq(lstat(stored, &st), 0);
	cr_expect(S_ISREG(st.st_mode));
	cr_expect_eq(st.st_mode & 07777, 0444);

	airlock_error err = { 0 };
	int fd = -1;
	cr_assert_eq(airlock_image_open_verified(s, digest, &fd, &err), 0, "%s", err.message);
	cr_expect(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	cr_expect_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	cr_expect_eq(lseek(fd, 0, SEEK_CUR), 0);
	struct stat fst;
	cr_assert_eq(fstat(fd, &fst), 0);
	cr_expect_eq(fst.st_ino, st.st_ino);
	close(fd);

	/* Importing the same bytes again names the same image and keeps it. */
	char again[72];
	import_file(s, img, again);
	cr_expect_str_eq(again, digest);
	struct stat st2;
	cr_assert_eq(lstat(stored, &st2), 0);
	cr_expect_eq(st2.st_ino, st.st_ino, "the stored file was replaced");

	/* Nothing is left in tmp/. */
	char tmp[PBUF];
	fmt_path(tmp, "%s/tmp", airlock_image_store_path(s));
	cr_expect_eq(dir_entries(tmp), 0);
}

Test(image, altered_image_rejected_naming_digest)
{
	char img[PBUF], digest[72], stored[PBUF];
	make_image("two", img);
	airlock_image_store *s = open_store(tmpdir());
	import_file(s, img, digest);
	stored_path(s, digest, stored);

	/* Verified once, so the cache holds it... */
	airlock_error err = { 0 };
	int fd = -1;
	cr_assert_eq(airlock_image_open_verified(s, digest, &fd, &err), 0, "%s", err.message);
	close(fd);

	/* ...then one byte changes in place, the way an attacker with write
	 * access (or a bad disk) would change it. */
	cr_assert_eq(chmod(stored, 0644), 0);
	int w = open(stored, O_RDWR | O_CLOEXEC);
	cr_assert_geq(w, 0);
	unsigned char b;
	cr_assert_eq(pread(w, &b, 1, 2000), 1);
	b ^= 0xff;
	cr_assert_eq(pwrite(w, &b, 1, 2000), 1);
	close(w);
	cr_assert_eq(chmod(stored, 0444), 0);

	fd = -1;
	cr_assert_eq(airlock_image_open_verified(s, digest, &fd, &err), REJECTED);
	cr_expect_eq(fd, -1, "ret_fd written on failure");
	cr_expect_eq(err.cls, AIRLOCK_ERR_EXECUTION_REJECTED);
	cr_expect(strstr(err.message, digest) != NULL, "digest not named: %s", err.message);
	cr_expect(strstr(err.message, "altered") != NULL, "%s", err.message);

	/* A fresh store (no cache) refuses it too. */
	char dir[PBUF];
	fmt_path(dir, "%s", airlock_image_store_path(s));
	airlock_image_store *s2 = open_store(dir);
	cr_assert_eq(airlock_image_open_verified(s2, digest, &fd, &err), REJECTED);

	/* Importing the right bytes again repairs the store. */
	char again[72];
	import_file(s2, img, again);
	cr_expect_str_eq(again, digest);
	cr_assert_eq(airlock_image_open_verified(s2, digest, &fd, &err), 0, "%s", err.message);
	close(fd);
}

Test(image, missing_image_rejected_naming_digest)
{
	airlock_image_store *s = open_store(tmpdir());
	const char *digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	airlock_error err = { 0 };
	int fd = -1;
	cr_assert_eq(airlock_image_open_verified(s, digest, &fd, &err), REJECTED);
	cr_expect_eq(fd, -1);
	cr_expect(strstr(err.message, digest) != NULL, "digest not named: %s", err.message);
	cr_expect(strstr(err.message, "not in the image store") != NULL, "%s", err.message);
}

Test(image, symlink_under_digest_name_rejected)
{
	char img[PBUF], hex[65], link[PBUF];
	make_image("link", img);
	file_sha256(img, hex);
	airlock_image_store *s = open_store(tmpdir());
	fmt_path(link, "%s/sha256/%s.erofs", airlock_image_store_path(s), hex);
	cr_assert_eq(symlink(img, link), 0);
	char digest[80];
	fmt_path(digest, "sha256:%s", hex);
	airlock_error err = { 0 };
	int fd = -1;
	cr_assert_eq(airlock_image_open_verified(s, digest, &fd, &err), REJECTED);
	cr_expect(strstr(err.message, digest) != NULL, "%s", err.message);
}

Test(image, tag_refused)
{
	airlock_image_store *s = open_store(tmpdir());
	const char *tags[] = { "debian:12", "python:3.12", "latest", "registry.example/x:1",
		               "debian@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" };
	for (size_t i = 0; i < ARRAY_SIZE(tags); i++) {
		airlock_error err = { 0 };
		int fd = -1;
		cr_assert_eq(airlock_image_open_verified(s, tags[i], &fd, &err), REJECTED, "%s", tags[i]);
		cr_expect_eq(fd, -1);
		cr_expect(strstr(err.message, "named by digest") != NULL, "%s: %s", tags[i], err.message);
		cr_expect(strstr(err.message, "tag") != NULL, "%s: %s", tags[i], err.message);
	}
	const char *bad[] = { "sha256:", "sha256:ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
		              "sha256:0123", "sha256:../../etc/passwd" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		airlock_error err = { 0 };
		int fd = -1;
		cr_assert_eq(airlock_image_open_verified(s, bad[i], &fd, &err), REJECTED, "%s", bad[i]);
		cr_expect(strstr(err.message, "not a valid digest") != NULL, "%s: %s", bad[i], err.message);
	}
	airlock_error err = { 0 };
	int fd = -1;
	cr_assert_eq(airlock_image_open_verified(s, NULL, &fd, &err), REJECTED);
}

Test(image, verification_cache_rehashes_after_change)
{
	char img[PBUF], digest[72], stored[PBUF];
	make_image("three", img);
	airlock_image_store *s = open_store(tmpdir());
	import_file(s, img, digest);
	stored_path(s, digest, stored);
	airlock_error err = { 0 };
	int fd = -1;

	uint64_t h0 = airlock_image_store_hash_count(s);
	cr_assert_eq(airlock_image_open_verified(s, digest, &fd, &err), 0, "%s", err.message);
	close(fd);
	cr_expect_eq(airlock_image_store_hash_count(s), h0 + 1, "first open hashes");
	cr_assert_eq(airlock_image_open_verified(s, digest, &fd, &err), 0, "%s", err.message);
	close(fd);
	cr_expect_eq(airlock_image_store_hash_count(s), h0 + 1, "second open uses the cache");

	/* chmod changes nothing in the bytes but moves ctime, which nobody can
	 * set back: the next open must hash again (and still succeed). */
	struct stat before, after;
	cr_assert_eq(stat(stored, &before), 0);
	for (int i = 0; i < 100; i++) {
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		cr_assert_eq(chmod(stored, 0444), 0);
		cr_assert_eq(stat(stored, &after), 0);
		if (after.st_ctim.tv_sec != before.st_ctim.tv_sec ||
		    after.st_ctim.tv_nsec != before.st_ctim.tv_nsec)
			break;
	}
	cr_assert(after.st_ctim.tv_sec != before.st_ctim.tv_sec ||
	          after.st_ctim.tv_nsec != before.st_ctim.tv_nsec, "ctime did not move");
	cr_assert_eq(airlock_image_open_verified(s, digest, &fd, &err), 0, "%s", err.message);
	close(fd);
	cr_expect_eq(airlock_image_store_hash_count(s), h0 + 2, "changed ctime forces a re-hash");
	cr_assert_eq(airlock_image_open_verified(s, digest, &fd, &err), 0, "%s", err.message);
	close(fd);
	cr_expect_eq(airlock_image_store_hash_count(s), h0 + 2);
}

Test(image, list_shows_imported_images)
{
	char a[PBUF], b[PBUF], da[72], db[72];
	make_image("list-a", a);
	make_image("list-b-longer-content", b);
	airlock_image_store *s = open_store(tmpdir());
	import_file(s, a, da);
	import_file(s, b, db);
	/* Names that are not images are not listed. */
	char junk[PBUF];
	fmt_path(junk, "%s/sha256/notes.txt", airlock_image_store_path(s));
	write_file(junk, "x");

	airlock_error err = { 0 };
	airlock_image_info *infos = NULL;
	size_t n = 0;
	cr_assert_eq(airlock_image_list(s, &infos, &n, &err), 0, "%s", err.message);
	cr_assert_eq(n, 2);
	bool seen_a = false, seen_b = false;
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		const char *src = NULL;
		if (strcmp(infos[i].digest, da) == 0)
			seen_a = true, src = a;
		if (strcmp(infos[i].digest, db) == 0)
			seen_b = true, src = b;
		cr_assert_not_null(src, "unexpected %s", infos[i].digest);
		cr_assert_eq(stat(src, &st), 0);
		cr_expect_eq(infos[i].size_bytes, st.st_size);
		cr_expect_gt(infos[i].mtime_ms, 0);
		cr_expect_null(infos[i].suite, "an imported image has no build record");
		cr_expect_null(infos[i].packages);
	}
	cr_expect(seen_a && seen_b);
	airlock_image_list_free(infos, n);

	/* An empty store lists nothing. */
	airlock_image_store *empty = open_store(tmpdir());
	infos = (airlock_image_info *)1;
	cr_assert_eq(airlock_image_list(empty, &infos, &n, &err), 0);
	cr_expect_eq(n, 0);
	cr_expect_null(infos);
}

/* A build record of recipe with the default suite and packages + extra,
 * and a guest line: this airlock's guest files' fingerprint when guest is
 * NULL, none when it is "", else guest. */
static void write_record_guest(const char *path, unsigned recipe, const char *extra,
                               const char *guest)
{
	char fp[AIRLOCK_SHA256_HEX_LEN + 1];
	cr_assert_eq(image_guest_fingerprint(fp), 0);
	char text[512];
	snprintf(text, sizeof(text), "recipe: %u\nsuite: %s\npackages: %s%s\n%s%s%s", recipe,
	         AIRLOCK_IMAGE_SUITE, AIRLOCK_IMAGE_DEFAULT_PACKAGES, extra,
	         guest && !*guest ? "" : SIDECAR_GUEST_KEY, guest ? guest : fp,
	         guest && !*guest ? "" : "\n");
	write_file(path, text);
}

static void write_record(const char *path, unsigned recipe, const char *extra)
{
	write_record_guest(path, recipe, extra, NULL);
}

Test(image, find_default_uses_the_build_record)
{
	char img[PBUF], other[PBUF], digest[72], od[72], side[PBUF];
	make_image("default", img);
	make_image("other", other);
	airlock_image_store *s = open_store(tmpdir());
	import_file(s, img, digest);
	import_file(s, other, od);
	airlock_error err = { 0 };
	char found[72] = "untouched";
	cr_assert_eq(airlock_image_find_default(s, found, &err), 0, "%s", err.message);
	cr_expect_str_eq(found, "untouched");

	/* A record of another package list does not count. */
	fmt_path(side, "%s/sha256/%s.packages", airlock_image_store_path(s), od + 7);
	write_record(side, AIRLOCK_IMAGE_RECIPE, ",vim");
	cr_assert_eq(airlock_image_find_default(s, found, &err), 0);

	fmt_path(side, "%s/sha256/%s.packages", airlock_image_store_path(s), digest + 7);
	/* An older recipe's record does not count either. */
	write_record(side, AIRLOCK_IMAGE_RECIPE - 1, "");
	cr_assert_eq(airlock_image_find_default(s, found, &err), 0);
	/* Nor one without this airlock's guest files: none recorded (a build
	 * before recipe 4 or by an airlock that did not record them), or
	 * others. */
	write_record_guest(side, AIRLOCK_IMAGE_RECIPE, "", "");
	cr_assert_eq(airlock_image_find_default(s, found, &err), 0);
	write_record_guest(side, AIRLOCK_IMAGE_RECIPE, "",
	                   "0000000000000000000000000000000000000000000000000000000000000000");
	cr_assert_eq(airlock_image_find_default(s, found, &err), 0);
	write_record(side, AIRLOCK_IMAGE_RECIPE, "");
	cr_assert_eq(airlock_image_find_default(s, found, &err), 1, "%s", err.message);
	cr_expect_str_eq(found, digest);

	/* find_built with the extra package finds the other one; order and
	 * repeats in the request do not matter. */
	const char *extra[] = { "vim", "bash", "vim" };
	airlock_image_build_options o = { .extra_packages = extra, .n_extra_packages = 3 };
	cr_assert_eq(airlock_image_find_built(s, &o, found, &err), 1, "%s", err.message);
	cr_expect_str_eq(found, od);

	/* A record whose image is gone finds nothing. */
	char stored[PBUF];
	stored_path(s, digest, stored);
	cr_assert_eq(unlink(stored), 0);
	strcpy(found, "untouched");
	cr_assert_eq(airlock_image_find_default(s, found, &err), 0);
	cr_expect_str_eq(found, "untouched");
}

/* ---- apt sources -------------------------------------------------------------------- */

static int parse(const char *text, airlock_apt_format fmt, char **uri)
{
	airlock_error err = { 0 };
	*uri = NULL;
	int r = airlock_image_mirror_parse("test", text, strlen(text), fmt, "bookworm", uri, &err);
	cr_assert_geq(r, 0, "%s", err.message);
	return r;
}

static void expect_mirror(const char *text, airlock_apt_format fmt, const char *want)
{
	char *uri = NULL;
	int r = parse(text, fmt, &uri);
	if (!want) {
		cr_expect_eq(r, 0, "found %s in:\n%s", uri ? uri : "?", text);
		cr_expect_null(uri);
	} else {
		cr_expect_eq(r, 1, "nothing found in:\n%s", text);
		if (uri)
			cr_expect_str_eq(uri, want);
	}
	free(uri);
}

Test(image, mirror_from_deb822_sources)
{
	/* This machine's own file. */
	expect_mirror("Types: deb\n"
	              "# http://snapshot.debian.org/archive/debian/20250520T000000Z\n"
	              "URIs: http://deb.debian.org/debian\n"
	              "Suites: bookworm bookworm-updates\n"
	              "Components: main\n"
	              "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
	              "\n"
	              "Types: deb\n"
	              "URIs: http://deb.debian.org/debian-security\n"
	              "Suites: bookworm-security\n"
	              "Components: main\n",
	              AIRLOCK_APT_FORMAT_DEB822, "http://deb.debian.org/debian");
	/* bookworm-updates is not bookworm. */
	expect_mirror("Types: deb\nURIs: http://a/debian\nSuites: bookworm-updates\n",
	              AIRLOCK_APT_FORMAT_DEB822, NULL);
	/* Disabled, source-only and other suites are skipped; the first usable
	 * stanza wins; field names are case-insensitive; no final newline. */
	expect_mirror("Types: deb\nURIs: http://disabled/debian\nSuites: bookworm\nEnabled: no\n\n"
	              "Types: deb-src\nURIs: http://src/debian\nSuites: bookworm\n\n"
	              "Types: deb\nURIs: http://old/debian\nSuites: bullseye\n\n"
	              "types: deb deb-src\nuris: https://mirror.example/debian/\nsuites: bookworm",
	              AIRLOCK_APT_FORMAT_DEB822, "https://mirror.example/debian");
	/* Continuation lines, and a URI scheme debootstrap cannot use. */
	expect_mirror("Types: deb\nURIs: mirror+file:/etc/apt/mirrors.txt\n"
	              "  http://second.example/debian\nSuites:\n bookworm\n",
	              AIRLOCK_APT_FORMAT_DEB822, "http://second.example/debian");
	expect_mirror("Types: deb\nURIs: cdrom:[Debian]/\nSuites: bookworm\n",
	              AIRLOCK_APT_FORMAT_DEB822, NULL);
	/* A comment line does not end a stanza; CRLF line ends are fine. */
	expect_mirror("Types: deb\r\n# note\r\nURIs: http://crlf.example/debian\r\nSuites: bookworm\r\n",
	              AIRLOCK_APT_FORMAT_DEB822, "http://crlf.example/debian");
	expect_mirror("", AIRLOCK_APT_FORMAT_DEB822, NULL);
	expect_mirror("\n\n# only comments\n", AIRLOCK_APT_FORMAT_DEB822, NULL);
}

Test(image, mirror_from_one_line_sources)
{
	expect_mirror("deb http://deb.debian.org/debian bookworm main\n", AIRLOCK_APT_FORMAT_ONE_LINE,
	              "http://deb.debian.org/debian");
	expect_mirror("# deb http://commented/debian bookworm main\n"
	              "deb-src http://src/debian bookworm main\n"
	              "deb http://security/debian-security bookworm-security main\n"
	              "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://opts/debian/ bookworm main contrib # note\n",
	              AIRLOCK_APT_FORMAT_ONE_LINE, "http://opts/debian");
	expect_mirror("deb [ arch=amd64 ] http://spaced/debian bookworm main\n",
	              AIRLOCK_APT_FORMAT_ONE_LINE, "http://spaced/debian");
	expect_mirror("deb cdrom:[Debian GNU/Linux]/ bookworm main\n"
	              "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n",
	              AIRLOCK_APT_FORMAT_ONE_LINE, NULL);
	expect_mirror("deb http://x/debian\n", AIRLOCK_APT_FORMAT_ONE_LINE, NULL);
	/* A URI with a quote or a control byte is not handed to anything. */
	expect_mirror("deb http://x/de'bian bookworm main\n", AIRLOCK_APT_FORMAT_ONE_LINE, NULL);
}

Test(image, mirror_parse_refuses_nul)
{
	const char text[] = "deb http://x/debian bookworm main\n\0deb http://y/debian bookworm main\n";
	airlock_error err = { 0 };
	char *uri = NULL;
	cr_expect_eq(airlock_image_mirror_parse("nul.list", text, sizeof(text) - 1,
	                                        AIRLOCK_APT_FORMAT_ONE_LINE, "bookworm", &uri, &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE));
	cr_expect_null(uri);
	cr_expect(strstr(err.message, "nul.list") != NULL, "%s", err.message);
}

Test(image, find_mirror_in_apt_dir)
{
	const char *apt = tmpdir();
	char p[PBUF];
	fmt_path(p, "%s/sources.list.d", apt);
	cr_assert_eq(mkdir(p, 0755), 0);

	/* Nothing anywhere: the error names every file read. */
	airlock_error err = { 0 };
	char *uri = NULL, *src = NULL;
	cr_assert_eq(airlock_image_find_mirror(apt, "bookworm", &uri, &src, &err),
	             airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_expect_null(uri);
	cr_expect(strstr(err.message, "sources.list (missing)") != NULL, "%s", err.message);

	/* A .sources file for another suite, a disabled-by-rename file, and
	 * sources.list with the mirror: sources.list wins. */
	fmt_path(p, "%s/sources.list.d/a.sources", apt);
	write_file(p, "Types: deb\nURIs: http://bullseye/debian\nSuites: bullseye\n");
	fmt_path(p, "%s/sources.list.d/b.sources.disabled", apt);
	write_file(p, "Types: deb\nURIs: http://disabled/debian\nSuites: bookworm\n");
	fmt_path(p, "%s/sources.list", apt);
	write_file(p, "deb http://from-list/debian bookworm main\n");
	cr_assert_eq(airlock_image_find_mirror(apt, "bookworm", &uri, &src, &err), 0, "%s",
	             err.message);
	cr_expect_str_eq(uri, "http://from-list/debian");
	cr_expect(strstr(src, "/sources.list") != NULL, "%s", src);
	free(uri);
	free(src);

	/* A .sources file for the suite is read first. */
	fmt_path(p, "%s/sources.list.d/z.sources", apt);
	write_file(p, "Types: deb\nURIs: http://from-sources/debian\nSuites: bookworm\n");
	cr_assert_eq(airlock_image_find_mirror(apt, "bookworm", &uri, &src, &err), 0, "%s",
	             err.message);
	cr_expect_str_eq(uri, "http://from-sources/debian");
	cr_expect(strstr(src, "z.sources") != NULL, "%s", src);
	free(uri);
	free(src);

	/* With only a one-line .list file under sources.list.d. */
	const char *apt2 = tmpdir();
	fmt_path(p, "%s/sources.list.d", apt2);
	cr_assert_eq(mkdir(p, 0755), 0);
	fmt_path(p, "%s/sources.list.d/debian.list", apt2);
	write_file(p, "deb https://from-dot-list/debian bookworm main\n");
	cr_assert_eq(airlock_image_find_mirror(apt2, "bookworm", &uri, NULL, &err), 0, "%s",
	             err.message);
	cr_expect_str_eq(uri, "https://from-dot-list/debian");
	free(uri);
}

/* ---- build: refusals and failure paths ---------------------------------------------- */

Test(image, build_refuses_bad_package_names)
{
	airlock_image_store *s = open_store(tmpdir());
	const char *bad[] = { "-oops", "Vim", "a", "vim,curl", "x y", "../etc", "" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		const char *one[] = { bad[i] };
		airlock_image_build_options o = { .extra_packages = one, .n_extra_packages = 1 };
		airlock_error err = { 0 };
		char digest[72] = "untouched";
		cr_expect_eq(airlock_image_build(s, &o, NULL, NULL, digest, &err),
		             airlock_errcode(AIRLOCK_ERR_DECODE), "'%s' accepted", bad[i]);
		cr_expect_str_eq(digest, "untouched");
		cr_expect(strstr(err.message, "package name") != NULL, "%s", err.message);
	}
	airlock_image_build_options o = { .mirror = "ftp://x/debian" };
	airlock_error err = { 0 };
	char digest[72];
	if (host_root())
		cr_expect_eq(airlock_image_build(s, &o, NULL, NULL, digest, &err),
		             airlock_errcode(AIRLOCK_ERR_DECODE), "%s", err.message);
}

Test(image, build_without_mirror_names_the_files)
{
	if (!host_root())
		cr_skip_test("image build needs root in the initial user namespace");
	airlock_image_store *s = open_store(tmpdir());
	const char *apt = tmpdir();
	airlock_image_build_options o = { .apt_dir = apt };
	airlock_error err = { 0 };
	char digest[72];
	cr_assert_eq(airlock_image_build(s, &o, NULL, NULL, digest, &err),
	             airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_expect(strstr(err.message, "sources.list") != NULL, "%s", err.message);
	cr_expect(strstr(err.message, "bookworm") != NULL, "%s", err.message);
}

static void collect_progress(void *ctx, const char *line)
{
	util_buf *b = ctx;
	util_buf_append(b, line, strlen(line));
	util_buf_append(b, "\n", 1);
}

/* A build against a mirror that refuses connections fails in debootstrap:
 * the error carries debootstrap's output, and neither the build tree nor a
 * temporary file is left. A stale tree from a "crashed" earlier build is
 * swept without following its symlink out or crossing its mount. */
Test(image, build_failure_cleans_up)
{
	if (!host_root())
		cr_skip_test("image build needs root in the initial user namespace");
	airlock_image_store *s = open_store(tmpdir());
	const char *outside = tmpdir();
	char p[PBUF], stale[PBUF], keep[PBUF], bound[PBUF];
	fmt_path(keep, "%s/precious", outside);
	write_file(keep, "do not delete");
	fmt_path(bound, "%s/bound-precious", outside);
	write_file(bound, "do not delete either");

	fmt_path(stale, "%s/tmp/build-stale", airlock_image_store_path(s));
	cr_assert_eq(mkdir(stale, 0700), 0);
	fmt_path(p, "%s/escape", stale);
	cr_assert_eq(symlink(outside, p), 0);
	fmt_path(p, "%s/file", stale);
	write_file(p, "junk");
	fmt_path(g.bind, "%s/mnt", stale);
	cr_assert_eq(mkdir(g.bind, 0700), 0);
	cr_assert_eq(mount(outside, g.bind, NULL, MS_BIND, NULL), 0, "bind: %s", strerror(errno));
	struct timespec old[2] = { { time(NULL) - 3 * 24 * 3600, 0 },
		                   { time(NULL) - 3 * 24 * 3600, 0 } };
	cr_assert_eq(utimensat(AT_FDCWD, stale, old, AT_SYMLINK_NOFOLLOW), 0);

	util_buf prog;
	util_buf_init(&prog, 65536);
	airlock_image_build_options o = { .mirror = "http://127.0.0.1:9/debian",
		                          .debootstrap_timeout_seconds = 240 };
	airlock_error err = { 0 };
	char digest[72] = "untouched";
	int r = airlock_image_build(s, &o, collect_progress, &prog, digest, &err);
	cr_expect_eq(r, airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE), "%d %s", r, err.message);
	cr_expect_str_eq(digest, "untouched");
	cr_expect(strstr(err.message, "debootstrap exited with status") != NULL, "%s", err.message);
	cr_expect(strstr(err.message, "output ended with") != NULL, "%s", err.message);
	cr_expect(strstr((char *)prog.data, "debootstrap: fetching") != NULL, "%s", prog.data);
	util_buf_clear(&prog);

	/* The symlink's target and the bind-mounted files are intact. */
	cr_expect_eq(access(keep, F_OK), 0, "the sweep followed a symlink out of the tree");
	cr_expect_eq(access(bound, F_OK), 0, "the sweep crossed into a mount");
	fmt_path(p, "%s/bound-precious", g.bind);
	cr_expect_eq(access(p, F_OK), 0);
	fmt_path(p, "%s/file", stale);
	cr_expect_neq(access(p, F_OK), 0, "the stale tree was not swept");
	/* The mount point is the only thing left of the stale tree. */
	cr_assert_eq(umount2(g.bind, 0), 0);
	g.bind[0] = 0;
	fmt_path(p, "%s/tmp", airlock_image_store_path(s));
	cr_expect_leq(dir_entries(p), 1);
	cr_expect_eq(dir_entries(stale), 1);
	fmt_path(p, "%s/sha256", airlock_image_store_path(s));
	cr_expect_eq(dir_entries(p), 0, "something was stored");
}

/* A mirror that accepts the connection and never answers: debootstrap
 * hangs, the build's timer kills its whole process group, and nothing is
 * left behind (no process, no tree, no mount). */
Test(image, build_timeout_kills_and_cleans_up)
{
	if (!host_root())
		cr_skip_test("image build needs root in the initial user namespace");
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(ls, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(ls, 16), 0);
	socklen_t sl = sizeof(sa);
	cr_assert_eq(getsockname(ls, (struct sockaddr *)&sa, &sl), 0);
	char mirror[64];
	fmt_path(mirror, "http://127.0.0.1:%u/debian", (unsigned)ntohs(sa.sin_port));

	airlock_image_store *s = open_store(tmpdir());
	airlock_image_build_options o = { .mirror = mirror, .debootstrap_timeout_seconds = 3 };
	airlock_error err = { 0 };
	char digest[72] = "untouched";
	int64_t t0 = util_monotonic_ms();
	int r = airlock_image_build(s, &o, NULL, NULL, digest, &err);
	int64_t took = util_monotonic_ms() - t0;
	close(ls);
	cr_expect_eq(r, airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE), "%d %s", r, err.message);
	cr_expect(strstr(err.message, "did not finish within 3 s") != NULL, "%s", err.message);
	cr_expect_lt(took, 30000, "took %lld ms", (long long)took);
	cr_expect_str_eq(digest, "untouched");

	char p[PBUF];
	fmt_path(p, "%s/tmp", airlock_image_store_path(s));
	cr_expect_eq(dir_entries(p), 0, "the killed build left its tree");
	/* No process still talks to the mirror. */
	DIR *d = opendir("/proc");
	cr_assert_not_null(d);
	struct dirent *de;
	while ((de = readdir(d))) {
		char cmd[PBUF], buf[4096];
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		fmt_path(cmd, "/proc/%s/cmdline", de->d_name);
		int fd = open(cmd, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] == 0)
				buf[i] = ' ';
		buf[n] = 0;
		cr_expect(strstr(buf, mirror + 7) == NULL, "pid %s survived: %s", de->d_name, buf);
	}
	closedir(d);
	/* Nothing of the build is mounted anywhere. */
	FILE *mi = fopen("/proc/self/mountinfo", "re");
	cr_assert_not_null(mi);
	char line[4096];
	while (fgets(line, sizeof(line), mi))
		cr_expect(strstr(line, airlock_image_store_path(s)) == NULL, "left mounted: %s", line);
	fclose(mi);
}

typedef struct opener {
	airlock_image_store *store;
	const char *digest;
	int failures;
} opener;

static void *open_many(void *arg)
{
	opener *o = arg;
	for (int i = 0; i < 50; i++) {
		airlock_error err = { 0 };
		int fd = -1;
		if (airlock_image_open_verified(o->store, o->digest, &fd, &err) < 0)
			o->failures++;
		else
			close(fd);
	}
	return NULL;
}

Test(image, open_verified_from_many_threads)
{
	char a[PBUF], b[PBUF], da[72], db[72];
	make_image("thread-a", a);
	make_image("thread-b", b);
	airlock_image_store *s = open_store(tmpdir());
	import_file(s, a, da);
	import_file(s, b, db);
	pthread_t t[8];
	opener o[8];
	for (int i = 0; i < 8; i++) {
		o[i] = (opener){ .store = s, .digest = i % 2 ? da : db };
		cr_assert_eq(pthread_create(&t[i], NULL, open_many, &o[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		cr_expect_eq(o[i].failures, 0, "thread %d", i);
	}
	/* Each image was hashed at least once and far fewer than 400 times. */
	uint64_t h = airlock_image_store_hash_count(s);
	cr_expect_geq(h, 2);
	cr_expect_leq(h, 16, "%llu hashes for 400 opens", (unsigned long long)h);
}

/* ---- the real build ------------------------------------------------------------------ */

/* Attach image_fd to a free loop device, read-only, with autoclear, using
 * the loop-control ioctls (no losetup). */
static int loop_attach(int image_fd, char dev[64])
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	cr_assert_geq(ctl, 0, "/dev/loop-control: %s", strerror(errno));
	for (int attempt = 0; attempt < 32; attempt++) {
		int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
		cr_assert_geq(nr, 0, "LOOP_CTL_GET_FREE: %s", strerror(errno));
		snprintf(dev, 64, "/dev/loop%d", nr);
		int fd = open(dev, O_RDONLY | O_CLOEXEC);
		cr_assert_geq(fd, 0, "%s: %s", dev, strerror(errno));
		struct loop_config cfg;
		memset(&cfg, 0, sizeof(cfg));
		cfg.fd = (unsigned)image_fd;
		cfg.info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
		if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
			close(ctl);
			return fd;
		}
		int e = errno;
		close(fd);
		/* Another process took the device between GET_FREE and
		 * CONFIGURE: ask again. */
		cr_assert_eq(e, EBUSY, "LOOP_CONFIGURE %s: %s", dev, strerror(e));
	}
	cr_assert_fail("no free loop device after 32 attempts");
	return -1;
}

/* The guest files' bytes as the builder embeds them (src/image/guest_files.c). */
extern const unsigned char image_guest_program_blob[];
extern const size_t image_guest_program_blob_len;
extern const unsigned char image_guest_shim_blob[];
extern const size_t image_guest_shim_blob_len;

/* path holds exactly len bytes equal to want, and has mode mode. */
static void expect_file_bytes(const char *path, const unsigned char *want, size_t len, mode_t mode)
{
	struct stat st;
	cr_assert_eq(lstat(path, &st), 0, "%s: %s", path, strerror(errno));
	cr_expect(S_ISREG(st.st_mode), "%s is not a regular file", path);
	cr_expect_eq(st.st_mode & 07777, mode, "%s: mode %o, not %o", path, st.st_mode & 07777, mode);
	cr_expect_eq(st.st_uid, 0, "%s: owner %u", path, st.st_uid);
	cr_expect_eq(st.st_gid, 0, "%s: group %u", path, st.st_gid);
	cr_expect_eq(st.st_mtime, 0, "%s: mtime %lld", path, (long long)st.st_mtime);
	cr_assert_eq((size_t)st.st_size, len, "%s: %lld bytes, not %zu", path, (long long)st.st_size, len);
	unsigned char *got = malloc(len ? len : 1);
	cr_assert(got);
	FILE *f = fopen(path, "re");
	cr_assert(f, "%s: %s", path, strerror(errno));
	size_t n = fread(got, 1, len, f);
	fclose(f);
	cr_expect(n == len && memcmp(got, want, len) == 0, "%s differs from what the builder embeds", path);
	free(got);
}

static bool has_setid_files(const char *dir)
{
	char p[PBUF];
	const char *names[] = { "su", "passwd", "mount", "umount", "chsh", "chfn", "newgrp", "gpasswd" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		struct stat st;
		fmt_path(p, "%s/usr/bin/%s", dir, names[i]);
		if (lstat(p, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)))
			return true;
	}
	return false;
}

Test(image, image_build_default, .timeout = 900)
{
	if (getenv("AIRLOCK_TEST_SKIP_IMAGE_BUILD"))
		cr_skip_test("AIRLOCK_TEST_SKIP_IMAGE_BUILD is set");
	if (!host_root())
		cr_skip_test("image build needs root in the initial user namespace (debootstrap, loop devices)");
	const char *cache = getenv("AIRLOCK_TEST_IMAGE_STORE");
	airlock_image_store *s = open_store(cache && *cache ? cache : tmpdir());
	airlock_error err = { 0 };
	char digest[72];
	int found = airlock_image_find_default(s, digest, &err);
	cr_assert_geq(found, 0, "%s", err.message);
	if (found) {
		cr_log_info("reusing %s from %s", digest, airlock_image_store_path(s));
	} else {
		util_buf prog;
		util_buf_init(&prog, 65536);
		int64_t t0 = util_monotonic_ms();
		int r = airlock_image_build(s, NULL, collect_progress, &prog, digest, &err);
		cr_log_info("build took %lld s", (long long)((util_monotonic_ms() - t0) / 1000));
		cr_assert_eq(r, 0, "build: %s\nprogress:\n%s", err.message, prog.data);
		const char *steps[] = { "mirror: ", "debootstrap: fetching", "guest files: ",
			                "mkfs.erofs", "sha256", "stored sha256:" };
		for (size_t i = 0; i < ARRAY_SIZE(steps); i++)
			cr_expect(strstr((char *)prog.data, steps[i]) != NULL, "no '%s' in:\n%s",
			          steps[i], prog.data);
		util_buf_clear(&prog);
		/* The build left nothing in tmp/, and its record finds it. */
		char p[PBUF], again[72];
		fmt_path(p, "%s/tmp", airlock_image_store_path(s));
		cr_expect_eq(dir_entries(p), 0, "the build left files in tmp/");
		cr_assert_eq(airlock_image_find_default(s, again, &err), 1, "%s", err.message);
		cr_expect_str_eq(again, digest);
	}
	cr_assert(airlock_image_digest_valid(digest), "%s", digest);

	int fd = -1;
	cr_assert_eq(airlock_image_open_verified(s, digest, &fd, &err), 0, "%s", err.message);
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	cr_log_info("image %s: %.1f MiB", digest, (double)st.st_size / (1024.0 * 1024.0));

	char dev[64];
	g.loop_fd = loop_attach(fd, dev);
	close(fd);
	const char *mnt_parent = tmpdir();
	char mnt[PBUF];
	fmt_path(mnt, "%s/root", mnt_parent);
	cr_assert_eq(mkdir(mnt, 0755), 0);
	cr_assert_eq(mount(dev, mnt, "erofs", MS_RDONLY | MS_NODEV | MS_NOSUID | MS_NOEXEC, NULL), 0,
	             "mount erofs from %s: %s", dev, strerror(errno));
	fmt_path(g.mnt, "%s", mnt);

	char p[PBUF];
	const char *must[] = { "usr/bin/python3", "bin/bash", "usr/bin/git", "usr/bin/find",
		               "usr/bin/tar", "usr/bin/gzip", "usr/bin/sed", "usr/bin/grep",
		               "usr/bin/pip3",
		               /* python3-venv: `python3 -m venv` needs it */
		               "usr/lib/python3.11/ensurepip/__init__.py",
		               "etc/ssl/certs/ca-certificates.crt" };
	for (size_t i = 0; i < ARRAY_SIZE(must); i++) {
		fmt_path(p, "%s/%s", mnt, must[i]);
		struct stat fst;
		/* stat follows /bin -> usr/bin, a relative link inside the image. */
		cr_expect_eq(stat(p, &fst), 0, "/%s missing from the image", must[i]);
		cr_expect(S_ISREG(fst.st_mode), "/%s is not a file", must[i]);
		/* mkfs.erofs -T0 and --all-root: fixed times, root-owned. */
		cr_expect_eq(fst.st_mtime, 0, "/%s has mtime %lld", must[i], (long long)fst.st_mtime);
		cr_expect_eq(fst.st_uid, 0);
	}
	/* Cleaned: empty machine-id, no apt lists, no device nodes, no setuid. */
	fmt_path(p, "%s/etc/machine-id", mnt);
	struct stat mid;
	if (lstat(p, &mid) == 0)
		cr_expect_eq(mid.st_size, 0, "machine-id is not empty");
	fmt_path(p, "%s/var/lib/apt/lists", mnt);
	cr_expect_eq(dir_entries(p), 0, "apt lists left in the image");
	/* Nothing of the build host: not its resolver, its name or its mirror. */
	const struct {
		const char *file, *want;
	} neutral[] = {
		{ "etc/resolv.conf", "# A sandbox has no resolver.\n" },
		{ "etc/hostname", "sandbox\n" },
		{ "etc/hosts", "127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n"
		               "::1\tlocalhost ip6-localhost ip6-loopback\n" },
		{ "etc/apt/sources.list", "# A sandbox has no package mirror.\n" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(neutral); i++) {
		fmt_path(p, "%s/%s", mnt, neutral[i].file);
		struct stat nst;
		cr_expect_eq(lstat(p, &nst), 0, "/%s: %s", neutral[i].file, strerror(errno));
		cr_expect(S_ISREG(nst.st_mode) && (nst.st_mode & 0777) == 0644, "/%s: mode %o",
		          neutral[i].file, nst.st_mode);
		char got[512] = "";
		FILE *nf = fopen(p, "re");
		size_t n = nf ? fread(got, 1, sizeof(got) - 1, nf) : 0;
		got[n] = 0;
		if (nf)
			fclose(nf);
		cr_expect_str_eq(got, neutral[i].want, "/%s", neutral[i].file);
	}
	/* airlock's guest files (airlock/guest.h): the builder's embedded
	 * bytes, root-owned, time 0, and the preload list naming the shim. */
	fmt_path(p, "%s%s", mnt, AIRLOCK_GUEST_PROGRAM);
	expect_file_bytes(p, image_guest_program_blob, image_guest_program_blob_len, 0755);
	fmt_path(p, "%s%s", mnt, AIRLOCK_GUEST_STATX_SHIM);
	expect_file_bytes(p, image_guest_shim_blob, image_guest_shim_blob_len, 0644);
	static const char preload[] = AIRLOCK_GUEST_STATX_SHIM "\n";
	fmt_path(p, "%s%s", mnt, AIRLOCK_GUEST_PRELOAD);
	expect_file_bytes(p, (const unsigned char *)preload, sizeof(preload) - 1, 0644);
	fmt_path(p, "%s%s", mnt, AIRLOCK_GUEST_DIR);
	cr_assert_eq(lstat(p, &mid), 0, "%s: %s", AIRLOCK_GUEST_DIR, strerror(errno));
	cr_expect(S_ISDIR(mid.st_mode) && (mid.st_mode & 07777) == 0755, "%s: mode %o",
	          AIRLOCK_GUEST_DIR, mid.st_mode);
	fmt_path(p, "%s/dev/null", mnt);
	cr_expect_neq(lstat(p, &mid), 0, "a device node is in the image");
	cr_expect(!has_setid_files(mnt), "a setuid or setgid file is in the image");
	fmt_path(p, "%s/", mnt);
	cr_assert_eq(stat(p, &mid), 0);
	cr_expect_eq(mid.st_mode & 0777, 0755, "the image's / is %o", mid.st_mode & 0777);
	cr_expect_eq(mid.st_uid, 0);

	cr_assert_eq(umount2(mnt, 0), 0, "umount: %s", strerror(errno));
	g.mnt[0] = 0;
	ioctl(g.loop_fd, LOOP_CLR_FD, 0);
	close(g.loop_fd);
	g.loop_fd = -1;
}
