/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's start and stop (worker_serve, worker.h). Order at start,
 * each step before the next can need it: the database (its migrations;
 * a schema newer than this code is refused), the sandboxes of claims that
 * ended while no worker ran (worker_end_sandboxes), the tokens, the API's
 * listener and server, the metrics listener. Then SIGTERM or SIGINT: the
 * API stops taking connections, requests under way drain, the database
 * closes. Every lease is committed before its answer, so a stop loses
 * nothing a restarted worker could not see.
 */
#include "worker/daemon.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* The most a stop waits for requests under way (each is one database
 * transaction). */
#define WORKER_DRAIN_MS 5000

static int open_db(const airlock_worker_settings *ws, worker_db **ret, airlock_error *err)
{
	int r = util_streq0(ws->database, "postgresql")
	                ? worker_db_open_pg_file(ws->database_connection_file, ret, err)
	                : worker_db_open_sqlite(ws->state_dir, ret, err);
	if (r < 0)
		airlock_error_prefix(err, util_streq0(ws->database, "postgresql")
		                                  ? "worker.database_connection_file: "
		                                  : "worker.state_dir: ");
	return r;
}

/* Claims that ended while no worker ran still recorded with a sandbox:
 * destroyed (worker_end_sandboxes) before the API answers anything. */
static int end_leftovers(worker_daemon *w, airlock_error *err)
{
	worker_db_sandbox list[16];
	size_t n = 0;
	int r = worker_db_ended(w->db, util_now_ms(), list, ARRAY_SIZE(list), &n, err);
	if (r < 0)
		return r;
	return worker_end_sandboxes(w, list, n, "ended while no worker ran", err);
}

static int api_listen(const airlock_worker_settings *ws, worker_daemon *w, http_listener *lis,
                      http_server **ret, airlock_error *err)
{
	_cleanup_free_ char *pem_cert = NULL;
	char *pem_key = NULL;
	int r;
	if (ws->tls_cert_file && ((r = http_read_pem("worker.tls_cert_file", ws->tls_cert_file,
	                                             false, &pem_cert, err)) < 0 ||
	                          (r = http_read_pem("worker.tls_key_file", ws->tls_key_file,
	                                             true, &pem_key, err)) < 0))
		goto out;
	/* The socket's mode: 0660, the worker's group (the platform's
	 * processes are given the group by the operator). */
	if ((r = http_listen(ws->listen, 0, -1, lis, err)) < 0) {
		airlock_error_prefix(err, "worker.listen: ");
		goto out;
	}
	/* Authentication is the API's own (a token per tenant, api.c), so
	 * the core is given no credential. */
	http_server_config hc = {
		.name = "worker",
		.address = lis->address,
		.listen_fd = lis->fd,
		.pem_cert = pem_cert,
		.pem_key = pem_key,
		.max_connections = AIRLOCK_WORKER_CONNECTIONS_MAX,
		.header_max = AIRLOCK_WORKER_HEADER_MAX,
		.request_timeout_ms = 30000,
		.oversize_drain_max = AIRLOCK_WORKER_LEASE_BODY_MAX,
	};
	pem_key = NULL; /* the core's now, on success and failure alike */
	r = http_server_new(&hc, &worker_api_routes, w, ret, err);
	if (r == 0)
		lis->fd = -1; /* the core's until it stops */
out:
	if (pem_key) {
		OPENSSL_cleanse(pem_key, strlen(pem_key));
		free(pem_key);
	}
	return r;
}

static int metrics_listen(const char *address, worker_daemon *w, http_listener *lis,
                          http_metrics **ret, airlock_error *err)
{
	int r = http_listen(address, 0, -1, lis, err);
	if (r < 0) {
		airlock_error_prefix(err, "worker.metrics_listen: ");
		return r;
	}
	r = http_metrics_new(lis->fd, worker_metrics_render, w, ret, err);
	lis->fd = -1; /* taken by http_metrics_new, on failure too */
	return r;
}

int worker_serve(const airlock_settings *s, airlock_error *err)
{
	const airlock_worker_settings *ws = &s->worker;
	if (!ws->auth_mode)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.auth_mode is not set: dev (one tenant, no token; development only) or tokens (worker.tokens_file)");
	worker_daemon *w = calloc(1, sizeof(*w));
	if (!w)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker");
	http_listener lis = { .fd = -1 }, mlis = { .fd = -1 };
	http_server *api = NULL;
	http_metrics *metrics = NULL;
	int r = open_db(ws, &w->db, err);
	if (r < 0)
		goto out;
	if ((r = end_leftovers(w, err)) < 0)
		goto out;
	if (util_streq0(ws->auth_mode, "tokens") && (r = worker_tokens_load(ws->tokens_file, &w->tokens, err)) < 0)
		goto out;
	if ((r = api_listen(ws, w, &lis, &api, err)) < 0)
		goto out;
	if (ws->metrics_listen && (r = metrics_listen(ws->metrics_listen, w, &mlis, &metrics, err)) < 0)
		goto out;
	worker_log("info", "worker.started",
	           json_pack("{s:s, s:s?, s:s, s:s}", "listen", lis.address, "metrics_listen",
	                     mlis.address, "database", worker_db_name(w->db), "auth_mode",
	                     w->tokens ? "tokens" : "dev"));

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	int sig = 0;
	while (sigwait(&set, &sig) != 0)
		;
	worker_log("info", "worker.stopping", json_pack("{s:s}", "signal", strsignal(sig)));
	r = 0;
out:
	http_metrics_free(metrics);
	if (api)
		lis.fd = http_server_stop(api, WORKER_DRAIN_MS);
	http_listener_close(&lis);
	http_listener_close(&mlis);
	worker_tokens_free(w->tokens);
	worker_db_free(w->db);
	free(w);
	if (r == 0)
		worker_log("info", "worker.stopped", NULL);
	return r;
}
