/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's workspace jobs: contain, read, write, listdir, provenance
 * on the sandbox's workspace port, its errnos carried across the API.
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "airlock/ids.h"
#include "airlock/json.h"
#include "core/json_internal.h"
#include "service/routes.h"
#include "util/fault.h"
#include "util/util.h"

/* ---- the workspace ------------------------------------------------------------ */

static int query_size(const svc_req *q, const char *key, size_t dflt, size_t max, size_t *ret,
                      airlock_error *err)
{
	_cleanup_free_ char *v = NULL;
	size_t len = 0;
	int r = svc_query_value(q->query, q->query_len, key, &v, &len, err);
	if (r < 0)
		return r;
	if (r == 0) {
		if (dflt == 0)
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "%s: missing", key);
		*ret = dflt;
		return 0;
	}
	int64_t n = 0;
	if (strlen(v) != len || !util_parse_i64(v, &n) || n < 0 || (uint64_t)n > max)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "%s: must be an integer from 0 to %zu", key, max);
	*ret = (size_t)n;
	return 0;
}

/* The wire spells the port's enums as the specification spells its own
 * (TOOL_WRITTEN, FILE), like killed_by; the library's names are lowercase. */
static const char *wire_name(const char *lower, char out[64])
{
	size_t i = 0;
	for (; lower && lower[i] && i + 1 < 64; i++)
		out[i] = (char)(lower[i] >= 'a' && lower[i] <= 'z' ? lower[i] - 'a' + 'A' : lower[i]);
	out[i] = 0;
	return out;
}

/* The workspace port's failures that are plain errnos (a missing file, a
 * parent that is not a directory, a full volume) keep their code across
 * the API: the in-process port returns -ENOENT, and so must the remote
 * one. They cross as SystemError with one more member, "errno", the
 * symbolic name (a number could differ between the two sides'
 * architectures), status 422; the names are the ones the workspace port
 * returns (docs/service-api.md). Any other errno is the service failing:
 * ExecutionUnavailable. */

static http_result respond_ws_error(svc_req *q, const airlock_error *e)
{
	const char *name = e->cls == AIRLOCK_ERR_SYSTEM ? airlock_errno_wire_name(e->errnum) : NULL;
	if (!name)
		return svc_respond_error(q, e);
	airlock_error jerr = { 0 };
	json_t *o = util_fault("service.workspace.error") ? NULL : core_json_error_value(e, &jerr);
	if (o && json_object_set_new(o, "errno", json_string(name)) < 0) {
		json_decref(o);
		o = NULL;
	}
	return svc_respond_json(q, HTTP_UNPROCESSABLE_CONTENT, o, "workspace");
}

http_result svc_do_workspace(svc_req *q)
{
	size_t body_len = 0;
	const unsigned char *body_in = http_request_body(q->r, &body_len);
	airlock_service *s = q->s;
	airlock_error err = { 0 };
	_cleanup_free_ char *path = NULL, *rel = NULL, *resolved = NULL;
	size_t plen = 0;
	int r = svc_query_value(q->query, q->query_len, "path", &path, &plen, &err);
	if (r == 0)
		r = airlock_error_set(&err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "path: missing");
	if (r < 0)
		return svc_respond_error(q, &err);
	bool root = plen == 0 || (plen == 1 && path[0] == '.');
	size_t limit = 0;
	if (q->verb == SVC_READ)
		r = query_size(q, "max_bytes", 0, AIRLOCK_SERVICE_READ_MAX, &limit, &err);
	else if (q->verb == SVC_LISTDIR)
		r = query_size(q, "max_entries", 1000, AIRLOCK_SERVICE_LISTDIR_MAX, &limit, &err);
	if (r < 0)
		return svc_respond_error(q, &err);

	airlock_exec_call call = { .tenant_id = q->handle.tenant_id,
		                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_workspace *ws = NULL;
	if (airlock_exec_workspace(s->exec, &call, &q->handle, &ws, &err) < 0)
		return svc_respond_error(q, &err);

	/* The raw bytes with their length go through the string rules first
	 * (an encoded NUL is refused there, as WorkspaceEscape, never cut);
	 * only a checked relative path reaches the calls that take a C string. */
	if (!(root && (q->verb == SVC_LISTDIR || q->verb == SVC_CONTAIN)))
		r = airlock_workspace_check_string(path, plen, &rel, &err);
	http_result mr = HTTP_CLOSE;
	if (r < 0) {
		mr = respond_ws_error(q, &err);
		goto out;
	}
	switch (q->verb) {
	case SVC_CONTAIN: {
		if (!root && airlock_workspace_resolve(ws, path, plen, &resolved, &err) < 0)
			mr = respond_ws_error(q, &err);
		else
			mr = http_respond(q->r, HTTP_NO_CONTENT, NULL, 0, NULL);
		break;
	}
	case SVC_READ: {
		unsigned char *data = NULL;
		size_t len = 0;
		if (airlock_workspace_read(ws, rel, limit, &data, &len, &err) < 0)
			mr = respond_ws_error(q, &err);
		else /* an empty file's data may be NULL: http_respond sends nothing */
			mr = http_respond(q->r, HTTP_OK, (char *)data, len, "application/octet-stream");
		break;
	}
	case SVC_WRITE:
		if (airlock_workspace_write(ws, rel, body_len ? (const void *)body_in : "", body_len,
		                            &err) < 0)
			mr = respond_ws_error(q, &err);
		else
			mr = http_respond(q->r, HTTP_NO_CONTENT, NULL, 0, NULL);
		break;
	case SVC_LISTDIR: {
		airlock_dir_listing l = { 0 };
		if (airlock_workspace_listdir(ws, root ? "." : rel, limit, &l, &err) < 0) {
			mr = respond_ws_error(q, &err);
			break;
		}
		json_t *arr = util_fault("service.workspace.answer") ? NULL : json_array();
		for (size_t i = 0; arr && i < l.n; i++) {
			/* The path in FileChange.path's lossless text form, made by
			 * the one encoder that has it. */
			json_t *pv = core_json_path_value(l.entries[i].path);
			char tn[64];
			json_t *e = pv ? json_pack("{s:o, s:s, s:I}", "path", pv, "type",
			                           wire_name(airlock_entry_type_name(l.entries[i].type), tn),
			                           "size_bytes", (json_int_t)l.entries[i].size_bytes)
			               : NULL;
			if (!e || json_array_append_new(arr, e) < 0) {
				json_decref(arr);
				arr = NULL;
			}
		}
		bool trunc = l.truncated;
		airlock_dir_listing_clear(&l);
		mr = svc_respond_json(q, HTTP_OK,
		                      arr ? json_pack("{s:o, s:b}", "entries", arr, "truncated", trunc)
		                          : NULL,
		                      "listdir");
		break;
	}
	case SVC_PROVENANCE: {
		airlock_provenance p = AIRLOCK_PROVENANCE_INVALID;
		if (airlock_workspace_provenance(ws, rel, &p, &err) < 0) {
			mr = respond_ws_error(q, &err);
			break;
		}
		char name[64];
		mr = svc_respond_json(q, HTTP_OK,
		                      util_fault("service.workspace.answer") ?
		                              NULL :
		                              json_pack("{s:s}", "provenance",
		                                        wire_name(airlock_provenance_name(p), name)),
		                      "provenance");
		break;
	}
	case SVC_STREAM: /* svc_do_workspace_stream */
	case SVC_NONE:
	case SVC_HEALTH:
	case SVC_LIST:
	case SVC_PROVISION:
	case SVC_EXECUTE:
	case SVC_CANCEL:
	case SVC_DESTROY:
	default:
		break;
	}
out:
	airlock_workspace_release(ws);
	return mr;
}



/* ---- the stream ------------------------------------------------------------ */

/*
 * GET /v1/sandboxes/{id}/workspace/stream?path=P&max_bytes=N
 * (docs/service-api.md, "workspace stream"): the file read from its
 * descriptor a piece at a time as the client's socket takes it, hashed as
 * read, its SHA-256 in the chunked body's trailer.
 *
 * Why a trailer and not a digest header over a first pass: a header would
 * need the file read twice (once to hash, once to send, hashing again and
 * cutting the connection when the two differ), twice the disk and CPU of
 * an export for the same guarantee. The trailer carries the digest of
 * exactly the bytes sent, computed in the one pass that sent them
 * (libmicrohttpd 0.9.75 builds a chunked body's trailer section from the
 * response's footers once the reader reports the end; libcurl hands
 * trailer lines to its header callback). A file that changes while it is
 * read fails the reader at its end check, and the connection is cut
 * before the trailer: the client has no digest and fails the export,
 * never keeps a wrong one.
 *
 * Why this is safe for the service: the connection's own thread reads
 * (one thread per connection), one piece at a time into the buffer its
 * memory pool gives (the connection's memory limit), so a slow reader
 * holds only its own connection, and for at most the request timeout plus
 * the file's size at AIRLOCK_SERVICE_STREAM_MIN_RATE (the watchdog's
 * deadline), within which libmicrohttpd's idle timeout also cuts a reader
 * that takes nothing. The stream holds the workspace by reference and no
 * call bracket between pieces, so a destroy never waits for a client. A
 * client that goes away fails the next send: libmicrohttpd closes the
 * connection and frees the response, whose free closes the file.
 */
typedef struct svc_stream {
	airlock_workspace_stream *s;
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
} svc_stream;

static ssize_t svc_stream_read(void *cls, char *buf, size_t max)
{
	svc_stream *st = cls;
	size_t n = 0;
	/* Past the header nothing can be said but the cut (and the missing
	 * trailer says it to the client). */
	if (airlock_workspace_stream_read(st->s, buf, max, &n, NULL) < 0)
		return HTTP_STREAM_ERROR;
	return n == 0 ? HTTP_STREAM_END : (ssize_t)n;
}

static int svc_stream_trailers(void *cls, http_field *out, size_t max)
{
	svc_stream *st = cls;
	if (max < 1 || airlock_workspace_stream_digest(st->s, st->hex, NULL) < 0)
		return -1;
	/* A fault-injection build may send a digest that is not the one of
	 * the bytes sent: what a corruption between the two hashes looks like
	 * to the client, which must refuse the bytes. */
	if (util_fault("service.workspace.stream.digest"))
		st->hex[0] = st->hex[0] == '0' ? '1' : '0';
	out[0] = (http_field){ .name = "Airlock-Sha256", .value = st->hex };
	return 1;
}

static void svc_stream_free(void *cls)
{
	svc_stream *st = cls;
	airlock_workspace_stream_close(st->s);
	free(st);
}

http_result svc_do_workspace_stream(svc_req *q)
{
	airlock_error err = { 0 };
	_cleanup_free_ char *path = NULL;
	size_t plen = 0;
	int r = svc_query_value(q->query, q->query_len, "path", &path, &plen, &err);
	if (r == 0)
		r = airlock_error_set(&err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "path: missing");
	size_t limit = 0;
	if (r >= 0)
		r = query_size(q, "max_bytes", 0, (size_t)AIRLOCK_SERVICE_STREAM_FILE_MAX, &limit,
		               &err);
	if (r < 0)
		return svc_respond_error(q, &err);

	airlock_exec_call call = { .tenant_id = q->handle.tenant_id,
		                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_workspace *ws = NULL;
	if (airlock_exec_workspace(q->s->exec, &call, &q->handle, &ws, &err) < 0)
		return svc_respond_error(q, &err);
	/* The raw bytes with their length through the string rules first (an
	 * encoded NUL is refused there, never cut), as every workspace verb. */
	_cleanup_free_ char *rel = NULL;
	r = airlock_workspace_check_string(path, plen, &rel, &err);
	svc_stream *st = NULL;
	uint64_t size = 0;
	if (r == 0) {
		st = calloc(1, sizeof(*st));
		r = st ? airlock_workspace_stream_open(ws, rel, limit, &st->s, &size, &err)
		       : airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOMEM, "stream");
	}
	/* The stream holds its own reference. */
	airlock_workspace_release(ws);
	if (r < 0) {
		free(st);
		return respond_ws_error(q, &err);
	}
	char size_text[24];
	snprintf(size_text, sizeof(size_text), "%llu", (unsigned long long)size);
	http_field hdr[] = { { .name = "Airlock-Size", .value = size_text } };
	int64_t extra_ms = (int64_t)(size / AIRLOCK_SERVICE_STREAM_MIN_RATE) * 1000;
	return http_respond_stream_trailed(q->r, HTTP_OK, "application/octet-stream", hdr,
	                                   ARRAY_SIZE(hdr), "Airlock-Sha256", extra_ms,
	                                   svc_stream_read, svc_stream_trailers, st,
	                                   svc_stream_free);
}
