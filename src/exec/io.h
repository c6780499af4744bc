/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EXEC_IO_H
#define AIRLOCK_EXEC_IO_H

/*
 * What every mechanism's execute does the same way around a running
 * command: its capped output streams, its stdin fed without SIGPIPE, the
 * working directory's path inside the sandbox, and the workspace volume's
 * fullness sampled for the DISK reason. Mechanism-free: a stream is a
 * descriptor and a buffer, a volume is host/volume.h's.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "airlock/error.h"
#include "airlock/egress.h"
#include "airlock/port/exec.h"
#include "airlock/proxy.h"
#include "airlock/types.h"
#include "core/snapshot.h"
#include "host/volume.h"
#include "util/util.h"

/* One of the command's output pipes and what was read from it, capped by
 * the buffer's cap (the command's maximum_output_bytes). */
typedef struct exec_stream {
	int fd; /* -1 once closed: EOF, an error, or the cap */
	util_buf buf;
	bool truncated; /* the cap was hit */
	/* The caller's observer (airlock_exec_request.on_output), told of the
	 * bytes of buf as they arrive: buf[0, sent) has been delivered. */
	airlock_output_fn on_output;
	void *output_arg;
	airlock_output_stream which;
	size_t sent;
	/* A last line starting with this prefix is held back until the end
	 * (exec_stream_finish): the mechanism may still cut it from the result
	 * (gVisor's runtime line), and an observer sees exactly the result's
	 * bytes. NULL: nothing is held. */
	const char *hold_prefix;
} exec_stream;

/* The command's two streams, closed, empty, capped at its
 * maximum_output_bytes and watched for the request's observer, if any. */
void exec_streams_init(exec_stream *out, exec_stream *errs, const airlock_exec_request *req);

/* Read what is there; true when the cap was hit (the caller kills). */
bool exec_stream_read(exec_stream *s);

/* Deliver what is left of buf to the observer (exec_result_common does,
 * once the mechanism has its final bytes). */
void exec_stream_finish(exec_stream *s);

/* A write to the command's stdin that cannot raise SIGPIPE: a command that
 * does not read its input (or exits before reading all of it) is not an
 * error, and the service must not die of it whatever its embedding process
 * did with SIGPIPE. EPIPE is what the caller sees. */
ssize_t exec_write_nosigpipe(int fd, const void *p, size_t n);

/* The sandbox path of a working directory relative to the workspace root
 * ("." is the root); -ENAMETOOLONG when it does not fit. */
int exec_make_cwd(const char *rel, char *out, size_t size);

/* The workspace volume's fullness, sampled while a command runs. */
typedef struct exec_disk_watch {
	uint64_t bfree0, ffree0; /* at the command's start */
	bool moved;              /* not full, or the counts moved, at some sample */
	int64_t full_since;      /* monotonic ms of the first of the full samples now running; 0 */
} exec_disk_watch;

/* One sample (first: the command's start) at now (monotonic ms). */
int exec_disk_sample(const host_volume *v, exec_disk_watch *d, bool first, int64_t now,
                     bool *ret_full, airlock_error *err);

/* The command environment of a sandbox: "NAME=value" strings from the
 * built environment (without PWD, which is set per command), with the
 * proxy variables when proxied (tier 2 wins: they replace any tier-1
 * value). *ret has room for two more entries (PWD and the NULL); freed
 * entry by entry, then itself, also after a failure. */
int exec_env_build(const airlock_env *env, bool proxied, char ***ret, size_t *ret_n,
                   airlock_error *err);

/* The two yeses of an allowlist spec (the specification, "Egress needs two
 * independent yeses"): the operator's policy (NULL: deny) must cover the
 * spec's, and a proxy must be running. *ret_proxied: the sandbox gets the
 * proxy's listener (the allowlist names a destination). */
int exec_egress_decide(const airlock_egress_policy *policy, const airlock_proxy *proxy,
                       const airlock_environment_spec *spec, bool *ret_proxied,
                       airlock_error *err);

/* Write what the command's stdin pipe (*fd, non-blocking) takes now of
 * cmd's stdin from *off; close it (*fd = -1) when all is written or the
 * command will not take more. */
void exec_stdin_feed(int *fd, const airlock_execution_command *cmd, size_t *off);

/* The result's common part, once the reason or exit code is set: the
 * truncation flags, files_changed (before vs after under the volume's root
 * rootfd, at most limits->workspace_bytes bytes and AIRLOCK_SNAPSHOT_HASH_MS
 * of hashing, and at most the command's CPU share of that time in the
 * hashing thread's CPU), the output (taken from the streams) and
 * duration_ms. */
int exec_result_common(airlock_execution_result *ret, exec_stream *out, exec_stream *errs,
                       const airlock_snapshot *before, const airlock_snapshot *after,
                       int64_t files_changed_max, const airlock_resource_limits *limits,
                       int rootfd, int64_t duration_ms, airlock_error *err);

#endif
