/* SPDX-License-Identifier: Apache-2.0 */
/* A listener planted in another network namespace (netns.h). */
#include "host/netns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct plant {
	int pidfd; /* a process whose network namespace is the target */
	const char *addr;
	in_port_t port;
	int backlog;
	int fd; /* the listener, or -1 */
	int err;
	const char *step;
} plant;

/* Runs on a thread of its own: setns(CLONE_NEWNET) changes only the calling
 * thread, so the service's other threads never see the sandbox's namespace,
 * and if returning to ours fails this thread ends without running anything
 * else there. */
static void *plant_thread(void *arg)
{
	plant *p = arg;
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0) {
		p->err = errno, p->step = "open our network namespace";
		return NULL;
	}
	if (setns(p->pidfd, CLONE_NEWNET) < 0) {
		p->err = errno, p->step = "setns into the sandbox";
		close(self);
		return NULL;
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(p->port) };
	inet_pton(AF_INET, p->addr, &sa.sin_addr);
	if (fd < 0)
		p->err = errno, p->step = "socket";
	else if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		p->err = errno, p->step = "bind";
	else if (listen(fd, p->backlog) < 0)
		p->err = errno, p->step = "listen";
	if (setns(self, CLONE_NEWNET) < 0 && !p->err)
		p->err = errno, p->step = "setns back";
	close(self);
	if (p->err && fd >= 0)
		close(fd);
	else
		p->fd = fd;
	return NULL;
}

int host_netns_listen(int ns_pidfd, const char *addr, in_port_t port, int backlog,
                      int *ret_fd, const char **ret_step)
{
	plant p = { .pidfd = ns_pidfd, .addr = addr, .port = port, .backlog = backlog, .fd = -1 };
	pthread_t t;
	int e = pthread_create(&t, NULL, plant_thread, &p);
	if (e != 0) {
		*ret_step = NULL;
		return -e;
	}
	pthread_join(t, NULL);
	if (p.fd < 0) {
		*ret_step = p.step;
		return -p.err;
	}
	*ret_fd = p.fd;
	return 0;
}

int host_netns_loopback_up(void)
{
	/* A fresh network namespace has only lo, and it is down; bring it up
	 * so programs that talk to themselves work. Nothing else exists to
	 * reach. */
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	int r = 0;
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		r = -errno;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (r == 0 && ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		r = -errno;
	close(s);
	return r;
}
