/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EGRESS_EVALUATE_H
#define AIRLOCK_EGRESS_EVALUATE_H

/*
 * The one evaluation function (src/egress/evaluate.c) in its two halves,
 * for a caller that resolves between them without blocking (the proxy's
 * loop). airlock_egress_evaluate and airlock_egress_evaluate_transport are
 * these two with a resolve function between them: there is no second copy
 * of any step.
 */

#include <stddef.h>
#include <stdint.h>

#include "airlock/egress.h"

/* Every step before the resolution: the name, then the policy (p, when t is
 * AIRLOCK_EGRESS_TRANSPORT_POLICY) or the transport's rule. 0: *ret is the
 * final decision (a refusal); 1: the name ret->host is to be resolved and
 * the result given to egress_evaluate_finish; < 0: a caller's error, as
 * airlock_egress_evaluate answers it. */
int egress_evaluate_begin(const airlock_egress_policy *p, airlock_egress_transport t,
                          const char *host, uint16_t port, airlock_egress_decision *ret,
                          airlock_error *err);

/* Whether a is this host's own address: 1 own, 0 not, < 0 cannot tell (the
 * destination is refused). airlock_addr_is_own, or a cache of its answers. */
typedef int (*egress_own_fn)(void *ctx, const airlock_addr *a);

/* Every step after it: r and n as the resolve function answered, the
 * addresses already in ret->addresses. Makes *ret the final decision. */
void egress_evaluate_finish(airlock_egress_decision *ret, int r, size_t n, egress_own_fn own,
                            void *own_ctx);

#endif
