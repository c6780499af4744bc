/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's part of the orchestration bridge (docs/bridge.md,
 * docs/worker-api.md "The bridge"), through the real airlock-worker: the
 * test plays the execution service (it connects to worker.bridge_listen
 * and writes the preface) and the platform (it listens on
 * worker.bridge_upstream). A claim's sandbox row and its token's hash are
 * planted through the worker's own database layer, in this process, on
 * the worker's SQLite file: the fake mechanism makes no bridge socket, so
 * no sandbox with a bridge is provisioned here (the lead's end-to-end test
 * runs native and gvisor). What it proves: the lease's "bridge" (refused
 * without the settings, fixed for a claim's life, on the spec of the
 * claim's provision); an authenticated connection's JSON line and its
 * bytes both ways, half-close included, bytes after the token line too;
 * each refusal closes the connection before the upstream sees anything,
 * logs its reason, never the token, and counts; the 10 s deadline; both
 * caps; the worker's stop ends every connection.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "airlock/ids.h"
#include "util/util.h"
#include "worker/db.h"

#include "worker_testlib.h"

#define SERVICE_TOKEN "svc-0123456789abcdef0123456789abcdef"
/* A token as the worker makes them (43 bytes of base64url). */
#define TOKEN "Zm9vYmFyLWJyaWRnZS10b2tlbi1mb3ItdGVzdHMtMDE"
#define HANDLE "aGFuZGxlLW9mLWEtc2FuZGJveA=="

typedef struct stack {
	char dir[64];
	char sock[128];    /* the worker's API */
	char bridge[128];  /* worker.bridge_listen */
	char up_path[128]; /* worker.bridge_upstream: this test's listener */
	char svc_sock[128];
	char config[128];
	char log[128];
	int up;            /* listening on up_path */
	pid_t svc, worker;
} stack;

/* Set by a test before stack_up: the worker authenticates tenants by
 * TENANT_A_TOKEN and TENANT_B_TOKEN instead of auth_mode dev. */
static bool stack_tenants;
#define TENANT_A_TOKEN "tok-tenant-a-0123456789abcdef"
#define TENANT_B_TOKEN "tok-tenant-b-0123456789abcdef"

/* bridge: the worker gets the bridge settings; service: airlock serve
 * (fake) runs too. */
static void stack_up(stack *s, bool bridge, bool service)
{
	memset(s, 0, sizeof(*s));
	s->up = -1;
	snprintf(s->dir, sizeof(s->dir), "/tmp/airlock-wbr-XXXXXX");
	cr_assert(mkdtemp(s->dir));
	snprintf(s->sock, sizeof(s->sock), "%s/w.sock", s->dir);
	snprintf(s->bridge, sizeof(s->bridge), "%s/bridge.sock", s->dir);
	snprintf(s->up_path, sizeof(s->up_path), "%s/up.sock", s->dir);
	snprintf(s->svc_sock, sizeof(s->svc_sock), "%s/svc.sock", s->dir);
	snprintf(s->config, sizeof(s->config), "%s/airlock.yaml", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/log", s->dir);
	char path[160], text[2048], bridge_lines[400] = "";
	snprintf(path, sizeof(path), "%s/svc.token", s->dir);
	wt_write_file(path, SERVICE_TOKEN "\n", 0600);
	char auth[256] = "dev\n";
	if (stack_tenants) {
		snprintf(path, sizeof(path), "%s/tenants", s->dir);
		wt_write_file(path, TENANT_A_TOKEN " tenant-a\n" TENANT_B_TOKEN " tenant-b\n", 0600);
		snprintf(auth, sizeof(auth), "tokens\n  tokens_file: %s\n", path);
	}
	if (bridge) {
		snprintf(bridge_lines, sizeof(bridge_lines),
		         "  bridge_listen: unix:%s\n  bridge_upstream: unix:%s\n", s->bridge,
		         s->up_path);
		s->up = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		cr_assert_lt(strlen(s->up_path), sizeof(sa.sun_path));
		memcpy(sa.sun_path, s->up_path, strlen(s->up_path) + 1);
		cr_assert_eq(bind(s->up, (struct sockaddr *)&sa, sizeof(sa)), 0);
		cr_assert_eq(listen(s->up, 128), 0);
	}
	snprintf(text, sizeof(text),
	         "sandbox:\n  mechanism: fake\n"
	         "service:\n  listen: unix:%s\n  credential_file: %s/svc.token\n"
	         "worker:\n  listen: unix:%s\n  state_dir: %s\n  auth_mode: %s"
	         "  metrics_listen: unix:%s/m.sock\n"
	         "  service_address: unix:%s\n  service_credential_file: %s/svc.token\n%s",
	         s->svc_sock, s->dir, s->sock, s->dir, auth, s->dir, s->svc_sock, s->dir, bridge_lines);
	wt_write_file(s->config, text, 0600);
	if (service) {
		char *argv[] = { "airlock", "serve", "--config", s->config, NULL };
		s->svc = wt_start(getenv("AIRLOCK_TEST_AIRLOCK"), argv, s->log, s->svc_sock);
	}
	char *argv[] = { "airlock-worker", "--config", s->config, NULL };
	s->worker = wt_start(getenv("AIRLOCK_TEST_WORKER"), argv, s->log, s->sock);
}

static void stack_down(stack *s)
{
	wt_down(s->worker, s->svc, s->log, s->dir);
	if (s->up >= 0)
		close(s->up);
}

#define HAS_LOG(s, text) cr_expect(strstr(wt_read_log((s)->log), (text)), "the log lacks %s", (text))

static wt_reply *lease(stack *s, const char *run, long epoch, long ttl, const char *bridge)
{
	static wt_reply r;
	char target[160], body[200];
	snprintf(target, sizeof(target), "/v1/runs/%s/lease", run);
	snprintf(body, sizeof(body), "{\"tenant_id\":\"dev\",\"epoch\":%ld,\"ttl_seconds\":%ld%s%s}",
	         epoch, ttl, bridge ? ",\"bridge\":" : "", bridge ? bridge : "");
	wt_request(s->sock, "PUT", target, NULL, body, 30000, &r);
	return &r;
}

/* The claim's sandbox row with the hash of token (NULL: a claim without
 * the bridge, no hash), as claim_provision records it. */
static void plant(stack *s, const char *run, long epoch, const char *token,
                  char env[AIRLOCK_ENVIRONMENT_ID_MAX])
{
	worker_db *db = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_open_sqlite(s->dir, &db, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_environment_id_new(env, &err), 0);
	char hex[65];
	worker_db_lease_state st = WORKER_DB_LEASE_INVALID;
	int r;
	if (token) {
		cr_assert_eq(util_sha256_hex(token, strlen(token), hex), 0);
		r = worker_db_set_bridge_environment(db, run, epoch, env, HANDLE, hex, util_now_ms(),
		                                     &st, &err);
	} else {
		r = worker_db_set_environment(db, run, epoch, env, HANDLE, util_now_ms(), &st, &err);
	}
	cr_assert_eq(r, 0, "%s", err.message);
	cr_assert_eq(st, WORKER_DB_LEASE_CURRENT);
	worker_db_free(db);
}

/* ---- the service's side and the platform's -------------------------------------- */

static int bridge_connect(stack *s)
{
	int fd = wt_connect(s->bridge);
	cr_assert(fd >= 0, "connect %s: %s", s->bridge, strerror(errno));
	return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
	cr_assert_eq(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* A connection that says preface, token and then extra. */
static int hello(stack *s, const char *env, const char *token, const char *extra)
{
	int fd = bridge_connect(s);
	char line[1024];
	int n = snprintf(line, sizeof(line), "AIRLOCK-BRIDGE/1 %s\n%s\n%s", env, token,
	                 extra ? extra : "");
	send_all(fd, line, (size_t)n);
	return fd;
}

/* Up to want bytes within ms (fewer at end of file): the count. */
static size_t recv_some(int fd, char *buf, size_t want, int ms)
{
	size_t got = 0;
	int64_t end = util_monotonic_ms() + ms;
	while (got < want) {
		int64_t left = end - util_monotonic_ms();
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (left <= 0 || poll(&p, 1, (int)left) != 1)
			break;
		ssize_t k = recv(fd, buf + got, want - got, 0);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	return got;
}

/* True when the worker closed fd within ms without sending anything. */
static bool closed_within(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, ms) != 1)
		return false;
	char c;
	return recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

/* The upstream's next connection within ms, or -1. */
static int up_accept(stack *s, int ms)
{
	struct pollfd p = { .fd = s->up, .events = POLLIN };
	if (poll(&p, 1, ms) != 1)
		return -1;
	return accept4(s->up, NULL, NULL, SOCK_CLOEXEC);
}

/* The upstream's first line (through its '\n'). */
static void up_line(int fd, char *buf, size_t size)
{
	size_t n = 0;
	while (n + 1 < size) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		cr_assert_eq(poll(&p, 1, 5000), 1, "the upstream's line within 5 s");
		cr_assert_eq(recv(fd, buf + n, 1, 0), 1);
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = 0;
}

static unsigned long long metric(stack *s, const char *outcome)
{
	char path[160], want[128];
	snprintf(path, sizeof(path), "%s/m.sock", s->dir);
	wt_reply r;
	wt_request(path, "GET", "/metrics", NULL, NULL, 5000, &r);
	cr_assert_eq(r.status, 200);
	snprintf(want, sizeof(want), "airlock_worker_bridge_connections_total{outcome=\"%s\"} ",
	         outcome);
	const char *p = strstr(r.body, want);
	cr_assert(p, "%s", r.body);
	return strtoull(p + strlen(want), NULL, 10);
}

/* The counter once it reaches want (it is counted just after the
 * connection's fate is sealed, so a test can see the fate first). */
static void expect_metric(stack *s, const char *outcome, unsigned long long want)
{
	unsigned long long got = 0;
	for (int i = 0; i < 100 && (got = metric(s, outcome)) != want; i++)
		usleep(20000);
	cr_expect_eq(got, want, "%s: %llu, want %llu: %s", outcome, got, want, wt_read_log(s->log));
}

static void expect_refused(stack *s, int fd, const char *reason)
{
	cr_expect(closed_within(fd, 5000), "%s: the worker closed the connection", reason);
	close(fd);
	int u = up_accept(s, 200);
	cr_expect_lt(u, 0, "%s: the upstream saw nothing", reason);
	if (u >= 0)
		close(u);
	char want[96];
	snprintf(want, sizeof(want), "\"reason\":\"%s\"", reason);
	for (int i = 0; i < 50 && !strstr(wt_read_log(s->log), want); i++)
		usleep(20000);
	HAS_LOG(s, want);
}

/* ---- the claim's "bridge" ------------------------------------------------------------ */

Test(worker_bridge, a_claim_asks_for_the_bridge_only_where_the_worker_has_one)
{
	stack s;
	stack_up(&s, false, false);
	wt_reply *r = lease(&s, "run-1", 1, 60, "true");
	cr_expect_eq(r->status, 400, "%s", r->body);
	cr_expect(strstr(r->body, "worker.bridge_listen"), "%s", r->body);
	r = lease(&s, "run-1", 1, 60, "false");
	cr_expect_eq(r->status, 200, "%s", r->body);
	cr_expect(strstr(r->body, "\"bridge\":false"), "%s", r->body);
	r = lease(&s, "run-2", 1, 60, "\"yes\"");
	cr_expect_eq(r->status, 400, "%s", r->body);
	cr_expect(strstr(r->body, "lease.bridge"), "%s", r->body);
	stack_down(&s);
}

Test(worker_bridge, a_claims_bridge_is_fixed_until_a_higher_epoch)
{
	stack s;
	stack_up(&s, true, false);
	wt_reply *r = lease(&s, "run-1", 1, 60, "true");
	cr_assert_eq(r->status, 200, "%s", r->body);
	cr_expect(strstr(r->body, "\"bridge\":true"), "%s", r->body);
	r = lease(&s, "run-1", 1, 60, "false");
	cr_expect_eq(r->status, 409, "%s", r->body);
	cr_expect(strstr(r->body, "bridge"), "%s", r->body);
	r = lease(&s, "run-1", 1, 60, NULL);
	cr_expect_eq(r->status, 409, "absent is false: %s", r->body);
	r = lease(&s, "run-1", 1, 60, "true");
	cr_expect_eq(r->status, 200, "%s", r->body);
	cr_expect(strstr(r->body, "\"renewed\""), "%s", r->body);
	r = lease(&s, "run-1", 2, 60, NULL);
	cr_expect_eq(r->status, 200, "a new claim chooses again: %s", r->body);
	HAS_LOG(&s, "\"reason\":\"other_bridge\"");
	stack_down(&s);
}

/* The fake mechanism makes no bridge socket and refuses a spec with one,
 * naming it: the claim's first call provisioned with a bridge. */
Test(worker_bridge, a_bridge_claims_first_call_provisions_with_a_bridge)
{
	stack s;
	stack_up(&s, true, true);
	cr_assert_eq(lease(&s, "run-b", 1, 60, "true")->status, 200);
	cr_assert_eq(lease(&s, "run-n", 1, 60, "false")->status, 200);
	static const char body[] = "{\"epoch\":1,\"arguments\":{\"command\":[\"true\"]}}";
	wt_reply r;
	wt_request(s.sock, "POST", "/v1/runs/run-n/tools/sandbox.run_command", NULL, body, 30000,
	           &r);
	cr_expect_eq(r.status, 200, "without a bridge: %s", r.body);
	wt_request(s.sock, "POST", "/v1/runs/run-b/tools/sandbox.run_command", NULL, body, 30000,
	           &r);
	cr_expect_neq(r.status, 200, "%s", r.body);
	cr_expect(strstr(r.body, "bridge"), "the refusal names the bridge: %s", r.body);
	stack_down(&s);
}

/* ---- a connection relayed ------------------------------------------------------------- */

Test(worker_bridge, an_authenticated_connection_reaches_the_upstream_and_bytes_flow_both_ways)
{
	stack s;
	stack_up(&s, true, false);
	cr_assert_eq(lease(&s, "run-1", 3, 60, "true")->status, 200);
	char env[AIRLOCK_ENVIRONMENT_ID_MAX], line[512], buf[64];
	plant(&s, "run-1", 3, TOKEN, env);
	int fd = hello(&s, env, TOKEN, "after-the-token");
	int u = up_accept(&s, 5000);
	cr_assert_geq(u, 0, "the upstream was reached: %s", wt_read_log(s.log));
	up_line(u, line, sizeof(line));
	char want[256];
	snprintf(want, sizeof(want),
	         "{\"environment_id\":\"%s\",\"run_id\":\"run-1\",\"tenant_id\":\"dev\",\"epoch\":3}\n",
	         env);
	cr_expect_str_eq(line, want);
	cr_expect_eq(recv_some(u, buf, 15, 5000), 15);
	cr_expect_eq(memcmp(buf, "after-the-token", 15), 0, "bytes after the token line");
	send_all(fd, "ping", 4);
	cr_expect_eq(recv_some(u, buf, 4, 5000), 4);
	cr_expect_eq(memcmp(buf, "ping", 4), 0);
	send_all(u, "pong", 4);
	cr_expect_eq(recv_some(fd, buf, 4, 5000), 4);
	cr_expect_eq(memcmp(buf, "pong", 4), 0);
	/* Half-close: the script's end reaches the platform, whose answer
	 * still comes back. */
	shutdown(fd, SHUT_WR);
	cr_expect(closed_within(u, 5000), "the script's end of file reached the upstream");
	send_all(u, "late", 4);
	cr_expect_eq(recv_some(fd, buf, 4, 5000), 4);
	cr_expect_eq(memcmp(buf, "late", 4), 0);
	close(u);
	cr_expect(closed_within(fd, 5000), "the upstream's close reached the script");
	close(fd);
	/* A token line ended "\r\n" is the same token. */
	fd = hello(&s, env, TOKEN "\r", NULL);
	u = up_accept(&s, 5000);
	cr_expect_geq(u, 0, "a CRLF token line is accepted: %s", wt_read_log(s.log));
	if (u >= 0) {
		/* The preface line read before the upstream closes: the worker
		 * writes it after the accept, and an upstream closed first is
		 * the worker's upstream_unavailable (a refusal), not this. */
		up_line(u, line, sizeof(line));
		cr_expect(strstr(line, "\"run_id\":\"run-1\""), "%s", line);
		close(u);
	}
	close(fd);
	expect_metric(&s, "accepted", 2);
	expect_metric(&s, "refused", 0);
	HAS_LOG(&s, "\"event\":\"bridge_accepted\"");
	cr_expect_null(strstr(wt_read_log(s.log), TOKEN), "the token is in no log line");
	stack_down(&s);
}

/* ---- refusals ------------------------------------------------------------------------- */

Test(worker_bridge, each_refusal_closes_before_the_upstream_and_says_why)
{
	stack s;
	stack_up(&s, true, false);
	char a[AIRLOCK_ENVIRONMENT_ID_MAX], b[AIRLOCK_ENVIRONMENT_ID_MAX];
	char c[AIRLOCK_ENVIRONMENT_ID_MAX], d[AIRLOCK_ENVIRONMENT_ID_MAX];
	char e[AIRLOCK_ENVIRONMENT_ID_MAX], unknown[AIRLOCK_ENVIRONMENT_ID_MAX];
	cr_assert_eq(lease(&s, "run-a", 1, 60, "true")->status, 200);
	plant(&s, "run-a", 1, TOKEN, a);
	cr_assert_eq(lease(&s, "run-n", 1, 60, "false")->status, 200);
	plant(&s, "run-n", 1, NULL, b);
	cr_assert_eq(airlock_environment_id_new(unknown, NULL), 0);

	expect_refused(&s, hello(&s, a, TOKEN "x", NULL), "wrong_token");
	expect_refused(&s, hello(&s, a, "", NULL), "wrong_token");
	expect_refused(&s, hello(&s, unknown, TOKEN, NULL), "unknown_environment");
	expect_refused(&s, hello(&s, b, TOKEN, NULL), "no_bridge");
	int fd = bridge_connect(&s);
	send_all(fd, "HELLO env\n" TOKEN "\n", strlen("HELLO env\n" TOKEN "\n"));
	expect_refused(&s, fd, "bad_preface");
	expect_refused(&s, hello(&s, "env_NOT-AN-ID", TOKEN, NULL), "bad_preface");
	char big[400];
	memset(big, 'A', sizeof(big));
	fd = bridge_connect(&s);
	send_all(fd, big, sizeof(big));
	expect_refused(&s, fd, "preface_too_long");
	big[sizeof(big) - 1] = 0;
	expect_refused(&s, hello(&s, a, big + 100, NULL), "token_too_long");
	fd = bridge_connect(&s);
	close(fd);
	for (int i = 0; i < 50 && !strstr(wt_read_log(s.log), "closed_early"); i++)
		usleep(20000);
	HAS_LOG(&s, "\"reason\":\"closed_early\"");

	/* The claim's end, each way. */
	cr_assert_eq(lease(&s, "run-r", 1, 60, "true")->status, 200);
	plant(&s, "run-r", 1, TOKEN, c);
	wt_reply r;
	/* The release is committed before its destroy, which fails here (no
	 * service runs): a 503, and the record stays for the sweeper. */
	wt_request(s.sock, "DELETE", "/v1/runs/run-r/lease?epoch=1", NULL, NULL, 30000, &r);
	expect_refused(&s, hello(&s, c, TOKEN, NULL), "lease_released");
	cr_assert_eq(lease(&s, "run-f", 1, 60, "true")->status, 200);
	plant(&s, "run-f", 1, TOKEN, d);
	/* The fence's destroy of the planted row fails (the service is not
	 * running), so its record stays: the claim it names is fenced. */
	lease(&s, "run-f", 2, 60, "true");
	expect_refused(&s, hello(&s, d, TOKEN, NULL), "lease_fenced");
	cr_assert_eq(lease(&s, "run-e", 1, 1, "true")->status, 200);
	plant(&s, "run-e", 1, TOKEN, e);
	usleep(1100 * 1000);
	expect_refused(&s, hello(&s, e, TOKEN, NULL), "lease_expired");

	/* A good one still goes through after all of them. */
	fd = hello(&s, a, TOKEN, NULL);
	int u = up_accept(&s, 5000);
	cr_assert_geq(u, 0, "%s", wt_read_log(s.log));
	char line[512];
	up_line(u, line, sizeof(line));
	close(u);
	close(fd);
	expect_metric(&s, "refused", 12);
	expect_metric(&s, "accepted", 1);
	cr_expect_null(strstr(wt_read_log(s.log), TOKEN), "the token is in no log line");
	stack_down(&s);
}

Test(worker_bridge, a_connection_that_says_nothing_is_closed_at_the_deadline, .timeout = 60)
{
	stack s;
	stack_up(&s, true, false);
	cr_assert_eq(lease(&s, "run-a", 1, 60, "true")->status, 200);
	char a[AIRLOCK_ENVIRONMENT_ID_MAX];
	plant(&s, "run-a", 1, TOKEN, a);
	int64_t t0 = util_monotonic_ms();
	int silent = bridge_connect(&s);
	/* The preface, then a script that holds its token back. */
	int held = bridge_connect(&s);
	char line[128];
	int n = snprintf(line, sizeof(line), "AIRLOCK-BRIDGE/1 %s\n", a);
	send_all(held, line, (size_t)n);
	/* A slow writer within the deadline is served. */
	int slow = bridge_connect(&s);
	send_all(slow, line, (size_t)n);
	usleep(2000 * 1000);
	send_all(slow, TOKEN "\n", strlen(TOKEN) + 1);
	int u = up_accept(&s, 5000);
	cr_expect_geq(u, 0, "a token two seconds after the preface is in time");
	cr_expect_not(closed_within(silent, 7000 - (int)(util_monotonic_ms() - t0)),
	              "not closed before the deadline");
	cr_expect(closed_within(silent, 6000), "closed at the deadline");
	cr_expect(closed_within(held, 1000), "closed at the deadline");
	int64_t took = util_monotonic_ms() - t0;
	cr_expect(took >= 9500 && took <= 13000, "closed after %lld ms", (long long)took);
	HAS_LOG(&s, "\"reason\":\"deadline\"");
	close(silent);
	close(held);
	close(slow);
	if (u >= 0)
		close(u);
	stack_down(&s);
}

/* ---- caps ------------------------------------------------------------------------------ */

Test(worker_bridge, past_eight_for_one_environment_or_64_in_all_is_closed_at_once)
{
	stack s;
	stack_up(&s, true, false);
	cr_assert_eq(lease(&s, "run-a", 1, 60, "true")->status, 200);
	cr_assert_eq(lease(&s, "run-b", 1, 60, "true")->status, 200);
	char a[AIRLOCK_ENVIRONMENT_ID_MAX], b[AIRLOCK_ENVIRONMENT_ID_MAX];
	plant(&s, "run-a", 1, TOKEN, a);
	plant(&s, "run-b", 1, TOKEN, b);
	int fds[8], ups[8];
	for (int i = 0; i < 8; i++) {
		fds[i] = hello(&s, a, TOKEN, NULL);
		ups[i] = up_accept(&s, 5000);
		cr_assert_geq(ups[i], 0, "relay %d", i);
	}
	expect_refused(&s, hello(&s, a, TOKEN, NULL), "environment_cap");
	int other = hello(&s, b, TOKEN, NULL);
	int ou = up_accept(&s, 5000);
	cr_expect_geq(ou, 0, "another environment's connection is its own");
	/* One ends: its place is free again. */
	close(fds[0]);
	close(ups[0]);
	for (int i = 0; i < 100; i++) {
		fds[0] = hello(&s, a, TOKEN, NULL);
		ups[0] = up_accept(&s, 200);
		if (ups[0] >= 0)
			break;
		close(fds[0]);
	}
	cr_expect_geq(ups[0], 0, "a freed place is taken");

	/* Threads in all: 9 named are open, 119 silent ones more (never
	 * named: each holds a thread until its deadline) fill the worker's
	 * 2 x 64. */
	enum { SILENT = 2 * AIRLOCK_WORKER_BRIDGE_CONNECTIONS_MAX - 9 };
	int silent[SILENT];
	for (int i = 0; i < SILENT; i++)
		silent[i] = bridge_connect(&s);
	usleep(300 * 1000);
	int past = bridge_connect(&s);
	cr_expect(closed_within(past, 2000), "the 129th is closed at once");
	close(past);
	for (int i = 0; i < 50 && !strstr(wt_read_log(s.log), "connections_cap"); i++)
		usleep(20000);
	HAS_LOG(&s, "\"reason\":\"connections_cap\"");
	for (int i = 0; i < SILENT; i++)
		close(silent[i]);
	/* Their threads end and are joined (each second): room again. */
	int again = -1, ua = -1;
	for (int i = 0; i < 30 && ua < 0; i++) {
		usleep(200 * 1000);
		again = hello(&s, b, TOKEN, NULL);
		ua = up_accept(&s, 300);
		if (ua < 0)
			close(again);
	}
	cr_expect_geq(ua, 0, "room again once connections end");
	if (ua >= 0) {
		close(ua);
		close(again);
	}
	for (int i = 0; i < 8; i++) {
		close(fds[i]);
		if (ups[i] >= 0)
			close(ups[i]);
	}
	close(other);
	if (ou >= 0)
		close(ou);
	stack_down(&s);
}

/* One tenant's runs cannot take the bridge from another tenant's: the
 * worker's 64 places are shared by every tenant, and an authenticated
 * connection that stays idle holds its place for as long as it likes, so
 * one tenant holds at most a quarter of them
 * (AIRLOCK_WORKER_BRIDGE_PER_TENANT_MAX): its eight runs' eight
 * connections each reach the platform up to that, the rest are refused
 * tenant_cap. */
Test(worker_bridge, one_tenants_idle_connections_leave_room_for_another_tenants, .timeout = 90)
{
	stack_tenants = true;
	stack s;
	stack_up(&s, true, false);
	int fds[64], ups[64], n = 0;
	for (int r = 0; r < 8; r++) {
		char run[32], body[160], target[64], env[AIRLOCK_ENVIRONMENT_ID_MAX];
		snprintf(run, sizeof(run), "run-a%d", r);
		snprintf(target, sizeof(target), "/v1/runs/%s/lease", run);
		snprintf(body, sizeof(body),
		         "{\"tenant_id\":\"tenant-a\",\"epoch\":1,\"ttl_seconds\":600,\"bridge\":true}");
		wt_reply rep;
		wt_request(s.sock, "PUT", target, TENANT_A_TOKEN, body, 30000, &rep);
		cr_assert_eq(rep.status, 200, "%s", rep.body);
		plant(&s, run, 1, TOKEN, env);
		/* Eight each, as the service relays at most: authenticated, then
		 * silent (the platform's side waits for a request). */
		for (int i = 0; i < 8 && n < AIRLOCK_WORKER_BRIDGE_PER_TENANT_MAX + 1; i++, n++) {
			fds[n] = hello(&s, env, TOKEN, NULL);
			ups[n] = up_accept(&s, n < AIRLOCK_WORKER_BRIDGE_PER_TENANT_MAX ? 5000 : 1000);
			if (n < AIRLOCK_WORKER_BRIDGE_PER_TENANT_MAX)
				cr_assert_geq(ups[n], 0, "tenant-a's relay %d", n);
			else
				cr_expect_lt(ups[n], 0, "tenant-a's relay past its share");
		}
	}
	cr_expect(strstr(wt_read_log(s.log), "\"reason\":\"tenant_cap\""), "%s",
	          wt_read_log(s.log));
	wt_reply rep;
	wt_request(s.sock, "PUT", "/v1/runs/run-b/lease", TENANT_B_TOKEN,
	           "{\"tenant_id\":\"tenant-b\",\"epoch\":1,\"ttl_seconds\":600,\"bridge\":true}",
	           30000, &rep);
	cr_assert_eq(rep.status, 200, "%s", rep.body);
	char b[AIRLOCK_ENVIRONMENT_ID_MAX];
	plant(&s, "run-b", 1, TOKEN, b);
	/* Long after tenant-a's connections last said anything. */
	sleep(12);
	int fb = hello(&s, b, TOKEN, NULL);
	int ub = up_accept(&s, 5000);
	cr_expect_geq(ub, 0, "tenant-b's sandbox reaches the platform while tenant-a idles: %s",
	              strstr(wt_read_log(s.log), "connections_cap") ? "refused connections_cap" : "");
	if (ub >= 0)
		close(ub);
	close(fb);
	for (int i = 0; i < n; i++) {
		close(fds[i]);
		if (ups[i] >= 0)
			close(ups[i]);
	}
	stack_down(&s);
}

/* One tenant's connections, never more than the service's 8 at once,
 * each ended as soon as its preface is written, at 400 a second (the
 * service accepts AIRLOCK_SERVICE_BRIDGE_CONNECTS_PER_SECOND, 20, from a
 * sandbox: this is the most a tenant's 16 sandboxes, a quarter of the
 * service's 64, could make together, and more): the worker's places stay
 * open to every other sandbox (a connection the service has closed holds
 * no place of the worker's). */
Test(worker_bridge, one_sandbox_churning_eight_at_once_never_fills_the_worker, .timeout = 90)
{
	stack s;
	stack_up(&s, true, false);
	cr_assert_eq(lease(&s, "run-a", 1, 60, "true")->status, 200);
	cr_assert_eq(lease(&s, "run-b", 1, 60, "true")->status, 200);
	char a[AIRLOCK_ENVIRONMENT_ID_MAX], b[AIRLOCK_ENVIRONMENT_ID_MAX];
	plant(&s, "run-a", 1, TOKEN, a);
	plant(&s, "run-b", 1, TOKEN, b);
	long probes = 0, denied = 0;
	char pre[128];
	int pl = snprintf(pre, sizeof(pre), "AIRLOCK-BRIDGE/1 %s\n", a);
	int64_t end = util_monotonic_ms() + 3000;
	long rounds = 0;
	while (util_monotonic_ms() < end) {
		int fds[8];
		for (int i = 0; i < 8; i++) {
			fds[i] = wt_connect(s.bridge);
			if (fds[i] >= 0 && send(fds[i], pre, (size_t)pl, MSG_NOSIGNAL) < 0) {
				close(fds[i]);
				fds[i] = -1;
			}
		}
		for (int i = 0; i < 8; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		usleep(20 * 1000); /* 50 rounds of 8 a second */
		/* Now and then another sandbox's connection. */
		if (++rounds % 10 == 0) {
			probes++;
			int fb = hello(&s, b, TOKEN, NULL);
			int ub = up_accept(&s, 1000);
			if (ub < 0)
				denied++;
			else
				close(ub);
			close(fb);
		}
	}
	cr_expect_eq(denied, 0, "another sandbox's connection refused %ld of %ld times", denied,
	             probes);
	unsigned long long capped = 0;
	const char *log = wt_read_log(s.log);
	for (const char *p = log; (p = strstr(p, "\"reason\":\"connections_cap\"")); p++)
		capped++;
	cr_expect_eq(capped, 0,
	             "%ld rounds of 8 connections from one environment: %llu others refused "
	             "connections_cap (the worker's cap on all environments)",
	             rounds, capped);
	stack_down(&s);
}

/* A sandbox that tries tokens as fast as it can: each try is counted, but
 * the worker's log is not the sandbox's to fill (refusals of one
 * environment are logged at a bounded rate, the rest summed). */
Test(worker_bridge, wrong_tokens_in_a_loop_do_not_flood_the_log, .timeout = 90)
{
	stack s;
	stack_up(&s, true, false);
	cr_assert_eq(lease(&s, "run-a", 1, 60, "true")->status, 200);
	char a[AIRLOCK_ENVIRONMENT_ID_MAX];
	plant(&s, "run-a", 1, TOKEN, a);
	int64_t end = util_monotonic_ms() + 3000;
	long tries = 0;
	while (util_monotonic_ms() < end) {
		int fd = hello(&s, a, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", NULL);
		char c;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 1000) == 1 && recv(fd, &c, 1, 0) <= 0)
			tries++;
		close(fd);
	}
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "grep -c '\"reason\":\"wrong_token\"' %s", s.log);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	long lines = -1;
	cr_assert_eq(fscanf(f, "%ld", &lines), 1);
	pclose(f);
	cr_expect_leq(lines, 100,
	              "%ld wrong tokens in 3 s from one environment: %ld bridge_refused lines "
	              "(each with a database lookup)",
	              tries, lines);
	stack_down(&s);
}

/* ---- the worker's stop ------------------------------------------------------------------- */

Test(worker_bridge, the_workers_stop_ends_every_connection_and_joins_its_threads)
{
	stack s;
	stack_up(&s, true, false);
	cr_assert_eq(lease(&s, "run-a", 1, 60, "true")->status, 200);
	char a[AIRLOCK_ENVIRONMENT_ID_MAX];
	plant(&s, "run-a", 1, TOKEN, a);
	int fd = hello(&s, a, TOKEN, NULL);
	int u = up_accept(&s, 5000);
	cr_assert_geq(u, 0);
	char line[512];
	up_line(u, line, sizeof(line));
	int silent = bridge_connect(&s);
	int64_t t0 = util_monotonic_ms();
	cr_expect_eq(wt_stop(s.worker, SIGTERM), 0, "%s", wt_read_log(s.log));
	s.worker = 0;
	cr_expect_lt(util_monotonic_ms() - t0, 5000, "the stop waits for no connection");
	cr_expect(closed_within(fd, 1000), "the relayed connection ended");
	cr_expect(closed_within(u, 1000), "its upstream connection ended");
	cr_expect(closed_within(silent, 1000), "the silent one ended");
	cr_expect_neq(access(s.bridge, F_OK), 0, "the listener's socket is gone");
	close(fd);
	close(u);
	close(silent);
	stack_down(&s);
}
