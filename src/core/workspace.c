/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The WorkspaceHandle port's core (the specification, "WorkspaceHandle"):
 * the containment function and the thin wrappers every adapter sits behind.
 *
 * The string rules are applied here once, for every adapter, on the raw
 * bytes the caller handed over; only a path that passed them reaches an
 * adapter, and the adapter's contain() then decides rule 3 on the real
 * filesystem. Nothing here normalizes: a path is accepted exactly as written
 * or rejected, because normalizing is where traversal bugs come from.
 */
#include "airlock/port/workspace.h"
#include "core/workspace_internal.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define WORKSPACE_PREFIX AIRLOCK_WORKSPACE_ROOT "/"
#define WORKSPACE_PREFIX_LEN (sizeof(WORKSPACE_PREFIX) - 1)

static const char *const entry_type_names[AIRLOCK_ENTRY__MAX] = {
	[AIRLOCK_ENTRY_INVALID] = "invalid",
	[AIRLOCK_ENTRY_FILE] = "file",
	[AIRLOCK_ENTRY_DIRECTORY] = "directory",
	[AIRLOCK_ENTRY_SYMLINK] = "symlink",
	[AIRLOCK_ENTRY_OTHER] = "other",
};

const char *airlock_entry_type_name(airlock_entry_type t)
{
	if ((unsigned)t >= AIRLOCK_ENTRY__MAX)
		return "invalid";
	return entry_type_names[t];
}

void airlock_dir_listing_clear(airlock_dir_listing *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->entries[i].path);
	free(l->entries);
	*l = (airlock_dir_listing){ 0 };
}

const char *airlock_workspace_quote(const void *in, size_t len, char out[AIRLOCK_WORKSPACE_QUOTE_MAX])
{
	size_t show = len < AIRLOCK_WORKSPACE_QUOTE_SHOW ? len : AIRLOCK_WORKSPACE_QUOTE_SHOW;
	/* 4 bytes per shown input byte at worst, plus quotes and the length
	 * suffix, which AIRLOCK_WORKSPACE_QUOTE_MAX leaves room for. */
	out[0] = '"';
	util_escape(out + 1, AIRLOCK_WORKSPACE_QUOTE_MAX - 40, in, show);
	size_t o = strlen(out);
	out[o++] = '"';
	out[o] = 0;
	if (show < len)
		snprintf(out + o, AIRLOCK_WORKSPACE_QUOTE_MAX - o, "...(%zu bytes)", len);
	return out;
}

/* Reject with the rule's name and the offending input, quoted safely. */
static int check_reject(airlock_error *err, const char *input, size_t len, const char *why)
{
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	return airlock_error_set(err, AIRLOCK_ERR_WORKSPACE_ESCAPE, 0, "path %s rejected: %s",
	                         airlock_workspace_quote(input, len, q), why);
}

int airlock_workspace_check_string(const char *input, size_t len, char **ret_rel, airlock_error *err)
{
	if (!input || len == 0)
		return check_reject(err, input, 0, "rule 1: empty path");
	/* Rule 2 first: a NUL would make every later byte invisible to the
	 * C-string calls an adapter makes, so nothing else is looked at. */
	if (memchr(input, 0, len))
		return check_reject(err, input, len, "rule 2: contains a NUL byte");
	if (input[0] == '/')
		return check_reject(err, input, len, "rule 2: absolute path");
	/* Rule 4 on the joined result; checked before the component walk so an
	 * enormous input costs one comparison. len is bounded by the check, so
	 * the join below cannot overflow. */
	if (len > AIRLOCK_PATH_MAX - WORKSPACE_PREFIX_LEN)
		return check_reject(err, input, len,
		                    "rule 4: resolved path longer than 4096 bytes");

	/* Rules 1 and 4 per component. Splitting on '/' only: a backslash,
	 * a percent sign or an overlong UTF-8 sequence is an ordinary name byte
	 * to the kernel, so it is an ordinary name byte here; nothing decodes. */
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && input[i] != '/')
			continue;
		size_t clen = i - start;
		const char *c = input + start;
		if (clen == 0)
			return check_reject(err, input, len,
			                    i == len ? "rule 1: trailing '/' (empty component)"
			                             : "rule 1: empty component");
		if (clen == 1 && c[0] == '.')
			return check_reject(err, input, len, "rule 1: '.' component");
		if (clen == 2 && c[0] == '.' && c[1] == '.')
			return check_reject(err, input, len, "rule 1: '..' component");
		if (clen > AIRLOCK_PATH_COMPONENT_MAX)
			return check_reject(err, input, len,
			                    "rule 4: component longer than 255 bytes");
		start = i + 1;
	}

	if (ret_rel) {
		char *rel = malloc(len + 1);
		if (!rel)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "workspace path");
		memcpy(rel, input, len);
		rel[len] = 0;
		*ret_rel = rel;
	}
	return 0;
}

struct airlock_workspace_life {
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned refs;     /* the owner's and every handed-out reference */
	unsigned inflight; /* calls into the adapter that have not returned */
	bool dead;         /* the owner ended it: every call fails */
	bool ctx_freed;
};

int airlock_workspace_new(const airlock_workspace_ops *ops, void *ctx, airlock_workspace **ret,
                          airlock_error *err)
{
	assert(ret);
	/* A stream is pulled (all three of open, read, close) or pushed
	 * (read_stream): a table with neither whole set has no stream. */
	bool pull = ops && ops->stream_open && ops->stream_read && ops->stream_close;
	bool partial = ops && !pull && (ops->stream_open || ops->stream_read || ops->stream_close);
	if (!ops || ops->version != AIRLOCK_WORKSPACE_OPS_VERSION || !ops->contain || !ops->read ||
	    !ops->write || !ops->listdir || !ops->provenance || !ops->free || partial ||
	    (!pull && !ops->read_stream)) {
		/* The table is the adapter author's mistake; ctx is still ours to
		 * release, and only the table's own free knows how. */
		if (ops && ops->free && ctx)
			ops->free(ctx);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "workspace adapter table is incomplete or of another version");
	}
	airlock_workspace *w = calloc(1, sizeof(*w));
	airlock_workspace_life *life = calloc(1, sizeof(*life));
	if (!w || !life) {
		free(w);
		free(life);
		ops->free(ctx);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "workspace");
	}
	pthread_mutex_init(&life->lock, NULL);
	pthread_cond_init(&life->idle, NULL);
	life->refs = 1;
	w->ops = ops;
	w->ctx = ctx;
	w->life = life;
	*ret = w;
	return 0;
}

airlock_workspace *airlock_workspace_ref(airlock_workspace *w)
{
	if (!w)
		return NULL;
	pthread_mutex_lock(&w->life->lock);
	w->life->refs++;
	pthread_mutex_unlock(&w->life->lock);
	return w;
}

void airlock_workspace_release(airlock_workspace *w)
{
	if (!w)
		return;
	airlock_workspace_life *life = w->life;
	pthread_mutex_lock(&life->lock);
	bool last = --life->refs == 0;
	pthread_mutex_unlock(&life->lock);
	if (!last)
		return;
	/* Last reference without the owner's end (never handed out, or a
	 * caller that outlived nothing): the adapter goes now. */
	if (!life->ctx_freed)
		w->ops->free(w->ctx);
	pthread_mutex_destroy(&life->lock);
	pthread_cond_destroy(&life->idle);
	free(life);
	free(w);
}

void airlock_workspace_free(airlock_workspace *w)
{
	if (!w)
		return;
	airlock_workspace_life *life = w->life;
	/* Dead first, so no new call starts; then wait for those running,
	 * each of which is bounded by its own size caps. */
	pthread_mutex_lock(&life->lock);
	life->dead = true;
	while (life->inflight > 0)
		pthread_cond_wait(&life->idle, &life->lock);
	bool free_ctx = !life->ctx_freed;
	life->ctx_freed = true;
	pthread_mutex_unlock(&life->lock);
	if (free_ctx)
		w->ops->free(w->ctx);
	airlock_workspace_release(w);
}

/* Every call into the adapter is bracketed, so the owner's end can wait
 * for it and a call after the end fails instead of using a freed ctx
 * (core/workspace_internal.h). */
int workspace_call_enter(airlock_workspace *w, airlock_error *err)
{
	pthread_mutex_lock(&w->life->lock);
	bool dead = w->life->dead;
	if (!dead)
		w->life->inflight++;
	pthread_mutex_unlock(&w->life->lock);
	if (dead)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "the workspace's sandbox was destroyed");
	return 0;
}

void workspace_call_leave(airlock_workspace *w)
{
	pthread_mutex_lock(&w->life->lock);
	if (--w->life->inflight == 0 && w->life->dead)
		pthread_cond_broadcast(&w->life->idle);
	pthread_mutex_unlock(&w->life->lock);
}

const char *airlock_workspace_root(const airlock_workspace *w)
{
	(void)w;
	return AIRLOCK_WORKSPACE_ROOT;
}

/*
 * Rule 3 through the adapter, with rule 5 enforced here: whatever contain()
 * returns other than success becomes WorkspaceEscape, so an adapter that
 * fails for an unexpected reason still fails closed and the caller sees one
 * error class for every rejection. One failure keeps its own class:
 * ExecutionUnavailable, an adapter that could not reach the place where
 * containment is decided (the remote adapter's service gone). The call is
 * refused all the same, and WorkspaceEscape would be a claim about the
 * path that nobody made: the model would be told to fix a path that was
 * never looked at, and a platform would not retry what is an outage.
 */
static int workspace_contain(airlock_workspace *w, const char *rel, airlock_error *err)
{
	int r = w->ops->contain(w->ctx, rel, err);
	if (r == 0 || r == airlock_errcode(AIRLOCK_ERR_WORKSPACE_ESCAPE) ||
	    r == airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE))
		return r;
	if (err) {
		err->cls = AIRLOCK_ERR_WORKSPACE_ESCAPE;
		err->errnum = 0;
		airlock_error_prefix(err, "containment could not be established: ");
	}
	return airlock_errcode(AIRLOCK_ERR_WORKSPACE_ESCAPE);
}

/* The string rules and rule 3 for a C-string path a wrapper received. */
static int workspace_check(airlock_workspace *w, const char *path, char **ret_rel, airlock_error *err)
{
	_cleanup_free_ char *rel = NULL;
	int r = airlock_workspace_check_string(path, path ? strlen(path) : 0, &rel, err);
	if (r < 0)
		return r;
	r = workspace_contain(w, rel, err);
	if (r < 0)
		return r;
	*ret_rel = TAKE_PTR(rel);
	return 0;
}

static int workspace_resolve_inner(airlock_workspace *w, const char *input, size_t len, char **ret,
                              airlock_error *err)
{
	assert(w && ret);
	_cleanup_free_ char *rel = NULL;
	int r = airlock_workspace_check_string(input, len, &rel, err);
	if (r < 0)
		return r;
	r = workspace_contain(w, rel, err);
	if (r < 0)
		return r;

	/* len was bounded by check_string: the result is at most 4096 bytes. */
	char *out = malloc(WORKSPACE_PREFIX_LEN + len + 1);
	if (!out)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "workspace path");
	memcpy(out, WORKSPACE_PREFIX, WORKSPACE_PREFIX_LEN);
	memcpy(out + WORKSPACE_PREFIX_LEN, rel, len + 1);
	*ret = out;
	return 0;
}

static int workspace_read_inner(airlock_workspace *w, const char *path, size_t max_bytes,
                           unsigned char **ret_data, size_t *ret_len, airlock_error *err)
{
	assert(w && ret_data && ret_len);
	_cleanup_free_ char *rel = NULL;
	int r = workspace_check(w, path, &rel, err);
	if (r < 0)
		return r;
	return w->ops->read(w->ctx, rel, max_bytes, ret_data, ret_len, err);
}

static int workspace_write_inner(airlock_workspace *w, const char *path, const void *data, size_t len,
                            airlock_error *err)
{
	assert(w && (data || len == 0));
	_cleanup_free_ char *rel = NULL;
	int r = workspace_check(w, path, &rel, err);
	if (r < 0)
		return r;
	return w->ops->write(w->ctx, rel, data, len, err);
}

static int workspace_listdir_inner(airlock_workspace *w, const char *path, size_t max_entries,
                              airlock_dir_listing *ret, airlock_error *err)
{
	assert(w && ret);
	_cleanup_free_ char *rel = NULL;
	/* "." and "" name the root; any other spelling of it ("./", "a/..") is
	 * rejected by the string rules like everywhere else. */
	if (path && (path[0] == 0 || strcmp(path, ".") == 0)) {
		rel = strdup("");
		if (!rel)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "workspace path");
		int r = workspace_contain(w, rel, err);
		if (r < 0)
			return r;
	} else {
		int r = workspace_check(w, path, &rel, err);
		if (r < 0)
			return r;
	}
	airlock_dir_listing l = { 0 };
	int r = w->ops->listdir(w->ctx, rel, max_entries, &l, err);
	if (r < 0)
		return r;
	/* The port's bounds, whatever the adapter did: the sorted prefix
	 * that fits both, the rest cut and said to be. */
	size_t keep = 0, bytes = 0;
	while (keep < l.n && keep < max_entries) {
		size_t cost = strlen(l.entries[keep].path) + 1;
		if (cost > AIRLOCK_WORKSPACE_LISTDIR_BYTES_MAX - bytes)
			break;
		bytes += cost;
		keep++;
	}
	if (keep < l.n) {
		for (size_t i = keep; i < l.n; i++)
			free(l.entries[i].path);
		l.n = keep;
		l.truncated = true;
	}
	*ret = l;
	return 0;
}

static int workspace_provenance_inner(airlock_workspace *w, const char *path, airlock_provenance *ret,
                                 airlock_error *err)
{
	assert(w && ret);
	_cleanup_free_ char *rel = NULL;
	int r = workspace_check(w, path, &rel, err);
	if (r < 0)
		return r;
	return w->ops->provenance(w->ctx, rel, ret, err);
}

int airlock_workspace_resolve(airlock_workspace *w, const char *input, size_t len, char **ret,
                              airlock_error *err)
{
	assert(w);
	int r = workspace_call_enter(w, err);
	if (r < 0)
		return r;
	r = workspace_resolve_inner(w, input, len, ret, err);
	workspace_call_leave(w);
	return r;
}

int airlock_workspace_read(airlock_workspace *w, const char *path, size_t max_bytes,
                           unsigned char **ret_data, size_t *ret_len, airlock_error *err)
{
	assert(w);
	int r = workspace_call_enter(w, err);
	if (r < 0)
		return r;
	r = workspace_read_inner(w, path, max_bytes, ret_data, ret_len, err);
	workspace_call_leave(w);
	return r;
}

int airlock_workspace_write(airlock_workspace *w, const char *path, const void *data, size_t len,
                            airlock_error *err)
{
	assert(w);
	int r = workspace_call_enter(w, err);
	if (r < 0)
		return r;
	r = workspace_write_inner(w, path, data, len, err);
	workspace_call_leave(w);
	return r;
}

int airlock_workspace_listdir(airlock_workspace *w, const char *path, size_t max_entries,
                              airlock_dir_listing *ret, airlock_error *err)
{
	assert(w);
	int r = workspace_call_enter(w, err);
	if (r < 0)
		return r;
	r = workspace_listdir_inner(w, path, max_entries, ret, err);
	workspace_call_leave(w);
	return r;
}

int airlock_workspace_provenance(airlock_workspace *w, const char *path, airlock_provenance *ret,
                                 airlock_error *err)
{
	assert(w);
	int r = workspace_call_enter(w, err);
	if (r < 0)
		return r;
	r = workspace_provenance_inner(w, path, ret, err);
	workspace_call_leave(w);
	return r;
}

/* ---- streams --------------------------------------------------------------- */

struct airlock_workspace_stream {
	airlock_workspace *w; /* a reference, never a call bracket (the header says why) */
	void *reader;         /* the adapter's */
	char *rel;            /* for messages */
	uint64_t size, done;
	util_sha256 *hash;
	bool ended, failed;
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
};

static const char *stream_quote(const char *rel, char q[AIRLOCK_WORKSPACE_QUOTE_MAX])
{
	return airlock_workspace_quote(rel, strlen(rel), q);
}

void airlock_workspace_stream_close(airlock_workspace_stream *s)
{
	if (!s)
		return;
	/* The reader needs nothing of the adapter's ctx (the op's contract),
	 * so it ends here whether or not the owner has ended the workspace. */
	if (s->reader)
		s->w->ops->stream_close(s->reader);
	util_sha256_free(s->hash);
	free(s->rel);
	airlock_workspace_release(s->w);
	free(s);
}

static void stream_closep(airlock_workspace_stream **s)
{
	airlock_workspace_stream_close(*s);
}

int airlock_workspace_stream_open(airlock_workspace *w, const char *path, uint64_t max_bytes,
                                  airlock_workspace_stream **ret, uint64_t *ret_size,
                                  airlock_error *err)
{
	assert(w && ret && ret_size);
	if (!w->ops->stream_open)
		return airlock_error_set(err, AIRLOCK_ERR_NOT_IMPLEMENTED, 0,
		                         "workspace stream (%s adapter): this adapter streams by push "
		                         "only; use airlock_workspace_read_stream",
		                         w->ops->name);
	__attribute__((cleanup(stream_closep))) airlock_workspace_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "workspace stream");
	s->w = airlock_workspace_ref(w);
	s->hash = util_sha256_new();
	if (!s->hash)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "workspace stream");
	int r = workspace_call_enter(w, err);
	if (r < 0)
		return r;
	r = workspace_check(w, path, &s->rel, err);
	if (r == 0)
		r = w->ops->stream_open(w->ctx, s->rel, max_bytes, &s->reader, &s->size, err);
	workspace_call_leave(w);
	if (r < 0)
		return r;
	/* The port's bound, whatever the adapter did. */
	if (s->size > max_bytes) {
		char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "stream %s: file is %llu bytes, more than the %llu allowed",
		                         stream_quote(s->rel, q), (unsigned long long)s->size,
		                         (unsigned long long)max_bytes);
	}
	*ret_size = s->size;
	*ret = TAKE_PTR(s);
	return 0;
}

int airlock_workspace_stream_read(airlock_workspace_stream *s, void *buf, size_t max,
                                  size_t *ret_n, airlock_error *err)
{
	assert(s && buf && ret_n);
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	if (s->failed)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO,
		                         "stream %s: read after the stream failed",
		                         stream_quote(s->rel, q));
	if (s->ended) {
		*ret_n = 0;
		return 0;
	}
	if (max > AIRLOCK_WORKSPACE_STREAM_CHUNK)
		max = AIRLOCK_WORKSPACE_STREAM_CHUNK;
	if (max == 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "stream %s: a read of 0 bytes", stream_quote(s->rel, q));
	/* One bracket per piece: the owner's end waits for a piece, never for
	 * the client a server is feeding. */
	int r = workspace_call_enter(s->w, err);
	if (r < 0) {
		s->failed = true;
		return r;
	}
	size_t n = 0;
	r = s->w->ops->stream_read(s->w->ctx, s->reader, buf, max, &n, err);
	workspace_call_leave(s->w);
	if (r == 0 && (n > max || n > s->size - s->done))
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO,
		                      "stream %s: the %s adapter handed out more than the file's "
		                      "%llu bytes",
		                      stream_quote(s->rel, q), s->w->ops->name,
		                      (unsigned long long)s->size);
	else if (r == 0 && n == 0 && s->done != s->size)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO,
		                      "stream %s: ended after %llu of its %llu bytes",
		                      stream_quote(s->rel, q), (unsigned long long)s->done,
		                      (unsigned long long)s->size);
	else if (r == 0 && n > 0 && util_sha256_update(s->hash, buf, n) < 0)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO, "stream %s: SHA-256",
		                      stream_quote(s->rel, q));
	else if (r == 0 && n == 0) {
		/* final_hex frees the hash, on failure too. */
		int fr = util_sha256_final_hex(TAKE_PTR(s->hash), s->hex);
		if (fr < 0)
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO, "stream %s: SHA-256",
			                      stream_quote(s->rel, q));
	}
	if (r < 0) {
		s->failed = true;
		return r;
	}
	s->done += n;
	s->ended = n == 0;
	*ret_n = n;
	return 0;
}

int airlock_workspace_stream_digest(airlock_workspace_stream *s,
                                    char ret[AIRLOCK_SHA256_HEX_LEN + 1], airlock_error *err)
{
	assert(s && ret);
	if (!s->ended) {
		char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "stream %s: no digest before the end (%llu of %llu bytes "
		                         "read)",
		                         stream_quote(s->rel, q), (unsigned long long)s->done,
		                         (unsigned long long)s->size);
	}
	memcpy(ret, s->hex, sizeof(s->hex));
	return 0;
}

/* The wrapper's side of a pushed stream: every piece is cut to the chunk,
 * counted against the cap and hashed before the caller's sink sees it. */
typedef struct stream_tee {
	airlock_workspace_sink sink;
	void *arg;
	util_sha256 *hash; /* NULL: the sink hashes (read_stream_hashed) */
	uint64_t count, max_bytes;
	const char *rel;
} stream_tee;

static int stream_tee_sink(void *arg, const void *buf, size_t len, airlock_error *err)
{
	stream_tee *t = arg;
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	if (len > t->max_bytes - t->count)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "stream %s: more than the %llu bytes allowed arrived",
		                         stream_quote(t->rel, q), (unsigned long long)t->max_bytes);
	const unsigned char *p = buf;
	while (len > 0) {
		size_t k = len < AIRLOCK_WORKSPACE_STREAM_CHUNK ? len : AIRLOCK_WORKSPACE_STREAM_CHUNK;
		if (t->hash && util_sha256_update(t->hash, p, k) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO, "stream %s: SHA-256",
			                         stream_quote(t->rel, q));
		int r = t->sink(t->arg, p, k, err);
		if (r < 0)
			return r;
		t->count += k;
		p += k;
		len -= k;
	}
	return 0;
}

static bool sha256_hex_valid(const char *s)
{
	size_t i = 0;
	for (; s[i] && i <= AIRLOCK_SHA256_HEX_LEN; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return i == AIRLOCK_SHA256_HEX_LEN;
}

static int read_stream_push(airlock_workspace *w, const char *path, uint64_t max_bytes,
                            airlock_workspace_sink sink, airlock_workspace_sink_digest sink_digest,
                            void *arg, uint64_t *ret_size,
                            char ret_source_sha256[AIRLOCK_SHA256_HEX_LEN + 1],
                            airlock_error *err)
{
	_cleanup_free_ char *rel = NULL;
	int r = workspace_check(w, path, &rel, err);
	if (r < 0)
		return r;
	stream_tee t = { .sink = sink, .arg = arg, .hash = sink_digest ? NULL : util_sha256_new(),
		         .max_bytes = max_bytes, .rel = rel };
	if (!sink_digest && !t.hash)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "workspace stream");
	uint64_t size = 0;
	char source[AIRLOCK_SHA256_HEX_LEN + 1] = { 0 };
	char own[AIRLOCK_SHA256_HEX_LEN + 1] = { 0 };
	r = w->ops->read_stream(w->ctx, rel, max_bytes, stream_tee_sink, &t, &size, source, err);
	/* Ours over what arrived: the sink's own hash, or the tee's (final_hex
	 * frees it, on failure too). */
	if (r == 0 && sink_digest)
		r = sink_digest(arg, own, err);
	else if (r == 0 && util_sha256_final_hex(TAKE_PTR(t.hash), own) < 0)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO, "workspace stream: SHA-256");
	util_sha256_free(t.hash);
	if (r < 0)
		return r;
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	source[AIRLOCK_SHA256_HEX_LEN] = 0;
	/* The comparison the export exists for (the specification,
	 * "ArtifactStore": both ends compute the digest): the source's over
	 * what it read, ours over what arrived. Anything but the same count and
	 * the same digest means the bytes the sink took are not the file's. */
	if (t.count != size)
		return airlock_error_set(err, AIRLOCK_ERR_ARTIFACT_INTEGRITY, 0,
		                         "stream %s: %llu bytes arrived where the source read %llu; "
		                         "nothing of it may be kept",
		                         stream_quote(rel, q), (unsigned long long)t.count,
		                         (unsigned long long)size);
	if (!sha256_hex_valid(source) || strcmp(source, own) != 0)
		return airlock_error_set(err, AIRLOCK_ERR_ARTIFACT_INTEGRITY, 0,
		                         "stream %s: the source's SHA-256 %.64s is not %s, the one of "
		                         "the %llu bytes that arrived; nothing of it may be kept",
		                         stream_quote(rel, q), source, own, (unsigned long long)size);
	*ret_size = size;
	memcpy(ret_source_sha256, source, sizeof(source));
	return 0;
}

static int read_stream_pull(airlock_workspace *w, const char *path, uint64_t max_bytes,
                            airlock_workspace_sink sink, airlock_workspace_sink_digest sink_digest,
                            void *arg, uint64_t *ret_size,
                            char ret_source_sha256[AIRLOCK_SHA256_HEX_LEN + 1],
                            airlock_error *err)
{
	__attribute__((cleanup(stream_closep))) airlock_workspace_stream *s = NULL;
	uint64_t size = 0;
	int r = airlock_workspace_stream_open(w, path, max_bytes, &s, &size, err);
	if (r < 0)
		return r;
	/* One piece at a time, from the heap: a thread's stack is not the
	 * place for 128 KiB. */
	_cleanup_free_ unsigned char *buf = malloc(AIRLOCK_WORKSPACE_STREAM_CHUNK);
	if (!buf)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "workspace stream");
	for (;;) {
		size_t n = 0;
		r = airlock_workspace_stream_read(s, buf, AIRLOCK_WORKSPACE_STREAM_CHUNK, &n, err);
		if (r < 0)
			return r;
		if (n == 0)
			break;
		r = sink(arg, buf, n, err);
		if (r < 0)
			return r;
	}
	/* In process the source is this wrapper: its digest is the one over
	 * what the sink was handed, and a sink that hashes must agree. */
	char source[AIRLOCK_SHA256_HEX_LEN + 1];
	r = airlock_workspace_stream_digest(s, source, err);
	if (r < 0)
		return r;
	if (sink_digest) {
		char own[AIRLOCK_SHA256_HEX_LEN + 1];
		r = sink_digest(arg, own, err);
		if (r < 0)
			return r;
		if (strcmp(own, source) != 0)
			return airlock_error_set(err, AIRLOCK_ERR_ARTIFACT_INTEGRITY, 0,
			                         "stream: the source's SHA-256 %s is not %s, the one of "
			                         "the bytes the sink took; nothing of it may be kept",
			                         source, own);
	}
	memcpy(ret_source_sha256, source, sizeof(source));
	*ret_size = size;
	return 0;
}

int airlock_workspace_read_stream(airlock_workspace *w, const char *path, uint64_t max_bytes,
                                  airlock_workspace_sink sink, void *arg, uint64_t *ret_size,
                                  char ret_source_sha256[AIRLOCK_SHA256_HEX_LEN + 1],
                                  airlock_error *err)
{
	return airlock_workspace_read_stream_hashed(w, path, max_bytes, sink, NULL, arg, ret_size,
	                                            ret_source_sha256, err);
}

int airlock_workspace_read_stream_hashed(airlock_workspace *w, const char *path,
                                         uint64_t max_bytes, airlock_workspace_sink sink,
                                         airlock_workspace_sink_digest sink_digest, void *arg,
                                         uint64_t *ret_size,
                                         char ret_source_sha256[AIRLOCK_SHA256_HEX_LEN + 1],
                                         airlock_error *err)
{
	assert(w && sink && ret_size && ret_source_sha256);
	if (!w->ops->read_stream)
		return read_stream_pull(w, path, max_bytes, sink, sink_digest, arg, ret_size,
		                        ret_source_sha256, err);
	/* A pushed stream runs in one bracket: the adapter's transport uses
	 * its ctx throughout, so the owner's end waits for it, which the
	 * adapter bounds (the remote one by a low-speed limit and a total
	 * deadline scaled by max_bytes). */
	int r = workspace_call_enter(w, err);
	if (r < 0)
		return r;
	r = read_stream_push(w, path, max_bytes, sink, sink_digest, arg, ret_size, ret_source_sha256,
	                     err);
	workspace_call_leave(w);
	return r;
}
