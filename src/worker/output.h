/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_WORKER_OUTPUT_H
#define AIRLOCK_WORKER_OUTPUT_H

/*
 * Output that outgrows the context (the specification's truncation rule,
 * "sandbox.run_command"): the service captures up to four times the tool's
 * max_output_bytes per stream (its hard ceiling: past it the command is
 * killed, OUTPUT_LIMIT); a stream longer than max_output_bytes reaches the
 * model as a head-and-tail excerpt within max_output_bytes, with a marker
 * naming how many bytes were left out, and the whole captured stream is
 * kept as a TOOL_OUTPUT artifact whose ArtifactRef is in the result
 * (stdout_artifact, stderr_artifact). The model does not need to run the
 * command again to see the rest.
 */

#include <stdbool.h>
#include <stddef.h>

#include "airlock/run_command.h"
#include "airlock/tools.h"
#include "airlock/types.h"
#include "worker/artifacts.h"

/* What the model is shown per stream, and what the service captures
 * (airlock/tools.h: every door applies the same rule). */
#define WORKER_TOOL_OUTPUT_BYTES AIRLOCK_TOOL_OUTPUT_BYTES
#define WORKER_TOOL_OUTPUT_CEILING AIRLOCK_TOOL_OUTPUT_CEILING

/* The excerpt of data (len > limit) within limit bytes: the head, a marker
 * saying how many bytes were left out and where the whole is (note: the
 * artifact's id, or why it could not be kept), the tail. Cuts fall on
 * UTF-8 character boundaries where the bytes are UTF-8. *ret malloc'd; 0,
 * or -ENOMEM. limit must leave room for the marker (at least 1 KiB). */
int worker_output_excerpt(const unsigned char *data, size_t len, size_t limit, const char *note,
                          unsigned char **ret, size_t *ret_len);

/* airlock_tool_output_apply with the whole of each stream kept through
 * the ArtifactWriter w (origin TOOL_OUTPUT, trust EXTERNAL_UNTRUSTED). A
 * stream the store refuses (the tenant's cap, a full disk) is still cut,
 * and its marker says why the whole was not kept. */
int worker_output_apply(const worker_artifact_writer *w, airlock_execution_result *res,
                        airlock_artifact_ref refs[2], bool has_ref[2]);

#endif
