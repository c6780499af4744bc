/* SPDX-License-Identifier: Apache-2.0 */
/* util/ and the snapshot diff, which every mechanism's files_changed uses. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "airlock/error.h"
#include "airlock/port/workspace.h"
#include "core/snapshot.h"
#include "exec/step.h"
#include "util/run.h"
#include "airlock/escape.h"
#include "util/spawn.h"
#include "util/util.h"

Test(buf, cap_is_fixed_at_creation)
{
	util_buf b;
	util_buf_init(&b, 5);
	cr_assert_eq(util_buf_append(&b, "abc", 3), 0);
	cr_assert_eq(util_buf_append(&b, "defg", 4), 1, "over the cap reports truncation");
	cr_assert_eq(b.len, 5);
	cr_assert_str_eq((char *)b.data, "abcde");
	cr_assert_eq(util_buf_append(&b, "x", 1), 1);
	size_t n = 0;
	unsigned char *p = util_buf_steal(&b, &n);
	cr_assert_eq(n, 5);
	cr_assert_null(b.data);
	free(p);
	util_buf_init(&b, 0);
	p = util_buf_steal(&b, &n);
	cr_assert_not_null(p, "an empty buffer steals as an empty string");
	cr_assert_eq(n, 0);
	free(p);
}

Test(sha256, known_vectors)
{
	char hex[65];
	cr_assert_eq(util_sha256_hex("", 0, hex), 0);
	cr_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	cr_assert_eq(util_sha256_hex("abc", 3, hex), 0);
	cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	util_sha256 *h = util_sha256_new();
	cr_assert_not_null(h);
	cr_assert_eq(util_sha256_update(h, "a", 1), 0);
	cr_assert_eq(util_sha256_update(h, "bc", 2), 0);
	cr_assert_eq(util_sha256_final_hex(h, hex), 0);
	cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

Test(base64, round_trip_and_strictness)
{
	const unsigned char in[] = { 0, 1, 2, 0xff, 0xfe, 'a' };
	for (size_t n = 0; n <= sizeof(in); n++) {
		char *t = util_base64_encode(in, n);
		cr_assert_not_null(t);
		unsigned char *out = NULL;
		size_t len = 0;
		cr_assert_eq(util_base64_decode(t, strlen(t), &out, &len), 0, "%s", t);
		cr_assert_eq(len, n);
		cr_assert_eq(memcmp(out, in, n), 0);
		free(out);
		free(t);
	}
	unsigned char *out = NULL;
	size_t len = 0;
	const char *bad[] = { "YQ", "YQ=", "Y===", "YQ==YQ==", "Y Q=", "YQ=\n", "*Q==", "=YQ=" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(util_base64_decode(bad[i], strlen(bad[i]), &out, &len), -EINVAL, "%s",
		             bad[i]);
	cr_assert_eq(util_base64_decode("YWJj", 4, &out, &len), 0);
	cr_assert_eq(len, 3);
	free(out);
}

Test(time, format_and_strict_parse)
{
	char s[32];
	util_time_format(1795998844123, s);
	cr_assert_str_eq(s, "2026-11-30T00:34:04.123Z");
	int64_t ms = 0;
	cr_assert(util_time_parse(s, &ms));
	cr_assert_eq(ms, 1795998844123);
	cr_assert(util_time_parse("2026-11-30T00:34:04Z", &ms));
	cr_assert_eq(ms, 1795998844000);
	const char *bad[] = { "2026-02-31T00:00:00Z", "2026-11-30 00:34:04Z", "2026-11-30T00:34:04",
		              "2026-11-30T00:34:04+00:00", "2026-11-30T24:00:00Z", "1969-12-31T23:59:59Z",
		              "2026-11-30T00:34:04.1Z", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_not(util_time_parse(bad[i], &ms), "%s", bad[i]);
}

/* The one definition of what is shown as is (util_escape and the CLI's
 * printer share it). */
Test(escape, one_predicate_and_one_byte_encoder)
{
	char e[UTIL_ESCAPED_BYTE_LEN + 1] = { 0 };
	util_escape_byte(0x1b, e);
	cr_assert_str_eq(e, "\\x1b");
	util_escape_byte(0xff, e);
	cr_assert_str_eq(e, "\\xff");

	const unsigned char a[] = "a", esc[] = "\x1b", del[] = "\x7f";
	cr_assert_eq(util_printable_len(a, 1, false), 1);
	cr_assert_eq(util_printable_len(esc, 1, true), 0);
	cr_assert_eq(util_printable_len(del, 1, true), 0);
	const unsigned char e_acute[] = "\xc3\xa9";  /* U+00E9 */
	const unsigned char csi[] = "\xc2\x9b";      /* U+009B, a C1 control */
	const unsigned char rlo[] = "\xe2\x80\xae";  /* U+202E, a bidi override */
	const unsigned char overlong[] = "\xc0\xaf";
	cr_assert_eq(util_printable_len(e_acute, 2, true), 2);
	cr_assert_eq(util_printable_len(e_acute, 2, false), 0);
	cr_assert_eq(util_printable_len(e_acute, 1, true), 0); /* cut short */
	cr_assert_eq(util_printable_len(csi, 2, true), 0);
	cr_assert_eq(util_printable_len(rlo, 3, true), 0);
	cr_assert_eq(util_printable_len(overlong, 2, true), 0);

	char buf[64];
	cr_assert_str_eq(util_escape(buf, sizeof(buf), "a\"b\\\x1b\xc3\xa9", 7),
	                 "a\\x22b\\x5c\\x1b\\xc3\\xa9");
}

Test(parse_i64, strict)
{
	int64_t v;
	cr_assert(util_parse_i64("42", &v) && v == 42);
	cr_assert(util_parse_i64("-7", &v) && v == -7);
	const char *bad[] = { "", " 1", "1 ", "+1", "0x10", "1e3", "99999999999999999999", "-", NULL };
	for (size_t i = 0; bad[i]; i++)
		cr_assert_not(util_parse_i64(bad[i], &v), "%s", bad[i]);
}

Test(error, codes_and_messages)
{
	airlock_error err = { 0 };
	int rc = airlock_error_set(&err, AIRLOCK_ERR_WORKSPACE_ESCAPE, 0, "path %s", "x");
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_WORKSPACE_ESCAPE));
	cr_assert_eq(airlock_errcode_class(rc), AIRLOCK_ERR_WORKSPACE_ESCAPE);
	cr_assert_str_eq(airlock_errclass_name(err.cls), "WorkspaceEscape");
	rc = airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOENT, "open");
	cr_assert_eq(rc, -ENOENT);
	cr_assert_eq(airlock_errcode_class(rc), AIRLOCK_ERR_SYSTEM);
	cr_assert(strstr(err.message, "open: "), "%s", err.message);
	airlock_error_prefix(&err, "ctx: ");
	cr_assert_eq(strncmp(err.message, "ctx: open: ", 11), 0, "%s", err.message);
	/* A prefix on a full message keeps the prefix and truncates the rest. */
	memset(err.message, 'm', sizeof(err.message) - 1);
	err.message[sizeof(err.message) - 1] = 0;
	airlock_error_prefix(&err, "P: ");
	cr_assert_eq(strncmp(err.message, "P: mmm", 6), 0);
	cr_assert_eq(strlen(err.message), sizeof(err.message) - 1);
	cr_assert_eq(airlock_error_set(NULL, AIRLOCK_ERR_CONFIG, 0, "no object"),
	             airlock_errcode(AIRLOCK_ERR_CONFIG));
}

/* An error wrapped as it crosses a layer says the whole path once: the
 * system reason the inner message holds is not appended again. */
Test(error, wrap_says_the_reason_once)
{
	airlock_error inner = { 0 }, outer = { 0 };
	airlock_error_set(&inner, AIRLOCK_ERR_SYSTEM, EACCES, "mkfs.ext4");
	int rc = airlock_error_wrap(&outer, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, &inner,
	                            "provision: %s", "workspace volume");
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE));
	cr_assert_eq(outer.errnum, EACCES);
	cr_assert_str_eq(outer.message, "provision: workspace volume: mkfs.ext4: Permission denied");
	/* In place, and to SYSTEM: the code is the errno's. */
	rc = airlock_error_wrap(&inner, AIRLOCK_ERR_SYSTEM, &inner, "volume");
	cr_assert_eq(rc, -EACCES);
	cr_assert_str_eq(inner.message, "volume: mkfs.ext4: Permission denied");
	/* An inner error without a message names its class. */
	airlock_error bare = { .cls = AIRLOCK_ERR_DECODE };
	airlock_error_wrap(&outer, AIRLOCK_ERR_CONFIG, &bare, "settings");
	cr_assert_str_eq(outer.message, "settings: DecodeError");
}

/* How many times needle occurs in hay. */
static int occurrences(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* The system reason is said once however the message was made: set
 * appends it, a head that already ends in it does not get it again, and
 * wraps in a chain (in place or not) and prefixes only add their heads.
 * errnum and the code go on through every layer. */
Test(error, every_message_says_its_reason_once)
{
	const char *why = strerror(EACCES);
	airlock_error e = { 0 };
	cr_assert_eq(airlock_error_set(&e, AIRLOCK_ERR_SYSTEM, -EACCES, "open %s", "f"), -EACCES);
	cr_assert_str_eq(e.message, "open f: Permission denied");
	/* A caller that formatted the reason in (scripts/check_error_messages.py
	 * refuses it in the sources) still says it once. */
	airlock_error_set(&e, AIRLOCK_ERR_SYSTEM, EACCES, "listen: %s", why);
	cr_assert_str_eq(e.message, "listen: Permission denied");
	airlock_error_set(&e, AIRLOCK_ERR_SYSTEM, EACCES, "%s", why);
	cr_assert_str_eq(e.message, "Permission denied");
	/* Without an errno nothing is appended. */
	airlock_error_set(&e, AIRLOCK_ERR_CONFIG, 0, "tls: key");
	cr_assert_str_eq(e.message, "tls: key");
	cr_assert_eq(e.errnum, 0);

	/* Three layers, in place and into another error. */
	airlock_error_set(&e, AIRLOCK_ERR_SYSTEM, EIO, "mkfs.ext4");
	airlock_error_wrap(&e, e.cls, &e, "workspace volume");
	airlock_error outer = { 0 };
	int rc = airlock_error_wrap(&outer, e.cls, &e, "provision (%s)", "native");
	cr_assert_eq(rc, -EIO);
	cr_assert_eq(outer.errnum, EIO);
	cr_assert_eq(outer.cls, AIRLOCK_ERR_SYSTEM);
	cr_assert_str_eq(outer.message,
	                 "provision (native): workspace volume: mkfs.ext4: Input/output error");
	airlock_error_prefix(&outer, "service: ");
	cr_assert_eq(occurrences(outer.message, strerror(EIO)), 1, "%s", outer.message);
	/* A wrap whose head already holds the inner message adds nothing. */
	airlock_error again = { 0 };
	airlock_error_wrap(&again, outer.cls, &outer, "%s", outer.message);
	cr_assert_str_eq(again.message, outer.message);
	/* An empty head: the inner message alone. */
	airlock_error_wrap(&again, outer.cls, &outer, "%s", "");
	cr_assert_str_eq(again.message, outer.message);
	/* A head that fills the message keeps the head and drops the tail:
	 * no reason is said at all rather than half of one twice. */
	char head[AIRLOCK_ERROR_MESSAGE_MAX + 8];
	memset(head, 'h', sizeof(head) - 1);
	head[sizeof(head) - 1] = 0;
	airlock_error_set(&e, AIRLOCK_ERR_SYSTEM, EIO, "%s", head);
	cr_assert_eq(strlen(e.message), sizeof(e.message) - 1);
	cr_assert_eq(occurrences(e.message, strerror(EIO)), 0);
}

/* The step runner (exec/step.h) says a facility's failure under the
 * step's name, once: a facility that names itself is not named again,
 * the class, errnum and code stay the facility's, and a step that failed
 * without a message is said by its name and code. */
Test(error, a_step_says_its_name_once_over_the_facility)
{
	airlock_error e = { 0 };
	int r = airlock_error_set(&e, AIRLOCK_ERR_SYSTEM, EIO, "loop: LOOP_CONFIGURE /dev/loop1");
	cr_assert_eq(exec_step_said("image", r, &e), -EIO);
	cr_assert_str_eq(e.message, "image: loop: LOOP_CONFIGURE /dev/loop1: Input/output error");
	cr_assert_eq(e.cls, AIRLOCK_ERR_SYSTEM);
	cr_assert_eq(e.errnum, EIO);

	r = airlock_error_set(&e, AIRLOCK_ERR_SYSTEM, EIO, "cgroup memory/x: mkdir");
	exec_step_said("cgroup", r, &e);
	cr_assert_str_eq(e.message, "cgroup memory/x: mkdir: Input/output error");
	r = airlock_error_set(&e, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, ENOSPC,
	                      "workspace volume: reserve");
	cr_assert_eq(exec_step_said("workspace volume", r, &e),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE));
	cr_assert_str_eq(e.message, "workspace volume: reserve: No space left on device");
	cr_assert_eq(e.cls, AIRLOCK_ERR_EXECUTION_UNAVAILABLE);
	cr_assert_eq(e.errnum, ENOSPC);
	/* A name that is only the start of the facility's first word is not
	 * the facility naming itself. */
	r = airlock_error_set(&e, AIRLOCK_ERR_CONFIG, 0, "egressless");
	exec_step_said("egress", r, &e);
	cr_assert_str_eq(e.message, "egress: egressless");

	airlock_error none = { 0 };
	cr_assert_eq(exec_step_said("sync socket", -EMFILE, &none), -EMFILE);
	cr_assert_str_eq(none.message, "sync socket: Too many open files");
	cr_assert_eq(none.cls, AIRLOCK_ERR_SYSTEM);
	cr_assert_eq(exec_step_said("x", 0, &none), 0);
	cr_assert_eq(exec_step_said("x", -EIO, NULL), -EIO);
}

/* ---- snapshot diff ------------------------------------------------------- */

static int fake_hash(void *ctx, const char *path, int64_t deadline_ms,
                     airlock_snapshot_hashed *ret, airlock_error *err)
{
	int *calls = ctx;
	(*calls)++;
	if (strcmp(path, "vanished") == 0)
		return -ENOENT;
	/* "slow" takes longer than any deadline. */
	if (strstr(path, "slow") && deadline_ms)
		return -ETIME;
	ret->kind = strstr(path, "link") ? AIRLOCK_FILE_SYMLINK : AIRLOCK_FILE_REGULAR;
	ret->size = (int64_t)strlen(path);
	return util_sha256_hex(path, strlen(path), ret->hex);
}

static void add(airlock_snapshot *s, const char *p, int64_t size, uint64_t ino, int64_t mtime,
                int64_t ctime)
{
	cr_assert_eq(snapshot_add(s, p, size, ino, mtime, ctime, 0), 0);
}

Test(snapshot, diff_reports_created_modified_deleted_and_hashes_only_those)
{
	airlock_snapshot a = { 0 }, b = { 0 };
	add(&a, "same", 1, 1, 10, 10);
	add(&a, "grown", 1, 2, 10, 10);
	add(&a, "deleted", 5, 3, 10, 10);
	add(&a, "ctime_only", 1, 4, 10, 10);
	add(&a, "replaced", 1, 5, 10, 10);
	add(&b, "same", 1, 1, 10, 10);
	add(&b, "grown", 2, 2, 11, 11);
	add(&b, "ctime_only", 1, 4, 10, 99); /* touch -r restores mtime; ctime moves */
	add(&b, "replaced", 1, 50, 10, 10);  /* rename over: a new inode */
	add(&b, "created", 3, 6, 10, 10);
	snapshot_sort(&a);
	snapshot_sort(&b);
	int calls = 0;
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(snapshot_diff(&a, &b, 1000, UINT64_MAX, 0, fake_hash, &calls, &r, &err), 0);
	cr_assert_eq(r.n_files_changed, 5);
	cr_assert_eq(calls, 4, "deletions and unchanged files are not hashed");
	const char *want[][2] = { { "created", "CREATED" }, { "ctime_only", "MODIFIED" },
		                  { "deleted", "DELETED" }, { "grown", "MODIFIED" },
		                  { "replaced", "MODIFIED" } };
	for (size_t i = 0; i < 5; i++) {
		cr_assert_str_eq(r.files_changed[i].path, want[i][0]);
		cr_assert_eq(r.files_changed[i].change,
		             strcmp(want[i][1], "CREATED") == 0   ? AIRLOCK_CHANGE_CREATED
		             : strcmp(want[i][1], "DELETED") == 0 ? AIRLOCK_CHANGE_DELETED
		                                                  : AIRLOCK_CHANGE_MODIFIED);
		cr_assert_eq(r.files_changed[i].has_sha256,
		             r.files_changed[i].change != AIRLOCK_CHANGE_DELETED);
	}
	cr_assert_eq(r.files_changed[2].size_bytes, 5, "a deletion reports the size it had");
	cr_assert_not(r.files_changed_truncated);
	airlock_execution_result_clear(&r);
	snapshot_clear(&a);
	snapshot_clear(&b);
}

Test(snapshot, cap_truncates_and_vanished_files_are_skipped)
{
	airlock_snapshot a = { 0 }, b = { 0 };
	char name[16];
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "f%02d", i);
		add(&b, name, 1, (uint64_t)i, 0, 0);
	}
	add(&b, "vanished", 1, 99, 0, 0);
	snapshot_sort(&b);
	int calls = 0;
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(snapshot_diff(&a, &b, 4, UINT64_MAX, 0, fake_hash, &calls, &r, &err), 0);
	cr_assert_eq(r.n_files_changed, 4);
	cr_assert(r.files_changed_truncated);
	airlock_execution_result_clear(&r);
	cr_assert_eq(snapshot_diff(&a, &b, 100, UINT64_MAX, 0, fake_hash, &calls, &r, &err), 0);
	cr_assert_eq(r.n_files_changed, 10, "a file gone before hashing is not reported");
	cr_assert_not(r.files_changed_truncated);
	airlock_execution_result_clear(&r);
	cr_assert_eq(snapshot_diff(&a, &a, 0, UINT64_MAX, 0, fake_hash, &calls, &r, &err), 0);
	cr_assert_eq(r.n_files_changed, 0);
	cr_assert_not(r.files_changed_truncated);
	airlock_execution_result_clear(&r);
	snapshot_clear(&b);
}

Test(snapshot, hash_budget_bounds_the_bytes_hashed)
{
	airlock_snapshot a = { 0 }, b = { 0 };
	add(&b, "a-small", 10, 1, 0, 0);
	add(&b, "b-sparse-terabyte", 1ll << 40, 2, 0, 0);
	add(&b, "c-small", 10, 3, 0, 0);
	snapshot_sort(&b);
	int calls = 0;
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(snapshot_diff(&a, &b, 100, 1 << 20, 0, fake_hash, &calls, &r, &err), 0);
	cr_assert_eq(r.n_files_changed, 1, "the listing stops before the file past the budget");
	cr_assert_str_eq(r.files_changed[0].path, "a-small");
	cr_assert(r.files_changed_truncated);
	cr_assert_eq(calls, 1, "the terabyte was never hashed");
	airlock_execution_result_clear(&r);
	snapshot_clear(&b);
}

/* The hashing stops at its deadline: the change in progress and every one
 * after it are left out, and the listing says it is truncated. */
Test(snapshot, hash_deadline_truncates_the_listing)
{
	airlock_snapshot a = { 0 }, b = { 0 };
	add(&a, "c-deleted", 1, 9, 0, 0);
	add(&b, "a-small", 10, 1, 0, 0);
	add(&b, "b-slow", 10, 2, 0, 0);
	add(&b, "d-small", 10, 3, 0, 0);
	snapshot_sort(&a);
	snapshot_sort(&b);
	int calls = 0;
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };
	int64_t far = util_monotonic_ms() + 3600 * 1000;
	cr_assert_eq(snapshot_diff(&a, &b, 100, UINT64_MAX, far, fake_hash, &calls, &r, &err), 0);
	cr_assert_eq(r.n_files_changed, 1, "only the change hashed before the deadline");
	cr_assert_str_eq(r.files_changed[0].path, "a-small");
	cr_assert(r.files_changed_truncated);
	airlock_execution_result_clear(&r);
	/* A deadline already past hashes nothing. */
	calls = 0;
	cr_assert_eq(snapshot_diff(&a, &b, 100, UINT64_MAX, util_monotonic_ms() - 1,
	                                   fake_hash, &calls, &r, &err), 0);
	cr_assert_eq(r.n_files_changed, 0);
	cr_assert(r.files_changed_truncated);
	cr_assert_eq(calls, 0);
	airlock_execution_result_clear(&r);
	snapshot_clear(&a);
	snapshot_clear(&b);
}

/* A path whose kind changed is one MODIFIED entry with the new kind; a
 * deletion keeps the kind it had. */
Test(snapshot, a_kind_change_is_one_modified_entry)
{
	airlock_snapshot a = { 0 }, b = { 0 };
	airlock_snap_entry was = { .path = "link-was-file", .kind = AIRLOCK_FILE_REGULAR, .size = 3, .ino = 1 };
	airlock_snap_entry now = { .path = "link-was-file", .kind = AIRLOCK_FILE_SYMLINK, .size = 3, .ino = 1 };
	airlock_snap_entry fifo = { .path = "z-fifo", .kind = AIRLOCK_FILE_FIFO, .ino = 2 };
	cr_assert_eq(snapshot_add_entry(&a, &was), 0);
	cr_assert_eq(snapshot_add_entry(&a, &fifo), 0);
	cr_assert_eq(snapshot_add_entry(&b, &now), 0);
	cr_assert(snapshot_differs(&a, &b));
	cr_assert_not(snapshot_differs(&a, &a));
	int calls = 0;
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(snapshot_diff(&a, &b, 100, UINT64_MAX, 0, fake_hash, &calls, &r, &err), 0);
	cr_assert_eq(r.n_files_changed, 2);
	cr_assert_str_eq(r.files_changed[0].path, "link-was-file");
	cr_assert_eq(r.files_changed[0].change, AIRLOCK_CHANGE_MODIFIED);
	cr_assert_eq(r.files_changed[0].kind, AIRLOCK_FILE_SYMLINK);
	cr_assert_eq(r.files_changed[1].change, AIRLOCK_CHANGE_DELETED);
	cr_assert_eq(r.files_changed[1].kind, AIRLOCK_FILE_FIFO);
	airlock_execution_result_clear(&r);
	snapshot_clear(&a);
	snapshot_clear(&b);
}

/* ---- snapshot walk --------------------------------------------------------- */

/* A temporary workspace. Trees here can be deeper and longer than PATH_MAX,
 * so everything is made and removed through directory descriptors. */
typedef struct tmp_ws {
	char path[64];
	int fd;
} tmp_ws;

static void ws_open(tmp_ws *t)
{
	snprintf(t->path, sizeof(t->path), "/tmp/airlock-snapwalk-XXXXXX");
	cr_assert_not_null(mkdtemp(t->path), "mkdtemp: %s", strerror(errno));
	t->fd = open(t->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(t->fd, 0);
}

/* Remove name beneath dfd, whatever it is. Entries are removed one at a time
 * from a rewound listing, so removal never races the directory's cursor. */
static void rm_tree_at(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		unlinkat(dfd, name, 0);
		return;
	}
	fchmod(fd, 0700);
	DIR *d = fdopendir(fd);
	cr_assert_not_null(d);
	for (;;) {
		rewinddir(d);
		struct dirent *de;
		while ((de = readdir(d)) &&
		       (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0))
			;
		if (!de)
			break;
		rm_tree_at(dirfd(d), de->d_name);
	}
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

static void ws_close(tmp_ws *t)
{
	close(t->fd);
	rm_tree_at(AT_FDCWD, t->path);
}

static void put_file(int dfd, const char *name, const char *data)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0, "create %s: %s", name, strerror(errno));
	size_t n = strlen(data);
	cr_assert_eq(write(fd, data, n), (ssize_t)n);
	close(fd);
}

/* Make name beneath dfd and return it open; dfd is closed unless it is keep. */
static int make_dir(int dfd, const char *name, int keep)
{
	cr_assert_eq(mkdirat(dfd, name, 0755), 0, "mkdir: %s", strerror(errno));
	int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(sub, 0);
	if (dfd != keep)
		close(dfd);
	return sub;
}

static void walk_ok(int fd, size_t max, size_t bytes, airlock_snapshot *s)
{
	airlock_error err = { 0 };
	*s = (airlock_snapshot){ 0 };
	int r = snapshot_walk(fd, max, bytes, s, &err);
	cr_assert_eq(r, 0, "walk: %s", err.message);
}

Test(snapshot_walk, small_tree_is_complete_sorted_with_every_kind)
{
	tmp_ws t;
	ws_open(&t);
	put_file(t.fd, "b.txt", "hello");
	int dir = make_dir(t.fd, "dir", t.fd);
	put_file(dir, "inner", "x");
	int sub = make_dir(dir, "sub", dir);
	put_file(sub, "deep", "");
	close(sub);
	close(dir);
	cr_assert_eq(mkdirat(t.fd, "empty", 0755), 0);
	cr_assert_eq(symlinkat("b.txt", t.fd, "link-to-file"), 0);
	cr_assert_eq(symlinkat("dir", t.fd, "link-to-dir"), 0);
	cr_assert_eq(mkfifoat(t.fd, "fifo", 0644), 0);
	cr_assert_eq(linkat(t.fd, "b.txt", t.fd, "a-hardlink", 0), 0);

	airlock_snapshot s;
	walk_ok(t.fd, 100, AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &s);
	cr_assert_not(s.truncated);
	/* Symlinks and the fifo are entries of their kinds; link-to-dir is
	 * not walked through. A hard link is an entry per path (no merging by
	 * inode). Directories are not entries. */
	const char *want[] = { "a-hardlink", "b.txt", "dir/inner", "dir/sub/deep",
		               "fifo", "link-to-dir", "link-to-file" };
	const airlock_file_kind kinds[] = { AIRLOCK_FILE_REGULAR, AIRLOCK_FILE_REGULAR,
		                            AIRLOCK_FILE_REGULAR, AIRLOCK_FILE_REGULAR,
		                            AIRLOCK_FILE_FIFO, AIRLOCK_FILE_SYMLINK,
		                            AIRLOCK_FILE_SYMLINK };
	cr_assert_eq(s.n, 7);
	for (size_t i = 0; i < 7; i++) {
		cr_assert_str_eq(s.entries[i].path, want[i]);
		cr_assert_eq(s.entries[i].kind, kinds[i], "%s", want[i]);
	}
	cr_assert_eq(s.entries[0].ino, s.entries[1].ino);
	cr_assert_eq(s.entries[1].size, 5);
	cr_assert_eq(s.entries[3].size, 0);
	cr_assert_eq(s.entries[6].size, 5, "a symlink's size is its target's length");
	cr_assert_neq(s.entries[1].mtime_ns, 0);

	/* Exactly max_entries entries, and exactly the byte budget, still fit. */
	size_t bytes = 0;
	for (size_t i = 0; i < 7; i++)
		bytes += strlen(want[i]) + 1;
	airlock_snapshot exact;
	walk_ok(t.fd, 7, bytes, &exact);
	cr_assert_not(exact.truncated);
	cr_assert_eq(exact.n, 7);

	/* A walk of an unchanged tree against itself lists nothing. */
	int calls = 0;
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(snapshot_diff(&s, &exact, 100, UINT64_MAX, 0, fake_hash, &calls, &r, &err), 0);
	cr_assert_eq(r.n_files_changed, 0);
	cr_assert_not(r.files_changed_truncated);
	airlock_execution_result_clear(&r);
	snapshot_clear(&exact);
	snapshot_clear(&s);
	ws_close(&t);
}

Test(snapshot_walk, more_files_than_max_entries_truncates_and_the_diff_lists_nothing)
{
	tmp_ws t;
	ws_open(&t);
	put_file(t.fd, "kept", "k");
	airlock_snapshot before;
	walk_ok(t.fd, 5, AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &before);
	cr_assert_not(before.truncated);

	/* Hard links to one inode: a volume short of inodes still holds more
	 * paths than max_entries. */
	put_file(t.fd, "target", "t");
	char name[32];
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "link%02d", i);
		cr_assert_eq(linkat(t.fd, "target", t.fd, name, 0), 0);
	}
	airlock_snapshot after;
	walk_ok(t.fd, 5, AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &after);
	cr_assert(after.truncated, "12 files against a bound of 5");
	cr_assert_leq(after.n, 5);

	/* Neither direction invents changes from a partial walk: "kept" may be
	 * missing from after, the links are missing from it too. */
	int calls = 0;
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(snapshot_diff(&before, &after, 100, UINT64_MAX, 0, fake_hash, &calls, &r,
	                                   &err), 0);
	cr_assert_eq(r.n_files_changed, 0);
	cr_assert(r.files_changed_truncated);
	cr_assert_eq(calls, 0, "nothing is hashed for a listing never made");
	airlock_execution_result_clear(&r);
	cr_assert_eq(snapshot_diff(&after, &before, 100, UINT64_MAX, 0, fake_hash, &calls, &r,
	                                   &err), 0);
	cr_assert_eq(r.n_files_changed, 0);
	cr_assert(r.files_changed_truncated);
	cr_assert_eq(calls, 0);
	airlock_execution_result_clear(&r);
	snapshot_clear(&before);
	snapshot_clear(&after);
	ws_close(&t);
}

Test(snapshot_walk, path_bytes_budget_truncates)
{
	tmp_ws t;
	ws_open(&t);
	char name[32];
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "file-%05d", i); /* 10 bytes + NUL */
		put_file(t.fd, name, "");
	}
	airlock_snapshot s;
	walk_ok(t.fd, 100, 10 * 11, &s);
	cr_assert_not(s.truncated);
	cr_assert_eq(s.n, 10);
	snapshot_clear(&s);
	walk_ok(t.fd, 100, 10 * 11 - 1, &s);
	cr_assert(s.truncated, "one byte short of the last path");
	cr_assert_eq(s.n, 9);
	snapshot_clear(&s);
	walk_ok(t.fd, 100, 55, &s);
	cr_assert(s.truncated);
	cr_assert_eq(s.n, 5);
	snapshot_clear(&s);
	ws_close(&t);
}

/* A chain of n directories named "d" beneath dfd, with a file "f" in the
 * last. */
static void make_chain(int dfd, int n)
{
	int cur = dfd;
	for (int i = 0; i < n; i++)
		cur = make_dir(cur, "d", dfd);
	put_file(cur, "f", "deep");
	if (cur != dfd)
		close(cur);
}

Test(snapshot_walk, nesting_past_the_depth_limit_truncates_without_error)
{
	tmp_ws t;
	ws_open(&t);
	int ok = make_dir(t.fd, "ok", t.fd);
	/* ok/ plus 254 more: the deepest directory the walk enters. */
	make_chain(ok, AIRLOCK_SNAPSHOT_DEPTH_MAX - 2);
	close(ok);
	airlock_snapshot s;
	walk_ok(t.fd, 100, AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &s);
	cr_assert_not(s.truncated);
	cr_assert_eq(s.n, 1);
	cr_assert_eq(strlen(s.entries[0].path), 3 + 2 * (AIRLOCK_SNAPSHOT_DEPTH_MAX - 2) + 1);
	snapshot_clear(&s);

	/* One level more is AIRLOCK_SNAPSHOT_DEPTH_MAX directories deep. */
	int deep = make_dir(t.fd, "deep", t.fd);
	make_chain(deep, AIRLOCK_SNAPSHOT_DEPTH_MAX - 1);
	close(deep);
	walk_ok(t.fd, 100, AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &s);
	cr_assert(s.truncated);
	snapshot_clear(&s);
	ws_close(&t);

	ws_open(&t);
	make_chain(t.fd, AIRLOCK_SNAPSHOT_DEPTH_MAX + 300);
	walk_ok(t.fd, 100, AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &s);
	cr_assert(s.truncated);
	snapshot_clear(&s);
	ws_close(&t);
}

/* Nest count directories of 255-byte names beneath dfd, put a file of
 * flen bytes' name in the last. */
static void make_long_path(int dfd, int count, size_t flen)
{
	char name[256];
	memset(name, 'n', 255);
	name[255] = 0;
	int cur = dfd;
	for (int i = 0; i < count; i++)
		cur = make_dir(cur, name, dfd);
	memset(name, 'f', flen);
	name[flen] = 0;
	put_file(cur, name, "x");
	if (cur != dfd)
		close(cur);
}

Test(snapshot_walk, a_path_past_the_length_limit_truncates_without_error)
{
	/* The longest relative path: "/workspace/" + it fits AIRLOCK_PATH_MAX. */
	const size_t longest = AIRLOCK_PATH_MAX - sizeof(AIRLOCK_WORKSPACE_ROOT);
	const size_t dirs = 15 * 256; /* 15 names of 255 bytes, each with its '/' */
	tmp_ws t;
	ws_open(&t);
	make_long_path(t.fd, 15, longest - dirs);
	airlock_snapshot s;
	walk_ok(t.fd, 100, AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &s);
	cr_assert_not(s.truncated, "a path of exactly the limit is recorded");
	cr_assert_eq(s.n, 1);
	cr_assert_eq(strlen(s.entries[0].path), longest);
	snapshot_clear(&s);
	ws_close(&t);

	ws_open(&t);
	make_long_path(t.fd, 15, longest - dirs + 1);
	walk_ok(t.fd, 100, AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &s);
	cr_assert(s.truncated, "one byte over");
	cr_assert_eq(s.n, 0);
	snapshot_clear(&s);
	ws_close(&t);

	ws_open(&t);
	put_file(t.fd, "short", "s");
	make_long_path(t.fd, 17, 10);
	walk_ok(t.fd, 100, AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &s);
	cr_assert(s.truncated, "directories nested past the length");
	snapshot_clear(&s);
	ws_close(&t);
}

Test(snapshot_walk, an_unreadable_directory_truncates_without_error)
{
	tmp_ws t;
	ws_open(&t);
	cr_assert_eq(fchmod(t.fd, 0755), 0);
	put_file(t.fd, "visible", "v");
	int locked = make_dir(t.fd, "locked", t.fd);
	put_file(locked, "hidden", "h");
	cr_assert_eq(fchmod(locked, 0), 0);
	close(locked);
	/* Checked as an unprivileged uid, which the mode stops (root's
	 * CAP_DAC_OVERRIDE would not be). */
	relay_writer w = { .fd = x[0], .data = out, .len = total };
	pthread_t wt;
	cr_assert_eq(pthread_create(&wt, NULL, relay_write_all, &w), 0);
	read_exactly(y[0], (char *)in, total);
	pthread_join(wt, NULL);
	cr_expect_eq(w.off, total);
	cr_expect_eq(memcmp(in, out, total), 0);
	free(in);
	free(out);
	for (int i = 0; i < 2; i++) {
		close(x[i]);
		close(y[i]);
	}
	pthread_join(t, NULL);
	cr_expect_eq(c.r, 0, "both sides closed: both directions ended");
}

/* A side that closes entirely while the other is silent ends the relay (no
 * spinning on its hang-up, no waiting for bytes that have nowhere to go);
 * a side reset is an error, never SIGPIPE; pending past the buffer is
 * refused. */
Test(relay, a_vanished_side_ends_it)
{
	int x[2], y[2];
	relay_case c;
	pthread_t t;
	relay_start(&c, x, y, -1, NULL, &t);
	close(x[0]);
	pthread_join(t, NULL);
	cr_expect_eq(c.r, 0, "%d", c.r);
	for (int i = 0; i < 2; i++)
		close(y[i]);
	close(x[1]);

	relay_start(&c, x, y, -1, NULL, &t);
	close(y[0]);
	cr_assert_eq(write(x[0], "to nowhere", 10), 10);
	pthread_join(t, NULL);
	cr_expect(c.r == -EPIPE || c.r == -ECONNRESET || c.r == 0, "%d", c.r);
	close(x[0]);
	close(x[1]);
	close(y[1]);

	static char big[UTIL_RELAY_BUFFER + 2];
	memset(big, 'p', sizeof(big) - 1);
	cr_expect_eq(util_relay(-1, -1, -1, big, sizeof(big) - 1), -EINVAL);
}
