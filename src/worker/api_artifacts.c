/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker API's artifact routes (docs/worker-api.md, "Artifacts"):
 * uploads streamed into the store, metadata, downloads with their
 * headers and byte ranges, listings, deletes and attaches.
 *
 * Authorization is here, before both metadata and content: every id is
 * looked up with the token's tenant (worker_artifacts_lookup), and a
 * missing id, an id that is not a UUIDv7, an expired or pending artifact
 * and another tenant's are one answer, not_found below: the same status,
 * body and headers, after the same single database read (the store does
 * no check of its own; docs/artifacts.md).
 */
#include "worker/daemon.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/ids.h"
#include "airlock/json.h"
#include "util/util.h"

struct worker_artifact_request {
	worker_verb verb;
	/* The tenant the request acts for; any_tenant: a token of every
	 * tenant reading or removing by id (the lookup takes any tenant). */
	char tenant[AIRLOCK_ID_MAX + 1];
	bool any_tenant;
	char run_id[AIRLOCK_ID_MAX + 1];
	char artifact_id[AIRLOCK_UUID_STR_LEN + 1];
	worker_list_query list;
	/* An upload: the put from start to finish, the client's digest, the
	 * bytes taken, and the sink's refusal (failed, err). */
	worker_daemon *w;
	worker_artifact_put *put;
	char sha256[AIRLOCK_SHA256_HEX_LEN + 1];
	uint64_t received;
	size_t filename_len;
	char media_type[256];
	bool failed;
	airlock_error err;
};

const char *worker_put_outcome_name(worker_put_outcome o)
{
	static const char *const names[WORKER_PUT_OUTCOME__MAX] = {
		[WORKER_PUT_CREATED] = "created",   [WORKER_PUT_INTEGRITY] = "integrity",
		[WORKER_PUT_TOO_LARGE] = "too_large", [WORKER_PUT_REFUSED] = "refused",
		[WORKER_PUT_ABORTED] = "aborted",   [WORKER_PUT_FAILED] = "failed",
	};
	return (unsigned)o < WORKER_PUT_OUTCOME__MAX ? names[o] : "invalid";
}

void worker_artifact_request_free(worker_artifact_request *q)
{
	if (!q)
		return;
	/* An upload that did not finish leaves nothing: the put's free
	 * removes its temporary object (no row was written yet). */
	worker_artifact_put_free(q->put);
	free(q);
}

/* ---- answers ----------------------------------------------------------------------- */

static http_result refuse(worker_daemon *w, http_request *r, unsigned status, airlock_errclass cls,
                          const char *msg)
{
	if (status >= 500)
		atomic_fetch_add(&w->c.errors, 1);
	return http_respond_fail(r, status, cls, "%s", msg);
}

static http_result refuse_error(worker_daemon *w, http_request *r, const airlock_error *e)
{
	unsigned status = http_error_status(e);
	if (status >= 500) {
		atomic_fetch_add(&w->c.errors, 1);
		worker_log("error", "request.failed", json_pack("{s:s}", "message", e->message));
	}
	return http_respond_error_status(r, status, e);
}

/* The one answer for every id that names nothing this tenant may see
 * (the file's head says which): a static text, no header of its own. */
static http_result not_found(worker_daemon *w, http_request *r)
{
	return refuse(w, r, HTTP_NOT_FOUND, AIRLOCK_ERR_EXECUTION_REJECTED, "no such artifact");
}

static http_result unconfigured(worker_daemon *w, http_request *r)
{
	return refuse(w, r, HTTP_SERVICE_UNAVAILABLE, AIRLOCK_ERR_EXECUTION_UNAVAILABLE,
	              "the artifact store is not configured (worker.artifacts_dir)");
}

/* The tenant a request acts for: the token's, which a named tenant must
 * equal; a token of every tenant ("*") must name one. 0, or the status
 * and message of the refusal. */
static unsigned tenant_for(const char *token, const char *given, char out[AIRLOCK_ID_MAX + 1],
                           const char **msg)
{
	if (strcmp(token, "*") == 0) {
		if (!given[0]) {
			*msg = "tenant_id: a token of every tenant names the artifact's tenant";
			return HTTP_BAD_REQUEST;
		}
		snprintf(out, AIRLOCK_ID_MAX + 1, "%s", given);
		return 0;
	}
	if (given[0] && strcmp(given, token) != 0) {
		*msg = "tenant_id is not the tenant of this request's token";
		return HTTP_FORBIDDEN;
	}
	snprintf(out, AIRLOCK_ID_MAX + 1, "%s", token);
	return 0;
}

static void log_put(const worker_artifact_request *q, const char *event, const char *reason,
                    const char *message)
{
	json_t *ev = json_pack("{s:s, s:s, s:I, s:s, s:I}", "tenant_id", q->tenant, "origin",
	                       "upload", "filename_bytes", (json_int_t)q->filename_len, "media_type",
	                       q->media_type, "received_bytes", (json_int_t)q->received);
	if (ev && reason)
		json_object_set_new(ev, "reason", json_string(reason));
	if (ev && message)
		json_object_set_new(ev, "message", json_string(message));
	worker_log(reason ? "warning" : "info", event, ev);
}

/* ---- an upload ------------------------------------------------------------------------ */

static int upload_write(void *cls, const unsigned char *buf, size_t len)
{
	worker_artifact_request *q = cls;
	q->received += len;
	if (worker_artifact_write(q->put, buf, len, &q->err) < 0) {
		q->failed = true;
		return -1;
	}
	return 0;
}

/* The body will not reach the handler: nothing of it is kept. */
static void upload_abort(void *cls, http_body_end why)
{
	worker_artifact_request *q = cls;
	worker_artifact_put_free(q->put);
	q->put = NULL;
	worker_put_outcome o = why == HTTP_BODY_OVERSIZE ? WORKER_PUT_TOO_LARGE : WORKER_PUT_ABORTED;
	atomic_fetch_add(&q->w->c.artifact_puts[o], 1);
	log_put(q, "artifact.refused", worker_put_outcome_name(o),
	        why == HTTP_BODY_OVERSIZE ? "the body is past worker.artifact_size_max"
	                                  : "the client went away before the body ended");
}

static http_result upload_start(worker_daemon *w, http_request *r, worker_artifact_request *q,
                                const char *token, const char *query, size_t qlen)
{
	airlock_error err = { 0 };
	worker_upload_query up;
	if (worker_upload_query_decode(query, qlen, &up, &err) < 0)
		return refuse_error(w, r, &err);
	const char *msg = NULL;
	unsigned st = tenant_for(token, up.tenant_id, q->tenant, &msg);
	q->filename_len = up.filename_len;
	memcpy(q->media_type, up.media_type, sizeof(q->media_type));
	size_t hl = 0;
	const char *h = http_request_header(r, "Airlock-Content-SHA256", &hl);
	if (st == 0 && !worker_sha256_header_decode(h, hl, q->sha256)) {
		st = HTTP_BAD_REQUEST;
		msg = "Airlock-Content-SHA256: required, the body's SHA-256 as 64 hex digits (the "
		      "worker compares it with what it received and keeps nothing on a difference)";
	}
	if (st) {
		worker_upload_query_clear(&up);
		atomic_fetch_add(&w->c.artifact_puts[WORKER_PUT_REFUSED], 1);
		return refuse(w, r, st, st == HTTP_FORBIDDEN ? AIRLOCK_ERR_EXECUTION_REJECTED
		                                             : AIRLOCK_ERR_TOOL_VALIDATION,
		              msg);
	}
	/* The writer's context is the request's: the tenant the token
	 * allows, no run (an upload belongs to none until attached), origin
	 * UPLOAD and trust USER_SUPPLIED, none of them the client's to say. */
	worker_artifact_writer wr = { .artifacts = w->artifacts, .has_run = false,
		                      .origin = AIRLOCK_ORIGIN_UPLOAD };
	memcpy(wr.tenant_id, q->tenant, sizeof(wr.tenant_id));
	int rc = worker_artifact_begin(&wr, up.filename, up.filename_len, up.media_type,
	                               AIRLOCK_TRUST_USER_SUPPLIED, &q->put, &err);
	worker_upload_query_clear(&up);
	if (rc < 0) {
		atomic_fetch_add(&w->c.artifact_puts[http_error_status(&err) >= 500
		                                             ? WORKER_PUT_FAILED
		                                             : WORKER_PUT_REFUSED],
		                 1);
		return refuse_error(w, r, &err);
	}
	http_body_sink sink = { .write = upload_write, .abort = upload_abort, .cls = q };
	http_request_set_body_sink(r, &sink,
	                           (uint64_t)worker_artifacts_config_of(w->artifacts)->size_max);
	return HTTP_NEXT;
}

static http_result upload_finish(worker_daemon *w, http_request *r, worker_artifact_request *q)
{
	airlock_error err = { 0 };
	airlock_artifact_ref ref = { 0 };
	int rc = -1;
	if (q->failed)
		err = q->err;
	else
		rc = worker_artifact_finish(q->put, q->sha256, &ref, &err);
	worker_artifact_put_free(q->put);
	q->put = NULL;
	if (rc < 0) {
		bool integrity = err.cls == AIRLOCK_ERR_ARTIFACT_INTEGRITY;
		unsigned status = integrity ? HTTP_UNPROCESSABLE_CONTENT : http_error_status(&err);
		worker_put_outcome o = integrity ? WORKER_PUT_INTEGRITY
		                       : status >= 500 ? WORKER_PUT_FAILED
		                                       : WORKER_PUT_REFUSED;
		atomic_fetch_add(&w->c.artifact_puts[o], 1);
		log_put(q, "artifact.refused", worker_put_outcome_name(o), err.message);
		/* ArtifactIntegrityError keeps its own class on the wire: the
		 * client's digest and the bytes it sent disagree, and it is the
		 * one to resend. */
		if (integrity)
			return http_respond_json(r, status, airlock_error_to_json(&err, NULL));
		return refuse_error(w, r, &err);
	}
	atomic_fetch_add(&w->c.artifact_puts[WORKER_PUT_CREATED], 1);
	atomic_fetch_add(&w->c.artifact_bytes_in, (uint64_t)ref.size_bytes);
	json_t *ev = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:I}", "artifact_id", ref.artifact_id,
	                       "tenant_id", q->tenant, "origin", "upload", "size_bytes",
	                       (json_int_t)ref.size_bytes, "sha256", ref.sha256, "media_type",
	                       q->media_type, "filename_bytes", (json_int_t)q->filename_len);
	worker_log("info", "artifact.created", ev);
	char *text = airlock_artifact_ref_to_json(&ref, &err);
	airlock_artifact_ref_clear(&ref);
	return http_respond_json(r, HTTP_CREATED, text);
}

/* ---- metadata ----------------------------------------------------------------------------- */

/* The stored name as a JSON string: valid UTF-8 as it is (a NUL as
 * \u0000), each invalid byte U+FFFD. NULL on ENOMEM. */
static json_t *filename_string(const unsigned char *p, size_t n)
{
	if (http_utf8_valid(p, n))
		return json_stringn((const char *)(n ? (const void *)p : ""), n);
	util_buf b;
	util_buf_init(&b, 3 * n);
	bool ok = true;
	for (size_t i = 0; i < n && ok;) {
		size_t k = http_utf8_len(p + i, n - i);
		ok = k ? util_buf_append(&b, p + i, k) == 0
		       : util_buf_append(&b, "\xef\xbf\xbd", 3) == 0;
		i += k ? k : 1;
	}
	json_t *s = ok ? json_stringn(b.len ? (const char *)b.data : "", b.len) : NULL;
	util_buf_clear(&b);
	return s;
}

static json_t *time_or_null(bool has, int64_t ms)
{
	if (!has)
		return json_null();
	char t[32];
	util_time_format(ms, t);
	return json_string(t);
}

/* Every ArtifactMetadata field (the specification's names) and the id;
 * the filename twice, as text and as its exact bytes. */
static json_t *metadata_json(const worker_db_artifact *a)
{
	char *b64 = util_base64_encode(a->filename ? (const void *)a->filename : "", a->filename_len);
	json_t *o = b64 ? json_object() : NULL;
	bool ok = o != NULL;
	if (ok) {
		ok = json_object_set_new(o, "artifact_id", json_string(a->artifact_id)) == 0 &&
		     json_object_set_new(o, "tenant_id", json_string(a->tenant_id)) == 0 &&
		     json_object_set_new(o, "run_id",
		                         a->has_run ? json_string(a->run_id) : json_null()) == 0 &&
		     json_object_set_new(o, "origin",
		                         json_string(airlock_artifact_origin_name(a->origin))) == 0 &&
		     json_object_set_new(o, "filename",
		                         filename_string(a->filename, a->filename_len)) == 0 &&
		     json_object_set_new(o, "filename_base64", json_string(b64)) == 0 &&
		     json_object_set_new(o, "media_type", json_string(a->media_type)) == 0 &&
		     json_object_set_new(o, "size_bytes", json_integer(a->size_bytes)) == 0 &&
		     json_object_set_new(o, "sha256", json_string(a->sha256)) == 0 &&
		     json_object_set_new(o, "trust",
		                         json_string(airlock_trust_level_name(a->trust))) == 0 &&
		     json_object_set_new(o, "created_at", time_or_null(true, a->created_at_ms)) == 0 &&
		     json_object_set_new(o, "expires_at",
		                         time_or_null(a->has_expires, a->expires_at_ms)) == 0;
	}
	free(b64);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static char *dump(json_t *o)
{
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	return text;
}

/* The row of q's id the request may see; *found false otherwise. */
static int lookup(worker_daemon *w, const worker_artifact_request *q, worker_db_artifact *row,
                  bool *found, airlock_error *err)
{
	return worker_artifacts_lookup(w->artifacts, q->artifact_id,
	                               q->any_tenant ? NULL : q->tenant, util_now_ms(), row, found,
	                               err);
}

static http_result metadata(worker_daemon *w, http_request *r, const worker_artifact_request *q)
{
	worker_db_artifact row;
	bool found = false;
	airlock_error err = { 0 };
	if (lookup(w, q, &row, &found, &err) < 0)
		return refuse_error(w, r, &err);
	if (!found)
		return not_found(w, r);
	json_t *o = metadata_json(&row);
	worker_db_artifact_clear(&row);
	return http_respond_json(r, HTTP_OK, dump(o));
}

/* ---- content ------------------------------------------------------------------------------ */

typedef struct download {
	airlock_artifact_reader *rd;
	worker_daemon *w;
} download;

static ssize_t download_read(void *cls, char *buf, size_t max)
{
	download *d = cls;
	airlock_error err = { 0 };
	ssize_t n = airlock_artifact_reader_read(d->rd, buf, max, &err);
	if (n <= 0) {
		/* The object ended before its row's size, or could not be
		 * read: the connection closes short (http.h), and the log
		 * says why. */
		worker_log("error", "artifact.read_failed",
		           json_pack("{s:s}", "message", n < 0 ? err.message : "short object"));
		return HTTP_STREAM_ERROR;
	}
	atomic_fetch_add(&d->w->c.artifact_bytes_out, (uint64_t)n);
	return n;
}

static void download_free(void *cls)
{
	download *d = cls;
	airlock_artifact_reader_free(d->rd);
	free(d);
}

static http_result content(worker_daemon *w, http_request *r, const worker_artifact_request *q)
{
	worker_db_artifact row;
	bool found = false;
	airlock_error err = { 0 };
	if (lookup(w, q, &row, &found, &err) < 0)
		return refuse_error(w, r, &err);
	if (!found)
		return not_found(w, r);
	uint64_t size = (uint64_t)row.size_bytes;
	char etag[AIRLOCK_SHA256_HEX_LEN + 16];
	snprintf(etag, sizeof(etag), "\"sha256:%s\"", row.sha256);
	char disposition[AIRLOCK_HTTP_DISPOSITION_MAX];
	http_content_disposition(row.filename, row.filename_len, disposition);
	char media_type[sizeof(row.media_type)];
	memcpy(media_type, row.media_type, sizeof(media_type));
	size_t rl = 0, il = 0;
	const char *range = http_request_header(r, "Range", &rl);
	const char *if_range = http_request_header(r, "If-Range", &il);
	uint64_t first = 0, last = size ? size - 1 : 0;
	http_range kind = range && http_if_range_matches(if_range, il, etag)
	                          ? http_range_parse(range, rl, size, &first, &last)
	                          : HTTP_RANGE_NONE;
	char crange[80];
	if (kind == HTTP_RANGE_UNSATISFIABLE) {
		snprintf(crange, sizeof(crange), "bytes */%" PRIu64, size);
		const http_field h[] = { { "Content-Range", crange } };
		char *text = http_error_json(&(airlock_error){
		        .cls = AIRLOCK_ERR_TOOL_VALIDATION,
		        .message = "Range: no byte of it is in the artifact (Content-Range gives its "
		                   "size)" });
		worker_db_artifact_clear(&row);
		if (!text)
			return http_respond_json(r, HTTP_SERVICE_UNAVAILABLE, NULL);
		return http_respond_headers(r, HTTP_RANGE_NOT_SATISFIABLE, text, strlen(text),
		                            "application/json", h, ARRAY_SIZE(h));
	}
	download *d = calloc(1, sizeof(*d));
	if (!d) {
		worker_db_artifact_clear(&row);
		airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact download");
		return refuse_error(w, r, &err);
	}
	d->w = w;
	int64_t stored = 0;
	int rc = worker_artifacts_content(w->artifacts, &row, (int64_t)first, &d->rd, &stored, &err);
	worker_db_artifact_clear(&row);
	if (rc < 0) {
		free(d);
		/* The object is gone under a committed row (a crash between a
		 * remove's two steps): nothing to send, the same 404. */
		if (err.cls == AIRLOCK_ERR_SYSTEM && err.errnum == ENOENT)
			return not_found(w, r);
		return refuse_error(w, r, &err);
	}
	if ((uint64_t)stored != size) {
		download_free(d);
		return refuse(w, r, HTTP_SERVICE_UNAVAILABLE, AIRLOCK_ERR_EXECUTION_UNAVAILABLE,
		              "the stored object's size is not its row's");
	}
	/* Always an attachment, never sniffed, never rendered in place: the
	 * bytes are a tenant's (or a sandbox's) and the media type theirs. */
	http_field h[8] = {
		{ "Content-Type", media_type },
		{ "Content-Disposition", disposition },
		{ "X-Content-Type-Options", "nosniff" },
		{ "Content-Security-Policy", "default-src 'none'; sandbox" },
		{ "ETag", etag },
		{ "Accept-Ranges", "bytes" },
		{ "Cache-Control", "private" },
	};
	size_t nh = 7;
	if (kind == HTTP_RANGE_PARTIAL) {
		snprintf(crange, sizeof(crange), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, first, last,
		         size);
		h[nh++] = (http_field){ "Content-Range", crange };
	}
	uint64_t length = size ? last - first + 1 : 0;
	return http_respond_sized(r, kind == HTTP_RANGE_PARTIAL ? HTTP_PARTIAL_CONTENT : HTTP_OK,
	                          length, h, nh, download_read, d, download_free);
}

/* ---- a listing, a delete, an attach ---------------------------------------------------- */

static http_result list(worker_daemon *w, http_request *r, const worker_artifact_request *q)
{
	worker_db_artifact *rows = calloc(q->list.limit, sizeof(*rows));
	json_t *arr = json_array(), *o = json_object();
	airlock_error err = { 0 };
	if (!rows || !arr || !o || json_object_set(o, "artifacts", arr) < 0) {
		free(rows);
		json_decref(arr);
		json_decref(o);
		airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact listing");
		return refuse_error(w, r, &err);
	}
	worker_db_artifact_query dq = { .tenant_id = q->tenant,
		                        .run_id = q->list.run_id[0] ? q->list.run_id : NULL,
		                        .after_id = q->list.after, .now_ms = util_now_ms(),
		                        .max = q->list.limit };
	size_t n = 0;
	int rc = worker_db_artifact_list(w->db, &dq, rows, &n, &err);
	/* A full page may have a next one: its last id is where it starts. */
	char next[AIRLOCK_UUID_STR_LEN + 1] = "";
	if (rc == 0 && n == q->list.limit)
		memcpy(next, rows[n - 1].artifact_id, sizeof(next));
	for (size_t i = 0; i < n; i++) {
		json_t *m = rc == 0 ? metadata_json(&rows[i]) : NULL;
		if (rc == 0 && (!m || json_array_append_new(arr, m) < 0))
			rc = airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact listing");
		worker_db_artifact_clear(&rows[i]);
	}
	if (rc == 0 &&
	    json_object_set_new(o, "next_after", next[0] ? json_string(next) : json_null()) < 0)
		rc = airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact listing");
	free(rows);
	json_decref(arr);
	if (rc < 0) {
		json_decref(o);
		return refuse_error(w, r, &err);
	}
	return http_respond_json(r, HTTP_OK, dump(o));
}

static http_result delete_one(worker_daemon *w, http_request *r, const worker_artifact_request *q)
{
	worker_db_artifact row;
	bool found = false;
	airlock_error err = { 0 };
	if (lookup(w, q, &row, &found, &err) < 0)
		return refuse_error(w, r, &err);
	if (!found)
		return not_found(w, r);
	int rc = worker_artifacts_remove(w->artifacts, &row, &err);
	json_t *ev = json_pack("{s:s, s:s, s:I}", "artifact_id", row.artifact_id, "tenant_id",
	                       row.tenant_id, "size_bytes", (json_int_t)row.size_bytes);
	worker_db_artifact_clear(&row);
	if (rc < 0) {
		json_decref(ev);
		return refuse_error(w, r, &err);
	}
	atomic_fetch_add(&w->c.artifact_deletes, 1);
	worker_log("info", "artifact.deleted", ev);
	return http_respond(r, HTTP_NO_CONTENT, NULL, 0, NULL);
}

static http_result attach(worker_daemon *w, http_request *r, worker_artifact_request *q,
                          const char *token)
{
	size_t len = 0;
	const unsigned char *body = http_request_body(r, &len);
	char given[AIRLOCK_ID_MAX + 1];
	airlock_error err = { 0 };
	if (worker_attach_request_decode((const char *)body, len, given, &err) < 0)
		return refuse_error(w, r, &err);
	const char *msg = NULL;
	char tok[AIRLOCK_ID_MAX + 1];
	snprintf(tok, sizeof(tok), "%s", token);
	unsigned st = tenant_for(tok, given, q->tenant, &msg);
	if (st)
		return refuse(w, r, st,
		              st == HTTP_FORBIDDEN ? AIRLOCK_ERR_EXECUTION_REJECTED
		                                   : AIRLOCK_ERR_TOOL_VALIDATION,
		              msg);
	/* An id that is not one the worker makes names nothing: the same 404
	 * as an artifact the database will not attach. */
	bool done = false;
	if (airlock_uuidv7_valid(q->artifact_id) &&
	    worker_db_artifact_attach(w->db, q->artifact_id, q->tenant, q->run_id, util_now_ms(),
	                              &done, &err) < 0)
		return refuse_error(w, r, &err);
	if (!done)
		return not_found(w, r);
	worker_log("info", "artifact.attached",
	           json_pack("{s:s, s:s, s:s}", "artifact_id", q->artifact_id, "tenant_id", q->tenant,
	                     "run_id", q->run_id));
	return http_respond(r, HTTP_NO_CONTENT, NULL, 0, NULL);
}

/* ---- the routes' start and handler ------------------------------------------------------- */

http_result worker_artifact_start(worker_daemon *w, http_request *r, worker_verb verb,
                                  const char *token_tenant, const char *run_id,
                                  const char *artifact_id, const char *query, size_t query_len,
                                  worker_artifact_request **ret)
{
	*ret = NULL;
	if (!w->artifacts)
		return unconfigured(w, r);
	worker_artifact_request *q = calloc(1, sizeof(*q));
	if (!q)
		return HTTP_CLOSE;
	q->verb = verb;
	q->w = w;
	snprintf(q->run_id, sizeof(q->run_id), "%s", run_id);
	snprintf(q->artifact_id, sizeof(q->artifact_id), "%s", artifact_id);
	airlock_error err = { 0 };
	http_result res = HTTP_NEXT;
	const char *msg = NULL;
	unsigned st = 0;
	if (verb == WORKER_ARTIFACT_UPLOAD) {
		res = upload_start(w, r, q, token_tenant, query, query_len);
	} else if (verb == WORKER_ARTIFACT_LIST) {
		if (worker_list_query_decode(query, query_len, &q->list, &err) < 0)
			res = refuse_error(w, r, &err);
		else if ((st = tenant_for(token_tenant, q->list.tenant_id, q->tenant, &msg)) != 0)
			res = refuse(w, r, st,
			             st == HTTP_FORBIDDEN ? AIRLOCK_ERR_EXECUTION_REJECTED
			                                  : AIRLOCK_ERR_TOOL_VALIDATION,
			             msg);
	} else if (query_len > 0) {
		/* By id (get, content, delete, attach): no query. */
		res = refuse(w, r, HTTP_BAD_REQUEST, AIRLOCK_ERR_TOOL_VALIDATION,
		             "this route takes no query");
	} else {
		/* The token's tenant, or any for a token of every tenant (the
		 * row says whose it is). */
		q->any_tenant = strcmp(token_tenant, "*") == 0;
		if (!q->any_tenant)
			snprintf(q->tenant, sizeof(q->tenant), "%s", token_tenant);
		if (verb == WORKER_ARTIFACT_ATTACH)
			http_request_set_body_cap(r, AIRLOCK_WORKER_ATTACH_BODY_MAX);
	}
	/* The state is the request's whatever happened: an answered refusal
	 * frees it with the request, and so does a client gone mid-upload. */
	*ret = q;
	return res;
}

http_result worker_artifact_handle(worker_daemon *w, http_request *r, worker_artifact_request *q)
{
	if (q->verb == WORKER_ARTIFACT_UPLOAD)
		return upload_finish(w, r, q);
	if (q->verb == WORKER_ARTIFACT_LIST)
		return list(w, r, q);
	if (q->verb == WORKER_ARTIFACT_GET)
		return metadata(w, r, q);
	if (q->verb == WORKER_ARTIFACT_CONTENT)
		return content(w, r, q);
	if (q->verb == WORKER_ARTIFACT_DELETE)
		return delete_one(w, r, q);
	if (q->verb == WORKER_ARTIFACT_ATTACH)
		return attach(w, r, q, q->any_tenant ? "*" : q->tenant);
	return HTTP_CLOSE;
}
