/* SPDX-License-Identifier: Apache-2.0 */
#include "util/util.h"
#include "util/syscalls.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <openssl/evp.h>

void util_buf_init(util_buf *b, size_t cap)
{
	*b = (util_buf){ .cap = cap };
}

int util_buf_append(util_buf *b, const void *data, size_t len)
{
	size_t room = b->cap - b->len;
	size_t take = len < room ? len : room;

	if (take > 0 || !b->data) {
		size_t need = b->len + take + 1;
		if (need > b->alloc) {
			size_t n = b->alloc ? b->alloc : 256;
			while (n < need)
				n = n > SIZE_MAX / 2 ? need : n * 2;
			unsigned char *p = realloc(b->data, n);
			if (!p)
				return -ENOMEM;
			b->data = p;
			b->alloc = n;
		}
		if (take)
			memcpy(b->data + b->len, data, take);
		b->len += take;
		b->data[b->len] = 0;
	}
	return take < len ? 1 : 0;
}

void util_buf_clear(util_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->alloc = 0;
}

unsigned char *util_buf_steal(util_buf *b, size_t *ret_len)
{
	unsigned char *p = b->data;
	if (!p) {
		p = calloc(1, 1);
		if (!p)
			return NULL;
	}
	if (ret_len)
		*ret_len = b->len;
	b->data = NULL;
	b->len = b->alloc = 0;
	return p;
}

char *util_strdup0(const char *s)
{
	return s ? strdup(s) : NULL;
}

bool util_streq0(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

/* The length of a UTF-8 sequence at p (at most n bytes) that encodes a
 * printable character, or 0 (util.h lists what is not printable). */
static size_t utf8_printable(const unsigned char *p, size_t n)
{
	size_t len;
	uint32_t cp;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		len = 2;
		cp = p[0] & 0x1f;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		len = 3;
		cp = p[0] & 0x0f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4;
		cp = p[0] & 0x07;
	} else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };
	if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	if (cp <= 0x9f || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) ||
	    cp == 0x2028 || cp == 0x2029)
		return 0;
	return len;
}

size_t util_printable_len(const unsigned char *p, size_t n, bool utf8)
{
	if (p[0] >= 0x20 && p[0] < 0x7f)
		return 1;
	return utf8 && p[0] >= 0x80 ? utf8_printable(p, n) : 0;
}

void util_escape_byte(unsigned char c, char out[UTIL_ESCAPED_BYTE_LEN])
{
	static const char hex[] = "0123456789abcdef";
	out[0] = '\\';
	out[1] = 'x';
	out[2] = hex[c >> 4];
	out[3] = hex[c & 15];
}

const char *util_escape(char *buf, size_t size, const void *s, size_t len)
{
	const unsigned char *p = s;
	size_t o = 0;
	for (size_t i = 0; p && i < len; i++) {
		unsigned char c = p[i];
		/* Room for one escaped byte, the "..." marker and the NUL. */
		if (o + 8 >= size) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		if (c != '"' && c != '\\' && util_printable_len(p + i, len - i, false)) {
			buf[o++] = (char)c;
		} else {
			util_escape_byte(c, buf + o);
			o += UTIL_ESCAPED_BYTE_LEN;
		}
	}
	buf[o] = 0;
	return buf;
}

bool util_parse_i64(const char *s, int64_t *ret)
{
	if (!s || !*s)
		return false;
	const char *p = s;
	if (*p == '-')
		p++;
	if (*p < '0' || *p > '9')
		return false;
	errno = 0;
	char *end = NULL;
	long long v = strtoll(s, &end, 10);
	if (errno || !end || *end)
		return false;
	*ret = v;
	return true;
}

struct util_sha256 {
	EVP_MD_CTX *ctx;
};

util_sha256 *util_sha256_new(void)
{
	util_sha256 *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
		util_sha256_free(h);
		return NULL;
	}
	return h;
}

int util_sha256_update(util_sha256 *h, const void *data, size_t len)
{
	return EVP_DigestUpdate(h->ctx, data, len) == 1 ? 0 : -EIO;
}

int util_sha256_final_hex(util_sha256 *h, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	int r = EVP_DigestFinal_ex(h->ctx, md, &n) == 1 && n == 32 ? 0 : -EIO;
	util_sha256_free(h);
	if (r < 0)
		return r;
	util_hex(md, 32, out);
	return 0;
}

void util_hex(const void *data, size_t len, char *out)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *in = data;
	for (size_t i = 0; i < len; i++) {
		out[2 * i] = hex[in[i] >> 4];
		out[2 * i + 1] = hex[in[i] & 15];
	}
	out[2 * len] = 0;
}

void util_sha256_free(util_sha256 *h)
{
	if (!h)
		return;
	EVP_MD_CTX_free(h->ctx);
	free(h);
}

int util_sha256_hex(const void *data, size_t len, char out[65])
{
	util_sha256 *h = util_sha256_new();
	if (!h)
		return -ENOMEM;
	int r = util_sha256_update(h, data, len);
	if (r < 0) {
		util_sha256_free(h);
		return r;
	}
	return util_sha256_final_hex(h, out);
}

char *util_base64_encode(const void *data, size_t len)
{
	if (len > (size_t)INT_MAX / 4 * 3 - 3)
		return NULL;
	size_t n = 4 * ((len + 2) / 3);
	unsigned char *out = malloc(n + 1);
	if (!out)
		return NULL;
	int w = EVP_EncodeBlock(out, data, (int)len);
	if (w < 0 || (size_t)w != n) {
		free(out);
		return NULL;
	}
	out[n] = 0;
	return (char *)out;
}

static bool b64_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '+' || c == '/';
}

int util_base64_decode(const char *text, size_t len, unsigned char **ret, size_t *ret_len)
{
	/* EVP_DecodeBlock tolerates whitespace and does not report padding, so
	 * the alphabet and the padding are checked here first. */
	if (len % 4 != 0 || len > (size_t)INT_MAX)
		return -EINVAL;
	size_t pad = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c == '=') {
			if (i < len - 2)
				return -EINVAL;
			pad++;
		} else if (pad || !b64_char(c)) {
			return -EINVAL;
		}
	}
	unsigned char *out = malloc(len / 4 * 3 + 1);
	if (!out)
		return -ENOMEM;
	int n = len ? EVP_DecodeBlock(out, (const unsigned char *)text, (int)len) : 0;
	if (n < 0 || (size_t)n < pad) {
		free(out);
		return -EINVAL;
	}
	*ret_len = (size_t)n - pad;
	out[*ret_len] = 0;
	*ret = out;
	return 0;
}

static int64_t clock_ms(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t util_now_ms(void) { return clock_ms(CLOCK_REALTIME); }
int64_t util_monotonic_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

void util_time_format(int64_t unix_ms, char out[32])
{
	time_t sec = (time_t)(unix_ms / 1000);
	int ms = (int)(unix_ms % 1000);
	if (ms < 0) {
		ms += 1000;
		sec -= 1;
	}
	struct tm tm;
	gmtime_r(&sec, &tm);
	size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 32 - n, ".%03dZ", ms);
}

static bool digits(const char *s, int n, int *ret)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*ret = v;
	return true;
}

bool util_time_parse(const char *s, int64_t *ret_ms)
{
	int y, mo, d, h, mi, se, ms = 0;
	size_t len = strlen(s);
	if (len != 20 && len != 24)
		return false;
	if (!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
	    !digits(s + 8, 2, &d) || s[10] != 'T' || !digits(s + 11, 2, &h) || s[13] != ':' ||
	    !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &se))
		return false;
	if (len == 24) {
		if (s[19] != '.' || !digits(s + 20, 3, &ms) || s[23] != 'Z')
			return false;
	} else if (s[19] != 'Z') {
		return false;
	}
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 59)
		return false;
	struct tm tm = { .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d,
		         .tm_hour = h, .tm_min = mi, .tm_sec = se };
	time_t t = timegm(&tm);
	if (t == (time_t)-1)
		return false;
	/* timegm normalizes 31 February into March: refuse what does not round-trip. */
	struct tm back;
	gmtime_r(&t, &back);
	if (back.tm_mday != d || back.tm_mon != mo - 1)
		return false;
	*ret_ms = (int64_t)t * 1000 + ms;
	return true;
}

int util_random(void *buf, size_t len)
{
	unsigned char *p = buf;
	while (len > 0) {
		ssize_t n = getrandom(p, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- whole reads and writes --------------------------------------------- */
int util_write_all(int fd, const void *data, size_t len)
{
	const unsigned char *p = data;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int util_read_capped(int fd, size_t max, char **ret, size_t *ret_len)
{
	util_buf b;
	util_buf_init(&b, max);
	char chunk[16384];
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			util_buf_clear(&b);
			return -e;
		}
		if (n == 0)
			break;
		int r = util_buf_append(&b, chunk, (size_t)n);
		if (r != 0) {
			util_buf_clear(&b);
			return r > 0 ? -EFBIG : r;
		}
	}
	size_t len = 0;
	unsigned char *data = util_buf_steal(&b, &len);
	if (!data)
		return -ENOMEM;
	*ret = (char *)data;
	*ret_len = len;
	return 0;
}

int util_read_secret(int fd, size_t max, char **ret, size_t *ret_len)
{
	char *buf = malloc(max + 1);
	if (!buf)
		return -ENOMEM;
	size_t len = 0;
	for (;;) {
		/* One byte more than max may arrive: that byte is the refusal. */
		ssize_t n = read(fd, buf + len, max + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		int r = n < 0 ? -errno : len + (size_t)n > max ? -EFBIG : 0;
		if (r < 0) {
			explicit_bzero(buf, max + 1);
			free(buf);
			return r;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = 0;
	*ret = buf;
	*ret_len = len;
	return 0;
}

int util_pread_small(int fd, char *buf, size_t size)
{
	size_t off = 0;
	for (;;) {
		if (off + 1 >= size)
			return -EFBIG;
		ssize_t n = pread(fd, buf + off, size - 1 - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		off += (size_t)n;
	}
	buf[off] = 0;
	return (int)off;
}

/* ---- signals -------------------------------------------------------------- */
void util_signals_reset(void)
{
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		sigaction(s, &dfl, NULL); /* SIGKILL, SIGSTOP and glibc's own refuse: harmless */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* ---- descriptors in a forked child ------------------------------------------ */
int util_close_all_but(const int *keep, size_t n)
{
	int k[UTIL_KEEP_MAX];
	if (n > UTIL_KEEP_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		int v = keep[i];
		size_t j = i;
		for (; j > 0 && k[j - 1] > v; j--)
			k[j] = k[j - 1];
		k[j] = v;
	}
	unsigned lo = 3;
	for (size_t i = 0; i < n; i++) {
		if (k[i] < 0)
			continue;
		unsigned v = (unsigned)k[i];
		if (v > lo && sys_close_range(lo, v - 1, 0) < 0)
			return -errno;
		if (v + 1 > lo)
			lo = v + 1;
	}
	return sys_close_range(lo, ~0U, 0) < 0 ? -errno : 0;
}
