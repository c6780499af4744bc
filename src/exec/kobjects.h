/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EXEC_KOBJECTS_H
#define AIRLOCK_EXEC_KOBJECTS_H

/*
 * What each mechanism derives from a sandbox's limits to bound the kernel
 * objects its processes share with the host (airlock/caps.h, at
 * AIRLOCK_SANDBOX_NOFILE, gives the arithmetic).
 */

#include <stdint.h>

#include "airlock/caps.h"
#include "airlock/types.h"

/* RLIMIT_NOFILE for every process of a sandbox with these limits:
 * memory_bytes / (pids_max * AIRLOCK_SANDBOX_FILE_COST), clamped to
 * [AIRLOCK_SANDBOX_NOFILE_MIN, AIRLOCK_SANDBOX_NOFILE]. */
static inline uint64_t exec_sandbox_nofile(const airlock_resource_limits *l)
{
	int64_t pids = l->pids_max > 0 ? l->pids_max : 1;
	int64_t mem = l->memory_bytes > 0 ? l->memory_bytes : 0;
	int64_t n = mem / AIRLOCK_SANDBOX_FILE_COST / pids;
	if (n > AIRLOCK_SANDBOX_NOFILE)
		n = AIRLOCK_SANDBOX_NOFILE;
	if (n < AIRLOCK_SANDBOX_NOFILE_MIN)
		n = AIRLOCK_SANDBOX_NOFILE_MIN;
	return (uint64_t)n;
}

/* The sandbox's budget of inet sockets (host/sockbudget.h), all its
 * processes together: memory_bytes / AIRLOCK_SANDBOX_SOCKET_COST, clamped
 * to [AIRLOCK_SANDBOX_SOCKETS_MIN, AIRLOCK_SANDBOX_SOCKETS_MAX]. */
static inline uint32_t exec_sandbox_sockets(const airlock_resource_limits *l)
{
	int64_t mem = l->memory_bytes > 0 ? l->memory_bytes : 0;
	int64_t n = mem / AIRLOCK_SANDBOX_SOCKET_COST;
	if (n > AIRLOCK_SANDBOX_SOCKETS_MAX)
		n = AIRLOCK_SANDBOX_SOCKETS_MAX;
	if (n < AIRLOCK_SANDBOX_SOCKETS_MIN)
		n = AIRLOCK_SANDBOX_SOCKETS_MIN;
	return (uint32_t)n;
}

#endif
