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

http_result svc_respond_json(svc_req *q, unsigned status, json_t *o, const char *what)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (s)
		return http_respond_json(q->r, status, s);
	airlock_error err = { 0 };
	airlock_error_set(&err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, ENOMEM, "%s: its answer", what);
	return svc_respond_error(q, &err);
}

/* ---- the routes ---------------------------------------------------------------------- */

/* The route table, indexed by the verb svc_route decodes from the method
 * and the path: each route's job, whether its path names a sandbox (then
 * its Airlock-Handle header is decoded and must name the same one), and
 * its body's cap, what the route can need (caps.h says why each is that
 * number; 0 for the write route: the service's max_write_bytes). */
typedef struct {
	http_result (*job)(svc_req *q);
	bool has_id;
	size_t body_cap;
} svc_route_entry;

static const svc_route_entry route_table[] = {
	[SVC_HEALTH] = { svc_do_health, false, AIRLOCK_SERVICE_EMPTY_BODY_MAX },
	[SVC_LIST] = { svc_do_list, false, AIRLOCK_SERVICE_EMPTY_BODY_MAX },
	[SVC_PROVISION] = { svc_do_provision, false, AIRLOCK_SERVICE_PROVISION_BODY_MAX },
	[SVC_EXECUTE] = { svc_do_execute, true, AIRLOCK_SERVICE_EXECUTE_BODY_MAX },
	[SVC_CANCEL] = { svc_do_cancel, true, AIRLOCK_SERVICE_EMPTY_BODY_MAX },
	[SVC_DESTROY] = { svc_do_destroy, true, AIRLOCK_SERVICE_EMPTY_BODY_MAX },
	[SVC_CONTAIN] = { svc_do_workspace, true, AIRLOCK_SERVICE_EMPTY_BODY_MAX },
	[SVC_READ] = { svc_do_workspace, true, AIRLOCK_SERVICE_EMPTY_BODY_MAX },
	[SVC_WRITE] = { svc_do_workspace, true, 0 },
	[SVC_LISTDIR] = { svc_do_workspace, true, AIRLOCK_SERVICE_EMPTY_BODY_MAX },
	[SVC_PROVENANCE] = { svc_do_workspace, true, AIRLOCK_SERVICE_EMPTY_BODY_MAX },
	[SVC_STREAM] = { svc_do_workspace_stream, true, AIRLOCK_SERVICE_EMPTY_BODY_MAX },
};

static const svc_route_entry *route_of(svc_verb v)
{
	static const svc_route_entry none = { NULL, false, AIRLOCK_SERVICE_EMPTY_BODY_MAX };
	return (size_t)v < ARRAY_SIZE(route_table) && route_table[v].job ? &route_table[v] : &none;
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
	const svc_route_entry *e = route_of(q->verb);
	airlock_error err = { 0 };
	if (e->has_id) {
		size_t hlen = 0;
		const char *hv = http_request_header(r, "Airlock-Handle", &hlen);
		if (svc_handle_decode(hv, hlen, &q->handle, &err) < 0)
			return http_respond_error_status(r, HTTP_BAD_REQUEST, &err);
		q->has_handle = true;
		if (strcmp(q->handle.environment_id, q->id) != 0)
			return http_respond_fail(r, HTTP_BAD_REQUEST, AIRLOCK_ERR_TOOL_VALIDATION,
			                         "Airlock-Handle: its environment_id is not the path's");
	}
	http_request_set_body_cap(r, q->verb == SVC_WRITE ? s->cfg.max_write_bytes : e->body_cap);
	return HTTP_NEXT;
}

static http_result route_handle(void *ctx, http_request *r)
{
	(void)ctx;
	svc_req *q = http_request_state(r);
	if (!q)
		return HTTP_CLOSE;
	const svc_route_entry *e = route_of(q->verb);
	return e->job ? e->job(q) : HTTP_CLOSE;
}

const http_routes svc_routes = {
	.start = route_start,
	.handle = route_handle,
	.state_free = route_free,
};

