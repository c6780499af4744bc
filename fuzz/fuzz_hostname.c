/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the host-name normalizer, the IP-literal test and the matcher with
 * arbitrary bytes. The first input byte picks whether wildcards are allowed.
 * Properties: normalizing is idempotent (the output normalizes to itself);
 * an output is never an IP literal, is lowercase [a-z0-9.-] (plus a leading
 * "*." with wildcards) and at most 253 bytes; a normalized name matches
 * itself as an exact pattern, and a wildcard never matches its own suffix;
 * an accepted wildcard is never over a public suffix (asked of libpsl
 * directly, with the private section and the "*" rule), so "*.co.uk" and
 * "*.github.io" can never come out.
 */
#include <libpsl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/egress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	bool wildcard = data[0] & 1;
	const char *in = (const char *)data + 1;
	size_t len = size - 1;

	(void)airlock_ip_literal(in, len);
	char out[AIRLOCK_HOSTNAME_MAX + 1], again[AIRLOCK_HOSTNAME_MAX + 1];
	if (!airlock_hostname_normalize(in, len, wildcard, out))
		return 0;
	size_t n = strlen(out);
	if (n == 0 || n > AIRLOCK_HOSTNAME_MAX || airlock_ip_literal(out, n))
		abort();
	for (size_t i = 0; i < n; i++) {
		char c = out[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		          (c == '*' && i == 0 && wildcard);
		if (!ok)
			abort();
	}
	if (!airlock_hostname_normalize(out, n, wildcard, again) || strcmp(out, again) != 0)
		abort();
	if (out[0] == '*') {
		static psl_ctx_t *psl;
		if (!psl)
			psl = psl_latest(NULL);
		if (!psl || psl_is_public_suffix2(psl, out + 2, PSL_TYPE_ANY))
			abort();
		/* "*.a.b" never matches "a.b", and does match "x.a.b". */
		if (airlock_egress_host_matches(out, out + 2))
			abort();
		char host[AIRLOCK_HOSTNAME_MAX + 2];
		host[0] = 'x';
		memcpy(host + 1, out + 1, n);
		if (!airlock_egress_host_matches(out, host))
			abort();
	} else if (!airlock_egress_host_matches(out, out)) {
		abort();
	}
	return 0;
}
