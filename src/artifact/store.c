/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ArtifactStore port's wrappers (include/airlock/port/artifact.h):
 * the key, the digest, the size cap and the put's stages are done here
 * once, for every adapter. An adapter sees a derived key and bytes; it
 * never sees ArtifactMetadata, so no field a caller wrote can choose where
 * bytes go (gate.sandbox.artifact_key_opaque).
 */
#include "airlock/port/artifact.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/ids.h"
#include "util/util.h"

struct airlock_artifact_store {
	const airlock_artifact_store_ops *ops;
	void *ctx;
};

typedef enum put_state {
	PUT_OPEN,      /* writes accepted */
	PUT_SEALED,    /* digest final; only commit */
	PUT_COMMITTED, /* visible; only free */
	PUT_FAILED,    /* abandoned: nothing of it remains */
} put_state;

struct airlock_artifact_put {
	airlock_artifact_store *store;
	void *aput; /* the adapter's; NULL once abandoned */
	util_sha256 *hash;
	int64_t size, cap;
	put_state state;
	bool discarded; /* the adapter's temporary gone; bytes only counted and hashed */
	char key[AIRLOCK_ARTIFACT_KEY_MAX];
};

struct airlock_artifact_reader {
	airlock_artifact_store *store;
	void *areader;
};

int airlock_artifact_store_new(const airlock_artifact_store_ops *ops, void *ctx,
                               airlock_artifact_store **ret, airlock_error *err)
{
	assert(ret);
	if (!ops || ops->version != AIRLOCK_ARTIFACT_STORE_OPS_VERSION || !ops->name ||
	    !ops->put_begin || !ops->put_write || !ops->put_sync || !ops->put_commit ||
	    !ops->put_free || !ops->open || !ops->read || !ops->reader_free || !ops->remove ||
	    !ops->walk || !ops->identity || !ops->bind_database || !ops->free) {
		/* The table is the adapter author's mistake; ctx is still ours to
		 * release, and only the table's own free knows how. */
		if (ops && ops->free && ctx)
			ops->free(ctx);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "artifact store adapter table is incomplete or of another version");
	}
	airlock_artifact_store *s = calloc(1, sizeof(*s));
	if (!s) {
		ops->free(ctx);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact store");
	}
	s->ops = ops;
	s->ctx = ctx;
	*ret = s;
	return 0;
}

const char *airlock_artifact_store_name(const airlock_artifact_store *s)
{
	return s ? s->ops->name : "(none)";
}

int airlock_artifact_store_identity(airlock_artifact_store *s, char ret[AIRLOCK_UUID_STR_LEN + 1],
                                    airlock_error *err)
{
	if (!s || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "artifact store identity");
	char id[AIRLOCK_UUID_STR_LEN + 1] = "";
	int r = s->ops->identity(s->ctx, id, err);
	if (r < 0)
		return r;
	id[AIRLOCK_UUID_STR_LEN] = 0;
	if (!airlock_uuidv7_valid(id))
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EBADMSG,
		                         "artifact store (%s): its identity is not a UUIDv7",
		                         s->ops->name);
	memcpy(ret, id, sizeof(id));
	return 0;
}

int airlock_artifact_store_bind_database(airlock_artifact_store *s, const char *database_id,
                                         char ret_bound[AIRLOCK_UUID_STR_LEN + 1],
                                         airlock_error *err)
{
	if (!s || !ret_bound || !database_id || !airlock_uuidv7_valid(database_id))
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "artifact store: a database is named by a UUIDv7");
	char id[AIRLOCK_UUID_STR_LEN + 1] = "";
	int r = s->ops->bind_database(s->ctx, database_id, id, err);
	if (r < 0)
		return r;
	id[AIRLOCK_UUID_STR_LEN] = 0;
	if (!airlock_uuidv7_valid(id))
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EBADMSG,
		                         "artifact store (%s): the database it serves is not named by "
		                         "a UUIDv7",
		                         s->ops->name);
	memcpy(ret_bound, id, sizeof(id));
	return 0;
}

void airlock_artifact_store_free(airlock_artifact_store *s)
{
	if (!s)
		return;
	s->ops->free(s->ctx);
	free(s);
}

/* ---- puts ------------------------------------------------------------------ */

/* Abandon: the adapter removes its temporary now, not at free, so a failed
 * put leaves nothing behind even while the caller still holds it. */
static void put_abandon(airlock_artifact_put *p)
{
	if (p->aput)
		p->store->ops->put_free(p->aput);
	p->aput = NULL;
	util_sha256_free(p->hash);
	p->hash = NULL;
	p->state = PUT_FAILED;
}

static int put_fail(airlock_artifact_put *p, int r)
{
	put_abandon(p);
	return r;
}

static const char *const state_names[] = {
	[PUT_OPEN] = "open",
	[PUT_SEALED] = "sealed",
	[PUT_COMMITTED] = "committed",
	[PUT_FAILED] = "abandoned after a failure",
};

/* A call out of order is the caller's bug; it abandons the put too, so
 * "after any failure nothing remains" has no exception. */
static int put_out_of_order(airlock_artifact_put *p, const char *call, airlock_error *err)
{
	put_state was = p->state;
	if (was != PUT_COMMITTED)
		put_abandon(p);
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
	                         "artifact put %s: %s on a put that is %s", p->key, call,
	                         state_names[was]);
}

int airlock_artifact_put_begin(airlock_artifact_store *s, const char *tenant_id,
                               const char *artifact_id, int64_t size_cap,
                               airlock_artifact_put **ret, airlock_error *err)
{
	if (!s || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "artifact put: no store or no place for the put");
	if (size_cap <= 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "artifact put: size cap %lld must be > 0", (long long)size_cap);
	airlock_artifact_put *p = calloc(1, sizeof(*p));
	if (!p)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact put");
	p->store = s;
	p->cap = size_cap;
	int r = airlock_artifact_storage_key(tenant_id, artifact_id, p->key, err);
	if (r < 0) {
		free(p);
		return r;
	}
	p->hash = util_sha256_new();
	if (!p->hash) {
		free(p);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact put: SHA-256");
	}
	r = s->ops->put_begin(s->ctx, p->key, size_cap, &p->aput, err);
	if (r < 0) {
		util_sha256_free(p->hash);
		free(p);
		return r;
	}
	p->state = PUT_OPEN;
	*ret = p;
	return 0;
}

int airlock_artifact_put_write(airlock_artifact_put *p, const void *buf, size_t len,
                               airlock_error *err)
{
	if (!p)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "artifact put write: no put");
	if (p->state != PUT_OPEN)
		return put_out_of_order(p, "write", err);
	if (len == 0)
		return 0;
	if (!buf)
		return put_fail(p, airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                                     "artifact put %s: write of %zu bytes from NULL",
		                                     p->key, len));
	/* The cap before the adapter sees a byte: a stream past it is
	 * abandoned mid-write (the specification, "ArtifactStore"), and the
	 * bytes that did fit are removed with the temporary. */
	if ((uint64_t)len > (uint64_t)(p->cap - p->size))
		return put_fail(p, airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                                     "artifact %s is larger than its size cap of %lld "
		                                     "bytes: abandoned, nothing stored",
		                                     p->key, (long long)p->cap));
	if (util_sha256_update(p->hash, buf, len) < 0)
		return put_fail(p, airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO,
		                                     "artifact put %s: SHA-256", p->key));
	int r = p->discarded ? 0 : p->store->ops->put_write(p->aput, buf, len, err);
	if (r < 0)
		return put_fail(p, r);
	p->size += (int64_t)len;
	return 0;
}

int airlock_artifact_put_discard(airlock_artifact_put *p, airlock_error *err)
{
	if (!p)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "artifact put discard: no put");
	if (p->state != PUT_OPEN)
		return put_out_of_order(p, "discard", err);
	/* The temporary goes now (nothing of it stays on disk); the digest
	 * and the count go on, so the caller still learns what the whole
	 * stream was. */
	if (p->aput)
		p->store->ops->put_free(p->aput);
	p->aput = NULL;
	p->discarded = true;
	return 0;
}

int airlock_artifact_put_seal(airlock_artifact_put *p, const char *expected_sha256,
                              char ret_sha256[AIRLOCK_SHA256_HEX_LEN + 1], int64_t *ret_size,
                              airlock_error *err)
{
	if (!p)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "artifact put seal: no put");
	if (p->state != PUT_OPEN)
		return put_out_of_order(p, "seal", err);
	if (expected_sha256 && !airlock_sha256_hex_valid(expected_sha256)) {
		char q[96];
		return put_fail(p, airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                                     "artifact put %s: expected sha256 %s is not 64 "
		                                     "lowercase hex characters",
		                                     p->key,
		                                     util_escape(q, sizeof(q), expected_sha256,
		                                                 strlen(expected_sha256))));
	}
	int r = p->discarded ? 0 : p->store->ops->put_sync(p->aput, err);
	if (r < 0)
		return put_fail(p, r);
	char got[AIRLOCK_SHA256_HEX_LEN + 1];
	r = util_sha256_final_hex(p->hash, got);
	p->hash = NULL; /* freed by final */
	if (r < 0)
		return put_fail(p, airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r,
		                                     "artifact put %s: SHA-256", p->key));
	/* The comparison that makes the hop verifiable (the specification,
	 * "ArtifactStore"): before commit, so a truncated or altered transfer
	 * is a failure with nothing stored, not a corrupt artifact. */
	if (expected_sha256 && strcmp(expected_sha256, got) != 0)
		return put_fail(p, airlock_error_set(err, AIRLOCK_ERR_ARTIFACT_INTEGRITY, 0,
		                                     "artifact %s: the %lld bytes received hash to "
		                                     "sha256 %s, the metadata says %s: nothing stored",
		                                     p->key, (long long)p->size, got, expected_sha256));
	p->state = PUT_SEALED;
	if (ret_sha256)
		memcpy(ret_sha256, got, sizeof(got));
	if (ret_size)
		*ret_size = p->size;
	return 0;
}

int airlock_artifact_put_commit(airlock_artifact_put *p, airlock_error *err)
{
	if (!p)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "artifact put commit: no put");
	if (p->state != PUT_SEALED)
		return put_out_of_order(p, "commit", err);
	if (p->discarded)
		return put_fail(p, airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                                     "artifact put %s: commit of a discarded put "
		                                     "(its bytes were not kept)",
		                                     p->key));
	int r = p->store->ops->put_commit(p->aput, err);
	if (r < 0)
		return put_fail(p, r);
	p->state = PUT_COMMITTED;
	return 0;
}

void airlock_artifact_put_free(airlock_artifact_put *p)
{
	if (!p)
		return;
	/* Before a commit this removes the temporary: an abandoned put leaves
	 * nothing. */
	if (p->aput)
		p->store->ops->put_free(p->aput);
	util_sha256_free(p->hash);
	free(p);
}

int airlock_artifact_store_put(airlock_artifact_store *s, const char *artifact_id,
                               const airlock_artifact_metadata *metadata, int64_t size_cap,
                               ssize_t (*read_fn)(void *arg, void *buf, size_t len,
                                                  airlock_error *err),
                               void *arg, airlock_artifact_ref *ret, airlock_error *err)
{
	if (!s || !metadata || !read_fn || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "artifact put: no store, metadata, stream or result");
	/* The digest is required here: a put whose bytes nobody vouched for
	 * is the staged API's (seal with NULL), chosen on purpose. */
	if (!airlock_sha256_hex_valid(metadata->sha256))
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "artifact put: ArtifactMetadata.sha256 must be 64 lowercase hex "
		                         "characters");
	if (!metadata->media_type)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "artifact put: ArtifactMetadata.media_type is missing");
	_cleanup_free_ char *media_type = strdup(metadata->media_type);
	_cleanup_free_ unsigned char *buf = malloc(AIRLOCK_ARTIFACT_STREAM_BUF_BYTES);
	if (!media_type || !buf)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact put");

	airlock_artifact_put *p = NULL;
	/* The key's inputs are the platform's tenant and id; nothing else of
	 * metadata reaches the adapter. */
	int r = airlock_artifact_put_begin(s, metadata->tenant_id, artifact_id, size_cap, &p, err);
	if (r < 0)
		return r;
	for (;;) {
		ssize_t n = read_fn(arg, buf, AIRLOCK_ARTIFACT_STREAM_BUF_BYTES, err);
		if (n == 0)
			break;
		if (n < 0 || (size_t)n > AIRLOCK_ARTIFACT_STREAM_BUF_BYTES) {
			airlock_artifact_put_free(p);
			if (n > 0)
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
				                         "artifact put: the stream returned %zd bytes for a "
				                         "buffer of %zu",
				                         n, AIRLOCK_ARTIFACT_STREAM_BUF_BYTES);
			return (int)(n < INT32_MIN ? INT32_MIN : n);
		}
		r = airlock_artifact_put_write(p, buf, (size_t)n, err);
		if (r < 0) {
			airlock_artifact_put_free(p);
			return r;
		}
	}
	char sha[AIRLOCK_SHA256_HEX_LEN + 1];
	int64_t size = 0;
	r = airlock_artifact_put_seal(p, metadata->sha256, sha, &size, err);
	if (r >= 0)
		r = airlock_artifact_put_commit(p, err);
	airlock_artifact_put_free(p);
	if (r < 0)
		return r;
	*ret = (airlock_artifact_ref){ .size_bytes = size };
	memcpy(ret->artifact_id, artifact_id, AIRLOCK_UUID_STR_LEN + 1);
	memcpy(ret->sha256, sha, sizeof(sha));
	ret->media_type = TAKE_PTR(media_type);
	return 0;
}

/* ---- reading, removing, listing -------------------------------------------- */

int airlock_artifact_store_open(airlock_artifact_store *s, const char *tenant_id,
                                const char *artifact_id, int64_t offset,
                                airlock_artifact_reader **ret, int64_t *ret_size,
                                airlock_error *err)
{
	if (!s || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "artifact open: no store or no place for the reader");
	if (offset < 0)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "artifact open: offset %lld is negative", (long long)offset);
	char key[AIRLOCK_ARTIFACT_KEY_MAX];
	int r = airlock_artifact_storage_key(tenant_id, artifact_id, key, err);
	if (r < 0)
		return r;
	airlock_artifact_reader *rd = calloc(1, sizeof(*rd));
	if (!rd)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact open");
	rd->store = s;
	int64_t size = 0;
	r = s->ops->open(s->ctx, key, offset, &rd->areader, &size, err);
	if (r < 0) {
		free(rd);
		return r;
	}
	if (offset > size) {
		airlock_artifact_reader_free(rd);
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "artifact %s: offset %lld is past its end (%lld bytes)", key,
		                         (long long)offset, (long long)size);
	}
	*ret = rd;
	if (ret_size)
		*ret_size = size;
	return 0;
}

ssize_t airlock_artifact_reader_read(airlock_artifact_reader *r, void *buf, size_t len,
                                     airlock_error *err)
{
	if (!r || !buf)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "artifact read: no reader");
	if (len == 0)
		return 0;
	ssize_t n = r->store->ops->read(r->areader, buf, len, err);
	if (n > (ssize_t)len)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO,
		                         "artifact read: the %s adapter returned %zd bytes for %zu",
		                         r->store->ops->name, n, len);
	return n;
}

void airlock_artifact_reader_free(airlock_artifact_reader *r)
{
	if (!r)
		return;
	if (r->areader)
		r->store->ops->reader_free(r->areader);
	free(r);
}

int airlock_artifact_store_remove(airlock_artifact_store *s, const char *tenant_id,
                                  const char *artifact_id, airlock_error *err)
{
	if (!s)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "artifact remove: no store");
	char key[AIRLOCK_ARTIFACT_KEY_MAX];
	int r = airlock_artifact_storage_key(tenant_id, artifact_id, key, err);
	if (r < 0)
		return r;
	return s->ops->remove(s->ctx, key, err);
}

typedef struct walk_state {
	int (*cb)(void *arg, const char *tenant_id, const char *artifact_id, int64_t size,
	          int64_t mtime_ms);
	void *arg;
} walk_state;

/* A listed key back to its two inputs, accepted only when the key function
 * gives the same key again: an adapter's foreign object (or a name planted
 * in the store's directory) is never reported as an artifact. */
static int walk_key(void *arg, const char *key, int64_t size, int64_t mtime_ms)
{
	walk_state *w = arg;
	const char *slash = strchr(key, '/');
	if (!slash || (size_t)(slash - key) > AIRLOCK_ID_MAX)
		return 0;
	char tenant[AIRLOCK_ID_MAX + 1];
	memcpy(tenant, key, (size_t)(slash - key));
	tenant[slash - key] = 0;
	const char *id = strrchr(key, '/') + 1;
	char again[AIRLOCK_ARTIFACT_KEY_MAX];
	if (airlock_artifact_storage_key(tenant, id, again, NULL) < 0 || strcmp(again, key) != 0)
		return 0;
	return w->cb(w->arg, tenant, id, size, mtime_ms);
}

int airlock_artifact_store_walk(airlock_artifact_store *s, int64_t older_than_ms,
                                int (*cb)(void *arg, const char *tenant_id,
                                          const char *artifact_id, int64_t size,
                                          int64_t mtime_ms),
                                void *arg, size_t *ret_temps_removed, airlock_error *err)
{
	if (!s || !cb)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "artifact walk: no store or no callback");
	if (older_than_ms < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "artifact walk: older_than_ms %lld is negative",
		                         (long long)older_than_ms);
	walk_state w = { .cb = cb, .arg = arg };
	size_t removed = 0;
	int r = s->ops->walk(s->ctx, older_than_ms, walk_key, &w, &removed, err);
	if (ret_temps_removed)
		*ret_temps_removed = removed;
	return r;
}
