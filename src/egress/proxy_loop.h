/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EGRESS_PROXY_LOOP_H
#define AIRLOCK_EGRESS_PROXY_LOOP_H

/*
 * The egress proxy process's loop (include/airlock/proxy.h has the
 * contract): the state its files share and the calls between them.
 *
 * One libevent loop owns every listener and connection. Per connection:
 *
 *   READING   the CONNECT request is read into a buffer of its own (the
 *             8 KiB cap) and fed to the byte-by-byte parser, which looks at
 *             each byte once: a client that trickles its request one byte
 *             per segment costs one read and one parser step per segment,
 *             never a parse of everything so far (which made one sandbox's
 *             trickle every sandbox's delay), and a head still incomplete
 *             after a few reads is read at most every READ_PAUSE_MS, so a
 *             trickler's segments coalesce instead of each being a wakeup
 *             of the shared loop. Bytes the client sent after
 *             the request are its first tunnel bytes: they go into the
 *             upstream pipe first, before anything more is read;
 *   CHECKING  the one evaluation function in its two halves, in the loop:
 *             the name and the policy at once; the resolution as a lookup
 *             whose sockets and timer the loop watches (proxy_resolve.c: a
 *             c-ares channel of its own, never a thread or a blocking wait);
 *             the addresses checked against the denylist and this host's
 *             own addresses (proxy_own.c keeps the kernel's answers until
 *             an interface or route changes); then, when allowed, the one
 *             dial to the checked address, a non-blocking connect the loop
 *             waits for under the connect timeout;
 *   RELAYING  splice(2) moves bytes socket -> pipe -> socket each way
 *             without copying them through this process; EOF on one side
 *             becomes shutdown(SHUT_WR) on the other once its pipe is empty,
 *             so half-close is carried both ways.
 *
 * The files: the log (proxy_log.c), a connection from its request to its
 * relay (proxy_conn.c), the check (proxy_check.c, with proxy_resolve.c and
 * proxy_own.c), the listeners
 * and their accept rate (proxy_listen.c), the control channel's server side
 * (proxy_ctl_server.c), the process itself (proxy_process.c).
 */

#include <event2/event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "airlock/egress.h"
#include "airlock/proxy.h"

typedef struct listener listener;
typedef struct conn conn;

/* The log writer: lines queue here and one thread writes them, so a log
 * that stops reading (a full pipe, a slow disk) never stops the loop. */
typedef struct log_line_q {
	struct log_line_q *next;
	size_t len;
	char text[];
} log_line_q;

typedef struct log_queue {
	pthread_mutex_t lock;
	pthread_cond_t more;
	log_line_q *head, *tail;
	unsigned n, max;
	uint64_t dropped; /* since the last line that said so */
	bool closing;
	int fd;
	pthread_t writer;
	bool started;
} log_queue;

/* The own-address answers (proxy_own.c): the kernel's, kept until an
 * rtnetlink message says something they depend on changed. */
#define OWN_CACHE_MAX 64
typedef struct own_cache {
	int nl; /* the rtnetlink socket; -1: nothing is cached */
	struct event *ev;
	struct {
		airlock_addr a;
		int own;
	} e[OWN_CACHE_MAX];
	unsigned n, next;
} own_cache;

/* One name's resolution in the loop (proxy_resolve.c). */
typedef struct proxy_lookup proxy_lookup;

typedef struct proxy {
	airlock_proxy_config cfg;
	int ctl;
	int log_fd;
	log_queue log;
	struct event_base *base;
	struct event *ctl_ev;
	own_cache own;
	proxy_lookup *spare; /* a lookup's channel made ahead of its CONNECT */
	listener *listeners;
	unsigned n_conns;   /* accepted and not yet closed */
	unsigned n_pending; /* checks resolving or dialling */
	bool stopping;
} proxy;

struct listener {
	proxy *px;
	listener *next;
	char *run, *tenant, *env;
	airlock_egress_transport transport;
	airlock_egress_policy policy; /* this sandbox's copy, fixed at attach */
	int fd;
	struct event *ev;
	conn *conns;
	unsigned refs; /* the list's + one per connection */
	unsigned n_conns, n_pending; /* this sandbox's share of the caps */
	int64_t rate_second;         /* the accept-rate window (monotonic seconds) */
	unsigned rate_count;         /* accepted in it */
	/* Past the rate, accepting stops until the next window: connections
	 * wait in the kernel's queue, none is closed. rate_ev ends the pause
	 * and writes the summary line (at most a second after its first
	 * count, whether or not another connection comes). */
	struct event *rate_ev;
	bool paused;
	bool draining;          /* resumed: what is accepted until the queue is empty waited */
	uint64_t rate_delayed;  /* accepted after waiting, not yet in a summary line */
};

typedef struct dir {
	conn *c;
	int from, to;
	int pipe_r, pipe_w;
	size_t pending; /* bytes in the pipe */
	size_t cap;     /* the pipe's size */
	uint64_t bytes; /* delivered to `to` */
	/* Client bytes read with the request, to go up before any others. */
	const char *pre;
	size_t pre_len;
	bool eof, done, grown;
	struct event *rev; /* from readable */
	struct event *wev; /* to writable */
} dir;

enum conn_state { READING, CHECKING, RELAYING };

struct conn {
	listener *l;
	conn *next, *prev;
	enum conn_state state;
	int cfd, ufd;
	struct event *req_ev, *timer;
	dir up, down; /* client -> upstream, upstream -> client */
	int64_t start_ms, last_ms;
	/* READING: what has arrived (at most the cap), and the parser's place
	 * in it. Freed once the request is parsed and the bytes after it are
	 * in the upstream pipe. */
	char *head;
	size_t head_len;
	airlock_connect_parser parser;
	unsigned reads;   /* reads of the request so far */
	int64_t resume_ms; /* > 0: reading is paused until then */
	bool parsed;
	airlock_connect_request req;
	airlock_egress_decision d;
	/* CHECKING: the lookup in flight, or the dial (ufd, waited for by
	 * dial_ev until dial_deadline); holds_slot while either counts against
	 * the check caps. */
	proxy_lookup *lookup;
	struct event *dial_ev;
	int64_t dial_deadline;
	bool holds_slot;
	int dial_errno;
	int status;
};

/* ---- helpers every file of the loop uses ---------------------------------- */

static inline void event_freep(struct event **e)
{
	if (*e) {
		event_free(*e);
		*e = NULL;
	}
}

static inline void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

/* ---- the log (proxy_log.c) --------------------------------------------------- */

/* The writer thread's body: writes the queue's lines until it is closing
 * and drained. */
void *proxy_log_writer(void *arg);
/* The summary line of the connections a listener made wait, if any. */
void proxy_log_rate_limited(listener *l);
/* A connection's one line. */
void proxy_log_line(conn *c, const char *outcome, const char *reason, const char *detail);

/* ---- connections (proxy_conn.c) ------------------------------------------------ */

/* End a connection: log it, free everything it holds. */
void proxy_conn_end(conn *c, const char *outcome, const char *reason, const char *detail);
/* The status line the client is answered with before it is closed. */
void proxy_answer(conn *c, int status, const char *text, const char *reason);
/* Answer and end. */
void proxy_refuse(conn *c, int status, const char *text, const char *reason, const char *detail);
/* An allowed connection, dialled: answer 200 and relay. */
void proxy_relay_start(conn *c);
/* The relay's pipes, made while the check waits on the network (best
 * effort: proxy_relay_start makes what is missing). */
void proxy_relay_prepare(conn *c);
/* The loop's callbacks of a connection: its request is readable, its timer fired. */
void proxy_request_cb(evutil_socket_t fd, short what, void *arg);
void proxy_timer_cb(evutil_socket_t fd, short what, void *arg);
/* Set the connection's timer for the nearest of its deadlines. */
void proxy_timer_arm(conn *c, int64_t now);

/* ---- checking (proxy_check.c, proxy_resolve.c, proxy_own.c) ------------------------ */

/* A parsed request within the check caps: decide it, and answer or relay
 * it (now, or when its lookup and dial are done). May end c. */
void proxy_check_start(conn *c);
/* The connection's timer fired while CHECKING (its dial's deadline). */
void proxy_check_timer(conn *c, int64_t now);
/* Stop what the check has in flight and give back its slot (the
 * connection is ending). */
void proxy_check_release(conn *c);

/* A lookup's end: r and n as airlock_egress_resolver_resolve answers them,
 * the addresses in the out array given at the start. The lookup is gone. */
typedef void (*proxy_lookup_done_fn)(void *arg, int r, size_t n);
/* Start the A and AAAA queries for name (servers as the resolver takes
 * them, NULL for the system's); *ret is set before any answer can come.
 * Then proxy_lookup_kick, once the caller has stored *ret: done is called
 * from the loop (or from the kick, when an answer came at once), exactly
 * once, unless the lookup is cancelled first. 0 or -errno (no lookup). */
int proxy_lookup_start(struct event_base *base, const char *servers, proxy_lookup **spare,
                       const char *name, airlock_addr *out, size_t max,
                       proxy_lookup_done_fn done, void *arg, proxy_lookup **ret);
/* Make *spare, when there is none, for the next proxy_lookup_start: the
 * channel's making (reading /etc/resolv.conf, seeding its query ids) off
 * the next CONNECT's path. Best effort: without a spare, start makes one. */
void proxy_lookup_prepare(struct event_base *base, const char *servers, proxy_lookup **spare);
void proxy_lookup_kick(proxy_lookup *l);
/* End a lookup without calling done (or a spare): its queries and sockets
 * go with it. */
void proxy_lookup_cancel(proxy_lookup *l);

/* The own-address cache: open before the seccomp filter (which refuses
 * netlink sockets); proxy_own_cb is the loop's callback of oc->nl;
 * proxy_own_ask is an egress_own_fn with ctx the cache. */
void proxy_own_open(own_cache *oc);
void proxy_own_close(own_cache *oc);
void proxy_own_cb(evutil_socket_t fd, short what, void *arg);
int proxy_own_ask(void *ctx, const airlock_addr *a);

/* ---- listeners (proxy_listen.c) ---------------------------------------------------- */

void proxy_accept_cb(evutil_socket_t fd, short what, void *arg);
void proxy_rate_cb(evutil_socket_t fd, short what, void *arg);
/* Drop one reference; the last frees the listener. */
void proxy_listener_put(listener *l);
/* Close the listener and end its connections. */
void proxy_listener_detach(listener *l);

/* ---- the control channel (proxy_ctl_server.c) ------------------------------------------ */

/* Answer {"ok": true}, or {"ok": false, "error": error}. 0 or -errno. */
int proxy_reply_on(int ctl, const char *error);
int proxy_reply(proxy *px, const char *error);
/* The loop's callback of the control socket: one request, one answer. */
void proxy_ctl_cb(evutil_socket_t fd, short what, void *arg);

#endif
