/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's artifacts (src/worker/artifacts.h) over the fs store and the
 * SQLite database: a create's five steps, what each failure leaves
 * (nothing), lookups that answer "not found" alike for every reason, and
 * the retention sweeper finding what a crash at each step leaves. The
 * database's own contract runs against PostgreSQL too (test_worker_db);
 * these run the order of the two writes, which is the same code for both.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/ids.h"
#include "airlock/port/artifact.h"
#include "util/util.h"
#include "worker/artifacts.h"
#include "worker/db.h"

#define MIB (INT64_C(1) << 20)
#define GRACE_S 60

typedef struct fixture {
	char dir[64];   /* holds state/ (the database) and store/ */
	char store[96];
	worker_db *db;
	worker_artifacts *a;
} fixture;

static void fx_open_with(fixture *f, int64_t size_max, int64_t tenant_max)
{
	snprintf(f->dir, sizeof(f->dir), "/tmp/airlock-wart-XXXXXX");
	cr_assert_not_null(mkdtemp(f->dir));
	char state[96];
	snprintf(state, sizeof(state), "%s/state", f->dir);
	snprintf(f->store, sizeof(f->store), "%s/store", f->dir);
	cr_assert_eq(mkdir(state, 0700), 0);
	cr_assert_eq(mkdir(f->store, 0700), 0);
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_open_sqlite(state, &f->db, &err), 0, "%s", err.message);
	worker_artifacts_config cfg = { .root = f->store, .size_max = size_max,
		                        .tenant_bytes_max = tenant_max,
		                        .retention_seconds = 30 * 86400,
		                        .upload_unclaimed_seconds = 86400,
		                        .grace_seconds = GRACE_S };
	cr_assert_eq(worker_artifacts_open(&cfg, f->db, &f->a, &err), 0, "%s", err.message);
}

static void fx_open(fixture *f)
{
	fx_open_with(f, 64 * MIB, 256 * MIB);
}

static void fx_done(fixture *f)
{
	worker_artifacts_free(f->a);
	worker_db_free(f->db);
	char *rm[] = { "rm", "-rf", f->dir, NULL };
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		execvp(rm[0], rm);
		_exit(127);
	}
	int st = 0;
	waitpid(pid, &st, 0);
}

/* Every file under the store's root, whatever its name: what a failure
 * must not leave. */
static size_t files_under(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return 0;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    !strcmp(e->d_name, ".store-id") || /* the store's records, not objects */
		    !strcmp(e->d_name, ".database-id"))
			continue;
		char sub[512];
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		struct stat st;
		if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
			n += files_under(sub);
		else
			n++;
	}
	closedir(d);
	return n;
}

static worker_artifact_writer writer(fixture *f, const char *tenant, const char *run,
                                     airlock_artifact_origin origin)
{
	worker_artifact_writer w = { .artifacts = f->a, .origin = origin };
	snprintf(w.tenant_id, sizeof(w.tenant_id), "%s", tenant);
	if (run) {
		w.has_run = true;
		snprintf(w.run_id, sizeof(w.run_id), "%s", run);
	}
	return w;
}

static unsigned char *pattern(size_t len)
{
	unsigned char *b = malloc(len);
	cr_assert_not_null(b);
	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)(i * 31 + i / 4099);
	return b;
}

/* Streams data in 64 KiB writes, as an export or an upload does. */
static int put_stream(const worker_artifact_writer *w, const char *name, const unsigned char *data,
                      size_t len, const char *expected, airlock_artifact_ref *ref,
                      airlock_error *err)
{
	worker_artifact_put *p = NULL;
	int r = worker_artifact_begin(w, name, strlen(name), "application/octet-stream",
	                              AIRLOCK_TRUST_EXTERNAL_UNTRUSTED, &p, err);
	for (size_t off = 0; r == 0 && off < len; off += 65536)
		r = worker_artifact_write(p, data + off, len - off < 65536 ? len - off : 65536, err);
	if (r == 0)
		r = worker_artifact_finish(p, expected, ref, err);
	worker_artifact_put_free(p);
	return r;
}

static void read_back(fixture *f, const worker_db_artifact *row, int64_t offset,
                      const unsigned char *want, size_t len)
{
	airlock_artifact_reader *rd = NULL;
	int64_t size = -1;
	airlock_error err = { 0 };
	cr_assert_eq(worker_artifacts_content(f->a, row, offset, &rd, &size, &err), 0, "%s",
	             err.message);
	cr_assert_eq(size, (int64_t)len);
	size_t got = (size_t)offset;
	unsigned char buf[70000];
	for (;;) {
		ssize_t k = airlock_artifact_reader_read(rd, buf, sizeof(buf), &err);
		cr_assert_geq(k, 0, "%s", err.message);
		if (k == 0)
			break;
		cr_assert_leq(got + (size_t)k, len);
		cr_assert_eq(memcmp(buf, want + got, (size_t)k), 0, "bytes differ near %zu", got);
		got += (size_t)k;
	}
	cr_assert_eq(got, len);
	airlock_artifact_reader_free(rd);
}

Test(worker_artifacts, a_streamed_create_reads_back_byte_for_byte_with_its_digest)
{
	fixture f;
	fx_open(&f);
	size_t len = 3 * (size_t)MIB + 12345; /* past every buffer on the way */
	unsigned char *data = pattern(len);
	char want[65];
	cr_assert_eq(util_sha256_hex(data, len, want), 0);
	worker_artifact_writer w = writer(&f, "tenant-a", "run-1", AIRLOCK_ORIGIN_SANDBOX_EXPORT);
	airlock_artifact_ref ref;
	airlock_error err = { 0 };
	/* The source's digest given: compared, equal. */
	cr_assert_eq(put_stream(&w, "../../etc/passwd", data, len, want, &ref, &err), 0, "%s",
	             err.message);
	cr_assert_str_eq(ref.sha256, want);
	cr_assert_eq(ref.size_bytes, (int64_t)len);
	cr_assert_str_eq(ref.media_type, "application/octet-stream");
	cr_assert(airlock_uuidv7_valid(ref.artifact_id));
	worker_db_artifact row;
	bool found = false;
	cr_assert_eq(worker_artifacts_lookup(f.a, ref.artifact_id, "tenant-a", util_now_ms(), &row,
	                                     &found, &err),
	             0);
	cr_assert(found);
	cr_assert_eq(row.origin, AIRLOCK_ORIGIN_SANDBOX_EXPORT);
	cr_assert_str_eq(row.run_id, "run-1");
	/* The filename is metadata only: kept as given, and the key is the
	 * tenant and the id and nothing else. */
	cr_assert_eq(row.filename_len, strlen("../../etc/passwd"));
	cr_assert_eq(memcmp(row.filename, "../../etc/passwd", row.filename_len), 0);
	char key[AIRLOCK_ARTIFACT_KEY_MAX];
	cr_assert_eq(airlock_artifact_storage_key("tenant-a", ref.artifact_id, key, NULL), 0);
	cr_assert_str_eq(row.storage_key, key);
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", f.store, key);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0, "the object is at the derived key");
	cr_assert_eq(st.st_size, (off_t)len);
	/* 30 days from its creation. */
	cr_assert(row.has_expires);
	cr_assert_eq(row.expires_at_ms - row.created_at_ms, INT64_C(30) * 86400 * 1000);
	read_back(&f, &row, 0, data, len);
	read_back(&f, &row, (int64_t)len - 7, data, len);
	worker_db_artifact_clear(&row);
	airlock_artifact_ref_clear(&ref);
	free(data);
	fx_done(&f);
}

Test(worker_artifacts, a_digest_mismatch_stores_nothing)
{
	fixture f;
	fx_open(&f);
	unsigned char *data = pattern(MIB);
	char other[65];
	memset(other, 'b', 64);
	other[64] = 0;
	worker_artifact_writer w = writer(&f, "t", "r", AIRLOCK_ORIGIN_SANDBOX_EXPORT);
	airlock_artifact_ref ref;
	airlock_error err = { 0 };
	cr_assert_eq(put_stream(&w, "x", data, MIB, other, &ref, &err),
	             airlock_errcode(AIRLOCK_ERR_ARTIFACT_INTEGRITY));
	cr_assert(strstr(err.message, other), "names the expected digest: %s", err.message);
	cr_assert_eq(files_under(f.store), 0, "no object, no temporary");
	int64_t bytes = -1;
	cr_assert_eq(worker_db_artifact_tenant_bytes(f.db, "t", &bytes, NULL), 0);
	cr_assert_eq(bytes, 0, "no row was charged");
	free(data);
	fx_done(&f);
}

Test(worker_artifacts, caps_refuse_and_leave_nothing)
{
	fixture f;
	fx_open_with(&f, 2 * MIB, 3 * MIB);
	unsigned char *data = pattern(3 * MIB);
	worker_artifact_writer w = writer(&f, "t", "r", AIRLOCK_ORIGIN_SANDBOX_EXPORT);
	airlock_artifact_ref ref;
	airlock_error err = { 0 };
	/* One artifact past worker.artifact_size_max: abandoned mid-stream. */
	cr_assert_lt(put_stream(&w, "big", data, 3 * MIB, NULL, &ref, &err), 0);
	cr_assert_eq(files_under(f.store), 0, "%s", err.message);
	/* Within it, twice: the second passes the tenant's cap. */
	cr_assert_eq(put_stream(&w, "a", data, 2 * MIB, NULL, &ref, &err), 0, "%s", err.message);
	airlock_artifact_ref_clear(&ref);
	cr_assert_eq(put_stream(&w, "b", data, 2 * MIB, NULL, &ref, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	cr_assert(strstr(err.message, "worker.artifact_tenant_bytes_max"), "%s", err.message);
	cr_assert_eq(files_under(f.store), 1, "only the first object");
	/* Another tenant has its own cap. */
	worker_artifact_writer w2 = writer(&f, "u", "r", AIRLOCK_ORIGIN_SANDBOX_EXPORT);
	cr_assert_eq(put_stream(&w2, "c", data, 2 * MIB, NULL, &ref, &err), 0, "%s", err.message);
	airlock_artifact_ref_clear(&ref);
	/* Bad arguments name themselves. */
	worker_artifact_put *p = NULL;
	cr_assert_eq(worker_artifact_begin(&w, "n", 1, "text/plain; charset=utf-8",
	                                   AIRLOCK_TRUST_EXTERNAL_UNTRUSTED, &p, &err),
	             airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION));
	cr_assert(strstr(err.message, "media_type"), "%s", err.message);
	cr_assert_eq(worker_artifact_begin(&w, "n", AIRLOCK_ARTIFACT_FILENAME_MAX + 1, "text/plain",
	                                   AIRLOCK_TRUST_EXTERNAL_UNTRUSTED, &p, &err),
	             airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION));
	cr_assert_null(p);
	free(data);
	fx_done(&f);
}

/* A tenant near its cap cannot make the store hold a whole stream before
 * step 3 refuses it: the stream is abandoned at the write that passes the
 * room the tenant had, with nothing left on disk; a tenant at its cap is
 * refused before a temporary is made. */
/* Room for a 3 MiB and a 1 MiB artifact, each named by one byte. */
#define CAP_3_AND_1_MIB (worker_db_artifact_charge(3 * MIB, 1) + worker_db_artifact_charge(MIB, 1))

Test(worker_artifacts, a_stream_past_the_tenants_room_is_abandoned_as_it_comes)
{
	fixture f;
	fx_open_with(&f, 64 * MIB, CAP_3_AND_1_MIB);
	unsigned char *data = pattern(4 * MIB);
	worker_artifact_writer w = writer(&f, "t", "r", AIRLOCK_ORIGIN_SANDBOX_EXPORT);
	airlock_artifact_ref ref;
	airlock_error err = { 0 };
	cr_assert_eq(put_stream(&w, "a", data, 3 * MIB, NULL, &ref, &err), 0, "%s", err.message);
	airlock_artifact_ref_clear(&ref);
	/* One MiB left: the second MiB of a stream is refused as it comes. */
	worker_artifact_put *p = NULL;
	cr_assert_eq(worker_artifact_begin(&w, "b", 1, "text/plain",
	                                   AIRLOCK_TRUST_EXTERNAL_UNTRUSTED, &p, &err),
	             0, "%s", err.message);
	cr_assert_eq(worker_artifact_write(p, data, (size_t)MIB, &err), 0, "%s", err.message);
	cr_assert_eq(worker_artifact_write(p, data, 1, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	char want[96];
	snprintf(want, sizeof(want), "worker.artifact_tenant_bytes_max is %lld",
	         (long long)CAP_3_AND_1_MIB);
	cr_assert(strstr(err.message, want), "%s", err.message);
	cr_assert_eq(files_under(f.store), 1, "the abandoned stream's temporary is gone at once");
	cr_assert_lt(worker_artifact_finish(p, NULL, &ref, &err), 0);
	worker_artifact_put_free(p);
	/* Exactly one MiB fits. */
	cr_assert_eq(put_stream(&w, "c", data, (size_t)MIB, NULL, &ref, &err), 0, "%s",
	             err.message);
	airlock_artifact_ref_clear(&ref);
	/* At the cap: refused before a byte, no temporary made. */
	p = NULL;
	cr_assert_eq(worker_artifact_begin(&w, "d", 1, "text/plain",
	                                   AIRLOCK_TRUST_EXTERNAL_UNTRUSTED, &p, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	cr_assert_null(p);
	cr_assert(strstr(err.message, "worker.artifact_tenant_bytes_max"), "%s", err.message);
	cr_assert_eq(files_under(f.store), 2);
	int64_t held = 0;
	cr_assert_eq(worker_db_artifact_tenant_bytes(f.db, "t", &held, &err), 0, "%s", err.message);
	cr_assert_eq(held, CAP_3_AND_1_MIB);
	free(data);
	fx_done(&f);
}

/* An idempotent writer (artifact.export's) past its tenant's room: the
 * stream is kept nowhere, yet an equal artifact of the run still answers
 * it (a retry after a lost answer at the cap gets its artifact, not a
 * refusal), and a stream that is not equal is refused naming the cap. */
Test(worker_artifacts, an_idempotent_put_past_the_tenants_room_is_answered_by_its_equal)
{
	fixture f;
	fx_open_with(&f, 64 * MIB, CAP_3_AND_1_MIB);
	unsigned char *data = pattern(4 * MIB);
	worker_artifact_writer w = writer(&f, "t", "r", AIRLOCK_ORIGIN_SANDBOX_EXPORT);
	w.reuse_same = true;
	airlock_artifact_ref first, again;
	airlock_error err = { 0 };
	cr_assert_eq(put_stream(&w, "a", data, 3 * MIB, NULL, &first, &err), 0, "%s", err.message);
	/* One MiB of room, three asked again: answered by the first. */
	cr_assert_eq(put_stream(&w, "a", data, 3 * MIB, NULL, &again, &err), 0, "%s", err.message);
	cr_assert_str_eq(again.artifact_id, first.artifact_id);
	airlock_artifact_ref_clear(&again);
	cr_assert_eq(files_under(f.store), 1);
	/* Not equal, past the room: refused, nothing kept. */
	cr_assert_eq(put_stream(&w, "b", data, 2 * MIB, NULL, &again, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	cr_assert(strstr(err.message, "worker.artifact_tenant_bytes_max"), "%s", err.message);
	cr_assert_eq(files_under(f.store), 1);
	/* At the cap exactly: the equal one is still the answer, and a
	 * stream never reaches the disk (no temporary at any write). */
	cr_assert_eq(put_stream(&w, "c", data + 3 * MIB, (size_t)MIB, NULL, &again, &err), 0, "%s",
	             err.message);
	airlock_artifact_ref_clear(&again);
	worker_artifact_put *p = NULL;
	cr_assert_eq(worker_artifact_begin(&w, "a", 1, "application/octet-stream",
	                                   AIRLOCK_TRUST_EXTERNAL_UNTRUSTED, &p, &err),
	             0, "%s", err.message);
	for (size_t off = 0; off < 3 * (size_t)MIB; off += 65536) {
		cr_assert_eq(worker_artifact_write(p, data + off, 65536, &err), 0, "%s", err.message);
		cr_assert_eq(files_under(f.store), 2, "nothing of it on disk");
	}
	cr_assert_eq(worker_artifact_finish(p, NULL, &again, &err), 0, "%s", err.message);
	worker_artifact_put_free(p);
	cr_assert_str_eq(again.artifact_id, first.artifact_id);
	airlock_artifact_ref_clear(&again);
	airlock_artifact_ref_clear(&first);
	int64_t held = 0;
	cr_assert_eq(worker_db_artifact_tenant_bytes(f.db, "t", &held, &err), 0, "%s", err.message);
	cr_assert_eq(held, CAP_3_AND_1_MIB);
	free(data);
	fx_done(&f);
}

Test(worker_artifacts, a_lookup_is_not_found_alike_for_every_reason)
{
	fixture f;
	fx_open(&f);
	worker_artifact_writer w = writer(&f, "tenant-a", "run-1", AIRLOCK_ORIGIN_MODEL_OUTPUT);
	airlock_artifact_ref ref;
	airlock_error err = { 0 };
	cr_assert_eq(worker_artifact_create(&w, "notes.md", 8, "text/markdown",
	                                    AIRLOCK_TRUST_INTERNAL_TOOL, "# hi\n", 5, &ref, &err),
	             0, "%s", err.message);
	worker_db_artifact row;
	bool found = true;
	int64_t now = util_now_ms();
	cr_assert_eq(worker_artifacts_lookup(f.a, ref.artifact_id, "tenant-a", now, &row, &found,
	                                     NULL),
	             0);
	cr_assert(found);
	cr_assert_eq(row.trust, AIRLOCK_TRUST_INTERNAL_TOOL);
	worker_db_artifact_clear(&row);
	/* A token of every tenant sees it. */
	cr_assert_eq(worker_artifacts_lookup(f.a, ref.artifact_id, NULL, now, &row, &found, NULL), 0);
	cr_assert(found);
	worker_db_artifact_clear(&row);
	/* Another tenant, an expired one, a missing one, a malformed one. */
	const struct {
		const char *id, *tenant;
		int64_t now;
	} miss[] = {
		{ ref.artifact_id, "tenant-b", now },
		{ ref.artifact_id, "tenant-a", now + INT64_C(31) * 86400 * 1000 },
		{ "0192d3f5-8e1a-7abc-8def-0123456789ab", "tenant-a", now },
		{ "../../etc/passwd", "tenant-a", now },
		{ "0192D3F5-8E1A-7ABC-8DEF-0123456789AB", "tenant-a", now },
	};
	for (size_t i = 0; i < sizeof(miss) / sizeof(miss[0]); i++) {
		found = true;
		cr_assert_eq(worker_artifacts_lookup(f.a, miss[i].id, miss[i].tenant, miss[i].now, &row,
		                                     &found, &err),
		             0, "case %zu: %s", i, err.message);
		cr_assert_not(found, "case %zu", i);
		cr_assert_null(row.filename, "case %zu: nothing of the row is handed back", i);
	}
	airlock_artifact_ref_clear(&ref);
	fx_done(&f);
}

Test(worker_artifacts, lifetimes_follow_the_origin)
{
	fixture f;
	fx_open(&f);
	const struct {
		airlock_artifact_origin origin;
		bool has_run, has_expires;
		int64_t life_s;
	} cases[] = {
		{ AIRLOCK_ORIGIN_UPLOAD, false, true, 86400 },
		{ AIRLOCK_ORIGIN_TOOL_OUTPUT, true, true, 30 * 86400 },
		{ AIRLOCK_ORIGIN_KNOWLEDGE_SOURCE, true, false, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		worker_artifact_writer w =
			writer(&f, "t", cases[i].has_run ? "r" : NULL, cases[i].origin);
		airlock_artifact_ref ref;
		airlock_error err = { 0 };
		cr_assert_eq(worker_artifact_create(&w, "f", 1, "text/plain",
		                                    AIRLOCK_TRUST_USER_SUPPLIED, "x", 1, &ref, &err),
		             0, "%s", err.message);
		worker_db_artifact row;
		bool found = false;
		cr_assert_eq(worker_db_artifact_get(f.db, ref.artifact_id, &row, &found, NULL), 0);
		cr_assert(found);
		cr_assert_eq(row.has_run, cases[i].has_run, "case %zu", i);
		cr_assert_eq(row.has_expires, cases[i].has_expires, "case %zu", i);
		if (cases[i].has_expires)
			cr_assert_eq(row.expires_at_ms - row.created_at_ms, cases[i].life_s * 1000,
			             "case %zu", i);
		worker_db_artifact_clear(&row);
		airlock_artifact_ref_clear(&ref);
	}
	fx_done(&f);
}

/* ---- the sweeper and what a crash leaves ------------------------------------------ */

static worker_sweep_stats sweep(fixture *f, int64_t now)
{
	worker_sweep_stats st;
	airlock_error err = { 0 };
	cr_assert_eq(worker_artifacts_sweep(f->a, now, &st, &err), 0, "%s", err.message);
	return st;
}

Test(worker_artifacts, the_sweeper_removes_expired_artifacts_object_and_row)
{
	fixture f;
	fx_open(&f);
	worker_artifact_writer w = writer(&f, "t", "r", AIRLOCK_ORIGIN_SANDBOX_EXPORT);
	airlock_artifact_ref keep, old;
	cr_assert_eq(worker_artifact_create(&w, "a", 1, "text/plain", AIRLOCK_TRUST_EXTERNAL_UNTRUSTED,
	                                    "aaaa", 4, &old, NULL),
	             0);
	cr_assert_eq(worker_artifact_create(&w, "b", 1, "text/plain", AIRLOCK_TRUST_EXTERNAL_UNTRUSTED,
	                                    "bbbb", 4, &keep, NULL),
	             0);
	bool done = false;
	cr_assert_eq(worker_db_artifact_attach(f.db, keep.artifact_id, "t", "r", util_now_ms(), &done,
	                                       NULL),
	             0);
	cr_assert(done, "the run keeps its export: no expiry");
	int64_t later = util_now_ms() + INT64_C(31) * 86400 * 1000;
	worker_sweep_stats st = sweep(&f, later);
	cr_assert_eq(st.expired_removed, 1);
	cr_assert_eq(st.failures, 0);
	cr_assert_eq(files_under(f.store), 1, "%zu files", files_under(f.store));
	worker_db_artifact row;
	bool found = true;
	cr_assert_eq(worker_artifacts_lookup(f.a, old.artifact_id, NULL, util_now_ms(), &row, &found,
	                                     NULL),
	             0);
	cr_assert_not(found, "an expired reference resolves to nothing (404)");
	cr_assert_eq(worker_db_artifact_get(f.db, old.artifact_id, &row, &found, NULL), 0);
	cr_assert_not(found, "its row is gone");
	int64_t bytes = -1;
	cr_assert_eq(worker_db_artifact_tenant_bytes(f.db, "t", &bytes, NULL), 0);
	cr_assert_eq(bytes, worker_db_artifact_charge(4, 1), "its charge was given back");
	/* A second pass finds nothing. */
	st = sweep(&f, later);
	cr_assert_eq(st.expired_removed + st.pending_removed + st.orphans_removed, 0);
	airlock_artifact_ref_clear(&keep);
	airlock_artifact_ref_clear(&old);
	fx_done(&f);
}

/* A worker killed at each step of a create (a child doing the steps up to
 * there, then _exit without cleanup): what it leaves is found by the
 * sweeper once past the grace, and never before; nothing is visible. */
enum crash_at { CRASH_WRITING, CRASH_AFTER_ROW, CRASH_AFTER_OBJECT };

static void create_then_die(fixture *f, enum crash_at at, char id[AIRLOCK_UUID_STR_LEN + 1])
{
	int pfd[2];
	cr_assert_eq(pipe(pfd), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(pfd[0]);
		airlock_artifact_store *s = NULL;
		airlock_artifact_put *p = NULL;
		char aid[AIRLOCK_UUID_STR_LEN + 1], hex[65];
		int64_t size = 0;
		static char data[200000];
		memset(data, 'q', sizeof(data));
		if (airlock_artifact_store_fs_open(f->store, &s, NULL) < 0 ||
		    airlock_uuidv7_new(aid, NULL) < 0 ||
		    airlock_artifact_put_begin(s, "t", aid, MIB, &p, NULL) < 0 ||
		    airlock_artifact_put_write(p, data, sizeof(data), NULL) < 0)
			_exit(2);
		if (write(pfd[1], aid, sizeof(aid)) != (ssize_t)sizeof(aid))
			_exit(3);
		if (at == CRASH_WRITING)
			_exit(0);
		if (airlock_artifact_put_seal(p, NULL, hex, &size, NULL) < 0)
			_exit(4);
		worker_db_artifact row = { .origin = AIRLOCK_ORIGIN_SANDBOX_EXPORT,
			                   .trust = AIRLOCK_TRUST_EXTERNAL_UNTRUSTED,
			                   .size_bytes = size, .created_at_ms = util_now_ms(),
			                   .has_expires = true,
			                   .expires_at_ms = util_now_ms() + 86400000,
			                   .filename = (unsigned char *)"f", .filename_len = 1 };
		memcpy(row.artifact_id, aid, sizeof(aid));
		snprintf(row.tenant_id, sizeof(row.tenant_id), "t");
		snprintf(row.media_type, sizeof(row.media_type), "text/plain");
		memcpy(row.sha256, hex, sizeof(hex));
		if (airlock_artifact_storage_key("t", aid, row.storage_key, NULL) < 0)
			_exit(5);
		worker_db_artifact_insert_result ins;
		if (worker_db_artifact_insert(f->db, &row, INT64_C(1) << 40, &ins, NULL) < 0 ||
		    !ins.inserted)
			_exit(6);
		if (at == CRASH_AFTER_ROW)
			_exit(0);
		if (airlock_artifact_put_commit(p, NULL) < 0)
			_exit(7);
		_exit(0);
	}
	close(pfd[1]);
	cr_assert_eq(read(pfd[0], id, AIRLOCK_UUID_STR_LEN + 1), AIRLOCK_UUID_STR_LEN + 1);
	close(pfd[0]);
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed at step %d",
	          WEXITSTATUS(st));
}

Test(worker_artifacts, what_a_crash_at_each_step_leaves_is_swept_after_the_grace)
{
	static const enum crash_at steps[] = { CRASH_WRITING, CRASH_AFTER_ROW, CRASH_AFTER_OBJECT };
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		fixture f;
		fx_open(&f);
		char id[AIRLOCK_UUID_STR_LEN + 1];
		create_then_die(&f, steps[i], id);
		cr_assert_eq(files_under(f.store), 1, "step %zu: a temporary or an object (%zu)", i,
		             files_under(f.store));
		worker_db_artifact row;
		bool found = true;
		int64_t now = util_now_ms();
		cr_assert_eq(worker_artifacts_lookup(f.a, id, "t", now, &row, &found, NULL), 0);
		cr_assert_not(found, "step %zu: nothing half-written is visible", i);
		/* Within the grace: a put in progress looks the same, so nothing
		 * is touched. */
		worker_sweep_stats st = sweep(&f, now);
		cr_assert_eq(st.pending_removed + st.orphans_removed + st.temps_removed, 0,
		             "step %zu", i);
		cr_assert_eq(files_under(f.store), 1, "step %zu", i);
		/* Past it: gone, row and all. */
		st = sweep(&f, now + (GRACE_S + 5) * 1000);
		cr_assert_eq(st.failures, 0, "step %zu", i);
		cr_assert_eq(files_under(f.store), 0, "step %zu", i);
		cr_assert_eq(worker_db_artifact_get(f.db, id, &row, &found, NULL), 0);
		cr_assert_not(found, "step %zu: no row left", i);
		if (steps[i] == CRASH_WRITING)
			cr_assert_eq(st.temps_removed, 1);
		else
			cr_assert_eq(st.pending_removed, 1, "step %zu", i);
		int64_t bytes = -1;
		cr_assert_eq(worker_db_artifact_tenant_bytes(f.db, "t", &bytes, NULL), 0);
		cr_assert_eq(bytes, 0, "step %zu: the tenant's bytes are back", i);
		fx_done(&f);
	}
}

Test(worker_artifacts, an_object_without_a_row_and_a_row_without_an_object_are_both_resolved)
{
	fixture f;
	fx_open(&f);
	worker_artifact_writer w = writer(&f, "t", "r", AIRLOCK_ORIGIN_SANDBOX_EXPORT);
	airlock_artifact_ref a, b;
	cr_assert_eq(worker_artifact_create(&w, "a", 1, "text/plain", AIRLOCK_TRUST_EXTERNAL_UNTRUSTED,
	                                    "aaaa", 4, &a, NULL),
	             0);
	cr_assert_eq(worker_artifact_create(&w, "b", 1, "text/plain", AIRLOCK_TRUST_EXTERNAL_UNTRUSTED,
	                                    "bbbb", 4, &b, NULL),
	             0);
	/* a: its row deleted by hand (a restore, an operator): the object is
	 * nobody's. */
	bool deleted = false;
	cr_assert_eq(worker_db_artifact_delete(f.db, a.artifact_id, &deleted, NULL), 0);
	/* b: its object removed and the row left (a sweeper killed between
	 * its two writes). */
	airlock_artifact_store *s = NULL;
	cr_assert_eq(airlock_artifact_store_fs_open(f.store, &s, NULL), 0);
	cr_assert_eq(airlock_artifact_store_remove(s, "t", b.artifact_id, NULL), 0);
	airlock_artifact_store_free(s);
	worker_db_artifact row;
	bool found = false;
	cr_assert_eq(worker_artifacts_lookup(f.a, b.artifact_id, "t", util_now_ms(), &row, &found,
	                                     NULL),
	             0);
	cr_assert(found);
	airlock_artifact_reader *rd = NULL;
	int64_t size = 0;
	airlock_error err = { 0 };
	cr_assert_eq(worker_artifacts_content(f.a, &row, 0, &rd, &size, &err), -ENOENT,
	             "a row whose object is gone reads as missing: %s", err.message);
	worker_db_artifact_clear(&row);
	int64_t now = util_now_ms();
	worker_sweep_stats st = sweep(&f, now + (GRACE_S + 5) * 1000);
	cr_assert_eq(st.orphans_removed, 1, "the object with no row");
	cr_assert_eq(files_under(f.store), 0);
	/* The row without its object goes when it expires, as every row. */
	st = sweep(&f, now + INT64_C(31) * 86400 * 1000);
	cr_assert_eq(st.expired_removed, 1);
	cr_assert_eq(worker_db_artifact_get(f.db, b.artifact_id, &row, &found, NULL), 0);
	cr_assert_not(found);
	airlock_artifact_ref_clear(&a);
	airlock_artifact_ref_clear(&b);
	fx_done(&f);
}

Test(worker_artifacts, a_store_directory_others_can_reach_is_refused_naming_the_setting)
{
	char dir[] = "/tmp/airlock-wart-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char state[64], store[64];
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(store, sizeof(store), "%s/store", dir);
	cr_assert_eq(mkdir(state, 0700), 0);
	cr_assert_eq(mkdir(store, 0755), 0);
	worker_db *db = NULL;
	cr_assert_eq(worker_db_open_sqlite(state, &db, NULL), 0);
	worker_artifacts_config cfg = { .root = store, .size_max = 1, .tenant_bytes_max = 1,
		                        .retention_seconds = 1, .upload_unclaimed_seconds = 1,
		                        .grace_seconds = 1 };
	worker_artifacts *a = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(worker_artifacts_open(&cfg, db, &a, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_assert(strstr(err.message, "worker.artifacts_dir"), "%s", err.message);
	cr_assert(strstr(err.message, store), "%s", err.message);
	worker_db_free(db);
	char *rm[] = { "rm", "-rf", dir, NULL };
	pid_t pid = fork();
	if (pid == 0) {
		execvp(rm[0], rm);
		_exit(127);
	}
	waitpid(pid, NULL, 0);
}

/* ---- output past the tool's limit (worker/output.h) ---------------------------------- */

#include "worker/output.h"

Test(worker_output, an_excerpt_keeps_head_and_tail_within_the_limit_and_counts_what_it_left_out)
{
	size_t len = 10000, limit = 4096;
	unsigned char *data = malloc(len);
	cr_assert_not_null(data);
	/* Two-byte UTF-8 characters throughout, so a cut in the middle of one
	 * would show. */
	for (size_t i = 0; i + 1 < len; i += 2) {
		data[i] = 0xC3;
		data[i + 1] = (unsigned char)(0xA0 + (i / 2) % 16);
	}
	unsigned char *out = NULL;
	size_t n = 0;
	cr_assert_eq(worker_output_excerpt(data, len, limit, "the whole output is artifact X", &out,
	                                   &n),
	             0);
	cr_assert_leq(n, limit);
	const char *m = memmem(out, n, "\n\n[... airlock: ", 16);
	cr_assert_not_null(m);
	size_t head = (size_t)((const unsigned char *)m - out);
	unsigned long long omitted = 0;
	cr_assert_eq(sscanf(m, "\n\n[... airlock: %llu bytes", &omitted), 1);
	const char *end = memmem(m, n - head, "...]\n\n", 6);
	cr_assert_not_null(end);
	size_t tail = n - (size_t)((const unsigned char *)end + 6 - out);
	cr_assert_eq(head + omitted + tail, len, "head %zu + left out %llu + tail %zu", head, omitted,
	             tail);
	cr_assert_eq(memcmp(out, data, head), 0);
	cr_assert_eq(memcmp(out + n - tail, data + len - tail, tail), 0);
	cr_assert_eq(head % 2, 0, "the head ends on a character boundary");
	cr_assert_eq(tail % 2, 0, "the tail starts on one");
	cr_assert(memmem(out, n, "artifact X", 10));
	free(out);
	/* Within the limit there is nothing to cut. */
	cr_assert_eq(worker_output_excerpt(data, 100, limit, "", &out, &n), -EINVAL);
	free(data);
}

Test(worker_output, a_long_stream_is_kept_whole_and_the_result_holds_its_excerpt)
{
	fixture f;
	fx_open(&f);
	worker_artifact_writer w = writer(&f, "t", "run-1", AIRLOCK_ORIGIN_TOOL_OUTPUT);
	size_t len = 3 * (size_t)MIB + 17;
	unsigned char *whole = pattern(len);
	char want[65];
	cr_assert_eq(util_sha256_hex(whole, len, want), 0);
	airlock_execution_result res = { 0 };
	res.stdout_data = malloc(len);
	cr_assert_not_null(res.stdout_data);
	memcpy(res.stdout_data, whole, len);
	res.stdout_len = len;
	res.stderr_data = (unsigned char *)strdup("short");
	res.stderr_len = 5;
	airlock_artifact_ref refs[2];
	bool has[2] = { true, true };
	cr_assert_eq(worker_output_apply(&w, &res, refs, has), 0);
	cr_assert(has[0]);
	cr_assert_not(has[1], "a short stream is left alone");
	cr_assert_eq(res.stderr_len, 5);
	cr_assert_not(res.stderr_truncated);
	cr_assert(res.stdout_truncated);
	cr_assert_leq(res.stdout_len, (size_t)WORKER_TOOL_OUTPUT_BYTES);
	cr_assert(memmem(res.stdout_data, res.stdout_len, refs[0].artifact_id, 36),
	          "the marker names the artifact");
	cr_assert_str_eq(refs[0].sha256, want, "the artifact is the whole stream");
	cr_assert_eq(refs[0].size_bytes, (int64_t)len);
	worker_db_artifact row;
	bool found = false;
	cr_assert_eq(worker_artifacts_lookup(f.a, refs[0].artifact_id, "t", util_now_ms(), &row,
	                                     &found, NULL),
	             0);
	cr_assert(found);
	cr_assert_eq(row.origin, AIRLOCK_ORIGIN_TOOL_OUTPUT);
	cr_assert_eq(row.trust, AIRLOCK_TRUST_EXTERNAL_UNTRUSTED);
	cr_assert_str_eq(row.run_id, "run-1");
	read_back(&f, &row, 0, whole, len);
	worker_db_artifact_clear(&row);
	airlock_artifact_ref_clear(&refs[0]);
	airlock_execution_result_clear(&res);
	free(whole);
	fx_done(&f);
}

Test(worker_output, a_stream_the_store_refuses_is_still_cut_and_says_why)
{
	fixture f;
	fx_open_with(&f, 64 * MIB, 1 * MIB); /* the tenant's cap below the stream */
	worker_artifact_writer w = writer(&f, "t", "run-1", AIRLOCK_ORIGIN_TOOL_OUTPUT);
	size_t len = 2 * (size_t)MIB;
	airlock_execution_result res = { 0 };
	res.stdout_data = pattern(len);
	res.stdout_len = len;
	airlock_artifact_ref refs[2];
	bool has[2];
	cr_assert_eq(worker_output_apply(&w, &res, refs, has), 0);
	cr_assert_not(has[0]);
	cr_assert_leq(res.stdout_len, (size_t)WORKER_TOOL_OUTPUT_BYTES);
	cr_assert(memmem(res.stdout_data, res.stdout_len, "could not be kept", 17));
	cr_assert(memmem(res.stdout_data, res.stdout_len, "worker.artifact_tenant_bytes_max", 32));
	cr_assert_eq(files_under(f.store), 0, "nothing half-kept");
	airlock_execution_result_clear(&res);
	fx_done(&f);
}

/* artifact.export is IDEMPOTENT: the same bytes, name and type exported
 * again by the same run answer the first artifact and keep nothing more;
 * anything different is another artifact. */
Test(worker_artifacts, an_equal_export_of_the_same_run_answers_the_first_artifact)
{
	fixture f;
	fx_open(&f);
	worker_artifact_writer w = writer(&f, "t", "run-1", AIRLOCK_ORIGIN_MODEL_OUTPUT);
	w.reuse_same = true;
	airlock_artifact_ref a, b, c, d;
	airlock_error err = { 0 };
	cr_assert_eq(worker_artifact_create(&w, "r.md", 4, "text/markdown",
	                                    AIRLOCK_TRUST_INTERNAL_TOOL, "same", 4, &a, &err),
	             0, "%s", err.message);
	cr_assert_eq(worker_artifact_create(&w, "r.md", 4, "text/markdown",
	                                    AIRLOCK_TRUST_INTERNAL_TOOL, "same", 4, &b, &err),
	             0, "%s", err.message);
	cr_assert_str_eq(a.artifact_id, b.artifact_id);
	cr_assert_eq(files_under(f.store), 1, "no second copy");
	int64_t bytes = -1;
	cr_assert_eq(worker_db_artifact_tenant_bytes(f.db, "t", &bytes, NULL), 0);
	cr_assert_eq(bytes, worker_db_artifact_charge(4, 4), "charged once");
	/* Another name, or another run: another artifact. */
	cr_assert_eq(worker_artifact_create(&w, "s.md", 4, "text/markdown",
	                                    AIRLOCK_TRUST_INTERNAL_TOOL, "same", 4, &c, &err),
	             0);
	cr_assert_str_neq(c.artifact_id, a.artifact_id);
	worker_artifact_writer w2 = writer(&f, "t", "run-2", AIRLOCK_ORIGIN_MODEL_OUTPUT);
	w2.reuse_same = true;
	cr_assert_eq(worker_artifact_create(&w2, "r.md", 4, "text/markdown",
	                                    AIRLOCK_TRUST_INTERNAL_TOOL, "same", 4, &d, &err),
	             0);
	cr_assert_str_neq(d.artifact_id, a.artifact_id);
	cr_assert_eq(files_under(f.store), 3);
	airlock_artifact_ref_clear(&a);
	airlock_artifact_ref_clear(&b);
	airlock_artifact_ref_clear(&c);
	airlock_artifact_ref_clear(&d);
	fx_done(&f);
}

/* A stream that stops halfway (the service or the client gone: the
 * source's error ends the put before its seal) leaves no object, no
 * temporary and no row. */
Test(worker_artifacts, a_stream_that_stops_halfway_leaves_nothing)
{
	fixture f;
	fx_open(&f);
	worker_artifact_writer w = writer(&f, "t", "r", AIRLOCK_ORIGIN_SANDBOX_EXPORT);
	worker_artifact_put *p = NULL;
	unsigned char *data = pattern(MIB);
	cr_assert_eq(worker_artifact_begin(&w, "x", 1, "text/plain", AIRLOCK_TRUST_EXTERNAL_UNTRUSTED,
	                                   &p, NULL),
	             0);
	cr_assert_eq(worker_artifact_write(p, data, MIB, NULL), 0);
	cr_assert_eq(files_under(f.store), 1, "the temporary while it streams");
	worker_artifact_put_free(p); /* the source failed: no finish */
	cr_assert_eq(files_under(f.store), 0);
	int64_t bytes = -1;
	cr_assert_eq(worker_db_artifact_tenant_bytes(f.db, "t", &bytes, NULL), 0);
	cr_assert_eq(bytes, 0);
	free(data);
	fx_done(&f);
}

/* A full disk mid-stream: the put fails naming the store's error and
 * leaves nothing (a 1 MiB tmpfs as the store). */
/* One database, one store: a second worker with a store of its own is
 * refused at start, naming the setting and both stores, and leaves the
 * binding as it was; the same store opened again (a restart, a second
 * worker on the shared directory) is accepted. */
Test(worker_artifacts, a_database_bound_to_one_store_refuses_another)
{
	fixture f;
	fx_open(&f);
	char other[160];
	snprintf(other, sizeof(other), "%s/other", f.dir);
	cr_assert_eq(mkdir(other, 0700), 0);
	worker_artifacts_config cfg = *worker_artifacts_config_of(f.a);
	cfg.root = other;
	cfg.sweep_interval_seconds = 0;
	worker_artifacts *second = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(worker_artifacts_open(&cfg, f.db, &second, &err),
	             airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_assert_null(second);
	cr_assert(strstr(err.message, "worker.artifacts_dir"), "%s", err.message);
	cr_assert(strstr(err.message, "must share one artifact store"), "%s", err.message);
	airlock_error_clear(&err);
	cfg.root = f.store;
	cr_assert_eq(worker_artifacts_open(&cfg, f.db, &second, &err), 0, "%s", err.message);
	worker_artifacts_free(second);
	fx_done(&f);
}

/* A store serves one database: a worker on a new (or mistyped) database
 * with a store that holds another database's artifacts is refused at
 * start, before its sweeper could take every object for an orphan; the
 * objects are all still there. */
Test(worker_artifacts, a_store_serving_another_database_is_refused_and_keeps_its_objects)
{
	fixture f;
	fx_open(&f);
	worker_artifact_writer w = writer(&f, "t", "r", AIRLOCK_ORIGIN_SANDBOX_EXPORT);
	airlock_artifact_ref ref;
	airlock_error err = { 0 };
	cr_assert_eq(worker_artifact_create(&w, "a", 1, "text/plain", AIRLOCK_TRUST_EXTERNAL_UNTRUSTED,
	                                    "aaaa", 4, &ref, &err),
	             0, "%s", err.message);
	airlock_artifact_ref_clear(&ref);
	worker_artifacts_config cfg = *worker_artifacts_config_of(f.a);
	char root[160];
	snprintf(root, sizeof(root), "%s", f.store);
	cfg.root = root;
	cfg.sweep_interval_seconds = 0;
	char state2[160];
	snprintf(state2, sizeof(state2), "%s/state2", f.dir);
	cr_assert_eq(mkdir(state2, 0700), 0);
	worker_db *db2 = NULL;
	cr_assert_eq(worker_db_open_sqlite(state2, &db2, &err), 0, "%s", err.message);
	worker_artifacts *second = NULL;
	cr_assert_eq(worker_artifacts_open(&cfg, db2, &second, &err),
	             airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_assert_null(second);
	cr_assert(strstr(err.message, "serves worker database"), "%s", err.message);
	airlock_error_clear(&err);
	worker_db_free(db2);
	cr_assert_eq(files_under(f.store), 1, "the object is still there");
	fx_done(&f);
}

/* The small disk's mount point, unmounted after the test whether or not
 * an assertion ended it (a failed run left its tmpfs mounted). */
static char g_full_mount[128];

static void full_disk_fini(void)
{
	if (g_full_mount[0])
		(void)umount2(g_full_mount, MNT_DETACH);
}

Test(worker_artifacts, a_full_disk_mid_stream_leaves_nothing, .fini = full_disk_fini)
{
	if (geteuid() != 0)
		cr_skip_test("mounting a small tmpfs needs root");
	fixture f;
	fx_open(&f);
	snprintf(g_full_mount, sizeof(g_full_mount), "%s", f.store);
	worker_artifacts_free(f.a);
	f.a = NULL;
	/* The store moves onto the small disk with its identity (the
	 * database is bound to it). */
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
	         "tar -C %s -cf %s.tar .store-id .database-id && "
	         "mount -t tmpfs -o size=1m,mode=0700 airlock-full %s && "
	         "tar -C %s -xpf %s.tar && rm %s.tar",
	         f.store, f.store, f.store, f.store, f.store, f.store);
	cr_assert_eq(system(cmd), 0);
	worker_artifacts_config cfg = { .root = f.store, .size_max = 64 * MIB,
		                        .tenant_bytes_max = 256 * MIB, .retention_seconds = 86400,
		                        .upload_unclaimed_seconds = 86400, .grace_seconds = GRACE_S };
	airlock_error err = { 0 };
	cr_assert_eq(worker_artifacts_open(&cfg, f.db, &f.a, &err), 0, "%s", err.message);
	worker_artifact_writer w = writer(&f, "t", "r", AIRLOCK_ORIGIN_SANDBOX_EXPORT);
	unsigned char *data = pattern(2 * MIB);
	airlock_artifact_ref ref;
	int r = put_stream(&w, "big", data, 2 * MIB, NULL, &ref, &err);
	cr_expect_lt(r, 0, "a put past the disk fails");
	cr_expect(strstr(err.message, "No space left on device"), "%s", err.message);
	cr_expect_eq(files_under(f.store), 0, "no object, no temporary");
	int64_t bytes = -1;
	cr_expect_eq(worker_db_artifact_tenant_bytes(f.db, "t", &bytes, NULL), 0);
	cr_expect_eq(bytes, 0, "no row");
	/* The store works again once there is room. */
	cr_expect_eq(put_stream(&w, "small", data, 4096, NULL, &ref, &err), 0, "%s", err.message);
	airlock_artifact_ref_clear(&ref);
	worker_artifacts_free(f.a);
	f.a = NULL;
	snprintf(cmd, sizeof(cmd), "umount %s", f.store);
	cr_assert_eq(system(cmd), 0);
	free(data);
	fx_done(&f);
}

/* Four-byte characters at every alignment and over a range of lengths:
 * both cuts must fall on a character's start and the excerpt must stay
 * within the limit whichever way a cut has to move. */
Test(worker_output, an_excerpt_of_four_byte_characters_never_exceeds_the_limit)
{
	size_t limit = 4096;
	for (size_t len = 5000; len < 5040; len++) {
		for (size_t shift = 0; shift < 4; shift++) {
			unsigned char *data = malloc(len);
			cr_assert_not_null(data);
			static const unsigned char ch[4] = { 0xF0, 0x9F, 0x98, 0x80 };
			for (size_t i = 0; i < len; i++)
				data[i] = i < shift ? 'a' : ch[(i - shift) % 4];
			unsigned char *out = NULL;
			size_t n = 0;
			cr_assert_eq(worker_output_excerpt(data, len, limit, "note", &out, &n), 0);
			cr_assert_leq(n, limit, "len %zu shift %zu: %zu bytes for a limit of %zu", len,
			              shift, n, limit);
			const char *m = memmem(out, n, "\n\n[... airlock: ", 16);
			cr_assert_not_null(m);
			size_t head = (size_t)((const unsigned char *)m - out);
			const char *end = memmem(m, n - head, "...]\n\n", 6);
			cr_assert_not_null(end);
			size_t tail = n - (size_t)((const unsigned char *)end + 6 - out);
			cr_assert(head <= shift || (head - shift) % 4 == 0, "head cut mid-character");
			cr_assert_eq((len - tail - shift) % 4, 0, "tail starts mid-character");
			free(out);
			free(data);
		}
	}
}
