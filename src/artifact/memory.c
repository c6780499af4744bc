/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-memory ArtifactStore adapter (src/artifact/memory.h). Objects and
 * puts in flight are entries of one list under one lock; an entry is
 * reference counted (the list, a put, each reader), so a walk that sweeps
 * a put's stale temporary, or a remove while a reader reads, never frees
 * memory another caller still holds.
 */
#include "artifact/memory.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/ids.h"
#include "util/util.h"

typedef struct mem_obj {
	struct mem_obj *next;
	char key[AIRLOCK_ARTIFACT_KEY_MAX];
	unsigned char *data;
	size_t len, alloc;
	int64_t mtime_ms;
	unsigned refs;
	bool in_list;
	bool committed;
} mem_obj;

struct artifact_memstore {
	pthread_mutex_t lock;
	mem_obj *head;
	size_t bytes, max_bytes;
	unsigned walkers; /* walks in progress: removals only unlist */
	char identity[AIRLOCK_UUID_STR_LEN + 1]; /* one per store: nothing outlives it */
	char database[AIRLOCK_UUID_STR_LEN + 1]; /* the database it serves, "" until bound */
};

typedef struct mem_put {
	artifact_memstore *m;
	mem_obj *o;
} mem_put;

typedef struct mem_reader {
	artifact_memstore *m;
	mem_obj *o;
	size_t pos;
} mem_reader;

/* Under the lock. */
static void mem_unref(artifact_memstore *m, mem_obj *o)
{
	if (--o->refs > 0)
		return;
	m->bytes -= o->alloc;
	free(o->data);
	free(o);
}

/* Under the lock: take every unlisted entry out of the chain. */
static void mem_purge(artifact_memstore *m)
{
	mem_obj **pp = &m->head;
	while (*pp) {
		mem_obj *o = *pp;
		if (o->in_list) {
			pp = &o->next;
			continue;
		}
		*pp = o->next;
		mem_unref(m, o);
	}
}

/* Under the lock. While a walk runs the entry only leaves the listing
 * (in_list) and stays in the chain, so the walk's next pointers stay
 * valid; the last walk out purges the chain. */
static void mem_unlink(artifact_memstore *m, mem_obj *o)
{
	o->in_list = false;
	if (m->walkers == 0)
		mem_purge(m);
}

/* Under the lock. */
static mem_obj *mem_find(artifact_memstore *m, const char *key)
{
	for (mem_obj *o = m->head; o; o = o->next)
		if (o->in_list && o->committed && strcmp(o->key, key) == 0)
			return o;
	return NULL;
}

static mem_obj *mem_new(artifact_memstore *m, const char *key, int64_t mtime_ms)
{
	mem_obj *o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	memcpy(o->key, key, strlen(key) + 1);
	o->mtime_ms = mtime_ms;
	o->refs = 1;
	o->in_list = true;
	o->next = m->head;
	m->head = o;
	return o;
}

static int mem_put_begin(void *ctx, const char *key, int64_t size_cap, void **ret_put,
                         airlock_error *err)
{
	artifact_memstore *m = ctx;
	(void)size_cap;
	if (strlen(key) >= AIRLOCK_ARTIFACT_KEY_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "artifact store (memory): a key longer than a storage key");
	mem_put *p = calloc(1, sizeof(*p));
	if (!p)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact %s", key);
	pthread_mutex_lock(&m->lock);
	mem_obj *o = mem_new(m, key, util_now_ms());
	if (o)
		o->refs++; /* the put's */
	pthread_mutex_unlock(&m->lock);
	if (!o) {
		free(p);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact %s", key);
	}
	p->m = m;
	p->o = o;
	*ret_put = p;
	return 0;
}

static int mem_gone(const mem_obj *o, airlock_error *err)
{
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOENT,
	                         "artifact %s: its temporary object was removed by a walk", o->key);
}

static int mem_put_write(void *v, const void *buf, size_t len, airlock_error *err)
{
	mem_put *p = v;
	artifact_memstore *m = p->m;
	mem_obj *o = p->o;
	int r = 0;
	pthread_mutex_lock(&m->lock);
	if (!o->in_list) {
		r = mem_gone(o, err);
	} else if (len > o->alloc - o->len) {
		/* Double, bounded by what the store may still hold. */
		size_t want = o->len + len;
		size_t na = o->alloc ? o->alloc : 4096;
		while (na < want)
			na = na > SIZE_MAX / 2 ? want : na * 2;
		if (na - o->alloc > m->max_bytes - m->bytes)
			na = want;
		unsigned char *nd = NULL;
		if (na - o->alloc > m->max_bytes - m->bytes)
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOSPC,
			                      "artifact %s: the memory store holds at most %zu bytes",
			                      o->key, m->max_bytes);
		else if (!(nd = realloc(o->data, na)))
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact %s", o->key);
		if (r == 0) {
			m->bytes += na - o->alloc;
			o->data = nd;
			o->alloc = na;
		}
	}
	if (r == 0) {
		memcpy(o->data + o->len, buf, len);
		o->len += len;
		o->mtime_ms = util_now_ms();
	}
	pthread_mutex_unlock(&m->lock);
	return r;
}

static int mem_put_sync(void *v, airlock_error *err)
{
	mem_put *p = v;
	int r = 0;
	pthread_mutex_lock(&p->m->lock);
	if (!p->o->in_list)
		r = mem_gone(p->o, err);
	pthread_mutex_unlock(&p->m->lock);
	return r;
}

static int mem_put_commit(void *v, airlock_error *err)
{
	mem_put *p = v;
	artifact_memstore *m = p->m;
	int r = 0;
	pthread_mutex_lock(&m->lock);
	/* The check and the flip under one lock: two puts of one key cannot
	 * both commit. */
	if (!p->o->in_list)
		r = mem_gone(p->o, err);
	else if (mem_find(m, p->o->key))
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EEXIST,
		                      "artifact %s: an object is never overwritten", p->o->key);
	else {
		p->o->committed = true;
		p->o->mtime_ms = util_now_ms();
	}
	pthread_mutex_unlock(&m->lock);
	return r;
}

static void mem_put_free(void *v)
{
	mem_put *p = v;
	if (!p)
		return;
	artifact_memstore *m = p->m;
	pthread_mutex_lock(&m->lock);
	if (!p->o->committed && p->o->in_list)
		mem_unlink(m, p->o);
	mem_unref(m, p->o);
	pthread_mutex_unlock(&m->lock);
	free(p);
}

static int mem_open(void *ctx, const char *key, int64_t offset, void **ret_reader,
                    int64_t *ret_size, airlock_error *err)
{
	artifact_memstore *m = ctx;
	mem_reader *rd = calloc(1, sizeof(*rd));
	if (!rd)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact %s", key);
	pthread_mutex_lock(&m->lock);
	mem_obj *o = mem_find(m, key);
	if (o)
		o->refs++;
	pthread_mutex_unlock(&m->lock);
	if (!o) {
		free(rd);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOENT, "artifact %s", key);
	}
	rd->m = m;
	rd->o = o;
	rd->pos = (uint64_t)offset < o->len ? (size_t)offset : o->len;
	*ret_reader = rd;
	*ret_size = (int64_t)o->len;
	return 0;
}

static ssize_t mem_read(void *v, void *buf, size_t len, airlock_error *err)
{
	(void)err;
	mem_reader *rd = v;
	/* A committed object's bytes never change and the reader's reference
	 * keeps them: no lock needed. */
	size_t n = rd->o->len - rd->pos;
	if (n > len)
		n = len;
	if (n > SSIZE_MAX)
		n = SSIZE_MAX;
	if (n == 0)
		return 0; /* an empty object has no data to copy from */
	memcpy(buf, rd->o->data + rd->pos, n);
	rd->pos += n;
	return (ssize_t)n;
}

static void mem_reader_free(void *v)
{
	mem_reader *rd = v;
	if (!rd)
		return;
	pthread_mutex_lock(&rd->m->lock);
	mem_unref(rd->m, rd->o);
	pthread_mutex_unlock(&rd->m->lock);
	free(rd);
}

static int mem_remove(void *ctx, const char *key, airlock_error *err)
{
	(void)err;
	artifact_memstore *m = ctx;
	pthread_mutex_lock(&m->lock);
	mem_obj *o = mem_find(m, key);
	if (o)
		mem_unlink(m, o);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

/* One entry at a time, the lock released around cb (which may remove the
 * object it is handed): while walkers > 0 nothing leaves the chain, so
 * each entry's next pointer stays valid; entries put in meanwhile go in at
 * the head, before the walk's place, and are left for the next walk. */
static int mem_walk(void *ctx, int64_t older_than_ms,
                    int (*cb)(void *arg, const char *key, int64_t size, int64_t mtime_ms),
                    void *arg, size_t *ret_temps_removed, airlock_error *err)
{
	(void)err;
	artifact_memstore *m = ctx;
	int64_t cutoff = util_now_ms() - older_than_ms;
	size_t removed = 0;
	int r = 0;
	pthread_mutex_lock(&m->lock);
	m->walkers++;
	for (mem_obj *o = m->head; o && r >= 0; o = o->next) {
		if (!o->in_list)
			continue;
		if (!o->committed) {
			if (o->mtime_ms < cutoff) {
				mem_unlink(m, o);
				removed++;
			}
			continue;
		}
		char key[AIRLOCK_ARTIFACT_KEY_MAX];
		memcpy(key, o->key, sizeof(key));
		int64_t size = (int64_t)o->len, mtime = o->mtime_ms;
		pthread_mutex_unlock(&m->lock);
		r = cb(arg, key, size, mtime);
		pthread_mutex_lock(&m->lock);
	}
	if (--m->walkers == 0)
		mem_purge(m);
	pthread_mutex_unlock(&m->lock);
	*ret_temps_removed = removed;
	return r;
}

static void mem_free(void *ctx)
{
	artifact_memstore *m = ctx;
	if (!m)
		return;
	for (mem_obj *o = m->head; o; o = o->next)
		o->in_list = false;
	mem_purge(m);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static int mem_identity(void *ctx, char ret[AIRLOCK_UUID_STR_LEN + 1], airlock_error *err)
{
	(void)err;
	memcpy(ret, ((artifact_memstore *)ctx)->identity, AIRLOCK_UUID_STR_LEN + 1);
	return 0;
}

static int mem_bind_database(void *ctx, const char *database_id,
                             char ret_bound[AIRLOCK_UUID_STR_LEN + 1], airlock_error *err)
{
	(void)err;
	artifact_memstore *m = ctx;
	pthread_mutex_lock(&m->lock);
	if (!m->database[0])
		memcpy(m->database, database_id, AIRLOCK_UUID_STR_LEN + 1);
	memcpy(ret_bound, m->database, AIRLOCK_UUID_STR_LEN + 1);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

static const airlock_artifact_store_ops mem_ops = {
	.version = AIRLOCK_ARTIFACT_STORE_OPS_VERSION,
	.name = "memory",
	.put_begin = mem_put_begin,
	.put_write = mem_put_write,
	.put_sync = mem_put_sync,
	.put_commit = mem_put_commit,
	.put_free = mem_put_free,
	.open = mem_open,
	.read = mem_read,
	.reader_free = mem_reader_free,
	.remove = mem_remove,
	.walk = mem_walk,
	.identity = mem_identity,
	.bind_database = mem_bind_database,
	.free = mem_free,
};

int artifact_memory_open(size_t max_bytes, airlock_artifact_store **ret,
                         artifact_memstore **ret_state, airlock_error *err)
{
	artifact_memstore *m = calloc(1, sizeof(*m));
	if (!m)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact store (memory)");
	int ir = airlock_uuidv7_new(m->identity, err);
	if (ir < 0) {
		free(m);
		return ir;
	}
	pthread_mutex_init(&m->lock, NULL);
	m->max_bytes = max_bytes;
	int r = airlock_artifact_store_new(&mem_ops, m, ret, err);
	if (r < 0)
		return r;
	if (ret_state)
		*ret_state = m;
	return 0;
}

int artifact_memory_plant_temp(artifact_memstore *m, const char *key, int64_t mtime_ms)
{
	if (strlen(key) >= AIRLOCK_ARTIFACT_KEY_MAX)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	mem_obj *o = mem_new(m, key, mtime_ms);
	pthread_mutex_unlock(&m->lock);
	return o ? 0 : -ENOMEM;
}

void artifact_memory_count(artifact_memstore *m, size_t *ret_temps, size_t *ret_objects,
                           size_t *ret_bytes)
{
	size_t t = 0, n = 0;
	pthread_mutex_lock(&m->lock);
	for (mem_obj *o = m->head; o; o = o->next)
		if (o->in_list && o->committed)
			n++;
		else if (o->in_list)
			t++;
	size_t b = m->bytes;
	pthread_mutex_unlock(&m->lock);
	if (ret_temps)
		*ret_temps = t;
	if (ret_objects)
		*ret_objects = n;
	if (ret_bytes)
		*ret_bytes = b;
}

int artifact_memory_has(artifact_memstore *m, const char *key)
{
	pthread_mutex_lock(&m->lock);
	int r = mem_find(m, key) != NULL;
	pthread_mutex_unlock(&m->lock);
	return r;
}
