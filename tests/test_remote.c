/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The remote adapter beyond the contract suites (which run against it
 * unchanged in test_exec_contract.c and test_workspace_contract.c): what
 * only an adapter over a network has. An unreachable service, a refused
 * credential, a full or stopping service and an answer that does not
 * decode each become the documented class, with a message naming the
 * address and never the credential; output reaches the observer while the
 * command still runs; a cancel that fires before the service has started
 * the command still ends it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "airlock/fake.h"
#include "airlock/port/exec.h"
#include "airlock/remote.h"
#include "airlock/service.h"
#include "testlib.h"

#define CRED "remote-suite-credential-41c9e07d2a6b58f3"
#define UNAVAILABLE airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE)

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct served {
	char dir[64];
	char sock[96];
	char address[112];
	airlock_fake *fake;
	airlock_exec *core;
	airlock_service *svc;
} served;

static void serve(served *s, size_t max_sandboxes)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/airlock-remote-XXXXXX");
	cr_assert_not_null(mkdtemp(s->dir));
	snprintf(s->sock, sizeof(s->sock), "%s/api.sock", s->dir);
	snprintf(s->address, sizeof(s->address), "unix:%s", s->sock);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_new(&s->fake, &err), 0, "%s", err.message);
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.max_sandboxes = max_sandboxes;
	cr_assert_eq(airlock_exec_new(airlock_fake_ops(), s->fake, &cfg, &s->core, &err), 0, "%s",
	             err.message);
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.listen = s->address;
	sc.credential = CRED;
	sc.credential_len = strlen(CRED);
	sc.max_sandboxes = max_sandboxes;
	cr_assert_eq(airlock_service_new(&sc, s->core, &s->svc, &err), 0, "%s", err.message);
}

static void unserve(served *s)
{
	airlock_service_free(s->svc);
	airlock_exec_free(s->core);
	unlink(s->sock);
	rmdir(s->dir);
}

static airlock_exec *client(const char *address, const char *cred)
{
	airlock_remote_config rc = { .address = address, .credential = cred,
		                     .credential_len = strlen(cred), .connect_timeout_ms = 2000 };
	airlock_remote *rm = NULL;
	airlock_exec *e = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_remote_new(&rc, &rm, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_new(airlock_remote_ops(), rm, NULL, &e, &err), 0, "%s",
	             err.message);
	return e;
}

static void assert_no_credential(const airlock_error *err)
{
	cr_assert_null(strstr(err->message, CRED), "the credential is in a message: %s",
	               err->message);
	cr_assert_null(strstr(err->message, "Bearer"), "%s", err->message);
}

Test(remote, unreachable_service_is_execution_unavailable)
{
	char dir[] = "/tmp/airlock-remote-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char address[128];
	snprintf(address, sizeof(address), "unix:%s/nobody.sock", dir);
	airlock_exec *e = client(address, CRED);
	airlock_environment_spec spec;
	test_spec(&spec, "tenant-a", "run-1");
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), UNAVAILABLE, "%s", err.message);
	cr_assert_eq(err.cls, AIRLOCK_ERR_EXECUTION_UNAVAILABLE);
	cr_assert(strstr(err.message, address), "the message names the address: %s", err.message);
	cr_assert(strstr(err.message, "retry"), "%s", err.message);
	assert_no_credential(&err);
	airlock_exec_free(e);
	airlock_environment_spec_clear(&spec);
	rmdir(dir);
}

Test(remote, health_names_the_mechanism)
{
	served s;
	serve(&s, 3);
	airlock_remote_config rc = { .address = s.address, .credential = CRED,
		                     .credential_len = strlen(CRED) };
	airlock_remote *rm = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_remote_new(&rc, &rm, &err), 0, "%s", err.message);
	airlock_remote_status st;
	cr_assert_eq(airlock_remote_health(rm, &st, &err), 0, "%s", err.message);
	cr_assert_str_eq(st.mechanism, "fake");
	cr_assert_eq(st.live, 0);
	cr_assert_eq(st.max_sandboxes, 3);
	cr_assert_not(st.shutting_down);
	airlock_remote_ops()->free(rm);
	unserve(&s);
}

Test(remote, a_refused_credential_is_a_configuration_error)
{
	served s;
	serve(&s, 0);
	static const char wrong[] = "remote-suite-credential-00000000000000000";
	airlock_exec *e = client(s.address, wrong);
	airlock_environment_spec spec;
	test_spec(&spec, "tenant-a", "run-1");
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), airlock_errcode(AIRLOCK_ERR_CONFIG),
	             "%s", err.message);
	cr_assert(strstr(err.message, "refused the service credential"), "%s", err.message);
	cr_assert_null(strstr(err.message, wrong), "%s", err.message);
	cr_assert_eq(airlock_fake_live_count(s.fake), 0);
	airlock_exec_free(e);
	airlock_environment_spec_clear(&spec);
	unserve(&s);
}

Test(remote, bad_configuration_is_refused)
{
	airlock_remote *rm = NULL;
	airlock_error err = { 0 };
	airlock_remote_config rc = { .address = "unix:relative.sock", .credential = CRED,
		                     .credential_len = strlen(CRED) };
	cr_assert_eq(airlock_remote_new(&rc, &rm, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	rc.address = "example.org";
	cr_assert_eq(airlock_remote_new(&rc, &rm, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	rc.address = "example.org:443/path";
	cr_assert_eq(airlock_remote_new(&rc, &rm, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	/* A newline would end the Authorization header and start another. */
	static const char split[] = "token-with-a\nnewline-inside-0123456";
	rc.address = "unix:/nonexistent.sock";
	rc.credential = split;
	rc.credential_len = strlen(split);
	cr_assert_eq(airlock_remote_new(&rc, &rm, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	assert_no_credential(&err);
	cr_assert_null(strstr(err.message, "token-with"), "%s", err.message);
}

Test(remote, capacity_is_execution_unavailable_at_once)
{
	served s;
	serve(&s, 1);
	airlock_exec *e = client(s.address, CRED);
	airlock_environment_spec a, b;
	test_spec(&a, "tenant-a", "run-1");
	test_spec(&b, "tenant-a", "run-2");
	airlock_environment_handle ha = { 0 }, hb = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &a, &ha, &err), 0, "%s", err.message);
	int64_t t0 = mono_ms();
	cr_assert_eq(airlock_exec_provision(e, &b, &hb, &err), UNAVAILABLE, "%s", err.message);
	cr_assert(mono_ms() - t0 < 2000, "capacity waited");
	cr_assert(strstr(err.message, "capacity"), "%s", err.message);
	cr_assert_eq(airlock_fake_live_count(s.fake), 1);
	cr_assert_eq(airlock_exec_destroy(e, &ha, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_provision(e, &b, &hb, &err), 0, "after a destroy: %s", err.message);
	cr_assert_eq(airlock_exec_destroy(e, &hb, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_fake_live_count(s.fake), 0);
	airlock_exec_free(e);
	airlock_environment_handle_clear(&ha);
	airlock_environment_handle_clear(&hb);
	airlock_environment_spec_clear(&a);
	airlock_environment_spec_clear(&b);
	unserve(&s);
}

typedef struct first_bytes {
	int64_t t0, at;
	size_t n;
} first_bytes;

static void note_output(void *arg, airlock_output_stream st, const void *data, size_t len)
{
	(void)st;
	(void)data;
	first_bytes *f = arg;
	if (f->n == 0)
		f->at = mono_ms() - f->t0;
	f->n += len;
}

Test(remote, output_reaches_the_observer_while_the_command_runs)
{
	served s;
	serve(&s, 0);
	airlock_exec *e = client(s.address, CRED);
	airlock_environment_spec spec;
	test_spec(&spec, "tenant-a", "run-1");
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "%s", err.message);
	char *argv[] = { "sh", "-c", "printf early; sleep 2", NULL };
	cr_assert_eq(airlock_fake_script(s.fake, (const char *const *)argv,
	                                 &(airlock_fake_behaviour){ .stdout_data = "early",
	                                                            .stdout_len = 5,
	                                                            .runs_for_ms = 2000 },
	                                 &err),
	             0);
	first_bytes fb = { .t0 = mono_ms() };
	airlock_exec_call call = { .tenant_id = "tenant-a", .remaining_budget_ms = AIRLOCK_BUDGET_NONE,
		                   .on_output = note_output, .output_arg = &fb };
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r = { 0 };
	cr_assert_eq(airlock_exec_execute(e, &call, &h, &cmd, &r, &err), 0, "%s", err.message);
	int64_t total = mono_ms() - fb.t0;
	cr_assert(total >= 2000, "the command ran %lld ms", (long long)total);
	cr_assert_eq(fb.n, 5);
	cr_assert(fb.at < 1000, "the first bytes came after %lld ms of %lld", (long long)fb.at,
	          (long long)total);
	cr_assert_eq(r.stdout_len, 5);
	airlock_execution_result_clear(&r);
	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	airlock_exec_free(e);
	airlock_environment_handle_clear(&h);
	airlock_environment_spec_clear(&spec);
	unserve(&s);
}

Test(remote, a_cancel_fired_before_the_call_still_ends_the_command)
{
	served s;
	serve(&s, 0);
	airlock_exec *e = client(s.address, CRED);
	airlock_environment_spec spec;
	test_spec(&spec, "tenant-a", "run-1");
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "%s", err.message);
	char *argv[] = { "sleep", "30", NULL };
	cr_assert_eq(airlock_fake_script(s.fake, (const char *const *)argv,
	                                 &(airlock_fake_behaviour){ .runs_for_ms = 30000 }, &err),
	             0);
	airlock_cancel *k = NULL;
	cr_assert_eq(airlock_cancel_new(&k, &err), 0);
	/* Fired before the service has the command: its first cancel finds
	 * nothing running, and the adapter must try again. */
	airlock_cancel_fire(k);
	airlock_exec_call call = { .tenant_id = "tenant-a", .remaining_budget_ms = AIRLOCK_BUDGET_NONE,
		                   .cancel = k };
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r = { 0 };
	int64_t t0 = mono_ms();
	cr_assert_eq(airlock_exec_execute(e, &call, &h, &cmd, &r, &err), 0, "%s", err.message);
	cr_assert(mono_ms() - t0 < 10000, "the cancel did not end the command");
	cr_assert_eq(r.killed_by, AIRLOCK_KILL_CANCELLED);
	airlock_execution_result_clear(&r);
	airlock_cancel_free(k);
	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	airlock_exec_free(e);
	airlock_environment_handle_clear(&h);
	airlock_environment_spec_clear(&spec);
	unserve(&s);
}

typedef struct stopping {
	airlock_exec *e;
	airlock_environment_handle *h;
	airlock_execution_result r;
	int rc;
	airlock_error err;
} stopping;

static void *execute_sleep(void *arg)
{
	stopping *st = arg;
	char *argv[] = { "sleep", "30", NULL };
	airlock_exec_call call = { .tenant_id = "tenant-a", .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_execution_command cmd = test_command(argv);
	st->rc = airlock_exec_execute(st->e, &call, st->h, &cmd, &st->r, &st->err);
	return NULL;
}

Test(remote, a_stopping_service_ends_the_command_and_refuses_new_work)
{
	served s;
	serve(&s, 0);
	airlock_exec *e = client(s.address, CRED);
	airlock_environment_spec spec;
	test_spec(&spec, "tenant-a", "run-1");
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "%s", err.message);
	char *argv[] = { "sleep", "30", NULL };
	cr_assert_eq(airlock_fake_script(s.fake, (const char *const *)argv,
	                                 &(airlock_fake_behaviour){ .runs_for_ms = 30000 }, &err),
	             0);
	stopping st = { .e = e, .h = &h };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, execute_sleep, &st), 0);
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 400 * 1000000L };
	nanosleep(&ts, NULL);
	/* The service's SIGTERM: the command ends SERVICE_SHUTDOWN there and
	 * the result crosses to this side as it is. */
	airlock_service_shutdown(s.svc);
	pthread_join(t, NULL);
	cr_assert_eq(st.rc, 0, "%s", st.err.message);
	cr_assert_eq(st.r.killed_by, AIRLOCK_KILL_SERVICE_SHUTDOWN);
	airlock_execution_result_clear(&st.r);
	airlock_environment_spec spec2;
	test_spec(&spec2, "tenant-a", "run-2");
	airlock_environment_handle h2 = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec2, &h2, &err), UNAVAILABLE, "%s", err.message);
	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	airlock_exec_free(e);
	airlock_environment_handle_clear(&h);
	airlock_environment_spec_clear(&spec);
	airlock_environment_spec_clear(&spec2);
	unserve(&s);
}

/* ---- a server that is not the service ------------------------------------ */

typedef struct impostor {
	int lfd;
	const char *answer;
	pthread_t thread;
} impostor;

/* Answers every connection with the same bytes, whatever was asked. */
static void *impostor_run(void *arg)
{
	impostor *im = arg;
	for (;;) {
		int c = accept(im->lfd, NULL, NULL);
		if (c < 0)
			return NULL;
		char buf[65536];
		ssize_t n = read(c, buf, sizeof(buf));
		(void)n;
		ssize_t w = write(c, im->answer, strlen(im->answer));
		(void)w;
		close(c);
	}
}

static void provision_against(const char *answer, const char *want_in_message)
{
	char dir[] = "/tmp/airlock-remote-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/fake.sock", dir);
	impostor im = { .answer = answer };
	im.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(im.lfd >= 0);
	cr_assert_eq(bind(im.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(im.lfd, 8), 0);
	cr_assert_eq(pthread_create(&im.thread, NULL, impostor_run, &im), 0);
	char address[128];
	snprintf(address, sizeof(address), "unix:%s", sa.sun_path);
	airlock_exec *e = client(address, CRED);
	airlock_environment_spec spec;
	test_spec(&spec, "tenant-a", "run-1");
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), UNAVAILABLE, "%s", err.message);
	cr_assert(strstr(err.message, want_in_message), "%s", err.message);
	cr_assert(strstr(err.message, address), "%s", err.message);
	assert_no_credential(&err);
	airlock_exec_free(e);
	airlock_environment_spec_clear(&spec);
	shutdown(im.lfd, SHUT_RDWR);
	close(im.lfd);
	pthread_join(im.thread, NULL);
	unlink(sa.sun_path);
	rmdir(dir);
}

Test(remote, an_answer_that_does_not_decode_is_execution_unavailable)
{
	provision_against("HTTP/1.1 201 Created\r\nContent-Length: 8\r\nConnection: close\r\n\r\n"
	                  "not json",
	                  "does not decode");
	provision_against("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n"
	                  "Connection: close\r\n\r\noops!",
	                  "not the error shape");
	provision_against("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
	                  "Connection: close\r\n\r\n",
	                  "unavailable");
	provision_against("garbage that is not HTTP at all\r\n\r\n", "unreachable");
}
