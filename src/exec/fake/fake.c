/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fake mechanism: a real implementation of the ExecutionEnvironment port
 * that runs nothing. See include/airlock/fake.h.
 */
#include "airlock/fake.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "airlock/ids.h"
#include "core/snapshot.h"
#include "core/workspace_internal.h"
#include "util/util.h"
#include "workspace/memory/memws.h"

/* A script is held in the fake's own copies. */
typedef struct fake_script {
	char **argv; /* NULL for the default */
	size_t argc;
	airlock_fake_behaviour b;
	unsigned char *out, *errb;
	airlock_fake_file_op *ops;
} fake_script;

typedef struct fake_env {
	char environment_id[AIRLOCK_ENVIRONMENT_ID_MAX];
	char *tenant_id;
	airlock_workspace *ws;
} fake_env;

struct airlock_fake {
	pthread_mutex_t lock;
	int shutdown_efd; /* readable once the service is stopping */
	fake_script *scripts;
	size_t n_scripts;
	fake_env *envs;
	size_t n_envs;
	airlock_fake_record *records;
	size_t n_records;
};

static void script_clear(fake_script *s)
{
	if (s->argv)
		for (size_t i = 0; i < s->argc; i++)
			free(s->argv[i]);
	free(s->argv);
	free(s->out);
	free(s->errb);
	if (s->ops)
		for (size_t i = 0; i < s->b.n_file_ops; i++) {
			free((void *)(uintptr_t)s->ops[i].path);
			free((void *)(uintptr_t)s->ops[i].data);
		}
	free(s->ops);
	memset(s, 0, sizeof(*s));
}

static void env_clear(fake_env *e)
{
	free(e->tenant_id);
	airlock_workspace_free(e->ws);
	memset(e, 0, sizeof(*e));
}

int airlock_fake_new(airlock_fake **ret, airlock_error *err)
{
	airlock_fake *f = calloc(1, sizeof(*f));
	if (!f)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "fake mechanism");
	f->shutdown_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (f->shutdown_efd < 0) {
		int e = errno;
		free(f);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "fake mechanism");
	}
	pthread_mutex_init(&f->lock, NULL);
	*ret = f;
	return 0;
}

static void fake_free(void *ctx)
{
	airlock_fake *f = ctx;
	if (!f)
		return;
	for (size_t i = 0; i < f->n_scripts; i++)
		script_clear(&f->scripts[i]);
	free(f->scripts);
	for (size_t i = 0; i < f->n_envs; i++)
		env_clear(&f->envs[i]);
	free(f->envs);
	for (size_t i = 0; i < f->n_records; i++)
		airlock_execution_command_clear(&f->records[i].command);
	free(f->records);
	close(f->shutdown_efd);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

static void *dup_bytes(const void *p, size_t n)
{
	void *q = malloc(n ? n : 1);
	if (q && n)
		memcpy(q, p, n);
	return q;
}

static bool argv_equal(char *const *a, size_t an, const char *const *b)
{
	size_t bn = 0;
	while (b[bn])
		bn++;
	if (an != bn)
		return false;
	for (size_t i = 0; i < an; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return true;
}

/* Deep-copy a behaviour (and an argv, which may be NULL) into *dst. */
static int script_copy(fake_script *dst, const char *const *argv, const airlock_fake_behaviour *b)
{
	fake_script s = { .b = *b };
	bool ok = true;
	if (argv) {
		while (argv[s.argc])
			s.argc++;
		s.argv = calloc(s.argc + 1, sizeof(char *));
		ok = s.argv != NULL;
		for (size_t i = 0; ok && i < s.argc; i++)
			ok = (s.argv[i] = strdup(argv[i])) != NULL;
	}
	if (ok) {
		s.out = dup_bytes(b->stdout_data, b->stdout_len);
		s.errb = dup_bytes(b->stderr_data, b->stderr_len);
		s.ops = calloc(b->n_file_ops + 1, sizeof(*s.ops));
		ok = s.out && s.errb && s.ops;
	}
	for (size_t i = 0; ok && i < b->n_file_ops; i++) {
		s.ops[i].delete_file = b->file_ops[i].delete_file;
		s.ops[i].len = b->file_ops[i].len;
		s.ops[i].path = strdup(b->file_ops[i].path);
		s.ops[i].data = dup_bytes(b->file_ops[i].data, b->file_ops[i].len);
		ok = s.ops[i].path && s.ops[i].data;
	}
	if (!ok) {
		script_clear(&s);
		return -ENOMEM;
	}
	s.b.stdout_data = s.out;
	s.b.stderr_data = s.errb;
	s.b.file_ops = s.ops;
	*dst = s;
	return 0;
}

int airlock_fake_script(airlock_fake *f, const char *const *argv, const airlock_fake_behaviour *b,
                        airlock_error *err)
{
	if (!b || (unsigned)b->killed_by >= AIRLOCK_KILL__MAX || b->runs_for_ms < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "fake script: invalid behaviour");
	for (size_t i = 0; i < b->n_file_ops; i++)
		if (!b->file_ops[i].path || (!b->file_ops[i].delete_file && b->file_ops[i].len &&
		                             !b->file_ops[i].data))
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "fake script: file operation %zu is incomplete", i);
	fake_script s;
	if (script_copy(&s, argv, b) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "fake script");

	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->n_scripts; i++) {
		fake_script *o = &f->scripts[i];
		bool same = argv ? (o->argv && argv_equal(o->argv, o->argc, argv)) : !o->argv;
		if (same) {
			script_clear(o);
			*o = s;
			pthread_mutex_unlock(&f->lock);
			return 0;
		}
	}
	fake_script *p = reallocarray(f->scripts, f->n_scripts + 1, sizeof(*p));
	if (!p) {
		pthread_mutex_unlock(&f->lock);
		script_clear(&s);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "fake script");
	}
	f->scripts = p;
	f->scripts[f->n_scripts++] = s;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

size_t airlock_fake_recorded_count(airlock_fake *f)
{
	pthread_mutex_lock(&f->lock);
	size_t n = f->n_records;
	pthread_mutex_unlock(&f->lock);
	return n;
}

const airlock_fake_record *airlock_fake_recorded(airlock_fake *f, size_t i)
{
	pthread_mutex_lock(&f->lock);
	const airlock_fake_record *r = i < f->n_records ? &f->records[i] : NULL;
	pthread_mutex_unlock(&f->lock);
	return r;
}

size_t airlock_fake_live_count(airlock_fake *f)
{
	pthread_mutex_lock(&f->lock);
	size_t n = f->n_envs;
	pthread_mutex_unlock(&f->lock);
	return n;
}

/* Caller holds the lock. */
static fake_env *env_find(airlock_fake *f, const char *id)
{
	for (size_t i = 0; i < f->n_envs; i++)
		if (strcmp(f->envs[i].environment_id, id) == 0)
			return &f->envs[i];
	return NULL;
}

static int fake_provision(void *ctx, const airlock_environment_spec *spec,
                          const airlock_environment_handle *handle, airlock_error *err)
{
	airlock_fake *f = ctx;
	/* The fake runs nothing, so it has no socket to make: a sandbox told
	 * of a bridge would find nothing at its path. */
	if (spec->bridge)
		return airlock_error_set(err, AIRLOCK_ERR_NOT_IMPLEMENTED, 0,
		                         "EnvironmentSpec.bridge: the fake mechanism makes no "
		                         "orchestration bridge socket (native and gvisor do); "
		                         "provision without a bridge");
	fake_env e = { 0 };
	memcpy(e.environment_id, handle->environment_id, sizeof(e.environment_id));
	e.tenant_id = strdup(spec->tenant_id);
	if (!e.tenant_id)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "fake provision");
	int r = airlock_workspace_memory_new(&e.ws, err);
	if (r < 0) {
		env_clear(&e);
		return r;
	}
	/* The workspace quota is modelled so a filler ends as DISK here too. */
	memws_set_limits(airlock_workspace_memory_state(e.ws), spec->limits.workspace_bytes,
	                 spec->limits.inodes_max);
	pthread_mutex_lock(&f->lock);
	fake_env *p = reallocarray(f->envs, f->n_envs + 1, sizeof(*p));
	if (!p) {
		pthread_mutex_unlock(&f->lock);
		env_clear(&e);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "fake provision");
	}
	f->envs = p;
	f->envs[f->n_envs++] = e;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static int copy_command(airlock_execution_command *dst, const airlock_execution_command *src)
{
	airlock_execution_command c = {
		.argc = src->argc, .timeout_seconds = src->timeout_seconds,
		.has_stdin = src->has_stdin, .stdin_len = src->stdin_len,
		.maximum_output_bytes = src->maximum_output_bytes,
	};
	c.argv = calloc(src->argc + 1, sizeof(char *));
	if (!c.argv)
		return -ENOMEM;
	for (size_t i = 0; i < src->argc; i++)
		if (!(c.argv[i] = strdup(src->argv[i]))) {
			airlock_execution_command_clear(&c);
			return -ENOMEM;
		}
	c.working_directory = strdup(src->working_directory);
	if (src->has_stdin)
		c.stdin_data = dup_bytes(src->stdin_data, src->stdin_len);
	if (!c.working_directory || (src->has_stdin && !c.stdin_data)) {
		airlock_execution_command_clear(&c);
		return -ENOMEM;
	}
	*dst = c;
	return 0;
}

/* Wait up to ms for the cancel token or the service's shutdown. */
static airlock_kill_reason wait_or_interrupt(airlock_fake *f, airlock_cancel *cancel, int64_t ms)
{
	int64_t end = util_monotonic_ms() + ms;
	for (;;) {
		if (airlock_cancel_fired(cancel))
			return AIRLOCK_KILL_CANCELLED;
		struct pollfd p[2] = { { .fd = f->shutdown_efd, .events = POLLIN },
			               { .fd = airlock_cancel_fd(cancel), .events = POLLIN } };
		int64_t left = end - util_monotonic_ms();
		if (poll(p, p[1].fd >= 0 ? 2 : 1, 0) > 0 && p[0].revents)
			return AIRLOCK_KILL_SERVICE_SHUTDOWN;
		if (left <= 0)
			return AIRLOCK_KILL_NONE;
		poll(p, p[1].fd >= 0 ? 2 : 1, (int)(left > 1000 ? 1000 : left));
	}
}

static int fake_execute(void *ctx, const airlock_environment_handle *handle,
                        const airlock_exec_request *req, airlock_execution_result *ret,
                        airlock_error *err)
{
	airlock_fake *f = ctx;
	const airlock_execution_command *cmd = req->command;
	int64_t start = util_monotonic_ms();

	pthread_mutex_lock(&f->lock);
	fake_env *env = env_find(f, handle->environment_id);
	if (!env || !util_streq0(env->tenant_id, handle->tenant_id)) {
		bool gone = !env;
		pthread_mutex_unlock(&f->lock);
		if (gone)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "environment %s is gone", handle->environment_id);
		return airlock_error_set(err, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
		                         "environment %s belongs to another tenant",
		                         handle->environment_id);
	}
	/* A reference, taken under the lock destroy removes the env with; the
	 * workspace's state is used below only inside workspace_call_enter's
	 * bracket, so a destroy meanwhile waits for those moments and never
	 * frees it under them (it did: execute and DELETE racing on one id
	 * crashed airlock serve). The simulated run time is outside both. */
	airlock_workspace *ws = airlock_workspace_ref(env->ws);

	/* Record first: the record is what was asked, whatever happens next. */
	airlock_fake_record rec = { .effective_timeout_ms = req->effective_timeout_ms };
	memcpy(rec.environment_id, handle->environment_id, sizeof(rec.environment_id));
	airlock_fake_record *rp = reallocarray(f->records, f->n_records + 1, sizeof(*rp));
	if (!rp || copy_command(&rec.command, cmd) < 0) {
		if (rp)
			f->records = rp;
		pthread_mutex_unlock(&f->lock);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "fake execute");
	}
	f->records = rp;
	f->records[f->n_records++] = rec;

	const fake_script *s = NULL, *dflt = NULL;
	for (size_t i = 0; i < f->n_scripts; i++) {
		if (!f->scripts[i].argv)
			dflt = &f->scripts[i];
		else if (argv_equal(f->scripts[i].argv, f->scripts[i].argc,
		                    (const char *const *)cmd->argv))
			s = &f->scripts[i];
	}
	static const airlock_fake_behaviour nothing = { 0 };
	/* A private copy: another thread may replace the script meanwhile. */
	fake_script run;
	int cr = script_copy(&run, NULL, s ? &s->b : dflt ? &dflt->b : &nothing);
	pthread_mutex_unlock(&f->lock);
	if (cr < 0) {
		airlock_workspace_release(ws);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "fake execute");
	}
	const airlock_fake_behaviour b = run.b;

	airlock_snapshot before = { 0 }, after = { 0 };
	util_buf out, errb;
	util_buf_init(&out, (size_t)cmd->maximum_output_bytes);
	util_buf_init(&errb, (size_t)cmd->maximum_output_bytes);
	airlock_kill_reason kill = AIRLOCK_KILL_NONE;

	bool held = false;
	int r = workspace_call_enter(ws, err);
	if (r < 0)
		goto out;
	held = true;
	airlock_memws *m = airlock_workspace_memory_state(ws);
	r = memws_snapshot(m, &before);
	if (r < 0)
		goto fail;

	/* The simulated process: its writes, its output, then its run time. */
	for (size_t i = 0; i < b.n_file_ops && kill == AIRLOCK_KILL_NONE; i++) {
		const airlock_fake_file_op *op = &b.file_ops[i];
		r = op->delete_file ? memws_sandbox_delete(m, op->path)
		                    : memws_sandbox_write(m, op->path, op->data, op->len);
		if (r == -ENOSPC)
			kill = AIRLOCK_KILL_DISK;
		else if (r < 0)
			goto fail;
	}
	workspace_call_leave(ws);
	held = false;
	r = 0;
	int t1 = util_buf_append(&out, b.stdout_data, b.stdout_len);
	int t2 = b.echo_stdin && cmd->has_stdin ? util_buf_append(&out, cmd->stdin_data, cmd->stdin_len)
	                                        : 0;
	int t3 = util_buf_append(&errb, b.stderr_data, b.stderr_len);
	if (t1 < 0 || t2 < 0 || t3 < 0) {
		r = -ENOMEM;
		goto fail;
	}
	ret->stdout_truncated = t1 == 1 || t2 == 1;
	ret->stderr_truncated = t3 == 1;
	/* The simulated process's output is produced before its run time, so
	 * an observer sees it while the command still "runs" (as it would of a
	 * real one), and exactly the bytes the result keeps. */
	if (req->on_output && out.len)
		req->on_output(req->output_arg, AIRLOCK_OUTPUT_STDOUT, out.data, out.len);
	if (req->on_output && errb.len)
		req->on_output(req->output_arg, AIRLOCK_OUTPUT_STDERR, errb.data, errb.len);
	if (kill == AIRLOCK_KILL_NONE && (ret->stdout_truncated || ret->stderr_truncated))
		kill = AIRLOCK_KILL_OUTPUT_LIMIT;
	if (kill == AIRLOCK_KILL_NONE && b.killed_by != AIRLOCK_KILL_NONE)
		kill = b.killed_by;

	if (kill == AIRLOCK_KILL_NONE) {
		/* The first deadline to fire decides the reason. */
		int64_t until_expiry = req->expires_at_ms - util_now_ms();
		int64_t wait = b.runs_for_ms;
		airlock_kill_reason on_deadline = AIRLOCK_KILL_NONE;
		if (req->effective_timeout_ms < wait) {
			wait = req->effective_timeout_ms;
			on_deadline = AIRLOCK_KILL_TIMEOUT;
		}
		if (until_expiry < wait) {
			wait = until_expiry > 0 ? until_expiry : 0;
			on_deadline = AIRLOCK_KILL_EXPIRED;
		}
		airlock_kill_reason interrupted = wait_or_interrupt(f, req->cancel, wait);
		kill = interrupted != AIRLOCK_KILL_NONE ? interrupted : on_deadline;
	}

	if (workspace_call_enter(ws, NULL) == 0) {
		held = true;
		r = memws_snapshot(m, &after);
		if (r < 0)
			goto fail;
		/* The in-memory workspace is bounded by its own limits: no budget. */
		r = snapshot_diff(&before, &after, (size_t)req->files_changed_max, UINT64_MAX, 0,
		                  memws_hash, m, ret, err);
		if (r < 0)
			goto out;
		workspace_call_leave(ws);
		held = false;
	} else {
		/* Destroyed under the command: it ends CANCELLED, as on every
		 * mechanism, and its workspace is gone with nothing to list. */
		kill = AIRLOCK_KILL_CANCELLED;
	}

	ret->killed_by = kill;
	ret->timed_out = kill == AIRLOCK_KILL_TIMEOUT;
	ret->has_exit_code = kill == AIRLOCK_KILL_NONE;
	ret->exit_code = ret->has_exit_code ? b.exit_code : 0;
	ret->stdout_data = util_buf_steal(&out, &ret->stdout_len);
	ret->stderr_data = util_buf_steal(&errb, &ret->stderr_len);
	if (!ret->stdout_data || !ret->stderr_data) {
		r = -ENOMEM;
		goto fail;
	}
	ret->duration_ms = util_monotonic_ms() - start;
	goto out;
fail:
	r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "fake execute");
out:
	if (held)
		workspace_call_leave(ws);
	airlock_workspace_release(ws);
	util_buf_clear(&out);
	util_buf_clear(&errb);
	snapshot_clear(&before);
	snapshot_clear(&after);
	script_clear(&run);
	return r;
}

static int fake_destroy(void *ctx, const char *environment_id, airlock_error *err)
{
	airlock_fake *f = ctx;
	pthread_mutex_lock(&f->lock);
	fake_env *e = env_find(f, environment_id);
	if (e) {
		/* Freeing the workspace drops every byte: erased, not unlinked. */
		env_clear(e);
		size_t idx = (size_t)(e - f->envs);
		memmove(e, e + 1, (f->n_envs - idx - 1) * sizeof(*e));
		f->n_envs--;
	}
	pthread_mutex_unlock(&f->lock);
	return 0;
}

/* The warm pool's claim: the fake runs nothing, so a sandbox is its name,
 * its tenant and its workspace; the first two are bound here (the
 * workspace is the one provision made, which nothing has touched: the core
 * lets no verb reach a pooled sandbox). */
static int fake_claim(void *ctx, const char *pool_id, const airlock_environment_spec *spec,
                      const airlock_environment_handle *handle, airlock_error *err)
{
	airlock_fake *f = ctx;
	if (spec->bridge)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "EnvironmentSpec.bridge: a pooled sandbox has none");
	char *t = strdup(spec->tenant_id);
	if (!t)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "fake claim");
	pthread_mutex_lock(&f->lock);
	fake_env *e = env_find(f, pool_id);
	bool ok = e && !env_find(f, handle->environment_id);
	if (ok) {
		memcpy(e->environment_id, handle->environment_id, sizeof(e->environment_id));
		free(e->tenant_id);
		e->tenant_id = t;
		t = NULL;
	}
	pthread_mutex_unlock(&f->lock);
	free(t);
	if (!ok)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "environment %s is not a pooled sandbox ready to claim",
		                         pool_id);
	return 0;
}

static int fake_workspace(void *ctx, const char *environment_id, airlock_workspace **ret,
                          airlock_error *err)
{
	airlock_fake *f = ctx;
	pthread_mutex_lock(&f->lock);
	fake_env *e = env_find(f, environment_id);
	/* A reference, taken under the lock destroy removes the env with. */
	airlock_workspace *ws = e ? airlock_workspace_ref(e->ws) : NULL;
	pthread_mutex_unlock(&f->lock);
	if (!ws)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "environment %s is gone", environment_id);
	*ret = ws;
	return 0;
}

static void fake_shutdown(void *ctx)
{
	airlock_fake *f = ctx;
	uint64_t one = 1;
	/* The eventfd stays readable: every waiting execute sees it. */
	ssize_t n = write(f->shutdown_efd, &one, sizeof(one));
	(void)n;
}

static const airlock_exec_ops fake_ops = {
	.version = AIRLOCK_EXEC_OPS_VERSION,
	.name = "fake",
	.provision = fake_provision,
	.execute = fake_execute,
	.destroy = fake_destroy,
	.workspace = fake_workspace,
	.free = fake_free,
	.shutdown = fake_shutdown,
	.claim = fake_claim,
};

const airlock_exec_ops *airlock_fake_ops(void)
{
	return &fake_ops;
}
