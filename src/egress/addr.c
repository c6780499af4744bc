/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The address denylist (sandbox-isolation.md, "What the proxy does on
 * CONNECT"). Not configurable, applied in both modes. The specification's
 * table, plus the ranges that have each been a real bypass in other proxies:
 * the unspecified addresses, multicast, broadcast and 240/4, and every
 * standard way of carrying an IPv4 address inside an IPv6 one. An embedded
 * IPv4 address is unwrapped and judged exactly as the IPv4 address would be,
 * so ::ffff:169.254.169.254 is the metadata address, not "some IPv6 address
 * outside fe80::/10".
 *
 * Documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24) are
 * deliberately not on the list: the specification's table does not name
 * them, and the egress tests put their public hosts in 198.51.100.0/24.
 */
#include "airlock/egress.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static const char *const class_names[AIRLOCK_ADDR__MAX] = {
	[AIRLOCK_ADDR_INVALID] = "INVALID",
	[AIRLOCK_ADDR_PUBLIC] = "PUBLIC",
	[AIRLOCK_ADDR_METADATA] = "METADATA",
	[AIRLOCK_ADDR_THIS_NETWORK] = "THIS_NETWORK",
	[AIRLOCK_ADDR_PRIVATE] = "PRIVATE",
	[AIRLOCK_ADDR_LOOPBACK] = "LOOPBACK",
	[AIRLOCK_ADDR_LINK_LOCAL] = "LINK_LOCAL",
	[AIRLOCK_ADDR_CGNAT] = "CGNAT",
	[AIRLOCK_ADDR_MULTICAST] = "MULTICAST",
	[AIRLOCK_ADDR_BROADCAST] = "BROADCAST",
};

const char *airlock_addr_class_name(airlock_addr_class c)
{
	if ((unsigned)c >= AIRLOCK_ADDR__MAX)
		return class_names[AIRLOCK_ADDR_INVALID];
	return class_names[c];
}

/*
 * The cloud metadata service: on most providers it hands instance
 * credentials to anything that asks, so it is named on its own rather than
 * left to fall inside 169.254.0.0/16 (the specification calls it out).
 */
#define METADATA_V4 UINT32_C(0xa9fea9fe) /* 169.254.169.254 */

/* True when h (host order) is inside prefix/len. */
static bool v4_in(uint32_t h, uint32_t prefix, unsigned len)
{
	uint32_t mask = len == 0 ? 0 : UINT32_MAX << (32 - len);
	return (h & mask) == prefix;
}

static airlock_addr_class classify_v4(uint32_t h)
{
	if (h == METADATA_V4)
		return AIRLOCK_ADDR_METADATA;
	if (h == UINT32_C(0xffffffff)) /* 255.255.255.255 */
		return AIRLOCK_ADDR_BROADCAST;
	if (v4_in(h, UINT32_C(0x00000000), 8)) /* 0.0.0.0/8, 0.0.0.0 included */
		return AIRLOCK_ADDR_THIS_NETWORK;
	if (v4_in(h, UINT32_C(0x0a000000), 8)) /* 10.0.0.0/8 */
		return AIRLOCK_ADDR_PRIVATE;
	if (v4_in(h, UINT32_C(0x64400000), 10)) /* 100.64.0.0/10 */
		return AIRLOCK_ADDR_CGNAT;
	if (v4_in(h, UINT32_C(0x7f000000), 8)) /* 127.0.0.0/8 */
		return AIRLOCK_ADDR_LOOPBACK;
	if (v4_in(h, UINT32_C(0xa9fe0000), 16)) /* 169.254.0.0/16 */
		return AIRLOCK_ADDR_LINK_LOCAL;
	if (v4_in(h, UINT32_C(0xac100000), 12)) /* 172.16.0.0/12 */
		return AIRLOCK_ADDR_PRIVATE;
	if (v4_in(h, UINT32_C(0xc0a80000), 16)) /* 192.168.0.0/16 */
		return AIRLOCK_ADDR_PRIVATE;
	if (v4_in(h, UINT32_C(0xe0000000), 4)) /* 224.0.0.0/4 */
		return AIRLOCK_ADDR_MULTICAST;
	/* 240.0.0.0/4 is reserved: never a destination, and some stacks treat
	 * parts of it as broadcast. The header files it with broadcast. */
	if (v4_in(h, UINT32_C(0xf0000000), 4))
		return AIRLOCK_ADDR_BROADCAST;
	return AIRLOCK_ADDR_PUBLIC;
}

static uint32_t v4_at(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

static bool v6_prefix(const uint8_t *b, const uint8_t *prefix, size_t n)
{
	return memcmp(b, prefix, n) == 0;
}

static bool all_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

/*
 * RFC 6052 section 2.2: where the IPv4 address sits in an IPv4-embedded IPv6
 * address for each prefix length. Bits 64-71 (the "u" octet) are skipped.
 */
static uint32_t rfc6052_extract(const uint8_t *b, unsigned plen)
{
	uint8_t v4[4];
	switch (plen) {
	case 32: memcpy(v4, b + 4, 4); break;
	case 40: memcpy(v4, b + 5, 3); v4[3] = b[9]; break;
	case 48: memcpy(v4, b + 6, 2); memcpy(v4 + 2, b + 9, 2); break;
	case 56: v4[0] = b[7]; memcpy(v4 + 1, b + 9, 3); break;
	case 64: memcpy(v4, b + 9, 4); break;
	default: memcpy(v4, b + 12, 4); break; /* 96 */
	}
	return v4_at(v4);
}

static airlock_addr_class classify_v6(const uint8_t *b)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const uint8_t nat64[12] = { 0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0 };
	static const uint8_t nat64_local[6] = { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 };
	static const uint8_t teredo[4] = { 0x20, 0x01, 0x00, 0x00 };
	/* AWS's IPv6 instance metadata endpoint, fd00:ec2::254: inside fc00::/7
	 * and refused anyway, but it is the same credential service, so the
	 * refusal names it the way it names 169.254.169.254. */
	static const uint8_t aws_metadata[16] = { 0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0,
	                                          0,    0,    0,    0,    0, 0, 0x02, 0x54 };

	if (all_zero(b, 16)) /* :: */
		return AIRLOCK_ADDR_THIS_NETWORK;
	if (all_zero(b, 15) && b[15] == 1) /* ::1 */
		return AIRLOCK_ADDR_LOOPBACK;

	/* IPv4-mapped ::ffff:0:0/96: what the kernel dials is the IPv4 address. */
	if (v6_prefix(b, mapped, sizeof(mapped)))
		return classify_v4(v4_at(b + 12));
	/* IPv4-compatible ::/96 (deprecated, RFC 4291 2.5.5.1): some stacks
	 * still route it as the IPv4 address. :: and ::1 are handled above. */
	if (all_zero(b, 12))
		return classify_v4(v4_at(b + 12));
	/* NAT64 well-known prefix 64:ff9b::/96 (RFC 6052): a NAT64 gateway on
	 * the host's network translates it to the IPv4 address. */
	if (v6_prefix(b, nat64, sizeof(nat64)))
		return classify_v4(v4_at(b + 12));
	/*
	 * NAT64 local-use prefix 64:ff9b:1::/48 (RFC 8215). The operator of the
	 * translator picks the prefix length (48..96), so where the IPv4 address
	 * sits is not knowable from the address alone. The prefix is for local
	 * networks only and no public destination lives behind it, so the whole
	 * /48 is refused; every possible embedding is unwrapped first so that a
	 * metadata address hidden in any of them is reported as METADATA.
	 */
	if (v6_prefix(b, nat64_local, sizeof(nat64_local))) {
		static const unsigned plens[] = { 48, 56, 64, 96 };
		for (size_t i = 0; i < sizeof(plens) / sizeof(plens[0]); i++)
			if (classify_v4(rfc6052_extract(b, plens[i])) == AIRLOCK_ADDR_METADATA)
				return AIRLOCK_ADDR_METADATA;
		return AIRLOCK_ADDR_PRIVATE;
	}
	/* 6to4 2002::/16 (RFC 3056): the IPv4 address is bits 16-47. A 6to4
	 * relay delivers to it. */
	if (b[0] == 0x20 && b[1] == 0x02)
		return classify_v4(v4_at(b + 2));
	/*
	 * Teredo 2001::/32 (RFC 4380): the server's IPv4 address is bits 32-63
	 * and the client's is bits 96-127, XORed with ones ("obfuscated", which
	 * hides nothing). A relay turns a packet for it into UDP to the client's
	 * IPv4 address, so a Teredo address can aim at any IPv4 address. Teredo
	 * is obsolete and no destination an operator allowlists by name needs
	 * it, so the whole prefix is refused: as the class of an embedded
	 * non-public address when there is one (metadata is named), otherwise
	 * as PRIVATE, the nearest class for "not a public destination".
	 */
	if (v6_prefix(b, teredo, sizeof(teredo))) {
		uint32_t client = ~v4_at(b + 12);
		airlock_addr_class c = classify_v4(client);
		if (c != AIRLOCK_ADDR_PUBLIC)
			return c;
		c = classify_v4(v4_at(b + 4));
		if (c != AIRLOCK_ADDR_PUBLIC)
			return c;
		return AIRLOCK_ADDR_PRIVATE;
	}

	if (memcmp(b, aws_metadata, 16) == 0)
		return AIRLOCK_ADDR_METADATA;
	if ((b[0] & 0xfe) == 0xfc) /* fc00::/7 unique local */
		return AIRLOCK_ADDR_PRIVATE;
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) /* fe80::/10 link-local */
		return AIRLOCK_ADDR_LINK_LOCAL;
	/* fec0::/10, site-local: deprecated (RFC 3879) but still routed as local
	 * by some stacks; the private class is what it was meant to be. */
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
		return AIRLOCK_ADDR_PRIVATE;
	if (b[0] == 0xff) /* ff00::/8 */
		return AIRLOCK_ADDR_MULTICAST;
	return AIRLOCK_ADDR_PUBLIC;
}

airlock_addr_class airlock_addr_classify(const airlock_addr *a)
{
	if (!a)
		return AIRLOCK_ADDR_INVALID;
	if (a->family == AF_INET)
		return classify_v4(ntohl(a->v4.s_addr));
	if (a->family == AF_INET6)
		return classify_v6(a->v6.s6_addr);
	return AIRLOCK_ADDR_INVALID;
}

bool airlock_addr_parse(const char *s, airlock_addr *ret)
{
	airlock_addr a;

	if (!s || !ret)
		return false;
	memset(&a, 0, sizeof(a));
	/* inet_pton's forms only: exactly four decimal parts for IPv4, the RFC
	 * 4291 text forms for IPv6, no zone, no brackets. The looser spellings a
	 * URL parser accepts are airlock_ip_literal's business. */
	if (inet_pton(AF_INET, s, &a.v4) == 1) {
		a.family = AF_INET;
	} else if (inet_pton(AF_INET6, s, &a.v6) == 1) {
		a.family = AF_INET6;
	} else {
		return false;
	}
	*ret = a;
	return true;
}

void airlock_addr_format(const airlock_addr *a, char out[46])
{
	out[0] = 0;
	if (!a)
		return;
	if (a->family == AF_INET) {
		if (!inet_ntop(AF_INET, &a->v4, out, 46))
			out[0] = 0;
	} else if (a->family == AF_INET6) {
		if (!inet_ntop(AF_INET6, &a->v6, out, 46))
			out[0] = 0;
	}
}
