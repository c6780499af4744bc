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
#include "airlock/tiers.h"
#include "airlock/types.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
#endif
