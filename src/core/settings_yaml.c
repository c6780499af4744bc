/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A settings file read over the defaults: airlock_settings_parse and
 * airlock_settings_load.
 *
 * The file is read with libyaml's event API and a schema walked alongside
 * it. The walk only ever descends where the schema has a mapping, so the
 * nesting an input can make us follow is the schema's (three levels), not the
 * input's. Anchors, aliases and explicit tags are refused: a settings file
 * has no use for them, and aliases are how a small YAML document expands
 * into a large one.
 */
#include "airlock/settings.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/settings_schema.h"
#include "core/yaml_reader.h"
#include "util/util.h"

/* The settings parser reads through the shared reader. */
typedef airlock_yaml_reader yp;

static const char *scalar_text(const yp *p)
{
	return (const char *)p->ev.data.scalar.value;
}

/* An empty, "~" or "null" plain scalar: YAML's null. */
static bool scalar_is_null(const yp *p)
{
	if (p->ev.type != YAML_SCALAR_EVENT || p->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *v = scalar_text(p);
	size_t len = p->ev.data.scalar.length;
	return len == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
	       strcmp(v, "NULL") == 0;
}

static int parse_mapping(yp *p, const schema *sc, void *base);

static int parse_names(yp *p, const field *f, const schema *sc, void *base)
{
	char q[QUOTE_MAX];
	char **names = NULL;
	size_t n = 0;
	int r = 0;

	if (scalar_is_null(p))
		goto store; /* "passthrough:" with nothing after it: an empty list */
	if (p->ev.type != YAML_SEQUENCE_START_EVENT)
		return config_yaml_fail(p, config_yaml_line(p), "%s%s: expected a list of variable names, got %s",
		               sc->path, f->key, config_yaml_kind(p));
	names = calloc(AIRLOCK_TIER1_MAX + 1, sizeof(*names));
	if (!names)
		return airlock_error_set(p->err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", p->name);
	for (;;) {
		r = config_yaml_next(p);
		if (r < 0)
			goto out;
		if (p->ev.type == YAML_SEQUENCE_END_EVENT)
			break;
		if (p->ev.type != YAML_SCALAR_EVENT) {
			r = config_yaml_fail(p, config_yaml_line(p), "%s%s: expected a variable name, got %s", sc->path,
			            f->key, config_yaml_kind(p));
			goto out;
		}
		const char *v = scalar_text(p);
		size_t len = p->ev.data.scalar.length;
		if (strnlen(v, len) != len || !airlock_env_name_valid(v)) {
			r = config_yaml_fail(p, config_yaml_line(p),
			            "%s%s: \"%s\" is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*, at most 128)",
			            sc->path, f->key, quote(q, sizeof(q), v, len));
			goto out;
		}
		for (size_t i = 0; i < n; i++)
			if (strcmp(names[i], v) == 0) {
				r = config_yaml_fail(p, config_yaml_line(p), "%s%s: \"%s\" is listed twice", sc->path,
				            f->key, v);
				goto out;
			}
		if (n >= AIRLOCK_TIER1_MAX) {
			r = config_yaml_fail(p, config_yaml_line(p), "%s%s: more than %d names", sc->path, f->key,
			            AIRLOCK_TIER1_MAX);
			goto out;
		}
		names[n] = strdup(v);
		if (!names[n]) {
			r = airlock_error_set(p->err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", p->name);
			goto out;
		}
		n++;
	}
store:
	if (n == 0) {
		/* An empty list is stored as no list: one spelling of "none". */
		free(names);
		names = NULL;
	}
	char ***slot = (char ***)(void *)((char *)base + f->off);
	size_t *nslot = (size_t *)(void *)((char *)base + f->off2);
	names_free(*slot, *nslot);
	*slot = names;
	*nslot = n;
	return 0;
out:
	names_free(names, n);
	return r;
}

static int parse_value(yp *p, const field *f, const schema *sc, void *base)
{
	char where[256];
	snprintf(where, sizeof(where), "%s:%zu: %s%s", p->name, config_yaml_line(p), sc->path, f->key);

	switch (f->kind) {
	case F_MAP:
		if (p->ev.type == YAML_MAPPING_START_EVENT)
			return parse_mapping(p, f->sub, (char *)base + f->off);
		/* "sandbox:" with every key commented out is an empty mapping. */
		if (scalar_is_null(p))
			return 0;
		return config_yaml_fail(p, config_yaml_line(p), "%s%s: expected a mapping, got %s", sc->path, f->key,
		               config_yaml_kind(p));
	case F_NAMES:
		return parse_names(p, f, sc, base);
	case F_STRING:
	case F_AUTH:
	case F_DEPLOYMENT:
	case F_MECHANISM:
	case F_PLATFORM:
	case F_INT:
	case F_BYTES:
		break; /* a single value, stored below */
	}
	if (p->ev.type != YAML_SCALAR_EVENT)
		return config_yaml_fail(p, config_yaml_line(p), "%s%s: expected a single value, got %s", sc->path,
		               f->key, config_yaml_kind(p));
	if (scalar_is_null(p))
		return config_yaml_fail(p, config_yaml_line(p), "%s%s: a value is required (got null)", sc->path, f->key);
	return settings_scalar_store(f, base, scalar_text(p), p->ev.data.scalar.length,
	                    p->ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE, where, p->err);
}

/* Called with the MAPPING_START event current; returns with MAPPING_END
 * current. */
static int parse_mapping(yp *p, const schema *sc, void *base)
{
	size_t seen_line[MAX_FIELDS] = { 0 };
	char q[QUOTE_MAX];

	for (;;) {
		int r = config_yaml_next(p);
		if (r < 0)
			return r;
		if (p->ev.type == YAML_MAPPING_END_EVENT)
			break;
		if (p->ev.type != YAML_SCALAR_EVENT)
			return config_yaml_fail(p, config_yaml_line(p), "mapping keys must be plain names, got %s",
			               config_yaml_kind(p));
		const char *key = scalar_text(p);
		size_t klen = p->ev.data.scalar.length;
		size_t line = config_yaml_line(p);
		const field *f = NULL;
		size_t idx = 0;
		for (idx = 0; idx < sc->n; idx++)
			if (strlen(sc->fields[idx].key) == klen && memcmp(sc->fields[idx].key, key, klen) == 0) {
				f = &sc->fields[idx];
				break;
			}
		if (!f) {
			char known[256];
			size_t o = 0;
			known[0] = 0;
			for (size_t i = 0; i < sc->n; i++) {
				int w = snprintf(known + o, sizeof(known) - o, "%s%s", i ? ", " : "",
				                 sc->fields[i].key);
				if (w < 0 || (size_t)w >= sizeof(known) - o)
					break;
				o += (size_t)w;
			}
			return config_yaml_fail(p, line, "unknown key \"%s%s\" (known here: %s)", sc->path,
			               quote(q, sizeof(q), key, klen), known);
		}
		/* A duplicate key is refused rather than last-wins: two values for
		 * one setting means someone believes the other one is in force. */
		if (seen_line[idx])
			return config_yaml_fail(p, line, "duplicate key \"%s%s\" (first at line %zu)", sc->path,
			               f->key, seen_line[idx]);
		seen_line[idx] = line;
		if (sc->exclusive_a >= 0 && seen_line[sc->exclusive_a] && seen_line[sc->exclusive_b])
			return config_yaml_fail(p, line,
			               "%s%s and %s%s cannot both be set: name the tier-1 variables in one place",
			               sc->path, sc->fields[sc->exclusive_a].key, sc->path,
			               sc->fields[sc->exclusive_b].key);
		r = config_yaml_next(p);
		if (r < 0)
			return r;
		r = parse_value(p, f, sc, base);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Apply one YAML document to s in place. On failure s may be partly
 * updated; callers work on a scratch copy. */
int settings_apply_yaml(airlock_settings *s, const char *name, const char *buf, size_t len,
                               airlock_error *err)
{
	yp p;
	int r;

	if (len > AIRLOCK_SETTINGS_INPUT_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "%s: larger than %u bytes; a settings file is a few hundred",
		                         name, AIRLOCK_SETTINGS_INPUT_MAX);
	r = config_yaml_open(&p, name, "settings", buf, len, err);
	if (r < 0)
		return r;

	r = config_yaml_next(&p); /* STREAM_START */
	if (r < 0)
		goto out;
	r = config_yaml_next(&p);
	if (r < 0)
		goto out;
	if (p.ev.type == YAML_STREAM_END_EVENT)
		goto out; /* an empty file, or only comments: the defaults stand */
	/* DOCUMENT_START; the root node follows. */
	r = config_yaml_next(&p);
	if (r < 0)
		goto out;
	if (p.ev.type == YAML_MAPPING_START_EVENT) {
		r = parse_mapping(&p, &settings_root_schema, s);
		if (r < 0)
			goto out;
	} else if (!scalar_is_null(&p)) {
		r = config_yaml_fail(&p, config_yaml_line(&p), "the settings document must be a mapping, got %s",
		            config_yaml_kind(&p));
		goto out;
	}
	r = config_yaml_next(&p); /* DOCUMENT_END */
	if (r < 0)
		goto out;
	r = config_yaml_next(&p);
	if (r < 0)
		goto out;
	if (p.ev.type != YAML_STREAM_END_EVENT)
		r = config_yaml_fail(&p, config_yaml_line(&p), "only one YAML document is allowed in a settings file");
out:
	config_yaml_close(&p);
	return r;
}

/* ---- public entry points ------------------------------------------------------ */

int airlock_settings_parse(const char *name, const char *buf, size_t len, airlock_settings *ret,
                           airlock_error *err)
{
	airlock_settings s;
	if (!name)
		name = "settings";
	if (!buf && len)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: no input", name);
	int r = airlock_settings_default(&s, err);
	if (r < 0)
		return r;
	r = settings_apply_yaml(&s, name, buf, len, err);
	if (r < 0) {
		airlock_settings_clear(&s);
		return r;
	}
	*ret = s;
	return 0;
}

int airlock_settings_load(const char *path, airlock_settings *ret, airlock_error *err)
{
	if (!path)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "settings: no path given");
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r = config_read(path, AIRLOCK_SETTINGS_INPUT_MAX, &buf, &len, err);
	if (r < 0)
		return r;
	return airlock_settings_parse(path, buf, len, ret, err);
}
