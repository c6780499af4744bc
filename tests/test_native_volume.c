/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The native mechanism's workspace volume and loop devices
 * (src/host/volume.h and loop.h).
 *
 * These run as root: they bind loop devices and mount ext4. Without root or
 * /dev/loop-control every test skips.
 *
 * Leak accounting is exact rather than global: each test puts its backing
 * files on a tmpfs of its own, mounted detached (it has no path either), so
 * "loop devices bound to a file on this test's tmpfs" counts the test's own
 * devices and nothing another test or another user of the machine is doing
 * at the same time. The global count (what `losetup -a` lists) is printed
 * beside it for the record.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/loop.h>
#include <linux/magic.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "airlock/port/workspace.h"
#include "host/loop.h"
#include "airlock/volume.h"
#include "host/volume.h"
#include "util/util.h"

#define MiB ((int64_t)1 << 20)
#define GiB ((int64_t)1 << 30)
#define SANDBOX_UID 100000
#define SANDBOX_GID 100001

/* ---- helpers --------------------------------------------------------------- */

static void need_root(void)
{
	if (geteuid() != 0 || access("/dev/loop-control", R_OK | W_OK) != 0)
		cr_skip_test("needs root and /dev/loop-control");
}

/* A detached tmpfs of the given size: the test's backing directory. */
static int backing_new(int64_t size)
{
	int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
	cr_assert(fs >= 0, "fsopen tmpfs: %s", strerror(errno));
	char sz[32];
	snprintf(sz, sizeof(sz), "%" PRId64, size);
	cr_assert_eq(fsconfig(fs, FSCONFIG_SET_STRING, "size", sz, 0), 0);
	cr_assert_eq(fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0700", 0), 0);
	cr_assert_eq(fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0), 0, "%s", strerror(errno));
	int m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	cr_assert(m >= 0, "fsmount: %s", strerror(errno));
	close(fs);
	return m;
}

static dev_t dev_of(int fd)
{
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	return st.st_dev;
}

/* Call fn with the status of every bound loop device. Returns 0, or -1 when
 * /sys/block cannot be read. No assertion: a forked child calls it too. */
static int loops_each(void (*fn)(const struct loop_info64 *info, void *arg), void *arg)
{
	DIR *d = opendir("/sys/block");
	if (!d)
		return -1;
	struct dirent *de;
	while ((de = readdir(d))) {
		int n;
		char tail;
		if (sscanf(de->d_name, "loop%d%c", &n, &tail) != 1)
			continue;
		char path[64];
		snprintf(path, sizeof(path), "/dev/loop%d", n);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct loop_info64 info;
		if (ioctl(fd, LOOP_GET_STATUS64, &info) == 0)
			fn(&info, arg);
		close(fd);
	}
	closedir(d);
	return 0;
}

typedef struct loop_count {
	dev_t mine;
	int all, own;
} loop_count;

static void count_one(const struct loop_info64 *info, void *arg)
{
	loop_count *c = arg;
	c->all++;
	if (info->lo_device == (uint64_t)c->mine)
		c->own++;
}

/* Bound loop devices: all of them (losetup -a), and those whose backing file
 * is on device `mine`. */
static void count_loops(dev_t mine, int *ret_all, int *ret_mine)
{
	loop_count c = { .mine = mine };
	cr_assert_eq(loops_each(count_one, &c), 0);
	if (ret_all)
		*ret_all = c.all;
	if (ret_mine)
		*ret_mine = c.own;
}

static int loops_mine(dev_t mine)
{
	int own;
	count_loops(mine, NULL, &own);
	return own;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	cr_assert(d);
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static host_volume *vol_new(int backing, int64_t bytes, int64_t inodes)
{
	host_volume *v = NULL;
	airlock_error e = { 0 };
	int r = host_volume_create(backing, bytes, inodes, SANDBOX_UID, SANDBOX_GID, &v, &e);
	cr_assert_eq(r, 0, "create: %d %s", r, e.message);
	cr_assert(v);
	return v;
}

static bool vol_full(host_volume *v)
{
	bool full = false;
	airlock_error e = { 0 };
	cr_assert_eq(host_volume_full(v, &full, &e), 0, "%s", e.message);
	return full;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int loop_max_part(void)
{
	FILE *f = fopen("/sys/module/loop/parameters/max_part", "re");
	int n = 0;
	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = 0;
		fclose(f);
	}
	return n;
}

/* The number of the loop device bound to the file behind fd, or -1. */
static int loop_of(int fd)
{
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	for (int n = 0; n < 4096; n++) {
		char path[64];
		snprintf(path, sizeof(path), "/dev/loop%d", n);
		int lfd = open(path, O_RDONLY | O_CLOEXEC);
		if (lfd < 0)
			continue;
		struct loop_info64 info;
		bool match = ioctl(lfd, LOOP_GET_STATUS64, &info) == 0 &&
		             info.lo_device == (uint64_t)st.st_dev && info.lo_inode == st.st_ino;
		close(lfd);
		if (match)
			return n;
	}
	return -1;
}

/* ---- loop devices -------------------------------------------------------- */

Test(loop, attach_sets_autoclear_and_release_detaches, .init = need_root)
{
	int b = backing_new(64 * MiB);
	dev_t bdev = dev_of(b);
	int f = openat(b, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	cr_assert(f >= 0);
	cr_assert_eq(ftruncate(f, 8 * MiB), 0);

	for (int ro = 0; ro <= 1; ro++) {
		host_loop l = { .fd = -1 };
		airlock_error e = { 0 };
		cr_assert_eq(host_loop_attach(f, ro, &l, &e), 0, "%s", e.message);
		cr_assert(l.fd >= 0);
		char want[32];
		snprintf(want, sizeof(want), "/dev/loop%d", l.number);
		cr_assert_str_eq(l.path, want);
		int fl = fcntl(l.fd, F_GETFD);
		cr_assert(fl & FD_CLOEXEC);

		struct loop_info64 info;
		cr_assert_eq(ioctl(l.fd, LOOP_GET_STATUS64, &info), 0);
		cr_assert(info.lo_flags & LO_FLAGS_AUTOCLEAR);
		cr_assert_eq(!!(info.lo_flags & LO_FLAGS_READ_ONLY), ro);
		cr_assert_not(info.lo_flags & LO_FLAGS_DIRECT_IO);
		/* The kernel forces partition scanning when the loop module has
		 * max_part set; we never ask for it. */
		if (!loop_max_part())
			cr_assert_not(info.lo_flags & LO_FLAGS_PARTSCAN);
		cr_assert_eq(info.lo_file_name[0], 0, "no path recorded");
		cr_assert_eq(loops_mine(bdev), 1);

		host_loop_release(&l);
		cr_assert_eq(l.fd, -1);
		host_loop_release(&l); /* twice is harmless */
		cr_assert_eq(loops_mine(bdev), 0, "autoclear detached it");
	}
	airlock_error e = { 0 };
	host_loop l = { .fd = -1 };
	cr_assert_eq(host_loop_attach(-1, false, &l, &e), -EBADF);
	host_loop_release(NULL);
	close(f);
	close(b);
}

typedef struct attach_job {
	int backing;
	host_loop loop;
	int r;
} attach_job;

static void *attach_thread(void *p)
{
	attach_job *j = p;
	airlock_error e = { 0 };
	j->r = host_loop_attach(j->backing, false, &j->loop, &e);
	return NULL;
}

/* Many attaches at once race for the same "free" number; each loser retries. */
Test(loop, concurrent_attaches_get_distinct_devices, .init = need_root)
{
	enum { N = 8 };
	int b = backing_new(64 * MiB);
	dev_t bdev = dev_of(b);
	attach_job jobs[N];
	pthread_t t[N];
	for (int i = 0; i < N; i++) {
		jobs[i] = (attach_job){ .backing = openat(b, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600),
		                        .loop = { .fd = -1 } };
		cr_assert(jobs[i].backing >= 0);
		cr_assert_eq(ftruncate(jobs[i].backing, MiB), 0);
	}
	for (int i = 0; i < N; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, attach_thread, &jobs[i]), 0);
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(jobs[i].r, 0, "job %d: %d", i, jobs[i].r);
		for (int k = 0; k < i; k++)
			cr_assert_neq(jobs[i].loop.number, jobs[k].loop.number);
	}
	cr_assert_eq(loops_mine(bdev), N);
	for (int i = 0; i < N; i++) {
		host_loop_release(&jobs[i].loop);
		close(jobs[i].backing);
	}
	cr_assert_eq(loops_mine(bdev), 0);
	close(b);
}

/* Many attaches at once after churn, and churn under many attaches: every
 * one succeeds. LOOP_CTL_GET_FREE hands every caller the same lowest free
 * number until one of them has bound it, and a LOOP_CONFIGURE over a file
 * on a disk filesystem takes milliseconds (tens on a loaded host), so
 * callers that start together race for one device at a time; with a fixed
 * small number of immediate retries some of them failed while free devices
 * remained (5 of 64 provisions failed with "no free
 * device after 16 attempts"). The backing files are on a disk filesystem
 * (/var/tmp), as the service's volumes are: on tmpfs the window is 100
 * times shorter and the race is rarely lost. Devices are counted by their
 * backing files' inodes, so another user's devices on the same disk do not
 * count. */
enum { CHURN_THREADS = 64, CHURN_CYCLES = 200, CHURN_ROUNDS = 4 };
#define CHURN_FILE_BYTES (4 * MiB)
#define CHURN_DIR "/var/tmp"

typedef struct churn_job {
	int backing;
	pthread_barrier_t *start;
	int rounds; /* attach and release this many times, then attach and hold */
	host_loop loop;
	int r;
	char msg[sizeof(((airlock_error *)0)->message)];
} churn_job;

static void *churn_thread(void *p)
{
	churn_job *j = p;
	pthread_barrier_wait(j->start);
	for (int i = 0; i <= j->rounds; i++) {
		airlock_error e = { 0 };
		j->r = host_loop_attach(j->backing, false, &j->loop, &e);
		if (j->r < 0) {
			snprintf(j->msg, sizeof(j->msg), "%s", e.message);
			return NULL;
		}
		if (i < j->rounds)
			host_loop_release(&j->loop);
	}
	return NULL;
}

typedef struct churn_count {
	const churn_job *jobs;
	int n, count;
} churn_count;

static void churn_count_one(const struct loop_info64 *info, void *arg)
{
	churn_count *c = arg;
	for (int i = 0; i < c->n; i++) {
		struct stat st;
		if (fstat(c->jobs[i].backing, &st) == 0 && info->lo_device == (uint64_t)st.st_dev &&
		    info->lo_inode == st.st_ino)
			c->count++;
	}
}

/* Bound loop devices whose backing file is one of jobs[0..n) (-1: none
 * could be listed). */
static int churn_bound(const churn_job *jobs, int n)
{
	churn_count c = { .jobs = jobs, .n = n };
	return loops_each(churn_count_one, &c) < 0 ? -1 : c.count;
}

/* n threads start together, each attaching (and releasing) rounds times and
 * then attaching once more and holding it; then all are released. Returns
 * how many failed (the first one's message in first), and sets *distinct
 * (the held devices were distinct) and *left (how many of them are still
 * bound after the release). No assertion: a forked child runs it too. */
static int churn_attempt(int dir, int n, int rounds, char *first, size_t first_size,
                         bool *distinct, int *left)
{
	churn_job jobs[CHURN_THREADS];
	pthread_t t[CHURN_THREADS];
	pthread_barrier_t start;
	int failed = 0;
	*distinct = true;
	*left = 0;
	first[0] = 0;
	if (n > CHURN_THREADS || pthread_barrier_init(&start, NULL, (unsigned)n) != 0)
		return n;
	for (int i = 0; i < n; i++) {
		jobs[i] = (churn_job){ .backing = openat(dir, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600),
		                       .start = &start, .rounds = rounds, .loop = { .fd = -1 } };
		if (jobs[i].backing < 0 || ftruncate(jobs[i].backing, CHURN_FILE_BYTES) < 0) {
			jobs[i].r = -errno;
			snprintf(jobs[i].msg, sizeof(jobs[i].msg), "backing file in " CHURN_DIR ": %s",
			         strerror(errno));
		}
	}
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, churn_thread, &jobs[i]) != 0)
			abort(); /* the barrier would wait forever */
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < n; i++) {
		if (jobs[i].r < 0 && failed++ == 0)
			snprintf(first, first_size, "%s", jobs[i].msg);
		for (int k = 0; k < i && jobs[i].r == 0; k++)
			if (jobs[k].r == 0 && jobs[i].loop.number == jobs[k].loop.number)
				*distinct = false;
	}
	for (int i = 0; i < n; i++)
		host_loop_release(&jobs[i].loop);
	/* Autoclear detaches a device when its last opener closes it: another
	 * process that has it open at that moment (a loser of a race, a scan
	 * like churn_bound's) delays that to its own close. A bounded wait. */
	for (int i = 0; i < 100 && (*left = churn_bound(jobs, n)) != 0; i++)
		usleep(20 * 1000);
	for (int i = 0; i < n; i++)
		if (jobs[i].backing >= 0)
			close(jobs[i].backing);
	return failed;
}

static void churn_run(int dir, int n, int rounds)
{
	char first[sizeof(((churn_job *)0)->msg)];
	bool distinct;
	int left;
	int failed = churn_attempt(dir, n, rounds, first, sizeof(first), &distinct, &left);
	cr_assert_eq(failed, 0, "%d of %d concurrent attaches (%d each) failed: %s", failed, n,
	             rounds + 1, first);
	cr_assert(distinct, "two attaches got the same device");
	cr_assert_eq(left, 0, "%d released devices are still bound", left);
}

/* The same in procs processes at once, n threads each: races lost to
 * another process, as with a second service on the host. */
static void churn_run_processes(int dir, int procs, int n, int rounds)
{
	pid_t pids[8];
	int pipes[8][2];
	cr_assert_leq(procs, 8);
	for (int p = 0; p < procs; p++) {
		cr_assert_eq(pipe2(pipes[p], O_CLOEXEC), 0);
		pids[p] = fork();
		cr_assert_geq(pids[p], 0);
		if (pids[p] == 0) {
			char first[sizeof(((churn_job *)0)->msg)];
			bool distinct;
			int left;
			int failed = churn_attempt(dir, n, rounds, first, sizeof(first), &distinct, &left);
			char line[512];
			int len = snprintf(line, sizeof(line), "%d failed, %s, %d left bound: %s", failed,
			                   distinct ? "distinct" : "NOT distinct", left, first);
			ssize_t w = write(pipes[p][1], line, (size_t)len);
			(void)w;
			_exit(failed == 0 && distinct && left == 0 ? 0 : 1);
		}
		close(pipes[p][1]);
	}
	for (int p = 0; p < procs; p++) {
		char line[512] = "";
		ssize_t got = read(pipes[p][0], line, sizeof(line) - 1);
		line[got > 0 ? got : 0] = 0;
		close(pipes[p][0]);
		int st = 0;
		cr_assert_eq(waitpid(pids[p], &st, 0), pids[p]);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		          "process %d of %d (%d threads, %d attaches each): %s", p + 1, procs, n,
		          rounds + 1, line);
	}
}

Test(loop, concurrent_attaches_after_churn_all_succeed, .init = need_root, .timeout = 600)
{
	int dir = open(CHURN_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert(dir >= 0, CHURN_DIR ": %s", strerror(errno));
	struct statfs fs;
	cr_assert_eq(fstatfs(dir, &fs), 0);
	if (fs.f_type == TMPFS_MAGIC)
		cr_log_warn(CHURN_DIR " is a tmpfs here: the race this test provokes is rarer");
	/* The churn: CHURN_CYCLES attach/release cycles, 8 threads at once. */
	churn_run(dir, 8, CHURN_CYCLES / 8 - 1);
	/* Then 64 at once, each holding its device. */
	churn_run(dir, CHURN_THREADS, 0);
	/* And 64 at once that churn while the others attach. */
	churn_run(dir, CHURN_THREADS, CHURN_ROUNDS);
	/* And 4 processes of 16 at once, each churning. */
	churn_run_processes(dir, 4, CHURN_THREADS / 4, CHURN_ROUNDS);
	close(dir);
}

/* ---- the volume ------------------------------------------------------------ */

Test(volume, create_owns_root_and_is_empty_ext4, .init = need_root)
{
	int b = backing_new(256 * MiB);
	dev_t bdev = dev_of(b);
	int all0;
	count_loops(bdev, &all0, NULL);
	cr_assert_eq(loops_mine(bdev), 0);

	host_volume *v = vol_new(b, 64 * MiB, 1000);
	int root = host_volume_root_fd(v), mnt = host_volume_mount_fd(v);
	cr_assert(root >= 0 && mnt >= 0 && root != mnt);
	cr_assert(fcntl(root, F_GETFD) & FD_CLOEXEC);
	cr_assert(fcntl(mnt, F_GETFD) & FD_CLOEXEC);
	cr_assert(fcntl(host_volume_backing_fd(v), F_GETFD) & FD_CLOEXEC);
	/* O_PATH, as the header promises: it cannot be read or written. */
	cr_assert(fcntl(root, F_GETFL) & O_PATH);

	struct stat st, ms;
	cr_assert_eq(fstat(root, &st), 0);
	cr_assert_eq(fstat(mnt, &ms), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_uid, SANDBOX_UID);
	cr_assert_eq(st.st_gid, SANDBOX_GID);
	cr_assert_eq(st.st_mode & 07777, 0755);
	cr_assert_eq(st.st_dev, ms.st_dev);
	cr_assert_eq(st.st_ino, ms.st_ino);

	struct statfs sfs;
	cr_assert_eq(fstatfs(root, &sfs), 0);
	cr_assert_eq(sfs.f_type, EXT4_SUPER_MAGIC);
	cr_assert_eq(sfs.f_bsize, 4096);
	cr_assert(sfs.f_flags & ST_NOSUID);
	cr_assert(sfs.f_flags & ST_NODEV);
	cr_assert_not(sfs.f_flags & ST_NOEXEC, "exec stays allowed");
	cr_assert_not(sfs.f_flags & ST_RDONLY);
	cr_assert_geq(sfs.f_ffree, 1000);

	/* Empty: lost+found is gone. */
	airlock_workspace *ws = NULL;
	airlock_error e = { 0 };
	cr_assert_eq(host_volume_workspace(v, &ws, &e), 0, "%s", e.message);
	airlock_dir_listing l = { 0 };
	cr_assert_eq(airlock_workspace_listdir(ws, "", 100, &l, &e), 0, "%s", e.message);
	cr_assert_eq(l.n, 0);
	airlock_dir_listing_clear(&l);
	airlock_workspace_free(ws);

	cr_assert_eq(loops_mine(bdev), 1);
	cr_assert_eq(host_volume_check_identity(v, &e), 0, "%s", e.message);
	host_volume_destroy(v);
	host_volume_destroy(NULL);
	int all1, mine1;
	count_loops(bdev, &all1, &mine1);
	cr_assert_eq(mine1, 0, "no loop device left");
	fprintf(stderr, "[volume] losetup -a count before %d, after %d (global, informational)\n",
	        all0, all1);
	close(b);
}

Test(volume, provenance_tool_and_sandbox_written, .init = need_root)
{
	int b = backing_new(256 * MiB);
	host_volume *v = vol_new(b, 64 * MiB, 1000);
	airlock_workspace *ws = NULL;
	airlock_error e = { 0 };
	cr_assert_eq(host_volume_workspace(v, &ws, &e), 0, "%s", e.message);

	cr_assert_eq(airlock_workspace_write(ws, "tool.txt", "from the tool", 13, &e), 0, "%s",
	             e.message);
	/* What a process in the sandbox does: a plain create on the volume. */
	int fd = openat(host_volume_root_fd(v), "sandbox.txt",
	                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	cr_assert(fd >= 0, "%s", strerror(errno));
	cr_assert_eq(write(fd, "from the sandbox", 16), 16);
	close(fd);

	airlock_provenance p = AIRLOCK_PROVENANCE_INVALID;
	cr_assert_eq(airlock_workspace_provenance(ws, "tool.txt", &p, &e), 0, "%s", e.message);
	cr_assert_eq(p, AIRLOCK_PROVENANCE_TOOL_WRITTEN);
	cr_assert_eq(airlock_workspace_provenance(ws, "sandbox.txt", &p, &e), 0, "%s", e.message);
	cr_assert_eq(p, AIRLOCK_PROVENANCE_SANDBOX_WRITTEN);
	cr_assert_eq(airlock_workspace_provenance(ws, "never", &p, &e), 0, "%s", e.message);
	cr_assert_eq(p, AIRLOCK_PROVENANCE_UNKNOWN);

	/* The sandbox rewriting the tool's file takes the label away. */
	fd = openat(host_volume_root_fd(v), "tool.txt", O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, "x", 1), 1);
	close(fd);
	cr_assert_eq(airlock_workspace_provenance(ws, "tool.txt", &p, &e), 0, "%s", e.message);
	cr_assert_eq(p, AIRLOCK_PROVENANCE_SANDBOX_WRITTEN);

	unsigned char *data = NULL;
	size_t len = 0;
	cr_assert_eq(airlock_workspace_read(ws, "sandbox.txt", 100, &data, &len, &e), 0, "%s",
	             e.message);
	cr_assert_eq(len, 16);
	cr_assert_eq(memcmp(data, "from the sandbox", 16), 0);
	free(data);

	/* The handle cannot leave the volume: a symlink to the host root
	 * resolves outside it. */
	cr_assert_eq(symlinkat("/etc", host_volume_root_fd(v), "host"), 0);
	cr_assert_eq(airlock_workspace_read(ws, "host/passwd", 1 << 20, &data, &len, &e),
	             airlock_errcode(AIRLOCK_ERR_WORKSPACE_ESCAPE));

	airlock_workspace_free(ws);
	host_volume_destroy(v);
	close(b);
}

Test(volume, disk_filler_makes_it_full, .init = need_root)
{
	int b = backing_new(256 * MiB);
	dev_t bdev = dev_of(b);
	host_volume *v = vol_new(b, 64 * MiB, 1000);
	cr_assert_not(vol_full(v));

	struct statfs s0;
	cr_assert_eq(fstatfs(host_volume_root_fd(v), &s0), 0);
	int fd = openat(host_volume_root_fd(v), "fill", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	                0644);
	cr_assert(fd >= 0);
	static char chunk[1 << 16];
	memset(chunk, 0x5a, sizeof(chunk));
	int64_t written = 0;
	for (;;) {
		ssize_t n = write(fd, chunk, sizeof(chunk));
		if (n < 0) {
			cr_assert_eq(errno, ENOSPC, "%s", strerror(errno));
			break;
		}
		written += n;
		cr_assert_leq(written, 64 * MiB, "wrote past workspace_bytes");
	}
	/* Finish the last partial chunk so every last block is taken. */
	for (size_t sz = sizeof(chunk) / 2; sz >= 512; sz /= 2) {
		while (write(fd, chunk, sz) > 0)
			written += (int64_t)sz;
	}
	close(fd);
	cr_assert(vol_full(v), "a disk filler must make the volume full");
	fprintf(stderr,
	        "[volume] 64 MiB volume: %" PRId64 " bytes of file data fit (%.2f%% of workspace_bytes); "
	        "f_bavail at creation %" PRIu64 " blocks\n",
	        written, 100.0 * (double)written / (double)(64 * MiB), (uint64_t)s0.f_bavail);
	cr_assert_geq(written, 64 * MiB * 95 / 100, "usable space within a few percent");

	/* Deleting returns the space: not full any more. */
	cr_assert_eq(unlinkat(host_volume_root_fd(v), "fill", 0), 0);
	cr_assert_not(vol_full(v));
	host_volume_destroy(v);
	cr_assert_eq(loops_mine(bdev), 0);
	close(b);
}

Test(volume, file_count_filler_makes_it_full, .init = need_root)
{
	int b = backing_new(256 * MiB);
	host_volume *v = vol_new(b, 64 * MiB, 1000);
	cr_assert_not(vol_full(v));
	struct statfs s0;
	cr_assert_eq(fstatfs(host_volume_root_fd(v), &s0), 0);

	int made = 0;
	for (;;) {
		char name[32];
		snprintf(name, sizeof(name), "f%06d", made);
		int fd = openat(host_volume_root_fd(v), name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		                0644);
		if (fd < 0) {
			cr_assert_eq(errno, ENOSPC, "%s", strerror(errno));
			break;
		}
		close(fd);
		made++;
		cr_assert_lt(made, 100000);
	}
	cr_assert(vol_full(v), "a file-count filler must make the volume full");
	fprintf(stderr,
	        "[volume] inodes_max 1000: %d files fit (f_files %" PRIu64 ", f_ffree at creation %" PRIu64
	        "; +%.1f%%)\n",
	        made, (uint64_t)s0.f_files, (uint64_t)s0.f_ffree, 100.0 * (made - 1000) / 1000.0);
	cr_assert_geq(made, 1000, "at least inodes_max files fit");
	cr_assert_leq(made, 1000 * 105 / 100, "rounded up by at most a few percent");

	/* One removed: room again. */
	cr_assert_eq(unlinkat(host_volume_root_fd(v), "f000000", 0), 0);
	cr_assert_not(vol_full(v));
	host_volume_destroy(v);
	close(b);
}

/* The volume cannot be mounted or reached by path: there is none. It is on
 * no mount table (ours or init's), its descriptors name "/" of a detached
 * tree, and the backing file has no name. */
Test(volume, has_no_path_anywhere, .init = need_root)
{
	int b = backing_new(256 * MiB);
	host_volume *v = vol_new(b, 64 * MiB, 1000);
	struct stat st;
	cr_assert_eq(fstat(host_volume_root_fd(v), &st), 0);
	char devid[32];
	snprintf(devid, sizeof(devid), " %u:%u ", major(st.st_dev), minor(st.st_dev));

	const char *tables[] = { "/proc/self/mountinfo", "/proc/1/mountinfo" };
	for (size_t i = 0; i < ARRAY_SIZE(tables); i++) {
		FILE *f = fopen(tables[i], "re");
		cr_assert(f);
		char line[4096];
		while (fgets(line, sizeof(line), f))
			cr_assert_null(strstr(line, devid), "%s lists the volume: %s", tables[i], line);
		fclose(f);
	}

	char link[64], target[256];
	int fds[] = { host_volume_root_fd(v), host_volume_mount_fd(v) };
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fds[i]);
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		cr_assert(n > 0);
		target[n] = 0;
		cr_assert_str_eq(target, "/", "a detached mount's root");
	}
	cr_assert_eq(fstat(host_volume_backing_fd(v), &st), 0);
	cr_assert_eq(st.st_nlink, 0, "the backing file has no name");

	host_volume_destroy(v);
	close(b);
}

Test(volume, identity_check_catches_a_swapped_descriptor, .init = need_root)
{
	int b = backing_new(256 * MiB);
	dev_t bdev = dev_of(b);
	host_volume *a = vol_new(b, 16 * MiB, 100);
	host_volume *c = vol_new(b, 16 * MiB, 100);
	airlock_error e = { 0 };
	cr_assert_eq(host_volume_check_identity(a, &e), 0, "%s", e.message);
	cr_assert_eq(host_volume_check_identity(c, &e), 0, "%s", e.message);

	/* Swap another volume's root in under a's descriptor number: what a
	 * descriptor-table mix-up or a replaced workspace looks like. */
	cr_assert_eq(dup2(host_volume_root_fd(c), host_volume_root_fd(a)),
	             host_volume_root_fd(a));
	cr_assert(fcntl(host_volume_root_fd(a), F_SETFD, FD_CLOEXEC) == 0);
	int r = host_volume_check_identity(a, &e);
	cr_assert_eq(r, airlock_errcode(AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED), "%d", r);
	cr_assert_eq(e.cls, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED);
	cr_assert(strstr(e.message, "inode"), "%s", e.message);
	cr_assert_null(strstr(e.message, "/tmp"), "%s", e.message);
	/* And no workspace is handed out over the swapped root. */
	airlock_workspace *ws = NULL;
	cr_assert_eq(host_volume_workspace(a, &ws, &e),
	             airlock_errcode(AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED));
	cr_assert_null(ws);
	cr_assert_eq(host_volume_check_identity(c, &e), 0, "%s", e.message);

	host_volume_destroy(a);
	host_volume_destroy(c);
	cr_assert_eq(loops_mine(bdev), 0);
	close(b);
}

/* Erased, not unlinked: after destroy the backing file holds no blocks and
 * reads as zeros (a duplicate descriptor keeps it open to look), the loop
 * device is gone, and the backing filesystem has its space back. */
Test(volume, destroy_erases_and_returns_the_space, .init = need_root)
{
	int b = backing_new(256 * MiB);
	dev_t bdev = dev_of(b);
	struct statfs h0, h1;
	cr_assert_eq(fstatfs(b, &h0), 0);

	host_volume *v = vol_new(b, 64 * MiB, 1000);
	int fd = openat(host_volume_root_fd(v), "secret", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	                0600);
	cr_assert(fd >= 0);
	static char chunk[1 << 20];
	memset(chunk, 0xab, sizeof(chunk));
	for (int i = 0; i < 8; i++)
		cr_assert_eq(write(fd, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
	cr_assert_eq(fsync(fd), 0);
	close(fd);
	cr_assert_eq(syncfs(host_volume_root_fd(v)) == 0 || errno == EBADF, 1);

	int backing = dup(host_volume_backing_fd(v));
	cr_assert(backing >= 0);
	struct stat st;
	cr_assert_eq(fstat(backing, &st), 0);
	cr_assert_geq(st.st_blocks * 512, 8 * MiB, "the data reached the backing file");
	cr_assert_eq(st.st_size, 64 * MiB);

	host_volume_destroy(v);
	cr_assert_eq(loops_mine(bdev), 0, "the loop device is detached");

	cr_assert_eq(fstat(backing, &st), 0);
	cr_assert_eq(st.st_blocks, 0, "every block punched: %lld left", (long long)st.st_blocks);
	cr_assert_eq(lseek(backing, 0, SEEK_DATA), -1);
	cr_assert_eq(errno, ENXIO, "no data anywhere in the file");
	static unsigned char rd[1 << 20];
	for (int64_t off = 0; off < 64 * MiB; off += (int64_t)sizeof(rd)) {
		cr_assert_eq(pread(backing, rd, sizeof(rd), (off_t)off), (ssize_t)sizeof(rd));
		for (size_t i = 0; i < sizeof(rd); i++)
			if (rd[i])
				cr_assert_fail("non-zero byte at %" PRId64, off + (int64_t)i);
	}
	close(backing);
	cr_assert_eq(fstatfs(b, &h1), 0);
	cr_assert_eq(h1.f_bfree, h0.f_bfree, "the backing filesystem has its space back");
	close(b);
}

/* The real order of events: the mount was moved into a sandbox's mount
 * namespace, the sandbox wrote data, the sandbox was killed, and destroy runs
 * right after. The namespace's last reference can go from a kernel work item
 * a moment after the reap, and unmounting writes back whatever was still
 * dirty; destroy must erase after that, not before. */
Test(volume, destroy_right_after_the_sandbox_still_erases, .init = need_root)
{
	int b = backing_new(256 * MiB);
	dev_t bdev = dev_of(b);
	for (int round = 0; round < 5; round++) {
		host_volume *v = vol_new(b, 64 * MiB, 1000);
		int ready[2];
		cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
		pid_t pid = fork();
		cr_assert(pid >= 0);
		if (pid == 0) {
			/* A stand-in sandbox: its own mount namespace with the
			 * volume moved in, some data left dirty, then it waits. */
			if (unshare(CLONE_NEWNS) < 0 ||
			    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
			    move_mount(host_volume_mount_fd(v), "", AT_FDCWD, "/mnt",
			               MOVE_MOUNT_F_EMPTY_PATH) < 0)
				_exit(1);
			int fd = open("/mnt/data", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
			static char chunk[1 << 20];
			memset(chunk, 0xcd, sizeof(chunk));
			for (int i = 0; fd >= 0 && i < 8; i++)
				if (write(fd, chunk, sizeof(chunk)) < 0)
					_exit(1);
			if (write(ready[1], "r", 1) != 1)
				_exit(1);
			pause();
			_exit(0);
		}
		close(ready[1]);
		char c;
		cr_assert_eq(read(ready[0], &c, 1), 1, "the stand-in sandbox did not start");
		close(ready[0]);
		kill(pid, SIGKILL);
		cr_assert_eq(waitpid(pid, NULL, 0), pid);

		int backing = dup(host_volume_backing_fd(v));
		host_volume_destroy(v);
		struct stat st;
		cr_assert_eq(fstat(backing, &st), 0);
		cr_assert_eq(st.st_blocks, 0, "round %d: %lld blocks came back after the erase", round,
		             (long long)st.st_blocks);
		close(backing);
		cr_assert_eq(loops_mine(bdev), 0, "round %d", round);
	}
	close(b);
}

Test(volume, fifty_cycles_leak_nothing, .init = need_root, .timeout = 240)
{
	int b = backing_new(256 * MiB);
	dev_t bdev = dev_of(b);
	struct statfs h0, h1;
	cr_assert_eq(fstatfs(b, &h0), 0);
	int all0;
	count_loops(bdev, &all0, NULL);
	int fds0 = count_fds();

	for (int i = 0; i < 50; i++) {
		host_volume *v = vol_new(b, 32 * MiB, 500);
		airlock_workspace *ws = NULL;
		airlock_error e = { 0 };
		cr_assert_eq(host_volume_workspace(v, &ws, &e), 0, "%s", e.message);
		cr_assert_eq(airlock_workspace_write(ws, "x", "y", 1, &e), 0, "%s", e.message);
		airlock_workspace_free(ws);
		host_volume_destroy(v);
	}
	int all1, mine1;
	count_loops(bdev, &all1, &mine1);
	cr_assert_eq(mine1, 0);
	cr_assert_eq(count_fds(), fds0, "descriptors leaked");
	cr_assert_eq(fstatfs(b, &h1), 0);
	cr_assert_eq(h1.f_bfree, h0.f_bfree);
	fprintf(stderr, "[volume] 50 cycles: losetup -a count before %d, after %d (global)\n", all0,
	        all1);
	close(b);
}

Test(volume, refusals_name_no_path_and_leak_nothing, .init = need_root)
{
	int b = backing_new(256 * MiB);
	dev_t bdev = dev_of(b);
	int fds0 = count_fds();
	host_volume *v = NULL;
	airlock_error e = { 0 };

	cr_assert_eq(host_volume_create(b, 64 * 1024, 100, 1, 1, &v, &e),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	cr_assert(strstr(e.message, "workspace_bytes"), "%s", e.message);
	cr_assert_eq(host_volume_create(b, 64 * MiB, 0, 1, 1, &v, &e),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	/* inodes_max is a maximum: a small volume gets the inodes it holds
	 * (half of it as inode table) instead of a refusal. */
	cr_assert_eq(airlock_volume_workspace_inodes(2 * MiB, 100000), 2 * MiB / 2 / 256 - 10);
	cr_assert_eq(airlock_volume_workspace_inodes(2 * MiB, 100), 100);
	cr_assert_eq(host_volume_create(b, 2 * MiB, 100000, 1, 1, &v, &e), 0, "%s", e.message);
	struct statfs vs;
	cr_assert_eq(fstatfs(host_volume_root_fd(v), &vs), 0);
	cr_assert_geq((int64_t)vs.f_ffree, airlock_volume_workspace_inodes(2 * MiB, 100000));
	host_volume_destroy(v);
	v = NULL;
	cr_assert_eq(host_volume_create(-1, 64 * MiB, 100, 1, 1, &v, &e), -EBADF);
	/* More than the backing filesystem has room for. */
	cr_assert_eq(host_volume_create(b, 4 * GiB, 1000, 1, 1, &v, &e),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE));
	/* A directory whose filesystem has no O_TMPFILE. */
	int proc = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert(proc >= 0);
	int r = host_volume_create(proc, 64 * MiB, 100, 1, 1, &v, &e);
	cr_assert_lt(r, 0);
	cr_assert_null(strstr(e.message, "/proc"), "%s", e.message);
	close(proc);
	cr_assert_null(v, "output untouched on failure");
	cr_assert_eq(count_fds(), fds0);
	cr_assert_eq(loops_mine(bdev), 0);
	close(b);
}

/* The smallest sizes still build a usable volume. */
Test(volume, small_limits, .init = need_root)
{
	int b = backing_new(64 * MiB);
	host_volume *v = vol_new(b, MiB, 1);
	struct statfs s;
	cr_assert_eq(fstatfs(host_volume_root_fd(v), &s), 0);
	cr_assert_geq(s.f_ffree, 1);
	int fd = openat(host_volume_root_fd(v), "one", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert(fd >= 0, "%s", strerror(errno));
	close(fd);
	fprintf(stderr, "[volume] 1 MiB / inodes_max 1: f_files %" PRIu64 " f_ffree %" PRIu64
	                " f_bavail %" PRIu64 "\n",
	        (uint64_t)s.f_files, (uint64_t)s.f_ffree, (uint64_t)s.f_bavail);
	host_volume_destroy(v);
	close(b);
}

/* The first volume of a shape is formatted by mkfs, the next ones are written
 * from the image kept in memory: both must be clean filesystems to e2fsck,
 * and behave the same. */
Test(volume, remembered_image_builds_a_clean_filesystem, .init = need_root)
{
	if (access("/usr/sbin/e2fsck", X_OK) != 0 && access("/sbin/e2fsck", X_OK) != 0)
		cr_skip_test("e2fsck not installed");
	int b = backing_new(256 * MiB);
	host_volume *v[3];
	for (int i = 0; i < 3; i++) {
		double t0 = now_ms();
		v[i] = vol_new(b, 48 * MiB, 777);
		fprintf(stderr, "[volume] 48 MiB/777 inodes, volume %d: create %.2f ms\n", i,
		        now_ms() - t0);
	}
	for (int i = 0; i < 3; i++) {
		int root = host_volume_root_fd(v[i]);
		/* Some use first, so fsck sees a filesystem that has been written. */
		cr_assert_eq(mkdirat(root, "d", 0755), 0);
		int fd = openat(root, "d/f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		cr_assert(fd >= 0);
		cr_assert_eq(write(fd, "data", 4), 4);
		close(fd);
		int dfd = openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		cr_assert(dfd >= 0);
		cr_assert_eq(syncfs(dfd), 0);
		close(dfd);

		int n = loop_of(host_volume_backing_fd(v[i]));
		cr_assert_geq(n, 0);
		char cmd[128];
		/* -n opens read-only; a mounted, synced filesystem without a
		 * journal reads consistently. */
		snprintf(cmd, sizeof(cmd),
		         "PATH=/usr/sbin:/sbin:/usr/bin:/bin e2fsck -fn /dev/loop%d >/dev/null 2>&1", n);
		int st = system(cmd);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "e2fsck on volume %d: status %d", i,
		          st);

		struct statfs s;
		cr_assert_eq(fstatfs(root, &s), 0);
		cr_assert_geq(s.f_ffree, 777 - 2);
	}
	struct statfs s0, s1;
	cr_assert_eq(fstatfs(host_volume_root_fd(v[0]), &s0), 0);
	cr_assert_eq(fstatfs(host_volume_root_fd(v[2]), &s1), 0);
	cr_assert_eq(s0.f_blocks, s1.f_blocks);
	cr_assert_eq(s0.f_files, s1.f_files);
	for (int i = 0; i < 3; i++)
		host_volume_destroy(v[i]);
	cr_assert_eq(loops_mine(dev_of(b)), 0);
	close(b);
}

typedef struct create_job {
	int backing;
	int64_t bytes;
	int failures;
	char message[AIRLOCK_ERROR_MESSAGE_MAX];
} create_job;

static void *create_thread(void *p)
{
	create_job *j = p;
	for (int i = 0; i < 6; i++) {
		host_volume *v = NULL;
		airlock_error e = { 0 };
		if (host_volume_create(j->backing, j->bytes, 300, SANDBOX_UID, SANDBOX_GID, &v, &e) <
		    0) {
			j->failures++;
			memcpy(j->message, e.message, sizeof(j->message));
			continue;
		}
		int fd = openat(host_volume_root_fd(v), "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, "x", 1) != 1)
			j->failures++;
		if (fd >= 0)
			close(fd);
		host_volume_destroy(v);
	}
	return NULL;
}

/* Threads creating volumes at once: of one shape (the first formats, the
 * rest race to remember it or reuse it) and of more shapes than the image
 * cache holds (eviction while others write from an image). */
Test(volume, concurrent_creates, .init = need_root, .timeout = 120)
{
	enum { N = 12 };
	int b = backing_new(1024 * MiB);
	dev_t bdev = dev_of(b);
	int fds0 = count_fds();
	create_job jobs[N];
	pthread_t t[N];
	for (int i = 0; i < N; i++) {
		/* half share one shape, the rest each have their own */
		jobs[i] = (create_job){ .backing = b,
		                        .bytes = i < N / 2 ? 24 * MiB : (24 + i) * MiB };
		cr_assert_eq(pthread_create(&t[i], NULL, create_thread, &jobs[i]), 0);
	}
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < N; i++)
		cr_assert_eq(jobs[i].failures, 0, "thread %d: %s", i, jobs[i].message);
	cr_assert_eq(loops_mine(bdev), 0);
	cr_assert_eq(count_fds(), fds0);
	close(b);
}

/* ---- timings --------------------------------------------------------------
 * Measured on the host's own filesystem (where the service keeps its backing
 * directory), not on the test's tmpfs. Printed, and bounded loosely so a
 * regression to seconds fails. */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void time_volume(int dir, int64_t bytes, int64_t inodes, int runs)
{
	double c[16], d[16];
	cr_assert_leq(runs, 16);
	struct statfs s = { 0 };
	for (int i = 0; i < runs; i++) {
		double t0 = now_ms();
		host_volume *v = vol_new(dir, bytes, inodes);
		double t1 = now_ms();
		/* a little data, as a real sandbox would leave behind */
		int fd = openat(host_volume_root_fd(v), "data", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		cr_assert(fd >= 0);
		static char chunk[1 << 20];
		for (int k = 0; k < 4; k++)
			cr_assert_eq(write(fd, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
		close(fd);
		cr_assert_eq(fstatfs(host_volume_root_fd(v), &s), 0);
		double t2 = now_ms();
		host_volume_destroy(v);
		double t3 = now_ms();
		c[i] = t1 - t0;
		d[i] = t3 - t2;
	}
	qsort(c, (size_t)runs, sizeof(double), cmp_double);
	qsort(d, (size_t)runs, sizeof(double), cmp_double);
	fprintf(stderr,
	        "[volume] %" PRId64 " MiB / %" PRId64 " inodes: create median %.1f ms (min %.1f, max "
	        "%.1f), destroy median %.1f ms (min %.1f, max %.1f); f_blocks %" PRIu64
	        " f_files %" PRIu64 " (usable data %.2f%% of workspace_bytes)\n",
	        bytes / MiB, inodes, c[runs / 2], c[0], c[runs - 1], d[runs / 2], d[0], d[runs - 1],
	        (uint64_t)s.f_blocks, (uint64_t)s.f_files,
	        100.0 * (double)(s.f_bavail * (uint64_t)s.f_bsize + 4 * MiB) / (double)bytes);
	cr_assert_lt(c[runs / 2], 2000.0);
	cr_assert_lt(d[runs / 2], 2000.0);
}

/* The timing test's directory: empty throughout (O_TMPFILE files only) and
 * removed by the fini, which runs after a failed assertion too. */
static char g_timing_dir[] = "/tmp/airlock-volume-XXXXXX";

static void timing_init(void)
{
	need_root();
	cr_assert(mkdtemp(g_timing_dir));
}

static void timing_fini(void)
{
	rmdir(g_timing_dir);
}

Test(volume, timings, .init = timing_init, .fini = timing_fini, .timeout = 240)
{
	int dfd = open(g_timing_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert(dfd >= 0);
	struct statfs h;
	cr_assert_eq(fstatfs(dfd, &h), 0);
	if ((uint64_t)h.f_bavail * (uint64_t)h.f_bsize < (uint64_t)(5 * GiB)) {
		close(dfd);
		cr_skip_test("needs 5 GiB free on /tmp to time a 4 GiB volume");
	}
	time_volume(dfd, 64 * MiB, 1000, 9);
	time_volume(dfd, 4 * GiB, 100000, 9);
	close(dfd);
}

/* Pages of fd's first len bytes in the page cache (mincore over a mapping). */
static int64_t cached_bytes(int fd, int64_t len)
{
	void *m = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert(m != MAP_FAILED, "mmap: %s", strerror(errno));
	long page = sysconf(_SC_PAGESIZE);
	size_t pages = ((size_t)len + (size_t)page - 1) / (size_t)page;
	unsigned char *vec = malloc(pages);
	cr_assert(vec);
	cr_assert_eq(mincore(m, (size_t)len, vec), 0, "mincore: %s", strerror(errno));
	int64_t n = 0;
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	free(vec);
	munmap(m, (size_t)len);
	return n * page;
}

/* The loop device's copy of what a sandbox writes was kept
 * in the host's page cache (the backing file's pages, charged to the root
 * cgroup), on top of the workspace file's own pages. With direct I/O the
 * backing file holds no cache: 256 MiB written through the volume leave
 * (almost) none of the backing file cached. On a disk filesystem (/tmp): a
 * tmpfs backing file is all cache by nature. */
Test(volume, writes_leave_no_backing_cache, .init = timing_init, .fini = timing_fini,
     .timeout = 240)
{
	int dfd = open(g_timing_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert(dfd >= 0);
	struct statfs h;
	cr_assert_eq(fstatfs(dfd, &h), 0);
	if (h.f_type == TMPFS_MAGIC || (uint64_t)h.f_bavail * (uint64_t)h.f_bsize < (uint64_t)GiB) {
		close(dfd);
		cr_skip_test("needs /tmp on a disk filesystem with 1 GiB free");
	}
	const int64_t bytes = 512 * MiB, wrote = 256 * MiB;
	host_volume *v = vol_new(dfd, bytes, 1000);
	int64_t before = cached_bytes(host_volume_backing_fd(v), bytes);
	int fd = openat(host_volume_root_fd(v), "data", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert(fd >= 0);
	static char chunk[1 << 20];
	memset(chunk, 0x5a, sizeof(chunk));
	for (int64_t k = 0; k < wrote; k += (int64_t)sizeof(chunk))
		cr_assert_eq(write(fd, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
	/* Written back through the loop device to the backing file. */
	cr_assert_eq(fsync(fd), 0);
	cr_assert_eq(syncfs(fd), 0);
	close(fd);
	int64_t after = cached_bytes(host_volume_backing_fd(v), bytes);
	fprintf(stderr,
	        "[volume] %" PRId64 " MiB written: backing file cached %" PRId64 " KiB at creation, "
	        "%" PRId64 " KiB after\n",
	        wrote / MiB, before / 1024, after / 1024);
	cr_assert_lt(after, 4 * MiB, "the backing file keeps %" PRId64 " KiB in the page cache",
	             after / 1024);
	host_volume_destroy(v);
	close(dfd);
}
