/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_FAKE_H
#define AIRLOCK_FAKE_H

/*
 * The fake mechanism (the specification: "fake is a fourth SandboxMechanism
 * value and a production adapter, not a test double"). It executes nothing.
 * It records every command it is given, returns scripted results (per exact
 * argv, with a default), models each workspace in memory, and computes
 * files_changed from its own before/after state. It passes the contract suite
 * unchanged, and production refuses it through the startup check.
 *
 * A script's simulated run plays out in real time: it waits runs_for_ms (or
 * until the effective timeout, expires_at or a cancel, whichever is first),
 * so TIMEOUT, EXPIRED and CANCELLED are produced the way a real mechanism
 * produces them.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/port/exec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct airlock_fake airlock_fake;

/* What the simulated process does to the workspace, in order. */
typedef struct airlock_fake_file_op {
	const char *path; /* relative to /workspace */
	const void *data; /* NULL with delete */
	size_t len;
	bool delete_file;
} airlock_fake_file_op;

typedef struct airlock_fake_behaviour {
	int exit_code;
	const void *stdout_data;
	size_t stdout_len;
	const void *stderr_data;
	size_t stderr_len;
	bool echo_stdin;      /* stdin is appended to stdout, as `cat` would */
	int64_t runs_for_ms;  /* simulated duration, 0 = returns at once */
	airlock_kill_reason killed_by; /* a limit the script hits (MEMORY, PIDS, ...) */
	const airlock_fake_file_op *file_ops;
	size_t n_file_ops;
} airlock_fake_behaviour;

typedef struct airlock_fake_record {
	char environment_id[AIRLOCK_ENVIRONMENT_ID_MAX];
	airlock_execution_command command; /* deep copy */
	int64_t effective_timeout_ms;
} airlock_fake_record;

int airlock_fake_new(airlock_fake **ret, airlock_error *err);
const airlock_exec_ops *airlock_fake_ops(void);

/* Script the result for an exact argv (NULL-terminated), or the default
 * when argv is NULL. Everything is copied. A later script for the same argv
 * replaces the earlier one. */
int airlock_fake_script(airlock_fake *f, const char *const *argv, const airlock_fake_behaviour *b,
                        airlock_error *err);

/* The recorded commands, in order. Valid until the fake is freed. */
size_t airlock_fake_recorded_count(airlock_fake *f);
const airlock_fake_record *airlock_fake_recorded(airlock_fake *f, size_t i);
/* Live sandboxes (for leak checks). */
size_t airlock_fake_live_count(airlock_fake *f);

#ifdef __cplusplus
}
#endif
#endif
