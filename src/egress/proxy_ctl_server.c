/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control channel's server side, in the proxy process: the service's
 * attach (a listener, its sandbox's names and policy) and detach, each
 * answered {"ok": true} or with the reason (proxy_internal.h has the
 * framing; proxy_ctl.c is the service's side).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "airlock/json.h"
#include "egress/proxy_internal.h"
#include "egress/proxy_loop.h"

int proxy_reply_on(int ctl, const char *error)
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

int proxy_reply(proxy *px, const char *error)
{
	return proxy_reply_on(px->ctl, error);
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
	if (!why && !(l->ev = event_new(px->base, l->fd, EV_READ | EV_PERSIST, proxy_accept_cb, l)))
		why = "attach: out of memory";
	if (!why && !(l->rate_ev = evtimer_new(px->base, proxy_rate_cb, l)))
		why = "attach: out of memory";
	if (!why && event_add(l->ev, NULL) < 0)
		why = "attach: event";
	if (why) {
		event_freep(&l->rate_ev);
		event_freep(&l->ev);
		close_fd(&l->fd);
		proxy_listener_put(l);
		return why;
	}
	l->next = px->listeners;
	px->listeners = l;
	return NULL;
}

void proxy_ctl_cb(evutil_socket_t fd, short what, void *arg)
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
			proxy_listener_detach(l);
	} else {
		why = "unknown request";
	}
	if (lfd >= 0)
		close(lfd); /* attach kept its own copy */
	json_decref(o);
	if (proxy_reply(px, why) < 0) {
		px->stopping = true;
		event_base_loopbreak(px->base);
	}
}

