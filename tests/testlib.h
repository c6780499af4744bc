/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_TESTLIB_H
#define AIRLOCK_TESTLIB_H

/* Helpers shared by the test suites (header-only; each suite is one binary). */

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/types.h"

#define TEST_IMAGE "sha256:0000000000000000000000000000000000000000000000000000000000000000"

/* A valid spec at small limits, owned by the caller (clear with
 * airlock_environment_spec_clear). */
static inline void test_spec(airlock_environment_spec *s, const char *tenant, const char *run)
{
	memset(s, 0, sizeof(*s));
	s->tenant_id = strdup(tenant);
	s->run_id = strdup(run);
	s->lease_epoch = 1;
	s->image_digest = strdup(TEST_IMAGE);
	s->limits = (airlock_resource_limits){
		.cpu_millicores = 1000, .memory_bytes = 256ll << 20, .pids_max = 64,
		.workspace_bytes = 64ll << 20, .inodes_max = 10000, .wall_clock_seconds = 60,
	};
	s->egress.mode = AIRLOCK_EGRESS_DENY;
	cr_assert_eq(airlock_env_add(&s->environment, "HOME", "/workspace"), 0);
	cr_assert_eq(airlock_env_add(&s->environment, "PATH", "/usr/bin:/bin"), 0);
}

/* A command over a static argv (not owned; do not clear). */
static inline airlock_execution_command test_command(char **argv)
{
	size_t n = 0;
	while (argv[n])
		n++;
	return (airlock_execution_command){
		.argv = argv, .argc = n, .working_directory = (char *)".",
		.timeout_seconds = 30, .maximum_output_bytes = 1 << 20,
	};
}

#endif
