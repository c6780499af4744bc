/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The execution service's internal API (docs/service-api.md) over
 * libmicrohttpd, on a Unix socket or TCP with TLS.
 *
 * Threading. A command can run for minutes, a client can be slow or
 * hostile, and one tenant's slowness must not delay another's request. The
 * daemon runs one thread per connection (MHD_USE_THREAD_PER_CONNECTION),
 * and every phase of a connection is bounded, so a thread is never held
 * without bound either:
 *   - at most max_connections connections not cut exist (s->live); the
 *     next one is closed at once; on TCP at most max_connections_per_ip
 *     from one party (an address, an IPv6 /64: svc_client), past which
 *     that party's oldest unauthenticated connection goes
 *     (conn_admit_address: never an authenticated one);
 *   - a connection that has not yet sent a request with the credential
 *     (its TLS handshake and first header block) lives at most
 *     auth_timeout_ms (2 s) from accept, whatever it sends; and such
 *     connections hold at most three quarters of the slots: past that, a
 *     new one evicts the oldest unauthenticated connection of the party
 *     that holds the most of them (between as many, party_first). So
 *     clients without the credential, from however many addresses, leave
 *     a quarter of the slots to clients with it, cannot keep a slot long,
 *     and a party of one pending connection is the last to lose it
 *     (conn_admit);
 *   - the header block must arrive within header_timeout_ms in total and
 *     fit in AIRLOCK_SERVICE_HEADER_MAX (the connection's memory): a
 *     client sending it a byte at a time is cut by the watchdog below,
 *     which libmicrohttpd's idle timeout alone would not do;
 *   - a body must arrive within request_timeout_ms and fit its cap;
 *   - the execute itself runs on a thread of its own, bounded by the
 *     command's timeout, expires_at and the service's shutdown; the
 *     connection's thread waits for it in slices and looks at the socket
 *     each time: a client that went away cancels its command (CANCELLED);
 *   - a response must be taken within request_timeout_ms, and a client
 *     that reads nothing for connection_timeout_ms is closed
 *     (libmicrohttpd's idle timeout). A streamed execute's events wait in
 *     a capped buffer, so a client that stops reading costs its command
 *     nothing and the service at most that buffer.
 * The watchdog cuts a connection with shutdown(2) on its socket, which
 * libmicrohttpd's thread then sees as the peer's end: the descriptor stays
 * libmicrohttpd's, so there is no race with its close (the record is
 * dropped at the close notification, which comes before the close).
 *
 * Errors: every one leaves as airlock_error_to_json with the status of
 * docs/service-api.md; a body that does not decode is ToolValidationError
 * naming the field; 401 carries nothing but its class.
 */
#include "airlock/service.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <limits.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "airlock/ids.h"
#include "airlock/json.h"
#include "core/json_internal.h"
#include "service/server_internal.h"
#include "util/util.h"

/* How often a waiting thread looks at its client's socket, and the
 * watchdog at the deadlines: the delay before a disconnect cancels a
 * command, and the slack on every deadline. */
#define SVC_POLL_MS 100

/* The party a connection counts against: an IPv4 address, or an IPv6
 * address's /64 (one host or one site is normally given a whole /64, so
 * counting by the full address would let one attacker be 2^64 parties);
 * an IPv4-mapped IPv6 address is its IPv4 address. Family 0: a Unix
 * socket's client, of which there is one party. */
typedef struct {
	sa_family_t family;
	unsigned char bytes[8];
} svc_client;

/* How many of a party's connections ended lately without the credential
 * (cut at a deadline or evicted, or closed by the client before a request
 * carried it; rate_note): a count that halves every SVC_RATE_HALF_MS, in
 * 1/SVC_RATE_ONE units. A worker's connections authenticate and count
 * nothing; a flood's all count, and the faster it reconnects the more. */
#define SVC_RATE_HALF_MS 1000
#define SVC_RATE_ONE 1024u
typedef struct {
	svc_client client;
	uint32_t score;
	int64_t at_ms; /* when score was last decayed */
} svc_rate;

typedef struct svc_conn {
	struct svc_conn *prev, *next;
	int fd;
	int64_t deadline_ms; /* monotonic; 0: none */
	bool cut;
	/* Until a request on it carried the credential: it counts in
	 * s->pending, and no deadline of it is later than auth_deadline_ms. */
	bool authed;
	int64_t accepted_ms, auth_deadline_ms;
	svc_client client; /* who it counts against (client_of); family 0 on a Unix socket */
} svc_conn;

typedef struct svc_job svc_job;

struct airlock_service {
	airlock_service_config cfg; /* strings not kept: see the fields below */
	airlock_exec *exec;
	unsigned char *credential;
	size_t credential_len;
	/* The socket we listen on (a Unix socket file is removed at free if
	 * still ours); listen_fd is -1 while the daemon owns the descriptor. */
	svc_listener lis;
	bool tls, client_ca;
	char *pem_cert, *pem_key, *pem_ca;
	struct MHD_Daemon *daemon;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	svc_conn *conns;
	size_t pending;     /* connections not cut and not yet authenticated */
	size_t pending_max; /* conn_admit */
	int64_t pending_grace_ms; /* conn_admit: a quarter of the auth timeout */
	/* Connections not cut, and their cap (max_connections): a cut one
	 * no longer counts, though its thread may still be ending. */
	size_t live, live_max;
	size_t per_address_max; /* conn_admit_address; 0 on a Unix socket */
	/* The parties whose connections ended unauthenticated lately (TCP),
	 * at most rates_cap of them: when full, the one with the lowest
	 * count makes room (it is the one whose count matters least). */
	svc_rate *rates;
	size_t n_rates, rates_cap;
	svc_job *jobs;      /* executes running, for cancel */
	size_t in_flight;   /* requests between their start and completion */
	bool shutting_down;
	int stop_efd;
	pthread_t expire_thread, watchdog_thread;
	bool expire_started, watchdog_started;
};

typedef struct svc_req {
	airlock_service *s;
	svc_conn *conn;
	char *target; /* the raw request target, never unescaped */
	size_t target_len;
	bool started;
	svc_verb verb;
	char id[AIRLOCK_ENVIRONMENT_ID_MAX];
	const char *query;
	size_t query_len;
	airlock_environment_handle handle;
	bool has_handle;
	util_buf body; /* capped at the verb's cap (request_start) */
	/* A chunked body past the cap: its bytes are discarded, counted, and
	 * the request answered with 413 when it has been read (or closed past
	 * AIRLOCK_SERVICE_OVERSIZE_DRAIN_MAX). */
	bool oversize;
	uint64_t drained;
	/* Answered 413 at its head (Content-Length past the cap): how much of
	 * the body to read and drop after the answer (conn_drain). */
	size_t drain;
} svc_req;

/* ---- time and small helpers ---------------------------------------------- */

static int64_t cfg_or(int64_t v, int64_t dflt)
{
	return v > 0 ? v : dflt;
}

void airlock_service_config_default(airlock_service_config *c)
{
	*c = (airlock_service_config){ .socket_gid = -1 };
}

static void conn_deadline(airlock_service *s, svc_conn *c, int64_t in_ms)
{
	if (!c)
		return;
	pthread_mutex_lock(&s->lock);
	c->deadline_ms = in_ms > 0 ? util_monotonic_ms() + in_ms : 0;
	/* A connection without the credential goes at its auth deadline,
	 * whatever phase it is in (a 401 being sent, a keep-alive wait). */
	if (!c->authed && (c->deadline_ms == 0 || c->deadline_ms > c->auth_deadline_ms))
		c->deadline_ms = c->auth_deadline_ms;
	pthread_mutex_unlock(&s->lock);
}

static void rate_note(airlock_service *s, const svc_client *c, int64_t now);

/* End a connection (s->lock held): shutdown(2) on its socket, which its
 * libmicrohttpd thread then reads as the peer's end. */
static void conn_cut_locked(airlock_service *s, svc_conn *k)
{
	if (k->cut)
		return;
	if (k->fd >= 0)
		shutdown(k->fd, SHUT_RDWR);
	k->cut = true;
	s->live--;
	if (!k->authed) {
		s->pending--;
		rate_note(s, &k->client, util_monotonic_ms());
	}
}

/* The party of a client address (svc_client). */
static svc_client client_of(const struct sockaddr *sa)
{
	svc_client c = { 0 };
	if (sa && sa->sa_family == AF_INET) {
		c.family = AF_INET;
		memcpy(c.bytes, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			c.family = AF_INET;
			memcpy(c.bytes, a6->s6_addr + 12, 4);
		} else {
			c.family = AF_INET6;
			memcpy(c.bytes, a6->s6_addr, 8);
		}
	}
	return c;
}

static int client_cmp(const svc_client *x, const svc_client *y)
{
	if (x->family != y->family)
		return x->family < y->family ? -1 : 1;
	return memcmp(x->bytes, y->bytes, sizeof(x->bytes));
}

/* Decay r's count to now (s->lock held): halve per whole half-life, then
 * 1 - x/2 for the fraction x left (within 6% of 2^-x; no floating point). */
static void rate_decay(svc_rate *r, int64_t now)
{
	int64_t dt = now - r->at_ms;
	if (dt >= (int64_t)SVC_RATE_HALF_MS * 32) {
		r->score = 0;
	} else if (dt > 0) {
		uint64_t v = r->score >> (dt / SVC_RATE_HALF_MS);
		v -= v * (uint64_t)(dt % SVC_RATE_HALF_MS) / (2 * SVC_RATE_HALF_MS);
		r->score = (uint32_t)v;
	}
	if (dt > 0)
		r->at_ms = now;
}

/* The party's rate entry decayed to now (s->lock held), or NULL. */
static svc_rate *rate_find(airlock_service *s, const svc_client *c, int64_t now)
{
	for (size_t i = 0; i < s->n_rates; i++) {
		svc_rate *r = &s->rates[i];
		if (client_cmp(&r->client, c) == 0) {
			rate_decay(r, now);
			return r;
		}
	}
	return NULL;
}

/* The party's recent unauthenticated ends, in SVC_RATE_ONE units (s->lock held). */
static uint32_t rate_of(airlock_service *s, const svc_client *c, int64_t now)
{
	svc_rate *r = rate_find(s, c, now);
	return r ? r->score : 0;
}

/* A connection of c's ended without the credential (s->lock held). The table is bounded:
 * a party not in it takes the place of the one with the lowest rate,
 * which then counts as new (rate 0) if it comes back. */
static void rate_note(airlock_service *s, const svc_client *c, int64_t now)
{
	if (!s->rates_cap || c->family == AF_UNSPEC)
		return;
	svc_rate *r = rate_find(s, c, now);
	if (!r) {
		if (s->n_rates < s->rates_cap) {
			r = &s->rates[s->n_rates++];
		} else {
			r = &s->rates[0];
			for (size_t i = 0; i < s->n_rates; i++) {
				rate_decay(&s->rates[i], now);
				if (s->rates[i].score < r->score)
					r = &s->rates[i];
			}
		}
		*r = (svc_rate){ .client = *c, .score = 0, .at_ms = now };
	}
	r->score = r->score > UINT32_MAX - SVC_RATE_ONE ? UINT32_MAX : r->score + SVC_RATE_ONE;
}

/* A new connection k (s->lock held) from a party that already holds
 * per_address_max connections: the oldest of that party's connections
 * that has not authenticated goes, k itself when every other one has. So
 * the cap keeps one party from taking every slot, and still cannot be
 * filled by connections without the credential against a client with it
 * at the same address (a worker behind the same NAT or host as a flood):
 * an authenticated connection is never the one cut, and a new one always
 * gets in past a pending one. libmicrohttpd's own per-address limit
 * refused the new connection before anyone could tell whose it was.
 * Returns whether k was cut. */
static bool conn_admit_address(airlock_service *s, svc_conn *k)
{
	if (!s->per_address_max || k->client.family == AF_UNSPEC)
		return false;
	size_t held = 0;
	svc_conn *victim = NULL;
	for (svc_conn *o = s->conns; o; o = o->next) {
		if (o->cut || client_cmp(&o->client, &k->client) != 0)
			continue;
		held++;
		if (!o->authed && (!victim || o->accepted_ms < victim->accepted_ms ||
		                   (o->accepted_ms == victim->accepted_ms && victim == k)))
			victim = o;
	}
	if (held <= s->per_address_max || !victim)
		return false;
	conn_cut_locked(s, victim);
	return victim == k;
}

/* One party's pending connections, for conn_admit. */
typedef struct {
	svc_conn *oldest;
	size_t held;
	uint32_t rate;
	bool settled; /* its oldest is past the grace of conn_admit */
} svc_party;

/* Whether party a is evicted before party b: the one holding more
 * pending connections; between as many, one whose oldest connection has
 * had its grace (then the older); between parties whose oldest are all
 * still in their grace, the one that lost more connections
 * unauthenticated lately; then the one whose oldest is older. */
static bool party_first(const svc_party *a, const svc_party *b)
{
	if (a->held != b->held)
		return a->held > b->held;
	if (a->settled != b->settled)
		return a->settled;
	if (!a->settled && a->rate != b->rate)
		return a->rate > b->rate;
	return a->oldest->accepted_ms < b->oldest->accepted_ms;
}

/* By party, then oldest first. */
static int pending_order(const void *pa, const void *pb)
{
	const svc_conn *a = *(const svc_conn *const *)pa, *b = *(const svc_conn *const *)pb;
	int c = client_cmp(&a->client, &b->client);
	if (c)
		return c;
	return a->accepted_ms < b->accepted_ms ? -1 : a->accepted_ms > b->accepted_ms;
}

/* A new connection is pending (s->lock held). Past pending_max pending
 * connections, one is evicted: of the party (svc_client) first in
 * party_first, its oldest. So the per-party share shrinks as the pending
 * slots fill: a party with one pending connection (a worker opening one)
 * loses it only after every party with more has been cut down to one;
 * and when every party holds one (a flood from more addresses than there
 * are pending slots, each reconnecting at once when cut), the party whose
 * connections ended unauthenticated most often lately loses first. A
 * worker, whose connections authenticate, therefore keeps its connection
 * through its TLS handshake while a flood evicts its own; only parties
 * that have not yet lost a connection, more of them than there are
 * pending slots, can still evict it (docs/service-api.md). The pending
 * connections are sorted by party (O(p log p) under the lock, p at most
 * three quarters of max_connections, plus p lookups in a rate table of
 * at most max_connections entries); without memory for that, the oldest
 * goes. */
static void conn_admit(airlock_service *s)
{
	if (s->pending <= s->pending_max)
		return;
	svc_conn **v = calloc(s->pending, sizeof(*v));
	size_t n = 0;
	svc_conn *victim = NULL;
	for (svc_conn *k = s->conns; k; k = k->next) {
		if (k->authed || k->cut)
			continue;
		if (v && n < s->pending)
			v[n++] = k;
		if (!victim || k->accepted_ms < victim->accepted_ms)
			victim = k;
	}
	if (v && n > 0) {
		qsort(v, n, sizeof(*v), pending_order);
		int64_t now = util_monotonic_ms();
		svc_party best = { 0 };
		for (size_t i = 0, j; i < n; i = j) {
			for (j = i + 1; j < n && client_cmp(&v[i]->client, &v[j]->client) == 0; j++)
				;
			/* v[i] is the party's oldest. */
			svc_party p = { .oldest = v[i], .held = j - i, .rate = rate_of(s, &v[i]->client, now),
				        .settled = now - v[i]->accepted_ms >= s->pending_grace_ms };
			if (!best.oldest || party_first(&p, &best))
				best = p;
		}
		victim = best.oldest;
	}
	free(v);
	if (victim)
		conn_cut_locked(s, victim);
}

/* The connection's request carried the credential. */
static void conn_authenticated(airlock_service *s, svc_conn *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&s->lock);
	if (!k->authed) {
		k->authed = true;
		if (!k->cut)
			s->pending--;
	}
	pthread_mutex_unlock(&s->lock);
}

/* The client closed its end, or the watchdog or the daemon cut the
 * connection: the command it waits for has nobody to go to. */
static bool peer_gone(int fd)
{
	if (fd < 0)
		return false;
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	int r = poll(&p, 1, 0);
	return r > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void timed_wait(pthread_cond_t *cond, pthread_mutex_t *lock, int64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(cond, lock, &ts);
}

static void cond_init_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(c, &a);
	pthread_condattr_destroy(&a);
}

/* ---- responses ------------------------------------------------------------- */

static enum MHD_Result respond(svc_req *q, struct MHD_Connection *c, unsigned status, char *data,
                               size_t len, const char *type, bool retry_after)
{
	static char empty[1];
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, data ? data : empty,
	                                                            data ? MHD_RESPMEM_MUST_FREE
	                                                                 : MHD_RESPMEM_PERSISTENT);
	if (!resp) {
		free(data);
		return MHD_NO;
	}
	if (type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (retry_after)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
	enum MHD_Result r = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	conn_deadline(q->s, q->conn, cfg_or(q->s->cfg.request_timeout_ms, 300000));
	return r;
}

static enum MHD_Result respond_str(svc_req *q, struct MHD_Connection *c, unsigned status, char *json)
{
	if (!json)
		return MHD_NO;
	return respond(q, c, status, json, strlen(json), "application/json", false);
}

/* The wire's classes are the specification's five; everything else a
 * layer below can say (a system error, a configuration problem found at
 * call time, a mechanism that is not built) is the service failing to
 * execute, which the caller may retry. A decoder's class is the
 * caller's bad input. */
static void wire_class(airlock_error *e)
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

static unsigned error_status(airlock_service *s, const char *id, const airlock_error *e)
{
	switch (e->cls) {
	case AIRLOCK_ERR_TOOL_VALIDATION:
	case AIRLOCK_ERR_WORKSPACE_ESCAPE:
	case AIRLOCK_ERR_DECODE:
		return MHD_HTTP_BAD_REQUEST;
	case AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED:
		return MHD_HTTP_FORBIDDEN;
	case AIRLOCK_ERR_EXECUTION_REJECTED: {
		/* 404 for an id that is not live, asked of the table rather than
		 * read from the message. */
		char t[AIRLOCK_ID_MAX + 1];
		if (id && id[0] && airlock_exec_tenant_of(s->exec, id, t, sizeof(t), NULL) < 0)
			return MHD_HTTP_NOT_FOUND;
		return MHD_HTTP_CONFLICT;
	}
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

/* The error's JSON with its wire class; NULL only when memory ran out. */
static char *error_json(const airlock_error *e)
{
	airlock_error w = *e;
	wire_class(&w);
	airlock_error jerr = { 0 };
	return airlock_error_to_json(&w, &jerr);
}

static enum MHD_Result respond_error_status(svc_req *q, struct MHD_Connection *c, unsigned status,
                                            const airlock_error *e)
{
	char *json = error_json(e);
	if (!json)
		return MHD_NO;
	return respond(q, c, status, json, strlen(json), "application/json",
	               status == MHD_HTTP_SERVICE_UNAVAILABLE);
}

static enum MHD_Result respond_error(svc_req *q, struct MHD_Connection *c, const airlock_error *e)
{
	airlock_error w = *e;
	wire_class(&w);
	return respond_error_status(q, c, error_status(q->s, q->id, &w), &w);
}

static enum MHD_Result respond_fail(svc_req *q, struct MHD_Connection *c, unsigned status,
                                    airlock_errclass cls, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static enum MHD_Result respond_fail(svc_req *q, struct MHD_Connection *c, unsigned status,
                                    airlock_errclass cls, const char *fmt, ...)
{
	airlock_error e = { .cls = cls };
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e.message, sizeof(e.message), fmt, ap);
	va_end(ap);
	return respond_error_status(q, c, status, &e);
}

static enum MHD_Result respond_unauthorized(svc_req *q, struct MHD_Connection *c)
{
	static const char body[] = "{\"error\": \"Unauthorized\", \"message\": \"\"}";
	char *copy = strdup(body);
	if (!copy)
		return MHD_NO;
	return respond(q, c, MHD_HTTP_UNAUTHORIZED, copy, sizeof(body) - 1, "application/json", false);
}

static char *jdump(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

/* ---- verbs without a sandbox --------------------------------------------- */

static enum MHD_Result do_health(svc_req *q, struct MHD_Connection *c)
{
	airlock_service *s = q->s;
	pthread_mutex_lock(&s->lock);
	bool down = s->shutting_down;
	pthread_mutex_unlock(&s->lock);
	json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:b}", "status", down ? "shutting_down" : "ok",
	                      "mechanism", airlock_exec_name(s->exec), "live",
	                      (json_int_t)airlock_exec_live(s->exec), "max_sandboxes",
	                      (json_int_t)s->cfg.max_sandboxes, "shutting_down", down);
	return respond_str(q, c, MHD_HTTP_OK, jdump(o));
}

static enum MHD_Result do_list(svc_req *q, struct MHD_Connection *c)
{
	airlock_exec_entry *v = NULL;
	size_t n = 0;
	airlock_error err = { 0 };
	if (airlock_exec_list(q->s->exec, &v, &n, &err) < 0)
		return respond_error(q, c, &err);
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < n; i++) {
		char created[32], expires[32];
		util_time_format(v[i].created_at_ms, created);
		util_time_format(v[i].expires_at_ms, expires);
		json_t *e = json_pack("{s:s, s:s?, s:s?, s:I, s:s, s:s, s:b, s:b}", "environment_id",
		                      v[i].environment_id, "tenant_id", v[i].tenant_id, "run_id",
		                      v[i].run_id, "lease_epoch", (json_int_t)v[i].lease_epoch,
		                      "created_at", created, "expires_at", expires, "busy", v[i].busy,
		                      "provisioning", v[i].provisioning);
		if (!e || json_array_append_new(arr, e) < 0) {
			json_decref(arr);
			arr = NULL;
		}
	}
	airlock_exec_list_free(v, n);
	if (!arr)
		return MHD_NO;
	return respond_str(q, c, MHD_HTTP_OK, jdump(json_pack("{s:o}", "sandboxes", arr)));
}

static enum MHD_Result do_provision(svc_req *q, struct MHD_Connection *c)
{
	airlock_error err = { 0 };
	svc_provision p = { 0 };
	if (svc_provision_decode(q->body.data, q->body.len, &p, &err) < 0)
		return respond_error(q, c, &err);
	airlock_environment_spec spec = p.spec;
	const char *want_id = p.has_environment_id ? p.environment_id : NULL;
	airlock_environment_handle h = { 0 };
	enum MHD_Result mr;
	int r = want_id ? airlock_exec_provision_as(q->s->exec, &spec, want_id, &h, &err)
	                : airlock_exec_provision(q->s->exec, &spec, &h, &err);
	airlock_environment_spec_clear(&spec);
	if (r < 0) {
		/* A provision names no live sandbox: a refusal is 409 (or 503). */
		q->id[0] = 0;
		return respond_error(q, c, &err);
	}
	char *hj = airlock_environment_handle_to_json(&h, &err);
	char *body = NULL;
	if (hj && asprintf(&body, "{\"handle\":%s}", hj) < 0)
		body = NULL;
	free(hj);
	if (!body) {
		/* The sandbox exists and its caller cannot be told: it goes. */
		airlock_exec_destroy(q->s->exec, &h, NULL);
		mr = MHD_NO;
	} else {
		mr = respond_str(q, c, MHD_HTTP_CREATED, body);
	}
	airlock_environment_handle_clear(&h);
	return mr;
}

/* ---- execute ------------------------------------------------------------------ */

struct svc_job {
	airlock_service *s;
	svc_job *next; /* in s->jobs while the execute runs */
	airlock_environment_handle handle;
	airlock_execution_command command;
	int64_t budget_ms;
	airlock_cancel *cancel;
	bool stream;
	int fd; /* the client's socket, looked at, never used */
	svc_conn *conn; /* its deadline record, used on its own thread only */
	bool response_deadline;
	pthread_t thread;
	bool thread_started;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int rc;
	airlock_error err;
	airlock_execution_result res;
	/* The streamed events not yet taken by the client. */
	char *q;
	size_t q_off, q_len, q_alloc;
	size_t dropped[2];
	bool broken; /* an event could not be queued (memory) */
	/* Output not yet made an event, per stream (coalescing: one pipe read
	 * is not one event): at most AIRLOCK_SERVICE_EVENT_CHUNK each. */
	unsigned char *pend[2];
	size_t pend_len[2];
	int64_t pend_since_ms; /* monotonic: when the oldest pending byte came; 0: none */
	size_t pend_first;     /* the stream that has pended longest */
	size_t small_events;   /* events made before their chunk was full */
};

static int job_queue(svc_job *j, const char *line, size_t len)
{
	if (j->q_off > 0 && j->q_off == j->q_len)
		j->q_off = j->q_len = 0;
	if (j->q_len + len > j->q_alloc) {
		if (j->q_off > 0) {
			memmove(j->q, j->q + j->q_off, j->q_len - j->q_off);
			j->q_len -= j->q_off;
			j->q_off = 0;
		}
		if (j->q_len + len > j->q_alloc) {
			size_t na = j->q_alloc ? j->q_alloc : 64 * 1024;
			while (na < j->q_len + len)
				na *= 2;
			char *nq = realloc(j->q, na);
			if (!nq)
				return -ENOMEM;
			j->q = nq;
			j->q_alloc = na;
		}
	}
	memcpy(j->q + j->q_len, line, len);
	j->q_len += len;
	return 0;
}

/* Stream k's pending output as one event. Past the buffer's cap (a client
 * that is not reading) the bytes are counted as dropped instead; once a
 * stream has dropped, the rest of it is counted, not sent: the events a
 * client has are then always a prefix of the bytes the result holds. Under
 * j->lock. */
static void job_emit(svc_job *j, size_t k)
{
	size_t n = j->pend_len[k];
	if (n == 0)
		return;
	j->pend_len[k] = 0;
	if (n < AIRLOCK_SERVICE_EVENT_CHUNK)
		j->small_events++;
	if (j->pend_len[k ^ 1] == 0)
		j->pend_since_ms = 0;
	else
		j->pend_first = k ^ 1;
	if (j->dropped[k]) {
		j->dropped[k] += n;
		return;
	}
	_cleanup_free_ char *b64 = util_base64_encode(j->pend[k], n);
	char *line = NULL;
	int w = b64 ? asprintf(&line, "{\"event\":\"output\",\"stream\":\"%s\",\"data\":\"%s\"}\n",
	                       k ? "stderr" : "stdout", b64)
	            : -1;
	if (w < 0 || (j->q_len - j->q_off) + (size_t)w > AIRLOCK_SERVICE_STREAM_BUFFER_MAX ||
	    job_queue(j, line, (size_t)w) < 0)
		j->dropped[k] += n;
	if (w >= 0)
		free(line);
}

/* Every pending byte as events, the longest-pending stream first. */
static void job_emit_all(svc_job *j)
{
	size_t first = j->pend_first;
	job_emit(j, first);
	job_emit(j, first ^ 1);
}

/* Whether pending output is due now, and if not, in how many ms (never
 * more than SVC_POLL_MS). Past the small-event budget, output waits for a
 * full chunk or the command's end. Under j->lock. */
static bool job_flush_due(const svc_job *j, int64_t *ret_wait_ms)
{
	*ret_wait_ms = SVC_POLL_MS;
	if (!j->pend_since_ms || j->small_events >= AIRLOCK_SERVICE_STREAM_SMALL_EVENTS_MAX)
		return false;
	int64_t left = j->pend_since_ms + AIRLOCK_SERVICE_STREAM_FLUSH_MS - util_monotonic_ms();
	if (left <= 0)
		return true;
	if (left < *ret_wait_ms)
		*ret_wait_ms = left;
	return false;
}

/* The command's output as it arrives: appended to its stream's pending
 * bytes, an event made whenever they fill a chunk (the other stream's
 * pending bytes first, so the order between the two is kept to a chunk).
 * The reader makes events of the rest once it has waited
 * AIRLOCK_SERVICE_STREAM_FLUSH_MS (job_read), so a command that writes a
 * byte at a time costs an event per flush, not per write. */
static void job_output(void *arg, airlock_output_stream stream, const void *data, size_t len)
{
	svc_job *j = arg;
	size_t k = stream == AIRLOCK_OUTPUT_STDERR ? 1 : 0;
	pthread_mutex_lock(&j->lock);
	/* The reader is woken when there is an event to take or a flush to
	 * time, not for every write. */
	bool wake = !j->pend_since_ms;
	size_t queued = j->q_len - j->q_off;
	const unsigned char *p = data;
	while (len > 0) {
		if (j->dropped[k]) {
			j->dropped[k] += len;
			break;
		}
		if (!j->pend[k] && !(j->pend[k] = malloc(AIRLOCK_SERVICE_EVENT_CHUNK))) {
			j->dropped[k] += len;
			break;
		}
		size_t n = AIRLOCK_SERVICE_EVENT_CHUNK - j->pend_len[k];
		if (n > len)
			n = len;
		if (!j->pend_since_ms) {
			j->pend_since_ms = util_monotonic_ms();
			j->pend_first = k;
		}
		memcpy(j->pend[k] + j->pend_len[k], p, n);
		j->pend_len[k] += n;
		p += n;
		len -= n;
		if (j->pend_len[k] == AIRLOCK_SERVICE_EVENT_CHUNK) {
			job_emit(j, k ^ 1);
			job_emit(j, k);
		}
	}
	if (wake || j->q_len - j->q_off != queued)
		pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
}

/* The last lines of a streamed execute: what was dropped, then the result
 * or the error. Past the buffer's cap: they are bounded by the output cap
 * the result already holds. */
static void job_finish_stream(svc_job *j)
{
	job_emit_all(j);
	for (size_t k = 0; k < 2; k++) {
		if (!j->dropped[k])
			continue;
		char line[128];
		int w = snprintf(line, sizeof(line), "{\"event\":\"dropped\",\"stream\":\"%s\",\"bytes\":%zu}\n",
		                 k ? "stderr" : "stdout", j->dropped[k]);
		if (job_queue(j, line, (size_t)w) < 0)
			j->broken = true;
	}
	char *inner = NULL, *line = NULL;
	airlock_error jerr = { 0 };
	if (j->rc == 0)
		inner = airlock_execution_result_to_json(&j->res, &jerr);
	else
		inner = error_json(&j->err);
	int w = -1;
	if (inner)
		w = j->rc == 0 ? asprintf(&line, "{\"event\":\"result\",\"result\":%s}\n", inner)
		               : asprintf(&line, "{\"event\":\"error\",\"error\":%s}\n", inner);
	free(inner);
	if (w < 0 || job_queue(j, line, (size_t)w) < 0)
		j->broken = true;
	if (w >= 0)
		free(line);
}

/* Out of the cancel table: from here cancel no longer finds it. */
static void job_unlink(airlock_service *s, svc_job *j)
{
	pthread_mutex_lock(&s->lock);
	for (svc_job **p = &s->jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			break;
		}
	pthread_mutex_unlock(&s->lock);
}

static void *job_main(void *arg)
{
	svc_job *j = arg;
	airlock_service *s = j->s;
	airlock_exec_call call = {
		.tenant_id = j->handle.tenant_id,
		.remaining_budget_ms = j->budget_ms,
		.cancel = j->cancel,
		.on_output = j->stream ? job_output : NULL,
		.output_arg = j,
	};
	airlock_execution_result res = { 0 };
	airlock_error err = { 0 };
	int rc = airlock_exec_execute(s->exec, &call, &j->handle, &j->command, &res, &err);

	job_unlink(s, j);

	pthread_mutex_lock(&j->lock);
	j->rc = rc;
	j->err = err;
	j->res = res;
	if (j->stream)
		job_finish_stream(j);
	j->done = true;
	pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

static void job_free(svc_job *j)
{
	if (!j)
		return;
	if (j->thread_started) {
		airlock_cancel_fire(j->cancel);
		pthread_join(j->thread, NULL);
	}
	airlock_cancel_free(j->cancel);
	airlock_environment_handle_clear(&j->handle);
	airlock_execution_command_clear(&j->command);
	airlock_execution_result_clear(&j->res);
	free(j->q);
	free(j->pend[0]);
	free(j->pend[1]);
	pthread_mutex_destroy(&j->lock);
	pthread_cond_destroy(&j->cond);
	free(j);
}

/* The streamed response's reader: runs on the connection's thread, which
 * may block here (one thread per connection), in slices, looking at the
 * client each time. */
static ssize_t job_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	svc_job *j = cls;
	(void)pos;
	pthread_mutex_lock(&j->lock);
	for (;;) {
		if (j->done && !j->response_deadline) {
			/* The rest is the result, ready: it must be taken within the
			 * response timeout like any other response. (j->lock, then
			 * the service's: nothing takes them the other way round.) */
			j->response_deadline = true;
			conn_deadline(j->s, j->conn, cfg_or(j->s->cfg.request_timeout_ms, 300000));
		}
		int64_t wait_ms;
		if (job_flush_due(j, &wait_ms))
			job_emit_all(j);
		size_t avail = j->q_len - j->q_off;
		if (avail > 0) {
			size_t n = avail < max ? avail : max;
			memcpy(buf, j->q + j->q_off, n);
			j->q_off += n;
			pthread_mutex_unlock(&j->lock);
			return (ssize_t)n;
		}
		if (j->done) {
			bool broken = j->broken;
			pthread_mutex_unlock(&j->lock);
			return broken ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
		}
		timed_wait(&j->cond, &j->lock, wait_ms);
		if (!j->done && j->q_len == j->q_off && peer_gone(j->fd)) {
			/* The client went away: its command is cancelled (the free
			 * callback joins the execute). */
			airlock_cancel_fire(j->cancel);
			pthread_mutex_unlock(&j->lock);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
	}
}

static void job_read_free(void *cls)
{
	job_free(cls);
}

static int conn_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

static enum MHD_Result do_execute(svc_req *q, struct MHD_Connection *c)
{
	airlock_service *s = q->s;
	airlock_error err = { 0 };
	svc_execute x = { 0 };
	if (svc_execute_decode(q->body.data, q->body.len, &x, &err) < 0)
		return respond_error(q, c, &err);
	svc_job *j = calloc(1, sizeof(*j));
	if (!j) {
		airlock_execution_command_clear(&x.command);
		return MHD_NO;
	}
	j->s = s;
	j->fd = conn_fd(c);
	j->conn = q->conn;
	j->stream = x.stream;
	j->budget_ms = x.budget_ms;
	j->command = x.command;
	pthread_mutex_init(&j->lock, NULL);
	cond_init_monotonic(&j->cond);
	if (airlock_cancel_new(&j->cancel, &err) < 0) {
		job_free(j);
		return respond_error(q, c, &err);
	}
	j->handle = q->handle;
	q->handle = (airlock_environment_handle){ 0 };
	q->has_handle = false;
	if (j->stream) {
		/* The status is sent before the command runs: the one refusal
		 * the table can answer now (an id that is not live) still gets
		 * its own; the rest come as the stream's last line. */
		char t[AIRLOCK_ID_MAX + 1];
		if (airlock_exec_tenant_of(s->exec, j->handle.environment_id, t, sizeof(t), &err) < 0) {
			job_free(j);
			return respond_error(q, c, &err);
		}
		char line[160];
		int w = snprintf(line, sizeof(line), "{\"event\":\"started\",\"environment_id\":\"%s\"}\n",
		                 j->handle.environment_id);
		if (job_queue(j, line, (size_t)w) < 0) {
			job_free(j);
			return MHD_NO;
		}
	}

	pthread_mutex_lock(&s->lock);
	j->next = s->jobs;
	s->jobs = j;
	pthread_mutex_unlock(&s->lock);
	int e = pthread_create(&j->thread, NULL, job_main, j);
	if (e != 0) {
		job_unlink(s, j);
		job_free(j);
		return respond_fail(q, c, MHD_HTTP_SERVICE_UNAVAILABLE, AIRLOCK_ERR_EXECUTION_UNAVAILABLE,
		                    "execute: cannot start a thread: %s", strerror(e));
	}
	j->thread_started = true;

	if (j->stream) {
		struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
		                                                              job_read, j, job_read_free);
		if (!resp) {
			job_free(j);
			return MHD_NO;
		}
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
		enum MHD_Result r = MHD_queue_response(c, MHD_HTTP_OK, resp);
		MHD_destroy_response(resp);
		/* No total deadline while the command runs: its own timeouts bound
		 * it, and a client that reads nothing meets the idle timeout. */
		conn_deadline(s, q->conn, 0);
		return r;
	}

	/* Blocking: wait for the result in slices, looking at the client. */
	bool gone = false;
	pthread_mutex_lock(&j->lock);
	while (!j->done) {
		timed_wait(&j->cond, &j->lock, SVC_POLL_MS);
		if (!j->done && !gone && peer_gone(j->fd)) {
			gone = true;
			airlock_cancel_fire(j->cancel);
		}
	}
	pthread_mutex_unlock(&j->lock);
	pthread_join(j->thread, NULL);
	j->thread_started = false;
	enum MHD_Result r;
	if (gone) {
		r = MHD_NO;
	} else if (j->rc < 0) {
		r = respond_error(q, c, &j->err);
	} else {
		char *inner = airlock_execution_result_to_json(&j->res, &err);
		char *body = NULL;
		if (inner && asprintf(&body, "{\"result\":%s}", inner) < 0)
			body = NULL;
		free(inner);
		r = body ? respond_str(q, c, MHD_HTTP_OK, body) : respond_error(q, c, &err);
	}
	job_free(j);
	return r;
}

static bool handles_equal(const airlock_environment_handle *a, const airlock_environment_handle *b)
{
	return strcmp(a->environment_id, b->environment_id) == 0 &&
	       util_streq0(a->tenant_id, b->tenant_id) && util_streq0(a->run_id, b->run_id) &&
	       a->lease_epoch == b->lease_epoch && a->created_at_ms == b->created_at_ms &&
	       a->expires_at_ms == b->expires_at_ms;
}

static enum MHD_Result do_cancel(svc_req *q, struct MHD_Connection *c)
{
	airlock_service *s = q->s;
	airlock_error err = { 0 };
	char tenant[AIRLOCK_ID_MAX + 1];
	if (airlock_exec_tenant_of(s->exec, q->id, tenant, sizeof(tenant), &err) < 0)
		return respond_error(q, c, &err);
	bool mismatch = !util_streq0(tenant, q->handle.tenant_id);
	bool cancelled = false;
	pthread_mutex_lock(&s->lock);
	for (svc_job *j = s->jobs; j && !mismatch; j = j->next) {
		if (strcmp(j->handle.environment_id, q->id) != 0)
			continue;
		/* The running execute's handle passed the port's whole check: the
		 * cancel's must be the same one. */
		if (!handles_equal(&j->handle, &q->handle)) {
			mismatch = true;
			break;
		}
		airlock_cancel_fire(j->cancel);
		cancelled = true;
	}
	pthread_mutex_unlock(&s->lock);
	if (!mismatch && !cancelled) {
		/* No command ran to compare with: the handle is still compared
		 * with the sandbox's, every field, as every other verb does (the
		 * workspace check destroys on a mismatch). Only that answer
		 * counts here; any other refusal (a command that started since)
		 * leaves the answer "nothing was running". */
		airlock_error werr = { 0 };
		airlock_exec_call call = { .tenant_id = q->handle.tenant_id,
			                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
		airlock_workspace *ws = NULL;
		int r = airlock_exec_workspace(s->exec, &call, &q->handle, &ws, &werr);
		airlock_workspace_release(ws);
		if (r < 0 && werr.cls == AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED)
			return respond_error(q, c, &werr);
	}
	if (mismatch) {
		/* The port's own rule for a handle that is not the sandbox's:
		 * destroy it, and say why. Destroy with the wrong tenant does that;
		 * a right tenant with other fields goes through the workspace
		 * check, which compares every field. */
		airlock_error derr = { 0 };
		airlock_exec_call call = { .tenant_id = q->handle.tenant_id,
			                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
		airlock_workspace *ws = NULL;
		int r = util_streq0(tenant, q->handle.tenant_id)
		                ? airlock_exec_workspace(s->exec, &call, &q->handle, &ws, &derr)
		                : airlock_exec_destroy(s->exec, &q->handle, &derr);
		airlock_workspace_release(ws);
		if (r == 0)
			airlock_error_set(&derr, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
			                  "environment %s: the cancel's handle is not the running command's",
			                  q->id);
		return respond_error(q, c, &derr);
	}
	return respond_str(q, c, MHD_HTTP_OK,
	                   strdup(cancelled ? "{\"cancelled\":true}" : "{\"cancelled\":false}"));
}

static enum MHD_Result do_destroy(svc_req *q, struct MHD_Connection *c)
{
	airlock_error err = { 0 };
	if (airlock_exec_destroy(q->s->exec, &q->handle, &err) < 0)
		return respond_error(q, c, &err);
	return respond(q, c, MHD_HTTP_NO_CONTENT, NULL, 0, NULL, false);
}

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

static enum MHD_Result respond_ws_error(svc_req *q, struct MHD_Connection *c, const airlock_error *e)
{
	const char *name = e->cls == AIRLOCK_ERR_SYSTEM ? airlock_errno_wire_name(e->errnum) : NULL;
	if (!name)
		return respond_error(q, c, e);
	airlock_error jerr = { 0 };
	json_t *o = core_json_error_value(e, &jerr);
	if (!o || json_object_set_new(o, "errno", json_string(name)) < 0) {
		json_decref(o);
		return MHD_NO;
	}
	char *body = jdump(o);
	if (!body)
		return MHD_NO;
	return respond(q, c, MHD_HTTP_UNPROCESSABLE_CONTENT, body, strlen(body), "application/json",
	               false);
}

static enum MHD_Result do_workspace(svc_req *q, struct MHD_Connection *c)
{
	airlock_service *s = q->s;
	airlock_error err = { 0 };
	_cleanup_free_ char *path = NULL, *rel = NULL;
	size_t plen = 0;
	int r = svc_query_value(q->query, q->query_len, "path", &path, &plen, &err);
	if (r == 0)
		r = airlock_error_set(&err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "path: missing");
	if (r < 0)
		return respond_error(q, c, &err);
	bool root = plen == 0 || (plen == 1 && path[0] == '.');
	size_t limit = 0;
	if (q->verb == SVC_READ)
		r = query_size(q, "max_bytes", 0, AIRLOCK_SERVICE_READ_MAX, &limit, &err);
	else if (q->verb == SVC_LISTDIR)
		r = query_size(q, "max_entries", 1000, AIRLOCK_SERVICE_LISTDIR_MAX, &limit, &err);
	if (r < 0)
		return respond_error(q, c, &err);

	airlock_exec_call call = { .tenant_id = q->handle.tenant_id,
		                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_workspace *ws = NULL;
	if (airlock_exec_workspace(s->exec, &call, &q->handle, &ws, &err) < 0)
		return respond_error(q, c, &err);

	/* The raw bytes with their length go through the string rules first
	 * (an encoded NUL is refused there, as WorkspaceEscape, never cut);
	 * only a checked relative path reaches the calls that take a C string. */
	if (!(root && (q->verb == SVC_LISTDIR || q->verb == SVC_CONTAIN)))
		r = airlock_workspace_check_string(path, plen, &rel, &err);
	enum MHD_Result mr = MHD_NO;
	if (r < 0) {
		mr = respond_ws_error(q, c, &err);
		goto out;
	}
	switch (q->verb) {
	case SVC_CONTAIN: {
		_cleanup_free_ char *resolved = NULL;
		if (!root && airlock_workspace_resolve(ws, path, plen, &resolved, &err) < 0)
			mr = respond_ws_error(q, c, &err);
		else
			mr = respond(q, c, MHD_HTTP_NO_CONTENT, NULL, 0, NULL, false);
		break;
	}
	case SVC_READ: {
		unsigned char *data = NULL;
		size_t len = 0;
		if (airlock_workspace_read(ws, rel, limit, &data, &len, &err) < 0)
			mr = respond_ws_error(q, c, &err);
		else
			mr = respond(q, c, MHD_HTTP_OK, (char *)(data ? data : (unsigned char *)strdup("")),
			             len, "application/octet-stream", false);
		break;
	}
	case SVC_WRITE:
		if (airlock_workspace_write(ws, rel, q->body.data ? (const void *)q->body.data : "", q->body.len,
		                            &err) < 0)
			mr = respond_ws_error(q, c, &err);
		else
			mr = respond(q, c, MHD_HTTP_NO_CONTENT, NULL, 0, NULL, false);
		break;
	case SVC_LISTDIR: {
		airlock_dir_listing l = { 0 };
		if (airlock_workspace_listdir(ws, root ? "." : rel, limit, &l, &err) < 0) {
			mr = respond_ws_error(q, c, &err);
			break;
		}
		json_t *arr = json_array();
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
		mr = arr ? respond_str(q, c, MHD_HTTP_OK,
		                       jdump(json_pack("{s:o, s:b}", "entries", arr, "truncated", trunc)))
		         : MHD_NO;
		break;
	}
	case SVC_PROVENANCE: {
		airlock_provenance p = AIRLOCK_PROVENANCE_INVALID;
		if (airlock_workspace_provenance(ws, rel, &p, &err) < 0) {
			mr = respond_ws_error(q, c, &err);
			break;
		}
		char name[64];
		mr = respond_str(q, c, MHD_HTTP_OK,
		                 jdump(json_pack("{s:s}", "provenance",
		                                 wire_name(airlock_provenance_name(p), name))));
		break;
	}
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

/* ---- the request's phases ---------------------------------------------------------- */

static bool verb_has_id(svc_verb v)
{
	return v != SVC_HEALTH && v != SVC_LIST && v != SVC_PROVISION && v != SVC_NONE;
}

/* With a client CA configured, the TLS handshake asked for a certificate
 * (libmicrohttpd requests, it does not require): one that chains to the
 * CA is required here, before anything else is looked at. */
static bool client_cert_ok(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (!ci || !ci->tls_session)
		return false;
	gnutls_session_t sess = (gnutls_session_t)ci->tls_session;
	unsigned int n = 0;
	if (!gnutls_certificate_get_peers(sess, &n) || n == 0)
		return false;
	unsigned int status = 0;
	return gnutls_certificate_verify_peers2(sess, &status) == 0 && status == 0;
}

static enum MHD_Result respond_oversize(svc_req *q, struct MHD_Connection *c, size_t cap)
{
	return respond_fail(q, c, MHD_HTTP_CONTENT_TOO_LARGE, AIRLOCK_ERR_TOOL_VALIDATION,
	                    "the body is larger than this request's cap of %zu bytes", cap);
}

static enum MHD_Result request_start(svc_req *q, struct MHD_Connection *c, const char *method)
{
	airlock_service *s = q->s;
	/* Authentication first: nothing about the API (which paths exist)
	 * is told to a caller without the credential. */
	if (s->client_ca && !client_cert_ok(c))
		return respond_unauthorized(q, c);
	const char *auth = NULL;
	size_t auth_len = 0;
	if (MHD_lookup_connection_value_n(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION,
	                                  strlen(MHD_HTTP_HEADER_AUTHORIZATION), &auth,
	                                  &auth_len) != MHD_YES ||
	    !svc_bearer_ok(auth, auth_len, s->credential, s->credential_len))
		return respond_unauthorized(q, c);
	conn_authenticated(s, q->conn);

	int st = svc_route(q->target, q->target_len, method, &q->verb, q->id, &q->query, &q->query_len);
	if (st == 404)
		return respond_fail(q, c, MHD_HTTP_NOT_FOUND, AIRLOCK_ERR_TOOL_VALIDATION,
		                    "no such path (see docs/service-api.md)");
	if (st == 405)
		return respond_fail(q, c, MHD_HTTP_METHOD_NOT_ALLOWED, AIRLOCK_ERR_TOOL_VALIDATION,
		                    "method %.16s is not allowed on this path", method);
	airlock_error err = { 0 };
	if (verb_has_id(q->verb)) {
		const char *hv = NULL;
		size_t hlen = 0;
		if (MHD_lookup_connection_value_n(c, MHD_HEADER_KIND, "Airlock-Handle",
		                                  strlen("Airlock-Handle"), &hv, &hlen) != MHD_YES)
			hv = NULL;
		if (svc_handle_decode(hv, hlen, &q->handle, &err) < 0)
			return respond_error_status(q, c, MHD_HTTP_BAD_REQUEST, &err);
		q->has_handle = true;
		if (strcmp(q->handle.environment_id, q->id) != 0)
			return respond_fail(q, c, MHD_HTTP_BAD_REQUEST, AIRLOCK_ERR_TOOL_VALIDATION,
			                    "Airlock-Handle: its environment_id is not the path's");
	}
	/* Each route's body cap is what the route can need (caps.h says
	 * why each is that number). */
	size_t cap = q->verb == SVC_WRITE       ? s->cfg.max_write_bytes
	             : q->verb == SVC_PROVISION ? AIRLOCK_SERVICE_PROVISION_BODY_MAX
	             : q->verb == SVC_EXECUTE   ? AIRLOCK_SERVICE_EXECUTE_BODY_MAX
	                                        : AIRLOCK_SERVICE_EMPTY_BODY_MAX;
	util_buf_init(&q->body, cap);
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	int64_t n = 0;
	if (cl && util_parse_i64(cl, &n) && n >= 0 && (uint64_t)n > cap) {
		q->drain = (uint64_t)n < AIRLOCK_SERVICE_OVERSIZE_DRAIN_MAX ? (size_t)n
		                                                            : AIRLOCK_SERVICE_OVERSIZE_DRAIN_MAX;
		return respond_oversize(q, c, cap);
	}
	conn_deadline(s, q->conn, cfg_or(s->cfg.request_timeout_ms, 300000));
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls)
{
	(void)cls;
	(void)url; /* the unescaped form is not used: the raw target is (uri_log) */
	(void)version;
	svc_req *q = *req_cls;
	if (!q)
		return MHD_NO;
	if (!q->started) {
		q->started = true;
		const union MHD_ConnectionInfo *ci =
		        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		q->conn = ci ? ci->socket_context : NULL;
		return request_start(q, c, method);
	}
	if (*upload_size) {
		/* libmicrohttpd cannot queue a response while a body is being
		 * read: a body past its cap is discarded as it comes and
		 * answered when it ends, up to the drain bound, past which
		 * the connection is closed. */
		if (!q->oversize && util_buf_append(&q->body, upload, *upload_size) != 0)
			q->oversize = true;
		if (q->oversize) {
			q->drained += *upload_size;
			if (q->drained > q->body.cap + (uint64_t)AIRLOCK_SERVICE_OVERSIZE_DRAIN_MAX)
				return MHD_NO;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	conn_deadline(q->s, q->conn, 0);
	if (q->oversize)
		return respond_oversize(q, c, q->body.cap);
	switch (q->verb) {
	case SVC_HEALTH: return do_health(q, c);
	case SVC_LIST: return do_list(q, c);
	case SVC_PROVISION: return do_provision(q, c);
	case SVC_EXECUTE: return do_execute(q, c);
	case SVC_CANCEL: return do_cancel(q, c);
	case SVC_DESTROY: return do_destroy(q, c);
	case SVC_CONTAIN:
	case SVC_READ:
	case SVC_WRITE:
	case SVC_LISTDIR:
	case SVC_PROVENANCE: return do_workspace(q, c);
	case SVC_NONE:
	default: return MHD_NO;
	}
}

/* The raw request target, before libmicrohttpd unescapes anything: the
 * request's state starts here. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	airlock_service *s = cls;
	(void)c;
	svc_req *q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->s = s;
	q->target_len = uri ? strlen(uri) : 0;
	q->target = strndup(uri ? uri : "", q->target_len);
	if (!q->target) {
		free(q);
		return NULL;
	}
	pthread_mutex_lock(&s->lock);
	s->in_flight++;
	pthread_mutex_unlock(&s->lock);
	return q;
}

/* A 413 answered at its head: libmicrohttpd then closes the connection
 * with the body unread (caps.h, AIRLOCK_SERVICE_OVERSIZE_DRAIN_MAX, says
 * why that loses the answer). By now the answer is sent and our sending
 * side shut; the body is read and dropped until the client's end, at most
 * want bytes and AIRLOCK_SERVICE_OVERSIZE_DRAIN_MS, or the service's
 * shutdown. This connection's own thread waits (one thread per
 * connection), nobody else's. */
static void conn_drain(airlock_service *s, struct MHD_Connection *c, size_t want)
{
	int fd = conn_fd(c);
	if (fd < 0)
		return;
	int64_t end = util_monotonic_ms() + AIRLOCK_SERVICE_OVERSIZE_DRAIN_MS;
	char buf[16384];
	size_t got = 0;
	while (got < want) {
		int64_t left = end - util_monotonic_ms();
		if (left <= 0)
			return;
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
			               { .fd = s->stop_efd, .events = POLLIN } };
		int r = poll(p, 2, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || (p[1].revents & POLLIN))
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
	airlock_service *s = cls;
	(void)toe;
	svc_req *q = *req_cls;
	*req_cls = NULL;
	if (q && q->drain)
		conn_drain(s, c, q->drain);
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	/* Between requests a keep-alive connection waits for the next header
	 * block, within the header timeout. */
	conn_deadline(s, ci ? ci->socket_context : NULL, cfg_or(s->cfg.header_timeout_ms, 10000));
	if (!q)
		return;
	pthread_mutex_lock(&s->lock);
	s->in_flight--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	airlock_environment_handle_clear(&q->handle);
	util_buf_clear(&q->body);
	free(q->target);
	free(q);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
	airlock_service *s = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		svc_conn *k = calloc(1, sizeof(*k));
		if (!k) {
			/* Without a record it would count against no cap and
			 * have no deadline: it is refused. */
			int fd = conn_fd(c);
			if (fd >= 0)
				shutdown(fd, SHUT_RDWR);
			return;
		}
		k->fd = conn_fd(c);
		k->accepted_ms = util_monotonic_ms();
		/* The TLS handshake and the first header block, with the
		 * credential, within the auth timeout; the header timeout
		 * only if that is shorter. */
		int64_t auth_ms = cfg_or(s->cfg.auth_timeout_ms, 2000);
		int64_t header_ms = cfg_or(s->cfg.header_timeout_ms, 10000);
		k->auth_deadline_ms = k->accepted_ms + (auth_ms < header_ms ? auth_ms : header_ms);
		k->deadline_ms = k->auth_deadline_ms;
		const union MHD_ConnectionInfo *ai =
		        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		k->client = client_of(ai ? ai->client_addr : NULL);
		pthread_mutex_lock(&s->lock);
		k->next = s->conns;
		if (s->conns)
			s->conns->prev = k;
		s->conns = k;
		s->pending++;
		s->live++;
		if (!conn_admit_address(s, k))
			conn_admit(s);
		/* Past max_connections (authenticated ones fill the rest):
		 * the newcomer goes, as at libmicrohttpd's own limit. */
		if (!k->cut && s->live > s->live_max)
			conn_cut_locked(s, k);
		pthread_mutex_unlock(&s->lock);
		*socket_context = k;
		return;
	}
	svc_conn *k = *socket_context;
	*socket_context = NULL;
	if (!k)
		return;
	pthread_mutex_lock(&s->lock);
	if (!k->cut) {
		s->live--;
		if (!k->authed) {
			s->pending--;
			rate_note(s, &k->client, util_monotonic_ms());
		}
	}
	if (k->prev)
		k->prev->next = k->next;
	else
		s->conns = k->next;
	if (k->next)
		k->next->prev = k->prev;
	pthread_mutex_unlock(&s->lock);
	free(k);
}

/* ---- the timers ---------------------------------------------------------------- */

static bool stop_wait(airlock_service *s, int64_t ms)
{
	struct pollfd p = { .fd = s->stop_efd, .events = POLLIN };
	int r = poll(&p, 1, (int)ms);
	return r > 0;
}

static void *watchdog_main(void *arg)
{
	airlock_service *s = arg;
	while (!stop_wait(s, SVC_POLL_MS)) {
		int64_t now = util_monotonic_ms();
		pthread_mutex_lock(&s->lock);
		for (svc_conn *k = s->conns; k; k = k->next)
			if (!k->cut && k->deadline_ms && now > k->deadline_ms && k->fd >= 0)
				conn_cut_locked(s, k);
		pthread_mutex_unlock(&s->lock);
	}
	return NULL;
}

static void *expire_main(void *arg)
{
	airlock_service *s = arg;
	int64_t every = cfg_or(s->cfg.expire_interval_ms, 1000);
	while (!stop_wait(s, every))
		airlock_exec_expire(s->exec, util_now_ms());
	return NULL;
}

/* ---- listening ------------------------------------------------------------------- */

static int read_pem(const char *what, const char *path, char **ret, airlock_error *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno, "%s: cannot open it", what);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: not a regular file", what);
	size_t len = 0;
	int r = util_read_capped(fd, AIRLOCK_SERVICE_PEM_MAX, ret, &len);
	if (r < 0)
		return r == -EFBIG ? airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: larger than 1 MiB", what)
		                   : airlock_error_set(err, AIRLOCK_ERR_CONFIG, -r, "%s", what);
	return 0;
}

static void service_release(airlock_service *s)
{
	svc_listener_close(&s->lis);
	if (s->stop_efd >= 0)
		close(s->stop_efd);
	if (s->credential) {
		OPENSSL_cleanse(s->credential, s->credential_len);
		free(s->credential);
	}
	if (s->pem_key) {
		OPENSSL_cleanse(s->pem_key, strlen(s->pem_key));
		free(s->pem_key);
	}
	free(s->pem_cert);
	free(s->pem_ca);
	free(s->rates);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

static void stop_threads(airlock_service *s)
{
	uint64_t one = 1;
	if (s->stop_efd >= 0 && write(s->stop_efd, &one, sizeof(one)) < 0) {
		/* an eventfd write fails only on overflow, which one write cannot cause */
	}
	if (s->watchdog_started)
		pthread_join(s->watchdog_thread, NULL);
	if (s->expire_started)
		pthread_join(s->expire_thread, NULL);
	s->watchdog_started = s->expire_started = false;
}

int airlock_service_new(const airlock_service_config *cfg, airlock_exec *exec,
                        airlock_service **ret, airlock_error *err)
{
	if (!cfg || !exec || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "service: missing argument");
	if (!cfg->listen || !cfg->listen[0])
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "service: no listen address");
	if (!cfg->credential || cfg->credential_len == 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service: no credential (every request must carry one)");
	airlock_service *s = calloc(1, sizeof(*s));
	if (!s)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "service");
	s->cfg = *cfg;
	s->cfg.listen = s->cfg.tls_cert_file = s->cfg.tls_key_file = s->cfg.tls_client_ca_file = NULL;
	s->cfg.credential = NULL;
	if (!s->cfg.max_write_bytes)
		s->cfg.max_write_bytes = AIRLOCK_SERVICE_WRITE_MAX_DEFAULT;
	s->exec = exec;
	s->lis.fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	cond_init_monotonic(&s->cond);
	s->stop_efd = eventfd(0, EFD_CLOEXEC);
	s->credential = malloc(cfg->credential_len);
	int r;
	if (s->stop_efd < 0 || !s->credential) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno ? errno : ENOMEM, "service");
		goto fail;
	}
	memcpy(s->credential, cfg->credential, cfg->credential_len);
	s->credential_len = cfg->credential_len;

	bool is_unix = strncmp(cfg->listen, "unix:", 5) == 0;
	if (is_unix) {
		r = svc_listen(cfg->listen, cfg->socket_mode, cfg->socket_gid, &s->lis, err);
	} else {
		/* TCP carries the credential: never in the clear. */
		if (!cfg->tls_cert_file || !cfg->tls_key_file) {
			r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                      "listen %s: TCP needs TLS: set the certificate and key files",
			                      cfg->listen);
			goto fail;
		}
		s->tls = true;
		if ((r = read_pem("TLS certificate", cfg->tls_cert_file, &s->pem_cert, err)) < 0 ||
		    (r = read_pem("TLS key", cfg->tls_key_file, &s->pem_key, err)) < 0 ||
		    (cfg->tls_client_ca_file &&
		     (r = read_pem("TLS client CA", cfg->tls_client_ca_file, &s->pem_ca, err)) < 0))
			goto fail;
		s->client_ca = s->pem_ca != NULL;
		r = svc_listen(cfg->listen, 0, -1, &s->lis, err);
	}
	if (r < 0)
		goto fail;

	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	                 MHD_USE_POLL | MHD_USE_ITC;
	if (s->tls)
		flags |= MHD_USE_TLS;
	int64_t idle_ms = cfg_or(cfg->connection_timeout_ms, 30000);
	unsigned idle_s = (unsigned)((idle_ms + 999) / 1000);
	struct MHD_OptionItem opts[16];
	size_t n = 0;
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_LISTEN_SOCKET, s->lis.fd, NULL };
	unsigned max_conn = cfg->max_connections ? cfg->max_connections : 256;
	/* A quarter of the slots, at least one, is never held by connections
	 * that have not authenticated (conn_admit). */
	s->pending_max = max_conn - (max_conn / 4 ? max_conn / 4 : 1);
	s->pending_grace_ms = cfg_or(cfg->auth_timeout_ms, 2000) / 4;
	/* max_connections is counted here (s->live, on_connection), where a
	 * connection the service cut stops counting at once; libmicrohttpd
	 * counts it until its thread has ended, which under a flood of
	 * connections cut as they come kept every slot taken by the dying
	 * and refused the worker at accept. Its limit is twice ours: the
	 * second half holds only threads that are ending (a cut connection
	 * reads its end at once), so threads stay bounded. */
	s->live_max = max_conn;
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT,
		                             max_conn > UINT_MAX / 2 ? UINT_MAX : 2 * max_conn, NULL };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, idle_s, NULL };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT,
		                             AIRLOCK_SERVICE_HEADER_MAX, NULL };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, s };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, s };
	if (s->tls) {
		/* The per-address cap is conn_admit_address's, not
		 * libmicrohttpd's, which refuses at accept whoever comes. */
		s->per_address_max = cfg->max_connections_per_ip ? cfg->max_connections_per_ip : 64;
		/* At most one party per slot is worth a rate: a party with
		 * no pending connection is never compared. */
		s->rates = calloc(max_conn, sizeof(*s->rates));
		if (!s->rates) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "service: connection table");
			goto fail;
		}
		s->rates_cap = max_conn;
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, s->pem_cert };
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, s->pem_key };
		if (s->pem_ca)
			opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_TRUST, 0, s->pem_ca };
	}
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	/* The option callbacks are passed through MHD's varargs as pointers;
	 * the array form carries them as intptr_t. */
	s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_ARRAY, opts,
	                             MHD_OPTION_END);
	if (!s->daemon) {
		r = airlock_error_set(err, s->tls ? AIRLOCK_ERR_CONFIG : AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "listen %s: the HTTP server did not start%s", s->lis.address,
		                      s->tls ? " (is the TLS certificate or key unreadable as PEM?)" : "");
		goto fail;
	}
	/* The daemon loaded the key into its TLS credentials at start; the
	 * PEM text is not needed again and does not stay in memory. */
	if (s->pem_key) {
		OPENSSL_cleanse(s->pem_key, strlen(s->pem_key));
		free(s->pem_key);
		s->pem_key = NULL;
	}
	int e = pthread_create(&s->watchdog_thread, NULL, watchdog_main, s);
	if (e == 0) {
		s->watchdog_started = true;
		e = pthread_create(&s->expire_thread, NULL, expire_main, s);
		s->expire_started = e == 0;
	}
	if (e != 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "service: threads");
		goto fail;
	}
	*ret = s;
	return 0;
fail:
	stop_threads(s);
	if (s->daemon) {
		MHD_stop_daemon(s->daemon);
		s->lis.fd = -1; /* the daemon closed it */
	}
	service_release(s);
	return r;
}

void airlock_service_shutdown(airlock_service *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->shutting_down = true;
	pthread_mutex_unlock(&s->lock);
	airlock_exec_shutdown(s->exec);
}

const char *airlock_service_address(const airlock_service *s)
{
	return s ? s->lis.address : NULL;
}

void airlock_service_free(airlock_service *s)
{
	if (!s)
		return;
	/* Whatever still runs ends now (SERVICE_SHUTDOWN), so the wait below
	 * is for responses being written, not for commands. */
	airlock_service_shutdown(s);
	MHD_socket lfd = MHD_quiesce_daemon(s->daemon);
	if (lfd != MHD_INVALID_SOCKET)
		s->lis.fd = lfd; /* ours again: closed at release */
	else
		s->lis.fd = -1;
	int64_t until = util_monotonic_ms() + cfg_or(s->cfg.drain_timeout_ms, 10000);
	pthread_mutex_lock(&s->lock);
	while (s->in_flight > 0 && util_monotonic_ms() < until)
		timed_wait(&s->cond, &s->lock, SVC_POLL_MS);
	pthread_mutex_unlock(&s->lock);
	MHD_stop_daemon(s->daemon);
	stop_threads(s);
	service_release(s);
}
