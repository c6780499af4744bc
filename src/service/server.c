/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The execution service's internal API (docs/service-api.md) on the HTTP
 * server core (src/http/http.h), on a Unix socket or TCP with TLS: the
 * routes and the jobs behind them. The core bounds every connection
 * (caps, admission, deadlines, the watchdog), authenticates every request
 * and answers; what is the service's is here:
 *   - the routes: svc_route decodes the raw target, the Airlock-Handle
 *     header is decoded for the verbs with an id, and each route's body
 *     cap is what the route can need (caps.h);
 *   - the execute itself runs on a thread of its own, bounded by the
 *     command's timeout, expires_at and the service's shutdown; the
 *     connection's thread waits for it in slices and looks at the socket
 *     each time: a client that went away cancels its command (CANCELLED).
 *     A streamed execute's events wait in a capped buffer, so a client
 *     that stops reading costs its command nothing and the service at
 *     most that buffer;
 *   - an ExecutionRejected about an id that is not live is 404 (the
 *     core says 409), asked of the table rather than read from the
 *     message.
 *
 * Errors: every one leaves as airlock_error_to_json with the status of
 * docs/service-api.md; a body that does not decode is ToolValidationError
 * naming the field; 401 carries nothing but its class.
 */
#include "airlock/service.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "airlock/ids.h"
#include "airlock/json.h"
#include "core/json_internal.h"
#include "http/http.h"
#include "service/server_internal.h"
#include "util/util.h"

/* How often a waiting thread looks at its client's socket: the delay
 * before a disconnect cancels a command. */
#define SVC_POLL_MS 100

typedef struct svc_job svc_job;

struct airlock_service {
	airlock_service_config cfg; /* strings not kept */
	airlock_exec *exec;
	/* The socket we listen on (a Unix socket file is removed at free if
	 * still ours); its fd is -1 while the server core owns the descriptor. */
	svc_listener lis;
	http_server *http;

	pthread_mutex_t lock;
	svc_job *jobs; /* executes running, for cancel */
	bool shutting_down;
	int stop_efd;
	pthread_t expire_thread;
	bool expire_started;
};

/* A request's route (http_request_state). */
typedef struct svc_req {
	airlock_service *s;
	http_request *r;
	svc_verb verb;
	char id[AIRLOCK_ENVIRONMENT_ID_MAX];
	const char *query; /* into the request's target */
	size_t query_len;
	airlock_environment_handle handle;
	bool has_handle;
} svc_req;

static int64_t cfg_or(int64_t v, int64_t dflt)
{
	return v > 0 ? v : dflt;
}

void airlock_service_config_default(airlock_service_config *c)
{
	*c = (airlock_service_config){ .socket_gid = -1 };
}

/* The core's status for the error's wire class, but 404 for an
 * ExecutionRejected about an id that is not live, asked of the table
 * rather than read from the message. */
static http_result svc_respond_error(svc_req *q, const airlock_error *e)
{
	airlock_error w = *e;
	http_wire_class(&w);
	unsigned status = http_error_status(&w);
	char t[AIRLOCK_ID_MAX + 1];
	if (w.cls == AIRLOCK_ERR_EXECUTION_REJECTED && q->id[0] &&
	    airlock_exec_tenant_of(q->s->exec, q->id, t, sizeof(t), NULL) < 0)
		status = HTTP_NOT_FOUND;
	return http_respond_error_status(q->r, status, &w);
}

static char *jdump(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

/* ---- verbs without a sandbox --------------------------------------------- */

static http_result do_health(svc_req *q)
{
	airlock_service *s = q->s;
	pthread_mutex_lock(&s->lock);
	bool down = s->shutting_down;
	pthread_mutex_unlock(&s->lock);
	json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:b}", "status", down ? "shutting_down" : "ok",
	                      "mechanism", airlock_exec_name(s->exec), "live",
	                      (json_int_t)airlock_exec_live(s->exec), "max_sandboxes",
	                      (json_int_t)s->cfg.max_sandboxes, "shutting_down", down);
	return http_respond_json(q->r, HTTP_OK, jdump(o));
}

static http_result do_list(svc_req *q)
{
	airlock_exec_entry *v = NULL;
	size_t n = 0;
	airlock_error err = { 0 };
	if (airlock_exec_list(q->s->exec, &v, &n, &err) < 0)
		return svc_respond_error(q, &err);
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < n; i++) {
		char created[32], expires[32];
		util_time_format(v[i].created_at_ms, created);
		util_time_format(v[i].expires_at_ms, expires);
		json_t *e = json_pack("{s:s, s:s?, s:s?, s:I, s:s, s:s, s:b, s:b}", "environment_id",
		                      v[i].environment_id, "tenant_id", v[i].tenant_id, "run_id",
		                      v[i].run_id, "lease_epoch", (json_int_t)v[i].lease_epoch,
		                      "created_at", created, "expires_at", expires, "busy", v[i].busy,
		                      "provisioning", v[i].provisioning);
		if (!e || json_array_append_new(arr, e) < 0) {
			json_decref(arr);
			arr = NULL;
		}
	}
	airlock_exec_list_free(v, n);
	if (!arr)
		return HTTP_CLOSE;
	return http_respond_json(q->r, HTTP_OK, jdump(json_pack("{s:o}", "sandboxes", arr)));
}

static http_result do_provision(svc_req *q)
{
	airlock_error err = { 0 };
	svc_provision p = { 0 };
	size_t body_len = 0;
	const unsigned char *body_in = http_request_body(q->r, &body_len);
	if (svc_provision_decode(body_in, body_len, &p, &err) < 0)
		return svc_respond_error(q, &err);
	airlock_environment_spec spec = p.spec;
	const char *want_id = p.has_environment_id ? p.environment_id : NULL;
	airlock_environment_handle h = { 0 };
	http_result mr;
	int r = want_id ? airlock_exec_provision_as(q->s->exec, &spec, want_id, &h, &err)
	                : airlock_exec_provision(q->s->exec, &spec, &h, &err);
	airlock_environment_spec_clear(&spec);
	if (r < 0) {
		/* A provision names no live sandbox: a refusal is 409 (or 503). */
		q->id[0] = 0;
		return svc_respond_error(q, &err);
	}
	char *hj = airlock_environment_handle_to_json(&h, &err);
	char *body = NULL;
	if (hj && asprintf(&body, "{\"handle\":%s}", hj) < 0)
		body = NULL;
	free(hj);
	if (!body) {
		/* The sandbox exists and its caller cannot be told: it goes. */
		airlock_exec_destroy(q->s->exec, &h, NULL);
		mr = HTTP_CLOSE;
	} else {
		mr = http_respond_json(q->r, HTTP_CREATED, body);
	}
	airlock_environment_handle_clear(&h);
	return mr;
}

/* ---- execute ------------------------------------------------------------------ */

struct svc_job {
	airlock_service *s;
	svc_job *next; /* in s->jobs while the execute runs */
	airlock_environment_handle handle;
	airlock_execution_command command;
	int64_t budget_ms;
	airlock_cancel *cancel;
	bool stream;
	int fd; /* the client's socket, looked at, never used */
	http_conn *conn; /* its connection's record, used on its own thread only */
	bool response_deadline;
	pthread_t thread;
	bool thread_started;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int rc;
	airlock_error err;
	airlock_execution_result res;
	/* The streamed events not yet taken by the client. */
	char *q;
	size_t q_off, q_len, q_alloc;
	size_t dropped[2];
	bool broken; /* an event could not be queued (memory) */
	/* Output not yet made an event, per stream (coalescing: one pipe read
	 * is not one event): at most AIRLOCK_SERVICE_EVENT_CHUNK each. */
	unsigned char *pend[2];
	size_t pend_len[2];
	int64_t pend_since_ms; /* monotonic: when the oldest pending byte came; 0: none */
	size_t pend_first;     /* the stream that has pended longest */
	size_t small_events;   /* events made before their chunk was full */
};

static int job_queue(svc_job *j, const char *line, size_t len)
{
	if (j->q_off > 0 && j->q_off == j->q_len)
		j->q_off = j->q_len = 0;
	if (j->q_len + len > j->q_alloc) {
		if (j->q_off > 0) {
			memmove(j->q, j->q + j->q_off, j->q_len - j->q_off);
			j->q_len -= j->q_off;
			j->q_off = 0;
		}
		if (j->q_len + len > j->q_alloc) {
			size_t na = j->q_alloc ? j->q_alloc : 64 * 1024;
			while (na < j->q_len + len)
				na *= 2;
			char *nq = realloc(j->q, na);
			if (!nq)
				return -ENOMEM;
			j->q = nq;
			j->q_alloc = na;
		}
	}
	memcpy(j->q + j->q_len, line, len);
	j->q_len += len;
	return 0;
}

/* Stream k's pending output as one event. Past the buffer's cap (a client
 * that is not reading) the bytes are counted as dropped instead; once a
 * stream has dropped, the rest of it is counted, not sent: the events a
 * client has are then always a prefix of the bytes the result holds. Under
 * j->lock. */
static void job_emit(svc_job *j, size_t k)
{
	size_t n = j->pend_len[k];
	if (n == 0)
		return;
	j->pend_len[k] = 0;
	if (n < AIRLOCK_SERVICE_EVENT_CHUNK)
		j->small_events++;
	if (j->pend_len[k ^ 1] == 0)
		j->pend_since_ms = 0;
	else
		j->pend_first = k ^ 1;
	if (j->dropped[k]) {
		j->dropped[k] += n;
		return;
	}
	_cleanup_free_ char *b64 = util_base64_encode(j->pend[k], n);
	char *line = NULL;
	int w = b64 ? asprintf(&line, "{\"event\":\"output\",\"stream\":\"%s\",\"data\":\"%s\"}\n",
	                       k ? "stderr" : "stdout", b64)
	            : -1;
	if (w < 0 || (j->q_len - j->q_off) + (size_t)w > AIRLOCK_SERVICE_STREAM_BUFFER_MAX ||
	    job_queue(j, line, (size_t)w) < 0)
		j->dropped[k] += n;
	if (w >= 0)
		free(line);
}

/* Every pending byte as events, the longest-pending stream first. */
static void job_emit_all(svc_job *j)
{
	size_t first = j->pend_first;
	job_emit(j, first);
	job_emit(j, first ^ 1);
}

/* Whether pending output is due now, and if not, in how many ms (never
 * more than SVC_POLL_MS). Past the small-event budget, output waits for a
 * full chunk or the command's end. Under j->lock. */
static bool job_flush_due(const svc_job *j, int64_t *ret_wait_ms)
{
	*ret_wait_ms = SVC_POLL_MS;
	if (!j->pend_since_ms || j->small_events >= AIRLOCK_SERVICE_STREAM_SMALL_EVENTS_MAX)
		return false;
	int64_t left = j->pend_since_ms + AIRLOCK_SERVICE_STREAM_FLUSH_MS - util_monotonic_ms();
	if (left <= 0)
		return true;
	if (left < *ret_wait_ms)
		*ret_wait_ms = left;
	return false;
}

/* The command's output as it arrives: appended to its stream's pending
 * bytes, an event made whenever they fill a chunk (the other stream's
 * pending bytes first, so the order between the two is kept to a chunk).
 * The reader makes events of the rest once it has waited
 * AIRLOCK_SERVICE_STREAM_FLUSH_MS (job_read), so a command that writes a
 * byte at a time costs an event per flush, not per write. */
static void job_output(void *arg, airlock_output_stream stream, const void *data, size_t len)
{
	svc_job *j = arg;
	size_t k = stream == AIRLOCK_OUTPUT_STDERR ? 1 : 0;
	pthread_mutex_lock(&j->lock);
	/* The reader is woken when there is an event to take or a flush to
	 * time, not for every write. */
	bool wake = !j->pend_since_ms;
	size_t queued = j->q_len - j->q_off;
	const unsigned char *p = data;
	while (len > 0) {
		if (j->dropped[k]) {
			j->dropped[k] += len;
			break;
		}
		if (!j->pend[k] && !(j->pend[k] = malloc(AIRLOCK_SERVICE_EVENT_CHUNK))) {
			j->dropped[k] += len;
			break;
		}
		size_t n = AIRLOCK_SERVICE_EVENT_CHUNK - j->pend_len[k];
		if (n > len)
			n = len;
		if (!j->pend_since_ms) {
			j->pend_since_ms = util_monotonic_ms();
			j->pend_first = k;
		}
		memcpy(j->pend[k] + j->pend_len[k], p, n);
		j->pend_len[k] += n;
		p += n;
		len -= n;
		if (j->pend_len[k] == AIRLOCK_SERVICE_EVENT_CHUNK) {
			job_emit(j, k ^ 1);
			job_emit(j, k);
		}
	}
	if (wake || j->q_len - j->q_off != queued)
		pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
}

/* The last lines of a streamed execute: what was dropped, then the result
 * or the error. Past the buffer's cap: they are bounded by the output cap
 * the result already holds. */
static void job_finish_stream(svc_job *j)
{
	job_emit_all(j);
	for (size_t k = 0; k < 2; k++) {
		if (!j->dropped[k])
			continue;
		char line[128];
		int w = snprintf(line, sizeof(line), "{\"event\":\"dropped\",\"stream\":\"%s\",\"bytes\":%zu}\n",
		                 k ? "stderr" : "stdout", j->dropped[k]);
		if (job_queue(j, line, (size_t)w) < 0)
			j->broken = true;
	}
	char *inner = NULL, *line = NULL;
	airlock_error jerr = { 0 };
	if (j->rc == 0)
		inner = airlock_execution_result_to_json(&j->res, &jerr);
	else
		inner = http_error_json(&j->err);
	int w = -1;
	if (inner)
		w = j->rc == 0 ? asprintf(&line, "{\"event\":\"result\",\"result\":%s}\n", inner)
		               : asprintf(&line, "{\"event\":\"error\",\"error\":%s}\n", inner);
	free(inner);
	if (w < 0 || job_queue(j, line, (size_t)w) < 0)
		j->broken = true;
	if (w >= 0)
		free(line);
}

/* Out of the cancel table: from here cancel no longer finds it. */
static void job_unlink(airlock_service *s, svc_job *j)
{
	pthread_mutex_lock(&s->lock);
	for (svc_job **p = &s->jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			break;
		}
	pthread_mutex_unlock(&s->lock);
}

static void *job_main(void *arg)
{
	svc_job *j = arg;
	airlock_service *s = j->s;
	airlock_exec_call call = {
		.tenant_id = j->handle.tenant_id,
		.remaining_budget_ms = j->budget_ms,
		.cancel = j->cancel,
		.on_output = j->stream ? job_output : NULL,
		.output_arg = j,
	};
	airlock_execution_result res = { 0 };
	airlock_error err = { 0 };
	int rc = airlock_exec_execute(s->exec, &call, &j->handle, &j->command, &res, &err);

	job_unlink(s, j);

	pthread_mutex_lock(&j->lock);
	j->rc = rc;
	j->err = err;
	j->res = res;
	if (j->stream)
		job_finish_stream(j);
	j->done = true;
	pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

static void job_free(svc_job *j)
{
	if (!j)
		return;
	if (j->thread_started) {
		airlock_cancel_fire(j->cancel);
		pthread_join(j->thread, NULL);
	}
	airlock_cancel_free(j->cancel);
	airlock_environment_handle_clear(&j->handle);
	airlock_execution_command_clear(&j->command);
	airlock_execution_result_clear(&j->res);
	free(j->q);
	free(j->pend[0]);
	free(j->pend[1]);
	pthread_mutex_destroy(&j->lock);
	pthread_cond_destroy(&j->cond);
	free(j);
}

/* The streamed response's reader: runs on the connection's thread, which
 * may block here (one thread per connection), in slices, looking at the
 * client each time. */
static ssize_t job_read(void *cls, char *buf, size_t max)
{
	svc_job *j = cls;
	pthread_mutex_lock(&j->lock);
	for (;;) {
		if (j->done && !j->response_deadline) {
			/* The rest is the result, ready: it must be taken within the
			 * response timeout like any other response. (j->lock, then
			 * the service's: nothing takes them the other way round.) */
			j->response_deadline = true;
			http_conn_respond_by(j->conn);
		}
		int64_t wait_ms;
		if (job_flush_due(j, &wait_ms))
			job_emit_all(j);
		size_t avail = j->q_len - j->q_off;
		if (avail > 0) {
			size_t n = avail < max ? avail : max;
			memcpy(buf, j->q + j->q_off, n);
			j->q_off += n;
			pthread_mutex_unlock(&j->lock);
			return (ssize_t)n;
		}
		if (j->done) {
			bool broken = j->broken;
			pthread_mutex_unlock(&j->lock);
			return broken ? HTTP_STREAM_ERROR : HTTP_STREAM_END;
		}
		http_cond_wait_ms(&j->cond, &j->lock, wait_ms);
		if (!j->done && j->q_len == j->q_off && http_peer_gone(j->fd)) {
			/* The client went away: its command is cancelled (the free
			 * callback joins the execute). */
			airlock_cancel_fire(j->cancel);
			pthread_mutex_unlock(&j->lock);
			return HTTP_STREAM_ERROR;
		}
	}
}

static void job_read_free(void *cls)
{
	job_free(cls);
}

static http_result do_execute(svc_req *q)
{
	airlock_service *s = q->s;
	airlock_error err = { 0 };
	svc_execute x = { 0 };
	size_t body_len = 0;
	const unsigned char *body_in = http_request_body(q->r, &body_len);
	if (svc_execute_decode(body_in, body_len, &x, &err) < 0)
		return svc_respond_error(q, &err);
	svc_job *j = calloc(1, sizeof(*j));
	if (!j) {
		airlock_execution_command_clear(&x.command);
		return HTTP_CLOSE;
	}
	j->s = s;
	j->fd = http_request_fd(q->r);
	j->conn = http_request_conn(q->r);
	j->stream = x.stream;
	j->budget_ms = x.budget_ms;
	j->command = x.command;
	pthread_mutex_init(&j->lock, NULL);
	http_cond_init_monotonic(&j->cond);
	if (airlock_cancel_new(&j->cancel, &err) < 0) {
		job_free(j);
		return svc_respond_error(q, &err);
	}
	j->handle = q->handle;
	q->handle = (airlock_environment_handle){ 0 };
	q->has_handle = false;
	if (j->stream) {
		/* The status is sent before the command runs: the one refusal
		 * the table can answer now (an id that is not live) still gets
		 * its own; the rest come as the stream's last line. */
		char t[AIRLOCK_ID_MAX + 1];
		if (airlock_exec_tenant_of(s->exec, j->handle.environment_id, t, sizeof(t), &err) < 0) {
			job_free(j);
			return svc_respond_error(q, &err);
		}
		char line[160];
		int w = snprintf(line, sizeof(line), "{\"event\":\"started\",\"environment_id\":\"%s\"}\n",
		                 j->handle.environment_id);
		if (job_queue(j, line, (size_t)w) < 0) {
			job_free(j);
			return HTTP_CLOSE;
		}
	}

	pthread_mutex_lock(&s->lock);
	j->next = s->jobs;
	s->jobs = j;
	pthread_mutex_unlock(&s->lock);
	int e = pthread_create(&j->thread, NULL, job_main, j);
	if (e != 0) {
		job_unlink(s, j);
		job_free(j);
		return http_respond_fail(q->r, HTTP_SERVICE_UNAVAILABLE, AIRLOCK_ERR_EXECUTION_UNAVAILABLE,
		                    "execute: cannot start a thread: %s", strerror(e));
	}
	j->thread_started = true;

	if (j->stream) {
		/* No total deadline while the command runs: its own timeouts
		 * bound it, and a client that reads nothing meets the idle
		 * timeout. On failure job_read_free has freed the job. */
		return http_respond_stream(q->r, HTTP_OK, "application/x-ndjson", job_read, j,
		                           job_read_free);
	}

	/* Blocking: wait for the result in slices, looking at the client. */
	bool gone = false;
	pthread_mutex_lock(&j->lock);
	while (!j->done) {
		http_cond_wait_ms(&j->cond, &j->lock, SVC_POLL_MS);
		if (!j->done && !gone && http_peer_gone(j->fd)) {
			gone = true;
			airlock_cancel_fire(j->cancel);
		}
	}
	pthread_mutex_unlock(&j->lock);
	pthread_join(j->thread, NULL);
	j->thread_started = false;
	http_result r;
	if (gone) {
		r = HTTP_CLOSE;
	} else if (j->rc < 0) {
		r = svc_respond_error(q, &j->err);
	} else {
		char *inner = airlock_execution_result_to_json(&j->res, &err);
		char *body = NULL;
		if (inner && asprintf(&body, "{\"result\":%s}", inner) < 0)
			body = NULL;
		free(inner);
		r = body ? http_respond_json(q->r, HTTP_OK, body) : svc_respond_error(q, &err);
	}
	job_free(j);
	return r;
}

static bool handles_equal(const airlock_environment_handle *a, const airlock_environment_handle *b)
{
	return strcmp(a->environment_id, b->environment_id) == 0 &&
	       util_streq0(a->tenant_id, b->tenant_id) && util_streq0(a->run_id, b->run_id) &&
	       a->lease_epoch == b->lease_epoch && a->created_at_ms == b->created_at_ms &&
	       a->expires_at_ms == b->expires_at_ms;
}

static http_result do_cancel(svc_req *q)
{
	airlock_service *s = q->s;
	airlock_error err = { 0 };
	char tenant[AIRLOCK_ID_MAX + 1];
	if (airlock_exec_tenant_of(s->exec, q->id, tenant, sizeof(tenant), &err) < 0)
		return svc_respond_error(q, &err);
	bool mismatch = !util_streq0(tenant, q->handle.tenant_id);
	bool cancelled = false;
	pthread_mutex_lock(&s->lock);
	for (svc_job *j = s->jobs; j && !mismatch; j = j->next) {
		if (strcmp(j->handle.environment_id, q->id) != 0)
			continue;
		/* The running execute's handle passed the port's whole check: the
		 * cancel's must be the same one. */
		if (!handles_equal(&j->handle, &q->handle)) {
			mismatch = true;
			break;
		}
		airlock_cancel_fire(j->cancel);
		cancelled = true;
	}
	pthread_mutex_unlock(&s->lock);
	if (!mismatch && !cancelled) {
		/* No command ran to compare with: the handle is still compared
		 * with the sandbox's, every field, as every other verb does (the
		 * workspace check destroys on a mismatch). Only that answer
		 * counts here; any other refusal (a command that started since)
		 * leaves the answer "nothing was running". */
		airlock_error werr = { 0 };
		airlock_exec_call call = { .tenant_id = q->handle.tenant_id,
			                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
		airlock_workspace *ws = NULL;
		int r = airlock_exec_workspace(s->exec, &call, &q->handle, &ws, &werr);
		airlock_workspace_release(ws);
		if (r < 0 && werr.cls == AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED)
			return svc_respond_error(q, &werr);
	}
	if (mismatch) {
		/* The port's own rule for a handle that is not the sandbox's:
		 * destroy it, and say why. Destroy with the wrong tenant does that;
		 * a right tenant with other fields goes through the workspace
		 * check, which compares every field. */
		airlock_error derr = { 0 };
		airlock_exec_call call = { .tenant_id = q->handle.tenant_id,
			                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
		airlock_workspace *ws = NULL;
		int r = util_streq0(tenant, q->handle.tenant_id)
		                ? airlock_exec_workspace(s->exec, &call, &q->handle, &ws, &derr)
		                : airlock_exec_destroy(s->exec, &q->handle, &derr);
		airlock_workspace_release(ws);
		if (r == 0)
			airlock_error_set(&derr, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
			                  "environment %s: the cancel's handle is not the running command's",
			                  q->id);
		return svc_respond_error(q, &derr);
	}
	return http_respond_json(q->r, HTTP_OK,
	                   strdup(cancelled ? "{\"cancelled\":true}" : "{\"cancelled\":false}"));
}

static http_result do_destroy(svc_req *q)
{
	airlock_error err = { 0 };
	if (airlock_exec_destroy(q->s->exec, &q->handle, &err) < 0)
		return svc_respond_error(q, &err);
	return http_respond(q->r, HTTP_NO_CONTENT, NULL, 0, NULL);
}

/* ---- the workspace ------------------------------------------------------------ */

static int query_size(const svc_req *q, const char *key, size_t dflt, size_t max, size_t *ret,
                      airlock_error *err)
{
	_cleanup_free_ char *v = NULL;
	size_t len = 0;
	int r = svc_query_value(q->query, q->query_len, key, &v, &len, err);
	if (r < 0)
		return r;
	if (r == 0) {
		if (dflt == 0)
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "%s: missing", key);
		*ret = dflt;
		return 0;
	}
	int64_t n = 0;
	if (strlen(v) != len || !util_parse_i64(v, &n) || n < 0 || (uint64_t)n > max)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "%s: must be an integer from 0 to %zu", key, max);
	*ret = (size_t)n;
	return 0;
}

/* The wire spells the port's enums as the specification spells its own
 * (TOOL_WRITTEN, FILE), like killed_by; the library's names are lowercase. */
static const char *wire_name(const char *lower, char out[64])
{
	size_t i = 0;
	for (; lower && lower[i] && i + 1 < 64; i++)
		out[i] = (char)(lower[i] >= 'a' && lower[i] <= 'z' ? lower[i] - 'a' + 'A' : lower[i]);
	out[i] = 0;
	return out;
}

/* The workspace port's failures that are plain errnos (a missing file, a
 * parent that is not a directory, a full volume) keep their code across
 * the API: the in-process port returns -ENOENT, and so must the remote
 * one. They cross as SystemError with one more member, "errno", the
 * symbolic name (a number could differ between the two sides'
 * architectures), status 422; the names are the ones the workspace port
 * returns (docs/service-api.md). Any other errno is the service failing:
 * ExecutionUnavailable. */

static http_result respond_ws_error(svc_req *q, const airlock_error *e)
{
	const char *name = e->cls == AIRLOCK_ERR_SYSTEM ? airlock_errno_wire_name(e->errnum) : NULL;
	if (!name)
		return svc_respond_error(q, e);
	airlock_error jerr = { 0 };
	json_t *o = core_json_error_value(e, &jerr);
	if (!o || json_object_set_new(o, "errno", json_string(name)) < 0) {
		json_decref(o);
		return HTTP_CLOSE;
	}
	char *body = jdump(o);
	if (!body)
		return HTTP_CLOSE;
	return http_respond(q->r, HTTP_UNPROCESSABLE_CONTENT, body, strlen(body), "application/json");
}

static http_result do_workspace(svc_req *q)
{
	size_t body_len = 0;
	const unsigned char *body_in = http_request_body(q->r, &body_len);
	airlock_service *s = q->s;
	airlock_error err = { 0 };
	_cleanup_free_ char *path = NULL, *rel = NULL, *resolved = NULL;
	size_t plen = 0;
	int r = svc_query_value(q->query, q->query_len, "path", &path, &plen, &err);
	if (r == 0)
		r = airlock_error_set(&err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "path: missing");
	if (r < 0)
		return svc_respond_error(q, &err);
	bool root = plen == 0 || (plen == 1 && path[0] == '.');
	size_t limit = 0;
	if (q->verb == SVC_READ)
		r = query_size(q, "max_bytes", 0, AIRLOCK_SERVICE_READ_MAX, &limit, &err);
	else if (q->verb == SVC_LISTDIR)
		r = query_size(q, "max_entries", 1000, AIRLOCK_SERVICE_LISTDIR_MAX, &limit, &err);
	if (r < 0)
		return svc_respond_error(q, &err);

	airlock_exec_call call = { .tenant_id = q->handle.tenant_id,
		                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_workspace *ws = NULL;
	if (airlock_exec_workspace(s->exec, &call, &q->handle, &ws, &err) < 0)
		return svc_respond_error(q, &err);

	/* The raw bytes with their length go through the string rules first
	 * (an encoded NUL is refused there, as WorkspaceEscape, never cut);
	 * only a checked relative path reaches the calls that take a C string. */
	if (!(root && (q->verb == SVC_LISTDIR || q->verb == SVC_CONTAIN)))
		r = airlock_workspace_check_string(path, plen, &rel, &err);
	http_result mr = HTTP_CLOSE;
	if (r < 0) {
		mr = respond_ws_error(q, &err);
		goto out;
	}
	switch (q->verb) {
	case SVC_CONTAIN: {
		if (!root && airlock_workspace_resolve(ws, path, plen, &resolved, &err) < 0)
			mr = respond_ws_error(q, &err);
		else
			mr = http_respond(q->r, HTTP_NO_CONTENT, NULL, 0, NULL);
		break;
	}
	case SVC_READ: {
		unsigned char *data = NULL;
		size_t len = 0;
		if (airlock_workspace_read(ws, rel, limit, &data, &len, &err) < 0)
			mr = respond_ws_error(q, &err);
		else
			mr = http_respond(q->r, HTTP_OK, (char *)(data ? data : (unsigned char *)strdup("")),
			             len, "application/octet-stream");
		break;
	}
	case SVC_WRITE:
		if (airlock_workspace_write(ws, rel, body_len ? (const void *)body_in : "", body_len,
		                            &err) < 0)
			mr = respond_ws_error(q, &err);
		else
			mr = http_respond(q->r, HTTP_NO_CONTENT, NULL, 0, NULL);
		break;
	case SVC_LISTDIR: {
		airlock_dir_listing l = { 0 };
		if (airlock_workspace_listdir(ws, root ? "." : rel, limit, &l, &err) < 0) {
			mr = respond_ws_error(q, &err);
			break;
		}
		json_t *arr = json_array();
		for (size_t i = 0; arr && i < l.n; i++) {
			/* The path in FileChange.path's lossless text form, made by
			 * the one encoder that has it. */
			json_t *pv = core_json_path_value(l.entries[i].path);
			char tn[64];
			json_t *e = pv ? json_pack("{s:o, s:s, s:I}", "path", pv, "type",
			                           wire_name(airlock_entry_type_name(l.entries[i].type), tn),
			                           "size_bytes", (json_int_t)l.entries[i].size_bytes)
			               : NULL;
			if (!e || json_array_append_new(arr, e) < 0) {
				json_decref(arr);
				arr = NULL;
			}
		}
		bool trunc = l.truncated;
		airlock_dir_listing_clear(&l);
		mr = arr ? http_respond_json(q->r, HTTP_OK,
		                       jdump(json_pack("{s:o, s:b}", "entries", arr, "truncated", trunc)))
		         : HTTP_CLOSE;
		break;
	}
	case SVC_PROVENANCE: {
		airlock_provenance p = AIRLOCK_PROVENANCE_INVALID;
		if (airlock_workspace_provenance(ws, rel, &p, &err) < 0) {
			mr = respond_ws_error(q, &err);
			break;
		}
		char name[64];
		mr = http_respond_json(q->r, HTTP_OK,
		                 jdump(json_pack("{s:s}", "provenance",
		                                 wire_name(airlock_provenance_name(p), name))));
		break;
	}
	case SVC_NONE:
	case SVC_HEALTH:
	case SVC_LIST:
	case SVC_PROVISION:
	case SVC_EXECUTE:
	case SVC_CANCEL:
	case SVC_DESTROY:
	default:
		break;
	}
out:
	airlock_workspace_release(ws);
	return mr;
}


/* ---- the routes ---------------------------------------------------------------------- */

static bool verb_has_id(svc_verb v)
{
	return v != SVC_HEALTH && v != SVC_LIST && v != SVC_PROVISION && v != SVC_NONE;
}

static void route_free(void *state)
{
	svc_req *q = state;
	airlock_environment_handle_clear(&q->handle);
	free(q);
}

/* After authentication: the route, the handle, the body's cap. */
static http_result route_start(void *ctx, http_request *r, const char *method)
{
	airlock_service *s = ctx;
	svc_req *q = calloc(1, sizeof(*q));
	if (!q)
		return HTTP_CLOSE;
	q->s = s;
	q->r = r;
	http_request_set_state(r, q);
	size_t target_len = 0;
	const char *target = http_request_target(r, &target_len);
	int st = svc_route(target, target_len, method, &q->verb, q->id, &q->query, &q->query_len);
	if (st == 404)
		return http_respond_fail(r, HTTP_NOT_FOUND, AIRLOCK_ERR_TOOL_VALIDATION,
		                         "no such path (see docs/service-api.md)");
	if (st == 405)
		return http_respond_fail(r, HTTP_METHOD_NOT_ALLOWED, AIRLOCK_ERR_TOOL_VALIDATION,
		                         "method %.16s is not allowed on this path", method);
	airlock_error err = { 0 };
	if (verb_has_id(q->verb)) {
		size_t hlen = 0;
		const char *hv = http_request_header(r, "Airlock-Handle", &hlen);
		if (svc_handle_decode(hv, hlen, &q->handle, &err) < 0)
			return http_respond_error_status(r, HTTP_BAD_REQUEST, &err);
		q->has_handle = true;
		if (strcmp(q->handle.environment_id, q->id) != 0)
			return http_respond_fail(r, HTTP_BAD_REQUEST, AIRLOCK_ERR_TOOL_VALIDATION,
			                         "Airlock-Handle: its environment_id is not the path's");
	}
	/* Each route's body cap is what the route can need (caps.h says
	 * why each is that number). */
	size_t cap = q->verb == SVC_WRITE       ? s->cfg.max_write_bytes
	             : q->verb == SVC_PROVISION ? AIRLOCK_SERVICE_PROVISION_BODY_MAX
	             : q->verb == SVC_EXECUTE   ? AIRLOCK_SERVICE_EXECUTE_BODY_MAX
	                                        : AIRLOCK_SERVICE_EMPTY_BODY_MAX;
	http_request_set_body_cap(r, cap);
	return HTTP_NEXT;
}

static http_result route_handle(void *ctx, http_request *r)
{
	(void)ctx;
	svc_req *q = http_request_state(r);
	if (!q)
		return HTTP_CLOSE;
	switch (q->verb) {
	case SVC_HEALTH: return do_health(q);
	case SVC_LIST: return do_list(q);
	case SVC_PROVISION: return do_provision(q);
	case SVC_EXECUTE: return do_execute(q);
	case SVC_CANCEL: return do_cancel(q);
	case SVC_DESTROY: return do_destroy(q);
	case SVC_CONTAIN:
	case SVC_READ:
	case SVC_WRITE:
	case SVC_LISTDIR:
	case SVC_PROVENANCE: return do_workspace(q);
	case SVC_NONE:
	default: return HTTP_CLOSE;
	}
}

static const http_routes svc_routes = {
	.start = route_start,
	.handle = route_handle,
	.state_free = route_free,
};

/* ---- the expiry timer ------------------------------------------------------------- */

static void *expire_main(void *arg)
{
	airlock_service *s = arg;
	int64_t every = cfg_or(s->cfg.expire_interval_ms, 1000);
	struct pollfd p = { .fd = s->stop_efd, .events = POLLIN };
	while (poll(&p, 1, (int)every) <= 0)
		airlock_exec_expire(s->exec, util_now_ms());
	return NULL;
}

/* ---- listening ------------------------------------------------------------------- */

static int read_pem(const char *what, const char *path, char **ret, airlock_error *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno, "%s: cannot open it", what);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: not a regular file", what);
	size_t len = 0;
	int r = util_read_capped(fd, AIRLOCK_SERVICE_PEM_MAX, ret, &len);
	if (r < 0)
		return r == -EFBIG ? airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: larger than 1 MiB", what)
		                   : airlock_error_set(err, AIRLOCK_ERR_CONFIG, -r, "%s", what);
	return 0;
}

static void service_release(airlock_service *s)
{
	svc_listener_close(&s->lis);
	if (s->stop_efd >= 0)
		close(s->stop_efd);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static void stop_expire(airlock_service *s)
{
	uint64_t one = 1;
	if (s->stop_efd >= 0 && write(s->stop_efd, &one, sizeof(one)) < 0) {
		/* an eventfd write fails only on overflow, which one write cannot cause */
	}
	if (s->expire_started)
		pthread_join(s->expire_thread, NULL);
	s->expire_started = false;
}

/* The server core stopped: the listening socket is ours again (closed at
 * release), unless libmicrohttpd closed it. */
static void stop_http(airlock_service *s, int64_t drain_ms)
{
	if (!s->http)
		return;
	int lfd = http_server_stop(s->http, drain_ms);
	s->http = NULL;
	s->lis.fd = lfd;
}

int airlock_service_new(const airlock_service_config *cfg, airlock_exec *exec,
                        airlock_service **ret, airlock_error *err)
{
	if (!cfg || !exec || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "service: missing argument");
	if (!cfg->listen || !cfg->listen[0])
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "service: no listen address");
	if (!cfg->credential || cfg->credential_len == 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service: no credential (every request must carry one)");
	airlock_service *s = calloc(1, sizeof(*s));
	if (!s)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "service");
	s->cfg = *cfg;
	s->cfg.listen = s->cfg.tls_cert_file = s->cfg.tls_key_file = s->cfg.tls_client_ca_file = NULL;
	s->cfg.credential = NULL;
	if (!s->cfg.max_write_bytes)
		s->cfg.max_write_bytes = AIRLOCK_SERVICE_WRITE_MAX_DEFAULT;
	s->exec = exec;
	s->lis.fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	s->stop_efd = eventfd(0, EFD_CLOEXEC);
	_cleanup_free_ char *pem_cert = NULL, *pem_ca = NULL;
	char *pem_key = NULL;
	int r;
	if (s->stop_efd < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "service");
		goto fail;
	}

	bool is_unix = strncmp(cfg->listen, "unix:", 5) == 0;
	if (is_unix) {
		r = svc_listen(cfg->listen, cfg->socket_mode, cfg->socket_gid, &s->lis, err);
	} else {
		/* TCP carries the credential: never in the clear. */
		if (!cfg->tls_cert_file || !cfg->tls_key_file) {
			r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                      "listen %s: TCP needs TLS: set the certificate and key files",
			                      cfg->listen);
			goto fail;
		}
		if ((r = read_pem("TLS certificate", cfg->tls_cert_file, &pem_cert, err)) < 0 ||
		    (r = read_pem("TLS key", cfg->tls_key_file, &pem_key, err)) < 0 ||
		    (cfg->tls_client_ca_file &&
		     (r = read_pem("TLS client CA", cfg->tls_client_ca_file, &pem_ca, err)) < 0))
			goto fail;
		r = svc_listen(cfg->listen, 0, -1, &s->lis, err);
	}
	if (r < 0)
		goto fail;

	http_server_config hc = {
		.name = "service",
		.address = s->lis.address,
		.listen_fd = s->lis.fd,
		.pem_cert = pem_cert,
		.pem_key = pem_key,
		.pem_ca = pem_ca,
		.credential = cfg->credential,
		.credential_len = cfg->credential_len,
		.max_connections = cfg->max_connections,
		.max_connections_per_ip = cfg->max_connections_per_ip,
		.auth_timeout_ms = cfg->auth_timeout_ms,
		.header_timeout_ms = cfg->header_timeout_ms,
		.request_timeout_ms = cfg->request_timeout_ms,
		.connection_timeout_ms = cfg->connection_timeout_ms,
		.header_max = AIRLOCK_SERVICE_HEADER_MAX,
		.oversize_drain_max = AIRLOCK_SERVICE_OVERSIZE_DRAIN_MAX,
	};
	pem_key = NULL; /* the core's now, on success and failure alike */
	r = http_server_new(&hc, &svc_routes, s, &s->http, err);
	if (r < 0)
		goto fail;
	s->lis.fd = -1; /* the core's until it stops */
	int e = pthread_create(&s->expire_thread, NULL, expire_main, s);
	if (e != 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "service: threads");
		goto fail;
	}
	s->expire_started = true;
	*ret = s;
	return 0;
fail:
	if (pem_key) {
		OPENSSL_cleanse(pem_key, strlen(pem_key));
		free(pem_key);
	}
	stop_expire(s);
	stop_http(s, 0);
	service_release(s);
	return r;
}

void airlock_service_shutdown(airlock_service *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->shutting_down = true;
	pthread_mutex_unlock(&s->lock);
	airlock_exec_shutdown(s->exec);
}

const char *airlock_service_address(const airlock_service *s)
{
	return s ? s->lis.address : NULL;
}

void airlock_service_free(airlock_service *s)
{
	if (!s)
		return;
	/* Whatever still runs ends now (SERVICE_SHUTDOWN), so the drain is
	 * for responses being written, not for commands. */
	airlock_service_shutdown(s);
	stop_http(s, cfg_or(s->cfg.drain_timeout_ms, 10000));
	stop_expire(s);
	service_release(s);
}
