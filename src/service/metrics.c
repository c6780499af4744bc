/* SPDX-License-Identifier: Apache-2.0 */
#include "service/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <jansson.h>
#include <microhttpd.h>

#include "airlock/egress.h"
#include "core/json_internal.h"
#include "util/util.h"

/*
 * The counters are fixed arrays under one mutex: every event is a few
 * additions, a scrape copies the whole struct under the lock and formats
 * the copy without it, so a slow scrape never holds an event up and the
 * memory the module uses does not grow with what it is told. Labels come
 * from closed tables (the kill reasons, the error classes, the proxy's
 * outcomes and reasons, the destroy reasons) or from the mechanism names,
 * of which there are at most METRICS_MECHANISMS_MAX: a value outside a
 * table is counted under "other"/"OTHER", never copied into a label, so
 * nothing a tenant controls reaches a scrape and its size is bounded.
 */

/* ---- histograms --------------------------------------------------------- */

/* Provision latency, 1 ms to 60 s (the start budget's range): a
 * container start is in the low milliseconds, a gVisor or microVM start in
 * the hundreds, a cold image past a second. Upper bounds in ms and as the
 * exposition writes them (seconds, the Prometheus base unit), kept side by
 * side so no float is formatted at render time. */
static const int64_t latency_bounds_ms[] = { 1,    2,    5,    10,   20,    50,    100,   200,
	                                     500,  1000, 2000, 5000, 10000, 20000, 30000, 60000 };
static const char *const latency_bounds_text[] = { "0.001", "0.002", "0.005", "0.01",
	                                           "0.02",  "0.05",  "0.1",   "0.2",
	                                           "0.5",   "1",     "2",     "5",
	                                           "10",    "20",    "30",    "60" };
#define LATENCY_BUCKETS (sizeof(latency_bounds_ms) / sizeof(latency_bounds_ms[0]))
_Static_assert(LATENCY_BUCKETS == sizeof(latency_bounds_text) / sizeof(latency_bounds_text[0]),
               "one text per latency bound");

/* Utilization, busy_ms / lifetime: the low end is resolved finely because a
 * low share is the finding ("held across waits that should have released
 * them"). In parts per million, the precision the sum is kept in. */
static const int64_t util_bounds_ppm[] = { 10000,  50000,  100000, 250000,
	                                   500000, 750000, 900000, 1000000 };
static const char *const util_bounds_text[] = { "0.01", "0.05", "0.1", "0.25",
	                                        "0.5",  "0.75", "0.9", "1" };
#define UTIL_BUCKETS (sizeof(util_bounds_ppm) / sizeof(util_bounds_ppm[0]))
_Static_assert(UTIL_BUCKETS == sizeof(util_bounds_text) / sizeof(util_bounds_text[0]),
               "one text per utilization bound");
#define PPM 1000000

/* Non-cumulative counts per bucket (the last one is +Inf), the sum in the
 * bucket's unit (ms, ppm). */
typedef struct histogram {
	uint64_t bucket[LATENCY_BUCKETS + 1];
	uint64_t count;
	uint64_t sum;
} histogram;
_Static_assert(UTIL_BUCKETS <= LATENCY_BUCKETS, "the histogram holds both");

static void histogram_add(histogram *h, const int64_t *bounds, size_t n, int64_t v)
{
	size_t i = 0;
	while (i < n && v > bounds[i])
		i++;
	h->bucket[i]++;
	h->count++;
	h->sum += (uint64_t)v;
}

/* ---- the closed vocabularies -------------------------------------------- */

/* At most this many mechanisms are told apart (a service runs one; the
 * tests several); the last slot is "other", for a name past the table or
 * one that is not a plain identifier. */
#define METRICS_MECHANISMS_MAX 8
#define MECHANISM_NAME_MAX 32
#define MECHANISM_OTHER (METRICS_MECHANISMS_MAX - 1)

/* The destroy reasons the core gives (airlock_exec_event.reason). */
static const char *const destroy_reasons[] = { "request", "expired", "suspicion", "shutdown",
	                                       "other" };
#define DESTROY_REASONS (sizeof(destroy_reasons) / sizeof(destroy_reasons[0]))

/* The egress proxy's decision lines (include/airlock/proxy.h). Outcomes: */
enum { OUT_ALLOWED, OUT_REFUSED, OUT_FAILED, OUT__MAX };
static const char *const outcomes[OUT__MAX] = { "allowed", "refused", "failed" };

/* Reasons: the evaluation's (airlock_egress_reason, by its own name table,
 * so a reason added there is known here at once) and then the proxy's own,
 * which the proxy process's files (src/egress/proxy_loop.h) write as
 * literals (tests/test_service_metrics.c reads them and checks that each of
 * those is known here). Each with the
 * outcome it is written under, so the series an operator alerts on exist
 * at 0 before the first decision. */
typedef struct proxy_reason {
	const char *name;
	int outcome;
} proxy_reason;
static const proxy_reason proxy_reasons[] = {
	{ "METHOD_NOT_ALLOWED", OUT_REFUSED }, { "BAD_REQUEST", OUT_REFUSED },
	{ "REQUEST_TIMEOUT", OUT_REFUSED },    { "CLIENT_CLOSED", OUT_REFUSED },
	{ "DIAL_TIMEOUT", OUT_FAILED },        { "DIAL_FAILED", OUT_FAILED },
	{ "PROXY_RESOURCES", OUT_FAILED },     { "PROXY_BUSY", OUT_FAILED },
	{ "PROXY_FULL", OUT_FAILED },
};
#define EVAL_REASONS ((size_t)AIRLOCK_EGRESS_REASON__MAX - 1) /* without INVALID */
#define PROXY_REASONS (sizeof(proxy_reasons) / sizeof(proxy_reasons[0]))
#define REASON_OTHER (EVAL_REASONS + PROXY_REASONS)
#define REASONS (REASON_OTHER + 1)

static const char *reason_name(size_t i)
{
	if (i < EVAL_REASONS)
		return airlock_egress_reason_name((airlock_egress_reason)(i + 1));
	if (i < REASON_OTHER)
		return proxy_reasons[i - EVAL_REASONS].name;
	return "OTHER";
}

/* The outcome a reason is normally written under, or -1 (OTHER). */
static int reason_outcome(size_t i)
{
	if (i < EVAL_REASONS)
		return i + 1 == AIRLOCK_EGRESS_ALLOWED ? OUT_ALLOWED : OUT_REFUSED;
	if (i < REASON_OTHER)
		return proxy_reasons[i - EVAL_REASONS].outcome;
	return -1;
}

static size_t reason_index(const char *s)
{
	for (size_t i = 0; i < REASON_OTHER; i++)
		if (strcmp(s, reason_name(i)) == 0)
			return i;
	return REASON_OTHER;
}

/* ---- the state ------------------------------------------------------------ */

typedef struct mechanism {
	char name[MECHANISM_NAME_MAX];
	histogram latency;     /* ms */
	histogram utilization; /* ppm */
} mechanism;

typedef struct counters {
	mechanism mech[METRICS_MECHANISMS_MAX];
	size_t n_mech; /* used slots before MECHANISM_OTHER */
	uint64_t other_used; /* the "other" slot has been counted into */
	uint64_t executions[AIRLOCK_KILL__MAX];
	uint64_t provision_failures[AIRLOCK_ERR__MAX];
	uint64_t execute_failures[AIRLOCK_ERR__MAX];
	uint64_t destroyed[DESTROY_REASONS];
	uint64_t destroy_failures;
	uint64_t egress[OUT__MAX][REASONS];
	uint64_t egress_delayed;      /* connections held past the accept rate */
	uint64_t egress_log_dropped;  /* lines the proxy could not queue */
	uint64_t egress_malformed;    /* lines that are not a decision */
	uint64_t orphan_reaps;
	uint64_t log_lines;
	uint64_t log_dropped;
} counters;

struct service_metrics {
	pthread_mutex_t lock;
	counters c;
	int log_fd;
	bool log_send; /* a socket: send(MSG_DONTWAIT) */
	/* The egress log follower (service_metrics_egress_follow). */
	int follow_fd, stop_efd;
	pthread_t follow_thread;
	bool following;
};

/* A mechanism name as it may stand in a label: an identifier of the
 * adapter table ("fake", "native", "gvisor", "remote(native)"). */
static bool mechanism_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n >= MECHANISM_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x21 || s[i] > 0x7e)
			return false;
	return true;
}

/* The slot of a mechanism, taking a free one; under the lock. */
static mechanism *mechanism_slot(counters *c, const char *name)
{
	if (mechanism_name_ok(name)) {
		for (size_t i = 0; i < c->n_mech; i++)
			if (strcmp(c->mech[i].name, name) == 0)
				return &c->mech[i];
		if (c->n_mech < MECHANISM_OTHER) {
			mechanism *s = &c->mech[c->n_mech++];
			memcpy(s->name, name, strlen(name) + 1);
			return s;
		}
	}
	c->other_used = 1;
	return &c->mech[MECHANISM_OTHER];
}

static size_t errclass_index(const airlock_error *e)
{
	if (!e || (unsigned)e->cls >= AIRLOCK_ERR__MAX)
		return AIRLOCK_ERR_INVALID;
	return (size_t)e->cls;
}

static size_t destroy_reason_index(const char *s)
{
	for (size_t i = 0; s && i + 1 < DESTROY_REASONS; i++)
		if (strcmp(s, destroy_reasons[i]) == 0)
			return i;
	return DESTROY_REASONS - 1;
}

/* ---- the lifecycle log ---------------------------------------------------- */

#define _cleanup_json_ __attribute__((cleanup(json_decrefp)))

/* Longest line written: a write of at most PIPE_BUF bytes to a pipe is
 * atomic, so on a pipe a line is written whole or not at all (EAGAIN),
 * never half; lines from several threads then never interleave either. */
#define LINE_MAX_BYTES PIPE_BUF

static int put(json_t *o, const char *k, json_t *v)
{
	return v && json_object_set_new(o, k, v) == 0 ? 0 : -1;
}

/* An untrusted string (a tenant id from a spec that failed validation, an
 * error message quoting input) as a JSON string of at most cap bytes of
 * text: as it is when it is valid UTF-8 and short enough (jansson escapes
 * the control bytes and the quotes, so the line stays one line of valid
 * JSON), otherwise escaped to printable ASCII by util_escape and cut with
 * "...". NULL stays null. */
static json_t *untrusted(const char *s, size_t cap)
{
	if (!s)
		return json_null();
	size_t n = strlen(s);
	if (n <= cap) {
		json_t *j = json_stringn(s, n);
		if (j)
			return j;
	}
	char buf[1024];
	size_t size = cap + 1 < sizeof(buf) ? cap + 1 : sizeof(buf);
	if (size < 12)
		size = 12;
	return json_string(util_escape(buf, size, s, n));
}

/* One line: the event's fields, the untrusted strings cut at cap. */
static char *event_line(const airlock_exec_event *ev, size_t cap)
{
	_cleanup_json_ json_t *o = json_object();
	if (!o)
		return NULL;
	bool have_owner = ev->tenant_id || ev->run_id || ev->lease_epoch;
	int r = put(o, "ts_ms", json_integer(util_now_ms()));
	if (r == 0)
		r = put(o, "event", json_string(airlock_exec_event_kind_name(ev->kind)));
	if (r == 0)
		r = put(o, "mechanism", untrusted(ev->mechanism, MECHANISM_NAME_MAX));
	if (r == 0)
		r = put(o, "environment", untrusted(ev->environment_id, cap));
	if (r == 0)
		r = put(o, "tenant", untrusted(ev->tenant_id, cap));
	if (r == 0)
		r = put(o, "run", untrusted(ev->run_id, cap));
	if (r == 0)
		r = put(o, "epoch", have_owner ? json_integer(ev->lease_epoch) : json_null());
	switch (ev->kind) {
	case AIRLOCK_EXEC_EVENT_PROVISIONED:
	case AIRLOCK_EXEC_EVENT_PROVISION_FAILED:
	case AIRLOCK_EXEC_EVENT_EXECUTE_FAILED:
		if (r == 0)
			r = put(o, "duration_ms", json_integer(ev->duration_ms));
		break;
	case AIRLOCK_EXEC_EVENT_EXECUTED: {
		const char *k = airlock_kill_reason_name(ev->killed_by);
		if (r == 0)
			r = put(o, "duration_ms", json_integer(ev->duration_ms));
		if (r == 0)
			r = put(o, "killed_by", k ? json_string(k) : json_null());
		if (r == 0)
			r = put(o, "exit_code",
			        ev->has_exit_code ? json_integer(ev->exit_code) : json_null());
		break;
	}
	case AIRLOCK_EXEC_EVENT_DESTROYED:
		if (r == 0)
			r = put(o, "duration_ms", json_integer(ev->duration_ms));
		if (r == 0)
			r = put(o, "busy_ms", json_integer(ev->busy_ms));
		if (r == 0)
			r = put(o, "reason", untrusted(ev->reason, cap));
		break;
	case AIRLOCK_EXEC_EVENT_DESTROY_FAILED:
	case AIRLOCK_EXEC_EVENT_INVALID:
	case AIRLOCK_EXEC_EVENT__MAX:
		break;
	}
	/* The *_FAILED kinds carry the error in the API's shape: the class's
	 * name and the message (which never holds a host path: error.h). */
	bool failed = ev->kind == AIRLOCK_EXEC_EVENT_PROVISION_FAILED ||
	              ev->kind == AIRLOCK_EXEC_EVENT_EXECUTE_FAILED ||
	              ev->kind == AIRLOCK_EXEC_EVENT_DESTROY_FAILED;
	if (failed && r == 0)
		r = put(o, "error", json_string(airlock_errclass_name(
		                            (airlock_errclass)errclass_index(ev->error))));
	if (failed && r == 0)
		r = put(o, "message", untrusted(ev->error ? ev->error->message : NULL, 2 * cap));
	if (r < 0)
		return NULL;
	return json_dumps(o, JSON_COMPACT);
}

/* The line for build(cap) at the largest cap that fits LINE_MAX_BYTES with
 * its newline: a hostile string (control bytes take six bytes each in JSON)
 * is cut rather than the line dropped or split. */
static char *fitted_line(char *(*build)(const void *arg, size_t cap), const void *arg,
                         size_t *ret_len)
{
	for (size_t cap = 256; cap >= 16; cap /= 2) {
		char *s = build(arg, cap);
		if (!s)
			return NULL;
		size_t n = strlen(s);
		if (n + 1 <= LINE_MAX_BYTES) {
			/* json_dumps's NUL becomes the line end. */
			s[n] = '\n';
			*ret_len = n + 1;
			return s;
		}
		free(s);
	}
	return NULL;
}

static char *build_event(const void *arg, size_t cap) { return event_line(arg, cap); }

typedef struct service_line {
	const char *event;
	const char *message;
} service_line;

static char *build_service(const void *arg, size_t cap)
{
	const service_line *l = arg;
	_cleanup_json_ json_t *o = json_object();
	if (!o || put(o, "ts_ms", json_integer(util_now_ms())) < 0 ||
	    put(o, "event", untrusted(l->event, 64)) < 0 ||
	    put(o, "message", untrusted(l->message, 2 * cap)) < 0)
		return NULL;
	return json_dumps(o, JSON_COMPACT);
}

/* One write(2) that never waits: the descriptor is non-blocking (or a
 * socket written with MSG_DONTWAIT), so a log reader that stopped reading
 * costs the service a dropped line, counted, and nothing else. */
static void log_write(service_metrics *m, const char *line, size_t len)
{
	if (m->log_fd < 0)
		return;
	ssize_t w = -1;
	if (line) {
		do {
			w = m->log_send ? send(m->log_fd, line, len, MSG_DONTWAIT | MSG_NOSIGNAL) :
			                  write(m->log_fd, line, len);
		} while (w < 0 && errno == EINTR);
	}
	pthread_mutex_lock(&m->lock);
	if (w == (ssize_t)len)
		m->c.log_lines++;
	else
		m->c.log_dropped++;
	pthread_mutex_unlock(&m->lock);
}

/* ---- the entry points ------------------------------------------------------- */

/* The descriptor the lines go to, made non-blocking without changing the
 * caller's: O_NONBLOCK is a flag of the open file description, which a
 * dup shares (setting it on a dup of the service's stderr would make the
 * service's own writes to stderr fail with EAGAIN), so a pipe, FIFO or
 * terminal is opened anew through /proc/self/fd, which gives a new
 * description of the same pipe. A socket needs no flag (send takes
 * MSG_DONTWAIT). A regular file does not block on a reader and keeps the
 * caller's offset and O_APPEND only through a dup. */
static int log_open(int fd, bool *ret_send)
{
	struct stat st;
	*ret_send = false;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISSOCK(st.st_mode)) {
		*ret_send = true;
	} else if (!S_ISREG(st.st_mode)) {
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0)
			return -errno;
		if ((fl & O_ACCMODE) == O_RDONLY)
			return -EBADF;
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		int nfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (fl & O_APPEND));
		if (nfd >= 0)
			return nfd;
		/* No /proc: the shared description is made non-blocking, which
		 * the caller then also sees; still better than a service that
		 * stops when its log reader does. */
		nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (nfd < 0)
			return -errno;
		if (fcntl(nfd, F_SETFL, fl | O_NONBLOCK) < 0) {
			int e = errno;
			close(nfd);
			return -e;
		}
		return nfd;
	}
	int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	return nfd < 0 ? -errno : nfd;
}

int service_metrics_new(int log_fd, service_metrics **ret, airlock_error *err)
{
	service_metrics *m = calloc(1, sizeof(*m));
	if (!m)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "metrics");
	m->log_fd = -1;
	m->follow_fd = -1;
	m->stop_efd = -1;
	if (log_fd >= 0) {
		int fd = log_open(log_fd, &m->log_send);
		if (fd < 0) {
			free(m);
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -fd,
			                         "the lifecycle log descriptor");
		}
		m->log_fd = fd;
	}
	int r = pthread_mutex_init(&m->lock, NULL);
	if (r != 0) {
		if (m->log_fd >= 0)
			close(m->log_fd);
		free(m);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, r, "metrics lock");
	}
	*ret = m;
	return 0;
}

void service_metrics_free(service_metrics *m)
{
	if (!m)
		return;
	if (m->following) {
		uint64_t one = 1;
		(void)!write(m->stop_efd, &one, sizeof(one));
		pthread_join(m->follow_thread, NULL);
	}
	if (m->follow_fd >= 0)
		close(m->follow_fd);
	if (m->stop_efd >= 0)
		close(m->stop_efd);
	if (m->log_fd >= 0)
		close(m->log_fd);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void service_metrics_mechanism(service_metrics *m, const char *name)
{
	pthread_mutex_lock(&m->lock);
	(void)mechanism_slot(&m->c, name);
	pthread_mutex_unlock(&m->lock);
}

/* Busy over lifetime in ppm, within [0, 1]: busy_ms is measured inside
 * execute and the lifetime around it, so busy can exceed the lifetime only
 * by clock granularity; a zero lifetime with no busy time is an idle
 * sandbox, with some a busy one. */
static int64_t utilization_ppm(int64_t busy, int64_t lifetime)
{
	if (busy <= 0)
		return 0;
	if (busy >= lifetime)
		return PPM;
	return busy * PPM / lifetime;
}

static void on_event(void *arg, const airlock_exec_event *ev)
{
	service_metrics *m = arg;
	pthread_mutex_lock(&m->lock);
	counters *c = &m->c;
	switch (ev->kind) {
	case AIRLOCK_EXEC_EVENT_PROVISIONED:
		histogram_add(&mechanism_slot(c, ev->mechanism)->latency, latency_bounds_ms,
		              LATENCY_BUCKETS, ev->duration_ms > 0 ? ev->duration_ms : 0);
		break;
	case AIRLOCK_EXEC_EVENT_PROVISION_FAILED:
		c->provision_failures[errclass_index(ev->error)]++;
		break;
	case AIRLOCK_EXEC_EVENT_EXECUTED:
		/* The core's result check refuses a reason outside the
		 * vocabulary before the event; one that got past it anyway
		 * is not invented a label. */
		if ((unsigned)ev->killed_by < AIRLOCK_KILL__MAX)
			c->executions[ev->killed_by]++;
		break;
	case AIRLOCK_EXEC_EVENT_EXECUTE_FAILED:
		c->execute_failures[errclass_index(ev->error)]++;
		break;
	case AIRLOCK_EXEC_EVENT_DESTROYED:
		histogram_add(&mechanism_slot(c, ev->mechanism)->utilization, util_bounds_ppm,
		              UTIL_BUCKETS, utilization_ppm(ev->busy_ms, ev->duration_ms));
		c->destroyed[destroy_reason_index(ev->reason)]++;
		break;
	case AIRLOCK_EXEC_EVENT_DESTROY_FAILED:
		c->destroy_failures++;
		break;
	case AIRLOCK_EXEC_EVENT_INVALID:
	case AIRLOCK_EXEC_EVENT__MAX:
		pthread_mutex_unlock(&m->lock);
		return;
	}
	pthread_mutex_unlock(&m->lock);
	if (m->log_fd >= 0) {
		size_t len = 0;
		char *line = fitted_line(build_event, ev, &len);
		log_write(m, line, len);
		free(line);
	}
}

static const airlock_exec_observer metrics_observer = { .event = on_event };

const airlock_exec_observer *service_metrics_observer(void) { return &metrics_observer; }

/* A decision line is a parser's input from another process: one that does
 * not have the shape is counted, and nothing of it is kept. */
#define EGRESS_LINE_MAX 65536

/* Reads the tree, allocates nothing with jansson, keeps no pointer into it. */
static int egress_line_from(json_t *o, void *arg, airlock_error *err)
{
	(void)err;
	service_egress_line *l = arg;
	const char *out = json_string_value(json_object_get(o, "outcome"));
	const char *rsn = json_string_value(json_object_get(o, "reason"));
	json_t *cnt = json_object_get(o, "count");
	if (!out || !rsn)
		return 0;
	int outcome = -1;
	for (int i = 0; i < OUT__MAX; i++)
		if (strcmp(out, outcomes[i]) == 0)
			outcome = i;
	bool counted = json_is_integer(cnt) && json_integer_value(cnt) >= 0;
	if (counted)
		l->count = (uint64_t)json_integer_value(cnt);
	if (strcmp(out, "delayed") == 0 && strcmp(rsn, "RATE_LIMITED") == 0 && counted) {
		l->kind = SERVICE_EGRESS_DELAYED;
	} else if (outcome == OUT_FAILED && strcmp(rsn, "LOG_DROPPED") == 0 && counted) {
		l->kind = SERVICE_EGRESS_DROPPED;
	} else if (outcome >= 0) {
		l->kind = SERVICE_EGRESS_DECISION;
		l->outcome = outcome;
		l->reason = reason_index(rsn);
	}
	return 0;
}

int service_metrics_egress_line_decode(const char *line, size_t len, service_egress_line *ret,
                                       airlock_error *err)
{
	service_egress_line l = { .kind = SERVICE_EGRESS_MALFORMED, .reason = REASON_OTHER };
	if (!line || len == 0)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "egress decision line: empty");
	int r = core_json_decode(line, len, EGRESS_LINE_MAX, "egress decision line",
	                         egress_line_from, &l, err);
	if (r < 0)
		return r;
	*ret = l;
	return 0;
}

void service_metrics_egress_line(service_metrics *m, const char *line, size_t len)
{
	/* A line that does not decode (not JSON, over its memory budget, or
	 * out of memory) is counted as malformed like one of another shape. */
	service_egress_line l = { .kind = SERVICE_EGRESS_MALFORMED };
	if (service_metrics_egress_line_decode(line, len, &l, NULL) < 0)
		l.kind = SERVICE_EGRESS_MALFORMED;
	pthread_mutex_lock(&m->lock);
	switch (l.kind) {
	case SERVICE_EGRESS_DECISION: m->c.egress[l.outcome][l.reason]++; break;
	case SERVICE_EGRESS_DELAYED: m->c.egress_delayed += l.count; break;
	case SERVICE_EGRESS_DROPPED: m->c.egress_log_dropped += l.count; break;
	case SERVICE_EGRESS_MALFORMED: m->c.egress_malformed++; break;
	}
	pthread_mutex_unlock(&m->lock);
}

/* ---- following the proxy's log ----------------------------------------------- */

/* Each complete line in buf[0..*len): counted, and copied to the lifecycle
 * log when it fits one atomic write; what is left (a partial line) is moved
 * to the front. *skipping: the current line already overflowed (counted
 * once as malformed) and is discarded up to its end. */
static void follow_lines(service_metrics *m, char *buf, size_t *len, bool *skipping)
{
	size_t start = 0;
	for (;;) {
		char *nl = memchr(buf + start, '\n', *len - start);
		if (!nl)
			break;
		size_t n = (size_t)(nl - (buf + start));
		if (*skipping) {
			*skipping = false;
		} else {
			service_metrics_egress_line(m, buf + start, n);
			if (n + 1 <= LINE_MAX_BYTES)
				log_write(m, buf + start, n + 1);
			else
				log_write(m, NULL, 0);
		}
		start += n + 1;
	}
	memmove(buf, buf + start, *len - start);
	*len -= start;
	if (*len == EGRESS_LINE_MAX) {
		/* Full and no line end: not a decision line of the proxy's. */
		if (!*skipping)
			service_metrics_egress_line(m, NULL, 0);
		*skipping = true;
		*len = 0;
	}
}

static void *follow_main(void *arg)
{
	service_metrics *m = arg;
	char *buf = malloc(EGRESS_LINE_MAX);
	size_t len = 0;
	bool skipping = false;
	while (buf) {
		struct pollfd p[2] = { { .fd = m->follow_fd, .events = POLLIN },
			               { .fd = m->stop_efd, .events = POLLIN } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		ssize_t n = read(m->follow_fd, buf + len, EGRESS_LINE_MAX - len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			/* The proxy is gone: a last line without its newline is
			 * still a line. */
			if (len > 0 && !skipping) {
				buf[len] = '\n'; /* len < EGRESS_LINE_MAX: follow_lines emptied a full one */
				follow_lines(m, buf, &(size_t){ len + 1 }, &skipping);
			}
			break;
		}
		len += (size_t)n;
		follow_lines(m, buf, &len, &skipping);
	}
	free(buf);
	return NULL;
}

int service_metrics_egress_follow(service_metrics *m, int fd, airlock_error *err)
{
	if (m->following) {
		close(fd);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "the egress log is already followed");
	}
	m->follow_fd = fd;
	m->stop_efd = eventfd(0, EFD_CLOEXEC);
	if (m->stop_efd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "egress log follower");
	int r = pthread_create(&m->follow_thread, NULL, follow_main, m);
	if (r != 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, r, "egress log follower");
	m->following = true;
	return 0;
}

void service_metrics_orphan_reaped(service_metrics *m)
{
	pthread_mutex_lock(&m->lock);
	m->c.orphan_reaps++;
	pthread_mutex_unlock(&m->lock);
}

void service_metrics_log(service_metrics *m, const char *event, const char *message)
{
	if (m->log_fd < 0)
		return;
	service_line l = { .event = event, .message = message };
	size_t len = 0;
	char *line = fitted_line(build_service, &l, &len);
	log_write(m, line, len);
	free(line);
}

/* ---- the exposition (text format 0.0.4) ------------------------------------ */

/* A label value: backslash, double quote and line feed escaped as the
 * format requires. The values are from the tables above or checked
 * mechanism names, so this is the format's rule applied, not a filter. */
static void label_value(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '"')
			fputs("\\\"", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void one_label(FILE *f, const char *name, const char *label, const char *value,
                      uint64_t v)
{
	fprintf(f, "%s{%s=\"", name, label);
	label_value(f, value);
	fprintf(f, "\"} %" PRIu64 "\n", v);
}

/* sum in units of 1/scale, written as a decimal with exactly the digits
 * scale has (1000: ms as seconds, PPM: a ratio). */
static void histogram_series(FILE *f, const char *name, const char *mech, const histogram *h,
                             const char *const *bounds, size_t n, uint64_t scale,
                             int decimals)
{
	uint64_t cum = 0;
	for (size_t i = 0; i <= n; i++) {
		cum += h->bucket[i];
		fprintf(f, "%s_bucket{mechanism=\"", name);
		label_value(f, mech);
		fprintf(f, "\",le=\"%s\"} %" PRIu64 "\n", i < n ? bounds[i] : "+Inf", cum);
	}
	fprintf(f, "%s_sum{mechanism=\"", name);
	label_value(f, mech);
	fprintf(f, "\"} %" PRIu64 ".%0*" PRIu64 "\n", h->sum / scale, decimals, h->sum % scale);
	fprintf(f, "%s_count{mechanism=\"", name);
	label_value(f, mech);
	fprintf(f, "\"} %" PRIu64 "\n", h->count);
}

/* The mechanisms to write: the named slots, and "other" once used. */
static size_t mech_rows(const counters *c, size_t idx[METRICS_MECHANISMS_MAX])
{
	size_t n = 0;
	for (size_t i = 0; i < c->n_mech; i++)
		idx[n++] = i;
	if (c->other_used)
		idx[n++] = MECHANISM_OTHER;
	return n;
}

static const char *mech_name(const counters *c, size_t i)
{
	return i == MECHANISM_OTHER ? "other" : c->mech[i].name;
}

/* A family of one series without labels. */
static void scalar(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
	family(f, name, type, help);
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/* A counter by error class: every class of the specification at 0 and up;
 * the generic class (an event without an error object) once it counts. */
static void by_class(FILE *f, const char *name, const char *help,
                     const uint64_t v[AIRLOCK_ERR__MAX])
{
	family(f, name, "counter", help);
	for (size_t k = 1; k < AIRLOCK_ERR__MAX; k++)
		one_label(f, name, "class", airlock_errclass_name((airlock_errclass)k), v[k]);
	if (v[AIRLOCK_ERR_INVALID])
		one_label(f, name, "class", airlock_errclass_name(AIRLOCK_ERR_INVALID),
		          v[AIRLOCK_ERR_INVALID]);
}

static void render(FILE *f, const counters *c, size_t live)
{
	size_t idx[METRICS_MECHANISMS_MAX];
	size_t nm = mech_rows(c, idx);

	family(f, "airlock_sandbox_provision_duration_seconds", "histogram",
	       "Time a successful provision took, per mechanism.");
	for (size_t i = 0; i < nm; i++)
		histogram_series(f, "airlock_sandbox_provision_duration_seconds",
		                 mech_name(c, idx[i]), &c->mech[idx[i]].latency,
		                 latency_bounds_text, LATENCY_BUCKETS, 1000, 3);

	family(f, "airlock_sandbox_utilization_ratio", "histogram",
	       "Share of a destroyed sandbox's lifetime spent inside execute, per mechanism.");
	for (size_t i = 0; i < nm; i++)
		histogram_series(f, "airlock_sandbox_utilization_ratio", mech_name(c, idx[i]),
		                 &c->mech[idx[i]].utilization, util_bounds_text, UTIL_BUCKETS,
		                 PPM, 6);

	family(f, "airlock_sandbox_executions_total", "counter",
	       "Commands that produced a result, by kill reason (none: not killed).");
	for (size_t k = 0; k < AIRLOCK_KILL__MAX; k++) {
		const char *n = airlock_kill_reason_name((airlock_kill_reason)k);
		one_label(f, "airlock_sandbox_executions_total", "killed_by", n ? n : "none",
		          c->executions[k]);
	}

	by_class(f, "airlock_sandbox_execute_failures_total",
	         "Executes that produced no result, by error class.", c->execute_failures);
	by_class(f, "airlock_sandbox_provision_failures_total",
	         "Provisions refused or failed, by error class.", c->provision_failures);

	family(f, "airlock_sandbox_destroyed_total", "counter",
	       "Sandboxes destroyed, by why (request, expired, suspicion, shutdown).");
	for (size_t k = 0; k < DESTROY_REASONS; k++)
		one_label(f, "airlock_sandbox_destroyed_total", "reason", destroy_reasons[k],
		          c->destroyed[k]);

	scalar(f, "airlock_sandbox_destroy_failures_total", "counter",
	       "Destroys that failed (the sandbox's record stays for a retry).", c->destroy_failures);

	scalar(f, "airlock_sandboxes_live", "gauge", "Sandboxes provisioned and not destroyed.",
	       (uint64_t)live);

	scalar(f, "airlock_sandbox_orphan_reaps_total", "counter",
	       "Sandboxes destroyed because their worker's lease was gone.", c->orphan_reaps);

	family(f, "airlock_egress_decisions_total", "counter",
	       "Egress proxy connections by outcome and reason.");
	for (int o = 0; o < OUT__MAX; o++)
		for (size_t r = 0; r < REASONS; r++) {
			if (reason_outcome(r) != o && !c->egress[o][r])
				continue;
			fprintf(f, "airlock_egress_decisions_total{outcome=\"%s\",reason=\"", outcomes[o]);
			label_value(f, reason_name(r));
			fprintf(f, "\"} %" PRIu64 "\n", c->egress[o][r]);
		}

	scalar(f, "airlock_egress_delayed_connections_total", "counter",
	       "Connections held in the listen queue past a sandbox's accept rate.", c->egress_delayed);

	scalar(f, "airlock_egress_log_dropped_total", "counter",
	       "Decision lines the egress proxy dropped (its log queue was full).", c->egress_log_dropped);

	scalar(f, "airlock_egress_lines_malformed_total", "counter",
	       "Egress proxy log lines that were not a decision or did not decode.", c->egress_malformed);

	scalar(f, "airlock_lifecycle_log_lines_total", "counter",
	       "Lifecycle log lines written.", c->log_lines);

	scalar(f, "airlock_lifecycle_log_dropped_total", "counter",
	       "Lifecycle log lines not written (the log would have blocked or failed).", c->log_dropped);
}

char *service_metrics_render(service_metrics *m, size_t live, size_t *ret_len)
{
	/* A copy, so the formatting (and its allocations) happens without the
	 * lock; the struct is a few kilobytes of counters. */
	counters *snap = malloc(sizeof(*snap));
	if (!snap)
		return NULL;
	pthread_mutex_lock(&m->lock);
	*snap = m->c;
	pthread_mutex_unlock(&m->lock);

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f) {
		free(snap);
		return NULL;
	}
	render(f, snap, live);
	free(snap);
	bool bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		free(buf);
		return NULL;
	}
	if (ret_len)
		*ret_len = len;
	return buf;
}

/* ---- the operator listener ------------------------------------------------------- */

struct service_metrics_listener {
	service_metrics *m;
	size_t (*live_fn)(void *);
	void *live_arg;
	struct MHD_Daemon *daemon;
};

static enum MHD_Result metrics_answer(struct MHD_Connection *c, unsigned status, char *body,
                                      size_t len, const char *type)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	if (type)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	enum MHD_Result q = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return q;
}

/* Answered on the first call, before any body: a scrape has none, and
 * whatever a client sends with it is not read. */
static enum MHD_Result metrics_request(void *cls, struct MHD_Connection *c, const char *url,
                                       const char *method, const char *version,
                                       const char *upload, size_t *upload_size, void **req_cls)
{
	service_metrics_listener *l = cls;
	(void)version;
	(void)upload;
	(void)upload_size;
	(void)req_cls;
	if (strcmp(url, "/metrics") != 0)
		return metrics_answer(c, MHD_HTTP_NOT_FOUND, strdup("not found\n"), 10, "text/plain");
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return metrics_answer(c, MHD_HTTP_METHOD_NOT_ALLOWED, strdup("GET only\n"), 9,
		                      "text/plain");
	size_t len = 0;
	char *text = service_metrics_render(l->m, l->live_fn ? l->live_fn(l->live_arg) : 0, &len);
	if (!text)
		return MHD_NO;
	return metrics_answer(c, MHD_HTTP_OK, text, len, "text/plain; version=0.0.4; charset=utf-8");
}

int service_metrics_listener_new(service_metrics *m, int listen_fd, size_t (*live_fn)(void *),
                                 void *live_arg, service_metrics_listener **ret,
                                 airlock_error *err)
{
	service_metrics_listener *l = calloc(1, sizeof(*l));
	if (!l) {
		close(listen_fd);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "metrics listener");
	}
	*l = (service_metrics_listener){ .m = m, .live_fn = live_fn, .live_arg = live_arg };
	/* One polling thread: a scrape is a copy and a format, and a slow
	 * client costs a connection slot (16), never a thread. */
	l->daemon = MHD_start_daemon(
	        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL, metrics_request, l,
	        MHD_OPTION_LISTEN_SOCKET, listen_fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)16,
	        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	        (size_t)16384, MHD_OPTION_END);
	if (!l->daemon) {
		close(listen_fd);
		free(l);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "the metrics listener did not start");
	}
	*ret = l;
	return 0;
}

void service_metrics_listener_free(service_metrics_listener *l)
{
	if (!l)
		return;
	/* Closes the listening socket too. */
	MHD_stop_daemon(l->daemon);
	free(l);
}
