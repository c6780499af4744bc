/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's execute job: the command runs on one of the service's
 * execute threads (threads.h: a bounded pool, so an execute costs a
 * waiting thread's wakeup, not a thread's start and join), bounded by its
 * timeout, expires_at and the service's shutdown; the connection's thread
 * waits for it, woken when it ends and every SVC_POLL_MS to look at the
 * socket: a client that went away cancels its command (CANCELLED). A
 * streamed execute's events (NDJSON: started, output, dropped, then the
 * result or the error) wait in a capped buffer, so a client that stops
 * reading costs its command nothing and the service at most that buffer.
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "airlock/ids.h"
#include "airlock/json.h"
#include "core/json_internal.h"
#include "service/routes.h"
#include "service/threads.h"
#include "util/fault.h"
#include "util/util.h"

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
	svc_work work;  /* on the service's execute threads */
	bool submitted; /* until job_free has seen it end and released it */

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
	if (util_fault("service.execute.result")) {
		/* The result that cannot be encoded becomes the stream's error
		 * line: the client is told, not left with a cut stream. */
		airlock_error_set(&j->err, AIRLOCK_ERR_SYSTEM, ENOMEM, "execute: the result");
		j->rc = airlock_errcode(AIRLOCK_ERR_SYSTEM);
	}
	if (j->rc == 0)
		inner = airlock_execution_result_to_json(&j->res, &jerr);
	if (j->rc == 0 && !inner) {
		j->err = jerr;
		j->rc = airlock_errcode(AIRLOCK_ERR_SYSTEM);
	}
	if (j->rc != 0)
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

/* On an execute thread. The job is the connection's again once done is
 * set: nothing of it is touched after the unlock. */
static void job_main(void *arg)
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
}

/* A submitted job's end: cancelled (nothing when it has ended), waited
 * for, its slot on the execute threads given back. */
static void job_end(svc_job *j)
{
	if (!j->submitted)
		return;
	airlock_cancel_fire(j->cancel);
	pthread_mutex_lock(&j->lock);
	while (!j->done)
		pthread_cond_wait(&j->cond, &j->lock);
	pthread_mutex_unlock(&j->lock);
	svc_threads_release(j->s->threads);
	j->submitted = false;
}

static void job_free(svc_job *j)
{
	if (!j)
		return;
	job_end(j);
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

http_result svc_do_execute(svc_req *q)
{
	airlock_service *s = q->s;
	airlock_error err = { 0 };
	svc_execute x = { 0 };
	size_t body_len = 0;
	const unsigned char *body_in = http_request_body(q->r, &body_len);
	if (svc_execute_decode(body_in, body_len, &x, &err) < 0)
		return svc_respond_error(q, &err);
	svc_job *j = util_fault("service.execute.job") ? NULL : calloc(1, sizeof(*j));
	if (!j) {
		airlock_execution_command_clear(&x.command);
		airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOMEM, "execute: the job's record");
		return svc_respond_error(q, &err);
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
		if (UTIL_FAULT_RET("service.execute.started", job_queue(j, line, (size_t)w)) < 0) {
			job_free(j);
			airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOMEM, "execute: the stream");
			return svc_respond_error(q, &err);
		}
	}

	pthread_mutex_lock(&s->lock);
	j->next = s->jobs;
	s->jobs = j;
	pthread_mutex_unlock(&s->lock);
	j->work = (svc_work){ .fn = job_main, .arg = j };
	int e = util_fault("service.execute.thread") ? -EAGAIN : svc_threads_submit(s->threads, &j->work);
	if (e < 0) {
		job_unlink(s, j);
		job_free(j);
		if (e == -EBUSY)
			/* Every thread runs a command: the client retries (503,
			 * Retry-After) rather than wait behind commands that may
			 * run for hours. */
			airlock_error_set(&err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                  "execute: all %u of the service's execute threads are busy "
			                  "(the bound is %s); retry later",
			                  svc_threads_max(s->threads),
			                  s->cfg.execute_threads ? "execute_threads" :
			                                           "service.max_connections");
		else
			airlock_error_set(&err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -e,
			                  "execute: cannot start an execute thread");
		return svc_respond_error(q, &err);
	}
	j->submitted = true;

	if (j->stream) {
		/* No total deadline while the command runs: its own timeouts
		 * bound it, and a client that reads nothing meets the idle
		 * timeout. On failure job_read_free has freed the job. */
		return http_respond_stream(q->r, HTTP_OK, "application/x-ndjson", job_read, j,
		                           job_read_free);
	}

	/* Blocking: wait for the result, woken when it is in and every
	 * SVC_POLL_MS to look at the client. */
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
	job_end(j);
	http_result r;
	if (gone) {
		r = HTTP_CLOSE;
	} else if (j->rc < 0) {
		r = svc_respond_error(q, &j->err);
	} else {
		char *inner = util_fault("service.execute.answer") ?
		                      NULL :
		                      airlock_execution_result_to_json(&j->res, &err);
		if (!inner && !err.message[0])
			airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOMEM, "execute: the answer");
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

bool svc_jobs_cancel(svc_req *q, bool *ret_cancelled)
{
	airlock_service *s = q->s;
	bool same = true;
	*ret_cancelled = false;
	pthread_mutex_lock(&s->lock);
	for (svc_job *j = s->jobs; j; j = j->next) {
		if (strcmp(j->handle.environment_id, q->id) != 0)
			continue;
		/* The running execute's handle passed the port's whole check: the
		 * cancel's must be the same one. */
		if (!handles_equal(&j->handle, &q->handle)) {
			same = false;
			break;
		}
		airlock_cancel_fire(j->cancel);
		*ret_cancelled = true;
	}
	pthread_mutex_unlock(&s->lock);
	return same;
}
