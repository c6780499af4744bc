/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Start and stop of a PostgreSQL server of its own (pg_server.h), without
 * criterion: the suites' hooks (pg_server.c) and bench_worker_leases call
 * it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pg_server.h"

extern char **environ;

static char pg_dir[64]; /* this process's own copy, for the stop */
static char pg_bin[256];

int pg_run(char *const argv[])
{
	pid_t pid;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	/* initdb and pg_ctl talk to a person; their log stays in the
	 * server's directory. */
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return -1;
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The newest /usr/lib/postgresql/N/bin holding initdb and pg_ctl. */
static bool find_pg_bin(void)
{
	DIR *d = opendir("/usr/lib/postgresql");
	if (!d)
		return false;
	long best = -1;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end = NULL;
		long v = strtol(e->d_name, &end, 10);
		char p[300];
		snprintf(p, sizeof(p), "/usr/lib/postgresql/%.32s/bin/initdb", e->d_name);
		if (*end == 0 && end != e->d_name && v > best && access(p, X_OK) == 0) {
			best = v;
			snprintf(pg_bin, sizeof(pg_bin), "/usr/lib/postgresql/%ld/bin", v);
		}
	}
	closedir(d);
	return best >= 0;
}

void pg_server_stop(void)
{
	if (!pg_dir[0])
		return;
	char ctl[300], data[128];
	snprintf(ctl, sizeof(ctl), "%s/pg_ctl", pg_bin);
	snprintf(data, sizeof(data), "%s/data", pg_dir);
	char *stop[] = { "runuser", "-u", "postgres", "--", ctl, "stop", "-D", data, "-m", "fast",
		         "-w", "-s", NULL };
	pg_run(stop);
	char *rm[] = { "rm", "-rf", pg_dir, NULL };
	pg_run(rm);
	pg_dir[0] = 0;
}

static void pg_stop_on_signal(int sig)
{
	pg_server_stop();
	signal(sig, SIG_DFL);
	raise(sig);
}

const char *pg_server_start(bool durable)
{
	if (!find_pg_bin())
		return "no /usr/lib/postgresql/N/bin/initdb (the postgresql package is not installed)";
	struct passwd *pw = getpwnam("postgres");
	if (!pw)
		return "no postgres user (the postgresql package is not installed)";
	snprintf(pg_dir, sizeof(pg_dir), "/tmp/airlock-pg-XXXXXX");
	if (!mkdtemp(pg_dir)) {
		pg_dir[0] = 0;
		return "mkdtemp failed";
	}
	/* initdb refuses root: the directory is the postgres user's, and the
	 * server runs as it. */
	if (chown(pg_dir, pw->pw_uid, pw->pw_gid) < 0 || chmod(pg_dir, 0700) < 0)
		return "chown of the server's directory failed";
	atexit(pg_server_stop);
	signal(SIGTERM, pg_stop_on_signal);
	signal(SIGINT, pg_stop_on_signal);
	char pwfile[128], data[128], log[128], initdb[300], ctl[300], opts[256];
	snprintf(pwfile, sizeof(pwfile), "%s/pw", pg_dir);
	snprintf(data, sizeof(data), "%s/data", pg_dir);
	snprintf(log, sizeof(log), "%s/log", pg_dir);
	snprintf(initdb, sizeof(initdb), "%s/initdb", pg_bin);
	snprintf(ctl, sizeof(ctl), "%s/pg_ctl", pg_bin);
	int fd = open(pwfile, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, PG_PASSWORD "\n", sizeof(PG_PASSWORD)) != sizeof(PG_PASSWORD) ||
	    fchown(fd, pw->pw_uid, pw->pw_gid) < 0) {
		if (fd >= 0)
			close(fd);
		return "writing the password file failed";
	}
	close(fd);
	char *init[] = { "runuser", "-u", "postgres", "--", initdb, "-D", data, "-U", PG_USER,
		         "--pwfile", pwfile, "--auth-local=scram-sha-256", "--auth-host=reject",
		         "-E", "UTF8", "--no-sync", "--no-instructions", NULL };
	if (pg_run(init) != 0)
		return "initdb failed";
	/* No TCP at all (listen_addresses empty): the socket in the server's
	 * own directory is the only way in. fsync off unless durable: a test
	 * server's data dies with it anyway, while a benchmark measures the
	 * commits a production server makes (fsync and synchronous_commit on,
	 * PostgreSQL's defaults). */
	snprintf(opts, sizeof(opts),
	         "-c listen_addresses= -c unix_socket_directories=%s%s -c max_connections=40",
	         pg_dir, durable ? "" : " -c fsync=off");
	char *start[] = { "runuser", "-u", "postgres", "--", ctl, "start", "-D", data, "-l", log,
		          "-o", opts, "-w", "-s", NULL };
	if (pg_run(start) != 0)
		return "pg_ctl start failed (the log is in the server's directory)";
	setenv(PG_ENV_DIR, pg_dir, 1);
	return NULL;
}
