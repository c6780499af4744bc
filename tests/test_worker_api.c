/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's API (docs/worker-api.md) through the real airlock-worker
 * program: started on a Unix socket in a temporary directory over a
 * SQLite database (and PostgreSQL, the suite's own server:
 * tests/pg_server.h), driven with a raw HTTP/1.1 client. Leases: claim,
 * renew, fence, refuse, release, expiry by TTL; tenant scoping; strict
 * decoding; authentication; a restart on the same database keeps the
 * leases; SIGTERM stops it with 0; a sandbox recorded for an ended claim
 * fails loudly. Then the tokens file's parse.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"
#include "worker/db.h"
#include "worker/worker.h"

#include "pg_server.h"
#include "worker_testlib.h"

#define TOKEN_A "tok-a-0123456789abcdef"
#define TOKEN_B "tok-b-0123456789abcdef"
#define TOKEN_ALL "tok-all-0123456789abcdef"

typedef struct worker_fx {
	char dir[64];
	char sock[128];
	char msock[128];
	char config[128];
	pid_t pid;
} worker_fx;

static void fx_start(worker_fx *f)
{
	const char *exe = getenv("AIRLOCK_TEST_WORKER");
	cr_assert(exe, "AIRLOCK_TEST_WORKER is not set (run through meson test)");
	char log[160];
	snprintf(log, sizeof(log), "%s/log", f->dir);
	char *argv[] = { "airlock-worker", "--config", f->config, NULL };
	f->pid = wt_start(exe, argv, log, f->sock);
}

/* SIGTERM, and the exit status. */
static int fx_stop(worker_fx *f)
{
	int st = wt_stop(f->pid, SIGTERM);
	f->pid = 0;
	return st;
}

/* pg: the suite's server, a schema of this test's own. */
static void fx_init(worker_fx *f, bool pg, const char *auth_mode)
{
	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/airlock-wapi-XXXXXX");
	cr_assert(mkdtemp(f->dir));
	snprintf(f->sock, sizeof(f->sock), "%s/w.sock", f->dir);
	snprintf(f->msock, sizeof(f->msock), "%s/m.sock", f->dir);
	snprintf(f->config, sizeof(f->config), "%s/airlock.yaml", f->dir);
	char tokens[160], db[512], text[2048];
	snprintf(tokens, sizeof(tokens), "%s/tokens", f->dir);
	wt_write_file(tokens,
	           "# the platform's tokens\n" TOKEN_A " tenant-a\n" TOKEN_B " tenant-b\n\n" TOKEN_ALL
	           " *\n",
	           0600);
	db[0] = 0;
	if (pg)
		wt_pg_settings(f->dir, db, sizeof(db));
	snprintf(text, sizeof(text),
	         "worker:\n  listen: unix:%s\n  metrics_listen: unix:%s\n  state_dir: %s\n"
	         "  auth_mode: %s\n%s%s%s%s",
	         f->sock, f->msock, f->dir, auth_mode,
	         strcmp(auth_mode, "tokens") == 0 ? "  tokens_file: " : "",
	         strcmp(auth_mode, "tokens") == 0 ? tokens : "",
	         strcmp(auth_mode, "tokens") == 0 ? "\n" : "", db);
	wt_write_file(f->config, text, 0600);
	fx_start(f);
}

static void fx_done(worker_fx *f)
{
	if (f->pid > 0)
		cr_expect_eq(fx_stop(f), 0, "SIGTERM: a clean stop exits 0");
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	cr_expect_eq(system(cmd), 0);
}

/* ---- a raw HTTP/1.1 client ------------------------------------------------------- */

typedef wt_reply reply;

static reply req_to(const char *sock, const char *method, const char *target, const char *token,
                    const char *body)
{
	static reply rep;
	wt_request(sock, method, target, token, body, 5000, &rep);
	return rep;
}

static reply req(worker_fx *f, const char *method, const char *target, const char *token,
                 const char *body)
{
	return req_to(f->sock, method, target, token, body);
}

static reply lease(worker_fx *f, const char *token, const char *run, const char *tenant,
                   long epoch, long ttl)
{
	char target[256], body[256];
	snprintf(target, sizeof(target), "/v1/runs/%s/lease", run);
	snprintf(body, sizeof(body), "{\"tenant_id\":\"%s\",\"epoch\":%ld,\"ttl_seconds\":%ld}",
	         tenant, epoch, ttl);
	return req(f, "PUT", target, token, body);
}

static reply release(worker_fx *f, const char *token, const char *run, const char *query)
{
	char target[256];
	snprintf(target, sizeof(target), "/v1/runs/%s/lease?%s", run, query);
	return req(f, "DELETE", target, token, NULL);
}

#define HAS(rep, sub)                                                                              \
	cr_expect(strstr((rep).body, (sub)) != NULL, "%d %s lacks %s", (rep).status, (rep).body, (sub))

static void expect_outcome(reply rep, const char *outcome)
{
	char want[64];
	snprintf(want, sizeof(want), "\"outcome\":\"%s\"", outcome);
	cr_expect_eq(rep.status, 200, "%d %s", rep.status, rep.body);
	HAS(rep, want);
	HAS(rep, "\"expires_at\":\"");
}

/* A metric's value from the metrics listener, -1 when absent. */
static long metric(worker_fx *f, const char *line_start)
{
	reply rep = req_to(f->msock, "GET", "/metrics", NULL, NULL);
	cr_assert_eq(rep.status, 200);
	char want[256];
	snprintf(want, sizeof(want), "\n%s", line_start); /* a sample's line, not its HELP */
	const char *p = strstr(rep.body, want);
	return p ? strtol(p + strlen(want), NULL, 10) : -1;
}

/* ---- leases ------------------------------------------------------------------------ */

static void lifecycle(bool pg)
{
	worker_fx f;
	fx_init(&f, pg, "tokens");
	reply h = req(&f, "GET", "/v1/health", TOKEN_A, NULL);
	cr_expect_eq(h.status, 200);
	HAS(h, pg ? "\"database\":\"postgresql\"" : "\"database\":\"sqlite\"");

	expect_outcome(lease(&f, TOKEN_A, "run-1", "tenant-a", 1, 60), "new");
	expect_outcome(lease(&f, TOKEN_A, "run-1", "tenant-a", 1, 60), "renewed");
	expect_outcome(lease(&f, TOKEN_A, "run-1", "tenant-a", 2, 60), "fenced");
	/* A lower epoch changes nothing. */
	reply r = lease(&f, TOKEN_A, "run-1", "tenant-a", 1, 60);
	cr_expect_eq(r.status, 409, "%d %s", r.status, r.body);
	HAS(r, "ExecutionRejected");
	expect_outcome(lease(&f, TOKEN_A, "run-1", "tenant-a", 2, 60), "renewed");
	/* Release: another epoch conflicts, the current one ends the claim,
	 * again is still over (204), and its epoch cannot be claimed again. */
	cr_expect_eq(release(&f, TOKEN_A, "run-1", "epoch=1").status, 409);
	cr_expect_eq(release(&f, TOKEN_A, "run-1", "epoch=2").status, 204);
	cr_expect_eq(release(&f, TOKEN_A, "run-1", "epoch=2").status, 204);
	r = lease(&f, TOKEN_A, "run-1", "tenant-a", 2, 60);
	cr_expect_eq(r.status, 409);
	HAS(r, "released");
	expect_outcome(lease(&f, TOKEN_A, "run-1", "tenant-a", 3, 60), "new");
	cr_expect_eq(release(&f, TOKEN_A, "run-never", "epoch=1").status, 404);

	/* Expiry by TTL: the same epoch cannot renew a lost lease. */
	expect_outcome(lease(&f, TOKEN_A, "run-2", "tenant-a", 5, 1), "new");
	usleep(1300 * 1000);
	r = lease(&f, TOKEN_A, "run-2", "tenant-a", 5, 1);
	cr_expect_eq(r.status, 409, "%d %s", r.status, r.body);
	HAS(r, "expired");
	expect_outcome(lease(&f, TOKEN_A, "run-2", "tenant-a", 6, 60), "new");

	cr_expect_eq(metric(&f, "airlock_worker_lease_claims_total{outcome=\"new\"} "), 4);
	cr_expect_eq(metric(&f, "airlock_worker_lease_claims_total{outcome=\"renewed\"} "), 2);
	cr_expect_eq(metric(&f, "airlock_worker_lease_fences_total "), 1);
	cr_expect_eq(metric(&f, "airlock_worker_lease_refusals_total{reason=\"other_epoch\"} "), 1);
	cr_expect_eq(metric(&f, "airlock_worker_lease_refusals_total{reason=\"expired\"} "), 1);
	cr_expect_eq(metric(&f, "airlock_worker_lease_expiries_seen_total "), 1);
	cr_expect_eq(metric(&f, "airlock_worker_lease_releases_total "), 1);

	/* A restart on the same database keeps the leases. */
	cr_expect_eq(fx_stop(&f), 0);
	fx_start(&f);
	expect_outcome(lease(&f, TOKEN_A, "run-2", "tenant-a", 6, 60), "renewed");
	cr_expect_eq(lease(&f, TOKEN_A, "run-2", "tenant-a", 5, 60).status, 409);
	cr_expect_eq(lease(&f, TOKEN_A, "run-1", "tenant-a", 2, 60).status, 409);
	fx_done(&f);
}

Test(worker_api, lease_lifecycle_sqlite)
{
	lifecycle(false);
}

Test(worker_api, lease_lifecycle_postgresql)
{
	lifecycle(true);
}

Test(worker_api, tenant_scoping)
{
	worker_fx f;
	fx_init(&f, false, "tokens");
	expect_outcome(lease(&f, TOKEN_A, "run-a", "tenant-a", 1, 60), "new");
	/* Another tenant's run is not found, whatever it asks. */
	reply r = lease(&f, TOKEN_B, "run-a", "tenant-b", 2, 60);
	cr_expect_eq(r.status, 404, "%d %s", r.status, r.body);
	cr_expect_eq(release(&f, TOKEN_B, "run-a", "epoch=1").status, 404);
	cr_expect_eq(release(&f, TOKEN_B, "run-a", "epoch=1&tenant_id=tenant-a").status, 403);
	/* A token's tenant is the request's: the body cannot name another. */
	r = lease(&f, TOKEN_B, "run-b", "tenant-a", 1, 60);
	cr_expect_eq(r.status, 403, "%d %s", r.status, r.body);
	/* A token of every tenant names the tenant. */
	r = release(&f, TOKEN_ALL, "run-a", "epoch=1");
	cr_expect_eq(r.status, 400, "%d %s", r.status, r.body);
	expect_outcome(lease(&f, TOKEN_ALL, "run-a", "tenant-a", 1, 60), "renewed");
	cr_expect_eq(release(&f, TOKEN_ALL, "run-a", "tenant_id=tenant-a&epoch=1").status, 204);
	fx_done(&f);
}

Test(worker_api, authentication)
{
	worker_fx f;
	fx_init(&f, false, "tokens");
	cr_expect_eq(req(&f, "GET", "/v1/health", NULL, NULL).status, 401);
	cr_expect_eq(req(&f, "GET", "/v1/health", "tok-a-0123456789abcdeX", NULL).status, 401);
	cr_expect_eq(req(&f, "GET", "/v1/health", "tok-a-0123456789abcde", NULL).status, 401);
	/* Unauthenticated, nothing is learnt: not even that a path is unknown. */
	cr_expect_eq(req(&f, "GET", "/nowhere", NULL, NULL).status, 401);
	cr_expect_eq(lease(&f, NULL, "run-a", "tenant-a", 1, 60).status, 401);
	cr_expect_eq(metric(&f, "airlock_worker_auth_failures_total "), 5);
	cr_expect_eq(req(&f, "GET", "/v1/health", TOKEN_B, NULL).status, 200);
	fx_done(&f);

	/* dev: one tenant, "dev", and no token. */
	fx_init(&f, false, "dev");
	expect_outcome(lease(&f, NULL, "run-d", "dev", 1, 60), "new");
	cr_expect_eq(lease(&f, NULL, "run-e", "other", 1, 60).status, 403);
	fx_done(&f);
}

Test(worker_api, strict_requests)
{
	worker_fx f;
	fx_init(&f, false, "tokens");
	static const char *const bad[] = {
		"{\"tenant_id\":\"tenant-a\",\"epoch\":1,\"ttl_seconds\":60,\"extra\":1}",
		"{\"tenant_id\":\"tenant-a\",\"ttl_seconds\":60}",
		"{\"tenant_id\":\"tenant-a\",\"epoch\":-1,\"ttl_seconds\":60}",
		"{\"tenant_id\":\"tenant-a\",\"epoch\":\"1\",\"ttl_seconds\":60}",
		"{\"tenant_id\":\"tenant-a\",\"epoch\":1.5,\"ttl_seconds\":60}",
		"{\"tenant_id\":\"tenant-a\",\"epoch\":1,\"ttl_seconds\":0}",
		"{\"tenant_id\":\"tenant-a\",\"epoch\":1,\"ttl_seconds\":86401}",
		"{\"tenant_id\":\"tenant a\",\"epoch\":1,\"ttl_seconds\":60}",
		"{\"tenant_id\":7,\"epoch\":1,\"ttl_seconds\":60}",
		"{\"tenant_id\":\"tenant-a\",\"epoch\":1,\"ttl_seconds\":60",
		"[]",
		"",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		reply r = req(&f, "PUT", "/v1/runs/run-s/lease", TOKEN_A, bad[i]);
		cr_expect_eq(r.status, 400, "[%s]: %d %s", bad[i], r.status, r.body);
		HAS(r, "ToolValidationError");
	}
	/* Past the body's cap: 413 at its head. */
	static char big[8192];
	memset(big, ' ', sizeof(big) - 1);
	cr_expect_eq(req(&f, "PUT", "/v1/runs/run-s/lease", TOKEN_A, big).status, 413);
	/* Nothing was claimed by any of them. */
	expect_outcome(lease(&f, TOKEN_A, "run-s", "tenant-a", 1, 60), "new");
	/* Routes. */
	cr_expect_eq(req(&f, "GET", "/v1/runs/run-s/lease", TOKEN_A, NULL).status, 405);
	cr_expect_eq(req(&f, "POST", "/v1/health", TOKEN_A, NULL).status, 405);
	cr_expect_eq(req(&f, "PUT", "/v1/runs/run%2Ds/lease", TOKEN_A, NULL).status, 404);
	cr_expect_eq(req(&f, "PUT", "/v1/runs//lease", TOKEN_A, NULL).status, 404);
	cr_expect_eq(req(&f, "PUT", "/v1/runs/a/b/lease", TOKEN_A, NULL).status, 404);
	cr_expect_eq(req(&f, "GET", "/v1/healthz", TOKEN_A, NULL).status, 404);
	cr_expect_eq(release(&f, TOKEN_A, "run-s", "").status, 400);
	cr_expect_eq(release(&f, TOKEN_A, "run-s", "epoch=x").status, 400);
	cr_expect_eq(release(&f, TOKEN_A, "run-s", "epoch=1&epoch=1").status, 400);
	cr_expect_eq(release(&f, TOKEN_A, "run-s", "epoch=1&x=2").status, 400);
	cr_expect_eq(release(&f, TOKEN_A, "run-s", "epoch=1").status, 204);
	fx_done(&f);
}

/* Settings the worker refuses before it listens, naming the setting. */
Test(worker_api, refused_at_start)
{
	const char *exe = getenv("AIRLOCK_TEST_WORKER");
	cr_assert(exe);
	char dir[] = "/tmp/airlock-wapi-XXXXXX", config[128], log[128], tokens[128], text[512];
	cr_assert(mkdtemp(dir));
	snprintf(config, sizeof(config), "%s/c.yaml", dir);
	snprintf(log, sizeof(log), "%s/log", dir);
	snprintf(tokens, sizeof(tokens), "%s/tokens", dir);
	static const struct {
		const char *worker_extra, *want;
		mode_t tokens_mode;
	} cases[] = {
		{ "", "worker.auth_mode is not set", 0600 },
		{ "  auth_mode: tokens\n  tokens_file: TOKENS\n", "group and others must have no access", 0644 },
		{ "  auth_mode: dev\ndeployment_mode: production\nauth_mode: token\nsandbox: {mechanism: gvisor}\n",
		  "worker.auth_mode=dev", 0600 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		wt_write_file(tokens, TOKEN_A " tenant-a\n", cases[i].tokens_mode);
		char extra[256];
		const char *t = strstr(cases[i].worker_extra, "TOKENS");
		if (t)
			snprintf(extra, sizeof(extra), "%.*s%s%s", (int)(t - cases[i].worker_extra),
			         cases[i].worker_extra, tokens, t + 6);
		else
			snprintf(extra, sizeof(extra), "%s", cases[i].worker_extra);
		snprintf(text, sizeof(text), "worker:\n  listen: unix:%s/w.sock\n  state_dir: %s\n%s",
		         dir, dir, extra);
		wt_write_file(config, text, 0600);
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "%s --config %s 2>%s", exe, config, log);
		int st = system(cmd);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 78, "case %zu: status %d", i, st);
		char buf[1024] = "";
		FILE *fp = fopen(log, "r");
		cr_assert(fp);
		size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
		buf[n] = 0;
		fclose(fp);
		cr_expect(strstr(buf, cases[i].want), "case %zu: [%s] lacks [%s]", i, buf, cases[i].want);
	}
	snprintf(text, sizeof(text), "rm -rf %s", dir);
	cr_expect_eq(system(text), 0);
}

/* ---- the tokens file ------------------------------------------------------------------ */

static airlock_error tokens_fail(const char *text)
{
	worker_tokens *t = NULL;
	airlock_error err = { 0 };
	cr_expect_lt(worker_tokens_parse(text, strlen(text), &t, &err), 0, "[%s] parsed", text);
	worker_tokens_free(t);
	cr_expect_null(strstr(err.message, "0123456789"), "a token in the message: %s", err.message);
	return err;
}

Test(worker_api, tokens_file)
{
	worker_tokens *t = NULL;
	airlock_error err = { 0 };
	const char *ok = "# c\n\n  " TOKEN_A "\ttenant-a  \n" TOKEN_ALL " *\r\n";
	cr_assert_eq(worker_tokens_parse(ok, strlen(ok), &t, &err), 0, "%s", err.message);
	char tenant[AIRLOCK_ID_MAX + 1];
	cr_expect(worker_tokens_lookup(t, "Bearer " TOKEN_A, strlen("Bearer " TOKEN_A), tenant));
	cr_expect_str_eq(tenant, "tenant-a");
	cr_expect(worker_tokens_lookup(t, "bearer " TOKEN_ALL, strlen("bearer " TOKEN_ALL), tenant));
	cr_expect_str_eq(tenant, "*");
	cr_expect_not(worker_tokens_lookup(t, "Bearer " TOKEN_B, strlen("Bearer " TOKEN_B), tenant));
	cr_expect_not(worker_tokens_lookup(t, TOKEN_A, strlen(TOKEN_A), tenant));
	cr_expect_not(worker_tokens_lookup(t, NULL, 0, tenant));
	worker_tokens_free(t);

	airlock_error e = tokens_fail("short tenant-a\n");
	cr_expect(strstr(e.message, "line 1") && strstr(e.message, "16 to 256"), "%s", e.message);
	e = tokens_fail("# only\n\n");
	cr_expect(strstr(e.message, "no token"), "%s", e.message);
	e = tokens_fail(TOKEN_A " tenant-a\n" TOKEN_A " tenant-b\n");
	cr_expect(strstr(e.message, "line 2") && strstr(e.message, "twice"), "%s", e.message);
	e = tokens_fail(TOKEN_A "\n");
	cr_expect(strstr(e.message, "TOKEN TENANT"), "%s", e.message);
	e = tokens_fail(TOKEN_A " tenant a\n");
	cr_expect(strstr(e.message, "TOKEN TENANT"), "%s", e.message);
	e = tokens_fail(TOKEN_A " ten.ant\n");
	cr_expect(strstr(e.message, "tenant must be"), "%s", e.message);
	static const char nul[] = TOKEN_A " tenant-a\n\0x";
	cr_expect_lt(worker_tokens_parse(nul, sizeof(nul) - 1, &t, &err), 0);
}

/* A sandbox recorded for an ended claim that cannot be destroyed (this
 * worker has no execution service configured): a fence that finds it
 * fails (503, retriable) and the record stays; a start goes on, and its
 * sweeper keeps trying, each try logged. */
Test(worker_api, a_sandbox_that_cannot_be_destroyed_keeps_its_record_and_fails_loudly)
{
	worker_fx f;
	fx_init(&f, false, "dev");
	expect_outcome(lease(&f, NULL, "run-x", "dev", 1, 60), "new");
	cr_expect_eq(fx_stop(&f), 0);
	worker_db *db = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(worker_db_open_sqlite(f.dir, &db, &err), 0, "%s", err.message);
	worker_db_lease_state st;
	cr_assert_eq(worker_db_set_environment(db, "run-x", 1, "env_0123456789abcdef0123456789abcdef",
	                                       "aGFuZGxl", util_now_ms(), &st, &err),
	             0, "%s", err.message);
	cr_assert_eq(st, WORKER_DB_LEASE_CURRENT);
	worker_db_free(db);

	fx_start(&f);
	reply r = lease(&f, NULL, "run-x", "dev", 2, 60);
	cr_expect_eq(r.status, 503, "%d %s", r.status, r.body);
	HAS(r, "worker.service_address");
	usleep(1500 * 1000); /* one sweep at least */
	cr_expect_eq(fx_stop(&f), 0);
	cr_assert_eq(worker_db_open_sqlite(f.dir, &db, &err), 0, "%s", err.message);
	worker_db_sandbox left[4];
	size_t n = 0;
	cr_assert_eq(worker_db_ended(db, util_now_ms(), left, 4, &n, &err), 0, "%s", err.message);
	cr_expect_eq(n, 1, "the record stays for a worker that can destroy it");
	worker_db_free(db);
	char log[160];
	snprintf(log, sizeof(log), "%s/log", f.dir);
	FILE *fp = fopen(log, "r");
	cr_assert(fp);
	static char text[262144];
	size_t len = fread(text, 1, sizeof(text) - 1, fp);
	text[len] = 0;
	fclose(fp);
	cr_expect(strstr(text, "\"event\":\"sandbox.destroy_failed\""), "%s", text);
	cr_expect(strstr(text, "\"why\":\"lease ended\""), "the sweeper tried: %s", text);
	cr_expect(strstr(text, "env_0123456789abcdef0123456789abcdef"), "%s", text);
	fx_done(&f);
}

/* One keep-alive connection: a second request 2.5 s after the first is
 * answered (the HTTP core's deadline for connections that have not
 * authenticated is 2 s; a request the worker authenticated lifts it). */
static int health_on(int fd)
{
	static const char q[] = "GET /v1/health HTTP/1.1\r\nHost: worker\r\n\r\n";
	if (send(fd, q, sizeof(q) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(q) - 1))
		return -1;
	char buf[4096];
	size_t got = 0;
	while (got < sizeof(buf) - 1) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 5000) != 1)
			return -1;
		ssize_t k = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (k <= 0)
			return -1;
		got += (size_t)k;
		buf[got] = 0;
		const char *end = strstr(buf, "\r\n\r\n");
		const char *cl = strstr(buf, "Content-Length: ");
		if (end && cl && got >= (size_t)(end + 4 - buf) + strtoul(cl + 16, NULL, 10))
			break;
	}
	int status = 0;
	return sscanf(buf, "HTTP/1.1 %d", &status) == 1 ? status : -1;
}

Test(worker_api, an_authenticated_keep_alive_connection_outlives_the_auth_deadline)
{
	worker_fx f;
	fx_init(&f, false, "tokens");
	int fd = wt_connect(f.sock);
	cr_assert(fd >= 0);
	static const char q[] =
		"GET /v1/health HTTP/1.1\r\nHost: worker\r\nAuthorization: Bearer " TOKEN_A "\r\n\r\n";
	cr_assert_eq(send(fd, q, sizeof(q) - 1, MSG_NOSIGNAL), (ssize_t)(sizeof(q) - 1));
	char buf[4096];
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	cr_assert_gt(k, 0);
	buf[k] = 0;
	cr_expect(strncmp(buf, "HTTP/1.1 200", 12) == 0, "%s", buf);
	usleep(2500 * 1000);
	/* The second request carries no token: it is the connection that
	 * must still be there (its answer is the 401). */
	cr_expect_eq(health_on(fd), 401, "the connection was cut at the auth deadline");
	close(fd);
	fx_done(&f);
}
