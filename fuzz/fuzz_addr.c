/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the address classifier (include/airlock/egress.h, the
 * address denylist). Three views of the input:
 *
 *   - as text: airlock_addr_parse; a parsed address classifies to a real
 *     class, formats, and the formatted text parses back to the same address
 *     and the same class;
 *   - the first 4 bytes as an IPv4 address: its class agrees with an
 *     independent oracle (the specification's table written as CIDR text,
 *     parsed with inet_pton), and every standard IPv6 embedding of it
 *     (mapped, translated, compatible, NAT64, 6to4) classifies the same;
 *   - the first 16 bytes as an IPv6 address: it classifies to a real class,
 *     an address inside an embedding prefix agrees with its unwrapped IPv4
 *     address, and nothing outside 2000::/3 (but the embeddings) and
 *     nothing in the IPv6 special-purpose blocks is public.
 *
 * Any disagreement aborts.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "airlock/egress.h"

#define FUZZ_TEXT_MAX 128

static void fuzz_fail(const char *what, const airlock_addr *a)
{
	char buf[46];
	airlock_addr_format(a, buf);
	fprintf(stderr, "fuzz_addr: %s: %s\n", what, buf);
	abort();
}

/* The oracle: the denylist as the specification and the IANA special-purpose
 * registry write it, in text. */
static const struct {
	const char *net;
	unsigned len;
	airlock_addr_class cls;
} oracle_v4[] = {
	/* most specific first: the named metadata and host-service addresses */
	{ "169.254.169.254", 32, AIRLOCK_ADDR_METADATA },
	{ "169.254.170.2", 32, AIRLOCK_ADDR_METADATA },
	{ "169.254.170.23", 32, AIRLOCK_ADDR_METADATA },
	{ "169.254.0.23", 32, AIRLOCK_ADDR_METADATA },
	{ "100.100.100.200", 32, AIRLOCK_ADDR_METADATA },
	{ "192.0.0.192", 32, AIRLOCK_ADDR_METADATA },
	{ "168.63.129.16", 32, AIRLOCK_ADDR_METADATA },
	{ "255.255.255.255", 32, AIRLOCK_ADDR_BROADCAST },
	{ "0.0.0.0", 8, AIRLOCK_ADDR_THIS_NETWORK },
	{ "10.0.0.0", 8, AIRLOCK_ADDR_PRIVATE },
	{ "100.64.0.0", 10, AIRLOCK_ADDR_CGNAT },
	{ "127.0.0.0", 8, AIRLOCK_ADDR_LOOPBACK },
	{ "169.254.0.0", 16, AIRLOCK_ADDR_LINK_LOCAL },
	{ "172.16.0.0", 12, AIRLOCK_ADDR_PRIVATE },
	{ "192.0.0.0", 24, AIRLOCK_ADDR_RESERVED },
	{ "192.0.2.0", 24, AIRLOCK_ADDR_RESERVED },
	{ "192.88.99.0", 24, AIRLOCK_ADDR_RESERVED },
	{ "192.168.0.0", 16, AIRLOCK_ADDR_PRIVATE },
	{ "198.18.0.0", 15, AIRLOCK_ADDR_RESERVED },
	{ "203.0.113.0", 24, AIRLOCK_ADDR_RESERVED },
	{ "224.0.0.0", 4, AIRLOCK_ADDR_MULTICAST },
	{ "240.0.0.0", 4, AIRLOCK_ADDR_BROADCAST },
};

/* IPv6 blocks that are never public (besides fc00::/7, fe80::/10, ff00::/8). */
static const struct {
	const char *net;
	unsigned len;
} never_public_v6[] = {
	{ "2001::", 23 }, { "2001:db8::", 32 }, { "3fff::", 20 }, { "100::", 64 },
	{ "5f00::", 16 }, { "fec0::", 10 },
};

static bool v6_in_text(const uint8_t b[16], const char *net, unsigned len)
{
	uint8_t p[16];
	if (inet_pton(AF_INET6, net, p) != 1)
		abort();
	for (unsigned bit = 0; bit < len; bit++) {
		unsigned byte = bit / 8, shift = 7 - bit % 8;
		if (((b[byte] >> shift) & 1) != ((p[byte] >> shift) & 1))
			return false;
	}
	return true;
}

static airlock_addr_class oracle(const uint8_t v4[4])
{
	for (size_t i = 0; i < sizeof(oracle_v4) / sizeof(oracle_v4[0]); i++) {
		uint8_t net[4];
		if (inet_pton(AF_INET, oracle_v4[i].net, net) != 1)
			abort();
		unsigned bits = oracle_v4[i].len;
		bool in = true;
		for (unsigned b = 0; b < bits && in; b++) {
			unsigned byte = b / 8, shift = 7 - b % 8;
			in = ((v4[byte] >> shift) & 1) == ((net[byte] >> shift) & 1);
		}
		if (in)
			return oracle_v4[i].cls;
	}
	return AIRLOCK_ADDR_PUBLIC;
}

static airlock_addr v6_from(const uint8_t b[16])
{
	airlock_addr a;
	memset(&a, 0, sizeof(a));
	a.family = AF_INET6;
	memcpy(a.v6.s6_addr, b, 16);
	return a;
}

static void check_v4(const uint8_t v4[4])
{
	airlock_addr a;
	memset(&a, 0, sizeof(a));
	a.family = AF_INET;
	memcpy(&a.v4, v4, 4);
	airlock_addr_class want = oracle(v4);
	if (airlock_addr_classify(&a) != want)
		fuzz_fail("IPv4 class differs from the oracle", &a);

	uint8_t b[16];
	/* ::ffff:v4 */
	memset(b, 0, 16);
	b[10] = b[11] = 0xff;
	memcpy(b + 12, v4, 4);
	airlock_addr e = v6_from(b);
	if (airlock_addr_classify(&e) != want)
		fuzz_fail("mapped form differs", &e);
	/* ::ffff:0:v4 (IPv4-translated) */
	b[8] = b[9] = 0xff;
	b[10] = b[11] = 0;
	e = v6_from(b);
	if (airlock_addr_classify(&e) != want)
		fuzz_fail("translated form differs", &e);
	/* ::v4, past :: and ::1 */
	b[8] = b[9] = 0;
	e = v6_from(b);
	bool own = v4[0] == 0 && v4[1] == 0 && v4[2] == 0 && v4[3] <= 1;
	if (!own && airlock_addr_classify(&e) != want)
		fuzz_fail("compatible form differs", &e);
	/* 64:ff9b::v4 */
	b[1] = 0x64;
	b[2] = 0xff;
	b[3] = 0x9b;
	e = v6_from(b);
	if (airlock_addr_classify(&e) != want)
		fuzz_fail("NAT64 form differs", &e);
	/* 2002:v4::, with whatever follows */
	memset(b, 0x5a, 16);
	b[0] = 0x20;
	b[1] = 0x02;
	memcpy(b + 2, v4, 4);
	e = v6_from(b);
	if (airlock_addr_classify(&e) != want)
		fuzz_fail("6to4 form differs", &e);
}

static void check_v6(const uint8_t b[16])
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const uint8_t translated[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0 };
	static const uint8_t compat[12] = { 0 };
	static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b };
	airlock_addr a = v6_from(b);
	airlock_addr_class c = airlock_addr_classify(&a);
	if (c <= AIRLOCK_ADDR_INVALID || c >= AIRLOCK_ADDR__MAX)
		fuzz_fail("IPv6 class out of range", &a);
	if (!airlock_addr_class_name(c))
		abort();
	if (memcmp(b, mapped, 12) == 0 || memcmp(b, translated, 12) == 0 ||
	    memcmp(b, nat64, 12) == 0 || (b[0] == 0x20 && b[1] == 0x02)) {
		const uint8_t *v4 = b[0] == 0x20 ? b + 2 : b + 12;
		if (c != oracle(v4))
			fuzz_fail("embedded IPv4 judged differently", &a);
	}
	/* Nothing on the table's IPv6 side is ever public. */
	if (c == AIRLOCK_ADDR_PUBLIC &&
	    ((b[0] & 0xfe) == 0xfc || (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) || b[0] == 0xff))
		fuzz_fail("a denied IPv6 range classified public", &a);
	/* Outside 2000::/3 only an embedded public IPv4 address is public. */
	if (c == AIRLOCK_ADDR_PUBLIC && (b[0] & 0xe0) != 0x20 && memcmp(b, mapped, 12) != 0 &&
	    memcmp(b, translated, 12) != 0 && memcmp(b, nat64, 12) != 0 &&
	    memcmp(b, compat, 12) != 0)
		fuzz_fail("an address outside 2000::/3 classified public", &a);
	for (size_t i = 0; i < sizeof(never_public_v6) / sizeof(never_public_v6[0]); i++)
		if (c == AIRLOCK_ADDR_PUBLIC &&
		    v6_in_text(b, never_public_v6[i].net, never_public_v6[i].len))
			fuzz_fail("an IPv6 special-purpose block classified public", &a);
}

static void check_text(const uint8_t *data, size_t size)
{
	char text[FUZZ_TEXT_MAX + 1];
	size_t n = size < FUZZ_TEXT_MAX ? size : FUZZ_TEXT_MAX;
	memcpy(text, data, n);
	text[n] = 0;

	airlock_addr a, b;
	if (!airlock_addr_parse(text, &a))
		return;
	airlock_addr_class c = airlock_addr_classify(&a);
	if (c <= AIRLOCK_ADDR_INVALID || c >= AIRLOCK_ADDR__MAX)
		fuzz_fail("parsed address has no class", &a);
	char out[46];
	airlock_addr_format(&a, out);
	if (!airlock_addr_parse(out, &b) || memcmp(&a, &b, sizeof(a)) != 0)
		fuzz_fail("format does not parse back", &a);
	if (airlock_addr_classify(&b) != c)
		fuzz_fail("class changed across a round trip", &a);
	if (a.family == AF_INET)
		check_v4((const uint8_t *)&a.v4);
	else
		check_v6(a.v6.s6_addr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_text(data, size);
	if (size >= 4)
		check_v4(data);
	if (size >= 16)
		check_v6(data);
	return 0;
}
