/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's outbound guard (the specification, "The egress boundary"):
 * a connection the platform makes on a tenant's behalf (an MCP server, a
 * webhook, a fetch) goes through the one evaluation function, and then to
 * the one address that function checked. Nothing here decides anything the
 * evaluation function decides, and nothing here looks a name up: a second
 * resolution could answer differently (DNS rebinding).
 */
#include "airlock/egress.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "egress/dial.h"
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
		int soerr = 0;
		socklen_t len = sizeof(soerr);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
			return errno;
		return soerr;
	}
}

int egress_dial(const airlock_addr *a, uint16_t port, int64_t timeout_ms, int *ret_fd)
{
	struct sockaddr_storage ss;
	socklen_t sslen = dial_sockaddr(a, port, &ss);
	if (sslen == 0)
		return -EAFNOSUPPORT;
	/* Close-on-exec: a program started later must not inherit a
	 * connection it was never checked for. Non-blocking only for the
	 * connect, so the timeout holds. */
	_cleanup_close_ int fd =
		socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_TCP);
	if (fd < 0)
		return -errno;
	/* Exactly the checked address and port: no name is looked up here. */
	int e = 0;
	if (connect(fd, (struct sockaddr *)&ss, sslen) < 0) {
		e = errno;
		if (e == EINPROGRESS || e == EINTR)
			e = connect_wait(fd, timeout_ms);
	}
	if (e != 0)
		return -e;
	/* The caller gets an ordinary blocking socket. */
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return -errno;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int airlock_egress_guard_connect(const airlock_egress_policy *p, airlock_egress_resolve_fn resolve,
                                 void *resolve_ctx, const char *host, uint16_t port,
                                 int64_t timeout_ms, int *ret_fd,
                                 airlock_egress_decision *ret_decision, airlock_error *err)
{
	if (!ret_fd || !ret_decision)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "egress guard");
	*ret_fd = -1;

	/* The one evaluation function: the name, the policy, one resolution,
	 * every address against the denylist, the address to dial. */
	int r = airlock_egress_evaluate(p, host, port, resolve, resolve_ctx, ret_decision, err);
	if (r < 0)
		return r;
	if (!ret_decision->allow)
		return 0; /* a refusal is an answer: no socket was made */

	const airlock_egress_decision *d = ret_decision;
	if (!d->has_dial || (d->dial.family != AF_INET && d->dial.family != AF_INET6))
		/* An allowed decision always names the address to dial; one that
		 * does not is a bug, and nothing is dialed. */
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "egress guard: %s: allowed without an address to dial",
		                         d->host);

	int fd = -1;
	int e = egress_dial(&d->dial, d->port, timeout_ms, &fd);
	if (e < 0) {
		char addr[46];
		airlock_addr_format(&d->dial, addr);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "egress guard: connect to %s port %u (%s): %s", d->host,
		                         (unsigned)d->port, addr, strerror(-e));
	}
	*ret_fd = fd;
	return 0;
}
