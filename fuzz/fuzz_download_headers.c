/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a download is answered with (src/http/http.h) and what an
 * artifact request decodes (src/worker/worker.h), over a tenant's or a
 * client's bytes. The first byte picks (mod 6); each is checked against
 * what it must mean, not only for surviving:
 *   0 http_content_disposition of the rest as a stored name: the value is
 *     printable ASCII, starts "attachment; filename=\"", its fallback is
 *     1..FALLBACK bytes with no '"', '\\', '/', '%', no leading or
 *     trailing dot or space; filename*= is there exactly when the name is
 *     valid UTF-8 and then decodes to a prefix of whole characters of it
 *     (all of it when short enough).
 *   1 http_range_parse of the rest against a size from its first 2 bytes:
 *     a partial range is within the body (first <= last < size).
 *   2 worker_artifact_route: the second byte picks the method; a route
 *     found is exactly its documented path, the id a 36-byte segment or "".
 *   3 worker_upload_query_decode: a decoded name within the cap, a media
 *     type the core accepts, a tenant valid or "".
 *   4 worker_list_query_decode: a limit in 1..1000, an after that is a
 *     UUIDv7 or "", ids valid or "".
 *   5 worker_attach_request_decode and worker_sha256_header_decode.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/ids.h"
#include "airlock/types.h"
#include "http/http.h"
#include "worker/worker.h"

static void die(const char *what)
{
	fprintf(stderr, "fuzz_download_headers: %s\n", what);
	abort();
}

static int hexv(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void fuzz_disposition(const uint8_t *d, size_t n)
{
	char out[AIRLOCK_HTTP_DISPOSITION_MAX];
	size_t len = http_content_disposition(d, n, out);
	if (len >= sizeof(out) || strlen(out) != len)
		die("disposition: length");
	for (size_t i = 0; i < len; i++)
		if (out[i] < 0x20 || out[i] > 0x7e)
			die("disposition: a byte that is not printable ASCII");
	static const char head[] = "attachment; filename=\"";
	if (strncmp(out, head, sizeof(head) - 1) != 0)
		die("disposition: not an attachment");
	const char *fb = out + sizeof(head) - 1, *q = strchr(fb, '"');
	if (!q)
		die("disposition: the fallback is not closed");
	size_t fl = (size_t)(q - fb);
	if (fl == 0 || fl > AIRLOCK_HTTP_DISPOSITION_FALLBACK_MAX)
		die("disposition: the fallback's length");
	for (size_t i = 0; i < fl; i++)
		if (strchr("\\/%", fb[i]))
			die("disposition: a path or escape byte in the fallback");
	if (fb[0] == '.' || fb[0] == ' ' || fb[fl - 1] == '.' || fb[fl - 1] == ' ')
		die("disposition: a leading or trailing dot or space");
	static const char star[] = "; filename*=UTF-8''";
	bool has_star = strncmp(q + 1, star, sizeof(star) - 1) == 0;
	if (!has_star && q[1] != 0)
		die("disposition: something after the fallback");
	if (has_star != (n > 0 && http_utf8_valid(d, n)))
		die("disposition: filename* present for a name that is not UTF-8, or absent");
	if (!has_star)
		return;
	const char *s = q + 1 + sizeof(star) - 1;
	size_t k = 0;
	for (; *s; k++) {
		int c = (unsigned char)*s;
		if (c == '%') {
			int hi = hexv(s[1]), lo = hi < 0 ? -1 : hexv(s[2]);
			if (lo < 0)
				die("disposition: a bad escape");
			c = hi * 16 + lo;
			s += 3;
		} else {
			s++;
		}
		if (k >= n || d[k] != c)
			die("disposition: filename* is not the name's bytes");
	}
	if (k < n && (k == 0 || !http_utf8_valid(d, k)))
		die("disposition: filename* cut inside a character");
}

static void fuzz_range(const uint8_t *d, size_t n)
{
	if (n < 2)
		return;
	uint64_t size = (uint64_t)d[0] << 8 | d[1], a = 0, b = 0;
	http_range k = http_range_parse((const char *)d + 2, n - 2, size, &a, &b);
	if (k == HTTP_RANGE_PARTIAL && !(a <= b && b < size))
		die("range: outside the body");
	if (k != HTTP_RANGE_NONE && !memchr(d + 2, '=', n - 2))
		die("range: a range from a value without '='");
}

static void fuzz_route(const uint8_t *d, size_t n)
{
	if (n < 1)
		return;
	static const char *const methods[] = { "GET", "PUT", "DELETE", "POST" };
	const char *t = (const char *)d + 1;
	worker_verb v;
	char run[AIRLOCK_ID_MAX + 1], id[AIRLOCK_UUID_STR_LEN + 1];
	const char *q;
	size_t ql;
	int r = worker_artifact_route(t, n - 1, methods[d[0] % 4], &v, run, id, &q, &ql);
	if (r != 0 && r != 404 && r != 405)
		die("route: another status");
	if (r != 0)
		return;
	if (id[0] && strlen(id) != AIRLOCK_UUID_STR_LEN)
		die("route: an id that is not 36 bytes");
	const char *qm = memchr(t, '?', n - 1);
	size_t plen = qm ? (size_t)(qm - t) : n - 1;
	if (memchr(t, 0, plen))
		die("route: a NUL in a routed path");
	char path[512];
	if (v == WORKER_ARTIFACT_UPLOAD || v == WORKER_ARTIFACT_LIST) {
		snprintf(path, sizeof(path), "/v1/artifacts");
	} else if (v == WORKER_ARTIFACT_ATTACH) {
		if (!airlock_id_valid(run))
			die("route: an attach without a valid run");
		if (!memmem(t, plen, "/attach", 7) || memcmp(t + plen - 7, "/attach", 7) != 0)
			die("route: attach without its suffix");
		return;
	} else if (v == WORKER_ARTIFACT_GET || v == WORKER_ARTIFACT_DELETE ||
	           v == WORKER_ARTIFACT_CONTENT) {
		if (plen < 15 || memcmp(t, "/v1/artifacts/", 14) != 0)
			die("route: an id route without its prefix");
		const char *seg = t + 14;
		size_t sl = plen - 14 - (v == WORKER_ARTIFACT_CONTENT ? 8 : 0);
		if (memchr(seg, '/', sl) || sl == 0)
			die("route: an id segment with a slash");
		if (id[0] && (sl != 36 || memcmp(seg, id, 36) != 0))
			die("route: the id is not the segment");
		return;
	} else {
		die("route: another verb");
	}
	if (strlen(path) != plen || memcmp(path, t, plen) != 0)
		die("route: another spelling reached a verb");
}

static void fuzz_upload(const uint8_t *d, size_t n)
{
	worker_upload_query q;
	airlock_error err = { 0 };
	if (worker_upload_query_decode((const char *)d, n, &q, &err) < 0) {
		if (q.filename || q.filename_len)
			die("upload: a refused query left its name");
		return;
	}
	if (!q.filename || q.filename_len > AIRLOCK_ARTIFACT_FILENAME_MAX || q.filename_len > n ||
	    !airlock_media_type_valid(q.media_type) || (q.tenant_id[0] && !airlock_id_valid(q.tenant_id)))
		die("upload: decoded out of range");
	worker_upload_query_clear(&q);
}

static void fuzz_list(const uint8_t *d, size_t n)
{
	worker_list_query q;
	airlock_error err = { 0 };
	if (worker_list_query_decode((const char *)d, n, &q, &err) < 0)
		return;
	if (q.limit < 1 || q.limit > AIRLOCK_WORKER_DB_ARTIFACTS_MAX ||
	    (q.after[0] && !airlock_uuidv7_valid(q.after)) ||
	    (q.run_id[0] && !airlock_id_valid(q.run_id)) ||
	    (q.tenant_id[0] && !airlock_id_valid(q.tenant_id)))
		die("list: decoded out of range");
}

static void fuzz_attach(const uint8_t *d, size_t n)
{
	char tenant[AIRLOCK_ID_MAX + 1];
	airlock_error err = { 0 };
	if (worker_attach_request_decode((const char *)d, n, tenant, &err) == 0 && tenant[0] &&
	    !airlock_id_valid(tenant))
		die("attach: an invalid tenant");
	char sha[AIRLOCK_SHA256_HEX_LEN + 1];
	if (worker_sha256_header_decode((const char *)d, n, sha) && !airlock_sha256_hex_valid(sha))
		die("sha256 header: not 64 lowercase hex");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 6) {
	case 0: fuzz_disposition(data + 1, size - 1); break;
	case 1: fuzz_range(data + 1, size - 1); break;
	case 2: fuzz_route(data + 1, size - 1); break;
	case 3: fuzz_upload(data + 1, size - 1); break;
	case 4: fuzz_list(data + 1, size - 1); break;
	default: fuzz_attach(data + 1, size - 1); break;
	}
	return 0;
}
