/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_HOST_NETNS_H
#define AIRLOCK_HOST_NETNS_H

/*
 * A listening socket planted in a sandbox's network namespace from the
 * service's side: the sandbox connects to it as a local address, and the
 * service (the egress proxy) accepts on it from outside. Every mechanism
 * whose sandbox has a network namespace of its own (native now, gvisor
 * later) hands its egress proxy a listener this way.
 */

#include <netinet/in.h>

/* Create a TCP listener bound to addr:port (addr dotted IPv4 text, port in
 * host byte order) inside the network namespace of the process ns_pidfd names, with the given accept
 * queue, non-blocking and close-on-exec, into *ret_fd. 0, or -errno with
 * *ret_step naming what failed (NULL: the thread could not be started). */
int host_netns_listen(int ns_pidfd, const char *addr, in_port_t port, int backlog,
                      int *ret_fd, const char **ret_step);

/* Bound what a socket in the network namespace of the process ns_pidfd
 * names can hold of the host's TCP memory outside its memory cgroup
 * (airlock/caps.h, at AIRLOCK_SANDBOX_NOFILE, has the measurements): lo's
 * MTU and GSO size become AIRLOCK_SANDBOX_LO_MTU (a forced charge is one
 * packet), and tcp_rmem's default AIRLOCK_SANDBOX_TCP_RMEM_DEFAULT (what
 * an unaccepted connection holds). Done from the service's side, on a
 * thread of its own, before anything runs in the namespace. 0, or -errno
 * with *ret_step naming what failed (NULL: the thread could not start). */
int host_netns_harden(int ns_pidfd, const char **ret_step);

/* Bring up lo in the calling thread's network namespace: 0 or -errno.
 * System calls only, no allocation: safe between fork and exec. */
int host_netns_loopback_up(void);

#endif
