/* SPDX-License-Identifier: Apache-2.0 */
/* Untrusted bytes rendered for a terminal or a log (airlock/escape.h). */
#include "airlock/escape.h"

#include "util/util.h"

const char *airlock_escape(char *buf, size_t size, const void *s, size_t len)
{
	return util_escape(buf, size, s, len);
}

void airlock_fput_escaped(FILE *out, const void *s, size_t len, bool escape_backslash)
{
	const unsigned char *p = s;
	for (size_t i = 0; p && i < len;) {
		if (p[i] == '\\' && escape_backslash) {
			fputs("\\\\", out);
			i++;
			continue;
		}
		size_t u = util_printable_len(p + i, len - i, true);
		if (u) {
			fwrite(p + i, 1, u, out);
			i += u;
			continue;
		}
		char e[UTIL_ESCAPED_BYTE_LEN];
		util_escape_byte(p[i], e);
		fwrite(e, 1, sizeof(e), out);
		i++;
	}
}
