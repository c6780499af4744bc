/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox.run_command request, made into a command and an image
 * (run_command.h has the contract). */
#include "airlock/run_command.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/envbuild.h"
#include "airlock/ids.h"
#include "airlock/port/exec.h"
#include "airlock/volume.h"
#include "util/cleanup.h"

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

/* Tier 1 is the operator's list plus the caller's extra names; both pass
 * the same tier-0 check. */
static int spec_environment(const airlock_run_command_spec_input *in, airlock_environment_spec *spec,
                            airlock_error *err)
{
	const airlock_settings *s = in->settings;
	size_t n = s->n_passthrough + in->n_extra_tier1;
	_cleanup_free_ const char **tier1 = calloc(n + 1, sizeof(char *));
	if (!tier1)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "run_command: spec");
	for (size_t i = 0; i < s->n_passthrough; i++)
		tier1[i] = s->passthrough[i];
	for (size_t i = 0; i < in->n_extra_tier1; i++)
		tier1[s->n_passthrough + i] = in->extra_tier1[i];
	int r = airlock_tier1_check(tier1, n, err);
	if (r < 0)
		return r;
	const char *cwd = in->working_directory ? in->working_directory : ".";
	bool root = strcmp(cwd, ".") == 0;
	_cleanup_free_ char *pwd = NULL;
	if (asprintf(&pwd, "%s%s%s", AIRLOCK_WORKSPACE_ROOT, root ? "" : "/", root ? "" : cwd) < 0) {
		pwd = NULL;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "run_command: spec");
	}
	airlock_envbuild_input ein = {
		.tier1 = tier1, .n_tier1 = n, .parent = in->parent, .working_directory = pwd,
		.bridge = in->bridge,
	};
	return airlock_envbuild(&ein, &spec->environment, err);
}

int airlock_run_command_spec(const airlock_run_command_spec_input *in, airlock_environment_spec *ret,
                             int64_t *inodes_asked, airlock_error *err)
{
	const airlock_settings *s = in->settings;
	*ret = (airlock_environment_spec){ 0 };
	if (inodes_asked)
		*inodes_asked = 0;
	int r;
	char run_id[AIRLOCK_UUID_STR_LEN + 1];
	if (!in->run_id && (r = airlock_uuidv7_new(run_id, err)) < 0)
		return r;
	const char *image = airlock_run_command_image(s, in->store_default, err);
	if (!image)
		return airlock_errcode(err->cls);
	ret->tenant_id = strdup(in->tenant_id ? in->tenant_id : "");
	ret->run_id = strdup(in->run_id ? in->run_id : run_id);
	ret->lease_epoch = in->lease_epoch;
	ret->image_digest = strdup(image);
	/* The sandbox's own copy of the policy (the proxy gets another at
	 * provision). */
	ret->egress.mode = AIRLOCK_EGRESS_DENY;
	if (!ret->tenant_id || !ret->run_id || !ret->image_digest ||
	    (in->egress && airlock_egress_policy_copy(&ret->egress, in->egress) < 0)) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "run_command: spec");
		goto fail;
	}
	if (in->bridge && (!in->bridge->socket_path || !in->bridge->token)) {
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                      "bridge: the socket path and the token are both required");
		goto fail;
	}
	if (in->bridge) {
		/* The spec's own copy: it is cleared (the token wiped) with it. */
		ret->bridge = calloc(1, sizeof(*ret->bridge));
		if (!ret->bridge || !(ret->bridge->socket_path = strdup(in->bridge->socket_path)) ||
		    !(ret->bridge->token = strdup(in->bridge->token))) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "run_command: spec");
			goto fail;
		}
	}
	ret->limits = in->limits ? *in->limits : s->defaults.limits;
	/* A limit is a maximum: a small workspace holds fewer inodes than the
	 * default, and the volume is made with what fits. The spec then says
	 * what is provisioned. */
	if (airlock_mechanism_runs_store_images(s->mechanism)) {
		int64_t fit = airlock_volume_workspace_inodes(ret->limits.workspace_bytes,
		                                              ret->limits.inodes_max);
		if (fit < ret->limits.inodes_max) {
			if (inodes_asked)
				*inodes_asked = ret->limits.inodes_max;
			ret->limits.inodes_max = fit;
		}
	}
	if ((r = spec_environment(in, ret, err)) < 0)
		goto fail;
	return 0;
fail:
	airlock_environment_spec_clear(ret);
	return r;
}
