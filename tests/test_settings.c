/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Settings: the embedded defaults against the specification's table, the
 * YAML schema (unknown keys, duplicates, types, enum values), byte suffixes,
 * the image digest rule, environment overrides, limits against ceilings,
 * and the tier-1 list with its fail-closed file.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/tiers.h"
#include "airlock/settings.h"

#define GiB (1024LL * 1024 * 1024)
#define DIGEST "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static int parse(const char *doc, airlock_settings *s, airlock_error *err)
{
	return airlock_settings_parse("t.yaml", doc, strlen(doc), s, err);
}

/* Parse a document that must fail, and return the error. */
static airlock_error parse_fails(const char *doc)
{
	airlock_settings s;
	memset(&s, 0xa5, sizeof(s));
	airlock_settings before = s;
	airlock_error err = { 0 };
	int r = parse(doc, &s, &err);
	cr_expect_eq(r, airlock_errcode(AIRLOCK_ERR_CONFIG), "document should fail: [%s] (rc %d)", doc, r);
	cr_expect_eq(memcmp(&s, &before, sizeof(s)), 0, "ret written on failure: [%s]", doc);
	if (r == 0)
		airlock_settings_clear(&s);
	return err;
}

static airlock_error check_fails(const char *doc)
{
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(parse(doc, &s, &err), 0, "[%s]: %s", doc, err.message);
	int r = airlock_settings_check(&s, &err);
	cr_expect_eq(r, airlock_errcode(AIRLOCK_ERR_CONFIG), "check should fail: [%s]", doc);
	airlock_settings_clear(&s);
	return err;
}

#define HAS(err, sub) cr_expect(strstr((err).message, (sub)) != NULL, "\"%s\" lacks \"%s\"", (err).message, (sub))

/* ---- defaults ------------------------------------------------------------- */

Test(settings, defaults_equal_spec_table)
{
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_default(&s, &err), 0, "%s", err.message);

	cr_expect_eq(s.deployment_mode, AIRLOCK_DEPLOYMENT_DEVELOPMENT);
	cr_expect_str_eq(s.auth_mode, "dev");
	cr_expect_eq(s.mechanism, AIRLOCK_MECHANISM_NATIVE);
	cr_expect_null(s.image);
	cr_expect_eq(s.hard_cap_seconds, 1800);
	cr_expect_str_eq(s.image_store, "/var/lib/airlock/images");

	/* the specification, "Resource limits, as numbers". */
	const airlock_limit_table *d = &s.defaults, *c = &s.ceilings;
	cr_expect_eq(d->limits.cpu_millicores, 2000);
	cr_expect_eq(d->limits.memory_bytes, 2 * GiB);
	cr_expect_eq(d->limits.pids_max, 512);
	cr_expect_eq(d->limits.workspace_bytes, 4 * GiB);
	cr_expect_eq(d->limits.inodes_max, 100000);
	cr_expect_eq(d->limits.wall_clock_seconds, 300);
	cr_expect_eq(d->files_changed_max, 1000);
	cr_expect_eq(d->start_budget_seconds, 30);

	cr_expect_eq(c->limits.cpu_millicores, 0); /* operator */
	cr_expect_eq(c->limits.memory_bytes, 0);   /* operator */
	cr_expect_eq(c->limits.pids_max, 4096);
	cr_expect_eq(c->limits.workspace_bytes, 0); /* operator */
	cr_expect_eq(c->limits.inodes_max, 1000000);
	cr_expect_eq(c->limits.wall_clock_seconds, 1800);
	cr_expect_eq(c->files_changed_max, 10000);
	cr_expect_eq(c->start_budget_seconds, 60);

	cr_expect_eq(s.n_passthrough, 0);
	cr_expect_null(s.passthrough_file);
	cr_expect_null(s.tier1_error);

	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	airlock_settings_clear(&s);
	airlock_settings_clear(&s); /* twice is safe */
}

Test(settings, empty_documents_are_the_defaults)
{
	const char *docs[] = { "", "# only a comment\n", "---\n", "---\n...\n", "\n\n" };
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		airlock_settings s;
		airlock_error err = { 0 };
		cr_assert_eq(parse(docs[i], &s, &err), 0, "[%s]: %s", docs[i], err.message);
		cr_expect_eq(s.mechanism, AIRLOCK_MECHANISM_NATIVE);
		cr_expect_eq(s.defaults.limits.pids_max, 512);
		airlock_settings_clear(&s);
	}
}

/* ---- parsing ----------------------------------------------------------------- */

Test(settings, full_document)
{
	static const char doc[] =
		"deployment_mode: production\n"
		"auth_mode: oidc\n"
		"sandbox:\n"
		"  mechanism: gvisor\n"
		"  image: " DIGEST "\n"
		"  hard_cap_seconds: 900\n"
		"  image_store: /srv/airlock/images\n"
		"limits:\n"
		"  defaults:\n"
		"    cpu_millicores: 1500\n"
		"    memory_bytes: 512M\n"
		"    pids_max: 256\n"
		"    workspace_bytes: 1G\n"
		"    inodes_max: 5000\n"
		"    wall_clock_seconds: 120\n"
		"    files_changed_max: 50\n"
		"    start_budget_seconds: 10\n"
		"  ceilings: { cpu_millicores: 4000, memory_bytes: 8G, workspace_bytes: 16G }\n"
		"environment:\n"
		"  passthrough:\n"
		"    - HTTP_PROXY\n"
		"    - NO_PROXY\n"
		"    - TZ\n";
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(parse(doc, &s, &err), 0, "%s", err.message);
	cr_expect_eq(s.deployment_mode, AIRLOCK_DEPLOYMENT_PRODUCTION);
	cr_expect_str_eq(s.auth_mode, "oidc");
	cr_expect_eq(s.mechanism, AIRLOCK_MECHANISM_GVISOR);
	cr_expect_str_eq(s.image, DIGEST);
	cr_expect_eq(s.hard_cap_seconds, 900);
	cr_expect_str_eq(s.image_store, "/srv/airlock/images");
	cr_expect_eq(s.defaults.limits.cpu_millicores, 1500);
	cr_expect_eq(s.defaults.limits.memory_bytes, 512LL * 1024 * 1024);
	cr_expect_eq(s.defaults.limits.pids_max, 256);
	cr_expect_eq(s.defaults.limits.workspace_bytes, GiB);
	cr_expect_eq(s.defaults.limits.inodes_max, 5000);
	cr_expect_eq(s.defaults.limits.wall_clock_seconds, 120);
	cr_expect_eq(s.defaults.files_changed_max, 50);
	cr_expect_eq(s.defaults.start_budget_seconds, 10);
	cr_expect_eq(s.ceilings.limits.cpu_millicores, 4000);
	cr_expect_eq(s.ceilings.limits.memory_bytes, 8 * GiB);
	cr_expect_eq(s.ceilings.limits.workspace_bytes, 16 * GiB);
	/* Keys not in the file keep the embedded defaults. */
	cr_expect_eq(s.ceilings.limits.pids_max, 4096);
	cr_expect_eq(s.ceilings.start_budget_seconds, 60);
	cr_assert_eq(s.n_passthrough, 3);
	cr_expect_str_eq(s.passthrough[0], "HTTP_PROXY");
	cr_expect_str_eq(s.passthrough[1], "NO_PROXY");
	cr_expect_str_eq(s.passthrough[2], "TZ");
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	airlock_settings_clear(&s);
}

Test(settings, unknown_key_names_file_line_and_key)
{
	airlock_error err = parse_fails("deployment_mode: development\n"
	                                "sandbox:\n"
	                                "  mechanism: native\n"
	                                "  mechansim: fake\n");
	HAS(err, "t.yaml:4:");
	HAS(err, "unknown key");
	HAS(err, "sandbox.mechansim");

	err = parse_fails("limits:\n  defaults:\n\n    pid_max: 5\n");
	HAS(err, "t.yaml:4:");
	HAS(err, "limits.defaults.pid_max");

	err = parse_fails("egress:\n  mode: deny\n");
	HAS(err, "t.yaml:1:");
	HAS(err, "\"egress\"");

	/* A key that is itself odd bytes is escaped in the message. */
	err = parse_fails("\"\\x1b[31mred\": 1\n");
	cr_expect(strchr(err.message, 0x1b) == NULL, "%s", err.message);
}

Test(settings, unknown_key_through_a_file)
{
	char path[] = "/tmp/airlock-settings-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	static const char doc[] = "# comment\nauth_mode: dev\nsurprise: yes\n";
	cr_assert_eq(write(fd, doc, strlen(doc)), (ssize_t)strlen(doc));
	close(fd);
	airlock_settings s;
	airlock_error err = { 0 };
	cr_expect_eq(airlock_settings_load(path, &s, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	char want[128];
	snprintf(want, sizeof(want), "%s:3:", path);
	HAS(err, want);
	HAS(err, "surprise");
	unlink(path);

	cr_expect_eq(airlock_settings_load("/nonexistent/airlock.yaml", &s, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	HAS(err, "/nonexistent/airlock.yaml");
	cr_expect_eq(airlock_settings_load("/tmp", &s, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
}

Test(settings, duplicate_keys)
{
	airlock_error err = parse_fails("auth_mode: dev\nsandbox:\n  mechanism: native\nauth_mode: token\n");
	HAS(err, "t.yaml:4:");
	HAS(err, "duplicate key \"auth_mode\"");
	HAS(err, "line 1");

	err = parse_fails("sandbox:\n  mechanism: native\n  mechanism: gvisor\n");
	HAS(err, "sandbox.mechanism");

	err = parse_fails("sandbox: {}\nsandbox: {}\n");
	HAS(err, "duplicate");

	err = parse_fails("limits:\n  ceilings: { pids_max: 1, pids_max: 2 }\n");
	HAS(err, "limits.ceilings.pids_max");

	err = parse_fails("environment:\n  passthrough: [TZ, TZ]\n");
	HAS(err, "TZ");
}

Test(settings, wrong_types_and_values)
{
	static const struct {
		const char *doc, *has;
	} cases[] = {
		{ "- just\n- a list\n", "must be a mapping" },
		{ "plain scalar\n", "must be a mapping" },
		{ "sandbox: native\n", "sandbox: expected a mapping" },
		{ "sandbox: [native]\n", "expected a mapping" },
		{ "deployment_mode: [production]\n", "expected a single value" },
		{ "deployment_mode: {a: b}\n", "expected a single value" },
		{ "deployment_mode: staging\n", "deployment_mode: unknown value \"staging\"" },
		{ "deployment_mode: Production\n", "unknown value" },
		{ "deployment_mode:\n", "a value is required" },
		{ "deployment_mode: ~\n", "a value is required" },
		{ "sandbox:\n  mechanism: kvm\n", "sandbox.mechanism: unknown value \"kvm\"" },
		{ "sandbox:\n  mechanism: Docker\n", "unknown value" },
		{ "sandbox:\n  mechanism: null\n", "a value is required" },
		{ "sandbox:\n  hard_cap_seconds: abc\n", "sandbox.hard_cap_seconds" },
		{ "sandbox:\n  hard_cap_seconds: \"1800\"\n", "decimal integer" },
		{ "sandbox:\n  hard_cap_seconds: -5\n", "decimal integer" },
		{ "sandbox:\n  hard_cap_seconds: 0x10\n", "decimal integer" },
		{ "sandbox:\n  hard_cap_seconds: 1.5\n", "decimal integer" },
		{ "sandbox:\n  hard_cap_seconds: 99999999999999999999\n", "decimal integer" },
		{ "sandbox:\n  image: \"\"\n", "must not be empty" },
		{ "sandbox:\n  image: [a]\n", "expected a single value" },
		{ "sandbox:\n  image_store: \"a\\0b\"\n", "NUL" },
		{ "limits:\n  defaults: 5\n", "limits.defaults: expected a mapping" },
		{ "limits:\n  defaults:\n    memory_bytes: 2GB\n", "limits.defaults.memory_bytes" },
		{ "limits:\n  defaults:\n    memory_bytes: 2g\n", "K, M or G" },
		{ "limits:\n  defaults:\n    memory_bytes: \"2G\"\n", "K, M or G" },
		{ "limits:\n  defaults:\n    pids_max: 10K\n", "decimal integer" },
		{ "auth_mode: \"dev mode\"\n", "auth_mode: invalid value" },
		{ "auth_mode: 5\n", NULL }, /* a word made of digits is a word: accepted */
		{ "environment:\n  passthrough: HTTP_PROXY\n", "expected a list" },
		{ "environment:\n  passthrough: [[A]]\n", "expected a variable name" },
		{ "environment:\n  passthrough: [\"1BAD\"]\n", "not a valid environment variable name" },
		{ "environment:\n  passthrough: [\"A-B\"]\n", "not a valid environment variable name" },
		{ "environment:\n  passthrough: [HTTP_PROXY]\n  passthrough_file: /etc/x\n", "cannot both be set" },
		{ "a: &anchor 1\n", "unknown key" },
		{ "sandbox: &s {}\n", "anchors are not allowed" },
		{ "sandbox: !!map {}\n", "tags are not allowed" },
		{ "x: &a [1]\nsandbox: *a\n", "unknown key" },
		{ "auth_mode: &a dev\n", "anchors" },
		{ "sandbox: {}\nlimits: *a\n", "aliases are not allowed" },
		{ "deployment_mode: development\n---\nauth_mode: dev\n", "only one YAML document" },
		{ "deployment_mode: [\n", NULL },
		{ "\t- tab\n", "not valid YAML" },
		{ "[1, 2]: x\n", "keys must be plain names" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		airlock_settings s;
		airlock_error err = { 0 };
		int r = parse(cases[i].doc, &s, &err);
		if (strcmp(cases[i].doc, "auth_mode: 5\n") == 0) {
			cr_expect_eq(r, 0, "%s", err.message);
			if (r == 0)
				airlock_settings_clear(&s);
			continue;
		}
		cr_expect_eq(r, airlock_errcode(AIRLOCK_ERR_CONFIG), "[%s] rc %d", cases[i].doc, r);
		if (r == 0) {
			airlock_settings_clear(&s);
			continue;
		}
		cr_expect(strncmp(err.message, "t.yaml:", 7) == 0, "[%s] no file:line in \"%s\"",
		          cases[i].doc, err.message);
		if (cases[i].has)
			cr_expect(strstr(err.message, cases[i].has) != NULL, "[%s] \"%s\" lacks \"%s\"",
			          cases[i].doc, err.message, cases[i].has);
	}
}

Test(settings, null_sections_are_empty)
{
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(parse("sandbox:\nlimits:\n  defaults: ~\nenvironment:\n  passthrough:\n", &s, &err), 0,
	             "%s", err.message);
	cr_expect_eq(s.mechanism, AIRLOCK_MECHANISM_NATIVE);
	cr_expect_eq(s.n_passthrough, 0);
	airlock_settings_clear(&s);
}

Test(settings, input_size_cap)
{
	size_t len = (1u << 20) + 1;
	char *big = malloc(len);
	cr_assert_not_null(big);
	memset(big, '#', len);
	airlock_settings s;
	airlock_error err = { 0 };
	cr_expect_eq(airlock_settings_parse("big.yaml", big, len, &s, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	HAS(err, "larger than");
	/* Just under the cap is read (a comment, so the defaults). */
	big[0] = '#';
	big[len - 2] = '\n';
	cr_expect_eq(airlock_settings_parse("big.yaml", big, len - 1, &s, &err), 0, "%s", err.message);
	airlock_settings_clear(&s);
	free(big);
}

/* ---- byte values ------------------------------------------------------------- */

Test(settings, byte_suffixes)
{
	static const struct {
		const char *in;
		int64_t want;
	} ok[] = {
		{ "0", 0 },
		{ "7", 7 },
		{ "1K", 1024 },
		{ "512M", 512LL << 20 },
		{ "2G", 2147483648LL },
		{ "4G", 4294967296LL },
		{ "0G", 0 },
		{ "007", 7 },
		{ "9223372036854775807", INT64_MAX },
		{ "8589934591G", 8589934591LL << 30 },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		int64_t v = -1;
		airlock_error err = { 0 };
		cr_expect_eq(airlock_parse_bytes(ok[i].in, "memory_bytes", &v, &err), 0, "[%s] %s", ok[i].in,
		             err.message);
		cr_expect_eq(v, ok[i].want, "[%s] got %lld", ok[i].in, (long long)v);
	}
	static const char *const bad[] = {
		"", "G", "-1", "+1", " 2G", "2G ", "2 G", "2GB", "2g", "2KiB", "1.5G", "0x10",
		"9223372036854775808", "8589934592G", "99999999999999999999", "2T", "1e9", "K1",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int64_t v = 42;
		airlock_error err = { 0 };
		cr_expect_eq(airlock_parse_bytes(bad[i], "memory_bytes", &v, &err),
		             airlock_errcode(AIRLOCK_ERR_DECODE), "[%s] accepted", bad[i]);
		cr_expect_eq(v, 42, "[%s] ret written on failure", bad[i]);
		HAS(err, "memory_bytes");
	}
	int64_t v;
	cr_expect_eq(airlock_parse_bytes(NULL, "x", &v, NULL), airlock_errcode(AIRLOCK_ERR_DECODE));
}

/* ---- the image ----------------------------------------------------------------- */

Test(settings, image_tag_refused_with_reason)
{
	static const char *const tags[] = {
		"debian:12", "registry/x:latest", "debian", "ghcr.io/org/img:v1.2.3", "latest",
	};
	for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
		char doc[256];
		snprintf(doc, sizeof(doc), "sandbox:\n  image: \"%s\"\n", tags[i]);
		airlock_error err = check_fails(doc);
		HAS(err, tags[i]);
		HAS(err, "tag");
		HAS(err, "mutable pointer");
		HAS(err, "digest");
	}
	/* A digest-shaped value that is not quite one says so. */
	static const char *const near[] = {
		"sha256:0123", "sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
		DIGEST "0", "sha256:", "sha512:0123456789abcdef",
	};
	for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++) {
		char doc[256];
		snprintf(doc, sizeof(doc), "sandbox:\n  image: \"%s\"\n", near[i]);
		airlock_error err = check_fails(doc);
		HAS(err, "digest");
	}
	/* name@digest still carries a name: refused, pointing at the digest. */
	airlock_error err = check_fails("sandbox:\n  image: \"debian@" DIGEST "\"\n");
	HAS(err, "digest alone");
}

Test(settings, image_digest_accepted_and_printed)
{
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(parse("sandbox:\n  image: " DIGEST "\n", &s, &err), 0, "%s", err.message);
	cr_expect_str_eq(s.image, DIGEST);
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_not_null(f);
	airlock_settings_print(&s, f);
	fclose(f);
	/* The resolved digest is a fact in the startup log (spec, EnvironmentSpec). */
	cr_expect(strstr(buf, "image: " DIGEST "\n") != NULL, "%s", buf);
	free(buf);
	airlock_settings_clear(&s);
}

/* The printed settings are themselves a settings document that parses back
 * to the same values. */
Test(settings, print_round_trips)
{
	static const char doc[] =
		"deployment_mode: production\n"
		"auth_mode: token\n"
		"sandbox:\n"
		"  mechanism: microvm\n"
		"  image: " DIGEST "\n"
		"  hard_cap_seconds: 600\n"
		"  image_store: \"/srv/odd dir/#images\"\n"
		"limits:\n"
		"  defaults: { memory_bytes: 1G, pids_max: 100 }\n"
		"  ceilings: { memory_bytes: 4G }\n"
		"environment:\n"
		"  passthrough: [HTTP_PROXY, TZ]\n";
	airlock_settings a, b;
	airlock_error err = { 0 };
	cr_assert_eq(parse(doc, &a, &err), 0, "%s", err.message);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	airlock_settings_print(&a, f);
	fclose(f);
	cr_assert_eq(airlock_settings_parse("printed", buf, len, &b, &err), 0, "%s\n%s", err.message, buf);
	cr_expect_eq(a.deployment_mode, b.deployment_mode);
	cr_expect_str_eq(a.auth_mode, b.auth_mode);
	cr_expect_eq(a.mechanism, b.mechanism);
	cr_expect_str_eq(a.image, b.image);
	cr_expect_eq(a.hard_cap_seconds, b.hard_cap_seconds);
	cr_expect_str_eq(a.image_store, b.image_store);
	cr_expect_eq(memcmp(&a.defaults, &b.defaults, sizeof(a.defaults)), 0);
	cr_expect_eq(memcmp(&a.ceilings, &b.ceilings, sizeof(a.ceilings)), 0);
	cr_assert_eq(a.n_passthrough, b.n_passthrough);
	for (size_t i = 0; i < a.n_passthrough; i++)
		cr_expect_str_eq(a.passthrough[i], b.passthrough[i]);
	free(buf);
	airlock_settings_clear(&a);
	airlock_settings_clear(&b);
}

/* ---- environment overrides ----------------------------------------------------- */

Test(settings, env_overrides)
{
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_default(&s, &err), 0);
	char *envp[] = {
		(char *)"HOME=/root",
		(char *)"AIRLOCK_DEPLOYMENT_MODE=production",
		(char *)"AIRLOCK_AUTH_MODE=token",
		(char *)"AIRLOCK_SANDBOX_MECHANISM=gvisor",
		(char *)"AIRLOCK_SANDBOX_IMAGE=" DIGEST,
		(char *)"AIRLOCK_HARD_CAP_SECONDS=600",
		(char *)"AIRLOCK_IMAGE_STORE=/srv/images",
		/* Only the first occurrence counts, as with getenv. */
		(char *)"AIRLOCK_SANDBOX_MECHANISM=native",
		/* Not an override: the name must match exactly. */
		(char *)"AIRLOCK_SANDBOX_MECHANISMX=fake",
		(char *)"AIRLOCK_HARD_CAP=1",
		NULL,
	};
	cr_assert_eq(airlock_settings_apply_env(&s, envp, &err), 0, "%s", err.message);
	cr_expect_eq(s.deployment_mode, AIRLOCK_DEPLOYMENT_PRODUCTION);
	cr_expect_str_eq(s.auth_mode, "token");
	cr_expect_eq(s.mechanism, AIRLOCK_MECHANISM_GVISOR);
	cr_expect_str_eq(s.image, DIGEST);
	cr_expect_eq(s.hard_cap_seconds, 600);
	cr_expect_str_eq(s.image_store, "/srv/images");
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	airlock_settings_clear(&s);

	/* No overrides, no change. */
	cr_assert_eq(airlock_settings_default(&s, &err), 0);
	char *none[] = { (char *)"PATH=/bin", NULL };
	cr_expect_eq(airlock_settings_apply_env(&s, none, &err), 0);
	cr_expect_eq(airlock_settings_apply_env(&s, NULL, &err), 0);
	cr_expect_eq(s.mechanism, AIRLOCK_MECHANISM_NATIVE);
	airlock_settings_clear(&s);
}

Test(settings, env_override_invalid_leaves_settings_unchanged)
{
	static const struct {
		const char *var, *has;
	} bad[] = {
		{ "AIRLOCK_SANDBOX_MECHANISM=kvm", "AIRLOCK_SANDBOX_MECHANISM" },
		{ "AIRLOCK_DEPLOYMENT_MODE=prod", "AIRLOCK_DEPLOYMENT_MODE" },
		{ "AIRLOCK_AUTH_MODE=", "AIRLOCK_AUTH_MODE" },
		{ "AIRLOCK_AUTH_MODE=a b", "AIRLOCK_AUTH_MODE" },
		{ "AIRLOCK_HARD_CAP_SECONDS=ten", "AIRLOCK_HARD_CAP_SECONDS" },
		{ "AIRLOCK_HARD_CAP_SECONDS=-1", "AIRLOCK_HARD_CAP_SECONDS" },
		{ "AIRLOCK_IMAGE_STORE=", "AIRLOCK_IMAGE_STORE" },
		{ "AIRLOCK_SANDBOX_IMAGE=", "AIRLOCK_SANDBOX_IMAGE" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		airlock_settings s;
		airlock_error err = { 0 };
		cr_assert_eq(airlock_settings_default(&s, &err), 0);
		/* A valid override earlier in the list is not applied either. */
		char *envp[] = { (char *)"AIRLOCK_SANDBOX_MECHANISM=gvisor", (char *)"AIRLOCK_IMAGE_STORE=/elsewhere",
			         (char *)bad[i].var, NULL };
		if (strncmp(bad[i].var, "AIRLOCK_SANDBOX_MECHANISM=", 26) == 0 ||
		    strncmp(bad[i].var, "AIRLOCK_IMAGE_STORE=", 20) == 0) {
			envp[0] = (char *)bad[i].var;
			envp[1] = (char *)"AIRLOCK_AUTH_MODE=token";
			envp[2] = NULL;
		}
		cr_expect_eq(airlock_settings_apply_env(&s, envp, &err), airlock_errcode(AIRLOCK_ERR_CONFIG),
		             "[%s]", bad[i].var);
		HAS(err, bad[i].has);
		cr_expect_eq(s.mechanism, AIRLOCK_MECHANISM_NATIVE, "[%s]", bad[i].var);
		cr_expect_str_eq(s.image_store, "/var/lib/airlock/images", "[%s]", bad[i].var);
		cr_expect_str_eq(s.auth_mode, "dev", "[%s]", bad[i].var);
		airlock_settings_clear(&s);
	}
}

Test(settings, env_override_image_tag_refused_at_check)
{
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_default(&s, &err), 0);
	char *envp[] = { (char *)"AIRLOCK_SANDBOX_IMAGE=debian:12", NULL };
	cr_assert_eq(airlock_settings_apply_env(&s, envp, &err), 0);
	cr_expect_eq(airlock_settings_check(&s, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	HAS(err, "mutable pointer");
	airlock_settings_clear(&s);
}

/* ---- limits -------------------------------------------------------------------- */

Test(settings, default_above_ceiling_refused)
{
	airlock_error err = check_fails("limits:\n  defaults:\n    pids_max: 4097\n");
	HAS(err, "limits.defaults.pids_max=4097");
	HAS(err, "limits.ceilings.pids_max=4096");

	err = check_fails("limits:\n  defaults:\n    wall_clock_seconds: 3600\n");
	HAS(err, "wall_clock_seconds");

	err = check_fails("limits:\n  defaults: { memory_bytes: 8G }\n  ceilings: { memory_bytes: 4G }\n");
	HAS(err, "memory_bytes");

	err = check_fails("limits:\n  defaults:\n    start_budget_seconds: 61\n");
	HAS(err, "start_budget_seconds");

	/* Zero is a forgotten limit, never unlimited. */
	err = check_fails("limits:\n  defaults:\n    inodes_max: 0\n");
	HAS(err, "limits.defaults.inodes_max=0");
	err = check_fails("sandbox:\n  hard_cap_seconds: 0\n");
	HAS(err, "hard_cap_seconds");

	/* At the ceiling is fine; with no ceiling (0) any positive value is. */
	airlock_settings s;
	cr_assert_eq(parse("limits:\n  defaults: { pids_max: 4096, memory_bytes: 64G, cpu_millicores: 64000 }\n", &s, &err), 0);
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	airlock_settings_clear(&s);

	/* files_changed_max is at most the one cap both sides of the service
	 * share (caps.h), even with no ceiling set. */
	err = check_fails("limits:\n  defaults:\n    files_changed_max: 10001\n"
	                  "  ceilings:\n    files_changed_max: 0\n");
	HAS(err, "limits.defaults.files_changed_max=10001: at most 10000");
	err = check_fails("limits:\n  ceilings:\n    files_changed_max: 20000\n");
	HAS(err, "limits.ceilings.files_changed_max=20000");

	/* A negative ceiling cannot come from YAML but can from code. */
	cr_assert_eq(airlock_settings_default(&s, &err), 0);
	s.ceilings.limits.cpu_millicores = -1;
	cr_expect_eq(airlock_settings_check(&s, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	HAS(err, "limits.ceilings.cpu_millicores");
	airlock_settings_clear(&s);
}

Test(settings, other_startup_checks)
{
	airlock_error err = check_fails("sandbox:\n  image_store: relative/path\n");
	HAS(err, "image_store");
	airlock_settings s;
	cr_assert_eq(airlock_settings_default(&s, &err), 0);
	free(s.auth_mode);
	s.auth_mode = NULL;
	cr_expect_eq(airlock_settings_check(&s, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	HAS(err, "auth_mode");
	airlock_settings_clear(&s);
	cr_expect_eq(airlock_settings_check(NULL, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	airlock_settings zero = { 0 };
	cr_expect_eq(airlock_settings_check(&zero, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
}

/* ---- tier 1 -------------------------------------------------------------------- */

Test(settings, tier1_name_in_tier0_is_a_startup_error)
{
	static const char *const names[] = {
		"OPENAI_API_KEY", "DATABASE_URL", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "MY_SERVICE_PASSWORD",
		"AIRLOCK_SERVICE_TOKEN", "SSH_AUTH_SOCK", "openai_api_key",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char doc[256];
		snprintf(doc, sizeof(doc), "environment:\n  passthrough: [HTTP_PROXY, %s, TZ]\n", names[i]);
		airlock_error err = check_fails(doc);
		HAS(err, names[i]);
		HAS(err, "tier-0");
		HAS(err, "startup refused");
	}
}

static char *write_temp(const char *content)
{
	char *path = strdup("/tmp/airlock-tier1-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	size_t len = strlen(content);
	cr_assert_eq(write(fd, content, len), (ssize_t)len);
	close(fd);
	return path;
}

static void settings_with_file(airlock_settings *s, const char *path)
{
	airlock_error err = { 0 };
	char doc[512];
	snprintf(doc, sizeof(doc), "environment:\n  passthrough_file: \"%s\"\n", path);
	cr_assert_eq(parse(doc, s, &err), 0, "%s", err.message);
	cr_assert_str_eq(s->passthrough_file, path);
}

Test(settings, tier1_file_good)
{
	char *path = write_temp("# tier-1 variables for this deployment\n"
	                        "HTTP_PROXY\n"
	                        "\n"
	                        "  NO_PROXY   \n"
	                        "\tTZ\t# the time zone\n"
	                        "TZ\n"
	                        "LC_ALL\r\n"
	                        "# trailing comment");
	airlock_settings s;
	settings_with_file(&s, path);
	airlock_settings_load_tier1(&s);
	cr_expect_null(s.tier1_error, "%s", s.tier1_error);
	cr_assert_eq(s.n_passthrough, 4);
	cr_expect_str_eq(s.passthrough[0], "HTTP_PROXY");
	cr_expect_str_eq(s.passthrough[1], "NO_PROXY");
	cr_expect_str_eq(s.passthrough[2], "TZ");
	cr_expect_str_eq(s.passthrough[3], "LC_ALL");
	airlock_error err = { 0 };
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	/* The printed settings show where the names came from. */
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	airlock_settings_print(&s, f);
	fclose(f);
	cr_expect(strstr(buf, "passthrough_file:") && strstr(buf, "NO_PROXY"), "%s", buf);
	free(buf);
	airlock_settings_clear(&s);
	unlink(path);
	free(path);
}

static void expect_fail_closed(airlock_settings *s, const char *has)
{
	/* Never fails: it empties the list and says why. */
	airlock_settings_load_tier1(s);
	cr_expect_eq(s->n_passthrough, 0);
	cr_expect_null(s->passthrough);
	cr_assert_not_null(s->tier1_error);
	cr_expect(strstr(s->tier1_error, "tier 2 alone") != NULL, "%s", s->tier1_error);
	if (has)
		cr_expect(strstr(s->tier1_error, has) != NULL, "\"%s\" lacks \"%s\"", s->tier1_error, has);
	/* The startup check does not fail on it: a degraded sandbox, not a
	 * failed start. */
	airlock_error err = { 0 };
	cr_expect_eq(airlock_settings_check(s, &err), 0, "%s", err.message);
}

Test(settings, tier1_file_unreadable_fails_closed)
{
	airlock_settings s;
	settings_with_file(&s, "/nonexistent/airlock-tier1");
	/* Names present before the failed load must not survive it. */
	free(s.passthrough);
	s.passthrough = calloc(2, sizeof(char *));
	s.passthrough[0] = strdup("HTTP_PROXY");
	s.n_passthrough = 1;
	expect_fail_closed(&s, "/nonexistent/airlock-tier1");
	airlock_settings_clear(&s);

	/* A directory is not a list. */
	settings_with_file(&s, "/tmp");
	expect_fail_closed(&s, "not a regular file");
	airlock_settings_clear(&s);

	/* Unreadable by permission, where that means something (not as root). */
	if (geteuid() != 0) {
		char *path = write_temp("HTTP_PROXY\n");
		chmod(path, 0);
		settings_with_file(&s, path);
		expect_fail_closed(&s, NULL);
		airlock_settings_clear(&s);
		unlink(path);
		free(path);
	}
}

Test(settings, tier1_file_invalid_fails_closed)
{
	static const struct {
		const char *content, *has;
	} cases[] = {
		{ "HTTP_PROXY\nNOT-A-NAME\nTZ\n", ":2:" },
		{ "HTTP_PROXY TZ\n", "one name per line" },
		{ "1ABC\n", "1ABC" },
		{ "HTTP_PROXY=http://proxy:3128\n", "not a valid" },
		{ "\xff\xfe\n", "\\xff" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *path = write_temp(cases[i].content);
		airlock_settings s;
		settings_with_file(&s, path);
		expect_fail_closed(&s, cases[i].has);
		airlock_settings_clear(&s);
		unlink(path);
		free(path);
	}

	/* Too many names, and too large a file. */
	char *many = malloc(300 * 16);
	many[0] = 0;
	for (int i = 0; i < 300; i++)
		sprintf(many + strlen(many), "VAR_%d\n", i);
	char *path = write_temp(many);
	free(many);
	airlock_settings s;
	settings_with_file(&s, path);
	expect_fail_closed(&s, "more than");
	airlock_settings_clear(&s);
	unlink(path);
	free(path);

	char *huge = malloc(100 * 1024 + 1);
	memset(huge, '#', 100 * 1024);
	huge[100 * 1024] = 0;
	path = write_temp(huge);
	free(huge);
	settings_with_file(&s, path);
	expect_fail_closed(&s, "larger than");
	airlock_settings_clear(&s);
	unlink(path);
	free(path);
}

/* A tier-0 name in the file is not a read failure: it stays on the list
 * and the startup check refuses it, loudly. */
Test(settings, tier1_file_with_tier0_name_refused_at_startup)
{
	char *path = write_temp("HTTP_PROXY\nANTHROPIC_API_KEY\n");
	airlock_settings s;
	settings_with_file(&s, path);
	airlock_settings_load_tier1(&s);
	cr_expect_null(s.tier1_error);
	airlock_error err = { 0 };
	cr_expect_eq(airlock_settings_check(&s, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	HAS(err, "ANTHROPIC_API_KEY");
	airlock_settings_clear(&s);
	unlink(path);
	free(path);
}

Test(settings, tier1_no_file_is_a_noop)
{
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(parse("environment:\n  passthrough: [TZ]\n", &s, &err), 0);
	airlock_settings_load_tier1(&s);
	cr_expect_eq(s.n_passthrough, 1);
	cr_expect_null(s.tier1_error);
	airlock_settings_clear(&s);
	airlock_settings_load_tier1(NULL);
}

Test(settings, vocabularies)
{
	for (int m = 1; m < AIRLOCK_MECHANISM__MAX; m++) {
		const char *n = airlock_mechanism_name((airlock_mechanism)m);
		cr_assert_not_null(n);
		cr_expect_eq(airlock_mechanism_parse(n), (airlock_mechanism)m);
	}
	cr_expect_null(airlock_mechanism_name(AIRLOCK_MECHANISM_INVALID));
	cr_expect_null(airlock_mechanism_name(AIRLOCK_MECHANISM__MAX));
	cr_expect_eq(airlock_mechanism_parse("kvm"), AIRLOCK_MECHANISM_INVALID);
	cr_expect_eq(airlock_mechanism_parse(NULL), AIRLOCK_MECHANISM_INVALID);
	cr_expect_str_eq(airlock_deployment_mode_name(AIRLOCK_DEPLOYMENT_PRODUCTION), "production");
	cr_expect_eq(airlock_deployment_mode_parse("development"), AIRLOCK_DEPLOYMENT_DEVELOPMENT);
	cr_expect_eq(airlock_deployment_mode_parse("prod"), AIRLOCK_DEPLOYMENT_INVALID);
	cr_expect_null(airlock_deployment_mode_name(AIRLOCK_DEPLOYMENT__MAX));
}

/* The example shipped in etc/ is a valid settings file that passes the
 * startup checks as it stands. */
Test(settings, example_file_parses)
{
	const char *root = getenv("AIRLOCK_TEST_SOURCE_ROOT");
	if (!root)
		cr_skip_test("AIRLOCK_TEST_SOURCE_ROOT is not set (run through meson test)");
	char path[4096];
	snprintf(path, sizeof(path), "%s/etc/airlock.example.yaml", root);
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_load(path, &s, &err), 0, "%s", err.message);
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	airlock_settings d;
	cr_assert_eq(airlock_settings_default(&d, &err), 0);
	/* The example shows the defaults, so it must agree with them. */
	cr_expect_eq(s.mechanism, d.mechanism);
	cr_expect_eq(s.hard_cap_seconds, d.hard_cap_seconds);
	cr_expect_eq(memcmp(&s.defaults, &d.defaults, sizeof(s.defaults)), 0);
	cr_expect_eq(memcmp(&s.ceilings, &d.ceilings, sizeof(s.ceilings)), 0);
	cr_expect_eq(s.n_passthrough, 4);
	airlock_settings_clear(&s);
	airlock_settings_clear(&d);
}

/* sandbox.gvisor_platform: the same vocabulary and message from the file
 * and from the environment. */
Test(settings, gvisor_platform_from_every_door)
{
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(parse("sandbox:\n  mechanism: native\n", &s, &err), 0, "%s", err.message);
	cr_expect_eq(s.gvisor_platform, AIRLOCK_GVISOR_PLATFORM_AUTO, "auto is the default");
	airlock_settings_clear(&s);
	cr_assert_eq(parse("sandbox:\n  gvisor_platform: ptrace\n", &s, &err), 0, "%s", err.message);
	cr_expect_eq(s.gvisor_platform, AIRLOCK_GVISOR_PLATFORM_PTRACE);
	char *envp[] = { (char *)"AIRLOCK_GVISOR_PLATFORM=kvm", NULL };
	cr_assert_eq(airlock_settings_apply_env(&s, envp, &err), 0, "%s", err.message);
	cr_expect_eq(s.gvisor_platform, AIRLOCK_GVISOR_PLATFORM_KVM);
	char *bad[] = { (char *)"AIRLOCK_GVISOR_PLATFORM=systrap", NULL };
	cr_expect_lt(airlock_settings_apply_env(&s, bad, &err), 0);
	cr_expect(strstr(err.message, "sandbox.gvisor_platform") &&
	                  strstr(err.message, "expected one of auto, ptrace, kvm"),
	          "%s", err.message);
	airlock_settings_clear(&s);
	err = parse_fails("sandbox:\n  gvisor_platform: systrap\n");
	cr_expect(strstr(err.message, "t.yaml:2") && strstr(err.message, "gvisor_platform") &&
	                  strstr(err.message, "expected one of auto, ptrace, kvm"),
	          "%s", err.message);
}

/* worker: one validation from the file and the environment alike. */
Test(settings, worker_section)
{
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_default(&s, &err), 0);
	cr_expect_str_eq(s.worker.listen, "unix:/run/airlock/worker.sock");
	cr_expect_str_eq(s.worker.state_dir, "/var/lib/airlock/worker");
	cr_expect_str_eq(s.worker.database, "sqlite");
	cr_expect_null(s.worker.auth_mode); /* no default: the worker refuses to start */
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	char *envp[] = { (char *)"AIRLOCK_WORKER_AUTH_MODE=tokens",
		         (char *)"AIRLOCK_WORKER_TOKENS_FILE=/etc/t", (char *)"AIRLOCK_WORKER_LISTEN=unix:/w",
		         NULL };
	cr_assert_eq(airlock_settings_apply_env(&s, envp, &err), 0, "%s", err.message);
	cr_expect_str_eq(s.worker.auth_mode, "tokens");
	cr_expect_str_eq(s.worker.listen, "unix:/w");
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	cr_expect(airlock_settings_env_name("AIRLOCK_WORKER_DATABASE_CONNECTION_FILE"));
	char *bad[] = { (char *)"AIRLOCK_WORKER_AUTH_MODE=de v", NULL };
	cr_expect_eq(airlock_settings_apply_env(&s, bad, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	airlock_settings_clear(&s);

	cr_assert_eq(parse("worker:\n  auth_mode: dev\n  database: postgresql\n"
	                   "  database_connection_file: /etc/c\n", &s, &err), 0, "%s", err.message);
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	airlock_settings_clear(&s);

	/* dev authenticates nobody: refused in production like a development
	 * mechanism. */
	err = check_fails("deployment_mode: production\nauth_mode: token\n"
	                  "sandbox: {mechanism: gvisor}\nworker: {auth_mode: dev}\n");
	HAS(err, "startup refused: worker.auth_mode=dev");
	HAS(err, "deployment_mode=production");
	err = check_fails("worker: {auth_mode: tokens}\n");
	HAS(err, "worker.tokens_file");
	err = check_fails("worker: {auth_mode: dev, tokens_file: /t}\n");
	HAS(err, "worker.tokens_file");
	err = check_fails("worker: {tokens_file: /t}\n");
	HAS(err, "worker.auth_mode is not");
	err = check_fails("worker: {auth_mode: oidc}\n");
	HAS(err, "expected dev or tokens");
	err = check_fails("worker: {database: postgresql}\n");
	HAS(err, "worker.database_connection_file");
	err = check_fails("worker: {database_connection_file: /c}\n");
	HAS(err, "worker.database=postgresql");
	err = check_fails("worker: {database: mysql}\n");
	HAS(err, "worker.database=mysql");
	err = check_fails("worker: {state_dir: rel/dir}\n");
	HAS(err, "worker.state_dir=rel/dir");
	err = check_fails("worker: {listen: 127.0.0.1:8080}\n");
	HAS(err, "worker.listen=127.0.0.1:8080 is TCP");
	err = check_fails("worker: {listen: 'unix:rel'}\n");
	HAS(err, "worker.listen=unix:rel");
	err = check_fails("worker: {tls_cert_file: /c}\n");
	HAS(err, "go together");
	err = check_fails("worker: {service_address: nowhere}\n");
	HAS(err, "worker.service_address=nowhere");
	err = check_fails("worker: {service_tls_key_file: /k}\n");
	HAS(err, "worker.service_tls_cert_file");
	cr_assert_eq(parse("worker: {listen: 127.0.0.1:8080, tls_cert_file: /c, tls_key_file: /k,"
	                   " metrics_listen: 127.0.0.1:9465}\n", &s, &err), 0, "%s", err.message);
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	airlock_settings_clear(&s);
	err = parse_fails("worker: {bogus: 1}\n");
	HAS(err, "worker.bogus");

	/* The artifact settings: the file and the environment pass the same
	 * rules, and a refusal names the setting and its range. */
	err = check_fails("worker: {artifacts_dir: rel/store}\n");
	HAS(err, "worker.artifacts_dir=rel/store");
	err = parse_fails("worker: {artifact_size_max: -1}\n");
	HAS(err, "worker.artifact_size_max");
	err = check_fails("worker: {artifact_size_max: 1099511627777}\n");
	HAS(err, "worker.artifact_size_max=1099511627777: must be from 0 (the default) to 1099511627776");
	err = check_fails("worker: {artifact_retention_days: 3651}\n");
	HAS(err, "worker.artifact_retention_days=3651");
	err = check_fails("worker: {artifact_tenant_bytes_max: 1125899906842625}\n");
	HAS(err, "worker.artifact_tenant_bytes_max");
	err = check_fails("worker: {artifact_sweep_interval_seconds: 86401}\n");
	HAS(err, "worker.artifact_sweep_interval_seconds");
	err = check_fails("worker: {artifact_upload_unclaimed_hours: 8761}\n");
	HAS(err, "worker.artifact_upload_unclaimed_hours");
	cr_assert_eq(parse("worker: {artifacts_dir: /srv/artifacts, artifact_size_max: 1048576,"
	                   " artifact_retention_days: 7}\n", &s, &err), 0, "%s", err.message);
	char *env[] = { (char *)"AIRLOCK_WORKER_ARTIFACT_UPLOAD_UNCLAIMED_HOURS=48", NULL };
	cr_assert_eq(airlock_settings_apply_env(&s, env, &err), 0, "%s", err.message);
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	cr_expect_str_eq(s.worker.artifacts_dir, "/srv/artifacts");
	cr_expect_eq(s.worker.artifact_size_max, 1048576);
	cr_expect_eq(s.worker.artifact_retention_days, 7);
	cr_expect_eq(s.worker.artifact_upload_unclaimed_hours, 48);
	char *bad_env[] = { (char *)"AIRLOCK_WORKER_ARTIFACT_SIZE_MAX=-3", NULL };
	cr_expect_eq(airlock_settings_apply_env(&s, bad_env, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	HAS(err, "AIRLOCK_WORKER_ARTIFACT_SIZE_MAX");
	char *big_env[] = { (char *)"AIRLOCK_WORKER_ARTIFACT_SIZE_MAX=1099511627777", NULL };
	cr_assert_eq(airlock_settings_apply_env(&s, big_env, &err), 0, "%s", err.message);
	cr_expect_eq(airlock_settings_check(&s, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	HAS(err, "worker.artifact_size_max=1099511627777");
	airlock_settings_clear(&s);
}

/* The bridge's addresses: Unix sockets only (the stream carries a token
 * in the clear), the worker's two set together, from the file and from
 * the environment alike. */
Test(settings, bridge_addresses)
{
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_default(&s, &err), 0);
	cr_expect_null(s.service.bridge_address);
	cr_expect_null(s.worker.bridge_listen);
	airlock_settings_clear(&s);
	err = check_fails("service: {bridge_address: 127.0.0.1:9}\n");
	HAS(err, "service.bridge_address=127.0.0.1:9: expected unix:/absolute/path");
	err = check_fails("service: {listen: unix:/run/a.sock, bridge_address: unix:/run/a.sock}\n");
	HAS(err, "service.bridge_address=unix:/run/a.sock is service.listen");
	err = check_fails("service: {bridge_address: unix:relative}\n");
	HAS(err, "service.bridge_address=unix:relative");
	err = check_fails("worker: {bridge_listen: unix:/run/b.sock}\n");
	HAS(err, "worker.bridge_listen and worker.bridge_upstream go together");
	err = check_fails("worker: {bridge_listen: unix:/run/b.sock, bridge_upstream: h:1}\n");
	HAS(err, "worker.bridge_upstream=h:1");
	cr_assert_eq(parse("service: {bridge_address: unix:/run/b.sock}\n"
	                   "worker: {bridge_listen: unix:/run/b.sock, bridge_upstream: unix:/run/p.sock}\n",
	                   &s, &err), 0, "%s", err.message);
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	cr_expect_str_eq(s.worker.bridge_upstream, "unix:/run/p.sock");
	char *env[] = { "AIRLOCK_SERVICE_BRIDGE_ADDRESS=unix:/run/other.sock",
		        "AIRLOCK_WORKER_BRIDGE_UPSTREAM=10.0.0.1:80", NULL };
	cr_assert_eq(airlock_settings_apply_env(&s, env, &err), 0, "%s", err.message);
	cr_expect_str_eq(s.service.bridge_address, "unix:/run/other.sock");
	cr_expect_neq(airlock_settings_check(&s, &err), 0);
	HAS(err, "worker.bridge_upstream=10.0.0.1:80");
	airlock_settings_clear(&s);
}

/* The reaper's settings: off by default, its credential required with an
 * address and TLS with a TCP one, its numbers in range, from the file and
 * from the environment alike. */
Test(settings, reaper_section)
{
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_default(&s, &err), 0);
	cr_expect_null(s.service.reaper_address);
	cr_expect_eq(s.service.reaper_interval_seconds, 60);
	cr_expect_eq(s.service.reaper_destroy_alert_after, 3);
	airlock_settings_clear(&s);

	err = check_fails("service: {reaper_address: unix:/run/w.sock}\n");
	HAS(err, "service.reaper_credential_file is required");
	err = check_fails("service: {reaper_address: 127.0.0.1:9, reaper_credential_file: /t}\n");
	HAS(err, "service.reaper_tls_ca_file is required");
	err = check_fails("service: {reaper_address: nowhere, reaper_credential_file: /t}\n");
	HAS(err, "service.reaper_address=nowhere");
	err = check_fails("service: {reaper_credential_file: /t}\n");
	HAS(err, "need service.reaper_address");
	err = check_fails("service: {reaper_interval_seconds: 0}\n");
	HAS(err, "service.reaper_interval_seconds=0");
	err = check_fails("service: {reaper_interval_seconds: 86401}\n");
	HAS(err, "service.reaper_interval_seconds=86401");
	err = check_fails("service: {reaper_destroy_alert_after: 1001}\n");
	HAS(err, "service.reaper_destroy_alert_after=1001");
	cr_assert_eq(parse("service: {reaper_address: 127.0.0.1:9, reaper_credential_file: /t,"
	                   " reaper_tls_ca_file: /ca, reaper_interval_seconds: 2}\n"
	                   "worker: {reaper_credential_file: /t}\n", &s, &err), 0, "%s", err.message);
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	cr_expect_eq(s.service.reaper_interval_seconds, 2);
	cr_expect_str_eq(s.worker.reaper_credential_file, "/t");
	char *env[] = { "AIRLOCK_SERVICE_REAPER_INTERVAL_SECONDS=7",
		        "AIRLOCK_SERVICE_REAPER_DESTROY_ALERT_AFTER=0", NULL };
	cr_assert_eq(airlock_settings_apply_env(&s, env, &err), 0, "%s", err.message);
	cr_expect_eq(s.service.reaper_interval_seconds, 7);
	cr_expect_neq(airlock_settings_check(&s, &err), 0);
	cr_expect(strstr(err.message, "service.reaper_destroy_alert_after=0"), "%s", err.message);
	airlock_settings_clear(&s);
}
