/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checks the core's wrappers make for every adapter: spec and command
 * validation, the timeout rule as the adapter receives it, expiry, and the
 * result invariants an adapter must not break. The fake records what it is
 * asked, which is how these tests see what the wrapper passed down.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "airlock/fake.h"
#include "airlock/mechanisms.h"
#include "airlock/port/exec.h"
#include "testlib.h"

typedef struct wctx {
	airlock_fake *fake;
	airlock_exec *exec;
	airlock_environment_spec spec;
	airlock_environment_handle h;
	airlock_exec_call call;
} wctx;

static void wopen(wctx *c, const airlock_exec_ops *ops, const airlock_exec_config *cfg)
{
	memset(c, 0, sizeof(*c));
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_new(&c->fake, &err), 0);
	cr_assert_eq(airlock_exec_new(ops ? ops : airlock_fake_ops(), c->fake, cfg, &c->exec, &err), 0,
	             "%s", err.message);
	test_spec(&c->spec, "t1", "r1");
	cr_assert_eq(airlock_exec_provision(c->exec, &c->spec, &c->h, &err), 0, "%s", err.message);
	c->call = (airlock_exec_call){ .tenant_id = "t1", .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
}

static void wclose(wctx *c)
{
	airlock_error err = { 0 };
	airlock_exec_destroy(c->exec, &c->h, &err);
	airlock_exec_free(c->exec);
	airlock_environment_handle_clear(&c->h);
	airlock_environment_spec_clear(&c->spec);
}

static int wexec(wctx *c, airlock_execution_command *cmd, airlock_execution_result *r,
                 airlock_error *err)
{
	memset(r, 0, sizeof(*r));
	return airlock_exec_execute(c->exec, &c->call, &c->h, cmd, r, err);
}

Test(provision, rejects_invalid_spec_and_names_the_field)
{
	airlock_fake *f = NULL;
	airlock_exec *e = NULL;
	airlock_error err = { 0 };
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.ceilings.pids_max = 4096;
	cfg.ceilings.wall_clock_seconds = 1800;
	cr_assert_eq(airlock_fake_new(&f, &err), 0);
	cr_assert_eq(airlock_exec_new(airlock_fake_ops(), f, &cfg, &e, &err), 0);
	airlock_environment_spec s;
	test_spec(&s, "t1", "r1");
	s.limits.pids_max = 0;
	airlock_environment_handle h = { 0 };
	int rc = airlock_exec_provision(e, &s, &h, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "%s", err.message);
	cr_assert(strstr(err.message, "pids_max"), "message names the field: %s", err.message);
	cr_assert_eq(airlock_fake_live_count(f), 0, "nothing provisioned on failure");

	s.limits.pids_max = 4097;
	rc = airlock_exec_provision(e, &s, &h, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "%s", err.message);
	cr_assert(strstr(err.message, "pids_max=4097 is above the operator's ceiling of 4096"), "%s",
	          err.message);
	s.limits.pids_max = 4096;
	s.limits.wall_clock_seconds = 1801;
	rc = airlock_exec_provision(e, &s, &h, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "%s", err.message);
	cr_assert(strstr(err.message, "wall_clock_seconds"), "%s", err.message);
	/* memory_bytes has no ceiling here ("operator"): any positive value passes. */
	s.limits.wall_clock_seconds = 60;
	s.limits.memory_bytes = 1ll << 50;
	rc = airlock_exec_provision(e, &s, &h, &err);
	cr_assert_eq(rc, 0, "%s", err.message);
	airlock_exec_destroy(e, &h, &err);
	airlock_environment_handle_clear(&h);

	s.limits.wall_clock_seconds = 10;
	free(s.image_digest);
	s.image_digest = strdup("debian:12");
	rc = airlock_exec_provision(e, &s, &h, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "a tag is not a digest");
	airlock_environment_spec_clear(&s);
	airlock_exec_free(e);
}

/* A spec with a bridge reaches the mechanism, and the fake, which makes no
 * socket, refuses it loudly: a sandbox is never told of a socket that is
 * not there. (native and gvisor make it: test_native_bridge.c.) */
Test(provision, a_bridge_the_fake_cannot_make_is_refused_loudly)
{
	airlock_fake *f = NULL;
	airlock_exec *e = NULL;
	airlock_error err = { 0 };
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cr_assert_eq(airlock_fake_new(&f, &err), 0);
	cr_assert_eq(airlock_exec_new(airlock_fake_ops(), f, &cfg, &e, &err), 0);
	airlock_environment_spec s;
	test_spec(&s, "t1", "r1");
	s.bridge = calloc(1, sizeof(*s.bridge));
	cr_assert(s.bridge);
	s.bridge->socket_path = strdup("/run/airlock/bridge.sock");
	s.bridge->token = strdup("tok-1");
	airlock_environment_handle h = { 0 };
	int rc = airlock_exec_provision(e, &s, &h, &err);
	cr_expect_eq(rc, airlock_errcode(AIRLOCK_ERR_NOT_IMPLEMENTED), "%s", err.message);
	cr_expect(strstr(err.message, "EnvironmentSpec.bridge: the fake mechanism"), "%s",
	          err.message);
	cr_expect_eq(airlock_fake_live_count(f), 0, "nothing provisioned");
	airlock_environment_spec_clear(&s);
	airlock_exec_free(e);
}

/* The floors and the output ceiling hold at the port, for every door: a
 * spec decoded from JSON meets the same numbers as the CLI's flags. */
Test(provision, limits_below_the_start_floors_are_refused_with_the_minimum)
{
	airlock_fake *f = NULL;
	airlock_exec *e = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_new(&f, &err), 0);
	cr_assert_eq(airlock_exec_new(airlock_fake_ops(), f, NULL, &e, &err), 0);
	airlock_environment_spec s;
	test_spec(&s, "t1", "r1");
	airlock_environment_handle h = { 0 };
	s.limits.memory_bytes = 100 * 1024;
	cr_assert_eq(airlock_exec_provision(e, &s, &h, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "%s", err.message);
	cr_assert(strstr(err.message, "memory_bytes: 102400 is below the 8388608 bytes"), "%s",
	          err.message);
	s.limits.memory_bytes = AIRLOCK_LIMIT_MEMORY_BYTES_MIN;
	s.limits.pids_max = 1;
	cr_assert_eq(airlock_exec_provision(e, &s, &h, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "%s", err.message);
	cr_assert(strstr(err.message, "pids_max: 1 is below the 4 processes"), "%s", err.message);
	cr_assert_eq(airlock_fake_live_count(f), 0, "nothing provisioned on failure");
	s.limits.pids_max = AIRLOCK_LIMIT_PIDS_MIN;
	cr_assert_eq(airlock_exec_provision(e, &s, &h, &err), 0, "the floors themselves pass: %s",
	             err.message);
	airlock_exec_destroy(e, &h, &err);
	airlock_environment_handle_clear(&h);
	airlock_environment_spec_clear(&s);
	airlock_exec_free(e);
}

Test(command, output_limit_has_a_ceiling)
{
	wctx c;
	wopen(&c, NULL, NULL);
	char *argv[] = { "true", NULL };
	airlock_execution_command cmd = test_command(argv);
	cmd.maximum_output_bytes = AIRLOCK_OUTPUT_BYTES_MAX + 1;
	airlock_execution_result r;
	airlock_error err = { 0 };
	cr_assert_eq(wexec(&c, &cmd, &r, &err), airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION), "%s",
	             err.message);
	cr_assert(strstr(err.message, "maximum_output_bytes=16777217 is above the ceiling of 16777216"),
	          "%s", err.message);
	cmd.maximum_output_bytes = AIRLOCK_OUTPUT_BYTES_MAX;
	cr_assert_eq(wexec(&c, &cmd, &r, &err), 0, "%s", err.message);
	airlock_execution_result_clear(&r);
	wclose(&c);
}

Test(provision, handle_is_opaque_and_bounded_by_the_hard_cap)
{
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.hard_cap_seconds = 120;
	wctx c;
	wopen(&c, NULL, &cfg);
	cr_assert_eq(strncmp(c.h.environment_id, "env_", 4), 0);
	cr_assert_eq(strlen(c.h.environment_id), 36);
	cr_assert_str_eq(c.h.tenant_id, "t1");
	cr_assert_str_eq(c.h.run_id, "r1");
	cr_assert_eq(c.h.lease_epoch, 1);
	cr_assert_eq(c.h.expires_at_ms - c.h.created_at_ms, 120 * 1000);
	wclose(&c);
}

Test(command, validation_in_order)
{
	wctx c;
	wopen(&c, NULL, NULL);
	airlock_error err = { 0 };
	airlock_execution_result r;

	airlock_execution_command empty = { .argv = (char *[]){ NULL }, .argc = 0,
		                            .working_directory = ".", .timeout_seconds = 5,
		                            .maximum_output_bytes = 10 };
	cr_assert_eq(wexec(&c, &empty, &r, &err), airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION));
	cr_assert(strstr(err.message, "argument vector"), "teaches the vector form: %s", err.message);

	char *rel[] = { "./setup.sh", NULL };
	airlock_execution_command cmd = test_command(rel);
	cr_assert_eq(wexec(&c, &cmd, &r, &err), airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION));
	cr_assert(strstr(err.message, "bash"), "%s", err.message);

	char *rel2[] = { "bin/tool", NULL };
	cmd = test_command(rel2);
	cr_assert_eq(wexec(&c, &cmd, &r, &err), airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION));

	char *abs[] = { "/usr/bin/true", NULL };
	cmd = test_command(abs);
	cr_assert_eq(wexec(&c, &cmd, &r, &err), 0, "%s", err.message);
	airlock_execution_result_clear(&r);

	char *bare[] = { "true", NULL };
	cmd = test_command(bare);
	cmd.timeout_seconds = 0;
	cr_assert_eq(wexec(&c, &cmd, &r, &err), airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION));
	cmd.timeout_seconds = -3;
	cr_assert_eq(wexec(&c, &cmd, &r, &err), airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION));

	cmd = test_command(bare);
	cmd.working_directory = "../etc";
	cr_assert_eq(wexec(&c, &cmd, &r, &err), airlock_errcode(AIRLOCK_ERR_WORKSPACE_ESCAPE));
	cmd.working_directory = "/etc";
	cr_assert_eq(wexec(&c, &cmd, &r, &err), airlock_errcode(AIRLOCK_ERR_WORKSPACE_ESCAPE));
	cmd.working_directory = "sub/dir";
	cr_assert_eq(wexec(&c, &cmd, &r, &err), 0, "%s", err.message);
	airlock_execution_result_clear(&r);

	/* The whole vector is capped at 64 KiB. */
	static char big[40000];
	memset(big, 'x', sizeof(big) - 1);
	char *large[] = { "echo", big, big, NULL };
	cmd = test_command(large);
	cr_assert_eq(wexec(&c, &cmd, &r, &err), airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION));
	cr_assert(strstr(err.message, "65536"), "%s", err.message);

	/* Nothing that failed validation reached the adapter. */
	cr_assert_eq(airlock_fake_recorded_count(c.fake), 2);
	wclose(&c);
}

/* The adapter receives the minimum rule's result. */
Test(timeout, adapter_receives_the_effective_timeout)
{
	struct {
		int64_t wall_clock, command, budget_ms;
		int64_t want_ms;
	} rows[] = {
		{ 60, 3600, AIRLOCK_BUDGET_NONE, 60000 },  /* spec wall clock is lowest */
		{ 600, 3600, AIRLOCK_BUDGET_NONE, 300000 }, /* the model's 3600 is clamped to 300 */
		{ 600, 5, AIRLOCK_BUDGET_NONE, 5000 },      /* the model may lower it */
		{ 600, 100, 42000, 42000 },                 /* the run's remaining budget */
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		airlock_fake *f = NULL;
		airlock_exec *e = NULL;
		airlock_error err = { 0 };
		cr_assert_eq(airlock_fake_new(&f, &err), 0);
		cr_assert_eq(airlock_exec_new(airlock_fake_ops(), f, NULL, &e, &err), 0);
		airlock_environment_spec s;
		test_spec(&s, "t1", "r1");
		s.limits.wall_clock_seconds = rows[i].wall_clock;
		airlock_environment_handle h = { 0 };
		cr_assert_eq(airlock_exec_provision(e, &s, &h, &err), 0, "%s", err.message);
		char *argv[] = { "true", NULL };
		airlock_execution_command cmd = test_command(argv);
		cmd.timeout_seconds = rows[i].command;
		airlock_exec_call call = { .tenant_id = "t1", .remaining_budget_ms = rows[i].budget_ms };
		airlock_execution_result r = { 0 };
		cr_assert_eq(airlock_exec_execute(e, &call, &h, &cmd, &r, &err), 0, "%s", err.message);
		cr_assert_eq(airlock_fake_recorded(f, 0)->effective_timeout_ms, rows[i].want_ms,
		             "row %zu: got %lld", i,
		             (long long)airlock_fake_recorded(f, 0)->effective_timeout_ms);
		airlock_execution_result_clear(&r);
		airlock_exec_destroy(e, &h, &err);
		airlock_environment_handle_clear(&h);
		airlock_environment_spec_clear(&s);
		airlock_exec_free(e);
	}
}

Test(timeout, budget_under_the_floor_starts_nothing)
{
	wctx c;
	wopen(&c, NULL, NULL);
	c.call.remaining_budget_ms = 4999;
	char *argv[] = { "true", NULL };
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	airlock_error err = { 0 };
	cr_assert_eq(wexec(&c, &cmd, &r, &err), airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION));
	cr_assert_eq(airlock_fake_recorded_count(c.fake), 0, "the command was not started");
	wclose(&c);
}

Test(expiry, a_sandbox_past_expires_at_is_destroyed)
{
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.hard_cap_seconds = 1;
	wctx c;
	airlock_environment_spec s;
	wopen(&c, NULL, &cfg);
	(void)s;
	struct timespec ts = { .tv_sec = 1, .tv_nsec = 100 * 1000000L };
	nanosleep(&ts, NULL);
	char *argv[] = { "true", NULL };
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	airlock_error err = { 0 };
	cr_assert_eq(wexec(&c, &cmd, &r, &err), airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	cr_assert(strstr(err.message, "expires_at"), "%s", err.message);
	cr_assert_eq(airlock_fake_live_count(c.fake), 0, "the expired sandbox was destroyed");
	wclose(&c);
}

/* The fake's ops with a destroy that can be made to fail. */
static bool scripted_destroy_fails;
static int scripted_destroy(void *ctx, const char *id, airlock_error *err)
{
	if (scripted_destroy_fails)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "scripted destroy failure");
	return airlock_fake_ops()->destroy(ctx, id, err);
}

/* A destroy at expires_at that fails is said, never reported as done, and
 * the record stays so a later destroy retries it. */
Test(expiry, a_failed_destroy_at_expiry_is_reported)
{
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.hard_cap_seconds = 1;
	airlock_exec_ops ops = *airlock_fake_ops();
	ops.destroy = scripted_destroy;
	wctx c;
	wopen(&c, &ops, &cfg);
	struct timespec ts = { .tv_sec = 1, .tv_nsec = 100 * 1000000L };
	nanosleep(&ts, NULL);
	char *argv[] = { "true", NULL };
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	airlock_error err = { 0 };
	scripted_destroy_fails = true;
	cr_assert_eq(wexec(&c, &cmd, &r, &err), airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	cr_assert(strstr(err.message, "destroy at expires_at also failed: scripted destroy failure"),
	          "%s", err.message);
	cr_assert_eq(airlock_fake_live_count(c.fake), 1, "the sandbox is still there");
	scripted_destroy_fails = false;
	airlock_error derr = { 0 };
	cr_assert_eq(airlock_exec_destroy(c.exec, &c.h, &derr), 0, "%s", derr.message);
	cr_assert_eq(airlock_fake_live_count(c.fake), 0, "the retried destroy removed it");
	wclose(&c);
}

Test(expiry, mid_command_expiry_kills_with_expired)
{
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.hard_cap_seconds = 2;
	wctx c;
	wopen(&c, NULL, &cfg);
	char *argv[] = { "sleep", "30", NULL };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_script(c.fake, (const char *const *)argv,
	                                 &(airlock_fake_behaviour){ .runs_for_ms = 30000 }, &err), 0);
	/* Let part of the sandbox's life pass so expiry comes before the 2 s
	 * timeout the hard cap also imposes. */
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 400 * 1000000L };
	nanosleep(&ts, NULL);
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	cr_assert_eq(wexec(&c, &cmd, &r, &err), 0, "%s", err.message);
	cr_assert_eq(r.killed_by, AIRLOCK_KILL_EXPIRED);
	cr_assert_not(r.timed_out);
	cr_assert_not(r.has_exit_code);
	airlock_execution_result_clear(&r);
	cr_assert_eq(airlock_fake_live_count(c.fake), 0, "expiry destroys the sandbox");
	wclose(&c);
}

/* An adapter that breaks the result invariants is caught by the wrapper. */
static int (*real_execute)(void *, const airlock_environment_handle *, const airlock_exec_request *,
                           airlock_execution_result *, airlock_error *);
static int corrupting_execute(void *ctx, const airlock_environment_handle *h,
                              const airlock_exec_request *req, airlock_execution_result *ret,
                              airlock_error *err)
{
	int r = real_execute(ctx, h, req, ret, err);
	ret->killed_by = AIRLOCK_KILL_MEMORY; /* but has_exit_code stays true */
	return r;
}

Test(invariants, inconsistent_adapter_result_is_refused)
{
	static airlock_exec_ops broken;
	broken = *airlock_fake_ops();
	broken.name = "broken";
	real_execute = broken.execute;
	broken.execute = corrupting_execute;
	wctx c;
	wopen(&c, &broken, NULL);
	char *argv[] = { "true", NULL };
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	airlock_error err = { 0 };
	cr_assert_eq(wexec(&c, &cmd, &r, &err), airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE));
	cr_assert(strstr(err.message, "exit_code"), "%s", err.message);
	cr_assert_null(r.stdout_data, "nothing of the bad result is handed out");
	wclose(&c);
}

Test(invariants, incomplete_ops_table_is_refused)
{
	static airlock_exec_ops partial;
	partial = *airlock_fake_ops();
	partial.destroy = NULL;
	airlock_fake *f = NULL;
	airlock_exec *e = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_new(&f, &err), 0);
	cr_assert_eq(airlock_exec_new(&partial, f, NULL, &e, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_assert_null(e);
}

Test(cancel, fired_before_execute_returns_cancelled)
{
	wctx c;
	wopen(&c, NULL, NULL);
	airlock_error err = { 0 };
	airlock_cancel *k = NULL;
	cr_assert_eq(airlock_cancel_new(&k, &err), 0);
	airlock_cancel_fire(k);
	airlock_cancel_fire(k); /* idempotent */
	cr_assert(airlock_cancel_fired(k));
	c.call.cancel = k;
	char *argv[] = { "sleep", "30", NULL };
	cr_assert_eq(airlock_fake_script(c.fake, (const char *const *)argv,
	                                 &(airlock_fake_behaviour){ .runs_for_ms = 30000 }, &err), 0);
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	cr_assert_eq(wexec(&c, &cmd, &r, &err), 0, "%s", err.message);
	cr_assert_eq(r.killed_by, AIRLOCK_KILL_CANCELLED);
	airlock_execution_result_clear(&r);
	airlock_cancel_free(k);
	wclose(&c);
}

Test(fake, records_every_command_and_scripts_per_argv)
{
	wctx c;
	wopen(&c, NULL, NULL);
	airlock_error err = { 0 };
	char *a[] = { "echo", "a", NULL };
	cr_assert_eq(airlock_fake_script(c.fake, NULL,
	                                 &(airlock_fake_behaviour){ .exit_code = 7 }, &err), 0);
	cr_assert_eq(airlock_fake_script(c.fake, (const char *const *)a,
	                                 &(airlock_fake_behaviour){ .stdout_data = "a\n", .stdout_len = 2 },
	                                 &err), 0);
	airlock_execution_command cmd = test_command(a);
	cmd.has_stdin = true;
	cmd.stdin_data = (unsigned char *)"in";
	cmd.stdin_len = 2;
	airlock_execution_result r;
	cr_assert_eq(wexec(&c, &cmd, &r, &err), 0);
	cr_assert_eq(r.exit_code, 0);
	cr_assert_eq(r.stdout_len, 2);
	airlock_execution_result_clear(&r);
	char *b[] = { "other", NULL };
	cmd = test_command(b);
	cr_assert_eq(wexec(&c, &cmd, &r, &err), 0);
	cr_assert_eq(r.exit_code, 7, "the default script answers an unscripted argv");
	airlock_execution_result_clear(&r);

	cr_assert_eq(airlock_fake_recorded_count(c.fake), 2);
	const airlock_fake_record *rec = airlock_fake_recorded(c.fake, 0);
	cr_assert_str_eq(rec->environment_id, c.h.environment_id);
	cr_assert_eq(rec->command.argc, 2);
	cr_assert_str_eq(rec->command.argv[1], "a");
	cr_assert_eq(rec->command.stdin_len, 2);
	cr_assert_str_eq(airlock_fake_recorded(c.fake, 1)->command.argv[0], "other");
	wclose(&c);
}

Test(fake, a_workspace_filler_ends_as_disk)
{
	wctx c;
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	wopen(&c, NULL, &cfg);
	/* test_spec's workspace is 64 MiB; write more than that. */
	static char chunk[1 << 20];
	airlock_fake_file_op ops[70];
	char names[70][16];
	for (int i = 0; i < 70; i++) {
		snprintf(names[i], sizeof(names[i]), "fill%d", i);
		ops[i] = (airlock_fake_file_op){ .path = names[i], .data = chunk, .len = sizeof(chunk) };
	}
	char *argv[] = { "fill", NULL };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_script(c.fake, (const char *const *)argv,
	                                 &(airlock_fake_behaviour){ .file_ops = ops, .n_file_ops = 70 },
	                                 &err), 0);
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	cr_assert_eq(wexec(&c, &cmd, &r, &err), 0, "%s", err.message);
	cr_assert_eq(r.killed_by, AIRLOCK_KILL_DISK);
	cr_assert(r.n_files_changed > 0 && r.n_files_changed < 70, "partial writes are reported");
	airlock_execution_result_clear(&r);
	wclose(&c);
}

typedef struct racing_execute {
	wctx *c;
	airlock_execution_command cmd;
	airlock_execution_result r;
	airlock_error err;
	int rc;
} racing_execute;

static void *racing_execute_main(void *arg)
{
	racing_execute *x = arg;
	x->rc = wexec(x->c, &x->cmd, &x->r, &x->err);
	return NULL;
}

/* A destroy while the fake's command "runs": the workspace it snapshots
 * before and after the command is freed by the destroy, and the execute
 * must not touch it afterwards (it did: execute and DELETE racing on one
 * id crashed airlock serve, a use after free ASan names here). The command
 * ends CANCELLED, as a destroy under a command does on every mechanism. */
Test(fake, a_destroy_under_a_running_command_frees_nothing_it_uses)
{
	wctx c;
	wopen(&c, NULL, NULL);
	airlock_error err = { 0 };
	char *argv[] = { "slow", NULL };
	static const airlock_fake_file_op op = { .path = "made", .data = "x", .len = 1 };
	cr_assert_eq(airlock_fake_script(c.fake, (const char *const *)argv,
	                                 &(airlock_fake_behaviour){ .runs_for_ms = 1500,
	                                                            .file_ops = &op,
	                                                            .n_file_ops = 1 },
	                                 &err), 0);
	racing_execute x = { .c = &c, .cmd = test_command(argv) };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, racing_execute_main, &x), 0);
	struct timespec nap = { 0, 300 * 1000 * 1000 };
	nanosleep(&nap, NULL);
	cr_assert_eq(airlock_exec_destroy(c.exec, &c.h, &err), 0, "%s", err.message);
	pthread_join(t, NULL);
	if (x.rc == 0)
		cr_expect_eq(x.r.killed_by, AIRLOCK_KILL_CANCELLED, "killed_by %d", x.r.killed_by);
	else
		cr_expect_eq(x.err.cls, AIRLOCK_ERR_EXECUTION_REJECTED, "%s", x.err.message);
	airlock_execution_result_clear(&x.r);
	cr_assert_eq(airlock_fake_live_count(c.fake), 0);
	wclose(&c);
}

Test(registry, built_mechanisms_open_and_the_rest_say_why)
{
	airlock_settings s = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_default(&s, &err), 0, "%s", err.message);
	airlock_exec *e = NULL;
	s.mechanism = AIRLOCK_MECHANISM_FAKE;
	cr_assert_eq(airlock_exec_open(&s, &e, &err), 0, "%s", err.message);
	cr_assert_str_eq(airlock_exec_name(e), "fake");
	airlock_exec_free(e);
	/* native and gvisor open where the host can run them, and otherwise
	 * say why. */
	const airlock_mechanism hosted[] = { AIRLOCK_MECHANISM_NATIVE, AIRLOCK_MECHANISM_GVISOR };
	for (size_t i = 0; i < sizeof(hosted) / sizeof(hosted[0]); i++) {
		s.mechanism = hosted[i];
		e = NULL;
		const char *why = airlock_mechanism_unavailable_reason(hosted[i]);
		int rc = airlock_exec_open(&s, &e, &err);
		if (why) {
			cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE), "%s", err.message);
			cr_assert_null(e);
		} else {
			cr_assert_eq(rc, 0, "%s", err.message);
			cr_assert_str_eq(airlock_exec_name(e), airlock_mechanism_name(hosted[i]));
			airlock_exec_free(e);
		}
	}
	for (int m = AIRLOCK_MECHANISM_INVALID + 1; m < AIRLOCK_MECHANISM__MAX; m++) {
		if (m == AIRLOCK_MECHANISM_FAKE || m == AIRLOCK_MECHANISM_NATIVE ||
		    m == AIRLOCK_MECHANISM_GVISOR)
			continue;
		s.mechanism = (airlock_mechanism)m;
		e = NULL;
		int rc = airlock_exec_open(&s, &e, &err);
		cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_NOT_IMPLEMENTED), "%s",
		             airlock_mechanism_name((airlock_mechanism)m));
		cr_assert(strstr(err.message, airlock_mechanism_name((airlock_mechanism)m)), "%s",
		          err.message);
		cr_assert_null(e);
	}
	airlock_settings_clear(&s);
}

/* ---- the service's calls: provision_as, capacity, list, expire, events -- */

Test(service_calls, provision_as_takes_the_callers_id_once)
{
	wctx c;
	wopen(&c, NULL, NULL);
	airlock_error err = { 0 };
	airlock_environment_handle h = { 0 };
	const char *id = "env_0123456789abcdef0123456789abcdef";
	cr_assert_eq(airlock_exec_provision_as(c.exec, &c.spec, id, &h, &err), 0, "%s", err.message);
	cr_assert_str_eq(h.environment_id, id);
	airlock_environment_handle h2 = { 0 };
	cr_assert_eq(airlock_exec_provision_as(c.exec, &c.spec, id, &h2, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	cr_assert(strstr(err.message, "already live"), "%s", err.message);
	cr_assert_eq(airlock_exec_provision_as(c.exec, &c.spec, "env_../../x", &h2, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	cr_assert(strstr(err.message, "environment_id"), "%s", err.message);
	cr_assert_eq(airlock_fake_live_count(c.fake), 2, "only the two good provisions exist");
	cr_assert_eq(airlock_exec_destroy(c.exec, &h, &err), 0, "%s", err.message);
	airlock_environment_handle_clear(&h);
	wclose(&c);
}

Test(service_calls, past_max_sandboxes_provision_is_unavailable_at_once)
{
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.max_sandboxes = 1;
	wctx c;
	wopen(&c, NULL, &cfg);
	airlock_error err = { 0 };
	airlock_environment_handle h = { 0 };
	cr_assert_eq(airlock_exec_provision(c.exec, &c.spec, &h, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE));
	cr_assert(strstr(err.message, "max_sandboxes 1"), "%s", err.message);
	cr_assert_eq(airlock_fake_live_count(c.fake), 1);
	cr_assert_eq(airlock_exec_live(c.exec), 1);
	wclose(&c);
}

Test(service_calls, list_is_a_sorted_snapshot_with_run_and_epoch)
{
	wctx c;
	wopen(&c, NULL, NULL);
	airlock_exec_entry *v = NULL;
	size_t n = 0;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_list(c.exec, &v, &n, &err), 0, "%s", err.message);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(v[0].environment_id, c.h.environment_id);
	cr_assert_str_eq(v[0].tenant_id, "t1");
	cr_assert_str_eq(v[0].run_id, "r1");
	cr_assert_eq(v[0].lease_epoch, c.spec.lease_epoch);
	cr_assert_eq(v[0].expires_at_ms, c.h.expires_at_ms);
	cr_assert(!v[0].busy);
	airlock_exec_list_free(v, n);
	char tenant[64];
	cr_assert_eq(airlock_exec_tenant_of(c.exec, c.h.environment_id, tenant, sizeof(tenant), &err), 0);
	cr_assert_str_eq(tenant, "t1");
	cr_assert_eq(airlock_exec_tenant_of(c.exec, "env_00000000000000000000000000000000", tenant,
	                                    sizeof(tenant), &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	wclose(&c);
}

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct events_seen {
	int n[AIRLOCK_EXEC_EVENT__MAX];
	char last_reason[32];
	int64_t last_busy_ms;
	airlock_kill_reason last_kill;
} events_seen;

static void on_event(void *arg, const airlock_exec_event *ev)
{
	events_seen *s = arg;
	cr_assert(ev->kind > 0 && ev->kind < AIRLOCK_EXEC_EVENT__MAX);
	cr_assert(airlock_exec_event_kind_name(ev->kind));
	cr_assert_str_eq(ev->mechanism, "fake");
	s->n[ev->kind]++;
	if (ev->kind == AIRLOCK_EXEC_EVENT_DESTROYED) {
		snprintf(s->last_reason, sizeof(s->last_reason), "%s", ev->reason);
		s->last_busy_ms = ev->busy_ms;
	}
	if (ev->kind == AIRLOCK_EXEC_EVENT_EXECUTED)
		s->last_kill = ev->killed_by;
}

static const airlock_exec_observer observer = { on_event };

/* An idle sandbox past expires_at goes at the next expire pass, not only at
 * its next execute; the observer hears each lifecycle step with the reason. */
Test(service_calls, expire_destroys_idle_sandboxes_and_events_say_why)
{
	events_seen seen = { 0 };
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.hard_cap_seconds = 1;
	cfg.observer = &observer;
	cfg.observer_arg = &seen;
	wctx c;
	wopen(&c, NULL, &cfg);
	cr_assert_eq(seen.n[AIRLOCK_EXEC_EVENT_PROVISIONED], 1);
	const char *sleeper[] = { "sleep", NULL };
	airlock_fake_behaviour b = { .runs_for_ms = 150 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_script(c.fake, sleeper, &b, &err), 0);
	airlock_execution_command cmd = test_command((char **)sleeper);
	airlock_execution_result r;
	cr_assert_eq(wexec(&c, &cmd, &r, &err), 0, "%s", err.message);
	airlock_execution_result_clear(&r);
	cr_assert_eq(seen.n[AIRLOCK_EXEC_EVENT_EXECUTED], 1);
	cr_assert_eq(airlock_exec_expire(c.exec, wall_ms()), 0, "not expired yet");
	cr_assert_eq(airlock_exec_expire(c.exec, c.h.expires_at_ms), 1);
	cr_assert_eq(airlock_fake_live_count(c.fake), 0);
	cr_assert_eq(airlock_exec_live(c.exec), 0);
	cr_assert_eq(seen.n[AIRLOCK_EXEC_EVENT_DESTROYED], 1);
	cr_assert_str_eq(seen.last_reason, "expired");
	cr_assert(seen.last_busy_ms >= 140, "busy time counted: %lld", (long long)seen.last_busy_ms);
	wclose(&c);
	cr_assert_eq(seen.n[AIRLOCK_EXEC_EVENT_DESTROYED], 1, "the destroy of a gone id says nothing");
}

typedef struct streamed {
	char out[256], errs[256];
	size_t n_out, n_err;
} streamed;

static void on_output(void *arg, airlock_output_stream s, const void *data, size_t len)
{
	streamed *st = arg;
	char *dst = s == AIRLOCK_OUTPUT_STDOUT ? st->out : st->errs;
	size_t *n = s == AIRLOCK_OUTPUT_STDOUT ? &st->n_out : &st->n_err;
	cr_assert(*n + len < sizeof(st->out));
	memcpy(dst + *n, data, len);
	*n += len;
}

/* The observer sees exactly the result's bytes, capped the same way. */
Test(service_calls, output_observer_sees_exactly_the_results_bytes)
{
	wctx c;
	wopen(&c, NULL, NULL);
	const char *argv[] = { "talk", NULL };
	airlock_fake_behaviour b = { .stdout_data = "0123456789", .stdout_len = 10,
		                     .stderr_data = "err", .stderr_len = 3 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_script(c.fake, argv, &b, &err), 0);
	airlock_execution_command cmd = test_command((char **)argv);
	cmd.maximum_output_bytes = 4;
	streamed st = { 0 };
	c.call.on_output = on_output;
	c.call.output_arg = &st;
	airlock_execution_result r;
	cr_assert_eq(wexec(&c, &cmd, &r, &err), 0, "%s", err.message);
	cr_assert_eq(r.killed_by, AIRLOCK_KILL_OUTPUT_LIMIT);
	cr_assert_eq(st.n_out, r.stdout_len);
	cr_assert_eq(memcmp(st.out, r.stdout_data, r.stdout_len), 0);
	cr_assert_eq(st.n_err, 3);
	cr_assert_str_eq(airlock_output_stream_name(AIRLOCK_OUTPUT_STDERR), "stderr");
	airlock_execution_result_clear(&r);
	wclose(&c);
}

/* An adapter (a remote service, say) that returns more output than the
 * command allowed is refused by the wrapper for every mechanism. */
static int oversize_execute(void *ctx, const airlock_environment_handle *h,
                            const airlock_exec_request *req, airlock_execution_result *ret,
                            airlock_error *err)
{
	int r = real_execute(ctx, h, req, ret, err);
	free(ret->stdout_data);
	ret->stdout_len = (size_t)req->command->maximum_output_bytes + 1;
	ret->stdout_data = calloc(1, ret->stdout_len + 1);
	return r;
}

Test(invariants, output_over_the_cap_is_refused)
{
	static airlock_exec_ops broken;
	broken = *airlock_fake_ops();
	broken.name = "broken";
	real_execute = broken.execute;
	broken.execute = oversize_execute;
	wctx c;
	wopen(&c, &broken, NULL);
	char *argv[] = { "true", NULL };
	airlock_execution_command cmd = test_command(argv);
	cmd.maximum_output_bytes = 10;
	airlock_execution_result r;
	airlock_error err = { 0 };
	cr_assert_eq(wexec(&c, &cmd, &r, &err), airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE));
	cr_assert(strstr(err.message, "maximum_output_bytes"), "%s", err.message);
	cr_assert_null(r.stdout_data, "nothing of the bad result is handed out");
	wclose(&c);
}

/* ---- the busy claim belongs to one record, not to its id ---------------- */

/* Holds the first EXECUTED event's thread (the execute that has not yet
 * released its claim) until released. */
typedef struct claim_gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool held, released;
} claim_gate;

static void gate_on_event(void *arg, const airlock_exec_event *ev)
{
	claim_gate *g = arg;
	if (ev->kind != AIRLOCK_EXEC_EVENT_EXECUTED)
		return;
	pthread_mutex_lock(&g->lock);
	if (!g->held) {
		g->held = true;
		pthread_cond_broadcast(&g->cond);
		while (!g->released)
			pthread_cond_wait(&g->cond, &g->lock);
	}
	pthread_mutex_unlock(&g->lock);
}

static const airlock_exec_observer gate_observer = { gate_on_event };

typedef struct claim_run {
	airlock_exec *exec;
	const airlock_exec_call *call;
	const airlock_environment_handle *h;
	char *argv[2];
	airlock_execution_result r;
	airlock_error err;
	int rc;
} claim_run;

static void *claim_run_main(void *arg)
{
	claim_run *x = arg;
	airlock_execution_command cmd = test_command(x->argv);
	x->rc = airlock_exec_execute(x->exec, x->call, x->h, &cmd, &x->r, &x->err);
	return NULL;
}

static bool listed_busy(airlock_exec *e, const char *id)
{
	airlock_exec_entry *v = NULL;
	size_t n = 0;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_list(e, &v, &n, &err), 0, "%s", err.message);
	bool busy = false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].environment_id, id) == 0)
			busy = v[i].busy;
	airlock_exec_list_free(v, n);
	return busy;
}

/* An execute still ending on a sandbox that was destroyed and provisioned
 * again under the same id (its claim was taken on the old record) must not
 * end the claim of a command running on the new one: a third execute would
 * then run beside it (the release went by id). */
Test(service_calls, a_claim_on_a_destroyed_sandbox_leaves_its_successor_busy)
{
	claim_gate g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.observer = &gate_observer;
	cfg.observer_arg = &g;
	wctx c;
	wopen(&c, NULL, &cfg);
	airlock_error err = { 0 };
	static const char *quick[] = { "quick", NULL }, *slow[] = { "slow", NULL };
	cr_assert_eq(airlock_fake_script(c.fake, quick, &(airlock_fake_behaviour){ 0 }, &err), 0);
	cr_assert_eq(airlock_fake_script(c.fake, slow, &(airlock_fake_behaviour){ .runs_for_ms = 30000 },
	                                 &err), 0);

	/* A: its command is done; it waits in the event before its release. */
	claim_run a = { .exec = c.exec, .call = &c.call, .h = &c.h, .argv = { "quick", NULL } };
	pthread_t ta;
	cr_assert_eq(pthread_create(&ta, NULL, claim_run_main, &a), 0);
	pthread_mutex_lock(&g.lock);
	while (!g.held)
		pthread_cond_wait(&g.cond, &g.lock);
	pthread_mutex_unlock(&g.lock);

	/* The id destroyed and provisioned again; B runs on the new sandbox. */
	cr_assert_eq(airlock_exec_destroy(c.exec, &c.h, &err), 0, "%s", err.message);
	airlock_environment_handle h2 = { 0 };
	cr_assert_eq(airlock_exec_provision_as(c.exec, &c.spec, c.h.environment_id, &h2, &err), 0,
	             "%s", err.message);
	airlock_exec_call call_b = c.call;
	cr_assert_eq(airlock_cancel_new(&call_b.cancel, &err), 0);
	claim_run b = { .exec = c.exec, .call = &call_b, .h = &h2, .argv = { "slow", NULL } };
	pthread_t tb;
	cr_assert_eq(pthread_create(&tb, NULL, claim_run_main, &b), 0);
	for (int i = 0; i < 500 && !listed_busy(c.exec, h2.environment_id); i++) {
		struct timespec nap = { 0, 10 * 1000 * 1000 };
		nanosleep(&nap, NULL);
	}
	cr_assert(listed_busy(c.exec, h2.environment_id), "B's command did not start");

	/* A ends now. */
	pthread_mutex_lock(&g.lock);
	g.released = true;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	pthread_join(ta, NULL);
	cr_assert_eq(a.rc, 0, "%s", a.err.message);
	airlock_execution_result_clear(&a.r);

	cr_expect(listed_busy(c.exec, h2.environment_id), "A's release ended B's claim");
	char *other[] = { "quick", NULL };
	airlock_execution_command cmd = test_command(other);
	airlock_execution_result r = { 0 };
	int rc = airlock_exec_execute(c.exec, &c.call, &h2, &cmd, &r, &err);
	airlock_execution_result_clear(&r);
	cr_expect_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED),
	             "a third execute ran beside B: rc %d", rc);

	airlock_cancel_fire(call_b.cancel);
	pthread_join(tb, NULL);
	cr_assert_eq(b.rc, 0, "%s", b.err.message);
	cr_assert_eq(b.r.killed_by, AIRLOCK_KILL_CANCELLED);
	airlock_execution_result_clear(&b.r);
	airlock_cancel_free(call_b.cancel);
	cr_assert_eq(airlock_exec_destroy(c.exec, &h2, &err), 0, "%s", err.message);
	airlock_environment_handle_clear(&h2);
	wclose(&c);
}
