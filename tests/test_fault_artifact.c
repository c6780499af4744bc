/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The filesystem artifact store's steps failed one at a time (built only
 * with -Dfault_injection=true; src/util/fault.h): a put under a fresh
 * tenant (so the directory steps run too) is repeated with the Nth fault
 * point failed, N = 1, 2, ... until a run sees fewer than N points (no
 * fault fired: it must succeed). Every failed run must return an error
 * and leave nothing: no object, no temporary (counted in the directory
 * tree, not through the port), the artifact missing to open, and a put of
 * the same id afterwards must succeed. Every step the adapter names (mkdir
 * and its directory fsync, create, write, fsync, rename, the directory's
 * fsync) must have been failed at least once.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/ids.h"
#include "airlock/port/artifact.h"
#include "util/fault.h"
#include "util/util.h"

#define FAULT_N_MAX 100

static char g_base[PATH_MAX];
static char g_root[PATH_MAX + 16];

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p) < 0 ? -1 : 0;
}

static size_t g_files;
static int count_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)p;
	(void)sb;
	(void)f;
	if (flag == FTW_F)
		g_files++;
	return 0;
}

static size_t files_in_store(void)
{
	g_files = 0;
	cr_assert_eq(nftw(g_root, count_cb, 32, FTW_PHYS), 0);
	return g_files;
}

static void setup(void)
{
	snprintf(g_base, sizeof(g_base), "/tmp/airlock-fault-artifact-XXXXXX");
	cr_assert(mkdtemp(g_base));
	snprintf(g_root, sizeof(g_root), "%s/store", g_base);
	cr_assert_eq(mkdir(g_root, 0700), 0);
}

static void teardown(void)
{
	util_fault_arm(0);
	nftw(g_base, rm_cb, 32, FTW_DEPTH | FTW_PHYS);
}

typedef struct stream {
	int64_t left;
} stream;

static ssize_t stream_read(void *arg, void *buf, size_t len, airlock_error *err)
{
	(void)err;
	stream *s = arg;
	size_t n = (int64_t)len < s->left ? len : (size_t)s->left;
	memset(buf, 'a', n);
	s->left -= (int64_t)n;
	return (ssize_t)n;
}

/* More than one buffer: two writes. */
#define SIZE ((int64_t)AIRLOCK_ARTIFACT_STREAM_BUF_BYTES + 1000)

static int put(airlock_artifact_store *s, const char *tenant, const char *id, const char *sha,
               airlock_error *e)
{
	airlock_artifact_metadata m = { .tenant_id = (char *)tenant, .media_type = (char *)"a/b" };
	memcpy(m.sha256, sha, 65);
	stream st = { .left = SIZE };
	airlock_artifact_ref ref = { 0 };
	memset(e, 0, sizeof(*e));
	int r = airlock_artifact_store_put(s, id, &m, SIZE, stream_read, &st, &ref, e);
	airlock_artifact_ref_clear(&ref);
	return r;
}

Test(fault_artifact, every_step_fails_cleanly, .init = setup, .fini = teardown)
{
	airlock_artifact_store *s = NULL;
	airlock_error e = { 0 };
	cr_assert_eq(airlock_artifact_store_fs_open(g_root, &s, &e), 0, "%s", e.message);
	unsigned char *buf = malloc((size_t)SIZE);
	memset(buf, 'a', (size_t)SIZE);
	char sha[65];
	cr_assert_eq(util_sha256_hex(buf, (size_t)SIZE, sha), 0);
	free(buf);

	const char *points[] = { "artifact.mkdir", "artifact.mkdir_sync", "artifact.create",
		                 "artifact.write", "artifact.fsync", "artifact.rename",
		                 "artifact.dirsync" };
	bool fired[sizeof(points) / sizeof(*points)] = { 0 };
	bool done = false;
	for (unsigned n = 1; n <= FAULT_N_MAX && !done; n++) {
		char tenant[32], id[37];
		snprintf(tenant, sizeof(tenant), "tenant-%u", n);
		cr_assert_eq(airlock_uuidv7_new(id, &e), 0);
		util_fault_arm(n);
		int r = put(s, tenant, id, sha, &e);
		unsigned hits = util_fault_hits();
		const char *point = util_fault_fired();
		util_fault_arm(0);
		if (hits < n) {
			/* No fault fired: the put must have succeeded. */
			cr_assert_null(point);
			cr_assert_eq(r, 0, "run %u: %s", n, e.message);
			cr_assert_eq(files_in_store(), 1);
			cr_assert_eq(airlock_artifact_store_remove(s, tenant, id, &e), 0);
			done = true;
			continue;
		}
		cr_assert_not_null(point, "run %u: %u checks but none fired", n, hits);
		for (size_t i = 0; i < sizeof(points) / sizeof(*points); i++)
			if (strcmp(point, points[i]) == 0)
				fired[i] = true;
		cr_assert(r < 0, "run %u: %s failed but the put succeeded", n, point);
		cr_assert_eq(e.errnum, EIO, "run %u (%s): %s", n, point, e.message);
		cr_assert_eq(files_in_store(), 0, "run %u: %s left a file behind", n, point);
		airlock_artifact_reader *rd = NULL;
		cr_assert_eq(airlock_artifact_store_open(s, tenant, id, 0, &rd, NULL, &e), -ENOENT,
		             "run %u (%s): the artifact is there after a failed put", n, point);
		/* The same id again, with nothing failed: it goes in. */
		cr_assert_eq(put(s, tenant, id, sha, &e), 0, "run %u (%s): retry: %s", n, point,
		             e.message);
		cr_assert_eq(airlock_artifact_store_remove(s, tenant, id, &e), 0);
		cr_assert_eq(files_in_store(), 0);
	}
	cr_assert(done, "more than %d fault points in one put", FAULT_N_MAX);
	for (size_t i = 0; i < sizeof(points) / sizeof(*points); i++)
		cr_assert(fired[i], "the step %s was never failed", points[i]);
	airlock_artifact_store_free(s);
}

/* A put past two writeback windows (fs.c: 8 MiB each): a failure to start
 * or to wait for a window's writeback fails the put, leaving nothing.
 * Waiting on a range reports a writeback error once and consumes it (the
 * descriptor's errseq), so an ignored one would let the seal's fsync
 * answer 0 over pages that never reached the disk. */
Test(fault_artifact, a_failed_writeback_fails_the_put, .init = setup, .fini = teardown)
{
	const int64_t size = ((int64_t)17 << 20) + 1000;
	airlock_artifact_store *s = NULL;
	airlock_error e = { 0 };
	cr_assert_eq(airlock_artifact_store_fs_open(g_root, &s, &e), 0, "%s", e.message);
	unsigned char *buf = malloc((size_t)size);
	cr_assert_not_null(buf);
	memset(buf, 'a', (size_t)size);
	char sha[65];
	cr_assert_eq(util_sha256_hex(buf, (size_t)size, sha), 0);
	free(buf);
	const char *points[] = { "artifact.writeback", "artifact.writeback_wait" };
	bool fired[2] = { 0 };
	for (unsigned n = 1; n <= 4000 && !(fired[0] && fired[1]); n++) {
		char id[37];
		cr_assert_eq(airlock_uuidv7_new(id, &e), 0);
		airlock_artifact_metadata m = { .tenant_id = (char *)"tenant", .media_type = (char *)"a/b" };
		memcpy(m.sha256, sha, 65);
		stream st = { .left = size };
		airlock_artifact_ref ref = { 0 };
		util_fault_arm(n);
		int r = airlock_artifact_store_put(s, id, &m, size, stream_read, &st, &ref, &e);
		const char *point = util_fault_fired();
		util_fault_arm(0);
		airlock_artifact_ref_clear(&ref);
		cr_assert_not_null(point, "run %u: the put ended before a writeback: %s", n,
		                   r < 0 ? e.message : "it succeeded");
		for (size_t i = 0; i < 2; i++) {
			if (strcmp(point, points[i]) != 0)
				continue;
			fired[i] = true;
			cr_assert(r < 0, "run %u: %s failed but the put succeeded", n, point);
			cr_assert_eq(e.errnum, EIO, "run %u (%s): %s", n, point, e.message);
			cr_assert(strstr(e.message, "writeback"), "%s", e.message);
		}
		cr_assert_eq(files_in_store(), 0, "run %u: %s left a file behind", n, point);
	}
	cr_assert(fired[0] && fired[1], "a writeback step was never failed");
	airlock_artifact_store_free(s);
}

/* The store's identity record made with each step failed in turn (create,
 * fsync, rename, the root's fsync): the call fails, no temporary is left,
 * the record is absent or whole, and the next call answers one identity
 * that stays. */
Test(fault_artifact, a_failed_identity_leaves_no_record_or_a_whole_one, .init = setup,
     .fini = teardown)
{
	const char *points[] = { "artifact.record_create", "artifact.record_fsync",
		                 "artifact.record_rename", "artifact.record_sync" };
	bool fired[sizeof(points) / sizeof(*points)] = { 0 };
	bool done = false;
	for (unsigned n = 1; n <= 20 && !done; n++) {
		nftw(g_root, rm_cb, 32, FTW_DEPTH | FTW_PHYS);
		cr_assert_eq(mkdir(g_root, 0700), 0);
		airlock_artifact_store *s = NULL;
		airlock_error e = { 0 };
		cr_assert_eq(airlock_artifact_store_fs_open(g_root, &s, &e), 0, "%s", e.message);
		char id[AIRLOCK_UUID_STR_LEN + 1], again[AIRLOCK_UUID_STR_LEN + 1];
		util_fault_arm(n);
		int r = airlock_artifact_store_identity(s, id, &e);
		unsigned hits = util_fault_hits();
		const char *point = util_fault_fired();
		util_fault_arm(0);
		if (hits < n) {
			cr_assert_eq(r, 0, "run %u: %s", n, e.message);
			done = true;
		} else {
			cr_assert_not_null(point);
			for (size_t i = 0; i < sizeof(points) / sizeof(*points); i++)
				if (strcmp(point, points[i]) == 0)
					fired[i] = true;
			cr_assert(r < 0, "run %u: %s failed but the identity was answered", n, point);
			cr_assert_leq(files_in_store(), 1, "run %u (%s): a temporary was left", n,
			              point);
			r = airlock_artifact_store_identity(s, id, &e);
			cr_assert_eq(r, 0, "run %u (%s): the next call: %s", n, point, e.message);
		}
		cr_assert_eq(files_in_store(), 1, "run %u: the record alone", n);
		cr_assert_eq(airlock_artifact_store_identity(s, again, &e), 0, "%s", e.message);
		cr_assert_str_eq(id, again, "run %u: the identity stays", n);
		airlock_artifact_store_free(s);
	}
	cr_assert(done, "more fault points than expected in making the identity");
	for (size_t i = 0; i < sizeof(points) / sizeof(*points); i++)
		cr_assert(fired[i], "the step %s was never failed", points[i]);
}
