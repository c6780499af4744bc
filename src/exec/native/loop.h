/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_NATIVE_LOOP_H
#define AIRLOCK_NATIVE_LOOP_H

/*
 * Loop devices, by descriptor. A loop device is configured over a backing
 * file descriptor with LOOP_CTL_GET_FREE + LOOP_CONFIGURE, and set to
 * autoclear: when the last reference (our descriptor, a mount) goes, the
 * kernel detaches it, so a crashed service leaks no loop device.
 */

#include <stdbool.h>
#include <stdint.h>

#include "airlock/error.h"

typedef struct native_loop {
	int fd;        /* the loop device, O_CLOEXEC */
	int number;    /* N of /dev/loopN */
	char path[32]; /* "/dev/loopN": a device path, never a workspace path */
} native_loop;

/* Attach backing_fd (not taken). read_only sets LO_FLAGS_READ_ONLY.
 * Retries when another process takes the free device first. */
int native_loop_attach(int backing_fd, bool read_only, native_loop *ret, airlock_error *err);

/* Close our reference (autoclear detaches once nothing else holds it). */
void native_loop_release(native_loop *l);

#endif
