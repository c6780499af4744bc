/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one dial (egress/dial.h), shared by the service's proxy and the
 * worker's outbound guard: both connect to exactly the address the
 * evaluation function checked, and neither looks a name up again.
 */
#include "egress/dial.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "util/util.h"

/* The checked address and port as a socket address. */
static socklen_t dial_sockaddr(const airlock_addr *a, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		sin->sin_addr = a->v4;
		return sizeof(*sin);
	}
	if (a->family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		sin6->sin6_addr = a->v6;
		return sizeof(*sin6);
	}
	return 0;
}

/* Wait for a non-blocking connect to finish: 0, or a positive errno. A
 * timeout of 0 or less waits as long as the kernel does. */
static int connect_wait(int fd, int64_t timeout_ms)
{
	int64_t deadline = timeout_ms > 0 ? util_monotonic_ms() + timeout_ms : 0;

	for (;;) {
		int wait_ms = -1;
		if (timeout_ms > 0) {
			int64_t left = deadline - util_monotonic_ms();
			if (left <= 0)
				return ETIMEDOUT;
			wait_ms = left > INT_MAX ? INT_MAX : (int)left;
		}
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		int r = poll(&pfd, 1, wait_ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno;
		if (r == 0)
			return ETIMEDOUT;
		return egress_dial_result(fd);
	}
}

int egress_dial_start(const airlock_addr *a, uint16_t port, int *ret_fd)
{
	struct sockaddr_storage ss;
	socklen_t sslen = dial_sockaddr(a, port, &ss);
	if (sslen == 0)
		return -EAFNOSUPPORT;
	/* Close-on-exec: a program started later must not inherit a
	 * connection it was never checked for. Non-blocking for the connect,
	 * so the caller's timeout holds. */
	_cleanup_close_ int fd =
		socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_TCP);
	if (fd < 0)
		return -errno;
	/* Exactly the checked address and port: no name is looked up here. */
	int e = 0;
	if (connect(fd, (struct sockaddr *)&ss, sslen) < 0) {
		e = errno;
		/* Interrupted, the connect goes on in the background like one
		 * in progress (connect(2)). */
		if (e == EINTR)
			e = EINPROGRESS;
		if (e != EINPROGRESS)
			return -e;
	}
	*ret_fd = TAKE_FD(fd);
	return e ? -e : 0;
}

int egress_dial_result(int fd)
{
	int soerr = 0;
	socklen_t len = sizeof(soerr);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		return errno;
	return soerr;
}

int egress_dial(const airlock_addr *a, uint16_t port, int64_t timeout_ms, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	int e = egress_dial_start(a, port, &fd);
	if (e == -EINPROGRESS)
		e = -connect_wait(fd, timeout_ms);
	if (e != 0)
		return e;
	/* The caller gets an ordinary blocking socket. */
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return -errno;
	*ret_fd = TAKE_FD(fd);
	return 0;
}
