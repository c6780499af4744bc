/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tools' declarations the worker serves (GET /v1/tools): what a
 * platform registers with its model and what `airlock mcp` lists. The
 * numbers are the ones the worker enforces (the tool's timeout, its output
 * cap, the vector's size cap), taken from the same constants, so the
 * declaration cannot promise what the call does not do. The result
 * schemas are the encoders' shapes (airlock_result_to_tool_json_refs,
 * airlock_artifact_ref_to_json), their enums listed from the core's own
 * name functions, so a client that validates a result (MCP's
 * outputSchema) accepts exactly what the tools answer.
 */
#include "worker/daemon.h"

#include <jansson.h>
#include <string.h>

#include "airlock/caps.h"
#include "airlock/run_command.h"
#include "airlock/tools.h"
#include "airlock/types.h"

/* What the model is told (the specification, "sandbox.run_command"): the
 * three things it cannot infer, and the vector form. */
static const char run_command_description[] =
	"Run one command in this run's sandbox, a Linux machine with a /workspace directory. "
	"`command` is an argument vector, not a shell string: [\"python3\", \"script.py\"]; "
	"use [\"bash\", \"-c\", \"...\"] for shell syntax. The command has no network unless "
	"network access has been enabled and approved for this call; without it a connection "
	"fails as if the host did not exist, not with a permission message. The workspace "
	"persists between calls of this run but is discarded when the run finishes or pauses: "
	"a file the user should receive must be exported with artifact.export, which attaches "
	"it to the reply. Output above 1 MiB per stream is truncated to a head-and-tail excerpt "
	"with a marker saying how much was left out, and the full output becomes an artifact "
	"whose identifier is in the result (stdout_artifact, stderr_artifact): you do not need "
	"to run the command again to see the rest. Output above 4 MiB per stream ends the "
	"command (killed_by OUTPUT_LIMIT).";

static json_t *run_command_schema(void)
{
	return json_pack(
		"{s:s, s:b, s:[s], s:{s:{s:s, s:i, s:{s:s}, s:s}, s:{s:s, s:s, s:s}, "
		"s:{s:s, s:i, s:i, s:s}}}",
		"type", "object", "additionalProperties", 0, "required", "command", "properties",
		"command", "type", "array", "minItems", 1, "items", "type", "string", "description",
		"The program and its arguments; the program is an absolute path or a bare name "
		"looked up in PATH.",
		"working_directory", "type", "string", "default", ".", "description",
		"The directory to run in, relative to /workspace.", "timeout_seconds", "type",
		"integer", "minimum", 1, "maximum", AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS,
		"description", "Seconds before the command is killed (timed_out); at most 300.");
}

/* artifact.export (the specification's "Artifacts"; ADR-0122): how a file
 * or text reaches the user. In process: it holds a workspace handle and an
 * artifact writer, nothing that can execute. */
static const char export_description[] =
	"Hand a file to the user: export a file from this run's workspace (path, relative to "
	"/workspace), or text you wrote (text), as an artifact attached to your reply. Returns "
	"the artifact's id, size and SHA-256; the bytes are compared with the workspace's on the "
	"way. Exporting the same thing twice is harmless. It runs no command: run the command "
	"that makes the file first with sandbox.run_command.";

static json_t *export_schema(void)
{
	return json_pack(
		"{s:s, s:b, s:[{s:[s]}, {s:[s]}], s:{s:{s:s, s:s}, s:{s:s, s:i, s:s}, "
		"s:{s:s, s:s}, s:{s:s, s:s, s:s}}}",
		"type", "object", "additionalProperties", 0, "oneOf", "required", "path", "required",
		"text", "properties", "path", "type", "string", "description",
		"A file in the workspace, relative to /workspace, like \"out/report.csv\".", "text",
		"type", "string", "maxLength", (int)AIRLOCK_WORKER_EXPORT_TEXT_MAX, "description",
		"Text you wrote, to be given to the user as a file.", "filename", "type", "string",
		"description", "The name the user's download gets (default: the path's last part, "
		"or text.txt).", "media_type", "type", "string", "pattern",
		"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$",
		"description", "type/subtype, like text/csv (default: application/octet-stream for "
		"a path, text/plain for text).");
}

char *airlock_tools_json(void)
{
	json_t *schema = run_command_schema();
	json_t *xschema = export_schema();
	json_t *export = xschema ? json_pack("{s:s, s:s, s:o, s:{s:s, s:s, s:s, s:s}, s:s, s:s, "
	                                     "s:i, s:I, s:b}",
	                                     "name", "artifact.export", "description",
	                                     export_description, "input_schema", xschema,
	                                     "classification", "side_effect", "WORKSPACE_READ",
	                                     "risk", "LOW", "idempotency", "IDEMPOTENT",
	                                     "output_trust", "INTERNAL_TOOL", "scope",
	                                     "artifact.export", "execution", "in_process",
	                                     "timeout_s", 300, "max_output_bytes",
	                                     (json_int_t)4096, "allow_parallel", 0)
	                         : NULL;
	json_t *o = schema && export
	                    ? json_pack("{s:[{s:s, s:s, s:o, s:{s:s, s:s, s:s, s:s}, s:s, s:s, s:i, "
	                               "s:I, s:b}, o]}",
	                               "tools", "name", "sandbox.run_command", "description",
	                               run_command_description, "input_schema", schema,
	                               "classification", "side_effect", "CODE_EXECUTION", "risk",
	                               "HIGH", "idempotency", "NON_IDEMPOTENT", "output_trust",
	                               "EXTERNAL_UNTRUSTED", "scope", "sandbox.execute",
	                               "execution", "sandbox", "timeout_s",
	                               AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS, "max_output_bytes",
	                               (json_int_t)AIRLOCK_RUN_COMMAND_OUTPUT_DEFAULT_BYTES,
	                               "allow_parallel", 0, export)
	                    : NULL;
	/* json_pack takes what "o" names even when it fails; what it was not
	 * given is released here. */
	if (!schema || !export) {
		json_decref(schema);
		json_decref(export);
	}
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	return text;
}

/* ---- the results' schemas ------------------------------------------------ */

/* ["A", "B", ...] from a name function over 1..max-1, with null when
 * nullable. */
static json_t *enum_of(const char *(*name)(int), int max, bool nullable)
{
	json_t *a = json_array();
	for (int i = 1; a && i < max; i++)
		if (name(i) && json_array_append_new(a, json_string(name(i))) < 0)
			break;
	if (a && nullable)
		json_array_append_new(a, json_null());
	return a;
}

static const char *kill_name(int i)
{
	return airlock_kill_reason_name((airlock_kill_reason)i);
}

static const char *change_name(int i)
{
	return airlock_change_kind_name((airlock_change_kind)i);
}

static const char *kind_name(int i)
{
	return airlock_file_kind_name((airlock_file_kind)i);
}

#define SHA256_PATTERN "^[0-9a-f]{64}$"

/* The ArtifactRef (the specification, "ArtifactMetadata and ArtifactRef"). */
static json_t *artifact_ref_schema(bool nullable)
{
	json_t *o = json_pack("{s:s, s:b, s:[s,s,s,s], s:{s:{s:s}, s:{s:s, s:s}, s:{s:s, s:i}, "
	                      "s:{s:s}}}",
	                      "type", "object", "additionalProperties", 0, "required",
	                      "artifact_id", "sha256", "size_bytes", "media_type", "properties",
	                      "artifact_id", "type", "string", "sha256", "type", "string",
	                      "pattern", SHA256_PATTERN, "size_bytes", "type", "integer", "minimum",
	                      0, "media_type", "type", "string");
	/* A result's stream reference is null unless the stream was kept. */
	if (o && nullable && json_object_set_new(o, "type", json_pack("[s,s]", "object", "null")))
		return json_decref(o), NULL;
	return o;
}

static json_t *run_command_result_schema(void)
{
	json_t *kills = enum_of(kill_name, AIRLOCK_KILL__MAX, true);
	json_t *changes = enum_of(change_name, AIRLOCK_CHANGE__MAX, false);
	json_t *kinds = enum_of(kind_name, AIRLOCK_FILE__MAX, false);
	json_t *out_ref = artifact_ref_schema(true), *err_ref = artifact_ref_schema(true);
	json_t *file = changes && kinds
	                       ? json_pack("{s:s, s:[s,s,s,s,s], s:{s:{s:s}, s:{s:o}, s:{s:o}, "
	                                   "s:{s:s, s:i}, s:{s:[s,s]}}}",
	                                   "type", "object", "required", "path", "change", "kind",
	                                   "size_bytes", "sha256", "properties", "path", "type",
	                                   "string", "change", "enum", changes, "kind", "enum", kinds,
	                                   "size_bytes", "type", "integer", "minimum", 0, "sha256",
	                                   "type", "string", "null")
	                       : NULL;
	if (!file) {
		json_decref(changes);
		json_decref(kinds);
	}
	json_t *o = kills && file && out_ref && err_ref
	                    ? json_pack("{s:s, s:[s,s,s,s,s,s,s,s,s,s,s,s], s:{s:{s:[s,s]}, "
	                                "s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:o}, "
	                                "s:{s:s, s:i}, s:{s:s, s:o}, s:{s:s}, s:o, s:o}}",
	                                "type", "object", "required", "exit_code", "stdout",
	                                "stderr", "stdout_truncated", "stderr_truncated",
	                                "timed_out", "killed_by", "duration_ms", "files_changed",
	                                "files_changed_truncated", "stdout_artifact",
	                                "stderr_artifact", "properties", "exit_code", "type",
	                                "integer", "null", "stdout", "type", "string", "stderr",
	                                "type", "string", "stdout_truncated", "type", "boolean",
	                                "stderr_truncated", "type", "boolean", "timed_out", "type",
	                                "boolean", "killed_by", "enum", kills, "duration_ms", "type",
	                                "integer", "minimum", 0, "files_changed", "type", "array",
	                                "items", file, "files_changed_truncated", "type", "boolean",
	                                "stdout_artifact", out_ref, "stderr_artifact", err_ref)
	                    : NULL;
	if (!o) {
		json_decref(kills);
		json_decref(file);
		json_decref(out_ref);
		json_decref(err_ref);
	}
	return o;
}

char *airlock_tool_output_schema_json(const char *tool)
{
	json_t *o = !tool                                          ? NULL
	            : strcmp(tool, AIRLOCK_TOOL_RUN_COMMAND) == 0 ? run_command_result_schema()
	            : strcmp(tool, AIRLOCK_TOOL_EXPORT) == 0       ? artifact_ref_schema(false)
	                                                           : NULL;
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	return text;
}
