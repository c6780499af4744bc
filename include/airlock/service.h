/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_SERVICE_H
#define AIRLOCK_SERVICE_H

/*
 * The execution service's internal API server (docs/service-api.md): HTTP/1.1
 * with JSON bodies (libmicrohttpd) over an execution adapter the caller
 * opened (airlock_exec), on a Unix socket or TCP with TLS, every request
 * authenticated with the service credential.
 *
 * The server borrows the airlock_exec: the caller opens it before and frees
 * it after airlock_service_free. The server runs the expires_at timer
 * (airlock_exec_expire about once a second) on its own thread.
 *
 * `airlock serve` (src/cli/serve.c) is this server in the foreground; the
 * tests and the remote adapter's contract fixtures run it in-process.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/error.h"
#include "airlock/port/exec.h"
#include "airlock/settings.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct airlock_service_config {
	const char *listen;            /* "unix:/path" or "HOST:PORT" (TCP, TLS required) */
	unsigned socket_mode;          /* the Unix socket's mode: 0660 when 0 */
	long socket_gid;               /* the Unix socket's group; -1 keeps the process's */
	const void *credential;        /* the bearer token's bytes (copied) */
	size_t credential_len;
	const char *tls_cert_file;     /* PEM; required for TCP */
	const char *tls_key_file;      /* PEM; required for TCP */
	const char *tls_client_ca_file; /* PEM; when set, a client certificate it signed is required */
	unsigned max_connections;      /* 0: 256 */
	int64_t connection_timeout_ms; /* a connection idle this long is closed; 0: 30000 */
	size_t max_write_bytes;        /* a workspace write's body; 0: 64 MiB */
	int64_t expire_interval_ms;    /* the expires_at timer's period; 0: 1000 */
	/* The whole header block must arrive within this (a client that sends
	 * it a byte at a time is closed); also the keep-alive wait between
	 * requests. 0: 10000. */
	int64_t header_timeout_ms;
	/* A request body must arrive, and a response (once ready) be taken,
	 * within this; an execute's own run is bounded by its timeouts. 0: 300000. */
	int64_t request_timeout_ms;
	unsigned max_connections_per_ip; /* TCP only; 0: 64 */
	size_t max_sandboxes;          /* reported by health (the port enforces it); 0: none */
	int64_t drain_timeout_ms;      /* airlock_service_free waits this for responses; 0: 10000 */
	/* A connection must send a request carrying the credential (its TLS
	 * handshake and header block included) within this of its accept, or
	 * it is closed; a connection without it never lives longer, and such
	 * connections hold at most three quarters of max_connections (the
	 * oldest of the address holding the most goes first). 0: 2000 (or
	 * header_timeout_ms if that is shorter). */
	int64_t auth_timeout_ms;
	/* The most executes running at once, each on one of the service's
	 * execute threads (started as needed, then kept for the next); past
	 * it an execute is refused with ExecutionUnavailable. 0: the
	 * connections' bound (max_connections, or its default), which an
	 * execute's connection is held against anyway. */
	unsigned execute_threads;
} airlock_service_config;

void airlock_service_config_default(airlock_service_config *c);

typedef struct airlock_service airlock_service;

/* The service holds no secret of anyone's: AIRLOCK_ERR_CONFIG naming the
 * first variable of envp ("NAME=value", NULL-terminated) whose name is tier
 * 0 (airlock_tier0_name; the settings' own AIRLOCK_* overrides and
 * systemd's CREDENTIALS_DIRECTORY excepted: settings and a path) or whose
 * value matches a secret-scanner pattern. The message never holds a value. */
int airlock_service_environment_check(char *const *envp, airlock_error *err);
/* The secret scanner's patterns (POSIX extended regular expressions,
 * NULL-terminated): the shapes of real credentials, which the isolation
 * gate also looks for in a sandbox. */
const char *const *airlock_service_secret_patterns(void);

/* Listening when it returns; serves from its own threads. ExecutionUnavailable
 * (or Config for a bad address, credential or TLS file) otherwise, nothing
 * left behind. */
int airlock_service_new(const airlock_service_config *cfg, airlock_exec *exec,
                        airlock_service **ret, airlock_error *err);

/* SIGTERM's first half: new provisions and executes are refused, commands in
 * flight end with SERVICE_SHUTDOWN and their partial output goes to their
 * callers (airlock_exec_shutdown). Does not block; thread-safe. */
void airlock_service_shutdown(airlock_service *s);

/* Stop listening, wait (bounded) for responses in flight, release. The
 * caller then frees its airlock_exec, which destroys every sandbox. */
void airlock_service_free(airlock_service *s);

/* The address it listens on, as given ("unix:/path") or, for TCP, with the
 * port the kernel chose for port 0 ("127.0.0.1:41234"). */
const char *airlock_service_address(const airlock_service *s);

/* ---- the whole service, as `airlock serve` runs it ------------------------
 * Opening it is one call: the refusal of a credential in the environment,
 * the lifecycle log and the metrics, the credential, the operator's egress
 * policy and (for an allowlist) the proxy, the mechanism's adapter (its
 * open sweeps a crashed incarnation's leftovers), the API server, and the
 * metrics listener, each from the settings. The caller owns the process:
 * signals, the descriptor limit, reading the settings. */
typedef struct airlock_service_host airlock_service_host;

typedef struct airlock_service_host_options {
	char *const *environ;    /* the process environment, checked (NULL: not checked) */
	const char *dns_servers; /* the proxy's resolver (NULL: /etc/resolv.conf); needs an allowlist */
	int log_fd;              /* the lifecycle log: one JSON line per event */
	/* Called with a warning the operator should read (the host's file
	 * table cannot hold a sandbox at the largest memory limit); may be
	 * NULL. */
	void (*warn)(void *ctx, const char *message);
	void *warn_ctx;
} airlock_service_host_options;

/* s has passed airlock_settings_check. Serving from its own threads when it
 * returns 0; otherwise nothing is left behind (no proxy, no sandbox, no
 * socket file). */
int airlock_service_host_open(const airlock_settings *s, const airlock_service_host_options *o,
                              airlock_service_host **ret, airlock_error *err);
/* The API's address (airlock_service_address), the metrics listener's
 * (NULL without one), the mechanism's name, and whether the proxy runs. */
const char *airlock_service_host_address(const airlock_service_host *h);
const char *airlock_service_host_metrics_address(const airlock_service_host *h);
const char *airlock_service_host_mechanism(const airlock_service_host *h);
bool airlock_service_host_egress(const airlock_service_host *h);
/* One line of the lifecycle log. */
void airlock_service_host_log(airlock_service_host *h, const char *event, const char *message);
/* SIGTERM's first half (airlock_service_shutdown). */
void airlock_service_host_shutdown(airlock_service_host *h);
/* The rest, in order: the metrics listener, the server (responses in
 * flight drain), the adapter (every sandbox destroyed), the proxy, the
 * metrics. */
void airlock_service_host_free(airlock_service_host *h);

#ifdef __cplusplus
}
#endif
#endif
