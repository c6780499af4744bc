/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox.run_command through the real programs: `airlock serve` (fake or
 * native) and airlock-worker as processes, on Unix sockets in a temporary
 * directory, over SQLite (and PostgreSQL, the suite's server). What it
 * proves (docs/worker-api.md): the declaration; a call is refused before
 * anything runs without its lease or with another epoch; validation in
 * the specification's order before the service is touched; a claim's
 * sandbox is provisioned at its first call and reused by the next (a file
 * written in one is read in the next); no second call while one runs; a
 * release, a fence, a lease not renewed and the worker's stop each destroy
 * the claim's sandbox; a worker killed with SIGKILL leaves a record the
 * next one uses to destroy the sandbox; an unreachable service is
 * ExecutionUnavailable at once; the reaper's question and its credential.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"
#include "worker/db.h"

#include "pg_server.h"
#include "worker_testlib.h"

#define SERVICE_TOKEN "svc-0123456789abcdef0123456789abcdef"
#define REAPER_TOKEN "reaper-0123456789abcdef0123456789"

typedef struct stack {
	char dir[64];
	char svc_sock[128];
	char sock[128];
	char config[128];
	char log[128];
	pid_t svc, worker;
} stack;

static void start_worker(stack *s)
{
	char *argv[] = { "airlock-worker", "--config", s->config, NULL };
	s->worker = wt_start(getenv("AIRLOCK_TEST_WORKER"), argv, s->log, s->sock);
}

/* The operator's egress policy both programs are given (NULL: none). */
static const char *stack_policy;
/* The bridge's settings for both programs: the worker's listener (the
 * service's bridge_address) and the platform's endpoint, in the stack's
 * directory. */
static bool stack_bridge;
/* More worker settings lines ("  key: value\n"), or NULL. */
static const char *stack_worker_extra;

/* service_address: where the worker is told the service is (NULL: the
 * stack's own). */
static void stack_up(stack *s, const char *mechanism, bool pg, const char *service_address)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/airlock-wtool-XXXXXX");
	cr_assert(mkdtemp(s->dir));
	snprintf(s->svc_sock, sizeof(s->svc_sock), "%s/svc.sock", s->dir);
	snprintf(s->sock, sizeof(s->sock), "%s/w.sock", s->dir);
	snprintf(s->config, sizeof(s->config), "%s/airlock.yaml", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/log", s->dir);
	char path[160], image[160] = "", db[512] = "", text[4096], policy[400] = "";
	char wpolicy[200] = "", bridge[200] = "", wbridge[300] = "";
	if (stack_bridge) {
		snprintf(bridge, sizeof(bridge), "  bridge_address: unix:%s/bridge.sock\n", s->dir);
		snprintf(wbridge, sizeof(wbridge),
		         "  bridge_listen: unix:%s/bridge.sock\n  bridge_upstream: unix:%s/up.sock\n",
		         s->dir, s->dir);
	}
	if (stack_policy) {
		char pf[160];
		snprintf(pf, sizeof(pf), "%s/egress.yaml", s->dir);
		wt_write_file(pf, stack_policy, 0600);
		snprintf(policy, sizeof(policy), "  policy_file: %s\n", pf);
		snprintf(wpolicy, sizeof(wpolicy), "  policy_file: %s\n", pf);
	}
	snprintf(path, sizeof(path), "%s/svc.token", s->dir);
	wt_write_file(path, SERVICE_TOKEN "\n", 0600);
	snprintf(path, sizeof(path), "%s/reaper.token", s->dir);
	wt_write_file(path, REAPER_TOKEN "\n", 0600);
	if (strcmp(mechanism, "fake") != 0)
		wt_image_settings(s->dir, image, sizeof(image));
	if (pg)
		wt_pg_settings(s->dir, db, sizeof(db));
	snprintf(text, sizeof(text),
	         "sandbox:\n  mechanism: %s\n%s"
	         "service:\n  listen: unix:%s\n  credential_file: %s/svc.token\n%s%s"
	         "worker:\n  listen: unix:%s\n  state_dir: %s\n  auth_mode: dev\n"
	         "  metrics_listen: unix:%s/m.sock\n"
	         "  service_address: %s%s\n  service_credential_file: %s/svc.token\n"
	         "  reaper_credential_file: %s/reaper.token\n%s%s%s%s",
	         mechanism, image, s->svc_sock, s->dir, policy, bridge, s->sock, s->dir, s->dir,
	         service_address ? "" : "unix:", service_address ? service_address : s->svc_sock,
	         s->dir, s->dir, db, wpolicy, wbridge, stack_worker_extra ? stack_worker_extra : "");
	wt_write_file(s->config, text, 0600);
	char *argv[] = { "airlock", "serve", "--config", s->config, NULL };
	s->svc = wt_start(getenv("AIRLOCK_TEST_AIRLOCK"), argv, s->log, s->svc_sock);
	start_worker(s);
}

static void stack_down(stack *s)
{
	if (s->worker > 0)
		cr_expect_eq(wt_stop(s->worker, SIGTERM), 0, "the worker stops cleanly: %s",
		             wt_read_log(s->log));
	if (s->svc > 0)
		cr_expect_eq(wt_stop(s->svc, SIGTERM), 0, "the service stops cleanly");
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", s->dir);
	cr_expect_eq(system(cmd), 0);
}

static wt_reply *req(stack *s, const char *method, const char *target, const char *token,
                     const char *body)
{
	static wt_reply r;
	wt_request(s->sock, method, target, token, body, 60000, &r);
	return &r;
}

#define HAS(r, text) cr_expect(strstr((r)->body, (text)), "%d %s", (r)->status, (r)->body)
/* The worker logs a destroy after the service has ended the sandbox: a
 * line is waited for (5 s), not expected the moment the sandbox is gone. */
static bool log_has(const stack *s, const char *text)
{
	for (int i = 0; i < 100; i++) {
		if (strstr(wt_read_log(s->log), text))
			return true;
		usleep(50 * 1000);
	}
	return false;
}
#define HAS_LOG(s, text) cr_expect(log_has((s), (text)), "the log lacks %s", (text))

static void claim(stack *s, const char *run, long epoch, long ttl, const char *outcome)
{
	char target[160], body[160], want[64];
	snprintf(target, sizeof(target), "/v1/runs/%s/lease", run);
	snprintf(body, sizeof(body), "{\"tenant_id\":\"dev\",\"epoch\":%ld,\"ttl_seconds\":%ld}",
	         epoch, ttl);
	wt_reply *r = req(s, "PUT", target, NULL, body);
	cr_assert_eq(r->status, 200, "%s", r->body);
	snprintf(want, sizeof(want), "\"outcome\":\"%s\"", outcome);
	HAS(r, want);
}

static wt_reply *call(stack *s, const char *run, long epoch, const char *arguments)
{
	char target[160];
	static char body[8192];
	snprintf(target, sizeof(target), "/v1/runs/%s/tools/sandbox.run_command", run);
	snprintf(body, sizeof(body), "{\"epoch\":%ld,\"arguments\":%s}", epoch, arguments);
	return req(s, "POST", target, NULL, body);
}

/* The service's live sandboxes (its health). */
static long live(stack *s)
{
	return wt_service_live(s->svc_sock, SERVICE_TOKEN);
}

static void expect_live(stack *s, long want, const char *why)
{
	long got = -1;
	for (int i = 0; i < 100 && (got = live(s)) != want; i++)
		usleep(50000);
	cr_expect_eq(got, want, "%s: %ld live sandboxes, want %ld", why, got, want);
}

/* ---- the declaration, and refusals before anything runs ------------------------- */

Test(worker_tools, the_tool_is_declared_as_the_specification_classifies_it)
{
	stack s;
	stack_up(&s, "fake", false, NULL);
	wt_reply *r = req(&s, "GET", "/v1/tools", NULL, NULL);
	cr_assert_eq(r->status, 200, "%s", r->body);
	static const char *const want[] = {
		"\"name\":\"sandbox.run_command\"", "\"side_effect\":\"CODE_EXECUTION\"",
		"\"risk\":\"HIGH\"", "\"idempotency\":\"NON_IDEMPOTENT\"",
		"\"output_trust\":\"EXTERNAL_UNTRUSTED\"", "\"scope\":\"sandbox.execute\"",
		"\"timeout_s\":300", "\"max_output_bytes\":1048576", "\"allow_parallel\":false",
		"\"required\":[\"command\"]", "artifact.export", "no network",
		"discarded when the run finishes or pauses", "head-and-tail excerpt",
		"stdout_artifact",
		/* artifact.export: in process, idempotent, nothing that executes. */
		"\"name\":\"artifact.export\"", "\"idempotency\":\"IDEMPOTENT\"",
		"\"execution\":\"in_process\"", "\"side_effect\":\"WORKSPACE_READ\"",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		HAS(r, want[i]);
	stack_down(&s);
}

Test(worker_tools, a_call_without_its_current_lease_is_refused_before_anything_runs)
{
	stack s;
	stack_up(&s, "fake", false, NULL);
	static const char args[] = "{\"command\":[\"true\"]}";
	wt_reply *r = call(&s, "run-none", 1, args);
	cr_expect_eq(r->status, 404, "no lease: %s", r->body);
	claim(&s, "run-1", 3, 60, "new");
	r = call(&s, "run-1", 2, args);
	cr_expect_eq(r->status, 409, "another epoch: %s", r->body);
	HAS(r, "not the run's current one");
	r = call(&s, "run-1", 4, args);
	cr_expect_eq(r->status, 409, "a higher epoch than claimed: %s", r->body);
	wt_reply *rel = req(&s, "DELETE", "/v1/runs/run-1/lease?epoch=3", NULL, NULL);
	cr_expect_eq(rel->status, 204, "%s", rel->body);
	r = call(&s, "run-1", 3, args);
	cr_expect_eq(r->status, 409, "released: %s", r->body);
	HAS(r, "released");
	claim(&s, "run-ttl", 1, 1, "new");
	usleep(1200 * 1000);
	r = call(&s, "run-ttl", 1, args);
	cr_expect_eq(r->status, 409, "expired: %s", r->body);
	HAS(r, "expired");
	expect_live(&s, 0, "nothing was provisioned");
	stack_down(&s);
}

Test(worker_tools, validation_runs_in_the_specifications_order_before_the_service)
{
	stack s;
	stack_up(&s, "fake", false, NULL);
	claim(&s, "run-v", 1, 60, "new");
	static const struct {
		const char *args, *says;
	} bad[] = {
		{ "{\"command\":\"python3 script.py\"}", "[\\\"python3\\\", \\\"script.py\\\"]" },
		{ "{\"command\":\"ls\",\"timeout_seconds\":\"x\"}", "got a string" },
		{ "{\"command\":[]}", "non-empty array" },
		{ "{\"command\":[1]}", "command[0]: must be a string" },
		{ "{\"command\":[\"a\\u0000b\"]}", "NUL" },
		{ "{\"command\":[\"./setup.sh\"],\"working_directory\":7}", "command[0]" },
		{ "{\"command\":[\"ls\"],\"working_directory\":7}", "working_directory" },
		{ "{\"command\":[\"ls\"],\"working_directory\":\"../etc\"}", "WorkspaceEscape" },
		{ "{\"command\":[\"ls\"],\"timeout_seconds\":0}", "timeout_seconds" },
		{ "{\"command\":[\"ls\"],\"timeout_seconds\":1.5}", "timeout_seconds" },
		{ "{\"command\":[\"ls\"],\"shell\":true}", "shell" },
		{ "[]", "arguments" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		wt_reply *r = call(&s, "run-v", 1, bad[i].args);
		cr_expect_eq(r->status, 400, "%s: %d %s", bad[i].args, r->status, r->body);
		cr_expect(strstr(r->body, bad[i].says), "%s: wants %s in %s", bad[i].args,
		          bad[i].says, r->body);
	}
	/* The vector's size cap. */
	static char big[80000];
	int n = snprintf(big, sizeof(big), "{\"command\":[\"echo\",\"");
	memset(big + n, 'a', 66000);
	snprintf(big + n + 66000, sizeof(big) - (size_t)n - 66000, "\"]}");
	wt_reply *r = call(&s, "run-v", 1, big);
	cr_expect_eq(r->status, 400, "%s", r->body);
	/* A budget under the floor is not started. */
	char target[] = "/v1/runs/run-v/tools/sandbox.run_command", body[256];
	snprintf(body, sizeof(body),
	         "{\"epoch\":1,\"deadline_ms\":%lld,\"arguments\":{\"command\":[\"true\"]}}",
	         (long long)(util_now_ms() + 2000));
	r = req(&s, "POST", target, NULL, body);
	cr_expect_eq(r->status, 400, "%s", r->body);
	HAS(r, "under the floor");
	expect_live(&s, 0, "no validation error costs a sandbox");
	stack_down(&s);
}

/* ---- a claim's sandbox ------------------------------------------------------------- */

static void lifecycle(bool pg)
{
	stack s;
	stack_up(&s, "fake", pg, NULL);
	claim(&s, "run-l", 1, 60, "new");
	expect_live(&s, 0, "a claim without a sandbox call provisions nothing");
	wt_reply *r = call(&s, "run-l", 1, "{\"command\":[\"true\"],\"timeout_seconds\":30}");
	cr_assert_eq(r->status, 200, "%s", r->body);
	static const char *const fields[] = { "\"exit_code\":0", "\"stdout\":", "\"stderr\":",
		                              "\"timed_out\":false", "\"killed_by\":null",
		                              "\"duration_ms\":", "\"files_changed\":[" };
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		HAS(r, fields[i]);
	expect_live(&s, 1, "the first call provisions");
	r = call(&s, "run-l", 1, "{\"command\":[\"true\"]}");
	cr_expect_eq(r->status, 200, "%s", r->body);
	expect_live(&s, 1, "the second call reuses it");

	/* A fence destroys the older claim's sandbox before it answers. */
	claim(&s, "run-l", 2, 60, "fenced");
	cr_expect_eq(live(&s), 0, "fenced: destroyed before the answer");
	r = call(&s, "run-l", 1, "{\"command\":[\"true\"]}");
	cr_expect_eq(r->status, 409, "the fenced epoch: %s", r->body);
	r = call(&s, "run-l", 2, "{\"command\":[\"true\"]}");
	cr_expect_eq(r->status, 200, "%s", r->body);
	expect_live(&s, 1, "the new claim's own");

	/* A release answers after the destroy. */
	r = req(&s, "DELETE", "/v1/runs/run-l/lease?epoch=2", NULL, NULL);
	cr_expect_eq(r->status, 204, "%s", r->body);
	cr_expect_eq(live(&s), 0, "released: destroyed before the answer");

	/* A lease not renewed: the sweeper ends its sandbox. */
	claim(&s, "run-t", 1, 2, "new");
	r = call(&s, "run-t", 1, "{\"command\":[\"true\"]}");
	cr_expect_eq(r->status, 200, "%s", r->body);
	expect_live(&s, 1, "provisioned");
	usleep(2000 * 1000);
	expect_live(&s, 0, "a lease lost ends its sandbox");

	/* The worker's stop ends what it holds. */
	claim(&s, "run-s", 1, 60, "new");
	r = call(&s, "run-s", 1, "{\"command\":[\"true\"]}");
	cr_expect_eq(r->status, 200, "%s", r->body);
	expect_live(&s, 1, "provisioned");
	/* What happened is counted: calls by outcome, provisions, destroys. */
	char msock[160];
	snprintf(msock, sizeof(msock), "%s/m.sock", s.dir);
	static wt_reply m;
	wt_request(msock, "GET", "/metrics", NULL, NULL, 5000, &m);
	cr_expect_eq(m.status, 200, "%s", m.body);
	static const char *const counted[] = {
		"airlock_worker_tool_calls_total{tool=\"sandbox.run_command\",outcome=\"ok\"} 5\n",
		"airlock_worker_tool_calls_total{tool=\"sandbox.run_command\",outcome=\"refused\"} 1\n",
		"airlock_worker_provision_seconds_count 4\n",
		"airlock_worker_sandbox_destroys_total 3\n",
	};
	for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++)
		cr_expect(strstr(m.body, counted[i]), "%s not in %s", counted[i], m.body);
	cr_expect_eq(wt_stop(s.worker, SIGTERM), 0);
	s.worker = 0;
	cr_expect_eq(live(&s), 0, "the worker's stop destroyed its sandbox");
	const char *log = wt_read_log(s.log);
	cr_expect(strstr(log, "\"event\":\"tool.called\""), "%s", log);
	cr_expect(strstr(log, "\"why\":\"worker stopping\""), "%s", log);
	stack_down(&s);
}

Test(worker_tools, a_claims_sandbox_lives_from_its_first_call_to_the_claims_end_sqlite)
{
	lifecycle(false);
}

Test(worker_tools, a_claims_sandbox_lives_from_its_first_call_to_the_claims_end_postgresql)
{
	lifecycle(true);
}

/* A worker killed without cleanup leaves its record; the next worker's
 * release destroys the sandbox by the handle recorded. */
Test(worker_tools, a_killed_workers_sandbox_is_destroyed_by_the_next_from_its_record)
{
	stack s;
	stack_up(&s, "fake", false, NULL);
	claim(&s, "run-k", 1, 60, "new");
	wt_reply *r = call(&s, "run-k", 1, "{\"command\":[\"true\"]}");
	cr_assert_eq(r->status, 200, "%s", r->body);
	cr_expect_eq(wt_stop(s.worker, SIGKILL), 128 + SIGKILL);
	expect_live(&s, 1, "a killed worker cleans nothing up");
	start_worker(&s);
	/* The claim is still current: a call of it gets a sandbox of this
	 * worker's, and the one it does not hold is ended first. */
	r = call(&s, "run-k", 1, "{\"command\":[\"true\"]}");
	cr_expect_eq(r->status, 200, "%s", r->body);
	expect_live(&s, 1, "the dead worker's is gone, this one's is live");
	cr_expect_eq(wt_stop(s.worker, SIGKILL), 128 + SIGKILL);
	start_worker(&s);
	r = req(&s, "DELETE", "/v1/runs/run-k/lease?epoch=1", NULL, NULL);
	cr_expect_eq(r->status, 204, "%s", r->body);
	cr_expect_eq(live(&s), 0, "the release destroyed it by its record");
	stack_down(&s);
}

Test(worker_tools, an_unreachable_service_is_execution_unavailable_at_once)
{
	stack s;
	char nowhere[160];
	snprintf(nowhere, sizeof(nowhere), "unix:/tmp/airlock-no-such-%d.sock", (int)getpid());
	stack_up(&s, "fake", false, nowhere);
	claim(&s, "run-u", 1, 60, "new");
	int64_t t0 = util_monotonic_ms();
	wt_reply *r = call(&s, "run-u", 1, "{\"command\":[\"true\"]}");
	cr_expect_eq(r->status, 503, "%s", r->body);
	HAS(r, "ExecutionUnavailable");
	cr_expect_lt(util_monotonic_ms() - t0, 15000, "never a hang");
	stack_down(&s);
}

/* ---- the reaper's question ---------------------------------------------------------- */

Test(worker_tools, the_reaper_asks_with_its_credential_and_learns_only_ids)
{
	stack s;
	stack_up(&s, "fake", false, NULL);
	claim(&s, "run-r", 2, 60, "new");
	static const char q[] =
		"{\"sandboxes\":["
		"{\"environment_id\":\"env_00000000000000000000000000000001\",\"run_id\":\"run-r\",\"lease_epoch\":2},"
		"{\"environment_id\":\"env_00000000000000000000000000000002\",\"run_id\":\"run-r\",\"lease_epoch\":1},"
		"{\"environment_id\":\"env_00000000000000000000000000000003\",\"run_id\":\"run-gone\",\"lease_epoch\":1}]}";
	wt_reply *r = req(&s, "POST", "/v1/reaper/stale", REAPER_TOKEN, q);
	cr_assert_eq(r->status, 200, "%s", r->body);
	cr_expect_str_eq(r->body,
	                 "{\"stale\":[\"env_00000000000000000000000000000002\","
	                 "\"env_00000000000000000000000000000003\"]}");
	/* Only the reaper's credential reaches it, and it reaches nothing else. */
	r = req(&s, "POST", "/v1/reaper/stale", NULL, q);
	cr_expect_eq(r->status, 404, "a tenant (dev) is not the reaper: %s", r->body);
	r = req(&s, "PUT", "/v1/runs/run-r/lease", REAPER_TOKEN,
	        "{\"tenant_id\":\"dev\",\"epoch\":3,\"ttl_seconds\":60}");
	cr_expect_eq(r->status, 404, "the reaper claims nothing: %s", r->body);
	r = req(&s, "POST", "/v1/reaper/stale", REAPER_TOKEN, "{\"sandboxes\":[{\"run_id\":1}]}");
	cr_expect_eq(r->status, 400, "%s", r->body);
	r = req(&s, "POST", "/v1/reaper/stale", REAPER_TOKEN, "{\"sandboxes\":[]}");
	cr_expect_eq(r->status, 200, "%s", r->body);
	cr_expect_str_eq(r->body, "{\"stale\":[]}");
	stack_down(&s);
}

/* ---- native: what a real sandbox keeps and refuses ------------------------------------ */

typedef struct slow_call {
	stack *s;
	wt_reply r;
	char why[512];
} slow_call;

static void *run_slow(void *arg)
{
	slow_call *c = arg;
	if (wt_request_try(c->s->sock, "POST", "/v1/runs/run-n/tools/sandbox.run_command", NULL,
	                   "{\"epoch\":1,\"arguments\":{\"command\":[\"sleep\",\"3\"]}}", 60000,
	                   &c->r, c->why, sizeof(c->why)) < 0)
		c->r.status = -1;
	wt_last_body_free();
	return NULL;
}

Test(worker_tools, native_a_file_written_in_one_call_is_read_in_the_next_and_calls_do_not_overlap)
{
	stack s;
	stack_up(&s, "native", false, NULL);
	claim(&s, "run-n", 1, 60, "new");
	wt_reply *r = call(&s, "run-n", 1,
	                   "{\"command\":[\"sh\",\"-c\",\"echo kept > note.txt\"]}");
	cr_assert_eq(r->status, 200, "%s", r->body);
	HAS(r, "\"path\":\"note.txt\"");
	r = call(&s, "run-n", 1, "{\"command\":[\"cat\",\"note.txt\"]}");
	cr_expect_eq(r->status, 200, "%s", r->body);
	HAS(r, "\"stdout\":\"kept\\n\"");

	slow_call c = { .s = &s };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, run_slow, &c), 0);
	usleep(700 * 1000);
	r = call(&s, "run-n", 1, "{\"command\":[\"true\"]}");
	cr_expect_eq(r->status, 409, "allow_parallel no: %s", r->body);
	HAS(r, "allow_parallel");
	pthread_join(t, NULL);
	cr_expect_eq(c.r.status, 200, "%s %s", c.why, c.r.body);
	r = call(&s, "run-n", 1, "{\"command\":[\"true\"]}");
	cr_expect_eq(r->status, 200, "after it answered: %s", r->body);
	r = req(&s, "DELETE", "/v1/runs/run-n/lease?epoch=1", NULL, NULL);
	cr_expect_eq(r->status, 204, "%s", r->body);
	cr_expect_eq(live(&s), 0);
	stack_down(&s);
}

/* Output past the tool's limit: the model reads an excerpt within 1 MiB,
 * and the whole stream (3 MB here, under the service's 4 MiB ceiling) is
 * an artifact of the run whose bytes hash to what the command printed. */
Test(worker_tools, native_output_past_the_limit_is_an_excerpt_and_an_artifact, .timeout = 120)
{
	stack s;
	stack_up(&s, "native", false, NULL);
	claim(&s, "run-o", 1, 60, "new");
	wt_reply *r = call(&s, "run-o", 1,
	                   "{\"command\":[\"python3\",\"-c\",\"import sys; "
	                   "sys.stdout.write(''.join('%07d\\\\n' % i for i in range(375000)))\"]}");
	cr_assert_eq(r->status, 200, "%.300s", r->body);
	/* Each 8-byte line is 9 bytes of JSON: the whole would be 3.4 MB. */
	cr_expect_lt(r->body_len, (size_t)3 << 19, "the excerpt is within the limit: %zu",
	             r->body_len);
	HAS(r, "\"stdout\":\"0000000\\n0000001\\n");
	HAS(r, "0374999\\n\"");
	cr_expect(strstr(wt_last_body(), "bytes of this output were left out here; the whole "
	                                 "output (3000000 bytes) is artifact "),
	          "the marker names the artifact");
	HAS(r, "\"stdout_truncated\":true");
	HAS(r, "\"stderr_artifact\":null");
	/* The ref: id and digest, and the object under the store at its key. */
	const char *ref = strstr(r->body, "\"stdout_artifact\":{\"artifact_id\":\"");
	cr_assert_not_null(ref, "%.300s", r->body);
	char id[37] = "", sha[65] = "";
	cr_assert_eq(sscanf(ref, "\"stdout_artifact\":{\"artifact_id\":\"%36[0-9a-f-]\",\"sha256\":\"%64[0-9a-f]\"",
	                    id, sha),
	             2, "%.200s", ref);
	/* The same bytes computed here. */
	char cmd[600];
	snprintf(cmd, sizeof(cmd),
	         "python3 -c \"import sys; sys.stdout.write(''.join('%%07d\\n' %% i for i in "
	         "range(375000)))\" | sha256sum | cut -c1-64 > %s/want",
	         s.dir);
	cr_assert_eq(system(cmd), 0);
	char path[300], want[65] = "";
	snprintf(path, sizeof(path), "%s/want", s.dir);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%64s", want), 1);
	fclose(f);
	cr_expect_str_eq(sha, want, "the artifact is the whole stream");
	snprintf(path, sizeof(path), "%s/artifacts/dev/%.2s/%s", s.dir, id, id);
	struct stat st;
	cr_expect_eq(stat(path, &st), 0, "the object at %s", path);
	cr_expect_eq(st.st_size, 3000000);
	stack_down(&s);
}

/* ---- artifact.export ------------------------------------------------------------------- */

static wt_reply *export_call(stack *s, const char *run, long epoch, const char *arguments)
{
	char target[160];
	static char body[8192];
	snprintf(target, sizeof(target), "/v1/runs/%s/tools/artifact.export", run);
	snprintf(body, sizeof(body), "{\"epoch\":%ld,\"arguments\":%s}", epoch, arguments);
	static wt_reply r;
	char why[256];
	if (wt_request_try(s->sock, "POST", target, NULL, body, 60000, &r, why, sizeof(why)) < 0) {
		usleep(300 * 1000);
		cr_assert_fail("%s: %s\n%s", body, why, wt_read_log(s->log));
	}
	return &r;
}

/* The artifact_id and sha256 of an ArtifactRef answer. */
static void ref_of(const wt_reply *r, char id[37], char sha[65])
{
	const char *p = strstr(r->body, "\"artifact_id\":\"");
	cr_assert_not_null(p, "%s", r->body);
	cr_assert_eq(sscanf(p, "\"artifact_id\":\"%36[0-9a-f-]\",\"sha256\":\"%64[0-9a-f]\"", id, sha),
	             2, "%s", r->body);
}

static void expect_object(const stack *s, const char *id, const char *sha, long size)
{
	char path[300], cmd[400], got[65] = "";
	snprintf(path, sizeof(path), "%s/artifacts/dev/%.2s/%s", s->dir, id, id);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0, "the object at its key %s", path);
	cr_expect_eq(st.st_size, size);
	snprintf(cmd, sizeof(cmd), "sha256sum %s | cut -c1-64 > %s/got", path, s->dir);
	cr_assert_eq(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/got", s->dir);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%64s", got), 1);
	fclose(f);
	cr_expect_str_eq(got, sha, "the stored bytes hash to the reference's digest");
}

static airlock_trust_level trust_of(const stack *s, const char *artifact_id)
{
	worker_db *db = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_open_sqlite(s->dir, &db, &err), 0, "%s", err.message);
	worker_db_artifact row;
	bool found = false;
	cr_assert_eq(worker_db_artifact_get(db, artifact_id, &row, &found, &err), 0, "%s",
	             err.message);
	cr_assert(found, "%s", artifact_id);
	airlock_trust_level t = row.trust;
	worker_db_artifact_clear(&row);
	worker_db_free(db);
	return t;
}

/* gate.sandbox.artifact_checksum, end to end: a file larger than every
 * streaming buffer, written in the sandbox, exported, has the same SHA-256
 * in the store as in the workspace; the filename changes nothing about
 * where the bytes go. */
static void export_round_trip(const char *mechanism)
{
	stack s;
	stack_up(&s, mechanism, false, NULL);
	claim(&s, "run-x", 1, 120, "new");
	/* No command yet: no workspace, and an export makes none. */
	wt_reply *r = export_call(&s, "run-x", 1, "{\"path\":\"out.bin\"}");
	cr_expect_eq(r->status, 400, "%s", r->body);
	HAS(r, "no workspace yet");
	cr_expect_eq(live(&s), 0, "an export provisions nothing");
	r = call(&s, "run-x", 1,
	         "{\"command\":[\"sh\",\"-c\",\"head -c 3000017 /dev/urandom > out.bin && "
	         "sha256sum out.bin | cut -c1-64\"]}");
	cr_assert_eq(r->status, 200, "%s", r->body);
	char inside[65] = "";
	const char *o = strstr(r->body, "\"stdout\":\"");
	cr_assert_not_null(o);
	cr_assert_eq(sscanf(o, "\"stdout\":\"%64[0-9a-f]", inside), 1, "%s", r->body);
	r = export_call(&s, "run-x", 1,
	                "{\"path\":\"out.bin\",\"filename\":\"../../etc/passwd\","
	                "\"media_type\":\"application/x-data\"}");
	cr_assert_eq(r->status, 200, "%s", r->body);
	char id[37], sha[65];
	ref_of(r, id, sha);
	cr_expect_str_eq(sha, inside, "the workspace's digest is the artifact's");
	HAS(r, "\"size_bytes\":3000017");
	HAS(r, "\"media_type\":\"application/x-data\"");
	expect_object(&s, id, inside, 3000017);
	struct stat st;
	cr_expect_neq(stat("/etc/passwd.tmp", &st), 0);
	/* Text the model wrote. */
	r = export_call(&s, "run-x", 1, "{\"text\":\"# Report\\n\\nAll good.\\n\"}");
	cr_assert_eq(r->status, 200, "%s", r->body);
	ref_of(r, id, sha);
	char want[65];
	cr_assert_eq(util_sha256_hex("# Report\n\nAll good.\n", 20, want), 0);
	cr_expect_str_eq(sha, want);
	HAS(r, "\"media_type\":\"text/plain\"");
	cr_expect_eq(trust_of(&s, id), AIRLOCK_TRUST_EXTERNAL_UNTRUSTED,
	             "the model's text is labelled as what its turn may have read");
	/* IDEMPOTENT: the same export again is the same artifact. */
	char again[37], sha2[65];
	r = export_call(&s, "run-x", 1, "{\"text\":\"# Report\\n\\nAll good.\\n\"}");
	cr_assert_eq(r->status, 200, "%s", r->body);
	ref_of(r, again, sha2);
	cr_expect_str_eq(again, id, "an equal export answers the first artifact");
	/* The model's mistakes are 400s naming the path; an escape is refused. */
	r = export_call(&s, "run-x", 1, "{\"path\":\"missing.txt\"}");
	cr_expect_eq(r->status, 400, "%s", r->body);
	HAS(r, "artifact.export.arguments.path");
	r = export_call(&s, "run-x", 1, "{\"path\":\".\"}");
	cr_expect_geq(r->status, 400, "%s", r->body);
	r = export_call(&s, "run-x", 1, "{\"path\":\"../../etc/passwd\"}");
	cr_expect(r->status == 400 || r->status == 403, "%d %s", r->status, r->body);
	HAS(r, "WorkspaceEscape");
	r = export_call(&s, "run-x", 1, "{\"path\":\"a\",\"text\":\"b\"}");
	cr_expect_eq(r->status, 400, "%s", r->body);
	HAS(r, "exactly one of path");
	r = export_call(&s, "run-x", 1, "{\"text\":\"b\",\"media_type\":\"text/html; charset=x\"}");
	cr_expect_eq(r->status, 400, "%s", r->body);
	HAS(r, "media_type");
	/* Another epoch, and a run without a lease, are refused before
	 * anything is read. */
	r = export_call(&s, "run-x", 2, "{\"text\":\"b\"}");
	cr_expect_eq(r->status, 409, "%s", r->body);
	r = export_call(&s, "run-none", 1, "{\"text\":\"b\"}");
	cr_expect_eq(r->status, 404, "%s", r->body);
	r = req(&s, "DELETE", "/v1/runs/run-x/lease?epoch=1", NULL, NULL);
	cr_expect_eq(r->status, 204, "%s", r->body);
	/* The artifacts outlive the claim and its workspace. */
	expect_object(&s, id, want, 20);
	stack_down(&s);
}

Test(worker_tools, native_an_exported_file_keeps_its_sha256_byte_for_byte, .timeout = 120)
{
	export_round_trip("native");
}

Test(worker_tools, gvisor_an_exported_file_keeps_its_sha256_byte_for_byte, .timeout = 180)
{
	export_round_trip("gvisor");
}

/* Every file under the store, temporaries included, and the bytes the
 * database charges the tenant: what a refused export must leave as it
 * found them. */
static long store_files(const stack *s)
{
	char cmd[300], path[200];
	snprintf(cmd, sizeof(cmd), "find %s/artifacts -type f ! -name .store-id ! -name .database-id | wc -l > %s/n", s->dir, s->dir);
	cr_assert_eq(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/n", s->dir);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	long n = -1;
	cr_assert_eq(fscanf(f, "%ld", &n), 1);
	fclose(f);
	return n;
}

static int64_t charged(const stack *s)
{
	worker_db *db = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_open_sqlite(s->dir, &db, &err), 0, "%s", err.message);
	int64_t n = -1;
	cr_assert_eq(worker_db_artifact_tenant_bytes(db, "dev", &n, &err), 0, "%s", err.message);
	worker_db_free(db);
	return n;
}

/* What a hostile sandbox can put at a path the model then exports: links
 * (out of the workspace and within it), a FIFO, a socket, a directory, a
 * sparse file past the operator's cap; and what a model can name: a path
 * with a NUL inside, one past the length rule. Each is refused naming the
 * path, never hangs, and leaves no object, no temporary and no charge;
 * a hard link is a regular file and exports as one. */
Test(worker_tools, native_hostile_workspace_files_are_refused_and_leave_nothing, .timeout = 120)
{
	stack s;
	stack_worker_extra = "  artifact_size_max: 4194304\n";
	stack_up(&s, "native", false, NULL);
	stack_worker_extra = NULL;
	claim(&s, "run-h", 1, 120, "new");
	wt_reply *r = call(&s, "run-h", 1,
	                   "{\"command\":[\"sh\",\"-c\",\"printf abc > real.txt && "
	                   "ln -s /etc/passwd out && ln -s real.txt in && ln real.txt hard && "
	                   "mkfifo fifo && mkdir dir && truncate -s 5000000 sparse && "
	                   "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\\\"sock\\\")'"
	                   "\"]}");
	cr_assert_eq(r->status, 200, "%s", r->body);
	HAS(r, "\"exit_code\":0");
	static const char *const refused[] = {
		"{\"path\":\"out\"}",       "{\"path\":\"in\"}",
		"{\"path\":\"fifo\"}",      "{\"path\":\"sock\"}",
		"{\"path\":\"dir\"}",       "{\"path\":\"sparse\"}",
		"{\"path\":\"real.txt\\u0000.png\"}",
		"{\"path\":\"in/x\"}",
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		int64_t t0 = util_monotonic_ms();
		r = export_call(&s, "run-h", 1, refused[i]);
		cr_expect(r->status == 400 || r->status == 403, "%s: %d %s", refused[i], r->status,
		          r->body);
		cr_expect_lt(util_monotonic_ms() - t0, 10000, "%s answered at once", refused[i]);
		cr_expect_eq(store_files(&s), 0, "%s left a file in the store", refused[i]);
	}
	char longp[5200] = "{\"path\":\"";
	for (size_t i = strlen(longp); i < 5100; i++)
		longp[i] = (i % 200 == 0) ? '/' : 'a';
	strcat(longp, "\"}");
	r = export_call(&s, "run-h", 1, longp);
	cr_expect_eq(r->status, 400, "%d %.300s", r->status, r->body);
	cr_expect_eq(charged(&s), 0, "nothing refused is charged");
	r = export_call(&s, "run-h", 1, "{\"path\":\"hard\"}");
	cr_expect_eq(r->status, 200, "%s", r->body);
	HAS(r, "\"size_bytes\":3");
	cr_expect_eq(store_files(&s), 1);
	cr_expect_eq(charged(&s), worker_db_artifact_charge(3, strlen("hard")),
	             "an export named by its path's last part is charged");
	stack_down(&s);
}

/* A process's open descriptors and resident KiB. */
static void proc_usage(pid_t pid, long *ret_fds, long *ret_rss_kib)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	cr_assert_not_null(d);
	long n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	*ret_fds = n;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	char line[256];
	*ret_rss_kib = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", ret_rss_kib) == 1)
			break;
	fclose(f);
}

/* Two hundred exports (a file and text; and refused ones) hold nothing
 * per export: the worker's and the service's descriptors return to where
 * they were, and their memory stays flat. */
Test(worker_tools, native_two_hundred_exports_leak_no_descriptor_and_no_memory, .timeout = 180)
{
	stack s;
	stack_up(&s, "native", false, NULL);
	claim(&s, "run-l", 1, 120, "new");
	wt_reply *r = call(&s, "run-l", 1,
	                   "{\"command\":[\"sh\",\"-c\",\"head -c 1000000 /dev/urandom > f.bin && "
	                   "ln -s f.bin link\"]}");
	cr_assert_eq(r->status, 200, "%s", r->body);
	/* Warm up: the first export opens what every later one reuses. */
	for (int i = 0; i < 10; i++) {
		r = export_call(&s, "run-l", 1, "{\"path\":\"f.bin\"}");
		cr_assert_eq(r->status, 200, "%s", r->body);
	}
	long wfd0, wrss0, sfd0, srss0;
	proc_usage(s.worker, &wfd0, &wrss0);
	proc_usage(s.svc, &sfd0, &srss0);
	for (int i = 0; i < 200; i++) {
		r = export_call(&s, "run-l", 1,
		                i % 4 == 0   ? "{\"text\":\"hello\"}"
		                : i % 4 == 1 ? "{\"path\":\"link\"}"
		                : i % 4 == 2 ? "{\"path\":\"missing\"}"
		                             : "{\"path\":\"f.bin\"}");
		cr_assert(r->status == 200 || r->status == 400, "%d %s", r->status, r->body);
	}
	long wfd1, wrss1, sfd1, srss1;
	/* The last answer's connection may still be closing on either side:
	 * a second to settle. */
	for (int i = 0; i < 20; i++) {
		proc_usage(s.worker, &wfd1, &wrss1);
		proc_usage(s.svc, &sfd1, &srss1);
		if (wfd1 <= wfd0 && sfd1 <= sfd0)
			break;
		usleep(50 * 1000);
	}
	cr_expect_leq(wfd1, wfd0, "worker descriptors %ld -> %ld", wfd0, wfd1);
	cr_expect_leq(sfd1, sfd0, "service descriptors %ld -> %ld", sfd0, sfd1);
#if !defined(__SANITIZE_ADDRESS__)
	/* ASan's quarantine keeps freed memory resident by design (a leak
	 * there is LeakSanitizer's to find at exit): RSS says nothing. */
	cr_expect_lt(wrss1 - wrss0, 8192, "worker RSS %ld -> %ld KiB", wrss0, wrss1);
	cr_expect_lt(srss1 - srss0, 8192, "service RSS %ld -> %ld KiB", srss0, srss1);
#endif
	fprintf(stderr, "worker fds %ld->%ld rss %ld->%ld KiB; service fds %ld->%ld rss %ld->%ld KiB\n",
	        wfd0, wfd1, wrss0, wrss1, sfd0, sfd1, srss0, srss1);
	/* artifact.export is IDEMPOTENT: every export of f.bin is one artifact,
	 * every "hello" another; the refused ones keep nothing. */
	cr_expect_eq(store_files(&s), 2, "one object per distinct export: %ld", store_files(&s));
	stack_down(&s);
}

/* Files under dir, temporaries included (readdir, fast enough to poll),
 * and their bytes in *ret_bytes (may be NULL). */
static long files_below_sized(const char *dir, long long *ret_bytes)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	long n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    !strcmp(e->d_name, ".store-id") || /* the store's records, not objects */
		    !strcmp(e->d_name, ".database-id"))
			continue;
		char sub[512];
		snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
		struct stat st;
		if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
			n += files_below_sized(sub, ret_bytes);
		} else {
			n++;
			if (ret_bytes)
				*ret_bytes += st.st_size;
		}
	}
	closedir(d);
	return n;
}

static long files_below(const char *dir)
{
	return files_below_sized(dir, NULL);
}

typedef struct bg_export {
	stack *s;
	const char *arguments;
	wt_reply r;
	char why[512];
} bg_export;

static void *run_export(void *arg)
{
	bg_export *c = arg;
	char body[512];
	snprintf(body, sizeof(body), "{\"epoch\":1,\"arguments\":%s}", c->arguments);
	if (wt_request_try(c->s->sock, "POST", "/v1/runs/run-k/tools/artifact.export", NULL, body,
	                   60000, &c->r, c->why, sizeof(c->why)) < 0)
		c->r.status = -1;
	wt_last_body_free();
	return NULL;
}

/* The service killed while it streams a file: the export fails at once,
 * and the store keeps nothing of it: no object, no temporary, no charge. */
Test(worker_tools, native_a_service_killed_mid_export_leaves_nothing, .timeout = 120)
{
	stack s;
	stack_up(&s, "native", false, NULL);
	claim(&s, "run-k", 1, 120, "new");
	wt_reply *r = call(&s, "run-k", 1,
	                   "{\"command\":[\"sh\",\"-c\",\"head -c 400000000 /dev/zero > big\"]}");
	cr_assert_eq(r->status, 200, "%s", r->body);
	HAS(r, "\"exit_code\":0");
	char store[160];
	snprintf(store, sizeof(store), "%s/artifacts", s.dir);
	bg_export c = { .s = &s, .arguments = "{\"path\":\"big\"}" };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, run_export, &c), 0);
	/* Until the temporary object has bytes: the stream is under way. */
	bool seen = false;
	for (int i = 0; i < 20000 && !seen; i++) {
		long long bytes = 0;
		seen = files_below_sized(store, &bytes) > 0 && bytes > 0;
		if (!seen)
			usleep(200);
	}
	cr_expect_eq(wt_stop(s.svc, SIGKILL), 128 + SIGKILL);
	s.svc = 0;
	pthread_join(t, NULL);
	cr_expect(seen, "the export's temporary was seen");
	cr_expect(c.r.status >= 500, "%d %s %s", c.r.status, c.why, c.r.body);
	cr_expect_eq(files_below(store), 0, "nothing of it is kept");
	cr_expect_eq(charged(&s), 0);
	stack_down(&s);
}

/* A service that is gone cannot be asked whether a path is contained: the
 * export is refused as the outage it is (ExecutionUnavailable, 503), never
 * as a WorkspaceEscape, which would tell the model to fix a path nobody
 * looked at. */
Test(worker_tools, native_an_export_with_the_service_gone_is_unavailable_not_an_escape,
     .timeout = 120)
{
	stack s;
	stack_up(&s, "native", false, NULL);
	claim(&s, "run-g", 1, 120, "new");
	wt_reply *r = call(&s, "run-g", 1, "{\"command\":[\"sh\",\"-c\",\"echo hi > out.txt\"]}");
	cr_assert_eq(r->status, 200, "%s", r->body);
	cr_expect_eq(wt_stop(s.svc, SIGKILL), 128 + SIGKILL);
	s.svc = 0;
	r = export_call(&s, "run-g", 1, "{\"path\":\"out.txt\"}");
	cr_expect_eq(r->status, 503, "%d %s", r->status, r->body);
	HAS(r, "ExecutionUnavailable");
	cr_expect_null(strstr(r->body, "WorkspaceEscape"), "%s", r->body);
	cr_expect_eq(charged(&s), 0);
	stack_down(&s);
}

/* Egress needs two independent yeses: the operator's allowlist and the
 * call's network_enabled. Either alone: the sandbox has no proxy. */
Test(worker_tools, native_the_network_needs_the_operators_allowlist_and_the_calls_yes)
{
	stack s;
	stack_policy = "egress:\n  mode: allowlist\n  destinations:\n"
	               "    - host: a.example.com\n      ports: [443]\n";
	stack_up(&s, "native", false, NULL);
	stack_policy = NULL;
	static const char probe[] = "{\"command\":[\"sh\",\"-c\",\"echo proxy=$HTTPS_PROXY\"]}";
	char body[512];
	claim(&s, "run-e", 1, 60, "new");
	snprintf(body, sizeof(body), "{\"epoch\":1,\"network_enabled\":true,\"arguments\":%s}", probe);
	wt_reply *r = req(&s, "POST", "/v1/runs/run-e/tools/sandbox.run_command", NULL, body);
	cr_expect_eq(r->status, 200, "%s", r->body);
	HAS(r, "proxy=http");
	/* Without the call's yes, a new claim's sandbox has no proxy. */
	claim(&s, "run-f", 1, 60, "new");
	r = call(&s, "run-f", 1, probe);
	cr_expect_eq(r->status, 200, "%s", r->body);
	HAS(r, "\"stdout\":\"proxy=\\n\"");
	stack_down(&s);
}

Test(worker_tools, native_without_the_operators_allowlist_the_calls_yes_is_no_network)
{
	stack s;
	stack_up(&s, "native", false, NULL);
	claim(&s, "run-g", 1, 60, "new");
	wt_reply *r = req(&s, "POST", "/v1/runs/run-g/tools/sandbox.run_command", NULL,
	                  "{\"epoch\":1,\"network_enabled\":true,\"arguments\":{\"command\":"
	                  "[\"sh\",\"-c\",\"echo proxy=$HTTPS_PROXY\"]}}");
	cr_expect_eq(r->status, 200, "%s", r->body);
	HAS(r, "\"stdout\":\"proxy=\\n\"");
	stack_down(&s);
}

/* A worker restarted on the same database ends the sandboxes of leases
 * that ended while no worker ran (no reaper in this stack: the worker's
 * own sweeper does it). */
Test(worker_tools, a_restarted_worker_ends_what_ended_while_it_was_down)
{
	stack s;
	stack_up(&s, "fake", false, NULL);
	claim(&s, "run-down", 1, 1, "new");
	wt_reply *r = call(&s, "run-down", 1, "{\"command\":[\"true\"]}");
	cr_assert_eq(r->status, 200, "%s", r->body);
	cr_expect_eq(wt_stop(s.worker, SIGKILL), 128 + SIGKILL);
	usleep(1500 * 1000); /* the lease ends while no worker runs */
	cr_expect_eq(live(&s), 1, "nothing ended it while no worker ran");
	start_worker(&s);
	expect_live(&s, 0, "the restarted worker's sweeper ended it");
	HAS_LOG(&s, "\"why\":\"lease ended\"");
	stack_down(&s);
}

/* ---- the orchestration bridge (docs/bridge.md) ----------------------------------- */

/* The platform's orchestration endpoint, played by the test: it accepts
 * one connection, reads the worker's JSON line naming the run, then the
 * script's bytes to their end, and answers "PONG:" and them uppercased. */
typedef struct upstream {
	char path[160];
	int fd;
	char header[1024];
	char got[1024];
	char why[128];
} upstream;

static void *upstream_serve(void *arg)
{
	upstream *u = arg;
	int c = accept4(u->fd, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0) {
		snprintf(u->why, sizeof(u->why), "accept: %s", strerror(errno));
		return NULL;
	}
	struct timeval tv = { .tv_sec = 30 };
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	char buf[1024];
	size_t len = 0;
	ssize_t n;
	while (len < sizeof(buf) - 1 && (n = read(c, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = 0;
	char *nl = strchr(buf, '\n');
	if (!nl) {
		snprintf(u->why, sizeof(u->why), "no header line in %zu bytes", len);
		close(c);
		return NULL;
	}
	*nl = 0;
	snprintf(u->header, sizeof(u->header), "%s", buf);
	snprintf(u->got, sizeof(u->got), "%s", nl + 1);
	char reply[300] = "PONG:";
	for (size_t i = 0; u->got[i] && i < 200; i++)
		reply[5 + i] = (char)toupper((unsigned char)u->got[i]);
	if (write(c, reply, strlen(reply)) < 0)
		snprintf(u->why, sizeof(u->why), "write: %s", strerror(errno));
	close(c);
	return NULL;
}

static void upstream_start(upstream *u, const stack *s, pthread_t *t)
{
	memset(u, 0, sizeof(*u));
	snprintf(u->path, sizeof(u->path), "%s/up.sock", s->dir);
	u->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	cr_assert_lt(strlen(u->path), sizeof(a.sun_path));
	memcpy(a.sun_path, u->path, strlen(u->path) + 1);
	cr_assert_eq(bind(u->fd, (struct sockaddr *)&a, sizeof(a)), 0, "%s", strerror(errno));
	cr_assert_eq(listen(u->fd, 4), 0);
	cr_assert_eq(pthread_create(t, NULL, upstream_serve, u), 0);
}

/* The script: its token as the first line, "ping", its end of sending,
 * then whatever comes back. */
static const char bridge_script[] =
	"{\"command\":[\"python3\",\"-c\",\"import os, socket\\n"
	"s = socket.socket(socket.AF_UNIX)\\n"
	"s.connect(os.environ['AIRLOCK_BRIDGE_SOCKET'])\\n"
	"s.sendall(os.environ['AIRLOCK_BRIDGE_TOKEN'].encode() + b'\\\\nping')\\n"
	"s.shutdown(socket.SHUT_WR)\\n"
	"print(s.makefile('rb').read().decode())\\n\"]}";

/* Bytes both ways from inside a sandbox of mechanism: the script reaches
 * the platform's endpoint through the service and the worker, which name
 * the run to it; a claim without a bridge has no socket and no token. */
static void bridge_both_ways(const char *mechanism)
{
	stack s;
	stack_bridge = true;
	stack_up(&s, mechanism, false, NULL);
	stack_bridge = false;
	upstream u;
	pthread_t t;
	upstream_start(&u, &s, &t);
	wt_reply *r = req(&s, "PUT", "/v1/runs/run-b/lease", NULL,
	                  "{\"tenant_id\":\"dev\",\"epoch\":3,\"ttl_seconds\":60,\"bridge\":true}");
	cr_assert_eq(r->status, 200, "%s", r->body);
	r = call(&s, "run-b", 3, bridge_script);
	cr_expect_eq(r->status, 200, "%s", r->body);
	HAS(r, "\"stdout\":\"PONG:PING\\n\"");
	pthread_join(t, NULL);
	close(u.fd);
	cr_expect_eq(u.why[0], 0, "%s", u.why);
	cr_expect_str_eq(u.got, "ping");
	cr_expect(strstr(u.header, "\"run_id\":\"run-b\"") && strstr(u.header, "\"epoch\":3") &&
	                  strstr(u.header, "\"tenant_id\":\"dev\"") &&
	                  strstr(u.header, "\"environment_id\":\"env_"),
	          "the endpoint learns the run: %s", u.header);
	cr_expect_null(strstr(wt_read_log(s.log), "AIRLOCK_BRIDGE_TOKEN="), "no token is logged");

	/* A claim without a bridge: nothing at the path, no variable. */
	claim(&s, "run-nb", 1, 60, "new");
	r = call(&s, "run-nb", 1,
	         "{\"command\":[\"sh\",\"-c\",\"ls -d /run/airlock/bridge.sock; "
	         "echo token=${AIRLOCK_BRIDGE_TOKEN-unset}\"]}");
	cr_expect_eq(r->status, 200, "%s", r->body);
	HAS(r, "token=unset");
	HAS(r, "No such file");
	stack_down(&s);
}

Test(worker_tools, native_bridge_carries_bytes_both_ways, .timeout = 120)
{
	bridge_both_ways("native");
}

Test(worker_tools, gvisor_bridge_carries_bytes_both_ways, .timeout = 180)
{
	bridge_both_ways("gvisor");
}
