/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reaper's client (service/reaper.h): one HTTP/1.1 POST at a time on
 * the reaper's own thread, to a Unix socket or to HOST:PORT over TLS. It
 * is written here rather than taken from libcurl because the service side
 * links no libcurl (tests/check_library_sides.py); the request is one
 * fixed shape and the answer is read into one capped buffer, so the
 * client needs only: connect with a deadline, a TLS session verified
 * against the operator's CA and the host name, a write and a read that
 * never wait past the request's deadline or a stop, and a status line and
 * a body cut out of the answer.
 *
 * Non-blocking sockets polled together with the stop descriptor: a stop
 * (service shutdown) ends a request at once, whatever it is waiting for.
 * Every send is MSG_NOSIGNAL (gnutls's too, through its push function), so
 * a worker that closes early is EPIPE here, never SIGPIPE in the service.
 */
#include "service/reaper.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "http/http.h"
#include "util/util.h"

struct reaper_client {
	bool is_unix;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char host[256]; /* TCP: the name or address certificates are checked against */
	char port[8];
	unsigned char *token;
	size_t token_len;
	gnutls_certificate_credentials_t tls;
};

/* A request's connection. */
typedef struct conn {
	int fd;
	gnutls_session_t tls; /* NULL on a Unix socket */
	int stop_fd;
	int64_t deadline; /* monotonic ms */
} conn;

/* A request's failure: its reason for the count, its message for the log. */
#define fail(why, w, err, e, ...)                                                                   \
	(*(why) = (w), airlock_error_set((err), AIRLOCK_ERR_EXECUTION_UNAVAILABLE, (e), __VA_ARGS__))

int reaper_client_new(const char *address, const char *tls_ca_file, const void *token,
                      size_t token_len, reaper_client **ret, airlock_error *err)
{
	if (!address || !token || token_len == 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.reaper_address and its credential are required");
	/* The token goes into a header line: a byte outside printable ASCII
	 * (a space included) would end or split it. */
	const unsigned char *t = token;
	for (size_t i = 0; i < token_len; i++)
		if (t[i] < 0x21 || t[i] > 0x7e)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "service.reaper_credential_file: the token holds a byte "
			                         "that is not printable ASCII (a space or a control byte)");
	reaper_client *c = calloc(1, sizeof(*c));
	if (!c)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "reaper");
	int r;
	if (strncmp(address, "unix:", 5) == 0) {
		c->is_unix = true;
		if (address[5] != '/' || strlen(address + 5) >= sizeof(c->path)) {
			r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                      "service.reaper_address=%s: expected unix:/absolute/path "
			                      "of at most 107 bytes",
			                      address);
			goto fail;
		}
		snprintf(c->path, sizeof(c->path), "%s", address + 5);
	} else {
		/* HOST:PORT, a bracketed IPv6 address allowed. */
		const char *colon = strrchr(address, ':');
		const char *h = address, *he = colon;
		if (h[0] == '[' && he && he > h + 1 && he[-1] == ']') {
			h++;
			he--;
		}
		size_t hl = colon ? (size_t)(he - h) : 0;
		int64_t port = 0;
		if (!colon || hl == 0 || hl >= sizeof(c->host) || !util_parse_i64(colon + 1, &port) ||
		    port <= 0 || port > 65535) {
			r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                      "service.reaper_address=%s: expected HOST:PORT", address);
			goto fail;
		}
		memcpy(c->host, h, hl);
		snprintf(c->port, sizeof(c->port), "%d", (int)port);
		if (!tls_ca_file) {
			r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                      "service.reaper_address=%s is TCP: service.reaper_tls_ca_file "
			                      "is required",
			                      address);
			goto fail;
		}
		char *pem = NULL;
		if ((r = http_read_pem("service.reaper_tls_ca_file", tls_ca_file, false, &pem, err)) < 0)
			goto fail;
		gnutls_datum_t d = { .data = (unsigned char *)pem, .size = (unsigned)strlen(pem) };
		int g = gnutls_certificate_allocate_credentials(&c->tls);
		if (g == 0)
			g = gnutls_certificate_set_x509_trust_mem(c->tls, &d, GNUTLS_X509_FMT_PEM);
		free(pem);
		if (g <= 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                      "service.reaper_tls_ca_file %s: no CA certificate could be "
			                      "read from it (%s)",
			                      tls_ca_file, g < 0 ? gnutls_strerror(g) : "none in the file");
			goto fail;
		}
	}
	c->token = malloc(token_len);
	if (!c->token) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "reaper");
		goto fail;
	}
	memcpy(c->token, token, token_len);
	c->token_len = token_len;
	*ret = c;
	return 0;
fail:
	reaper_client_free(c);
	return r;
}

void reaper_client_free(reaper_client *c)
{
	if (!c)
		return;
	if (c->token) {
		explicit_bzero(c->token, c->token_len);
		free(c->token);
	}
	if (c->tls)
		gnutls_certificate_free_credentials(c->tls);
	free(c);
}

void reaper_answer_clear(reaper_answer *a)
{
	free(a->body);
	*a = (reaper_answer){ 0 };
}

/* ---- waiting ------------------------------------------------------------------- */

/* Wait until fd is ready for events, the stop descriptor is readable or
 * the deadline passes: 1 ready, 0 past the deadline, -ECANCELED stopped,
 * -errno. */
static int wait_fd(conn *k, short events)
{
	for (;;) {
		int64_t left = k->deadline - util_monotonic_ms();
		if (left <= 0)
			return 0;
		struct pollfd p[2] = { { .fd = k->fd, .events = events },
			               { .fd = k->stop_fd, .events = POLLIN } };
		int n = poll(p, k->stop_fd >= 0 ? 2 : 1, left > 1000 ? 1000 : (int)left);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n <= 0)
			continue;
		if (k->stop_fd >= 0 && p[1].revents)
			return -ECANCELED;
		if (p[0].revents)
			return 1;
	}
}

/* gnutls's writes: MSG_NOSIGNAL, so a closed peer is EPIPE, not SIGPIPE. */
static ssize_t tls_push(gnutls_transport_ptr_t ptr, const void *data, size_t len)
{
	return send((int)(intptr_t)ptr, data, len, MSG_NOSIGNAL);
}

static ssize_t tls_pull(gnutls_transport_ptr_t ptr, void *data, size_t len)
{
	return recv((int)(intptr_t)ptr, data, len, 0);
}

/* ---- connecting ------------------------------------------------------------------ */

static int connect_addr(conn *k, const struct sockaddr *sa, socklen_t len, service_reaper_error *why,
                        airlock_error *err, const char *address)
{
	k->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (k->fd < 0)
		return fail(why, errno == EAFNOSUPPORT ? SERVICE_REAPER_UNREACHABLE : SERVICE_REAPER_INTERNAL,
		            err, errno, "reaper: socket for %s", address);
	if (connect(k->fd, sa, len) == 0)
		return 0;
	if (errno != EINPROGRESS && errno != EAGAIN)
		return fail(why, SERVICE_REAPER_UNREACHABLE, err, errno,
		            "reaper: the worker tier at %s: connect", address);
	int w = wait_fd(k, POLLOUT);
	if (w == -ECANCELED)
		return w;
	if (w == 0)
		return fail(why, SERVICE_REAPER_TIMEOUT, err, 0,
		            "reaper: the worker tier at %s: no connection within the connect timeout",
		            address);
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	if (w < 0 || getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		soerr = w < 0 ? -w : errno;
	if (soerr)
		return fail(why, SERVICE_REAPER_UNREACHABLE, err, soerr,
		            "reaper: the worker tier at %s: connect", address);
	return 0;
}

static int open_conn(reaper_client *c, conn *k, const char *address, service_reaper_error *why,
                     airlock_error *err)
{
	if (c->is_unix) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		memcpy(sun.sun_path, c->path, sizeof(sun.sun_path));
		return connect_addr(k, (const struct sockaddr *)&sun, sizeof(sun), why, err, address);
	}
	/* A name is resolved by the system resolver, bounded by its own
	 * timeouts (resolv.conf); an address literal is not looked up. */
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	int g = getaddrinfo(c->host, c->port, &hints, &res);
	if (g != 0 || !res) {
		*why = SERVICE_REAPER_UNREACHABLE;
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "reaper: the worker tier at %s: cannot resolve %s: %s", address,
		                         c->host, g ? gai_strerror(g) : "no address");
	}
	/* Each address in turn while the last was refused or unreachable,
	 * within the one connect deadline. */
	int r = -1;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		if (k->fd >= 0)
			close(k->fd);
		k->fd = -1;
		r = connect_addr(k, ai->ai_addr, ai->ai_addrlen, why, err, address);
		if (r == 0 || *why != SERVICE_REAPER_UNREACHABLE)
			break;
	}
	freeaddrinfo(res);
	if (r < 0)
		return r;

	int gr = gnutls_init(&k->tls, GNUTLS_CLIENT | GNUTLS_NONBLOCK);
	if (gr == 0)
		gr = gnutls_set_default_priority(k->tls);
	if (gr == 0)
		gr = gnutls_credentials_set(k->tls, GNUTLS_CRD_CERTIFICATE, c->tls);
	/* SNI for a name (never for an address literal, which RFC 6066
	 * forbids); the certificate is verified against the CA and this host,
	 * a name or an address (its iPAddress entries), during the
	 * handshake. */
	struct in6_addr a6;
	bool literal = inet_pton(AF_INET, c->host, &a6) == 1 || inet_pton(AF_INET6, c->host, &a6) == 1;
	if (gr == 0 && !literal)
		gr = gnutls_server_name_set(k->tls, GNUTLS_NAME_DNS, c->host, strlen(c->host));
	if (gr < 0)
		return fail(why, SERVICE_REAPER_INTERNAL, err, 0, "reaper: TLS session: %s",
		            gnutls_strerror(gr));
	gnutls_session_set_verify_cert(k->tls, c->host, 0);
	gnutls_transport_set_ptr(k->tls, (gnutls_transport_ptr_t)(intptr_t)k->fd);
	gnutls_transport_set_push_function(k->tls, tls_push);
	gnutls_transport_set_pull_function(k->tls, tls_pull);
	for (;;) {
		gr = gnutls_handshake(k->tls);
		if (gr == 0)
			return 0;
		if (gr != GNUTLS_E_AGAIN && gr != GNUTLS_E_INTERRUPTED)
			break;
		int w = wait_fd(k, gnutls_record_get_direction(k->tls) ? POLLOUT : POLLIN);
		if (w == -ECANCELED)
			return w;
		if (w <= 0)
			return fail(why, w == 0 ? SERVICE_REAPER_TIMEOUT : SERVICE_REAPER_IO, err,
			            w < 0 ? -w : 0,
			            "reaper: the worker tier at %s: the TLS handshake did not complete",
			            address);
	}
	char msg[256];
	if (gr == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
		gnutls_datum_t out = { 0 };
		unsigned status = gnutls_session_get_verify_cert_status(k->tls);
		if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) == 0) {
			snprintf(msg, sizeof(msg), "%s", (const char *)out.data);
			gnutls_free(out.data);
		} else {
			snprintf(msg, sizeof(msg), "%s", gnutls_strerror(gr));
		}
	} else {
		snprintf(msg, sizeof(msg), "%s", gnutls_strerror(gr));
	}
	*why = SERVICE_REAPER_TLS;
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
	                         "reaper: the worker tier at %s: TLS: %s", address, msg);
}

static void close_conn(conn *k)
{
	if (k->tls)
		gnutls_deinit(k->tls);
	if (k->fd >= 0)
		close(k->fd);
	k->tls = NULL;
	k->fd = -1;
}

/* ---- the bytes --------------------------------------------------------------------- */

/* Write all of data: 0, -ECANCELED, or a failure with *why. */
static int send_all(conn *k, const char *data, size_t len, service_reaper_error *why,
                    airlock_error *err, const char *address)
{
	size_t off = 0;
	while (off < len) {
		ssize_t n;
		if (k->tls) {
			n = gnutls_record_send(k->tls, data + off, len - off);
			if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
				n = -1, errno = EAGAIN;
			else if (n < 0)
				return fail(why, SERVICE_REAPER_IO, err, 0,
				            "reaper: the worker tier at %s: sending the question failed",
				            address);
		} else {
			n = send(k->fd, data + off, len - off, MSG_NOSIGNAL);
		}
		if (n >= 0) {
			off += (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return fail(why, SERVICE_REAPER_IO, err, errno,
			            "reaper: the worker tier at %s: sending the question", address);
		int w = wait_fd(k, POLLOUT);
		if (w == -ECANCELED)
			return w;
		if (w <= 0)
			return fail(why, w == 0 ? SERVICE_REAPER_TIMEOUT : SERVICE_REAPER_IO, err,
			            w < 0 ? -w : 0,
			            "reaper: the worker tier at %s: the question was not taken in time",
			            address);
	}
	return 0;
}

/* One read into buf: bytes read, 0 at end of file, -ECANCELED, or a
 * failure with *why. */
static ssize_t recv_some(conn *k, char *buf, size_t size, service_reaper_error *why,
                         airlock_error *err, const char *address)
{
	for (;;) {
		ssize_t n;
		if (k->tls) {
			n = gnutls_record_recv(k->tls, buf, size);
			/* A peer that closes without close_notify ends the
			 * answer as a plain close would: the framing (length,
			 * chunks) says whether it was whole. */
			if (n == GNUTLS_E_PREMATURE_TERMINATION)
				return 0;
			if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
				n = -1, errno = EAGAIN;
			else if (n < 0)
				return fail(why, SERVICE_REAPER_IO, err, 0,
				            "reaper: the worker tier at %s: reading the answer failed (TLS)",
				            address);
		} else {
			n = recv(k->fd, buf, size, 0);
		}
		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return fail(why, SERVICE_REAPER_IO, err, errno,
			            "reaper: the worker tier at %s: reading the answer", address);
		int w = wait_fd(k, POLLIN);
		if (w == -ECANCELED)
			return w;
		if (w <= 0)
			return fail(why, w == 0 ? SERVICE_REAPER_TIMEOUT : SERVICE_REAPER_IO, err,
			            w < 0 ? -w : 0, "reaper: the worker tier at %s: no whole answer in time",
			            address);
	}
}

/* ---- the answer's framing -------------------------------------------------------- */

typedef struct head {
	unsigned status;
	size_t body_off;    /* where the body starts */
	bool has_length;
	size_t length;
	bool chunked;
} head;

/* 1 with *h when buf holds the whole header block, 0 when more is
 * needed, -1 when it is not an HTTP/1.x answer's. */
static int parse_head(const char *buf, size_t len, head *h)
{
	const char *end = memmem(buf, len, "\r\n\r\n", 4);
	if (!end)
		return len > AIRLOCK_REAPER_HEADER_MAX ? -1 : 0;
	*h = (head){ .body_off = (size_t)(end - buf) + 4 };
	if (h->body_off > AIRLOCK_REAPER_HEADER_MAX || len < 12 || memcmp(buf, "HTTP/1.", 7) != 0 ||
	    (buf[7] != '0' && buf[7] != '1') || buf[8] != ' ')
		return -1;
	unsigned st = 0;
	for (int i = 9; i < 12; i++) {
		if (buf[i] < '0' || buf[i] > '9')
			return -1;
		st = st * 10 + (unsigned)(buf[i] - '0');
	}
	if (st < 100 || (len > 12 && buf[12] != ' ' && buf[12] != '\r'))
		return -1;
	h->status = st;
	/* The status line's end: the block's own CRLF at the latest (an
	 * answer without a header line). */
	const char *p = (const char *)memchr(buf, '\n', (size_t)(end + 2 - buf)) + 1;
	while (p < end + 2) {
		const char *eol = memchr(p, '\n', (size_t)(end + 2 - p));
		if (!eol)
			break;
		size_t n = (size_t)(eol - p);
		if (n && p[n - 1] == '\r')
			n--;
		if (n > 15 && strncasecmp(p, "content-length:", 15) == 0) {
			size_t v = 0, i = 15;
			while (i < n && (p[i] == ' ' || p[i] == '\t'))
				i++;
			if (i == n)
				return -1;
			/* Saturated past the cap: any such length is too large,
			 * said as that rather than as malformed. */
			for (; i < n && p[i] >= '0' && p[i] <= '9'; i++)
				v = v > AIRLOCK_REAPER_ANSWER_MAX ? v : v * 10 + (size_t)(p[i] - '0');
			while (i < n && (p[i] == ' ' || p[i] == '\t'))
				i++;
			if (i != n || (h->has_length && h->length != v))
				return -1;
			h->has_length = true;
			h->length = v;
		} else if (n > 18 && strncasecmp(p, "transfer-encoding:", 18) == 0) {
			const char *v = p + 18;
			while (v < p + n && (*v == ' ' || *v == '\t'))
				v++;
			if ((size_t)(p + n - v) != 7 || strncasecmp(v, "chunked", 7) != 0)
				return -1; /* no other coding is ever sent for this answer */
			h->chunked = true;
		}
		p = eol + 1;
	}
	if (h->chunked && h->has_length)
		return -1; /* RFC 9112 6.3: both is a smuggling shape, refused */
	return 1;
}

/* A chunked body: 1 with *ret_len when whole, 0 when more is needed, -1
 * when malformed. With apply, the chunks' data is moved together in place
 * (only once the body is known whole: a partial decode in place would be
 * read again as chunks by the next call). */
static int dechunk(char *body, size_t len, bool apply, size_t *ret_len)
{
	size_t in = 0, out = 0;
	for (;;) {
		const char *eol = memmem(body + in, len - in, "\r\n", 2);
		if (!eol)
			return 0;
		size_t n = 0, i = in;
		if (i == (size_t)(eol - body))
			return -1;
		for (; body + i < eol && body[i] != ';'; i++) {
			int d = body[i] >= '0' && body[i] <= '9'   ? body[i] - '0' :
			        body[i] >= 'a' && body[i] <= 'f' ? body[i] - 'a' + 10 :
			        body[i] >= 'A' && body[i] <= 'F' ? body[i] - 'A' + 10 :
			                                           -1;
			if (d < 0 || n > AIRLOCK_REAPER_ANSWER_MAX)
				return -1;
			n = n * 16 + (size_t)d;
		}
		in = (size_t)(eol - body) + 2;
		if (n == 0) {
			*ret_len = out;
			return 1; /* trailers, if any, are not read */
		}
		if (len - in < n + 2)
			return 0;
		if (body[in + n] != '\r' || body[in + n + 1] != '\n')
			return -1;
		if (apply)
			memmove(body + out, body + in, n);
		out += n;
		in += n + 2;
	}
}

int reaper_answer_frame(char *buf, size_t have, bool eof, reaper_frame *ret)
{
	head h;
	int hs = parse_head(buf, have, &h);
	if (hs == 0 && !eof)
		return 0;
	if (hs <= 0) {
		ret->why = hs < 0 ? SERVICE_REAPER_MALFORMED : SERVICE_REAPER_IO;
		return -1;
	}
	size_t got = have - h.body_off, body_len = 0;
	if (h.has_length && h.length > AIRLOCK_REAPER_ANSWER_MAX - h.body_off) {
		ret->why = SERVICE_REAPER_TOO_LARGE;
		return -1;
	}
	int d = 0;
	if (h.has_length) {
		d = got >= h.length;
		body_len = h.length;
	} else if (h.chunked) {
		d = dechunk(buf + h.body_off, got, false, &body_len);
		if (d > 0)
			d = dechunk(buf + h.body_off, got, true, &body_len);
	} else if (eof) {
		d = 1;
		body_len = got;
	}
	if (d < 0 || (d == 0 && eof)) {
		ret->why = d < 0 ? SERVICE_REAPER_MALFORMED : SERVICE_REAPER_IO;
		return -1;
	}
	if (d > 0)
		*ret = (reaper_frame){ .status = h.status, .body_off = h.body_off, .body_len = body_len };
	return d;
}

/* ---- the request ------------------------------------------------------------------ */

static int exchange(reaper_client *c, conn *k, const char *path, const char *body, size_t len,
                    const char *address, reaper_answer *ret, service_reaper_error *why,
                    airlock_error *err)
{
	/* The request line and headers, the token among them: this copy is
	 * wiped as soon as it is sent (or not). */
	size_t hcap = 512 + strlen(path) + strlen(c->host) + c->token_len;
	char *req = malloc(hcap);
	if (!req)
		return fail(why, SERVICE_REAPER_INTERNAL, err, ENOMEM, "reaper: %s", "the question");
	/* An IPv6 literal is bracketed in Host (RFC 9110 7.2). */
	bool v6 = !c->is_unix && strchr(c->host, ':');
	int hn = snprintf(req, hcap,
	                  "POST %s HTTP/1.1\r\nHost: %s%s%s\r\nAuthorization: Bearer %.*s\r\n"
	                  "Content-Type: application/json\r\nContent-Length: %zu\r\n"
	                  "Connection: close\r\n\r\n",
	                  path, v6 ? "[" : "", c->is_unix ? "localhost" : c->host, v6 ? "]" : "",
	                  (int)c->token_len, (const char *)c->token, len);
	int r = hn > 0 && (size_t)hn < hcap ? send_all(k, req, (size_t)hn, why, err, address)
	                                    : fail(why, SERVICE_REAPER_INTERNAL, err, 0, "reaper: %s",
	                                           "the question's header");
	explicit_bzero(req, hcap);
	free(req);
	if (r < 0)
		return r;
	if ((r = send_all(k, body, len, why, err, address)) < 0)
		return r;

	size_t cap = AIRLOCK_REAPER_ANSWER_MAX;
	char *buf = malloc(cap + 1);
	if (!buf)
		return fail(why, SERVICE_REAPER_INTERNAL, err, ENOMEM, "reaper: %s", "the answer");
	size_t have = 0;
	reaper_frame f = { 0 };
	bool eof = false;
	for (;;) {
		int d = reaper_answer_frame(buf, have, eof, &f);
		if (d > 0) {
			r = 0;
			break;
		}
		if (d < 0) {
			r = fail(why, f.why, err, 0, "reaper: the worker tier at %s: %s", address,
			         f.why == SERVICE_REAPER_TOO_LARGE ? "the answer is over 1 MiB" :
			         f.why == SERVICE_REAPER_IO        ? "the connection closed mid-answer" :
			                                             "the answer is not well-formed HTTP/1.x");
			break;
		}
		if (have == cap) {
			r = fail(why, SERVICE_REAPER_TOO_LARGE, err, 0,
			         "reaper: the worker tier at %s: the answer is over 1 MiB", address);
			break;
		}
		ssize_t n = recv_some(k, buf + have, cap - have, why, err, address);
		if (n < 0) {
			r = (int)n;
			break;
		}
		if (n == 0)
			eof = true;
		have += (size_t)n;
	}
	if (r < 0) {
		free(buf);
		return r;
	}
	size_t body_len = f.body_len;
	memmove(buf, buf + f.body_off, body_len);
	buf[body_len] = 0;
	ret->status = f.status;
	ret->body = buf;
	ret->len = body_len;
	return 0;
}

int reaper_client_post(reaper_client *c, const char *path, const char *body, size_t len,
                       int64_t connect_ms, int64_t total_ms, int stop_fd, reaper_answer *ret,
                       service_reaper_error *ret_why, airlock_error *err)
{
	char address[300];
	if (c->is_unix)
		snprintf(address, sizeof(address), "unix:%s", c->path);
	else
		snprintf(address, sizeof(address), "%s:%s", c->host, c->port);
	int64_t start = util_monotonic_ms();
	conn k = { .fd = -1, .stop_fd = stop_fd,
		   .deadline = start + (connect_ms < total_ms ? connect_ms : total_ms) };
	*ret = (reaper_answer){ 0 };
	int r = open_conn(c, &k, address, ret_why, err);
	if (r == 0) {
		k.deadline = start + total_ms;
		r = exchange(c, &k, path, body, len, address, ret, ret_why, err);
	}
	close_conn(&k);
	if (r == -ECANCELED)
		airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, ECANCELED,
		                  "reaper: stopped (the service is shutting down)");
	return r;
}
