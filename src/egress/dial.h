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

#endif
