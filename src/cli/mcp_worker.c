/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock mcp against a worker (docs/mcp.md): each tools/call is the
 * worker's tool route for one run at one epoch, through the worker
 * library's client (airlock/worker_client.h). The arguments are checked
 * here first with the worker's own decoders (airlock/tools.h), so a bad
 * call is answered with the worker's words without a round trip; the
 * worker checks them again, and the lease.
 *
 * The lease: the platform holds it (the default), or, with --claim, this
 * process claims it at the start, renews it from a thread at a third of
 * its TTL, and releases it at the end, which destroys the run's sandbox.
 *
 * Cancellation: a fired cancel closes the call's connection (the client's
 * cancel, airlock_worker_client_config), and the worker cancels a command
 * whose client went away. The worker answers a tool call whole: no
 * progress is streamed in this mode.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "airlock/credential_file.h"
#include "airlock/run_command.h"
#include "airlock/tools.h"
#include "airlock/worker_client.h"
#include "cli/common.h"
#include "cli/mcp.h"

typedef struct remote_session {
	airlock_worker_client_config cfg;
	char run[AIRLOCK_ID_MAX + 1];
	char tenant[AIRLOCK_ID_MAX + 1]; /* "" : the token's */
	int64_t epoch;
	int64_t ttl; /* > 0: this process holds the lease */
	bool claimed;
	/* When this session last cancelled a call (monotonic ms; 0: never):
	 * the worker sees the connection close within about a second and
	 * ends the command, and until then it answers the run's next call
	 * 409 (allow_parallel no). */
	int64_t cancelled_at_ms;
	pthread_t renewer;
	bool renewer_started;
	int stop_efd;
} remote_session;

/* How long after a cancel a 409 "running" is taken for the cancelled
 * call still ending at the worker (its client watch looks every second;
 * a command's kill and its sandbox's walk follow). */
#define MCP_WORKER_CANCEL_SETTLE_MS 15000

static bool id_ok(const char *v)
{
	size_t n = strlen(v);
	return n >= 1 && n <= AIRLOCK_ID_MAX &&
	       strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/* An answer other than 2xx as an error: the worker's class and message. */
static int refused(const airlock_worker_answer *a, airlock_error *err)
{
	*err = a->error;
	airlock_error_prefix(err, "the worker answered: ");
	return airlock_errcode(err->cls);
}

/* ---- the lease ------------------------------------------------------------------- */

/* One request about the lease (30 s at most), want its status. */
static int lease_request(remote_session *w, const char *method, const char *path,
                         const char *body, long want, airlock_error *err)
{
	airlock_worker_client_config cfg = w->cfg;
	cfg.timeout_ms = 30000;
	airlock_worker_answer a = { 0 };
	int r = airlock_worker_client_call(&cfg, method, path, body, &a, err);
	if (r == 0 && a.status != want)
		r = refused(&a, err);
	airlock_worker_answer_clear(&a);
	return r;
}

static int lease_claim(remote_session *w, airlock_error *err)
{
	char path[192], body[320];
	snprintf(path, sizeof(path), "/v1/runs/%s/lease", w->run);
	snprintf(body, sizeof(body), "{\"tenant_id\": \"%s\", \"epoch\": %lld, \"ttl_seconds\": %lld}",
	         w->tenant[0] ? w->tenant : "dev", (long long)w->epoch, (long long)w->ttl);
	return lease_request(w, "PUT", path, body, 200, err);
}

static int lease_release(remote_session *w, airlock_error *err)
{
	char path[384];
	snprintf(path, sizeof(path), "/v1/runs/%s/lease?epoch=%lld%s%s", w->run, (long long)w->epoch,
	         w->tenant[0] ? "&tenant_id=" : "", w->tenant);
	return lease_request(w, "DELETE", path, NULL, 204, err);
}

/* Renew at a third of the TTL: two renewals can fail (a worker
 * restarting) before the lease is lost. */
static void *renewer_main(void *arg)
{
	remote_session *w = arg;
	struct pollfd p = { .fd = w->stop_efd, .events = POLLIN };
	while (poll(&p, 1, (int)(w->ttl * 1000 / 3)) == 0) {
		airlock_error err = { 0 };
		if (lease_claim(w, &err) < 0)
			cli_error("mcp: renewing the lease", &err);
	}
	return NULL;
}

/* ---- the backend ----------------------------------------------------------------- */

/* The worker's own check of the arguments, here first (airlock/tools.h). */
static int check_arguments(const char *tool, const char *args, size_t len, airlock_error *err)
{
	if (strcmp(tool, AIRLOCK_TOOL_RUN_COMMAND) == 0) {
		airlock_run_command_arguments a;
		int r = airlock_run_command_arguments_decode(args, len, &a, err);
		airlock_run_command_arguments_clear(&a);
		return r;
	}
	airlock_export_arguments x;
	int r = airlock_export_arguments_decode(args, len, &x, err);
	airlock_export_arguments_clear(&x);
	return r;
}

static int worker_call(void *ctx, const char *tool, const char *args, size_t len,
                       const mcp_call_io *io, char **ret_json, airlock_error *err)
{
	remote_session *w = ctx;
	*ret_json = NULL;
	int r = check_arguments(tool, args, len, err);
	if (r < 0)
		return r;
	airlock_worker_client_config cfg = w->cfg;
	cfg.cancel = io->cancel;
	airlock_worker_tool_request req = { .run_id = w->run,
		                            .tool = tool,
		                            .epoch = w->epoch,
		                            .tenant_id = w->tenant[0] ? w->tenant : NULL,
		                            .arguments_json = args };
	airlock_worker_answer a = { 0 };
	for (;;) {
		r = airlock_worker_client_tool_call(&cfg, &req, &a, err);
		if (r < 0 && err->errnum == ECANCELED)
			w->cancelled_at_ms = cli_monotonic_ms();
		/* The call this session cancelled still running at the worker:
		 * asked again every 200 ms while the worker ends it (at most
		 * MCP_WORKER_CANCEL_SETTLE_MS after the cancel), so the
		 * client's next call is not refused for the one it gave up. */
		bool settling = r == 0 && a.status == 409 && w->cancelled_at_ms &&
		                cli_monotonic_ms() - w->cancelled_at_ms < MCP_WORKER_CANCEL_SETTLE_MS &&
		                strstr(a.error.message, "is running") && !airlock_cancel_fired(io->cancel);
		if (!settling)
			break;
		airlock_worker_answer_clear(&a);
		struct pollfd p = { .fd = airlock_cancel_fd(io->cancel), .events = POLLIN };
		poll(&p, 1, 200);
	}
	if (r == 0 && a.status != 200)
		r = refused(&a, err);
	if (r == 0) {
		/* The answer re-encoded compact: one JSON text, whatever the
		 * client's indentation. */
		/* A command's output may hold NUL (\u0000 in the worker's JSON). */
		json_t *o = a.json ? json_loads(a.json, JSON_ALLOW_NUL, NULL) : NULL;
		*ret_json = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
		json_decref(o);
		if (!*ret_json)
			r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                      "the worker's answer is not a JSON object");
	}
	airlock_worker_answer_clear(&a);
	return r;
}

static int worker_end(void *ctx)
{
	remote_session *w = ctx;
	if (w->renewer_started) {
		uint64_t one = 1;
		ssize_t n = write(w->stop_efd, &one, sizeof(one));
		(void)n;
		pthread_join(w->renewer, NULL);
		w->renewer_started = false;
	}
	if (!w->claimed)
		return 0;
	airlock_error err = { 0 };
	int r = lease_release(w, &err);
	if (r < 0) {
		cli_error("mcp: releasing the lease", &err);
		return r;
	}
	w->claimed = false;
	fprintf(stderr, "airlock mcp: run %s: the lease at epoch %lld is released\n", w->run,
	        (long long)w->epoch);
	return 0;
}

static void worker_free(void *ctx)
{
	remote_session *w = ctx;
	if (!w)
		return;
	if (w->stop_efd >= 0)
		close(w->stop_efd);
	free(w);
}

static const mcp_backend worker_ops = {
	.name = "worker",
	.call = worker_call,
	.shutdown = NULL, /* a signal fires the call's cancel (cli/mcp.c) */
	.end = worker_end,
	.free = worker_free,
};

int mcp_worker_open(const mcp_worker_flags *f, const mcp_backend **ret_ops, void **ret_ctx,
                    airlock_error *err)
{
	if (!id_ok(f->run) || (f->tenant && !id_ok(f->tenant)))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "--run and --tenant: 1 to 128 of A-Z, a-z, 0-9, '_' and '-'");
	if (f->token_file) {
		/* The token file is read at every call; read once here too, so
		 * a missing, unreadable or empty one stops the session before
		 * the client's first call rather than failing each call. */
		char *tok = NULL;
		size_t len = 0;
		int r = airlock_credential_file_read_text(f->token_file, "--token-file",
		                                          AIRLOCK_CREDENTIAL_FILE_MAX, &tok, &len, err);
		if (tok) {
			explicit_bzero(tok, len);
			free(tok);
		}
		if (r < 0)
			return r;
		if (len == 0)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "--token-file %s is empty", f->token_file);
	}
	remote_session *w = calloc(1, sizeof(*w));
	if (!w)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "airlock mcp");
	w->stop_efd = -1;
	/* The tool's longest command, a provision's start budget and a
	 * margin for the round trips (as airlock tool call waits). */
	w->cfg = (airlock_worker_client_config){
		.address = f->worker,
		.token_file = f->token_file,
		.tls_ca_file = f->tls_ca_file,
		.timeout_ms = (AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS + 60 + 30) * 1000LL,
	};
	snprintf(w->run, sizeof(w->run), "%s", f->run);
	snprintf(w->tenant, sizeof(w->tenant), "%s", f->tenant ? f->tenant : "");
	w->epoch = f->epoch;
	w->ttl = f->claim_ttl;
	int r = 0;
	if (w->ttl > 0) {
		r = lease_claim(w, err);
		if (r == 0) {
			w->claimed = true;
			w->stop_efd = eventfd(0, EFD_CLOEXEC);
			int e = w->stop_efd < 0 ? errno : pthread_create(&w->renewer, NULL, renewer_main, w);
			if (e)
				r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "the lease's renewer");
			else
				w->renewer_started = true;
		}
	}
	if (r < 0) {
		worker_end(w);
		worker_free(w);
		return r;
	}
	fprintf(stderr, "airlock mcp: worker ");
	cli_fputs_escaped(stderr, f->worker);
	fprintf(stderr, ", run %s, epoch %lld%s\n", w->run, (long long)w->epoch,
	        w->claimed ? " (this process holds the lease)" : "");
	*ret_ops = &worker_ops;
	*ret_ctx = w;
	return 0;
}
