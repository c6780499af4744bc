/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_SECRET_H
#define AIRLOCK_SECRET_H

/*
 * SecretValue (the specification, "CredentialResolver"): an opaque
 * wrapper. Its bytes are reachable only through airlock_secret_reveal(); its
 * only printable form is the redaction marker; it refuses JSON encoding. It
 * is not a security boundary (anything holding it can reveal it); it makes
 * the accidental case, a secret in a log line or an error message,
 * structurally hard: the struct is opaque, so no format string can reach the
 * bytes. The bytes are wiped on free.
 */

#include <stddef.h>

#include "airlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AIRLOCK_SECRET_REDACTED "[REDACTED]"

typedef struct airlock_secret airlock_secret;

int airlock_secret_new(const void *data, size_t len, airlock_secret **ret, airlock_error *err);
void airlock_secret_free(airlock_secret *s);
/* Always AIRLOCK_SECRET_REDACTED: what every print and log path shows. */
const char *airlock_secret_str(const airlock_secret *s);
/* The explicit reveal. The pointer is valid until free. */
const void *airlock_secret_reveal(const airlock_secret *s, size_t *ret_len);
/* Refuses: always returns NULL with AIRLOCK_ERR_EXECUTION_REJECTED. */
char *airlock_secret_to_json(const airlock_secret *s, airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
