/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_PORT_CREDENTIALS_H
#define AIRLOCK_PORT_CREDENTIALS_H

/*
 * The CredentialResolver port: a tool needing a credential obtains it from a
 * broker during execution and the model receives only a reference. It lives
 * strictly on the worker's side. A tool whose execution target is the sandbox
 * is handed airlock_credentials_sandbox(), which raises CredentialUnavailable
 * for every reference: a credential resolved inside a sandbox is a
 * credential inside a sandbox no matter how it got there.
 */

#include "airlock/error.h"
#include "airlock/secret.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AIRLOCK_CREDENTIALS_OPS_VERSION 1

typedef struct airlock_credentials_ops {
	unsigned version;
	const char *name;
	/* *ret is owned by the caller. CredentialUnavailable when the reference
	 * cannot be resolved; the message names the reference, never a value. */
	int (*resolve)(void *ctx, const char *reference, airlock_secret **ret, airlock_error *err);
	void (*free)(void *ctx);
} airlock_credentials_ops;

/* A resolver: opaque, made from an adapter's ops with
 * airlock_credentials_new, like the other two ports. */
typedef struct airlock_credentials airlock_credentials;

/* Takes ownership of ctx (released with ops->free, when not NULL), also on
 * failure. Config error when ops is of another version
 * (AIRLOCK_CREDENTIALS_OPS_VERSION) or has no resolve. */
int airlock_credentials_new(const airlock_credentials_ops *ops, void *ctx,
                            airlock_credentials **ret, airlock_error *err);

/* The adapter's name ("sandbox", "static", ...). */
const char *airlock_credentials_name(const airlock_credentials *c);

int airlock_credentials_resolve(airlock_credentials *c, const char *reference,
                                airlock_secret **ret, airlock_error *err);
void airlock_credentials_free(airlock_credentials *c);

/* The resolver handed to sandbox-target tools: refuses every reference.
 * A static object; free is a no-op. */
airlock_credentials *airlock_credentials_sandbox(void);

/* A worker-side in-memory broker: references mapped to values by the
 * platform's composition root. */
int airlock_credentials_static_new(airlock_credentials **ret, airlock_error *err);
int airlock_credentials_static_add(airlock_credentials *c, const char *reference,
                                   const void *value, size_t len, airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
