/* SPDX-License-Identifier: Apache-2.0 */
/* JSON encoding and strict decoding of every type in types.h: lossless round
 * trips (nullable variants, binary bytes), and the refusals a strict decoder
 * owes the service that reads what another trust domain wrote. */
#include <criterion/criterion.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "airlock/egress.h"
#include "airlock/error.h"
#include "airlock/ids.h"
#include "airlock/json.h"
#include "airlock/types.h"
#include "airlock/caps.h"
#include "exec/gvisor/events.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define HEX64B "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

/* ---- the wire forms the tests start from -------------------------------- */

#define LIMITS_JSON                                                                                \
	"{\"cpu_millicores\":2000,\"memory_bytes\":2147483648,\"pids_max\":512,"                   \
	"\"workspace_bytes\":4294967296,\"inodes_max\":100000,\"wall_clock_seconds\":300}"
#define EGRESS_JSON                                                                                \
	"{\"mode\":\"allowlist\",\"destinations\":[{\"host\":\"pypi.org\",\"ports\":[443]},"       \
	"{\"host\":\"*.pythonhosted.org\",\"ports\":[80,443]}]}"
#define BRIDGE_JSON "{\"socket_path\":\"/run/airlock/bridge.sock\",\"token\":\"tok-1\"}"
#define SPEC_JSON                                                                                  \
	"{\"tenant_id\":\"tenant-1\",\"run_id\":\"run-1\",\"lease_epoch\":3,"                      \
	"\"image_digest\":\"sha256:" HEX64 "\",\"limits\":" LIMITS_JSON ",\"egress\":" EGRESS_JSON \
	",\"environment\":{\"HOME\":\"/workspace\",\"LANG\":\"C.UTF-8\"},\"bridge\":" BRIDGE_JSON "}"
#define HANDLE_JSON                                                                                \
	"{\"environment_id\":\"env_0123456789abcdef0123456789abcdef\",\"tenant_id\":\"tenant-1\","  \
	"\"run_id\":\"run-1\",\"lease_epoch\":3,\"created_at\":\"2026-11-29T23:34:04.123Z\","       \
	"\"expires_at\":\"2026-11-30T00:04:04.123Z\"}"
#define CMD_JSON                                                                                   \
	"{\"argv\":[\"python\",\"-c\",\"print(1)\"],\"working_directory\":\".\","                  \
	"\"timeout_seconds\":30,\"stdin\":\"AP8=\",\"maximum_output_bytes\":1048576}"
#define CMD_NOSTDIN_JSON                                                                           \
	"{\"argv\":[\"true\"],\"working_directory\":\"src\",\"timeout_seconds\":1,"                \
	"\"stdin\":null,\"maximum_output_bytes\":1}"
#define FC_JSON "{\"path\":\"out/data.csv\",\"change\":\"CREATED\",\"kind\":\"FILE\",\"size_bytes\":1204,\"sha256\":\"" HEX64 "\"}"
#define FC_DELETED_JSON "{\"path\":\"old.txt\",\"change\":\"DELETED\",\"kind\":\"SYMLINK\",\"size_bytes\":0,\"sha256\":null}"
#define RESULT_JSON                                                                                \
	"{\"exit_code\":0,\"stdout\":\"aGkK\",\"stderr\":\"\",\"stdout_truncated\":false,"          \
	"\"stderr_truncated\":false,\"timed_out\":false,\"killed_by\":null,\"files_changed\":["    \
	FC_JSON "," FC_DELETED_JSON "],\"files_changed_truncated\":false,\"duration_ms\":1840}"
#define RESULT_KILLED_JSON                                                                         \
	"{\"exit_code\":null,\"stdout\":\"\",\"stderr\":\"AP8=\",\"stdout_truncated\":true,"        \
	"\"stderr_truncated\":false,\"timed_out\":true,\"killed_by\":\"TIMEOUT\","                 \
	"\"files_changed\":[],\"files_changed_truncated\":true,\"duration_ms\":300000}"
#define META_JSON                                                                                  \
	"{\"tenant_id\":\"tenant-1\",\"run_id\":\"run-1\",\"origin\":\"SANDBOX_EXPORT\","           \
	"\"filename\":\"../../etc/passwd\",\"media_type\":\"text/plain\",\"size_bytes\":12,"      \
	"\"sha256\":\"" HEX64 "\",\"trust\":\"EXTERNAL_UNTRUSTED\","                               \
	"\"created_at\":\"2026-11-29T23:34:04.123Z\",\"expires_at\":\"2026-12-29T23:34:04.123Z\"}"
#define META_NULLS_JSON                                                                            \
	"{\"tenant_id\":\"tenant-1\",\"run_id\":null,\"origin\":\"UPLOAD\","                        \
	"\"filename\":\"report.pdf\",\"media_type\":\"application/pdf\",\"size_bytes\":0,"        \
	"\"sha256\":\"" HEX64B "\",\"trust\":\"USER_SUPPLIED\","                                   \
	"\"created_at\":\"1970-01-01T00:00:00.000Z\",\"expires_at\":null}"
#define REF_JSON                                                                                   \
	"{\"artifact_id\":\"0192d3f5-8e1a-7abc-8def-0123456789ab\",\"sha256\":\"" HEX64 "\","       \
	"\"size_bytes\":12,\"media_type\":\"text/plain\"}"
#define ERROR_JSON "{\"error\":\"ExecutionRejected\",\"message\":\"EnvironmentSpec.image_digest: bad\"}"

/* ---- one decode signature for every type -------------------------------- */

typedef int (*decode_fn)(const char *buf, size_t len, airlock_error *err);

#define DECODER(prefix, ctype, clear)                                                              \
	static int dec_##prefix(const char *buf, size_t len, airlock_error *err)                   \
	{                                                                                          \
		ctype v;                                                                           \
		memset(&v, 0, sizeof(v));                                                          \
		int r = airlock_##prefix##_from_json(buf, len, &v, err);                           \
		if (r == 0)                                                                        \
			clear(&v);                                                                 \
		return r;                                                                          \
	}

static void no_clear(void *p) { (void)p; }
static void bridge_clear(airlock_bridge_endpoint *b)
{
	free(b->socket_path);
	free(b->token);
}

DECODER(resource_limits, airlock_resource_limits, no_clear)
DECODER(egress_policy, airlock_egress_policy, airlock_egress_policy_clear)
DECODER(bridge_endpoint, airlock_bridge_endpoint, bridge_clear)
DECODER(environment_spec, airlock_environment_spec, airlock_environment_spec_clear)
DECODER(environment_handle, airlock_environment_handle, airlock_environment_handle_clear)
DECODER(execution_command, airlock_execution_command, airlock_execution_command_clear)
DECODER(file_change, airlock_file_change, airlock_file_change_clear)
DECODER(execution_result, airlock_execution_result, airlock_execution_result_clear)
DECODER(artifact_metadata, airlock_artifact_metadata, airlock_artifact_metadata_clear)
DECODER(artifact_ref, airlock_artifact_ref, airlock_artifact_ref_clear)
DECODER(error, airlock_error, no_clear)

typedef struct base {
	const char *type; /* the name decode errors use */
	decode_fn dec;
	const char *json;
} base;

static const base bases[] = {
	{ "ResourceLimits", dec_resource_limits, LIMITS_JSON },
	{ "EgressPolicy", dec_egress_policy, EGRESS_JSON },
	{ "BridgeEndpoint", dec_bridge_endpoint, BRIDGE_JSON },
	{ "EnvironmentSpec", dec_environment_spec, SPEC_JSON },
	{ "EnvironmentHandle", dec_environment_handle, HANDLE_JSON },
	{ "ExecutionCommand", dec_execution_command, CMD_JSON },
	{ "ExecutionCommand", dec_execution_command, CMD_NOSTDIN_JSON },
	{ "FileChange", dec_file_change, FC_JSON },
	{ "FileChange", dec_file_change, FC_DELETED_JSON },
	{ "ExecutionResult", dec_execution_result, RESULT_JSON },
	{ "ExecutionResult", dec_execution_result, RESULT_KILLED_JSON },
	{ "ArtifactMetadata", dec_artifact_metadata, META_JSON },
	{ "ArtifactMetadata", dec_artifact_metadata, META_NULLS_JSON },
	{ "ArtifactRef", dec_artifact_ref, REF_JSON },
	{ "Error", dec_error, ERROR_JSON },
};

/* ---- helpers ------------------------------------------------------------- */

static json_t *parse_any(const char *s)
{
	json_error_t je;
	json_t *j = json_loads(s, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	cr_assert_not_null(j, "test JSON does not parse: %s: %s", s, je.text);
	return j;
}

/* base with the value at a '/'-separated path replaced by value_json, or
 * removed when value_json is NULL. Array elements are named by index. */
static char *mutate(const char *base_json, const char *path, const char *value_json)
{
	json_t *root = parse_any(base_json);
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", path);
	json_t *cur = root;
	char *save = NULL;
	char *tok = strtok_r(buf, "/", &save);
	while (tok) {
		char *next = strtok_r(NULL, "/", &save);
		if (!next) {
			if (json_is_array(cur)) {
				size_t i = strtoul(tok, NULL, 10);
				if (value_json)
					json_array_set_new(cur, i, parse_any(value_json));
				else
					json_array_remove(cur, i);
			} else if (value_json) {
				json_object_set_new(cur, tok, parse_any(value_json));
			} else {
				cr_assert_eq(json_object_del(cur, tok), 0, "no %s in %s", path, base_json);
			}
			break;
		}
		cur = json_is_array(cur) ? json_array_get(cur, strtoul(tok, NULL, 10)) : json_object_get(cur, tok);
		cr_assert_not_null(cur, "no %s in %s", path, base_json);
		tok = next;
	}
	char *out = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	cr_assert_not_null(out);
	return out;
}

static void expect_reject(decode_fn dec, const char *json, const char *needle)
{
	airlock_error err = { 0 };
	int r = dec(json, strlen(json), &err);
	cr_assert_eq(r, airlock_errcode(AIRLOCK_ERR_DECODE), "accepted (r=%d): %s", r, json);
	cr_assert_eq(err.cls, AIRLOCK_ERR_DECODE);
	cr_assert_not_null(strstr(err.message, needle), "message \"%s\" does not contain \"%s\" for %s",
			   err.message, needle, json);
}

static void expect_reject_mut(decode_fn dec, const char *base_json, const char *path,
			      const char *value_json, const char *needle)
{
	char *j = mutate(base_json, path, value_json);
	expect_reject(dec, j, needle);
	free(j);
}

static void expect_accept(decode_fn dec, const char *json)
{
	airlock_error err = { 0 };
	cr_assert_eq(dec(json, strlen(json), &err), 0, "%s: %s", json, err.message);
}

static void expect_accept_mut(decode_fn dec, const char *base_json, const char *path, const char *value_json)
{
	char *j = mutate(base_json, path, value_json);
	expect_accept(dec, j);
	free(j);
}

static char *dup(const char *s)
{
	char *d = strdup(s);
	cr_assert_not_null(d);
	return d;
}

static unsigned char *dupmem(const void *p, size_t n)
{
	unsigned char *d = malloc(n ? n : 1);
	cr_assert_not_null(d);
	memcpy(d, p, n);
	return d;
}

/* ---- the bases themselves are valid -------------------------------------- */

Test(decode, bases_are_valid)
{
	for (size_t i = 0; i < NELEM(bases); i++)
		expect_accept(bases[i].dec, bases[i].json);
}

/* ---- round trips ---------------------------------------------------------
 * Each: encode, decode, compare field by field, encode again and require the
 * same text. */

#define ROUNDTRIP(prefix, in, out)                                                                 \
	do {                                                                                       \
		airlock_error err_ = { 0 };                                                        \
		char *j1_ = airlock_##prefix##_to_json((in), &err_);                              \
		cr_assert_not_null(j1_, "encode: %s", err_.message);                              \
		memset((out), 0, sizeof(*(out)));                                                  \
		cr_assert_eq(airlock_##prefix##_from_json(j1_, strlen(j1_), (out), &err_), 0,      \
			     "decode %s: %s", j1_, err_.message);                                  \
		char *j2_ = airlock_##prefix##_to_json((out), &err_);                             \
		cr_assert_not_null(j2_, "re-encode: %s", err_.message);                           \
		cr_assert_str_eq(j1_, j2_);                                                        \
		free(j1_);                                                                         \
		free(j2_);                                                                         \
	} while (0)

static void eq_str0(const char *a, const char *b, const char *what)
{
	if (!a || !b)
		cr_assert(a == b, "%s: one side is NULL", what);
	else
		cr_assert_str_eq(a, b, "%s", what);
}

static void eq_bytes(const unsigned char *a, size_t an, const unsigned char *b, size_t bn, const char *what)
{
	cr_assert_eq(an, bn, "%s: length %zu != %zu", what, an, bn);
	if (an)
		cr_assert(memcmp(a, b, an) == 0, "%s: bytes differ", what);
}

static const airlock_resource_limits good_limits = {
	.cpu_millicores = 2000, .memory_bytes = 2LL << 30, .pids_max = 512,
	.workspace_bytes = 4LL << 30, .inodes_max = 100000, .wall_clock_seconds = INT64_MAX,
};

static void eq_limits(const airlock_resource_limits *a, const airlock_resource_limits *b)
{
	cr_assert(memcmp(a, b, sizeof(*a)) == 0, "limits differ");
}

Test(roundtrip, limits)
{
	airlock_resource_limits out;
	ROUNDTRIP(resource_limits, &good_limits, &out);
	eq_limits(&good_limits, &out);
}

static void add_destination(airlock_egress_policy *p, const char *host, const uint16_t *ports, size_t n)
{
	p->destinations = reallocarray(p->destinations, p->n_destinations + 1, sizeof(*p->destinations));
	cr_assert_not_null(p->destinations);
	airlock_egress_destination *d = &p->destinations[p->n_destinations++];
	d->host = dup(host);
	d->ports = calloc(n, sizeof(*d->ports));
	memcpy(d->ports, ports, n * sizeof(*ports));
	d->n_ports = n;
}

static void eq_egress(const airlock_egress_policy *a, const airlock_egress_policy *b)
{
	cr_assert_eq(a->mode, b->mode);
	cr_assert_eq(a->n_destinations, b->n_destinations);
	for (size_t i = 0; i < a->n_destinations; i++) {
		cr_assert_str_eq(a->destinations[i].host, b->destinations[i].host);
		cr_assert_eq(a->destinations[i].n_ports, b->destinations[i].n_ports);
		for (size_t j = 0; j < a->destinations[i].n_ports; j++)
			cr_assert_eq(a->destinations[i].ports[j], b->destinations[i].ports[j]);
	}
}

Test(roundtrip, egress)
{
	airlock_egress_policy deny = { .mode = AIRLOCK_EGRESS_DENY }, out;
	ROUNDTRIP(egress_policy, &deny, &out);
	eq_egress(&deny, &out);
	airlock_egress_policy_clear(&out);

	airlock_egress_policy allow = { .mode = AIRLOCK_EGRESS_ALLOWLIST };
	const uint16_t p1[] = { 443 }, p2[] = { 1, 8080, 65535 };
	add_destination(&allow, "pypi.org", p1, 1);
	add_destination(&allow, "*.pythonhosted.org", p2, 3);
	ROUNDTRIP(egress_policy, &allow, &out);
	eq_egress(&allow, &out);
	airlock_egress_policy_clear(&out);
	airlock_egress_policy_clear(&allow);

	/* The wire shape the allowlist grammar's users will see. */
	char *j = airlock_egress_policy_to_json(&deny, NULL);
	cr_assert_str_eq(j, "{\"mode\":\"deny\",\"destinations\":[]}");
	free(j);
}

Test(roundtrip, bridge)
{
	airlock_bridge_endpoint b = { .socket_path = dup("/run/bridge.sock"), .token = dup("t\xc3\xa9") }, out;
	ROUNDTRIP(bridge_endpoint, &b, &out);
	cr_assert_str_eq(out.socket_path, b.socket_path);
	cr_assert_str_eq(out.token, b.token);
	bridge_clear(&out);
	bridge_clear(&b);
}

static void make_spec(airlock_environment_spec *s, bool bridge, bool allowlist)
{
	*s = (airlock_environment_spec){
		.tenant_id = dup("tenant-1"), .run_id = dup("run-1"), .lease_epoch = 0,
		.image_digest = dup("sha256:" HEX64), .limits = good_limits,
		.egress = { .mode = allowlist ? AIRLOCK_EGRESS_ALLOWLIST : AIRLOCK_EGRESS_DENY },
	};
	if (allowlist) {
		const uint16_t p[] = { 443 };
		add_destination(&s->egress, "api.example.com", p, 1);
	}
	cr_assert_eq(airlock_env_add(&s->environment, "HOME", "/workspace"), 0);
	cr_assert_eq(airlock_env_add(&s->environment, "EMPTY", ""), 0);
	cr_assert_eq(airlock_env_add(&s->environment, "GREETING", "h\xc3\xa9llo \"w\"\n\t\xe2\x82\xac"), 0);
	if (bridge) {
		s->bridge = calloc(1, sizeof(*s->bridge));
		s->bridge->socket_path = dup("/run/airlock/bridge.sock");
		s->bridge->token = dup("one-time");
	}
}

static void eq_spec(const airlock_environment_spec *a, const airlock_environment_spec *b)
{
	cr_assert_str_eq(a->tenant_id, b->tenant_id);
	cr_assert_str_eq(a->run_id, b->run_id);
	cr_assert_eq(a->lease_epoch, b->lease_epoch);
	cr_assert_str_eq(a->image_digest, b->image_digest);
	eq_limits(&a->limits, &b->limits);
	eq_egress(&a->egress, &b->egress);
	cr_assert_eq(a->environment.n, b->environment.n);
	for (size_t i = 0; i < a->environment.n; i++) {
		cr_assert_str_eq(a->environment.vars[i].name, b->environment.vars[i].name, "order kept");
		cr_assert_str_eq(a->environment.vars[i].value, b->environment.vars[i].value);
	}
	cr_assert_eq(!a->bridge, !b->bridge);
	if (a->bridge) {
		cr_assert_str_eq(a->bridge->socket_path, b->bridge->socket_path);
		cr_assert_str_eq(a->bridge->token, b->bridge->token);
	}
}

Test(roundtrip, spec_variants)
{
	for (int br = 0; br < 2; br++)
		for (int al = 0; al < 2; al++) {
			airlock_environment_spec s, out;
			make_spec(&s, br, al);
			ROUNDTRIP(environment_spec, &s, &out);
			eq_spec(&s, &out);
			airlock_environment_spec_clear(&out);
			airlock_environment_spec_clear(&s);
		}
}

Test(roundtrip, spec_wire_shape)
{
	airlock_environment_spec s;
	make_spec(&s, false, true);
	char *j = airlock_environment_spec_to_json(&s, NULL);
	cr_assert_not_null(j);
	json_t *o = parse_any(j);
	cr_assert(json_is_null(json_object_get(o, "bridge")), "no bridge is an explicit null");
	json_t *env = json_object_get(o, "environment");
	cr_assert(json_is_object(env), "environment is an object of name to value");
	cr_assert_str_eq(json_string_value(json_object_get(env, "HOME")), "/workspace");
	json_t *d0 = json_array_get(json_object_get(json_object_get(o, "egress"), "destinations"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(d0, "host")), "api.example.com");
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(d0, "ports"), 0)), 443);
	cr_assert_eq(json_object_size(o), 8);
	json_decref(o);
	free(j);
	airlock_environment_spec_clear(&s);
}

Test(roundtrip, handle)
{
	airlock_environment_handle h = { .tenant_id = dup("t"), .run_id = dup("r"), .lease_epoch = 42,
					 .created_at_ms = 1764459244123, .expires_at_ms = 1764461044123 },
				   out;
	strcpy(h.environment_id, "env_0123456789abcdef0123456789abcdef");
	ROUNDTRIP(environment_handle, &h, &out);
	cr_assert_str_eq(out.environment_id, h.environment_id);
	cr_assert_str_eq(out.tenant_id, "t");
	cr_assert_str_eq(out.run_id, "r");
	cr_assert_eq(out.lease_epoch, 42);
	cr_assert_eq(out.created_at_ms, h.created_at_ms);
	cr_assert_eq(out.expires_at_ms, h.expires_at_ms);
	char *j = airlock_environment_handle_to_json(&h, NULL);
	cr_assert_not_null(strstr(j, "\"created_at\":\"2025-11-29T23:34:04.123Z\""), "%s", j);
	free(j);
	airlock_environment_handle_clear(&out);
	airlock_environment_handle_clear(&h);
}

static void eq_cmd(const airlock_execution_command *a, const airlock_execution_command *b)
{
	cr_assert_eq(a->argc, b->argc);
	for (size_t i = 0; i < a->argc; i++)
		cr_assert_str_eq(a->argv[i], b->argv[i]);
	cr_assert_null(b->argv[b->argc], "argv is NULL-terminated");
	cr_assert_str_eq(a->working_directory, b->working_directory);
	cr_assert_eq(a->timeout_seconds, b->timeout_seconds);
	cr_assert_eq(a->has_stdin, b->has_stdin);
	eq_bytes(a->stdin_data, a->stdin_len, b->stdin_data, b->stdin_len, "stdin");
	cr_assert_eq(a->maximum_output_bytes, b->maximum_output_bytes);
}

static void make_cmd(airlock_execution_command *c, int stdin_variant)
{
	static const unsigned char bin[] = { 0x00, 0xff, 'a', 0x00, 0xfe, 0x80, '\n' };
	*c = (airlock_execution_command){ .argc = 4, .working_directory = dup("sub/dir"),
					  .timeout_seconds = 30, .maximum_output_bytes = 1 << 20 };
	c->argv = calloc(5, sizeof(char *));
	c->argv[0] = dup("bash");
	c->argv[1] = dup("-lc");
	c->argv[2] = dup("pytest -q && echo \"ok \xe2\x9c\x93\"");
	c->argv[3] = dup("");
	if (stdin_variant == 1) {
		c->has_stdin = true; /* present but empty is not the same as absent */
	} else if (stdin_variant == 2) {
		c->has_stdin = true;
		c->stdin_data = dupmem(bin, sizeof(bin));
		c->stdin_len = sizeof(bin);
	}
}

Test(roundtrip, command_stdin_variants)
{
	for (int v = 0; v < 3; v++) {
		airlock_execution_command c, out;
		make_cmd(&c, v);
		ROUNDTRIP(execution_command, &c, &out);
		eq_cmd(&c, &out);
		airlock_execution_command_clear(&out);
		airlock_execution_command_clear(&c);
	}
	airlock_execution_command c;
	make_cmd(&c, 0);
	char *j = airlock_execution_command_to_json(&c, NULL);
	cr_assert_not_null(strstr(j, "\"stdin\":null"), "%s", j);
	free(j);
	airlock_execution_command_clear(&c);
	make_cmd(&c, 2);
	j = airlock_execution_command_to_json(&c, NULL);
	cr_assert_not_null(strstr(j, "\"stdin\":\"AP9hAP6ACg==\""), "%s", j);
	free(j);
	airlock_execution_command_clear(&c);
}

static void eq_fc(const airlock_file_change *a, const airlock_file_change *b)
{
	cr_assert_str_eq(a->path, b->path);
	cr_assert_eq(a->change, b->change);
	cr_assert_eq(a->kind, b->kind);
	cr_assert_eq(a->size_bytes, b->size_bytes);
	cr_assert_eq(a->has_sha256, b->has_sha256);
	if (a->has_sha256)
		cr_assert_str_eq(a->sha256, b->sha256);
}

static void make_fc(airlock_file_change *f, airlock_change_kind k, const char *path)
{
	*f = (airlock_file_change){ .path = dup(path), .change = k, .kind = AIRLOCK_FILE_REGULAR,
	                            .size_bytes = k == AIRLOCK_CHANGE_DELETED ? 0 : 77 };
	if (k != AIRLOCK_CHANGE_DELETED) {
		f->has_sha256 = true;
		strcpy(f->sha256, HEX64);
	}
}

Test(roundtrip, file_change_every_entry_kind)
{
	for (int k = AIRLOCK_FILE_REGULAR; k < AIRLOCK_FILE__MAX; k++) {
		airlock_file_change f, out;
		make_fc(&f, AIRLOCK_CHANGE_MODIFIED, "x");
		f.kind = (airlock_file_kind)k;
		ROUNDTRIP(file_change, &f, &out);
		eq_fc(&f, &out);
		char *j = airlock_file_change_to_json(&f, NULL);
		char want[64];
		snprintf(want, sizeof(want), "\"kind\":\"%s\"", airlock_file_kind_name(f.kind));
		cr_assert_not_null(strstr(j, want), "%s", j);
		free(j);
		airlock_file_change_clear(&out);
		airlock_file_change_clear(&f);
	}
	/* An invalid kind is refused by the encoder. */
	airlock_file_change f;
	make_fc(&f, AIRLOCK_CHANGE_CREATED, "x");
	f.kind = AIRLOCK_FILE_INVALID;
	airlock_error err = { 0 };
	cr_assert_null(airlock_file_change_to_json(&f, &err));
	cr_assert_not_null(strstr(err.message, "FileChange.kind"), "%s", err.message);
	airlock_file_change_clear(&f);
}

/* The text form of a path: names written as they are, everything else byte
 * by byte as U+FFFD + two hex digits, decoded back to the exact bytes. */
static char *fc_path_json(const char *path)
{
	airlock_file_change f;
	make_fc(&f, AIRLOCK_CHANGE_CREATED, path);
	airlock_error err = { 0 };
	char *j = airlock_file_change_to_json(&f, &err);
	cr_assert_not_null(j, "%s", err.message);
	json_t *o = json_loads(j, 0, NULL);
	cr_assert_not_null(o);
	char *text = dup(json_string_value(json_object_get(o, "path")));
	json_decref(o);
	airlock_file_change out;
	cr_assert_eq(airlock_file_change_from_json(j, strlen(j), &out, &err), 0, "%s: %s", j,
	             err.message);
	cr_assert_str_eq(out.path, path, "the bytes come back");
	airlock_file_change_clear(&out);
	airlock_file_change_clear(&f);
	free(j);
	return text;
}

#define FFFD_ "\xef\xbf\xbd"

Test(path_text, names_that_read_as_they_are_stay_so)
{
	const char *plain[] = { "out/data.csv", "dir/\xc3\xa9t\xc3\xa9.txt", "a\\x41 b", "\xf0\x9f\x98\x80",
		                "caf\\xe9.txt", "tab\\t" };
	for (size_t i = 0; i < NELEM(plain); i++) {
		char *t = fc_path_json(plain[i]);
		cr_assert_str_eq(t, plain[i]);
		free(t);
	}
}

Test(path_text, escapes_are_exact)
{
	struct {
		const char *name, *text;
	} cases[] = {
		{ "caf\xe9.txt", "caf" FFFD_ "e9.txt" },
		{ "caf\xe8.txt", "caf" FFFD_ "e8.txt" },
		/* a real U+FFFD is escaped too, so it never reads as an escape */
		{ "caf" FFFD_ ".txt", "caf" FFFD_ "ef" FFFD_ "bf" FFFD_ "bd.txt" },
		{ "line\nbreak", "line" FFFD_ "0abreak" },
		{ "esc\x1b[31m", "esc" FFFD_ "1b[31m" },
		{ "del\x7f", "del" FFFD_ "7f" },
		{ "c1\xc2\x9b", "c1" FFFD_ "c2" FFFD_ "9b" },
		{ "rlo\xe2\x80\xaetxt.exe", "rlo" FFFD_ "e2" FFFD_ "80" FFFD_ "aetxt.exe" },
		{ "\xff\xfe", FFFD_ "ff" FFFD_ "fe" },
		{ "\xed\xa0\x80", FFFD_ "ed" FFFD_ "a0" FFFD_ "80" }, /* a surrogate */
	};
	for (size_t i = 0; i < NELEM(cases); i++) {
		char *t = fc_path_json(cases[i].name);
		cr_assert_str_eq(t, cases[i].text, "case %zu", i);
		free(t);
	}
}

/* Generated names: every byte value in every position class, and random
 * byte strings; no two names share a text form, each decodes back. */
Test(path_text, generated_names_round_trip_and_never_collide)
{
	enum { N = 2000 };
	char **texts = calloc(N, sizeof(char *));
	char **names = calloc(N, sizeof(char *));
	uint32_t seed = 12345;
	size_t n = 0;
	for (int b = 1; b < 256; b++, n++) {
		char name[8] = { 'x', (char)b, 'y', 0 };
		names[n] = dup(name);
	}
	while (n < N) {
		char name[24];
		size_t len = 1 + (seed % 20);
		for (size_t k = 0; k < len; k++) {
			seed = seed * 1103515245u + 12345u;
			unsigned v = (seed >> 16) & 0xff;
			/* weight towards the interesting bytes */
			name[k] = (char)(v % 3 == 0 ? 0xef + (v % 17) : v == 0 ? 'a' : v);
		}
		name[len] = 0;
		if (name[0] == '/')
			name[0] = 'a';
		names[n++] = dup(name);
	}
	for (size_t i = 0; i < N; i++)
		texts[i] = fc_path_json(names[i]);
	for (size_t i = 0; i < N; i++)
		for (size_t j = i + 1; j < N; j++)
			if (strcmp(names[i], names[j]) != 0)
				cr_assert(strcmp(texts[i], texts[j]) != 0, "names %zu and %zu share a form", i, j);
	for (size_t i = 0; i < N; i++) {
		free(texts[i]);
		free(names[i]);
	}
	free(texts);
	free(names);
}

Test(path_text, decoder_takes_only_the_canonical_form)
{
	const char *fc = FC_JSON;
	/* U+FFFD not followed by two lowercase hex digits */
	expect_reject_mut(dec_file_change, fc, "path", "\"a\xef\xbf\xbd\"", "FileChange.path: U+FFFD");
	expect_reject_mut(dec_file_change, fc, "path", "\"a\xef\xbf\xbd" "4\"", "FileChange.path: U+FFFD");
	expect_reject_mut(dec_file_change, fc, "path", "\"a\xef\xbf\xbd" "E9\"", "FileChange.path: U+FFFD");
	/* an escape of a byte that needs none */
	expect_reject_mut(dec_file_change, fc, "path", "\"\xef\xbf\xbd" "61\"", "canonical");
	/* an escaped UTF-8 sequence that is well-formed and plain */
	expect_reject_mut(dec_file_change, fc, "path", "\"\xef\xbf\xbd" "c3\xef\xbf\xbd" "a9\"", "canonical");
	/* a control character not escaped (JSON can carry it; the form may not) */
	expect_reject_mut(dec_file_change, fc, "path", "\"a\\nb\"", "canonical");
	expect_reject_mut(dec_file_change, fc, "path", "\"\xef\xbf\xbd" "00\"", "NUL");
	expect_reject_mut(dec_file_change, fc, "path", "\"\xef\xbf\xbd" "2fetc\"", "canonical");
	expect_reject_mut(dec_file_change, fc, "path", "\"/etc\"", "relative");
	expect_reject_mut(dec_file_change, fc, "kind", "\"DIRECTORY\"", "FileChange.kind");
	expect_reject_mut(dec_file_change, fc, "kind", "null", "FileChange.kind");
}

Test(roundtrip, file_change_kinds)
{
	for (int k = AIRLOCK_CHANGE_CREATED; k < AIRLOCK_CHANGE__MAX; k++) {
		airlock_file_change f, out;
		make_fc(&f, (airlock_change_kind)k, "dir/\xc3\xa9t\xc3\xa9.txt");
		ROUNDTRIP(file_change, &f, &out);
		eq_fc(&f, &out);
		char *j = airlock_file_change_to_json(&f, NULL);
		if (k == AIRLOCK_CHANGE_DELETED)
			cr_assert_not_null(strstr(j, "\"sha256\":null"), "%s", j);
		free(j);
		airlock_file_change_clear(&out);
		airlock_file_change_clear(&f);
	}
}

static void eq_result(const airlock_execution_result *a, const airlock_execution_result *b)
{
	cr_assert_eq(a->has_exit_code, b->has_exit_code);
	if (a->has_exit_code)
		cr_assert_eq(a->exit_code, b->exit_code);
	eq_bytes(a->stdout_data, a->stdout_len, b->stdout_data, b->stdout_len, "stdout");
	eq_bytes(a->stderr_data, a->stderr_len, b->stderr_data, b->stderr_len, "stderr");
	cr_assert_eq(a->stdout_truncated, b->stdout_truncated);
	cr_assert_eq(a->stderr_truncated, b->stderr_truncated);
	cr_assert_eq(a->timed_out, b->timed_out);
	cr_assert_eq(a->killed_by, b->killed_by);
	cr_assert_eq(a->n_files_changed, b->n_files_changed);
	for (size_t i = 0; i < a->n_files_changed; i++)
		eq_fc(&a->files_changed[i], &b->files_changed[i]);
	cr_assert_eq(a->files_changed_truncated, b->files_changed_truncated);
	cr_assert_eq(a->duration_ms, b->duration_ms);
}

static const unsigned char binary_out[] = { 'o', 'k', 0x00, 0xff, 0xfe, 0x00, 0xc3, 0x28, '\n', 0x00 };

static void make_result(airlock_execution_result *r, airlock_kill_reason kill)
{
	*r = (airlock_execution_result){
		.has_exit_code = kill == AIRLOCK_KILL_NONE,
		.exit_code = kill == AIRLOCK_KILL_NONE ? -3 : 0,
		.stdout_data = dupmem(binary_out, sizeof(binary_out)),
		.stdout_len = sizeof(binary_out),
		.stdout_truncated = true,
		.timed_out = kill == AIRLOCK_KILL_TIMEOUT,
		.killed_by = kill,
		.files_changed_truncated = kill == AIRLOCK_KILL_DISK,
		.duration_ms = 1840,
	};
	r->files_changed = calloc(3, sizeof(*r->files_changed));
	make_fc(&r->files_changed[0], AIRLOCK_CHANGE_CREATED, "a.csv");
	make_fc(&r->files_changed[1], AIRLOCK_CHANGE_MODIFIED, "b/c.txt");
	make_fc(&r->files_changed[2], AIRLOCK_CHANGE_DELETED, "gone");
	r->n_files_changed = 3;
}

Test(roundtrip, result_every_kill_reason_and_binary_output)
{
	for (int k = AIRLOCK_KILL_NONE; k < AIRLOCK_KILL__MAX; k++) {
		airlock_execution_result r, out;
		make_result(&r, (airlock_kill_reason)k);
		ROUNDTRIP(execution_result, &r, &out);
		eq_result(&r, &out);
		airlock_execution_result_clear(&out);
		airlock_execution_result_clear(&r);
	}
	/* Empty output, no files, a large exit code. */
	airlock_execution_result r = { .has_exit_code = true, .exit_code = INT_MAX }, out;
	ROUNDTRIP(execution_result, &r, &out);
	eq_result(&r, &out);
	airlock_execution_result_clear(&out);
	r.exit_code = INT_MIN;
	ROUNDTRIP(execution_result, &r, &out);
	eq_result(&r, &out);
	airlock_execution_result_clear(&out);
}

Test(roundtrip, result_nullable_fields_encode_as_null)
{
	airlock_execution_result r;
	make_result(&r, AIRLOCK_KILL_MEMORY);
	char *j = airlock_execution_result_to_json(&r, NULL);
	cr_assert_not_null(j);
	json_t *o = parse_any(j);
	cr_assert(json_is_null(json_object_get(o, "exit_code")));
	cr_assert_str_eq(json_string_value(json_object_get(o, "killed_by")), "MEMORY");
	cr_assert(json_is_false(json_object_get(o, "timed_out")));
	json_decref(o);
	free(j);
	airlock_execution_result_clear(&r);
	make_result(&r, AIRLOCK_KILL_NONE);
	j = airlock_execution_result_to_json(&r, NULL);
	o = parse_any(j);
	cr_assert(json_is_null(json_object_get(o, "killed_by")));
	cr_assert_eq(json_integer_value(json_object_get(o, "exit_code")), -3);
	json_decref(o);
	free(j);
	airlock_execution_result_clear(&r);
}

/* The charges the core's byte bound on a listing makes (caps.h,
 * AIRLOCK_FILES_CHANGED_JSON_MAX) hold for the encoder: an entry at its
 * longest, whose path is all bytes that are not text or need escaping, is
 * at most AIRLOCK_FC_JSON_ENTRY_OVERHEAD plus AIRLOCK_FC_JSON_PATH_FACTOR
 * bytes a byte, and a result's fields besides its output and its listing,
 * with the stream's framing, fit AIRLOCK_RESULT_JSON_REST_MAX. */
static size_t result_json_len(const airlock_execution_result *r)
{
	airlock_error err = { 0 };
	char *j = airlock_execution_result_to_json(r, &err);
	cr_assert_not_null(j, "%s", err.message);
	size_t n = strlen(j);
	free(j);
	return n;
}

Test(bounds, the_listing_charges_cover_the_encoding)
{
	static const unsigned char worst[] = { 0x01, 0x1f, 0x7f, 0xff, '"', '\\', 0xc2 };
	airlock_file_change fc[2];
	for (size_t k = 0; k < 2; k++) {
		char *p = malloc(AIRLOCK_FC_PATH_MAX + 1);
		cr_assert_not_null(p);
		for (size_t i = 0; i < AIRLOCK_FC_PATH_MAX; i++)
			p[i] = (char)worst[(i + k) % sizeof(worst)];
		p[AIRLOCK_FC_PATH_MAX] = 0;
		fc[k] = (airlock_file_change){ .path = p, .change = AIRLOCK_CHANGE_MODIFIED,
		                               .kind = AIRLOCK_FILE_BLOCK_DEVICE,
		                               .size_bytes = INT64_MAX, .has_sha256 = true };
		strcpy(fc[k].sha256, HEX64);
	}
	airlock_execution_result r = { .has_exit_code = true, .exit_code = INT_MIN,
		                       .duration_ms = INT64_MAX, .files_changed = fc };
	size_t none = result_json_len(&r);
	r.n_files_changed = 1;
	size_t one = result_json_len(&r);
	r.n_files_changed = 2;
	size_t two = result_json_len(&r);
	size_t charge = AIRLOCK_FC_JSON_ENTRY_OVERHEAD +
	                AIRLOCK_FC_JSON_PATH_FACTOR * (size_t)AIRLOCK_FC_PATH_MAX;
	cr_assert_leq(one - none, charge, "an entry is %zu bytes, charged %zu", one - none, charge);
	cr_assert_leq(two - one, charge, "an entry is %zu bytes, charged %zu", two - one, charge);
	/* The framing is what is left after the path's text (a quote or a
	 * backslash is two bytes of it, every other byte here five). */
	size_t text = 0;
	for (const char *c = fc[1].path; *c; c++)
		text += *c == '"' || *c == '\\' ? 2 : 5;
	cr_assert_leq(two - one - text, 163, "an entry's framing is %zu bytes", two - one - text);
	r.n_files_changed = 0;
	r.has_exit_code = false;
	r.exit_code = 0;
	r.killed_by = AIRLOCK_KILL_OUTPUT_LIMIT;
	for (int k = AIRLOCK_KILL_NONE + 1; k < AIRLOCK_KILL__MAX; k++) {
		r.killed_by = (airlock_kill_reason)k;
		r.timed_out = k == AIRLOCK_KILL_TIMEOUT;
		r.stdout_truncated = r.stderr_truncated = r.files_changed_truncated = true;
		size_t rest = result_json_len(&r) + strlen("{\"event\":\"result\",\"result\":}\n");
		cr_assert_leq(rest, AIRLOCK_RESULT_JSON_REST_MAX);
	}
	cr_assert_leq(none + strlen("{\"event\":\"result\",\"result\":}\n"),
	              AIRLOCK_RESULT_JSON_REST_MAX);
	for (size_t k = 0; k < 2; k++)
		free(fc[k].path);
}

static void eq_meta(const airlock_artifact_metadata *a, const airlock_artifact_metadata *b)
{
	cr_assert_str_eq(a->tenant_id, b->tenant_id);
	eq_str0(a->run_id, b->run_id, "run_id");
	cr_assert_eq(a->origin, b->origin);
	cr_assert_str_eq(a->filename, b->filename);
	cr_assert_str_eq(a->media_type, b->media_type);
	cr_assert_eq(a->size_bytes, b->size_bytes);
	cr_assert_str_eq(a->sha256, b->sha256);
	cr_assert_eq(a->trust, b->trust);
	cr_assert_eq(a->created_at_ms, b->created_at_ms);
	cr_assert_eq(a->has_expires_at, b->has_expires_at);
	if (a->has_expires_at)
		cr_assert_eq(a->expires_at_ms, b->expires_at_ms);
}

Test(roundtrip, metadata_every_origin_trust_and_nulls)
{
	for (int o = AIRLOCK_ORIGIN_SANDBOX_EXPORT; o < AIRLOCK_ORIGIN__MAX; o++)
		for (int t = AIRLOCK_TRUST_INTERNAL_TOOL; t < AIRLOCK_TRUST__MAX; t++)
			for (int nulls = 0; nulls < 2; nulls++) {
				airlock_artifact_metadata m = {
					.tenant_id = dup("tenant"), .run_id = nulls ? NULL : dup("run"),
					.origin = (airlock_artifact_origin)o, .filename = dup("../../etc/passwd"),
					.media_type = dup("text/csv"), .size_bytes = 1LL << 40,
					.trust = (airlock_trust_level)t, .created_at_ms = 253402300799999,
					.has_expires_at = !nulls, .expires_at_ms = nulls ? 0 : 1,
				},
							  out;
				strcpy(m.sha256, HEX64B);
				ROUNDTRIP(artifact_metadata, &m, &out);
				eq_meta(&m, &out);
				if (nulls) {
					char *j = airlock_artifact_metadata_to_json(&m, NULL);
					cr_assert_not_null(strstr(j, "\"run_id\":null"), "%s", j);
					cr_assert_not_null(strstr(j, "\"expires_at\":null"), "%s", j);
					free(j);
				}
				airlock_artifact_metadata_clear(&out);
				airlock_artifact_metadata_clear(&m);
			}
}

Test(roundtrip, artifact_ref)
{
	airlock_artifact_ref a = { .size_bytes = 0, .media_type = dup("application/octet-stream") }, out;
	cr_assert_eq(airlock_uuidv7_new(a.artifact_id, NULL), 0);
	strcpy(a.sha256, HEX64);
	ROUNDTRIP(artifact_ref, &a, &out);
	cr_assert_str_eq(out.artifact_id, a.artifact_id);
	cr_assert_str_eq(out.sha256, a.sha256);
	cr_assert_eq(out.size_bytes, 0);
	cr_assert_str_eq(out.media_type, a.media_type);
	airlock_artifact_ref_clear(&out);
	airlock_artifact_ref_clear(&a);
}

Test(roundtrip, error_every_class)
{
	for (int c = 0; c < AIRLOCK_ERR__MAX; c++) {
		airlock_error e = { 0 }, out;
		airlock_error_set(&e, (airlock_errclass)c, 0, "class %d: r\xc3\xa9sum\xc3\xa9 \"quoted\"", c);
		ROUNDTRIP(error, &e, &out);
		cr_assert_eq(out.cls, (airlock_errclass)c);
		cr_assert_str_eq(out.message, e.message);
		char *j = airlock_error_to_json(&e, NULL);
		char needle[64];
		snprintf(needle, sizeof(needle), "\"error\":\"%s\"", airlock_errclass_name((airlock_errclass)c));
		cr_assert_not_null(strstr(j, needle), "%s", j);
		free(j);
	}
}

Test(roundtrip, error_message_made_well_formed)
{
	/* A message cut inside a character, or quoting raw bytes, still travels. */
	airlock_error e = { .cls = AIRLOCK_ERR_SYSTEM };
	strcpy(e.message, "bad \xff byte and a cut \xe2\x82");
	char *j = airlock_error_to_json(&e, NULL);
	cr_assert_not_null(j);
	airlock_error out;
	cr_assert_eq(airlock_error_from_json(j, strlen(j), &out, NULL), 0);
	cr_assert_str_eq(out.message, "bad \xef\xbf\xbd byte and a cut \xef\xbf\xbd");
	free(j);
}

Test(decode, error_long_message_cut_at_character)
{
	/* Two-byte characters from offset 0: the local buffer's last byte
	 * (offset 511) falls on the second byte of a character. */
	char msg[2000];
	size_t n = 0;
	while (n + 2 < sizeof(msg) - 1) {
		msg[n++] = '\xc3';
		msg[n++] = '\xa9';
	}
	msg[n] = 0;
	char *buf = malloc(n + 64);
	snprintf(buf, n + 64, "{\"error\":\"WorkspaceEscape\",\"message\":\"%s\"}", msg);
	airlock_error out;
	cr_assert_eq(airlock_error_from_json(buf, strlen(buf), &out, NULL), 0);
	cr_assert_eq(out.cls, AIRLOCK_ERR_WORKSPACE_ESCAPE);
	size_t len = strlen(out.message);
	cr_assert_leq(len, AIRLOCK_ERROR_MESSAGE_MAX - 1);
	cr_assert_eq(len, AIRLOCK_ERROR_MESSAGE_MAX - 2, "cut before the split character, got %zu", len);
	cr_assert_eq((unsigned char)out.message[len - 1], 0xa9, "ends with a whole character");
	char *again = airlock_error_to_json(&out, NULL);
	cr_assert_not_null(again);
	free(again);
	free(buf);
}

/* ---- strict decoding: generic sweeps over every base --------------------- */

Test(decode, every_field_missing)
{
	for (size_t b = 0; b < NELEM(bases); b++) {
		json_t *o = parse_any(bases[b].json);
		const char *key;
		json_t *v;
		size_t count = 0;
		json_object_foreach(o, key, v) {
			char needle[128];
			snprintf(needle, sizeof(needle), "%s.%s: missing", bases[b].type, key);
			expect_reject_mut(bases[b].dec, bases[b].json, key, NULL, needle);
			count++;
		}
		cr_assert_gt(count, 1);
		json_decref(o);
	}
}

Test(decode, resource_limits_each_field_missing)
{
	/* The spec's rule in the words of the brief: no limit has a default. */
	const char *f[] = { "cpu_millicores", "memory_bytes", "pids_max", "workspace_bytes", "inodes_max",
			    "wall_clock_seconds" };
	for (size_t i = 0; i < NELEM(f); i++) {
		char needle[128];
		snprintf(needle, sizeof(needle), "ResourceLimits.%s: missing", f[i]);
		expect_reject_mut(dec_resource_limits, LIMITS_JSON, f[i], NULL, needle);
		char path[64];
		snprintf(path, sizeof(path), "limits/%s", f[i]);
		snprintf(needle, sizeof(needle), "EnvironmentSpec.limits: ResourceLimits.%s: missing", f[i]);
		expect_reject_mut(dec_environment_spec, SPEC_JSON, path, NULL, needle);
		/* and zero is not a stand-in for unlimited */
		expect_reject_mut(dec_resource_limits, LIMITS_JSON, f[i], "0", f[i]);
	}
}

Test(decode, unknown_field_everywhere)
{
	for (size_t b = 0; b < NELEM(bases); b++) {
		char needle[128];
		snprintf(needle, sizeof(needle), "%s.surprise: unknown field", bases[b].type);
		expect_reject_mut(bases[b].dec, bases[b].json, "surprise", "1", needle);
	}
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "limits/gpu", "1",
			  "EnvironmentSpec.limits: ResourceLimits.gpu: unknown field");
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "egress/destinations/0/scheme", "\"https\"",
			  "EgressDestination.scheme: unknown field");
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "bridge/host_path", "\"/var/run\"",
			  "BridgeEndpoint.host_path: unknown field");
	expect_reject_mut(dec_execution_result, RESULT_JSON, "files_changed/0/mode", "\"0644\"",
			  "ExecutionResult.files_changed[0]: FileChange.mode: unknown field");
}

/* Values of each JSON type, to put where a field wants a different one. */
static const char *const wrong_values[] = { "\"text\"", "12", "true", "[1]", "{\"k\":[]}", "1.5", "null" };

/* The fields the specification makes optional; they travel as null. */
static bool is_nullable(const char *type, const char *key)
{
	static const char *const nullable[] = {
		"EnvironmentSpec.bridge",     "ExecutionCommand.stdin",  "FileChange.sha256",
		"ExecutionResult.exit_code",  "ExecutionResult.killed_by", "ArtifactMetadata.run_id",
		"ArtifactMetadata.expires_at",
	};
	char name[128];
	snprintf(name, sizeof(name), "%s.%s", type, key);
	for (size_t i = 0; i < NELEM(nullable); i++)
		if (strcmp(nullable[i], name) == 0)
			return true;
	return false;
}

static int kind(json_t *v)
{
	if (json_is_boolean(v))
		return JSON_TRUE;
	if (json_is_number(v))
		return JSON_INTEGER; /* a real is checked on its own below */
	return (int)json_typeof(v);
}

Test(decode, every_field_wrong_type)
{
	for (size_t b = 0; b < NELEM(bases); b++) {
		json_t *o = parse_any(bases[b].json);
		const char *key;
		json_t *v;
		json_object_foreach(o, key, v) {
			if (json_is_null(v))
				continue; /* nullable here; the other base variant has it set */
			for (size_t w = 0; w < NELEM(wrong_values); w++) {
				if (strcmp(wrong_values[w], "null") == 0 && is_nullable(bases[b].type, key))
					continue;
				json_t *wv = parse_any(wrong_values[w]);
				bool same = kind(wv) == kind(v);
				json_decref(wv);
				if (same)
					continue;
				char needle[128];
				snprintf(needle, sizeof(needle), "%s.%s", bases[b].type, key);
				expect_reject_mut(bases[b].dec, bases[b].json, key, wrong_values[w], needle);
			}
		}
		json_decref(o);
	}
}

Test(decode, every_integer_as_real_and_negative)
{
	for (size_t b = 0; b < NELEM(bases); b++) {
		json_t *o = parse_any(bases[b].json);
		const char *key;
		json_t *v;
		json_object_foreach(o, key, v) {
			if (!json_is_integer(v))
				continue;
			char needle[128], real[64];
			snprintf(needle, sizeof(needle), "%s.%s", bases[b].type, key);
			snprintf(real, sizeof(real), "%lld.0", (long long)json_integer_value(v));
			expect_reject_mut(bases[b].dec, bases[b].json, key, real, needle);
			expect_reject_mut(bases[b].dec, bases[b].json, key, "1e3", needle);
			if (strcmp(key, "exit_code") != 0)
				expect_reject_mut(bases[b].dec, bases[b].json, key, "-1", needle);
		}
		json_decref(o);
	}
	/* A negative exit code is a value, not a size. */
	expect_accept_mut(dec_execution_result, RESULT_JSON, "exit_code", "-1");
}

Test(decode, duplicate_keys)
{
	expect_reject(dec_resource_limits,
		      "{\"cpu_millicores\":1,\"memory_bytes\":1,\"pids_max\":1,\"pids_max\":4096,"
		      "\"workspace_bytes\":1,\"inodes_max\":1,\"wall_clock_seconds\":1}",
		      "duplicate");
	/* The environment mapping is an object, so a duplicate name is a
	 * duplicate key and never reaches the spec's own duplicate check. */
	char *j = mutate(SPEC_JSON, "environment", "{\"A\":\"1\"}");
	char *p = strstr(j, "{\"A\":\"1\"}");
	cr_assert_not_null(p);
	size_t off = (size_t)(p - j);
	char *k = malloc(strlen(j) + 16);
	sprintf(k, "%.*s{\"A\":\"1\",\"A\":\"2\"}%s", (int)off, j, p + strlen("{\"A\":\"1\"}"));
	expect_reject(dec_environment_spec, k, "duplicate");
	free(k);
	free(j);
}

Test(decode, not_an_object_or_not_json)
{
	const char *bad[] = { "", "[]", "1", "\"x\"", "null", "{", "{}x", "{} {}", "{\"a\":1,}", "\xff" };
	for (size_t i = 0; i < NELEM(bad); i++)
		for (size_t b = 0; b < NELEM(bases); b++)
			expect_reject(bases[b].dec, bad[i], bases[b].type);
	/* a NULL buffer with a length is refused, not dereferenced */
	airlock_resource_limits l;
	cr_assert_lt(airlock_resource_limits_from_json(NULL, 5, &l, NULL), 0);
	cr_assert_lt(airlock_resource_limits_from_json(NULL, 0, &l, NULL), 0);
}

Test(decode, input_over_the_limit)
{
	size_t n = (size_t)AIRLOCK_JSON_INPUT_MAX + 1;
	char *buf = malloc(n);
	cr_assert_not_null(buf);
	memset(buf, ' ', n);
	memcpy(buf, LIMITS_JSON, strlen(LIMITS_JSON));
	airlock_error err = { 0 };
	airlock_resource_limits l;
	cr_assert_eq(airlock_resource_limits_from_json(buf, n, &l, &err), airlock_errcode(AIRLOCK_ERR_DECODE));
	cr_assert_not_null(strstr(err.message, "limit"), "%s", err.message);
	/* exactly at the limit is parsed (trailing whitespace is fine in JSON) */
	cr_assert_eq(airlock_resource_limits_from_json(buf, n - 1, &l, &err), 0, "%s", err.message);
	free(buf);
}

Test(decode, embedded_nul_refused)
{
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "tenant_id", "\"a\\u0000b\"", "EnvironmentSpec");
	expect_reject_mut(dec_execution_command, CMD_JSON, "argv/0", "\"py\\u0000thon\"", "ExecutionCommand");
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "environment/X", "\"v\\u0000\"", "EnvironmentSpec");
	const char raw[] = "{\"path\":\"a\0b\",\"change\":\"CREATED\",\"size_bytes\":1,\"sha256\":\"" HEX64 "\"}";
	airlock_file_change f;
	cr_assert_lt(airlock_file_change_from_json(raw, sizeof(raw) - 1, &f, NULL), 0, "raw NUL byte");
}

Test(decode, bad_base64)
{
	const char *bad[] = { "\"abc\"", "\"ab=c\"", "\"YW Jj\"", "\"YWJj\\n\"", "\"####\"", "\"YQ\"",
			      "\"YQ===\"", "\"-_==\"", "\"=YWJ\"" };
	for (size_t i = 0; i < NELEM(bad); i++) {
		expect_reject_mut(dec_execution_result, RESULT_JSON, "stdout", bad[i], "ExecutionResult.stdout: must be base64");
		expect_reject_mut(dec_execution_result, RESULT_JSON, "stderr", bad[i], "ExecutionResult.stderr: must be base64");
		expect_reject_mut(dec_execution_command, CMD_JSON, "stdin", bad[i], "ExecutionCommand.stdin: must be base64");
	}
}

Test(decode, bad_timestamps)
{
	const char *bad[] = {
		"\"2026-02-30T00:00:00.000Z\"", "\"2026-01-01 00:00:00.000Z\"", "\"2026-01-01T00:00:00+01:00\"",
		"\"2026-01-01T00:00:00.000\"",  "\"2026-01-01T24:00:00.000Z\"", "\"2026-01-01T00:00:60.000Z\"",
		"\"1969-12-31T23:59:59.999Z\"", "\"2026-01-01\"",               "\"\"",
		"\"2026-01-01T00:00:00.1Z\"",   "1764459244123",                "\"2026-13-01T00:00:00.000Z\"",
	};
	for (size_t i = 0; i < NELEM(bad); i++) {
		expect_reject_mut(dec_environment_handle, HANDLE_JSON, "created_at", bad[i], "EnvironmentHandle.created_at");
		expect_reject_mut(dec_environment_handle, HANDLE_JSON, "expires_at", bad[i], "EnvironmentHandle.expires_at");
		expect_reject_mut(dec_artifact_metadata, META_JSON, "created_at", bad[i], "ArtifactMetadata.created_at");
		expect_reject_mut(dec_artifact_metadata, META_JSON, "expires_at", bad[i], "ArtifactMetadata.expires_at");
	}
	/* the seconds-only form is accepted (util_time_parse's contract) */
	expect_accept_mut(dec_artifact_metadata, META_JSON, "expires_at", "\"2026-12-29T23:34:04Z\"");
	/* a handle cannot expire before it was created */
	expect_reject_mut(dec_environment_handle, HANDLE_JSON, "expires_at", "\"2026-11-29T23:34:04.122Z\"",
			  "EnvironmentHandle.expires_at");
}

Test(decode, invalid_enum_strings)
{
	expect_reject_mut(dec_execution_result, RESULT_KILLED_JSON, "killed_by", "\"timeout\"", "ExecutionResult.killed_by");
	expect_reject_mut(dec_execution_result, RESULT_KILLED_JSON, "killed_by", "\"KILLED\"", "ExecutionResult.killed_by");
	expect_reject_mut(dec_execution_result, RESULT_KILLED_JSON, "killed_by", "\"\"", "ExecutionResult.killed_by");
	expect_reject_mut(dec_file_change, FC_JSON, "change", "\"created\"", "FileChange.change");
	expect_reject_mut(dec_file_change, FC_JSON, "change", "\"RENAMED\"", "FileChange.change");
	expect_reject_mut(dec_artifact_metadata, META_JSON, "origin", "\"upload\"", "ArtifactMetadata.origin");
	expect_reject_mut(dec_artifact_metadata, META_JSON, "trust", "\"internal_tool\"", "ArtifactMetadata.trust");
	expect_reject_mut(dec_artifact_metadata, META_JSON, "trust", "\"TRUSTED\"", "ArtifactMetadata.trust");
	expect_reject_mut(dec_egress_policy, EGRESS_JSON, "mode", "\"Allowlist\"", "EgressPolicy.mode");
	expect_reject_mut(dec_egress_policy, EGRESS_JSON, "mode", "\"allow\"", "EgressPolicy.mode");
	expect_reject_mut(dec_error, ERROR_JSON, "error", "\"NoSuchError\"", "Error.error: unknown error class");
	expect_reject_mut(dec_error, ERROR_JSON, "error", "\"executionrejected\"", "Error.error");
}

Test(decode, file_change_invariants)
{
	expect_reject_mut(dec_file_change, FC_JSON, "sha256", "null", "FileChange.sha256");
	expect_reject_mut(dec_file_change, FC_DELETED_JSON, "sha256", "\"" HEX64 "\"", "FileChange.sha256");
	expect_reject_mut(dec_file_change, FC_JSON, "sha256", "\"ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789\"",
			  "FileChange.sha256");
	expect_reject_mut(dec_file_change, FC_JSON, "sha256", "\"" HEX64 "0\"", "FileChange.sha256");
	expect_reject_mut(dec_file_change, FC_JSON, "path", "\"/etc/passwd\"", "FileChange.path");
	expect_reject_mut(dec_file_change, FC_JSON, "path", "\"\"", "FileChange.path");
	/* nested: the failing entry is named */
	expect_reject_mut(dec_execution_result, RESULT_JSON, "files_changed/1/sha256", "\"" HEX64 "\"",
			  "ExecutionResult.files_changed[1]: FileChange.sha256");
}

Test(decode, result_invariants)
{
	/* exit_code null iff killed_by set */
	expect_reject_mut(dec_execution_result, RESULT_JSON, "exit_code", "null", "ExecutionResult.exit_code");
	expect_reject_mut(dec_execution_result, RESULT_KILLED_JSON, "exit_code", "137", "ExecutionResult.exit_code");
	/* timed_out iff TIMEOUT */
	expect_reject_mut(dec_execution_result, RESULT_KILLED_JSON, "timed_out", "false", "ExecutionResult.timed_out");
	expect_reject_mut(dec_execution_result, RESULT_JSON, "timed_out", "true", "ExecutionResult.timed_out");
	char *mem = mutate(RESULT_KILLED_JSON, "killed_by", "\"MEMORY\"");
	expect_reject(dec_execution_result, mem, "ExecutionResult.timed_out");
	char *mem_ok = mutate(mem, "timed_out", "false");
	expect_accept(dec_execution_result, mem_ok);
	free(mem);
	free(mem_ok);
	expect_reject_mut(dec_execution_result, RESULT_JSON, "exit_code", "2147483648", "ExecutionResult.exit_code");
	expect_reject_mut(dec_execution_result, RESULT_JSON, "exit_code", "-2147483649", "ExecutionResult.exit_code");
	expect_reject_mut(dec_execution_result, RESULT_JSON, "files_changed/0", "\"a.txt\"",
			  "ExecutionResult.files_changed[0]: FileChange");
}

Test(decode, spec_rules)
{
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "image_digest", "\"python:3.12\"", "EnvironmentSpec.image_digest");
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "tenant_id", "\"../other\"", "EnvironmentSpec.tenant_id");
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "run_id", "\"\"", "EnvironmentSpec.run_id");
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "environment/1BAD", "\"v\"", "EnvironmentSpec.environment[2].name");
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "environment/HOME", "1", "EnvironmentSpec.environment.HOME: must be a string");
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "bridge/socket_path", "\"relative.sock\"",
			  "EnvironmentSpec.bridge: BridgeEndpoint.socket_path");
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "bridge/token", "\"\"", "EnvironmentSpec.bridge: BridgeEndpoint.token");
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "egress/mode", "\"deny\"", "EnvironmentSpec.egress: EgressPolicy.destinations");
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "egress/destinations/1/ports", "[]",
			  "EnvironmentSpec.egress: EgressPolicy.destinations[1].ports");
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "egress/destinations/0/host", "\"\"",
			  "EgressPolicy.destinations[0].host");
	expect_accept_mut(dec_environment_spec, SPEC_JSON, "bridge", "null");
	expect_accept_mut(dec_environment_spec, SPEC_JSON, "environment", "{}");
	expect_accept_mut(dec_environment_spec, SPEC_JSON, "lease_epoch", "0");
}

Test(decode, egress_ports)
{
	const char *bad[] = { "[0]", "[65536]", "[\"443\"]", "[443.0]", "[-443]", "[null]", "[443,0]", "[]", "443" };
	for (size_t i = 0; i < NELEM(bad); i++)
		expect_reject_mut(dec_egress_policy, EGRESS_JSON, "destinations/0/ports", bad[i],
				  "EgressPolicy.destinations[0]");
	expect_accept_mut(dec_egress_policy, EGRESS_JSON, "destinations/0/ports", "[1,65535]");
	expect_reject_mut(dec_egress_policy, EGRESS_JSON, "destinations/0", "\"pypi.org:443\"", "EgressDestination");
	expect_reject_mut(dec_egress_policy, EGRESS_JSON, "destinations/0/host", "null", "EgressDestination.host");
}

/*
 * One grammar for every door: a policy decoded from JSON (how a spec carries
 * it to the service and the proxy) runs the YAML parser's host, port and
 * duplicate rules. The examples first, each of which the JSON door
 * used to let in.
 */
Test(decode, egress_runs_the_grammar_rules)
{
	static const struct {
		const char *host, *why;
	} bad[] = {
		{ "\"*.com\"", "a wildcard over a public suffix" },
		{ "\"*.co.uk\"", "a wildcard over a public suffix" },
		{ "\"*.github.io\"", "a wildcard over a public suffix" },
		{ "\"A.Example.COM\"", "not in normalized form" },
		{ "\"pypi.org.\"", "not in normalized form" },
		{ "\"10.0.0.5\"", "an IP address is not a destination" },
		{ "\"[::1]\"", "an IP address is not a destination" },
		{ "\"*.*\"", "'*' may not appear anywhere else" },
		{ "\"https://pypi.org\"", "a destination has no scheme" },
		{ "\"pypi.org:443\"", "has no port" },
		{ "\"py pi.org\"", "only letters, digits" },
		{ "\"a\\u0000b.org\"", "\\u0000 is not allowed" },
	};
	for (size_t i = 0; i < NELEM(bad); i++)
		expect_reject_mut(dec_egress_policy, EGRESS_JSON, "destinations/0/host", bad[i].host,
				  bad[i].why);
	expect_reject_mut(dec_egress_policy, EGRESS_JSON, "destinations/1/host", "\"pypi.org\"",
			  "EgressPolicy.destinations[1].host: \"pypi.org\" is already destinations[0]");
	expect_reject_mut(dec_egress_policy, EGRESS_JSON, "destinations/0/ports", "[443,80,443]",
			  "EgressPolicy.destinations[0].ports[2]: port 443 is listed twice");
	expect_reject_mut(dec_egress_policy, EGRESS_JSON, "destinations", "[]",
			  "allowlist with no destinations");
	/* the spec's door is the same door */
	expect_reject_mut(dec_environment_spec, SPEC_JSON, "egress/destinations/0/host", "\"*.com.au\"",
			  "EnvironmentSpec.egress: EgressPolicy.destinations[0].host");
	expect_accept_mut(dec_egress_policy, EGRESS_JSON, "destinations/0/host", "\"*.example.co.uk\"");
	expect_accept_mut(dec_egress_policy, EGRESS_JSON, "destinations/0/host", "\"github.io\"");
}

/* Over one list of host strings: the JSON door accepts a host exactly when
 * the YAML door accepts it and normalizes it to itself (the wire carries the
 * normalized form, as the printer writes it). */
Test(decode, egress_hosts_agree_with_yaml)
{
	static const char *const hosts[] = {
		"pypi.org", "PyPI.org", "pypi.org.", "*.pythonhosted.org", "*.com", "*.co.uk",
		"*.example.co.uk", "*.github.io", "octocat.github.io", "co.uk", "10.0.0.5", "127.1",
		"0x7f.1", "[::1]", "::1", "*.*", "*", "*.", "a.*.example.com", "-a.example",
		"a_b.example", "https://pypi.org", "user@pypi.org", "pypi.org/x", "pypi.org:443",
		"localhost", "xn--bcher-kva.example", "example.123", "123.example", "", ".", "a..b",
		"*.10.0.0.1", "*.internal", "*.a.internal",
	};
	for (size_t i = 0; i < NELEM(hosts); i++) {
		const char *h = hosts[i];
		char doc[512];
		snprintf(doc, sizeof(doc),
		         "egress:\n  mode: allowlist\n  destinations:\n    - host: '%s'\n      ports: [443]\n",
		         h);
		airlock_egress_policy yp = { 0 };
		airlock_error yerr = { 0 };
		bool yaml_ok = airlock_egress_policy_parse("p.yaml", doc, strlen(doc), &yp, &yerr) == 0;
		bool yaml_same = yaml_ok && strcmp(yp.destinations[0].host, h) == 0;
		airlock_egress_policy_clear(&yp);

		json_t *o = json_pack("{s:s, s:[{s:s, s:[i]}]}", "mode", "allowlist", "destinations",
		                      "host", h, "ports", 443);
		cr_assert_not_null(o);
		char *j = json_dumps(o, JSON_COMPACT);
		json_decref(o);
		cr_assert_not_null(j);
		airlock_egress_policy jp = { 0 };
		airlock_error jerr = { 0 };
		bool json_ok = airlock_egress_policy_from_json(j, strlen(j), &jp, &jerr) == 0;
		airlock_egress_policy_clear(&jp);
		free(j);
		cr_expect_eq(json_ok, yaml_same, "\"%s\": JSON %s (%s), YAML %s (%s)", h,
		             json_ok ? "accepts" : "refuses", jerr.message,
		             yaml_ok ? "accepts" : "refuses", yerr.message);
	}
}

Test(decode, command_rules)
{
	expect_reject_mut(dec_execution_command, CMD_JSON, "argv", "[]", "ExecutionCommand.argv");
	expect_reject_mut(dec_execution_command, CMD_JSON, "argv", "\"python script.py\"", "ExecutionCommand.argv");
	expect_reject_mut(dec_execution_command, CMD_JSON, "argv/1", "7", "ExecutionCommand.argv[1]: must be a string");
	expect_reject_mut(dec_execution_command, CMD_JSON, "working_directory", "\"/etc\"", "ExecutionCommand.working_directory");
	expect_reject_mut(dec_execution_command, CMD_JSON, "working_directory", "\"\"", "ExecutionCommand.working_directory");
	expect_reject_mut(dec_execution_command, CMD_JSON, "timeout_seconds", "0", "ExecutionCommand.timeout_seconds");
	expect_reject_mut(dec_execution_command, CMD_JSON, "maximum_output_bytes", "0", "ExecutionCommand.maximum_output_bytes");
}

Test(decode, handle_and_ref_shapes)
{
	expect_reject_mut(dec_environment_handle, HANDLE_JSON, "environment_id", "\"/var/lib/airlock/x\"",
			  "EnvironmentHandle.environment_id");
	expect_reject_mut(dec_environment_handle, HANDLE_JSON, "environment_id", "\"\"", "EnvironmentHandle.environment_id");
	char long_id[AIRLOCK_ENVIRONMENT_ID_MAX + 8];
	memset(long_id, 'a', sizeof(long_id));
	long_id[0] = '"';
	long_id[AIRLOCK_ENVIRONMENT_ID_MAX + 1] = '"';
	long_id[AIRLOCK_ENVIRONMENT_ID_MAX + 2] = 0; /* 64 characters: one too many */
	expect_reject_mut(dec_environment_handle, HANDLE_JSON, "environment_id", long_id,
			  "EnvironmentHandle.environment_id: too long");
	expect_reject_mut(dec_environment_handle, HANDLE_JSON, "tenant_id", "\"a/b\"", "EnvironmentHandle.tenant_id");
	expect_reject_mut(dec_artifact_ref, REF_JSON, "artifact_id", "\"0192D3F5-8E1A-7ABC-8DEF-0123456789AB\"",
			  "ArtifactRef.artifact_id");
	expect_reject_mut(dec_artifact_ref, REF_JSON, "artifact_id", "\"0192d3f5-8e1a-4abc-8def-0123456789ab\"",
			  "ArtifactRef.artifact_id");
	expect_reject_mut(dec_artifact_ref, REF_JSON, "artifact_id", "\"0192d3f5-8e1a-7abc-cdef-0123456789ab\"",
			  "ArtifactRef.artifact_id");
	expect_reject_mut(dec_artifact_ref, REF_JSON, "media_type", "\"\"", "ArtifactRef.media_type");
	/* Not type/subtype: sent back as a Content-Type, so only the bare form. */
	expect_reject_mut(dec_artifact_ref, REF_JSON, "media_type", "\"text/plain; charset=utf-8\"",
			  "ArtifactRef.media_type: must be type/subtype");
	expect_reject_mut(dec_artifact_ref, REF_JSON, "media_type", "\"text\"", "ArtifactRef.media_type");
	expect_reject_mut(dec_artifact_ref, REF_JSON, "media_type", "\"text/\"", "ArtifactRef.media_type");
	expect_reject_mut(dec_artifact_ref, REF_JSON, "media_type", "\"/plain\"", "ArtifactRef.media_type");
	expect_reject_mut(dec_artifact_ref, REF_JSON, "media_type", "\"a/b/c\"", "ArtifactRef.media_type");
	expect_reject_mut(dec_artifact_ref, REF_JSON, "media_type", "\"te\\nxt/plain\"", "ArtifactRef.media_type");
	expect_reject_mut(dec_artifact_metadata, META_JSON, "media_type", "\"text/plain\\r\\nX-A: b\"",
			  "ArtifactMetadata.media_type");
	expect_reject_mut(dec_artifact_metadata, META_JSON, "sha256", "\"abc\"", "ArtifactMetadata.sha256");
	expect_reject_mut(dec_artifact_metadata, META_JSON, "run_id", "\"a b\"", "ArtifactMetadata.run_id");
	expect_reject_mut(dec_artifact_metadata, META_JSON, "filename", "\"\"", "ArtifactMetadata.filename");
}

/* ---- *ret untouched on failure ------------------------------------------- */

#define UNTOUCHED(prefix, ctype, json)                                                             \
	do {                                                                                       \
		ctype v_, copy_;                                                                   \
		memset(&v_, 0xa5, sizeof(v_));                                                     \
		memcpy(&copy_, &v_, sizeof(v_));                                                   \
		const char *j_ = (json);                                                           \
		cr_assert_lt(airlock_##prefix##_from_json(j_, strlen(j_), &v_, NULL), 0, "%s", j_); \
		cr_assert(memcmp(&v_, &copy_, sizeof(v_)) == 0, #prefix " was written on failure"); \
	} while (0)

Test(decode, ret_untouched_on_failure)
{
	/* Each input fails late, after most fields were read. */
	char *j;
	UNTOUCHED(resource_limits, airlock_resource_limits, j = mutate(LIMITS_JSON, "wall_clock_seconds", NULL));
	free(j);
	UNTOUCHED(egress_policy, airlock_egress_policy, j = mutate(EGRESS_JSON, "destinations/1/ports", "[0]"));
	free(j);
	UNTOUCHED(bridge_endpoint, airlock_bridge_endpoint, j = mutate(BRIDGE_JSON, "token", "\"\""));
	free(j);
	UNTOUCHED(environment_spec, airlock_environment_spec, j = mutate(SPEC_JSON, "bridge/token", "\"\""));
	free(j);
	UNTOUCHED(environment_handle, airlock_environment_handle, j = mutate(HANDLE_JSON, "expires_at", "\"x\""));
	free(j);
	UNTOUCHED(execution_command, airlock_execution_command, j = mutate(CMD_JSON, "maximum_output_bytes", "0"));
	free(j);
	UNTOUCHED(file_change, airlock_file_change, j = mutate(FC_JSON, "sha256", "null"));
	free(j);
	UNTOUCHED(execution_result, airlock_execution_result, j = mutate(RESULT_JSON, "files_changed/1/change", "\"X\""));
	free(j);
	UNTOUCHED(artifact_metadata, airlock_artifact_metadata, j = mutate(META_JSON, "expires_at", "5"));
	free(j);
	UNTOUCHED(artifact_ref, airlock_artifact_ref, j = mutate(REF_JSON, "media_type", "\"\""));
	free(j);
	UNTOUCHED(error, airlock_error, j = mutate(ERROR_JSON, "error", "\"Nope\""));
	free(j);
}

/* ---- encoders refuse what the decoder would refuse ----------------------- */

Test(encode, refuses_invalid_values)
{
	airlock_error err = { 0 };
	airlock_file_change f;
	make_fc(&f, AIRLOCK_CHANGE_DELETED, "x");
	f.has_sha256 = true;
	strcpy(f.sha256, HEX64);
	cr_assert_null(airlock_file_change_to_json(&f, &err));
	cr_assert_not_null(strstr(err.message, "FileChange.sha256"), "%s", err.message);
	airlock_file_change_clear(&f);

	char *long_path = calloc(1, AIRLOCK_FC_PATH_MAX + 2);
	memset(long_path, 'a', AIRLOCK_FC_PATH_MAX + 1);
	make_fc(&f, AIRLOCK_CHANGE_CREATED, long_path);
	free(long_path);
	cr_assert_null(airlock_file_change_to_json(&f, &err));
	cr_assert_not_null(strstr(err.message, "FileChange.path: longer than"), "%s", err.message);
	airlock_file_change_clear(&f);

	airlock_execution_result r;
	make_result(&r, AIRLOCK_KILL_CANCELLED);
	r.has_exit_code = true;
	cr_assert_null(airlock_execution_result_to_json(&r, &err));
	cr_assert_eq(err.cls, AIRLOCK_ERR_DECODE);
	cr_assert_not_null(strstr(err.message, "ExecutionResult.exit_code"), "%s", err.message);
	airlock_execution_result_clear(&r);

	airlock_environment_handle h = { .tenant_id = dup("t"), .run_id = dup("r"), .created_at_ms = -1,
					 .expires_at_ms = 0 };
	strcpy(h.environment_id, "env_1");
	cr_assert_null(airlock_environment_handle_to_json(&h, &err));
	cr_assert_not_null(strstr(err.message, "EnvironmentHandle.created_at"), "%s", err.message);
	airlock_environment_handle_clear(&h);

	airlock_environment_spec s;
	make_spec(&s, false, false);
	s.limits.inodes_max = 0;
	cr_assert_null(airlock_environment_spec_to_json(&s, &err));
	cr_assert_eq(err.cls, AIRLOCK_ERR_DECODE);
	cr_assert_not_null(strstr(err.message, "EnvironmentSpec.limits.inodes_max"), "%s", err.message);
	airlock_environment_spec_clear(&s);

	make_spec(&s, false, false);
	cr_assert_eq(airlock_env_add(&s.environment, "LATIN1", "caf\xe9"), 0);
	cr_assert_null(airlock_environment_spec_to_json(&s, &err));
	cr_assert_not_null(strstr(err.message, "EnvironmentSpec.environment.LATIN1"), "%s", err.message);
	airlock_environment_spec_clear(&s);

	airlock_execution_command c;
	make_cmd(&c, 0);
	free(c.argv[1]);
	c.argv[1] = dup("\xc0\xaf");
	cr_assert_null(airlock_execution_command_to_json(&c, &err));
	cr_assert_not_null(strstr(err.message, "ExecutionCommand.argv"), "%s", err.message);
	airlock_execution_command_clear(&c);

	cr_assert_null(airlock_resource_limits_to_json(NULL, &err));
	cr_assert_null(airlock_execution_result_to_json(NULL, &err));
}

/* ---- the sandbox.run_command result object ------------------------------ */

static json_t *tool_json(const airlock_execution_result *r)
{
	airlock_error err = { 0 };
	char *s = airlock_result_to_tool_json(r, &err);
	cr_assert_not_null(s, "%s", err.message);
	json_error_t je;
	/* NUL is valid UTF-8 and is kept, written as \u0000 */
	json_t *o = json_loads(s, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &je);
	cr_assert_not_null(o, "tool JSON does not parse: %s: %s", je.text, s);
	free(s);
	return o;
}

static void expect_text(const unsigned char *in, size_t n, const char *want, size_t want_len)
{
	airlock_execution_result r = { .has_exit_code = true, .stdout_data = dupmem(in, n), .stdout_len = n };
	json_t *o = tool_json(&r);
	json_t *s = json_object_get(o, "stdout");
	cr_assert(json_is_string(s));
	cr_assert_eq(json_string_length(s), want_len, "length %zu, want %zu", json_string_length(s), want_len);
	cr_assert(memcmp(json_string_value(s), want, want_len) == 0, "replacement differs");
	json_decref(o);
	airlock_execution_result_clear(&r);
}

#define FFFD "\xef\xbf\xbd"
#define TEXT(in, want) expect_text((const unsigned char *)(in), sizeof(in) - 1, (want), sizeof(want) - 1)

Test(tool, utf8_replacement)
{
	TEXT("plain", "plain");
	TEXT("\xe2\x82\xac \xf0\x9f\x98\x80 \xc3\xa9", "\xe2\x82\xac \xf0\x9f\x98\x80 \xc3\xa9");
	TEXT("a\xff" "b", "a" FFFD "b");
	TEXT("\xfe\xff", FFFD FFFD);
	TEXT("ok\0\xff", "ok\0" FFFD);
	/* overlong encodings: no well-formed prefix, one U+FFFD per byte */
	TEXT("\xc0\xaf", FFFD FFFD);
	TEXT("\xe0\x80\xaf", FFFD FFFD FFFD);
	/* a truncated sequence is one maximal subpart */
	TEXT("\xe2\x82", FFFD);
	TEXT("\xe2\x82" "A", FFFD "A");
	TEXT("\xf0\x9f\x98", FFFD);
	TEXT("\xf0\x9f\x98" "\xf0\x9f\x98\x80", FFFD "\xf0\x9f\x98\x80");
	/* surrogates and beyond U+10FFFF */
	TEXT("\xed\xa0\x80", FFFD FFFD FFFD);
	TEXT("\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD);
	TEXT("\xf5\x80", FFFD FFFD);
	/* a lone continuation byte */
	TEXT("\x80" "x", FFFD "x");
	TEXT("", "");
}

Test(tool, field_names_and_values)
{
	airlock_execution_result r;
	make_result(&r, AIRLOCK_KILL_TIMEOUT);
	r.stderr_data = dupmem("warn\n", 5);
	r.stderr_len = 5;
	json_t *o = tool_json(&r);
	const char *want[] = { "exit_code", "stdout", "stderr", "stdout_truncated", "stderr_truncated", "timed_out",
			       "killed_by", "duration_ms", "files_changed", "files_changed_truncated" };
	cr_assert_eq(json_object_size(o), NELEM(want), "exactly the result's fields");
	for (size_t i = 0; i < NELEM(want); i++)
		cr_assert_not_null(json_object_get(o, want[i]), "no %s", want[i]);
	cr_assert(json_is_null(json_object_get(o, "exit_code")));
	cr_assert_str_eq(json_string_value(json_object_get(o, "killed_by")), "TIMEOUT");
	cr_assert(json_is_true(json_object_get(o, "timed_out")));
	cr_assert(json_is_true(json_object_get(o, "stdout_truncated")));
	cr_assert(json_is_false(json_object_get(o, "stderr_truncated")));
	cr_assert_str_eq(json_string_value(json_object_get(o, "stderr")), "warn\n");
	cr_assert_eq(json_integer_value(json_object_get(o, "duration_ms")), 1840);
	json_t *files = json_object_get(o, "files_changed");
	cr_assert_eq(json_array_size(files), 3);
	json_t *f0 = json_array_get(files, 0), *f2 = json_array_get(files, 2);
	cr_assert_eq(json_object_size(f0), 5);
	cr_assert_str_eq(json_string_value(json_object_get(f0, "path")), "a.csv");
	cr_assert_str_eq(json_string_value(json_object_get(f0, "change")), "CREATED");
	cr_assert_str_eq(json_string_value(json_object_get(f0, "kind")), "FILE");
	cr_assert_eq(json_integer_value(json_object_get(f0, "size_bytes")), 77);
	cr_assert_str_eq(json_string_value(json_object_get(f0, "sha256")), HEX64);
	cr_assert_str_eq(json_string_value(json_object_get(f2, "change")), "DELETED");
	cr_assert(json_is_null(json_object_get(f2, "sha256")));
	/* stdout is text: the binary sample's bad bytes became U+FFFD */
	json_t *out = json_object_get(o, "stdout");
	const char want_out[] = "ok\0" FFFD FFFD "\0" FFFD "(\n\0";
	cr_assert_eq(json_string_length(out), sizeof(want_out) - 1);
	cr_assert(memcmp(json_string_value(out), want_out, sizeof(want_out) - 1) == 0);
	json_decref(o);
	airlock_execution_result_clear(&r);

	make_result(&r, AIRLOCK_KILL_NONE);
	o = tool_json(&r);
	cr_assert_eq(json_integer_value(json_object_get(o, "exit_code")), -3);
	cr_assert(json_is_null(json_object_get(o, "killed_by")));
	cr_assert(json_is_false(json_object_get(o, "timed_out")));
	json_decref(o);
	airlock_execution_result_clear(&r);
}

/* Two names that a U+FFFD rendering would merge, and a name with a real
 * U+FFFD: three different paths in the tool result as on the wire. */
Test(tool, non_utf8_paths_stay_distinct)
{
	airlock_execution_result r = { .has_exit_code = true };
	r.files_changed = calloc(3, sizeof(*r.files_changed));
	make_fc(&r.files_changed[0], AIRLOCK_CHANGE_CREATED, "caf\xe9.txt");
	make_fc(&r.files_changed[1], AIRLOCK_CHANGE_CREATED, "caf\xe8.txt");
	make_fc(&r.files_changed[2], AIRLOCK_CHANGE_CREATED, "caf" FFFD ".txt");
	r.n_files_changed = 3;
	json_t *o = tool_json(&r);
	json_t *files = json_object_get(o, "files_changed");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(files, 0), "path")),
	                 "caf" FFFD "e9.txt");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(files, 1), "path")),
	                 "caf" FFFD "e8.txt");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(files, 2), "path")),
	                 "caf" FFFD "ef" FFFD "bf" FFFD "bd.txt");
	json_decref(o);
	/* The wire form round-trips all three byte-exact. */
	airlock_execution_result back;
	ROUNDTRIP(execution_result, &r, &back);
	for (size_t i = 0; i < 3; i++)
		cr_assert_str_eq(back.files_changed[i].path, r.files_changed[i].path);
	airlock_execution_result_clear(&back);
	airlock_execution_result_clear(&r);
}

/* jansson never sees a failed allocation (src/core/json_decode.c says why: it
 * corrupts or silently changes what it decodes). Loading the library
 * installs an allocator that aborts instead of returning NULL outside a
 * decode, and draws on the decode's budgeted arena inside one. */
Test(jansson_allocator, is_installed_when_the_library_loads)
{
	json_malloc_t m = NULL;
	json_free_t f = NULL;
	json_get_alloc_funcs(&m, &f);
	cr_assert(m != NULL && m != malloc, "jansson still allocates with plain malloc");
	cr_assert(f != NULL && f != free, "jansson frees with plain free: no arena");
}

#if !defined(__SANITIZE_ADDRESS__)
/* Under ASan an impossible size is ASan's own report, not malloc's NULL. */
/* 6 is SIGABRT on Linux (<signal.h> would clash with this file's dup()). */
Test(jansson_allocator, aborts_rather_than_return_null, .signal = 6)
{
	json_malloc_t m = NULL;
	json_free_t f = NULL;
	json_get_alloc_funcs(&m, &f);
	void *p = m(SIZE_MAX / 2);
	f(p);
}
#endif

/* A spec's JSON is capped both ways (caps.h, AIRLOCK_SPEC_JSON_MAX): the
 * service's provision body is sized from it, so the encoder refuses to
 * write a spec the service would refuse to read, naming the limit. */
Test(json_spec, encoding_over_its_cap_is_refused_both_ways)
{
	airlock_environment_spec s;
	memset(&s, 0, sizeof(s));
	s.tenant_id = strdup("t1");
	s.run_id = strdup("r1");
	s.image_digest = strdup("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	s.limits = (airlock_resource_limits){ 1000, 1 << 28, 64, 1 << 26, 1000, 60 };
	s.egress.mode = AIRLOCK_EGRESS_DENY;
	s.environment.vars = calloc(1, sizeof(*s.environment.vars));
	s.environment.vars[0].name = strdup("BIG");
	s.environment.vars[0].value = malloc(AIRLOCK_SPEC_JSON_MAX + 1);
	memset(s.environment.vars[0].value, 'x', AIRLOCK_SPEC_JSON_MAX);
	s.environment.vars[0].value[AIRLOCK_SPEC_JSON_MAX] = 0;
	s.environment.n = 1;
	airlock_error err = { 0 };
	char *j = airlock_environment_spec_to_json(&s, &err);
	cr_assert_null(j);
	cr_assert(strstr(err.message, "byte limit"), "%s", err.message);
	/* Within it, it encodes; the same text past the cap does not decode. */
	s.environment.vars[0].value[1000] = 0;
	j = airlock_environment_spec_to_json(&s, &err);
	cr_assert_not_null(j, "%s", err.message);
	size_t n = strlen(j);
	char *padded = malloc(AIRLOCK_SPEC_JSON_MAX + 2);
	memcpy(padded, j, n);
	memset(padded + n, ' ', AIRLOCK_SPEC_JSON_MAX + 1 - n);
	padded[AIRLOCK_SPEC_JSON_MAX + 1] = 0;
	airlock_environment_spec back;
	cr_assert_eq(airlock_environment_spec_from_json(padded, AIRLOCK_SPEC_JSON_MAX + 1, &back, &err),
	             airlock_errcode(AIRLOCK_ERR_DECODE));
	cr_assert(strstr(err.message, "byte limit"), "%s", err.message);
	cr_assert_eq(airlock_environment_spec_from_json(padded, AIRLOCK_SPEC_JSON_MAX, &back, &err), 0,
	             "%s", err.message);
	airlock_environment_spec_clear(&back);
	free(padded);
	free(j);
	airlock_environment_spec_clear(&s);
}

/* `runsc events --stats` is another process's output: decoded under the
 * core's budget and cap like a request body, never with jansson's own
 * allocation, and a bad answer is an error naming it. */
Test(json, runsc_events_stats_are_decoded_under_the_budget)
{
	airlock_error err = { 0 };
	int64_t n = -1;
	static const char good[] = "{\"type\":\"stats\",\"id\":\"x\",\"data\":{\"pids\":{\"current\":7,\"limit\":0}}}";
	cr_assert_eq(gv_events_pids(good, sizeof(good) - 1, &n, &err), 0, "%s", err.message);
	cr_expect_eq(n, 7);

	/* Over the cap on runsc's output. */
	size_t big = AIRLOCK_GVISOR_RUNSC_OUTPUT_MAX + 1;
	char *o = malloc(big + 1);
	cr_assert_not_null(o);
	memset(o, ' ', big);
	o[0] = '{';
	o[big - 1] = '}';
	o[big] = 0;
	n = -1;
	cr_expect_eq(gv_events_pids(o, big, &n, &err), airlock_errcode(AIRLOCK_ERR_DECODE));
	cr_expect(strstr(err.message, "runsc events --stats") && strstr(err.message, "limit"), "%s",
	          err.message);
	cr_expect_eq(n, -1);

	/* Deep: nesting past what the parser takes. */
	size_t depth = 30000;
	char *d = malloc(2 * depth + 1);
	cr_assert_not_null(d);
	memset(d, '[', depth);
	memset(d + depth, ']', depth);
	d[0] = '{';
	d[2 * depth - 1] = '}';
	d[2 * depth] = 0;
	cr_expect_eq(gv_events_pids(d, 2 * depth, &n, &err), airlock_errcode(AIRLOCK_ERR_DECODE));
	cr_expect(strstr(err.message, "runsc events --stats"), "%s", err.message);

	/* Dense: more values than the budget of their size allows. */
	size_t m = 20000;
	char *v = malloc(4 * m + 64);
	cr_assert_not_null(v);
	size_t k = (size_t)sprintf(v, "{\"data\":[");
	for (size_t i = 0; i < m; i++)
		k += (size_t)sprintf(v + k, "%s{}", i ? "," : "");
	k += (size_t)sprintf(v + k, "]}");
	cr_assert_leq(k, AIRLOCK_GVISOR_RUNSC_OUTPUT_MAX);
	cr_expect_eq(gv_events_pids(v, k, &n, &err), airlock_errcode(AIRLOCK_ERR_DECODE));
	cr_expect(strstr(err.message, "runsc events --stats") && strstr(err.message, "budget"), "%s",
	          err.message);

	/* No count. */
	static const char none[] = "{\"data\":{\"pids\":{\"current\":\"7\"}}}";
	cr_expect_eq(gv_events_pids(none, sizeof(none) - 1, &n, &err), airlock_errcode(AIRLOCK_ERR_DECODE));
	cr_expect(strstr(err.message, "data.pids.current"), "%s", err.message);
	free(o);
	free(d);
	free(v);
}
