/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A client of the worker's API (airlock/worker_client.h): one call on the
 * remote adapter's transport (src/remote/http.c), pointed at the worker.
 * What comes back is the worker's, so nothing of it is trusted: a 2xx body
 * must be one JSON object within the decoders' cap, anything else is read
 * as the error shape or said not to be one.
 */
#include "airlock/worker_client.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "airlock/credential_file.h"
#include "airlock/json.h"
#include "remote/remote_internal.h"
#include "util/cleanup.h"

#define WORKER_CLIENT_TIMEOUT_MS 30000
/* A path the client sends: a run id (128) and a tool name escaped three
 * to one fit with room. */
#define WORKER_CLIENT_PATH_MAX 2048

static const remote_peer worker_peer = {
	.who = "worker client", .peer = "the worker", .credential = "worker token",
	.credential_required = false,
};

void airlock_worker_answer_clear(airlock_worker_answer *a)
{
	if (!a)
		return;
	free(a->json);
	memset(a, 0, sizeof(*a));
}

static bool path_valid(const char *p)
{
	size_t n = strlen(p);
	if (n > WORKER_CLIENT_PATH_MAX || strncmp(p, "/v1/", 4) != 0)
		return false;
	/* Nothing a URL could misread (a fragment, a space, a second
	 * request line): the escapes a segment needs are already made. */
	return strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~/?&=%-") ==
	       n;
}

/* The transport for cfg, with the token read from its file as a
 * credential and wiped once the transport holds its copy. */
static int client_open(const airlock_worker_client_config *cfg, remote_http **ret,
                       airlock_error *err)
{
	char *tok = NULL;
	size_t len = 0;
	if (cfg->token_file) {
		int r = airlock_credential_file_read_text(cfg->token_file, "worker token file",
		                                          AIRLOCK_CREDENTIAL_FILE_MAX, &tok, &len, err);
		if (r < 0)
			return r;
		if (len == 0) {
			free(tok);
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "worker token file %s is empty", cfg->token_file);
		}
	}
	airlock_remote_config rc = { .address = cfg->address, .credential = tok,
		                     .credential_len = len, .tls_ca_file = cfg->tls_ca_file };
	int r = remote_http_new_peer(&rc, &worker_peer, ret, err);
	if (tok) {
		explicit_bzero(tok, len);
		free(tok);
	}
	return r;
}

/* o re-encoded for people: indented, members in the worker's order, a
 * final newline. */
static char *pretty(const json_t *o)
{
	_cleanup_free_ char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!text)
		return NULL;
	size_t n = strlen(text);
	char *out = malloc(n + 2);
	if (out) {
		memcpy(out, text, n);
		out[n] = '\n';
		out[n + 1] = 0;
	}
	return out;
}

static int decode_answer(remote_http *h, const remote_response *resp, bool result,
                         airlock_worker_answer *ret, airlock_error *err)
{
	const char *addr = remote_http_address(h);
	ret->status = resp->status;
	if (resp->over_cap)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "the worker at %s answered HTTP %ld with a body over its cap",
		                         addr, resp->status);
	const char *data = (const char *)resp->body.data;
	size_t len = resp->body.len;
	if (resp->status < 200 || resp->status > 299) {
		airlock_error e = { 0 };
		if (len > 0 && airlock_error_from_json(data, len, &e, NULL) == 0 &&
		    e.cls != AIRLOCK_ERR_INVALID)
			ret->error = e;
		else
			airlock_error_set(&ret->error, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                  "HTTP %ld with a body that is not the error shape", resp->status);
		return 0;
	}
	if (len == 0)
		return 0;
	json_error_t je;
	json_t *o = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "the worker at %s answered HTTP %ld with a body that is not "
		                         "a JSON object (%s)",
		                         addr, resp->status, o ? "another JSON value" : je.text);
	}
	json_t *ec = json_object_get(o, "exit_code");
	if (result && json_is_integer(ec)) {
		ret->has_exit_code = true;
		ret->exit_code = json_integer_value(ec);
	}
	ret->json = pretty(o);
	json_decref(o);
	if (!ret->json)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the worker's answer");
	return 0;
}

static int call(const airlock_worker_client_config *cfg, const char *method, const char *path,
                const char *body, bool result, airlock_worker_answer *ret, airlock_error *err)
{
	if (!cfg || !method || !path || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0,
		                         "worker client: a configuration, a method and a path are "
		                         "required");
	if (!path_valid(path))
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0,
		                         "worker client: the path is not /v1/... of at most %d "
		                         "URL-safe bytes",
		                         WORKER_CLIENT_PATH_MAX);
	remote_http *h = NULL;
	int r = client_open(cfg, &h, err);
	if (r < 0)
		return r;
	remote_call c = { .method = method, .path = path, .body = body,
		          .body_len = body ? strlen(body) : 0, .has_body = body != NULL,
		          .content_type = "application/json",
		          .timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : WORKER_CLIENT_TIMEOUT_MS,
		          .max_body = (size_t)AIRLOCK_JSON_INPUT_MAX, .watch_fds = { -1, -1 } };
	remote_response resp;
	airlock_worker_answer a = { 0 };
	r = remote_http_perform(h, &c, &resp, err);
	if (r == 0)
		r = decode_answer(h, &resp, result, &a, err);
	remote_response_clear(&resp);
	remote_http_free(h);
	if (r < 0) {
		airlock_worker_answer_clear(&a);
		return r;
	}
	*ret = a;
	return 0;
}

int airlock_worker_client_call(const airlock_worker_client_config *cfg, const char *method,
                               const char *path, const char *body, airlock_worker_answer *ret,
                               airlock_error *err)
{
	return call(cfg, method, path, body, false, ret, err);
}

/* A path segment: every byte but RFC 3986's unreserved ones escaped, and
 * a segment of dots alone ("." or "..") escaped too, so no client or
 * server on the way reads it as a step up the path. */
static char *segment(const char *s)
{
	if (strspn(s, ".") == strlen(s)) {
		size_t n = strlen(s);
		char *out = malloc(3 * n + 1);
		if (out) {
			for (size_t i = 0; i < n; i++)
				memcpy(out + 3 * i, "%2E", 3);
			out[3 * n] = 0;
		}
		return out;
	}
	return remote_query_escape(s);
}

int airlock_worker_client_tool_call(const airlock_worker_client_config *cfg,
                                    const airlock_worker_tool_request *req,
                                    airlock_worker_answer *ret, airlock_error *err)
{
	if (!req || !req->run_id || !*req->run_id || !req->tool || !*req->tool ||
	    !req->arguments_json || req->epoch < 0 || req->deadline_ms < 0)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0,
		                         "worker client: a tool call needs a run id, a tool name, an "
		                         "epoch >= 0 and its arguments");
	size_t alen = strlen(req->arguments_json);
	if (alen > AIRLOCK_JSON_INPUT_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "the tool's arguments are over %u bytes",
		                         AIRLOCK_JSON_INPUT_MAX);
	json_error_t je;
	json_t *args = json_loadb(req->arguments_json, alen, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(args)) {
		int r = airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                          "the tool's arguments must be a JSON object "
		                          "({\"command\": [\"echo\", \"hi\"]}): %s",
		                          args ? "another JSON value" : je.text);
		json_decref(args);
		return r;
	}
	json_t *body = json_pack("{s:I}", "epoch", (json_int_t)req->epoch);
	bool ok = body != NULL;
	if (ok && req->tenant_id)
		ok = json_object_set_new(body, "tenant_id", json_string(req->tenant_id)) == 0;
	if (ok && req->network_enabled)
		ok = json_object_set_new(body, "network_enabled", json_true()) == 0;
	if (ok && req->deadline_ms > 0)
		ok = json_object_set_new(body, "deadline_ms", json_integer(req->deadline_ms)) == 0;
	if (ok)
		ok = json_object_set(body, "arguments", args) == 0;
	json_decref(args);
	_cleanup_free_ char *text = ok ? json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(body);
	_cleanup_free_ char *run = segment(req->run_id);
	_cleanup_free_ char *tool = segment(req->tool);
	_cleanup_free_ char *path = NULL;
	if (!text || !run || !tool ||
	    asprintf(&path, "/v1/runs/%s/tools/%s", run, tool) < 0) {
		path = NULL;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker client: tool call");
	}
	if (strlen(path) > WORKER_CLIENT_PATH_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "the run id and the tool name are too long for a path (%d "
		                         "bytes escaped)",
		                         WORKER_CLIENT_PATH_MAX);
	return call(cfg, "POST", path, text, true, ret, err);
}

int airlock_worker_client_health(const airlock_worker_client_config *cfg,
                                 airlock_worker_health *ret, airlock_error *err)
{
	airlock_worker_answer a = { 0 };
	int r = call(cfg, "GET", "/v1/health", NULL, false, &a, err);
	if (r < 0)
		return r;
	if (a.status != 200) {
		r = airlock_error_wrap(err, a.error.cls, &a.error, "the worker at %s answered HTTP %ld",
		                       cfg->address, a.status);
		airlock_worker_answer_clear(&a);
		return r;
	}
	json_t *o = a.json ? json_loads(a.json, 0, NULL) : NULL;
	airlock_worker_answer_clear(&a);
	airlock_worker_health h = { 0 };
	const char *db = json_string_value(json_object_get(o, "database"));
	const char *mode = json_string_value(json_object_get(o, "auth_mode"));
	json_t *v = json_object_get(o, "schema_version");
	bool ok = db && mode && strlen(db) < sizeof(h.database) &&
	          strlen(mode) < sizeof(h.auth_mode) && json_is_integer(v);
	if (ok) {
		snprintf(h.database, sizeof(h.database), "%s", db);
		snprintf(h.auth_mode, sizeof(h.auth_mode), "%s", mode);
		h.schema_version = json_integer_value(v);
	}
	json_decref(o);
	if (!ok)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "the worker at %s answered its health without database, "
		                         "schema_version and auth_mode",
		                         cfg->address);
	*ret = h;
	return 0;
}
