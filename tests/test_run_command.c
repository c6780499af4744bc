/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox.run_command request made into a command and an image
 * (airlock/run_command.h): the defaults every caller shares, the
 * validation that runs before provision, and the image each mechanism is
 * given when the operator names none.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "airlock/run_command.h"
#include "airlock/settings.h"
#include "airlock/tiers.h"

static airlock_settings settings_for(airlock_mechanism m)
{
	airlock_settings s = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_default(&s, &err), 0, "%s", err.message);
	s.mechanism = m;
	return s;
}

Test(run_command, defaults_come_from_the_settings_and_the_tool)
{
	airlock_settings s = settings_for(AIRLOCK_MECHANISM_FAKE);
	char *argv[] = { "echo", "hi", NULL };
	airlock_run_command_request req = { .argv = argv, .argc = 2 };
	airlock_execution_command cmd;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_run_command_prepare(&req, &s, &cmd, &err), 0, "%s", err.message);
	cr_assert_eq(cmd.argv, argv);
	cr_assert_eq(cmd.argc, 2);
	cr_assert_str_eq(cmd.working_directory, ".");
	cr_assert_eq(cmd.timeout_seconds, s.defaults.limits.wall_clock_seconds);
	cr_assert_eq(cmd.maximum_output_bytes, 1024 * 1024);
	cr_assert(!cmd.has_stdin);
	airlock_settings_clear(&s);
}

Test(run_command, the_request_s_values_are_kept)
{
	airlock_settings s = settings_for(AIRLOCK_MECHANISM_FAKE);
	char *argv[] = { "cat", NULL };
	unsigned char in[] = "data";
	airlock_run_command_request req = {
		.argv = argv, .argc = 1, .working_directory = "sub/dir", .timeout_seconds = 7,
		.has_stdin = true, .stdin_data = in, .stdin_len = 4, .maximum_output_bytes = 99,
	};
	airlock_execution_command cmd;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_run_command_prepare(&req, &s, &cmd, &err), 0, "%s", err.message);
	cr_assert_str_eq(cmd.working_directory, "sub/dir");
	cr_assert_eq(cmd.timeout_seconds, 7);
	cr_assert_eq(cmd.maximum_output_bytes, 99);
	cr_assert(cmd.has_stdin);
	cr_assert_eq(cmd.stdin_data, in);
	cr_assert_eq(cmd.stdin_len, 4);
	airlock_settings_clear(&s);
}

Test(run_command, the_tool_s_numbers)
{
	cr_assert_eq(AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS, 300);
	cr_assert_eq(AIRLOCK_RUN_COMMAND_ARGV_MAX_BYTES, 64 * 1024);
	cr_assert_str_eq(AIRLOCK_IMAGE_DIGEST_EMPTY,
	                 "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

Test(run_command, validation_runs_before_provision)
{
	airlock_settings s = settings_for(AIRLOCK_MECHANISM_FAKE);
	airlock_execution_command cmd;
	airlock_error err = { 0 };

	/* A relative path with a separator in command[0]. */
	char *rel[] = { "./setup.sh", NULL };
	airlock_run_command_request req = { .argv = rel, .argc = 1 };
	cr_assert_lt(airlock_run_command_prepare(&req, &s, &cmd, &err), 0);
	cr_assert_eq(err.cls, AIRLOCK_ERR_TOOL_VALIDATION);

	/* A working directory out of the workspace. */
	char *ok[] = { "true", NULL };
	req = (airlock_run_command_request){ .argv = ok, .argc = 1, .working_directory = "../x" };
	err = (airlock_error){ 0 };
	cr_assert_lt(airlock_run_command_prepare(&req, &s, &cmd, &err), 0);
	cr_assert_eq(err.cls, AIRLOCK_ERR_WORKSPACE_ESCAPE);

	/* A vector past the tool's cap. */
	static char big[AIRLOCK_RUN_COMMAND_ARGV_MAX_BYTES + 1];
	memset(big, 'a', sizeof(big) - 1);
	char *large[] = { "echo", big, NULL };
	req = (airlock_run_command_request){ .argv = large, .argc = 2 };
	err = (airlock_error){ 0 };
	cr_assert_lt(airlock_run_command_prepare(&req, &s, &cmd, &err), 0);
	cr_assert_eq(err.cls, AIRLOCK_ERR_TOOL_VALIDATION);
	airlock_settings_clear(&s);
}

Test(run_command, the_image_for_each_mechanism)
{
	airlock_error err = { 0 };
	airlock_settings s = settings_for(AIRLOCK_MECHANISM_FAKE);
	cr_assert_str_eq(airlock_run_command_image(&s, NULL, &err), AIRLOCK_IMAGE_DIGEST_EMPTY);

	s.mechanism = AIRLOCK_MECHANISM_NATIVE;
	const char *store_default = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
	cr_assert_str_eq(airlock_run_command_image(&s, store_default, &err), store_default);
	cr_assert_null(airlock_run_command_image(&s, NULL, &err));
	cr_assert_eq(err.cls, AIRLOCK_ERR_CONFIG);

	/* gvisor runs the store's images too. */
	s.mechanism = AIRLOCK_MECHANISM_GVISOR;
	cr_assert_str_eq(airlock_run_command_image(&s, store_default, &err), store_default);

	/* Production never takes the store's newest: it names its image. */
	s.deployment_mode = AIRLOCK_DEPLOYMENT_PRODUCTION;
	err = (airlock_error){ 0 };
	cr_assert_null(airlock_run_command_image(&s, store_default, &err));
	cr_assert_eq(err.cls, AIRLOCK_ERR_CONFIG);
	cr_assert(strstr(err.message, "sandbox.image is not set: production runs a pinned image"));

	s.mechanism = AIRLOCK_MECHANISM_MICROVM;
	s.deployment_mode = AIRLOCK_DEPLOYMENT_DEVELOPMENT;
	err = (airlock_error){ 0 };
	cr_assert_null(airlock_run_command_image(&s, store_default, &err));
	cr_assert_eq(err.cls, AIRLOCK_ERR_CONFIG);
	cr_assert(strstr(err.message, "sandbox.image is not set"));

	/* The operator's image wins for every mechanism. */
	s.image = strdup("sha256:2222222222222222222222222222222222222222222222222222222222222222");
	cr_assert_str_eq(airlock_run_command_image(&s, store_default, &err), s.image);
	s.mechanism = AIRLOCK_MECHANISM_FAKE;
	cr_assert_str_eq(airlock_run_command_image(&s, NULL, &err), s.image);
	airlock_settings_clear(&s);
}

/* The value of name in a built environment, or NULL. */
static const char *env_value(const airlock_env *e, const char *name)
{
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->vars[i].name, name) == 0)
			return e->vars[i].value;
	return NULL;
}

Test(run_command, the_spec_is_built_from_the_settings_and_the_call)
{
	airlock_settings s = settings_for(AIRLOCK_MECHANISM_NATIVE);
	char *parent[] = { "PATH=/host/bin", "LANG_EXTRA=kept", "HOME=/root", NULL };
	const char *extra[] = { "LANG_EXTRA" };
	airlock_resource_limits l = s.defaults.limits;
	l.workspace_bytes = (int64_t)1 << 20; /* holds 2038 inodes */
	l.inodes_max = 100000;
	airlock_run_command_spec_input in = {
		.settings = &s, .tenant_id = "t1", .store_default = "sha256:" AIRLOCK_SHA256_EMPTY_HEX,
		.limits = &l, .extra_tier1 = extra, .n_extra_tier1 = 1, .parent = parent,
		.working_directory = "src",
	};
	airlock_environment_spec spec;
	int64_t asked = 0;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_run_command_spec(&in, &spec, &asked, &err), 0, "%s", err.message);
	cr_expect_str_eq(spec.tenant_id, "t1");
	cr_expect_eq(strlen(spec.run_id), 36, "a new UUIDv7: %s", spec.run_id);
	cr_expect_str_eq(spec.image_digest, "sha256:" AIRLOCK_SHA256_EMPTY_HEX);
	cr_expect_eq(spec.egress.mode, AIRLOCK_EGRESS_DENY, "no policy given: deny");
	cr_expect_eq(spec.limits.inodes_max, 2038, "what a 1 MiB workspace holds");
	cr_expect_eq(asked, 100000);
	cr_expect_str_eq(env_value(&spec.environment, "PWD"), "/workspace/src");
	cr_expect_str_eq(env_value(&spec.environment, "LANG_EXTRA"), "kept", "an extra tier-1 name");
	cr_expect_str_neq(env_value(&spec.environment, "PATH"), "/host/bin", "tier 2 wins");
	cr_expect_str_eq(env_value(&spec.environment, "HOME"), "/workspace");
	airlock_environment_spec_clear(&spec);
	airlock_settings_clear(&s);
}

Test(run_command, a_tier0_extra_name_builds_no_spec)
{
	airlock_settings s = settings_for(AIRLOCK_MECHANISM_FAKE);
	char *parent[] = { "AWS_SECRET_ACCESS_KEY=x", NULL };
	const char *extra[] = { "AWS_SECRET_ACCESS_KEY" };
	airlock_run_command_spec_input in = {
		.settings = &s, .tenant_id = "t1", .extra_tier1 = extra, .n_extra_tier1 = 1,
		.parent = parent,
	};
	airlock_environment_spec spec;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_run_command_spec(&in, &spec, NULL, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_expect(strstr(err.message, "AWS_SECRET_ACCESS_KEY") != NULL, "%s", err.message);
	cr_expect_null(spec.tenant_id, "nothing half-built is left");
	cr_expect_eq(spec.environment.n, 0);
	airlock_settings_clear(&s);
}

Test(run_command, a_bridge_is_copied_into_the_spec_and_tier_2)
{
	airlock_settings s = settings_for(AIRLOCK_MECHANISM_FAKE);
	char *parent[] = { "AIRLOCK_BRIDGE_TOKEN=from-the-host", NULL };
	char token[] = "tok-0123456789abcdef0123456789abcdef0123456";
	char path[] = AIRLOCK_BRIDGE_SOCKET_PATH;
	airlock_bridge_endpoint b = { .socket_path = path, .token = token };
	airlock_run_command_spec_input in = {
		.settings = &s, .tenant_id = "t1", .parent = parent, .bridge = &b,
	};
	airlock_environment_spec spec;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_run_command_spec(&in, &spec, NULL, &err), 0, "%s", err.message);
	cr_assert_not_null(spec.bridge);
	cr_expect_neq(spec.bridge->token, token, "the spec's own copy");
	cr_expect_str_eq(spec.bridge->socket_path, "/run/airlock/bridge.sock");
	cr_expect_str_eq(spec.bridge->token, token);
	cr_expect_str_eq(env_value(&spec.environment, "AIRLOCK_BRIDGE_SOCKET"),
	                 "/run/airlock/bridge.sock");
	cr_expect_str_eq(env_value(&spec.environment, "AIRLOCK_BRIDGE_TOKEN"), token);
	airlock_environment_spec_clear(&spec);
	/* Without one: no endpoint and neither variable. */
	in.bridge = NULL;
	cr_assert_eq(airlock_run_command_spec(&in, &spec, NULL, &err), 0, "%s", err.message);
	cr_expect_null(spec.bridge);
	cr_expect_null(env_value(&spec.environment, "AIRLOCK_BRIDGE_SOCKET"));
	cr_expect_null(env_value(&spec.environment, "AIRLOCK_BRIDGE_TOKEN"));
	airlock_environment_spec_clear(&spec);
	airlock_settings_clear(&s);
}
