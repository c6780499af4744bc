/* SPDX-License-Identifier: Apache-2.0 */
/* The suites' PostgreSQL server (pg_server.h): started and stopped once
 * for the suite by criterion's hooks (pg_server_ctl.c does both). */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdio.h>
#include <stdlib.h>

#include "pg_server.h"

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	const char *why = pg_server_start(false);
	if (why) {
		/* Told to the tests, which fail with it: the package is part of
		 * the set-up (scripts/setup.sh), so a missing server is a failure. */
		setenv(PG_ENV_WHY, why, 1);
		pg_server_stop();
	}
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	pg_server_stop();
}

static void quiet(void *arg, const char *message)
{
}

PGconn *pg_admin_db(const char *dbname)
{
	char ci[512];
	int w = snprintf(ci, sizeof(ci),
	                 "host=%s user=" PG_USER " dbname=%s password=" PG_PASSWORD,
	                 getenv(PG_ENV_DIR), dbname);
	cr_assert(w > 0 && (size_t)w < sizeof(ci));
	PGconn *c = PQconnectdb(ci);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "admin connection to %s: %s", dbname,
	             PQerrorMessage(c));
	PQsetNoticeProcessor(c, quiet, NULL);
	return c;
}

PGconn *pg_admin(void)
{
	return pg_admin_db("postgres");
}

