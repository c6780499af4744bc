/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress proxy process (include/airlock/proxy.h has the contract).
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
 * The process holds no privileges: started by root it becomes
 * AIRLOCK_PROXY_UID with no capabilities, no_new_privs, not dumpable, and
 * keeps only its control socket and the log. It never creates a socket in
 * a sandbox's namespace; it accepts on what the service hands it.
 */
#include "airlock/proxy.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "airlock/json.h"
#include "egress/dial.h"
#include "egress/proxy_internal.h"
#include "util/syscalls.h"
#include "util/util.h"

/* A tunnel's pipes start at the kernel's default (64 KiB) and grow to this
 * once the tunnel has shown it is busy: bulk transfers then move in fewer,
 * larger splices, while thousands of idle tunnels cost no more than small
 * pipes. The kernel caps an unprivileged user's pipe memory
 * (pipe-user-pages-soft); when growing fails the pipe keeps its size. */
#define RELAY_PIPE_BUSY (1u << 20)
/* Bytes a direction must have moved before its pipe grows. */
#define RELAY_BUSY_AFTER (1u << 20)
/* Rounds of read+write per readiness callback before yielding to the other
 * tunnels: one fast tunnel cannot starve the loop. */
#define RELAY_ROUNDS 16
/* Connections accepted per listener callback, for the same reason. */
#define ACCEPT_BATCH 32
/* A request head still incomplete after this many reads is being
 * trickled: each later read waits READ_PAUSE_MS first, so what arrived
 * meanwhile is one read, not one wakeup per segment. A client that sends
 * its request in a segment or a few is never paused; a trickler costs the
 * loop at most 1000 / READ_PAUSE_MS reads a second per connection, however
 * fast it sends. */
#define READ_FREE 4
#define READ_PAUSE_MS 10

extern char **environ;

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

/* ---- the log -------------------------------------------------------------- */

static int put(json_t *o, const char *k, json_t *v)
{
	return v && json_object_set_new(o, k, v) == 0 ? 0 : -1;
}

static void *log_writer(void *arg)
{
	log_queue *q = arg;
	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (!q->head && !q->closing)
			pthread_cond_wait(&q->more, &q->lock);
		log_line_q *l = q->head;
		if (!l)
			break; /* closing and drained */
		q->head = l->next;
		if (!q->head)
			q->tail = NULL;
		q->n--;
		pthread_mutex_unlock(&q->lock);
		/* One write(2) per line: O_APPEND keeps lines whole when several
		 * processes share the file. */
		(void)!write(q->fd, l->text, l->len);
		free(l);
		pthread_mutex_lock(&q->lock);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

static void log_push(log_queue *q, const char *text, size_t len)
{
	log_line_q *l = malloc(sizeof(*l) + len);
	pthread_mutex_lock(&q->lock);
	if (!l || q->n >= q->max) {
		q->dropped++;
		pthread_mutex_unlock(&q->lock);
		free(l);
		return;
	}
	memcpy(l->text, text, len);
	l->len = len;
	l->next = NULL;
	if (q->tail)
		q->tail->next = l;
	else
		q->head = l;
	q->tail = l;
	q->n++;
	pthread_cond_signal(&q->more);
	pthread_mutex_unlock(&q->lock);
}

/* Queue one line; first a line counting what was dropped, if anything was. */
static void emit(proxy *px, json_t *o)
{
	log_queue *q = &px->log;
	pthread_mutex_lock(&q->lock);
	uint64_t dropped = q->dropped;
	bool room = q->n + 1 < q->max;
	if (dropped && room)
		q->dropped = 0;
	pthread_mutex_unlock(&q->lock);
	if (dropped && room) {
		char note[128];
		int n = snprintf(note, sizeof(note),
		                 "{\"ts_ms\":%lld,\"outcome\":\"failed\",\"reason\":\"LOG_DROPPED\","
		                 "\"count\":%llu}\n",
		                 (long long)util_now_ms(), (unsigned long long)dropped);
		log_push(q, note, (size_t)n);
	}
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	if (!s) {
		pthread_mutex_lock(&q->lock);
		q->dropped++;
		pthread_mutex_unlock(&q->lock);
		return;
	}
	size_t len = strlen(s);
	s[len] = '\n'; /* json_dumps's NUL becomes the line end */
	log_push(q, s, len + 1);
	free(s);
}

/* The fields every line of a listener carries. */
static json_t *line_base(const listener *l)
{
	json_t *o = json_object();
	int r = o ? 0 : -1;
	if (r == 0)
		r = put(o, "ts_ms", json_integer(util_now_ms()));
	if (r == 0)
		r = put(o, "run", json_string(l->run));
	if (r == 0)
		r = put(o, "tenant", json_string(l->tenant));
	if (r == 0)
		r = put(o, "environment", json_string(l->env));
	if (r == 0)
		r = put(o, "transport", json_string(airlock_egress_transport_name(l->transport)));
	if (r < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* One line for the connections a listener made wait (rate limited). Each
 * of them still has its own line when it ends. */
static void log_rate_limited(listener *l)
{
	if (!l->rate_delayed)
		return;
	json_t *o = line_base(l);
	if (o && (put(o, "outcome", json_string("delayed")) < 0 ||
	          put(o, "reason", json_string("RATE_LIMITED")) < 0 ||
	          put(o, "count", json_integer((json_int_t)l->rate_delayed)) < 0)) {
		json_decref(o);
		o = NULL;
	}
	emit(l->px, o);
	json_decref(o);
	l->rate_delayed = 0;
}

/* One decision, one line. host and the addresses are escaped or numeric by
 * construction: a hostile request cannot forge a field. */
static void log_line(conn *c, const char *outcome, const char *reason, const char *detail)
{
	json_t *o = line_base(c->l);
	json_t *addrs = json_array();
	char buf[46];
	int r = o && addrs ? 0 : -1;
	for (size_t i = 0; r == 0 && i < c->d.n_addresses && i < AIRLOCK_EGRESS_ADDRESSES_MAX; i++) {
		airlock_addr_format(&c->d.addresses[i], buf);
		r = json_array_append_new(addrs, json_string(buf));
	}
	if (r == 0) {
		if (c->d.host[0]) {
			r = put(o, "host", json_string(c->d.host));
		} else if (c->parsed) {
			char esc[AIRLOCK_HOSTNAME_MAX + 1];
			util_escape(esc, sizeof(esc), c->req.host, strlen(c->req.host));
			r = put(o, "host", json_string(esc));
		} else {
			r = put(o, "host", json_null());
		}
	}
	if (r == 0)
		r = put(o, "port", c->parsed ? json_integer(c->req.port) : json_null());
	if (r == 0) {
		r = put(o, "addresses", addrs);
		addrs = NULL;
	}
	if (r == 0) {
		if (c->d.has_dial) {
			airlock_addr_format(&c->d.dial, buf);
			r = put(o, "dial", json_string(buf));
		} else {
			r = put(o, "dial", json_null());
		}
	}
	if (r == 0)
		r = put(o, "outcome", json_string(outcome));
	if (r == 0)
		r = put(o, "reason", json_string(reason));
	if (r == 0)
		r = put(o, "detail", detail ? json_string(detail) : json_null());
	if (r == 0)
		r = put(o, "status", json_integer(c->status));
	if (r == 0)
		r = put(o, "bytes_up", json_integer((json_int_t)c->up.bytes));
	if (r == 0)
		r = put(o, "bytes_down", json_integer((json_int_t)c->down.bytes));
	if (r == 0)
		r = put(o, "duration_ms", json_integer(util_monotonic_ms() - c->start_ms));
	json_decref(addrs);
	emit(c->l->px, r == 0 ? o : NULL);
	json_decref(o);
}

/* ---- connections ----------------------------------------------------------- */

static void listener_put(listener *l);

static void event_freep(struct event **e)
{
	if (*e) {
		event_free(*e);
		*e = NULL;
	}
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static void dir_release(dir *d)
{
	event_freep(&d->rev);
	event_freep(&d->wev);
	close_fd(&d->pipe_r);
	close_fd(&d->pipe_w);
}

/* End a connection: log it, free everything it holds. */
static void conn_end(conn *c, const char *outcome, const char *reason, const char *detail)
{
	log_line(c, outcome, reason, detail);
	event_freep(&c->req_ev);
	event_freep(&c->timer);
	dir_release(&c->up);
	dir_release(&c->down);
	close_fd(&c->cfd);
	close_fd(&c->ufd);
	free(c->head);
	listener *l = c->l;
	if (c->prev)
		c->prev->next = c->next;
	else
		l->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	l->px->n_conns--;
	l->n_conns--;
	free(c);
	listener_put(l);
}

/* Answer the client before closing: a status line it can show the user,
 * with the reason in a header so a tool can tell the refusals apart. */
static void answer(conn *c, int status, const char *text, const char *reason)
{
	char buf[256];
	c->status = status;
	int n = snprintf(buf, sizeof(buf),
	                 "HTTP/1.1 %d %s\r\nX-Airlock-Reason: %s\r\nContent-Length: 0\r\n"
	                 "Connection: close\r\n\r\n",
	                 status, text, reason);
	/* Non-blocking and best effort: nothing has been sent on this socket
	 * yet, so a few hundred bytes fit in its buffer. */
	if (n > 0)
		(void)!send(c->cfd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	/* Closing a socket with unread bytes sends a reset, which can destroy
	 * the answer before the client reads it (a client that pushed its first
	 * tunnel bytes early): send our FIN first and read off what is already
	 * there, bounded. */
	shutdown(c->cfd, SHUT_WR);
	char sink[4096];
	for (int i = 0; i < 16; i++)
		if (recv(c->cfd, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
			break;
}

static void refuse(conn *c, int status, const char *text, const char *reason, const char *detail)
{
	answer(c, status, text, reason);
	conn_end(c, "refused", reason, detail);
}

static void timer_arm(conn *c, int64_t now);

/* Move what can move in one direction. -1 on a broken socket. */
static int dir_pump(conn *c, dir *d)
{
	for (int round = 0; round < RELAY_ROUNDS; round++) {
		while (d->pending > 0) {
			ssize_t n = splice(d->pipe_r, NULL, d->to, NULL, d->pending,
			                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				d->pending -= (size_t)n;
				d->bytes += (uint64_t)n;
				c->last_ms = util_monotonic_ms();
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno == EAGAIN) {
				/* The receiver is slow: stop reading until it drains,
				 * so at most one pipe's worth waits here. */
				event_del(d->rev);
				event_add(d->wev, NULL);
				return 0;
			}
			return -1;
		}
		event_del(d->wev);
		if (d->eof) {
			/* Their FIN, passed on only after every byte before it. */
			shutdown(d->to, SHUT_WR);
			d->done = true;
			event_del(d->rev);
			return 0;
		}
		if (d->pre_len > 0) {
			/* The pipe is empty here (pending is 0): the bytes that came
			 * with the request go first, as much as the pipe takes. */
			ssize_t n = write(d->pipe_w, d->pre, d->pre_len);
			if (n > 0) {
				d->pre += n;
				d->pre_len -= (size_t)n;
				d->pending += (size_t)n;
				if (d->pre_len == 0) {
					free(c->head);
					c->head = NULL;
					d->pre = NULL;
				}
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			return -1;
		}
		if (!d->grown && d->bytes >= RELAY_BUSY_AFTER) {
			d->grown = true; /* tried once, whatever the answer */
			int sz = fcntl(d->pipe_w, F_SETPIPE_SZ, (int)RELAY_PIPE_BUSY);
			if (sz > 0)
				d->cap = (size_t)sz;
		}
		ssize_t n = splice(d->from, NULL, d->pipe_w, NULL, d->cap,
		                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0) {
			d->pending += (size_t)n;
			continue;
		}
		if (n == 0) {
			d->eof = true;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			event_add(d->rev, NULL);
			return 0;
		}
		return -1;
	}
	/* Yielded with work left: level-triggered readiness brings us back. */
	event_add(d->pending > 0 ? d->wev : d->rev, NULL);
	return 0;
}

/* One direction's readiness moves that direction only: a one-way bulk
 * transfer does not pay a futile splice on the idle side per wakeup. */
static void relay_cb(evutil_socket_t fd, short what, void *arg)
{
	dir *d = arg;
	conn *c = d->c;
	(void)fd;
	(void)what;
	if (!d->done && dir_pump(c, d) < 0) {
		conn_end(c, "allowed", "ALLOWED", "reset");
		return;
	}
	if (c->up.done && c->down.done)
		conn_end(c, "allowed", "ALLOWED", "closed");
}

static int dir_init(conn *c, dir *d, int from, int to)
{
	struct event_base *base = c->l->px->base;
	int p[2];
	d->from = from;
	d->to = to;
	d->pipe_r = d->pipe_w = -1;
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	d->pipe_r = p[0];
	d->pipe_w = p[1];
	int sz = fcntl(d->pipe_w, F_GETPIPE_SZ);
	d->cap = sz > 0 ? (size_t)sz : 65536;
	d->c = c;
	d->rev = event_new(base, from, EV_READ | EV_PERSIST, relay_cb, d);
	d->wev = event_new(base, to, EV_WRITE | EV_PERSIST, relay_cb, d);
	return d->rev && d->wev ? 0 : -ENOMEM;
}

static void relay_start(conn *c)
{
	if (dir_init(c, &c->up, c->cfd, c->ufd) < 0 || dir_init(c, &c->down, c->ufd, c->cfd) < 0) {
		answer(c, 503, "Service Unavailable", "PROXY_RESOURCES");
		conn_end(c, "failed", "PROXY_RESOURCES", "pipe");
		return;
	}
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	c->status = 200;
	if (send(c->cfd, ok, sizeof(ok) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)(sizeof(ok) - 1)) {
		conn_end(c, "allowed", "ALLOWED", "client gone");
		return;
	}
	c->state = RELAYING;
	c->last_ms = util_monotonic_ms();
	event_add(c->up.rev, NULL);
	event_add(c->down.rev, NULL);
	/* Tunnel bytes that came with the request: move them now, not when
	 * the client next sends something. */
	if (c->up.pre_len > 0)
		event_active(c->up.rev, EV_READ, 0);
	timer_arm(c, c->last_ms);
}

/* ---- checking (off the loop) ------------------------------------------------ */

/* The one dial (src/egress/guard.c), then non-blocking for the loop. */
static int dial(const airlock_addr *a, uint16_t port, int64_t timeout_ms, int *ret_fd)
{
	int fd = -1;
	int r = egress_dial(a, port, timeout_ms, &fd);
	if (r < 0)
		return r;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	*ret_fd = fd;
	return 0;
}

static void *check_thread(void *arg)
{
	conn *c = arg;
	listener *l = c->l;
	airlock_egress_resolver *res = NULL;
	airlock_error err = { 0 };
	int r = airlock_egress_resolver_new(l->px->cfg.dns_servers, &res, &err);
	if (r < 0) {
		/* Counted as a failed resolution: fail closed. */
		memset(&c->d, 0, sizeof(c->d));
		c->d.reason = c->d.detail = AIRLOCK_EGRESS_DNS_FAILURE;
	} else if (l->transport == AIRLOCK_EGRESS_TRANSPORT_POLICY) {
		r = airlock_egress_evaluate(&l->policy, c->req.host, c->req.port,
		                            airlock_egress_resolver_resolve, res, &c->d, &err);
	} else {
		r = airlock_egress_evaluate_transport(l->transport, c->req.host, c->req.port,
		                                      airlock_egress_resolver_resolve, res, &c->d,
		                                      &err);
	}
	airlock_egress_resolver_free(res);
	if (r < 0) {
		memset(&c->d, 0, sizeof(c->d));
		c->d.reason = c->d.detail = AIRLOCK_EGRESS_REASON_INVALID;
	}
	/* One resolution, one dial, to the address that was checked: never the
	 * name, never a second lookup (DNS rebinding). */
	if (c->d.allow && c->d.has_dial && !atomic_load(&c->abandoned))
		c->dial_errno = -dial(&c->d.dial, c->d.port, l->px->cfg.connect_timeout_ms, &c->ufd);
	/* Hand the connection back; a pointer is far below PIPE_BUF, so the
	 * write is whole. */
	while (write(l->px->done_w, &c, sizeof(c)) < 0 && errno == EINTR)
		;
	return NULL;
}

static void check_done(conn *c)
{
	proxy *px = c->l->px;
	px->n_pending--;
	c->l->n_pending--;
	if (atomic_load(&c->abandoned) || px->stopping) {
		conn_end(c, c->d.allow ? "allowed" : "refused",
		         c->d.allow ? "ALLOWED" : airlock_egress_reason_name(c->d.reason), "detached");
		return;
	}
	if (!c->d.allow) {
		const char *reason = airlock_egress_reason_name(c->d.reason);
		const char *detail = c->d.detail != c->d.reason ?
		                             airlock_egress_reason_name(c->d.detail) :
		                             NULL;
		/* A name that does not resolve is the gateway's failure, every
		 * other refusal is policy: 403. */
		if (c->d.detail == AIRLOCK_EGRESS_DNS_FAILURE)
			refuse(c, 502, "Bad Gateway", reason, detail);
		else
			refuse(c, 403, "Forbidden", reason, detail);
		return;
	}
	if (c->dial_errno) {
		bool timeout = c->dial_errno == ETIMEDOUT;
		answer(c, timeout ? 504 : 502, timeout ? "Gateway Timeout" : "Bad Gateway",
		       timeout ? "DIAL_TIMEOUT" : "DIAL_FAILED");
		conn_end(c, "failed", timeout ? "DIAL_TIMEOUT" : "DIAL_FAILED",
		         strerror(c->dial_errno));
		return;
	}
	relay_start(c);
}

static void done_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	(void)arg;
	for (int i = 0; i < 64; i++) {
		conn *c;
		ssize_t n = read(fd, &c, sizeof(c));
		if (n != (ssize_t)sizeof(c))
			return;
		check_done(c);
	}
}

/* ---- reading the request ------------------------------------------------------ */

/* One read per readiness (level-triggered): a connection with more waiting
 * gets its next read in the loop's next round, after every other ready
 * connection has had its turn. */
static void request_cb(evutil_socket_t fd, short what, void *arg)
{
	conn *c = arg;
	proxy *px = c->l->px;
	(void)what;
	/* Allocated at the first byte: a connection that never sends costs no
	 * buffer. The parser decides before the buffer is full (at the cap it
	 * answers TOO_LARGE), so a read always has room. */
	if (!c->head && !(c->head = malloc(AIRLOCK_CONNECT_REQUEST_MAX))) {
		answer(c, 503, "Service Unavailable", "PROXY_RESOURCES");
		conn_end(c, "failed", "PROXY_RESOURCES", "request buffer");
		return;
	}
	ssize_t n = recv(fd, c->head + c->head_len, AIRLOCK_CONNECT_REQUEST_MAX - c->head_len,
	                 MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_end(c, "refused", "CLIENT_CLOSED", NULL);
		return;
	}
	c->head_len += (size_t)n;
	airlock_connect_request req;
	airlock_connect_status st = airlock_connect_parse_more(&c->parser, c->head, c->head_len, &req);
	switch (st) {
	case AIRLOCK_CONNECT_INCOMPLETE:
		if (++c->reads >= READ_FREE) {
			event_del(c->req_ev);
			c->resume_ms = util_monotonic_ms() + READ_PAUSE_MS;
			timer_arm(c, util_monotonic_ms());
		}
		return;
	case AIRLOCK_CONNECT_OK:
		break;
	case AIRLOCK_CONNECT_NOT_CONNECT:
		refuse(c, 405, "Method Not Allowed", "METHOD_NOT_ALLOWED", NULL);
		return;
	case AIRLOCK_CONNECT_BAD_VERSION:
		refuse(c, 505, "HTTP Version Not Supported", "BAD_REQUEST", "version");
		return;
	case AIRLOCK_CONNECT_TOO_LARGE:
		refuse(c, 431, "Request Header Fields Too Large", "BAD_REQUEST", "too large");
		return;
	case AIRLOCK_CONNECT_BAD_REQUEST:
	default:
		refuse(c, 400, "Bad Request", "BAD_REQUEST", NULL);
		return;
	}
	/* What came after the request is the tunnel's: kept for the upstream
	 * pipe. Nothing came: the buffer goes now. */
	if (req.consumed < c->head_len) {
		c->up.pre = c->head + req.consumed;
		c->up.pre_len = c->head_len - req.consumed;
	} else {
		free(c->head);
		c->head = NULL;
	}
	c->req = req;
	c->parsed = true;
	event_freep(&c->req_ev);
	/* The checking thread owns the connection until it hands it back: no
	 * timer may end it meanwhile (the thread's own steps are bounded). */
	evtimer_del(c->timer);
	/* Checks in flight are capped per sandbox before globally: names that
	 * resolve slowly or ports that never answer hold a slot each, and one
	 * sandbox's must not be every sandbox's. */
	if (c->l->n_pending >= px->cfg.max_pending_per_listener ||
	    px->n_pending >= px->cfg.max_pending) {
		answer(c, 503, "Service Unavailable", "PROXY_BUSY");
		conn_end(c, "failed", "PROXY_BUSY",
		         px->n_pending >= px->cfg.max_pending ? "all sandboxes" : "this sandbox");
		return;
	}
	c->state = CHECKING;
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	int r = pthread_create(&t, &attr, check_thread, c);
	pthread_attr_destroy(&attr);
	if (r != 0) {
		answer(c, 503, "Service Unavailable", "PROXY_BUSY");
		conn_end(c, "failed", "PROXY_BUSY", strerror(r));
		return;
	}
	px->n_pending++;
	c->l->n_pending++;
}

/* ---- timers ---------------------------------------------------------------------- */

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	conn *c = arg;
	(void)fd;
	(void)what;
	const airlock_proxy_config *cfg = &c->l->px->cfg;
	int64_t now = util_monotonic_ms();
	if (c->state == CHECKING)
		return;
	if (c->state == READING) {
		if (now - c->start_ms >= cfg->request_timeout_ms) {
			refuse(c, 408, "Request Timeout", "REQUEST_TIMEOUT", NULL);
			return;
		}
		if (c->resume_ms > 0 && now >= c->resume_ms) {
			c->resume_ms = 0;
			event_add(c->req_ev, NULL);
		}
	} else if (c->state == RELAYING) {
		if (now - c->start_ms >= cfg->total_timeout_ms) {
			conn_end(c, "allowed", "ALLOWED", "total timeout");
			return;
		}
		if (now - c->last_ms >= cfg->idle_timeout_ms) {
			conn_end(c, "allowed", "ALLOWED", "idle timeout");
			return;
		}
	}
	timer_arm(c, now);
}

/* One timer per connection, set for the nearest of its deadlines (the
 * checking thread has its own bounds: the resolver's and the dial's). */
static void timer_arm(conn *c, int64_t now)
{
	const airlock_proxy_config *cfg = &c->l->px->cfg;
	int64_t at;
	if (c->state == READING) {
		at = c->start_ms + cfg->request_timeout_ms;
		if (c->resume_ms > 0 && c->resume_ms < at)
			at = c->resume_ms;
	} else {
		at = c->start_ms + cfg->total_timeout_ms;
		if (c->last_ms + cfg->idle_timeout_ms < at)
			at = c->last_ms + cfg->idle_timeout_ms;
	}
	int64_t left = at > now ? at - now : 0;
	struct timeval tv = { .tv_sec = left / 1000, .tv_usec = (left % 1000) * 1000 };
	evtimer_add(c->timer, &tv);
}

/* ---- listeners ----------------------------------------------------------------------- */

static void ms_timeval(int64_t ms, struct timeval *tv)
{
	tv->tv_sec = ms / 1000;
	tv->tv_usec = (ms % 1000) * 1000;
}

/* The summary line is due within a second of its first count. */
static void rate_note(listener *l)
{
	l->rate_delayed++;
	if (!evtimer_pending(l->rate_ev, NULL)) {
		struct timeval tv;
		ms_timeval(1000, &tv);
		evtimer_add(l->rate_ev, &tv);
	}
}

static void accept_cb(evutil_socket_t fd, short what, void *arg);

/* The rate window is over: write what the last one delayed and accept
 * again, first from the queue that waited. */
static void rate_cb(evutil_socket_t fd, short what, void *arg)
{
	listener *l = arg;
	(void)fd;
	(void)what;
	log_rate_limited(l);
	if (l->paused) {
		l->paused = false;
		l->draining = true;
		event_add(l->ev, NULL);
		accept_cb(l->fd, EV_READ, l);
	}
}

static void accept_cb(evutil_socket_t fd, short what, void *arg)
{
	listener *l = arg;
	proxy *px = l->px;
	(void)what;
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		/* A sandbox opening connections faster than its rate waits: this
		 * listener stops accepting until the next second and the kernel
		 * holds the rest in the listen queue (a full queue makes the
		 * client retry its SYN: later, never an EOF). A legitimate burst
		 * is served a moment late; a flood costs the loop nothing and
		 * the log one line a second. */
		int64_t now = util_monotonic_ms();
		if (now / 1000 != l->rate_second) {
			l->rate_second = now / 1000;
			l->rate_count = 0;
		}
		if (l->rate_count >= px->cfg.accept_rate_per_listener) {
			event_del(l->ev);
			l->paused = true;
			struct timeval tv;
			ms_timeval((l->rate_second + 1) * 1000 - now, &tv);
			evtimer_add(l->rate_ev, &tv);
			return;
		}
		int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (cfd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				l->draining = false; /* the queue is empty: nobody waits */
			return;
		}
		l->rate_count++;
		if (l->draining)
			rate_note(l);
		conn *c = calloc(1, sizeof(*c));
		if (!c) {
			close(cfd);
			continue;
		}
		c->l = l;
		l->refs++;
		c->cfd = cfd;
		c->ufd = -1;
		c->up.pipe_r = c->up.pipe_w = c->down.pipe_r = c->down.pipe_w = -1;
		c->start_ms = c->last_ms = util_monotonic_ms();
		c->next = l->conns;
		if (l->conns)
			l->conns->prev = c;
		l->conns = c;
		px->n_conns++;
		l->n_conns++;
		/* This sandbox's share first, then everyone's. */
		if (l->n_conns > px->cfg.max_connections_per_listener ||
		    px->n_conns > px->cfg.max_connections) {
			answer(c, 503, "Service Unavailable", "PROXY_FULL");
			conn_end(c, "failed", "PROXY_FULL",
			         px->n_conns > px->cfg.max_connections ? "all sandboxes" : "this sandbox");
			continue;
		}
		/* Level-triggered: every readiness is read, so a client that sent
		 * half a request and waits leaves nothing readable behind. */
		c->req_ev = event_new(px->base, cfd, EV_READ | EV_PERSIST, request_cb, c);
		airlock_connect_parser_init(&c->parser);
		c->timer = evtimer_new(px->base, timer_cb, c);
		if (!c->req_ev || !c->timer) {
			answer(c, 503, "Service Unavailable", "PROXY_RESOURCES");
			conn_end(c, "failed", "PROXY_RESOURCES", NULL);
			continue;
		}
		event_add(c->req_ev, NULL);
		timer_arm(c, c->start_ms);
	}
}

static void listener_put(listener *l)
{
	if (--l->refs > 0)
		return;
	free(l->run);
	free(l->tenant);
	free(l->env);
	airlock_egress_policy_clear(&l->policy);
	free(l);
}

/* Close the listener and end its connections. One still being checked is
 * ended when its thread hands it back. */
static void listener_detach(listener *l)
{
	proxy *px = l->px;
	for (listener **pp = &px->listeners; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	log_rate_limited(l);
	event_freep(&l->rate_ev);
	event_freep(&l->ev);
	close_fd(&l->fd);
	/* The list's reference, dropped last, keeps l alive through the loop. */
	conn *c = l->conns;
	while (c) {
		conn *next = c->next;
		if (c->state == CHECKING) {
			/* Its thread still owns the connection, but never touches the
			 * client's socket: close it now, so nothing of the sandbox's
			 * namespace stays here, and tell the thread not to dial. */
			atomic_store(&c->abandoned, true);
			close_fd(&c->cfd);
		} else
			conn_end(c, c->state == RELAYING ? "allowed" : "refused",
			         c->state == RELAYING ? "ALLOWED" : "DETACHED", "detached");
		c = next;
	}
	listener_put(l); /* the list's */
}

/* ---- the control channel ----------------------------------------------------------------- */

static int reply_on(int ctl, const char *error)
{
	json_t *o = error ? json_pack("{s:b, s:s}", "ok", 0, "error", error) :
	                    json_pack("{s:b}", "ok", 1);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!s)
		return -ENOMEM;
	int r = proxy_frame_send(ctl, s, strlen(s), -1);
	free(s);
	return r;
}

static int reply(proxy *px, const char *error)
{
	return reply_on(px->ctl, error);
}

static listener *listener_find(proxy *px, const char *env)
{
	for (listener *l = px->listeners; l; l = l->next)
		if (strcmp(l->env, env) == 0)
			return l;
	return NULL;
}

static const char *do_attach(proxy *px, json_t *o, int fd)
{
	const char *run = json_string_value(json_object_get(o, "run"));
	const char *tenant = json_string_value(json_object_get(o, "tenant"));
	const char *env = json_string_value(json_object_get(o, "environment"));
	const char *tname = json_string_value(json_object_get(o, "transport"));
	if (!run || !tenant || !env || !tname || fd < 0)
		return "attach: missing field or descriptor";
	if (listener_find(px, env))
		return "attach: environment already attached";
	int type = 0, acc = 0;
	socklen_t sl = sizeof(type);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &sl) < 0 || type != SOCK_STREAM)
		return "attach: not a stream socket";
	sl = sizeof(acc);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &sl) < 0 || !acc)
		return "attach: not a listening socket";
	airlock_egress_transport t = AIRLOCK_EGRESS_TRANSPORT__MAX;
	for (int i = 0; i < AIRLOCK_EGRESS_TRANSPORT__MAX; i++)
		if (strcmp(tname, airlock_egress_transport_name((airlock_egress_transport)i)) == 0)
			t = (airlock_egress_transport)i;
	if (t == AIRLOCK_EGRESS_TRANSPORT__MAX)
		return "attach: unknown transport";

	listener *l = calloc(1, sizeof(*l));
	if (!l)
		return "attach: out of memory";
	l->px = px;
	l->transport = t;
	l->fd = -1;
	l->refs = 1;
	l->run = strdup(run);
	l->tenant = strdup(tenant);
	l->env = strdup(env);
	const char *why = NULL;
	if (!l->run || !l->tenant || !l->env)
		why = "attach: out of memory";
	if (!why && t == AIRLOCK_EGRESS_TRANSPORT_POLICY) {
		json_t *pol = json_object_get(o, "policy");
		char *s = pol ? json_dumps(pol, JSON_COMPACT) : NULL;
		airlock_error err = { 0 };
		if (!s || airlock_egress_policy_from_json(s, strlen(s), &l->policy, &err) < 0)
			why = "attach: bad policy";
		free(s);
	}
	if (!why) {
		l->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (l->fd < 0 || fcntl(l->fd, F_SETFL, O_NONBLOCK) < 0)
			why = "attach: descriptor";
	}
	if (!why && !(l->ev = event_new(px->base, l->fd, EV_READ | EV_PERSIST, accept_cb, l)))
		why = "attach: out of memory";
	if (!why && !(l->rate_ev = evtimer_new(px->base, rate_cb, l)))
		why = "attach: out of memory";
	if (!why && event_add(l->ev, NULL) < 0)
		why = "attach: event";
	if (why) {
		event_freep(&l->rate_ev);
		event_freep(&l->ev);
		close_fd(&l->fd);
		listener_put(l);
		return why;
	}
	l->next = px->listeners;
	px->listeners = l;
	return NULL;
}

static void ctl_cb(evutil_socket_t fd, short what, void *arg)
{
	proxy *px = arg;
	(void)what;
	char *body = NULL;
	size_t len = 0;
	int lfd = -1;
	/* The service writes a whole frame at once; a frame that does not
	 * arrive in time means the service is gone or broken: stop. */
	int r = proxy_frame_recv(fd, 10000, &body, &len, &lfd);
	if (r < 0) {
		px->stopping = true;
		event_base_loopbreak(px->base);
		return;
	}
	json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	free(body);
	const char *op = o ? json_string_value(json_object_get(o, "op")) : NULL;
	const char *why = NULL;
	if (op && strcmp(op, "attach") == 0) {
		why = do_attach(px, o, lfd);
	} else if (op && strcmp(op, "detach") == 0) {
		const char *env = json_string_value(json_object_get(o, "environment"));
		listener *l = env ? listener_find(px, env) : NULL;
		if (!env)
			why = "detach: no environment";
		else if (l)
			listener_detach(l);
	} else {
		why = "unknown request";
	}
	if (lfd >= 0)
		close(lfd); /* attach kept its own copy */
	json_decref(o);
	if (reply(px, why) < 0) {
		px->stopping = true;
		event_base_loopbreak(px->base);
	}
}

/* ---- the process ------------------------------------------------------------------------- */

/* No privileges: a process that parses sandbox bytes holds nothing a bug
 * in it could hand over. */
static const char *drop_privileges(const airlock_proxy_config *cfg)
{
	if (prctl(PR_SET_DUMPABLE, 0) < 0)
		return "PR_SET_DUMPABLE";
	if (geteuid() == 0) {
		for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
			if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
				return "PR_CAPBSET_DROP";
		if (setgroups(0, NULL) < 0)
			return "setgroups";
		if (setresgid(cfg->gid, cfg->gid, cfg->gid) < 0)
			return "setresgid";
		/* From root to a non-zero uid with no keep-caps bit: the kernel
		 * clears the permitted and effective sets. */
		if (setresuid(cfg->uid, cfg->uid, cfg->uid) < 0)
			return "setresuid";
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return "PR_CAP_AMBIENT";
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { 0 };
	if (sys_capset(&h, d) < 0)
		return "capset";
	if (sys_capget(&h, d) < 0 || d[0].permitted || d[1].permitted || d[0].effective ||
	    d[1].effective)
		return "capabilities remain";
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return "PR_SET_NO_NEW_PRIVS";
	if (geteuid() == 0 || getegid() == 0)
		return "still root";
	return NULL;
}

/* What this process never does, refused by the kernel so that a bug in the
 * request parser cannot become any of it: start programs, look into or
 * write other processes, change namespaces or mounts, load kernel code,
 * or open sockets of families other than IP and unix. It cannot take away
 * what matters most (the proxy dials from the host's network, which is why
 * it holds no privilege and parses with a strict, fuzzed parser), but it
 * keeps a compromised proxy from becoming a compromised host. */
static const char *const denied_syscalls[] = {
	"execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "mount",
	"umount2", "pivot_root", "chroot", "setns", "unshare", "fsopen", "fsmount", "fsconfig",
	"move_mount", "open_tree", "mount_setattr", "bpf", "perf_event_open", "io_uring_setup",
	"io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"userfaultfd", "personality", "acct", "swapon", "swapoff", "reboot", "syslog",
	"iopl", "ioperm", "quotactl", "pidfd_getfd", "open_by_handle_at", "name_to_handle_at",
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
	"capset",
};

static const char *install_filter(void)
{
	scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
	if (!f)
		return "seccomp_init";
	int r = 0;
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(denied_syscalls); i++) {
		int nr = seccomp_syscall_resolve_name(denied_syscalls[i]);
		if (nr != __NR_SCMP_ERROR)
			r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), nr, 0);
	}
	/* Socket families: unix (the control channel), inet and inet6 (the
	 * dial and the resolver). Everything else, netlink and packet sockets
	 * above all, is refused. */
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
		                     SCMP_A0(SCMP_CMP_GT, AF_INET6));
	for (int fam = 0; r == 0 && fam < AF_INET6; fam++)
		if (fam != AF_UNIX && fam != AF_INET)
			r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
			                     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam));
	/* New namespaces (a user namespace needs no privilege): clone's flags
	 * are checked; clone3 hides them in memory a filter cannot read, so it
	 * answers ENOSYS and the C library falls back to clone. */
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	static const unsigned long ns_flags[] = { CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC,
		                                  CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
		                                  CLONE_NEWCGROUP };
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(ns_flags); i++)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
		                     SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
	/* No typing into a terminal, should one ever be reachable. */
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
		                     SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)TIOCSTI));
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
		                     SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)TIOCLINUX));
	/* A foreign architecture's syscall numbers mean something else. */
	if (r == 0)
		r = seccomp_attr_set(f, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r == 0)
		r = seccomp_load(f);
	seccomp_release(f);
	return r == 0 ? NULL : "seccomp";
}

_Noreturn static void proxy_process_main(int ctl, const airlock_proxy_config *cfg_in)
{
	proxy px = { .cfg = *cfg_in, .ctl = -1, .log_fd = -1, .done_r = -1, .done_w = -1 };
	const char *why = NULL;

	/* Keep the control socket and the log; close everything else this
	 * process inherited from the service (sandbox descriptors above all). */
	int c2 = fcntl(ctl, F_DUPFD_CLOEXEC, 100);
	int l2 = fcntl(cfg_in->log_fd, F_DUPFD_CLOEXEC, 100);
	if (c2 < 0 || l2 < 0)
		_exit(70);
	if (dup3(c2, 3, O_CLOEXEC) < 0 || dup3(l2, 4, O_CLOEXEC) < 0)
		_exit(70);
	if (sys_close_range(5U, ~0U, 0) < 0)
		_exit(70);
	/* Nothing of the operator's terminal: a session of its own (no
	 * controlling tty, no Ctrl-C from the service's terminal) and
	 * /dev/null on 0-2, so a compromised proxy has no tty to type into. */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || setsid() < 0)
		_exit(70);
	for (int fd = 0; fd <= 2; fd++)
		if (dup2(null, fd) < 0)
			_exit(70);
	if (null > 2)
		close(null);
	/* And none of the service's environment: the service executes this
	 * program with an empty one; should any be there all the same, the
	 * strings are wiped (clearenv alone only drops the pointers). */
	for (char **e = environ; e && *e; e++)
		explicit_bzero(*e, strlen(*e));
	clearenv();
	px.ctl = 3;
	px.log_fd = 4;
	px.cfg.log_fd = 4;

	/* A fresh signal state: the service may block or handle signals this
	 * process must not inherit (`airlock proxy` blocks SIGINT and SIGTERM
	 * before the fork, to take them synchronously, so they arrive blocked
	 * here). SIGPIPE is answered by EPIPE, so it alone is ignored again
	 * afterwards: what differs from a child about to exec a program, this
	 * process goes on running our code and writes to sockets.
	 * util_signals_reset puts the dispositions back before it empties the
	 * mask (the copy here did the two the other way round), so a signal the
	 * service had blocked reaches the default action, never a handler of
	 * the service's that the fork copied. */
	util_signals_reset();
	signal(SIGPIPE, SIG_IGN);

	/* Six descriptors per tunnel (two sockets, two pipes): take the hard
	 * limit while we may. */
	static char budget_why[256];
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
		/* A connection past what the descriptors allow would fail
		 * halfway (no pipe for its relay): refuse it at accept instead,
		 * with PROXY_FULL. 64 are kept for the loop, the resolver and
		 * the dials in flight. */
		rlim_t fit = rl.rlim_cur > 64 + 6 ? (rl.rlim_cur - 64) / 6 : 0;
		if (fit < px.cfg.max_connections) {
			/* Fewer connections in all: each sandbox's share shrinks by
			 * the same factor, so as many sandboxes fit at their cap as
			 * configured, and one sandbox never holds what all of them
			 * may (ulimit -n 1024 left 160 in all, and one sandbox's
			 * 256 would have been all of it). */
			unsigned per = (unsigned)((uint64_t)px.cfg.max_connections_per_listener * fit /
			                          px.cfg.max_connections);
			px.cfg.max_connections = (unsigned)fit;
			px.cfg.max_connections_per_listener = per;
		}
		if (px.cfg.max_connections_per_listener < 1 ||
		    px.cfg.max_connections_per_listener >= px.cfg.max_connections) {
			snprintf(budget_why, sizeof(budget_why),
			         "RLIMIT_NOFILE %llu leaves room for %u connections, too few to give each "
			         "sandbox a share below all of them (%u): raise the descriptor limit "
			         "(ulimit -n) to at least %llu",
			         (unsigned long long)rl.rlim_cur, px.cfg.max_connections,
			         px.cfg.max_connections_per_listener,
			         (unsigned long long)(64 + 6 * (((uint64_t)cfg_in->max_connections +
			                                         cfg_in->max_connections_per_listener - 1) /
			                                        cfg_in->max_connections_per_listener)));
			why = budget_why;
		}
	}

	if (!why)
		why = drop_privileges(&px.cfg);
	if (!why)
		why = install_filter();
	int p[2] = { -1, -1 };
	if (!why && pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		why = "pipe";
	px.done_r = p[0];
	px.done_w = p[1];
	if (!why) {
		/* The checking threads' writes must never block on a full pipe
		 * while the loop waits on them: the loop drains it; the write end
		 * goes back to blocking so a handoff is never lost. */
		int fl = fcntl(px.done_w, F_GETFL);
		if (fl < 0 || fcntl(px.done_w, F_SETFL, fl & ~O_NONBLOCK) < 0)
			why = "pipe";
	}
	if (!why && !(px.base = event_base_new()))
		why = "event_base_new";
	if (!why) {
		px.ctl_ev = event_new(px.base, px.ctl, EV_READ | EV_PERSIST, ctl_cb, &px);
		px.done_ev = event_new(px.base, px.done_r, EV_READ | EV_PERSIST, done_cb, &px);
		if (!px.ctl_ev || !px.done_ev || event_add(px.ctl_ev, NULL) < 0 ||
		    event_add(px.done_ev, NULL) < 0)
			why = "event_new";
	}
	px.log.fd = px.log_fd;
	px.log.max = px.cfg.log_queue_max > 16 ? px.cfg.log_queue_max : 16;
	pthread_mutex_init(&px.log.lock, NULL);
	pthread_cond_init(&px.log.more, NULL);
	if (!why && pthread_create(&px.log.writer, NULL, log_writer, &px.log) != 0)
		why = "the log writer thread";
	px.log.started = !why;
	if (reply(&px, why ? why : NULL) < 0 || why)
		_exit(70);

	event_base_dispatch(px.base);

	/* Stopping: every tunnel ends and is logged; threads still checking
	 * are waited for (bounded by the resolver's and the dial's timeouts),
	 * so none writes into a freed connection. */
	px.stopping = true;
	while (px.listeners)
		listener_detach(px.listeners);
	int64_t deadline = util_monotonic_ms() + AIRLOCK_EGRESS_RESOLVE_TIMEOUT_MS +
	                   px.cfg.connect_timeout_ms + 1000;
	while (px.n_pending > 0 && util_monotonic_ms() < deadline) {
		struct pollfd pf = { .fd = px.done_r, .events = POLLIN };
		if (poll(&pf, 1, 100) > 0)
			done_cb(px.done_r, EV_READ, &px);
	}
	/* Every line queued reaches the log before the process ends. */
	pthread_mutex_lock(&px.log.lock);
	px.log.closing = true;
	pthread_cond_signal(&px.log.more);
	pthread_mutex_unlock(&px.log.lock);
	pthread_join(px.log.writer, NULL);
	_exit(0);
}

_Noreturn void proxy_exec_main(void)
{
	/* The configuration is the channel's first frame: nothing of it is
	 * inherited (this is its own program, started by exec), so nothing the
	 * service holds reaches this process unless it is written here. A
	 * configuration that does not decode is answered like any failure to
	 * start, in place of the hello, and the process ends. */
	char *text = NULL;
	size_t len = 0;
	int r = proxy_frame_recv(PROXY_EXEC_CTL_FD, PROXY_CONFIG_TIMEOUT_MS, &text, &len, NULL);
	if (r < 0)
		_exit(70);
	airlock_proxy_config cfg;
	json_t *keep = NULL;
	const char *why = proxy_config_decode(text, len, &cfg, &keep);
	free(text);
	if (why) {
		reply_on(PROXY_EXEC_CTL_FD, why);
		_exit(70);
	}
	cfg.log_fd = PROXY_EXEC_LOG_FD;
	/* keep holds cfg.dns_servers for the process's life. */
	proxy_process_main(PROXY_EXEC_CTL_FD, &cfg);
}
