/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The WorkspaceHandle of a remote sandbox: each operation is one call of
 * the service's workspace verbs (docs/service-api.md). The core has already
 * applied the string rules to every path; the service applies them again
 * and decides containment on its own descriptors, so a path that escapes
 * is WorkspaceEscape from there. Bytes stream both ways: a read is taken
 * into a buffer capped at the caller's max_bytes as it arrives, a write is
 * sent from the caller's buffer without a copy.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "airlock/json.h"
#include "remote/remote_internal.h"

/* A workspace call moves at most one file or one listing; the service
 * answers it from its own disk. Two minutes is far past any honest one and
 * still bounds a hung service. */
#define WORKSPACE_TIMEOUT_MS 120000

typedef struct remote_ws {
	remote_http *http; /* the adapter's; it frees every workspace before itself */
	char environment_id[AIRLOCK_ENVIRONMENT_ID_MAX];
	char *handle_b64;
} remote_ws;

/* "/v1/sandboxes/ID/workspace/VERB?path=P" plus extra ("&max_bytes=N"). */
static char *ws_path(const remote_ws *w, const char *verb, const char *rel, const char *extra)
{
	_cleanup_free_ char *q = remote_query_escape(rel);
	char *p = NULL;
	if (!q || asprintf(&p, "/v1/sandboxes/%s/workspace/%s?path=%s%s", w->environment_id, verb, q,
	                   extra ? extra : "") < 0)
		return NULL;
	return p;
}

static remote_call ws_call(const remote_ws *w, const char *method, const char *path)
{
	return (remote_call){ .method = method, .path = path, .handle_b64 = w->handle_b64,
		              .timeout_ms = WORKSPACE_TIMEOUT_MS, .max_body = REMOTE_JSON_BODY_MAX,
		              .watch_fds = { -1, -1 } };
}

static int nomem(airlock_error *err, const char *what)
{
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "workspace %s", what);
}

static int rws_contain(void *ctx, const char *rel, airlock_error *err)
{
	remote_ws *w = ctx;
	_cleanup_free_ char *path = ws_path(w, "contain", rel, NULL);
	if (!path)
		return nomem(err, "contain");
	remote_call c = ws_call(w, "GET", path);
	c.max_body = REMOTE_ERROR_BODY_MAX;
	return remote_http_json(w->http, "workspace contain", &c, 204, NULL, err);
}

static int rws_read(void *ctx, const char *rel, size_t max_bytes, unsigned char **ret_data,
                    size_t *ret_len, airlock_error *err)
{
	remote_ws *w = ctx;
	/* The service reads at most AIRLOCK_SERVICE_READ_MAX in one call and
	 * refuses a larger max_bytes: a caller's "any size" is asked as that,
	 * and a larger file is then over max_bytes, as the port says. */
	if (max_bytes > AIRLOCK_SERVICE_READ_MAX)
		max_bytes = AIRLOCK_SERVICE_READ_MAX;
	char extra[48];
	snprintf(extra, sizeof(extra), "&max_bytes=%zu", max_bytes);
	_cleanup_free_ char *path = ws_path(w, "file", rel, extra);
	if (!path)
		return nomem(err, "read");
	remote_call c = ws_call(w, "GET", path);
	/* The bytes are kept as they stream in, never past what was asked:
	 * the service refuses a larger file itself, and one that sends more
	 * anyway is stopped at the cap. */
	c.max_body = max_bytes;
	remote_response resp;
	int r = remote_http_perform(w->http, &c, &resp, err);
	if (r == 0 && resp.status != 200)
		r = remote_http_status_error(w->http, "workspace read", &resp, err);
	else if (r == 0 && resp.over_cap)
		r = airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                      "workspace read: the file is larger than max_bytes (%zu)",
		                      max_bytes);
	if (r < 0) {
		remote_response_clear(&resp);
		return r;
	}
	size_t len = 0;
	unsigned char *data = util_buf_steal(&resp.body, &len);
	remote_response_clear(&resp);
	if (!data) {
		/* An empty file: a buffer never grown. */
		data = malloc(1);
		if (!data)
			return nomem(err, "read");
		data[0] = 0;
	}
	*ret_data = data;
	*ret_len = len;
	return 0;
}

static int rws_write(void *ctx, const char *rel, const void *data, size_t len, airlock_error *err)
{
	remote_ws *w = ctx;
	_cleanup_free_ char *path = ws_path(w, "file", rel, NULL);
	if (!path)
		return nomem(err, "write");
	remote_call c = ws_call(w, "PUT", path);
	c.body = data;
	c.body_len = len;
	c.has_body = true;
	c.content_type = "application/octet-stream";
	c.max_body = REMOTE_ERROR_BODY_MAX;
	return remote_http_json(w->http, "workspace write", &c, 204, NULL, err);
}

/* A listing entry's path is in the lossless text form of FileChange.path
 * (json.h); the FileChange decoder is the one that reads that form, so the
 * path is handed to it inside the smallest FileChange there is. */
static int entry_path(json_t *p, char **ret, airlock_error *err)
{
	json_t *fc = json_pack("{s:O,s:s,s:s,s:i,s:n}", "path", p, "change", "DELETED", "kind",
	                       "FILE", "size_bytes", 0, "sha256");
	_cleanup_free_ char *text = fc ? json_dumps(fc, JSON_COMPACT) : NULL;
	json_decref(fc);
	if (!text)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "entries[].path: not a string");
	airlock_file_change f = { 0 };
	int r = airlock_file_change_from_json(text, strlen(text), &f, err);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(f.path);
	airlock_file_change_clear(&f);
	return 0;
}

/* The wire spells the port's enums in capitals ("FILE", "TOOL_WRITTEN",
 * docs/service-api.md), the library's names are lower case: either is
 * read. */
static airlock_entry_type entry_type_parse(const char *s)
{
	for (int t = AIRLOCK_ENTRY_INVALID + 1; t < AIRLOCK_ENTRY__MAX; t++)
		if (s && strcasecmp(s, airlock_entry_type_name((airlock_entry_type)t)) == 0)
			return (airlock_entry_type)t;
	return AIRLOCK_ENTRY_INVALID;
}

static int listing_from(json_t *o, size_t max_entries, airlock_dir_listing *ret, airlock_error *err)
{
	json_t *entries = json_object_get(o, "entries"), *trunc = json_object_get(o, "truncated");
	if (json_object_size(o) != 2 || !json_is_array(entries) || !json_is_boolean(trunc))
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "a listing is {\"entries\": [...], \"truncated\": bool}");
	size_t n = json_array_size(entries);
	if (n > max_entries)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "%zu entries where at most %zu were asked for", n, max_entries);
	airlock_dir_listing l = { .truncated = json_is_true(trunc), .n = 0 };
	l.entries = calloc(n ? n : 1, sizeof(*l.entries));
	if (!l.entries)
		return nomem(err, "listdir");
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		json_t *e = json_array_get(entries, i);
		json_t *size = json_object_get(e, "size_bytes");
		airlock_entry_type t = entry_type_parse(json_string_value(json_object_get(e, "type")));
		if (json_object_size(e) != 3 || t == AIRLOCK_ENTRY_INVALID || !json_is_integer(size) ||
		    json_integer_value(size) < 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
			                      "entries[%zu]: {\"path\", \"type\", \"size_bytes\"}", i);
			break;
		}
		r = entry_path(json_object_get(e, "path"), &l.entries[i].path, err);
		if (r == 0) {
			l.entries[i].type = t;
			l.entries[i].size_bytes = json_integer_value(size);
			l.n = i + 1;
		}
	}
	if (r < 0) {
		airlock_dir_listing_clear(&l);
		return r;
	}
	*ret = l;
	return 0;
}

static int rws_listdir(void *ctx, const char *rel, size_t max_entries, airlock_dir_listing *ret,
                       airlock_error *err)
{
	remote_ws *w = ctx;
	/* The same for a listing: more than the service lists at once is
	 * asked as its maximum, and the rest is "truncated". */
	if (max_entries > AIRLOCK_SERVICE_LISTDIR_MAX)
		max_entries = AIRLOCK_SERVICE_LISTDIR_MAX;
	char extra[48];
	snprintf(extra, sizeof(extra), "&max_entries=%zu", max_entries);
	_cleanup_free_ char *path = ws_path(w, "dir", rel, extra);
	if (!path)
		return nomem(err, "listdir");
	remote_call c = ws_call(w, "GET", path);
	json_t *o = NULL;
	int r = remote_http_json(w->http, "workspace listdir", &c, 200, (void **)&o, err);
	if (r < 0)
		return r;
	airlock_error why = { 0 };
	r = listing_from(o, max_entries, ret, &why);
	json_decref(o);
	if (r < 0)
		return remote_http_protocol_error(w->http, "workspace listdir", &why, err);
	return 0;
}

static int rws_provenance(void *ctx, const char *rel, airlock_provenance *ret, airlock_error *err)
{
	remote_ws *w = ctx;
	_cleanup_free_ char *path = ws_path(w, "provenance", rel, NULL);
	if (!path)
		return nomem(err, "provenance");
	remote_call c = ws_call(w, "GET", path);
	c.max_body = REMOTE_ERROR_BODY_MAX;
	json_t *o = NULL;
	int r = remote_http_json(w->http, "workspace provenance", &c, 200, (void **)&o, err);
	if (r < 0)
		return r;
	const char *name = json_string_value(json_object_get(o, "provenance"));
	/* Capitals or lower case, as entry_type_parse. */
	airlock_provenance p = AIRLOCK_PROVENANCE_INVALID;
	for (int v = AIRLOCK_PROVENANCE_INVALID + 1; name && v < AIRLOCK_PROVENANCE__MAX; v++)
		if (strcasecmp(name, airlock_provenance_name((airlock_provenance)v)) == 0)
			p = (airlock_provenance)v;
	bool one = json_object_size(o) == 1;
	json_decref(o);
	if (!one || p == AIRLOCK_PROVENANCE_INVALID) {
		airlock_error why = { 0 };
		airlock_error_set(&why, AIRLOCK_ERR_DECODE, 0, "{\"provenance\": NAME}");
		return remote_http_protocol_error(w->http, "workspace provenance", &why, err);
	}
	*ret = p;
	return 0;
}

/* ---- stream -------------------------------------------------------------- */

/* A stalled stream is cut when fewer than this many bytes a second arrive
 * for REMOTE_STREAM_STALL_S seconds (libcurl's low-speed limit), and the
 * whole stream must end within WORKSPACE_TIMEOUT_MS plus max_bytes at the
 * service's slowest honest rate (AIRLOCK_SERVICE_STREAM_MIN_RATE): the
 * deadline grows with what was asked, a stall is cut in seconds. */
#define REMOTE_STREAM_STALL_BYTES 1024L
#define REMOTE_STREAM_STALL_S 30L

typedef struct rws_stream {
	airlock_workspace_sink sink;
	void *arg;
	uint64_t max_bytes, count;
	remote_stream_meta m;
	/* The pieces as they arrive are the service's chunks (about 14 KiB:
	 * its connection's memory limit), and each costs the sink a call (a
	 * write, for the store): they are gathered into one piece of the
	 * port's size first. At most AIRLOCK_WORKSPACE_STREAM_CHUNK held. */
	unsigned char *buf;
	size_t buf_len;
} rws_stream;

static int rws_stream_flush(rws_stream *st, airlock_error *err)
{
	if (st->buf_len == 0)
		return 0;
	size_t n = st->buf_len;
	st->buf_len = 0;
	return st->sink(st->arg, st->buf, n, err);
}

static void rws_stream_header(void *arg, const char *line, size_t len)
{
	rws_stream *st = arg;
	remote_stream_meta_line(&st->m, line, len);
}

static int rws_stream_body(void *arg, const char *data, size_t len, airlock_error *err)
{
	rws_stream *st = arg;
	/* Every byte is bounded before it is handed on: by the announced size,
	 * which must itself be within what was asked. */
	if (!st->m.have_size || st->m.bad_size)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "workspace stream: the answer has no valid Airlock-Size "
		                         "header");
	if (st->m.size > st->max_bytes)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "workspace stream: the file is %llu bytes, more than "
		                         "max_bytes (%llu)",
		                         (unsigned long long)st->m.size,
		                         (unsigned long long)st->max_bytes);
	if (len > st->m.size - st->count)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "workspace stream: the body is longer than its Airlock-Size "
		                         "(%llu bytes)",
		                         (unsigned long long)st->m.size);
	st->count += len;
	while (len > 0) {
		size_t room = AIRLOCK_WORKSPACE_STREAM_CHUNK - st->buf_len;
		size_t k = len < room ? len : room;
		memcpy(st->buf + st->buf_len, data, k);
		st->buf_len += k;
		data += k;
		len -= k;
		if (st->buf_len == AIRLOCK_WORKSPACE_STREAM_CHUNK) {
			int r = rws_stream_flush(st, err);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int rws_read_stream(void *ctx, const char *rel, uint64_t max_bytes,
                           airlock_workspace_sink sink, void *arg, uint64_t *ret_size,
                           char ret_source_sha256[AIRLOCK_SHA256_HEX_LEN + 1],
                           airlock_error *err)
{
	remote_ws *w = ctx;
	/* The service streams at most AIRLOCK_SERVICE_STREAM_FILE_MAX: a
	 * larger max_bytes is asked as that (a larger file is then over
	 * max_bytes, as the port says). */
	if (max_bytes > AIRLOCK_SERVICE_STREAM_FILE_MAX)
		max_bytes = AIRLOCK_SERVICE_STREAM_FILE_MAX;
	char extra[48];
	snprintf(extra, sizeof(extra), "&max_bytes=%llu", (unsigned long long)max_bytes);
	_cleanup_free_ char *path = ws_path(w, "stream", rel, extra);
	if (!path)
		return nomem(err, "stream");
	_cleanup_free_ unsigned char *buf = malloc(AIRLOCK_WORKSPACE_STREAM_CHUNK);
	if (!buf)
		return nomem(err, "stream");
	rws_stream st = { .sink = sink, .arg = arg, .max_bytes = max_bytes, .buf = buf };
	remote_call c = ws_call(w, "GET", path);
	c.sink = rws_stream_body;
	c.sink_arg = &st;
	c.on_header = rws_stream_header;
	c.header_arg = &st;
	c.timeout_ms = WORKSPACE_TIMEOUT_MS +
	               (int64_t)(max_bytes / AIRLOCK_SERVICE_STREAM_MIN_RATE) * 1000;
	c.low_speed_bytes = REMOTE_STREAM_STALL_BYTES;
	c.low_speed_s = REMOTE_STREAM_STALL_S;
	/* Pieces as large as the port hands out: fewer, larger sink calls. */
	c.buffer_size = AIRLOCK_WORKSPACE_STREAM_CHUNK;
	remote_response resp;
	int r = remote_http_perform(w->http, &c, &resp, err);
	if (r == 0 && resp.status != 200)
		r = remote_http_status_error(w->http, "workspace stream", &resp, err);
	remote_response_clear(&resp);
	if (r < 0)
		return r;
	const char *why = NULL;
	if (!st.m.have_size || st.m.bad_size)
		why = "no valid Airlock-Size header";
	else if (st.m.size > max_bytes)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "workspace stream: the file is %llu bytes, more than "
		                         "max_bytes (%llu)",
		                         (unsigned long long)st.m.size, (unsigned long long)max_bytes);
	else if (st.count != st.m.size)
		why = "a body shorter than its Airlock-Size";
	else if (!st.m.have_digest || st.m.bad_digest)
		why = "no valid Airlock-Sha256 trailer after the body (the service cut the stream: "
		      "it could not read the file, or the file changed while it was read)";
	if (why) {
		airlock_error e = { 0 };
		airlock_error_set(&e, AIRLOCK_ERR_DECODE, 0, "%s", why);
		return remote_http_protocol_error(w->http, "workspace stream", &e, err);
	}
	/* The last piece only now: nothing reaches the sink after a failure
	 * the transfer itself had, and the digest is known before it. */
	r = rws_stream_flush(&st, err);
	if (r < 0)
		return r;
	st.m.digest[AIRLOCK_SHA256_HEX_LEN] = 0;
	*ret_size = st.m.size;
	memcpy(ret_source_sha256, st.m.digest, sizeof(st.m.digest));
	return 0;
}

static void rws_free(void *ctx)
{
	remote_ws *w = ctx;
	if (!w)
		return;
	free(w->handle_b64);
	free(w);
}

static const airlock_workspace_ops remote_ws_ops = {
	.version = AIRLOCK_WORKSPACE_OPS_VERSION,
	.name = "remote",
	.contain = rws_contain,
	.read = rws_read,
	.write = rws_write,
	.listdir = rws_listdir,
	.provenance = rws_provenance,
	.free = rws_free,
	/* Push only: the bytes arrive when libcurl delivers them. */
	.read_stream = rws_read_stream,
};

int remote_workspace_new(remote_http *h, const char *environment_id, const char *handle_b64,
                         airlock_workspace **ret, airlock_error *err)
{
	remote_ws *w = calloc(1, sizeof(*w));
	if (!w)
		return nomem(err, "remote");
	w->http = h;
	snprintf(w->environment_id, sizeof(w->environment_id), "%s", environment_id);
	w->handle_b64 = strdup(handle_b64);
	if (!w->handle_b64) {
		free(w);
		return nomem(err, "remote");
	}
	return airlock_workspace_new(&remote_ws_ops, w, ret, err);
}
