/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proxy's filter, in its loop: the one evaluation function's first half
 * (the name, the policy) at once; the resolution as a lookup the loop
 * drives (proxy_resolve.c); the second half (every address against the
 * denylist and this host's own addresses, proxy_own.c); then, when
 * allowed, the one dial to the checked address, a non-blocking connect the
 * loop waits for. Nothing here waits: a connection whose name resolves
 * slowly or whose destination answers slowly holds its check slot, never
 * the loop.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "egress/dial.h"
#include "egress/evaluate.h"
#include "egress/proxy_loop.h"
#include "util/util.h"

static void slot_release(conn *c)
{
	if (!c->holds_slot)
		return;
	c->holds_slot = false;
	c->l->px->n_pending--;
	c->l->n_pending--;
}

void proxy_check_release(conn *c)
{
	proxy_lookup_cancel(c->lookup);
	c->lookup = NULL;
	event_freep(&c->dial_ev);
	slot_release(c);
}

/* The decision is made (and the dial done, if allowed): answer or relay. */
static void check_done(conn *c)
{
	proxy_check_release(c);
	if (!c->d.allow) {
		const char *reason = airlock_egress_reason_name(c->d.reason);
		const char *detail = c->d.detail != c->d.reason ?
		                             airlock_egress_reason_name(c->d.detail) :
		                             NULL;
		/* A name that does not resolve is the gateway's failure, every
		 * other refusal is policy: 403. */
		if (c->d.detail == AIRLOCK_EGRESS_DNS_FAILURE)
			proxy_refuse(c, 502, "Bad Gateway", reason, detail);
		else
			proxy_refuse(c, 403, "Forbidden", reason, detail);
		return;
	}
	if (c->dial_errno) {
		bool timeout = c->dial_errno == ETIMEDOUT;
		proxy_answer(c, timeout ? 504 : 502, timeout ? "Gateway Timeout" : "Bad Gateway",
		       timeout ? "DIAL_TIMEOUT" : "DIAL_FAILED");
		proxy_conn_end(c, "failed", timeout ? "DIAL_TIMEOUT" : "DIAL_FAILED",
		         strerror(c->dial_errno));
		return;
	}
	proxy_relay_start(c);
}

static void dial_cb(evutil_socket_t fd, short what, void *arg)
{
	conn *c = arg;
	(void)what;
	c->dial_errno = egress_dial_result(fd);
	check_done(c);
}

/* One resolution, one dial, to the address that was checked: never the
 * name, never a second lookup (DNS rebinding). */
static void dial_start(conn *c)
{
	int r = egress_dial_start(&c->d.dial, c->d.port, &c->ufd);
	if (r != -EINPROGRESS) {
		c->dial_errno = -r;
		check_done(c);
		return;
	}
	/* A nearby destination has often answered the SYN by the time
	 * connect(2) returns (the kernel runs the receive path right after
	 * the send): one look now spares the loop a round for it. */
	struct pollfd pf = { .fd = c->ufd, .events = POLLOUT };
	if (poll(&pf, 1, 0) == 1) {
		c->dial_errno = egress_dial_result(c->ufd);
		check_done(c);
		return;
	}
	c->dial_ev = event_new(c->l->px->base, c->ufd, EV_WRITE, dial_cb, c);
	if (!c->dial_ev || event_add(c->dial_ev, NULL) < 0) {
		c->dial_errno = ENOMEM;
		check_done(c);
		return;
	}
	/* The connect timeout as egress_dial keeps it: none when it is 0 or
	 * less (the kernel's own then ends the connect). */
	int64_t timeout = c->l->px->cfg.connect_timeout_ms;
	if (timeout > 0) {
		int64_t now = util_monotonic_ms();
		c->dial_deadline = now + timeout;
		proxy_timer_arm(c, now);
	}
}

static void resolved(void *arg, int r, size_t n)
{
	conn *c = arg;
	c->lookup = NULL;
	egress_evaluate_finish(&c->d, r, n, proxy_own_ask, &c->l->px->own);
	if (c->d.allow && c->d.has_dial)
		dial_start(c);
	else
		check_done(c);
}

void proxy_check_timer(conn *c, int64_t now)
{
	if (!c->dial_ev || c->dial_deadline <= 0)
		return;
	if (now < c->dial_deadline) {
		proxy_timer_arm(c, now);
		return;
	}
	c->dial_errno = ETIMEDOUT;
	check_done(c);
}

void proxy_check_start(conn *c)
{
	listener *l = c->l;
	proxy *px = l->px;
	airlock_error err = { 0 };
	c->state = CHECKING;
	int r = egress_evaluate_begin(
		l->transport == AIRLOCK_EGRESS_TRANSPORT_POLICY ? &l->policy : NULL, l->transport,
		c->req.host, c->req.port, &c->d, &err);
	if (r < 0) {
		memset(&c->d, 0, sizeof(c->d));
		c->d.reason = c->d.detail = AIRLOCK_EGRESS_REASON_INVALID;
	}
	if (r <= 0) {
		check_done(c);
		return;
	}
	c->holds_slot = true;
	px->n_pending++;
	l->n_pending++;
	r = proxy_lookup_start(px->base, px->cfg.dns_servers, &px->spare, c->d.host,
	                       c->d.addresses, AIRLOCK_EGRESS_ADDRESSES_MAX, resolved, c,
	                       &c->lookup);
	if (r < 0) {
		/* No resolver: counted as a failed resolution, fail closed. */
		memset(&c->d, 0, sizeof(c->d));
		c->d.reason = c->d.detail = AIRLOCK_EGRESS_DNS_FAILURE;
		check_done(c);
		return;
	}
	/* The queries are out: what the loop does until their answers come is
	 * off this CONNECT's path (the relay's pipes, the next lookup's
	 * channel). The kick comes last, since it may end c. */
	proxy_relay_prepare(c);
	proxy_lookup_prepare(px->base, px->cfg.dns_servers, &px->spare);
	proxy_lookup_kick(c->lookup);
}
