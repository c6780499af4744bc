/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_TIERS_H
#define AIRLOCK_TIERS_H

/*
 * The names of the three tiers of a sandbox's environment (the
 * specification, "The environment a sandbox sees, and the three tiers";
 * airlock/envbuild.h builds one from them).
 */

#include <stdbool.h>
#include <stddef.h>

#include "airlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The fixed PATH baked into images; argv[0] is resolved against it only. */
#define AIRLOCK_SANDBOX_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

/* Tier 2 for a sandbox that has the egress proxy: where the proxy's
 * listener is in the sandbox's own network namespace, and the variables
 * that point clients at it (both spellings: clients disagree on which they
 * read). The mechanism sets them when it plants the listener, over any
 * tier-1 value of the same name; a sandbox without the proxy gets none
 * from the platform (an operator's tier-1 value passes as it is). */
#define AIRLOCK_SANDBOX_PROXY_ADDR "127.0.0.1"
#define AIRLOCK_SANDBOX_PROXY_PORT 3128
#define AIRLOCK_SANDBOX_PROXY_URL "http://" AIRLOCK_SANDBOX_PROXY_ADDR ":3128" /* the port above */
#define AIRLOCK_SANDBOX_PROXY_VARS_N 4
extern const char *const airlock_sandbox_proxy_vars[AIRLOCK_SANDBOX_PROXY_VARS_N];
bool airlock_sandbox_proxy_var(const char *name);

/* Where a sandbox with the orchestration bridge finds its socket
 * (docs/bridge.md): a path inside the sandbox, never a host path. */
#define AIRLOCK_BRIDGE_SOCKET_PATH "/run/airlock/bridge.sock"
/* Names of the bridge variables in tier 2. */
#define AIRLOCK_BRIDGE_SOCKET_VAR "AIRLOCK_BRIDGE_SOCKET"
#define AIRLOCK_BRIDGE_TOKEN_VAR "AIRLOCK_BRIDGE_TOKEN"

/* True for a tier-0 name: one on the named list, or one whose shape marks a
 * credential (suffixes such as _API_KEY, _SECRET, _TOKEN, _PASSWORD). */
bool airlock_tier0_name(const char *name);
/* The named tier-0 list, NULL-terminated (for tests and documentation). */
const char *const *airlock_tier0_names(void);

/* A valid environment variable name: [A-Za-z_][A-Za-z0-9_]*, at most 128. */
bool airlock_env_name_valid(const char *name);

/* The most names an operator's tier-1 list may hold. */
#define AIRLOCK_TIER1_MAX 256

/* Check a tier-1 list: AIRLOCK_ERR_CONFIG naming the first tier-0 or invalid
 * name. Used by the settings' startup check. */
int airlock_tier1_check(const char *const *names, size_t n, airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
