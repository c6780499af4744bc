/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock run's signals.
 *
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT are blocked from the start and read from a
 * signalfd by a thread of their own, so they arrive as events rather than
 * killing the process between two steps: the watcher asks the execution
 * service to stop (the command in flight ends with SERVICE_SHUTDOWN and its
 * partial output), and the main thread prints that result and destroys the
 * sandbox as on every other path. The mask is reset in every process the
 * service starts, so the command never inherits it.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli/run.h"
#include "util/cleanup.h"

static void *signal_watch(void *arg)
{
	run_signals *rs = arg;
	for (;;) {
		struct pollfd p[2] = { { .fd = rs->sfd, .events = POLLIN },
			               { .fd = rs->stop_efd, .events = POLLIN } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		struct signalfd_siginfo si;
		if (!(p[0].revents & POLLIN) || read(rs->sfd, &si, sizeof(si)) != sizeof(si))
			continue;
		pthread_mutex_lock(&rs->lock);
		bool first = rs->signo == 0;
		if (first)
			rs->signo = (int)si.ssi_signo;
		if (rs->exec)
			airlock_exec_shutdown(rs->exec);
		pthread_mutex_unlock(&rs->lock);
		if (first)
			fprintf(stderr, "airlock run: %s: ending the command (SERVICE_SHUTDOWN) and "
			                "destroying the sandbox\n", strsignal((int)si.ssi_signo));
	}
}

int signals_start(run_signals *rs)
{
	*rs = (run_signals){ .sfd = -1, .stop_efd = -1 };
	pthread_mutex_init(&rs->lock, NULL);
	/* SIGQUIT too: the quit key would kill us with no result. A signal
	 * whose disposition is SIG_IGN when we start (SIGHUP under nohup,
	 * SIGINT in a shell's background job) stays ignored: blocking it would
	 * queue it for the signalfd, which the caller asked not to happen. */
	static const int watched[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < ARRAY_SIZE(watched); i++) {
		struct sigaction cur;
		if (sigaction(watched[i], NULL, &cur) == 0 && cur.sa_handler == SIG_IGN)
			continue;
		sigaddset(&set, watched[i]);
	}
	/* Blocked before any thread exists, so every thread inherits it and
	 * none is chosen to die of a signal instead of the watcher reading it. */
	int e = pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (e != 0) {
		errno = e; /* the pthread calls return their error, errno is left alone */
		return -1;
	}
	rs->sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	rs->stop_efd = eventfd(0, EFD_CLOEXEC);
	if (rs->sfd < 0 || rs->stop_efd < 0)
		return -1;
	return 0;
}

/* The watcher itself, started after the egress proxy: the proxy's child
 * is forked while this process has one thread, so it holds no copy of a
 * lock another thread took, whatever it does before its exec. A signal
 * that comes before the watcher waits, blocked, and is read first. */
int signals_run(run_signals *rs)
{
	int e = pthread_create(&rs->thread, NULL, signal_watch, rs);
	if (e != 0) {
		errno = e;
		return -1;
	}
	rs->started = true;
	return 0;
}

/* Arm (exec) or disarm (NULL) the shutdown; a signal that came before the
 * service existed stops it at once. */
void signals_set_exec(run_signals *rs, airlock_exec *exec)
{
	pthread_mutex_lock(&rs->lock);
	rs->exec = exec;
	if (exec && rs->signo)
		airlock_exec_shutdown(exec);
	pthread_mutex_unlock(&rs->lock);
}

int signals_received(run_signals *rs)
{
	pthread_mutex_lock(&rs->lock);
	int s = rs->signo;
	pthread_mutex_unlock(&rs->lock);
	return s;
}

void signals_take_pending(run_signals *rs)
{
	struct signalfd_siginfo si;
	if (read(rs->sfd, &si, sizeof(si)) != sizeof(si))
		return;
	pthread_mutex_lock(&rs->lock);
	if (rs->signo == 0)
		rs->signo = (int)si.ssi_signo;
	pthread_mutex_unlock(&rs->lock);
}

/* The mask stays blocked: a signal after this is not acted on, and the
 * process is about to exit with the status already decided. */
void signals_stop(run_signals *rs)
{
	if (rs->started) {
		uint64_t one = 1;
		ssize_t w = write(rs->stop_efd, &one, sizeof(one));
		(void)w;
		pthread_join(rs->thread, NULL);
	}
	if (rs->sfd >= 0)
		close(rs->sfd);
	if (rs->stop_efd >= 0)
		close(rs->stop_efd);
	pthread_mutex_destroy(&rs->lock);
}
