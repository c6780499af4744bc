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
 *   CHECKING  a short-lived thread runs the one evaluation function (the
 *             resolver blocks) and, when allowed, the one dial to the
 *             checked address; it hands the connection back through a pipe;
 *   RELAYING  splice(2) moves bytes socket -> pipe -> socket each way
 *             without copying them through this process; EOF on one side
 *             becomes shutdown(SHUT_WR) on the other once its pipe is empty,
 *             so half-close is carried both ways.
 *
 * The files: the log (proxy_log.c), a connection from its request to its
 * relay (proxy_conn.c), the checking thread (proxy_check.c), the listeners
 * and their accept rate (proxy_listen.c), the control channel's server side
 * (proxy_ctl_server.c), the process itself (proxy_process.c).
 */

#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

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

typedef struct proxy {
	airlock_proxy_config cfg;
	int ctl;
	int log_fd;
	log_queue log;
	struct event_base *base;
	struct event *ctl_ev;
	int done_r, done_w; /* checking threads hand connections back here */
	struct event *done_ev;
	listener *listeners;
	unsigned n_conns;   /* accepted and not yet closed */
	unsigned n_pending; /* checking threads running */
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
	/* Detached while its thread ran: written by the loop, read by the
	 * thread before it dials (a sandbox that is gone gets no dial). */
	atomic_bool abandoned;
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
/* The loop's callbacks of a connection: its request is readable, its timer fired. */
void proxy_request_cb(evutil_socket_t fd, short what, void *arg);
void proxy_timer_cb(evutil_socket_t fd, short what, void *arg);
/* Set the connection's timer for the nearest of its deadlines. */
void proxy_timer_arm(conn *c, int64_t now);

/* ---- checking (proxy_check.c) ---------------------------------------------------- */

/* The checking thread's body (arg: the conn it owns until it hands it back). */
void *proxy_check_thread(void *arg);
/* The loop's end of the hand-back pipe. */
void proxy_done_cb(evutil_socket_t fd, short what, void *arg);

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
