/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics' operator listener: GET /metrics on its own socket, the HTTP
 * core's metrics listener (src/http/metrics.c: the simple mode, no
 * credential) answering the service's exposition
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
	http_metrics *http;
};

static char *metrics_render(void *ctx, size_t *ret_len)
{
	service_metrics_listener *l = ctx;
	return service_metrics_render(l->m, l->live_fn ? l->live_fn(l->live_arg) : 0, ret_len);
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
	int r = http_metrics_new(listen_fd, metrics_render, l, &l->http, err);
	if (r < 0) {
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
	http_metrics_free(l->http);
	free(l);
}
