/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the apt sources parser (include/airlock/image_build.h,
 * airlock_image_mirror_parse) with arbitrary bytes. The first input byte
 * picks the format (bit 0: deb822 or one-line) and the suite (bit 1:
 * "bookworm" or "bookworm-updates"); the rest is the document.
 *
 * Properties: a document with a NUL byte is refused as malformed, any other
 * gives found (1) or not found (0); a found URI is http://, https:// or
 * file:/, at most 1024 bytes of printable ASCII without spaces, quotes or
 * backslashes, and has no trailing slash (but the one of "file:///"); and
 * it round-trips: written back as the one source of either format for the
 * same suite, it is found again, unchanged (in one-line form only when it
 * holds no '#', which starts a comment there).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/image_build.h"

#define FUZZ_URI_MAX 1024

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_uri(const char *u)
{
	size_t n = strlen(u);
	if (n == 0 || n > FUZZ_URI_MAX)
		abort();
	if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0 &&
	    strncmp(u, "file:/", 6) != 0)
		abort();
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)u[i];
		if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\'' || c == '\\')
			abort();
	}
	if (n > 1 && u[n - 1] == '/' && u[n - 2] != '/')
		abort();
}

/* The URI written as the only source of the suite, in format f, is found
 * again unchanged. */
static void check_round_trip(const char *uri, const char *suite, airlock_apt_format f)
{
	char doc[FUZZ_URI_MAX + 128];
	int k = f == AIRLOCK_APT_FORMAT_DEB822 ?
	                snprintf(doc, sizeof(doc), "Types: deb\nURIs: %s\nSuites: %s\n", uri, suite) :
	                snprintf(doc, sizeof(doc), "deb %s %s main\n", uri, suite);
	if (k < 0 || (size_t)k >= sizeof(doc))
		abort();
	char *again = NULL;
	int r = airlock_image_mirror_parse("round trip", doc, (size_t)k, f, suite, &again, NULL);
	if (r != 1 || !again || strcmp(again, uri) != 0)
		abort();
	free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	airlock_apt_format f = (data[0] & 1) ? AIRLOCK_APT_FORMAT_DEB822 : AIRLOCK_APT_FORMAT_ONE_LINE;
	const char *suite = (data[0] & 2) ? "bookworm-updates" : "bookworm";
	const char *doc = (const char *)data + 1;
	size_t len = size - 1;

	char *uri = NULL;
	airlock_error err = { 0 };
	int r = airlock_image_mirror_parse("fuzz", doc, len, f, suite, &uri, &err);
	if (memchr(doc, 0, len)) {
		if (r != airlock_errcode(AIRLOCK_ERR_DECODE) || uri)
			abort();
		return 0;
	}
	if (r < 0 && airlock_errcode_class(r) == AIRLOCK_ERR_SYSTEM)
		return 0; /* out of memory */
	if (r != 0 && r != 1)
		abort();
	if (r == 0) {
		if (uri)
			abort();
		return 0;
	}
	if (!uri)
		abort();
	check_uri(uri);
	if (!strchr(uri, '#'))
		check_round_trip(uri, suite, AIRLOCK_APT_FORMAT_ONE_LINE);
	check_round_trip(uri, suite, AIRLOCK_APT_FORMAT_DEB822);
	free(uri);
	return 0;
}
