/* SPDX-License-Identifier: Apache-2.0 */
/* A listener planted in another network namespace, and the limits set in
 * it (netns.h). */
#include "host/netns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "util/fault.h"

/* Work done inside another network namespace, on a thread of its own:
 * setns(CLONE_NEWNET) changes only the calling thread, so the service's
 * other threads never see the sandbox's namespace, and if returning to ours
 * fails this thread ends without running anything else there. */
typedef struct netns_job {
	int pidfd; /* a process whose network namespace is the target */
	int (*fn)(void *arg, const char **step); /* 0 or -errno, naming the step */
	void *arg;
	int err; /* positive errno, or 0 */
	const char *step;
} netns_job;

static void *netns_thread(void *arg)
{
	netns_job *j = arg;
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0) {
		j->err = errno, j->step = "open our network namespace";
		return NULL;
	}
	if (UTIL_FAULT_CALL("netns.setns", setns(j->pidfd, CLONE_NEWNET)) < 0) {
		j->err = errno, j->step = "setns into the sandbox";
		close(self);
		return NULL;
	}
	int r = j->fn(j->arg, &j->step);
	if (r < 0)
		j->err = -r;
	if (setns(self, CLONE_NEWNET) < 0 && !j->err)
		j->err = errno, j->step = "setns back";
	close(self);
	return NULL;
}

/* 0, or -errno with *ret_step naming what failed (NULL: the thread could
 * not be started). */
static int netns_run(int ns_pidfd, int (*fn)(void *, const char **), void *arg,
                     const char **ret_step)
{
	netns_job j = { .pidfd = ns_pidfd, .fn = fn, .arg = arg };
	pthread_t t;
	int e = pthread_create(&t, NULL, netns_thread, &j);
	if (e != 0) {
		*ret_step = NULL;
		return -e;
	}
	pthread_join(t, NULL);
	if (j.err) {
		*ret_step = j.step ? j.step : "network namespace";
		return -j.err;
	}
	return 0;
}

typedef struct plant {
	const char *addr;
	in_port_t port;
	int backlog;
	int fd; /* the listener, or -1 */
} plant;

static int plant_listener(void *arg, const char **step)
{
	plant *p = arg;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		*step = "socket";
		return -errno;
	}
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(p->port) };
	inet_pton(AF_INET, p->addr, &sa.sin_addr);
	int r = 0;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		r = -errno, *step = "bind";
	else if (listen(fd, p->backlog) < 0)
		r = -errno, *step = "listen";
	if (r < 0)
		close(fd);
	else
		p->fd = fd;
	return r;
}

int host_netns_listen(int ns_pidfd, const char *addr, in_port_t port, int backlog,
                      int *ret_fd, const char **ret_step)
{
	plant p = { .addr = addr, .port = port, .backlog = backlog, .fd = -1 };
	int r = netns_run(ns_pidfd, plant_listener, &p, ret_step);
	if (r < 0) {
		if (p.fd >= 0) /* made, but the thread could not return */
			close(p.fd);
		return r;
	}
	*ret_fd = p.fd;
	return 0;
}

/* ---- the namespace's limits on what a socket holds outside its cgroup ---- */

/* lo's MTU and GSO size, in one RTM_NEWLINK request: the MTU alone does not
 * bound a TCP packet on lo (TCP builds GSO packets up to the device's GSO
 * size, and lo passes them whole), so both are set. */
static int harden_lo(const char **step)
{
	int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (s < 0) {
		*step = "netlink socket";
		return -errno;
	}
	struct {
		struct nlmsghdr nh;
		struct ifinfomsg ifi;
		struct rtattr mtu_a;
		uint32_t mtu;
		struct rtattr gso_a;
		uint32_t gso;
	} req;
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = sizeof(req);
	req.nh.nlmsg_type = RTM_NEWLINK;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	req.nh.nlmsg_seq = 1;
	req.ifi.ifi_family = AF_UNSPEC;
	/* lo is always index 1 (LOOPBACK_IFINDEX) in every network namespace. */
	req.ifi.ifi_index = 1;
	req.mtu_a.rta_type = IFLA_MTU;
	req.mtu_a.rta_len = RTA_LENGTH(sizeof(uint32_t));
	req.mtu = AIRLOCK_SANDBOX_LO_MTU;
	req.gso_a.rta_type = IFLA_GSO_MAX_SIZE;
	req.gso_a.rta_len = RTA_LENGTH(sizeof(uint32_t));
	req.gso = AIRLOCK_SANDBOX_LO_MTU;
	_Static_assert(sizeof(req) == NLMSG_LENGTH(sizeof(struct ifinfomsg)) +
	                                      2 * RTA_SPACE(sizeof(uint32_t)),
	               "the request is packed as netlink lays it out");
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	int r = 0;
	if (sendto(s, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
		r = -errno, *step = "netlink: set lo's MTU";
	} else {
		/* The acknowledgement: an NLMSG_ERROR whose error is 0 or -errno. */
		union {
			struct nlmsghdr nh;
			char buf[1024];
		} ack;
		ssize_t n = recv(s, &ack, sizeof(ack), 0);
		if (n < 0)
			r = -errno, *step = "netlink: read the acknowledgement";
		else if ((size_t)n < NLMSG_LENGTH(sizeof(struct nlmsgerr)) ||
		         ack.nh.nlmsg_type != NLMSG_ERROR)
			r = -EPROTO, *step = "netlink: the acknowledgement";
		else {
			const struct nlmsgerr *e = NLMSG_DATA(&ack.nh);
			if (e->error < 0)
				r = e->error, *step = "netlink: set lo's MTU and GSO size";
		}
	}
	close(s);
	return r;
}

/* tcp_rmem's middle value, in the calling thread's network namespace (the
 * file under /proc/sys/net is the opener's namespace's); the minimum and
 * maximum are kept. */
static int harden_tcp_rmem(const char **step)
{
	*step = "net.ipv4.tcp_rmem";
	int fd = open("/proc/sys/net/ipv4/tcp_rmem", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char buf[96];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	unsigned long lo, def, hi;
	int r = 0;
	if (n < 0)
		r = -errno;
	else {
		buf[n] = '\0';
		if (sscanf(buf, "%lu %lu %lu", &lo, &def, &hi) != 3)
			r = -EPROTO;
	}
	if (r == 0) {
		if (def > AIRLOCK_SANDBOX_TCP_RMEM_DEFAULT)
			def = AIRLOCK_SANDBOX_TCP_RMEM_DEFAULT;
		if (lo > def)
			lo = def;
		int len = snprintf(buf, sizeof(buf), "%lu %lu %lu\n", lo, def, hi);
		if (pwrite(fd, buf, (size_t)len, 0) != len)
			r = -errno;
	}
	close(fd);
	return r;
}

/* Write value to the sysctl file path (under /proc/sys/net: the calling
 * thread's network namespace's). A file the kernel does not have (a
 * feature not built) is nothing to set when absent_ok. */
static int set_netns_sysctl(const char *path, const char *value, bool absent_ok)
{
	int fd = UTIL_FAULT_CALL("netns.sysctl", open(path, O_WRONLY | O_CLOEXEC));
	if (fd < 0)
		return errno == ENOENT && absent_ok ? 0 : -errno;
	size_t len = strlen(value);
	ssize_t w = write(fd, value, len);
	int r = w == (ssize_t)len ? 0 : w < 0 ? -errno : -EIO;
	close(fd);
	return r;
}

/* The namespace's settings, each with its reason:
 *
 * net.mptcp.enabled 0: an MPTCP connection is a socket and its subflows,
 * each with its own queues, and on loopback it held about 4 times what a
 * TCP connection holds of the host's TCP memory past the cgroup's cap (240
 * connections, both ends written to and never read, under a 64 MiB limit:
 * 82 MB against 21 MB), which the socket budget does not allow for.
 * socket(IPPROTO_MPTCP) then fails with ENOPROTOOPT, as on a host with
 * MPTCP disabled, and programs fall back to TCP. A kernel without MPTCP
 * has no such file.
 *
 * net.ipv4.tcp_syncookies 0 and net.ipv4.tcp_fastopen 1 (client only):
 * the socket budget (host/sockbudget.c) counts a listener's child with the
 * place its handshake's last packet reserved on the CPU that took it in,
 * which holds when the child is made there and then. A SYN cookie's child
 * is made from the listener's own backlog when the listener is locked,
 * later and on any CPU, and a Fast Open child when its SYN comes; either
 * could find no place reserved and be made uncounted. Without cookies a
 * SYN queue that is full drops further SYNs, which only the sandbox's own
 * listeners see: their clients retry after 1, 3, 7 s, so a burst of
 * connections far past a listener's backlog completes in seconds rather
 * than at once (150 at a backlog of 16, accepted from 2 s on: median 5 s,
 * 136 done within 25 s, none refused). The sandbox cannot change either
 * setting (/proc/sys is not mounted in it).
 *
 * net.core.tstamp_allow_data 0: a transmit timestamp asked per call (an
 * SCM_TIMESTAMPING control message, which no filter reads) then carries no
 * copy of the packet for a socket without the host's CAP_NET_RAW, so
 * nothing is queued on the error queue, which no memory cgroup is charged
 * for (exec/seccomp.c has the rest and the measurements). A kernel whose
 * setting is the host's alone (before Linux 6.x made it the namespace's)
 * has no such file here; the host's own value then applies, which
 * docs/host.md asks the operator to set. */
static const struct {
	const char *path, *value;
	bool absent_ok;
} netns_sysctls[] = {
	{ "/proc/sys/net/mptcp/enabled", "0\n", true },
	{ "/proc/sys/net/ipv4/tcp_syncookies", "0\n", false },
	{ "/proc/sys/net/ipv4/tcp_fastopen", "1\n", false },
	{ "/proc/sys/net/core/tstamp_allow_data", "0\n", true },
};

static int harden(void *arg, const char **step)
{
	(void)arg;
	int r = harden_lo(step);
	if (r == 0)
		r = harden_tcp_rmem(step);
	for (size_t i = 0; r == 0 && i < sizeof(netns_sysctls) / sizeof(netns_sysctls[0]); i++) {
		*step = netns_sysctls[i].path + strlen("/proc/sys/");
		r = set_netns_sysctl(netns_sysctls[i].path, netns_sysctls[i].value,
		                     netns_sysctls[i].absent_ok);
	}
	return r;
}

int host_netns_harden(int ns_pidfd, const char **ret_step)
{
	return netns_run(ns_pidfd, harden, NULL, ret_step);
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
