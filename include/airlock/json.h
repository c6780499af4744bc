/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_JSON_H
#define AIRLOCK_JSON_H

/*
 * JSON encoding and strict decoding of the specification's types (jansson).
 *
 * Encoding returns a NUL-terminated string the caller frees with free(), or
 * NULL with err set. Decoding takes a buffer and its length and:
 *   - rejects unknown fields, missing required fields and wrong JSON types,
 *     naming the field ("ResourceLimits.pids_max: missing");
 *   - rejects a ResourceLimits with any field missing: no field has a default;
 *   - refuses input over AIRLOCK_JSON_INPUT_MAX bytes and nesting deeper than
 *     jansson's limit, and strings containing NUL;
 *   - leaves *ret untouched on failure.
 *
 * Loading the library sets jansson's process-wide allocator (while it still
 * holds malloc and free) to one that never returns NULL: jansson 2.14
 * corrupts memory, or decodes a string with a byte missing, when an
 * allocation fails (src/core/json_decode.c). A decode builds its tree under a
 * memory budget (caps.h, AIRLOCK_JSON_DECODE_*) and fails, with DECODE
 * naming the budget or SYSTEM/ENOMEM, when the tree would not fit or
 * malloc fails; outside a decode a failed allocation aborts. An
 * EnvironmentSpec's JSON is at most AIRLOCK_SPEC_JSON_MAX both ways.
 *
 * Byte fields (ExecutionCommand.stdin, ExecutionResult.stdout/stderr) are
 * base64 (RFC 4648, with padding) on the wire so the encoding is lossless;
 * timestamps are RFC 3339 UTC with milliseconds ("2026-11-29T23:34:04.123Z").
 *
 * FileChange.path is bytes; both JSON forms write it in a lossless text
 * form: a name is written as it is unless it holds bytes that are not
 * UTF-8 or characters that would misread (C0/C1 controls, DEL, U+2028,
 * U+2029, bidirectional formatting characters, U+FFFD itself); each byte of
 * those is written as U+FFFD followed by two lowercase hex digits. U+FFFD
 * never stands for itself, so two names never share a form; the decoder
 * takes only the canonical form and returns the exact bytes.
 *
 * airlock_result_to_tool_json renders the sandbox.run_command result object
 * of the specification (text stdout/stderr, invalid UTF-8 replaced by
 * U+FFFD; paths in the text form above) for people and models; it is not
 * decodable back into the type.
 */

#include <stddef.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "airlock/types.h"

#ifdef __cplusplus
extern "C" {
#endif

char *airlock_resource_limits_to_json(const airlock_resource_limits *v, airlock_error *err);
int airlock_resource_limits_from_json(const char *buf, size_t len, airlock_resource_limits *ret, airlock_error *err);

char *airlock_egress_policy_to_json(const airlock_egress_policy *v, airlock_error *err);
int airlock_egress_policy_from_json(const char *buf, size_t len, airlock_egress_policy *ret, airlock_error *err);

char *airlock_bridge_endpoint_to_json(const airlock_bridge_endpoint *v, airlock_error *err);
int airlock_bridge_endpoint_from_json(const char *buf, size_t len, airlock_bridge_endpoint *ret, airlock_error *err);

char *airlock_environment_spec_to_json(const airlock_environment_spec *v, airlock_error *err);
int airlock_environment_spec_from_json(const char *buf, size_t len, airlock_environment_spec *ret, airlock_error *err);

char *airlock_environment_handle_to_json(const airlock_environment_handle *v, airlock_error *err);
int airlock_environment_handle_from_json(const char *buf, size_t len, airlock_environment_handle *ret, airlock_error *err);

char *airlock_execution_command_to_json(const airlock_execution_command *v, airlock_error *err);
int airlock_execution_command_from_json(const char *buf, size_t len, airlock_execution_command *ret, airlock_error *err);

char *airlock_file_change_to_json(const airlock_file_change *v, airlock_error *err);
int airlock_file_change_from_json(const char *buf, size_t len, airlock_file_change *ret, airlock_error *err);

char *airlock_execution_result_to_json(const airlock_execution_result *v, airlock_error *err);
int airlock_execution_result_from_json(const char *buf, size_t len, airlock_execution_result *ret, airlock_error *err);

char *airlock_artifact_metadata_to_json(const airlock_artifact_metadata *v, airlock_error *err);
int airlock_artifact_metadata_from_json(const char *buf, size_t len, airlock_artifact_metadata *ret, airlock_error *err);

char *airlock_artifact_ref_to_json(const airlock_artifact_ref *v, airlock_error *err);
int airlock_artifact_ref_from_json(const char *buf, size_t len, airlock_artifact_ref *ret, airlock_error *err);

/* The error classes travel as {"error": "<ClassName>", "message": "..."}. */
char *airlock_error_to_json(const airlock_error *v, airlock_error *err);
int airlock_error_from_json(const char *buf, size_t len, airlock_error *ret, airlock_error *err);

/* The sandbox.run_command result object (Section 18.3 field names). */
char *airlock_result_to_tool_json(const airlock_execution_result *v, airlock_error *err);
/* The same with "stdout_artifact" and "stderr_artifact": the ArtifactRef
 * of a stream kept whole because it passed the tool's output limit (its
 * text above is then a head-and-tail excerpt), or null. */
char *airlock_result_to_tool_json_refs(const airlock_execution_result *v,
                                       const airlock_artifact_ref *stdout_ref,
                                       const airlock_artifact_ref *stderr_ref, airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
