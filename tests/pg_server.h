/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_TESTS_PG_SERVER_H
#define AIRLOCK_TESTS_PG_SERVER_H

/*
 * A real PostgreSQL server for the suites that need one (test_worker_db,
 * test_worker_api): started once per suite by a criterion hook in
 * pg_server.c (initdb and pg_ctl from Debian's postgresql package, as the
 * postgres user, into a temporary directory with its Unix socket and no
 * TCP), stopped with pg_ctl stop -m fast and removed when the suite ends,
 * whatever the tests did. The tests read its directory from PG_ENV_DIR,
 * or why it did not start from PG_ENV_WHY (and fail with it: the package
 * is part of the set-up, scripts/setup.sh). The start and the stop
 * (pg_server_ctl.c) need no criterion: bench_worker_leases uses them too.
 */

#include <libpq-fe.h>
#include <stdbool.h>

/* The superuser's password on the test server: a client must send it
 * (scram-sha-256 on the socket), so a wrong one is a real refusal. */
#define PG_PASSWORD "Pw-7f3a9c1e5b2d4f60"
#define PG_USER "airlock"
#define PG_ENV_DIR "AIRLOCK_TEST_PG_DIR"
#define PG_ENV_WHY "AIRLOCK_TEST_PG_WHY"

/* Run argv (found on PATH, its stdout to /dev/null): its exit status, -1
 * when it could not start or did not exit. */
int pg_run(char *const argv[]);

/* Start the server (root: it runs as the postgres user) and set
 * PG_ENV_DIR to its directory: NULL, or why it did not start. durable
 * keeps PostgreSQL's fsync on (a benchmark's commits cost what a
 * production server's do); otherwise fsync is off. The stop is registered
 * with atexit and on SIGTERM and SIGINT. */
const char *pg_server_start(bool durable);
/* Stop it (pg_ctl stop -m fast) and remove its directory; idempotent. */
void pg_server_stop(void);

/* A connection as the superuser to the database "postgres" (asserts;
 * pg_server.c, with criterion). */
PGconn *pg_admin(void);
/* The same to another database of the server. */
PGconn *pg_admin_db(const char *dbname);

#endif
