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
 *   4. the credential file (airlock_credential_file_read's rules);
 *   5. the operator's egress policy and, for an allowlist, the proxy (a
 *      fork: before the service has threads);
 *   6. the adapter (its open sweeps what a crashed previous incarnation
 *      left: sandboxes, cgroups, volumes, loop devices), then the server.
 * Then the main thread waits on the signalfd: SIGTERM or SIGINT ends the
 * commands in flight with SERVICE_SHUTDOWN (their callers get the partial
 * output), the responses drain, every sandbox is destroyed, exit 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "airlock/egress.h"
#include "airlock/mechanisms.h"
#include "airlock/proxy.h"
#include "airlock/credential_file.h"
#include "airlock/service.h"
#include "cli/common.h"
#include "host/filetable.h"
#include "service/metrics.h"
#include "service/server_internal.h"
#include "util/util.h"

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

/* Says on stderr when the host's file table cannot hold one sandbox at the
 * largest memory limit the settings grant (limits.ceilings.memory_bytes, or
 * with no ceiling the default): each such provision would be refused with
 * ExecutionUnavailable (host/filetable.h). A warning, not a refusal to
 * start: fs.file-max is a live setting the operator raises without a
 * restart, each provision is checked against the table as it is then, and
 * sandboxes with less memory still fit. Mechanisms whose sandboxes hold no
 * host files (fake) are not asked. */
static void serve_check_file_table(const airlock_settings *s)
{
	if (s->mechanism != AIRLOCK_MECHANISM_NATIVE && s->mechanism != AIRLOCK_MECHANISM_GVISOR)
		return;
	int64_t ceiling = s->ceilings.limits.memory_bytes;
	int64_t memory = ceiling > 0 ? ceiling : s->defaults.limits.memory_bytes;
	char msg[768];
	int r = host_files_capacity(memory, msg, sizeof(msg));
	if (r < 0)
		fprintf(stderr, "airlock serve: warning: cannot read the host's file table "
		                "(/proc/sys/fs/file-nr): %s\n",
		        strerror(-r));
	else if (r == 0)
		fprintf(stderr, "airlock serve: warning: the host's file table cannot hold one sandbox "
		                "at %s %lld%s: %s\n",
		        ceiling > 0 ? "limits.ceilings.memory_bytes" : "limits.defaults.memory_bytes",
		        (long long)memory, ceiling > 0 ? "" : " (no ceiling is set)", msg);
}

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

static size_t live_sandboxes(void *exec)
{
	return airlock_exec_live(exec);
}

static int socket_gid(const char *group, long *ret, airlock_error *err)
{
	*ret = -1;
	if (!group)
		return 0;
	int64_t n = 0;
	if (util_parse_i64(group, &n) && n >= 0 && n < 0xffffffffLL) {
		*ret = (long)n;
		return 0;
	}
	struct group gr, *res = NULL;
	char buf[16384];
	int e = getgrnam_r(group, &gr, buf, sizeof(buf), &res);
	if (e != 0 || !res)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, e,
		                         "service.socket_group=%s: no such group", group);
	*ret = (long)res->gr_gid;
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

int cli_serve(int argc, char **argv)
{
	serve_flags f;
	int pr = serve_parse(argc, argv, &f);
	if (pr >= 0)
		return pr;

	airlock_error err = { 0 };
	airlock_settings s = { 0 };
	airlock_egress_policy policy = { .mode = AIRLOCK_EGRESS_DENY };
	airlock_proxy *proxy = NULL;
	airlock_exec *exec = NULL;
	airlock_service *svc = NULL;
	service_metrics *metrics = NULL;
	service_metrics_listener *mlis = NULL;
	svc_listener metrics_socket = { .fd = -1 };
	_cleanup_close_pair_ int egress_log[2] = { -1, -1 };
	unsigned char *cred = NULL;
	size_t cred_len = 0;
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

	/* 2. Nothing of anyone's secrets in this process. */
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
	long gid = -1;
	r = socket_gid(s.service.socket_group, &gid, &err);
	if (r < 0)
		goto fail;
	if (s.service.metrics_listen && strcmp(s.service.metrics_listen, s.service.listen) == 0) {
		r = airlock_error_set(&err, AIRLOCK_ERR_CONFIG, 0,
		                      "service.metrics_listen %s is the API's address; the metrics "
		                      "listener needs its own",
		                      s.service.metrics_listen);
		goto fail;
	}

	/* The tracked metrics and the lifecycle log: one JSON line per event
	 * on stdout (the service's own messages stay on stderr). */
	r = service_metrics_new(STDOUT_FILENO, &metrics, &err);
	if (r < 0)
		goto fail;
	service_metrics_mechanism(metrics, airlock_mechanism_name(s.mechanism));

	/* 4. The credential. */
	r = airlock_credential_file_read(s.service.credential_file, &cred, &cred_len, &err);
	if (r < 0)
		goto fail;

	/* 5. The operator's egress policy; an allowlist is served by the proxy,
	 * which each sandbox reaches only when its spec carries the allowlist
	 * (the worker's yes for the call). */
	if (s.service.policy_file) {
		r = airlock_egress_policy_load(s.service.policy_file, &policy, &err);
		if (r < 0)
			goto fail;
	}
	bool egress = policy.mode == AIRLOCK_EGRESS_ALLOWLIST;
	if (f.dns && !egress) {
		r = airlock_error_set(&err, AIRLOCK_ERR_CONFIG, 0,
		                      "--dns configures the egress proxy, which runs only with an "
		                      "allowlist policy (--policy)");
		goto fail;
	}
	if (egress) {
		/* The proxy's decision lines come to a pipe the metrics follow:
		 * counted by outcome and reason, then copied to the log. */
		if (pipe2(egress_log, O_CLOEXEC) < 0) {
			r = airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, errno, "serve: egress log pipe");
			goto fail;
		}
		r = cli_proxy_start(f.dns, egress_log[1], &proxy, &err);
		if (r < 0)
			goto fail;
		/* The proxy holds its own copy: end of file once it is gone. */
		close(TAKE_FD(egress_log[1]));
		r = service_metrics_egress_follow(metrics, TAKE_FD(egress_log[0]), &err);
		if (r < 0)
			goto fail;
	}

	/* 6. The adapter (its open sweeps a crashed incarnation's leftovers),
	 * then the server. */
	airlock_exec_egress ee = { .policy = &policy, .proxy = proxy };
	r = airlock_exec_open_observed(&s, egress ? &ee : NULL, service_metrics_observer(), metrics,
	                               &exec, &err);
	if (r < 0)
		goto fail;
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.listen = s.service.listen;
	sc.socket_gid = gid;
	sc.credential = cred;
	sc.credential_len = cred_len;
	sc.tls_cert_file = s.service.tls_cert_file;
	sc.tls_key_file = s.service.tls_key_file;
	sc.tls_client_ca_file = s.service.tls_client_ca_file;
	sc.max_connections = (unsigned)s.service.max_connections;
	sc.max_sandboxes = (size_t)s.service.max_sandboxes;
	r = airlock_service_new(&sc, exec, &svc, &err);
	/* The server has its copy; this one goes now. */
	explicit_bzero(cred, cred_len);
	free(cred);
	cred = NULL;
	if (r < 0)
		goto fail;
	if (s.service.metrics_listen) {
		svc_listener ml;
		r = svc_listen(s.service.metrics_listen, 0, gid, &ml, &err);
		if (r == 0) {
			/* The descriptor goes to the listener; the socket file stays
			 * ours, removed at exit. */
			int fd = TAKE_FD(ml.fd);
			metrics_socket = ml;
			r = service_metrics_listener_new(metrics, fd, live_sandboxes, exec, &mlis, &err);
		}
		if (r < 0) {
			airlock_error_prefix(&err, "service.metrics_listen: ");
			goto fail;
		}
		fprintf(stderr, "airlock serve: metrics on %s\n", metrics_socket.address);
	}
	serve_check_file_table(&s);
	fprintf(stderr, "airlock serve: listening on %s (mechanism %s, max_sandboxes %lld%s)\n",
	        airlock_service_address(svc), airlock_exec_name(exec),
	        (long long)s.service.max_sandboxes, egress ? ", egress proxy running" : "");

	service_metrics_log(metrics, "service_started", airlock_service_address(svc));
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
	service_metrics_log(metrics, "service_stopping",
	                    "commands in flight end SERVICE_SHUTDOWN; every sandbox is destroyed");
	airlock_service_shutdown(svc);
	exit_code = CLI_EXIT_OK;
	goto out;
fail:
	cli_error("serve", &err);
	exit_code = cli_exit_for(&err);
out:
	/* The listener before its metrics; the exec after the server and
	 * before the metrics (freeing it still reports each sandbox's end). */
	service_metrics_listener_free(mlis);
	svc_listener_close(&metrics_socket);
	airlock_service_free(svc);
	airlock_exec_free(exec);
	/* After the sandboxes: each detached from the proxy as it went. */
	airlock_proxy_free(proxy);
	service_metrics_free(metrics);
	airlock_egress_policy_clear(&policy);
	if (cred) {
		explicit_bzero(cred, cred_len);
		free(cred);
	}
	airlock_settings_clear(&s);
	if (sfd >= 0)
		close(sfd);
	if (exit_code == CLI_EXIT_OK)
		fprintf(stderr, "airlock serve: stopped; every sandbox is destroyed\n");
	return exit_code;
}
