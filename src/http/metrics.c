/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An operator's metrics listener: GET /metrics on its own socket, on the
 * core's simple mode (one polling thread, 16 connections, a 10 s idle
 * timeout, 16 KiB of header), answering its user's Prometheus text. It
 * carries no credential: an exposition holds counts, no secret and no
 * tenant's data, and the listener is reachable only where its operator
 * put it (service.metrics_listen, worker.metrics_listen).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/http.h"

typedef struct metrics_listener {
	http_metrics_render_fn render;
	void *ctx;
} metrics_listener;

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
	metrics_listener *l = ctx;
	const char *url = http_request_url(r);
	if (!url || strcmp(url, "/metrics") != 0)
		return metrics_text(r, HTTP_NOT_FOUND, "not found\n");
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return metrics_text(r, HTTP_METHOD_NOT_ALLOWED, "GET only\n");
	size_t len = 0;
	char *text = l->render(l->ctx, &len);
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

struct http_metrics {
	metrics_listener l;
	http_server *http;
};

int http_metrics_new(int listen_fd, http_metrics_render_fn render, void *ctx,
                     http_metrics **ret, airlock_error *err)
{
	http_metrics *m = calloc(1, sizeof(*m));
	if (!m) {
		close(listen_fd);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "metrics listener");
	}
	m->l = (metrics_listener){ .render = render, .ctx = ctx };
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
	int r = http_server_new(&hc, &metrics_routes, &m->l, &m->http, err);
	if (r < 0) {
		close(listen_fd);
		free(m);
		return r;
	}
	*ret = m;
	return 0;
}

void http_metrics_free(http_metrics *m)
{
	if (!m)
		return;
	/* In the simple mode the daemon closes the listening socket. */
	http_server_stop(m->http, 0);
	free(m);
}
