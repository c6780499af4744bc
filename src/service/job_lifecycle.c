/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's lifecycle jobs: health, list, provision, cancel, destroy.
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
#include "service/pool.h"
#include "service/routes.h"
#include "util/fault.h"
#include "util/util.h"

/* ---- verbs without a sandbox --------------------------------------------- */

http_result svc_do_health(svc_req *q)
{
	airlock_service *s = q->s;
	pthread_mutex_lock(&s->lock);
	bool down = s->shutting_down;
	pthread_mutex_unlock(&s->lock);
	json_t *o = util_fault("service.health.answer") ?
	                    NULL :
	                    json_pack("{s:s, s:s, s:I, s:I, s:b}", "status",
	                              down ? "shutting_down" : "ok", "mechanism",
	                              airlock_exec_name(s->exec), "live",
	                              (json_int_t)airlock_exec_live(s->exec), "max_sandboxes",
	                              (json_int_t)s->cfg.max_sandboxes, "shutting_down", down);
	return svc_respond_json(q, HTTP_OK, o, "health");
}

http_result svc_do_list(svc_req *q)
{
	airlock_exec_entry *v = NULL;
	size_t n = 0;
	airlock_error err = { 0 };
	if (airlock_exec_list(q->s->exec, &v, &n, &err) < 0)
		return svc_respond_error(q, &err);
	json_t *arr = util_fault("service.list.answer") ? NULL : json_array();
	for (size_t i = 0; arr && i < n; i++) {
		char created[32], expires[32];
		util_time_format(v[i].created_at_ms, created);
		util_time_format(v[i].expires_at_ms, expires);
		json_t *e = json_pack("{s:s, s:s?, s:s?, s:I, s:s, s:s, s:b, s:b, s:b}",
		                      "environment_id", v[i].environment_id, "tenant_id",
		                      v[i].tenant_id, "run_id", v[i].run_id, "lease_epoch",
		                      (json_int_t)v[i].lease_epoch, "created_at", created,
		                      "expires_at", expires, "busy", v[i].busy, "provisioning",
		                      v[i].provisioning, "pooled", v[i].pooled);
		if (!e || json_array_append_new(arr, e) < 0) {
			json_decref(arr);
			arr = NULL;
		}
	}
	airlock_exec_list_free(v, n);
	return svc_respond_json(q, HTTP_OK, arr ? json_pack("{s:o}", "sandboxes", arr) : NULL, "list");
}

http_result svc_do_provision(svc_req *q)
{
	airlock_error err = { 0 };
	svc_provision p = { 0 };
	size_t body_len = 0;
	const unsigned char *body_in = http_request_body(q->r, &body_len);
	if (svc_provision_decode(body_in, body_len, &p, &err) < 0)
		return svc_respond_error(q, &err);
	airlock_environment_spec spec = p.spec;
	const char *want_id = p.has_environment_id ? p.environment_id : NULL;
	airlock_environment_handle h = { 0 };
	http_result mr;
	/* The warm pool first (service/pool.h): a hit is a sandbox bound to
	 * this spec at its claim, answered exactly as a provision is; a miss
	 * is the plain provision below, whose key the pool learns once the
	 * core accepted the spec. */
	int r = 0;
	if (svc_pool_take(q->s->pool, &spec, want_id, &h) != 1) {
		r = want_id ? airlock_exec_provision_as(q->s->exec, &spec, want_id, &h, &err)
		            : airlock_exec_provision(q->s->exec, &spec, &h, &err);
		if (r == 0)
			svc_pool_learn(q->s->pool, &spec);
	}
	airlock_environment_spec_clear(&spec);
	if (r < 0) {
		/* A provision names no live sandbox: a refusal is 409 (or 503). */
		q->id[0] = 0;
		return svc_respond_error(q, &err);
	}
	char *hj = util_fault("service.provision.answer") ?
	                   NULL :
	                   airlock_environment_handle_to_json(&h, &err);
	char *body = NULL;
	if (hj && asprintf(&body, "{\"handle\":%s}", hj) < 0)
		body = NULL;
	free(hj);
	if (!body) {
		/* The sandbox exists and its caller cannot be told: it goes,
		 * and the caller is told the provision failed. */
		airlock_exec_destroy(q->s->exec, &h, NULL);
		airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOMEM, "provision: the answer");
		q->id[0] = 0;
		mr = svc_respond_error(q, &err);
	} else {
		mr = http_respond_json(q->r, HTTP_CREATED, body);
	}
	airlock_environment_handle_clear(&h);
	return mr;
}

/* ---- cancel and destroy -------------------------------------------------------- */

http_result svc_do_cancel(svc_req *q)
{
	airlock_service *s = q->s;
	airlock_error err = { 0 };
	char tenant[AIRLOCK_ID_MAX + 1];
	if (airlock_exec_tenant_of(s->exec, q->id, tenant, sizeof(tenant), &err) < 0)
		return svc_respond_error(q, &err);
	bool cancelled = false;
	bool mismatch = !util_streq0(tenant, q->handle.tenant_id) || !svc_jobs_cancel(q, &cancelled);
	if (!mismatch && !cancelled) {
		/* No command ran to compare with: the handle is still compared
		 * with the sandbox's, every field, as every other verb does (the
		 * workspace check destroys on a mismatch). Only that answer
		 * counts here; any other refusal (a command that started since)
		 * leaves the answer "nothing was running". */
		airlock_error werr = { 0 };
		airlock_exec_call call = { .tenant_id = q->handle.tenant_id,
			                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
		airlock_workspace *ws = NULL;
		int r = airlock_exec_workspace(s->exec, &call, &q->handle, &ws, &werr);
		airlock_workspace_release(ws);
		if (r < 0 && werr.cls == AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED)
			return svc_respond_error(q, &werr);
	}
	if (mismatch) {
		/* The port's own rule for a handle that is not the sandbox's:
		 * destroy it, and say why. Destroy with the wrong tenant does that;
		 * a right tenant with other fields goes through the workspace
		 * check, which compares every field. */
		airlock_error derr = { 0 };
		airlock_exec_call call = { .tenant_id = q->handle.tenant_id,
			                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
		airlock_workspace *ws = NULL;
		int r = util_streq0(tenant, q->handle.tenant_id)
		                ? airlock_exec_workspace(s->exec, &call, &q->handle, &ws, &derr)
		                : airlock_exec_destroy(s->exec, &q->handle, &derr);
		airlock_workspace_release(ws);
		if (r == 0)
			airlock_error_set(&derr, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
			                  "environment %s: the cancel's handle is not the running command's",
			                  q->id);
		return svc_respond_error(q, &derr);
	}
	/* Static text: this answer needs no memory. */
	static char yes[] = "{\"cancelled\":true}", no[] = "{\"cancelled\":false}";
	return http_respond_static(q->r, HTTP_OK, cancelled ? yes : no, "application/json");
}

http_result svc_do_destroy(svc_req *q)
{
	airlock_error err = { 0 };
	if (airlock_exec_destroy(q->s->exec, &q->handle, &err) < 0)
		return svc_respond_error(q, &err);
	return http_respond(q->r, HTTP_NO_CONTENT, NULL, 0, NULL);
}

