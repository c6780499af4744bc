/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's routes (docs/service-api.md): after the core has
 * authenticated a request, svc_route decodes its raw target, the
 * Airlock-Handle header is decoded for the verbs with an id, each route's
 * body gets its cap (caps.h), and when the body is in the route's job
 * answers. Errors leave with the status of docs/service-api.md; a body
 * that does not decode is ToolValidationError naming the field.
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "airlock/ids.h"
#include "airlock/json.h"
#include "core/json_internal.h"
#include "service/routes.h"
#include "util/util.h"

/* The core's status for the error's wire class, but 404 for an
 * ExecutionRejected about an id that is not live, asked of the table
 * rather than read from the message. */
http_result svc_respond_error(svc_req *q, const airlock_error *e)
{
	airlock_error w = *e;
	http_wire_class(&w);
	unsigned status = http_error_status(&w);
	char t[AIRLOCK_ID_MAX + 1];
	if (w.cls == AIRLOCK_ERR_EXECUTION_REJECTED && q->id[0] &&
	    airlock_exec_tenant_of(q->s->exec, q->id, t, sizeof(t), NULL) < 0)
		status = HTTP_NOT_FOUND;
	return http_respond_error_status(q->r, status, &w);
}

char *svc_jdump(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

/* ---- the routes ---------------------------------------------------------------------- */

static bool verb_has_id(svc_verb v)
{
	return v != SVC_HEALTH && v != SVC_LIST && v != SVC_PROVISION && v != SVC_NONE;
}

static void route_free(void *state)
{
	svc_req *q = state;
	airlock_environment_handle_clear(&q->handle);
	free(q);
}

/* After authentication: the route, the handle, the body's cap. */
static http_result route_start(void *ctx, http_request *r, const char *method)
{
	airlock_service *s = ctx;
	svc_req *q = calloc(1, sizeof(*q));
	if (!q)
		return HTTP_CLOSE;
	q->s = s;
	q->r = r;
	http_request_set_state(r, q);
	size_t target_len = 0;
	const char *target = http_request_target(r, &target_len);
	int st = svc_route(target, target_len, method, &q->verb, q->id, &q->query, &q->query_len);
	if (st == 404)
		return http_respond_fail(r, HTTP_NOT_FOUND, AIRLOCK_ERR_TOOL_VALIDATION,
		                         "no such path (see docs/service-api.md)");
	if (st == 405)
		return http_respond_fail(r, HTTP_METHOD_NOT_ALLOWED, AIRLOCK_ERR_TOOL_VALIDATION,
		                         "method %.16s is not allowed on this path", method);
	airlock_error err = { 0 };
	if (verb_has_id(q->verb)) {
		size_t hlen = 0;
		const char *hv = http_request_header(r, "Airlock-Handle", &hlen);
		if (svc_handle_decode(hv, hlen, &q->handle, &err) < 0)
			return http_respond_error_status(r, HTTP_BAD_REQUEST, &err);
		q->has_handle = true;
		if (strcmp(q->handle.environment_id, q->id) != 0)
			return http_respond_fail(r, HTTP_BAD_REQUEST, AIRLOCK_ERR_TOOL_VALIDATION,
			                         "Airlock-Handle: its environment_id is not the path's");
	}
	/* Each route's body cap is what the route can need (caps.h says
	 * why each is that number). */
	size_t cap = q->verb == SVC_WRITE       ? s->cfg.max_write_bytes
	             : q->verb == SVC_PROVISION ? AIRLOCK_SERVICE_PROVISION_BODY_MAX
	             : q->verb == SVC_EXECUTE   ? AIRLOCK_SERVICE_EXECUTE_BODY_MAX
	                                        : AIRLOCK_SERVICE_EMPTY_BODY_MAX;
	http_request_set_body_cap(r, cap);
	return HTTP_NEXT;
}

static http_result route_handle(void *ctx, http_request *r)
{
	(void)ctx;
	svc_req *q = http_request_state(r);
	if (!q)
		return HTTP_CLOSE;
	switch (q->verb) {
	case SVC_HEALTH: return svc_do_health(q);
	case SVC_LIST: return svc_do_list(q);
	case SVC_PROVISION: return svc_do_provision(q);
	case SVC_EXECUTE: return svc_do_execute(q);
	case SVC_CANCEL: return svc_do_cancel(q);
	case SVC_DESTROY: return svc_do_destroy(q);
	case SVC_CONTAIN:
	case SVC_READ:
	case SVC_WRITE:
	case SVC_LISTDIR:
	case SVC_PROVENANCE: return svc_do_workspace(q);
	case SVC_NONE:
	default: return HTTP_CLOSE;
	}
}

const http_routes svc_routes = {
	.start = route_start,
	.handle = route_handle,
	.state_free = route_free,
};

