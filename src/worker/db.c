/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker database's wrappers and the lease rules both
 * adapters apply (db.h). The wrappers check every argument once, for every
 * adapter, so an adapter's SQL never sees an id outside the core's rules or
 * a time that could overflow; the lease rules live here once, so the two
 * adapters differ only in how they lock and read a row.
 */
#include "worker/db.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/ids.h"
#include "airlock/types.h"

/* ---- names ---------------------------------------------------------------- */

const char *worker_db_lease_state_name(worker_db_lease_state s)
{
	switch (s) {
	case WORKER_DB_LEASE_CURRENT: return "current";
	case WORKER_DB_LEASE_NONE: return "none";
	case WORKER_DB_LEASE_OTHER_TENANT: return "other_tenant";
	case WORKER_DB_LEASE_OTHER_EPOCH: return "other_epoch";
	case WORKER_DB_LEASE_EXPIRED: return "expired";
	case WORKER_DB_LEASE_RELEASED: return "released";
	case WORKER_DB_LEASE_OTHER_BRIDGE: return "other_bridge";
	case WORKER_DB_LEASE_INVALID:
	case WORKER_DB_LEASE__MAX:
		break;
	}
	return NULL;
}

const char *worker_db_claim_outcome_name(worker_db_claim_outcome o)
{
	switch (o) {
	case WORKER_DB_CLAIM_NEW: return "new";
	case WORKER_DB_CLAIM_RENEWED: return "renewed";
	case WORKER_DB_CLAIM_FENCED: return "fenced";
	case WORKER_DB_CLAIM_REFUSED: return "refused";
	case WORKER_DB_CLAIM_INVALID:
	case WORKER_DB_CLAIM__MAX:
		break;
	}
	return NULL;
}

/* ---- the lease rules ------------------------------------------------------ */

/* A lease has ended once released or at its expiry: a renewal must come
 * before expires_at_ms, the same instant the reaper starts calling its
 * sandbox stale, so a tool call and the reaper never disagree. */
static bool row_ended(const worker_db_lease_row *row, int64_t now_ms)
{
	return row->released || now_ms >= row->expires_at_ms;
}

worker_db_lease_state worker_db_lease_state_of(const worker_db_lease_row *row,
                                               const char *tenant_id, int64_t epoch,
                                               int64_t now_ms)
{
	if (!row->exists)
		return WORKER_DB_LEASE_NONE;
	if (strcmp(row->tenant_id, tenant_id) != 0)
		return WORKER_DB_LEASE_OTHER_TENANT;
	if (epoch != row->epoch)
		return WORKER_DB_LEASE_OTHER_EPOCH;
	if (row->released)
		return WORKER_DB_LEASE_RELEASED;
	if (now_ms >= row->expires_at_ms)
		return WORKER_DB_LEASE_EXPIRED;
	return WORKER_DB_LEASE_CURRENT;
}

bool worker_db_sandbox_stale(const worker_db_lease_row *row, int64_t epoch, int64_t now_ms)
{
	/* An epoch other than the current one is stale in both directions: a
	 * lower one was fenced, and a higher one names a claim this database
	 * never granted (claims commit before any sandbox is made for them). */
	return !row->exists || epoch != row->epoch || row_ended(row, now_ms);
}

void worker_db_claim_decide(const worker_db_lease_row *row, const worker_db_claim_request *req,
                            worker_db_claim_result *ret, bool *ret_write)
{
	*ret_write = false;
	ret->refusal = WORKER_DB_LEASE_CURRENT;
	if (!row->exists) {
		ret->outcome = WORKER_DB_CLAIM_NEW;
		*ret_write = true;
		return;
	}
	/* A run belongs to the tenant that first claimed it, whatever the
	 * epoch: a higher epoch from another tenant is a platform bug or an
	 * attack, never a fence. */
	if (strcmp(row->tenant_id, req->tenant_id) != 0) {
		ret->outcome = WORKER_DB_CLAIM_REFUSED;
		ret->refusal = WORKER_DB_LEASE_OTHER_TENANT;
		return;
	}
	if (req->epoch < row->epoch) {
		ret->outcome = WORKER_DB_CLAIM_REFUSED;
		ret->refusal = WORKER_DB_LEASE_OTHER_EPOCH;
		return;
	}
	if (req->epoch == row->epoch) {
		/* A lease lost (expired) or given back (released) is not renewed:
		 * its sandbox is already stale to the reaper, so reviving the
		 * claim would hand the caller a sandbox being destroyed. A new
		 * claim takes a higher epoch. */
		if (row_ended(row, req->now_ms)) {
			ret->outcome = WORKER_DB_CLAIM_REFUSED;
			ret->refusal = row->released ? WORKER_DB_LEASE_RELEASED : WORKER_DB_LEASE_EXPIRED;
			return;
		}
		/* The claim's sandbox was (or will be) provisioned with or
		 * without a bridge token by its first call: a renewal that
		 * changed the choice would leave the sandbox and the lease
		 * disagreeing. */
		if (row->bridge != req->bridge) {
			ret->outcome = WORKER_DB_CLAIM_REFUSED;
			ret->refusal = WORKER_DB_LEASE_OTHER_BRIDGE;
			return;
		}
		ret->outcome = WORKER_DB_CLAIM_RENEWED;
		*ret_write = true;
		return;
	}
	ret->outcome = row_ended(row, req->now_ms) ? WORKER_DB_CLAIM_NEW : WORKER_DB_CLAIM_FENCED;
	*ret_write = true;
}

/* ---- the handle ------------------------------------------------------------ */

struct worker_db {
	const worker_db_ops *ops;
	void *ctx;
	/* One connection serves one call at a time: neither a SQLite
	 * connection's transaction nor a PGconn may be shared by two calls. */
	pthread_mutex_t lock;
};

int worker_db_new(const worker_db_ops *ops, void *ctx, worker_db **ret, airlock_error *err)
{
	if (!ops || ops->version != WORKER_DB_OPS_VERSION || !ops->claim || !ops->release ||
	    !ops->check || !ops->set_environment || !ops->environment_handle ||
	    !ops->clear_environment || !ops->stale ||
	    !ops->ended || !ops->schema_version || !ops->free || !ops->bridge_lookup ||
	    !ops->artifact_insert || !ops->artifact_commit || !ops->artifact_get ||
	    !ops->artifact_delete || !ops->artifact_due || !ops->artifact_list ||
	    !ops->artifact_attach || !ops->artifact_tenant_bytes || !ops->artifact_same ||
	    !ops->artifact_delete_due || !ops->artifact_store_bind ||
	    !ops->artifact_get_visible) {
		if (ops && ops->free && ctx)
			ops->free(ctx);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker database adapter %s: incomplete operations table or "
		                         "version mismatch",
		                         ops && ops->name ? ops->name : "(unnamed)");
	}
	worker_db *db = calloc(1, sizeof(*db));
	if (!db) {
		ops->free(ctx);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker database");
	}
	db->ops = ops;
	db->ctx = ctx;
	pthread_mutex_init(&db->lock, NULL);
	*ret = db;
	return 0;
}

void worker_db_free(worker_db *db)
{
	if (!db)
		return;
	db->ops->free(db->ctx);
	pthread_mutex_destroy(&db->lock);
	free(db);
}

const char *worker_db_name(const worker_db *db)
{
	return db->ops->name;
}

/* ---- argument checks, once for every adapter ------------------------------ */

static int bad_arg(airlock_error *err, const char *op, const char *what)
{
	return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "worker database %s: %s", op, what);
}

#define ID_RULE "must be 1..128 of [A-Za-z0-9_-]"
_Static_assert(AIRLOCK_ID_MAX == 128, "ID_RULE names the cap");

static int check_run(const char *op, const char *run_id, int64_t epoch, airlock_error *err)
{
	if (!airlock_id_valid(run_id))
		return bad_arg(err, op, "run_id " ID_RULE);
	if (epoch < 0)
		return bad_arg(err, op, "epoch must be >= 0");
	return 0;
}

static int check_tenant_now(const char *op, const char *tenant_id, int64_t now_ms,
                            airlock_error *err)
{
	if (tenant_id && !airlock_id_valid(tenant_id))
		return bad_arg(err, op, "tenant_id " ID_RULE);
	if (now_ms < 0 || now_ms > WORKER_DB_NOW_MAX)
		return bad_arg(err, op, "now is outside 0..2^48-1 milliseconds");
	return 0;
}

static int check_env(const char *op, const char *environment_id, airlock_error *err)
{
	if (!airlock_environment_id_valid(environment_id))
		return bad_arg(err, op, "environment_id must be env_ and 32 lowercase hex digits");
	return 0;
}

/* Each wrapper: checks, then the adapter's call under the handle's lock,
 * on a zeroed result. */
#define CALL(db, expr)                                                                             \
	({                                                                                         \
		pthread_mutex_lock(&(db)->lock);                                                   \
		int _r = (expr);                                                                   \
		pthread_mutex_unlock(&(db)->lock);                                                 \
		_r;                                                                                \
	})

int worker_db_claim(worker_db *db, const worker_db_claim_request *req,
                    worker_db_claim_result *ret, airlock_error *err)
{
	if (!db || !req || !ret)
		return bad_arg(err, "claim", "missing argument");
	int r = check_run("claim", req->run_id, req->epoch, err);
	if (r == 0)
		r = check_tenant_now("claim", req->tenant_id ? req->tenant_id : "", req->now_ms, err);
	if (r < 0)
		return r;
	if (req->ttl_seconds < 1 || req->ttl_seconds > WORKER_DB_TTL_SECONDS_MAX)
		return bad_arg(err, "claim", "ttl_seconds must be 1..86400");
	_Static_assert(WORKER_DB_TTL_SECONDS_MAX == 86400, "the message names the cap");
	memset(ret, 0, sizeof(*ret));
	return CALL(db, db->ops->claim(db->ctx, req, ret, err));
}

int worker_db_release(worker_db *db, const char *run_id, const char *tenant_id, int64_t epoch,
                      int64_t now_ms, worker_db_release_result *ret, airlock_error *err)
{
	if (!db || !ret)
		return bad_arg(err, "release", "missing argument");
	int r = check_run("release", run_id, epoch, err);
	if (r == 0)
		r = check_tenant_now("release", tenant_id ? tenant_id : "", now_ms, err);
	if (r < 0)
		return r;
	memset(ret, 0, sizeof(*ret));
	return CALL(db, db->ops->release(db->ctx, run_id, tenant_id, epoch, now_ms, ret, err));
}

int worker_db_check(worker_db *db, const char *run_id, const char *tenant_id, int64_t epoch,
                    int64_t now_ms, worker_db_check_result *ret, airlock_error *err)
{
	if (!db || !ret)
		return bad_arg(err, "check", "missing argument");
	int r = check_run("check", run_id, epoch, err);
	if (r == 0)
		r = check_tenant_now("check", tenant_id ? tenant_id : "", now_ms, err);
	if (r < 0)
		return r;
	memset(ret, 0, sizeof(*ret));
	return CALL(db, db->ops->check(db->ctx, run_id, tenant_id, epoch, now_ms, ret, err));
}

/* A handle is stored and later sent as it is: printable ASCII without
 * spaces, bounded. */
static int check_handle(const char *op, const char *handle, airlock_error *err)
{
	size_t n = handle ? strnlen(handle, WORKER_DB_HANDLE_MAX + 1) : 0;
	if (n == 0 || n > WORKER_DB_HANDLE_MAX)
		return bad_arg(err, op, "a handle is 1 to 8192 bytes");
	_Static_assert(WORKER_DB_HANDLE_MAX == 8192, "the message names the cap");
	for (size_t i = 0; i < n; i++)
		if (handle[i] <= ' ' || handle[i] > '~')
			return bad_arg(err, op, "a handle is printable ASCII without spaces");
	return 0;
}

static int set_env(worker_db *db, const char *run_id, int64_t epoch, const char *environment_id,
                   const char *handle, const char *token_sha256, int64_t now_ms,
                   worker_db_lease_state *ret, airlock_error *err)
{
	if (!db || !ret)
		return bad_arg(err, "set_environment", "missing argument");
	int r = check_run("set_environment", run_id, epoch, err);
	if (r == 0)
		r = check_env("set_environment", environment_id, err);
	if (r == 0)
		r = check_handle("set_environment", handle, err);
	if (r == 0)
		r = check_tenant_now("set_environment", NULL, now_ms, err);
	if (r == 0 && token_sha256 && !airlock_sha256_hex_valid(token_sha256))
		r = bad_arg(err, "set_environment", "a bridge token's hash is 64 lowercase hex digits");
	if (r < 0)
		return r;
	*ret = WORKER_DB_LEASE_INVALID;
	return CALL(db, db->ops->set_environment(db->ctx, run_id, epoch, environment_id, handle,
	                                         token_sha256, now_ms, ret, err));
}

int worker_db_set_environment(worker_db *db, const char *run_id, int64_t epoch,
                              const char *environment_id, const char *handle, int64_t now_ms,
                              worker_db_lease_state *ret, airlock_error *err)
{
	return set_env(db, run_id, epoch, environment_id, handle, NULL, now_ms, ret, err);
}

int worker_db_set_bridge_environment(worker_db *db, const char *run_id, int64_t epoch,
                                     const char *environment_id, const char *handle,
                                     const char *token_sha256, int64_t now_ms,
                                     worker_db_lease_state *ret, airlock_error *err)
{
	if (!token_sha256)
		return bad_arg(err, "set_environment", "a bridge's sandbox needs its token's hash");
	return set_env(db, run_id, epoch, environment_id, handle, token_sha256, now_ms, ret, err);
}

int worker_db_bridge_lookup(worker_db *db, const char *environment_id, int64_t now_ms,
                            worker_db_bridge_result *ret, airlock_error *err)
{
	if (!db || !ret)
		return bad_arg(err, "bridge_lookup", "missing argument");
	int r = check_env("bridge_lookup", environment_id, err);
	if (r == 0)
		r = check_tenant_now("bridge_lookup", NULL, now_ms, err);
	if (r < 0)
		return r;
	memset(ret, 0, sizeof(*ret));
	r = CALL(db, db->ops->bridge_lookup(db->ctx, environment_id, now_ms, ret, err));
	/* The hash is compared with what a connection sends: the same rule
	 * as what went in. */
	if (r == 0 && ret->has_token && !airlock_sha256_hex_valid(ret->token_sha256))
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EBADMSG,
		                         "worker database: the bridge token hash recorded for sandbox "
		                         "%s is not one this worker writes",
		                         environment_id);
	return r;
}

int worker_db_environment_handle(worker_db *db, const char *environment_id, char **ret,
                                 airlock_error *err)
{
	if (!db || !ret)
		return bad_arg(err, "environment_handle", "missing argument");
	int r = check_env("environment_handle", environment_id, err);
	if (r < 0)
		return r;
	*ret = NULL;
	r = CALL(db, db->ops->environment_handle(db->ctx, environment_id, ret, err));
	/* What comes back is sent as a header: the same rule as what went in. */
	if (r == 0 && *ret && check_handle("environment_handle", *ret, err) < 0) {
		free(*ret);
		*ret = NULL;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EBADMSG,
		                         "worker database: the handle recorded for sandbox %s is not "
		                         "one this worker writes",
		                         environment_id);
	}
	return r;
}

int worker_db_clear_environment(worker_db *db, const char *run_id, int64_t epoch,
                                const char *environment_id, bool *ret_cleared,
                                airlock_error *err)
{
	if (!db || !ret_cleared)
		return bad_arg(err, "clear_environment", "missing argument");
	int r = check_run("clear_environment", run_id, epoch, err);
	if (r == 0)
		r = check_env("clear_environment", environment_id, err);
	if (r < 0)
		return r;
	*ret_cleared = false;
	return CALL(db, db->ops->clear_environment(db->ctx, run_id, epoch, environment_id,
	                                           ret_cleared, err));
}

int worker_db_stale(worker_db *db, const worker_db_sandbox *list, size_t n, int64_t now_ms,
                    bool *ret_stale, airlock_error *err)
{
	if (!db || (n > 0 && (!list || !ret_stale)))
		return bad_arg(err, "stale", "missing argument");
	if (n > AIRLOCK_WORKER_DB_STALE_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "worker database stale: %zu sandboxes in one question, over "
		                         "%d",
		                         n, AIRLOCK_WORKER_DB_STALE_MAX);
	int r = check_tenant_now("stale", NULL, now_ms, err);
	if (r < 0)
		return r;
	/* The entries come from the service's question: each is checked as
	 * the strings the adapter would bind, and must be NUL-terminated
	 * inside its field (the fields are sized to the rules). */
	for (size_t i = 0; i < n; i++) {
		const worker_db_sandbox *s = &list[i];
		if (!memchr(s->environment_id, 0, sizeof(s->environment_id)) ||
		    !memchr(s->run_id, 0, sizeof(s->run_id)))
			return bad_arg(err, "stale", "an entry's id is not terminated");
		r = check_run("stale", s->run_id, s->epoch, err);
		if (r == 0)
			r = check_env("stale", s->environment_id, err);
		if (r < 0)
			return r;
	}
	if (n == 0)
		return 0;
	memset(ret_stale, 0, n * sizeof(*ret_stale));
	return CALL(db, db->ops->stale(db->ctx, list, n, now_ms, ret_stale, err));
}

int worker_db_ended(worker_db *db, int64_t now_ms, worker_db_sandbox *ret, size_t max,
                    size_t *ret_n, airlock_error *err)
{
	if (!db || !ret || !ret_n)
		return bad_arg(err, "ended", "missing argument");
	if (max < 1 || max > AIRLOCK_WORKER_DB_ENDED_MAX)
		return bad_arg(err, "ended", "max must be 1..1024");
	_Static_assert(AIRLOCK_WORKER_DB_ENDED_MAX == 1024, "the message names the cap");
	int r = check_tenant_now("ended", NULL, now_ms, err);
	if (r < 0)
		return r;
	*ret_n = 0;
	memset(ret, 0, max * sizeof(*ret));
	return CALL(db, db->ops->ended(db->ctx, now_ms, ret, max, ret_n, err));
}

int worker_db_schema_version(worker_db *db, int64_t *ret, airlock_error *err)
{
	if (!db || !ret)
		return bad_arg(err, "schema_version", "missing argument");
	return CALL(db, db->ops->schema_version(db->ctx, ret, err));
}

/* ---- artifacts ----------------------------------------------------------------- */

void worker_db_artifact_clear(worker_db_artifact *a)
{
	if (!a)
		return;
	free(a->filename);
	*a = (worker_db_artifact){ 0 };
}

static int check_artifact_id(const char *op, const char *artifact_id, airlock_error *err)
{
	if (!artifact_id || !airlock_uuidv7_valid(artifact_id))
		return bad_arg(err, op, "artifact_id must be a lowercase canonical UUIDv7");
	return 0;
}

/* A stored row: what the wrapper accepts is what a read gives back, so
 * every field is checked as the database will hold it. */
static int check_artifact(const worker_db_artifact *a, airlock_error *err)
{
	static const char op[] = "artifact_insert";
	int r = check_artifact_id(op, a->artifact_id, err);
	if (r == 0)
		r = check_tenant_now(op, a->tenant_id, a->created_at_ms, err);
	if (r < 0)
		return r;
	if (a->has_run && !airlock_id_valid(a->run_id))
		return bad_arg(err, op, "run_id " ID_RULE);
	if (!airlock_artifact_origin_name(a->origin) || !airlock_trust_level_name(a->trust))
		return bad_arg(err, op, "origin and trust must be the specification's values");
	if (a->filename_len > AIRLOCK_ARTIFACT_FILENAME_MAX || (a->filename_len && !a->filename))
		return bad_arg(err, op, "a filename is at most 16384 bytes");
	_Static_assert(AIRLOCK_ARTIFACT_FILENAME_MAX == 16384, "the message names the cap");
	if (!memchr(a->media_type, 0, sizeof(a->media_type)) ||
	    !airlock_media_type_valid(a->media_type))
		return bad_arg(err, op, "media_type must be type/subtype");
	if (a->size_bytes < 0 || a->size_bytes > WORKER_DB_ARTIFACT_BYTES_MAX)
		return bad_arg(err, op, "size_bytes must be 0..2^50");
	if (!airlock_sha256_hex_valid(a->sha256))
		return bad_arg(err, op, "sha256 must be 64 lowercase hex digits");
	if (a->has_expires && (a->expires_at_ms < 0 || a->expires_at_ms > WORKER_DB_NOW_MAX))
		return bad_arg(err, op, "expires_at is outside 0..2^48-1 milliseconds");
	size_t k = strnlen(a->storage_key, sizeof(a->storage_key));
	if (k == 0 || k == sizeof(a->storage_key))
		return bad_arg(err, op, "a storage key is 1..255 bytes");
	return 0;
}

int64_t worker_db_artifact_charge(int64_t size_bytes, size_t filename_len)
{
	const int64_t block = AIRLOCK_ARTIFACT_CHARGE_BLOCK;
	if (size_bytes < 0)
		size_bytes = 0;
	if (size_bytes > WORKER_DB_ARTIFACT_BYTES_MAX)
		size_bytes = WORKER_DB_ARTIFACT_BYTES_MAX;
	if (filename_len > AIRLOCK_ARTIFACT_FILENAME_MAX)
		filename_len = AIRLOCK_ARTIFACT_FILENAME_MAX;
	return (size_bytes + block - 1) / block * block + block + 2 * (int64_t)filename_len;
}

int worker_db_artifact_insert(worker_db *db, const worker_db_artifact *a,
                              int64_t tenant_bytes_max, worker_db_artifact_insert_result *ret,
                              airlock_error *err)
{
	if (!db || !a || !ret)
		return bad_arg(err, "artifact_insert", "missing argument");
	int r = check_artifact(a, err);
	if (r < 0)
		return r;
	if (tenant_bytes_max < 0 || tenant_bytes_max > WORKER_DB_ARTIFACT_BYTES_MAX)
		return bad_arg(err, "artifact_insert", "a tenant's cap must be 0..2^50 bytes");
	memset(ret, 0, sizeof(*ret));
	return CALL(db, db->ops->artifact_insert(db->ctx, a, tenant_bytes_max, ret, err));
}

int worker_db_artifact_commit(worker_db *db, const char *artifact_id, bool *ret_found,
                              airlock_error *err)
{
	if (!db || !ret_found)
		return bad_arg(err, "artifact_commit", "missing argument");
	int r = check_artifact_id("artifact_commit", artifact_id, err);
	if (r < 0)
		return r;
	*ret_found = false;
	return CALL(db, db->ops->artifact_commit(db->ctx, artifact_id, ret_found, err));
}

int worker_db_artifact_get(worker_db *db, const char *artifact_id, worker_db_artifact *ret,
                           bool *ret_found, airlock_error *err)
{
	if (!db || !ret || !ret_found)
		return bad_arg(err, "artifact_get", "missing argument");
	int r = check_artifact_id("artifact_get", artifact_id, err);
	if (r < 0)
		return r;
	memset(ret, 0, sizeof(*ret));
	*ret_found = false;
	return CALL(db, db->ops->artifact_get(db->ctx, artifact_id, ret, ret_found, err));
}

int worker_db_artifact_delete(worker_db *db, const char *artifact_id, bool *ret_deleted,
                              airlock_error *err)
{
	if (!db || !ret_deleted)
		return bad_arg(err, "artifact_delete", "missing argument");
	int r = check_artifact_id("artifact_delete", artifact_id, err);
	if (r < 0)
		return r;
	*ret_deleted = false;
	return CALL(db, db->ops->artifact_delete(db->ctx, artifact_id, ret_deleted, err));
}

int worker_db_artifact_due(worker_db *db, int64_t now_ms, int64_t pending_before_ms,
                           worker_db_artifact_key *ret, size_t max, size_t *ret_n,
                           airlock_error *err)
{
	if (!db || !ret || !ret_n)
		return bad_arg(err, "artifact_due", "missing argument");
	if (max < 1 || max > AIRLOCK_WORKER_DB_ARTIFACTS_MAX)
		return bad_arg(err, "artifact_due", "max must be 1..1000");
	_Static_assert(AIRLOCK_WORKER_DB_ARTIFACTS_MAX == 1000, "the message names the cap");
	int r = check_tenant_now("artifact_due", NULL, now_ms, err);
	if (r == 0)
		r = check_tenant_now("artifact_due", NULL, pending_before_ms, err);
	if (r < 0)
		return r;
	*ret_n = 0;
	memset(ret, 0, max * sizeof(*ret));
	return CALL(db, db->ops->artifact_due(db->ctx, now_ms, pending_before_ms, ret, max, ret_n,
	                                      err));
}

int worker_db_artifact_list(worker_db *db, const worker_db_artifact_query *q,
                            worker_db_artifact *ret, size_t *ret_n, airlock_error *err)
{
	if (!db || !q || !ret || !ret_n)
		return bad_arg(err, "artifact_list", "missing argument");
	int r = check_tenant_now("artifact_list", q->tenant_id ? q->tenant_id : "", q->now_ms, err);
	if (r < 0)
		return r;
	if (q->run_id && !airlock_id_valid(q->run_id))
		return bad_arg(err, "artifact_list", "run_id " ID_RULE);
	if (q->after_id && *q->after_id && !airlock_uuidv7_valid(q->after_id))
		return bad_arg(err, "artifact_list", "after must be an artifact id");
	if (q->max < 1 || q->max > AIRLOCK_WORKER_DB_ARTIFACTS_MAX)
		return bad_arg(err, "artifact_list", "max must be 1..1000");
	*ret_n = 0;
	memset(ret, 0, q->max * sizeof(*ret));
	return CALL(db, db->ops->artifact_list(db->ctx, q, ret, ret_n, err));
}

int worker_db_artifact_attach(worker_db *db, const char *artifact_id, const char *tenant_id,
                              const char *run_id, int64_t now_ms, bool *ret_done,
                              airlock_error *err)
{
	if (!db || !ret_done)
		return bad_arg(err, "artifact_attach", "missing argument");
	int r = check_artifact_id("artifact_attach", artifact_id, err);
	if (r == 0)
		r = check_run("artifact_attach", run_id, 0, err);
	if (r == 0)
		r = check_tenant_now("artifact_attach", tenant_id ? tenant_id : "", now_ms, err);
	if (r < 0)
		return r;
	*ret_done = false;
	return CALL(db, db->ops->artifact_attach(db->ctx, artifact_id, tenant_id, run_id, now_ms,
	                                         ret_done, err));
}

int worker_db_artifact_tenant_bytes(worker_db *db, const char *tenant_id, int64_t *ret,
                                    airlock_error *err)
{
	if (!db || !ret)
		return bad_arg(err, "artifact_tenant_bytes", "missing argument");
	int r = check_tenant_now("artifact_tenant_bytes", tenant_id ? tenant_id : "", 0, err);
	if (r < 0)
		return r;
	*ret = 0;
	return CALL(db, db->ops->artifact_tenant_bytes(db->ctx, tenant_id, ret, err));
}

int worker_db_artifact_same(worker_db *db, const worker_db_artifact *a, int64_t now_ms,
                            worker_db_artifact *ret, bool *ret_found, airlock_error *err)
{
	if (!db || !a || !ret || !ret_found)
		return bad_arg(err, "artifact_same", "missing argument");
	int r = check_artifact(a, err);
	if (r == 0)
		r = check_tenant_now("artifact_same", NULL, now_ms, err);
	if (r < 0)
		return r;
	memset(ret, 0, sizeof(*ret));
	*ret_found = false;
	return CALL(db, db->ops->artifact_same(db->ctx, a, now_ms, ret, ret_found, err));
}

int worker_db_artifact_delete_due(worker_db *db, const char *artifact_id, int64_t now_ms,
                                  int64_t pending_before_ms, bool *ret_deleted,
                                  airlock_error *err)
{
	if (!db || !ret_deleted)
		return bad_arg(err, "artifact_delete_due", "missing argument");
	int r = check_artifact_id("artifact_delete_due", artifact_id, err);
	if (r < 0)
		return r;
	*ret_deleted = false;
	return CALL(db, db->ops->artifact_delete_due(db->ctx, artifact_id, now_ms, pending_before_ms,
	                                             ret_deleted, err));
}

int worker_db_artifact_store_bind(worker_db *db, const char *store_identity,
                                  const char *database_identity,
                                  char ret_store[AIRLOCK_UUID_STR_LEN + 1],
                                  char ret_database[AIRLOCK_UUID_STR_LEN + 1], airlock_error *err)
{
	if (!db || !store_identity || !database_identity || !ret_store || !ret_database)
		return bad_arg(err, "artifact_store_bind", "missing argument");
	if (!airlock_uuidv7_valid(store_identity) || !airlock_uuidv7_valid(database_identity))
		return bad_arg(err, "artifact_store_bind", "an identity is a UUIDv7");
	int r = CALL(db, db->ops->artifact_store_bind(db->ctx, store_identity, database_identity,
	                                              ret_store, ret_database, err));
	if (r == 0 && (!airlock_uuidv7_valid(ret_store) || !airlock_uuidv7_valid(ret_database)))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "worker database: the artifact store binding it holds is not "
		                         "two UUIDv7s");
	return r;
}

int worker_db_artifact_get_visible(worker_db *db, const char *artifact_id, const char *tenant_id,
                                   int64_t now_ms, worker_db_artifact *ret, bool *ret_found,
                                   airlock_error *err)
{
	if (!db || !ret || !ret_found)
		return bad_arg(err, "artifact_get_visible", "missing argument");
	int r = check_artifact_id("artifact_get_visible", artifact_id, err);
	if (r == 0)
		r = check_tenant_now("artifact_get_visible", tenant_id, now_ms, err);
	if (r < 0)
		return r;
	memset(ret, 0, sizeof(*ret));
	*ret_found = false;
	return CALL(db, db->ops->artifact_get_visible(db->ctx, artifact_id, tenant_id, now_ms, ret,
	                                              ret_found, err));
}
