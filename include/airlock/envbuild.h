/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_ENVBUILD_H
#define AIRLOCK_ENVBUILD_H

/*
 * The environment a sandbox sees is built, not filtered
 * (the specification, "The environment a sandbox sees, and the three
 * tiers"). It starts empty.
 *
 * Tier 0 - never present, not configurable: platform and provider
 *   credentials. Because the environment is built, tier 0 needs no blocking
 *   code; the named list exists so tests can assert no tier-0 name is ever in
 *   a built environment, and so a tier-1 name that is also tier 0 is refused
 *   at startup rather than silently dropped.
 * Tier 1 - present only when an operator names it; the value is copied from
 *   the worker's environment for exactly those names.
 * Tier 2 - synthesized: HOME=/workspace, PWD, a fixed PATH, TMPDIR=/tmp,
 *   LANG=C.UTF-8, and the bridge socket and token when a bridge is present.
 *   Tier 2 wins over tier 1 for the same name.
 */

#include <stdbool.h>

#include "airlock/error.h"
#include "airlock/types.h"

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

typedef struct airlock_envbuild_input {
	const char *const *tier1;  /* operator-listed names (may be NULL) */
	size_t n_tier1;
	char *const *parent;       /* the worker's environment, "NAME=value", NULL-terminated */
	const char *working_directory; /* "/workspace/..." for PWD; NULL means /workspace */
	const airlock_bridge_endpoint *bridge; /* NULL unless orchestration runs */
} airlock_envbuild_input;

/*
 * Build the environment into *ret (zeroed by the caller). A tier-1 name that
 * is tier 0 or not a valid name is AIRLOCK_ERR_CONFIG (startup should have
 * refused it). A tier-1 name absent from the parent is skipped.
 */
int airlock_envbuild(const airlock_envbuild_input *in, airlock_env *ret, airlock_error *err);

/* Check a tier-1 list: AIRLOCK_ERR_CONFIG naming the first tier-0 or invalid
 * name. Used by the settings' startup check. */
int airlock_tier1_check(const char *const *names, size_t n, airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
