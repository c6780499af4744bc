/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_MECHANISMS_H
#define AIRLOCK_MECHANISMS_H

/*
 * The adapter table, chosen by the mechanism setting (STYLE.md: a static
 * table, no dlopen). A mechanism whose adapter is not built here fails
 * loudly with AIRLOCK_ERR_NOT_IMPLEMENTED and says which work owns it; it
 * never falls back to another mechanism.
 */

#include "airlock/port/exec.h"
#include "airlock/settings.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Open the execution adapter the settings name. The startup check
 * (airlock_settings_check) is the caller's job and must have passed. */
int airlock_exec_open(const airlock_settings *s, airlock_exec **ret, airlock_error *err);

/* Why a mechanism cannot run here, or NULL when it can. */
const char *airlock_mechanism_unavailable_reason(airlock_mechanism m);

#ifdef __cplusplus
}
#endif
#endif
