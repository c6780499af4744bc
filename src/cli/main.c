/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock: one binary, one file per verb (as git's builtin/ does). Verbs whose work is not
 * built yet say so and exit 69; none pretends.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/common.h"

typedef struct verb {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
	const char *missing; /* set when the verb is not implemented yet */
} verb;

static const verb verbs[] = {
	{ "run", cli_run, "provision a sandbox, run one command, destroy it, print the result", NULL },
	{ "config", cli_config, "check a settings file: run the startup checks, print what resolved", NULL },
	{ "doctor", cli_doctor, "say which mechanisms this host can run (and check a configured worker)", NULL },
	{ "serve", cli_serve, "run the execution service (airlockd): the internal API", NULL },
	{ "worker", cli_worker, "run the worker (airlock-worker): a run's lease", NULL },
	{ "tool", cli_tool, "try the worker's tools by hand: list, lease, call", NULL },
	{ "egress", cli_egress, "validate and check egress policies", NULL },
	{ "proxy", cli_proxy, "run the egress proxy on its own", NULL },
	{ "image", cli_image, "build and list sandbox images, named by digest", NULL },
	{ "artifact", cli_artifact, "a worker's artifact store: put, get, ls, rm", NULL },
	{ "mcp", cli_mcp, "serve the tools to an MCP client over stdio (embedded or a worker's)", NULL },
};

static void usage(FILE *out)
{
	fprintf(out, "usage: airlock VERB [OPTIONS] [-- ARGV...]\n\n"
	             "Runs untrusted code in isolated sandboxes with hard limits.\n\nverbs:\n");
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(out, "  %-9s %s%s\n", verbs[i].name, verbs[i].summary,
		        verbs[i].missing ? " (not implemented yet)" : "");
	fprintf(out, "\n'airlock VERB --help' describes a verb. Exit codes are listed in the README.\n");
}

int main(int argc, char **argv)
{
	/* No reader can kill the service: a closed pipe on our stdout (airlock
	 * run ... | head) or on a command's stdin is an EPIPE the code handles,
	 * never a SIGPIPE that ends the process before the sandbox is
	 * destroyed. The processes we start reset it (util/run.c, the native
	 * command launcher native_cmd_main and init), so no command inherits
	 * the ignored disposition. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	if (cli_is_help(argv[1])) {
		usage(stdout);
		return CLI_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		const verb *v = &verbs[i];
		if (strcmp(argv[1], v->name) != 0)
			continue;
		if (v->fn)
			return v->fn(argc - 1, argv + 1);
		if (argc > 2 && cli_is_help(argv[2])) {
			printf("usage: airlock %s\n\n%s.\n\nNot implemented yet: %s.\n", v->name, v->summary,
			       v->missing);
			return CLI_EXIT_OK;
		}
		fprintf(stderr, "airlock %s: NotImplemented: %s\n", v->name, v->missing);
		return CLI_EXIT_UNAVAILABLE;
	}
	fprintf(stderr, "airlock: unknown verb '%s'\n\n", argv[1]);
	usage(stderr);
	return CLI_EXIT_USAGE;
}
