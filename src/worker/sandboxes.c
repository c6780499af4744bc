/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandboxes a worker makes and ends (the specification, "Nothing
 * outlives its lease"; docs/worker-api.md, "Sandboxes"):
 *
 *   - the execution service, opened at the first call that needs it;
 *   - the claims table: per run, the tool call running (allow_parallel
 *     no) and the sandbox of its current claim, with the handle this
 *     worker's core knows it by;
 *   - ending a claim's sandbox, whoever made it: one of this worker's goes
 *     through its core (which also ends a command running in it), one
 *     another worker process made goes by the service handle its database
 *     record holds; the record is cleared only after the destroy, so a
 *     worker that dies in between leaves a row the next one finds;
 *   - the sweeper: every WORKER_SWEEP_MS the claims that ended without a
 *     call saying so (a lease not renewed within its TTL) have their
 *     sandboxes destroyed;
 *   - the worker's own stop: the commands in flight end, then every
 *     sandbox it holds is destroyed and its record cleared.
 *
 * Locks: claims_lock guards the table and every claim's fields; no call
 * into the service or the database is made under it. A claim's handle is
 * written only by the thread holding the claim busy while no destroy is
 * using it (refs == 0), and freed with the claim.
 */
#include "worker/daemon.h"
#include "worker/output.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "airlock/json.h"
#include "airlock/run_command.h"
#include "airlock/tiers.h"
#include "airlock/timeout.h"
#include "airlock/tools.h"
#include "util/util.h"

/* How often the sweeper asks for ended claims: a lease lost is a sandbox
 * the reaper also finds, so this only has to be much shorter than its
 * interval (60 s by default). */
#define WORKER_SWEEP_MS 1000
/* Ended claims handled per question; the sweeper asks again until none. */
#define WORKER_SWEEP_BATCH 32
/* The specification's floor: a command is not started with less of the
 * run's budget left (the core's own default, airlock_exec_config). */
#define WORKER_BUDGET_FLOOR_SECONDS 5

struct worker_claim {
	char run_id[AIRLOCK_ID_MAX + 1];
	char tenant_id[AIRLOCK_ID_MAX + 1];
	int64_t epoch;
	bool busy;        /* a tool call holds it */
	unsigned refs;    /* destroys using handle right now */
	bool has_sandbox; /* handle names a live sandbox of this worker's core */
	airlock_environment_handle handle;
};

/* ---- the execution service -------------------------------------------------- */

int worker_service(worker_daemon *w, airlock_error *err)
{
	const airlock_worker_settings *ws = &w->settings->worker;
	int r = 0;
	pthread_mutex_lock(&w->service_lock);
	if (!w->exec) {
		if (!ws->service_address || !ws->service_credential_file) {
			r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                      "worker.service_address and worker.service_credential_file "
			                      "are not set: this worker has no execution service to run "
			                      "sandboxes on");
		} else {
			airlock_remote_open_config c = {
				.address = ws->service_address,
				.credential_file = ws->service_credential_file,
				.tls_ca_file = ws->service_tls_ca_file,
				.tls_cert_file = ws->service_tls_cert_file,
				.tls_key_file = ws->service_tls_key_file,
				.uncapped = true,
			};
			r = airlock_remote_open_adapter(&c, w->settings, &w->exec, &w->remote, err);
		}
	}
	pthread_mutex_unlock(&w->service_lock);
	return r;
}

/* ---- the claims table ---------------------------------------------------------- */

/* Caller holds claims_lock. */
static worker_claim *claim_find(worker_daemon *w, const char *run_id, size_t *ret_i)
{
	for (size_t i = 0; i < w->n_claims; i++)
		if (strcmp(w->claims[i]->run_id, run_id) == 0) {
			if (ret_i)
				*ret_i = i;
			return w->claims[i];
		}
	return NULL;
}

/* Caller holds claims_lock: a claim nobody uses and with no sandbox goes. */
static void claim_maybe_free(worker_daemon *w, worker_claim *c)
{
	size_t i = 0;
	if (c->busy || c->refs || c->has_sandbox || claim_find(w, c->run_id, &i) != c)
		return;
	w->claims[i] = w->claims[--w->n_claims];
	airlock_environment_handle_clear(&c->handle);
	free(c);
}

/* ---- ending sandboxes ------------------------------------------------------------- */

static void log_sandbox(const char *level, const char *event, const worker_db_sandbox *sb,
                        const char *why, const airlock_error *e)
{
	json_t *f = json_pack("{s:s, s:s, s:I, s:s}", "run_id", sb->run_id, "environment_id",
	                      sb->environment_id, "epoch", (json_int_t)sb->epoch, "why", why);
	if (f && e)
		json_object_set_new(f, "message", json_string(e->message));
	worker_log(level, event, f);
}

/* One of this worker's own, through its core: 1 when sb is one (0 or an
 * error from the destroy), 0 when it is not this worker's. */
static int end_own(worker_daemon *w, const worker_db_sandbox *sb, int *ret, airlock_error *err)
{
	pthread_mutex_lock(&w->claims_lock);
	worker_claim *c = claim_find(w, sb->run_id, NULL);
	bool own = c && c->has_sandbox && strcmp(c->handle.environment_id, sb->environment_id) == 0;
	if (own)
		c->refs++;
	pthread_mutex_unlock(&w->claims_lock);
	if (!own)
		return 0;
	/* A command running in it ends (CANCELLED) and its tool call answers
	 * with the partial output. */
	*ret = airlock_exec_destroy(w->exec, &c->handle, err);
	pthread_mutex_lock(&w->claims_lock);
	c->refs--;
	if (*ret == 0)
		c->has_sandbox = false;
	claim_maybe_free(w, c);
	pthread_mutex_unlock(&w->claims_lock);
	return 1;
}

/* Another process's, by the handle its record holds. */
static int end_recorded(worker_daemon *w, const worker_db_sandbox *sb, const char *why,
                        airlock_error *err)
{
	char *handle = NULL;
	int r = worker_db_environment_handle(w->db, sb->environment_id, &handle, err);
	if (r < 0)
		return r;
	if (!handle) {
		/* A record without a handle (none of this code's writing): the
		 * sandbox cannot be named to the service from here; its expiry
		 * and the reaper still end it. The record goes, so that it is
		 * not asked about forever. */
		log_sandbox("warning", "sandbox.no_handle", sb, why, NULL);
		return 0;
	}
	r = airlock_remote_destroy_recorded(w->remote, sb->environment_id, handle, err);
	free(handle);
	return r;
}

static int end_one(worker_daemon *w, const worker_db_sandbox *sb, const char *why,
                   airlock_error *err)
{
	int r = worker_service(w, err);
	if (r == 0 && end_own(w, sb, &r, err) == 0)
		r = end_recorded(w, sb, why, err);
	bool cleared = false;
	if (r == 0)
		r = worker_db_clear_environment(w->db, sb->run_id, sb->epoch, sb->environment_id,
		                                &cleared, err);
	if (r < 0) {
		atomic_fetch_add(&w->c.destroy_failures, 1);
		log_sandbox("error", "sandbox.destroy_failed", sb, why, err);
		return r;
	}
	atomic_fetch_add(&w->c.destroys, 1);
	log_sandbox("info", "sandbox.destroyed", sb, why, NULL);
	return 0;
}

int worker_end_sandboxes(worker_daemon *w, const worker_db_sandbox *list, size_t n,
                         const char *why, airlock_error *err)
{
	/* Every one is tried; the first failure is the call's. */
	int first = 0;
	for (size_t i = 0; i < n; i++) {
		airlock_error e = { 0 };
		int r = end_one(w, &list[i], why, &e);
		if (r < 0 && first == 0) {
			first = r;
			*err = e;
		}
	}
	return first;
}

/* The sandboxes this worker holds whose claim another process ended
 * (another worker's release, fence or sweeper destroyed them by their
 * record and cleared it) or that ended while no call came: each is
 * ended here too (the service answers one already gone as gone), so it
 * neither stays counted against its tenant nor keeps its claim. tenant:
 * only that tenant's; NULL: all. Claims a call holds are the call's. */
static void reconcile(worker_daemon *w, const char *tenant)
{
	enum { BATCH = 64 };
	worker_db_sandbox held[BATCH];
	char tenants[BATCH][AIRLOCK_ID_MAX + 1];
	size_t n = 0;
	pthread_mutex_lock(&w->claims_lock);
	/* A batch a tick, starting where the last one stopped: every held
	 * sandbox is looked at in turn, however many the worker holds, and a
	 * tick costs at most BATCH questions. */
	size_t total = w->n_claims, start = total ? w->reconcile_next % total : 0, seen = 0;
	for (; seen < total && n < BATCH; seen++) {
		worker_claim *c = w->claims[(start + seen) % total];
		if (c->busy || c->refs || !c->has_sandbox || (tenant && strcmp(c->tenant_id, tenant)))
			continue;
		held[n] = (worker_db_sandbox){ .epoch = c->epoch };
		memcpy(held[n].run_id, c->run_id, sizeof(held[n].run_id));
		memcpy(held[n].environment_id, c->handle.environment_id,
		       sizeof(held[n].environment_id));
		memcpy(tenants[n], c->tenant_id, sizeof(tenants[n]));
		n++;
	}
	w->reconcile_next = start + seen;
	pthread_mutex_unlock(&w->claims_lock);
	for (size_t i = 0; i < n; i++) {
		worker_db_check_result chk;
		airlock_error err = { 0 };
		if (worker_db_check(w->db, held[i].run_id, tenants[i], held[i].epoch, util_now_ms(),
		                    &chk, &err) < 0)
			return; /* the database is down: the next tick asks again */
		if (chk.state == WORKER_DB_LEASE_CURRENT && chk.has_environment &&
		    strcmp(chk.environment_id, held[i].environment_id) == 0)
			continue;
		end_one(w, &held[i], "ended elsewhere", &err);
	}
}

/* ---- the sweeper ---------------------------------------------------------------------- */

static bool stopped(worker_daemon *w, int timeout_ms)
{
	struct pollfd p = { .fd = w->stop_fd, .events = POLLIN };
	return poll(&p, 1, timeout_ms) > 0;
}

static void *sweeper_main(void *arg)
{
	worker_daemon *w = arg;
	while (!stopped(w, WORKER_SWEEP_MS)) {
		/* Bounded: a batch that cannot be destroyed is retried at the
		 * next tick, not in a loop. */
		for (int round = 0; round < 8 && !stopped(w, 0); round++) {
			worker_db_sandbox list[WORKER_SWEEP_BATCH];
			size_t n = 0;
			airlock_error err = { 0 };
			if (worker_db_ended(w->db, util_now_ms(), list, ARRAY_SIZE(list), &n, &err) < 0) {
				worker_log("error", "sweeper.failed",
				           json_pack("{s:s}", "message", err.message));
				break;
			}
			if (n == 0 || worker_end_sandboxes(w, list, n, "lease ended", &err) < 0)
				break;
		}
		reconcile(w, NULL);
	}
	return NULL;
}

int worker_sandboxes_start(worker_daemon *w, airlock_error *err)
{
	w->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->stop_fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "the sweeper's eventfd");
	int e = pthread_create(&w->sweeper, NULL, sweeper_main, w);
	if (e)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "the sweeper's thread");
	w->sweeper_started = true;
	return 0;
}

void worker_sandboxes_stop(worker_daemon *w)
{
	if (w->stop_fd >= 0) {
		uint64_t one = 1;
		ssize_t n = write(w->stop_fd, &one, sizeof(one));
		(void)n;
	}
	if (w->sweeper_started)
		pthread_join(w->sweeper, NULL);
	w->sweeper_started = false;
	pthread_mutex_lock(&w->service_lock);
	airlock_exec *exec = w->exec;
	pthread_mutex_unlock(&w->service_lock);
	/* Commands in flight end now (SERVICE_SHUTDOWN) with their partial
	 * output, so their calls answer before the API's drain ends. */
	if (exec)
		airlock_exec_shutdown(exec);
}

void worker_sandboxes_free(worker_daemon *w)
{
	/* The API has stopped: no call holds a claim. Every sandbox this
	 * worker holds goes, and its record with it. */
	for (;;) {
		worker_db_sandbox sb = { 0 };
		pthread_mutex_lock(&w->claims_lock);
		bool found = false;
		for (size_t i = 0; i < w->n_claims && !found; i++) {
			worker_claim *c = w->claims[i];
			if (c->has_sandbox) {
				found = true;
				memcpy(sb.run_id, c->run_id, sizeof(sb.run_id));
				memcpy(sb.environment_id, c->handle.environment_id,
				       sizeof(sb.environment_id));
				sb.epoch = c->epoch;
			}
		}
		pthread_mutex_unlock(&w->claims_lock);
		if (!found)
			break;
		airlock_error err = { 0 };
		if (end_one(w, &sb, "worker stopping", &err) < 0) {
			/* Its record stays: the next worker (or the reaper) ends it. */
			pthread_mutex_lock(&w->claims_lock);
			worker_claim *c = claim_find(w, sb.run_id, NULL);
			if (c) {
				c->has_sandbox = false;
				claim_maybe_free(w, c);
			}
			pthread_mutex_unlock(&w->claims_lock);
		}
	}
	/* Anything the core still holds (a destroy that failed above) is
	 * tried once more by its free. */
	airlock_exec_free(w->exec);
	w->exec = NULL;
	w->remote = NULL;
	for (size_t i = 0; i < w->n_claims; i++) {
		airlock_environment_handle_clear(&w->claims[i]->handle);
		free(w->claims[i]);
	}
	free(w->claims);
	w->claims = NULL;
	w->n_claims = 0;
	if (w->stop_fd >= 0)
		close(w->stop_fd);
	w->stop_fd = -1;
}

/* ---- a tool call's hold on its run ---------------------------------------------------- */

/* Take run's claim for one call (allow_parallel no): made when the run has
 * none here. A claim of an older epoch still holding a sandbox keeps it
 * until that is ended (below, by the caller). */
/* The tenant's share of this worker (worker.tenant_max_sandboxes). */
static size_t tenant_cap(const worker_daemon *w)
{
	int64_t v = w->settings->worker.tenant_max_sandboxes;
	if (v <= 0)
		v = w->settings->service.max_sandboxes / 4;
	return v > 0 ? (size_t)v : 1;
}

/* Caller holds claims_lock: the tenant's claims with a sandbox or a call
 * (which may be provisioning one), but except. */
static size_t tenant_holds(const worker_daemon *w, const char *tenant, const worker_claim *except)
{
	size_t k = 0;
	if (!tenant)
		return 0;
	for (size_t i = 0; i < w->n_claims; i++) {
		const worker_claim *c = w->claims[i];
		if (c != except && (c->has_sandbox || c->busy) && strcmp(c->tenant_id, tenant) == 0)
			k++;
	}
	return k;
}

static int claim_take_once(worker_daemon *w, const char *run_id, const char *tenant_id,
                           int64_t epoch, worker_claim **ret, bool *ret_at_cap,
                           airlock_error *err)
{
	pthread_mutex_lock(&w->claims_lock);
	worker_claim *c = claim_find(w, run_id, NULL);
	int r = 0;
	size_t cap = tenant_cap(w);
	/* A call that will need a new sandbox counts against its tenant's
	 * share: one tenant's runs cannot take every sandbox the service
	 * has from the others. */
	bool needs = !c || !c->has_sandbox || c->epoch != epoch;
	if (c && c->busy)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                      "run %s: a sandbox.run_command is running for this run "
		                      "(allow_parallel: no); call again when it has answered",
		                      run_id);
	else if (c && c->refs)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "run %s: its sandbox is being destroyed; retry", run_id);
	else if (needs && tenant_holds(w, tenant_id, c) >= cap) {
		*ret_at_cap = true;
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "tenant %s holds %zu sandboxes in this worker "
		                      "(worker.tenant_max_sandboxes): end a run's lease or retry later",
		                      tenant_id, cap);
	} else if (!c && w->n_claims >= AIRLOCK_WORKER_CLAIMS_MAX)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "this worker holds %d runs with sandboxes: retry later",
		                      AIRLOCK_WORKER_CLAIMS_MAX);
	else if (!c) {
		worker_claim **p = reallocarray(w->claims, w->n_claims + 1, sizeof(*p));
		c = p ? calloc(1, sizeof(*c)) : NULL;
		if (p)
			w->claims = p;
		if (!c) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "a claim");
		} else {
			snprintf(c->run_id, sizeof(c->run_id), "%s", run_id);
			snprintf(c->tenant_id, sizeof(c->tenant_id), "%s", tenant_id);
			c->epoch = epoch;
			w->claims[w->n_claims++] = c;
		}
	}
	if (r == 0 && c) {
		c->busy = true;
		*ret = c;
	}
	pthread_mutex_unlock(&w->claims_lock);
	return r;
}

static int claim_take(worker_daemon *w, const char *run_id, const char *tenant_id,
                      int64_t epoch, worker_claim **ret, airlock_error *err)
{
	bool at_cap = false;
	int r = claim_take_once(w, run_id, tenant_id, epoch, ret, &at_cap, err);
	if (r < 0 && at_cap) {
		/* What the tenant holds may have ended elsewhere since the
		 * sweeper last looked: looked at now, then asked once more. */
		reconcile(w, tenant_id);
		at_cap = false;
		r = claim_take_once(w, run_id, tenant_id, epoch, ret, &at_cap, err);
	}
	return r;
}

static void claim_give(worker_daemon *w, worker_claim *c)
{
	pthread_mutex_lock(&w->claims_lock);
	c->busy = false;
	claim_maybe_free(w, c);
	pthread_mutex_unlock(&w->claims_lock);
}

/* ---- sandbox.run_command ------------------------------------------------------------- */

const int64_t worker_provision_bucket_ms[WORKER_PROVISION_BUCKETS] = { 10,   25,   50,   100,
	                                                                250,  500,  1000, 5000 };

static void count_provision(worker_daemon *w, int64_t ms)
{
	atomic_fetch_add(&w->c.provisions, 1);
	atomic_fetch_add(&w->c.provision_ms_sum, (uint64_t)(ms < 0 ? 0 : ms));
	for (int i = 0; i < WORKER_PROVISION_BUCKETS; i++)
		if (ms <= worker_provision_bucket_ms[i])
			atomic_fetch_add(&w->c.provision_buckets[i], 1);
}

static int sandbox_of(const worker_claim *c, worker_db_sandbox *ret)
{
	*ret = (worker_db_sandbox){ .epoch = c->epoch };
	memcpy(ret->run_id, c->run_id, sizeof(ret->run_id));
	memcpy(ret->environment_id, c->handle.environment_id, sizeof(ret->environment_id));
	return 0;
}

/* End the sandbox c holds (the caller holds c busy). */
static int claim_end(worker_daemon *w, worker_claim *c, const char *why, airlock_error *err)
{
	worker_db_sandbox sb;
	pthread_mutex_lock(&w->claims_lock);
	bool has = c->has_sandbox;
	sandbox_of(c, &sb);
	pthread_mutex_unlock(&w->claims_lock);
	return has ? end_one(w, &sb, why, err) : 0;
}

static int lease_refusal(worker_db_lease_state st, unsigned *ret_status, airlock_error *err)
{
	bool hidden = st == WORKER_DB_LEASE_NONE || st == WORKER_DB_LEASE_OTHER_TENANT;
	*ret_status = hidden ? 404 : 409;
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0, "%s",
	                         hidden ? "no such run (no lease was claimed for it by this tenant)"
	                         : st == WORKER_DB_LEASE_OTHER_EPOCH
	                                 ? "the call's epoch is not the run's current one (a claim "
	                                   "with a higher epoch fenced it, or it was never claimed)"
	                         : st == WORKER_DB_LEASE_EXPIRED
	                                 ? "the lease the call was made under expired (not renewed "
	                                   "within its TTL)"
	                                 : "the lease the call was made under was released");
}

/* A new sandbox for the claim, recorded before it is used: a worker that
 * dies after the provision leaves a record the next one ends. A claim
 * with the bridge gets a fresh token in its spec (and tier 2); only the
 * token's SHA-256 is recorded. This copy is wiped once the spec holds
 * its own, and the spec's copies (the endpoint, tier 2) with the spec. */
static int claim_provision(worker_daemon *w, worker_claim *c, const worker_tool_request *q,
                           const char *tenant, bool bridge, unsigned *ret_status,
                           airlock_error *err)
{
	extern char **environ;
	char token[WORKER_BRIDGE_TOKEN_LEN + 1] = "", token_sha256[65] = "";
	char socket_path[] = AIRLOCK_BRIDGE_SOCKET_PATH;
	airlock_bridge_endpoint endpoint = { .socket_path = socket_path, .token = token };
	airlock_run_command_spec_input in = {
		.settings = w->settings,
		.tenant_id = tenant,
		.run_id = c->run_id,
		.lease_epoch = q->epoch,
		/* Both yeses: the operator's allowlist and the call's. */
		.egress = q->network_enabled && w->policy.mode == AIRLOCK_EGRESS_ALLOWLIST ? &w->policy
		                                                                           : NULL,
		.parent = environ,
		.working_directory = q->working_directory,
		.bridge = bridge ? &endpoint : NULL,
	};
	airlock_environment_spec spec;
	int r = bridge ? worker_bridge_token_new(token, token_sha256, err) : 0;
	if (r == 0)
		r = airlock_run_command_spec(&in, &spec, NULL, err);
	OPENSSL_cleanse(token, sizeof(token));
	if (r < 0) {
		*ret_status = 500;
		return r;
	}
	airlock_environment_handle h = { 0 };
	int64_t t0 = util_monotonic_ms();
	r = airlock_exec_provision(w->exec, &spec, &h, err);
	airlock_environment_spec_clear(&spec);
	if (r < 0) {
		*ret_status = 0;
		return r;
	}
	count_provision(w, util_monotonic_ms() - t0);
	pthread_mutex_lock(&w->claims_lock);
	airlock_environment_handle_clear(&c->handle);
	c->handle = h;
	c->has_sandbox = true;
	pthread_mutex_unlock(&w->claims_lock);

	char *b64 = NULL;
	worker_db_lease_state st = WORKER_DB_LEASE_INVALID;
	r = airlock_remote_service_handle(w->remote, h.environment_id, &b64, err);
	if (r == 0)
		r = bridge ? worker_db_set_bridge_environment(w->db, c->run_id, q->epoch,
		                                              h.environment_id, b64, token_sha256,
		                                              util_now_ms(), &st, err)
		           : worker_db_set_environment(w->db, c->run_id, q->epoch, h.environment_id,
		                                       b64, util_now_ms(), &st, err);
	free(b64);
	if (r == 0 && st != WORKER_DB_LEASE_CURRENT)
		r = lease_refusal(st, ret_status, err);
	else if (r < 0)
		*ret_status = 0;
	if (r < 0) {
		/* Not recorded (or the claim ended meanwhile): not kept. */
		airlock_error derr = { 0 };
		claim_end(w, c, "not recorded", &derr);
	}
	return r;
}

/* The claim's sandbox for this call: the one it holds, or a new one. A
 * sandbox this worker holds for an older epoch, or one recorded for this
 * claim that it does not hold (a worker that died, another process), is
 * ended first: the workspace is a cache, shared by a claim's calls only
 * while one worker process serves them. */
static int claim_sandbox(worker_daemon *w, worker_claim *c, const worker_tool_request *q,
                         const char *tenant, const worker_db_check_result *lease,
                         unsigned *ret_status, airlock_error *err)
{
	pthread_mutex_lock(&w->claims_lock);
	bool keep = c->has_sandbox && c->epoch == q->epoch && lease->has_environment &&
	            strcmp(c->handle.environment_id, lease->environment_id) == 0;
	bool old = c->has_sandbox && !keep;
	pthread_mutex_unlock(&w->claims_lock);
	if (keep)
		return 0;
	int r = old ? claim_end(w, c, "superseded", err) : 0;
	if (r == 0 && lease->has_environment) {
		worker_db_sandbox sb = { .epoch = q->epoch };
		memcpy(sb.run_id, c->run_id, sizeof(sb.run_id));
		memcpy(sb.environment_id, lease->environment_id, sizeof(sb.environment_id));
		r = end_one(w, &sb, "not this worker's", err);
	}
	if (r < 0) {
		*ret_status = 0;
		return r;
	}
	pthread_mutex_lock(&w->claims_lock);
	/* A destroy still reading the handle: the next call provisions. */
	if (c->refs || c->has_sandbox)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "run %s: its previous sandbox is being destroyed; retry",
		                      c->run_id);
	c->epoch = q->epoch;
	snprintf(c->tenant_id, sizeof(c->tenant_id), "%s", tenant);
	pthread_mutex_unlock(&w->claims_lock);
	if (r < 0) {
		*ret_status = 503;
		return r;
	}
	return claim_provision(w, c, q, tenant, lease->bridge, ret_status, err);
}

/* The HTTP core's mapping of an error class to a status (a 409 for a
 * refusal, 503 for what is retriable). */
static unsigned status_of(const airlock_error *e)
{
	return http_error_status(e);
}

static worker_tool_outcome outcome_of(unsigned status)
{
	return status == 400                      ? WORKER_TOOL_VALIDATION
	       : status == 503                    ? WORKER_TOOL_UNAVAILABLE
	       : status >= 401 && status <= 409   ? WORKER_TOOL_REFUSED
	                                          : WORKER_TOOL_FAILED;
}

/* A tool call's tenant: its token's, or, for a token of every tenant,
 * the one the call names (which a tenant's token may repeat, never
 * change). */
static int call_tenant(const char *token_tenant, const char *named, const char **ret_tenant,
                       unsigned *ret_status, airlock_error *err)
{
	if (strcmp(token_tenant, "*") == 0) {
		if (!named[0]) {
			*ret_status = 400;
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "tool call.tenant_id: a token of every tenant names the "
			                         "run's tenant");
		}
		*ret_tenant = named;
		return 0;
	}
	if (named[0] && strcmp(named, token_tenant) != 0) {
		*ret_status = 403;
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "tool call.tenant_id is not the tenant of this request's "
		                         "token");
	}
	*ret_tenant = token_tenant;
	return 0;
}

/* The call's checks before anything is provisioned: the tenant, the
 * command's validation, the lease, the budget's floor. */
static int call_checks(worker_daemon *w, const char *run_id, const char *token_tenant,
                       const worker_tool_request *q, airlock_execution_command *cmd,
                       const char **ret_tenant, worker_db_check_result *lease,
                       unsigned *ret_status, airlock_error *err)
{
	int r = call_tenant(token_tenant, q->tenant_id, ret_tenant, ret_status, err);
	if (r < 0)
		return r;
	const char *tenant = *ret_tenant;
	airlock_run_command_request req = {
		.argv = q->argv,
		.argc = q->argc,
		.working_directory = q->working_directory,
		.timeout_seconds = q->timeout_seconds,
		/* The service's hard ceiling: four times what the model is
		 * shown, so the rest can be kept as an artifact (output.h). */
		.maximum_output_bytes = WORKER_TOOL_OUTPUT_CEILING,
	};
	r = airlock_run_command_prepare(&req, w->settings, cmd, err);
	if (r == 0 && q->has_deadline) {
		/* The floor is checked before a sandbox is made for a command
		 * that would not be started (the core checks it again). */
		airlock_timeout_inputs ti = {
			.hard_cap_seconds = w->settings->hard_cap_seconds,
			.wall_clock_seconds = w->settings->defaults.limits.wall_clock_seconds,
			.remaining_budget_ms = q->deadline_ms - util_now_ms(),
			.command_seconds = cmd->timeout_seconds,
			.tool_timeout_seconds = AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS,
			.floor_seconds = WORKER_BUDGET_FLOOR_SECONDS,
		};
		int64_t ms = 0;
		r = airlock_timeout_effective(&ti, &ms, err);
	}
	if (r < 0) {
		*ret_status = 400;
		return r;
	}
	r = worker_db_check(w->db, run_id, tenant, q->epoch, util_now_ms(), lease, err);
	if (r < 0) {
		*ret_status = 503;
		return r;
	}
	if (lease->state != WORKER_DB_LEASE_CURRENT)
		return lease_refusal(lease->state, ret_status, err);
	return 0;
}

static void log_call(const char *run_id, const char *tenant, const worker_tool_request *q,
                     worker_tool_outcome o, int64_t ms, const airlock_execution_result *res,
                     const airlock_error *e)
{
	json_t *f = json_pack("{s:s, s:s?, s:I, s:s, s:s, s:I}", "run_id", run_id, "tenant_id",
	                      tenant, "epoch", (json_int_t)q->epoch, "tool",
	                      "sandbox.run_command", "outcome", worker_tool_outcome_name(o),
	                      "duration_ms", (json_int_t)ms);
	if (f && res) {
		json_object_set_new(f, "exit_code",
		                    res->has_exit_code ? json_integer(res->exit_code) : json_null());
		json_object_set_new(f, "killed_by",
		                    res->killed_by != AIRLOCK_KILL_NONE
		                            ? json_string(airlock_kill_reason_name(res->killed_by))
		                            : json_null());
	}
	if (f && e)
		json_object_set_new(f, "message", json_string(e->message));
	worker_log(o == WORKER_TOOL_FAILED || o == WORKER_TOOL_UNAVAILABLE ? "warning" : "info",
	           "tool.called", f);
}

/* The client of a call that runs a command: when it goes away (a
 * platform that timed out, crashed or retried), the command is cancelled,
 * as the service does for its own clients, so the run is not held busy
 * for the rest of the command's timeout. */
typedef struct peer_watch {
	int fd;      /* the client's socket: looked at, never read */
	int stop_fd; /* eventfd: the call is over */
	airlock_cancel *cancel;
	pthread_t thread;
	bool started;
} peer_watch;

static void *peer_watch_main(void *arg)
{
	peer_watch *p = arg;
	for (;;) {
		struct pollfd fds[2] = { { .fd = p->stop_fd, .events = POLLIN },
			                 { .fd = p->fd, .events = POLLRDHUP } };
		int n = poll(fds, 2, 1000);
		if (n > 0 && fds[0].revents)
			return NULL;
		if (http_peer_gone(p->fd)) {
			airlock_cancel_fire(p->cancel);
			return NULL;
		}
		/* Bytes of a next request (pipelined) keep the socket readable:
		 * the next look waits its period instead of spinning. */
		if (n > 0 && fds[1].revents) {
			struct pollfd stop = { .fd = p->stop_fd, .events = POLLIN };
			if (poll(&stop, 1, 200) > 0)
				return NULL;
		}
	}
}

static void peer_watch_start(peer_watch *p, int fd)
{
	*p = (peer_watch){ .fd = fd, .stop_fd = -1 };
	airlock_error err = { 0 };
	if (fd < 0 || airlock_cancel_new(&p->cancel, &err) < 0)
		return;
	p->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	/* Without the watch the call still runs; only a vanished client's
	 * command then runs to its timeout. */
	if (p->stop_fd >= 0 && pthread_create(&p->thread, NULL, peer_watch_main, p) == 0)
		p->started = true;
}

static void peer_watch_stop(peer_watch *p)
{
	if (p->started) {
		uint64_t one = 1;
		ssize_t k = write(p->stop_fd, &one, sizeof(one));
		(void)k;
		pthread_join(p->thread, NULL);
	}
	if (p->stop_fd >= 0)
		close(p->stop_fd);
	airlock_cancel_free(p->cancel);
	*p = (peer_watch){ .fd = -1, .stop_fd = -1 };
}

int worker_run_command(worker_daemon *w, const char *run_id, const char *token_tenant,
                       const char *body, size_t len, int peer_fd, char **ret_json,
                       unsigned *ret_status, worker_tool_outcome *ret_outcome, airlock_error *err)
{
	int64_t t0 = util_monotonic_ms();
	worker_tool_request q;
	airlock_execution_command cmd;
	worker_db_check_result lease = { 0 };
	airlock_execution_result res = { 0 };
	const char *tenant = NULL;
	worker_claim *c = NULL;
	unsigned status = 400;
	bool have_result = false;
	*ret_json = NULL;
	int r = worker_tool_request_decode(body, len, &q, err);
	if (r == 0)
		r = call_checks(w, run_id, token_tenant, &q, &cmd, &tenant, &lease, &status, err);
	if (r == 0 && (r = worker_service(w, err)) < 0)
		status = 503;
	if (r == 0 && (r = claim_take(w, run_id, tenant, q.epoch, &c, err)) < 0)
		status = status_of(err);
	if (r == 0) {
		status = 0;
		r = claim_sandbox(w, c, &q, tenant, &lease, &status, err);
	}
	if (r == 0) {
		peer_watch watch;
		peer_watch_start(&watch, peer_fd);
		airlock_exec_call call = {
			.tenant_id = tenant,
			.remaining_budget_ms = q.has_deadline ? q.deadline_ms - util_now_ms()
			                                      : AIRLOCK_BUDGET_NONE,
			.cancel = watch.cancel,
		};
		r = airlock_exec_execute(w->exec, &call, &c->handle, &cmd, &res, err);
		peer_watch_stop(&watch);
		if (r < 0) {
			status = 0;
			/* A sandbox that is gone (expired, reaped, destroyed by a
			 * fence) is forgotten: the claim's next call makes another. */
			airlock_error derr = { 0 };
			if (err->cls == AIRLOCK_ERR_EXECUTION_REJECTED)
				claim_end(w, c, "gone", &derr);
		} else {
			have_result = true;
		}
	}
	if (c)
		claim_give(w, c);
	/* The tool pipeline's output rule (output.h): a stream past the
	 * tool's limit is kept whole as an artifact of this run and the
	 * model reads its excerpt. */
	airlock_artifact_ref refs[2] = { { { 0 } } };
	bool has_ref[2] = { false, false };
	worker_artifact_writer aw = { .artifacts = w->artifacts, .has_run = true,
		                      .origin = AIRLOCK_ORIGIN_TOOL_OUTPUT };
	if (tenant) {
		snprintf(aw.tenant_id, sizeof(aw.tenant_id), "%s", tenant);
		snprintf(aw.run_id, sizeof(aw.run_id), "%s", run_id);
	}
	if (r == 0 && worker_output_apply(&aw, &res, refs, has_ref) < 0) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the result's output excerpt");
		status = 503;
	}
	if (r == 0 && !(*ret_json = airlock_result_to_tool_json_refs(
				&res, has_ref[0] ? &refs[0] : NULL, has_ref[1] ? &refs[1] : NULL,
				err))) {
		r = airlock_errcode(err->cls);
		status = 500;
	}
	if (r < 0 && status == 0)
		status = status_of(err);
	*ret_status = r < 0 ? status : 200;
	*ret_outcome = r < 0 ? outcome_of(status) : WORKER_TOOL_OK;
	atomic_fetch_add(&w->c.tool_calls[*ret_outcome], 1);
	log_call(run_id, tenant, &q, *ret_outcome, util_monotonic_ms() - t0,
	         have_result ? &res : NULL, r < 0 ? err : NULL);
	airlock_execution_result_clear(&res);
	for (int i = 0; i < 2; i++)
		if (has_ref[i])
			airlock_artifact_ref_clear(&refs[i]);
	worker_tool_request_clear(&q);
	return r;
}

const char *worker_tool_outcome_name(worker_tool_outcome o)
{
	static const char *const names[WORKER_TOOL_OUTCOME__MAX] = {
		[WORKER_TOOL_OK] = "ok",
		[WORKER_TOOL_VALIDATION] = "validation",
		[WORKER_TOOL_REFUSED] = "refused",
		[WORKER_TOOL_UNAVAILABLE] = "unavailable",
		[WORKER_TOOL_FAILED] = "failed",
	};
	return (unsigned)o < WORKER_TOOL_OUTCOME__MAX ? names[o] : "invalid";
}

/* ---- artifact.export ----------------------------------------------------------------- */

static int export_sink(void *arg, const void *buf, size_t len, airlock_error *err)
{
	return worker_artifact_write(arg, buf, len, err);
}

/* The put's own SHA-256 over what it took: the stream wrapper compares the
 * service's digest with it, so the bytes are hashed once on this side. */
static int export_sink_digest(void *arg, char ret[AIRLOCK_SHA256_HEX_LEN + 1], airlock_error *err)
{
	return worker_artifact_seal(arg, ret, err);
}

/* A workspace file streamed from the service through this worker into
 * the store: the service's digest of what it read is compared with the
 * store's over what it received (the stream wrapper, then finish again),
 * so the hop between them is verified. The claim is
 * held for the stream, so no command of the run writes the file while it
 * is read (allow_parallel no, both ways). */
static int export_path(worker_daemon *w, const char *run_id, const char *tenant,
                       const worker_export_request *q, const worker_db_check_result *lease,
                       const worker_artifact_writer *aw, airlock_artifact_ref *ref,
                       unsigned *ret_status, airlock_error *err)
{
	int r = worker_service(w, err);
	if (r < 0) {
		*ret_status = 503;
		return r;
	}
	worker_claim *c = NULL;
	if ((r = claim_take(w, run_id, tenant, q->epoch, &c, err)) < 0 || !c) {
		*ret_status = r < 0 ? status_of(err) : 503;
		return r < 0 ? r
		             : airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                                 "run %s: no claim was taken", run_id);
	}
	pthread_mutex_lock(&w->claims_lock);
	bool live = c->has_sandbox && c->epoch == q->epoch && lease->has_environment &&
	            strcmp(c->handle.environment_id, lease->environment_id) == 0;
	pthread_mutex_unlock(&w->claims_lock);
	airlock_workspace *ws = NULL;
	if (!live) {
		/* Lazy provision is run_command's: an export never makes a
		 * sandbox, and a claim without one has no workspace. */
		*ret_status = 400;
		r = airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                      "artifact.export.arguments.path: no such file: this run has no "
		                      "workspace yet (it is made by the run's first "
		                      "sandbox.run_command)");
	} else {
		airlock_exec_call call = { .tenant_id = tenant, .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
		r = airlock_exec_workspace(w->exec, &call, &c->handle, &ws, err);
		if (r < 0)
			*ret_status = status_of(err);
	}
	const char *name;
	size_t name_len;
	airlock_export_filename(&q->args, &name, &name_len);
	worker_artifact_put *p = NULL;
	/* Trust is inherited, never the producer's to choose: a workspace a
	 * sandbox writes gives its files SANDBOX_WRITTEN or UNKNOWN, and a file
	 * a tool wrote may have been rewritten by a command since, so every
	 * export of a path is EXTERNAL_UNTRUSTED. */
	if (r == 0 && (r = worker_artifact_begin(aw, name, name_len,
	                                         q->args.media_type[0] ? q->args.media_type
	                                                          : "application/octet-stream",
	                                         AIRLOCK_TRUST_EXTERNAL_UNTRUSTED, &p, err)) < 0)
		*ret_status = status_of(err);
	char source_sha[AIRLOCK_SHA256_HEX_LEN + 1];
	uint64_t size = 0;
	if (r == 0) {
		r = airlock_workspace_read_stream_hashed(
			ws, q->args.path, (uint64_t)worker_artifacts_config_of(w->artifacts)->size_max,
			export_sink, export_sink_digest, p, &size, source_sha, err);
		/* A file that is not there (or not a file) is the model's
		 * mistake, said as the path's: the same 400 a bad path gets. */
		if (r < 0 && err->cls == AIRLOCK_ERR_SYSTEM &&
		    (err->errnum == ENOENT || err->errnum == ENOTDIR || err->errnum == EISDIR)) {
			*ret_status = 400;
			airlock_error_wrap(err, AIRLOCK_ERR_TOOL_VALIDATION, err,
			                   "artifact.export.arguments.path");
		} else if (r < 0) {
			*ret_status = status_of(err);
		}
	}
	if (r == 0 && (r = worker_artifact_finish(p, source_sha, ref, err)) < 0)
		*ret_status = status_of(err);
	worker_artifact_put_free(p);
	airlock_workspace_release(ws);
	claim_give(w, c);
	return r;
}

int worker_artifact_export(worker_daemon *w, const char *run_id, const char *token_tenant,
                           const char *body, size_t len, char **ret_json, unsigned *ret_status,
                           worker_tool_outcome *ret_outcome, airlock_error *err)
{
	int64_t t0 = util_monotonic_ms();
	worker_export_request q = { 0 };
	worker_db_check_result lease = { 0 };
	airlock_artifact_ref ref = { { 0 } };
	const char *tenant = NULL;
	unsigned status = 400;
	bool have_ref = false;
	*ret_json = NULL;
	int r = worker_export_request_decode(body, len, &q, err);
	if (r == 0)
		r = call_tenant(token_tenant, q.tenant_id, &tenant, &status, err);
	if (r == 0 && !w->artifacts) {
		status = 503;
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "the artifact store is not open (worker.artifacts_dir)");
	}
	if (r == 0 && (r = worker_db_check(w->db, run_id, tenant, q.epoch, util_now_ms(), &lease,
	                                   err)) < 0)
		status = 503;
	if (r == 0 && lease.state != WORKER_DB_LEASE_CURRENT)
		r = lease_refusal(lease.state, &status, err);
	if (r == 0) {
		worker_artifact_writer aw = { .artifacts = w->artifacts, .has_run = true,
			                      .origin = q.args.path ? AIRLOCK_ORIGIN_SANDBOX_EXPORT
			                                       : AIRLOCK_ORIGIN_MODEL_OUTPUT,
			                      .reuse_same = true };
		snprintf(aw.tenant_id, sizeof(aw.tenant_id), "%s", tenant);
		snprintf(aw.run_id, sizeof(aw.run_id), "%s", run_id);
		if (q.args.path) {
			r = export_path(w, run_id, tenant, &q, &lease, &aw, &ref, &status, err);
		} else {
			const char *name;
			size_t name_len;
			airlock_export_filename(&q.args, &name, &name_len);
			/* Text the model wrote: shaped by whatever its turn
			 * read, a sandbox's output included, which this process
			 * cannot see. A label it cannot justify fails in the
			 * safe direction, as a file of UNKNOWN provenance does. */
			r = worker_artifact_create(&aw, name, name_len,
			                           q.args.media_type[0] ? q.args.media_type : "text/plain",
			                           AIRLOCK_TRUST_EXTERNAL_UNTRUSTED, q.args.text, q.args.text_len,
			                           &ref, err);
			if (r < 0)
				status = status_of(err);
		}
		have_ref = r == 0;
	}
	if (r == 0 && !(*ret_json = airlock_artifact_ref_to_json(&ref, err))) {
		r = airlock_errcode(err->cls);
		status = 500;
	}
	*ret_status = r < 0 ? status : 200;
	*ret_outcome = r < 0 ? outcome_of(status) : WORKER_TOOL_OK;
	atomic_fetch_add(&w->c.tool_calls[*ret_outcome], 1);
	json_t *f = json_pack("{s:s, s:s?, s:I, s:s, s:s, s:I}", "run_id", run_id, "tenant_id",
	                      tenant, "epoch", (json_int_t)q.epoch, "tool", "artifact.export", "outcome",
	                      worker_tool_outcome_name(*ret_outcome), "duration_ms",
	                      (json_int_t)(util_monotonic_ms() - t0));
	if (f && have_ref) {
		json_object_set_new(f, "artifact_id", json_string(ref.artifact_id));
		json_object_set_new(f, "size_bytes", json_integer(ref.size_bytes));
		json_object_set_new(f, "sha256", json_string(ref.sha256));
	}
	if (f && r < 0)
		json_object_set_new(f, "message", json_string(err->message));
	worker_log(*ret_outcome == WORKER_TOOL_FAILED || *ret_outcome == WORKER_TOOL_UNAVAILABLE
	                   ? "warning"
	                   : "info",
	           "tool.called", f);
	if (have_ref)
		airlock_artifact_ref_clear(&ref);
	worker_export_request_clear(&q);
	return r;
}
