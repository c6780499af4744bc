/* SPDX-License-Identifier: Apache-2.0 */
/* Bytes both ways between two stream sockets (relay.h). */
#include "util/relay.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* One direction: bytes read from `from` wait in buf[off, len) for `to`. */
typedef struct relay_dir {
	int from, to;
	unsigned char *buf;
	size_t off, len;
	bool eof;  /* `from` reached end of file */
	bool done; /* and everything was written and `to` shut for writing */
} relay_dir;

/* Writes what `to` takes now; at end of file with nothing left, shuts `to`
 * for writing once. 0, or -errno. */
static int dir_flush(relay_dir *d)
{
	while (d->off < d->len) {
		ssize_t n = send(d->to, d->buf + d->off, d->len - d->off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
		}
		d->off += (size_t)n;
	}
	d->off = d->len = 0;
	if (d->eof && !d->done) {
		/* ENOTCONN: the peer is gone already, which ends this direction too. */
		if (shutdown(d->to, SHUT_WR) < 0 && errno != ENOTCONN)
			return -errno;
		d->done = true;
	}
	return 0;
}

/* Reads one chunk into an empty buffer. 0, or -errno. */
static int dir_fill(relay_dir *d)
{
	for (;;) {
		ssize_t n = recv(d->from, d->buf, UTIL_RELAY_BUFFER, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
		}
		if (n == 0)
			d->eof = true;
		d->len = (size_t)n;
		return 0;
	}
}

/* The events this direction waits for on its two descriptors. */
static void dir_events(const relay_dir *d, short *from_ev, short *to_ev)
{
	if (d->done)
		return;
	if (d->len > d->off || d->eof)
		*to_ev |= POLLOUT;
	else
		*from_ev |= POLLIN;
}

int util_relay(int a, int b, int stop_fd, const void *pending, size_t pending_len)
{
	if (pending_len > UTIL_RELAY_BUFFER)
		return -EINVAL;
	unsigned char *mem = malloc(2 * (size_t)UTIL_RELAY_BUFFER);
	if (!mem)
		return -ENOMEM;
	relay_dir d[2] = {
		{ .from = a, .to = b, .buf = mem },
		{ .from = b, .to = a, .buf = mem + UTIL_RELAY_BUFFER },
	};
	if (pending_len) {
		memcpy(d[0].buf, pending, pending_len);
		d[0].len = pending_len;
	}
	int r = 0;
	while (!(d[0].done && d[1].done)) {
		/* Whatever can move without waiting moves first. */
		for (int i = 0; i < 2 && r == 0; i++)
			if (!d[i].done)
				r = dir_flush(&d[i]);
		if (r < 0 || (d[0].done && d[1].done))
			break;
		short ev_a = 0, ev_b = 0;
		dir_events(&d[0], &ev_a, &ev_b);
		dir_events(&d[1], &ev_b, &ev_a);
		/* A descriptor is polled only for what it is waited on for, and
		 * for its hang-up once nothing more will be read from it while
		 * bytes may still go to it: a hang-up is reported whether asked
		 * for or not, and one on a descriptor nobody waits on would spin
		 * this loop. */
		struct pollfd p[3] = {
			{ .fd = ev_a || (d[0].done && !d[1].done) ? a : -1, .events = ev_a },
			{ .fd = ev_b || (d[1].done && !d[0].done) ? b : -1, .events = ev_b },
			{ .fd = stop_fd, .events = POLLIN },
		};
		if (poll(p, stop_fd >= 0 ? 3 : 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (stop_fd >= 0 && p[2].revents) {
			r = 1;
			break;
		}
		/* POLLERR/POLLHUP with nothing to read surface as the recv's or
		 * send's own error or end of file below. */
		for (int i = 0; i < 2 && r == 0; i++) {
			short rev = p[i].revents;
			if (!d[i].done && d[i].len == 0 && !d[i].eof && (rev & (POLLIN | POLLHUP | POLLERR)))
				r = dir_fill(&d[i]);
		}
		if (r < 0)
			break;
		/* A side that sent its end of file and then hung up is gone: what
		 * the other side would still send it has nowhere to go. */
		if ((d[0].done && !d[1].done && (p[0].revents & (POLLHUP | POLLERR)) && !ev_a) ||
		    (d[1].done && !d[0].done && (p[1].revents & (POLLHUP | POLLERR)) && !ev_b))
			break;
	}
	free(mem);
	return r;
}
