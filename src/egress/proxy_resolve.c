/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proxy's lookups, driven by its event loop: no thread and no blocking
 * call per CONNECT. Each lookup is the production resolver's (the same
 * channel options, the same two queries, the same reading of the answers:
 * src/egress/resolve.h) on a c-ares channel of its own, whose sockets the
 * loop watches (ARES_OPT_SOCK_STATE_CB) and hands to ares_process_fd when
 * they are ready, and whose retransmits and timeouts a timer of its own
 * drives.
 *
 * A channel per lookup, not one for the process: c-ares keeps a channel's
 * UDP socket for every query to the same server, so one shared channel
 * would ask every name from one source port for the proxy's life, and a
 * spoofed answer would only have to guess the query id. A channel of its
 * own also means a lookup's queries, sockets and timers end with it: a
 * slow or silent server holds one lookup's slot (the check caps bound how
 * many there are, per sandbox and in all) and never anyone else's, and the
 * loop's work for a lookup is a few events, not a wait.
 *
 * Like airlock_egress_resolver_resolve, a lookup that has not completed
 * within AIRLOCK_EGRESS_RESOLVE_TIMEOUT_MS in all fails with -ETIMEDOUT,
 * whatever c-ares would still try.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "airlock/caps.h"
#include "egress/proxy_loop.h"
#include "egress/resolve.h"
#include "util/util.h"

/* A channel opens a UDP socket per server it asks and a TCP one per server
 * that truncates; the servers are at most AIRLOCK_EGRESS_SERVERS_MAX. */
#define LOOKUP_SOCKS_MAX (2 * AIRLOCK_EGRESS_SERVERS_MAX)

struct proxy_lookup {
	struct event_base *base;
	/* /etc/resolv.conf as it was when the channel read it (the file c-ares
	 * reads at init, for the servers or, with servers given, the options),
	 * or the errno that stat gave: a spare channel is used only while the
	 * file is unchanged. */
	struct stat conf;
	int conf_errno;
	ares_channel channel;
	bool has_channel;
	egress_answers ans;
	struct event *timer;
	struct {
		int fd;
		struct event *ev;
	} socks[LOOKUP_SOCKS_MAX];
	unsigned n_socks;
	bool broken; /* a socket could not be watched: the lookup fails */
	int64_t deadline;
	airlock_addr *out;
	size_t max;
	proxy_lookup_done_fn done;
	void *arg;
};

static void lookup_destroy(proxy_lookup *l)
{
	/* ares_destroy closes the sockets and tells sock_state, which frees
	 * their events; the queries' callbacks run with ARES_EDESTRUCTION and
	 * only touch l->ans. */
	if (l->has_channel)
		egress_channel_free(l->channel);
	for (unsigned i = 0; i < l->n_socks; i++)
		event_freep(&l->socks[i].ev);
	event_freep(&l->timer);
	free(l);
}

void proxy_lookup_cancel(proxy_lookup *l)
{
	if (l)
		lookup_destroy(l);
}

/* Both queries answered, failed, or the time is up: the result, as
 * airlock_egress_resolver_resolve gives it, to the caller; then gone. The
 * caller is told first: its next step (the dial) is on the CONNECT's path,
 * closing the channel's sockets is not. No query is left to answer by
 * then (or the deadline has passed: l->done is not called twice, the
 * channel goes with l). */
static void lookup_finish(proxy_lookup *l, int fail)
{
	if (fail && !l->ans.error)
		l->ans.error = fail;
	size_t n = 0;
	int r = egress_answers_take(&l->ans, l->out, l->max, &n);
	l->done(l->arg, r, n);
	lookup_destroy(l);
}

/* After c-ares has run: finished, or the timer set for its next timeout
 * (or the lookup's deadline, when nearer). Never called from inside a
 * c-ares callback, so the channel may be destroyed here. */
static void lookup_step(proxy_lookup *l)
{
	if (l->ans.pending <= 0) {
		lookup_finish(l, 0);
		return;
	}
	if (l->broken) {
		lookup_finish(l, -ENOMEM);
		return;
	}
	int64_t left = l->deadline - util_monotonic_ms();
	if (left <= 0) {
		lookup_finish(l, -ETIMEDOUT);
		return;
	}
	struct timeval maxtv = { .tv_sec = (time_t)(left / 1000),
		                 .tv_usec = (suseconds_t)(left % 1000) * 1000 };
	struct timeval tv;
	struct timeval *t = ares_timeout(l->channel, &maxtv, &tv);
	evtimer_add(l->timer, t);
}

static void lookup_sock_cb(evutil_socket_t fd, short what, void *arg)
{
	proxy_lookup *l = arg;
	ares_process_fd(l->channel, (what & EV_READ) ? fd : ARES_SOCKET_BAD,
	                (what & EV_WRITE) ? fd : ARES_SOCKET_BAD);
	lookup_step(l);
}

static void lookup_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	proxy_lookup *l = arg;
	(void)fd;
	(void)what;
	/* Neither socket: the channel's timeouts only. */
	ares_process_fd(l->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	lookup_step(l);
}

/* c-ares opened, changed or closed one of the lookup's sockets. */
static void lookup_sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
	proxy_lookup *l = data;
	unsigned i = 0;
	while (i < l->n_socks && l->socks[i].fd != fd)
		i++;
	if (i < l->n_socks)
		event_freep(&l->socks[i].ev);
	if (!readable && !writable) {
		if (i < l->n_socks)
			l->socks[i] = l->socks[--l->n_socks];
		return;
	}
	if (i == l->n_socks) {
		if (l->n_socks == LOOKUP_SOCKS_MAX) {
			l->broken = true;
			return;
		}
		l->n_socks++;
		l->socks[i].fd = fd;
	}
	short ev = EV_PERSIST | (readable ? EV_READ : 0) | (writable ? EV_WRITE : 0);
	l->socks[i].ev = event_new(l->base, fd, ev, lookup_sock_cb, l);
	if (!l->socks[i].ev || event_add(l->socks[i].ev, NULL) < 0)
		l->broken = true;
}

/* The file c-ares reads when a channel is made (its path in c-ares). */
#define RESOLV_CONF "/etc/resolv.conf"

static void conf_stamp(struct stat *st, int *ret_errno)
{
	memset(st, 0, sizeof(*st));
	*ret_errno = stat(RESOLV_CONF, st) < 0 ? errno : 0;
}

static bool conf_unchanged(const proxy_lookup *l)
{
	struct stat st;
	int e;
	conf_stamp(&st, &e);
	if (e || l->conf_errno)
		return e == l->conf_errno;
	return st.st_dev == l->conf.st_dev && st.st_ino == l->conf.st_ino &&
	       st.st_size == l->conf.st_size && st.st_mtim.tv_sec == l->conf.st_mtim.tv_sec &&
	       st.st_mtim.tv_nsec == l->conf.st_mtim.tv_nsec &&
	       st.st_ctim.tv_sec == l->conf.st_ctim.tv_sec &&
	       st.st_ctim.tv_nsec == l->conf.st_ctim.tv_nsec;
}

/* A lookup with its channel made and no query asked yet. */
static int lookup_new(struct event_base *base, const char *servers, proxy_lookup **ret)
{
	proxy_lookup *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->base = base;
	l->timer = evtimer_new(base, lookup_timer_cb, l);
	if (!l->timer) {
		free(l);
		return -ENOMEM;
	}
	/* Stamped before the read: a change in between makes the stamp stale,
	 * and the channel is then made again rather than used. */
	conf_stamp(&l->conf, &l->conf_errno);
	airlock_error err = { 0 };
	int r = egress_channel_new(servers, lookup_sock_state, l, &l->channel, &err);
	if (r < 0) {
		lookup_destroy(l);
		return r;
	}
	l->has_channel = true;
	*ret = l;
	return 0;
}

void proxy_lookup_prepare(struct event_base *base, const char *servers, proxy_lookup **spare)
{
	if (!*spare)
		(void)lookup_new(base, servers, spare);
}

int proxy_lookup_start(struct event_base *base, const char *servers, proxy_lookup **spare,
                       const char *name, airlock_addr *out, size_t max,
                       proxy_lookup_done_fn done, void *arg, proxy_lookup **ret)
{
	/* The spare, made while the loop had nothing better to do, when the
	 * configuration it read is still the file's: a channel made now would
	 * be the same. It is never used twice (one channel, one lookup). */
	proxy_lookup *l = *spare;
	*spare = NULL;
	if (l && !conf_unchanged(l)) {
		lookup_destroy(l);
		l = NULL;
	}
	if (!l) {
		int r = lookup_new(base, servers, &l);
		if (r < 0)
			return r;
	}
	l->out = out;
	l->max = max;
	l->done = done;
	l->arg = arg;
	l->deadline = util_monotonic_ms() + AIRLOCK_EGRESS_RESOLVE_TIMEOUT_MS;
	*ret = l;
	l->ans.pending = 2;
	/* ares_query, not ares_search: exactly this name, no search list. An
	 * answer may come at once (inside ares_query, on a local failure):
	 * lookup_step then finishes it, before the caller's next step. */
	ares_query(l->channel, name, 1 /* C_IN */, 1 /* T_A */, egress_lookup_on_a, &l->ans);
	ares_query(l->channel, name, 1 /* C_IN */, 28 /* T_AAAA */, egress_lookup_on_aaaa,
	           &l->ans);
	return 0;
}

void proxy_lookup_kick(proxy_lookup *l)
{
	lookup_step(l);
}
