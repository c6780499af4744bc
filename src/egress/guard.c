/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's outbound guard (the specification, "The egress boundary"):
 * a connection the platform makes on a tenant's behalf (an MCP server, a
 * webhook, a fetch) goes through the one evaluation function, and then to
 * the one address that function checked. Nothing here decides anything the
 * evaluation function decides, and nothing here looks a name up: a second
 * resolution could answer differently (DNS rebinding).
 */
#include "airlock/egress.h"

#include <errno.h>
#include <string.h>

#include "egress/dial.h"
#include "util/util.h"

int airlock_egress_guard_connect(const airlock_egress_policy *p, airlock_egress_resolve_fn resolve,
                                 void *resolve_ctx, const char *host, uint16_t port,
                                 int64_t timeout_ms, int *ret_fd,
                                 airlock_egress_decision *ret_decision, airlock_error *err)
{
	if (!ret_fd || !ret_decision)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "egress guard");
	*ret_fd = -1;

	/* The one evaluation function: the name, the policy, one resolution,
	 * every address against the denylist, the address to dial. */
	int r = airlock_egress_evaluate(p, host, port, resolve, resolve_ctx, ret_decision, err);
	if (r < 0)
		return r;
	if (!ret_decision->allow)
		return 0; /* a refusal is an answer: no socket was made */

	const airlock_egress_decision *d = ret_decision;
	if (!d->has_dial || (d->dial.family != AF_INET && d->dial.family != AF_INET6))
		/* An allowed decision always names the address to dial; one that
		 * does not is a bug, and nothing is dialed. */
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "egress guard: %s: allowed without an address to dial",
		                         d->host);

	int fd = -1;
	int e = egress_dial(&d->dial, d->port, timeout_ms, &fd);
	if (e < 0) {
		char addr[46];
		airlock_addr_format(&d->dial, addr);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -e,
		                         "egress guard: connect to %s port %u (%s)", d->host,
		                         (unsigned)d->port, addr);
	}
	*ret_fd = fd;
	return 0;
}
