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
#include <sys/stat.h>

#include "airlock/credential_file.h"
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

/* The files the worker reads at start besides the database: the
 * reaper's token and the operator's egress policy. */
static int read_files(const airlock_worker_settings *ws, worker_daemon *w, airlock_error *err)
{
	int r = 0;
	if (ws->reaper_credential_file &&
	    (r = airlock_credential_file_read(ws->reaper_credential_file, &w->reaper_token,
	                                      &w->reaper_token_len, err)) < 0)
		airlock_error_prefix(err, "worker.reaper_credential_file: ");
	if (r == 0 && ws->policy_file &&
	    (r = airlock_egress_policy_load(ws->policy_file, &w->policy, err)) < 0)
		airlock_error_prefix(err, "worker.policy_file: ");
	return r;
}

/* The artifact store: worker.artifacts_dir, or state_dir/artifacts made
 * 0700 when missing (an operator's own directory is never made: a typo
 * should fail, not create a second store). The store refuses a directory
 * others can reach or another user owns. */
static int open_artifacts(const airlock_worker_settings *ws, worker_daemon *w, airlock_error *err)
{
	_cleanup_free_ char *dflt = NULL;
	const char *root = ws->artifacts_dir;
	if (!root) {
		if (asprintf(&dflt, "%s/artifacts", ws->state_dir) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker.artifacts_dir");
		if (mkdir(dflt, 0700) < 0 && errno != EEXIST)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
			                         "worker.artifacts_dir (default %s): mkdir", dflt);
		root = dflt;
	}
	worker_artifacts_config cfg = {
		.root = root,
		.size_max = ws->artifact_size_max ? ws->artifact_size_max
		                                  : AIRLOCK_ARTIFACT_SIZE_CAP_DEFAULT,
		.tenant_bytes_max = ws->artifact_tenant_bytes_max ? ws->artifact_tenant_bytes_max
		                                                  : WORKER_ARTIFACT_TENANT_BYTES_DEFAULT,
		.retention_seconds = (ws->artifact_retention_days ? ws->artifact_retention_days : 30) *
		                     86400,
		.upload_unclaimed_seconds =
			(ws->artifact_upload_unclaimed_hours ? ws->artifact_upload_unclaimed_hours : 24) *
			3600,
		.sweep_interval_seconds = ws->artifact_sweep_interval_seconds
		                                  ? ws->artifact_sweep_interval_seconds
		                                  : 600,
		.grace_seconds = WORKER_ARTIFACT_GRACE_SECONDS,
	};
	return worker_artifacts_open(&cfg, w->db, &w->artifacts, err);
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
		/* A command runs up to the tool's 300 s inside one request. */
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

int worker_serve(airlock_settings *s, airlock_error *err)
{
	const airlock_worker_settings *ws = &s->worker;
	if (!ws->auth_mode)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.auth_mode is not set: dev (one tenant, no token; development only) or tokens (worker.tokens_file)");
	worker_daemon *w = calloc(1, sizeof(*w));
	if (!w)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker");
	w->settings = s;
	w->stop_fd = -1;
	w->policy.mode = AIRLOCK_EGRESS_DENY;
	pthread_mutex_init(&w->service_lock, NULL);
	pthread_mutex_init(&w->claims_lock, NULL);
	http_listener lis = { .fd = -1 }, mlis = { .fd = -1 };
	http_server *api = NULL;
	http_metrics *metrics = NULL;
	int r = open_db(ws, &w->db, err);
	if (r < 0)
		goto out;
	if ((r = read_files(ws, w, err)) < 0)
		goto out;
	if ((r = open_artifacts(ws, w, err)) < 0)
		goto out;
	/* Claims that ended while no worker ran and still record a sandbox
	 * are the sweeper's first round: a service that is down now delays
	 * their end, not the worker's start. */
	if ((r = worker_sandboxes_start(w, err)) < 0)
		goto out;
	if ((r = worker_bridge_start(w, err)) < 0)
		goto out;
	if (util_streq0(ws->auth_mode, "tokens") && (r = worker_tokens_load(ws->tokens_file, &w->tokens, err)) < 0)
		goto out;
	if ((r = api_listen(ws, w, &lis, &api, err)) < 0)
		goto out;
	if (ws->metrics_listen && (r = metrics_listen(ws->metrics_listen, w, &mlis, &metrics, err)) < 0)
		goto out;
	worker_log("info", "worker.started",
	           json_pack("{s:s, s:s?, s:s, s:s, s:s?}", "listen", lis.address, "metrics_listen",
	                     mlis.address, "database", worker_db_name(w->db), "auth_mode",
	                     w->tokens ? "tokens" : "dev", "bridge_listen", ws->bridge_listen));

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
	/* The bridge's connections end first: a relay outliving its
	 * sandbox's destroy would only wait for the service to close it. */
	worker_bridge_stop(w);
	/* The commands in flight end first, so their calls answer within the
	 * drain; then the API stops; then every sandbox still held goes. */
	worker_sandboxes_stop(w);
	if (api)
		lis.fd = http_server_stop(api, WORKER_DRAIN_MS);
	worker_sandboxes_free(w);
	/* After the API: no request is using the store any more. */
	worker_artifacts_free(w->artifacts);
	http_listener_close(&lis);
	http_listener_close(&mlis);
	worker_tokens_free(w->tokens);
	worker_db_free(w->db);
	if (w->reaper_token) {
		OPENSSL_cleanse(w->reaper_token, w->reaper_token_len);
		free(w->reaper_token);
	}
	airlock_egress_policy_clear(&w->policy);
	pthread_mutex_destroy(&w->service_lock);
	pthread_mutex_destroy(&w->claims_lock);
	free(w);
	if (r == 0)
		worker_log("info", "worker.stopped", NULL);
	return r;
}
