/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files_changed and DISK against the native mechanism: every kind of entry
 * a command can make is listed with its defined sha256, names that are not
 * text survive the JSON forms, hashing is bounded in time and duration_ms
 * is the command's, and a disk filler gets the same reason every run.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "airlock/json.h"
#include "sandbox_testlib.h"
#include "util/util.h"

static const airlock_resource_limits small = {
	.cpu_millicores = 1000, .memory_bytes = 128ll << 20, .pids_max = 64,
	.workspace_bytes = 64ll << 20, .inodes_max = 2000, .wall_clock_seconds = 120,
};


static const airlock_file_change *find(const airlock_execution_result *r, const char *path)
{
	for (size_t i = 0; i < r->n_files_changed; i++)
		if (strcmp(r->files_changed[i].path, path) == 0)
			return &r->files_changed[i];
	return NULL;
}

static const airlock_file_change *expect(const airlock_execution_result *r, const char *path,
                                         airlock_change_kind change, airlock_file_kind kind)
{
	const airlock_file_change *f = find(r, path);
	cr_assert_not_null(f, "%s is not listed (%zu entries)", path, r->n_files_changed);
	cr_assert_eq(f->change, change, "%s: %s", path, airlock_change_kind_name(f->change));
	cr_assert_eq(f->kind, kind, "%s: %s", path, airlock_file_kind_name(f->kind));
	cr_assert_eq(f->has_sha256, change != AIRLOCK_CHANGE_DELETED);
	return f;
}

static void sha_of(const char *s, char hex[65])
{
	cr_assert_eq(util_sha256_hex(s, strlen(s), hex), 0);
}

/* The cases: a symlink to a host secret's name, a FIFO, a socket,
 * a file replaced by a symlink, each listed with its kind and sha256. */
Test(native_files_changed, every_kind_is_listed_with_its_digest, .timeout = 300)
{
	box b;
	box_open(&b, "tenant-kinds", &small);
	airlock_execution_result r;
	py(&b, "open('/workspace/was-file', 'w').write('data')\nopen('/workspace/gone-fifo-target', 'w').close()\n"
	       "import os\nos.mkfifo('/workspace/old-fifo')\n", 30, &r);
	cr_assert_eq(r.exit_code, 0, "%s", ERR(&r));
	airlock_execution_result_clear(&r);

	py(&b,
	   "import os, socket, stat\n"
	   "os.chdir('/workspace')\n"
	   "os.symlink('/etc/shadow', 'lnk')\n"
	   "os.mkfifo('fifo')\n"
	   "s = socket.socket(socket.AF_UNIX); s.bind('sock')\n"
	   "os.unlink('was-file'); os.symlink('elsewhere', 'was-file')\n"
	   "os.unlink('old-fifo')\n"
	   "try:\n"
	   "    os.mknod('whiteout', stat.S_IFCHR | 0o600, 0)\n"
	   "    print('mknod ok')\n"
	   "except OSError as e:\n"
	   "    print('mknod', e.errno)\n",
	   30, &r);
	cr_assert_eq(r.exit_code, 0, "%s", ERR(&r));
	cr_assert_not(r.files_changed_truncated);
	char hex[65];
	const airlock_file_change *f = expect(&r, "lnk", AIRLOCK_CHANGE_CREATED, AIRLOCK_FILE_SYMLINK);
	sha_of("/etc/shadow", hex);
	cr_assert_str_eq(f->sha256, hex, "a symlink's digest is of its target, never followed");
	cr_assert_eq(f->size_bytes, 11);
	sha_of("", hex);
	f = expect(&r, "fifo", AIRLOCK_CHANGE_CREATED, AIRLOCK_FILE_FIFO);
	cr_assert_str_eq(f->sha256, hex);
	cr_assert_eq(f->size_bytes, 0);
	f = expect(&r, "sock", AIRLOCK_CHANGE_CREATED, AIRLOCK_FILE_SOCKET);
	cr_assert_str_eq(f->sha256, hex);
	f = expect(&r, "was-file", AIRLOCK_CHANGE_MODIFIED, AIRLOCK_FILE_SYMLINK);
	sha_of("elsewhere", hex);
	cr_assert_str_eq(f->sha256, hex);
	expect(&r, "old-fifo", AIRLOCK_CHANGE_DELETED, AIRLOCK_FILE_FIFO);
	/* Device nodes: mknod needs CAP_MKNOD in the host's namespace except
	 * for a whiteout (0:0), which a kernel may allow; whichever happened
	 * is what the listing says. */
	printf("whiteout device node: %s", OUT(&r));
	if (strstr(OUT(&r), "mknod ok"))
		expect(&r, "whiteout", AIRLOCK_CHANGE_CREATED, AIRLOCK_FILE_CHAR_DEVICE);
	else
		cr_assert_null(find(&r, "whiteout"), "%s", OUT(&r));
	/* One entry per path. */
	for (size_t i = 0; i < r.n_files_changed; i++)
		for (size_t j = i + 1; j < r.n_files_changed; j++)
			cr_assert(strcmp(r.files_changed[i].path, r.files_changed[j].path) != 0);
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* Names that are not text: two that differ only in an invalid byte, and one
 * with a real U+FFFD, are three paths in both JSON forms, and the wire form
 * gives the bytes back. */
Test(native_files_changed, names_that_are_not_text_stay_distinct, .timeout = 300)
{
	box b;
	box_open(&b, "tenant-names", &small);
	airlock_execution_result r;
	py(&b,
	   "import os\n"
	   "for n in (b'caf\\xe9', b'caf\\xe8', 'caf\\ufffd'.encode(), b'nl\\nx'):\n"
	   "    open(b'/workspace/' + n, 'wb').close()\n",
	   30, &r);
	cr_assert_eq(r.exit_code, 0, "%s", ERR(&r));
	cr_assert_eq(r.n_files_changed, 4);
	expect(&r, "caf\xe9", AIRLOCK_CHANGE_CREATED, AIRLOCK_FILE_REGULAR);
	expect(&r, "caf\xe8", AIRLOCK_CHANGE_CREATED, AIRLOCK_FILE_REGULAR);
	expect(&r, "caf\xef\xbf\xbd", AIRLOCK_CHANGE_CREATED, AIRLOCK_FILE_REGULAR);
	expect(&r, "nl\nx", AIRLOCK_CHANGE_CREATED, AIRLOCK_FILE_REGULAR);

	airlock_error err = { 0 };
	char *wire = airlock_execution_result_to_json(&r, &err);
	cr_assert_not_null(wire, "%s", err.message);
	airlock_execution_result back = { 0 };
	cr_assert_eq(airlock_execution_result_from_json(wire, strlen(wire), &back, &err), 0, "%s",
	             err.message);
	for (size_t i = 0; i < r.n_files_changed; i++)
		cr_assert_str_eq(back.files_changed[i].path, r.files_changed[i].path);
	airlock_execution_result_clear(&back);
	free(wire);

	char *tool = airlock_result_to_tool_json(&r, &err);
	cr_assert_not_null(tool, "%s", err.message);
	json_t *o = json_loads(tool, 0, NULL);
	json_t *files = json_object_get(o, "files_changed");
	cr_assert_eq(json_array_size(files), 4);
	for (size_t i = 0; i < 4; i++)
		for (size_t j = i + 1; j < 4; j++)
			cr_assert(strcmp(json_string_value(json_object_get(json_array_get(files, i), "path")),
			                 json_string_value(json_object_get(json_array_get(files, j), "path"))) != 0,
			          "%s", tool);
	cr_assert_null(strchr(tool, '\n'), "no raw newline reaches the model: %s", tool);
	json_decref(o);
	free(tool);
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* The case: a 4 GiB sparse file made in a moment, then a timeout of
 * 1 s. Hashing stops at its time bound (the listing truncated), and
 * duration_ms is the command's time, not the hashing's. */
Test(native_files_changed, hashing_is_bounded_in_time, .timeout = 300)
{
	static const airlock_resource_limits big = {
		.cpu_millicores = 1000, .memory_bytes = 128ll << 20, .pids_max = 64,
		.workspace_bytes = 5ll << 30, .inodes_max = 2000, .wall_clock_seconds = 120,
	};
	box b;
	box_open(&b, "tenant-sparse-time", &big);
	airlock_execution_result r;
	int64_t t0 = util_monotonic_ms();
	py(&b, "import time\nopen('/workspace/holes', 'wb').truncate(4 << 30)\n"
	       "print('made', flush=True)\ntime.sleep(60)\n", 1, &r);
	int64_t wall = util_monotonic_ms() - t0;
	cr_assert_eq(r.killed_by, AIRLOCK_KILL_TIMEOUT, "%s", ERR(&r));
	cr_assert(strstr(OUT(&r), "made"), "%s", OUT(&r));
	cr_assert(r.duration_ms >= 900 && r.duration_ms < 1000 + 2000,
	          "duration_ms %lld is the command's time (timeout 1 s)", (long long)r.duration_ms);
	/* 1 s of command, AIRLOCK_SNAPSHOT_HASH_MS (2 s) of hashing at most, and
	 * slack for the walks and the kill on a busy machine; hashing 4 GiB of
	 * holes takes 10-50 s here. */
	cr_assert_lt(wall, 10000, "execute took %lld ms", (long long)wall);
	printf("sparse 4 GiB, timeout 1 s: execute %lld ms, duration_ms %lld, listed %zu, truncated %d\n",
	       (long long)wall, (long long)r.duration_ms, r.n_files_changed, r.files_changed_truncated);
	if (!r.files_changed_truncated) {
		/* Hashed in time after all (a fast idle machine): then it is right. */
		const airlock_file_change *f = expect(&r, "holes", AIRLOCK_CHANGE_CREATED, AIRLOCK_FILE_REGULAR);
		cr_assert_eq(f->size_bytes, 4ll << 30);
	} else {
		cr_assert_null(find(&r, "holes"), "a file not hashed in time is not listed");
	}
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* The CPU time of this process (every thread; not its children). */
static int64_t service_cpu_ms(void)
{
	struct rusage ru;
	cr_assert_eq(getrusage(RUSAGE_SELF, &ru), 0);
	return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* A --cpu 100 command that makes a sparse 4 GiB file cost
 * the service 1.6-2.0 s of CPU hashing it, outside the sandbox's quota,
 * every command. The hashing is bounded by the command's own CPU share
 * (0.1 of AIRLOCK_SNAPSHOT_HASH_MS: 200 ms); compared with a command that
 * writes 1 MiB of data, as a ratio of CPU times, never a wall time. */
Test(native_files_changed, hashing_holes_costs_no_more_than_the_commands_cpu_share,
     .timeout = 300)
{
	static const airlock_resource_limits tenth = {
		.cpu_millicores = 100, .memory_bytes = 128ll << 20, .pids_max = 64,
		.workspace_bytes = 5ll << 30, .inodes_max = 2000, .wall_clock_seconds = 120,
	};
	box b;
	box_open(&b, "tenant-sparse-cpu", &tenth);
	char *dense[] = { "sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' x > /workspace/dense", NULL };
	char *holes[] = { "sh", "-c", "truncate -s 4G /workspace/holes", NULL };
	char *clean[] = { "sh", "-c", "rm -f /workspace/dense /workspace/holes", NULL };
	airlock_execution_result r;
	int64_t dense_ms = INT64_MAX, holes_ms = 0;
	for (int i = 0; i < 3; i++) {
		int64_t c0 = service_cpu_ms();
		sandbox_test_run(b.e, &b.h, dense, 60, NULL, &r);
		int64_t c1 = service_cpu_ms();
		cr_assert_eq(r.exit_code, 0, "%s", ERR(&r));
		cr_assert_not(r.files_changed_truncated);
		airlock_execution_result_clear(&r);
		sandbox_test_run(b.e, &b.h, clean, 60, NULL, &r);
		airlock_execution_result_clear(&r);
		int64_t c2 = service_cpu_ms();
		sandbox_test_run(b.e, &b.h, holes, 60, NULL, &r);
		int64_t c3 = service_cpu_ms();
		cr_assert_eq(r.exit_code, 0, "%s", ERR(&r));
		airlock_execution_result_clear(&r);
		sandbox_test_run(b.e, &b.h, clean, 60, NULL, &r);
		airlock_execution_result_clear(&r);
		if (c1 - c0 < dense_ms)
			dense_ms = c1 - c0;
		if (c3 - c2 > holes_ms)
			holes_ms = c3 - c2;
	}
	printf("--cpu 100: service CPU per execute, 1 MiB of data %lld ms, 4 GiB of holes %lld ms "
	       "(most of 3)\n",
	       (long long)dense_ms, (long long)holes_ms);
	/* The share is 200 ms; twice it plus the dense command's own cost
	 * leaves room for the walks and the clock's granularity. */
	cr_assert_lt(holes_ms, dense_ms + 2 * 200,
	             "4 GiB of holes cost the service %lld ms of CPU (1 MiB of data: %lld ms)",
	             (long long)holes_ms, (long long)dense_ms);
	box_close(&b);
}

/* ---- DISK: the same command, the same reason ----------------------------- */

static const char filler_exits[] =
	"import os\n"
	"try: os.unlink('/workspace/fill')\nexcept OSError: pass\n"
	"print('filling', flush=True)\n"
	"f = open('/workspace/fill', 'wb')\n"
	"b = b'x' * (1 << 20)\n"
	"while True:\n    f.write(b); f.flush()\n"; /* OSError: exit 1 */
static const char filler_keeps_trying[] =
	"import os, time\n"
	"try: os.unlink('/workspace/fill')\nexcept OSError: pass\n"
	"print('filling', flush=True)\n"
	"f = open('/workspace/fill', 'wb')\n"
	"b = b'x' * (1 << 20)\n"
	"while True:\n"
	"    try:\n        f.write(b); f.flush()\n"
	"    except OSError:\n        time.sleep(0.001)\n";
static const char filler_exits_0[] =
	"import os\n"
	"try: os.unlink('/workspace/fill')\nexcept OSError: pass\n"
	"f = open('/workspace/fill', 'wb')\n"
	"b = b'x' * (1 << 20)\n"
	"try:\n"
	"    while True:\n        f.write(b); f.flush()\n"
	"except OSError:\n    print('full, done')\n";

static void five_times(box *b, const char *code, airlock_kill_reason want, int want_exit)
{
	for (int i = 0; i < 5; i++) {
		airlock_execution_result r;
		py(b, code, 60, &r);
		cr_assert_eq(r.killed_by, want, "run %d: killed_by %s exit %d, want %s; %s %s", i,
		             r.killed_by ? airlock_kill_reason_name(r.killed_by) : "null", r.exit_code,
		             want ? airlock_kill_reason_name(want) : "null", OUT(&r), ERR(&r));
		if (!want)
			cr_assert_eq(r.exit_code, want_exit, "run %d: %s", i, ERR(&r));
		airlock_execution_result_clear(&r);
	}
}

Test(native_files_changed, a_disk_filler_gets_the_same_reason_every_run, .timeout = 600)
{
	box b;
	box_open(&b, "tenant-disk", &small);
	five_times(&b, filler_exits, AIRLOCK_KILL_DISK, 0);
	five_times(&b, filler_keeps_trying, AIRLOCK_KILL_DISK, 0);
	/* Filled to the brim and exited 0: it finished its work. */
	five_times(&b, filler_exits_0, AIRLOCK_KILL_NONE, 0);
	/* The volume is full now; a command that fails without changing the
	 * workspace failed for a reason of its own, and one that only waits
	 * is not killed for a fullness it did not cause. */
	char *fail[] = { "sh", "-c", "exit 3", NULL };
	for (int i = 0; i < 5; i++) {
		airlock_execution_result r;
		sandbox_test_run(b.e, &b.h, fail, 30, NULL, &r);
		cr_assert_eq(r.killed_by, AIRLOCK_KILL_NONE, "run %d: %s", i,
		             r.killed_by ? airlock_kill_reason_name(r.killed_by) : "null");
		cr_assert_eq(r.exit_code, 3);
		airlock_execution_result_clear(&r);
	}
	char *wait[] = { "sleep", "1", NULL };
	airlock_execution_result r;
	sandbox_test_run(b.e, &b.h, wait, 30, NULL, &r);
	cr_assert_eq(r.killed_by, AIRLOCK_KILL_NONE);
	cr_assert_eq(r.exit_code, 0);
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* The walk after one command stands in for the walk before the next only
 * while nothing else wrote: a tool's write in between is seen, so it is
 * neither reported as the next command's change nor missed by it. */
Test(native_files_changed, a_tool_write_between_commands_is_not_the_commands, .timeout = 300)
{
	box b;
	box_open(&b, "tenant-kept", &small);
	airlock_execution_result r;
	char *make[] = { "sh", "-c", "echo a > /workspace/a", NULL };
	sandbox_test_run(b.e, &b.h, make, 30, NULL, &r);
	expect(&r, "a", AIRLOCK_CHANGE_CREATED, AIRLOCK_FILE_REGULAR);
	airlock_execution_result_clear(&r);
	char *nothing[] = { "true", NULL };
	sandbox_test_run(b.e, &b.h, nothing, 30, NULL, &r);
	cr_assert_eq(r.n_files_changed, 0, "%zu changes", r.n_files_changed);
	airlock_execution_result_clear(&r);

	airlock_exec_call call = { .tenant_id = b.h.tenant_id, .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_workspace *ws = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_workspace(b.e, &call, &b.h, &ws, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_workspace_write(ws, "tool.txt", "by a tool", 9, &err), 0, "%s", err.message);

	sandbox_test_run(b.e, &b.h, nothing, 30, NULL, &r);
	cr_assert_eq(r.n_files_changed, 0, "the tool's write is not the command's: %s",
	             r.n_files_changed ? r.files_changed[0].path : "");
	airlock_execution_result_clear(&r);
	/* ...and a tool's change to a file the last command made. */
	cr_assert_eq(airlock_workspace_write(ws, "a", "rewritten", 9, &err), 0, "%s", err.message);
	sandbox_test_run(b.e, &b.h, nothing, 30, NULL, &r);
	cr_assert_eq(r.n_files_changed, 0, "%zu changes", r.n_files_changed);
	airlock_execution_result_clear(&r);
	char *rm[] = { "rm", "/workspace/tool.txt", NULL };
	sandbox_test_run(b.e, &b.h, rm, 30, NULL, &r);
	cr_assert_eq(r.n_files_changed, 1);
	expect(&r, "tool.txt", AIRLOCK_CHANGE_DELETED, AIRLOCK_FILE_REGULAR);
	airlock_execution_result_clear(&r);
	airlock_workspace_release(ws);
	box_close(&b);
}

static long fd_count(void)
{
	long n = 0;
	DIR *d = opendir("/proc/self/fd");
	cr_assert_not_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* The kept snapshot's fanotify group is one descriptor per idle sandbox,
 * replaced at each command and closed with the sandbox. */
Test(native_files_changed, the_kept_snapshot_holds_one_descriptor, .timeout = 300)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	native_test_require(digest);
	airlock_exec *e = native_test_open(NULL);
	airlock_environment_spec spec;
	sandbox_test_spec(&spec, "tenant-kept-fd", digest, &small);
	airlock_error err = { 0 };
	/* A warm-up sandbox, so the image's loop device is in the baseline. */
	airlock_environment_handle h = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	airlock_environment_handle_clear(&h);
	long base = fd_count();
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "%s", err.message);
	long provisioned = fd_count();
	char *argv[] = { "sh", "-c", "echo x >> /workspace/f", NULL };
	airlock_execution_result r;
	for (int i = 0; i < 5; i++) {
		sandbox_test_run(e, &h, argv, 30, NULL, &r);
		cr_assert_eq(r.exit_code, 0, "%s", ERR(&r));
		cr_assert_eq(r.n_files_changed, 1, "run %d", i);
		airlock_execution_result_clear(&r);
		cr_assert_leq(fd_count(), provisioned + 1, "run %d", i);
	}
	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	airlock_environment_handle_clear(&h);
	cr_assert_eq(fd_count(), base, "descriptors %ld -> %ld", base, fd_count());
	airlock_environment_spec_clear(&spec);
	airlock_exec_free(e);
}
