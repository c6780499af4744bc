/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the worker's API decodes from a request (worker.h): the route, the
 * lease's body, the release's query. Every input is a client's bytes:
 * lengths are carried, never found with strlen, and nothing is unescaped
 * (an id is [A-Za-z0-9_-], so an escape in one names no run).
 */
#include "worker/worker.h"

#include <string.h>

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
	static const char health[] = "/v1/health", runs[] = "/v1/runs/", lease[] = "/lease";
	bool get = strcmp(method, "GET") == 0, put = strcmp(method, "PUT") == 0;
	bool del = strcmp(method, "DELETE") == 0;
	if (is(target, plen, health)) {
		if (!get)
			return 405;
		*ret_verb = WORKER_HEALTH;
	} else {
		/* /v1/runs/{run_id}/lease, exactly: no empty, doubled or extra
		 * segment spells it. */
		size_t rl = sizeof(runs) - 1, ll = sizeof(lease) - 1;
		if (plen <= rl + ll || memcmp(target, runs, rl) != 0 ||
		    memcmp(target + plen - ll, lease, ll) != 0 ||
		    !id_copy(target + rl, plen - rl - ll, ret_run_id)) {
			ret_run_id[0] = 0;
			return 404;
		}
		if (!put && !del) {
			ret_run_id[0] = 0;
			return 405;
		}
		*ret_verb = put ? WORKER_LEASE_CLAIM : WORKER_LEASE_RELEASE;
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
	static const char *const fields[] = { "tenant_id", "epoch", "ttl_seconds" };
	worker_lease_request *q = ctx;
	int r = core_json_expect_object(o, "lease", fields, ARRAY_SIZE(fields), err);
	if (r < 0)
		return r;
	json_t *jt = json_object_get(o, "tenant_id"), *je = json_object_get(o, "epoch");
	json_t *jl = json_object_get(o, "ttl_seconds");
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
			: NULL;
	if (bad)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "%s", bad);
	q->epoch = (int64_t)e;
	q->ttl_seconds = (int64_t)l;
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
