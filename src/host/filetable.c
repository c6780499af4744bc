/* SPDX-License-Identifier: Apache-2.0 */
/* The host's file table (filetable.h). */
#include "host/filetable.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "util/fault.h"

/* What an operator sets: the value systemd (since v240) gives fs.file-max
 * at every boot, since the entries are charged to memory cgroups. */
#define FILE_MAX_SETTING "fs.file-max = 9223372036854775807 (scripts/setup.sh writes it to " \
	"/etc/sysctl.d/60-airlock.conf)"

static const char *file_nr_path = "/proc/sys/fs/file-nr";

void host_files_source(const char *path)
{
	file_nr_path = path ? path : "/proc/sys/fs/file-nr";
}

/* fs.file-nr: "allocated unused max". 0, or -errno (ENFILE when even this
 * open was refused: the table is full). */
static int host_files_read(long long *ret_open, long long *ret_max)
{
	int fd = open(file_nr_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char buf[96];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	buf[n] = '\0';
	if (sscanf(buf, "%lld %*u %lld", ret_open, ret_max) != 2 || *ret_open < 0 || *ret_max < 0)
		return -EPROTO;
	return 0;
}

int64_t host_files_needed(int64_t memory_bytes)
{
	if (memory_bytes < 0)
		memory_bytes = 0;
	return memory_bytes / AIRLOCK_HOST_FILE_CHARGE + AIRLOCK_HOST_FILES_FREE_MIN;
}

/* Whether the table has fewer than need free entries (-1 when the counts
 * cannot be read: then the answer is no, unless the read itself met
 * ENFILE), with the counts (-1 when unread). */
static bool host_files_short(int64_t need, long long *open_, long long *max)
{
	*open_ = *max = -1;
	int r = host_files_read(open_, max);
	if (r == -ENFILE)
		return true;
	return r == 0 && *max - *open_ < need;
}

/* The smallest fs.file-max that leaves need entries free past open_. */
static long long host_files_max_needed(long long open_, int64_t need)
{
	return open_ > LLONG_MAX - need ? LLONG_MAX : open_ + need;
}

int host_files_check(int64_t memory_bytes, airlock_error *err)
{
	int64_t need = host_files_needed(memory_bytes);
	long long open_, max;
	bool short_ = host_files_short(need, &open_, &max);
	bool injected = util_fault("provision.host_files");
	if (!short_ && !injected)
		return 0;
	return airlock_error_set(
		err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		"the host's file table has no room for this sandbox: fs.file-max is %lld with %lld "
		"entries allocated, and a sandbox with memory_bytes %lld can hold %lld (a file mapped "
		"and then closed keeps its entry, at %lld bytes of the sandbox's memory each) with %d "
		"left free for the host, so fs.file-max must be at least %lld; set %s%s",
		max, open_, (long long)memory_bytes, (long long)(need - AIRLOCK_HOST_FILES_FREE_MIN),
		(long long)AIRLOCK_HOST_FILE_CHARGE, AIRLOCK_HOST_FILES_FREE_MIN,
		host_files_max_needed(open_ < 0 ? 0 : open_, need), FILE_MAX_SETTING,
		injected ? " (fault injected at provision.host_files)" : "");
}

int host_files_explain(int r, airlock_error *err)
{
	if (r >= 0 || !err)
		return r;
	long long open_, max;
	bool full = host_files_short(AIRLOCK_HOST_FILES_FREE_MIN, &open_, &max);
	if (err->errnum != ENFILE && !full)
		return r;
	/* ExecutionUnavailable whatever the step's class: a full host table
	 * is the host out of capacity, which a retry elsewhere or later can
	 * meet, not the step's own fault; the step's words and errno stay. */
	return airlock_error_wrap(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, err,
	                          "the host's file table is full (fs.file-max %lld, %lld open)",
	                          max, open_);
}

int host_files_capacity(int64_t memory_bytes, char *msg, size_t size)
{
	int64_t need = host_files_needed(memory_bytes);
	long long open_ = -1, max = -1;
	int r = host_files_read(&open_, &max);
	if (r < 0)
		return r;
	if (max - open_ >= need)
		return 1;
	if (msg && size)
		snprintf(msg, size,
		         "fs.file-max is %lld with %lld entries allocated: a sandbox at memory_bytes "
		         "%lld can hold %lld host files (a file mapped and then closed keeps its entry), "
		         "so provisions at that limit are refused until fs.file-max is at least %lld; "
		         "set %s",
		         max, open_, (long long)memory_bytes,
		         (long long)(need - AIRLOCK_HOST_FILES_FREE_MIN), host_files_max_needed(open_, need),
		         FILE_MAX_SETTING);
	return 0;
}
