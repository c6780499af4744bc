/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EGRESS_PROXY_INTERNAL_H
#define AIRLOCK_EGRESS_PROXY_INTERNAL_H

/*
 * The control channel between the service and its proxy process: a stream
 * socketpair carrying frames of a 4-byte length (host order: both ends are
 * the same binary on the same machine) and a JSON object, with at most one
 * descriptor riding on a frame's first byte (SCM_RIGHTS). The service only
 * ever asks; the proxy only ever answers {"ok": true} or {"ok": false,
 * "error": "..."}. Nothing on this channel comes from a sandbox.
 */

#include <stddef.h>
#include <stdint.h>

#include "airlock/caps.h"
#include "airlock/proxy.h"

/* A frame's cap, AIRLOCK_PROXY_FRAME_MAX, is in airlock/caps.h. */

/* Send one frame (blocking), with fd attached when fd >= 0. 0 or -errno. */
int proxy_frame_send(int sock, const char *body, size_t len, int fd);

/* Receive one frame within timeout_ms (< 0: no limit) into *ret (malloc'd,
 * NUL-terminated), and the descriptor that rode on it into *ret_fd (or -1;
 * pass NULL to refuse any). 0, -EPIPE on a closed channel, -ETIMEDOUT,
 * -EMSGSIZE, -EPROTO (a descriptor where none was asked for), -errno. */
int proxy_frame_recv(int sock, int64_t timeout_ms, char **ret, size_t *ret_len, int *ret_fd);

/* The proxy process's main: never returns. ctl is the control socket. */
_Noreturn void proxy_process_main(int ctl, const airlock_proxy_config *cfg);

#endif
