/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_PORT_ARTIFACT_H
#define AIRLOCK_PORT_ARTIFACT_H

/*
 * The ArtifactStore port (the specification, "Artifacts", "The storage key
 * is derived, never composed", "ArtifactStore"; docs/artifacts.md). Worker
 * side: the store's credential lives where the database does, never on the
 * service that runs untrusted code.
 *
 * An adapter author reads this header and nothing else. Callers never call
 * the table directly: they call the airlock_artifact_* wrappers below,
 * which do once, for every adapter:
 *   - the storage key: computed by airlock_artifact_storage_key from
 *     (tenant_id, artifact_id) and nothing else; an adapter is handed the
 *     key and never a filename, a media type or any other field a caller
 *     supplies (gate.sandbox.artifact_key_opaque checks this module's
 *     source for it);
 *   - SHA-256 while streaming (libcrypto EVP), the comparison with the
 *     expected digest before anything is committed, and the size cap: an
 *     adapter never sees a byte past the cap, and the digest it would keep
 *     is ours, not a checksum of its own (S3's multipart checksums are
 *     composite: docs/artifacts.md says how an S3 adapter keeps ours);
 *   - the put's stages in order (begin, write..., seal, commit), and the
 *     rule that after any failure the put is abandoned: the adapter's
 *     temporary object is removed at once and every later call fails.
 *
 * The store does NO authorization. It holds bytes by key, and a caller
 * that passes a tenant and an artifact id gets those bytes (the
 * specification: "open returns a stream and the caller authorizes before
 * calling it"). Authorization is the worker API's, before both metadata
 * and content; nothing here checks it, and nothing here should.
 *
 * Thread safety: one store serves concurrent puts, opens, removes and
 * walks from any threads. One put or one reader is one caller's: its
 * calls must not overlap. The store must outlive its puts and readers.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "airlock/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "tenant_id/ab/artifact_id": a tenant id of at most AIRLOCK_ID_MAX bytes,
 * the shard, the UUID, two slashes and the NUL. */
#define AIRLOCK_ARTIFACT_KEY_MAX (AIRLOCK_ID_MAX + 1 + 2 + 1 + AIRLOCK_UUID_STR_LEN + 1)

/* The one key function (the specification: storage_key =
 * f"{tenant_id}/{artifact_id[:2]}/{artifact_id}"). Its parameters are
 * exactly these two inputs, both platform-generated (the structural gate
 * gate_sandbox_artifact_key_opaque holds it to that). tenant_id must pass
 * airlock_id_valid (1..AIRLOCK_ID_MAX of [A-Za-z0-9_-], so no '/', '.'
 * or NUL can reach a key), artifact_id must be a lowercase canonical
 * UUIDv7 (airlock_uuidv7_valid). out receives the key; on failure
 * AIRLOCK_ERR_DECODE naming the bad input and out is untouched. */
int airlock_artifact_storage_key(const char *tenant_id, const char *artifact_id,
                                 char out[AIRLOCK_ARTIFACT_KEY_MAX], airlock_error *err);

/* ---- the adapter's table ------------------------------------------------
 * Keys are opaque to an adapter: it stores and lists them, and may split
 * them at '/' only to place an object (a filesystem's shard directories).
 * Every key it is handed passed airlock_artifact_storage_key. */

#define AIRLOCK_ARTIFACT_STORE_OPS_VERSION 2

typedef struct airlock_artifact_store_ops {
	unsigned version; /* AIRLOCK_ARTIFACT_STORE_OPS_VERSION */
	const char *name;

	/* Start a temporary object for key, invisible to open, remove and the
	 * walk's objects (the walk's temporaries). size_cap (> 0) is a hint:
	 * the core never writes past it. *ret_put is the adapter's own. */
	int (*put_begin)(void *ctx, const char *key, int64_t size_cap, void **ret_put,
	                 airlock_error *err);
	/* Append all of len (> 0) bytes. */
	int (*put_write)(void *put, const void *buf, size_t len, airlock_error *err);
	/* Make what was written durable (the filesystem's fsync; an object
	 * store's last part). After it the core compares the digest. */
	int (*put_sync)(void *put, airlock_error *err);
	/* Make the object visible under its key atomically and durably. An
	 * existing object under the key is never replaced: -EEXIST
	 * (AIRLOCK_ERR_SYSTEM, errnum EEXIST). On any failure no object and
	 * no temporary remain. Called at most once, after put_sync. */
	int (*put_commit)(void *put, airlock_error *err);
	/* Remove the temporary object unless the put was committed; free put.
	 * Never fails (a removal that fails leaves a temporary the walk
	 * removes later). */
	void (*put_free)(void *put);

	/* A reader of the committed object under key from offset (0 <= offset;
	 * past the end reads nothing). *ret_size is the object's whole size.
	 * A missing object: -ENOENT (AIRLOCK_ERR_SYSTEM, errnum ENOENT). */
	int (*open)(void *ctx, const char *key, int64_t offset, void **ret_reader, int64_t *ret_size,
	            airlock_error *err);
	/* Up to len (> 0) bytes: their count, 0 at the end, or < 0. */
	ssize_t (*read)(void *reader, void *buf, size_t len, airlock_error *err);
	void (*reader_free)(void *reader);

	/* Remove the committed object under key; a missing one is 0. */
	int (*remove)(void *ctx, const char *key, airlock_error *err);

	/* Every committed object's key, size and modification time (Unix ms);
	 * every temporary object whose modification time is more than
	 * older_than_ms (>= 0) before now removed, and counted in
	 * *ret_temps_removed. Memory bounded whatever the store holds (no
	 * whole listing held). cb returning < 0 stops the walk, which then
	 * returns that value. */
	int (*walk)(void *ctx, int64_t older_than_ms,
	            int (*cb)(void *arg, const char *key, int64_t size, int64_t mtime_ms), void *arg,
	            size_t *ret_temps_removed, airlock_error *err);

	/* The store's identity: a UUIDv7 naming the place its objects are,
	 * made once when the store is new and the same for every process
	 * that opens the same place, ever after (fs: a file in the root).
	 * Two stores with one identity hold the same objects; the worker
	 * binds its database to one identity so that workers sharing a
	 * database cannot each keep objects the others cannot read (version
	 * 2). */
	int (*identity)(void *ctx, char ret[AIRLOCK_UUID_STR_LEN + 1], airlock_error *err);
	/* The worker database the store serves, the other half of that
	 * binding: database_id (a UUIDv7) is recorded when none is, and
	 * *ret_bound is the one recorded, this or an earlier call's, ever
	 * after. A store that serves another database must not be swept by
	 * this one: every object would be an orphan to it. */
	int (*bind_database)(void *ctx, const char *database_id,
	                     char ret_bound[AIRLOCK_UUID_STR_LEN + 1], airlock_error *err);

	void (*free)(void *ctx);
} airlock_artifact_store_ops;

typedef struct airlock_artifact_store airlock_artifact_store;
typedef struct airlock_artifact_put airlock_artifact_put;       /* one put in flight */
typedef struct airlock_artifact_reader airlock_artifact_reader;

/* Wrap an adapter; takes ctx (freed through ops->free), also on failure. */
int airlock_artifact_store_new(const airlock_artifact_store_ops *ops, void *ctx,
                               airlock_artifact_store **ret, airlock_error *err);
/* The adapter's name ("fs", "memory"). */
const char *airlock_artifact_store_name(const airlock_artifact_store *s);
/* The store's identity (ops->identity), checked to be a UUIDv7: an
 * adapter's answer that is not one is AIRLOCK_ERR_SYSTEM. */
int airlock_artifact_store_identity(airlock_artifact_store *s, char ret[AIRLOCK_UUID_STR_LEN + 1],
                                    airlock_error *err);
/* ops->bind_database, database_id checked to be a UUIDv7 and so is the
 * adapter's answer. */
int airlock_artifact_store_bind_database(airlock_artifact_store *s, const char *database_id,
                                         char ret_bound[AIRLOCK_UUID_STR_LEN + 1],
                                         airlock_error *err);
/* NULL is a no-op. Every put and reader must be freed first. */
void airlock_artifact_store_free(airlock_artifact_store *s);

/* ---- a put in stages ----------------------------------------------------
 * So the caller can do its database work between sealing and commit:
 *
 * begin: a temporary object (fs: a dot-named file in the target shard
 *   directory, which the walk recognizes), at most size_cap (> 0) bytes.
 * write: appends, hashing as it goes. Past size_cap the put is abandoned
 *   (temporary removed) and the call fails naming the cap
 *   (AIRLOCK_ERR_TOOL_VALIDATION).
 * seal: flushes (fsync), finishes the digest; when expected_sha256 is not
 *   NULL (64 lowercase hex) and differs, ArtifactIntegrityError naming both
 *   digests, temporary removed. Returns the digest and the size.
 * commit: makes the object visible atomically (fs: rename with
 *   RENAME_NOREPLACE, fsync of the file and of the directory). An existing
 *   object under the key is never overwritten: -EEXIST.
 * free: aborts (removes the temporary) unless committed; NULL is a no-op.
 *
 * After any failure the put is abandoned (nothing of it remains) and every
 * later call but free fails; so does a call out of order (a write after
 * seal, a commit before it, a second commit). */
int airlock_artifact_put_begin(airlock_artifact_store *s, const char *tenant_id,
                               const char *artifact_id, int64_t size_cap,
                               airlock_artifact_put **ret, airlock_error *err);
int airlock_artifact_put_write(airlock_artifact_put *p, const void *buf, size_t len,
                               airlock_error *err);
int airlock_artifact_put_seal(airlock_artifact_put *p, const char *expected_sha256,
                              char ret_sha256[AIRLOCK_SHA256_HEX_LEN + 1], int64_t *ret_size,
                              airlock_error *err);
int airlock_artifact_put_commit(airlock_artifact_put *p, airlock_error *err);
void airlock_artifact_put_free(airlock_artifact_put *p);
/* discard (an open put only): the temporary is removed now and later
 * writes are counted, capped and hashed but kept nowhere; seal still
 * answers the whole stream's digest and size, and commit fails. For a
 * caller that must learn what a stream it will not keep was (the worker:
 * an idempotent export past its tenant's room, answered by an equal
 * artifact it already holds) without the bytes taking disk meanwhile. */
int airlock_artifact_put_discard(airlock_artifact_put *p, airlock_error *err);

/* The specification's put(stream, metadata) in one call, for a caller with
 * no work between the stages: the key from (metadata->tenant_id,
 * artifact_id); pulls from read_fn through one buffer of
 * AIRLOCK_ARTIFACT_STREAM_BUF_BYTES until it returns 0 (< 0: the put is
 * abandoned and that value returned, err as read_fn set it), compares with
 * metadata->sha256 (required), commits, and fills *ret (artifact_id,
 * sha256, size, a malloc'd copy of media_type: the caller clears it with
 * airlock_artifact_ref_clear). No other field of metadata is read: the
 * filename, the run, the origin and the trust label are the caller's row,
 * never a part of where the bytes go. *ret untouched on failure. */
int airlock_artifact_store_put(airlock_artifact_store *s, const char *artifact_id,
                               const airlock_artifact_metadata *metadata, int64_t size_cap,
                               ssize_t (*read_fn)(void *arg, void *buf, size_t len,
                                                  airlock_error *err),
                               void *arg, airlock_artifact_ref *ret, airlock_error *err);

/* ---- reading, removing, listing ------------------------------------------ */

/* A stream of the object from offset (0 <= offset <= its size), for byte
 * ranges; *ret_size is the object's whole size. A missing object: -ENOENT
 * (AIRLOCK_ERR_SYSTEM with errnum ENOENT) so the caller can answer 404; an
 * offset past the end: AIRLOCK_ERR_TOOL_VALIDATION (a 416). NO
 * authorization (above): the caller authorizes before calling it. The
 * specification's open(ref) takes (tenant_id, artifact_id) here because
 * an ArtifactRef carries no tenant (docs/spec-mapping.md). */
int airlock_artifact_store_open(airlock_artifact_store *s, const char *tenant_id,
                                const char *artifact_id, int64_t offset,
                                airlock_artifact_reader **ret, int64_t *ret_size,
                                airlock_error *err);
/* Up to len bytes (len > 0): their count, 0 at the end, or < 0. */
ssize_t airlock_artifact_reader_read(airlock_artifact_reader *r, void *buf, size_t len,
                                     airlock_error *err);
void airlock_artifact_reader_free(airlock_artifact_reader *r);

/* Idempotent: a missing object is 0. */
int airlock_artifact_store_remove(airlock_artifact_store *s, const char *tenant_id,
                                  const char *artifact_id, airlock_error *err);

/* For the retention sweeper's orphan pass: cb sees every committed object
 * (tenant_id, artifact_id, size, mtime_ms); every leftover temporary
 * object older than older_than_ms (>= 0; it must be longer than any put
 * takes from begin to commit, or a put in flight loses its temporary and
 * fails) is removed by the walk itself and counted in *ret_temps_removed
 * (may be NULL). A key that is not a storage key (an adapter's foreign
 * object) is not reported. cb returning < 0 stops the walk, which returns
 * that value. Bounded memory: no whole listing is held. cb may remove the
 * object it is handed. */
int airlock_artifact_store_walk(airlock_artifact_store *s, int64_t older_than_ms,
                                int (*cb)(void *arg, const char *tenant_id,
                                          const char *artifact_id, int64_t size,
                                          int64_t mtime_ms),
                                void *arg, size_t *ret_temps_removed, airlock_error *err);

/* ---- the filesystem adapter ---------------------------------------------
 * root must exist, be a directory (not a symlink to one) of mode 0700
 * owned by the effective uid, and not be inside a source tree (neither it
 * nor an ancestor holds .git); refused at open with AIRLOCK_ERR_CONFIG
 * naming the path and what is wrong. Everything below root is opened by
 * descriptor (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), never by a
 * joined string; tenant and shard directories are made 0700, objects 0600.
 * Layout: root/<tenant_id>/<ab>/<artifact_id>, temporaries
 * root/<tenant_id>/<ab>/.tmp-<artifact_id>-<16 hex> (docs/artifacts.md). */
int airlock_artifact_store_fs_open(const char *root, airlock_artifact_store **ret,
                                   airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
