/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_CORE_EGRESS_RULES_H
#define AIRLOCK_CORE_EGRESS_RULES_H

/*
 * The egress grammar's rules, shared by every door (airlock/egress.h
 * declares the public ones). This header adds what the YAML door needs to
 * name a host's problem with its line.
 */

#include "airlock/caps.h"
#include "airlock/egress.h"

/* Why the host of a destination breaks the grammar, in the order an
 * operator's mistake is most usefully named (a URL, an address, a port,
 * the name's shape); NULL when it does not, with the normalized name in
 * out. */
const char *egress_host_rule(const char *v, size_t len, char out[AIRLOCK_HOSTNAME_MAX + 1]);

/* The rules over one destination (all[idx], against the ones before it;
 * host_ruled: its host already passed egress_host_rule) and over the
 * policy's mode and count. true with *v filled when one is broken. */
bool egress_destination_rules(const airlock_egress_destination *all, size_t idx, bool host_ruled,
                              airlock_egress_violation *v);
bool egress_mode_rules(const airlock_egress_policy *p, airlock_egress_violation *v);

#endif
