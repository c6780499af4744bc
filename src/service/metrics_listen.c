/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics' operator listener: GET /metrics on its own socket, on the
 * HTTP server core's simple mode (one polling thread, 16 connections, a
 * 10 s idle timeout, 16 KiB of header). It carries no credential: the
 * exposition holds counts, no secret and no tenant's data, and the
 * listener is reachable only where its operator put it
 * (service.metrics_listen, docs/service-metrics.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/http.h"
#include "service/metrics_state.h"
#include "util/util.h"

struct service_metrics_listener {
	service_metrics *m;
	size_t (*live_fn)(void *);
	void *live_arg;
	http_server *http;
};

static http_result metrics_text(http_request *r, unsigned status, const char *text)
{
	char *body = strdup(text);
	if (!body)
		return HTTP_CLOSE;
	return http_respond(r, status, body, strlen(body), "text/plain");
}

/* Answered at the start, before any body: a scrape has none, and whatever
 * a client sends with it is not read. */
static http_result metrics_start(void *ctx, http_request *r, const char *method)
{
	service_metrics_listener *l = ctx;
	const char *url = http_request_url(r);
	if (!url || strcmp(url, "/metrics") != 0)
		return metrics_text(r, HTTP_NOT_FOUND, "not found\n");
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return metrics_text(r, HTTP_METHOD_NOT_ALLOWED, "GET only\n");
	size_t len = 0;
	char *text = service_metrics_render(l->m, l->live_fn ? l->live_fn(l->live_arg) : 0, &len);
	if (!text)
		return HTTP_CLOSE;
	return http_respond(r, HTTP_OK, text, len, "text/plain; version=0.0.4; charset=utf-8");
}

/* Never reached: every request is answered at its start. */
static http_result metrics_handle(void *ctx, http_request *r)
{
	(void)ctx;
	(void)r;
	return HTTP_CLOSE;
}

static const http_routes metrics_routes = {
	.start = metrics_start,
	.handle = metrics_handle,
};

int service_metrics_listener_new(service_metrics *m, int listen_fd, size_t (*live_fn)(void *),
                                 void *live_arg, service_metrics_listener **ret,
                                 airlock_error *err)
{
	service_metrics_listener *l = calloc(1, sizeof(*l));
	if (!l) {
		close(listen_fd);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "metrics listener");
	}
	*l = (service_metrics_listener){ .m = m, .live_fn = live_fn, .live_arg = live_arg };
	/* One polling thread: a scrape is a copy and a format, and a slow
	 * client costs a connection slot (16), never a thread. No credential:
	 * see above. */
	http_server_config hc = {
		.name = "metrics listener",
		.listen_fd = listen_fd,
		.max_connections = 16,
		.connection_timeout_ms = 10000,
		.header_max = 16384,
		.simple = true,
	};
	int r = http_server_new(&hc, &metrics_routes, l, &l->http, err);
	if (r < 0) {
		close(listen_fd);
		free(l);
		return r;
	}
	*ret = l;
	return 0;
}

void service_metrics_listener_free(service_metrics_listener *l)
{
	if (!l)
		return;
	/* In the simple mode the daemon closes the listening socket. */
	http_server_stop(l->http, 0);
	free(l);
}
