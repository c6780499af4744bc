/* SPDX-License-Identifier: Apache-2.0 */
/* The closed vocabularies, the shape checks and the validation rules of
 * include/airlock/types.h, each failure checked for the field it names. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/types.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- enum tables ---------------------------------------------------------- */

typedef const char *(*name_fn)(int);
typedef int (*parse_fn)(const char *);

/* The specification's spellings, written out independently of the table in
 * types.c so that a changed spelling there fails here. */
static const char *const kill_spellings[] = { NULL, "TIMEOUT", "MEMORY", "OUTPUT_LIMIT", "PIDS",
					      "DISK", "CANCELLED", "EXPIRED", "SERVICE_SHUTDOWN" };
static const char *const change_spellings[] = { NULL, "CREATED", "MODIFIED", "DELETED" };
static const char *const provenance_spellings[] = { NULL, "unknown", "tool_written", "sandbox_written" };
static const char *const origin_spellings[] = { NULL, "SANDBOX_EXPORT", "TOOL_OUTPUT", "MODEL_OUTPUT",
						"UPLOAD", "TRAJECTORY_EXPORT", "KNOWLEDGE_SOURCE" };
static const char *const trust_spellings[] = { NULL, "INTERNAL_TOOL", "USER_SUPPLIED", "EXTERNAL_UNTRUSTED" };
static const char *const egress_spellings[] = { NULL, "deny", "allowlist" };

/* Wrappers with one signature, so one checker covers every enum. */
static const char *kill_name(int v) { return airlock_kill_reason_name((airlock_kill_reason)v); }
static int kill_parse(const char *s) { return (int)airlock_kill_reason_parse(s); }
static const char *change_name(int v) { return airlock_change_kind_name((airlock_change_kind)v); }
static int change_parse(const char *s) { return (int)airlock_change_kind_parse(s); }
static const char *prov_name(int v) { return airlock_provenance_name((airlock_provenance)v); }
static int prov_parse(const char *s) { return (int)airlock_provenance_parse(s); }
static const char *origin_name(int v) { return airlock_artifact_origin_name((airlock_artifact_origin)v); }
static int origin_parse(const char *s) { return (int)airlock_artifact_origin_parse(s); }
static const char *trust_name(int v) { return airlock_trust_level_name((airlock_trust_level)v); }
static int trust_parse(const char *s) { return (int)airlock_trust_level_parse(s); }
static const char *egress_name(int v) { return airlock_egress_mode_name((airlock_egress_mode)v); }
static int egress_parse(const char *s) { return (int)airlock_egress_mode_parse(s); }

static void flip_case(char *s)
{
	for (; *s; s++) {
		if (*s >= 'a' && *s <= 'z')
			*s = (char)(*s - 'a' + 'A');
		else if (*s >= 'A' && *s <= 'Z')
			*s = (char)(*s - 'A' + 'a');
	}
}

static void check_enum(const char *what, name_fn name, parse_fn parse, const char *const *spell,
		       int max)
{
	cr_assert_null(name(0), "%s: the invalid value has no name", what);
	cr_assert_null(name(max), "%s: _MAX has no name", what);
	cr_assert_null(name(max + 7), "%s: out of range has no name", what);
	cr_assert_null(name(-1), "%s: negative has no name", what);
	for (int v = 1; v < max; v++) {
		const char *n = name(v);
		cr_assert_not_null(n, "%s %d has no name", what, v);
		cr_assert_str_eq(n, spell[v], "%s %d", what, v);
		cr_assert_eq(parse(n), v, "%s: parse(%s)", what, n);

		char buf[64];
		snprintf(buf, sizeof(buf), "%s", n);
		flip_case(buf);
		cr_assert_eq(parse(buf), 0, "%s: case-flipped %s accepted", what, buf);
		buf[0] = n[0];
		if (strcmp(buf, n) != 0)
			cr_assert_eq(parse(buf), 0, "%s: mixed case %s accepted", what, buf);
		snprintf(buf, sizeof(buf), "%s ", n);
		cr_assert_eq(parse(buf), 0, "%s: trailing space accepted", what);
		snprintf(buf, sizeof(buf), " %s", n);
		cr_assert_eq(parse(buf), 0, "%s: leading space accepted", what);
		snprintf(buf, sizeof(buf), "%.*s", (int)strlen(n) - 1, n);
		cr_assert_eq(parse(buf), 0, "%s: prefix %s accepted", what, buf);
	}
	cr_assert_eq(parse(NULL), 0, "%s: NULL", what);
	cr_assert_eq(parse(""), 0, "%s: empty", what);
	cr_assert_eq(parse("NONE"), 0, "%s: NONE", what);
	cr_assert_eq(parse("INVALID"), 0, "%s: INVALID", what);
}

Test(enums, kill_reason)
{
	check_enum("KillReason", kill_name, kill_parse, kill_spellings, AIRLOCK_KILL__MAX);
	cr_assert_eq(NELEM(kill_spellings), AIRLOCK_KILL__MAX);
}

Test(enums, change_kind)
{
	check_enum("ChangeKind", change_name, change_parse, change_spellings, AIRLOCK_CHANGE__MAX);
	cr_assert_eq(NELEM(change_spellings), AIRLOCK_CHANGE__MAX);
}

Test(enums, provenance)
{
	check_enum("WorkspaceProvenance", prov_name, prov_parse, provenance_spellings,
		   AIRLOCK_PROVENANCE__MAX);
	cr_assert_eq(NELEM(provenance_spellings), AIRLOCK_PROVENANCE__MAX);
	/* Provenance is the one lowercase vocabulary: the Python-style member
	 * names are not its wire spelling. */
	cr_assert_eq(airlock_provenance_parse("TOOL_WRITTEN"), AIRLOCK_PROVENANCE_INVALID);
	cr_assert_eq(airlock_provenance_parse("UNKNOWN"), AIRLOCK_PROVENANCE_INVALID);
}

Test(enums, artifact_origin)
{
	check_enum("ArtifactOrigin", origin_name, origin_parse, origin_spellings, AIRLOCK_ORIGIN__MAX);
	cr_assert_eq(NELEM(origin_spellings), AIRLOCK_ORIGIN__MAX);
}

Test(enums, trust_level)
{
	check_enum("TrustLevel", trust_name, trust_parse, trust_spellings, AIRLOCK_TRUST__MAX);
	cr_assert_eq(NELEM(trust_spellings), AIRLOCK_TRUST__MAX);
}

Test(enums, egress_mode)
{
	check_enum("EgressMode", egress_name, egress_parse, egress_spellings, AIRLOCK_EGRESS__MAX);
	cr_assert_eq(NELEM(egress_spellings), AIRLOCK_EGRESS__MAX);
	/* There is no allow mode (spec, "The allowlist grammar"). */
	cr_assert_eq(airlock_egress_mode_parse("allow"), AIRLOCK_EGRESS_INVALID);
	cr_assert_eq(airlock_egress_mode_parse("open"), AIRLOCK_EGRESS_INVALID);
}

/* ---- shapes ---------------------------------------------------------------- */

Test(shapes, id_valid)
{
	cr_assert(airlock_id_valid("t"));
	cr_assert(airlock_id_valid("tenant-1_A9"));
	char buf[AIRLOCK_ID_MAX + 2];
	memset(buf, 'a', AIRLOCK_ID_MAX);
	buf[AIRLOCK_ID_MAX] = 0;
	cr_assert(airlock_id_valid(buf), "exactly %d characters", AIRLOCK_ID_MAX);
	buf[AIRLOCK_ID_MAX] = 'a';
	buf[AIRLOCK_ID_MAX + 1] = 0;
	cr_assert_not(airlock_id_valid(buf), "%d characters", AIRLOCK_ID_MAX + 1);

	const char *bad[] = { "", "a/b", "../x", "a.b", "a b", "a:b", "t\n", "caf\xc3\xa9", "a%2f", "*" };
	for (size_t i = 0; i < NELEM(bad); i++)
		cr_assert_not(airlock_id_valid(bad[i]), "accepted \"%s\"", bad[i]);
	cr_assert_not(airlock_id_valid(NULL));
}

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

Test(shapes, sha256_and_digest)
{
	cr_assert(airlock_sha256_hex_valid(HEX64));
	cr_assert_not(airlock_sha256_hex_valid(NULL));
	cr_assert_not(airlock_sha256_hex_valid(""));
	cr_assert_not(airlock_sha256_hex_valid(HEX64 "0"), "65 digits");
	cr_assert_not(airlock_sha256_hex_valid(&HEX64[1]), "63 digits");
	cr_assert_not(airlock_sha256_hex_valid("0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"),
		      "uppercase");
	cr_assert_not(airlock_sha256_hex_valid("g123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));

	cr_assert(airlock_image_digest_valid("sha256:" HEX64));
	const char *bad[] = {
		"python:3.12",        "docker.io/library/python@sha256:" HEX64, "sha256:" HEX64 "0",
		"SHA256:" HEX64,      "sha512:" HEX64,                          "sha256:",
		"sha256" HEX64,       " sha256:" HEX64,                          "sha256:" HEX64 " ",
		"",
	};
	for (size_t i = 0; i < NELEM(bad); i++)
		cr_assert_not(airlock_image_digest_valid(bad[i]), "accepted \"%s\"", bad[i]);
	cr_assert_not(airlock_image_digest_valid(NULL));
}

/* ---- ResourceLimits ------------------------------------------------------- */

static const airlock_resource_limits good_limits = {
	.cpu_millicores = 2000, .memory_bytes = 2LL << 30, .pids_max = 512,
	.workspace_bytes = 4LL << 30, .inodes_max = 100000, .wall_clock_seconds = 300,
};

static const char *const limit_names[] = {
	"cpu_millicores", "memory_bytes", "pids_max", "workspace_bytes", "inodes_max", "wall_clock_seconds",
};

static int64_t *limit_field(airlock_resource_limits *l, size_t i)
{
	int64_t *f[] = { &l->cpu_millicores, &l->memory_bytes, &l->pids_max,
			 &l->workspace_bytes, &l->inodes_max, &l->wall_clock_seconds };
	return f[i];
}

static void expect_fail(int r, airlock_errclass cls, const airlock_error *err, const char *needle)
{
	cr_assert_eq(r, airlock_errcode(cls), "expected %s, got %d (%s)", airlock_errclass_name(cls), r,
		     err->message);
	cr_assert_eq(err->cls, cls);
	cr_assert_not_null(strstr(err->message, needle), "message \"%s\" does not name \"%s\"",
			   err->message, needle);
}

Test(limits, valid)
{
	airlock_error err = { 0 };
	cr_assert_eq(airlock_resource_limits_validate(&good_limits, &err), 0, "%s", err.message);
	/* The smallest valid limits: 1 everywhere but the start floors. */
	airlock_resource_limits one = { 1, AIRLOCK_LIMIT_MEMORY_BYTES_MIN, AIRLOCK_LIMIT_PIDS_MIN, 1, 1, 1 };
	cr_assert_eq(airlock_resource_limits_validate(&one, NULL), 0);
	airlock_resource_limits low = one;
	low.memory_bytes--;
	cr_assert_neq(airlock_resource_limits_validate(&low, NULL), 0, "below the memory floor");
	low = one;
	low.pids_max--;
	cr_assert_neq(airlock_resource_limits_validate(&low, NULL), 0, "below the pids floor");
}

Test(limits, each_field_must_be_positive)
{
	const int64_t bad[] = { 0, -1, INT64_MIN };
	for (size_t i = 0; i < 6; i++)
		for (size_t b = 0; b < NELEM(bad); b++) {
			airlock_resource_limits l = good_limits;
			*limit_field(&l, i) = bad[b];
			airlock_error err = { 0 };
			char needle[64];
			snprintf(needle, sizeof(needle), "ResourceLimits.%s", limit_names[i]);
			expect_fail(airlock_resource_limits_validate(&l, &err),
				    AIRLOCK_ERR_EXECUTION_REJECTED, &err, needle);
		}
	/* A forgotten struct is all zeros and must not validate as unlimited. */
	airlock_resource_limits zero = { 0 };
	cr_assert_lt(airlock_resource_limits_validate(&zero, NULL), 0);
}

/* ---- EnvironmentSpec ------------------------------------------------------ */

static void must(int r)
{
	cr_assert_eq(r, 0, "setup failed: %d", r);
}

static char *dup(const char *s)
{
	char *d = strdup(s);
	cr_assert_not_null(d);
	return d;
}

static void add_destination(airlock_egress_policy *p, const char *host, const uint16_t *ports, size_t n)
{
	p->destinations = reallocarray(p->destinations, p->n_destinations + 1, sizeof(*p->destinations));
	cr_assert_not_null(p->destinations);
	airlock_egress_destination *d = &p->destinations[p->n_destinations++];
	d->host = host ? dup(host) : NULL;
	d->ports = n ? calloc(n, sizeof(*d->ports)) : NULL;
	if (n)
		memcpy(d->ports, ports, n * sizeof(*ports));
	d->n_ports = n;
}

static void make_spec(airlock_environment_spec *s, bool with_bridge, bool allowlist)
{
	*s = (airlock_environment_spec){
		.tenant_id = dup("tenant-1"),
		.run_id = dup("run_01"),
		.lease_epoch = 3,
		.image_digest = dup("sha256:" HEX64),
		.limits = good_limits,
		.egress = { .mode = allowlist ? AIRLOCK_EGRESS_ALLOWLIST : AIRLOCK_EGRESS_DENY },
	};
	if (allowlist) {
		const uint16_t p443[] = { 443 }, p2[] = { 80, 443 };
		add_destination(&s->egress, "pypi.org", p443, 1);
		add_destination(&s->egress, "*.pythonhosted.org", p2, 2);
	}
	must(airlock_env_add(&s->environment, "HOME", "/workspace"));
	must(airlock_env_add(&s->environment, "LANG", "C.UTF-8"));
	must(airlock_env_add(&s->environment, "_X9", ""));
	if (with_bridge) {
		s->bridge = calloc(1, sizeof(*s->bridge));
		s->bridge->socket_path = dup("/run/airlock/bridge.sock");
		s->bridge->token = dup("tok-123");
	}
}

static void expect_spec_fail(airlock_environment_spec *s, const char *needle)
{
	airlock_error err = { 0 };
	int r = airlock_environment_spec_validate(s, &err);
	airlock_environment_spec_clear(s);
	expect_fail(r, AIRLOCK_ERR_EXECUTION_REJECTED, &err, needle);
}

Test(spec, valid_variants)
{
	for (int b = 0; b < 2; b++)
		for (int a = 0; a < 2; a++) {
			airlock_environment_spec s;
			make_spec(&s, b, a);
			airlock_error err = { 0 };
			cr_assert_eq(airlock_environment_spec_validate(&s, &err), 0, "bridge=%d allowlist=%d: %s",
				     b, a, err.message);
			airlock_environment_spec_clear(&s);
		}
	/* lease_epoch 0 is the first lease, and an empty environment is legal. */
	airlock_environment_spec s;
	make_spec(&s, false, false);
	s.lease_epoch = 0;
	airlock_env_clear(&s.environment);
	cr_assert_eq(airlock_environment_spec_validate(&s, NULL), 0);
	/* An allowlist with no destination reaches nothing; that is a policy that
	 * denies, not a malformed one. */
	s.egress.mode = AIRLOCK_EGRESS_ALLOWLIST;
	cr_assert_eq(airlock_environment_spec_validate(&s, NULL), 0);
	airlock_environment_spec_clear(&s);
	cr_assert_lt(airlock_environment_spec_validate(NULL, NULL), 0);
}

Test(spec, tenant_and_run_ids)
{
	const char *bad[] = { "", "a/b", "../etc", "x y" };
	for (size_t i = 0; i < NELEM(bad); i++) {
		airlock_environment_spec s;
		make_spec(&s, false, false);
		free(s.tenant_id);
		s.tenant_id = dup(bad[i]);
		expect_spec_fail(&s, "EnvironmentSpec.tenant_id");

		make_spec(&s, false, false);
		free(s.run_id);
		s.run_id = dup(bad[i]);
		expect_spec_fail(&s, "EnvironmentSpec.run_id");
	}
	airlock_environment_spec s;
	make_spec(&s, false, false);
	free(s.tenant_id);
	s.tenant_id = NULL;
	expect_spec_fail(&s, "EnvironmentSpec.tenant_id");
	make_spec(&s, false, false);
	free(s.run_id);
	s.run_id = NULL;
	expect_spec_fail(&s, "EnvironmentSpec.run_id");
}

Test(spec, lease_epoch)
{
	airlock_environment_spec s;
	make_spec(&s, false, false);
	s.lease_epoch = -1;
	expect_spec_fail(&s, "EnvironmentSpec.lease_epoch");
}

Test(spec, image_digest)
{
	const char *bad[] = { "python:3.12", "sha256:" HEX64 "a", "sha256:ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789" };
	for (size_t i = 0; i < NELEM(bad); i++) {
		airlock_environment_spec s;
		make_spec(&s, false, false);
		free(s.image_digest);
		s.image_digest = dup(bad[i]);
		expect_spec_fail(&s, "EnvironmentSpec.image_digest");
	}
	airlock_environment_spec s;
	make_spec(&s, false, false);
	free(s.image_digest);
	s.image_digest = NULL;
	expect_spec_fail(&s, "EnvironmentSpec.image_digest");
}

Test(spec, limits_each_field)
{
	for (size_t i = 0; i < 6; i++) {
		airlock_environment_spec s;
		make_spec(&s, false, false);
		*limit_field(&s.limits, i) = 0;
		char needle[64];
		snprintf(needle, sizeof(needle), "EnvironmentSpec.limits.%s", limit_names[i]);
		expect_spec_fail(&s, needle);
	}
}

Test(spec, egress_rules)
{
	airlock_environment_spec s;

	make_spec(&s, false, false);
	s.egress.mode = AIRLOCK_EGRESS_INVALID;
	expect_spec_fail(&s, "EnvironmentSpec.egress.mode");

	make_spec(&s, false, false);
	s.egress.mode = AIRLOCK_EGRESS__MAX;
	expect_spec_fail(&s, "EnvironmentSpec.egress.mode");

	/* deny must list nothing */
	make_spec(&s, false, false);
	const uint16_t p443[] = { 443 };
	add_destination(&s.egress, "pypi.org", p443, 1);
	expect_spec_fail(&s, "EnvironmentSpec.egress.destinations");

	make_spec(&s, false, true);
	free(s.egress.destinations[1].host);
	s.egress.destinations[1].host = dup("");
	expect_spec_fail(&s, "EnvironmentSpec.egress.destinations[1].host");

	make_spec(&s, false, true);
	free(s.egress.destinations[0].host);
	s.egress.destinations[0].host = NULL;
	expect_spec_fail(&s, "EnvironmentSpec.egress.destinations[0].host");

	make_spec(&s, false, true);
	s.egress.destinations[0].n_ports = 0;
	expect_spec_fail(&s, "EnvironmentSpec.egress.destinations[0].ports");

	make_spec(&s, false, true);
	s.egress.destinations[1].ports[1] = 0;
	expect_spec_fail(&s, "EnvironmentSpec.egress.destinations[1].ports[1]");
}

Test(spec, egress_policy_validate_alone)
{
	/* On its own (as the egress grammar loads it) a policy is input, so the
	 * class is DecodeError rather than ExecutionRejected. */
	airlock_egress_policy p = { .mode = AIRLOCK_EGRESS_DENY };
	cr_assert_eq(airlock_egress_policy_validate(&p, NULL), 0);
	const uint16_t p443[] = { 443 };
	add_destination(&p, "pypi.org", p443, 1);
	airlock_error err = { 0 };
	expect_fail(airlock_egress_policy_validate(&p, &err), AIRLOCK_ERR_DECODE, &err,
		    "EgressPolicy.destinations");
	p.mode = AIRLOCK_EGRESS_ALLOWLIST;
	cr_assert_eq(airlock_egress_policy_validate(&p, &err), 0, "%s", err.message);
	p.destinations[0].ports[0] = 0;
	expect_fail(airlock_egress_policy_validate(&p, &err), AIRLOCK_ERR_DECODE, &err,
		    "EgressPolicy.destinations[0].ports[0]");
	airlock_egress_policy_clear(&p);
}

Test(spec, environment_names)
{
	const char *bad[] = { "", "1ABC", "A-B", "A=B", "A B", "PATH\n", "caf\xc3\xa9", "A.B" };
	for (size_t i = 0; i < NELEM(bad); i++) {
		airlock_environment_spec s;
		make_spec(&s, false, false);
		must(airlock_env_add(&s.environment, bad[i], "v"));
		expect_spec_fail(&s, "EnvironmentSpec.environment[3].name");
	}
	const char *good[] = { "_", "a", "A1_b", "_9" };
	for (size_t i = 0; i < NELEM(good); i++) {
		airlock_environment_spec s;
		make_spec(&s, false, false);
		must(airlock_env_add(&s.environment, good[i], "v"));
		airlock_error err = { 0 };
		cr_assert_eq(airlock_environment_spec_validate(&s, &err), 0, "%s: %s", good[i], err.message);
		airlock_environment_spec_clear(&s);
	}
}

Test(spec, environment_duplicates_and_null_value)
{
	airlock_environment_spec s;
	make_spec(&s, false, false);
	/* env_add would replace; a duplicate can only be built by hand, which is
	 * how a buggy builder would produce one. */
	airlock_env *e = &s.environment;
	e->vars = reallocarray(e->vars, e->n + 1, sizeof(*e->vars));
	e->vars[e->n++] = (airlock_env_var){ .name = dup("HOME"), .value = dup("/root") };
	expect_spec_fail(&s, "EnvironmentSpec.environment.HOME: duplicate");

	make_spec(&s, false, false);
	free(s.environment.vars[1].value);
	s.environment.vars[1].value = NULL;
	expect_spec_fail(&s, "EnvironmentSpec.environment.LANG");
}

Test(spec, bridge_rules)
{
	airlock_environment_spec s;

	make_spec(&s, true, false);
	free(s.bridge->socket_path);
	s.bridge->socket_path = dup("run/bridge.sock");
	expect_spec_fail(&s, "EnvironmentSpec.bridge.socket_path");

	make_spec(&s, true, false);
	free(s.bridge->socket_path);
	s.bridge->socket_path = dup("");
	expect_spec_fail(&s, "EnvironmentSpec.bridge.socket_path");

	make_spec(&s, true, false);
	free(s.bridge->socket_path);
	s.bridge->socket_path = NULL;
	expect_spec_fail(&s, "EnvironmentSpec.bridge.socket_path");

	make_spec(&s, true, false);
	free(s.bridge->token);
	s.bridge->token = dup("");
	expect_spec_fail(&s, "EnvironmentSpec.bridge.token");

	make_spec(&s, true, false);
	free(s.bridge->token);
	s.bridge->token = NULL;
	expect_spec_fail(&s, "EnvironmentSpec.bridge.token");
}

/* ---- release ------------------------------------------------------------ */

#define ASSERT_ZERO(p)                                                                             \
	do {                                                                                       \
		static const unsigned char zero_[sizeof(*(p))];                                    \
		cr_assert(memcmp((p), zero_, sizeof(*(p))) == 0, #p " not zeroed");              \
	} while (0)

Test(clear, spec_twice)
{
	airlock_environment_spec s;
	make_spec(&s, true, true);
	airlock_environment_spec_clear(&s);
	ASSERT_ZERO(&s);
	airlock_environment_spec_clear(&s);
	ASSERT_ZERO(&s);
	airlock_environment_spec_clear(NULL);
}

Test(clear, every_type_twice)
{
	airlock_environment_handle h = { .tenant_id = dup("t"), .run_id = dup("r"), .lease_epoch = 1 };
	strcpy(h.environment_id, "env_x");
	airlock_environment_handle_clear(&h);
	ASSERT_ZERO(&h);
	airlock_environment_handle_clear(&h);
	ASSERT_ZERO(&h);

	airlock_execution_command c = { .argc = 2, .working_directory = dup("."), .timeout_seconds = 1,
					.has_stdin = true, .stdin_data = (unsigned char *)dup("in"),
					.stdin_len = 2 };
	c.argv = calloc(3, sizeof(char *));
	c.argv[0] = dup("python");
	c.argv[1] = dup("-V");
	airlock_execution_command_clear(&c);
	ASSERT_ZERO(&c);
	airlock_execution_command_clear(&c);
	ASSERT_ZERO(&c);

	airlock_execution_result r = { .stdout_data = (unsigned char *)dup("o"), .stdout_len = 1,
				       .stderr_data = (unsigned char *)dup("e"), .stderr_len = 1,
				       .n_files_changed = 2 };
	r.files_changed = calloc(2, sizeof(*r.files_changed));
	r.files_changed[0].path = dup("a");
	r.files_changed[1].path = dup("b/c");
	airlock_execution_result_clear(&r);
	ASSERT_ZERO(&r);
	airlock_execution_result_clear(&r);
	ASSERT_ZERO(&r);

	airlock_file_change f = { .path = dup("x"), .size_bytes = 3, .has_sha256 = true };
	airlock_file_change_clear(&f);
	ASSERT_ZERO(&f);
	airlock_file_change_clear(&f);

	airlock_artifact_metadata m = { .tenant_id = dup("t"), .run_id = dup("r"), .filename = dup("f"),
					.media_type = dup("text/plain"), .size_bytes = 9 };
	airlock_artifact_metadata_clear(&m);
	ASSERT_ZERO(&m);
	airlock_artifact_metadata_clear(&m);

	airlock_artifact_ref a = { .media_type = dup("text/plain"), .size_bytes = 1 };
	strcpy(a.artifact_id, "x");
	airlock_artifact_ref_clear(&a);
	ASSERT_ZERO(&a);
	airlock_artifact_ref_clear(&a);

	airlock_egress_policy p = { .mode = AIRLOCK_EGRESS_ALLOWLIST };
	const uint16_t p443[] = { 443 };
	add_destination(&p, "h", p443, 1);
	airlock_egress_policy_clear(&p);
	ASSERT_ZERO(&p);
	airlock_egress_policy_clear(&p);

	airlock_env e = { 0 };
	must(airlock_env_add(&e, "A", "1"));
	airlock_env_clear(&e);
	ASSERT_ZERO(&e);
	airlock_env_clear(&e);

	airlock_bridge_endpoint_free(NULL);
	airlock_environment_handle_clear(NULL);
	airlock_execution_command_clear(NULL);
	airlock_execution_result_clear(NULL);
	airlock_file_change_clear(NULL);
	airlock_artifact_metadata_clear(NULL);
	airlock_artifact_ref_clear(NULL);
	airlock_egress_policy_clear(NULL);
	airlock_env_clear(NULL);
}

/* ---- copies and the environment mapping --------------------------------- */

Test(copy, handle_is_deep)
{
	airlock_environment_handle src = { .tenant_id = dup("tenant"), .run_id = dup("run"),
					   .lease_epoch = 7, .created_at_ms = 1000, .expires_at_ms = 2000 };
	strcpy(src.environment_id, "env_0123456789abcdef0123456789abcdef");
	airlock_environment_handle dst = { 0 };
	cr_assert_eq(airlock_environment_handle_copy(&dst, &src), 0);
	cr_assert_str_eq(dst.environment_id, src.environment_id);
	cr_assert_str_eq(dst.tenant_id, "tenant");
	cr_assert_str_eq(dst.run_id, "run");
	cr_assert_neq(dst.tenant_id, src.tenant_id);
	cr_assert_neq(dst.run_id, src.run_id);
	cr_assert_eq(dst.lease_epoch, 7);
	cr_assert_eq(dst.created_at_ms, 1000);
	cr_assert_eq(dst.expires_at_ms, 2000);
	src.tenant_id[0] = 'X';
	cr_assert_str_eq(dst.tenant_id, "tenant");
	airlock_environment_handle_clear(&src);
	cr_assert_str_eq(dst.run_id, "run");
	airlock_environment_handle_clear(&dst);

	cr_assert_eq(airlock_environment_handle_copy(NULL, &src), -EINVAL);
	cr_assert_eq(airlock_environment_handle_copy(&dst, NULL), -EINVAL);
}

Test(env, add_get_replace)
{
	airlock_env e = { 0 };
	cr_assert_null(airlock_env_get(&e, "A"));
	must(airlock_env_add(&e, "A", "1"));
	must(airlock_env_add(&e, "B", "2"));
	cr_assert_eq(e.n, 2);
	cr_assert_str_eq(airlock_env_get(&e, "A"), "1");
	cr_assert_str_eq(airlock_env_get(&e, "B"), "2");

	/* Replacing keeps one entry per name and copies the new value. */
	char value[] = "replaced";
	must(airlock_env_add(&e, "A", value));
	value[0] = 'X';
	cr_assert_eq(e.n, 2);
	cr_assert_str_eq(airlock_env_get(&e, "A"), "replaced");
	cr_assert_str_eq(e.vars[0].name, "A", "replacement keeps the position");

	char name[] = "C";
	must(airlock_env_add(&e, name, ""));
	name[0] = 'D';
	cr_assert_str_eq(airlock_env_get(&e, "C"), "");
	cr_assert_null(airlock_env_get(&e, "D"));
	cr_assert_null(airlock_env_get(&e, "a"), "names are case-sensitive");
	cr_assert_null(airlock_env_get(&e, NULL));
	cr_assert_null(airlock_env_get(NULL, "A"));

	cr_assert_eq(airlock_env_add(&e, NULL, "x"), -EINVAL);
	cr_assert_eq(airlock_env_add(&e, "X", NULL), -EINVAL);
	cr_assert_eq(e.n, 3);
	airlock_env_clear(&e);
}

Test(copy, egress_policy_is_deep)
{
	uint16_t p0[] = { 443 }, p1[] = { 80, 8080 };
	airlock_egress_destination d[] = {
		{ .host = "a.example.com", .ports = p0, .n_ports = 1 },
		{ .host = "*.example.org", .ports = p1, .n_ports = 2 },
	};
	airlock_egress_policy src = { .mode = AIRLOCK_EGRESS_ALLOWLIST, .destinations = d,
		                      .n_destinations = 2 };
	airlock_egress_policy dst = { 0 };
	cr_assert_eq(airlock_egress_policy_copy(&dst, &src), 0);
	cr_assert_eq(dst.mode, AIRLOCK_EGRESS_ALLOWLIST);
	cr_assert_eq(dst.n_destinations, 2);
	for (size_t i = 0; i < 2; i++) {
		cr_assert_str_eq(dst.destinations[i].host, d[i].host);
		cr_assert_neq(dst.destinations[i].host, d[i].host, "the name is copied, not shared");
		cr_assert_neq(dst.destinations[i].ports, d[i].ports);
		cr_assert_eq(dst.destinations[i].n_ports, d[i].n_ports);
		cr_assert_arr_eq(dst.destinations[i].ports, d[i].ports, d[i].n_ports * sizeof(uint16_t));
	}
	airlock_egress_policy_clear(&dst);
	/* deny with nothing listed */
	airlock_egress_policy deny = { .mode = AIRLOCK_EGRESS_DENY };
	cr_assert_eq(airlock_egress_policy_copy(&dst, &deny), 0);
	cr_assert_eq(dst.mode, AIRLOCK_EGRESS_DENY);
	cr_assert_eq(dst.n_destinations, 0);
	cr_assert_null(dst.destinations);
}

/* One grammar for every door: a policy built in code and validated (as a
 * spec carries it, and as the encoder checks it) meets the same host and
 * port rules as the operator's YAML, with the caller's error class. */
Test(validate, egress_runs_the_grammar_rules)
{
	uint16_t p443[] = { 443 }, twice[] = { 443, 443 };
	static const char *const bad_hosts[] = { "*.com", "A.Example.COM", "10.0.0.5", "*.*",
		                                 "*.co.uk" };
	for (size_t i = 0; i < sizeof(bad_hosts) / sizeof(bad_hosts[0]); i++) {
		airlock_egress_destination d = { .host = (char *)bad_hosts[i], .ports = p443, .n_ports = 1 };
		airlock_egress_policy p = { .mode = AIRLOCK_EGRESS_ALLOWLIST, .destinations = &d,
			                    .n_destinations = 1 };
		airlock_error err = { 0 };
		cr_assert_lt(airlock_egress_policy_validate(&p, &err), 0, "%s passed", bad_hosts[i]);
		cr_assert_eq(err.cls, AIRLOCK_ERR_DECODE, "%s: class %d", bad_hosts[i], (int)err.cls);
	}
	airlock_egress_destination two[] = {
		{ .host = "a.example.com", .ports = p443, .n_ports = 1 },
		{ .host = "a.example.com", .ports = p443, .n_ports = 1 },
	};
	airlock_egress_policy dup = { .mode = AIRLOCK_EGRESS_ALLOWLIST, .destinations = two,
		                      .n_destinations = 2 };
	cr_assert_lt(airlock_egress_policy_validate(&dup, NULL), 0, "a host twice passed");
	airlock_egress_destination dp = { .host = "a.example.com", .ports = twice, .n_ports = 2 };
	airlock_egress_policy dports = { .mode = AIRLOCK_EGRESS_ALLOWLIST, .destinations = &dp,
		                         .n_destinations = 1 };
	cr_assert_lt(airlock_egress_policy_validate(&dports, NULL), 0, "a port twice passed");
	/* In a spec, the spec's class. */
	airlock_environment_spec s;
	make_spec(&s, false, true);
	char *keep = s.egress.destinations[0].host;
	s.egress.destinations[0].host = (char *)"*.com";
	airlock_error err = { 0 };
	cr_assert_lt(airlock_environment_spec_validate(&s, &err), 0);
	cr_assert_eq(err.cls, AIRLOCK_ERR_EXECUTION_REJECTED, "%s", err.message);
	cr_assert(strstr(err.message, "EnvironmentSpec.egress"), "%s", err.message);
	s.egress.destinations[0].host = keep;
	airlock_environment_spec_clear(&s);
}
