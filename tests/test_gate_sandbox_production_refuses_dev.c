/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gate.sandbox.production_refuses_dev (the specification, "Hard gates"):
 * startup with deployment_mode = production fails for every mechanism
 * outside {microvm, gvisor}, and so does startup with auth_mode != dev. The
 * gate is parameterized over the complement rather than naming a mechanism,
 * so every value of the enum is walked, and both failures name both
 * settings. A warning instead of a failure fails the gate: every refusal
 * here is a non-zero return.
 *
 * Each combination is driven three ways: the settings struct directly, a
 * YAML file on disk, and the AIRLOCK_* environment overrides.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "airlock/settings.h"

static const airlock_deployment_mode modes[] = { AIRLOCK_DEPLOYMENT_DEVELOPMENT,
	                                         AIRLOCK_DEPLOYMENT_PRODUCTION };
static const char *const auths[] = { "dev", "token", "oidc" };

static bool expected_allowed(airlock_mechanism m, airlock_deployment_mode d, const char *auth)
{
	/* The gate's rule, restated independently of the code under test: the
	 * only mechanisms production may run are the two kernel-isolating ones. */
	bool isolating = m == AIRLOCK_MECHANISM_MICROVM || m == AIRLOCK_MECHANISM_GVISOR;
	return (d == AIRLOCK_DEPLOYMENT_DEVELOPMENT && strcmp(auth, "dev") == 0) || isolating;
}

static void expect_outcome(const char *how, airlock_mechanism m, airlock_deployment_mode d,
                           const char *auth, int rc, const airlock_error *err)
{
	const char *mname = airlock_mechanism_name(m);
	const char *dname = airlock_deployment_mode_name(d);
	if (expected_allowed(m, d, auth)) {
		cr_expect_eq(rc, 0, "[%s] %s/%s/%s must start: %s", how, mname, dname, auth, err->message);
		return;
	}
	char want_mode[64], want_auth[64], want_mech[64];
	snprintf(want_mode, sizeof(want_mode), "deployment_mode=%s", dname);
	snprintf(want_auth, sizeof(want_auth), "auth_mode=%s", auth);
	snprintf(want_mech, sizeof(want_mech), "sandbox.mechanism=%s", mname);
	cr_expect_eq(rc, airlock_errcode(AIRLOCK_ERR_CONFIG), "[%s] %s/%s/%s must be refused (rc %d)",
	             how, mname, dname, auth, rc);
	cr_expect_eq(err->cls, AIRLOCK_ERR_CONFIG, "[%s]", how);
	cr_expect(strstr(err->message, want_mode), "[%s] \"%s\" lacks %s", how, err->message, want_mode);
	cr_expect(strstr(err->message, want_auth), "[%s] \"%s\" lacks %s", how, err->message, want_auth);
	cr_expect(strstr(err->message, want_mech), "[%s] \"%s\" lacks %s", how, err->message, want_mech);
	cr_expect(strstr(err->message, "microvm") && strstr(err->message, "gvisor"),
	          "[%s] \"%s\" does not say what is required", how, err->message);
}

Test(gate_sandbox_production_refuses_dev, complement_is_refused)
{
	/* Every value the enum has, not a list of the ones known to be bad. */
	for (int m = AIRLOCK_MECHANISM_INVALID + 1; m < AIRLOCK_MECHANISM__MAX; m++) {
		cr_assert_not_null(airlock_mechanism_name((airlock_mechanism)m), "mechanism %d has no name", m);
		bool isolating = m == AIRLOCK_MECHANISM_MICROVM || m == AIRLOCK_MECHANISM_GVISOR;
		cr_expect_eq(airlock_mechanism_production_allowed((airlock_mechanism)m), isolating,
		             "production_allowed(%s)", airlock_mechanism_name((airlock_mechanism)m));
	}
	/* A value added later, or a corrupt one, falls in the complement. */
	cr_expect_not(airlock_mechanism_production_allowed(AIRLOCK_MECHANISM_INVALID));
	cr_expect_not(airlock_mechanism_production_allowed(AIRLOCK_MECHANISM__MAX));
	cr_expect_not(airlock_mechanism_production_allowed((airlock_mechanism)(AIRLOCK_MECHANISM__MAX + 7)));
	cr_expect_not(airlock_mechanism_production_allowed((airlock_mechanism)-1));
}

Test(gate_sandbox_production_refuses_dev, struct)
{
	size_t refused = 0, allowed = 0;
	for (int m = AIRLOCK_MECHANISM_INVALID + 1; m < AIRLOCK_MECHANISM__MAX; m++)
		for (size_t d = 0; d < 2; d++)
			for (size_t a = 0; a < 3; a++) {
				airlock_settings s;
				cr_assert_eq(airlock_settings_default(&s, NULL), 0);
				s.mechanism = (airlock_mechanism)m;
				s.deployment_mode = modes[d];
				free(s.auth_mode);
				s.auth_mode = strdup(auths[a]);
				airlock_error err = { 0 };
				int rc = airlock_settings_check(&s, &err);
				expect_outcome("struct", (airlock_mechanism)m, modes[d], auths[a], rc, &err);
				if (rc < 0)
					refused++;
				else
					allowed++;
				airlock_settings_clear(&s);
			}
	/* 5 mechanisms x 6 combinations: the 3 development ones allowed in the
	 * one dev/dev cell, the 2 isolating ones allowed in all six. */
	cr_expect_eq(allowed + refused, (size_t)(AIRLOCK_MECHANISM__MAX - 1) * 6);
	cr_expect_eq(refused, (size_t)(AIRLOCK_MECHANISM__MAX - 1 - 2) * 5);
}

/* An unset or corrupt mechanism is refused too, with or without the
 * production conditions. */
Test(gate_sandbox_production_refuses_dev, invalid_mechanism_refused)
{
	const airlock_mechanism bad[] = { AIRLOCK_MECHANISM_INVALID, AIRLOCK_MECHANISM__MAX,
		                          (airlock_mechanism)99 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		for (size_t d = 0; d < 2; d++) {
			airlock_settings s;
			cr_assert_eq(airlock_settings_default(&s, NULL), 0);
			s.mechanism = bad[i];
			s.deployment_mode = modes[d];
			airlock_error err = { 0 };
			cr_expect_eq(airlock_settings_check(&s, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
			airlock_settings_clear(&s);
		}
}

static char *tmpdir;

static void setup_dir(void)
{
	char tmpl[] = "/tmp/airlock-gate-XXXXXX";
	cr_assert_not_null(mkdtemp(tmpl));
	tmpdir = strdup(tmpl);
}

static void teardown_dir(void)
{
	/* Each file is unlinked as it is used; only the directory is left. */
	rmdir(tmpdir);
	free(tmpdir);
}

Test(gate_sandbox_production_refuses_dev, yaml_file, .init = setup_dir, .fini = teardown_dir)
{
	for (int m = AIRLOCK_MECHANISM_INVALID + 1; m < AIRLOCK_MECHANISM__MAX; m++)
		for (size_t d = 0; d < 2; d++)
			for (size_t a = 0; a < 3; a++) {
				char path[256];
				snprintf(path, sizeof(path), "%s/settings-%d-%zu-%zu.yaml", tmpdir, m, d, a);
				FILE *f = fopen(path, "w");
				cr_assert_not_null(f);
				fprintf(f,
				        "# gate case\n"
				        "deployment_mode: %s\n"
				        "auth_mode: %s\n"
				        "sandbox:\n"
				        "  mechanism: %s\n",
				        airlock_deployment_mode_name(modes[d]), auths[a],
				        airlock_mechanism_name((airlock_mechanism)m));
				fclose(f);
				airlock_settings s;
				airlock_error err = { 0 };
				int rc = airlock_settings_load(path, &s, &err);
				cr_assert_eq(rc, 0, "%s", err.message);
				rc = airlock_settings_check(&s, &err);
				expect_outcome("yaml", (airlock_mechanism)m, modes[d], auths[a], rc, &err);
				airlock_settings_clear(&s);
				unlink(path);
			}
}

Test(gate_sandbox_production_refuses_dev, env_overrides)
{
	for (int m = AIRLOCK_MECHANISM_INVALID + 1; m < AIRLOCK_MECHANISM__MAX; m++)
		for (size_t d = 0; d < 2; d++)
			for (size_t a = 0; a < 3; a++) {
				char e1[64], e2[64], e3[64];
				snprintf(e1, sizeof(e1), "AIRLOCK_DEPLOYMENT_MODE=%s",
				         airlock_deployment_mode_name(modes[d]));
				snprintf(e2, sizeof(e2), "AIRLOCK_AUTH_MODE=%s", auths[a]);
				snprintf(e3, sizeof(e3), "AIRLOCK_SANDBOX_MECHANISM=%s",
				         airlock_mechanism_name((airlock_mechanism)m));
				char *envp[] = { (char *)"PATH=/usr/bin", e1, e2, e3, NULL };
				airlock_settings s;
				airlock_error err = { 0 };
				cr_assert_eq(airlock_settings_default(&s, &err), 0);
				cr_assert_eq(airlock_settings_apply_env(&s, envp, &err), 0, "%s", err.message);
				int rc = airlock_settings_check(&s, &err);
				expect_outcome("env", (airlock_mechanism)m, modes[d], auths[a], rc, &err);
				airlock_settings_clear(&s);
			}
}

/* The two settings are set in different places (spec): a file that says
 * development/dev and an environment that says otherwise is refused, and so
 * is the reverse. */
Test(gate_sandbox_production_refuses_dev, file_and_env_layered)
{
	static const char doc[] = "deployment_mode: development\nauth_mode: dev\nsandbox:\n  mechanism: docker\n";
	airlock_settings s;
	airlock_error err = { 0 };

	cr_assert_eq(airlock_settings_parse("layer.yaml", doc, strlen(doc), &s, &err), 0, "%s", err.message);
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	char *env_token[] = { (char *)"AIRLOCK_AUTH_MODE=token", NULL };
	cr_assert_eq(airlock_settings_apply_env(&s, env_token, &err), 0);
	cr_expect_eq(airlock_settings_check(&s, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_expect(strstr(err.message, "auth_mode=token") && strstr(err.message, "deployment_mode=development") &&
	          strstr(err.message, "sandbox.mechanism=docker"), "%s", err.message);
	airlock_settings_clear(&s);

	static const char prod[] = "deployment_mode: production\nauth_mode: token\nsandbox:\n  mechanism: gvisor\n";
	cr_assert_eq(airlock_settings_parse("layer.yaml", prod, strlen(prod), &s, &err), 0);
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	char *env_fake[] = { (char *)"AIRLOCK_SANDBOX_MECHANISM=fake", NULL };
	cr_assert_eq(airlock_settings_apply_env(&s, env_fake, &err), 0);
	cr_expect_eq(airlock_settings_check(&s, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_expect(strstr(err.message, "sandbox.mechanism=fake") && strstr(err.message, "deployment_mode=production") &&
	          strstr(err.message, "auth_mode=token"), "%s", err.message);
	airlock_settings_clear(&s);
}

/* The embedded defaults are a development configuration: they start as
 * they are and are refused the moment either production condition is set. */
Test(gate_sandbox_production_refuses_dev, defaults_are_development_only)
{
	airlock_settings s;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_default(&s, &err), 0);
	cr_expect_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	s.deployment_mode = AIRLOCK_DEPLOYMENT_PRODUCTION;
	cr_expect_eq(airlock_settings_check(&s, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_expect(strstr(err.message, "sandbox.mechanism=native") && strstr(err.message, "deployment_mode=production") &&
	          strstr(err.message, "auth_mode=dev"), "%s", err.message);
	airlock_settings_clear(&s);
}
