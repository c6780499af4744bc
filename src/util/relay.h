/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_UTIL_RELAY_H
#define AIRLOCK_UTIL_RELAY_H

/*
 * Bytes relayed both ways between two connected stream sockets, for the
 * orchestration bridge (docs/bridge.md): the service's relay between a
 * sandbox's connection and the worker tier, the worker's between that and
 * the platform's endpoint.
 *
 * Memory is bounded whatever either side does: one UTIL_RELAY_BUFFER per
 * direction, and a direction whose buffer holds bytes not yet written is
 * not read (backpressure: a slow reader slows its writer, never grows a
 * buffer). Work is constant per byte (one read and at most a few writes of
 * each chunk). An end of file read from one side is passed on as
 * shutdown(SHUT_WR) of the other once its buffer is written, so a
 * half-closed conversation finishes.
 */

#include <stddef.h>

#define UTIL_RELAY_BUFFER (64 * 1024)

/* Relays between a and b until both directions have ended (end of file
 * read and passed on), either side fails (reset, a write to a closed
 * peer), or stop_fd (-1: none) is readable. pending (pending_len bytes,
 * at most UTIL_RELAY_BUFFER) are bytes already read from a: they go to b
 * first. The descriptors may be blocking or not; they are polled and used
 * with MSG_DONTWAIT / MSG_NOSIGNAL (a peer gone is EPIPE, never SIGPIPE).
 * Closes nothing. Returns 0 when both directions ended, 1 when stop_fd
 * fired, or -errno (-EINVAL for pending past the buffer). */
int util_relay(int a, int b, int stop_fd, const void *pending, size_t pending_len);

#endif
