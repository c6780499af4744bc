/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_FUZZ_CONNECT_PROBE_H
#define AIRLOCK_FUZZ_CONNECT_PROBE_H

/* Shared by fuzz/fuzz_connect.c and tests/test_egress_connect.c: parse
 * buf[0..len) from its own exactly sized heap copy (so a read past len is an
 * ASan report), with *ret first filled with a sentinel (0xa5) so that
 * "written only for OK" can be checked. */

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/egress.h"

#define CONNECT_PROBE_SENTINEL 0xa5

static inline airlock_connect_status connect_probe_parse(const void *buf, size_t len,
                                                         airlock_connect_request *ret)
{
	char *copy = malloc(len ? len : 1);
	if (!copy)
		abort();
	memcpy(copy, buf, len);
	memset(ret, CONNECT_PROBE_SENTINEL, sizeof(*ret));
	airlock_connect_status s = airlock_connect_parse(copy, len, ret);
	free(copy);
	return s;
}

/* The same for the byte-by-byte parser: buf[0..len) from its own exactly
 * sized copy (a new copy on every call, so the parser can keep no pointer
 * into an earlier one), *ret filled with the sentinel first. */
static inline airlock_connect_status connect_probe_feed(airlock_connect_parser *p, const void *buf,
                                                        size_t len, airlock_connect_request *ret)
{
	char *copy = malloc(len ? len : 1);
	if (!copy)
		abort();
	memcpy(copy, buf, len);
	memset(ret, CONNECT_PROBE_SENTINEL, sizeof(*ret));
	airlock_connect_status s = airlock_connect_parse_more(p, copy, len, ret);
	free(copy);
	return s;
}

/* True when the parser did not write *r. */
static inline bool connect_probe_untouched(const airlock_connect_request *r)
{
	const unsigned char *p = (const unsigned char *)r;
	for (size_t i = 0; i < sizeof(*r); i++)
		if (p[i] != CONNECT_PROBE_SENTINEL)
			return false;
	return true;
}

#endif
