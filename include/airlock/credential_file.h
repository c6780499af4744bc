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

#ifdef __cplusplus
}
#endif
#endif
