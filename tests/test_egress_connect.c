/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proxy's CONNECT request parser (include/airlock/egress.h, "the CONNECT
 * request"): accepted requests, every prefix of a valid one, the tunnel
 * bytes after the terminator, every refusal with its status, the caps at
 * their edges, and violations reported before the request has ended.
 *
 * A decision recorded here: the method is case-sensitive (RFC 9110, section
 * 9.1), so "connect" is a well-formed request line with a method other than
 * CONNECT: 405, not 400, and never accepted.
 *
 * Each input is parsed from an exactly sized heap copy, so a read past len
 * is an ASan report in the sanitized build.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/egress.h"
#include "../fuzz/connect_probe.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
/* A string literal with its length, so rows may hold NUL bytes. */
#define BYTES(s) s, sizeof(s) - 1

#define OK AIRLOCK_CONNECT_OK
#define INCOMPLETE AIRLOCK_CONNECT_INCOMPLETE
#define BAD AIRLOCK_CONNECT_BAD_REQUEST
#define NOT_CONNECT AIRLOCK_CONNECT_NOT_CONNECT
#define BAD_VERSION AIRLOCK_CONNECT_BAD_VERSION
#define TOO_LARGE AIRLOCK_CONNECT_TOO_LARGE

/* ---- accepted ------------------------------------------------------------ */

typedef struct ok_row {
	const char *name;
	const char *req;
	const char *host;
	uint16_t port;
} ok_row;

static const ok_row ok_rows[] = {
	{ "no headers", "CONNECT example.com:443 HTTP/1.1\r\n\r\n", "example.com", 443 },
	{ "with Host", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
	  "example.com", 443 },
	{ "several headers",
	  "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\nUser-Agent: curl/8.5.0\r\n"
	  "Proxy-Connection: Keep-Alive\r\n\r\n",
	  "pypi.org", 443 },
	{ "HTTP/1.0", "CONNECT example.com:443 HTTP/1.0\r\n\r\n", "example.com", 443 },
	{ "IPv6 brackets kept", "CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n", "[2001:db8::1]", 443 },
	{ "IPv6 with IPv4 tail", "CONNECT [::ffff:127.0.0.1]:8443 HTTP/1.1\r\n\r\n",
	  "[::ffff:127.0.0.1]", 8443 },
	{ "IPv6 two characters", "CONNECT [::]:443 HTTP/1.1\r\n\r\n", "[::]", 443 },
	{ "port 1", "CONNECT example.com:1 HTTP/1.1\r\n\r\n", "example.com", 1 },
	{ "port 65535", "CONNECT example.com:65535 HTTP/1.1\r\n\r\n", "example.com", 65535 },
	{ "port 10000", "CONNECT example.com:10000 HTTP/1.1\r\n\r\n", "example.com", 10000 },
	/* The case and validity of the name are the evaluation function's
	 * to judge; the parser passes the host on as sent. */
	{ "host case kept", "CONNECT Example.COM:443 HTTP/1.1\r\n\r\n", "Example.COM", 443 },
	{ "dotted quad passed on", "CONNECT 127.0.0.1:80 HTTP/1.1\r\n\r\n", "127.0.0.1", 80 },
	{ "trailing dot passed on", "CONNECT example.com.:443 HTTP/1.1\r\n\r\n", "example.com.", 443 },
	{ "single character host", "CONNECT a:443 HTTP/1.1\r\n\r\n", "a", 443 },
	{ "empty field value", "CONNECT a:443 HTTP/1.1\r\nX-Empty:\r\n\r\n", "a", 443 },
	{ "OWS and HTAB in a value",
	  "CONNECT a:443 HTTP/1.1\r\nX-A: \t b\tc \t\r\nX-B:d\r\n\r\n", "a", 443 },
	{ "every tchar in a name",
	  "CONNECT a:443 HTTP/1.1\r\n!#$%&'*+-.^_`|~0aZ: v\r\n\r\n", "a", 443 },
	{ "every visible character in a value",
	  "CONNECT a:443 HTTP/1.1\r\nX: !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	  "[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~\r\n\r\n",
	  "a", 443 },
};

Test(egress_connect, accepted)
{
	for (size_t i = 0; i < NELEM(ok_rows); i++) {
		const ok_row *row = &ok_rows[i];
		airlock_connect_request r;
		size_t n = strlen(row->req);
		cr_expect_eq(connect_probe_parse(row->req, n, &r), OK, "[%s]: not OK", row->name);
		cr_expect_str_eq(r.host, row->host, "[%s]: host", row->name);
		cr_expect_eq(r.port, row->port, "[%s]: port %u", row->name, r.port);
		cr_expect_eq(r.consumed, n, "[%s]: consumed %zu of %zu", row->name, r.consumed, n);
	}
}

/* ---- prefixes and tunnel bytes --------------------------------------------- */

Test(egress_connect, every_prefix_is_incomplete)
{
	for (size_t i = 0; i < NELEM(ok_rows); i++) {
		const ok_row *row = &ok_rows[i];
		size_t n = strlen(row->req);
		for (size_t p = 0; p < n; p++) {
			airlock_connect_request r;
			airlock_connect_status s = connect_probe_parse(row->req, p, &r);
			cr_expect_eq(s, INCOMPLETE, "[%s]: prefix %zu of %zu: status %d", row->name, p, n,
			             (int)s);
			cr_expect(connect_probe_untouched(&r), "[%s]: prefix %zu wrote *ret", row->name, p);
		}
	}
}

Test(egress_connect, tunnel_bytes_after_the_terminator_are_not_looked_at)
{
	static const char req[] = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
	const size_t n = sizeof(req) - 1;
	/* What a client sends next: a TLS ClientHello's first bytes (NUL and
	 * bytes >= 0x80 among them), another request line, bare line ends. */
	static const struct {
		const char *name;
		const char *bytes;
		size_t len;
	} tails[] = {
		{ "TLS record", BYTES("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x80\xff") },
		{ "NUL", BYTES("\0\0\0") },
		{ "a second request", BYTES("GET / HTTP/1.1\r\n\r\n") },
		{ "bare LF", BYTES("\n") },
		{ "bare CR", BYTES("\rX") },
	};
	for (size_t i = 0; i < NELEM(tails); i++) {
		char buf[256];
		cr_assert_leq(n + tails[i].len, sizeof(buf));
		memcpy(buf, req, n);
		memcpy(buf + n, tails[i].bytes, tails[i].len);
		for (size_t extra = 1; extra <= tails[i].len; extra++) {
			airlock_connect_request r;
			cr_expect_eq(connect_probe_parse(buf, n + extra, &r), OK, "[%s, %zu bytes]: not OK",
			             tails[i].name, extra);
			cr_expect_eq(r.consumed, n, "[%s]: consumed %zu, want %zu", tails[i].name,
			             r.consumed, n);
			cr_expect_str_eq(r.host, "example.com");
			cr_expect_eq(r.port, 443);
		}
	}
}

/* ---- refused ----------------------------------------------------------------- */

typedef struct bad_row {
	const char *name;
	const char *req;
	size_t len;
	airlock_connect_status want;
} bad_row;

#define HOST_255 \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static const bad_row bad_rows[] = {
	/* the method: 405 for a well-formed line with another one */
	{ "GET", BYTES("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n"), NOT_CONNECT },
	{ "lowercase connect (case-sensitive: 405)", BYTES("connect example.com:443 HTTP/1.1\r\n\r\n"),
	  NOT_CONNECT },
	{ "Connect", BYTES("Connect example.com:443 HTTP/1.1\r\n\r\n"), NOT_CONNECT },
	{ "CONNECTX", BYTES("CONNECTX example.com:443 HTTP/1.1\r\n\r\n"), NOT_CONNECT },
	{ "405 wins over the version", BYTES("POST / HTTP/2.0\r\n\r\n"), NOT_CONNECT },
	{ "405 needs the shape", BYTES("GET /\r\n\r\n"), BAD },
	{ "method not a token", BYTES("CON(NECT example.com:443 HTTP/1.1\r\n\r\n"), BAD },
	/* the version */
	{ "HTTP/2.0", BYTES("CONNECT example.com:443 HTTP/2.0\r\n\r\n"), BAD_VERSION },
	{ "HTTP/1.2", BYTES("CONNECT example.com:443 HTTP/1.2\r\n\r\n"), BAD_VERSION },
	{ "HTTP/0.9", BYTES("CONNECT example.com:443 HTTP/0.9\r\n\r\n"), BAD_VERSION },
	{ "505 before the target", BYTES("CONNECT a@b:443 HTTP/3.0\r\n\r\n"), BAD_VERSION },
	{ "HTTP/2", BYTES("CONNECT example.com:443 HTTP/2\r\n\r\n"), BAD },
	{ "HTTP/1.10", BYTES("CONNECT example.com:443 HTTP/1.10\r\n\r\n"), BAD },
	{ "http/1.1", BYTES("CONNECT example.com:443 http/1.1\r\n\r\n"), BAD },
	{ "no version", BYTES("CONNECT example.com:443\r\n\r\n"), BAD },
	{ "trailing space", BYTES("CONNECT example.com:443 HTTP/1.1 \r\n\r\n"), BAD },
	/* the target */
	{ "missing port", BYTES("CONNECT example.com HTTP/1.1\r\n\r\n"), BAD },
	{ "port 0", BYTES("CONNECT example.com:0 HTTP/1.1\r\n\r\n"), BAD },
	{ "port 65536", BYTES("CONNECT example.com:65536 HTTP/1.1\r\n\r\n"), BAD },
	{ "port 99999", BYTES("CONNECT example.com:99999 HTTP/1.1\r\n\r\n"), BAD },
	{ "port of six digits", BYTES("CONNECT example.com:100000 HTTP/1.1\r\n\r\n"), BAD },
	{ "leading zero port", BYTES("CONNECT example.com:0443 HTTP/1.1\r\n\r\n"), BAD },
	{ "signed port", BYTES("CONNECT example.com:+443 HTTP/1.1\r\n\r\n"), BAD },
	{ "port then junk", BYTES("CONNECT example.com:443x HTTP/1.1\r\n\r\n"), BAD },
	{ "two ports", BYTES("CONNECT example.com:443:80 HTTP/1.1\r\n\r\n"), BAD },
	{ "host: (empty port)", BYTES("CONNECT host: HTTP/1.1\r\n\r\n"), BAD },
	{ ":443 (empty host)", BYTES("CONNECT :443 HTTP/1.1\r\n\r\n"), BAD },
	{ "userinfo", BYTES("CONNECT a@b:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "path", BYTES("CONNECT example.com:443/x HTTP/1.1\r\n\r\n"), BAD },
	{ "absolute URI", BYTES("CONNECT https://example.com:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "underscore in host", BYTES("CONNECT a_b:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "percent in host", BYTES("CONNECT a%2eb:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "unbracketed IPv6", BYTES("CONNECT ::1:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "IPv6 without port", BYTES("CONNECT [::1] HTTP/1.1\r\n\r\n"), BAD },
	{ "empty brackets", BYTES("CONNECT []:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "one character in brackets", BYTES("CONNECT [1]:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "IPv6 zone", BYTES("CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "name in brackets", BYTES("CONNECT [example.com]:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "unclosed bracket", BYTES("CONNECT [::1:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "host of 256", BYTES("CONNECT a" HOST_255 ":443 HTTP/1.1\r\n\r\n"), BAD },
	/* the line's shape */
	{ "doubled space after method", BYTES("CONNECT  example.com:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "doubled space before version", BYTES("CONNECT example.com:443  HTTP/1.1\r\n\r\n"), BAD },
	{ "leading space", BYTES(" CONNECT example.com:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "tab instead of SP", BYTES("CONNECT\texample.com:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "tab before version", BYTES("CONNECT example.com:443\tHTTP/1.1\r\n\r\n"), BAD },
	{ "empty line first", BYTES("\r\nCONNECT example.com:443 HTTP/1.1\r\n\r\n"), BAD },
	/* framing */
	{ "bare LF line ends", BYTES("CONNECT example.com:443 HTTP/1.1\n\n"), BAD },
	{ "bare LF in a field", BYTES("CONNECT a:443 HTTP/1.1\r\nX: a\nY: b\r\n\r\n"), BAD },
	{ "bare LF terminator", BYTES("CONNECT a:443 HTTP/1.1\r\nX: a\r\n\n"), BAD },
	{ "bare CR line ends", BYTES("CONNECT example.com:443 HTTP/1.1\r\r"), BAD },
	{ "bare CR in a field", BYTES("CONNECT a:443 HTTP/1.1\r\nX: a\rb\r\n\r\n"), BAD },
	{ "bare CR terminator", BYTES("CONNECT a:443 HTTP/1.1\r\n\rX\r\n"), BAD },
	{ "CR CR LF", BYTES("CONNECT a:443 HTTP/1.1\r\r\n\r\n"), BAD },
	{ "NUL in host", BYTES("CONNECT exa\0mple.com:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "NUL in a value", BYTES("CONNECT a:443 HTTP/1.1\r\nX: a\0b\r\n\r\n"), BAD },
	{ "0x80 in a value", BYTES("CONNECT a:443 HTTP/1.1\r\nX: caf\x80\r\n\r\n"), BAD },
	{ "0xff in host", BYTES("CONNECT \xff:443 HTTP/1.1\r\n\r\n"), BAD },
	{ "DEL in a value", BYTES("CONNECT a:443 HTTP/1.1\r\nX: a\x7f\r\n\r\n"), BAD },
	{ "control character in a value", BYTES("CONNECT a:443 HTTP/1.1\r\nX: a\x01\r\n\r\n"), BAD },
	{ "ESC in a value", BYTES("CONNECT a:443 HTTP/1.1\r\nX: \x1b[31m\r\n\r\n"), BAD },
	/* header fields */
	{ "obs-fold SP", BYTES("CONNECT a:443 HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n"), BAD },
	{ "obs-fold HTAB", BYTES("CONNECT a:443 HTTP/1.1\r\nX-A: b\r\n\tc\r\n\r\n"), BAD },
	{ "whitespace before the first field", BYTES("CONNECT a:443 HTTP/1.1\r\n X: b\r\n\r\n"), BAD },
	{ "header without colon", BYTES("CONNECT a:443 HTTP/1.1\r\nNoColon\r\n\r\n"), BAD },
	{ "header name with space", BYTES("CONNECT a:443 HTTP/1.1\r\nX A: b\r\n\r\n"), BAD },
	{ "space before colon", BYTES("CONNECT a:443 HTTP/1.1\r\nHost : a\r\n\r\n"), BAD },
	{ "tab before colon", BYTES("CONNECT a:443 HTTP/1.1\r\nHost\t: a\r\n\r\n"), BAD },
	{ "empty name", BYTES("CONNECT a:443 HTTP/1.1\r\n: a\r\n\r\n"), BAD },
	{ "name not a token", BYTES("CONNECT a:443 HTTP/1.1\r\nX(y): a\r\n\r\n"), BAD },
	/* Violations are reported as soon as they are seen, before the
	 * request ends (these inputs stop short of a terminator). */
	{ "early: bare LF in the request line", BYTES("CONNECT exa\nmple"), BAD },
	{ "early: NUL", BYTES("CONN\0"), BAD },
	{ "early: 0x80", BYTES("CONNECT \x80"), BAD },
	{ "early: tab", BYTES("CONNECT\t"), BAD },
	{ "early: doubled space", BYTES("CONNECT  "), BAD },
	{ "early: bare CR", BYTES("CONNECT a:443 HTTP/1.1\rX"), BAD },
	{ "early: obs-fold at its first byte", BYTES("CONNECT a:443 HTTP/1.1\r\nX: a\r\n "), BAD },
	{ "early: space in a name", BYTES("CONNECT a:443 HTTP/1.1\r\nX "), BAD },
	{ "early: bad version shape", BYTES("CONNECT a:443 HTTP/1.x"), BAD },
	{ "early: bad port at its CR", BYTES("CONNECT a:0 HTTP/1.1\r"), BAD },
	{ "early: bad request line at its CRLF", BYTES("CONNECT a@b:443 HTTP/1.1\r\n"), BAD },
	{ "early: 405 at its CRLF", BYTES("GET / HTTP/1.1\r\n"), NOT_CONNECT },
	{ "early: 505 at its CRLF", BYTES("CONNECT a:443 HTTP/2.0\r\n"), BAD_VERSION },
	{ "early: field without colon at its CR", BYTES("CONNECT a:443 HTTP/1.1\r\nX\r"), BAD },
	/* still waiting: nothing wrong yet */
	{ "wait: request line complete", BYTES("CONNECT a:443 HTTP/1.1\r\n"), INCOMPLETE },
	{ "wait: 405 waits for its LF", BYTES("GET / HTTP/1.1\r"), INCOMPLETE },
	{ "wait: port may grow", BYTES("CONNECT a:44"), INCOMPLETE },
	{ "wait: method may grow", BYTES("CONNEC"), INCOMPLETE },
	{ "wait: terminator's CR", BYTES("CONNECT a:443 HTTP/1.1\r\n\r"), INCOMPLETE },
	{ "wait: nothing", BYTES(""), INCOMPLETE },
};

Test(egress_connect, refused)
{
	for (size_t i = 0; i < NELEM(bad_rows); i++) {
		const bad_row *row = &bad_rows[i];
		airlock_connect_request r;
		airlock_connect_status s = connect_probe_parse(row->req, row->len, &r);
		cr_expect_eq(s, row->want, "[%s]: status %d, want %d", row->name, (int)s, (int)row->want);
		cr_expect(connect_probe_untouched(&r), "[%s]: *ret written", row->name);
	}
}

Test(egress_connect, host_of_255_accepted)
{
	static const char req[] = "CONNECT " HOST_255 ":443 HTTP/1.1\r\n\r\n";
	airlock_connect_request r;
	cr_assert_eq(connect_probe_parse(req, sizeof(req) - 1, &r), OK);
	cr_expect_eq(strlen(r.host), 255);
	cr_expect_str_eq(r.host, HOST_255);

	/* The bound is on the host as sent, brackets included: 253 characters
	 * between them fit, 254 do not. */
	for (size_t inside = 253; inside <= 254; inside++) {
		char v6[512];
		static const char head[] = "CONNECT [", tail[] = "]:443 HTTP/1.1\r\n\r\n";
		size_t n = sizeof(head) - 1;
		memcpy(v6, head, n);
		memset(v6 + n, '1', inside);
		n += inside;
		memcpy(v6 + n, tail, sizeof(tail) - 1);
		n += sizeof(tail) - 1;
		airlock_connect_status s = connect_probe_parse(v6, n, &r);
		if (inside == 253) {
			cr_assert_eq(s, OK);
			cr_expect_eq(strlen(r.host), 255);
			cr_expect_eq(r.host[0], '[');
			cr_expect_eq(r.host[254], ']');
		} else {
			cr_expect_eq(s, BAD, "a bracketed host of 256");
		}
	}
}

/* ---- the caps ---------------------------------------------------------------- */

/* A request line, count fields "X-N: v" and (with terminate) the blank line. */
static size_t with_fields(char *buf, size_t cap, size_t count, bool terminate)
{
	size_t n = (size_t)snprintf(buf, cap, "CONNECT a:443 HTTP/1.1\r\n");
	for (size_t i = 0; i < count; i++)
		n += (size_t)snprintf(buf + n, cap - n, "X-%zu: v\r\n", i);
	if (terminate)
		n += (size_t)snprintf(buf + n, cap - n, "\r\n");
	cr_assert_lt(n, cap);
	return n;
}

Test(egress_connect, field_count_cap)
{
	char buf[4096];
	airlock_connect_request r;
	size_t n = with_fields(buf, sizeof(buf), AIRLOCK_CONNECT_FIELDS_MAX, true);
	cr_expect_eq(connect_probe_parse(buf, n, &r), OK, "%d fields", AIRLOCK_CONNECT_FIELDS_MAX);
	cr_expect_eq(r.consumed, n);

	n = with_fields(buf, sizeof(buf), AIRLOCK_CONNECT_FIELDS_MAX + 1, true);
	cr_expect_eq(connect_probe_parse(buf, n, &r), TOO_LARGE, "%d fields", AIRLOCK_CONNECT_FIELDS_MAX + 1);

	/* Refused at the first byte of the field too many, not at the end. */
	n = with_fields(buf, sizeof(buf), AIRLOCK_CONNECT_FIELDS_MAX, false);
	cr_expect_eq(connect_probe_parse(buf, n, &r), INCOMPLETE);
	buf[n] = 'X';
	cr_expect_eq(connect_probe_parse(buf, n + 1, &r), TOO_LARGE);
	buf[n] = '\r';
	cr_expect_eq(connect_probe_parse(buf, n + 1, &r), INCOMPLETE, "the terminator's CR is not a field");
	cr_expect_eq(airlock_connect_status_code(TOO_LARGE), 431);
}

/* A request of exactly total bytes: request line, one field padded to fit,
 * and the terminator. */
static char *sized_request(size_t total)
{
	static const char head[] = "CONNECT example.com:443 HTTP/1.1\r\nX-Pad: ";
	static const char tail[] = "\r\n\r\n";
	const size_t h = sizeof(head) - 1, t = sizeof(tail) - 1;
	cr_assert_gt(total, h + t);
	char *buf = malloc(total);
	cr_assert_not_null(buf);
	memcpy(buf, head, h);
	memset(buf + h, 'p', total - h - t);
	memcpy(buf + total - t, tail, t);
	return buf;
}

Test(egress_connect, size_cap)
{
	airlock_connect_request r;
	const size_t max = AIRLOCK_CONNECT_REQUEST_MAX;

	/* The terminator's last byte at the cap: accepted. */
	char *buf = sized_request(max);
	cr_expect_eq(connect_probe_parse(buf, max, &r), OK);
	cr_expect_eq(r.consumed, max);
	cr_expect_eq(connect_probe_parse(buf, max - 1, &r), INCOMPLETE);
	free(buf);

	/* One byte more: the terminator ends past the cap. */
	buf = sized_request(max + 1);
	cr_expect_eq(connect_probe_parse(buf, max + 1, &r), TOO_LARGE);
	cr_expect_eq(connect_probe_parse(buf, max, &r), TOO_LARGE, "decided at the cap, before the LF");
	cr_expect_eq(connect_probe_parse(buf, max - 1, &r), INCOMPLETE);
	free(buf);

	/* 8192 bytes with no terminator: a valid request line and a long
	 * field; and bytes that never make a line at all. */
	buf = sized_request(max + 100);
	cr_expect_eq(connect_probe_parse(buf, max, &r), TOO_LARGE);
	cr_expect(connect_probe_untouched(&r));
	cr_expect_eq(connect_probe_parse(buf, max + 50, &r), TOO_LARGE, "bytes past the cap are not read");
	free(buf);
	buf = malloc(max);
	cr_assert_not_null(buf);
	memset(buf, 'A', max);
	cr_expect_eq(connect_probe_parse(buf, max, &r), TOO_LARGE);
	cr_expect_eq(connect_probe_parse(buf, max - 1, &r), INCOMPLETE);
	free(buf);
}

/* ---- status codes ------------------------------------------------------------ */

Test(egress_connect, status_codes)
{
	cr_expect_eq(airlock_connect_status_code(OK), 200);
	cr_expect_eq(airlock_connect_status_code(BAD), 400);
	cr_expect_eq(airlock_connect_status_code(NOT_CONNECT), 405);
	cr_expect_eq(airlock_connect_status_code(BAD_VERSION), 505);
	cr_expect_eq(airlock_connect_status_code(TOO_LARGE), 431);
	cr_expect_eq(airlock_connect_status_code(INCOMPLETE), 0);
	/* Outside the enum: a refusal, never 200. */
	cr_expect_eq(airlock_connect_status_code((airlock_connect_status)99), 400);
}

Test(egress_connect, bad_arguments)
{
	airlock_connect_request r;
	memset(&r, 0xa5, sizeof(r));
	cr_expect_eq(airlock_connect_parse(NULL, 5, &r), BAD);
	cr_expect_eq(airlock_connect_parse("CONNECT", 7, NULL), BAD);
	cr_expect_eq(airlock_connect_parse(NULL, 0, &r), INCOMPLETE);
	cr_expect(connect_probe_untouched(&r));
}

/* ---- the byte-by-byte parser ------------------------------------------------ */

/* Fed one byte at a time, every row gets, at every prefix, the one-shot
 * parser's answer (and OK's fields). */
static void stream_matches(const char *name, const char *req, size_t len)
{
	airlock_connect_parser p;
	airlock_connect_parser_init(&p);
	for (size_t n = 0; n <= len; n++) {
		airlock_connect_request rs, ro;
		airlock_connect_status s = connect_probe_feed(&p, req, n, &rs);
		airlock_connect_status o = connect_probe_parse(req, n, &ro);
		cr_expect_eq(s, o, "[%s]: prefix %zu: byte by byte %d, at once %d", name, n, (int)s,
		             (int)o);
		if (s == OK && o == OK) {
			cr_expect_str_eq(rs.host, ro.host, "[%s]", name);
			cr_expect_eq(rs.port, ro.port, "[%s]", name);
			cr_expect_eq(rs.consumed, ro.consumed, "[%s]", name);
		} else {
			cr_expect(connect_probe_untouched(&rs), "[%s]: prefix %zu wrote *ret", name, n);
		}
	}
}

Test(egress_connect, byte_by_byte_answers_as_the_one_shot_parser)
{
	for (size_t i = 0; i < NELEM(ok_rows); i++)
		stream_matches(ok_rows[i].name, ok_rows[i].req, strlen(ok_rows[i].req));
	for (size_t i = 0; i < NELEM(bad_rows); i++)
		stream_matches(bad_rows[i].name, bad_rows[i].req, bad_rows[i].len);
}

Test(egress_connect, byte_by_byte_a_head_at_the_cap_is_too_large)
{
	static char big[AIRLOCK_CONNECT_REQUEST_MAX + 8];
	memset(big, 'a', sizeof(big));
	memcpy(big, "CONNECT a:443 HTTP/1.1\r\nX: ", 27);
	airlock_connect_parser p;
	airlock_connect_parser_init(&p);
	airlock_connect_request r;
	for (size_t n = 0; n < AIRLOCK_CONNECT_REQUEST_MAX; n++)
		cr_assert_eq(airlock_connect_parse_more(&p, big, n, &r), INCOMPLETE, "at %zu", n);
	cr_assert_eq(airlock_connect_parse_more(&p, big, AIRLOCK_CONNECT_REQUEST_MAX, &r), TOO_LARGE);
	/* Final: later bytes change nothing; a shorter buffer is a caller's bug. */
	cr_assert_eq(airlock_connect_parse_more(&p, big, sizeof(big), &r), TOO_LARGE);
	cr_assert_eq(airlock_connect_parse_more(&p, big, 10, &r), BAD);
	/* Each byte was looked at once: the parser never went back. */
	cr_assert_eq(p.pos, AIRLOCK_CONNECT_REQUEST_MAX);
	cr_assert_eq(airlock_connect_parse_more(NULL, big, 1, &r), BAD);
}
