/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proxy's filter: a short-lived thread per request runs the one
 * evaluation function (the resolver blocks) and, when allowed, the one dial
 * to the checked address, then hands the connection back to the loop
 * through a pipe, which answers or relays it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "egress/dial.h"
#include "egress/proxy_loop.h"

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

void *proxy_check_thread(void *arg)
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
		proxy_conn_end(c, c->d.allow ? "allowed" : "refused",
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

void proxy_done_cb(evutil_socket_t fd, short what, void *arg)
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

