/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which mirror serves the suite, from apt's sources
 * (include/airlock/image_build.h, airlock_image_mirror_parse and
 * airlock_image_find_mirror). The parsing is pure text over a bounded
 * buffer: fuzz/fuzz_apt_sources.c drives it.
 */
#include "image/build.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "util/util.h"

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* The next word of a whitespace-separated list (line breaks count as
 * whitespace) at *p, which moves past it: false when none is left. */
static bool next_word(const char **p, const char **ret, size_t *ret_len)
{
	const char *q = *p;
	while (*q && (is_space(*q) || *q == '\n'))
		q++;
	const char *s = q;
	while (*q && !is_space(*q) && *q != '\n')
		q++;
	*p = q;
	*ret = s;
	*ret_len = (size_t)(q - s);
	return q > s;
}

/* Does the whitespace-separated list hold word exactly? */
static bool words_contain(const char *list, const char *word)
{
	size_t wl = strlen(word);
	const char *p = list, *s;
	size_t n;
	while (next_word(&p, &s, &n))
		if (n == wl && strncmp(s, word, wl) == 0)
			return true;
	return false;
}

static bool ascii_ieq(const char *a, size_t an, const char *b)
{
	size_t bn = strlen(b);
	if (an != bn)
		return false;
	for (size_t i = 0; i < an; i++) {
		char x = a[i], y = b[i];
		if (x >= 'A' && x <= 'Z')
			x = (char)(x - 'A' + 'a');
		if (y >= 'A' && y <= 'Z')
			y = (char)(y - 'A' + 'a');
		if (x != y)
			return false;
	}
	return true;
}

/* A URI debootstrap can fetch from: http, https or file, printable ASCII
 * without spaces or quotes, bounded. Returns a malloc'd copy without a
 * trailing slash, or NULL (unusable, or ENOMEM with *oom set). */
char *image_usable_uri(const char *s, size_t n, bool *oom)
{
	if (n == 0 || n > AIRLOCK_APT_MIRROR_MAX)
		return NULL;
	if (!(n > 7 && strncmp(s, "http://", 7) == 0) && !(n > 8 && strncmp(s, "https://", 8) == 0) &&
	    !(n > 6 && strncmp(s, "file:/", 6) == 0))
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\'' || c == '\\')
			return NULL;
	}
	while (n > 1 && s[n - 1] == '/' && s[n - 2] != '/')
		n--;
	char *u = strndup(s, n);
	if (!u)
		*oom = true;
	return u;
}

static char *first_usable_uri(const char *list, bool *oom)
{
	const char *p = list, *s;
	size_t n;
	while (next_word(&p, &s, &n)) {
		char *u = image_usable_uri(s, n, oom);
		if (u || *oom)
			return u;
	}
	return NULL;
}

/* The next line of buf[0..len) from *pos, without its line break: false
 * at the end. */
static bool next_line(const char *buf, size_t len, size_t *pos, const char **ret,
                      size_t *ret_len)
{
	if (*pos >= len)
		return false;
	size_t end = *pos;
	while (end < len && buf[end] != '\n')
		end++;
	*ret = buf + *pos;
	*ret_len = end - *pos;
	*pos = end + 1;
	return true;
}

typedef struct deb822_stanza {
	util_buf types, uris, suites, enabled;
	bool any;
} deb822_stanza;

static void stanza_reset(deb822_stanza *st)
{
	util_buf_clear(&st->types);
	util_buf_clear(&st->uris);
	util_buf_clear(&st->suites);
	util_buf_clear(&st->enabled);
	util_buf_init(&st->types, AIRLOCK_APT_FIELD_MAX);
	util_buf_init(&st->uris, AIRLOCK_APT_FIELD_MAX);
	util_buf_init(&st->suites, AIRLOCK_APT_FIELD_MAX);
	util_buf_init(&st->enabled, AIRLOCK_APT_ENABLED_FIELD_MAX);
	st->any = false;
}

static const char *buf_str(const util_buf *b)
{
	return b->data ? (const char *)b->data : "";
}

/* 1 with *ret when the stanza serves suite, 0 when not, -ENOMEM. */
static int stanza_match(const deb822_stanza *st, const char *suite, char **ret)
{
	if (!st->any)
		return 0;
	const char *enabled = buf_str(&st->enabled);
	while (is_space(*enabled))
		enabled++;
	if (ascii_ieq(enabled, strcspn(enabled, " \t\r\n"), "no"))
		return 0;
	if (!words_contain(buf_str(&st->types), "deb") || !words_contain(buf_str(&st->suites), suite))
		return 0;
	bool oom = false;
	char *u = first_usable_uri(buf_str(&st->uris), &oom);
	if (oom)
		return -ENOMEM;
	if (!u)
		return 0;
	*ret = u;
	return 1;
}

static void stanza_free(deb822_stanza *st)
{
	util_buf_clear(&st->types);
	util_buf_clear(&st->uris);
	util_buf_clear(&st->suites);
	util_buf_clear(&st->enabled);
}

static int parse_deb822(const char *buf, size_t len, const char *suite, char **ret)
{
	deb822_stanza st = { 0 };
	stanza_reset(&st);
	util_buf *field = NULL; /* the field a continuation line extends */
	int r = 0;
	size_t pos = 0, n;
	const char *line;
	while (r == 0 && next_line(buf, len, &pos, &line, &n)) {
		size_t k = 0;
		while (k < n && is_space(line[k]))
			k++;
		if (k == n) { /* a blank line ends a stanza */
			r = stanza_match(&st, suite, ret);
			stanza_reset(&st);
			field = NULL;
			continue;
		}
		if (line[0] == '#')
			continue;
		if (k > 0) { /* a continuation of the previous field */
			if (field) {
				util_buf_append(field, " ", 1);
				util_buf_append(field, line + k, n - k);
			}
			continue;
		}
		const char *colon = memchr(line, ':', n);
		field = NULL;
		if (!colon)
			continue; /* not a field: apt refuses such a file; we skip the line */
		size_t nl = (size_t)(colon - line);
		if (ascii_ieq(line, nl, "Types"))
			field = &st.types;
		else if (ascii_ieq(line, nl, "URIs"))
			field = &st.uris;
		else if (ascii_ieq(line, nl, "Suites"))
			field = &st.suites;
		else if (ascii_ieq(line, nl, "Enabled"))
			field = &st.enabled;
		st.any = true;
		/* Appends past a field's cap are cut short; a field that long is
		 * not a mirror list anyone wrote, and a cut list still parses. */
		if (field) {
			util_buf_append(field, " ", 1);
			util_buf_append(field, colon + 1, n - nl - 1);
		}
	}
	if (r == 0)
		r = stanza_match(&st, suite, ret);
	stanza_free(&st);
	return r;
}

/* "deb [ options ] uri suite component..." */
static int parse_one_line(const char *buf, size_t len, const char *suite, char **ret)
{
	size_t pos = 0, n;
	const char *line;
	while (next_line(buf, len, &pos, &line, &n)) {
		const char *hash = memchr(line, '#', n);
		if (hash)
			n = (size_t)(hash - line);
		const char *tok[4];
		size_t tl[4];
		size_t nt = 0, k = 0;
		bool in_options = false;
		while (k < n && nt < 4) {
			while (k < n && is_space(line[k]))
				k++;
			if (k >= n)
				break;
			size_t s = k;
			while (k < n && !is_space(line[k]))
				k++;
			/* Options in brackets are skipped, spaces inside them included. */
			if (nt == 1 && !in_options && line[s] == '[') {
				in_options = line[k - 1] != ']';
				continue;
			}
			if (in_options) {
				if (line[k - 1] == ']' || memchr(line + s, ']', k - s))
					in_options = false;
				continue;
			}
			tok[nt] = line + s;
			tl[nt] = k - s;
			nt++;
		}
		if (nt < 3 || in_options || !ascii_ieq(tok[0], tl[0], "deb"))
			continue;
		if (tl[2] != strlen(suite) || strncmp(tok[2], suite, tl[2]) != 0)
			continue;
		bool oom = false;
		char *u = image_usable_uri(tok[1], tl[1], &oom);
		if (oom)
			return -ENOMEM;
		if (u) {
			*ret = u;
			return 1;
		}
	}
	return 0;
}

int airlock_image_mirror_parse(const char *name, const char *buf, size_t len,
                               airlock_apt_format format, const char *suite, char **ret_uri,
                               airlock_error *err)
{
	if (!suite || !*suite)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0, "mirror: no suite given");
	if (memchr(buf, 0, len))
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: contains a NUL byte", name);
	char *uri = NULL;
	int r;
	if (format == AIRLOCK_APT_FORMAT_DEB822)
		r = parse_deb822(buf, len, suite, &uri);
	else if (format == AIRLOCK_APT_FORMAT_ONE_LINE)
		r = parse_one_line(buf, len, suite, &uri);
	else
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0, "%s: unknown apt sources format",
		                         name);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "%s", name);
	if (r > 0)
		*ret_uri = uri;
	return r;
}

bool image_has_suffix(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a > b && strcmp(s + a - b, suffix) == 0;
}

/* Names in dir ending with suffix (not hidden), sorted; a missing dir is an
 * empty list. */
static int list_suffix(const char *dir, const char *suffix, char ***ret, size_t *ret_n)
{
	*ret = NULL;
	*ret_n = 0;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	char **names = NULL;
	size_t n = 0;
	struct dirent *de;
	int r = 0;
	while ((de = readdir(d)) && n < AIRLOCK_APT_FILES_MAX) {
		if (de->d_name[0] == '.' || !image_has_suffix(de->d_name, suffix))
			continue;
		char **p = realloc(names, (n + 1) * sizeof(*p));
		if (!p || !(p[n] = strdup(de->d_name))) {
			if (p)
				names = p;
			r = -ENOMEM;
			break;
		}
		names = p;
		n++;
	}
	closedir(d);
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return r;
	}
	if (n > 1)
		qsort(names, n, sizeof(*names), image_str_cmp);
	*ret = names;
	*ret_n = n;
	return 0;
}

static void names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Try one sources file; 1 found, 0 not (missing file included), < 0 error. */
static int try_sources_file(const char *path, airlock_apt_format format, const char *suite,
                            char **ret, util_buf *read_list, airlock_error *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	int open_errno = errno;
	if (read_list->len > 0)
		util_buf_append(read_list, ", ", 2);
	util_buf_append(read_list, path, strlen(path));
	if (fd < 0) {
		if (open_errno != ENOENT)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, open_errno, "apt sources %s",
			                         path);
		util_buf_append(read_list, " (missing)", 10);
		return 0;
	}
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = util_read_capped(fd, AIRLOCK_APT_FILE_MAX, &text, &len);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, -r, "apt sources %s", path);
	return airlock_image_mirror_parse(path, text, len, format, suite, ret, err);
}

int airlock_image_find_mirror(const char *apt_dir, const char *suite, char **ret_uri,
                              char **ret_source, airlock_error *err)
{
	if (!apt_dir)
		apt_dir = "/etc/apt";
	_cleanup_free_ char *dir_d = NULL, *list = NULL;
	if (asprintf(&dir_d, "%s/sources.list.d", apt_dir) < 0 ||
	    asprintf(&list, "%s/sources.list", apt_dir) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "apt sources");
	char **deb822 = NULL, **one_line = NULL;
	size_t n822 = 0, n1 = 0;
	int r = list_suffix(dir_d, ".sources", &deb822, &n822);
	if (r == 0)
		r = list_suffix(dir_d, ".list", &one_line, &n1);
	if (r < 0) {
		names_free(deb822, n822);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, -r, "apt sources %s", dir_d);
	}
	util_buf read_list;
	util_buf_init(&read_list, 400);
	char *uri = NULL;
	_cleanup_free_ char *source = NULL;
	size_t total = n822 + 1 + n1;
	for (size_t i = 0; i < total && r == 0; i++) {
		free(source);
		source = NULL;
		int fr;
		if (i < n822)
			fr = asprintf(&source, "%s/%s", dir_d, deb822[i]);
		else if (i == n822)
			fr = asprintf(&source, "%s", list);
		else
			fr = asprintf(&source, "%s/%s", dir_d, one_line[i - n822 - 1]);
		if (fr < 0) {
			source = NULL;
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "apt sources");
			break;
		}
		r = try_sources_file(source, i < n822 ? AIRLOCK_APT_FORMAT_DEB822 :
		                                        AIRLOCK_APT_FORMAT_ONE_LINE,
		                     suite, &uri, &read_list, err);
	}
	names_free(deb822, n822);
	names_free(one_line, n1);
	if (r == 0)
		r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                      "no apt source names a mirror for the suite %s with type deb (read %s); add one or pass a mirror explicitly",
		                      suite, read_list.len ? (const char *)read_list.data : "nothing");
	util_buf_clear(&read_list);
	if (r < 0)
		return r;
	*ret_uri = uri;
	if (ret_source)
		*ret_source = TAKE_PTR(source);
	return 0;
}
