/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock run --stdin: the command's standard input, read whole before any
 * sandbox exists, capped, and bounded in time when its writer is another
 * program.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "cli/common.h"
#include "cli/run.h"
#include "util/cleanup.h"

/* One read's worth, and the buffer's first size. */
#define STDIN_CHUNK 65536

/* The input as it is read. AIRLOCK_RUN_STDIN_MAX is a refusal, never a
 * cut: a command given part of its input would run on something nobody
 * wrote. */
typedef struct stdin_buf {
	unsigned char *data;
	size_t len, alloc;
} stdin_buf;

/* 0, -EFBIG when the n bytes would pass the cap, -ENOMEM. */
static int stdin_buf_add(stdin_buf *b, const void *p, size_t n)
{
	if (n > AIRLOCK_RUN_STDIN_MAX - b->len)
		return -EFBIG;
	if (n > b->alloc - b->len) {
		size_t want = b->alloc ? b->alloc : STDIN_CHUNK;
		while (want < b->len + n)
			want *= 2;
		if (want > AIRLOCK_RUN_STDIN_MAX)
			want = AIRLOCK_RUN_STDIN_MAX;
		unsigned char *d = realloc(b->data, want);
		if (!d)
			return -ENOMEM;
		b->data = d;
		b->alloc = want;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

/* Hand the bytes over when r is 0 (an empty input is a buffer of length 0,
 * not NULL: it is still an input); free them otherwise. Returns r, or
 * -ENOMEM. */
static int stdin_buf_take(stdin_buf *b, int r, unsigned char **ret, size_t *ret_len)
{
	if (r == 0 && !b->data && !(b->data = malloc(1)))
		r = -ENOMEM;
	if (r < 0) {
		free(b->data);
		return r;
	}
	*ret = b->data;
	*ret_len = b->len;
	return 0;
}

static void stdin_error(const char *path, const char *why)
{
	fputs("airlock run: --stdin ", stderr);
	cli_fputs_escaped(stderr, path);
	fprintf(stderr, ": %s\n", why);
}

/* Read a pipe or a FIFO until every writer has closed it, within
 * deadline_ms (monotonic) and the stdin cap, or until one of the watched
 * signals arrives on sfd. The writer is another program: it may never close
 * (`sleep inf | airlock run ...`), so nothing here blocks without a bound.
 * poll says when the pipe has bytes or has lost its writers; a FIFO opened
 * before its writer does not report the hang-up of a writer it never had
 * (the kernel suppresses it), so a FIFO nobody has opened yet is waited on,
 * not taken as empty. Each read is non-blocking per call (RWF_NOWAIT), so a
 * reader that shares our stdin and takes the bytes first cannot make it
 * block, and the description we share with the shell is left as it is.
 * Returns 0, -EFBIG past the cap, -ETIME past the deadline, -EINTR for a
 * signal, or -errno. */
static int read_pipe_capped(int fd, int sfd, int64_t deadline_ms, unsigned char **ret,
                            size_t *ret_len)
{
	stdin_buf b = { 0 };
	char chunk[STDIN_CHUNK];
	bool nowait = true;
	int r = 0;
	for (;;) {
		int64_t left = deadline_ms - cli_monotonic_ms();
		if (left <= 0) {
			r = -ETIME;
			break;
		}
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
		int n = poll(p, sfd >= 0 ? 2 : 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0)
			continue; /* the deadline, checked above */
		if (sfd >= 0 && (p[1].revents & POLLIN)) {
			r = -EINTR;
			break;
		}
		if (p[0].revents & POLLNVAL) {
			r = -EBADF;
			break;
		}
		if (!p[0].revents)
			continue;
		struct iovec iov = { .iov_base = chunk, .iov_len = sizeof(chunk) };
		ssize_t got = nowait ? preadv2(fd, &iov, 1, -1, RWF_NOWAIT) : -1;
		if (nowait && got < 0 && errno == EOPNOTSUPP)
			nowait = false;
		/* Without RWF_NOWAIT (a kernel whose pipes lack it) the read
		 * follows a poll that saw bytes or the hang-up: it returns at
		 * once unless another reader of the same pipe took them. */
		if (!nowait)
			got = read(fd, chunk, sizeof(chunk));
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (got < 0) {
			r = -errno;
			break;
		}
		if (got == 0)
			break; /* poll saw the hang-up: no writer is left */
		r = stdin_buf_add(&b, chunk, (size_t)got);
		if (r < 0)
			break;
	}
	return stdin_buf_take(&b, r, ret, ret_len);
}

/* A regular file, read to its end: its size is not trusted (it can grow
 * while it is read), so the cap holds here as for a pipe. */
static int read_file_capped(int fd, unsigned char **ret, size_t *ret_len)
{
	stdin_buf b = { 0 };
	char chunk[STDIN_CHUNK];
	int r = 0;
	for (;;) {
		ssize_t got = read(fd, chunk, sizeof(chunk));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			r = got < 0 ? -errno : 0;
			break;
		}
		r = stdin_buf_add(&b, chunk, (size_t)got);
		if (r < 0)
			break;
	}
	return stdin_buf_take(&b, r, ret, ret_len);
}

/* --stdin PATH, or - for airlock run's own standard input: a regular file
 * (its end is known: read whole) or a pipe or FIFO (`producer | airlock run
 * --stdin - ...`, `--stdin <(producer)`, a named FIFO), read until its
 * writers close it. Either way the cap is AIRLOCK_RUN_STDIN_MAX, and more is
 * refused, never cut: a command given part of its input would run on
 * something nobody wrote. A pipe must close within the start budget
 * (budget_s, limits.defaults.start_budget_seconds): the input is read
 * before any sandbox exists, and a writer that never closes is an error
 * naming the budget rather than an airlock run that waits forever. The
 * null device (`--stdin /dev/null`, `--stdin - </dev/null`) is an empty
 * input: it is known by its device number (1:3 on Linux), not its name,
 * so no other device passes for it. Any other device, a directory, a
 * terminal or a socket is refused. The open is non-blocking, so a FIFO
 * with no writer does not hang the open itself. */
stdin_read read_stdin(const char *path, int64_t budget_s, run_signals *rs,
                      unsigned char **ret, size_t *ret_len)
{
	bool own_stdin = strcmp(path, "-") == 0;
	_cleanup_close_ int opened = -1;
	if (!own_stdin) {
		opened = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		if (opened < 0) {
			stdin_error(path, strerror(errno));
			return STDIN_READ_REFUSED;
		}
	}
	int fd = own_stdin ? STDIN_FILENO : opened;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		stdin_error(path, strerror(errno));
		return STDIN_READ_REFUSED;
	}
	int r;
	if (S_ISREG(st.st_mode)) {
		r = read_file_capped(fd, ret, ret_len);
	} else if (S_ISFIFO(st.st_mode)) {
		r = read_pipe_capped(fd, rs->sfd, cli_monotonic_ms() + budget_s * 1000, ret, ret_len);
	} else if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) {
		*ret = calloc(1, 1);
		*ret_len = 0;
		r = *ret ? 0 : -ENOMEM;
	} else {
		stdin_error(path, S_ISDIR(st.st_mode) ? "a directory, not a regular file or a pipe"
		                  : isatty(fd)         ? "a terminal, not a regular file or a pipe"
		                                       : "not a regular file or a pipe (a device or a socket)");
		return STDIN_READ_REFUSED;
	}
	if (r == -EINTR) {
		signals_take_pending(rs);
		return STDIN_READ_SIGNAL;
	}
	if (r == -ETIME) {
		char why[192];
		snprintf(why, sizeof(why),
		         "the pipe was not closed within the start budget of %lld s "
		         "(limits.defaults.start_budget_seconds): its writer must finish first",
		         (long long)budget_s);
		stdin_error(path, why);
		return STDIN_READ_REFUSED;
	}
	if (r < 0) {
		stdin_error(path, r == -EFBIG ? "larger than the 16 MiB cap" : strerror(-r));
		return STDIN_READ_REFUSED;
	}
	return STDIN_READ_OK;
}
