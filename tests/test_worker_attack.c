/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's tool path under attack (docs/worker-api.md, "Sandboxes"):
 * `airlock serve` and airlock-worker as processes on Unix sockets, bearer
 * tokens for two tenants. Each test is what a hostile client, a second
 * worker sharing the database, or a vanished client must not be able to
 * do to the worker's capacity.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/util.h"

#include "worker_testlib.h"

#define SERVICE_TOKEN "svc-0123456789abcdef0123456789abcdef"
#define TOKEN_A "tokA-0123456789abcdef"
#define TOKEN_B "tokB-0123456789abcdef"

typedef struct stack {
	char dir[64];
	char svc_sock[128];
	char sock[128];
	char sock2[128];
	char config[128];
	char config2[128];
	char log[128];
	pid_t svc, worker, worker2;
} stack;

static void write_config(stack *s, const char *path, const char *sock, const char *mechanism,
                         const char *image, int max_sandboxes)
{
	char text[4096];
	snprintf(text, sizeof(text),
	         "sandbox:\n  mechanism: %s\n%s"
	         "service:\n  listen: unix:%s\n  credential_file: %s/svc.token\n"
	         "  max_sandboxes: %d\n"
	         "worker:\n  listen: unix:%s\n  state_dir: %s\n  auth_mode: tokens\n"
	         "  tokens_file: %s/tokens\n"
	         "  service_address: unix:%s\n  service_credential_file: %s/svc.token\n",
	         mechanism, image, s->svc_sock, s->dir, max_sandboxes, sock, s->dir, s->dir,
	         s->svc_sock, s->dir);
	wt_write_file(path, text, 0600);
}

/* second: a second worker on the same state directory (one SQLite
 * database, as two workers share one PostgreSQL database). */
static void stack_up(stack *s, const char *mechanism, int max_sandboxes, bool second)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/airlock-wattack-XXXXXX");
	cr_assert(mkdtemp(s->dir));
	snprintf(s->svc_sock, sizeof(s->svc_sock), "%s/svc.sock", s->dir);
	snprintf(s->sock, sizeof(s->sock), "%s/w.sock", s->dir);
	snprintf(s->sock2, sizeof(s->sock2), "%s/w2.sock", s->dir);
	snprintf(s->config, sizeof(s->config), "%s/airlock.yaml", s->dir);
	snprintf(s->config2, sizeof(s->config2), "%s/airlock2.yaml", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/log", s->dir);
	char path[160], image[160] = "";
	snprintf(path, sizeof(path), "%s/svc.token", s->dir);
	wt_write_file(path, SERVICE_TOKEN "\n", 0600);
	snprintf(path, sizeof(path), "%s/tokens", s->dir);
	wt_write_file(path, TOKEN_A " tenant-a\n" TOKEN_B " tenant-b\n", 0600);
	if (strcmp(mechanism, "native") == 0)
		wt_image_settings(s->dir, image, sizeof(image));
	write_config(s, s->config, s->sock, mechanism, image, max_sandboxes);
	char *argv[] = { "airlock", "serve", "--config", s->config, NULL };
	s->svc = wt_start(getenv("AIRLOCK_TEST_AIRLOCK"), argv, s->log, s->svc_sock);
	char *wargv[] = { "airlock-worker", "--config", s->config, NULL };
	s->worker = wt_start(getenv("AIRLOCK_TEST_WORKER"), wargv, s->log, s->sock);
	if (second) {
		write_config(s, s->config2, s->sock2, mechanism, image, max_sandboxes);
		char *w2argv[] = { "airlock-worker", "--config", s->config2, NULL };
		s->worker2 = wt_start(getenv("AIRLOCK_TEST_WORKER"), w2argv, s->log, s->sock2);
	}
}

static void stack_down(stack *s)
{
	if (s->worker2 > 0)
		cr_expect_eq(wt_stop(s->worker2, SIGTERM), 0, "the second worker stops cleanly");
	if (s->worker > 0)
		cr_expect_eq(wt_stop(s->worker, SIGTERM), 0, "the worker stops cleanly: %s",
		             wt_read_log(s->log));
	if (s->svc > 0)
		cr_expect_eq(wt_stop(s->svc, SIGTERM), 0, "the service stops cleanly");
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", s->dir);
	cr_expect_eq(system(cmd), 0);
}

static wt_reply *req(const char *sock, const char *method, const char *target, const char *token,
                     const char *body)
{
	static wt_reply r;
	wt_request(sock, method, target, token, body, 60000, &r);
	return &r;
}

static void claim(const char *sock, const char *token, const char *tenant, const char *run,
                  long epoch)
{
	char target[160], body[200];
	snprintf(target, sizeof(target), "/v1/runs/%s/lease", run);
	snprintf(body, sizeof(body), "{\"tenant_id\":\"%s\",\"epoch\":%ld,\"ttl_seconds\":600}",
	         tenant, epoch);
	wt_reply *r = req(sock, "PUT", target, token, body);
	cr_assert_eq(r->status, 200, "%s", r->body);
}

static wt_reply *call(const char *sock, const char *token, const char *run, long epoch,
                      const char *command)
{
	char target[160], body[512];
	snprintf(target, sizeof(target), "/v1/runs/%s/tools/sandbox.run_command", run);
	snprintf(body, sizeof(body), "{\"epoch\":%ld,\"arguments\":{\"command\":%s}}", epoch,
	         command);
	return req(sock, "POST", target, token, body);
}

static long live(stack *s)
{
	return wt_service_live(s->svc_sock, SERVICE_TOKEN);
}

/* A sandbox worker 1 made and worker 2 ended (a release sent to the other
 * worker, as a platform behind a load balancer does; a fence, the other's
 * sweeper, and a call's "not this worker's" path end it the same way, by
 * its record) must not stay counted in worker 1: once the service holds
 * none, worker 1 provisions again. */
Test(worker_attack, a_sandbox_another_worker_ended_does_not_stay_counted_in_the_one_that_made_it)
{
	stack s;
	stack_up(&s, "fake", 3, true);
	for (int i = 0; i < 3; i++) {
		char run[32], target[80];
		snprintf(run, sizeof(run), "leak-%d", i);
		claim(s.sock, TOKEN_A, "tenant-a", run, 1);
		wt_reply *r = call(s.sock, TOKEN_A, run, 1, "[\"true\"]");
		cr_assert_eq(r->status, 200, "worker 1's call %d: %s", i, r->body);
		snprintf(target, sizeof(target), "/v1/runs/%s/lease?epoch=1", run);
		r = req(s.sock2, "DELETE", target, TOKEN_A, NULL);
		cr_assert_eq(r->status, 204, "worker 2's release %d: %s", i, r->body);
	}
	cr_expect_eq(live(&s), 0, "worker 2 destroyed every one at the service");
	claim(s.sock, TOKEN_A, "tenant-a", "fresh", 1);
	wt_reply *r = call(s.sock, TOKEN_A, "fresh", 1, "[\"true\"]");
	cr_expect_eq(r->status, 200,
	             "worker 1 provisions while the service holds no sandbox (3 it made were "
	             "destroyed by worker 2): %d %s",
	             r->status, r->body);
	stack_down(&s);
}

/* One tenant's leases and first calls must not take every sandbox the
 * service has: another tenant's first call still gets one. */
Test(worker_attack, one_tenant_cannot_take_every_sandbox_from_another)
{
	stack s;
	stack_up(&s, "fake", 4, false);
	for (int i = 0; i < 4; i++) {
		char run[32];
		snprintf(run, sizeof(run), "hog-%d", i);
		claim(s.sock, TOKEN_A, "tenant-a", run, 1);
		call(s.sock, TOKEN_A, run, 1, "[\"true\"]");
	}
	claim(s.sock, TOKEN_B, "tenant-b", "victim", 1);
	wt_reply *r = call(s.sock, TOKEN_B, "victim", 1, "[\"true\"]");
	cr_expect_eq(r->status, 200,
	             "tenant-b's first call after tenant-a's %ld sandboxes: %d %s", live(&s),
	             r->status, r->body);
	stack_down(&s);
}

/* A client that goes away during a long command (a platform that timed
 * out, crashed or retried) ends that command, as the service does for its
 * own clients: the run's next call is not refused for the rest of the
 * abandoned command's timeout. */
Test(worker_attack, native_a_vanished_clients_command_ends_and_frees_the_run)
{
	stack s;
	stack_up(&s, "native", 64, false);
	claim(s.sock, TOKEN_A, "tenant-a", "gone", 1);
	int fd = wt_connect(s.sock);
	cr_assert_geq(fd, 0);
	static const char body[] = "{\"epoch\":1,\"arguments\":{\"command\":[\"sleep\",\"60\"]}}";
	char head[512];
	int n = snprintf(head, sizeof(head),
	                 "POST /v1/runs/gone/tools/sandbox.run_command HTTP/1.1\r\nHost: w\r\n"
	                 "Authorization: Bearer " TOKEN_A "\r\nContent-Type: application/json\r\n"
	                 "Content-Length: %zu\r\n\r\n%s",
	                 sizeof(body) - 1, body);
	cr_assert_eq(write(fd, head, (size_t)n), n);
	sleep(3); /* provisioned and running */
	close(fd);
	int64_t t0 = util_monotonic_ms();
	wt_reply *r = NULL;
	do {
		usleep(250 * 1000);
		r = call(s.sock, TOKEN_A, "gone", 1, "[\"true\"]");
	} while (r->status == 409 && util_monotonic_ms() - t0 < 15000);
	cr_expect_eq(r->status, 200,
	             "the run's next call within 15 s of its client going away: %d %s", r->status,
	             r->body);
	stack_down(&s);
}
