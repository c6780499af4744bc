/* SPDX-License-Identifier: Apache-2.0 */
#include "airlock/error.h"

#include "util/fault.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *const class_names[AIRLOCK_ERR__MAX] = {
	[AIRLOCK_ERR_INVALID] = "Error",
	[AIRLOCK_ERR_EXECUTION_UNAVAILABLE] = "ExecutionUnavailable",
	[AIRLOCK_ERR_EXECUTION_REJECTED] = "ExecutionRejected",
	[AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED] = "SandboxEscapeSuspected",
	[AIRLOCK_ERR_WORKSPACE_ESCAPE] = "WorkspaceEscape",
	[AIRLOCK_ERR_TOOL_VALIDATION] = "ToolValidationError",
	[AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE] = "CredentialUnavailable",
	[AIRLOCK_ERR_ARTIFACT_INTEGRITY] = "ArtifactIntegrityError",
	[AIRLOCK_ERR_CONFIG] = "ConfigurationError",
	[AIRLOCK_ERR_DECODE] = "DecodeError",
	[AIRLOCK_ERR_NOT_IMPLEMENTED] = "NotImplemented",
	[AIRLOCK_ERR_SYSTEM] = "SystemError",
};

const char *airlock_errclass_name(airlock_errclass cls)
{
	if ((unsigned)cls >= AIRLOCK_ERR__MAX)
		return "Error";
	return class_names[cls];
}

airlock_errclass airlock_errcode_class(int code)
{
	if (code >= 0)
		return AIRLOCK_ERR_INVALID;
	int c = -code - AIRLOCK_E_BASE;
	if (c > 0 && c < AIRLOCK_ERR__MAX)
		return (airlock_errclass)c;
	return AIRLOCK_ERR_SYSTEM;
}

/* In a fault-injection build an error set after a fault fired names the
 * point (util/fault.h), wherever the failure path that set it is: the
 * fault suites check that every injected failure says where it was. */
static void error_name_fault(airlock_error *err)
{
#ifdef AIRLOCK_FAULT_INJECTION
	const char *point = util_fault_fired();
	if (!err || !point || strstr(err->message, point))
		return;
	size_t n = strnlen(err->message, sizeof(err->message));
	snprintf(err->message + n, sizeof(err->message) - n, " (fault injected at %s)", point);
#else
	(void)err;
#endif
}

/*
 * The one place a message is made, for set and wrap alike: the head fmt
 * says, then ": " and the tail. The tail is either the system reason
 * (set: strerror of errnum) or the inner error's message (wrap), which
 * already ends in its own reason: a reason is said once, by the layer that
 * met it, and every layer above adds only its head. A head that already
 * ends in the reason (a caller that formatted strerror in: the
 * error_messages test refuses that in the sources) does not get it again.
 * Truncation keeps the head and as much of the tail as fits.
 */
static int error_fill(airlock_error *err, airlock_errclass cls, int errnum, const char *tail,
                      const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));
static int error_fill(airlock_error *err, airlock_errclass cls, int errnum, const char *tail,
                      const char *fmt, va_list ap)
{
	if (err) {
		err->cls = cls;
		err->errnum = errnum;
		int n = vsnprintf(err->message, sizeof(err->message), fmt, ap);
		if (n < 0) {
			n = 0;
			err->message[0] = 0;
		}
		size_t head = (size_t)n;
		if (head >= sizeof(err->message))
			head = sizeof(err->message) - 1;
		size_t len = tail ? strlen(tail) : 0;
		/* The head is the tail, or ends in ": " and the tail. */
		const char *end = err->message + head;
		bool said = tail && len && head >= len && memcmp(end - len, tail, len) == 0 &&
		            (head == len ||
		             (head >= len + 2 && memcmp(end - len - 2, ": ", 2) == 0));
		size_t sep = head ? 2 : 0; /* an empty head: the tail alone */
		size_t room = sizeof(err->message) - head;
		if (tail && !said && room > sep + 1) {
			memcpy(err->message + head, ": ", sep);
			if (len > room - sep - 1)
				len = room - sep - 1;
			memcpy(err->message + head + sep, tail, len);
			err->message[head + sep + len] = 0;
		}
		error_name_fault(err);
	}
	if (cls == AIRLOCK_ERR_SYSTEM && errnum)
		return -errnum;
	return airlock_errcode(cls);
}

int airlock_error_set(airlock_error *err, airlock_errclass cls, int errnum, const char *fmt, ...)
{
	if (errnum < 0)
		errnum = -errnum;
	va_list ap;
	va_start(ap, fmt);
	int r = error_fill(err, cls, errnum, errnum ? strerror(errnum) : NULL, fmt, ap);
	va_end(ap);
	return r;
}

void airlock_error_prefix(airlock_error *err, const char *fmt, ...)
{
	if (!err)
		return;
	char prefix[AIRLOCK_ERROR_MESSAGE_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	/* Truncation is intended: the message keeps its prefix and as much of the
	 * old text as fits. */
	size_t plen = strnlen(prefix, sizeof(err->message) - 1);
	size_t olen = strnlen(err->message, sizeof(err->message) - 1);
	if (olen > sizeof(err->message) - 1 - plen)
		olen = sizeof(err->message) - 1 - plen;
	memmove(err->message + plen, err->message, olen);
	memcpy(err->message, prefix, plen);
	err->message[plen + olen] = 0;
}

int airlock_error_wrap(airlock_error *err, airlock_errclass cls, const airlock_error *inner,
                       const char *fmt, ...)
{
	if (!inner)
		return airlock_errcode(cls);
	/* inner may be err itself: copied before err is written. The inner
	 * message already says its system reason (if any): it is the tail,
	 * and errnum goes on with it, never said again. */
	airlock_error in = *inner;
	in.message[sizeof(in.message) - 1] = 0;
	va_list ap;
	va_start(ap, fmt);
	int r = error_fill(err, cls, in.errnum,
	                   in.message[0] ? in.message : airlock_errclass_name(in.cls), fmt, ap);
	va_end(ap);
	return r;
}

void airlock_error_clear(airlock_error *err)
{
	if (err)
		memset(err, 0, sizeof(*err));
}

/* The workspace port's own codes; one table for both sides of the API. */
static const struct {
	const char *name;
	int value;
} wire_errnos[] = {
	{ "ENOENT", ENOENT },   { "ENOTDIR", ENOTDIR }, { "EISDIR", EISDIR },
	{ "EEXIST", EEXIST },   { "ENOTEMPTY", ENOTEMPTY }, { "ENOSPC", ENOSPC },
	{ "EDQUOT", EDQUOT },   { "EFBIG", EFBIG },     { "ELOOP", ELOOP },
	{ "ENAMETOOLONG", ENAMETOOLONG }, { "EACCES", EACCES }, { "EPERM", EPERM },
	{ "EROFS", EROFS },     { "EINVAL", EINVAL },   { "EMLINK", EMLINK },
	{ "ETXTBSY", ETXTBSY }, { "EBUSY", EBUSY },
};

const char *airlock_errno_wire_name(int errnum)
{
	for (size_t i = 0; i < sizeof(wire_errnos) / sizeof(wire_errnos[0]); i++)
		if (wire_errnos[i].value == errnum)
			return wire_errnos[i].name;
	return NULL;
}

int airlock_errno_wire_value(const char *name)
{
	for (size_t i = 0; name && i < sizeof(wire_errnos) / sizeof(wire_errnos[0]); i++)
		if (strcmp(wire_errnos[i].name, name) == 0)
			return wire_errnos[i].value;
	return 0;
}
