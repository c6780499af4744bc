/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock serve: the execution service in the foreground (what a systemd
 * unit or a container entrypoint runs). It holds the mechanism adapter, the
 * image store, the workspaces, the egress proxy and the limits, and no
 * secret but its own credential: it refuses to start with a credential of
 * anyone else's in its environment.
 *
 * Order at start, each step before the next can need it:
 *   1. signals blocked (before any thread or child exists, so each
 *      inherits the mask and none dies of a signal meant for the service);
 *   2. the environment refused if it holds a tier-0 name or a value shaped
 *      like a credential (naming the variable, never its value);
 *   3. settings: the file, AIRLOCK_* overrides, the flags; the startup
 *      checks (production and auth refuse a development mechanism);
 *   4. the service itself, one library call (airlock_service_host_open,
 *      src/service/host.c): the credential, the operator's egress policy
 *      and its proxy (a fork: before the service has threads), the adapter
 *      (its open sweeps what a crashed previous incarnation left), the
 *      server and the metrics listener.
 * Then the main thread waits on the signalfd: SIGTERM or SIGINT ends the
 * commands in flight with SERVICE_SHUTDOWN (their callers get the partial
 * output), the responses drain, every sandbox is destroyed, exit 0.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "airlock/service.h"
#include "cli/common.h"

extern char **environ;

static void serve_usage(FILE *out)
{
	fprintf(out,
	        "usage: airlock serve [OPTIONS]\n\n"
	        "Run the execution service (docs/service.md) in the foreground: the internal API\n"
	        "of docs/service-api.md on a Unix socket or TCP with TLS, every request\n"
	        "authenticated with the service credential. SIGTERM or SIGINT stops it: commands\n"
	        "in flight end SERVICE_SHUTDOWN and their callers get the partial output, then\n"
	        "every sandbox is destroyed.\n\n"
	        "options (each overrides the settings file's service: section):\n"
	        "  --config FILE           settings file (default: the embedded defaults)\n"
	        "  --listen ADDRESS        unix:PATH or HOST:PORT (TCP needs the TLS files)\n"
	        "  --credential-file FILE  the bearer token every request carries (0600)\n"
	        "  --metrics-listen ADDR   the operator's metrics listener\n"
	        "  --policy FILE           the operator's egress policy (YAML)\n"
	        "  --dns ADDR[:PORT],..    the egress proxy's resolver (default: /etc/resolv.conf)\n");
}

enum { OPT_CONFIG = 256, OPT_LISTEN, OPT_CRED, OPT_METRICS, OPT_POLICY, OPT_DNS, OPT_HELP };

static const struct option serve_options[] = {
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "listen", required_argument, NULL, OPT_LISTEN },
	{ "credential-file", required_argument, NULL, OPT_CRED },
	{ "metrics-listen", required_argument, NULL, OPT_METRICS },
	{ "policy", required_argument, NULL, OPT_POLICY },
	{ "dns", required_argument, NULL, OPT_DNS },
	{ "help", no_argument, NULL, OPT_HELP },
	{ 0 },
};

typedef struct serve_flags {
	const char *config, *listen, *credential_file, *metrics_listen, *policy, *dns;
} serve_flags;

/* ---- settings ------------------------------------------------------------------ */

static int set_flag(char **slot, const char *v)
{
	if (!v)
		return 0;
	char *copy = strdup(v);
	if (!copy)
		return -ENOMEM;
	free(*slot);
	*slot = copy;
	return 0;
}

/* ---- the run ------------------------------------------------------------------- */

static int serve_parse(int argc, char **argv, serve_flags *f)
{
	*f = (serve_flags){ 0 };
	optind = 1;
	opterr = 1;
	int c;
	while ((c = getopt_long(argc, argv, "+h", serve_options, NULL)) != -1) {
		switch (c) {
		case OPT_CONFIG: f->config = optarg; break;
		case OPT_LISTEN: f->listen = optarg; break;
		case OPT_CRED: f->credential_file = optarg; break;
		case OPT_METRICS: f->metrics_listen = optarg; break;
		case OPT_POLICY: f->policy = optarg; break;
		case OPT_DNS: f->dns = optarg; break;
		case OPT_HELP:
		case 'h':
			serve_usage(stdout);
			return CLI_EXIT_OK;
		default:
			serve_usage(stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fputs("airlock serve: unexpected argument '", stderr);
		cli_fputs_escaped(stderr, argv[optind]);
		fputs("'\n", stderr);
		return CLI_EXIT_USAGE;
	}
	return -1;
}

static void serve_warn(void *ctx, const char *message)
{
	(void)ctx;
	fprintf(stderr, "airlock serve: warning: %s\n", message);
}

int cli_serve(int argc, char **argv)
{
	serve_flags f;
	int pr = serve_parse(argc, argv, &f);
	if (pr >= 0)
		return pr;

	airlock_error err = { 0 };
	airlock_settings s = { 0 };
	airlock_service_host *host = NULL;
	int sfd = -1, exit_code = CLI_EXIT_SOFTWARE, r;

	/* 1. Signals: SIGTERM and SIGINT stop the service; SIGHUP and SIGQUIT
	 * are read and do the same rather than kill it between two steps. The
	 * main thread reads them (it has nothing else to do once the server
	 * runs); every process the service starts resets the mask. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	int e = pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (e == 0)
		sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (e != 0 || sfd < 0) {
		fprintf(stderr, "airlock serve: cannot watch for signals: %s\n", strerror(e ? e : errno));
		return CLI_EXIT_SOFTWARE;
	}

	/* 1b. The descriptor limit: the service holds several descriptors per
	 * sandbox and two per connection, so 64 sandboxes and 256 connections
	 * pass the usual soft limit of 1024; the hard limit is the operator's
	 * bound. Every sandbox sets its own (AIRLOCK_SANDBOX_NOFILE). */
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}

	/* 2. Nothing of anyone's secrets in this process, before the settings
	 * are read (the service host is told it was checked). */
	r = airlock_service_environment_check(environ, &err);
	if (r < 0)
		goto fail;

	/* 3. Settings, then the flags over them, then the checks again over
	 * the result. */
	r = cli_load_settings(f.config, NULL, &s, &err);
	if (r < 0)
		goto fail;
	if (set_flag(&s.service.listen, f.listen) < 0 ||
	    set_flag(&s.service.credential_file, f.credential_file) < 0 ||
	    set_flag(&s.service.metrics_listen, f.metrics_listen) < 0 ||
	    set_flag(&s.service.policy_file, f.policy) < 0) {
		r = airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOMEM, "serve");
		goto fail;
	}
	r = airlock_settings_check(&s, &err);
	if (r < 0)
		goto fail;
	if (f.dns && (r = cli_dns_check(f.dns, &err)) < 0)
		goto fail;

	/* 4. The service: credential, policy and proxy, adapter, server,
	 * metrics (airlock_service_host_open says the order). The lifecycle
	 * log is one JSON line per event on stdout; the service's own messages
	 * stay on stderr. */
	airlock_service_host_options o = {
		/* Checked at step 2, before the settings were read. */
		.environ = NULL, .dns_servers = f.dns, .log_fd = STDOUT_FILENO, .warn = serve_warn,
	};
	r = airlock_service_host_open(&s, &o, &host, &err);
	if (r < 0)
		goto fail;
	if (airlock_service_host_metrics_address(host))
		fprintf(stderr, "airlock serve: metrics on %s\n", airlock_service_host_metrics_address(host));
	fprintf(stderr, "airlock serve: listening on %s (mechanism %s, max_sandboxes %lld%s)\n",
	        airlock_service_host_address(host), airlock_service_host_mechanism(host),
	        (long long)s.service.max_sandboxes,
	        airlock_service_host_egress(host) ? ", egress proxy running" : "");

	for (;;) {
		struct signalfd_siginfo si;
		ssize_t n = read(sfd, &si, sizeof(si));
		if (n == (ssize_t)sizeof(si)) {
			fprintf(stderr, "airlock serve: %s: stopping (commands in flight end "
			                "SERVICE_SHUTDOWN), then destroying every sandbox\n",
			        strsignal((int)si.ssi_signo));
			break;
		}
		if (n < 0 && errno != EINTR) {
			fprintf(stderr, "airlock serve: reading signals: %s; stopping\n", strerror(errno));
			break;
		}
	}
	airlock_service_host_log(host, "service_stopping",
	                         "commands in flight end SERVICE_SHUTDOWN; every sandbox is destroyed");
	airlock_service_host_shutdown(host);
	exit_code = CLI_EXIT_OK;
	goto out;
fail:
	cli_error("serve", &err);
	exit_code = cli_exit_for(&err);
out:
	airlock_service_host_free(host);
	airlock_settings_clear(&s);
	if (sfd >= 0)
		close(sfd);
	if (exit_code == CLI_EXIT_OK)
		fprintf(stderr, "airlock serve: stopped; every sandbox is destroyed\n");
	return exit_code;
}
