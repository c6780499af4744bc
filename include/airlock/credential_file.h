/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_CREDENTIAL_FILE_H
#define AIRLOCK_CREDENTIAL_FILE_H

/*
 * The service credential's file, read the same way by both sides of the
 * internal API: `airlock serve` (the token it accepts) and the callers of
 * the remote adapter (the token they send).
 */

#include <stddef.h>

#include "airlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read a credential file: regular, owned by this user, mode 0600 or
 * stricter, at most 4 KiB, one token (a final newline is dropped).
 * Config error naming the file and what is wrong otherwise. *ret is
 * malloc'd; the caller wipes and frees it. */
int airlock_credential_file_read(const char *path, unsigned char **ret, size_t *ret_len,
                                 airlock_error *err);

/* The same file checks (regular, owned by this user, no group or other
 * access, at most max bytes) for a credential of another shape, such as the
 * worker's database connection string: *ret is the whole content,
 * NUL-terminated, a final newline dropped; the caller checks its shape,
 * wipes and frees it. Messages start with what ("worker database
 * connection file") and name the path and the rule, never the content. */
int airlock_credential_file_read_text(const char *path, const char *what, size_t max,
                                      char **ret, size_t *ret_len, airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
