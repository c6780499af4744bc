/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_UTIL_RUN_H
#define AIRLOCK_UTIL_RUN_H

/*
 * Running an external program without a shell: fork, exec, wait with a time
 * limit, and keep the end of what it printed. Knows nothing about sandboxes;
 * where the program is found and what environment it gets are the caller's
 * policy.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct util_run_options {
	/* Absolute path of the program; argv and envp NULL-terminated. All of
	 * it is prepared by the caller: between fork and exec nothing is
	 * allocated. (execve's prototype predates const; it does not write
	 * them.) */
	const char *path;
	char *const *argv;
	char *const *envp;
	/* The last output_max bytes of stdout and stderr (one pipe) are kept;
	 * everything before is read and dropped, so a chatty program cannot
	 * block on a full pipe. */
	size_t output_max;
	/* Past it the program (its group, with own_process_group) is killed. */
	int64_t timeout_ms;
	/* After the program exits, its output is read for at most this long
	 * (still bounded by timeout_ms); 0: until EOF or timeout_ms. */
	int64_t drain_ms;
	/* The program leads a process group of its own; the whole group is
	 * killed on timeout and once the leader has exited, and the call
	 * returns only when the group is gone (at most 5 s after the kill). */
	bool own_process_group;
	/* The program runs in a new mount namespace whose mounts propagate
	 * nowhere, so whatever it mounts disappears with it (needs
	 * CAP_SYS_ADMIN; else the call fails naming it). */
	bool private_mounts;
} util_run_options;

typedef struct util_run_result {
	int status;       /* raw wait status of the program */
	bool timed_out;   /* killed because it had not exited within timeout_ms */
	bool output_eof;  /* its output was read to the end */
	char *output;     /* the tail, malloc'd, NUL-terminated (NUL not in len) */
	size_t output_len;
	/* On failure, the step that failed ("fork", "pipe", ...). */
	const char *failed;
} util_run_result;

/*
 * Run o->path with stdin from /dev/null, stdout and stderr captured, every
 * other descriptor closed, signal handlers default and none blocked, and
 * PR_SET_PDEATHSIG SIGKILL (the program dies with us). 0 when the program
 * ran, whatever its status (see ret->status, ret->timed_out); -errno when it
 * could not be run or waited for (ret->failed names the step, "exec" when
 * the program could not be executed; a child already started is then
 * killed and reaped). The child is started by util/spawn.h. ret is always initialised;
 * release it with util_run_result_clear.
 */
int util_run(const util_run_options *o, util_run_result *ret);
void util_run_result_clear(util_run_result *r);

#endif
