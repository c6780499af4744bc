/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The contract suites' scenarios under a wrapper that fails the Nth port
 * call (tests/fault_adapter.h; SQLite's test_vfs.c): for N = 1, 2, ... each
 * scenario runs against an adapter whose Nth call fails, until a run makes
 * fewer than N calls (no fault fired: then it must succeed with the
 * contract's results). Every run must end either in success or in a clean
 * error of the class the failed call reports, with nothing left behind: the
 * adapter holds no sandbox after the scenario's destroys, a later provision
 * on the same service works, and no descriptor or allocation is left over
 * (LeakSanitizer in the ASan build; descriptors counted here).
 *
 * Why replayed scenarios rather than the contract suites themselves: the
 * contract tests assert success at every step (they state the port's
 * semantics, and must stay unchanged in what they assert), so under an
 * injected fault each would stop at its first cr_assert, before its own
 * cleanup, and say nothing about the failure path. Here the same operations
 * run in a table of scenarios, each step either succeeding or returning the
 * injected error, after which the scenario stops and goes through the
 * cleanup any caller would (release, destroy), which is the path under test.
 * The scenarios follow the contract tests they are named after; the ones
 * made of waiting (timeouts, cancel, shutdown) add no port call a shorter
 * scenario lacks and are left out to keep each N cheap.
 *
 * The exec scenarios run over fake, native and remote (the remote adapter
 * over a served fake; the contract suite's adapters); the workspace scenarios over the local and memory workspaces
 * directly, and over native's volume and fake's memory workspace through
 * the exec wrapper's workspace calls.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "airlock/fake.h"
#include "airlock/port/exec.h"
#include "airlock/remote.h"
#include "airlock/service.h"
#include "fault_adapter.h"
#include "sandbox_testlib.h"
#include "testlib.h"
#include "util/fault.h"

/* A scenario that makes more calls than this is a runaway loop. */
#define FAULT_N_MAX 200

/* ---- what a failed call must look like ----------------------------------- */

static airlock_errclass fired_class(const char *call)
{
	if (strcmp(call, "workspace.contain") == 0)
		return AIRLOCK_ERR_WORKSPACE_ESCAPE;
	if (strncmp(call, "workspace.", 10) == 0)
		return AIRLOCK_ERR_SYSTEM;
	return AIRLOCK_ERR_EXECUTION_UNAVAILABLE;
}

/*
 * One step of a scenario: true to go on. A failure is acceptable only as
 * the injected one, reported with its class (and EIO for the workspace's
 * system errors) and its message intact through every layer above it.
 */
static bool step(const fault_plan *plan, int rc, const airlock_error *err, const char *what)
{
	if (rc == 0)
		return true;
	const char *fired = fault_plan_fired(plan);
	cr_assert_not_null(fired, "%s failed with no fault injected: rc %d: %s", what, rc,
	                   err->message);
	airlock_errclass want = fired_class(fired);
	cr_assert_eq(rc, want == AIRLOCK_ERR_SYSTEM ? -EIO : airlock_errcode(want),
	             "%s after the %s fault: rc %d: %s", what, fired, rc, err->message);
	cr_assert_eq(err->cls, want, "%s after the %s fault: class %s: %s", what, fired,
	             airlock_errclass_name(err->cls), err->message);
	cr_assert_eq(err->errnum, want == AIRLOCK_ERR_SYSTEM ? EIO : 0, "%s after the %s fault: %s",
	             what, fired, err->message);
	cr_assert(strstr(err->message, "injected fault"), "%s after the %s fault: message lost: %s",
	          what, fired, err->message);
	return false;
}

static size_t open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	cr_assert_not_null(d);
	size_t n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* ---- the adapters under the wrapper -------------------------------------- */

typedef struct target {
	const char *name;
	void (*open)(fault_plan *plan, airlock_exec **ret, void **state);
	void (*prepare)(void *state, char **argv, const airlock_fake_behaviour *b);
	void (*adjust_spec)(airlock_environment_spec *spec);
	size_t (*live)(void *state);
} target;

static void wrap(const airlock_exec_ops *ops, void *inner, fault_plan *plan, airlock_exec **ret)
{
	void *ctx = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(fault_exec_new(ops, inner, plan, &ctx, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_new(fault_exec_ops(), ctx, NULL, ret, &err), 0, "%s", err.message);
}

static void fake_open(fault_plan *plan, airlock_exec **ret, void **state)
{
	airlock_fake *f = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_new(&f, &err), 0, "%s", err.message);
	*state = f;
	wrap(airlock_fake_ops(), f, plan, ret);
}

static void fake_prepare(void *state, char **argv, const airlock_fake_behaviour *b)
{
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_script(state, (const char *const *)argv, b, &err), 0, "%s",
	             err.message);
}

static void fake_adjust_spec(airlock_environment_spec *spec) { (void)spec; }

static size_t fake_live(void *state) { return airlock_fake_live_count(state); }

static char native_digest[AIRLOCK_IMAGE_DIGEST_SIZE];

static void native_open(fault_plan *plan, airlock_exec **ret, void **state)
{
	airlock_native_config nc = { .image_store = sandbox_test_store(), .start_budget_seconds = 30 };
	airlock_native *n = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_native_new(&nc, &n, &err), 0, "%s", err.message);
	*state = n;
	wrap(airlock_native_ops(), n, plan, ret);
}

static void native_prepare(void *state, char **argv, const airlock_fake_behaviour *b)
{
	(void)state;
	(void)argv;
	(void)b;
}

static void native_adjust_spec(airlock_environment_spec *spec)
{
	free(spec->image_digest);
	spec->image_digest = strdup(native_digest);
}

static size_t native_live(void *state) { return airlock_native_live_count(state); }

/* remote: the remote adapter over an airlock_service in this process on a
 * Unix socket, serving a fake. The wrapper sits in front of the remote
 * adapter (the worker's side), so each of its calls really crosses the
 * API before the fault is injected. Its free also stops the service and
 * frees the served core, so that run_one's descriptor count covers the
 * whole of both sides. */
#define REMOTE_CREDENTIAL "fault-suite-credential-2b8e6d0c4f1a9357"

typedef struct remote_pair {
	void *client; /* the remote adapter's ctx */
	airlock_fake *fake;
	airlock_exec *served;
	airlock_service *svc;
	char dir[64];
	char sock[96];
} remote_pair;

static int pair_provision(void *ctx, const airlock_environment_spec *spec,
                          const airlock_environment_handle *h, airlock_error *err)
{
	return airlock_remote_ops()->provision(((remote_pair *)ctx)->client, spec, h, err);
}

static int pair_execute(void *ctx, const airlock_environment_handle *h,
                        const airlock_exec_request *req, airlock_execution_result *ret,
                        airlock_error *err)
{
	return airlock_remote_ops()->execute(((remote_pair *)ctx)->client, h, req, ret, err);
}

static int pair_destroy(void *ctx, const char *id, airlock_error *err)
{
	return airlock_remote_ops()->destroy(((remote_pair *)ctx)->client, id, err);
}

static int pair_workspace(void *ctx, const char *id, airlock_workspace **ret, airlock_error *err)
{
	return airlock_remote_ops()->workspace(((remote_pair *)ctx)->client, id, ret, err);
}

static void pair_shutdown(void *ctx)
{
	airlock_remote_ops()->shutdown(((remote_pair *)ctx)->client);
}

static void pair_free(void *ctx)
{
	remote_pair *p = ctx;
	airlock_remote_ops()->free(p->client);
	airlock_service_free(p->svc);
	airlock_exec_free(p->served);
	unlink(p->sock);
	rmdir(p->dir);
	free(p);
}

static const airlock_exec_ops pair_ops = {
	.version = AIRLOCK_EXEC_OPS_VERSION, .name = "remote", .provision = pair_provision,
	.execute = pair_execute, .destroy = pair_destroy, .workspace = pair_workspace,
	.free = pair_free, .shutdown = pair_shutdown,
};

static void remote_open(fault_plan *plan, airlock_exec **ret, void **state)
{
	remote_pair *p = calloc(1, sizeof(*p));
	cr_assert_not_null(p);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_new(&p->fake, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_new(airlock_fake_ops(), p->fake, NULL, &p->served, &err), 0, "%s",
	             err.message);
	snprintf(p->dir, sizeof(p->dir), "/tmp/airlock-fault-XXXXXX");
	cr_assert_not_null(mkdtemp(p->dir));
	snprintf(p->sock, sizeof(p->sock), "%s/api.sock", p->dir);
	char listen[128];
	snprintf(listen, sizeof(listen), "unix:%s", p->sock);
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.listen = listen;
	sc.credential = REMOTE_CREDENTIAL;
	sc.credential_len = strlen(REMOTE_CREDENTIAL);
	cr_assert_eq(airlock_service_new(&sc, p->served, &p->svc, &err), 0, "%s", err.message);
	airlock_remote_config rc = { .address = listen, .credential = REMOTE_CREDENTIAL,
		                     .credential_len = strlen(REMOTE_CREDENTIAL) };
	airlock_remote *rm = NULL;
	cr_assert_eq(airlock_remote_new(&rc, &rm, &err), 0, "%s", err.message);
	p->client = rm;
	*state = p->fake;
	wrap(&pair_ops, p, plan, ret);
}

static const target fake_target = { "fake", fake_open, fake_prepare, fake_adjust_spec, fake_live };
/* The served fake is scripted and counted as the fake is. */
static const target remote_target = { "remote", remote_open, fake_prepare, fake_adjust_spec,
	                              fake_live };
static const target native_target = { "native", native_open, native_prepare, native_adjust_spec,
	                              native_live };

/* ---- one run ------------------------------------------------------------- */

#define RUN_BOXES 2

typedef struct run {
	const target *t;
	fault_plan plan;
	airlock_exec *exec;
	void *state;
	airlock_exec_call call;
	airlock_environment_spec spec[RUN_BOXES];
	airlock_environment_handle h[RUN_BOXES];
	bool provisioned[RUN_BOXES];
} run;

static bool provision(run *r, int i)
{
	airlock_error err = { 0 };
	int rc = airlock_exec_provision(r->exec, &r->spec[i], &r->h[i], &err);
	r->provisioned[i] = rc == 0;
	return step(&r->plan, rc, &err, "provision");
}

static bool destroy(run *r, int i)
{
	airlock_error err = { 0 };
	return step(&r->plan, airlock_exec_destroy(r->exec, &r->h[i], &err), &err, "destroy");
}

/* Execute argv (scripted on the fake as b says); *res is the caller's to
 * clear, zeroed when the call failed. */
static bool execute(run *r, int i, char **argv, const airlock_fake_behaviour *b,
                    const char *stdin_text, airlock_execution_result *res)
{
	r->t->prepare(r->state, argv, b);
	airlock_execution_command cmd = test_command(argv);
	if (stdin_text) {
		cmd.has_stdin = true;
		cmd.stdin_data = (unsigned char *)stdin_text;
		cmd.stdin_len = strlen(stdin_text);
	}
	airlock_error err = { 0 };
	memset(res, 0, sizeof(*res));
	return step(&r->plan, airlock_exec_execute(r->exec, &r->call, &r->h[i], &cmd, res, &err),
	            &err, "execute");
}

static bool workspace(run *r, int i, airlock_workspace **ws)
{
	airlock_error err = { 0 };
	*ws = NULL;
	return step(&r->plan, airlock_exec_workspace(r->exec, &r->call, &r->h[i], ws, &err), &err,
	            "workspace");
}

static bool tool_write(run *r, int i, const char *path, const char *data)
{
	airlock_workspace *ws;
	if (!workspace(r, i, &ws))
		return false;
	airlock_error err = { 0 };
	bool ok = step(&r->plan, airlock_workspace_write(ws, path, data, strlen(data), &err), &err,
	               "workspace write");
	airlock_workspace_release(ws);
	return ok;
}

static bool out_is(const airlock_execution_result *res, const char *want)
{
	return res->stdout_len == strlen(want) && memcmp(res->stdout_data, want, res->stdout_len) == 0;
}

/* ---- the scenarios ------------------------------------------------------- */

/* Each returns true when it ran to its end with the contract's results;
 * false when a step failed (cleanly: step() asserted that). The handles it
 * provisioned are destroyed by run_one whatever it returns. */
typedef bool (*scenario_fn)(run *r);

/* test_exec_contract.c: exit_code_and_streams */
static bool sc_exit_code_and_streams(run *r)
{
	if (!provision(r, 0))
		return false;
	char *argv[] = { "sh", "-c", "printf out; printf err >&2; exit 3", NULL };
	airlock_execution_result res;
	if (!execute(r, 0, argv,
	             &(airlock_fake_behaviour){ .exit_code = 3, .stdout_data = "out", .stdout_len = 3,
	                                        .stderr_data = "err", .stderr_len = 3 },
	             NULL, &res))
		return false;
	cr_assert(res.has_exit_code && res.exit_code == 3);
	cr_assert(out_is(&res, "out"));
	cr_assert_eq(res.stderr_len, 3);
	airlock_execution_result_clear(&res);
	return destroy(r, 0);
}

/* test_exec_contract.c: stdin_reaches_the_process */
static bool sc_stdin_reaches_the_process(run *r)
{
	if (!provision(r, 0))
		return false;
	char *argv[] = { "cat", NULL };
	airlock_execution_result res;
	if (!execute(r, 0, argv, &(airlock_fake_behaviour){ .echo_stdin = true }, "hi\n", &res))
		return false;
	cr_assert(out_is(&res, "hi\n"));
	airlock_execution_result_clear(&res);
	return destroy(r, 0);
}

/* test_exec_contract.c: files_changed_reports_each_kind */
static bool sc_files_changed(run *r)
{
	if (!provision(r, 0) || !tool_write(r, 0, "keep.txt", "old") ||
	    !tool_write(r, 0, "gone.txt", "bye") || !tool_write(r, 0, "same.txt", "unchanged"))
		return false;
	char *argv[] = { "sh", "-c", "printf abc > new.txt; printf x >> keep.txt; rm gone.txt", NULL };
	const airlock_fake_file_op ops[] = {
		{ .path = "new.txt", .data = "abc", .len = 3 },
		{ .path = "keep.txt", .data = "oldx", .len = 4 },
		{ .path = "gone.txt", .delete_file = true },
	};
	airlock_execution_result res;
	if (!execute(r, 0, argv, &(airlock_fake_behaviour){ .file_ops = ops, .n_file_ops = 3 }, NULL,
	             &res))
		return false;
	cr_assert_eq(res.exit_code, 0);
	cr_assert_eq(res.n_files_changed, 3, "got %zu changes", res.n_files_changed);
	airlock_execution_result_clear(&res);
	return destroy(r, 0);
}

/* test_exec_contract.c: destroy_is_idempotent */
static bool sc_destroy_is_idempotent(run *r)
{
	return provision(r, 0) && destroy(r, 0) && destroy(r, 0);
}

/* test_exec_contract.c: forged_handle_environment_id_raises, without the
 * forgery: two sandboxes of one service, each used and destroyed; a fault
 * on one leaves the other working. */
static bool sc_two_sandboxes(run *r)
{
	if (!provision(r, 0) || !provision(r, 1))
		return false;
	char *argv[] = { "true", NULL };
	airlock_execution_result res;
	for (int i = 0; i < 2; i++) {
		if (!execute(r, i, argv, &(airlock_fake_behaviour){ 0 }, NULL, &res))
			return false;
		cr_assert_eq(res.exit_code, 0);
		airlock_execution_result_clear(&res);
	}
	return destroy(r, 1) && destroy(r, 0);
}

/* test_exec_contract.c: workspace_reference_outlives_a_concurrent_destroy
 * (one thread), and test_workspace_contract.c's round trip: every
 * workspace call through a reference, then the destroy, after which the
 * reference still answers, with a refusal. */
static bool sc_workspace_calls(run *r)
{
	airlock_workspace *ws = NULL;
	if (!provision(r, 0) || !workspace(r, 0, &ws))
		return false;
	bool ok = false;
	airlock_error err = { 0 };
	unsigned char *data = NULL;
	size_t len = 0;
	char *resolved = NULL;
	airlock_dir_listing l = { 0 };
	airlock_provenance p = AIRLOCK_PROVENANCE_INVALID;
	if (!step(&r->plan, airlock_workspace_write(ws, "w.txt", "abc", 3, &err), &err, "write") ||
	    !step(&r->plan, airlock_workspace_read(ws, "w.txt", 64, &data, &len, &err), &err, "read"))
		goto out;
	cr_assert(len == 3 && memcmp(data, "abc", 3) == 0);
	if (!step(&r->plan, airlock_workspace_resolve(ws, "w.txt", 5, &resolved, &err), &err,
	          "resolve"))
		goto out;
	cr_assert_str_eq(resolved, "/workspace/w.txt");
	if (!step(&r->plan, airlock_workspace_listdir(ws, ".", 100, &l, &err), &err, "listdir"))
		goto out;
	bool found = false;
	for (size_t i = 0; i < l.n; i++)
		found |= strcmp(l.entries[i].path, "w.txt") == 0;
	cr_assert(found, "the written file is listed");
	if (!step(&r->plan, airlock_workspace_provenance(ws, "w.txt", &p, &err), &err, "provenance"))
		goto out;
	cr_assert_eq(p, AIRLOCK_PROVENANCE_TOOL_WRITTEN);
	if (!destroy(r, 0))
		goto out;
	/* The reference still answers, with a refusal (or the injected fault,
	 * when this is the call that fails; never a success). */
	int rc = airlock_workspace_write(ws, "late.txt", "x", 1, &err);
	if (rc != airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED)) {
		cr_assert_not(step(&r->plan, rc, &err, "write after destroy"),
		              "a write succeeded after the destroy");
		goto out;
	}
	ok = true;
out:
	airlock_dir_listing_clear(&l);
	free(resolved);
	free(data);
	airlock_workspace_release(ws);
	return ok;
}

/* test_exec_contract.c: forged_handle_run_raises. The core's destroy on
 * suspicion is a port call too: when it is the one that fails, the
 * suspicion is still what the caller hears, with the failed destroy added,
 * and the record stays for the caller's own destroy. */
static bool sc_forged_handle(run *r)
{
	if (!provision(r, 0))
		return false;
	airlock_environment_handle forged = { 0 };
	cr_assert_eq(airlock_environment_handle_copy(&forged, &r->h[0]), 0);
	free(forged.run_id);
	forged.run_id = strdup("run-2");
	char *argv[] = { "true", NULL };
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result res = { 0 };
	airlock_error err = { 0 };
	int rc = airlock_exec_execute(r->exec, &r->call, &forged, &cmd, &res, &err);
	airlock_environment_handle_clear(&forged);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED), "rc %d: %s", rc,
	             err.message);
	cr_assert_not(res.has_exit_code, "a command ran on a forged handle");
	const char *fired = fault_plan_fired(&r->plan);
	if (fired) {
		cr_assert_str_eq(fired, "exec.destroy");
		cr_assert(strstr(err.message, "destroy after suspicion also failed") &&
		                  strstr(err.message, "injected fault"),
		          "%s", err.message);
		return false;
	}
	memset(&err, 0, sizeof(err));
	rc = airlock_exec_execute(r->exec, &r->call, &r->h[0], &cmd, &res, &err);
	cr_assert_eq(rc, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "rc %d: %s", rc,
	             err.message);
	cr_assert_eq(r->t->live(r->state), 0, "the suspected sandbox is not destroyed");
	return true;
}

typedef struct long_run {
	run *r;
	airlock_execution_result res;
	airlock_error err;
	int rc;
} long_run;

static void *execute_long(void *arg)
{
	long_run *l = arg;
	char *argv[] = { "sh", "-c", "printf up; exec sleep 30", NULL };
	airlock_execution_command cmd = test_command(argv);
	l->rc = airlock_exec_execute(l->r->exec, &l->r->call, &l->r->h[0], &cmd, &l->res, &l->err);
	return NULL;
}

/* test_exec_contract.c: shutdown_ends_the_command_and_keeps_cleanup. The
 * service stops while a command runs (the wrapper passes the shutdown on);
 * the command ends with SERVICE_SHUTDOWN, and cleanup still works. */
static bool sc_shutdown_keeps_cleanup(run *r)
{
	if (!provision(r, 0))
		return false;
	char *argv[] = { "sh", "-c", "printf up; exec sleep 30", NULL };
	r->t->prepare(r->state, argv,
	              &(airlock_fake_behaviour){ .stdout_data = "up", .stdout_len = 2,
	                                         .runs_for_ms = 30000 });
	long_run l = { .r = r };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, execute_long, &l), 0);
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 500 * 1000000L };
	nanosleep(&ts, NULL);
	airlock_exec_shutdown(r->exec);
	pthread_join(t, NULL);
	if (!step(&r->plan, l.rc, &l.err, "execute"))
		return false;
	cr_assert_eq(l.res.killed_by, AIRLOCK_KILL_SERVICE_SHUTDOWN, "killed_by=%d", l.res.killed_by);
	cr_assert(out_is(&l.res, "up"), "partial output is returned");
	airlock_execution_result_clear(&l.res);
	return destroy(r, 0);
}

typedef struct scenario {
	const char *name;
	scenario_fn fn;
	/* The scenario stops the service, which then refuses new work: the
	 * check after it ends at the destroys and the live count. */
	bool stops_service;
} scenario;

static const scenario scenarios[] = {
	{ "exit_code_and_streams", sc_exit_code_and_streams },
	{ "stdin_reaches_the_process", sc_stdin_reaches_the_process },
	{ "files_changed_reports_each_kind", sc_files_changed },
	{ "destroy_is_idempotent", sc_destroy_is_idempotent },
	{ "two_sandboxes", sc_two_sandboxes },
	{ "workspace_calls", sc_workspace_calls },
	{ "forged_handle_run_raises", sc_forged_handle },
	{ "shutdown_ends_the_command_and_keeps_cleanup", sc_shutdown_keeps_cleanup, true },
};

/*
 * One scenario with the Nth call failing; returns the number of port calls
 * the scenario made (its own destroys included). Then, with no fault: every
 * handle destroyed again (the retry a caller makes after a failed destroy;
 * idempotent otherwise), the adapter holds nothing, and a new sandbox on
 * the same service provisions, runs and is destroyed.
 */
static unsigned run_one(const target *t, const scenario *sc, unsigned n, bool *completed)
{
	size_t fds = open_fds();
	run r = { .t = t };
	t->open(&r.plan, &r.exec, &r.state);
	r.call = (airlock_exec_call){ .tenant_id = "tenant-a",
		                      .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	for (int i = 0; i < RUN_BOXES; i++) {
		test_spec(&r.spec[i], "tenant-a", i ? "run-2" : "run-1");
		t->adjust_spec(&r.spec[i]);
	}
	fault_plan_arm(&r.plan, n);
	*completed = sc->fn(&r);
	/* The scenario's caller cleans up whatever it got to: destroys count,
	 * and may be the call that fails. */
	for (int i = 0; i < RUN_BOXES; i++)
		if (r.provisioned[i]) {
			airlock_error err = { 0 };
			step(&r.plan, airlock_exec_destroy(r.exec, &r.h[i], &err), &err, "cleanup destroy");
		}
	unsigned calls = fault_plan_calls(&r.plan);
	const char *fired = fault_plan_fired(&r.plan);
	fault_plan_arm(&r.plan, 0);

	for (int i = 0; i < RUN_BOXES; i++)
		if (r.provisioned[i]) {
			airlock_error err = { 0 };
			cr_assert_eq(airlock_exec_destroy(r.exec, &r.h[i], &err), 0,
			             "%s/%s N=%u (%s failed): destroy after: %s", t->name, sc->name, n,
			             fired ? fired : "nothing", err.message);
		}
	cr_assert_eq(t->live(r.state), 0, "%s/%s N=%u (%s failed): the adapter still holds a sandbox",
	             t->name, sc->name, n, fired ? fired : "nothing");
	/* A new sandbox in the first slot, on the same service. */
	if (!sc->stops_service) {
		airlock_environment_handle_clear(&r.h[0]);
		cr_assert(provision(&r, 0), "%s/%s N=%u: no provision after the fault", t->name,
		          sc->name, n);
		char *argv[] = { "sh", "-c", "echo ok", NULL };
		airlock_execution_result res;
		cr_assert(execute(&r, 0, argv,
		                  &(airlock_fake_behaviour){ .stdout_data = "ok\n", .stdout_len = 3 },
		                  NULL, &res));
		cr_assert(out_is(&res, "ok\n"), "%s/%s N=%u: the sandbox after the fault runs",
		          t->name, sc->name, n);
		airlock_execution_result_clear(&res);
		cr_assert(destroy(&r, 0));
		cr_assert_eq(t->live(r.state), 0);
	}

	airlock_exec_free(r.exec);
	for (int i = 0; i < RUN_BOXES; i++) {
		airlock_environment_handle_clear(&r.h[i]);
		airlock_environment_spec_clear(&r.spec[i]);
	}
	cr_assert_eq(open_fds(), fds, "%s/%s N=%u (%s failed): descriptors left open", t->name,
	             sc->name, n, fired ? fired : "nothing");
	return calls;
}

/* Every scenario for N = 1, 2, ... until a run makes fewer than N calls:
 * that run had no fault and must have completed. */
static void every_n(const target *t)
{
	for (size_t s = 0; s < sizeof(scenarios) / sizeof(scenarios[0]); s++) {
		const scenario *sc = &scenarios[s];
		unsigned n = 1;
		for (;; n++) {
			cr_assert(n <= FAULT_N_MAX, "%s/%s: more than %d calls", t->name, sc->name,
			          FAULT_N_MAX);
			bool completed = false;
			unsigned calls = run_one(t, sc, n, &completed);
			if (calls < n) {
				cr_assert(completed, "%s/%s: no fault fired and the scenario failed",
				          t->name, sc->name);
				break;
			}
		}
		cr_assert(n > 2, "%s/%s: the scenario made %u calls", t->name, sc->name, n - 1);
		fprintf(stderr, "fault_exec %s/%s: %u port calls, each failed in turn\n", t->name,
		        sc->name, n - 1);
	}
}

Test(fault_exec, fake, .timeout = 120)
{
	every_n(&fake_target);
}

Test(fault_exec, remote, .timeout = 300)
{
	every_n(&remote_target);
}

Test(fault_exec, native, .timeout = 300)
{
	native_test_require(native_digest);
	every_n(&native_target);
}

/* ---- the workspace adapters, wrapped directly ----------------------------- */

/* test_workspace_contract.c's local and memory adapters: the same calls
 * on a workspace the test owns, each failing in turn; the adapter must
 * keep answering afterwards (a write and a read back after the fault). */
static int rm_tree_at(int dfd)
{
	DIR *d = fdopendir(dfd);
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	return 0;
}

/* A stream's sink that counts what it was handed. */
static int count_sink(void *arg, const void *buf, size_t len, airlock_error *err)
{
	(void)buf;
	(void)err;
	*(size_t *)arg += len;
	return 0;
}

static unsigned ws_run(bool local, unsigned n, bool *completed)
{
	size_t fds = open_fds();
	char dir[] = "/tmp/airlock-fault-XXXXXX";
	airlock_workspace *inner = NULL, *ws = NULL;
	airlock_error err = { 0 };
	if (local) {
		cr_assert(mkdtemp(dir));
		int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		cr_assert(dfd >= 0);
		cr_assert_eq(airlock_workspace_local_new(dfd, AIRLOCK_PROVENANCE_UNKNOWN, &inner, &err),
		             0, "%s", err.message);
	} else {
		cr_assert_eq(airlock_workspace_memory_new(&inner, &err), 0, "%s", err.message);
	}
	fault_plan plan = { 0 };
	cr_assert_eq(fault_workspace_new(airlock_workspace_ref(inner), &plan, &ws, &err), 0, "%s",
	             err.message);
	fault_plan_arm(&plan, n);
	*completed = false;
	unsigned char *data = NULL;
	size_t len = 0;
	airlock_dir_listing l = { 0 };
	airlock_provenance p = AIRLOCK_PROVENANCE_INVALID;
	char *resolved = NULL;
	size_t streamed = 0;
	uint64_t ssize = 0;
	char shex[AIRLOCK_SHA256_HEX_LEN + 1];
	if (step(&plan, airlock_workspace_write(ws, "a.txt", "one", 3, &err), &err, "write") &&
	    step(&plan, airlock_workspace_write(ws, "a.txt", "two!", 4, &err), &err, "rewrite") &&
	    step(&plan, airlock_workspace_read(ws, "a.txt", 64, &data, &len, &err), &err, "read") &&
	    step(&plan, airlock_workspace_listdir(ws, "", 10, &l, &err), &err, "listdir") &&
	    step(&plan, airlock_workspace_provenance(ws, "a.txt", &p, &err), &err, "provenance") &&
	    step(&plan, airlock_workspace_resolve(ws, "a.txt", 5, &resolved, &err), &err, "resolve") &&
	    step(&plan,
	         airlock_workspace_read_stream(ws, "a.txt", 64, count_sink, &streamed, &ssize, shex,
	                                       &err),
	         &err, "stream")) {
		cr_assert(len == 4 && memcmp(data, "two!", 4) == 0, "the whole file was replaced");
		cr_assert(ssize == 4 && streamed == 4, "the stream carried the file");
		cr_assert_eq(l.n, 1);
		cr_assert_eq(p, AIRLOCK_PROVENANCE_TOOL_WRITTEN);
		*completed = true;
	}
	unsigned calls = fault_plan_calls(&plan);
	fault_plan_arm(&plan, 0);
	free(data);
	free(resolved);
	airlock_dir_listing_clear(&l);
	/* The adapter is consistent: a write and its read back. */
	cr_assert_eq(airlock_workspace_write(inner, "b.txt", "after", 5, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_workspace_read(inner, "b.txt", 64, &data, &len, &err), 0, "%s",
	             err.message);
	cr_assert(len == 5 && memcmp(data, "after", 5) == 0);
	free(data);
	/* The owner's end, then the wrapper's reference (its release is the
	 * last, so the order is the one a sandbox's destroy makes). */
	airlock_workspace_free(inner);
	cr_assert_eq(airlock_workspace_write(ws, "c.txt", "x", 1, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "%s", err.message);
	airlock_workspace_release(ws);
	if (local) {
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		cr_assert(dfd >= 0);
		rm_tree_at(dfd);
		cr_assert_eq(rmdir(dir), 0, "%s: %s", dir, strerror(errno));
	}
	cr_assert_eq(open_fds(), fds, "N=%u: descriptors left open", n);
	return calls;
}

static void ws_every_n(bool local)
{
	unsigned n = 1;
	for (;; n++) {
		cr_assert(n <= FAULT_N_MAX);
		bool completed = false;
		if (ws_run(local, n, &completed) < n) {
			cr_assert(completed, "no fault fired and the calls failed");
			break;
		}
	}
	cr_assert(n > 5, "the scenario made %u calls", n - 1);
	fprintf(stderr, "fault_workspace %s: %u port calls, each failed in turn\n",
	        local ? "local" : "memory", n - 1);
}

Test(fault_workspace, local) { ws_every_n(true); }

Test(fault_workspace, memory) { ws_every_n(false); }

/* ---- the library's own step counter (src/util/fault.h) -------------------- */

#ifdef AIRLOCK_FAULT_INJECTION
/* The fault-injection build: the Nth check answers true, once, and says
 * which point it was; 0 disarms. */
Test(util_fault, fails_the_nth_check_once)
{
	util_fault_arm(2);
	cr_assert_not(util_fault("first"));
	cr_assert_null(util_fault_fired());
	cr_assert(util_fault("second"));
	cr_assert_str_eq(util_fault_fired(), "second");
	cr_assert_not(util_fault("third"));
	cr_assert_eq(util_fault_hits(), 3);
	util_fault_arm(0);
	cr_assert_eq(util_fault_hits(), 0);
	cr_assert_null(util_fault_fired());
	for (int i = 0; i < 100; i++)
		cr_assert_not(util_fault("any"));
	cr_assert_eq(util_fault_hits(), 100);
}
#else
/* Every other build: an inline false (tests/fault_build_check.sh checks
 * the library has no counter). */
Test(util_fault, is_the_inline_false)
{
	for (int i = 0; i < 100; i++)
		cr_assert_not(util_fault("any"));
}
#endif
