/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock config check FILE: the startup checks, run on demand, and the
 * settings they resolved. airlock doctor: which mechanisms this host runs.
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

int cli_doctor(int argc, char **argv)
{
	if (argc > 1) {
		if (cli_is_help(argv[1])) {
			printf("usage: airlock doctor\n\nSay which sandbox mechanisms this host can run, "
			       "and for each one it cannot, why.\nExit 0 when at least one can run.\n");
			return CLI_EXIT_OK;
		}
		fprintf(stderr, "usage: airlock doctor\n");
		return CLI_EXIT_USAGE;
	}
	int usable = 0;
	for (int m = AIRLOCK_MECHANISM_INVALID + 1; m < AIRLOCK_MECHANISM__MAX; m++) {
		const char *why = airlock_mechanism_unavailable_reason((airlock_mechanism)m);
		const char *detail = why ? NULL : airlock_mechanism_detail((airlock_mechanism)m);
		printf("%-8s %s%s%s%s%s%s\n", airlock_mechanism_name((airlock_mechanism)m),
		       why ? "unavailable: " : "available",
		       why ? why : "", detail ? ", " : "", detail ? detail : "",
		       airlock_mechanism_production_allowed((airlock_mechanism)m) ? ""
		                                                                  : " (development only; production refuses it)",
		       m == AIRLOCK_MECHANISM_FAKE && !why ? " (executes nothing; for tests)" : "");
		if (!why)
			usable++;
	}
	return usable ? CLI_EXIT_OK : CLI_EXIT_UNAVAILABLE;
}
