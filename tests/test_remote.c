/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The remote adapter beyond the contract suites (which run against it
 * unchanged in test_exec_contract.c and test_workspace_contract.c): what
 * only an adapter over a network has. An unreachable service, a refused
 * credential, a full or stopping service and an answer that does not
 * decode each become the documented class, with a message naming the
 * address and never the credential; output reaches the observer while the
 * command still runs, and after a dropped stretch exactly the result's
 * bytes; a stream that breaks the protocol is refused; a cancel that fires
 * before the service has started the command still ends it; TLS over TCP
 * verifies the service's certificate.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "airlock/fake.h"
#include "airlock/json.h"
#include "airlock/port/exec.h"
#include "airlock/remote.h"
#include "airlock/service.h"
#include "airlock/settings.h"
#include "testlib.h"
#include "remote/remote_internal.h"
#include "util/fault.h"

#define CRED "remote-suite-credential-41c9e07d2a6b58f3"
#define UNAVAILABLE airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

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

static void serve_listing(served *s, size_t max_sandboxes, int64_t files_changed_max)
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
	if (files_changed_max)
		cfg.files_changed_max = files_changed_max;
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

static void serve(served *s, size_t max_sandboxes)
{
	serve_listing(s, max_sandboxes, 0);
}

static void unserve(served *s)
{
	airlock_service_free(s->svc);
	airlock_exec_free(s->core);
	unlink(s->sock);
	rmdir(s->dir);
}

static airlock_exec *client_listing(const char *address, const char *cred,
                                    int64_t files_changed_max)
{
	airlock_remote_config rc = { .address = address, .credential = cred,
		                     .credential_len = strlen(cred), .connect_timeout_ms = 2000 };
	airlock_remote *rm = NULL;
	airlock_exec *e = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_remote_new(&rc, &rm, &err), 0, "%s", err.message);
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	if (files_changed_max)
		cfg.files_changed_max = files_changed_max;
	cr_assert_eq(airlock_exec_new(airlock_remote_ops(), rm, files_changed_max ? &cfg : NULL, &e,
	                              &err),
	             0, "%s", err.message);
	return e;
}

static airlock_exec *client(const char *address, const char *cred)
{
	return client_listing(address, cred, 0);
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
	/* The socket's own reason, once; nothing of the Host header curl
	 * was given. */
	cr_assert(strstr(err.message, strerror(ENOENT)), "%s", err.message);
	cr_assert_null(strstr(err.message, "port 80"), "%s", err.message);
	cr_assert_null(strstr(strstr(err.message, strerror(ENOENT)) + 1, strerror(ENOENT)), "%s",
	               err.message);
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
	/* A token pasted into the address is refused and not echoed. */
	rc.address = "secret-token-0123456789@example.org:443";
	cr_assert_eq(airlock_remote_new(&rc, &rm, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_assert_null(strstr(err.message, "secret-token"), "%s", err.message);
	cr_assert(strstr(err.message, "'@'"), "%s", err.message);
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
	/* The whole path, each layer once: the client's verb and adapter, the
	 * service by its address, then the service's own words. */
	char head[256];
	snprintf(head, sizeof(head), "provision (remote): the execution service at %s: ",
	         s.address);
	cr_assert_eq(strncmp(err.message, head, strlen(head)), 0, "%s", err.message);
	cr_assert_null(strstr(err.message + 1, "provision ("), "%s", err.message);
	/* A system error crosses with its errno and its reason said once. */
	airlock_exec_call call = { .tenant_id = ha.tenant_id,
		                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_workspace *ws = NULL;
	cr_assert_eq(airlock_exec_workspace(e, &call, &ha, &ws, &err), 0, "%s", err.message);
	unsigned char *data = NULL;
	size_t len = 0;
	cr_assert_eq(airlock_workspace_read(ws, "missing", 64, &data, &len, &err), -ENOENT, "%s",
	             err.message);
	airlock_workspace_release(ws);
	cr_assert_eq(err.errnum, ENOENT);
	snprintf(head, sizeof(head), "the execution service at %s: ", s.address);
	cr_assert(strstr(err.message, head), "%s", err.message);
	const char *why = strstr(err.message, strerror(ENOENT));
	cr_assert(why && !strstr(why + 1, strerror(ENOENT)), "%s", err.message);
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

/* The end of a listing test: its file operations, its sandbox, its client
 * and its service go. */
static void listing_test_end(airlock_fake_file_op *ops, size_t n, airlock_exec *e,
                             airlock_environment_handle *h, airlock_environment_spec *spec,
                             served *s)
{
	for (size_t i = 0; i < n; i++)
		free((void *)(uintptr_t)ops[i].path);
	free(ops);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_destroy(e, h, &err), 0, "%s", err.message);
	airlock_exec_free(e);
	airlock_environment_handle_clear(h);
	airlock_environment_spec_clear(spec);
	unserve(s);
}

/* A result within its caps reaches the client whatever files_changed_max
 * allows (caps.h, AIRLOCK_FILES_CHANGED_JSON_MAX): at the spec's ceiling,
 * 10,000, a command that makes 3,500 files of 4,015-byte paths of bytes
 * that are not text would make 70 MB of listing, past the 64 MiB the
 * client decodes; the listing is cut by bytes instead, to a sorted prefix,
 * and files_changed_truncated says so. */
#define DEEP_DIRS 15
#define DEEP_NAME 250
#define DEEP_FILES 3500

static void deep_name(char *out, size_t idx)
{
	/* Bytes 0x01..0x1f and 0xff, each five bytes of the text form; the last
	 * three say the index in base 31, so names sort by index. */
	for (size_t i = 0; i < DEEP_NAME - 3; i++)
		out[i] = (char)(i % 3 == 2 ? 0xff : 1 + (int)(i % 31));
	out[DEEP_NAME - 3] = (char)(1 + idx / (31 * 31));
	out[DEEP_NAME - 2] = (char)(1 + idx / 31 % 31);
	out[DEEP_NAME - 1] = (char)(1 + idx % 31);
	out[DEEP_NAME] = 0;
}

Test(remote, a_listing_past_the_decoders_cap_is_cut_by_bytes_and_still_arrives, .timeout = 300)
{
	served s;
	serve_listing(&s, 0, 10000);
	airlock_exec *e = client_listing(s.address, CRED, 10000);
	airlock_environment_spec spec;
	test_spec(&spec, "tenant-a", "run-1");
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "%s", err.message);

	/* DEEP_DIRS directories of DEEP_NAME bytes, then the files in the last. */
	char dir[DEEP_DIRS * (DEEP_NAME + 1) + 1];
	size_t d = 0;
	for (size_t k = 0; k < DEEP_DIRS; k++) {
		deep_name(dir + d, 30000 + k);
		d += DEEP_NAME;
		dir[d++] = '/';
	}
	dir[d] = 0;
	airlock_fake_file_op *ops = calloc(DEEP_FILES, sizeof(*ops));
	cr_assert_not_null(ops);
	for (size_t i = 0; i < DEEP_FILES; i++) {
		char *p = malloc(d + DEEP_NAME + 1);
		cr_assert_not_null(p);
		memcpy(p, dir, d);
		deep_name(p + d, i);
		ops[i] = (airlock_fake_file_op){ .path = p, .data = "x", .len = 1 };
	}
	char *argv[] = { "make-deep-files", NULL };
	cr_assert_eq(airlock_fake_script(s.fake, (const char *const *)argv,
	                                 &(airlock_fake_behaviour){ .file_ops = ops,
	                                                            .n_file_ops = DEEP_FILES },
	                                 &err),
	             0, "%s", err.message);
	airlock_exec_call call = { .tenant_id = "tenant-a", .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r = { 0 };
	cr_assert_eq(airlock_exec_execute(e, &call, &h, &cmd, &r, &err), 0, "%s", err.message);
	cr_assert_eq(r.exit_code, 0);
	cr_assert(r.files_changed_truncated, "a listing cut by bytes must say so");
	size_t charge = AIRLOCK_FC_JSON_ENTRY_OVERHEAD + AIRLOCK_FC_JSON_PATH_FACTOR * (d + DEEP_NAME);
	cr_assert_eq(r.n_files_changed, AIRLOCK_FILES_CHANGED_JSON_MAX / charge,
	             "%zu entries kept, %zu fit", r.n_files_changed,
	             AIRLOCK_FILES_CHANGED_JSON_MAX / charge);
	for (size_t i = 0; i < r.n_files_changed; i++) {
		cr_assert_eq(r.files_changed[i].change, AIRLOCK_CHANGE_CREATED);
		cr_assert_str_eq(r.files_changed[i].path, ops[i].path, "entry %zu is not the %zuth name",
		                 i, i);
	}
	airlock_execution_result_clear(&r);
	listing_test_end(ops, DEEP_FILES, e, &h, &spec, &s);
}

/* The service's listing cap is its own setting, and the client's core has
 * another (both files_changed_max): a service allowed 2,000 entries and a
 * client at the default 1,000 refused every longer listing as an adapter
 * bug (ExecutionUnavailable), and the command's result was lost. The client
 * gets its own cap's prefix, marked truncated; the bound both accept is
 * AIRLOCK_FILES_CHANGED_MAX. */
Test(remote, a_service_listing_past_the_clients_cap_arrives_cut_to_it, .timeout = 120)
{
	served s;
	serve_listing(&s, 0, 2000);
	airlock_exec *e = client(s.address, CRED);
	airlock_environment_spec spec;
	test_spec(&spec, "tenant-a", "run-1");
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "%s", err.message);
	enum { N = 1500 };
	airlock_fake_file_op *ops = calloc(N, sizeof(*ops));
	cr_assert_not_null(ops);
	for (size_t i = 0; i < N; i++) {
		char *p = malloc(16);
		cr_assert_not_null(p);
		snprintf(p, 16, "f%05zu", i);
		ops[i] = (airlock_fake_file_op){ .path = p, .data = "x", .len = 1 };
	}
	char *argv[] = { "make-files", NULL };
	cr_assert_eq(airlock_fake_script(s.fake, (const char *const *)argv,
	                                 &(airlock_fake_behaviour){ .file_ops = ops, .n_file_ops = N },
	                                 &err),
	             0, "%s", err.message);
	airlock_exec_call call = { .tenant_id = "tenant-a", .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r = { 0 };
	cr_assert_eq(airlock_exec_execute(e, &call, &h, &cmd, &r, &err), 0, "%s", err.message);
	cr_expect_eq(r.n_files_changed, 1000);
	cr_expect(r.files_changed_truncated);
	cr_expect_str_eq(r.files_changed[999].path, "f00999", "the sorted prefix");
	airlock_execution_result_clear(&r);
	listing_test_end(ops, N, e, &h, &spec, &s);
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

static void provision_against_rc(const char *answer, int want_rc, const char *want_in_message)
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
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), want_rc, "%s", err.message);
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

static void provision_against(const char *answer, const char *want_in_message)
{
	provision_against_rc(answer, UNAVAILABLE, want_in_message);
}

Test(remote, an_escape_is_never_made_retriable_by_its_status)
{
	/* A proxy's or a stopping server's 503 around an escape is still the
	 * alert; any other class under it is the retriable one. */
	provision_against_rc("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
	                     "Content-Length: 57\r\nConnection: close\r\n\r\n"
	                     "{\"error\":\"SandboxEscapeSuspected\",\"message\":\"mount seen\"}",
	                     airlock_errcode(AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED), "mount seen");
	provision_against_rc("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
	                     "Content-Length: 50\r\nConnection: close\r\n\r\n"
	                     "{\"error\":\"ExecutionRejected\",\"message\":\"over cap\"}",
	                     UNAVAILABLE, "over cap");
}

Test(remote, a_request_too_large_for_a_server_in_front_is_not_retriable)
{
	provision_against_rc("HTTP/1.1 413 Payload Too Large\r\nContent-Length: 4\r\n"
	                     "Connection: close\r\n\r\nbig!",
	                     airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "too large (HTTP 413)");
	provision_against_rc("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
	                     "Connection: close\r\n\r\n",
	                     airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "too large (HTTP 431)");
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

/* ---- TCP with TLS ---------------------------------------------------------- */

Test(remote, tls_over_tcp_verifies_the_service)
{
	char dir[] = "/tmp/airlock-remote-tls-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char cmd[1024], cert[128], key[128];
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	snprintf(cmd, sizeof(cmd),
	         "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s -days 1 "
	         "-subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
	         key, cert);
	if (system(cmd) != 0)
		cr_skip_test("openssl cannot make a test certificate here");
	airlock_error err = { 0 };
	airlock_fake *fake = NULL;
	airlock_exec *core = NULL;
	cr_assert_eq(airlock_fake_new(&fake, &err), 0);
	cr_assert_eq(airlock_exec_new(airlock_fake_ops(), fake, NULL, &core, &err), 0);
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.listen = "127.0.0.1:0";
	sc.credential = CRED;
	sc.credential_len = strlen(CRED);
	sc.tls_cert_file = cert;
	sc.tls_key_file = key;
	airlock_service *svc = NULL;
	/* A private key others can read is refused, naming it. */
	cr_assert_eq(chmod(key, 0644), 0);
	cr_assert_lt(airlock_service_new(&sc, core, &svc, &err), 0);
	cr_assert(strstr(err.message, "TLS key") && strstr(err.message, "0644"), "%s", err.message);
	cr_assert_eq(chmod(key, 0600), 0);
	cr_assert_eq(airlock_service_new(&sc, core, &svc, &err), 0, "%s", err.message);
	const char *address = airlock_service_address(svc);

	/* Chained to the test's certificate: the whole port works. */
	airlock_remote_config rc = { .address = address, .credential = CRED,
		                     .credential_len = strlen(CRED), .tls_ca_file = cert };
	airlock_remote *rm = NULL;
	airlock_exec *e = NULL;
	cr_assert_eq(airlock_remote_new(&rc, &rm, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_new(airlock_remote_ops(), rm, NULL, &e, &err), 0, "%s", err.message);
	airlock_environment_spec spec;
	test_spec(&spec, "tenant-a", "run-1");
	airlock_environment_handle h = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "%s", err.message);
	char *argv[] = { "true", NULL };
	airlock_execution_command c = test_command(argv);
	airlock_exec_call call = { .tenant_id = "tenant-a", .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_execution_result r = { 0 };
	cr_assert_eq(airlock_exec_execute(e, &call, &h, &c, &r, &err), 0, "%s", err.message);
	cr_assert(r.has_exit_code);
	airlock_execution_result_clear(&r);
	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	airlock_exec_free(e);
	airlock_environment_handle_clear(&h);

	/* Without that CA the certificate is not trusted: nothing is sent. */
	airlock_remote_config untrusted = { .address = address, .credential = CRED,
		                            .credential_len = strlen(CRED) };
	cr_assert_eq(airlock_remote_new(&untrusted, &rm, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_new(airlock_remote_ops(), rm, NULL, &e, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), UNAVAILABLE, "%s", err.message);
	cr_assert(strstr(err.message, address), "%s", err.message);
	assert_no_credential(&err);
	cr_assert_eq(airlock_fake_live_count(fake), 0);
	airlock_exec_free(e);

	airlock_environment_spec_clear(&spec);
	airlock_service_free(svc);
	airlock_exec_free(core);
	unlink(cert);
	unlink(key);
	rmdir(dir);
}

/* ---- the stream, line by line ------------------------------------------------ */

/* A scripted service: provision answers the handle of the id asked for;
 * execute answers the NDJSON given; destroy 204. Every answer closes its
 * connection. */
typedef struct scripted {
	int lfd;
	const char *stream; /* the execute's body, NDJSON */
	pthread_t thread;
} scripted;

static ssize_t read_request(int c, char *buf, size_t size)
{
	size_t n = 0;
	char *end = NULL;
	while (n + 1 < size && !(end = strstr(buf, "\r\n\r\n"))) {
		ssize_t k = read(c, buf + n, size - 1 - n);
		if (k <= 0)
			return -1;
		n += (size_t)k;
		buf[n] = 0;
	}
	if (!end)
		return -1;
	const char *cl = strcasestr(buf, "Content-Length:");
	size_t want = (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
	while (n < want && n + 1 < size) {
		ssize_t k = read(c, buf + n, size - 1 - n);
		if (k <= 0)
			return -1;
		n += (size_t)k;
		buf[n] = 0;
	}
	return (ssize_t)n;
}

static void reply(int c, const char *status, const char *type, const char *body)
{
	char head[256];
	snprintf(head, sizeof(head),
	         "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
	         status, type, strlen(body));
	cr_assert_eq(write(c, head, strlen(head)), (ssize_t)strlen(head));
	if (*body)
		cr_assert_eq(write(c, body, strlen(body)), (ssize_t)strlen(body));
}

static void *scripted_run(void *arg)
{
	scripted *sc = arg;
	static char buf[1 << 16];
	for (;;) {
		int c = accept(sc->lfd, NULL, NULL);
		if (c < 0)
			return NULL;
		memset(buf, 0, sizeof(buf));
		if (read_request(c, buf, sizeof(buf)) < 0) {
			close(c);
			continue;
		}
		if (strncmp(buf, "POST /v1/sandboxes ", 19) == 0) {
			const char *id = strstr(buf, "\"environment_id\":\"");
			airlock_environment_handle h = { .tenant_id = (char *)"tenant-a",
				                         .run_id = (char *)"run-1", .lease_epoch = 1,
				                         .created_at_ms = 1000, .expires_at_ms = 2000000000000 };
			cr_assert_not_null(id);
			memcpy(h.environment_id, id + 18, 36);
			h.environment_id[36] = 0;
			char *hj = airlock_environment_handle_to_json(&h, NULL);
			char *body = NULL;
			cr_assert(asprintf(&body, "{\"handle\":%s}", hj) > 0);
			reply(c, "201 Created", "application/json", body);
			free(body);
			free(hj);
		} else if (strncmp(buf, "POST ", 5) == 0 && strstr(buf, "/execute ")) {
			reply(c, "200 OK", "application/x-ndjson", sc->stream);
		} else if (strncmp(buf, "DELETE ", 7) == 0) {
			reply(c, "204 No Content", "application/json", "");
		} else {
			reply(c, "404 Not Found", "application/json",
			      "{\"error\":\"ExecutionRejected\",\"message\":\"no such verb here\"}");
		}
		close(c);
	}
}

typedef struct seen {
	char out[64];
	size_t n;
	int calls;
} seen;

static void collect(void *arg, airlock_output_stream st, const void *data, size_t len)
{
	seen *s = arg;
	if (st == AIRLOCK_OUTPUT_STDOUT && s->n + len < sizeof(s->out)) {
		memcpy(s->out + s->n, data, len);
		s->n += len;
	}
	s->calls++;
}

/* Run one execute against a service whose stream is `stream`; returns the
 * execute's code, the observer's bytes in *s. */
static int execute_against(const char *stream, seen *s, airlock_execution_result *r,
                           airlock_error *err)
{
	char dir[] = "/tmp/airlock-remote-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/s.sock", dir);
	scripted sc = { .stream = stream };
	sc.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(bind(sc.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(sc.lfd, 8), 0);
	cr_assert_eq(pthread_create(&sc.thread, NULL, scripted_run, &sc), 0);
	char address[128];
	snprintf(address, sizeof(address), "unix:%s", sa.sun_path);
	airlock_exec *e = client(address, CRED);
	airlock_environment_spec spec;
	test_spec(&spec, "tenant-a", "run-1");
	airlock_environment_handle h = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, err), 0, "%s", err->message);
	char *argv[] = { "true", NULL };
	airlock_execution_command cmd = test_command(argv);
	airlock_exec_call call = { .tenant_id = "tenant-a", .remaining_budget_ms = AIRLOCK_BUDGET_NONE,
		                   .on_output = collect, .output_arg = s };
	memset(r, 0, sizeof(*r));
	int rc = airlock_exec_execute(e, &call, &h, &cmd, r, err);
	airlock_error derr = { 0 };
	cr_assert_eq(airlock_exec_destroy(e, &h, &derr), 0, "%s", derr.message);
	airlock_exec_free(e);
	airlock_environment_handle_clear(&h);
	airlock_environment_spec_clear(&spec);
	shutdown(sc.lfd, SHUT_RDWR);
	close(sc.lfd);
	pthread_join(sc.thread, NULL);
	unlink(sa.sun_path);
	rmdir(dir);
	return rc;
}

static char *result_line(const char *out)
{
	airlock_execution_result r = { .has_exit_code = true, .stdout_data = (unsigned char *)out,
		                       .stdout_len = strlen(out), .stderr_data = (unsigned char *)"",
		                       .duration_ms = 1 };
	char *rj = airlock_execution_result_to_json(&r, NULL);
	char *line = NULL;
	cr_assert(asprintf(&line, "{\"event\":\"result\",\"result\":%s}\n", rj) > 0);
	free(rj);
	return line;
}

Test(remote, after_a_dropped_stretch_the_observer_gets_the_rest_from_the_result)
{
	/* "YWI=" is "ab", "enp6" is "zzz": after the drop, later events are
	 * not given (their place in the stream is unknown); the result's
	 * bytes from where the observer stopped are. */
	char *res = result_line("abcdefg");
	char *stream = NULL;
	cr_assert(asprintf(&stream,
	                   "{\"event\":\"output\",\"stream\":\"stdout\",\"data\":\"YWI=\"}\n"
	                   "{\"event\":\"dropped\",\"stream\":\"stdout\",\"bytes\":2}\n"
	                   "{\"event\":\"output\",\"stream\":\"stdout\",\"data\":\"enp6\"}\n%s",
	                   res) > 0);
	seen s = { 0 };
	airlock_execution_result r;
	airlock_error err = { 0 };
	cr_assert_eq(execute_against(stream, &s, &r, &err), 0, "%s", err.message);
	cr_assert_eq(s.n, 7);
	cr_assert_eq(memcmp(s.out, "abcdefg", 7), 0, "observed %.*s", (int)s.n, s.out);
	cr_assert_eq(r.stdout_len, 7);
	airlock_execution_result_clear(&r);
	free(stream);
	free(res);
}

Test(remote, a_stream_that_breaks_the_protocol_is_execution_unavailable)
{
	char *res = result_line("x");
	const char *bad[] = {
		"{\"event\":\"started\",\"environment_id\":\"env_00000000000000000000000000000000\"}\n",
		"{\"event\":\"output\",\"stream\":\"stdin\",\"data\":\"eA==\"}\n",
		"{\"event\":\"output\",\"stream\":\"stdout\",\"data\":\"not base64!\"}\n",
		"{\"event\":\"surprise\"}\n",
		"not json\n",
		"", /* the stream ends before a result */
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char *stream = NULL;
		cr_assert(asprintf(&stream, "%s%s", bad[i], i + 1 < ARRAY_SIZE(bad) ? res : "") >= 0);
		seen s = { 0 };
		airlock_execution_result r;
		airlock_error err = { 0 };
		cr_assert_eq(execute_against(stream, &s, &r, &err), UNAVAILABLE, "case %zu: %s", i,
		             err.message);
		assert_no_credential(&err);
		free(stream);
	}
	/* A line after the result. */
	char *stream = NULL;
	cr_assert(asprintf(&stream, "%s%s", res, res) > 0);
	seen s = { 0 };
	airlock_execution_result r;
	airlock_error err = { 0 };
	cr_assert_eq(execute_against(stream, &s, &r, &err), UNAVAILABLE, "%s", err.message);
	cr_assert(strstr(err.message, "after the final event"), "%s", err.message);
	free(stream);
	/* An error line crosses as its class. */
	seen s2 = { 0 };
	cr_assert_eq(execute_against("{\"event\":\"error\",\"error\":{\"error\":\"ExecutionRejected\","
	                             "\"message\":\"gone\"}}\n",
	                             &s2, &r, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "%s", err.message);
	free(res);
}

#ifdef AIRLOCK_FAULT_INJECTION
/* ---- the remote adapter's calls failed in turn (util/fault.h) ------------------- */

static long count_fds(void)
{
	long n = 0;
	DIR *d = opendir("/proc/self/fd");
	cr_assert_not_null(d);
	for (struct dirent *ent; (ent = readdir(d));)
		n += ent->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

/* The descriptors back at want, given the in-process service a moment to
 * close its end of a connection the client closed (bounded). */
/* The count once it is want, or (want -1: the baseline) once it held
 * still for 100 ms; at most 2 s either way. */
static long fds_settled(long want)
{
	long n = count_fds();
	int still = 0;
	for (int i = 0; i < 40 && n != want && (want >= 0 || still < 2); i++) {
		usleep(50 * 1000);
		long m = count_fds();
		still = m == n ? still + 1 : 0;
		n = m;
	}
	return n;
}

/* Each check of a provision, then of an execute, through the remote
 * adapter against an in-process service, failed in turn: the request
 * (remote.request), the answer (remote.answer: the service did what was
 * asked, its answer is lost), and the service's own steps (the provision's
 * answer, the execute job's record, its stream's first line, its thread,
 * its result line). The call fails naming the point, so the service
 * answered with an error; no sandbox is left on the service (a provision
 * whose answer was lost destroys what the service made), no descriptor in
 * this process (and, under ASan, no job record); after a failed execute
 * the sandbox runs the next command. */
Test(remote, each_check_of_a_call_fails_cleanly_and_leaves_nothing, .timeout = 120)
{
	served s;
	serve(&s, 4);
	airlock_exec *e = client(s.address, CRED);
	airlock_environment_spec spec;
	test_spec(&spec, "tenant-a", "run-1");
	airlock_error err = { 0 };
	airlock_environment_handle h = { 0 };
	/* A warm-up cycle: what the service and the client open once is in the
	 * baseline. */
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	airlock_environment_handle_clear(&h);
	long fds0 = fds_settled(-1);
	unsigned nth;
	for (nth = 1;; nth++) {
		memset(&err, 0, sizeof(err));
		util_fault_arm(nth);
		int r = airlock_exec_provision(e, &spec, &h, &err);
		unsigned hits = util_fault_hits();
		const char *fired = util_fault_fired();
		util_fault_arm(0);
		if (hits < nth) {
			cr_assert_eq(r, 0, "no fault at check %u, yet: %s", nth, err.message);
			break;
		}
		cr_assert_lt(r, 0, "check %u failed, yet provision succeeded", nth);
		cr_assert(strstr(err.message, fired), "check %u: the error names %s: %s", nth, fired,
		          err.message);
		airlock_environment_handle_clear(&h);
		cr_assert_eq(airlock_fake_live_count(s.fake), 0, "%s: a sandbox left on the service",
		             fired);
		cr_assert_eq(fds_settled(fds0), fds0, "%s: descriptors left", fired);
	}
	cr_assert_geq(nth, 3 + 1, "only %u checks were seen", nth - 1);
	cr_assert_eq(airlock_fake_live_count(s.fake), 1);

	char *argv[] = { "echo", "hi", NULL };
	for (nth = 1;; nth++) {
		airlock_exec_call call = { .tenant_id = "tenant-a",
			                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
		airlock_execution_command cmd = test_command(argv);
		airlock_execution_result r = { 0 };
		memset(&err, 0, sizeof(err));
		util_fault_arm(nth);
		int rc = airlock_exec_execute(e, &call, &h, &cmd, &r, &err);
		unsigned hits = util_fault_hits();
		const char *fired = util_fault_fired();
		util_fault_arm(0);
		airlock_execution_result_clear(&r);
		if (hits < nth) {
			cr_assert_eq(rc, 0, "no fault at check %u, yet: %s", nth, err.message);
			break;
		}
		cr_assert_lt(rc, 0, "check %u failed, yet execute succeeded", nth);
		cr_assert(strstr(err.message, fired), "check %u: the error names %s: %s", nth, fired,
		          err.message);
		/* The sandbox is intact: the next command runs. */
		airlock_execution_command again = test_command(argv);
		cr_assert_eq(airlock_exec_execute(e, &call, &h, &again, &r, &err), 0, "after %s: %s",
		             fired, err.message);
		airlock_execution_result_clear(&r);
	}
	cr_assert_geq(nth, 5 + 1, "only %u checks were seen", nth - 1);
	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_fake_live_count(s.fake), 0);
	airlock_exec_free(e);
	airlock_environment_handle_clear(&h);
	airlock_environment_spec_clear(&spec);
	unserve(&s);
}
#endif

/* airlock_remote_open, the one way a client opens the service: from a
 * credential file and the settings, it asks the service's health first,
 * takes its mechanism into the settings and applies the settings'
 * numbers on this side too. */
Test(remote, open_reads_the_credential_file_and_takes_the_services_mechanism)
{
	served s;
	serve(&s, 2);
	char cred_path[128];
	snprintf(cred_path, sizeof(cred_path), "%s/credential", s.dir);
	int fd = open(cred_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, CRED "\n", strlen(CRED) + 1), (ssize_t)strlen(CRED) + 1);
	close(fd);
	airlock_settings st;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_default(&st, &err), 0, "%s", err.message);
	st.mechanism = AIRLOCK_MECHANISM_NATIVE;
	st.service.max_sandboxes = 1;

	/* A credential file that is not there: named, nothing opened. */
	airlock_remote_open_config c = { .address = s.address, .credential_file = "/nonexistent/cred" };
	airlock_exec *e = NULL;
	cr_assert_lt(airlock_remote_open(&c, &st, &e, &err), 0);
	cr_assert(strstr(err.message, "/nonexistent/cred"), "%s", err.message);
	cr_assert_null(e);
	/* An address nobody serves: ExecutionUnavailable naming it. */
	c = (airlock_remote_open_config){ .address = "unix:/nonexistent/api.sock",
		                          .credential_file = cred_path };
	memset(&err, 0, sizeof(err));
	cr_assert_lt(airlock_remote_open(&c, &st, &e, &err), 0);
	cr_assert_eq(err.cls, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, "%s", err.message);
	cr_assert(strstr(err.message, "/nonexistent/api.sock"), "%s", err.message);
	assert_no_credential(&err);

	c.address = s.address;
	memset(&err, 0, sizeof(err));
	cr_assert_eq(airlock_remote_open(&c, &st, &e, &err), 0, "%s", err.message);
	cr_assert_eq(st.mechanism, AIRLOCK_MECHANISM_FAKE, "the service's mechanism is taken");
	/* The settings' max_sandboxes (1) holds on this side before the
	 * service's (2) would. */
	airlock_environment_spec spec;
	test_spec(&spec, "tenant-a", "run-1");
	airlock_environment_handle h1 = { 0 }, h2 = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h1, &err), 0, "%s", err.message);
	cr_assert_lt(airlock_exec_provision(e, &spec, &h2, &err), 0, "a second sandbox past the cap");
	cr_assert_eq(airlock_exec_destroy(e, &h1, &err), 0, "%s", err.message);
	airlock_environment_handle_clear(&h1);
	airlock_environment_spec_clear(&spec);
	airlock_exec_free(e);
	airlock_settings_clear(&st);
	unlink(cred_path);
	unserve(&s);
}

/* ---- a streamed request body and an extra header ------------------------- */

/* One connection: the request's head kept, its body (Content-Length
 * bytes) counted and summed, then a fixed answer. */
typedef struct recorder {
	int lfd;
	pthread_t thread;
	char head[8192];
	size_t body_len;
	unsigned long body_sum;
	bool complete; /* the whole announced body arrived */
} recorder;

static void *recorder_run(void *arg)
{
	recorder *rc = arg;
	int c = accept(rc->lfd, NULL, NULL);
	if (c < 0)
		return NULL;
	size_t n = 0;
	char *end = NULL;
	while (!end && n < sizeof(rc->head) - 1) {
		ssize_t k = read(c, rc->head + n, sizeof(rc->head) - 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
		rc->head[n] = 0;
		end = strstr(rc->head, "\r\n\r\n");
	}
	const char *cl = end ? strcasestr(rc->head, "\r\nContent-Length: ") : NULL;
	size_t want = cl ? strtoull(cl + 18, NULL, 10) : 0;
	if (end) {
		for (char *p = end + 4; p < rc->head + n; p++, rc->body_len++)
			rc->body_sum += (unsigned char)*p;
		*end = 0;
	}
	char buf[65536];
	while (end && rc->body_len < want) {
		ssize_t k = read(c, buf, sizeof(buf));
		if (k <= 0)
			break;
		for (ssize_t i = 0; i < k; i++)
			rc->body_sum += (unsigned char)buf[i];
		rc->body_len += (size_t)k;
	}
	rc->complete = end && rc->body_len == want;
	static const char answer[] = "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
	                             "Content-Length: 2\r\nConnection: close\r\n\r\n{}";
	if (rc->complete) {
		ssize_t w = write(c, answer, sizeof(answer) - 1);
		(void)w;
	}
	close(c);
	return NULL;
}

typedef struct counted {
	size_t left, piece;
	unsigned long sum;
	int fail_at; /* the call at which to fail (0: never) */
	int calls;
} counted;

/* 1..251 cycling, in pieces of at most piece; short by design when left
 * runs out before the announced length. */
static ssize_t counted_read(void *arg, char *buf, size_t room, airlock_error *err)
{
	counted *c = arg;
	if (++c->calls == c->fail_at)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO, "the test source failed");
	size_t k = room < c->piece ? room : c->piece;
	if (k > c->left)
		k = c->left;
	for (size_t i = 0; i < k; i++) {
		buf[i] = (char)(1 + (c->left - i) % 251);
		c->sum += (unsigned char)buf[i];
	}
	c->left -= k;
	return (ssize_t)k;
}

static int post_streamed(counted *src, uint64_t announced, const char *extra, recorder *rc,
                         remote_response *resp, airlock_error *err)
{
	char dir[] = "/tmp/airlock-remote-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/r.sock", dir);
	memset(rc, 0, sizeof(*rc));
	rc->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(bind(rc->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(rc->lfd, 8), 0);
	cr_assert_eq(pthread_create(&rc->thread, NULL, recorder_run, rc), 0);
	char address[128];
	snprintf(address, sizeof(address), "unix:%s", sa.sun_path);
	airlock_remote_config cfg = { .address = address, .credential = CRED,
		                      .credential_len = strlen(CRED) };
	remote_http *h = NULL;
	cr_assert_eq(remote_http_new(&cfg, &h, err), 0, "%s", err->message);
	remote_call c = { .method = "POST", .path = "/v1/up", .source = counted_read,
		          .source_arg = src, .source_len = announced,
		          .content_type = "application/octet-stream", .extra_header = extra,
		          .timeout_ms = 20000, .max_body = 4096, .watch_fds = { -1, -1 } };
	int r = remote_http_perform(h, &c, resp, err);
	remote_http_free(h);
	/* A call refused before it connects leaves the recorder waiting. */
	shutdown(rc->lfd, SHUT_RDWR);
	close(rc->lfd);
	pthread_join(rc->thread, NULL);
	unlink(sa.sun_path);
	rmdir(dir);
	return r;
}

Test(remote, a_streamed_body_arrives_whole_with_its_extra_header)
{
	counted src = { .left = 3u << 20, .piece = 7000 };
	recorder rc;
	remote_response resp;
	airlock_error err = { 0 };
	cr_assert_eq(post_streamed(&src, 3u << 20, "Airlock-Content-SHA256: abc", &rc, &resp, &err),
	             0, "%s", err.message);
	cr_assert_eq(resp.status, 201);
	cr_assert(rc.complete);
	cr_assert_eq(rc.body_len, (size_t)3 << 20);
	cr_assert_eq(rc.body_sum, src.sum);
	cr_assert(strstr(rc.head, "\r\nAirlock-Content-SHA256: abc"), "%s", rc.head);
	cr_assert(strstr(rc.head, "\r\nContent-Type: application/octet-stream"), "%s", rc.head);
	remote_response_clear(&resp);
}

Test(remote, a_streamed_body_short_of_its_length_or_failing_fails_the_call)
{
	counted shortsrc = { .left = 1000, .piece = 100 };
	recorder rc;
	remote_response resp;
	airlock_error err = { 0 };
	cr_assert_lt(post_streamed(&shortsrc, 5000, NULL, &rc, &resp, &err), 0);
	cr_assert(strstr(err.message, "ended at 1000 of 5000 bytes"), "%s", err.message);
	cr_assert_not(rc.complete);
	remote_response_clear(&resp);

	counted failing = { .left = 100000, .piece = 1000, .fail_at = 3 };
	err = (airlock_error){ 0 };
	cr_assert_lt(post_streamed(&failing, 100000, NULL, &rc, &resp, &err), 0);
	cr_assert(strstr(err.message, "the test source failed"), "%s", err.message);
	cr_assert_not(rc.complete);
	remote_response_clear(&resp);
}

Test(remote, an_extra_header_that_is_not_one_line_is_refused_before_anything_is_sent)
{
	const char *bad[] = { "X-A: b\r\nX-Evil: 1", "no colon here", ": empty name",
		              "Sp ace: v", "X-A: \x7f" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		counted src = { .left = 10, .piece = 10 };
		recorder rc;
		remote_response resp;
		airlock_error err = { 0 };
		cr_assert_lt(post_streamed(&src, 10, bad[i], &rc, &resp, &err), 0, "%s", bad[i]);
		cr_assert_eq(err.cls, AIRLOCK_ERR_EXECUTION_REJECTED, "%s", err.message);
		cr_assert_eq(rc.head[0], 0, "%s was sent", bad[i]);
		cr_assert_eq(src.calls, 0);
		remote_response_clear(&resp);
	}
}
