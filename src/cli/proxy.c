/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock proxy: the egress proxy on its own, listening on one address with
 * one policy, for an operator who wants to try a policy with real clients
 * (and for bench/). The same process the service starts: this command only
 * creates the listening socket, hands it over, and waits.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/pidfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <poll.h>
#include <unistd.h>

#include "airlock/egress.h"
#include "airlock/proxy.h"
#include "cli/common.h"
#include "util/cleanup.h"

static void proxy_usage(FILE *out)
{
	fprintf(out,
	        "usage: airlock proxy --policy FILE [--listen ADDR:PORT] [--dns ADDR[:PORT],...]\n"
	        "                     [--log FILE]\n\n"
	        "Run the egress proxy on its own: CONNECT host:port only, checked against the\n"
	        "policy (the same evaluation as `airlock egress check`), one resolution, one\n"
	        "dial to the checked address, an opaque relay. One JSON line per decision on\n"
	        "stderr or --log. Started as root, the proxy process runs as uid %u with no\n"
	        "capabilities. Stops on SIGINT or SIGTERM.\n\n"
	        "  --policy FILE        the egress policy (YAML); mode deny refuses everything\n"
	        "  --listen ADDR:PORT   numeric IPv4 address and port (default 127.0.0.1:3128)\n"
	        "  --dns ADDR[:PORT],.. the resolver (default: /etc/resolv.conf)\n"
	        "  --log FILE           append decision lines here instead of stderr\n",
	        AIRLOCK_PROXY_UID);
}

/* A numeric IPv4 ADDR:PORT, nothing looser: this is where the proxy listens. */
static int parse_listen(const char *s, struct sockaddr_in *ret)
{
	const char *colon = strrchr(s, ':');
	char addr[16];
	uint16_t port;
	if (!colon || (size_t)(colon - s) >= sizeof(addr) ||
	    !airlock_port_parse(colon + 1, strlen(colon + 1), &port))
		return -1;
	memcpy(addr, s, (size_t)(colon - s));
	addr[colon - s] = '\0';
	airlock_addr a;
	if (!airlock_addr_parse(addr, &a) || a.family != AF_INET)
		return -1;
	*ret = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
		                     .sin_addr = a.v4 };
	return 0;
}

int cli_proxy(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'p' }, { "listen", required_argument, NULL, 'l' },
		{ "dns", required_argument, NULL, 'd' },    { "log", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },         { 0 },
	};
	const char *policy_path = NULL, *listen_at = "127.0.0.1:3128", *dns = NULL, *log = NULL;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': policy_path = optarg; break;
		case 'l': listen_at = optarg; break;
		case 'd': dns = optarg; break;
		case 'g': log = optarg; break;
		case 'h': proxy_usage(stdout); return CLI_EXIT_OK;
		default: proxy_usage(stderr); return CLI_EXIT_USAGE;
		}
	}
	if (!policy_path || optind != argc) {
		fprintf(stderr, "airlock proxy: %s\n", policy_path ? "unexpected argument" :
		                                                   "--policy FILE is required");
		proxy_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	struct sockaddr_in sa;
	if (parse_listen(listen_at, &sa) < 0) {
		fprintf(stderr, "airlock proxy: --listen %s: expected a numeric IPv4 ADDR:PORT\n",
		        listen_at);
		return CLI_EXIT_USAGE;
	}

	airlock_error err = { 0 };
	airlock_egress_policy policy = { 0 };
	airlock_proxy *proxy = NULL;
	_cleanup_close_ int lfd = -1, logfd = -1, pidfd = -1;
	int exit_code = CLI_EXIT_SOFTWARE;
	int r = airlock_egress_policy_load(policy_path, &policy, &err);
	if (r < 0)
		goto fail;
	if (log) {
		logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (logfd < 0) {
			r = airlock_error_set(&err, AIRLOCK_ERR_CONFIG, errno, "--log %s", log);
			goto fail;
		}
	}
	/* The listening socket is made here, where the privilege to bind is;
	 * the process that parses requests only ever accepts on it. */
	int one = 1;
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, SOMAXCONN) < 0) {
		r = airlock_error_set(&err, AIRLOCK_ERR_CONFIG, errno, "--listen %s", listen_at);
		goto fail;
	}
	/* SIGINT/SIGTERM are taken synchronously below; blocked before the
	 * proxy is forked, and unblocked again in it. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop, NULL);
	/* The resolver is checked (a bad --dns is a clear error) and the proxy
	 * started in one place for every verb that runs one. */
	r = cli_proxy_start(dns, logfd, &proxy, &err);
	if (r < 0)
		goto fail;
	char env_id[64];
	snprintf(env_id, sizeof(env_id), "listener-%s", listen_at);
	airlock_proxy_owner owner = { .run_id = "standalone", .tenant_id = "operator",
		                      .environment_id = env_id };
	r = airlock_proxy_attach(proxy, lfd, &owner, &policy, &err);
	if (r < 0)
		goto fail;
	fprintf(stderr, "airlock proxy: listening on %s (pid %d, policy %s)\n", listen_at,
	        (int)airlock_proxy_pid(proxy), policy_path);
	pidfd = pidfd_open(airlock_proxy_pid(proxy), 0);
	for (;;) {
		/* Wake on a stop signal or the proxy's own end. */
		struct timespec tick = { .tv_sec = 0, .tv_nsec = 200000000 };
		int sig = sigtimedwait(&stop, NULL, &tick);
		if (sig == SIGINT || sig == SIGTERM)
			break;
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		if (pidfd >= 0 && poll(&p, 1, 0) > 0) {
			r = airlock_error_set(&err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                      "the proxy process ended");
			goto fail;
		}
	}
	exit_code = CLI_EXIT_OK;
	goto out;
fail:
	cli_error("proxy", &err);
	exit_code = cli_exit_for(&err);
out:
	airlock_proxy_free(proxy);
	airlock_egress_policy_clear(&policy);
	return exit_code;
}
