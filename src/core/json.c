/* SPDX-License-Identifier: Apache-2.0 */
#include "airlock/json.h"
#include "airlock/ids.h"
#include "airlock/egress.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "airlock/caps.h"
#include "core/json_internal.h"
#include "util/util.h"

/*
 * Every value crossing the port goes through here, and the execution service
 * decodes what the worker sends; the decoder is therefore a parser of input
 * from another trust domain and is strict: every field is required (nullable
 * fields as an explicit null), nothing unknown is accepted, integers are JSON
 * integers, and each type's invariants are checked before the value is handed
 * out. Encoders check the same invariants, so whatever this file writes it
 * also reads back. The parse itself, under a memory budget with jansson's
 * allocator, is json_decode.c's (core_json_decode).
 *
 * Over 800 lines and one concern: the wire form of the specification's
 * types. Each type's encoder, strict decoder and the invariant check both
 * run sit together, in one section per type, because they are one
 * definition read three ways: a field added to an encoder and not to its
 * decoder (or to the check they share) is the bug this layout makes
 * visible, and a split by direction would put the two halves of every
 * type in different files. The helpers (get_*, put_*, the path's text
 * form) exist for those sections only.
 */

static inline void airlock_json_decrefp(json_t **p) { json_decref(*p); }
#define _cleanup_json_ __attribute__((cleanup(airlock_json_decrefp)))

/* RFC 3339 with four-digit years: the range util_time_format writes and
 * util_time_parse reads back. */
#define TIME_MS_MAX INT64_C(253402300799999) /* 9999-12-31T23:59:59.999Z */

/* ---- errors -------------------------------------------------------------- */

__attribute__((format(printf, 4, 5)))
static int field_error(airlock_error *err, const char *type, const char *key, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s.%s: %s", type, key, msg);
}

static int nomem(airlock_error *err, const char *type)
{
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", type);
}

/* Validation shared with types.c reports EXECUTION_REJECTED for a spec; over
 * the wire the same finding is a malformed message, and callers of this file
 * branch on one class. */
static int as_decode(airlock_error *err, int r)
{
	if (airlock_errcode_class(r) != AIRLOCK_ERR_EXECUTION_REJECTED &&
	    airlock_errcode_class(r) != AIRLOCK_ERR_DECODE)
		return r;
	if (err) {
		err->cls = AIRLOCK_ERR_DECODE;
		err->errnum = 0;
	}
	return airlock_errcode(AIRLOCK_ERR_DECODE);
}

/* ---- UTF-8 ----------------------------------------------------------------
 * Unicode's "maximal subpart" rule (Unicode 15, section 3.9, U+FFFD
 * substitution): an ill-formed sequence is replaced by one U+FFFD per maximal
 * prefix of a well-formed sequence, or per single byte when there is none.
 * Overlong forms, surrogates and values above U+10FFFF are ill-formed because
 * the ranges allowed for the second byte exclude them. */

/* Length of the well-formed sequence at s (n > 0 bytes left), or 0 with
 * *bad set to the number of bytes one U+FFFD replaces. */
static size_t utf8_next(const unsigned char *s, size_t n, size_t *bad)
{
	unsigned char c = s[0];
	if (c < 0x80)
		return 1;
	size_t need;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf)
		need = 1;
	else if (c == 0xe0)
		need = 2, lo = 0xa0;
	else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef)
		need = 2;
	else if (c == 0xed)
		need = 2, hi = 0x9f;
	else if (c == 0xf0)
		need = 3, lo = 0x90;
	else if (c >= 0xf1 && c <= 0xf3)
		need = 3;
	else if (c == 0xf4)
		need = 3, hi = 0x8f;
	else {
		*bad = 1;
		return 0;
	}
	if (n < 2 || s[1] < lo || s[1] > hi) {
		*bad = 1;
		return 0;
	}
	size_t i = 2;
	for (; i <= need; i++)
		if (i >= n || s[i] < 0x80 || s[i] > 0xbf) {
			*bad = i;
			return 0;
		}
	return need + 1;
}

static bool utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		size_t bad = 0, k = utf8_next(p + i, n - i, &bad);
		if (!k)
			return false;
		i += k;
	}
	return true;
}

/* A well-formed copy of n bytes; NULL on ENOMEM. NUL bytes are valid UTF-8
 * and are kept (jansson writes them as \u0000). */
static char *utf8_sanitize(const void *data, size_t n, size_t *ret_len)
{
	static const unsigned char replacement[] = { 0xef, 0xbf, 0xbd };
	const unsigned char *p = data;
	if (n > (SIZE_MAX - 1) / 3)
		return NULL;
	util_buf b;
	/* Worst case every byte becomes a three-byte U+FFFD. */
	util_buf_init(&b, 3 * n);
	for (size_t i = 0; i < n;) {
		size_t bad = 0, k = utf8_next(p + i, n - i, &bad);
		int r = k ? util_buf_append(&b, p + i, k) : util_buf_append(&b, replacement, 3);
		if (r != 0) {
			util_buf_clear(&b);
			return NULL;
		}
		i += k ? k : bad;
	}
	return (char *)util_buf_steal(&b, ret_len);
}

/* ---- decoding helpers ---------------------------------------------------- */

int core_json_expect_object(json_t *o, const char *type, const char *const *fields, size_t n,
                            airlock_error *err)
{
	if (!json_is_object(o))
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: must be a JSON object", type);
	const char *key;
	json_t *v;
	/* A field this version does not know is refused rather than skipped: a
	 * sender that thinks it set a limit the receiver ignores has a limit
	 * that is not enforced. The name is the sender's bytes: escaped. */
	json_object_foreach(o, key, v) {
		bool known = false;
		for (size_t i = 0; i < n && !known; i++)
			known = strcmp(key, fields[i]) == 0;
		if (!known) {
			char q[100];
			return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s.%s: unknown field", type,
			                         util_escape(q, sizeof(q), key, strlen(key)));
		}
	}
	return 0;
}

static int get(json_t *o, const char *type, const char *key, json_t **ret, airlock_error *err)
{
	json_t *v = json_object_get(o, key);
	*ret = v;
	if (!v)
		return field_error(err, type, key, "missing");
	*ret = v;
	return 0;
}

static int get_int(json_t *o, const char *type, const char *key, int64_t min, int64_t max,
                   int64_t *ret, airlock_error *err)
{
	json_t *v;
	int r = get(o, type, key, &v, err);
	if (r < 0)
		return r;
	if (!json_is_integer(v))
		return field_error(err, type, key, "must be an integer");
	int64_t x = json_integer_value(v);
	if (x < min)
		return field_error(err, type, key, "must be >= %lld (got %lld)", (long long)min,
		                   (long long)x);
	if (x > max)
		return field_error(err, type, key, "must be <= %lld (got %lld)", (long long)max,
		                   (long long)x);
	*ret = x;
	return 0;
}

static int get_bool(json_t *o, const char *type, const char *key, bool *ret, airlock_error *err)
{
	json_t *v;
	int r = get(o, type, key, &v, err);
	if (r < 0)
		return r;
	if (!json_is_boolean(v))
		return field_error(err, type, key, "must be a boolean");
	*ret = json_is_true(v);
	return 0;
}

/* The string value, borrowed from the tree; NULL for an allowed null. */
static int get_str_ref(json_t *o, const char *type, const char *key, bool nullable,
                       const char **ret, size_t *ret_len, airlock_error *err)
{
	json_t *v;
	*ret = NULL;
	int r = get(o, type, key, &v, err);
	if (r < 0)
		return r;
	if (nullable && json_is_null(v)) {
		*ret = NULL;
		if (ret_len)
			*ret_len = 0;
		return 0;
	}
	if (!json_is_string(v))
		return field_error(err, type, key, nullable ? "must be a string or null" : "must be a string");
	*ret = json_string_value(v);
	if (ret_len)
		*ret_len = json_string_length(v);
	return 0;
}

static int get_str(json_t *o, const char *type, const char *key, bool nullable, char **ret,
                   airlock_error *err)
{
	const char *s;
	int r = get_str_ref(o, type, key, nullable, &s, NULL, err);
	if (r < 0)
		return r;
	char *d = NULL;
	if (s && !(d = strdup(s)))
		return nomem(err, type);
	*ret = d;
	return 0;
}

/* Into a fixed array; a value that does not fit is malformed, not cut. */
static int get_str_fixed(json_t *o, const char *type, const char *key, char *out, size_t size,
                         airlock_error *err)
{
	const char *s;
	size_t n;
	int r = get_str_ref(o, type, key, false, &s, &n, err);
	if (r < 0)
		return r;
	if (n >= size)
		return field_error(err, type, key, "too long (%zu bytes, at most %zu)", n, size - 1);
	memcpy(out, s, n + 1);
	return 0;
}

static int get_time(json_t *o, const char *type, const char *key, bool nullable, bool *ret_has,
                    int64_t *ret_ms, airlock_error *err)
{
	const char *s;
	int r = get_str_ref(o, type, key, nullable, &s, NULL, err);
	if (r < 0)
		return r;
	if (!s) {
		*ret_has = false;
		*ret_ms = 0;
		return 0;
	}
	int64_t ms;
	if (!util_time_parse(s, &ms))
		return field_error(err, type, key, "must be an RFC 3339 UTC timestamp such as 2026-11-29T23:34:04.123Z");
	*ret_has = true;
	*ret_ms = ms;
	return 0;
}

static int get_bytes(json_t *o, const char *type, const char *key, bool nullable, bool *ret_has,
                     unsigned char **ret, size_t *ret_len, airlock_error *err)
{
	const char *s;
	size_t n;
	int r = get_str_ref(o, type, key, nullable, &s, &n, err);
	if (r < 0)
		return r;
	if (!s) {
		*ret_has = false;
		*ret = NULL;
		*ret_len = 0;
		return 0;
	}
	unsigned char *data = NULL;
	size_t len = 0;
	r = util_base64_decode(s, n, &data, &len);
	if (r == -ENOMEM)
		return nomem(err, type);
	if (r < 0)
		return field_error(err, type, key, "must be base64 (RFC 4648, standard alphabet, padded)");
	*ret_has = true;
	*ret = data;
	*ret_len = len;
	return 0;
}

static int get_array(json_t *o, const char *type, const char *key, json_t **ret, airlock_error *err)
{
	int r = get(o, type, key, ret, err);
	if (r < 0)
		return r;
	if (!json_is_array(*ret))
		return field_error(err, type, key, "must be an array");
	return 0;
}

/* ---- encoding helpers ------------------------------------------------------
 * json_object_set_new takes the value's reference even when it fails, so a
 * NULL from a constructor or a failed set are both just ENOMEM here. */

static int put(json_t *o, const char *type, const char *key, json_t *v, airlock_error *err)
{
	if (!v || json_object_set_new_nocheck(o, key, v) < 0)
		return nomem(err, type);
	return 0;
}

static int put_int(json_t *o, const char *type, const char *key, int64_t x, airlock_error *err)
{
	return put(o, type, key, json_integer((json_int_t)x), err);
}

static int put_bool(json_t *o, const char *type, const char *key, bool x, airlock_error *err)
{
	return put(o, type, key, json_boolean(x), err);
}

static int put_null(json_t *o, const char *type, const char *key, airlock_error *err)
{
	return put(o, type, key, json_null(), err);
}

static int put_str(json_t *o, const char *type, const char *key, const char *s, airlock_error *err)
{
	if (!s)
		return field_error(err, type, key, "missing");
	size_t n = strlen(s);
	/* jansson refuses invalid UTF-8 with the same NULL it uses for ENOMEM;
	 * checking first keeps the two apart in the message. */
	if (!utf8_valid(s, n))
		return field_error(err, type, key, "not valid UTF-8");
	return put(o, type, key, json_stringn_nocheck(s, n), err);
}

static int put_str_or_null(json_t *o, const char *type, const char *key, const char *s,
                           airlock_error *err)
{
	return s ? put_str(o, type, key, s, err) : put_null(o, type, key, err);
}

static int put_time(json_t *o, const char *type, const char *key, int64_t ms, airlock_error *err)
{
	if (ms < 0 || ms > TIME_MS_MAX)
		return field_error(err, type, key, "timestamp %lld ms is outside 1970..9999", (long long)ms);
	char buf[32];
	util_time_format(ms, buf);
	return put(o, type, key, json_string_nocheck(buf), err);
}

static int put_bytes(json_t *o, const char *type, const char *key, const unsigned char *data,
                     size_t len, airlock_error *err)
{
	if (!data && len > 0)
		return field_error(err, type, key, "missing");
	_cleanup_free_ char *b64 = util_base64_encode(data ? (const void *)data : "", len);
	if (!b64)
		return nomem(err, type);
	return put(o, type, key, json_string_nocheck(b64), err);
}

static char *dump(json_t *o, const char *type, size_t max, airlock_error *err)
{
	char *s = json_dumps(o, JSON_COMPACT);
	if (!s) {
		nomem(err, type);
		return NULL;
	}
	/* Refuse to write what the decoder would refuse to read. */
	size_t n = strlen(s);
	if (n > max) {
		free(s);
		airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                  "%s: encoding is %zu bytes, over the %zu byte limit", type, n, max);
		return NULL;
	}
	return s;
}

/* ---- shape checks shared by both directions ---------------------------- */

static bool relative_path_ok(const char *p)
{
	return p && *p && p[0] != '/';
}

/* ---- ResourceLimits ------------------------------------------------------ */

static const char T_LIMITS[] = "ResourceLimits";
static const char *const limits_fields[] = {
	"cpu_millicores", "memory_bytes", "pids_max", "workspace_bytes", "inodes_max", "wall_clock_seconds",
};

static int limits_to(const airlock_resource_limits *l, json_t **ret, airlock_error *err)
{
	if (!l)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: missing", T_LIMITS);
	int r = airlock_resource_limits_validate(l, err);
	if (r < 0)
		return as_decode(err, r);
	const int64_t v[] = { l->cpu_millicores, l->memory_bytes, l->pids_max,
		              l->workspace_bytes, l->inodes_max, l->wall_clock_seconds };
	_Static_assert(ARRAY_SIZE(v) == ARRAY_SIZE(limits_fields), "limits fields");
	_cleanup_json_ json_t *o = json_object();
	if (!o)
		return nomem(err, T_LIMITS);
	for (size_t i = 0; i < ARRAY_SIZE(v); i++)
		if ((r = put_int(o, T_LIMITS, limits_fields[i], v[i], err)) < 0)
			return r;
	*ret = TAKE_PTR(o);
	return 0;
}

static int limits_from(json_t *o, airlock_resource_limits *ret, airlock_error *err)
{
	int r = core_json_expect_object(o, T_LIMITS, limits_fields, ARRAY_SIZE(limits_fields), err);
	if (r < 0)
		return r;
	airlock_resource_limits l = { 0 };
	int64_t *dst[] = { &l.cpu_millicores, &l.memory_bytes, &l.pids_max,
		           &l.workspace_bytes, &l.inodes_max, &l.wall_clock_seconds };
	_Static_assert(ARRAY_SIZE(dst) == ARRAY_SIZE(limits_fields), "limits fields");
	/* Every field is required and positive: no default at this layer, and a
	 * forgotten limit must not read as unlimited (spec, ResourceLimits). */
	for (size_t i = 0; i < ARRAY_SIZE(dst); i++)
		if ((r = get_int(o, T_LIMITS, limits_fields[i], 1, INT64_MAX, dst[i], err)) < 0)
			return r;
	*ret = l;
	return 0;
}

/* ---- EgressPolicy -------------------------------------------------------- */

static const char T_EGRESS[] = "EgressPolicy";
static const char T_DEST[] = "EgressDestination";
static const char *const egress_fields[] = { "mode", "destinations" };
static const char *const dest_fields[] = { "host", "ports" };

static int egress_to(const airlock_egress_policy *p, json_t **ret, airlock_error *err)
{
	if (!p)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: missing", T_EGRESS);
	int r = airlock_egress_policy_validate(p, err);
	if (r < 0)
		return as_decode(err, r);
	_cleanup_json_ json_t *o = json_object();
	_cleanup_json_ json_t *dests = json_array();
	if (!o || !dests)
		return nomem(err, T_EGRESS);
	if ((r = put_str(o, T_EGRESS, "mode", airlock_egress_mode_name(p->mode), err)) < 0)
		return r;
	for (size_t i = 0; i < p->n_destinations; i++) {
		const airlock_egress_destination *d = &p->destinations[i];
		_cleanup_json_ json_t *dj = json_object();
		_cleanup_json_ json_t *ports = json_array();
		if (!dj || !ports)
			return nomem(err, T_EGRESS);
		if ((r = put_str(dj, T_DEST, "host", d->host, err)) < 0) {
			airlock_error_prefix(err, "%s.destinations[%zu]: ", T_EGRESS, i);
			return r;
		}
		for (size_t j = 0; j < d->n_ports; j++)
			if (json_array_append_new(ports, json_integer(d->ports[j])) < 0)
				return nomem(err, T_EGRESS);
		if ((r = put(dj, T_DEST, "ports", TAKE_PTR(ports), err)) < 0)
			return r;
		if (json_array_append_new(dests, TAKE_PTR(dj)) < 0)
			return nomem(err, T_EGRESS);
	}
	if ((r = put(o, T_EGRESS, "destinations", TAKE_PTR(dests), err)) < 0)
		return r;
	*ret = TAKE_PTR(o);
	return 0;
}

static int dest_from(json_t *o, airlock_egress_destination *ret, airlock_error *err)
{
	int r = core_json_expect_object(o, T_DEST, dest_fields, ARRAY_SIZE(dest_fields), err);
	if (r < 0)
		return r;
	json_t *ports;
	if ((r = get_array(o, T_DEST, "ports", &ports, err)) < 0)
		return r;
	airlock_egress_destination d = { 0 };
	if ((r = get_str(o, T_DEST, "host", false, &d.host, err)) < 0)
		return r;
	size_t n = json_array_size(ports);
	if (n > 0) {
		d.ports = calloc(n, sizeof(*d.ports));
		if (!d.ports) {
			free(d.host);
			return nomem(err, T_DEST);
		}
	}
	for (size_t j = 0; j < n; j++) {
		json_t *pj = json_array_get(ports, j);
		if (!json_is_integer(pj) || json_integer_value(pj) < 1 || json_integer_value(pj) > 65535) {
			free(d.host);
			free(d.ports);
			char key[32];
			snprintf(key, sizeof(key), "ports[%zu]", j);
			return field_error(err, T_DEST, key, "must be an integer in 1..65535");
		}
		d.ports[j] = (uint16_t)json_integer_value(pj);
	}
	d.n_ports = n;
	*ret = d;
	return 0;
}

static int egress_from(json_t *o, airlock_egress_policy *ret, airlock_error *err)
{
	int r = core_json_expect_object(o, T_EGRESS, egress_fields, ARRAY_SIZE(egress_fields), err);
	if (r < 0)
		return r;
	const char *mode;
	if ((r = get_str_ref(o, T_EGRESS, "mode", false, &mode, NULL, err)) < 0)
		return r;
	airlock_egress_policy p = { .mode = airlock_egress_mode_parse(mode) };
	if (p.mode == AIRLOCK_EGRESS_INVALID)
		return field_error(err, T_EGRESS, "mode", "must be \"deny\" or \"allowlist\"");
	json_t *dests;
	if ((r = get_array(o, T_EGRESS, "destinations", &dests, err)) < 0)
		return r;
	size_t n = json_array_size(dests);
	if (n > 0 && !(p.destinations = calloc(n, sizeof(*p.destinations))))
		return nomem(err, T_EGRESS);
	for (size_t i = 0; i < n; i++) {
		r = dest_from(json_array_get(dests, i), &p.destinations[i], err);
		if (r < 0) {
			airlock_error_prefix(err, "%s.destinations[%zu]: ", T_EGRESS, i);
			goto fail;
		}
		p.n_destinations = i + 1;
	}
	r = airlock_egress_policy_validate(&p, err);
	if (r < 0) {
		r = as_decode(err, r);
		goto fail;
	}
	/* The grammar's rules, the same function the YAML parser runs (host
	 * rules, normalized names, no host or port twice, mode and count): a
	 * spec is how a policy reaches the service and the proxy, so a door
	 * that skipped them would let in what the operator's file refuses.
	 * airlock_egress_policy_validate ran them over the destinations; what
	 * is left is the text's own rule for an allowlist that lists none. */
	if (p.n_destinations == 0) {
		r = airlock_egress_policy_check(&p, T_EGRESS, err);
		if (r < 0)
			goto fail;
	}
	*ret = p;
	return 0;
fail:
	/* n_destinations counts the entries that were filled in; the calloc'd
	 * rest is zero, so clearing with the full count is also safe. */
	p.n_destinations = n;
	airlock_egress_policy_clear(&p);
	return r;
}

/* ---- BridgeEndpoint ------------------------------------------------------ */

static const char T_BRIDGE[] = "BridgeEndpoint";
static const char *const bridge_fields[] = { "socket_path", "token" };

static int bridge_check(const airlock_bridge_endpoint *b, airlock_error *err)
{
	if (!b->socket_path || b->socket_path[0] != '/')
		return field_error(err, T_BRIDGE, "socket_path", "must be an absolute path inside the sandbox");
	if (!b->token || !*b->token)
		return field_error(err, T_BRIDGE, "token", "must not be empty");
	return 0;
}

static int bridge_to(const airlock_bridge_endpoint *b, json_t **ret, airlock_error *err)
{
	if (!b)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: missing", T_BRIDGE);
	int r = bridge_check(b, err);
	if (r < 0)
		return r;
	_cleanup_json_ json_t *o = json_object();
	if (!o)
		return nomem(err, T_BRIDGE);
	if ((r = put_str(o, T_BRIDGE, "socket_path", b->socket_path, err)) < 0 ||
	    (r = put_str(o, T_BRIDGE, "token", b->token, err)) < 0)
		return r;
	*ret = TAKE_PTR(o);
	return 0;
}

/* Allocates: *ret is a new endpoint for airlock_bridge_endpoint_free. */
static int bridge_from(json_t *o, airlock_bridge_endpoint **ret, airlock_error *err)
{
	int r = core_json_expect_object(o, T_BRIDGE, bridge_fields, ARRAY_SIZE(bridge_fields), err);
	if (r < 0)
		return r;
	airlock_bridge_endpoint *b = calloc(1, sizeof(*b));
	if (!b)
		return nomem(err, T_BRIDGE);
	if ((r = get_str(o, T_BRIDGE, "socket_path", false, &b->socket_path, err)) < 0 ||
	    (r = get_str(o, T_BRIDGE, "token", false, &b->token, err)) < 0 ||
	    (r = bridge_check(b, err)) < 0) {
		airlock_bridge_endpoint_free(b);
		return r;
	}
	*ret = b;
	return 0;
}

/* ---- EnvironmentSpec ----------------------------------------------------- */

static const char T_SPEC[] = "EnvironmentSpec";
static const char *const spec_fields[] = {
	"tenant_id", "run_id", "lease_epoch", "image_digest",
	"limits", "egress", "environment", "bridge",
};

static int spec_to(const airlock_environment_spec *s, json_t **ret, airlock_error *err)
{
	if (!s)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: missing", T_SPEC);
	int r = airlock_environment_spec_validate(s, err);
	if (r < 0)
		return as_decode(err, r);
	_cleanup_json_ json_t *o = json_object();
	_cleanup_json_ json_t *env = json_object();
	if (!o || !env)
		return nomem(err, T_SPEC);
	if ((r = put_str(o, T_SPEC, "tenant_id", s->tenant_id, err)) < 0 ||
	    (r = put_str(o, T_SPEC, "run_id", s->run_id, err)) < 0 ||
	    (r = put_int(o, T_SPEC, "lease_epoch", s->lease_epoch, err)) < 0 ||
	    (r = put_str(o, T_SPEC, "image_digest", s->image_digest, err)) < 0)
		return r;
	json_t *sub = NULL;
	if ((r = limits_to(&s->limits, &sub, err)) < 0) {
		airlock_error_prefix(err, "%s.limits: ", T_SPEC);
		return r;
	}
	if ((r = put(o, T_SPEC, "limits", sub, err)) < 0)
		return r;
	if ((r = egress_to(&s->egress, &sub, err)) < 0) {
		airlock_error_prefix(err, "%s.egress: ", T_SPEC);
		return r;
	}
	if ((r = put(o, T_SPEC, "egress", sub, err)) < 0)
		return r;
	/* Names are [A-Za-z_][A-Za-z0-9_]* (checked by validate above), so only
	 * the values can be ill-formed UTF-8. */
	for (size_t i = 0; i < s->environment.n; i++) {
		const airlock_env_var *v = &s->environment.vars[i];
		size_t n = strlen(v->value);
		if (!utf8_valid(v->value, n))
			return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
			                         "%s.environment.%s: value is not valid UTF-8", T_SPEC, v->name);
		if ((r = put(env, T_SPEC, v->name, json_stringn_nocheck(v->value, n), err)) < 0)
			return r;
	}
	if ((r = put(o, T_SPEC, "environment", TAKE_PTR(env), err)) < 0)
		return r;
	if (s->bridge) {
		if ((r = bridge_to(s->bridge, &sub, err)) < 0) {
			airlock_error_prefix(err, "%s.bridge: ", T_SPEC);
			return r;
		}
		if ((r = put(o, T_SPEC, "bridge", sub, err)) < 0)
			return r;
	} else if ((r = put_null(o, T_SPEC, "bridge", err)) < 0) {
		return r;
	}
	*ret = TAKE_PTR(o);
	return 0;
}

static int env_from(json_t *o, airlock_env *ret, airlock_error *err)
{
	if (!json_is_object(o))
		return field_error(err, T_SPEC, "environment", "must be an object of name to string value");
	size_t n = json_object_size(o);
	airlock_env e = { 0 };
	if (n > 0 && !(e.vars = calloc(n, sizeof(*e.vars))))
		return nomem(err, T_SPEC);
	const char *key;
	json_t *v;
	int r = 0;
	/* Names are checked by the spec validation that follows; duplicates
	 * cannot occur because the parser refused duplicate keys. */
	json_object_foreach(o, key, v) {
		if (!json_is_string(v)) {
			r = airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
			                      "%s.environment.%.64s: must be a string", T_SPEC, key);
			goto fail;
		}
		airlock_env_var *ev = &e.vars[e.n];
		ev->name = strdup(key);
		ev->value = strdup(json_string_value(v));
		e.n++;
		if (!ev->name || !ev->value) {
			r = nomem(err, T_SPEC);
			goto fail;
		}
	}
	*ret = e;
	return 0;
fail:
	airlock_env_clear(&e);
	return r;
}

static int spec_from(json_t *o, airlock_environment_spec *ret, airlock_error *err)
{
	int r = core_json_expect_object(o, T_SPEC, spec_fields, ARRAY_SIZE(spec_fields), err);
	if (r < 0)
		return r;
	airlock_environment_spec s = { 0 };
	json_t *sub;
	if ((r = get_str(o, T_SPEC, "tenant_id", false, &s.tenant_id, err)) < 0 ||
	    (r = get_str(o, T_SPEC, "run_id", false, &s.run_id, err)) < 0 ||
	    (r = get_int(o, T_SPEC, "lease_epoch", 0, INT64_MAX, &s.lease_epoch, err)) < 0 ||
	    (r = get_str(o, T_SPEC, "image_digest", false, &s.image_digest, err)) < 0)
		goto fail;
	if ((r = get(o, T_SPEC, "limits", &sub, err)) < 0)
		goto fail;
	if ((r = limits_from(sub, &s.limits, err)) < 0) {
		airlock_error_prefix(err, "%s.limits: ", T_SPEC);
		goto fail;
	}
	if ((r = get(o, T_SPEC, "egress", &sub, err)) < 0)
		goto fail;
	if ((r = egress_from(sub, &s.egress, err)) < 0) {
		airlock_error_prefix(err, "%s.egress: ", T_SPEC);
		goto fail;
	}
	if ((r = get(o, T_SPEC, "environment", &sub, err)) < 0 ||
	    (r = env_from(sub, &s.environment, err)) < 0)
		goto fail;
	if ((r = get(o, T_SPEC, "bridge", &sub, err)) < 0)
		goto fail;
	if (!json_is_null(sub) && (r = bridge_from(sub, &s.bridge, err)) < 0) {
		airlock_error_prefix(err, "%s.bridge: ", T_SPEC);
		goto fail;
	}
	/* The service must refuse a spec the worker could not have validly
	 * built, whatever sent it. */
	if ((r = airlock_environment_spec_validate(&s, err)) < 0) {
		r = as_decode(err, r);
		goto fail;
	}
	*ret = s;
	return 0;
fail:
	airlock_environment_spec_clear(&s);
	return r;
}

/* ---- EnvironmentHandle --------------------------------------------------- */

static const char T_HANDLE[] = "EnvironmentHandle";
static const char *const handle_fields[] = {
	"environment_id", "tenant_id", "run_id", "lease_epoch", "created_at", "expires_at",
};

static int handle_check(const airlock_environment_handle *h, airlock_error *err)
{
	/* Opaque, but from a closed charset: whatever an adapter chooses as an
	 * id, it cannot be a path or carry one. */
	if (!memchr(h->environment_id, 0, sizeof(h->environment_id)) ||
	    !airlock_id_valid(h->environment_id))
		return field_error(err, T_HANDLE, "environment_id", "must be 1..%d of [A-Za-z0-9_-]",
		                   AIRLOCK_ENVIRONMENT_ID_MAX - 1);
	if (!airlock_id_valid(h->tenant_id))
		return field_error(err, T_HANDLE, "tenant_id", "must be 1..%d of [A-Za-z0-9_-]", AIRLOCK_ID_MAX);
	if (!airlock_id_valid(h->run_id))
		return field_error(err, T_HANDLE, "run_id", "must be 1..%d of [A-Za-z0-9_-]", AIRLOCK_ID_MAX);
	if (h->lease_epoch < 0)
		return field_error(err, T_HANDLE, "lease_epoch", "must be >= 0");
	if (h->expires_at_ms < h->created_at_ms)
		return field_error(err, T_HANDLE, "expires_at", "must not be before created_at");
	return 0;
}

static int handle_to(const airlock_environment_handle *h, json_t **ret, airlock_error *err)
{
	if (!h)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: missing", T_HANDLE);
	int r = handle_check(h, err);
	if (r < 0)
		return r;
	_cleanup_json_ json_t *o = json_object();
	if (!o)
		return nomem(err, T_HANDLE);
	if ((r = put_str(o, T_HANDLE, "environment_id", h->environment_id, err)) < 0 ||
	    (r = put_str(o, T_HANDLE, "tenant_id", h->tenant_id, err)) < 0 ||
	    (r = put_str(o, T_HANDLE, "run_id", h->run_id, err)) < 0 ||
	    (r = put_int(o, T_HANDLE, "lease_epoch", h->lease_epoch, err)) < 0 ||
	    (r = put_time(o, T_HANDLE, "created_at", h->created_at_ms, err)) < 0 ||
	    (r = put_time(o, T_HANDLE, "expires_at", h->expires_at_ms, err)) < 0)
		return r;
	*ret = TAKE_PTR(o);
	return 0;
}

static int handle_from(json_t *o, airlock_environment_handle *ret, airlock_error *err)
{
	int r = core_json_expect_object(o, T_HANDLE, handle_fields, ARRAY_SIZE(handle_fields), err);
	if (r < 0)
		return r;
	airlock_environment_handle h = { 0 };
	bool has;
	if ((r = get_str_fixed(o, T_HANDLE, "environment_id", h.environment_id,
	                       sizeof(h.environment_id), err)) < 0 ||
	    (r = get_str(o, T_HANDLE, "tenant_id", false, &h.tenant_id, err)) < 0 ||
	    (r = get_str(o, T_HANDLE, "run_id", false, &h.run_id, err)) < 0 ||
	    (r = get_int(o, T_HANDLE, "lease_epoch", 0, INT64_MAX, &h.lease_epoch, err)) < 0 ||
	    (r = get_time(o, T_HANDLE, "created_at", false, &has, &h.created_at_ms, err)) < 0 ||
	    (r = get_time(o, T_HANDLE, "expires_at", false, &has, &h.expires_at_ms, err)) < 0 ||
	    (r = handle_check(&h, err)) < 0) {
		airlock_environment_handle_clear(&h);
		return r;
	}
	*ret = h;
	return 0;
}

/* ---- ExecutionCommand ---------------------------------------------------- */

static const char T_CMD[] = "ExecutionCommand";
static const char *const cmd_fields[] = {
	"argv", "working_directory", "timeout_seconds", "stdin", "maximum_output_bytes",
};

static int cmd_check(const airlock_execution_command *c, airlock_error *err)
{
	if (c->argc == 0 || !c->argv)
		return field_error(err, T_CMD, "argv", "must be a non-empty vector");
	for (size_t i = 0; i < c->argc; i++)
		if (!c->argv[i])
			return field_error(err, T_CMD, "argv", "element %zu is missing", i);
	/* Relative to /workspace (spec, ExecutionCommand); an absolute value
	 * would name a place nobody resolved through the containment function. */
	if (!relative_path_ok(c->working_directory))
		return field_error(err, T_CMD, "working_directory", "must be a non-empty path relative to /workspace");
	if (c->timeout_seconds <= 0)
		return field_error(err, T_CMD, "timeout_seconds", "must be > 0");
	if (c->maximum_output_bytes <= 0)
		return field_error(err, T_CMD, "maximum_output_bytes", "must be > 0");
	if (c->has_stdin && !c->stdin_data && c->stdin_len > 0)
		return field_error(err, T_CMD, "stdin", "missing");
	return 0;
}

static int cmd_to(const airlock_execution_command *c, json_t **ret, airlock_error *err)
{
	if (!c)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: missing", T_CMD);
	int r = cmd_check(c, err);
	if (r < 0)
		return r;
	_cleanup_json_ json_t *o = json_object();
	_cleanup_json_ json_t *argv = json_array();
	if (!o || !argv)
		return nomem(err, T_CMD);
	for (size_t i = 0; i < c->argc; i++) {
		size_t n = strlen(c->argv[i]);
		if (!utf8_valid(c->argv[i], n)) {
			char key[32];
			snprintf(key, sizeof(key), "argv[%zu]", i);
			return field_error(err, T_CMD, key, "not valid UTF-8");
		}
		if (json_array_append_new(argv, json_stringn_nocheck(c->argv[i], n)) < 0)
			return nomem(err, T_CMD);
	}
	if ((r = put(o, T_CMD, "argv", TAKE_PTR(argv), err)) < 0 ||
	    (r = put_str(o, T_CMD, "working_directory", c->working_directory, err)) < 0 ||
	    (r = put_int(o, T_CMD, "timeout_seconds", c->timeout_seconds, err)) < 0)
		return r;
	r = c->has_stdin ? put_bytes(o, T_CMD, "stdin", c->stdin_data, c->stdin_len, err)
	                 : put_null(o, T_CMD, "stdin", err);
	if (r < 0 || (r = put_int(o, T_CMD, "maximum_output_bytes", c->maximum_output_bytes, err)) < 0)
		return r;
	*ret = TAKE_PTR(o);
	return 0;
}

static int cmd_from(json_t *o, airlock_execution_command *ret, airlock_error *err)
{
	int r = core_json_expect_object(o, T_CMD, cmd_fields, ARRAY_SIZE(cmd_fields), err);
	if (r < 0)
		return r;
	json_t *argv;
	if ((r = get_array(o, T_CMD, "argv", &argv, err)) < 0)
		return r;
	airlock_execution_command c = { 0 };
	size_t n = json_array_size(argv);
	/* argv[argc] stays NULL, as exec wants it. */
	if (!(c.argv = calloc(n + 1, sizeof(*c.argv))))
		return nomem(err, T_CMD);
	for (size_t i = 0; i < n; i++) {
		json_t *a = json_array_get(argv, i);
		if (!json_is_string(a)) {
			char key[32];
			snprintf(key, sizeof(key), "argv[%zu]", i);
			r = field_error(err, T_CMD, key, "must be a string");
			goto fail;
		}
		if (!(c.argv[i] = strdup(json_string_value(a)))) {
			r = nomem(err, T_CMD);
			goto fail;
		}
		c.argc = i + 1;
	}
	if ((r = get_str(o, T_CMD, "working_directory", false, &c.working_directory, err)) < 0 ||
	    (r = get_int(o, T_CMD, "timeout_seconds", 1, INT64_MAX, &c.timeout_seconds, err)) < 0 ||
	    (r = get_bytes(o, T_CMD, "stdin", true, &c.has_stdin, &c.stdin_data, &c.stdin_len, err)) < 0 ||
	    (r = get_int(o, T_CMD, "maximum_output_bytes", 1, INT64_MAX, &c.maximum_output_bytes, err)) < 0 ||
	    (r = cmd_check(&c, err)) < 0)
		goto fail;
	*ret = c;
	return 0;
fail:
	airlock_execution_command_clear(&c);
	return r;
}

/* ---- FileChange ---------------------------------------------------------- */

static const char T_FC[] = "FileChange";
static const char *const fc_fields[] = { "path", "change", "kind", "size_bytes", "sha256" };

/* ---- a path's text form ---------------------------------------------------
 * A file name is bytes; JSON strings are Unicode text. The text form keeps
 * every name that reads unambiguously as it is, and writes each byte of
 * anything else as U+FFFD followed by the byte in two lowercase hex digits:
 * "caf\xe9.txt" is "caf\u{FFFD}e9.txt". Escaped are bytes that are not
 * well-formed UTF-8, and the characters that would make a name read as
 * something it is not or look like another name: C0 and C1 controls and
 * DEL (a newline or an escape sequence in a listing), U+2028/U+2029, the
 * bidirectional formatting characters (U+200E, U+200F, U+202A..U+202E,
 * U+2066..U+2069), and U+FFFD itself. As U+FFFD is never written as itself,
 * a form holding one is always an escape, so the form is injective: two
 * names never share a text form, and the decoder gets the bytes back. The
 * decoder accepts only the canonical form (what the encoder writes), so a
 * name also has exactly one text form. */

#define PATH_ESC_LEN 5 /* U+FFFD (3 bytes) + two hex digits */
/* The core charges a listing's paths at this many bytes a byte (caps.h). */
_Static_assert(PATH_ESC_LEN <= AIRLOCK_FC_JSON_PATH_FACTOR,
               "a path's text form must fit what the listing's byte bound charges");

static bool path_char_escaped(uint32_t c)
{
	return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0x2028 || c == 0x2029 || c == 0x200e ||
	       c == 0x200f || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) ||
	       c == 0xfffd;
}

static uint32_t utf8_value(const unsigned char *s, size_t k)
{
	if (k == 1)
		return s[0];
	uint32_t c = s[0] & (0x7f >> k);
	for (size_t i = 1; i < k; i++)
		c = (c << 6) | (s[i] & 0x3f);
	return c;
}

/* The text form of path (n bytes); NULL on ENOMEM. */
static char *path_to_text(const char *path, size_t n, size_t *ret_len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)path;
	if (n > (SIZE_MAX - 1) / PATH_ESC_LEN)
		return NULL;
	char *out = malloc(n * PATH_ESC_LEN + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		size_t bad = 0, k = utf8_next(p + i, n - i, &bad);
		if (k && !path_char_escaped(utf8_value(p + i, k))) {
			memcpy(out + o, p + i, k);
			o += k;
			i += k;
			continue;
		}
		/* Each byte of an escaped character or ill-formed sequence. */
		for (size_t e = 0; e < (k ? k : 1); e++, i++) {
			out[o++] = (char)0xef, out[o++] = (char)0xbf, out[o++] = (char)0xbd;
			out[o++] = hex[p[i] >> 4];
			out[o++] = hex[p[i] & 15];
		}
	}
	out[o] = 0;
	*ret_len = o;
	return out;
}

static int hexval(unsigned char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The bytes of a text form; 0, or a DECODE error naming key. */
static int path_from_text(const char *text, size_t n, const char *type, const char *key,
                          char **ret, airlock_error *err)
{
	const unsigned char *t = (const unsigned char *)text;
	_cleanup_free_ char *out = malloc(n + 1);
	if (!out)
		return nomem(err, type);
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		if (n - i >= 3 && t[i] == 0xef && t[i + 1] == 0xbf && t[i + 2] == 0xbd) {
			int hi = n - i >= PATH_ESC_LEN ? hexval(t[i + 3]) : -1;
			int lo = hi >= 0 ? hexval(t[i + 4]) : -1;
			if (lo < 0)
				return field_error(err, type, key,
				                   "U+FFFD must be followed by two lowercase hex digits "
				                   "(the escaped byte)");
			out[o++] = (char)(hi << 4 | lo);
			i += PATH_ESC_LEN;
		} else {
			out[o++] = (char)t[i++];
		}
	}
	out[o] = 0;
	if (memchr(out, 0, o))
		return field_error(err, type, key, "an escaped NUL byte");
	/* One form per name: what decodes must encode back to the same text. */
	size_t back_len = 0;
	_cleanup_free_ char *back = path_to_text(out, o, &back_len);
	if (!back)
		return nomem(err, type);
	if (back_len != n || memcmp(back, text, n) != 0)
		return field_error(err, type, key, "not in canonical text form (a byte escaped that "
		                                   "need not be, or one not escaped that must be)");
	*ret = TAKE_PTR(out);
	return 0;
}

static int put_path(json_t *o, const char *type, const char *key, const char *path,
                    airlock_error *err)
{
	if (!path)
		return field_error(err, type, key, "missing");
	size_t n = 0;
	_cleanup_free_ char *text = path_to_text(path, strlen(path), &n);
	if (!text)
		return nomem(err, type);
	return put(o, type, key, json_stringn_nocheck(text, n), err);
}

static int fc_check(const airlock_file_change *f, airlock_error *err)
{
	/* Relative to /workspace and never absolute: this is what keeps the
	 * host path out of the result (spec, FileChange). */
	if (!relative_path_ok(f->path))
		return field_error(err, T_FC, "path", "must be a non-empty path relative to /workspace");
	if (strlen(f->path) > AIRLOCK_FC_PATH_MAX)
		return field_error(err, T_FC, "path", "longer than %d bytes", AIRLOCK_FC_PATH_MAX);
	if (!airlock_change_kind_name(f->change))
		return field_error(err, T_FC, "change", "must be CREATED, MODIFIED or DELETED");
	if (!airlock_file_kind_name(f->kind))
		return field_error(err, T_FC, "kind",
		                   "must be FILE, SYMLINK, FIFO, SOCKET, CHAR_DEVICE or BLOCK_DEVICE");
	if (f->size_bytes < 0)
		return field_error(err, T_FC, "size_bytes", "must be >= 0");
	bool deleted = f->change == AIRLOCK_CHANGE_DELETED;
	if (f->has_sha256 == deleted)
		return field_error(err, T_FC, "sha256", deleted ? "must be null for DELETED"
		                                                : "required unless DELETED");
	if (f->has_sha256 && (!memchr(f->sha256, 0, sizeof(f->sha256)) || !airlock_sha256_hex_valid(f->sha256)))
		return field_error(err, T_FC, "sha256", "must be 64 lowercase hex digits");
	return 0;
}

static int fc_to(const airlock_file_change *f, json_t **ret, airlock_error *err)
{
	if (!f)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: missing", T_FC);
	int r = fc_check(f, err);
	if (r < 0)
		return r;
	_cleanup_json_ json_t *o = json_object();
	if (!o)
		return nomem(err, T_FC);
	if ((r = put_path(o, T_FC, "path", f->path, err)) < 0 ||
	    (r = put_str(o, T_FC, "change", airlock_change_kind_name(f->change), err)) < 0 ||
	    (r = put_str(o, T_FC, "kind", airlock_file_kind_name(f->kind), err)) < 0 ||
	    (r = put_int(o, T_FC, "size_bytes", f->size_bytes, err)) < 0 ||
	    (r = put_str_or_null(o, T_FC, "sha256", f->has_sha256 ? f->sha256 : NULL, err)) < 0)
		return r;
	*ret = TAKE_PTR(o);
	return 0;
}

static int fc_from(json_t *o, airlock_file_change *ret, airlock_error *err)
{
	int r = core_json_expect_object(o, T_FC, fc_fields, ARRAY_SIZE(fc_fields), err);
	if (r < 0)
		return r;
	airlock_file_change f = { 0 };
	const char *path, *change, *kind, *sha;
	size_t path_len = 0, sha_len = 0;
	if ((r = get_str_ref(o, T_FC, "path", false, &path, &path_len, err)) < 0)
		goto fail;
	/* The text form is at most five bytes per byte of the name. */
	if (path_len > (size_t)AIRLOCK_FC_PATH_MAX * PATH_ESC_LEN) {
		r = field_error(err, T_FC, "path", "longer than %d bytes", AIRLOCK_FC_PATH_MAX);
		goto fail;
	}
	if ((r = path_from_text(path, path_len, T_FC, "path", &f.path, err)) < 0 ||
	    (r = get_str_ref(o, T_FC, "change", false, &change, NULL, err)) < 0 ||
	    (r = get_str_ref(o, T_FC, "kind", false, &kind, NULL, err)) < 0 ||
	    (r = get_int(o, T_FC, "size_bytes", 0, INT64_MAX, &f.size_bytes, err)) < 0 ||
	    (r = get_str_ref(o, T_FC, "sha256", true, &sha, &sha_len, err)) < 0)
		goto fail;
	f.change = airlock_change_kind_parse(change);
	if (f.change == AIRLOCK_CHANGE_INVALID) {
		r = field_error(err, T_FC, "change", "must be CREATED, MODIFIED or DELETED");
		goto fail;
	}
	f.kind = airlock_file_kind_parse(kind);
	if (f.kind == AIRLOCK_FILE_INVALID) {
		r = field_error(err, T_FC, "kind",
		                "must be FILE, SYMLINK, FIFO, SOCKET, CHAR_DEVICE or BLOCK_DEVICE");
		goto fail;
	}
	if (sha) {
		if (sha_len != AIRLOCK_SHA256_HEX_LEN) {
			r = field_error(err, T_FC, "sha256", "must be 64 lowercase hex digits");
			goto fail;
		}
		memcpy(f.sha256, sha, sha_len + 1);
		f.has_sha256 = true;
	}
	if ((r = fc_check(&f, err)) < 0)
		goto fail;
	*ret = f;
	return 0;
fail:
	airlock_file_change_clear(&f);
	return r;
}

/* ---- ExecutionResult ----------------------------------------------------- */

static const char T_RESULT[] = "ExecutionResult";
static const char *const result_fields[] = {
	"exit_code", "stdout", "stderr", "stdout_truncated", "stderr_truncated", "timed_out",
	"killed_by", "files_changed", "files_changed_truncated", "duration_ms",
};

static int result_check(const airlock_execution_result *v, airlock_error *err)
{
	if (v->killed_by != AIRLOCK_KILL_NONE && !airlock_kill_reason_name(v->killed_by))
		return field_error(err, T_RESULT, "killed_by", "invalid value %d", (int)v->killed_by);
	/* exit_code is null exactly when the process did not exit on its own,
	 * and a timeout sets both timed_out and killed_by (spec,
	 * ExecutionResult). */
	if (v->has_exit_code != (v->killed_by == AIRLOCK_KILL_NONE))
		return field_error(err, T_RESULT, "exit_code",
		                   v->has_exit_code ? "must be null when killed_by is set"
		                                    : "required when killed_by is null");
	if (v->timed_out != (v->killed_by == AIRLOCK_KILL_TIMEOUT))
		return field_error(err, T_RESULT, "timed_out", "must be true exactly when killed_by is TIMEOUT");
	if (!v->stdout_data && v->stdout_len > 0)
		return field_error(err, T_RESULT, "stdout", "missing");
	if (!v->stderr_data && v->stderr_len > 0)
		return field_error(err, T_RESULT, "stderr", "missing");
	if (!v->files_changed && v->n_files_changed > 0)
		return field_error(err, T_RESULT, "files_changed", "missing");
	if (v->duration_ms < 0)
		return field_error(err, T_RESULT, "duration_ms", "must be >= 0");
	return 0;
}

static int result_to(const airlock_execution_result *v, json_t **ret, airlock_error *err)
{
	if (!v)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: missing", T_RESULT);
	int r = result_check(v, err);
	if (r < 0)
		return r;
	_cleanup_json_ json_t *o = json_object();
	_cleanup_json_ json_t *files = json_array();
	if (!o || !files)
		return nomem(err, T_RESULT);
	for (size_t i = 0; i < v->n_files_changed; i++) {
		json_t *fj = NULL;
		if ((r = fc_to(&v->files_changed[i], &fj, err)) < 0) {
			airlock_error_prefix(err, "%s.files_changed[%zu]: ", T_RESULT, i);
			return r;
		}
		if (json_array_append_new(files, fj) < 0)
			return nomem(err, T_RESULT);
	}
	r = v->has_exit_code ? put_int(o, T_RESULT, "exit_code", v->exit_code, err)
	                     : put_null(o, T_RESULT, "exit_code", err);
	if (r < 0 ||
	    (r = put_bytes(o, T_RESULT, "stdout", v->stdout_data, v->stdout_len, err)) < 0 ||
	    (r = put_bytes(o, T_RESULT, "stderr", v->stderr_data, v->stderr_len, err)) < 0 ||
	    (r = put_bool(o, T_RESULT, "stdout_truncated", v->stdout_truncated, err)) < 0 ||
	    (r = put_bool(o, T_RESULT, "stderr_truncated", v->stderr_truncated, err)) < 0 ||
	    (r = put_bool(o, T_RESULT, "timed_out", v->timed_out, err)) < 0 ||
	    (r = put_str_or_null(o, T_RESULT, "killed_by", airlock_kill_reason_name(v->killed_by), err)) < 0 ||
	    (r = put(o, T_RESULT, "files_changed", TAKE_PTR(files), err)) < 0 ||
	    (r = put_bool(o, T_RESULT, "files_changed_truncated", v->files_changed_truncated, err)) < 0 ||
	    (r = put_int(o, T_RESULT, "duration_ms", v->duration_ms, err)) < 0)
		return r;
	*ret = TAKE_PTR(o);
	return 0;
}

static int result_from(json_t *o, airlock_execution_result *ret, airlock_error *err)
{
	int r = core_json_expect_object(o, T_RESULT, result_fields, ARRAY_SIZE(result_fields), err);
	if (r < 0)
		return r;
	airlock_execution_result v = { 0 };
	json_t *x, *files;
	bool has;
	const char *killed;
	if ((r = get(o, T_RESULT, "exit_code", &x, err)) < 0)
		goto fail;
	if (json_is_integer(x)) {
		json_int_t c = json_integer_value(x);
		if (c < INT_MIN || c > INT_MAX) {
			r = field_error(err, T_RESULT, "exit_code", "out of range");
			goto fail;
		}
		v.has_exit_code = true;
		v.exit_code = (int)c;
	} else if (!json_is_null(x)) {
		r = field_error(err, T_RESULT, "exit_code", "must be an integer or null");
		goto fail;
	}
	if ((r = get_bytes(o, T_RESULT, "stdout", false, &has, &v.stdout_data, &v.stdout_len, err)) < 0 ||
	    (r = get_bytes(o, T_RESULT, "stderr", false, &has, &v.stderr_data, &v.stderr_len, err)) < 0 ||
	    (r = get_bool(o, T_RESULT, "stdout_truncated", &v.stdout_truncated, err)) < 0 ||
	    (r = get_bool(o, T_RESULT, "stderr_truncated", &v.stderr_truncated, err)) < 0 ||
	    (r = get_bool(o, T_RESULT, "timed_out", &v.timed_out, err)) < 0 ||
	    (r = get_str_ref(o, T_RESULT, "killed_by", true, &killed, NULL, err)) < 0 ||
	    (r = get_array(o, T_RESULT, "files_changed", &files, err)) < 0 ||
	    (r = get_bool(o, T_RESULT, "files_changed_truncated", &v.files_changed_truncated, err)) < 0 ||
	    (r = get_int(o, T_RESULT, "duration_ms", 0, INT64_MAX, &v.duration_ms, err)) < 0)
		goto fail;
	if (killed && (v.killed_by = airlock_kill_reason_parse(killed)) == AIRLOCK_KILL_NONE) {
		r = field_error(err, T_RESULT, "killed_by", "unknown kill reason \"%.32s\"", killed);
		goto fail;
	}
	size_t n = json_array_size(files);
	if (n > 0 && !(v.files_changed = calloc(n, sizeof(*v.files_changed)))) {
		r = nomem(err, T_RESULT);
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		if ((r = fc_from(json_array_get(files, i), &v.files_changed[i], err)) < 0) {
			airlock_error_prefix(err, "%s.files_changed[%zu]: ", T_RESULT, i);
			goto fail;
		}
		v.n_files_changed = i + 1;
	}
	if ((r = result_check(&v, err)) < 0)
		goto fail;
	*ret = v;
	return 0;
fail:
	airlock_execution_result_clear(&v);
	return r;
}

/* ---- ArtifactMetadata ---------------------------------------------------- */

static const char T_META[] = "ArtifactMetadata";
#define MEDIA_TYPE_RULE "must be type/subtype (RFC 6838 names, no parameters), like text/plain"
static const char *const meta_fields[] = {
	"tenant_id", "run_id", "origin", "filename", "media_type",
	"size_bytes", "sha256", "trust", "created_at", "expires_at",
};

static int meta_check(const airlock_artifact_metadata *m, airlock_error *err)
{
	if (!airlock_id_valid(m->tenant_id))
		return field_error(err, T_META, "tenant_id", "must be 1..%d of [A-Za-z0-9_-]", AIRLOCK_ID_MAX);
	if (m->run_id && !airlock_id_valid(m->run_id))
		return field_error(err, T_META, "run_id", "must be null or 1..%d of [A-Za-z0-9_-]", AIRLOCK_ID_MAX);
	if (!airlock_artifact_origin_name(m->origin))
		return field_error(err, T_META, "origin", "invalid value %d", (int)m->origin);
	/* A filename is metadata and never a path, so any text is accepted; it is
	 * sanitized where a download is named, not here (spec, Artifacts). */
	if (!m->filename || !*m->filename)
		return field_error(err, T_META, "filename", "must not be empty");
	if (!airlock_media_type_valid(m->media_type))
		return field_error(err, T_META, "media_type", MEDIA_TYPE_RULE);
	if (m->size_bytes < 0)
		return field_error(err, T_META, "size_bytes", "must be >= 0");
	if (!memchr(m->sha256, 0, sizeof(m->sha256)) || !airlock_sha256_hex_valid(m->sha256))
		return field_error(err, T_META, "sha256", "must be 64 lowercase hex digits");
	if (!airlock_trust_level_name(m->trust))
		return field_error(err, T_META, "trust", "invalid value %d", (int)m->trust);
	return 0;
}

static int meta_to(const airlock_artifact_metadata *m, json_t **ret, airlock_error *err)
{
	if (!m)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: missing", T_META);
	int r = meta_check(m, err);
	if (r < 0)
		return r;
	_cleanup_json_ json_t *o = json_object();
	if (!o)
		return nomem(err, T_META);
	if ((r = put_str(o, T_META, "tenant_id", m->tenant_id, err)) < 0 ||
	    (r = put_str_or_null(o, T_META, "run_id", m->run_id, err)) < 0 ||
	    (r = put_str(o, T_META, "origin", airlock_artifact_origin_name(m->origin), err)) < 0 ||
	    (r = put_str(o, T_META, "filename", m->filename, err)) < 0 ||
	    (r = put_str(o, T_META, "media_type", m->media_type, err)) < 0 ||
	    (r = put_int(o, T_META, "size_bytes", m->size_bytes, err)) < 0 ||
	    (r = put_str(o, T_META, "sha256", m->sha256, err)) < 0 ||
	    (r = put_str(o, T_META, "trust", airlock_trust_level_name(m->trust), err)) < 0 ||
	    (r = put_time(o, T_META, "created_at", m->created_at_ms, err)) < 0)
		return r;
	r = m->has_expires_at ? put_time(o, T_META, "expires_at", m->expires_at_ms, err)
	                      : put_null(o, T_META, "expires_at", err);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(o);
	return 0;
}

static int meta_from(json_t *o, airlock_artifact_metadata *ret, airlock_error *err)
{
	int r = core_json_expect_object(o, T_META, meta_fields, ARRAY_SIZE(meta_fields), err);
	if (r < 0)
		return r;
	airlock_artifact_metadata m = { 0 };
	const char *origin, *trust;
	bool has;
	if ((r = get_str(o, T_META, "tenant_id", false, &m.tenant_id, err)) < 0 ||
	    (r = get_str(o, T_META, "run_id", true, &m.run_id, err)) < 0 ||
	    (r = get_str_ref(o, T_META, "origin", false, &origin, NULL, err)) < 0 ||
	    (r = get_str(o, T_META, "filename", false, &m.filename, err)) < 0 ||
	    (r = get_str(o, T_META, "media_type", false, &m.media_type, err)) < 0 ||
	    (r = get_int(o, T_META, "size_bytes", 0, INT64_MAX, &m.size_bytes, err)) < 0 ||
	    (r = get_str_fixed(o, T_META, "sha256", m.sha256, sizeof(m.sha256), err)) < 0 ||
	    (r = get_str_ref(o, T_META, "trust", false, &trust, NULL, err)) < 0 ||
	    (r = get_time(o, T_META, "created_at", false, &has, &m.created_at_ms, err)) < 0 ||
	    (r = get_time(o, T_META, "expires_at", true, &m.has_expires_at, &m.expires_at_ms, err)) < 0)
		goto fail;
	if ((m.origin = airlock_artifact_origin_parse(origin)) == AIRLOCK_ORIGIN_INVALID) {
		r = field_error(err, T_META, "origin", "unknown origin \"%.32s\"", origin);
		goto fail;
	}
	if ((m.trust = airlock_trust_level_parse(trust)) == AIRLOCK_TRUST_INVALID) {
		r = field_error(err, T_META, "trust", "unknown trust level \"%.32s\"", trust);
		goto fail;
	}
	if ((r = meta_check(&m, err)) < 0)
		goto fail;
	*ret = m;
	return 0;
fail:
	airlock_artifact_metadata_clear(&m);
	return r;
}

/* ---- ArtifactRef --------------------------------------------------------- */

static const char T_REF[] = "ArtifactRef";
static const char *const ref_fields[] = { "artifact_id", "sha256", "size_bytes", "media_type" };

static int ref_check(const airlock_artifact_ref *a, airlock_error *err)
{
	if (!memchr(a->artifact_id, 0, sizeof(a->artifact_id)) || !airlock_uuidv7_valid(a->artifact_id))
		return field_error(err, T_REF, "artifact_id", "must be a lowercase canonical UUIDv7");
	if (!memchr(a->sha256, 0, sizeof(a->sha256)) || !airlock_sha256_hex_valid(a->sha256))
		return field_error(err, T_REF, "sha256", "must be 64 lowercase hex digits");
	if (a->size_bytes < 0)
		return field_error(err, T_REF, "size_bytes", "must be >= 0");
	if (!airlock_media_type_valid(a->media_type))
		return field_error(err, T_REF, "media_type", MEDIA_TYPE_RULE);
	return 0;
}

static int ref_to(const airlock_artifact_ref *a, json_t **ret, airlock_error *err)
{
	if (!a)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: missing", T_REF);
	int r = ref_check(a, err);
	if (r < 0)
		return r;
	_cleanup_json_ json_t *o = json_object();
	if (!o)
		return nomem(err, T_REF);
	if ((r = put_str(o, T_REF, "artifact_id", a->artifact_id, err)) < 0 ||
	    (r = put_str(o, T_REF, "sha256", a->sha256, err)) < 0 ||
	    (r = put_int(o, T_REF, "size_bytes", a->size_bytes, err)) < 0 ||
	    (r = put_str(o, T_REF, "media_type", a->media_type, err)) < 0)
		return r;
	*ret = TAKE_PTR(o);
	return 0;
}

static int ref_from(json_t *o, airlock_artifact_ref *ret, airlock_error *err)
{
	int r = core_json_expect_object(o, T_REF, ref_fields, ARRAY_SIZE(ref_fields), err);
	if (r < 0)
		return r;
	airlock_artifact_ref a = { 0 };
	if ((r = get_str_fixed(o, T_REF, "artifact_id", a.artifact_id, sizeof(a.artifact_id), err)) < 0 ||
	    (r = get_str_fixed(o, T_REF, "sha256", a.sha256, sizeof(a.sha256), err)) < 0 ||
	    (r = get_int(o, T_REF, "size_bytes", 0, INT64_MAX, &a.size_bytes, err)) < 0 ||
	    (r = get_str(o, T_REF, "media_type", false, &a.media_type, err)) < 0 ||
	    (r = ref_check(&a, err)) < 0) {
		airlock_artifact_ref_clear(&a);
		return r;
	}
	*ret = a;
	return 0;
}

/* ---- airlock_error ------------------------------------------------------- */

static const char T_ERROR[] = "Error";
static const char *const error_fields[] = { "error", "message" };

static int error_to(const airlock_error *e, json_t **ret, airlock_error *err)
{
	if (!e)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: missing", T_ERROR);
	if ((unsigned)e->cls >= AIRLOCK_ERR__MAX)
		return field_error(err, T_ERROR, "error", "invalid class %d", (int)e->cls);
	/* An error must always be reportable: vsnprintf may have cut the message
	 * inside a character, and a message may quote bytes from anywhere, so it
	 * is made well-formed rather than refused. */
	size_t mlen = strnlen(e->message, sizeof(e->message));
	size_t n = 0;
	_cleanup_free_ char *msg = utf8_sanitize(e->message, mlen, &n);
	if (!msg)
		return nomem(err, T_ERROR);
	_cleanup_json_ json_t *o = json_object();
	if (!o)
		return nomem(err, T_ERROR);
	int r;
	if ((r = put(o, T_ERROR, "error", json_string_nocheck(airlock_errclass_name(e->cls)), err)) < 0 ||
	    (r = put(o, T_ERROR, "message", json_stringn_nocheck(msg, n), err)) < 0)
		return r;
	*ret = TAKE_PTR(o);
	return 0;
}

json_t *core_json_error_value(const airlock_error *e, airlock_error *err)
{
	json_t *o = NULL;
	return error_to(e, &o, err) < 0 ? NULL : o;
}

json_t *core_json_path_value(const char *path)
{
	if (!path)
		return NULL;
	size_t n = 0;
	_cleanup_free_ char *text = path_to_text(path, strlen(path), &n);
	return text ? json_stringn_nocheck(text, n) : NULL;
}

static int error_from(json_t *o, airlock_error *ret, airlock_error *err)
{
	int r = core_json_expect_object(o, T_ERROR, error_fields, ARRAY_SIZE(error_fields), err);
	if (r < 0)
		return r;
	const char *cls, *msg;
	size_t mlen;
	if ((r = get_str_ref(o, T_ERROR, "error", false, &cls, NULL, err)) < 0 ||
	    (r = get_str_ref(o, T_ERROR, "message", false, &msg, &mlen, err)) < 0)
		return r;
	airlock_error e = { 0 };
	bool found = false;
	for (int c = 0; c < AIRLOCK_ERR__MAX && !found; c++)
		if (strcmp(cls, airlock_errclass_name((airlock_errclass)c)) == 0) {
			e.cls = (airlock_errclass)c;
			found = true;
		}
	if (!found)
		return field_error(err, T_ERROR, "error", "unknown error class \"%.64s\"", cls);
	/* A message longer than the local buffer is cut at a character boundary
	 * so that what is kept is still well-formed and re-encodes unchanged. */
	if (mlen >= sizeof(e.message)) {
		mlen = sizeof(e.message) - 1;
		while (mlen > 0 && ((unsigned char)msg[mlen] & 0xc0) == 0x80)
			mlen--;
	}
	memcpy(e.message, msg, mlen);
	e.message[mlen] = 0;
	*ret = e;
	return 0;
}

/* ---- public entry points ------------------------------------------------- */

static void no_clear(void *p) { (void)p; }

/* Decoding goes through core_json_decode (the arena and its budget); the
 * callback fills the type from the tree while it lives. maxlen is the
 * type's input limit, and its encoder refuses to write past it. */
#define DEFINE_JSON_CODEC(prefix, ctype, tname, maxlen, to_fn, from_fn, clear_fn)                  \
	char *prefix##_to_json(const ctype *v, airlock_error *err)                                 \
	{                                                                                          \
		_cleanup_json_ json_t *o = NULL;                                                   \
		if (to_fn(v, &o, err) < 0)                                                         \
			return NULL;                                                               \
		return dump(o, tname, maxlen, err);                                                \
	}                                                                                          \
	static int prefix##_decoded(json_t *root, void *ctx, airlock_error *err)                   \
	{                                                                                          \
		return from_fn(root, ctx, err);                                                    \
	}                                                                                          \
	int prefix##_from_json(const char *buf, size_t len, ctype *ret, airlock_error *err)        \
	{                                                                                          \
		ctype tmp;                                                                         \
		memset(&tmp, 0, sizeof(tmp));                                                      \
		int r = core_json_decode(buf, len, maxlen, tname, prefix##_decoded, &tmp, err);    \
		if (r < 0)                                                                         \
			return r;                                                                  \
		if (!ret) {                                                                        \
			clear_fn(&tmp);                                                            \
			return 0;                                                                  \
		}                                                                                  \
		*ret = tmp;                                                                        \
		return 0;                                                                          \
	}

#define ANY_MAX ((size_t)AIRLOCK_JSON_INPUT_MAX)
DEFINE_JSON_CODEC(airlock_resource_limits, airlock_resource_limits, T_LIMITS, ANY_MAX, limits_to,
                  limits_from, no_clear)
DEFINE_JSON_CODEC(airlock_egress_policy, airlock_egress_policy, T_EGRESS, ANY_MAX, egress_to,
                  egress_from, airlock_egress_policy_clear)
DEFINE_JSON_CODEC(airlock_environment_spec, airlock_environment_spec, T_SPEC,
                  (size_t)AIRLOCK_SPEC_JSON_MAX, spec_to, spec_from, airlock_environment_spec_clear)
DEFINE_JSON_CODEC(airlock_environment_handle, airlock_environment_handle, T_HANDLE, ANY_MAX,
                  handle_to, handle_from, airlock_environment_handle_clear)
DEFINE_JSON_CODEC(airlock_execution_command, airlock_execution_command, T_CMD, ANY_MAX, cmd_to,
                  cmd_from, airlock_execution_command_clear)
DEFINE_JSON_CODEC(airlock_file_change, airlock_file_change, T_FC, ANY_MAX, fc_to, fc_from,
                  airlock_file_change_clear)
DEFINE_JSON_CODEC(airlock_execution_result, airlock_execution_result, T_RESULT, ANY_MAX, result_to,
                  result_from, airlock_execution_result_clear)
DEFINE_JSON_CODEC(airlock_artifact_metadata, airlock_artifact_metadata, T_META, ANY_MAX, meta_to,
                  meta_from, airlock_artifact_metadata_clear)
DEFINE_JSON_CODEC(airlock_artifact_ref, airlock_artifact_ref, T_REF, ANY_MAX, ref_to, ref_from,
                  airlock_artifact_ref_clear)
DEFINE_JSON_CODEC(airlock_error, airlock_error, T_ERROR, ANY_MAX, error_to, error_from, no_clear)

/* A spec or a command that is a member of a larger document (the service's
 * request envelopes): decoded from the tree the envelope's decode holds,
 * never dumped back to text and parsed again. */
int core_json_spec_from_value(json_t *v, airlock_environment_spec *ret, airlock_error *err)
{
	airlock_environment_spec tmp = { 0 };
	int r = spec_from(v, &tmp, err);
	if (r < 0)
		return r;
	*ret = tmp;
	return 0;
}

int core_json_command_from_value(json_t *v, airlock_execution_command *ret, airlock_error *err)
{
	airlock_execution_command tmp = { 0 };
	int r = cmd_from(v, &tmp, err);
	if (r < 0)
		return r;
	*ret = tmp;
	return 0;
}

/* The bridge endpoint is held by pointer in a spec, so its wrappers differ
 * from the macro's: *ret receives the fields of a decoded endpoint. */
char *airlock_bridge_endpoint_to_json(const airlock_bridge_endpoint *v, airlock_error *err)
{
	_cleanup_json_ json_t *o = NULL;
	if (bridge_to(v, &o, err) < 0)
		return NULL;
	return dump(o, T_BRIDGE, ANY_MAX, err);
}

static int bridge_decoded(json_t *root, void *ctx, airlock_error *err)
{
	return bridge_from(root, ctx, err);
}

int airlock_bridge_endpoint_from_json(const char *buf, size_t len, airlock_bridge_endpoint *ret,
                                      airlock_error *err)
{
	airlock_bridge_endpoint *b = NULL;
	int r = core_json_decode(buf, len, ANY_MAX, T_BRIDGE, bridge_decoded, &b, err);
	if (r < 0)
		return r;
	if (ret)
		*ret = *b;
	else {
		free(b->socket_path);
		explicit_bzero(b->token, strlen(b->token));
		free(b->token);
	}
	free(b);
	return 0;
}

/* ---- the sandbox.run_command result -------------------------------------- */

static const char T_TOOL[] = "sandbox.run_command result";

static int put_text(json_t *o, const char *key, const unsigned char *data, size_t len, airlock_error *err)
{
	size_t n = 0;
	_cleanup_free_ char *text = utf8_sanitize(data ? (const void *)data : "", data ? len : 0, &n);
	if (!text)
		return nomem(err, T_TOOL);
	return put(o, T_TOOL, key, json_stringn_nocheck(text, n), err);
}

/* The result object; with_refs adds stdout_artifact and stderr_artifact
 * (an ArtifactRef, or null when the stream was not kept). */
static char *result_to_tool_json(const airlock_execution_result *v, bool with_refs,
                                 const airlock_artifact_ref *stdout_ref,
                                 const airlock_artifact_ref *stderr_ref, airlock_error *err)
{
	if (!v) {
		airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: missing", T_TOOL);
		return NULL;
	}
	_cleanup_json_ json_t *o = json_object();
	_cleanup_json_ json_t *files = json_array();
	if (!o || !files) {
		nomem(err, T_TOOL);
		return NULL;
	}
	int r;
	for (size_t i = 0; i < v->n_files_changed && v->files_changed; i++) {
		const airlock_file_change *f = &v->files_changed[i];
		const char *change = airlock_change_kind_name(f->change);
		if (!f->path || !change) {
			field_error(err, T_TOOL, "files_changed", "entry %zu has no path or change", i);
			return NULL;
		}
		_cleanup_json_ json_t *fj = json_object();
		if (!fj) {
			nomem(err, T_TOOL);
			return NULL;
		}
		const char *kind = airlock_file_kind_name(f->kind);
		if (!kind) {
			field_error(err, T_TOOL, "files_changed", "entry %zu has no kind", i);
			return NULL;
		}
		/* A file name is bytes, not text: the lossless text form (see
		 * path_to_text), so two files never share a path here either. */
		if ((r = put_path(fj, T_TOOL, "path", f->path, err)) < 0 ||
		    (r = put(fj, T_TOOL, "change", json_string_nocheck(change), err)) < 0 ||
		    (r = put(fj, T_TOOL, "kind", json_string_nocheck(kind), err)) < 0 ||
		    (r = put_int(fj, T_TOOL, "size_bytes", f->size_bytes, err)) < 0)
			return NULL;
		if (f->has_sha256) {
			size_t sl = strnlen(f->sha256, sizeof(f->sha256));
			r = put_text(fj, "sha256", (const unsigned char *)f->sha256, sl, err);
		} else {
			r = put_null(fj, T_TOOL, "sha256", err);
		}
		if (r < 0)
			return NULL;
		if (json_array_append_new(files, TAKE_PTR(fj)) < 0) {
			nomem(err, T_TOOL);
			return NULL;
		}
	}
	const char *killed = airlock_kill_reason_name(v->killed_by);
	r = v->has_exit_code ? put_int(o, T_TOOL, "exit_code", v->exit_code, err)
	                     : put_null(o, T_TOOL, "exit_code", err);
	if (r < 0 ||
	    (r = put_text(o, "stdout", v->stdout_data, v->stdout_len, err)) < 0 ||
	    (r = put_text(o, "stderr", v->stderr_data, v->stderr_len, err)) < 0 ||
	    (r = put_bool(o, T_TOOL, "stdout_truncated", v->stdout_truncated, err)) < 0 ||
	    (r = put_bool(o, T_TOOL, "stderr_truncated", v->stderr_truncated, err)) < 0 ||
	    (r = put_bool(o, T_TOOL, "timed_out", v->timed_out, err)) < 0 ||
	    (r = (killed ? put(o, T_TOOL, "killed_by", json_string_nocheck(killed), err)
	                 : put_null(o, T_TOOL, "killed_by", err))) < 0 ||
	    (r = put_int(o, T_TOOL, "duration_ms", v->duration_ms, err)) < 0 ||
	    (r = put(o, T_TOOL, "files_changed", TAKE_PTR(files), err)) < 0 ||
	    (r = put_bool(o, T_TOOL, "files_changed_truncated", v->files_changed_truncated, err)) < 0)
		return NULL;
	const airlock_artifact_ref *refs[2] = { stdout_ref, stderr_ref };
	static const char *const ref_keys[2] = { "stdout_artifact", "stderr_artifact" };
	for (int i = 0; with_refs && i < 2; i++) {
		json_t *rj = NULL;
		if (refs[i] && (r = ref_to(refs[i], &rj, err)) < 0)
			return NULL;
		if ((r = rj ? put(o, T_TOOL, ref_keys[i], rj, err)
		            : put_null(o, T_TOOL, ref_keys[i], err)) < 0)
			return NULL;
	}
	char *s = json_dumps(o, JSON_COMPACT);
	if (!s)
		nomem(err, T_TOOL);
	return s;
}

char *airlock_result_to_tool_json(const airlock_execution_result *v, airlock_error *err)
{
	return result_to_tool_json(v, false, NULL, NULL, err);
}

char *airlock_result_to_tool_json_refs(const airlock_execution_result *v,
                                       const airlock_artifact_ref *stdout_ref,
                                       const airlock_artifact_ref *stderr_ref, airlock_error *err)
{
	return result_to_tool_json(v, true, stdout_ref, stderr_ref, err);
}
