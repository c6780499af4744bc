/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock egress: the egress policy on the command line (issue "The egress
 * boundary", item 8). `validate FILE` parses a policy with the same parser
 * the proxy and the worker's guard use and prints it normalized; `check`
 * asks the one evaluation function about a host and port.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "airlock/egress.h"
#include "cli/common.h"
#include "util/cleanup.h"

/* A policy that does not parse. The issue fixes this code (not 78, which is
 * the settings startup refusal): "exit 2 and FILE:LINE: message". */
#define EGRESS_EXIT_INVALID 2
/* check: the evaluation refused the destination. */
#define EGRESS_EXIT_DENY 1

static void egress_usage(FILE *out)
{
	fprintf(out, "usage: airlock egress SUBCOMMAND ...\n\n"
	             "Validate and check egress policies (the specification, \"The egress boundary\").\n\n"
	             "subcommands:\n"
	             "  validate FILE   parse FILE and print the normalized policy\n"
	             "  check ...       ask the evaluation function about a host and port\n\n"
	             "'airlock egress SUBCOMMAND --help' describes one.\n");
}

static void validate_usage(FILE *out)
{
	fprintf(out, "usage: airlock egress validate FILE\n\n"
	             "Parse the egress policy in FILE and print it normalized (host names lowercase,\n"
	             "without a trailing dot) on stdout.\n"
	             "Exit 0 when the policy is valid; 2 with FILE:LINE: and the rule broken on\n"
	             "stderr when it is not (or FILE cannot be read); 64 on bad usage.\n");
}

static void check_usage(FILE *out)
{
	fprintf(out, "usage: airlock egress check --policy FILE [--resolve HOST=ADDR[,ADDR...]]...\n"
	             "                            [--dns ADDR[:PORT]] HOST PORT\n\n"
	             "Evaluate HOST:PORT against the policy in FILE and print the decision as one\n"
	             "JSON object. Exit 0 for allow, 1 for deny; 2 (FILE:LINE: message) when the\n"
	             "policy does not parse; 64 on bad usage. The evaluation is the proxy's: an\n"
	             "address that is this host's own (in the network namespace the command runs\n"
	             "in) is refused as OWN_ADDRESS, and PORT is read by the proxy's rule (no sign,\n"
	             "no leading zero).\n\n"
	             "  --resolve HOST=ADDR[,ADDR...]  answer for HOST with these addresses instead of\n"
	             "                                 DNS (\"what if this name pointed there\");\n"
	             "                                 repeatable\n"
	             "  --dns ADDR[:PORT],...          servers for names not given with --resolve\n"
	             "                                 (default: the system's)\n");
}

static int egress_validate(int argc, char **argv)
{
	if (argc == 2 && cli_is_help(argv[1])) {
		validate_usage(stdout);
		return CLI_EXIT_OK;
	}
	/* One file and nothing else; a leading '-' is an option we do not have
	 * (a file with such a name can be given as ./-name). */
	if (argc != 2 || argv[1][0] == '-' || argv[1][0] == 0) {
		validate_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	airlock_error err = { 0 };
	airlock_egress_policy p = { 0 };
	if (airlock_egress_policy_load(argv[1], &p, &err) < 0) {
		/* The message already starts with FILE:LINE: (or FILE: when the
		 * file cannot be read), the form editors and CI jump to. */
		fprintf(stderr, "%s\n", err.message);
		return err.cls == AIRLOCK_ERR_CONFIG ? EGRESS_EXIT_INVALID : cli_exit_for(&err);
	}
	char *text = NULL;
	int r = airlock_egress_policy_format(&p, &text, &err);
	airlock_egress_policy_clear(&p);
	if (r < 0) {
		cli_error("egress validate", &err);
		return CLI_EXIT_SOFTWARE;
	}
	fputs(text, stdout);
	free(text);
	return CLI_EXIT_OK;
}

/* ---- check ---------------------------------------------------------------- */

/* --resolve HOST=ADDR[,ADDR...]: answers for a name the way the resolver
 * would, so an operator can ask "what if this name pointed there". A name
 * not in the table goes to c-ares (--dns, or the system's servers). */

typedef struct check_answer {
	char name[AIRLOCK_HOSTNAME_MAX + 1]; /* normalized */
	airlock_addr addrs[AIRLOCK_EGRESS_ADDRESSES_MAX];
	size_t n;
} check_answer;

typedef struct check_resolver {
	check_answer answers[AIRLOCK_CHECK_RESOLVE_MAX];
	size_t n;
	const char *dns; /* --dns, or NULL for the system's servers */
	airlock_egress_resolver *cares;
} check_resolver;

static int check_resolve(void *ctx, const char *name, airlock_addr *ret, size_t max,
                         size_t *ret_n)
{
	check_resolver *c = ctx;
	for (size_t i = 0; i < c->n; i++) {
		const check_answer *a = &c->answers[i];
		if (strcmp(a->name, name) != 0)
			continue;
		if (a->n > max)
			return -E2BIG;
		memcpy(ret, a->addrs, a->n * sizeof(a->addrs[0]));
		*ret_n = a->n;
		return 0;
	}
	if (!c->cares) {
		airlock_error err = { 0 };
		if (airlock_egress_resolver_new(c->dns, &c->cares, &err) < 0) {
			fprintf(stderr, "airlock egress check: %s\n", err.message);
			return -EIO;
		}
	}
	return airlock_egress_resolver_resolve(c->cares, name, ret, max, ret_n);
}

/* Parse "HOST=ADDR[,ADDR...]" into the table; false with a message. */
static bool check_add_answer(check_resolver *c, const char *spec)
{
	const char *eq = strchr(spec, '=');
	char shown[96];
	if (!eq || eq == spec || eq[1] == 0) {
		fprintf(stderr, "airlock egress check: --resolve \"%s\": want HOST=ADDR[,ADDR...]\n",
		        airlock_escape(shown, sizeof(shown), spec, strlen(spec)));
		return false;
	}
	if (c->n == AIRLOCK_CHECK_RESOLVE_MAX) {
		fprintf(stderr, "airlock egress check: more than %d --resolve options\n",
		        AIRLOCK_CHECK_RESOLVE_MAX);
		return false;
	}
	check_answer *a = &c->answers[c->n];
	memset(a, 0, sizeof(*a));
	if (!airlock_hostname_normalize(spec, (size_t)(eq - spec), false, a->name)) {
		fprintf(stderr, "airlock egress check: --resolve: \"%s\" is not a host name\n",
		        airlock_escape(shown, sizeof(shown), spec, (size_t)(eq - spec)));
		return false;
	}
	for (size_t i = 0; i < c->n; i++) {
		if (strcmp(c->answers[i].name, a->name) == 0) {
			fprintf(stderr, "airlock egress check: --resolve: %s given twice\n", a->name);
			return false;
		}
	}
	const char *p = eq + 1;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char text[INET6_ADDRSTRLEN + 1];
		if (a->n == AIRLOCK_EGRESS_ADDRESSES_MAX) {
			fprintf(stderr, "airlock egress check: --resolve %s: more than %d addresses\n",
			        a->name, AIRLOCK_EGRESS_ADDRESSES_MAX);
			return false;
		}
		if (len == 0 || len >= sizeof(text)) {
			fprintf(stderr, "airlock egress check: --resolve %s: empty or overlong address\n",
			        a->name);
			return false;
		}
		memcpy(text, p, len);
		text[len] = 0;
		if (!airlock_addr_parse(text, &a->addrs[a->n])) {
			fprintf(stderr, "airlock egress check: --resolve %s: \"%s\" is not an address\n",
			        a->name, airlock_escape(shown, sizeof(shown), text, len));
			return false;
		}
		a->n++;
		if (!comma)
			break;
		p = comma + 1;
	}
	c->n++;
	return true;
}

/* The value of "--name VALUE" or "--name=VALUE" at argv[*i]; NULL when
 * argv[*i] is not that option. *missing when the value is absent. */
static const char *check_option(int argc, char **argv, int *i, const char *name, bool *missing)
{
	size_t n = strlen(name);
	const char *a = argv[*i];
	if (strncmp(a, name, n) != 0)
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n] != 0)
		return NULL;
	if (*i + 1 >= argc) {
		*missing = true;
		return NULL;
	}
	return argv[++*i];
}

static int egress_check(int argc, char **argv)
{
	if (argc == 2 && cli_is_help(argv[1])) {
		check_usage(stdout);
		return CLI_EXIT_OK;
	}

	check_resolver *res = calloc(1, sizeof(*res));
	if (!res) {
		fprintf(stderr, "airlock egress check: out of memory\n");
		return CLI_EXIT_SOFTWARE;
	}
	const char *policy = NULL;
	const char *pos[2];
	int npos = 0, rc = CLI_EXIT_USAGE;
	bool options = true;

	for (int i = 1; i < argc; i++) {
		const char *v;
		bool missing = false;
		if (options && strcmp(argv[i], "--") == 0) {
			options = false;
		} else if (options && (v = check_option(argc, argv, &i, "--policy", &missing))) {
			if (policy) {
				fprintf(stderr, "airlock egress check: --policy given twice\n");
				goto out;
			}
			policy = v;
		} else if (options && (v = check_option(argc, argv, &i, "--resolve", &missing))) {
			if (!check_add_answer(res, v))
				goto out;
		} else if (options && (v = check_option(argc, argv, &i, "--dns", &missing))) {
			if (res->dns) {
				fprintf(stderr, "airlock egress check: --dns given twice\n");
				goto out;
			}
			res->dns = v;
		} else if (missing) {
			fprintf(stderr, "airlock egress check: %s needs a value\n", argv[i]);
			goto out;
		} else if (options && argv[i][0] == '-' && argv[i][1] != 0) {
			fprintf(stderr, "airlock egress check: unknown option '%s'\n\n", argv[i]);
			check_usage(stderr);
			goto out;
		} else if (npos == 2) {
			fprintf(stderr, "airlock egress check: too many arguments\n\n");
			check_usage(stderr);
			goto out;
		} else {
			pos[npos++] = argv[i];
		}
	}
	uint16_t port = 0;
	if (!policy || npos != 2) {
		check_usage(stderr);
		goto out;
	}
	/* The proxy's rule for a port (airlock_port_parse, the CONNECT
	 * parser's): "0443" or "+443" is a 400 there, so it is refused here
	 * rather than answered as if it were 443. */
	if (!airlock_port_parse(pos[1], strlen(pos[1]), &port)) {
		char shown[32];
		fprintf(stderr,
		        "airlock egress check: port \"%s\" is not 1..65535 (decimal digits, no sign, no leading zero)\n",
		        airlock_escape(shown, sizeof(shown), pos[1], strlen(pos[1])));
		goto out;
	}

	airlock_error err = { 0 };
	/* A bad --dns is a usage error, found before anything is asked. */
	if (res->dns && airlock_egress_resolver_new(res->dns, &res->cares, &err) < 0) {
		fprintf(stderr, "airlock egress check: --dns: %s\n", err.message);
		goto out;
	}

	airlock_egress_policy p = { 0 };
	if (airlock_egress_policy_load(policy, &p, &err) < 0) {
		/* FILE:LINE: message, as validate prints it. */
		fprintf(stderr, "%s\n", err.message);
		rc = err.cls == AIRLOCK_ERR_CONFIG ? EGRESS_EXIT_INVALID : cli_exit_for(&err);
		goto out;
	}

	airlock_egress_decision d;
	int r = airlock_egress_evaluate(&p, pos[0], port, check_resolve, res, &d, &err);
	airlock_egress_policy_clear(&p);
	char *json = r < 0 ? NULL : airlock_egress_decision_to_json(&d, &err);
	if (!json) {
		cli_error("egress check", &err);
		rc = CLI_EXIT_SOFTWARE;
		goto out;
	}
	printf("%s\n", json);
	free(json);
	rc = d.allow ? CLI_EXIT_OK : EGRESS_EXIT_DENY;
out:
	airlock_egress_resolver_free(res->cares);
	free(res);
	return rc;
}

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} egress_subcommands[] = {
	{ "validate", egress_validate },
	{ "check", egress_check },
};

int cli_egress(int argc, char **argv)
{
	if (argc < 2) {
		egress_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	if (cli_is_help(argv[1])) {
		egress_usage(stdout);
		return CLI_EXIT_OK;
	}
	for (size_t i = 0; i < ARRAY_SIZE(egress_subcommands); i++)
		if (strcmp(argv[1], egress_subcommands[i].name) == 0)
			return egress_subcommands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "airlock egress: unknown subcommand '%s'\n\n", argv[1]);
	egress_usage(stderr);
	return CLI_EXIT_USAGE;
}
