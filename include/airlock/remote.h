/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_REMOTE_H
#define AIRLOCK_REMOTE_H

/*
 * The remote adapter: the worker's side of the execution service's internal
 * API (docs/service-api.md). An airlock_exec_ops and, for each live sandbox,
 * an airlock_workspace_ops over HTTP (libcurl), on a Unix socket or TCP with
 * TLS. It runs nothing itself: the service it calls does.
 *
 * Errors cross with their class; an unreachable, overloaded or stopping
 * service is ExecutionUnavailable (retriable). Client timeouts come from
 * the start budget (provision) and the effective timeout (execute).
 *
 * Execute always streams: the call's on_output sees the bytes as the
 * service sends them. Its cancel token sends the service's cancel verb.
 * The adapter's shutdown (airlock_exec_shutdown or airlock_exec_free on the
 * core over it: this client is stopping) cancels every execute in flight
 * the same way and reports each as SERVICE_SHUTDOWN; the service goes on.
 * docs/remote.md describes the rest.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/error.h"
#include "airlock/port/exec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct airlock_remote_config {
	const char *address;          /* "unix:/path" or "HOST:PORT" (https) */
	const void *credential;       /* the service credential's bytes (copied) */
	size_t credential_len;
	const char *tls_ca_file;      /* PEM the server's certificate must chain to (TCP) */
	const char *tls_cert_file;    /* client certificate (TCP, when the service asks) */
	const char *tls_key_file;
	int64_t start_budget_seconds; /* provision's client timeout is this plus a margin; 0: 30 */
	int64_t connect_timeout_ms;   /* 0: 5000 */
} airlock_remote_config;

typedef struct airlock_remote airlock_remote;

int airlock_remote_new(const airlock_remote_config *cfg, airlock_remote **ret,
                       airlock_error *err);
const airlock_exec_ops *airlock_remote_ops(void);

/* The service's health (GET /v1/health): reachable, which mechanism it
 * runs, how full it is. For a client that must know the mechanism before
 * it builds a spec (the image), and for operators. Call it before the
 * adapter is handed to airlock_exec_new (which takes it). Unreachable,
 * overloaded: ExecutionUnavailable naming the address. */
typedef struct airlock_remote_status {
	char mechanism[32]; /* "native", "fake", ... */
	int64_t live;
	int64_t max_sandboxes; /* 0: no cap */
	bool shutting_down;
} airlock_remote_status;
int airlock_remote_health(airlock_remote *rm, airlock_remote_status *ret, airlock_error *err);

/* What a client of the execution service names to reach it: the address,
 * the file holding its credential (read here, checked as
 * airlock_credential_file_read checks it, and wiped once the adapter has
 * its copy) and the TLS files of a TCP address. */
typedef struct airlock_remote_open_config {
	const char *address;
	const char *credential_file;
	const char *tls_ca_file;
	const char *tls_cert_file;
	const char *tls_key_file;
	/* One of several clients of the service (the worker): this side's
	 * core applies no max_sandboxes, which is the service's own to
	 * enforce over all of its clients (a client's count of what it made
	 * would also count sandboxes another client ended). */
	bool uncapped;
} airlock_remote_open_config;

/* The service's handle of a sandbox this adapter provisioned (the
 * Airlock-Handle value: base64 of the handle the service made, with its
 * own created_at and expires_at), newly allocated. For a client that
 * records its sandboxes elsewhere (the worker's database), so that another
 * process of it can destroy one with airlock_remote_destroy_recorded.
 * ExecutionRejected when the adapter holds no such sandbox. */
int airlock_remote_service_handle(airlock_remote *rm, const char *environment_id, char **ret,
                                  airlock_error *err);
/* The longest service handle a record may hold. */
#define AIRLOCK_REMOTE_HANDLE_MAX 8192
/* Destroy a sandbox this adapter does not hold, by the service handle
 * another adapter recorded (airlock_remote_service_handle): a sandbox of a
 * worker that died, or of a claim another worker fenced. 0 once the
 * sandbox is gone, including one that already was (idempotent). One this
 * adapter holds is refused (AIRLOCK_ERR_INVALID): it goes through its
 * core. Unreachable service: ExecutionUnavailable. */
int airlock_remote_destroy_recorded(airlock_remote *rm, const char *environment_id,
                                    const char *service_handle, airlock_error *err);

struct airlock_settings;
/* Open the execution service as an ExecutionEnvironment, the way every
 * client does (`airlock run --service`, the worker): read the credential,
 * make the remote adapter with the settings' start budget, ask the
 * service's health (an unreachable, stopping or unknown service fails
 * here, before anything is built, naming the address), set
 * s->mechanism to the service's (the image a spec names depends on it),
 * and wrap the adapter in the core with the settings' numbers
 * (airlock_exec_config_from_settings), so both sides check the same. */
int airlock_remote_open(const airlock_remote_open_config *c, struct airlock_settings *s,
                        airlock_exec **ret, airlock_error *err);
/* The same, also giving the adapter under the core (*ret_remote, owned by
 * *ret: valid until airlock_exec_free) for the calls above. */
int airlock_remote_open_adapter(const airlock_remote_open_config *c, struct airlock_settings *s,
                                airlock_exec **ret, airlock_remote **ret_remote,
                                airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
