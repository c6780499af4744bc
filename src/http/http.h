/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_HTTP_HTTP_H
#define AIRLOCK_HTTP_HTTP_H

/*
 * One HTTP server core over libmicrohttpd, for every API airlock serves
 * (the service's, its metrics listener, next the worker's). It knows
 * nothing of sandboxes: a user gives it a listening socket, a
 * configuration and two hooks, and answers through the helpers below.
 *
 * The contract.
 *   - Connections. In the guarded mode (the default) the daemon runs one
 *     thread per connection and every phase of a connection is bounded
 *     (conn.c says how): at most max_connections live, at most
 *     max_connections_per_ip from one party on TCP (an address, an IPv6
 *     /64) with the oldest unauthenticated one of that party evicted, at
 *     most three quarters of the slots held by connections that have not
 *     yet authenticated, the TLS handshake and first header block within
 *     auth_timeout_ms, a header block within header_timeout_ms and
 *     header_max bytes, a body within request_timeout_ms and its route's
 *     cap, a response taken within request_timeout_ms. A watchdog thread
 *     cuts a connection past its deadline with shutdown(2). The simple
 *     mode (config.simple) is one polling thread, max_connections
 *     connections, libmicrohttpd's idle timeout and memory limit only,
 *     for an operator's listener answering small requests at once.
 *   - Authentication. With a credential, every request carries
 *     "Authorization: Bearer <credential>" (compared in constant time) and,
 *     with a client CA, a client certificate that chains to it; anything
 *     else is 401 before a route is looked at. Without a credential (the
 *     metrics listener, reachable only as its operator configured) no
 *     request is authenticated and nothing counts as pending.
 *   - Requests. routes->start runs once per request, after
 *     authentication, with the raw request target (never unescaped): it
 *     decodes the route, may keep state on the request
 *     (http_request_set_state, freed by routes->state_free), sets the
 *     body's cap (http_request_set_body_cap, 0 by default) and returns
 *     HTTP_NEXT, or answers at once (a refusal). A body whose
 *     Content-Length is past its cap is answered 413 at its head; in the
 *     guarded mode the body the client sends anyway is then read and
 *     dropped (up to its declared length, at most oversize_drain_max
 *     bytes, within oversize_drain_ms) before the connection closes. A
 *     chunked body past its cap is discarded as it comes and answered 413
 *     when it ends; the connection is closed oversize_drain_max bytes
 *     past the cap. routes->handle runs when the body is in, and answers.
 *   - Answers. Every handler returns the result of one http_respond_*
 *     call, or HTTP_CLOSE to close the connection without an answer.
 *     Errors leave as airlock_error_to_json with their wire class (the
 *     specification's five) and the status of http_error_status; a 503
 *     carries Retry-After: 1.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "airlock/caps.h"
#include "airlock/error.h"

typedef struct http_server http_server;
typedef struct http_request http_request;
typedef struct http_conn http_conn;

/* What a hook or a handler returns: libmicrohttpd's MHD_NO and MHD_YES. */
typedef enum http_result {
	HTTP_CLOSE = 0, /* close the connection, answer nothing */
	HTTP_NEXT = 1,  /* answered, or (from start) go on to the body */
} http_result;

typedef struct http_routes {
	http_result (*start)(void *ctx, http_request *r, const char *method);
	http_result (*handle)(void *ctx, http_request *r);
	void (*state_free)(void *state); /* NULL: the state is not freed */
} http_routes;

typedef struct http_server_config {
	const char *name;    /* for errors: "service", "metrics listener" */
	const char *address; /* the listener's address, for errors; NULL: the name only */
	int listen_fd;       /* the daemon's from a successful start until stop */
	/* TLS: the PEM text of the certificate and key (both, or neither), and
	 * of a client CA (optional). The key is wiped and freed by the server
	 * once the daemon has loaded it: pass a malloc'd copy. */
	const char *pem_cert, *pem_ca;
	char *pem_key;
	/* The bearer credential (copied); NULL: no authentication. */
	const void *credential;
	size_t credential_len;
	unsigned max_connections;        /* 0: HTTP_MAX_CONNECTIONS_DEFAULT */
	unsigned max_connections_per_ip; /* TCP only; 0: 64 */
	/* Deadlines, ms (0: the default in parentheses). */
	int64_t auth_timeout_ms;       /* (2000) */
	int64_t header_timeout_ms;     /* (10000) */
	int64_t request_timeout_ms;    /* (300000) */
	int64_t connection_timeout_ms; /* (30000) libmicrohttpd's idle timeout */
	size_t header_max;         /* the connection's memory (header block) */
	/* A body past its cap (see Requests above): the most bytes read and
	 * dropped (0: none), and the time allowed for it after an early 413
	 * (0: 3000 ms). */
	uint64_t oversize_drain_max;
	int64_t oversize_drain_ms;
	/* One polling thread and libmicrohttpd's own limits only (see above). */
	bool simple;
	/* The low-speed rule of a streamed body and a sized response (below):
	 * the bytes a second a client earns time with (0: the default,
	 * HTTP_STREAM_MIN_RATE). */
	uint64_t stream_min_bytes_per_s;
} http_server_config;

#define HTTP_MAX_CONNECTIONS_DEFAULT 256u

/* 64 KiB/s: a 512 MiB artifact has 8192 s past the request timeout, a
 * client trickling a byte a second has the request timeout alone. */
#define HTTP_STREAM_MIN_RATE ((uint64_t)64 << 10)

/* Start the daemon on cfg->listen_fd. On failure the descriptor is still
 * the caller's; an error names cfg->address. The credential is copied;
 * cfg->pem_key is taken (wiped and freed) on success and failure alike. */
int http_server_new(const http_server_config *cfg, const http_routes *routes, void *ctx,
                    http_server **ret, airlock_error *err);

/* Stop: no new connection is accepted, requests under way get up to
 * drain_ms to finish, then the daemon and the watchdog end and the server
 * is freed. Returns the listening descriptor, the caller's again (-1 when
 * libmicrohttpd could not give it back: it closed it). */
int http_server_stop(http_server *h, int64_t drain_ms);

/* ---- listening sockets (the service's and the worker's, APIs and metrics) -- */

/* A listening socket: "unix:/path" (created with only the owner's bits,
 * then given mode (0660 when 0) and group gid (-1 keeps it); a non-socket
 * at the path is refused, a socket a live server answers on is refused, a dead one's
 * removed) or "HOST:PORT". address is the canonical form (a TCP port 0
 * resolved). */
typedef struct http_listener {
	int fd;
	char *address;
	char *socket_path; /* the Unix socket's file, removed at close if still ours */
	dev_t socket_dev;
	ino_t socket_ino;
} http_listener;
int http_listen(const char *address, unsigned mode, long gid, http_listener *ret,
               airlock_error *err);
/* Close fd (when >= 0) and remove the socket file if it is still the one
 * made; idempotent. */
void http_listener_close(http_listener *l);
/* A TLS listener's PEM file (certificate, key, client CA): a regular file
 * of at most AIRLOCK_SERVICE_PEM_MAX bytes, read as a secret (in place,
 * one buffer: util_read_secret), NUL-terminated in *ret; a secret one (the
 * private key) is refused when others have any access to it. Messages
 * name what, never the content. */
int http_read_pem(const char *what, const char *path, bool secret, char **ret,
                  airlock_error *err);

/* ---- an operator's metrics listener ------------------------------------------ */

/* GET /metrics (HEAD too) answered with render's text (malloc'd, taken;
 * NULL closes the connection), on the simple mode, without a credential
 * (metrics.c says why); any other path 404, any other method 405. The
 * listening descriptor is taken, on failure too. */
typedef char *(*http_metrics_render_fn)(void *ctx, size_t *ret_len);
typedef struct http_metrics http_metrics;
int http_metrics_new(int listen_fd, http_metrics_render_fn render, void *ctx,
                     http_metrics **ret, airlock_error *err);
void http_metrics_free(http_metrics *m);

/* ---- the request ---------------------------------------------------------- */

const char *http_request_target(const http_request *r, size_t *ret_len);
/* The path unescaped by libmicrohttpd, without the query: only for a user
 * whose routes are fixed strings (the metrics listener). */
const char *http_request_url(const http_request *r);
void http_request_set_state(http_request *r, void *state);
void *http_request_state(const http_request *r);
void http_request_set_body_cap(http_request *r, size_t cap);
/* For a server configured without a credential whose routes authenticate
 * requests themselves (the worker's tokens): routes->start calls this once
 * the request's credential is good, and the connection leaves what holds
 * connections that have not authenticated (their share of the slots,
 * their eviction, the auth deadline, which otherwise ends a keep-alive
 * connection or a long request auth_timeout_ms after its accept). */
void http_request_authenticated(http_request *r);
/* ---- a streamed request body ----------------------------------------------------
 * For a route whose body is too large to hold (an upload): routes->start
 * hands the request a sink instead of a body cap, and the body is
 * delivered to sink->write in pieces as it arrives, on the connection's
 * thread, never buffered whole (at most the connection's read buffer,
 * header_max, at a time).
 *   - write returns 0 to go on, < 0 to refuse the rest: the rest is read
 *     and dropped (the connection closed oversize_drain_max bytes past the
 *     cap) and routes->handle runs at the end to answer what the sink kept.
 *   - A Content-Length past cap is answered 413 at its head, a body that
 *     grows past cap (chunked) is answered 413 when it ends; either way
 *     sink->abort(cls, HTTP_BODY_OVERSIZE) runs first and write is not
 *     called again.
 *   - A client that goes away (or a connection cut at its deadline)
 *     before the body ended: sink->abort(cls, HTTP_BODY_GONE) runs on its
 *     thread when libmicrohttpd ends the request, before state_free, and
 *     handle never runs.
 *   abort runs at most once, and never after handle ran.
 * Deadline (the guarded mode): the low-speed rule. The body has
 * request_timeout_ms from its start plus one second for every
 * stream_min_bytes_per_s bytes received so far; the watchdog cuts the
 * connection past that (and the idle timeout a client that sends nothing
 * for connection_timeout_ms). A slow uploader of a large body keeps going
 * as long as its average rate holds; a trickle is cut after the request
 * timeout. */
typedef enum http_body_end {
	HTTP_BODY_OVERSIZE = 1, /* past its cap: the core answers 413 */
	HTTP_BODY_GONE,         /* the client went away before the body ended */
} http_body_end;
typedef struct http_body_sink {
	int (*write)(void *cls, const unsigned char *buf, size_t len);
	void (*abort)(void *cls, http_body_end why); /* NULL: nothing to do */
	void *cls;
} http_body_sink;
/* From routes->start only; sink is copied. cap is the body's most bytes. */
void http_request_set_body_sink(http_request *r, const http_body_sink *sink, uint64_t cap);

/* The body read (never NULL when len > 0). */
const unsigned char *http_request_body(const http_request *r, size_t *ret_len);
/* A request header's value and length, or NULL. */
const char *http_request_header(const http_request *r, const char *name, size_t *ret_len);
/* The client's socket, to be looked at (http_peer_gone), never used. */
int http_request_fd(const http_request *r);
/* The connection's record (NULL in the simple mode), valid until the
 * request completes. */
http_conn *http_request_conn(const http_request *r);
/* From now the connection's response must be taken within the request
 * timeout (a streamed response whose end is ready). */
void http_conn_respond_by(http_conn *k);

/* Whether the client closed its end, or the connection was cut. */
bool http_peer_gone(int fd);

/* The waits a thread serving a client makes (the core's own, and a
 * user's that waits for work while looking at its client): a condition
 * on the monotonic clock, and a wait on it of at most ms. */
void http_cond_init_monotonic(pthread_cond_t *c);
void http_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *lock, int64_t ms);

/* ---- answers -------------------------------------------------------------- */

/* data is malloc'd and taken (NULL with len 0: an empty body); type may be
 * NULL. */
http_result http_respond(http_request *r, unsigned status, char *data, size_t len,
                         const char *type);
/* A text that lives as long as the process (a static answer): nothing
 * allocated, nothing freed. */
http_result http_respond_static(http_request *r, unsigned status, char *text, const char *type);
/* A JSON text, taken; NULL (its answer could not be built: no memory) is
 * answered 503 ExecutionUnavailable from static memory, never a closed
 * connection. */
http_result http_respond_json(http_request *r, unsigned status, char *json);
/* An error with its wire class, with the given status or the class's
 * (http_error_status). */
http_result http_respond_error_status(http_request *r, unsigned status, const airlock_error *e);
http_result http_respond_fail(http_request *r, unsigned status, airlock_errclass cls,
                              const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A streamed body of unknown length: read(cls, buf, max) runs on the
 * connection's thread and may block; it returns the bytes written,
 * HTTP_STREAM_END or HTTP_STREAM_ERROR. free_cb(cls) runs when the
 * response is done with. No deadline holds while it streams (the idle
 * timeout does) until http_conn_respond_by. On failure free_cb has run. */
#define HTTP_STREAM_END ((ssize_t)-1)
#define HTTP_STREAM_ERROR ((ssize_t)-2)
http_result http_respond_stream(http_request *r, unsigned status, const char *type,
                                ssize_t (*read)(void *cls, char *buf, size_t max), void *cls,
                                void (*free_cb)(void *cls));

/* A streamed body of a known length that ends with trailer fields: the
 * HTTP/1.1 chunked body and its trailer section (RFC 9112, 7.1.2), the
 * one way a value computed over the body as it was sent (a digest) can
 * follow it in the same answer. headers (n_headers name/value pairs,
 * copied) go in the header block, "Trailer: <trailer_names>" announces
 * the fields; read is as http_respond_stream's; once it returned
 * HTTP_STREAM_END, trailers(cls, out, max) fills at most max fields
 * (strings that live until free_cb) and returns how many, or < 0 to cut
 * the connection instead of ending the body, so the client sees a body
 * without its end and without the fields. The whole answer must be taken
 * within the request timeout plus extra_ms (the watchdog cuts it past
 * that), extra_ms scaled by the caller with the body's length, so a
 * client that trickles holds its connection for a bounded time. A request
 * that is not HTTP/1.1 cannot carry a trailer: answered 400. On failure
 * free_cb has run. */
typedef struct http_field {
	const char *name, *value;
} http_field;
#define HTTP_TRAILERS_MAX 4
http_result http_respond_stream_trailed(http_request *r, unsigned status, const char *type,
                                        const http_field *headers, size_t n_headers,
                                        const char *trailer_names, int64_t extra_ms,
                                        ssize_t (*read)(void *cls, char *buf, size_t max),
                                        int (*trailers)(void *cls, http_field *out, size_t max),
                                        void *cls, void (*free_cb)(void *cls));
/* (A route's headers are http_fields, above. Content-Length is the
 * core's, from the length, never one of them.) */

/* A streamed body of known length (a download): status (200, 206) with
 * Content-Length: length and the route's headers (Content-Type,
 * Content-Disposition, ETag, Content-Range...). read(cls, buf, max) runs
 * on the connection's thread, max never past what is left of length; it
 * returns the bytes written (> 0) or HTTP_STREAM_ERROR (an end before
 * length is an error too: the connection is closed short, so a client
 * never takes a truncated body for a whole one). free_cb(cls) runs when
 * the response is done with, on failure too. Deadline (the guarded mode):
 * the low-speed rule, the whole response taken within request_timeout_ms
 * plus one second for every stream_min_bytes_per_s bytes of length. */
http_result http_respond_sized(http_request *r, unsigned status, uint64_t length,
                               const http_field *headers, size_t n_headers,
                               ssize_t (*read)(void *cls, char *buf, size_t max), void *cls,
                               void (*free_cb)(void *cls));
/* A buffer answer (data taken, as http_respond) with the route's headers. */
http_result http_respond_headers(http_request *r, unsigned status, char *data, size_t len,
                                 const char *type, const http_field *headers, size_t n_headers);

/* ---- a download's headers (headers.c), pure and bounded ----------------------- */

/* Whether n bytes at s are valid UTF-8 (no overlong form, no surrogate,
 * nothing past U+10FFFF; a NUL is U+0000). */
bool http_utf8_valid(const void *s, size_t n);
/* The length of the UTF-8 sequence at s (of n bytes): 1..4 for a valid
 * one, 0 for an invalid one or n == 0. */
size_t http_utf8_len(const void *s, size_t n);

/* The Content-Disposition of a download of a stored name (any bytes, len
 * of them; NULL: none): always "attachment", so no client renders it in
 * place; an ASCII fallback filename="..." of printable ASCII without '"',
 * '\', '/' or '%', each other character one '_', no leading or trailing
 * dot or space, at most AIRLOCK_HTTP_DISPOSITION_FALLBACK_MAX bytes,
 * "download" when nothing is left; and when the name is valid UTF-8,
 * RFC 6266 / RFC 8187 filename*=UTF-8''<the name's bytes percent-encoded
 * but attr-chars> (at most AIRLOCK_HTTP_DISPOSITION_STAR_MAX bytes: a
 * prefix of whole characters when longer). The stored name is never a
 * path anywhere: "../../etc/passwd" is "_.._etc_passwd" and
 * "..%2F..%2Fetc%2Fpasswd". Writes the NUL-terminated value to out and
 * returns its length. */
size_t http_content_disposition(const void *name, size_t len,
                                char out[AIRLOCK_HTTP_DISPOSITION_MAX]);

/* A Range header against a body of size bytes (RFC 9110 14.1.2), one
 * range only:
 *   PARTIAL: "bytes=a-b" (b past the end: to the end), "bytes=a-",
 *     "bytes=-n" (the last n bytes, all when n >= size), *ret_first and
 *     *ret_last the range's bytes (inclusive, last < size): answer 206;
 *   UNSATISFIABLE: a first byte at or past size, or "bytes=-0": answer
 *     416 with Content-Range: bytes star/size;
 *   NONE: no header (NULL), another unit, several ranges, a form that
 *     does not parse, or an empty body: the whole body, 200.
 * The unit is case-insensitive; spaces around the value are allowed,
 * none inside it. */
typedef enum http_range {
	HTTP_RANGE_NONE = 0,
	HTTP_RANGE_PARTIAL,
	HTTP_RANGE_UNSATISFIABLE,
} http_range;
http_range http_range_parse(const char *value, size_t len, uint64_t size, uint64_t *ret_first,
                            uint64_t *ret_last);
/* If-Range (RFC 9110 13.1.5): true when there is none (value NULL) or it
 * is exactly etag (a strong comparison); a date, a weak tag or another
 * tag is false, and a Range is then ignored. */
bool http_if_range_matches(const char *value, size_t len, const char *etag);

/* The wire's classes are the specification's five: a decoder's class is
 * ToolValidationError, everything else a layer below can say is
 * ExecutionUnavailable. */
void http_wire_class(airlock_error *e);
/* The status of a wire class: 400, 403, 409 (ExecutionRejected; a user
 * that can tell an unknown id answers 404 itself), 503. */
unsigned http_error_status(const airlock_error *e);
/* The error's JSON with its wire class; NULL only when memory ran out. */
char *http_error_json(const airlock_error *e);

/* "Bearer <token>" (the scheme case-insensitive) whose token equals want,
 * compared in constant time over equal lengths. */
bool http_bearer_ok(const char *value, size_t value_len, const void *want, size_t want_len);

/* Statuses the users answer with. */
enum {
	HTTP_OK = 200,
	HTTP_CREATED = 201,
	HTTP_NO_CONTENT = 204,
	HTTP_PARTIAL_CONTENT = 206,
	HTTP_BAD_REQUEST = 400,
	HTTP_UNAUTHORIZED = 401,
	HTTP_FORBIDDEN = 403,
	HTTP_NOT_FOUND = 404,
	HTTP_METHOD_NOT_ALLOWED = 405,
	HTTP_CONFLICT = 409,
	HTTP_CONTENT_TOO_LARGE = 413,
	HTTP_RANGE_NOT_SATISFIABLE = 416,
	HTTP_UNPROCESSABLE_CONTENT = 422,
	HTTP_SERVICE_UNAVAILABLE = 503,
};

#endif
