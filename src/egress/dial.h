/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EGRESS_DIAL_H
#define AIRLOCK_EGRESS_DIAL_H

/* The one dial, shared by the proxy and the worker's outbound guard: a TCP
 * connection to exactly the address the evaluation function checked, within
 * timeout_ms (<= 0: the kernel's own). 0 with *ret_fd a blocking,
 * close-on-exec socket, or -errno (-ETIMEDOUT on the timeout). */

#include <stdint.h>

#include "airlock/egress.h"

int egress_dial(const airlock_addr *a, uint16_t port, int64_t timeout_ms, int *ret_fd);

/* The same dial in two steps, for a caller that waits in its own loop (the
 * proxy): start makes the non-blocking, close-on-exec socket and connects
 * it to exactly a and port; 0 (*ret_fd connected), -EINPROGRESS (*ret_fd
 * set: wait until it is writable, then egress_dial_result), or -errno (no
 * socket). The socket stays non-blocking. */
int egress_dial_start(const airlock_addr *a, uint16_t port, int *ret_fd);
/* A started connect's outcome once its socket is writable: 0 or a positive
 * errno. */
int egress_dial_result(int fd);

#endif
