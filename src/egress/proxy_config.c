/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proxy's configuration as it crosses to the proxy process: the first
 * frame on the control channel (proxy_internal.h). Both ends link this file:
 * the service encodes what airlock_proxy_spawn was given, the proxy decodes
 * it, strictly (every field present, none unknown, each in its type's
 * range), since a field one end forgot would otherwise become a zero the
 * proxy runs with.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "egress/proxy_internal.h"

char *proxy_config_encode(const airlock_proxy_config *cfg)
{
	json_t *o = json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
	                      "dns_servers",
	                      cfg->dns_servers ? json_string(cfg->dns_servers) : json_null(), "uid",
	                      (json_int_t)cfg->uid, "gid", (json_int_t)cfg->gid,
	                      "request_timeout_ms", (json_int_t)cfg->request_timeout_ms,
	                      "connect_timeout_ms", (json_int_t)cfg->connect_timeout_ms,
	                      "idle_timeout_ms", (json_int_t)cfg->idle_timeout_ms,
	                      "total_timeout_ms", (json_int_t)cfg->total_timeout_ms,
	                      "max_connections", (json_int_t)cfg->max_connections, "max_pending",
	                      (json_int_t)cfg->max_pending, "max_connections_per_listener",
	                      (json_int_t)cfg->max_connections_per_listener,
	                      "max_pending_per_listener", (json_int_t)cfg->max_pending_per_listener,
	                      "accept_rate_per_listener", (json_int_t)cfg->accept_rate_per_listener,
	                      "log_queue_max", (json_int_t)cfg->log_queue_max);
	if (!o)
		return NULL;
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

static bool fits_unsigned(json_int_t v)
{
	return v >= 0 && (unsigned long long)v <= UINT_MAX;
}

const char *proxy_config_decode(const char *text, size_t len, airlock_proxy_config *cfg,
                                json_t **ret_keep)
{
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	if (!o)
		return "the configuration is not JSON";
	json_t *dns = NULL;
	json_int_t uid, gid, req, conn, idle, total, maxc, maxp, maxcl, maxpl, rate, logq;
	json_error_t jerr;
	if (json_unpack_ex(o, &jerr, JSON_STRICT,
	                   "{s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
	                   "dns_servers", &dns, "uid", &uid, "gid", &gid, "request_timeout_ms", &req,
	                   "connect_timeout_ms", &conn, "idle_timeout_ms", &idle, "total_timeout_ms",
	                   &total, "max_connections", &maxc, "max_pending", &maxp,
	                   "max_connections_per_listener", &maxcl, "max_pending_per_listener", &maxpl,
	                   "accept_rate_per_listener", &rate, "log_queue_max", &logq) < 0 ||
	    !(json_is_null(dns) || json_is_string(dns))) {
		json_decref(o);
		return "the configuration's fields are not the ones expected";
	}
	/* uid_t and gid_t are 32-bit unsigned on Linux. */
	if (!fits_unsigned(uid) || !fits_unsigned(gid) || !fits_unsigned(maxc) ||
	    !fits_unsigned(maxp) || !fits_unsigned(maxcl) || !fits_unsigned(maxpl) ||
	    !fits_unsigned(rate) || !fits_unsigned(logq) || req < 0 || conn < 0 || idle < 0 ||
	    total < 0) {
		json_decref(o);
		return "a configuration field is out of range";
	}
	*cfg = (airlock_proxy_config){
		/* Points into o, which the caller keeps for as long as cfg. */
		.dns_servers = json_is_string(dns) ? json_string_value(dns) : NULL,
		.log_fd = -1,
		.uid = (uid_t)uid,
		.gid = (gid_t)gid,
		.request_timeout_ms = req,
		.connect_timeout_ms = conn,
		.idle_timeout_ms = idle,
		.total_timeout_ms = total,
		.max_connections = (unsigned)maxc,
		.max_pending = (unsigned)maxp,
		.max_connections_per_listener = (unsigned)maxcl,
		.max_pending_per_listener = (unsigned)maxpl,
		.accept_rate_per_listener = (unsigned)rate,
		.log_queue_max = (unsigned)logq,
	};
	*ret_keep = o;
	return NULL;
}
