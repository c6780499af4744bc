/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a sandbox can learn of the host it runs on (issue "Hardening the
 * native mechanism", items 6 and 10): the image's /etc names no resolver, no
 * host name and no mirror; mountinfo names no loop device; /proc/self/exe of
 * a starting command is the sealed starter, never the host's airlock binary;
 * host ids are unique per host, not per service process. Every probe runs in
 * a real sandbox, except the seal checks, which are on the memfd itself, and
 * the host id checks, which read the inits' uids from the host.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/starter/starter.h"
#include "sandbox_testlib.h"
#include "util/util.h"

static const airlock_resource_limits small = {
	.cpu_millicores = 1000, .memory_bytes = 128ll << 20, .pids_max = 64,
	.workspace_bytes = 64ll << 20, .inodes_max = 2000, .wall_clock_seconds = 120,
};


static void sh(box *b, const char *script, airlock_execution_result *r)
{
	char *argv[] = { "sh", "-c", (char *)script, NULL };
	sandbox_test_run(b->e, &b->h, argv, 30, NULL, r);
}

static void expect_exit(const airlock_execution_result *r, int code)
{
	cr_assert(r->has_exit_code && r->exit_code == code,
	          "want exit %d; got has_exit=%d exit=%d killed_by=%d stdout=%.300s stderr=%.600s", code,
	          r->has_exit_code, r->exit_code, (int)r->killed_by, OUT(r), ERR(r));
}

/* ---- the image's /etc ------------------------------------------------------ */

Test(hostfacts, image_etc_names_nothing_of_the_host, .timeout = 120)
{
	box b;
	box_open(&b, "tenant-etc", &small);
	airlock_execution_result r;
	sh(&b,
	   "for f in /etc/resolv.conf /etc/hostname /etc/hosts /etc/apt/sources.list; do"
	   "  echo \"== $f\"; cat \"$f\"; done; echo \"== uname\"; uname -n",
	   &r);
	expect_exit(&r, 0);
	const char *want = "== /etc/resolv.conf\n# A sandbox has no resolver.\n"
	                   "== /etc/hostname\nsandbox\n"
	                   "== /etc/hosts\n127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n"
	                   "::1\tlocalhost ip6-localhost ip6-loopback\n"
	                   "== /etc/apt/sources.list\n# A sandbox has no package mirror.\n"
	                   "== uname\nsandbox\n";
	cr_expect_str_eq(OUT(&r), want);
	/* And, said the other way round: none of the host's nameservers. */
	FILE *f = fopen("/etc/resolv.conf", "re");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		char addr[256];
		if (sscanf(line, "nameserver %255s", addr) == 1)
			cr_expect(strstr(OUT(&r), addr) == NULL, "the host's nameserver %s is in:\n%s", addr,
			          OUT(&r));
	}
	if (f)
		fclose(f);
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* ---- mount sources ---------------------------------------------------------- */

/* The source field (after " - fstype ") of the mount at mount point mp in
 * a mountinfo text; "" when there is none. */
static void mount_source(const char *mountinfo, const char *mp, char *out, size_t size)
{
	*out = 0;
	const char *line = mountinfo;
	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char buf[1024];
		if (len < sizeof(buf)) {
			memcpy(buf, line, len);
			buf[len] = 0;
			char point[512], fstype[64], source[256];
			const char *dash = strstr(buf, " - ");
			if (sscanf(buf, "%*s %*s %*s %*s %511s", point) == 1 && dash &&
			    sscanf(dash, " - %63s %255s", fstype, source) == 2 && strcmp(point, mp) == 0)
				snprintf(out, size, "%s", source);
		}
		line = end ? end + 1 : NULL;
	}
}

Test(hostfacts, mountinfo_names_no_loop_device, .timeout = 120)
{
	box b;
	box_open(&b, "tenant-mounts", &small);
	airlock_execution_result r;
	sh(&b, "cat /proc/self/mountinfo", &r);
	expect_exit(&r, 0);
	cr_expect(strstr(OUT(&r), "/dev/loop") == NULL, "a loop device is named in:\n%s", OUT(&r));
	cr_expect(strstr(OUT(&r), "loop") == NULL, "a loop device is named in:\n%s", OUT(&r));
	char src[256];
	mount_source(OUT(&r), "/", src, sizeof(src));
	cr_expect_str_eq(src, "airlock-image", "the root's source in:\n%s", OUT(&r));
	mount_source(OUT(&r), "/workspace", src, sizeof(src));
	cr_expect_str_eq(src, "airlock-workspace", "the workspace's source in:\n%s", OUT(&r));
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* ---- /proc/self/exe --------------------------------------------------------- */

static void expect_refused(const airlock_execution_result *r, const char *what)
{
	expect_exit(r, 127);
	cr_expect(strstr(ERR(r), NATIVE_STARTER_REFUSAL) != NULL,
	          "%s: want the starter's refusal, got stderr:\n%.800s", what, ERR(r));
	cr_expect(strstr(ERR(r), "airlock:") == NULL && strstr(ERR(r), "usage") == NULL &&
	                  strstr(ERR(r), "shared librar") == NULL,
	          "%s: the host's airlock binary ran: %.800s", what, ERR(r));
}

Test(hostfacts, proc_self_exe_is_the_sealed_starter, .timeout = 180)
{
	box b;
	box_open(&b, "tenant-exe", &small);
	airlock_execution_result r;
	const char *links[] = { "/proc/self/exe", "/proc/thread-self/exe" };
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		char *argv[] = { (char *)links[i], "--version", NULL };
		sandbox_test_run(b.e, &b.h, argv, 30, NULL, &r);
		expect_refused(&r, links[i]);
		airlock_execution_result_clear(&r);
		/* The marker as argv[0] is refused just the same: it names the
		 * starter, and the starter never starts itself again. */
		char *marker[] = { (char *)links[i], NATIVE_STARTER_ARGV0, "sh", NULL };
		sandbox_test_run(b.e, &b.h, marker, 30, NULL, &r);
		expect_refused(&r, "argv[1] = the marker");
		airlock_execution_result_clear(&r);
	}
	/* A script whose interpreter is /proc/self/exe: the kernel resolves
	 * the interpreter while the starter is still the process's exe. */
	sh(&b, "printf '#!/proc/self/exe\\n' > /workspace/s && chmod +x /workspace/s", &r);
	expect_exit(&r, 0);
	airlock_execution_result_clear(&r);
	char *script[] = { "/workspace/s", NULL };
	sandbox_test_run(b.e, &b.h, script, 30, NULL, &r);
	expect_refused(&r, "#!/proc/self/exe");
	airlock_execution_result_clear(&r);
	/* init is the sealed program in init mode (starter.h); its links are
	 * closed to the sandbox all the same: it makes itself not dumpable
	 * before the sandbox is up, no sandbox process has CAP_SYS_PTRACE in
	 * the sandbox's user namespace, and hidepid=invisible hides it from
	 * /proc altogether. */
	sh(&b, "exec /proc/1/exe --version", &r);
	cr_expect(r.has_exit_code && (r.exit_code == 126 || r.exit_code == 127) &&
	                  (strstr(ERR(&r), "not found") || strstr(ERR(&r), "ermission denied")),
	          "exec /proc/1/exe: exit %d stderr %.600s", r.exit_code, ERR(&r));
	airlock_execution_result_clear(&r);
	sh(&b, "readlink /proc/1/exe; echo rc=$?", &r);
	cr_expect(strstr(OUT(&r), "rc=1") != NULL && strstr(OUT(&r), "airlock") == NULL,
	          "readlink /proc/1/exe: %s %s", OUT(&r), ERR(&r));
	airlock_execution_result_clear(&r);
	box_close(&b);
}

Test(hostfacts, starter_memfd_is_sealed_and_read_only)
{
	int fd = -1;
	airlock_error err = { 0 };
	cr_assert_eq(exec_starter_open(&fd, &err), 0, "%s", err.message);
	int seals = fcntl(fd, F_GET_SEALS);
	int want = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
	cr_expect_eq(seals & want, want, "seals %#x", seals);
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0555, "mode %o", st.st_mode & 07777);
	cr_expect_eq(st.st_uid, geteuid());
	cr_expect_gt(st.st_size, 0);
	/* Root itself cannot change a byte or the size, nor add or drop a seal. */
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int w = open(path, O_WRONLY | O_CLOEXEC);
	if (w >= 0) {
		cr_expect_eq(write(w, "x", 1), -1);
		cr_expect_eq(errno, EPERM, "write: %s", strerror(errno));
		cr_expect_eq(pwrite(w, "x", 1, st.st_size), -1);
		cr_expect_eq(ftruncate(w, 0), -1);
		cr_expect_eq(errno, EPERM, "ftruncate: %s", strerror(errno));
		close(w);
	} else {
		cr_expect(errno == EPERM || errno == EACCES || errno == ETXTBSY, "open: %s",
		          strerror(errno));
	}
	cr_expect_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), -1);
	cr_expect_eq(errno, EPERM);
	/* An unprivileged user (the sandbox's host ids are such users) cannot
	 * even open it for writing. */
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* Dumpable again after the uid change, so /proc/self/fd is ours
		 * and only the file's own mode decides. */
		if (setgid(65534) < 0 || setuid(65534) < 0 || prctl(PR_SET_DUMPABLE, 1) < 0)
			_exit(2);
		int x = open(path, O_RDWR | O_CLOEXEC);
		_exit(x < 0 && errno == EACCES ? 0 : 1);
	}
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "an unprivileged open for writing: %d",
	          status);
	close(fd);
}

/* ---- host ids, unique per host ------------------------------------------------ */

#define HOST_ID_BASE 1500000000u /* native.c's NATIVE_HOST_ID_BASE */
#define HOST_ID_SLOTS 65536u
#define PER_SERVICE 6

/* A lock file of our own, so the test's locks never starve another suite's
 * sandboxes; the services under test are pointed at it. */
static char lock_path[128];

static void lock_path_init(void)
{
	snprintf(lock_path, sizeof(lock_path), "/run/airlock-test-ids-%d/host-ids.lock", (int)getpid());
}

static void lock_path_cleanup(void)
{
	unlink(lock_path);
	char *slash = strrchr(lock_path, '/');
	*slash = 0;
	rmdir(lock_path);
}

/* Lock every slot except the listed free ones, as other services would. */
static int hold_all_but(const uint32_t *free_slots, size_t n)
{
	char dir[128];
	snprintf(dir, sizeof(dir), "%s", lock_path);
	*strrchr(dir, '/') = 0;
	cr_assert(mkdir(dir, 0700) == 0 || errno == EEXIST, "mkdir %s: %s", dir, strerror(errno));
	int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0, "%s: %s", lock_path, strerror(errno));
	struct flock all = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0,
		             .l_len = HOST_ID_SLOTS };
	cr_assert_eq(fcntl(fd, F_OFD_SETLK, &all), 0, "%s", strerror(errno));
	for (size_t i = 0; i < n; i++) {
		struct flock one = { .l_type = F_UNLCK, .l_whence = SEEK_SET,
			             .l_start = free_slots[i], .l_len = 1 };
		cr_assert_eq(fcntl(fd, F_OFD_SETLK, &one), 0, "%s", strerror(errno));
	}
	return fd;
}

static airlock_exec *open_with_lock(void)
{
	airlock_native_config nc = { .image_store = sandbox_test_store(), .start_budget_seconds = 30,
		                     .host_id_lock = lock_path };
	airlock_native *n = NULL;
	airlock_error err = { 0 };
	if (airlock_native_new(&nc, &n, &err) < 0)
		return NULL;
	airlock_exec *e = NULL;
	if (airlock_exec_new(airlock_native_ops(), n, NULL, &e, &err) < 0)
		return NULL;
	return e;
}

/* The host uids of parent's children (the sandboxes' inits): at most max. */
static size_t children_uids(pid_t parent, uid_t *out, size_t max)
{
	size_t n = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;
	while (d && (de = readdir(d)) && n < max) {
		char p[300], line[256];
		snprintf(p, sizeof(p), "/proc/%s/status", de->d_name);
		FILE *f = fopen(p, "re");
		if (!f)
			continue;
		long ppid = -1;
		unsigned long uid = 0;
		while (fgets(line, sizeof(line), f)) {
			sscanf(line, "PPid: %ld", &ppid);
			sscanf(line, "Uid: %lu", &uid);
		}
		fclose(f);
		if (ppid == parent && uid >= HOST_ID_BASE)
			out[n++] = (uid_t)uid;
	}
	if (d)
		closedir(d);
	return n;
}

/* One service process: provision PER_SERVICE sandboxes, report their host
 * ids on wfd, wait for a byte on rfd, destroy them, exit 0 (or 1 and the
 * error on wfd as ids of 0). */
_Noreturn static void service_child(int wfd, int rfd)
{
	airlock_exec *e = open_with_lock();
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	airlock_image_store *store = NULL;
	airlock_error err = { 0 };
	if (!e || airlock_image_store_open(sandbox_test_store(), &store, &err) < 0 ||
	    airlock_image_find_default(store, digest, &err) <= 0)
		_exit(1);
	airlock_image_store_free(store);
	airlock_environment_spec spec[PER_SERVICE];
	airlock_environment_handle h[PER_SERVICE];
	int made = 0;
	for (int i = 0; i < PER_SERVICE; i++) {
		char tenant[32];
		snprintf(tenant, sizeof(tenant), "tenant-ids-%d", i);
		memset(&spec[i], 0, sizeof(spec[i]));
		memset(&h[i], 0, sizeof(h[i]));
		test_spec(&spec[i], tenant, "run-1");
		free(spec[i].image_digest);
		spec[i].image_digest = strdup(digest);
		spec[i].limits = small;
		if (airlock_exec_provision(e, &spec[i], &h[i], &err) < 0)
			break;
		made++;
	}
	uid_t ids[PER_SERVICE] = { 0 };
	if (made == PER_SERVICE)
		children_uids(getpid(), ids, PER_SERVICE);
	ssize_t w = write(wfd, ids, sizeof(ids));
	char go;
	ssize_t rd = read(rfd, &go, 1);
	(void)w, (void)rd;
	for (int i = 0; i < made; i++) {
		airlock_exec_destroy(e, &h[i], &err);
		airlock_environment_handle_clear(&h[i]);
		airlock_environment_spec_clear(&spec[i]);
	}
	airlock_exec_free(e);
	_exit(made == PER_SERVICE ? 0 : 1);
}

Test(hostfacts, host_ids_unique_across_services_on_a_host, .timeout = 300)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	native_test_require(digest);
	lock_path_init();
	/* Other services hold every slot but 2 * PER_SERVICE, chosen at
	 * random: two services must share exactly those between them. */
	uint32_t free_slots[2 * PER_SERVICE];
	for (size_t i = 0; i < 2 * PER_SERVICE; i++) {
		uint32_t s;
		bool dup;
		do {
			s = 0;
			cr_assert_eq(util_random(&s, sizeof(s)), 0);
			s %= HOST_ID_SLOTS;
			dup = false;
			for (size_t j = 0; j < i; j++)
				dup |= free_slots[j] == s;
		} while (dup);
		free_slots[i] = s;
	}
	int held = hold_all_but(free_slots, 2 * PER_SERVICE);
	int up[2][2], down[2][2];
	pid_t pids[2];
	for (int k = 0; k < 2; k++) {
		cr_assert_eq(pipe2(up[k], O_CLOEXEC), 0);
		cr_assert_eq(pipe2(down[k], O_CLOEXEC), 0);
		pids[k] = fork();
		cr_assert_geq(pids[k], 0);
		if (pids[k] == 0)
			service_child(up[k][1], down[k][0]);
		close(up[k][1]);
		close(down[k][0]);
	}
	uid_t ids[2][PER_SERVICE];
	for (int k = 0; k < 2; k++) {
		memset(ids[k], 0, sizeof(ids[k]));
		ssize_t n = read(up[k][0], ids[k], sizeof(ids[k]));
		cr_expect_eq(n, (ssize_t)sizeof(ids[k]), "service %d reported nothing", k);
	}
	/* Both services hold their sandboxes now: every id is one of the free
	 * slots, and no id is used twice. */
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < PER_SERVICE; i++) {
			uid_t id = ids[k][i];
			cr_expect_geq(id, HOST_ID_BASE, "service %d sandbox %d: no host id", k, i);
			bool in_free = false;
			for (size_t j = 0; j < 2 * PER_SERVICE; j++)
				in_free |= id == HOST_ID_BASE + free_slots[j];
			cr_expect(in_free, "host id %u is a slot another service holds", (unsigned)id);
			for (int k2 = 0; k2 < 2; k2++)
				for (int i2 = 0; i2 < PER_SERVICE; i2++)
					if ((k2 != k || i2 != i) && id)
						cr_expect_neq(id, ids[k2][i2], "host id %u handed out twice",
						              (unsigned)id);
		}
	for (int k = 0; k < 2; k++) {
		cr_expect_eq(write(down[k][1], "x", 1), 1);
		close(down[k][1]);
		int status = 0;
		cr_assert_eq(waitpid(pids[k], &status, 0), pids[k]);
		cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "service %d: status %d", k,
		          status);
		close(up[k][0]);
	}
	close(held);
	lock_path_cleanup();
}

Test(hostfacts, host_ids_all_held_elsewhere_refuses, .timeout = 120)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	native_test_require(digest);
	lock_path_init();
	int held = hold_all_but(NULL, 0);
	airlock_exec *e = open_with_lock();
	cr_assert_not_null(e);
	airlock_environment_spec spec;
	airlock_environment_handle h = { 0 };
	sandbox_test_spec(&spec, "tenant-full", digest, &small);
	airlock_error err = { 0 };
	cr_expect_neq(airlock_exec_provision(e, &spec, &h, &err), 0);
	cr_expect_eq(err.cls, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "%s", err.message);
	cr_expect(strstr(err.message, "sandbox user ids: none free") != NULL, "%s", err.message);
	/* A crashed service's slots come free with its process: the locks go
	 * with the last descriptor. */
	close(held);
	memset(&err, 0, sizeof(err));
	cr_expect_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "%s", err.message);
	cr_expect_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	airlock_environment_handle_clear(&h);
	airlock_environment_spec_clear(&spec);
	airlock_exec_free(e);
	lock_path_cleanup();
}

/* The volume directory is where every sandbox's workspace space comes
 * from: one another user could write to is refused, by name. */
Test(hostfacts, a_volume_directory_others_can_reach_is_refused, .timeout = 60)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/run/airlock-test-vol-%d", (int)getpid());
	cr_assert_eq(mkdir(dir, 0755), 0, "%s", strerror(errno));
	airlock_native_config nc = { .image_store = sandbox_test_store(), .start_budget_seconds = 30,
		                     .volume_dir = dir };
	airlock_native *n = NULL;
	airlock_error err = { 0 };
	int r = airlock_native_new(&nc, &n, &err);
	if (r == 0)
		airlock_native_ops()->free(n);
	rmdir(dir);
	cr_assert_lt(r, 0, "a 0755 volume directory was taken");
	cr_expect_eq(err.cls, AIRLOCK_ERR_EXECUTION_UNAVAILABLE);
	cr_expect(strstr(err.message, "native: the volume directory") && strstr(err.message, dir) &&
	                  strstr(err.message, "mode 0755") && strstr(err.message, "mode 0700"),
	          "%s", err.message);
}
