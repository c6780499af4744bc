/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_NATIVE_H
#define AIRLOCK_NATIVE_H

/*
 * The native mechanism: the development fallback built on Linux namespaces,
 * cgroups and seccomp (no Docker). Production refuses it through the
 * settings' startup check, like every mechanism outside {microvm, gvisor},
 * but it is built to hold against a determined program: most development
 * and all of CI run on it.
 *
 * A sandbox is: an init process (pid 1 of its own pid namespace) holding
 * mount, network (only lo), ipc, uts, cgroup and user namespaces; a
 * read-only root from an EROFS image named by digest; /proc with
 * hidepid=invisible,subset=pid; a minimal /dev; private /tmp and /dev/shm;
 * the workspace volume at /workspace; cgroups with the limits. Each command
 * is started by the service into those namespaces (setns), in the sandbox's
 * cmd cgroup, as uid/gid 1000 inside the user namespace (a per-sandbox
 * unprivileged host id outside it), with no capabilities, no_new_privs and
 * the seccomp filter, and every process it started is killed when it ends.
 */

#include <stddef.h>
#include <stdint.h>

#include "airlock/port/exec.h"
#include "airlock/proxy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct airlock_native_config {
	const char *image_store;      /* where images live (settings' sandbox.image_store) */
	const char *volume_dir;       /* service-owned dir for the volumes' unnamed backing files */
	int64_t start_budget_seconds; /* provision past this is ExecutionUnavailable (30) */
	/* Egress (the specification, "Egress needs two independent yeses").
	 * The operator's policy (NULL: deny) and the proxy that serves it (NULL:
	 * none running); both owned by the caller and outliving the mechanism.
	 * A sandbox reaches the proxy only when the operator's policy is an
	 * allowlist with a destination AND the spec's egress (the call's yes:
	 * the worker sends the allowlist only when the call's ExecutionTarget
	 * has network_enabled, and mode deny otherwise) is an allowlist inside
	 * it. Then a listener at AIRLOCK_SANDBOX_PROXY_ADDR:PORT (envbuild.h) is
	 * planted in the sandbox's network namespace and handed to the proxy with
	 * a copy of the spec's policy, and tier 2 gains the proxy variables. Otherwise the namespace holds only lo, with nothing
	 * listening, and the proxy never hears of the sandbox. */
	const airlock_egress_policy *egress_policy;
	airlock_proxy *egress_proxy;
	/* The host-wide lock file of sandbox host ids (NULL:
	 * AIRLOCK_NATIVE_HOST_ID_LOCK). Every service on a host must use the
	 * same one: a byte-range lock on byte N of it is host id slot N taken. */
	const char *host_id_lock;
	/* The settings' service.bridge_address ("unix:/path", owned by the
	 * caller; NULL: unset): where a sandbox's bridge connections are
	 * relayed (docs/bridge.md). Unset, a spec with a bridge is refused at
	 * provision (ExecutionRejected naming the setting). */
	const char *bridge_address;
} airlock_native_config;


#define AIRLOCK_NATIVE_HOST_ID_LOCK "/run/airlock/host-ids.lock"

typedef struct airlock_native airlock_native;

/* Opens the image store, builds the seccomp filter, checks the host
 * (cgroups, openat2, the new mount API) and removes what a crashed earlier
 * run left behind (cgroups named airlock-*). ExecutionUnavailable with the
 * reason when this host cannot run the mechanism. */
int airlock_native_new(const airlock_native_config *cfg, airlock_native **ret, airlock_error *err);
const airlock_exec_ops *airlock_native_ops(void);

/* Why this host cannot run the native mechanism, or 0 when it can (for
 * `airlock doctor`). Writes the reason into why. */
int airlock_native_probe(char *why, size_t size);

/* Live sandboxes (for leak checks). */
size_t airlock_native_live_count(airlock_native *n);

#ifdef __cplusplus
}
#endif
#endif
