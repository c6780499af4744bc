/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gate.sandbox.spec_has_no_host_path, through the API.
 *
 * The structural half (tests/test_gate_sandbox_spec_has_no_host_path.c)
 * proves the types carry no host path. This half proves the service never
 * says one: the API server runs in-process on a Unix socket over the
 * native mechanism, every error it can return is provoked through the
 * API (an unknown image digest, an altered image, limits above the
 * ceilings, unknown and destroyed environment ids, workspace escapes by
 * "..", by an absolute path and by a symlink out, a full workspace, a dead
 * egress proxy, capacity, bad credentials, malformed bodies and headers),
 * and every response body, every result and every line of a streamed
 * execute is searched for a host path: the image store (as configured and
 * as resolved), the state directories (/run/airlock, /var/lib/airlock,
 * /sys/fs/cgroup), "/proc/", "/sys/", "/dev/loop", the socket's path and
 * the test's temporary directories. A JSON body is searched as text, in
 * every string it holds once decoded, and in every string that decodes as
 * base64 (the result's stdout and stderr travel so), so an escaped or
 * encoded path is found too.
 *
 * Root and the native mechanism; a host that cannot run it skips with the
 * reason (tests/sandbox_testlib.h).
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/json.h"
#include "airlock/proxy.h"
#include "airlock/service.h"
#include "sandbox_testlib.h"
#include "util/util.h"

#define FORBIDDEN_MAX 16

typedef struct gate {
	char dir[64];   /* the test's temporary directory: the socket, a store copy */
	char sock[100]; /* the API socket, in dir (under sun_path's 108) */
	char token[65];
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	char store[PATH_MAX]; /* the image store the adapter opened */
	airlock_egress_policy op;
	airlock_proxy *px;
	int log_fd;
	airlock_exec *e;
	airlock_service *svc;
	const char *forbidden[FORBIDDEN_MAX];
	char forbidden_buf[4][PATH_MAX];
	size_t n_forbidden;
	size_t checked; /* bodies searched */
} gate;

static gate G;

/* ---- what must never appear ---------------------------------------------- */

static void forbid(const char *s)
{
	cr_assert_lt(G.n_forbidden, FORBIDDEN_MAX);
	G.forbidden[G.n_forbidden++] = s;
}

static void forbid_copy(const char *s)
{
	size_t i = 0;
	while (i < 4 && G.forbidden_buf[i][0])
		i++;
	cr_assert_lt(i, 4);
	snprintf(G.forbidden_buf[i], PATH_MAX, "%s", s);
	forbid(G.forbidden_buf[i]);
}

/* The first forbidden string in p[0..n), or NULL. */
static const char *hit_in(const void *p, size_t n)
{
	for (size_t i = 0; i < G.n_forbidden; i++)
		if (memmem(p, n, G.forbidden[i], strlen(G.forbidden[i])))
			return G.forbidden[i];
	return NULL;
}

/* The first forbidden string in a JSON value: in its strings and keys as
 * decoded, and in every string that decodes as base64. */
static const char *hit_in_json(json_t *v)
{
	const char *h = NULL;
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		size_t n = json_string_length(v);
		h = hit_in(s, n);
		unsigned char *dec = NULL;
		size_t dlen = 0;
		if (!h && n > 0 && util_base64_decode(s, n, &dec, &dlen) == 0) {
			h = hit_in(dec, dlen);
			free(dec);
		}
	} else if (json_is_object(v)) {
		const char *k;
		json_t *m;
		json_object_foreach(v, k, m) {
			if (!h)
				h = hit_in(k, strlen(k));
			if (!h)
				h = hit_in_json(m);
		}
	} else if (json_is_array(v)) {
		size_t i;
		json_t *m;
		json_array_foreach(v, i, m)
			if (!h)
				h = hit_in_json(m);
	}
	return h;
}

/* The whole body as text, and each line that is JSON (a body is one
 * document; a streamed execute one per line) walked string by string. */
static const char *hit_in_body(const char *body, size_t len)
{
	const char *h = hit_in(body, len);
	for (const char *p = body; !h && p < body + len;) {
		const char *nl = memchr(p, '\n', (size_t)(body + len - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(body + len - p);
		json_t *o = n ? json_loadb(p, n, 0, NULL) : NULL;
		if (o)
			h = hit_in_json(o);
		json_decref(o);
		p += n + 1;
	}
	return h;
}

static void check_body(const char *what, const char *body, size_t len)
{
	const char *h = hit_in_body(body, len);
	cr_assert_null(h, "%s: the response names the host path %s: %.*s", what, h,
	               (int)(len > 600 ? 600 : len), body);
	G.checked++;
}

/* ---- a client ------------------------------------------------------------- */

typedef struct resp {
	long status;
	char *body;
	size_t len;
	json_t *json; /* the body, when it is one JSON document */
} resp;

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
	util_buf *b = arg;
	cr_assert_eq(util_buf_append(b, p, size * n), 0, "a response larger than the test expects");
	return size * n;
}

/* One request; auth NULL sends the service credential, "" none at all. */
static resp request_auth(const char *what, const char *auth, const char *method,
                         const char *target, const char *handle, const void *body, size_t len)
{
	CURL *c = curl_easy_init();
	cr_assert(c);
	char url[4096], h1[8192], h2[8192];
	snprintf(url, sizeof(url), "http://airlock%s", target);
	struct curl_slist *hdr = NULL;
	if (!auth)
		snprintf(h1, sizeof(h1), "Authorization: Bearer %s", G.token);
	else
		snprintf(h1, sizeof(h1), "%s", auth);
	if (h1[0])
		hdr = curl_slist_append(hdr, h1);
	if (handle) {
		snprintf(h2, sizeof(h2), "Airlock-Handle: %s", handle);
		hdr = curl_slist_append(hdr, h2);
	}
	hdr = curl_slist_append(hdr, "Expect:");
	util_buf b;
	util_buf_init(&b, 256u << 20);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, G.sock);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	CURLcode cc = curl_easy_perform(c);
	cr_assert_eq(cc, CURLE_OK, "%s: %s", what, curl_easy_strerror(cc));
	resp r = { 0 };
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
	curl_easy_cleanup(c);
	curl_slist_free_all(hdr);
	r.body = (char *)util_buf_steal(&b, &r.len);
	if (!r.body)
		r.body = strdup("");
	r.json = json_loadb(r.body, r.len, 0, NULL);
	check_body(what, r.body, r.len);
	return r;
}

static resp request(const char *what, const char *method, const char *target, const char *handle,
                    const char *body)
{
	return request_auth(what, NULL, method, target, handle, body, body ? strlen(body) : 0);
}

static void resp_free(resp *r)
{
	free(r->body);
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
}

/* The error shape with this status and class, and a message. */
static void expect_error(const char *what, resp *r, long status, const char *cls)
{
	cr_assert_eq(r->status, status, "%s: status %ld, want %ld: %s", what, r->status, status,
	             r->body);
	cr_assert(json_is_object(r->json), "%s: the error is JSON: %s", what, r->body);
	cr_assert_str_eq(json_str(r->json, "error"), cls, "%s: %s", what, r->body);
	json_t *m = json_object_get(r->json, "message");
	cr_assert(json_is_string(m), "%s: a message", what);
	if (strcmp(cls, "Unauthorized") == 0)
		cr_assert_str_eq(json_string_value(m), "", "%s: 401 says nothing", what);
	else
		cr_assert_gt(json_string_length(m), 0, "%s: the message says why", what);
	cr_assert_eq(json_object_size(r->json), 2, "%s: the one error shape: %s", what, r->body);
	resp_free(r);
}

/* The last line of a streamed execute, parsed: its event is what it ended
 * with (result, or error). */
static json_t *last_event(const resp *r)
{
	cr_assert(r->len > 0 && r->body[r->len - 1] == '\n', "the stream ends a line: %s", r->body);
	const char *p = r->body + r->len - 1;
	while (p > r->body && p[-1] != '\n')
		p--;
	json_t *o = json_loadb(p, (size_t)(r->body + r->len - 1 - p), 0, NULL);
	cr_assert(json_is_object(o), "the last line is JSON: %s", p);
	return o;
}

/* Some error, in the one shape (the class depends on the layer that
 * refused; what matters here is that it says no more than it should). */
static void expect_some_error(const char *what, resp *r)
{
	cr_assert_geq(r->status, 400, "%s: %s", what, r->body);
	cr_assert(json_is_object(r->json) && json_is_string(json_object_get(r->json, "error")) &&
	                  json_is_string(json_object_get(r->json, "message")),
	          "%s: the error shape: %s", what, r->body);
	resp_free(r);
}

/* A request that must fail so; the response is checked and freed. */
static void fails(const char *what, const char *method, const char *target, const char *handle,
                  const char *body, long status, const char *cls)
{
	resp r = request(what, method, target, handle, body);
	expect_error(what, &r, status, cls);
}

/* ---- bodies ---------------------------------------------------------------- */

static const airlock_resource_limits small_limits = {
	.cpu_millicores = 1000, .memory_bytes = 256ll << 20, .pids_max = 64,
	.workspace_bytes = 16ll << 20, .inodes_max = 2000, .wall_clock_seconds = 300,
};

static char *spec_json(const char *tenant, const char *digest, const airlock_resource_limits *l,
                       const char *egress_yaml)
{
	airlock_environment_spec s;
	sandbox_test_spec(&s, tenant, digest, l ? l : &small_limits);
	airlock_error err = { 0 };
	if (egress_yaml) {
		airlock_egress_policy_clear(&s.egress);
		cr_assert_eq(airlock_egress_policy_parse("spec.yaml", egress_yaml, strlen(egress_yaml),
		                                         &s.egress, &err),
		             0, "%s", err.message);
	}
	char *j = airlock_environment_spec_to_json(&s, &err);
	cr_assert(j, "%s", err.message);
	airlock_environment_spec_clear(&s);
	char *body = NULL;
	cr_assert(asprintf(&body, "{\"spec\":%s}", j) > 0);
	free(j);
	return body;
}

/* base64url without padding: the Airlock-Handle header's form. */
static char *b64url(const char *s)
{
	char *b = util_base64_encode(s, strlen(s));
	cr_assert(b);
	size_t o = 0;
	for (size_t i = 0; b[i] && b[i] != '='; i++)
		b[o++] = b[i] == '+' ? '-' : b[i] == '/' ? '_' : b[i];
	b[o] = 0;
	return b;
}

typedef struct sandbox {
	char id[AIRLOCK_ENVIRONMENT_ID_MAX];
	char *handle;     /* the header value */
	json_t *handle_j; /* the handle's JSON */
} sandbox;

static void sandbox_from(resp *r, sandbox *sb)
{
	cr_assert_eq(r->status, 201, "provision: %s", r->body);
	json_t *h = json_object_get(r->json, "handle");
	cr_assert(json_is_object(h), "%s", r->body);
	snprintf(sb->id, sizeof(sb->id), "%s", json_str(h, "environment_id"));
	sb->handle_j = json_incref(h);
	char *text = json_dumps(h, JSON_COMPACT);
	sb->handle = b64url(text);
	free(text);
	resp_free(r);
}

static void provision(const char *tenant, const airlock_resource_limits *l, sandbox *sb)
{
	char *body = spec_json(tenant, G.digest, l, NULL);
	resp r = request("provision", "POST", "/v1/sandboxes", NULL, body);
	free(body);
	sandbox_from(&r, sb);
}

static void sandbox_forget(sandbox *sb)
{
	free(sb->handle);
	json_decref(sb->handle_j);
	memset(sb, 0, sizeof(*sb));
}

static void destroy(sandbox *sb)
{
	char t[160];
	snprintf(t, sizeof(t), "/v1/sandboxes/%s", sb->id);
	resp r = request("destroy", "DELETE", t, sb->handle, NULL);
	cr_assert_eq(r.status, 204, "destroy: %s", r.body);
	resp_free(&r);
}

/* The handle header of sb with one field replaced. */
static char *handle_with(const sandbox *sb, const char *key, json_t *value)
{
	json_t *h = json_deep_copy(sb->handle_j);
	json_object_set_new(h, key, value);
	char *text = json_dumps(h, JSON_COMPACT);
	json_decref(h);
	char *b = b64url(text);
	free(text);
	return b;
}

static char *command_body(char **argv, const char *wd, int timeout_s, bool stream)
{
	airlock_execution_command cmd = test_command(argv);
	cmd.timeout_seconds = timeout_s;
	if (wd)
		cmd.working_directory = (char *)wd;
	airlock_error err = { 0 };
	char *j = airlock_execution_command_to_json(&cmd, &err);
	cr_assert(j, "%s", err.message);
	char *body = NULL;
	cr_assert(asprintf(&body, "{\"command\":%s,\"remaining_budget_ms\":null,\"stream\":%s}", j,
	                   stream ? "true" : "false") > 0);
	free(j);
	return body;
}

static resp execute(const sandbox *sb, char **argv, int timeout_s)
{
	char t[160];
	snprintf(t, sizeof(t), "/v1/sandboxes/%s/execute", sb->id);
	char *body = command_body(argv, NULL, timeout_s, false);
	resp r = request("execute", "POST", t, sb->handle, body);
	free(body);
	return r;
}

/* A shell line in the sandbox that must produce a result. */
static json_t *sh(const sandbox *sb, const char *line, int timeout_s)
{
	char *argv[] = { "sh", "-c", (char *)line, NULL };
	resp r = execute(sb, argv, timeout_s);
	cr_assert_eq(r.status, 200, "%s: %s", line, r.body);
	json_t *res = json_incref(json_object_get(r.json, "result"));
	cr_assert(json_is_object(res), "%s", r.body);
	resp_free(&r);
	return res;
}

static char *ws_target(const sandbox *sb, const char *what, const char *query)
{
	char *t = NULL;
	cr_assert(asprintf(&t, "/v1/sandboxes/%s/workspace/%s?%s", sb->id, what, query) > 0);
	return t;
}

static void ws_fails(const char *what, const sandbox *sb, const char *method, const char *verb,
                     const char *query, const char *body, long status, const char *cls)
{
	char *t = ws_target(sb, verb, query);
	resp r = request_auth(what, NULL, method, t, sb->handle, body, body ? strlen(body) : 0);
	expect_error(what, &r, status, cls);
	free(t);
}

/* ---- the service ---------------------------------------------------------- */

typedef struct gate_opts {
	const char *store;      /* NULL: the test store */
	size_t max_sandboxes;
	const char *op_egress;  /* the operator's policy; NULL: none, no proxy */
	size_t max_write_bytes;
	int64_t hard_cap_seconds; /* 0: the default */
} gate_opts;

static void gate_up(const gate_opts *o)
{
	memset(&G, 0, sizeof(G));
	G.log_fd = -1;
	signal(SIGPIPE, SIG_IGN);
	sandbox_test_require(G.digest);
	snprintf(G.dir, sizeof(G.dir), "/tmp/airlock-gate-XXXXXX");
	cr_assert(mkdtemp(G.dir));
	snprintf(G.sock, sizeof(G.sock), "%s/api.sock", G.dir);
	unsigned char raw[32];
	cr_assert_eq(util_random(raw, sizeof(raw)), 0);
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(G.token + 2 * i, 3, "%02x", raw[i]);

	const char *store = o && o->store ? o->store : sandbox_test_store();
	snprintf(G.store, sizeof(G.store), "%s", store);
	forbid(G.store);
	char real[PATH_MAX];
	if (realpath(store, real))
		forbid_copy(real);
	forbid(G.dir);
	forbid(G.sock);
	forbid("/run/airlock");
	forbid("/var/lib/airlock");
	forbid("/sys/fs/cgroup");
	forbid("/proc/");
	forbid("/sys/");
	forbid("/dev/loop");
	forbid("/tmp/airlock");

	airlock_error err = { 0 };
	if (o && o->op_egress) {
		cr_assert_eq(airlock_egress_policy_parse("operator.yaml", o->op_egress,
		                                         strlen(o->op_egress), &G.op, &err),
		             0, "%s", err.message);
		char log[128];
		snprintf(log, sizeof(log), "%s/proxy.log", G.dir);
		G.log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		cr_assert(G.log_fd >= 0);
		airlock_proxy_config pc;
		airlock_proxy_config_default(&pc);
		/* Never asked: the proxy is killed before any connection. */
		pc.dns_servers = "198.51.100.53";
		pc.log_fd = G.log_fd;
		cr_assert_eq(airlock_proxy_spawn(&pc, &G.px, &err), 0, "%s", err.message);
	}
	airlock_native_config nc = { .image_store = G.store, .start_budget_seconds = 30,
		                     .egress_policy = G.px ? &G.op : NULL, .egress_proxy = G.px };
	airlock_native *n = NULL;
	cr_assert_eq(airlock_native_new(&nc, &n, &err), 0, "%s", err.message);
	airlock_exec_config ec;
	airlock_exec_config_default(&ec);
	ec.ceilings.memory_bytes = 512ll << 20;
	ec.ceilings.workspace_bytes = 64ll << 20;
	ec.max_sandboxes = o && o->max_sandboxes ? o->max_sandboxes : 8;
	if (o && o->hard_cap_seconds)
		ec.hard_cap_seconds = o->hard_cap_seconds;
	cr_assert_eq(airlock_exec_new(airlock_native_ops(), n, &ec, &G.e, &err), 0, "%s",
	             err.message);

	airlock_service_config sc;
	airlock_service_config_default(&sc);
	char listen[160];
	snprintf(listen, sizeof(listen), "unix:%s", G.sock);
	sc.listen = listen;
	sc.credential = G.token;
	sc.credential_len = strlen(G.token);
	sc.max_sandboxes = ec.max_sandboxes;
	sc.max_write_bytes = o && o->max_write_bytes ? o->max_write_bytes : 0;
	cr_assert_eq(airlock_service_new(&sc, G.e, &G.svc, &err), 0, "%s", err.message);
}

/* Removes the temporary directories even when an assertion ended the
 * test early (criterion runs a test's fini after a failure too): a failed
 * run leaves no socket and no 170 MB store copy behind. */
static char store_copy[64];

static void rm_dir(const char *d)
{
	if (!d[0])
		return;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	(void)!system(cmd);
}

static void gate_fini(void)
{
	rm_dir(G.dir);
	rm_dir(store_copy);
}

static void gate_down(void)
{
	airlock_service_free(G.svc);
	airlock_exec_free(G.e);
	airlock_proxy_free(G.px);
	if (G.log_fd >= 0)
		close(G.log_fd);
	airlock_egress_policy_clear(&G.op);
	rm_dir(G.dir);
	G.dir[0] = 0;
	cr_assert_gt(G.checked, 0);
	cr_log_info("%zu response bodies searched", G.checked);
}

/* A raw request whose Content-Length is past the body's cap: the service
 * answers 413 before reading it, so the test sends only the head. */
static void oversize(const char *what, const char *method, const char *target,
                     const char *handle, unsigned long long claimed)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", G.sock);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	char head[2048], hh[1024] = "";
	if (handle)
		snprintf(hh, sizeof(hh), "Airlock-Handle: %s\r\n", handle);
	int n = snprintf(head, sizeof(head),
	                 "%s %s HTTP/1.1\r\nHost: airlock\r\nAuthorization: Bearer %s\r\n%s"
	                 "Content-Length: %llu\r\nConnection: close\r\n\r\n",
	                 method, target, G.token, hh, claimed);
	cr_assert(n > 0 && (size_t)n < sizeof(head));
	cr_assert_eq(util_write_all(fd, head, (size_t)n), 0);
	char *all = NULL;
	size_t len = 0;
	cr_assert_eq(util_read_capped(fd, 1 << 20, &all, &len), 0);
	close(fd);
	cr_assert(strncmp(all, "HTTP/1.1 413", 12) == 0, "%s: %.200s", what, all);
	char *body = strstr(all, "\r\n\r\n");
	cr_assert(body);
	body += 4;
	check_body(what, body, len - (size_t)(body - all));
	json_t *o = json_loads(body, 0, NULL);
	cr_assert(o, "%s: %s", what, body);
	cr_assert_str_eq(json_str(o, "error"), "ToolValidationError");
	json_decref(o);
	free(all);
}

/* ---- the gate -------------------------------------------------------------- */

Test(gate_service_no_host_path, requests_without_a_sandbox, .timeout = 300, .fini = gate_fini)
{
	gate_up(NULL);
	resp r = request("health", "GET", "/v1/health", NULL, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	resp_free(&r);
	r = request("list", "GET", "/v1/sandboxes", NULL, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	resp_free(&r);

	/* Bad credentials: 401, nothing but the class. */
	static const char *const bad_auth[] = {
		"", "Authorization: Bearer wrong", "Authorization: Basic dXNlcjpwYXNz",
		"Authorization: Bearer", "Authorization: bearer",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad_auth); i++) {
		r = request_auth("bad auth", bad_auth[i], "GET", "/v1/health", NULL, NULL, 0);
		expect_error("bad auth", &r, 401, "Unauthorized");
		r = request_auth("bad auth, a path", bad_auth[i], "GET", "/v1/nothing", NULL, NULL, 0);
		expect_error("bad auth, a path", &r, 401, "Unauthorized");
	}
	char longer[200];
	snprintf(longer, sizeof(longer), "Authorization: Bearer %sx", G.token);
	r = request_auth("a longer token", longer, "GET", "/v1/health", NULL, NULL, 0);
	expect_error("a longer token", &r, 401, "Unauthorized");

	/* Paths and methods. */
	fails("unknown path", "GET", "/v1/nothing", NULL, NULL, 404, "ToolValidationError");
	fails("a path outside /v1", "GET", "/etc/passwd", NULL, NULL, 404, "ToolValidationError");
	fails("dot segments", "GET", "/v1/sandboxes/../../etc", NULL, NULL, 404,
	      "ToolValidationError");
	fails("method", "DELETE", "/v1/health", NULL, NULL, 405, "ToolValidationError");
	fails("method on a sandbox", "PATCH", "/v1/sandboxes/env_00000000000000000000000000000000",
	      NULL, NULL, 405, "ToolValidationError");

	/* Malformed provision bodies. */
	char *valid = spec_json("tenant-gate", G.digest, NULL, NULL);
	char *with_extra = NULL, *with_path_id = NULL;
	/* No body names a forbidden path itself (a message may quote the
	 * caller's bytes back, which tells the caller nothing). */
	cr_assert(asprintf(&with_extra, "%.*s,\"image_store\":\"/srv/images\"}",
	                   (int)strlen(valid) - 1, valid) > 0);
	cr_assert(asprintf(&with_path_id, "{\"environment_id\":\"/srv/x\",%s", valid + 1) > 0);
	const char *const bad_bodies[] = {
		"", "not json", "[1,2]", "{\"spec\":1}", "{\"spec\":{}}", "{}",
		"{\"spec\":null}", "{\"spec\":{\"tenant_id\":\"/etc/passwd\"}}", with_extra, with_path_id,
		"{\"spec\":{},\"spec\":{}}",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad_bodies); i++)
		fails("malformed provision body", "POST", "/v1/sandboxes", NULL, bad_bodies[i], 400,
		      "ToolValidationError");
	free(with_extra);
	free(with_path_id);
	free(valid);

	/* An image that is not in the store, and a tag instead of a digest. */
	char *unknown = spec_json("tenant-gate", TEST_IMAGE, NULL, NULL);
	fails("unknown image digest", "POST", "/v1/sandboxes", NULL, unknown, 409,
	      "ExecutionRejected");
	free(unknown);
	char *tag = spec_json("tenant-gate", G.digest, NULL, NULL);
	char *at = strstr(tag, G.digest);
	cr_assert(at);
	memcpy(at, "debian:bookworm", 15);
	memmove(at + 15, at + strlen(G.digest), strlen(at + strlen(G.digest)) + 1);
	fails("a tag for a digest", "POST", "/v1/sandboxes", NULL, tag, 400, "ToolValidationError");
	free(tag);

	/* Limits above the operator's ceilings. */
	airlock_resource_limits big = small_limits;
	big.memory_bytes = 1ll << 30;
	char *above = spec_json("tenant-gate", G.digest, &big, NULL);
	fails("memory above the ceiling", "POST", "/v1/sandboxes", NULL, above, 409,
	      "ExecutionRejected");
	free(above);
	big = small_limits;
	big.workspace_bytes = 128ll << 20;
	above = spec_json("tenant-gate", G.digest, &big, NULL);
	fails("workspace above the ceiling", "POST", "/v1/sandboxes", NULL, above, 409,
	      "ExecutionRejected");
	free(above);

	/* An id nobody provisioned, with a well-formed handle for it. */
	sandbox ghost = { 0 };
	snprintf(ghost.id, sizeof(ghost.id), "env_0123456789abcdef0123456789abcdef");
	ghost.handle_j = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s}", "environment_id", ghost.id,
	                           "tenant_id", "tenant-gate", "run_id", "run-1", "lease_epoch",
	                           (json_int_t)1, "created_at", "2026-11-29T23:34:04.123Z",
	                           "expires_at", "2026-11-30T00:04:04.123Z");
	char *gh = json_dumps(ghost.handle_j, JSON_COMPACT);
	ghost.handle = b64url(gh);
	free(gh);
	char *argv[] = { "true", NULL };
	r = execute(&ghost, argv, 10);
	expect_error("execute on an unknown id", &r, 404, "ExecutionRejected");
	ws_fails("read on an unknown id", &ghost, "GET", "file", "path=a&max_bytes=10", NULL, 404,
	         "ExecutionRejected");
	ws_fails("listdir on an unknown id", &ghost, "GET", "dir", "path=.", NULL, 404,
	         "ExecutionRejected");
	char t[200];
	snprintf(t, sizeof(t), "/v1/sandboxes/%s/cancel", ghost.id);
	fails("cancel on an unknown id", "POST", t, ghost.handle, NULL, 404, "ExecutionRejected");
	snprintf(t, sizeof(t), "/v1/sandboxes/%s", ghost.id);
	r = request("destroy an unknown id", "DELETE", t, ghost.handle, NULL);
	cr_assert_eq(r.status, 204, "destroy is idempotent: %s", r.body);
	resp_free(&r);

	/* Handle headers that do not decode, or name another id. */
	snprintf(t, sizeof(t), "/v1/sandboxes/%s/execute", ghost.id);
	char *cmd = command_body(argv, NULL, 10, false);
	fails("no handle", "POST", t, NULL, cmd, 400, "ToolValidationError");
	fails("handle not base64url", "POST", t, "a/b+c==", cmd, 400, "ToolValidationError");
	char *notjson = b64url("/srv/not-json");
	fails("handle not JSON", "POST", t, notjson, cmd, 400, "ToolValidationError");
	free(notjson);
	snprintf(t, sizeof(t), "/v1/sandboxes/env_ffffffffffffffffffffffffffffffff/execute");
	fails("handle for another id", "POST", t, ghost.handle, cmd, 400, "ToolValidationError");
	free(cmd);
	sandbox_forget(&ghost);

	/* Bodies past their caps. */
	oversize("provision over the JSON cap", "POST", "/v1/sandboxes", NULL,
	         (unsigned long long)AIRLOCK_JSON_INPUT_MAX + 1);
	gate_down();
}

Test(gate_service_no_host_path, workspace_and_execute_errors, .timeout = 600, .fini = gate_fini)
{
	gate_opts o = { .max_write_bytes = 32u << 20 };
	gate_up(&o);
	sandbox sb;
	provision("tenant-gate", NULL, &sb);

	/* What the sandbox sees of its own mounts names none of the host's
	 * (the image's and the volume's sources are names, not loop devices
	 * or the store's files). */
	json_t *mounts = sh(&sb, "cat /proc/self/mountinfo && df", 30);
	cr_assert_eq(json_integer_value(json_object_get(mounts, "exit_code")), 0);
	json_decref(mounts);

	/* Escapes: "..", absolute, an encoded NUL, a symlink out (to a host
	 * path as the sandbox sees it, and to the sandbox's /proc). */
	json_t *res = sh(&sb, "ln -s /etc etc_link && ln -s /proc/self/root root_link && "
	                      "ln -s ../../../../../../var/lib/airlock up_link && mkdir d && "
	                      "echo hi > d/f", 30);
	cr_assert_eq(json_integer_value(json_object_get(res, "exit_code")), 0);
	json_decref(res);
	/* None names a forbidden path itself: a message may quote the
	 * caller's own path back, which tells the caller nothing. */
	static const char *const escapes[] = {
		"path=../etc/passwd", "path=..%2F..%2Fetc%2Fshadow", "path=%2Fetc%2Fpasswd",
		"path=/etc/hostname", "path=d%00x", "path=etc_link%2Fpasswd",
		"path=root_link%2Fetc%2Fpasswd", "path=up_link%2Fimages", "path=d%2F..%2F..%2Fx",
	};
	for (size_t i = 0; i < ARRAY_SIZE(escapes); i++) {
		char q[256];
		snprintf(q, sizeof(q), "%s&max_bytes=4096", escapes[i]);
		char *t = ws_target(&sb, "file", q);
		resp r = request("read an escape", "GET", t, sb.handle, NULL);
		free(t);
		cr_assert(r.status == 400, "read %s: %ld %s", escapes[i], r.status, r.body);
		cr_assert(strcmp(json_str(r.json, "error"), "WorkspaceEscape") == 0 ||
		                  strcmp(json_str(r.json, "error"), "ToolValidationError") == 0,
		          "read %s: %s", escapes[i], r.body);
		resp_free(&r);
		const char *verbs[] = { "contain", "dir", "provenance" };
		for (size_t v = 0; v < ARRAY_SIZE(verbs); v++) {
			t = ws_target(&sb, verbs[v], escapes[i]);
			r = request("an escape", "GET", t, sb.handle, NULL);
			free(t);
			cr_assert(r.status == 400, "%s %s: %ld %s", verbs[v], escapes[i], r.status,
			          r.body);
			resp_free(&r);
		}
		t = ws_target(&sb, "file", escapes[i]);
		r = request_auth("write an escape", NULL, "PUT", t, sb.handle, "x", 1);
		free(t);
		cr_assert_eq(r.status, 400, "write %s: %s", escapes[i], r.body);
		resp_free(&r);
	}
	ws_fails("contain through a symlink", &sb, "GET", "contain", "path=etc_link", NULL, 400,
	         "WorkspaceEscape");

	/* What is not there, or not what it is read as. */
	resp r;
	char *t = ws_target(&sb, "file", "path=missing&max_bytes=10");
	r = request("read a missing file", "GET", t, sb.handle, NULL);
	expect_some_error("read a missing file", &r);
	free(t);
	t = ws_target(&sb, "file", "path=d&max_bytes=10");
	r = request("read a directory", "GET", t, sb.handle, NULL);
	expect_some_error("read a directory", &r);
	free(t);
	ws_fails("read past max_bytes", &sb, "GET", "file", "path=d%2Ff&max_bytes=1", NULL, 400,
	         "ToolValidationError");
	ws_fails("max_bytes not a number", &sb, "GET", "file", "path=d%2Ff&max_bytes=%2Fproc", NULL,
	         400, "ToolValidationError");
	ws_fails("read without max_bytes", &sb, "GET", "file", "path=d%2Ff", NULL, 400,
	         "ToolValidationError");
	ws_fails("path twice", &sb, "GET", "file", "path=a&path=b&max_bytes=1", NULL, 400,
	         "ToolValidationError");
	ws_fails("bad escape", &sb, "GET", "file", "path=%zz&max_bytes=1", NULL, 400,
	         "ToolValidationError");
	ws_fails("no path", &sb, "GET", "file", "max_bytes=1", NULL, 400, "ToolValidationError");
	t = ws_target(&sb, "dir", "path=d%2Ff");
	r = request("listdir a file", "GET", t, sb.handle, NULL);
	expect_some_error("listdir a file", &r);
	free(t);
	t = ws_target(&sb, "provenance", "path=missing");
	r = request("provenance of a missing file", "GET", t, sb.handle, NULL);
	/* A path nothing wrote has no provenance to report: "unknown". */
	cr_assert_eq(r.status, 200, "%s", r.body);
	resp_free(&r);
	free(t);
	/* A listing and a read that succeed say nothing of the host either. */
	t = ws_target(&sb, "dir", "path=.");
	r = request("listdir", "GET", t, sb.handle, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	resp_free(&r);
	free(t);

	/* A full workspace: through the API (a write past workspace_bytes),
	 * past the write cap, and from inside (a command filling the disk). */
	size_t big = 20u << 20;
	char *bytes = malloc(big);
	memset(bytes, 'x', big);
	t = ws_target(&sb, "file", "path=big");
	r = request_auth("write past workspace_bytes", NULL, "PUT", t, sb.handle, bytes, big);
	expect_some_error("write past workspace_bytes", &r);
	free(t);
	free(bytes);
	res = sh(&sb, "head -c 40000000 /dev/zero > fill; echo $?", 60);
	char *rj = json_dumps(res, JSON_COMPACT);
	json_decref(res);
	check_body("a command filling the workspace", rj, strlen(rj));
	free(rj);

	/* Commands that fail validation, and commands that are killed. */
	char *argv_true[] = { "true", NULL };
	char et[160];
	snprintf(et, sizeof(et), "/v1/sandboxes/%s/execute", sb.id);
	char *body = command_body(argv_true, "../..", 10, false);
	r = request("working directory out", "POST", et, sb.handle, body);
	cr_assert_eq(r.status, 400, "%s", r.body);
	resp_free(&r);
	free(body);
	body = command_body(argv_true, "etc_link", 10, false);
	r = request("working directory through a symlink", "POST", et, sb.handle, body);
	cr_assert_eq(r.status, 400, "%s", r.body);
	resp_free(&r);
	free(body);
	char *argv_empty[] = { "", NULL };
	body = command_body(argv_empty, NULL, 10, false);
	r = request("empty argv[0]", "POST", et, sb.handle, body);
	cr_assert_eq(r.status, 400, "%s", r.body);
	resp_free(&r);
	free(body);
	fails("execute body not JSON", "POST", et, sb.handle, "{", 400, "ToolValidationError");
	fails("execute body unknown field", "POST", et, sb.handle,
	      "{\"command\":{},\"cwd\":\"/srv\"}", 400, "ToolValidationError");
	fails("execute stream not a boolean", "POST", et, sb.handle,
	      "{\"command\":{},\"stream\":1}", 400, "ToolValidationError");
	char *argv_missing[] = { "/no/such/program", NULL };
	r = execute(&sb, argv_missing, 10);
	cr_assert(r.status == 200 || r.status == 400, "%s", r.body);
	resp_free(&r);
	res = sh(&sb, "sleep 30", 1);
	cr_assert_str_eq(json_str(res, "killed_by"), "TIMEOUT");
	json_decref(res);
	/* Streamed: an error arrives as the stream's last line. */
	body = command_body(argv_true, "../x", 10, true);
	r = request("streamed, invalid", "POST", et, sb.handle, body);
	cr_assert_eq(r.status, 200, "%s", r.body);
	json_t *ev = last_event(&r);
	cr_assert_str_eq(json_str(ev, "event"), "error", "%s", r.body);
	cr_assert_str_eq(json_str(json_object_get(ev, "error"), "error"), "WorkspaceEscape");
	json_decref(ev);
	resp_free(&r);
	free(body);
	body = command_body((char *[]){ "sh", "-c", "ls -l /; cat nothing", NULL }, NULL,
	                    10, true);
	r = request("streamed", "POST", et, sb.handle, body);
	cr_assert_eq(r.status, 200, "%s", r.body);
	ev = last_event(&r);
	cr_assert_str_eq(json_str(ev, "event"), "result", "%s", r.body);
	json_decref(ev);
	cr_assert(strstr(r.body, "\"event\":\"output\""), "output events: %s", r.body);
	resp_free(&r);
	free(body);

	/* Another tenant's handle: the sandbox is destroyed, and says no
	 * more than that. */
	sandbox other;
	provision("tenant-other", NULL, &other);
	char *forged = handle_with(&other, "tenant_id", json_string("tenant-gate"));
	snprintf(et, sizeof(et), "/v1/sandboxes/%s/execute", other.id);
	body = command_body(argv_true, NULL, 10, false);
	r = request("a forged tenant", "POST", et, forged, body);
	expect_some_error("a forged tenant", &r);
	free(forged);
	forged = handle_with(&other, "lease_epoch", json_integer(99));
	r = request("a forged epoch", "POST", et, forged, body);
	expect_some_error("a forged epoch", &r);
	free(forged);
	free(body);
	destroy(&other);
	sandbox_forget(&other);

	/* A destroyed id: every verb is refused, destroy stays idempotent. */
	destroy(&sb);
	char *argv[] = { "true", NULL };
	r = execute(&sb, argv, 10);
	expect_error("execute after destroy", &r, 404, "ExecutionRejected");
	ws_fails("read after destroy", &sb, "GET", "file", "path=d%2Ff&max_bytes=10", NULL, 404,
	         "ExecutionRejected");
	ws_fails("write after destroy", &sb, "PUT", "file", "path=new", "x", 404,
	         "ExecutionRejected");
	ws_fails("listdir after destroy", &sb, "GET", "dir", "path=.", NULL, 404,
	         "ExecutionRejected");
	ws_fails("contain after destroy", &sb, "GET", "contain", "path=d", NULL, 404,
	         "ExecutionRejected");
	ws_fails("provenance after destroy", &sb, "GET", "provenance", "path=d%2Ff", NULL, 404,
	         "ExecutionRejected");
	char ct[160];
	snprintf(ct, sizeof(ct), "/v1/sandboxes/%s/cancel", sb.id);
	fails("cancel after destroy", "POST", ct, sb.handle, NULL, 404, "ExecutionRejected");
	destroy(&sb);
	sandbox_forget(&sb);
	gate_down();
}

/* The write cap: a body past max_write_bytes is 413 before it is read. */
Test(gate_service_no_host_path, write_past_the_cap, .timeout = 300, .fini = gate_fini)
{
	gate_opts o = { .max_write_bytes = 1u << 20 };
	gate_up(&o);
	sandbox sb;
	provision("tenant-gate", NULL, &sb);
	char target[200];
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/workspace/file?path=big", sb.id);
	oversize("write past the cap", "PUT", target, sb.handle, 2u << 20);
	char *t = ws_target(&sb, "file", "path=big&max_bytes=10");
	resp r = request("the capped write wrote nothing", "GET", t, sb.handle, NULL);
	free(t);
	expect_some_error("the capped write wrote nothing", &r);
	destroy(&sb);
	sandbox_forget(&sb);
	gate_down();
}

Test(gate_service_no_host_path, capacity, .timeout = 300, .fini = gate_fini)
{
	gate_opts o = { .max_sandboxes = 2 };
	gate_up(&o);
	sandbox a, b;
	provision("tenant-gate", NULL, &a);
	provision("tenant-gate", NULL, &b);
	resp r = request("list, two live", "GET", "/v1/sandboxes", NULL, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(json_array_size(json_object_get(r.json, "sandboxes")), 2, "%s", r.body);
	resp_free(&r);
	char *body = spec_json("tenant-gate", G.digest, NULL, NULL);
	r = request("past max_sandboxes", "POST", "/v1/sandboxes", NULL, body);
	expect_error("past max_sandboxes", &r, 503, "ExecutionUnavailable");
	destroy(&a);
	r = request("room again", "POST", "/v1/sandboxes", NULL, body);
	sandbox c;
	sandbox_from(&r, &c);
	free(body);
	destroy(&b);
	destroy(&c);
	sandbox_forget(&a);
	sandbox_forget(&b);
	sandbox_forget(&c);
	gate_down();
}

Test(gate_service_no_host_path, dead_proxy, .timeout = 300, .fini = gate_fini)
{
	static const char op[] = "egress:\n"
	                         "  mode: allowlist\n"
	                         "  destinations:\n"
	                         "    - host: a.example.com\n"
	                         "      ports: [443]\n";
	gate_opts o = { .op_egress = op };
	gate_up(&o);
	pid_t pid = airlock_proxy_pid(G.px);
	cr_assert_gt(pid, 0);
	cr_assert_eq(kill(pid, SIGKILL), 0);
	/* Gone for certain before the provision asks it anything. */
	for (int i = 0; i < 500 && kill(pid, 0) == 0; i++) {
		char st[64], line[256];
		snprintf(st, sizeof(st), "/proc/%d/stat", pid);
		FILE *f = fopen(st, "re");
		bool zombie = f && fgets(line, sizeof(line), f) && strstr(line, ") Z ");
		if (f)
			fclose(f);
		if (zombie)
			break;
		usleep(10000);
	}
	char *body = spec_json("tenant-gate", G.digest, NULL, op);
	resp r = request("provision with a dead proxy", "POST", "/v1/sandboxes", NULL, body);
	expect_some_error("provision with a dead proxy", &r);
	/* Without egress it still provisions: the proxy's death is not the
	 * sandbox's. */
	free(body);
	body = spec_json("tenant-gate", G.digest, NULL, NULL);
	r = request("provision without egress", "POST", "/v1/sandboxes", NULL, body);
	sandbox sb;
	sandbox_from(&r, &sb);
	destroy(&sb);
	sandbox_forget(&sb);
	free(body);
	gate_down();
}

/* What a stopping service says: new provisions and executes are refused
 * (retriable), a command in flight ends SERVICE_SHUTDOWN with its output. */
Test(gate_service_no_host_path, shutting_down, .timeout = 300, .fini = gate_fini)
{
	gate_up(NULL);
	sandbox sb;
	provision("tenant-gate", NULL, &sb);
	airlock_service_shutdown(G.svc);
	resp r = request("health, stopping", "GET", "/v1/health", NULL, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(json_is_true(json_object_get(r.json, "shutting_down")), "%s", r.body);
	resp_free(&r);
	char *body = spec_json("tenant-gate", G.digest, NULL, NULL);
	fails("provision while stopping", "POST", "/v1/sandboxes", NULL, body, 503,
	      "ExecutionUnavailable");
	free(body);
	char *argv[] = { "true", NULL };
	r = execute(&sb, argv, 10);
	expect_error("execute while stopping", &r, 503, "ExecutionUnavailable");
	destroy(&sb);
	sandbox_forget(&sb);
	gate_down();
}

/* A sandbox past expires_at is destroyed by the service's timer; its id
 * is then refused like any other that is not live. */
Test(gate_service_no_host_path, expired, .timeout = 300, .fini = gate_fini)
{
	gate_opts o = { .hard_cap_seconds = 2 };
	gate_up(&o);
	airlock_resource_limits l = small_limits;
	l.wall_clock_seconds = 2;
	sandbox sb;
	provision("tenant-gate", &l, &sb);
	char *argv[] = { "sleep", "30", NULL };
	resp r = execute(&sb, argv, 30);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(json_str(json_object_get(r.json, "result"), "killed_by"), "EXPIRED", "%s",
	                 r.body);
	resp_free(&r);
	char *again[] = { "true", NULL };
	r = execute(&sb, again, 10);
	expect_error("execute after expiry", &r, 404, "ExecutionRejected");
	sandbox sb2;
	provision("tenant-gate", &l, &sb2);
	sleep(4);
	ws_fails("read after the timer's destroy", &sb2, "GET", "dir", "path=.", NULL, 404,
	         "ExecutionRejected");
	sandbox_forget(&sb);
	sandbox_forget(&sb2);
	gate_down();
}

/* An image whose bytes no longer hash to its name: a copy of the store's
 * default image in a store of the test's own, one byte changed. */
Test(gate_service_no_host_path, altered_image, .timeout = 600, .fini = gate_fini)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	sandbox_test_require(digest);
	char *dir = store_copy;
	snprintf(store_copy, sizeof(store_copy), "/tmp/airlock-gate-store-XXXXXX");
	cr_assert(mkdtemp(store_copy));
	airlock_error err = { 0 };
	airlock_image_store *src = NULL, *dst = NULL;
	cr_assert_eq(airlock_image_store_open(sandbox_test_store(), &src, &err), 0, "%s",
	             err.message);
	cr_assert_eq(airlock_image_store_open(dir, &dst, &err), 0, "%s", err.message);
	int fd = -1;
	cr_assert_eq(airlock_image_open_verified(src, digest, &fd, &err), 0, "%s", err.message);
	char copied[AIRLOCK_IMAGE_DIGEST_SIZE];
	cr_assert_eq(airlock_image_import(dst, fd, copied, &err), 0, "%s", err.message);
	close(fd);
	cr_assert_str_eq(copied, digest);
	char file[PATH_MAX];
	snprintf(file, sizeof(file), "%s/sha256/%s.erofs", airlock_image_store_path(dst),
	         digest + strlen("sha256:"));
	airlock_image_store_free(src);
	airlock_image_store_free(dst);
	cr_assert_eq(chmod(file, 0644), 0);
	int w = open(file, O_RDWR | O_CLOEXEC);
	cr_assert_geq(w, 0);
	unsigned char b;
	cr_assert_eq(pread(w, &b, 1, 4096), 1);
	b ^= 0xff;
	cr_assert_eq(pwrite(w, &b, 1, 4096), 1);
	close(w);
	cr_assert_eq(chmod(file, 0444), 0);

	gate_opts o = { .store = dir };
	gate_up(&o);
	forbid(dir);
	char *body = spec_json("tenant-gate", G.digest, NULL, NULL);
	resp r = request("provision an altered image", "POST", "/v1/sandboxes", NULL, body);
	cr_assert(strstr(r.body, "altered"), "the refusal says why: %s", r.body);
	expect_error("provision an altered image", &r, 409, "ExecutionRejected");
	free(body);
	gate_down();
}

/* The search itself finds a path however the body carries it. */
Test(gate_service_no_host_path, the_search_finds_a_path)
{
	memset(&G, 0, sizeof(G));
	forbid("/run/airlock");
	static const char *const bodies[] = {
		"{\"message\":\"at /run/airlock/x\"}",
		"{\"message\":\"at \\/run\\/airlock\\/x\"}",
		"{\"message\":\"at \\u002frun\\u002fairlock\"}",
		"{\"stdout\":\"L3J1bi9haXJsb2NrL2hvc3RzCg==\"}",
		"{\"event\":\"started\"}\n{\"event\":\"output\",\"data\":\"L3J1bi9haXJsb2NrCg==\"}\n",
		"{\"\\/run\\/airlock\":1}",
		"\x00\x01/run/airlock",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bodies); i++)
		cr_assert(hit_in_body(bodies[i], strlen(bodies[i]) + (i == ARRAY_SIZE(bodies) - 1 ? 14 : 0)),
		          "body %zu: not found: %s", i, bodies[i]);
	const char *clean = "{\"message\":\"/workspace/a is outside\",\"stdout\":\"aGk=\"}";
	cr_assert_null(hit_in_body(clean, strlen(clean)));
}
