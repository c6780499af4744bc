/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EXEC_BOXES_H
#define AIRLOCK_EXEC_BOXES_H

/*
 * The live sandboxes of one adapter, the same for every mechanism: their
 * ids, tenants and workspaces, the references that keep one alive while an
 * execute runs in it, the mark destroy leaves, and the count of executes in
 * flight that free waits for. A mechanism's sandbox struct has an exec_box
 * as its first member; what a sandbox is beyond that is the mechanism's.
 *
 * The rules every adapter keeps through it: a sandbox is found only while
 * it is in the list and not dead; destroy takes it out of the list (under
 * the list's lock, so a workspace reference is never taken on a freed
 * workspace) and whoever drops the last reference tears it down.
 *
 * A teardown whose step failed puts the sandbox back in the list, dead and
 * kept, holding what that step was to remove (the others ran): destroy
 * again retries only that, and the adapter's free tries once more and then
 * lets it go, to the mechanism's crash sweep at the next start. A retry,
 * not the sweep alone, because the sweep runs only when a service starts:
 * a long-lived service would hold the cgroup, the process or the host-id
 * slot of every failed teardown for its whole life, and the core, which
 * keeps its record of a sandbox whose destroy failed, would retry against
 * an adapter that no longer knows it.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "airlock/error.h"
#include "airlock/proxy.h"
#include "airlock/port/workspace.h"
#include "airlock/types.h"

typedef struct exec_box {
	char id[AIRLOCK_ENVIRONMENT_ID_MAX];
	char *tenant_id;
	airlock_workspace *ws; /* the sandbox's WorkspaceHandle */
	unsigned refs;         /* the list's reference + one per execute in flight */
	bool dead;             /* destroyed: no new execute may start */
	bool kept;             /* dead, back in the list: a teardown step failed */
	/* Orders "is it destroyed?" with starting a command: destroy takes it
	 * once after marking the box dead, so a start in progress has
	 * finished (its command dies of destroy's kill) and any later one
	 * sees the mark. exec_box_setup makes it, exec_box_clear frees it. */
	pthread_mutex_t start_lock;
} exec_box;

typedef struct exec_boxes {
	pthread_mutex_t lock;
	pthread_cond_t idle;
	exec_box **v;
	size_t n;
	unsigned executing;
} exec_boxes;

void exec_boxes_init(exec_boxes *l);
/* After exec_boxes_drain: the list is empty. */
void exec_boxes_fini(exec_boxes *l);

/* Fill b's id and tenant from a provision (refs 1: the list's). */
int exec_box_setup(exec_box *b, const char *environment_id, const char *tenant_id,
                   airlock_error *err);
void exec_box_clear(exec_box *b);

int exec_boxes_add(exec_boxes *l, exec_box *b, airlock_error *err);
size_t exec_boxes_count(exec_boxes *l);

/* The warm pool's claim (airlock_exec_ops.claim): the live box of pool_id,
 * which no execute has entered, is renamed new_id and given tenant_id
 * (*ret: the box, still the list's). The id is the box's name in the list
 * and nothing else; what a mechanism named after it when it provisioned
 * the box (a cgroup directory, a runtime's container) keeps the pool id,
 * which the crash sweep finds like any other. ExecutionRejected when
 * pool_id names no such box. */
int exec_boxes_rebind(exec_boxes *l, const char *pool_id, const char *new_id,
                      const char *tenant_id, exec_box **ret, airlock_error *err);

/* destroy: take id out of the list, marked dead; NULL when already gone.
 * A live box of id is taken before a kept one. The caller kills, then
 * drops the list's reference (exec_boxes_unref). */
exec_box *exec_boxes_remove(exec_boxes *l, const char *id);
/* Whether b was destroyed (it stays referenced by an execute in flight):
 * a command that dies because its sandbox was destroyed under it ends with
 * CANCELLED, never as if it had exited by itself. */
bool exec_box_destroyed(exec_boxes *l, const exec_box *b);
/* Drop a reference; true when it was the last: the caller tears down. */
bool exec_boxes_unref(exec_boxes *l, exec_box *b);

/* execute's start: the live box of the handle, referenced and counted as
 * executing; ExecutionRejected when it is gone, SandboxEscapeSuspected when
 * it is another tenant's. */
int exec_boxes_enter(exec_boxes *l, const airlock_environment_handle *h, exec_box **ret,
                     airlock_error *err);
/* execute's end: uncounted and unreferenced; true when that reference was
 * the last (the caller tears down). */
bool exec_boxes_leave(exec_boxes *l, exec_box *b);

/* The workspace port: a new reference to the live box's workspace. */
int exec_boxes_workspace(exec_boxes *l, const char *id, airlock_workspace **ret,
                         airlock_error *err);

/* free: wait until no execute runs, then hand over every box (the list is
 * emptied; the caller tears each down and frees the array). */
exec_box **exec_boxes_drain(exec_boxes *l, size_t *ret_n);

/* The part of a sandbox's end that is its mechanism's. */
typedef struct exec_box_ops {
	/* destroy's kill: end every process of b now, even with an execute
	 * in flight (its loop sees its command die and returns). */
	int (*kill)(void *mech, exec_box *b, airlock_error *err);
	/* Tear b down (its last reference is gone): 0 when every step
	 * succeeded. When a step fails every other step still runs, and the
	 * first failure's error (naming its step) is returned; b then holds
	 * what the failed steps were to remove, so a second call does only
	 * that. */
	int (*teardown)(void *mech, exec_box *b, airlock_error *err);
	/* Free b: after a teardown that succeeded, or for good (what a
	 * failed teardown left goes to the crash sweep). */
	void (*free)(exec_box *b);
} exec_box_ops;

/* A step of a teardown failed with step: the first failure (r still 0)
 * becomes the teardown's error, as the step said it (the core's wrapper
 * says the verb); a later one only counts. Returns the teardown's result so far. */
int exec_box_step_failed(int r, airlock_error *err, const airlock_error *step);

/* The teardown's first step when b is attached to the egress proxy
 * (*proxied): the proxy's copy of the listener keeps the sandbox's network
 * namespace alive, so it lets go first (a proxy that is gone holds
 * nothing). *proxied stays true when the detach fails, for the retry.
 * Returns the teardown's result so far, r given. */
int exec_box_detach(airlock_proxy *proxy, exec_box *b, bool *proxied, int r, airlock_error *err);

/* Release b, whose last reference is gone: torn down and freed, or, when
 * a step failed, back in the list, dead and kept, for destroy again or the
 * adapter's free (when even that cannot be, b is released for good: what
 * is left is the crash sweep's). 0 or the teardown's error. */
int exec_boxes_release(exec_boxes *l, exec_box *b, const exec_box_ops *ops, void *mech,
                       airlock_error *err);

/* The port's destroy, for every mechanism: take id out of the list,
 * marked dead, wait out a start in progress, kill, and release b if this
 * was its last reference (else the last execute does). A kept box (its
 * teardown failed before) has no command to kill: its release is retried.
 * 0 when already gone; else the kill's error, or the teardown's, and
 * then what is left of the sandbox stays in the list for a retry. */
int exec_boxes_destroy(exec_boxes *l, const char *id, const exec_box_ops *ops, void *mech,
                       airlock_error *err);

/* The port's free, its sandboxes' part: wait for the executes in flight,
 * then release every sandbox left (kept ones included), for good. */
void exec_boxes_release_all(exec_boxes *l, const exec_box_ops *ops, void *mech);

/* The port's shutdown: make the adapter's shutdown eventfd readable, for
 * good (every execute's loop polls it: SERVICE_SHUTDOWN). */
void exec_shutdown_signal(int shutdown_efd);

#endif
