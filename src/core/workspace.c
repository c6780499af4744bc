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
	if (!ops || ops->version != AIRLOCK_WORKSPACE_OPS_VERSION || !ops->contain || !ops->read ||
	    !ops->write || !ops->listdir || !ops->provenance || !ops->free) {
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
 * error class for every rejection.
 */
static int workspace_contain(airlock_workspace *w, const char *rel, airlock_error *err)
{
	int r = w->ops->contain(w->ctx, rel, err);
	if (r == 0 || r == airlock_errcode(AIRLOCK_ERR_WORKSPACE_ESCAPE))
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
