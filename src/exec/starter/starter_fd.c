/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The starter's sealed copy (starter.h). The program is embedded in the
 * service (exec_starter_blob, generated at build time from starter.c), not
 * read from an installed path: nothing on the host's disk is trusted to be
 * the starter, and nothing on the host's disk is what a sandbox reaches
 * through /proc/self/exe. The memfd is written once, made read-only and
 * executable for everyone (the sandbox's uid executes it; host root owns
 * it), and sealed, so no one, root included, can change its bytes or its
 * size while any sandbox may execute it (util/sealed.h).
 */
#include "exec/starter/starter.h"

#include <errno.h>
#include <stddef.h>

#include "util/sealed.h"

extern const unsigned char exec_starter_blob[];
extern const size_t exec_starter_blob_len;

int exec_starter_open(int *ret_fd, airlock_error *err)
{
	int fd = util_sealed_exec_memfd("airlock-starter", exec_starter_blob,
	                                exec_starter_blob_len);
	if (fd == -EACCES || fd == -EPERM)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -fd,
		                         "native: the command starter needs an executable memfd, "
		                         "and vm.memfd_noexec forbids it (set it to 0 or 1)");
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -fd,
		                         "native: the starter's sealed memfd");
	*ret_fd = fd;
	return 0;
}
