/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox.run_command request, made into a command and an image
 * (run_command.h has the contract). */
#include "airlock/run_command.h"

#include "airlock/port/exec.h"

int airlock_run_command_prepare(const airlock_run_command_request *req, const airlock_settings *s,
                                airlock_execution_command *ret, airlock_error *err)
{
	*ret = (airlock_execution_command){
		.argv = req->argv,
		.argc = req->argc,
		.working_directory = (char *)(uintptr_t)(req->working_directory ? req->working_directory
		                                                                : "."),
		.timeout_seconds = req->timeout_seconds > 0 ? req->timeout_seconds
		                                            : s->defaults.limits.wall_clock_seconds,
		.has_stdin = req->has_stdin,
		.stdin_data = req->stdin_data,
		.stdin_len = req->stdin_len,
		.maximum_output_bytes = req->maximum_output_bytes > 0
		                                ? req->maximum_output_bytes
		                                : AIRLOCK_RUN_COMMAND_OUTPUT_DEFAULT_BYTES,
	};
	return airlock_execution_command_validate(ret, AIRLOCK_RUN_COMMAND_ARGV_MAX_BYTES, err);
}

const char *airlock_run_command_image(const airlock_settings *s, const char *native_default,
                                      airlock_error *err)
{
	if (s->image)
		return s->image;
	if (s->mechanism == AIRLOCK_MECHANISM_NATIVE && native_default)
		return native_default;
	if (s->mechanism == AIRLOCK_MECHANISM_FAKE)
		return AIRLOCK_IMAGE_DIGEST_EMPTY;
	airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
	                  "sandbox.image is not set: name the image by digest (sha256:...)");
	return NULL;
}
