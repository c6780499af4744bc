/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock run: provision a sandbox, execute one command, destroy it, print
 * the result. The sandbox is destroyed on every path out, including errors.
 * This file is the run itself, in order; its flags, signals, --stdin and
 * printing are the other run_*.c files (cli/run.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "airlock/credential_file.h"
#include "airlock/egress.h"
#include "airlock/mechanisms.h"
#include "airlock/remote.h"
#include "airlock/run_command.h"
#include "airlock/tiers.h"
#include "cli/common.h"
#include "cli/run.h"
#include "util/cleanup.h"

extern char **environ;

/* ---- the service ------------------------------------------------------------
 * With --service the adapter is the remote one: every step below (the
 * validation, the spec, the result, the exit codes, the signals) is the
 * same; only who runs the sandbox differs. The service's mechanism is
 * asked first (its health): the image a spec names depends on it, and an
 * unreachable service is reported before anything else is built. */
static int open_service(const run_flags *f, airlock_settings *s, airlock_exec **ret,
                        airlock_error *err)
{
	airlock_remote_open_config c = { .address = f->service,
		                         .credential_file = f->credential_file,
		                         .tls_ca_file = f->tls_ca,
		                         .tls_cert_file = f->tls_cert,
		                         .tls_key_file = f->tls_key };
	return airlock_remote_open(&c, s, ret, err);
}

int cli_run(int argc, char **argv)
{
	run_flags f;
	int first = 0;
	int pr = run_parse(argc, argv, &f, &first);
	if (pr >= 0)
		return pr;

	airlock_error err = { 0 };
	airlock_settings s = { 0 };
	airlock_exec *exec = NULL;
	airlock_environment_spec spec = { 0 };
	airlock_environment_handle handle = { 0 };
	airlock_execution_result res = { 0 };
	unsigned char *stdin_data = NULL;
	size_t stdin_len = 0;
	bool provisioned = false, destroy_failed = false;
	int exit_code = CLI_EXIT_SOFTWARE;
	airlock_egress_policy policy = { .mode = AIRLOCK_EGRESS_DENY };
	airlock_proxy *proxy = NULL;
	_cleanup_close_ int proxy_log = -1;
	run_signals sig;
	int r;

	if (signals_start(&sig) < 0) {
		fprintf(stderr, "airlock run: cannot watch for signals: %s\n", strerror(errno));
		signals_stop(&sig);
		return CLI_EXIT_SOFTWARE;
	}
	r = cli_load_settings(f.config, f.mechanism, &s, &err);
	if (r < 0)
		goto fail;
	if (f.stdin_file) {
		stdin_read sr = read_stdin(f.stdin_file, s.defaults.start_budget_seconds, &sig,
		                           &stdin_data, &stdin_len);
		if (sr != STDIN_READ_OK) {
			/* A signal: 128 + it, below; before any sandbox. */
			exit_code = sr == STDIN_READ_SIGNAL ? CLI_EXIT_OK : CLI_EXIT_USAGE;
			goto out;
		}
	}

	/* The operator's yes: the policy file. The call's yes: --network. Only
	 * both together start a proxy and give the sandbox its allowlist. */
	if (f.policy) {
		r = airlock_egress_policy_load(f.policy, &policy, &err);
		if (r < 0)
			goto fail;
	}
	bool egress = f.network && policy.mode == AIRLOCK_EGRESS_ALLOWLIST;
	if (f.network && !egress) {
		fputs("airlock: ", stderr);
		cli_fputs_escaped(stderr, f.policy);
		fputs(" is mode deny: the sandbox has no network\n", stderr);
	}
	else if (f.policy && !f.network && policy.mode == AIRLOCK_EGRESS_ALLOWLIST)
		fprintf(stderr, "airlock: without --network the sandbox has no network "
		                "(the policy's destinations need both yeses)\n");
	if (egress && !f.service) {
		if (f.proxy_log) {
			proxy_log = open(f.proxy_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
			if (proxy_log < 0) {
				r = airlock_error_set(&err, AIRLOCK_ERR_CONFIG, errno, "--proxy-log %s",
				                      f.proxy_log);
				goto fail;
			}
		}
		/* A bad --dns is found here, before any sandbox exists. */
		r = cli_proxy_start(f.dns, proxy_log, &proxy, &err);
		if (r < 0)
			goto fail;
	}
	if (signals_run(&sig) < 0) {
		fprintf(stderr, "airlock run: cannot watch for signals: %s\n", strerror(errno));
		goto out;
	}

	/* The mechanism first: one this build cannot run says so before anything
	 * else is asked of the user. */
	airlock_exec_egress ee = { .policy = &policy, .proxy = proxy };
	if (f.service)
		r = open_service(&f, &s, &exec, &err);
	else
		r = airlock_exec_open_egress(&s, egress ? &ee : NULL, &exec, &err);
	if (r < 0)
		goto fail;
	signals_set_exec(&sig, exec);

	/* The command is validated before anything is provisioned, as the
	 * specification orders: a bad vector or an escaping working directory
	 * never costs a sandbox. */
	const char *cwd = f.cwd ? f.cwd : ".";
	airlock_run_command_request req = {
		.argv = argv + first,
		.argc = (size_t)(argc - first),
		.working_directory = cwd,
		.timeout_seconds = f.timeout,
		.has_stdin = stdin_data != NULL,
		.stdin_data = stdin_data,
		.stdin_len = stdin_len,
		.maximum_output_bytes = f.output,
	};
	airlock_execution_command cmd;
	r = airlock_run_command_prepare(&req, &s, &cmd, &err);
	if (r < 0)
		goto fail;

	/* The spec the worker would send (airlock_run_command_spec): the
	 * store's default image, which only the CLI can look up (it opens the
	 * store), the limits with the flags over the settings', the allowlist
	 * only with --network, and the names --env adds to tier 1. */
	char default_image[72] = { 0 };
	if (!s.image && airlock_mechanism_runs_store_images(s.mechanism) &&
	    s.deployment_mode != AIRLOCK_DEPLOYMENT_PRODUCTION) {
		r = cli_default_image(&s, default_image, &err);
		if (r < 0)
			goto fail;
	}
	/* The names --env gave, checked on their own first: a refusal names
	 * the flag, not the settings' list it joins. */
	r = airlock_tier1_check(f.env, f.n_env, &err);
	if (r < 0) {
		airlock_error_prefix(&err, "--env: ");
		goto fail;
	}
	airlock_resource_limits limits;
	run_build_limits(&s, &f, &limits);
	airlock_run_command_spec_input sin = {
		.settings = &s,
		.tenant_id = f.tenant,
		.store_default = default_image[0] ? default_image : NULL,
		.egress = egress ? &policy : NULL,
		.limits = &limits,
		.extra_tier1 = f.env,
		.n_extra_tier1 = f.n_env,
		.parent = environ,
		.working_directory = cwd,
	};
	int64_t inodes_asked = 0;
	r = airlock_run_command_spec(&sin, &spec, &inodes_asked, &err);
	if (r < 0)
		goto fail;
	/* A limit is a maximum: the spec says what is provisioned, and so does
	 * this line. */
	if (inodes_asked)
		fprintf(stderr, "airlock: a %lld-byte workspace holds %lld inodes: provisioning "
		                "inodes_max=%lld (asked %lld)\n",
		        (long long)spec.limits.workspace_bytes, (long long)spec.limits.inodes_max,
		        (long long)spec.limits.inodes_max, (long long)inodes_asked);

	if (signals_received(&sig)) {
		exit_code = CLI_EXIT_OK; /* replaced by 128 + signal below */
		goto out;                /* before any sandbox: nothing to clean up */
	}
	r = airlock_exec_provision(exec, &spec, &handle, &err);
	if (r < 0)
		goto fail;
	provisioned = true;
	if (signals_received(&sig)) {
		exit_code = CLI_EXIT_OK; /* replaced by 128 + signal below */
		goto out;                /* the command never started; the sandbox goes below */
	}

	if (cmd.timeout_seconds > AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS &&
	    f.timeout > AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS)
		fprintf(stderr, "airlock: --timeout %lld is clamped to sandbox.run_command's %d s\n",
		        (long long)f.timeout, AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS);
	run_output shown = { 0 };
	airlock_exec_call call = { .tenant_id = spec.tenant_id,
		                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE,
		                   .on_output = f.json ? NULL : run_on_output, .output_arg = &shown };
	fflush(stdout);
	r = airlock_exec_execute(exec, &call, &handle, &cmd, &res, &err);
	if (r < 0)
		goto fail;

	/* With --service the mechanism is the service's (its health named
	 * it); airlock_exec_name would say "remote". */
	r = run_print_result(&res, f.json, &shown,
	                     f.service ? airlock_mechanism_name(s.mechanism) : airlock_exec_name(exec),
	                     &err);
	if (r < 0)
		goto fail;
	exit_code = r;
	goto out;
fail:
	cli_error("run", &err);
	exit_code = cli_exit_for(&err);
out:
	if (provisioned) {
		airlock_error derr = { 0 };
		if (airlock_exec_destroy(exec, &handle, &derr) < 0) {
			cli_error("run: destroy", &derr);
			exit_code = cli_exit_for(&derr);
			destroy_failed = true;
		}
	}
	signals_set_exec(&sig, NULL);
	airlock_exec_free(exec);
	/* After the sandboxes: each detached from the proxy as it went. */
	airlock_proxy_free(proxy);
	airlock_egress_policy_clear(&policy);
	airlock_execution_result_clear(&res);
	airlock_environment_handle_clear(&handle);
	airlock_environment_spec_clear(&spec);
	airlock_settings_clear(&s);
	free(stdin_data);
	int signo = signals_received(&sig);
	signals_stop(&sig);
	if (signo) {
		/* The shell's convention for a process ended by a signal; the
		 * result (killed: SERVICE_SHUTDOWN) was printed above. A failed
		 * destroy still wins: it is the one that needs attention. */
		if (!destroy_failed)
			exit_code = 128 + signo;
		fprintf(stderr, "airlock run: stopped by %s%s\n", strsignal(signo),
		        !provisioned ? "" : destroy_failed ? "; destroying the sandbox failed (above)"
		                                           : "; the sandbox is destroyed");
	}
	return exit_code;
}
