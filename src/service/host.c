/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The whole execution service opened from the settings in one call
 * (airlock/service.h, "the whole service"): what `airlock serve` runs, in
 * the order each step can need the one before:
 *   1. the environment refused if it holds a tier-0 name or a value shaped
 *      like a credential (naming the variable, never its value);
 *   2. the lifecycle log and the metrics;
 *   3. the credential file (airlock_credential_file_read's rules);
 *   4. the operator's egress policy and, for an allowlist, the proxy, whose
 *      decision lines come to a pipe the metrics follow;
 *   5. the adapter (its open sweeps what a crashed previous incarnation
 *      left: sandboxes, cgroups, volumes, loop devices), then the server,
 *      its reaper (service.reaper_address set) and the metrics listener.
 * A failure at any step releases the ones before it.
 */
#include "airlock/service.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "airlock/credential_file.h"
#include "airlock/egress.h"
#include "airlock/mechanisms.h"
#include "airlock/proxy.h"
#include "host/filetable.h"
#include "service/metrics.h"
#include "service/pool.h"
#include "service/reaper.h"
#include "http/http.h"
#include "service/server_internal.h"
#include "util/util.h"

struct airlock_service_host {
	airlock_egress_policy policy;
	airlock_proxy *proxy;
	airlock_exec *exec;
	airlock_service *svc;
	service_metrics *metrics;
	service_metrics_listener *mlis;
	http_listener metrics_socket;
	bool egress;
};

static size_t live_sandboxes(void *exec)
{
	return airlock_exec_live(exec);
}

/* service.socket_group: a number or a group's name. */
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

/* Warns when the host's file table cannot hold one sandbox at the largest
 * memory limit the settings grant (limits.ceilings.memory_bytes, or with no
 * ceiling the default): each such provision would be refused with
 * ExecutionUnavailable (host/filetable.h). A warning, not a refusal to
 * start: fs.file-max is a live setting the operator raises without a
 * restart, each provision is checked against the table as it is then, and
 * sandboxes with less memory still fit. Mechanisms whose sandboxes hold no
 * host files (fake) are not asked. */
static void check_file_table(const airlock_settings *s, const airlock_service_host_options *o)
{
	if (!o->warn ||
	    (s->mechanism != AIRLOCK_MECHANISM_NATIVE && s->mechanism != AIRLOCK_MECHANISM_GVISOR))
		return;
	int64_t ceiling = s->ceilings.limits.memory_bytes;
	int64_t memory = ceiling > 0 ? ceiling : s->defaults.limits.memory_bytes;
	char msg[768], line[1024];
	int r = host_files_capacity(memory, msg, sizeof(msg));
	if (r < 0)
		snprintf(line, sizeof(line),
		         "cannot read the host's file table (/proc/sys/fs/file-nr): %s", strerror(-r));
	else if (r == 0)
		snprintf(line, sizeof(line),
		         "the host's file table cannot hold one sandbox at %s %lld%s: %s",
		         ceiling > 0 ? "limits.ceilings.memory_bytes" : "limits.defaults.memory_bytes",
		         (long long)memory, ceiling > 0 ? "" : " (no ceiling is set)", msg);
	else
		return;
	o->warn(o->warn_ctx, line);
}

/* 4. The operator's egress policy; an allowlist is served by the proxy,
 * which each sandbox reaches only when its spec carries the allowlist (the
 * worker's yes for the call). */
static int open_egress(airlock_service_host *h, const airlock_settings *s,
                       const airlock_service_host_options *o, airlock_error *err)
{
	int r;
	if (s->service.policy_file &&
	    (r = airlock_egress_policy_load(s->service.policy_file, &h->policy, err)) < 0)
		return r;
	h->egress = h->policy.mode == AIRLOCK_EGRESS_ALLOWLIST;
	if (o->dns_servers && !h->egress)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "DNS servers (--dns) configure the egress proxy, which runs "
		                         "only with an allowlist policy (service.policy_file, --policy)");
	if (!h->egress)
		return 0;
	/* The proxy's decision lines come to a pipe the metrics follow: counted
	 * by outcome and reason, then copied to the log. */
	_cleanup_close_pair_ int log[2] = { -1, -1 };
	if (pipe2(log, O_CLOEXEC) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "serve: egress log pipe");
	r = airlock_proxy_start(o->dns_servers, log[1], &h->proxy, err);
	if (r < 0)
		return r;
	/* The proxy holds its own copy: end of file once it is gone. */
	close(TAKE_FD(log[1]));
	return service_metrics_egress_follow(h->metrics, TAKE_FD(log[0]), err);
}

/* The reaper (docs/reaper.md), when service.reaper_address is set: its
 * token read as the service's own (airlock_credential_file_read's rules),
 * copied by the reaper and wiped here at once. */
static int open_reaper(airlock_service_host *h, const airlock_settings *s, airlock_error *err)
{
	if (!s->service.reaper_address)
		return 0;
	unsigned char *tok = NULL;
	size_t tok_len = 0;
	int r = airlock_credential_file_read(s->service.reaper_credential_file, &tok, &tok_len, err);
	if (r < 0) {
		airlock_error_prefix(err, "service.reaper_credential_file: ");
		return r;
	}
	svc_reaper_config rc = {
		.address = s->service.reaper_address,
		.tls_ca_file = s->service.reaper_tls_ca_file,
		.credential = tok,
		.credential_len = tok_len,
		.interval_ms = s->service.reaper_interval_seconds * 1000,
		.alert_after = (unsigned)s->service.reaper_destroy_alert_after,
		.metrics = h->metrics,
	};
	r = svc_service_reaper_start(h->svc, &rc, err);
	explicit_bzero(tok, tok_len);
	free(tok);
	return r;
}

/* 5. The adapter, the server, the reaper, the metrics listener. */
static int open_server(airlock_service_host *h, const airlock_settings *s, long gid,
                       const unsigned char *cred, size_t cred_len, airlock_error *err)
{
	airlock_exec_egress ee = { .policy = &h->policy, .proxy = h->proxy };
	int r = airlock_exec_open_observed(s, h->egress ? &ee : NULL, service_metrics_observer(),
	                                   h->metrics, &h->exec, err);
	if (r < 0)
		return r;
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.listen = s->service.listen;
	sc.socket_gid = gid;
	sc.credential = cred;
	sc.credential_len = cred_len;
	sc.tls_cert_file = s->service.tls_cert_file;
	sc.tls_key_file = s->service.tls_key_file;
	sc.tls_client_ca_file = s->service.tls_client_ca_file;
	sc.max_connections = (unsigned)s->service.max_connections;
	sc.max_sandboxes = (size_t)s->service.max_sandboxes;
	r = airlock_service_new(&sc, h->exec, &h->svc, err);
	if (r < 0 || (r = open_reaper(h, s, err)) < 0)
		return r;
	if (s->service.pool.size > 0) {
		svc_pool_config pc = {
			.size = s->service.pool.size,
			.per_key = s->service.pool.per_key,
			.max_idle_ms = s->service.pool.max_idle_seconds * 1000,
			.max_sandboxes = (size_t)s->service.max_sandboxes,
			.metrics = h->metrics,
		};
		r = svc_service_pool_start(h->svc, &pc, err);
		if (r < 0)
			return r;
	}
	if (!s->service.metrics_listen)
		return 0;
	http_listener ml;
	r = http_listen(s->service.metrics_listen, 0, gid, &ml, err);
	if (r == 0) {
		/* The descriptor goes to the listener; the socket file stays
		 * ours, removed when the host is freed. */
		int fd = TAKE_FD(ml.fd);
		h->metrics_socket = ml;
		r = service_metrics_listener_new(h->metrics, fd, live_sandboxes, h->exec, &h->mlis, err);
	}
	if (r < 0)
		airlock_error_prefix(err, "service.metrics_listen: ");
	return r;
}

int airlock_service_host_open(const airlock_settings *s, const airlock_service_host_options *o,
                              airlock_service_host **ret, airlock_error *err)
{
	*ret = NULL;
	int r;
	/* 1. Nothing of anyone's secrets in this process. */
	if (o->environ && (r = airlock_service_environment_check(o->environ, err)) < 0)
		return r;
	long gid = -1;
	if ((r = socket_gid(s->service.socket_group, &gid, err)) < 0)
		return r;
	if (s->service.metrics_listen && s->service.listen &&
	    strcmp(s->service.metrics_listen, s->service.listen) == 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.metrics_listen %s is the API's address; the metrics "
		                         "listener needs its own",
		                         s->service.metrics_listen);
	airlock_service_host *h = calloc(1, sizeof(*h));
	if (!h)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "serve");
	unsigned char *cred = NULL;
	size_t cred_len = 0;
	h->policy.mode = AIRLOCK_EGRESS_DENY;
	h->metrics_socket.fd = -1;
	/* 2. The tracked metrics and the lifecycle log: one JSON line per
	 * event (the service's own messages stay on stderr). */
	if ((r = service_metrics_new(o->log_fd, &h->metrics, err)) < 0)
		goto fail;
	service_metrics_mechanism(h->metrics, airlock_mechanism_name(s->mechanism));
	/* 3. The credential, before anything starts; the server takes a copy
	 * and this one is wiped at once. */
	if ((r = airlock_credential_file_read(s->service.credential_file, &cred, &cred_len, err)) < 0 ||
	    (r = open_egress(h, s, o, err)) < 0 || (r = open_server(h, s, gid, cred, cred_len, err)) < 0)
		goto fail;
	explicit_bzero(cred, cred_len);
	free(cred);
	check_file_table(s, o);
	service_metrics_log(h->metrics, "service_started", airlock_service_address(h->svc));
	*ret = h;
	return 0;
fail:
	if (cred) {
		explicit_bzero(cred, cred_len);
		free(cred);
	}
	airlock_service_host_free(h);
	return r;
}

const char *airlock_service_host_address(const airlock_service_host *h)
{
	return airlock_service_address(h->svc);
}

const char *airlock_service_host_metrics_address(const airlock_service_host *h)
{
	return h->mlis ? h->metrics_socket.address : NULL;
}

const char *airlock_service_host_mechanism(const airlock_service_host *h)
{
	return airlock_exec_name(h->exec);
}

bool airlock_service_host_egress(const airlock_service_host *h)
{
	return h->egress;
}

void airlock_service_host_log(airlock_service_host *h, const char *event, const char *message)
{
	service_metrics_log(h->metrics, event, message);
}

void airlock_service_host_shutdown(airlock_service_host *h)
{
	if (h && h->svc)
		airlock_service_shutdown(h->svc);
}

void airlock_service_host_free(airlock_service_host *h)
{
	if (!h)
		return;
	/* The listener before its metrics; the exec after the server and
	 * before the metrics (freeing it still reports each sandbox's end). */
	service_metrics_listener_free(h->mlis);
	http_listener_close(&h->metrics_socket);
	airlock_service_free(h->svc);
	airlock_exec_free(h->exec);
	/* After the sandboxes: each detached from the proxy as it went. */
	airlock_proxy_free(h->proxy);
	service_metrics_free(h->metrics);
	airlock_egress_policy_clear(&h->policy);
	free(h);
}
