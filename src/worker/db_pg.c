/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker database on PostgreSQL (libpq), for production: several
 * workers may share one database. The statements are the shared ones
 * (db_sql.c); this file connects, runs them, and decides what a message
 * may say.
 *
 * Transactions: a write is READ COMMITTED and reads its run's lease row
 * FOR UPDATE, which serializes every write to one run across workers and,
 * when it had to wait, returns the row as the other worker committed it;
 * the reaper's question is REPEATABLE READ READ ONLY, one snapshot for the
 * whole answer; a migration holds a transaction-scoped advisory lock, so
 * two workers starting at once migrate one after the other (CREATE TABLE
 * IF NOT EXISTS alone races in PostgreSQL).
 *
 * Nothing waits without bound. A start that cannot reach the server fails
 * after connect_timeout; the migration lock is tried, not waited for, and
 * a start that has not had it after PG_MIGRATION_LOCK_WAIT_MS fails (a
 * worker hung inside its migration keeps the lock); every statement runs
 * under the server settings of PG_SERVER_DEFAULTS (a row lock, a statement,
 * an idle transaction, each bounded) and a TCP connection under the
 * keepalive and user-timeout defaults of pg_defaults[], so a server or
 * network that stops answering fails the call instead of blocking it. A
 * connection string that sets one of these itself keeps its own value.
 *
 * The connection string is a credential. It comes from memory or from a
 * file checked like the service credential's (worker_db_open_pg_file);
 * this code never writes it anywhere, passes it to no program, and keeps
 * no copy once connected (libpq keeps its parsed options inside the
 * connection, as it must to reconnect). What a message may carry:
 *   - libpq's parse errors can quote any fragment of the string (`missing
 *     "=" after "..."`, an invalid URI's percent-encoded token), password
 *     included: they are never passed on, our own message replaces them;
 *   - libpq's connection and query messages name the socket or host, the
 *     port, the user and the database, and the server's own text: those
 *     are not the secret, and an operator needs them to fix a setting, so
 *     they pass. That holds only when libpq parsed the password whole: a
 *     URI's user information ends at its first '@' (or '/'), so a password
 *     holding an unencoded '@' or '/' spills into the host, the port or
 *     the database, and an '@' in the query part (a password= value) makes
 *     libpq read all before it as the user; messages quote each of them.
 *     A URI is therefore refused unless it holds at most one '@' and that
 *     '@' comes before any '/' or '?' (pg_uri_ambiguous); then everything
 *     after it is free of the password. In the keyword=value form a value ends at unquoted
 *     white space and a quoted one ('a b', with \' and \\) is read whole,
 *     so a password written as libpq documents is parsed whole; one with
 *     white space left unquoted either fails to parse (dropped, above) or
 *     reads as a further keyword=value, which no parser could tell from
 *     one the operator meant, so the documentation says to quote it.
 *     libpq does not print a password, but the server or a future libpq
 *     might quote one (a role named after it, an option echoed), so every
 *     message is scrubbed first: each value of an option libpq marks
 *     secret (dispchar "*": password, sslpassword, ...) is replaced by
 *     "[redacted]" wherever it appears;
 *   - no notice is printed: libpq's default notice processor writes to
 *     stderr, and library code does not log.
 */
#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "airlock/caps.h"
#include "airlock/credential_file.h"
#include "util/cleanup.h"
#include "worker/db_sql.h"

/* The option values scrubbed from messages: libpq marks a handful secret;
 * more than this in one string is refused rather than half-scrubbed. */
#define PG_SECRETS_MAX 8
/* A start that cannot reach the server fails within this, when the string
 * sets no connect_timeout of its own: an unreachable database fails the
 * worker's start, never hangs it. */
#define PG_CONNECT_TIMEOUT_DEFAULT "10"
/* Server settings for every session, put before the string's own
 * `options`, whose -c settings the server applies later and so keep
 * theirs:
 *   - lock_timeout 10 s: a write holds its run's row lock for a few
 *     statements of milliseconds; ten seconds of waiting means the holder
 *     is stuck, and the call fails instead of blocking the worker;
 *   - statement_timeout 30 s: every statement reads or writes one run's
 *     rows or a bounded list by key; a statement running this long is a
 *     server in trouble (a migration that needs longer says so itself with
 *     SET LOCAL);
 *   - idle_in_transaction_session_timeout 60 s: our transactions never
 *     wait on anything between statements, so a session idle inside one is
 *     a worker that hung holding row locks or the migration lock; the
 *     server ends it and the others' waits end. */
#define PG_SERVER_DEFAULTS                                                                         \
	"-c lock_timeout=10s -c statement_timeout=30s -c idle_in_transaction_session_timeout=60s"
/* The migration lock's key: any constant every worker shares ("airlock"). */
#define PG_MIGRATION_LOCK "7091155068528747"
/* A start waits at most this long for another worker's migration, trying
 * the lock every PG_MIGRATION_LOCK_TRY_MS: migrations are a few CREATE
 * TABLEs, and a start behind a migrator that hung fails rather than hangs
 * (the server ends the hung session after its idle timeout, and the next
 * start goes through). */
#define PG_MIGRATION_LOCK_WAIT_MS 15000
#define PG_MIGRATION_LOCK_TRY_MS 100

typedef struct pg_ctx {
	worker_db_conn conn; /* first: db_sql.h */
	PGconn *pg;
	char *secrets[PG_SECRETS_MAX];
	size_t nsecrets;
	char where[512];
} pg_ctx;

static const char *pg_where(void *c)
{
	return ((pg_ctx *)c)->where;
}

/* msg with every secret value replaced, into out (cut to its size). */
static void pg_scrub(const pg_ctx *c, const char *msg, char *out, size_t size)
{
	size_t o = 0;
	for (const char *p = msg; *p && o + 1 < size;) {
		size_t hit = 0;
		for (size_t i = 0; i < c->nsecrets && !hit; i++) {
			size_t n = strlen(c->secrets[i]);
			if (n && strncmp(p, c->secrets[i], n) == 0)
				hit = n;
		}
		if (hit) {
			int w = snprintf(out + o, size - o, "[redacted]");
			o = w < 0 || (size_t)w >= size - o ? size - 1 : o + (size_t)w;
			p += hit;
			continue;
		}
		/* libpq ends its messages with a newline and may hold several
		 * lines: one line in ours. */
		out[o++] = (*p == '\n' || *p == '\r') ? ' ' : *p;
		p++;
	}
	while (o > 0 && out[o - 1] == ' ')
		o--;
	out[o] = 0;
}

static int pg_fail(pg_ctx *c, airlock_error *err, airlock_errclass cls, const char *what,
                   const char *libpq_msg)
{
	char msg[AIRLOCK_ERROR_MESSAGE_MAX];
	pg_scrub(c, libpq_msg ? libpq_msg : "", msg, sizeof(msg));
	return airlock_error_set(err, cls, 0, "%s: %s: %s", c->where, what, msg);
}

static int pg_result_fail(pg_ctx *c, PGresult *res, airlock_error *err, const char *what)
{
	const char *m = res ? PQresultErrorMessage(res) : NULL;
	int r = pg_fail(c, err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, what,
	                m && *m ? m : PQerrorMessage(c->pg));
	PQclear(res);
	return r;
}

static int pg_script(void *ctx, const char *sql, airlock_error *err)
{
	pg_ctx *c = ctx;
	PGresult *res = PQexec(c->pg, sql);
	ExecStatusType s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
		return pg_result_fail(c, res, err, "statement");
	PQclear(res);
	return 0;
}

static void pg_rollback(void *ctx);

static int64_t pg_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* BEGIN and the migration lock, tried until PG_MIGRATION_LOCK_WAIT_MS
 * have passed: pg_advisory_xact_lock would wait as long as the holder
 * keeps its transaction open. On failure no transaction stays open. */
static int pg_begin_migration(pg_ctx *c, airlock_error *err)
{
	int r = pg_script(c, "BEGIN", err);
	if (r < 0)
		return r;
	int64_t deadline = pg_now_ms() + PG_MIGRATION_LOCK_WAIT_MS;
	for (;;) {
		PGresult *res = PQexec(c->pg,
		                       "SELECT pg_try_advisory_xact_lock(" PG_MIGRATION_LOCK ")");
		if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
		    PQnfields(res) != 1) {
			r = pg_result_fail(c, res, err, "migration lock");
			break;
		}
		bool held = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		PQclear(res);
		if (held)
			return 0;
		if (pg_now_ms() >= deadline) {
			r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                      "%s: another worker has held the schema migration lock "
			                      "(advisory lock " PG_MIGRATION_LOCK ") for more than the "
			                      "%d s a start waits for it: its migration is hung or "
			                      "slow; the start fails rather than wait",
			                      c->where, PG_MIGRATION_LOCK_WAIT_MS / 1000);
			break;
		}
		struct timespec nap = { 0, PG_MIGRATION_LOCK_TRY_MS * 1000000L };
		nanosleep(&nap, NULL);
	}
	pg_rollback(c);
	return r;
}

static int pg_begin(void *ctx, worker_db_txn kind, airlock_error *err)
{
	pg_ctx *c = ctx;
	/* A connection the server or the network dropped is made again
	 * here, between transactions, where nothing of ours is lost. */
	if (PQstatus(c->pg) == CONNECTION_BAD) {
		PQreset(c->pg);
		if (PQstatus(c->pg) != CONNECTION_OK)
			return pg_fail(c, err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "reconnect",
			               PQerrorMessage(c->pg));
	}
	switch (kind) {
	case WORKER_DB_TXN_READ:
		return pg_script(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", err);
	case WORKER_DB_TXN_WRITE:
		return pg_script(ctx, "BEGIN", err);
	case WORKER_DB_TXN_MIGRATE:
		return pg_begin_migration(c, err);
	case WORKER_DB_TXN_INVALID:
	case WORKER_DB_TXN__MAX:
		break;
	}
	return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0, "%s: unknown transaction kind",
	                         c->where);
}

static int pg_commit(void *ctx, airlock_error *err)
{
	return pg_script(ctx, "COMMIT", err);
}

static void pg_rollback(void *ctx)
{
	pg_ctx *c = ctx;
	if (PQtransactionStatus(c->pg) == PQTRANS_IDLE || PQstatus(c->pg) != CONNECTION_OK)
		return;
	PQclear(PQexec(c->pg, "ROLLBACK"));
}

#define PG_PARAMS_MAX 16

static int pg_query(void *ctx, const char *sql, const worker_db_param *params, int nparams,
                    worker_db_row_fn fn, void *arg, int64_t *ret_changes, airlock_error *err)
{
	pg_ctx *c = ctx;
	if (nparams > PG_PARAMS_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0, "%s: too many parameters",
		                         c->where);
	char nums[PG_PARAMS_MAX][24];
	const char *values[PG_PARAMS_MAX];
	for (int i = 0; i < nparams; i++) {
		if (params[i].text) {
			values[i] = params[i].text;
		} else {
			snprintf(nums[i], sizeof(nums[i]), "%lld", (long long)params[i].num);
			values[i] = nums[i];
		}
	}
	/* Types left to the server: each parameter meets a column or a
	 * LIMIT, which types it (TEXT or BIGINT). */
	PGresult *res = PQexecParams(c->pg, sql, nparams, NULL, values, NULL, NULL, 0);
	ExecStatusType s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
		return pg_result_fail(c, res, err, "query");
	int r = 0;
	int ncols = PQnfields(res);
	const char *cols[WORKER_DB_COLS_MAX];
	if (fn && ncols > (int)ARRAY_SIZE(cols))
		r = -EBADMSG;
	for (int row = 0; fn && r == 0 && row < PQntuples(res); row++) {
		for (int i = 0; i < ncols; i++)
			cols[i] = PQgetisnull(res, row, i) ? NULL : PQgetvalue(res, row, i);
		r = fn(arg, cols, ncols);
	}
	if (r == 0 && ret_changes) {
		const char *n = PQcmdTuples(res);
		*ret_changes = n && *n ? strtoll(n, NULL, 10) : 0;
	}
	PQclear(res);
	return r;
}

static const worker_db_driver pg_driver = {
	.begin = pg_begin,
	.commit = pg_commit,
	.rollback = pg_rollback,
	.query = pg_query,
	.script = pg_script,
	.lease_lock_sql = WORKER_DB_SQL_LEASE_READ " FOR UPDATE",
	.where = pg_where,
};

static void pg_free(void *ctx)
{
	pg_ctx *c = ctx;
	if (!c)
		return;
	if (c->pg)
		PQfinish(c->pg);
	for (size_t i = 0; i < c->nsecrets; i++) {
		explicit_bzero(c->secrets[i], strlen(c->secrets[i]));
		free(c->secrets[i]);
	}
	free(c);
}

static const worker_db_ops pg_ops = WORKER_DB_SQL_OPS("postgresql", pg_free);

static void pg_quiet(void *arg, const char *message)
{
	/* Notices (CREATE TABLE IF NOT EXISTS's "already exists, skipping")
	 * are the server talking to a person; nobody here reads them. */
}

static void wipe_options(PQconninfoOption *opts)
{
	for (PQconninfoOption *o = opts; o && o->keyword; o++)
		if (o->val)
			explicit_bzero(o->val, strlen(o->val));
	PQconninfoFree(opts);
}

/* libpq options set when the string sets none, each only where this
 * libpq knows it (PQconninfoParse lists every option it knows). A TCP
 * connection to a host that went away would otherwise block a call until
 * the kernel gives up (minutes to hours):
 *   - keepalives after 10 s idle, every 5 s, 3 unanswered: a dead peer is
 *     found within about 25 s even while we wait for an answer;
 *   - tcp_user_timeout 30 s: data we sent and nobody acknowledged for 30 s
 *     ends the connection (keepalives do not probe while data is unsent).
 * They do not apply to a Unix socket, where the server is local. */
static const struct {
	const char *key;
	const char *val;
} pg_defaults[] = {
	{ "connect_timeout", PG_CONNECT_TIMEOUT_DEFAULT },
	{ "keepalives", "1" },
	{ "keepalives_idle", "10" },
	{ "keepalives_interval", "5" },
	{ "keepalives_count", "3" },
	{ "tcp_user_timeout", "30000" },
};

/* The parsed options as libpq's keyword and value arrays, the secret
 * values kept for scrubbing, pg_defaults[] where the string sets none,
 * and `options` led by PG_SERVER_DEFAULTS (*ret_options, freed by the
 * caller). */
static int pg_options(pg_ctx *c, PQconninfoOption *opts, const char **keys, const char **vals,
                      size_t max, char **ret_options, airlock_error *err)
{
	size_t n = 0;
	for (PQconninfoOption *o = opts; o->keyword; o++) {
		const char *val = o->val;
		for (size_t i = 0; !val && i < ARRAY_SIZE(pg_defaults); i++)
			if (strcmp(o->keyword, pg_defaults[i].key) == 0)
				val = pg_defaults[i].val;
		if (strcmp(o->keyword, "options") == 0) {
			size_t len = sizeof(PG_SERVER_DEFAULTS) + 1 + (val ? strlen(val) : 0);
			*ret_options = malloc(len);
			if (!*ret_options)
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM,
				                         "worker database");
			snprintf(*ret_options, len, "%s%s%s", PG_SERVER_DEFAULTS, val ? " " : "",
			         val ? val : "");
			val = *ret_options;
		}
		if (!val)
			continue;
		if (n + 1 >= max)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "worker database connection string: too many options");
		if (o->dispchar && strchr(o->dispchar, '*') && *val) {
			if (c->nsecrets == PG_SECRETS_MAX)
				return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
				                         "worker database connection string: too many "
				                         "secret options");
			c->secrets[c->nsecrets] = strdup(val);
			if (!c->secrets[c->nsecrets])
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM,
				                         "worker database");
			c->nsecrets++;
		}
		keys[n] = o->keyword;
		vals[n] = val;
		n++;
	}
	if (!*ret_options)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker database: this libpq has no \"options\" setting, "
		                         "so lock and statement timeouts cannot be set");
	keys[n] = NULL;
	vals[n] = NULL;
	return 0;
}

/* Whether conninfo is a postgresql:// or postgres:// URI (libpq's own
 * prefixes, matched as libpq matches them) that libpq might not read as
 * written: more than one '@', or an '@' after the first '/' or '?'.
 * libpq ends the user information at the first '@' or '/' (not at '?'),
 * so a password with an unencoded '@' or '/' would be cut and its rest
 * read as host, port or database, and an '@' in the query part would make
 * what precedes it the user; messages name all of these. With at most
 * one '@', before any '/' or '?', the user information is everything
 * before it, the password libpq parses is the whole password
 * (scrubbed from messages), and nothing after the '@' holds any of it. */
static bool pg_uri_ambiguous(const char *conninfo)
{
	static const char *const prefixes[] = { "postgresql://", "postgres://" };
	const char *rest = NULL;
	for (size_t i = 0; !rest && i < ARRAY_SIZE(prefixes); i++)
		if (strncmp(conninfo, prefixes[i], strlen(prefixes[i])) == 0)
			rest = conninfo + strlen(prefixes[i]);
	if (!rest)
		return false;
	const char *at = strchr(rest, '@');
	if (!at)
		return false;
	return strchr(at + 1, '@') || (size_t)(at - rest) > strcspn(rest, "/?");
}

static int pg_connect(pg_ctx *c, const char *conninfo, airlock_error *err)
{
	if (pg_uri_ambiguous(conninfo))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker database connection string is a postgresql:// URI "
		                         "with more than one '@', or an '@' after a '/' or '?': "
		                         "libpq would read part of the user or password as the "
		                         "host, port or database; percent-encode '@' (%%40), '/' "
		                         "(%%2F) and '?' (%%3F) in the user and password (its text "
		                         "is not shown: it holds the password)");
	char *perr = NULL;
	PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);
	if (!opts) {
		/* perr may quote the string: wiped and dropped unread (above). */
		if (perr)
			explicit_bzero(perr, strlen(perr));
		PQfreemem(perr);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker database connection string does not parse as "
		                         "key=value pairs or a postgresql:// URI (its text is not "
		                         "shown: it holds the password)");
	}
	const char *keys[64], *vals[64];
	char *options = NULL;
	int r = pg_options(c, opts, keys, vals, ARRAY_SIZE(keys), &options, err);
	if (r == 0) {
		c->pg = PQconnectdbParams(keys, vals, 0);
		if (!c->pg)
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker database");
	}
	wipe_options(opts);
	free(options);
	if (r < 0)
		return r;
	PQsetNoticeProcessor(c->pg, pg_quiet, NULL);
	/* Named in every later message: none of them holds any of the
	 * password, since pg_uri_ambiguous refused every URI where it could. */
	const char *db = PQdb(c->pg), *host = PQhost(c->pg), *port = PQport(c->pg);
	snprintf(c->where, sizeof(c->where), "PostgreSQL database %s on %s port %s",
	         db && *db ? db : "(default)", host && *host ? host : "(default)",
	         port && *port ? port : "(default)");
	if (PQstatus(c->pg) != CONNECTION_OK)
		return pg_fail(c, err, AIRLOCK_ERR_CONFIG, "cannot connect", PQerrorMessage(c->pg));
	return 0;
}

int worker_db_open_pg(const char *conninfo, worker_db **ret, airlock_error *err)
{
	if (!conninfo || !*conninfo || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker database: no connection string is configured");
	pg_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker database");
	c->conn.driver = &pg_driver;
	snprintf(c->where, sizeof(c->where), "PostgreSQL database");
	int r = pg_connect(c, conninfo, err);
	if (r == 0)
		r = worker_db_sql_migrate(c, err);
	if (r < 0) {
		pg_free(c);
		return r;
	}
	return worker_db_new(&pg_ops, c, ret, err);
}

int worker_db_open_pg_file(const char *path, worker_db **ret, airlock_error *err)
{
	if (!path || !*path)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker database: no connection file is configured");
	char *text = NULL;
	size_t len = 0;
	int r = airlock_credential_file_read_text(path, "worker database connection file",
	                                          AIRLOCK_WORKER_DB_CONNINFO_MAX, &text, &len, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < len && r == 0; i++)
		if ((unsigned char)text[i] < 0x20 || (unsigned char)text[i] == 0x7f)
			r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                      "worker database connection file %s holds a control byte "
			                      "or a second line: the connection string is one line",
			                      path);
	if (r == 0 && len == 0)
		r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                      "worker database connection file %s is empty", path);
	if (r == 0)
		r = worker_db_open_pg(text, ret, err);
	explicit_bzero(text, len);
	free(text);
	return r;
}
