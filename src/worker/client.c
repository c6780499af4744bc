/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A client of the worker's API (airlock/worker_client.h): one call on the
 * remote adapter's transport (src/remote/http.c), pointed at the worker.
 * What comes back is the worker's, so nothing of it is trusted: a 2xx body
 * must be one JSON object within the decoders' cap, anything else is read
 * as the error shape or said not to be one.
 */
#include "airlock/worker_client.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "airlock/port/exec.h"
#include "airlock/credential_file.h"
#include "airlock/json.h"
#include "remote/remote_internal.h"
#include "util/cleanup.h"
#include "util/util.h"

#define WORKER_CLIENT_TIMEOUT_MS 30000
/* A path the client sends: a run id (128) and a tool name escaped three
 * to one fit with room. */
#define WORKER_CLIENT_PATH_MAX 2048

static const remote_peer worker_peer = {
	.who = "worker client", .peer = "the worker", .credential = "worker token",
	.credential_required = false,
};

void airlock_worker_answer_clear(airlock_worker_answer *a)
{
	if (!a)
		return;
	free(a->json);
	memset(a, 0, sizeof(*a));
}

static bool path_valid(const char *p)
{
	size_t n = strlen(p);
	if (n > WORKER_CLIENT_PATH_MAX || strncmp(p, "/v1/", 4) != 0)
		return false;
	/* Nothing a URL could misread (a fragment, a space, a second
	 * request line): the escapes a segment needs are already made. */
	return strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~/?&=%-") ==
	       n;
}

/* The transport for cfg, with the token read from its file as a
 * credential and wiped once the transport holds its copy. */
static int client_open(const airlock_worker_client_config *cfg, remote_http **ret,
                       airlock_error *err)
{
	char *tok = NULL;
	size_t len = 0;
	if (cfg->token_file) {
		int r = airlock_credential_file_read_text(cfg->token_file, "worker token file",
		                                          AIRLOCK_CREDENTIAL_FILE_MAX, &tok, &len, err);
		if (r < 0)
			return r;
		if (len == 0) {
			free(tok);
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "worker token file %s is empty", cfg->token_file);
		}
	}
	airlock_remote_config rc = { .address = cfg->address, .credential = tok,
		                     .credential_len = len, .tls_ca_file = cfg->tls_ca_file };
	int r = remote_http_new_peer(&rc, &worker_peer, ret, err);
	if (tok) {
		explicit_bzero(tok, len);
		free(tok);
	}
	return r;
}

/* o re-encoded for people: indented, members in the worker's order, a
 * final newline. */
static char *pretty(const json_t *o)
{
	_cleanup_free_ char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!text)
		return NULL;
	size_t n = strlen(text);
	char *out = malloc(n + 2);
	if (out) {
		memcpy(out, text, n);
		out[n] = '\n';
		out[n + 1] = 0;
	}
	return out;
}

static int decode_answer(remote_http *h, const remote_response *resp, bool result,
                         airlock_worker_answer *ret, airlock_error *err)
{
	const char *addr = remote_http_address(h);
	ret->status = resp->status;
	if (resp->over_cap)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "the worker at %s answered HTTP %ld with a body over its cap",
		                         addr, resp->status);
	const char *data = (const char *)resp->body.data;
	size_t len = resp->body.len;
	if (resp->status < 200 || resp->status > 299) {
		airlock_error e = { 0 };
		if (len > 0 && airlock_error_from_json(data, len, &e, NULL) == 0 &&
		    e.cls != AIRLOCK_ERR_INVALID)
			ret->error = e;
		else if (resp->status == 413 || resp->status == 414 || resp->status == 431)
			/* Too large for something in front of the worker (a body,
			 * a URL, a head), in its own words: sending it again
			 * cannot succeed, so not the retriable class (the Python
			 * client says the same). */
			airlock_error_set(&ret->error, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                  "HTTP %ld: the request is too large for the server",
			                  resp->status);
		else
			airlock_error_set(&ret->error, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                  "HTTP %ld with a body that is not the error shape", resp->status);
		return 0;
	}
	if (len == 0)
		return 0;
	json_error_t je;
	json_t *o = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "the worker at %s answered HTTP %ld with a body that is not "
		                         "a JSON object (%s)",
		                         addr, resp->status, o ? "another JSON value" : je.text);
	}
	json_t *ec = json_object_get(o, "exit_code");
	if (result && json_is_integer(ec)) {
		ret->has_exit_code = true;
		ret->exit_code = json_integer_value(ec);
	}
	ret->json = pretty(o);
	json_decref(o);
	if (!ret->json)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the worker's answer");
	return 0;
}

static int perform(const airlock_worker_client_config *cfg, const remote_call *c, bool result,
                   airlock_worker_answer *ret, airlock_error *err);

static int call(const airlock_worker_client_config *cfg, const char *method, const char *path,
                const char *body, bool result, airlock_worker_answer *ret, airlock_error *err)
{
	if (!cfg || !method || !path || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0,
		                         "worker client: a configuration, a method and a path are "
		                         "required");
	if (!path_valid(path))
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0,
		                         "worker client: the path is not /v1/... of at most %d "
		                         "URL-safe bytes",
		                         WORKER_CLIENT_PATH_MAX);
	remote_call c = { .method = method, .path = path, .body = body,
		          .body_len = body ? strlen(body) : 0, .has_body = body != NULL,
		          .content_type = "application/json",
		          .timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : WORKER_CLIENT_TIMEOUT_MS,
		          .max_body = (size_t)AIRLOCK_JSON_INPUT_MAX,
		          .watch_fds = { cfg->cancel ? airlock_cancel_fd(cfg->cancel) : -1, -1 },
		          .watch_aborts = cfg->cancel != NULL };
	return perform(cfg, &c, result, ret, err);
}

/* One call as c describes it (its path already checked), its answer
 * decoded into *ret. */
static int perform(const airlock_worker_client_config *cfg, const remote_call *cp, bool result,
                   airlock_worker_answer *ret, airlock_error *err)
{
	remote_http *h = NULL;
	int r = client_open(cfg, &h, err);
	if (r < 0)
		return r;
	const remote_call *c = cp;
	remote_response resp;
	airlock_worker_answer a = { 0 };
	r = remote_http_perform(h, c, &resp, err);
	if (r == 0)
		r = decode_answer(h, &resp, result, &a, err);
	remote_response_clear(&resp);
	remote_http_free(h);
	if (r < 0) {
		airlock_worker_answer_clear(&a);
		return r;
	}
	*ret = a;
	return 0;
}

int airlock_worker_client_call(const airlock_worker_client_config *cfg, const char *method,
                               const char *path, const char *body, airlock_worker_answer *ret,
                               airlock_error *err)
{
	return call(cfg, method, path, body, false, ret, err);
}

/* A path segment: every byte but RFC 3986's unreserved ones escaped, and
 * a segment of dots alone ("." or "..") escaped too, so no client or
 * server on the way reads it as a step up the path. */
static char *segment(const char *s)
{
	if (strspn(s, ".") == strlen(s)) {
		size_t n = strlen(s);
		char *out = malloc(3 * n + 1);
		if (out) {
			for (size_t i = 0; i < n; i++)
				memcpy(out + 3 * i, "%2E", 3);
			out[3 * n] = 0;
		}
		return out;
	}
	return remote_query_escape(s);
}

int airlock_worker_client_tool_call(const airlock_worker_client_config *cfg,
                                    const airlock_worker_tool_request *req,
                                    airlock_worker_answer *ret, airlock_error *err)
{
	if (!req || !req->run_id || !*req->run_id || !req->tool || !*req->tool ||
	    !req->arguments_json || req->epoch < 0 || req->deadline_ms < 0)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0,
		                         "worker client: a tool call needs a run id, a tool name, an "
		                         "epoch >= 0 and its arguments");
	size_t alen = strlen(req->arguments_json);
	if (alen > AIRLOCK_JSON_INPUT_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "the tool's arguments are over %u bytes",
		                         AIRLOCK_JSON_INPUT_MAX);
	json_error_t je;
	json_t *args = json_loadb(req->arguments_json, alen, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(args)) {
		int r = airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                          "the tool's arguments must be a JSON object "
		                          "({\"command\": [\"echo\", \"hi\"]}): %s",
		                          args ? "another JSON value" : je.text);
		json_decref(args);
		return r;
	}
	json_t *body = json_pack("{s:I}", "epoch", (json_int_t)req->epoch);
	bool ok = body != NULL;
	if (ok && req->tenant_id)
		ok = json_object_set_new(body, "tenant_id", json_string(req->tenant_id)) == 0;
	if (ok && req->network_enabled)
		ok = json_object_set_new(body, "network_enabled", json_true()) == 0;
	if (ok && req->deadline_ms > 0)
		ok = json_object_set_new(body, "deadline_ms", json_integer(req->deadline_ms)) == 0;
	if (ok)
		ok = json_object_set(body, "arguments", args) == 0;
	json_decref(args);
	_cleanup_free_ char *text = ok ? json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(body);
	_cleanup_free_ char *run = segment(req->run_id);
	_cleanup_free_ char *tool = segment(req->tool);
	_cleanup_free_ char *path = NULL;
	if (!text || !run || !tool ||
	    asprintf(&path, "/v1/runs/%s/tools/%s", run, tool) < 0) {
		path = NULL;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker client: tool call");
	}
	if (strlen(path) > WORKER_CLIENT_PATH_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "the run id and the tool name are too long for a path (%d "
		                         "bytes escaped)",
		                         WORKER_CLIENT_PATH_MAX);
	return call(cfg, "POST", path, text, true, ret, err);
}

int airlock_worker_client_health(const airlock_worker_client_config *cfg,
                                 airlock_worker_health *ret, airlock_error *err)
{
	airlock_worker_answer a = { 0 };
	int r = call(cfg, "GET", "/v1/health", NULL, false, &a, err);
	if (r < 0)
		return r;
	if (a.status != 200) {
		r = airlock_error_wrap(err, a.error.cls, &a.error, "the worker at %s answered HTTP %ld",
		                       cfg->address, a.status);
		airlock_worker_answer_clear(&a);
		return r;
	}
	json_t *o = a.json ? json_loads(a.json, 0, NULL) : NULL;
	airlock_worker_answer_clear(&a);
	airlock_worker_health h = { 0 };
	const char *db = json_string_value(json_object_get(o, "database"));
	const char *mode = json_string_value(json_object_get(o, "auth_mode"));
	json_t *v = json_object_get(o, "schema_version");
	bool ok = db && mode && strlen(db) < sizeof(h.database) &&
	          strlen(mode) < sizeof(h.auth_mode) && json_is_integer(v);
	if (ok) {
		snprintf(h.database, sizeof(h.database), "%s", db);
		snprintf(h.auth_mode, sizeof(h.auth_mode), "%s", mode);
		h.schema_version = json_integer_value(v);
	}
	json_decref(o);
	if (!ok)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "the worker at %s answered its health without database, "
		                         "schema_version and auth_mode",
		                         cfg->address);
	*ret = h;
	return 0;
}

/* ---- the artifact store's routes ----------------------------------------- */

/* A stalled transfer (under 1 KiB/s for 30 s) is cut whatever its
 * deadline, as the remote adapter's workspace stream is: the deadline
 * grows with the size, a stall does not wait for it. */
#define TRANSFER_LOW_SPEED_BYTES 1024L
#define TRANSFER_LOW_SPEED_S 30L

/* A transfer's time: the call's timeout and a second for every 64 KiB,
 * the worker's own rule for a body (docs/worker-api.md, "Upload"). */
static int64_t transfer_timeout_ms(const airlock_worker_client_config *cfg, uint64_t size)
{
	int64_t base = cfg->timeout_ms > 0 ? cfg->timeout_ms : WORKER_CLIENT_TIMEOUT_MS;
	return base + (int64_t)(size / (64u << 10)) * 1000;
}

/* An id as it goes into a path or a query: 1 to max of the bytes given,
 * so no escape is needed and nothing in it reads as a separator. */
static bool token_ok(const char *s, size_t max, const char *set)
{
	size_t n = s ? strlen(s) : 0;
	return n >= 1 && n <= max && strspn(s, set) == n;
}

#define TOKEN_SET "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
#define ID_SET "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-"

typedef struct put_source {
	int fd;
	uint64_t off;
} put_source;

static ssize_t put_read(void *arg, char *buf, size_t room, airlock_error *err)
{
	put_source *p = arg;
	ssize_t k;
	do
		k = pread(p->fd, buf, room, (off_t)p->off);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "reading the upload");
	p->off += (uint64_t)k;
	return k;
}

/* The SHA-256 of fd's first size bytes, read with pread in pieces of
 * AIRLOCK_ARTIFACT_STREAM_BUF_BYTES; a file that ends early is an error
 * (it changed under us). */
static int hash_fd(int fd, uint64_t size, char hex[AIRLOCK_SHA256_HEX_LEN + 1],
                   airlock_error *err)
{
	util_sha256 *hs = util_sha256_new();
	_cleanup_free_ char *buf = malloc(AIRLOCK_ARTIFACT_STREAM_BUF_BYTES);
	if (!hs || !buf) {
		util_sha256_free(hs);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "hashing the upload");
	}
	put_source src = { .fd = fd };
	while (src.off < size) {
		uint64_t left = size - src.off;
		size_t want = left < AIRLOCK_ARTIFACT_STREAM_BUF_BYTES ? (size_t)left
		                                                       : AIRLOCK_ARTIFACT_STREAM_BUF_BYTES;
		ssize_t k = put_read(&src, buf, want, err);
		if (k <= 0) {
			util_sha256_free(hs);
			return k < 0 ? (int)k
			             : airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO,
			                                 "the upload ended at %llu of %llu bytes while "
			                                 "it was hashed (it changed)",
			                                 (unsigned long long)src.off,
			                                 (unsigned long long)size);
		}
		if (util_sha256_update(hs, buf, (size_t)k) < 0) {
			util_sha256_free(hs);
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "hashing the upload");
		}
	}
	if (util_sha256_final_hex(hs, hex) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "hashing the upload");
	return 0;
}

int airlock_worker_client_artifact_put(const airlock_worker_client_config *cfg,
                                       const airlock_worker_artifact_upload *req,
                                       airlock_worker_answer *ret, airlock_error *err)
{
	if (!cfg || !req || !ret || req->fd < 0 || !req->filename || !*req->filename)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0,
		                         "worker client: an upload needs a configuration, a file "
		                         "and a filename");
	if (req->tenant_id && !token_ok(req->tenant_id, 128, TOKEN_SET))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "the tenant id is not 1 to 128 of A-Z, a-z, 0-9, '_' and '-'");
	struct stat st;
	if (fstat(req->fd, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "the upload");
	if (!S_ISREG(st.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "the upload is not a regular file (its size must be known "
		                         "before it is sent)");
	uint64_t size = (uint64_t)st.st_size;
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
	int r = hash_fd(req->fd, size, hex, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *name = remote_query_escape(req->filename);
	_cleanup_free_ char *media = req->media_type ? remote_query_escape(req->media_type) : NULL;
	_cleanup_free_ char *path = NULL;
	if (!name || (req->media_type && !media) ||
	    asprintf(&path, "/v1/artifacts?filename=%s%s%s%s%s", name,
	             media ? "&media_type=" : "", media ? media : "",
	             req->tenant_id ? "&tenant_id=" : "", req->tenant_id ? req->tenant_id : "") < 0) {
		path = NULL;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker client: upload");
	}
	if (!path_valid(path))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "the filename and media type are too long for a request "
		                         "(%d bytes percent-encoded)",
		                         WORKER_CLIENT_PATH_MAX);
	char header[sizeof("Airlock-Content-SHA256: ") + AIRLOCK_SHA256_HEX_LEN];
	snprintf(header, sizeof(header), "Airlock-Content-SHA256: %s", hex);
	put_source src = { .fd = req->fd };
	remote_call c = { .method = "POST", .path = path, .source = put_read, .source_arg = &src,
		          .source_len = size, .content_type = "application/octet-stream",
		          .extra_header = header, .timeout_ms = transfer_timeout_ms(cfg, size),
		          .low_speed_bytes = TRANSFER_LOW_SPEED_BYTES,
		          .low_speed_s = TRANSFER_LOW_SPEED_S,
		          .max_body = (size_t)AIRLOCK_JSON_INPUT_MAX, .watch_fds = { -1, -1 } };
	return perform(cfg, &c, false, ret, err);
}

/* A download's content: written to the caller's descriptor as it comes,
 * hashed, counted against the metadata's size; the ETag read from the
 * header block. */
typedef struct get_sink {
	int fd;
	util_sha256 *hash;
	uint64_t size, got;
	remote_etag etag;
} get_sink;

static int get_write(void *arg, const char *data, size_t len, airlock_error *err)
{
	get_sink *g = arg;
	if (len > g->size - g->got)
		return airlock_error_set(err, AIRLOCK_ERR_ARTIFACT_INTEGRITY, 0,
		                         "the worker sent more than the artifact's %llu bytes",
		                         (unsigned long long)g->size);
	g->got += len;
	if (util_sha256_update(g->hash, data, len) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "hashing the download");
	while (len > 0) {
		ssize_t k = write(g->fd, data, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, k < 0 ? errno : EIO,
			                         "writing the download");
		data += k;
		len -= (size_t)k;
	}
	return 0;
}

static void get_header(void *arg, const char *line, size_t len)
{
	get_sink *g = arg;
	remote_etag_line(&g->etag, line, len);
}

/* A member of the metadata: size_bytes >= 0 and sha256 64 lowercase hex. */
static bool metadata_ok(const char *json, uint64_t *size, char hex[AIRLOCK_SHA256_HEX_LEN + 1])
{
	json_t *o = json ? json_loads(json, 0, NULL) : NULL;
	json_t *sz = json_object_get(o, "size_bytes");
	const char *d = json_string_value(json_object_get(o, "sha256"));
	bool ok = json_is_integer(sz) && json_integer_value(sz) >= 0 && d &&
	          strlen(d) == AIRLOCK_SHA256_HEX_LEN &&
	          strspn(d, "0123456789abcdef") == AIRLOCK_SHA256_HEX_LEN;
	if (ok) {
		*size = (uint64_t)json_integer_value(sz);
		memcpy(hex, d, AIRLOCK_SHA256_HEX_LEN + 1);
	}
	json_decref(o);
	return ok;
}

int airlock_worker_client_artifact_get(const airlock_worker_client_config *cfg,
                                       const char *artifact_id, int out_fd,
                                       airlock_worker_answer *ret, airlock_error *err)
{
	if (!cfg || !ret || out_fd < 0 || !artifact_id)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0,
		                         "worker client: a download needs a configuration, an id "
		                         "and a descriptor");
	if (!token_ok(artifact_id, 64, ID_SET))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "the artifact id is not 1 to 64 of A-Z, a-z, 0-9 and '-'");
	char path[128];
	snprintf(path, sizeof(path), "/v1/artifacts/%s", artifact_id);
	airlock_worker_answer meta = { 0 };
	int r = call(cfg, "GET", path, NULL, false, &meta, err);
	if (r < 0)
		return r;
	if (meta.status != 200) {
		*ret = meta;
		return 0;
	}
	uint64_t size = 0;
	char want[AIRLOCK_SHA256_HEX_LEN + 1];
	if (!metadata_ok(meta.json, &size, want)) {
		airlock_worker_answer_clear(&meta);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "the worker at %s answered the artifact's metadata without "
		                         "size_bytes and sha256",
		                         cfg->address);
	}
	get_sink g = { .fd = out_fd, .hash = util_sha256_new(), .size = size };
	if (!g.hash) {
		airlock_worker_answer_clear(&meta);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "hashing the download");
	}
	snprintf(path, sizeof(path), "/v1/artifacts/%s/content", artifact_id);
	remote_call c = { .method = "GET", .path = path, .sink = get_write, .sink_arg = &g,
		          .on_header = get_header, .header_arg = &g,
		          .timeout_ms = transfer_timeout_ms(cfg, size),
		          .low_speed_bytes = TRANSFER_LOW_SPEED_BYTES,
		          .low_speed_s = TRANSFER_LOW_SPEED_S, .max_body = (size_t)AIRLOCK_JSON_INPUT_MAX, .watch_fds = { -1, -1 } };
	airlock_worker_answer a = { 0 };
	r = perform(cfg, &c, false, &a, err);
	char got[AIRLOCK_SHA256_HEX_LEN + 1] = { 0 };
	int hr = util_sha256_final_hex(g.hash, got);
	if (r < 0) {
		airlock_worker_answer_clear(&meta);
		return r;
	}
	if (a.status != 200) {
		/* 206 is never asked for (no Range is sent): any other status
		 * is the worker's refusal, or not an answer to this request. */
		airlock_worker_answer_clear(&meta);
		if (a.status >= 200 && a.status <= 299) {
			long st = a.status;
			airlock_worker_answer_clear(&a);
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                         "the worker at %s answered HTTP %ld to a download",
			                         cfg->address, st);
		}
		*ret = a;
		return 0;
	}
	airlock_worker_answer_clear(&a);
	if (hr < 0) {
		airlock_worker_answer_clear(&meta);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "hashing the download");
	}
	char etag_want[sizeof("\"sha256:\"") + AIRLOCK_SHA256_HEX_LEN];
	snprintf(etag_want, sizeof(etag_want), "\"sha256:%s\"", want);
	if (g.got != size)
		r = airlock_error_set(err, AIRLOCK_ERR_ARTIFACT_INTEGRITY, 0,
		                      "the download ended at %llu of the artifact's %llu bytes "
		                      "(sha256 %s expected, %s received)",
		                      (unsigned long long)g.got, (unsigned long long)size, want, got);
	else if (strcmp(got, want) != 0)
		r = airlock_error_set(err, AIRLOCK_ERR_ARTIFACT_INTEGRITY, 0,
		                      "the bytes received have sha256 %s, the artifact's metadata says "
		                      "%s",
		                      got, want);
	else if (!g.etag.have || g.etag.bad || strcmp(g.etag.value, etag_want) != 0)
		r = airlock_error_set(err, AIRLOCK_ERR_ARTIFACT_INTEGRITY, 0,
		                      "the download's ETag is not \"sha256:%s\" (the bytes received "
		                      "have sha256 %s)",
		                      want, got);
	if (r < 0) {
		airlock_worker_answer_clear(&meta);
		return r;
	}
	/* The metadata carries the uploader's filename, any bytes: written
	 * back with every non-ASCII character escaped, so no bidirectional
	 * override or C1 control reaches a terminal that prints it. */
	json_t *o = json_loads(meta.json, 0, NULL);
	char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII)
	               : NULL;
	json_decref(o);
	char *line = text ? malloc(strlen(text) + 2) : NULL;
	if (!line) {
		free(text);
		airlock_worker_answer_clear(&meta);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the artifact's metadata");
	}
	sprintf(line, "%s\n", text);
	free(text);
	free(meta.json);
	meta.json = line;
	*ret = meta;
	return 0;
}

int airlock_worker_client_artifact_list(const airlock_worker_client_config *cfg,
                                        const airlock_worker_artifact_query *q,
                                        airlock_worker_item_fn each, void *arg,
                                        airlock_worker_answer *ret, airlock_error *err)
{
	if (!cfg || !q || !each || !ret || q->limit < 0)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0,
		                         "worker client: a listing needs a configuration, a query "
		                         "with a limit >= 0 and a callback");
	const char *const given[] = { q->run_id, q->tenant_id, q->after };
	for (size_t i = 0; i < ARRAY_SIZE(given); i++)
		if (given[i] && !token_ok(given[i], 128, TOKEN_SET))
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "the %s is not 1 to 128 of A-Z, a-z, 0-9, '_' and '-'",
			                         i == 0 ? "run id" : i == 1 ? "tenant id" : "after id");
	char after[129] = { 0 };
	if (q->after)
		snprintf(after, sizeof(after), "%s", q->after);
	int64_t left = q->limit;
	for (;;) {
		int64_t page = AIRLOCK_WORKER_DB_ARTIFACTS_MAX;
		if (q->limit > 0 && left < page)
			page = left;
		char path[512];
		snprintf(path, sizeof(path), "/v1/artifacts?limit=%lld%s%s%s%s%s%s", (long long)page,
		         q->run_id ? "&run_id=" : "", q->run_id ? q->run_id : "",
		         q->tenant_id ? "&tenant_id=" : "", q->tenant_id ? q->tenant_id : "",
		         after[0] ? "&after=" : "", after);
		airlock_worker_answer a = { 0 };
		int r = call(cfg, "GET", path, NULL, false, &a, err);
		if (r < 0)
			return r;
		if (a.status != 200) {
			*ret = a;
			return 0;
		}
		json_t *o = a.json ? json_loads(a.json, 0, NULL) : NULL;
		airlock_worker_answer_clear(&a);
		json_t *items = json_object_get(o, "artifacts");
		json_t *next = json_object_get(o, "next_after");
		const char *n = json_string_value(next);
		if (!json_is_array(items) || (!json_is_null(next) && !token_ok(n, 128, TOKEN_SET)) ||
		    (int64_t)json_array_size(items) > page) {
			json_decref(o);
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                         "the worker at %s answered a listing without artifacts "
			                         "(at most %lld) and next_after",
			                         cfg->address, (long long)page);
		}
		size_t i;
		json_t *it;
		json_array_foreach(items, i, it) {
			/* Every non-ASCII character escaped: a filename's
			 * bidirectional override or C1 control stays text. */
			_cleanup_free_ char *line = json_dumps(it, JSON_COMPACT | JSON_PRESERVE_ORDER |
			                                               JSON_ENCODE_ANY |
			                                               JSON_ENSURE_ASCII);
			r = line ? each(arg, line, err)
			         : airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the listing");
			if (r < 0) {
				json_decref(o);
				return r;
			}
		}
		left -= (int64_t)json_array_size(items);
		bool more = n && (q->limit == 0 || left > 0);
		if (more)
			snprintf(after, sizeof(after), "%s", n);
		json_decref(o);
		if (!more) {
			*ret = (airlock_worker_answer){ .status = 200 };
			return 0;
		}
	}
}
