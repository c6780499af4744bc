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
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
			_exit(10);
		airlock_snapshot s = { 0 };
		airlock_error err = { 0 };
		if (snapshot_walk(t.fd, 100, AIRLOCK_SNAPSHOT_PATH_BYTES_MAX, &s, &err) != 0)
			_exit(11);
		_exit(s.truncated ? 0 : 12);
	}
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 0, "child status %d", WEXITSTATUS(status));
	ws_close(&t);
}

/* ---- util_run ------------------------------------------------------------- */

static char run_sh[] = "/bin/sh";
static char run_c[] = "-c";
static char run_path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";

/* Run script with /bin/sh; asserts that it could be run. */
static void run_sh_script(const char *script, size_t output_max, int64_t timeout_ms, bool group,
                          bool private_mounts, util_run_result *res)
{
	char *s = strdup(script);
	cr_assert_not_null(s);
	char *argv[] = { run_sh, run_c, s, NULL };
	char *envp[] = { run_path_env, NULL };
	const util_run_options o = {
		.path = "/bin/sh",
		.argv = argv,
		.envp = envp,
		.output_max = output_max,
		.timeout_ms = timeout_ms,
		.own_process_group = group,
		.private_mounts = private_mounts,
	};
	int r = util_run(&o, res);
	free(s);
	cr_assert_eq(r, 0, "util_run: %s: %s", res->failed ? res->failed : "?", strerror(-r));
}

Test(run, reports_the_exit_status_and_output)
{
	util_run_result res;
	run_sh_script("echo out; echo err >&2; exit 7", 1024, 5000, false, false, &res);
	cr_assert_not(res.timed_out);
	cr_assert(res.output_eof);
	cr_assert(WIFEXITED(res.status));
	cr_assert_eq(WEXITSTATUS(res.status), 7);
	cr_assert_str_eq(res.output, "out\nerr\n");
	util_run_result_clear(&res);

	run_sh_script("kill -9 $$", 1024, 5000, true, false, &res);
	cr_assert(WIFSIGNALED(res.status));
	cr_assert_eq(WTERMSIG(res.status), SIGKILL);
	util_run_result_clear(&res);

	char *argv[] = { run_sh, NULL };
	char *envp[] = { NULL };
	const util_run_options o = { .path = "/nonexistent/program", .argv = argv, .envp = envp,
		                     .output_max = 16, .timeout_ms = 5000 };
	/* A program that cannot be executed is an error naming the step and
	 * the reason, not an exit status to decode. */
	cr_assert_eq(util_run(&o, &res), -ENOENT);
	cr_assert_str_eq(res.failed, "exec");
	util_run_result_clear(&res);

	const util_run_options rel = { .path = "sh", .argv = argv, .envp = envp, .output_max = 16,
		                       .timeout_ms = 5000 };
	cr_assert_eq(util_run(&rel, &res), -EINVAL, "a relative path is refused");
	util_run_result_clear(&res);
}

Test(run, output_tail_keeps_the_end)
{
	util_run_result res;
	run_sh_script("i=0; while [ $i -lt 5000 ]; do echo line$i; i=$((i+1)); done; printf END",
	              64, 10000, false, false, &res);
	cr_assert(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0);
	cr_assert_eq(res.output_len, 64);
	cr_assert_eq(strlen(res.output), 64);
	const char *end = "line4998\nline4999\nEND";
	cr_assert_str_eq(res.output + 64 - strlen(end), end, "tail: %s", res.output);
	util_run_result_clear(&res);
}

Test(run, timeout_kills_the_whole_process_group)
{
	util_run_result res;
	int64_t t0 = util_monotonic_ms();
	run_sh_script("echo $$; sleep 30 & sleep 30", 256, 500, true, false, &res);
	int64_t took = util_monotonic_ms() - t0;
	cr_assert(res.timed_out);
	cr_assert(WIFSIGNALED(res.status) && WTERMSIG(res.status) == SIGKILL);
	cr_assert_lt(took, 10000, "took %lld ms", (long long)took);
	pid_t pgid = (pid_t)atoi(res.output);
	cr_assert_gt(pgid, 1, "output: %s", res.output);
	/* No member of the group is left when the call returns. */
	errno = 0;
	cr_assert_eq(kill(-pgid, 0), -1, "a member of group %d survived", (int)pgid);
	cr_assert_eq(errno, ESRCH);
	util_run_result_clear(&res);

	/* Also after a leader that exits on its own: what it left in its group
	 * is killed, and the call does not wait for it. */
	t0 = util_monotonic_ms();
	run_sh_script("echo $$; sleep 30 & exit 0", 256, 20000, true, false, &res);
	took = util_monotonic_ms() - t0;
	cr_assert_not(res.timed_out);
	cr_assert(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0);
	cr_assert_lt(took, 10000, "took %lld ms", (long long)took);
	pgid = (pid_t)atoi(res.output);
	cr_assert_gt(pgid, 1);
	errno = 0;
	cr_assert_eq(kill(-pgid, 0), -1, "a member of group %d survived", (int)pgid);
	cr_assert_eq(errno, ESRCH);
	util_run_result_clear(&res);
}

Test(run, private_mounts_stay_in_the_child)
{
	if (geteuid() != 0)
		cr_skip_test("needs root (CAP_SYS_ADMIN)");
	char dir[] = "/tmp/airlock-run-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char script[256];
	snprintf(script, sizeof(script),
	         "mount -t tmpfs airlock-run %s && touch %s/inside && grep -q ' %s ' /proc/self/mountinfo",
	         dir, dir, dir);
	util_run_result res;
	run_sh_script(script, 1024, 10000, true, true, &res);
	cr_assert(WIFEXITED(res.status));
	cr_assert_eq(WEXITSTATUS(res.status), 0, "status %d: %s", WEXITSTATUS(res.status),
	             res.output);
	util_run_result_clear(&res);
	/* The parent sees neither the mount nor the file written into it. */
	FILE *f = fopen("/proc/self/mountinfo", "r");
	cr_assert_not_null(f);
	char line[4096];
	char needle[64];
	snprintf(needle, sizeof(needle), " %s ", dir);
	while (fgets(line, sizeof(line), f))
		cr_assert_null(strstr(line, needle), "mount visible in the parent: %s", line);
	fclose(f);
	char inside[64];
	snprintf(inside, sizeof(inside), "%s/inside", dir);
	cr_assert_neq(access(inside, F_OK), 0);
	cr_assert_eq(rmdir(dir), 0);
}

Test(run, stdin_is_dev_null)
{
	util_run_result res;
	run_sh_script("readlink /proc/self/fd/0; cat; echo done", 1024, 5000, false, false, &res);
	cr_assert(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0);
	cr_assert_str_eq(res.output, "/dev/null\ndone\n");
	util_run_result_clear(&res);
}

Test(run, a_descriptor_of_the_parent_does_not_reach_the_child)
{
	/* Not O_CLOEXEC: only the runner's closing keeps it out. */
	int fd = open("/dev/null", O_RDONLY);
	cr_assert_geq(fd, 0);
	int high = fcntl(fd, F_DUPFD, 50);
	cr_assert_geq(high, 50);
	cr_assert_eq(fcntl(high, F_GETFD) & FD_CLOEXEC, 0);
	char script[128];
	snprintf(script, sizeof(script),
	         "if [ -e /proc/self/fd/%d ]; then echo leaked; else echo closed; fi; ls /proc/self/fd",
	         high);
	util_run_result res;
	run_sh_script(script, 1024, 5000, false, false, &res);
	cr_assert(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0);
	cr_assert_eq(strncmp(res.output, "closed\n", 7), 0, "output: %s", res.output);
	/* ls itself has 0-2 and the directory it reads; nothing of ours. */
	char expect[16];
	snprintf(expect, sizeof(expect), "\n%d\n", high);
	cr_assert_null(strstr(res.output, expect), "output: %s", res.output);
	util_run_result_clear(&res);
	close(high);
	close(fd);
}

/* ---- hashing a real file (snapshot_hash_fd) -------------------------------- */

static int hash_path(int root, const char *path, int64_t cpu_deadline_ns,
                     airlock_snapshot_hashed *h)
{
	snapshot_hash_root hr = { .fd = root, .cpu_deadline_ns = cpu_deadline_ns };
	airlock_error err = { 0 };
	*h = (airlock_snapshot_hashed){ 0 };
	int r = snapshot_hash_fd(&hr, path, 0, h, &err);
	cr_assert(r == 0 || r == -ETIME, "hash %s: %d %s", path, r, err.message);
	return r;
}

static int64_t cached_of(int fd, size_t len)
{
	void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert(m != MAP_FAILED, "mmap: %s", strerror(errno));
	size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = (len + page - 1) / page;
	unsigned char *vec = malloc(pages);
	cr_assert_not_null(vec);
	cr_assert_eq(mincore(m, len, vec), 0, "mincore: %s", strerror(errno));
	int64_t n = 0;
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	free(vec);
	munmap(m, len);
	return n * (int64_t)page;
}

/* Holes are hashed as the zeros they read as, without reading them: the
 * digest is the true SHA-256 of every byte, for data, holes, a leading and
 * a trailing hole and a file of nothing but hole. */
Test(snapshot_hash, holes_hash_as_their_zeros)
{
	tmp_ws t;
	ws_open(&t);
	const size_t len = (size_t)9 << 20;
	unsigned char *want = calloc(1, len);
	cr_assert_not_null(want);
	int fd = openat(t.fd, "sparse", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)len), 0);
	/* data at 1 MiB + 5 (unaligned), 4 MiB and 8 MiB - 3 (crossing a page) */
	const off_t at[] = { (1 << 20) + 5, 4 << 20, (8 << 20) - 3 };
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		char d[100000];
		for (size_t k = 0; k < sizeof(d); k++)
			d[k] = (char)(k * 7 + i);
		cr_assert_eq(pwrite(fd, d, sizeof(d), at[i]), (ssize_t)sizeof(d));
		memcpy(want + at[i], d, sizeof(d));
	}
	close(fd);
	char hex[65];
	cr_assert_eq(util_sha256_hex(want, len, hex), 0);
	airlock_snapshot_hashed h;
	cr_assert_eq(hash_path(t.fd, "sparse", 0, &h), 0);
	cr_assert_eq(h.size, (int64_t)len);
	cr_assert_str_eq(h.hex, hex);

	fd = openat(t.fd, "holes", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)len), 0);
	close(fd);
	memset(want, 0, len);
	cr_assert_eq(util_sha256_hex(want, len, hex), 0);
	cr_assert_eq(hash_path(t.fd, "holes", 0, &h), 0);
	cr_assert_str_eq(h.hex, hex);
	free(want);
	ws_close(&t);
}

/* The service read every changed file back to hash it and
 * left it in the page cache, charged to the service's cgroup: a sandbox could
 * grow the host's cache by its whole workspace each command. Hashing drops
 * what it read. */
Test(snapshot_hash, hashing_drops_what_it_read)
{
	tmp_ws t;
	ws_open(&t);
	const size_t len = (size_t)64 << 20;
	int fd = openat(t.fd, "dense", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	static char chunk[1 << 20];
	memset(chunk, 0x5a, sizeof(chunk));
	for (size_t k = 0; k < len; k += sizeof(chunk))
		cr_assert_eq(write(fd, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
	cr_assert_eq(fsync(fd), 0);
	cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	int64_t before = cached_of(fd, len);
	airlock_snapshot_hashed h;
	cr_assert_eq(hash_path(t.fd, "dense", 0, &h), 0);
	cr_assert_eq(h.size, (int64_t)len);
	int64_t after = cached_of(fd, len);
	printf("hashing 64 MiB: cached %lld KiB before, %lld KiB after\n",
	       (long long)(before >> 10), (long long)(after >> 10));
	cr_assert_lt(after, 4 << 20, "hashing left %lld KiB of the file cached",
	             (long long)(after >> 10));
	close(fd);
	ws_close(&t);
}

/* A 4 GiB hole costs seconds of SHA-256 however it is
 * read. The hashing thread's CPU time is bounded (exec_result_common sets
 * the bound to the command's own CPU share): past it, -ETIME, as at the
 * deadline, with the CPU spent near the bound. */
Test(snapshot_hash, the_cpu_bound_stops_hashing)
{
	tmp_ws t;
	ws_open(&t);
	int fd = openat(t.fd, "holes", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)4 << 30), 0);
	close(fd);
	const int64_t bound = 50 * 1000000ll;
	int64_t t0 = snapshot_thread_cpu_ns();
	airlock_snapshot_hashed h;
	cr_assert_eq(hash_path(t.fd, "holes", t0 + bound, &h), -ETIME);
	int64_t spent = snapshot_thread_cpu_ns() - t0;
	printf("4 GiB hole, CPU bound 50 ms: %lld ms of CPU\n", (long long)(spent / 1000000));
	/* Checked every MiB: a MiB of SHA-256 is a few ms at most. */
	cr_assert_lt(spent, bound * 4, "%lld ms of CPU", (long long)(spent / 1000000));
	ws_close(&t);
}

/* The public face of the escaper (airlock/escape.h), what every airlock
 * program prints untrusted bytes with. */
Test(util, fput_escaped_passes_text_and_escapes_controls)
{
	char out[256] = { 0 };
	FILE *f = fmemopen(out, sizeof(out) - 1, "w");
	cr_assert_not_null(f);
	static const char in[] = "ok \xc3\xa9 \x1b[2J a\\b \xff";
	airlock_fput_escaped(f, in, sizeof(in) - 1, true);
	fclose(f);
	cr_assert_str_eq(out, "ok \xc3\xa9 \\x1b[2J a\\\\b \\xff");
	char buf[32];
	cr_assert_str_eq(airlock_escape(buf, sizeof(buf), "a\nb", 3), "a\\x0ab");
}

/* ---- spawn: one way to start a child --------------------------------------- */

static int hook_refuses(void *ctx)
{
	(void)ctx;
	return -EPERM;
}

/* The child has exactly the descriptors placed for it (and /dev/null on
 * 0-2 it was not given); a failure before exec names its step and errno. */
Test(spawn, descriptors_are_placed_and_the_rest_closed)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	int stray = open("/dev/null", O_RDONLY); /* not close-on-exec: must not leak */
	cr_assert_geq(stray, 0);
	char script[256];
	snprintf(script, sizeof(script),
	         "[ -e /proc/self/fd/5 ] && ! [ -e /proc/self/fd/%d ] && ! [ -e /proc/self/fd/3 ] && "
	         "read x || exit 0; exit 9",
	         stray);
	char *argv[] = { "sh", "-c", script, NULL };
	char *envp[] = { NULL };
	const spawn_fd fds[] = { { p[1], 5 } };
	spawn_options o = { .exec_fd = -1, .path = "/bin/sh", .argv = argv, .envp = envp,
		            .fds = fds, .n_fds = 1, .pdeathsig = SIGKILL };
	spawn_child c;
	spawn_failure f;
	cr_assert_eq(spawn_start(&o, &c, &f), 0, "%s: %s", spawn_step_name(f.step), strerror(f.errnum));
	cr_assert_gt(c.pid, 0);
	cr_assert_geq(c.pidfd, 0);
	int st = -1;
	cr_assert_eq(waitpid(c.pid, &st, 0), c.pid);
	/* fd 5 there, the stray and 3 not, stdin at EOF (/dev/null): 0. */
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	close(c.pidfd);
	close(stray);
	close(p[0]);
	close(p[1]);

	o = (spawn_options){ .exec_fd = -1, .path = "/nonexistent/x", .argv = argv, .envp = envp };
	cr_assert_eq(spawn_start(&o, &c, &f), -ENOENT);
	cr_assert_eq(f.step, SPAWN_STEP_EXEC);
	cr_assert_str_eq(spawn_step_name(f.step), "exec");
	cr_assert_eq(c.pid, -1, "a failed child is reaped, not returned");

	o = (spawn_options){ .exec_fd = -1, .path = "/bin/sh", .argv = argv, .envp = envp,
		             .hook = hook_refuses };
	cr_assert_eq(spawn_start(&o, &c, &f), -EPERM);
	cr_assert_eq(f.step, SPAWN_STEP_HOOK);
	cr_assert_eq(f.errnum, EPERM);
}

/* A signal the parent ignores is not ignored by the child. */
Test(spawn, signals_are_reset)
{
	struct sigaction ign = { .sa_handler = SIG_IGN }, old;
	sigaction(SIGPIPE, &ign, &old);
	char *argv[] = { "sh", "-c", "kill -PIPE $$; exit 3", NULL };
	char *envp[] = { NULL };
	spawn_options o = { .exec_fd = -1, .path = "/bin/sh", .argv = argv, .envp = envp };
	spawn_child c;
	spawn_failure f;
	cr_assert_eq(spawn_start(&o, &c, &f), 0);
	int st = -1;
	cr_assert_eq(waitpid(c.pid, &st, 0), c.pid);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE, "status %d", st);
	close(c.pidfd);
	sigaction(SIGPIPE, &old, NULL);
}

/* The parent's hook runs after the fork and before the child does anything
 * (the child has not executed yet); its failure kills the child. */
static int parent_saw_unexecuted;
static int check_not_yet_executed(pid_t pid, void *ctx)
{
	(void)ctx;
	char path[64], comm[64] = { 0 };
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = 0;
	fclose(f);
	/* Still a copy of this test, not the shell. */
	parent_saw_unexecuted = strncmp(comm, "sh", 2) != 0;
	return 0;
}
static int parent_refuses(pid_t pid, void *ctx)
{
	(void)pid;
	(void)ctx;
	return -EACCES;
}

Test(spawn, the_parent_hook_runs_before_the_child)
{
	char *argv[] = { "sh", "-c", "exit 4", NULL };
	char *envp[] = { NULL };
	spawn_options o = { .exec_fd = -1, .path = "/bin/sh", .argv = argv, .envp = envp,
		            .parent_hook = check_not_yet_executed };
	spawn_child c;
	spawn_failure f;
	cr_assert_eq(spawn_start(&o, &c, &f), 0, "%s: %s", spawn_step_name(f.step), strerror(f.errnum));
	int st = -1;
	cr_assert_eq(waitpid(c.pid, &st, 0), c.pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 4);
	cr_assert(parent_saw_unexecuted, "the hook ran after the exec");
	close(c.pidfd);
	o.parent_hook = parent_refuses;
	cr_assert_eq(spawn_start(&o, &c, &f), -EACCES);
	cr_assert_eq(f.step, SPAWN_STEP_PARENT);
	cr_assert_eq(c.pid, -1);
}

/* The asynchronous start of a function in new namespaces: spawn returns as
 * soon as the child exists, the caller runs its own handshake with it, and
 * the child's failure at a step of its own reaches the caller as (step,
 * errno) through spawn_finish. */
typedef struct ns_child {
	int sock;
	bool fail; /* fail at step 7 after the handshake, else exit 5 */
	bool hang; /* after the handshake, wait for a message that never comes */
} ns_child;

static int ns_child_fn(void *ctx, int report_fd)
{
	const ns_child *a = ctx;
	/* pid 1 of its own pid namespace, and a hostname of its own. */
	char hello = getpid() == 1 && sethostname("spawned", 7) == 0 ? 'y' : 'n';
	if (send(a->sock, &hello, 1, MSG_NOSIGNAL) != 1)
		spawn_child_fail(report_fd, 6, errno);
	char go;
	if (recv(a->sock, &go, 1, 0) != 1)
		spawn_child_fail(report_fd, 6, errno ? errno : EPIPE);
	if (a->hang && recv(a->sock, &go, 1, 0) != 1)
		spawn_child_fail(report_fd, 8, errno ? errno : EPIPE);
	if (a->fail && open("/nonexistent/spawn", O_RDONLY | O_CLOEXEC) < 0)
		spawn_child_fail(report_fd, 7, errno);
	return 5;
}

static const char *ns_step_name(int step)
{
	return step == 7 ? "the seventh step" : "another step";
}

static void ns_start(ns_child *a, int sv[2], spawn_child *c)
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	a->sock = sv[1];
	const spawn_options o = { .clone_flags = CLONE_NEWPID | CLONE_NEWUTS,
		                  .child_fn = ns_child_fn, .child_fn_ctx = a, .async = true,
		                  .keep = &a->sock, .n_keep = 1 };
	spawn_failure f;
	cr_assert_eq(spawn_start(&o, c, &f), 0, "%s: %s", spawn_step_name(f.step), strerror(f.errnum));
	close(sv[1]);
	cr_assert_gt(c->pid, 0);
	cr_assert_geq(c->pidfd, 0);
	cr_assert_geq(c->report_fd, 0, "an async start keeps the report's pipe");
	char hello = 0;
	cr_assert_eq(recv(sv[0], &hello, 1, 0), 1);
	cr_assert_eq(hello, 'y', "the child is not pid 1 of new pid and uts namespaces");
	struct utsname u;
	cr_assert_eq(uname(&u), 0);
	cr_assert_str_neq(u.nodename, "spawned", "the child's hostname reached ours");
	cr_assert_eq(send(sv[0], "g", 1, MSG_NOSIGNAL), 1);
}

Test(spawn, a_namespaced_function_runs_a_handshake_and_reports_its_step)
{
	int sv[2];
	ns_child a = { .fail = true };
	spawn_child c;
	ns_start(&a, sv, &c);
	spawn_failure f;
	cr_assert_eq(spawn_finish(&c, util_monotonic_ms() + 5000, &f), -ENOENT);
	cr_assert_eq(f.step, SPAWN_STEP_CHILD);
	cr_assert_eq(f.detail, 7);
	cr_assert_eq(f.errnum, ENOENT);
	cr_assert_str_eq(spawn_failure_step(&f, ns_step_name), "the seventh step");
	cr_assert_eq(c.report_fd, -1);
	pid_t pid = c.pid;
	spawn_child_kill_reap(&c);
	cr_assert_eq(c.pid, -1);
	cr_assert_eq(c.pidfd, -1);
	cr_assert_eq(kill(pid, 0), -1, "the child is still there (a zombie answers too)");
	cr_assert_eq(errno, ESRCH);
	close(sv[0]);

	/* Without a failure: the pipe ends with nothing, and what the function
	 * returned is the child's exit status. */
	a.fail = false;
	ns_start(&a, sv, &c);
	cr_assert_eq(spawn_finish(&c, util_monotonic_ms() + 5000, &f), 0);
	int st = -1;
	cr_assert_eq(spawn_wait(c.pidfd, util_monotonic_ms() + 5000, &st), 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 5, "status %d", st);
	spawn_child_reap(&c);
	close(sv[0]);
}

/* A started child left to the cleanup attribute is killed and reaped: no
 * process, no zombie. */
Test(spawn, the_cleanup_kills_and_reaps)
{
	int sv[2];
	ns_child a = { .hang = true };
	pid_t pid;
	{
		_cleanup_spawn_child_ spawn_child c = SPAWN_CHILD_NONE;
		ns_start(&a, sv, &c);
		pid = c.pid;
		/* The child waits for a second message, which never comes. */
		cr_assert_eq(spawn_finish(&c, util_monotonic_ms() + 200, NULL), -ETIMEDOUT);
		cr_assert_eq(kill(pid, 0), 0);
	}
	cr_assert_eq(kill(pid, 0), -1, "the child outlived its cleanup");
	cr_assert_eq(errno, ESRCH);
	close(sv[0]);
}

/* Only namespace flags, and no death signal a new pid namespace could not
 * check. */
Test(spawn, clone_flags_are_namespaces_only)
{
	ns_child a = { .sock = -1 };
	spawn_options o = { .clone_flags = CLONE_NEWUTS | CLONE_VM, .child_fn = ns_child_fn,
		            .child_fn_ctx = &a, .async = true };
	spawn_child c;
	spawn_failure f;
	cr_assert_eq(spawn_start(&o, &c, &f), -EINVAL);
	cr_assert_eq(f.step, SPAWN_STEP_NONE);
	cr_assert_str_eq(spawn_failure_step(&f, NULL), "arguments");
	o.clone_flags = CLONE_NEWPID;
	o.pdeathsig = SIGKILL;
	cr_assert_eq(spawn_start(&o, &c, &f), -EINVAL);
	cr_assert_eq(c.pid, -1);
}

/* Two threads spawning at once: a function child of one thread (init
 * waiting for its GO, the reclaim writer in its write) is a copy of the
 * whole descriptor table, and holds the other thread's failure pipe while
 * it runs. A synchronous start of /bin/true must not wait for that
 * sibling to exit. */
#define SIBLING_HOLD_MS 2000
static atomic_bool sibling_stop;
static int sibling_sleeps(void *ctx, int report_fd)
{
	(void)ctx;
	(void)report_fd;
	struct timespec t = { SIBLING_HOLD_MS / 1000, 0 };
	nanosleep(&t, NULL);
	return 0;
}
static void *sibling_loop(void *arg)
{
	(void)arg;
	while (!atomic_load(&sibling_stop)) {
		const spawn_options so = { .child_fn = sibling_sleeps, .async = true };
		spawn_child c;
		if (spawn_start(&so, &c, NULL) == 0) {
			usleep(200);
			close(c.report_fd);
			close(c.pidfd); /* reaped at the end */
		}
	}
	return NULL;
}

Test(spawn, a_sibling_threads_function_child_does_not_hold_a_start, .timeout = 120)
{
	pthread_t t;
	atomic_store(&sibling_stop, false);
	cr_assert_eq(pthread_create(&t, NULL, sibling_loop, NULL), 0);
	char a0[] = "true";
	char *const argv[] = { a0, NULL }, *const envp[] = { NULL };
	int64_t worst = 0;
	for (int i = 0; i < 200 && worst < SIBLING_HOLD_MS / 2; i++) {
		const spawn_options so = { .exec_fd = -1, .path = "/bin/true", .argv = argv,
			                   .envp = envp };
		spawn_child c;
		int64_t t0 = util_monotonic_ms();
		cr_assert_eq(spawn_start(&so, &c, NULL), 0);
		int64_t d = util_monotonic_ms() - t0;
		spawn_child_reap(&c);
		if (d > worst)
			worst = d;
	}
	atomic_store(&sibling_stop, true);
	pthread_join(t, NULL);
	while (waitpid(-1, NULL, 0) > 0)
		;
	cr_assert_lt(worst, SIBLING_HOLD_MS / 2,
	             "a start of /bin/true took %lld ms: a sibling thread's child held its pipe",
	             (long long)worst);
}

/* A report already in the pipe is read even when the deadline has passed:
 * native_child_error calls spawn_finish with the start budget's deadline
 * after the sync socket ended, and a child that failed at its last moment
 * must be named by its step, not "lost contact". */
static int fails_at_once(void *ctx, int report_fd)
{
	(void)ctx;
	spawn_child_fail(report_fd, 3, EACCES);
}

Test(spawn, a_report_already_there_is_read_past_the_deadline)
{
	const spawn_options so = { .child_fn = fails_at_once, .async = true };
	spawn_child c;
	cr_assert_eq(spawn_start(&so, &c, NULL), 0);
	siginfo_t si;
	cr_assert_eq(waitid((idtype_t)P_PIDFD, (id_t)c.pidfd, &si, WEXITED | WNOWAIT), 0);
	spawn_failure f;
	int r = spawn_finish(&c, util_monotonic_ms() - 1, &f);
	spawn_child_reap(&c);
	cr_assert_eq(r, -EACCES, "spawn_finish returned %d (the report was in the pipe)", r);
	cr_assert_eq(f.step, SPAWN_STEP_CHILD);
	cr_assert_eq(f.detail, 3);
}

/* A function child holds only what it keeps, the standard streams and its
 * report pipe, from its first instruction. */
typedef struct kept_fds {
	int kept, other;
} kept_fds;
static int checks_its_fds(void *ctx, int report_fd)
{
	const kept_fds *k = ctx;
	if (fcntl(k->kept, F_GETFD) < 0)
		return 1;
	if (fcntl(k->other, F_GETFD) >= 0 || errno != EBADF)
		return 2;
	if (fcntl(report_fd, F_GETFD) < 0 || fcntl(2, F_GETFD) < 0)
		return 3;
	return 0;
}

Test(spawn, a_function_child_holds_only_what_it_keeps)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	kept_fds k = { .kept = p[0], .other = p[1] };
	const spawn_options so = { .child_fn = checks_its_fds, .child_fn_ctx = &k,
		                   .keep = &k.kept, .n_keep = 1, .async = true };
	spawn_child c;
	cr_assert_eq(spawn_start(&so, &c, NULL), 0);
	int st = -1;
	cr_assert_eq(spawn_wait(c.pidfd, util_monotonic_ms() + 5000, &st), 0);
	spawn_child_reap(&c);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	close(p[0]);
	close(p[1]);
}

/* ---- util_relay ----------------------------------------------------------- */

#include "util/relay.h"

typedef struct relay_case {
	int a, b; /* the relay's two ends */
	int stop; /* its stop descriptor, or -1 */
	const char *pending;
	int r;
} relay_case;

static void *relay_thread(void *p)
{
	relay_case *c = p;
	c->r = util_relay(c->a, c->b, c->stop, c->pending, c->pending ? strlen(c->pending) : 0);
	return NULL;
}

/* Two socket pairs and a relay between them: x[0] talks to y[0] through
 * x[1] <-> y[1]. */
static void relay_start(relay_case *c, int x[2], int y[2], int stop, const char *pending,
                        pthread_t *t)
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, x), 0);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, y), 0);
	*c = (relay_case){ .a = x[1], .b = y[1], .stop = stop, .pending = pending, .r = -999 };
	cr_assert_eq(pthread_create(t, NULL, relay_thread, c), 0);
}

static void read_exactly(int fd, char *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = read(fd, buf + got, n - got);
		cr_assert(k > 0, "read: %zd (%s) after %zu of %zu", k, strerror(errno), got, n);
		got += (size_t)k;
	}
}

/* Bytes both ways, the pending bytes first, end of file passed on each way,
 * and the relay returns 0 once both directions ended. */
Test(relay, both_ways_pending_first_and_half_close)
{
	int x[2], y[2];
	relay_case c;
	pthread_t t;
	relay_start(&c, x, y, -1, "token-rest:", &t);
	cr_assert_eq(write(x[0], "ping", 4), 4);
	char buf[64] = { 0 };
	read_exactly(y[0], buf, 15);
	cr_expect_str_eq(buf, "token-rest:ping");
	cr_assert_eq(write(y[0], "pong", 4), 4);
	memset(buf, 0, sizeof(buf));
	read_exactly(x[0], buf, 4);
	cr_expect_str_eq(buf, "pong");
	/* One side ends its sending; the other still answers after it. */
	cr_assert_eq(shutdown(x[0], SHUT_WR), 0);
	cr_expect_eq(read(y[0], buf, sizeof(buf)), 0, "the end of file is passed on");
	cr_assert_eq(write(y[0], "late", 4), 4);
	read_exactly(x[0], buf, 4);
	cr_expect_eq(memcmp(buf, "late", 4), 0);
	cr_assert_eq(shutdown(y[0], SHUT_WR), 0);
	cr_expect_eq(read(x[0], buf, sizeof(buf)), 0);
	pthread_join(t, NULL);
	cr_expect_eq(c.r, 0);
	for (int i = 0; i < 2; i++) {
		close(x[i]);
		close(y[i]);
	}
}

typedef struct relay_writer {
	int fd;
	const unsigned char *data;
	size_t len, off;
} relay_writer;

/* Writes all of it in odd-sized chunks (a blocking descriptor). */
static void *relay_write_all(void *p)
{
	relay_writer *w = p;
	while (w->off < w->len) {
		ssize_t k = write(w->fd, w->data + w->off, w->len - w->off < 3000 ? w->len - w->off : 3000);
		if (k <= 0)
			break;
		w->off += (size_t)k;
	}
	return NULL;
}

/* A reader that does not read: the relay stops reading its writer (the
 * writer's socket fills) and holds no more than its buffer; the stop
 * descriptor ends it. Then a megabyte in chunks arrives whole and in order. */
Test(relay, slow_reader_backpressure_and_stop)
{
	int x[2], y[2], stop[2];
	cr_assert_eq(pipe2(stop, O_CLOEXEC), 0);
	relay_case c;
	pthread_t t;
	relay_start(&c, x, y, stop[0], NULL, &t);
	int fl = fcntl(x[0], F_GETFL);
	cr_assert_eq(fcntl(x[0], F_SETFL, fl | O_NONBLOCK), 0);
	static char chunk[4096];
	memset(chunk, 'z', sizeof(chunk));
	size_t sent = 0;
	bool full = false;
	for (int i = 0; i < 4096 && !full; i++) {
		ssize_t k = write(x[0], chunk, sizeof(chunk));
		if (k < 0) {
			cr_assert_eq(errno, EAGAIN);
			usleep(20 * 1000); /* the relay's chance to take more, if it would */
			/* The same size again: a smaller write can fit where this
			 * one did not (a socket charges each write's overhead), and
			 * a loop of those would take 20 ms a byte. */
			k = write(x[0], chunk, sizeof(chunk));
			if (k < 0) {
				cr_assert_eq(errno, EAGAIN);
				full = true;
				continue;
			}
		}
		sent += (size_t)k;
	}
	cr_expect(full, "the writer was held back");
	cr_expect_lt(sent, (size_t)8 << 20, "%zu bytes taken", sent);
	cr_assert_eq(write(stop[1], "x", 1), 1);
	pthread_join(t, NULL);
	cr_expect_eq(c.r, 1, "the stop descriptor ended it");
	for (int i = 0; i < 2; i++) {
		close(x[i]);
		close(y[i]);
		close(stop[i]);
	}

	/* In order and whole. */
	relay_start(&c, x, y, -1, NULL, &t);
	size_t total = 1 << 20;
	unsigned char *out = malloc(total), *in = malloc(total);
	cr_assert(out && in);
	for (size_t i = 0; i < total; i++)
		out[i] = (unsigned char)(i * 7 + i / 4096);
	relay_writer w = { .fd = x[0], .data = out, .len = total };
	pthread_t wt;
	cr_assert_eq(pthread_create(&wt, NULL, relay_write_all, &w), 0);
	read_exactly(y[0], (char *)in, total);
	pthread_join(wt, NULL);
	cr_expect_eq(w.off, total);
	cr_expect_eq(memcmp(in, out, total), 0);
	free(in);
	free(out);
	/* The test's own ends only: the relay's are its until it returns (a
	 * descriptor closed under another thread's poll wakes nothing). */
	close(x[0]);
	close(y[0]);
	pthread_join(t, NULL);
	close(x[1]);
	close(y[1]);
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
