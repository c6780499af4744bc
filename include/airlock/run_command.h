/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_RUN_COMMAND_H
#define AIRLOCK_RUN_COMMAND_H

/*
 * The sandbox.run_command tool's side of a sandbox (the specification,
 * "sandbox.run_command"): the tool's declared numbers, and the one place a
 * request becomes the command the execution service runs and the image it
 * is provisioned from, and the spec a sandbox for it is provisioned with.
 * `airlock run` uses it now; `serve` and `worker` will,
 * so that the three cannot disagree about a default.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "airlock/settings.h"
#include "airlock/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tool's declared timeout_s: a command's timeout is clamped to it. */
#define AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS 300
/* The whole argument vector's size cap is AIRLOCK_RUN_COMMAND_ARGV_MAX_BYTES
 * (caps.h). */
/* Per stream, when a request names no maximum_output_bytes. */
#define AIRLOCK_RUN_COMMAND_OUTPUT_DEFAULT_BYTES ((int64_t)1024 * 1024)
/* SHA-256 of no bytes, in hex. */
#define AIRLOCK_SHA256_EMPTY_HEX "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
/* The empty image: what a mechanism that runs no image (fake) is given. */
#define AIRLOCK_IMAGE_DIGEST_EMPTY "sha256:" AIRLOCK_SHA256_EMPTY_HEX

/* A sandbox.run_command request's fields. */
typedef struct airlock_run_command_request {
	char **argv; /* argc strings, argv[argc] == NULL */
	size_t argc;
	const char *working_directory; /* NULL: "." (the workspace root) */
	int64_t timeout_seconds;       /* <= 0: the operator's wall_clock_seconds */
	bool has_stdin;
	unsigned char *stdin_data;
	size_t stdin_len;
	int64_t maximum_output_bytes; /* <= 0: AIRLOCK_RUN_COMMAND_OUTPUT_DEFAULT_BYTES */
} airlock_run_command_request;

/* The command for req, its defaults taken from the settings, validated as
 * the specification orders before anything is provisioned (a bad vector or
 * an escaping working directory never costs a sandbox). *ret borrows req's
 * strings and bytes: nothing to clear. 0, or ToolValidationError /
 * WorkspaceEscape. */
int airlock_run_command_prepare(const airlock_run_command_request *req, const airlock_settings *s,
                                airlock_execution_command *ret, airlock_error *err);

/* Whether a mechanism runs the image store's images (native, gvisor). */
bool airlock_mechanism_runs_store_images(airlock_mechanism m);

/* The image digest a sandbox for this command is provisioned from: the
 * operator's sandbox.image; else, for a mechanism that runs the store's
 * images outside production, store_default (the store's default, which
 * the caller resolves because it holds the store; NULL when it has none);
 * for fake, which runs no image, the empty image; else NULL with
 * ConfigError (production always names its image). The pointer is into s,
 * store_default or a constant. */
const char *airlock_run_command_image(const airlock_settings *s, const char *store_default,
                                      airlock_error *err);

/* What a spec for a sandbox.run_command is built from, beside the
 * settings. */
typedef struct airlock_run_command_spec_input {
	const airlock_settings *settings;
	const char *tenant_id;
	const char *run_id;        /* NULL: a new UUIDv7 */
	int64_t lease_epoch;       /* the claim's epoch (the reaper's question names it) */
	const char *store_default; /* the store's default image, or NULL (airlock_run_command_image) */
	/* The sandbox's copy of the egress policy: sent only with the call's
	 * yes and the operator's allowlist; NULL: deny. */
	const airlock_egress_policy *egress;
	const airlock_resource_limits *limits; /* NULL: the settings' defaults */
	/* Tier-1 names beyond the operator's list (`airlock run --env`): the
	 * same tier-0 check refuses them. */
	const char *const *extra_tier1;
	size_t n_extra_tier1;
	char *const *parent;           /* the caller's environment: where tier-1 values come from */
	const char *working_directory; /* the command's, under the workspace; NULL: "." */
	/* The orchestration bridge (docs/bridge.md), copied into the spec and
	 * into tier 2 (AIRLOCK_BRIDGE_SOCKET, AIRLOCK_BRIDGE_TOKEN); NULL:
	 * none. */
	const airlock_bridge_endpoint *bridge;
} airlock_run_command_spec_input;

/* Build the spec a worker sends to provision a sandbox for a
 * sandbox.run_command: identifiers, limits, the image, the egress policy,
 * the bridge when in->bridge names one, and the built environment (tier 1
 * from in->parent, tier 2 with PWD and the bridge's two), nothing else. A limit is a maximum: a workspace too small for inodes_max holds
 * what fits (airlock_volume_workspace_inodes), and *inodes_asked (when not
 * NULL) is then the number asked, else 0. *ret is zeroed first and cleared
 * on failure. ConfigError for a tier-1 name that is tier 0 or invalid, or
 * no image; SystemError ENOMEM. */
int airlock_run_command_spec(const airlock_run_command_spec_input *in, airlock_environment_spec *ret,
                             int64_t *inodes_asked, airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
