/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_WORKER_DB_SQL_H
#define AIRLOCK_WORKER_DB_SQL_H

/*
 * What the two SQL adapters share: the schema and its migrations, and the
 * lease operations written once over a small driver each adapter provides
 * (db_sqlite.c, db_pg.c). The statements are the same text for both
 * databases: parameters are written $1, $2, ..., which PostgreSQL numbers
 * and SQLite binds by name; the types are ones both read alike (TEXT,
 * BIGINT). Where the two must differ (how a transaction takes its locks)
 * the driver says so.
 *
 * An adapter's ctx starts with a worker_db_conn, so the shared operations
 * below can stand in its operations table directly.
 */

#include <stdbool.h>
#include <stdint.h>

#include "worker/db.h"

/* ---- the schema -----------------------------------------------------------
 * Migration N takes version N-1 to N; each is applied in its own
 * transaction together with the version row's update. */
typedef struct worker_db_migration {
	int64_t version;
	const char *sql; /* one or more statements */
} worker_db_migration;
extern const worker_db_migration worker_db_migrations[];
extern const size_t worker_db_migrations_count;
/* The version this code writes and reads: the last migration's. */
int64_t worker_db_schema_current(void);

/* ---- the driver ------------------------------------------------------------ */

typedef enum worker_db_txn {
	WORKER_DB_TXN_INVALID = 0,
	/* Reads that must see one snapshot (the reaper's question). */
	WORKER_DB_TXN_READ,
	/* A transaction that writes a lease or a sandbox record. */
	WORKER_DB_TXN_WRITE,
	/* A migration: one migrator at a time on the whole database, even
	 * before any table exists. */
	WORKER_DB_TXN_MIGRATE,
	WORKER_DB_TXN__MAX
} worker_db_txn;

/* A statement's parameter: text when text is not NULL, else num. */
typedef struct worker_db_param {
	const char *text;
	int64_t num;
} worker_db_param;
#define DB_TEXT(s) ((worker_db_param){ .text = (s) })
#define DB_NUM(n) ((worker_db_param){ .text = NULL, .num = (n) })

/* One result row: its columns as text, NULL for SQL NULL; valid during
 * the call. A negative return stops the query and is returned. A row of
 * more than WORKER_DB_COLS_MAX columns is -EBADMSG from the driver. */
#define WORKER_DB_COLS_MAX 16
typedef int (*worker_db_row_fn)(void *arg, const char *const *cols, int ncols);

typedef struct worker_db_driver {
	int (*begin)(void *ctx, worker_db_txn kind, airlock_error *err);
	int (*commit)(void *ctx, airlock_error *err);
	/* After a failed statement or a decision to write nothing; never fails
	 * in a way the caller could act on (a broken connection is noticed by
	 * the next call). */
	void (*rollback)(void *ctx);
	/* One statement with parameters; fn (may be NULL) per row;
	 * *ret_changes (may be NULL): the rows an INSERT, UPDATE or DELETE
	 * changed. */
	int (*query)(void *ctx, const char *sql, const worker_db_param *params, int nparams,
	             worker_db_row_fn fn, void *arg, int64_t *ret_changes, airlock_error *err);
	/* Several statements without parameters (a migration). */
	int (*script)(void *ctx, const char *sql, airlock_error *err);
	/* The statement that reads a run's lease row ($1: run_id) in a WRITE
	 * transaction and keeps it locked until commit: PostgreSQL adds FOR
	 * UPDATE; SQLite's BEGIN IMMEDIATE holds the database's one write
	 * lock already. */
	const char *lease_lock_sql;
	/* Names the database in a message (never with a credential): "SQLite
	 * database /var/lib/airlock/worker.db". */
	const char *(*where)(void *ctx);
} worker_db_driver;

/* The first member of each SQL adapter's ctx. */
typedef struct worker_db_conn {
	const worker_db_driver *driver;
} worker_db_conn;

/* The statement that reads a lease row ($1: run_id): tenant_id, epoch,
 * expires_at_ms, released (0/1), bridge (0/1). A driver's lease_lock_sql
 * is this text, locked its way. */
#define WORKER_DB_SQL_LEASE_READ                                                                   \
	"SELECT tenant_id, epoch, expires_at_ms,"                                                  \
	" CASE WHEN released_at_ms IS NULL THEN 0 ELSE 1 END, bridge"                              \
	" FROM airlock_leases WHERE run_id = $1"

/* Apply the missing migrations, each in a MIGRATE transaction; a database
 * newer than this code is refused naming driver->where. */
int worker_db_sql_migrate(void *ctx, airlock_error *err);

/* The operations, over ctx's driver: they fill a worker_db_ops's slots. */
int worker_db_sql_claim(void *ctx, const worker_db_claim_request *req,
                        worker_db_claim_result *ret, airlock_error *err);
int worker_db_sql_release(void *ctx, const char *run_id, const char *tenant_id, int64_t epoch,
                          int64_t now_ms, worker_db_release_result *ret, airlock_error *err);
int worker_db_sql_check(void *ctx, const char *run_id, const char *tenant_id, int64_t epoch,
                        int64_t now_ms, worker_db_check_result *ret, airlock_error *err);
int worker_db_sql_set_environment(void *ctx, const char *run_id, int64_t epoch,
                                  const char *environment_id, const char *handle,
                                  const char *token_sha256, int64_t now_ms,
                                  worker_db_lease_state *ret, airlock_error *err);
int worker_db_sql_bridge_lookup(void *ctx, const char *environment_id, int64_t now_ms,
                                worker_db_bridge_result *ret, airlock_error *err);
int worker_db_sql_environment_handle(void *ctx, const char *environment_id, char **ret,
                                     airlock_error *err);
int worker_db_sql_clear_environment(void *ctx, const char *run_id, int64_t epoch,
                                    const char *environment_id, bool *ret_cleared,
                                    airlock_error *err);
int worker_db_sql_stale(void *ctx, const worker_db_sandbox *list, size_t n, int64_t now_ms,
                        bool *ret_stale, airlock_error *err);
int worker_db_sql_ended(void *ctx, int64_t now_ms, worker_db_sandbox *ret, size_t max,
                        size_t *ret_n, airlock_error *err);
int worker_db_sql_schema_version(void *ctx, int64_t *ret, airlock_error *err);
int worker_db_sql_artifact_insert(void *ctx, const worker_db_artifact *a, int64_t cap,
                                  worker_db_artifact_insert_result *ret, airlock_error *err);
int worker_db_sql_artifact_commit(void *ctx, const char *artifact_id, bool *ret_found,
                                  airlock_error *err);
int worker_db_sql_artifact_get(void *ctx, const char *artifact_id, worker_db_artifact *ret,
                               bool *ret_found, airlock_error *err);
int worker_db_sql_artifact_delete(void *ctx, const char *artifact_id, bool *ret_deleted,
                                  airlock_error *err);
int worker_db_sql_artifact_due(void *ctx, int64_t now_ms, int64_t pending_before_ms,
                               worker_db_artifact_key *ret, size_t max, size_t *ret_n,
                               airlock_error *err);
int worker_db_sql_artifact_list(void *ctx, const worker_db_artifact_query *q,
                                worker_db_artifact *ret, size_t *ret_n, airlock_error *err);
int worker_db_sql_artifact_attach(void *ctx, const char *artifact_id, const char *tenant_id,
                                  const char *run_id, int64_t now_ms, bool *ret_done,
                                  airlock_error *err);
int worker_db_sql_artifact_tenant_bytes(void *ctx, const char *tenant_id, int64_t *ret,
                                        airlock_error *err);
int worker_db_sql_artifact_delete_due(void *ctx, const char *artifact_id, int64_t now_ms,
                                      int64_t pending_before_ms, bool *ret_deleted,
                                      airlock_error *err);
int worker_db_sql_artifact_get_visible(void *ctx, const char *artifact_id, const char *tenant_id,
                                       int64_t now_ms, worker_db_artifact *ret, bool *ret_found,
                                       airlock_error *err);
int worker_db_sql_artifact_store_bind(void *ctx, const char *store_identity,
                                      const char *database_identity,
                                      char ret_store[AIRLOCK_UUID_STR_LEN + 1],
                                      char ret_database[AIRLOCK_UUID_STR_LEN + 1],
                                      airlock_error *err);
int worker_db_sql_artifact_same(void *ctx, const worker_db_artifact *a, int64_t now_ms,
                                worker_db_artifact *ret, bool *ret_found, airlock_error *err);

#define WORKER_DB_SQL_OPS(adapter_name, free_fn)                                                   \
	{                                                                                          \
		.version = WORKER_DB_OPS_VERSION, .name = (adapter_name),                          \
		.claim = worker_db_sql_claim, .release = worker_db_sql_release,                    \
		.check = worker_db_sql_check, .set_environment = worker_db_sql_set_environment,    \
		.environment_handle = worker_db_sql_environment_handle,                            \
		.clear_environment = worker_db_sql_clear_environment,                              \
		.stale = worker_db_sql_stale, .ended = worker_db_sql_ended,                        \
		.schema_version = worker_db_sql_schema_version, .free = (free_fn),                 \
		.bridge_lookup = worker_db_sql_bridge_lookup,                                      \
		.artifact_insert = worker_db_sql_artifact_insert,                                  \
		.artifact_commit = worker_db_sql_artifact_commit,                                  \
		.artifact_get = worker_db_sql_artifact_get,                                        \
		.artifact_delete = worker_db_sql_artifact_delete,                                  \
		.artifact_due = worker_db_sql_artifact_due,                                        \
		.artifact_list = worker_db_sql_artifact_list,                                      \
		.artifact_attach = worker_db_sql_artifact_attach,                                  \
		.artifact_tenant_bytes = worker_db_sql_artifact_tenant_bytes,                      \
		.artifact_same = worker_db_sql_artifact_same,                                      \
		.artifact_delete_due = worker_db_sql_artifact_delete_due,                          \
		.artifact_store_bind = worker_db_sql_artifact_store_bind,                          \
		.artifact_get_visible = worker_db_sql_artifact_get_visible,                        \
	}

#endif
