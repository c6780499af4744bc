/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proxy's listeners: one per attached sandbox, accepting at its rate
 * (past it, accepting pauses and the kernel's queue holds the rest) within
 * its share of the connections, and detached with every connection it has.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/proxy_loop.h"
#include "util/util.h"

/* Connections accepted per listener callback: one busy listener cannot
 * starve the loop. */
#define ACCEPT_BATCH 32

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


/* The rate window is over: write what the last one delayed and accept
 * again, first from the queue that waited. */
void proxy_rate_cb(evutil_socket_t fd, short what, void *arg)
{
	listener *l = arg;
	(void)fd;
	(void)what;
	proxy_log_rate_limited(l);
	if (l->paused) {
		l->paused = false;
		l->draining = true;
		event_add(l->ev, NULL);
		proxy_accept_cb(l->fd, EV_READ, l);
	}
}

void proxy_accept_cb(evutil_socket_t fd, short what, void *arg)
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
			proxy_answer(c, 503, "Service Unavailable", "PROXY_FULL");
			proxy_conn_end(c, "failed", "PROXY_FULL",
			         px->n_conns > px->cfg.max_connections ? "all sandboxes" : "this sandbox");
			continue;
		}
		/* Level-triggered: every readiness is read, so a client that sent
		 * half a request and waits leaves nothing readable behind. */
		c->req_ev = event_new(px->base, cfd, EV_READ | EV_PERSIST, proxy_request_cb, c);
		airlock_connect_parser_init(&c->parser);
		c->timer = evtimer_new(px->base, proxy_timer_cb, c);
		if (!c->req_ev || !c->timer) {
			proxy_answer(c, 503, "Service Unavailable", "PROXY_RESOURCES");
			proxy_conn_end(c, "failed", "PROXY_RESOURCES", NULL);
			continue;
		}
		event_add(c->req_ev, NULL);
		proxy_timer_arm(c, c->start_ms);
	}
}

void proxy_listener_put(listener *l)
{
	if (--l->refs > 0)
		return;
	free(l->run);
	free(l->tenant);
	free(l->env);
	airlock_egress_policy_clear(&l->policy);
	free(l);
}

/* Close the listener and end its connections, those still being checked
 * with their lookups and dials. */
void proxy_listener_detach(listener *l)
{
	proxy *px = l->px;
	for (listener **pp = &px->listeners; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	proxy_log_rate_limited(l);
	event_freep(&l->rate_ev);
	event_freep(&l->ev);
	close_fd(&l->fd);
	/* The list's reference, dropped last, keeps l alive through the loop. */
	conn *c = l->conns;
	while (c) {
		conn *next = c->next;
		proxy_conn_end(c, c->state == RELAYING ? "allowed" : "refused",
		         c->state == RELAYING ? "ALLOWED" : "DETACHED", "detached");
		c = next;
	}
	proxy_listener_put(l); /* the list's */
}
