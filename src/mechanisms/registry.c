/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mechanism table. One row per SandboxMechanism value; the core picks a
 * row by the enum and never names an adapter's mechanism anywhere else.
 */
#include "airlock/mechanisms.h"

#include <stdio.h>

#include "airlock/fake.h"
#include "airlock/gvisor.h"
#include "airlock/native.h"

typedef struct mechanism_row {
	/* NULL when the adapter is not part of this build: then `missing` says
	 * why and which work owns it, and opening it fails loudly. */
	int (*open)(const airlock_settings *s, const airlock_exec_egress *egress,
	            const airlock_exec_config *cfg, airlock_exec **ret, airlock_error *err);
	/* Whether this host can run it (0) or why not; NULL: always can. */
	int (*probe)(char *why, size_t size);
	/* What it would run with here, when it can (for `airlock doctor`);
	 * NULL: nothing to say. */
	int (*detail)(char *buf, size_t size);
	const char *missing;
} mechanism_row;

static int open_fake(const airlock_settings *s, const airlock_exec_egress *egress,
                     const airlock_exec_config *cfg, airlock_exec **ret, airlock_error *err)
{
	if (egress)
		return airlock_error_set(err, AIRLOCK_ERR_NOT_IMPLEMENTED, 0,
		                         "sandbox.mechanism=fake has no network: egress needs native");
	airlock_fake *f = NULL;
	int r = airlock_fake_new(&f, err);
	if (r < 0)
		return r;
	return airlock_exec_new(airlock_fake_ops(), f, cfg, ret, err);
}

static int open_native(const airlock_settings *s, const airlock_exec_egress *egress,
                       const airlock_exec_config *cfg, airlock_exec **ret, airlock_error *err)
{
	airlock_native_config nc = {
		.image_store = s->image_store,
		.start_budget_seconds = s->defaults.start_budget_seconds,
		.egress_policy = egress ? egress->policy : NULL,
		.egress_proxy = egress ? egress->proxy : NULL,
		.bridge_address = s->service.bridge_address,
	};
	airlock_native *n = NULL;
	int r = airlock_native_new(&nc, &n, err);
	if (r < 0)
		return r;
	return airlock_exec_new(airlock_native_ops(), n, cfg, ret, err);
}

static int open_gvisor(const airlock_settings *s, const airlock_exec_egress *egress,
                       const airlock_exec_config *cfg, airlock_exec **ret, airlock_error *err)
{
	airlock_gvisor_config gc = {
		.image_store = s->image_store,
		.platform = s->gvisor_platform,
		.start_budget_seconds = s->defaults.start_budget_seconds,
		.egress_policy = egress ? egress->policy : NULL,
		.egress_proxy = egress ? egress->proxy : NULL,
		.bridge_address = s->service.bridge_address,
	};
	airlock_gvisor *g = NULL;
	int r = airlock_gvisor_new(&gc, &g, err);
	if (r < 0)
		return r;
	return airlock_exec_new(airlock_gvisor_ops(), g, cfg, ret, err);
}

static int probe_gvisor(char *why, size_t size)
{
	return airlock_gvisor_probe(AIRLOCK_GVISOR_PLATFORM_AUTO, NULL, NULL, why, size);
}

/* The platform auto picks here, and why. */
static int detail_gvisor(char *buf, size_t size)
{
	char why[200];
	airlock_gvisor_platform p;
	int r = airlock_gvisor_probe(AIRLOCK_GVISOR_PLATFORM_AUTO, NULL, &p, why, sizeof(why));
	if (r == 0)
		snprintf(buf, size, "platform %s (sandbox.gvisor_platform: auto chose %s)",
		         airlock_gvisor_platform_name(p), why);
	return r;
}

static const mechanism_row mechanisms[AIRLOCK_MECHANISM__MAX] = {
	[AIRLOCK_MECHANISM_FAKE] = { .open = open_fake },
	[AIRLOCK_MECHANISM_NATIVE] = { .open = open_native, .probe = airlock_native_probe },
	[AIRLOCK_MECHANISM_GVISOR] = { .open = open_gvisor, .probe = probe_gvisor,
	                               .detail = detail_gvisor },
	[AIRLOCK_MECHANISM_MICROVM] = {
		.missing = "the microvm mechanism (QEMU microvm with a guest agent) is not implemented yet",
	},
	[AIRLOCK_MECHANISM_DOCKER] = {
		.missing = "airlock has no Docker adapter: the Docker socket is rejected by design and "
		           "the native mechanism replaces docker as the development fallback",
	},
};

const char *airlock_mechanism_unavailable_reason(airlock_mechanism m)
{
	if (m <= AIRLOCK_MECHANISM_INVALID || m >= AIRLOCK_MECHANISM__MAX)
		return "unknown mechanism";
	if (!mechanisms[m].open)
		return mechanisms[m].missing;
	/* Asked of the host each time; the reason lives in per-thread storage
	 * so the pointer returned stays valid for the caller. */
	static _Thread_local char why[AIRLOCK_MECHANISM__MAX][256];
	if (mechanisms[m].probe && mechanisms[m].probe(why[m], sizeof(why[m])) < 0)
		return why[m];
	return NULL;
}

const char *airlock_mechanism_detail(airlock_mechanism m)
{
	if (m <= AIRLOCK_MECHANISM_INVALID || m >= AIRLOCK_MECHANISM__MAX || !mechanisms[m].detail)
		return NULL;
	static _Thread_local char buf[AIRLOCK_MECHANISM__MAX][320];
	return mechanisms[m].detail(buf[m], sizeof(buf[m])) == 0 ? buf[m] : NULL;
}

int airlock_exec_open(const airlock_settings *s, airlock_exec **ret, airlock_error *err)
{
	return airlock_exec_open_egress(s, NULL, ret, err);
}

int airlock_exec_open_egress(const airlock_settings *s, const airlock_exec_egress *egress,
                             airlock_exec **ret, airlock_error *err)
{
	return airlock_exec_open_observed(s, egress, NULL, NULL, ret, err);
}

int airlock_exec_open_observed(const airlock_settings *s, const airlock_exec_egress *egress,
                               const airlock_exec_observer *observer, void *observer_arg,
                               airlock_exec **ret, airlock_error *err)
{
	const char *why = airlock_mechanism_unavailable_reason(s->mechanism);
	if (why)
		return airlock_error_set(err, AIRLOCK_ERR_NOT_IMPLEMENTED, 0, "sandbox.mechanism=%s: %s",
		                         s->mechanism > AIRLOCK_MECHANISM_INVALID &&
		                                         s->mechanism < AIRLOCK_MECHANISM__MAX
		                                 ? airlock_mechanism_name(s->mechanism)
		                                 : "(invalid)",
		                         why);
	airlock_exec_config cfg;
	airlock_exec_config_from_settings(s, &cfg);
	cfg.observer = observer;
	cfg.observer_arg = observer_arg;
	return mechanisms[s->mechanism].open(s, egress, &cfg, ret, err);
}
