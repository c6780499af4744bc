/* SPDX-License-Identifier: Apache-2.0 */
#include "cli/common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "airlock/egress.h"
#include "airlock/image.h"
#include "airlock/proxy.h"
#include "airlock/escape.h"
#include "airlock/worker_client.h"

extern char **environ;

int cli_exit_for(const airlock_error *err)
{
	switch (err->cls) {
	case AIRLOCK_ERR_TOOL_VALIDATION:
	case AIRLOCK_ERR_WORKSPACE_ESCAPE:
	case AIRLOCK_ERR_EXECUTION_REJECTED:
	case AIRLOCK_ERR_DECODE:
		return CLI_EXIT_REJECTED;
	case AIRLOCK_ERR_EXECUTION_UNAVAILABLE:
	case AIRLOCK_ERR_NOT_IMPLEMENTED:
		return CLI_EXIT_UNAVAILABLE;
	case AIRLOCK_ERR_CONFIG:
		return CLI_EXIT_CONFIG;
	case AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED:
		return CLI_EXIT_ESCAPE;
	case AIRLOCK_ERR_INVALID:
	case AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE:
	case AIRLOCK_ERR_ARTIFACT_INTEGRITY:
	case AIRLOCK_ERR_SYSTEM:
	case AIRLOCK_ERR__MAX:
	default:
		return CLI_EXIT_SOFTWARE;
	}
}

void cli_fputs_escaped(FILE *out, const char *s)
{
	if (s)
		airlock_fput_escaped(out, s, strlen(s), false);
}

int64_t cli_monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cli_error(const char *verb, const airlock_error *err)
{
	/* A message can carry bytes from the sandbox or the command line (a
	 * path, a name); none of them reaches the terminal as a control. */
	fprintf(stderr, "airlock %s: %s: ", verb, airlock_errclass_name(err->cls));
	cli_fputs_escaped(stderr, err->message[0] ? err->message : "(no message)");
	fputc('\n', stderr);
}

bool cli_is_help(const char *s)
{
	return strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0;
}

int cli_load_settings(const char *file, const char *mechanism, airlock_settings *ret,
                      airlock_error *err)
{
	airlock_settings s = { 0 };
	int r = file ? airlock_settings_load(file, &s, err) : airlock_settings_default(&s, err);
	if (r < 0)
		return r;
	r = airlock_settings_apply_env(&s, environ, err);
	if (r < 0)
		goto fail;
	if (mechanism) {
		s.mechanism = airlock_mechanism_parse(mechanism);
		if (s.mechanism == AIRLOCK_MECHANISM_INVALID) {
			r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                      "--mechanism %s: not one of fake, native, gvisor, microvm, docker",
			                      mechanism);
			goto fail;
		}
	}
	airlock_settings_load_tier1(&s);
	if (s.tier1_error)
		/* Fail closed: the sandbox environment is tier 2 alone. Logged, not fatal. */
		fprintf(stderr, "airlock: configuration error: %s (sandbox environment is tier 2 only)\n",
		        s.tier1_error);
	r = airlock_settings_check(&s, err);
	if (r < 0)
		goto fail;
	if (s.image)
		fprintf(stderr, "airlock: image %s\n", s.image);
	*ret = s;
	return 0;
fail:
	airlock_settings_clear(&s);
	return r;
}

static void print_progress(void *ctx, const char *line)
{
	(void)ctx;
	fprintf(stderr, "airlock: image: %s\n", line);
}

int cli_default_image(const airlock_settings *s, char ret[72], airlock_error *err)
{
	airlock_image_store *store = NULL;
	int r = airlock_image_store_open(s->image_store, &store, err);
	if (r < 0)
		return r;
	r = airlock_image_find_default(store, ret, err);
	if (r == 0) {
		fprintf(stderr, "airlock: no default image in the store yet; building it once "
		                "(debootstrap from the Debian mirror, a few minutes)\n");
		airlock_image_build_options opts = { 0 };
		r = airlock_image_build(store, &opts, print_progress, NULL, ret, err);
	}
	airlock_image_store_free(store);
	return r < 0 ? r : 0;
}

int cli_dns_check(const char *dns, airlock_error *err)
{
	airlock_egress_resolver *check = NULL;
	int r = airlock_egress_resolver_new(dns, &check, err);
	airlock_egress_resolver_free(check);
	if (r < 0 && err->cls == AIRLOCK_ERR_CONFIG)
		airlock_error_prefix(err, "--dns: ");
	return r;
}

int cli_proxy_start(const char *dns, int log_fd, airlock_proxy **ret, airlock_error *err)
{
	/* A bad --dns is what stops the proxy before it starts: said first,
	 * naming the flag. */
	int r = dns ? cli_dns_check(dns, err) : 0;
	return r < 0 ? r : airlock_proxy_start(dns, log_fd, ret, err);
}

int cli_worker_config(const char *verb, const cli_worker_flags *f, int64_t timeout_ms,
                      airlock_settings *s, airlock_worker_client_config *ret)
{
	airlock_error err = { 0 };
	if (cli_load_settings(f->config, NULL, s, &err) < 0) {
		cli_error(verb, &err);
		return cli_exit_for(&err);
	}
	*ret = (airlock_worker_client_config){ .address = f->worker ? f->worker : s->worker.listen,
		                               .token_file = f->token_file,
		                               .tls_ca_file = f->tls_ca_file,
		                               .timeout_ms = timeout_ms };
	return -1;
}

int cli_print_worker_answer(const char *verb, const char *address,
                            const airlock_worker_answer *a, const char *hint_404)
{
	if (a->status >= 200 && a->status <= 299) {
		if (a->json && (fputs(a->json, stdout) == EOF || fflush(stdout) != 0)) {
			fprintf(stderr, "airlock %s: stdout: %s\n", verb, strerror(errno));
			return CLI_EXIT_IOERR;
		}
		return CLI_EXIT_OK;
	}
	fprintf(stderr, "airlock %s: the worker at ", verb);
	cli_fputs_escaped(stderr, address);
	fprintf(stderr, " answered %ld: %s: ", a->status, airlock_errclass_name(a->error.cls));
	cli_fputs_escaped(stderr, a->error.message[0] ? a->error.message : "(no message)");
	if (a->status == 404 && hint_404)
		fprintf(stderr, " (%s)", hint_404);
	else if (a->status == 401)
		fputs(" (the worker wants a bearer token of its tokens_file: --token-file FILE)",
		      stderr);
	fputc('\n', stderr);
	return cli_exit_for(&a->error);
}

bool cli_flag_i64(const char *verb, const char *flag, const char *v, int64_t min, int64_t max,
                  int64_t *ret)
{
	char *end = NULL;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (errno || end == v || *end || n < min || n > max) {
		fprintf(stderr, "airlock %s: %s ", verb, flag);
		cli_fputs_escaped(stderr, v);
		fprintf(stderr, ": not an integer from %lld to %lld\n", (long long)min, (long long)max);
		return false;
	}
	*ret = n;
	return true;
}
