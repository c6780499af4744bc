/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_CORE_SETTINGS_SCHEMA_H
#define AIRLOCK_CORE_SETTINGS_SCHEMA_H

/*
 * The settings' schema and what the settings files share: the table of
 * keys each mapping may hold (settings_schema.c), the one conversion of a
 * scalar for a field (from the YAML walk, settings_yaml.c, and from an
 * AIRLOCK_* override, settings_env.c), and the small helpers the startup
 * checks (settings_check.c), the tier-1 file (settings_tier1.c) and the
 * printing (settings_print.c) use too.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "airlock/settings.h"
#include "util/util.h"

/*
 * Each mapping the file may contain is a table of keys. The same table
 * drives parsing, the unknown-key message (which lists what is known) and
 * duplicate detection. Offsets are into the struct the mapping fills. */

typedef enum field_kind {
	F_MAP,        /* a nested mapping: sub, filling base + off */
	F_STRING,     /* char *: any non-empty string */
	F_AUTH,       /* char *: a short word */
	F_DEPLOYMENT, /* airlock_deployment_mode */
	F_MECHANISM,  /* airlock_mechanism */
	F_PLATFORM,   /* airlock_gvisor_platform */
	F_INT,        /* int64_t, a non-negative decimal */
	F_BYTES,      /* int64_t, a byte count with an optional K/M/G */
	F_NAMES,      /* the tier-1 list: char ** at off, size_t at off2 */
} field_kind;

struct schema;

typedef struct field {
	const char *key;
	field_kind kind;
	size_t off;
	size_t off2;
	const struct schema *sub;
} field;

typedef struct schema {
	const char *path; /* "sandbox." etc., for messages */
	const field *fields;
	size_t n;
	/* Two keys of this mapping that may not both appear (-1: none). */
	int exclusive_a, exclusive_b;
} schema;

#define MAX_FIELDS 32

/* The limit table's keys (limits.defaults.*, limits.ceilings.*): the
 * definition has this many, or it does not compile. */
#define SETTINGS_LIMIT_FIELDS 8
extern const field settings_limit_fields[SETTINGS_LIMIT_FIELDS];
/* The document's root mapping. */
extern const schema settings_root_schema;

/*
 * Convert one scalar for a field and store it at base. `where` names the
 * value for messages ("settings.yaml:4: sandbox.mechanism" or
 * "AIRLOCK_SANDBOX_MECHANISM"). `plain` is false for a quoted YAML scalar:
 * numbers must be written as numbers. On failure base is unchanged.
 */
int settings_scalar_store(const field *f, void *base, const char *v, size_t len, bool plain,
                          const char *where, airlock_error *err);

/* The mechanisms production allows, "a, b or c", generated from
 * airlock_mechanism_production_allowed. */
void settings_list_production_allowed(char *buf, size_t size);

/* Apply one YAML document to s in place (settings_yaml.c). On failure s
 * may be partly updated; callers work on a scratch copy. */
int settings_apply_yaml(airlock_settings *s, const char *name, const char *buf, size_t len,
                        airlock_error *err);

/* ---- small helpers ---------------------------------------------------------- */

#define QUOTE_MAX 96
#define Q(buf, s) quote((buf), sizeof(buf), (s), strlen(s))

/* Render an untrusted string for an error message: printable ASCII as is,
 * everything else as \xNN, cut at a fixed length. A settings value or key
 * can hold anything, and a message is read on a terminal. */
static inline const char *quote(char *buf, size_t size, const char *s, size_t len)
{
	return util_escape(buf, size, s, len);
}

/* auth_mode is compared with "dev" and printed in refusals, so it is a
 * short word: a value with spaces or control bytes is a mistake. */
static inline bool auth_mode_valid(const char *s, size_t len)
{
	if (len == 0 || len > AIRLOCK_AUTH_MODE_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		          c == '_' || c == '-' || c == '.';
		if (!ok)
			return false;
	}
	return true;
}

static inline const char *mechanism_label(airlock_mechanism m)
{
	const char *n = airlock_mechanism_name(m);
	return n ? n : "(unset)";
}

static inline const char *deployment_label(airlock_deployment_mode m)
{
	const char *n = airlock_deployment_mode_name(m);
	return n ? n : "(unset)";
}

static inline void names_free(char **names, size_t n)
{
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

static inline int64_t limit_value(const airlock_limit_table *t, const field *f)
{
	int64_t v;
	memcpy(&v, (const char *)t + f->off, sizeof(v));
	return v;
}

#endif
