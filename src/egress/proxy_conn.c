/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One connection of the proxy, from its CONNECT request to the end of its
 * relay: reading the request (byte by byte, paced when it trickles), the
 * answer that refuses it, the splice relay both ways, and its timers.
 * proxy_check.c decides between the request and the relay.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/proxy_loop.h"
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
/* A request head still incomplete after this many reads is being
 * trickled: each later read waits READ_PAUSE_MS first, so what arrived
 * meanwhile is one read, not one wakeup per segment. A client that sends
 * its request in a segment or a few is never paused; a trickler costs the
 * loop at most 1000 / READ_PAUSE_MS reads a second per connection, however
 * fast it sends. */
#define READ_FREE 4
#define READ_PAUSE_MS 10

static void dir_release(dir *d)
{
	event_freep(&d->rev);
	event_freep(&d->wev);
	close_fd(&d->pipe_r);
	close_fd(&d->pipe_w);
}

/* End a connection: log it, free everything it holds. */
void proxy_conn_end(conn *c, const char *outcome, const char *reason, const char *detail)
{
	proxy_log_line(c, outcome, reason, detail);
	proxy_check_release(c);
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
	proxy_listener_put(l);
}

/* Answer the client before closing: a status line it can show the user,
 * with the reason in a header so a tool can tell the refusals apart. */
void proxy_answer(conn *c, int status, const char *text, const char *reason)
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

void proxy_refuse(conn *c, int status, const char *text, const char *reason, const char *detail)
{
	proxy_answer(c, status, text, reason);
	proxy_conn_end(c, "refused", reason, detail);
}


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
		proxy_conn_end(c, "allowed", "ALLOWED", "reset");
		return;
	}
	if (c->up.done && c->down.done)
		proxy_conn_end(c, "allowed", "ALLOWED", "closed");
}

static int dir_pipe(dir *d)
{
	int p[2];
	if (d->pipe_r >= 0)
		return 0;
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	d->pipe_r = p[0];
	d->pipe_w = p[1];
	int sz = fcntl(d->pipe_w, F_GETPIPE_SZ);
	d->cap = sz > 0 ? (size_t)sz : 65536;
	return 0;
}

void proxy_relay_prepare(conn *c)
{
	if (dir_pipe(&c->up) == 0)
		(void)dir_pipe(&c->down);
}

static int dir_init(conn *c, dir *d, int from, int to)
{
	struct event_base *base = c->l->px->base;
	d->from = from;
	d->to = to;
	int e = dir_pipe(d);
	if (e < 0)
		return e;
	d->c = c;
	d->rev = event_new(base, from, EV_READ | EV_PERSIST, relay_cb, d);
	d->wev = event_new(base, to, EV_WRITE | EV_PERSIST, relay_cb, d);
	return d->rev && d->wev ? 0 : -ENOMEM;
}

void proxy_relay_start(conn *c)
{
	if (dir_init(c, &c->up, c->cfd, c->ufd) < 0 || dir_init(c, &c->down, c->ufd, c->cfd) < 0) {
		proxy_answer(c, 503, "Service Unavailable", "PROXY_RESOURCES");
		proxy_conn_end(c, "failed", "PROXY_RESOURCES", "pipe");
		return;
	}
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	c->status = 200;
	if (send(c->cfd, ok, sizeof(ok) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)(sizeof(ok) - 1)) {
		proxy_conn_end(c, "allowed", "ALLOWED", "client gone");
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
	proxy_timer_arm(c, c->last_ms);
}

/* ---- reading the request ------------------------------------------------------ */

/* One read per readiness (level-triggered): a connection with more waiting
 * gets its next read in the loop's next round, after every other ready
 * connection has had its turn. */
void proxy_request_cb(evutil_socket_t fd, short what, void *arg)
{
	conn *c = arg;
	proxy *px = c->l->px;
	(void)what;
	/* Allocated at the first byte: a connection that never sends costs no
	 * buffer. The parser decides before the buffer is full (at the cap it
	 * answers TOO_LARGE), so a read always has room. */
	if (!c->head && !(c->head = malloc(AIRLOCK_CONNECT_REQUEST_MAX))) {
		proxy_answer(c, 503, "Service Unavailable", "PROXY_RESOURCES");
		proxy_conn_end(c, "failed", "PROXY_RESOURCES", "request buffer");
		return;
	}
	ssize_t n = recv(fd, c->head + c->head_len, AIRLOCK_CONNECT_REQUEST_MAX - c->head_len,
	                 MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		proxy_conn_end(c, "refused", "CLIENT_CLOSED", NULL);
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
			proxy_timer_arm(c, util_monotonic_ms());
		}
		return;
	case AIRLOCK_CONNECT_OK:
		break;
	case AIRLOCK_CONNECT_NOT_CONNECT:
		proxy_refuse(c, 405, "Method Not Allowed", "METHOD_NOT_ALLOWED", NULL);
		return;
	case AIRLOCK_CONNECT_BAD_VERSION:
		proxy_refuse(c, 505, "HTTP Version Not Supported", "BAD_REQUEST", "version");
		return;
	case AIRLOCK_CONNECT_TOO_LARGE:
		proxy_refuse(c, 431, "Request Header Fields Too Large", "BAD_REQUEST", "too large");
		return;
	case AIRLOCK_CONNECT_BAD_REQUEST:
	default:
		proxy_refuse(c, 400, "Bad Request", "BAD_REQUEST", NULL);
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
	/* The request timeout is over: while CHECKING, the timer is the dial's
	 * (the lookup has a deadline of its own). */
	evtimer_del(c->timer);
	/* Checks in flight are capped per sandbox before globally: names that
	 * resolve slowly or ports that never answer hold a slot each, and one
	 * sandbox's must not be every sandbox's. */
	if (c->l->n_pending >= px->cfg.max_pending_per_listener ||
	    px->n_pending >= px->cfg.max_pending) {
		proxy_answer(c, 503, "Service Unavailable", "PROXY_BUSY");
		proxy_conn_end(c, "failed", "PROXY_BUSY",
		         px->n_pending >= px->cfg.max_pending ? "all sandboxes" : "this sandbox");
		return;
	}
	proxy_check_start(c);
}

/* ---- timers ---------------------------------------------------------------------- */

void proxy_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	conn *c = arg;
	(void)fd;
	(void)what;
	const airlock_proxy_config *cfg = &c->l->px->cfg;
	int64_t now = util_monotonic_ms();
	if (c->state == CHECKING) {
		proxy_check_timer(c, now);
		return;
	}
	if (c->state == READING) {
		if (now - c->start_ms >= cfg->request_timeout_ms) {
			proxy_refuse(c, 408, "Request Timeout", "REQUEST_TIMEOUT", NULL);
			return;
		}
		if (c->resume_ms > 0 && now >= c->resume_ms) {
			c->resume_ms = 0;
			event_add(c->req_ev, NULL);
		}
	} else if (c->state == RELAYING) {
		if (now - c->start_ms >= cfg->total_timeout_ms) {
			proxy_conn_end(c, "allowed", "ALLOWED", "total timeout");
			return;
		}
		if (now - c->last_ms >= cfg->idle_timeout_ms) {
			proxy_conn_end(c, "allowed", "ALLOWED", "idle timeout");
			return;
		}
	}
	proxy_timer_arm(c, now);
}

/* One timer per connection, set for the nearest of its deadlines (a
 * lookup has its own). */
void proxy_timer_arm(conn *c, int64_t now)
{
	const airlock_proxy_config *cfg = &c->l->px->cfg;
	int64_t at;
	if (c->state == CHECKING) {
		at = c->dial_deadline;
	} else if (c->state == READING) {
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

