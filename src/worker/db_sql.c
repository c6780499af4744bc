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

#include "util/fault.h"

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
