/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proxy's log: one JSON line per decision, queued on the loop and
 * written by a thread of its own, so a log that stops reading never stops
 * the loop; a full queue drops lines and says how many it dropped.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "airlock/json.h"
#include "egress/proxy_loop.h"
#include "util/util.h"

static int put(json_t *o, const char *k, json_t *v)
{
	return v && json_object_set_new(o, k, v) == 0 ? 0 : -1;
}

void *proxy_log_writer(void *arg)
{
	log_queue *q = arg;
	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (!q->head && !q->closing)
			pthread_cond_wait(&q->more, &q->lock);
		log_line_q *l = q->head;
		if (!l)
			break; /* closing and drained */
		q->head = l->next;
		if (!q->head)
			q->tail = NULL;
		q->n--;
		pthread_mutex_unlock(&q->lock);
		/* One write(2) per line: O_APPEND keeps lines whole when several
		 * processes share the file. */
		(void)!write(q->fd, l->text, l->len);
		free(l);
		pthread_mutex_lock(&q->lock);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

static void log_push(log_queue *q, const char *text, size_t len)
{
	log_line_q *l = malloc(sizeof(*l) + len);
	pthread_mutex_lock(&q->lock);
	if (!l || q->n >= q->max) {
		q->dropped++;
		pthread_mutex_unlock(&q->lock);
		free(l);
		return;
	}
	memcpy(l->text, text, len);
	l->len = len;
	l->next = NULL;
	if (q->tail)
		q->tail->next = l;
	else
		q->head = l;
	q->tail = l;
	q->n++;
	pthread_cond_signal(&q->more);
	pthread_mutex_unlock(&q->lock);
}

/* Queue one line; first a line counting what was dropped, if anything was. */
static void emit(proxy *px, json_t *o)
{
	log_queue *q = &px->log;
	pthread_mutex_lock(&q->lock);
	uint64_t dropped = q->dropped;
	bool room = q->n + 1 < q->max;
	if (dropped && room)
		q->dropped = 0;
	pthread_mutex_unlock(&q->lock);
	if (dropped && room) {
		char note[128];
		int n = snprintf(note, sizeof(note),
		                 "{\"ts_ms\":%lld,\"outcome\":\"failed\",\"reason\":\"LOG_DROPPED\","
		                 "\"count\":%llu}\n",
		                 (long long)util_now_ms(), (unsigned long long)dropped);
		log_push(q, note, (size_t)n);
	}
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	if (!s) {
		pthread_mutex_lock(&q->lock);
		q->dropped++;
		pthread_mutex_unlock(&q->lock);
		return;
	}
	size_t len = strlen(s);
	s[len] = '\n'; /* json_dumps's NUL becomes the line end */
	log_push(q, s, len + 1);
	free(s);
}

/* The fields every line of a listener carries. */
static json_t *line_base(const listener *l)
{
	json_t *o = json_object();
	int r = o ? 0 : -1;
	if (r == 0)
		r = put(o, "ts_ms", json_integer(util_now_ms()));
	if (r == 0)
		r = put(o, "run", json_string(l->run));
	if (r == 0)
		r = put(o, "tenant", json_string(l->tenant));
	if (r == 0)
		r = put(o, "environment", json_string(l->env));
	if (r == 0)
		r = put(o, "transport", json_string(airlock_egress_transport_name(l->transport)));
	if (r < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* One line for the connections a listener made wait (rate limited). Each
 * of them still has its own line when it ends. */
void proxy_log_rate_limited(listener *l)
{
	if (!l->rate_delayed)
		return;
	json_t *o = line_base(l);
	if (o && (put(o, "outcome", json_string("delayed")) < 0 ||
	          put(o, "reason", json_string("RATE_LIMITED")) < 0 ||
	          put(o, "count", json_integer((json_int_t)l->rate_delayed)) < 0)) {
		json_decref(o);
		o = NULL;
	}
	emit(l->px, o);
	json_decref(o);
	l->rate_delayed = 0;
}

/* One decision, one line. host and the addresses are escaped or numeric by
 * construction: a hostile request cannot forge a field. */
void proxy_log_line(conn *c, const char *outcome, const char *reason, const char *detail)
{
	json_t *o = line_base(c->l);
	json_t *addrs = json_array();
	char buf[46];
	int r = o && addrs ? 0 : -1;
	for (size_t i = 0; r == 0 && i < c->d.n_addresses && i < AIRLOCK_EGRESS_ADDRESSES_MAX; i++) {
		airlock_addr_format(&c->d.addresses[i], buf);
		r = json_array_append_new(addrs, json_string(buf));
	}
	if (r == 0) {
		if (c->d.host[0]) {
			r = put(o, "host", json_string(c->d.host));
		} else if (c->parsed) {
			char esc[AIRLOCK_HOSTNAME_MAX + 1];
			util_escape(esc, sizeof(esc), c->req.host, strlen(c->req.host));
			r = put(o, "host", json_string(esc));
		} else {
			r = put(o, "host", json_null());
		}
	}
	if (r == 0)
		r = put(o, "port", c->parsed ? json_integer(c->req.port) : json_null());
	if (r == 0) {
		r = put(o, "addresses", addrs);
		addrs = NULL;
	}
	if (r == 0) {
		if (c->d.has_dial) {
			airlock_addr_format(&c->d.dial, buf);
			r = put(o, "dial", json_string(buf));
		} else {
			r = put(o, "dial", json_null());
		}
	}
	if (r == 0)
		r = put(o, "outcome", json_string(outcome));
	if (r == 0)
		r = put(o, "reason", json_string(reason));
	if (r == 0)
		r = put(o, "detail", detail ? json_string(detail) : json_null());
	if (r == 0)
		r = put(o, "status", json_integer(c->status));
	if (r == 0)
		r = put(o, "bytes_up", json_integer((json_int_t)c->up.bytes));
	if (r == 0)
		r = put(o, "bytes_down", json_integer((json_int_t)c->down.bytes));
	if (r == 0)
		r = put(o, "duration_ms", json_integer(util_monotonic_ms() - c->start_ms));
	json_decref(addrs);
	emit(c->l->px, r == 0 ? o : NULL);
	json_decref(o);
}

