/* SPDX-License-Identifier: Apache-2.0 */
/* The host's file table (filetable.h). */
#include "host/filetable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "util/fault.h"

/* /proc/sys/fs/file-nr: "allocated unused max". 0, or -errno (ENFILE when
 * even this open was refused: the table is full). */
static int host_files_read(long long *ret_open, long long *ret_max)
{
	int fd = open("/proc/sys/fs/file-nr", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char buf[96];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	buf[n] = '\0';
	if (sscanf(buf, "%lld %*u %lld", ret_open, ret_max) != 2)
		return -EPROTO;
	return 0;
}

/* Whether the table is full (fewer than AIRLOCK_HOST_FILES_FREE_MIN free),
 * with the counts when they could be read (-1 otherwise). */
static bool host_files_full(long long *open_, long long *max)
{
	*open_ = *max = -1;
	int r = host_files_read(open_, max);
	if (r == -ENFILE)
		return true;
	return r == 0 && *max - *open_ < AIRLOCK_HOST_FILES_FREE_MIN;
}

int host_files_check(airlock_error *err)
{
	long long open_, max;
	bool full = host_files_full(&open_, &max);
	bool injected = util_fault("provision.host_files");
	if (!full && !injected)
		return 0;
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
	                         "the host's file table is full (fs.file-max %lld, %lld open, fewer "
	                         "than %d free)%s: no sandbox can start until the host closes files",
	                         max, open_, AIRLOCK_HOST_FILES_FREE_MIN,
	                         injected ? " (fault injected at provision.host_files)" : "");
}

int host_files_explain(int r, airlock_error *err)
{
	if (r >= 0 || !err)
		return r;
	long long open_, max;
	bool full = host_files_full(&open_, &max);
	if (err->errnum != ENFILE && !full)
		return r;
	char was[sizeof(err->message)];
	memcpy(was, err->message, sizeof(was));
	was[sizeof(was) - 1] = '\0';
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
	                         "the host's file table is full (fs.file-max %lld, %lld open): %s",
	                         max, open_, was);
}
