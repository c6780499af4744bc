/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The execution service's API server (docs/service-api.md), in process,
 * on a Unix socket in a fresh directory, over the fake adapter (and native
 * where a real command is needed). The client is libcurl, or a raw socket
 * where the test is about what a client does to the connection itself.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "airlock/fake.h"
#include "airlock/ids.h"
#include "airlock/json.h"
#include "airlock/port/exec.h"
#include "airlock/port/workspace.h"
#include "airlock/remote.h"
#include "airlock/service.h"
#include "airlock/settings.h"
#include "core/json_internal.h"
#include "service/pool.h"
#include "service/routes.h"
#include "sandbox_testlib.h"
#include "testlib.h"
#include "util/util.h"

#define TOKEN "svc-test-token-0123456789abcdef"

typedef struct svc {
	char dir[64];
	char sock[128];
	airlock_fake *fake;
	airlock_exec *exec;
	airlock_service *service;
} svc;

static void svc_open_with(svc *t, airlock_exec *exec, const airlock_service_config *over)
{
	memset(t, 0, sizeof(*t));
	strcpy(t->dir, "/tmp/airlock-svc-XXXXXX");
	cr_assert_not_null(mkdtemp(t->dir));
	snprintf(t->sock, sizeof(t->sock), "%s/airlock.sock", t->dir);
	airlock_error err = { 0 };
	if (exec) {
		t->exec = exec;
	} else {
		airlock_exec_config cfg;
		airlock_exec_config_default(&cfg);
		cr_assert_eq(airlock_fake_new(&t->fake, &err), 0);
		cr_assert_eq(airlock_exec_new(airlock_fake_ops(), t->fake, &cfg, &t->exec, &err), 0, "%s",
		             err.message);
	}
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	if (over)
		sc = *over;
	char listen[160];
	snprintf(listen, sizeof(listen), "unix:%s", t->sock);
	sc.listen = listen;
	sc.credential = TOKEN;
	sc.credential_len = strlen(TOKEN);
	cr_assert_eq(airlock_service_new(&sc, t->exec, &t->service, &err), 0, "%s", err.message);
}

static void svc_open_cfg(svc *t, const airlock_exec_config *cfg, const airlock_service_config *over)
{
	airlock_error err = { 0 };
	airlock_fake *f = NULL;
	airlock_exec *e = NULL;
	cr_assert_eq(airlock_fake_new(&f, &err), 0);
	cr_assert_eq(airlock_exec_new(airlock_fake_ops(), f, cfg, &e, &err), 0, "%s", err.message);
	svc_open_with(t, e, over);
	t->fake = f;
}

static void svc_open(svc *t)
{
	svc_open_with(t, NULL, NULL);
}

static void svc_close(svc *t)
{
	airlock_service_free(t->service);
	airlock_exec_free(t->exec);
	struct stat st;
	cr_expect_neq(lstat(t->sock, &st), 0, "the socket is removed at free");
	rmdir(t->dir);
}

/* ---- the client -------------------------------------------------------------- */

typedef struct resp {
	long status;
	char *body;
	size_t len;
	json_t *json;
} resp;

static size_t collect(char *p, size_t sz, size_t n, void *arg)
{
	resp *r = arg;
	char *nb = realloc(r->body, r->len + sz * n + 1);
	cr_assert_not_null(nb);
	memcpy(nb + r->len, p, sz * n);
	r->body = nb;
	r->len += sz * n;
	r->body[r->len] = 0;
	return sz * n;
}

static void resp_clear(resp *r)
{
	free(r->body);
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
}

/* The handle header: base64url of the handle's JSON, no padding. */
static char *handle_header(const airlock_environment_handle *h)
{
	airlock_error err = { 0 };
	char *j = airlock_environment_handle_to_json(h, &err);
	cr_assert_not_null(j, "%s", err.message);
	char *b = util_base64_encode(j, strlen(j));
	free(j);
	size_t n = strlen(b);
	while (n && b[n - 1] == '=')
		b[--n] = 0;
	for (size_t i = 0; i < n; i++)
		b[i] = b[i] == '+' ? '-' : b[i] == '/' ? '_' : b[i];
	char *out = NULL;
	cr_assert(asprintf(&out, "Airlock-Handle: %s", b) > 0);
	free(b);
	return out;
}

/* One request; CURLE_OK or curl's failure, without asserting on the
 * transfer (so a thread other than the test's may call it). */
static CURLcode http_try(svc *t, const char *method, const char *target, const char *token,
                         const airlock_environment_handle *h, const void *body, size_t blen,
                         resp *r)
{
	memset(r, 0, sizeof(*r));
	CURL *c = curl_easy_init();
	if (!c)
		return CURLE_FAILED_INIT;
	char url[8192];
	snprintf(url, sizeof(url), "http://localhost%s", target);
	struct curl_slist *hd = NULL;
	char auth[256];
	if (token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		hd = curl_slist_append(hd, auth);
	}
	_cleanup_free_ char *hh = h ? handle_header(h) : NULL;
	if (hh)
		hd = curl_slist_append(hd, hh);
	hd = curl_slist_append(hd, "Expect:");
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, t->sock);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
	}
	CURLcode cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(hd);
	curl_easy_cleanup(c);
	if (r->body && r->len && r->body[0] == '{')
		r->json = json_loadb(r->body, r->len, 0, NULL);
	return cc;
}

static void http(svc *t, const char *method, const char *target, const char *token,
                 const airlock_environment_handle *h, const void *body, size_t blen, resp *r)
{
	CURLcode cc = http_try(t, method, target, token, h, body, blen, r);
	cr_assert_eq(cc, CURLE_OK, "%s %s: %s", method, target, curl_easy_strerror(cc));
}

static const char *jstr(json_t *o, const char *key)
{
	json_t *v = o ? json_object_get(o, key) : NULL;
	return v && json_is_string(v) ? json_string_value(v) : "";
}

static void expect_error(const resp *r, long status, const char *cls, const char *needle)
{
	cr_assert_eq(r->status, status, "status %ld, want %ld: %s", r->status, status,
	             r->body ? r->body : "");
	cr_assert_not_null(r->json, "not JSON: %s", r->body ? r->body : "");
	cr_assert_str_eq(jstr(r->json, "error"), cls, "%s", r->body);
	if (needle)
		cr_assert(strstr(jstr(r->json, "message"), needle), "message lacks \"%s\": %s", needle,
		          r->body);
}

static char *spec_json(const char *tenant)
{
	airlock_environment_spec s;
	test_spec(&s, tenant, "r1");
	airlock_error err = { 0 };
	char *j = airlock_environment_spec_to_json(&s, &err);
	airlock_environment_spec_clear(&s);
	cr_assert_not_null(j, "%s", err.message);
	return j;
}

/* POST /v1/sandboxes; the handle decoded into *h. */
static void provision(svc *t, const char *tenant, const char *want_id, airlock_environment_handle *h)
{
	_cleanup_free_ char *sj = spec_json(tenant);
	_cleanup_free_ char *body = NULL;
	if (want_id)
		cr_assert(asprintf(&body, "{\"spec\":%s,\"environment_id\":\"%s\"}", sj, want_id) > 0);
	else
		cr_assert(asprintf(&body, "{\"spec\":%s}", sj) > 0);
	resp r;
	http(t, "POST", "/v1/sandboxes", TOKEN, NULL, body, strlen(body), &r);
	cr_assert_eq(r.status, 201, "provision: %ld %s", r.status, r.body);
	json_t *hj = json_object_get(r.json, "handle");
	cr_assert_not_null(hj);
	char *text = json_dumps(hj, JSON_COMPACT);
	airlock_error err = { 0 };
	memset(h, 0, sizeof(*h));
	cr_assert_eq(airlock_environment_handle_from_json(text, strlen(text), h, &err), 0, "%s",
	             err.message);
	free(text);
	resp_clear(&r);
}

/* Script argv on the fake, then provision a sandbox for tenant t1. */
static void scripted(svc *t, char **argv, const airlock_fake_behaviour *b,
                     airlock_environment_handle *h)
{
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_script(t->fake, (const char *const *)argv, b, &err), 0, "%s",
	             err.message);
	provision(t, "t1", NULL, h);
}

static size_t live(svc *t)
{
	resp r;
	http(t, "GET", "/v1/health", TOKEN, NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	json_t *v = json_object_get(r.json, "live");
	size_t n = (size_t)json_integer_value(v);
	resp_clear(&r);
	return n;
}

/* Whether the first live sandbox is busy (running a command). */
static bool first_busy(svc *t)
{
	resp r;
	http(t, "GET", "/v1/sandboxes", TOKEN, NULL, NULL, 0, &r);
	bool busy = json_is_true(json_object_get(json_array_get(json_object_get(r.json, "sandboxes"), 0),
	                                         "busy"));
	resp_clear(&r);
	return busy;
}

static char *execute_body(char **argv, bool stream)
{
	airlock_execution_command cmd = test_command(argv);
	airlock_error err = { 0 };
	_cleanup_free_ char *cj = airlock_execution_command_to_json(&cmd, &err);
	cr_assert_not_null(cj, "%s", err.message);
	char *body = NULL;
	cr_assert(asprintf(&body, "{\"command\":%s,\"remaining_budget_ms\":null,\"stream\":%s}", cj,
	                   stream ? "true" : "false") > 0);
	return body;
}

static int raw_connect(svc *t)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	strcpy(sa.sun_path, t->sock);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
	return fd;
}

/* ---- authentication ---------------------------------------------------------- */

Test(service, unauthorized_before_anything)
{
	svc t;
	svc_open(&t);
	const char *bad[] = { NULL, "wrong-token-0123456789abcdef00", "svc-test-token", TOKEN "x", "" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		resp r;
		http(&t, "GET", "/v1/health", bad[i], NULL, NULL, 0, &r);
		cr_assert_eq(r.status, 401, "token %zu: %ld", i, r.status);
		cr_assert_str_eq(r.body, "{\"error\": \"Unauthorized\", \"message\": \"\"}");
		resp_clear(&r);
		/* Nothing about the API is told without the credential: an
		 * unknown path is 401 too, and a body is not read. */
		_cleanup_free_ char *sj = spec_json("t1");
		http(&t, "POST", "/v1/sandboxes", bad[i], NULL, sj, strlen(sj), &r);
		cr_assert_eq(r.status, 401);
		resp_clear(&r);
		http(&t, "GET", "/v1/nope", bad[i], NULL, NULL, 0, &r);
		cr_assert_eq(r.status, 401);
		resp_clear(&r);
	}
	/* A scheme that is not Bearer. */
	CURL *c = curl_easy_init();
	char url[300];
	snprintf(url, sizeof(url), "http://localhost/v1/health");
	struct curl_slist *hd = curl_slist_append(NULL, "Authorization: Basic " TOKEN);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, t.sock);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
	resp r = { 0 };
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
	cr_assert_eq(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
	cr_assert_eq(r.status, 401);
	resp_clear(&r);
	curl_slist_free_all(hd);
	curl_easy_cleanup(c);
	cr_assert_eq(live(&t), 0, "nothing was provisioned");
	svc_close(&t);
}

Test(service, not_found_and_method)
{
	svc t;
	svc_open(&t);
	resp r;
	const char *missing[] = { "/v1/nope", "/v2/health", "/v1/health/", "/v1//health",
		                  "/v1/sandboxes/env_x/nope", "/v1/sandboxes/a%2Fb/execute", "/" };
	for (size_t i = 0; i < ARRAY_SIZE(missing); i++) {
		http(&t, "GET", missing[i], TOKEN, NULL, NULL, 0, &r);
		expect_error(&r, 404, "ToolValidationError", NULL);
		resp_clear(&r);
	}
	http(&t, "DELETE", "/v1/health", TOKEN, NULL, NULL, 0, &r);
	expect_error(&r, 405, "ToolValidationError", "DELETE");
	resp_clear(&r);
	http(&t, "GET", "/v1/sandboxes/env_x/execute", TOKEN, NULL, NULL, 0, &r);
	expect_error(&r, 405, "ToolValidationError", NULL);
	resp_clear(&r);
	svc_close(&t);
}

/* ---- health, list, provision ------------------------------------------------------- */

Test(service, health_list_provision_as)
{
	svc t;
	svc_open(&t);
	resp r;
	http(&t, "GET", "/v1/health", TOKEN, NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(jstr(r.json, "status"), "ok");
	cr_assert_str_eq(jstr(r.json, "mechanism"), "fake");
	cr_assert(json_is_false(json_object_get(r.json, "shutting_down")));
	resp_clear(&r);

	airlock_environment_handle a, b;
	provision(&t, "t1", NULL, &a);
	char want[AIRLOCK_ENVIRONMENT_ID_MAX];
	airlock_error err = { 0 };
	cr_assert_eq(airlock_environment_id_new(want, &err), 0);
	provision(&t, "t2", want, &b);
	cr_assert_str_eq(b.environment_id, want, "provision_as keeps the caller's id");
	cr_assert_str_eq(b.tenant_id, "t2");

	http(&t, "GET", "/v1/sandboxes", TOKEN, NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	json_t *arr = json_object_get(r.json, "sandboxes");
	cr_assert_eq(json_array_size(arr), 2, "%s", r.body);
	/* Sorted by created_at: the two may share a millisecond, so a's
	 * entry is found by its id. */
	json_t *e0 = json_array_get(arr, 0);
	if (strcmp(jstr(e0, "environment_id"), a.environment_id) != 0)
		e0 = json_array_get(arr, 1);
	cr_assert_str_eq(jstr(e0, "environment_id"), a.environment_id);
	cr_assert_str_eq(jstr(e0, "tenant_id"), "t1");
	cr_assert_str_eq(jstr(e0, "run_id"), "r1");
	cr_assert(json_is_false(json_object_get(e0, "busy")));
	int64_t ms = 0;
	cr_assert(util_time_parse(jstr(e0, "expires_at"), &ms));
	cr_assert_eq(ms, a.expires_at_ms);
	resp_clear(&r);

	/* The same id twice: refused, 409. */
	_cleanup_free_ char *sj = spec_json("t2");
	_cleanup_free_ char *body = NULL;
	cr_assert(asprintf(&body, "{\"spec\":%s,\"environment_id\":\"%s\"}", sj, want) > 0);
	http(&t, "POST", "/v1/sandboxes", TOKEN, NULL, body, strlen(body), &r);
	expect_error(&r, 409, "ExecutionRejected", NULL);
	resp_clear(&r);

	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", a.environment_id);
	http(&t, "DELETE", path, TOKEN, &a, NULL, 0, &r);
	cr_assert_eq(r.status, 204);
	resp_clear(&r);
	http(&t, "DELETE", path, TOKEN, &a, NULL, 0, &r);
	cr_assert_eq(r.status, 204, "destroy is idempotent");
	resp_clear(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", b.environment_id);
	http(&t, "DELETE", path, TOKEN, &b, NULL, 0, &r);
	cr_assert_eq(r.status, 204);
	resp_clear(&r);
	cr_assert_eq(live(&t), 0);
	airlock_environment_handle_clear(&a);
	airlock_environment_handle_clear(&b);
	svc_close(&t);
}

Test(service, bad_bodies_name_the_field)
{
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.ceilings.pids_max = 4096;
	svc t;
	svc_open_cfg(&t, &cfg, NULL);
	resp r;
	const struct {
		const char *body, *needle;
	} rows[] = {
		{ "{\"spec\": ", "invalid JSON" },
		{ "[1]", "JSON object" },
		{ "{}", "provision.spec: missing" },
		{ "{\"spec\": {}, \"extra\": 1}", "provision.extra: unknown field" },
		{ "{\"spec\": {}, \"spec\": {}}", "invalid JSON" },
		{ "{\"spec\": {}, \"environment_id\": \"../x\"}", "provision.environment_id" },
		{ "{\"spec\": 1}", "provision.spec" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		http(&t, "POST", "/v1/sandboxes", TOKEN, NULL, rows[i].body, strlen(rows[i].body), &r);
		expect_error(&r, 400, "ToolValidationError", rows[i].needle);
		resp_clear(&r);
	}
	/* A spec that fails validation: the message names the field. */
	_cleanup_free_ char *sj = spec_json("t1");
	json_t *o = json_loads(sj, 0, NULL);
	json_object_del(json_object_get(o, "limits"), "pids_max");
	char *bad = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	_cleanup_free_ char *body = NULL;
	cr_assert(asprintf(&body, "{\"spec\":%s}", bad) > 0);
	free(bad);
	http(&t, "POST", "/v1/sandboxes", TOKEN, NULL, body, strlen(body), &r);
	expect_error(&r, 400, "ToolValidationError", "pids_max");
	resp_clear(&r);
	/* A limit above the ceiling: the port's refusal, 409. */
	o = json_loads(sj, 0, NULL);
	json_object_set_new(json_object_get(o, "limits"), "pids_max", json_integer(1 << 30));
	bad = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	free(body);
	body = NULL;
	cr_assert(asprintf(&body, "{\"spec\":%s}", bad) > 0);
	free(bad);
	http(&t, "POST", "/v1/sandboxes", TOKEN, NULL, body, strlen(body), &r);
	expect_error(&r, 409, "ExecutionRejected", "pids_max");
	resp_clear(&r);
	cr_assert_eq(live(&t), 0, "nothing provisioned");

	/* Execute bodies and handles. */
	airlock_environment_handle h;
	provision(&t, "t1", NULL, &h);
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/execute", h.environment_id);
	http(&t, "POST", path, TOKEN, NULL, "{}", 2, &r);
	expect_error(&r, 400, "ToolValidationError", "Airlock-Handle: missing");
	resp_clear(&r);
	http(&t, "POST", path, TOKEN, &h, "{\"command\": {}}", 15, &r);
	expect_error(&r, 400, "ToolValidationError", "execute.command");
	resp_clear(&r);
	http(&t, "POST", path, TOKEN, &h, "{\"stream\": 1}", 13, &r);
	expect_error(&r, 400, "ToolValidationError", "execute.");
	resp_clear(&r);
	/* The path's id must be the handle's. */
	airlock_environment_handle other;
	provision(&t, "t1", NULL, &other);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/execute", other.environment_id);
	http(&t, "POST", path, TOKEN, &h, "{}", 2, &r);
	expect_error(&r, 400, "ToolValidationError", "path");
	resp_clear(&r);
	cr_assert_eq(live(&t), 2);
	airlock_environment_handle_clear(&h);
	airlock_environment_handle_clear(&other);
	svc_close(&t);
}

/* ---- memory per request ------------------------------------------
 * A body of empty objects costs jansson about 80 times its text; parsed
 * whole, dumped back and parsed again it cost 157 times (2 MiB of body
 * raised the service's peak by 313 MiB). Each body is now parsed once under
 * a budget (caps.h, AIRLOCK_JSON_DECODE_*), and a provision body is capped
 * at what a spec can hold. The service runs in this process: its peak is
 * this process's VmHWM, reset before each request. */

static size_t status_kib(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	cr_assert_not_null(f);
	char line[256];
	size_t v = 0, n = strlen(field);
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, n) == 0 && line[n] == ':')
			v = strtoull(line + n + 1, NULL, 10);
	fclose(f);
	cr_assert_gt(v, 0, "%s not in /proc/self/status", field);
	return v;
}

/* The peak resident size starts again from the current one. */
static void hwm_reset(void)
{
	FILE *f = fopen("/proc/self/clear_refs", "w");
	cr_assert_not_null(f, "clear_refs: %s", strerror(errno));
	fputs("5", f);
	fclose(f);
}

/* prefix, then "[{},{},...]" and "}" to exactly len bytes. */
static char *dense_body(const char *prefix, size_t len)
{
	size_t pl = strlen(prefix);
	cr_assert_gt(len, pl + 8);
	char *b = malloc(len + 1);
	cr_assert_not_null(b);
	memcpy(b, prefix, pl);
	size_t i = pl;
	b[i++] = '[';
	while (i + 5 <= len) {
		memcpy(b + i, "{},", 3);
		i += 3;
	}
	if (b[i - 1] == ',')
		i--;
	while (i < len - 2)
		b[i++] = ' ';
	b[i++] = ']';
	b[i++] = '}';
	b[i] = 0;
	cr_assert_eq(i, len);
	return b;
}

/* What a request may add to the peak besides its decode's budget: the
 * body held by the client (curl) and by the service (its buffer doubles),
 * and the allocator's own pages; under ASan, its shadow and redzones on
 * top (a half more). */
static size_t peak_bound(size_t len)
{
	size_t b = core_json_decode_budget(len) + 4 * len + ((size_t)8 << 20);
#if defined(__SANITIZE_ADDRESS__)
	b += b / 2;
#endif
	return b;
}

/* Send body to target and return the service's peak growth in bytes. */
static size_t peak_of(svc *t, const char *target, const airlock_environment_handle *h,
                      const char *body, size_t len, resp *r)
{
	size_t rss = status_kib("VmRSS");
	hwm_reset();
	http(t, "POST", target, TOKEN, h, body, len, r);
	size_t hwm = status_kib("VmHWM");
	return hwm > rss ? (hwm - rss) * 1024 : 0;
}

Test(service, dense_provision_body_at_its_cap_stays_in_its_budget)
{
	svc t;
	svc_open(&t);
	/* The cap is what a spec can hold, not the JSON input limit. */
	cr_assert_lt(AIRLOCK_SERVICE_PROVISION_BODY_MAX, 1u << 20);
	size_t len = AIRLOCK_SERVICE_PROVISION_BODY_MAX;
	_cleanup_free_ char *body = dense_body("{\"spec\":", len);
	resp r;
	size_t grew = peak_of(&t, "/v1/sandboxes", NULL, body, len, &r);
	size_t bound = peak_bound(len);
	fprintf(stderr, "provision: %zu bytes of empty objects raised the peak by %zu KiB (bound %zu KiB)\n",
	        len, grew >> 10, bound >> 10);
	cr_assert_leq(grew, bound, "a %zu-byte body raised the peak by %zu KiB, over %zu KiB", len,
	              grew >> 10, bound >> 10);
	expect_error(&r, 400, "ToolValidationError", "memory budget");
	resp_clear(&r);
	/* One byte past the cap: answered 413 at its head, and the body the
	 * client sends anyway is read and dropped (it reads the answer, not a
	 * reset). */
	_cleanup_free_ char *over = dense_body("{\"spec\":", len + 1);
	http(&t, "POST", "/v1/sandboxes", TOKEN, NULL, over, len + 1, &r);
	expect_error(&r, 413, "ToolValidationError", "cap");
	resp_clear(&r);
	/* A 2 MiB body, likewise, every time: answering and closing with the
	 * body unread in the service's socket failed the client's send now
	 * and then. */
	_cleanup_free_ char *big = dense_body("{\"spec\":", (size_t)2 << 20);
	for (int i = 0; i < 16; i++) {
		http(&t, "POST", "/v1/sandboxes", TOKEN, NULL, big, (size_t)2 << 20, &r);
		expect_error(&r, 413, "ToolValidationError", "cap");
		resp_clear(&r);
	}
	/* A real spec still provisions. */
	airlock_environment_handle h;
	provision(&t, "t1", NULL, &h);
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

/* A client that sends its headers, then its whole body, then reads: the
 * service answers an over-cap body at its head and then reads and drops
 * the body before it closes, so the client's send succeeds and it reads
 * the 413. Answering and closing at once made that send fail (EPIPE)
 * before the client read anything. */
Test(service, an_over_cap_body_sent_whole_reads_its_413)
{
	svc t;
	svc_open(&t);
	size_t len = (size_t)AIRLOCK_SERVICE_PROVISION_BODY_MAX + 4096;
	_cleanup_free_ char *body = dense_body("{\"spec\":", len);
	int fd = raw_connect(&t);
	char head[512];
	int hn = snprintf(head, sizeof(head),
	                  "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
	                  "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
	                  TOKEN, len);
	cr_assert_eq(send(fd, head, (size_t)hn, MSG_NOSIGNAL), hn);
	/* The answer comes at the head, before any of the body. */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 5000), 1, "no answer to the head alone");
	size_t off = 0;
	while (off < len) {
		ssize_t w = send(fd, body + off, len - off, MSG_NOSIGNAL);
		cr_assert_gt(w, 0, "the body's send failed at byte %zu of %zu: %s", off, len,
		             strerror(errno));
		off += (size_t)w;
	}
	char buf[4096];
	size_t got = 0;
	while (got < sizeof(buf) - 1) {
		ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
		buf[got] = 0;
		if (strstr(buf, "\r\n\r\n") && strstr(buf, "}"))
			break;
	}
	buf[got] = 0;
	cr_assert(strncmp(buf, "HTTP/1.1 413", 12) == 0, "answer: %.200s", buf);
	cr_assert(strstr(buf, "cap of"), "answer: %.400s", buf);
	close(fd);
	svc_close(&t);
}

/* A service with one sandbox, and the path of its execute. */
static void open_for_execute(svc *t, airlock_environment_handle *h, char *path, size_t size)
{
	svc_open(t);
	provision(t, "t1", NULL, h);
	snprintf(path, size, "/v1/sandboxes/%s/execute", h->environment_id);
}

Test(service, dense_execute_body_stays_in_its_budget)
{
	svc t;
	airlock_environment_handle h;
	char path[128];
	open_for_execute(&t, &h, path, sizeof(path));
	size_t len = (size_t)8 << 20;
	_cleanup_free_ char *body = dense_body("{\"command\":", len);
	resp r;
	size_t grew = peak_of(&t, path, &h, body, len, &r);
	size_t bound = peak_bound(len);
	fprintf(stderr, "execute: %zu bytes of empty objects raised the peak by %zu KiB (bound %zu KiB)\n",
	        len, grew >> 10, bound >> 10);
	cr_assert_leq(grew, bound, "a %zu-byte body raised the peak by %zu KiB, over %zu KiB", len,
	              grew >> 10, bound >> 10);
	expect_error(&r, 400, "ToolValidationError", "memory budget");
	resp_clear(&r);
	/* Large stdin, the bulk an execute body legitimately carries, still
	 * decodes: 8 MiB of it, in base64. */
	airlock_execution_command c = { 0 };
	char *argv[] = { "cat", NULL };
	c.argv = argv;
	c.argc = 1;
	c.working_directory = ".";
	c.timeout_seconds = 30;
	c.maximum_output_bytes = 16;
	c.has_stdin = true;
	c.stdin_len = (size_t)8 << 20;
	c.stdin_data = calloc(1, c.stdin_len);
	airlock_error err = { 0 };
	char *cj = airlock_execution_command_to_json(&c, &err);
	free(c.stdin_data);
	cr_assert_not_null(cj, "%s", err.message);
	_cleanup_free_ char *ok = NULL;
	cr_assert(asprintf(&ok, "{\"command\":%s}", cj) > 0);
	free(cj);
	grew = peak_of(&t, path, &h, ok, strlen(ok), &r);
	cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body ? r.body : "");
	resp_clear(&r);
	fprintf(stderr, "execute: %zu bytes with 8 MiB of stdin raised the peak by %zu KiB\n",
	        strlen(ok), grew >> 10);
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

#if !defined(__SANITIZE_ADDRESS__)
/* Under a limit on the address space, a body whose tree would not fit
 * fails its request, and the service goes on serving; it aborted (out of
 * memory inside the JSON library), taking every sandbox with it. (ASan
 * reserves its shadow up front: no address-space limit there.) */
Test(service, out_of_memory_in_a_decode_fails_the_request_not_the_service)
{
	svc t;
	airlock_environment_handle h;
	char path[128];
	open_for_execute(&t, &h, path, sizeof(path));
	size_t len = (size_t)24 << 20;
	_cleanup_free_ char *body = dense_body("{\"command\":", len);
	/* Room for the body's copies and the budget (about 220 MiB), not for
	 * the 3.7 GiB the tree of a 24 MiB body of empty objects takes. */
	struct rlimit old, lim;
	cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)status_kib("VmSize") * 1024 + ((rlim_t)768 << 20);
	cr_assert_eq(setrlimit(RLIMIT_AS, &lim), 0, "%s", strerror(errno));
	resp r;
	http(&t, "POST", path, TOKEN, &h, body, len, &r);
	setrlimit(RLIMIT_AS, &old);
	cr_assert(r.status == 400 || r.status == 503, "%ld %s", r.status, r.body ? r.body : "");
	resp_clear(&r);
	cr_assert_eq(live(&t), 1, "the service and its sandbox are still there");
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}
#endif

Test(service, other_tenant_handle_destroys)
{
	svc t;
	svc_open(&t);
	airlock_environment_handle h;
	provision(&t, "t1", NULL, &h);
	cr_assert_eq(live(&t), 1);
	airlock_environment_handle forged = h;
	forged.tenant_id = (char *)"t2";
	char path[160];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/dir?path=", h.environment_id);
	resp r;
	http(&t, "GET", path, TOKEN, &forged, NULL, 0, &r);
	expect_error(&r, 403, "SandboxEscapeSuspected", h.environment_id);
	resp_clear(&r);
	cr_assert_eq(live(&t), 0, "the sandbox is destroyed");
	/* The real handle now finds nothing live: 404. */
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/execute", h.environment_id);
	char *argv[] = { "true", NULL };
	_cleanup_free_ char *body = execute_body(argv, false);
	http(&t, "POST", path, TOKEN, &h, body, strlen(body), &r);
	expect_error(&r, 404, "ExecutionRejected", "not live");
	resp_clear(&r);

	/* Cancel with another tenant's handle: the same rule. */
	airlock_environment_handle_clear(&h);
	provision(&t, "t1", NULL, &h);
	forged = h;
	forged.tenant_id = (char *)"t2";
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/cancel", h.environment_id);
	http(&t, "POST", path, TOKEN, &forged, NULL, 0, &r);
	expect_error(&r, 403, "SandboxEscapeSuspected", NULL);
	resp_clear(&r);
	cr_assert_eq(live(&t), 0);
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

/* ---- the workspace ---------------------------------------------------------------- */

Test(service, workspace_verbs)
{
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.max_write_bytes = 1000;
	svc t;
	svc_open_with(&t, NULL, &sc);
	airlock_environment_handle h;
	provision(&t, "t1", NULL, &h);
	char path[256];
	resp r;
	const char data[] = "hello\0world";
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/file?path=a%%20b.txt", h.environment_id);
	http(&t, "PUT", path, TOKEN, &h, data, sizeof(data) - 1, &r);
	cr_assert_eq(r.status, 204, "%ld %s", r.status, r.body);
	resp_clear(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/file?path=a%%20b.txt&max_bytes=100",
	         h.environment_id);
	http(&t, "GET", path, TOKEN, &h, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert_eq(r.len, sizeof(data) - 1);
	cr_assert_eq(memcmp(r.body, data, r.len), 0);
	resp_clear(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/file?path=a%%20b.txt&max_bytes=3",
	         h.environment_id);
	http(&t, "GET", path, TOKEN, &h, NULL, 0, &r);
	expect_error(&r, 400, "ToolValidationError", NULL);
	resp_clear(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/provenance?path=a%%20b.txt",
	         h.environment_id);
	http(&t, "GET", path, TOKEN, &h, NULL, 0, &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(jstr(r.json, "provenance"), "TOOL_WRITTEN");
	resp_clear(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/dir?path=.", h.environment_id);
	http(&t, "GET", path, TOKEN, &h, NULL, 0, &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	json_t *e0 = json_array_get(json_object_get(r.json, "entries"), 0);
	cr_assert_str_eq(jstr(e0, "path"), "a b.txt", "%s", r.body);
	cr_assert_str_eq(jstr(e0, "type"), "FILE", "%s", r.body);
	cr_assert_eq(json_integer_value(json_object_get(e0, "size_bytes")), 11);
	resp_clear(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/contain?path=a/../../etc",
	         h.environment_id);
	http(&t, "GET", path, TOKEN, &h, NULL, 0, &r);
	expect_error(&r, 400, "WorkspaceEscape", NULL);
	resp_clear(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/contain?path=sub/new", h.environment_id);
	http(&t, "GET", path, TOKEN, &h, NULL, 0, &r);
	cr_assert_eq(r.status, 204, "%s", r.body);
	resp_clear(&r);

	/* An encoded NUL reaches the containment rules: WorkspaceEscape, not a
	 * truncated "x". */
	const char *verbs[][2] = { { "GET", "contain?path=x%00y" },
		                   { "GET", "file?path=x%00y&max_bytes=10" },
		                   { "PUT", "file?path=x%00y" },
		                   { "GET", "provenance?path=x%00y" },
		                   { "GET", "dir?path=x%00" } };
	for (size_t i = 0; i < ARRAY_SIZE(verbs); i++) {
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/%s", h.environment_id, verbs[i][1]);
		http(&t, verbs[i][0], path, TOKEN, &h, strcmp(verbs[i][0], "PUT") ? NULL : "z",
		     strcmp(verbs[i][0], "PUT") ? 0 : 1, &r);
		expect_error(&r, 400, "WorkspaceEscape", NULL);
		resp_clear(&r);
	}
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/file?path=x%%0", h.environment_id);
	http(&t, "GET", path, TOKEN, &h, NULL, 0, &r);
	expect_error(&r, 400, "ToolValidationError", "percent");
	resp_clear(&r);

	/* A plain errno of the workspace port keeps its code: SystemError with
	 * the errno's name, 422. */
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/file?path=missing&max_bytes=10",
	         h.environment_id);
	http(&t, "GET", path, TOKEN, &h, NULL, 0, &r);
	expect_error(&r, 422, "SystemError", NULL);
	cr_assert_str_eq(jstr(r.json, "errno"), "ENOENT", "%s", r.body);
	resp_clear(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/file?path=nodir/x", h.environment_id);
	http(&t, "PUT", path, TOKEN, &h, "1", 1, &r);
	expect_error(&r, 422, "SystemError", NULL);
	cr_assert_str_eq(jstr(r.json, "errno"), "ENOENT", "%s", r.body);
	resp_clear(&r);

	/* An oversize write: 413, nothing written. */
	char big[1001];
	memset(big, 'x', sizeof(big));
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/file?path=big", h.environment_id);
	http(&t, "PUT", path, TOKEN, &h, big, sizeof(big), &r);
	expect_error(&r, 413, "ToolValidationError", NULL);
	resp_clear(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/file?path=big&max_bytes=5000",
	         h.environment_id);
	http(&t, "GET", path, TOKEN, &h, NULL, 0, &r);
	cr_assert_neq(r.status, 200, "nothing was written");
	resp_clear(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/file?path=big", h.environment_id);
	http(&t, "PUT", path, TOKEN, &h, big, 1000, &r);
	cr_assert_eq(r.status, 204, "at the cap is accepted");
	resp_clear(&r);
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

/* A service whose write cap is 100 bytes, one sandbox, and a connection
 * that has sent the headers of a chunked PUT of the workspace file `name`. */
static int chunked_put_of_a_100_byte_cap(svc *t, airlock_environment_handle *h, const char *name)
{
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.max_write_bytes = 100;
	svc_open_with(t, NULL, &sc);
	provision(t, "t1", NULL, h);
	_cleanup_free_ char *hh = handle_header(h);
	int fd = raw_connect(t);
	char req[4096];
	int n = snprintf(req, sizeof(req),
	                 "PUT /v1/sandboxes/%s/workspace/file?path=%s HTTP/1.1\r\nHost: x\r\n"
	                 "Authorization: Bearer " TOKEN "\r\n%s\r\nTransfer-Encoding: chunked\r\n\r\n",
	                 h->environment_id, name, hh);
	cr_assert_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
	return fd;
}

/* The discarding is bounded: a chunked body that goes on past its cap by
 * more than AIRLOCK_SERVICE_OVERSIZE_DRAIN_MAX has its connection closed. */
Test(service, chunked_body_past_the_drain_bound_is_closed)
{
	svc t;
	airlock_environment_handle h;
	int fd = chunked_put_of_a_100_byte_cap(&t, &h, "d");
	static char chunk[1 << 20];
	memset(chunk, 'z', sizeof(chunk));
	size_t sent = 0;
	bool closed = false;
	for (int i = 0; i < 32 && !closed; i++) { /* 32 MiB, twice the bound */
		static const char size_line[] = "100000\r\n";
		if (send(fd, size_line, sizeof(size_line) - 1, MSG_NOSIGNAL) < 0) {
			closed = true;
			break;
		}
		size_t off = 0;
		while (off < sizeof(chunk)) {
			ssize_t w = send(fd, chunk + off, sizeof(chunk) - off, MSG_NOSIGNAL);
			if (w <= 0) {
				closed = true;
				break;
			}
			off += (size_t)w;
		}
		sent += off;
		if (!closed && send(fd, "\r\n", 2, MSG_NOSIGNAL) < 0)
			closed = true;
	}
	cr_assert(closed, "the service read %zu bytes past a 100-byte cap", sent);
	cr_assert_leq(sent, (size_t)AIRLOCK_SERVICE_OVERSIZE_DRAIN_MAX + (4u << 20),
	              "%zu bytes were taken", sent);
	close(fd);
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

/* A body sent without Content-Length (chunked) that outgrows the cap: the
 * rest is discarded, the answer is 413 when it ends, and nothing is
 * written. */
Test(service, chunked_oversize_write_is_413)
{
	svc t;
	airlock_environment_handle h;
	int fd = chunked_put_of_a_100_byte_cap(&t, &h, "c");
	cr_assert_eq(write(fd, "c8\r\n", 4), 4);
	char chunk[200];
	memset(chunk, 'y', sizeof(chunk));
	cr_assert_eq(write(fd, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
	static const char end[] = "\r\n0\r\n\r\n";
	cr_assert_eq(write(fd, end, sizeof(end) - 1), (ssize_t)sizeof(end) - 1);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 5000), 1);
	char buf[512];
	ssize_t got = read(fd, buf, sizeof(buf) - 1);
	cr_assert_gt(got, 0);
	buf[got] = 0;
	cr_assert(strncmp(buf, "HTTP/1.1 413", 12) == 0, "answer: %.200s", buf);
	close(fd);
	char path[200];
	resp r;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/file?path=c&max_bytes=1000",
	         h.environment_id);
	http(&t, "GET", path, TOKEN, &h, NULL, 0, &r);
	cr_assert_neq(r.status, 200, "nothing was written");
	resp_clear(&r);
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

/* ---- execute ------------------------------------------------------------------------ */

typedef struct stream_rec {
	char *buf;
	size_t len;
	int64_t first_output_ms, result_ms;
	util_buf out, err;
	json_t *result;
	size_t dropped;
	bool started;
} stream_rec;

static void stream_lines(stream_rec *s)
{
	char *nl;
	while ((nl = memchr(s->buf, '\n', s->len))) {
		size_t l = (size_t)(nl - s->buf);
		json_t *o = json_loadb(s->buf, l, 0, NULL);
		cr_assert_not_null(o, "not a JSON line: %.*s", (int)l, s->buf);
		const char *ev = jstr(o, "event");
		if (strcmp(ev, "started") == 0) {
			s->started = true;
		} else if (strcmp(ev, "output") == 0) {
			if (!s->first_output_ms)
				s->first_output_ms = util_monotonic_ms();
			const char *d = jstr(o, "data");
			unsigned char *bytes = NULL;
			size_t n = 0;
			cr_assert_eq(util_base64_decode(d, strlen(d), &bytes, &n), 0);
			util_buf_append(strcmp(jstr(o, "stream"), "stderr") ? &s->out : &s->err, bytes, n);
			free(bytes);
		} else if (strcmp(ev, "dropped") == 0) {
			s->dropped += (size_t)json_integer_value(json_object_get(o, "bytes"));
		} else if (strcmp(ev, "result") == 0) {
			s->result_ms = util_monotonic_ms();
			s->result = json_incref(json_object_get(o, "result"));
		} else {
			cr_assert_fail("unexpected event: %.*s", (int)l, s->buf);
		}
		json_decref(o);
		memmove(s->buf, nl + 1, s->len - l - 1);
		s->len -= l + 1;
	}
}

static size_t stream_collect(char *p, size_t sz, size_t n, void *arg)
{
	stream_rec *s = arg;
	char *nb = realloc(s->buf, s->len + sz * n + 1);
	cr_assert_not_null(nb);
	memcpy(nb + s->len, p, sz * n);
	s->buf = nb;
	s->len += sz * n;
	stream_lines(s);
	return sz * n;
}

static void stream_execute(svc *t, const airlock_environment_handle *h, char **argv, stream_rec *s)
{
	memset(s, 0, sizeof(*s));
	util_buf_init(&s->out, 64 << 20);
	util_buf_init(&s->err, 64 << 20);
	_cleanup_free_ char *body = execute_body(argv, true);
	char url[256];
	snprintf(url, sizeof(url), "http://localhost/v1/sandboxes/%s/execute", h->environment_id);
	_cleanup_free_ char *hh = handle_header(h);
	struct curl_slist *hd = curl_slist_append(NULL, "Authorization: Bearer " TOKEN);
	hd = curl_slist_append(hd, hh);
	hd = curl_slist_append(hd, "Expect:");
	CURL *c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, t->sock);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, stream_collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
	cr_assert_eq(curl_easy_perform(c), CURLE_OK);
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	cr_assert_eq(status, 200);
	char *ct = NULL;
	curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
	cr_assert_str_eq(ct, "application/x-ndjson");
	curl_slist_free_all(hd);
	curl_easy_cleanup(c);
	cr_assert_eq(s->len, 0, "the stream ends with a whole line");
	cr_assert(s->started);
	cr_assert_not_null(s->result, "a result event");
}

static void stream_rec_clear(stream_rec *s)
{
	free(s->buf);
	util_buf_clear(&s->out);
	util_buf_clear(&s->err);
	json_decref(s->result);
}

static void expect_bytes(json_t *result, const char *key, const util_buf *b)
{
	const char *d = jstr(result, key);
	unsigned char *bytes = NULL;
	size_t n = 0;
	cr_assert_eq(util_base64_decode(d, strlen(d), &bytes, &n), 0);
	cr_assert_eq(n, b->len, "%s: %zu bytes in the result, %zu in the events", key, n, b->len);
	cr_assert_eq(memcmp(bytes, b->data, n), 0, "%s: the events' bytes are the result's", key);
	free(bytes);
}

Test(service, streamed_output_arrives_before_the_end)
{
	svc t;
	svc_open(&t);
	char *argv[] = { "produce", NULL };
	static char out[200000];
	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (char)('a' + i % 26);
	airlock_fake_behaviour b = { .exit_code = 3, .stdout_data = out, .stdout_len = sizeof(out),
		                     .stderr_data = "warn\n", .stderr_len = 5, .runs_for_ms = 1500 };
	airlock_environment_handle h;
	scripted(&t, argv, &b, &h);
	stream_rec s;
	stream_execute(&t, &h, argv, &s);
	cr_assert(s.first_output_ms > 0);
	cr_assert_geq(s.result_ms - s.first_output_ms, 1000,
	              "output arrived %lld ms before the result, the command ran 1500",
	              (long long)(s.result_ms - s.first_output_ms));
	cr_assert_eq(json_integer_value(json_object_get(s.result, "exit_code")), 3);
	cr_assert_eq(s.dropped, 0);
	expect_bytes(s.result, "stdout", &s.out);
	expect_bytes(s.result, "stderr", &s.err);
	stream_rec_clear(&s);

	/* The same command, blocking: the same result. */
	_cleanup_free_ char *body = execute_body(argv, false);
	char path[160];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/execute", h.environment_id);
	resp r;
	http(&t, "POST", path, TOKEN, &h, body, strlen(body), &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	json_t *res = json_object_get(r.json, "result");
	cr_assert_eq(json_integer_value(json_object_get(res, "exit_code")), 3);
	util_buf ob;
	util_buf_init(&ob, 1 << 20);
	util_buf_append(&ob, out, sizeof(out));
	expect_bytes(res, "stdout", &ob);
	util_buf_clear(&ob);
	resp_clear(&r);
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

/* A burst larger than the event buffer: what does not fit is counted in a
 * dropped event, the events are a prefix of the result's bytes, and the
 * result holds every byte. */
Test(service, burst_past_the_buffer_is_counted_as_dropped)
{
	svc t;
	svc_open(&t);
	char *argv[] = { "burst", NULL };
	size_t big = 4u << 20;
	char *out = malloc(big);
	for (size_t i = 0; i < big; i++)
		out[i] = (char)('A' + i % 23);
	airlock_fake_behaviour b = { .stdout_data = out, .stdout_len = big, .runs_for_ms = 200 };
	airlock_environment_handle h;
	scripted(&t, argv, &b, &h);
	airlock_execution_command cmd = test_command(argv);
	cmd.maximum_output_bytes = 16 << 20;
	airlock_error err = { 0 };
	_cleanup_free_ char *cj = airlock_execution_command_to_json(&cmd, &err);
	_cleanup_free_ char *body = NULL;
	cr_assert(asprintf(&body, "{\"command\":%s,\"stream\":true}", cj) > 0);
	stream_rec s;
	memset(&s, 0, sizeof(s));
	util_buf_init(&s.out, 64 << 20);
	util_buf_init(&s.err, 64 << 20);
	char url[256];
	snprintf(url, sizeof(url), "http://localhost/v1/sandboxes/%s/execute", h.environment_id);
	_cleanup_free_ char *hh = handle_header(&h);
	struct curl_slist *hd = curl_slist_append(NULL, "Authorization: Bearer " TOKEN);
	hd = curl_slist_append(hd, hh);
	CURL *c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, t.sock);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, stream_collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	cr_assert_eq(curl_easy_perform(c), CURLE_OK);
	curl_slist_free_all(hd);
	curl_easy_cleanup(c);
	cr_assert_not_null(s.result);
	cr_assert_gt(s.dropped, 0, "a 4 MiB burst does not fit 1 MiB of events");
	cr_assert_lt(s.out.len, (size_t)AIRLOCK_SERVICE_STREAM_BUFFER_MAX);
	cr_assert_eq(s.out.len + s.dropped, big, "every byte is sent or counted");
	cr_assert_eq(memcmp(s.out.data, out, s.out.len), 0, "the events are a prefix");
	const char *d = jstr(s.result, "stdout");
	unsigned char *bytes = NULL;
	size_t n = 0;
	cr_assert_eq(util_base64_decode(d, strlen(d), &bytes, &n), 0);
	cr_assert_eq(n, big, "the result holds every byte");
	cr_assert_eq(memcmp(bytes, out, n), 0);
	free(bytes);
	free(out);
	stream_rec_clear(&s);
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

typedef struct bg_exec {
	svc *t;
	airlock_environment_handle *h;
	char **argv;
	resp r;
	pthread_t th;
} bg_exec;

static void *bg_main(void *arg)
{
	bg_exec *b = arg;
	_cleanup_free_ char *body = execute_body(b->argv, false);
	char path[160];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/execute", b->h->environment_id);
	http(b->t, "POST", path, TOKEN, b->h, body, strlen(body), &b->r);
	return NULL;
}

static const char *kill_reason(const resp *r)
{
	return jstr(json_object_get(r->json, "result"), "killed_by");
}

Test(service, cancel_a_running_execute)
{
	svc t;
	svc_open(&t);
	char *argv[] = { "sleepy", NULL };
	airlock_fake_behaviour b = { .stdout_data = "partial", .stdout_len = 7, .runs_for_ms = 20000 };
	airlock_environment_handle h;
	scripted(&t, argv, &b, &h);
	char path[160];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/cancel", h.environment_id);
	resp r;
	http(&t, "POST", path, TOKEN, &h, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	cr_assert(json_is_false(json_object_get(r.json, "cancelled")), "%s", r.body);
	resp_clear(&r);

	bg_exec bg = { .t = &t, .h = &h, .argv = argv };
	int64_t t0 = util_monotonic_ms();
	pthread_create(&bg.th, NULL, bg_main, &bg);
	bool cancelled = false;
	for (int i = 0; i < 100 && !cancelled; i++) {
		usleep(50 * 1000);
		http(&t, "POST", path, TOKEN, &h, NULL, 0, &r);
		cr_assert_eq(r.status, 200);
		cancelled = json_is_true(json_object_get(r.json, "cancelled"));
		resp_clear(&r);
	}
	cr_assert(cancelled);
	pthread_join(bg.th, NULL);
	cr_assert_lt(util_monotonic_ms() - t0, 10000);
	cr_assert_eq(bg.r.status, 200, "%s", bg.r.body);
	cr_assert_str_eq(kill_reason(&bg.r), "CANCELLED", "%s", bg.r.body);
	cr_assert_str_eq(jstr(json_object_get(bg.r.json, "result"), "stdout"), "cGFydGlhbA==");
	resp_clear(&bg.r);
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

/* A client that disconnects mid-execute cancels its command. */
Test(service, disconnect_cancels)
{
	svc t;
	svc_open(&t);
	char *argv[] = { "sleepy", NULL };
	airlock_fake_behaviour b = { .runs_for_ms = 30000 };
	airlock_environment_handle h;
	scripted(&t, argv, &b, &h);
	for (int stream = 0; stream < 2; stream++) {
		_cleanup_free_ char *hh = handle_header(&h);
		_cleanup_free_ char *body = execute_body(argv, stream);
		int fd = raw_connect(&t);
		char head[2048];
		int n = snprintf(head, sizeof(head),
		                 "POST /v1/sandboxes/%s/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN
		                 "\r\n%s\r\nContent-Length: %zu\r\n\r\n",
		                 h.environment_id, hh, strlen(body));
		cr_assert_eq(write(fd, head, (size_t)n), n);
		cr_assert_eq(write(fd, body, strlen(body)), (ssize_t)strlen(body));
		usleep(500 * 1000);
		close(fd);
		/* The sandbox is idle again within a second or so. */
		bool idle = false;
		for (int i = 0; i < 50 && !idle; i++) {
			usleep(100 * 1000);
			idle = !first_busy(&t);
		}
		cr_assert(idle, "stream=%d: the command was cancelled", stream);
	}
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

/* How many sandboxes the list says are running a command. */
static size_t busy_count(svc *t)
{
	resp r;
	http(t, "GET", "/v1/sandboxes", TOKEN, NULL, NULL, 0, &r);
	size_t i, n = 0;
	json_t *v;
	json_array_foreach(json_object_get(r.json, "sandboxes"), i, v)
		n += json_is_true(json_object_get(v, "busy"));
	resp_clear(&r);
	return n;
}

static void execute_ok(svc *t, const airlock_environment_handle *h, char **argv)
{
	bg_exec b = { .t = t, .h = h, .argv = argv };
	bg_main(&b);
	cr_assert_eq(b.r.status, 200, "%s", b.r.body);
	resp_clear(&b.r);
}

/* The execute threads are bounded (execute_threads): with one, a second
 * execute while the first runs is refused at once, 503 ExecutionUnavailable
 * naming the setting, not queued behind it; the slot is free again as soon
 * as the first has answered, so executes one after another are never
 * refused; a cancel still ends a command that runs on a pool thread. */
Test(service, execute_threads_bound_the_executes_running_at_once)
{
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.execute_threads = 1;
	svc t;
	svc_open_cfg(&t, &cfg, &sc);
	char *slow[] = { "sleepy", NULL }, *quick[] = { "quick", NULL };
	airlock_fake_behaviour b = { .runs_for_ms = 30000 };
	airlock_environment_handle h1, h2;
	scripted(&t, slow, &b, &h1);
	provision(&t, "t1", NULL, &h2);

	/* Sequential executes on a pool of one: each waits for nothing. */
	for (int i = 0; i < 20; i++)
		execute_ok(&t, &h2, quick);

	bg_exec bg = { .t = &t, .h = &h1, .argv = slow };
	cr_assert_eq(pthread_create(&bg.th, NULL, bg_main, &bg), 0);
	bool running = false;
	for (int i = 0; i < 100 && !running; i++) {
		usleep(20 * 1000);
		running = busy_count(&t) == 1;
	}
	cr_assert(running, "the first command runs");
	for (int stream = 0; stream < 2; stream++) {
		_cleanup_free_ char *body = execute_body(quick, stream);
		char path[160];
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/execute", h2.environment_id);
		resp r;
		http(&t, "POST", path, TOKEN, &h2, body, strlen(body), &r);
		expect_error(&r, 503, "ExecutionUnavailable", "execute_threads");
		cr_assert(strstr(jstr(r.json, "message"), "all 1 of the service's execute threads"),
		          "%s", r.body);
		resp_clear(&r);
	}
	cr_assert_eq(busy_count(&t), 1, "the refusal left the running command alone");

	char path[160];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/cancel", h1.environment_id);
	resp r;
	http(&t, "POST", path, TOKEN, &h1, NULL, 0, &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(json_is_true(json_object_get(r.json, "cancelled")), "%s", r.body);
	resp_clear(&r);
	pthread_join(bg.th, NULL);
	cr_assert_eq(bg.r.status, 200, "%s", bg.r.body);
	cr_assert_str_eq(kill_reason(&bg.r), "CANCELLED", "%s", bg.r.body);
	resp_clear(&bg.r);

	/* Its slot is free: the next execute runs at once. */
	execute_ok(&t, &h2, quick);
	airlock_environment_handle_clear(&h1);
	airlock_environment_handle_clear(&h2);
	svc_close(&t);
}

/* This process's threads, once their number holds still for 100 ms (at
 * most 2 s): a thread that is ending is given the time to end. */
static long threads_settled(void)
{
	long n = -1;
	for (int i = 0, still = 0; i < 40 && still < 2; i++) {
		DIR *d = opendir("/proc/self/task");
		cr_assert_not_null(d);
		long m = 0;
		for (struct dirent *e; (e = readdir(d));)
			m += e->d_name[0] != '.';
		closedir(d);
		still = m == n ? still + 1 : 0;
		n = m;
		usleep(50 * 1000);
	}
	return n;
}

typedef struct par_exec {
	bg_exec b;
	pthread_barrier_t *go;
} par_exec;

static void *par_main(void *arg)
{
	par_exec *p = arg;
	pthread_barrier_wait(p->go);
	return bg_main(&p->b);
}

/* The execute threads a service started (several at once here: each
 * execute takes its own) are all joined when it is freed: the process is
 * back at the threads it had before the service. */
Test(service, no_execute_thread_outlives_the_service)
{
	long before = threads_settled();
	svc t;
	svc_open(&t);
	char *argv[] = { "nap", NULL };
	airlock_fake_behaviour b = { .runs_for_ms = 300 };
	enum { N = 4 };
	airlock_environment_handle h[N];
	scripted(&t, argv, &b, &h[0]);
	for (int i = 1; i < N; i++)
		provision(&t, "t1", NULL, &h[i]);
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, N);
	par_exec p[N];
	for (int i = 0; i < N; i++) {
		p[i] = (par_exec){ .b = { .t = &t, .h = &h[i], .argv = argv }, .go = &go };
		cr_assert_eq(pthread_create(&p[i].b.th, NULL, par_main, &p[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(p[i].b.th, NULL);
		cr_assert_eq(p[i].b.r.status, 200, "%s", p[i].b.r.body);
		resp_clear(&p[i].b.r);
		airlock_environment_handle_clear(&h[i]);
	}
	pthread_barrier_destroy(&go);
	cr_assert_gt(threads_settled(), before + N - 1, "the service's threads wait for the next");
	svc_close(&t);
	cr_assert_eq(threads_settled(), before, "a thread of the service outlived it");
}

/* Defaults with max_sandboxes at cap, in the core and in the service. */
static void capped_config(airlock_exec_config *cfg, airlock_service_config *sc, size_t cap)
{
	airlock_exec_config_default(cfg);
	cfg->max_sandboxes = cap;
	airlock_service_config_default(sc);
	sc->max_sandboxes = cap;
}

Test(service, max_sandboxes_is_unavailable_at_once)
{
	airlock_exec_config cfg;
	airlock_service_config sc;
	capped_config(&cfg, &sc, 1);
	svc t;
	svc_open_cfg(&t, &cfg, &sc);
	airlock_environment_handle h;
	provision(&t, "t1", NULL, &h);
	_cleanup_free_ char *sj = spec_json("t1");
	_cleanup_free_ char *body = NULL;
	cr_assert(asprintf(&body, "{\"spec\":%s}", sj) > 0);
	int64_t t0 = util_monotonic_ms();
	resp r;
	http(&t, "POST", "/v1/sandboxes", TOKEN, NULL, body, strlen(body), &r);
	cr_assert_lt(util_monotonic_ms() - t0, 1000, "at once, not a wait");
	expect_error(&r, 503, "ExecutionUnavailable", "max_sandboxes");
	resp_clear(&r);
	http(&t, "GET", "/v1/health", TOKEN, NULL, NULL, 0, &r);
	cr_assert_eq(json_integer_value(json_object_get(r.json, "max_sandboxes")), 1);
	resp_clear(&r);
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

/* ---- a destroy racing a provision, and a destroy's handle --------------------------- */

/* The entries list shows. */
static size_t listed(svc *t)
{
	resp r;
	http(t, "GET", "/v1/sandboxes", TOKEN, NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	size_t n = json_array_size(json_object_get(r.json, "sandboxes"));
	resp_clear(&r);
	return n;
}

/* id's entry in list as a handle (list shows every field of one), and
 * whether it is still being provisioned; false when list does not show
 * id. */
static bool listed_handle(svc *t, const char *id, airlock_environment_handle *h,
                          bool *provisioning)
{
	resp r;
	http(t, "GET", "/v1/sandboxes", TOKEN, NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	bool found = false;
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(r.json, "sandboxes"), i, e) {
		if (strcmp(jstr(e, "environment_id"), id) != 0)
			continue;
		json_t *hj = json_pack("{s:s, s:s, s:s, s:O, s:s, s:s}", "environment_id", id,
		                       "tenant_id", jstr(e, "tenant_id"), "run_id", jstr(e, "run_id"),
		                       "lease_epoch", json_object_get(e, "lease_epoch"), "created_at",
		                       jstr(e, "created_at"), "expires_at", jstr(e, "expires_at"));
		cr_assert_not_null(hj, "list entry: %s", r.body);
		char *text = json_dumps(hj, JSON_COMPACT);
		json_decref(hj);
		airlock_error err = { 0 };
		memset(h, 0, sizeof(*h));
		cr_assert_eq(airlock_environment_handle_from_json(text, strlen(text), h, &err), 0,
		             "%s: %s", err.message, text);
		free(text);
		*provisioning = json_is_true(json_object_get(e, "provisioning"));
		found = true;
	}
	resp_clear(&r);
	return found;
}

static void delete_expect(svc *t, const airlock_environment_handle *h, long status, const char *why)
{
	char path[160];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", h->environment_id);
	resp r;
	http(t, "DELETE", path, TOKEN, h, NULL, 0, &r);
	cr_assert_eq(r.status, status, "%s: DELETE answered %ld, want %ld: %s", why, r.status, status,
	             r.body ? r.body : "");
	resp_clear(&r);
}

typedef struct race_prov {
	svc *t;
	const char *body;
	atomic_bool done; /* the provision has its answer */
	long status;
	CURLcode cc;
} race_prov;

static void *race_provision(void *arg)
{
	race_prov *p = arg;
	resp r;
	p->cc = http_try(p->t, "POST", "/v1/sandboxes", TOKEN, NULL, p->body, strlen(p->body), &r);
	p->status = r.status;
	resp_clear(&r);
	atomic_store(&p->done, true);
	return NULL;
}

typedef size_t (*adapter_live_fn)(void *adapter);

/*
 * A destroy racing a provision, for real: a provision runs in a thread
 * while the test polls list, and the moment list shows the sandbox it is
 * destroyed with the handle list gave (every field), as a reaper or a
 * worker that lost its provision's answer does. Whatever the interleaving,
 * nothing outlives the destroy: the adapter itself holds nothing, health
 * and list count nothing, the same id provisions again, and max_sandboxes
 * (cap, when not 0) still admits exactly cap sandboxes.
 */
static void destroy_races_provision(svc *t, const char *spec, int attempts, void *adapter,
                                    adapter_live_fn adapter_live, size_t cap)
{
	int raced = 0, seen_provisioning = 0;
	char id[AIRLOCK_ENVIRONMENT_ID_MAX] = "";
	for (int a = 0; a < attempts; a++) {
		airlock_error err = { 0 };
		cr_assert_eq(airlock_environment_id_new(id, &err), 0, "%s", err.message);
		_cleanup_free_ char *body = NULL;
		cr_assert(asprintf(&body, "{\"spec\":%s,\"environment_id\":\"%s\"}", spec, id) > 0);
		race_prov p = { .t = t, .body = body };
		atomic_init(&p.done, false);
		pthread_t th;
		cr_assert_eq(pthread_create(&th, NULL, race_provision, &p), 0);
		bool hit = false;
		/* Bounded: the provision's own answer ends the polling. */
		while (!atomic_load(&p.done)) {
			airlock_environment_handle h;
			bool prov = false;
			if (!listed_handle(t, id, &h, &prov))
				continue;
			hit = !atomic_load(&p.done);
			seen_provisioning += prov;
			delete_expect(t, &h, 204, "a destroy racing its provision");
			airlock_environment_handle_clear(&h);
			break;
		}
		pthread_join(th, NULL);
		cr_assert_eq(p.cc, CURLE_OK, "attempt %d: provision: %s", a, curl_easy_strerror(p.cc));
		cr_assert_eq(p.status, 201, "attempt %d: provision answered %ld", a, p.status);
		if (!hit) {
			/* The provision answered before list showed it: an
			 * ordinary destroy, so the attempt still ends clean. */
			airlock_environment_handle h;
			bool prov = false;
			if (listed_handle(t, id, &h, &prov)) {
				delete_expect(t, &h, 204, "a destroy after its provision");
				airlock_environment_handle_clear(&h);
			}
		}
		raced += hit;
		cr_assert_eq(adapter_live(adapter), 0,
		             "attempt %d (%s): the adapter still holds a sandbox after its destroy "
		             "answered 204",
		             a, hit ? "raced" : "not raced");
		cr_assert_eq(live(t), 0, "attempt %d: health counts a destroyed sandbox", a);
		cr_assert_eq(listed(t), 0, "attempt %d: list shows a destroyed sandbox", a);
	}
	cr_log_info("destroy racing provision (%s): %d of %d attempts raced, %d saw it provisioning",
	            airlock_exec_name(t->exec), raced, attempts, seen_provisioning);
	cr_assert_gt(raced, 0, "no destroy reached a provision in flight in %d attempts", attempts);

	/* The last id raced is free again: it provisions, once. */
	_cleanup_free_ char *again = NULL;
	cr_assert(asprintf(&again, "{\"spec\":%s,\"environment_id\":\"%s\"}", spec, id) > 0);
	airlock_environment_handle hs[8] = { 0 };
	size_t n = 0;
	for (;;) {
		resp r;
		http(t, "POST", "/v1/sandboxes", TOKEN, NULL, again, strlen(again), &r);
		if (n == 0) {
			cr_assert_eq(r.status, 201, "the raced id %s does not provision again: %ld %s", id,
			             r.status, r.body);
		} else if (r.status != 201) {
			/* Past the cap: 503 at once, and never below it. */
			expect_error(&r, 503, "ExecutionUnavailable", "max_sandboxes");
			resp_clear(&r);
			break;
		}
		char *text = json_dumps(json_object_get(r.json, "handle"), JSON_COMPACT);
		airlock_error err = { 0 };
		cr_assert_eq(airlock_environment_handle_from_json(text, strlen(text), &hs[n], &err), 0,
		             "%s", err.message);
		free(text);
		resp_clear(&r);
		n++;
		if (cap == 0 || n > cap || n == ARRAY_SIZE(hs))
			break;
		/* The next ones under fresh ids, to fill the cap. */
		cr_assert_eq(airlock_environment_id_new(id, NULL), 0);
		free(again);
		cr_assert(asprintf(&again, "{\"spec\":%s,\"environment_id\":\"%s\"}", spec, id) > 0);
	}
	if (cap)
		cr_assert_eq(n, cap, "max_sandboxes %zu admitted %zu sandboxes", cap, n);
	cr_assert_eq(adapter_live(adapter), n);
	for (size_t i = 0; i < n; i++) {
		delete_expect(t, &hs[i], 204, "cleanup");
		airlock_environment_handle_clear(&hs[i]);
	}
	cr_assert_eq(adapter_live(adapter), 0);
}

/* The fake with a provision that takes a while, as a real mechanism's does
 * (tens of milliseconds to seconds): the window in which a sandbox is in
 * the service's record and not yet the adapter's is then wide enough to
 * be hit by a client on every attempt. */
static int slow_fake_provision(void *ctx, const airlock_environment_spec *spec,
                               const airlock_environment_handle *h, airlock_error *err)
{
	struct timespec ts = { .tv_nsec = 30 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	return airlock_fake_ops()->provision(ctx, spec, h, err);
}

static size_t fake_live(void *a)
{
	return airlock_fake_live_count(a);
}

Test(service, destroy_racing_provision_leaves_nothing)
{
	static airlock_exec_ops slow;
	slow = *airlock_fake_ops();
	slow.provision = slow_fake_provision;
	airlock_exec_config cfg;
	airlock_service_config sc;
	capped_config(&cfg, &sc, 2);
	airlock_error err = { 0 };
	airlock_fake *f = NULL;
	airlock_exec *e = NULL;
	cr_assert_eq(airlock_fake_new(&f, &err), 0);
	cr_assert_eq(airlock_exec_new(&slow, f, &cfg, &e, &err), 0, "%s", err.message);
	svc t;
	svc_open_with(&t, e, &sc);
	t.fake = f;
	_cleanup_free_ char *sj = spec_json("t1");
	destroy_races_provision(&t, sj, 20, f, fake_live, 2);
	svc_close(&t);
}

/* The other verbs on a sandbox being provisioned wait for it too: an
 * execute with the handle list shows while the provision is in flight
 * runs its command once the sandbox is built (it is not refused as a
 * sandbox that does not exist, nor run against an adapter that does not
 * hold it yet). */
Test(service, execute_on_a_provisioning_sandbox_waits)
{
	static airlock_exec_ops slow;
	slow = *airlock_fake_ops();
	slow.provision = slow_fake_provision;
	airlock_error err = { 0 };
	airlock_fake *f = NULL;
	airlock_exec *e = NULL;
	cr_assert_eq(airlock_fake_new(&f, &err), 0);
	cr_assert_eq(airlock_exec_new(&slow, f, NULL, &e, &err), 0, "%s", err.message);
	svc t;
	svc_open_with(&t, e, NULL);
	t.fake = f;
	char *argv[] = { "echo", "built", NULL };
	airlock_fake_behaviour b = { .stdout_data = "built\n", .stdout_len = 6 };
	cr_assert_eq(airlock_fake_script(f, (const char *const *)argv, &b, &err), 0, "%s",
	             err.message);
	_cleanup_free_ char *sj = spec_json("t1");
	_cleanup_free_ char *exec_body = execute_body(argv, false);
	int raced = 0;
	for (int a = 0; a < 10; a++) {
		char id[AIRLOCK_ENVIRONMENT_ID_MAX];
		cr_assert_eq(airlock_environment_id_new(id, &err), 0, "%s", err.message);
		_cleanup_free_ char *body = NULL;
		cr_assert(asprintf(&body, "{\"spec\":%s,\"environment_id\":\"%s\"}", sj, id) > 0);
		race_prov p = { .t = &t, .body = body };
		atomic_init(&p.done, false);
		pthread_t th;
		cr_assert_eq(pthread_create(&th, NULL, race_provision, &p), 0);
		airlock_environment_handle h = { 0 };
		bool prov = false, seen = false;
		while (!seen && !atomic_load(&p.done))
			seen = listed_handle(&t, id, &h, &prov);
		if (seen) {
			raced += prov;
			char path[160];
			snprintf(path, sizeof(path), "/v1/sandboxes/%s/execute", id);
			resp r;
			http(&t, "POST", path, TOKEN, &h, exec_body, strlen(exec_body), &r);
			cr_assert_eq(r.status, 200, "attempt %d: execute while provisioning: %ld %s", a,
			             r.status, r.body);
			json_t *res = json_object_get(r.json, "result");
			cr_assert_eq(json_integer_value(json_object_get(res, "exit_code")), 0, "%s",
			             r.body);
			resp_clear(&r);
		}
		pthread_join(th, NULL);
		cr_assert_eq(p.status, 201, "attempt %d: provision answered %ld", a, p.status);
		if (!seen)
			cr_assert(listed_handle(&t, id, &h, &prov));
		delete_expect(&t, &h, 204, "cleanup");
		airlock_environment_handle_clear(&h);
		cr_assert_eq(airlock_fake_live_count(f), 0);
	}
	cr_assert_gt(raced, 0, "no execute reached a provision in flight in 10 attempts");
	svc_close(&t);
}

/* What each destroy was logged as (the observer's reason). */
typedef struct destroy_log {
	pthread_mutex_t lock;
	char reasons[8][16];
	size_t n;
} destroy_log;

static void destroy_log_event(void *arg, const airlock_exec_event *ev)
{
	destroy_log *l = arg;
	if (ev->kind != AIRLOCK_EXEC_EVENT_DESTROYED)
		return;
	pthread_mutex_lock(&l->lock);
	if (l->n < ARRAY_SIZE(l->reasons))
		snprintf(l->reasons[l->n++], sizeof(l->reasons[0]), "%s", ev->reason ? ev->reason : "");
	pthread_mutex_unlock(&l->lock);
}

/*
 * DELETE compares the whole handle, as every other verb does: another
 * run's, a stale epoch or made-up timestamps are SandboxEscapeSuspected
 * (403), the sandbox is destroyed all the same and logged as a suspicion,
 * not an ordinary destroy. The genuine handle then finds it gone: 204, a
 * destroy is idempotent.
 */
Test(service, destroy_compares_every_field)
{
	static const airlock_exec_observer obs = { .event = destroy_log_event };
	destroy_log dl = { .lock = PTHREAD_MUTEX_INITIALIZER };
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.observer = &obs;
	cfg.observer_arg = &dl;
	svc t;
	svc_open_cfg(&t, &cfg, NULL);
	static const char *const fields[] = { "tenant_id", "run_id", "lease_epoch", "created_at",
		                              "expires_at" };
	/* What the message names for each. */
	static const char *const named[] = { "tenant_id", "run_id", "lease_epoch", "timestamps",
		                             "timestamps" };
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		airlock_environment_handle h;
		provision(&t, "t1", NULL, &h);
		airlock_environment_handle forged = h;
		switch (i) {
		case 0: forged.tenant_id = (char *)"t2"; break;
		case 1: forged.run_id = (char *)"another-run"; break;
		case 2: forged.lease_epoch--; break; /* a stale lease */
		case 3: forged.created_at_ms -= 1000; break;
		default: forged.expires_at_ms += 3600 * 1000; break;
		}
		char path[160];
		snprintf(path, sizeof(path), "/v1/sandboxes/%s", h.environment_id);
		resp r;
		http(&t, "DELETE", path, TOKEN, &forged, NULL, 0, &r);
		expect_error(&r, 403, "SandboxEscapeSuspected", named[i]);
		resp_clear(&r);
		cr_assert_eq(live(&t), 0, "forged %s: the sandbox is destroyed", fields[i]);
		cr_assert_eq(airlock_fake_live_count(t.fake), 0, "forged %s: the adapter holds it",
		             fields[i]);
		pthread_mutex_lock(&dl.lock);
		cr_assert_eq(dl.n, i + 1);
		cr_assert_str_eq(dl.reasons[i], "suspicion", "forged %s: logged as \"%s\"", fields[i],
		                 dl.reasons[i]);
		pthread_mutex_unlock(&dl.lock);
		delete_expect(&t, &h, 204, "the genuine handle of a destroyed sandbox");
		airlock_environment_handle_clear(&h);
	}
	/* The genuine handle is an ordinary destroy. */
	airlock_environment_handle h;
	provision(&t, "t1", NULL, &h);
	delete_expect(&t, &h, 204, "the genuine handle");
	cr_assert_str_eq(dl.reasons[ARRAY_SIZE(fields)], "request");
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

Test(service, expires_at_timer_destroys_idle)
{
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.hard_cap_seconds = 1;
	svc t;
	svc_open_cfg(&t, &cfg, NULL);
	airlock_environment_handle h;
	_cleanup_free_ char *sj = spec_json("t1");
	json_t *o = json_loads(sj, 0, NULL);
	json_object_set_new(json_object_get(o, "limits"), "wall_clock_seconds", json_integer(1));
	char *spec = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	_cleanup_free_ char *body = NULL;
	cr_assert(asprintf(&body, "{\"spec\":%s}", spec) > 0);
	free(spec);
	resp r;
	http(&t, "POST", "/v1/sandboxes", TOKEN, NULL, body, strlen(body), &r);
	cr_assert_eq(r.status, 201, "%s", r.body);
	resp_clear(&r);
	(void)h;
	int64_t t0 = util_monotonic_ms();
	while (live(&t) > 0 && util_monotonic_ms() - t0 < 6000)
		usleep(100 * 1000);
	cr_assert_eq(live(&t), 0, "destroyed by the timer, with no call on it");
	cr_assert_lt(util_monotonic_ms() - t0, 4000);
	svc_close(&t);
}

/* ---- hostile clients ---------------------------------------------------------------- */

Test(service, slowloris_does_not_delay_others_and_is_closed)
{
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.header_timeout_ms = 1000;
	svc t;
	svc_open_with(&t, NULL, &sc);
	int fd = raw_connect(&t);
	const char head[] = "GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN "\r\n";
	int64_t t0 = util_monotonic_ms();
	bool closed = false;
	for (size_t i = 0; i < sizeof(head) - 1 && !closed; i++) {
		if (send(fd, head + i, 1, MSG_NOSIGNAL) != 1) {
			closed = true;
			break;
		}
		if (i == 3) {
			/* Another client, meanwhile: answered at once. */
			int64_t h0 = util_monotonic_ms();
			resp r;
			http(&t, "GET", "/v1/health", TOKEN, NULL, NULL, 0, &r);
			cr_assert_eq(r.status, 200);
			resp_clear(&r);
			cr_assert_lt(util_monotonic_ms() - h0, 500);
		}
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) == 1) {
			char c;
			if (read(fd, &c, 1) <= 0)
				closed = true;
		}
	}
	cr_assert(closed, "the slow client was closed");
	int64_t took = util_monotonic_ms() - t0;
	cr_assert_lt(took, 3000, "closed by the header timeout (%lld ms)", (long long)took);
	close(fd);
	svc_close(&t);
}

Test(service, client_that_stops_reading_does_not_stop_the_service)
{
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.connection_timeout_ms = 1000;
	svc t;
	svc_open_with(&t, NULL, &sc);
	char *argv[] = { "flood", NULL };
	size_t big = 8u << 20;
	char *out = malloc(big);
	memset(out, 'z', big);
	airlock_fake_behaviour b = { .stdout_data = out, .stdout_len = big, .runs_for_ms = 1500 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_fake_script(t.fake, (const char *const *)argv, &b, &err), 0);
	free(out);
	airlock_environment_handle h;
	provision(&t, "t1", NULL, &h);
	_cleanup_free_ char *hh = handle_header(&h);
	airlock_execution_command cmd = test_command(argv);
	cmd.maximum_output_bytes = 16 << 20;
	_cleanup_free_ char *cj = airlock_execution_command_to_json(&cmd, &err);
	_cleanup_free_ char *body = NULL;
	cr_assert(asprintf(&body, "{\"command\":%s,\"stream\":true}", cj) > 0);
	int fd = raw_connect(&t);
	int one = 4096;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one));
	char head[2048];
	int n = snprintf(head, sizeof(head),
	                 "POST /v1/sandboxes/%s/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN
	                 "\r\n%s\r\nContent-Length: %zu\r\n\r\n",
	                 h.environment_id, hh, strlen(body));
	cr_assert_eq(write(fd, head, (size_t)n), n);
	cr_assert_eq(write(fd, body, strlen(body)), (ssize_t)strlen(body));
	/* Never read. The service answers others meanwhile. */
	for (int i = 0; i < 10; i++) {
		int64_t h0 = util_monotonic_ms();
		resp r;
		http(&t, "GET", "/v1/health", TOKEN, NULL, NULL, 0, &r);
		cr_assert_eq(r.status, 200);
		resp_clear(&r);
		cr_assert_lt(util_monotonic_ms() - h0, 500);
		usleep(300 * 1000);
	}
	/* The stalled connection was closed and the command is over: the
	 * sandbox is idle and takes another command. */
	bool idle = false;
	for (int i = 0; i < 50 && !idle; i++) {
		idle = !first_busy(&t);
		usleep(100 * 1000);
	}
	cr_assert(idle);
	char *argv2[] = { "true", NULL };
	stream_rec s;
	stream_execute(&t, &h, argv2, &s);
	stream_rec_clear(&s);
	close(fd);
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

/* The connection limit: past it a connection is closed at once, and a
 * closed one frees its place. A header block past its cap is refused, and
 * the service goes on. */
/* GET /v1/health with the credential on a raw connection, kept alive:
 * whether it was answered 200 within 5 s. */
static bool raw_health(int fd)
{
	static const char req[] = "GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN
	                          "\r\n\r\n";
	if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(req) - 1)
		return false;
	char buf[4096];
	size_t got = 0;
	for (int i = 0; i < 50 && got < sizeof(buf) - 1; i++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) != 1)
			continue;
		ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		buf[got] = 0;
		if (strstr(buf, "\r\n\r\n") && strstr(buf, "\"status\""))
			break;
	}
	buf[got] = 0;
	return strncmp(buf, "HTTP/1.1 200", 12) == 0;
}

/* Whether the service closed fd within ms (EOF or an error to read). */
static bool closed_within(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, ms) != 1)
		return false;
	char ch;
	return read(fd, &ch, 1) <= 0;
}

/* Connections without the credential filled every slot for the
 * whole header timeout, and the worker was refused at accept (2 of 24
 * probes served over TLS: tests/service_attack.sh, lockout). They now hold
 * at most three quarters of the slots, the oldest of the address with the
 * most goes first, and none lives past auth_timeout_ms. */
Test(service, connections_without_the_credential_leave_room_and_go_first)
{
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.max_connections = 8; /* 6 may be unauthenticated */
	sc.auth_timeout_ms = sc.header_timeout_ms = 20000;
	svc t;
	svc_open_with(&t, NULL, &sc);
	int r[8];
	for (size_t i = 0; i < ARRAY_SIZE(r); i++) {
		r[i] = raw_connect(&t);
		usleep(50 * 1000);
	}
	cr_assert(closed_within(r[0], 3000), "the oldest unauthenticated connection is evicted");
	cr_assert(closed_within(r[1], 3000), "and the next oldest");
	for (size_t i = 2; i < ARRAY_SIZE(r); i++)
		cr_assert(!closed_within(r[i], 100), "connection %zu is kept", i);
	/* Every slot is taken, six by connections without the credential:
	 * one with it is served, and stays (authenticated, it is evicted by
	 * nobody) while more without it arrive. */
	int w = raw_connect(&t);
	cr_assert(raw_health(w), "the client with the credential is served");
	int more[4];
	for (size_t i = 0; i < ARRAY_SIZE(more); i++)
		more[i] = raw_connect(&t);
	usleep(300 * 1000);
	cr_assert(raw_health(w), "its connection is still its own");
	for (size_t i = 0; i < ARRAY_SIZE(r); i++)
		close(r[i]);
	for (size_t i = 0; i < ARRAY_SIZE(more); i++)
		close(more[i]);
	close(w);
	svc_close(&t);

	/* No connection without the credential outlives the auth timeout,
	 * far shorter than the header timeout; one with it does. */
	sc.auth_timeout_ms = 300;
	svc_open_with(&t, NULL, &sc);
	int idle = raw_connect(&t), authed = raw_connect(&t), wrong = raw_connect(&t);
	cr_assert(raw_health(authed));
	static const char bad[] = "GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n\r\n";
	cr_assert_eq(send(wrong, bad, sizeof(bad) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(bad) - 1);
	cr_assert(closed_within(idle, 10000), "a silent connection outlived the auth timeout");
	char buf[1024];
	struct pollfd p = { .fd = wrong, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 5000), 1);
	ssize_t n = read(wrong, buf, sizeof(buf) - 1);
	cr_assert_gt(n, 0);
	buf[n] = 0;
	cr_assert(strncmp(buf, "HTTP/1.1 401", 12) == 0, "the wrong credential is answered 401: %s", buf);
	cr_assert(closed_within(wrong, 10000), "a connection after its 401 outlived the auth timeout");
	usleep(500 * 1000);
	cr_assert(raw_health(authed), "the authenticated connection was closed at the auth timeout");
	close(idle);
	close(authed);
	close(wrong);
	svc_close(&t);
}

Test(service, connection_limit_and_header_cap)
{
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.max_connections = 2;
	/* Only the limit can close the third connection within the poll. */
	sc.auth_timeout_ms = sc.header_timeout_ms = 20000;
	svc t;
	svc_open_with(&t, NULL, &sc);
	/* Two authenticated connections, waiting for their next request. */
	int a = raw_connect(&t);
	cr_assert(raw_health(a));
	int b = raw_connect(&t);
	cr_assert(raw_health(b));
	usleep(200 * 1000);
	int c = raw_connect(&t);
	struct pollfd p = { .fd = c, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 3000), 1, "the third connection is closed");
	char ch;
	cr_assert_leq(read(c, &ch, 1), 0);
	close(c);
	close(a);
	close(b);
	usleep(300 * 1000);
	cr_assert_eq(live(&t), 0, "a place is free again");

	size_t n = 64 * 1024;
	char *big = malloc(n + 256);
	int w = snprintf(big, 256, "GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN
	                 "\r\nX-Pad: ");
	memset(big + w, 'p', n);
	memcpy(big + w + n, "\r\n\r\n", 4);
	int fd = raw_connect(&t);
	ssize_t sent = send(fd, big, (size_t)w + n + 4, MSG_NOSIGNAL);
	(void)sent;
	char resp_buf[64] = { 0 };
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 5000), 1);
	ssize_t got = read(fd, resp_buf, sizeof(resp_buf) - 1);
	cr_assert(got <= 0 || strncmp(resp_buf, "HTTP/1.1 4", 10) == 0, "refused: %s", resp_buf);
	close(fd);
	free(big);
	cr_assert_eq(live(&t), 0, "the service goes on");
	svc_close(&t);
}

/* The socket: its mode, a non-socket is never replaced, a dead service's
 * socket is. */
Test(service, socket_file_rules)
{
	svc t;
	svc_open(&t);
	struct stat st;
	cr_assert_eq(lstat(t.sock, &st), 0);
	cr_assert(S_ISSOCK(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0660);
	/* A second service on the same path: refused, the first untouched. */
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	char listen[160];
	snprintf(listen, sizeof(listen), "unix:%s", t.sock);
	sc.listen = listen;
	sc.credential = TOKEN;
	sc.credential_len = strlen(TOKEN);
	airlock_service *second = NULL;
	airlock_error err = { 0 };
	cr_assert_lt(airlock_service_new(&sc, t.exec, &second, &err), 0);
	cr_assert_eq(live(&t), 0, "the first still answers");
	svc_close(&t);

	char dir[] = "/tmp/airlock-svc2-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof(path), "%s/plain", dir);
	FILE *f = fopen(path, "w");
	fputs("keep me", f);
	fclose(f);
	snprintf(listen, sizeof(listen), "unix:%s", path);
	airlock_exec *e = NULL;
	airlock_fake *fk = NULL;
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cr_assert_eq(airlock_fake_new(&fk, &err), 0);
	cr_assert_eq(airlock_exec_new(airlock_fake_ops(), fk, &cfg, &e, &err), 0);
	cr_assert_lt(airlock_service_new(&sc, e, &second, &err), 0);
	cr_assert(strstr(err.message, "not a socket"), "%s", err.message);
	cr_assert_eq(lstat(path, &st), 0);
	cr_assert(S_ISREG(st.st_mode), "the file is kept");
	unlink(path);
	/* A stale socket (bound, nobody listening) is replaced. */
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	strcpy(sa.sun_path, path);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	sc.socket_mode = 0600;
	cr_assert_eq(airlock_service_new(&sc, e, &second, &err), 0, "%s", err.message);
	cr_assert_eq(lstat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600);
	airlock_service_free(second);
	airlock_exec_free(e);
	rmdir(dir);
}

/* ---- shutdown ------------------------------------------------------------------------ */

Test(service, shutdown_returns_partial_output)
{
	svc t;
	svc_open(&t);
	char *argv[] = { "sleepy", NULL };
	airlock_fake_behaviour b = { .stdout_data = "so far", .stdout_len = 6, .runs_for_ms = 30000 };
	airlock_environment_handle h;
	scripted(&t, argv, &b, &h);
	bg_exec bg = { .t = &t, .h = &h, .argv = argv };
	pthread_create(&bg.th, NULL, bg_main, &bg);
	usleep(500 * 1000);
	airlock_service_shutdown(t.service);
	pthread_join(bg.th, NULL);
	cr_assert_eq(bg.r.status, 200, "%s", bg.r.body);
	cr_assert_str_eq(kill_reason(&bg.r), "SERVICE_SHUTDOWN");
	cr_assert_str_eq(jstr(json_object_get(bg.r.json, "result"), "stdout"), "c28gZmFy");
	resp_clear(&bg.r);
	resp r;
	http(&t, "GET", "/v1/health", TOKEN, NULL, NULL, 0, &r);
	cr_assert(json_is_true(json_object_get(r.json, "shutting_down")));
	resp_clear(&r);
	_cleanup_free_ char *body = execute_body(argv, false);
	char path[160];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/execute", h.environment_id);
	http(&t, "POST", path, TOKEN, &h, body, strlen(body), &r);
	expect_error(&r, 503, "ExecutionUnavailable", NULL);
	resp_clear(&r);
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

/* ---- native: a real command's output, streamed ------------------------------------- */

/* The spec of the default image, as the provision body's member. */
static char *mechanism_spec_json(const char *digest)
{
	airlock_environment_spec spec;
	sandbox_test_spec(&spec, "t1", digest, NULL);
	airlock_error err = { 0 };
	char *sj = airlock_environment_spec_to_json(&spec, &err);
	airlock_environment_spec_clear(&spec);
	cr_assert_not_null(sj, "%s", err.message);
	return sj;
}

Test(service_native, streamed_real_command)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	native_test_require(digest);
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	airlock_exec *e = native_test_open(&cfg);
	svc t;
	svc_open_with(&t, e, NULL);
	airlock_error err = { 0 };
	char *sj = mechanism_spec_json(digest);
	_cleanup_free_ char *body = NULL;
	cr_assert(asprintf(&body, "{\"spec\":%s}", sj) > 0);
	free(sj);
	resp r;
	http(&t, "POST", "/v1/sandboxes", TOKEN, NULL, body, strlen(body), &r);
	cr_assert_eq(r.status, 201, "%s", r.body);
	char *text = json_dumps(json_object_get(r.json, "handle"), JSON_COMPACT);
	airlock_environment_handle h = { 0 };
	cr_assert_eq(airlock_environment_handle_from_json(text, strlen(text), &h, &err), 0);
	free(text);
	resp_clear(&r);
	char *argv[] = { "sh", "-c", "echo first; sleep 2; echo second >&2", NULL };
	stream_rec s;
	stream_execute(&t, &h, argv, &s);
	cr_assert_geq(s.result_ms - s.first_output_ms, 1000, "the first line came as it was written");
	cr_assert_eq(json_integer_value(json_object_get(s.result, "exit_code")), 0);
	expect_bytes(s.result, "stdout", &s.out);
	expect_bytes(s.result, "stderr", &s.err);
	cr_assert_eq(s.out.len, 6);
	stream_rec_clear(&s);
	char path[160];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", h.environment_id);
	http(&t, "DELETE", path, TOKEN, &h, NULL, 0, &r);
	cr_assert_eq(r.status, 204);
	resp_clear(&r);
	airlock_environment_handle_clear(&h);
	svc_close(&t);
}

static size_t native_live(void *a)
{
	return airlock_native_live_count(a);
}

static size_t gvisor_live(void *a)
{
	return airlock_gvisor_live_count(a);
}

/* The race on a real mechanism: the init, cgroups, loop device and the
 * service's descriptors of a sandbox the adapter registered after its
 * destroy answered would all stay. */
Test(service_native, destroy_racing_provision_leaves_nothing)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	native_test_require(digest);
	airlock_exec_config cfg;
	airlock_service_config sc;
	capped_config(&cfg, &sc, 2);
	airlock_native *n = NULL;
	airlock_exec *e = native_test_open_with(&cfg, &n);
	svc t;
	svc_open_with(&t, e, &sc);
	_cleanup_free_ char *sj = mechanism_spec_json(digest);
	destroy_races_provision(&t, sj, 6, n, native_live, 2);
	svc_close(&t);
}

Test(service_gvisor, destroy_racing_provision_leaves_nothing, .timeout = 600)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	gvisor_test_require(digest);
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	airlock_gvisor *g = NULL;
	airlock_exec *e = gvisor_test_open_with(&cfg, &g);
	svc t;
	svc_open_with(&t, e, NULL);
	_cleanup_free_ char *sj = mechanism_spec_json(digest);
	destroy_races_provision(&t, sj, 3, g, gvisor_live, 0);
	svc_close(&t);
}

/* ---- the service: section of the settings ------------------------------------------ */

Test(service_settings, defaults_file_env_and_checks)
{
	airlock_settings s = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_default(&s, &err), 0, "%s", err.message);
	cr_assert_str_eq(s.service.listen, "unix:/run/airlock/airlock.sock");
	cr_assert_eq(s.service.max_sandboxes, 64);
	cr_assert_eq(s.service.max_connections, 256);
	cr_assert_null(s.service.credential_file);
	cr_assert_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	airlock_settings_clear(&s);

	static const char doc[] = "service:\n  listen: 127.0.0.1:8443\n  tls_cert_file: /c.pem\n"
	                          "  tls_key_file: /k.pem\n  credential_file: /etc/airlock/tok\n"
	                          "  max_sandboxes: 8\n  socket_group: airlock\n";
	cr_assert_eq(airlock_settings_parse("t.yaml", doc, sizeof(doc) - 1, &s, &err), 0, "%s",
	             err.message);
	cr_assert_str_eq(s.service.listen, "127.0.0.1:8443");
	cr_assert_eq(s.service.max_sandboxes, 8);
	cr_assert_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	char *envp[] = { "AIRLOCK_SERVICE_MAX_SANDBOXES=3", "AIRLOCK_SERVICE_LISTEN=unix:/tmp/x.sock", NULL };
	cr_assert_eq(airlock_settings_apply_env(&s, envp, &err), 0, "%s", err.message);
	cr_assert_eq(s.service.max_sandboxes, 3);
	cr_assert_str_eq(s.service.listen, "unix:/tmp/x.sock");
	char *bad_env[] = { "AIRLOCK_SERVICE_MAX_SANDBOXES=many", NULL };
	cr_assert_lt(airlock_settings_apply_env(&s, bad_env, &err), 0);
	cr_assert(strstr(err.message, "AIRLOCK_SERVICE_MAX_SANDBOXES"), "%s", err.message);
	cr_assert(airlock_settings_env_name("AIRLOCK_SERVICE_LISTEN"));
	cr_assert_not(airlock_settings_env_name("AIRLOCK_SERVICE_TOKEN"));
	airlock_settings_clear(&s);

	const struct {
		const char *doc, *needle;
	} rows[] = {
		{ "service:\n  listen: 127.0.0.1:8443\n", "tls_cert_file" },
		{ "service:\n  listen: relative.sock\n", "service.listen" },
		{ "service:\n  listen: unix:relative\n", "service.listen" },
		{ "service:\n  tls_cert_file: /c.pem\n", "go together" },
		{ "service:\n  tls_client_ca_file: /ca.pem\n", "needs TLS" },
		{ "service:\n  max_sandboxes: 0\n", "max_sandboxes" },
		{ "service:\n  max_connections: 100000\n", "max_connections" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		cr_assert_eq(airlock_settings_parse("t.yaml", rows[i].doc, strlen(rows[i].doc), &s, &err), 0,
		             "%s", err.message);
		cr_assert_lt(airlock_settings_check(&s, &err), 0, "row %zu accepted", i);
		cr_assert(strstr(err.message, rows[i].needle), "row %zu: %s", i, err.message);
		airlock_settings_clear(&s);
	}
	static const char unknown[] = "service:\n  listn: unix:/x\n";
	cr_assert_lt(airlock_settings_parse("t.yaml", unknown, sizeof(unknown) - 1, &s, &err), 0);
	cr_assert(strstr(err.message, "service.listn"), "%s", err.message);
}

Test(service_settings, environment_check)
{
	airlock_error err = { 0 };
	char *ok_env[] = { "PATH=/usr/bin", "AIRLOCK_SERVICE_LISTEN=unix:/x", "CREDENTIALS_DIRECTORY=/run/c",
		           "LANG=C.UTF-8", NULL };
	cr_assert_eq(airlock_service_environment_check(ok_env, &err), 0, "%s", err.message);
	const struct {
		const char *entry, *name, *value;
	} rows[] = {
		{ "GITHUB_TOKEN=x", "GITHUB_TOKEN", NULL },
		{ "AIRLOCK_SERVICE_TOKEN=abc", "AIRLOCK_SERVICE_TOKEN", NULL },
		{ "NOTE=AKIAIOSFODNN7EXAMPLE", "NOTE", "AKIAIOSFODNN7EXAMPLE" },
		{ "DB=postgres://u:hunter2@db/x", "DB", "hunter2" },
		{ "AIRLOCK_SERVICE_LISTEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789", "AIRLOCK_SERVICE_LISTEN",
		  "ghp_abcdef" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		char *envp[] = { "PATH=/bin", (char *)rows[i].entry, NULL };
		cr_assert_lt(airlock_service_environment_check(envp, &err), 0, "%s accepted", rows[i].entry);
		cr_assert(strstr(err.message, rows[i].name), "%s", err.message);
		if (rows[i].value)
			cr_assert_null(strstr(err.message, rows[i].value), "the value is shown: %s", err.message);
	}
	cr_assert_not_null(airlock_service_secret_patterns()[0]);
}

/* The fake with a destroy whose first call waits at a gate until the test
 * opens it: a destroy that checked the handle and is slow to tear the
 * sandbox down (a native destroy takes hundreds of milliseconds). */
static atomic_int gate_destroys;
static atomic_bool gate_entered, gate_open;

static int gated_fake_destroy(void *ctx, const char *id, airlock_error *err)
{
	if (atomic_fetch_add(&gate_destroys, 1) == 0) {
		atomic_store(&gate_entered, true);
		for (int i = 0; i < 5000 && !atomic_load(&gate_open); i++) {
			struct timespec ts = { .tv_nsec = 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
	return airlock_fake_ops()->destroy(ctx, id, err);
}

typedef struct destroy_arg {
	airlock_exec *e;
	const airlock_environment_handle *h;
	atomic_bool done;
	int r;
} destroy_arg;

static void *destroy_thread(void *p)
{
	destroy_arg *a = p;
	airlock_error err = { 0 };
	a->r = airlock_exec_destroy(a->e, a->h, &err);
	atomic_store(&a->done, true);
	return NULL;
}

/*
 * Two destroys of one sandbox at once, and a provision of the same id
 * between them (a worker provisions under ids it chooses: provision_as):
 * the slower destroy checked the old sandbox's handle, and must not tear
 * down the new sandbox nor take its record (the new one would be live in
 * the adapter with no record: never expired, outside max_sandboxes, and no
 * handle could reach it). Either the provision is refused while a destroy
 * of the id is in flight, or the new sandbox stays live and listed.
 */
Test(service, a_slow_destroy_does_not_take_the_next_sandbox_of_its_id)
{
	static airlock_exec_ops gated;
	gated = *airlock_fake_ops();
	gated.destroy = gated_fake_destroy;
	atomic_store(&gate_destroys, 0);
	atomic_store(&gate_entered, false);
	atomic_store(&gate_open, false);
	airlock_error err = { 0 };
	airlock_fake *f = NULL;
	airlock_exec *e = NULL;
	cr_assert_eq(airlock_fake_new(&f, &err), 0);
	cr_assert_eq(airlock_exec_new(&gated, f, NULL, &e, &err), 0, "%s", err.message);
	airlock_environment_spec spec;
	test_spec(&spec, "t1", "r1");
	char id[AIRLOCK_ENVIRONMENT_ID_MAX];
	cr_assert_eq(airlock_environment_id_new(id, &err), 0);
	airlock_environment_handle h1 = { 0 }, h2 = { 0 };
	cr_assert_eq(airlock_exec_provision_as(e, &spec, id, &h1, &err), 0, "%s", err.message);

	destroy_arg slow = { .e = e, .h = &h1 }, second = { .e = e, .h = &h1 };
	pthread_t ts, t2;
	cr_assert_eq(pthread_create(&ts, NULL, destroy_thread, &slow), 0);
	for (int i = 0; i < 5000 && !atomic_load(&gate_entered); i++)
		nanosleep(&(struct timespec){ .tv_nsec = 1000 * 1000 }, NULL);
	cr_assert(atomic_load(&gate_entered), "the first destroy never reached the adapter");
	cr_assert_eq(pthread_create(&t2, NULL, destroy_thread, &second), 0);
	/* The second destroy either finishes (the old sandbox is gone) or
	 * waits for the first: a bounded look. */
	for (int i = 0; i < 500 && !atomic_load(&second.done); i++)
		nanosleep(&(struct timespec){ .tv_nsec = 1000 * 1000 }, NULL);
	airlock_error perr = { 0 };
	int pr = airlock_exec_provision_as(e, &spec, id, &h2, &perr);
	atomic_store(&gate_open, true);
	pthread_join(ts, NULL);
	pthread_join(t2, NULL);
	cr_assert_eq(slow.r, 0);
	cr_assert_eq(second.r, 0);
	if (pr < 0) {
		cr_assert_eq(perr.cls, AIRLOCK_ERR_EXECUTION_REJECTED, "%s", perr.message);
		cr_assert_eq(airlock_fake_live_count(f), 0);
	} else {
		cr_assert_eq(airlock_fake_live_count(f), 1,
		             "a destroy of the old sandbox tore down the new one of its id");
		airlock_exec_entry *v = NULL;
		size_t n = 0;
		cr_assert_eq(airlock_exec_list(e, &v, &n, &err), 0);
		cr_assert_eq(n, 1, "the new sandbox's record was taken by the old one's destroy");
		airlock_exec_list_free(v, n);
		cr_assert_eq(airlock_exec_destroy(e, &h2, &err), 0, "%s", err.message);
		airlock_environment_handle_clear(&h2);
	}
	cr_assert_eq(airlock_fake_live_count(f), 0);
	airlock_environment_handle_clear(&h1);
	airlock_environment_spec_clear(&spec);
	airlock_exec_free(e);
}

/* ---- the workspace stream (GET .../workspace/stream) ------------------------- */

/* A client of t through the remote adapter, with one sandbox of the fake
 * whose workspace holds big.bin (n bytes, the pattern below) written by a
 * scripted command, and that sandbox's workspace. */
typedef struct stream_client {
	airlock_exec *exec;
	airlock_environment_spec spec;
	airlock_environment_handle h;
	/* The served sandbox's own handle (the service's clock's timestamps),
	 * for requests made without the remote adapter. */
	airlock_environment_handle served;
	airlock_workspace *ws;
	unsigned char *bytes;
	size_t n;
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
} stream_client;

static void stream_client_open(svc *t, stream_client *c, size_t n)
{
	memset(c, 0, sizeof(*c));
	char listen[160];
	snprintf(listen, sizeof(listen), "unix:%s", t->sock);
	airlock_remote_config rc = { .address = listen, .credential = TOKEN,
		                     .credential_len = strlen(TOKEN) };
	airlock_remote *rm = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_remote_new(&rc, &rm, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_new(airlock_remote_ops(), rm, NULL, &c->exec, &err), 0, "%s",
	             err.message);
	test_spec(&c->spec, "t1", "r1");
	cr_assert_eq(airlock_exec_provision(c->exec, &c->spec, &c->h, &err), 0, "%s", err.message);
	c->n = n;
	c->bytes = malloc(n ? n : 1);
	cr_assert_not_null(c->bytes);
	for (size_t i = 0; i < n; i++)
		c->bytes[i] = (unsigned char)(i * 2654435761u >> 13);
	cr_assert_eq(util_sha256_hex(c->bytes, n, c->hex), 0);
	char *argv[] = { "make-big", NULL };
	const airlock_fake_file_op ops[] = { { .path = "big.bin", .data = c->bytes, .len = n } };
	cr_assert_eq(airlock_fake_script(t->fake, (const char *const *)argv,
	                                 &(airlock_fake_behaviour){ .file_ops = ops, .n_file_ops = 1 },
	                                 &err),
	             0, "%s", err.message);
	airlock_exec_call call = { .tenant_id = "t1", .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_execution_command cmd = test_command(argv);
	airlock_execution_result r;
	cr_assert_eq(airlock_exec_execute(c->exec, &call, &c->h, &cmd, &r, &err), 0, "%s",
	             err.message);
	airlock_execution_result_clear(&r);
	cr_assert_eq(airlock_exec_workspace(c->exec, &call, &c->h, &c->ws, &err), 0, "%s",
	             err.message);
	airlock_exec_entry *v = NULL;
	size_t nv = 0;
	cr_assert_eq(airlock_exec_list(t->exec, &v, &nv, &err), 0, "%s", err.message);
	cr_assert_eq(nv, 1);
	c->served = (airlock_environment_handle){ .tenant_id = strdup(v[0].tenant_id),
		                                  .run_id = strdup(v[0].run_id),
		                                  .lease_epoch = v[0].lease_epoch,
		                                  .created_at_ms = v[0].created_at_ms,
		                                  .expires_at_ms = v[0].expires_at_ms };
	memcpy(c->served.environment_id, v[0].environment_id, sizeof(c->served.environment_id));
	airlock_exec_list_free(v, nv);
}

static void stream_client_close(stream_client *c)
{
	airlock_workspace_release(c->ws);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_destroy(c->exec, &c->h, &err), 0, "%s", err.message);
	airlock_exec_free(c->exec);
	airlock_environment_handle_clear(&c->h);
	airlock_environment_handle_clear(&c->served);
	airlock_environment_spec_clear(&c->spec);
	free(c->bytes);
}

typedef struct hashing_sink {
	util_sha256 *hash;
	uint64_t n;
} hashing_sink;

static int hashing_sink_take(void *arg, const void *buf, size_t len, airlock_error *err)
{
	(void)err;
	hashing_sink *k = arg;
	util_sha256_update(k->hash, buf, len);
	k->n += len;
	return 0;
}

/* The whole file through the remote adapter: 0 with the digest checked by
 * the wrapper against the service's, or the error's code. */
static int stream_whole(stream_client *c, airlock_error *err)
{
	hashing_sink k = { .hash = util_sha256_new() };
	uint64_t size = 0;
	char src[AIRLOCK_SHA256_HEX_LEN + 1];
	int r = airlock_workspace_read_stream(c->ws, "big.bin", c->n, hashing_sink_take, &k, &size,
	                                      src, err);
	char got[AIRLOCK_SHA256_HEX_LEN + 1];
	cr_assert_eq(util_sha256_final_hex(k.hash, got), 0);
	if (r < 0)
		return r;
	cr_assert_eq(size, c->n);
	cr_assert_eq(k.n, c->n);
	cr_assert_str_eq(src, c->hex);
	cr_assert_str_eq(got, c->hex);
	return 0;
}

typedef struct header_rec {
	char lines[16][256];
	size_t n;
	bool body_seen;
	size_t trailer_from; /* the first line after the body */
} header_rec;

static size_t header_take(char *p, size_t sz, size_t n, void *arg)
{
	header_rec *h = arg;
	if (h->n < 16) {
		snprintf(h->lines[h->n], sizeof(h->lines[0]), "%.*s", (int)(sz * n), p);
		h->n++;
	}
	return sz * n;
}

static size_t body_take(char *p, size_t sz, size_t n, void *arg)
{
	header_rec *h = arg;
	if (!h->body_seen) {
		h->body_seen = true;
		h->trailer_from = h->n;
	}
	(void)p;
	return sz * n;
}

static bool has_line(const header_rec *h, size_t from, const char *want)
{
	for (size_t i = from; i < h->n; i++)
		if (strncasecmp(h->lines[i], want, strlen(want)) == 0)
			return true;
	return false;
}

/* The wire format (docs/service-api.md): a chunked body announced by
 * Airlock-Size, the digest announced by Trailer and sent after the body. */
Test(service, workspace_stream_wire_format)
{
	svc t;
	svc_open(&t);
	stream_client c;
	stream_client_open(&t, &c, 3 * AIRLOCK_WORKSPACE_STREAM_CHUNK + 7);
	char path[256], sizeh[64], digest[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/stream?path=big.bin&max_bytes=%zu",
	         c.h.environment_id, c.n);
	snprintf(sizeh, sizeof(sizeh), "Airlock-Size: %zu\r\n", c.n);
	snprintf(digest, sizeof(digest), "Airlock-Sha256: %s\r\n", c.hex);

	CURL *e = curl_easy_init();
	char url[512], auth[128];
	snprintf(url, sizeof(url), "http://localhost%s", path);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", TOKEN);
	_cleanup_free_ char *hh = handle_header(&c.served);
	struct curl_slist *hd = curl_slist_append(NULL, auth);
	hd = curl_slist_append(hd, hh);
	header_rec h = { 0 };
	curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, t.sock);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_take);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, &h);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, body_take);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &h);
	cr_assert_eq(curl_easy_perform(e), CURLE_OK);
	long status = 0;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	cr_assert_eq(status, 200);
	cr_assert(h.body_seen);
	cr_assert(has_line(&h, 0, sizeh), "no %s", sizeh);
	cr_assert(has_line(&h, 0, "Trailer: Airlock-Sha256"));
	cr_assert(has_line(&h, 0, "Transfer-Encoding: chunked"));
	cr_assert_not(has_line(&h, 0, "Content-Length"));
	cr_assert(has_line(&h, h.trailer_from, digest), "no trailer %s after the body", digest);
	cr_assert_not(has_line(&h, 0, "Airlock-Sha256") && !has_line(&h, h.trailer_from,
	                                                             "Airlock-Sha256"));

	/* HTTP/1.0 has no trailer: refused, never answered without the digest. */
	h = (header_rec){ 0 };
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_0);
	cr_assert_eq(curl_easy_perform(e), CURLE_OK);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	cr_assert_eq(status, 400);
	curl_slist_free_all(hd);
	curl_easy_cleanup(e);

	/* max_bytes is required and bounded; a file over it is refused. */
	resp r;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/stream?path=big.bin",
	         c.h.environment_id);
	http(&t, "GET", path, TOKEN, &c.served, NULL, 0, &r);
	expect_error(&r, 400, "ToolValidationError", "max_bytes");
	resp_clear(&r);
	snprintf(path, sizeof(path),
	         "/v1/sandboxes/%s/workspace/stream?path=big.bin&max_bytes=%zu",
	         c.h.environment_id, c.n - 1);
	http(&t, "GET", path, TOKEN, &c.served, NULL, 0, &r);
	expect_error(&r, 400, "ToolValidationError", "more than the");
	resp_clear(&r);
	snprintf(path, sizeof(path),
	         "/v1/sandboxes/%s/workspace/stream?path=nothing&max_bytes=10",
	         c.h.environment_id);
	http(&t, "GET", path, TOKEN, &c.served, NULL, 0, &r);
	expect_error(&r, 422, "SystemError", NULL);
	cr_assert_str_eq(jstr(r.json, "errno"), "ENOENT");
	resp_clear(&r);
	stream_client_close(&c);
	svc_close(&t);
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Send a stream's request on a raw connection; the answer is left unread. */
static int raw_stream_request(svc *t, const stream_client *c)
{
	int fd = raw_connect(t);
	_cleanup_free_ char *hh = handle_header(&c->served);
	char req[4096];
	int n = snprintf(req, sizeof(req),
	                 "GET /v1/sandboxes/%s/workspace/stream?path=big.bin&max_bytes=%zu "
	                 "HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n%s\r\n\r\n",
	                 c->h.environment_id, c->n, TOKEN, hh);
	cr_assert_eq(write(fd, req, (size_t)n), n);
	return fd;
}

/* A client that goes away halfway and one that stops reading hold only
 * their own connections: the service streams the same file to another
 * client meanwhile, and once they are gone everything they held (the
 * connection, the stream, its buffer) is freed: the process's descriptors
 * come back to what they were. */
Test(service, workspace_stream_client_gone_or_stalled_holds_only_itself)
{
	svc t;
	svc_open(&t);
	stream_client c;
	stream_client_open(&t, &c, (size_t)32 << 20);
	airlock_error err = { 0 };
	/* Warm: the remote adapter keeps its connection for the next call. */
	cr_assert_eq(stream_whole(&c, &err), 0, "%s", err.message);
	int before = open_fds();

	int gone = raw_stream_request(&t, &c);
	int stalled = raw_stream_request(&t, &c);
	static char buf[1 << 16];
	size_t got = 0;
	while (got < ((size_t)4 << 20)) {
		ssize_t k = read(gone, buf, sizeof(buf));
		cr_assert_gt(k, 0, "read %zd after %zu bytes (%s): %.700s", k, got, strerror(errno), buf);
		got += (size_t)k;
	}
	close(gone);
	/* The stalled one has read nothing; another client is served whole. */
	cr_assert_eq(stream_whole(&c, &err), 0, "%s", err.message);
	cr_assert_eq(stream_whole(&c, &err), 0, "%s", err.message);
	close(stalled);
	int now = open_fds();
	for (int i = 0; i < 50 && now > before; i++) {
		usleep(100 * 1000);
		now = open_fds();
	}
	cr_assert_leq(now, before, "%d descriptors before, %d after the clients left", before,
	              now);
	cr_assert_eq(stream_whole(&c, &err), 0, "%s", err.message);
	stream_client_close(&c);
	svc_close(&t);
}

#ifdef AIRLOCK_FAULT_INJECTION
#include "util/fault.h"

/* A digest that is not the one of the bytes sent (injected in the
 * service's trailer) is ArtifactIntegrityError at the client, which keeps
 * nothing of it; the next stream is whole. */
Test(service, workspace_stream_digest_difference_is_integrity_error)
{
	svc t;
	svc_open(&t);
	stream_client c;
	stream_client_open(&t, &c, 2 * AIRLOCK_WORKSPACE_STREAM_CHUNK + 1);
	airlock_error err = { 0 };
	bool fired_here = false;
	for (unsigned nth = 1; nth < 64 && !fired_here; nth++) {
		util_fault_arm(nth);
		int r = stream_whole(&c, &err);
		const char *fired = util_fault_fired();
		unsigned hits = util_fault_hits();
		util_fault_arm(0);
		if (fired && strcmp(fired, "service.workspace.stream.digest") == 0) {
			fired_here = true;
			cr_assert_eq(r, airlock_errcode(AIRLOCK_ERR_ARTIFACT_INTEGRITY), "%d %s", r,
			             err.message);
			cr_assert(strstr(err.message, "nothing of it may be kept"), "%s", err.message);
		} else if (hits < nth) {
			break;
		}
	}
	cr_assert(fired_here, "the digest's fault point was never reached");
	cr_assert_eq(stream_whole(&c, &err), 0, "%s", err.message);
	stream_client_close(&c);
	svc_close(&t);
}
#endif

#ifdef AIRLOCK_FAULT_INJECTION
#include "util/fault.h"

/* Fail each check of one request in turn (util_fault_arm): every failed
 * check is answered with an error status naming its point (never a
 * closed connection), and the same request right after succeeds with
 * want. The number of checks seen. */
static unsigned walk_checks(svc *t, const char *method, const char *path,
                            const airlock_environment_handle *h, const char *body, long want)
{
	size_t blen = body ? strlen(body) : 0;
	unsigned nth;
	for (nth = 1;; nth++) {
		resp r;
		util_fault_arm(nth);
		http(t, method, path, TOKEN, h, body, blen, &r);
		unsigned hits = util_fault_hits();
		const char *fired = util_fault_fired();
		util_fault_arm(0);
		if (hits < nth) {
			cr_assert_eq(r.status, want, "%s %s: no fault at check %u, yet: %s", method, path,
			             nth, r.body);
			resp_clear(&r);
			return nth - 1;
		}
		cr_assert_geq(r.status, 400, "%s %s: check %u (%s): %ld", method, path, nth, fired,
		              r.status);
		cr_assert(r.json && strstr(jstr(r.json, "message"), fired),
		          "%s %s: check %u: the error names %s: %s", method, path, nth, fired,
		          r.body ? r.body : "");
		resp_clear(&r);
		http(t, method, path, TOKEN, h, body, blen, &r);
		cr_assert_eq(r.status, want, "%s %s: after %s: %s", method, path, fired, r.body);
		resp_clear(&r);
	}
}

/* Destroy h's sandbox over the API, check nothing is live, close t. */
static void destroy_and_close(svc *t, airlock_environment_handle *h)
{
	char path[160];
	resp r;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", h->environment_id);
	http(t, "DELETE", path, TOKEN, h, NULL, 0, &r);
	cr_assert_eq(r.status, 204, "%s", r.body ? r.body : "");
	resp_clear(&r);
	cr_assert_eq(live(t), 0);
	airlock_environment_handle_clear(h);
	svc_close(t);
}

/* Each of a blocking execute's checks in the service failed in turn (its
 * job's record, its thread, its answer; the fake has none of its own): the
 * client gets an error status naming the point, the service answers the
 * next command in the same sandbox, and at the end nothing is left on the
 * adapter (under ASan, no job record either). The streamed execute and
 * the provision are walked through the remote adapter (test_remote). */
Test(service, each_check_of_a_blocking_execute_fails_with_a_status, .timeout = 60)
{
	svc t;
	svc_open(&t);
	airlock_environment_handle h;
	provision(&t, "t1", NULL, &h);
	char *argv[] = { "true", NULL };
	_cleanup_free_ char *body = execute_body(argv, false);
	char path[160];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/execute", h.environment_id);
	cr_assert_geq(walk_checks(&t, "POST", path, &h, body, 200), 3);
	destroy_and_close(&t, &h);
}

/* The jobs that build an answer (health, list, the workspace's listing,
 * provenance and errno errors) fail it in turn: an error status naming
 * the point, the same request answered right after, nothing left. */
Test(service, each_answer_a_job_builds_fails_with_a_status, .timeout = 60)
{
	svc t;
	svc_open(&t);
	cr_assert_geq(walk_checks(&t, "GET", "/v1/health", NULL, NULL, 200), 1);
	airlock_environment_handle h;
	provision(&t, "t1", NULL, &h);
	cr_assert_geq(walk_checks(&t, "GET", "/v1/sandboxes", NULL, NULL, 200), 1);
	char path[256];
	resp r;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/file?path=x.txt", h.environment_id);
	http(&t, "PUT", path, TOKEN, &h, "x", 1, &r);
	cr_assert_eq(r.status, 204, "%ld %s", r.status, r.body);
	resp_clear(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/dir?path=.", h.environment_id);
	cr_assert_geq(walk_checks(&t, "GET", path, &h, NULL, 200), 1);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/provenance?path=x.txt",
	         h.environment_id);
	cr_assert_geq(walk_checks(&t, "GET", path, &h, NULL, 200), 1);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/workspace/file?path=none.txt&max_bytes=10",
	         h.environment_id);
	cr_assert_geq(walk_checks(&t, "GET", path, &h, NULL, 422), 1);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/cancel", h.environment_id);
	walk_checks(&t, "POST", path, &h, NULL, 200);
	destroy_and_close(&t, &h);
}
#endif

/* ---- the warm pool (service.pool, src/service/pool.h) ------------------------------- */

/* Every destroy's reason and every provision, as the observer hears them. */
typedef struct pool_log {
	pthread_mutex_t lock;
	unsigned provisioned;
	unsigned shutdown, pool_idle, pool_evicted, other;
} pool_log;

static void pool_log_event(void *arg, const airlock_exec_event *ev)
{
	pool_log *l = arg;
	pthread_mutex_lock(&l->lock);
	if (ev->kind == AIRLOCK_EXEC_EVENT_PROVISIONED)
		l->provisioned++;
	if (ev->kind == AIRLOCK_EXEC_EVENT_DESTROYED) {
		const char *r = ev->reason ? ev->reason : "";
		if (strcmp(r, "shutdown") == 0)
			l->shutdown++;
		else if (strcmp(r, "pool_idle") == 0)
			l->pool_idle++;
		else if (strcmp(r, "pool_evicted") == 0)
			l->pool_evicted++;
		else
			l->other++;
	}
	pthread_mutex_unlock(&l->lock);
}

static const airlock_exec_observer pool_obs = { .event = pool_log_event };

static void pool_open(svc *t, pool_log *pl, airlock_exec *native, int64_t size, int64_t per_key,
                      int64_t idle_ms, size_t max_sandboxes)
{
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.observer = &pool_obs;
	cfg.observer_arg = pl;
	cfg.max_sandboxes = max_sandboxes;
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.expire_interval_ms = 50;
	sc.max_sandboxes = max_sandboxes;
	if (native)
		svc_open_with(t, native, &sc);
	else
		svc_open_cfg(t, &cfg, &sc);
	svc_pool_config pc = { .size = size, .per_key = per_key, .max_idle_ms = idle_ms,
		               .max_sandboxes = max_sandboxes };
	airlock_error err = { 0 };
	cr_assert_eq(svc_service_pool_start(t->service, &pc, &err), 0, "%s", err.message);
}

/* Wait (bounded) until the pool holds want idle sandboxes. */
static void pool_wait_idle(svc *t, size_t want)
{
	svc_pool_stats st = { 0 };
	for (int i = 0; i < 3000; i++) {
		svc_pool_stats_get(t->service->pool, &st);
		if (st.idle >= want)
			return;
		usleep(10000);
	}
	cr_assert_fail("the pool holds %zu idle sandboxes, want %zu (refill failures %" PRIu64 ")",
	               st.idle, want, st.refill_failures);
}

/* The pooled entries of the list. */
static size_t listed_pooled(svc *t, char first_id[AIRLOCK_ENVIRONMENT_ID_MAX])
{
	resp r;
	http(t, "GET", "/v1/sandboxes", TOKEN, NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 200);
	json_t *a = json_object_get(r.json, "sandboxes");
	size_t n = 0;
	for (size_t i = 0; i < json_array_size(a); i++) {
		json_t *e = json_array_get(a, i);
		if (!json_is_true(json_object_get(e, "pooled")))
			continue;
		cr_assert_str_eq(jstr(e, "tenant_id"), AIRLOCK_POOL_TENANT);
		if (n++ == 0 && first_id)
			snprintf(first_id, AIRLOCK_ENVIRONMENT_ID_MAX, "%s", jstr(e, "environment_id"));
	}
	resp_clear(&r);
	return n;
}

/*
 * The first provision of a key is a miss (provisioned the plain way) and
 * teaches the pool the key; the next one with the same image, limits and
 * egress mode, for another tenant, is a hit: bound to that tenant, with
 * created_at and expires_at from the claim. A spec of other limits is a
 * normal provision. A pooled id answers no tenant's verb, and the listing
 * shows the pooled sandboxes under the pool's identity, counted in live.
 */
Test(service_pool, learn_hit_and_miss)
{
	pool_log pl = { .lock = PTHREAD_MUTEX_INITIALIZER };
	svc t;
	pool_open(&t, &pl, NULL, 4, 2, 60000, 16);
	airlock_environment_handle h1 = { 0 }, h2 = { 0 }, h3 = { 0 };
	provision(&t, "t1", NULL, &h1);
	svc_pool_stats st;
	svc_pool_stats_get(t.service->pool, &st);
	cr_assert_eq(st.misses, 1);
	cr_assert_eq(st.hits, 0);
	pool_wait_idle(&t, 2);
	char pooled_id[AIRLOCK_ENVIRONMENT_ID_MAX] = { 0 };
	cr_assert_eq(listed_pooled(&t, pooled_id), 2);
	cr_assert_eq(live(&t), 3, "pooled sandboxes count as live");

	/* A pooled id is no tenant's: execute finds it not live, DELETE finds
	 * it already gone and leaves it to the pool. */
	airlock_environment_handle forged = { 0 };
	snprintf(forged.environment_id, sizeof(forged.environment_id), "%s", pooled_id);
	forged.tenant_id = (char *)AIRLOCK_POOL_TENANT;
	forged.run_id = (char *)AIRLOCK_POOL_RUN;
	char path[160];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/execute", pooled_id);
	char *argv[] = { "true", NULL };
	_cleanup_free_ char *body = execute_body(argv, false);
	resp r;
	http(&t, "POST", path, TOKEN, &forged, body, strlen(body), &r);
	expect_error(&r, 404, "ExecutionRejected", "not live");
	resp_clear(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", pooled_id);
	http(&t, "DELETE", path, TOKEN, &forged, NULL, 0, &r);
	cr_assert_eq(r.status, 204);
	resp_clear(&r);
	cr_assert_eq(listed_pooled(&t, NULL), 2, "the pooled sandbox is still there");

	/* A spec refused with the sandbox untouched (an id already live)
	 * leaves the pool as it was, and gets the plain provision's answer. */
	_cleanup_free_ char *sj1 = spec_json("t9");
	_cleanup_free_ char *dup = NULL;
	cr_assert(asprintf(&dup, "{\"spec\":%s,\"environment_id\":\"%s\"}", sj1,
	                   h1.environment_id) > 0);
	http(&t, "POST", "/v1/sandboxes", TOKEN, NULL, dup, strlen(dup), &r);
	expect_error(&r, 409, "ExecutionRejected", "already live");
	resp_clear(&r);
	svc_pool_stats_get(t.service->pool, &st);
	cr_assert_eq(st.idle, 2, "the refused claim's sandbox is back in the pool");
	cr_assert_eq(listed_pooled(&t, NULL), 2);
	cr_assert_eq(pl.other, 0, "nothing was destroyed");

	int64_t before = util_now_ms();
	provision(&t, "t2", NULL, &h2);
	svc_pool_stats_get(t.service->pool, &st);
	cr_assert_eq(st.hits, 1);
	cr_assert_str_eq(h2.tenant_id, "t2");
	cr_assert_geq(h2.created_at_ms, before, "created_at counts from the claim");
	cr_assert_eq(h2.expires_at_ms - h2.created_at_ms, 1800 * 1000);
	/* The claimed sandbox works as any: a command, and its workspace. */
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/execute", h2.environment_id);
	http(&t, "POST", path, TOKEN, &h2, body, strlen(body), &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	resp_clear(&r);
	/* Under the handle of another tenant it is the usual suspicion. */
	airlock_environment_handle other = h2;
	other.tenant_id = (char *)"t1";
	http(&t, "POST", path, TOKEN, &other, body, strlen(body), &r);
	cr_assert_eq(r.status, 403, "%s", r.body);
	resp_clear(&r);

	/* Other limits: not the key; a plain provision. */
	airlock_environment_spec s;
	test_spec(&s, "t3", "r1");
	s.limits.memory_bytes = 128ll << 20;
	airlock_error err = { 0 };
	_cleanup_free_ char *sj = airlock_environment_spec_to_json(&s, &err);
	airlock_environment_spec_clear(&s);
	_cleanup_free_ char *pb = NULL;
	cr_assert(asprintf(&pb, "{\"spec\":%s}", sj) > 0);
	http(&t, "POST", "/v1/sandboxes", TOKEN, NULL, pb, strlen(pb), &r);
	cr_assert_eq(r.status, 201, "%s", r.body);
	resp_clear(&r);
	svc_pool_stats_get(t.service->pool, &st);
	cr_assert_eq(st.misses, 3, "the first, the refused id and the other limits");
	cr_assert_eq(st.hits, 1);

	/* A caller-chosen id (the worker's) is served from the pool too. */
	char want[AIRLOCK_ENVIRONMENT_ID_MAX];
	cr_assert_eq(airlock_environment_id_new(want, &err), 0);
	pool_wait_idle(&t, 2);
	provision(&t, "t4", want, &h3);
	cr_assert_str_eq(h3.environment_id, want);
	svc_pool_stats_get(t.service->pool, &st);
	cr_assert_eq(st.hits, 2);
	airlock_environment_handle_clear(&h1);
	airlock_environment_handle_clear(&h2);
	airlock_environment_handle_clear(&h3);
	svc_close(&t);
	/* h2 went as a suspicion; every other sandbox at the adapter's free,
	 * the pooled ones with them. */
	cr_assert_eq(pl.other, 1);
	cr_assert_geq(pl.shutdown, 4);
}

/* A pooled sandbox nobody claims lives max_idle at most (the expiry timer
 * ends it as "pool_idle"), and the pool makes another. */
Test(service_pool, idle_bound)
{
	pool_log pl = { .lock = PTHREAD_MUTEX_INITIALIZER };
	svc t;
	pool_open(&t, &pl, NULL, 2, 1, 200, 16);
	airlock_environment_handle h = { 0 };
	provision(&t, "t1", NULL, &h);
	bool ended = false;
	for (int i = 0; i < 500 && !ended; i++) {
		pthread_mutex_lock(&pl.lock);
		ended = pl.pool_idle >= 2;
		pthread_mutex_unlock(&pl.lock);
		usleep(10000);
	}
	cr_assert(ended, "pooled sandboxes past their idle bound were destroyed as pool_idle");
	airlock_environment_handle_clear(&h);
	svc_close(&t);
	cr_assert_eq(pl.other, 0);
}

/* At max_sandboxes a miss makes room: an idle pooled sandbox of another key
 * goes, and the plain provision succeeds. */
Test(service_pool, miss_at_capacity_makes_room)
{
	pool_log pl = { .lock = PTHREAD_MUTEX_INITIALIZER };
	svc t;
	pool_open(&t, &pl, NULL, 2, 2, 60000, 4);
	airlock_environment_handle h1 = { 0 }, h2 = { 0 };
	provision(&t, "t1", NULL, &h1);
	pool_wait_idle(&t, 2);
	cr_assert_eq(live(&t), 3, "the pool left one place free");
	provision(&t, "t2", NULL, &h2); /* a hit: still 3 live, the refill is under way */
	/* Fill the last place with a spec of another key, then one more. */
	airlock_environment_spec s;
	test_spec(&s, "t3", "r1");
	s.limits.pids_max = 32;
	airlock_error err = { 0 };
	_cleanup_free_ char *sj = airlock_environment_spec_to_json(&s, &err);
	airlock_environment_spec_clear(&s);
	_cleanup_free_ char *pb = NULL;
	cr_assert(asprintf(&pb, "{\"spec\":%s}", sj) > 0);
	for (int i = 0; i < 2; i++) {
		resp r;
		http(&t, "POST", "/v1/sandboxes", TOKEN, NULL, pb, strlen(pb), &r);
		cr_assert_eq(r.status, 201, "provision %d at the cap: %s", i, r.body);
		resp_clear(&r);
	}
	cr_assert_geq(pl.pool_evicted, 1);
	airlock_environment_handle_clear(&h1);
	airlock_environment_handle_clear(&h2);
	svc_close(&t);
}

Test(service_pool, settings)
{
	airlock_settings s = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_default(&s, &err), 0, "%s", err.message);
	cr_assert_eq(s.service.pool.size, 0);
	cr_assert_eq(s.service.pool.per_key, 2);
	cr_assert_eq(s.service.pool.max_idle_seconds, 600);
	char *envp[] = { "AIRLOCK_SERVICE_POOL_SIZE=8", "AIRLOCK_SERVICE_POOL_PER_KEY=4",
		         "AIRLOCK_SERVICE_POOL_MAX_IDLE_SECONDS=30", NULL };
	cr_assert_eq(airlock_settings_apply_env(&s, envp, &err), 0, "%s", err.message);
	cr_assert_eq(s.service.pool.size, 8);
	cr_assert_eq(s.service.pool.per_key, 4);
	cr_assert_eq(s.service.pool.max_idle_seconds, 30);
	cr_assert_eq(airlock_settings_check(&s, &err), 0, "%s", err.message);
	airlock_settings_clear(&s);
	const struct {
		const char *doc, *needle;
	} rows[] = {
		{ "service:\n  max_sandboxes: 4\n  pool:\n    size: 4\n", "service.pool.size=4" },
		{ "service:\n  pool:\n    size: 2\n    per_key: 3\n", "service.pool.per_key=3" },
		{ "service:\n  pool:\n    size: 60\n    per_key: 0\n", "service.pool.per_key=0" },
		{ "service:\n  pool:\n    max_idle_seconds: 0\n", "service.pool.max_idle_seconds=0" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		cr_assert_eq(airlock_settings_parse("t.yaml", rows[i].doc, strlen(rows[i].doc), &s, &err), 0,
		             "%s", err.message);
		cr_assert_lt(airlock_settings_check(&s, &err), 0, "row %zu accepted", i);
		cr_assert(strstr(err.message, rows[i].needle), "row %zu: %s", i, err.message);
		airlock_settings_clear(&s);
	}
	static const char unknown[] = "service:\n  pool:\n    sise: 1\n";
	cr_assert_lt(airlock_settings_parse("t.yaml", unknown, sizeof(unknown) - 1, &s, &err), 0);
	cr_assert(strstr(err.message, "service.pool.sise"), "%s", err.message);
}

/* ---- the warm pool on native ---------------------------------------------------- */

/* POST a provision of the default image for tenant with one variable. */
static void pool_native_provision(svc *t, const char *digest, const char *tenant,
                                  const char *var, const char *value,
                                  airlock_environment_handle *h)
{
	airlock_environment_spec spec;
	sandbox_test_spec(&spec, tenant, digest, NULL);
	cr_assert_eq(airlock_env_add(&spec.environment, var, value), 0);
	airlock_error err = { 0 };
	_cleanup_free_ char *sj = airlock_environment_spec_to_json(&spec, &err);
	airlock_environment_spec_clear(&spec);
	cr_assert_not_null(sj, "%s", err.message);
	_cleanup_free_ char *body = NULL;
	cr_assert(asprintf(&body, "{\"spec\":%s}", sj) > 0);
	resp r;
	http(t, "POST", "/v1/sandboxes", TOKEN, NULL, body, strlen(body), &r);
	cr_assert_eq(r.status, 201, "%s", r.body);
	char *text = json_dumps(json_object_get(r.json, "handle"), JSON_COMPACT);
	memset(h, 0, sizeof(*h));
	cr_assert_eq(airlock_environment_handle_from_json(text, strlen(text), h, &err), 0, "%s",
	             err.message);
	free(text);
	resp_clear(&r);
}

/* Run sh -c script in h's sandbox: its stdout (malloc'd, NUL-terminated). */
static char *pool_native_run(svc *t, const airlock_environment_handle *h, const char *script)
{
	char *argv[] = { "sh", "-c", (char *)script, NULL };
	_cleanup_free_ char *body = execute_body(argv, false);
	char path[160];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/execute", h->environment_id);
	resp r;
	http(t, "POST", path, TOKEN, h, body, strlen(body), &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	json_t *res = json_object_get(r.json, "result");
	cr_assert_eq(json_integer_value(json_object_get(res, "exit_code")), 0, "%s", r.body);
	const char *d = jstr(res, "stdout");
	unsigned char *bytes = NULL;
	size_t n = 0;
	cr_assert_eq(util_base64_decode(d, strlen(d), &bytes, &n), 0);
	char *out = malloc(n + 1);
	cr_assert_not_null(out);
	memcpy(out, bytes, n);
	out[n] = 0;
	free(bytes);
	resp_clear(&r);
	return out;
}

static void pool_native_destroy(svc *t, airlock_environment_handle *h)
{
	char path[160];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", h->environment_id);
	resp r;
	http(t, "DELETE", path, TOKEN, h, NULL, 0, &r);
	cr_assert_eq(r.status, 204, "%s", r.body);
	resp_clear(&r);
	airlock_environment_handle_clear(h);
}

/* What a sandbox leaves if anything of it could reach the next one: a file
 * in the workspace and in /tmp, a process that outlives its command. */
static const char litter[] = "echo left > /workspace/left-$1; echo left > /tmp/left-$1; "
                             "(setsid sleep 300 < /dev/null > /dev/null 2>&1 &); echo done";
/* What a sandbox shows of its past: its workspace, /tmp, every process's
 * command line, its environment. */
static const char look[] = "ls -A /workspace; echo --; ls -A /tmp; echo --; "
                           "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done; "
                           "echo --; env";

/*
 * A pooled sandbox carries nothing of any sandbox before it, plain or
 * pooled: no file in its workspace or /tmp, no process, no variable of
 * another claim; its own claim's variables are there (the environment is
 * the claim's, applied per execute). Then shutdown destroys the pooled
 * sandboxes with the others, and nothing is left: no live sandbox in the
 * adapter, no descriptor of the test's process.
 */
Test(service_pool_native, pooled_sandbox_is_clean, .timeout = 300)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	native_test_require(digest);
	int fds0 = open_fds();
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	pool_log pl = { .lock = PTHREAD_MUTEX_INITIALIZER };
	cfg.observer = &pool_obs;
	cfg.observer_arg = &pl;
	cfg.max_sandboxes = 8;
	airlock_native *n = NULL;
	airlock_exec *e = native_test_open_with(&cfg, &n);
	svc t;
	pool_open(&t, &pl, e, 2, 2, 120000, 8);

	/* A plain sandbox (the miss that teaches the key), littered. */
	airlock_environment_handle h1, h2, h3;
	pool_native_provision(&t, digest, "t1", "SECRET_A", "alpha", &h1);
	_cleanup_free_ char *env1 = pool_native_run(&t, &h1, "env");
	cr_assert(strstr(env1, "SECRET_A=alpha"), "%s", env1);
	pool_wait_idle(&t, 2);
	/* A pooled one, for another tenant: its own variable, and litter. */
	pool_native_provision(&t, digest, "t2", "SECRET_B", "beta", &h2);
	svc_pool_stats st;
	svc_pool_stats_get(t.service->pool, &st);
	cr_assert_eq(st.hits, 1, "the second provision was a pooled sandbox");
	_cleanup_free_ char *env2 = pool_native_run(&t, &h2, "env");
	cr_assert(strstr(env2, "SECRET_B=beta"), "the claim's environment: %s", env2);
	cr_assert_null(strstr(env2, "SECRET_A"), "%s", env2);
	char script[512];
	snprintf(script, sizeof(script), "set -- 2; %s", litter);
	free(pool_native_run(&t, &h2, script));
	snprintf(script, sizeof(script), "set -- 1; %s", litter);
	free(pool_native_run(&t, &h1, script));
	pool_native_destroy(&t, &h2);
	/* The next pooled one sees none of it. */
	pool_native_provision(&t, digest, "t3", "SECRET_C", "gamma", &h3);
	svc_pool_stats_get(t.service->pool, &st);
	cr_assert_eq(st.hits, 2, "the third provision was a pooled sandbox");
	_cleanup_free_ char *seen = pool_native_run(&t, &h3, look);
	cr_assert_null(strstr(seen, "left-"), "a file of another sandbox: %s", seen);
	cr_assert_null(strstr(seen, "sleep"), "a process of another sandbox: %s", seen);
	cr_assert_null(strstr(seen, "SECRET_A"), "%s", seen);
	cr_assert_null(strstr(seen, "SECRET_B"), "%s", seen);
	cr_assert_null(strstr(seen, AIRLOCK_POOL_TENANT), "%s", seen);
	cr_assert(strstr(seen, "SECRET_C=gamma"), "%s", seen);
	/* Its workspace and /tmp are empty: the two "--" lines follow at once. */
	cr_assert_eq(strncmp(seen, "--\n--\n", 6), 0, "workspace and /tmp not empty: %s", seen);
	/* The earlier plain sandbox still has its own litter (the check above
	 * could not pass by seeing nothing at all). */
	_cleanup_free_ char *own = pool_native_run(&t, &h1, "ls /workspace /tmp");
	cr_assert(strstr(own, "left-1"), "%s", own);

	pool_native_destroy(&t, &h1);
	pool_native_destroy(&t, &h3);
	pool_wait_idle(&t, 2);
	cr_assert_eq(airlock_native_live_count(n), 2, "only the pooled ones are left");
	svc_close(&t);
	cr_assert_eq(pl.shutdown, 2, "shutdown destroyed the two pooled sandboxes");
	cr_assert_eq(pl.other, 3, "the three destroyed by request");
	cr_assert_eq(open_fds(), fds0, "no descriptor left");
}

/* At most size / per_key keys: a third key replaces the one used least
 * recently, whose idle sandbox goes (pool_evicted), and is itself pooled. */
Test(service_pool, key_eviction)
{
	pool_log pl = { .lock = PTHREAD_MUTEX_INITIALIZER };
	svc t;
	pool_open(&t, &pl, NULL, 2, 1, 60000, 16);
	airlock_environment_handle h[3];
	for (int i = 0; i < 3; i++) {
		airlock_environment_spec s;
		test_spec(&s, "t1", "r1");
		s.limits.pids_max = 10 + i;
		airlock_error err = { 0 };
		_cleanup_free_ char *sj = airlock_environment_spec_to_json(&s, &err);
		airlock_environment_spec_clear(&s);
		_cleanup_free_ char *pb = NULL;
		cr_assert(asprintf(&pb, "{\"spec\":%s}", sj) > 0);
		resp r;
		http(&t, "POST", "/v1/sandboxes", TOKEN, NULL, pb, strlen(pb), &r);
		cr_assert_eq(r.status, 201, "%s", r.body);
		char *text = json_dumps(json_object_get(r.json, "handle"), JSON_COMPACT);
		cr_assert_eq(airlock_environment_handle_from_json(text, strlen(text), &h[i], &err), 0);
		free(text);
		resp_clear(&r);
		pool_wait_idle(&t, i == 0 ? 1 : 2);
	}
	svc_pool_stats st;
	svc_pool_stats_get(t.service->pool, &st);
	cr_assert_eq(st.keys, 2);
	cr_assert_eq(st.misses, 3);
	pthread_mutex_lock(&pl.lock);
	unsigned evicted = pl.pool_evicted;
	pthread_mutex_unlock(&pl.lock);
	cr_assert_eq(evicted, 1, "the first key's idle sandbox went");
	cr_assert_eq(listed_pooled(&t, NULL), 2);
	for (int i = 0; i < 3; i++)
		airlock_environment_handle_clear(&h[i]);
	svc_close(&t);
}

/* On native, a claim the mechanism refuses before it changed the sandbox
 * (an allowlist spec with no egress proxy configured) leaves the sandbox
 * pooled, untouched, and the next claim of a spec it can serve gets it. */
Test(service_pool_native, refused_claim_keeps_the_sandbox, .timeout = 300)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	native_test_require(digest);
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	airlock_native *n = NULL;
	airlock_exec *e = native_test_open_with(&cfg, &n);
	airlock_environment_spec ps;
	sandbox_test_spec(&ps, AIRLOCK_POOL_TENANT, digest, NULL);
	free(ps.run_id);
	ps.run_id = strdup(AIRLOCK_POOL_RUN);
	ps.lease_epoch = 0;
	airlock_env_clear(&ps.environment);
	char pool_id[AIRLOCK_ENVIRONMENT_ID_MAX];
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_pool_provision(e, &ps, 60000, pool_id, &err), 0, "%s", err.message);
	airlock_environment_spec_clear(&ps);

	airlock_environment_spec s;
	sandbox_test_spec(&s, "t1", digest, NULL);
	s.egress.mode = AIRLOCK_EGRESS_ALLOWLIST;
	s.egress.destinations = calloc(1, sizeof(*s.egress.destinations));
	s.egress.destinations[0].host = strdup("example.com");
	s.egress.destinations[0].ports = calloc(1, sizeof(uint16_t));
	s.egress.destinations[0].ports[0] = 443;
	s.egress.destinations[0].n_ports = 1;
	s.egress.n_destinations = 1;
	airlock_environment_handle h = { 0 };
	cr_assert_lt(airlock_exec_pool_claim(e, pool_id, &s, NULL, &h, &err), 0);
	cr_assert(strstr(err.message, "egress"), "%s", err.message);
	cr_assert(airlock_exec_pool_ready(e, pool_id), "the refused claim left it pooled");
	cr_assert_eq(airlock_native_live_count(n), 1);

	airlock_environment_spec_clear(&s);
	sandbox_test_spec(&s, "t1", digest, NULL);
	cr_assert_eq(airlock_exec_pool_claim(e, pool_id, &s, NULL, &h, &err), 0, "%s", err.message);
	cr_assert_not(airlock_exec_pool_ready(e, pool_id));
	cr_assert_str_eq(h.tenant_id, "t1");
	char *argv[] = { "/bin/true", NULL };
	airlock_execution_command cmd = test_command(argv);
	airlock_exec_call call = { .tenant_id = "t1", .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_execution_result res = { 0 };
	cr_assert_eq(airlock_exec_execute(e, &call, &h, &cmd, &res, &err), 0, "%s", err.message);
	cr_assert(res.has_exit_code && res.exit_code == 0);
	airlock_execution_result_clear(&res);
	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_native_live_count(n), 0);
	airlock_environment_handle_clear(&h);
	airlock_environment_spec_clear(&s);
	airlock_exec_free(e);
}
