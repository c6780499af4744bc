/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the proxy's CONNECT request parser with arbitrary bytes: it is the
 * one parser that reads what a sandbox sends. Properties:
 *   - the answer is one of the enum's values, and its status code matches;
 *   - *ret is written only for OK (a sentinel fill survives otherwise);
 *   - OK: consumed is within len and the cap, at least 4, and the bytes
 *     just before it are "\r\n\r\n"; the request starts "CONNECT "; the host
 *     is non-empty, NUL-terminated within its array, at most
 *     AIRLOCK_CONNECT_HOST_MAX bytes of [A-Za-z0-9.-] or "[" hex/':'/'.'
 *     "]"; the port is not 0;
 *   - INCOMPLETE only while len < AIRLOCK_CONNECT_REQUEST_MAX;
 *   - every prefix of an OK request shorter than consumed is INCOMPLETE
 *     (never OK), and the first consumed bytes alone give the same answer;
 *   - for any input, a prefix is INCOMPLETE or gets the whole input's
 *     answer: how the bytes were split across reads never changes a verdict;
 *   - the byte-by-byte parser (airlock_connect_parse_more), fed the input
 *     in pieces (one byte at a time up to ALL_PREFIXES_MAX, then pieces of
 *     1..64 bytes the input's own bytes choose, and a second walk cut where
 *     the input's first byte says), answers at every call exactly what the
 *     one-shot parser answers for that prefix, *ret included, and writes
 *     *ret only for OK.
 * Each prefix is parsed from its own exactly sized copy, so a read past len
 * is an ASan report.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/egress.h"
#include "connect_probe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every prefix is checked up to this length; past it, a sample. */
#define ALL_PREFIXES_MAX 1024

static bool same(const airlock_connect_request *a, const airlock_connect_request *b)
{
	return a->port == b->port && a->consumed == b->consumed && strcmp(a->host, b->host) == 0;
}

static void check_ok(const uint8_t *data, size_t size, const airlock_connect_request *r)
{
	if (r->consumed > size || r->consumed > AIRLOCK_CONNECT_REQUEST_MAX || r->consumed < 4)
		abort();
	if (memcmp(data + r->consumed - 4, "\r\n\r\n", 4) != 0)
		abort();
	if (r->consumed < 8 || memcmp(data, "CONNECT ", 8) != 0)
		abort();
	const char *nul = memchr(r->host, 0, sizeof(r->host));
	if (!nul)
		abort();
	size_t n = (size_t)(nul - r->host);
	if (n == 0 || n > AIRLOCK_CONNECT_HOST_MAX)
		abort();
	if (r->host[0] == '[') {
		if (n < 4 || r->host[n - 1] != ']')
			abort();
		for (size_t i = 1; i + 1 < n; i++) {
			char c = r->host[i];
			if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
			      c == ':' || c == '.'))
				abort();
		}
	} else {
		for (size_t i = 0; i < n; i++) {
			char c = r->host[i];
			if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      c == '.' || c == '-'))
				abort();
		}
	}
	if (r->port == 0)
		abort();
}

/* The answer for the first p bytes must agree with the whole input's. */
static void check_prefix(const uint8_t *data, size_t p, airlock_connect_status whole,
                         const airlock_connect_request *whole_req)
{
	airlock_connect_request r;
	airlock_connect_status s = connect_probe_parse(data, p, &r);
	if (whole == AIRLOCK_CONNECT_OK && p < whole_req->consumed) {
		/* A prefix of a valid request has nothing wrong in it. */
		if (s != AIRLOCK_CONNECT_INCOMPLETE)
			abort();
	} else if (s != AIRLOCK_CONNECT_INCOMPLETE && s != whole) {
		abort();
	}
	if (s == AIRLOCK_CONNECT_OK ? !same(&r, whole_req) : !connect_probe_untouched(&r))
		abort();
}

/* Feed prefixes of increasing length to one byte-by-byte parser; each answer
 * must be the one-shot parser's for the same prefix. */
static void check_stream(const uint8_t *data, size_t size, size_t first_cut)
{
	/* Past the cap nothing changes: a few bytes beyond it are enough. */
	size_t end = size < AIRLOCK_CONNECT_REQUEST_MAX + 8 ? size : AIRLOCK_CONNECT_REQUEST_MAX + 8;
	airlock_connect_parser p;
	airlock_connect_parser_init(&p);
	size_t at = first_cut < end ? first_cut : 0;
	for (;;) {
		airlock_connect_request rs, ro;
		airlock_connect_status s = connect_probe_feed(&p, data, at, &rs);
		airlock_connect_status o = connect_probe_parse(data, at, &ro);
		if (s != o)
			abort();
		if (s == AIRLOCK_CONNECT_OK ? !same(&rs, &ro) : !connect_probe_untouched(&rs))
			abort();
		if (at == end)
			break;
		size_t step = at < ALL_PREFIXES_MAX ? 1 : 1 + data[at % size] % 64;
		at = step < end - at ? at + step : end;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	airlock_connect_request r;
	memset(&r, 0xa5, sizeof(r));
	airlock_connect_status s = airlock_connect_parse((const char *)data, size, &r);

	int code = airlock_connect_status_code(s);
	switch (s) {
	case AIRLOCK_CONNECT_INCOMPLETE:
		if (code != 0 || size >= AIRLOCK_CONNECT_REQUEST_MAX)
			abort();
		break;
	case AIRLOCK_CONNECT_OK:
		if (code != 200)
			abort();
		check_ok(data, size, &r);
		break;
	case AIRLOCK_CONNECT_BAD_REQUEST:
		if (code != 400)
			abort();
		break;
	case AIRLOCK_CONNECT_NOT_CONNECT:
		if (code != 405)
			abort();
		break;
	case AIRLOCK_CONNECT_BAD_VERSION:
		if (code != 505)
			abort();
		break;
	case AIRLOCK_CONNECT_TOO_LARGE:
		if (code != 431)
			abort();
		break;
	default:
		abort();
	}
	if (s != AIRLOCK_CONNECT_OK && !connect_probe_untouched(&r))
		abort();

	check_stream(data, size, 0);
	if (size > 0)
		check_stream(data, size, data[0] * size / 256);

	if (s == AIRLOCK_CONNECT_OK) {
		/* The terminator is the end of the request: the first consumed
		 * bytes alone say the same, and no shorter prefix says OK. */
		check_prefix(data, r.consumed, s, &r);
		if (r.consumed <= ALL_PREFIXES_MAX) {
			for (size_t p = 0; p < r.consumed; p++)
				check_prefix(data, p, s, &r);
			return 0;
		}
	} else if (size <= ALL_PREFIXES_MAX / 4) {
		for (size_t p = 0; p < size; p++)
			check_prefix(data, p, s, &r);
		return 0;
	}
	/* Large inputs: a sample of prefixes, the last few bytes (where a
	 * pending CR or a line end sits) and cuts spread through the rest. */
	size_t end = s == AIRLOCK_CONNECT_OK ? r.consumed : size;
	for (size_t k = 1; k <= 8 && k <= end; k++)
		check_prefix(data, end - k, s, &r);
	for (size_t k = 1; k < 16; k++)
		check_prefix(data, end / 16 * k + (data[k % size] % 16), s, &r);
	return 0;
}
