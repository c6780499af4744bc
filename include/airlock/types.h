/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_TYPES_H
#define AIRLOCK_TYPES_H

/*
 * The specification's types (its sections "The ExecutionEnvironment
 * port", "WorkspaceHandle", "Artifacts"), in C.
 *
 * Ownership: every char * and array inside these structs is owned by the
 * struct and released by its _clear function, which leaves the struct zeroed
 * and is safe to call twice. Timestamps are Unix milliseconds (UTC).
 *
 * Structural rule (gate spec_has_no_host_path): none of EnvironmentSpec,
 * EnvironmentHandle, ExecutionResult or FileChange has a field that holds a
 * host filesystem path. Paths that do appear (FileChange.path,
 * ExecutionCommand.working_directory) are relative to /workspace, and
 * BridgeEndpoint.socket_path is a path inside the sandbox.
 * tests/test_gate_sandbox_spec_has_no_host_path.c walks the field lists and
 * fails if a path-like field is added.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/caps.h"
#include "airlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The fixed mount point of every sandbox's workspace: a constant, not a field. */
#define AIRLOCK_WORKSPACE_ROOT "/workspace"

/* Identifier shape for tenant_id and run_id: 1..AIRLOCK_ID_MAX of
 * [A-Za-z0-9_-]. These values end up in storage keys and log lines, so the
 * charset is closed. */
bool airlock_id_valid(const char *id);

/* ---- closed vocabularies ------------------------------------------------
 * Each enum has an invalid zero value and ends with _MAX; _name() returns the
 * specification's spelling and _parse() returns the _INVALID value for any
 * other string. */

typedef enum airlock_kill_reason {
	AIRLOCK_KILL_NONE = 0, /* not killed (killed_by is null) */
	AIRLOCK_KILL_TIMEOUT,
	AIRLOCK_KILL_MEMORY,
	AIRLOCK_KILL_OUTPUT_LIMIT,
	AIRLOCK_KILL_PIDS,
	AIRLOCK_KILL_DISK,
	AIRLOCK_KILL_CANCELLED,
	AIRLOCK_KILL_EXPIRED,
	AIRLOCK_KILL_SERVICE_SHUTDOWN,
	AIRLOCK_KILL__MAX
} airlock_kill_reason;
const char *airlock_kill_reason_name(airlock_kill_reason r); /* NULL for NONE */
airlock_kill_reason airlock_kill_reason_parse(const char *s); /* NONE if unknown */

typedef enum airlock_change_kind {
	AIRLOCK_CHANGE_INVALID = 0,
	AIRLOCK_CHANGE_CREATED,
	AIRLOCK_CHANGE_MODIFIED,
	AIRLOCK_CHANGE_DELETED,
	AIRLOCK_CHANGE__MAX
} airlock_change_kind;
const char *airlock_change_kind_name(airlock_change_kind k);
airlock_change_kind airlock_change_kind_parse(const char *s);

/* What a FileChange names: every kind of non-directory entry a workspace can
 * hold. Each kind defines its sha256 and size_bytes (FileChange below). */
typedef enum airlock_file_kind {
	AIRLOCK_FILE_INVALID = 0,
	AIRLOCK_FILE_REGULAR,      /* "FILE" */
	AIRLOCK_FILE_SYMLINK,      /* "SYMLINK" */
	AIRLOCK_FILE_FIFO,         /* "FIFO" */
	AIRLOCK_FILE_SOCKET,       /* "SOCKET" */
	AIRLOCK_FILE_CHAR_DEVICE,  /* "CHAR_DEVICE" */
	AIRLOCK_FILE_BLOCK_DEVICE, /* "BLOCK_DEVICE" */
	AIRLOCK_FILE__MAX
} airlock_file_kind;
const char *airlock_file_kind_name(airlock_file_kind k);
airlock_file_kind airlock_file_kind_parse(const char *s);

typedef enum airlock_provenance {
	AIRLOCK_PROVENANCE_INVALID = 0,
	AIRLOCK_PROVENANCE_UNKNOWN,         /* "unknown" */
	AIRLOCK_PROVENANCE_TOOL_WRITTEN,    /* "tool_written" */
	AIRLOCK_PROVENANCE_SANDBOX_WRITTEN, /* "sandbox_written" */
	AIRLOCK_PROVENANCE__MAX
} airlock_provenance;
const char *airlock_provenance_name(airlock_provenance p);
airlock_provenance airlock_provenance_parse(const char *s);

typedef enum airlock_artifact_origin {
	AIRLOCK_ORIGIN_INVALID = 0,
	AIRLOCK_ORIGIN_SANDBOX_EXPORT,
	AIRLOCK_ORIGIN_TOOL_OUTPUT,
	AIRLOCK_ORIGIN_MODEL_OUTPUT,
	AIRLOCK_ORIGIN_UPLOAD,
	AIRLOCK_ORIGIN_TRAJECTORY_EXPORT,
	AIRLOCK_ORIGIN_KNOWLEDGE_SOURCE,
	AIRLOCK_ORIGIN__MAX
} airlock_artifact_origin;
const char *airlock_artifact_origin_name(airlock_artifact_origin o);
airlock_artifact_origin airlock_artifact_origin_parse(const char *s);

/* Trust labels. The specification names INTERNAL_TOOL and EXTERNAL_UNTRUSTED;
 * USER_SUPPLIED labels a client upload. Sandbox output is always
 * EXTERNAL_UNTRUSTED (Section 28.5). */
typedef enum airlock_trust_level {
	AIRLOCK_TRUST_INVALID = 0,
	AIRLOCK_TRUST_INTERNAL_TOOL,
	AIRLOCK_TRUST_USER_SUPPLIED,
	AIRLOCK_TRUST_EXTERNAL_UNTRUSTED,
	AIRLOCK_TRUST__MAX
} airlock_trust_level;
const char *airlock_trust_level_name(airlock_trust_level t);
airlock_trust_level airlock_trust_level_parse(const char *s);

typedef enum airlock_egress_mode {
	AIRLOCK_EGRESS_INVALID = 0,
	AIRLOCK_EGRESS_DENY, /* the default; there is no allow mode */
	AIRLOCK_EGRESS_ALLOWLIST,
	AIRLOCK_EGRESS__MAX
} airlock_egress_mode;
const char *airlock_egress_mode_name(airlock_egress_mode m);
airlock_egress_mode airlock_egress_mode_parse(const char *s);

/* ---- ResourceLimits ------------------------------------------------------
 * Every field is required and none has a default at this layer; defaults
 * belong to settings. A value <= 0 is invalid. */
/* The smallest limits a sandbox can start under, for every door (the CLI,
 * a decoded spec, the settings' defaults): below them the failure would be
 * the sandbox's own machinery (a start that "lost contact with the child",
 * EAGAIN from fork) instead of a refusal that names the number. Measured
 * on the native mechanism: `true` starts under 3 MiB of memory and not
 * under 2 MiB; 3 pids (init, the command starter, the command) and not 2.
 * The floors keep a margin over both for the start-up path to change. */
#define AIRLOCK_LIMIT_MEMORY_BYTES_MIN (8LL << 20)
#define AIRLOCK_LIMIT_PIDS_MIN 4LL

typedef struct airlock_resource_limits {
	int64_t cpu_millicores;
	int64_t memory_bytes;
	int64_t pids_max;
	int64_t workspace_bytes;
	int64_t inodes_max;
	int64_t wall_clock_seconds;
} airlock_resource_limits;

/* ---- EgressPolicy (struct only; the YAML grammar is the egress work) --- */
typedef struct airlock_egress_destination {
	char *host;      /* normalized DNS name, or "*.name" (one leftmost label) */
	uint16_t *ports; /* 1..65535, at least one */
	size_t n_ports;
} airlock_egress_destination;

typedef struct airlock_egress_policy {
	airlock_egress_mode mode;
	airlock_egress_destination *destinations;
	size_t n_destinations;
} airlock_egress_policy;

/* ---- BridgeEndpoint ------------------------------------------------------ */
typedef struct airlock_bridge_endpoint {
	char *socket_path; /* inside the sandbox, never a host path */
	char *token;       /* one-time token; authorizes one orchestration turn */
} airlock_bridge_endpoint;

/* ---- an environment mapping (already built by the tiers) --------------- */
typedef struct airlock_env_var {
	char *name;
	char *value;
} airlock_env_var;

typedef struct airlock_env {
	airlock_env_var *vars;
	size_t n;
} airlock_env;

/* ---- EnvironmentSpec ----------------------------------------------------- */
typedef struct airlock_environment_spec {
	char *tenant_id;
	char *run_id;
	int64_t lease_epoch;
	char *image_digest; /* "sha256:" + 64 lowercase hex, never a tag */
	airlock_resource_limits limits;
	airlock_egress_policy egress;
	airlock_env environment;         /* already passed the tier builder */
	airlock_bridge_endpoint *bridge; /* NULL unless orchestration runs */
} airlock_environment_spec;

/* ---- EnvironmentHandle -------------------------------------------------
 * No path, no container id, no host, no socket. environment_id is opaque. */
#define AIRLOCK_ENVIRONMENT_ID_MAX 64
typedef struct airlock_environment_handle {
	char environment_id[AIRLOCK_ENVIRONMENT_ID_MAX];
	char *tenant_id;
	char *run_id;
	int64_t lease_epoch;
	int64_t created_at_ms;
	int64_t expires_at_ms;
} airlock_environment_handle;

/* ---- ExecutionCommand ---------------------------------------------------- */
/* maximum_output_bytes has a ceiling, AIRLOCK_OUTPUT_BYTES_MAX (caps.h says why). */
typedef struct airlock_execution_command {
	char **argv; /* argc strings, no NUL inside any; argv[argc] == NULL */
	size_t argc;
	char *working_directory; /* relative to /workspace; "." is the root */
	int64_t timeout_seconds; /* > 0 */
	bool has_stdin;
	unsigned char *stdin_data;
	size_t stdin_len;
	int64_t maximum_output_bytes; /* 1..AIRLOCK_OUTPUT_BYTES_MAX, per stream */
} airlock_execution_command;

/* ---- FileChange ----------------------------------------------------------
 * One entry per path: a path whose kind changed (a file replaced by a
 * symlink) is MODIFIED with its new kind. kind, size_bytes and sha256 are
 * of the entry after the command; for DELETED, kind and size_bytes are what
 * it was and sha256 is absent. Per kind:
 *   FILE     sha256 of the content, size_bytes the bytes hashed;
 *   SYMLINK  sha256 of the link's target as stored (readlink's bytes, no
 *            NUL; never followed), size_bytes the target's length;
 *   FIFO, SOCKET, CHAR_DEVICE, BLOCK_DEVICE: no content: sha256 of the
 *            empty string, size_bytes 0.
 * path is bytes (any but NUL); its JSON form is the lossless text form
 * json.h describes. */
#define AIRLOCK_SHA256_HEX_LEN 64
typedef struct airlock_file_change {
	char *path; /* relative to /workspace, never absolute */
	airlock_change_kind change;
	airlock_file_kind kind;
	int64_t size_bytes;
	bool has_sha256; /* false exactly for DELETED */
	char sha256[AIRLOCK_SHA256_HEX_LEN + 1];
} airlock_file_change;

/* ---- ExecutionResult ----------------------------------------------------- */
typedef struct airlock_execution_result {
	bool has_exit_code; /* false exactly when killed_by != NONE */
	int exit_code;
	unsigned char *stdout_data;
	size_t stdout_len;
	unsigned char *stderr_data;
	size_t stderr_len;
	bool stdout_truncated;
	bool stderr_truncated;
	bool timed_out; /* true exactly when killed_by == TIMEOUT */
	airlock_kill_reason killed_by;
	airlock_file_change *files_changed;
	size_t n_files_changed;
	bool files_changed_truncated; /* the listing hit its cap */
	int64_t duration_ms;
} airlock_execution_result;

/* ---- Artifacts ----------------------------------------------------------- */
typedef struct airlock_artifact_metadata {
	char *tenant_id;
	char *run_id; /* NULL only before an upload is claimed */
	airlock_artifact_origin origin;
	char *filename; /* metadata, never a path */
	char *media_type;
	int64_t size_bytes;
	char sha256[AIRLOCK_SHA256_HEX_LEN + 1];
	airlock_trust_level trust;
	int64_t created_at_ms;
	bool has_expires_at;
	int64_t expires_at_ms;
} airlock_artifact_metadata;

#define AIRLOCK_UUID_STR_LEN 36
typedef struct airlock_artifact_ref {
	char artifact_id[AIRLOCK_UUID_STR_LEN + 1]; /* UUIDv7 */
	char sha256[AIRLOCK_SHA256_HEX_LEN + 1];
	int64_t size_bytes;
	char *media_type;
} airlock_artifact_ref;

/* ---- validation ---------------------------------------------------------
 * Each returns 0 or AIRLOCK_ERR_EXECUTION_REJECTED (for specs and limits) /
 * AIRLOCK_ERR_DECODE (for the rest) naming the first bad field. */
int airlock_resource_limits_validate(const airlock_resource_limits *l, airlock_error *err);
int airlock_environment_spec_validate(const airlock_environment_spec *s, airlock_error *err);
int airlock_egress_policy_validate(const airlock_egress_policy *p, airlock_error *err);
bool airlock_sha256_hex_valid(const char *hex);
bool airlock_image_digest_valid(const char *digest); /* "sha256:<64 hex>" */
/* An artifact's media type: "type/subtype", each 1..127 of RFC 6838's
 * restricted-name characters; no parameters, no spaces. */
bool airlock_media_type_valid(const char *media_type);

/* ---- release ------------------------------------------------------------- */
void airlock_egress_policy_clear(airlock_egress_policy *p);
void airlock_bridge_endpoint_free(airlock_bridge_endpoint *b);
void airlock_env_clear(airlock_env *e);
void airlock_environment_spec_clear(airlock_environment_spec *s);
void airlock_environment_handle_clear(airlock_environment_handle *h);
void airlock_execution_command_clear(airlock_execution_command *c);
void airlock_file_change_clear(airlock_file_change *f);
void airlock_execution_result_clear(airlock_execution_result *r);
void airlock_artifact_metadata_clear(airlock_artifact_metadata *m);
void airlock_artifact_ref_clear(airlock_artifact_ref *r);

/* ---- deep copies (0 or -ENOMEM; dst untouched on failure) --------------- */
int airlock_environment_handle_copy(airlock_environment_handle *dst, const airlock_environment_handle *src);
int airlock_egress_policy_copy(airlock_egress_policy *dst, const airlock_egress_policy *src);
int airlock_env_add(airlock_env *e, const char *name, const char *value);
const char *airlock_env_get(const airlock_env *e, const char *name);

#ifdef __cplusplus
}
#endif
#endif
