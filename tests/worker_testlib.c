/* SPDX-License-Identifier: Apache-2.0 */
/* What the worker's suites share (worker_testlib.h). */
#include "worker_testlib.h"

#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "airlock/image_build.h"
#include "airlock/image_store.h"

#include "pg_server.h"
#include "unix_connect.h"

void wt_write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	fchmod(fd, mode);
	close(fd);
}

int wt_connect(const char *path)
{
	return unix_connect(path);
}

pid_t wt_start(const char *exe, char *const argv[], const char *log, const char *sock)
{
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		/* A test that stops at a failed assertion never reaches its
		 * stop: the program ends with the test's process. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		dup2(fd, 2);
		/* A clean environment: the service refuses to start with a
		 * credential-shaped name in its own (the test runner's carry
		 * some), and the programs read their settings from the file.
		 * The sanitizers' options pass, for the ASan build. */
		char *envp[8] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" };
		size_t n = 1;
		static const char *const keep[] = { "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS" };
		char buf[3][1024];
		for (size_t i = 0; i < 3; i++) {
			const char *v = getenv(keep[i]);
			if (v) {
				snprintf(buf[i], sizeof(buf[i]), "%s=%s", keep[i], v);
				envp[n++] = buf[i];
			}
		}
		envp[n] = NULL;
		execve(exe, argv, envp);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		int fd = wt_connect(sock);
		if (fd >= 0) {
			close(fd);
			return pid;
		}
		int st;
		cr_assert_eq(waitpid(pid, &st, WNOHANG), 0, "%s exited at start: %s", exe,
		             wt_read_log(log));
		usleep(10000);
	}
	cr_assert_fail("%s did not listen on %s within 5 s", exe, sock);
	return -1;
}

int wt_stop(pid_t pid, int sig)
{
	if (pid <= 0)
		return -1;
	kill(pid, sig);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void wt_down(pid_t worker, pid_t svc, const char *log, const char *dir)
{
	if (worker > 0)
		cr_expect_eq(wt_stop(worker, SIGTERM), 0, "the worker stops cleanly: %s",
		             wt_read_log(log));
	if (svc > 0)
		cr_expect_eq(wt_stop(svc, SIGTERM), 0, "the service stops cleanly");
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

/* The whole body of this thread's last answer (wt_last_body): a
 * thread-specific value whose destructor frees it when its thread ends,
 * so no thread of a test (a monitor, a background caller) leaves it to
 * LeakSanitizer. */
static pthread_key_t last_body_key;
static pthread_once_t last_body_once = PTHREAD_ONCE_INIT;

static void last_body_key_make(void)
{
	if (pthread_key_create(&last_body_key, free) != 0)
		abort();
}

static void last_body_set(char *body)
{
	pthread_once(&last_body_once, last_body_key_make);
	free(pthread_getspecific(last_body_key));
	if (pthread_setspecific(last_body_key, body) != 0)
		free(body);
}

const char *wt_last_body(void)
{
	pthread_once(&last_body_once, last_body_key_make);
	const char *b = pthread_getspecific(last_body_key);
	return b ? b : "";
}

void wt_last_body_free(void)
{
	last_body_set(NULL);
}

int wt_request_try(const char *sock, const char *method, const char *target, const char *token,
                   const char *body, int timeout_ms, wt_reply *ret, char *why, size_t why_size)
{
	memset(ret, 0, sizeof(*ret));
	int fd = wt_connect(sock);
	if (fd < 0) {
		snprintf(why, why_size, "connect %s: %s", sock, strerror(errno));
		return -1;
	}
	char head[1024];
	size_t blen = body ? strlen(body) : 0;
	int n = snprintf(head, sizeof(head),
	                 "%s %s HTTP/1.1\r\nHost: worker\r\nConnection: close\r\n%s%s%s"
	                 "Content-Length: %zu\r\n%s\r\n",
	                 method, target, token ? "Authorization: Bearer " : "", token ? token : "",
	                 token ? "\r\n" : "", blen, body ? "Content-Type: application/json\r\n" : "");
	/* send with MSG_NOSIGNAL: a server that answers before the body is
	 * all read (a 401, a 413) may close first, and a SIGPIPE would end
	 * the test instead of its assertion. */
	ssize_t k0 = send(fd, head, (size_t)n, MSG_NOSIGNAL);
	ssize_t k1 = blen ? send(fd, body, blen, MSG_NOSIGNAL) : 0;
	(void)k0;
	(void)k1;
	/* The whole answer, however long (at most 16 MiB: a tool's result
	 * with two excerpts is about 2 MiB). */
	size_t cap = 1 << 18, got = 0;
	char *buf = malloc(cap);
	if (!buf) {
		close(fd);
		snprintf(why, why_size, "no memory");
		return -1;
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, timeout_ms) != 1) {
			close(fd);
			free(buf);
			snprintf(why, why_size, "%s %s: no answer within %d ms", method, target,
			         timeout_ms);
			return -1;
		}
		if (got + 1 >= cap && cap < (16u << 20)) {
			char *nb = realloc(buf, cap * 2);
			if (nb) {
				buf = nb;
				cap *= 2;
			}
		}
		ssize_t k = read(fd, buf + got, cap - 1 - got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	buf[got] = 0;
	if (sscanf(buf, "HTTP/1.1 %d", &ret->status) != 1) {
		snprintf(why, why_size, "%s %s: no status line: %.200s", method, target, buf);
		free(buf);
		return -1;
	}
	const char *b = strstr(buf, "\r\n\r\n");
	if (b) {
		/* A body longer than ret->body keeps its head and its tail (a
		 * result's last members are at its end). */
		b += 4;
		size_t rlen = got - (size_t)(b - buf), room = sizeof(ret->body) - 1;
		last_body_set(strdup(b));
		ret->body_len = rlen;
		if (rlen <= room) {
			memcpy(ret->body, b, rlen);
			ret->body[rlen] = 0;
		} else {
			size_t half = (room - 5) / 2;
			memcpy(ret->body, b, half);
			memcpy(ret->body + half, "\n...\n", 5);
			memcpy(ret->body + half + 5, b + rlen - half, half);
			ret->body[2 * half + 5] = 0;
		}
	}
	free(buf);
	return 0;
}

void wt_request(const char *sock, const char *method, const char *target, const char *token,
                const char *body, int timeout_ms, wt_reply *ret)
{
	char why[512];
	if (wt_request_try(sock, method, target, token, body, timeout_ms, ret, why, sizeof(why)) < 0)
		cr_assert_fail("%s", why);
}

const char *wt_read_log(const char *path)
{
	static char text[1 << 20];
	text[0] = 0;
	FILE *fp = fopen(path, "r");
	if (!fp)
		return text;
	size_t n = fread(text, 1, sizeof(text) - 1, fp);
	text[n] = 0;
	fclose(fp);
	return text;
}

void wt_pg_settings(const char *dir, char *ret, size_t size)
{
	const char *why = getenv(PG_ENV_WHY);
	cr_assert_null(why, "the PostgreSQL test server did not start: %s", why);
	static unsigned seq;
	char schema[48], sql[96], conn[160], text[512];
	snprintf(schema, sizeof(schema), "w%d_%ld_%u", (int)getpid(), (long)time(NULL), seq++);
	PGconn *c = pg_admin();
	snprintf(sql, sizeof(sql), "CREATE SCHEMA %s", schema);
	PGresult *r = PQexec(c, sql);
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s", PQresultErrorMessage(r));
	PQclear(r);
	PQfinish(c);
	snprintf(conn, sizeof(conn), "%s/conn", dir);
	snprintf(text, sizeof(text),
	         "host=%s user=" PG_USER " dbname=postgres password=" PG_PASSWORD
	         " options='-c search_path=%s'\n",
	         getenv(PG_ENV_DIR), schema);
	wt_write_file(conn, text, 0600);
	snprintf(ret, size, "  database: postgresql\n  database_connection_file: %s\n", conn);
}

const char *wt_default_image(void)
{
	static char digest[80];
	airlock_image_store *st = NULL;
	airlock_error err = { 0 };
	digest[0] = 0;
	if (airlock_image_store_open("/var/lib/airlock/images", &st, &err) == 0) {
		if (airlock_image_find_default(st, digest, &err) <= 0)
			digest[0] = 0;
		airlock_image_store_free(st);
	}
	return digest;
}

long wt_service_live(const char *svc_sock, const char *token)
{
	wt_reply r;
	wt_request(svc_sock, "GET", "/v1/health", token, NULL, 5000, &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	const char *p = strstr(r.body, "\"live\":");
	cr_assert(p, "%s", r.body);
	return strtol(p + 7, NULL, 10);
}

void wt_image_settings(const char *dir, char *ret, size_t size)
{
	const char *d = wt_default_image();
	if (!*d) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		cr_assert_eq(system(cmd), 0);
		cr_skip_test("no default image in /var/lib/airlock/images (airlock image build)");
	}
	snprintf(ret, size, "  image: %s\n", d);
}
