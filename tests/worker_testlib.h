/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_TESTS_WORKER_TESTLIB_H
#define AIRLOCK_TESTS_WORKER_TESTLIB_H

/*
 * What the worker's suites share: real programs (airlock-worker, airlock
 * serve) started as child processes with their stderr in a log file, and
 * a raw HTTP/1.1 client over a Unix socket.
 */

#include <stdbool.h>
#include <sys/types.h>

/* Write text to path with mode (asserts). */
void wt_write_file(const char *path, const char *text, mode_t mode);
/* A connected Unix socket, or -1. */
int wt_connect(const char *path);
/* Start exe with argv (argv[0] included, NULL-terminated), stderr
 * appended to log; wait until sock accepts (5 s; asserts). The child ends
 * with the test's process if the test stops early. */
pid_t wt_start(const char *exe, char *const argv[], const char *log, const char *sock);
/* SIGTERM (or sig), wait, and the exit status (128 + a signal). */
int wt_stop(pid_t pid, int sig);
/* A suite's stack down: the worker and the service (each when > 0)
 * stopped with SIGTERM, each expected to exit 0 (the log shown when the
 * worker does not), and dir removed. */
void wt_down(pid_t worker, pid_t svc, const char *log, const char *dir);

typedef struct wt_reply {
	int status;
	char body[65536]; /* a longer body: its head, "\n...\n", its tail */
	size_t body_len;  /* the whole body's length */
} wt_reply;
/* The whole body of the calling thread's last answer, however long (valid
 * until its next request). */
const char *wt_last_body(void);
/* Frees this thread's copy of its last body: a thread of a test that made
 * requests calls it before it returns (the copy is per thread). */
void wt_last_body_free(void);
/* One request on a new connection; the answer within timeout_ms: 0, or
 * -1 with why (for a thread other than the test's, where an assertion
 * cannot end the test). */
int wt_request_try(const char *sock, const char *method, const char *target, const char *token,
                   const char *body, int timeout_ms, wt_reply *ret, char *why, size_t why_size);
/* The same, asserting. */
void wt_request(const char *sock, const char *method, const char *target, const char *token,
                const char *body, int timeout_ms, wt_reply *ret);
/* A PostgreSQL connection file in dir for a new schema of the suite's
 * server (tests/pg_server.h): the settings lines that name it go into
 * ret ("  database: postgresql\n  database_connection_file: ...\n"). */
void wt_pg_settings(const char *dir, char *ret, size_t size);
/* The live sandboxes the service at svc_sock reports in its health
 * (asserts a 200). */
long wt_service_live(const char *svc_sock, const char *token);
/* The image store's default image digest, for native; "" when there is
 * none (the native tests then skip). */
const char *wt_default_image(void);
/* The settings line naming the store's default image for a native
 * sandbox ("  image: sha256:...\n") into ret; without one, dir is removed
 * and the test skipped. */
void wt_image_settings(const char *dir, char *ret, size_t size);
/* The file's text (at most 1 MiB, static buffer). */
const char *wt_read_log(const char *path);

#endif
