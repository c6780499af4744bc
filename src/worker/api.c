/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's API on the HTTP core (docs/worker-api.md): authentication
 * (dev or bearer tokens scoped to a tenant), GET /v1/health, and a run's
 * lease, PUT and DELETE /v1/runs/{run_id}/lease (the specification,
 * "Nothing outlives its lease"); one JSON log line per lease event; and
 * the metrics listener's text.
 */
#include "worker/daemon.h"

#include "airlock/tools.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* ---- log lines ------------------------------------------------------------------- */

void worker_log(const char *level, const char *event, json_t *fields)
{
	char ts[32];
	util_time_format(util_now_ms(), ts);
	json_t *o = json_pack("{s:s, s:s, s:s}", "ts", ts, "level", level, "event", event);
	if (o && fields)
		json_object_update(o, fields);
	json_decref(fields);
	if (!o)
		return;
	/* Insertion order keeps ts, level and event first; JSON_ENSURE_ASCII
	 * escapes every byte a terminal could act on. */
	char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(o);
	if (!line)
		return;
	fprintf(stderr, "%s\n", line);
	free(line);
}

/* ---- the request's state ----------------------------------------------------------- */

typedef struct api_request {
	worker_verb verb;
	char run_id[AIRLOCK_ID_MAX + 1];
	char tenant[AIRLOCK_ID_MAX + 1]; /* the token's; "*": every tenant */
	int64_t epoch;                   /* DELETE: the query's */
	char query_tenant[AIRLOCK_ID_MAX + 1];
	worker_artifact_request *artifact; /* an artifact verb's (api_artifacts.c) */
} api_request;

static void api_state_free(void *state)
{
	api_request *q = state;
	if (q)
		worker_artifact_request_free(q->artifact);
	free(q);
}

static http_result fail(worker_daemon *w, http_request *r, unsigned status, airlock_errclass cls,
                        const char *msg)
{
	if (status >= 500)
		atomic_fetch_add(&w->c.errors, 1);
	return http_respond_fail(r, status, cls, "%s", msg);
}

static http_result fail_error(worker_daemon *w, http_request *r, const airlock_error *e)
{
	unsigned status = http_error_status(e);
	if (status >= 500) {
		atomic_fetch_add(&w->c.errors, 1);
		worker_log("error", "request.failed", json_pack("{s:s}", "message", e->message));
	}
	return http_respond_error_status(r, status, e);
}

/* The reaper's credential: "Bearer T" for the token of
 * worker.reaper_credential_file, compared in constant time. */
static bool is_reaper(const worker_daemon *w, const char *v, size_t len)
{
	static const char bearer[] = "Bearer ";
	size_t bl = sizeof(bearer) - 1;
	if (!w->reaper_token || !v || len != bl + w->reaper_token_len ||
	    memcmp(v, bearer, bl) != 0)
		return false;
	return CRYPTO_memcmp(v + bl, w->reaper_token, w->reaper_token_len) == 0;
}

/* The request's tenant from its credential: dev admits everyone as "dev";
 * tokens need "Authorization: Bearer T" for a token of the file. The
 * reaper's token is a tenant of none (tenant ""): it reaches only its
 * route. */
static bool authenticate(worker_daemon *w, http_request *r, char tenant[AIRLOCK_ID_MAX + 1])
{
	size_t len = 0;
	const char *v = http_request_header(r, "Authorization", &len);
	if (is_reaper(w, v, len)) {
		tenant[0] = 0;
		return true;
	}
	if (!w->tokens) {
		memcpy(tenant, WORKER_DEV_TENANT, sizeof(WORKER_DEV_TENANT));
		return true;
	}
	return worker_tokens_lookup(w->tokens, v, len, tenant);
}

static http_result api_start(void *ctx, http_request *r, const char *method)
{
	worker_daemon *w = ctx;
	size_t tlen = 0;
	const char *target = http_request_target(r, &tlen);
	api_request q = { 0 };
	/* Authentication comes first: a client without a token learns
	 * nothing, not even which paths exist. */
	if (!authenticate(w, r, q.tenant)) {
		atomic_fetch_add(&w->c.auth_failures, 1);
		return fail(w, r, HTTP_UNAUTHORIZED, AIRLOCK_ERR_EXECUTION_REJECTED,
		            "a bearer token of the worker's tokens file is required");
	}
	/* The core holds connections it has not seen authenticate to a short
	 * deadline: this one has, so a keep-alive connection and a command
	 * running for minutes keep it. */
	http_request_authenticated(r);
	const char *query = NULL;
	size_t qlen = 0;
	int st = worker_route(target, tlen, method, &q.verb, q.run_id, &query, &qlen);
	char artifact_id[AIRLOCK_UUID_STR_LEN + 1] = "";
	if (st == 404)
		st = worker_artifact_route(target, tlen, method, &q.verb, q.run_id, artifact_id, &query,
		                           &qlen);
	if (st == 404)
		return fail(w, r, HTTP_NOT_FOUND, AIRLOCK_ERR_EXECUTION_REJECTED, "no such route");
	if (st == 405)
		return fail(w, r, HTTP_METHOD_NOT_ALLOWED, AIRLOCK_ERR_EXECUTION_REJECTED,
		            "method not allowed on this route");
	/* The reaper's credential authorizes its question and nothing else;
	 * a tenant's, everything but it. */
	if ((q.verb == WORKER_REAPER_STALE) != (q.tenant[0] == 0))
		return fail(w, r, HTTP_NOT_FOUND, AIRLOCK_ERR_EXECUTION_REJECTED, "no such route");
	if (q.verb >= WORKER_ARTIFACT_UPLOAD && q.verb <= WORKER_ARTIFACT_ATTACH) {
		api_request *state = malloc(sizeof(*state));
		if (!state)
			return HTTP_CLOSE;
		*state = q;
		http_request_set_state(r, state);
		return worker_artifact_start(w, r, q.verb, q.tenant, q.run_id, artifact_id, query, qlen,
		                             &state->artifact);
	}
	airlock_error err = { 0 };
	if (q.verb == WORKER_LEASE_RELEASE &&
	    worker_release_query_decode(query, qlen, &q.epoch, q.query_tenant, &err) < 0)
		return fail_error(w, r, &err);
	if (q.verb != WORKER_LEASE_RELEASE && qlen > 0)
		return fail(w, r, HTTP_BAD_REQUEST, AIRLOCK_ERR_TOOL_VALIDATION,
		            "this route takes no query");
	api_request *state = malloc(sizeof(*state));
	if (!state)
		return HTTP_CLOSE;
	*state = q;
	http_request_set_state(r, state);
	http_request_set_body_cap(r, q.verb == WORKER_LEASE_CLAIM    ? AIRLOCK_WORKER_LEASE_BODY_MAX
	                             : q.verb == WORKER_RUN_COMMAND  ? AIRLOCK_WORKER_TOOL_BODY_MAX
	                             : q.verb == WORKER_ARTIFACT_EXPORT ? AIRLOCK_WORKER_EXPORT_BODY_MAX
	                             : q.verb == WORKER_REAPER_STALE ? AIRLOCK_WORKER_REAPER_BODY_MAX
	                                                             : 0);
	return HTTP_NEXT;
}

/* ---- answers -------------------------------------------------------------------------- */

static http_result health(worker_daemon *w, http_request *r)
{
	int64_t version = 0;
	airlock_error err = { 0 };
	if (worker_db_schema_version(w->db, &version, &err) < 0)
		return fail_error(w, r, &err);
	json_t *o = json_pack("{s:s, s:s, s:I, s:s}", "status", "ok", "database",
	                      worker_db_name(w->db), "schema_version", (json_int_t)version,
	                      "auth_mode", w->tokens ? "tokens" : "dev");
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	return http_respond_json(r, HTTP_OK, text);
}

static const char *lease_message(worker_db_lease_state s)
{
	switch (s) {
	case WORKER_DB_LEASE_OTHER_EPOCH:
		return "the run's current epoch is another one (a lower epoch changes nothing)";
	case WORKER_DB_LEASE_EXPIRED:
		return "this epoch's lease expired: a new claim needs a higher epoch";
	case WORKER_DB_LEASE_RELEASED:
		return "this epoch's lease was released: a new claim needs a higher epoch";
	case WORKER_DB_LEASE_OTHER_BRIDGE:
		return "this epoch was claimed with another \"bridge\": a renewal repeats its claim's "
		       "choice (a new claim with a higher epoch may change it)";
	case WORKER_DB_LEASE_NONE:
	case WORKER_DB_LEASE_OTHER_TENANT:
		return "no such run";
	case WORKER_DB_LEASE_INVALID:
	case WORKER_DB_LEASE_CURRENT:
	case WORKER_DB_LEASE__MAX:
		break;
	}
	return "lease refused";
}

/* A refusal's answer: a run of another tenant is not found (it is not the
 * caller's to know of); an epoch that is not the current one conflicts. */
static http_result refused(worker_daemon *w, http_request *r, worker_db_lease_state s)
{
	bool hidden = s == WORKER_DB_LEASE_NONE || s == WORKER_DB_LEASE_OTHER_TENANT;
	return fail(w, r, hidden ? HTTP_NOT_FOUND : HTTP_CONFLICT, AIRLOCK_ERR_EXECUTION_REJECTED,
	            lease_message(s));
}

static http_result claim(worker_daemon *w, http_request *r, const api_request *q)
{
	size_t len = 0;
	const unsigned char *body = http_request_body(r, &len);
	worker_lease_request lr;
	airlock_error err = { 0 };
	if (worker_lease_request_decode((const char *)body, len, &lr, &err) < 0)
		return fail_error(w, r, &err);
	/* The token names the tenant; the body must agree with it. */
	if (strcmp(q->tenant, "*") != 0 && strcmp(q->tenant, lr.tenant_id) != 0)
		return fail(w, r, HTTP_FORBIDDEN, AIRLOCK_ERR_EXECUTION_REJECTED,
		            "lease.tenant_id is not the tenant of this request's token");
	/* Refused before anything is stored: a claim granted a bridge this
	 * worker cannot serve would give its sandbox a socket leading nowhere. */
	if (lr.bridge && !w->settings->worker.bridge_listen)
		return fail(w, r, HTTP_BAD_REQUEST, AIRLOCK_ERR_TOOL_VALIDATION,
		            "lease.bridge: this worker has no orchestration bridge "
		            "(worker.bridge_listen and worker.bridge_upstream are not set)");
	worker_db_claim_request req = { .run_id = q->run_id, .tenant_id = lr.tenant_id,
		                        .epoch = lr.epoch, .ttl_seconds = lr.ttl_seconds,
		                        .now_ms = util_now_ms(), .bridge = lr.bridge };
	worker_db_claim_result res;
	if (worker_db_claim(w->db, &req, &res, &err) < 0)
		return fail_error(w, r, &err);
	atomic_fetch_add(&w->c.claims[res.outcome], 1);
	json_t *ev = json_pack("{s:s, s:s, s:I, s:s, s:b}", "run_id", q->run_id, "tenant_id",
	                       lr.tenant_id, "epoch", (json_int_t)lr.epoch, "outcome",
	                       worker_db_claim_outcome_name(res.outcome), "bridge", lr.bridge);
	if (res.outcome == WORKER_DB_CLAIM_REFUSED) {
		atomic_fetch_add(&w->c.refusals[res.refusal], 1);
		if (res.refusal == WORKER_DB_LEASE_EXPIRED)
			atomic_fetch_add(&w->c.expiries_seen, 1);
		if (ev)
			json_object_set_new(ev, "reason",
			                    json_string(worker_db_lease_state_name(res.refusal)));
		worker_log("info", "lease.refused", ev);
		return refused(w, r, res.refusal);
	}
	if (ev)
		json_object_set_new(ev, "expires_at_ms", json_integer(res.expires_at_ms));
	worker_log("info", "lease.claimed", ev);
	/* The claim is committed; the older claims' sandboxes go now, before
	 * the answer (a fenced holder's sandbox is destroyed at once). */
	if (worker_end_sandboxes(w, res.older, res.older_count,
	                         res.outcome == WORKER_DB_CLAIM_FENCED ? "fenced" : "ended", &err) < 0)
		return fail_error(w, r, &err);
	char expires[32];
	util_time_format(res.expires_at_ms, expires);
	json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:I, s:b}", "run_id", q->run_id,
	                      "tenant_id", lr.tenant_id, "epoch", (json_int_t)lr.epoch, "outcome",
	                      worker_db_claim_outcome_name(res.outcome), "expires_at", expires,
	                      "expires_at_ms", (json_int_t)res.expires_at_ms, "bridge", lr.bridge);
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	return http_respond_json(r, HTTP_OK, text);
}

static http_result release(worker_daemon *w, http_request *r, const api_request *q)
{
	const char *tenant = q->tenant;
	if (strcmp(tenant, "*") == 0) {
		if (!q->query_tenant[0])
			return fail(w, r, HTTP_BAD_REQUEST, AIRLOCK_ERR_TOOL_VALIDATION,
			            "query: a token of every tenant names the run's tenant (tenant_id=T)");
		tenant = q->query_tenant;
	} else if (q->query_tenant[0] && strcmp(q->query_tenant, tenant) != 0) {
		return fail(w, r, HTTP_FORBIDDEN, AIRLOCK_ERR_EXECUTION_REJECTED,
		            "query tenant_id is not the tenant of this request's token");
	}
	airlock_error err = { 0 };
	int64_t now = util_now_ms();
	/* Read first, for the log and the expiry counter only: the release
	 * below decides, in its own transaction. */
	worker_db_check_result before;
	if (worker_db_check(w->db, q->run_id, tenant, q->epoch, now, &before, &err) < 0)
		return fail_error(w, r, &err);
	worker_db_release_result res;
	if (worker_db_release(w->db, q->run_id, tenant, q->epoch, now, &res, &err) < 0)
		return fail_error(w, r, &err);
	json_t *ev = json_pack("{s:s, s:s, s:I, s:s}", "run_id", q->run_id, "tenant_id", tenant,
	                       "epoch", (json_int_t)q->epoch, "was",
	                       worker_db_lease_state_name(before.state));
	if (res.state != WORKER_DB_LEASE_CURRENT) {
		worker_log("info", "lease.release_refused", ev);
		return refused(w, r, res.state);
	}
	if (before.state == WORKER_DB_LEASE_CURRENT)
		atomic_fetch_add(&w->c.releases, 1);
	else if (before.state == WORKER_DB_LEASE_EXPIRED)
		atomic_fetch_add(&w->c.expiries_seen, 1);
	worker_log("info", "lease.released", ev);
	/* The response comes after the claim's sandbox is destroyed. */
	if (res.has_environment) {
		worker_db_sandbox sb = { .epoch = q->epoch };
		memcpy(sb.run_id, q->run_id, sizeof(sb.run_id));
		memcpy(sb.environment_id, res.environment_id, sizeof(sb.environment_id));
		if (worker_end_sandboxes(w, &sb, 1, "released", &err) < 0)
			return fail_error(w, r, &err);
	}
	return http_respond(r, HTTP_NO_CONTENT, NULL, 0, NULL);
}

static http_result tools(worker_daemon *w, http_request *r)
{
	(void)w;
	return http_respond_json(r, HTTP_OK, airlock_tools_json());
}

static http_result artifact_export(worker_daemon *w, http_request *r, const api_request *q)
{
	size_t len = 0;
	const unsigned char *body = http_request_body(r, &len);
	char *json = NULL;
	unsigned status = 0;
	worker_tool_outcome outcome;
	airlock_error err = { 0 };
	if (worker_artifact_export(w, q->run_id, q->tenant, (const char *)body, len, &json, &status,
	                           &outcome, &err) < 0) {
		if (status >= 500)
			atomic_fetch_add(&w->c.errors, 1);
		return http_respond_error_status(r, status, &err);
	}
	return http_respond_json(r, HTTP_OK, json);
}

static http_result run_command(worker_daemon *w, http_request *r, const api_request *q)
{
	size_t len = 0;
	const unsigned char *body = http_request_body(r, &len);
	char *json = NULL;
	unsigned status = 0;
	worker_tool_outcome outcome;
	airlock_error err = { 0 };
	if (worker_run_command(w, q->run_id, q->tenant, (const char *)body, len,
	                       http_request_fd(r), &json, &status, &outcome, &err) < 0) {
		if (status >= 500)
			atomic_fetch_add(&w->c.errors, 1);
		return http_respond_error_status(r, status, &err);
	}
	return http_respond_json(r, HTTP_OK, json);
}

/* The reaper's question: which of these sandboxes are stale. Ids only,
 * each of the question's, and nothing about a tenant either way. */
static http_result reaper_stale(worker_daemon *w, http_request *r)
{
	size_t len = 0;
	const unsigned char *body = http_request_body(r, &len);
	worker_db_sandbox *list = NULL;
	size_t n = 0;
	airlock_error err = { 0 };
	if (worker_reaper_request_decode((const char *)body, len, &list, &n, &err) < 0)
		return fail_error(w, r, &err);
	bool *stale = calloc(n ? n : 1, sizeof(*stale));
	json_t *ids = json_array(), *o = json_object();
	if (!stale || !ids || !o || json_object_set(o, "stale", ids) < 0) {
		free(stale);
		free(list);
		json_decref(ids);
		json_decref(o);
		airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOMEM, "reaper answer");
		return fail_error(w, r, &err);
	}
	int rc = worker_db_stale(w->db, list, n, util_now_ms(), stale, &err);
	size_t found = 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (stale[i]) {
			found++;
			if (json_array_append_new(ids, json_string(list[i].environment_id)) < 0)
				rc = airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOMEM, "reaper answer");
		}
	free(stale);
	free(list);
	json_decref(ids); /* o holds it */
	if (rc < 0) {
		json_decref(o);
		return fail_error(w, r, &err);
	}
	atomic_fetch_add(&w->c.reaper_questions, 1);
	atomic_fetch_add(&w->c.reaper_stale, found);
	worker_log("info", "reaper.answered",
	           json_pack("{s:I, s:I}", "asked", (json_int_t)n, "stale", (json_int_t)found));
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return http_respond_json(r, HTTP_OK, text);
}

static http_result api_handle(void *ctx, http_request *r)
{
	worker_daemon *w = ctx;
	const api_request *q = http_request_state(r);
	switch (q->verb) {
	case WORKER_HEALTH:
		return health(w, r);
	case WORKER_LEASE_CLAIM:
		return claim(w, r, q);
	case WORKER_LEASE_RELEASE:
		return release(w, r, q);
	case WORKER_TOOLS:
		return tools(w, r);
	case WORKER_RUN_COMMAND:
		return run_command(w, r, q);
	case WORKER_ARTIFACT_EXPORT:
		return artifact_export(w, r, q);
	case WORKER_REAPER_STALE:
		return reaper_stale(w, r);
	case WORKER_ARTIFACT_UPLOAD:
	case WORKER_ARTIFACT_LIST:
	case WORKER_ARTIFACT_GET:
	case WORKER_ARTIFACT_CONTENT:
	case WORKER_ARTIFACT_DELETE:
	case WORKER_ARTIFACT_ATTACH:
		return q->artifact ? worker_artifact_handle(w, r, q->artifact) : HTTP_CLOSE;
	case WORKER_NONE:
	case WORKER__MAX:
		break;
	}
	return HTTP_CLOSE;
}

const http_routes worker_api_routes = {
	.start = api_start,
	.handle = api_handle,
	.state_free = api_state_free,
};

/* ---- the metrics listener (Prometheus text, version 0.0.4) -------------------------- */

static size_t put(char *buf, size_t size, size_t o, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static size_t put(char *buf, size_t size, size_t o, const char *fmt, ...)
{
	if (o >= size)
		return o;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + o, size - o, fmt, ap);
	va_end(ap);
	return n < 0 ? size : o + (size_t)n;
}

char *worker_metrics_render(void *ctx, size_t *ret_len)
{
	worker_daemon *w = ctx;
	enum { SIZE = 12288 };
	char *b = malloc(SIZE);
	if (!b)
		return NULL;
	size_t o = 0;
	o = put(b, SIZE, o,
	        "# HELP airlock_worker_lease_claims_total Lease claims (PUT) answered, by outcome.\n"
	        "# TYPE airlock_worker_lease_claims_total counter\n");
	for (int i = WORKER_DB_CLAIM_NEW; i < WORKER_DB_CLAIM__MAX; i++)
		o = put(b, SIZE, o, "airlock_worker_lease_claims_total{outcome=\"%s\"} %llu\n",
		        worker_db_claim_outcome_name((worker_db_claim_outcome)i),
		        (unsigned long long)atomic_load(&w->c.claims[i]));
	o = put(b, SIZE, o,
	        "# HELP airlock_worker_lease_fences_total Claims that fenced a current lease of a lower epoch.\n"
	        "# TYPE airlock_worker_lease_fences_total counter\n"
	        "airlock_worker_lease_fences_total %llu\n",
	        (unsigned long long)atomic_load(&w->c.claims[WORKER_DB_CLAIM_FENCED]));
	o = put(b, SIZE, o,
	        "# HELP airlock_worker_lease_refusals_total Refused claims, by the lease's state.\n"
	        "# TYPE airlock_worker_lease_refusals_total counter\n");
	for (int i = WORKER_DB_LEASE_OTHER_TENANT; i < WORKER_DB_LEASE__MAX; i++)
		if (i != WORKER_DB_LEASE_NONE)
			o = put(b, SIZE, o, "airlock_worker_lease_refusals_total{reason=\"%s\"} %llu\n",
			        worker_db_lease_state_name((worker_db_lease_state)i),
			        (unsigned long long)atomic_load(&w->c.refusals[i]));
	const struct {
		const char *name, *help;
		const atomic_uint_fast64_t *v;
	} counters[] = {
		{ "lease_releases_total", "Releases (DELETE) that ended a current claim.", &w->c.releases },
		{ "lease_expiries_seen_total",
		  "Leases a claim or release found expired (an expired lease no call names is not "
		  "counted).",
		  &w->c.expiries_seen },
		{ "auth_failures_total", "Requests refused 401.", &w->c.auth_failures },
		{ "errors_total", "Requests answered with a 5xx.", &w->c.errors },
		{ "sandbox_destroys_total",
		  "Sandboxes this worker destroyed (a release, a fence, a lost lease, its stop).",
		  &w->c.destroys },
		{ "sandbox_destroy_failures_total",
		  "Destroys that failed (the record stays; retried).", &w->c.destroy_failures },
		{ "reaper_questions_total", "Reaper questions answered.", &w->c.reaper_questions },
		{ "reaper_stale_total", "Sandboxes the answers named stale.", &w->c.reaper_stale },
	};
	for (size_t i = 0; i < ARRAY_SIZE(counters); i++)
		o = put(b, SIZE, o,
		        "# HELP airlock_worker_%s %s\n# TYPE airlock_worker_%s counter\n"
		        "airlock_worker_%s %llu\n",
		        counters[i].name, counters[i].help, counters[i].name, counters[i].name,
		        (unsigned long long)atomic_load(counters[i].v));
	o = put(b, SIZE, o,
	        "# HELP airlock_worker_bridge_connections_total Bridge connections: relayed to the upstream (accepted) or closed unrelayed (refused).\n"
	        "# TYPE airlock_worker_bridge_connections_total counter\n"
	        "airlock_worker_bridge_connections_total{outcome=\"accepted\"} %llu\n"
	        "airlock_worker_bridge_connections_total{outcome=\"refused\"} %llu\n",
	        (unsigned long long)atomic_load(&w->c.bridge_accepted),
	        (unsigned long long)atomic_load(&w->c.bridge_refused));
	o = put(b, SIZE, o,
	        "# HELP airlock_worker_tool_calls_total Tool calls answered, by tool and outcome.\n"
	        "# TYPE airlock_worker_tool_calls_total counter\n");
	for (int i = 0; i < WORKER_TOOL_OUTCOME__MAX; i++)
		o = put(b, SIZE, o,
		        "airlock_worker_tool_calls_total{tool=\"sandbox.run_command\",outcome=\"%s\"} %llu\n",
		        worker_tool_outcome_name((worker_tool_outcome)i),
		        (unsigned long long)atomic_load(&w->c.tool_calls[i]));
	o = put(b, SIZE, o,
	        "# HELP airlock_worker_artifact_puts_total Artifact uploads (POST /v1/artifacts), by outcome.\n"
	        "# TYPE airlock_worker_artifact_puts_total counter\n");
	for (int i = 0; i < WORKER_PUT_OUTCOME__MAX; i++)
		o = put(b, SIZE, o, "airlock_worker_artifact_puts_total{outcome=\"%s\"} %llu\n",
		        worker_put_outcome_name((worker_put_outcome)i),
		        (unsigned long long)atomic_load(&w->c.artifact_puts[i]));
	o = put(b, SIZE, o,
	        "# HELP airlock_worker_artifact_bytes_total Artifact bytes: uploads stored (in) and downloads sent (out).\n"
	        "# TYPE airlock_worker_artifact_bytes_total counter\n"
	        "airlock_worker_artifact_bytes_total{direction=\"in\"} %llu\n"
	        "airlock_worker_artifact_bytes_total{direction=\"out\"} %llu\n"
	        "# HELP airlock_worker_artifact_deletes_total Artifacts removed by DELETE.\n"
	        "# TYPE airlock_worker_artifact_deletes_total counter\n"
	        "airlock_worker_artifact_deletes_total %llu\n",
	        (unsigned long long)atomic_load(&w->c.artifact_bytes_in),
	        (unsigned long long)atomic_load(&w->c.artifact_bytes_out),
	        (unsigned long long)atomic_load(&w->c.artifact_deletes));
	o = put(b, SIZE, o,
	        "# HELP airlock_worker_provision_seconds Sandbox provisions as the worker saw them (the service's round trip included).\n"
	        "# TYPE airlock_worker_provision_seconds histogram\n");
	for (int i = 0; i < WORKER_PROVISION_BUCKETS; i++)
		o = put(b, SIZE, o, "airlock_worker_provision_seconds_bucket{le=\"%g\"} %llu\n",
		        (double)worker_provision_bucket_ms[i] / 1000.0,
		        (unsigned long long)atomic_load(&w->c.provision_buckets[i]));
	uint64_t provisions = atomic_load(&w->c.provisions);
	o = put(b, SIZE, o,
	        "airlock_worker_provision_seconds_bucket{le=\"+Inf\"} %llu\n"
	        "airlock_worker_provision_seconds_sum %.3f\n"
	        "airlock_worker_provision_seconds_count %llu\n",
	        (unsigned long long)provisions,
	        (double)atomic_load(&w->c.provision_ms_sum) / 1000.0,
	        (unsigned long long)provisions);
	if (o >= SIZE) {
		/* The text is fixed in shape: a cut one is a bug, not a load. */
		free(b);
		return NULL;
	}
	*ret_len = o;
	return b;
}
