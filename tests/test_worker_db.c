/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker database's contract (src/worker/db.h): one suite of the lease
 * operations run unchanged against both adapters, SQLite (a state
 * directory per test) and PostgreSQL (a real server this suite starts once:
 * initdb and pg_ctl from Debian's postgresql package, as the postgres user,
 * into a temporary directory with its Unix socket and no TCP; stopped with
 * pg_ctl stop -m fast and removed when the suite ends, whatever the tests
 * did; each test gets a schema of its own on it). Then what only one
 * adapter has: PostgreSQL's connection string never in a message, the
 * SQLite file's and directory's modes.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "airlock/ids.h"
#include "util/fault.h"
#include "worker/db.h"
#include "worker/db_sql.h"

#include "pg_server.h"

extern char **environ;

/* ---- a database per test ----------------------------------------------------- */

typedef struct fixture {
	bool pg;
	char dir[64];      /* sqlite: the state directory */
	char schema[32];   /* pg: this test's schema */
	char conninfo[512];
	worker_db *db;
} fixture;

static int64_t counter;

static void pg_admin_exec(fixture *f, const char *sql)
{
	PGconn *c = pg_admin();
	char full[1024];
	snprintf(full, sizeof(full), "SET search_path TO %s; %s", f->schema, sql);
	PGresult *r = PQexec(c, full);
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK,
	          "%s: %s", sql, PQresultErrorMessage(r));
	PQclear(r);
	PQfinish(c);
}

static void fx_init(fixture *f, bool pg)
{
	memset(f, 0, sizeof(*f));
	f->pg = pg;
	if (!pg) {
		snprintf(f->dir, sizeof(f->dir), "/tmp/airlock-wdb-XXXXXX");
		cr_assert(mkdtemp(f->dir));
		return;
	}
	const char *why = getenv(PG_ENV_WHY);
	cr_assert_null(why, "the PostgreSQL test server did not start: %s", why);
	cr_assert(getenv(PG_ENV_DIR));
	snprintf(f->schema, sizeof(f->schema), "t%d_%lld", (int)getpid(), (long long)counter++);
	snprintf(f->conninfo, sizeof(f->conninfo),
	         "host=%s user=" PG_USER " dbname=postgres password=" PG_PASSWORD
	         " options='-c search_path=%s'",
	         getenv(PG_ENV_DIR), f->schema);
	PGconn *c = pg_admin();
	char sql[128];
	snprintf(sql, sizeof(sql), "CREATE SCHEMA %s", f->schema);
	PGresult *r = PQexec(c, sql);
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s", PQresultErrorMessage(r));
	PQclear(r);
	PQfinish(c);
}

static int fx_try_open(fixture *f, worker_db **ret, airlock_error *err)
{
	return f->pg ? worker_db_open_pg(f->conninfo, ret, err)
	             : worker_db_open_sqlite(f->dir, ret, err);
}

static worker_db *fx_open(fixture *f)
{
	airlock_error err = { 0 };
	worker_db *db = NULL;
	cr_assert_eq(fx_try_open(f, &db, &err), 0, "open: %s", err.message);
	return db;
}

static void fx_raw(fixture *f, const char *sql)
{
	if (f->pg) {
		pg_admin_exec(f, sql);
		return;
	}
	char path[128];
	snprintf(path, sizeof(path), "%s/worker.db", f->dir);
	sqlite3 *s = NULL;
	cr_assert_eq(sqlite3_open(path, &s), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(s, sql, NULL, NULL, NULL), SQLITE_OK, "%s: %s", sql,
	             sqlite3_errmsg(s));
	sqlite3_close(s);
}

static void fx_done(fixture *f)
{
	worker_db_free(f->db);
	f->db = NULL;
	if (!f->pg) {
		char *rm[] = { "rm", "-rf", f->dir, NULL };
		cr_assert_eq(pg_run(rm), 0);
		return;
	}
	PGconn *c = pg_admin();
	char sql[128];
	snprintf(sql, sizeof(sql), "DROP SCHEMA %s CASCADE", f->schema);
	PQclear(PQexec(c, sql));
	PQfinish(c);
}

/* One contract test, registered for each adapter. */
#define CONTRACT(name)                                                                             \
	static void name##_body(fixture *f);                                                       \
	Test(worker_db_sqlite, name)                                                               \
	{                                                                                          \
		fixture f;                                                                         \
		fx_init(&f, false);                                                                \
		name##_body(&f);                                                                   \
		fx_done(&f);                                                                       \
	}                                                                                          \
	Test(worker_db_pg, name)                                                                   \
	{                                                                                          \
		fixture f;                                                                         \
		fx_init(&f, true);                                                                 \
		name##_body(&f);                                                                   \
		fx_done(&f);                                                                       \
	}                                                                                          \
	static void name##_body(fixture *f)

/* ---- helpers ------------------------------------------------------------------ */

#define T0 INT64_C(1700000000000) /* the tests' clock starts here */
/* A recorded sandbox's handle (opaque to the database: base64 here). */
#define TEST_HANDLE "aGFuZGxlLW9mLWEtc2FuZGJveA=="

static worker_db_claim_result claim(worker_db *db, const char *run_id, const char *tenant,
                                    int64_t epoch, int64_t ttl, int64_t now)
{
	worker_db_claim_request req = { .run_id = run_id, .tenant_id = tenant, .epoch = epoch,
		                        .ttl_seconds = ttl, .now_ms = now };
	worker_db_claim_result res;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_claim(db, &req, &res, &err), 0, "claim %s@%lld: %s", run_id,
	             (long long)epoch, err.message);
	return res;
}

static worker_db_check_result check(worker_db *db, const char *run_id, const char *tenant,
                                    int64_t epoch, int64_t now)
{
	worker_db_check_result res;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_check(db, run_id, tenant, epoch, now, &res, &err), 0, "check: %s",
	             err.message);
	return res;
}

static worker_db_lease_state set_env(worker_db *db, const char *run_id, int64_t epoch,
                                     const char *env, int64_t now)
{
	worker_db_lease_state st;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_set_environment(db, run_id, epoch, env, TEST_HANDLE, now, &st, &err), 0,
	             "set_environment: %s", err.message);
	return st;
}

static bool clear_env(worker_db *db, const char *run_id, int64_t epoch, const char *env)
{
	bool cleared = false;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_clear_environment(db, run_id, epoch, env, &cleared, &err), 0,
	             "clear_environment: %s", err.message);
	return cleared;
}

static worker_db_release_result release(worker_db *db, const char *run_id, const char *tenant,
                                        int64_t epoch, int64_t now)
{
	worker_db_release_result res;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_release(db, run_id, tenant, epoch, now, &res, &err), 0,
	             "release: %s", err.message);
	return res;
}

static void new_env(char id[AIRLOCK_ENVIRONMENT_ID_MAX])
{
	cr_assert_eq(airlock_environment_id_new(id, NULL), 0);
}

static const char *state_name(worker_db_lease_state s)
{
	const char *n = worker_db_lease_state_name(s);
	return n ? n : "(invalid)";
}

#define assert_state(got, want)                                                                    \
	cr_assert_eq((got), (want), "state %s, want %s", state_name(got), state_name(want))
#define assert_outcome(res, want)                                                                  \
	cr_assert_eq((res).outcome, (want), "outcome %s (refusal %s), want %s",                    \
	             worker_db_claim_outcome_name((res).outcome), state_name((res).refusal),       \
	             worker_db_claim_outcome_name(want))

/* ---- the contract ------------------------------------------------------------- */

CONTRACT(a_fresh_database_gets_the_current_schema_version)
{
	f->db = fx_open(f);
	int64_t v = -1;
	cr_assert_eq(worker_db_schema_version(f->db, &v, NULL), 0);
	cr_assert_eq(v, worker_db_schema_current());
	cr_assert_geq(v, 1);
	/* Opened again: nothing is applied twice (a second CREATE TABLE would
	 * fail the open). */
	worker_db_free(f->db);
	f->db = fx_open(f);
	cr_assert_eq(worker_db_schema_version(f->db, &v, NULL), 0);
	cr_assert_eq(v, worker_db_schema_current());
}

CONTRACT(a_database_with_a_newer_schema_is_refused_naming_both_versions)
{
	f->db = fx_open(f);
	worker_db_free(f->db);
	f->db = NULL;
	char sql[128];
	long long newer = (long long)worker_db_schema_current() + 1;
	snprintf(sql, sizeof(sql), "UPDATE airlock_schema SET version = %lld", newer);
	fx_raw(f, sql);
	airlock_error err = { 0 };
	worker_db *db = NULL;
	cr_assert_eq(fx_try_open(f, &db, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_assert_null(db);
	char want[96];
	snprintf(want, sizeof(want), "has schema version %lld, newer than the %lld", newer,
	         (long long)worker_db_schema_current());
	cr_assert(strstr(err.message, want), "message: %s", err.message);
	cr_assert(strstr(err.message, f->pg ? "PostgreSQL database" : "SQLite database"),
	          "names the database: %s", err.message);
	if (f->pg)
		cr_assert_null(strstr(err.message, PG_PASSWORD), "%s", err.message);
}

CONTRACT(epochs_renew_fence_and_refuse_and_a_run_keeps_its_tenant)
{
	f->db = fx_open(f);
	worker_db_claim_result r = claim(f->db, "run-1", "tenant-a", 5, 30, T0);
	assert_outcome(r, WORKER_DB_CLAIM_NEW);
	cr_assert_eq(r.expires_at_ms, T0 + 30000);

	r = claim(f->db, "run-1", "tenant-a", 5, 30, T0 + 10000);
	assert_outcome(r, WORKER_DB_CLAIM_RENEWED);
	cr_assert_eq(r.expires_at_ms, T0 + 40000);
	cr_assert_eq(check(f->db, "run-1", "tenant-a", 5, T0 + 35000).state,
	             WORKER_DB_LEASE_CURRENT, "the renewal moved the expiry");

	/* Lower: refused, nothing changed (the expiry is the renewal's). */
	r = claim(f->db, "run-1", "tenant-a", 4, 300, T0 + 11000);
	assert_outcome(r, WORKER_DB_CLAIM_REFUSED);
	assert_state(r.refusal, WORKER_DB_LEASE_OTHER_EPOCH);
	worker_db_check_result c = check(f->db, "run-1", "tenant-a", 5, T0 + 11000);
	assert_state(c.state, WORKER_DB_LEASE_CURRENT);
	cr_assert_eq(c.expires_at_ms, T0 + 40000);
	assert_state(check(f->db, "run-1", "tenant-a", 4, T0 + 11000).state,
	             WORKER_DB_LEASE_OTHER_EPOCH);

	/* Another tenant, even with a higher epoch: refused, nothing changed. */
	r = claim(f->db, "run-1", "tenant-b", 9, 30, T0 + 12000);
	assert_outcome(r, WORKER_DB_CLAIM_REFUSED);
	assert_state(r.refusal, WORKER_DB_LEASE_OTHER_TENANT);
	assert_state(check(f->db, "run-1", "tenant-a", 5, T0 + 12000).state,
	             WORKER_DB_LEASE_CURRENT);
	assert_state(check(f->db, "run-1", "tenant-b", 5, T0 + 12000).state,
	             WORKER_DB_LEASE_OTHER_TENANT);
	assert_state(check(f->db, "run-1", "tenant-b", 9, T0 + 12000).state,
	             WORKER_DB_LEASE_OTHER_TENANT);

	/* Higher: fences the current holder. */
	r = claim(f->db, "run-1", "tenant-a", 6, 30, T0 + 13000);
	assert_outcome(r, WORKER_DB_CLAIM_FENCED);
	cr_assert_eq(r.older_count, 0, "no sandbox was recorded");
	assert_state(check(f->db, "run-1", "tenant-a", 5, T0 + 13000).state,
	             WORKER_DB_LEASE_OTHER_EPOCH);
	assert_state(check(f->db, "run-1", "tenant-a", 6, T0 + 13000).state,
	             WORKER_DB_LEASE_CURRENT);
	r = claim(f->db, "run-1", "tenant-a", 5, 30, T0 + 14000);
	assert_outcome(r, WORKER_DB_CLAIM_REFUSED);

	assert_state(check(f->db, "run-unknown", "tenant-a", 1, T0).state, WORKER_DB_LEASE_NONE);
}

/* The handle a record holds comes back as it went in, for the record's
 * id only; one that could not be sent as a header is never written. */
CONTRACT(a_sandbox_records_its_handle)
{
	f->db = fx_open(f);
	char a[AIRLOCK_ENVIRONMENT_ID_MAX], b[AIRLOCK_ENVIRONMENT_ID_MAX];
	new_env(a);
	new_env(b);
	claim(f->db, "run-h", "tenant-a", 1, 60, T0);
	assert_state(set_env(f->db, "run-h", 1, a, T0 + 1), WORKER_DB_LEASE_CURRENT);
	airlock_error err = { 0 };
	char *h = NULL;
	cr_assert_eq(worker_db_environment_handle(f->db, a, &h, &err), 0, "%s", err.message);
	cr_assert_str_eq(h, TEST_HANDLE);
	free(h);
	h = (char *)1;
	cr_assert_eq(worker_db_environment_handle(f->db, b, &h, &err), 0, "%s", err.message);
	cr_assert_null(h);
	static const char *const bad[] = { "", "with space", "line\nbreak", "\x7f" };
	worker_db_lease_state st;
	claim(f->db, "run-h2", "tenant-a", 1, 60, T0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(worker_db_set_environment(f->db, "run-h2", 1, b, bad[i], T0 + 2, &st, &err),
		             airlock_errcode(AIRLOCK_ERR_DECODE), "%zu", i);
	char *big = malloc(WORKER_DB_HANDLE_MAX + 2);
	cr_assert(big);
	memset(big, 'A', WORKER_DB_HANDLE_MAX + 1);
	big[WORKER_DB_HANDLE_MAX + 1] = 0;
	cr_expect_eq(worker_db_set_environment(f->db, "run-h2", 1, b, big, T0 + 2, &st, &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE));
	big[WORKER_DB_HANDLE_MAX] = 0;
	cr_expect_eq(worker_db_set_environment(f->db, "run-h2", 1, b, big, T0 + 2, &st, &err), 0,
	             "%s", err.message);
	free(big);
	cr_assert(check(f->db, "run-h2", "tenant-a", 1, T0 + 3).has_environment);
}

/* ---- the orchestration bridge (docs/bridge.md) ------------------------------------ */

static worker_db_claim_result claim_bridge(worker_db *db, const char *run_id, int64_t epoch,
                                           bool bridge, int64_t now)
{
	worker_db_claim_request req = { .run_id = run_id, .tenant_id = "tenant-a", .epoch = epoch,
		                        .ttl_seconds = 60, .now_ms = now, .bridge = bridge };
	worker_db_claim_result res;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_claim(db, &req, &res, &err), 0, "claim: %s", err.message);
	return res;
}

static worker_db_bridge_result bridge_lookup(worker_db *db, const char *env, int64_t now)
{
	worker_db_bridge_result res;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_bridge_lookup(db, env, now, &res, &err), 0, "bridge_lookup: %s",
	             err.message);
	return res;
}

#define HASH_A "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1"

CONTRACT(a_claims_bridge_is_fixed_for_its_life_and_a_renewal_that_changes_it_changes_nothing)
{
	f->db = fx_open(f);
	worker_db_claim_result r = claim_bridge(f->db, "run-b", 1, true, T0);
	assert_outcome(r, WORKER_DB_CLAIM_NEW);
	cr_assert(check(f->db, "run-b", "tenant-a", 1, T0 + 1).bridge);
	r = claim_bridge(f->db, "run-b", 1, false, T0 + 10000);
	assert_outcome(r, WORKER_DB_CLAIM_REFUSED);
	assert_state(r.refusal, WORKER_DB_LEASE_OTHER_BRIDGE);
	worker_db_check_result c = check(f->db, "run-b", "tenant-a", 1, T0 + 10001);
	cr_assert(c.bridge, "the refused renewal changed the bridge");
	cr_assert_eq(c.expires_at_ms, T0 + 60000, "the refused renewal moved the expiry");
	assert_outcome(claim_bridge(f->db, "run-b", 1, true, T0 + 20000), WORKER_DB_CLAIM_RENEWED);
	/* A new claim (a higher epoch) chooses again. */
	assert_outcome(claim_bridge(f->db, "run-b", 2, false, T0 + 20001), WORKER_DB_CLAIM_FENCED);
	cr_assert_not(check(f->db, "run-b", "tenant-a", 2, T0 + 20002).bridge);
	assert_outcome(claim_bridge(f->db, "run-b", 2, true, T0 + 20003), WORKER_DB_CLAIM_REFUSED);
	/* A claim without a bridge is what every claim before version 3 was. */
	claim(f->db, "run-n", "tenant-a", 1, 60, T0);
	cr_assert_not(check(f->db, "run-n", "tenant-a", 1, T0 + 1).bridge);
}

CONTRACT(a_bridge_sandbox_records_its_tokens_hash_and_the_lookup_follows_its_claim)
{
	f->db = fx_open(f);
	char a[AIRLOCK_ENVIRONMENT_ID_MAX], b[AIRLOCK_ENVIRONMENT_ID_MAX];
	new_env(a);
	new_env(b);
	cr_assert_not(bridge_lookup(f->db, a, T0).found, "no row yet");
	worker_db_lease_state st = WORKER_DB_LEASE_INVALID;
	airlock_error err = { 0 };
	claim_bridge(f->db, "run-b", 1, true, T0);
	claim(f->db, "run-n", "tenant-a", 1, 60, T0);
	/* A bridge's sandbox carries its hash; a claim without one none. */
	cr_expect_eq(worker_db_set_environment(f->db, "run-b", 1, a, TEST_HANDLE, T0 + 1, &st, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "no hash: %s", err.message);
	cr_expect_eq(worker_db_set_bridge_environment(f->db, "run-n", 1, a, TEST_HANDLE, HASH_A,
	                                              T0 + 1, &st, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "no bridge: %s", err.message);
	cr_expect_eq(worker_db_set_bridge_environment(f->db, "run-b", 1, a, TEST_HANDLE,
	                                              "A0B1C2D3E4F5A6B7C8D9E0F1A2B3C4D5E6F7A8B9C0D1E2F3A4B5C6D7E8F9A0B1",
	                                              T0 + 1, &st, &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE), "upper-case hex");
	cr_expect_eq(worker_db_set_bridge_environment(f->db, "run-b", 1, a, TEST_HANDLE, "abc",
	                                              T0 + 1, &st, &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE), "short");
	cr_assert_not(bridge_lookup(f->db, a, T0 + 1).found, "a refused record wrote nothing");
	cr_assert_eq(worker_db_set_bridge_environment(f->db, "run-b", 1, a, TEST_HANDLE, HASH_A,
	                                              T0 + 1, &st, &err),
	             0, "%s", err.message);
	assert_state(st, WORKER_DB_LEASE_CURRENT);
	assert_state(set_env(f->db, "run-n", 1, b, T0 + 1), WORKER_DB_LEASE_CURRENT);

	worker_db_bridge_result l = bridge_lookup(f->db, a, T0 + 2);
	cr_assert(l.found);
	cr_expect_str_eq(l.run_id, "run-b");
	cr_expect_str_eq(l.tenant_id, "tenant-a");
	cr_expect_eq(l.epoch, 1);
	assert_state(l.state, WORKER_DB_LEASE_CURRENT);
	cr_assert(l.has_token);
	cr_expect_str_eq(l.token_sha256, HASH_A);
	l = bridge_lookup(f->db, b, T0 + 2);
	cr_assert(l.found);
	cr_expect_not(l.has_token, "a sandbox of a claim without a bridge has no token");

	/* The claim's end, each way, is the lookup's state. */
	assert_state(bridge_lookup(f->db, a, T0 + 60000).state, WORKER_DB_LEASE_EXPIRED);
	assert_outcome(claim_bridge(f->db, "run-b", 1, true, T0 + 30000), WORKER_DB_CLAIM_RENEWED);
	assert_state(bridge_lookup(f->db, a, T0 + 60000).state, WORKER_DB_LEASE_CURRENT);
	assert_outcome(claim_bridge(f->db, "run-b", 2, true, T0 + 30001), WORKER_DB_CLAIM_FENCED);
	assert_state(bridge_lookup(f->db, a, T0 + 30002).state, WORKER_DB_LEASE_OTHER_EPOCH);
	release(f->db, "run-n", "tenant-a", 1, T0 + 3);
	assert_state(bridge_lookup(f->db, b, T0 + 4).state, WORKER_DB_LEASE_RELEASED);
	cr_assert(clear_env(f->db, "run-b", 1, a));
	cr_assert_not(bridge_lookup(f->db, a, T0 + 30003).found, "cleared");
	cr_expect_eq(worker_db_bridge_lookup(f->db, "env_XYZ", T0, &l, &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE));
}

CONTRACT(a_version_2_database_migrates_to_claims_without_a_bridge)
{
	f->db = fx_open(f);
	worker_db_free(f->db);
	f->db = NULL;
	/* Back to version 2's shape, with a claim and its sandbox in it. */
	fx_raw(f, "DROP TABLE airlock_artifact_store");
	fx_raw(f, "DROP TABLE airlock_artifacts");
	fx_raw(f, "DROP TABLE airlock_artifact_tenants");
	fx_raw(f, "ALTER TABLE airlock_sandboxes DROP COLUMN bridge_token_sha256");
	fx_raw(f, "ALTER TABLE airlock_leases DROP COLUMN bridge");
	fx_raw(f, "UPDATE airlock_schema SET version = 2");
	fx_raw(f, "INSERT INTO airlock_leases (run_id, tenant_id, epoch, expires_at_ms)"
	          " VALUES ('run-old', 'tenant-a', 4, 1700000060000)");
	fx_raw(f, "INSERT INTO airlock_sandboxes (environment_id, run_id, epoch, handle)"
	          " VALUES ('env_0123456789abcdef0123456789abcdef', 'run-old', 4, 'aA==')");
	f->db = fx_open(f);
	int64_t v = -1;
	cr_assert_eq(worker_db_schema_version(f->db, &v, NULL), 0);
	cr_assert_eq(v, worker_db_schema_current());
	worker_db_check_result c = check(f->db, "run-old", "tenant-a", 4, T0);
	assert_state(c.state, WORKER_DB_LEASE_CURRENT);
	cr_assert_not(c.bridge);
	cr_assert(c.has_environment);
	worker_db_bridge_result l = bridge_lookup(f->db, "env_0123456789abcdef0123456789abcdef", T0);
	cr_assert(l.found);
	cr_assert_not(l.has_token);
	assert_outcome(claim(f->db, "run-old", "tenant-a", 4, 60, T0 + 1), WORKER_DB_CLAIM_RENEWED);
}

/* ---- artifacts ------------------------------------------------------------------ */

#define DAY_MS INT64_C(86400000)

/* A row as a put writes it: pending, 30 days, the key the store derives
 * (written out here: the database only keeps it). */
static worker_db_artifact art(const char *tenant, const char *run, int64_t size, int64_t now)
{
	worker_db_artifact a = { .origin = AIRLOCK_ORIGIN_SANDBOX_EXPORT,
		                 .trust = AIRLOCK_TRUST_EXTERNAL_UNTRUSTED, .size_bytes = size,
		                 .created_at_ms = now, .has_expires = true,
		                 .expires_at_ms = now + 30 * DAY_MS };
	cr_assert_eq(airlock_uuidv7_at(now, a.artifact_id, NULL), 0);
	snprintf(a.tenant_id, sizeof(a.tenant_id), "%s", tenant);
	if (run) {
		a.has_run = true;
		snprintf(a.run_id, sizeof(a.run_id), "%s", run);
	}
	static unsigned char name[] = "../../etc/passwd";
	a.filename = name;
	a.filename_len = sizeof(name) - 1;
	snprintf(a.media_type, sizeof(a.media_type), "text/plain");
	memset(a.sha256, 'a', 64);
	snprintf(a.storage_key, sizeof(a.storage_key), "%s/%.2s/%s", tenant, a.artifact_id,
	         a.artifact_id);
	return a;
}

/* A cap no test's rows reach. */
#define ROOMY (INT64_C(1) << 30)

static bool insert(worker_db *db, const worker_db_artifact *a, int64_t cap)
{
	worker_db_artifact_insert_result res;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_artifact_insert(db, a, cap, &res, &err), 0, "%s", err.message);
	return res.inserted;
}

static void commit_art(worker_db *db, const char *id)
{
	bool found = false;
	cr_assert_eq(worker_db_artifact_commit(db, id, &found, NULL), 0);
	cr_assert(found);
}

static bool get_art(worker_db *db, const char *id, worker_db_artifact *got)
{
	bool found = false;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_artifact_get(db, id, got, &found, &err), 0, "%s", err.message);
	return found;
}

static int64_t tenant_bytes(worker_db *db, const char *tenant)
{
	int64_t n = -1;
	cr_assert_eq(worker_db_artifact_tenant_bytes(db, tenant, &n, NULL), 0);
	return n;
}

CONTRACT(an_artifact_row_keeps_every_field_and_its_filename_bytes)
{
	f->db = fx_open(f);
	worker_db_artifact a = art("tenant-a", "run-1", 12345, T0);
	/* Bytes no TEXT column holds as they are: a NUL, invalid UTF-8, a
	 * control byte, a slash; and 10,000 of them. */
	static unsigned char name[10000];
	for (size_t i = 0; i < sizeof(name); i++)
		name[i] = (unsigned char)(i * 7);
	a.filename = name;
	a.filename_len = sizeof(name);
	a.origin = AIRLOCK_ORIGIN_UPLOAD;
	a.has_expires = false;
	cr_assert(insert(f->db, &a, 1 << 20));
	worker_db_artifact got;
	cr_assert(get_art(f->db, a.artifact_id, &got));
	cr_assert_not(got.committed, "a row is pending until its object is committed");
	cr_assert_str_eq(got.tenant_id, "tenant-a");
	cr_assert(got.has_run);
	cr_assert_str_eq(got.run_id, "run-1");
	cr_assert_eq(got.origin, AIRLOCK_ORIGIN_UPLOAD);
	cr_assert_eq(got.trust, AIRLOCK_TRUST_EXTERNAL_UNTRUSTED);
	cr_assert_eq(got.filename_len, sizeof(name));
	cr_assert_eq(memcmp(got.filename, name, sizeof(name)), 0);
	cr_assert_str_eq(got.media_type, "text/plain");
	cr_assert_eq(got.size_bytes, 12345);
	cr_assert_str_eq(got.sha256, a.sha256);
	cr_assert_eq(got.created_at_ms, T0);
	cr_assert_not(got.has_expires);
	cr_assert_str_eq(got.storage_key, a.storage_key);
	worker_db_artifact_clear(&got);
	commit_art(f->db, a.artifact_id);
	cr_assert(get_art(f->db, a.artifact_id, &got));
	cr_assert(got.committed);
	worker_db_artifact_clear(&got);
	/* An unknown id: not found, no error. */
	char other[AIRLOCK_UUID_STR_LEN + 1];
	cr_assert_eq(airlock_uuidv7_at(T0, other, NULL), 0);
	cr_assert_not(get_art(f->db, other, &got));
	/* The same id twice is refused and the first row stands. */
	worker_db_artifact_insert_result res;
	cr_assert_lt(worker_db_artifact_insert(f->db, &a, 1 << 20, &res, NULL), 0);
	/* Charged: 12,345 bytes in 4 KiB blocks, one block more, the name twice. */
	cr_assert_eq(tenant_bytes(f->db, "tenant-a"), 4 * 4096 + 4096 + 2 * 10000);
}

static int64_t charge(const worker_db_artifact *a)
{
	return worker_db_artifact_charge(a->size_bytes, a->filename_len);
}

CONTRACT(a_tenants_cap_refuses_a_put_past_it_and_deletes_give_bytes_back)
{
	f->db = fx_open(f);
	worker_db_artifact a = art("tenant-a", "run-1", 9000, T0);
	worker_db_artifact b = art("tenant-a", "run-1", 5000, T0 + 1);
	worker_db_artifact c = art("tenant-b", "run-2", 5000, T0 + 2);
	worker_db_artifact d = art("tenant-a", NULL, 5000, T0 + 3);
	const int64_t cap = charge(&b) + charge(&d);
	cr_assert_gt(charge(&a), 9000, "an artifact is charged more than its bytes");
	cr_assert_gt(charge(&a) + charge(&b), cap);
	cr_assert(insert(f->db, &a, cap));
	worker_db_artifact_insert_result res;
	cr_assert_eq(worker_db_artifact_insert(f->db, &b, cap, &res, NULL), 0);
	cr_assert_not(res.inserted);
	cr_assert_eq(res.tenant_bytes, charge(&a));
	worker_db_artifact got;
	cr_assert_not(get_art(f->db, b.artifact_id, &got), "a refused put writes no row");
	/* Another tenant has its own bytes. */
	cr_assert(insert(f->db, &c, cap));
	cr_assert_eq(tenant_bytes(f->db, "tenant-a"), charge(&a));
	cr_assert_eq(tenant_bytes(f->db, "tenant-b"), charge(&c));
	bool deleted = false;
	cr_assert_eq(worker_db_artifact_delete(f->db, a.artifact_id, &deleted, NULL), 0);
	cr_assert(deleted);
	cr_assert_eq(worker_db_artifact_delete(f->db, a.artifact_id, &deleted, NULL), 0);
	cr_assert_not(deleted, "a delete is idempotent");
	cr_assert_eq(tenant_bytes(f->db, "tenant-a"), 0, "a delete gives back what was charged");
	cr_assert(insert(f->db, &b, cap));
	/* Exactly at the cap is within it. */
	cr_assert(insert(f->db, &d, cap));
	cr_assert_eq(tenant_bytes(f->db, "tenant-a"), cap);
}

/* An empty artifact is not free: without a charge of its own, a tenant
 * could fill the database and the store's inodes under a cap that read
 * zero. */
CONTRACT(empty_artifacts_are_charged_and_the_cap_bounds_their_number)
{
	f->db = fx_open(f);
	worker_db_artifact e = art("t", "r", 0, T0);
	const int64_t one = charge(&e);
	cr_assert_geq(one, AIRLOCK_ARTIFACT_CHARGE_BLOCK);
	int inserted = 0;
	for (int i = 0; i < 20; i++) {
		worker_db_artifact x = art("t", "r", 0, T0 + i);
		worker_db_artifact_insert_result res;
		cr_assert_eq(worker_db_artifact_insert(f->db, &x, 10 * one, &res, NULL), 0);
		inserted += res.inserted;
	}
	cr_assert_eq(inserted, 10, "a cap of ten empty artifacts' charge holds ten");
	cr_assert_eq(tenant_bytes(f->db, "t"), 10 * one);
}

CONTRACT(the_sweeper_is_due_expired_rows_and_stale_pending_ones_only)
{
	f->db = fx_open(f);
	worker_db_artifact live = art("t", "r", 1, T0);
	worker_db_artifact expired = art("t", "r", 1, T0);
	expired.expires_at_ms = T0 + 10;
	worker_db_artifact forever = art("t", "r", 1, T0);
	forever.has_expires = false;
	worker_db_artifact pending_old = art("t", "r", 1, T0);
	worker_db_artifact pending_new = art("t", "r", 1, T0 + 5000);
	cr_assert(insert(f->db, &live, ROOMY));
	cr_assert(insert(f->db, &expired, ROOMY));
	cr_assert(insert(f->db, &forever, ROOMY));
	cr_assert(insert(f->db, &pending_old, ROOMY));
	cr_assert(insert(f->db, &pending_new, ROOMY));
	commit_art(f->db, live.artifact_id);
	commit_art(f->db, expired.artifact_id);
	commit_art(f->db, forever.artifact_id);
	worker_db_artifact_key due[8];
	size_t n = 0;
	cr_assert_eq(worker_db_artifact_due(f->db, T0 + 10, T0 + 1000, due, 8, &n, NULL), 0);
	cr_assert_eq(n, 2);
	bool saw_expired = false, saw_pending = false;
	for (size_t i = 0; i < n; i++) {
		cr_assert_str_eq(due[i].tenant_id, "t");
		saw_expired |= strcmp(due[i].artifact_id, expired.artifact_id) == 0;
		saw_pending |= strcmp(due[i].artifact_id, pending_old.artifact_id) == 0;
	}
	cr_assert(saw_expired && saw_pending);
	/* The sweeper took the pending row: its put's commit finds nothing
	 * and removes its own object. */
	bool deleted = false, found = true;
	cr_assert_eq(worker_db_artifact_delete(f->db, pending_old.artifact_id, &deleted, NULL), 0);
	cr_assert_eq(worker_db_artifact_commit(f->db, pending_old.artifact_id, &found, NULL), 0);
	cr_assert_not(found);
	/* The batch is bounded. */
	cr_assert_eq(worker_db_artifact_due(f->db, T0 + 10, T0 + 10000, due, 1, &n, NULL), 0);
	cr_assert_eq(n, 1);
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_artifact_due(f->db, T0, T0, due, 0, &n, &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE));
}

CONTRACT(a_listing_is_one_tenants_visible_rows_in_pages)
{
	f->db = fx_open(f);
	worker_db_artifact rows[5];
	for (int i = 0; i < 5; i++) {
		rows[i] = art(i == 4 ? "other" : "t", i < 2 ? "run-a" : "run-b", 1, T0 + i);
		cr_assert(insert(f->db, &rows[i], ROOMY));
		if (i != 3) /* row 3 stays pending: not listed */
			commit_art(f->db, rows[i].artifact_id);
	}
	worker_db_artifact out[3];
	size_t n = 0;
	airlock_error err = { 0 };
	worker_db_artifact_query q = { .tenant_id = "t", .now_ms = T0 + 10, .max = 3 };
	cr_assert_eq(worker_db_artifact_list(f->db, &q, out, &n, &err), 0, "%s", err.message);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(out[0].artifact_id, rows[0].artifact_id);
	cr_assert_str_eq(out[2].artifact_id, rows[2].artifact_id);
	for (size_t i = 0; i < n; i++)
		worker_db_artifact_clear(&out[i]);
	q.after_id = rows[2].artifact_id;
	cr_assert_eq(worker_db_artifact_list(f->db, &q, out, &n, &err), 0, "%s", err.message);
	cr_assert_eq(n, 0, "pending and other tenants' rows are not listed");
	q = (worker_db_artifact_query){ .tenant_id = "t", .run_id = "run-a", .now_ms = T0 + 10,
		                        .max = 3 };
	cr_assert_eq(worker_db_artifact_list(f->db, &q, out, &n, &err), 0, "%s", err.message);
	cr_assert_eq(n, 2);
	for (size_t i = 0; i < n; i++)
		worker_db_artifact_clear(&out[i]);
	/* Expired rows are not listed. */
	q.now_ms = T0 + 31 * DAY_MS;
	cr_assert_eq(worker_db_artifact_list(f->db, &q, out, &n, &err), 0, "%s", err.message);
	cr_assert_eq(n, 0);
}

CONTRACT(an_upload_is_claimed_once_by_a_run_of_its_tenant_and_then_never_expires)
{
	f->db = fx_open(f);
	worker_db_artifact up = art("t", NULL, 1, T0);
	up.origin = AIRLOCK_ORIGIN_UPLOAD;
	up.expires_at_ms = T0 + DAY_MS;
	cr_assert(insert(f->db, &up, ROOMY));
	bool done = true;
	/* Pending: not yet an artifact. */
	cr_assert_eq(worker_db_artifact_attach(f->db, up.artifact_id, "t", "run-1", T0, &done, NULL), 0);
	cr_assert_not(done);
	commit_art(f->db, up.artifact_id);
	cr_assert_eq(worker_db_artifact_attach(f->db, up.artifact_id, "u", "run-1", T0, &done, NULL), 0);
	cr_assert_not(done, "another tenant's run cannot claim it");
	cr_assert_eq(worker_db_artifact_attach(f->db, up.artifact_id, "t", "run-1", T0, &done, NULL), 0);
	cr_assert(done);
	cr_assert_eq(worker_db_artifact_attach(f->db, up.artifact_id, "t", "run-2", T0, &done, NULL), 0);
	cr_assert_not(done, "a claimed upload stays with its run");
	worker_db_artifact got;
	cr_assert(get_art(f->db, up.artifact_id, &got));
	cr_assert_str_eq(got.run_id, "run-1");
	cr_assert_not(got.has_expires);
	worker_db_artifact_clear(&got);
	/* An unclaimed upload past its 24 hours cannot be claimed. */
	worker_db_artifact late = art("t", NULL, 1, T0);
	late.origin = AIRLOCK_ORIGIN_UPLOAD;
	late.expires_at_ms = T0 + DAY_MS;
	cr_assert(insert(f->db, &late, ROOMY));
	commit_art(f->db, late.artifact_id);
	cr_assert_eq(worker_db_artifact_attach(f->db, late.artifact_id, "t", "run-1", T0 + DAY_MS,
	                                       &done, NULL), 0);
	cr_assert_not(done);
	/* A run's own export is kept by that run, never by another. */
	worker_db_artifact ex = art("t", "run-1", 1, T0);
	cr_assert(insert(f->db, &ex, ROOMY));
	commit_art(f->db, ex.artifact_id);
	cr_assert_eq(worker_db_artifact_attach(f->db, ex.artifact_id, "t", "run-2", T0, &done, NULL), 0);
	cr_assert_not(done);
	cr_assert_eq(worker_db_artifact_attach(f->db, ex.artifact_id, "t", "run-1", T0, &done, NULL), 0);
	cr_assert(done);
	/* Tool output is not kept past its expiry by an attach. */
	worker_db_artifact out = art("t", "run-1", 1, T0);
	out.origin = AIRLOCK_ORIGIN_TOOL_OUTPUT;
	cr_assert(insert(f->db, &out, ROOMY));
	commit_art(f->db, out.artifact_id);
	cr_assert_eq(worker_db_artifact_attach(f->db, out.artifact_id, "t", "run-1", T0, &done, NULL), 0);
	cr_assert_not(done);
}

CONTRACT(an_equal_artifact_of_the_run_is_found_and_nothing_else_is)
{
	f->db = fx_open(f);
	worker_db_artifact a = art("t", "run-1", 7, T0);
	cr_assert(insert(f->db, &a, ROOMY));
	worker_db_artifact got;
	bool found = true;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_artifact_same(f->db, &a, T0, &got, &found, &err), 0, "%s",
	             err.message);
	cr_assert_not(found, "a pending row is not an artifact yet");
	commit_art(f->db, a.artifact_id);
	worker_db_artifact probe = art("t", "run-1", 7, T0 + 1);
	cr_assert_eq(worker_db_artifact_same(f->db, &probe, T0 + 1, &got, &found, &err), 0, "%s",
	             err.message);
	cr_assert(found);
	cr_assert_str_eq(got.artifact_id, a.artifact_id);
	worker_db_artifact_clear(&got);
	/* Another run, size, name, or an expired one: none. */
	worker_db_artifact other = art("t", "run-2", 7, T0 + 1);
	cr_assert_eq(worker_db_artifact_same(f->db, &other, T0 + 1, &got, &found, NULL), 0);
	cr_assert_not(found);
	other = art("t", "run-1", 8, T0 + 1);
	cr_assert_eq(worker_db_artifact_same(f->db, &other, T0 + 1, &got, &found, NULL), 0);
	cr_assert_not(found);
	other = art("t", "run-1", 7, T0 + 1);
	static unsigned char name[] = "other";
	other.filename = name;
	other.filename_len = 5;
	cr_assert_eq(worker_db_artifact_same(f->db, &other, T0 + 1, &got, &found, NULL), 0);
	cr_assert_not(found);
	cr_assert_eq(worker_db_artifact_same(f->db, &probe, T0 + 31 * DAY_MS, &got, &found, NULL),
	             0);
	cr_assert_not(found);
}

/* The sweeper's removal of a put's leftover takes a pending row only: a
 * put that committed since the sweeper read its batch keeps its artifact. */
CONTRACT(a_pending_delete_never_takes_a_committed_row)
{
	f->db = fx_open(f);
	worker_db_artifact a = art("t", "r", 5, T0), b = art("t", "r", 7, T0);
	cr_assert(insert(f->db, &a, ROOMY));
	cr_assert(insert(f->db, &b, ROOMY));
	commit_art(f->db, a.artifact_id);
	bool deleted = true;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_artifact_delete_due(f->db, a.artifact_id, T0, T0 + 1, &deleted, &err),
	             0, "%s", err.message);
	cr_assert_not(deleted, "a committed row stays");
	cr_assert_eq(worker_db_artifact_delete_due(f->db, b.artifact_id, T0, T0 + 1, &deleted, &err),
	             0);
	cr_assert(deleted);
	cr_assert_eq(tenant_bytes(f->db, "t"), charge(&a), "the pending row's bytes were given back");
	worker_db_artifact got;
	cr_assert(get_art(f->db, a.artifact_id, &got));
	worker_db_artifact_clear(&got);
}

/* The sweeper's removal of an expired artifact takes it only while it is
 * still expired: a run that attached it (expiry cleared) after the sweeper
 * read its batch, with a now behind the sweeper's (a call whose clock was
 * read first, another worker's clock), keeps it. */
CONTRACT(an_expired_delete_never_takes_an_attached_row)
{
	f->db = fx_open(f);
	worker_db_artifact a = art("t", NULL, 5, T0);
	a.origin = AIRLOCK_ORIGIN_UPLOAD;
	a.expires_at_ms = T0 + 1000;
	cr_assert(insert(f->db, &a, ROOMY));
	commit_art(f->db, a.artifact_id);
	airlock_error err = { 0 };
	worker_db_artifact_key due[4];
	size_t n = 0;
	cr_assert_eq(worker_db_artifact_due(f->db, T0 + 2000, T0, due, 4, &n, &err), 0, "%s",
	             err.message);
	cr_assert_eq(n, 1, "the sweeper's batch holds the expired upload");
	bool done = false;
	cr_assert_eq(worker_db_artifact_attach(f->db, a.artifact_id, "t", "r", T0 + 500, &done, &err),
	             0, "%s", err.message);
	cr_assert(done, "a run claims the upload before it expires on its clock");
	bool deleted = true;
	cr_assert_eq(worker_db_artifact_delete_due(f->db, a.artifact_id, T0 + 2000, T0, &deleted,
	                                           &err),
	             0, "%s", err.message);
	cr_assert_not(deleted, "the attached artifact stays");
	worker_db_artifact got;
	cr_assert(get_art(f->db, a.artifact_id, &got));
	worker_db_artifact_clear(&got);
}

/* The first binding stays: a second store's identity and database
 * identity are answered with the first ones, for the caller to refuse. */
CONTRACT(the_first_artifact_store_bound_stays_bound)
{
	f->db = fx_open(f);
	char a[AIRLOCK_UUID_STR_LEN + 1], b[AIRLOCK_UUID_STR_LEN + 1], da[AIRLOCK_UUID_STR_LEN + 1],
		db[AIRLOCK_UUID_STR_LEN + 1], store[AIRLOCK_UUID_STR_LEN + 1],
		database[AIRLOCK_UUID_STR_LEN + 1];
	cr_assert_eq(airlock_uuidv7_at(T0, a, NULL), 0);
	cr_assert_eq(airlock_uuidv7_at(T0 + 1, b, NULL), 0);
	cr_assert_eq(airlock_uuidv7_at(T0 + 2, da, NULL), 0);
	cr_assert_eq(airlock_uuidv7_at(T0 + 3, db, NULL), 0);
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_artifact_store_bind(f->db, a, da, store, database, &err), 0, "%s",
	             err.message);
	cr_assert_str_eq(store, a);
	cr_assert_str_eq(database, da);
	cr_assert_eq(worker_db_artifact_store_bind(f->db, b, db, store, database, &err), 0, "%s",
	             err.message);
	cr_assert_str_eq(store, a, "the first binding stands");
	cr_assert_str_eq(database, da, "and so does the database's identity");
	cr_assert_eq(worker_db_artifact_store_bind(f->db, "not-a-uuid", da, store, database, &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE));
}

CONTRACT(a_visible_get_shows_only_a_committed_unexpired_row_of_the_asker)
{
	f->db = fx_open(f);
	worker_db_artifact a = art("t", "r", 5, T0), pending = art("t", "r", 5, T0 + 1);
	cr_assert(insert(f->db, &a, ROOMY));
	cr_assert(insert(f->db, &pending, ROOMY));
	commit_art(f->db, a.artifact_id);
	worker_db_artifact got;
	bool found = false;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_artifact_get_visible(f->db, a.artifact_id, "t", T0, &got, &found, &err),
	             0, "%s", err.message);
	cr_assert(found);
	cr_assert_str_eq(got.tenant_id, "t");
	worker_db_artifact_clear(&got);
	cr_assert_eq(worker_db_artifact_get_visible(f->db, a.artifact_id, NULL, T0, &got, &found, &err),
	             0);
	cr_assert(found, "a token of every tenant sees it");
	worker_db_artifact_clear(&got);
	cr_assert_eq(worker_db_artifact_get_visible(f->db, a.artifact_id, "other", T0, &got, &found,
	                                            &err),
	             0);
	cr_assert_not(found, "another tenant's row is no row");
	cr_assert_eq(worker_db_artifact_get_visible(f->db, a.artifact_id, "t", a.expires_at_ms, &got,
	                                            &found, &err),
	             0);
	cr_assert_not(found, "an expired row is no row");
	cr_assert_eq(worker_db_artifact_get_visible(f->db, pending.artifact_id, "t", T0, &got, &found,
	                                            &err),
	             0);
	cr_assert_not(found, "a pending row is no row");
	cr_assert_eq(worker_db_artifact_get_visible(f->db, a.artifact_id, "a/b", T0, &got, &found,
	                                            &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE));
}

/* Migration 6: a counter written when rows were charged by size alone is
 * reckoned again as the charge counts, so deleting those rows gives back
 * what they are charged and nothing of newer rows'. */
CONTRACT(migration_6_reckons_each_tenants_charge_again)
{
	f->db = fx_open(f);
	worker_db_artifact a = art("t", "r", 0, T0), b = art("t", "r", 5000, T0 + 1),
			   c = art("u", "r", 1, T0 + 2);
	cr_assert(insert(f->db, &a, ROOMY));
	cr_assert(insert(f->db, &b, ROOMY));
	cr_assert(insert(f->db, &c, ROOMY));
	worker_db_free(f->db);
	f->db = NULL;
	/* What a version-5 worker left: the sizes alone. */
	fx_raw(f, "UPDATE airlock_artifact_tenants SET bytes = 5000 WHERE tenant_id = 't'");
	fx_raw(f, "UPDATE airlock_artifact_tenants SET bytes = 1 WHERE tenant_id = 'u'");
	fx_raw(f, "UPDATE airlock_schema SET version = 5");
	f->db = fx_open(f);
	cr_assert_eq(tenant_bytes(f->db, "t"), charge(&a) + charge(&b));
	cr_assert_eq(tenant_bytes(f->db, "u"), charge(&c));
	bool deleted = false;
	cr_assert_eq(worker_db_artifact_delete(f->db, a.artifact_id, &deleted, NULL), 0);
	cr_assert_eq(tenant_bytes(f->db, "t"), charge(&b), "the delete gave back its own charge");
}

CONTRACT(artifact_arguments_are_checked_before_the_database)
{
	f->db = fx_open(f);
	airlock_error err = { 0 };
	worker_db_artifact_insert_result res;
	worker_db_artifact a = art("t", "r", 1, T0);
	snprintf(a.media_type, sizeof(a.media_type), "text/plain; charset=utf-8");
	cr_assert_eq(worker_db_artifact_insert(f->db, &a, ROOMY, &res, &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE));
	cr_assert(strstr(err.message, "media_type"), "%s", err.message);
	a = art("t", "r", 1, T0);
	a.filename_len = AIRLOCK_ARTIFACT_FILENAME_MAX + 1;
	cr_assert_eq(worker_db_artifact_insert(f->db, &a, ROOMY, &res, &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE));
	a = art("t/..", "r", 1, T0);
	cr_assert_eq(worker_db_artifact_insert(f->db, &a, ROOMY, &res, &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE));
	a = art("t", "r", -1, T0);
	cr_assert_eq(worker_db_artifact_insert(f->db, &a, ROOMY, &res, &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE));
	worker_db_artifact got;
	bool found;
	/* Not a UUIDv7: refused, never looked up. */
	cr_assert_eq(worker_db_artifact_get(f->db, "0192d3f5-8e1a-4abc-8def-0123456789ab", &got,
	                                    &found, &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE));
	cr_assert_eq(worker_db_artifact_get(f->db, "x' OR '1'='1", &got, &found, &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE));
}

CONTRACT(a_fence_hands_back_the_older_claims_sandbox_and_stops_it_being_recorded)
{
	f->db = fx_open(f);
	char a[AIRLOCK_ENVIRONMENT_ID_MAX], b[AIRLOCK_ENVIRONMENT_ID_MAX];
	new_env(a);
	new_env(b);
	claim(f->db, "run-2", "tenant-a", 1, 60, T0);
	assert_state(set_env(f->db, "run-2", 1, a, T0 + 1), WORKER_DB_LEASE_CURRENT);
	assert_state(set_env(f->db, "run-2", 1, a, T0 + 2), WORKER_DB_LEASE_CURRENT);
	/* A claim has one sandbox. */
	worker_db_lease_state st;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_set_environment(f->db, "run-2", 1, b, TEST_HANDLE, T0 + 3, &st, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	worker_db_check_result c = check(f->db, "run-2", "tenant-a", 1, T0 + 4);
	cr_assert(c.has_environment);
	cr_assert_str_eq(c.environment_id, a);

	worker_db_claim_result r = claim(f->db, "run-2", "tenant-a", 2, 60, T0 + 5);
	assert_outcome(r, WORKER_DB_CLAIM_FENCED);
	cr_assert_eq(r.older_count, 1);
	cr_assert_str_eq(r.older[0].environment_id, a);
	cr_assert_str_eq(r.older[0].run_id, "run-2");
	cr_assert_eq(r.older[0].epoch, 1);
	/* The fenced holder's lazy provision cannot record a sandbox now. */
	assert_state(set_env(f->db, "run-2", 1, b, T0 + 6), WORKER_DB_LEASE_OTHER_EPOCH);
	c = check(f->db, "run-2", "tenant-a", 2, T0 + 6);
	assert_state(c.state, WORKER_DB_LEASE_CURRENT);
	cr_assert_not(c.has_environment);

	/* Until it is cleared, the next fence hands it back again. */
	r = claim(f->db, "run-2", "tenant-a", 3, 60, T0 + 7);
	cr_assert_eq(r.older_count, 1);
	cr_assert(clear_env(f->db, "run-2", 1, a));
	cr_assert_not(clear_env(f->db, "run-2", 1, a), "a clear is idempotent");
	r = claim(f->db, "run-2", "tenant-a", 4, 60, T0 + 8);
	cr_assert_eq(r.older_count, 0);
}

CONTRACT(a_lease_expires_by_the_callers_clock)
{
	f->db = fx_open(f);
	char a[AIRLOCK_ENVIRONMENT_ID_MAX], b[AIRLOCK_ENVIRONMENT_ID_MAX];
	new_env(a);
	new_env(b);
	claim(f->db, "run-3", "tenant-a", 7, 10, T0);
	assert_state(set_env(f->db, "run-3", 7, a, T0 + 1000), WORKER_DB_LEASE_CURRENT);
	assert_state(check(f->db, "run-3", "tenant-a", 7, T0 + 9999).state,
	             WORKER_DB_LEASE_CURRENT);
	assert_state(check(f->db, "run-3", "tenant-a", 7, T0 + 10000).state,
	             WORKER_DB_LEASE_EXPIRED);
	/* Lost: not renewed, and no sandbox recorded under it. */
	worker_db_claim_result r = claim(f->db, "run-3", "tenant-a", 7, 10, T0 + 10000);
	assert_outcome(r, WORKER_DB_CLAIM_REFUSED);
	assert_state(r.refusal, WORKER_DB_LEASE_EXPIRED);
	clear_env(f->db, "run-3", 7, a);
	assert_state(set_env(f->db, "run-3", 7, b, T0 + 10001), WORKER_DB_LEASE_EXPIRED);
	set_env(f->db, "run-3", 7, a, T0 + 9000); /* (the clock is the caller's) */
	/* A higher epoch after the expiry is a new claim, not a fence, and
	 * still hands back the lost claim's sandbox. */
	r = claim(f->db, "run-3", "tenant-a", 8, 10, T0 + 20000);
	assert_outcome(r, WORKER_DB_CLAIM_NEW);
	cr_assert_eq(r.older_count, 1);
	cr_assert_str_eq(r.older[0].environment_id, a);
}

CONTRACT(a_release_ends_the_claim_and_hands_back_its_sandbox)
{
	f->db = fx_open(f);
	char a[AIRLOCK_ENVIRONMENT_ID_MAX];
	new_env(a);
	claim(f->db, "run-4", "tenant-a", 3, 60, T0);
	set_env(f->db, "run-4", 3, a, T0);
	worker_db_release_result r = release(f->db, "run-4", "tenant-a", 2, T0 + 1);
	assert_state(r.state, WORKER_DB_LEASE_OTHER_EPOCH);
	cr_assert_not(r.has_environment, "nothing for a wrong epoch");
	r = release(f->db, "run-4", "tenant-b", 3, T0 + 1);
	assert_state(r.state, WORKER_DB_LEASE_OTHER_TENANT);
	cr_assert_not(r.has_environment);
	assert_state(check(f->db, "run-4", "tenant-a", 3, T0 + 2).state, WORKER_DB_LEASE_CURRENT);

	r = release(f->db, "run-4", "tenant-a", 3, T0 + 3);
	assert_state(r.state, WORKER_DB_LEASE_CURRENT);
	cr_assert(r.has_environment);
	cr_assert_str_eq(r.environment_id, a);
	assert_state(check(f->db, "run-4", "tenant-a", 3, T0 + 4).state, WORKER_DB_LEASE_RELEASED);
	/* A retried release (the first answer lost) still names the sandbox
	 * until its destroy is recorded. */
	r = release(f->db, "run-4", "tenant-a", 3, T0 + 5);
	cr_assert(r.has_environment);
	cr_assert(clear_env(f->db, "run-4", 3, a));
	r = release(f->db, "run-4", "tenant-a", 3, T0 + 6);
	assert_state(r.state, WORKER_DB_LEASE_CURRENT);
	cr_assert_not(r.has_environment);
	worker_db_claim_result c = claim(f->db, "run-4", "tenant-a", 3, 60, T0 + 7);
	assert_outcome(c, WORKER_DB_CLAIM_REFUSED);
	assert_state(c.refusal, WORKER_DB_LEASE_RELEASED);
	assert_state(release(f->db, "run-none", "tenant-a", 1, T0).state, WORKER_DB_LEASE_NONE);
}

CONTRACT(stale_answers_the_reaper_over_a_mix)
{
	f->db = fx_open(f);
	worker_db_sandbox q[7];
	memset(q, 0, sizeof(q));
	for (size_t i = 0; i < 7; i++)
		new_env(q[i].environment_id);
	/* 0: the current claim's sandbox; 1: the same run, a fenced epoch. */
	claim(f->db, "live", "t", 1, 60, T0);
	claim(f->db, "live", "t", 2, 60, T0);
	snprintf(q[0].run_id, sizeof(q[0].run_id), "live");
	q[0].epoch = 2;
	snprintf(q[1].run_id, sizeof(q[1].run_id), "live");
	q[1].epoch = 1;
	/* 2: expired; 3: released; 4: unknown run; 5: an epoch never granted;
	 * 6: current, with a sandbox the database never recorded (being
	 * provisioned right now): not stale. */
	claim(f->db, "gone", "t", 1, 1, T0);
	snprintf(q[2].run_id, sizeof(q[2].run_id), "gone");
	q[2].epoch = 1;
	claim(f->db, "given-back", "t", 4, 60, T0);
	release(f->db, "given-back", "t", 4, T0);
	snprintf(q[3].run_id, sizeof(q[3].run_id), "given-back");
	q[3].epoch = 4;
	snprintf(q[4].run_id, sizeof(q[4].run_id), "never");
	q[4].epoch = 1;
	snprintf(q[5].run_id, sizeof(q[5].run_id), "live");
	q[5].epoch = 3;
	snprintf(q[6].run_id, sizeof(q[6].run_id), "live");
	q[6].epoch = 2;
	bool st[7];
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_stale(f->db, q, 7, T0 + 5000, st, &err), 0, "%s", err.message);
	bool want[7] = { false, true, true, true, true, true, false };
	for (size_t i = 0; i < 7; i++)
		cr_assert_eq(st[i], want[i], "entry %zu: stale %d, want %d", i, st[i], want[i]);
	/* Later, the live lease expired too. */
	cr_assert_eq(worker_db_stale(f->db, q, 1, T0 + 60000, st, &err), 0);
	cr_assert(st[0]);
	cr_assert_eq(worker_db_stale(f->db, NULL, 0, T0, NULL, &err), 0, "an empty question");
}

CONTRACT(a_restarted_worker_finds_the_sandboxes_of_ended_claims)
{
	f->db = fx_open(f);
	char a[AIRLOCK_ENVIRONMENT_ID_MAX], b[AIRLOCK_ENVIRONMENT_ID_MAX],
		c[AIRLOCK_ENVIRONMENT_ID_MAX], d[AIRLOCK_ENVIRONMENT_ID_MAX];
	new_env(a);
	new_env(b);
	new_env(c);
	new_env(d);
	claim(f->db, "r-exp", "t", 1, 10, T0); /* expires at T0 + 10 s */
	set_env(f->db, "r-exp", 1, a, T0);
	claim(f->db, "r-rel", "t", 2, 600, T0);
	set_env(f->db, "r-rel", 2, b, T0);
	release(f->db, "r-rel", "t", 2, T0 + 1);
	claim(f->db, "r-live", "t", 3, 600, T0);
	set_env(f->db, "r-live", 3, c, T0);
	claim(f->db, "r-fenced", "t", 4, 600, T0);
	set_env(f->db, "r-fenced", 4, d, T0);
	claim(f->db, "r-fenced", "t", 5, 600, T0 + 2); /* the fence's answer lost */
	/* The worker dies; another opens the same database. */
	worker_db_free(f->db);
	f->db = fx_open(f);
	worker_db_sandbox got[16];
	size_t n = 0;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_ended(f->db, T0 + 20000, got, 16, &n, &err), 0, "%s", err.message);
	cr_assert_eq(n, 3);
	bool seen_a = false, seen_b = false, seen_d = false;
	for (size_t i = 0; i < n; i++) {
		seen_a |= strcmp(got[i].environment_id, a) == 0 && got[i].epoch == 1;
		seen_b |= strcmp(got[i].environment_id, b) == 0 && got[i].epoch == 2;
		seen_d |= strcmp(got[i].environment_id, d) == 0 && got[i].epoch == 4;
		cr_assert_str_neq(got[i].environment_id, c, "the live claim's sandbox is not ended");
	}
	cr_assert(seen_a && seen_b && seen_d);
	/* Before the expiry only the released and fenced ones have ended. */
	cr_assert_eq(worker_db_ended(f->db, T0 + 5000, got, 16, &n, &err), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(worker_db_ended(f->db, T0 + 20000, got, 1, &n, &err), 0);
	cr_assert_eq(n, 1, "max bounds the answer");
	/* Each destroyed and marked done: nothing is left to find. */
	cr_assert_eq(worker_db_ended(f->db, T0 + 20000, got, 16, &n, &err), 0);
	for (size_t i = 0; i < n; i++)
		cr_assert(clear_env(f->db, got[i].run_id, got[i].epoch, got[i].environment_id));
	cr_assert_eq(worker_db_ended(f->db, T0 + 20000, got, 16, &n, &err), 0);
	cr_assert_eq(n, 0);
	assert_state(check(f->db, "r-live", "t", 3, T0 + 20000).state, WORKER_DB_LEASE_CURRENT);
}

/* Two connections claim the same runs from two threads, epoch 1 and epoch
 * 2, released together by a barrier for each run (held already at epoch
 * 0, so both read the row before either writes): every claim is granted
 * or refused (never an error), and epoch 2 holds every run at the end. A
 * lower epoch that overwrote a higher one leaves a run at 1. Each grant
 * records a sandbox, which the other claim either hands back (a fence) or
 * refuses to record. */
#define RACE_RUNS 100

typedef struct racer {
	worker_db *db;
	int64_t epoch;
	pthread_barrier_t *go;
	int granted, refused, failed, older;
	char failure[AIRLOCK_ERROR_MESSAGE_MAX];
} racer;

static void *race(void *arg)
{
	racer *r = arg;
	for (int i = 0; i < RACE_RUNS; i++) {
		char run_id[32];
		snprintf(run_id, sizeof(run_id), "raced-%d", i);
		worker_db_claim_request req = { .run_id = run_id, .tenant_id = "t", .epoch = r->epoch,
			                        .ttl_seconds = 60, .now_ms = T0 };
		worker_db_claim_result res;
		airlock_error err = { 0 };
		pthread_barrier_wait(r->go);
		if (worker_db_claim(r->db, &req, &res, &err) < 0) {
			r->failed++;
			snprintf(r->failure, sizeof(r->failure), "%s", err.message);
			continue;
		}
		if (res.outcome == WORKER_DB_CLAIM_REFUSED) {
			r->refused++;
			continue;
		}
		r->granted++;
		r->older += (int)res.older_count;
		char env[AIRLOCK_ENVIRONMENT_ID_MAX];
		new_env(env);
		worker_db_lease_state st;
		if (worker_db_set_environment(r->db, run_id, r->epoch, env, TEST_HANDLE, T0, &st, &err) < 0) {
			r->failed++;
			snprintf(r->failure, sizeof(r->failure), "%s", err.message);
		}
	}
	return NULL;
}

CONTRACT(two_connections_racing_claims_keep_the_highest_epoch)
{
	f->db = fx_open(f);
	worker_db *other = fx_open(f);
	worker_db *third = fx_open(f);
	for (int i = 0; i < RACE_RUNS; i++) {
		char run_id[32];
		snprintf(run_id, sizeof(run_id), "raced-%d", i);
		claim(third, run_id, "t", 0, 60, T0);
	}
	pthread_barrier_t go;
	cr_assert_eq(pthread_barrier_init(&go, NULL, 2), 0);
	racer a = { .db = f->db, .epoch = 1, .go = &go };
	racer b = { .db = other, .epoch = 2, .go = &go };
	pthread_t ta, tb;
	cr_assert_eq(pthread_create(&ta, NULL, race, &a), 0);
	cr_assert_eq(pthread_create(&tb, NULL, race, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	pthread_barrier_destroy(&go);
	worker_db_free(other);
	cr_assert_eq(a.failed + b.failed, 0, "errors: %s %s", a.failure, b.failure);
	cr_assert_eq(b.granted, RACE_RUNS, "epoch 2 is never refused");
	cr_assert_eq(a.granted + a.refused, RACE_RUNS);
	for (int i = 0; i < RACE_RUNS; i++) {
		char run_id[32];
		snprintf(run_id, sizeof(run_id), "raced-%d", i);
		assert_state(check(third, run_id, "t", 2, T0 + 1).state, WORKER_DB_LEASE_CURRENT);
	}
	/* Each of epoch 1's grants recorded a sandbox or was fenced first;
	 * whatever it recorded, epoch 2's fence handed back or it has ended. */
	worker_db_sandbox got[AIRLOCK_WORKER_DB_ENDED_MAX];
	size_t n = 0;
	cr_assert_eq(worker_db_ended(third, T0 + 1, got, sizeof(got) / sizeof(got[0]), &n, NULL), 0);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(got[i].epoch, 1);
	cr_assert_eq((int)n, b.older, "every ended sandbox was handed back by a fence");
	worker_db_free(third);
}

CONTRACT(the_wrapper_refuses_arguments_outside_the_rules)
{
	f->db = fx_open(f);
	airlock_error err = { 0 };
	int bad = airlock_errcode(AIRLOCK_ERR_DECODE);
	worker_db_claim_result res;
	worker_db_claim_request ok = { .run_id = "r", .tenant_id = "t", .epoch = 1,
		                       .ttl_seconds = 10, .now_ms = T0 };
	worker_db_claim_request req = ok;
	req.run_id = "r 1";
	cr_assert_eq(worker_db_claim(f->db, &req, &res, &err), bad);
	req = ok;
	req.run_id = "r'; DROP TABLE airlock_leases; --";
	cr_assert_eq(worker_db_claim(f->db, &req, &res, &err), bad);
	req = ok;
	req.tenant_id = "";
	cr_assert_eq(worker_db_claim(f->db, &req, &res, &err), bad);
	req = ok;
	req.tenant_id = NULL;
	cr_assert_eq(worker_db_claim(f->db, &req, &res, &err), bad);
	req = ok;
	req.epoch = -1;
	cr_assert_eq(worker_db_claim(f->db, &req, &res, &err), bad);
	req = ok;
	req.ttl_seconds = 0;
	cr_assert_eq(worker_db_claim(f->db, &req, &res, &err), bad);
	req.ttl_seconds = WORKER_DB_TTL_SECONDS_MAX + 1;
	cr_assert_eq(worker_db_claim(f->db, &req, &res, &err), bad);
	req = ok;
	req.now_ms = -1;
	cr_assert_eq(worker_db_claim(f->db, &req, &res, &err), bad);
	req.now_ms = WORKER_DB_NOW_MAX + 1;
	cr_assert_eq(worker_db_claim(f->db, &req, &res, &err), bad);
	char long_id[AIRLOCK_ID_MAX + 2];
	memset(long_id, 'a', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = 0;
	req = ok;
	req.run_id = long_id;
	cr_assert_eq(worker_db_claim(f->db, &req, &res, &err), bad);
	worker_db_lease_state st;
	cr_assert_eq(worker_db_set_environment(f->db, "r", 1, "env_XYZ", TEST_HANDLE, T0, &st, &err), bad);
	worker_db_sandbox q = { .run_id = "r", .epoch = 1 };
	snprintf(q.environment_id, sizeof(q.environment_id), "not-an-env");
	bool stale;
	cr_assert_eq(worker_db_stale(f->db, &q, 1, T0, &stale, &err), bad);
	cr_assert_eq(worker_db_stale(f->db, &q, AIRLOCK_WORKER_DB_STALE_MAX + 1, T0, &stale, &err),
	             bad);
	size_t n;
	cr_assert_eq(worker_db_ended(f->db, T0, &q, 0, &n, &err), bad);
	/* Nothing reached the database. */
	assert_state(check(f->db, "r", "t", 1, T0).state, WORKER_DB_LEASE_NONE);
	assert_outcome(claim(f->db, "r", "t", 1, 10, T0), WORKER_DB_CLAIM_NEW);
}

#ifdef AIRLOCK_FAULT_INJECTION
/* ---- each step failed in turn (util/fault.h: db.begin, db.query, db.script,
 * db.commit) ----------------------------------------------------------------------
 * A failure anywhere in an operation leaves nothing of it in the database
 * (one transaction), the error names the point, and the same handle serves
 * the next call (no transaction left open on the connection). */

typedef int (*op_fn)(fixture *f, airlock_error *err);
typedef void (*unchanged_fn)(fixture *f, const char *fired);

static void walk(fixture *f, const char *what, op_fn op, unchanged_fn unchanged)
{
	unsigned nth;
	for (nth = 1;; nth++) {
		airlock_error err = { 0 };
		util_fault_arm(nth);
		int r = op(f, &err);
		unsigned hits = util_fault_hits();
		const char *fired = util_fault_fired();
		util_fault_arm(0);
		if (hits < nth) {
			cr_assert_eq(r, 0, "%s: no fault at check %u, yet: %s", what, nth, err.message);
			break;
		}
		cr_assert_lt(r, 0, "%s: check %u (%s) failed, yet the call succeeded", what, nth,
		             fired);
		cr_assert(strstr(err.message, fired), "%s: the error names %s: %s", what, fired,
		          err.message);
		unchanged(f, fired);
	}
	cr_assert_geq(nth, 3, "%s: only %u checks were seen", what, nth - 1);
}

static char fenv_a[AIRLOCK_ENVIRONMENT_ID_MAX], fenv_b[AIRLOCK_ENVIRONMENT_ID_MAX];

static int op_fence(fixture *f, airlock_error *err)
{
	worker_db_claim_request req = { .run_id = "run-f", .tenant_id = "t", .epoch = 2,
		                        .ttl_seconds = 60, .now_ms = T0 + 1 };
	worker_db_claim_result res;
	int r = worker_db_claim(f->db, &req, &res, err);
	if (r == 0) {
		assert_outcome(res, WORKER_DB_CLAIM_FENCED);
		cr_assert_eq(res.older_count, 1);
	}
	return r;
}

static void fence_undone(fixture *f, const char *fired)
{
	worker_db_check_result c = check(f->db, "run-f", "t", 1, T0 + 2);
	cr_assert_eq(c.state, WORKER_DB_LEASE_CURRENT, "after %s: %s", fired, state_name(c.state));
	cr_assert(c.has_environment && strcmp(c.environment_id, fenv_a) == 0, "after %s", fired);
}

static int op_set_env(fixture *f, airlock_error *err)
{
	worker_db_lease_state st;
	int r = worker_db_set_environment(f->db, "run-f", 2, fenv_b, TEST_HANDLE, T0 + 3, &st, err);
	if (r == 0)
		assert_state(st, WORKER_DB_LEASE_CURRENT);
	return r;
}

static void set_env_undone(fixture *f, const char *fired)
{
	worker_db_check_result c = check(f->db, "run-f", "t", 2, T0 + 4);
	cr_assert_eq(c.state, WORKER_DB_LEASE_CURRENT, "after %s", fired);
	cr_assert_not(c.has_environment, "after %s: a sandbox was recorded", fired);
}

static int op_release(fixture *f, airlock_error *err)
{
	worker_db_release_result res;
	int r = worker_db_release(f->db, "run-f", "t", 2, T0 + 5, &res, err);
	if (r == 0)
		cr_assert(res.has_environment && strcmp(res.environment_id, fenv_b) == 0);
	return r;
}

static void release_undone(fixture *f, const char *fired)
{
	assert_state(check(f->db, "run-f", "t", 2, T0 + 6).state, WORKER_DB_LEASE_CURRENT);
}

static int op_open(fixture *f, airlock_error *err)
{
	worker_db *db = NULL;
	int r = fx_try_open(f, &db, err);
	worker_db_free(db);
	return r;
}

static void open_undone(fixture *f, const char *fired)
{
	/* Whatever part of the migration ran is gone or whole: the next open
	 * completes it and the schema works. */
	worker_db *db = fx_open(f);
	int64_t v = -1;
	cr_assert_eq(worker_db_schema_version(db, &v, NULL), 0);
	cr_assert_eq(v, worker_db_schema_current(), "after %s", fired);
	assert_outcome(claim(db, "run-o", "t", 1, 60, T0), WORKER_DB_CLAIM_NEW);
	worker_db_free(db);
	/* A fresh database again for the next check. */
	fx_done(f);
	fx_init(f, f->pg);
}

CONTRACT(each_step_of_an_operation_fails_whole_and_leaves_the_handle_usable)
{
	walk(f, "open", op_open, open_undone);
	f->db = fx_open(f);
	new_env(fenv_a);
	new_env(fenv_b);
	claim(f->db, "run-f", "t", 1, 60, T0);
	set_env(f->db, "run-f", 1, fenv_a, T0);
	walk(f, "fence", op_fence, fence_undone);
	walk(f, "set_environment", op_set_env, set_env_undone);
	walk(f, "release", op_release, release_undone);
	assert_state(check(f->db, "run-f", "t", 2, T0 + 7).state, WORKER_DB_LEASE_RELEASED);
}
#endif

/* ---- PostgreSQL: the connection string is a credential --------------------------- */

static void refused_without(const char *conninfo, const char *secret, const char *also)
{
	airlock_error err = { 0 };
	worker_db *db = NULL;
	int r = worker_db_open_pg(conninfo, &db, &err);
	cr_assert_lt(r, 0, "opened with %s", conninfo);
	cr_assert_null(db);
	cr_assert(err.message[0]);
	cr_assert_null(strstr(err.message, secret), "the secret is in: %s", err.message);
	cr_assert_null(strstr(err.message, conninfo), "the string is in: %s", err.message);
	if (also)
		cr_assert_null(strstr(err.message, also), "%s is in: %s", also, err.message);
}

Test(worker_db_pg_only, the_connection_string_is_in_no_message)
{
	const char *why = getenv(PG_ENV_WHY);
	cr_assert_null(why, "the PostgreSQL test server did not start: %s", why);
	const char *dir = getenv(PG_ENV_DIR);
	char ci[512];
	/* A wrong password: the server refuses it, and libpq's message names
	 * the socket and the user but not the password. */
	snprintf(ci, sizeof(ci), "host=%s user=" PG_USER " dbname=postgres password=WrongSecret4711",
	         dir);
	airlock_error err = { 0 };
	worker_db *db = NULL;
	cr_assert_eq(worker_db_open_pg(ci, &db, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_assert(strstr(err.message, "password authentication failed"), "%s", err.message);
	refused_without(ci, "WrongSecret4711", NULL);
	/* The right password to a socket nobody listens on. */
	refused_without("host=/nonexistent-airlock user=" PG_USER " password=" PG_PASSWORD,
	                PG_PASSWORD, NULL);
	/* A URI with the password in it. */
	refused_without("postgresql://" PG_USER ":UriSecret9911@/postgres?host=/nonexistent-airlock",
	                "UriSecret9911", NULL);
	/* Strings libpq cannot parse: its messages would quote them. */
	refused_without("host=/x password=TopSecret123 garbage", "TopSecret123", "garbage");
	refused_without("postgresql://u:PctSecret%zz@/db", "PctSecret", "%zz");
	refused_without("host=/x password='Quoted Secret", "Quoted Secret", NULL);
	refused_without("host=/x bogus_option=LeakMe password=OptSecret1", "OptSecret1", "LeakMe");
	/* A server message that quotes the password (a role named after it)
	 * is scrubbed too. */
	snprintf(ci, sizeof(ci), "host=%s user=SameAsSecret77 dbname=postgres password=SameAsSecret77",
	         dir);
	refused_without(ci, "SameAsSecret77", NULL);
}

/* A URI password holding an unescaped '/' or '@': libpq's parse succeeds,
 * but it reads part of the password as the port, the database or the host,
 * which the message names. No server is needed: the port is not a number,
 * and the host does not resolve. */
Test(worker_db_pg_only, a_password_libpq_reads_as_the_port_or_host_is_in_no_message)
{
	refused_without("postgresql://u:PaLeak/ssSecret@/postgres?host=/nonexistent-airlock",
	                "PaLeak", "ssSecret");
	refused_without("postgresql://u:PaLeak@ssSecret@nonexistent-airlock.invalid/postgres",
	                "PaLeak", "ssSecret");
	/* An '@' in the query part with no '/' before it: libpq would read
	 * all before it as the user. */
	refused_without("postgresql://nonexistent-airlock.invalid?password=PaLeak@ssSecret",
	                "PaLeak", "ssSecret");
}

/* One statement as the superuser on "postgres" (asserts). */
static void pg_admin_sql(const char *sql)
{
	PGconn *c = pg_admin();
	PGresult *r = PQexec(c, sql);
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s: %s", sql, PQresultErrorMessage(r));
	PQclear(r);
	PQfinish(c);
}

/* A worker that hangs inside its migration (its transaction open, the
 * migration lock held): another worker's start must fail in bounded time,
 * not wait on the lock for ever. The open runs in a child so the test
 * can stop it. An advisory lock is per database: the test holds it in a
 * database of its own, so the suite's other tests, which run in parallel
 * and open workers on "postgres", do not queue behind it. */
Test(worker_db_pg_only, a_start_behind_a_held_migration_lock_fails_in_bounded_time,
     .timeout = 120)
{
	const char *why = getenv(PG_ENV_WHY);
	cr_assert_null(why, "the PostgreSQL test server did not start: %s", why);
	char dbname[64], sql[128], conninfo[512];
	snprintf(dbname, sizeof(dbname), "lockdb%d", (int)getpid());
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s", dbname);
	pg_admin_sql(sql);
	int n = snprintf(conninfo, sizeof(conninfo),
	                 "host=%s user=" PG_USER " dbname=%s password=" PG_PASSWORD,
	                 getenv(PG_ENV_DIR), dbname);
	cr_assert(n > 0 && (size_t)n < sizeof(conninfo));
	PGconn *holder = pg_admin_db(dbname);
	PGresult *res = PQexec(holder, "BEGIN; SELECT pg_advisory_xact_lock(7091155068528747)");
	cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK, "%s", PQresultErrorMessage(res));
	PQclear(res);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		airlock_error err = { 0 };
		worker_db *db = NULL;
		_exit(worker_db_open_pg(conninfo, &db, &err) < 0 ? 0 : 1);
	}
	int st = 0;
	pid_t w = 0;
	for (int i = 0; i < 30 && w == 0; i++) {
		w = waitpid(pid, &st, WNOHANG);
		if (w == 0)
			sleep(1);
	}
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	PQfinish(holder);
	snprintf(sql, sizeof(sql), "DROP DATABASE %s WITH (FORCE)", dbname);
	pg_admin_sql(sql);
	cr_assert_neq(w, 0, "worker_db_open_pg still waited after 30 s on the migration lock");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the open succeeded behind a held lock");
}

/* A claim whose run's row another session holds locked fails after
 * lock_timeout instead of waiting; the string's own lock_timeout (1 s,
 * after the worker's 10 s default in `options`) is the one that holds,
 * and the handle serves the next call once the lock is gone. */
Test(worker_db_pg_only, a_claim_behind_a_held_row_lock_fails_after_the_strings_lock_timeout,
     .timeout = 60)
{
	fixture fx;
	fixture *f = &fx;
	fx_init(f, true);
	int w = snprintf(f->conninfo, sizeof(f->conninfo),
	                 "host=%s user=" PG_USER " dbname=postgres password=" PG_PASSWORD
	                 " options='-c search_path=%s -c lock_timeout=1s'",
	                 getenv(PG_ENV_DIR), f->schema);
	cr_assert(w > 0 && (size_t)w < sizeof(f->conninfo));
	f->db = fx_open(f);
	cr_assert_eq(claim(f->db, "run-locked", "tenant-a", 1, 60, 1000).outcome,
	             WORKER_DB_CLAIM_NEW);
	PGconn *holder = pg_admin();
	char sql[256];
	w = snprintf(sql, sizeof(sql),
	             "BEGIN; SET LOCAL search_path TO %s; SELECT epoch FROM airlock_leases"
	             " WHERE run_id = 'run-locked' FOR UPDATE",
	             f->schema);
	cr_assert(w > 0 && (size_t)w < sizeof(sql));
	PGresult *res = PQexec(holder, sql);
	cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK, "%s", PQresultErrorMessage(res));
	PQclear(res);
	worker_db_claim_request req = { .run_id = "run-locked", .tenant_id = "tenant-a",
		                        .epoch = 2, .ttl_seconds = 60, .now_ms = 2000 };
	worker_db_claim_result out;
	airlock_error err = { 0 };
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int r = worker_db_claim(f->db, &req, &out, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	PQclear(PQexec(holder, "ROLLBACK"));
	PQfinish(holder);
	cr_assert_lt(r, 0, "the claim went through a held row lock");
	cr_assert(strstr(err.message, "lock timeout"), "%s", err.message);
	cr_assert_lt(t1.tv_sec - t0.tv_sec, 5, "the claim waited %lld s, not the string's 1 s",
	             (long long)(t1.tv_sec - t0.tv_sec));
	cr_assert_eq(claim(f->db, "run-locked", "tenant-a", 2, 60, 3000).outcome,
	             WORKER_DB_CLAIM_FENCED);
	fx_done(f);
}

Test(worker_db_pg_only, the_connection_file_is_checked_like_a_credential)
{
	const char *why = getenv(PG_ENV_WHY);
	cr_assert_null(why, "the PostgreSQL test server did not start: %s", why);
	char dir[64];
	snprintf(dir, sizeof(dir), "/tmp/airlock-wdbf-XXXXXX");
	cr_assert(mkdtemp(dir));
	char path[128], ci[512];
	snprintf(path, sizeof(path), "%s/conninfo", dir);
	snprintf(ci, sizeof(ci), "host=%s user=" PG_USER " dbname=postgres password=" PG_PASSWORD "\n",
	         getenv(PG_ENV_DIR));
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, ci, strlen(ci)), (ssize_t)strlen(ci));
	close(fd);
	cr_assert_eq(chmod(path, 0644), 0);
	airlock_error err = { 0 };
	worker_db *db = NULL;
	cr_assert_eq(worker_db_open_pg_file(path, &db, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_assert(strstr(err.message, "has mode 0644"), "%s", err.message);
	cr_assert(strstr(err.message, path), "names the file: %s", err.message);
	cr_assert_null(strstr(err.message, PG_PASSWORD), "%s", err.message);
	cr_assert_eq(chmod(path, 0600), 0);
	cr_assert_eq(worker_db_open_pg_file(path, &db, &err), 0, "%s", err.message);
	cr_assert_str_eq(worker_db_name(db), "postgresql");
	worker_db_free(db);
	/* Two lines: refused without quoting either. */
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	cr_assert(fd >= 0);
	const char *two = "host=/x password=LineSecret1\nuser=y\n";
	cr_assert_eq(write(fd, two, strlen(two)), (ssize_t)strlen(two));
	close(fd);
	cr_assert_eq(worker_db_open_pg_file(path, &db, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_assert(strstr(err.message, "second line"), "%s", err.message);
	cr_assert_null(strstr(err.message, "LineSecret1"), "%s", err.message);
	char *rm[] = { "rm", "-rf", dir, NULL };
	cr_assert_eq(pg_run(rm), 0);
}

/* ---- SQLite: where the file lives ---------------------------------------------------- */

Test(worker_db_sqlite_only, the_file_is_private_and_in_wal_mode)
{
	fixture f;
	fx_init(&f, false);
	f.db = fx_open(&f);
	cr_assert_str_eq(worker_db_name(f.db), "sqlite");
	char path[128];
	snprintf(path, sizeof(path), "%s/worker.db", f.dir);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	claim(f.db, "r", "t", 1, 10, T0);
	snprintf(path, sizeof(path), "%s/worker.db-wal", f.dir);
	cr_assert_eq(stat(path, &st), 0, "WAL mode keeps a -wal file");
	cr_assert_eq(st.st_mode & 0777, 0600);
	fx_done(&f);
}

Test(worker_db_sqlite_only, a_state_directory_others_can_write_is_refused)
{
	fixture f;
	fx_init(&f, false);
	cr_assert_eq(chmod(f.dir, 0777), 0);
	airlock_error err = { 0 };
	worker_db *db = NULL;
	cr_assert_eq(worker_db_open_sqlite(f.dir, &db, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_assert(strstr(err.message, "has mode 0777"), "%s", err.message);
	cr_assert_eq(worker_db_open_sqlite("/nonexistent-airlock", &db, &err),
	             airlock_errcode(AIRLOCK_ERR_CONFIG));
	fx_done(&f);
}
