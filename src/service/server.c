/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The execution service (docs/service-api.md): its API served on the HTTP
 * server core (src/http/http.h), on a Unix socket or TCP with TLS, and its
 * expiry timer. The core bounds every connection (caps, admission,
 * deadlines, the watchdog), authenticates every request and answers; the
 * routes (routes.c) and the jobs behind them (job_*.c) are the service's.
 * TCP carries the credential, so it is never served in the clear.
 */
#include "airlock/service.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "http/http.h"
#include "service/pool.h"
#include "service/reaper.h"
#include "service/routes.h"
#include "service/threads.h"
#include "util/util.h"

static int64_t cfg_or(int64_t v, int64_t dflt)
{
	return v > 0 ? v : dflt;
}

void airlock_service_config_default(airlock_service_config *c)
{
	*c = (airlock_service_config){ .socket_gid = -1 };
}

/* ---- the expiry timer ------------------------------------------------------------- */

static void *expire_main(void *arg)
{
	airlock_service *s = arg;
	int64_t every = cfg_or(s->cfg.expire_interval_ms, 1000);
	struct pollfd p = { .fd = s->stop_efd, .events = POLLIN };
	while (poll(&p, 1, (int)every) <= 0)
		airlock_exec_expire(s->exec, util_now_ms());
	return NULL;
}

/* ---- listening ------------------------------------------------------------------- */

/* After the server core stopped: every connection thread has ended, and
 * with it every execute it waited for, so only waiting threads are left
 * to join. */
static void service_release(airlock_service *s)
{
	svc_threads_free(s->threads);
	http_listener_close(&s->lis);
	if (s->stop_efd >= 0)
		close(s->stop_efd);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static void stop_expire(airlock_service *s)
{
	uint64_t one = 1;
	if (s->stop_efd >= 0 && write(s->stop_efd, &one, sizeof(one)) < 0) {
		/* an eventfd write fails only on overflow, which one write cannot cause */
	}
	if (s->expire_started)
		pthread_join(s->expire_thread, NULL);
	s->expire_started = false;
}

/* The server core stopped: the listening socket is ours again (closed at
 * release), unless libmicrohttpd closed it. */
static void stop_http(airlock_service *s, int64_t drain_ms)
{
	if (!s->http)
		return;
	int lfd = http_server_stop(s->http, drain_ms);
	s->http = NULL;
	s->lis.fd = lfd;
}

int airlock_service_new(const airlock_service_config *cfg, airlock_exec *exec,
                        airlock_service **ret, airlock_error *err)
{
	if (!cfg || !exec || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "service: missing argument");
	if (!cfg->listen || !cfg->listen[0])
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "service: no listen address");
	if (!cfg->credential || cfg->credential_len == 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service: no credential (every request must carry one)");
	if (cfg->execute_threads > AIRLOCK_SERVICE_CONNECTIONS_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service: execute_threads=%u: at most %d",
		                         cfg->execute_threads, AIRLOCK_SERVICE_CONNECTIONS_MAX);
	airlock_service *s = calloc(1, sizeof(*s));
	if (!s)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "service");
	s->cfg = *cfg;
	s->cfg.listen = s->cfg.tls_cert_file = s->cfg.tls_key_file = s->cfg.tls_client_ca_file = NULL;
	s->cfg.credential = NULL;
	if (!s->cfg.max_write_bytes)
		s->cfg.max_write_bytes = AIRLOCK_SERVICE_WRITE_MAX_DEFAULT;
	s->exec = exec;
	s->lis.fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	s->stop_efd = eventfd(0, EFD_CLOEXEC);
	_cleanup_free_ char *pem_cert = NULL, *pem_ca = NULL;
	char *pem_key = NULL;
	int r;
	if (s->stop_efd < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "service");
		goto fail;
	}
	unsigned threads = cfg->execute_threads ? cfg->execute_threads :
	                   cfg->max_connections ? cfg->max_connections :
	                                          HTTP_MAX_CONNECTIONS_DEFAULT;
	if ((r = svc_threads_new(threads, &s->threads)) < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "service: execute threads");
		goto fail;
	}

	bool is_unix = strncmp(cfg->listen, "unix:", 5) == 0;
	if (is_unix) {
		r = http_listen(cfg->listen, cfg->socket_mode, cfg->socket_gid, &s->lis, err);
	} else {
		/* TCP carries the credential: never in the clear. */
		if (!cfg->tls_cert_file || !cfg->tls_key_file) {
			r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                      "listen %s: TCP needs TLS: set the certificate and key files",
			                      cfg->listen);
			goto fail;
		}
		if ((r = http_read_pem("TLS certificate", cfg->tls_cert_file, false, &pem_cert, err)) < 0 ||
		    (r = http_read_pem("TLS key", cfg->tls_key_file, true, &pem_key, err)) < 0 ||
		    (cfg->tls_client_ca_file &&
		     (r = http_read_pem("TLS client CA", cfg->tls_client_ca_file, false, &pem_ca, err)) < 0))
			goto fail;
		r = http_listen(cfg->listen, 0, -1, &s->lis, err);
	}
	if (r < 0)
		goto fail;

	http_server_config hc = {
		.name = "service",
		.address = s->lis.address,
		.listen_fd = s->lis.fd,
		.pem_cert = pem_cert,
		.pem_key = pem_key,
		.pem_ca = pem_ca,
		.credential = cfg->credential,
		.credential_len = cfg->credential_len,
		.max_connections = cfg->max_connections,
		.max_connections_per_ip = cfg->max_connections_per_ip,
		.auth_timeout_ms = cfg->auth_timeout_ms,
		.header_timeout_ms = cfg->header_timeout_ms,
		.request_timeout_ms = cfg->request_timeout_ms,
		.connection_timeout_ms = cfg->connection_timeout_ms,
		.header_max = AIRLOCK_SERVICE_HEADER_MAX,
		.oversize_drain_max = AIRLOCK_SERVICE_OVERSIZE_DRAIN_MAX,
		.oversize_drain_ms = AIRLOCK_SERVICE_OVERSIZE_DRAIN_MS,
	};
	pem_key = NULL; /* the core's now, on success and failure alike */
	r = http_server_new(&hc, &svc_routes, s, &s->http, err);
	if (r < 0)
		goto fail;
	s->lis.fd = -1; /* the core's until it stops */
	int e = pthread_create(&s->expire_thread, NULL, expire_main, s);
	if (e != 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "service: threads");
		goto fail;
	}
	s->expire_started = true;
	*ret = s;
	return 0;
fail:
	if (pem_key) {
		OPENSSL_cleanse(pem_key, strlen(pem_key));
		free(pem_key);
	}
	stop_expire(s);
	stop_http(s, 0);
	service_release(s);
	return r;
}

int svc_service_reaper_start(airlock_service *s, const svc_reaper_config *cfg, airlock_error *err)
{
	if (s->reaper)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "reaper: already started");
	svc_reaper *r = NULL;
	int rc = svc_reaper_new(s->exec, cfg, &r, err);
	if (rc == 0 && (rc = svc_reaper_start(r, err)) < 0)
		svc_reaper_free(r);
	if (rc == 0)
		s->reaper = r;
	return rc;
}

int svc_service_pool_start(airlock_service *s, const svc_pool_config *cfg, airlock_error *err)
{
	if (s->pool)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "service.pool: already started");
	return svc_pool_new(s->exec, cfg, &s->pool, err);
}

void airlock_service_shutdown(airlock_service *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->shutting_down = true;
	pthread_mutex_unlock(&s->lock);
	/* No refill starts from here on; the pooled sandboxes go with every
	 * other at the adapter's free. */
	svc_pool_stop(s->pool);
	/* A pass in flight ends at its next wait, its question unanswered. */
	svc_reaper_stop(s->reaper);
	airlock_exec_shutdown(s->exec);
}

const char *airlock_service_address(const airlock_service *s)
{
	return s ? s->lis.address : NULL;
}

void airlock_service_free(airlock_service *s)
{
	if (!s)
		return;
	/* Whatever still runs ends now (SERVICE_SHUTDOWN), so the drain is
	 * for responses being written, not for commands. */
	airlock_service_shutdown(s);
	svc_reaper_free(s->reaper);
	s->reaper = NULL;
	svc_pool_free(s->pool);
	s->pool = NULL;
	stop_http(s, cfg_or(s->cfg.drain_timeout_ms, 10000));
	stop_expire(s);
	service_release(s);
}

