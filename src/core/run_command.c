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

bool airlock_mechanism_runs_store_images(airlock_mechanism m)
{
	return m == AIRLOCK_MECHANISM_NATIVE || m == AIRLOCK_MECHANISM_GVISOR;
}

const char *airlock_run_command_image(const airlock_settings *s, const char *store_default,
                                      airlock_error *err)
{
	if (s->image)
		return s->image;
	/* Production runs the image the operator pinned, never whatever is
	 * newest in the store: what a deployment runs is then a fact of its
	 * settings (and of the startup log), not of the store's history. */
	if (airlock_mechanism_runs_store_images(s->mechanism) && store_default &&
	    s->deployment_mode != AIRLOCK_DEPLOYMENT_PRODUCTION)
		return store_default;
	if (s->mechanism == AIRLOCK_MECHANISM_FAKE)
		return AIRLOCK_IMAGE_DIGEST_EMPTY;
	airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
	                  s->deployment_mode == AIRLOCK_DEPLOYMENT_PRODUCTION
	                          ? "sandbox.image is not set: production runs a pinned image; name it "
	                            "by digest (sha256:..., `airlock image ls` lists them)"
	                          : "sandbox.image is not set: name the image by digest (sha256:...)");
	return NULL;
}
