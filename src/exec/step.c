/* SPDX-License-Identifier: Apache-2.0 */
#include "exec/step.h"

#include <errno.h>
#include <string.h>

#include "util/fault.h"

int exec_step_fault(const char *point, airlock_errclass cls, airlock_error *err)
{
	if (!util_fault(point))
		return 0;
	return airlock_error_set(err, cls, EIO, "fault injected at %s", point);
}

/* Whether msg starts with the name what as its first words. */
static int names_itself(const char *msg, const char *what)
{
	size_t n = strlen(what);
	return strncmp(msg, what, n) == 0 && (msg[n] == ':' || msg[n] == ' ' || msg[n] == 0);
}

int exec_step_said(const char *what, int r, airlock_error *err)
{
	if (r >= 0 || !err)
		return r;
	if (!err->message[0]) {
		airlock_errclass cls = airlock_errcode_class(r);
		airlock_error_set(err, cls, cls == AIRLOCK_ERR_SYSTEM ? -r : 0, "%s", what);
		return r;
	}
	if (names_itself(err->message, what))
		return r;
	/* The step says where the facility failed, not what kind of failure
	 * it was: the class (and so the code r the caller returns) and errnum
	 * stay the facility's. */
	airlock_error_wrap(err, err->cls, err, "%s", what);
	return r;
}
