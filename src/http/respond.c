/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server core's answers: a buffer, a JSON text, an error with its wire
 * class and status, a stream. Each answer starts the connection's
 * response deadline (request_timeout_ms), except a stream's, which has
 * none until its user says its end is ready (http_conn_respond_by).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/json.h"
#include "http/http_internal.h"

/* The route's headers on resp: false when one could not be added (a
 * name or value libmicrohttpd refuses: a CR or LF in it, which a route's
 * sanitizer never lets through), so the answer is not sent without it. */
static bool add_headers(struct MHD_Response *resp, const http_field *headers, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (MHD_add_response_header(resp, headers[i].name, headers[i].value) != MHD_YES)
			return false;
	return true;
}

static http_result respond_with(http_request *r, unsigned status, char *data, size_t len,
                                const char *type, bool persistent, const http_field *headers,
                                size_t n_headers);

/* data is the caller's (freed here) unless persistent. */
static http_result respond(http_request *r, unsigned status, char *data, size_t len,
                           const char *type, bool persistent)
{
	return respond_with(r, status, data, len, type, persistent, NULL, 0);
}

static http_result respond_with(http_request *r, unsigned status, char *data, size_t len,
                                const char *type, bool persistent, const http_field *headers,
                                size_t n_headers)
{
	r->responded = true;
	struct MHD_Response *resp = MHD_create_response_from_buffer(
	        len, data, persistent ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		if (!persistent)
			free(data);
		return HTTP_CLOSE;
	}
	if (type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (!add_headers(resp, headers, n_headers)) {
		MHD_destroy_response(resp);
		return HTTP_CLOSE;
	}
	/* A 503 is the server unable to answer now: it may be retried. */
	if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
	enum MHD_Result q = MHD_queue_response(r->c, status, resp);
	MHD_destroy_response(resp);
	http_conn_deadline(r->conn, r->h->request_ms);
	return q == MHD_YES ? HTTP_NEXT : HTTP_CLOSE;
}

http_result http_respond(http_request *r, unsigned status, char *data, size_t len,
                         const char *type)
{
	static char empty[1];
	return data ? respond(r, status, data, len, type, false)
	            : respond(r, status, empty, len, type, true);
}

http_result http_respond_headers(http_request *r, unsigned status, char *data, size_t len,
                                 const char *type, const http_field *headers, size_t n_headers)
{
	static char empty[1];
	return data ? respond_with(r, status, data, len, type, false, headers, n_headers)
	            : respond_with(r, status, empty, len, type, true, headers, n_headers);
}

http_result http_respond_static(http_request *r, unsigned status, char *text, const char *type)
{
	return respond(r, status, text, strlen(text), type, true);
}

/* An answer that could not be built (its JSON, out of memory) is still an
 * answer, from memory that needs no allocation: a client is never left
 * with a closed connection it cannot tell from a crash, and may retry. */
static char unbuilt[] = "{\"error\":\"ExecutionUnavailable\",\"message\":\"the server could "
                        "not build its answer (out of memory); retry later\"}";

http_result http_respond_json(http_request *r, unsigned status, char *json)
{
	if (!json)
		return respond(r, MHD_HTTP_SERVICE_UNAVAILABLE, unbuilt, sizeof(unbuilt) - 1,
		               "application/json", true);
	return http_respond(r, status, json, strlen(json), "application/json");
}

void http_wire_class(airlock_error *e)
{
	switch (e->cls) {
	case AIRLOCK_ERR_TOOL_VALIDATION:
	case AIRLOCK_ERR_WORKSPACE_ESCAPE:
	case AIRLOCK_ERR_EXECUTION_REJECTED:
	case AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED:
	case AIRLOCK_ERR_EXECUTION_UNAVAILABLE:
		return;
	case AIRLOCK_ERR_DECODE:
		e->cls = AIRLOCK_ERR_TOOL_VALIDATION;
		return;
	case AIRLOCK_ERR_INVALID:
	case AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE:
	case AIRLOCK_ERR_ARTIFACT_INTEGRITY:
	case AIRLOCK_ERR_CONFIG:
	case AIRLOCK_ERR_NOT_IMPLEMENTED:
	case AIRLOCK_ERR_SYSTEM:
	case AIRLOCK_ERR__MAX:
	default:
		e->cls = AIRLOCK_ERR_EXECUTION_UNAVAILABLE;
		return;
	}
}

unsigned http_error_status(const airlock_error *e)
{
	switch (e->cls) {
	case AIRLOCK_ERR_TOOL_VALIDATION:
	case AIRLOCK_ERR_WORKSPACE_ESCAPE:
	case AIRLOCK_ERR_DECODE:
		return MHD_HTTP_BAD_REQUEST;
	case AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED:
		return MHD_HTTP_FORBIDDEN;
	case AIRLOCK_ERR_EXECUTION_REJECTED:
		return MHD_HTTP_CONFLICT;
	case AIRLOCK_ERR_INVALID:
	case AIRLOCK_ERR_EXECUTION_UNAVAILABLE:
	case AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE:
	case AIRLOCK_ERR_ARTIFACT_INTEGRITY:
	case AIRLOCK_ERR_CONFIG:
	case AIRLOCK_ERR_NOT_IMPLEMENTED:
	case AIRLOCK_ERR_SYSTEM:
	case AIRLOCK_ERR__MAX:
	default:
		return MHD_HTTP_SERVICE_UNAVAILABLE;
	}
}

char *http_error_json(const airlock_error *e)
{
	airlock_error w = *e;
	http_wire_class(&w);
	airlock_error jerr = { 0 };
	return airlock_error_to_json(&w, &jerr);
}

http_result http_respond_error_status(http_request *r, unsigned status, const airlock_error *e)
{
	return http_respond_json(r, status, http_error_json(e));
}

http_result http_respond_fail(http_request *r, unsigned status, airlock_errclass cls,
                              const char *fmt, ...)
{
	airlock_error e = { .cls = cls };
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e.message, sizeof(e.message), fmt, ap);
	va_end(ap);
	return http_respond_error_status(r, status, &e);
}

/* 401 carries nothing but its class. */
http_result http_respond_unauthorized(http_request *r)
{
	static const char body[] = "{\"error\": \"Unauthorized\", \"message\": \"\"}";
	char *copy = strdup(body);
	if (!copy)
		return HTTP_CLOSE;
	return http_respond(r, MHD_HTTP_UNAUTHORIZED, copy, sizeof(body) - 1, "application/json");
}

typedef struct {
	ssize_t (*read)(void *cls, char *buf, size_t max);
	int (*trailers)(void *cls, http_field *out, size_t max);
	void (*free_cb)(void *cls);
	void *cls;
	/* The response the trailer fields are added to: libmicrohttpd
	 * builds a chunked body's trailer section from the response's
	 * footers after its reader reported the end, on the connection's
	 * thread, and the response is this connection's alone (made for
	 * this one answer), so adding them from the reader races nothing.
	 * Valid until stream_free: the connection holds it. */
	struct MHD_Response *resp;
} http_stream;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	http_stream *st = cls;
	(void)pos;
	ssize_t n = st->read(st->cls, buf, max);
	if (n == HTTP_STREAM_END && st->trailers) {
		http_field f[HTTP_TRAILERS_MAX];
		int k = st->trailers(st->cls, f, HTTP_TRAILERS_MAX);
		if (k < 0 || k > HTTP_TRAILERS_MAX)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		for (int i = 0; i < k; i++)
			if (MHD_add_response_footer(st->resp, f[i].name, f[i].value) != MHD_YES)
				return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	if (n == HTTP_STREAM_END)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (n < 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	return n;
}

static void stream_free(void *cls)
{
	http_stream *st = cls;
	st->free_cb(st->cls);
	free(st);
}

http_result http_respond_stream(http_request *r, unsigned status, const char *type,
                                ssize_t (*read)(void *cls, char *buf, size_t max), void *cls,
                                void (*free_cb)(void *cls))
{
	r->responded = true;
	http_stream *st = malloc(sizeof(*st));
	if (!st) {
		free_cb(cls);
		return HTTP_CLOSE;
	}
	*st = (http_stream){ .read = read, .free_cb = free_cb, .cls = cls };
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
	                                                              stream_read, st, stream_free);
	if (!resp) {
		stream_free(st);
		return HTTP_CLOSE;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	enum MHD_Result q = MHD_queue_response(r->c, status, resp);
	MHD_destroy_response(resp);
	/* No total deadline while it streams: what produces it bounds it, and
	 * a client that reads nothing meets the idle timeout. */
	http_conn_deadline(r->conn, 0);
	return q == MHD_YES ? HTTP_NEXT : HTTP_CLOSE;
}

http_result http_respond_stream_trailed(http_request *r, unsigned status, const char *type,
                                        const http_field *headers, size_t n_headers,
                                        const char *trailer_names, int64_t extra_ms,
                                        ssize_t (*read)(void *cls, char *buf, size_t max),
                                        int (*trailers)(void *cls, http_field *out, size_t max),
                                        void *cls, void (*free_cb)(void *cls))
{
	/* libmicrohttpd answers an HTTP/1.0 request with a body ended by the
	 * close, which has no trailer section: the fields would be lost
	 * without a sign, so such a request is refused. */
	if (!r->http11) {
		free_cb(cls);
		return http_respond_fail(r, MHD_HTTP_BAD_REQUEST, AIRLOCK_ERR_TOOL_VALIDATION,
		                         "this answer ends with a trailer and needs HTTP/1.1");
	}
	r->responded = true;
	http_stream *st = malloc(sizeof(*st));
	if (!st) {
		free_cb(cls);
		return HTTP_CLOSE;
	}
	*st = (http_stream){ .read = read, .trailers = trailers, .free_cb = free_cb, .cls = cls };
	/* The block size is an upper bound: libmicrohttpd hands the reader at
	 * most what the connection's memory pool has free (header_max), so the
	 * connection's memory stays what its limit says. */
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256 * 1024,
	                                                              stream_read, st, stream_free);
	if (!resp) {
		stream_free(st);
		return HTTP_CLOSE;
	}
	st->resp = resp;
	bool ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type) == MHD_YES &&
	          MHD_add_response_header(resp, MHD_HTTP_HEADER_TRAILER, trailer_names) == MHD_YES;
	for (size_t i = 0; ok && i < n_headers; i++)
		ok = MHD_add_response_header(resp, headers[i].name, headers[i].value) == MHD_YES;
	if (!ok) {
		MHD_destroy_response(resp);
		return HTTP_CLOSE;
	}
	enum MHD_Result q = MHD_queue_response(r->c, status, resp);
	MHD_destroy_response(resp);
	http_conn_deadline(r->conn, r->h->request_ms + (extra_ms > 0 ? extra_ms : 0));
	return q == MHD_YES ? HTTP_NEXT : HTTP_CLOSE;
}

/* A sized stream's state: what is left of its length. */
typedef struct {
	ssize_t (*read)(void *cls, char *buf, size_t max);
	void (*free_cb)(void *cls);
	void *cls;
	uint64_t left;
} http_sized;

static ssize_t sized_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	http_sized *st = cls;
	(void)pos;
	if (st->left == 0)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (max > st->left)
		max = (size_t)st->left;
	ssize_t n = st->read(st->cls, buf, max);
	/* An end before the length, or more than asked, is an error: the
	 * connection closes short of Content-Length, which a client reads
	 * as a failed transfer, never as a whole body. */
	if (n <= 0 || (size_t)n > max)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	st->left -= (uint64_t)n;
	return n;
}

static void sized_free(void *cls)
{
	http_sized *st = cls;
	st->free_cb(st->cls);
	free(st);
}

http_result http_respond_sized(http_request *r, unsigned status, uint64_t length,
                               const http_field *headers, size_t n_headers,
                               ssize_t (*read)(void *cls, char *buf, size_t max), void *cls,
                               void (*free_cb)(void *cls))
{
	r->responded = true;
	http_sized *st = malloc(sizeof(*st));
	if (!st) {
		free_cb(cls);
		return HTTP_CLOSE;
	}
	*st = (http_sized){ .read = read, .free_cb = free_cb, .cls = cls, .left = length };
	struct MHD_Response *resp =
	        MHD_create_response_from_callback(length, 64 * 1024, sized_read, st, sized_free);
	if (!resp) {
		sized_free(st);
		return HTTP_CLOSE;
	}
	if (!add_headers(resp, headers, n_headers)) {
		MHD_destroy_response(resp); /* frees st through sized_free */
		return HTTP_CLOSE;
	}
	enum MHD_Result q = MHD_queue_response(r->c, status, resp);
	MHD_destroy_response(resp);
	/* The low-speed rule (http.h): the request timeout plus a second per
	 * min_rate bytes of the length. */
	http_conn_deadline(r->conn, r->h->request_ms + http_earned_ms(r->h, length));
	return q == MHD_YES ? HTTP_NEXT : HTTP_CLOSE;
}
