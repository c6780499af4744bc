/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_ESCAPE_H
#define AIRLOCK_ESCAPE_H

/*
 * Untrusted bytes (a sandbox's file names and output, a policy's values, a
 * command line) rendered for a terminal or a log line, so that none of them
 * reaches it as a control: what every airlock program prints them with.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* For a message: printable ASCII as is, '"', '\\' and everything else as
 * \xNN; cut with "..." to fit size (at least 12). Returns buf. */
const char *airlock_escape(char *buf, size_t size, const void *s, size_t len);

/* To a stream, whole: printable ASCII and printable UTF-8 pass; control
 * bytes (C0, DEL, C1), invalid UTF-8 and the bidirectional overrides become
 * \xHH, one per byte; a backslash becomes \\ when escape_backslash (file
 * names, so that the escaped form is unambiguous). */
void airlock_fput_escaped(FILE *out, const void *s, size_t len, bool escape_backslash);

#ifdef __cplusplus
}
#endif
#endif
