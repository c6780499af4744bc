/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's network, both halves. The child's: init brings up lo, the
 * only interface of its network namespace. The service's: the egress
 * proxy's listener, planted in that namespace (host/netns.h) and handed to
 * the proxy. The child's half runs between fork and exec: system
 * calls only, no allocation (native_internal.h).
 */
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "airlock/egress.h"
#include "airlock/tiers.h"
#include "exec/native/native_internal.h"
#include "exec/native/service.h"
#include "host/netns.h"

/* The planted proxy listener's accept queue. A short queue: a connection
 * waiting in it is established, takes the client's bytes into its receive
 * buffer, and belongs to no memory cgroup until the proxy accepts it; past
 * the accept rate the proxy leaves connections waiting there, so SOMAXCONN
 * (4096) would let a sandbox pin ~200 MB of host TCP memory outside its
 * limits. Past this many, the kernel drops the SYN and the client retries. */
#define NATIVE_PROXY_BACKLOG 64

/* ---- the service's half ---------------------------------------------------- */

/* Plant the proxy's listener in the sandbox's namespace (the sandbox still
 * has no route and no resolver: lo and this socket are all there is) and
 * hand it to the proxy with this sandbox's copy of the policy. */
int native_net_plant_proxy(airlock_native *n, sandbox *b, const airlock_environment_spec *spec,
                           airlock_error *err)
{
	/* Entered through init's pidfd (setns accepts one since Linux 5.8): the
	 * process, not a pid that could name another one. */
	int fd = -1;
	const char *step = NULL;
	int e = host_netns_listen(b->init_pidfd, AIRLOCK_SANDBOX_PROXY_ADDR,
	                          AIRLOCK_SANDBOX_PROXY_PORT, NATIVE_PROXY_BACKLOG, &fd, &step);
	if (e < 0 && !step)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -e, "egress: thread");
	if (e < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -e,
		                         "egress: planting the proxy listener: %s", step);
	airlock_proxy_owner owner = {
		.run_id = spec->run_id, .tenant_id = spec->tenant_id, .environment_id = b->box.id,
	};
	int r = airlock_proxy_attach(n->cfg.egress_proxy, fd, &owner, &spec->egress, err);
	close(fd); /* the proxy holds its own copy now */
	if (r == 0)
		b->proxied = true;
	return r;
}

/* ---- the child's half -------------------------------------------------------- */

int native_net_loopback_up(void)
{
	return host_netns_loopback_up() < 0 ? NATIVE_STEP_LOOPBACK : 0;
}
