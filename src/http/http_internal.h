/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_HTTP_INTERNAL_H
#define AIRLOCK_HTTP_INTERNAL_H

/*
 * The server core's own state, shared by its files: the daemon
 * (daemon.c), the connection records and their admission (conn.c), the
 * answers (respond.c). Nothing outside src/http/ includes it.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "http/http.h"
#include "util/util.h"

/* How often the watchdog looks at the deadlines: the slack on every one. */
#define HTTP_POLL_MS 100

/* The party a connection counts against: an IPv4 address, or an IPv6
 * address's /64 (one host or one site is normally given a whole /64, so
 * counting by the full address would let one attacker be 2^64 parties);
 * an IPv4-mapped IPv6 address is its IPv4 address. Family 0: a Unix
 * socket's client, of which there is one party. */
typedef struct {
	sa_family_t family;
	unsigned char bytes[8];
} http_client;

/* How many of a party's connections ended lately without the credential
 * (cut at a deadline or evicted, or closed by the client before a request
 * carried it; http_rate_note): a count that halves every
 * HTTP_RATE_HALF_MS, in 1/HTTP_RATE_ONE units. A worker's connections
 * authenticate and count nothing; a flood's all count, and the faster it
 * reconnects the more. */
#define HTTP_RATE_HALF_MS 1000
#define HTTP_RATE_ONE 1024u
typedef struct {
	http_client client;
	uint32_t score;
	int64_t at_ms; /* when score was last decayed */
} http_rate;

struct http_conn {
	http_server *h;
	struct http_conn *prev, *next;
	int fd;
	int64_t deadline_ms; /* monotonic; 0: none */
	bool cut;
	/* Until a request on it carried the credential: it counts in
	 * h->pending, and no deadline of it is later than auth_deadline_ms. */
	bool authed;
	int64_t accepted_ms, auth_deadline_ms;
	http_client client; /* who it counts against; family 0 on a Unix socket */
};

struct http_server {
	http_routes routes;
	void *ctx;
	char *name, *address;
	unsigned char *credential; /* NULL: no authentication */
	size_t credential_len;
	bool tls, client_ca, simple;
	int64_t auth_ms, header_ms, request_ms;
	uint64_t min_rate; /* the low-speed rule's bytes a second (http.h) */
	uint64_t drain_max;
	int64_t drain_ms;
	struct MHD_Daemon *daemon;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	http_conn *conns;
	size_t pending;     /* connections not cut and not yet authenticated */
	size_t pending_max; /* http_conn_admit */
	int64_t pending_grace_ms; /* http_conn_admit: a quarter of the auth timeout */
	/* Connections not cut, and their cap (max_connections): a cut one
	 * no longer counts, though its thread may still be ending. */
	size_t live, live_max;
	size_t per_address_max; /* http_conn_admit_address; 0 on a Unix socket */
	/* The parties whose connections ended unauthenticated lately (TCP),
	 * at most rates_cap of them: when full, the one with the lowest
	 * count makes room (it is the one whose count matters least). */
	http_rate *rates;
	size_t n_rates, rates_cap;
	size_t in_flight; /* requests between their start and completion */
	int stop_efd;
	pthread_t watchdog_thread;
	bool watchdog_started;
};

struct http_request {
	http_server *h;
	struct MHD_Connection *c;
	http_conn *conn;
	char *target; /* the raw request target, never unescaped */
	size_t target_len;
	const char *url; /* libmicrohttpd's unescaped path, for the request's life */
	bool started, responded;
	bool http11; /* the request's version: a trailer needs a chunked body */
	void *state;
	size_t body_cap;
	util_buf body; /* capped at the route's cap */
	/* A chunked body past the cap: its bytes are discarded, counted, and
	 * the request answered with 413 when it has been read (or closed past
	 * drain_max). */
	bool oversize;
	uint64_t drained;
	/* Answered 413 at its head (Content-Length past the cap): how much of
	 * the body to read and drop after the answer (drain_body). */
	size_t drain;
	/* A streamed body (http_request_set_body_sink): the bytes received,
	 * when the body started (the low-speed rule), whether the sink
	 * refused the rest, and whether its end is settled (the body ended
	 * whole, or abort ran) so abort runs at most once. */
	bool has_sink, sink_failed, sink_settled;
	http_body_sink sink;
	uint64_t sink_cap, received;
	int64_t body_started_ms;
};

/* The low-speed rule's time for bytes (http.h): a second per min_rate
 * bytes, in ms, bounded far from overflow. */
static inline int64_t http_earned_ms(const http_server *h, uint64_t bytes)
{
	uint64_t ms = bytes / h->min_rate * 1000 + bytes % h->min_rate * 1000 / h->min_rate;
	return ms > (uint64_t)INT64_MAX / 4 ? INT64_MAX / 4 : (int64_t)ms;
}

/* conn.c: the records (h->lock held where it says so). */
void http_conn_deadline(http_conn *k, int64_t in_ms);
void http_conn_started(http_server *h, struct MHD_Connection *c, void **socket_context);
void http_conn_ended(http_server *h, http_conn *k);
void http_conn_authenticated(http_conn *k);
void *http_watchdog_main(void *arg);
int http_conn_fd(struct MHD_Connection *c);

/* auth.c */
bool http_authenticate(http_request *r);

/* respond.c */
http_result http_respond_unauthorized(http_request *r);

#endif
