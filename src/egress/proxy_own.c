/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proxy's own-address answers, kept until this host's addresses,
 * routes, rules or links change (the evaluation's last check, evaluate.c).
 *
 * The question is the library's, airlock_addr_is_own: would the kernel
 * deliver a packet to this address here? Its answer depends only on the
 * namespace's addresses, routes (the local ones above all), routing rules,
 * nexthops and links, and the kernel says whenever one of those changes on
 * an rtnetlink socket subscribed to them. So the proxy keeps the answers it
 * got and forgets all of them at the first such message: an address added
 * to an interface is own from the next decision on, as before, and a name
 * that keeps resolving to the same public address costs no system call.
 *
 * Ordering is what keeps every decision as it was: before an answer is
 * taken from the cache, the socket is read (one non-blocking recv when
 * nothing changed). A change the kernel made before that read is in the
 * socket's queue by then, so the cache is dropped and the kernel is asked
 * afresh, exactly as if nothing were cached. The loop also reads the socket
 * when it is readable, so the queue does not fill between decisions; a
 * queue that overflowed anyway (ENOBUFS) drops the cache all the same.
 *
 * The socket is opened before the seccomp filter, which refuses netlink
 * sockets; receiving on it needs no privilege. Should it be unavailable, or
 * fail, nothing is cached and every address is asked of the kernel, as the
 * library does. Errors are never cached: an address the kernel could not
 * be asked about is refused, and asked again next time.
 */
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>

#include "egress/proxy_loop.h"
#include "util/util.h"

/* What can change the kernel's answer: links (a link going down takes its
 * routes without a message per route), addresses and routes of both
 * families, IPv4 rules here; IPv6 rules and nexthop objects by membership
 * below. */
#define OWN_GROUPS                                                                     \
	(RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE |     \
	 RTMGRP_IPV6_ROUTE | RTMGRP_IPV4_RULE)

/* Messages read per call: the first one already drops the cache, the rest
 * only keep the queue short. */
#define OWN_DRAIN_MAX 64

void proxy_own_open(own_cache *oc)
{
	memset(oc, 0, sizeof(*oc));
	oc->nl = -1;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
	if (fd < 0)
		return;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = OWN_GROUPS };
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return;
	}
	static const int more[] = { RTNLGRP_IPV6_RULE, RTNLGRP_NEXTHOP };
	for (size_t i = 0; i < ARRAY_SIZE(more); i++) {
		int g = more[i];
		/* A kernel without the group has no such objects to change: only
		 * IPv6 rules are needed. */
		if (setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &g, sizeof(g)) < 0 &&
		    g == RTNLGRP_IPV6_RULE) {
			close(fd);
			return;
		}
	}
	oc->nl = fd;
}

void proxy_own_close(own_cache *oc)
{
	event_freep(&oc->ev);
	close_fd(&oc->nl);
	oc->n = 0;
}

/* Read what the kernel said; any message, or a lost one, drops every
 * answer. A socket that fails otherwise ends caching: from then on each
 * address is asked. */
static void own_drain(own_cache *oc)
{
	char buf[8192];
	for (int i = 0; oc->nl >= 0 && i < OWN_DRAIN_MAX; i++) {
		ssize_t n = recv(oc->nl, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0) {
			oc->n = 0;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0 && errno == EINTR)
			continue;
		oc->n = 0;
		if (n < 0 && errno == ENOBUFS)
			continue; /* changes were lost: dropped; the socket goes on */
		event_freep(&oc->ev);
		close_fd(&oc->nl);
		return;
	}
}

void proxy_own_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	own_drain(arg);
}

static bool same(const airlock_addr *a, const airlock_addr *b)
{
	if (a->family != b->family)
		return false;
	if (a->family == AF_INET)
		return a->v4.s_addr == b->v4.s_addr;
	return memcmp(&a->v6, &b->v6, sizeof(a->v6)) == 0;
}

int proxy_own_ask(void *ctx, const airlock_addr *a)
{
	own_cache *oc = ctx;
	own_drain(oc);
	if (oc->nl < 0)
		return airlock_addr_is_own(a);
	for (unsigned i = 0; i < oc->n; i++)
		if (same(&oc->e[i].a, a))
			return oc->e[i].own;
	int r = airlock_addr_is_own(a);
	if (r < 0 || (a->family != AF_INET && a->family != AF_INET6))
		return r;
	/* Full: the oldest entry makes room (the slots are reused in turn). */
	unsigned slot = oc->n < OWN_CACHE_MAX ? oc->n++ : oc->next++ % OWN_CACHE_MAX;
	oc->e[slot].a = *a;
	oc->e[slot].own = r;
	return r;
}
