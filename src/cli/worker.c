/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock worker: runs the worker's daemon, airlock-worker
 * (docs/worker-api.md), a program of its own so that what the worker
 * holds in memory is the worker side alone (gate no_runtime_in_worker).
 * The program is the one installed beside this airlock, found through
 * /proc/self/exe: never a PATH search, which an environment could point
 * elsewhere. Its arguments pass through unchanged.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/common.h"

static void worker_usage(FILE *out)
{
	fprintf(out,
	        "usage: airlock worker [--config FILE]\n\n"
	        "Run the worker (docs/worker-api.md) in the foreground: executes the airlock-worker\n"
	        "program installed beside this airlock with the same arguments. Its settings are\n"
	        "the worker: section of the settings file and the AIRLOCK_WORKER_* overrides.\n");
}

int cli_worker(int argc, char **argv)
{
	if (argc > 1 && cli_is_help(argv[1])) {
		worker_usage(stdout);
		return CLI_EXIT_OK;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0 || (size_t)n >= sizeof(self) - sizeof("/airlock-worker")) {
		fprintf(stderr, "airlock worker: cannot read /proc/self/exe: %s\n", strerror(errno));
		return CLI_EXIT_UNAVAILABLE;
	}
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (!slash) {
		fprintf(stderr, "airlock worker: /proc/self/exe is not a path\n");
		return CLI_EXIT_UNAVAILABLE;
	}
	strcpy(slash + 1, "airlock-worker");
	static char name[] = "airlock-worker";
	argv[0] = name;
	execv(self, argv);
	fprintf(stderr, "airlock worker: cannot execute %s: %s\n", self, strerror(errno));
	return CLI_EXIT_UNAVAILABLE;
}
