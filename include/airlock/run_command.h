/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_RUN_COMMAND_H
#define AIRLOCK_RUN_COMMAND_H

/*
 * The sandbox.run_command tool's side of a sandbox (the specification,
 * "sandbox.run_command"): the tool's declared numbers, and the one place a
 * request becomes the command the execution service runs and the image it
 * is provisioned from. `airlock run` uses it now; `serve` and `worker` will,
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

#ifdef __cplusplus
}
#endif
#endif
