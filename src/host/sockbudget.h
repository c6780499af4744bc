/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_HOST_SOCKBUDGET_H
#define AIRLOCK_HOST_SOCKBUDGET_H

/*
 * A sandbox's budget of inet sockets, kept by the kernel (cgroup BPF): every
 * AF_INET/AF_INET6 socket a process of the sandbox's cgroup creates, and
 * every connection its listeners complete, counts from its creation until
 * the kernel releases it, whether or not a descriptor still names it (a
 * memory mapping of a TCP socket, a connection waiting unaccepted in a
 * listener's queue). Past the budget a new socket is refused (EPERM) and a
 * listener's handshakes are dropped, as when its backlog is full.
 * airlock/caps.h, at AIRLOCK_SANDBOX_SOCKET_COST, has the arithmetic and
 * the measurements.
 */

#include <stdint.h>

#include "airlock/error.h"

/* Load the budget's programs and attach them to the cgroup2 directory
 * cgroup_fd (the sandbox's group, before any process enters it), with room
 * for budget sockets. Nothing of its own stays open: the programs and their
 * maps live as long as the group and go with it (a failure halfway leaves
 * attached only what the group's removal takes). EXECUTION_UNAVAILABLE
 * naming what the host lacks (cgroup BPF, a program the kernel refused). */
int host_sock_budget_attach(int cgroup_fd, uint32_t budget, airlock_error *err);

/* Whether this host can keep the budget: a cgroup2 hierarchy for the
 * service's groups, and a kernel that loads the programs (cgroup BPF).
 * For a mechanism's probe (`airlock doctor`, a service's open):
 * EXECUTION_UNAVAILABLE naming what is missing. */
int host_sock_budget_probe(airlock_error *err);

#endif
