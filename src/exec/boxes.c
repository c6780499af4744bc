/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The live sandboxes of one adapter (boxes.h).
 */
#include "exec/boxes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "util/fault.h"
#include "util/util.h"

void exec_boxes_init(exec_boxes *l)
{
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->idle, NULL);
}

void exec_boxes_fini(exec_boxes *l)
{
	free(l->v);
	l->v = NULL;
	l->n = 0;
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->idle);
}

int exec_box_setup(exec_box *b, const char *environment_id, const char *tenant_id,
                   airlock_error *err)
{
	snprintf(b->id, sizeof(b->id), "%s", environment_id);
	b->refs = 1;
	pthread_mutex_init(&b->start_lock, NULL);
	b->tenant_id = strdup(tenant_id);
	if (!b->tenant_id)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "its tenant id");
	return 0;
}

void exec_box_clear(exec_box *b)
{
	/* A box exec_box_setup never saw holds a zeroed mutex, which is
	 * PTHREAD_MUTEX_INITIALIZER's (sandboxes are allocated zeroed). */
	pthread_mutex_destroy(&b->start_lock);
	free(b->tenant_id);
	b->tenant_id = NULL;
}

int exec_boxes_add(exec_boxes *l, exec_box *b, airlock_error *err)
{
	pthread_mutex_lock(&l->lock);
	exec_box **v = reallocarray(l->v, l->n + 1, sizeof(*v));
	if (v) {
		l->v = v;
		l->v[l->n++] = b;
	}
	pthread_mutex_unlock(&l->lock);
	if (!v)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "growing it");
	return 0;
}

size_t exec_boxes_count(exec_boxes *l)
{
	pthread_mutex_lock(&l->lock);
	size_t c = l->n;
	pthread_mutex_unlock(&l->lock);
	return c;
}

/* Caller holds l->lock. */
static exec_box *find_live(exec_boxes *l, const char *id)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i]->id, id) == 0 && !l->v[i]->dead)
			return l->v[i];
	return NULL;
}

bool exec_box_destroyed(exec_boxes *l, const exec_box *b)
{
	pthread_mutex_lock(&l->lock);
	bool dead = b->dead;
	pthread_mutex_unlock(&l->lock);
	return dead;
}

int exec_boxes_rebind(exec_boxes *l, const char *pool_id, const char *new_id,
                      const char *tenant_id, exec_box **ret, airlock_error *err)
{
	char *t = strdup(tenant_id);
	if (!t)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "its tenant id");
	pthread_mutex_lock(&l->lock);
	exec_box *b = find_live(l, pool_id);
	/* refs 1: the list's alone, so no execute ever entered it and none
	 * holds the old name (the core lets none in before the claim ends). */
	bool ok = b && b->refs == 1 && !find_live(l, new_id);
	if (ok) {
		snprintf(b->id, sizeof(b->id), "%s", new_id);
		free(b->tenant_id);
		b->tenant_id = t;
		t = NULL;
		*ret = b;
	}
	pthread_mutex_unlock(&l->lock);
	free(t);
	if (!ok)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "environment %s is not a pooled sandbox ready to claim",
		                         pool_id);
	return 0;
}

exec_box *exec_boxes_remove(exec_boxes *l, const char *id)
{
	pthread_mutex_lock(&l->lock);
	size_t at = l->n;
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i]->id, id) == 0 && (at == l->n || !l->v[i]->dead))
			at = i;
	exec_box *b = at < l->n ? l->v[at] : NULL;
	if (b) {
		memmove(&l->v[at], &l->v[at + 1], (l->n - at - 1) * sizeof(*l->v));
		l->n--;
		b->dead = true;
	}
	pthread_mutex_unlock(&l->lock);
	return b;
}

bool exec_boxes_unref(exec_boxes *l, exec_box *b)
{
	pthread_mutex_lock(&l->lock);
	bool last = --b->refs == 0;
	pthread_mutex_unlock(&l->lock);
	return last;
}

int exec_boxes_enter(exec_boxes *l, const airlock_environment_handle *h, exec_box **ret,
                     airlock_error *err)
{
	pthread_mutex_lock(&l->lock);
	exec_box *b = find_live(l, h->environment_id);
	int r = 0;
	if (!b)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0, "environment %s is gone",
		                      h->environment_id);
	else if (!util_streq0(b->tenant_id, h->tenant_id))
		r = airlock_error_set(err, AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED, 0,
		                      "environment %s belongs to another tenant", h->environment_id);
	if (b && r == 0) {
		b->refs++;
		l->executing++;
		*ret = b;
	}
	pthread_mutex_unlock(&l->lock);
	return r;
}

bool exec_boxes_leave(exec_boxes *l, exec_box *b)
{
	pthread_mutex_lock(&l->lock);
	if (--l->executing == 0)
		pthread_cond_broadcast(&l->idle);
	bool last = --b->refs == 0;
	pthread_mutex_unlock(&l->lock);
	return last;
}

int exec_boxes_workspace(exec_boxes *l, const char *id, airlock_workspace **ret,
                         airlock_error *err)
{
	/* Taken under the lock destroy takes the box out of the list with, so
	 * it is never taken on a freed workspace. */
	pthread_mutex_lock(&l->lock);
	exec_box *b = find_live(l, id);
	airlock_workspace *ws = b ? airlock_workspace_ref(b->ws) : NULL;
	pthread_mutex_unlock(&l->lock);
	if (!ws)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0, "environment %s is gone",
		                         id);
	*ret = ws;
	return 0;
}

exec_box **exec_boxes_drain(exec_boxes *l, size_t *ret_n)
{
	pthread_mutex_lock(&l->lock);
	while (l->executing > 0)
		pthread_cond_wait(&l->idle, &l->lock);
	exec_box **v = l->v;
	*ret_n = l->n;
	l->v = NULL;
	l->n = 0;
	pthread_mutex_unlock(&l->lock);
	return v;
}

int exec_boxes_destroy(exec_boxes *l, const char *id, const exec_box_ops *ops, void *mech,
                       airlock_error *err)
{
	exec_box *b = exec_boxes_remove(l, id);
	if (!b)
		return 0; /* already gone */
	int r = 0;
	if (!b->kept) {
		/* Marked again under the start lock, where a start reads it: a
		 * start in progress has finished (its command dies of the kill
		 * below) and any later one sees the mark. */
		pthread_mutex_lock(&b->start_lock);
		b->dead = true;
		pthread_mutex_unlock(&b->start_lock);
		r = util_fault("destroy.kill") ?
		            airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO, "the kill") :
		            ops->kill(mech, b, err);
	}
	if (exec_boxes_unref(l, b)) {
		airlock_error scratch;
		int t = exec_boxes_release(l, b, ops, mech, r == 0 ? err : &scratch);
		if (r == 0)
			r = t;
	}
	return r;
}

int exec_box_step_failed(int r, airlock_error *err, const airlock_error *step)
{
	if (r < 0)
		return r;
	/* Said as the step said it: the core's wrapper puts "destroy
	 * (MECHANISM): " above it, once. */
	*err = *step;
	return airlock_errcode(step->cls);
}

int exec_box_detach(airlock_proxy *proxy, exec_box *b, bool *proxied, int r, airlock_error *err)
{
	if (!*proxied)
		return r;
	airlock_error step = { 0 };
	int t = util_fault("teardown.proxy") ?
	                airlock_error_set(&step, AIRLOCK_ERR_SYSTEM, EIO, "the egress proxy's detach") :
	                airlock_proxy_detach(proxy, b->id, &step);
	/* A proxy found dead was killed: it holds nothing of b, and a retry
	 * could never succeed. */
	if (t < 0 && !airlock_proxy_dead(proxy))
		return exec_box_step_failed(r, err, &step);
	*proxied = false;
	return r;
}

/* Tear b down and free it; when a step failed, free it only if final
 * (else it is kept for a retry). */
static int box_release(const exec_box_ops *ops, void *mech, exec_box *b, bool final,
                       airlock_error *err)
{
	int r = ops->teardown(mech, b, err);
	if (r == 0 || final)
		ops->free(b);
	return r;
}

int exec_boxes_release(exec_boxes *l, exec_box *b, const exec_box_ops *ops, void *mech,
                       airlock_error *err)
{
	int r = box_release(ops, mech, b, false, err);
	if (r == 0)
		return 0;
	pthread_mutex_lock(&l->lock);
	b->refs = 1;
	b->dead = b->kept = true;
	exec_box **v = reallocarray(l->v, l->n + 1, sizeof(*v));
	if (v) {
		l->v = v;
		l->v[l->n++] = b;
	}
	pthread_mutex_unlock(&l->lock);
	if (!v) {
		airlock_error scratch;
		box_release(ops, mech, b, true, &scratch);
	}
	return r;
}

void exec_boxes_release_all(exec_boxes *l, const exec_box_ops *ops, void *mech)
{
	size_t n = 0;
	exec_box **v = exec_boxes_drain(l, &n);
	for (size_t i = 0; i < n; i++) {
		airlock_error scratch;
		box_release(ops, mech, v[i], true, &scratch);
	}
	free(v);
}

void exec_shutdown_signal(int shutdown_efd)
{
	if (shutdown_efd < 0)
		return;
	uint64_t one = 1;
	ssize_t w = write(shutdown_efd, &one, sizeof(one));
	(void)w;
}
