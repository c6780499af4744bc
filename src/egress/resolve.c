/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The production resolver behind airlock_egress_evaluate: c-ares, one A and
 * one AAAA query per name, against the operator's servers or the system's
 * (the specification, "What the proxy does on CONNECT": resolve at the
 * proxy, with the platform's resolver, once).
 *
 * "Once" is meant literally, because the DNS rebinding test counts queries:
 * no search list, no /etc/hosts, no HOSTALIASES, one try per server. A
 * resolution that does not complete in full (a query times out or a server
 * fails) is a failure, not a partial answer: the evaluation checks every
 * address the name has, and an answer missing half of them was not checked.
 */
#include "airlock/egress.h"

#include <ares.h>
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "egress/resolve.h"
#include "util/util.h"

struct airlock_egress_resolver {
	ares_channel channel;
};

static int cares_error(airlock_error *err, int status, const char *what)
{
	int e = status == ARES_ENOMEM ? ENOMEM : EIO;
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "resolver: %s: %s", what,
	                         ares_strerror(status));
}

/* One "ADDR[:PORT]" entry: a dotted quad with an optional port, a bare IPv6
 * address, or a bracketed one with an optional port. Nothing else: no names
 * (resolving the resolver would need a resolver), no zone. */
static bool parse_server(const char *s, size_t len, struct ares_addr_port_node *ret)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *port = NULL;
	size_t hlen;

	if (len == 0)
		return false;
	if (s[0] == '[') {
		const char *close = memchr(s, ']', len);
		if (!close)
			return false;
		hlen = (size_t)(close - s - 1);
		s++;
		size_t rest = len - hlen - 2;
		if (rest > 0) {
			if (close[1] != ':')
				return false;
			port = close + 2;
		}
		if (hlen == 0 || hlen >= sizeof(host))
			return false;
		memcpy(host, s, hlen);
		host[hlen] = 0;
		if (inet_pton(AF_INET6, host, &ret->addr.addr6) != 1)
			return false;
		ret->family = AF_INET6;
		len = rest > 0 ? rest - 1 : 0;
	} else {
		const char *colon = memchr(s, ':', len);
		const char *second = colon ? memchr(colon + 1, ':', len - (size_t)(colon + 1 - s)) : NULL;
		hlen = colon && !second ? (size_t)(colon - s) : len;
		if (hlen == 0 || hlen >= sizeof(host))
			return false;
		memcpy(host, s, hlen);
		host[hlen] = 0;
		if (colon && !second) {
			if (inet_pton(AF_INET, host, &ret->addr.addr4) != 1)
				return false;
			ret->family = AF_INET;
			port = colon + 1;
			len = len - hlen - 1;
		} else if (inet_pton(AF_INET, host, &ret->addr.addr4) == 1) {
			ret->family = AF_INET;
		} else if (inet_pton(AF_INET6, host, &ret->addr.addr6) == 1) {
			ret->family = AF_INET6;
		} else {
			return false;
		}
	}

	int p = 53;
	if (port) {
		/* len is the port's length here. */
		if (len == 0 || len > 5)
			return false;
		p = 0;
		for (size_t i = 0; i < len; i++) {
			if (port[i] < '0' || port[i] > '9')
				return false;
			p = p * 10 + (port[i] - '0');
		}
		if (p < 1 || p > 65535)
			return false;
	}
	ret->udp_port = p;
	ret->tcp_port = p;
	return true;
}

static int set_servers(ares_channel channel, const char *servers, airlock_error *err)
{
	struct ares_addr_port_node nodes[AIRLOCK_EGRESS_SERVERS_MAX];
	char shown[64];
	size_t n = 0;
	const char *s = servers;

	memset(nodes, 0, sizeof(nodes));
	for (;;) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		if (n == AIRLOCK_EGRESS_SERVERS_MAX)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "resolver: more than %d servers", AIRLOCK_EGRESS_SERVERS_MAX);
		if (!parse_server(s, len, &nodes[n]))
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "resolver: \"%s\" is not ADDR[:PORT] (a numeric "
			                         "address, IPv6 in brackets when a port follows)",
			                         util_escape(shown, sizeof(shown), s, len));
		if (n > 0)
			nodes[n - 1].next = &nodes[n];
		n++;
		if (!comma)
			break;
		s = comma + 1;
	}
	int st = ares_set_servers_ports(channel, nodes);
	if (st != ARES_SUCCESS)
		return cares_error(err, st, "setting servers");
	return 0;
}

int egress_channel_new(const char *servers, ares_sock_state_cb sock_cb, void *sock_data,
                       ares_channel *ret, airlock_error *err)
{
	int st = ares_library_init(ARES_LIB_INIT_ALL);
	if (st != ARES_SUCCESS)
		return cares_error(err, st, "library init");

	struct ares_options opts;
	memset(&opts, 0, sizeof(opts));
	/* No search list, no HOSTALIASES: the name asked is the name checked. */
	opts.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES;
	opts.timeout = AIRLOCK_EGRESS_RESOLVE_TIMEOUT_MS;
	opts.tries = 1;
	/* DNS only: /etc/hosts is the proxy host's file, not the platform's
	 * resolver, and it would answer without a query. */
	opts.lookups = (char *)(uintptr_t) "b";
	int mask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_LOOKUPS;
	if (sock_cb) {
		opts.sock_state_cb = sock_cb;
		opts.sock_state_cb_data = sock_data;
		mask |= ARES_OPT_SOCK_STATE_CB;
	}
	ares_channel channel;
	st = ares_init_options(&channel, &opts, mask);
	if (st != ARES_SUCCESS) {
		ares_library_cleanup();
		return cares_error(err, st, "init");
	}
	if (servers) {
		int e = set_servers(channel, servers, err);
		if (e < 0) {
			egress_channel_free(channel);
			return e;
		}
	}
	*ret = channel;
	return 0;
}

void egress_channel_free(ares_channel channel)
{
	ares_destroy(channel);
	ares_library_cleanup();
}

int airlock_egress_resolver_new(const char *servers, airlock_egress_resolver **ret,
                                airlock_error *err)
{
	if (!ret)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "resolver");

	airlock_egress_resolver *r = calloc(1, sizeof(*r));
	if (!r)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "resolver");
	int e = egress_channel_new(servers, NULL, NULL, &r->channel, err);
	if (e < 0) {
		free(r);
		return e;
	}
	*ret = r;
	return 0;
}

void airlock_egress_resolver_free(airlock_egress_resolver *r)
{
	if (!r)
		return;
	egress_channel_free(r->channel);
	free(r);
}

static void lookup_fail(egress_answers *l, int e)
{
	if (!l->error)
		l->error = e;
}

static void lookup_add(egress_answers *l, int family, const void *addr)
{
	if (l->n == ARRAY_SIZE(l->out)) {
		l->overflow = true;
		return;
	}
	airlock_addr *a = &l->out[l->n++];
	memset(a, 0, sizeof(*a));
	a->family = family;
	if (family == AF_INET)
		memcpy(&a->v4, addr, sizeof(a->v4));
	else
		memcpy(&a->v6, addr, sizeof(a->v6));
}

static void on_answer(void *arg, int status, int timeouts, unsigned char *abuf, int alen, bool v6)
{
	egress_answers *l = arg;
	l->pending--;

	/* The name exists without records of this type, or does not exist:
	 * no addresses from this query, which is not a failure on its own. */
	if (status == ARES_ENODATA || status == ARES_ENOTFOUND)
		return;
	if (status == ARES_ETIMEOUT) {
		lookup_fail(l, -ETIMEDOUT);
		return;
	}
	if (status == ARES_ENOMEM) {
		lookup_fail(l, -ENOMEM);
		return;
	}
	if (status != ARES_SUCCESS) {
		lookup_fail(l, -EIO);
		return;
	}

	int n = EGRESS_ANSWERS_MAX;
	if (v6) {
		struct ares_addr6ttl ttls[EGRESS_ANSWERS_MAX];
		int st = ares_parse_aaaa_reply(abuf, alen, NULL, ttls, &n);
		if (st == ARES_ENODATA)
			return;
		if (st != ARES_SUCCESS) {
			lookup_fail(l, st == ARES_ENOMEM ? -ENOMEM : -EIO);
			return;
		}
		for (int i = 0; i < n; i++)
			lookup_add(l, AF_INET6, &ttls[i].ip6addr);
	} else {
		struct ares_addrttl ttls[EGRESS_ANSWERS_MAX];
		int st = ares_parse_a_reply(abuf, alen, NULL, ttls, &n);
		if (st == ARES_ENODATA)
			return;
		if (st != ARES_SUCCESS) {
			lookup_fail(l, st == ARES_ENOMEM ? -ENOMEM : -EIO);
			return;
		}
		for (int i = 0; i < n; i++)
			lookup_add(l, AF_INET, &ttls[i].ipaddr);
	}
	/* ares_parse_*_reply stops at the array's size without saying so: a
	 * full array may mean a longer answer. */
	if (n == EGRESS_ANSWERS_MAX)
		l->overflow = true;
}

void egress_lookup_on_a(void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	on_answer(arg, status, timeouts, abuf, alen, false);
}

void egress_lookup_on_aaaa(void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	on_answer(arg, status, timeouts, abuf, alen, true);
}

/* Drive the channel until both queries have answered or the deadline
 * passes; then cancel what is left (its callback runs with ECANCELLED). */
static void run_channel(ares_channel channel, egress_answers *l, int64_t deadline)
{
	while (l->pending > 0) {
		ares_socket_t socks[ARES_GETSOCK_MAXNUM];
		struct pollfd pfd[ARES_GETSOCK_MAXNUM];
		/* The bitmask is read as unsigned: c-ares's ARES_GETSOCK_WRITABLE
		 * shifts a signed 1 into the sign bit for the last socket. */
		unsigned bits = (unsigned)ares_getsock(channel, socks, ARES_GETSOCK_MAXNUM);
		nfds_t nfds = 0;

		for (unsigned i = 0; i < ARES_GETSOCK_MAXNUM; i++) {
			short ev = 0;
			if (bits & (1u << i))
				ev |= POLLIN;
			if (bits & (1u << (i + ARES_GETSOCK_MAXNUM)))
				ev |= POLLOUT;
			if (!ev)
				continue;
			pfd[nfds].fd = socks[i];
			pfd[nfds].events = ev;
			pfd[nfds].revents = 0;
			nfds++;
		}

		int64_t left = deadline - util_monotonic_ms();
		if (left <= 0)
			break;
		struct timeval maxtv = { .tv_sec = (time_t)(left / 1000),
			                 .tv_usec = (suseconds_t)(left % 1000) * 1000 };
		struct timeval tv;
		struct timeval *t = ares_timeout(channel, &maxtv, &tv);
		int64_t wait = (int64_t)t->tv_sec * 1000 + t->tv_usec / 1000;
		if (wait > left)
			wait = left;

		int pr = poll(pfd, nfds, (int)wait);
		if (pr < 0 && errno != EINTR) {
			lookup_fail(l, -errno);
			break;
		}

		fd_set rfds, wfds;
		FD_ZERO(&rfds);
		FD_ZERO(&wfds);
		ares_socket_t rfd[ARES_GETSOCK_MAXNUM], wfd[ARES_GETSOCK_MAXNUM];
		size_t nr = 0, nw = 0;
		for (nfds_t i = 0; pr > 0 && i < nfds; i++) {
			if (pfd[i].revents & (POLLIN | POLLERR | POLLHUP))
				rfd[nr++] = pfd[i].fd;
			if (pfd[i].revents & (POLLOUT | POLLERR | POLLHUP))
				wfd[nw++] = pfd[i].fd;
		}
		/* ares_process_fd takes one readable and one writable socket per
		 * call; ARES_SOCKET_BAD for neither processes timeouts only. */
		size_t rounds = nr > nw ? nr : nw;
		if (rounds == 0)
			ares_process_fd(channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
		for (size_t i = 0; i < rounds; i++)
			ares_process_fd(channel, i < nr ? rfd[i] : ARES_SOCKET_BAD,
			                i < nw ? wfd[i] : ARES_SOCKET_BAD);
	}
	if (l->pending > 0) {
		lookup_fail(l, -ETIMEDOUT);
		ares_cancel(channel);
	}
}

int airlock_egress_resolver_resolve(void *ctx, const char *name, airlock_addr *ret, size_t max,
                                    size_t *ret_n)
{
	airlock_egress_resolver *r = ctx;

	if (!r || !name || !ret || !ret_n)
		return -EINVAL;
	egress_answers l;
	memset(&l, 0, sizeof(l));
	l.pending = 2;

	int64_t deadline = util_monotonic_ms() + AIRLOCK_EGRESS_RESOLVE_TIMEOUT_MS;
	/* ares_query, not ares_search: exactly this name, no search list. */
	ares_query(r->channel, name, 1 /* C_IN */, 1 /* T_A */, egress_lookup_on_a, &l);
	ares_query(r->channel, name, 1 /* C_IN */, 28 /* T_AAAA */, egress_lookup_on_aaaa, &l);
	run_channel(r->channel, &l, deadline);

	return egress_answers_take(&l, ret, max, ret_n);
}

int egress_answers_take(const egress_answers *l, airlock_addr *ret, size_t max, size_t *ret_n)
{
	if (l->error)
		return l->error;
	/* More addresses than the caller can hold: the ones left over would go
	 * unchecked, so the resolution fails rather than being cut short. */
	if (l->overflow || l->n > max)
		return -E2BIG;
	if (l->n == 0)
		return -ENOENT;
	memcpy(ret, l->out, l->n * sizeof(l->out[0]));
	*ret_n = l->n;
	return 0;
}
