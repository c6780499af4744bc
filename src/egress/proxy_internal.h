/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EGRESS_PROXY_INTERNAL_H
#define AIRLOCK_EGRESS_PROXY_INTERNAL_H

/*
 * The control channel between the service and its proxy process: a stream
 * socketpair carrying frames of a 4-byte length (host order: both ends are
 * built from the same sources for the same machine) and a JSON object, with at most one
 * descriptor riding on a frame's first byte (SCM_RIGHTS). The service only
 * ever asks; the proxy only ever answers {"ok": true} or {"ok": false,
 * "error": "..."}. Nothing on this channel comes from a sandbox.
 */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "airlock/proxy.h"

/* A frame's cap, AIRLOCK_PROXY_FRAME_MAX, is in airlock/caps.h. */

/* Send one frame (blocking), with fd attached when fd >= 0. 0 or -errno. */
int proxy_frame_send(int sock, const char *body, size_t len, int fd);

/* Receive one frame within timeout_ms (< 0: no limit) into *ret (malloc'd,
 * NUL-terminated), and the descriptor that rode on it into *ret_fd (or -1;
 * pass NULL to refuse any). 0, -EPIPE on a closed channel, -ETIMEDOUT,
 * -EMSGSIZE, -EPROTO (a descriptor where none was asked for), -errno. */
int proxy_frame_recv(int sock, int64_t timeout_ms, char **ret, size_t *ret_len, int *ret_fd);

/* The service's reading of an answer (or of the hello): {"ok": true}, or
 * {"ok": false, "error": "..."}. The proxy parses sandbox bytes, so its
 * frames (up to AIRLOCK_PROXY_FRAME_MAX) are decoded as untrusted, in the
 * library's budgeted decode (core/json_internal.h): jansson running out of
 * memory, or the budget spent, is this call's error, never an abort of the
 * service. 0 with *ret_ok set, and the proxy's reason, escaped, in why (""
 * when it gave none); or the decode's error (DECODE, or SYSTEM/ENOMEM),
 * which the caller turns into ExecutionUnavailable naming the answer. */
int proxy_answer_decode(const char *answer, size_t len, bool *ret_ok, char *why, size_t why_size,
                        airlock_error *err);

/* The proxy process is a program of its own (proxy_main.c, built by
 * meson.build and embedded in the library as egress_proxy_blob), which the
 * service's fork executes from a sealed memfd (util/sealed.h) at once: a
 * fork that went on running the proxy would keep a copy of the service's
 * memory, its credential and TLS keys among it, for the proxy's whole
 * life, in the one process that parses what sandboxes send. It starts
 * with an empty environment and these descriptors only: */
#define PROXY_EXEC_CTL_FD 3 /* the control socket */
#define PROXY_EXEC_LOG_FD 4 /* the log (cfg->log_fd's duplicate) */
/* The configuration comes as the channel's first frame, within this. */
#define PROXY_CONFIG_TIMEOUT_MS 10000
#define PROXY_EXEC_ARGV0 "airlock-proxy"

/* The program's main: reads the configuration frame from
 * PROXY_EXEC_CTL_FD, answers the hello once it has dropped its privileges
 * and set up its loop (or the reason it could not), serves until the
 * channel closes. Never returns. */
_Noreturn void proxy_exec_main(void);

/* The configuration frame (proxy_config.c): every field of cfg but log_fd,
 * which is PROXY_EXEC_LOG_FD. encode: malloc'd JSON, NULL when out of
 * memory. decode: NULL, or why not (every field is required, none unknown,
 * each in range); cfg->dns_servers then points into *ret_keep, which the
 * caller keeps for as long as cfg. */
char *proxy_config_encode(const airlock_proxy_config *cfg);
const char *proxy_config_decode(const char *text, size_t len, airlock_proxy_config *cfg,
                                json_t **ret_keep);

#endif
