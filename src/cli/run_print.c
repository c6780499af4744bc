/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What airlock run prints: the command's output as it arrives, then the
 * summary line and the changed files (escaped: their names are the
 * sandbox's), or the result object with --json; and the exit status that
 * says whether all of it was printed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "airlock/escape.h"
#include "airlock/json.h"
#include "cli/common.h"
#include "cli/run.h"
#include "util/cleanup.h"

/* len bytes to out, flushed so they leave now: 0, or -errno of the write
 * that failed (EPIPE: the reader went away). stdio goes on after a short
 * write; no handler can interrupt one with EINTR, as the watched signals
 * are blocked and SIGPIPE is ignored. */
static int put_now(FILE *out, const void *data, size_t len)
{
	errno = 0;
	if ((len && fwrite(data, 1, len, out) != len) || fflush(out) != 0)
		return errno ? -errno : -EIO;
	return 0;
}

/* Output as it arrives: without --json the command's bytes are written as
 * the observer receives them, the same bytes the result holds. */
void run_on_output(void *arg, airlock_output_stream stream, const void *data, size_t len)
{
	run_output *o = arg;
	bool out = stream == AIRLOCK_OUTPUT_STDOUT;
	int *r = out ? &o->out_r : &o->err_r;
	if (*r == 0)
		*r = put_now(out ? stdout : stderr, data, len);
}

static void print_summary(const airlock_execution_result *res, const char *mechanism)
{
	char what[64];
	if (res->has_exit_code)
		snprintf(what, sizeof(what), "exit %d", res->exit_code);
	else
		snprintf(what, sizeof(what), "killed: %s", airlock_kill_reason_name(res->killed_by));
	fprintf(stderr, "airlock: %s · %lld ms · %zu file%s changed%s%s%s%s\n", what,
	        (long long)res->duration_ms, res->n_files_changed,
	        res->n_files_changed == 1 ? "" : "s",
	        res->files_changed_truncated ? " (listing truncated)" : "",
	        res->stdout_truncated ? " · stdout truncated" : "",
	        res->stderr_truncated ? " · stderr truncated" : "",
	        strcmp(mechanism, "fake") == 0 ? " · fake mechanism: nothing was executed" : "");
	/* The names are the sandbox's: a name made of terminal controls must
	 * not rewrite the line above (the real exit status) or fake one. */
	for (size_t i = 0; i < res->n_files_changed; i++) {
		const char *path = res->files_changed[i].path;
		fprintf(stderr, "airlock:   %-8s ",
		        airlock_change_kind_name(res->files_changed[i].change));
		airlock_fput_escaped(stderr, path, strlen(path), true);
		fprintf(stderr, " (%lld bytes)\n", (long long)res->files_changed[i].size_bytes);
	}
}

int run_print_result(const airlock_execution_result *res, bool json, const run_output *shown,
                     const char *mechanism, airlock_error *err)
{
	/* A reader that goes away (airlock run ... | head) is not a reason to
	 * die: SIGPIPE is ignored (main), the failed write stops the output,
	 * the sandbox is still destroyed by the caller, and the status says so. */
	int out_r = 0, err_r = 0;
	if (json) {
		_cleanup_free_ char *text = airlock_result_to_tool_json(res, err);
		if (!text) {
			if (!err->cls)
				airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the result as JSON");
			return -1;
		}
		size_t jl = strlen(text);
		text[jl] = '\n'; /* written with its newline, in place of the NUL */
		out_r = put_now(stdout, text, jl + 1);
		text[jl] = 0;
	} else {
		/* The bytes went out as they arrived (run_on_output); the
		 * summary stays last. */
		out_r = shown->out_r;
		err_r = shown->err_r;
		print_summary(res, mechanism);
	}
	int exit_code = res->has_exit_code ? (res->exit_code & 0xff) : CLI_EXIT_KILLED;
	/* stderr is unbuffered: a failed fprintf shows only in its error flag. */
	if (out_r < 0 || err_r < 0 || fflush(stderr) != 0 || ferror(stderr)) {
		fprintf(stderr, "airlock run: %s: %s: the result was not fully printed "
		                "(the sandbox is destroyed)\n",
		        out_r < 0 ? "stdout" : "stderr", strerror(out_r < 0 ? -out_r : err_r < 0 ? -err_r : EIO));
		exit_code = CLI_EXIT_IOERR;
	}
	return exit_code;
}
