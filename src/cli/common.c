/* SPDX-License-Identifier: Apache-2.0 */
#include "cli/common.h"

#include <stdint.h>
#include <string.h>

#include "airlock/image.h"

extern char **environ;

int cli_exit_for(const airlock_error *err)
{
	switch (err->cls) {
	case AIRLOCK_ERR_TOOL_VALIDATION:
	case AIRLOCK_ERR_WORKSPACE_ESCAPE:
	case AIRLOCK_ERR_EXECUTION_REJECTED:
	case AIRLOCK_ERR_DECODE:
		return CLI_EXIT_REJECTED;
	case AIRLOCK_ERR_EXECUTION_UNAVAILABLE:
	case AIRLOCK_ERR_NOT_IMPLEMENTED:
		return CLI_EXIT_UNAVAILABLE;
	case AIRLOCK_ERR_CONFIG:
		return CLI_EXIT_CONFIG;
	case AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED:
		return CLI_EXIT_ESCAPE;
	case AIRLOCK_ERR_INVALID:
	case AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE:
	case AIRLOCK_ERR_ARTIFACT_INTEGRITY:
	case AIRLOCK_ERR_SYSTEM:
	case AIRLOCK_ERR__MAX:
	default:
		return CLI_EXIT_SOFTWARE;
	}
}

/* The length of a UTF-8 sequence at p (at most n bytes) that encodes a
 * printable character, or 0: invalid, overlong, a surrogate, a C1 control
 * (U+0080..U+009F, which terminals in UTF-8 mode may read as CSI and the
 * rest), or a bidirectional override that reorders what follows on the line
 * (U+202A..U+202E, U+2066..U+2069) or a line/paragraph separator. */
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

void cli_fput_escaped(FILE *out, const void *s, size_t len, bool escape_backslash)
{
	const unsigned char *p = s;
	for (size_t i = 0; p && i < len;) {
		unsigned char c = p[i];
		if (c >= 0x20 && c < 0x7f) {
			if (c == '\\' && escape_backslash)
				fputs("\\\\", out);
			else
				fputc(c, out);
			i++;
			continue;
		}
		size_t u = c >= 0x80 ? utf8_printable(p + i, len - i) : 0;
		if (u) {
			fwrite(p + i, 1, u, out);
			i += u;
			continue;
		}
		fprintf(out, "\\x%02x", c);
		i++;
	}
}

void cli_fputs_escaped(FILE *out, const char *s)
{
	if (s)
		cli_fput_escaped(out, s, strlen(s), false);
}

void cli_error(const char *verb, const airlock_error *err)
{
	/* A message can carry bytes from the sandbox or the command line (a
	 * path, a name); none of them reaches the terminal as a control. */
	fprintf(stderr, "airlock %s: %s: ", verb, airlock_errclass_name(err->cls));
	cli_fputs_escaped(stderr, err->message[0] ? err->message : "(no message)");
	fputc('\n', stderr);
}

bool cli_is_help(const char *s)
{
	return strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0;
}

int cli_load_settings(const char *file, const char *mechanism, airlock_settings *ret,
                      airlock_error *err)
{
	airlock_settings s = { 0 };
	int r = file ? airlock_settings_load(file, &s, err) : airlock_settings_default(&s, err);
	if (r < 0)
		return r;
	r = airlock_settings_apply_env(&s, environ, err);
	if (r < 0)
		goto fail;
	if (mechanism) {
		s.mechanism = airlock_mechanism_parse(mechanism);
		if (s.mechanism == AIRLOCK_MECHANISM_INVALID) {
			r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                      "--mechanism %s: not one of fake, native, gvisor, microvm, docker",
			                      mechanism);
			goto fail;
		}
	}
	airlock_settings_load_tier1(&s);
	if (s.tier1_error)
		/* Fail closed: the sandbox environment is tier 2 alone. Logged, not fatal. */
		fprintf(stderr, "airlock: configuration error: %s (sandbox environment is tier 2 only)\n",
		        s.tier1_error);
	r = airlock_settings_check(&s, err);
	if (r < 0)
		goto fail;
	if (s.image)
		fprintf(stderr, "airlock: image %s\n", s.image);
	*ret = s;
	return 0;
fail:
	airlock_settings_clear(&s);
	return r;
}

static void print_progress(void *ctx, const char *line)
{
	(void)ctx;
	fprintf(stderr, "airlock: image: %s\n", line);
}

int cli_default_image(const airlock_settings *s, char ret[72], airlock_error *err)
{
	airlock_image_store *store = NULL;
	int r = airlock_image_store_open(s->image_store, &store, err);
	if (r < 0)
		return r;
	r = airlock_image_find_default(store, ret, err);
	if (r == 0) {
		fprintf(stderr, "airlock: no default image in the store yet; building it once "
		                "(debootstrap from the Debian mirror, a few minutes)\n");
		airlock_image_build_options opts = { 0 };
		r = airlock_image_build(store, &opts, print_progress, NULL, ret, err);
	}
	airlock_image_store_free(store);
	return r < 0 ? r : 0;
}
