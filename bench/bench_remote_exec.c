/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The C remote adapter's side of bench/bench_python.py: the worker's own
 * client of a running airlock serve (airlock_remote under the core, as the
 * worker and `airlock run --service` use it) timing execute of /bin/true.
 *
 *   bench_remote_exec ADDRESS CREDENTIAL_FILE IMAGE_DIGEST
 *
 * It provisions one sandbox, then reads commands from stdin: a number N
 * runs N executes and prints their times in nanoseconds on one line; "q"
 * (or end of input) destroys the sandbox and exits. So the Python side can
 * interleave rounds of both clients against the same service in one run.
 * Exits 1 when any call failed (the error on stderr).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/remote.h"

#include "bench_util.h"

static int fail(const char *what, const airlock_error *err)
{
	fprintf(stderr, "bench_remote_exec: %s: %s\n", what, err->message);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: bench_remote_exec ADDRESS CREDENTIAL_FILE IMAGE_DIGEST\n");
		return 64;
	}
	char token[4097] = "";
	FILE *f = fopen(argv[2], "re");
	if (!f || !fgets(token, sizeof(token), f)) {
		fprintf(stderr, "bench_remote_exec: %s: cannot read the credential\n", argv[2]);
		if (f)
			fclose(f);
		return 1;
	}
	fclose(f);
	token[strcspn(token, "\r\n")] = 0;

	airlock_error err = { 0 };
	airlock_remote_config rc = { .address = argv[1], .credential = token,
		                     .credential_len = strlen(token) };
	airlock_remote *rm = NULL;
	airlock_exec *exec = NULL;
	if (airlock_remote_new(&rc, &rm, &err) < 0 ||
	    airlock_exec_new(airlock_remote_ops(), rm, NULL, &exec, &err) < 0)
		return fail("open", &err);

	airlock_environment_spec spec = { 0 };
	spec.tenant_id = strdup("bench");
	spec.run_id = strdup("bench-c");
	spec.lease_epoch = 1;
	spec.image_digest = strdup(argv[3]);
	spec.limits = (airlock_resource_limits){ .cpu_millicores = 1000, .memory_bytes = 256ll << 20,
		                                 .pids_max = 64, .workspace_bytes = 64ll << 20,
		                                 .inodes_max = 10000, .wall_clock_seconds = 60 };
	spec.egress.mode = AIRLOCK_EGRESS_DENY;
	airlock_environment_handle h = { 0 };
	int status = 0;
	if (!spec.tenant_id || !spec.run_id || !spec.image_digest) {
		fprintf(stderr, "bench_remote_exec: out of memory\n");
		status = 1;
		goto out;
	}
	if (airlock_exec_provision(exec, &spec, &h, &err) < 0) {
		status = fail("provision", &err);
		goto out;
	}

	char a0[] = "/bin/true", cwd[] = ".";
	char *cargv[] = { a0, NULL };
	airlock_execution_command cmd = { .argv = cargv, .argc = 1, .working_directory = cwd,
		                          .timeout_seconds = 60, .maximum_output_bytes = 4096 };
	airlock_exec_call call = { .tenant_id = "bench", .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	char line[64];
	while (status == 0 && fgets(line, sizeof(line), stdin) && line[0] != 'q') {
		long n = strtol(line, NULL, 10);
		for (long i = 0; i < n && status == 0; i++) {
			airlock_execution_result res = { 0 };
			int64_t t0 = bench_now_ns();
			int r = airlock_exec_execute(exec, &call, &h, &cmd, &res, &err);
			int64_t t = bench_now_ns() - t0;
			if (r < 0)
				status = fail("execute", &err);
			else if (!res.has_exit_code || res.exit_code != 0) {
				fprintf(stderr, "bench_remote_exec: /bin/true did not exit 0 (killed_by %d)\n",
				        (int)res.killed_by);
				status = 1;
			}
			airlock_execution_result_clear(&res);
			printf("%s%lld", i ? " " : "", (long long)t);
		}
		printf("\n");
		fflush(stdout);
	}
	if (airlock_exec_destroy(exec, &h, &err) < 0 && status == 0)
		status = fail("destroy", &err);
out:
	airlock_environment_handle_clear(&h);
	airlock_environment_spec_clear(&spec);
	airlock_exec_free(exec);
	return status;
}
