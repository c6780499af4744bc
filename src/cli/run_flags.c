/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock run's flags: its usage, the options, each value parsed and the
 * combinations refused before anything is opened, and the limits the flags
 * set over the settings'.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/types.h"
#include "cli/common.h"
#include "cli/run.h"
#include "util/cleanup.h"

static void run_usage(FILE *out)
{
	fprintf(out,
	        "usage: airlock run [OPTIONS] -- ARGV...\n\n"
	        "Provision a sandbox, run ARGV once in it, destroy it, and print the result.\n"
	        "ARGV is an argument vector, never a shell string: write -- bash -lc 'a && b'\n"
	        "to use a shell.\n\n"
	        "options:\n"
	        "  --mechanism NAME      fake, native, gvisor, microvm (default: settings)\n"
	        "  --config FILE         settings file (default: the embedded defaults)\n"
	        "  --json                print the result object as JSON\n"
	        "  --cpu MILLICORES      cpu_millicores\n"
	        "  --memory BYTES        memory_bytes (K, M, G suffixes)\n"
	        "  --pids N              pids_max\n"
	        "  --workspace-bytes B   workspace_bytes (K, M, G suffixes)\n"
	        "  --inodes N            inodes_max\n"
	        "  --timeout SECONDS     wall clock for the sandbox and the command (clamped to\n"
	        "                        sandbox.run_command's 300 s, like the model's value)\n"
	        "  --output-limit BYTES  maximum_output_bytes per stream (default 1M)\n"
	        "  --stdin FILE|-        the command's standard input: a file, a pipe or FIFO\n"
	        "                        (read until closed, within the start budget), or - for\n"
	        "                        airlock run's own standard input; /dev/null is empty\n"
	        "  --cwd DIR             working directory, relative to /workspace\n"
	        "  --env NAME            pass NAME from this environment (tier 1; repeatable;\n"
	        "                        credentials are refused)\n"
	        "  --tenant ID           tenant id (default: local)\n"
	        "  --policy FILE         the operator's egress policy (YAML; see airlock egress)\n"
	        "  --network             this call's yes to network: with an allowlist --policy,\n"
	        "                        the sandbox reaches its destinations through the egress\n"
	        "                        proxy (HTTP_PROXY/HTTPS_PROXY); nothing else is reachable\n"
	        "  --dns ADDR[:PORT],..  the proxy's resolver (default: /etc/resolv.conf)\n"
	        "  --proxy-log FILE      append the proxy's JSON decision lines here (default: stderr)\n"
	        "  --service ADDRESS     run in an execution service (airlock serve) at unix:PATH\n"
	        "                        or HOST:PORT (TLS) instead of in this process; the\n"
	        "                        service holds the mechanism, the operator's egress\n"
	        "                        policy and the proxy (--network sends the allowlist)\n"
	        "  --credential-file F   the service credential (0600, one token); with --service\n"
	        "  --tls-ca FILE         PEM the service's certificate must chain to (HOST:PORT)\n"
	        "  --tls-cert FILE       client certificate (PEM), when the service asks for one\n"
	        "  --tls-key FILE        its key (PEM)\n"
	        "Without --json: the command's stdout and stderr as they arrive, then one\n"
	        "summary line on stderr. Exit status: the command's own, 137 when it was killed, or one of the\n"
	        "codes in the README.\n");
}

enum {
	OPT_MECHANISM = 256, OPT_CONFIG, OPT_JSON, OPT_CPU, OPT_MEMORY, OPT_PIDS, OPT_WSBYTES,
	OPT_INODES, OPT_TIMEOUT, OPT_OUTPUT, OPT_STDIN, OPT_CWD, OPT_ENV, OPT_TENANT, OPT_HELP,
	OPT_POLICY, OPT_NETWORK, OPT_DNS, OPT_PROXY_LOG, OPT_SERVICE, OPT_CREDENTIAL_FILE, OPT_TLS_CA,
	OPT_TLS_CERT, OPT_TLS_KEY,
};

static const struct option run_options[] = {
	{ "mechanism", required_argument, NULL, OPT_MECHANISM },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "cpu", required_argument, NULL, OPT_CPU },
	{ "memory", required_argument, NULL, OPT_MEMORY },
	{ "pids", required_argument, NULL, OPT_PIDS },
	{ "workspace-bytes", required_argument, NULL, OPT_WSBYTES },
	{ "inodes", required_argument, NULL, OPT_INODES },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "output-limit", required_argument, NULL, OPT_OUTPUT },
	{ "stdin", required_argument, NULL, OPT_STDIN },
	{ "cwd", required_argument, NULL, OPT_CWD },
	{ "env", required_argument, NULL, OPT_ENV },
	{ "tenant", required_argument, NULL, OPT_TENANT },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "policy", required_argument, NULL, OPT_POLICY },
	{ "network", no_argument, NULL, OPT_NETWORK },
	{ "dns", required_argument, NULL, OPT_DNS },
	{ "proxy-log", required_argument, NULL, OPT_PROXY_LOG },
	{ "service", required_argument, NULL, OPT_SERVICE },
	{ "credential-file", required_argument, NULL, OPT_CREDENTIAL_FILE },
	{ "tls-ca", required_argument, NULL, OPT_TLS_CA },
	{ "tls-cert", required_argument, NULL, OPT_TLS_CERT },
	{ "tls-key", required_argument, NULL, OPT_TLS_KEY },
	{ 0 },
};


/* Decimal digits only, no sign, no space, no suffix, within int64_t. */
static bool parse_count(const char *s, int64_t *ret)
{
	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	char *end = NULL;
	long long v = strtoll(s, &end, 10);
	if (errno || *end)
		return false;
	*ret = v;
	return true;
}

/* A positive integer flag, with K/M/G suffixes when bytes is set. */
static int parse_flag(const char *flag, const char *value, bool bytes, int64_t *ret)
{
	airlock_error err = { 0 };
	int64_t v = 0;
	if (bytes) {
		if (airlock_parse_bytes(value, flag, &v, &err) < 0) {
			fprintf(stderr, "airlock run: %s\n", err.message);
			return -1;
		}
	} else if (!parse_count(value, &v)) {
		fprintf(stderr, "airlock run: %s %s: not an integer\n", flag, value);
		return -1;
	}
	if (v <= 0) {
		fprintf(stderr, "airlock run: %s %s: must be positive\n", flag, value);
		return -1;
	}
	*ret = v;
	return 0;
}

int run_parse(int argc, char **argv, run_flags *f, int *ret_first_arg)
{
	*f = (run_flags){ .cpu = -1, .memory = -1, .pids = -1, .wsbytes = -1, .inodes = -1,
		          .timeout = -1, .output = -1, .tenant = "local" };
	optind = 1;
	opterr = 1;
	int c;
	while ((c = getopt_long(argc, argv, "+h", run_options, NULL)) != -1) {
		int r = 0;
		switch (c) {
		case OPT_MECHANISM: f->mechanism = optarg; break;
		case OPT_CONFIG: f->config = optarg; break;
		case OPT_JSON: f->json = true; break;
		case OPT_CPU: r = parse_flag("--cpu", optarg, false, &f->cpu); break;
		case OPT_MEMORY: r = parse_flag("--memory", optarg, true, &f->memory); break;
		case OPT_PIDS: r = parse_flag("--pids", optarg, false, &f->pids); break;
		case OPT_WSBYTES: r = parse_flag("--workspace-bytes", optarg, true, &f->wsbytes); break;
		case OPT_INODES: r = parse_flag("--inodes", optarg, false, &f->inodes); break;
		case OPT_TIMEOUT: r = parse_flag("--timeout", optarg, false, &f->timeout); break;
		case OPT_OUTPUT: r = parse_flag("--output-limit", optarg, true, &f->output); break;
		case OPT_STDIN: f->stdin_file = optarg; break;
		case OPT_CWD: f->cwd = optarg; break;
		case OPT_TENANT: f->tenant = optarg; break;
		case OPT_POLICY: f->policy = optarg; break;
		case OPT_NETWORK: f->network = true; break;
		case OPT_DNS: f->dns = optarg; break;
		case OPT_PROXY_LOG: f->proxy_log = optarg; break;
		case OPT_SERVICE: f->service = optarg; break;
		case OPT_CREDENTIAL_FILE: f->credential_file = optarg; break;
		case OPT_TLS_CA: f->tls_ca = optarg; break;
		case OPT_TLS_CERT: f->tls_cert = optarg; break;
		case OPT_TLS_KEY: f->tls_key = optarg; break;
		case OPT_ENV:
			if (f->n_env == AIRLOCK_RUN_ENV_FLAGS_MAX) {
				fprintf(stderr, "airlock run: more than %d --env flags\n", AIRLOCK_RUN_ENV_FLAGS_MAX);
				return CLI_EXIT_USAGE;
			}
			f->env[f->n_env++] = optarg;
			break;
		case OPT_HELP:
		case 'h':
			run_usage(stdout);
			return 0;
		default:
			run_usage(stderr);
			return CLI_EXIT_USAGE;
		}
		if (r < 0)
			return CLI_EXIT_USAGE;
	}
	/* The floors and the ceiling every door checks (types.h), said here
	 * with the flag's name; a spec from elsewhere meets the same numbers
	 * in the port. */
	if (f->memory > 0 && f->memory < AIRLOCK_LIMIT_MEMORY_BYTES_MIN) {
		fprintf(stderr, "airlock run: --memory %lld: below the minimum of 8M (%lld bytes) a "
		                "sandbox needs to start\n",
		        (long long)f->memory, (long long)AIRLOCK_LIMIT_MEMORY_BYTES_MIN);
		return CLI_EXIT_USAGE;
	}
	if (f->pids > 0 && f->pids < AIRLOCK_LIMIT_PIDS_MIN) {
		fprintf(stderr, "airlock run: --pids %lld: below the minimum of %lld (init, the command "
		                "starter and the command need one each)\n",
		        (long long)f->pids, (long long)AIRLOCK_LIMIT_PIDS_MIN);
		return CLI_EXIT_USAGE;
	}
	if (f->output > AIRLOCK_OUTPUT_BYTES_MAX) {
		fprintf(stderr, "airlock run: --output-limit %lld: above the ceiling of 16M (%lld bytes) "
		                "per stream\n",
		        (long long)f->output, (long long)AIRLOCK_OUTPUT_BYTES_MAX);
		return CLI_EXIT_USAGE;
	}
	if (optind >= argc) {
		fprintf(stderr, "airlock run: no command: give it after --, e.g. airlock run -- python3 -c 'print(1)'\n");
		return CLI_EXIT_USAGE;
	}
	if (f->network && !f->policy) {
		fprintf(stderr, "airlock run: --network needs --policy FILE: egress is denied by default, "
		                "and the destinations are the operator's allowlist\n");
		return CLI_EXIT_USAGE;
	}
	if ((f->dns || f->proxy_log) && !f->network) {
		fprintf(stderr, "airlock run: --dns and --proxy-log configure the egress proxy, which "
		                "runs only with --network\n");
		return CLI_EXIT_USAGE;
	}
	if (f->service && !f->credential_file) {
		fprintf(stderr, "airlock run: --service needs --credential-file FILE: every call to "
		                "the service carries its credential\n");
		return CLI_EXIT_USAGE;
	}
	if (!f->service && (f->credential_file || f->tls_ca || f->tls_cert || f->tls_key)) {
		fprintf(stderr, "airlock run: --credential-file and --tls-* are for --service\n");
		return CLI_EXIT_USAGE;
	}
	/* The service runs its own mechanism and its own proxy. */
	if (!f->tls_cert != !f->tls_key) {
		fprintf(stderr, "airlock run: --tls-cert and --tls-key go together\n");
		return CLI_EXIT_USAGE;
	}
	if (f->service && f->mechanism) {
		fprintf(stderr, "airlock run: --mechanism is the service's with --service\n");
		return CLI_EXIT_USAGE;
	}
	if (f->service && (f->dns || f->proxy_log)) {
		fprintf(stderr, "airlock run: --dns and --proxy-log configure a local egress proxy; "
		                "with --service the service holds the proxy\n");
		return CLI_EXIT_USAGE;
	}
	*ret_first_arg = optind;
	return -1; /* go on */
}

void run_build_limits(const airlock_settings *s, const run_flags *f, airlock_resource_limits *ret)
{
	airlock_resource_limits l = s->defaults.limits;
	const struct {
		int64_t given;
		int64_t *field;
	} rows[] = {
		{ f->cpu, &l.cpu_millicores },     { f->memory, &l.memory_bytes },
		{ f->pids, &l.pids_max },          { f->wsbytes, &l.workspace_bytes },
		{ f->inodes, &l.inodes_max },      { f->timeout, &l.wall_clock_seconds },
	};
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
		if (rows[i].given > 0)
			*rows[i].field = rows[i].given;
	*ret = l;
}
