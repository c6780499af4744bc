/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's request decoding that needs no daemon: route, query,
 * handle header (server_internal.h). Every input here is a
 * client's bytes: lengths are carried, never found with strlen, and nothing
 * is unescaped before it is checked.
 */
#include "service/server_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "airlock/ids.h"
#include "airlock/json.h"
#include "airlock/timeout.h"
#include "core/json_internal.h"
#include "util/util.h"

/* ---- routes ------------------------------------------------------------- */

/* The id segment: what airlock_environment_id_valid could accept fits in
 * the id buffer; anything longer or holding a byte outside [A-Za-z0-9_-]
 * names no sandbox, and is refused as the path it is (404) rather than
 * decoded. */
static bool id_segment(const char *s, size_t n, char out[AIRLOCK_ENVIRONMENT_ID_MAX])
{
	if (n == 0 || n >= AIRLOCK_ENVIRONMENT_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		          c == '_' || c == '-';
		if (!ok)
			return false;
	}
	memcpy(out, s, n);
	out[n] = 0;
	return true;
}

static bool seg_is(const char *s, size_t n, const char *word)
{
	return strlen(word) == n && memcmp(s, word, n) == 0;
}

int svc_route(const char *target, size_t target_len, const char *method, svc_verb *ret_verb,
              char ret_id[AIRLOCK_ENVIRONMENT_ID_MAX], const char **ret_query,
              size_t *ret_query_len)
{
	ret_id[0] = 0;
	*ret_verb = SVC_NONE;
	*ret_query = NULL;
	*ret_query_len = 0;
	const char *qm = memchr(target, '?', target_len);
	size_t plen = qm ? (size_t)(qm - target) : target_len;
	if (qm) {
		*ret_query = qm + 1;
		*ret_query_len = target_len - plen - 1;
	}
	static const char prefix[] = "/v1/";
	if (plen < sizeof(prefix) - 1 || memcmp(target, prefix, sizeof(prefix) - 1) != 0)
		return 404;
	/* Up to four segments after /v1/: sandboxes/{id}/workspace/{what}. An
	 * empty segment (a doubled or trailing slash) is a path nobody
	 * documented, not a spelling of one that exists. */
	const char *seg[5];
	size_t len[5], n = 0;
	const char *p = target + sizeof(prefix) - 1, *end = target + plen;
	while (p <= end) {
		const char *slash = memchr(p, '/', (size_t)(end - p));
		const char *stop = slash ? slash : end;
		if (n == 5 || stop == p)
			return 404;
		seg[n] = p;
		len[n++] = (size_t)(stop - p);
		if (!slash)
			break;
		p = slash + 1;
	}
	bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
	bool put = strcmp(method, "PUT") == 0, del = strcmp(method, "DELETE") == 0;
	svc_verb v = SVC_NONE;
	bool allowed = false;
	if (n == 1 && seg_is(seg[0], len[0], "health")) {
		v = SVC_HEALTH;
		allowed = get;
	} else if (n == 1 && seg_is(seg[0], len[0], "sandboxes")) {
		v = post ? SVC_PROVISION : SVC_LIST;
		allowed = get || post;
	} else if (n >= 2 && seg_is(seg[0], len[0], "sandboxes")) {
		if (!id_segment(seg[1], len[1], ret_id))
			return 404;
		if (n == 2) {
			v = SVC_DESTROY;
			allowed = del;
		} else if (n == 3 && seg_is(seg[2], len[2], "execute")) {
			v = SVC_EXECUTE;
			allowed = post;
		} else if (n == 3 && seg_is(seg[2], len[2], "cancel")) {
			v = SVC_CANCEL;
			allowed = post;
		} else if (n == 4 && seg_is(seg[2], len[2], "workspace")) {
			if (seg_is(seg[3], len[3], "contain")) {
				v = SVC_CONTAIN;
				allowed = get;
			} else if (seg_is(seg[3], len[3], "file")) {
				v = put ? SVC_WRITE : SVC_READ;
				allowed = get || put;
			} else if (seg_is(seg[3], len[3], "dir")) {
				v = SVC_LISTDIR;
				allowed = get;
			} else if (seg_is(seg[3], len[3], "provenance")) {
				v = SVC_PROVENANCE;
				allowed = get;
			} else if (seg_is(seg[3], len[3], "stream")) {
				v = SVC_STREAM;
				allowed = get;
			}
		}
	}
	if (v == SVC_NONE) {
		ret_id[0] = 0;
		return 404;
	}
	if (!allowed)
		return 405;
	*ret_verb = v;
	return 0;
}

/* ---- the query string ---------------------------------------------------- */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode s[0..n) into a new buffer; NULL with *bad on a broken
 * escape, NULL without it on ENOMEM. */
static char *pct_decode(const char *s, size_t n, size_t *ret_len, bool *bad)
{
	*bad = false;
	char *out = malloc(n + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			out[o++] = s[i];
			continue;
		}
		int hi = i + 1 < n ? hexval(s[i + 1]) : -1;
		int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
		if (hi < 0 || lo < 0) {
			free(out);
			*bad = true;
			return NULL;
		}
		out[o++] = (char)(hi << 4 | lo);
		i += 2;
	}
	out[o] = 0;
	*ret_len = o;
	return out;
}

int svc_query_value(const char *query, size_t query_len, const char *key, char **ret,
                    size_t *ret_len, airlock_error *err)
{
	size_t klen = strlen(key);
	const char *found = NULL;
	size_t found_len = 0;
	for (size_t i = 0; query && i <= query_len;) {
		const char *amp = memchr(query + i, '&', query_len - i);
		size_t end = amp ? (size_t)(amp - query) : query_len;
		const char *pair = query + i;
		size_t plen = end - i;
		const char *eq = memchr(pair, '=', plen);
		size_t name_len = eq ? (size_t)(eq - pair) : plen;
		/* Keys are matched as written: the documented ones are plain
		 * words, so an escaped spelling of one is another key. */
		if (name_len == klen && memcmp(pair, key, klen) == 0) {
			if (found)
				return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
				                         "%s: given more than once", key);
			found = eq ? eq + 1 : pair + plen;
			found_len = eq ? plen - name_len - 1 : 0;
		}
		if (!amp)
			break;
		i = end + 1;
	}
	if (!found)
		return 0;
	bool bad = false;
	char *v = pct_decode(found, found_len, ret_len, &bad);
	if (!v)
		return bad ? airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                               "%s: invalid percent-encoding", key)
		           : airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", key);
	*ret = v;
	return 1;
}

/* ---- the handle header --------------------------------------------------- */

int svc_handle_decode(const char *value, size_t value_len, airlock_environment_handle *ret,
                      airlock_error *err)
{
	/* A handle's JSON is a few hundred bytes; the header block's cap bounds
	 * it anyway, this bounds the copy. */
	if (!value || value_len == 0)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "Airlock-Handle: missing");
	if (value_len > AIRLOCK_SERVICE_HEADER_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "Airlock-Handle: longer than %u bytes", AIRLOCK_SERVICE_HEADER_MAX);
	if (value_len % 4 == 1)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "Airlock-Handle: not base64url (its length is impossible)");
	/* base64url without padding, turned into the standard alphabet with
	 * padding for the one decoder the library has. */
	size_t n = (value_len + 3) / 4 * 4;
	_cleanup_free_ char *std = malloc(n + 1);
	if (!std)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "Airlock-Handle");
	for (size_t i = 0; i < value_len; i++) {
		char c = value[i];
		if (c == '-')
			c = '+';
		else if (c == '_')
			c = '/';
		else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "Airlock-Handle: not base64url without padding");
		std[i] = c;
	}
	for (size_t i = value_len; i < n; i++)
		std[i] = '=';
	std[n] = 0;
	_cleanup_free_ unsigned char *json = NULL;
	size_t jlen = 0;
	if (util_base64_decode(std, n, &json, &jlen) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "Airlock-Handle: not base64url without padding");
	airlock_environment_handle h = { 0 };
	airlock_error derr = { 0 };
	if (airlock_environment_handle_from_json((const char *)json, jlen, &h, &derr) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "Airlock-Handle: %s",
		                         derr.message);
	*ret = h;
	return 0;
}

/* ---- the request envelopes ------------------------------------------------
 * {"spec": ..., "environment_id": ...} and {"command": ...,
 * "remaining_budget_ms": ..., "stream": ...}: checked field by field,
 * unknown ones refused, and each member that is a type of the
 * specification read by that type's strict decoder from the same tree
 * (json.h's rules): the body is parsed once, under the decode's memory
 * budget, and never dumped back to text. */

typedef struct provision_ctx {
	svc_provision *out;
} provision_ctx;

static int provision_decoded(json_t *o, void *ctx, airlock_error *err)
{
	static const char *const fields[] = { "spec", "environment_id" };
	svc_provision *p = ((provision_ctx *)ctx)->out;
	int r = core_json_expect_object(o, "provision", fields, ARRAY_SIZE(fields), err);
	if (r < 0)
		return r;
	json_t *js = json_object_get(o, "spec"), *jid = json_object_get(o, "environment_id");
	if (!js)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "provision.spec: missing");
	if (jid && !json_is_null(jid)) {
		const char *id = json_is_string(jid) ? json_string_value(jid) : NULL;
		if (!id || !airlock_environment_id_valid(id) || strlen(id) >= sizeof(p->environment_id))
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "provision.environment_id: must be null or an environment id (env_...)");
		memcpy(p->environment_id, id, strlen(id) + 1);
		p->has_environment_id = true;
	}
	if ((r = core_json_spec_from_value(js, &p->spec, err)) < 0) {
		airlock_error_prefix(err, "provision.spec: ");
		return r;
	}
	return 0;
}

int svc_provision_decode(const void *body, size_t len, svc_provision *ret, airlock_error *err)
{
	svc_provision p = { 0 };
	provision_ctx ctx = { &p };
	int r = core_json_decode(body, len, AIRLOCK_SERVICE_PROVISION_BODY_MAX, "provision",
	                         provision_decoded, &ctx, err);
	if (r < 0) {
		airlock_environment_spec_clear(&p.spec);
		return r;
	}
	*ret = p;
	return 0;
}

static int execute_decoded(json_t *o, void *ctx, airlock_error *err)
{
	static const char *const fields[] = { "command", "remaining_budget_ms", "stream" };
	svc_execute *x = ctx;
	int r = core_json_expect_object(o, "execute", fields, ARRAY_SIZE(fields), err);
	if (r < 0)
		return r;
	json_t *jc = json_object_get(o, "command"), *jb = json_object_get(o, "remaining_budget_ms");
	json_t *jst = json_object_get(o, "stream");
	const char *bad = !jc ? "execute.command: missing"
	                  : jb && !json_is_null(jb) && !json_is_integer(jb)
	                          ? "execute.remaining_budget_ms: must be an integer or null"
	                  : jst && !json_is_boolean(jst) ? "execute.stream: must be true or false"
	                                                 : NULL;
	if (bad)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "%s", bad);
	x->stream = jst && json_is_true(jst);
	x->budget_ms = jb && json_is_integer(jb) ? (int64_t)json_integer_value(jb) : AIRLOCK_BUDGET_NONE;
	if ((r = core_json_command_from_value(jc, &x->command, err)) < 0) {
		airlock_error_prefix(err, "execute.command: ");
		return r;
	}
	return 0;
}

int svc_execute_decode(const void *body, size_t len, svc_execute *ret, airlock_error *err)
{
	svc_execute x = { 0 };
	int r = core_json_decode(body, len, AIRLOCK_SERVICE_EXECUTE_BODY_MAX, "execute",
	                         execute_decoded, &x, err);
	if (r < 0) {
		airlock_execution_command_clear(&x.command);
		return r;
	}
	*ret = x;
	return 0;
}
