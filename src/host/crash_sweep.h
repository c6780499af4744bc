/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_HOST_CRASH_SWEEP_H
#define AIRLOCK_HOST_CRASH_SWEEP_H

/*
 * What a mechanism calls once at start, before it provisions anything:
 * remove what a crashed earlier run of the host facilities left.
 *
 *   - cgroups: groups named airlock-* under the service's own cgroup whose
 *     owner died, killing what is in them (host_cgroup_sweep; a live
 *     owner's groups are flocked and left alone);
 *   - the image store's tmp/: builds and imports whose process died
 *     (flock liveness again, and an age: image_store.h, STALE_TMP_SECONDS).
 *
 * Loop devices and workspace volumes need nothing: a loop device is set to
 * autoclear and a volume's backing file was never named, so both went with
 * the processes that held them.
 */

#include "airlock/error.h"
#include "airlock/image_store.h"

/* images may be NULL (no store to sweep). *ret_cgroups_removed (may be
 * NULL) counts the sandbox groups removed. Errors are the cgroup sweep's
 * (host_cgroup_sweep); the store's sweep only ever removes what it can. */
int host_crash_sweep(airlock_image_store *images, unsigned *ret_cgroups_removed,
                     airlock_error *err);

#endif
