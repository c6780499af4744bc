/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's request decoding (src/worker/worker.h), what runs on a
 * client's bytes before the database is touched. The first byte picks the
 * decoder (mod 7); each is checked against what it must mean, not only
 * for surviving:
 *   0 worker_lease_request_decode: the rest is the body. A refusal is
 *     ToolValidationError, DECODE or ENOMEM and leaves the result as it
 *     was; a request decoded has a valid tenant, epoch >= 0, a TTL in
 *     1..86400 and a bridge that is true only when the body's "bridge"
 *     member is true, and its canonical encoding decodes to the same
 *     request.
 *   1 worker_release_query_decode: the rest is the query. An epoch found
 *     is >= 0 and printed back it is the query's "epoch" value; a tenant
 *     found is a valid id.
 *   2 worker_route: the second byte picks the method, the rest is the
 *     target. Only 0, 404 and 405 come back; a route found is exactly the
 *     documented path of its verb (for a lease, "/v1/runs/" + the run id
 *     + "/lease"), the query what follows the first '?'.
 *   3 worker_tokens_parse: the rest is a tokens file. Parsed, each of its
 *     lines' tokens (a "T X" line) is found by lookup with "Bearer T".
 *   4 worker_tool_request_decode: the rest is a tool call's body.
 *   5 worker_reaper_request_decode: the rest is the reaper's question.
 *   6 worker_export_request_decode: the rest is artifact.export's body.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/ids.h"
#include "airlock/port/exec.h"
#include "airlock/run_command.h"
#include "worker/db.h"
#include "worker/worker.h"

static void die(const char *what)
{
	fprintf(stderr, "fuzz_worker_request: %s\n", what);
	abort();
}

static void fuzz_lease(const uint8_t *d, size_t n)
{
	worker_lease_request q, before;
	memset(&q, 0x5a, sizeof(q));
	before = q;
	airlock_error err = { 0 };
	int r = worker_lease_request_decode((const char *)d, n, &q, &err);
	if (r < 0) {
		if (memcmp(&q, &before, sizeof(q)) != 0)
			die("lease: result written on failure");
		if (err.cls != AIRLOCK_ERR_TOOL_VALIDATION && err.cls != AIRLOCK_ERR_DECODE &&
		    err.cls != AIRLOCK_ERR_SYSTEM)
			die("lease: a refusal of another class");
		return;
	}
	if (!airlock_id_valid(q.tenant_id) || q.epoch < 0 || q.ttl_seconds < 1 ||
	    q.ttl_seconds > 86400 || (q.bridge != true && q.bridge != false))
		die("lease: decoded out of range");
	/* A bridge is asked for only with the literal true (a member name
	 * may be spelled with escapes, the literal cannot). */
	if (q.bridge && !memmem(d, n, "true", 4))
		die("lease: a bridge decoded from a body that does not ask for one");
	char again[512];
	int k = snprintf(again, sizeof(again),
	                 "{\"tenant_id\":\"%s\",\"epoch\":%" PRId64 ",\"ttl_seconds\":%" PRId64
	                 "%s}",
	                 q.tenant_id, q.epoch, q.ttl_seconds, q.bridge ? ",\"bridge\":true" : "");
	worker_lease_request q2;
	if (worker_lease_request_decode(again, (size_t)k, &q2, &err) < 0 ||
	    strcmp(q2.tenant_id, q.tenant_id) != 0 || q2.epoch != q.epoch ||
	    q2.ttl_seconds != q.ttl_seconds || q2.bridge != q.bridge)
		die("lease: the canonical encoding does not decode to the same request");
}

static void fuzz_query(const uint8_t *d, size_t n)
{
	int64_t epoch = -7;
	char tenant[AIRLOCK_ID_MAX + 1];
	airlock_error err = { 0 };
	if (worker_release_query_decode((const char *)d, n, &epoch, tenant, &err) < 0)
		return;
	if (epoch < 0)
		die("query: a negative epoch");
	if (tenant[0] && !airlock_id_valid(tenant))
		die("query: an invalid tenant");
	char want[32];
	int k = snprintf(want, sizeof(want), "epoch=%" PRId64, epoch);
	/* The pair as written: at the start or after '&', then '&' or the end,
	 * leading zeros aside. */
	const char *s = (const char *)d, *end = s + n;
	bool seen = false;
	for (const char *p = s; p + 6 <= end && !seen; p++) {
		if ((p != s && p[-1] != '&') || memcmp(p, "epoch=", 6) != 0)
			continue;
		const char *v = p + 6;
		while (v < end && *v == '0' && v + 1 < end && v[1] != '&')
			v++;
		size_t vl = (size_t)k - 6;
		seen = (size_t)(end - v) >= vl && memcmp(v, want + 6, vl) == 0 &&
		       (v + vl == end || v[vl] == '&');
	}
	if (!seen)
		die("query: the epoch decoded is not the query's");
}

static void fuzz_route(const uint8_t *d, size_t n)
{
	if (n < 1)
		return;
	static const char *const methods[] = { "GET", "PUT", "DELETE", "POST" };
	const char *method = methods[d[0] % 4];
	const char *t = (const char *)d + 1;
	size_t tl = n - 1;
	worker_verb v;
	char run[AIRLOCK_ID_MAX + 1];
	const char *q;
	size_t ql;
	int r = worker_route(t, tl, method, &v, run, &q, &ql);
	if (r != 0 && r != 404 && r != 405)
		die("route: another status");
	if (r != 0)
		return;
	const char *qm = memchr(t, '?', tl);
	size_t plen = qm ? (size_t)(qm - t) : tl;
	if ((qm && (q != qm + 1 || ql != tl - plen - 1)) || (!qm && q))
		die("route: the query is not what follows the first '?'");
	char path[256];
	if (v == WORKER_HEALTH)
		snprintf(path, sizeof(path), "/v1/health");
	else if (v == WORKER_TOOLS)
		snprintf(path, sizeof(path), "/v1/tools");
	else if (v == WORKER_REAPER_STALE)
		snprintf(path, sizeof(path), "/v1/reaper/stale");
	else if (v == WORKER_LEASE_CLAIM || v == WORKER_LEASE_RELEASE)
		snprintf(path, sizeof(path), "/v1/runs/%s/lease", run);
	else if (v == WORKER_RUN_COMMAND)
		snprintf(path, sizeof(path), "/v1/runs/%s/tools/sandbox.run_command", run);
	else if (v == WORKER_ARTIFACT_EXPORT)
		snprintf(path, sizeof(path), "/v1/runs/%s/tools/artifact.export", run);
	else
		die("route: no verb");
	if (strlen(path) != plen || memcmp(path, t, plen) != 0)
		die("route: another spelling reached a verb");
	bool get = v == WORKER_HEALTH || v == WORKER_TOOLS;
	bool post = v == WORKER_REAPER_STALE || v == WORKER_RUN_COMMAND ||
	            v == WORKER_ARTIFACT_EXPORT;
	if (get != (strcmp(method, "GET") == 0) || post != (strcmp(method, "POST") == 0) ||
	    (v == WORKER_LEASE_CLAIM) != (strcmp(method, "PUT") == 0))
		die("route: the wrong method reached a verb");
}

/* artifact.export's body: decoded, exactly one of path and text, each
 * within its cap, a media type by the core's rule, a valid tenant when one
 * is given; a refusal leaves nothing to free. */
static void fuzz_export(const uint8_t *d, size_t n)
{
	worker_export_request q;
	memset(&q, 0x5a, sizeof(q));
	airlock_error err = { 0 };
	int r = worker_export_request_decode((const char *)d, n, &q, &err);
	if (r < 0) {
		if (q.args.path || q.args.text || q.args.filename)
			die("export: something left to free after a refusal");
		return;
	}
	if (!q.args.path == !q.args.text || q.epoch < 0 || (q.args.text && q.args.text_len > (1u << 20)) ||
	    (q.args.filename && q.args.filename_len > 16384) ||
	    (q.args.media_type[0] && !airlock_media_type_valid(q.args.media_type)) ||
	    (q.tenant_id[0] && !airlock_id_valid(q.tenant_id)))
		die("export: decoded out of its rules");
	worker_export_request_clear(&q);
}

static void fuzz_tokens(const uint8_t *d, size_t n)
{
	worker_tokens *t = NULL;
	airlock_error err = { 0 };
	if (worker_tokens_parse((const char *)d, n, &t, &err) < 0)
		return;
	const char *s = (const char *)d, *end = s + n;
	for (const char *p = s; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *stop = nl ? nl : end;
		const char *a = p;
		while (a < stop && (*a == ' ' || *a == '\t'))
			a++;
		const char *b = a;
		while (b < stop && *b > 0x20 && *b < 0x7f)
			b++;
		if (a < b && *a != '#') {
			char value[300], tenant[AIRLOCK_ID_MAX + 1];
			int k = snprintf(value, sizeof(value), "Bearer %.*s", (int)(b - a), a);
			if (!worker_tokens_lookup(t, value, (size_t)k, tenant))
				die("tokens: a token of the file is not found");
		}
		p = nl ? nl + 1 : end;
	}
	worker_tokens_free(t);
}

/* A tool call decoded is within every rule the worker relies on after
 * it: an epoch >= 0, a valid tenant when one came, a non-empty vector of
 * NUL-free strings that passes the core's validation, a timeout within
 * the tool's; refused, it is one of the refusal classes and left empty. */
static void fuzz_tool(const uint8_t *d, size_t n)
{
	worker_tool_request q;
	airlock_error err = { 0 };
	if (worker_tool_request_decode((const char *)d, n, &q, &err) < 0) {
		if (q.argv || q.working_directory || q.argc)
			die("tool: a refused call left its vector");
		if (err.cls != AIRLOCK_ERR_TOOL_VALIDATION && err.cls != AIRLOCK_ERR_DECODE &&
		    err.cls != AIRLOCK_ERR_SYSTEM && err.cls != AIRLOCK_ERR_WORKSPACE_ESCAPE)
			die("tool: a refusal of another class");
		return;
	}
	if (q.epoch < 0 || (q.tenant_id[0] && !airlock_id_valid(q.tenant_id)) || q.argc == 0 ||
	    !q.argv || q.argv[q.argc] || q.timeout_seconds < 0 ||
	    q.timeout_seconds > AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS)
		die("tool: decoded out of range");
	airlock_execution_command c = { .argv = q.argv, .argc = q.argc,
		                        .working_directory = (char *)(uintptr_t)".", .timeout_seconds = 1,
		                        .maximum_output_bytes = 1 };
	if (airlock_execution_command_validate(&c, AIRLOCK_RUN_COMMAND_ARGV_MAX_BYTES, &err) < 0)
		die("tool: a vector the core refuses was decoded");
	worker_tool_request_clear(&q);
}

/* The reaper's question decoded: at most the cap, each entry by the
 * core's rules. */
static void fuzz_reaper(const uint8_t *d, size_t n)
{
	worker_db_sandbox *list = NULL;
	size_t k = 0;
	airlock_error err = { 0 };
	if (worker_reaper_request_decode((const char *)d, n, &list, &k, &err) < 0)
		return;
	if (k > AIRLOCK_WORKER_REAPER_ENTRIES_MAX)
		die("reaper: past the cap");
	for (size_t i = 0; i < k; i++)
		if (!airlock_environment_id_valid(list[i].environment_id) ||
		    !airlock_id_valid(list[i].run_id) || list[i].epoch < 0)
			die("reaper: an entry out of the rules");
	free(list);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 7) {
	case 0: fuzz_lease(data + 1, size - 1); break;
	case 1: fuzz_query(data + 1, size - 1); break;
	case 2: fuzz_route(data + 1, size - 1); break;
	case 3: fuzz_tokens(data + 1, size - 1); break;
	case 4: fuzz_tool(data + 1, size - 1); break;
	case 6: fuzz_export(data + 1, size - 1); break;
	default: fuzz_reaper(data + 1, size - 1); break;
	}
	return 0;
}
