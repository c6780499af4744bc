/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proxy's CONNECT request parser (include/airlock/egress.h, "the CONNECT
 * request"; the specification, "What the proxy does on CONNECT").
 *
 * Every byte here comes from code running inside a sandbox, which is assumed
 * hostile. The parser is therefore as small and as strict as the proxy's
 * needs allow:
 *
 *   - Pure: no allocation, no I/O, no global state, nothing but the bytes in
 *     buf[0..len). It never reads buf[AIRLOCK_CONNECT_REQUEST_MAX] or beyond,
 *     and never past the terminator, so the client's first tunnel bytes are
 *     left for the relay untouched and unjudged.
 *   - One accepted spelling. Anything another HTTP implementation might read
 *     differently (bare CR or LF as a line end, obsolete line folding,
 *     whitespace around the request line's parts, a userinfo or a path in
 *     the target, a port with a leading zero) is refused rather than
 *     repaired, so there is nothing to smuggle between what this parser saw
 *     and what anything behind it sees.
 *   - Decided by a prefix. Each call looks at the bytes from the start, and
 *     a violation is reported as soon as its byte has arrived (with one
 *     exception, below), so a client cannot keep a connection parked by
 *     trickling a request that is already known to be bad. For any input,
 *     every prefix of it parses either INCOMPLETE or to the same answer as
 *     the whole (the fuzz target checks this): how the bytes were split
 *     across reads never changes the verdict.
 *   - Bounded. The whole request, terminator included, fits in
 *     AIRLOCK_CONNECT_REQUEST_MAX bytes and has at most
 *     AIRLOCK_CONNECT_FIELDS_MAX header fields; past either the answer is
 *     TOO_LARGE, so the proxy's per-connection buffer and work are fixed.
 *
 * The exception: the request line is checked in two steps. Its shape
 * (token SP target SP "HTTP/" DIGIT "." DIGIT, nothing but visible ASCII and
 * single spaces) is checked byte by byte as it arrives. What the parts mean
 * (the method, then the version, then the target's host and port, in that
 * order) is judged once the line's CRLF has arrived, because until then a
 * method such as "CONNECTX" or a port such as "44" is still a valid prefix.
 * A method other than CONNECT is NOT_CONNECT (405) whatever its target and
 * version say; a version other than HTTP/1.0 or HTTP/1.1 is BAD_VERSION
 * (505) before the target is looked at, since the version says how the rest
 * of the message would be read. Methods are case-sensitive (RFC 9110,
 * section 9.1): "connect" is a well-formed method that is not CONNECT, so
 * it is NOT_CONNECT, never a lenient match.
 *
 * The host is only checked for its characters here: whether it is a valid
 * DNS name, or an IP literal to refuse, is the evaluation function's
 * question, which it answers for every caller alike. A bracketed literal
 * keeps its brackets so that function sees (and refuses) it as one.
 */
#include "airlock/egress.h"

#include <string.h>

/* How far a line got: its CRLF has arrived; its CR is the last byte so far
 * (so its content is final, or the next byte makes a bare CR); its bytes so
 * far are fine but no CR has come; or one of its bytes breaks the framing. */
typedef enum line_end {
	LINE_DONE,
	LINE_CR,
	LINE_PARTIAL,
	LINE_BAD,
} line_end;

static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static bool is_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static bool is_hex(unsigned char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Visible ASCII: what a request target may hold. */
static bool is_vchar(unsigned char c) { return c >= 0x21 && c <= 0x7e; }

/* RFC 9110's tchar: what a method and a field name are made of. */
static bool is_tchar(unsigned char c)
{
	if (is_digit(c) || is_alpha(c))
		return true;
	switch (c) {
	case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
	case '-': case '.': case '^': case '_': case '`': case '|': case '~':
		return true;
	default:
		return false;
	}
}

/* A host name's characters as the proxy accepts them: letters, digits, '.'
 * and '-'. Everything that would make the target mean something other than
 * host and port to a URL parser ('@', '/', '%', '\\', '?', '#') is absent. */
static bool is_host_char(unsigned char c) { return is_digit(c) || is_alpha(c) || c == '.' || c == '-'; }

/* Inside "[...]": the characters of IPv6 text (with an embedded IPv4 tail).
 * No '%': a zone is refused here, not passed on to be interpreted. */
static bool is_v6_char(unsigned char c) { return is_hex(c) || c == ':' || c == '.'; }

/*
 * Find where the line starting at pos ends, looking at b[pos..limit) only.
 * *ret_end is the index of the line's CR (or limit if none has arrived).
 * The framing rules are checked on every byte here, whatever line it is in:
 * a CR must be followed by LF and an LF preceded by CR (a bare one is a
 * line end to some parsers and not to others: the classic way to smuggle a
 * second request or header past the first parser); no NUL (C strings behind
 * us would stop there and see a different line); no byte >= 0x7f (not
 * ASCII, so its meaning depends on who decodes it); no other control
 * character but HTAB (which field values may hold).
 */
static line_end find_line_end(const unsigned char *b, size_t pos, size_t limit, size_t *ret_end)
{
	for (size_t i = pos; i < limit; i++) {
		unsigned char c = b[i];
		if (c == '\r') {
			*ret_end = i;
			if (i + 1 >= limit)
				return LINE_CR; /* the LF may still come */
			return b[i + 1] == '\n' ? LINE_DONE : LINE_BAD;
		}
		if (c == '\n' || c == 0 || c >= 0x7f || (c < 0x20 && c != '\t'))
			return LINE_BAD;
	}
	*ret_end = limit;
	return LINE_PARTIAL;
}

/* The CONNECT target, all of t[0..n): host ":" port and nothing else (no
 * userinfo, no scheme, no path). Fills req's host and port. */
static bool parse_authority(const unsigned char *t, size_t n, airlock_connect_request *req)
{
	size_t h = 0;
	if (n > 0 && t[0] == '[') {
		h = 1;
		while (h < n && is_v6_char(t[h]))
			h++;
		/* "[" at least two characters "]": "[]" and "[:]" are not
		 * addresses, and the evaluation function gets a literal it
		 * can recognize as one. */
		if (h >= n || t[h] != ']' || h - 1 < 2)
			return false;
		h++;
	} else {
		while (h < n && is_host_char(t[h]))
			h++;
		if (h == 0)
			return false;
	}
	/* The bound is on the host as sent, brackets included, so it always
	 * fits req->host with its NUL. */
	if (h > AIRLOCK_CONNECT_HOST_MAX)
		return false;
	if (h >= n || t[h] != ':')
		return false;
	/* The one port rule every door uses (policy.c). */
	if (!airlock_port_parse((const char *)t + h + 1, n - h - 1, &req->port))
		return false;
	memcpy(req->host, t, h);
	req->host[h] = 0;
	return true;
}

/*
 * The request line l[0..n), complete when its CRLF has arrived. While it
 * has not, INCOMPLETE means "a valid prefix of the shape so far" and
 * BAD_REQUEST that no continuation could make it one. Once complete, OK
 * fills req.
 */
static airlock_connect_status request_line(const unsigned char *l, size_t n, bool complete,
                                           airlock_connect_request *req)
{
	const airlock_connect_status more = complete ? AIRLOCK_CONNECT_BAD_REQUEST
	                                             : AIRLOCK_CONNECT_INCOMPLETE;
	size_t i = 0;

	/* method: a token, then exactly one SP (no leading whitespace, no
	 * runs of spaces, no HTAB: one spelling of the line). */
	while (i < n && is_tchar(l[i]))
		i++;
	if (i == n)
		return more;
	if (i == 0 || l[i] != ' ')
		return AIRLOCK_CONNECT_BAD_REQUEST;
	const size_t method_len = i++;

	/* target: visible ASCII, then exactly one SP. */
	const size_t target = i;
	while (i < n && is_vchar(l[i]))
		i++;
	if (i == n)
		return more;
	if (i == target || l[i] != ' ')
		return AIRLOCK_CONNECT_BAD_REQUEST;
	const size_t target_len = i - target;
	i++;

	/* version: "HTTP/" DIGIT "." DIGIT (RFC 9112; "HTTP" is
	 * case-sensitive), and the line ends right after it. */
	static const char shape[] = "HTTP/0.0";
	const size_t shape_len = sizeof(shape) - 1;
	const size_t version = i;
	if (n - version > shape_len)
		return AIRLOCK_CONNECT_BAD_REQUEST;
	for (size_t k = 0; version + k < n; k++) {
		unsigned char c = l[version + k];
		bool ok = shape[k] == '0' ? is_digit(c) : c == (unsigned char)shape[k];
		if (!ok)
			return AIRLOCK_CONNECT_BAD_REQUEST;
	}
	if (n - version < shape_len)
		return more;
	if (!complete)
		return AIRLOCK_CONNECT_INCOMPLETE; /* a valid line whose CRLF is on its way */

	/* The meaning, in order: method, version, target. */
	if (method_len != 7 || memcmp(l, "CONNECT", 7) != 0)
		return AIRLOCK_CONNECT_NOT_CONNECT;
	if (memcmp(l + version, "HTTP/1.1", shape_len) != 0 &&
	    memcmp(l + version, "HTTP/1.0", shape_len) != 0)
		return AIRLOCK_CONNECT_BAD_VERSION;
	if (!parse_authority(l + target, target_len, req))
		return AIRLOCK_CONNECT_BAD_REQUEST;
	return AIRLOCK_CONNECT_OK;
}

/*
 * One header field line l[0..n) (not the blank line), complete or a prefix,
 * answered as request_line does. The fields are read past, never used, but
 * they are still held to the grammar: a line this parser skipped as a value
 * must not be a line some other parser reads as a field or a second request.
 */
static airlock_connect_status field_line(const unsigned char *l, size_t n, bool complete)
{
	/* The caller never passes an empty line (that is the blank line); the
	 * check keeps l[0] below in bounds whatever a caller does. */
	if (n == 0)
		return complete ? AIRLOCK_CONNECT_BAD_REQUEST : AIRLOCK_CONNECT_INCOMPLETE;
	/* A line starting with whitespace is obsolete line folding (or, after
	 * the request line, whitespace some parsers would skip and others
	 * would read as a field of its own): RFC 9112 lets a server refuse it,
	 * and we do. */
	if (l[0] == ' ' || l[0] == '\t')
		return AIRLOCK_CONNECT_BAD_REQUEST;
	size_t i = 0;
	while (i < n && is_tchar(l[i]))
		i++;
	if (i == n)
		return complete ? AIRLOCK_CONNECT_BAD_REQUEST : AIRLOCK_CONNECT_INCOMPLETE;
	/* The name ends at ':' with nothing between (a space before the colon
	 * is how a name gets read two ways: RFC 9112 section 5.1). */
	if (i == 0 || l[i] != ':')
		return AIRLOCK_CONNECT_BAD_REQUEST;
	/* OWS field-value OWS: all of it is SP, HTAB or visible ASCII.
	 * find_line_end has already refused every other byte; the grammar is
	 * still stated where the value is read, so the two cannot drift. */
	for (i++; i < n; i++)
		if (l[i] != ' ' && l[i] != '\t' && !is_vchar(l[i]))
			return AIRLOCK_CONNECT_BAD_REQUEST;
	return complete ? AIRLOCK_CONNECT_OK : AIRLOCK_CONNECT_INCOMPLETE;
}

/* The one-shot parser. The proxy does not call it (it feeds
 * airlock_connect_parse_more as bytes arrive); it is kept as the reference:
 * the grammar stated line by line, which fuzz/fuzz_connect.c holds the
 * byte-by-byte parser to on every prefix and the tests use to parse a whole
 * request. Deleting it would leave the state machine checked against
 * nothing. */
airlock_connect_status airlock_connect_parse(const char *buf, size_t len,
                                             airlock_connect_request *ret)
{
	if (!ret || (!buf && len > 0))
		return AIRLOCK_CONNECT_BAD_REQUEST;
	const unsigned char *b = (const unsigned char *)buf;
	/* Nothing at or past the cap is ever read: a request that has not
	 * ended within it is too large whatever comes next. */
	const bool capped = len >= AIRLOCK_CONNECT_REQUEST_MAX;
	const size_t limit = capped ? AIRLOCK_CONNECT_REQUEST_MAX : len;
	const airlock_connect_status short_read = capped ? AIRLOCK_CONNECT_TOO_LARGE
	                                                 : AIRLOCK_CONNECT_INCOMPLETE;
	/* Filled by the request line, copied out only with OK. */
	airlock_connect_request req;
	memset(&req, 0, sizeof(req));
	size_t pos = 0, fields = 0;
	bool first = true;

	for (;;) {
		if (pos >= limit)
			return short_read;
		bool blank = !first && b[pos] == '\r';
		/* One field too many is refused at its first byte, before the
		 * rest of its line is looked at. */
		if (!first && !blank && fields == AIRLOCK_CONNECT_FIELDS_MAX)
			return AIRLOCK_CONNECT_TOO_LARGE;
		size_t end;
		line_end e = find_line_end(b, pos, limit, &end);
		if (e == LINE_BAD)
			return AIRLOCK_CONNECT_BAD_REQUEST;
		if (blank) {
			if (e != LINE_DONE)
				return short_read; /* the CR is the last byte so far */
			ret->port = req.port;
			ret->consumed = end + 2;
			memcpy(ret->host, req.host, sizeof(ret->host));
			return AIRLOCK_CONNECT_OK;
		}
		/* With its CR arrived, a line's content is final: whatever the
		 * next byte, a line that is malformed as it stands is refused now
		 * (LF ends it as it is; anything else is a bare CR). Any other
		 * verdict waits for the LF, which a bare CR would overrule. */
		bool complete = e != LINE_PARTIAL;
		airlock_connect_status s = first ? request_line(b + pos, end - pos, complete, &req)
		                                 : field_line(b + pos, end - pos, complete);
		if (e != LINE_DONE)
			return s == AIRLOCK_CONNECT_BAD_REQUEST ? s : short_read;
		if (s != AIRLOCK_CONNECT_OK)
			return s;
		if (!first)
			fields++;
		first = false;
		pos = end + 2;
	}
}

/* ---- the same grammar, byte by byte ------------------------------------------
 *
 * airlock_connect_parse above states the grammar line by line and reads
 * from the first byte on every call; a client trickling its request one
 * byte per segment would make the proxy pay for every byte so far on every
 * byte. This is the same grammar as a state machine: one step per byte, in
 * the order the one-shot parser judges them, so that each prefix gets the
 * one-shot parser's answer (the fuzz target compares the two on every
 * prefix, split every way). The steps, per line:
 *
 *   any byte    a CR ends the line's content (judged now; the verdict is due
 *               at the LF, and anything but LF after a CR is a bare CR: 400);
 *               LF, NUL, bytes >= 0x7f and controls but HTAB are 400
 *               (find_line_end's framing rules);
 *   request     method (tchar+) SP target (vchar+) SP "HTTP/" DIGIT "." DIGIT:
 *   line        each byte checked against its part (request_line's shape);
 *               at the CR, the meaning: method, version, then the target;
 *   field line  at its first byte: a CR is the blank line, one field too many
 *               is 431, SP or HTAB is folding (400); then name (tchar+) ":"
 *               value (SP, HTAB, vchar).
 */

enum {
	ST_METHOD,
	ST_TARGET,
	ST_VERSION,
	ST_LINE_START, /* a field line or the blank line, no byte of it yet */
	ST_NAME,
	ST_VALUE,
	ST_CR, /* the line's CR was the last byte */
};

void airlock_connect_parser_init(airlock_connect_parser *p)
{
	if (!p)
		return;
	memset(p, 0, sizeof(*p));
	p->state = ST_METHOD;
	p->at_lf = AIRLOCK_CONNECT_INCOMPLETE;
	p->final = AIRLOCK_CONNECT_INCOMPLETE;
}

/* The line's content is final (its CR has come): what request_line or
 * field_line answer for it complete. BAD_REQUEST is answered at once;
 * anything else when the LF arrives. */
static airlock_connect_status line_content(airlock_connect_parser *p, const unsigned char *b)
{
	switch (p->state) {
	case ST_VERSION:
		if (p->pos - p->version < sizeof("HTTP/0.0") - 1)
			return AIRLOCK_CONNECT_BAD_REQUEST;
		if (p->method_len != 7 || memcmp(b, "CONNECT", 7) != 0)
			return AIRLOCK_CONNECT_NOT_CONNECT;
		if (memcmp(b + p->version, "HTTP/1.1", 8) != 0 &&
		    memcmp(b + p->version, "HTTP/1.0", 8) != 0)
			return AIRLOCK_CONNECT_BAD_VERSION;
		return parse_authority(b + p->target, p->target_len, &p->req) ?
		               AIRLOCK_CONNECT_OK :
		               AIRLOCK_CONNECT_BAD_REQUEST;
	case ST_VALUE:
		return AIRLOCK_CONNECT_OK;
	default:
		/* A method, target or field name with its line ended early. */
		return AIRLOCK_CONNECT_BAD_REQUEST;
	}
}

/* One byte, b[p->pos]. INCOMPLETE: go on. */
static airlock_connect_status step(airlock_connect_parser *p, const unsigned char *b)
{
	const size_t i = p->pos;
	const unsigned char c = b[i];
	if (p->state == ST_CR) {
		if (c != '\n')
			return AIRLOCK_CONNECT_BAD_REQUEST; /* a bare CR */
		if (p->blank) {
			p->req.consumed = i + 1;
			return AIRLOCK_CONNECT_OK;
		}
		if (p->at_lf != AIRLOCK_CONNECT_OK)
			return p->at_lf;
		if (p->request_line_done)
			p->fields++;
		p->request_line_done = true;
		p->state = ST_LINE_START;
		return AIRLOCK_CONNECT_INCOMPLETE;
	}
	if (p->state == ST_LINE_START) {
		if (c == '\r') {
			p->blank = true;
			p->state = ST_CR;
			return AIRLOCK_CONNECT_INCOMPLETE;
		}
		/* One field too many, at its first byte, whatever it is. */
		if (p->fields == AIRLOCK_CONNECT_FIELDS_MAX)
			return AIRLOCK_CONNECT_TOO_LARGE;
	}
	if (c == '\n' || c == 0 || c >= 0x7f || (c < 0x20 && c != '\t' && c != '\r'))
		return AIRLOCK_CONNECT_BAD_REQUEST;
	if (c == '\r') {
		airlock_connect_status s = line_content(p, b);
		if (s == AIRLOCK_CONNECT_BAD_REQUEST)
			return s;
		p->at_lf = s;
		p->state = ST_CR;
		return AIRLOCK_CONNECT_INCOMPLETE;
	}
	switch (p->state) {
	case ST_METHOD:
		if (is_tchar(c)) {
			p->method_len++;
			return AIRLOCK_CONNECT_INCOMPLETE;
		}
		if (c != ' ' || p->method_len == 0)
			return AIRLOCK_CONNECT_BAD_REQUEST;
		p->target = i + 1;
		p->state = ST_TARGET;
		return AIRLOCK_CONNECT_INCOMPLETE;
	case ST_TARGET:
		if (is_vchar(c))
			return AIRLOCK_CONNECT_INCOMPLETE;
		if (c != ' ' || i == p->target)
			return AIRLOCK_CONNECT_BAD_REQUEST;
		p->target_len = i - p->target;
		p->version = i + 1;
		p->state = ST_VERSION;
		return AIRLOCK_CONNECT_INCOMPLETE;
	case ST_VERSION: {
		static const char shape[] = "HTTP/0.0";
		const size_t k = i - p->version;
		if (k >= sizeof(shape) - 1)
			return AIRLOCK_CONNECT_BAD_REQUEST;
		bool ok = shape[k] == '0' ? is_digit(c) : c == (unsigned char)shape[k];
		return ok ? AIRLOCK_CONNECT_INCOMPLETE : AIRLOCK_CONNECT_BAD_REQUEST;
	}
	case ST_LINE_START:
		/* Folding, or whitespace some parsers skip: refused. */
		if (!is_tchar(c))
			return AIRLOCK_CONNECT_BAD_REQUEST;
		p->state = ST_NAME;
		return AIRLOCK_CONNECT_INCOMPLETE;
	case ST_NAME:
		if (is_tchar(c))
			return AIRLOCK_CONNECT_INCOMPLETE;
		if (c != ':')
			return AIRLOCK_CONNECT_BAD_REQUEST;
		p->state = ST_VALUE;
		return AIRLOCK_CONNECT_INCOMPLETE;
	case ST_VALUE:
		return c == ' ' || c == '\t' || is_vchar(c) ? AIRLOCK_CONNECT_INCOMPLETE :
		                                             AIRLOCK_CONNECT_BAD_REQUEST;
	default:
		return AIRLOCK_CONNECT_BAD_REQUEST; /* a state nothing sets: fail closed */
	}
}

airlock_connect_status airlock_connect_parse_more(airlock_connect_parser *p, const char *buf,
                                                  size_t len, airlock_connect_request *ret)
{
	if (!p || !ret || (!buf && len > 0) || len < p->pos)
		return AIRLOCK_CONNECT_BAD_REQUEST;
	if (p->final == AIRLOCK_CONNECT_INCOMPLETE) {
		const unsigned char *b = (const unsigned char *)buf;
		/* Nothing at or past the cap is ever looked at. */
		const size_t limit = len >= AIRLOCK_CONNECT_REQUEST_MAX ? AIRLOCK_CONNECT_REQUEST_MAX :
		                                                          len;
		while (p->final == AIRLOCK_CONNECT_INCOMPLETE && p->pos < limit) {
			p->final = step(p, b);
			p->pos++;
		}
		if (p->final == AIRLOCK_CONNECT_INCOMPLETE && len >= AIRLOCK_CONNECT_REQUEST_MAX)
			p->final = AIRLOCK_CONNECT_TOO_LARGE;
	}
	if (p->final == AIRLOCK_CONNECT_OK)
		*ret = p->req;
	return p->final;
}

int airlock_connect_status_code(airlock_connect_status s)
{
	switch (s) {
	case AIRLOCK_CONNECT_INCOMPLETE:
		return 0;
	case AIRLOCK_CONNECT_OK:
		return 200;
	case AIRLOCK_CONNECT_BAD_REQUEST:
		return 400;
	case AIRLOCK_CONNECT_NOT_CONNECT:
		return 405;
	case AIRLOCK_CONNECT_BAD_VERSION:
		return 505;
	case AIRLOCK_CONNECT_TOO_LARGE:
		return 431;
	}
	/* A value outside the enum is a caller's bug; answer it with a refusal,
	 * never with 200. */
	return 400;
}
