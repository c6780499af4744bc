/* SPDX-License-Identifier: Apache-2.0 */
/* A sealed executable memfd (sealed.h). */
#include "util/sealed.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

/* Linux 6.3: memfd_create must be told whether the file may be executed
 * (vm.memfd_noexec decides the default, and 2 forbids MFD_EXEC). */
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#ifndef F_SEAL_EXEC
#define F_SEAL_EXEC 0x0020
#endif

int util_sealed_exec_memfd(const char *name, const unsigned char *bytes, size_t len)
{
	const unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
	int fd = memfd_create(name, flags | MFD_EXEC);
	/* EINVAL: a kernel older than 6.3, which knows no MFD_EXEC and
	 * executes every memfd. */
	if (fd < 0 && errno == EINVAL)
		fd = memfd_create(name, flags);
	if (fd < 0)
		return -errno;
	int r = util_write_all(fd, bytes, len);
	if (r < 0) {
		close(fd);
		return r;
	}
	int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
	/* F_SEAL_EXEC (Linux 6.3) freezes the mode bits too; an older kernel
	 * refuses the unknown seal with EINVAL and the mode stays 0555 owned
	 * by root, which only root could change. */
	if (fchmod(fd, 0555) < 0 || fcntl(fd, F_ADD_SEALS, seals) < 0 ||
	    (fcntl(fd, F_ADD_SEALS, F_SEAL_EXEC) < 0 && errno != EINVAL) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}
