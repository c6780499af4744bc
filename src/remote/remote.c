/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The remote adapter (include/airlock/remote.h): the ExecutionEnvironment
 * port over the execution service's API (docs/service-api.md). It runs
 * nothing; the service does. docs/remote.md describes how it behaves.
 *
 * The client's core (airlock_exec over these ops) keeps its own records
 * and checks every handle against them, as for any adapter; the service's
 * core checks them again against what it provisioned. The two cores' clocks
 * differ, so the service's handle (its created_at and expires_at) is kept
 * here per environment id and is what travels in Airlock-Handle.
 */
#include "airlock/remote.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "airlock/ids.h"
#include "airlock/json.h"
#include "remote/remote_internal.h"

/*
 * Client timeouts (the issue: "derived from the start budget and the
 * effective timeout").
 *
 * Provision: the start budget plus PROVISION_MARGIN_MS. The service itself
 * gives up on a provision past the start budget (ExecutionUnavailable), so
 * the margin only has to cover what is not the mechanism's start: the
 * request's queueing in the service, the cleanup of a failed start and the
 * answer's way back. A client that gives up later than the service never
 * leaves a sandbox the service still makes; one that gave up earlier would.
 *
 * Execute: the effective timeout plus EXECUTE_MARGIN_MS. The command is
 * killed at the effective timeout, but its result is not ready then: the
 * service waits for every process of the sandbox to be gone (bounded by the
 * mechanism's kill wait), then takes the after-snapshot of the workspace
 * and hashes every changed file for files_changed (up to 1000 entries of
 * files up to the workspace's size: the longest step, tens of seconds on a
 * full multi-GiB volume), then encodes up to two 16 MiB streams. A margin
 * shorter than that would turn a slow but honest result into a retriable
 * error whose command has already run.
 */
#define PROVISION_MARGIN_MS 10000
#define EXECUTE_MARGIN_MS 60000
/* Destroy kills, unmounts and detaches; cancel only signals. */
#define DESTROY_TIMEOUT_MS 60000
#define CANCEL_TIMEOUT_MS 10000
/* While a cancel is wanted and not yet acknowledged it is retried this
 * often: the token may fire before the service has started the command
 * ({"cancelled": false}), and the command must still end. */
#define CANCEL_RETRY_MS 50

typedef struct remote_env {
	char environment_id[AIRLOCK_ENVIRONMENT_ID_MAX];
	char *handle_b64; /* the service's handle, as Airlock-Handle carries it */
	airlock_workspace *ws;
} remote_env;

struct airlock_remote {
	remote_http *http;
	int64_t start_budget_ms;
	/* Readable once shutdown() ran: every execute in flight watches it. */
	int shutdown_efd;
	pthread_mutex_t lock;
	remote_env *envs;
	size_t n_envs;
};

static const airlock_exec_ops remote_ops;

int airlock_remote_new(const airlock_remote_config *cfg, airlock_remote **ret,
                       airlock_error *err)
{
	airlock_remote *rm = calloc(1, sizeof(*rm));
	if (!rm)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "remote adapter");
	int r = remote_http_new(cfg, &rm->http, err);
	if (r < 0) {
		free(rm);
		return r;
	}
	rm->shutdown_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (rm->shutdown_efd < 0) {
		int e = errno;
		remote_http_free(rm->http);
		free(rm);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "remote adapter: eventfd");
	}
	rm->start_budget_ms =
	        (cfg->start_budget_seconds > 0 ? cfg->start_budget_seconds : 30) * (int64_t)1000;
	pthread_mutex_init(&rm->lock, NULL);
	*ret = rm;
	return 0;
}

const airlock_exec_ops *airlock_remote_ops(void)
{
	return &remote_ops;
}

/* Caller holds the lock. */
static remote_env *env_find(airlock_remote *rm, const char *id)
{
	for (size_t i = 0; i < rm->n_envs; i++)
		if (strcmp(rm->envs[i].environment_id, id) == 0)
			return &rm->envs[i];
	return NULL;
}

/* The Airlock-Handle of a live environment, copied (an execute or a
 * destroy on another thread must not free it under the call). */
static int env_handle(airlock_remote *rm, const char *id, char **ret, airlock_error *err)
{
	char *b = NULL;
	pthread_mutex_lock(&rm->lock);
	remote_env *e = env_find(rm, id);
	if (e)
		b = strdup(e->handle_b64);
	pthread_mutex_unlock(&rm->lock);
	if (!e) {
		free(b); /* NULL: for the analyzer, which cannot tell */
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "environment %s is not live: destroyed, expired or never "
		                         "provisioned",
		                         id);
	}
	if (!b)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "remote adapter");
	*ret = b;
	return 0;
}

/* A sub-object of a decoded answer, re-encoded for the strict decoders of
 * json.h (which take text): the wire carries the types exactly as those
 * encoders write them. */
static char *member_text(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

/* o has exactly these members, no other. */
static bool only_members(json_t *o, const char *const *names, size_t n)
{
	if (!json_is_object(o) || json_object_size(o) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!json_object_get(o, names[i]))
			return false;
	return true;
}

/* ---- destroy (provision's failure path uses it) -------------------------- */

static int destroy_call(airlock_remote *rm, const char *id, const char *b64, airlock_error *err)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	remote_call c = { .method = "DELETE", .path = path, .handle_b64 = b64,
		          .timeout_ms = DESTROY_TIMEOUT_MS, .max_body = REMOTE_ERROR_BODY_MAX,
		          .watch_fds = { -1, -1 } };
	remote_response resp;
	int r = remote_http_perform(rm->http, &c, &resp, err);
	if (r == 0 && resp.status != 204 && resp.status != 404)
		r = remote_http_status_error(rm->http, NULL, &resp, err);
	/* 404: the service holds no such sandbox any more (it expired there,
	 * or an earlier destroy's answer was lost): gone is what was asked. */
	remote_response_clear(&resp);
	return r;
}

static int remote_destroy(void *ctx, const char *environment_id, airlock_error *err)
{
	airlock_remote *rm = ctx;
	_cleanup_free_ char *b64 = NULL;
	airlock_workspace *ws = NULL;
	pthread_mutex_lock(&rm->lock);
	remote_env *e = env_find(rm, environment_id);
	if (e) {
		b64 = strdup(e->handle_b64);
		ws = TAKE_PTR(e->ws);
	}
	pthread_mutex_unlock(&rm->lock);
	if (!e)
		return 0; /* never provisioned here, or already destroyed */
	/* The workspace ends first: it waits for the calls in flight, and
	 * later ones fail here with "destroyed" (ExecutionRejected) without
	 * reaching the service. The other order would let a call reach the
	 * service after its sandbox is gone, where its containment check
	 * fails, which the core turns into WorkspaceEscape (fail closed): a
	 * destroy must not make an honest caller look like an escape. */
	airlock_workspace_free(ws);
	if (!b64)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the handle header");
	/* When the service's destroy failed, the record stays (without a
	 * workspace) so that the core's retry finds it. */
	int r = destroy_call(rm, environment_id, b64, err);
	if (r < 0)
		return r;
	remote_env gone = { 0 };
	pthread_mutex_lock(&rm->lock);
	e = env_find(rm, environment_id);
	if (e) {
		gone = *e;
		*e = rm->envs[--rm->n_envs];
	}
	pthread_mutex_unlock(&rm->lock);
	airlock_workspace_free(gone.ws);
	free(gone.handle_b64);
	return 0;
}

/* ---- a sandbox another client recorded ---------------------------------- */

int airlock_remote_service_handle(airlock_remote *rm, const char *environment_id, char **ret,
                                  airlock_error *err)
{
	if (!rm || !environment_id || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0,
		                         "remote: service_handle needs an adapter, an id and a result");
	return env_handle(rm, environment_id, ret, err);
}

int airlock_remote_destroy_recorded(airlock_remote *rm, const char *environment_id,
                                    const char *service_handle, airlock_error *err)
{
	if (!rm || !environment_id || !airlock_environment_id_valid(environment_id) ||
	    !service_handle || !*service_handle ||
	    strlen(service_handle) > AIRLOCK_REMOTE_HANDLE_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0,
		                         "remote: destroy_recorded needs a well-formed id and its "
		                         "service handle (at most %d bytes)",
		                         AIRLOCK_REMOTE_HANDLE_MAX);
	/* One this adapter holds goes through its core (airlock_exec_destroy),
	 * which also ends its record and its workspace here: destroying it
	 * behind the core's back would leave both pointing at nothing. */
	pthread_mutex_lock(&rm->lock);
	bool held = env_find(rm, environment_id) != NULL;
	pthread_mutex_unlock(&rm->lock);
	if (held)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0,
		                         "remote: sandbox %s is this adapter's own; destroy it "
		                         "through its core",
		                         environment_id);
	/* The header goes out as it was recorded: the base64url alphabet of
	 * Airlock-Handle only (remote_handle_header), so nothing in it can end
	 * the header line (a record is the worker's own database, but a header
	 * is no place to trust one). */
	for (const char *c = service_handle; *c; c++)
		if (!(isalnum((unsigned char)*c) || *c == '-' || *c == '_' || *c == '='))
			return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0,
			                         "remote: the recorded handle of sandbox %s is not "
			                         "base64",
			                         environment_id);
	return destroy_call(rm, environment_id, service_handle, err);
}

/* ---- provision ----------------------------------------------------------- */

/* A provision that failed after its request went out: the service may
 * have made the sandbox (its answer lost, cut or not decoding), so it is
 * destroyed under the handle the client's core made, which is the one the
 * service holds (the same id, tenant, run and epoch). A sandbox it never
 * made answers 404, which is gone. Returns r. */
static int provision_undo(airlock_remote *rm, const airlock_environment_handle *handle, int r)
{
	airlock_error derr = { 0 };
	_cleanup_free_ char *own = remote_handle_header(handle, &derr);
	if (own)
		destroy_call(rm, handle->environment_id, own, &derr);
	return r;
}

static int remote_provision(void *ctx, const airlock_environment_spec *spec,
                            const airlock_environment_handle *handle, airlock_error *err)
{
	airlock_remote *rm = ctx;
	airlock_error why = { 0 };
	/* The spec's JSON and the request's body hold its environment (the
	 * bridge's token, a secret's value): wiped when they are freed. */
	_cleanup_wipe_free_ char *spec_json = airlock_environment_spec_to_json(spec, &why);
	if (!spec_json)
		return airlock_error_wrap(err, why.cls, &why, "the spec");
	_cleanup_wipe_free_ char *body = NULL;
	/* The id the client's core generated: the worker, the service and the
	 * reaper name the sandbox alike (airlock_exec_provision_as there). It
	 * is "env_" and hex (validated by the core), nothing to escape. */
	if (asprintf(&body, "{\"spec\":%s,\"environment_id\":\"%s\"}", spec_json,
	             handle->environment_id) < 0) {
		body = NULL;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the request");
	}
	remote_call c = { .method = "POST", .path = "/v1/sandboxes", .body = body,
		          .body_len = strlen(body), .has_body = true,
		          .timeout_ms = rm->start_budget_ms + PROVISION_MARGIN_MS,
		          .max_body = REMOTE_JSON_BODY_MAX, .watch_fds = { -1, -1 } };
	json_t *o = NULL;
	int r = remote_http_json(rm->http, NULL, &c, 201, (void **)&o, err);
	if (r < 0)
		return provision_undo(rm, handle, r);
	static const char *const members[] = { "handle" };
	_cleanup_free_ char *text = only_members(o, members, 1) ? member_text(o, "handle") : NULL;
	json_decref(o);
	airlock_environment_handle got = { 0 };
	if (!text || airlock_environment_handle_from_json(text, strlen(text), &got, &why) < 0)
		return provision_undo(rm, handle,
		                      remote_http_protocol_error(rm->http, NULL,
		                                                 text ? &why : NULL, err));
	_cleanup_free_ char *b64 = remote_handle_header(&got, err);
	if (!b64) {
		airlock_environment_handle_clear(&got);
		return provision_undo(rm, handle, -ENOMEM);
	}
	/* The service's handle must name what was asked for: another id,
	 * tenant, run or epoch is a service that mixed sandboxes up. That
	 * sandbox is destroyed and the provision fails. */
	if (strcmp(got.environment_id, handle->environment_id) != 0 ||
	    !util_streq0(got.tenant_id, spec->tenant_id) || !util_streq0(got.run_id, spec->run_id) ||
	    got.lease_epoch != spec->lease_epoch) {
		airlock_error derr = { 0 };
		destroy_call(rm, got.environment_id, b64, &derr);
		airlock_environment_handle_clear(&got);
		return airlock_error_set(err, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
		                         "the execution service at %s answered with a "
		                         "handle for another sandbox than %s; it is destroyed",
		                         remote_http_address(rm->http), handle->environment_id);
	}
	airlock_environment_handle_clear(&got);

	airlock_workspace *ws = NULL;
	r = remote_workspace_new(rm->http, handle->environment_id, b64, &ws, err);
	remote_env *p = NULL;
	if (r == 0) {
		pthread_mutex_lock(&rm->lock);
		p = reallocarray(rm->envs, rm->n_envs + 1, sizeof(*p));
		if (p) {
			rm->envs = p;
			remote_env *e = &rm->envs[rm->n_envs++];
			memset(e, 0, sizeof(*e));
			snprintf(e->environment_id, sizeof(e->environment_id), "%s",
			         handle->environment_id);
			e->handle_b64 = TAKE_PTR(b64);
			e->ws = ws;
		}
		pthread_mutex_unlock(&rm->lock);
		if (!p)
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the sandbox record");
	}
	if (r < 0) {
		/* On failure nothing is left behind, on the service either. */
		airlock_workspace_free(ws);
		airlock_error derr = { 0 };
		destroy_call(rm, handle->environment_id, b64, &derr);
	}
	return r;
}

/* ---- execute ------------------------------------------------------------- */

typedef struct exec_stream {
	airlock_remote *rm;
	const char *environment_id;
	const char *handle_b64;
	const airlock_exec_request *req;
	util_buf line;     /* the NDJSON line being read, capped */
	size_t total;      /* body bytes so far, capped */
	bool done;         /* a result or an error line arrived */
	size_t delivered[2]; /* stdout, stderr bytes given to on_output */
	bool gap[2];       /* a "dropped" event: the rest comes from the result */
	/* What the output events gave on_output, hashed: the result must
	 * hold exactly those bytes first (docs/service-api.md), or the
	 * caller was shown output the command did not produce. */
	util_sha256 *seen[2];
	airlock_execution_result result;
	bool has_result;
	airlock_error remote_err;
	bool has_error;
	/* Cancellation: the token or the adapter's shutdown fired. */
	bool want_cancel, cancel_done, by_shutdown;
	int64_t next_cancel_ms;
} exec_stream;

static int stream_bad(exec_stream *s, const char *what, airlock_error *err)
{
	airlock_error why = { 0 };
	airlock_error_set(&why, AIRLOCK_ERR_DECODE, 0, "%s", what);
	return remote_http_protocol_error(s->rm->http, NULL, &why, err);
}

static void deliver(exec_stream *s, int idx, const unsigned char *data, size_t len)
{
	if (len && s->req->on_output)
		s->req->on_output(s->req->output_arg,
		                  idx == 0 ? AIRLOCK_OUTPUT_STDOUT : AIRLOCK_OUTPUT_STDERR, data, len);
	s->delivered[idx] += len;
}

static int stream_index(json_t *o)
{
	const char *name = json_string_value(json_object_get(o, "stream"));
	if (name && strcmp(name, "stdout") == 0)
		return 0;
	if (name && strcmp(name, "stderr") == 0)
		return 1;
	return -1;
}

/* The result against the command's cap and against the bytes the output
 * events already gave the observer, which must be its first bytes. */
static int result_matches_events(exec_stream *s, airlock_error *err)
{
	const unsigned char *data[2] = { s->result.stdout_data, s->result.stderr_data };
	size_t len[2] = { s->result.stdout_len, s->result.stderr_len };
	for (int k = 0; k < 2; k++) {
		if (len[k] > (uint64_t)s->req->command->maximum_output_bytes)
			return stream_bad(s, "a result over the command's output cap", err);
		if (!s->seen[k])
			continue;
		char want[65], got[65];
		int r = util_sha256_final_hex(s->seen[k], want);
		s->seen[k] = NULL;
		if (r < 0 || (s->delivered[k] <= len[k] &&
		              util_sha256_hex(data[k], s->delivered[k], got) < 0))
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the output's digest");
		if (s->delivered[k] > len[k] || strcmp(want, got) != 0)
			return stream_bad(s, "output events that are not the result's bytes", err);
	}
	return 0;
}

static int stream_event(exec_stream *s, const char *text, size_t len, airlock_error *err)
{
	if (s->done)
		return stream_bad(s, "a line after the final event", err);
	json_error_t je;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return stream_bad(s, je.text, err);
	const char *ev = json_string_value(json_object_get(o, "event"));
	int r = 0;
	if (!ev) {
		r = stream_bad(s, "an event line without \"event\"", err);
	} else if (strcmp(ev, "started") == 0) {
		static const char *const m[] = { "event", "environment_id" };
		const char *id = json_string_value(json_object_get(o, "environment_id"));
		if (!only_members(o, m, 2) || !id || strcmp(id, s->environment_id) != 0)
			r = stream_bad(s, "a started event for another environment", err);
	} else if (strcmp(ev, "output") == 0) {
		static const char *const m[] = { "event", "stream", "data" };
		int idx = stream_index(o);
		json_t *d = json_object_get(o, "data");
		unsigned char *bytes = NULL;
		size_t n = 0;
		if (!only_members(o, m, 3) || idx < 0 || !json_is_string(d) ||
		    util_base64_decode(json_string_value(d), json_string_length(d), &bytes, &n) < 0) {
			r = stream_bad(s, "an output event that does not decode", err);
		} else if (s->gap[idx]) {
			/* after a drop: these bytes come from the result */
		} else if (s->delivered[idx] + n > (uint64_t)s->req->command->maximum_output_bytes) {
			/* Never a byte past the cap reaches the observer. */
			r = stream_bad(s, "output events past the command's output cap", err);
		} else if ((!s->seen[idx] && !(s->seen[idx] = util_sha256_new())) ||
		           util_sha256_update(s->seen[idx], bytes, n) < 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the output's digest");
		} else {
			deliver(s, idx, bytes, n);
		}
		free(bytes);
	} else if (strcmp(ev, "dropped") == 0) {
		static const char *const m[] = { "event", "stream", "bytes" };
		int idx = stream_index(o);
		if (!only_members(o, m, 3) || idx < 0 || !json_is_integer(json_object_get(o, "bytes")))
			r = stream_bad(s, "a dropped event that does not decode", err);
		else
			/* The service's buffer for this response filled up: what it
			 * did not send is in the result, and from here on this
			 * stream's bytes are given from the result, in order. */
			s->gap[idx] = true;
	} else if (strcmp(ev, "result") == 0) {
		static const char *const m[] = { "event", "result" };
		_cleanup_free_ char *t = only_members(o, m, 2) ? member_text(o, "result") : NULL;
		airlock_error why = { 0 };
		if (!t || airlock_execution_result_from_json(t, strlen(t), &s->result, &why) < 0)
			r = remote_http_protocol_error(s->rm->http, NULL, t ? &why : NULL, err);
		else if ((r = result_matches_events(s, err)) == 0)
			s->has_result = s->done = true;
	} else if (strcmp(ev, "error") == 0) {
		static const char *const m[] = { "event", "error" };
		_cleanup_free_ char *t = only_members(o, m, 2) ? member_text(o, "error") : NULL;
		airlock_error why = { 0 };
		if (!t || airlock_error_from_json(t, strlen(t), &s->remote_err, &why) < 0)
			r = remote_http_protocol_error(s->rm->http, NULL, t ? &why : NULL, err);
		else
			s->has_error = s->done = true;
	} else {
		r = stream_bad(s, "an unknown event", err);
	}
	json_decref(o);
	return r;
}

/* The streamed body, piece by piece: split into lines, each parsed as it
 * completes, so on_output sees output as the service sends it. */
static int stream_sink(void *arg, const char *data, size_t len, airlock_error *err)
{
	exec_stream *s = arg;
	s->total += len;
	if (s->total > REMOTE_STREAM_BODY_MAX)
		return stream_bad(s, "a streamed execute over its cap", err);
	while (len > 0) {
		const char *nl = memchr(data, '\n', len);
		size_t k = nl ? (size_t)(nl - data) : len;
		if (util_buf_append(&s->line, data, k) != 0)
			return stream_bad(s, "an event line over its cap", err);
		if (!nl)
			break;
		if (s->line.len > 0) {
			int r = stream_event(s, (const char *)s->line.data, s->line.len, err);
			if (r < 0)
				return r;
		}
		s->line.len = 0;
		data += k + 1;
		len -= k + 1;
	}
	return 0;
}

static void send_cancel(exec_stream *s)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/cancel", s->environment_id);
	remote_call c = { .method = "POST", .path = path, .handle_b64 = s->handle_b64,
		          .has_body = false, .timeout_ms = CANCEL_TIMEOUT_MS,
		          .max_body = REMOTE_ERROR_BODY_MAX, .watch_fds = { -1, -1 } };
	json_t *o = NULL;
	airlock_error e = { 0 };
	int r = remote_http_json(s->rm->http, "cancel", &c, 200, (void **)&o, &e);
	if (r == 0) {
		/* false: no command was running yet (the token fired before the
		 * service started it) or it has just ended; tried again until
		 * the result arrives. */
		s->cancel_done = json_is_true(json_object_get(o, "cancelled"));
		json_decref(o);
	} else if (r == airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED) ||
	           r == airlock_errcode(AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED)) {
		/* The sandbox is gone there: the execute's own answer says how. */
		s->cancel_done = true;
	}
	s->next_cancel_ms = util_monotonic_ms() + CANCEL_RETRY_MS;
}

static void stream_watch(void *arg, int fd)
{
	exec_stream *s = arg;
	if (fd >= 0 && !s->want_cancel) {
		s->want_cancel = true;
		/* Whichever fired first names the reason. */
		s->by_shutdown = fd == s->rm->shutdown_efd;
	}
	if (s->want_cancel && !s->cancel_done && !s->done &&
	    util_monotonic_ms() >= s->next_cancel_ms)
		send_cancel(s);
}

/*
 * Execute always streams: on_output, when the caller gave one, sees the
 * bytes as the service sends them, and without one the result is the same.
 * The cancel token's descriptor and the adapter's shutdown descriptor are
 * watched while the transfer runs; either sends the cancel verb, and the
 * service ends the command with CANCELLED and its partial output.
 *
 * Shutdown (airlock_exec_shutdown or airlock_exec_free on this adapter's
 * core: `airlock run` got a signal) cancels every execute in flight the same
 * way and reports it as SERVICE_SHUTDOWN: for the caller it is this client
 * that is stopping, and the command ended because of it, exactly as an
 * in-process service's shutdown ends it. The service itself goes on.
 */
static int remote_execute(void *ctx, const airlock_environment_handle *handle,
                          const airlock_exec_request *req, airlock_execution_result *ret,
                          airlock_error *err)
{
	airlock_remote *rm = ctx;
	_cleanup_free_ char *b64 = NULL;
	int r = env_handle(rm, handle->environment_id, &b64, err);
	if (r < 0)
		return r;
	airlock_error why = { 0 };
	_cleanup_free_ char *cmd = airlock_execution_command_to_json(req->command, &why);
	if (!cmd)
		return airlock_error_wrap(err, why.cls, &why, "the command");
	char budget[32];
	if (req->remaining_budget_ms == AIRLOCK_BUDGET_NONE)
		snprintf(budget, sizeof(budget), "null");
	else
		snprintf(budget, sizeof(budget), "%lld", (long long)req->remaining_budget_ms);
	_cleanup_free_ char *body = NULL;
	/* The remaining budget, not the effective timeout: the service applies
	 * the same minimum rule and the same floor to it. */
	if (asprintf(&body, "{\"command\":%s,\"remaining_budget_ms\":%s,\"stream\":true}", cmd,
	             budget) < 0) {
		body = NULL;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the request");
	}
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/execute", handle->environment_id);

	exec_stream s = { .rm = rm, .environment_id = handle->environment_id, .handle_b64 = b64,
		          .req = req };
	util_buf_init(&s.line, REMOTE_STREAM_LINE_MAX);
	remote_call c = {
		.method = "POST", .path = path, .handle_b64 = b64, .body = body,
		.body_len = strlen(body), .has_body = true,
		.timeout_ms = req->effective_timeout_ms + EXECUTE_MARGIN_MS,
		.max_body = REMOTE_JSON_BODY_MAX, .sink = stream_sink, .sink_arg = &s,
		.watch_fds = { req->cancel ? airlock_cancel_fd(req->cancel) : -1, rm->shutdown_efd },
		.on_watch = stream_watch, .watch_arg = &s, .tick_ms = CANCEL_RETRY_MS,
	};
	remote_response resp;
	r = remote_http_perform(rm->http, &c, &resp, err);
	if (r == 0 && resp.status != 200)
		r = remote_http_status_error(rm->http, NULL, &resp, err);
	else if (r == 0 && resp.over_cap)
		r = stream_bad(&s, "an answer over its cap", err);
	/* The last line may end without a newline. */
	if (r == 0 && s.line.len > 0)
		r = stream_event(&s, (const char *)s.line.data, s.line.len, err);
	if (r == 0 && s.has_error)
		r = airlock_error_set(err, s.remote_err.cls, 0, "%s", s.remote_err.message);
	else if (r == 0 && !s.has_result)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "the execution service at %s ended the stream before "
		                      "the result; retry later",
		                      remote_http_address(rm->http));
	remote_response_clear(&resp);
	util_buf_clear(&s.line);
	util_sha256_free(s.seen[0]);
	util_sha256_free(s.seen[1]);
	if (r < 0) {
		airlock_execution_result_clear(&s.result);
		return r;
	}
	/* What the events did not carry (a dropped stretch) comes from the
	 * result, so the observer sees exactly the result's bytes, in order. */
	if (s.delivered[0] < s.result.stdout_len)
		deliver(&s, 0, s.result.stdout_data + s.delivered[0],
		        s.result.stdout_len - s.delivered[0]);
	if (s.delivered[1] < s.result.stderr_len)
		deliver(&s, 1, s.result.stderr_data + s.delivered[1],
		        s.result.stderr_len - s.delivered[1]);
	if (s.want_cancel && s.by_shutdown && s.result.killed_by == AIRLOCK_KILL_CANCELLED)
		s.result.killed_by = AIRLOCK_KILL_SERVICE_SHUTDOWN;
	*ret = s.result;
	return 0;
}

/* ---- health -------------------------------------------------------------- */

int airlock_remote_health(airlock_remote *rm, airlock_remote_status *ret, airlock_error *err)
{
	remote_call c = { .method = "GET", .path = "/v1/health", .timeout_ms = CANCEL_TIMEOUT_MS,
		          .max_body = REMOTE_ERROR_BODY_MAX, .watch_fds = { -1, -1 } };
	json_t *o = NULL;
	int r = remote_http_json(rm->http, "health", &c, 200, (void **)&o, err);
	if (r < 0)
		return r;
	airlock_remote_status st = { 0 };
	const char *mech = json_string_value(json_object_get(o, "mechanism"));
	json_t *live = json_object_get(o, "live"), *max = json_object_get(o, "max_sandboxes");
	json_t *down = json_object_get(o, "shutting_down");
	bool ok = mech && strlen(mech) < sizeof(st.mechanism) && json_is_integer(live) &&
	          json_is_integer(max) && json_is_boolean(down);
	if (ok) {
		snprintf(st.mechanism, sizeof(st.mechanism), "%s", mech);
		st.live = json_integer_value(live);
		st.max_sandboxes = json_integer_value(max);
		st.shutting_down = json_is_true(down);
	}
	json_decref(o);
	if (!ok)
		return remote_http_protocol_error(rm->http, "health", NULL, err);
	*ret = st;
	return 0;
}

/* ---- workspace, shutdown, free ------------------------------------------- */

static int remote_workspace(void *ctx, const char *environment_id, airlock_workspace **ret,
                            airlock_error *err)
{
	airlock_remote *rm = ctx;
	pthread_mutex_lock(&rm->lock);
	remote_env *e = env_find(rm, environment_id);
	bool live = e && e->ws;
	if (live)
		*ret = airlock_workspace_ref(e->ws);
	pthread_mutex_unlock(&rm->lock);
	if (!live)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "environment %s is not live%s", environment_id,
		                         e ? ": it is being destroyed" : "");
	return 0;
}

static void remote_shutdown(void *ctx)
{
	airlock_remote *rm = ctx;
	uint64_t one = 1;
	/* Level-triggered and never read: every execute in flight, and any
	 * that the core still lets through, sees it. */
	ssize_t n = write(rm->shutdown_efd, &one, sizeof(one));
	(void)n;
}

static void remote_free(void *ctx)
{
	airlock_remote *rm = ctx;
	if (!rm)
		return;
	/* Release destroys every sandbox still held, on the service too. */
	for (size_t i = 0; i < rm->n_envs; i++) {
		remote_env *e = &rm->envs[i];
		airlock_workspace_free(e->ws);
		airlock_error derr = { 0 };
		destroy_call(rm, e->environment_id, e->handle_b64, &derr);
		free(e->handle_b64);
	}
	free(rm->envs);
	remote_http_free(rm->http);
	close(rm->shutdown_efd);
	pthread_mutex_destroy(&rm->lock);
	free(rm);
}

static const airlock_exec_ops remote_ops = {
	.version = AIRLOCK_EXEC_OPS_VERSION,
	.name = "remote",
	.provision = remote_provision,
	.execute = remote_execute,
	.destroy = remote_destroy,
	.workspace = remote_workspace,
	.free = remote_free,
	.shutdown = remote_shutdown,
};
