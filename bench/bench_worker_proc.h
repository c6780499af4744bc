/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_BENCH_WORKER_PROC_H
#define AIRLOCK_BENCH_WORKER_PROC_H

/*
 * What the worker benchmarks share (bench_worker_leases.c,
 * bench_worker_tool.c, bench_worker_orphans.c): the real programs
 * (airlock-worker, `airlock serve`) found beside the benchmark or named by
 * an environment variable, started as child processes with a clean
 * environment and their stderr in a log file, and a keep-alive HTTP/1.1
 * client over a Unix socket. Each benchmark sets bw_prog to its name, which
 * prefixes its messages.
 */

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/image_build.h"
#include "airlock/image_store.h"
#include "util/util.h"

#include "../tests/unix_connect.h"

static const char *bw_prog;

/* A program the benchmark starts: the path in the environment variable
 * env, else NAME built beside the benchmark (../NAME from bench/). NULL
 * when neither can be made. */
static inline const char *bw_program(const char *env, const char *name, char *buf, size_t size)
{
	const char *v = getenv(env);
	if (v && *v)
		return v;
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return NULL;
	self[n] = 0;
	snprintf(buf, size, "%s/../%s", dirname(self), name);
	return buf;
}

static inline int bw_write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	int r = util_write_all(fd, text, strlen(text));
	close(fd);
	return r;
}

/* prog with argv (argv[0] included) in an environment of PATH alone (the
 * service refuses credential-shaped names in its environment, and the
 * worker builds a sandbox's from its own), stdout and stderr appended to log; waits
 * until sock accepts (10 s). The child gets SIGTERM when this process
 * dies. The pid, or -1 (said on stderr). */
static inline pid_t bw_start(const char *prog, char *const argv[], const char *log,
                             const char *sock)
{
	static char *const clean_env[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
		                           "/usr/bin:/sbin:/bin",
		                           NULL };
	if (!prog || access(prog, X_OK) < 0) {
		fprintf(stderr, "%s: no program at %s\n", bw_prog, prog ? prog : "?");
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execve(prog, argv, clean_env);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		int fd = unix_connect(sock);
		if (fd >= 0) {
			close(fd);
			return pid;
		}
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			fprintf(stderr, "%s: %s exited at start (its log: %s)\n", bw_prog, argv[0], log);
			return -1;
		}
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	fprintf(stderr, "%s: %s did not listen on %s within 10 s\n", bw_prog, argv[0], sock);
	return -1;
}

/* Send sig to pid and wait: its exit status, or 128 + the signal that
 * ended it. */
static inline int bw_stop(pid_t pid, int sig)
{
	if (pid <= 0)
		return 0;
	kill(pid, sig);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* An answer the server does not finish within this is a failure. */
#define BW_IO_TIMEOUT_MS 10000

/* One answer into buf (its head and its Content-Length body, or none for
 * a 204): NULL, or what went wrong. *ret_body points into buf. */
static inline const char *bw_read_answer(int fd, char *buf, size_t size, int *ret_status,
                                         const char **ret_body, bool *ret_close)
{
	size_t got = 0;
	const char *body = NULL;
	size_t need = 0;
	while (!body || got < need) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = poll(&p, 1, BW_IO_TIMEOUT_MS);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != 1)
			return "no answer within the timeout";
		if (got + 1 >= size)
			return "an answer larger than the buffer";
		ssize_t k = read(fd, buf + got, size - 1 - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return "the connection failed";
		if (k == 0)
			return "the server closed the connection before an answer";
		got += (size_t)k;
		buf[got] = 0;
		if (body)
			continue;
		char *e = strstr(buf, "\r\n\r\n");
		if (!e)
			continue;
		body = e + 4;
		if (sscanf(buf, "HTTP/1.1 %d", ret_status) != 1)
			return "an answer without a status line";
		const char *cl = strcasestr(buf, "\r\nContent-Length:");
		if (cl && cl < e)
			need = (size_t)(body - buf) + strtoul(cl + 17, NULL, 10);
		else if (*ret_status == 204)
			need = (size_t)(body - buf);
		else
			return "an answer without a Content-Length";
		const char *conn = strcasestr(buf, "\r\nConnection: close");
		*ret_close = conn && conn < e;
	}
	*ret_body = body;
	return NULL;
}

/* A keep-alive connection to a Unix socket: a new one is made (outside
 * any timing the caller does around bw_call's exchange) when there is
 * none, and counted. */
typedef struct bw_conn {
	const char *sock;
	int fd;
	int64_t connects;
} bw_conn;

static inline void bw_conn_close(bw_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static inline int bw_conn_ready(bw_conn *c)
{
	if (c->fd >= 0)
		return 0;
	c->fd = unix_connect(c->sock);
	if (c->fd < 0)
		return -1;
	c->connects++;
	return 0;
}

/* One request on c (connected first when it is not): the status, the
 * body in buf; NULL, or what went wrong. token: a bearer token, or NULL.
 * A connection the server ends after its answer is closed here; the next
 * call makes another. */
static inline const char *bw_call(bw_conn *c, const char *method, const char *target,
                                  const char *token, const char *body, int *ret_status,
                                  const char **ret_body, char *buf, size_t size)
{
	char head[1024];
	if (bw_conn_ready(c) < 0)
		return "connect failed";
	size_t blen = body ? strlen(body) : 0;
	int n = snprintf(head, sizeof(head),
	                 "%s %s HTTP/1.1\r\nHost: airlock\r\n%s%s%sContent-Type: "
	                 "application/json\r\nContent-Length: %zu\r\n\r\n",
	                 method, target, token ? "Authorization: Bearer " : "", token ? token : "",
	                 token ? "\r\n" : "", blen);
	if (n < 0 || (size_t)n >= sizeof(head))
		return "a request head too long";
	bool closing = false;
	const char *why = NULL;
	if (util_write_all(c->fd, head, (size_t)n) < 0 ||
	    (blen && util_write_all(c->fd, body, blen) < 0))
		why = "the request could not be written";
	else
		why = bw_read_answer(c->fd, buf, size, ret_status, ret_body, &closing);
	if (why || closing)
		bw_conn_close(c);
	return why;
}

/* bw_call, whose answer must be want with has in its body (NULL:
 * anything): 0, or -1 (said on stderr). The body stays in buf. */
static inline int bw_expect(bw_conn *c, const char *method, const char *target,
                            const char *token, const char *body, int want, const char *has,
                            char *buf, size_t size)
{
	int status = 0;
	const char *answer = "";
	const char *why = bw_call(c, method, target, token, body, &status, &answer, buf, size);
	if (why) {
		fprintf(stderr, "%s: %s %s: %s\n", bw_prog, method, target, why);
		return -1;
	}
	if (status != want || (has && !strstr(answer, has))) {
		fprintf(stderr, "%s: %s %s: %d, want %d: %.300s\n", bw_prog, method, target, status,
		        want, answer);
		return -1;
	}
	return 0;
}

/* A directory of the benchmark's under $TMPDIR (default /tmp): 0, or -1
 * (said). */
static inline int bw_make_dir(char *buf, size_t size, const char *what)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(buf, size, "%s/airlock-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", what);
	if (!mkdtemp(buf)) {
		fprintf(stderr, "%s: mkdtemp %s: %s\n", bw_prog, buf, strerror(errno));
		buf[0] = 0;
		return -1;
	}
	return 0;
}

/* The default image of the store (AIRLOCK_BENCH_IMAGE_STORE, else
 * /var/lib/airlock/images) into digest: 1 when there is one, else 0. */
static inline int bw_default_image(char *digest)
{
	const char *dir = getenv("AIRLOCK_BENCH_IMAGE_STORE");
	airlock_image_store *st = NULL;
	airlock_error err = { 0 };
	digest[0] = 0;
	if (airlock_image_store_open(dir && *dir ? dir : "/var/lib/airlock/images", &st, &err) < 0)
		return 0;
	int r = airlock_image_find_default(st, digest, &err);
	airlock_image_store_free(st);
	return r > 0;
}

/* SIGTERM to a program the benchmark started, which must exit 0: false
 * (said) when it did not. */
static inline bool bw_stop_clean(pid_t pid, const char *what)
{
	if (pid <= 0 || bw_stop(pid, SIGTERM) == 0)
		return true;
	fprintf(stderr, "%s: %s did not exit 0 on SIGTERM\n", bw_prog, what);
	return false;
}

/* The benchmark's directory removed, and the programs' log with it unless
 * the run failed (it then says why, and where it is). false when the
 * directory could not be removed. */
static inline bool bw_remove(const char *dir, const char *log, bool failed)
{
	bool ok = true;
	if (dir[0]) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		ok = system(cmd) == 0;
	}
	if (failed || !ok)
		fprintf(stderr, "%s: the programs' log: %s\n", bw_prog, log);
	else
		unlink(log);
	return ok;
}

#endif
