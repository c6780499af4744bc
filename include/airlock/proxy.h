/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_PROXY_H
#define AIRLOCK_PROXY_H

/*
 * The sandbox egress proxy (the specification, "What the proxy does on
 * CONNECT"): a separate process that parses sandbox input with no
 * privileges. It never creates a socket in a sandbox's namespace: the
 * service plants a listener there and hands it over (airlock_proxy_attach),
 * together with the policy that sandbox was provisioned with; the proxy
 * keeps that copy, so a policy change applies to sandboxes provisioned after
 * it. Nothing faces a sandbox but the CONNECT parser.
 *
 * On each accepted connection: read one CONNECT request (size cap, read
 * timeout), evaluate it with the one evaluation function (one resolution),
 * dial the checked address once, answer 200 and relay opaquely (splice
 * through a pipe each way, half-close carried both ways) under an idle and a
 * total timeout. Every decision is one JSON log line:
 *
 *   {"ts_ms":..., "run":..., "tenant":..., "environment":..., "transport":
 *    "policy"|"browser_resources"|"unsubscribe", "host":..., "port":...,
 *    "addresses":[...], "dial":...|null, "outcome": "allowed"|"refused"|
 *    "failed", "reason":..., "detail":..., "status":..., "bytes_up":...,
 *    "bytes_down":..., "duration_ms":...}
 *
 * written when the connection ends (a refusal ends it at once), one write(2)
 * per line, by a writer thread from a bounded queue (a log that stops
 * reading never stops a tunnel; what did not fit is counted in a
 * LOG_DROPPED line). Connections a sandbox opens past its accept rate wait
 * in the kernel's listen queue until the next second (none is closed) and
 * are counted in one line a second, written by a timer: {"ts_ms", "run",
 * "tenant", "environment", "transport", "outcome": "delayed", "reason":
 * "RATE_LIMITED", "count"}.
 *
 * The service's handle kills a proxy that stops answering (a request
 * without its answer would leave the channel out of step), which closes
 * every listener it held; every later request on the handle fails.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "airlock/egress.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The host uid/gid the proxy runs as when started by root: below the native
 * sandboxes' range (1500000000 + slot), owned by nothing else. */
#define AIRLOCK_PROXY_UID 1499999999u

typedef struct airlock_proxy_config {
	const char *dns_servers;     /* "ADDR[:PORT],..." or NULL for /etc/resolv.conf */
	int log_fd;                  /* where the JSON lines go (duplicated) */
	uid_t uid;                   /* when started as root: drop to this (AIRLOCK_PROXY_UID) */
	gid_t gid;
	int64_t request_timeout_ms;  /* the whole CONNECT request within this (10 s) */
	int64_t connect_timeout_ms;  /* the dial (10 s) */
	int64_t idle_timeout_ms;     /* no byte either way for this long ends a tunnel (300 s) */
	int64_t total_timeout_ms;    /* a tunnel's whole life (3600 s) */
	unsigned max_connections;    /* accepted and not yet closed, all listeners (4096; fewer
	                              * when the descriptor limit holds fewer: 6 per tunnel,
	                              * and then each sandbox's share shrinks alike) */
	unsigned max_pending;        /* evaluations and dials in flight at once (64) */
	/* One sandbox's share, so that it cannot starve the others: its
	 * connections (256) and its checks in flight (8). Past either, that
	 * sandbox's next connection is answered 503 and logged. Each must be
	 * at least 1 and below its global cap, or airlock_proxy_spawn refuses;
	 * when the descriptor limit lowers max_connections, the connection
	 * share is lowered by the same factor, and a limit too low to keep it
	 * at least 1 and below the whole makes the proxy refuse to start,
	 * naming RLIMIT_NOFILE. */
	unsigned max_connections_per_listener;
	unsigned max_pending_per_listener;
	/* New connections per listener per second (100, at least 1); past it
	 * the listener stops accepting until the next second, so the rest wait
	 * in the kernel's queue (a legitimate burst is served late, never cut
	 * off), and one line per second (outcome delayed, reason RATE_LIMITED,
	 * a count) says how many waited: a sandbox cannot flood the log. */
	unsigned accept_rate_per_listener;
	/* Lines waiting for the log writer (4096); past it lines are dropped
	 * and the next line written says how many (reason LOG_DROPPED). A slow
	 * log never blocks the relay. */
	unsigned log_queue_max;
} airlock_proxy_config;

void airlock_proxy_config_default(airlock_proxy_config *cfg);

/* What a listener belongs to; copied into every log line it produces. */
typedef struct airlock_proxy_owner {
	const char *run_id;
	const char *tenant_id;
	const char *environment_id; /* the key for airlock_proxy_detach */
} airlock_proxy_owner;

/* The service's handle on a running proxy process. Thread-safe. */
typedef struct airlock_proxy airlock_proxy;

/* Start the proxy process (a fork that at once executes the proxy's
 * embedded program from a sealed memfd, its configuration sent as the
 * control channel's first frame: src/egress/proxy_internal.h, so it holds
 * no copy of this process's memory): it drops to cfg->uid/gid when
 * root (no capabilities, no_new_privs, not dumpable), keeps only its
 * control socket and the log, and runs until the handle is freed or this
 * process dies (its control socket closes). */
int airlock_proxy_spawn(const airlock_proxy_config *cfg, airlock_proxy **ret, airlock_error *err);

/* The proxy as the service and `airlock run` start it: the default
 * configuration, dns_servers (NULL: /etc/resolv.conf) checked before the
 * process starts (ConfigError naming what is wrong), the decision log to
 * log_fd when >= 0. */
int airlock_proxy_start(const char *dns_servers, int log_fd, airlock_proxy **ret, airlock_error *err);

/* Hand a listening TCP socket to the proxy with the policy its connections
 * are checked against (copied now: later changes do not reach it). The fd
 * stays the caller's to close. The environment id must not be attached
 * already. Blocks until the proxy has it. */
int airlock_proxy_attach(airlock_proxy *p, int listen_fd, const airlock_proxy_owner *owner,
                         const airlock_egress_policy *policy, airlock_error *err);

/* The same for a public-HTTPS transport (constructed only in code, never
 * from a serialized policy). */
int airlock_proxy_attach_transport(airlock_proxy *p, int listen_fd,
                                   const airlock_proxy_owner *owner,
                                   airlock_egress_transport transport, airlock_error *err);

/* Close the environment's listener and end its tunnels (each is logged).
 * Returns once the proxy holds nothing of it. 0 when it was not attached. */
int airlock_proxy_detach(airlock_proxy *p, const char *environment_id, airlock_error *err);

pid_t airlock_proxy_pid(const airlock_proxy *p);

/* Whether p was found dead (it exited, or stopped answering and was
 * killed): it holds no listener and answers nothing from then on. */
bool airlock_proxy_dead(airlock_proxy *p);

/* Stop the proxy (every tunnel ends) and wait for it. NULL is a no-op. */
void airlock_proxy_free(airlock_proxy *p);

#ifdef __cplusplus
}
#endif
#endif
