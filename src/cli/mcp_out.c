/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock mcp's stdout (cli/mcp.h): one writer thread and a queue.
 *
 * Every other thread only queues a message and goes on: the main thread
 * (which also watches the signals and stdin), the call's thread and the
 * command's output reader never wait on the client. A client that stops
 * reading therefore cannot hold up a command's timeout, a signal, stdin's
 * end or the sandbox's destruction; what it costs is bounded instead:
 *
 *   - progress is dropped while more than AIRLOCK_MCP_OUT_PROGRESS_MAX
 *     bytes wait (progress is advisory; the result carries the output);
 *   - the main thread stops reading requests while more than
 *     AIRLOCK_MCP_OUT_MAX bytes wait, so answers cannot pile up faster
 *     than the client takes them (each request makes at most one answer);
 *   - a client that takes no byte for the stall time while answers wait
 *     is treated as gone, as one whose pipe is closed is.
 *
 * The writer waits for room with poll and writes at most PIPE_BUF bytes
 * at a time: a pipe that polls writable has a free buffer of at least
 * that, so a write into the client's pipe does not block and the thread
 * stays free to notice a stop. The descriptor's flags are left alone
 * (O_NONBLOCK on it would change the client's side of a shared file
 * description, a terminal's among them).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "cli/mcp.h"

typedef struct out_msg {
	struct out_msg *next;
	size_t len, off;
	char data[];
} out_msg;

struct mcp_out {
	int fd;
	int64_t stall_ms;
	int wake_efd;  /* the writer's: a message was queued, or stop */
	int event_efd; /* the main thread's: the client is gone, or the queue fell under its cap */
	pthread_t thread;
	bool thread_started;

	pthread_mutex_t lock;
	out_msg *head, *tail;
	size_t queued;        /* bytes not yet written */
	int64_t last_moved;   /* ms: a byte went out, or the queue stopped being empty */
	bool stop;            /* the writer ends now, written or not */
	bool was_full;        /* queued was over AIRLOCK_MCP_OUT_MAX */
	atomic_bool gone;     /* a write failed or the client stalled: nothing more goes out */
	uint64_t dropped;     /* progress messages dropped while the queue was long */
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void efd_post(int fd)
{
	uint64_t one = 1;
	ssize_t w = write(fd, &one, sizeof(one));
	(void)w; /* a counter at its maximum is still readable: the wake is not lost */
}

static void efd_drain(int fd)
{
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));
	(void)r;
}

/* The client is gone: the queue is dropped (nobody will read it) and the
 * main thread told. Called with o->lock held. */
static void set_gone(mcp_out *o, const char *why)
{
	if (atomic_exchange(&o->gone, true))
		return;
	for (out_msg *m = o->head, *next; m; m = next) {
		next = m->next;
		free(m);
	}
	o->head = o->tail = NULL;
	o->queued = 0;
	fprintf(stderr, "airlock mcp: the client's stdout: %s; the session ends\n", why);
	efd_post(o->event_efd);
}

static void *writer_main(void *arg)
{
	mcp_out *o = arg;
	pthread_mutex_lock(&o->lock);
	while (!o->stop && !atomic_load(&o->gone)) {
		out_msg *m = o->head;
		int64_t deadline = o->last_moved + o->stall_ms;
		pthread_mutex_unlock(&o->lock);
		struct pollfd p[2] = { { .fd = o->wake_efd, .events = POLLIN },
			               { .fd = o->fd, .events = POLLOUT } };
		int64_t left = deadline - now_ms();
		int timeout = !m ? -1 : left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
		int r = poll(p, m ? 2 : 1, timeout);
		pthread_mutex_lock(&o->lock);
		if (r < 0 && errno != EINTR) {
			set_gone(o, strerror(errno));
			break;
		}
		if (r <= 0) {
			if (r == 0)
				set_gone(o, "nothing was read while answers waited (--stall-timeout)");
			continue;
		}
		if (p[0].revents)
			efd_drain(o->wake_efd);
		if (!m || !p[1].revents || o->stop)
			continue;
		if (!(p[1].revents & POLLOUT)) {
			set_gone(o, "closed");
			break;
		}
		/* m is still the head: only this thread removes messages, and
		 * set_gone (which frees them) ends this loop. */
		size_t n = m->len - m->off;
		if (n > PIPE_BUF)
			n = PIPE_BUF;
		pthread_mutex_unlock(&o->lock);
		ssize_t w = write(o->fd, m->data + m->off, n);
		int e = errno;
		pthread_mutex_lock(&o->lock);
		if (w < 0 && (e == EINTR || e == EAGAIN))
			continue;
		if (w <= 0) {
			set_gone(o, w < 0 ? strerror(e) : "a write took no byte");
			break;
		}
		m->off += (size_t)w;
		o->queued -= (size_t)w;
		o->last_moved = now_ms();
		if (m->off == m->len) {
			o->head = m->next;
			if (!o->head)
				o->tail = NULL;
			free(m);
		}
		if (o->was_full && o->queued <= AIRLOCK_MCP_OUT_MAX) {
			o->was_full = false;
			efd_post(o->event_efd);
		}
	}
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

int mcp_out_start(int fd, int stall_s, mcp_out **ret)
{
	*ret = NULL;
	mcp_out *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->fd = fd;
	o->stall_ms = (int64_t)stall_s * 1000;
	o->wake_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	o->event_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	atomic_init(&o->gone, false);
	int e = o->wake_efd < 0 || o->event_efd < 0 ? errno : pthread_mutex_init(&o->lock, NULL);
	if (e == 0) {
		e = pthread_create(&o->thread, NULL, writer_main, o);
		o->thread_started = e == 0;
		if (e)
			pthread_mutex_destroy(&o->lock);
	}
	if (e) {
		if (o->wake_efd >= 0)
			close(o->wake_efd);
		if (o->event_efd >= 0)
			close(o->event_efd);
		free(o);
		return -e;
	}
	*ret = o;
	return 0;
}

bool mcp_out_send(mcp_out *o, json_t *msg, bool droppable)
{
	/* JSON_ALLOW_NUL is the decoder's flag; the encoder writes a NUL in a
	 * string as \u0000 on its own, so a command's output keeps it. */
	char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	if (!text) {
		fputs("airlock mcp: a message could not be encoded (out of memory)\n", stderr);
		return false;
	}
	size_t n = strlen(text);
	out_msg *m = malloc(sizeof(*m) + n + 1);
	if (!m) {
		free(text);
		fputs("airlock mcp: a message could not be queued (out of memory)\n", stderr);
		return false;
	}
	memcpy(m->data, text, n);
	m->data[n] = '\n';
	free(text);
	m->next = NULL;
	m->len = n + 1;
	m->off = 0;
	pthread_mutex_lock(&o->lock);
	bool take = !atomic_load(&o->gone) && !o->stop &&
	            !(droppable && o->queued > AIRLOCK_MCP_OUT_PROGRESS_MAX);
	if (take) {
		if (!o->head)
			o->last_moved = now_ms(); /* the stall counts from when there is something to say */
		if (o->tail)
			o->tail->next = m;
		else
			o->head = m;
		o->tail = m;
		o->queued += m->len;
		if (o->queued > AIRLOCK_MCP_OUT_MAX)
			o->was_full = true;
	} else if (droppable) {
		o->dropped++;
	}
	pthread_mutex_unlock(&o->lock);
	if (!take) {
		free(m);
		return false;
	}
	efd_post(o->wake_efd);
	return true;
}

bool mcp_out_full(mcp_out *o)
{
	pthread_mutex_lock(&o->lock);
	bool full = o->queued > AIRLOCK_MCP_OUT_MAX;
	pthread_mutex_unlock(&o->lock);
	return full;
}

bool mcp_out_gone(mcp_out *o)
{
	return atomic_load(&o->gone);
}

int mcp_out_event_fd(mcp_out *o)
{
	return o->event_efd;
}

void mcp_out_event_clear(mcp_out *o)
{
	efd_drain(o->event_efd);
}

bool mcp_out_end(mcp_out *o, int flush_s, int stop_fd)
{
	if (!o)
		return true;
	/* What is queued gets flush_s to reach the client, or until stop_fd
	 * (the signals) is readable: a second signal does not wait. */
	int64_t deadline = now_ms() + (int64_t)flush_s * 1000;
	for (;;) {
		pthread_mutex_lock(&o->lock);
		bool done = !o->head || atomic_load(&o->gone);
		pthread_mutex_unlock(&o->lock);
		int64_t left = deadline - now_ms();
		if (done || left <= 0)
			break;
		struct pollfd p = { .fd = stop_fd, .events = POLLIN };
		if (poll(&p, stop_fd >= 0 ? 1 : 0, left < 50 ? (int)left : 50) > 0)
			break;
	}
	pthread_mutex_lock(&o->lock);
	o->stop = true;
	size_t left = o->queued;
	uint64_t dropped = o->dropped;
	pthread_mutex_unlock(&o->lock);
	efd_post(o->wake_efd);
	if (left > 0 && !atomic_load(&o->gone))
		fprintf(stderr, "airlock mcp: %zu bytes of answers were not read by the client\n",
		        left);
	if (dropped > 0)
		fprintf(stderr, "airlock mcp: %llu progress notifications were dropped while the "
		                "client was slow to read\n", (unsigned long long)dropped);
	/* The writer is between polls or in a write of at most PIPE_BUF
	 * bytes into room poll reported, and sees stop promptly. A descriptor
	 * whose write can block even so (a terminal stopped by ^S) leaves the
	 * thread where it is: the process is ending, and waiting on it would
	 * be the hang this file exists to prevent. */
	if (o->thread_started) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		if (pthread_timedjoin_np(o->thread, NULL, &ts) != 0) {
			fputs("airlock mcp: the client's stdout does not take a write; left as it is\n",
			      stderr);
			return false;
		}
	}
	for (out_msg *m = o->head, *next; m; m = next) {
		next = m->next;
		free(m);
	}
	pthread_mutex_destroy(&o->lock);
	close(o->wake_efd);
	close(o->event_efd);
	free(o);
	return true;
}
