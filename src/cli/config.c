/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock config check FILE: the startup checks, run on demand, and the
 * settings they resolved.
 */
#include <stdio.h>
#include <string.h>

#include "airlock/mechanisms.h"
#include "cli/common.h"

static void config_usage(FILE *out)
{
	fprintf(out, "usage: airlock config check [FILE]\n\n"
	             "Load FILE (or only the embedded defaults) with the AIRLOCK_* environment\n"
	             "overrides, run the startup checks, and print the resolved settings.\n"
	             "Exit 0 when startup would proceed, 78 when it would refuse (the message\n"
	             "names the settings and their values), 64 on bad usage.\n");
}

int cli_config(int argc, char **argv)
{
	if (argc < 2 || cli_is_help(argv[1])) {
		config_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
	}
	if (strcmp(argv[1], "check") != 0 || argc > 3) {
		config_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	if (argc == 3 && cli_is_help(argv[2])) {
		config_usage(stdout);
		return CLI_EXIT_OK;
	}
	airlock_error err = { 0 };
	airlock_settings s = { 0 };
	if (cli_load_settings(argc == 3 ? argv[2] : NULL, NULL, &s, &err) < 0) {
		cli_error("config check", &err);
		return cli_exit_for(&err);
	}
	airlock_settings_print(&s, stdout);
	const char *why = airlock_mechanism_unavailable_reason(s.mechanism);
	if (why)
		printf("# note: sandbox.mechanism=%s cannot run in this build: %s\n",
		       airlock_mechanism_name(s.mechanism), why);
	printf("# startup checks passed\n");
	airlock_settings_clear(&s);
	return CLI_EXIT_OK;
}
