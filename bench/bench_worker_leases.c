/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lease renewals per second one worker sustains, on SQLite and on
 * PostgreSQL, side by side in one run (docs/worker-db.md,
 * docs/worker-api.md). A renewal is a claim at the run's current epoch;
 * every one must come back "renewed". Three ways, each on both databases:
 *
 *   db, 1 handle     worker_db_claim on one handle from one thread, round
 *                    robin over RUNS runs: the database layer alone, in the
 *                    shape the worker uses it (one handle, its calls
 *                    serialized by the wrapper's lock);
 *   db, T handles    PostgreSQL only: the same from THREADS threads, each on
 *                    a handle of its own over the same database and its
 *                    share of the runs: what more connections would give.
 *                    Not SQLite: it has one writer at a time, and handles
 *                    waiting for its lock are woken by busy_timeout's
 *                    sleeps, not in turn, so under this load one of them
 *                    can wait past the 5 s timeout and fail;
 *   api              PUT /v1/runs/{id}/lease to the real airlock-worker
 *                    (auth_mode dev, a Unix socket, its log on tmpfs)
 *                    from THREADS client threads, each on a keep-alive
 *                    connection (a fresh one every CONNECTION_MS),
 *                    renewing its share of the RUNS runs.
 *
 * SQLite: a temporary state directory under $TMPDIR (default /tmp): the
 * file system it is on sets what a commit's fsync costs. PostgreSQL: a
 * server this program starts (tests/pg_server_ctl.c, as the suites do, but
 * with fsync on: PostgreSQL's defaults otherwise, a Unix socket, no TCP),
 * stopped at the end; the db side and the worker each have a schema.
 *
 * Each figure is measured in ROUNDS rounds of SECONDS/ROUNDS, the two
 * databases alternating which goes first. The aims (the issue): 5,000
 * renewals/s on SQLite and 2,000/s on PostgreSQL for one worker (the api
 * figure). It prints renewals/s, p50 and p99 of one renewal and
 * renewals/s ÷ aim, and asserts no time; it exits 1 when a renewal failed
 * or was not "renewed". Without root or the postgresql package it prints
 * SQLite's figures and exits 77 with the reason.
 *
 *   bench_worker_leases [seconds [runs [threads]]]   (default 6, 64, 8)
 *
 * AIRLOCK_BENCH_WORKER names the airlock-worker program (default: the one
 * built beside this benchmark, ../airlock-worker); it runs with PATH alone
 * in its environment (bench_worker_proc.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"
#include "worker/db.h"

#include "../tests/pg_server.h"
#include "../tests/unix_connect.h"
#include "bench_util.h"
#include "bench_worker_proc.h"

#define SECONDS_DEFAULT 6.0
#define RUNS_DEFAULT 64
#define THREADS_DEFAULT 8
#define THREADS_MAX 64
#define RUNS_MAX 4096
#define ROUNDS 2
#define EPOCH 1
/* A renewal's TTL alternates between these on each pass over a thread's
 * runs, so every renewal changes its row even when two of one run fall in
 * the same millisecond of the clock: SQLite writes nothing for an UPDATE
 * that leaves a row's bytes as they were (and so syncs nothing), which
 * would count renewals no worker ever makes (a run renews every few
 * seconds, never twice in a millisecond). */
#define TTL_SECONDS 600
#define TTL_SECONDS_ALT 601
/* auth_mode dev: every request is this tenant; the db side uses it too. */
#define TENANT "dev"
#define AIM_SQLITE 5000.0
#define AIM_PG 2000.0
/* Latency samples kept per thread and round (the first ones: a round of
 * a few seconds at a renewal every 20 us or more holds fewer). */
#define SAMPLES_MAX 100000
/* A client's connection is replaced after this long, as a platform's pool
 * recycles its connections; the connects are counted in the wall time,
 * and printed. */
#define CONNECTION_MS 1000

enum { SIDE_SQLITE, SIDE_PG, SIDE__MAX };
enum { KIND_DB1, KIND_DBN, KIND_API, KIND__MAX };

static const char *side_name[SIDE__MAX] = { "sqlite", "postgresql" };
static const double side_aim[SIDE__MAX] = { AIM_SQLITE, AIM_PG };

typedef struct side {
	bool up;
	char sqlite_dir[64];   /* the db side's state directory (SQLite) */
	char db_conninfo[512]; /* the db side's connection string (PostgreSQL) */
	char dir[64];          /* the worker's directory: config, socket, state */
	char sock[128];
	char log[96];          /* its stderr (tmpfs) */
	pid_t worker;
	worker_db *handles[THREADS_MAX];
} side;

/* One figure: every round's renewals and samples. */
typedef struct figure {
	int64_t renewals;
	int64_t connections;
	int64_t ns; /* the rounds' wall time */
	int64_t *lat;
	size_t nlat, cap;
} figure;

static size_t n_runs = RUNS_DEFAULT, n_threads = THREADS_DEFAULT;
static bool failed;

/* ---- one load thread ---------------------------------------------------------- */

typedef struct load {
	worker_db *db;    /* db kinds */
	const char *sock; /* api */
	size_t first, step;
	int64_t pass; /* passes over its runs: the TTL's alternation */
	pthread_barrier_t *start;
	int64_t duration_ns;
	int64_t renewals;
	int64_t connections; /* api: the connections it opened */
	int64_t *lat;
	size_t nlat;
	int errors;
	char first_error[300];
} load;

static void load_error(load *l, const char *what, const char *detail)
{
	if (l->errors++ == 0)
		snprintf(l->first_error, sizeof(l->first_error), "%s%.250s", what, detail);
}

static void run_id(size_t i, char *buf, size_t size)
{
	snprintf(buf, size, "bench-run-%04zu", i);
}

static int64_t load_ttl(const load *l)
{
	return l->pass % 2 ? TTL_SECONDS_ALT : TTL_SECONDS;
}

static void *load_db(void *arg)
{
	load *l = arg;
	pthread_barrier_wait(l->start);
	int64_t end = bench_now_ns() + l->duration_ns;
	size_t i = l->first;
	while (l->errors == 0) {
		int64_t t0 = bench_now_ns();
		if (t0 >= end)
			break;
		char run[32];
		run_id(i, run, sizeof(run));
		worker_db_claim_request req = { .run_id = run, .tenant_id = TENANT, .epoch = EPOCH,
			                        .ttl_seconds = load_ttl(l), .now_ms = util_now_ms() };
		worker_db_claim_result res;
		airlock_error err = { 0 };
		if (worker_db_claim(l->db, &req, &res, &err) < 0)
			load_error(l, "claim: ", err.message);
		else if (res.outcome != WORKER_DB_CLAIM_RENEWED)
			load_error(l, "claim: not renewed but ",
			           worker_db_claim_outcome_name(res.outcome));
		if (l->nlat < SAMPLES_MAX)
			l->lat[l->nlat++] = bench_now_ns() - t0;
		l->renewals++;
		i += l->step;
		if (i >= n_runs) {
			i = l->first;
			l->pass++;
		}
	}
	return NULL;
}

/* ---- a keep-alive HTTP/1.1 client over the worker's Unix socket --------------- */

/* PUT one run's lease at EPOCH on fd: 0 when the answer is 200 with the
 * outcome want, else -1 with why. *ret_close: the worker ends the
 * connection after this answer. */
static int api_put(int fd, const char *run, int64_t ttl, const char *want, bool *ret_close,
                   char *why, size_t why_size)
{
	char req[512], buf[16384], body[128];
	int blen = snprintf(body, sizeof(body),
	                    "{\"tenant_id\":\"%s\",\"epoch\":%d,\"ttl_seconds\":%lld}", TENANT,
	                    EPOCH, (long long)ttl);
	int n = snprintf(req, sizeof(req),
	                 "PUT /v1/runs/%s/lease HTTP/1.1\r\nHost: worker\r\n"
	                 "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
	                 run, blen, body);
	int status = 0;
	const char *answer = NULL;
	const char *failed_how =
		util_write_all(fd, req, (size_t)n) < 0
			? "the request could not be written"
			: bw_read_answer(fd, buf, sizeof(buf), &status, &answer, ret_close);
	if (failed_how) {
		snprintf(why, why_size, "%s: %s", run, failed_how);
		return -1;
	}
	char outcome[64];
	snprintf(outcome, sizeof(outcome), "\"outcome\":\"%s\"", want);
	if (status != 200 || !strstr(buf, outcome)) {
		snprintf(why, why_size, "%s: not %s: %.200s", run, want, buf);
		return -1;
	}
	return 0;
}

static void *load_api(void *arg)
{
	load *l = arg;
	pthread_barrier_wait(l->start);
	int64_t end = bench_now_ns() + l->duration_ns;
	int64_t connected = 0;
	size_t i = l->first;
	int fd = -1;
	while (l->errors == 0) {
		if (fd < 0 || bench_now_ns() - connected >= (int64_t)CONNECTION_MS * 1000000) {
			if (fd >= 0)
				close(fd);
			fd = unix_connect(l->sock);
			connected = bench_now_ns();
			l->connections++;
			if (fd < 0) {
				load_error(l, "connect ", l->sock);
				break;
			}
		}
		int64_t t0 = bench_now_ns();
		if (t0 >= end)
			break;
		char run[32], why[300];
		run_id(i, run, sizeof(run));
		bool closing = false;
		if (api_put(fd, run, load_ttl(l), "renewed", &closing, why, sizeof(why)) < 0) {
			load_error(l, "", why);
			break;
		}
		if (l->nlat < SAMPLES_MAX)
			l->lat[l->nlat++] = bench_now_ns() - t0;
		l->renewals++;
		/* A connection the worker ends would add a connect to every
		 * renewal after it: the figure would not be keep-alive's. */
		if (closing) {
			load_error(l, "the worker closed a keep-alive connection", "");
			break;
		}
		i += l->step;
		if (i >= n_runs) {
			i = l->first;
			l->pass++;
		}
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* ---- one measurement ------------------------------------------------------------ */

static side sides[SIDE__MAX];

/* kind on side for seconds, added to fig: 0, or -1 when a renewal failed. */
static int measure(int si, int kind, double seconds, figure *fig)
{
	side *s = &sides[si];
	size_t nt = kind == KIND_DB1 ? 1 : n_threads;
	load loads[THREADS_MAX];
	pthread_t tids[THREADS_MAX];
	pthread_barrier_t start;
	memset(loads, 0, sizeof(loads));
	pthread_barrier_init(&start, NULL, (unsigned)nt + 1);
	for (size_t t = 0; t < nt; t++) {
		load *l = &loads[t];
		l->db = s->handles[t];
		l->sock = s->sock;
		l->first = t;
		l->step = nt;
		l->start = &start;
		l->duration_ns = (int64_t)(seconds * 1e9);
		l->lat = calloc(SAMPLES_MAX, sizeof(int64_t));
		if (!l->lat ||
		    pthread_create(&tids[t], NULL, kind == KIND_API ? load_api : load_db, l) != 0) {
			/* The barrier counts every thread: nothing to unwind. */
			fprintf(stderr, "bench_worker_leases: starting a load thread failed\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&start);
	int64_t t0 = bench_now_ns();
	for (size_t t = 0; t < nt; t++)
		pthread_join(tids[t], NULL);
	fig->ns += bench_now_ns() - t0;
	int rc = 0;
	for (size_t t = 0; t < nt; t++) {
		load *l = &loads[t];
		fig->renewals += l->renewals;
		fig->connections += l->connections;
		for (size_t k = 0; k < l->nlat && fig->nlat < fig->cap; k++)
			fig->lat[fig->nlat++] = l->lat[k];
		if (l->errors) {
			fprintf(stderr, "bench_worker_leases: %s: %d errors in a thread, the first: %s\n",
			        side_name[si], l->errors, l->first_error);
			rc = -1;
		}
		free(l->lat);
	}
	pthread_barrier_destroy(&start);
	return rc;
}

/* ---- set-up and tear-down -------------------------------------------------------- */

static void remove_dir(char *dir)
{
	if (!dir[0])
		return;
	char *rm[] = { "rm", "-rf", dir, NULL };
	pg_run(rm);
	dir[0] = 0;
}

/* The worker on its own directory's socket and state, auth_mode dev; db:
 * the YAML lines naming its database (empty: SQLite in the state dir). */
static int worker_start(side *s, const char *db)
{
	char prog_buf[PATH_MAX + 32], config[128], text[2048];
	const char *prog =
		bw_program("AIRLOCK_BENCH_WORKER", "airlock-worker", prog_buf, sizeof(prog_buf));
	snprintf(s->sock, sizeof(s->sock), "%s/w.sock", s->dir);
	snprintf(config, sizeof(config), "%s/airlock.yaml", s->dir);
	/* Its log (a JSON line per lease event) goes to tmpfs, not beside
	 * the database: in production it goes through a pipe to journald, and
	 * a file on the database's disk would share its journal commits. */
	snprintf(s->log, sizeof(s->log), "/dev/shm/airlock-bwl-%d-%s.log", (int)getpid(),
	         s == &sides[SIDE_SQLITE] ? "sqlite" : "postgresql");
	snprintf(text, sizeof(text),
	         "worker:\n  listen: unix:%s\n  state_dir: %s\n  auth_mode: dev\n%s", s->sock,
	         s->dir, db);
	if (bw_write_file(config, text) < 0)
		return -1;
	char *argv[] = { "airlock-worker", "--config", config, NULL };
	s->worker = bw_start(prog, argv, s->log, s->sock);
	if (s->worker < 0) {
		s->worker = 0;
		return -1;
	}
	return 0;
}

/* SIGTERM; 0 when it exited 0. */
static int worker_stop(side *s)
{
	if (s->worker <= 0)
		return 0;
	kill(s->worker, SIGTERM);
	int st = 0;
	while (waitpid(s->worker, &st, 0) < 0 && errno == EINTR)
		;
	s->worker = 0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Every run claimed once at EPOCH (outcome new), on the db side and
 * through the worker: what follows are renewals. */
static int claim_all(side *s, const char *name)
{
	char run[32], why[300];
	for (size_t i = 0; i < n_runs; i++) {
		run_id(i, run, sizeof(run));
		worker_db_claim_request req = { .run_id = run, .tenant_id = TENANT, .epoch = EPOCH,
			                        .ttl_seconds = TTL_SECONDS, .now_ms = util_now_ms() };
		worker_db_claim_result res;
		airlock_error err = { 0 };
		if (worker_db_claim(s->handles[0], &req, &res, &err) < 0 ||
		    res.outcome != WORKER_DB_CLAIM_NEW) {
			fprintf(stderr, "bench_worker_leases: %s: first claim of %s: %s\n", name, run,
			        err.message[0] ? err.message : "not new");
			return -1;
		}
	}
	int fd = unix_connect(s->sock);
	if (fd < 0)
		return -1;
	int r = 0;
	for (size_t i = 0; i < n_runs && r == 0; i++) {
		bool closing = false;
		run_id(i, run, sizeof(run));
		r = api_put(fd, run, TTL_SECONDS, "new", &closing, why, sizeof(why));
		if (r < 0)
			fprintf(stderr, "bench_worker_leases: %s: worker: %s\n", name, why);
		else if (closing)
			r = -1;
	}
	close(fd);
	return r;
}

static int open_handles(side *s, int si)
{
	for (size_t t = 0; t < n_threads; t++) {
		airlock_error err = { 0 };
		int r = si == SIDE_SQLITE ? worker_db_open_sqlite(s->sqlite_dir, &s->handles[t], &err)
		                          : worker_db_open_pg(s->db_conninfo, &s->handles[t], &err);
		if (r < 0) {
			fprintf(stderr, "bench_worker_leases: %s: open: %s\n", side_name[si],
			        err.message);
			return -1;
		}
	}
	return 0;
}

static int setup_sqlite(void)
{
	side *s = &sides[SIDE_SQLITE];
	if (bw_make_dir(s->sqlite_dir, sizeof(s->sqlite_dir), "bwl-db") < 0 ||
	    bw_make_dir(s->dir, sizeof(s->dir), "bwl-worker") < 0 || open_handles(s, SIDE_SQLITE) < 0 ||
	    worker_start(s, "") < 0 || claim_all(s, "sqlite") < 0)
		return -1;
	s->up = true;
	return 0;
}

/* The server, a schema each for the db side and the worker: NULL, or why
 * PostgreSQL is left out (*ret_fatal: a failure past the server's start). */
static const char *setup_pg(bool *ret_fatal)
{
	side *s = &sides[SIDE_PG];
	*ret_fatal = false;
	if (geteuid() != 0)
		return "not root (the server runs as the postgres user)";
	const char *why = pg_server_start(true);
	if (why)
		return why;
	*ret_fatal = true;
	const char *host = getenv(PG_ENV_DIR);
	char ci[256];
	snprintf(ci, sizeof(ci), "host=%s user=" PG_USER " dbname=postgres password=" PG_PASSWORD,
	         host);
	PGconn *c = PQconnectdb(ci);
	PGresult *res = NULL;
	if (PQstatus(c) == CONNECTION_OK)
		res = PQexec(c, "CREATE SCHEMA bench_db; CREATE SCHEMA bench_api");
	bool ok = res && PQresultStatus(res) == PGRES_COMMAND_OK;
	if (!ok)
		fprintf(stderr, "bench_worker_leases: postgresql: the schemas: %s\n",
		        PQerrorMessage(c));
	PQclear(res);
	PQfinish(c);
	if (!ok)
		return "the schemas could not be made";
	snprintf(s->db_conninfo, sizeof(s->db_conninfo),
	         "%s options='-c search_path=bench_db'", ci);
	char conn[128], text[640], db[256];
	if (bw_make_dir(s->dir, sizeof(s->dir), "bwl-worker") < 0)
		return "mkdtemp failed";
	snprintf(conn, sizeof(conn), "%s/conn", s->dir);
	snprintf(text, sizeof(text), "%s options='-c search_path=bench_api'\n", ci);
	snprintf(db, sizeof(db), "  database: postgresql\n  database_connection_file: %s\n", conn);
	if (bw_write_file(conn, text) < 0 || open_handles(s, SIDE_PG) < 0 || worker_start(s, db) < 0 ||
	    claim_all(s, "postgresql") < 0)
		return "its set-up failed";
	s->up = true;
	return NULL;
}

static void teardown(void)
{
	for (int si = 0; si < SIDE__MAX; si++) {
		side *s = &sides[si];
		if (worker_stop(s) < 0) {
			fprintf(stderr, "bench_worker_leases: %s: airlock-worker did not exit 0 on "
			                "SIGTERM\n", side_name[si]);
			failed = true;
		}
		for (size_t t = 0; t < THREADS_MAX; t++) {
			worker_db_free(s->handles[t]);
			s->handles[t] = NULL;
		}
		remove_dir(s->sqlite_dir);
		remove_dir(s->dir);
		/* Kept when the run failed: it says why. */
		if (s->log[0] && !failed)
			unlink(s->log);
	}
	pg_server_stop();
}

/* ---- main ---------------------------------------------------------------------------- */

static const char *kind_label(int kind, char *buf, size_t size)
{
	switch (kind) {
	case KIND_DB1: snprintf(buf, size, "db, 1 handle"); break;
	case KIND_DBN: snprintf(buf, size, "db, %zu handles", n_threads); break;
	default: snprintf(buf, size, "api, %zu connections", n_threads); break;
	}
	return buf;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? strtod(argv[1], NULL) : SECONDS_DEFAULT;
	long runs = argc > 2 ? strtol(argv[2], NULL, 10) : RUNS_DEFAULT;
	long threads = argc > 3 ? strtol(argv[3], NULL, 10) : THREADS_DEFAULT;
	if (argc > 4 || !(seconds > 0.0 && seconds <= 3600.0) || runs < 1 || runs > RUNS_MAX ||
	    threads < 1 || threads > THREADS_MAX || threads > runs) {
		fprintf(stderr, "usage: bench_worker_leases [seconds [runs [threads]]] "
		                "(seconds per figure; 1 <= threads <= runs <= %d, threads <= %d)\n",
		        RUNS_MAX, THREADS_MAX);
		return 64;
	}
	n_runs = (size_t)runs;
	n_threads = (size_t)threads;
	bw_prog = "bench_worker_leases";
	/* A worker that dies mid-answer must fail a write, not this process. */
	signal(SIGPIPE, SIG_IGN);
	double la[3] = { 0 };
	if (getloadavg(la, 3) != 3)
		la[0] = la[1] = la[2] = -1.0;
	printf("bench_worker_leases: nproc %ld, load average %.2f %.2f %.2f; %.1f s per figure in "
	       "%d rounds, %zu runs, %zu threads; TTL %d s\n",
	       sysconf(_SC_NPROCESSORS_ONLN), la[0], la[1], la[2], seconds, ROUNDS, n_runs,
	       n_threads, TTL_SECONDS);
	fflush(stdout);

	if (setup_sqlite() < 0) {
		failed = true;
		teardown();
		return 1;
	}
	bool pg_fatal = false;
	const char *pg_why = setup_pg(&pg_fatal);
	if (pg_why && pg_fatal) {
		fprintf(stderr, "bench_worker_leases: postgresql: %s\n", pg_why);
		failed = true;
		teardown();
		return 1;
	}
	printf("sqlite: WAL, synchronous=FULL (src/worker/db_sqlite.c), state under %s\n",
	       getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (pg_why)
		printf("postgresql: left out: %s\n", pg_why);
	else
		printf("postgresql: a server of its own, fsync and synchronous_commit on, Unix "
		       "socket\n");

	static figure figs[SIDE__MAX][KIND__MAX];
	for (int si = 0; si < SIDE__MAX; si++)
		for (int k = 0; k < KIND__MAX; k++) {
			figs[si][k].cap = (size_t)SAMPLES_MAX * ROUNDS * n_threads;
			figs[si][k].lat = calloc(figs[si][k].cap, sizeof(int64_t));
			if (!figs[si][k].lat) {
				teardown();
				return 1;
			}
		}
	for (int k = 0; k < KIND__MAX && !failed; k++)
		for (int r = 0; r < ROUNDS && !failed; r++)
			for (int j = 0; j < SIDE__MAX && !failed; j++) {
				int si = r % 2 == 0 ? j : SIDE__MAX - 1 - j;
				if (sides[si].up && !(k == KIND_DBN && si == SIDE_SQLITE) &&
				    measure(si, k, seconds / ROUNDS, &figs[si][k]) < 0)
					failed = true;
			}

	printf("lease renewals per second (a claim at the run's epoch; every one renewed):\n");
	for (int si = 0; si < SIDE__MAX; si++) {
		if (!sides[si].up)
			continue;
		for (int k = 0; k < KIND__MAX; k++) {
			figure *f = &figs[si][k];
			if (f->nlat == 0)
				continue;
			char label[64];
			double rate = (double)f->renewals / ((double)f->ns / 1e9);
			int64_t p50 = bench_pct(f->lat, f->nlat, 50);
			int64_t p99 = bench_pct(f->lat, f->nlat, 99);
			printf("  %-10s %-20s %8.0f/s  p50 %7.3f ms  p99 %7.3f ms  ÷ aim %.0f/s: %.2f%s\n",
			       side_name[si], kind_label(k, label, sizeof(label)), rate, bench_ms(p50),
			       bench_ms(p99), side_aim[si], rate / side_aim[si],
			       k == KIND_API ? (rate >= side_aim[si] ? " (met)" : " (NOT met)") : "");
		}
	}
	printf("  (the aim is one worker's: the api row; the db rows are its database alone)\n");
	for (int si = 0; si < SIDE__MAX; si++)
		if (figs[si][KIND_API].connections)
			printf("  %s api: %lld connections, each used for at most %d ms\n", side_name[si],
			       (long long)figs[si][KIND_API].connections, CONNECTION_MS);
	for (int si = 0; si < SIDE__MAX; si++)
		for (int k = 0; k < KIND__MAX; k++)
			free(figs[si][k].lat);
	teardown();
	if (failed) {
		fprintf(stderr, "bench_worker_leases: a renewal failed (above)\n");
		return 1;
	}
	if (pg_why) {
		printf("bench_worker_leases: skipped PostgreSQL: %s\n", pg_why);
		return 77;
	}
	return 0;
}
