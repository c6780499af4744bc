/* SPDX-License-Identifier: Apache-2.0 */
/* The fault-injecting wrapper adapter: tests/fault_adapter.h says what each
 * failed call does and why. */
#include "fault_adapter.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void fault_plan_arm(fault_plan *p, unsigned nth)
{
	atomic_store(&p->seen, 0);
	atomic_store(&p->fired, NULL);
	atomic_store(&p->nth, nth);
}

unsigned fault_plan_calls(const fault_plan *p) { return atomic_load(&p->seen); }

const char *fault_plan_fired(const fault_plan *p) { return atomic_load(&p->fired); }

/* One port call: true when it is the one to fail. Calls from several
 * threads each take their own number. */
static bool fault_plan_hit(fault_plan *p, const char *call)
{
	unsigned n = atomic_fetch_add(&p->seen, 1) + 1;
	if (n != atomic_load(&p->nth))
		return false;
	atomic_store(&p->fired, call);
	return true;
}

static int fault_unavailable(airlock_error *err, const char *call)
{
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
	                         "%s: injected fault (tests/fault_adapter.c)", call);
}

/* ---- the workspace wrapper ----------------------------------------------- */

typedef struct fault_ws {
	airlock_workspace *inner; /* a reference of our own */
	fault_plan *plan;
} fault_ws;

static int fault_io(airlock_error *err, const char *call, const char *rel)
{
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO, "%s %s: injected fault", call,
	                         airlock_workspace_quote(rel, strlen(rel), q));
}

static int fault_ws_contain(void *ctx, const char *rel, airlock_error *err)
{
	fault_ws *w = ctx;
	if (fault_plan_hit(w->plan, "workspace.contain"))
		return airlock_error_set(err, AIRLOCK_ERR_WORKSPACE_ESCAPE, 0,
		                         "containment could not be established: injected fault");
	/* The root ("", listdir's) is under itself. Any other path asks the
	 * inner adapter's contain through its public resolve; the inner
	 * wrappers check it again at use, so nothing is decided here alone.
	 * A destroyed inner workspace is left to the call itself to report
	 * (ExecutionRejected): the core would turn any answer of contain's but
	 * an escape into WorkspaceEscape. So a resolve through this wrapper
	 * after the destroy succeeds; every other call is refused. */
	if (!*rel)
		return 0;
	char *resolved = NULL;
	int r = airlock_workspace_resolve(w->inner, rel, strlen(rel), &resolved, err);
	free(resolved);
	if (r == airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED)) {
		airlock_error_clear(err);
		return 0;
	}
	return r;
}

static int fault_ws_read(void *ctx, const char *rel, size_t max_bytes, unsigned char **ret_data,
                         size_t *ret_len, airlock_error *err)
{
	fault_ws *w = ctx;
	if (fault_plan_hit(w->plan, "workspace.read"))
		return fault_io(err, "read", rel);
	return airlock_workspace_read(w->inner, rel, max_bytes, ret_data, ret_len, err);
}

static int fault_ws_write(void *ctx, const char *rel, const void *data, size_t len,
                          airlock_error *err)
{
	fault_ws *w = ctx;
	if (fault_plan_hit(w->plan, "workspace.write"))
		return fault_io(err, "write", rel);
	return airlock_workspace_write(w->inner, rel, data, len, err);
}

static int fault_ws_listdir(void *ctx, const char *rel, size_t max_entries,
                            airlock_dir_listing *ret, airlock_error *err)
{
	fault_ws *w = ctx;
	if (fault_plan_hit(w->plan, "workspace.listdir"))
		return fault_io(err, "listdir", rel);
	return airlock_workspace_listdir(w->inner, rel, max_entries, ret, err);
}

static int fault_ws_provenance(void *ctx, const char *rel, airlock_provenance *ret,
                               airlock_error *err)
{
	fault_ws *w = ctx;
	if (fault_plan_hit(w->plan, "workspace.provenance"))
		return fault_io(err, "provenance", rel);
	return airlock_workspace_provenance(w->inner, rel, ret, err);
}

/* Push: the inner workspace's whole stream (its wrapper's digest is the
 * source's), or the planned failure before a byte. */
static int fault_ws_read_stream(void *ctx, const char *rel, uint64_t max_bytes,
                                airlock_workspace_sink sink, void *arg, uint64_t *ret_size,
                                char ret_source_sha256[AIRLOCK_SHA256_HEX_LEN + 1],
                                airlock_error *err)
{
	fault_ws *w = ctx;
	if (fault_plan_hit(w->plan, "workspace.stream"))
		return fault_io(err, "stream", rel);
	return airlock_workspace_read_stream(w->inner, rel, max_bytes, sink, arg, ret_size,
	                                     ret_source_sha256, err);
}

static void fault_ws_free(void *ctx)
{
	fault_ws *w = ctx;
	airlock_workspace_release(w->inner);
	free(w);
}

static const airlock_workspace_ops fault_ws_ops = {
	.version = AIRLOCK_WORKSPACE_OPS_VERSION,
	.name = "fault",
	.contain = fault_ws_contain,
	.read = fault_ws_read,
	.write = fault_ws_write,
	.listdir = fault_ws_listdir,
	.provenance = fault_ws_provenance,
	.free = fault_ws_free,
	.read_stream = fault_ws_read_stream,
};

int fault_workspace_new(airlock_workspace *inner, fault_plan *plan, airlock_workspace **ret,
                        airlock_error *err)
{
	fault_ws *w = calloc(1, sizeof(*w));
	if (!w) {
		airlock_workspace_release(inner);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "fault workspace");
	}
	w->inner = inner;
	w->plan = plan;
	return airlock_workspace_new(&fault_ws_ops, w, ret, err);
}

/* ---- the exec wrapper ---------------------------------------------------- */

typedef struct fault_exec {
	const airlock_exec_ops *inner;
	void *inner_ctx;
	fault_plan *plan;
} fault_exec;

static int fault_provision(void *ctx, const airlock_environment_spec *spec,
                           const airlock_environment_handle *handle, airlock_error *err)
{
	fault_exec *f = ctx;
	bool fail = fault_plan_hit(f->plan, "exec.provision");
	int r = f->inner->provision(f->inner_ctx, spec, handle, err);
	if (r < 0 || !fail)
		return r;
	/* A step after the sandbox was made failed: undo it, as the adapter's
	 * own failure path must. A destroy that fails too is part of the
	 * report, never hidden. */
	airlock_error derr = { 0 };
	if (f->inner->destroy(f->inner_ctx, handle->environment_id, &derr) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "exec.provision: injected fault; the destroy after it failed: %s",
		                         derr.message);
	return fault_unavailable(err, "exec.provision");
}

static int fault_execute(void *ctx, const airlock_environment_handle *handle,
                         const airlock_exec_request *req, airlock_execution_result *ret,
                         airlock_error *err)
{
	fault_exec *f = ctx;
	bool fail = fault_plan_hit(f->plan, "exec.execute");
	int r = f->inner->execute(f->inner_ctx, handle, req, ret, err);
	if (r < 0 || !fail)
		return r;
	airlock_execution_result_clear(ret);
	return fault_unavailable(err, "exec.execute");
}

static int fault_destroy(void *ctx, const char *environment_id, airlock_error *err)
{
	fault_exec *f = ctx;
	bool fail = fault_plan_hit(f->plan, "exec.destroy");
	int r = f->inner->destroy(f->inner_ctx, environment_id, err);
	if (r < 0 || !fail)
		return r;
	return fault_unavailable(err, "exec.destroy");
}

static int fault_workspace(void *ctx, const char *environment_id, airlock_workspace **ret,
                           airlock_error *err)
{
	fault_exec *f = ctx;
	bool fail = fault_plan_hit(f->plan, "exec.workspace");
	airlock_workspace *inner = NULL;
	int r = f->inner->workspace(f->inner_ctx, environment_id, &inner, err);
	if (r < 0)
		return r;
	if (fail) {
		airlock_workspace_release(inner);
		return fault_unavailable(err, "exec.workspace");
	}
	return fault_workspace_new(inner, f->plan, ret, err);
}

static void fault_free(void *ctx)
{
	fault_exec *f = ctx;
	f->inner->free(f->inner_ctx);
	free(f);
}

static void fault_shutdown(void *ctx)
{
	fault_exec *f = ctx;
	if (f->inner->shutdown)
		f->inner->shutdown(f->inner_ctx);
}

static const airlock_exec_ops fault_exec_table = {
	.version = AIRLOCK_EXEC_OPS_VERSION,
	.name = "fault",
	.provision = fault_provision,
	.execute = fault_execute,
	.destroy = fault_destroy,
	.workspace = fault_workspace,
	.free = fault_free,
	.shutdown = fault_shutdown,
};

const airlock_exec_ops *fault_exec_ops(void) { return &fault_exec_table; }

int fault_exec_new(const airlock_exec_ops *inner, void *inner_ctx, fault_plan *plan, void **ret,
                   airlock_error *err)
{
	fault_exec *f = calloc(1, sizeof(*f));
	if (!f) {
		inner->free(inner_ctx);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "fault adapter");
	}
	f->inner = inner;
	f->inner_ctx = inner_ctx;
	f->plan = plan;
	*ret = f;
	return 0;
}
