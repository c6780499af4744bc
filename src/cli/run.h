/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_CLI_RUN_H
#define AIRLOCK_CLI_RUN_H

/*
 * airlock run, by concern: its flags (run_flags.c), the signals it turns
 * into a SERVICE_SHUTDOWN (run_signals.c), its --stdin (run_stdin.c), what
 * it prints (run_print.c), and the run itself, provision to destroy
 * (run.c). Only these files include this header.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/caps.h"
#include "airlock/port/exec.h"
#include "airlock/settings.h"
#include "airlock/types.h"

/* ---- flags (run_flags.c) ------------------------------------------------- */
typedef struct run_flags {
	const char *mechanism, *config, *stdin_file, *cwd, *tenant;
	const char *policy, *dns, *proxy_log;
	const char *service, *credential_file, *tls_ca, *tls_cert, *tls_key;
	bool json, network;
	/* limit overrides, -1 when not given */
	int64_t cpu, memory, pids, wsbytes, inodes, timeout, output;
	const char *env[AIRLOCK_RUN_ENV_FLAGS_MAX];
	size_t n_env;
} run_flags;

/* Parse and cross-check the flags. -1 to go on, with the command's first
 * argument at argv[*ret_first_arg]; otherwise the exit status (0 after
 * --help, CLI_EXIT_USAGE after a message on stderr). */
int run_parse(int argc, char **argv, run_flags *f, int *ret_first_arg);

/* The settings' default limits with the flags over them. The operator's
 * ceilings are checked where every caller meets them: provision rejects a
 * limit above its ceiling, naming the field. */
void run_build_limits(const airlock_settings *s, const run_flags *f,
                      airlock_resource_limits *ret);

/* ---- signals (run_signals.c) ---------------------------------------------- */
typedef struct run_signals {
	int sfd, stop_efd;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	airlock_exec *exec; /* set while it may be shut down; under lock */
	int signo;          /* the first signal received; under lock */
} run_signals;

/* Block the watched signals and open their signalfd: before any thread
 * exists. 0, or -1 with errno; signals_stop cleans up either way. */
int signals_start(run_signals *rs);
/* Start the watcher thread (after the egress proxy is forked). */
int signals_run(run_signals *rs);
/* Arm (exec) or disarm (NULL) the shutdown. */
void signals_set_exec(run_signals *rs, airlock_exec *exec);
/* The first signal received, 0 for none. */
int signals_received(run_signals *rs);
/* Record a signal waiting on rs->sfd (read by a wait that watched sfd
 * itself, before the watcher runs). */
void signals_take_pending(run_signals *rs);
void signals_stop(run_signals *rs);

/* ---- --stdin (run_stdin.c) ------------------------------------------------ */
typedef enum stdin_read {
	STDIN_READ_OK,
	STDIN_READ_REFUSED, /* said on stderr: the input cannot be used */
	STDIN_READ_SIGNAL,  /* a watched signal came while waiting (rs->signo) */
} stdin_read;

stdin_read read_stdin(const char *path, int64_t budget_s, run_signals *rs, unsigned char **ret,
                      size_t *ret_len);

/* ---- printing (run_print.c) ----------------------------------------------- */
/* The observer of output as it arrives (without --json): the command's
 * bytes written as they come; a stream whose reader went away is not
 * written again (its error is kept, 0 or -errno). */
typedef struct run_output {
	int out_r, err_r;
} run_output;

void run_on_output(void *arg, airlock_output_stream stream, const void *data, size_t len);

/* Print the result (--json: the tool's result object on stdout; else the
 * summary on stderr after the output already shown) and return the exit
 * status: the command's, CLI_EXIT_KILLED, CLI_EXIT_IOERR when stdout or
 * stderr failed, or -1 with err set when the JSON could not be made. */
int run_print_result(const airlock_execution_result *res, bool json, const run_output *shown,
                     const char *mechanism, airlock_error *err);

#endif
