/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The startup checks of the settings (airlock_settings_check): a
 * development mechanism refused where production or real authentication
 * is asked for, an image named by digest, limits within their ceilings,
 * tier 1 free of tier-0 names, the service's listener and TLS, and the
 * worker's listeners, database and authentication.
 */
#include "airlock/settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "airlock/tiers.h"
#include "core/settings_schema.h"
#include "util/util.h"

static int check_isolation(const airlock_settings *s, airlock_error *err)
{
	const char *auth = s->auth_mode ? s->auth_mode : "(unset)";
	bool production = s->deployment_mode == AIRLOCK_DEPLOYMENT_PRODUCTION;
	/* "auth_mode != dev": anything that is not exactly dev, including an
	 * unset one, is treated as real authentication. */
	bool real_auth = !util_streq0(s->auth_mode, "dev");

	if (!production && !real_auth)
		return 0;
	if (airlock_mechanism_production_allowed(s->mechanism))
		return 0;

	/* One check, two conditions (spec, "Both refusals are the same
	 * refusal"). The message names both settings with their values whichever
	 * condition fired, so the operator sees the whole picture at once. */
	char allowed[128], q[QUOTE_MAX];
	settings_list_production_allowed(allowed, sizeof(allowed));
	const char *mech = mechanism_label(s->mechanism);
	const char *mode = deployment_label(s->deployment_mode);
	Q(q, auth);
	if (production && real_auth)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "startup refused: sandbox.mechanism=%s is a development sandbox; deployment_mode=%s and auth_mode=%s require one of %s",
		                         mech, mode, q, allowed);
	if (production)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "startup refused: sandbox.mechanism=%s is a development sandbox; deployment_mode=%s requires one of %s (auth_mode=%s)",
		                         mech, mode, allowed, q);
	return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
	                         "startup refused: sandbox.mechanism=%s is a development sandbox; auth_mode=%s requires one of %s even with deployment_mode=%s",
	                         mech, q, allowed, mode);
}

static int check_image(const char *image, airlock_error *err)
{
	char q[QUOTE_MAX];
	if (!image || airlock_image_digest_valid(image))
		return 0;
	Q(q, image);
	if (strncmp(image, "sha256:", 7) == 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "sandbox.image=%s is not a valid digest: expected sha256: followed by 64 lowercase hex digits",
		                         q);
	if (strstr(image, "@sha256:"))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "sandbox.image=%s: name the image by its digest alone (sha256:<64 lowercase hex>); the name in front of it is a tag, and a tag is a mutable pointer",
		                         q);
	return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
	                         "sandbox.image=%s is a tag: a tag is a mutable pointer, so the image must be named by digest (sha256:<64 lowercase hex>)",
	                         q);
}

static int check_limits(const airlock_settings *s, airlock_error *err)
{
	/* The one listing cap both sides of the service agree on (caps.h);
	 * a ceiling of 0 (none) still stops here. */
	if (s->defaults.files_changed_max > AIRLOCK_FILES_CHANGED_MAX ||
	    s->ceilings.files_changed_max > AIRLOCK_FILES_CHANGED_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "limits.%s.files_changed_max=%lld: at most %d",
		                         s->defaults.files_changed_max > AIRLOCK_FILES_CHANGED_MAX
		                                 ? "defaults" : "ceilings",
		                         (long long)(s->defaults.files_changed_max > AIRLOCK_FILES_CHANGED_MAX
		                                             ? s->defaults.files_changed_max
		                                             : s->ceilings.files_changed_max),
		                         AIRLOCK_FILES_CHANGED_MAX);
	for (size_t i = 0; i < ARRAY_SIZE(settings_limit_fields); i++) {
		const field *f = &settings_limit_fields[i];
		int64_t d = limit_value(&s->defaults, f), c = limit_value(&s->ceilings, f);
		if (c < 0)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "limits.ceilings.%s=%lld: must be >= 0 (0 means no ceiling)",
			                         f->key, (long long)c);
		/* Zero is what a forgotten limit looks like, and a forgotten limit
		 * must not ship as unlimited (spec, "Resource limits, as numbers"). */
		if (d <= 0)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "limits.defaults.%s=%lld: must be > 0", f->key,
			                         (long long)d);
		if (c > 0 && d > c)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "limits.defaults.%s=%lld is above limits.ceilings.%s=%lld",
			                         f->key, (long long)d, f->key, (long long)c);
	}
	/* The floors every spec meets (types.h), so a default below one is
	 * refused here rather than at every provision. */
	airlock_error lerr = { 0 };
	if (airlock_resource_limits_validate(&s->defaults.limits, &lerr) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "limits.defaults: %s",
		                         lerr.message);
	return 0;
}

/* service.listen: the shapes airlock serve can listen on. The address is
 * resolved when the service starts; here only its form is checked. */
static bool listen_form_ok(const char *v, bool *ret_unix)
{
	*ret_unix = strncmp(v, "unix:", 5) == 0;
	if (*ret_unix)
		return v[5] == '/' && strlen(v + 5) < 108;
	const char *colon = strrchr(v, ':');
	if (!colon || colon == v || !colon[1])
		return false;
	for (const char *p = colon + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return strlen(colon + 1) <= 5 && atoi(colon + 1) <= 65535;
}

/* The orchestration bridge's addresses (key names the setting): a Unix
 * socket only. The stream carries the sandbox's one-time token in the
 * clear, so it never crosses a network. */
static int check_bridge_address(const char *key, const char *v, airlock_error *err)
{
	char q[QUOTE_MAX];
	bool is_unix = false;
	if (!v)
		return 0;
	if (!listen_form_ok(v, &is_unix) || !is_unix)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "%s=%s: expected unix:/absolute/path (the bridge's stream carries a one-time token in the clear, so it never crosses a network)",
		                         key, Q(q, v));
	return 0;
}

static int check_service(const airlock_service_settings *v, airlock_error *err)
{
	char q[QUOTE_MAX];
	bool is_unix = false;
	if (!v->listen || !listen_form_ok(v->listen, &is_unix))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.listen=%s: expected unix:/absolute/path or HOST:PORT",
		                         v->listen ? Q(q, v->listen) : "(unset)");
	if (!is_unix && (!v->tls_cert_file || !v->tls_key_file))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.listen=%s is TCP: service.tls_cert_file and service.tls_key_file are required (the credential never crosses a network in the clear)",
		                         Q(q, v->listen));
	if (!v->tls_cert_file != !v->tls_key_file)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.tls_cert_file and service.tls_key_file go together: set both or neither");
	if (v->tls_client_ca_file && !v->tls_cert_file)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.tls_client_ca_file needs TLS: set service.tls_cert_file and service.tls_key_file");
	if (v->max_sandboxes <= 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.max_sandboxes=%lld: must be > 0", (long long)v->max_sandboxes);
	if (v->max_connections <= 0 || v->max_connections > AIRLOCK_SERVICE_CONNECTIONS_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.max_connections=%lld: must be from 1 to %d",
		                         (long long)v->max_connections, AIRLOCK_SERVICE_CONNECTIONS_MAX);
	if (v->reaper_interval_seconds <= 0 || v->reaper_interval_seconds > AIRLOCK_REAPER_INTERVAL_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.reaper_interval_seconds=%lld: must be from 1 to %d",
		                         (long long)v->reaper_interval_seconds, AIRLOCK_REAPER_INTERVAL_MAX);
	if (v->reaper_destroy_alert_after <= 0 ||
	    v->reaper_destroy_alert_after > AIRLOCK_REAPER_ALERT_AFTER_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.reaper_destroy_alert_after=%lld: must be from 1 to %d",
		                         (long long)v->reaper_destroy_alert_after,
		                         AIRLOCK_REAPER_ALERT_AFTER_MAX);
	/* The pool's sandboxes count in max_sandboxes: a pool as large as the
	 * cap would leave a tenant whose spec matches no key no room at all. */
	const airlock_service_pool_settings *pl = &v->pool;
	if (pl->size < 0 || pl->size >= v->max_sandboxes)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.pool.size=%lld: must be from 0 (no pool) to "
		                         "service.max_sandboxes - 1 (%lld); pooled sandboxes count in "
		                         "service.max_sandboxes",
		                         (long long)pl->size, (long long)v->max_sandboxes - 1);
	if (pl->size > 0 && (pl->per_key < 1 || pl->per_key > pl->size ||
	                     pl->per_key > AIRLOCK_POOL_PER_KEY_MAX))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.pool.per_key=%lld: must be from 1 to service.pool.size (%lld) and at most %d",
		                         (long long)pl->per_key, (long long)pl->size,
		                         AIRLOCK_POOL_PER_KEY_MAX);
	if (pl->max_idle_seconds < 1 || pl->max_idle_seconds > AIRLOCK_POOL_IDLE_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.pool.max_idle_seconds=%lld: must be from 1 to %d",
		                         (long long)pl->max_idle_seconds, AIRLOCK_POOL_IDLE_MAX);
	int r = check_bridge_address("service.bridge_address", v->bridge_address, err);
	if (r < 0)
		return r;
	/* The bridge relays a sandbox's bytes to whatever listens there: the
	 * service's own API would hand a sandbox the service. */
	if (v->bridge_address && util_streq0(v->bridge_address, v->listen))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.bridge_address=%s is service.listen: it must name the worker tier's bridge listener (worker.bridge_listen), never the service's own API",
		                         Q(q, v->bridge_address));
	if (!v->reaper_address)
		return v->reaper_credential_file || v->reaper_tls_ca_file
		               ? airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                                   "service.reaper_credential_file and service.reaper_tls_ca_file need service.reaper_address (the worker tier's reaper endpoint)")
		               : 0;
	if (!listen_form_ok(v->reaper_address, &is_unix))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.reaper_address=%s: expected unix:/absolute/path or HOST:PORT",
		                         Q(q, v->reaper_address));
	/* The reaper's token authorizes a question about leases: it never
	 * crosses a network in the clear, and it is never optional (a worker
	 * tier that answered anyone would tell anyone which runs are live). */
	if (!v->reaper_credential_file)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.reaper_address is set: service.reaper_credential_file is required (the reaper's bearer token, 0600)");
	if (!is_unix && !v->reaper_tls_ca_file)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.reaper_address=%s is TCP: service.reaper_tls_ca_file is required (the reaper's token never crosses a network in the clear)",
		                         Q(q, v->reaper_address));
	return 0;
}

/* A listener of the worker's (key names it for messages): the forms of
 * service.listen, and TLS when it is TCP. */
static int check_worker_listen(const char *key, const char *v, bool tls, airlock_error *err)
{
	char q[QUOTE_MAX];
	bool is_unix = false;
	if (!listen_form_ok(v, &is_unix))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.%s=%s: expected unix:/absolute/path or HOST:PORT", key,
		                         Q(q, v));
	if (!is_unix && !tls)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.%s=%s is TCP: worker.tls_cert_file and worker.tls_key_file are required (a bearer token never crosses a network in the clear)",
		                         key, Q(q, v));
	return 0;
}

static int check_worker(const airlock_worker_settings *w, bool production, airlock_error *err)
{
	char q[QUOTE_MAX];
	if (!w->tls_cert_file != !w->tls_key_file)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.tls_cert_file and worker.tls_key_file go together: set both or neither");
	if (!w->listen)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "worker.listen is not set");
	int r = check_worker_listen("listen", w->listen, w->tls_cert_file != NULL, err);
	/* The metrics listener carries no token (it authenticates nothing): a
	 * TCP one is the operator's choice of a scraper's network. */
	if (r == 0 && w->metrics_listen)
		r = check_worker_listen("metrics_listen", w->metrics_listen, true, err);
	if (r < 0)
		return r;
	if (!w->state_dir || w->state_dir[0] != '/')
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.state_dir=%s: must be an absolute path",
		                         w->state_dir ? Q(q, w->state_dir) : "(unset)");
	bool pg = util_streq0(w->database, "postgresql");
	if (!pg && !util_streq0(w->database, "sqlite"))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.database=%s: expected sqlite or postgresql",
		                         w->database ? Q(q, w->database) : "(unset)");
	/* The connection string is a credential: only a file may hold it
	 * (read like a credential file), never the settings themselves. */
	if (pg && !w->database_connection_file)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.database=postgresql needs worker.database_connection_file (a 0600 file holding the connection string)");
	if (!pg && w->database_connection_file)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.database_connection_file is for worker.database=postgresql (sqlite keeps worker.db in worker.state_dir)");
	if (w->tenant_max_sandboxes < 0 || w->tenant_max_sandboxes > AIRLOCK_WORKER_CLAIMS_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.tenant_max_sandboxes=%lld: must be from 0 (a quarter of service.max_sandboxes) to %d",
		                         (long long)w->tenant_max_sandboxes, AIRLOCK_WORKER_CLAIMS_MAX);
	if ((r = check_bridge_address("worker.bridge_listen", w->bridge_listen, err)) < 0 ||
	    (r = check_bridge_address("worker.bridge_upstream", w->bridge_upstream, err)) < 0)
		return r;
	if (w->artifacts_dir && w->artifacts_dir[0] != '/')
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.artifacts_dir=%s: must be an absolute path",
		                         Q(q, w->artifacts_dir));
	static const struct {
		const char *name;
		size_t off;
		int64_t max;
	} art_ints[] = {
		{ "artifact_size_max", offsetof(airlock_worker_settings, artifact_size_max),
		  AIRLOCK_ARTIFACT_SIZE_SETTING_MAX },
		{ "artifact_tenant_bytes_max",
		  offsetof(airlock_worker_settings, artifact_tenant_bytes_max),
		  AIRLOCK_ARTIFACT_TENANT_BYTES_SETTING_MAX },
		{ "artifact_retention_days", offsetof(airlock_worker_settings, artifact_retention_days),
		  3650 },
		{ "artifact_upload_unclaimed_hours",
		  offsetof(airlock_worker_settings, artifact_upload_unclaimed_hours), 8760 },
		{ "artifact_sweep_interval_seconds",
		  offsetof(airlock_worker_settings, artifact_sweep_interval_seconds), 86400 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(art_ints); i++) {
		int64_t v = *(const int64_t *)((const char *)w + art_ints[i].off);
		if (v < 0 || v > art_ints[i].max)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "worker.%s=%lld: must be from 0 (the default) to %lld",
			                         art_ints[i].name, (long long)v,
			                         (long long)art_ints[i].max);
	}
	if (!w->bridge_listen != !w->bridge_upstream)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.bridge_listen and worker.bridge_upstream go together: set both (the bridge) or neither");
	bool is_unix = false;
	if (w->service_address && !listen_form_ok(w->service_address, &is_unix))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.service_address=%s: expected unix:/absolute/path or HOST:PORT",
		                         Q(q, w->service_address));
	if (!w->service_tls_cert_file != !w->service_tls_key_file)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.service_tls_cert_file and worker.service_tls_key_file go together: set both or neither");
	/* worker.auth_mode has no default: every door checks these settings,
	 * and a default of dev would refuse a production service that runs no
	 * worker. Unset, the worker refuses to start (airlock-worker). */
	if (!w->auth_mode)
		return w->tokens_file ? airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                                          "worker.tokens_file is set but worker.auth_mode is not (set it to tokens)")
		                      : 0;
	bool tokens = util_streq0(w->auth_mode, "tokens");
	if (!tokens && !util_streq0(w->auth_mode, "dev"))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.auth_mode=%s: expected dev or tokens", Q(q, w->auth_mode));
	/* The same refusal as a development mechanism's (spec, "Development,
	 * production, and the refusal in between"): dev authenticates nobody. */
	if (!tokens && production)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "startup refused: worker.auth_mode=dev is a development mechanism (one tenant, no token); deployment_mode=production requires worker.auth_mode=tokens");
	if (tokens && !w->tokens_file)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.auth_mode=tokens needs worker.tokens_file");
	if (!tokens && w->tokens_file)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker.tokens_file is read only with worker.auth_mode=tokens (dev takes no token)");
	return 0;
}

int airlock_settings_check(const airlock_settings *s, airlock_error *err)
{
	char q[QUOTE_MAX];
	if (!s)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "settings: missing");
	if (!airlock_deployment_mode_name(s->deployment_mode))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "deployment_mode is not set");
	if (!airlock_mechanism_name(s->mechanism))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "sandbox.mechanism is not set");
	if (!s->auth_mode || !auth_mode_valid(s->auth_mode, strlen(s->auth_mode)))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "auth_mode=%s is not a valid mode",
		                         s->auth_mode ? Q(q, s->auth_mode) : "(unset)");

	int r = check_isolation(s, err);
	if (r < 0)
		return r;
	r = check_image(s->image, err);
	if (r < 0)
		return r;
	if (s->hard_cap_seconds <= 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "sandbox.hard_cap_seconds=%lld: must be > 0 (the hard cap always applies)",
		                         (long long)s->hard_cap_seconds);
	if (!s->image_store || s->image_store[0] != '/')
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "sandbox.image_store=%s: must be an absolute path",
		                         s->image_store ? Q(q, s->image_store) : "(unset)");
	r = check_limits(s, err);
	if (r < 0)
		return r;
	if (s->n_passthrough > AIRLOCK_TIER1_MAX || (s->n_passthrough && !s->passthrough))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "environment.passthrough: more than %d names", AIRLOCK_TIER1_MAX);
	/* A tier-1 name that is tier 0 is a startup error, not a silent drop: a
	 * silent drop is a deployment that thinks it passed something it did
	 * not (spec, tier 1). */
	r = airlock_tier1_check((const char *const *)s->passthrough, s->n_passthrough, err);
	if (r < 0) {
		airlock_error_prefix(err, "startup refused: environment.passthrough: ");
		return r;
	}
	r = check_service(&s->service, err);
	if (r < 0)
		return r;
	return check_worker(&s->worker, s->deployment_mode == AIRLOCK_DEPLOYMENT_PRODUCTION, err);
}
