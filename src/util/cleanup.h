/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_UTIL_CLEANUP_H
#define AIRLOCK_UTIL_CLEANUP_H

/*
 * The one home for cleanup attributes (systemd's fd-util.h, crun's
 * cleanup_* macros): a variable declared with one of these is released on
 * every path out of its scope, so an early return cannot leak it. TAKE_PTR
 * and TAKE_FD move ownership out (the cleanup then sees NULL / -1).
 */

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static inline void util_freep(void *p) { free(*(void **)p); }
/* A NUL-terminated string that may hold a secret (a spec's environment,
 * the bridge's token): its bytes are wiped before it is freed. */
static inline void util_wipe_freep(char **p)
{
	if (*p)
		explicit_bzero(*p, strlen(*p));
	free(*p);
}
static inline void util_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}
static inline void util_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}
static inline void util_closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}
/* A pipe pair, int p[2] = {-1, -1}: both ends closed that are still open. */
static inline void util_close_pairp(int (*p)[2])
{
	for (int i = 0; i < 2; i++)
		if ((*p)[i] >= 0)
			close((*p)[i]);
}
/* A child we started and still own: killed and reaped, so an early return
 * leaves neither a running process nor a zombie (crun's cleanup_pid). Only
 * for a pid this process forked and has not reaped: then the number cannot
 * have been reused, because an unreaped child keeps it. */
static inline void util_kill_reapp(pid_t *pid)
{
	if (*pid <= 0)
		return;
	kill(*pid, SIGKILL);
	while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
		;
}

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define _cleanup_free_ __attribute__((cleanup(util_freep)))
#define _cleanup_wipe_free_ __attribute__((cleanup(util_wipe_freep)))
#define _cleanup_close_ __attribute__((cleanup(util_closep)))
#define _cleanup_fclose_ __attribute__((cleanup(util_fclosep)))
#define _cleanup_closedir_ __attribute__((cleanup(util_closedirp)))
#define _cleanup_close_pair_ __attribute__((cleanup(util_close_pairp)))
#define _cleanup_kill_reap_ __attribute__((cleanup(util_kill_reapp)))

/* Move ownership out of a cleanup-annotated variable. */
#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) _tp = (p);                                                           \
		(p) = NULL;                                                                        \
		_tp;                                                                               \
	})
#define TAKE_FD(fd)                                                                                \
	({                                                                                         \
		int _tf = (fd);                                                                    \
		(fd) = -1;                                                                         \
		_tf;                                                                               \
	})
#define TAKE_PID(pid)                                                                              \
	({                                                                                         \
		pid_t _tpid = (pid);                                                               \
		(pid) = 0;                                                                         \
		_tpid;                                                                             \
	})

#endif
