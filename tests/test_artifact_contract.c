/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ArtifactStore contract suite (include/airlock/port/artifact.h; the
 * specification, "ArtifactStore"). Every CONTRACT() test is written once and
 * instantiated per adapter, as contract_fs::<name> and
 * contract_memory::<name>. A fixture gives each adapter what the port cannot
 * do for itself: plant a temporary object as a crash would leave one, count
 * the temporaries and objects it holds (for "leaves nothing": the fs
 * adapter's are counted in its directory tree, not through the port), and
 * say whether an object sits under exactly a key.
 *
 * The filesystem adapter's own cases follow: the root's refusals (mode,
 * owner, symlink, a source tree), the modes it makes, a symlink planted in
 * the store, descriptors.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/ids.h"
#include "airlock/port/artifact.h"
#include "artifact/memory.h"
#include "util/util.h"

#define INTEGRITY airlock_errcode(AIRLOCK_ERR_ARTIFACT_INTEGRITY)
#define TOOLVAL airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION)
#define DECODE airlock_errcode(AIRLOCK_ERR_DECODE)
#define REJECTED airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED)
#define CONFIG airlock_errcode(AIRLOCK_ERR_CONFIG)
#define MEM_MAX ((size_t)64 << 20)

/* ---- fixtures ------------------------------------------------------------ */

typedef struct afx {
	const char *adapter;
	airlock_artifact_store *s;
	char base[PATH_MAX]; /* fs: a private directory holding the root */
	char root[PATH_MAX + 16];
	int root_fd;
	artifact_memstore *mem;
} afx;

static afx g;

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p) < 0 ? -1 : 0;
}

static void rm_tree(const char *p)
{
	if (p[0])
		nftw(p, rm_cb, 32, FTW_DEPTH | FTW_PHYS);
}

static void fs_init(void)
{
	memset(&g, 0, sizeof(g));
	g.adapter = "fs";
	g.root_fd = -1;
	snprintf(g.base, sizeof(g.base), "/tmp/airlock-artifact-XXXXXX");
	cr_assert(mkdtemp(g.base));
	snprintf(g.root, sizeof(g.root), "%s/store", g.base);
	cr_assert_eq(mkdir(g.root, 0700), 0);
	airlock_error e = { 0 };
	cr_assert_eq(airlock_artifact_store_fs_open(g.root, &g.s, &e), 0, "%s", e.message);
	g.root_fd = open(g.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert(g.root_fd >= 0);
}

static void memory_init(void)
{
	memset(&g, 0, sizeof(g));
	g.adapter = "memory";
	g.root_fd = -1;
	airlock_error e = { 0 };
	cr_assert_eq(artifact_memory_open(MEM_MAX, &g.s, &g.mem, &e), 0, "%s", e.message);
}

static void fx_fini(void)
{
	airlock_artifact_store_free(g.s);
	g.s = NULL;
	if (g.root_fd >= 0)
		close(g.root_fd);
	g.root_fd = -1;
	if (g.base[0]) {
		/* Modes some tests change back, so the tree can be removed. */
		chmod(g.root, 0700);
		rm_tree(g.base);
	}
}

static size_t g_temps, g_objects;
static int count_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	if (flag != FTW_F)
		return 0;
	const char *base = p + f->base;
	if (strncmp(base, ".tmp-", 5) == 0)
		g_temps++;
	else if (S_ISREG(sb->st_mode))
		g_objects++;
	return 0;
}

/* What the adapter holds, counted beside the port. */
static void fx_counts(afx *f, size_t *temps, size_t *objects)
{
	if (f->mem) {
		artifact_memory_count(f->mem, temps, objects, NULL);
		return;
	}
	g_temps = g_objects = 0;
	cr_assert_eq(nftw(f->root, count_cb, 32, FTW_PHYS), 0);
	*temps = g_temps;
	*objects = g_objects;
}

static void assert_nothing_left(afx *f, size_t objects_expected)
{
	size_t t = 99, o = 99;
	fx_counts(f, &t, &o);
	cr_assert_eq(t, 0, "%s: %zu temporary objects left", f->adapter, t);
	cr_assert_eq(o, objects_expected, "%s: %zu objects, expected %zu", f->adapter, o,
	             objects_expected);
}

static bool fx_has_key(afx *f, const char *key)
{
	if (f->mem)
		return artifact_memory_has(f->mem, key);
	struct stat sb;
	return fstatat(f->root_fd, key, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode);
}

/* A temporary object as a crashed put leaves it, age_ms old. */
static void fx_plant_temp(afx *f, const char *tenant, const char *id, int64_t age_ms)
{
	char key[AIRLOCK_ARTIFACT_KEY_MAX];
	cr_assert_eq(airlock_artifact_storage_key(tenant, id, key, NULL), 0);
	int64_t mtime = util_now_ms() - age_ms;
	if (f->mem) {
		cr_assert_eq(artifact_memory_plant_temp(f->mem, key, mtime), 0);
		return;
	}
	char dir[PATH_MAX * 2], path[PATH_MAX * 3];
	snprintf(dir, sizeof(dir), "%s/%s", f->root, tenant);
	mkdir(dir, 0700);
	snprintf(dir, sizeof(dir), "%s/%s/%.2s", f->root, tenant, id);
	mkdir(dir, 0700);
	snprintf(path, sizeof(path), "%s/.tmp-%s-%016llx", dir, id, (long long)age_ms);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert(fd >= 0, "%s", path);
	cr_assert_eq(write(fd, "partial", 7), 7);
	struct timespec ts[2] = { { .tv_sec = mtime / 1000, .tv_nsec = (mtime % 1000) * 1000000 },
		                  { .tv_sec = mtime / 1000, .tv_nsec = (mtime % 1000) * 1000000 } };
	cr_assert_eq(futimens(fd, ts), 0);
	close(fd);
}

/* ---- a deterministic stream ------------------------------------------------ */

typedef struct gen {
	uint64_t state;
	int64_t left;
	size_t chunk; /* at most this per call: odd sizes cross the buffer */
	int fail_at;  /* fail (-EIO) on this call (1-based); 0: never */
	int calls;
} gen;

static void gen_fill(uint64_t *st, unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		*st ^= *st << 13;
		*st ^= *st >> 7;
		*st ^= *st << 17;
		b[i] = (unsigned char)(*st >> 24);
	}
}

static ssize_t gen_read(void *arg, void *buf, size_t len, airlock_error *err)
{
	gen *g2 = arg;
	if (++g2->calls == g2->fail_at)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO, "test stream");
	size_t n = len < g2->chunk ? len : g2->chunk;
	if ((int64_t)n > g2->left)
		n = (size_t)g2->left;
	gen_fill(&g2->state, buf, n);
	g2->left -= (int64_t)n;
	return (ssize_t)n;
}

static void gen_sha(uint64_t seed, int64_t size, char out[65])
{
	util_sha256 *h = util_sha256_new();
	cr_assert(h);
	unsigned char b[65536];
	uint64_t st = seed;
	for (int64_t left = size; left > 0;) {
		size_t n = left < (int64_t)sizeof(b) ? (size_t)left : sizeof(b);
		gen_fill(&st, b, n);
		cr_assert_eq(util_sha256_update(h, b, n), 0);
		left -= (int64_t)n;
	}
	cr_assert_eq(util_sha256_final_hex(h, out), 0);
}

static void new_id(char id[AIRLOCK_UUID_STR_LEN + 1])
{
	airlock_error e = { 0 };
	cr_assert_eq(airlock_uuidv7_new(id, &e), 0, "%s", e.message);
}

static void meta_init(airlock_artifact_metadata *m, const char *tenant, const char *sha)
{
	memset(m, 0, sizeof(*m));
	m->tenant_id = (char *)tenant;
	m->run_id = (char *)"run-1";
	m->origin = AIRLOCK_ORIGIN_SANDBOX_EXPORT;
	m->filename = (char *)"out.bin";
	m->media_type = (char *)"application/octet-stream";
	m->trust = AIRLOCK_TRUST_EXTERNAL_UNTRUSTED;
	memcpy(m->sha256, sha, AIRLOCK_SHA256_HEX_LEN + 1);
}

/* Put size bytes of the seed's stream under (tenant, id); the result. */
static int put_stream(afx *f, const char *tenant, const char *id, uint64_t seed, int64_t size,
                      const char *claimed_sha, int64_t cap, airlock_artifact_ref *ref,
                      airlock_error *e)
{
	char sha[65];
	gen_sha(seed, size, sha);
	airlock_artifact_metadata m;
	meta_init(&m, tenant, claimed_sha ? claimed_sha : sha);
	gen g2 = { .state = seed, .left = size, .chunk = 100003 };
	memset(e, 0, sizeof(*e));
	return airlock_artifact_store_put(f->s, id, &m, cap, gen_read, &g2, ref, e);
}

/* The object's bytes from offset, hashed; its size in *ret_size. */
static void read_sha(afx *f, const char *tenant, const char *id, int64_t offset, char out[65],
                     int64_t *ret_size, int64_t *ret_read)
{
	airlock_artifact_reader *r = NULL;
	airlock_error e = { 0 };
	cr_assert_eq(airlock_artifact_store_open(f->s, tenant, id, offset, &r, ret_size, &e), 0, "%s",
	             e.message);
	util_sha256 *h = util_sha256_new();
	unsigned char b[70001];
	int64_t total = 0;
	for (;;) {
		ssize_t n = airlock_artifact_reader_read(r, b, sizeof(b), &e);
		cr_assert(n >= 0, "%s", e.message);
		if (n == 0)
			break;
		cr_assert_eq(util_sha256_update(h, b, (size_t)n), 0);
		total += n;
	}
	airlock_artifact_reader_free(r);
	cr_assert_eq(util_sha256_final_hex(h, out), 0);
	if (ret_read)
		*ret_read = total;
}

static void assert_missing(afx *f, const char *tenant, const char *id)
{
	airlock_artifact_reader *r = NULL;
	airlock_error e = { 0 };
	int64_t size = -1;
	int rc = airlock_artifact_store_open(f->s, tenant, id, 0, &r, &size, &e);
	cr_assert_eq(rc, -ENOENT, "%s: open of a missing artifact gave %d (%s)", f->adapter, rc,
	             e.message);
	cr_assert_eq(e.cls, AIRLOCK_ERR_SYSTEM);
	cr_assert_eq(e.errnum, ENOENT);
	cr_assert_null(r);
}

#define CONTRACT(name)                                                                             \
	static void name##_body(afx *f);                                                           \
	Test(contract_fs, name, .init = fs_init, .fini = fx_fini) { name##_body(&g); }             \
	Test(contract_memory, name, .init = memory_init, .fini = fx_fini) { name##_body(&g); }     \
	static void name##_body(afx *f)

/* ---- the key ----------------------------------------------------------------- */

Test(key, is_tenant_shard_id)
{
	char key[AIRLOCK_ARTIFACT_KEY_MAX];
	airlock_error e = { 0 };
	const char *id = "0190a5f2-3b4c-7d5e-8f60-718293a4b5c6";
	cr_assert_eq(airlock_artifact_storage_key("tenant-A_1", id, key, &e), 0, "%s", e.message);
	cr_assert_str_eq(key, "tenant-A_1/01/0190a5f2-3b4c-7d5e-8f60-718293a4b5c6");
	/* The longest tenant fits the declared bound exactly. */
	char t[AIRLOCK_ID_MAX + 1];
	memset(t, 'x', AIRLOCK_ID_MAX);
	t[AIRLOCK_ID_MAX] = 0;
	cr_assert_eq(airlock_artifact_storage_key(t, id, key, &e), 0, "%s", e.message);
	cr_assert_eq(strlen(key) + 1, (size_t)AIRLOCK_ARTIFACT_KEY_MAX);
}

Test(key, refuses_what_is_not_a_platform_id)
{
	const char *id = "0190a5f2-3b4c-7d5e-8f60-718293a4b5c6";
	const char *bad_tenants[] = { "", "..", ".", "a/b", "../../etc", "t\nx", "t x", "tenant.1" };
	const char *bad_ids[] = {
		"0190A5F2-3B4C-7D5E-8F60-718293A4B5C6", /* uppercase */
		"0190a5f2-3b4c-4d5e-8f60-718293a4b5c6", /* version 4 */
		"0190a5f2-3b4c-7d5e-cf60-718293a4b5c6", /* variant */
		"0190a5f2-3b4c-7d5e-8f60-718293a4b5c",  /* short */
		"0190a5f2-3b4c-7d5e-8f60-718293a4b5c6x", "../../etc/passwd", "",
	};
	char key[AIRLOCK_ARTIFACT_KEY_MAX] = "untouched";
	airlock_error e = { 0 };
	for (size_t i = 0; i < sizeof(bad_tenants) / sizeof(*bad_tenants); i++) {
		cr_assert_eq(airlock_artifact_storage_key(bad_tenants[i], id, key, &e), DECODE,
		             "tenant %s", bad_tenants[i]);
		cr_assert(strstr(e.message, "tenant_id"), "%s", e.message);
	}
	char t[AIRLOCK_ID_MAX + 2];
	memset(t, 'x', AIRLOCK_ID_MAX + 1);
	t[AIRLOCK_ID_MAX + 1] = 0;
	cr_assert_eq(airlock_artifact_storage_key(t, id, key, &e), DECODE);
	cr_assert_eq(airlock_artifact_storage_key(NULL, id, key, &e), DECODE);
	for (size_t i = 0; i < sizeof(bad_ids) / sizeof(*bad_ids); i++) {
		cr_assert_eq(airlock_artifact_storage_key("t", bad_ids[i], key, &e), DECODE, "id %s",
		             bad_ids[i]);
		cr_assert(strstr(e.message, "UUIDv7"), "%s", e.message);
	}
	cr_assert_eq(airlock_artifact_storage_key("t", NULL, key, &e), DECODE);
	cr_assert_str_eq(key, "untouched");
}

/* ---- the contract -------------------------------------------------------------- */

/* Larger than every buffer on the way (the store's, the stream's, the
 * reader's), in chunks that do not divide any of them. */
CONTRACT(streams_an_object_larger_than_any_buffer)
{
	char id[37], sha[65], back[65];
	new_id(id);
	int64_t size = (int64_t)AIRLOCK_ARTIFACT_STREAM_BUF_BYTES * 9 + 12345;
	gen_sha(7, size, sha);
	airlock_artifact_ref ref = { 0 };
	airlock_error e;
	cr_assert_eq(put_stream(f, "tenant-a", id, 7, size, NULL, AIRLOCK_ARTIFACT_SIZE_CAP_DEFAULT,
	                        &ref, &e),
	             0, "%s", e.message);
	cr_assert_str_eq(ref.artifact_id, id);
	cr_assert_str_eq(ref.sha256, sha);
	cr_assert_eq(ref.size_bytes, size);
	cr_assert_str_eq(ref.media_type, "application/octet-stream");
	airlock_artifact_ref_clear(&ref);
	int64_t whole = 0, got = 0;
	read_sha(f, "tenant-a", id, 0, back, &whole, &got);
	cr_assert_eq(whole, size);
	cr_assert_eq(got, size);
	cr_assert_str_eq(back, sha);
	assert_nothing_left(f, 1);
}

CONTRACT(an_empty_object_is_an_object)
{
	char id[37], back[65];
	new_id(id);
	airlock_artifact_ref ref = { 0 };
	airlock_error e;
	cr_assert_eq(put_stream(f, "t", id, 1, 0, NULL, 1, &ref, &e), 0, "%s", e.message);
	cr_assert_str_eq(ref.sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	airlock_artifact_ref_clear(&ref);
	int64_t whole = -1;
	read_sha(f, "t", id, 0, back, &whole, NULL);
	cr_assert_eq(whole, 0);
}

CONTRACT(a_digest_mismatch_leaves_nothing)
{
	char id[37], wrong[65];
	new_id(id);
	gen_sha(99, 1000, wrong); /* the digest of other bytes */
	airlock_artifact_ref ref = { 0 };
	airlock_error e;
	int64_t size = (int64_t)AIRLOCK_ARTIFACT_STREAM_BUF_BYTES * 2 + 7;
	int r = put_stream(f, "t", id, 5, size, wrong, AIRLOCK_ARTIFACT_SIZE_CAP_DEFAULT, &ref, &e);
	cr_assert_eq(r, INTEGRITY, "%d %s", r, e.message);
	cr_assert_eq(e.cls, AIRLOCK_ERR_ARTIFACT_INTEGRITY);
	char sha[65];
	gen_sha(5, size, sha);
	/* The message names both digests. */
	cr_assert(strstr(e.message, sha), "%s", e.message);
	cr_assert(strstr(e.message, wrong), "%s", e.message);
	cr_assert_null(ref.media_type);
	assert_missing(f, "t", id);
	assert_nothing_left(f, 0);

	/* The staged API: the same at seal, the put dead after it. */
	airlock_artifact_put *p = NULL;
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t", id, 100, &p, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_put_write(p, "abc", 3, &e), 0, "%s", e.message);
	char got[65] = "";
	int64_t n = -1;
	cr_assert_eq(airlock_artifact_put_seal(p, wrong, got, &n, &e), INTEGRITY);
	cr_assert_str_eq(got, "");
	cr_assert_eq(n, -1);
	assert_nothing_left(f, 0);
	cr_assert_eq(airlock_artifact_put_commit(p, &e), REJECTED);
	airlock_artifact_put_free(p);
	assert_missing(f, "t", id);
	assert_nothing_left(f, 0);
}

CONTRACT(a_stream_past_the_cap_is_abandoned_mid_write)
{
	char id[37];
	new_id(id);
	airlock_error e = { 0 };
	airlock_artifact_put *p = NULL;
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t", id, 1000, &p, &e), 0, "%s", e.message);
	char buf[600];
	memset(buf, 'x', sizeof(buf));
	cr_assert_eq(airlock_artifact_put_write(p, buf, 600, &e), 0, "%s", e.message);
	/* Something is in flight: a temporary exists. */
	size_t t = 0, o = 0;
	fx_counts(f, &t, &o);
	cr_assert_eq(t, 1);
	cr_assert_eq(airlock_artifact_put_write(p, buf, 401, &e), TOOLVAL);
	cr_assert(strstr(e.message, "size cap of 1000 bytes"), "%s", e.message);
	/* Abandoned at once, before free: nothing left. */
	assert_nothing_left(f, 0);
	cr_assert_eq(airlock_artifact_put_write(p, buf, 1, &e), REJECTED);
	cr_assert_eq(airlock_artifact_put_seal(p, NULL, NULL, NULL, &e), REJECTED);
	cr_assert_eq(airlock_artifact_put_commit(p, &e), REJECTED);
	airlock_artifact_put_free(p);
	assert_missing(f, "t", id);

	/* Exactly the cap is accepted. */
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t", id, 1000, &p, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_put_write(p, buf, 600, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_put_write(p, buf, 400, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_put_seal(p, NULL, NULL, NULL, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_put_commit(p, &e), 0, "%s", e.message);
	airlock_artifact_put_free(p);
	cr_assert_eq(airlock_artifact_store_remove(f->s, "t", id, &e), 0);

	/* The one-call put past its cap, across several buffers. */
	airlock_artifact_ref ref = { 0 };
	int64_t cap = (int64_t)AIRLOCK_ARTIFACT_STREAM_BUF_BYTES * 2 + 5;
	cr_assert_eq(put_stream(f, "t", id, 3, cap + 1, NULL, cap, &ref, &e), TOOLVAL);
	assert_missing(f, "t", id);
	assert_nothing_left(f, 0);
	cr_assert_eq(put_stream(f, "t", id, 3, cap, NULL, cap, &ref, &e), 0, "%s", e.message);
	airlock_artifact_ref_clear(&ref);
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t", id, 0, &p, &e), REJECTED);
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t", id, -1, &p, &e), REJECTED);
}

CONTRACT(a_commit_never_overwrites)
{
	char id[37], first[65], back[65];
	new_id(id);
	airlock_artifact_ref ref = { 0 };
	airlock_error e;
	cr_assert_eq(put_stream(f, "t", id, 11, 5000, NULL, 10000, &ref, &e), 0, "%s", e.message);
	memcpy(first, ref.sha256, 65);
	airlock_artifact_ref_clear(&ref);
	int r = put_stream(f, "t", id, 12, 6000, NULL, 10000, &ref, &e);
	cr_assert_eq(r, -EEXIST, "%d %s", r, e.message);
	cr_assert(strstr(e.message, "never overwritten"), "%s", e.message);
	int64_t size = 0;
	read_sha(f, "t", id, 0, back, &size, NULL);
	cr_assert_str_eq(back, first);
	cr_assert_eq(size, 5000);
	assert_nothing_left(f, 1);

	/* Two puts of one id in flight: the first commit wins, the second
	 * fails, and neither leaves a temporary. */
	char id2[37];
	new_id(id2);
	airlock_artifact_put *a = NULL, *b = NULL;
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t", id2, 100, &a, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t", id2, 100, &b, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_put_write(a, "aaaa", 4, &e), 0);
	cr_assert_eq(airlock_artifact_put_write(b, "bb", 2, &e), 0);
	cr_assert_eq(airlock_artifact_put_seal(b, NULL, NULL, NULL, &e), 0);
	cr_assert_eq(airlock_artifact_put_seal(a, NULL, NULL, NULL, &e), 0);
	cr_assert_eq(airlock_artifact_put_commit(b, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_put_commit(a, &e), -EEXIST);
	airlock_artifact_put_free(a);
	airlock_artifact_put_free(b);
	read_sha(f, "t", id2, 0, back, &size, NULL);
	cr_assert_eq(size, 2);
	assert_nothing_left(f, 2);
}

CONTRACT(open_reads_from_an_offset)
{
	char id[37];
	new_id(id);
	unsigned char data[3000];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 7 + 3);
	airlock_error e = { 0 };
	airlock_artifact_put *p = NULL;
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t", id, 3000, &p, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_put_write(p, data, sizeof(data), &e), 0);
	char sha[65];
	int64_t n = 0;
	cr_assert_eq(airlock_artifact_put_seal(p, NULL, sha, &n, &e), 0);
	cr_assert_eq(n, 3000);
	char want[65];
	util_sha256_hex(data, sizeof(data), want);
	cr_assert_str_eq(sha, want);
	cr_assert_eq(airlock_artifact_put_commit(p, &e), 0, "%s", e.message);
	airlock_artifact_put_free(p);

	int64_t offsets[] = { 0, 1, 1499, 2999, 3000 };
	for (size_t i = 0; i < sizeof(offsets) / sizeof(*offsets); i++) {
		airlock_artifact_reader *r = NULL;
		int64_t size = -1;
		cr_assert_eq(airlock_artifact_store_open(f->s, "t", id, offsets[i], &r, &size, &e), 0,
		             "%s", e.message);
		cr_assert_eq(size, 3000, "the whole size whatever the offset");
		unsigned char got[3000];
		size_t have = 0;
		for (;;) {
			ssize_t k = airlock_artifact_reader_read(r, got + have, 1000, &e);
			cr_assert(k >= 0);
			if (k == 0)
				break;
			have += (size_t)k;
			cr_assert(have <= sizeof(got));
		}
		airlock_artifact_reader_free(r);
		cr_assert_eq(have, 3000 - (size_t)offsets[i], "offset %lld", (long long)offsets[i]);
		cr_assert_eq(memcmp(got, data + offsets[i], have), 0, "offset %lld",
		             (long long)offsets[i]);
	}
	airlock_artifact_reader *r = NULL;
	cr_assert_eq(airlock_artifact_store_open(f->s, "t", id, 3001, &r, NULL, &e), TOOLVAL);
	cr_assert(strstr(e.message, "past its end"), "%s", e.message);
	cr_assert_eq(airlock_artifact_store_open(f->s, "t", id, -1, &r, NULL, &e), TOOLVAL);
	cr_assert_null(r);
}

CONTRACT(a_missing_object_is_enoent)
{
	char id[37];
	new_id(id);
	assert_missing(f, "nobody", id);
	/* Another tenant's id is missing for this tenant: same answer. */
	airlock_artifact_ref ref = { 0 };
	airlock_error e;
	cr_assert_eq(put_stream(f, "owner", id, 2, 10, NULL, 100, &ref, &e), 0, "%s", e.message);
	airlock_artifact_ref_clear(&ref);
	assert_missing(f, "other", id);
}

CONTRACT(remove_is_idempotent)
{
	char id[37];
	new_id(id);
	airlock_error e = { 0 };
	cr_assert_eq(airlock_artifact_store_remove(f->s, "t", id, &e), 0, "never there: %s",
	             e.message);
	airlock_artifact_ref ref = { 0 };
	cr_assert_eq(put_stream(f, "t", id, 2, 10, NULL, 100, &ref, &e), 0, "%s", e.message);
	airlock_artifact_ref_clear(&ref);
	cr_assert_eq(airlock_artifact_store_remove(f->s, "t", id, &e), 0, "%s", e.message);
	assert_missing(f, "t", id);
	cr_assert_eq(airlock_artifact_store_remove(f->s, "t", id, &e), 0, "twice: %s", e.message);
	assert_nothing_left(f, 0);
	/* Removed, the id can be put again. */
	cr_assert_eq(put_stream(f, "t", id, 3, 10, NULL, 100, &ref, &e), 0, "%s", e.message);
	airlock_artifact_ref_clear(&ref);
	cr_assert_eq(airlock_artifact_store_remove(f->s, "../x", id, &e), DECODE);
}

typedef struct seen {
	int n;
	char tenant[4][64];
	char id[4][37];
	int64_t size[4];
	int stop_after; /* 0: never */
	airlock_artifact_store *remove_from;
} seen;

static int seen_cb(void *arg, const char *tenant, const char *id, int64_t size, int64_t mtime_ms)
{
	seen *s = arg;
	cr_assert(mtime_ms > util_now_ms() - 600000 && mtime_ms <= util_now_ms() + 1000);
	if (s->n < 4) {
		snprintf(s->tenant[s->n], sizeof(s->tenant[0]), "%s", tenant);
		snprintf(s->id[s->n], sizeof(s->id[0]), "%s", id);
		s->size[s->n] = size;
	}
	s->n++;
	if (s->remove_from) {
		airlock_error e = { 0 };
		cr_assert_eq(airlock_artifact_store_remove(s->remove_from, tenant, id, &e), 0, "%s",
		             e.message);
	}
	if (s->stop_after && s->n == s->stop_after)
		return -42;
	return 0;
}

static int seen_index(const seen *s, const char *tenant, const char *id)
{
	for (int i = 0; i < s->n && i < 4; i++)
		if (strcmp(s->tenant[i], tenant) == 0 && strcmp(s->id[i], id) == 0)
			return i;
	return -1;
}

CONTRACT(walk_finds_objects_and_removes_only_stale_temporaries)
{
	char a[37], b[37], c[37], stale[37], fresh[37];
	new_id(a);
	new_id(b);
	new_id(c);
	new_id(stale);
	new_id(fresh);
	airlock_artifact_ref ref = { 0 };
	airlock_error e;
	cr_assert_eq(put_stream(f, "t1", a, 1, 100, NULL, 1000, &ref, &e), 0, "%s", e.message);
	airlock_artifact_ref_clear(&ref);
	cr_assert_eq(put_stream(f, "t1", b, 2, 200, NULL, 1000, &ref, &e), 0, "%s", e.message);
	airlock_artifact_ref_clear(&ref);
	cr_assert_eq(put_stream(f, "t2", c, 3, 300, NULL, 1000, &ref, &e), 0, "%s", e.message);
	airlock_artifact_ref_clear(&ref);
	fx_plant_temp(f, "t1", stale, 2 * 3600 * 1000);
	fx_plant_temp(f, "t3", fresh, 1000);
	/* A put in flight, younger than the age: left alone. */
	airlock_artifact_put *p = NULL;
	char inflight[37];
	new_id(inflight);
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t2", inflight, 100, &p, &e), 0);
	cr_assert_eq(airlock_artifact_put_write(p, "x", 1, &e), 0);

	seen s = { 0 };
	size_t removed = 99;
	cr_assert_eq(airlock_artifact_store_walk(f->s, 3600 * 1000, seen_cb, &s, &removed, &e), 0,
	             "%s", e.message);
	cr_assert_eq(s.n, 3);
	cr_assert_eq(removed, 1);
	int i = seen_index(&s, "t1", a);
	cr_assert(i >= 0);
	cr_assert_eq(s.size[i], 100);
	i = seen_index(&s, "t1", b);
	cr_assert(i >= 0);
	cr_assert_eq(s.size[i], 200);
	i = seen_index(&s, "t2", c);
	cr_assert(i >= 0);
	cr_assert_eq(s.size[i], 300);
	size_t t = 0, o = 0;
	fx_counts(f, &t, &o);
	cr_assert_eq(t, 2, "the fresh temporary and the put in flight stay");
	cr_assert_eq(o, 3);

	/* The put in flight still commits. */
	cr_assert_eq(airlock_artifact_put_seal(p, NULL, NULL, NULL, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_put_commit(p, &e), 0, "%s", e.message);
	airlock_artifact_put_free(p);

	/* A callback < 0 stops the walk with its value. */
	seen s2 = { .stop_after = 2 };
	cr_assert_eq(airlock_artifact_store_walk(f->s, 3600 * 1000, seen_cb, &s2, NULL, &e), -42);
	cr_assert_eq(s2.n, 2);

	/* With age 0 every temporary is stale; the callback may remove what it
	 * is handed (the sweeper's orphan pass), and the walk goes on. */
	seen s3 = { .remove_from = f->s };
	cr_assert_eq(airlock_artifact_store_walk(f->s, 0, seen_cb, &s3, &removed, &e), 0, "%s",
	             e.message);
	cr_assert_eq(s3.n, 4);
	cr_assert_eq(removed, 1);
	assert_nothing_left(f, 0);
	cr_assert_eq(airlock_artifact_store_walk(f->s, -1, seen_cb, &s3, &removed, &e), REJECTED);
}

typedef struct worker_arg {
	afx *f;
	int k;
	int ok, exists;
	char shared_id[37];
} worker_arg;

static void *put_worker(void *v)
{
	worker_arg *w = v;
	char tenant[16];
	snprintf(tenant, sizeof(tenant), "t%d", w->k % 3);
	for (int i = 0; i < 6; i++) {
		char id[37];
		airlock_error e = { 0 };
		if (airlock_uuidv7_new(id, &e) < 0)
			return NULL;
		airlock_artifact_ref ref = { 0 };
		uint64_t seed = (uint64_t)(w->k * 100 + i + 1);
		if (put_stream(w->f, tenant, id, seed, 70000 + w->k * 1000 + i, NULL, 1 << 20, &ref, &e) == 0)
			w->ok++;
		airlock_artifact_ref_clear(&ref);
	}
	/* Every thread puts the one shared id too: exactly one commit wins. */
	airlock_artifact_ref ref = { 0 };
	airlock_error e = { 0 };
	int r = put_stream(w->f, "shared", w->shared_id, (uint64_t)w->k + 1000, 5000, NULL, 1 << 20,
	                   &ref, &e);
	if (r == 0)
		w->ok += 100;
	else if (r == -EEXIST)
		w->exists++;
	airlock_artifact_ref_clear(&ref);
	return NULL;
}

CONTRACT(concurrent_puts)
{
	enum { N = 8 };
	pthread_t th[N];
	worker_arg wa[N];
	char shared[37];
	new_id(shared);
	for (int k = 0; k < N; k++) {
		wa[k] = (worker_arg){ .f = f, .k = k };
		memcpy(wa[k].shared_id, shared, sizeof(shared));
		cr_assert_eq(pthread_create(&th[k], NULL, put_worker, &wa[k]), 0);
	}
	int ok = 0, winners = 0, exists = 0;
	for (int k = 0; k < N; k++) {
		pthread_join(th[k], NULL);
		ok += wa[k].ok % 100;
		winners += wa[k].ok / 100;
		exists += wa[k].exists;
	}
	cr_assert_eq(ok, N * 6);
	cr_assert_eq(winners, 1);
	cr_assert_eq(exists, N - 1);
	assert_nothing_left(f, N * 6 + 1);
	seen s = { 0 };
	airlock_error e = { 0 };
	cr_assert_eq(airlock_artifact_store_walk(f->s, 3600000, seen_cb, &s, NULL, &e), 0);
	cr_assert_eq(s.n, N * 6 + 1);
}

/* gate.sandbox.artifact_key_opaque's case: the store never sees a
 * filename, so a hostile one changes nothing about where bytes go. */
CONTRACT(a_filename_is_never_a_path)
{
	char id[37], sha[65];
	new_id(id);
	gen_sha(4, 64, sha);
	airlock_artifact_metadata m;
	meta_init(&m, "tenant-x", sha);
	m.filename = (char *)"../../etc/passwd";
	m.media_type = (char *)"text/plain";
	m.run_id = (char *)"../../../run";
	gen g2 = { .state = 4, .left = 64, .chunk = 64 };
	airlock_artifact_ref ref = { 0 };
	airlock_error e = { 0 };
	struct stat before, after;
	cr_assert_eq(stat("/etc/passwd", &before), 0);
	cr_assert_eq(airlock_artifact_store_put(f->s, id, &m, 1000, gen_read, &g2, &ref, &e), 0, "%s",
	             e.message);
	airlock_artifact_ref_clear(&ref);
	char key[AIRLOCK_ARTIFACT_KEY_MAX], want[AIRLOCK_ARTIFACT_KEY_MAX];
	cr_assert_eq(airlock_artifact_storage_key("tenant-x", id, key, &e), 0);
	snprintf(want, sizeof(want), "tenant-x/%.2s/%s", id, id);
	cr_assert_str_eq(key, want);
	cr_assert(fx_has_key(f, key), "the object is under its key and nowhere else");
	assert_nothing_left(f, 1);
	cr_assert_eq(stat("/etc/passwd", &after), 0);
	cr_assert_eq(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
	cr_assert_eq(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
	if (f->base[0]) {
		/* Nothing beside the root: its parent holds the root only. */
		DIR *d = opendir(f->base);
		cr_assert(d);
		int n = 0;
		for (struct dirent *de; (de = readdir(d));)
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				n++;
		closedir(d);
		cr_assert_eq(n, 1);
	}
}

CONTRACT(calls_out_of_order_fail_and_abandon)
{
	char id[37];
	new_id(id);
	airlock_error e = { 0 };
	airlock_artifact_put *p = NULL;
	/* Commit before seal. */
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t", id, 100, &p, &e), 0);
	cr_assert_eq(airlock_artifact_put_write(p, "abc", 3, &e), 0);
	cr_assert_eq(airlock_artifact_put_commit(p, &e), REJECTED);
	cr_assert(strstr(e.message, "commit on a put that is open"), "%s", e.message);
	assert_nothing_left(f, 0);
	airlock_artifact_put_free(p);
	/* Write after seal, seal twice, commit twice. */
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t", id, 100, &p, &e), 0);
	cr_assert_eq(airlock_artifact_put_seal(p, NULL, NULL, NULL, &e), 0);
	cr_assert_eq(airlock_artifact_put_write(p, "abc", 3, &e), REJECTED);
	assert_nothing_left(f, 0);
	airlock_artifact_put_free(p);
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t", id, 100, &p, &e), 0);
	cr_assert_eq(airlock_artifact_put_seal(p, NULL, NULL, NULL, &e), 0);
	cr_assert_eq(airlock_artifact_put_seal(p, NULL, NULL, NULL, &e), REJECTED);
	airlock_artifact_put_free(p);
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t", id, 100, &p, &e), 0);
	cr_assert_eq(airlock_artifact_put_seal(p, NULL, NULL, NULL, &e), 0);
	cr_assert_eq(airlock_artifact_put_commit(p, &e), 0);
	cr_assert_eq(airlock_artifact_put_commit(p, &e), REJECTED);
	cr_assert_eq(airlock_artifact_put_write(p, "a", 1, &e), REJECTED);
	airlock_artifact_put_free(p);
	assert_nothing_left(f, 1); /* a committed put stays committed */
	/* A bad expected digest abandons too. */
	char id2[37];
	new_id(id2);
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t", id2, 100, &p, &e), 0);
	cr_assert_eq(airlock_artifact_put_seal(p, "ABC", NULL, NULL, &e), DECODE);
	airlock_artifact_put_free(p);
	assert_nothing_left(f, 1);
	airlock_artifact_put_free(NULL);
	airlock_artifact_reader_free(NULL);
	/* Begin with a bad id makes nothing. */
	p = NULL;
	cr_assert_eq(airlock_artifact_put_begin(f->s, "..", id2, 100, &p, &e), DECODE);
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t", "not-an-id", 100, &p, &e), DECODE);
	cr_assert_null(p);
	assert_nothing_left(f, 1);
}

/* A discarded put leaves nothing at once, yet its seal still answers the
 * whole stream's digest and size (the cap still counted); its commit
 * fails, and it never becomes an object. */
CONTRACT(a_discarded_put_keeps_nothing_but_still_hashes_the_whole_stream)
{
	char id[AIRLOCK_UUID_STR_LEN + 1], sha[65];
	new_id(id);
	int64_t size = 3 * 100003 + 7;
	gen_sha(7, size, sha);
	airlock_artifact_put *p = NULL;
	airlock_error e = { 0 };
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t1", id, size, &p, &e), 0, "%s", e.message);
	gen g2 = { .state = 7, .left = size, .chunk = 100003 };
	unsigned char *b = malloc(100003);
	cr_assert_not_null(b);
	ssize_t n = gen_read(&g2, b, 100003, &e);
	cr_assert_eq(airlock_artifact_put_write(p, b, (size_t)n, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_put_discard(p, &e), 0, "%s", e.message);
	assert_nothing_left(f, 0);
	while ((n = gen_read(&g2, b, 100003, &e)) > 0)
		cr_assert_eq(airlock_artifact_put_write(p, b, (size_t)n, &e), 0, "%s", e.message);
	assert_nothing_left(f, 0);
	/* The cap still counts a discarded stream. */
	cr_assert_eq(airlock_artifact_put_write(p, b, 0, &e), 0);
	char got[65];
	int64_t got_size = -1;
	cr_assert_eq(airlock_artifact_put_seal(p, sha, got, &got_size, &e), 0, "%s", e.message);
	cr_assert_str_eq(got, sha);
	cr_assert_eq(got_size, size);
	cr_assert_eq(airlock_artifact_put_commit(p, &e), REJECTED);
	cr_assert(strstr(e.message, "discarded"), "%s", e.message);
	airlock_artifact_put_free(p);
	assert_nothing_left(f, 0);
	assert_missing(f, "t1", id);
	/* Past the cap a discarded put is abandoned like any other. */
	new_id(id);
	cr_assert_eq(airlock_artifact_put_begin(f->s, "t1", id, 10, &p, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_put_discard(p, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_put_write(p, b, 11, &e), TOOLVAL);
	cr_assert_lt(airlock_artifact_put_seal(p, NULL, got, &got_size, &e), 0);
	airlock_artifact_put_free(p);
	assert_nothing_left(f, 0);
	free(b);
}

CONTRACT(a_failing_stream_leaves_nothing)
{
	char id[37];
	new_id(id);
	char sha[65];
	gen_sha(8, 1 << 20, sha);
	airlock_artifact_metadata m;
	meta_init(&m, "t", sha);
	gen g2 = { .state = 8, .left = 1 << 20, .chunk = 100000, .fail_at = 4 };
	airlock_artifact_ref ref = { 0 };
	airlock_error e = { 0 };
	cr_assert_eq(airlock_artifact_store_put(f->s, id, &m, 1 << 21, gen_read, &g2, &ref, &e), -EIO);
	cr_assert(strstr(e.message, "test stream"), "%s", e.message);
	assert_missing(f, "t", id);
	assert_nothing_left(f, 0);
	/* The metadata's digest is required and checked first. */
	m.sha256[0] = 'X';
	cr_assert_eq(airlock_artifact_store_put(f->s, id, &m, 100, gen_read, &g2, &ref, &e), DECODE);
	assert_nothing_left(f, 0);
}

/* ---- the filesystem adapter's own ---------------------------------------------- */

static int fs_open_err(const char *root, airlock_error *e)
{
	airlock_artifact_store *s = NULL;
	memset(e, 0, sizeof(*e));
	int r = airlock_artifact_store_fs_open(root, &s, e);
	airlock_artifact_store_free(s);
	return r;
}

/* The identity names the store: a UUIDv7, the same at every call, and
 * nothing a walk or a key reaches. */
CONTRACT(the_identity_is_a_stable_uuidv7_outside_the_objects)
{
	char a[AIRLOCK_UUID_STR_LEN + 1], b[AIRLOCK_UUID_STR_LEN + 1];
	airlock_error e = { 0 };
	cr_assert_eq(airlock_artifact_store_identity(f->s, a, &e), 0, "%s", e.message);
	cr_assert(airlock_uuidv7_valid(a), "%s", a);
	cr_assert_eq(airlock_artifact_store_identity(f->s, b, &e), 0, "%s", e.message);
	cr_assert_str_eq(a, b);
	size_t temps = 0;
	seen objects = { 0 };
	cr_assert_eq(airlock_artifact_store_walk(f->s, 0, seen_cb, &objects, &temps, &e), 0, "%s",
	             e.message);
	cr_assert_eq(objects.n, 0, "the identity is not an object");
	cr_assert_eq(temps, 0);
}

/* The database a store serves: the first recorded stays. */
CONTRACT(the_database_served_is_the_first_bound)
{
	char d1[AIRLOCK_UUID_STR_LEN + 1], d2[AIRLOCK_UUID_STR_LEN + 1],
		got[AIRLOCK_UUID_STR_LEN + 1];
	airlock_error e = { 0 };
	cr_assert_eq(airlock_uuidv7_new(d1, &e), 0);
	cr_assert_eq(airlock_uuidv7_new(d2, &e), 0);
	cr_assert_eq(airlock_artifact_store_bind_database(f->s, d1, got, &e), 0, "%s", e.message);
	cr_assert_str_eq(got, d1);
	cr_assert_eq(airlock_artifact_store_bind_database(f->s, d2, got, &e), 0, "%s", e.message);
	cr_assert_str_eq(got, d1, "the first database stays");
	cr_assert_lt(airlock_artifact_store_bind_database(f->s, "x", got, &e), 0);
}

/* The same root is the same store for every process that opens it, ever
 * after; another root is another store; an identity file that is not one
 * is refused and left as it is (it names where the objects are). */
Test(fs_only, the_identity_is_the_roots, .init = fs_init, .fini = fx_fini)
{
	char a[AIRLOCK_UUID_STR_LEN + 1], b[AIRLOCK_UUID_STR_LEN + 1], c[AIRLOCK_UUID_STR_LEN + 1];
	airlock_error e = { 0 };
	cr_assert_eq(airlock_artifact_store_identity(g.s, a, &e), 0, "%s", e.message);
	airlock_artifact_store *again = NULL;
	cr_assert_eq(airlock_artifact_store_fs_open(g.root, &again, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_store_identity(again, b, &e), 0, "%s", e.message);
	airlock_artifact_store_free(again);
	cr_assert_str_eq(a, b, "a reopened root keeps its identity");
	char other[PATH_MAX + 32];
	snprintf(other, sizeof(other), "%s/other", g.base);
	cr_assert_eq(mkdir(other, 0700), 0);
	airlock_artifact_store *o = NULL;
	cr_assert_eq(airlock_artifact_store_fs_open(other, &o, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_artifact_store_identity(o, c, &e), 0, "%s", e.message);
	airlock_artifact_store_free(o);
	cr_assert_str_neq(a, c, "another root is another store");
	struct stat sb;
	cr_assert_eq(fstatat(g.root_fd, ".store-id", &sb, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert_eq(sb.st_mode & 07777, 0600);
	cr_assert_neq(fstatat(g.root_fd, ".store-id.tmp", &sb, AT_SYMLINK_NOFOLLOW), 0);
	/* A damaged identity: refused naming the file, never rewritten. */
	int fd = openat(g.root_fd, ".store-id", O_WRONLY | O_TRUNC | O_CLOEXEC);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, "not-an-id\n", 10), 10);
	close(fd);
	cr_assert_eq(airlock_artifact_store_identity(g.s, b, &e), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_assert(strstr(e.message, ".store-id"), "%s", e.message);
	cr_assert_eq(fstatat(g.root_fd, ".store-id", &sb, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert_eq(sb.st_size, 10, "left as it was");
	/* A FIFO in its place is refused without waiting for a writer. */
	cr_assert_eq(unlinkat(g.root_fd, ".store-id", 0), 0);
	cr_assert_eq(mkfifoat(g.root_fd, ".store-id", 0600), 0);
	cr_assert_eq(airlock_artifact_store_identity(g.s, b, &e), airlock_errcode(AIRLOCK_ERR_CONFIG));
	/* A symlink in its place is not followed. */
	cr_assert_eq(unlinkat(g.root_fd, ".store-id", 0), 0);
	cr_assert_eq(symlinkat("/etc/hostname", g.root_fd, ".store-id"), 0);
	cr_assert_lt(airlock_artifact_store_identity(g.s, b, &e), 0);
}

/* Two workers starting at once on a new store (a shared directory, a
 * rollout) each make the identity: both must succeed and agree. Each
 * round is a fresh root; the processes wait on one pipe so that their
 * calls overlap. */
Test(fs_only, processes_opening_a_new_store_at_once_agree_on_one_identity, .init = fs_init,
     .fini = fx_fini)
{
	enum { ROUNDS = 20, PROCS = 4 };
	for (int round = 0; round < ROUNDS; round++) {
		char root[PATH_MAX + 32];
		snprintf(root, sizeof(root), "%s/race-%d", g.base, round);
		cr_assert_eq(mkdir(root, 0700), 0);
		int go[2], out[2];
		cr_assert_eq(pipe(go), 0);
		cr_assert_eq(pipe(out), 0);
		for (int i = 0; i < PROCS; i++) {
			pid_t pid = fork();
			cr_assert(pid >= 0);
			if (pid == 0) {
				close(go[1]);
				char line[AIRLOCK_ERROR_MESSAGE_MAX + 8] = "";
				airlock_error e = { 0 };
				airlock_artifact_store *s = NULL;
				char id[AIRLOCK_UUID_STR_LEN + 1];
				char c;
				if (airlock_artifact_store_fs_open(root, &s, &e) == 0 &&
				    read(go[0], &c, 1) == 0 &&
				    airlock_artifact_store_identity(s, id, &e) == 0)
					snprintf(line, sizeof(line), "%s\n", id);
				else
					snprintf(line, sizeof(line), "! %s\n", e.message);
				airlock_artifact_store_free(s);
				(void)!write(out[1], line, strlen(line));
				_exit(0);
			}
		}
		close(go[0]);
		close(out[1]);
		close(go[1]); /* every child's read returns at once */
		char all[PROCS * (AIRLOCK_ERROR_MESSAGE_MAX + 8)];
		size_t n = 0;
		ssize_t k;
		while (n < sizeof(all) - 1 && (k = read(out[0], all + n, sizeof(all) - 1 - n)) > 0)
			n += (size_t)k;
		all[n] = 0;
		close(out[0]);
		while (wait(NULL) > 0)
			;
		char first[AIRLOCK_UUID_STR_LEN + 1] = "";
		int lines = 0;
		for (char *save = NULL, *l = strtok_r(all, "\n", &save); l;
		     l = strtok_r(NULL, "\n", &save), lines++) {
			cr_assert_neq(l[0], '!', "round %d: a process was refused: %s", round, l + 2);
			if (!first[0])
				snprintf(first, sizeof(first), "%s", l);
			cr_assert_str_eq(l, first, "round %d: two identities for one store", round);
		}
		cr_assert_eq(lines, PROCS);
	}
}

Test(fs_only, root_refusals, .init = fs_init, .fini = fx_fini)
{
	airlock_error e;
	char p[PATH_MAX * 2];
	/* Mode 0755. */
	snprintf(p, sizeof(p), "%s/wide", g.base);
	cr_assert_eq(mkdir(p, 0700), 0);
	cr_assert_eq(chmod(p, 0755), 0);
	cr_assert_eq(fs_open_err(p, &e), CONFIG);
	cr_assert(strstr(e.message, "mode 0755") && strstr(e.message, p), "%s", e.message);
	cr_assert_eq(chmod(p, 0710), 0);
	cr_assert_eq(fs_open_err(p, &e), CONFIG);
	cr_assert_eq(chmod(p, 0700), 0);
	cr_assert_eq(fs_open_err(p, &e), 0, "%s", e.message);
	/* Another owner. */
	if (geteuid() == 0) {
		cr_assert_eq(chown(p, 65534, 65534), 0);
		cr_assert_eq(fs_open_err(p, &e), CONFIG);
		cr_assert(strstr(e.message, "owned by uid 65534"), "%s", e.message);
		cr_assert_eq(chown(p, 0, 0), 0);
	} else {
		cr_log_warn("other owner: not checked (needs root to chown)");
	}
	/* A symlink to a good directory. */
	char l[PATH_MAX * 3];
	snprintf(l, sizeof(l), "%s/link", g.base);
	cr_assert_eq(symlink(p, l), 0);
	cr_assert_eq(fs_open_err(l, &e), CONFIG);
	cr_assert(strstr(e.message, "symlink"), "%s", e.message);
	/* Not a directory, missing, relative. */
	snprintf(l, sizeof(l), "%s/file", g.base);
	close(open(l, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	cr_assert_eq(fs_open_err(l, &e), CONFIG);
	cr_assert(strstr(e.message, "not a directory"), "%s", e.message);
	snprintf(l, sizeof(l), "%s/missing", g.base);
	cr_assert_eq(fs_open_err(l, &e), CONFIG);
	cr_assert_eq(e.errnum, ENOENT);
	cr_assert_eq(fs_open_err("relative/store", &e), CONFIG);
	/* Inside a source tree: .git two levels up (a directory), and in the
	 * root itself (a worktree's .git is a file). */
	char repo[PATH_MAX * 2];
	snprintf(repo, sizeof(repo), "%s/repo", g.base);
	cr_assert_eq(mkdir(repo, 0755), 0);
	snprintf(l, sizeof(l), "%s/.git", repo);
	cr_assert_eq(mkdir(l, 0755), 0);
	snprintf(l, sizeof(l), "%s/sub", repo);
	cr_assert_eq(mkdir(l, 0755), 0);
	snprintf(l, sizeof(l), "%s/sub/store", repo);
	cr_assert_eq(mkdir(l, 0700), 0);
	cr_assert_eq(fs_open_err(l, &e), CONFIG);
	cr_assert(strstr(e.message, "inside a source tree") && strstr(e.message, "2 levels"), "%s",
	          e.message);
	snprintf(l, sizeof(l), "%s/wt", g.base);
	cr_assert_eq(mkdir(l, 0700), 0);
	snprintf(repo, sizeof(repo), "%s/wt/.git", g.base);
	close(open(repo, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	cr_assert_eq(fs_open_err(l, &e), CONFIG);
	cr_assert(strstr(e.message, "holds .git"), "%s", e.message);
	/* This source tree itself. */
	const char *src = getenv("AIRLOCK_TEST_SOURCE_ROOT");
	if (src) {
		snprintf(l, sizeof(l), "%s/build", src);
		struct stat sb;
		if (stat(l, &sb) == 0 && (sb.st_mode & 07777) == 0700) {
			cr_assert_eq(fs_open_err(l, &e), CONFIG);
		}
	}
}

Test(fs_only, modes_and_layout, .init = fs_init, .fini = fx_fini)
{
	char id[37];
	new_id(id);
	airlock_artifact_ref ref = { 0 };
	airlock_error e;
	cr_assert_eq(put_stream(&g, "t", id, 1, 10, NULL, 100, &ref, &e), 0, "%s", e.message);
	airlock_artifact_ref_clear(&ref);
	struct stat sb;
	char rel[128];
	cr_assert_eq(fstatat(g.root_fd, "t", &sb, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert_eq(sb.st_mode & 07777, 0700);
	snprintf(rel, sizeof(rel), "t/%.2s", id);
	cr_assert_eq(fstatat(g.root_fd, rel, &sb, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert_eq(sb.st_mode & 07777, 0700);
	snprintf(rel, sizeof(rel), "t/%.2s/%s", id, id);
	cr_assert_eq(fstatat(g.root_fd, rel, &sb, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert(S_ISREG(sb.st_mode));
	cr_assert_eq(sb.st_mode & 07777, 0600);

	/* A put in flight is a dot-named file in the same shard directory,
	 * invisible to open until commit. */
	char id2[37];
	new_id(id2);
	airlock_artifact_put *p = NULL;
	cr_assert_eq(airlock_artifact_put_begin(g.s, "t", id2, 100, &p, &e), 0);
	snprintf(rel, sizeof(rel), "t/%.2s", id2);
	int dfd = openat(g.root_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert(dfd >= 0);
	DIR *d = fdopendir(dfd);
	int temps = 0;
	for (struct dirent *de; (de = readdir(d));)
		if (strncmp(de->d_name, ".tmp-", 5) == 0 && strstr(de->d_name, id2))
			temps++;
	closedir(d);
	cr_assert_eq(temps, 1);
	assert_missing(&g, "t", id2);
	cr_assert_eq(airlock_artifact_put_seal(p, NULL, NULL, NULL, &e), 0);
	assert_missing(&g, "t", id2);
	cr_assert_eq(airlock_artifact_put_commit(p, &e), 0);
	airlock_artifact_put_free(p);
	assert_nothing_left(&g, 2);
}

/* A symlink planted inside the store (a tenant directory pointing out of
 * it) makes the put fail; nothing is written where it points. */
Test(fs_only, a_symlink_in_the_store_is_never_followed, .init = fs_init, .fini = fx_fini)
{
	char out[PATH_MAX * 2], lnk[PATH_MAX * 2];
	snprintf(out, sizeof(out), "%s/outside", g.base);
	cr_assert_eq(mkdir(out, 0700), 0);
	snprintf(lnk, sizeof(lnk), "%s/evil", g.root);
	cr_assert_eq(symlink(out, lnk), 0);
	char id[37];
	new_id(id);
	airlock_artifact_ref ref = { 0 };
	airlock_error e;
	int r = put_stream(&g, "evil", id, 1, 10, NULL, 100, &ref, &e);
	cr_assert(r < 0, "a put through a symlinked tenant directory succeeded");
	/* O_NOFOLLOW with O_DIRECTORY: a symlink is "not a directory". */
	cr_assert(e.errnum == ELOOP || e.errnum == ENOTDIR, "%s", e.message);
	DIR *d = opendir(out);
	int n = 0;
	for (struct dirent *de; (de = readdir(d));)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	cr_assert_eq(n, 0, "bytes went through the symlink");
	/* And a symlink as the object itself is not opened. */
	char id2[37], rel[PATH_MAX * 3];
	new_id(id2);
	snprintf(rel, sizeof(rel), "%s/t", g.root);
	mkdir(rel, 0700);
	snprintf(rel, sizeof(rel), "%s/t/%.2s", g.root, id2);
	mkdir(rel, 0700);
	snprintf(rel, sizeof(rel), "%s/t/%.2s/%s", g.root, id2, id2);
	cr_assert_eq(symlink("/etc/passwd", rel), 0);
	airlock_artifact_reader *rd = NULL;
	cr_assert(airlock_artifact_store_open(g.s, "t", id2, 0, &rd, NULL, &e) < 0);
	cr_assert_null(rd);
	/* The walk reports neither, and removes neither. */
	seen s = { 0 };
	cr_assert_eq(airlock_artifact_store_walk(g.s, 0, seen_cb, &s, NULL, &e), 0, "%s", e.message);
	cr_assert_eq(s.n, 0);
	struct stat sb;
	cr_assert_eq(lstat(rel, &sb), 0);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	for (struct dirent *de; (de = readdir(d));)
		n++;
	closedir(d);
	return n;
}

Test(fs_only, no_descriptor_leaks, .init = fs_init, .fini = fx_fini)
{
	int before = count_fds();
	for (int i = 0; i < 20; i++) {
		char id[37], wrong[65], back[65];
		new_id(id);
		airlock_artifact_ref ref = { 0 };
		airlock_error e;
		cr_assert_eq(put_stream(&g, "t", id, (uint64_t)i + 1, 1000, NULL, 10000, &ref, &e), 0);
		airlock_artifact_ref_clear(&ref);
		cr_assert_eq(put_stream(&g, "t", id, 1, 1000, NULL, 10000, &ref, &e), -EEXIST);
		gen_sha(1000, 10, wrong);
		char id2[37];
		new_id(id2);
		cr_assert_eq(put_stream(&g, "t", id2, 1, 1000, wrong, 10000, &ref, &e), INTEGRITY);
		cr_assert_eq(put_stream(&g, "t", id2, 1, 1000, NULL, 10, &ref, &e), TOOLVAL);
		read_sha(&g, "t", id, 10, back, NULL, NULL);
		assert_missing(&g, "t", id2);
		cr_assert_eq(airlock_artifact_store_remove(g.s, "t", id, &e), 0);
		seen s = { 0 };
		cr_assert_eq(airlock_artifact_store_walk(g.s, 0, seen_cb, &s, NULL, &e), 0);
	}
	cr_assert_eq(count_fds(), before);
}

/* ---- the memory adapter's own ---------------------------------------------------- */

Test(memory_only, is_bounded, .fini = fx_fini)
{
	memset(&g, 0, sizeof(g));
	g.root_fd = -1;
	g.adapter = "memory";
	airlock_error e = { 0 };
	cr_assert_eq(artifact_memory_open(100000, &g.s, &g.mem, &e), 0);
	char id[37];
	new_id(id);
	airlock_artifact_ref ref = { 0 };
	cr_assert_eq(put_stream(&g, "t", id, 1, 200000, NULL, 1 << 20, &ref, &e), -ENOSPC);
	assert_nothing_left(&g, 0);
	size_t bytes = 1;
	artifact_memory_count(g.mem, NULL, NULL, &bytes);
	cr_assert_eq(bytes, 0);
	cr_assert_eq(put_stream(&g, "t", id, 1, 50000, NULL, 1 << 20, &ref, &e), 0, "%s", e.message);
	airlock_artifact_ref_clear(&ref);
}
