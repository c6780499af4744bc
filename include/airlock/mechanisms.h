/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_MECHANISMS_H
#define AIRLOCK_MECHANISMS_H

/*
 * The adapter table, chosen by the mechanism setting: a static table, no
 * dlopen, so every adapter the binary can run is visible at link time. A
 * mechanism whose adapter is not built here fails loudly with
 * AIRLOCK_ERR_NOT_IMPLEMENTED and says which work owns it; it never falls
 * back to another mechanism.
 */

#include "airlock/port/exec.h"
#include "airlock/proxy.h"
#include "airlock/settings.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Open the execution adapter the settings name. The startup check
 * (airlock_settings_check) is the caller's job and must have passed. */
int airlock_exec_open(const airlock_settings *s, airlock_exec **ret, airlock_error *err);

/* The same with egress: the operator's policy and the proxy serving it
 * (both the caller's, outliving the adapter). A mechanism without a network
 * path refuses a non-NULL egress with AIRLOCK_ERR_NOT_IMPLEMENTED rather
 * than provisioning sandboxes that silently have none. */
typedef struct airlock_exec_egress {
	const airlock_egress_policy *policy;
	airlock_proxy *proxy;
} airlock_exec_egress;
int airlock_exec_open_egress(const airlock_settings *s, const airlock_exec_egress *egress,
                             airlock_exec **ret, airlock_error *err);

/* The same, with an observer of every lifecycle event (the service's
 * metrics and log: airlock_exec_config.observer); NULL for none. */
int airlock_exec_open_observed(const airlock_settings *s, const airlock_exec_egress *egress,
                               const airlock_exec_observer *observer, void *observer_arg,
                               airlock_exec **ret, airlock_error *err);

/* Why a mechanism cannot run here, or NULL when it can. */
const char *airlock_mechanism_unavailable_reason(airlock_mechanism m);

/* What a mechanism that can run here would run with (gvisor: its platform
 * and why), or NULL. Valid until the next call on this thread. */
const char *airlock_mechanism_detail(airlock_mechanism m);

#ifdef __cplusplus
}
#endif
#endif
