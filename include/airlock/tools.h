/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_TOOLS_H
#define AIRLOCK_TOOLS_H

/*
 * The worker's two tools as every door serves them: the worker's API
 * (docs/worker-api.md, GET /v1/tools and the tool routes) and `airlock
 * mcp` (docs/mcp.md). One source for each thing a door says or checks,
 * so two doors cannot disagree:
 *
 *   - the declarations (name, description, input schema, classification,
 *     timeout_s, max_output_bytes, allow_parallel), and the JSON Schema of
 *     each tool's result object, which MCP declares as outputSchema;
 *   - the decoding and validation of a tool's arguments, in the
 *     specification's order (the worker's own decoders call the same
 *     functions inside its request bodies);
 *   - the output rule: a stream past the tool's max_output_bytes reaches
 *     the model as a head-and-tail excerpt, its whole kept as an artifact
 *     by the caller's keeper.
 *
 * Worker side (libairlock-worker.so).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "airlock/run_command.h"
#include "airlock/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AIRLOCK_TOOL_RUN_COMMAND "sandbox.run_command"
#define AIRLOCK_TOOL_EXPORT "artifact.export"

/* The declarations, {"tools": [...]}, as the worker serves them (compact
 * JSON, members in order). malloc'd; NULL only when memory runs out. */
char *airlock_tools_json(void);

/* The JSON Schema (draft 2020-12, "type": "object") of tool's result
 * object: sandbox.run_command's result (airlock_result_to_tool_json_refs),
 * artifact.export's ArtifactRef. malloc'd compact JSON; NULL for a name
 * that is neither tool, or when memory runs out. */
char *airlock_tool_output_schema_json(const char *tool);

/* sandbox.run_command's arguments (the specification's request), decoded
 * from a JSON object of at most AIRLOCK_WORKER_TOOL_BODY_MAX bytes and
 * checked in the specification's order: command a non-empty array of
 * strings (a string is refused with a message that teaches the vector
 * form), no NUL, under AIRLOCK_RUN_COMMAND_ARGV_MAX_BYTES, command[0]
 * absolute or a bare name; working_directory a string; timeout_seconds a
 * positive integer (clamped to the tool's 300). No other member.
 * ToolValidationError naming the member ("arguments.command: ...");
 * containment of working_directory is airlock_run_command_prepare's. *ret
 * is cleared on failure. */
typedef struct airlock_run_command_arguments {
	char **argv; /* argc strings and a NULL */
	size_t argc;
	char *working_directory; /* NULL: "." */
	int64_t timeout_seconds; /* 0: absent */
} airlock_run_command_arguments;
int airlock_run_command_arguments_decode(const char *json, size_t len,
                                         airlock_run_command_arguments *ret, airlock_error *err);
void airlock_run_command_arguments_clear(airlock_run_command_arguments *a);

/* artifact.export's arguments: exactly one of path (a workspace path, at
 * most AIRLOCK_PATH_MAX bytes; the containment rules apply when it is
 * read) and text (at most AIRLOCK_WORKER_EXPORT_TEXT_MAX bytes);
 * filename any text (NUL included; metadata, never a path; at most
 * AIRLOCK_ARTIFACT_FILENAME_MAX bytes); media_type type/subtype. From a
 * JSON object of at most AIRLOCK_WORKER_EXPORT_BODY_MAX bytes.
 * ToolValidationError naming the member ("artifact.export.arguments...");
 * *ret is cleared on failure. */
typedef struct airlock_export_arguments {
	char *path; /* NULL when text */
	size_t path_len;
	char *text; /* NULL when path */
	size_t text_len;
	char *filename; /* NULL: absent */
	size_t filename_len;
	char media_type[256]; /* "" when absent */
} airlock_export_arguments;
int airlock_export_arguments_decode(const char *json, size_t len, airlock_export_arguments *ret,
                                    airlock_error *err);
void airlock_export_arguments_clear(airlock_export_arguments *a);

/* The name an export's download gets when the model names none: the
 * path's last part, or "text.txt" (pointers into a). */
void airlock_export_filename(const airlock_export_arguments *a, const char **ret,
                             size_t *ret_len);

/* ---- the output rule ------------------------------------------------------ */
/* What the model is shown per stream: the tool's declared max_output_bytes. */
#define AIRLOCK_TOOL_OUTPUT_BYTES AIRLOCK_RUN_COMMAND_OUTPUT_DEFAULT_BYTES
/* What the execution service captures per stream (the command's
 * maximum_output_bytes): four times that, so the rest is kept whole. */
#define AIRLOCK_TOOL_OUTPUT_CEILING (4 * AIRLOCK_TOOL_OUTPUT_BYTES)

/* Keeps a stream's whole bytes as a TOOL_OUTPUT artifact (trust
 * EXTERNAL_UNTRUSTED, text/plain, filename stream: "stdout" or "stderr"),
 * filling *ret; 0, or a negative code with err set (the store refused). */
typedef int (*airlock_tool_output_keep_fn)(void *arg, const char *stream,
                                           const unsigned char *data, size_t len,
                                           airlock_artifact_ref *ret, airlock_error *err);

/* Apply the rule to both streams of res in place: each stream over
 * AIRLOCK_TOOL_OUTPUT_BYTES is handed to keep (NULL: none is kept) and
 * replaced by its excerpt, its *_truncated set; refs[i]/has_ref[i] for
 * stdout (0) and stderr (1). A stream keep refuses is still cut, and its
 * marker says why the whole was not kept: the call does not fail for it.
 * Fails (-ENOMEM) only when memory runs out. */
int airlock_tool_output_apply(airlock_execution_result *res, airlock_tool_output_keep_fn keep,
                              void *arg, airlock_artifact_ref refs[2], bool has_ref[2]);

#ifdef __cplusplus
}
#endif
#endif
