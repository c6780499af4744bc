/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The thin wrappers around an ExecutionEnvironment adapter. Every check the
 * specification puts on the port is made here once, so an adapter cannot
 * forget one (SQLite's src/os.c wraps its VFS methods the same way).
 *
 * The wrapper keeps its own record of every sandbox it provisioned: tenant,
 * run, epoch, limits, expiry. A handle is only a claim; the record is what
 * was provisioned. Comparing the two (and the call's tenant) is what turns a
 * forged or mixed-up handle into SandboxEscapeSuspected instead of a
 * cross-tenant read.
 *
 * The record is the single account of what this service started: a
 * sandbox enters it (marked provisioning) before the adapter is asked to
 * build it and leaves it only once the adapter has destroyed it or the
 * provision failed. So max_sandboxes, health, list and expiry all see a
 * sandbox while it is being built, and nothing the adapter holds is ever
 * outside the record.
 *
 * Over 800 lines and one concern: the record and the wrappers that keep
 * it. Every entry point (provision, execute, destroy, the workspace, list,
 * expiry, shutdown, free) reads and changes the same records under the
 * same lock, with the same claim on a record that a destroy waits for;
 * split by verb, each file would need the record's layout and its locking
 * rules, which are this file's alone to know. The cancellation token and
 * the command's validation at the top are the wrappers' own inputs.
 */
#include "airlock/port/exec.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "airlock/ids.h"
#include "airlock/run_command.h"
#include "airlock/settings.h"
#include "util/util.h"

/* ---- cancellation -------------------------------------------------------- */

struct airlock_cancel {
	atomic_bool fired;
	int efd;
};

int airlock_cancel_new(airlock_cancel **ret, airlock_error *err)
{
	airlock_cancel *c = calloc(1, sizeof(*c));
	if (!c)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "cancel token");
	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->efd < 0) {
		int e = errno;
		free(c);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "cancel token: eventfd");
	}
	atomic_init(&c->fired, false);
	*ret = c;
	return 0;
}

void airlock_cancel_fire(airlock_cancel *c)
{
	if (!c || atomic_exchange(&c->fired, true))
		return;
	uint64_t one = 1;
	/* The counter cannot overflow from a single write; a failure here would
	 * leave the flag set, which pollers also check. */
	ssize_t n = write(c->efd, &one, sizeof(one));
	(void)n;
}

bool airlock_cancel_fired(const airlock_cancel *c)
{
	return c && atomic_load(&c->fired);
}

int airlock_cancel_fd(const airlock_cancel *c)
{
	return c ? c->efd : -1;
}

void airlock_cancel_free(airlock_cancel *c)
{
	if (!c)
		return;
	close(c->efd);
	free(c);
}

/* ---- configuration ------------------------------------------------------- */

void airlock_exec_config_default(airlock_exec_config *cfg)
{
	*cfg = (airlock_exec_config){
		.hard_cap_seconds = 1800,
		.tool_timeout_seconds = AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS,
		.budget_floor_seconds = 5,
		.files_changed_max = 1000,
		.argv_max_bytes = AIRLOCK_RUN_COMMAND_ARGV_MAX_BYTES,
	};
}

void airlock_exec_config_from_settings(const airlock_settings *s, airlock_exec_config *cfg)
{
	airlock_exec_config_default(cfg);
	cfg->hard_cap_seconds = s->hard_cap_seconds;
	cfg->files_changed_max = s->defaults.files_changed_max;
	cfg->ceilings = s->ceilings.limits;
	cfg->max_sandboxes = s->service.max_sandboxes > 0 ? (size_t)s->service.max_sandboxes : 0;
}

/* ---- the instance -------------------------------------------------------- */

typedef struct exec_record {
	char environment_id[AIRLOCK_ENVIRONMENT_ID_MAX];
	char *tenant_id;
	char *run_id;
	int64_t lease_epoch;
	int64_t created_at_ms;
	int64_t expires_at_ms;
	airlock_resource_limits limits;
	bool busy; /* an execute is running: execute is not parallel-safe per handle */
	int64_t busy_since_ms; /* monotonic, while busy */
	int64_t busy_ms;       /* time inside execute, finished commands */
	int64_t born_ms;       /* monotonic at provision: the lifetime's start */
	/* The adapter's provision has not returned: the adapter may not hold
	 * the sandbox yet, so a destroy now would find nothing to destroy and
	 * the provision would then leave a sandbox nobody records. Every verb
	 * waits for this to clear (record_find_ready). */
	bool provisioning;
	/* A destroy has this record and is in the adapter's destroy: the
	 * record stays (its id is not free to provision again, and a destroy
	 * that fails leaves it for a retry) and no other verb acts on it until
	 * that destroy ends (record_find_ready waits, the core's own destroys
	 * and expiry leave it to the one in flight). Without it a second
	 * destroy that checked the same handle could reach the adapter after a
	 * provision of the id had begun, and tear down that new sandbox and
	 * take its record with a handle that was never its own. */
	bool destroying;
	/* Which sandbox of its id this record is (ids can be provisioned
	 * again once destroyed): a destroy decided on one record never
	 * touches a later one of the same id. */
	uint64_t serial;
	/* A warm-pool sandbox not claimed yet (airlock_exec_pool_*): no
	 * tenant's verb finds it (pooled_hidden), the reaper skips it, and its
	 * expires_at is the pool's idle bound. */
	bool pooled;
} exec_record;

struct airlock_exec {
	const airlock_exec_ops *ops;
	void *ctx;
	airlock_exec_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	pthread_cond_t provisioned; /* a record left the provisioning or destroying state */
	uint64_t next_serial;
	unsigned inflight; /* calls into the adapter that have not returned */
	bool closing;      /* free has begun: no new call starts */
	bool stopping;     /* shutdown: no new provision or execute starts */
	exec_record *records;
	size_t n_records;
	size_t alloc_records;
};

int airlock_exec_new(const airlock_exec_ops *ops, void *ctx, const airlock_exec_config *cfg,
                     airlock_exec **ret, airlock_error *err)
{
	if (!ops || ops->version != AIRLOCK_EXEC_OPS_VERSION || !ops->provision || !ops->execute ||
	    !ops->destroy || !ops->workspace || !ops->free) {
		if (ops && ops->free && ctx)
			ops->free(ctx);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "execution adapter %s: incomplete operations table or version mismatch",
		                         ops && ops->name ? ops->name : "(unnamed)");
	}
	airlock_exec_config c;
	if (cfg)
		c = *cfg;
	else
		airlock_exec_config_default(&c);
	if (c.hard_cap_seconds <= 0 || c.tool_timeout_seconds <= 0 || c.budget_floor_seconds < 0 ||
	    c.files_changed_max <= 0 || c.argv_max_bytes == 0) {
		ops->free(ctx);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "execution service configuration: hard cap, tool timeout and listing cap must be positive");
	}
	if (c.files_changed_max > AIRLOCK_FILES_CHANGED_MAX) {
		ops->free(ctx);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "execution service configuration: files_changed_max %lld is above %d",
		                         (long long)c.files_changed_max, AIRLOCK_FILES_CHANGED_MAX);
	}
	airlock_exec *e = calloc(1, sizeof(*e));
	if (!e) {
		ops->free(ctx);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "execution service");
	}
	e->ops = ops;
	e->ctx = ctx;
	e->cfg = c;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->idle, NULL);
	pthread_cond_init(&e->provisioned, NULL);
	*ret = e;
	return 0;
}

const char *airlock_exec_name(const airlock_exec *e)
{
	return e->ops->name;
}

const char *airlock_output_stream_name(airlock_output_stream s)
{
	switch (s) {
	case AIRLOCK_OUTPUT_STDOUT: return "stdout";
	case AIRLOCK_OUTPUT_STDERR: return "stderr";
	}
	return NULL;
}

const char *airlock_exec_event_kind_name(airlock_exec_event_kind k)
{
	switch (k) {
	case AIRLOCK_EXEC_EVENT_PROVISIONED: return "provisioned";
	case AIRLOCK_EXEC_EVENT_PROVISION_FAILED: return "provision_failed";
	case AIRLOCK_EXEC_EVENT_EXECUTED: return "executed";
	case AIRLOCK_EXEC_EVENT_EXECUTE_FAILED: return "execute_failed";
	case AIRLOCK_EXEC_EVENT_DESTROYED: return "destroyed";
	case AIRLOCK_EXEC_EVENT_DESTROY_FAILED: return "destroy_failed";
	case AIRLOCK_EXEC_EVENT_INVALID:
	case AIRLOCK_EXEC_EVENT__MAX:
		break;
	}
	return NULL;
}

static exec_record *record_find(airlock_exec *e, const char *id);

/* Tell the observer, never under the lock (it may log, or take its own
 * locks). The record's strings, the handle's or the spec's name the
 * sandbox. */
static void emit(airlock_exec *e, airlock_exec_event *ev)
{
	if (!e->cfg.observer || !e->cfg.observer->event)
		return;
	ev->mechanism = e->ops->name;
	if (!ev->environment_id)
		ev->environment_id = "";
	/* A caller that passed no airlock_error still has its failure counted:
	 * the observer always gets an error for the *_FAILED kinds. */
	static const airlock_error no_detail = { .cls = AIRLOCK_ERR_INVALID,
		                                 .message = "(the caller asked for no detail)" };
	bool failed = ev->kind == AIRLOCK_EXEC_EVENT_PROVISION_FAILED ||
	              ev->kind == AIRLOCK_EXEC_EVENT_EXECUTE_FAILED ||
	              ev->kind == AIRLOCK_EXEC_EVENT_DESTROY_FAILED;
	if (failed && !ev->error)
		ev->error = &no_detail;
	e->cfg.observer->event(e->cfg.observer_arg, ev);
}

static void emit_destroyed(airlock_exec *e, const exec_record *r, const char *reason)
{
	airlock_exec_event ev = {
		.kind = AIRLOCK_EXEC_EVENT_DESTROYED, .environment_id = r->environment_id,
		.tenant_id = r->tenant_id, .run_id = r->run_id, .lease_epoch = r->lease_epoch,
		.duration_ms = util_monotonic_ms() - r->born_ms, .busy_ms = r->busy_ms,
		.reason = reason,
	};
	emit(e, &ev);
}

static void emit_destroy_failed(airlock_exec *e, const char *id, const airlock_error *derr)
{
	if (!e->cfg.observer)
		return;
	/* The record stays (a later destroy retries it): its names are copied
	 * under the lock so the line says whose sandbox it is. */
	char tenant[AIRLOCK_ID_MAX + 1] = { 0 }, run[AIRLOCK_ID_MAX + 1] = { 0 };
	int64_t epoch = 0;
	pthread_mutex_lock(&e->lock);
	const exec_record *r = record_find(e, id);
	if (r) {
		snprintf(tenant, sizeof(tenant), "%s", r->tenant_id);
		snprintf(run, sizeof(run), "%s", r->run_id);
		epoch = r->lease_epoch;
	}
	pthread_mutex_unlock(&e->lock);
	airlock_exec_event ev = { .kind = AIRLOCK_EXEC_EVENT_DESTROY_FAILED, .environment_id = id,
		                  .tenant_id = r ? tenant : NULL, .run_id = r ? run : NULL,
		                  .lease_epoch = epoch, .error = derr };
	emit(e, &ev);
}

static void record_clear(exec_record *r)
{
	free(r->tenant_id);
	free(r->run_id);
	memset(r, 0, sizeof(*r));
}

/* Every call into the adapter is bracketed by enter/leave, so free can wait
 * for the last one and nothing runs against a freed adapter. After
 * airlock_exec_shutdown only cleanup calls (destroy, workspace) still
 * enter: work that starts now would only be killed. */
static int call_enter_as(airlock_exec *e, bool cleanup, airlock_error *err)
{
	pthread_mutex_lock(&e->lock);
	bool closing = e->closing || (e->stopping && !cleanup);
	if (!closing)
		e->inflight++;
	pthread_mutex_unlock(&e->lock);
	if (closing)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "the execution service is shutting down");
	return 0;
}

static int call_enter(airlock_exec *e, airlock_error *err)
{
	return call_enter_as(e, false, err);
}

static void call_leave(airlock_exec *e)
{
	pthread_mutex_lock(&e->lock);
	if (--e->inflight == 0 && e->closing)
		pthread_cond_broadcast(&e->idle);
	pthread_mutex_unlock(&e->lock);
}

void airlock_exec_shutdown(airlock_exec *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->stopping = true;
	pthread_mutex_unlock(&e->lock);
	/* The adapter's shutdown neither blocks nor frees: safe from any
	 * thread, while the execute it ends is still running. */
	if (e->ops->shutdown)
		e->ops->shutdown(e->ctx);
}

void airlock_exec_free(airlock_exec *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->closing = true;
	pthread_mutex_unlock(&e->lock);
	/* Commands in flight end now with SERVICE_SHUTDOWN; then wait for
	 * every call to return before anything is freed under it. */
	if (e->ops->shutdown)
		e->ops->shutdown(e->ctx);
	pthread_mutex_lock(&e->lock);
	while (e->inflight > 0)
		pthread_cond_wait(&e->idle, &e->lock);
	pthread_mutex_unlock(&e->lock);
	/* ops->free destroys whatever the adapter still holds; the records only
	 * mirror that, so they are dropped without a second destroy. */
	e->ops->free(e->ctx);
	for (size_t i = 0; i < e->n_records; i++) {
		emit_destroyed(e, &e->records[i], "shutdown");
		record_clear(&e->records[i]);
	}
	free(e->records);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->idle);
	pthread_cond_destroy(&e->provisioned);
	free(e);
}

/* Caller holds the lock. */
static exec_record *record_find(airlock_exec *e, const char *id)
{
	for (size_t i = 0; i < e->n_records; i++)
		if (strcmp(e->records[i].environment_id, id) == 0)
			return &e->records[i];
	return NULL;
}

/*
 * The record of id once no provision of it is in flight; NULL when there is
 * none. Caller holds the lock, which the wait releases (so the pointer is
 * looked up again after it).
 *
 * A verb on a sandbox being provisioned waits rather than failing or
 * marking it for the provision to undo: a destroy that answers only once
 * the adapter has really torn the sandbox down keeps "destroyed" meaning
 * that its init, cgroups and loop device are gone (a worker may provision
 * the next one under max_sandboxes at once), the provision's answer stays
 * the plain truth (it did provision), and no new answer is needed in the
 * contract. The wait is bounded by the provision itself, which ends within
 * its adapter's start budget; a provision never waits on any other verb,
 * so the wait cannot close a cycle.
 */
static exec_record *record_find_ready(airlock_exec *e, const char *id)
{
	exec_record *r;
	/* A record being destroyed is waited for the same way: the destroy in
	 * flight never waits on another verb (destroy_begin does not), so
	 * neither wait can close a cycle. */
	while ((r = record_find(e, id)) && (r->provisioning || r->destroying))
		pthread_cond_wait(&e->provisioned, &e->lock);
	return r;
}

/* A pooled record is no tenant's sandbox: every verb a handle names
 * finds it not live, so a guessed pool id is worth nothing, and nothing a
 * tenant does reaches a sandbox before it is claimed for that tenant. */
static exec_record *record_find_tenant(airlock_exec *e, const char *id)
{
	exec_record *r = record_find_ready(e, id);
	return r && r->pooled ? NULL : r;
}

/* Mark record r (e->lock held) as the caller's to destroy; its serial is
 * what destroy_end is given. */
static uint64_t destroy_claim_locked(exec_record *r)
{
	r->destroying = true;
	return r->serial;
}

/* The core's own destroy of the record that had serial (a suspicion, a
 * reached expires_at): claims it, without waiting. False when that record
 * is gone, is being provisioned or destroyed by another call (that call
 * decides its end), or is a later sandbox of the same id. */
static bool destroy_begin(airlock_exec *e, const char *id, uint64_t serial)
{
	pthread_mutex_lock(&e->lock);
	exec_record *r = record_find(e, id);
	bool mine = r && r->serial == serial && !r->provisioning && !r->destroying;
	if (mine)
		destroy_claim_locked(r);
	pthread_mutex_unlock(&e->lock);
	return mine;
}

/* Take the record out of the table into *out (the caller clears it);
 * false when there is none. Caller holds the lock. */
static bool record_take(airlock_exec *e, const char *id, exec_record *out)
{
	exec_record *r = record_find(e, id);
	if (!r)
		return false;
	*out = *r;
	size_t idx = (size_t)(r - e->records);
	memmove(r, r + 1, (e->n_records - idx - 1) * sizeof(*r));
	e->n_records--;
	return true;
}

/* The end of a destroy that claimed the record of serial: when the
 * adapter destroyed it (destroyed) the record goes and the observer hears
 * why; otherwise it stays for a retry. Whoever waited on it looks again.
 * Takes the lock. */
static void destroy_end(airlock_exec *e, const char *id, uint64_t serial, bool destroyed,
                        const char *reason)
{
	exec_record rec;
	bool had = false;
	pthread_mutex_lock(&e->lock);
	exec_record *r = record_find(e, id);
	if (r && r->serial == serial) {
		r->destroying = false;
		if (destroyed)
			had = record_take(e, id, &rec);
	}
	pthread_cond_broadcast(&e->provisioned);
	pthread_mutex_unlock(&e->lock);
	if (!had)
		return;
	emit_destroyed(e, &rec, reason);
	record_clear(&rec);
}

/* A limit above the operator's ceiling is a bug in the caller: rejected,
 * never clamped, so the caller learns which number was wrong. */
static int check_ceilings(const airlock_resource_limits *l, const airlock_resource_limits *c,
                          airlock_error *err)
{
	const struct {
		const char *name;
		int64_t value, ceiling;
	} rows[] = {
		{ "cpu_millicores", l->cpu_millicores, c->cpu_millicores },
		{ "memory_bytes", l->memory_bytes, c->memory_bytes },
		{ "pids_max", l->pids_max, c->pids_max },
		{ "workspace_bytes", l->workspace_bytes, c->workspace_bytes },
		{ "inodes_max", l->inodes_max, c->inodes_max },
		{ "wall_clock_seconds", l->wall_clock_seconds, c->wall_clock_seconds },
	};
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
		if (rows[i].ceiling > 0 && rows[i].value > rows[i].ceiling)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "ResourceLimits.%s=%lld is above the operator's ceiling of %lld",
			                         rows[i].name, (long long)rows[i].value,
			                         (long long)rows[i].ceiling);
	return 0;
}

/* pool_idle_ms > 0: a pooled sandbox (airlock_exec_pool_provision), whose
 * expires_at is the pool's idle bound rather than the hard cap. */
static int exec_provision_inner(airlock_exec *e, const airlock_environment_spec *spec,
                                const char *want_id, int64_t pool_idle_ms,
                                airlock_environment_handle *ret, airlock_error *err)
{
	int r = airlock_environment_spec_validate(spec, err);
	if (r < 0)
		return r;
	r = check_ceilings(&spec->limits, &e->cfg.ceilings, err);
	if (r < 0)
		return r;
	exec_record rec = { .lease_epoch = spec->lease_epoch, .limits = spec->limits,
		            .born_ms = util_monotonic_ms() };
	if (want_id) {
		if (!airlock_environment_id_valid(want_id))
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "environment_id is not an id this platform generates "
			                         "(\"env_\" and 32 lowercase hex characters)");
		memcpy(rec.environment_id, want_id, strlen(want_id) + 1);
	} else {
		r = airlock_environment_id_new(rec.environment_id, err);
		if (r < 0)
			return r;
	}
	rec.tenant_id = strdup(spec->tenant_id);
	rec.run_id = strdup(spec->run_id);
	if (!rec.tenant_id || !rec.run_id) {
		record_clear(&rec);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "provision");
	}
	rec.created_at_ms = util_now_ms();
	/* expires_at is created_at plus the service's hard cap; the service
	 * enforces it whether or not anyone reads it. */
	rec.expires_at_ms = rec.created_at_ms + e->cfg.hard_cap_seconds * 1000;
	if (pool_idle_ms > 0) {
		rec.pooled = true;
		rec.expires_at_ms = rec.created_at_ms + pool_idle_ms;
	}

	airlock_environment_handle h = {
		.tenant_id = rec.tenant_id, .run_id = rec.run_id, .lease_epoch = rec.lease_epoch,
		.created_at_ms = rec.created_at_ms, .expires_at_ms = rec.expires_at_ms,
	};
	memcpy(h.environment_id, rec.environment_id, sizeof(h.environment_id));

	airlock_environment_handle out = { 0 };
	r = airlock_environment_handle_copy(&out, &h);
	if (r < 0) {
		record_clear(&rec);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "provision");
	}

	pthread_mutex_lock(&e->lock);
	/* Capacity and a second sandbox under one id are refused before the
	 * adapter is asked for anything: at once, never a wait. */
	if (record_find(e, rec.environment_id)) {
		pthread_mutex_unlock(&e->lock);
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                      "environment %s is already live; an id names one sandbox",
		                      rec.environment_id);
		record_clear(&rec);
		airlock_environment_handle_clear(&out);
		return r;
	}
	if (e->cfg.max_sandboxes > 0 && e->n_records >= e->cfg.max_sandboxes) {
		size_t n = e->n_records;
		pthread_mutex_unlock(&e->lock);
		record_clear(&rec);
		airlock_environment_handle_clear(&out);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "the execution service is at capacity (%zu live sandboxes, "
		                         "max_sandboxes %zu); retry later",
		                         n, e->cfg.max_sandboxes);
	}
	if (e->n_records == e->alloc_records) {
		size_t n = e->alloc_records ? e->alloc_records * 2 : 16;
		exec_record *p = reallocarray(e->records, n, sizeof(*p));
		if (!p) {
			pthread_mutex_unlock(&e->lock);
			record_clear(&rec);
			airlock_environment_handle_clear(&out);
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "provision");
		}
		e->records = p;
		e->alloc_records = n;
	}
	/* In the record before the adapter starts: counted against
	 * max_sandboxes and listed from now on, and no verb acts on it until
	 * the provision has ended one way or the other. */
	rec.provisioning = true;
	rec.serial = ++e->next_serial;
	e->records[e->n_records++] = rec;
	pthread_mutex_unlock(&e->lock);

	r = e->ops->provision(e->ctx, spec, &h, err);
	if (r < 0) {
		/* The port's provision leaves nothing behind on failure: the
		 * record goes, and whoever waited on it finds the id gone. */
		exec_record gone;
		pthread_mutex_lock(&e->lock);
		bool had = record_take(e, out.environment_id, &gone);
		pthread_cond_broadcast(&e->provisioned);
		pthread_mutex_unlock(&e->lock);
		if (had)
			record_clear(&gone);
		airlock_environment_handle_clear(&out);
		airlock_error_prefix(err, "provision (%s): ", e->ops->name);
		return r;
	}
	airlock_exec_event ev = {
		.kind = AIRLOCK_EXEC_EVENT_PROVISIONED, .environment_id = out.environment_id,
		.tenant_id = out.tenant_id, .run_id = out.run_id, .lease_epoch = out.lease_epoch,
		.duration_ms = util_monotonic_ms() - rec.born_ms,
	};
	/* Told before the record is released, so a destroy that waited for it
	 * is heard after it. */
	emit(e, &ev);
	pthread_mutex_lock(&e->lock);
	exec_record *mine = record_find(e, out.environment_id);
	/* Nothing takes a provisioning record out of the table (every remover
	 * waits or skips it), so it is still here. */
	if (mine)
		mine->provisioning = false;
	pthread_cond_broadcast(&e->provisioned);
	pthread_mutex_unlock(&e->lock);
	*ret = out;
	return 0;
}

/* Destroy a sandbox the core has decided must go (a suspected escape, a
 * reached expires_at); the caller reports why, and a failure of this
 * destroy is added to that message rather than hidden, so "the sandbox is
 * destroyed" is never said of one that is not. The record stays when the
 * destroy failed: a later destroy retries it. */
static void destroy_now(airlock_exec *e, const char *id, uint64_t serial, const char *when,
                        const char *reason, airlock_error *err)
{
	/* Only the sandbox the decision was made on: gone already, or being
	 * destroyed by another call, it is not destroyed twice, and a later
	 * sandbox of its id is not this one. */
	if (!destroy_begin(e, id, serial))
		return;
	airlock_error derr = { 0 };
	if (e->ops->destroy(e->ctx, id, &derr) < 0) {
		emit_destroy_failed(e, id, &derr);
		destroy_end(e, id, serial, false, reason);
		if (err)
			airlock_error_prefix(err, "(destroy %s also failed: %s) ", when, derr.message);
		return;
	}
	destroy_end(e, id, serial, true, reason);
}

/* Why the handle (and the call's tenant, when given) is not the record's,
 * every field compared; NULL when it is. Caller holds the lock. */
static const char *handle_mismatch(const exec_record *r, const char *call_tenant,
                                   const airlock_environment_handle *h)
{
	if (!util_streq0(r->tenant_id, h->tenant_id))
		return "the handle's tenant_id is not the tenant the sandbox was provisioned for";
	if (call_tenant && !util_streq0(call_tenant, h->tenant_id))
		return "the handle belongs to a different tenant than the call";
	if (!util_streq0(r->run_id, h->run_id))
		return "the handle's run_id is not the run the sandbox was provisioned for";
	if (r->lease_epoch != h->lease_epoch)
		return "the handle's lease_epoch is not the one the sandbox was provisioned under";
	if (r->created_at_ms != h->created_at_ms || r->expires_at_ms != h->expires_at_ms)
		return "the handle's timestamps differ from the provisioned sandbox's";
	return NULL;
}

/* The specification's rule for a handle that is not the sandbox's
 * (SandboxEscapeSuspected: "not retriable, the sandbox is destroyed"), the
 * same on every verb: destroy it and say why. */
static int suspected(airlock_exec *e, const char *id, uint64_t serial, const char *why,
                     airlock_error *err)
{
	int code = airlock_error_set(err, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
	                             "environment %s: %s; the sandbox is destroyed", id, why);
	destroy_now(e, id, serial, "after suspicion", "suspicion", err);
	return code;
}

/*
 * Look the handle up and compare it with the record and with the call.
 * On success *ret_rec is a copy of the record's numbers (the strings are not
 * copied; only limits and expiry are used after the lock is released).
 */
static int check_handle(airlock_exec *e, const char *call_tenant,
                        const airlock_environment_handle *h, exec_record *ret_rec,
                        airlock_error *err)
{
	if (!h || !airlock_environment_id_valid(h->environment_id))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "environment handle has no valid environment_id");
	pthread_mutex_lock(&e->lock);
	exec_record *r = record_find_tenant(e, h->environment_id);
	if (!r) {
		pthread_mutex_unlock(&e->lock);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "environment %s is not live: destroyed, expired or never provisioned",
		                         h->environment_id);
	}
	const char *why = handle_mismatch(r, call_tenant, h);
	exec_record copy = *r;
	pthread_mutex_unlock(&e->lock);
	if (why)
		return suspected(e, h->environment_id, copy.serial, why, err);
	copy.tenant_id = copy.run_id = NULL;
	*ret_rec = copy;
	return 0;
}

int airlock_execution_command_validate(const airlock_execution_command *c, size_t argv_max_bytes,
                                       airlock_error *err)
{
	if (!c || !c->argv || c->argc == 0)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "command must be a non-empty argument vector, for example [\"python3\", \"script.py\"] or [\"bash\", \"-lc\", \"make && ./run\"]; a shell string is not accepted");
	size_t total = 0;
	for (size_t i = 0; i < c->argc; i++) {
		if (!c->argv[i])
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "command[%zu] is missing", i);
		total += strlen(c->argv[i]) + 1;
		if (total > argv_max_bytes)
			return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
			                         "command is over the %zu-byte argument vector cap",
			                         argv_max_bytes);
	}
	if (c->argv[c->argc] != NULL)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "command vector is not NULL-terminated");
	const char *a0 = c->argv[0];
	if (!*a0)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "command[0] is empty");
	/* A relative path with a separator would be resolved against the working
	 * directory, i.e. the workspace: a file dropped there could shadow a
	 * tool. Absolute, or a bare name found on the image PATH, only. */
	if (strchr(a0, '/') && a0[0] != '/')
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "command[0] must be absolute or a bare name on the image PATH; to run a workspace script write [\"bash\", \"./setup.sh\"]");
	if (c->timeout_seconds <= 0)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "timeout_seconds must be a positive integer");
	if (c->maximum_output_bytes <= 0)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "maximum_output_bytes must be positive");
	if (c->maximum_output_bytes > AIRLOCK_OUTPUT_BYTES_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "maximum_output_bytes=%lld is above the ceiling of %lld "
		                         "bytes (16 MiB) per stream",
		                         (long long)c->maximum_output_bytes,
		                         (long long)AIRLOCK_OUTPUT_BYTES_MAX);
	if (c->has_stdin && c->stdin_len > 0 && !c->stdin_data)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0, "stdin has no data");
	if (!c->working_directory)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "working_directory is missing (use \".\" for the workspace root)");
	/* "." names the root itself (the specification's own example request);
	 * anything else must pass the containment string rules. */
	if (strcmp(c->working_directory, ".") != 0)
		return airlock_workspace_check_string(c->working_directory,
		                                      strlen(c->working_directory), NULL, err);
	return 0;
}

/* The result invariants of the specification, checked for every adapter.
 * A violation is an adapter bug, reported as such rather than passed on. */
static const char *result_violation(const airlock_execution_result *r, int64_t max_listing,
                                    int64_t max_output)
{
	if ((int64_t)r->stdout_len > max_output || (int64_t)r->stderr_len > max_output)
		return "stdout or stderr is over the command's maximum_output_bytes";
	if ((r->killed_by != AIRLOCK_KILL_NONE) == r->has_exit_code)
		return "exit_code must be absent exactly when killed_by is set";
	if ((unsigned)r->killed_by >= AIRLOCK_KILL__MAX)
		return "killed_by is outside the closed vocabulary";
	if (r->timed_out != (r->killed_by == AIRLOCK_KILL_TIMEOUT))
		return "timed_out must be set exactly when killed_by is TIMEOUT";
	if (r->n_files_changed > (size_t)max_listing)
		return "files_changed is over the listing cap";
	if (r->duration_ms < 0)
		return "duration_ms is negative";
	for (size_t i = 0; i < r->n_files_changed; i++) {
		const airlock_file_change *f = &r->files_changed[i];
		if (!f->path || !*f->path || f->path[0] == '/')
			return "files_changed path is not relative to /workspace";
		if (f->has_sha256 == (f->change == AIRLOCK_CHANGE_DELETED))
			return "files_changed sha256 must be absent exactly for deletions";
		if (f->change <= AIRLOCK_CHANGE_INVALID || f->change >= AIRLOCK_CHANGE__MAX)
			return "files_changed change kind is invalid";
	}
	return NULL;
}

/* Every result leaves here within the byte bound on its listing (caps.h,
 * AIRLOCK_FILES_CHANGED_JSON_MAX), so whatever files_changed_max allows,
 * the whole result is one a client decodes: a listing over it is cut to
 * the prefix that fits, as the count cap cuts it, and says so. */
_Static_assert(AIRLOCK_RESULT_JSON_WORST <= AIRLOCK_JSON_INPUT_MAX,
               "a result within its caps must fit the decoders' cap");
_Static_assert(1000 * (AIRLOCK_FC_JSON_ENTRY_OVERHEAD +
                       AIRLOCK_FC_JSON_PATH_FACTOR * (size_t)AIRLOCK_FC_PATH_MAX) <=
                       AIRLOCK_FILES_CHANGED_JSON_MAX,
               "the default files_changed_max (1000) is never cut by bytes");

/* An adapter's listing may be longer than this core's files_changed_max
 * (up to AIRLOCK_FILES_CHANGED_MAX, result_violation): the remote adapter's
 * is cut by its service's setting. The caller gets its own cap's sorted
 * prefix, marked truncated. */
static void listing_cut_to_count(airlock_execution_result *r, int64_t max)
{
	if (r->n_files_changed <= (size_t)max)
		return;
	for (size_t i = (size_t)max; i < r->n_files_changed; i++)
		airlock_file_change_clear(&r->files_changed[i]);
	r->n_files_changed = (size_t)max;
	r->files_changed_truncated = true;
}

static void listing_cut_to_bytes(airlock_execution_result *r)
{
	size_t used = 0, keep = 0;
	for (; keep < r->n_files_changed; keep++) {
		size_t len = strnlen(r->files_changed[keep].path, AIRLOCK_FILES_CHANGED_JSON_MAX);
		size_t cost = AIRLOCK_FC_JSON_ENTRY_OVERHEAD + AIRLOCK_FC_JSON_PATH_FACTOR * len;
		if (cost > AIRLOCK_FILES_CHANGED_JSON_MAX - used)
			break;
		used += cost;
	}
	if (keep == r->n_files_changed)
		return;
	for (size_t i = keep; i < r->n_files_changed; i++)
		airlock_file_change_clear(&r->files_changed[i]);
	r->n_files_changed = keep;
	r->files_changed_truncated = true;
}

static int exec_execute_inner(airlock_exec *e, const airlock_exec_call *call,
                         const airlock_environment_handle *handle,
                         const airlock_execution_command *command,
                         airlock_execution_result *ret, airlock_error *err)
{
	if (!call || !call->tenant_id)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "execute needs the tenant the call is for");
	exec_record rec;
	int r = check_handle(e, call->tenant_id, handle, &rec, err);
	if (r < 0)
		return r;
	r = airlock_execution_command_validate(command, e->cfg.argv_max_bytes, err);
	if (r < 0)
		return r;

	int64_t now = util_now_ms();
	if (now >= rec.expires_at_ms) {
		int code = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                             "environment %s reached expires_at and is destroyed; provision a new one",
		                             handle->environment_id);
		destroy_now(e, handle->environment_id, rec.serial, "at expires_at", "expired", err);
		return code;
	}

	airlock_timeout_inputs ti = {
		.hard_cap_seconds = e->cfg.hard_cap_seconds,
		.wall_clock_seconds = rec.limits.wall_clock_seconds,
		.remaining_budget_ms = call->remaining_budget_ms,
		.command_seconds = command->timeout_seconds,
		.tool_timeout_seconds = e->cfg.tool_timeout_seconds,
		.floor_seconds = e->cfg.budget_floor_seconds,
	};
	int64_t timeout_ms = 0;
	r = airlock_timeout_effective(&ti, &timeout_ms, err);
	if (r < 0)
		return r;

	airlock_exec_request req = {
		.command = command,
		.effective_timeout_ms = timeout_ms,
		.expires_at_ms = rec.expires_at_ms,
		.files_changed_max = e->cfg.files_changed_max,
		.cancel = call->cancel,
		.remaining_budget_ms = call->remaining_budget_ms,
		.on_output = call->on_output,
		.output_arg = call->output_arg,
	};
	airlock_exec_event ev = { .kind = AIRLOCK_EXEC_EVENT_EXECUTE_FAILED,
		                  .environment_id = handle->environment_id,
		                  .tenant_id = handle->tenant_id, .run_id = handle->run_id,
		                  .lease_epoch = handle->lease_epoch, .error = err };
	int64_t t0 = util_monotonic_ms();
	airlock_execution_result res = { 0 };
	r = e->ops->execute(e->ctx, handle, &req, &res, err);
	if (r < 0) {
		airlock_execution_result_clear(&res);
		airlock_error_prefix(err, "execute (%s): ", e->ops->name);
		ev.duration_ms = util_monotonic_ms() - t0;
		emit(e, &ev);
		return r;
	}
	const char *bad = result_violation(&res, AIRLOCK_FILES_CHANGED_MAX,
	                                   command->maximum_output_bytes);
	if (bad) {
		airlock_execution_result_clear(&res);
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "execution adapter %s returned an inconsistent result: %s",
		                      e->ops->name, bad);
		ev.duration_ms = util_monotonic_ms() - t0;
		emit(e, &ev);
		return r;
	}
	listing_cut_to_count(&res, e->cfg.files_changed_max);
	listing_cut_to_bytes(&res);
	ev = (airlock_exec_event){
		.kind = AIRLOCK_EXEC_EVENT_EXECUTED, .environment_id = handle->environment_id,
		.tenant_id = handle->tenant_id, .run_id = handle->run_id,
		.lease_epoch = handle->lease_epoch, .duration_ms = res.duration_ms,
		.has_exit_code = res.has_exit_code, .exit_code = res.exit_code,
		.killed_by = res.killed_by,
	};
	emit(e, &ev);
	/* EXPIRED also ends the sandbox: the adapter killed the command, and the
	 * sandbox itself is destroyed now, as the specification requires. */
	if (res.killed_by == AIRLOCK_KILL_EXPIRED)
		destroy_now(e, handle->environment_id, rec.serial, "at expires_at", "expired", NULL);
	*ret = res;
	return 0;
}

static int exec_destroy_inner(airlock_exec *e, const airlock_environment_handle *handle,
                         airlock_error *err)
{
	if (!handle || !airlock_environment_id_valid(handle->environment_id))
		return 0; /* nothing that could name a live sandbox: already gone */
	/* A sandbox being provisioned is waited for (record_find_ready says
	 * why), then compared and destroyed like any other. */
	pthread_mutex_lock(&e->lock);
	exec_record *r = record_find_tenant(e, handle->environment_id);
	bool known = r != NULL;
	const char *why = r ? handle_mismatch(r, NULL, handle) : NULL;
	uint64_t serial = r ? r->serial : 0;
	/* Claimed under the same lock as the comparison: a second destroy
	 * waits for this one and then finds the id gone (204). */
	if (r && !why)
		destroy_claim_locked(r);
	pthread_mutex_unlock(&e->lock);
	if (!known)
		return 0; /* idempotent: destroy never fails for a handle already gone */
	/* Every field, as execute and the workspace compare them: a destroy
	 * with another run's, a stale epoch's or made-up timestamps is the
	 * same suspicion, answered the same way (the sandbox still goes). */
	if (why)
		return suspected(e, handle->environment_id, serial, why, err);

	int r2 = e->ops->destroy(e->ctx, handle->environment_id, err);
	if (r2 < 0) {
		emit_destroy_failed(e, handle->environment_id, err);
		destroy_end(e, handle->environment_id, serial, false, "request");
		airlock_error_prefix(err, "destroy (%s): ", e->ops->name);
		return r2;
	}
	destroy_end(e, handle->environment_id, serial, true, "request");
	return 0;
}

static int exec_workspace_inner(airlock_exec *e, const airlock_exec_call *call,
                           const airlock_environment_handle *handle, airlock_workspace **ret,
                           airlock_error *err)
{
	if (!call || !call->tenant_id)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "workspace access needs the tenant the call is for");
	exec_record rec;
	int r = check_handle(e, call->tenant_id, handle, &rec, err);
	if (r < 0)
		return r;
	return e->ops->workspace(e->ctx, handle->environment_id, ret, err);
}

/* ---- the entry points: each call is bracketed for airlock_exec_free ----- */

static int exec_provision_entry(airlock_exec *e, const airlock_environment_spec *spec,
                                const char *want_id, airlock_environment_handle *ret,
                                airlock_error *err)
{
	int r = call_enter(e, err);
	if (r == 0) {
		int64_t t0 = util_monotonic_ms();
		r = exec_provision_inner(e, spec, want_id, 0, ret, err);
		if (r < 0) {
			airlock_exec_event ev = {
				.kind = AIRLOCK_EXEC_EVENT_PROVISION_FAILED, .environment_id = want_id,
				.tenant_id = spec ? spec->tenant_id : NULL,
				.run_id = spec ? spec->run_id : NULL,
				.lease_epoch = spec ? spec->lease_epoch : 0,
				.duration_ms = util_monotonic_ms() - t0, .error = err,
			};
			emit(e, &ev);
		}
		call_leave(e);
		return r;
	}
	airlock_exec_event ev = { .kind = AIRLOCK_EXEC_EVENT_PROVISION_FAILED,
		                  .environment_id = want_id, .error = err };
	emit(e, &ev);
	return r;
}

int airlock_exec_provision(airlock_exec *e, const airlock_environment_spec *spec,
                           airlock_environment_handle *ret, airlock_error *err)
{
	return exec_provision_entry(e, spec, NULL, ret, err);
}

int airlock_exec_provision_as(airlock_exec *e, const airlock_environment_spec *spec,
                              const char *environment_id, airlock_environment_handle *ret,
                              airlock_error *err)
{
	if (!environment_id)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "provision_as needs an environment_id");
	return exec_provision_entry(e, spec, environment_id, ret, err);
}

/* One command at a time per sandbox (the specification: execute "is not
 * parallel-safe against a single handle"): two commands would share the
 * workspace snapshots, the limit counters and the group every command's
 * leftovers are killed in. A second one is refused, not queued. */
/* The claim is on the record of *serial (0: none was taken), not on the id:
 * a destroy and a provision of the same id while the command runs make a
 * new record, whose own claims this one's release must not end. */
static int record_claim(airlock_exec *e, const airlock_environment_handle *h, uint64_t *serial,
                        airlock_error *err)
{
	*serial = 0;
	if (!h || !airlock_environment_id_valid(h->environment_id))
		return 0; /* check_handle reports it */
	pthread_mutex_lock(&e->lock);
	exec_record *r = record_find_tenant(e, h->environment_id);
	bool busy = r && r->busy;
	if (r && !busy) {
		r->busy = true;
		r->busy_since_ms = util_monotonic_ms();
		*serial = r->serial;
	}
	pthread_mutex_unlock(&e->lock);
	if (busy)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "environment %s is running another command; execute is not "
		                         "parallel-safe against one handle",
		                         h->environment_id);
	return 0;
}

static void record_release(airlock_exec *e, const airlock_environment_handle *h, uint64_t serial)
{
	if (!h || !serial)
		return;
	pthread_mutex_lock(&e->lock);
	exec_record *r = record_find(e, h->environment_id);
	if (r && r->serial == serial && r->busy) {
		r->busy = false;
		r->busy_ms += util_monotonic_ms() - r->busy_since_ms;
	}
	pthread_mutex_unlock(&e->lock);
}

int airlock_exec_execute(airlock_exec *e, const airlock_exec_call *call,
                         const airlock_environment_handle *handle,
                         const airlock_execution_command *command,
                         airlock_execution_result *ret, airlock_error *err)
{
	int r = call_enter(e, err);
	if (r < 0)
		return r;
	uint64_t serial = 0;
	r = record_claim(e, handle, &serial, err);
	if (r == 0) {
		r = exec_execute_inner(e, call, handle, command, ret, err);
		record_release(e, handle, serial);
	}
	call_leave(e);
	return r;
}

int airlock_exec_destroy(airlock_exec *e, const airlock_environment_handle *handle,
                         airlock_error *err)
{
	int r = call_enter_as(e, true, err);
	if (r < 0)
		return r;
	r = exec_destroy_inner(e, handle, err);
	call_leave(e);
	return r;
}

int airlock_exec_workspace(airlock_exec *e, const airlock_exec_call *call,
                           const airlock_environment_handle *handle, airlock_workspace **ret,
                           airlock_error *err)
{
	int r = call_enter_as(e, true, err);
	if (r < 0)
		return r;
	r = exec_workspace_inner(e, call, handle, ret, err);
	call_leave(e);
	return r;
}

/* ---- what the service asks of the records -------------------------------- */

void airlock_exec_list_free(airlock_exec_entry *v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++) {
		free(v[i].tenant_id);
		free(v[i].run_id);
	}
	free(v);
}

static int entry_cmp(const void *a, const void *b)
{
	const airlock_exec_entry *x = a, *y = b;
	if (x->created_at_ms != y->created_at_ms)
		return x->created_at_ms < y->created_at_ms ? -1 : 1;
	return strcmp(x->environment_id, y->environment_id);
}

int airlock_exec_list(airlock_exec *e, airlock_exec_entry **ret, size_t *ret_n,
                      airlock_error *err)
{
	pthread_mutex_lock(&e->lock);
	size_t n = e->n_records;
	airlock_exec_entry *v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		pthread_mutex_unlock(&e->lock);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "list");
	}
	bool oom = false;
	int64_t now = util_monotonic_ms();
	for (size_t i = 0; !oom && i < n; i++) {
		const exec_record *r = &e->records[i];
		memcpy(v[i].environment_id, r->environment_id, sizeof(v[i].environment_id));
		v[i].tenant_id = strdup(r->tenant_id);
		v[i].run_id = strdup(r->run_id);
		v[i].lease_epoch = r->lease_epoch;
		v[i].created_at_ms = r->created_at_ms;
		v[i].expires_at_ms = r->expires_at_ms;
		v[i].busy = r->busy;
		v[i].busy_ms = r->busy_ms + (r->busy ? now - r->busy_since_ms : 0);
		v[i].provisioning = r->provisioning;
		v[i].pooled = r->pooled;
		oom = !v[i].tenant_id || !v[i].run_id;
	}
	pthread_mutex_unlock(&e->lock);
	if (oom) {
		airlock_exec_list_free(v, n);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "list");
	}
	qsort(v, n, sizeof(*v), entry_cmp);
	*ret = v;
	*ret_n = n;
	return 0;
}

size_t airlock_exec_live(airlock_exec *e)
{
	pthread_mutex_lock(&e->lock);
	size_t n = e->n_records;
	pthread_mutex_unlock(&e->lock);
	return n;
}

int airlock_exec_tenant_of(airlock_exec *e, const char *environment_id, char *buf, size_t size,
                           airlock_error *err)
{
	pthread_mutex_lock(&e->lock);
	exec_record *r = environment_id ? record_find(e, environment_id) : NULL;
	if (r && r->pooled)
		r = NULL; /* no tenant's (record_find_tenant) */
	int n = r ? snprintf(buf, size, "%s", r->tenant_id) : -1;
	pthread_mutex_unlock(&e->lock);
	if (n < 0 || (size_t)n >= size)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "environment %s is not live",
		                         environment_id ? environment_id : "(none given)");
	return 0;
}

/*
 * The reaper's destroy (the specification, "Nothing outlives its lease"):
 * the sandbox the worker tier called stale, named by the (id, run, epoch)
 * the question carried, so a later sandbox of the same id (provisioned
 * under another run or epoch between the question and this call) is never
 * the one torn down. A busy sandbox goes too: its command belongs to a
 * lease that ended, and the adapter's destroy ends it. One being
 * provisioned or destroyed by another call is left alone (that call
 * decides its end; the next pass looks again).
 */
int airlock_exec_destroy_id(airlock_exec *e, const char *environment_id, const char *run_id,
                            int64_t lease_epoch, const char *reason, airlock_error *err)
{
	if (!environment_id || !run_id || !reason)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "destroy by id: missing argument");
	int r = call_enter_as(e, true, err);
	if (r < 0)
		return r;
	uint64_t serial = 0;
	bool mine = false;
	pthread_mutex_lock(&e->lock);
	exec_record *rec = record_find(e, environment_id);
	if (rec && !rec->provisioning && !rec->destroying && !rec->pooled &&
	    rec->lease_epoch == lease_epoch &&
	    util_streq0(rec->run_id, run_id)) {
		serial = destroy_claim_locked(rec);
		mine = true;
	}
	pthread_mutex_unlock(&e->lock);
	if (!mine) {
		call_leave(e);
		return 0;
	}
	r = e->ops->destroy(e->ctx, environment_id, err);
	if (r < 0) {
		emit_destroy_failed(e, environment_id, err);
		destroy_end(e, environment_id, serial, false, reason);
		call_leave(e);
		return r;
	}
	destroy_end(e, environment_id, serial, true, reason);
	call_leave(e);
	return 1;
}

/*
 * expires_at enforced by the clock, not only at the next execute: an idle
 * sandbox past it is destroyed here. One id is taken at a time under the
 * lock and destroyed outside it, so a slow destroy never holds the table;
 * a busy record is skipped (its execute ends with EXPIRED and the core
 * destroys it then), and so is one whose destroy failed this pass.
 */
size_t airlock_exec_expire(airlock_exec *e, int64_t now_ms)
{
	size_t done = 0;
	if (call_enter_as(e, true, NULL) < 0)
		return 0;
	char failed[16][AIRLOCK_ENVIRONMENT_ID_MAX];
	size_t n_failed = 0;
	for (;;) {
		char id[AIRLOCK_ENVIRONMENT_ID_MAX] = { 0 };
		uint64_t serial = 0;
		bool pooled = false;
		pthread_mutex_lock(&e->lock);
		for (size_t i = 0; i < e->n_records && !id[0]; i++) {
			const exec_record *r = &e->records[i];
			/* A provisioning record is not the adapter's yet: its
			 * destroy would find nothing. It is taken at the next
			 * pass, once provisioned. */
			bool skip = r->busy || r->provisioning || r->destroying ||
			            r->expires_at_ms > now_ms;
			for (size_t k = 0; !skip && k < n_failed; k++)
				skip = strcmp(failed[k], r->environment_id) == 0;
			if (!skip) {
				memcpy(id, r->environment_id, sizeof(id));
				pooled = r->pooled;
				serial = destroy_claim_locked(&e->records[i]);
			}
		}
		pthread_mutex_unlock(&e->lock);
		if (!id[0])
			break;
		airlock_error derr = { 0 };
		if (e->ops->destroy(e->ctx, id, &derr) < 0) {
			emit_destroy_failed(e, id, &derr);
			destroy_end(e, id, serial, false, pooled ? "pool_idle" : "expired");
			if (n_failed == ARRAY_SIZE(failed))
				break; /* the rest waits for the next pass */
			memcpy(failed[n_failed++], id, sizeof(id));
			continue;
		}
		destroy_end(e, id, serial, true, pooled ? "pool_idle" : "expired");
		done++;
	}
	call_leave(e);
	return done;
}

/* ---- the warm pool ------------------------------------------------------------ */

bool airlock_exec_pool_capable(const airlock_exec *e)
{
	return e && e->ops->claim != NULL;
}

int airlock_exec_pool_provision(airlock_exec *e, const airlock_environment_spec *spec,
                                int64_t idle_max_ms, char ret_id[AIRLOCK_ENVIRONMENT_ID_MAX],
                                airlock_error *err)
{
	if (!e->ops->claim)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.pool: the %s mechanism has no warm pool",
		                         e->ops->name);
	/* The pool's identity only, and nothing a tenant gave: whatever the
	 * sandbox is built with before its claim must be the same for every
	 * tenant that may claim it. */
	if (idle_max_ms <= 0 || !spec || !util_streq0(spec->tenant_id, AIRLOCK_POOL_TENANT) ||
	    !util_streq0(spec->run_id, AIRLOCK_POOL_RUN) || spec->lease_epoch != 0 ||
	    spec->environment.n > 0 || spec->egress.mode != AIRLOCK_EGRESS_DENY || spec->bridge)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "pool provision: the spec must be the pool's identity, "
		                         "an empty environment, egress deny and no bridge");
	int r = call_enter(e, err);
	if (r < 0)
		return r;
	airlock_environment_handle h = { 0 };
	r = exec_provision_inner(e, spec, NULL, idle_max_ms, &h, err);
	if (r == 0)
		memcpy(ret_id, h.environment_id, AIRLOCK_ENVIRONMENT_ID_MAX);
	airlock_environment_handle_clear(&h);
	call_leave(e);
	return r;
}

/* The claim's failure after the adapter was asked: the sandbox (under the
 * record's new id, the adapter's claim renamed it first) is destroyed, as
 * a provision that fails leaves nothing behind. Caller holds no lock. */
static void claim_undo(airlock_exec *e, const char *id, uint64_t serial)
{
	pthread_mutex_lock(&e->lock);
	exec_record *r = record_find(e, id);
	if (r && r->serial == serial) {
		r->provisioning = false;
		destroy_claim_locked(r);
	}
	pthread_mutex_unlock(&e->lock);
	airlock_error derr = { 0 };
	bool gone = e->ops->destroy(e->ctx, id, &derr) == 0;
	if (!gone)
		emit_destroy_failed(e, id, &derr);
	destroy_end(e, id, serial, gone, "pool_claim_failed");
}

/* The claim's failure when the adapter still holds the sandbox under its
 * pool id (it refused before the rename, the first thing a claim changes:
 * an egress the operator's policy refuses, no memory for the environment):
 * the record is the pool's again, as it was, and the sandbox stays pooled
 * rather than a tenant's refused spec costing a sandbox. was is the
 * record before the claim (its strings are taken back). False when the
 * adapter no longer knows pool id (the caller destroys the sandbox). */
static bool claim_restore(airlock_exec *e, const char *id, exec_record *was)
{
	airlock_workspace *ws = NULL;
	airlock_error scratch = { 0 };
	if (e->ops->workspace(e->ctx, was->environment_id, &ws, &scratch) < 0) {
		free(was->tenant_id);
		free(was->run_id);
		return false;
	}
	airlock_workspace_release(ws);
	pthread_mutex_lock(&e->lock);
	exec_record *r = record_find(e, id);
	/* A provisioning record is this claim's alone: nothing else removes
	 * or changes it. */
	if (r && r->serial == was->serial) {
		free(r->tenant_id);
		free(r->run_id);
		*r = *was;
		r->provisioning = false;
	} else {
		free(was->tenant_id);
		free(was->run_id);
	}
	pthread_cond_broadcast(&e->provisioned);
	pthread_mutex_unlock(&e->lock);
	return true;
}

static int pool_claim_inner(airlock_exec *e, const char *pool_id,
                            const airlock_environment_spec *spec, const char *want_id,
                            airlock_environment_handle *ret, airlock_error *err)
{
	int r = airlock_environment_spec_validate(spec, err);
	if (r == 0)
		r = check_ceilings(&spec->limits, &e->cfg.ceilings, err);
	if (r < 0)
		return r;
	char id[AIRLOCK_ENVIRONMENT_ID_MAX];
	if (want_id) {
		if (!airlock_environment_id_valid(want_id))
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "environment_id is not an id this platform generates "
			                         "(\"env_\" and 32 lowercase hex characters)");
		memcpy(id, want_id, strlen(want_id) + 1);
	} else if ((r = airlock_environment_id_new(id, err)) < 0) {
		return r;
	}
	/* A new id, not the pool's: the pool id was never a tenant's, and
	 * the worker names its sandboxes itself (provision_as). */
	char *tenant = strdup(spec->tenant_id), *run = strdup(spec->run_id);
	if (!tenant || !run) {
		free(tenant);
		free(run);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "pool claim");
	}
	int64_t t0 = util_monotonic_ms();
	pthread_mutex_lock(&e->lock);
	exec_record *rec = record_find(e, pool_id);
	const char *refusal = record_find(e, id) ? "is already live; an id names one sandbox" : NULL;
	/* Ready: pooled, provisioned, not being destroyed, inside its idle
	 * bound (the expiry timer may not have reached it yet). */
	if (rec && (!rec->pooled || rec->provisioning || rec->destroying || rec->busy ||
	            rec->expires_at_ms <= util_now_ms()))
		rec = NULL;
	if (refusal || !rec) {
		pthread_mutex_unlock(&e->lock);
		free(tenant);
		free(run);
		if (refusal)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "environment %s %s", id, refusal);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "pool: sandbox %s is not pooled and ready", pool_id);
	}
	/* Renamed and bound in the record at once, marked provisioning so
	 * every verb on the new id waits for the adapter's claim (as for a
	 * provision), and no longer pooled: nothing else claims, expires or
	 * evicts it from here on. */
	/* The pool's record as it was, for a claim the adapter refused before
	 * it changed anything (claim_restore). */
	exec_record was = *rec;
	memcpy(rec->environment_id, id, sizeof(rec->environment_id));
	rec->tenant_id = tenant;
	rec->run_id = run;
	rec->lease_epoch = spec->lease_epoch;
	rec->limits = spec->limits;
	rec->pooled = false;
	rec->provisioning = true;
	/* The tenant's lifetime starts at its claim: the time it waited in
	 * the pool is not its (the pool's idle bound was that). */
	rec->created_at_ms = util_now_ms();
	rec->expires_at_ms = rec->created_at_ms + e->cfg.hard_cap_seconds * 1000;
	rec->born_ms = t0;
	uint64_t serial = rec->serial;
	airlock_environment_handle h = {
		.tenant_id = rec->tenant_id, .run_id = rec->run_id, .lease_epoch = rec->lease_epoch,
		.created_at_ms = rec->created_at_ms, .expires_at_ms = rec->expires_at_ms,
	};
	memcpy(h.environment_id, id, sizeof(h.environment_id));
	airlock_environment_handle out = { 0 };
	int cr = airlock_environment_handle_copy(&out, &h);
	pthread_mutex_unlock(&e->lock);
	/* rec's strings are the record's and stay while it is provisioning
	 * (nothing removes or rebinds such a record but this call). */
	r = cr < 0 ? airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -cr, "pool claim")
	           : e->ops->claim(e->ctx, pool_id, spec, &h, err);
	if (r < 0) {
		airlock_environment_handle_clear(&out);
		if (cr == 0)
			airlock_error_prefix(err, "pool claim (%s): ", e->ops->name);
		if (!claim_restore(e, id, &was))
			claim_undo(e, id, serial);
		return r;
	}
	free(was.tenant_id);
	free(was.run_id);
	airlock_exec_event ev = {
		.kind = AIRLOCK_EXEC_EVENT_PROVISIONED, .environment_id = out.environment_id,
		.tenant_id = out.tenant_id, .run_id = out.run_id, .lease_epoch = out.lease_epoch,
		.duration_ms = util_monotonic_ms() - t0,
	};
	emit(e, &ev);
	pthread_mutex_lock(&e->lock);
	exec_record *mine = record_find(e, id);
	if (mine && mine->serial == serial)
		mine->provisioning = false;
	pthread_cond_broadcast(&e->provisioned);
	pthread_mutex_unlock(&e->lock);
	*ret = out;
	return 0;
}

int airlock_exec_pool_claim(airlock_exec *e, const char *pool_id,
                            const airlock_environment_spec *spec, const char *want_id,
                            airlock_environment_handle *ret, airlock_error *err)
{
	if (!e->ops->claim || !pool_id || !spec)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "pool claim: the %s mechanism has no warm pool", e->ops->name);
	int r = call_enter(e, err);
	if (r < 0)
		return r;
	r = pool_claim_inner(e, pool_id, spec, want_id, ret, err);
	call_leave(e);
	return r;
}

int airlock_exec_pool_discard(airlock_exec *e, const char *pool_id, const char *reason,
                              airlock_error *err)
{
	int r = call_enter_as(e, true, err);
	if (r < 0)
		return r;
	uint64_t serial = 0;
	pthread_mutex_lock(&e->lock);
	exec_record *rec = record_find(e, pool_id);
	bool mine = rec && rec->pooled && !rec->provisioning && !rec->destroying;
	if (mine)
		serial = destroy_claim_locked(rec);
	pthread_mutex_unlock(&e->lock);
	if (!mine) {
		call_leave(e);
		return 0;
	}
	r = e->ops->destroy(e->ctx, pool_id, err);
	if (r < 0)
		emit_destroy_failed(e, pool_id, err);
	destroy_end(e, pool_id, serial, r == 0, reason);
	call_leave(e);
	return r < 0 ? r : 1;
}

bool airlock_exec_pool_ready(airlock_exec *e, const char *pool_id)
{
	pthread_mutex_lock(&e->lock);
	const exec_record *r = pool_id ? record_find(e, pool_id) : NULL;
	bool ready = r && r->pooled && !r->provisioning && !r->destroying && !r->busy &&
	             r->expires_at_ms > util_now_ms();
	pthread_mutex_unlock(&e->lock);
	return ready;
}
