/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SecretValue (the specification, "CredentialResolver"). Not a security
 * boundary: it makes the accidental leak (a secret in a log line, an error
 * message, a JSON body) structurally hard.
 *
 * The bytes live in their own anonymous mapping rather than on the heap, so
 * that two kernel hints can apply to exactly those pages: MADV_DONTDUMP
 * keeps them out of a core dump, and MADV_WIPEONFORK hands a forked child
 * (the worker forks to run things) zeroes instead of the secret. Both are
 * best-effort: a kernel that lacks one still gets a working SecretValue,
 * and the bytes are wiped on free either way.
 */
#include "airlock/secret.h"

#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "airlock/caps.h" /* AIRLOCK_SECRET_MAX */

struct airlock_secret {
	unsigned char *data; /* len bytes and a NUL, inside a map of map_len */
	size_t len;
	size_t map_len;
};

int airlock_secret_new(const void *data, size_t len, airlock_secret **ret, airlock_error *err)
{
	if (!ret || (!data && len))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0, "secret: missing input");
	if (len > AIRLOCK_SECRET_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "secret: longer than %u bytes", AIRLOCK_SECRET_MAX);

	long page = sysconf(_SC_PAGESIZE);
	size_t pg = page > 0 ? (size_t)page : 4096;
	size_t map_len = (len + 1 + pg - 1) / pg * pg;

	airlock_secret *s = calloc(1, sizeof(*s));
	if (!s)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "secret");
	void *m = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		int e = errno;
		free(s);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "secret");
	}
	(void)madvise(m, map_len, MADV_DONTDUMP);
#ifdef MADV_WIPEONFORK
	(void)madvise(m, map_len, MADV_WIPEONFORK);
#endif
	s->data = m;
	s->len = len;
	s->map_len = map_len;
	if (len)
		memcpy(s->data, data, len);
	s->data[len] = 0;
	*ret = s;
	return 0;
}

void airlock_secret_free(airlock_secret *s)
{
	if (!s)
		return;
	if (s->data) {
		/* explicit_bzero, not memset: the compiler may not drop a wipe of
		 * memory that is about to be unmapped. */
		explicit_bzero(s->data, s->len);
		munmap(s->data, s->map_len);
	}
	explicit_bzero(s, sizeof(*s));
	free(s);
}

const char *airlock_secret_str(const airlock_secret *s)
{
	(void)s;
	return AIRLOCK_SECRET_REDACTED;
}

const void *airlock_secret_reveal(const airlock_secret *s, size_t *ret_len)
{
	if (!s) {
		if (ret_len)
			*ret_len = 0;
		return NULL;
	}
	if (ret_len)
		*ret_len = s->len;
	return s->data;
}

char *airlock_secret_to_json(const airlock_secret *s, airlock_error *err)
{
	(void)s;
	/* A SecretValue does not survive serialization (spec): the refusal is
	 * unconditional, so a secret that reaches an encoder is an error the
	 * caller sees rather than bytes on a wire. */
	airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0, "a SecretValue cannot be serialized");
	return NULL;
}
