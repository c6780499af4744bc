/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock-worker: the worker tier's daemon in the foreground (what a
 * systemd unit or a container entrypoint runs; docs/worker-api.md). Its
 * settings are the worker: section of the one settings file, with the
 * AIRLOCK_* overrides and the same startup checks as every other door.
 * SIGTERM or SIGINT stops it cleanly. Everything else is the worker-side
 * library's (worker_serve).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "airlock/settings.h"
#include "worker/worker.h"

extern char **environ;

static int usage(FILE *out, int code)
{
	fputs("usage: airlock-worker [--config FILE]\n\n"
	      "Run the worker (docs/worker-api.md) in the foreground: a run's lease on\n"
	      "PUT/DELETE /v1/runs/{run_id}/lease, authenticated as worker.auth_mode says,\n"
	      "over the worker: section of the settings (default: the embedded defaults)\n"
	      "and its AIRLOCK_WORKER_* overrides. SIGTERM or SIGINT stops it.\n",
	      out);
	return code;
}

static int fail(const char *what, const airlock_error *err)
{
	fprintf(stderr, "airlock-worker: %s: %s\n", what, err->message);
	return err->cls == AIRLOCK_ERR_CONFIG ? 78 : 70; /* EX_CONFIG, EX_SOFTWARE */
}

int main(int argc, char **argv)
{
	const char *config = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc && !config)
			config = argv[++i];
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return usage(stdout, 0);
		else
			return usage(stderr, 64);
	}
	/* SIGTERM and SIGINT are blocked before any thread exists, so every
	 * thread inherits the mask and worker_serve's sigwait takes them. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	int e = pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (e != 0) {
		fprintf(stderr, "airlock-worker: cannot block signals: %s\n", strerror(e));
		return 70;
	}
	airlock_settings s = { 0 };
	airlock_error err = { 0 };
	int r = config ? airlock_settings_load(config, &s, &err) : airlock_settings_default(&s, &err);
	if (r == 0)
		r = airlock_settings_apply_env(&s, environ, &err);
	if (r == 0)
		r = airlock_settings_check(&s, &err);
	if (r < 0) {
		airlock_settings_clear(&s);
		return fail("settings", &err);
	}
	r = worker_serve(&s, &err);
	airlock_settings_clear(&s);
	return r < 0 ? fail("start", &err) : 0;
}
