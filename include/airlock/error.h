/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_ERROR_H
#define AIRLOCK_ERROR_H

/*
 * Errors.
 *
 * A function that can fail returns int: 0 on success, a negative errno for a
 * plain system failure, or a negative project code (-(AIRLOCK_E_BASE + class))
 * for one of the specification's failure classes. A message with context
 * travels in an airlock_error the caller passes last; it may be NULL when the
 * caller only wants the code.
 *
 * Messages never contain a host filesystem path of a workspace (gate
 * spec_has_no_host_path): adapters name workspace paths relative to
 * /workspace, never by where the volume happens to live.
 */

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AIRLOCK_E_BASE 1000

/* The specification's error classes, plus the few a C library needs. */
typedef enum airlock_errclass {
	AIRLOCK_ERR_INVALID = 0,
	/* Service unreachable, out of capacity or shutting down. Retriable. */
	AIRLOCK_ERR_EXECUTION_UNAVAILABLE,
	/* The specification is invalid: a bug in the caller. Not retriable. */
	AIRLOCK_ERR_EXECUTION_REJECTED,
	/* An invariant the service checks was violated. Alerts. */
	AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED,
	/* A workspace path failed the containment function. */
	AIRLOCK_ERR_WORKSPACE_ESCAPE,
	/* A tool request failed validation before the service was touched. */
	AIRLOCK_ERR_TOOL_VALIDATION,
	/* A credential reference cannot be resolved here (always, in a sandbox). */
	AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE,
	/* An artifact's bytes do not hash to the digest its metadata claims. */
	AIRLOCK_ERR_ARTIFACT_INTEGRITY,
	/* Settings or operator configuration are wrong; startup refuses. */
	AIRLOCK_ERR_CONFIG,
	/* Input (JSON, YAML, arguments) does not have the required shape. */
	AIRLOCK_ERR_DECODE,
	/* A feature that a later piece of work owns; fails loudly, never fakes. */
	AIRLOCK_ERR_NOT_IMPLEMENTED,
	/* A plain system call failed; errnum holds errno. */
	AIRLOCK_ERR_SYSTEM,
	AIRLOCK_ERR__MAX
} airlock_errclass;

#define AIRLOCK_ERROR_MESSAGE_MAX 512

typedef struct airlock_error {
	airlock_errclass cls;
	int errnum; /* errno for AIRLOCK_ERR_SYSTEM, else 0 */
	char message[AIRLOCK_ERROR_MESSAGE_MAX];
} airlock_error;

/* The negative return code for a class. */
static inline int airlock_errcode(airlock_errclass cls) { return -(AIRLOCK_E_BASE + (int)cls); }

/* The class a negative return code stands for; AIRLOCK_ERR_SYSTEM for -errno. */
airlock_errclass airlock_errcode_class(int code);

/* The specification's name of a class: "ExecutionUnavailable", ... */
const char *airlock_errclass_name(airlock_errclass cls);

/*
 * Fill err (when not NULL) and return the class's negative code. Pass the
 * errno as errnum (0 when there is none): it is kept in err->errnum and
 * strerror(errnum) is appended to the message after ": ", so fmt never
 * says the reason itself (the error_messages test refuses a strerror among
 * the arguments). For AIRLOCK_ERR_SYSTEM the return value is -errnum.
 */
__attribute__((format(printf, 4, 5)))
int airlock_error_set(airlock_error *err, airlock_errclass cls, int errnum, const char *fmt, ...);

/*
 * An error that crossed a layer: err becomes class cls with inner's errnum,
 * and its message the context fmt says, then ": ", then inner's message
 * (which already holds its system reason: it is not appended twice), so a
 * failure says its whole path, outer layer first ("provision (native):
 * workspace volume: fsopen ext4: Input/output error"). Pass inner->cls as
 * cls unless the layer has a reason to change the class (and say it).
 * inner may be err. Returns the class's code as airlock_error_set does.
 */
__attribute__((format(printf, 4, 5)))
int airlock_error_wrap(airlock_error *err, airlock_errclass cls, const airlock_error *inner,
                       const char *fmt, ...);
/* Prefix context onto an existing message ("provision: " + old). */
__attribute__((format(printf, 2, 3)))
void airlock_error_prefix(airlock_error *err, const char *fmt, ...);

/* Reset to the empty state. */
void airlock_error_clear(airlock_error *err);

/* The errno values a workspace call returns as its code (a missing file, a
 * parent that is not a directory, a full volume, ...) by their symbolic
 * names, for the service API where they cross as SystemError with an
 * "errno" member (a number could differ between the two sides'
 * architectures). NULL / 0 for a value or name outside the set: that is
 * the service failing, not a code the port returns. */
const char *airlock_errno_wire_name(int errnum);
int airlock_errno_wire_value(const char *name);

#ifdef __cplusplus
}
#endif
#endif
