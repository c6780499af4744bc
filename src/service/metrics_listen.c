/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics' operator listener: GET /metrics on its own socket, one
 * polling thread, a few connections.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "service/metrics_state.h"
#include "util/util.h"

struct service_metrics_listener {
	service_metrics *m;
	size_t (*live_fn)(void *);
	void *live_arg;
	struct MHD_Daemon *daemon;
};

static enum MHD_Result metrics_answer(struct MHD_Connection *c, unsigned status, char *body,
                                      size_t len, const char *type)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	if (type)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	enum MHD_Result q = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return q;
}

/* Answered on the first call, before any body: a scrape has none, and
 * whatever a client sends with it is not read. */
static enum MHD_Result metrics_request(void *cls, struct MHD_Connection *c, const char *url,
                                       const char *method, const char *version,
                                       const char *upload, size_t *upload_size, void **req_cls)
{
	service_metrics_listener *l = cls;
	(void)version;
	(void)upload;
	(void)upload_size;
	(void)req_cls;
	if (strcmp(url, "/metrics") != 0)
		return metrics_answer(c, MHD_HTTP_NOT_FOUND, strdup("not found\n"), 10, "text/plain");
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return metrics_answer(c, MHD_HTTP_METHOD_NOT_ALLOWED, strdup("GET only\n"), 9,
		                      "text/plain");
	size_t len = 0;
	char *text = service_metrics_render(l->m, l->live_fn ? l->live_fn(l->live_arg) : 0, &len);
	if (!text)
		return MHD_NO;
	return metrics_answer(c, MHD_HTTP_OK, text, len, "text/plain; version=0.0.4; charset=utf-8");
}

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
	 * client costs a connection slot (16), never a thread. */
	l->daemon = MHD_start_daemon(
	        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL, metrics_request, l,
	        MHD_OPTION_LISTEN_SOCKET, listen_fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)16,
	        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	        (size_t)16384, MHD_OPTION_END);
	if (!l->daemon) {
		close(listen_fd);
		free(l);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "the metrics listener did not start");
	}
	*ret = l;
	return 0;
}

void service_metrics_listener_free(service_metrics_listener *l)
{
	if (!l)
		return;
	/* Closes the listening socket too. */
	MHD_stop_daemon(l->daemon);
	free(l);
}
