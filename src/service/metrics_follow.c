/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Following the egress proxy's log: a thread reads its decision lines,
 * counts each (service_metrics_egress_line) and copies it to the lifecycle
 * log when it fits one atomic write; a line longer than the cap is counted
 * once as malformed and skipped to its end.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "service/metrics_state.h"
#include "util/util.h"

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
				metrics_log_write(m, buf + start, n + 1);
			else
				metrics_log_write(m, NULL, 0);
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
