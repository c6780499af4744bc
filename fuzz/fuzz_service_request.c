/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The execution service's request decoding (src/service/server_internal.h),
 * what runs on a client's bytes before any sandbox is touched. The first
 * byte picks the decoder (mod 6); each is checked against what it must
 * mean, not only for surviving (this harness merges the first one on
 * h/service, whose properties it keeps, with the stronger ones below):
 *   0 svc_route: the second byte picks the method, the rest is the request
 *     target. A route found is exactly the documented path of that verb and
 *     id (no other spelling reaches a verb); the query is what follows the
 *     first '?'; only 0, 404 and 405 come back.
 *   1 svc_query_value: the second byte picks the key, the rest is the query
 *     string. Found, absent or refused exactly as a plain reading of the
 *     pairs says; a value found percent-encodes back to itself.
 *   2 http_bearer_ok: the second byte is the token's length, then the
 *     token, then the Authorization value. True exactly when the value is
 *     "Bearer " (any case) and the token, and always for that spelling.
 *   3 svc_handle_decode: the rest is the Airlock-Handle value. A handle
 *     decoded encodes to JSON and base64url that decode to the same handle.
 *   4 svc_provision_decode, 5 svc_execute_decode: the rest is the body. A
 *     refusal is ToolValidationError, DECODE or ENOMEM; a spec or command
 *     decoded encodes, and that encoding in a fresh envelope decodes to the
 *     same value; the decode never held more than its budget.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "airlock/json.h"
#include "core/json_internal.h"
#include "http/http.h"
#include "service/server_internal.h"
#include "util/util.h"

static void die(const char *what)
{
	fprintf(stderr, "fuzz_service_request: %s\n", what);
	abort();
}

/* ---- 0: routes ---------------------------------------------------------- */

static const char *const methods[] = { "GET", "POST", "PUT", "DELETE", "PATCH", "get", "" };

static bool verb_has_id(svc_verb v)
{
	switch (v) {
	case SVC_EXECUTE:
	case SVC_CANCEL:
	case SVC_DESTROY:
	case SVC_CONTAIN:
	case SVC_READ:
	case SVC_WRITE:
	case SVC_LISTDIR:
	case SVC_PROVENANCE:
	case SVC_STREAM: return true;
	case SVC_NONE:
	case SVC_HEALTH:
	case SVC_LIST:
	case SVC_PROVISION: return false;
	}
	return false;
}

/* The documented path and method of a verb (docs/service-api.md). */
static void canonical(svc_verb v, const char *id, char *out, size_t size, const char **method)
{
	static const struct {
		svc_verb v;
		const char *method, *fmt;
	} paths[] = {
		{ SVC_HEALTH, "GET", "/v1/health" },
		{ SVC_LIST, "GET", "/v1/sandboxes" },
		{ SVC_PROVISION, "POST", "/v1/sandboxes" },
		{ SVC_EXECUTE, "POST", "/v1/sandboxes/%s/execute" },
		{ SVC_CANCEL, "POST", "/v1/sandboxes/%s/cancel" },
		{ SVC_DESTROY, "DELETE", "/v1/sandboxes/%s" },
		{ SVC_CONTAIN, "GET", "/v1/sandboxes/%s/workspace/contain" },
		{ SVC_READ, "GET", "/v1/sandboxes/%s/workspace/file" },
		{ SVC_WRITE, "PUT", "/v1/sandboxes/%s/workspace/file" },
		{ SVC_LISTDIR, "GET", "/v1/sandboxes/%s/workspace/dir" },
		{ SVC_PROVENANCE, "GET", "/v1/sandboxes/%s/workspace/provenance" },
		{ SVC_STREAM, "GET", "/v1/sandboxes/%s/workspace/stream" },
	};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (paths[i].v == v) {
			*method = paths[i].method;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
			snprintf(out, size, paths[i].fmt, id);
#pragma GCC diagnostic pop
			return;
		}
	die("a verb without a documented path");
}

static void fuzz_route(const uint8_t *data, size_t size)
{
	if (size < 1)
		return;
	const char *method = methods[data[0] % (sizeof(methods) / sizeof(methods[0]))];
	const char *target = (const char *)data + 1;
	size_t len = size - 1;
	svc_verb v = (svc_verb)-1;
	char id[AIRLOCK_ENVIRONMENT_ID_MAX];
	memset(id, 'x', sizeof(id));
	const char *query = (const char *)1;
	size_t qlen = 12345;
	int r = svc_route(target, len, method, &v, id, &query, &qlen);
	if (r != 0 && r != 404 && r != 405)
		die("route: a status other than 0, 404, 405");
	if (!memchr(id, 0, sizeof(id)))
		die("route: the id is not terminated");
	for (const char *c = id; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		      *c == '_' || *c == '-'))
			die("route: an id byte outside [A-Za-z0-9_-]");
	const char *qm = memchr(target, '?', len);
	if (qm ? query != qm + 1 || qlen != len - (size_t)(qm - target) - 1 : query || qlen)
		die("route: the query is not what follows the first '?'");
	if (r == 404 && id[0])
		die("route: an id out of a path that names nothing");
	if (r != 0) {
		if (v != SVC_NONE)
			die("route: a verb on a refusal");
		return;
	}
	if (v == SVC_NONE || (verb_has_id(v) != (id[0] != 0)))
		die("route: verb and id disagree");
	char want[160];
	const char *want_method = NULL;
	canonical(v, id, want, sizeof(want), &want_method);
	size_t plen = qm ? (size_t)(qm - target) : len;
	if (strlen(want) != plen || memcmp(want, target, plen) != 0)
		die("route: a path other than the documented one reached a verb");
	if (strcmp(method, want_method) != 0)
		die("route: a verb reached with another method");
	/* And the documented path itself routes back to the same verb. */
	svc_verb v2;
	char id2[AIRLOCK_ENVIRONMENT_ID_MAX];
	const char *q2;
	size_t q2len;
	if (svc_route(want, strlen(want), want_method, &v2, id2, &q2, &q2len) != 0 || v2 != v ||
	    strcmp(id2, id) != 0)
		die("route: not stable");
}

/* ---- 1: the query string ------------------------------------------------- */

static const char *const keys[] = { "path", "max_bytes", "max_entries", "p" };

/* How many pairs are named key, read plainly. */
static size_t pairs_named(const char *q, size_t n, const char *key)
{
	size_t count = 0, k = strlen(key);
	size_t i = 0;
	for (;;) {
		size_t j = i;
		while (j < n && q[j] != '&')
			j++;
		size_t name = i;
		while (name < j && q[name] != '=')
			name++;
		if (name - i == k && memcmp(q + i, key, k) == 0)
			count++;
		if (j == n)
			break;
		i = j + 1;
	}
	return count;
}

static void fuzz_query(const uint8_t *data, size_t size)
{
	if (size < 1)
		return;
	const char *key = keys[data[0] % (sizeof(keys) / sizeof(keys[0]))];
	const char *q = (const char *)data + 1;
	size_t n = size - 1;
	char *v = NULL;
	size_t vlen = 0;
	airlock_error err = { 0 };
	int r = svc_query_value(q, n, key, &v, &vlen, &err);
	size_t named = pairs_named(q, n, key);
	if (named == 0 && r != 0)
		die("query: a key that is not there was found or refused");
	if (named > 1 && (r >= 0 || err.cls != AIRLOCK_ERR_TOOL_VALIDATION))
		die("query: a key given twice was not refused");
	if (named == 1 && r == 0)
		die("query: a key that is there was not found");
	if (r < 0 && err.cls != AIRLOCK_ERR_TOOL_VALIDATION)
		die("query: a refusal of another class");
	if (r != 1)
		return;
	if (vlen > n || v[vlen] != 0)
		die("query: the value is longer than its query or not terminated");
	/* Every byte escaped, decoded again: the same bytes. */
	char *enc = malloc(strlen(key) + 1 + 3 * vlen + 1);
	if (!enc)
		die("memory");
	size_t o = (size_t)sprintf(enc, "%s=", key);
	for (size_t i = 0; i < vlen; i++)
		o += (size_t)sprintf(enc + o, "%%%02X", (unsigned char)v[i]);
	char *v2 = NULL;
	size_t v2len = 0;
	if (svc_query_value(enc, o, key, &v2, &v2len, &err) != 1 || v2len != vlen ||
	    memcmp(v, v2, vlen) != 0)
		die("query: an escaped value does not decode to itself");
	free(enc);
	free(v2);
	free(v);
}

/* ---- 2: the bearer token -------------------------------------------------- */

static void fuzz_bearer(const uint8_t *data, size_t size)
{
	if (size < 1)
		return;
	size_t tlen = data[0];
	if (tlen > size - 1)
		tlen = size - 1;
	const char *tok = (const char *)data + 1;
	const char *value = tok + tlen;
	size_t vlen = size - 1 - tlen;
	bool ok = http_bearer_ok(value, vlen, tok, tlen);
	bool want = tlen > 0 && vlen == 7 + tlen && strncasecmp(value, "Bearer ", 7) == 0 &&
	            memcmp(value + 7, tok, tlen) == 0;
	if (ok != want)
		die("bearer: accepted or refused against the rule");
	if (tlen == 0)
		return;
	char *spelled = malloc(7 + tlen);
	if (!spelled)
		die("memory");
	memcpy(spelled, "bEaReR ", 7);
	memcpy(spelled + 7, tok, tlen);
	if (!http_bearer_ok(spelled, 7 + tlen, tok, tlen))
		die("bearer: the token itself refused");
	/* One byte more or less is another token. */
	if (http_bearer_ok(spelled, 6 + tlen, tok, tlen))
		die("bearer: a prefix of the token accepted");
	free(spelled);
}

/* ---- 3: the handle header -------------------------------------------------- */

static char *base64url(const char *s, size_t n)
{
	char *b = util_base64_encode(s, n);
	if (!b)
		die("memory");
	size_t o = 0;
	for (size_t i = 0; b[i] && b[i] != '='; i++)
		b[o++] = b[i] == '+' ? '-' : b[i] == '/' ? '_' : b[i];
	b[o] = 0;
	return b;
}

static void fuzz_handle(const uint8_t *data, size_t size)
{
	airlock_environment_handle h = { 0 }, h2 = { 0 };
	airlock_error err = { 0 };
	if (svc_handle_decode((const char *)data, size, &h, &err) < 0) {
		if (err.cls != AIRLOCK_ERR_TOOL_VALIDATION && err.cls != AIRLOCK_ERR_SYSTEM)
			die("handle: a refusal of another class");
		return;
	}
	char *j1 = airlock_environment_handle_to_json(&h, &err);
	if (!j1)
		die("handle: a decoded handle does not encode");
	char *b = base64url(j1, strlen(j1));
	if (svc_handle_decode(b, strlen(b), &h2, &err) < 0)
		die("handle: its own header does not decode");
	char *j2 = airlock_environment_handle_to_json(&h2, &err);
	if (!j2 || strcmp(j1, j2) != 0)
		die("handle: the round trip changed it");
	free(j1);
	free(j2);
	free(b);
	airlock_environment_handle_clear(&h);
	airlock_environment_handle_clear(&h2);
}

/* ---- 4, 5: the provision and execute bodies ---------------------------------- */

static void refusal_ok(const airlock_error *err, const char *what)
{
	if (err->cls != AIRLOCK_ERR_TOOL_VALIDATION && err->cls != AIRLOCK_ERR_DECODE &&
	    err->cls != AIRLOCK_ERR_SYSTEM)
		die(what);
}

static void budget_kept(size_t size, const char *what)
{
	if (core_json_decode_last_peak() > core_json_decode_budget(size))
		die(what);
}

static void fuzz_provision(const uint8_t *data, size_t size)
{
	svc_provision p = { 0 }, p2 = { 0 };
	airlock_error err = { 0 };
	int r = svc_provision_decode(data, size, &p, &err);
	budget_kept(size, "provision: the decode held more than its budget");
	if (r < 0) {
		refusal_ok(&err, "provision: a refusal of another class");
		return;
	}
	char *j1 = airlock_environment_spec_to_json(&p.spec, &err);
	if (!j1)
		die("provision: a decoded spec does not encode");
	char *body = NULL;
	if (p.has_environment_id ? asprintf(&body, "{\"spec\":%s,\"environment_id\":\"%s\"}", j1,
	                                    p.environment_id) < 0
	                         : asprintf(&body, "{\"spec\":%s}", j1) < 0)
		die("memory");
	if (svc_provision_decode(body, strlen(body), &p2, &err) < 0)
		die("provision: its own encoding does not decode");
	char *j2 = airlock_environment_spec_to_json(&p2.spec, &err);
	if (!j2 || strcmp(j1, j2) != 0 || p.has_environment_id != p2.has_environment_id ||
	    strcmp(p.environment_id, p2.environment_id) != 0)
		die("provision: the round trip changed it");
	free(j1);
	free(j2);
	free(body);
	airlock_environment_spec_clear(&p.spec);
	airlock_environment_spec_clear(&p2.spec);
}

static void fuzz_execute(const uint8_t *data, size_t size)
{
	svc_execute x = { 0 }, x2 = { 0 };
	airlock_error err = { 0 };
	int r = svc_execute_decode(data, size, &x, &err);
	budget_kept(size, "execute: the decode held more than its budget");
	if (r < 0) {
		refusal_ok(&err, "execute: a refusal of another class");
		return;
	}
	char *j1 = airlock_execution_command_to_json(&x.command, &err);
	if (!j1)
		die("execute: a decoded command does not encode");
	char *body = NULL;
	if (asprintf(&body, "{\"command\":%s,\"stream\":%s}", j1, x.stream ? "true" : "false") < 0)
		die("memory");
	if (svc_execute_decode(body, strlen(body), &x2, &err) < 0)
		die("execute: its own encoding does not decode");
	char *j2 = airlock_execution_command_to_json(&x2.command, &err);
	if (!j2 || strcmp(j1, j2) != 0 || x.stream != x2.stream)
		die("execute: the round trip changed it");
	free(j1);
	free(j2);
	free(body);
	airlock_execution_command_clear(&x.command);
	airlock_execution_command_clear(&x2.command);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 6) {
	case 0: fuzz_route(data + 1, size - 1); break;
	case 1: fuzz_query(data + 1, size - 1); break;
	case 2: fuzz_bearer(data + 1, size - 1); break;
	case 3: fuzz_handle(data + 1, size - 1); break;
	case 4: fuzz_provision(data + 1, size - 1); break;
	default: fuzz_execute(data + 1, size - 1); break;
	}
	return 0;
}
