/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's artifact routes (docs/worker-api.md, "Artifacts") through
 * the real airlock-worker on a Unix socket over SQLite, with a raw
 * HTTP/1.1 client that streams bodies and reads headers: an 8 MiB upload
 * and download byte for byte with the digest compared; a wrong digest, a
 * client gone mid-body and a body past the cap leave nothing in the store
 * (no row, no object, no temporary); another tenant's id, a missing id
 * and a non-UUIDv7 id are one identical 404; names that are not paths
 * (../../etc/passwd, 10,000 bytes, NUL, controls, invalid UTF-8) kept in
 * the metadata and sanitized in the header; byte ranges; a media type
 * that is not type/subtype refused; listing, attach and delete. Then the
 * pure parts: the Content-Disposition, the range parser, the decoders.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/http.h"
#include "util/util.h"
#include "worker/worker.h"

#include "worker_testlib.h"

#define TOKEN_A "tok-a-0123456789abcdef"
#define TOKEN_B "tok-b-0123456789abcdef"
#define TOKEN_ALL "tok-all-0123456789abcdef"

typedef struct fx {
	char dir[64], sock[128], config[128], log[128], store[128];
	pid_t pid;
} fx;

static void fx_init(fx *f, const char *extra)
{
	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/airlock-wart-XXXXXX");
	cr_assert(mkdtemp(f->dir));
	snprintf(f->sock, sizeof(f->sock), "%s/w.sock", f->dir);
	snprintf(f->config, sizeof(f->config), "%s/airlock.yaml", f->dir);
	snprintf(f->log, sizeof(f->log), "%s/log", f->dir);
	snprintf(f->store, sizeof(f->store), "%s/artifacts", f->dir);
	char tokens[160], text[1024];
	snprintf(tokens, sizeof(tokens), "%s/tokens", f->dir);
	wt_write_file(tokens, TOKEN_A " tenant-a\n" TOKEN_B " tenant-b\n" TOKEN_ALL " *\n", 0600);
	snprintf(text, sizeof(text),
	         "worker:\n  listen: unix:%s\n  state_dir: %s\n  auth_mode: tokens\n"
	         "  tokens_file: %s\n%s",
	         f->sock, f->dir, tokens, extra ? extra : "");
	wt_write_file(f->config, text, 0600);
	const char *exe = getenv("AIRLOCK_TEST_WORKER");
	cr_assert(exe, "AIRLOCK_TEST_WORKER is not set (run through meson test)");
	char *argv[] = { "airlock-worker", "--config", f->config, NULL };
	f->pid = wt_start(exe, argv, f->log, f->sock);
}

static void fx_done(fx *f)
{
	wt_down(f->pid, 0, f->log, f->dir);
}

/* Every file under dir (recursively), directories not counted. */
static size_t files_under(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    !strcmp(e->d_name, ".store-id") || /* the store's records, not objects */
		    !strcmp(e->d_name, ".database-id"))
			continue;
		char p[512];
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		struct stat st;
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			n += files_under(p);
		else
			n++;
	}
	closedir(d);
	return n;
}

/* ---- a raw client that streams and keeps the headers --------------------------------- */

typedef struct answer {
	int status;
	char head[8192];
	unsigned char *body;
	size_t len;
} answer;

static void answer_clear(answer *a)
{
	free(a->body);
	memset(a, 0, sizeof(*a));
}

/* A header's value in a's head (NUL-terminated copy, static), or NULL. */
static const char *header(const answer *a, const char *name)
{
	static char v[4096];
	size_t nl = strlen(name);
	for (const char *p = strstr(a->head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
		const char *l = p + 2;
		if (strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
			const char *s = l + nl + 1;
			while (*s == ' ')
				s++;
			const char *e = strstr(s, "\r\n");
			size_t k = e ? (size_t)(e - s) : strlen(s);
			if (k >= sizeof(v))
				k = sizeof(v) - 1;
			memcpy(v, s, k);
			v[k] = 0;
			return v;
		}
	}
	return NULL;
}

static void send_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return; /* the server answered early and closed: read its answer */
		c += k;
		n -= (size_t)k;
	}
}

static void read_answer(int fd, answer *a)
{
	util_buf b;
	util_buf_init(&b, (size_t)64 << 20);
	char buf[65536];
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		cr_assert_eq(poll(&p, 1, 20000), 1, "no answer within 20 s");
		ssize_t k = read(fd, buf, sizeof(buf));
		if (k <= 0)
			break;
		cr_assert_eq(util_buf_append(&b, buf, (size_t)k), 0);
	}
	const char *s = (const char *)b.data;
	cr_assert(b.len > 12 && sscanf(s, "HTTP/1.1 %d", &a->status) == 1, "no status line");
	const char *e = memmem(s, b.len, "\r\n\r\n", 4);
	cr_assert(e);
	size_t hl = (size_t)(e - s) + 2;
	cr_assert(hl < sizeof(a->head));
	memcpy(a->head, s, hl);
	a->head[hl] = 0;
	a->len = b.len - hl - 2;
	a->body = malloc(a->len + 1);
	memcpy(a->body, e + 4, a->len);
	a->body[a->len] = 0;
	util_buf_clear(&b);
}

/* One request: extra header lines (each ending "\r\n"), a body of len
 * bytes (NULL: none). */
static void call(fx *f, const char *method, const char *target, const char *token,
                 const char *extra, const void *body, size_t len, answer *a)
{
	memset(a, 0, sizeof(*a));
	int fd = wt_connect(f->sock);
	cr_assert(fd >= 0);
	char head[32768];
	int n = snprintf(head, sizeof(head),
	                 "%s %s HTTP/1.1\r\nHost: worker\r\nConnection: close\r\n"
	                 "Authorization: Bearer %s\r\n%sContent-Length: %zu\r\n\r\n",
	                 method, target, token, extra ? extra : "", body ? len : 0);
	cr_assert(n > 0 && (size_t)n < sizeof(head));
	send_all(fd, head, (size_t)n);
	if (body)
		send_all(fd, body, len);
	read_answer(fd, a);
	close(fd);
}

static void sha256_hex(const void *p, size_t n, char out[65])
{
	unsigned char md[32];
	unsigned int ml = 0;
	cr_assert(EVP_Digest(p, n, md, &ml, EVP_sha256(), NULL));
	for (int i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
}

/* Percent-encode every byte but RFC 3986's unreserved ones. */
static char *pct(const void *p, size_t n)
{
	const unsigned char *c = p;
	char *o = malloc(3 * n + 1);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if ((c[i] >= 'a' && c[i] <= 'z') || (c[i] >= 'A' && c[i] <= 'Z') ||
		    (c[i] >= '0' && c[i] <= '9') || (c[i] && strchr("-._~", c[i])))
			o[k++] = (char)c[i];
		else
			k += (size_t)sprintf(o + k, "%%%02X", c[i]);
	}
	o[k] = 0;
	return o;
}

/* Upload data with its name; the id into ret_id (201 asserted). */
static void upload(fx *f, const char *token, const void *name, size_t name_len,
                   const char *media, const void *data, size_t len, char ret_id[37])
{
	char sha[65], extra[128], *target = NULL, *en = pct(name, name_len);
	sha256_hex(data, len, sha);
	snprintf(extra, sizeof(extra), "Airlock-Content-SHA256: %s\r\n", sha);
	cr_assert(asprintf(&target, "/v1/artifacts?filename=%s&media_type=%s", en, media) > 0);
	answer a;
	call(f, "POST", target, token, extra, data, len, &a);
	cr_assert_eq(a.status, 201, "%s", a.body);
	const char *id = strstr((char *)a.body, "\"artifact_id\":\"");
	cr_assert(id);
	memcpy(ret_id, id + 15, 36);
	ret_id[36] = 0;
	cr_assert(strstr((char *)a.body, sha), "%s", a.body);
	answer_clear(&a);
	free(target);
	free(en);
}

static unsigned char *pattern(size_t n)
{
	unsigned char *p = malloc(n);
	uint32_t x = 2463534242u;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)x;
	}
	return p;
}

/* ---- the routes ------------------------------------------------------------------------- */

Test(artifacts_api, upload_and_download_8mib_byte_for_byte)
{
	fx f;
	fx_init(&f, NULL);
	size_t n = (size_t)8 << 20;
	unsigned char *data = pattern(n);
	char id[37], sha[65], etag[80];
	upload(&f, TOKEN_A, "big.bin", 7, "application/octet-stream", data, n, id);
	sha256_hex(data, n, sha);
	char target[128];
	snprintf(target, sizeof(target), "/v1/artifacts/%s/content", id);
	answer a;
	call(&f, "GET", target, TOKEN_A, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 200, "%s", a.head);
	cr_assert_eq(a.len, n);
	cr_assert(memcmp(a.body, data, n) == 0, "the bytes differ");
	char got[65];
	sha256_hex(a.body, a.len, got);
	cr_assert_str_eq(got, sha);
	snprintf(etag, sizeof(etag), "\"sha256:%s\"", sha);
	cr_assert_str_eq(header(&a, "ETag"), etag);
	cr_assert_str_eq(header(&a, "X-Content-Type-Options"), "nosniff");
	cr_assert_str_eq(header(&a, "Accept-Ranges"), "bytes");
	cr_assert_str_eq(header(&a, "Content-Type"), "application/octet-stream");
	cr_assert_str_eq(header(&a, "Content-Length"), "8388608");
	cr_assert_str_eq(header(&a, "Content-Disposition"),
	                 "attachment; filename=\"big.bin\"; filename*=UTF-8''big.bin");
	answer_clear(&a);
	/* The metadata: every field, the tenant's own. */
	snprintf(target, sizeof(target), "/v1/artifacts/%s", id);
	call(&f, "GET", target, TOKEN_A, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 200, "%s", a.body);
	const char *want[] = { "\"tenant_id\":\"tenant-a\"", "\"run_id\":null", "\"origin\":\"UPLOAD\"",
		               "\"trust\":\"USER_SUPPLIED\"", "\"size_bytes\":8388608",
		               "\"filename\":\"big.bin\"", "\"filename_base64\":\"YmlnLmJpbg==\"",
		               "\"created_at\":", "\"expires_at\":\"" };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect(strstr((char *)a.body, want[i]), "%s not in %s", want[i], a.body);
	answer_clear(&a);
	free(data);
	fx_done(&f);
}

Test(artifacts_api, a_wrong_digest_stores_nothing)
{
	fx f;
	fx_init(&f, NULL);
	size_t n = (size_t)1 << 20;
	unsigned char *data = pattern(n);
	answer a;
	call(&f, "POST", "/v1/artifacts?filename=x", TOKEN_A,
	     "Airlock-Content-SHA256: "
	     "0000000000000000000000000000000000000000000000000000000000000000\r\n",
	     data, n, &a);
	cr_assert_eq(a.status, 422, "%s", a.body);
	cr_assert(strstr((char *)a.body, "ArtifactIntegrityError"), "%s", a.body);
	answer_clear(&a);
	cr_assert_eq(files_under(f.store), 0, "an object or a temporary was left");
	call(&f, "GET", "/v1/artifacts", TOKEN_A, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 200, "%s", a.body);
	cr_assert(strstr((char *)a.body, "\"artifacts\":[]"), "a row was left: %s", a.body);
	answer_clear(&a);
	/* No header at all: refused before a byte is stored. */
	call(&f, "POST", "/v1/artifacts?filename=x", TOKEN_A, NULL, data, 10, &a);
	cr_assert_eq(a.status, 400, "%s", a.body);
	cr_assert(strstr((char *)a.body, "Airlock-Content-SHA256"), "%s", a.body);
	answer_clear(&a);
	cr_assert_eq(files_under(f.store), 0);
	free(data);
	fx_done(&f);
}

Test(artifacts_api, a_client_gone_mid_upload_leaves_nothing)
{
	fx f;
	fx_init(&f, NULL);
	int fd = wt_connect(f.sock);
	cr_assert(fd >= 0);
	char head[512];
	int n = snprintf(head, sizeof(head),
	                 "POST /v1/artifacts?filename=half HTTP/1.1\r\nHost: w\r\n"
	                 "Authorization: Bearer " TOKEN_A "\r\nAirlock-Content-SHA256: "
	                 "%064d\r\nContent-Length: 4194304\r\n\r\n",
	                 0);
	send_all(fd, head, (size_t)n);
	unsigned char *data = pattern((size_t)1 << 20);
	send_all(fd, data, (size_t)1 << 20);
	/* The temporary exists while the body streams. */
	int64_t until = util_monotonic_ms() + 5000;
	while (files_under(f.store) == 0 && util_monotonic_ms() < until)
		usleep(10000);
	cr_assert_eq(files_under(f.store), 1, "no temporary while the body streams");
	close(fd);
	until = util_monotonic_ms() + 5000;
	while (files_under(f.store) != 0 && util_monotonic_ms() < until)
		usleep(10000);
	cr_assert_eq(files_under(f.store), 0, "the temporary outlived its client");
	until = util_monotonic_ms() + 5000;
	while (!strstr(wt_read_log(f.log), "\"reason\":\"aborted\"") && util_monotonic_ms() < until)
		usleep(10000);
	cr_assert(strstr(wt_read_log(f.log), "\"reason\":\"aborted\""), "%s", wt_read_log(f.log));
	free(data);
	fx_done(&f);
}

Test(artifacts_api, a_body_past_the_cap_is_413_and_leaves_nothing)
{
	fx f;
	fx_init(&f, "  artifact_size_max: 65536\n");
	size_t n = 200000;
	unsigned char *data = pattern(n);
	char sha[65], extra[128];
	sha256_hex(data, n, sha);
	snprintf(extra, sizeof(extra), "Airlock-Content-SHA256: %s\r\n", sha);
	answer a;
	call(&f, "POST", "/v1/artifacts?filename=big", TOKEN_A, extra, data, n, &a);
	cr_assert_eq(a.status, 413, "%s", a.body);
	answer_clear(&a);
	cr_assert_eq(files_under(f.store), 0);
	free(data);
	fx_done(&f);
}

/* A tenant's byte cap (worker.artifact_tenant_bytes_max): the upload that
 * would pass it is 409 naming the setting and keeps nothing; another
 * tenant is not held back by it. */
Test(artifacts_api, the_tenants_byte_cap_is_409_and_keeps_nothing)
{
	fx f;
	fx_init(&f, "  artifact_tenant_bytes_max: 100000\n");
	size_t n = 60000;
	unsigned char *data = pattern(n);
	char id[37];
	upload(&f, TOKEN_A, "one", 3, "application/octet-stream", data, n, id);
	char sha[65], extra[128];
	sha256_hex(data, n, sha);
	snprintf(extra, sizeof(extra), "Airlock-Content-SHA256: %s\r\n", sha);
	answer a;
	call(&f, "POST", "/v1/artifacts?filename=two", TOKEN_A, extra, data, n, &a);
	cr_assert_eq(a.status, 409, "%s", a.body);
	cr_assert(strstr((char *)a.body, "worker.artifact_tenant_bytes_max"), "%s", a.body);
	answer_clear(&a);
	cr_assert_eq(files_under(f.store), 1, "only the first object");
	upload(&f, TOKEN_B, "one", 3, "application/octet-stream", data, n, id);
	cr_assert_eq(files_under(f.store), 2);
	free(data);
	fx_done(&f);
}

Test(artifacts_api, another_tenant_missing_and_malformed_ids_are_one_404)
{
	fx f;
	fx_init(&f, NULL);
	char id[37];
	upload(&f, TOKEN_A, "a.txt", 5, "text/plain", "hello", 5, id);
	const char *ids[] = { id, "0190a000-0000-7000-8000-000000000000", "not-a-uuid",
		              "../../etc/passwd" };
	const char *suffix[] = { "", "/content" };
	char first_head[8192] = "", first_body[4096] = "";
	for (size_t s = 0; s < 2; s++)
		for (size_t i = 0; i < 4; i++) {
			char target[256];
			snprintf(target, sizeof(target), "/v1/artifacts/%s%s", ids[i], suffix[s]);
			if (i == 3)
				snprintf(target, sizeof(target), "/v1/artifacts/..%%2F..%%2Fetc%s",
				         suffix[s]);
			answer a;
			call(&f, "GET", target, TOKEN_B, NULL, NULL, 0, &a);
			cr_assert_eq(a.status, 404, "%s: %s", target, a.body);
			/* Same body, same headers but the date. */
			char *date = strstr(a.head, "Date: ");
			if (date)
				memset(date, 'x', strcspn(date, "\r"));
			if (!first_head[0]) {
				snprintf(first_head, sizeof(first_head), "%s", a.head);
				snprintf(first_body, sizeof(first_body), "%s", (char *)a.body);
			}
			cr_assert_str_eq(a.head, first_head, "%s", target);
			cr_assert_str_eq((char *)a.body, first_body, "%s", target);
			answer_clear(&a);
		}
	/* The owner and a token of every tenant see it; B cannot delete it. */
	char target[128];
	snprintf(target, sizeof(target), "/v1/artifacts/%s", id);
	answer a;
	call(&f, "DELETE", target, TOKEN_B, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 404);
	answer_clear(&a);
	call(&f, "GET", target, TOKEN_ALL, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 200, "%s", a.body);
	answer_clear(&a);
	call(&f, "DELETE", target, TOKEN_A, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 204, "%s", a.body);
	answer_clear(&a);
	call(&f, "GET", target, TOKEN_A, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 404);
	cr_assert_str_eq((char *)a.body, first_body);
	answer_clear(&a);
	cr_assert_eq(files_under(f.store), 0, "the object outlived its delete");
	fx_done(&f);
}

/* The Content-Disposition of a download of name. */
static void disposition_of(fx *f, const void *name, size_t len, char *out, size_t size,
                           char *meta, size_t meta_size)
{
	char id[37], target[128];
	upload(f, TOKEN_A, name, len, "text/plain", "x", 1, id);
	snprintf(target, sizeof(target), "/v1/artifacts/%s/content", id);
	answer a;
	call(f, "GET", target, TOKEN_A, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 200, "%s", a.body);
	const char *d = header(&a, "Content-Disposition");
	cr_assert(d);
	snprintf(out, size, "%s", d);
	answer_clear(&a);
	snprintf(target, sizeof(target), "/v1/artifacts/%s", id);
	call(f, "GET", target, TOKEN_A, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 200, "%s", a.body);
	snprintf(meta, meta_size, "%s", (char *)a.body);
	answer_clear(&a);
}

Test(artifacts_api, names_are_kept_and_sanitized_on_the_way_out)
{
	fx f;
	fx_init(&f, NULL);
	char d[4096], *meta = malloc(65536);
	disposition_of(&f, "../../etc/passwd", 16, d, sizeof(d), meta, 65536);
	cr_assert_str_eq(d, "attachment; filename=\"_.._etc_passwd\"; "
	                    "filename*=UTF-8''..%2F..%2Fetc%2Fpasswd");
	cr_assert(strstr(meta, "\"filename\":\"../../etc/passwd\""), "%s", meta);
	/* NUL, controls and invalid UTF-8: the fallback alone, the bytes in
	 * filename_base64. */
	static const char bad[] = "a\0b\x1b[31m\xff.txt";
	disposition_of(&f, bad, sizeof(bad) - 1, d, sizeof(d), meta, 65536);
	cr_assert_str_eq(d, "attachment; filename=\"a_b_[31m_.txt\"");
	char *b64 = util_base64_encode(bad, sizeof(bad) - 1);
	cr_assert(strstr(meta, b64), "%s", meta);
	free(b64);
	cr_assert(strstr(meta, "\"filename\":\"a\\u0000b\\u001B[31m\xef\xbf\xbd.txt\""), "%s", meta);
	/* Valid UTF-8 with a NUL: both forms. */
	static const char u[] = "r\xc3\xa9sum\xc3\xa9\0.pdf";
	disposition_of(&f, u, sizeof(u) - 1, d, sizeof(d), meta, 65536);
	cr_assert_str_eq(d, "attachment; filename=\"r_sum__.pdf\"; "
	                    "filename*=UTF-8''r%C3%A9sum%C3%A9%00.pdf");
	/* 10,000 bytes: kept whole, the header bounded. */
	char *longname = malloc(10000);
	memset(longname, 'n', 10000);
	char id[37], target[128];
	upload(&f, TOKEN_A, longname, 10000, "text/plain", "x", 1, id);
	snprintf(target, sizeof(target), "/v1/artifacts/%s/content", id);
	answer a;
	call(&f, "GET", target, TOKEN_A, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 200);
	cr_assert(strlen(header(&a, "Content-Disposition")) < AIRLOCK_HTTP_DISPOSITION_MAX);
	answer_clear(&a);
	snprintf(target, sizeof(target), "/v1/artifacts/%s", id);
	call(&f, "GET", target, TOKEN_A, NULL, NULL, 0, &a);
	b64 = util_base64_encode(longname, 10000);
	cr_assert(strstr((char *)a.body, b64), "the 10,000-byte name was not kept whole");
	free(b64);
	answer_clear(&a);
	free(longname);
	free(meta);
	fx_done(&f);
}

Test(artifacts_api, byte_ranges)
{
	fx f;
	fx_init(&f, NULL);
	char id[37], target[128];
	upload(&f, TOKEN_A, "r", 1, "text/plain", "0123456789", 10, id);
	snprintf(target, sizeof(target), "/v1/artifacts/%s/content", id);
	struct {
		const char *range;
		int status;
		const char *body, *content_range;
	} cases[] = {
		{ "Range: bytes=0-3\r\n", 206, "0123", "bytes 0-3/10" },
		{ "Range: bytes=-3\r\n", 206, "789", "bytes 7-9/10" },
		{ "Range: bytes=6-\r\n", 206, "6789", "bytes 6-9/10" },
		{ "Range: bytes=8-100\r\n", 206, "89", "bytes 8-9/10" },
		{ "Range: bytes=10-\r\n", 416, NULL, "bytes */10" },
		{ "Range: bytes=0-1,4-5\r\n", 200, "0123456789", NULL },
		{ "Range: items=0-1\r\n", 200, "0123456789", NULL },
		{ "Range: bytes=0-1\r\nIf-Range: \"sha256:nope\"\r\n", 200, "0123456789", NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		answer a;
		call(&f, "GET", target, TOKEN_A, cases[i].range, NULL, 0, &a);
		cr_assert_eq(a.status, cases[i].status, "%s: %s", cases[i].range, a.head);
		if (cases[i].body)
			cr_assert_str_eq((char *)a.body, cases[i].body, "%s", cases[i].range);
		const char *cr = header(&a, "Content-Range");
		if (cases[i].content_range)
			cr_assert_str_eq(cr ? cr : "", cases[i].content_range, "%s", cases[i].range);
		else
			cr_assert_null(cr, "%s", cases[i].range);
		answer_clear(&a);
	}
	fx_done(&f);
}

Test(artifacts_api, bad_input_is_refused)
{
	fx f;
	fx_init(&f, NULL);
	const char *extra = "Airlock-Content-SHA256: "
	                    "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\r\n";
	const char *targets[] = { "/v1/artifacts?media_type=text", "/v1/artifacts?media_type=a/b;c=d",
		                  "/v1/artifacts?filename=%zz", "/v1/artifacts?other=1",
		                  "/v1/artifacts?tenant_id=tenant-b" };
	int want[] = { 400, 400, 400, 400, 403 };
	for (size_t i = 0; i < 5; i++) {
		answer a;
		call(&f, "POST", targets[i], TOKEN_A, extra, "hello", 5, &a);
		cr_assert_eq(a.status, want[i], "%s: %s", targets[i], a.body);
		answer_clear(&a);
	}
	/* A token of every tenant names the tenant. */
	answer a;
	call(&f, "POST", "/v1/artifacts", TOKEN_ALL, extra, "hello", 5, &a);
	cr_assert_eq(a.status, 400, "%s", a.body);
	answer_clear(&a);
	call(&f, "POST", "/v1/artifacts?tenant_id=tenant-b", TOKEN_ALL, extra, "hello", 5, &a);
	cr_assert_eq(a.status, 201, "%s", a.body);
	cr_assert(strstr((char *)a.body, "application/octet-stream"), "%s", a.body);
	answer_clear(&a);
	call(&f, "GET", "/v1/artifacts?limit=0", TOKEN_A, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 400, "%s", a.body);
	answer_clear(&a);
	call(&f, "PUT", "/v1/artifacts", TOKEN_A, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 405, "%s", a.body);
	answer_clear(&a);
	cr_assert_eq(files_under(f.store), 1);
	fx_done(&f);
}

Test(artifacts_api, listing_pages_and_attach)
{
	fx f;
	fx_init(&f, NULL);
	char ids[3][37];
	for (int i = 0; i < 3; i++)
		upload(&f, TOKEN_A, "f", 1, "text/plain", "abc", 3, ids[i]);
	answer a;
	call(&f, "GET", "/v1/artifacts?limit=2", TOKEN_A, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 200, "%s", a.body);
	char want[80];
	snprintf(want, sizeof(want), "\"next_after\":\"%s\"", ids[1]);
	cr_assert(strstr((char *)a.body, want), "%s", a.body);
	answer_clear(&a);
	char target[256];
	snprintf(target, sizeof(target), "/v1/artifacts?limit=2&after=%s", ids[1]);
	call(&f, "GET", target, TOKEN_A, NULL, NULL, 0, &a);
	cr_assert(strstr((char *)a.body, ids[2]) && strstr((char *)a.body, "\"next_after\":null"),
	          "%s", a.body);
	answer_clear(&a);
	call(&f, "GET", "/v1/artifacts", TOKEN_B, NULL, NULL, 0, &a);
	cr_assert(strstr((char *)a.body, "\"artifacts\":[]"), "%s", a.body);
	answer_clear(&a);
	/* Attach: the upload joins the run for good; another tenant's 404. */
	snprintf(target, sizeof(target), "/v1/runs/run-1/artifacts/%s/attach", ids[0]);
	call(&f, "POST", target, TOKEN_B, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 404, "%s", a.body);
	answer_clear(&a);
	call(&f, "POST", target, TOKEN_A, NULL, NULL, 0, &a);
	cr_assert_eq(a.status, 204, "%s", a.body);
	answer_clear(&a);
	call(&f, "GET", "/v1/artifacts?run_id=run-1", TOKEN_A, NULL, NULL, 0, &a);
	cr_assert(strstr((char *)a.body, ids[0]) && !strstr((char *)a.body, ids[1]), "%s", a.body);
	cr_assert(strstr((char *)a.body, "\"expires_at\":null"), "%s", a.body);
	answer_clear(&a);
	fx_done(&f);
}

/* ---- the pure parts ------------------------------------------------------------------- */

static const char *disp(const char *name, size_t len)
{
	static char out[AIRLOCK_HTTP_DISPOSITION_MAX];
	http_content_disposition(name, len, out);
	return out;
}

Test(disposition, sanitized_fallback_and_encoded_original)
{
	cr_assert_str_eq(disp("report.pdf", 10),
	                 "attachment; filename=\"report.pdf\"; filename*=UTF-8''report.pdf");
	cr_assert_str_eq(disp("", 0), "attachment; filename=\"download\"");
	cr_assert_str_eq(disp("...", 3),
	                 "attachment; filename=\"download\"; filename*=UTF-8''...");
	cr_assert_str_eq(disp(".bashrc", 7),
	                 "attachment; filename=\"bashrc\"; filename*=UTF-8''.bashrc");
	cr_assert_str_eq(disp("a\"b\\c%d", 7),
	                 "attachment; filename=\"a_b_c_d\"; filename*=UTF-8''a%22b%5Cc%25d");
	cr_assert_str_eq(disp("C:\\x\r\ny", 7),
	                 "attachment; filename=\"C:_x__y\"; filename*=UTF-8''C%3A%5Cx%0D%0Ay");
	cr_assert_str_eq(disp("\xe2\x82\xac", 3),
	                 "attachment; filename=\"_\"; filename*=UTF-8''%E2%82%AC");
	/* Overlong, surrogate, past U+10FFFF: not UTF-8, the fallback alone. */
	cr_assert_str_eq(disp("\xc0\xaf", 2), "attachment; filename=\"__\"");
	cr_assert_str_eq(disp("x\xed\xa0\x80", 4), "attachment; filename=\"x___\"");
	cr_assert_str_eq(disp("\xf4\x90\x80\x80", 4), "attachment; filename=\"____\"");
	char name[AIRLOCK_ARTIFACT_FILENAME_MAX];
	memset(name, 0xe2, sizeof(name));
	for (size_t i = 0; i + 3 <= sizeof(name); i += 3) {
		name[i + 1] = (char)0x82;
		name[i + 2] = (char)0xac;
	}
	const char *d = disp(name, sizeof(name) - sizeof(name) % 3);
	cr_assert(strlen(d) < AIRLOCK_HTTP_DISPOSITION_MAX);
	/* Cut at a whole character: the star ends with "%AC". */
	cr_assert(strcmp(d + strlen(d) - 3, "%AC") == 0, "%s", d + strlen(d) - 12);
}

Test(range, single_ranges_by_rfc_9110)
{
	uint64_t a = 99, b = 99;
	cr_assert_eq(http_range_parse("bytes=0-0", 9, 10, &a, &b), HTTP_RANGE_PARTIAL);
	cr_assert(a == 0 && b == 0);
	cr_assert_eq(http_range_parse(" BYTES=2-4 ", 11, 10, &a, &b), HTTP_RANGE_PARTIAL);
	cr_assert(a == 2 && b == 4);
	cr_assert_eq(http_range_parse("bytes=-20", 9, 10, &a, &b), HTTP_RANGE_PARTIAL);
	cr_assert(a == 0 && b == 9);
	cr_assert_eq(http_range_parse("bytes=-0", 8, 10, &a, &b), HTTP_RANGE_UNSATISFIABLE);
	cr_assert_eq(http_range_parse("bytes=10-", 9, 10, &a, &b), HTTP_RANGE_UNSATISFIABLE);
	cr_assert_eq(http_range_parse("bytes=99999999999999999999999-", 30, 10, &a, &b),
	             HTTP_RANGE_UNSATISFIABLE);
	cr_assert_eq(http_range_parse("bytes=0-99999999999999999999999", 31, 10, &a, &b),
	             HTTP_RANGE_PARTIAL);
	cr_assert(a == 0 && b == 9);
	const char *none[] = { "bytes=5-4", "bytes=-", "bytes=1-2,3-4", "bytes = 1-2", "bytes=a-b",
		               "bytes=1-2x", "lines=1-2", "bytes=+1-2", "" };
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		cr_assert_eq(http_range_parse(none[i], strlen(none[i]), 10, &a, &b), HTTP_RANGE_NONE,
		             "%s", none[i]);
	cr_assert_eq(http_range_parse("bytes=0-1", 9, 0, &a, &b), HTTP_RANGE_NONE);
	cr_assert(http_if_range_matches(NULL, 0, "\"e\""));
	cr_assert(http_if_range_matches(" \"e\" ", 5, "\"e\""));
	cr_assert(!http_if_range_matches("W/\"e\"", 5, "\"e\""));
	cr_assert(!http_if_range_matches("Tue, 15 Nov 1994 08:12:31 GMT", 29, "\"e\""));
}

Test(decode, artifact_routes_and_queries)
{
	worker_verb v;
	char run[AIRLOCK_ID_MAX + 1], id[AIRLOCK_UUID_STR_LEN + 1];
	const char *q;
	size_t ql;
	const char *uuid = "/v1/artifacts/0190a000-0000-7000-8000-000000000000";
	cr_assert_eq(worker_artifact_route(uuid, strlen(uuid), "GET", &v, run, id, &q, &ql), 0);
	cr_assert(v == WORKER_ARTIFACT_GET && strlen(id) == 36);
	cr_assert_eq(worker_artifact_route(uuid, strlen(uuid), "DELETE", &v, run, id, &q, &ql), 0);
	cr_assert(v == WORKER_ARTIFACT_DELETE);
	cr_assert_eq(worker_artifact_route(uuid, strlen(uuid), "PUT", &v, run, id, &q, &ql), 405);
	const char *c = "/v1/artifacts/short/content?x";
	cr_assert_eq(worker_artifact_route(c, strlen(c), "GET", &v, run, id, &q, &ql), 0);
	cr_assert(v == WORKER_ARTIFACT_CONTENT && id[0] == 0 && ql == 1);
	const char *at = "/v1/runs/run-1/artifacts/abc/attach";
	cr_assert_eq(worker_artifact_route(at, strlen(at), "POST", &v, run, id, &q, &ql), 0);
	cr_assert(v == WORKER_ARTIFACT_ATTACH && strcmp(run, "run-1") == 0);
	const char *bad[] = { "/v1/artifacts/", "/v1/artifacts/a/b", "/v1/artifacts//content",
		              "/v1/runs/r/artifacts//attach", "/v1/runs/r!/artifacts/a/attach" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(worker_artifact_route(bad[i], strlen(bad[i]), "GET", &v, run, id, &q, &ql),
		             404, "%s", bad[i]);
	worker_upload_query up;
	airlock_error err = { 0 };
	const char *uq = "filename=a%00b%2F+c&media_type=text%2Fplain&tenant_id=t";
	cr_assert_eq(worker_upload_query_decode(uq, strlen(uq), &up, &err), 0, "%s", err.message);
	cr_assert(up.filename_len == 6 && memcmp(up.filename, "a\0b/+c", 6) == 0);
	cr_assert_str_eq(up.media_type, "text/plain");
	cr_assert_str_eq(up.tenant_id, "t");
	worker_upload_query_clear(&up);
	const char *refused[] = { "filename=%4", "filename=a&filename=b", "media_type=x",
		                  "tenant_id=a/b", "x=1", "filename=a&" };
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		cr_assert_lt(worker_upload_query_decode(refused[i], strlen(refused[i]), &up, &err), 0,
		             "%s", refused[i]);
		cr_assert_null(up.filename);
	}
	worker_list_query lq;
	cr_assert_eq(worker_list_query_decode(NULL, 0, &lq, &err), 0);
	cr_assert_eq(lq.limit, AIRLOCK_WORKER_DB_ARTIFACTS_MAX);
	cr_assert_lt(worker_list_query_decode("limit=1001", 10, &lq, &err), 0);
	cr_assert_lt(worker_list_query_decode("after=x", 7, &lq, &err), 0);
	char sha[65];
	cr_assert(worker_sha256_header_decode(
	        " 2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824", 65, sha));
	cr_assert_str_eq(sha, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
	cr_assert(!worker_sha256_header_decode("abc", 3, sha));
	char tenant[AIRLOCK_ID_MAX + 1];
	cr_assert_eq(worker_attach_request_decode("", 0, tenant, &err), 0);
	cr_assert_eq(worker_attach_request_decode("{\"tenant_id\":\"t\"}", 17, tenant, &err), 0);
	cr_assert_str_eq(tenant, "t");
	cr_assert_lt(worker_attach_request_decode("{\"x\":1}", 7, tenant, &err), 0);
}
