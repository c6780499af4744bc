/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server core's daemon: libmicrohttpd started on the user's listening
 * socket (with TLS when given a certificate), a request's phases
 * (authentication, the route's start, the body under its cap, the
 * handler), and the stop that drains the requests under way.
 *
 * Threading (guarded mode). A request can be served for minutes, a client
 * can be slow or hostile, and one client's slowness must not delay
 * another's request. The daemon runs one thread per connection
 * (MHD_USE_THREAD_PER_CONNECTION), and every phase of a connection is
 * bounded (conn.c), so a thread is never held without bound either.
 */
#include <errno.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "http/http_internal.h"
#include "util/util.h"

static int64_t or_default(int64_t v, int64_t dflt)
{
	return v > 0 ? v : dflt;
}

/* ---- the request ------------------------------------------------------------ */

const char *http_request_target(const http_request *r, size_t *ret_len)
{
	if (ret_len)
		*ret_len = r->target_len;
	return r->target;
}

const char *http_request_url(const http_request *r)
{
	return r->url;
}

void http_request_set_state(http_request *r, void *state)
{
	r->state = state;
}

void *http_request_state(const http_request *r)
{
	return r->state;
}

void http_request_authenticated(http_request *r)
{
	http_conn_authenticated(r->conn);
}

void http_request_set_body_cap(http_request *r, size_t cap)
{
	r->body_cap = cap;
}

void http_request_set_body_sink(http_request *r, const http_body_sink *sink, uint64_t cap)
{
	r->has_sink = true;
	r->sink = *sink;
	r->sink_cap = cap;
}

/* The sink's end when the body will not reach the handler; once. */
static void sink_abort(http_request *r, http_body_end why)
{
	if (!r->has_sink || r->sink_settled)
		return;
	r->sink_settled = true;
	if (r->sink.abort)
		r->sink.abort(r->sink.cls, why);
}

/* The low-speed rule (http.h): request_timeout_ms from the body's start
 * plus a second per min_rate bytes received. */
static void sink_deadline(http_request *r)
{
	http_server *h = r->h;
	int64_t until = r->body_started_ms + h->request_ms + http_earned_ms(h, r->received);
	int64_t left = until - util_monotonic_ms();
	http_conn_deadline(r->conn, left > 0 ? left : 1);
}

const unsigned char *http_request_body(const http_request *r, size_t *ret_len)
{
	*ret_len = r->body.len;
	return (const unsigned char *)r->body.data;
}

const char *http_request_header(const http_request *r, const char *name, size_t *ret_len)
{
	const char *v = NULL;
	size_t len = 0;
	if (MHD_lookup_connection_value_n(r->c, MHD_HEADER_KIND, name, strlen(name), &v, &len) !=
	    MHD_YES)
		return NULL;
	if (ret_len)
		*ret_len = len;
	return v;
}

int http_request_fd(const http_request *r)
{
	return http_conn_fd(r->c);
}

http_conn *http_request_conn(const http_request *r)
{
	return r->conn;
}

/* ---- the request's phases ---------------------------------------------------- */

static http_result respond_oversize(http_request *r)
{
	sink_abort(r, HTTP_BODY_OVERSIZE);
	uint64_t cap = r->has_sink ? r->sink_cap : r->body_cap;
	return http_respond_fail(r, MHD_HTTP_CONTENT_TOO_LARGE, AIRLOCK_ERR_TOOL_VALIDATION,
	                         "the body is larger than this request's cap of %llu bytes",
	                         (unsigned long long)cap);
}

static http_result request_start(http_request *r, const char *method)
{
	http_server *h = r->h;
	/* Authentication first: nothing about the API (which paths exist)
	 * is told to a caller without the credential. */
	if (!http_authenticate(r))
		return http_respond_unauthorized(r);
	http_result res = h->routes.start(h->ctx, r, method);
	if (res == HTTP_CLOSE || r->responded)
		return res;
	util_buf_init(&r->body, r->has_sink ? 0 : r->body_cap);
	uint64_t cap = r->has_sink ? r->sink_cap : r->body_cap;
	const char *cl = MHD_lookup_connection_value(r->c, MHD_HEADER_KIND,
	                                             MHD_HTTP_HEADER_CONTENT_LENGTH);
	int64_t n = 0;
	if (cl && util_parse_i64(cl, &n) && n >= 0 && (uint64_t)n > cap) {
		/* Answered at once: a client that sent only its head reads
		 * the 413 without sending the body. The body sent anyway is
		 * dropped after the answer (drain_body); not in the simple
		 * mode, whose one thread serves every connection. */
		if (!h->simple)
			r->drain = (uint64_t)n < h->drain_max ? (size_t)n : (size_t)h->drain_max;
		return respond_oversize(r);
	}
	http_conn_deadline(r->conn, h->request_ms);
	r->body_started_ms = util_monotonic_ms();
	return HTTP_NEXT;
}

/* A piece of a streamed body: to the sink while it takes it and the cap
 * holds; past the cap or after a refusal, read and dropped up to the
 * drain bound (libmicrohttpd cannot answer mid-body), then closed. */
static enum MHD_Result sink_piece(http_request *r, const char *upload, size_t n)
{
	http_server *h = r->h;
	r->received += n;
	if (!r->oversize && !r->sink_failed) {
		if (r->received > r->sink_cap) {
			r->oversize = true;
			sink_abort(r, HTTP_BODY_OVERSIZE);
		} else if (r->sink.write(r->sink.cls, (const unsigned char *)upload, n) < 0) {
			r->sink_failed = true;
		}
	}
	if ((r->oversize || r->sink_failed) && r->received > r->sink_cap + h->drain_max)
		return MHD_NO;
	sink_deadline(r);
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls)
{
	http_server *h = cls;
	http_request *r = *req_cls;
	if (!r)
		return MHD_NO;
	r->c = c;
	if (!r->started) {
		r->started = true;
		r->http11 = version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0;
		const union MHD_ConnectionInfo *ci =
		        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		r->conn = ci ? ci->socket_context : NULL;
		/* The unescaped path, for a user that routes by it; the raw
		 * target is the one to decode (http_request_target). */
		r->url = url;
		return request_start(r, method) == HTTP_CLOSE ? MHD_NO : MHD_YES;
	}
	if (*upload_size && r->has_sink) {
		enum MHD_Result q = sink_piece(r, upload, *upload_size);
		*upload_size = 0;
		return q;
	}
	if (*upload_size) {
		/* libmicrohttpd cannot queue a response while a body is being
		 * read: a chunked body past its cap is discarded as it comes
		 * and answered when it ends, up to the drain bound, past which
		 * the connection is closed. */
		if (!r->oversize && util_buf_append(&r->body, upload, *upload_size) != 0)
			r->oversize = true;
		if (r->oversize) {
			r->drained += *upload_size;
			if (r->drained > r->body.cap + h->drain_max)
				return MHD_NO;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	http_conn_deadline(r->conn, 0);
	if (r->oversize)
		return respond_oversize(r) == HTTP_CLOSE ? MHD_NO : MHD_YES;
	/* The body ended whole: from here the handler owns the sink's end. */
	r->sink_settled = true;
	return h->routes.handle(h->ctx, r) == HTTP_CLOSE ? MHD_NO : MHD_YES;
}

/* The raw request target, before libmicrohttpd unescapes anything: the
 * request's state starts here. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	http_server *h = cls;
	(void)c;
	http_request *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->h = h;
	r->target_len = uri ? strlen(uri) : 0;
	r->target = strndup(uri ? uri : "", r->target_len);
	if (!r->target) {
		free(r);
		return NULL;
	}
	pthread_mutex_lock(&h->lock);
	h->in_flight++;
	pthread_mutex_unlock(&h->lock);
	return r;
}

/* A 413 answered at its head: libmicrohttpd then closes the connection
 * with the body unread, and a close with unread bytes resets it (or fails
 * the client's send on a Unix socket) while a client that sends its body
 * whole is still sending: it would never read the answer. By now the
 * answer is sent and our sending side shut; the body is read and dropped
 * until the client's end, at most want bytes and h->drain_ms, or the
 * server's stop. Constant work per byte, nothing kept. This connection's
 * own thread waits (one thread per connection), nobody else's. */
static void drain_body(http_server *h, struct MHD_Connection *c, size_t want)
{
	int fd = http_conn_fd(c);
	if (fd < 0)
		return;
	int64_t end = util_monotonic_ms() + h->drain_ms;
	char buf[16384];
	size_t got = 0;
	while (got < want) {
		int64_t left = end - util_monotonic_ms();
		if (left <= 0)
			return;
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
			               { .fd = h->stop_efd, .events = POLLIN } };
		int n = poll(p, 2, left > INT_MAX ? INT_MAX : (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (p[1].revents & POLLIN))
			return;
		ssize_t k = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		if (k <= 0)
			return;
		got += (size_t)k;
	}
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
	http_server *h = cls;
	(void)toe;
	http_request *r = *req_cls;
	*req_cls = NULL;
	if (r && r->drain)
		drain_body(h, c, r->drain);
	/* A body that never ended (the client gone, the connection cut): the
	 * sink learns it before the route's state is freed. */
	if (r)
		sink_abort(r, HTTP_BODY_GONE);
	if (!h->simple) {
		const union MHD_ConnectionInfo *ci =
		        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		/* Between requests a keep-alive connection waits for the next
		 * header block, within the header timeout. */
		http_conn_deadline(ci ? ci->socket_context : NULL, h->header_ms);
	}
	if (!r)
		return;
	pthread_mutex_lock(&h->lock);
	h->in_flight--;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	if (r->state && h->routes.state_free)
		h->routes.state_free(r->state);
	util_buf_clear(&r->body);
	free(r->target);
	free(r);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
	http_server *h = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		http_conn_started(h, c, socket_context);
		return;
	}
	http_conn *k = *socket_context;
	*socket_context = NULL;
	if (k)
		http_conn_ended(h, k);
}

/* ---- start and stop ------------------------------------------------------------ */

static void wipe_free(char *p)
{
	if (p) {
		OPENSSL_cleanse(p, strlen(p));
		free(p);
	}
}

static void stop_watchdog(http_server *h)
{
	uint64_t one = 1;
	if (h->stop_efd >= 0 && write(h->stop_efd, &one, sizeof(one)) < 0) {
		/* an eventfd write fails only on overflow, which one write cannot cause */
	}
	if (h->watchdog_started)
		pthread_join(h->watchdog_thread, NULL);
	h->watchdog_started = false;
}

static void server_release(http_server *h)
{
	if (h->stop_efd >= 0)
		close(h->stop_efd);
	if (h->credential) {
		OPENSSL_cleanse(h->credential, h->credential_len);
		free(h->credential);
	}
	free(h->rates);
	free(h->name);
	free(h->address);
	pthread_mutex_destroy(&h->lock);
	pthread_cond_destroy(&h->cond);
	free(h);
}

int http_server_new(const http_server_config *cfg, const http_routes *routes, void *ctx,
                    http_server **ret, airlock_error *err)
{
	char *pem_key = cfg->pem_key;
	const char *name = cfg->name ? cfg->name : "http server";
	http_server *h = calloc(1, sizeof(*h));
	if (!h) {
		wipe_free(pem_key);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", name);
	}
	h->routes = *routes;
	h->ctx = ctx;
	h->stop_efd = -1;
	pthread_mutex_init(&h->lock, NULL);
	http_cond_init_monotonic(&h->cond);
	h->simple = cfg->simple;
	h->tls = cfg->pem_cert != NULL;
	h->client_ca = cfg->pem_ca != NULL;
	h->auth_ms = or_default(cfg->auth_timeout_ms, 2000);
	h->header_ms = or_default(cfg->header_timeout_ms, 10000);
	h->request_ms = or_default(cfg->request_timeout_ms, 300000);
	h->min_rate = cfg->stream_min_bytes_per_s ? cfg->stream_min_bytes_per_s : HTTP_STREAM_MIN_RATE;
	h->drain_max = cfg->oversize_drain_max;
	h->drain_ms = or_default(cfg->oversize_drain_ms, 3000);
	h->name = strdup(name);
	h->address = strdup(cfg->address ? cfg->address : "");
	int r;
	if (!h->name || !h->address) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", name);
		goto fail;
	}
	if (cfg->credential) {
		h->credential = malloc(cfg->credential_len ? cfg->credential_len : 1);
		if (!h->credential) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", name);
			goto fail;
		}
		memcpy(h->credential, cfg->credential, cfg->credential_len);
		h->credential_len = cfg->credential_len;
	}
	if (!h->simple) {
		h->stop_efd = eventfd(0, EFD_CLOEXEC);
		if (h->stop_efd < 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "%s", name);
			goto fail;
		}
	}

	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
	if (!h->simple)
		flags |= MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC;
	if (h->tls)
		flags |= MHD_USE_TLS;
	int64_t idle_ms = or_default(cfg->connection_timeout_ms, 30000);
	unsigned idle_s = (unsigned)((idle_ms + 999) / 1000);
	unsigned max_conn = cfg->max_connections ? cfg->max_connections : HTTP_MAX_CONNECTIONS_DEFAULT;
	struct MHD_OptionItem opts[16];
	size_t n = 0;
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_LISTEN_SOCKET, cfg->listen_fd, NULL };
	if (h->simple) {
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, max_conn, NULL };
	} else {
		/* A quarter of the slots, at least one, is never held by
		 * connections that have not authenticated (conn.c). */
		h->pending_max = max_conn - (max_conn / 4 ? max_conn / 4 : 1);
		h->pending_grace_ms = h->auth_ms / 4;
		/* max_connections is counted here (h->live, conn.c), where a
		 * connection the server cut stops counting at once;
		 * libmicrohttpd counts it until its thread has ended, which
		 * under a flood of connections cut as they come kept every
		 * slot taken by the dying and refused the worker at accept.
		 * Its limit is twice ours: the second half holds only threads
		 * that are ending (a cut connection reads its end at once), so
		 * threads stay bounded. */
		h->live_max = max_conn;
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT,
			                             max_conn > UINT_MAX / 2 ? UINT_MAX : 2 * max_conn,
			                             NULL };
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_CONNECTION,
			                             (intptr_t)on_connection, h };
	}
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, idle_s, NULL };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT, cfg->header_max,
		                             NULL };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, h };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, h };
	if (h->tls) {
		if (!h->simple) {
			/* The per-address cap is conn.c's, not libmicrohttpd's,
			 * which refuses at accept whoever comes. */
			h->per_address_max = cfg->max_connections_per_ip ? cfg->max_connections_per_ip : 64;
			/* At most one party per slot is worth a rate: a party
			 * with no pending connection is never compared. */
			h->rates = calloc(max_conn, sizeof(*h->rates));
			if (!h->rates) {
				r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s: connection table",
				                      name);
				goto fail;
			}
			h->rates_cap = max_conn;
		}
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)(uintptr_t)cfg->pem_cert };
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, pem_key };
		if (cfg->pem_ca)
			opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_TRUST, 0,
				                             (void *)(uintptr_t)cfg->pem_ca };
	}
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	/* The option callbacks are passed through MHD's varargs as pointers;
	 * the array form carries them as intptr_t. */
	h->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_ARRAY, opts,
	                             MHD_OPTION_END);
	/* The daemon loaded the key into its TLS credentials at start; the
	 * PEM text is not needed again and does not stay in memory. */
	wipe_free(pem_key);
	pem_key = NULL;
	if (!h->daemon) {
		airlock_errclass cls = h->tls ? AIRLOCK_ERR_CONFIG : AIRLOCK_ERR_EXECUTION_UNAVAILABLE;
		if (h->address[0])
			r = airlock_error_set(err, cls, 0, "listen %s: the HTTP server did not start%s",
			                      h->address,
			                      h->tls ? " (is the TLS certificate or key unreadable as PEM?)"
			                             : "");
		else
			r = airlock_error_set(err, cls, 0, "the %s did not start", h->name);
		goto fail;
	}
	if (!h->simple) {
		int e = pthread_create(&h->watchdog_thread, NULL, http_watchdog_main, h);
		if (e != 0) {
			/* The listening socket goes back to the caller (with
			 * MHD_USE_ITC quiescing gives it back), as on every
			 * other failure. */
			MHD_quiesce_daemon(h->daemon);
			MHD_stop_daemon(h->daemon);
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "%s: threads", name);
			goto fail;
		}
		h->watchdog_started = true;
	}
	*ret = h;
	return 0;
fail:
	wipe_free(pem_key);
	server_release(h);
	return r;
}

int http_server_stop(http_server *h, int64_t drain_ms)
{
	if (!h)
		return -1;
	int lfd = -1;
	if (!h->simple) {
		MHD_socket q = MHD_quiesce_daemon(h->daemon);
		lfd = q != MHD_INVALID_SOCKET ? q : -1;
		int64_t until = util_monotonic_ms() + drain_ms;
		pthread_mutex_lock(&h->lock);
		while (h->in_flight > 0 && util_monotonic_ms() < until)
			http_cond_wait_ms(&h->cond, &h->lock, HTTP_POLL_MS);
		pthread_mutex_unlock(&h->lock);
	}
	/* In the simple mode the daemon closes the listening socket. */
	MHD_stop_daemon(h->daemon);
	stop_watchdog(h);
	server_release(h);
	return lfd;
}
