/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a sandbox can learn of the host it runs on (issue "Hardening the
 * native mechanism", items 6 and 10): the image's /etc names no resolver, no
 * host name and no mirror; mountinfo names no loop device; /proc/self/exe of
 * a starting command is the sealed starter, never the host's airlock binary.
 * Every probe runs in a real sandbox, except the seal checks, which are on
 * the memfd itself.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/native/starter.h"
#include "native_testlib.h"

static const airlock_resource_limits small = {
	.cpu_millicores = 1000, .memory_bytes = 128ll << 20, .pids_max = 64,
	.workspace_bytes = 64ll << 20, .inodes_max = 2000, .wall_clock_seconds = 120,
};

typedef struct box {
	airlock_exec *e;
	airlock_environment_spec spec;
	airlock_environment_handle h;
} box;

static void box_open(box *b, const char *tenant)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	native_test_require(digest);
	memset(b, 0, sizeof(*b));
	b->e = native_test_open(NULL);
	native_test_spec(&b->spec, tenant, digest, &small);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(b->e, &b->spec, &b->h, &err), 0, "%s", err.message);
}

static void box_close(box *b)
{
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_destroy(b->e, &b->h, &err), 0, "%s", err.message);
	airlock_exec_free(b->e);
	airlock_environment_handle_clear(&b->h);
	airlock_environment_spec_clear(&b->spec);
}

static void sh(box *b, const char *script, airlock_execution_result *r)
{
	char *argv[] = { "sh", "-c", (char *)script, NULL };
	native_test_run(b->e, &b->h, argv, 30, NULL, r);
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
	box_open(&b, "tenant-etc");
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
	box_open(&b, "tenant-mounts");
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
	box_open(&b, "tenant-exe");
	airlock_execution_result r;
	const char *links[] = { "/proc/self/exe", "/proc/thread-self/exe" };
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		char *argv[] = { (char *)links[i], "--version", NULL };
		native_test_run(b.e, &b.h, argv, 30, NULL, &r);
		expect_refused(&r, links[i]);
		airlock_execution_result_clear(&r);
		/* The marker as argv[0] is refused just the same: it names the
		 * starter, and the starter never starts itself again. */
		char *marker[] = { (char *)links[i], NATIVE_STARTER_ARGV0, "sh", NULL };
		native_test_run(b.e, &b.h, marker, 30, NULL, &r);
		expect_refused(&r, "argv[1] = the marker");
		airlock_execution_result_clear(&r);
	}
	/* A script whose interpreter is /proc/self/exe: the kernel resolves
	 * the interpreter while the starter is still the process's exe. */
	sh(&b, "printf '#!/proc/self/exe\\n' > /workspace/s && chmod +x /workspace/s", &r);
	expect_exit(&r, 0);
	airlock_execution_result_clear(&r);
	char *script[] = { "/workspace/s", NULL };
	native_test_run(b.e, &b.h, script, 30, NULL, &r);
	expect_refused(&r, "#!/proc/self/exe");
	airlock_execution_result_clear(&r);
	/* init is still a copy of the service (issue item 12 gives it its own
	 * program); its exe link is closed to the sandbox: init is not
	 * dumpable after its uid change and its memory belongs to the host's
	 * user namespace, so no sandbox process may read its links, and
	 * hidepid=invisible hides it from /proc altogether. */
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
	cr_assert_eq(native_starter_open(&fd, &err), 0, "%s", err.message);
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
