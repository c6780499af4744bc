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

/* Bring up lo in the calling thread's network namespace: 0 or -errno.
 * System calls only, no allocation: safe between fork and exec. */
int host_netns_loopback_up(void);

#endif
