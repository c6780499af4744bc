/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The address denylist and the one evaluation function (include/
 * airlock/egress.h; the specification, "What the proxy does on CONNECT").
 *
 * The classifier table is written out by hand from the specification's
 * ranges, at every edge: the first and last address inside each range and
 * the addresses just outside it. Every IPv4 row is then checked again in
 * each standard IPv6 embedding, built here by byte layout rather than by the
 * classifier's own helpers. The evaluation runs over a table-driven fake
 * resolver that counts its calls: one resolution per evaluation, none for a
 * refusal that comes before it.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "airlock/egress.h"
#include "airlock/proxy.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the classifier --------------------------------------------------------- */

typedef struct {
	const char *addr;
	airlock_addr_class want;
} class_row;

#define PUB AIRLOCK_ADDR_PUBLIC
#define MD AIRLOCK_ADDR_METADATA
#define THIS AIRLOCK_ADDR_THIS_NETWORK
#define PRIV AIRLOCK_ADDR_PRIVATE
#define LOOP AIRLOCK_ADDR_LOOPBACK
#define LL AIRLOCK_ADDR_LINK_LOCAL
#define CGN AIRLOCK_ADDR_CGNAT
#define MC AIRLOCK_ADDR_MULTICAST
#define BC AIRLOCK_ADDR_BROADCAST
#define RES AIRLOCK_ADDR_RESERVED

static const class_row v4_rows[] = {
	{ "0.0.0.0", THIS },           { "0.0.0.1", THIS },
	{ "0.255.255.255", THIS },     { "1.0.0.0", PUB },
	{ "9.255.255.255", PUB },      { "10.0.0.0", PRIV },
	{ "10.255.255.255", PRIV },    { "11.0.0.0", PUB },
	{ "100.63.255.255", PUB },     { "100.64.0.0", CGN },
	{ "100.127.255.255", CGN },    { "100.128.0.0", PUB },
	{ "126.255.255.255", PUB },    { "127.0.0.0", LOOP },
	{ "127.0.0.1", LOOP },         { "127.255.255.255", LOOP },
	{ "128.0.0.0", PUB },          { "169.253.255.255", PUB },
	{ "169.254.0.0", LL },         { "169.254.169.253", LL },
	{ "169.254.169.254", MD },     { "169.254.169.255", LL },
	{ "169.254.255.255", LL },     { "169.255.0.0", PUB },
	{ "172.15.255.255", PUB },     { "172.16.0.0", PRIV },
	{ "172.31.255.255", PRIV },    { "172.32.0.0", PUB },
	/* the IANA special-purpose registry's not-globally-reachable blocks */
	{ "191.255.255.255", PUB },    { "192.0.0.0", RES },
	{ "192.0.0.9", RES },          { "192.0.0.255", RES },
	{ "192.0.1.0", PUB },          { "192.0.1.255", PUB },
	{ "192.0.2.0", RES },          { "192.0.2.255", RES },
	{ "192.0.3.0", PUB },          { "192.88.98.255", PUB },
	{ "192.88.99.0", RES },        { "192.88.99.255", RES },
	{ "192.88.100.0", PUB },
	{ "192.167.255.255", PUB },    { "192.168.0.0", PRIV },
	{ "192.168.255.255", PRIV },   { "192.169.0.0", PUB },
	{ "198.17.255.255", PUB },     { "198.18.0.0", RES },
	{ "198.19.255.255", RES },     { "198.20.0.0", PUB },
	{ "198.51.99.255", PUB },      { "198.51.101.0", PUB },
	{ "203.0.112.255", PUB },      { "203.0.113.0", RES },
	{ "203.0.113.255", RES },      { "203.0.114.0", PUB },
	/* the named metadata and host-service addresses, and their neighbours */
	{ "168.63.129.15", PUB },      { "168.63.129.16", MD },
	{ "168.63.129.17", PUB },      { "100.100.100.199", CGN },
	{ "100.100.100.200", MD },     { "100.100.100.201", CGN },
	{ "192.0.0.191", RES },        { "192.0.0.192", MD },
	{ "192.0.0.193", RES },        { "169.254.170.2", MD },
	{ "169.254.170.23", MD },      { "169.254.0.23", MD },
	{ "169.254.170.3", LL },
	{ "223.255.255.255", PUB },    { "224.0.0.0", MC },
	{ "239.255.255.255", MC },     { "240.0.0.0", BC },
	{ "255.255.255.254", BC },     { "255.255.255.255", BC },
	/* the test network the egress tests use, and an ordinary public one */
	{ "198.51.100.1", PUB },       { "8.8.8.8", PUB },
};

static const class_row v6_rows[] = {
	{ "::", THIS },
	{ "::1", LOOP },
	/* IPv4-compatible ::/96 past :: and ::1 is unwrapped */
	{ "::2", THIS },
	{ "::0.0.1.0", THIS },
	{ "::ffff:ffff", BC },
	/* just outside ::/96 and ::ffff:0:0/96: reserved space, not global */
	{ "::1:0:0", RES },
	{ "::fffe:ffff:ffff", RES },
	{ "::1:0:0:0", RES },
	{ "::ffff:0:0", THIS },
	{ "::ffff:ffff:ffff", BC },
	/* IPv4-translated ::ffff:0:0:0/96 (RFC 2765) is unwrapped */
	{ "::fffe:ffff:ffff:ffff", RES },
	{ "::ffff:0:0:0", THIS },
	{ "::ffff:0:a9fe:a9fe", MD },
	{ "::ffff:0:808:808", PUB },
	{ "::ffff:0:ffff:ffff", BC },
	{ "::ffff:1:0:0", RES },
	/* outside 2000::/3: reserved, discard-only, SRv6 */
	{ "100::", RES },
	{ "100::ffff:ffff:ffff:ffff", RES },
	{ "5f00::1", RES },
	{ "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", RES },
	{ "2000::", PUB },
	{ "3fff:f000::", PUB },
	{ "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PUB },
	{ "4000::", RES },
	{ "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", RES },
	{ "fc00::", PRIV },
	{ "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PRIV },
	{ "fd00:ec2::254", MD },
	{ "fd00:ec2::253", PRIV },
	{ "fd00:ec2::23", MD },
	{ "fd20:ce::254", MD },
	{ "fd20:ce::253", PRIV },
	{ "fe00::", RES },
	{ "fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", RES },
	{ "fe80::", LL },
	{ "fe80::1", LL },
	{ "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", LL },
	{ "fec0::", PRIV }, /* deprecated site-local */
	{ "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PRIV },
	{ "ff00::", MC },
	{ "ff02::1", MC },
	{ "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", MC },
	/* NAT64 well-known prefix, its edges */
	{ "64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", RES },
	{ "64:ff9b::", THIS },
	{ "64:ff9b::ffff:ffff", BC },
	{ "64:ff9b::1:0:0", RES },
	/* NAT64 local-use 64:ff9b:1::/48: refused whole */
	{ "64:ff9b:0:ffff:ffff:ffff:ffff:ffff", RES },
	{ "64:ff9b:1::", PRIV },
	{ "64:ff9b:1::808:808", PRIV },
	{ "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", PRIV },
	{ "64:ff9b:2::", RES },
	/* 6to4 edges */
	{ "2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PUB },
	{ "2002::", THIS },
	{ "2002:808:808::1", PUB },
	{ "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", BC },
	{ "2003::", PUB },
	/* Teredo 2001::/32: refused whole */
	{ "2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PUB },
	{ "2001::", BC },                           /* client ~0 = 255.255.255.255 */
	{ "2001:0:4136:e378:8000:63bf:f7f7:f7f7", PRIV }, /* client 8.8.8.8 */
	{ "2001:0:ffff:ffff:ffff:ffff:ffff:ffff", THIS },  /* client 0.0.0.0 */
	/* the rest of 2001::/23, IETF protocol assignments */
	{ "2001:1::", RES },
	{ "2001:2::", RES },
	{ "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", RES },
	{ "2001:200::", PUB },
	/* documentation: 2001:db8::/32 and 3fff::/20 */
	{ "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", PUB },
	{ "2001:db8::", RES },
	{ "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", RES },
	{ "2001:db9::", PUB },
	{ "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PUB },
	{ "3fff::", RES },
	{ "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", RES },
	{ "3fff:1000::", PUB },
	/* public IPv6 is dialable */
	{ "2606:4700::1111", PUB },
	{ "2a00:1450:4001::1", PUB },
};

/* The metadata address in every spelling the classifier must see through. */
static const char *const metadata_forms[] = {
	"169.254.169.254",
	"::ffff:169.254.169.254",
	"::ffff:a9fe:a9fe",
	"::169.254.169.254",
	"64:ff9b::169.254.169.254",
	"64:ff9b:1::a9fe:a9fe",        /* local-use, /96 layout */
	"64:ff9b:1:a9fe:a9:fe00::",    /* local-use, /48 layout (u octet skipped) */
	"64:ff9b:1:0:a9:fea9:fe00:0",  /* local-use, /64 layout */
	"::ffff:0:169.254.169.254",    /* IPv4-translated (RFC 2765) */
	"::ffff:0:a9fe:a9fe",
	"2002:a9fe:a9fe::",
	"2002:a9fe:a9fe:1:2:3:4:5",
	"2001:0:4136:e378:8000:63bf:5601:5601", /* Teredo client, obfuscated */
	"fd00:ec2::254",
	"168.63.129.16",
	"::ffff:168.63.129.16",
	"::ffff:0:a83f:8110",
	"64:ff9b::168.63.129.16",
	"2002:a83f:8110::",
	"192.0.0.192",
	"::ffff:192.0.0.192",
	"100.100.100.200",
	"::ffff:100.100.100.200",
};

static airlock_addr addr_of(const char *s)
{
	airlock_addr a;
	cr_assert(airlock_addr_parse(s, &a), "parse %s", s);
	return a;
}

static void check_row(const char *form, const airlock_addr *a, airlock_addr_class want)
{
	airlock_addr_class got = airlock_addr_classify(a);
	cr_expect_eq(got, want, "%s: got %s, want %s", form, airlock_addr_class_name(got),
	             airlock_addr_class_name(want));
}

Test(addr, v4_edges)
{
	for (size_t i = 0; i < NELEM(v4_rows); i++) {
		airlock_addr a = addr_of(v4_rows[i].addr);
		cr_assert_eq(a.family, AF_INET);
		check_row(v4_rows[i].addr, &a, v4_rows[i].want);
	}
}

Test(addr, v6_edges)
{
	for (size_t i = 0; i < NELEM(v6_rows); i++) {
		airlock_addr a = addr_of(v6_rows[i].addr);
		cr_assert_eq(a.family, AF_INET6);
		check_row(v6_rows[i].addr, &a, v6_rows[i].want);
	}
}

/* Build a v6 address from a v4 one by byte layout. */
static airlock_addr embed(const airlock_addr *v4, const uint8_t *prefix, size_t plen,
                          size_t at)
{
	airlock_addr a;
	memset(&a, 0, sizeof(a));
	a.family = AF_INET6;
	memcpy(a.v6.s6_addr, prefix, plen);
	memcpy(a.v6.s6_addr + at, &v4->v4, 4);
	return a;
}

Test(addr, every_v4_row_in_every_embedding)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const uint8_t translated[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0 };
	static const uint8_t compat[12] = { 0 };
	static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b };
	static const uint8_t six2four[2] = { 0x20, 0x02 };

	for (size_t i = 0; i < NELEM(v4_rows); i++) {
		airlock_addr v4 = addr_of(v4_rows[i].addr);
		char form[128];
		airlock_addr_class want = v4_rows[i].want;

		airlock_addr a = embed(&v4, mapped, sizeof(mapped), 12);
		snprintf(form, sizeof(form), "::ffff:%s", v4_rows[i].addr);
		check_row(form, &a, want);

		a = embed(&v4, translated, sizeof(translated), 12);
		snprintf(form, sizeof(form), "::ffff:0:%s", v4_rows[i].addr);
		check_row(form, &a, want);

		/* ::0.0.0.0 and ::0.0.0.1 are :: and ::1, their own classes */
		uint32_t h = ntohl(v4.v4.s_addr);
		if (h > 1) {
			a = embed(&v4, compat, sizeof(compat), 12);
			snprintf(form, sizeof(form), "::%s", v4_rows[i].addr);
			check_row(form, &a, want);
		}

		a = embed(&v4, nat64, sizeof(nat64), 12);
		snprintf(form, sizeof(form), "64:ff9b::%s", v4_rows[i].addr);
		check_row(form, &a, want);

		a = embed(&v4, six2four, sizeof(six2four), 2);
		snprintf(form, sizeof(form), "2002:<%s>::", v4_rows[i].addr);
		check_row(form, &a, want);
		/* the interface identifier does not change the verdict */
		memset(a.v6.s6_addr + 6, 0xab, 10);
		check_row(form, &a, want);

		/* Teredo: refused whole; a non-public client keeps its class */
		memset(&a, 0, sizeof(a));
		a.family = AF_INET6;
		a.v6.s6_addr[0] = 0x20;
		a.v6.s6_addr[1] = 0x01;
		uint32_t obf = ~v4.v4.s_addr;
		memcpy(a.v6.s6_addr + 12, &obf, 4);
		a.v6.s6_addr[4] = 8; /* server 8.8.8.8 */
		a.v6.s6_addr[5] = 8;
		a.v6.s6_addr[6] = 8;
		a.v6.s6_addr[7] = 8;
		snprintf(form, sizeof(form), "teredo client %s", v4_rows[i].addr);
		check_row(form, &a, want == PUB ? PRIV : want);
	}
}

Test(addr, metadata_in_every_form)
{
	for (size_t i = 0; i < NELEM(metadata_forms); i++) {
		airlock_addr a = addr_of(metadata_forms[i]);
		check_row(metadata_forms[i], &a, MD);
	}
}

Test(addr, parse_is_inet_pton_only)
{
	static const char *const bad[] = {
		"", "127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1", "127.0.0.1.",
		"[::1]", "fe80::1%eth0", " 127.0.0.1", "127.0.0.1 ", "1.2.3.256",
		"::1::", "localhost", "1.2.3.4:80",
	};
	airlock_addr a;
	for (size_t i = 0; i < NELEM(bad); i++)
		cr_expect(!airlock_addr_parse(bad[i], &a), "parsed \"%s\"", bad[i]);
	cr_expect(!airlock_addr_parse(NULL, &a));
	cr_expect(!airlock_addr_parse("1.2.3.4", NULL));
}

Test(addr, format_round_trips)
{
	static const char *const forms[][2] = {
		{ "198.51.100.7", "198.51.100.7" },
		{ "::FFFF:169.254.169.254", "::ffff:169.254.169.254" },
		{ "2001:DB8:0:0:0:0:0:1", "2001:db8::1" },
		{ "::", "::" },
	};
	for (size_t i = 0; i < NELEM(forms); i++) {
		airlock_addr a = addr_of(forms[i][0]), b;
		char out[46];
		airlock_addr_format(&a, out);
		cr_expect_str_eq(out, forms[i][1]);
		cr_assert(airlock_addr_parse(out, &b));
		cr_expect_eq(memcmp(&a, &b, sizeof(a)), 0);
	}
	airlock_addr z;
	memset(&z, 0, sizeof(z));
	char out[46] = "x";
	airlock_addr_format(&z, out);
	cr_expect_str_eq(out, "");
	cr_expect_eq(airlock_addr_classify(&z), AIRLOCK_ADDR_INVALID);
	cr_expect_eq(airlock_addr_classify(NULL), AIRLOCK_ADDR_INVALID);
}

Test(addr, class_names)
{
	static const char *const want[] = { "INVALID", "PUBLIC", "METADATA", "THIS_NETWORK",
		                            "PRIVATE", "LOOPBACK", "LINK_LOCAL", "CGNAT",
		                            "MULTICAST", "BROADCAST", "RESERVED" };
	cr_assert_eq(NELEM(want), AIRLOCK_ADDR__MAX);
	for (int c = 0; c < AIRLOCK_ADDR__MAX; c++)
		cr_expect_str_eq(airlock_addr_class_name((airlock_addr_class)c), want[c]);
	cr_expect_str_eq(airlock_addr_class_name(AIRLOCK_ADDR__MAX), "INVALID");
}

/* ---- the evaluation function --------------------------------------------- */

/* A resolver over a table; a name not in it is NXDOMAIN. */
typedef struct {
	const char *name;
	const char *addrs[4];
	int rc; /* returned instead of addresses when negative */
} dns_row;

static const dns_row dns[] = {
	{ "api.example.com", { "198.51.100.10", "2606:4700::10" } },
	{ "other.example.net", { "198.51.100.11" } },
	{ "private.example.com", { "10.1.2.3" } },
	{ "mixed.example.com", { "198.51.100.12", "192.168.1.1" } },
	{ "metadata.example.com", { "169.254.169.254" } },
	{ "mapped-metadata.example.com", { "198.51.100.13", "::ffff:169.254.169.254" } },
	{ "private-then-metadata.example.com", { "10.0.0.1", "64:ff9b::a9fe:a9fe" } },
	{ "loop6.example.com", { "::1" } },
	{ "files.pythonhosted.org", { "198.51.100.20" } },
	{ "servfail.example.com", { NULL }, -EIO },
	{ "empty.example.com", { NULL } },
	/* the host's own addresses, in the namespace own_world() makes */
	{ "self.example.com", { "198.51.100.77" } },
	{ "self-mixed.example.com", { "198.51.100.78", "198.51.100.77" } },
	{ "self-anyip.example.com", { "198.51.100.200" } },
	{ "self6.example.com", { "2606:4700::77" } },
	{ "self-mapped.example.com", { "::ffff:198.51.100.77" } },
	{ "notself.example.com", { "198.51.100.78", "2606:4700::78" } },
};

typedef struct {
	int calls;
	char last[AIRLOCK_HOSTNAME_MAX + 1];
	size_t claim; /* when non-zero, report this many addresses */
} fake_dns;

static int fake_resolve(void *ctx, const char *name, airlock_addr *ret, size_t max,
                        size_t *ret_n)
{
	fake_dns *f = ctx;
	f->calls++;
	snprintf(f->last, sizeof(f->last), "%s", name);
	for (size_t i = 0; i < NELEM(dns); i++) {
		if (strcmp(dns[i].name, name) != 0)
			continue;
		if (dns[i].rc < 0)
			return dns[i].rc;
		size_t n = 0;
		while (n < NELEM(dns[i].addrs) && dns[i].addrs[n] && n < max) {
			cr_assert(airlock_addr_parse(dns[i].addrs[n], &ret[n]));
			n++;
		}
		*ret_n = f->claim ? f->claim : n;
		return 0;
	}
	return -ENOENT;
}

static airlock_egress_destination dests[] = {
	{ .host = "api.example.com", .ports = (uint16_t[]){ 443, 8443 }, .n_ports = 2 },
	{ .host = "private.example.com", .ports = (uint16_t[]){ 443 }, .n_ports = 1 },
	{ .host = "mixed.example.com", .ports = (uint16_t[]){ 443 }, .n_ports = 1 },
	{ .host = "metadata.example.com", .ports = (uint16_t[]){ 443 }, .n_ports = 1 },
	{ .host = "mapped-metadata.example.com", .ports = (uint16_t[]){ 443 }, .n_ports = 1 },
	{ .host = "private-then-metadata.example.com", .ports = (uint16_t[]){ 443 }, .n_ports = 1 },
	{ .host = "loop6.example.com", .ports = (uint16_t[]){ 443 }, .n_ports = 1 },
	{ .host = "*.pythonhosted.org", .ports = (uint16_t[]){ 443 }, .n_ports = 1 },
	{ .host = "nx.example.com", .ports = (uint16_t[]){ 443 }, .n_ports = 1 },
	{ .host = "servfail.example.com", .ports = (uint16_t[]){ 443 }, .n_ports = 1 },
	{ .host = "empty.example.com", .ports = (uint16_t[]){ 443 }, .n_ports = 1 },
	/* the same host twice: the second entry's port counts too */
	{ .host = "api.example.com", .ports = (uint16_t[]){ 9443 }, .n_ports = 1 },
};

static const airlock_egress_policy allowlist = {
	.mode = AIRLOCK_EGRESS_ALLOWLIST,
	.destinations = dests,
	.n_destinations = NELEM(dests),
};

typedef struct {
	const char *host;
	uint16_t port;
	airlock_egress_reason want;
	int resolver_calls;
	const char *dial;   /* with ALLOWED */
	const char *denied; /* with DENIED/METADATA_ADDRESS */
} eval_row;

#define A AIRLOCK_EGRESS_ALLOWED

static const eval_row eval_rows[] = {
	{ "api.example.com", 443, A, 1, "198.51.100.10" },
	{ "api.example.com", 8443, A, 1, "198.51.100.10" },
	{ "api.example.com", 9443, A, 1, "198.51.100.10" },
	{ "API.Example.COM.", 443, A, 1, "198.51.100.10" },
	{ "other.example.net", 443, AIRLOCK_EGRESS_NOT_ALLOWLISTED, 0 },
	{ "example.com", 443, AIRLOCK_EGRESS_NOT_ALLOWLISTED, 0 },
	{ "evilapi.example.com", 443, AIRLOCK_EGRESS_NOT_ALLOWLISTED, 0 },
	{ "api.example.com", 80, AIRLOCK_EGRESS_PORT_NOT_ALLOWED, 0 },
	{ "api.example.com", 0, AIRLOCK_EGRESS_PORT_NOT_ALLOWED, 0 },
	{ "private.example.com", 443, AIRLOCK_EGRESS_DENIED_ADDRESS, 1, NULL, "10.1.2.3" },
	{ "mixed.example.com", 443, AIRLOCK_EGRESS_DENIED_ADDRESS, 1, NULL, "192.168.1.1" },
	{ "loop6.example.com", 443, AIRLOCK_EGRESS_DENIED_ADDRESS, 1, NULL, "::1" },
	{ "metadata.example.com", 443, AIRLOCK_EGRESS_METADATA_ADDRESS, 1, NULL, "169.254.169.254" },
	{ "mapped-metadata.example.com", 443, AIRLOCK_EGRESS_METADATA_ADDRESS, 1, NULL,
	  "::ffff:169.254.169.254" },
	/* the metadata address is named even when another bad one came first */
	{ "private-then-metadata.example.com", 443, AIRLOCK_EGRESS_METADATA_ADDRESS, 1, NULL,
	  "64:ff9b::a9fe:a9fe" },
	/* wildcard: one leftmost label, no more, no less */
	{ "files.pythonhosted.org", 443, A, 1, "198.51.100.20" },
	{ "pythonhosted.org", 443, AIRLOCK_EGRESS_NOT_ALLOWLISTED, 0 },
	{ "a.files.pythonhosted.org", 443, AIRLOCK_EGRESS_NOT_ALLOWLISTED, 0 },
	{ "evilpythonhosted.org", 443, AIRLOCK_EGRESS_NOT_ALLOWLISTED, 0 },
	{ "files.pythonhosted.org", 80, AIRLOCK_EGRESS_PORT_NOT_ALLOWED, 0 },
	/* the name does not resolve */
	{ "nx.example.com", 443, AIRLOCK_EGRESS_DNS_FAILURE, 1 },
	{ "servfail.example.com", 443, AIRLOCK_EGRESS_DNS_FAILURE, 1 },
	{ "empty.example.com", 443, AIRLOCK_EGRESS_DNS_FAILURE, 1 },
	/* IP literals in every spelling, allowlisted port or not */
	{ "127.0.0.1", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "169.254.169.254", 80, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "198.51.100.10", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "127.1", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "2130706433", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "0177.0.0.1", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "0x7f.1", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "0x7f000001", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "::1", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "[::1]", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "::ffff:169.254.169.254", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "[::ffff:a9fe:a9fe]", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "fe80::1%eth0", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	/* not a DNS name */
	{ "", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ ".", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "api..example.com", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "-api.example.com", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "api_x.example.com", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "api.example.com..", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "api.example.com:443", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "https://api.example.com", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "user@api.example.com", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "api.example.com\n", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "*.pythonhosted.org", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "a b.example.com", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
};

static void check_eval(const airlock_egress_policy *p, const eval_row *row)
{
	fake_dns f = { 0 };
	airlock_egress_decision d;
	airlock_error err = { 0 };

	memset(&d, 0xa5, sizeof(d));
	cr_assert_eq(airlock_egress_evaluate(p, row->host, row->port, fake_resolve, &f, &d, &err), 0,
	             "%s: %s", row->host, err.message);
	cr_expect_eq(d.reason, row->want, "%s:%u: got %s, want %s", row->host, row->port,
	             airlock_egress_reason_name(d.reason), airlock_egress_reason_name(row->want));
	cr_expect_eq(d.allow, row->want == A, "%s", row->host);
	cr_expect_eq(f.calls, row->resolver_calls, "%s: resolver called %d times", row->host,
	             f.calls);
	cr_expect_eq(d.port, row->port);
	cr_expect_eq(d.has_dial, row->want == A, "%s", row->host);

	char buf[46];
	if (row->dial) {
		airlock_addr_format(&d.dial, buf);
		cr_expect_str_eq(buf, row->dial, "%s", row->host);
		/* the dial address is one of the checked ones */
		cr_expect_eq(memcmp(&d.dial, &d.addresses[0], sizeof(d.dial)), 0);
	}
	if (row->denied) {
		airlock_addr_format(&d.denied, buf);
		cr_expect_str_eq(buf, row->denied, "%s", row->host);
	}
	if (row->resolver_calls) {
		/* the resolver is asked for the normalized name */
		cr_expect_str_eq(f.last, d.host);
	} else {
		cr_expect_eq(d.n_addresses, 0, "%s", row->host);
	}
	/* The host field is printable ASCII with no quote whatever came in
	 * (anything else is spelled \xNN). */
	for (const char *c = d.host; *c; c++)
		cr_expect(*c >= 0x20 && *c < 0x7f && *c != '"', "%s", row->host);
}

Test(evaluate, table)
{
	for (size_t i = 0; i < NELEM(eval_rows); i++)
		check_eval(&allowlist, &eval_rows[i]);
}

Test(evaluate, normalizes_the_host)
{
	fake_dns f = { 0 };
	airlock_egress_decision d;
	cr_assert_eq(airlock_egress_evaluate(&allowlist, "API.Example.COM.", 443, fake_resolve, &f,
	                                     &d, NULL),
	             0);
	cr_expect_str_eq(d.host, "api.example.com");
	cr_expect_eq(d.n_addresses, 2);
}

Test(evaluate, mode_deny_refuses_everything)
{
	airlock_egress_policy deny = { .mode = AIRLOCK_EGRESS_DENY };
	airlock_egress_policy deny_with = allowlist;
	deny_with.mode = AIRLOCK_EGRESS_DENY;
	airlock_egress_policy invalid = allowlist;
	invalid.mode = AIRLOCK_EGRESS_INVALID;
	airlock_egress_policy bogus = allowlist;
	bogus.mode = (airlock_egress_mode)77;

	const airlock_egress_policy *ps[] = { &deny, &deny_with, &invalid, &bogus };
	for (size_t i = 0; i < NELEM(ps); i++) {
		eval_row row = { "api.example.com", 443, AIRLOCK_EGRESS_MODE_DENY, 0 };
		check_eval(ps[i], &row);
		/* An address or a bad name is still named as such. */
		eval_row lit = { "127.0.0.1", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 };
		check_eval(ps[i], &lit);
		eval_row bad = { "a..b", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 };
		check_eval(ps[i], &bad);
	}
}

Test(evaluate, allowlist_with_nothing_listed)
{
	airlock_egress_policy empty = { .mode = AIRLOCK_EGRESS_ALLOWLIST };
	eval_row row = { "api.example.com", 443, AIRLOCK_EGRESS_NOT_ALLOWLISTED, 0 };
	check_eval(&empty, &row);
}

Test(evaluate, a_resolver_claiming_more_than_fits_fails_closed)
{
	fake_dns f = { .claim = AIRLOCK_EGRESS_ADDRESSES_MAX + 1 };
	airlock_egress_decision d;
	cr_assert_eq(airlock_egress_evaluate(&allowlist, "api.example.com", 443, fake_resolve, &f,
	                                     &d, NULL),
	             0);
	cr_expect_eq(d.reason, AIRLOCK_EGRESS_DNS_FAILURE);
	cr_expect(!d.allow);
	cr_expect_eq(d.n_addresses, 0);
	cr_expect_eq(f.calls, 1);
}

Test(evaluate, an_overlong_host_is_refused_unread)
{
	size_t n = 100000;
	char *h = malloc(n + 1);
	cr_assert(h);
	memset(h, 'a', n);
	h[n] = 0;
	eval_row row = { h, 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 };
	check_eval(&allowlist, &row);
	/* 254 characters: one over the limit of a name */
	memset(h, 'a', 254);
	for (size_t i = 63; i < 254; i += 64)
		h[i] = '.';
	h[254] = 0;
	check_eval(&allowlist, &row);
	free(h);
}

Test(evaluate, invalid_arguments)
{
	fake_dns f = { 0 };
	airlock_egress_decision d;
	airlock_error err = { 0 };
	cr_expect_lt(airlock_egress_evaluate(NULL, "a.example", 443, fake_resolve, &f, &d, &err), 0);
	cr_expect_lt(airlock_egress_evaluate(&allowlist, NULL, 443, fake_resolve, &f, &d, &err), 0);
	cr_expect_lt(airlock_egress_evaluate(&allowlist, "a.example", 443, NULL, &f, &d, &err), 0);
	cr_expect_lt(airlock_egress_evaluate(&allowlist, "a.example", 443, fake_resolve, &f, NULL,
	                                     &err),
	             0);
	cr_expect_eq(f.calls, 0);
}

Test(evaluate, reason_names)
{
	static const char *const want[] = { "INVALID", "ALLOWED", "MODE_DENY", "NOT_ALLOWLISTED",
		                            "PORT_NOT_ALLOWED", "IP_LITERAL", "BAD_HOSTNAME",
		                            "DNS_FAILURE", "DENIED_ADDRESS", "METADATA_ADDRESS",
		                            "BROWSER_RESOURCE_REFUSED", "UNSUBSCRIBE_REFUSED",
		                            "OWN_ADDRESS" };
	cr_assert_eq(NELEM(want), AIRLOCK_EGRESS_REASON__MAX);
	for (int r = 0; r < AIRLOCK_EGRESS_REASON__MAX; r++)
		cr_expect_str_eq(airlock_egress_reason_name((airlock_egress_reason)r), want[r]);
	cr_expect_str_eq(airlock_egress_reason_name(AIRLOCK_EGRESS_REASON__MAX), "INVALID");
}

/* ---- the public-HTTPS transports ------------------------------------------- */

typedef struct {
	const char *host;
	uint16_t port;
	airlock_egress_reason detail; /* ALLOWED, or the step that refused */
	int resolver_calls;
} transport_row;

static const transport_row transport_rows[] = {
	/* not on any allowlist, and allowed: the rule is not the operator's */
	{ "other.example.net", 443, AIRLOCK_EGRESS_ALLOWED, 1 },
	{ "API.Example.COM.", 443, AIRLOCK_EGRESS_ALLOWED, 1 },
	/* port 443 only */
	{ "api.example.com", 80, AIRLOCK_EGRESS_PORT_NOT_ALLOWED, 0 },
	{ "api.example.com", 8443, AIRLOCK_EGRESS_PORT_NOT_ALLOWED, 0 },
	/* a public host-name shape */
	{ "localhost", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "intranet", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "printer.local", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "db.internal", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "a.localhost", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "router.home.arpa", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "x.onion", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	/* a numeric last label makes a URL parser read an IPv4 address */
	{ "host.123", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "*.example.com", 443, AIRLOCK_EGRESS_BAD_HOSTNAME, 0 },
	{ "169.254.169.254", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "[::1]", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	{ "0x7f.1", 443, AIRLOCK_EGRESS_IP_LITERAL, 0 },
	/* the same denylist, one resolution */
	{ "private.example.com", 443, AIRLOCK_EGRESS_DENIED_ADDRESS, 1 },
	{ "mixed.example.com", 443, AIRLOCK_EGRESS_DENIED_ADDRESS, 1 },
	{ "metadata.example.com", 443, AIRLOCK_EGRESS_METADATA_ADDRESS, 1 },
	{ "mapped-metadata.example.com", 443, AIRLOCK_EGRESS_METADATA_ADDRESS, 1 },
	{ "nx.example.com", 443, AIRLOCK_EGRESS_DNS_FAILURE, 1 },
};

static void check_transport(airlock_egress_transport t, airlock_egress_reason own)
{
	for (size_t i = 0; i < NELEM(transport_rows); i++) {
		const transport_row *row = &transport_rows[i];
		fake_dns f = { 0 };
		airlock_egress_decision d;
		airlock_error err = { 0 };
		cr_assert_eq(airlock_egress_evaluate_transport(t, row->host, row->port, fake_resolve, &f,
		                                               &d, &err),
		             0, "%s", err.message);
		cr_expect_eq(d.transport, t);
		cr_expect_eq(d.detail, row->detail, "%s:%u: detail %s", row->host, row->port,
		             airlock_egress_reason_name(d.detail));
		cr_expect_eq(f.calls, row->resolver_calls, "%s", row->host);
		if (row->detail == AIRLOCK_EGRESS_ALLOWED) {
			cr_expect(d.allow && d.has_dial, "%s", row->host);
			cr_expect_eq(d.reason, AIRLOCK_EGRESS_ALLOWED);
		} else {
			/* The transport's own reason, so its refusals stay apart from
			 * the operator policy's and from the other transport's. */
			cr_expect(!d.allow && !d.has_dial, "%s", row->host);
			cr_expect_eq(d.reason, own, "%s: %s", row->host, airlock_egress_reason_name(d.reason));
		}
	}
}

Test(transport, browser_resources)
{
	check_transport(AIRLOCK_EGRESS_TRANSPORT_BROWSER_RESOURCES,
	                AIRLOCK_EGRESS_BROWSER_RESOURCE_REFUSED);
}

Test(transport, unsubscribe)
{
	check_transport(AIRLOCK_EGRESS_TRANSPORT_UNSUBSCRIBE, AIRLOCK_EGRESS_UNSUBSCRIBE_REFUSED);
}

Test(transport, the_policy_is_not_a_transport)
{
	fake_dns f = { 0 };
	airlock_egress_decision d;
	airlock_error err = { 0 };
	cr_expect_lt(airlock_egress_evaluate_transport(AIRLOCK_EGRESS_TRANSPORT_POLICY, "a.example.com",
	                                               443, fake_resolve, &f, &d, &err),
	             0);
	cr_expect_lt(airlock_egress_evaluate_transport(AIRLOCK_EGRESS_TRANSPORT__MAX, "a.example.com",
	                                               443, fake_resolve, &f, &d, &err),
	             0);
	cr_expect_eq(f.calls, 0);
	cr_expect_str_eq(airlock_egress_transport_name(AIRLOCK_EGRESS_TRANSPORT_POLICY), "policy");
	cr_expect_str_eq(airlock_egress_transport_name(AIRLOCK_EGRESS_TRANSPORT_BROWSER_RESOURCES),
	                 "browser_resources");
	cr_expect_str_eq(airlock_egress_transport_name(AIRLOCK_EGRESS_TRANSPORT_UNSUBSCRIBE),
	                 "unsubscribe");
	/* A policy decision's detail is its reason. */
	cr_assert_eq(airlock_egress_evaluate(&allowlist, "b.example.com", 443, fake_resolve, &f, &d,
	                                     &err),
	             0);
	cr_expect_eq(d.reason, AIRLOCK_EGRESS_NOT_ALLOWLISTED);
	cr_expect_eq(d.detail, d.reason);
	cr_expect_eq(d.transport, AIRLOCK_EGRESS_TRANSPORT_POLICY);
}

/* ---- a sandbox's policy inside the operator's ------------------------------ */

static airlock_egress_policy policy_of(const char *yaml)
{
	airlock_egress_policy p = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_egress_policy_parse("t.yaml", yaml, strlen(yaml), &p, &err), 0, "%s",
	             err.message);
	return p;
}

Test(covers, subset_rules)
{
	airlock_egress_policy op = policy_of("egress:\n  mode: allowlist\n  destinations:\n"
	                                     "    - host: a.example.com\n      ports: [443, 8443]\n"
	                                     "    - host: \"*.example.org\"\n      ports: [443]\n");
	struct {
		const char *yaml;
		bool ok;
		const char *names;
	} rows[] = {
		{ "egress:\n  mode: deny\n", true, NULL },
		{ "egress:\n  mode: allowlist\n  destinations:\n    - host: a.example.com\n      ports: [443]\n",
		  true, NULL },
		{ "egress:\n  mode: allowlist\n  destinations:\n    - host: \"*.example.org\"\n      ports: [443]\n",
		  true, NULL },
		{ "egress:\n  mode: allowlist\n  destinations:\n    - host: a.example.com\n      ports: [80]\n",
		  false, "port 80 of a.example.com" },
		{ "egress:\n  mode: allowlist\n  destinations:\n    - host: b.example.com\n      ports: [443]\n",
		  false, "b.example.com" },
		/* a name the operator's wildcard would match is still not the
		 * operator's entry: the comparison is of entries, not of names */
		{ "egress:\n  mode: allowlist\n  destinations:\n    - host: x.example.org\n      ports: [443]\n",
		  false, "x.example.org" },
	};
	for (size_t i = 0; i < NELEM(rows); i++) {
		airlock_egress_policy req = policy_of(rows[i].yaml);
		airlock_error err = { 0 };
		int r = airlock_egress_policy_covers(&op, &req, &err);
		if (rows[i].ok) {
			cr_expect_eq(r, 0, "%zu: %s", i, err.message);
		} else {
			cr_expect_eq(r, airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "%zu", i);
			cr_expect(strstr(err.message, rows[i].names), "%zu: %s", i, err.message);
		}
		airlock_egress_policy_clear(&req);
	}
	/* An operator in deny mode covers nothing but deny. */
	airlock_egress_policy deny = policy_of("egress:\n  mode: deny\n");
	airlock_egress_policy req = policy_of(rows[1].yaml);
	airlock_error err = { 0 };
	cr_expect_eq(airlock_egress_policy_covers(&deny, &req, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	cr_expect(strstr(err.message, "mode deny"), "%s", err.message);
	airlock_egress_policy_clear(&req);
	airlock_egress_policy_clear(&deny);
	airlock_egress_policy_clear(&op);
}

/* ---- the decision as JSON -------------------------------------------------- */

static json_t *decide_json(const char *host, uint16_t port)
{
	fake_dns f = { 0 };
	airlock_egress_decision d;
	cr_assert_eq(airlock_egress_evaluate(&allowlist, host, port, fake_resolve, &f, &d, NULL), 0);
	char *s = airlock_egress_decision_to_json(&d, NULL);
	cr_assert(s);
	json_error_t je;
	json_t *o = json_loads(s, JSON_REJECT_DUPLICATES, &je);
	cr_assert(o, "%s: %s", s, je.text);
	cr_expect_eq(json_object_size(o), 6, "%s", s);
	free(s);
	return o;
}

Test(json, allow)
{
	json_t *o = decide_json("API.example.com", 443);
	cr_expect_str_eq(json_string_value(json_object_get(o, "decision")), "allow");
	cr_expect_str_eq(json_string_value(json_object_get(o, "reason")), "ALLOWED");
	cr_expect_str_eq(json_string_value(json_object_get(o, "host")), "api.example.com");
	cr_expect_eq(json_integer_value(json_object_get(o, "port")), 443);
	json_t *a = json_object_get(o, "addresses");
	cr_assert(json_is_array(a));
	cr_assert_eq(json_array_size(a), 2);
	cr_expect_str_eq(json_string_value(json_array_get(a, 0)), "198.51.100.10");
	cr_expect_str_eq(json_string_value(json_array_get(a, 1)), "2606:4700::10");
	cr_expect_str_eq(json_string_value(json_object_get(o, "dial")), "198.51.100.10");
	json_decref(o);
}

Test(json, deny_has_null_dial)
{
	json_t *o = decide_json("mixed.example.com", 443);
	cr_expect_str_eq(json_string_value(json_object_get(o, "decision")), "deny");
	cr_expect_str_eq(json_string_value(json_object_get(o, "reason")), "DENIED_ADDRESS");
	cr_expect_eq(json_array_size(json_object_get(o, "addresses")), 2);
	cr_expect(json_is_null(json_object_get(o, "dial")));
	json_decref(o);

	o = decide_json("other.example.net", 443);
	cr_expect_str_eq(json_string_value(json_object_get(o, "reason")), "NOT_ALLOWLISTED");
	cr_expect_eq(json_array_size(json_object_get(o, "addresses")), 0);
	cr_expect(json_is_null(json_object_get(o, "dial")));
	json_decref(o);
}

Test(json, hostile_host_is_escaped)
{
	json_t *o = decide_json("a\"b\\c\xff\x01.example", 443);
	cr_expect_str_eq(json_string_value(json_object_get(o, "reason")), "BAD_HOSTNAME");
	cr_expect_str_eq(json_string_value(json_object_get(o, "host")),
	                 "a\\x22b\\x5cc\\xff\\x01.example");
	json_decref(o);
}

/* ---- the c-ares resolver object ------------------------------------------- */

Test(resolver, construction)
{
	static const char *const good[] = {
		"198.51.100.53", "198.51.100.53:5353", "::1", "[::1]", "[::1]:53",
		"198.51.100.53,198.51.100.54:53,[2001:db8::53]:5300", "127.0.0.1:65535",
	};
	for (size_t i = 0; i < NELEM(good); i++) {
		airlock_egress_resolver *r = NULL;
		airlock_error err = { 0 };
		cr_expect_eq(airlock_egress_resolver_new(good[i], &r, &err), 0, "%s: %s", good[i],
		             err.message);
		cr_expect(r);
		airlock_egress_resolver_free(r);
	}
	airlock_egress_resolver *sys = NULL;
	cr_expect_eq(airlock_egress_resolver_new(NULL, &sys, NULL), 0);
	airlock_egress_resolver_free(sys);
	airlock_egress_resolver_free(NULL);
}

Test(resolver, bad_server_strings)
{
	static const char *const bad[] = {
		"", ",", "198.51.100.53,", ",198.51.100.53", "dns.example.com", "198.51.100.53:0",
		"198.51.100.53:65536", "198.51.100.53:", "198.51.100.53:53x", "198.51.100.53:+53",
		"::1:53x", "[::1", "[::1]53", "[::1]:", "[198.51.100.53]:53", "[]:53",
		"fe80::1%eth0", " 198.51.100.53", "198.51.100.53 ", "127.1",
		"1.1.1.1,1.1.1.1,1.1.1.1,1.1.1.1,1.1.1.1,1.1.1.1,1.1.1.1,1.1.1.1,"
		"1.1.1.1,1.1.1.1,1.1.1.1,1.1.1.1,1.1.1.1,1.1.1.1,1.1.1.1,1.1.1.1,1.1.1.1",
	};
	for (size_t i = 0; i < NELEM(bad); i++) {
		airlock_egress_resolver *r = (airlock_egress_resolver *)0x1;
		airlock_error err = { 0 };
		int rc = airlock_egress_resolver_new(bad[i], &r, &err);
		cr_expect_eq(rc, airlock_errcode(AIRLOCK_ERR_CONFIG), "\"%s\": %d", bad[i], rc);
		cr_expect_eq(r, (airlock_egress_resolver *)0x1, "\"%s\": *ret touched", bad[i]);
		cr_expect_neq(err.message[0], 0);
	}
}

/* A server that never answers: the lookup fails within the timeout, and a
 * failure leaves the output alone. Uses a bound, silent UDP socket on
 * loopback, so nothing leaves the machine. */
Test(resolver, silent_server_times_out, .timeout = 30)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	socklen_t sl = sizeof(sa);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	char servers[64];
	snprintf(servers, sizeof(servers), "127.0.0.1:%u", ntohs(sa.sin_port));

	airlock_egress_resolver *r = NULL;
	cr_assert_eq(airlock_egress_resolver_new(servers, &r, NULL), 0);
	airlock_addr out[AIRLOCK_EGRESS_ADDRESSES_MAX];
	size_t n = 99;
	int rc = airlock_egress_resolver_resolve(r, "api.example.com", out, NELEM(out), &n);
	cr_expect_eq(rc, -ETIMEDOUT);
	cr_expect_eq(n, 99);

	/* The two queries, one each, were sent to the server. */
	unsigned char pkt[512];
	int queries = 0;
	while (recv(fd, pkt, sizeof(pkt), MSG_DONTWAIT) > 0)
		queries++;
	cr_expect_eq(queries, 2);

	/* Through the evaluation, a timeout is DNS_FAILURE. */
	airlock_egress_decision d;
	cr_assert_eq(airlock_egress_evaluate(&allowlist, "api.example.com", 443,
	                                     airlock_egress_resolver_resolve, r, &d, NULL),
	             0);
	cr_expect_eq(d.reason, AIRLOCK_EGRESS_DNS_FAILURE);
	airlock_egress_resolver_free(r);
	close(fd);
}

/* ---- the c-ares resolver against a tiny DNS server on loopback ------------
 * A thread answers A and AAAA queries from a table (NXDOMAIN for any other
 * name) and counts what it was asked, so "one A and one AAAA query per
 * resolution" is measured rather than assumed. Nothing leaves 127.0.0.1. */

#include <pthread.h>
#include <stdatomic.h>

typedef struct {
	const char *name;
	const char *v4[32];
	const char *v6[20];
} zone_row;

static const zone_row zone[] = {
	{ "api.example.com", { "198.51.100.10" }, { "2606:4700::10" } },
	{ "mixed.example.com", { "198.51.100.12", "192.168.1.1" } },
	{ "v6only.example.com", { NULL }, { "::ffff:169.254.169.254" } },
	{ "self.example.com", { "198.51.100.77" } },
	{ "many.example.com",
	  { "198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4", "198.51.100.5",
	    "198.51.100.6", "198.51.100.7", "198.51.100.8", "198.51.100.9", "198.51.100.10",
	    "198.51.100.11", "198.51.100.12", "198.51.100.13", "198.51.100.14", "198.51.100.15",
	    "198.51.100.16", "198.51.100.17", "198.51.100.18", "198.51.100.19", "198.51.100.20" },
	  { "2001:db8::1", "2001:db8::2", "2001:db8::3", "2001:db8::4", "2001:db8::5",
	    "2001:db8::6", "2001:db8::7", "2001:db8::8", "2001:db8::9", "2001:db8::a",
	    "2001:db8::b", "2001:db8::c", "2001:db8::d" } },
};

typedef struct {
	int fd;
	atomic_bool stop;
	atomic_int queries_a, queries_aaaa;
	pthread_t thread;
	char servers[64];
} dns_server;

/* Decode the question's name into out (dotted); returns the offset after
 * QTYPE/QCLASS, or 0 when malformed. */
static size_t dns_question(const unsigned char *p, size_t n, char *out, size_t outsz,
                           unsigned *qtype)
{
	size_t i = 12, o = 0;
	while (i < n && p[i]) {
		size_t l = p[i++];
		if (l > 63 || i + l > n || o + l + 2 > outsz)
			return 0;
		if (o)
			out[o++] = '.';
		for (size_t k = 0; k < l; k++) {
			char c = (char)p[i + k];
			out[o++] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
		}
		i += l;
	}
	out[o] = 0;
	if (i + 5 > n)
		return 0;
	*qtype = (unsigned)p[i + 1] << 8 | p[i + 2];
	return i + 5;
}

static void *dns_serve(void *arg)
{
	dns_server *s = arg;
	while (!atomic_load(&s->stop)) {
		unsigned char q[512], r[512];
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(s->fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
		if (n < 12)
			continue;
		char name[256];
		unsigned qtype = 0;
		size_t qend = dns_question(q, (size_t)n, name, sizeof(name), &qtype);
		if (!qend)
			continue;
		if (qtype == 1)
			atomic_fetch_add(&s->queries_a, 1);
		else if (qtype == 28)
			atomic_fetch_add(&s->queries_aaaa, 1);

		const zone_row *z = NULL;
		for (size_t i = 0; i < NELEM(zone); i++)
			if (strcmp(zone[i].name, name) == 0)
				z = &zone[i];
		memcpy(r, q, qend);
		r[2] = 0x84 | (q[2] & 1); /* QR, AA, RD copied */
		r[3] = z ? 0x80 : 0x83;   /* RA; NXDOMAIN for unknown names */
		r[4] = 0;
		r[5] = 1;
		memset(r + 6, 0, 6);
		size_t o = qend;
		unsigned an = 0;
		for (size_t i = 0; z && i < 32; i++) {
			const char *a = qtype == 1 ? z->v4[i] : qtype == 28 && i < 20 ? z->v6[i] : NULL;
			if (!a)
				break;
			unsigned len = qtype == 1 ? 4 : 16;
			if (o + 12 + len > sizeof(r))
				break;
			r[o++] = 0xc0; /* the name: a pointer to the question */
			r[o++] = 12;
			r[o++] = 0;
			r[o++] = (unsigned char)qtype;
			r[o++] = 0;
			r[o++] = 1; /* IN */
			r[o++] = 0;
			r[o++] = 0;
			r[o++] = 0;
			r[o++] = 60; /* TTL */
			r[o++] = 0;
			r[o++] = (unsigned char)len;
			cr_assert_eq(inet_pton(qtype == 1 ? AF_INET : AF_INET6, a, r + o), 1);
			o += len;
			an++;
		}
		r[7] = (unsigned char)an;
		sendto(s->fd, r, o, 0, (struct sockaddr *)&from, fl);
	}
	return NULL;
}

static void dns_open(dns_server *s)
{
	memset(s, 0, sizeof(*s));
	s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(s->fd, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	socklen_t sl = sizeof(sa);
	cr_assert_eq(getsockname(s->fd, (struct sockaddr *)&sa, &sl), 0);
	struct timeval tv = { .tv_usec = 50000 };
	cr_assert_eq(setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	snprintf(s->servers, sizeof(s->servers), "127.0.0.1:%u", ntohs(sa.sin_port));
}

static void dns_run(dns_server *s)
{
	cr_assert_eq(pthread_create(&s->thread, NULL, dns_serve, s), 0);
}

static void dns_start(dns_server *s)
{
	dns_open(s);
	dns_run(s);
}

static void dns_stop(dns_server *s)
{
	atomic_store(&s->stop, true);
	pthread_join(s->thread, NULL);
	close(s->fd);
}

Test(resolver, against_a_local_server, .timeout = 60)
{
	dns_server s;
	dns_start(&s);
	airlock_egress_resolver *r = NULL;
	cr_assert_eq(airlock_egress_resolver_new(s.servers, &r, NULL), 0);

	airlock_addr out[AIRLOCK_EGRESS_ADDRESSES_MAX];
	size_t n = 0;
	char buf[46];

	/* A first, then AAAA; exactly one query of each. */
	cr_assert_eq(airlock_egress_resolver_resolve(r, "api.example.com", out, NELEM(out), &n), 0);
	cr_assert_eq(n, 2);
	airlock_addr_format(&out[0], buf);
	cr_expect_str_eq(buf, "198.51.100.10");
	airlock_addr_format(&out[1], buf);
	cr_expect_str_eq(buf, "2606:4700::10");
	cr_expect_eq(atomic_load(&s.queries_a), 1);
	cr_expect_eq(atomic_load(&s.queries_aaaa), 1);

	/* No AAAA records is not a failure; no records at all is. */
	cr_assert_eq(airlock_egress_resolver_resolve(r, "mixed.example.com", out, NELEM(out), &n), 0);
	cr_expect_eq(n, 2);
	n = 99;
	cr_expect_eq(airlock_egress_resolver_resolve(r, "nx.example.com", out, NELEM(out), &n),
	             -ENOENT);
	cr_expect_eq(n, 99);

	/* 33 addresses: more than a decision holds, so none are returned. */
	cr_expect_eq(airlock_egress_resolver_resolve(r, "many.example.com", out, NELEM(out), &n),
	             -E2BIG);
	cr_expect_eq(airlock_egress_resolver_resolve(r, "api.example.com", out, 1, &n), -E2BIG);

	/* Through the evaluation: one resolution, every address checked. */
	static const struct {
		const char *host;
		airlock_egress_reason want;
	} rows[] = {
		{ "api.example.com", AIRLOCK_EGRESS_ALLOWED },
		{ "mixed.example.com", AIRLOCK_EGRESS_DENIED_ADDRESS },
		{ "v6only.example.com", AIRLOCK_EGRESS_METADATA_ADDRESS },
		{ "nx.example.com", AIRLOCK_EGRESS_DNS_FAILURE },
		{ "many.example.com", AIRLOCK_EGRESS_DNS_FAILURE },
	};
	static uint16_t port443[] = { 443 };
	airlock_egress_destination d[NELEM(rows)];
	for (size_t i = 0; i < NELEM(rows); i++)
		d[i] = (airlock_egress_destination){ .host = (char *)rows[i].host,
			                             .ports = port443, .n_ports = 1 };
	airlock_egress_policy p = { .mode = AIRLOCK_EGRESS_ALLOWLIST, .destinations = d,
		                    .n_destinations = NELEM(d) };
	for (size_t i = 0; i < NELEM(rows); i++) {
		int a0 = atomic_load(&s.queries_a), aaaa0 = atomic_load(&s.queries_aaaa);
		airlock_egress_decision dec;
		cr_assert_eq(airlock_egress_evaluate(&p, rows[i].host, 443,
		                                     airlock_egress_resolver_resolve, r, &dec, NULL),
		             0);
		cr_expect_eq(dec.reason, rows[i].want, "%s: %s", rows[i].host,
		             airlock_egress_reason_name(dec.reason));
		cr_expect_eq(atomic_load(&s.queries_a) - a0, 1, "%s", rows[i].host);
		cr_expect_eq(atomic_load(&s.queries_aaaa) - aaaa0, 1, "%s", rows[i].host);
	}
	airlock_egress_resolver_free(r);
	dns_stop(&s);
}

/* ---- the host's own addresses -------------------------------------------------
 *
 * A name on the allowlist that points at the proxy's own host reaches every
 * service there bound to 0.0.0.0. own_world() moves this test's process
 * (Criterion runs each test in its own) into a new network namespace with
 * loopback up and, on lo, 198.51.100.77/32, 2606:4700::77/128 (no traffic
 * leaves the namespace; the IPv6 address is a public-looking one because
 * documentation space is on the denylist), and an "AnyIP" local route for
 * 198.51.100.128/25 (delivered locally, listed by no interface). Everything
 * goes with the process.
 */

static void own_sh(const char *cmd)
{
	int rc = system(cmd);
	cr_assert_eq(rc, 0, "%s: exit %d", cmd, rc);
}

static void own_world(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root: a new network namespace with addresses on lo");
	cr_assert_eq(unshare(CLONE_NEWNET), 0, "unshare(CLONE_NEWNET): %s", strerror(errno));
	own_sh("ip link set lo up");
	own_sh("ip addr add 198.51.100.77/32 dev lo");
	own_sh("ip -6 addr add 2606:4700::77/128 dev lo nodad");
	own_sh("ip route add local 198.51.100.128/25 dev lo");
}

Test(own, asks_the_kernel)
{
	own_world();
	static const struct {
		const char *addr;
		int want;
	} rows[] = {
		{ "198.51.100.77", 1 },  { "::ffff:198.51.100.77", 1 }, { "2606:4700::77", 1 },
		{ "198.51.100.128", 1 }, { "198.51.100.200", 1 },       { "198.51.100.255", 1 },
		{ "127.0.0.1", 1 },      { "::1", 1 },                  { "198.51.100.78", 0 },
		{ "198.51.100.127", 0 }, { "2606:4700::78", 0 },        { "8.8.8.8", 0 },
	};
	for (size_t i = 0; i < NELEM(rows); i++) {
		airlock_addr a = addr_of(rows[i].addr);
		cr_expect_eq(airlock_addr_is_own(&a), rows[i].want, "%s", rows[i].addr);
	}
	airlock_addr bad;
	memset(&bad, 0, sizeof(bad));
	cr_expect_lt(airlock_addr_is_own(&bad), 0);
	cr_expect_lt(airlock_addr_is_own(NULL), 0);

	/* Asked at the time of the call: an address added now is own now. */
	airlock_addr later = addr_of("198.51.100.79");
	cr_expect_eq(airlock_addr_is_own(&later), 0);
	own_sh("ip addr add 198.51.100.79/32 dev lo");
	cr_expect_eq(airlock_addr_is_own(&later), 1);
}

Test(own, evaluation_refuses_own_address)
{
	own_world();
	static const struct {
		const char *host, *denied;
		airlock_egress_reason want;
	} rows[] = {
		{ "self.example.com", "198.51.100.77", AIRLOCK_EGRESS_OWN_ADDRESS },
		{ "self-mixed.example.com", "198.51.100.77", AIRLOCK_EGRESS_OWN_ADDRESS },
		{ "self-anyip.example.com", "198.51.100.200", AIRLOCK_EGRESS_OWN_ADDRESS },
		{ "self6.example.com", "2606:4700::77", AIRLOCK_EGRESS_OWN_ADDRESS },
		{ "self-mapped.example.com", "::ffff:198.51.100.77", AIRLOCK_EGRESS_OWN_ADDRESS },
		{ "notself.example.com", NULL, AIRLOCK_EGRESS_ALLOWED },
	};
	airlock_egress_destination d = { .host = "*.example.com",
		                         .ports = (uint16_t[]){ 443 }, .n_ports = 1 };
	airlock_egress_policy p = { .mode = AIRLOCK_EGRESS_ALLOWLIST, .destinations = &d,
		                    .n_destinations = 1 };
	for (size_t i = 0; i < NELEM(rows); i++) {
		fake_dns f = { 0 };
		airlock_egress_decision dec;
		cr_assert_eq(airlock_egress_evaluate(&p, rows[i].host, 443, fake_resolve, &f, &dec, NULL), 0);
		cr_expect_eq(dec.reason, rows[i].want, "%s: %s", rows[i].host,
		             airlock_egress_reason_name(dec.reason));
		cr_expect_eq(dec.allow, rows[i].want == AIRLOCK_EGRESS_ALLOWED, "%s", rows[i].host);
		cr_expect_eq(dec.has_dial, rows[i].want == AIRLOCK_EGRESS_ALLOWED, "%s", rows[i].host);
		if (rows[i].denied) {
			char buf[46];
			airlock_addr_format(&dec.denied, buf);
			cr_expect_str_eq(buf, rows[i].denied, "%s", rows[i].host);
		}
		cr_expect_eq(f.calls, 1);
	}
	/* the transports' rule runs the same check; the step is the detail */
	fake_dns f = { 0 };
	airlock_egress_decision dec;
	cr_assert_eq(airlock_egress_evaluate_transport(AIRLOCK_EGRESS_TRANSPORT_BROWSER_RESOURCES,
	                                               "self.example.com", 443, fake_resolve, &f,
	                                               &dec, NULL),
	             0);
	cr_expect_eq(dec.reason, AIRLOCK_EGRESS_BROWSER_RESOURCE_REFUSED);
	cr_expect_eq(dec.detail, AIRLOCK_EGRESS_OWN_ADDRESS);
}

/*
 * End to end: the proxy process, in a namespace whose own address
 * 198.51.100.77 has a service bound to 0.0.0.0 behind it, is asked for an
 * allowlisted name that resolves there. It answers 403 OWN_ADDRESS, logs
 * it, and the service never sees a connection. (Before the check it dialed
 * 198.51.100.77 and tunnelled to the service.)
 */
Test(own, proxy_refuses_own_address, .timeout = 60)
{
	own_world();

	/* the host service, listening on every address */
	int svc = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	cr_assert_geq(svc, 0);
	int one = 1;
	setsockopt(svc, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in any = { .sin_family = AF_INET, .sin_port = htons(9443) };
	cr_assert_eq(bind(svc, (struct sockaddr *)&any, sizeof(any)), 0, "bind: %s", strerror(errno));
	cr_assert_eq(listen(svc, 8), 0);

	/* The server's socket first, its thread after the proxy is forked: the
	 * proxy is a fork of this process (until it is its own executable), and
	 * a fork of a process with a thread running can inherit a lock that
	 * thread held (seen under ASan: the proxy's first thread hung). */
	dns_server s;
	dns_open(&s);
	int log_fd = memfd_create("proxy-log", MFD_CLOEXEC);
	cr_assert_geq(log_fd, 0);

	airlock_proxy_config cfg;
	airlock_proxy_config_default(&cfg);
	cfg.dns_servers = s.servers;
	cfg.log_fd = log_fd;
	airlock_proxy *px = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_proxy_spawn(&cfg, &px, &err), 0, "%s", err.message);
	dns_run(&s);

	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(lfd, 0);
	struct sockaddr_in la = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(bind(lfd, (struct sockaddr *)&la, sizeof(la)), 0);
	cr_assert_eq(listen(lfd, 8), 0);
	socklen_t ll = sizeof(la);
	cr_assert_eq(getsockname(lfd, (struct sockaddr *)&la, &ll), 0);
	/* The wildcard makes the proxy process itself ask the Public Suffix
	 * List when it decodes the policy (after its seccomp filter and
	 * privilege drop): attaching proves the list loads there. */
	airlock_egress_destination d[] = {
		{ .host = "self.example.com", .ports = (uint16_t[]){ 9443 }, .n_ports = 1 },
		{ .host = "*.example.org", .ports = (uint16_t[]){ 443 }, .n_ports = 1 },
	};
	airlock_egress_policy p = { .mode = AIRLOCK_EGRESS_ALLOWLIST, .destinations = d,
		                    .n_destinations = NELEM(d) };
	airlock_proxy_owner owner = { .run_id = "run-own", .tenant_id = "tenant-own",
		                      .environment_id = "env-own" };
	cr_assert_eq(airlock_proxy_attach(px, lfd, &owner, &p, &err), 0, "%s", err.message);

	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(c, 0);
	struct timeval tv = { .tv_sec = 20 };
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	cr_assert_eq(connect(c, (struct sockaddr *)&la, sizeof(la)), 0, "%s", strerror(errno));
	static const char req[] = "CONNECT self.example.com:9443 HTTP/1.1\r\nHost: x\r\n\r\n";
	cr_assert_eq(write(c, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
	char resp[1024];
	size_t n = 0;
	while (n < sizeof(resp) - 1) {
		ssize_t r = read(c, resp + n, sizeof(resp) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		resp[n] = 0;
		if (strstr(resp, "\r\n\r\n"))
			break;
	}
	resp[n] = 0;
	close(c);
	cr_expect(strncmp(resp, "HTTP/1.1 403", 12) == 0, "answer: %s", resp);
	cr_expect(strstr(resp, "X-Airlock-Reason: OWN_ADDRESS\r\n") != NULL, "answer: %s", resp);

	/* the service was never reached */
	int a = accept(svc, NULL, NULL);
	cr_expect_lt(a, 0, "the host service got a connection");
	cr_expect(errno == EAGAIN || errno == EWOULDBLOCK);
	if (a >= 0)
		close(a);

	cr_assert_eq(airlock_proxy_detach(px, "env-own", &err), 0, "%s", err.message);
	airlock_proxy_free(px);
	close(lfd);
	dns_stop(&s);
	close(svc);

	char log[8192];
	ssize_t ln = pread(log_fd, log, sizeof(log) - 1, 0);
	cr_assert_geq(ln, 0);
	log[ln] = 0;
	close(log_fd);
	cr_expect(strstr(log, "\"host\":\"self.example.com\"") != NULL, "log: %s", log);
	cr_expect(strstr(log, "\"reason\":\"OWN_ADDRESS\"") != NULL, "log: %s", log);
	cr_expect(strstr(log, "\"outcome\":\"refused\"") != NULL, "log: %s", log);
}
