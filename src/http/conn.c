/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server core's connection records (guarded mode): the caps, the
 * admission of a new connection, the deadlines and the watchdog that
 * enforces them.
 *
 *   - at most max_connections connections not cut exist (h->live); the
 *     next one is closed at once; on TCP at most max_connections_per_ip
 *     from one party (an address, an IPv6 /64: http_client), past which
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
 *     fit in header_max (the connection's memory): a client sending it a
 *     byte at a time is cut by the watchdog below, which libmicrohttpd's
 *     idle timeout alone would not do;
 *   - a body must arrive within request_timeout_ms and fit its cap, and a
 *     response must be taken within request_timeout_ms; a client that
 *     reads nothing for connection_timeout_ms is closed (libmicrohttpd's
 *     idle timeout).
 * The watchdog cuts a connection with shutdown(2) on its socket, which
 * libmicrohttpd's thread then sees as the peer's end: the descriptor stays
 * libmicrohttpd's, so there is no race with its close (the record is
 * dropped at the close notification, which comes before the close).
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "http/http_internal.h"
#include "util/util.h"

void http_conn_deadline(http_conn *c, int64_t in_ms)
{
	if (!c)
		return;
	http_server *h = c->h;
	pthread_mutex_lock(&h->lock);
	c->deadline_ms = in_ms > 0 ? util_monotonic_ms() + in_ms : 0;
	/* A connection without the credential goes at its auth deadline,
	 * whatever phase it is in (a 401 being sent, a keep-alive wait). */
	if (!c->authed && (c->deadline_ms == 0 || c->deadline_ms > c->auth_deadline_ms))
		c->deadline_ms = c->auth_deadline_ms;
	pthread_mutex_unlock(&h->lock);
}

static void rate_note(http_server *h, const http_client *c, int64_t now);

/* End a connection (h->lock held): shutdown(2) on its socket, which its
 * libmicrohttpd thread then reads as the peer's end. */
static void conn_cut_locked(http_server *h, http_conn *k)
{
	if (k->cut)
		return;
	if (k->fd >= 0)
		shutdown(k->fd, SHUT_RDWR);
	k->cut = true;
	h->live--;
	if (!k->authed) {
		h->pending--;
		rate_note(h, &k->client, util_monotonic_ms());
	}
}

/* The party of a client address (http_client). */
static http_client client_of(const struct sockaddr *sa)
{
	http_client c = { 0 };
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

static int client_cmp(const http_client *x, const http_client *y)
{
	if (x->family != y->family)
		return x->family < y->family ? -1 : 1;
	return memcmp(x->bytes, y->bytes, sizeof(x->bytes));
}

/* Decay r's count to now (h->lock held): halve per whole half-life, then
 * 1 - x/2 for the fraction x left (within 6% of 2^-x; no floating point). */
static void rate_decay(http_rate *r, int64_t now)
{
	int64_t dt = now - r->at_ms;
	if (dt >= (int64_t)HTTP_RATE_HALF_MS * 32) {
		r->score = 0;
	} else if (dt > 0) {
		uint64_t v = r->score >> (dt / HTTP_RATE_HALF_MS);
		v -= v * (uint64_t)(dt % HTTP_RATE_HALF_MS) / (2 * HTTP_RATE_HALF_MS);
		r->score = (uint32_t)v;
	}
	if (dt > 0)
		r->at_ms = now;
}

/* The party's rate entry decayed to now (h->lock held), or NULL. */
static http_rate *rate_find(http_server *h, const http_client *c, int64_t now)
{
	for (size_t i = 0; i < h->n_rates; i++) {
		http_rate *r = &h->rates[i];
		if (client_cmp(&r->client, c) == 0) {
			rate_decay(r, now);
			return r;
		}
	}
	return NULL;
}

/* The party's recent unauthenticated ends, in HTTP_RATE_ONE units (h->lock held). */
static uint32_t rate_of(http_server *h, const http_client *c, int64_t now)
{
	http_rate *r = rate_find(h, c, now);
	return r ? r->score : 0;
}

/* A connection of c's ended without the credential (h->lock held). The table is bounded:
 * a party not in it takes the place of the one with the lowest rate,
 * which then counts as new (rate 0) if it comes back. */
static void rate_note(http_server *h, const http_client *c, int64_t now)
{
	if (!h->rates_cap || c->family == AF_UNSPEC)
		return;
	http_rate *r = rate_find(h, c, now);
	if (!r) {
		if (h->n_rates < h->rates_cap) {
			r = &h->rates[h->n_rates++];
		} else {
			r = &h->rates[0];
			for (size_t i = 0; i < h->n_rates; i++) {
				rate_decay(&h->rates[i], now);
				if (h->rates[i].score < r->score)
					r = &h->rates[i];
			}
		}
		*r = (http_rate){ .client = *c, .score = 0, .at_ms = now };
	}
	r->score = r->score > UINT32_MAX - HTTP_RATE_ONE ? UINT32_MAX : r->score + HTTP_RATE_ONE;
}

/* A new connection k (h->lock held) from a party that already holds
 * per_address_max connections: the oldest of that party's connections
 * that has not authenticated goes, k itself when every other one has. So
 * the cap keeps one party from taking every slot, and still cannot be
 * filled by connections without the credential against a client with it
 * at the same address (a worker behind the same NAT or host as a flood):
 * an authenticated connection is never the one cut, and a new one always
 * gets in past a pending one. libmicrohttpd's own per-address limit
 * refused the new connection before anyone could tell whose it was.
 * Returns whether k was cut. */
static bool conn_admit_address(http_server *h, http_conn *k)
{
	if (!h->per_address_max || k->client.family == AF_UNSPEC)
		return false;
	size_t held = 0;
	http_conn *victim = NULL;
	for (http_conn *o = h->conns; o; o = o->next) {
		if (o->cut || client_cmp(&o->client, &k->client) != 0)
			continue;
		held++;
		if (!o->authed && (!victim || o->accepted_ms < victim->accepted_ms ||
		                   (o->accepted_ms == victim->accepted_ms && victim == k)))
			victim = o;
	}
	if (held <= h->per_address_max || !victim)
		return false;
	conn_cut_locked(h, victim);
	return victim == k;
}

/* One party's pending connections, for conn_admit. */
typedef struct {
	http_conn *oldest;
	size_t held;
	uint32_t rate;
	bool settled; /* its oldest is past the grace of conn_admit */
} http_party;

/* Whether party a is evicted before party b: the one holding more
 * pending connections; between as many, one whose oldest connection has
 * had its grace (then the older); between parties whose oldest are all
 * still in their grace, the one that lost more connections
 * unauthenticated lately; then the one whose oldest is older. */
static bool party_first(const http_party *a, const http_party *b)
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
	const http_conn *a = *(const http_conn *const *)pa, *b = *(const http_conn *const *)pb;
	int c = client_cmp(&a->client, &b->client);
	if (c)
		return c;
	return a->accepted_ms < b->accepted_ms ? -1 : a->accepted_ms > b->accepted_ms;
}

/* A new connection is pending (h->lock held). Past pending_max pending
 * connections, one is evicted: of the party (http_client) first in
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
static void conn_admit(http_server *h)
{
	if (h->pending <= h->pending_max)
		return;
	http_conn **v = calloc(h->pending, sizeof(*v));
	size_t n = 0;
	http_conn *victim = NULL;
	for (http_conn *k = h->conns; k; k = k->next) {
		if (k->authed || k->cut)
			continue;
		if (v && n < h->pending)
			v[n++] = k;
		if (!victim || k->accepted_ms < victim->accepted_ms)
			victim = k;
	}
	if (v && n > 0) {
		qsort(v, n, sizeof(*v), pending_order);
		int64_t now = util_monotonic_ms();
		http_party best = { 0 };
		for (size_t i = 0, j; i < n; i = j) {
			for (j = i + 1; j < n && client_cmp(&v[i]->client, &v[j]->client) == 0; j++)
				;
			/* v[i] is the party's oldest. */
			http_party p = { .oldest = v[i], .held = j - i, .rate = rate_of(h, &v[i]->client, now),
				        .settled = now - v[i]->accepted_ms >= h->pending_grace_ms };
			if (!best.oldest || party_first(&p, &best))
				best = p;
		}
		victim = best.oldest;
	}
	free(v);
	if (victim)
		conn_cut_locked(h, victim);
}

/* The connection's request carried the credential. */
void http_conn_authenticated(http_conn *k)
{
	if (!k)
		return;
	http_server *h = k->h;
	pthread_mutex_lock(&h->lock);
	if (!k->authed) {
		k->authed = true;
		if (!k->cut)
			h->pending--;
	}
	pthread_mutex_unlock(&h->lock);
}

int http_conn_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

void http_conn_started(http_server *h, struct MHD_Connection *c, void **socket_context)
{
	http_conn *k = calloc(1, sizeof(*k));
	if (!k) {
		/* Without a record it would count against no cap and have no
		 * deadline: it is refused. */
		int fd = http_conn_fd(c);
		if (fd >= 0)
			shutdown(fd, SHUT_RDWR);
		return;
	}
	k->h = h;
	k->fd = http_conn_fd(c);
	k->accepted_ms = util_monotonic_ms();
	/* The TLS handshake and the first header block, with the credential,
	 * within the auth timeout; the header timeout only if that is
	 * shorter. */
	k->auth_deadline_ms = k->accepted_ms + (h->auth_ms < h->header_ms ? h->auth_ms : h->header_ms);
	k->deadline_ms = k->auth_deadline_ms;
	const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	k->client = client_of(ai ? ai->client_addr : NULL);
	pthread_mutex_lock(&h->lock);
	k->next = h->conns;
	if (h->conns)
		h->conns->prev = k;
	h->conns = k;
	h->pending++;
	h->live++;
	if (!conn_admit_address(h, k))
		conn_admit(h);
	/* Past max_connections (authenticated ones fill the rest): the
	 * newcomer goes, as at libmicrohttpd's own limit. */
	if (!k->cut && h->live > h->live_max)
		conn_cut_locked(h, k);
	pthread_mutex_unlock(&h->lock);
	*socket_context = k;
}

void http_conn_ended(http_server *h, http_conn *k)
{
	pthread_mutex_lock(&h->lock);
	if (!k->cut) {
		h->live--;
		if (!k->authed) {
			h->pending--;
			rate_note(h, &k->client, util_monotonic_ms());
		}
	}
	if (k->prev)
		k->prev->next = k->next;
	else
		h->conns = k->next;
	if (k->next)
		k->next->prev = k->prev;
	pthread_mutex_unlock(&h->lock);
	free(k);
}

void http_conn_respond_by(http_conn *k)
{
	if (k)
		http_conn_deadline(k, k->h->request_ms);
}

void *http_watchdog_main(void *arg)
{
	http_server *h = arg;
	struct pollfd p = { .fd = h->stop_efd, .events = POLLIN };
	while (poll(&p, 1, HTTP_POLL_MS) <= 0) {
		int64_t now = util_monotonic_ms();
		pthread_mutex_lock(&h->lock);
		for (http_conn *k = h->conns; k; k = k->next)
			if (!k->cut && k->deadline_ms && now > k->deadline_ms && k->fd >= 0)
				conn_cut_locked(h, k);
		pthread_mutex_unlock(&h->lock);
	}
	return NULL;
}

/* The client closed its end, or the watchdog or the daemon cut the
 * connection: whatever it waits for has nobody to go to. */
bool http_peer_gone(int fd)
{
	if (fd < 0)
		return false;
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	int r = poll(&p, 1, 0);
	return r > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

void http_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *lock, int64_t ms)
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

void http_cond_init_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(c, &a);
	pthread_condattr_destroy(&a);
}
