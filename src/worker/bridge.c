/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's part of the orchestration bridge (docs/bridge.md): the
 * one-time token a claim's sandbox is given, and the listener that
 * authenticates a sandbox's connection by it and relays it to the
 * platform's orchestration endpoint.
 */
#include "worker/daemon.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "airlock/ids.h"
#include "util/relay.h"
#include "util/util.h"

/* 32 bytes: the token is a bearer credential for the run's orchestration
 * calls, so it is as hard to guess as any key (256 bits). */
#define BRIDGE_TOKEN_BYTES 32
_Static_assert((BRIDGE_TOKEN_BYTES * 4 + 2) / 3 == WORKER_BRIDGE_TOKEN_LEN,
               "base64url of the token's bytes, unpadded");

int worker_bridge_token_new(char ret_token[WORKER_BRIDGE_TOKEN_LEN + 1], char ret_sha256[65],
                            airlock_error *err)
{
	unsigned char raw[BRIDGE_TOKEN_BYTES];
	int r = util_random(raw, sizeof(raw));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "bridge token: getrandom");
	char *b64 = util_base64_encode(raw, sizeof(raw));
	OPENSSL_cleanse(raw, sizeof(raw));
	if (!b64)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "bridge token");
	/* RFC 4648 section 5: the URL and filename safe alphabet, no padding
	 * (the token travels in an environment variable and a line). */
	size_t n = 0;
	for (const char *p = b64; *p && *p != '='; p++)
		ret_token[n++] = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	ret_token[n] = 0;
	OPENSSL_cleanse(b64, strlen(b64));
	free(b64);
	if (n != WORKER_BRIDGE_TOKEN_LEN) {
		OPENSSL_cleanse(ret_token, n);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "bridge token: encoding");
	}
	r = util_sha256_hex(ret_token, n, ret_sha256);
	if (r < 0) {
		OPENSSL_cleanse(ret_token, n);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "bridge token: SHA-256");
	}
	return 0;
}

/* ---- the listener ------------------------------------------------------------------
 *
 * One acceptor thread on worker.bridge_listen and one thread per
 * connection: a connection's two lines are read under a deadline, its
 * sandbox row looked up, and an authenticated one relayed to
 * worker.bridge_upstream (util_relay) until either side closes or the
 * worker stops. The execution service is the only client: it writes the
 * preface before any byte of the sandbox's, so the environment a
 * connection names is the sandbox it came from, and the token line is the
 * sandbox's own.
 */

/* How long a connection has for both lines: a script writes its token
 * first thing, so this is generous, and a connection that sends nothing
 * holds a thread for no longer. */
#define BRIDGE_HELLO_MS 10000
/* Connecting to and writing the first line to the platform's endpoint
 * (SO_SNDTIMEO: a full backlog or a stalled reader is not waited for
 * forever, and the worker's stop waits no longer than this). */
#define BRIDGE_UPSTREAM_MS 5000
/* How often the acceptor joins the threads of connections that ended. */
#define BRIDGE_REAP_MS 1000
static const char bridge_preface[] = "AIRLOCK-BRIDGE/1 ";

typedef struct bridge_conn bridge_conn;
struct bridge_conn {
	bridge_conn *next;
	worker_daemon *w;
	int fd;
	pthread_t thread;
	bool done; /* the thread has ended: join it (under the bridge's lock) */
	/* The environment its preface named, "" before: counted against that
	 * environment's cap from then on. */
	char environment_id[AIRLOCK_ENVIRONMENT_ID_MAX];
	/* The tenant of that environment's run, "" before: counted against
	 * the tenant's cap from then on. */
	char tenant_id[AIRLOCK_ID_MAX + 1];
};

struct worker_bridge {
	http_listener lis;
	char *upstream; /* the path of worker.bridge_upstream */
	int stop_fd;    /* eventfd, readable once the worker stops */
	pthread_t acceptor;
	bool acceptor_started;
	pthread_mutex_t lock; /* conns, n_conns, each conn's done and environment_id */
	bridge_conn *conns;
	size_t n_conns; /* threads not yet done (a done one holds no place) */
	/* Refusal log lines: at most BRIDGE_REFUSED_LOGS_PER_SECOND, the rest
	 * counted into the next one's "suppressed". */
	pthread_mutex_t log_lock;
	int64_t log_window_ms;
	int log_in_window;
	uint64_t log_suppressed;
};

/* Refusals a sandbox can cause as fast as it connects (a wrong token, a
 * connection closed at once): one log line each would let it fill the
 * worker's log (measured: 71,522 lines, 11.5 MB in 5 s from one sandbox
 * before the service bounded its connect rate). The metric counts every
 * one; the log says at most this many a second, and the next line it
 * writes says how many it left out. */
#define BRIDGE_REFUSED_LOGS_PER_SECOND 10

static void bridge_refused(worker_daemon *w, const char *environment_id, const char *reason,
                           const airlock_error *e)
{
	atomic_fetch_add(&w->c.bridge_refused, 1);
	worker_bridge *b = w->bridge;
	uint64_t suppressed = 0;
	pthread_mutex_lock(&b->log_lock);
	int64_t now = util_monotonic_ms();
	if (now - b->log_window_ms >= 1000) {
		b->log_window_ms = now;
		b->log_in_window = 0;
	}
	bool say = b->log_in_window < BRIDGE_REFUSED_LOGS_PER_SECOND;
	if (say) {
		b->log_in_window++;
		suppressed = b->log_suppressed;
		b->log_suppressed = 0;
	} else {
		b->log_suppressed++;
	}
	pthread_mutex_unlock(&b->log_lock);
	if (!say)
		return;
	json_t *f = json_pack("{s:s?, s:s}", "environment_id",
	                      environment_id && *environment_id ? environment_id : NULL, "reason",
	                      reason);
	if (f && e)
		json_object_set_new(f, "message", json_string(e->message));
	if (f && suppressed)
		json_object_set_new(f, "suppressed", json_integer((json_int_t)suppressed));
	worker_log("warning", "bridge_refused", f);
}

/* A connection's first bytes: the two lines and what came after them in
 * the same reads (the pending bytes). buf holds both lines' caps, so
 * whatever the client sends, at most 2 * AIRLOCK_WORKER_BRIDGE_LINE_MAX
 * bytes are read before the connection is relayed or refused. */
typedef struct bridge_hello {
	char buf[2 * AIRLOCK_WORKER_BRIDGE_LINE_MAX];
	size_t got;
	size_t preface_len; /* the preface line, its '\n' included; 0: not yet */
	size_t token_end;   /* the token line's '\n'; 0: not yet */
	char env[AIRLOCK_ENVIRONMENT_ID_MAX]; /* the preface's, once valid; "" before */
} bridge_hello;

/* A line at p, once its '\n' is in: its length with it; 0 while not;
 * -1 past the cap. */
static ssize_t scan_line(const char *p, size_t avail)
{
	size_t n = avail < AIRLOCK_WORKER_BRIDGE_LINE_MAX ? avail : AIRLOCK_WORKER_BRIDGE_LINE_MAX;
	const char *nl = memchr(p, '\n', n);
	if (nl)
		return nl - p + 1;
	return avail >= AIRLOCK_WORKER_BRIDGE_LINE_MAX ? -1 : 0;
}

/* The preface line: exactly the protocol's word, a space, an environment
 * id by the core's rule, '\n'. */
static bool preface_environment(const bridge_hello *h, char ret[AIRLOCK_ENVIRONMENT_ID_MAX])
{
	size_t pl = sizeof(bridge_preface) - 1, n = h->preface_len - 1;
	if (n <= pl || n - pl >= AIRLOCK_ENVIRONMENT_ID_MAX || memcmp(h->buf, bridge_preface, pl))
		return false;
	memcpy(ret, h->buf + pl, n - pl);
	ret[n - pl] = 0;
	return strlen(ret) == n - pl && airlock_environment_id_valid(ret);
}

/* Register c under the environment its preface named and that
 * environment's tenant, within the caps (the environment's, the
 * tenant's, the named connections' in all): NULL, or the refusal's
 * reason. tenant_id NULL: the caps checked, nothing registered.
 * The tenant's cap keeps one tenant's connections, authenticated and
 * idle or not, from taking every place of the worker's. */
static const char *conn_register(worker_bridge *b, bridge_conn *c, const char *environment_id,
                                 const char *tenant_id)
{
	pthread_mutex_lock(&b->lock);
	size_t k = 0, t = 0, all = 0;
	for (bridge_conn *o = b->conns; o; o = o->next) {
		if (o->done || !o->environment_id[0])
			continue;
		all++;
		k += strcmp(o->environment_id, environment_id) == 0;
		t += tenant_id && strcmp(o->tenant_id, tenant_id) == 0;
	}
	const char *why = k >= AIRLOCK_WORKER_BRIDGE_PER_ENVIRONMENT_MAX ? "environment_cap"
	                  : t >= AIRLOCK_WORKER_BRIDGE_PER_TENANT_MAX    ? "tenant_cap"
	                  : all >= AIRLOCK_WORKER_BRIDGE_CONNECTIONS_MAX ? "connections_cap"
	                                                                 : NULL;
	if (!why && !tenant_id) {
		pthread_mutex_unlock(&b->lock);
		return NULL; /* the environment's cap alone, before its row is read */
	}
	if (!why) {
		snprintf(c->environment_id, sizeof(c->environment_id), "%s", environment_id);
		snprintf(c->tenant_id, sizeof(c->tenant_id), "%s", tenant_id);
	}
	pthread_mutex_unlock(&b->lock);
	return why;
}

/* The environment's row, looked up as soon as the preface names it: an
 * environment no claim recorded waits for nothing, and one that is
 * counted against its tenant from its first byte. NULL, or the reason. */
static const char *conn_admit(worker_bridge *b, bridge_conn *c, const char *environment_id)
{
	/* The environment's own cap first, in memory: a sandbox past it costs
	 * no database lookup. */
	const char *why = conn_register(b, c, environment_id, NULL);
	if (why)
		return why;
	worker_db_bridge_result row;
	airlock_error err = { 0 };
	if (worker_db_bridge_lookup(c->w->db, environment_id, util_now_ms(), &row, &err) < 0)
		return "database";
	if (!row.found)
		return "unknown_environment";
	return conn_register(b, c, environment_id, row.tenant_id);
}

/* Read until both lines are in or the deadline passes; registers the
 * environment as soon as its preface is read. NULL when both lines are
 * in, else the refusal's reason. */
static const char *hello_read(worker_bridge *b, bridge_conn *c, bridge_hello *h)
{
	int64_t deadline = util_monotonic_ms() + BRIDGE_HELLO_MS;
	for (;;) {
		int64_t left = deadline - util_monotonic_ms();
		if (left <= 0)
			return "deadline";
		struct pollfd p[2] = { { .fd = c->fd, .events = POLLIN },
			               { .fd = b->stop_fd, .events = POLLIN } };
		int n = poll(p, 2, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return "read_failed";
		if (p[1].revents)
			return "worker_stopping";
		if (n == 0)
			continue;
		ssize_t k = recv(c->fd, h->buf + h->got, sizeof(h->buf) - h->got, MSG_DONTWAIT);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k <= 0)
			return k == 0 ? "closed_early" : "read_failed";
		h->got += (size_t)k;
		if (!h->preface_len) {
			ssize_t line = scan_line(h->buf, h->got);
			if (line < 0)
				return "preface_too_long";
			if (line == 0)
				continue;
			h->preface_len = (size_t)line;
			/* Checked and counted as soon as it is in: a connection
			 * past its environment's cap waits for nothing. */
			if (!preface_environment(h, h->env)) {
				h->env[0] = 0;
				return "bad_preface";
			}
			const char *why = conn_admit(b, c, h->env);
			if (why)
				return why;
		}
		ssize_t line = scan_line(h->buf + h->preface_len, h->got - h->preface_len);
		if (line < 0)
			return "token_too_long";
		if (line > 0) {
			h->token_end = h->preface_len + (size_t)line - 1;
			return NULL;
		}
	}
}

/* The row's claim and the token: NULL when the connection is the
 * claim's, else the refusal's reason (*ret_err set for "database"). */
static const char *authenticate(worker_daemon *w, const char *environment_id, const char *token,
                                size_t token_len, worker_db_bridge_result *row,
                                airlock_error *ret_err)
{
	if (worker_db_bridge_lookup(w->db, environment_id, util_now_ms(), row, ret_err) < 0)
		return "database";
	if (!row->found)
		return "unknown_environment";
	switch (row->state) {
	case WORKER_DB_LEASE_CURRENT: break;
	case WORKER_DB_LEASE_EXPIRED: return "lease_expired";
	case WORKER_DB_LEASE_RELEASED: return "lease_released";
	case WORKER_DB_LEASE_OTHER_EPOCH: return "lease_fenced";
	case WORKER_DB_LEASE_NONE:
	case WORKER_DB_LEASE_OTHER_TENANT:
	case WORKER_DB_LEASE_OTHER_BRIDGE:
	case WORKER_DB_LEASE_INVALID:
	case WORKER_DB_LEASE__MAX:
		return "lease_not_current";
	}
	if (!row->has_token)
		return "no_bridge";
	char hex[65];
	if (util_sha256_hex(token, token_len, hex) < 0)
		return "hash_failed";
	/* Constant time over the whole digest: how much of a guess matched
	 * is not told by when the answer comes. */
	return CRYPTO_memcmp(hex, row->token_sha256, 64) == 0 ? NULL : "wrong_token";
}

static int upstream_connect(const worker_bridge *b, const worker_db_bridge_result *row,
                            const char *environment_id)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(b->upstream) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, b->upstream, strlen(b->upstream) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct timeval tv = { .tv_sec = BRIDGE_UPSTREAM_MS / 1000,
		              .tv_usec = (BRIDGE_UPSTREAM_MS % 1000) * 1000 };
	json_t *o = json_pack("{s:s, s:s, s:s, s:I}", "environment_id", environment_id, "run_id",
	                      row->run_id, "tenant_id", row->tenant_id, "epoch",
	                      (json_int_t)row->epoch);
	char *line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	int r = 0;
	if (!line)
		r = -ENOMEM;
	else if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	         connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		r = -errno;
	size_t len = line ? strlen(line) : 0, off = 0;
	if (line)
		line[len++] = '\n'; /* over the NUL: the line is written by length */
	while (r == 0 && off < len) {
		ssize_t k = send(fd, line + off, len - off, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			r = k < 0 ? -errno : -EPIPE;
		else
			off += (size_t)k;
	}
	free(line);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

static void conn_serve(worker_bridge *b, bridge_conn *c)
{
	worker_daemon *w = c->w;
	bridge_hello h = { .got = 0, .env = "" };
	const char *why = hello_read(b, c, &h);
	if (why) {
		/* The preface's environment only when it was a valid one. */
		bridge_refused(w, h.env, why, NULL);
		OPENSSL_cleanse(h.buf, sizeof(h.buf));
		return;
	}
	worker_db_bridge_result row;
	airlock_error err = { 0 };
	const char *token = h.buf + h.preface_len;
	size_t token_len = h.token_end - h.preface_len;
	/* A line ended "\r\n" (a script written for a line protocol of that
	 * kind) carries the same token: the '\r' is not part of it. */
	if (token_len && token[token_len - 1] == '\r')
		token_len--;
	why = authenticate(w, c->environment_id, token, token_len, &row, &err);
	/* The token is not kept past its check: the pending bytes stay. */
	OPENSSL_cleanse(h.buf, h.token_end);
	if (why) {
		bridge_refused(w, c->environment_id, why, strcmp(why, "database") == 0 ? &err : NULL);
		return;
	}
	int up = upstream_connect(b, &row, c->environment_id);
	if (up < 0) {
		airlock_error_set(&err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -up,
		                  "worker.bridge_upstream %s", b->upstream);
		bridge_refused(w, c->environment_id, "upstream_unavailable", &err);
		return;
	}
	atomic_fetch_add(&w->c.bridge_accepted, 1);
	worker_log("info", "bridge_accepted",
	           json_pack("{s:s, s:s, s:s, s:I}", "environment_id", c->environment_id, "run_id",
	                     row.run_id, "tenant_id", row.tenant_id, "epoch", (json_int_t)row.epoch));
	int64_t t0 = util_monotonic_ms();
	size_t pending = h.got - h.token_end - 1;
	int r = util_relay(c->fd, up, b->stop_fd, h.buf + h.token_end + 1, pending);
	close(up);
	worker_log("info", "bridge_closed",
	           json_pack("{s:s, s:s, s:I, s:s}", "environment_id", c->environment_id, "run_id",
	                     row.run_id, "duration_ms", (json_int_t)(util_monotonic_ms() - t0),
	                     "end", r == 0 ? "closed" : r == 1 ? "worker_stopping" : strerror(-r)));
}

static void *conn_main(void *arg)
{
	bridge_conn *c = arg;
	worker_bridge *b = c->w->bridge;
	conn_serve(b, c);
	close(c->fd);
	pthread_mutex_lock(&b->lock);
	c->fd = -1;
	c->done = true;
	b->n_conns--; /* its place is free now; the acceptor joins it */
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

/* Join and free the connections whose thread ended (all = true: wait for
 * every one; the caller has told them to stop). */
static void conns_reap(worker_bridge *b, bool all)
{
	for (;;) {
		pthread_mutex_lock(&b->lock);
		bridge_conn **pp = &b->conns, *c = NULL;
		for (; *pp; pp = &(*pp)->next)
			if ((*pp)->done || all) {
				c = *pp;
				*pp = c->next;
				break;
			}
		pthread_mutex_unlock(&b->lock);
		if (!c)
			return;
		pthread_join(c->thread, NULL);
		free(c);
	}
}

static void conn_start(worker_daemon *w, worker_bridge *b, int fd)
{
	pthread_mutex_lock(&b->lock);
	/* Threads at once: the named connections' cap (conn_register) and as
	 * many again not yet named, so connections that end before their
	 * preface is read never take a named one's place. */
	bool full = b->n_conns >= 2 * AIRLOCK_WORKER_BRIDGE_CONNECTIONS_MAX;
	bridge_conn *c = full ? NULL : calloc(1, sizeof(*c));
	if (c) {
		*c = (bridge_conn){ .next = b->conns, .w = w, .fd = fd };
		int e = pthread_create(&c->thread, NULL, conn_main, c);
		if (e == 0) {
			b->conns = c;
			b->n_conns++;
		} else {
			free(c);
			c = NULL;
		}
	}
	pthread_mutex_unlock(&b->lock);
	if (!c) {
		/* Accepted and closed at once: the service sees its connection
		 * end, and this worker holds nothing for it. */
		close(fd);
		bridge_refused(w, NULL, full ? "connections_cap" : "no_thread", NULL);
	}
}

static void *acceptor_main(void *arg)
{
	worker_daemon *w = arg;
	worker_bridge *b = w->bridge;
	for (;;) {
		struct pollfd p[2] = { { .fd = b->lis.fd, .events = POLLIN },
			               { .fd = b->stop_fd, .events = POLLIN } };
		int n = poll(p, 2, BRIDGE_REAP_MS);
		if (n > 0 && p[1].revents)
			return NULL;
		conns_reap(b, false);
		if (n <= 0 || !p[0].revents)
			continue;
		int fd = accept4(b->lis.fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0) {
			conn_start(w, b, fd);
		} else if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
			/* Out of descriptors or memory: wait a little rather than
			 * spin on a listener that stays readable. */
			struct pollfd s = { .fd = b->stop_fd, .events = POLLIN };
			if (poll(&s, 1, 100) > 0)
				return NULL;
		}
	}
}

int worker_bridge_start(worker_daemon *w, airlock_error *err)
{
	const airlock_worker_settings *ws = &w->settings->worker;
	if (!ws->bridge_listen)
		return 0;
	worker_bridge *b = calloc(1, sizeof(*b));
	if (!b)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the bridge's listener");
	b->lis.fd = -1;
	b->stop_fd = -1;
	pthread_mutex_init(&b->lock, NULL);
	pthread_mutex_init(&b->log_lock, NULL);
	w->bridge = b;
	/* The settings' check admits only "unix:/path" for both. */
	static const char unix_prefix[] = "unix:";
	if (!ws->bridge_upstream || strncmp(ws->bridge_upstream, unix_prefix, 5) != 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.bridge_upstream: unix:/path is required with "
		                         "worker.bridge_listen");
	if (!(b->upstream = strdup(ws->bridge_upstream + sizeof(unix_prefix) - 1)))
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the bridge's listener");
	b->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (b->stop_fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "the bridge's eventfd");
	/* 0660: the worker's user and group (the operator gives the execution
	 * service the group); nobody else may connect and try tokens. */
	int r = http_listen(ws->bridge_listen, 0660, -1, &b->lis, err);
	if (r < 0) {
		airlock_error_prefix(err, "worker.bridge_listen: ");
		return r;
	}
	int e = pthread_create(&b->acceptor, NULL, acceptor_main, w);
	if (e)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "the bridge's acceptor thread");
	b->acceptor_started = true;
	return 0;
}

void worker_bridge_stop(worker_daemon *w)
{
	worker_bridge *b = w->bridge;
	if (!b)
		return;
	if (b->stop_fd >= 0) {
		uint64_t one = 1;
		ssize_t n = write(b->stop_fd, &one, sizeof(one));
		(void)n;
	}
	if (b->acceptor_started)
		pthread_join(b->acceptor, NULL);
	/* Every connection's thread polls stop_fd (its lines, its relay) or
	 * is bounded (a lookup, BRIDGE_UPSTREAM_MS): each ends and is joined. */
	conns_reap(b, true);
	http_listener_close(&b->lis);
	if (b->stop_fd >= 0)
		close(b->stop_fd);
	free(b->upstream);
	pthread_mutex_destroy(&b->lock);
	pthread_mutex_destroy(&b->log_lock);
	free(b);
	w->bridge = NULL;
}
