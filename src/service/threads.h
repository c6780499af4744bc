/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_SERVICE_THREADS_H
#define AIRLOCK_SERVICE_THREADS_H

/*
 * The service's execute threads: a bounded pool the execute jobs run on
 * (job_execute.c), so an execute costs a wakeup of a waiting thread, not a
 * thread's creation, start, exit and join.
 *
 * The contract.
 *   - At most max works are outstanding: from a successful submit until
 *     the submitter's svc_threads_release. A submit past that is refused
 *     (-EBUSY) at once, never queued behind commands that may run for
 *     hours. The submitter releases a work only once its function has
 *     ended (job_execute.c waits for its job's done flag), so the bound
 *     counts works, never the moment a thread gets back to waiting: a
 *     client that runs executes one after another on a pool of one is
 *     never refused.
 *   - Threads are started on demand, at most max of them, and kept
 *     waiting once started (the next execute takes one without a start);
 *     a submit that needs a thread and cannot start one is refused with
 *     pthread_create's error and nothing queued.
 *   - fn runs once per work on one of the pool's threads, which then
 *     touches neither the work nor its arg (the submitter may free both
 *     as soon as fn has said it is done).
 *   - svc_threads_free joins every thread the pool started; a work still
 *     queued then runs first. Called after every submitter has released
 *     (the service frees it once its server core, and every connection
 *     thread with it, has stopped).
 * Thread-safe: any number of threads submit and release at once.
 */

#include <errno.h>
#include <stddef.h>

typedef struct svc_threads svc_threads;

typedef struct svc_work {
	void (*fn)(void *arg);
	void *arg;
	struct svc_work *next; /* the pool's, while queued */
} svc_work;

/* A pool of at most max threads (max >= 1); none started yet. 0 or
 * -ENOMEM. */
int svc_threads_new(unsigned max, svc_threads **ret);
/* 0: w->fn(w->arg) will run on a pool thread; w must live until then.
 * -EBUSY: max works outstanding; or pthread_create's error. */
int svc_threads_submit(svc_threads *t, svc_work *w);
/* One work that was submitted has ended: its slot is free again. */
void svc_threads_release(svc_threads *t);
/* The bound (for messages). */
unsigned svc_threads_max(const svc_threads *t);
void svc_threads_free(svc_threads *t);

#endif
