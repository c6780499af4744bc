/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the worker's API decodes from a request (worker.h): the route, the
 * lease's body, the release's query. Every input is a client's bytes:
 * lengths are carried, never found with strlen, and nothing is unescaped
 * (an id is [A-Za-z0-9_-], so an escape in one names no run).
 */
#include "worker/worker.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/port/exec.h"
#include "airlock/run_command.h"
#include "airlock/tools.h"

#include "airlock/ids.h"
#include "core/json_internal.h"
#include "util/util.h"
#include "worker/db.h"

/* ---- routes ----------------------------------------------------------------- */

/* An id segment by the core's rule (airlock_id_valid: 1..128 bytes of
 * [A-Za-z0-9_-]), copied NUL-terminated; false, with out emptied, for
 * anything else. */
static bool id_copy(const char *s, size_t n, char out[AIRLOCK_ID_MAX + 1])
{
	out[0] = 0;
	if (n == 0 || n > AIRLOCK_ID_MAX || memchr(s, 0, n))
		return false;
	memcpy(out, s, n);
	out[n] = 0;
	if (airlock_id_valid(out))
		return true;
	out[0] = 0;
	return false;
}

static bool is(const char *s, size_t n, const char *word)
{
	return strlen(word) == n && memcmp(s, word, n) == 0;
}

int worker_route(const char *target, size_t target_len, const char *method,
                 worker_verb *ret_verb, char ret_run_id[AIRLOCK_ID_MAX + 1],
                 const char **ret_query, size_t *ret_query_len)
{
	*ret_verb = WORKER_NONE;
	ret_run_id[0] = 0;
	*ret_query = NULL;
	*ret_query_len = 0;
	const char *qm = memchr(target, '?', target_len);
	size_t plen = qm ? (size_t)(qm - target) : target_len;
	static const char health[] = "/v1/health", tools[] = "/v1/tools";
	static const char reaper[] = "/v1/reaper/stale", runs[] = "/v1/runs/";
	static const char lease[] = "/lease", run_command[] = "/tools/sandbox.run_command";
	static const char export[] = "/tools/artifact.export";
	bool get = strcmp(method, "GET") == 0, put = strcmp(method, "PUT") == 0;
	bool del = strcmp(method, "DELETE") == 0, post = strcmp(method, "POST") == 0;
	size_t rl = sizeof(runs) - 1, ll = sizeof(lease) - 1, cl = sizeof(run_command) - 1;
	size_t xl = sizeof(export) - 1;
	if (is(target, plen, health) || is(target, plen, tools)) {
		if (!get)
			return 405;
		*ret_verb = is(target, plen, health) ? WORKER_HEALTH : WORKER_TOOLS;
	} else if (is(target, plen, reaper)) {
		if (!post)
			return 405;
		*ret_verb = WORKER_REAPER_STALE;
	} else if (plen > rl + ll && memcmp(target, runs, rl) == 0 &&
	           memcmp(target + plen - ll, lease, ll) == 0 &&
	           id_copy(target + rl, plen - rl - ll, ret_run_id)) {
		/* /v1/runs/{run_id}/lease, exactly: no empty, doubled or extra
		 * segment spells it. */
		if (!put && !del) {
			ret_run_id[0] = 0;
			return 405;
		}
		*ret_verb = put ? WORKER_LEASE_CLAIM : WORKER_LEASE_RELEASE;
	} else if (plen > rl + cl && memcmp(target, runs, rl) == 0 &&
	           memcmp(target + plen - cl, run_command, cl) == 0 &&
	           id_copy(target + rl, plen - rl - cl, ret_run_id)) {
		if (!post) {
			ret_run_id[0] = 0;
			return 405;
		}
		*ret_verb = WORKER_RUN_COMMAND;
	} else if (plen > rl + xl && memcmp(target, runs, rl) == 0 &&
	           memcmp(target + plen - xl, export, xl) == 0 &&
	           id_copy(target + rl, plen - rl - xl, ret_run_id)) {
		if (!post) {
			ret_run_id[0] = 0;
			return 405;
		}
		*ret_verb = WORKER_ARTIFACT_EXPORT;
	} else {
		return 404;
	}
	if (qm) {
		*ret_query = qm + 1;
		*ret_query_len = target_len - plen - 1;
	}
	return 0;
}

/* ---- the lease's body ------------------------------------------------------------ */

_Static_assert(WORKER_DB_TTL_SECONDS_MAX == 86400, "the ttl message names the cap");

static int lease_decoded(json_t *o, void *ctx, airlock_error *err)
{
	static const char *const fields[] = { "tenant_id", "epoch", "ttl_seconds", "bridge" };
	worker_lease_request *q = ctx;
	int r = core_json_expect_object(o, "lease", fields, ARRAY_SIZE(fields), err);
	if (r < 0)
		return r;
	json_t *jt = json_object_get(o, "tenant_id"), *je = json_object_get(o, "epoch");
	json_t *jl = json_object_get(o, "ttl_seconds"), *jb = json_object_get(o, "bridge");
	const char *t = jt && json_is_string(jt) ? json_string_value(jt) : NULL;
	size_t tl = t ? json_string_length(jt) : 0;
	/* json_integer_value is a json_int_t (long long): range-checked here,
	 * before it becomes a number the database sees. */
	json_int_t e = je && json_is_integer(je) ? json_integer_value(je) : -1;
	json_int_t l = jl && json_is_integer(jl) ? json_integer_value(jl) : 0;
	const char *bad =
		!jt ? "lease.tenant_id: missing"
		: !t || tl != strlen(t) || !id_copy(t, tl, q->tenant_id)
			? "lease.tenant_id: must be a string of 1..128 of [A-Za-z0-9_-]"
		: !je ? "lease.epoch: missing"
		: e < 0 ? "lease.epoch: must be an integer >= 0"
		: !jl ? "lease.ttl_seconds: missing"
		: l < 1 || l > WORKER_DB_TTL_SECONDS_MAX
			? "lease.ttl_seconds: must be an integer from 1 to 86400"
		: jb && !json_is_boolean(jb) ? "lease.bridge: must be true or false"
			: NULL;
	if (bad)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "%s", bad);
	q->epoch = (int64_t)e;
	q->ttl_seconds = (int64_t)l;
	q->bridge = jb && json_is_true(jb);
	return 0;
}

int worker_lease_request_decode(const char *body, size_t len, worker_lease_request *ret,
                                airlock_error *err)
{
	worker_lease_request q = { 0 };
	int r = core_json_decode(body, len, AIRLOCK_WORKER_LEASE_BODY_MAX, "lease", lease_decoded, &q,
	                         err);
	if (r < 0)
		return r;
	*ret = q;
	return 0;
}

/* ---- the release's query ------------------------------------------------------------ */

int worker_release_query_decode(const char *q, size_t len, int64_t *ret_epoch,
                                char ret_tenant[AIRLOCK_ID_MAX + 1], airlock_error *err)
{
	if (len > AIRLOCK_WORKER_QUERY_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "query: longer than %d bytes", AIRLOCK_WORKER_QUERY_MAX);
	bool have_epoch = false, have_tenant = false;
	int64_t epoch = -1;
	char tenant[AIRLOCK_ID_MAX + 1] = "";
	const char *p = q, *end = q ? q + len : q;
	while (q && p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *stop = amp ? amp : end;
		const char *eq = memchr(p, '=', (size_t)(stop - p));
		if (!eq)
			goto bad;
		size_t kl = (size_t)(eq - p), vl = (size_t)(stop - eq - 1);
		const char *v = eq + 1;
		if (is(p, kl, "epoch") && !have_epoch) {
			char num[21];
			if (vl == 0 || vl >= sizeof(num) || v[0] == '-' || v[0] == '+')
				goto bad_epoch;
			memcpy(num, v, vl);
			num[vl] = 0;
			for (size_t i = 0; i < vl; i++)
				if (num[i] < '0' || num[i] > '9')
					goto bad_epoch;
			if (!util_parse_i64(num, &epoch) || epoch < 0)
				goto bad_epoch;
			have_epoch = true;
		} else if (is(p, kl, "tenant_id") && !have_tenant) {
			if (!id_copy(v, vl, tenant))
				return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
				                         "query tenant_id: must be 1..128 of [A-Za-z0-9_-]");
			have_tenant = true;
		} else {
			goto bad;
		}
		if (!amp)
			break;
		p = amp + 1;
		if (p == end)
			goto bad;
	}
	if (!have_epoch)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "query: epoch=N is required (the claim's epoch)");
	*ret_epoch = epoch;
	memcpy(ret_tenant, tenant, sizeof(tenant));
	return 0;
bad_epoch:
	return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
	                         "query epoch: must be a decimal integer >= 0");
bad:
	return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
	                         "query: only epoch=N and tenant_id=T, each once");
}

/* ---- a tool call's body ------------------------------------------------------------ */

#define VECTOR_FORM                                                                                \
	"an array of strings, the program and its arguments, e.g. [\"python3\", \"script.py\"]; "  \
	"a shell string is not accepted (write [\"bash\", \"-c\", \"...\"] to run one)"

/* The arguments' members, in the specification's order. */
static int arguments_decoded(json_t *o, worker_tool_request *q, airlock_error *err)
{
	static const char *const fields[] = { "command", "working_directory", "timeout_seconds" };
	if (!json_is_object(o))
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "arguments: must be an object {\"command\": [...], "
		                         "\"working_directory\": \".\", \"timeout_seconds\": 30}");
	int r = core_json_expect_object(o, "arguments", fields, ARRAY_SIZE(fields), err);
	if (r < 0)
		return r;
	json_t *c = json_object_get(o, "command");
	if (!c)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "arguments.command: missing; it is " VECTOR_FORM);
	/* A string where the vector belongs is a model-authoring mistake: the
	 * message teaches the form rather than report the type. */
	if (json_is_string(c))
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "arguments.command: got a string; the command is " VECTOR_FORM);
	if (!json_is_array(c) || json_array_size(c) == 0)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "arguments.command: must be a non-empty array: " VECTOR_FORM);
	size_t n = json_array_size(c);
	q->argv = calloc(n + 1, sizeof(char *));
	if (!q->argv)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "arguments.command");
	for (size_t i = 0; i < n; i++) {
		json_t *a = json_array_get(c, i);
		if (!json_is_string(a))
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "arguments.command[%zu]: must be a string: " VECTOR_FORM,
			                         i);
		const char *v = json_string_value(a);
		if (strlen(v) != json_string_length(a))
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "arguments.command[%zu]: contains a NUL byte", i);
		/* Counted before it is filled: the caller's clear frees what
		 * the count covers, a NULL included. */
		q->argc = i + 1;
		q->argv[i] = strdup(v);
		if (!q->argv[i])
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "arguments.command");
	}
	/* The vector's own rules (size cap, command[0]) before the members
	 * that follow it, as the specification orders them. */
	airlock_execution_command probe = { .argv = q->argv, .argc = q->argc,
		                            .working_directory = (char *)(uintptr_t) ".",
		                            .timeout_seconds = 1,
		                            .maximum_output_bytes = 1 };
	r = airlock_execution_command_validate(&probe, AIRLOCK_RUN_COMMAND_ARGV_MAX_BYTES, err);
	if (r < 0) {
		airlock_error_prefix(err, "arguments: ");
		return r;
	}
	json_t *wd = json_object_get(o, "working_directory");
	if (wd && !json_is_null(wd)) {
		if (!json_is_string(wd) || strlen(json_string_value(wd)) != json_string_length(wd))
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "arguments.working_directory: must be a path relative to "
			                         "the workspace, e.g. \".\" or \"src\"");
		if (!(q->working_directory = strdup(json_string_value(wd))))
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "working_directory");
	}
	json_t *t = json_object_get(o, "timeout_seconds");
	if (t && !json_is_null(t)) {
		json_int_t v = json_is_integer(t) ? json_integer_value(t) : 0;
		if (v <= 0)
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "arguments.timeout_seconds: must be a positive integer "
			                         "(seconds; at most %d are used)",
			                         AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS);
		/* Clamped here already: a larger number only ever means the
		 * tool's declared timeout (the core clamps it again). */
		q->timeout_seconds = v > AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS
		                             ? AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS
		                             : (int64_t)v;
	}
	return 0;
}

static int tool_decoded(json_t *o, void *ctx, airlock_error *err)
{
	static const char *const fields[] = { "epoch", "tenant_id", "network_enabled",
		                              "deadline_ms", "arguments" };
	worker_tool_request *q = ctx;
	int r = core_json_expect_object(o, "tool call", fields, ARRAY_SIZE(fields), err);
	if (r < 0)
		return r;
	json_t *je = json_object_get(o, "epoch"), *jt = json_object_get(o, "tenant_id");
	json_t *jn = json_object_get(o, "network_enabled"), *jd = json_object_get(o, "deadline_ms");
	json_int_t e = je && json_is_integer(je) ? json_integer_value(je) : -1;
	json_int_t d = jd && json_is_integer(jd) ? json_integer_value(jd) : -1;
	const char *t = jt && json_is_string(jt) ? json_string_value(jt) : NULL;
	const char *bad =
		!je ? "tool call.epoch: missing (the epoch of the lease the call is made under)"
		: e < 0 ? "tool call.epoch: must be an integer >= 0"
		: jt && (!t || !id_copy(t, json_string_length(jt), q->tenant_id))
			? "tool call.tenant_id: must be a string of 1..128 of [A-Za-z0-9_-]"
		: jn && !json_is_boolean(jn) ? "tool call.network_enabled: must be true or false"
		: jd && (d < 0 || d > WORKER_DB_NOW_MAX)
			? "tool call.deadline_ms: must be the run's deadline in Unix milliseconds"
		: !json_object_get(o, "arguments") ? "tool call.arguments: missing (the tool's request)"
			: NULL;
	if (bad)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "%s", bad);
	q->epoch = (int64_t)e;
	q->network_enabled = jn && json_is_true(jn);
	q->has_deadline = jd != NULL;
	q->deadline_ms = (int64_t)d;
	return arguments_decoded(json_object_get(o, "arguments"), q, err);
}

void worker_tool_request_clear(worker_tool_request *q)
{
	if (!q)
		return;
	for (size_t i = 0; q->argv && i < q->argc; i++)
		free(q->argv[i]);
	free(q->argv);
	free(q->working_directory);
	*q = (worker_tool_request){ 0 };
}

int worker_tool_request_decode(const char *body, size_t len, worker_tool_request *ret,
                               airlock_error *err)
{
	*ret = (worker_tool_request){ 0 };
	int r = core_json_decode(body, len, AIRLOCK_WORKER_TOOL_BODY_MAX, "tool call", tool_decoded,
	                         ret, err);
	if (r < 0)
		worker_tool_request_clear(ret);
	return r;
}

/* sandbox.run_command's arguments alone (airlock/tools.h): the same
 * checks as inside a tool call's body, for a door that takes the
 * arguments without the worker's envelope (airlock mcp). */
static int arguments_only(json_t *o, void *ctx, airlock_error *err)
{
	return arguments_decoded(o, ctx, err);
}

void airlock_run_command_arguments_clear(airlock_run_command_arguments *a)
{
	if (!a)
		return;
	for (size_t i = 0; a->argv && i < a->argc; i++)
		free(a->argv[i]);
	free(a->argv);
	free(a->working_directory);
	*a = (airlock_run_command_arguments){ 0 };
}

int airlock_run_command_arguments_decode(const char *json, size_t len,
                                         airlock_run_command_arguments *ret, airlock_error *err)
{
	worker_tool_request q = { 0 };
	*ret = (airlock_run_command_arguments){ 0 };
	int r = core_json_decode(json, len, AIRLOCK_WORKER_TOOL_BODY_MAX, "arguments",
	                         arguments_only, &q, err);
	if (r < 0) {
		worker_tool_request_clear(&q);
		return r;
	}
	*ret = (airlock_run_command_arguments){ .argv = q.argv,
		                                .argc = q.argc,
		                                .working_directory = q.working_directory,
		                                .timeout_seconds = q.timeout_seconds };
	return 0;
}

/* ---- the reaper's question ------------------------------------------------------------ */

typedef struct reaper_decode {
	worker_db_sandbox *list;
	size_t n;
} reaper_decode;

static int reaper_decoded(json_t *o, void *ctx, airlock_error *err)
{
	static const char *const fields[] = { "sandboxes" };
	static const char *const entry_fields[] = { "environment_id", "run_id", "lease_epoch" };
	reaper_decode *q = ctx;
	int r = core_json_expect_object(o, "reaper", fields, ARRAY_SIZE(fields), err);
	if (r < 0)
		return r;
	json_t *a = json_object_get(o, "sandboxes");
	if (!json_is_array(a))
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "reaper.sandboxes: must be an array");
	size_t n = json_array_size(a);
	if (n > AIRLOCK_WORKER_REAPER_ENTRIES_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "reaper.sandboxes: %zu entries, over %d in one question", n,
		                         AIRLOCK_WORKER_REAPER_ENTRIES_MAX);
	q->list = calloc(n ? n : 1, sizeof(*q->list));
	if (!q->list)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "reaper.sandboxes");
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(a, i);
		if (!json_is_object(e))
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "reaper.sandboxes[%zu]: must be an object", i);
		r = core_json_expect_object(e, "reaper.sandboxes[]", entry_fields,
		                            ARRAY_SIZE(entry_fields), err);
		if (r < 0)
			return r;
		json_t *je = json_object_get(e, "environment_id"), *jr = json_object_get(e, "run_id");
		json_t *jl = json_object_get(e, "lease_epoch");
		const char *env = json_string_value(je), *run = json_string_value(jr);
		worker_db_sandbox *s = &q->list[i];
		bool ok = env && run && json_is_integer(jl) && json_integer_value(jl) >= 0 &&
		          json_string_length(je) < sizeof(s->environment_id) &&
		          strlen(env) == json_string_length(je) &&
		          id_copy(run, json_string_length(jr), s->run_id);
		if (ok) {
			memcpy(s->environment_id, env, json_string_length(je) + 1);
			ok = airlock_environment_id_valid(s->environment_id);
		}
		if (!ok)
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "reaper.sandboxes[%zu]: environment_id, run_id and "
			                         "lease_epoch (an integer >= 0) by the core's rules",
			                         i);
		s->epoch = (int64_t)json_integer_value(jl);
		q->n = i + 1;
	}
	return 0;
}

int worker_reaper_request_decode(const char *body, size_t len, worker_db_sandbox **ret,
                                 size_t *ret_n, airlock_error *err)
{
	reaper_decode q = { 0 };
	int r = core_json_decode(body, len, AIRLOCK_WORKER_REAPER_BODY_MAX, "reaper", reaper_decoded,
	                         &q, err);
	if (r < 0) {
		free(q.list);
		return r;
	}
	*ret = q.list;
	*ret_n = q.n;
	return 0;
}

/* ---- artifact.export's body ------------------------------------------------------ */

void worker_export_request_clear(worker_export_request *q)
{
	if (!q)
		return;
	airlock_export_arguments_clear(&q->args);
	*q = (worker_export_request){ 0 };
}

/* A string member's bytes (NUL included: jansson keeps them) copied and
 * NUL-terminated; -1 when it is not a string or is longer than max. */
static int string_copy(json_t *j, size_t max, char **ret, size_t *ret_len)
{
	if (!json_is_string(j))
		return -1;
	size_t n = json_string_length(j);
	if (n > max)
		return -1;
	char *s = malloc(n + 1);
	if (!s)
		return -ENOMEM;
	memcpy(s, json_string_value(j), n);
	s[n] = 0;
	*ret = s;
	*ret_len = n;
	return 0;
}

static int export_arguments_decoded(json_t *ja, airlock_export_arguments *q, airlock_error *err);

static int export_decoded(json_t *o, void *ctx, airlock_error *err)
{
	static const char *const fields[] = { "epoch", "tenant_id", "arguments" };
	worker_export_request *q = ctx;
	int r = core_json_expect_object(o, "artifact.export", fields, ARRAY_SIZE(fields), err);
	if (r < 0)
		return r;
	json_t *je = json_object_get(o, "epoch"), *jt = json_object_get(o, "tenant_id");
	json_t *ja = json_object_get(o, "arguments");
	json_int_t e = je && json_is_integer(je) ? json_integer_value(je) : -1;
	const char *bad = !je ? "artifact.export.epoch: missing"
	                  : e < 0 ? "artifact.export.epoch: must be an integer >= 0"
	                  : jt && (!json_is_string(jt) ||
	                           !id_copy(json_string_value(jt), json_string_length(jt),
	                                    q->tenant_id))
	                          ? "artifact.export.tenant_id: must be a string of 1..128 of "
	                            "[A-Za-z0-9_-]"
	                  : !ja ? "artifact.export.arguments: missing"
	                        : NULL;
	if (bad)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "%s", bad);
	q->epoch = (int64_t)e;
	return export_arguments_decoded(ja, &q->args, err);
}

/* artifact.export's arguments, in a body or alone (airlock/tools.h). */
static int export_arguments_decoded(json_t *ja, airlock_export_arguments *q, airlock_error *err)
{
	static const char *const args[] = { "path", "text", "filename", "media_type" };
	if (!json_is_object(ja))
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "artifact.export.arguments: must be an object {\"path\": "
		                         "\"out/report.csv\"} or {\"text\": \"...\"}");
	int r = core_json_expect_object(ja, "artifact.export.arguments", args, ARRAY_SIZE(args),
	                                err);
	if (r < 0)
		return r;
	json_t *jp = json_object_get(ja, "path"), *jx = json_object_get(ja, "text");
	json_t *jf = json_object_get(ja, "filename"), *jm = json_object_get(ja, "media_type");
	if (!jp == !jx)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "artifact.export.arguments: exactly one of path (a file in "
		                         "the workspace, like \"out/report.csv\") and text (what you "
		                         "wrote, to hand to the user)");
	int k = 0;
	if (jp && (k = string_copy(jp, AIRLOCK_PATH_MAX, &q->path, &q->path_len)) == -1)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "artifact.export.arguments.path: must be a string of at most "
		                         "%d bytes",
		                         AIRLOCK_PATH_MAX);
	if (k == 0 && jx &&
	    (k = string_copy(jx, AIRLOCK_WORKER_EXPORT_TEXT_MAX, &q->text, &q->text_len)) == -1)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "artifact.export.arguments.text: must be a string of at most "
		                         "%u bytes",
		                         AIRLOCK_WORKER_EXPORT_TEXT_MAX);
	if (k == 0 && jf &&
	    (k = string_copy(jf, AIRLOCK_ARTIFACT_FILENAME_MAX, &q->filename, &q->filename_len)) ==
	            -1)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "artifact.export.arguments.filename: must be a string of at "
		                         "most %d bytes",
		                         AIRLOCK_ARTIFACT_FILENAME_MAX);
	if (k < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "artifact.export");
	if (jm) {
		const char *m = json_is_string(jm) ? json_string_value(jm) : NULL;
		if (!m || json_string_length(jm) >= sizeof(q->media_type) ||
		    strlen(m) != json_string_length(jm) || !airlock_media_type_valid(m))
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "artifact.export.arguments.media_type: must be "
			                         "type/subtype (RFC 6838 names, no parameters), like "
			                         "text/csv");
		memcpy(q->media_type, m, json_string_length(jm) + 1);
	}
	return 0;
}

int worker_export_request_decode(const char *body, size_t len, worker_export_request *ret,
                                 airlock_error *err)
{
	worker_export_request q = { 0 };
	int r = core_json_decode(body, len, AIRLOCK_WORKER_EXPORT_BODY_MAX, "artifact.export",
	                         export_decoded, &q, err);
	if (r < 0) {
		worker_export_request_clear(&q);
		*ret = q; /* cleared: the caller's clear is a no-op */
		return r;
	}
	*ret = q;
	return 0;
}

static int export_arguments_only(json_t *o, void *ctx, airlock_error *err)
{
	return export_arguments_decoded(o, ctx, err);
}

void airlock_export_arguments_clear(airlock_export_arguments *a)
{
	if (!a)
		return;
	free(a->path);
	free(a->text);
	free(a->filename);
	*a = (airlock_export_arguments){ 0 };
}

int airlock_export_arguments_decode(const char *json, size_t len, airlock_export_arguments *ret,
                                    airlock_error *err)
{
	airlock_export_arguments a = { 0 };
	int r = core_json_decode(json, len, AIRLOCK_WORKER_EXPORT_BODY_MAX,
	                         "artifact.export.arguments", export_arguments_only, &a, err);
	if (r < 0)
		airlock_export_arguments_clear(&a);
	*ret = a;
	return r;
}

void airlock_export_filename(const airlock_export_arguments *a, const char **ret,
                             size_t *ret_len)
{
	if (a->filename) {
		*ret = a->filename;
		*ret_len = a->filename_len;
	} else if (a->path) {
		const char *slash = memrchr(a->path, '/', a->path_len);
		*ret = slash ? slash + 1 : a->path;
		*ret_len = a->path_len - (size_t)(*ret - a->path);
	} else {
		*ret = "text.txt";
		*ret_len = 8;
	}
}

/* ---- the artifact routes ------------------------------------------------------------ */

/* The {id} segment of an artifact route: any non-empty segment (no '/',
 * no NUL),
 * kept only when it has a UUID's length (the lookup decides the rest, so
 * every id that names nothing is the same 404). */
static bool artifact_segment(const char *s, size_t n, char out[AIRLOCK_UUID_STR_LEN + 1])
{
	out[0] = 0;
	if (n == 0 || memchr(s, '/', n) || memchr(s, 0, n))
		return false;
	if (n == AIRLOCK_UUID_STR_LEN) {
		memcpy(out, s, n);
		out[n] = 0;
	}
	return true;
}

int worker_artifact_route(const char *target, size_t target_len, const char *method,
                          worker_verb *ret_verb, char ret_run_id[AIRLOCK_ID_MAX + 1],
                          char ret_artifact_id[AIRLOCK_UUID_STR_LEN + 1], const char **ret_query,
                          size_t *ret_query_len)
{
	*ret_verb = WORKER_NONE;
	ret_run_id[0] = 0;
	ret_artifact_id[0] = 0;
	*ret_query = NULL;
	*ret_query_len = 0;
	const char *qm = memchr(target, '?', target_len);
	size_t plen = qm ? (size_t)(qm - target) : target_len;
	static const char root[] = "/v1/artifacts", content[] = "/content";
	static const char runs[] = "/v1/runs/", attach[] = "/attach", mid[] = "/artifacts/";
	bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
	bool del = strcmp(method, "DELETE") == 0;
	size_t rl = sizeof(root) - 1, cl = sizeof(content) - 1;
	worker_verb v = WORKER_NONE;
	if (is(target, plen, root)) {
		if (!get && !post)
			return 405;
		v = post ? WORKER_ARTIFACT_UPLOAD : WORKER_ARTIFACT_LIST;
	} else if (plen > rl + 1 && memcmp(target, root, rl) == 0 && target[rl] == '/') {
		const char *seg = target + rl + 1;
		size_t sl = plen - rl - 1;
		bool is_content = sl > cl && memcmp(seg + sl - cl, content, cl) == 0;
		if (is_content)
			sl -= cl;
		if (!artifact_segment(seg, sl, ret_artifact_id))
			return 404;
		if (is_content) {
			if (!get)
				return 405;
			v = WORKER_ARTIFACT_CONTENT;
		} else {
			if (!get && !del)
				return 405;
			v = get ? WORKER_ARTIFACT_GET : WORKER_ARTIFACT_DELETE;
		}
	} else if (plen > sizeof(runs) - 1 && memcmp(target, runs, sizeof(runs) - 1) == 0) {
		/* /v1/runs/{run_id}/artifacts/{id}/attach, exactly. */
		const char *p = target + sizeof(runs) - 1, *end = target + plen;
		const char *slash = memchr(p, '/', (size_t)(end - p));
		size_t ml = sizeof(mid) - 1, al = sizeof(attach) - 1;
		if (!slash || (size_t)(end - slash) <= ml + al || memcmp(slash, mid, ml) != 0 ||
		    memcmp(end - al, attach, al) != 0 || !id_copy(p, (size_t)(slash - p), ret_run_id) ||
		    !artifact_segment(slash + ml, (size_t)(end - al - slash - ml), ret_artifact_id)) {
			ret_run_id[0] = 0;
			ret_artifact_id[0] = 0;
			return 404;
		}
		if (!post) {
			ret_run_id[0] = 0;
			ret_artifact_id[0] = 0;
			return 405;
		}
		v = WORKER_ARTIFACT_ATTACH;
	} else {
		return 404;
	}
	if (v == WORKER_NONE) {
		ret_artifact_id[0] = 0;
		return 405;
	}
	*ret_verb = v;
	if (qm) {
		*ret_query = qm + 1;
		*ret_query_len = target_len - plen - 1;
	}
	return 0;
}

/* ---- the artifact queries ------------------------------------------------------------ */

static int hex_value(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

/* A query value percent-decoded into out (at most max bytes): -1 for a
 * '%' not followed by two hex digits, -2 past max; else the length. */
static ssize_t pct_decode(const char *v, size_t n, unsigned char *out, size_t max)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)v[i];
		if (c == '%') {
			int hi = i + 2 < n ? hex_value(v[i + 1]) : -1;
			int lo = i + 2 < n ? hex_value(v[i + 2]) : -1;
			if (hi < 0 || lo < 0)
				return -1;
			c = hi * 16 + lo;
			i += 2;
		}
		if (o == max)
			return -2;
		out[o++] = (unsigned char)c;
	}
	return (ssize_t)o;
}

/* One pass over "k=v&k=v": each pair to fn (key, value, raw). A pair
 * without '=', an empty pair or a trailing '&' is refused by the caller's
 * message (what). */
typedef int (*query_pair_fn)(void *ctx, const char *k, size_t kl, const char *v, size_t vl,
                             airlock_error *err);

static int query_walk(const char *q, size_t len, size_t max, const char *what, query_pair_fn fn,
                      void *ctx, airlock_error *err)
{
	if (len > max)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "query: longer than %zu bytes", max);
	const char *p = q, *end = q ? q + len : q;
	while (q && p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *stop = amp ? amp : end;
		const char *eq = memchr(p, '=', (size_t)(stop - p));
		if (!eq)
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "query: every parameter is name=value (%s)", what);
		int r = fn(ctx, p, (size_t)(eq - p), eq + 1, (size_t)(stop - eq - 1), err);
		if (r < 0)
			return r;
		if (!amp)
			break;
		p = amp + 1;
		if (p == end)
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "query: a trailing '&' (%s)", what);
	}
	return 0;
}

#define UPLOAD_QUERY_WHAT "tenant_id=T, filename=F and media_type=M, each at most once"
#define LIST_QUERY_WHAT "run_id=R, after=ID, limit=N and tenant_id=T, each at most once"

typedef struct upload_decode {
	worker_upload_query *q;
	bool tenant, filename, media_type;
} upload_decode;

static int tenant_value(bool *seen, const char *v, size_t vl, char out[AIRLOCK_ID_MAX + 1],
                        airlock_error *err)
{
	*seen = true;
	if (!id_copy(v, vl, out))
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "query tenant_id: must be 1..128 of [A-Za-z0-9_-]");
	return 0;
}

static int upload_pair(void *ctx, const char *k, size_t kl, const char *v, size_t vl,
                       airlock_error *err)
{
	upload_decode *d = ctx;
	if (is(k, kl, "tenant_id") && !d->tenant)
		return tenant_value(&d->tenant, v, vl, d->q->tenant_id, err);
	if (is(k, kl, "filename") && !d->filename) {
		d->filename = true;
		ssize_t n = pct_decode(v, vl, d->q->filename, AIRLOCK_ARTIFACT_FILENAME_MAX);
		if (n < 0)
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         n == -1 ? "query filename: a '%%' not followed by two hex "
			                                   "digits (percent-encode the name's bytes)"
			                                 : "query filename: longer than %d bytes",
			                         AIRLOCK_ARTIFACT_FILENAME_MAX);
		d->q->filename_len = (size_t)n;
		return 0;
	}
	if (is(k, kl, "media_type") && !d->media_type) {
		d->media_type = true;
		unsigned char mt[sizeof(d->q->media_type)];
		ssize_t n = pct_decode(v, vl, mt, sizeof(mt) - 1);
		if (n >= 0) {
			mt[n] = 0;
			if (memchr(mt, 0, (size_t)n) || !airlock_media_type_valid((const char *)mt))
				n = -1;
		}
		if (n < 0)
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "query media_type: must be type/subtype (RFC 6838 "
			                         "names, no parameters), e.g. text/plain");
		memcpy(d->q->media_type, mt, (size_t)n + 1);
		return 0;
	}
	return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
	                         "query: only " UPLOAD_QUERY_WHAT);
}

void worker_upload_query_clear(worker_upload_query *q)
{
	if (!q)
		return;
	free(q->filename);
	*q = (worker_upload_query){ 0 };
}

int worker_upload_query_decode(const char *q, size_t len, worker_upload_query *ret,
                               airlock_error *err)
{
	*ret = (worker_upload_query){ 0 };
	/* The decoded name is never longer than its encoding. */
	size_t cap = len < AIRLOCK_ARTIFACT_FILENAME_MAX ? len : AIRLOCK_ARTIFACT_FILENAME_MAX;
	ret->filename = malloc(cap ? cap : 1);
	if (!ret->filename)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "upload query");
	upload_decode d = { .q = ret };
	int r = query_walk(q, len, AIRLOCK_WORKER_ARTIFACT_QUERY_MAX, UPLOAD_QUERY_WHAT,
	                   upload_pair, &d, err);
	if (r < 0) {
		worker_upload_query_clear(ret);
		return r;
	}
	if (!d.media_type)
		memcpy(ret->media_type, "application/octet-stream",
		       sizeof("application/octet-stream"));
	return 0;
}

typedef struct list_decode {
	worker_list_query *q;
	bool tenant, run, after, limit;
} list_decode;

static int list_pair(void *ctx, const char *k, size_t kl, const char *v, size_t vl,
                     airlock_error *err)
{
	list_decode *d = ctx;
	if (is(k, kl, "tenant_id") && !d->tenant)
		return tenant_value(&d->tenant, v, vl, d->q->tenant_id, err);
	if (is(k, kl, "run_id") && !d->run) {
		d->run = true;
		if (!id_copy(v, vl, d->q->run_id))
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "query run_id: must be 1..128 of [A-Za-z0-9_-]");
		return 0;
	}
	if (is(k, kl, "after") && !d->after) {
		d->after = true;
		if (vl != AIRLOCK_UUID_STR_LEN || memchr(v, 0, vl))
			goto bad_after;
		memcpy(d->q->after, v, vl);
		d->q->after[vl] = 0;
		if (!airlock_uuidv7_valid(d->q->after))
			goto bad_after;
		return 0;
	}
	if (is(k, kl, "limit") && !d->limit) {
		d->limit = true;
		size_t n = 0;
		for (size_t i = 0; i < vl && n <= AIRLOCK_WORKER_DB_ARTIFACTS_MAX; i++) {
			if (v[i] < '0' || v[i] > '9')
				goto bad_limit;
			n = n * 10 + (size_t)(v[i] - '0');
		}
		if (vl == 0 || n < 1 || n > AIRLOCK_WORKER_DB_ARTIFACTS_MAX)
			goto bad_limit;
		d->q->limit = n;
		return 0;
	}
	return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "query: only " LIST_QUERY_WHAT);
bad_after:
	d->q->after[0] = 0;
	return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
	                         "query after: must be an artifact id (a UUIDv7), the last of the "
	                         "page before");
bad_limit:
	return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
	                         "query limit: must be an integer from 1 to %d",
	                         AIRLOCK_WORKER_DB_ARTIFACTS_MAX);
}

int worker_list_query_decode(const char *q, size_t len, worker_list_query *ret,
                             airlock_error *err)
{
	worker_list_query out = { .limit = AIRLOCK_WORKER_DB_ARTIFACTS_MAX };
	list_decode d = { .q = &out };
	int r = query_walk(q, len, AIRLOCK_WORKER_QUERY_MAX, LIST_QUERY_WHAT, list_pair, &d, err);
	if (r < 0)
		return r;
	*ret = out;
	return 0;
}

static int attach_decoded(json_t *o, void *ctx, airlock_error *err)
{
	static const char *const fields[] = { "tenant_id" };
	char *tenant = ctx;
	int r = core_json_expect_object(o, "attach", fields, ARRAY_SIZE(fields), err);
	if (r < 0)
		return r;
	json_t *jt = json_object_get(o, "tenant_id");
	if (jt && (!json_is_string(jt) ||
	           !id_copy(json_string_value(jt), json_string_length(jt), tenant)))
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "attach.tenant_id: must be a string of 1..128 of "
		                         "[A-Za-z0-9_-]");
	return 0;
}

int worker_attach_request_decode(const char *body, size_t len,
                                 char ret_tenant[AIRLOCK_ID_MAX + 1], airlock_error *err)
{
	char tenant[AIRLOCK_ID_MAX + 1] = "";
	if (len > 0) {
		int r = core_json_decode(body, len, AIRLOCK_WORKER_ATTACH_BODY_MAX, "attach",
		                         attach_decoded, tenant, err);
		if (r < 0)
			return r;
	}
	memcpy(ret_tenant, tenant, sizeof(tenant));
	return 0;
}

bool worker_sha256_header_decode(const char *v, size_t len, char ret[AIRLOCK_SHA256_HEX_LEN + 1])
{
	if (!v)
		return false;
	while (len > 0 && (*v == ' ' || *v == '\t')) {
		v++;
		len--;
	}
	while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
		len--;
	if (len != AIRLOCK_SHA256_HEX_LEN)
		return false;
	char out[AIRLOCK_SHA256_HEX_LEN + 1];
	for (size_t i = 0; i < len; i++) {
		int h = hex_value(v[i]);
		if (h < 0)
			return false;
		out[i] = "0123456789abcdef"[h];
	}
	out[len] = 0;
	memcpy(ret, out, sizeof(out));
	return true;
}
