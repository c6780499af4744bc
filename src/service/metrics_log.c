/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's lifecycle log: one JSON line per lifecycle event or service
 * message, at most PIPE_BUF bytes (untrusted strings in it cut to fit),
 * written with one write(2) that never waits.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "core/json_internal.h"
#include "service/metrics_state.h"
#include "util/util.h"

#define _cleanup_json_ __attribute__((cleanup(json_decrefp)))

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
char *metrics_fitted_line(char *(*build)(const void *arg, size_t cap), const void *arg,
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

char *metrics_build_event(const void *arg, size_t cap) { return event_line(arg, cap); }

typedef struct service_line {
	const char *level; /* NULL: none written */
	const char *event;
	const char *message;
} service_line;

static char *build_service(const void *arg, size_t cap)
{
	const service_line *l = arg;
	_cleanup_json_ json_t *o = json_object();
	if (!o || put(o, "ts_ms", json_integer(util_now_ms())) < 0 ||
	    (l->level && put(o, "level", untrusted(l->level, 16)) < 0) ||
	    put(o, "event", untrusted(l->event, 64)) < 0 ||
	    put(o, "message", untrusted(l->message, 2 * cap)) < 0)
		return NULL;
	return json_dumps(o, JSON_COMPACT);
}

/* One write(2) that never waits: the descriptor is non-blocking (or a
 * socket written with MSG_DONTWAIT), so a log reader that stopped reading
 * costs the service a dropped line, counted, and nothing else. */
void metrics_log_write(service_metrics *m, const char *line, size_t len)
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

/* The descriptor the lines go to, made non-blocking without changing the
 * caller's: O_NONBLOCK is a flag of the open file description, which a
 * dup shares (setting it on a dup of the service's stderr would make the
 * service's own writes to stderr fail with EAGAIN), so a pipe, FIFO or
 * terminal is opened anew through /proc/self/fd, which gives a new
 * description of the same pipe. A socket needs no flag (send takes
 * MSG_DONTWAIT). A regular file does not block on a reader and keeps the
 * caller's offset and O_APPEND only through a dup. */
int metrics_log_open(int fd, bool *ret_send)
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

void service_metrics_log(service_metrics *m, const char *event, const char *message)
{
	service_metrics_log_level(m, NULL, event, message);
}

void service_metrics_log_level(service_metrics *m, const char *level, const char *event,
                               const char *message)
{
	if (m->log_fd < 0)
		return;
	service_line l = { .level = level, .event = event, .message = message };
	size_t len = 0;
	char *line = metrics_fitted_line(build_service, &l, &len);
	metrics_log_write(m, line, len);
	free(line);
}
