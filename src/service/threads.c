/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's execute threads (threads.h says the contract). A thread
 * takes works from one queue under one lock; a submit wakes a waiting
 * thread when one is there, else starts one while fewer than max run.
 *
 * Why a queued work is always taken: at most max works are outstanding
 * (the new one included), and every one in a function holds a thread. So
 * when all max threads are started and fewer are waiting than works are
 * queued, the threads neither waiting nor in a function (those whose work
 * has ended and that are on their way back to the queue) number at least
 * the difference, and each takes one. A work waits at most for another
 * work's thread to get back to the queue, never for a command to end.
 */
#include "service/threads.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "util/fault.h"

struct svc_threads {
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* a work queued, or the pool stopping */
	svc_work *head, *tail;   /* queued works, oldest first */
	unsigned queued;
	unsigned waiting;        /* threads waiting on cond */
	unsigned outstanding;    /* submitted, not yet released */
	unsigned started;
	unsigned max;
	bool stopping;
	pthread_t *threads;      /* max of them, started first */
};

static void *threads_main(void *arg)
{
	svc_threads *t = arg;
	pthread_mutex_lock(&t->lock);
	for (;;) {
		while (!t->head && !t->stopping) {
			t->waiting++;
			pthread_cond_wait(&t->cond, &t->lock);
			t->waiting--;
		}
		svc_work *w = t->head;
		if (!w)
			break; /* stopping, nothing queued */
		t->head = w->next;
		if (!t->head)
			t->tail = NULL;
		t->queued--;
		pthread_mutex_unlock(&t->lock);
		/* From fn's end the submitter may free w: read nothing of it
		 * after the call. */
		w->fn(w->arg);
		pthread_mutex_lock(&t->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int svc_threads_new(unsigned max, svc_threads **ret)
{
	if (max < 1)
		return -EINVAL;
	svc_threads *t = calloc(1, sizeof(*t));
	if (!t || !(t->threads = calloc(max, sizeof(*t->threads)))) {
		free(t);
		return -ENOMEM;
	}
	t->max = max;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	*ret = t;
	return 0;
}

int svc_threads_submit(svc_threads *t, svc_work *w)
{
	int r = 0;
	pthread_mutex_lock(&t->lock);
	if (t->stopping || t->outstanding >= t->max) {
		r = -EBUSY;
		goto out;
	}
	w->next = NULL;
	if (t->tail)
		t->tail->next = w;
	else
		t->head = w;
	t->tail = w;
	t->queued++;
	t->outstanding++;
	if (t->waiting >= t->queued) {
		pthread_cond_signal(&t->cond);
		goto out;
	}
	if (t->started < t->max) {
		/* The new thread waits for the lock, then takes a queued work. */
		int e = util_fault("service.threads.start") ?
		                EAGAIN :
		                pthread_create(&t->threads[t->started], NULL, threads_main, t);
		if (e == 0) {
			t->started++;
			goto out;
		}
		/* Nothing is sure to take it: out again. It is the queue's last
		 * (the lock was held since it went in). */
		svc_work **p = &t->head;
		while (*p != w)
			p = &(*p)->next;
		*p = NULL;
		t->tail = NULL;
		for (svc_work *q = t->head; q; q = q->next)
			t->tail = q;
		t->queued--;
		t->outstanding--;
		r = -e;
		goto out;
	}
	/* All started, too few waiting: a thread on its way back takes it
	 * (the file's comment says why one is); wake any that waits. */
	if (t->waiting > 0)
		pthread_cond_signal(&t->cond);
out:
	pthread_mutex_unlock(&t->lock);
	return r;
}

void svc_threads_release(svc_threads *t)
{
	pthread_mutex_lock(&t->lock);
	if (t->outstanding > 0)
		t->outstanding--;
	pthread_mutex_unlock(&t->lock);
}

unsigned svc_threads_max(const svc_threads *t)
{
	return t->max;
}

void svc_threads_free(svc_threads *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	t->stopping = true;
	pthread_cond_broadcast(&t->cond);
	unsigned n = t->started;
	pthread_mutex_unlock(&t->lock);
	for (unsigned i = 0; i < n; i++)
		pthread_join(t->threads[i], NULL);
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->cond);
	free(t->threads);
	free(t);
}
