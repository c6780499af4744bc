/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock doctor: which mechanisms this host runs, and, when the settings
 * hold a worker (worker.auth_mode set: without it the worker does not
 * start), whether the worker can work: its database and the execution
 * service it calls.
 *
 * The database is checked twice over. Here, what this process can see
 * without opening it: the SQLite file (present, a regular file nobody else
 * can read) or the PostgreSQL connection file (read as the credential it
 * is, checked, wiped, never printed). Then as the worker itself sees it,
 * by its health (GET /v1/health: the database it opened and the schema
 * version it holds). Opening the database from here is what the worker
 * does at start, and it migrates: a doctor must not change the schema under
 * a running worker, nor create a file as another user.
 * The execution service is asked its health (airlock_remote_health) with
 * the worker's own address, credential and TLS files: what the worker's
 * first tool call will do.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "airlock/caps.h"
#include "airlock/credential_file.h"
#include "airlock/mechanisms.h"
#include "airlock/remote.h"
#include "airlock/worker_client.h"
#include "cli/common.h"

/* How long a health question waits, connection included. */
#define DOCTOR_HEALTH_TIMEOUT_MS 5000

static void doctor_usage(FILE *out)
{
	fprintf(out,
	        "usage: airlock doctor [--config FILE] [--token-file FILE] [--tls-ca-file FILE]\n\n"
	        "Say which sandbox mechanisms this host can run, and for each one it cannot, why.\n"
	        "When the settings configure a worker (worker.auth_mode), also check it, one line\n"
	        "each with ok or FAIL and what to do: its database (the file here, and as the\n"
	        "running worker reports it by its health at worker.listen: --token-file is a\n"
	        "token of its tokens_file, --tls-ca-file the CA of a TCP listener) and the\n"
	        "execution service at worker.service_address with the worker's credential.\n"
	        "Exit 0 when at least one mechanism can run and no worker check failed, 69\n"
	        "otherwise, 78 when the settings are refused, 64 on bad usage.\n");
}

static int mechanisms(void)
{
	int usable = 0;
	for (int m = AIRLOCK_MECHANISM_INVALID + 1; m < AIRLOCK_MECHANISM__MAX; m++) {
		const char *why = airlock_mechanism_unavailable_reason((airlock_mechanism)m);
		const char *detail = why ? NULL : airlock_mechanism_detail((airlock_mechanism)m);
		printf("%-8s %s%s%s%s%s%s\n", airlock_mechanism_name((airlock_mechanism)m),
		       why ? "unavailable: " : "available",
		       why ? why : "", detail ? ", " : "", detail ? detail : "",
		       airlock_mechanism_production_allowed((airlock_mechanism)m) ? ""
		                                                                  : " (development only; production refuses it)",
		       m == AIRLOCK_MECHANISM_FAKE && !why ? " (executes nothing; for tests)" : "");
		if (!why)
			usable++;
	}
	return usable;
}

/* One check's line: "NAME ok: what" or "NAME FAIL: what; fix", escaped
 * (messages carry the worker's and the service's words). */
static void line(const char *name, bool ok, const char *what, const char *fix)
{
	printf("%-16s %s: ", name, ok ? "ok" : "FAIL");
	cli_fputs_escaped(stdout, what);
	if (fix) {
		fputs("; ", stdout);
		cli_fputs_escaped(stdout, fix);
	}
	fputc('\n', stdout);
}

/* What this process sees of the database without opening it: 0 and a
 * description in ret, or -1 with the failure in ret. */
static int database_here(const airlock_worker_settings *w, char *ret, size_t size)
{
	if (w->database && strcmp(w->database, "postgresql") == 0) {
		char *conn = NULL;
		size_t len = 0;
		airlock_error err = { 0 };
		if (airlock_credential_file_read_text(w->database_connection_file,
		                                      "worker database connection file",
		                                      AIRLOCK_WORKER_DB_CONNINFO_MAX, &conn, &len,
		                                      &err) < 0) {
			snprintf(ret, size, "%s (checked as this user: run airlock doctor as the worker's)",
			         err.message);
			return -1;
		}
		explicit_bzero(conn, len);
		free(conn);
		snprintf(ret, size, "postgresql, connection file %s readable as a credential",
		         w->database_connection_file);
		return 0;
	}
	char path[4200];
	snprintf(path, sizeof(path), "%s/worker.db", w->state_dir ? w->state_dir : "");
	struct stat st;
	if (lstat(path, &st) < 0) {
		snprintf(ret, size, "sqlite, %s: %s%s", path, strerror(errno),
		         errno == ENOENT ? " (the worker creates it at its first start)" : "");
		return errno == ENOENT ? 0 : -1;
	}
	if (!S_ISREG(st.st_mode) || (st.st_mode & 077)) {
		snprintf(ret, size, "sqlite, %s is not a regular file of mode 0600 (mode %04o): the "
		                    "worker refuses it (chmod 600)",
		         path, (unsigned)(st.st_mode & 07777));
		return -1;
	}
	snprintf(ret, size, "sqlite, %s", path);
	return 0;
}

static bool check_database(const airlock_worker_settings *w, const char *token_file,
                           const char *tls_ca_file)
{
	char here[4600], what[5200];
	bool ok = database_here(w, here, sizeof(here)) == 0;
	airlock_worker_client_config cfg = { .address = w->listen, .token_file = token_file,
		                             .tls_ca_file = tls_ca_file,
		                             .timeout_ms = DOCTOR_HEALTH_TIMEOUT_MS };
	airlock_worker_health h;
	airlock_error err = { 0 };
	if (airlock_worker_client_health(&cfg, &h, &err) == 0) {
		snprintf(what, sizeof(what), "%s; the worker at %s reports %s, schema version %lld, "
		                             "auth_mode %s",
		         here, w->listen, h.database, (long long)h.schema_version, h.auth_mode);
		line("worker database", ok, what, ok ? NULL : "fix the file above");
		return ok;
	}
	const char *fix;
	if (strstr(err.message, "HTTP 401"))
		fix = "the worker wants a token: give airlock doctor one of its tokens_file "
		      "(--token-file FILE)";
	else if (strstr(err.message, "HTTP 503"))
		fix = "the worker cannot use its database: see its log and the setting the message "
		      "names";
	else if (err.cls == AIRLOCK_ERR_CONFIG)
		fix = "fix the file the message names";
	else
		fix = "start the worker (airlock worker --config FILE) so it can report the database "
		      "it opens";
	snprintf(what, sizeof(what), "%s; %s", here, err.message);
	line("worker database", false, what, fix);
	return false;
}

static bool check_service(const airlock_worker_settings *w)
{
	if (!w->service_address) {
		line("worker service", false, "worker.service_address is unset: every tool call is 503",
		     "set worker.service_address and worker.service_credential_file");
		return false;
	}
	airlock_error err = { 0 };
	unsigned char *cred = NULL;
	size_t len = 0;
	airlock_remote *rm = NULL;
	int r = airlock_credential_file_read(w->service_credential_file, &cred, &len, &err);
	if (r == 0) {
		airlock_remote_config rc = { .address = w->service_address, .credential = cred,
			                     .credential_len = len,
			                     .tls_ca_file = w->service_tls_ca_file,
			                     .tls_cert_file = w->service_tls_cert_file,
			                     .tls_key_file = w->service_tls_key_file,
			                     .connect_timeout_ms = DOCTOR_HEALTH_TIMEOUT_MS };
		r = airlock_remote_new(&rc, &rm, &err);
		explicit_bzero(cred, len);
		free(cred);
	}
	airlock_remote_status st = { 0 };
	if (r == 0)
		r = airlock_remote_health(rm, &st, &err);
	if (rm)
		airlock_remote_ops()->free(rm);
	if (r < 0) {
		line("worker service", false, err.message,
		     err.cls == AIRLOCK_ERR_CONFIG
		             ? "fix the worker's service_* settings the message names"
		             : "start the execution service (airlock serve) or fix "
		               "worker.service_address");
		return false;
	}
	char what[512];
	snprintf(what, sizeof(what), "the execution service at %s answers: mechanism %s, %lld live "
	                             "sandbox%s%s",
	         w->service_address, st.mechanism, (long long)st.live, st.live == 1 ? "" : "es",
	         st.shutting_down ? ", shutting down" : "");
	line("worker service", !st.shutting_down, what,
	     st.shutting_down ? "the service is stopping: start it again" : NULL);
	return !st.shutting_down;
}

enum { OPT_CONFIG = 256, OPT_TOKEN, OPT_TLS_CA, OPT_HELP };

static const struct option doctor_options[] = {
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "token-file", required_argument, NULL, OPT_TOKEN },
	{ "tls-ca-file", required_argument, NULL, OPT_TLS_CA },
	{ "help", no_argument, NULL, OPT_HELP },
	{ 0 },
};

int cli_doctor(int argc, char **argv)
{
	const char *config = NULL, *token_file = NULL, *tls_ca_file = NULL;
	optind = 1;
	opterr = 1;
	int c;
	while ((c = getopt_long(argc, argv, "+h", doctor_options, NULL)) != -1) {
		switch (c) {
		case OPT_CONFIG: config = optarg; break;
		case OPT_TOKEN: token_file = optarg; break;
		case OPT_TLS_CA: tls_ca_file = optarg; break;
		case OPT_HELP:
		case 'h':
			doctor_usage(stdout);
			return CLI_EXIT_OK;
		default:
			doctor_usage(stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		doctor_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	int usable = mechanisms();
	airlock_error err = { 0 };
	airlock_settings s = { 0 };
	if (cli_load_settings(config, NULL, &s, &err) < 0) {
		cli_error("doctor", &err);
		return cli_exit_for(&err);
	}
	bool ok = true;
	if (s.worker.auth_mode) {
		ok = check_database(&s.worker, token_file, tls_ca_file) && ok;
		ok = check_service(&s.worker) && ok;
	}
	airlock_settings_clear(&s);
	return usable && ok ? CLI_EXIT_OK : CLI_EXIT_UNAVAILABLE;
}
