/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_CLI_COMMON_H
#define AIRLOCK_CLI_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "airlock/error.h"
#include "airlock/escape.h"
#include "airlock/settings.h"

/* Exit codes (README, "Exit codes"). A command that exited on its own passes
 * its own code through `airlock run`; these are for everything else. */
enum {
	CLI_EXIT_OK = 0,
	CLI_EXIT_USAGE = 64,       /* bad flags or arguments */
	CLI_EXIT_REJECTED = 65,    /* input refused: validation, workspace escape, rejected spec */
	CLI_EXIT_UNAVAILABLE = 69, /* mechanism unavailable or not implemented here */
	CLI_EXIT_SOFTWARE = 70,    /* internal error */
	CLI_EXIT_IOERR = 74,       /* our stdout/stderr failed (a reader closed it): output cut short */
	CLI_EXIT_CONFIG = 78,      /* settings refused by the startup checks */
	CLI_EXIT_ESCAPE = 79,      /* SandboxEscapeSuspected: alert */
	CLI_EXIT_KILLED = 137,     /* the command was killed; the reason is printed */
};

/* The exit code for an error class. */
int cli_exit_for(const airlock_error *err);

/* Everything airlock itself prints from untrusted bytes goes through
 * airlock_fput_escaped (airlock/escape.h); --json output is JSON, escaped by
 * the encoder instead. */
/* The same for a C string, backslashes kept (messages quote with them). */
void cli_fputs_escaped(FILE *out, const char *s);

/* The monotonic clock in ms (progress lines). */
int64_t cli_monotonic_ms(void);

/* Print "airlock: <verb>: <ClassName>: message" to stderr, escaped. */
void cli_error(const char *verb, const airlock_error *err);

/* Load settings: the embedded defaults, then FILE when given, then the
 * AIRLOCK_* environment overrides, then the --mechanism flag (NULL when not
 * given), then the tier-1 list; then the startup checks. Logs the resolved
 * image digest and any tier-1 configuration error to stderr. */
int cli_load_settings(const char *file, const char *mechanism, airlock_settings *ret,
                      airlock_error *err);

/* The image a run uses when settings name none: the default image in the
 * store, built on first use with a progress line per step on stderr. */
int cli_default_image(const airlock_settings *s, char ret[72], airlock_error *err);

/* --dns checked as the egress proxy's resolver will take it: ConfigError
 * naming the flag. */
int cli_dns_check(const char *dns, airlock_error *err);

/* The egress proxy for an allowlist: the resolver (dns, NULL for
 * /etc/resolv.conf) checked first, so a bad --dns is named before anything
 * starts; the proxy's decision lines go to log_fd (-1: its default). */
struct airlock_proxy;
int cli_proxy_start(const char *dns, int log_fd, struct airlock_proxy **ret, airlock_error *err);

/* The flags every client of a running worker takes (airlock tool,
 * airlock artifact). */
typedef struct cli_worker_flags {
	const char *worker, *token_file, *tls_ca_file, *config;
} cli_worker_flags;
struct airlock_worker_client_config;
struct airlock_worker_answer;
/* The worker's address: --worker, else the settings' worker.listen; -1 to
 * go on, or the exit status after a line naming verb ("tool list"). */
int cli_worker_config(const char *verb, const cli_worker_flags *f, int64_t timeout_ms,
                      airlock_settings *s, struct airlock_worker_client_config *ret);
/* The answer: a 2xx's JSON on stdout; anything else one line naming the
 * worker, the status, the class and the message, escaped. The exit
 * status. */
int cli_print_worker_answer(const char *verb, const char *address,
                            const struct airlock_worker_answer *a, const char *hint_404);

/* A flag's decimal integer in [min, max]: true with *ret set, or false
 * after a line "airlock VERB: FLAG VALUE: not an integer from MIN to MAX"
 * on stderr (the value escaped). */
bool cli_flag_i64(const char *verb, const char *flag, const char *v, int64_t min, int64_t max,
                  int64_t *ret);

/* True when s is "--help" or "-h". */
bool cli_is_help(const char *s);

int cli_run(int argc, char **argv);
int cli_config(int argc, char **argv);
int cli_doctor(int argc, char **argv);
int cli_image(int argc, char **argv);
int cli_egress(int argc, char **argv);
int cli_proxy(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_worker(int argc, char **argv);
int cli_tool(int argc, char **argv);
int cli_artifact(int argc, char **argv);
int cli_mcp(int argc, char **argv);

#endif
