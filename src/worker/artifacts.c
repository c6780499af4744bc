/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's artifacts: the store and the database's rows kept in step
 * (artifacts.h says in which order, and why a crash anywhere leaves
 * nothing visible and everything findable), the ArtifactWriter, and the
 * retention sweeper.
 */
#include "worker/artifacts.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "airlock/ids.h"
#include "worker/daemon.h"
#include "util/cleanup.h"
#include "util/util.h"

#define DAY_MS INT64_C(86400000)

struct worker_artifacts {
	worker_artifacts_config cfg;
	char *root;
	worker_db *db;
	airlock_artifact_store *store;
	/* The sweeper thread (cfg.sweep_interval_seconds > 0). */
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stopping, thread_started;
	pthread_t thread;
};

struct worker_artifact_put {
	worker_artifact_writer w;
	airlock_artifact_put *put;
	char artifact_id[AIRLOCK_UUID_STR_LEN + 1];
	unsigned char *filename;
	size_t filename_len;
	char media_type[256];
	airlock_trust_level trust;
	/* The tenant's bytes left under its cap when the put began, and the
	 * bytes written since: a stream past the room is not kept on disk
	 * (below), rather than written whole first and refused at step 3. */
	int64_t tenant_bytes, tenant_room, written;
	bool over_room; /* discarded past the room: only an equal artifact answers */
	/* Step 2 done ahead of finish (worker_artifact_seal): the digest and
	 * size of what was received. */
	bool sealed;
	char sealed_sha256[AIRLOCK_SHA256_HEX_LEN + 1];
	int64_t sealed_size;
};

/* ---- the handle ---------------------------------------------------------------- */

static void *sweeper_main(void *arg);

/* One database, one store, both ways (docs/artifacts.md, "The identity").
 * A row names its object by key alone, so a worker whose store is not the
 * one the database's rows were written to would answer other workers'
 * artifacts with objects it does not have, and its sweeper would drop
 * their rows; a worker on a database the store does not serve (a new one,
 * a mistyped one) would take every object of the store for an orphan and
 * sweep it. The database is bound first: a crash before the store records
 * the database leaves a binding the next start completes. */
static int bind_store(worker_db *db, airlock_artifact_store *store, airlock_error *err)
{
	char mine[AIRLOCK_UUID_STR_LEN + 1], fresh[AIRLOCK_UUID_STR_LEN + 1];
	char bound_store[AIRLOCK_UUID_STR_LEN + 1], database[AIRLOCK_UUID_STR_LEN + 1];
	char served[AIRLOCK_UUID_STR_LEN + 1];
	int r = airlock_artifact_store_identity(store, mine, err);
	if (r == 0)
		r = airlock_uuidv7_new(fresh, err);
	if (r == 0)
		r = worker_db_artifact_store_bind(db, mine, fresh, bound_store, database, err);
	if (r < 0)
		return r;
	if (strcmp(mine, bound_store) != 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.artifacts_dir: this store is %s, but the worker "
		                         "database's artifacts are in store %s; workers sharing one "
		                         "database must share one artifact store",
		                         mine, bound_store);
	r = airlock_artifact_store_bind_database(store, database, served, err);
	if (r < 0)
		return r;
	if (strcmp(served, database) != 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.artifacts_dir: this store serves worker database %s, "
		                         "not this one (%s): a worker on a new or mistyped database "
		                         "would take every object of the store for an orphan and "
		                         "sweep it; point the worker at the store's database, or give "
		                         "it a store of its own",
		                         served, database);
	return 0;
}

int worker_artifacts_new(const worker_artifacts_config *cfg, worker_db *db,
                         airlock_artifact_store *store, worker_artifacts **ret,
                         airlock_error *err)
{
	if (!cfg || !db || !store || cfg->size_max <= 0 || cfg->tenant_bytes_max <= 0 ||
	    cfg->retention_seconds <= 0 || cfg->upload_unclaimed_seconds <= 0 ||
	    cfg->sweep_interval_seconds < 0 || cfg->grace_seconds <= 0) {
		airlock_artifact_store_free(store);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker artifacts: every size, lifetime and interval must be "
		                         "positive");
	}
	int br = bind_store(db, store, err);
	if (br < 0) {
		airlock_artifact_store_free(store);
		return br;
	}
	worker_artifacts *a = calloc(1, sizeof(*a));
	if (!a || (cfg->root && !(a->root = strdup(cfg->root)))) {
		free(a);
		airlock_artifact_store_free(store);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker artifacts");
	}
	a->cfg = *cfg;
	a->cfg.root = a->root;
	a->db = db;
	a->store = store;
	pthread_mutex_init(&a->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (cfg->sweep_interval_seconds > 0) {
		int r = pthread_create(&a->thread, NULL, sweeper_main, a);
		if (r != 0) {
			worker_artifacts_free(a);
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, r,
			                         "worker artifacts: the retention sweeper's thread");
		}
		a->thread_started = true;
	}
	*ret = a;
	return 0;
}

int worker_artifacts_open(const worker_artifacts_config *cfg, worker_db *db,
                          worker_artifacts **ret, airlock_error *err)
{
	if (!cfg || !cfg->root)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.artifacts_dir: no store directory");
	airlock_artifact_store *store = NULL;
	int r = airlock_artifact_store_fs_open(cfg->root, &store, err);
	if (r < 0) {
		airlock_error_prefix(err, "worker.artifacts_dir: ");
		return r;
	}
	return worker_artifacts_new(cfg, db, store, ret, err);
}

void worker_artifacts_free(worker_artifacts *a)
{
	if (!a)
		return;
	if (a->thread_started) {
		pthread_mutex_lock(&a->lock);
		a->stopping = true;
		pthread_cond_broadcast(&a->wake);
		pthread_mutex_unlock(&a->lock);
		pthread_join(a->thread, NULL);
	}
	airlock_artifact_store_free(a->store);
	pthread_cond_destroy(&a->wake);
	pthread_mutex_destroy(&a->lock);
	free(a->root);
	free(a);
}

const worker_artifacts_config *worker_artifacts_config_of(const worker_artifacts *a)
{
	return &a->cfg;
}

/* ---- the ArtifactWriter --------------------------------------------------------- */

/* The tenant's cap refusal, naming the setting; size < 0 when the size is
 * not known yet (a stream refused before or while it comes). */
static int tenant_full(const worker_artifact_put *p, int64_t size, int64_t held,
                       airlock_error *err)
{
	char what[128] = "artifact";
	if (size >= 0)
		snprintf(what, sizeof(what), "artifact of %lld bytes (charged %lld)", (long long)size,
		         (long long)worker_db_artifact_charge(size, p->filename_len));
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
	                         "%s refused: tenant %s is charged %lld bytes for its artifacts "
	                         "(each its size in 4 KiB blocks, one block more and its name "
	                         "twice) and worker.artifact_tenant_bytes_max is %lld",
	                         what, p->w.tenant_id, (long long)held,
	                         (long long)p->w.artifacts->cfg.tenant_bytes_max);
}

/* Whether a put of written bytes still fits what the tenant had left when
 * it began (charged as step 3 will charge it). */
static bool fits_room(const worker_artifact_put *p, int64_t written)
{
	return worker_db_artifact_charge(written, p->filename_len) <= p->tenant_room;
}

int worker_artifact_begin(const worker_artifact_writer *w, const void *filename,
                          size_t filename_len, const char *media_type,
                          airlock_trust_level trust, worker_artifact_put **ret,
                          airlock_error *err)
{
	if (!w || !w->artifacts || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "artifact: no writer");
	if (!airlock_id_valid(w->tenant_id) || (w->has_run && !airlock_id_valid(w->run_id)) ||
	    !airlock_artifact_origin_name(w->origin))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "artifact: the writer's context is not a valid tenant, run "
		                         "and origin");
	if (filename_len > AIRLOCK_ARTIFACT_FILENAME_MAX || (filename_len && !filename))
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "artifact filename: %zu bytes, over the %d an artifact's "
		                         "name may have",
		                         filename_len, AIRLOCK_ARTIFACT_FILENAME_MAX);
	if (!media_type || strlen(media_type) >= sizeof(((worker_artifact_put *)0)->media_type) ||
	    !airlock_media_type_valid(media_type))
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "artifact media_type: must be type/subtype (RFC 6838 names, "
		                         "no parameters), like text/plain");
	if (!airlock_trust_level_name(trust))
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "artifact trust: not a trust level");
	_cleanup_free_ worker_artifact_put *p = calloc(1, sizeof(*p));
	if (!p || !(p->filename = malloc(filename_len + 1)))
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact");
	if (filename_len)
		memcpy(p->filename, filename, filename_len);
	p->filename[filename_len] = 0;
	p->filename_len = filename_len;
	p->w = *w;
	p->trust = trust;
	snprintf(p->media_type, sizeof(p->media_type), "%s", media_type);
	/* The tenant's room read once, before any byte: a tenant at its cap
	 * is refused here, and one near it cannot make the store hold
	 * size_max bytes per put in flight before step 3's refusal (that
	 * charge stays the authoritative check; this one only ends early a
	 * put step 3 would refuse, unless the tenant's artifacts are deleted
	 * meanwhile, which is then one retry). */
	int r = worker_db_artifact_tenant_bytes(w->artifacts->db, w->tenant_id, &p->tenant_bytes,
	                                        err);
	if (r < 0) {
		free(p->filename);
		return r;
	}
	p->tenant_room = w->artifacts->cfg.tenant_bytes_max - p->tenant_bytes;
	if (!fits_room(p, 0) && !w->reuse_same) {
		r = tenant_full(p, -1, p->tenant_bytes, err);
		free(p->filename);
		return r;
	}
	r = airlock_uuidv7_new(p->artifact_id, err);
	if (r == 0)
		r = airlock_artifact_put_begin(w->artifacts->store, w->tenant_id, p->artifact_id,
		                               w->artifacts->cfg.size_max, &p->put, err);
	/* An idempotent put at the cap may still be answered by an equal
	 * artifact (finish): its stream is hashed from the start, kept
	 * nowhere. */
	if (r == 0 && !fits_room(p, 0)) {
		p->over_room = true;
		r = airlock_artifact_put_discard(p->put, err);
	}
	if (r < 0) {
		airlock_artifact_put_free(p->put);
		free(p->filename);
		return r;
	}
	*ret = TAKE_PTR(p);
	return 0;
}

int worker_artifact_write(worker_artifact_put *p, const void *buf, size_t len,
                          airlock_error *err)
{
	if (!p || !p->put)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "artifact: the put has ended");
	if (!p->over_room && (len > (size_t)AIRLOCK_ARTIFACT_SIZE_SETTING_MAX ||
	                      !fits_room(p, p->written + (int64_t)len))) {
		/* Past what the tenant had left: step 3 would refuse it after
		 * the whole stream, so its temporary goes now. An idempotent
		 * put goes on hashed and kept nowhere, to be answered by an
		 * equal artifact or refused at finish; any other is abandoned. */
		if (!p->w.reuse_same) {
			airlock_artifact_put_free(p->put);
			p->put = NULL;
			return tenant_full(p, -1, p->tenant_bytes, err);
		}
		p->over_room = true;
		int r = airlock_artifact_put_discard(p->put, err);
		if (r < 0) {
			airlock_artifact_put_free(p->put);
			p->put = NULL;
			return r;
		}
	}
	int r = airlock_artifact_put_write(p->put, buf, len, err);
	if (r == 0)
		p->written += (int64_t)len;
	return r;
}

/* An upload lives until a run claims it; KNOWLEDGE_SOURCE has no expiry
 * until its document is deleted; everything else the retention (the
 * specification, "Retention"). */
static void expiry_of(const worker_artifacts_config *cfg, airlock_artifact_origin origin,
                      int64_t now_ms, bool *ret_has, int64_t *ret_at)
{
	*ret_has = origin != AIRLOCK_ORIGIN_KNOWLEDGE_SOURCE;
	*ret_at = now_ms + (origin == AIRLOCK_ORIGIN_UPLOAD ? cfg->upload_unclaimed_seconds
	                                                    : cfg->retention_seconds) *
	                           1000;
}

/* Undo steps 3-4 of a create that cannot finish: the object (if any) and
 * the row. Best effort: whatever fails here is the sweeper's (a pending
 * row past the grace). */
static void undo(worker_artifact_put *p)
{
	worker_artifacts *a = p->w.artifacts;
	airlock_error ignored = { 0 };
	bool deleted = false;
	if (airlock_artifact_store_remove(a->store, p->w.tenant_id, p->artifact_id, &ignored) == 0)
		(void)worker_db_artifact_delete(a->db, p->artifact_id, &deleted, &ignored);
	airlock_error_clear(&ignored);
}

int worker_artifact_seal(worker_artifact_put *p, char ret_sha256[AIRLOCK_SHA256_HEX_LEN + 1],
                         airlock_error *err)
{
	if (!p || !p->put || !ret_sha256)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "artifact: the put has ended");
	if (!p->sealed) {
		int r = airlock_artifact_put_seal(p->put, NULL, p->sealed_sha256, &p->sealed_size,
		                                  err);
		if (r < 0)
			return r;
		p->sealed = true;
	}
	memcpy(ret_sha256, p->sealed_sha256, sizeof(p->sealed_sha256));
	return 0;
}

int worker_artifact_finish(worker_artifact_put *p, const char *expected_sha256,
                           airlock_artifact_ref *ret, airlock_error *err)
{
	if (!p || !p->put || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "artifact: the put has ended");
	worker_artifacts *a = p->w.artifacts;
	worker_db_artifact row = { .has_run = p->w.has_run, .origin = p->w.origin,
		                   .trust = p->trust, .filename = p->filename,
		                   .filename_len = p->filename_len };
	/* Step 2: the store's digest over what it received against the
	 * source's over what it sent (compared here too when the put was
	 * sealed ahead, for the caller that compared it then). */
	int r = 0;
	if (!p->sealed) {
		r = airlock_artifact_put_seal(p->put, expected_sha256, row.sha256, &row.size_bytes,
		                              err);
	} else {
		memcpy(row.sha256, p->sealed_sha256, sizeof(row.sha256));
		row.size_bytes = p->sealed_size;
		if (expected_sha256 && strcmp(expected_sha256, row.sha256) != 0)
			r = airlock_error_set(err, AIRLOCK_ERR_ARTIFACT_INTEGRITY, 0,
			                      "artifact %s: the %lld bytes received hash to sha256 %s, "
			                      "the source says %.64s: nothing stored",
			                      p->artifact_id, (long long)row.size_bytes, row.sha256,
			                      expected_sha256);
	}
	if (r == 0)
		r = airlock_artifact_storage_key(p->w.tenant_id, p->artifact_id, row.storage_key, err);
	if (r < 0)
		goto fail;
	memcpy(row.artifact_id, p->artifact_id, sizeof(row.artifact_id));
	memcpy(row.tenant_id, p->w.tenant_id, sizeof(row.tenant_id));
	memcpy(row.run_id, p->w.run_id, sizeof(row.run_id));
	memcpy(row.media_type, p->media_type, sizeof(row.media_type));
	row.created_at_ms = util_now_ms();
	expiry_of(&a->cfg, p->w.origin, row.created_at_ms, &row.has_expires, &row.expires_at_ms);
	if (p->w.reuse_same) {
		/* The same bytes, name and type exported again by the same run:
		 * the first artifact is the answer, and nothing more is kept. */
		worker_db_artifact same;
		bool found = false;
		r = worker_db_artifact_same(a->db, &row, row.created_at_ms, &same, &found, err);
		if (r < 0)
			goto fail;
		if (found) {
			airlock_artifact_put_free(p->put);
			p->put = NULL;
			char *mt = strdup(same.media_type);
			if (!mt) {
				worker_db_artifact_clear(&same);
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact ref");
			}
			*ret = (airlock_artifact_ref){ .size_bytes = same.size_bytes, .media_type = mt };
			memcpy(ret->artifact_id, same.artifact_id, sizeof(ret->artifact_id));
			memcpy(ret->sha256, same.sha256, sizeof(ret->sha256));
			worker_db_artifact_clear(&same);
			return 0;
		}
	}
	/* Past the tenant's room (write): no equal artifact answered it, and
	 * its bytes were not kept. */
	if (p->over_room) {
		r = tenant_full(p, row.size_bytes, p->tenant_bytes, err);
		goto fail;
	}
	/* Step 3: the row, pending, charged to the tenant's bytes. */
	worker_db_artifact_insert_result ins;
	r = worker_db_artifact_insert(a->db, &row, a->cfg.tenant_bytes_max, &ins, err);
	if (r < 0)
		goto fail;
	if (!ins.inserted) {
		r = tenant_full(p, row.size_bytes, ins.tenant_bytes, err);
		goto fail;
	}
	/* Step 4: the object. */
	r = airlock_artifact_put_commit(p->put, err);
	if (r < 0) {
		undo(p);
		goto fail;
	}
	/* Step 5: visible. A row the sweeper took meanwhile (a put slower than
	 * the grace between steps 3 and 5) leaves an object nobody owns:
	 * removed here. */
	bool found = false;
	r = worker_db_artifact_commit(a->db, p->artifact_id, &found, err);
	if (r == 0 && !found)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "artifact %s: its row was removed before its object was committed "
		                      "(the put took longer than the sweeper's grace)",
		                      p->artifact_id);
	if (r < 0) {
		undo(p);
		goto fail;
	}
	airlock_artifact_put_free(p->put);
	p->put = NULL;
	char *mt = strdup(p->media_type);
	if (!mt)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact ref");
	*ret = (airlock_artifact_ref){ .size_bytes = row.size_bytes, .media_type = mt };
	memcpy(ret->artifact_id, p->artifact_id, sizeof(ret->artifact_id));
	memcpy(ret->sha256, row.sha256, sizeof(ret->sha256));
	return 0;
fail:
	airlock_artifact_put_free(p->put);
	p->put = NULL;
	return r;
}

void worker_artifact_put_free(worker_artifact_put *p)
{
	if (!p)
		return;
	airlock_artifact_put_free(p->put);
	free(p->filename);
	free(p);
}

int worker_artifact_create(const worker_artifact_writer *w, const void *filename,
                           size_t filename_len, const char *media_type,
                           airlock_trust_level trust, const void *data, size_t len,
                           airlock_artifact_ref *ret, airlock_error *err)
{
	worker_artifact_put *p = NULL;
	int r = worker_artifact_begin(w, filename, filename_len, media_type, trust, &p, err);
	if (r < 0)
		return r;
	/* The bytes are the worker's own: the digest the store computes is
	 * the only one there is, so no comparison is asked for. */
	r = worker_artifact_write(p, data, len, err);
	if (r == 0)
		r = worker_artifact_finish(p, NULL, ret, err);
	worker_artifact_put_free(p);
	return r;
}

/* ---- reads ------------------------------------------------------------------------ */

int worker_artifacts_lookup(worker_artifacts *a, const char *artifact_id, const char *tenant_id,
                            int64_t now_ms, worker_db_artifact *ret, bool *ret_found,
                            airlock_error *err)
{
	*ret_found = false;
	memset(ret, 0, sizeof(*ret));
	/* Not an id this worker makes: the same "not found" as a missing one
	 * (no error that would tell a prober the shape was wrong). */
	if (!artifact_id || !airlock_uuidv7_valid(artifact_id))
		return 0;
	/* Another tenant's, pending, expired: no row, decided by the one
	 * statement every case runs, so the clock tells a prober no more than
	 * the answer does (bench_artifact_404). */
	return worker_db_artifact_get_visible(a->db, artifact_id, tenant_id, now_ms, ret, ret_found,
	                                      err);
}

int worker_artifacts_content(worker_artifacts *a, const worker_db_artifact *row, int64_t offset,
                             airlock_artifact_reader **ret, int64_t *ret_size,
                             airlock_error *err)
{
	return airlock_artifact_store_open(a->store, row->tenant_id, row->artifact_id, offset, ret,
	                                   ret_size, err);
}

int worker_artifacts_remove(worker_artifacts *a, const worker_db_artifact *row,
                            airlock_error *err)
{
	/* The object first: a crash between the two leaves a row whose object
	 * is gone, which a lookup's open answers 404 and the next remove or
	 * the sweeper finishes; the other order would leave an object no row
	 * names until the sweeper's walk. */
	int r = airlock_artifact_store_remove(a->store, row->tenant_id, row->artifact_id, err);
	bool deleted = false;
	if (r == 0)
		r = worker_db_artifact_delete(a->db, row->artifact_id, &deleted, err);
	return r;
}

/* ---- retention -------------------------------------------------------------------- */

typedef struct walk_state {
	worker_artifacts *a;
	int64_t before_ms;
	worker_sweep_stats *stats;
	airlock_error *err;
} walk_state;

/* An object the database has no row for, older than the grace: a leftover
 * of a remove whose row went first by hand, or of a restore. A row in any
 * state keeps its object (a pending one is the due pass's). */
static int walk_object(void *arg, const char *tenant_id, const char *artifact_id, int64_t size,
                       int64_t mtime_ms)
{
	walk_state *s = arg;
	if (mtime_ms >= s->before_ms)
		return 0;
	worker_db_artifact row;
	bool found = false;
	airlock_error e = { 0 };
	int r = worker_db_artifact_get(s->a->db, artifact_id, &row, &found, &e);
	bool owned = r == 0 && found && strcmp(row.tenant_id, tenant_id) == 0;
	worker_db_artifact_clear(&row);
	if (r < 0) {
		/* The database is not answering: stop the walk, the next pass
		 * tries again; no object is removed on a guess. */
		if (s->err)
			*s->err = e;
		return r;
	}
	if (owned)
		return 0;
	if (airlock_artifact_store_remove(s->a->store, tenant_id, artifact_id, &e) < 0)
		s->stats->failures++;
	else
		s->stats->orphans_removed++;
	airlock_error_clear(&e);
	(void)size;
	return 0;
}

int worker_artifacts_sweep(worker_artifacts *a, int64_t now_ms, worker_sweep_stats *ret,
                           airlock_error *err)
{
	memset(ret, 0, sizeof(*ret));
	int64_t before = now_ms - a->cfg.grace_seconds * 1000;
	if (before < 0)
		before = 0;
	worker_db_artifact_key *due = calloc(AIRLOCK_WORKER_DB_ARTIFACTS_MAX, sizeof(*due));
	if (!due)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact sweep");
	int r = 0;
	/* Batches until none is due; a batch in which nothing could be removed
	 * ends the pass (the next one retries), so a store that refuses every
	 * remove cannot hold the sweeper in a loop. */
	for (;;) {
		size_t n = 0;
		r = worker_db_artifact_due(a->db, now_ms, before, due, AIRLOCK_WORKER_DB_ARTIFACTS_MAX,
		                           &n, err);
		if (r < 0 || n == 0)
			break;
		size_t removed = 0;
		for (size_t i = 0; i < n; i++) {
			airlock_error e = { 0 };
			bool deleted = false;
			/* The row first, and only while it is still due, so a
			 * put that committed or a run that attached the artifact
			 * since the batch was read keeps it; its object then goes
			 * (a crash between leaves an object no row names, which
			 * the walk removes after the grace). */
			int rr = worker_db_artifact_delete_due(a->db, due[i].artifact_id, now_ms, before,
			                                       &deleted, &e);
			if (rr == 0 && deleted)
				rr = airlock_artifact_store_remove(a->store, due[i].tenant_id,
				                                   due[i].artifact_id, &e);
			if (rr < 0) {
				ret->failures++;
			} else {
				removed++;
				if (deleted && due[i].committed)
					ret->expired_removed++;
				else if (deleted)
					ret->pending_removed++;
			}
			airlock_error_clear(&e);
		}
		if (removed == 0 || n < AIRLOCK_WORKER_DB_ARTIFACTS_MAX)
			break;
	}
	free(due);
	if (r < 0)
		return r;
	walk_state ws = { .a = a, .before_ms = before, .stats = ret, .err = err };
	/* The store's walk takes an age on its own clock: the one that puts
	 * the cutoff at before (0 when before is in its future, as a driven
	 * clock can make it). */
	int64_t age = util_now_ms() - before;
	return airlock_artifact_store_walk(a->store, age > 0 ? age : 0, walk_object, &ws,
	                                   &ret->temps_removed, err);
}

static void *sweeper_main(void *arg)
{
	worker_artifacts *a = arg;
	pthread_mutex_lock(&a->lock);
	while (!a->stopping) {
		struct timespec at;
		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_sec += a->cfg.sweep_interval_seconds;
		while (!a->stopping && pthread_cond_timedwait(&a->wake, &a->lock, &at) != ETIMEDOUT)
			;
		if (a->stopping)
			break;
		pthread_mutex_unlock(&a->lock);
		worker_sweep_stats st;
		airlock_error e = { 0 };
		if (worker_artifacts_sweep(a, util_now_ms(), &st, &e) < 0)
			worker_log("error", "artifact_sweep_failed",
			           json_pack("{s:s}", "message", e.message));
		else if (st.expired_removed || st.pending_removed || st.orphans_removed ||
		         st.temps_removed || st.failures)
			worker_log(st.failures ? "warning" : "info", "artifact_sweep",
			           json_pack("{s:I, s:I, s:I, s:I, s:I}", "expired_removed",
			                     (json_int_t)st.expired_removed, "pending_removed",
			                     (json_int_t)st.pending_removed, "orphans_removed",
			                     (json_int_t)st.orphans_removed, "temps_removed",
			                     (json_int_t)st.temps_removed, "failures",
			                     (json_int_t)st.failures));
		airlock_error_clear(&e);
		pthread_mutex_lock(&a->lock);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}
