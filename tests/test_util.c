/* SPDX-License-Identifier: Apache-2.0 */
/* util/ and the snapshot diff, which every mechanism's files_changed uses. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "airlock/error.h"
#include "core/snapshot.h"
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

/* ---- snapshot diff ------------------------------------------------------- */

static int fake_hash(void *ctx, const char *path, char hex[65], int64_t *ret_size,
                     airlock_error *err)
{
	int *calls = ctx;
	(*calls)++;
	if (strcmp(path, "vanished") == 0)
		return -ENOENT;
	*ret_size = (int64_t)strlen(path);
	return util_sha256_hex(path, strlen(path), hex);
}

static void add(airlock_snapshot *s, const char *p, int64_t size, uint64_t ino, int64_t mtime,
                int64_t ctime)
{
	cr_assert_eq(airlock_snapshot_add(s, p, size, ino, mtime, ctime, 0), 0);
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
	airlock_snapshot_sort(&a);
	airlock_snapshot_sort(&b);
	int calls = 0;
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_snapshot_diff(&a, &b, 1000, UINT64_MAX, fake_hash, &calls, &r, &err), 0);
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
	airlock_snapshot_clear(&a);
	airlock_snapshot_clear(&b);
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
	airlock_snapshot_sort(&b);
	int calls = 0;
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_snapshot_diff(&a, &b, 4, UINT64_MAX, fake_hash, &calls, &r, &err), 0);
	cr_assert_eq(r.n_files_changed, 4);
	cr_assert(r.files_changed_truncated);
	airlock_execution_result_clear(&r);
	cr_assert_eq(airlock_snapshot_diff(&a, &b, 100, UINT64_MAX, fake_hash, &calls, &r, &err), 0);
	cr_assert_eq(r.n_files_changed, 10, "a file gone before hashing is not reported");
	cr_assert_not(r.files_changed_truncated);
	airlock_execution_result_clear(&r);
	cr_assert_eq(airlock_snapshot_diff(&a, &a, 0, UINT64_MAX, fake_hash, &calls, &r, &err), 0);
	cr_assert_eq(r.n_files_changed, 0);
	cr_assert_not(r.files_changed_truncated);
	airlock_execution_result_clear(&r);
	airlock_snapshot_clear(&b);
}

Test(snapshot, hash_budget_bounds_the_bytes_hashed)
{
	airlock_snapshot a = { 0 }, b = { 0 };
	add(&b, "a-small", 10, 1, 0, 0);
	add(&b, "b-sparse-terabyte", 1ll << 40, 2, 0, 0);
	add(&b, "c-small", 10, 3, 0, 0);
	airlock_snapshot_sort(&b);
	int calls = 0;
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_snapshot_diff(&a, &b, 100, 1 << 20, fake_hash, &calls, &r, &err), 0);
	cr_assert_eq(r.n_files_changed, 1, "the listing stops before the file past the budget");
	cr_assert_str_eq(r.files_changed[0].path, "a-small");
	cr_assert(r.files_changed_truncated);
	cr_assert_eq(calls, 1, "the terabyte was never hashed");
	airlock_execution_result_clear(&r);
	airlock_snapshot_clear(&b);
}
