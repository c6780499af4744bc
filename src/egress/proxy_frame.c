/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control channel's frames (src/egress/proxy_internal.h), spoken by both
 * ends: the service's handle (proxy_ctl.c) and the proxy process
 * (proxy_loop.h, proxy_main.c), which is its own executable and links this file, not the
 * library.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "egress/proxy_internal.h"
#include "util/util.h"

int proxy_frame_send(int sock, const char *body, size_t len, int fd)
{
	if (len > AIRLOCK_PROXY_FRAME_MAX)
		return -EMSGSIZE;
	uint32_t hdr = (uint32_t)len;
	struct iovec iov[2] = {
		{ .iov_base = &hdr, .iov_len = sizeof(hdr) },
		{ .iov_base = (void *)(uintptr_t)body, .iov_len = len },
	};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	size_t total = sizeof(hdr) + len, sent = 0;
	while (sent < total) {
		ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		sent += (size_t)n;
		/* The descriptor went with the first byte; the rest is plain. */
		msg.msg_control = NULL;
		msg.msg_controllen = 0;
		size_t skip = (size_t)n;
		while (msg.msg_iovlen > 0 && skip >= msg.msg_iov[0].iov_len) {
			skip -= msg.msg_iov[0].iov_len;
			msg.msg_iov++;
			msg.msg_iovlen--;
		}
		if (msg.msg_iovlen > 0) {
			msg.msg_iov[0].iov_base = (char *)msg.msg_iov[0].iov_base + skip;
			msg.msg_iov[0].iov_len -= skip;
		}
	}
	return 0;
}

static int wait_readable(int sock, int64_t deadline)
{
	for (;;) {
		int t = -1;
		if (deadline >= 0) {
			int64_t left = deadline - util_monotonic_ms();
			if (left <= 0)
				return -ETIMEDOUT;
			t = left > 60000 ? 60000 : (int)left;
		}
		struct pollfd p = { .fd = sock, .events = POLLIN };
		int r = poll(&p, 1, t);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

/* Read exactly len bytes; the first read may carry a descriptor. */
static int read_full(int sock, void *buf, size_t len, int64_t deadline, int *ret_fd)
{
	size_t got = 0;
	while (got < len) {
		int r = wait_readable(sock, deadline);
		if (r < 0)
			return r;
		struct iovec iov = { .iov_base = (char *)buf + got, .iov_len = len - got };
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
		if (ret_fd) {
			msg.msg_control = u.b;
			msg.msg_controllen = sizeof(u.b);
		}
		ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		if (ret_fd) {
			for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
				if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
				    c->cmsg_len == CMSG_LEN(sizeof(int))) {
					int fd;
					memcpy(&fd, CMSG_DATA(c), sizeof(int));
					if (*ret_fd >= 0)
						close(fd); /* one descriptor per frame */
					else
						*ret_fd = fd;
				}
			if (msg.msg_flags & MSG_CTRUNC)
				return -EPROTO;
		}
		got += (size_t)n;
	}
	return 0;
}

int proxy_frame_recv(int sock, int64_t timeout_ms, char **ret, size_t *ret_len, int *ret_fd)
{
	int64_t deadline = timeout_ms < 0 ? -1 : util_monotonic_ms() + timeout_ms;
	int fd = -1;
	uint32_t hdr;
	int r = read_full(sock, &hdr, sizeof(hdr), deadline, &fd);
	if (r == 0 && hdr > AIRLOCK_PROXY_FRAME_MAX)
		r = -EMSGSIZE;
	if (r == 0 && fd >= 0 && !ret_fd)
		r = -EPROTO;
	char *body = NULL;
	if (r == 0 && !(body = malloc((size_t)hdr + 1)))
		r = -ENOMEM;
	if (r == 0)
		r = read_full(sock, body, hdr, deadline, NULL);
	if (r < 0) {
		free(body);
		if (fd >= 0)
			close(fd);
		return r;
	}
	body[hdr] = '\0';
	*ret = body;
	*ret_len = hdr;
	if (ret_fd)
		*ret_fd = fd;
	return 0;
}

