/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_TESTS_UNIX_CONNECT_H
#define AIRLOCK_TESTS_UNIX_CONNECT_H

/* A client's connection to a Unix socket (test_worker_api, and
 * bench_worker_leases's HTTP clients): the descriptor, or -1 with errno
 * (ENAMETOOLONG for a path sockaddr_un cannot hold). */

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static inline int unix_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(path);
	if (len >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa.sun_path, path, len + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

#endif
