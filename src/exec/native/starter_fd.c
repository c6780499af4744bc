/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The starter's sealed copy (starter.h). The program is embedded in the
 * service (native_starter_blob, generated at build time from starter.c), not
 * read from an installed path: nothing on the host's disk is trusted to be
 * the starter, and nothing on the host's disk is what a sandbox reaches
 * through /proc/self/exe. The memfd is written once, made read-only and
 * executable for everyone (the sandbox's uid executes it; host root owns
 * it), and sealed, so no one, root included, can change its bytes or its
 * size while any sandbox may execute it.
 */
#include "exec/native/starter.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

extern const unsigned char native_starter_blob[];
extern const size_t native_starter_blob_len;

/* Linux 6.3: memfd_create must be told whether the file may be executed
 * (vm.memfd_noexec decides the default, and 2 forbids MFD_EXEC). */
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#ifndef F_SEAL_EXEC
#define F_SEAL_EXEC 0x0020
#endif

int native_starter_open(int *ret_fd, airlock_error *err)
{
	const unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
	int fd = memfd_create("airlock-starter", flags | MFD_EXEC);
	/* EINVAL: a kernel older than 6.3, which knows no MFD_EXEC and
	 * executes every memfd. */
	if (fd < 0 && errno == EINVAL)
		fd = memfd_create("airlock-starter", flags);
	if (fd < 0) {
		if (errno == EACCES || errno == EPERM)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
			                         "native: the command starter needs an executable memfd, "
			                         "and vm.memfd_noexec forbids it (set it to 0 or 1)");
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "native: starter memfd");
	}
	int w = util_write_all(fd, native_starter_blob, native_starter_blob_len);
	if (w < 0) {
		close(fd);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -w, "native: writing the starter");
	}
	int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
	if (fchmod(fd, 0555) < 0 || fcntl(fd, F_ADD_SEALS, seals) < 0) {
		int e = errno;
		close(fd);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "native: sealing the starter");
	}
	/* F_SEAL_EXEC (Linux 6.3) freezes the mode bits too; an older kernel
	 * refuses the unknown seal with EINVAL and the mode stays 0555 owned
	 * by root, which only root could change. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_EXEC) < 0 && errno != EINVAL) {
		int e = errno;
		close(fd);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "native: sealing the starter");
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL) < 0) {
		int e = errno;
		close(fd);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "native: sealing the starter");
	}
	*ret_fd = fd;
	return 0;
}
