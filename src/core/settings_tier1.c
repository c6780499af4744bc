/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tier-1 file (environment.passthrough_file): the names of the
 * variables a sandbox may receive from the service's environment, one a
 * line. A file that cannot be read or parsed empties the list (fail closed)
 * and says why in tier1_error.
 */
#include "airlock/settings.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "airlock/tiers.h"
#include "core/settings_schema.h"
#include "core/yaml_reader.h"
#include "util/util.h"

static void tier1_fail(airlock_settings *s, const airlock_error *e)
{
	/* Fail closed (spec, "The environment a sandbox sees"): the sandbox gets
	 * tier 2 alone, never the parent environment, and the run goes on. If
	 * even the message cannot be allocated the list is still emptied, which
	 * is the part that matters. */
	names_free(s->passthrough, s->n_passthrough);
	s->passthrough = NULL;
	s->n_passthrough = 0;
	free(s->tier1_error);
	char msg[AIRLOCK_ERROR_MESSAGE_MAX + 128];
	snprintf(msg, sizeof(msg), "%s; the sandbox environment is tier 2 alone", e->message);
	s->tier1_error = strdup(msg);
}

void airlock_settings_load_tier1(airlock_settings *s)
{
	if (!s || !s->passthrough_file)
		return;

	airlock_error e = { 0 };
	char q[QUOTE_MAX], q2[QUOTE_MAX];
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	char **names = NULL;
	size_t n = 0;

	free(s->tier1_error);
	s->tier1_error = NULL;

	if (config_read(s->passthrough_file, AIRLOCK_TIER1_FILE_MAX, &buf, &len, &e) < 0) {
		airlock_error_prefix(&e, "environment.passthrough_file: ");
		goto fail;
	}
	if (strnlen(buf, len) != len) {
		airlock_error_set(&e, AIRLOCK_ERR_CONFIG, 0,
		                  "environment.passthrough_file %s: contains a NUL byte",
		                  Q(q, s->passthrough_file));
		goto fail;
	}
	names = calloc(AIRLOCK_TIER1_MAX + 1, sizeof(*names));
	if (!names) {
		airlock_error_set(&e, AIRLOCK_ERR_SYSTEM, ENOMEM, "environment.passthrough_file");
		goto fail;
	}

	size_t lineno = 0;
	for (char *line = buf, *next; line && *line; line = next) {
		lineno++;
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		/* '#' starts a comment anywhere: no variable name contains one. */
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		while (*line == ' ' || *line == '\t')
			line++;
		size_t l = strlen(line);
		while (l > 0 && (line[l - 1] == ' ' || line[l - 1] == '\t' || line[l - 1] == '\r'))
			line[--l] = 0;
		if (l == 0)
			continue;
		if (!airlock_env_name_valid(line)) {
			airlock_error_set(&e, AIRLOCK_ERR_CONFIG, 0,
			                  "environment.passthrough_file %s:%zu: \"%s\" is not a valid environment variable name (one name per line)",
			                  Q(q, s->passthrough_file), lineno, quote(q2, sizeof(q2), line, l));
			goto fail;
		}
		bool dup = false;
		for (size_t i = 0; i < n && !dup; i++)
			dup = strcmp(names[i], line) == 0;
		if (dup)
			continue; /* the same name twice asks for the same thing once */
		if (n >= AIRLOCK_TIER1_MAX) {
			airlock_error_set(&e, AIRLOCK_ERR_CONFIG, 0,
			                  "environment.passthrough_file %s: more than %d names",
			                  Q(q, s->passthrough_file), AIRLOCK_TIER1_MAX);
			goto fail;
		}
		names[n] = strdup(line);
		if (!names[n]) {
			airlock_error_set(&e, AIRLOCK_ERR_SYSTEM, ENOMEM, "environment.passthrough_file");
			goto fail;
		}
		n++;
	}
	/* A tier-0 name is kept on the list on purpose: it is not a read or
	 * parse failure but a configuration error, and the startup check refuses
	 * it loudly rather than this function dropping it quietly. */
	names_free(s->passthrough, s->n_passthrough);
	s->passthrough = names;
	s->n_passthrough = n;
	return;
fail:
	names_free(names, n);
	tier1_fail(s, &e);
}
