/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_GVISOR_H
#define AIRLOCK_GVISOR_H

/*
 * The gvisor mechanism: each sandbox is one gVisor sandbox run by `runsc`
 * (Debian's package; this code is written against runsc 20221219), the
 * first mechanism production accepts. The sandbox's programs talk to
 * gVisor's kernel (the sentry), never to the host's: the host sees only the
 * sentry and its file proxy (the gofer), both inside the sandbox's cgroups.
 *
 * A sandbox is: an OCI bundle generated per sandbox in the service's state
 * directory, with the same verified EROFS image as native as a read-only
 * root, the same quota'd workspace volume at /workspace, a private /tmp in
 * the sentry's memory (so charged to the sandbox's memory limit), no
 * capabilities, the built environment, uid/gid 1000; the airlock guest
 * program (airlock/guest.h) as pid 1; cgroups the service creates and owns,
 * which the runtime is started inside. Each command is `runsc exec` of
 * `guest exec -- ARGV` as uid 1000; every process a command started is
 * killed when it ends.
 *
 * Where gVisor's semantics differ from native's, and what airlock does:
 *   - pids_max is RLIMIT_NPROC inside the sandbox (gVisor counts the
 *     sandbox's own processes and threads per uid), set one higher because
 *     a refused fork leaves no trace: PIDS is a count past pids_max; the
 *     host's pids limit only bounds the runtime's host threads.
 *   - memory: gVisor ends the whole sandbox when its cgroup runs out. The
 *     result carries killed_by MEMORY and the partial output, the sandbox is
 *     dead, and the next execute on it is ExecutionUnavailable: provision
 *     anew. memory_bytes covers the sentry's own memory too, plus
 *     AIRLOCK_GVISOR_RUNTIME_MEMORY for the runtime.
 */

#include <stddef.h>
#include <stdint.h>

#include "airlock/port/exec.h"
#include "airlock/proxy.h"
#include "airlock/settings.h" /* airlock_gvisor_platform */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct airlock_gvisor_config {
	const char *image_store;      /* where images live (settings' sandbox.image_store) */
	const char *volume_dir;       /* service-owned dir for the volumes' unnamed backing files
	                               * (NULL: AIRLOCK_VOLUME_DIR) */
	const char *state_dir;        /* service-owned: bundles, mounts, runsc's state
	                               * (NULL: AIRLOCK_GVISOR_STATE_DIR) */
	const char *runsc;            /* the runtime binary (NULL: AIRLOCK_GVISOR_RUNSC) */
	airlock_gvisor_platform platform;
	int64_t start_budget_seconds; /* provision past this is ExecutionUnavailable (30) */
	/* Egress, exactly as native's (airlock/native.h): the sandbox reaches
	 * the proxy's listener, planted in a network namespace that holds only
	 * lo, when both yeses are given; otherwise it has loopback only. */
	const airlock_egress_policy *egress_policy;
	airlock_proxy *egress_proxy;
	/* service.bridge_address, exactly as native's (airlock/native.h). */
	const char *bridge_address;
} airlock_gvisor_config;

#define AIRLOCK_GVISOR_STATE_DIR "/run/airlock/gvisor"
#define AIRLOCK_GVISOR_RUNSC "/usr/bin/runsc"
/* Added to memory_bytes for the runtime's own memory (sentry and gofer,
 * measured at 30-40 MiB idle here): the command keeps the memory the spec
 * gives it. */
#define AIRLOCK_GVISOR_RUNTIME_MEMORY (64ll << 20)

typedef struct airlock_gvisor airlock_gvisor;

/* Checks runsc and the host, picks the platform, opens the image store
 * and the state directory (shared by every service on the host; each
 * flocks what is its own) and removes what a crashed service left there
 * and nothing a live one holds (its runsc sandboxes, mounts, bundles and
 * cgroups). Each sandbox's runtime runs under a keeper, a
 * child subreaper of the service that reaps what runsc leaves, so the
 * calling process gets no children it did not start.
 * ExecutionUnavailable with the reason when this host cannot run it. */
int airlock_gvisor_new(const airlock_gvisor_config *cfg, airlock_gvisor **ret, airlock_error *err);
const airlock_exec_ops *airlock_gvisor_ops(void);

/* Whether this host can run the gvisor mechanism with platform want
 * (runsc: NULL for AIRLOCK_GVISOR_RUNSC): 0, the platform it would use in
 * *ret_platform (NULL ok) and why that one in why; or -errno and why not
 * in why (for `airlock doctor`). */
int airlock_gvisor_probe(airlock_gvisor_platform want, const char *runsc,
                         airlock_gvisor_platform *ret_platform, char *why, size_t size);

/* Live sandboxes (for leak checks). */
size_t airlock_gvisor_live_count(airlock_gvisor *g);

#ifdef __cplusplus
}
#endif
#endif
