/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_UTIL_H
#define AIRLOCK_UTIL_H

/*
 * Small helpers that know nothing about sandboxes: a byte buffer with a cap
 * fixed at creation, SHA-256 (libcrypto EVP), base64 (libcrypto), hex,
 * time. Cleanup attributes are in cleanup.h, system-call wrappers in
 * syscalls.h.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/cleanup.h"

/* ---- a capped byte buffer ------------------------------------------------
 * The cap is set at creation; an append past it appends what fits and
 * reports that it did not all fit. Always NUL-terminated (the NUL is not
 * counted in len and not in the cap). */
typedef struct util_buf {
	unsigned char *data;
	size_t len;
	size_t alloc;
	size_t cap;
} util_buf;

void util_buf_init(util_buf *b, size_t cap);
/* 0 when all of len fit; 1 when truncated at the cap; -ENOMEM. */
int util_buf_append(util_buf *b, const void *data, size_t len);
void util_buf_clear(util_buf *b);
/* Hand the bytes over (malloc'd, NUL-terminated); the buffer is reset. */
unsigned char *util_buf_steal(util_buf *b, size_t *ret_len);

/* ---- strings ------------------------------------------------------------- */
/* strdup that treats NULL as NULL. Returns NULL on ENOMEM for non-NULL. */
char *util_strdup0(const char *s);
bool util_streq0(const char *a, const char *b);

/* ---- untrusted bytes shown to a person -------------------------------------
 * The one definition of which bytes may reach a log line or a terminal as
 * they are and how the others are written, shared by util_escape (messages)
 * and the command line's printer (cli_fput_escaped). */
/* How many bytes at p (n >= 1 of them) may be written as they are: 1 for
 * printable ASCII (0x20..0x7e); with utf8, the length of a UTF-8 sequence
 * encoding a printable character; else 0, and the byte at p is escaped.
 * Not printable: invalid or overlong UTF-8, a surrogate, a C1 control
 * (U+0080..U+009F, which terminals in UTF-8 mode may read as CSI and the
 * rest), a bidirectional override that reorders what follows on the line
 * (U+202A..U+202E, U+2066..U+2069) or a line/paragraph separator. */
size_t util_printable_len(const unsigned char *p, size_t n, bool utf8);
/* An escaped byte: "\xNN", lowercase hex, UTIL_ESCAPED_BYTE_LEN bytes, no NUL. */
#define UTIL_ESCAPED_BYTE_LEN 4
void util_escape_byte(unsigned char c, char out[UTIL_ESCAPED_BYTE_LEN]);
/* Render untrusted bytes for a message: printable ASCII as is, '"', '\\'
 * and everything else as \xNN, so a hostile value cannot rewrite a log line
 * or a terminal. Cut with "..." to fit size (>= 12). Returns buf. */
const char *util_escape(char *buf, size_t size, const void *s, size_t len);
/* Parse a decimal int64 with no sign tricks, no whitespace, no trailing bytes. */
bool util_parse_i64(const char *s, int64_t *ret);

/* ---- whole reads and writes --------------------------------------------- */
/* Write all of len bytes, retrying on EINTR and short writes. 0, or -errno of
 * the write that failed (EPIPE: the reader went away), -EIO on a write of 0.
 * Async-signal-safe. */
int util_write_all(int fd, const void *data, size_t len);
/* Read everything fd yields into a malloc'd, NUL-terminated buffer of at
 * most max bytes (the NUL not counted): 0, -EFBIG past max, -ENOMEM, -errno.
 * For files whose size the caller does not trust. */
int util_read_capped(int fd, size_t max, char **ret, size_t *ret_len);
/* The same for a secret (a credential, a TLS key): read in place into one
 * buffer of max + 1 bytes, so its bytes are never copied through a buffer
 * that grows (realloc leaves the old block's bytes in freed memory) or
 * through the stack; NUL-terminated, wiped before it is freed on every
 * failure. The caller wipes it after use. -EFBIG past max. */
int util_read_secret(int fd, size_t max, char **ret, size_t *ret_len);
/* Read a small file from offset 0 with pread into buf, NUL-terminated: its
 * length, or -EFBIG when it does not fit in size - 1, -errno. No allocation
 * (kernel files of a known small shape: cgroup and /proc entries). */
int util_pread_small(int fd, char *buf, size_t size);

/* ---- signals -------------------------------------------------------------- */
/* Every disposition back to SIG_DFL and an empty signal mask, for a child
 * about to run someone else's program: a fork keeps ignored dispositions
 * and the blocked mask across execve, so a service that ignores SIGPIPE and
 * blocks SIGTERM would hand both on. Async-signal-safe (a forked child of a
 * threaded process may call it). */
void util_signals_reset(void);

/* In a forked child of the (multithreaded, descriptor-rich) service, before
 * it moves the descriptors it needs into place: close every descriptor from
 * 3 up except the n in keep (negative ones are ignored; n at most
 * UTIL_KEEP_MAX). The child is a copy of a table that can be near
 * RLIMIT_NOFILE, so its own copies need the room this makes. System calls
 * only (safe between fork and exec). 0 or -errno. */
/* util/spawn's children keep their pipes, /dev/null, the program, SPAWN_FDS_MAX
 * given and SPAWN_KEEP_MAX of the caller's. */
#define UTIL_KEEP_MAX 20
int util_close_all_but(const int *keep, size_t n);

/* ---- SHA-256 (libcrypto EVP: uses the SHA-NI path where the CPU has it) -- */
typedef struct util_sha256 util_sha256;
util_sha256 *util_sha256_new(void);
int util_sha256_update(util_sha256 *h, const void *data, size_t len);
/* Writes 2 * len lowercase hex characters of data and a NUL to out. */
void util_hex(const void *data, size_t len, char *out);
/* Writes 64 lowercase hex characters and a NUL. Frees h. */
int util_sha256_final_hex(util_sha256 *h, char out[65]);
void util_sha256_free(util_sha256 *h);
int util_sha256_hex(const void *data, size_t len, char out[65]);

/* ---- base64 (RFC 4648 with padding) ------------------------------------- */
/* malloc'd NUL-terminated text, or NULL on ENOMEM. */
char *util_base64_encode(const void *data, size_t len);
/* Strict: only the standard alphabet, correct padding. -EINVAL or -ENOMEM. */
int util_base64_decode(const char *text, size_t len, unsigned char **ret, size_t *ret_len);

/* ---- time ---------------------------------------------------------------- */
int64_t util_now_ms(void);          /* CLOCK_REALTIME */
int64_t util_monotonic_ms(void);    /* CLOCK_MONOTONIC */
/* RFC 3339 UTC with milliseconds: "2026-11-29T23:34:04.123Z" (24 chars). */
void util_time_format(int64_t unix_ms, char out[32]);
/* Strict inverse of util_time_format (the "Z" form only; ".mmm" optional). */
bool util_time_parse(const char *s, int64_t *ret_ms);

/* ---- randomness (getrandom) ----------------------------------------------- */
int util_random(void *buf, size_t len);

#endif
