/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ExecutionEnvironment contract suite (the specification, "One
 * contract suite, four adapters"). Written once; every adapter runs it
 * unchanged through CONTRACT_TEST, which instantiates each test once per
 * adapter in ADAPTERS. Adding a mechanism is one line in ADAPTERS and one
 * fixture: never a copy of the suite.
 *
 * The commands are real commands (cat, sh, sleep). A mechanism that runs
 * code runs them; the fake, which runs nothing, is scripted by its fixture's
 * prepare() to behave as those commands would. The assertions are the
 * port's semantics and nothing about isolation: isolation is a deployment
 * property and has its own gates.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "airlock/fake.h"
#include "airlock/ids.h"
#include "airlock/port/exec.h"
#include "airlock/remote.h"
#include "airlock/service.h"
#include "sandbox_testlib.h"
#include "testlib.h"
#include "util/util.h"

/* ---- fixtures ------------------------------------------------------------ */

typedef struct contract_fixture {
	const char *name;
	/* Create the service under test with cfg. */
	void (*open)(const airlock_exec_config *cfg, airlock_exec **ret, void **state);
	/* Make argv behave, on a mechanism that runs nothing, as the real
	 * command would (b describes it). A no-op for mechanisms that execute. */
	void (*prepare)(void *state, const char *const *argv, const airlock_fake_behaviour *b);
	/* Adjust the suite's spec to what the mechanism runs (its image). */
	void (*adjust_spec)(void *state, airlock_environment_spec *spec);
	/* How many sandboxes the adapter itself holds (not the wrapper's
	 * records): proves a destroy reached the mechanism. */
	size_t (*live)(void *state);
} contract_fixture;

static void fake_open(const airlock_exec_config *cfg, airlock_exec **ret, void **state)
{
	airlock_fake *f = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_new(&f, &err), 0, "%s", err.message);
	*state = f;
	cr_assert_eq(airlock_exec_new(airlock_fake_ops(), f, cfg, ret, &err), 0, "%s", err.message);
}

static void fake_prepare(void *state, const char *const *argv, const airlock_fake_behaviour *b)
{
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_script(state, argv, b, &err), 0, "%s", err.message);
}

static void fake_adjust_spec(void *state, airlock_environment_spec *spec)
{
	(void)state;
	(void)spec;
}

static size_t fake_live(void *state)
{
	return airlock_fake_live_count(state);
}

static const contract_fixture fake_fixture = { "fake", fake_open, fake_prepare, fake_adjust_spec,
	                                       fake_live };

/* native: real namespaces and cgroups; the commands really run. A host that
 * cannot run it skips with the reason. */
static char native_digest[AIRLOCK_IMAGE_DIGEST_SIZE];

static void native_open(const airlock_exec_config *cfg, airlock_exec **ret, void **state)
{
	native_test_require(native_digest);
	airlock_native *n = NULL;
	*ret = native_test_open_with(cfg, &n);
	*state = n;
}

static void executing_prepare(void *state, const char *const *argv, const airlock_fake_behaviour *b)
{
	(void)state;
	(void)argv;
	(void)b;
}

static void native_adjust_spec(void *state, airlock_environment_spec *spec)
{
	(void)state;
	free(spec->image_digest);
	spec->image_digest = strdup(native_digest);
}

static size_t native_live(void *state)
{
	return airlock_native_live_count(state);
}

static const contract_fixture native_fixture = { "native", native_open, executing_prepare,
	                                         native_adjust_spec, native_live };

/* gvisor: a gVisor sandbox per environment, the commands really run in it.
 * A host without runsc skips with the reason. */
static char gvisor_digest[AIRLOCK_IMAGE_DIGEST_SIZE];

static void gvisor_open(const airlock_exec_config *cfg, airlock_exec **ret, void **state)
{
	gvisor_test_require(gvisor_digest);
	airlock_gvisor *g = NULL;
	*ret = gvisor_test_open_with(cfg, &g);
	*state = g;
}

static void gvisor_adjust_spec(void *state, airlock_environment_spec *spec)
{
	(void)state;
	free(spec->image_digest);
	spec->image_digest = strdup(gvisor_digest);
}

static size_t gvisor_live(void *state)
{
	return airlock_gvisor_live_count(state);
}

/* It executes: nothing to prepare. */
static const contract_fixture gvisor_fixture = { "gvisor", gvisor_open, executing_prepare,
	                                         gvisor_adjust_spec, gvisor_live };

/* remote(fake), remote(native): the remote adapter (the worker's side of
 * the service API) against an in-process airlock_service on a Unix socket
 * in a mkdtemp directory, serving the fake or native adapter. The test
 * talks to the client's core; prepare scripts, live counts and adjust_spec
 * adjusts the served adapter, so every assertion is about what happened
 * on the far side of the API. Both cores get the test's config. The
 * service, its core and the directory go at exit (the suite has no close
 * hook; each test is its own process). */
typedef struct remote_state {
	const contract_fixture *inner; /* what the service serves */
	void *inner_state;
	airlock_exec *served;
	airlock_service *svc;
	char dir[64];
	char sock[96];
} remote_state;

static remote_state *remote_states[8];
static size_t n_remote_states;

static void remote_cleanup(void)
{
	for (size_t i = 0; i < n_remote_states; i++) {
		remote_state *rs = remote_states[i];
		airlock_service_free(rs->svc);
		airlock_exec_free(rs->served);
		unlink(rs->sock);
		rmdir(rs->dir);
		free(rs);
	}
	n_remote_states = 0;
}

#define REMOTE_CREDENTIAL "contract-suite-credential-7f3a9c1e5b2d8046"

static void remote_open_over(const contract_fixture *inner, const airlock_exec_config *cfg,
                             airlock_exec **ret, void **state)
{
	cr_assert(n_remote_states < ARRAY_SIZE(remote_states));
	remote_state *rs = calloc(1, sizeof(*rs));
	cr_assert_not_null(rs);
	rs->inner = inner;
	/* The served adapter first: native's require() skips before anything
	 * else exists. */
	inner->open(cfg, &rs->served, &rs->inner_state);
	if (n_remote_states == 0)
		atexit(remote_cleanup);
	remote_states[n_remote_states++] = rs;
	snprintf(rs->dir, sizeof(rs->dir), "/tmp/airlock-remote-XXXXXX");
	cr_assert_not_null(mkdtemp(rs->dir));
	snprintf(rs->sock, sizeof(rs->sock), "%s/api.sock", rs->dir);
	char listen[128];
	snprintf(listen, sizeof(listen), "unix:%s", rs->sock);
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.listen = listen;
	sc.credential = REMOTE_CREDENTIAL;
	sc.credential_len = strlen(REMOTE_CREDENTIAL);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_service_new(&sc, rs->served, &rs->svc, &err), 0, "%s", err.message);
	airlock_remote_config rc = { .address = listen, .credential = REMOTE_CREDENTIAL,
		                     .credential_len = strlen(REMOTE_CREDENTIAL) };
	airlock_remote *rm = NULL;
	cr_assert_eq(airlock_remote_new(&rc, &rm, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_new(airlock_remote_ops(), rm, cfg, ret, &err), 0, "%s",
	             err.message);
	*state = rs;
}

static void remote_fake_open(const airlock_exec_config *cfg, airlock_exec **ret, void **state)
{
	remote_open_over(&fake_fixture, cfg, ret, state);
}

static void remote_native_open(const airlock_exec_config *cfg, airlock_exec **ret, void **state)
{
	remote_open_over(&native_fixture, cfg, ret, state);
}

static void remote_prepare(void *state, const char *const *argv, const airlock_fake_behaviour *b)
{
	remote_state *rs = state;
	rs->inner->prepare(rs->inner_state, argv, b);
}

static void remote_adjust_spec(void *state, airlock_environment_spec *spec)
{
	remote_state *rs = state;
	rs->inner->adjust_spec(rs->inner_state, spec);
}

static size_t remote_live(void *state)
{
	remote_state *rs = state;
	return rs->inner->live(rs->inner_state);
}

static const contract_fixture remote_fake_fixture = { "remote_fake", remote_fake_open,
	                                              remote_prepare, remote_adjust_spec,
	                                              remote_live };
static const contract_fixture remote_native_fixture = { "remote_native", remote_native_open,
	                                                remote_prepare, remote_adjust_spec,
	                                                remote_live };

/* Every adapter the suite runs against. */
#define ADAPTERS(X)                                                                                \
	X(fake, fake_fixture) X(native, native_fixture) X(gvisor, gvisor_fixture)                 \
	X(remote_fake, remote_fake_fixture) X(remote_native, remote_native_fixture)

#define CONTRACT_INSTANCE(test, adapter, fixture)                                                  \
	Test(contract_##adapter, test, .timeout = 120) { test##_body(&fixture); }
#define CONTRACT_TEST(test)                                                                        \
	static void test##_body(const contract_fixture *fx);                                       \
	ADAPTERS(CONTRACT_INSTANCE_##test)                                                         \
	static void test##_body(const contract_fixture *fx)

/* ---- per-test context ---------------------------------------------------- */

typedef struct ctx {
	const contract_fixture *fx;
	airlock_exec *exec;
	void *state;
	airlock_environment_spec spec;
	airlock_environment_handle h;
	airlock_exec_call call;
} ctx;

static void ctx_open_cfg(ctx *c, const contract_fixture *fx, const airlock_exec_config *cfg)
{
	memset(c, 0, sizeof(*c));
	c->fx = fx;
	fx->open(cfg, &c->exec, &c->state);
	test_spec(&c->spec, "tenant-a", "run-1");
	fx->adjust_spec(c->state, &c->spec);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(c->exec, &c->spec, &c->h, &err), 0, "%s", err.message);
	c->call = (airlock_exec_call){ .tenant_id = "tenant-a",
		                       .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
}

static void ctx_open(ctx *c, const contract_fixture *fx)
{
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	ctx_open_cfg(c, fx, &cfg);
}

static void ctx_close(ctx *c)
{
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_destroy(c->exec, &c->h, &err), 0, "%s", err.message);
	airlock_exec_free(c->exec);
	airlock_environment_handle_clear(&c->h);
	airlock_environment_spec_clear(&c->spec);
}

static void run(ctx *c, airlock_execution_command *cmd, airlock_execution_result *res)
{
	airlock_error err = { 0 };
	memset(res, 0, sizeof(*res));
	cr_assert_eq(airlock_exec_execute(c->exec, &c->call, &c->h, cmd, res, &err), 0, "%s",
	             err.message);
}

static const airlock_file_change *find_change(const airlock_execution_result *r, const char *path)
{
	for (size_t i = 0; i < r->n_files_changed; i++)
		if (strcmp(r->files_changed[i].path, path) == 0)
			return &r->files_changed[i];
	return NULL;
}

static void tool_write(ctx *c, const char *path, const char *data)
{
	airlock_workspace *ws = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_workspace(c->exec, &c->call, &c->h, &ws, &err), 0, "%s",
	             err.message);
	cr_assert_eq(airlock_workspace_write(ws, path, data, strlen(data), &err), 0, "%s",
	             err.message);
	airlock_workspace_release(ws);
}

/* ---- the suite ----------------------------------------------------------- */

#define CONTRACT_INSTANCE_exit_code_and_streams(a, f) CONTRACT_INSTANCE(exit_code_and_streams, a, f)
CONTRACT_TEST(exit_code_and_streams)
{
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "sh", "-c", "printf out; printf err >&2; exit 3", NULL };
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .exit_code = 3, .stdout_data = "out", .stdout_len = 3,
	                                       .stderr_data = "err", .stderr_len = 3 });
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	run(&c, &cmd, &r);
	cr_assert(r.has_exit_code);
	cr_assert_eq(r.exit_code, 3);
	cr_assert_eq(r.killed_by, AIRLOCK_KILL_NONE);
	cr_assert_not(r.timed_out);
	cr_assert_eq(r.stdout_len, 3);
	cr_assert_eq(memcmp(r.stdout_data, "out", 3), 0);
	cr_assert_eq(r.stderr_len, 3);
	cr_assert_eq(memcmp(r.stderr_data, "err", 3), 0);
	cr_assert_not(r.stdout_truncated);
	cr_assert(r.duration_ms >= 0);
	airlock_execution_result_clear(&r);
	ctx_close(&c);
}

#define CONTRACT_INSTANCE_stdin_reaches_the_process(a, f) CONTRACT_INSTANCE(stdin_reaches_the_process, a, f)
CONTRACT_TEST(stdin_reaches_the_process)
{
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "cat", NULL };
	fx->prepare(c.state, (const char *const *)argv, &(airlock_fake_behaviour){ .echo_stdin = true });
	static const unsigned char input[] = { 'h', 'i', 0, 0xff, '\n', 'x' };
	airlock_execution_command cmd = test_command(argv);
	cmd.has_stdin = true;
	cmd.stdin_data = (unsigned char *)input;
	cmd.stdin_len = sizeof(input);
	airlock_execution_result r;
	run(&c, &cmd, &r);
	cr_assert_eq(r.exit_code, 0);
	cr_assert_eq(r.stdout_len, sizeof(input));
	cr_assert_eq(memcmp(r.stdout_data, input, sizeof(input)), 0);
	airlock_execution_result_clear(&r);
	ctx_close(&c);
}

#define CONTRACT_INSTANCE_timeout_sets_both_fields(a, f) CONTRACT_INSTANCE(timeout_sets_both_fields, a, f)
CONTRACT_TEST(timeout_sets_both_fields)
{
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "sh", "-c", "printf started; exec sleep 30", NULL };
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .stdout_data = "started", .stdout_len = 7,
	                                       .runs_for_ms = 30000 });
	airlock_execution_command cmd = test_command(argv);
	cmd.timeout_seconds = 1;
	airlock_execution_result r;
	int64_t t0 = util_monotonic_ms();
	run(&c, &cmd, &r);
	cr_assert(r.timed_out);
	cr_assert_eq(r.killed_by, AIRLOCK_KILL_TIMEOUT);
	cr_assert_not(r.has_exit_code, "exit_code must be absent when killed_by is set");
	/* Partial output is returned: the last thing printed is evidence. */
	cr_assert_eq(r.stdout_len, 7);
	cr_assert_eq(memcmp(r.stdout_data, "started", 7), 0);
	cr_assert(util_monotonic_ms() - t0 < 20000, "the command was not bounded by its timeout");
	airlock_execution_result_clear(&r);
	ctx_close(&c);
}

#define CONTRACT_INSTANCE_files_changed_reports_each_kind(a, f) CONTRACT_INSTANCE(files_changed_reports_each_kind, a, f)
CONTRACT_TEST(files_changed_reports_each_kind)
{
	ctx c;
	ctx_open(&c, fx);
	tool_write(&c, "keep.txt", "old");
	tool_write(&c, "gone.txt", "bye");
	tool_write(&c, "same.txt", "unchanged");
	char *argv[] = { "sh", "-c", "printf abc > new.txt; printf x >> keep.txt; rm gone.txt", NULL };
	const airlock_fake_file_op ops[] = {
		{ .path = "new.txt", .data = "abc", .len = 3 },
		{ .path = "keep.txt", .data = "oldx", .len = 4 },
		{ .path = "gone.txt", .delete_file = true },
	};
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .file_ops = ops, .n_file_ops = 3 });
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	run(&c, &cmd, &r);
	cr_assert_eq(r.exit_code, 0);
	cr_assert_eq(r.n_files_changed, 3, "got %zu changes", r.n_files_changed);
	cr_assert_not(r.files_changed_truncated);

	char want[65];
	const airlock_file_change *f = find_change(&r, "new.txt");
	cr_assert_not_null(f);
	cr_assert_eq(f->change, AIRLOCK_CHANGE_CREATED);
	cr_assert_eq(f->size_bytes, 3);
	cr_assert(f->has_sha256);
	util_sha256_hex("abc", 3, want);
	cr_assert_str_eq(f->sha256, want);

	f = find_change(&r, "keep.txt");
	cr_assert_not_null(f);
	cr_assert_eq(f->change, AIRLOCK_CHANGE_MODIFIED);
	cr_assert_eq(f->size_bytes, 4);
	cr_assert(f->has_sha256);
	util_sha256_hex("oldx", 4, want);
	cr_assert_str_eq(f->sha256, want);

	f = find_change(&r, "gone.txt");
	cr_assert_not_null(f);
	cr_assert_eq(f->change, AIRLOCK_CHANGE_DELETED);
	cr_assert_not(f->has_sha256, "sha256 is absent exactly for deletions");

	cr_assert_null(find_change(&r, "same.txt"), "an untouched file is not a change");
	for (size_t i = 0; i < r.n_files_changed; i++)
		cr_assert_neq(r.files_changed[i].path[0], '/', "paths are relative to /workspace");
	airlock_execution_result_clear(&r);
	ctx_close(&c);
}

#define CONTRACT_INSTANCE_files_changed_nested_paths_are_relative(a, f) CONTRACT_INSTANCE(files_changed_nested_paths_are_relative, a, f)
CONTRACT_TEST(files_changed_nested_paths_are_relative)
{
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "sh", "-c", "mkdir -p out/deep && printf 1 > out/deep/r.csv", NULL };
	const airlock_fake_file_op ops[] = { { .path = "out/deep/r.csv", .data = "1", .len = 1 } };
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .file_ops = ops, .n_file_ops = 1 });
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	run(&c, &cmd, &r);
	const airlock_file_change *f = find_change(&r, "out/deep/r.csv");
	cr_assert_not_null(f, "nested file reported as out/deep/r.csv");
	cr_assert_eq(f->change, AIRLOCK_CHANGE_CREATED);
	airlock_execution_result_clear(&r);
	ctx_close(&c);
}

#define CONTRACT_INSTANCE_output_cap_truncates_and_kills(a, f) CONTRACT_INSTANCE(output_cap_truncates_and_kills, a, f)
CONTRACT_TEST(output_cap_truncates_and_kills)
{
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "sh", "-c", "head -c 200000 /dev/zero | tr '\\0' a", NULL };
	static char big[200000];
	memset(big, 'a', sizeof(big));
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .stdout_data = big, .stdout_len = sizeof(big) });
	airlock_execution_command cmd = test_command(argv);
	cmd.maximum_output_bytes = 1000;
	airlock_execution_result r;
	run(&c, &cmd, &r);
	cr_assert(r.stdout_truncated);
	cr_assert_eq(r.stdout_len, 1000, "the partial output up to the cap is returned");
	cr_assert_eq(r.stdout_data[0], 'a');
	cr_assert_eq(r.stdout_data[999], 'a');
	cr_assert_eq(r.killed_by, AIRLOCK_KILL_OUTPUT_LIMIT);
	cr_assert_not(r.has_exit_code);
	cr_assert_not(r.timed_out);
	airlock_execution_result_clear(&r);
	ctx_close(&c);
}

#define CONTRACT_INSTANCE_listing_is_capped(a, f) CONTRACT_INSTANCE(listing_is_capped, a, f)
CONTRACT_TEST(listing_is_capped)
{
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.files_changed_max = 20;
	ctx c;
	ctx_open_cfg(&c, fx, &cfg);
	char *argv[] = { "sh", "-c", "for i in $(seq 1 25); do : > f$i; done", NULL };
	airlock_fake_file_op ops[25];
	char names[25][8];
	for (int i = 0; i < 25; i++) {
		snprintf(names[i], sizeof(names[i]), "f%d", i + 1);
		ops[i] = (airlock_fake_file_op){ .path = names[i], .data = "", .len = 0 };
	}
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .file_ops = ops, .n_file_ops = 25 });
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	run(&c, &cmd, &r);
	cr_assert_eq(r.n_files_changed, 20);
	cr_assert(r.files_changed_truncated);
	airlock_execution_result_clear(&r);
	ctx_close(&c);
}

#define CONTRACT_INSTANCE_listing_default_cap_is_1000(a, f) CONTRACT_INSTANCE(listing_default_cap_is_1000, a, f)
CONTRACT_TEST(listing_default_cap_is_1000)
{
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "sh", "-c", "for i in $(seq 1 1005); do : > f$i; done", NULL };
	static airlock_fake_file_op ops[1005];
	static char names[1005][8];
	for (int i = 0; i < 1005; i++) {
		snprintf(names[i], sizeof(names[i]), "f%d", i + 1);
		ops[i] = (airlock_fake_file_op){ .path = names[i], .data = "", .len = 0 };
	}
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .file_ops = ops, .n_file_ops = 1005 });
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	run(&c, &cmd, &r);
	cr_assert_eq(r.n_files_changed, 1000);
	cr_assert(r.files_changed_truncated);
	airlock_execution_result_clear(&r);
	ctx_close(&c);
}

/* A result within its caps reaches the caller at any files_changed_max
 * (caps.h, AIRLOCK_FILES_CHANGED_JSON_MAX): at the ceiling, 10,000, a
 * command makes 3,584 files of 4,015-byte paths whose bytes are not text,
 * 72 MB of listing as JSON, past the 64 MiB a client decodes (through the
 * service the result was lost: ExecutionUnavailable). The listing is cut
 * by bytes to the sorted prefix that fits, truncated, on every adapter.
 * The names: 15 directories of 250 bytes, then 3 bytes of 16 values each
 * and 247 more, every byte a control byte or 0xff. */
#define CUT_DIRS 15
#define CUT_NAME 250
#define CUT_FILES (16 * 16 * 14)
static const unsigned char cut_bytes[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 0xff };

static void cut_fill(char *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (char)(i % 4 == 3 ? 0xff : 1 + (int)(i % 9));
}

#define CONTRACT_INSTANCE_listing_cut_by_bytes_reaches_the_caller(a, f) CONTRACT_INSTANCE(listing_cut_by_bytes_reaches_the_caller, a, f)
CONTRACT_TEST(listing_cut_by_bytes_reaches_the_caller)
{
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.files_changed_max = 10000;
	ctx c;
	ctx_open_cfg(&c, fx, &cfg);
	/* The script: D and P by printf (octal), the 16 values as N1..N16,
	 * and the files made by the shell's builtins in three loops. */
	char comp[CUT_NAME];
	cut_fill(comp, CUT_NAME);
	static char script[16384];
	size_t o = 0;
#define PUT(...) (o += (size_t)snprintf(script + o, sizeof(script) - o, __VA_ARGS__))
	PUT("set -e; C=$(printf '");
	for (size_t i = 0; i < CUT_NAME; i++)
		PUT("\\%03o", (unsigned char)comp[i]);
	PUT("'); P=$(printf '");
	for (size_t i = 0; i < CUT_NAME - 3; i++)
		PUT("\\%03o", (unsigned char)comp[i]);
	PUT("'); D=\"$C\"; for k in $(seq 2 %d); do D=\"$D/$C\"; done; mkdir -p \"$D\"; cd \"$D\"; ",
	    CUT_DIRS);
	for (int v = 0; v < 16; v++)
		PUT("N%d=$(printf '\\%03o'); ", v + 1, cut_bytes[v]);
	PUT("for a in $(seq 1 16); do eval \"x=\\$N$a\"; for b in $(seq 1 16); do "
	    "eval \"y=\\$N$b\"; for c in $(seq 1 14); do eval \"z=\\$N$c\"; : > \"$x$y$z$P\"; "
	    "done; done; done");
#undef PUT
	cr_assert_lt(o, sizeof(script) - 1);
	char *argv[] = { "sh", "-c", script, NULL };

	size_t dlen = CUT_DIRS * (CUT_NAME + 1), plen = dlen + CUT_NAME;
	static airlock_fake_file_op ops[CUT_FILES];
	static char paths[CUT_FILES][CUT_DIRS * (CUT_NAME + 1) + CUT_NAME + 1];
	for (size_t i = 0; i < CUT_FILES; i++) {
		char *q = paths[i];
		for (size_t k = 0; k < CUT_DIRS; k++) {
			memcpy(q + k * (CUT_NAME + 1), comp, CUT_NAME);
			q[k * (CUT_NAME + 1) + CUT_NAME] = '/';
		}
		q[dlen] = (char)cut_bytes[i / (16 * 14)];
		q[dlen + 1] = (char)cut_bytes[i / 14 % 16];
		q[dlen + 2] = (char)cut_bytes[i % 14];
		memcpy(q + dlen + 3, comp, CUT_NAME - 3);
		q[plen] = 0;
		ops[i] = (airlock_fake_file_op){ .path = q, .data = "", .len = 0 };
	}
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .file_ops = ops, .n_file_ops = CUT_FILES });
	airlock_execution_command cmd = test_command(argv);
	cmd.timeout_seconds = 120;
	airlock_execution_result r;
	run(&c, &cmd, &r);
	cr_assert_eq(r.exit_code, 0, "the script failed: %.*s", (int)r.stderr_len,
	             r.stderr_data ? (const char *)r.stderr_data : "");
	cr_assert(r.files_changed_truncated, "a listing cut by bytes must say so");
	size_t charge = AIRLOCK_FC_JSON_ENTRY_OVERHEAD + AIRLOCK_FC_JSON_PATH_FACTOR * plen;
	cr_assert_eq(r.n_files_changed, AIRLOCK_FILES_CHANGED_JSON_MAX / charge,
	             "%zu entries, %zu fit", r.n_files_changed, AIRLOCK_FILES_CHANGED_JSON_MAX / charge);
	for (size_t i = 0; i < r.n_files_changed; i++) {
		cr_assert_eq(r.files_changed[i].change, AIRLOCK_CHANGE_CREATED);
		cr_assert_str_eq(r.files_changed[i].path, paths[i], "entry %zu is not the %zuth name", i,
		                 i);
	}
	airlock_execution_result_clear(&r);
	ctx_close(&c);
}

#define CONTRACT_INSTANCE_destroy_is_idempotent(a, f) CONTRACT_INSTANCE(destroy_is_idempotent, a, f)
CONTRACT_TEST(destroy_is_idempotent)
{
	ctx c;
	ctx_open(&c, fx);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_destroy(c.exec, &c.h, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_destroy(c.exec, &c.h, &err), 0, "second destroy: %s", err.message);
	ctx_close(&c); /* a third */
}

#define CONTRACT_INSTANCE_execute_on_destroyed_handle_raises(a, f) CONTRACT_INSTANCE(execute_on_destroyed_handle_raises, a, f)
CONTRACT_TEST(execute_on_destroyed_handle_raises)
{
	ctx c;
	ctx_open(&c, fx);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_destroy(c.exec, &c.h, &err), 0);
	char *argv[] = { "true", NULL };
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r = { 0 };
	int rc = airlock_exec_execute(c.exec, &c.call, &c.h, &cmd, &r, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "got %d: %s", rc,
	             err.message);
	airlock_workspace *ws = NULL;
	rc = airlock_exec_workspace(c.exec, &c.call, &c.h, &ws, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	ctx_close(&c);
}

#define CONTRACT_INSTANCE_mismatched_tenant_raises(a, f) CONTRACT_INSTANCE(mismatched_tenant_raises, a, f)
CONTRACT_TEST(mismatched_tenant_raises)
{
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "true", NULL };
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };

	/* The call is for tenant-b; the handle is tenant-a's. */
	airlock_exec_call other = c.call;
	other.tenant_id = "tenant-b";
	int rc = airlock_exec_execute(c.exec, &other, &c.h, &cmd, &r, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED), "%s", err.message);
	/* Suspicion destroys the sandbox: the handle no longer executes. */
	rc = airlock_exec_execute(c.exec, &c.call, &c.h, &cmd, &r, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "%s", err.message);
	ctx_close(&c);
}

/*
 * A forged handle: one field of a live handle rewritten. Each field is
 * checked on its own (a wrapper that dropped one comparison passes every
 * other case), and each must raise SandboxEscapeSuspected AND destroy the
 * sandbox: the genuine handle is dead afterwards and the adapter itself no
 * longer holds the sandbox.
 */
typedef enum forged_field {
	FORGE_TENANT, FORGE_RUN, FORGE_EPOCH, FORGE_CREATED_AT, FORGE_EXPIRES_AT,
} forged_field;

static const char *const forged_field_names[] = {
	"tenant_id", "run_id", "lease_epoch", "created_at_ms", "expires_at_ms",
};

static void forged_field_raises_and_destroys(const contract_fixture *fx, forged_field field)
{
	ctx c;
	ctx_open(&c, fx);
	const char *name = forged_field_names[field];
	cr_assert_eq(fx->live(c.state), 1);
	char *argv[] = { "true", NULL };
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };
	airlock_environment_handle forged = { 0 };
	cr_assert_eq(airlock_environment_handle_copy(&forged, &c.h), 0);
	airlock_exec_call call = c.call;
	switch (field) {
	case FORGE_TENANT: /* claims tenant-b, used by a tenant-b call */
		free(forged.tenant_id);
		forged.tenant_id = strdup("tenant-b");
		call.tenant_id = "tenant-b";
		break;
	case FORGE_RUN:
		free(forged.run_id);
		forged.run_id = strdup("run-2");
		break;
	case FORGE_EPOCH:
		forged.lease_epoch++;
		break;
	case FORGE_CREATED_AT:
		forged.created_at_ms--;
		break;
	case FORGE_EXPIRES_AT: /* a handle that tries to live longer */
		forged.expires_at_ms += 3600 * 1000;
		break;
	}
	int rc = airlock_exec_execute(c.exec, &call, &forged, &cmd, &r, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED),
	             "forged %s: rc %d: %s", name, rc, err.message);
	cr_assert_eq(r.has_exit_code, false, "forged %s: a command ran", name);
	airlock_execution_result_clear(&r);
	airlock_environment_handle_clear(&forged);
	/* Destroyed: the genuine handle no longer executes, and the mechanism
	 * holds nothing. */
	memset(&err, 0, sizeof(err));
	rc = airlock_exec_execute(c.exec, &c.call, &c.h, &cmd, &r, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED),
	             "forged %s: the genuine handle still executes (rc %d: %s)", name, rc, err.message);
	airlock_execution_result_clear(&r);
	cr_assert_eq(fx->live(c.state), 0, "forged %s: the adapter still holds the sandbox", name);
	ctx_close(&c);
}

#define CONTRACT_INSTANCE_forged_handle_tenant_raises(a, f) CONTRACT_INSTANCE(forged_handle_tenant_raises, a, f)
CONTRACT_TEST(forged_handle_tenant_raises)
{
	forged_field_raises_and_destroys(fx, FORGE_TENANT);
}

#define CONTRACT_INSTANCE_forged_handle_run_raises(a, f) CONTRACT_INSTANCE(forged_handle_run_raises, a, f)
CONTRACT_TEST(forged_handle_run_raises)
{
	forged_field_raises_and_destroys(fx, FORGE_RUN);
}

#define CONTRACT_INSTANCE_forged_handle_epoch_raises(a, f) CONTRACT_INSTANCE(forged_handle_epoch_raises, a, f)
CONTRACT_TEST(forged_handle_epoch_raises)
{
	forged_field_raises_and_destroys(fx, FORGE_EPOCH);
}

#define CONTRACT_INSTANCE_forged_handle_created_at_raises(a, f) CONTRACT_INSTANCE(forged_handle_created_at_raises, a, f)
CONTRACT_TEST(forged_handle_created_at_raises)
{
	forged_field_raises_and_destroys(fx, FORGE_CREATED_AT);
}

#define CONTRACT_INSTANCE_forged_handle_expires_at_raises(a, f) CONTRACT_INSTANCE(forged_handle_expires_at_raises, a, f)
CONTRACT_TEST(forged_handle_expires_at_raises)
{
	forged_field_raises_and_destroys(fx, FORGE_EXPIRES_AT);
}

/* destroy compares the whole handle too: each field forged on its own is
 * SandboxEscapeSuspected, and the sandbox goes all the same (the adapter
 * holds nothing); the genuine handle then finds it gone, which a destroy
 * answers with success. */
#define CONTRACT_INSTANCE_forged_handle_destroy_raises(a, f) CONTRACT_INSTANCE(forged_handle_destroy_raises, a, f)
CONTRACT_TEST(forged_handle_destroy_raises)
{
	for (forged_field field = FORGE_TENANT; field <= FORGE_EXPIRES_AT; field++) {
		ctx c;
		ctx_open(&c, fx);
		const char *name = forged_field_names[field];
		airlock_environment_handle forged = { 0 };
		cr_assert_eq(airlock_environment_handle_copy(&forged, &c.h), 0);
		switch (field) {
		case FORGE_TENANT:
			free(forged.tenant_id);
			forged.tenant_id = strdup("tenant-b");
			break;
		case FORGE_RUN:
			free(forged.run_id);
			forged.run_id = strdup("run-2");
			break;
		case FORGE_EPOCH: /* a stale lease */
			forged.lease_epoch--;
			break;
		case FORGE_CREATED_AT:
			forged.created_at_ms--;
			break;
		case FORGE_EXPIRES_AT:
			forged.expires_at_ms += 3600 * 1000;
			break;
		}
		airlock_error err = { 0 };
		int rc = airlock_exec_destroy(c.exec, &forged, &err);
		airlock_environment_handle_clear(&forged);
		cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED),
		             "destroy with a forged %s: rc %d: %s", name, rc, err.message);
		cr_assert_eq(fx->live(c.state), 0, "forged %s: the adapter still holds the sandbox",
		             name);
		ctx_close(&c); /* the genuine handle's destroy: already gone, 0 */
	}
}

/* environment_id rewritten to another live sandbox's (same tenant, another
 * run): the sandbox it names is the one destroyed, and the sandbox the
 * handle came from is untouched. An id that names nothing is
 * ExecutionRejected and destroys nothing. */
#define CONTRACT_INSTANCE_forged_handle_environment_id_raises(a, f) CONTRACT_INSTANCE(forged_handle_environment_id_raises, a, f)
CONTRACT_TEST(forged_handle_environment_id_raises)
{
	ctx c;
	ctx_open(&c, fx);
	airlock_environment_spec spec2;
	test_spec(&spec2, "tenant-a", "run-2");
	fx->adjust_spec(c.state, &spec2);
	airlock_environment_handle h2 = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(c.exec, &spec2, &h2, &err), 0, "%s", err.message);
	cr_assert_eq(fx->live(c.state), 2);
	char *argv[] = { "true", NULL };
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r = { 0 };

	airlock_environment_handle forged = { 0 };
	cr_assert_eq(airlock_environment_handle_copy(&forged, &c.h), 0);
	/* A valid id that names no sandbox: rejected, nothing destroyed. */
	char *last = &forged.environment_id[strlen(forged.environment_id) - 1];
	*last = *last == '0' ? '1' : '0';
	cr_assert(airlock_environment_id_valid(forged.environment_id));
	int rc = airlock_exec_execute(c.exec, &c.call, &forged, &cmd, &r, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "rc %d: %s", rc, err.message);
	airlock_execution_result_clear(&r);
	cr_assert_eq(fx->live(c.state), 2, "an id naming nothing destroyed something");

	/* The second sandbox's id on the first's handle. */
	snprintf(forged.environment_id, sizeof(forged.environment_id), "%s", h2.environment_id);
	memset(&err, 0, sizeof(err));
	rc = airlock_exec_execute(c.exec, &c.call, &forged, &cmd, &r, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED), "rc %d: %s", rc,
	             err.message);
	cr_assert_eq(r.has_exit_code, false, "a command ran");
	airlock_execution_result_clear(&r);
	airlock_environment_handle_clear(&forged);
	cr_assert_eq(fx->live(c.state), 1, "the sandbox the forged id named is still held");
	memset(&err, 0, sizeof(err));
	rc = airlock_exec_execute(c.exec, &c.call, &h2, &cmd, &r, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED),
	             "the named sandbox's genuine handle still executes (rc %d: %s)", rc, err.message);
	airlock_execution_result_clear(&r);
	/* The first sandbox is untouched: its genuine handle still runs. */
	fx->prepare(c.state, (const char *const *)argv, &(airlock_fake_behaviour){ 0 });
	run(&c, &cmd, &r);
	cr_assert_eq(r.exit_code, 0);
	airlock_execution_result_clear(&r);
	airlock_environment_handle_clear(&h2);
	airlock_environment_spec_clear(&spec2);
	ctx_close(&c);
}

#define CONTRACT_INSTANCE_workspace_persists_across_executes(a, f) CONTRACT_INSTANCE(workspace_persists_across_executes, a, f)
CONTRACT_TEST(workspace_persists_across_executes)
{
	ctx c;
	ctx_open(&c, fx);
	char *w[] = { "sh", "-c", "printf kept > p.txt", NULL };
	const airlock_fake_file_op ops[] = { { .path = "p.txt", .data = "kept", .len = 4 } };
	fx->prepare(c.state, (const char *const *)w,
	            &(airlock_fake_behaviour){ .file_ops = ops, .n_file_ops = 1 });
	airlock_execution_command cmd = test_command(w);
	airlock_execution_result r;
	run(&c, &cmd, &r);
	airlock_execution_result_clear(&r);

	/* The second command's result comes from the workspace, not the script:
	 * the read goes through the workspace port of the same sandbox. */
	airlock_workspace *ws = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_workspace(c.exec, &c.call, &c.h, &ws, &err), 0);
	unsigned char *data = NULL;
	size_t len = 0;
	cr_assert_eq(airlock_workspace_read(ws, "p.txt", 1024, &data, &len, &err), 0, "%s",
	             err.message);
	cr_assert_eq(len, 4);
	cr_assert_eq(memcmp(data, "kept", 4), 0);
	free(data);
	airlock_provenance p;
	cr_assert_eq(airlock_workspace_provenance(ws, "p.txt", &p, &err), 0, "%s", err.message);
	cr_assert_eq(p, AIRLOCK_PROVENANCE_SANDBOX_WRITTEN, "bytes a sandbox wrote are never laundered");
	airlock_workspace_release(ws);
	ctx_close(&c);
}

typedef struct canceller {
	airlock_cancel *token;
	int delay_ms;
} canceller;

static void *cancel_later(void *arg)
{
	canceller *k = arg;
	struct timespec ts = { .tv_sec = k->delay_ms / 1000,
		               .tv_nsec = (long)(k->delay_ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
	airlock_cancel_fire(k->token);
	return NULL;
}

#define CONTRACT_INSTANCE_cancel_kills_with_cancelled(a, f) CONTRACT_INSTANCE(cancel_kills_with_cancelled, a, f)
CONTRACT_TEST(cancel_kills_with_cancelled)
{
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "sh", "-c", "printf partial; exec sleep 30", NULL };
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .stdout_data = "partial", .stdout_len = 7,
	                                       .runs_for_ms = 30000 });
	airlock_error err = { 0 };
	canceller k = { .delay_ms = 300 };
	cr_assert_eq(airlock_cancel_new(&k.token, &err), 0);
	c.call.cancel = k.token;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, cancel_later, &k), 0);
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	run(&c, &cmd, &r);
	pthread_join(t, NULL);
	cr_assert_eq(r.killed_by, AIRLOCK_KILL_CANCELLED);
	cr_assert_not(r.timed_out);
	cr_assert_not(r.has_exit_code);
	cr_assert_eq(r.stdout_len, 7, "a cancelled command's output is evidence");
	airlock_execution_result_clear(&r);
	airlock_cancel_free(k.token);
	ctx_close(&c);
}

typedef struct shutdown_run {
	ctx *c;
	airlock_execution_result r;
	int rc;
} shutdown_run;

static void *execute_long(void *arg)
{
	shutdown_run *s = arg;
	char *argv[] = { "sh", "-c", "printf up; exec sleep 30", NULL };
	airlock_execution_command cmd = test_command(argv);
	airlock_error err = { 0 };
	s->rc = airlock_exec_execute(s->c->exec, &s->c->call, &s->c->h, &cmd, &s->r, &err);
	return NULL;
}

#define CONTRACT_INSTANCE_service_shutdown_ends_a_running_command(a, f) CONTRACT_INSTANCE(service_shutdown_ends_a_running_command, a, f)
CONTRACT_TEST(service_shutdown_ends_a_running_command)
{
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "sh", "-c", "printf up; exec sleep 30", NULL };
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .stdout_data = "up", .stdout_len = 2,
	                                       .runs_for_ms = 30000 });
	shutdown_run s = { .c = &c };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, execute_long, &s), 0);
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 500 * 1000000L };
	nanosleep(&ts, NULL);
	int64_t t0 = util_monotonic_ms();
	/* Free waits for the command, which ends now rather than in 30 s. */
	airlock_exec_free(c.exec);
	pthread_join(t, NULL);
	cr_assert(util_monotonic_ms() - t0 < 15000, "shutdown waited for the command to finish");
	cr_assert_eq(s.rc, 0);
	cr_assert_eq(s.r.killed_by, AIRLOCK_KILL_SERVICE_SHUTDOWN);
	cr_assert_not(s.r.has_exit_code);
	cr_assert_eq(s.r.stdout_len, 2, "partial output is returned");
	airlock_execution_result_clear(&s.r);
	airlock_environment_handle_clear(&c.h);
	airlock_environment_spec_clear(&c.spec);
}

typedef struct long_run {
	ctx *c;
	airlock_cancel *cancel;
	airlock_execution_result r;
	int rc;
} long_run;

static void *execute_until_cancelled(void *arg)
{
	long_run *s = arg;
	char *argv[] = { "sh", "-c", "exec sleep 30", NULL };
	airlock_execution_command cmd = test_command(argv);
	airlock_exec_call call = s->c->call;
	call.cancel = s->cancel;
	airlock_error err = { 0 };
	s->rc = airlock_exec_execute(s->c->exec, &call, &s->c->h, &cmd, &s->r, &err);
	return NULL;
}

#define CONTRACT_INSTANCE_a_second_concurrent_execute_is_refused(a, f) CONTRACT_INSTANCE(a_second_concurrent_execute_is_refused, a, f)
CONTRACT_TEST(a_second_concurrent_execute_is_refused)
{
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "sh", "-c", "exec sleep 30", NULL };
	fx->prepare(c.state, (const char *const *)argv, &(airlock_fake_behaviour){ .runs_for_ms = 30000 });
	airlock_error err = { 0 };
	long_run s = { .c = &c };
	cr_assert_eq(airlock_cancel_new(&s.cancel, &err), 0);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, execute_until_cancelled, &s), 0);
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 500 * 1000000L };
	nanosleep(&ts, NULL);
	char *other[] = { "true", NULL };
	airlock_execution_command cmd = test_command(other);
	airlock_execution_result r = { 0 };
	int rc = airlock_exec_execute(c.exec, &c.call, &c.h, &cmd, &r, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "got %d: %s", rc, err.message);
	cr_assert(strstr(err.message, "another command"), "%s", err.message);
	airlock_cancel_fire(s.cancel);
	pthread_join(t, NULL);
	cr_assert_eq(s.rc, 0);
	cr_assert_eq(s.r.killed_by, AIRLOCK_KILL_CANCELLED, "the first command was not disturbed");
	airlock_execution_result_clear(&s.r);
	airlock_cancel_free(s.cancel);
	/* And once it has ended, the sandbox takes commands again. */
	fx->prepare(c.state, (const char *const *)other, &(airlock_fake_behaviour){ 0 });
	run(&c, &cmd, &r);
	cr_assert_eq(r.exit_code, 0);
	airlock_execution_result_clear(&r);
	ctx_close(&c);
}

#define CONTRACT_INSTANCE_expiry_mid_command_kills_with_expired(a, f) CONTRACT_INSTANCE(expiry_mid_command_kills_with_expired, a, f)
CONTRACT_TEST(expiry_mid_command_kills_with_expired)
{
	/* expires_at is created_at + the hard cap: with a 2 s cap and part of
	 * the sandbox's life already spent, expiry comes before the command's
	 * own 2 s timeout, so the reason must be EXPIRED, not TIMEOUT. */
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.hard_cap_seconds = 2;
	ctx c;
	ctx_open_cfg(&c, fx, &cfg);
	char *argv[] = { "sh", "-c", "printf begun; exec sleep 30", NULL };
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .stdout_data = "begun", .stdout_len = 5,
	                                       .runs_for_ms = 30000 });
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 600 * 1000000L };
	nanosleep(&ts, NULL);
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	run(&c, &cmd, &r);
	cr_assert_eq(r.killed_by, AIRLOCK_KILL_EXPIRED, "killed_by=%d", r.killed_by);
	cr_assert_not(r.timed_out);
	cr_assert_not(r.has_exit_code);
	cr_assert_eq(r.stdout_len, 5, "partial output is returned");
	airlock_execution_result_clear(&r);
	/* An expired sandbox is destroyed: the handle no longer executes. */
	airlock_error err = { 0 };
	char *t[] = { "true", NULL };
	airlock_execution_command again = test_command(t);
	cr_assert_eq(airlock_exec_execute(c.exec, &c.call, &c.h, &again, &r, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "%s", err.message);
	ctx_close(&c);
}

#define CONTRACT_INSTANCE_command_starts_with_default_signals(a, f) CONTRACT_INSTANCE(command_starts_with_default_signals, a, f)
CONTRACT_TEST(command_starts_with_default_signals)
{
	/* A service blocks SIGINT/SIGTERM to wait for them itself and ignores
	 * SIGPIPE so no reader can kill it. None of that may reach the command:
	 * `yes | head -1` ends quietly (yes dies of SIGPIPE instead of printing
	 * "Broken pipe"), a shell that sends itself SIGTERM or SIGINT dies of
	 * it (blocked or ignored, it would say it survived), and where the
	 * kernel's /proc shows them (Linux; gVisor 20221219 has no such lines)
	 * the mask and the ignored set are empty. */
	sigset_t block, old_mask;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	cr_assert_eq(pthread_sigmask(SIG_BLOCK, &block, &old_mask), 0);
	struct sigaction ign = { .sa_handler = SIG_IGN }, old_pipe;
	cr_assert_eq(sigaction(SIGPIPE, &ign, &old_pipe), 0);
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "sh", "-c",
		         /* The subshell reports its children's deaths by signal
		          * ("Terminated") on its stderr, which is /dev/null. */
		         "yes | head -1; (exec 2>/dev/null; sh -c 'kill -TERM $$; echo TERM survived';"
		         " sh -c 'kill -INT $$; echo INT survived');"
		         " grep -E '^Sig(Blk|Ign)' /proc/self/status; true",
		         NULL };
	static const char want[] = "y\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n";
	static const char zeros[] = "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n";
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .stdout_data = want, .stdout_len = sizeof(want) - 1 });
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	run(&c, &cmd, &r);
	cr_assert_eq(r.exit_code, 0);
	const char *out = (const char *)r.stdout_data;
	cr_assert(r.stdout_len >= 2 && memcmp(out, "y\n", 2) == 0, "stdout: %.*s", (int)r.stdout_len, out);
	cr_assert(!memmem(out, r.stdout_len, "survived", 8), "stdout: %.*s", (int)r.stdout_len, out);
	/* The /proc lines, when the kernel has them, are all zeros. */
	if (memmem(out, r.stdout_len, "Sig", 3))
		cr_assert(r.stdout_len == 2 + sizeof(zeros) - 1 && memcmp(out + 2, zeros, sizeof(zeros) - 1) == 0,
		          "stdout: %.*s", (int)r.stdout_len, out);
	else
		cr_assert_eq(r.stdout_len, 2, "stdout: %.*s", (int)r.stdout_len, out);
	cr_assert_eq(r.stderr_len, 0, "stderr: %.*s", (int)r.stderr_len, (const char *)r.stderr_data);
	airlock_execution_result_clear(&r);
	ctx_close(&c);
	sigaction(SIGPIPE, &old_pipe, NULL);
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
}

#define CONTRACT_INSTANCE_stdin_the_command_does_not_read(a, f) CONTRACT_INSTANCE(stdin_the_command_does_not_read, a, f)
CONTRACT_TEST(stdin_the_command_does_not_read)
{
	/* More input than a pipe holds, to a command that exits without
	 * reading it: not an error, and the caller (SIGPIPE at its default
	 * here, as in any embedding process) must not die of the write. */
	struct sigaction dfl = { .sa_handler = SIG_DFL }, old_pipe;
	cr_assert_eq(sigaction(SIGPIPE, &dfl, &old_pipe), 0);
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "true", NULL };
	fx->prepare(c.state, (const char *const *)argv, &(airlock_fake_behaviour){ 0 });
	size_t len = 1u << 20;
	unsigned char *input = calloc(1, len);
	cr_assert_not_null(input);
	airlock_execution_command cmd = test_command(argv);
	cmd.has_stdin = true;
	cmd.stdin_data = input;
	cmd.stdin_len = len;
	airlock_execution_result r;
	run(&c, &cmd, &r);
	cr_assert(r.has_exit_code);
	cr_assert_eq(r.exit_code, 0);
	airlock_execution_result_clear(&r);
	free(input);
	ctx_close(&c);
	sigaction(SIGPIPE, &old_pipe, NULL);
}

#define CONTRACT_INSTANCE_shutdown_ends_the_command_and_keeps_cleanup(a, f) CONTRACT_INSTANCE(shutdown_ends_the_command_and_keeps_cleanup, a, f)
CONTRACT_TEST(shutdown_ends_the_command_and_keeps_cleanup)
{
	/* What `airlock run` does on SIGTERM: stop the service while it still
	 * owns the sandbox, print the result, then destroy. */
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "sh", "-c", "printf up; exec sleep 30", NULL };
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .stdout_data = "up", .stdout_len = 2,
	                                       .runs_for_ms = 30000 });
	shutdown_run s = { .c = &c };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, execute_long, &s), 0);
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 500 * 1000000L };
	nanosleep(&ts, NULL);
	int64_t t0 = util_monotonic_ms();
	airlock_exec_shutdown(c.exec);
	airlock_exec_shutdown(c.exec); /* idempotent */
	pthread_join(t, NULL);
	cr_assert(util_monotonic_ms() - t0 < 15000, "shutdown waited for the command to finish");
	cr_assert_eq(s.rc, 0);
	cr_assert_eq(s.r.killed_by, AIRLOCK_KILL_SERVICE_SHUTDOWN);
	cr_assert_eq(s.r.stdout_len, 2, "partial output is returned");
	airlock_execution_result_clear(&s.r);
	/* No new work starts... */
	airlock_error err = { 0 };
	char *t2[] = { "true", NULL };
	airlock_execution_command again = test_command(t2);
	airlock_execution_result r = { 0 };
	cr_assert_eq(airlock_exec_execute(c.exec, &c.call, &c.h, &again, &r, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE), "%s", err.message);
	airlock_environment_handle h2 = { 0 };
	cr_assert_eq(airlock_exec_provision(c.exec, &c.spec, &h2, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE), "%s", err.message);
	/* ...and cleanup still works: ctx_close destroys and asserts it. */
	ctx_close(&c);
}

typedef struct ws_user {
	airlock_workspace *ws;
	int ok, refused, other;
	char other_msg[sizeof(((airlock_error *)0)->message)];
} ws_user;

/* Write and read back until the sandbox is gone (bounded). */
static void *use_workspace(void *arg)
{
	ws_user *u = arg;
	for (int i = 0; i < 20000 && u->refused == 0; i++) {
		airlock_error err = { 0 };
		int r = airlock_workspace_write(u->ws, "busy.txt", "abc", 3, &err);
		unsigned char *data = NULL;
		size_t len = 0;
		if (r == 0)
			r = airlock_workspace_read(u->ws, "busy.txt", 64, &data, &len, &err);
		free(data);
		if (r == 0)
			u->ok++;
		else if (r == airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED))
			u->refused++;
		else if (u->other++ == 0)
			snprintf(u->other_msg, sizeof(u->other_msg), "%s", err.message);
	}
	return NULL;
}

#define CONTRACT_INSTANCE_workspace_reference_outlives_a_concurrent_destroy(a, f) CONTRACT_INSTANCE(workspace_reference_outlives_a_concurrent_destroy, a, f)
CONTRACT_TEST(workspace_reference_outlives_a_concurrent_destroy)
{
	/* The workspace a caller holds is a reference: a destroy on another
	 * thread waits for the calls in flight and makes later ones fail with
	 * ExecutionRejected; nothing is used after it is freed (run under
	 * ASan, the old borrowed pointer was a use-after-free). */
	ctx c;
	ctx_open(&c, fx);
	airlock_error err = { 0 };
	ws_user u[3] = { { 0 } };
	pthread_t t[3];
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(airlock_exec_workspace(c.exec, &c.call, &c.h, &u[i].ws, &err), 0, "%s",
		             err.message);
		cr_assert_eq(pthread_create(&t[i], NULL, use_workspace, &u[i]), 0);
	}
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 200 * 1000000L };
	nanosleep(&ts, NULL);
	cr_assert_eq(airlock_exec_destroy(c.exec, &c.h, &err), 0, "%s", err.message);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(u[i].other, 0, "a call failed for another reason: %s", u[i].other_msg);
		/* After the destroy the reference still answers, with a refusal. */
		int r = airlock_workspace_write(u[i].ws, "late.txt", "x", 1, &err);
		cr_assert_eq(r, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "%s", err.message);
		cr_assert(strstr(err.message, "destroyed"), "%s", err.message);
		airlock_workspace_release(u[i].ws);
	}
	cr_assert(u[0].ok + u[1].ok + u[2].ok > 0, "the workspace was used before the destroy");
	ctx_close(&c); /* destroy again: idempotent */
}

#define CONTRACT_INSTANCE_command_leads_its_own_session(a, f) CONTRACT_INSTANCE(command_leads_its_own_session, a, f)
CONTRACT_TEST(command_leads_its_own_session)
{
	/* The terminal's signals (Ctrl-C, a hang-up) go to the service, which
	 * ends the command with a reason: the command is not in the caller's
	 * session or process group. /proc/PID/stat after the ')': state,
	 * ppid, pgrp, session. */
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "sh", "-c",
		         "set -- $(cut -d')' -f2 /proc/$$/stat); "
		         "[ \"$3\" = $$ ] && [ \"$4\" = $$ ] && echo own-session",
		         NULL };
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .stdout_data = "own-session\n", .stdout_len = 12 });
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	run(&c, &cmd, &r);
	cr_assert_eq(r.stdout_len, 12, "stdout: %.*s stderr: %.*s", (int)r.stdout_len,
	             (const char *)r.stdout_data, (int)r.stderr_len, (const char *)r.stderr_data);
	cr_assert_eq(memcmp(r.stdout_data, "own-session\n", 12), 0);
	airlock_execution_result_clear(&r);
	ctx_close(&c);
}

/* Output as it is produced: the observer gets, in order, exactly the bytes
 * the result holds, up to the cap and not one past it (the service's
 * streaming tests check that the first bytes arrive before the end). */
typedef struct seen_output {
	pthread_mutex_t lock;
	util_buf out, errs;
} seen_output;

static void contract_on_output(void *arg, airlock_output_stream s, const void *data, size_t len)
{
	seen_output *so = arg;
	pthread_mutex_lock(&so->lock);
	cr_assert_eq(util_buf_append(s == AIRLOCK_OUTPUT_STDOUT ? &so->out : &so->errs, data, len), 0);
	pthread_mutex_unlock(&so->lock);
}

#define CONTRACT_INSTANCE_output_is_observed_as_produced(a, f) CONTRACT_INSTANCE(output_is_observed_as_produced, a, f)
CONTRACT_TEST(output_is_observed_as_produced)
{
	ctx c;
	ctx_open(&c, fx);
	char *argv[] = { "sh", "-c", "printf 'line1\\n'; printf e1 >&2; head -c 100000 /dev/zero | tr '\\0' b; exit 4", NULL };
	static char many_b[100006];
	memcpy(many_b, "line1\n", 6);
	memset(many_b + 6, 'b', 100000);
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .exit_code = 4, .stdout_data = many_b,
	                                       .stdout_len = sizeof(many_b), .stderr_data = "e1",
	                                       .stderr_len = 2 });
	airlock_execution_command cmd = test_command(argv);
	cmd.maximum_output_bytes = 50000;
	seen_output so;
	pthread_mutex_init(&so.lock, NULL);
	util_buf_init(&so.out, 1 << 20);
	util_buf_init(&so.errs, 1 << 20);
	c.call.on_output = contract_on_output;
	c.call.output_arg = &so;
	airlock_execution_result r;
	run(&c, &cmd, &r);
	cr_assert_eq(r.killed_by, AIRLOCK_KILL_OUTPUT_LIMIT);
	cr_assert_eq(r.stdout_len, 50000);
	cr_assert_eq(so.out.len, r.stdout_len, "observed %zu of %zu stdout bytes", so.out.len,
	             r.stdout_len);
	cr_assert_eq(memcmp(so.out.data, r.stdout_data, r.stdout_len), 0);
	cr_assert_eq(so.errs.len, r.stderr_len);
	cr_assert_eq(memcmp(so.errs.data, r.stderr_data, r.stderr_len), 0);
	airlock_execution_result_clear(&r);
	util_buf_clear(&so.out);
	util_buf_clear(&so.errs);
	pthread_mutex_destroy(&so.lock);
	ctx_close(&c);
}

/* ---- a workspace file streamed out (artifact.export's transport) ---------- */

/* A file a sandbox wrote, bigger than many chunks, leaves through the
 * workspace's stream byte for byte with the SHA-256 of what the source
 * read: in process from the mechanism's volume (native, gvisor) or memory
 * (fake), and through the service's API and the remote adapter (the
 * service's digest from the trailer, compared with the client's). The
 * sandbox makes the bytes itself (yes | head), the fake is scripted with
 * the same ones. */
#define STREAM_FILE_BYTES ((size_t)64 << 20)

typedef struct stream_check {
	size_t off, calls;
	util_sha256 *hash;
	bool bad;
} stream_check;

static int stream_check_sink(void *arg, const void *buf, size_t len, airlock_error *err)
{
	(void)err;
	stream_check *k = arg;
	static const char unit[] = "abcdefghijklmno\n";
	const unsigned char *p = buf;
	for (size_t i = 0; i < len && !k->bad; i++)
		k->bad = p[i] != (unsigned char)unit[(k->off + i) % 16];
	util_sha256_update(k->hash, buf, len);
	k->off += len;
	k->calls++;
	return 0;
}

/* A sink that hashes itself (read_stream_hashed): its own digest, or one
 * byte of it flipped (lie), for the wrapper to compare with the source's. */
static bool g_digest_lies;
static int stream_check_digest(void *arg, char ret[AIRLOCK_SHA256_HEX_LEN + 1], airlock_error *err)
{
	(void)err;
	stream_check *k = arg;
	cr_assert_eq(util_sha256_final_hex(k->hash, ret), 0);
	k->hash = NULL;
	if (g_digest_lies)
		ret[0] = ret[0] == '0' ? '1' : '0';
	return 0;
}

#define CONTRACT_INSTANCE_workspace_stream_of_a_sandbox_file(a, f) CONTRACT_INSTANCE(workspace_stream_of_a_sandbox_file, a, f)
CONTRACT_TEST(workspace_stream_of_a_sandbox_file)
{
	ctx c;
	memset(&c, 0, sizeof(c));
	c.fx = fx;
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	fx->open(&cfg, &c.exec, &c.state);
	test_spec(&c.spec, "tenant-a", "run-1");
	/* Room for the file and its filesystem's own blocks. */
	c.spec.limits.workspace_bytes = 192ll << 20;
	fx->adjust_spec(c.state, &c.spec);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(c.exec, &c.spec, &c.h, &err), 0, "%s", err.message);
	c.call = (airlock_exec_call){ .tenant_id = "tenant-a",
		                      .remaining_budget_ms = AIRLOCK_BUDGET_NONE };

	unsigned char *bytes = malloc(STREAM_FILE_BYTES);
	cr_assert_not_null(bytes);
	for (size_t i = 0; i < STREAM_FILE_BYTES; i++)
		bytes[i] = (unsigned char)"abcdefghijklmno\n"[i % 16];
	char want[AIRLOCK_SHA256_HEX_LEN + 1];
	cr_assert_eq(util_sha256_hex(bytes, STREAM_FILE_BYTES, want), 0);
	char *argv[] = { "sh", "-c",
		         "yes abcdefghijklmno | head -c 67108864 > big.bin && ln -s big.bin link", NULL };
	const airlock_fake_file_op ops[] = {
		{ .path = "big.bin", .data = bytes, .len = STREAM_FILE_BYTES },
	};
	fx->prepare(c.state, (const char *const *)argv,
	            &(airlock_fake_behaviour){ .file_ops = ops, .n_file_ops = 1 });
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	run(&c, &cmd, &r);
	cr_assert_eq(r.exit_code, 0, "%.*s", (int)r.stderr_len, r.stderr_data);
	airlock_execution_result_clear(&r);
	free(bytes);

	airlock_workspace *ws = NULL;
	cr_assert_eq(airlock_exec_workspace(c.exec, &c.call, &c.h, &ws, &err), 0, "%s",
	             err.message);
	stream_check k = { .hash = util_sha256_new() };
	uint64_t size = 0;
	char src[AIRLOCK_SHA256_HEX_LEN + 1] = { 0 };
	cr_assert_eq(airlock_workspace_read_stream(ws, "big.bin", STREAM_FILE_BYTES,
	                                           stream_check_sink, &k, &size, src, &err),
	             0, "[%s] %s", fx->name, err.message);
	char got[AIRLOCK_SHA256_HEX_LEN + 1];
	cr_assert_eq(util_sha256_final_hex(k.hash, got), 0);
	cr_assert_eq(size, STREAM_FILE_BYTES);
	cr_assert_eq(k.off, STREAM_FILE_BYTES);
	cr_assert_not(k.bad, "[%s] a byte differs", fx->name);
	cr_assert_str_eq(got, want);
	cr_assert_str_eq(src, want, "[%s] the source's digest", fx->name);
	cr_assert_geq(k.calls, STREAM_FILE_BYTES / AIRLOCK_WORKSPACE_STREAM_CHUNK);

	/* A sink that hashes itself: the wrapper compares the source's digest
	 * with the sink's, and one that differs is ArtifactIntegrityError. */
	for (int lie = 0; lie < 2; lie++) {
		g_digest_lies = lie;
		k = (stream_check){ .hash = util_sha256_new() };
		char src2[AIRLOCK_SHA256_HEX_LEN + 1] = { 0 };
		int rr = airlock_workspace_read_stream_hashed(ws, "big.bin", STREAM_FILE_BYTES,
		                                              stream_check_sink, stream_check_digest,
		                                              &k, &size, src2, &err);
		util_sha256_free(k.hash);
		if (!lie) {
			cr_assert_eq(rr, 0, "[%s] %s", fx->name, err.message);
			cr_assert_str_eq(src2, want, "[%s] the source's digest", fx->name);
		} else {
			cr_assert_eq(rr, airlock_errcode(AIRLOCK_ERR_ARTIFACT_INTEGRITY), "[%s] %d %s",
			             fx->name, rr, err.message);
		}
	}
	g_digest_lies = false;

	/* One byte under the file's size: refused before a byte, naming it. */
	k = (stream_check){ .hash = util_sha256_new() };
	cr_assert_eq(airlock_workspace_read_stream(ws, "big.bin", STREAM_FILE_BYTES - 1,
	                                           stream_check_sink, &k, &size, src, &err),
	             airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION), "[%s] %s", fx->name,
	             err.message);
	cr_assert(strstr(err.message, "67108863"), "%s", err.message);
	cr_assert_eq(k.calls, 0);
	util_sha256_free(k.hash);
	/* The sandbox's symlink to it is not followed (the fake has none). */
	if (!strstr(fx->name, "fake")) {
		k = (stream_check){ .hash = util_sha256_new() };
		cr_assert_eq(airlock_workspace_read_stream(ws, "link", STREAM_FILE_BYTES,
		                                           stream_check_sink, &k, &size, src, &err),
		             airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION), "[%s] %s", fx->name,
		             err.message);
		cr_assert(strstr(err.message, "symbolic link"), "%s", err.message);
		util_sha256_free(k.hash);
	}
	airlock_workspace_release(ws);
	ctx_close(&c);
}
