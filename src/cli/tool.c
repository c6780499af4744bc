/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock tool: the worker's API by hand (docs/worker-api.md), through the
 * worker library's client (airlock/worker_client.h): the tools it serves,
 * a run's lease, and one tool call with its result printed as JSON.
 *
 * The worker's answers are untrusted bytes: a result is re-encoded JSON
 * (the encoder escapes every control), and an error's class and message go
 * to the terminal escaped. The token is read by the library from its file
 * as a credential and never printed.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/run_command.h"
#include "airlock/worker_client.h"
#include "cli/common.h"

/* What a call short of a tool call waits for (the lease, the list): the
 * worker answers them from its database. */
#define TOOL_SHORT_TIMEOUT_MS 30000

static void tool_usage(FILE *out)
{
	fprintf(out,
	        "usage: airlock tool list [OPTIONS]\n"
	        "       airlock tool lease RUN --epoch N [--ttl SECONDS] [--tenant T] [OPTIONS]\n"
	        "       airlock tool release RUN --epoch N [--tenant T] [OPTIONS]\n"
	        "       airlock tool call RUN NAME JSON --epoch N [--tenant T] [--network]\n"
	        "                         [--deadline-ms UNIX_MS] [OPTIONS]\n\n"
	        "Try the worker's tools by hand (docs/worker-api.md). list prints the tools the\n"
	        "worker serves; lease claims or renews RUN's lease at epoch N (TTL 60 s unless\n"
	        "--ttl; tenant 'dev' unless --tenant); release ends it; call runs tool NAME under\n"
	        "the lease with JSON as its arguments, e.g.\n"
	        "  airlock tool call run-1 sandbox.run_command '{\"command\": [\"echo\", \"hi\"]}' "
	        "--epoch 1\n"
	        "and prints the result object on stdout, indented; artifact.export hands a file\n"
	        "or text to the user:\n"
	        "  airlock tool call run-1 artifact.export '{\"path\": \"out/report.csv\"}' --epoch 1\n\n"
	        "OPTIONS: --worker ADDRESS (unix:/path, or HOST:PORT over TLS; default the\n"
	        "settings' worker.listen), --token-file FILE (a bearer token of the worker's\n"
	        "tokens_file, read as a credential: mode 0600; none: the worker's dev mode),\n"
	        "--tls-ca-file FILE (the CA of a HOST:PORT worker), --config FILE.\n\n"
	        "Exit status of call: the command's own exit status when the worker answered\n"
	        "200, 137 when it was killed (killed_by says why), as airlock run. Otherwise\n"
	        "(every subcommand): 0 on a 2xx answer; on an error answer, a line naming the\n"
	        "worker, the status, the class and the message, and 65 (refused: 400, 401,\n"
	        "403, 404, 409) or 69 (503, or the worker not reachable); 64 bad usage.\n");
}

enum {
	OPT_WORKER = 256, OPT_TOKEN, OPT_TLS_CA, OPT_CONFIG, OPT_EPOCH, OPT_TENANT, OPT_NETWORK,
	OPT_DEADLINE, OPT_TTL, OPT_HELP
};

static const struct option tool_options[] = {
	{ "worker", required_argument, NULL, OPT_WORKER },
	{ "token-file", required_argument, NULL, OPT_TOKEN },
	{ "tls-ca-file", required_argument, NULL, OPT_TLS_CA },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "epoch", required_argument, NULL, OPT_EPOCH },
	{ "tenant", required_argument, NULL, OPT_TENANT },
	{ "network", no_argument, NULL, OPT_NETWORK },
	{ "deadline-ms", required_argument, NULL, OPT_DEADLINE },
	{ "ttl", required_argument, NULL, OPT_TTL },
	{ "help", no_argument, NULL, OPT_HELP },
	{ 0 },
};

typedef struct tool_flags {
	const char *worker, *token_file, *tls_ca_file, *config, *tenant;
	int64_t epoch, deadline_ms, ttl;
	bool has_epoch, network;
	char *args[4]; /* the positional arguments after the subcommand */
	int nargs;
} tool_flags;

/* A flag's integer, named with its subcommand ("tool lease: --ttl ..."). */
static bool number(const char *sub, const char *flag, const char *v, int64_t min, int64_t max,
                   int64_t *ret)
{
	char verb[32];
	snprintf(verb, sizeof(verb), "tool %s", sub);
	return cli_flag_i64(verb, flag, v, min, max, ret);
}

/* -1 to go on, or the exit status. */
static int tool_parse(const char *sub, int argc, char **argv, tool_flags *f)
{
	*f = (tool_flags){ .ttl = 60 };
	optind = 1;
	opterr = 1;
	int c;
	/* Options may follow the positional arguments (no '+'): a JSON
	 * argument never starts with '-'. */
	while ((c = getopt_long(argc, argv, "h", tool_options, NULL)) != -1) {
		switch (c) {
		case OPT_WORKER: f->worker = optarg; break;
		case OPT_TOKEN: f->token_file = optarg; break;
		case OPT_TLS_CA: f->tls_ca_file = optarg; break;
		case OPT_CONFIG: f->config = optarg; break;
		case OPT_TENANT: f->tenant = optarg; break;
		case OPT_NETWORK: f->network = true; break;
		case OPT_EPOCH:
			if (!number(sub, "--epoch", optarg, 0, INT64_MAX, &f->epoch))
				return CLI_EXIT_USAGE;
			f->has_epoch = true;
			break;
		case OPT_DEADLINE:
			if (!number(sub, "--deadline-ms", optarg, 1, INT64_MAX, &f->deadline_ms))
				return CLI_EXIT_USAGE;
			break;
		case OPT_TTL:
			if (!number(sub, "--ttl", optarg, 1, 86400, &f->ttl))
				return CLI_EXIT_USAGE;
			break;
		case OPT_HELP:
		case 'h':
			tool_usage(stdout);
			return CLI_EXIT_OK;
		default:
			tool_usage(stderr);
			return CLI_EXIT_USAGE;
		}
	}
	while (optind < argc) {
		if (f->nargs == (int)(sizeof(f->args) / sizeof(f->args[0]))) {
			fprintf(stderr, "airlock tool %s: too many arguments\n", sub);
			return CLI_EXIT_USAGE;
		}
		f->args[f->nargs++] = argv[optind++];
	}
	return -1;
}

/* The worker's address: --worker, else the settings' worker.listen. */
static int worker_config(const char *sub, const tool_flags *f, int64_t timeout_ms,
                         airlock_settings *s, airlock_worker_client_config *ret)
{
	char verb[32];
	snprintf(verb, sizeof(verb), "tool %s", sub);
	const cli_worker_flags wf = { .worker = f->worker, .token_file = f->token_file,
		                      .tls_ca_file = f->tls_ca_file, .config = f->config };
	return cli_worker_config(verb, &wf, timeout_ms, s, ret);
}

static int print_answer(const char *sub, const char *address, const airlock_worker_answer *a,
                        const char *hint_404)
{
	char verb[32];
	snprintf(verb, sizeof(verb), "tool %s", sub);
	return cli_print_worker_answer(verb, address, a, hint_404);
}

/* One request and its answer printed; the exit status. */
static int request(const char *sub, const airlock_worker_client_config *cfg,
                   const char *method, const char *path, const char *body, const char *hint_404)
{
	airlock_worker_answer a = { 0 };
	airlock_error err = { 0 };
	char verb[32];
	snprintf(verb, sizeof(verb), "tool %s", sub);
	if (airlock_worker_client_call(cfg, method, path, body, &a, &err) < 0) {
		cli_error(verb, &err);
		return cli_exit_for(&err);
	}
	int code = print_answer(sub, cfg->address, &a, hint_404);
	airlock_worker_answer_clear(&a);
	return code;
}

/* A run id or tenant as the worker takes them: 1 to 128 of
 * [A-Za-z0-9_-]. Checked here, before it goes into a path or a query. */
static bool id_ok(const char *sub, const char *what, const char *v)
{
	size_t n = strlen(v);
	if (n >= 1 && n <= 128 &&
	    strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n)
		return true;
	fprintf(stderr, "airlock tool %s: %s '", sub, what);
	cli_fputs_escaped(stderr, v);
	fputs("': 1 to 128 of A-Z, a-z, 0-9, '_' and '-'\n", stderr);
	return false;
}

static int tool_list(const tool_flags *f, const airlock_worker_client_config *cfg)
{
	if (f->nargs != 0 || f->has_epoch) {
		fprintf(stderr, "usage: airlock tool list [OPTIONS]\n");
		return CLI_EXIT_USAGE;
	}
	return request("list", cfg, "GET", "/v1/tools", NULL, NULL);
}

static int tool_lease(const tool_flags *f, const airlock_worker_client_config *cfg)
{
	if (f->nargs != 1 || !f->has_epoch) {
		fprintf(stderr, "usage: airlock tool lease RUN --epoch N [--ttl SECONDS] [--tenant T]\n");
		return CLI_EXIT_USAGE;
	}
	const char *tenant = f->tenant ? f->tenant : "dev";
	if (!id_ok("lease", "RUN", f->args[0]) || !id_ok("lease", "--tenant", tenant))
		return CLI_EXIT_USAGE;
	char path[192], body[256];
	snprintf(path, sizeof(path), "/v1/runs/%s/lease", f->args[0]);
	snprintf(body, sizeof(body), "{\"tenant_id\": \"%s\", \"epoch\": %lld, \"ttl_seconds\": %lld}",
	         tenant, (long long)f->epoch, (long long)f->ttl);
	return request("lease", cfg, "PUT", path, body, "the run is another tenant's");
}

static int tool_release(const tool_flags *f, const airlock_worker_client_config *cfg)
{
	if (f->nargs != 1 || !f->has_epoch) {
		fprintf(stderr, "usage: airlock tool release RUN --epoch N [--tenant T]\n");
		return CLI_EXIT_USAGE;
	}
	if (!id_ok("release", "RUN", f->args[0]) ||
	    (f->tenant && !id_ok("release", "--tenant", f->tenant)))
		return CLI_EXIT_USAGE;
	char path[384];
	snprintf(path, sizeof(path), "/v1/runs/%s/lease?epoch=%lld%s%s", f->args[0],
	         (long long)f->epoch, f->tenant ? "&tenant_id=" : "", f->tenant ? f->tenant : "");
	int code = request("release", cfg, "DELETE", path, NULL,
	                   "no lease of this run, or another tenant's");
	if (code == CLI_EXIT_OK)
		fprintf(stderr, "airlock tool release: the claim at epoch %lld is over\n",
		        (long long)f->epoch);
	return code;
}

static int tool_call(const tool_flags *f, const airlock_worker_client_config *cfg)
{
	if (f->nargs != 3 || !f->has_epoch) {
		fprintf(stderr, "usage: airlock tool call RUN NAME JSON --epoch N [--tenant T] "
		                "[--network] [--deadline-ms UNIX_MS] [OPTIONS]\n");
		return CLI_EXIT_USAGE;
	}
	airlock_worker_tool_request req = { .run_id = f->args[0], .tool = f->args[1],
		                            .arguments_json = f->args[2], .epoch = f->epoch,
		                            .tenant_id = f->tenant, .network_enabled = f->network,
		                            .deadline_ms = f->deadline_ms };
	airlock_worker_answer a = { 0 };
	airlock_error err = { 0 };
	if (airlock_worker_client_tool_call(cfg, &req, &a, &err) < 0) {
		cli_error("tool call", &err);
		return err.cls == AIRLOCK_ERR_TOOL_VALIDATION ? CLI_EXIT_USAGE : cli_exit_for(&err);
	}
	/* The worker's 404 is a name it does not route, or a run that has
	 * no lease of this tenant. */
	const char *hint = strcmp(a.error.message, "no such route") == 0
	                           ? "the worker serves no tool of that name: airlock tool list"
	                           : "no lease of this run for this tenant: airlock tool lease";
	int code = print_answer("call", cfg->address, &a, hint);
	/* As airlock run: the command's own status, 137 when it was killed
	 * (sandbox.run_command; any other tool's answer is its result, 0). */
	if (code == CLI_EXIT_OK && a.status == 200 && strcmp(req.tool, "sandbox.run_command") == 0)
		code = a.has_exit_code ? (int)(a.exit_code & 0xff) : CLI_EXIT_KILLED;
	airlock_worker_answer_clear(&a);
	return code;
}

int cli_tool(int argc, char **argv)
{
	if (argc < 2 || cli_is_help(argv[1])) {
		tool_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
	}
	static const struct {
		const char *name;
		int (*fn)(const tool_flags *f, const airlock_worker_client_config *cfg);
		int64_t timeout_ms;
	} subs[] = {
		{ "list", tool_list, TOOL_SHORT_TIMEOUT_MS },
		{ "lease", tool_lease, TOOL_SHORT_TIMEOUT_MS },
		{ "release", tool_release, TOOL_SHORT_TIMEOUT_MS },
		/* The tool's longest command, a provision's start budget (the
		 * ceiling's 60 s at most) and a margin for the round trips. */
		{ "call", tool_call, (AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS + 60 + 30) * 1000LL },
	};
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		if (strcmp(argv[1], subs[i].name) != 0)
			continue;
		tool_flags f;
		int code = tool_parse(subs[i].name, argc - 1, argv + 1, &f);
		if (code >= 0)
			return code;
		airlock_settings s = { 0 };
		airlock_worker_client_config cfg;
		code = worker_config(subs[i].name, &f, subs[i].timeout_ms, &s, &cfg);
		if (code < 0)
			code = subs[i].fn(&f, &cfg);
		airlock_settings_clear(&s);
		return code;
	}
	fputs("airlock tool: unknown subcommand '", stderr);
	cli_fputs_escaped(stderr, argv[1]);
	fputs("'\n", stderr);
	tool_usage(stderr);
	return CLI_EXIT_USAGE;
}
