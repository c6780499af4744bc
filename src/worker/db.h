/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_WORKER_DB_H
#define AIRLOCK_WORKER_DB_H

/*
 * The worker's database: a port (a versioned table of operations, an
 * opaque handle, wrappers that check every argument once for every
 * adapter) with two adapters, SQLite (db_sqlite.c, the embedded default: a
 * file under the worker's state directory) and PostgreSQL (db_pg.c, libpq:
 * several workers may share one database). docs/worker-db.md has the
 * schema, the migrations and why each operation is safe with two workers.
 *
 * What it holds: per run, its lease (tenant, epoch, expiry, released) and
 * the sandbox each claim recorded (environment id). The rules are the
 * specification's "Nothing outlives its lease":
 *   - a claim with a higher epoch fences the older one (its sandbox is
 *     returned to be destroyed), the same epoch renews, a lower epoch is
 *     refused and changes nothing; a run belongs to the tenant that first
 *     claimed it;
 *   - a lease not renewed within its TTL is lost: a tool call under it is
 *     refused, and its sandbox is stale to the reaper;
 *   - a sandbox record stays until the caller says its destroy happened
 *     (worker_db_clear_environment), so a worker that dies between the end
 *     of a claim and the destroy leaves a row the next worker finds
 *     (worker_db_ended).
 *
 * Every operation is one transaction, committed before it returns (a
 * killed worker loses nothing it answered). Times are wall-clock
 * milliseconds the caller passes (tests control the clock). Leases compare
 * expires_at_ms with the caller's now: workers sharing a database must
 * share a clock to within a small fraction of the TTL.
 *
 * Threads: one handle is one connection and its calls are serialized by
 * the wrapper's lock; concurrency comes from several handles (two handles
 * on one database are two workers as far as the database is concerned).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "airlock/types.h"

/* ---- values ------------------------------------------------------------- */

/* The TTL the wrapper accepts (an epoch is any value >= 0), and the
 * clock's range (48-bit milliseconds: the year 10889), so expires_at = now
 * + ttl never overflows a BIGINT. */
#define WORKER_DB_TTL_SECONDS_MAX 86400
#define WORKER_DB_NOW_MAX ((INT64_C(1) << 48) - 1)
/* The largest artifact size and tenant cap a row holds (1 PiB): far past
 * any store's, and a sum of many never overflows a BIGINT. */
#define WORKER_DB_ARTIFACT_BYTES_MAX (INT64_C(1) << 50)
/* The longest handle a sandbox record holds (printable ASCII). */
#define WORKER_DB_HANDLE_MAX 8192

/* The state of a run's lease as seen by one call (check, a refused claim,
 * a refused set_environment, a release that did nothing). */
typedef enum worker_db_lease_state {
	WORKER_DB_LEASE_INVALID = 0,
	WORKER_DB_LEASE_CURRENT,      /* this tenant, this epoch, unexpired, not released */
	WORKER_DB_LEASE_NONE,         /* no lease was ever claimed for the run */
	WORKER_DB_LEASE_OTHER_TENANT, /* the run was claimed for another tenant */
	WORKER_DB_LEASE_OTHER_EPOCH,  /* the run's current epoch is another one */
	WORKER_DB_LEASE_EXPIRED,      /* this epoch, not renewed within its TTL */
	WORKER_DB_LEASE_RELEASED,     /* this epoch, released */
	/* A renewal (this tenant, this epoch, current) asking for a bridge
	 * other than its claim's: refused, nothing changes (a claim's bridge
	 * is fixed for its life; a new claim with a higher epoch may choose). */
	WORKER_DB_LEASE_OTHER_BRIDGE,
	WORKER_DB_LEASE__MAX
} worker_db_lease_state;
/* "current", "none", "other_tenant", "other_epoch", "expired", "released",
 * "other_bridge" */
const char *worker_db_lease_state_name(worker_db_lease_state s);

typedef enum worker_db_claim_outcome {
	WORKER_DB_CLAIM_INVALID = 0,
	WORKER_DB_CLAIM_NEW,     /* a new claim: no lease, or the older one had ended */
	WORKER_DB_CLAIM_RENEWED, /* the same epoch, current: its expiry moved */
	WORKER_DB_CLAIM_FENCED,  /* a higher epoch took a current lease from its holder */
	WORKER_DB_CLAIM_REFUSED, /* nothing changed: see refusal */
	WORKER_DB_CLAIM__MAX
} worker_db_claim_outcome;
const char *worker_db_claim_outcome_name(worker_db_claim_outcome o); /* "new", ... */

/* One sandbox as the database knows it: the reaper's question names these,
 * and ended() and a claim's fence answer with them. */
typedef struct worker_db_sandbox {
	char environment_id[AIRLOCK_ENVIRONMENT_ID_MAX];
	char run_id[AIRLOCK_ID_MAX + 1];
	int64_t epoch;
} worker_db_sandbox;

/* At most this many sandboxes of older claims come back from one claim
 * (normally one: the claim it fenced); the rest, left by workers that
 * died twice over, are found by worker_db_ended. */
#define WORKER_DB_CLAIM_OLDER_MAX 8

typedef struct worker_db_claim_result {
	worker_db_claim_outcome outcome;
	/* REFUSED: why (OTHER_TENANT; OTHER_EPOCH: the run's epoch is higher;
	 * EXPIRED or RELEASED: this epoch ended, a new claim needs a higher
	 * one; OTHER_BRIDGE: a renewal asked for another bridge). CURRENT
	 * otherwise. */
	worker_db_lease_state refusal;
	int64_t expires_at_ms; /* the lease's expiry after the call (not REFUSED) */
	/* The sandboxes of older claims of the run still recorded (NEW or
	 * FENCED): the caller destroys each and then clears it. */
	worker_db_sandbox older[WORKER_DB_CLAIM_OLDER_MAX];
	size_t older_count;
} worker_db_claim_result;

typedef struct worker_db_check_result {
	worker_db_lease_state state;
	int64_t expires_at_ms;   /* CURRENT */
	bool bridge;             /* CURRENT: the claim asked for the orchestration bridge */
	bool has_environment;    /* CURRENT: the claim recorded a sandbox */
	char environment_id[AIRLOCK_ENVIRONMENT_ID_MAX];
} worker_db_check_result;

typedef struct worker_db_release_result {
	/* CURRENT when this call (or an earlier one) released this epoch, or
	 * when it had expired: the claim is over either way. Otherwise what
	 * the lease is (NONE, OTHER_TENANT, OTHER_EPOCH) and nothing changed. */
	worker_db_lease_state state;
	bool has_environment; /* the claim's sandbox, still recorded: destroy it, then clear it */
	char environment_id[AIRLOCK_ENVIRONMENT_ID_MAX];
} worker_db_release_result;

/* ---- the operations table (what an adapter provides) ---------------------
 * Every method gets arguments the wrapper validated (ids by the core's
 * rules, epoch and now in range, ttl in 1..WORKER_DB_TTL_SECONDS_MAX) and
 * a zeroed result. Each is ONE transaction, committed before it returns 0;
 * on an error nothing of it is committed, *ret is unspecified and err
 * says why (never with the connection string in it). Safe against another
 * connection doing any of them at the same time on the same database
 * (docs/worker-db.md, "Two workers"). Not thread-safe per ctx. */
#define WORKER_DB_OPS_VERSION 4

typedef struct worker_db_claim_request {
	const char *run_id;
	const char *tenant_id;
	int64_t epoch;
	int64_t ttl_seconds;
	int64_t now_ms;
	/* The claim asks for the orchestration bridge (docs/bridge.md): fixed
	 * for the claim's life, a renewal must repeat it. */
	bool bridge;
} worker_db_claim_request;

/* A bridge connection's question about the sandbox it names
 * (worker_db_bridge_lookup). */
typedef struct worker_db_bridge_result {
	bool found; /* a sandbox row of that id */
	char run_id[AIRLOCK_ID_MAX + 1];
	char tenant_id[AIRLOCK_ID_MAX + 1]; /* the run's */
	int64_t epoch;                      /* the row's (its claim's) */
	/* The state of the row's claim at now: CURRENT when the run's lease
	 * is that epoch, unexpired and not released. */
	worker_db_lease_state state;
	bool has_token; /* the claim asked for a bridge and its token was recorded */
	char token_sha256[65]; /* lowercase hex */
} worker_db_bridge_result;

/* ---- artifacts (migration 4; docs/worker-db.md, "Artifacts") --------------
 * One row per artifact: every ArtifactMetadata field plus the storage key
 * and whether its object is committed. A put inserts its row PENDING
 * (charged to its tenant's bytes in the same transaction, so two workers
 * cannot both pass the cap), commits the object in the store, then marks
 * the row COMMITTED; only a committed, unexpired row is an artifact. What a
 * crash leaves between those steps is found by the sweeper
 * (worker_db_artifact_due): a pending row older than the grace period is
 * removed with its object, an expired row likewise, the row first and only
 * while it is still due (artifact_delete_due), so a put that committed or
 * a run that attached the artifact since keeps it; a crash between the two
 * leaves an object no row names, which the sweeper's walk removes. */
typedef struct worker_db_artifact {
	char artifact_id[AIRLOCK_UUID_STR_LEN + 1];
	char tenant_id[AIRLOCK_ID_MAX + 1];
	bool has_run; /* false only for an upload no run has claimed */
	char run_id[AIRLOCK_ID_MAX + 1];
	airlock_artifact_origin origin;
	/* The name as given: any bytes, NUL included (filename_len of them),
	 * at most AIRLOCK_ARTIFACT_FILENAME_MAX; malloc'd in a result
	 * (worker_db_artifact_clear). Stored hex-encoded: neither database's
	 * TEXT holds a NUL, and PostgreSQL's holds no invalid UTF-8. */
	unsigned char *filename;
	size_t filename_len;
	char media_type[256]; /* airlock_media_type_valid */
	int64_t size_bytes;
	char sha256[AIRLOCK_SHA256_HEX_LEN + 1];
	airlock_trust_level trust;
	int64_t created_at_ms;
	bool has_expires;
	int64_t expires_at_ms;
	bool committed;
	/* airlock_artifact_storage_key(tenant_id, artifact_id), the one
	 * function that derives it; kept so an object-store adapter's sweep
	 * and an operator's query need not derive it again. */
	char storage_key[256];
} worker_db_artifact;
void worker_db_artifact_clear(worker_db_artifact *a);

typedef struct worker_db_artifact_insert_result {
	bool inserted; /* false: over the tenant's cap, nothing written */
	int64_t tenant_bytes; /* the tenant's bytes before the call */
} worker_db_artifact_insert_result;

/* What the sweeper removes: (tenant, artifact) names the object. */
typedef struct worker_db_artifact_key {
	char artifact_id[AIRLOCK_UUID_STR_LEN + 1];
	char tenant_id[AIRLOCK_ID_MAX + 1];
	bool committed; /* an expired artifact; false: a pending row past the grace */
} worker_db_artifact_key;

/* Which rows a listing returns. */
typedef struct worker_db_artifact_query {
	const char *tenant_id; /* required */
	const char *run_id;    /* NULL: every run's (and unclaimed uploads) */
	const char *after_id;  /* NULL or "": from the first; else ids above it */
	int64_t now_ms;        /* committed rows unexpired at now only */
	size_t max;            /* 1..AIRLOCK_WORKER_DB_ARTIFACTS_MAX */
} worker_db_artifact_query;

typedef struct worker_db_ops {
	unsigned version; /* WORKER_DB_OPS_VERSION */
	const char *name; /* "sqlite", "postgresql" */

	/* Claim or renew (the rules above; worker_db_claim_decide is the one
	 * decision both adapters apply to the row they locked). */
	int (*claim)(void *ctx, const worker_db_claim_request *req, worker_db_claim_result *ret,
	             airlock_error *err);
	/* Release this tenant's claim at this epoch; the record of its
	 * sandbox stays until cleared. */
	int (*release)(void *ctx, const char *run_id, const char *tenant_id, int64_t epoch,
	               int64_t now_ms, worker_db_release_result *ret, airlock_error *err);
	/* Read-only: is (run, tenant, epoch) the current, unexpired claim. */
	int (*check)(void *ctx, const char *run_id, const char *tenant_id, int64_t epoch,
	             int64_t now_ms, worker_db_check_result *ret, airlock_error *err);
	/* Record the claim's sandbox and the handle that destroys it (the
	 * service's, opaque here), only while (run, epoch) is current at
	 * now: *ret is CURRENT when recorded (or already recorded with the same
	 * id), else the lease's state and nothing was written (the caller
	 * destroys the sandbox it made). A claim holding another sandbox
	 * already is AIRLOCK_ERR_EXECUTION_REJECTED. token_sha256 (64
	 * lowercase hex, the SHA-256 of the sandbox's bridge token) is given
	 * exactly when the claim asked for a bridge; either mismatch is
	 * AIRLOCK_ERR_EXECUTION_REJECTED and nothing is written. */
	int (*set_environment)(void *ctx, const char *run_id, int64_t epoch,
	                       const char *environment_id, const char *handle,
	                       const char *token_sha256, int64_t now_ms,
	                       worker_db_lease_state *ret, airlock_error *err);
	/* Read-only: the handle recorded with a sandbox, newly allocated in
	 * *ret; NULL when no record of that id holds one. */
	int (*environment_handle)(void *ctx, const char *environment_id, char **ret,
	                          airlock_error *err);
	/* Forget a sandbox the caller destroyed; *ret_cleared says whether a
	 * record matched (none is not an error: a clear is idempotent). */
	int (*clear_environment)(void *ctx, const char *run_id, int64_t epoch,
	                         const char *environment_id, bool *ret_cleared, airlock_error *err);
	/* The reaper's question, read-only: ret_stale[i] for list[i], true
	 * when its run is unknown, or the run's current epoch is another one,
	 * or that lease has expired at now or been released. */
	int (*stale)(void *ctx, const worker_db_sandbox *list, size_t n, int64_t now_ms,
	             bool *ret_stale, airlock_error *err);
	/* Read-only: up to max recorded sandboxes whose claim has ended at now
	 * (the same rule as stale), oldest epoch first, into ret (max entries
	 * long); *ret_n how many. */
	int (*ended)(void *ctx, int64_t now_ms, worker_db_sandbox *ret, size_t max, size_t *ret_n,
	             airlock_error *err);
	/* The schema version the database holds. */
	int (*schema_version)(void *ctx, int64_t *ret, airlock_error *err);
	/* Close the connection and free ctx. */
	void (*free)(void *ctx);
	/* Read-only, one statement: the sandbox row environment_id names, its
	 * run's tenant, and the state of its claim at now, with the bridge
	 * token's hash recorded for it. */
	int (*bridge_lookup)(void *ctx, const char *environment_id, int64_t now_ms,
	                     worker_db_bridge_result *ret, airlock_error *err);

	/* Artifacts. insert: a PENDING row, its size added to its tenant's
	 * bytes only when the sum stays within tenant_bytes_max (else nothing
	 * is written and ret->inserted is false); an id already present is
	 * AIRLOCK_ERR_EXECUTION_REJECTED. */
	int (*artifact_insert)(void *ctx, const worker_db_artifact *a, int64_t tenant_bytes_max,
	                       worker_db_artifact_insert_result *ret, airlock_error *err);
	/* PENDING to COMMITTED; *ret_found false when no pending row of that
	 * id is left (the sweeper took it: the caller removes its object). */
	int (*artifact_commit)(void *ctx, const char *artifact_id, bool *ret_found,
	                       airlock_error *err);
	/* Read-only, one statement: the row, whatever its state (the caller
	 * decides what is visible); *ret_found false when there is none. */
	int (*artifact_get)(void *ctx, const char *artifact_id, worker_db_artifact *ret,
	                    bool *ret_found, airlock_error *err);
	/* Delete the row and take its size from its tenant's bytes;
	 * idempotent. */
	int (*artifact_delete)(void *ctx, const char *artifact_id, bool *ret_deleted,
	                       airlock_error *err);
	/* Read-only: up to max rows the sweeper removes: committed ones
	 * expired at now, pending ones created before pending_before_ms. */
	int (*artifact_due)(void *ctx, int64_t now_ms, int64_t pending_before_ms,
	                    worker_db_artifact_key *ret, size_t max, size_t *ret_n,
	                    airlock_error *err);
	/* Read-only: a page of a tenant's visible artifacts, by id. */
	int (*artifact_list)(void *ctx, const worker_db_artifact_query *q, worker_db_artifact *ret,
	                     size_t *ret_n, airlock_error *err);
	/* Take an artifact into a run for good (no expiry): an unclaimed
	 * upload of the tenant, or the run's own SANDBOX_EXPORT or
	 * MODEL_OUTPUT, committed and unexpired at now. *ret_done false and
	 * nothing changed otherwise. */
	int (*artifact_attach)(void *ctx, const char *artifact_id, const char *tenant_id,
	                       const char *run_id, int64_t now_ms, bool *ret_done,
	                       airlock_error *err);
	/* Read-only: the bytes a tenant's rows hold (pending ones included). */
	int (*artifact_tenant_bytes)(void *ctx, const char *tenant_id, int64_t *ret,
	                             airlock_error *err);
	/* Read-only: a committed, unexpired artifact of this tenant and run
	 * with the same origin, digest, size, filename and media type as
	 * a's (what makes artifact.export idempotent); *ret_found false when
	 * there is none. */
	int (*artifact_same)(void *ctx, const worker_db_artifact *a, int64_t now_ms,
	                     worker_db_artifact *ret, bool *ret_found, airlock_error *err);
	/* As artifact_delete, only while the row is still what artifact_due
	 * selected (expired at now_ms, or pending since before
	 * pending_before_ms), a condition of the DELETE itself: the
	 * sweeper never takes a row a put committed or a run attached since
	 * it read the batch. */
	int (*artifact_delete_due)(void *ctx, const char *artifact_id, int64_t now_ms,
	                           int64_t pending_before_ms, bool *ret_deleted, airlock_error *err);
	/* Bind the database to the artifact store whose objects its rows
	 * name: store_identity (a store's UUIDv7) and database_identity (a
	 * fresh UUIDv7 naming this database, which the store records in
	 * turn) are kept when nothing is bound yet, and *ret_store and
	 * *ret_database are the ones bound, these or an earlier worker's.
	 * One transaction. */
	int (*artifact_store_bind)(void *ctx, const char *store_identity,
	                           const char *database_identity,
	                           char ret_store[AIRLOCK_UUID_STR_LEN + 1],
	                           char ret_database[AIRLOCK_UUID_STR_LEN + 1], airlock_error *err);
	/* As artifact_get, only a row a reader may be shown: committed,
	 * unexpired at now_ms, and of tenant_id (NULL: any tenant). Every
	 * condition is the statement's own, so another tenant's row costs
	 * what a missing one does. */
	int (*artifact_get_visible)(void *ctx, const char *artifact_id, const char *tenant_id,
	                            int64_t now_ms, worker_db_artifact *ret, bool *ret_found,
	                            airlock_error *err);
} worker_db_ops;

/* ---- decisions both adapters apply --------------------------------------- */

/* What an artifact of size_bytes named by filename_len bytes is charged
 * against its tenant's cap (caps.h, AIRLOCK_ARTIFACT_CHARGE_BLOCK): the
 * insert adds it and the delete takes it back, both from this function.
 * size_bytes in 0..WORKER_DB_ARTIFACT_BYTES_MAX, filename_len at most
 * AIRLOCK_ARTIFACT_FILENAME_MAX (anything above is charged as that). */
int64_t worker_db_artifact_charge(int64_t size_bytes, size_t filename_len);

/* A run's lease row as an adapter read it (under its lock). */
typedef struct worker_db_lease_row {
	bool exists;
	char tenant_id[AIRLOCK_ID_MAX + 1];
	int64_t epoch;
	int64_t expires_at_ms;
	bool released;
	bool bridge;
} worker_db_lease_row;

/* The state of (tenant, epoch) against row at now. */
worker_db_lease_state worker_db_lease_state_of(const worker_db_lease_row *row,
                                               const char *tenant_id, int64_t epoch,
                                               int64_t now_ms);
/* The reaper's rule: is a sandbox of (run, epoch) stale against its run's
 * row (tenant left out: the question carries none). */
bool worker_db_sandbox_stale(const worker_db_lease_row *row, int64_t epoch, int64_t now_ms);

/* The claim's decision on the locked row: ret->outcome and ret->refusal,
 * and *ret_write whether the adapter writes the new row (tenant, epoch,
 * expires_at_ms = now + ttl, not released) and collects older sandboxes. */
void worker_db_claim_decide(const worker_db_lease_row *row, const worker_db_claim_request *req,
                            worker_db_claim_result *ret, bool *ret_write);

/* ---- the handle and its wrappers ----------------------------------------- */

typedef struct worker_db worker_db;

/* Take ctx (released with ops->free, also on failure) behind a handle. */
int worker_db_new(const worker_db_ops *ops, void *ctx, worker_db **ret, airlock_error *err);

/* SQLite: the database file "worker.db" in state_dir, which must be a
 * directory this user owns that group and others cannot write; created
 * mode 0600 when missing. WAL journal, busy_timeout, foreign keys on;
 * migrations applied. */
int worker_db_open_sqlite(const char *state_dir, worker_db **ret, airlock_error *err);
/* PostgreSQL from a connection string (key=value or URI) in memory. The
 * string is a credential: no message names it (db_pg.c says how libpq's
 * own messages are handled), and the caller wipes its copy. Migrations
 * applied; a schema newer than this code is refused. */
int worker_db_open_pg(const char *conninfo, worker_db **ret, airlock_error *err);
/* The same from a file checked like a credential file (regular, owned by
 * this user, mode 0600 or stricter, at most AIRLOCK_WORKER_DB_CONNINFO_MAX
 * bytes, one line). */
int worker_db_open_pg_file(const char *path, worker_db **ret, airlock_error *err);
void worker_db_free(worker_db *db);
const char *worker_db_name(const worker_db *db);

int worker_db_claim(worker_db *db, const worker_db_claim_request *req,
                    worker_db_claim_result *ret, airlock_error *err);
int worker_db_release(worker_db *db, const char *run_id, const char *tenant_id, int64_t epoch,
                      int64_t now_ms, worker_db_release_result *ret, airlock_error *err);
int worker_db_check(worker_db *db, const char *run_id, const char *tenant_id, int64_t epoch,
                    int64_t now_ms, worker_db_check_result *ret, airlock_error *err);
int worker_db_set_environment(worker_db *db, const char *run_id, int64_t epoch,
                              const char *environment_id, const char *handle, int64_t now_ms,
                              worker_db_lease_state *ret, airlock_error *err);
/* The same for a claim that asked for the bridge: token_sha256 is the
 * SHA-256 (64 lowercase hex) of the token its sandbox was given, never
 * the token. */
int worker_db_set_bridge_environment(worker_db *db, const char *run_id, int64_t epoch,
                                     const char *environment_id, const char *handle,
                                     const char *token_sha256, int64_t now_ms,
                                     worker_db_lease_state *ret, airlock_error *err);
int worker_db_bridge_lookup(worker_db *db, const char *environment_id, int64_t now_ms,
                            worker_db_bridge_result *ret, airlock_error *err);
int worker_db_environment_handle(worker_db *db, const char *environment_id, char **ret,
                                 airlock_error *err);
int worker_db_clear_environment(worker_db *db, const char *run_id, int64_t epoch,
                                const char *environment_id, bool *ret_cleared,
                                airlock_error *err);
/* n at most AIRLOCK_WORKER_DB_STALE_MAX; ret_stale has n entries. */
int worker_db_stale(worker_db *db, const worker_db_sandbox *list, size_t n, int64_t now_ms,
                    bool *ret_stale, airlock_error *err);
/* max in 1..AIRLOCK_WORKER_DB_ENDED_MAX: a restarted worker destroys each,
 * clears it, and asks again until none is left. */
int worker_db_ended(worker_db *db, int64_t now_ms, worker_db_sandbox *ret, size_t max,
                    size_t *ret_n, airlock_error *err);
int worker_db_schema_version(worker_db *db, int64_t *ret, airlock_error *err);

/* Artifacts (the operations above, each argument checked: ids by the
 * core's rules, the artifact id a canonical UUIDv7, the digest 64 hex, the
 * media type type/subtype, the filename 0..AIRLOCK_ARTIFACT_FILENAME_MAX
 * bytes, times in range). */
int worker_db_artifact_insert(worker_db *db, const worker_db_artifact *a,
                              int64_t tenant_bytes_max, worker_db_artifact_insert_result *ret,
                              airlock_error *err);
int worker_db_artifact_commit(worker_db *db, const char *artifact_id, bool *ret_found,
                              airlock_error *err);
int worker_db_artifact_get(worker_db *db, const char *artifact_id, worker_db_artifact *ret,
                           bool *ret_found, airlock_error *err);
int worker_db_artifact_delete(worker_db *db, const char *artifact_id, bool *ret_deleted,
                              airlock_error *err);
/* As artifact_delete, only while the row is still due (artifact_due's
 * condition at now_ms and pending_before_ms). */
int worker_db_artifact_delete_due(worker_db *db, const char *artifact_id, int64_t now_ms,
                                  int64_t pending_before_ms, bool *ret_deleted,
                                  airlock_error *err);
/* tenant_id NULL for a token of every tenant. */
int worker_db_artifact_get_visible(worker_db *db, const char *artifact_id, const char *tenant_id,
                                   int64_t now_ms, worker_db_artifact *ret, bool *ret_found,
                                   airlock_error *err);
/* Both identities UUIDv7s, and so are the answers. */
int worker_db_artifact_store_bind(worker_db *db, const char *store_identity,
                                  const char *database_identity,
                                  char ret_store[AIRLOCK_UUID_STR_LEN + 1],
                                  char ret_database[AIRLOCK_UUID_STR_LEN + 1], airlock_error *err);
/* max in 1..AIRLOCK_WORKER_DB_ARTIFACTS_MAX. */
int worker_db_artifact_due(worker_db *db, int64_t now_ms, int64_t pending_before_ms,
                           worker_db_artifact_key *ret, size_t max, size_t *ret_n,
                           airlock_error *err);
/* ret has q->max entries; each filled one is cleared by the caller. */
int worker_db_artifact_list(worker_db *db, const worker_db_artifact_query *q,
                            worker_db_artifact *ret, size_t *ret_n, airlock_error *err);
int worker_db_artifact_attach(worker_db *db, const char *artifact_id, const char *tenant_id,
                              const char *run_id, int64_t now_ms, bool *ret_done,
                              airlock_error *err);
int worker_db_artifact_tenant_bytes(worker_db *db, const char *tenant_id, int64_t *ret,
                                    airlock_error *err);
int worker_db_artifact_same(worker_db *db, const worker_db_artifact *a, int64_t now_ms,
                            worker_db_artifact *ret, bool *ret_found, airlock_error *err);

#endif
