/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Headers a download is answered with (http.h): the Content-Disposition
 * of a stored name, a single byte range (RFC 9110 14.1.2) and If-Range.
 * Each takes a client's or a tenant's bytes and is pure: no allocation, no
 * state, every output bounded (airlock/caps.h).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "airlock/caps.h"
#include "http/http.h"

/* ---- Content-Disposition ------------------------------------------------------- */

size_t http_utf8_len(const void *s, size_t n)
{
	const unsigned char *p = s;
	if (n == 0)
		return 0;
	unsigned char c = p[0];
	if (c < 0x80)
		return 1;
	size_t len;
	uint32_t cp;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

bool http_utf8_valid(const void *s, size_t n)
{
	const unsigned char *p = s;
	for (size_t i = 0; i < n;) {
		size_t k = http_utf8_len(p + i, n - i);
		if (k == 0)
			return false;
		i += k;
	}
	return true;
}

/* A byte the fallback keeps as it is: printable ASCII but the quoted
 * string's own '"' and '\\', a path's '/' (and '\\'), and '%', which
 * some clients decode in a plain filename. */
static bool fallback_keeps(unsigned char c)
{
	return c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '/' && c != '%';
}

/* RFC 8187's attr-char: what filename*= carries unescaped. */
static bool attr_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$&+-.^_`|~", c));
}

/* The ASCII fallback into out (at most AIRLOCK_HTTP_DISPOSITION_FALLBACK_MAX
 * bytes, no NUL written): each character that is not kept becomes one '_'
 * (a valid UTF-8 sequence is one character, an invalid byte another), so
 * no control byte, quote, backslash, slash, percent or non-ASCII byte
 * reaches the header and no path part survives as one; then the leading
 * dots and spaces go (no hidden file, no "..") and the trailing ones
 * (which some systems drop themselves, turning "a." into "a"); nothing
 * left is "download". */
static size_t fallback(const unsigned char *p, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o < AIRLOCK_HTTP_DISPOSITION_FALLBACK_MAX;) {
		size_t k = http_utf8_len(p + i, n - i);
		out[o++] = k == 1 && fallback_keeps(p[i]) ? (char)p[i] : '_';
		i += k ? k : 1;
	}
	size_t start = 0;
	while (start < o && (out[start] == '.' || out[start] == ' '))
		start++;
	while (o > start && (out[o - 1] == '.' || out[o - 1] == ' '))
		o--;
	if (start == o) {
		static const char dflt[] = "download";
		memcpy(out, dflt, sizeof(dflt) - 1);
		return sizeof(dflt) - 1;
	}
	memmove(out, out + start, o - start);
	return o - start;
}

size_t http_content_disposition(const void *name, size_t len,
                                char out[AIRLOCK_HTTP_DISPOSITION_MAX])
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p = name;
	if (!p)
		len = 0;
	size_t o = 0;
	static const char head[] = "attachment; filename=\"";
	memcpy(out, head, sizeof(head) - 1);
	o += sizeof(head) - 1;
	o += fallback(p, len, out + o);
	out[o++] = '"';
	/* filename* only for a name that is valid UTF-8 (its charset says so);
	 * any other name has the fallback alone. Longer than the cap encoded:
	 * the prefix of whole characters that fits. */
	if (len > 0 && http_utf8_valid(p, len)) {
		static const char star[] = "; filename*=UTF-8''";
		memcpy(out + o, star, sizeof(star) - 1);
		o += sizeof(star) - 1;
		size_t used = 0;
		for (size_t i = 0; i < len;) {
			size_t k = http_utf8_len(p + i, len - i);
			size_t need = 0;
			for (size_t j = 0; j < k; j++)
				need += attr_char(p[i + j]) ? 1 : 3;
			if (used + need > AIRLOCK_HTTP_DISPOSITION_STAR_MAX)
				break;
			for (size_t j = 0; j < k; j++) {
				unsigned char c = p[i + j];
				if (attr_char(c)) {
					out[o++] = (char)c;
				} else {
					out[o++] = '%';
					out[o++] = hex[c >> 4];
					out[o++] = hex[c & 15];
				}
			}
			used += need;
			i += k;
		}
	}
	out[o] = 0;
	return o;
}

/* ---- byte ranges ---------------------------------------------------------------- */

/* Decimal digits at *s (advanced past them) as a number saturated at
 * UINT64_MAX; false when there is none. */
static bool digits(const char **s, const char *end, uint64_t *ret)
{
	const char *p = *s;
	uint64_t v = 0;
	while (p < end && *p >= '0' && *p <= '9') {
		unsigned d = (unsigned)(*p - '0');
		v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
		p++;
	}
	if (p == *s)
		return false;
	*s = p;
	*ret = v;
	return true;
}

static bool ows(char c)
{
	return c == ' ' || c == '\t';
}

http_range http_range_parse(const char *value, size_t len, uint64_t size, uint64_t *ret_first,
                            uint64_t *ret_last)
{
	if (!value)
		return HTTP_RANGE_NONE;
	const char *p = value, *end = value + len;
	while (p < end && ows(*p))
		p++;
	while (end > p && ows(end[-1]))
		end--;
	/* The unit, case-insensitive (RFC 9110 14.1: range units are). Any
	 * other unit, several ranges (a comma) or a form that does not parse
	 * is ignored: the whole body, as the RFC allows. */
	if (end - p < 6 || strncasecmp(p, "bytes=", 6) != 0 || memchr(p, ',', (size_t)(end - p)))
		return HTTP_RANGE_NONE;
	p += 6;
	uint64_t first = 0, last = 0;
	bool has_first = digits(&p, end, &first);
	if (p >= end || *p != '-')
		return HTTP_RANGE_NONE;
	p++;
	bool has_last = digits(&p, end, &last);
	if (p != end || (!has_first && !has_last) || (has_first && has_last && last < first))
		return HTTP_RANGE_NONE;
	/* An empty body has no byte to name: no range of it can be written
	 * in a Content-Range, so a Range on it is ignored (the whole, empty,
	 * body). */
	if (size == 0)
		return HTTP_RANGE_NONE;
	if (!has_first) {
		/* bytes=-n: the last n bytes, all of them when n is larger;
		 * n = 0 is satisfiable by nothing. */
		if (last == 0)
			return HTTP_RANGE_UNSATISFIABLE;
		*ret_first = last >= size ? 0 : size - last;
		*ret_last = size - 1;
		return HTTP_RANGE_PARTIAL;
	}
	if (first >= size)
		return HTTP_RANGE_UNSATISFIABLE;
	*ret_first = first;
	*ret_last = !has_last || last >= size ? size - 1 : last;
	return HTTP_RANGE_PARTIAL;
}

bool http_if_range_matches(const char *value, size_t len, const char *etag)
{
	if (!value)
		return true;
	const char *p = value, *end = value + len;
	while (p < end && ows(*p))
		p++;
	while (end > p && ows(end[-1]))
		end--;
	/* A strong comparison with our entity tag (RFC 9110 13.1.5); a date
	 * (we send no Last-Modified) or a weak tag never matches, and the
	 * whole body goes. */
	size_t n = strlen(etag);
	return (size_t)(end - p) == n && memcmp(p, etag, n) == 0;
}
