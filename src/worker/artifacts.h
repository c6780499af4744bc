/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_WORKER_ARTIFACTS_H
#define AIRLOCK_WORKER_ARTIFACTS_H

/*
 * The worker's artifacts (docs/artifacts.md): the store (the port of
 * include/airlock/port/artifact.h) and the rows of the worker's database
 * (worker/db.h) kept in step, the specification's ArtifactWriter, and the
 * retention sweeper.
 *
 * A create runs in this order, so that whatever a crash leaves is found by
 * the sweeper (worker_artifacts_sweep) and nothing half-written is ever
 * visible:
 *   1. the bytes stream into a temporary object, hashed as they come, the
 *      size cap checked as they come (past it: abandoned, nothing left),
 *      and the room the tenant had under its cap when the put began
 *      (read once at begin: at the cap, refused before a temporary; past
 *      the room, abandoned at that write, or for a writer with
 *      reuse_same discarded: kept nowhere, hashed on, answered at finish
 *      by an equal artifact or refused; step 3 stays the authoritative
 *      check);
 *   2. seal: fsync, the digest compared with the one the source claims
 *      (an export's: the service's; an upload's: the client's header), a
 *      difference is ArtifactIntegrityError and the temporary is removed;
 *   3. the row inserted PENDING, charged to its tenant's bytes in the same
 *      transaction (past the tenant's cap: refused naming the cap, the
 *      temporary removed);
 *   4. the object committed (rename, directory fsync);
 *   5. the row marked COMMITTED: from here it is an artifact.
 * A crash after 3 leaves a pending row (with or without its object): the
 * sweeper removes both once the row is older than the grace period. For
 * that row and for an expired artifact's alike, the row goes first and
 * only while it is still due (a put that committed or a run that attached
 * the artifact in the meantime keeps it), then the object. An object with
 * no row at all (a crash between the two removals, a row removed by hand)
 * is removed by the sweeper's walk once older than the grace.
 *
 * Authorization is the caller's (the worker's API), before both metadata
 * and content; the store does no check of its own (the specification,
 * "ArtifactStore"). worker_artifacts_lookup answers "not found" for a
 * missing id, a pending or expired row and another tenant's row alike, by
 * the same single database read.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "airlock/error.h"
#include "airlock/port/artifact.h"
#include "airlock/types.h"
#include "worker/db.h"

/* A tenant's bytes when worker.artifact_tenant_bytes_max is 0: 10 GiB. */
#define WORKER_ARTIFACT_TENANT_BYTES_DEFAULT (INT64_C(10) << 30)
/* The sweeper's grace: an hour, past any honest put (a 512 MiB stream at
 * 1 MiB/s takes under 9 minutes; steps 3 to 5 take milliseconds). */
#define WORKER_ARTIFACT_GRACE_SECONDS 3600

typedef struct worker_artifacts_config {
	const char *root;               /* the store's directory: 0700, this user's */
	int64_t size_max;               /* one artifact's bytes (default 512 MiB) */
	int64_t tenant_bytes_max;       /* a tenant's bytes in all its artifacts */
	int64_t retention_seconds;      /* expires_at = created_at + this (30 days) */
	int64_t upload_unclaimed_seconds; /* an unclaimed upload's life (24 h) */
	int64_t sweep_interval_seconds; /* 0: no sweeper thread (tests sweep by hand) */
	/* How old a pending row or a row-less object must be before the
	 * sweeper takes it for a crash's leftover: longer than any put's
	 * steps 3 to 5 (milliseconds) and than any stream's whole life for a
	 * temporary object. */
	int64_t grace_seconds;
} worker_artifacts_config;

typedef struct worker_artifacts worker_artifacts;

/* Open the store (the fs adapter at cfg->root; refused naming the setting
 * when it is not 0700 and this user's) beside db (borrowed: it outlives
 * the handle), and start the sweeper thread when its interval is set. */
int worker_artifacts_open(const worker_artifacts_config *cfg, worker_db *db,
                          worker_artifacts **ret, airlock_error *err);
/* The same over a store the caller made (taken, freed with the handle). */
int worker_artifacts_new(const worker_artifacts_config *cfg, worker_db *db,
                         airlock_artifact_store *store, worker_artifacts **ret,
                         airlock_error *err);
/* Stops the sweeper (waiting for a pass under way) and frees. */
void worker_artifacts_free(worker_artifacts *a);
const worker_artifacts_config *worker_artifacts_config_of(const worker_artifacts *a);

/* ---- the ArtifactWriter -----------------------------------------------------
 * The capability a tool is handed (the specification, "ArtifactWriter"):
 * the tenant, the run and the origin are fixed by whoever made it from
 * the execution context; a tool supplies bytes, a suggested filename, a
 * media type and a trust label, never a tenant, a run, a size, a checksum
 * or a key, so it cannot write into another run. */
typedef struct worker_artifact_writer {
	worker_artifacts *artifacts;
	char tenant_id[AIRLOCK_ID_MAX + 1];
	bool has_run; /* false only for an upload */
	char run_id[AIRLOCK_ID_MAX + 1];
	airlock_artifact_origin origin;
	/* An artifact of this run equal to the one being made (origin,
	 * digest, size, filename, media type) is answered instead of a second
	 * copy: what makes artifact.export IDEMPOTENT. */
	bool reuse_same;
} worker_artifact_writer;

/* One create in flight (steps 1-5 above). */
typedef struct worker_artifact_put worker_artifact_put;

/* filename: any bytes (kept as metadata, never a path), 0..
 * AIRLOCK_ARTIFACT_FILENAME_MAX of them; media_type by
 * airlock_media_type_valid; a refusal names the argument. */
int worker_artifact_begin(const worker_artifact_writer *w, const void *filename,
                          size_t filename_len, const char *media_type,
                          airlock_trust_level trust, worker_artifact_put **ret,
                          airlock_error *err);
int worker_artifact_write(worker_artifact_put *p, const void *buf, size_t len,
                          airlock_error *err);
/* Step 2 ahead of finish, for a caller that compares the digest itself
 * (airlock_workspace_read_stream_hashed): the bytes made durable and the
 * SHA-256 of what was received in *ret_sha256; finish then takes it as
 * sealed (and compares its expected digest with it again). */
int worker_artifact_seal(worker_artifact_put *p, char ret_sha256[AIRLOCK_SHA256_HEX_LEN + 1],
                         airlock_error *err);
/* Steps 2-5: expected_sha256 (64 lowercase hex) is the source's claim,
 * NULL when there is none (text the worker itself holds). On success
 * *ret is the ArtifactRef (ret->media_type malloc'd:
 * airlock_artifact_ref_clear). On failure nothing is left: no object, no
 * temporary, no row. Either way p is spent: free it. */
int worker_artifact_finish(worker_artifact_put *p, const char *expected_sha256,
                           airlock_artifact_ref *ret, airlock_error *err);
/* Abandons a create not finished (removes its temporary); NULL is a
 * no-op. */
void worker_artifact_put_free(worker_artifact_put *p);

/* A whole buffer in one call (text the model wrote, a captured stream). */
int worker_artifact_create(const worker_artifact_writer *w, const void *filename,
                           size_t filename_len, const char *media_type,
                           airlock_trust_level trust, const void *data, size_t len,
                           airlock_artifact_ref *ret, airlock_error *err);

/* ---- reads, after the caller's authorization ---------------------------------
 * lookup: the row of a committed, unexpired artifact of tenant_id (NULL:
 * any tenant, for a token of every tenant); *ret_found false otherwise,
 * whichever of those it was. An artifact_id that is not a canonical UUIDv7
 * is not found (no error, no database read). */
int worker_artifacts_lookup(worker_artifacts *a, const char *artifact_id, const char *tenant_id,
                            int64_t now_ms, worker_db_artifact *ret, bool *ret_found,
                            airlock_error *err);
/* The bytes of a row lookup returned, from offset (a byte range's start);
 * *ret_size the whole object's size. An object missing under a committed
 * row is AIRLOCK_ERR_SYSTEM with ENOENT (answer 404; the sweeper logs and
 * removes such a row once expired). */
int worker_artifacts_content(worker_artifacts *a, const worker_db_artifact *row, int64_t offset,
                             airlock_artifact_reader **ret, int64_t *ret_size,
                             airlock_error *err);
/* Delete an artifact: its object, then its row. */
int worker_artifacts_remove(worker_artifacts *a, const worker_db_artifact *row,
                            airlock_error *err);

/* ---- retention ----------------------------------------------------------------- */

typedef struct worker_sweep_stats {
	size_t expired_removed;   /* committed rows past expires_at, with their objects */
	size_t pending_removed;   /* pending rows older than the grace, with any object */
	size_t orphans_removed;   /* objects with no row, older than the grace */
	size_t temps_removed;     /* temporary objects older than the grace */
	size_t failures;          /* removals that failed (retried next pass) */
} worker_sweep_stats;

/* One pass at now (tests drive the clock). Bounded work per call: at most
 * AIRLOCK_WORKER_DB_ARTIFACTS_MAX rows per batch, batches until none is
 * due. */
int worker_artifacts_sweep(worker_artifacts *a, int64_t now_ms, worker_sweep_stats *ret,
                           airlock_error *err);

#endif
