/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The execution service's API server as a client's bytes reach it: each
 * input is sent as it is over the server's Unix socket (the server runs in
 * this process over the fake mechanism, so the whole request path runs:
 * libmicrohttpd's parsing, the credential, the route, the handle header,
 * the query, the provision and execute envelopes and the port's decoders,
 * the workspace verbs, streaming), the write side is closed and the answer
 * read. This covers the request phases of the server core (src/http/) and
 * the envelope decoding in the service's jobs (src/service/job_*.c) that
 * is not callable on its own (fuzz_service_request.c fuzzes the decoders
 * that are).
 *
 * So that inputs can reach past the credential and the handle check, three
 * placeholders are replaced before sending: @TOKEN@ by the credential,
 * @ID@ by the live sandbox's environment id and @HANDLE@ by its
 * Airlock-Handle value (the handle holds the service's own timestamps, so
 * a seed cannot spell it). The sandbox is provisioned again whenever an
 * input destroyed it.
 *
 * Checked for every answer: the server is still there (the next input
 * connects), an answer is an HTTP/1.1 status line, a JSON error is the one
 * error shape, and no answer names the socket or its directory (unless
 * the request itself did: a message may quote the caller's bytes).
 */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "airlock/fake.h"
#include "airlock/json.h"
#include "airlock/service.h"
#include "util/util.h"

#define TOKEN "fuzz-service-token-0123456789abcdef"
#define ENV_ID "env_f0220000000000000000000000000001"

static char dir[64], sock_path[128];
static airlock_exec *exec_;
static airlock_service *service;
static char handle_b64[2048];

static void die(const char *what)
{
	fprintf(stderr, "fuzz_service_http: %s\n", what);
	abort();
}

static void teardown(void)
{
	airlock_service_free(service);
	airlock_exec_free(exec_);
	unlink(sock_path);
	rmdir(dir);
}

/* The sandbox the placeholders name, provisioned when it is not live. */
static void ensure_sandbox(void)
{
	/* What earlier inputs provisioned goes, so that capacity stays for
	 * the next input's provision. */
	airlock_exec_entry *v = NULL;
	size_t n = 0;
	if (airlock_exec_list(exec_, &v, &n, NULL) == 0) {
		for (size_t i = 0; i < n; i++) {
			if (strcmp(v[i].environment_id, ENV_ID) == 0)
				continue;
			airlock_environment_handle h = { .tenant_id = v[i].tenant_id,
				                         .run_id = v[i].run_id,
				                         .lease_epoch = v[i].lease_epoch,
				                         .created_at_ms = v[i].created_at_ms,
				                         .expires_at_ms = v[i].expires_at_ms };
			memcpy(h.environment_id, v[i].environment_id, sizeof(h.environment_id));
			airlock_exec_destroy(exec_, &h, NULL);
		}
		airlock_exec_list_free(v, n);
	}
	char t[128];
	if (airlock_exec_tenant_of(exec_, ENV_ID, t, sizeof(t), NULL) == 0)
		return;
	static char tenant[] = "tenant-fuzz", run[] = "run-1",
	            digest[] = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
	airlock_environment_spec s = { 0 };
	s.tenant_id = tenant;
	s.run_id = run;
	s.lease_epoch = 1;
	s.image_digest = digest;
	s.limits = (airlock_resource_limits){ .cpu_millicores = 1000, .memory_bytes = 256ll << 20,
		                              .pids_max = 64, .workspace_bytes = 64ll << 20,
		                              .inodes_max = 10000, .wall_clock_seconds = 600 };
	s.egress.mode = AIRLOCK_EGRESS_DENY;
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	if (airlock_exec_provision_as(exec_, &s, ENV_ID, &h, &err) < 0)
		die(err.message);
	char *j = airlock_environment_handle_to_json(&h, &err);
	char *b = j ? util_base64_encode(j, strlen(j)) : NULL;
	if (!b)
		die("handle");
	size_t o = 0;
	for (size_t i = 0; b[i] && b[i] != '=' && o + 1 < sizeof(handle_b64); i++)
		handle_b64[o++] = b[i] == '+' ? '-' : b[i] == '/' ? '_' : b[i];
	handle_b64[o] = 0;
	free(b);
	free(j);
	airlock_environment_handle_clear(&h);
}

static void setup(void)
{
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/airlock-fuzz-svc-XXXXXX");
	if (!mkdtemp(dir))
		die("mkdtemp");
	snprintf(sock_path, sizeof(sock_path), "%s/api.sock", dir);
	airlock_error err = { 0 };
	airlock_fake *f = NULL;
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	cfg.max_sandboxes = 4;
	if (airlock_fake_new(&f, &err) < 0 ||
	    airlock_exec_new(airlock_fake_ops(), f, &cfg, &exec_, &err) < 0)
		die(err.message);
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	char listen[160];
	snprintf(listen, sizeof(listen), "unix:%s", sock_path);
	sc.listen = listen;
	sc.credential = TOKEN;
	sc.credential_len = strlen(TOKEN);
	sc.max_write_bytes = 1u << 20;
	sc.header_timeout_ms = 2000;
	sc.request_timeout_ms = 2000;
	sc.connection_timeout_ms = 2000;
	if (airlock_service_new(&sc, exec_, &service, &err) < 0)
		die(err.message);
	atexit(teardown);
}

/* The input with its placeholders replaced. */
static char *substitute(const uint8_t *data, size_t size, size_t *ret_len)
{
	static const char *const keys[] = { "@TOKEN@", "@ID@", "@HANDLE@" };
	const char *vals[] = { TOKEN, ENV_ID, handle_b64 };
	util_buf b;
	util_buf_init(&b, 4 * size + 4096 * 4);
	for (size_t i = 0; i < size;) {
		bool done = false;
		for (size_t k = 0; k < 3 && !done; k++) {
			size_t kl = strlen(keys[k]);
			if (size - i >= kl && memcmp(data + i, keys[k], kl) == 0) {
				util_buf_append(&b, vals[k], strlen(vals[k]));
				i += kl;
				done = true;
			}
		}
		if (!done)
			util_buf_append(&b, data + i++, 1);
	}
	unsigned char *out = util_buf_steal(&b, ret_len);
	if (!out)
		die("memory");
	return (char *)out;
}

/* echo: the request itself held the directory's name (an error message
 * may quote the caller's bytes back, which tells the caller nothing). */
static void check_answer(const char *a, size_t n, bool echo)
{
	if (n == 0)
		return; /* closed without an answer: bytes that are not HTTP */
	if (n < 12 || memcmp(a, "HTTP/1.", 7) != 0)
		die("an answer that is not an HTTP status line");
	if (!echo && memmem(a, n, dir, strlen(dir)))
		die("an answer names the service's socket directory");
	/* Each JSON error body in the answer (pipelined requests answer in
	 * turn): the one shape. */
	for (const char *p = a; (p = memmem(p, n - (size_t)(p - a), "\r\n\r\n{\"error\"", 13));) {
		p += 4;
		json_error_t je;
		json_t *o = json_loadb(p, n - (size_t)(p - a), JSON_DISABLE_EOF_CHECK, &je);
		if (!json_is_object(o) || !json_is_string(json_object_get(o, "error")) ||
		    !json_is_string(json_object_get(o, "message")) || json_object_size(o) != 2)
			die("an error that is not the error shape");
		json_decref(o);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!service)
		setup();
	ensure_sandbox();
	size_t len = 0;
	char *req = substitute(data, size, &len);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, sock_path, strlen(sock_path));
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("the server is gone");
	/* The server may answer (and close) before it has read everything. */
	(void)!util_write_all(fd, req, len);
	shutdown(fd, SHUT_WR);
	bool echo = memmem(req, len, dir, strlen(dir)) != NULL;
	free(req);
	util_buf b;
	util_buf_init(&b, 8u << 20);
	char chunk[16384];
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, 10000);
		if (r == 0)
			die("no answer and no close within 10 s");
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		util_buf_append(&b, chunk, (size_t)n);
	}
	close(fd);
	size_t alen = 0;
	char *a = (char *)util_buf_steal(&b, &alen);
	check_answer(a ? a : "", a ? alen : 0, echo);
	free(a);
	return 0;
}
