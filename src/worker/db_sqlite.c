/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker database on SQLite, the embedded default: one file,
 * STATE_DIR/worker.db, its statements the shared ones (db_sql.c).
 *
 * Why each setting:
 *   - WAL: readers (check before every tool call, the reaper's question)
 *     never wait for a writer, and a writer never waits for them;
 *   - synchronous=FULL: a commit is on disk before the call returns, so a
 *     fence survives a power loss too (with NORMAL the last commits could
 *     roll back, and a fenced holder's epoch become current again);
 *   - busy_timeout: two handles (or two processes) on one file wait for
 *     each other's write lock for a while instead of failing at once;
 *   - BEGIN IMMEDIATE for every write: the write lock is taken before the
 *     lease row is read, so no two writers decide on the same row (a
 *     deferred transaction would read, then fail to upgrade with BUSY);
 *   - foreign keys on: a sandbox row names a lease that exists;
 *   - the file made 0600 before SQLite opens it (the -wal and -shm files
 *     take its mode), in a directory owned by this user that nobody else
 *     can write: the leases are tenant data.
 */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "worker/db_sql.h"

/* How long a writer waits for another's lock before the call fails
 * (retriable): far above one transaction's few milliseconds. */
#define SQLITE_BUSY_TIMEOUT_MS 5000
#define SQLITE_DB_FILE "worker.db"

typedef struct sqlite_ctx {
	worker_db_conn conn; /* first: db_sql.h */
	sqlite3 *db;
	char where[64 + 4096];
} sqlite_ctx;

static const char *sqlite_where(void *c)
{
	return ((sqlite_ctx *)c)->where;
}

static int sqlite_fail(sqlite_ctx *c, airlock_error *err, const char *what)
{
	/* SQLite's messages name tables, columns and constraints: nothing of a
	 * credential, and the path is the operator's own setting. */
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0, "%s: %s: %s", c->where,
	                         what, sqlite3_errmsg(c->db));
}

static int sqlite_script(void *ctx, const char *sql, airlock_error *err)
{
	sqlite_ctx *c = ctx;
	if (sqlite3_exec(c->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return sqlite_fail(c, err, "statement");
	return 0;
}

static int sqlite_begin(void *ctx, worker_db_txn kind, airlock_error *err)
{
	/* READ is deferred: in WAL mode its snapshot starts at its first read
	 * and holds to its end. WRITE and MIGRATE take the one write lock at
	 * once. */
	return sqlite_script(ctx, kind == WORKER_DB_TXN_READ ? "BEGIN" : "BEGIN IMMEDIATE", err);
}

static int sqlite_commit(void *ctx, airlock_error *err)
{
	return sqlite_script(ctx, "COMMIT", err);
}

static void sqlite_rollback(void *ctx)
{
	sqlite_ctx *c = ctx;
	if (!sqlite3_get_autocommit(c->db))
		sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Each call prepares its statement: they are few and short, a prepare
 * costs microseconds, and nothing is kept that a schema change could make
 * stale. */
static int sqlite_query(void *ctx, const char *sql, const worker_db_param *params, int nparams,
                        worker_db_row_fn fn, void *arg, int64_t *ret_changes, airlock_error *err)
{
	sqlite_ctx *c = ctx;
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK)
		return sqlite_fail(c, err, "prepare");
	int r = 0;
	/* $1..$N are named parameters to SQLite: bind each by its name. */
	for (int i = 0; i < nparams && r == 0; i++) {
		char name[16];
		snprintf(name, sizeof(name), "$%d", i + 1);
		int idx = sqlite3_bind_parameter_index(st, name);
		if (idx == 0)
			continue; /* a statement that does not use this one */
		int rc = params[i].text
		                 ? sqlite3_bind_text(st, idx, params[i].text, -1, SQLITE_STATIC)
		                 : sqlite3_bind_int64(st, idx, params[i].num);
		if (rc != SQLITE_OK)
			r = sqlite_fail(c, err, "bind");
	}
	while (r == 0) {
		int rc = sqlite3_step(st);
		if (rc == SQLITE_DONE)
			break;
		if (rc != SQLITE_ROW) {
			r = sqlite_fail(c, err, "step");
			break;
		}
		if (!fn)
			continue;
		int n = sqlite3_column_count(st);
		const char *cols[WORKER_DB_COLS_MAX];
		if (n > (int)ARRAY_SIZE(cols)) {
			r = -EBADMSG;
			break;
		}
		for (int i = 0; i < n; i++)
			cols[i] = (const char *)sqlite3_column_text(st, i);
		r = fn(arg, cols, n);
	}
	if (r == 0 && ret_changes)
		*ret_changes = sqlite3_changes64(c->db);
	sqlite3_finalize(st);
	return r;
}

static const worker_db_driver sqlite_driver = {
	.begin = sqlite_begin,
	.commit = sqlite_commit,
	.rollback = sqlite_rollback,
	.query = sqlite_query,
	.script = sqlite_script,
	.lease_lock_sql = WORKER_DB_SQL_LEASE_READ,
	.where = sqlite_where,
};

static void sqlite_free(void *ctx)
{
	sqlite_ctx *c = ctx;
	if (!c)
		return;
	sqlite3_close_v2(c->db);
	free(c);
}

static const worker_db_ops sqlite_ops = WORKER_DB_SQL_OPS("sqlite", sqlite_free);

static int check_state_dir(const char *dir, airlock_error *err)
{
	struct stat st;
	if (stat(dir, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno,
		                         "worker state directory %s", dir);
	if (!S_ISDIR(st.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker state directory %s is not a directory", dir);
	if (st.st_uid != geteuid())
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker state directory %s is owned by uid %u, not by this "
		                         "process's uid %u",
		                         dir, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & 022)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker state directory %s has mode %04o: group and others "
		                         "must not write it (chmod 700)",
		                         dir, (unsigned)(st.st_mode & 07777));
	return 0;
}

static int sqlite_setup(sqlite_ctx *c, airlock_error *err)
{
	if (sqlite3_extended_result_codes(c->db, 1) != SQLITE_OK ||
	    sqlite3_busy_timeout(c->db, SQLITE_BUSY_TIMEOUT_MS) != SQLITE_OK)
		return sqlite_fail(c, err, "setup");
	/* journal_mode answers the mode it set: a file system that cannot
	 * hold WAL's shared memory says so here, not later. */
	char mode[16] = "";
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(c->db, "PRAGMA journal_mode=WAL", -1, &st, NULL) != SQLITE_OK)
		return sqlite_fail(c, err, "journal_mode");
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		snprintf(mode, sizeof(mode), "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	if (strcmp(mode, "wal") != 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "%s: journal_mode WAL refused (got \"%s\")", c->where, mode);
	int r = sqlite_script(c, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON", err);
	if (r < 0)
		return r;
	return worker_db_sql_migrate(c, err);
}

int worker_db_open_sqlite(const char *state_dir, worker_db **ret, airlock_error *err)
{
	if (!state_dir || !*state_dir || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker database: no state directory is configured");
	int r = check_state_dir(state_dir, err);
	if (r < 0)
		return r;
	sqlite_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker database");
	c->conn.driver = &sqlite_driver;
	char path[4096 + sizeof(SQLITE_DB_FILE) + 1];
	if (snprintf(path, sizeof(path), "%s/%s", state_dir, SQLITE_DB_FILE) >= (int)sizeof(path) ||
	    snprintf(c->where, sizeof(c->where), "SQLite database %s", path) >=
	            (int)sizeof(c->where)) {
		free(c);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker state directory: the path is too long");
	}
	/* Made here, not by SQLite, so it is 0600 whatever the umask; a
	 * symlink at the name is refused. */
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
	if (fd < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno, "%s", c->where);
		free(c);
		return r;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077)) {
		close(fd);
		r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                      "%s must be a regular file of this user with mode 0600", c->where);
		free(c);
		return r;
	}
	close(fd);
	if (sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
	    SQLITE_OK) {
		r = c->db ? sqlite_fail(c, err, "open")
		          : airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", c->where);
		sqlite_free(c);
		return r;
	}
	r = sqlite_setup(c, err);
	if (r < 0) {
		sqlite_free(c);
		return r;
	}
	return worker_db_new(&sqlite_ops, c, ret, err);
}
