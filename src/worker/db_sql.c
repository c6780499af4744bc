/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lease operations both SQL adapters run (db_sql.h), each one
 * transaction. Why each is safe when two workers share one PostgreSQL
 * database (docs/worker-db.md, "Two workers", says it at length):
 *
 *   - every write to a run first makes sure its lease row exists (INSERT
 *     ... ON CONFLICT DO NOTHING, which waits for a concurrent insert of
 *     the same run to commit or roll back) and then reads it under the
 *     driver's lock (FOR UPDATE; SQLite's one writer), so two writes to
 *     one run are serialized and each decides on the committed row;
 *   - a fence and a set_environment of the older epoch lock the same row:
 *     either the sandbox is recorded first and the fence returns it, or
 *     the fence commits first and the recording is refused;
 *   - reads (check, stale, ended) are single statements or one snapshot,
 *     and what they decide is a function of committed rows only.
 */
#include "worker/db_sql.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fault.h"
#include "util/util.h"

/* ---- the schema ------------------------------------------------------------
 * Leases are never deleted: a run's epoch is its fencing token, and
 * forgetting it would let a stale holder's lower epoch claim the run again.
 * A sandbox row belongs to one claim (run, epoch), and a claim has at most
 * one sandbox (lazy provision makes one). Times are wall-clock
 * milliseconds the worker passes in. */
const worker_db_migration worker_db_migrations[] = {
	{ 1, "CREATE TABLE airlock_leases ("
	     " run_id TEXT PRIMARY KEY,"
	     " tenant_id TEXT NOT NULL,"
	     " epoch BIGINT NOT NULL CHECK (epoch >= 0),"
	     " expires_at_ms BIGINT NOT NULL,"
	     " released_at_ms BIGINT);"
	     "CREATE TABLE airlock_sandboxes ("
	     " environment_id TEXT PRIMARY KEY,"
	     " run_id TEXT NOT NULL REFERENCES airlock_leases (run_id),"
	     " epoch BIGINT NOT NULL CHECK (epoch >= 0),"
	     " UNIQUE (run_id, epoch));" },
	/* The handle that destroys a sandbox (the execution service's,
	 * opaque here): with it any worker sharing the database can destroy a
	 * sandbox another one recorded (a fence, a restart). NULL in a row of
	 * version 1, which no worker that provisioned could have written. */
	{ 2, "ALTER TABLE airlock_sandboxes ADD COLUMN handle TEXT;" },
	/* The orchestration bridge (docs/bridge.md): whether a claim asked
	 * for it (0 in every row of version 2: none did), and the SHA-256 hex
	 * of the one-time token its sandbox was given (never the token: a
	 * copy of the database authenticates nothing). */
	{ 3, "ALTER TABLE airlock_leases ADD COLUMN bridge BIGINT NOT NULL DEFAULT 0"
	     " CHECK (bridge IN (0, 1));"
	     "ALTER TABLE airlock_sandboxes ADD COLUMN bridge_token_sha256 TEXT;" },
	/* Artifacts (db.h, "artifacts"): every ArtifactMetadata field, the
	 * storage key, and whether the object is committed; the filename
	 * hex-encoded (any bytes, NUL and invalid UTF-8 included). Per tenant,
	 * the bytes its rows are charged (db.h, worker_db_artifact_charge):
	 * one row a cap check locks, so two workers
	 * cannot both pass the cap. The indexes serve a tenant's listing and
	 * the sweeper's scan. */
	{ 4, "CREATE TABLE airlock_artifacts ("
	     " artifact_id TEXT PRIMARY KEY,"
	     " tenant_id TEXT NOT NULL,"
	     " run_id TEXT,"
	     " origin TEXT NOT NULL,"
	     " filename_hex TEXT NOT NULL,"
	     " media_type TEXT NOT NULL,"
	     " size_bytes BIGINT NOT NULL CHECK (size_bytes >= 0),"
	     " sha256 TEXT NOT NULL,"
	     " trust TEXT NOT NULL,"
	     " created_at_ms BIGINT NOT NULL,"
	     " expires_at_ms BIGINT,"
	     " storage_key TEXT NOT NULL UNIQUE,"
	     " committed BIGINT NOT NULL DEFAULT 0 CHECK (committed IN (0, 1)));"
	     "CREATE INDEX airlock_artifacts_by_tenant ON airlock_artifacts (tenant_id, artifact_id);"
	     "CREATE INDEX airlock_artifacts_by_expiry ON airlock_artifacts (expires_at_ms);"
	     "CREATE INDEX airlock_artifacts_pending ON airlock_artifacts (committed, created_at_ms);"
	     "CREATE TABLE airlock_artifact_tenants ("
	     " tenant_id TEXT PRIMARY KEY,"
	     " bytes BIGINT NOT NULL CHECK (bytes >= 0));" },
	/* The one artifact store whose objects this database's rows name, and
	 * this database's own identity, which the store records in turn (db.h,
	 * artifact_store_bind): one row, set by the first worker to start. */
	{ 5, "CREATE TABLE airlock_artifact_store ("
	     " one BIGINT PRIMARY KEY CHECK (one = 1),"
	     " identity TEXT NOT NULL,"
	     " database_identity TEXT NOT NULL);" },
	/* Each tenant's counter reckoned again as worker_db_artifact_charge
	 * charges (size in 4 KiB blocks, one block more, the filename twice,
	 * which is the hex's length): rows inserted before the charge were
	 * counted by size alone, and their delete would give back more than
	 * was added (clamped at zero, taking newer rows' charges with it). */
	{ 6, "UPDATE airlock_artifact_tenants SET bytes = (SELECT COALESCE(SUM("
	     "((a.size_bytes + 4095) / 4096) * 4096 + 4096 + length(a.filename_hex)), 0)"
	     " FROM airlock_artifacts a WHERE a.tenant_id = airlock_artifact_tenants.tenant_id);" },
};
const size_t worker_db_migrations_count =
	sizeof(worker_db_migrations) / sizeof(worker_db_migrations[0]);

int64_t worker_db_schema_current(void)
{
	return worker_db_migrations[worker_db_migrations_count - 1].version;
}

static const worker_db_driver *drv(void *ctx)
{
	return ((worker_db_conn *)ctx)->driver;
}

/* ---- the driver's calls, each a fault point (util/fault.h) ------------------
 * db.begin, db.query (each statement), db.script (a migration's), db.commit:
 * a failure at any of them
 * must leave the operation undone and the connection ready for the next
 * one (test_worker_db walks them). */

static int injected(void *ctx, airlock_error *err, const char *what)
{
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, EIO, "%s: %s",
	                         drv(ctx)->where(ctx), what);
}

static int db_begin(void *ctx, worker_db_txn kind, airlock_error *err)
{
	if (util_fault("db.begin"))
		return injected(ctx, err, "begin");
	return drv(ctx)->begin(ctx, kind, err);
}

static int db_query(void *ctx, const char *sql, const worker_db_param *params, int nparams,
                    worker_db_row_fn fn, void *arg, int64_t *ret_changes, airlock_error *err)
{
	if (util_fault("db.query"))
		return injected(ctx, err, "query");
	return drv(ctx)->query(ctx, sql, params, nparams, fn, arg, ret_changes, err);
}

static int db_script(void *ctx, const char *sql, airlock_error *err)
{
	if (util_fault("db.script"))
		return injected(ctx, err, "statement");
	return drv(ctx)->script(ctx, sql, err);
}

static int db_commit(void *ctx, airlock_error *err)
{
	if (util_fault("db.commit"))
		return injected(ctx, err, "commit");
	return drv(ctx)->commit(ctx, err);
}

/* ---- reading rows ---------------------------------------------------------- */

static int parse_i64(const char *s, int64_t *ret)
{
	if (!s || !*s)
		return -EINVAL;
	char *end = NULL;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*ret = v;
	return 0;
}

/* A column's text into a fixed field; the database holds only what the
 * wrappers checked, so a value that does not fit is a corrupt row. */
static int copy_col(char *dst, size_t size, const char *s)
{
	if (!s || strlen(s) >= size)
		return -EINVAL;
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

static int corrupt(void *ctx, airlock_error *err, const char *what)
{
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
	                         "worker database %s: a row of %s has a value this schema cannot "
	                         "hold",
	                         drv(ctx)->where(ctx), what);
}

static int lease_row_fn(void *arg, const char *const *cols, int ncols)
{
	worker_db_lease_row *row = arg;
	int64_t released = 0, bridge = 0;
	if (ncols != 5 || copy_col(row->tenant_id, sizeof(row->tenant_id), cols[0]) < 0 ||
	    parse_i64(cols[1], &row->epoch) < 0 || parse_i64(cols[2], &row->expires_at_ms) < 0 ||
	    parse_i64(cols[3], &released) < 0 || parse_i64(cols[4], &bridge) < 0)
		return -EBADMSG;
	row->released = released != 0;
	row->bridge = bridge != 0;
	row->exists = true;
	return 0;
}

static int read_lease(void *ctx, const char *sql, const char *run_id, worker_db_lease_row *row,
                      airlock_error *err)
{
	memset(row, 0, sizeof(*row));
	worker_db_param p[] = { DB_TEXT(run_id) };
	int r = db_query(ctx, sql, p, 1, lease_row_fn, row, NULL, err);
	if (r == -EBADMSG)
		return corrupt(ctx, err, "airlock_leases");
	return r;
}

typedef struct sandbox_rows {
	worker_db_sandbox *out;
	size_t max, n;
} sandbox_rows;

static int sandbox_row_fn(void *arg, const char *const *cols, int ncols)
{
	sandbox_rows *s = arg;
	if (s->n >= s->max)
		return 0;
	worker_db_sandbox *o = &s->out[s->n];
	if (ncols != 3 || copy_col(o->environment_id, sizeof(o->environment_id), cols[0]) < 0 ||
	    copy_col(o->run_id, sizeof(o->run_id), cols[1]) < 0 || parse_i64(cols[2], &o->epoch) < 0)
		return -EBADMSG;
	s->n++;
	return 0;
}

static int read_sandboxes(void *ctx, const char *sql, const worker_db_param *p, int np,
                          worker_db_sandbox *out, size_t max, size_t *ret_n, airlock_error *err)
{
	sandbox_rows s = { .out = out, .max = max };
	int r = db_query(ctx, sql, p, np, sandbox_row_fn, &s, NULL, err);
	if (r == -EBADMSG)
		return corrupt(ctx, err, "airlock_sandboxes");
	if (r < 0)
		return r;
	*ret_n = s.n;
	return 0;
}

/* The claim's one sandbox (run, epoch), if recorded. */
typedef struct env_row {
	bool found;
	char id[AIRLOCK_ENVIRONMENT_ID_MAX];
} env_row;

static int env_row_fn(void *arg, const char *const *cols, int ncols)
{
	env_row *e = arg;
	if (ncols != 1 || copy_col(e->id, sizeof(e->id), cols[0]) < 0)
		return -EBADMSG;
	e->found = true;
	return 0;
}

static int read_env(void *ctx, const char *run_id, int64_t epoch, env_row *e, airlock_error *err)
{
	memset(e, 0, sizeof(*e));
	worker_db_param p[] = { DB_TEXT(run_id), DB_NUM(epoch) };
	int r = db_query(ctx,
	                        "SELECT environment_id FROM airlock_sandboxes"
	                        " WHERE run_id = $1 AND epoch = $2",
	                        p, 2, env_row_fn, e, NULL, err);
	if (r == -EBADMSG)
		return corrupt(ctx, err, "airlock_sandboxes");
	return r;
}

/* ---- transactions ----------------------------------------------------------- */

/* Commit, or roll back what the body left when it failed: every operation
 * ends through here, so no path leaves a transaction open on the
 * connection. */
static int finish(void *ctx, int r, airlock_error *err)
{
	if (r < 0) {
		drv(ctx)->rollback(ctx);
		return r;
	}
	r = db_commit(ctx, err);
	if (r < 0)
		drv(ctx)->rollback(ctx);
	return r;
}

/* ---- migrations -------------------------------------------------------------- */

static int version_row_fn(void *arg, const char *const *cols, int ncols)
{
	int64_t *v = arg;
	if (ncols != 1 || *v != -1 || parse_i64(cols[0], v) < 0 || *v < 0)
		return -EBADMSG; /* also a second row: the table holds one */
	return 0;
}

/* The version the database holds: 0 for a database with no version row
 * (a fresh one). */
static int read_version(void *ctx, int64_t *ret, airlock_error *err)
{
	int64_t v = -1;
	int r = db_query(ctx, "SELECT version FROM airlock_schema", NULL, 0, version_row_fn,
	                        &v, NULL, err);
	if (r == -EBADMSG)
		return corrupt(ctx, err, "airlock_schema");
	if (r < 0)
		return r;
	*ret = v < 0 ? 0 : v;
	return 0;
}

/* One step: under the migration lock, read the version, refuse a newer
 * one, apply the next migration and move the version, in one transaction.
 * *ret_done when the database is current. */
static int migrate_step(void *ctx, bool *ret_done, airlock_error *err)
{
	const worker_db_driver *d = drv(ctx);
	int r = db_begin(ctx, WORKER_DB_TXN_MIGRATE, err);
	if (r < 0)
		return r;
	r = db_script(ctx, "CREATE TABLE IF NOT EXISTS airlock_schema (version BIGINT NOT NULL)",
	              err);
	int64_t v = 0;
	if (r == 0)
		r = read_version(ctx, &v, err);
	if (r == 0 && v > worker_db_schema_current())
		r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                      "%s has schema version %lld, newer than the %lld this airlock "
		                      "knows: run the airlock that migrated it, or a newer one",
		                      d->where(ctx), (long long)v,
		                      (long long)worker_db_schema_current());
	if (r == 0 && v == worker_db_schema_current()) {
		*ret_done = true;
		return finish(ctx, 0, err);
	}
	const worker_db_migration *m = NULL;
	for (size_t i = 0; r == 0 && i < worker_db_migrations_count; i++)
		if (worker_db_migrations[i].version == v + 1)
			m = &worker_db_migrations[i];
	if (r == 0 && !m)
		r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: no migration from version %lld",
		                      d->where(ctx), (long long)v);
	if (r == 0)
		r = db_script(ctx, m->sql, err);
	if (r == 0) {
		worker_db_param p[] = { DB_NUM(m->version) };
		r = db_query(ctx,
		             v == 0 ? "INSERT INTO airlock_schema (version) VALUES ($1)"
		                    : "UPDATE airlock_schema SET version = $1",
		             p, 1, NULL, NULL, NULL, err);
	}
	if (r < 0 && err)
		airlock_error_prefix(err, "schema migration to version %lld: ", (long long)(v + 1));
	return finish(ctx, r, err);
}

int worker_db_sql_migrate(void *ctx, airlock_error *err)
{
	bool done = false;
	/* Bounded by the migrations there are: each step moves one version
	 * forward or fails. */
	for (size_t i = 0; i <= worker_db_migrations_count && !done; i++) {
		int r = migrate_step(ctx, &done, err);
		if (r < 0)
			return r;
	}
	return done ? 0
	            : airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: migrations did not finish",
	                                drv(ctx)->where(ctx));
}

int worker_db_sql_schema_version(void *ctx, int64_t *ret, airlock_error *err)
{
	return read_version(ctx, ret, err);
}

/* ---- the lease operations ------------------------------------------------------ */

/* The older claims' sandboxes of run below epoch, oldest first. */
#define SQL_OLDER                                                                                  \
	"SELECT environment_id, run_id, epoch FROM airlock_sandboxes"                              \
	" WHERE run_id = $1 AND epoch < $2 ORDER BY epoch LIMIT $3"

/* A claim granted without a decision on a read row: a renewal's UPDATE
 * or a first claim's INSERT changed it. */
static int claim_granted(worker_db_claim_result *ret, worker_db_claim_outcome outcome,
                         int64_t expires_at_ms)
{
	ret->outcome = outcome;
	ret->refusal = WORKER_DB_LEASE_CURRENT;
	ret->expires_at_ms = expires_at_ms;
	return 0;
}

static int claim_body(void *ctx, const worker_db_claim_request *req, worker_db_claim_result *ret,
                      airlock_error *err)
{
	const worker_db_driver *d = drv(ctx);
	int64_t expires = req->now_ms + req->ttl_seconds * 1000;
	worker_db_param row[] = { DB_TEXT(req->run_id), DB_TEXT(req->tenant_id), DB_NUM(req->epoch),
		                  DB_NUM(expires), DB_NUM(req->now_ms), DB_NUM(req->bridge ? 1 : 0) };
	/* The row as written: PostgreSQL types a parameter only where the
	 * statement uses it, so a write names exactly its own. */
	worker_db_param write_row[] = { row[0], row[1], row[2], row[3], row[5] };
	/* A renewal (what a holder sends every few seconds for as long as its
	 * run lasts) is tried first as one UPDATE whose WHERE is
	 * worker_db_claim_decide's RENEWED case: this tenant, this epoch, not
	 * released, not expired at now, the same bridge. It changes the row
	 * only when the row,
	 * locked by the UPDATE itself, would be decided RENEWED: PostgreSQL's
	 * READ COMMITTED waits for a concurrent writer of the row and checks
	 * the WHERE again on the row it committed, and SQLite's BEGIN
	 * IMMEDIATE already holds the one write lock. It spares a renewal the
	 * INSERT and the locked read, two of its five round trips to
	 * PostgreSQL (docs/performance.md, "Worker"). Changing no row, the
	 * claim goes on below in the same transaction and decides as ever. */
	int64_t renewed = 0;
	int r = db_query(ctx,
	                 "UPDATE airlock_leases SET expires_at_ms = $4 WHERE run_id = $1"
	                 " AND tenant_id = $2 AND epoch = $3 AND released_at_ms IS NULL"
	                 " AND expires_at_ms > $5 AND bridge = $6",
	                 row, 6, NULL, NULL, &renewed, err);
	if (r < 0)
		return r;
	if (renewed > 0)
		return claim_granted(ret, WORKER_DB_CLAIM_RENEWED, expires);
	/* A run never claimed: the row is made here, and ON CONFLICT waits for
	 * another worker's insert of the same run, so exactly one of two new
	 * claims inserts and the other reads the winner's row below. */
	int64_t inserted = 0;
	r = db_query(ctx,
	             "INSERT INTO airlock_leases (run_id, tenant_id, epoch, expires_at_ms, bridge)"
	             " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (run_id) DO NOTHING",
	             write_row, 5, NULL, NULL, &inserted, err);
	if (r < 0)
		return r;
	if (inserted > 0)
		return claim_granted(ret, WORKER_DB_CLAIM_NEW, expires);
	worker_db_lease_row lease;
	r = read_lease(ctx, d->lease_lock_sql, req->run_id, &lease, err);
	if (r < 0)
		return r;
	if (!lease.exists)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "%s: the lease row of a run vanished during its claim",
		                         d->where(ctx));
	bool write = false;
	worker_db_claim_decide(&lease, req, ret, &write);
	if (!write)
		return 0;
	r = db_query(ctx,
	             "UPDATE airlock_leases SET tenant_id = $2, epoch = $3, expires_at_ms = $4,"
	             " released_at_ms = NULL, bridge = $5 WHERE run_id = $1",
	             write_row, 5, NULL, NULL, NULL, err);
	if (r < 0)
		return r;
	ret->expires_at_ms = expires;
	if (ret->outcome == WORKER_DB_CLAIM_RENEWED)
		return 0;
	worker_db_param older[] = { DB_TEXT(req->run_id), DB_NUM(req->epoch),
		                    DB_NUM(WORKER_DB_CLAIM_OLDER_MAX) };
	return read_sandboxes(ctx, SQL_OLDER, older, 3, ret->older, WORKER_DB_CLAIM_OLDER_MAX,
	                      &ret->older_count, err);
}

int worker_db_sql_claim(void *ctx, const worker_db_claim_request *req,
                        worker_db_claim_result *ret, airlock_error *err)
{
	int r = db_begin(ctx, WORKER_DB_TXN_WRITE, err);
	if (r < 0)
		return r;
	return finish(ctx, claim_body(ctx, req, ret, err), err);
}

static int release_body(void *ctx, const char *run_id, const char *tenant_id, int64_t epoch,
                        int64_t now_ms, worker_db_release_result *ret, airlock_error *err)
{
	const worker_db_driver *d = drv(ctx);
	worker_db_lease_row lease;
	int r = read_lease(ctx, d->lease_lock_sql, run_id, &lease, err);
	if (r < 0)
		return r;
	worker_db_lease_state st = worker_db_lease_state_of(&lease, tenant_id, epoch, now_ms);
	switch (st) {
	case WORKER_DB_LEASE_CURRENT:
	case WORKER_DB_LEASE_EXPIRED:
	case WORKER_DB_LEASE_RELEASED:
		break; /* this tenant's claim at this epoch: it ends (again) */
	case WORKER_DB_LEASE_NONE:
	case WORKER_DB_LEASE_OTHER_TENANT:
	case WORKER_DB_LEASE_OTHER_EPOCH:
	case WORKER_DB_LEASE_OTHER_BRIDGE:
	case WORKER_DB_LEASE_INVALID:
	case WORKER_DB_LEASE__MAX:
		ret->state = st;
		return 0;
	}
	worker_db_param p[] = { DB_TEXT(run_id), DB_NUM(now_ms) };
	r = db_query(ctx,
	             "UPDATE airlock_leases SET released_at_ms = COALESCE(released_at_ms, $2)"
	             " WHERE run_id = $1",
	             p, 2, NULL, NULL, NULL, err);
	env_row e;
	if (r == 0)
		r = read_env(ctx, run_id, epoch, &e, err);
	if (r < 0)
		return r;
	ret->state = WORKER_DB_LEASE_CURRENT;
	ret->has_environment = e.found;
	memcpy(ret->environment_id, e.id, sizeof(e.id));
	return 0;
}

int worker_db_sql_release(void *ctx, const char *run_id, const char *tenant_id, int64_t epoch,
                          int64_t now_ms, worker_db_release_result *ret, airlock_error *err)
{
	int r = db_begin(ctx, WORKER_DB_TXN_WRITE, err);
	if (r < 0)
		return r;
	return finish(ctx, release_body(ctx, run_id, tenant_id, epoch, now_ms, ret, err), err);
}

/* check: the lease and the claim's sandbox in one statement, so the answer
 * is one snapshot without a transaction's round trips (it runs before
 * every tool call). */
typedef struct check_rows {
	worker_db_lease_row lease;
	env_row env;
} check_rows;

static int check_row_fn(void *arg, const char *const *cols, int ncols)
{
	check_rows *c = arg;
	if (ncols != 6)
		return -EBADMSG;
	int r = lease_row_fn(&c->lease, cols, 5);
	if (r == 0 && cols[5])
		r = env_row_fn(&c->env, cols + 5, 1);
	return r;
}

int worker_db_sql_check(void *ctx, const char *run_id, const char *tenant_id, int64_t epoch,
                        int64_t now_ms, worker_db_check_result *ret, airlock_error *err)
{
	check_rows c;
	memset(&c, 0, sizeof(c));
	worker_db_param p[] = { DB_TEXT(run_id), DB_NUM(epoch) };
	int r = db_query(ctx,
	                        "SELECT l.tenant_id, l.epoch, l.expires_at_ms,"
	                        " CASE WHEN l.released_at_ms IS NULL THEN 0 ELSE 1 END, l.bridge,"
	                        " s.environment_id FROM airlock_leases l"
	                        " LEFT JOIN airlock_sandboxes s"
	                        " ON s.run_id = l.run_id AND s.epoch = $2 WHERE l.run_id = $1",
	                        p, 2, check_row_fn, &c, NULL, err);
	if (r == -EBADMSG)
		return corrupt(ctx, err, "airlock_leases");
	if (r < 0)
		return r;
	ret->state = worker_db_lease_state_of(&c.lease, tenant_id, epoch, now_ms);
	if (ret->state != WORKER_DB_LEASE_CURRENT)
		return 0;
	ret->expires_at_ms = c.lease.expires_at_ms;
	ret->bridge = c.lease.bridge;
	ret->has_environment = c.env.found;
	memcpy(ret->environment_id, c.env.id, sizeof(c.env.id));
	return 0;
}

static int set_env_body(void *ctx, const char *run_id, int64_t epoch, const char *environment_id,
                        const char *handle, const char *token_sha256, int64_t now_ms,
                        worker_db_lease_state *ret, airlock_error *err)
{
	const worker_db_driver *d = drv(ctx);
	worker_db_lease_row lease;
	int r = read_lease(ctx, d->lease_lock_sql, run_id, &lease, err);
	if (r < 0)
		return r;
	/* The question carries no tenant: the claim is named by (run, epoch),
	 * and the run has one tenant. */
	*ret = worker_db_lease_state_of(&lease, lease.exists ? lease.tenant_id : "", epoch, now_ms);
	if (*ret != WORKER_DB_LEASE_CURRENT)
		return 0;
	/* A bridge's sandbox without its token's hash could never be reached
	 * by its script; a hash on a claim without a bridge would authenticate
	 * a connection the claim never asked for. */
	if (lease.bridge != (token_sha256 != NULL))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "run %s epoch %lld: %s", run_id, (long long)epoch,
		                         lease.bridge ? "the claim asked for the bridge: its sandbox "
		                                        "is recorded with its token's hash"
		                                      : "the claim did not ask for the bridge: its "
		                                        "sandbox has no bridge token");
	env_row e;
	r = read_env(ctx, run_id, epoch, &e, err);
	if (r < 0)
		return r;
	if (e.found)
		return strcmp(e.id, environment_id) == 0
		               ? 0
		               : airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                                   "run %s epoch %lld already has sandbox %s recorded: "
		                                   "a claim has one sandbox (clear it after its destroy)",
		                                   run_id, (long long)epoch, e.id);
	/* SQL NULL for no hash: DB_TEXT(NULL) is a number, so the statement
	 * says it. */
	worker_db_param p[] = { DB_TEXT(environment_id), DB_TEXT(run_id), DB_NUM(epoch),
		                DB_TEXT(handle), DB_TEXT(token_sha256 ? token_sha256 : "") };
	return db_query(ctx,
	                "INSERT INTO airlock_sandboxes (environment_id, run_id, epoch, handle,"
	                " bridge_token_sha256) VALUES ($1, $2, $3, $4, NULLIF($5, ''))",
	                p, 5, NULL, NULL, NULL, err);
}

int worker_db_sql_set_environment(void *ctx, const char *run_id, int64_t epoch,
                                  const char *environment_id, const char *handle,
                                  const char *token_sha256, int64_t now_ms,
                                  worker_db_lease_state *ret, airlock_error *err)
{
	int r = db_begin(ctx, WORKER_DB_TXN_WRITE, err);
	if (r < 0)
		return r;
	return finish(ctx,
	              set_env_body(ctx, run_id, epoch, environment_id, handle, token_sha256,
	                           now_ms, ret, err),
	              err);
}

/* bridge_lookup: the sandbox row and its run's lease in one statement (one
 * snapshot, no transaction's round trips: it runs for every bridge
 * connection). */
typedef struct bridge_rows {
	bool found;
	worker_db_lease_row lease;
	int64_t epoch;
	char run_id[AIRLOCK_ID_MAX + 1];
	bool has_token;
	char token[65];
} bridge_rows;

static int bridge_row_fn(void *arg, const char *const *cols, int ncols)
{
	bridge_rows *b = arg;
	if (ncols != 8 || copy_col(b->run_id, sizeof(b->run_id), cols[0]) < 0 ||
	    parse_i64(cols[1], &b->epoch) < 0)
		return -EBADMSG;
	if (cols[2] && copy_col(b->token, sizeof(b->token), cols[2]) < 0)
		return -EBADMSG;
	b->has_token = cols[2] != NULL;
	/* The foreign key keeps the lease row; a NULL one reads as none. */
	int r = cols[3] ? lease_row_fn(&b->lease, cols + 3, 5) : 0;
	b->found = r == 0;
	return r;
}

int worker_db_sql_bridge_lookup(void *ctx, const char *environment_id, int64_t now_ms,
                                worker_db_bridge_result *ret, airlock_error *err)
{
	bridge_rows b;
	memset(&b, 0, sizeof(b));
	worker_db_param p[] = { DB_TEXT(environment_id) };
	int r = db_query(ctx,
	                 "SELECT s.run_id, s.epoch, s.bridge_token_sha256, l.tenant_id, l.epoch,"
	                 " l.expires_at_ms, CASE WHEN l.released_at_ms IS NULL THEN 0 ELSE 1 END,"
	                 " l.bridge FROM airlock_sandboxes s"
	                 " LEFT JOIN airlock_leases l ON l.run_id = s.run_id"
	                 " WHERE s.environment_id = $1",
	                 p, 1, bridge_row_fn, &b, NULL, err);
	if (r == -EBADMSG)
		return corrupt(ctx, err, "airlock_sandboxes");
	if (r < 0 || !b.found)
		return r;
	ret->found = true;
	memcpy(ret->run_id, b.run_id, sizeof(b.run_id));
	memcpy(ret->tenant_id, b.lease.tenant_id, sizeof(b.lease.tenant_id));
	ret->epoch = b.epoch;
	ret->state = worker_db_lease_state_of(&b.lease, b.lease.exists ? b.lease.tenant_id : "",
	                                      b.epoch, now_ms);
	/* A token is authenticating only on a claim that asked for the
	 * bridge. */
	ret->has_token = b.has_token && b.lease.bridge;
	memcpy(ret->token_sha256, b.token, sizeof(b.token));
	return 0;
}

static int handle_row_fn(void *arg, const char *const *cols, int ncols)
{
	char **out = arg;
	if (ncols != 1)
		return -EBADMSG;
	if (!cols[0] || *out)
		return 0;
	*out = strdup(cols[0]);
	return *out ? 0 : -ENOMEM;
}

int worker_db_sql_environment_handle(void *ctx, const char *environment_id, char **ret,
                                     airlock_error *err)
{
	worker_db_param p[] = { DB_TEXT(environment_id) };
	char *h = NULL;
	int r = db_query(ctx, "SELECT handle FROM airlock_sandboxes WHERE environment_id = $1", p,
	                 1, handle_row_fn, &h, NULL, err);
	if (r == -EBADMSG)
		return corrupt(ctx, err, "airlock_sandboxes");
	if (r == -ENOMEM)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker database: a handle");
	if (r < 0) {
		free(h);
		return r;
	}
	*ret = h;
	return 0;
}

int worker_db_sql_clear_environment(void *ctx, const char *run_id, int64_t epoch,
                                    const char *environment_id, bool *ret_cleared,
                                    airlock_error *err)
{
	int r = db_begin(ctx, WORKER_DB_TXN_WRITE, err);
	if (r < 0)
		return r;
	worker_db_param p[] = { DB_TEXT(environment_id), DB_TEXT(run_id), DB_NUM(epoch) };
	int64_t n = 0;
	r = db_query(ctx,
	                    "DELETE FROM airlock_sandboxes"
	                    " WHERE environment_id = $1 AND run_id = $2 AND epoch = $3",
	                    p, 3, NULL, NULL, &n, err);
	*ret_cleared = n > 0;
	return finish(ctx, r, err);
}

int worker_db_sql_stale(void *ctx, const worker_db_sandbox *list, size_t n, int64_t now_ms,
                        bool *ret_stale, airlock_error *err)
{
	/* One snapshot for the whole answer: a fence committing half way
	 * through cannot make the answer mix two states of one run. */
	int r = db_begin(ctx, WORKER_DB_TXN_READ, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n && r == 0; i++) {
		worker_db_lease_row lease;
		r = read_lease(ctx, WORKER_DB_SQL_LEASE_READ, list[i].run_id, &lease, err);
		if (r == 0)
			ret_stale[i] = worker_db_sandbox_stale(&lease, list[i].epoch, now_ms);
	}
	return finish(ctx, r, err);
}

int worker_db_sql_ended(void *ctx, int64_t now_ms, worker_db_sandbox *ret, size_t max,
                        size_t *ret_n, airlock_error *err)
{
	/* worker_db_sandbox_stale's rule as SQL: no lease (cannot happen with
	 * the foreign key, kept for the rule's sake), another epoch, released,
	 * or expired at now. */
	worker_db_param p[] = { DB_NUM(now_ms), DB_NUM((int64_t)max) };
	return read_sandboxes(ctx,
	                      "SELECT s.environment_id, s.run_id, s.epoch FROM airlock_sandboxes s"
	                      " LEFT JOIN airlock_leases l ON l.run_id = s.run_id"
	                      " WHERE l.run_id IS NULL OR l.epoch <> s.epoch"
	                      " OR l.released_at_ms IS NOT NULL OR l.expires_at_ms <= $1"
	                      " ORDER BY s.epoch, s.environment_id LIMIT $2",
	                      p, 2, ret, max, ret_n, err);
}

/* ---- artifacts ------------------------------------------------------------------ */

#define ARTIFACT_COLS                                                                              \
	"artifact_id, tenant_id, run_id, origin, filename_hex, media_type, size_bytes, sha256,"    \
	" trust, created_at_ms, expires_at_ms, committed, storage_key"
#define ARTIFACT_NCOLS 13

static int unhex(const char *hex, unsigned char **ret, size_t *ret_len)
{
	size_t n = strlen(hex);
	if (n % 2 || n / 2 > AIRLOCK_ARTIFACT_FILENAME_MAX)
		return -EBADMSG;
	unsigned char *out = malloc(n / 2 + 1);
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < n / 2; i++) {
		int v = 0;
		for (int k = 0; k < 2; k++) {
			char c = hex[2 * i + (size_t)k];
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			if (d < 0) {
				free(out);
				return -EBADMSG;
			}
			v = v * 16 + d;
		}
		out[i] = (unsigned char)v;
	}
	out[n / 2] = 0;
	*ret = out;
	*ret_len = n / 2;
	return 0;
}

static int artifact_from_cols(worker_db_artifact *a, const char *const *cols, int ncols)
{
	int64_t committed = 0;
	if (ncols != ARTIFACT_NCOLS ||
	    copy_col(a->artifact_id, sizeof(a->artifact_id), cols[0]) < 0 ||
	    copy_col(a->tenant_id, sizeof(a->tenant_id), cols[1]) < 0 ||
	    (cols[2] && copy_col(a->run_id, sizeof(a->run_id), cols[2]) < 0) || !cols[3] ||
	    !cols[4] || copy_col(a->media_type, sizeof(a->media_type), cols[5]) < 0 ||
	    parse_i64(cols[6], &a->size_bytes) < 0 ||
	    copy_col(a->sha256, sizeof(a->sha256), cols[7]) < 0 || !cols[8] ||
	    parse_i64(cols[9], &a->created_at_ms) < 0 ||
	    (cols[10] && parse_i64(cols[10], &a->expires_at_ms) < 0) ||
	    parse_i64(cols[11], &committed) < 0 ||
	    copy_col(a->storage_key, sizeof(a->storage_key), cols[12]) < 0)
		return -EBADMSG;
	a->has_run = cols[2] != NULL;
	a->has_expires = cols[10] != NULL;
	a->committed = committed != 0;
	a->origin = airlock_artifact_origin_parse(cols[3]);
	a->trust = airlock_trust_level_parse(cols[8]);
	if (a->origin == AIRLOCK_ORIGIN_INVALID || a->trust == AIRLOCK_TRUST_INVALID)
		return -EBADMSG;
	return unhex(cols[4], &a->filename, &a->filename_len);
}

typedef struct artifact_rows {
	worker_db_artifact *out;
	size_t max, n;
} artifact_rows;

static int artifact_row_fn(void *arg, const char *const *cols, int ncols)
{
	artifact_rows *s = arg;
	if (s->n >= s->max)
		return 0;
	worker_db_artifact *a = &s->out[s->n];
	int r = artifact_from_cols(a, cols, ncols);
	if (r < 0) {
		worker_db_artifact_clear(a);
		return r;
	}
	s->n++;
	return 0;
}

static int read_artifacts(void *ctx, const char *sql, const worker_db_param *p, int np,
                          worker_db_artifact *out, size_t max, size_t *ret_n, airlock_error *err)
{
	artifact_rows s = { .out = out, .max = max };
	int r = db_query(ctx, sql, p, np, artifact_row_fn, &s, NULL, err);
	if (r == -EBADMSG)
		r = corrupt(ctx, err, "airlock_artifacts");
	else if (r == -ENOMEM)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker database: an artifact");
	if (r < 0) {
		for (size_t i = 0; i < s.n; i++)
			worker_db_artifact_clear(&out[i]);
		return r;
	}
	*ret_n = s.n;
	return 0;
}

static int i64_row_fn(void *arg, const char *const *cols, int ncols)
{
	return ncols == 1 ? parse_i64(cols[0], arg) : -EBADMSG;
}

static int tenant_bytes_body(void *ctx, const char *tenant_id, int64_t *ret, airlock_error *err)
{
	*ret = 0;
	worker_db_param p[] = { DB_TEXT(tenant_id) };
	int r = db_query(ctx, "SELECT bytes FROM airlock_artifact_tenants WHERE tenant_id = $1", p,
	                 1, i64_row_fn, ret, NULL, err);
	return r == -EBADMSG ? corrupt(ctx, err, "airlock_artifact_tenants") : r;
}

static int artifact_insert_body(void *ctx, const worker_db_artifact *a, int64_t cap,
                                worker_db_artifact_insert_result *ret, airlock_error *err)
{
	/* The tenant's row exists before it is locked; ON CONFLICT waits for
	 * another worker's insert of it. */
	worker_db_param t[] = { DB_TEXT(a->tenant_id),
		                DB_NUM(worker_db_artifact_charge(a->size_bytes, a->filename_len)),
		                DB_NUM(cap) };
	int r = db_query(ctx,
	                 "INSERT INTO airlock_artifact_tenants (tenant_id, bytes) VALUES ($1, 0)"
	                 " ON CONFLICT (tenant_id) DO NOTHING",
	                 t, 1, NULL, NULL, NULL, err);
	if (r < 0)
		return r;
	/* The cap as the UPDATE's own condition: the row is locked by it and
	 * the condition evaluated on the committed value (PostgreSQL re-checks
	 * it after waiting for a concurrent writer; SQLite has one writer). */
	int64_t charged = 0;
	r = db_query(ctx,
	             "UPDATE airlock_artifact_tenants SET bytes = bytes + $2"
	             " WHERE tenant_id = $1 AND bytes + $2 <= $3",
	             t, 3, NULL, NULL, &charged, err);
	if (r < 0)
		return r;
	if (charged == 0)
		return tenant_bytes_body(ctx, a->tenant_id, &ret->tenant_bytes, err);
	ret->inserted = true;
	ret->tenant_bytes = -1;
	_cleanup_free_ char *hex = malloc(2 * a->filename_len + 1);
	if (!hex)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker database: a filename");
	util_hex(a->filename, a->filename_len, hex);
	worker_db_param p[] = {
		DB_TEXT(a->artifact_id),
		DB_TEXT(a->tenant_id),
		DB_TEXT(a->has_run ? a->run_id : ""),
		DB_TEXT(airlock_artifact_origin_name(a->origin)),
		DB_TEXT(hex),
		DB_TEXT(a->media_type),
		DB_NUM(a->size_bytes),
		DB_TEXT(a->sha256),
		DB_TEXT(airlock_trust_level_name(a->trust)),
		DB_NUM(a->created_at_ms),
		DB_NUM(a->has_expires ? a->expires_at_ms : -1),
		DB_TEXT(a->storage_key),
	};
	return db_query(ctx,
	                "INSERT INTO airlock_artifacts (" ARTIFACT_COLS ") VALUES ($1, $2,"
	                " NULLIF($3, ''), $4, $5, $6, $7, $8, $9, $10, NULLIF(CAST($11 AS BIGINT), -1), 0, $12)",
	                p, 12, NULL, NULL, NULL, err);
}

int worker_db_sql_artifact_insert(void *ctx, const worker_db_artifact *a, int64_t cap,
                                  worker_db_artifact_insert_result *ret, airlock_error *err)
{
	int r = db_begin(ctx, WORKER_DB_TXN_WRITE, err);
	if (r < 0)
		return r;
	return finish(ctx, artifact_insert_body(ctx, a, cap, ret, err), err);
}

/* A one-statement write in its own transaction; *ret_changed whether a
 * row changed. */
static int write_one(void *ctx, const char *sql, const worker_db_param *p, int np,
                     bool *ret_changed, airlock_error *err)
{
	int r = db_begin(ctx, WORKER_DB_TXN_WRITE, err);
	if (r < 0)
		return r;
	int64_t n = 0;
	r = db_query(ctx, sql, p, np, NULL, NULL, &n, err);
	*ret_changed = n > 0;
	return finish(ctx, r, err);
}

int worker_db_sql_artifact_commit(void *ctx, const char *artifact_id, bool *ret_found,
                                  airlock_error *err)
{
	worker_db_param p[] = { DB_TEXT(artifact_id) };
	return write_one(ctx,
	                 "UPDATE airlock_artifacts SET committed = 1"
	                 " WHERE artifact_id = $1 AND committed = 0",
	                 p, 1, ret_found, err);
}

int worker_db_sql_artifact_get(void *ctx, const char *artifact_id, worker_db_artifact *ret,
                               bool *ret_found, airlock_error *err)
{
	worker_db_param p[] = { DB_TEXT(artifact_id) };
	size_t n = 0;
	int r = read_artifacts(ctx,
	                       "SELECT " ARTIFACT_COLS " FROM airlock_artifacts WHERE artifact_id = $1",
	                       p, 1, ret, 1, &n, err);
	*ret_found = r == 0 && n == 1;
	return r;
}

typedef struct deleted_row {
	bool found;
	char tenant_id[AIRLOCK_ID_MAX + 1];
	int64_t size, filename_hex_len;
} deleted_row;

static int deleted_row_fn(void *arg, const char *const *cols, int ncols)
{
	deleted_row *d = arg;
	if (ncols != 3 || copy_col(d->tenant_id, sizeof(d->tenant_id), cols[0]) < 0 ||
	    parse_i64(cols[1], &d->size) < 0 || parse_i64(cols[2], &d->filename_hex_len) < 0 ||
	    d->filename_hex_len < 0 || d->filename_hex_len % 2)
		return -EBADMSG;
	d->found = true;
	return 0;
}

/* due: only while the row is still what artifact_due selected (expired
 * at now_ms, or pending since before pending_before_ms), in the DELETE's
 * own condition, so a row a put committed or a run attached since the
 * sweeper read it is not taken. */
static int artifact_delete_body(void *ctx, const char *artifact_id, bool due, int64_t now_ms,
                                int64_t pending_before_ms, bool *ret_deleted, airlock_error *err)
{
	deleted_row d = { 0 };
	worker_db_param p[] = { DB_TEXT(artifact_id), DB_NUM(now_ms), DB_NUM(pending_before_ms) };
	int r = due ? db_query(ctx,
	                       "DELETE FROM airlock_artifacts WHERE artifact_id = $1"
	                       " AND ((committed = 1 AND expires_at_ms <= $2)"
	                       " OR (committed = 0 AND created_at_ms < $3))"
	                       " RETURNING tenant_id, size_bytes, length(filename_hex)",
	                       p, 3, deleted_row_fn, &d, NULL, err)
	            : db_query(ctx,
	                       "DELETE FROM airlock_artifacts WHERE artifact_id = $1"
	                       " RETURNING tenant_id, size_bytes, length(filename_hex)",
	                       p, 1, deleted_row_fn, &d, NULL, err);
	if (r == -EBADMSG)
		return corrupt(ctx, err, "airlock_artifacts");
	if (r < 0 || !d.found)
		return r;
	*ret_deleted = true;
	/* The charge the insert added, from the same function. */
	worker_db_param t[] = {
		DB_TEXT(d.tenant_id),
		DB_NUM(worker_db_artifact_charge(d.size, (size_t)d.filename_hex_len / 2)),
	};
	return db_query(ctx,
	                "UPDATE airlock_artifact_tenants SET bytes = CASE WHEN bytes >= $2"
	                " THEN bytes - $2 ELSE 0 END WHERE tenant_id = $1",
	                t, 2, NULL, NULL, NULL, err);
}

int worker_db_sql_artifact_delete(void *ctx, const char *artifact_id, bool *ret_deleted,
                                  airlock_error *err)
{
	int r = db_begin(ctx, WORKER_DB_TXN_WRITE, err);
	if (r < 0)
		return r;
	return finish(ctx, artifact_delete_body(ctx, artifact_id, false, 0, 0, ret_deleted, err),
	              err);
}

int worker_db_sql_artifact_delete_due(void *ctx, const char *artifact_id, int64_t now_ms,
                                      int64_t pending_before_ms, bool *ret_deleted,
                                      airlock_error *err)
{
	int r = db_begin(ctx, WORKER_DB_TXN_WRITE, err);
	if (r < 0)
		return r;
	return finish(ctx,
	              artifact_delete_body(ctx, artifact_id, true, now_ms, pending_before_ms,
	                                   ret_deleted, err),
	              err);
}

typedef struct key_rows {
	worker_db_artifact_key *out;
	size_t max, n;
} key_rows;

static int key_row_fn(void *arg, const char *const *cols, int ncols)
{
	key_rows *k = arg;
	if (k->n >= k->max)
		return 0;
	worker_db_artifact_key *o = &k->out[k->n];
	int64_t committed = 0;
	if (ncols != 3 || copy_col(o->artifact_id, sizeof(o->artifact_id), cols[0]) < 0 ||
	    copy_col(o->tenant_id, sizeof(o->tenant_id), cols[1]) < 0 ||
	    parse_i64(cols[2], &committed) < 0)
		return -EBADMSG;
	o->committed = committed != 0;
	k->n++;
	return 0;
}

int worker_db_sql_artifact_due(void *ctx, int64_t now_ms, int64_t pending_before_ms,
                               worker_db_artifact_key *ret, size_t max, size_t *ret_n,
                               airlock_error *err)
{
	key_rows k = { .out = ret, .max = max };
	worker_db_param p[] = { DB_NUM(now_ms), DB_NUM(pending_before_ms), DB_NUM((int64_t)max) };
	int r = db_query(ctx,
	                 "SELECT artifact_id, tenant_id, committed FROM airlock_artifacts"
	                 " WHERE (committed = 1 AND expires_at_ms <= $1)"
	                 " OR (committed = 0 AND created_at_ms < $2)"
	                 " ORDER BY artifact_id LIMIT $3",
	                 p, 3, key_row_fn, &k, NULL, err);
	if (r == -EBADMSG)
		return corrupt(ctx, err, "airlock_artifacts");
	if (r < 0)
		return r;
	*ret_n = k.n;
	return 0;
}

int worker_db_sql_artifact_get_visible(void *ctx, const char *artifact_id, const char *tenant_id,
                                       int64_t now_ms, worker_db_artifact *ret, bool *ret_found,
                                       airlock_error *err)
{
	/* Every reason a row is not shown is a condition of the one
	 * statement, so a row that is there but not the asker's reads as no
	 * row at all: the same work, the same time, as a missing id. */
	worker_db_param p[] = { DB_TEXT(artifact_id), DB_TEXT(tenant_id ? tenant_id : ""),
		                DB_NUM(now_ms) };
	size_t n = 0;
	int r = read_artifacts(ctx,
	                       "SELECT " ARTIFACT_COLS " FROM airlock_artifacts"
	                       " WHERE artifact_id = $1 AND committed = 1"
	                       " AND (expires_at_ms IS NULL OR expires_at_ms > $3)"
	                       " AND ($2 = '' OR tenant_id = $2)",
	                       p, 3, ret, 1, &n, err);
	*ret_found = r == 0 && n == 1;
	return r;
}

int worker_db_sql_artifact_list(void *ctx, const worker_db_artifact_query *q,
                                worker_db_artifact *ret, size_t *ret_n, airlock_error *err)
{
	worker_db_param p[] = { DB_TEXT(q->tenant_id), DB_NUM(q->now_ms),
		                DB_TEXT(q->after_id ? q->after_id : ""), DB_NUM((int64_t)q->max),
		                DB_TEXT(q->run_id ? q->run_id : "") };
	/* Ids are canonical UUIDv7 text: their order is their time order. */
	return read_artifacts(ctx,
	                      q->run_id ? "SELECT " ARTIFACT_COLS " FROM airlock_artifacts"
	                                  " WHERE tenant_id = $1 AND committed = 1"
	                                  " AND (expires_at_ms IS NULL OR expires_at_ms > $2)"
	                                  " AND artifact_id > $3 AND run_id = $5"
	                                  " ORDER BY artifact_id LIMIT $4"
	                                : "SELECT " ARTIFACT_COLS " FROM airlock_artifacts"
	                                  " WHERE tenant_id = $1 AND committed = 1"
	                                  " AND (expires_at_ms IS NULL OR expires_at_ms > $2)"
	                                  " AND artifact_id > $3"
	                                  " ORDER BY artifact_id LIMIT $4",
	                      p, q->run_id ? 5 : 4, ret, q->max, ret_n, err);
}

int worker_db_sql_artifact_attach(void *ctx, const char *artifact_id, const char *tenant_id,
                                  const char *run_id, int64_t now_ms, bool *ret_done,
                                  airlock_error *err)
{
	worker_db_param p[] = { DB_TEXT(artifact_id), DB_TEXT(tenant_id), DB_TEXT(run_id),
		                DB_NUM(now_ms) };
	/* An upload no run has claimed goes to this run; a run's own export or
	 * model output stays its own. Either way it no longer expires (the
	 * specification's Retention: it lives as long as what attached it). */
	return write_one(ctx,
	                 "UPDATE airlock_artifacts SET run_id = $3, expires_at_ms = NULL"
	                 " WHERE artifact_id = $1 AND tenant_id = $2 AND committed = 1"
	                 " AND (expires_at_ms IS NULL OR expires_at_ms > $4)"
	                 " AND ((origin = 'UPLOAD' AND run_id IS NULL)"
	                 " OR (run_id = $3 AND origin IN ('SANDBOX_EXPORT', 'MODEL_OUTPUT',"
	                 " 'UPLOAD')))",
	                 p, 4, ret_done, err);
}

int worker_db_sql_artifact_tenant_bytes(void *ctx, const char *tenant_id, int64_t *ret,
                                        airlock_error *err)
{
	return tenant_bytes_body(ctx, tenant_id, ret, err);
}

static int identity_row_fn(void *arg, const char *const *cols, int ncols)
{
	char(*out)[AIRLOCK_UUID_STR_LEN + 1] = arg;
	return ncols == 2 && copy_col(out[0], AIRLOCK_UUID_STR_LEN + 1, cols[0]) == 0 &&
	                       copy_col(out[1], AIRLOCK_UUID_STR_LEN + 1, cols[1]) == 0
	               ? 0
	               : -EBADMSG;
}

int worker_db_sql_artifact_store_bind(void *ctx, const char *store_identity,
                                      const char *database_identity,
                                      char ret_store[AIRLOCK_UUID_STR_LEN + 1],
                                      char ret_database[AIRLOCK_UUID_STR_LEN + 1],
                                      airlock_error *err)
{
	int r = db_begin(ctx, WORKER_DB_TXN_WRITE, err);
	if (r < 0)
		return r;
	/* The first worker's identities stay; ON CONFLICT waits for another
	 * worker's insert of the row and then keeps it. */
	worker_db_param p[] = { DB_TEXT(store_identity), DB_TEXT(database_identity) };
	r = db_query(ctx,
	             "INSERT INTO airlock_artifact_store (one, identity, database_identity)"
	             " VALUES (1, $1, $2) ON CONFLICT (one) DO NOTHING",
	             p, 2, NULL, NULL, NULL, err);
	char got[2][AIRLOCK_UUID_STR_LEN + 1] = { "", "" };
	if (r == 0)
		r = db_query(ctx,
		             "SELECT identity, database_identity FROM airlock_artifact_store"
		             " WHERE one = 1",
		             NULL, 0, identity_row_fn, got, NULL, err);
	if (r == -EBADMSG)
		r = corrupt(ctx, err, "airlock_artifact_store");
	memcpy(ret_store, got[0], sizeof(got[0]));
	memcpy(ret_database, got[1], sizeof(got[1]));
	return finish(ctx, r, err);
}

int worker_db_sql_artifact_same(void *ctx, const worker_db_artifact *a, int64_t now_ms,
                                worker_db_artifact *ret, bool *ret_found, airlock_error *err)
{
	_cleanup_free_ char *hex = malloc(2 * a->filename_len + 1);
	if (!hex)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker database: a filename");
	util_hex(a->filename, a->filename_len, hex);
	worker_db_param p[] = { DB_TEXT(a->tenant_id), DB_TEXT(a->has_run ? a->run_id : ""),
		                DB_TEXT(airlock_artifact_origin_name(a->origin)), DB_TEXT(a->sha256),
		                DB_NUM(a->size_bytes), DB_TEXT(hex), DB_TEXT(a->media_type),
		                DB_NUM(now_ms), DB_TEXT(airlock_trust_level_name(a->trust)) };
	size_t n = 0;
	int r = read_artifacts(ctx,
	                       "SELECT " ARTIFACT_COLS " FROM airlock_artifacts"
	                       " WHERE tenant_id = $1 AND run_id = $2 AND origin = $3"
	                       " AND sha256 = $4 AND size_bytes = $5 AND filename_hex = $6"
	                       " AND media_type = $7 AND committed = 1"
	                       " AND (expires_at_ms IS NULL OR expires_at_ms > $8)"
	                       /* The answer carries the put's own label: an
	                        * equal artifact stored under another trust
	                        * (an older rule's) is not reused for it. */
	                       " AND trust = $9"
	                       " ORDER BY artifact_id LIMIT 1",
	                       p, 9, ret, 1, &n, err);
	*ret_found = r == 0 && n == 1;
	return r;
}
