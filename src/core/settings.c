/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Settings: the embedded defaults, a YAML file over them, AIRLOCK_* overrides
 * over that, and the startup checks (the specification, "Development,
 * production, and the refusal in between"; "Resource limits, as numbers").
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
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "airlock/tiers.h"
#include "airlock/caps.h"
#include "util/util.h"
#include "core/yaml_reader.h"

/* The input caps (settings file, tier-1 file, a scalar, auth_mode) are in
 * airlock/caps.h. */

/* ---- vocabularies -------------------------------------------------------- */

static const char *const mechanism_names[AIRLOCK_MECHANISM__MAX] = {
	[AIRLOCK_MECHANISM_FAKE] = "fake",
	[AIRLOCK_MECHANISM_NATIVE] = "native",
	[AIRLOCK_MECHANISM_GVISOR] = "gvisor",
	[AIRLOCK_MECHANISM_MICROVM] = "microvm",
	[AIRLOCK_MECHANISM_DOCKER] = "docker",
};

static const char *const platform_names[AIRLOCK_GVISOR_PLATFORM__MAX] = {
	[AIRLOCK_GVISOR_PLATFORM_AUTO] = "auto",
	[AIRLOCK_GVISOR_PLATFORM_PTRACE] = "ptrace",
	[AIRLOCK_GVISOR_PLATFORM_KVM] = "kvm",
};

const char *airlock_gvisor_platform_name(airlock_gvisor_platform p)
{
	if ((unsigned)p >= AIRLOCK_GVISOR_PLATFORM__MAX)
		return NULL;
	return platform_names[p];
}

airlock_gvisor_platform airlock_gvisor_platform_parse(const char *s)
{
	for (unsigned i = 0; s && i < AIRLOCK_GVISOR_PLATFORM__MAX; i++)
		if (strcmp(platform_names[i], s) == 0)
			return (airlock_gvisor_platform)i;
	return AIRLOCK_GVISOR_PLATFORM__MAX;
}

static const char *const deployment_names[AIRLOCK_DEPLOYMENT__MAX] = {
	[AIRLOCK_DEPLOYMENT_DEVELOPMENT] = "development",
	[AIRLOCK_DEPLOYMENT_PRODUCTION] = "production",
};

const char *airlock_mechanism_name(airlock_mechanism m)
{
	if ((unsigned)m >= AIRLOCK_MECHANISM__MAX)
		return NULL;
	return mechanism_names[m];
}

airlock_mechanism airlock_mechanism_parse(const char *s)
{
	if (!s)
		return AIRLOCK_MECHANISM_INVALID;
	for (unsigned i = 1; i < AIRLOCK_MECHANISM__MAX; i++)
		if (mechanism_names[i] && strcmp(mechanism_names[i], s) == 0)
			return (airlock_mechanism)i;
	return AIRLOCK_MECHANISM_INVALID;
}

bool airlock_mechanism_production_allowed(airlock_mechanism m)
{
	/* Written as the allowed set, never as the refused one: a mechanism
	 * added to the enum later lands in default and is refused until someone
	 * decides, here, that it isolates a kernel (spec, gate
	 * production_refuses_dev: "a fifth value inherits the check"). An
	 * expression, not a switch: -Wswitch-enum would make a switch name
	 * every refused value too. */
	return m == AIRLOCK_MECHANISM_MICROVM || m == AIRLOCK_MECHANISM_GVISOR;
}

const char *airlock_deployment_mode_name(airlock_deployment_mode m)
{
	if ((unsigned)m >= AIRLOCK_DEPLOYMENT__MAX)
		return NULL;
	return deployment_names[m];
}

airlock_deployment_mode airlock_deployment_mode_parse(const char *s)
{
	if (!s)
		return AIRLOCK_DEPLOYMENT_INVALID;
	for (unsigned i = 1; i < AIRLOCK_DEPLOYMENT__MAX; i++)
		if (deployment_names[i] && strcmp(deployment_names[i], s) == 0)
			return (airlock_deployment_mode)i;
	return AIRLOCK_DEPLOYMENT_INVALID;
}

/* ---- the embedded defaults ------------------------------------------------
 * Parsed by the same code as an operator's file, so the defaults are a
 * document anyone can read (and `airlock config` can print) rather than
 * numbers scattered through initializers. The numbers are the
 * specification's table ("Resource limits, as numbers"); a ceiling of 0 is
 * the table's "operator": no ceiling until an operator sets one. */
#define SETTINGS_STR_(x) #x
#define SETTINGS_STR(x) SETTINGS_STR_(x)
static const char settings_defaults_yaml[] =
	"deployment_mode: development\n"
	"auth_mode: dev\n"
	"sandbox:\n"
	"  mechanism: native\n"
	"  hard_cap_seconds: 1800\n"
	"  image_store: /var/lib/airlock/images\n"
	"limits:\n"
	"  defaults:\n"
	"    cpu_millicores: 2000\n"
	"    memory_bytes: 2G\n"
	"    pids_max: 512\n"
	"    workspace_bytes: 4G\n"
	"    inodes_max: 100000\n"
	"    wall_clock_seconds: 300\n"
	"    files_changed_max: 1000\n"
	"    start_budget_seconds: 30\n"
	"  ceilings:\n"
	"    cpu_millicores: 0\n"
	"    memory_bytes: 0\n"
	"    pids_max: 4096\n"
	"    workspace_bytes: 0\n"
	"    inodes_max: 1000000\n"
	"    wall_clock_seconds: 1800\n"
	"    files_changed_max: " SETTINGS_STR(AIRLOCK_FILES_CHANGED_MAX) "\n"
	"    start_budget_seconds: 60\n"
	"environment:\n"
	"  passthrough: []\n"
	"service:\n"
	"  listen: unix:/run/airlock/airlock.sock\n"
	"  max_sandboxes: 64\n"
	"  max_connections: 256\n";

/* ---- small helpers -------------------------------------------------------- */

/* Render an untrusted string for an error message: printable ASCII as is,
 * everything else as \xNN, cut at a fixed length. A settings value or key
 * can hold anything, and a message is read on a terminal. */
static const char *quote(char *buf, size_t size, const char *s, size_t len)
{
	return util_escape(buf, size, s, len);
}

#define QUOTE_MAX 96
#define Q(buf, s) quote((buf), sizeof(buf), (s), strlen(s))

/* Strict non-negative decimal: digits only, no sign, no spaces, no base
 * prefixes (YAML 1.1 would read 0x10 and 010 as numbers; a limit written
 * that way is a mistake, not a feature). */
static bool parse_u63(const char *s, size_t len, int64_t *ret)
{
	if (len == 0 || len > 19)
		return false;
	int64_t v = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		int d = s[i] - '0';
		if (v > (INT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*ret = v;
	return true;
}

static bool parse_bytes_value(const char *s, size_t len, int64_t *ret)
{
	if (len == 0)
		return false;
	int shift = 0;
	switch (s[len - 1]) {
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	default:
		break;
	}
	if (shift)
		len--;
	int64_t v;
	if (!parse_u63(s, len, &v))
		return false;
	if (v > (INT64_MAX >> shift))
		return false;
	*ret = v << shift;
	return true;
}

int airlock_parse_bytes(const char *s, const char *what, int64_t *ret, airlock_error *err)
{
	char q[QUOTE_MAX];
	int64_t v;
	if (!what)
		what = "value";
	if (!s || !parse_bytes_value(s, strlen(s), &v))
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "%s: invalid byte count \"%s\" (expected a non-negative integer, optionally with a K, M or G suffix)",
		                         what, s ? Q(q, s) : "");
	*ret = v;
	return 0;
}

/* auth_mode is compared with "dev" and printed in refusals, so it is a
 * short word: a value with spaces or control bytes is a mistake. */
static bool auth_mode_valid(const char *s, size_t len)
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

static const char *mechanism_label(airlock_mechanism m)
{
	const char *n = airlock_mechanism_name(m);
	return n ? n : "(unset)";
}

static const char *deployment_label(airlock_deployment_mode m)
{
	const char *n = airlock_deployment_mode_name(m);
	return n ? n : "(unset)";
}

/* "a, b or c" from a name table, skipping index 0. */
/* names[first..n): index 0 is the invalid value of most vocabularies here,
 * and a valid one (auto) of the platform's. */
static void list_names(char *buf, size_t size, const char *const *names, size_t first, size_t n)
{
	size_t o = 0;
	buf[0] = 0;
	for (size_t i = first; i < n; i++) {
		if (!names[i])
			continue;
		int w = snprintf(buf + o, size - o, "%s%s", o ? ", " : "", names[i]);
		if (w < 0 || (size_t)w >= size - o)
			return;
		o += (size_t)w;
	}
}

/* The allowed set, generated from the predicate so the message can never
 * disagree with the check. */
static void list_production_allowed(char *buf, size_t size)
{
	size_t o = 0;
	buf[0] = 0;
	/* Two passes put microvm first, the specification's table order; any
	 * other allowed value follows in enum order. */
	for (int pass = 0; pass < 2; pass++)
		for (unsigned i = 1; i < AIRLOCK_MECHANISM__MAX; i++) {
			if (!airlock_mechanism_production_allowed((airlock_mechanism)i))
				continue;
			bool is_microvm = i == AIRLOCK_MECHANISM_MICROVM;
			if ((pass == 0) != is_microvm)
				continue;
			int w = snprintf(buf + o, size - o, "%s%s", o ? ", " : "", mechanism_names[i]);
			if (w < 0 || (size_t)w >= size - o)
				return;
			o += (size_t)w;
		}
}

static void names_free(char **names, size_t n)
{
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

/* ---- the schema ------------------------------------------------------------
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

#define MAX_FIELDS 16

#define LT(m) offsetof(airlock_limit_table, m)
static const field limit_fields[] = {
	{ "cpu_millicores", F_INT, LT(limits.cpu_millicores), 0, NULL },
	{ "memory_bytes", F_BYTES, LT(limits.memory_bytes), 0, NULL },
	{ "pids_max", F_INT, LT(limits.pids_max), 0, NULL },
	{ "workspace_bytes", F_BYTES, LT(limits.workspace_bytes), 0, NULL },
	{ "inodes_max", F_INT, LT(limits.inodes_max), 0, NULL },
	{ "wall_clock_seconds", F_INT, LT(limits.wall_clock_seconds), 0, NULL },
	{ "files_changed_max", F_INT, LT(files_changed_max), 0, NULL },
	{ "start_budget_seconds", F_INT, LT(start_budget_seconds), 0, NULL },
};
#undef LT

static const schema defaults_schema = { "limits.defaults.", limit_fields, ARRAY_SIZE(limit_fields),
	                                -1, -1 };
static const schema ceilings_schema = { "limits.ceilings.", limit_fields, ARRAY_SIZE(limit_fields),
	                                -1, -1 };

#define ST(m) offsetof(airlock_settings, m)
static const field limits_fields[] = {
	{ "defaults", F_MAP, ST(defaults), 0, &defaults_schema },
	{ "ceilings", F_MAP, ST(ceilings), 0, &ceilings_schema },
};
static const schema limits_schema = { "limits.", limits_fields, ARRAY_SIZE(limits_fields), -1, -1 };

static const field sandbox_fields[] = {
	{ "mechanism", F_MECHANISM, ST(mechanism), 0, NULL },
	{ "image", F_STRING, ST(image), 0, NULL },
	{ "hard_cap_seconds", F_INT, ST(hard_cap_seconds), 0, NULL },
	{ "image_store", F_STRING, ST(image_store), 0, NULL },
	{ "gvisor_platform", F_PLATFORM, ST(gvisor_platform), 0, NULL },
};
static const schema sandbox_schema = { "sandbox.", sandbox_fields, ARRAY_SIZE(sandbox_fields), -1,
	                               -1 };

static const field environment_fields[] = {
	{ "passthrough", F_NAMES, ST(passthrough), ST(n_passthrough), NULL },
	{ "passthrough_file", F_STRING, ST(passthrough_file), 0, NULL },
};
/* One place names the tier-1 list: two would need a rule for which wins,
 * and any such rule is one an operator can get wrong without noticing. */
static const schema environment_schema = { "environment.", environment_fields,
	                                   ARRAY_SIZE(environment_fields), 0, 1 };

static const field service_fields[] = {
	{ "listen", F_STRING, ST(service.listen), 0, NULL },
	{ "socket_group", F_STRING, ST(service.socket_group), 0, NULL },
	{ "credential_file", F_STRING, ST(service.credential_file), 0, NULL },
	{ "metrics_listen", F_STRING, ST(service.metrics_listen), 0, NULL },
	{ "max_sandboxes", F_INT, ST(service.max_sandboxes), 0, NULL },
	{ "max_connections", F_INT, ST(service.max_connections), 0, NULL },
	{ "tls_cert_file", F_STRING, ST(service.tls_cert_file), 0, NULL },
	{ "tls_key_file", F_STRING, ST(service.tls_key_file), 0, NULL },
	{ "tls_client_ca_file", F_STRING, ST(service.tls_client_ca_file), 0, NULL },
	{ "policy_file", F_STRING, ST(service.policy_file), 0, NULL },
};
static const schema service_schema = { "service.", service_fields, ARRAY_SIZE(service_fields), -1,
	                               -1 };

static const field root_fields[] = {
	{ "deployment_mode", F_DEPLOYMENT, ST(deployment_mode), 0, NULL },
	{ "auth_mode", F_AUTH, ST(auth_mode), 0, NULL },
	{ "sandbox", F_MAP, 0, 0, &sandbox_schema },
	{ "limits", F_MAP, 0, 0, &limits_schema },
	{ "environment", F_MAP, 0, 0, &environment_schema },
	{ "service", F_MAP, 0, 0, &service_schema },
};
static const schema root_schema = { "", root_fields, ARRAY_SIZE(root_fields), -1, -1 };
#undef ST

/* parse_mapping tracks each key's first line in a MAX_FIELDS array. */
_Static_assert(ARRAY_SIZE(root_fields) <= MAX_FIELDS, "root schema too large");
_Static_assert(ARRAY_SIZE(sandbox_fields) <= MAX_FIELDS, "sandbox schema too large");
_Static_assert(ARRAY_SIZE(limits_fields) <= MAX_FIELDS, "limits schema too large");
_Static_assert(ARRAY_SIZE(limit_fields) <= MAX_FIELDS, "limit table schema too large");
_Static_assert(ARRAY_SIZE(environment_fields) <= MAX_FIELDS, "environment schema too large");
_Static_assert(ARRAY_SIZE(service_fields) <= MAX_FIELDS, "service schema too large");

/*
 * Convert one scalar for a field and store it at base. `where` names the
 * value for messages ("settings.yaml:4: sandbox.mechanism" or
 * "AIRLOCK_SANDBOX_MECHANISM"). `plain` is false for a quoted YAML scalar:
 * numbers must be written as numbers. On failure base is unchanged.
 */
static int scalar_store(const field *f, void *base, const char *v, size_t len, bool plain,
                        const char *where, airlock_error *err)
{
	char q[QUOTE_MAX], names[128];
	char *slot = (char *)base + f->off;

	if (len > AIRLOCK_SETTINGS_STRING_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: value longer than %d bytes",
		                         where, AIRLOCK_SETTINGS_STRING_MAX);
	if (strnlen(v, len) != len)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: value contains a NUL byte",
		                         where);

	switch (f->kind) {
	case F_STRING:
	case F_AUTH: {
		if (len == 0)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: must not be empty", where);
		if (f->kind == F_AUTH && !auth_mode_valid(v, len))
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "%s: invalid value \"%s\" (expected a word such as dev, token or oidc)",
			                         where, quote(q, sizeof(q), v, len));
		char *copy = strndup(v, len);
		if (!copy)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", where);
		char **p = (char **)(void *)slot;
		free(*p);
		*p = copy;
		return 0;
	}
	case F_DEPLOYMENT: {
		airlock_deployment_mode m = airlock_deployment_mode_parse(v);
		if (m == AIRLOCK_DEPLOYMENT_INVALID) {
			list_names(names, sizeof(names), deployment_names, 1, ARRAY_SIZE(deployment_names));
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "%s: unknown value \"%s\" (expected one of %s)", where,
			                         quote(q, sizeof(q), v, len), names);
		}
		memcpy(slot, &m, sizeof(m));
		return 0;
	}
	case F_MECHANISM: {
		airlock_mechanism m = airlock_mechanism_parse(v);
		if (m == AIRLOCK_MECHANISM_INVALID) {
			list_names(names, sizeof(names), mechanism_names, 1, ARRAY_SIZE(mechanism_names));
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "%s: unknown value \"%s\" (expected one of %s)", where,
			                         quote(q, sizeof(q), v, len), names);
		}
		memcpy(slot, &m, sizeof(m));
		return 0;
	}
	case F_PLATFORM: {
		airlock_gvisor_platform pl = airlock_gvisor_platform_parse(v);
		if (pl == AIRLOCK_GVISOR_PLATFORM__MAX) {
			list_names(names, sizeof(names), platform_names, 0, ARRAY_SIZE(platform_names));
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "%s: unknown value \"%s\" (expected one of %s)", where,
			                         quote(q, sizeof(q), v, len), names);
		}
		memcpy(slot, &pl, sizeof(pl));
		return 0;
	}
	case F_INT:
	case F_BYTES: {
		int64_t n;
		bool ok = plain && (f->kind == F_INT ? parse_u63(v, len, &n) : parse_bytes_value(v, len, &n));
		if (!ok)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "%s: invalid value \"%s\" (expected %s)", where,
			                         quote(q, sizeof(q), v, len),
			                         f->kind == F_INT ?
			                                 "a non-negative decimal integer" :
			                                 "a non-negative integer, optionally with a K, M or G suffix");
		memcpy(slot, &n, sizeof(n));
		return 0;
	}
	case F_MAP:
	case F_NAMES:
		break;
	}
	return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: expected a %s", where,
	                         f->kind == F_MAP ? "mapping" : "list");
}

/* ---- the YAML walk ---------------------------------------------------------- */

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
	return scalar_store(f, base, scalar_text(p), p->ev.data.scalar.length,
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
static int settings_apply_yaml(airlock_settings *s, const char *name, const char *buf, size_t len,
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
		r = parse_mapping(&p, &root_schema, s);
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

int airlock_settings_default(airlock_settings *ret, airlock_error *err)
{
	airlock_settings s = { 0 };
	int r = settings_apply_yaml(&s, "embedded defaults", settings_defaults_yaml,
	                            sizeof(settings_defaults_yaml) - 1, err);
	if (r < 0) {
		airlock_settings_clear(&s);
		return r;
	}
	*ret = s;
	return 0;
}

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

/* ---- environment overrides ------------------------------------------------------ */

#define ST(m) offsetof(airlock_settings, m)
static const struct env_override {
	const char *var;
	const char *setting; /* the key it overrides, for messages */
	field f;
} env_overrides[] = {
	{ "AIRLOCK_DEPLOYMENT_MODE", "deployment_mode", { "deployment_mode", F_DEPLOYMENT, ST(deployment_mode), 0, NULL } },
	{ "AIRLOCK_AUTH_MODE", "auth_mode", { "auth_mode", F_AUTH, ST(auth_mode), 0, NULL } },
	{ "AIRLOCK_SANDBOX_MECHANISM", "sandbox.mechanism", { "mechanism", F_MECHANISM, ST(mechanism), 0, NULL } },
	{ "AIRLOCK_SANDBOX_IMAGE", "sandbox.image", { "image", F_STRING, ST(image), 0, NULL } },
	{ "AIRLOCK_HARD_CAP_SECONDS", "sandbox.hard_cap_seconds", { "hard_cap_seconds", F_INT, ST(hard_cap_seconds), 0, NULL } },
	{ "AIRLOCK_IMAGE_STORE", "sandbox.image_store", { "image_store", F_STRING, ST(image_store), 0, NULL } },
	{ "AIRLOCK_GVISOR_PLATFORM", "sandbox.gvisor_platform", { "gvisor_platform", F_PLATFORM, ST(gvisor_platform), 0, NULL } },
	{ "AIRLOCK_SERVICE_LISTEN", "service.listen", { "listen", F_STRING, ST(service.listen), 0, NULL } },
	{ "AIRLOCK_SERVICE_SOCKET_GROUP", "service.socket_group", { "socket_group", F_STRING, ST(service.socket_group), 0, NULL } },
	{ "AIRLOCK_SERVICE_CREDENTIAL_FILE", "service.credential_file", { "credential_file", F_STRING, ST(service.credential_file), 0, NULL } },
	{ "AIRLOCK_SERVICE_METRICS_LISTEN", "service.metrics_listen", { "metrics_listen", F_STRING, ST(service.metrics_listen), 0, NULL } },
	{ "AIRLOCK_SERVICE_MAX_SANDBOXES", "service.max_sandboxes", { "max_sandboxes", F_INT, ST(service.max_sandboxes), 0, NULL } },
	{ "AIRLOCK_SERVICE_MAX_CONNECTIONS", "service.max_connections", { "max_connections", F_INT, ST(service.max_connections), 0, NULL } },
	{ "AIRLOCK_SERVICE_TLS_CERT_FILE", "service.tls_cert_file", { "tls_cert_file", F_STRING, ST(service.tls_cert_file), 0, NULL } },
	{ "AIRLOCK_SERVICE_TLS_KEY_FILE", "service.tls_key_file", { "tls_key_file", F_STRING, ST(service.tls_key_file), 0, NULL } },
	{ "AIRLOCK_SERVICE_TLS_CLIENT_CA_FILE", "service.tls_client_ca_file", { "tls_client_ca_file", F_STRING, ST(service.tls_client_ca_file), 0, NULL } },
	{ "AIRLOCK_SERVICE_POLICY_FILE", "service.policy_file", { "policy_file", F_STRING, ST(service.policy_file), 0, NULL } },
};
#undef ST

bool airlock_settings_env_name(const char *name)
{
	for (size_t k = 0; name && k < ARRAY_SIZE(env_overrides); k++)
		if (strcmp(env_overrides[k].var, name) == 0)
			return true;
	return false;
}

int airlock_settings_apply_env(airlock_settings *s, char *const *envp, airlock_error *err)
{
	if (!s)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "settings: missing");
	if (!envp)
		return 0;

	/* Everything is converted into a scratch struct first and committed only
	 * when every override is valid, so a bad override leaves s as it was. */
	airlock_settings tmp = { 0 };
	bool set[ARRAY_SIZE(env_overrides)] = { false };
	int r = 0;

	for (size_t k = 0; k < ARRAY_SIZE(env_overrides); k++) {
		const struct env_override *o = &env_overrides[k];
		size_t vlen = strlen(o->var);
		/* First occurrence wins, as getenv(3) does. */
		for (char *const *e = envp; *e; e++) {
			if (strncmp(*e, o->var, vlen) != 0 || (*e)[vlen] != '=')
				continue;
			const char *v = *e + vlen + 1;
			char where[128];
			snprintf(where, sizeof(where), "%s (overrides %s)", o->var, o->setting);
			r = scalar_store(&o->f, &tmp, v, strlen(v), true, where, err);
			if (r < 0)
				goto out;
			set[k] = true;
			break;
		}
	}
	for (size_t k = 0; k < ARRAY_SIZE(env_overrides); k++) {
		if (!set[k])
			continue;
		const field *f = &env_overrides[k].f;
		char *dst = (char *)s + f->off, *src = (char *)&tmp + f->off;
		/* A switch naming every kind (-Wswitch-enum): an override of a
		 * new kind cannot be validated and then silently not applied. */
		switch (f->kind) {
		case F_STRING:
		case F_AUTH: {
			char **d = (char **)(void *)dst, **sp = (char **)(void *)src;
			free(*d);
			*d = TAKE_PTR(*sp);
			break;
		}
		case F_INT:
		case F_BYTES:
			memcpy(dst, src, sizeof(int64_t));
			break;
		case F_DEPLOYMENT:
			memcpy(dst, src, sizeof(airlock_deployment_mode));
			break;
		case F_MECHANISM:
			memcpy(dst, src, sizeof(airlock_mechanism));
			break;
		case F_PLATFORM:
			memcpy(dst, src, sizeof(airlock_gvisor_platform));
			break;
		case F_MAP:
		case F_NAMES:
			break; /* no override has these kinds */
		}
	}
out:
	airlock_settings_clear(&tmp);
	return r;
}

/* ---- the tier-1 file ------------------------------------------------------------- */

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

/* ---- the startup checks -------------------------------------------------------------- */

static int check_isolation(const airlock_settings *s, airlock_error *err)
{
	const char *auth = s->auth_mode ? s->auth_mode : "(unset)";
	bool production = s->deployment_mode == AIRLOCK_DEPLOYMENT_PRODUCTION;
	/* "auth_mode != dev": anything that is not exactly dev, including an
	 * unset one, is treated as real authentication. */
	bool real_auth = !util_streq0(s->auth_mode, "dev");

	if (!production && !real_auth)
		return 0;
	if (airlock_mechanism_production_allowed(s->mechanism))
		return 0;

	/* One check, two conditions (spec, "Both refusals are the same
	 * refusal"). The message names both settings with their values whichever
	 * condition fired, so the operator sees the whole picture at once. */
	char allowed[128], q[QUOTE_MAX];
	list_production_allowed(allowed, sizeof(allowed));
	const char *mech = mechanism_label(s->mechanism);
	const char *mode = deployment_label(s->deployment_mode);
	Q(q, auth);
	if (production && real_auth)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "startup refused: sandbox.mechanism=%s is a development sandbox; deployment_mode=%s and auth_mode=%s require one of %s",
		                         mech, mode, q, allowed);
	if (production)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "startup refused: sandbox.mechanism=%s is a development sandbox; deployment_mode=%s requires one of %s (auth_mode=%s)",
		                         mech, mode, allowed, q);
	return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
	                         "startup refused: sandbox.mechanism=%s is a development sandbox; auth_mode=%s requires one of %s even with deployment_mode=%s",
	                         mech, q, allowed, mode);
}

static int check_image(const char *image, airlock_error *err)
{
	char q[QUOTE_MAX];
	if (!image || airlock_image_digest_valid(image))
		return 0;
	Q(q, image);
	if (strncmp(image, "sha256:", 7) == 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "sandbox.image=%s is not a valid digest: expected sha256: followed by 64 lowercase hex digits",
		                         q);
	if (strstr(image, "@sha256:"))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "sandbox.image=%s: name the image by its digest alone (sha256:<64 lowercase hex>); the name in front of it is a tag, and a tag is a mutable pointer",
		                         q);
	return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
	                         "sandbox.image=%s is a tag: a tag is a mutable pointer, so the image must be named by digest (sha256:<64 lowercase hex>)",
	                         q);
}

static int64_t limit_value(const airlock_limit_table *t, const field *f)
{
	int64_t v;
	memcpy(&v, (const char *)t + f->off, sizeof(v));
	return v;
}

static int check_limits(const airlock_settings *s, airlock_error *err)
{
	/* The one listing cap both sides of the service agree on (caps.h);
	 * a ceiling of 0 (none) still stops here. */
	if (s->defaults.files_changed_max > AIRLOCK_FILES_CHANGED_MAX ||
	    s->ceilings.files_changed_max > AIRLOCK_FILES_CHANGED_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "limits.%s.files_changed_max=%lld: at most %d",
		                         s->defaults.files_changed_max > AIRLOCK_FILES_CHANGED_MAX
		                                 ? "defaults" : "ceilings",
		                         (long long)(s->defaults.files_changed_max > AIRLOCK_FILES_CHANGED_MAX
		                                             ? s->defaults.files_changed_max
		                                             : s->ceilings.files_changed_max),
		                         AIRLOCK_FILES_CHANGED_MAX);
	for (size_t i = 0; i < ARRAY_SIZE(limit_fields); i++) {
		const field *f = &limit_fields[i];
		int64_t d = limit_value(&s->defaults, f), c = limit_value(&s->ceilings, f);
		if (c < 0)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "limits.ceilings.%s=%lld: must be >= 0 (0 means no ceiling)",
			                         f->key, (long long)c);
		/* Zero is what a forgotten limit looks like, and a forgotten limit
		 * must not ship as unlimited (spec, "Resource limits, as numbers"). */
		if (d <= 0)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "limits.defaults.%s=%lld: must be > 0", f->key,
			                         (long long)d);
		if (c > 0 && d > c)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "limits.defaults.%s=%lld is above limits.ceilings.%s=%lld",
			                         f->key, (long long)d, f->key, (long long)c);
	}
	/* The floors every spec meets (types.h), so a default below one is
	 * refused here rather than at every provision. */
	airlock_error lerr = { 0 };
	if (airlock_resource_limits_validate(&s->defaults.limits, &lerr) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "limits.defaults: %s",
		                         lerr.message);
	return 0;
}

/* service.listen: the shapes airlock serve can listen on. The address is
 * resolved when the service starts; here only its form is checked. */
static bool listen_form_ok(const char *v, bool *ret_unix)
{
	*ret_unix = strncmp(v, "unix:", 5) == 0;
	if (*ret_unix)
		return v[5] == '/' && strlen(v + 5) < 108;
	const char *colon = strrchr(v, ':');
	if (!colon || colon == v || !colon[1])
		return false;
	for (const char *p = colon + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return strlen(colon + 1) <= 5 && atoi(colon + 1) <= 65535;
}

static int check_service(const airlock_service_settings *v, airlock_error *err)
{
	char q[QUOTE_MAX];
	bool is_unix = false;
	if (!v->listen || !listen_form_ok(v->listen, &is_unix))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.listen=%s: expected unix:/absolute/path or HOST:PORT",
		                         v->listen ? Q(q, v->listen) : "(unset)");
	if (!is_unix && (!v->tls_cert_file || !v->tls_key_file))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.listen=%s is TCP: service.tls_cert_file and service.tls_key_file are required (the credential never crosses a network in the clear)",
		                         Q(q, v->listen));
	if (!v->tls_cert_file != !v->tls_key_file)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.tls_cert_file and service.tls_key_file go together: set both or neither");
	if (v->tls_client_ca_file && !v->tls_cert_file)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.tls_client_ca_file needs TLS: set service.tls_cert_file and service.tls_key_file");
	if (v->max_sandboxes <= 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.max_sandboxes=%lld: must be > 0", (long long)v->max_sandboxes);
	if (v->max_connections <= 0 || v->max_connections > AIRLOCK_SERVICE_CONNECTIONS_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.max_connections=%lld: must be from 1 to %d",
		                         (long long)v->max_connections, AIRLOCK_SERVICE_CONNECTIONS_MAX);
	return 0;
}

int airlock_settings_check(const airlock_settings *s, airlock_error *err)
{
	char q[QUOTE_MAX];
	if (!s)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "settings: missing");
	if (!airlock_deployment_mode_name(s->deployment_mode))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "deployment_mode is not set");
	if (!airlock_mechanism_name(s->mechanism))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "sandbox.mechanism is not set");
	if (!s->auth_mode || !auth_mode_valid(s->auth_mode, strlen(s->auth_mode)))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "auth_mode=%s is not a valid mode",
		                         s->auth_mode ? Q(q, s->auth_mode) : "(unset)");

	int r = check_isolation(s, err);
	if (r < 0)
		return r;
	r = check_image(s->image, err);
	if (r < 0)
		return r;
	if (s->hard_cap_seconds <= 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "sandbox.hard_cap_seconds=%lld: must be > 0 (the hard cap always applies)",
		                         (long long)s->hard_cap_seconds);
	if (!s->image_store || s->image_store[0] != '/')
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "sandbox.image_store=%s: must be an absolute path",
		                         s->image_store ? Q(q, s->image_store) : "(unset)");
	r = check_limits(s, err);
	if (r < 0)
		return r;
	if (s->n_passthrough > AIRLOCK_TIER1_MAX || (s->n_passthrough && !s->passthrough))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "environment.passthrough: more than %d names", AIRLOCK_TIER1_MAX);
	/* A tier-1 name that is tier 0 is a startup error, not a silent drop: a
	 * silent drop is a deployment that thinks it passed something it did
	 * not (spec, tier 1). */
	r = airlock_tier1_check((const char *const *)s->passthrough, s->n_passthrough, err);
	if (r < 0) {
		airlock_error_prefix(err, "startup refused: environment.passthrough: ");
		return r;
	}
	return check_service(&s->service, err);
}

/* ---- printing ------------------------------------------------------------------------ */

/* A string as YAML: plain when it cannot be misread, double-quoted with
 * escapes otherwise, so the output parses back to the same settings. */
static void print_string(FILE *out, const char *s)
{
	bool plain = s[0] != 0;
	for (const char *c = s; *c && plain; c++)
		plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		        *c == '_' || *c == '/' || *c == '.' || (*c == '-' && c != s) ||
		        (*c == ':' && c != s && c[1] != 0);
	static const char *const words[] = { "null", "Null", "NULL", "true", "True", "TRUE", "false",
		                             "False", "FALSE", "yes", "Yes", "YES", "no", "No", "NO",
		                             "on", "On", "ON", "off", "Off", "OFF" };
	for (size_t i = 0; plain && i < ARRAY_SIZE(words); i++)
		plain = strcmp(s, words[i]) != 0;
	if (plain) {
		fputs(s, out);
		return;
	}
	fputc('"', out);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(out, "\\%c", *c);
		else if (*c < 0x20 || *c == 0x7f)
			fprintf(out, "\\x%02x", *c);
		else
			fputc(*c, out);
	}
	fputc('"', out);
}

static void print_limits(FILE *out, const char *title, const airlock_limit_table *t, bool ceiling)
{
	fprintf(out, "  %s:\n", title);
	for (size_t i = 0; i < ARRAY_SIZE(limit_fields); i++) {
		const field *f = &limit_fields[i];
		int64_t v = limit_value(t, f);
		fprintf(out, "    %s: %lld", f->key, (long long)v);
		if (ceiling && v == 0)
			fputs("  # no ceiling (operator)", out);
		fputc('\n', out);
	}
}

void airlock_settings_print(const airlock_settings *s, FILE *out)
{
	if (!s || !out)
		return;
	fputs("# airlock settings, resolved\n", out);
	fprintf(out, "deployment_mode: %s\n", deployment_label(s->deployment_mode));
	fputs("auth_mode: ", out);
	print_string(out, s->auth_mode ? s->auth_mode : "(unset)");
	fputs("\nsandbox:\n", out);
	fprintf(out, "  mechanism: %s\n", mechanism_label(s->mechanism));
	if (s->image) {
		/* The resolved digest goes in the log at startup (spec,
		 * EnvironmentSpec): what image a deployment runs is then a fact in
		 * the log rather than a question for a registry. */
		fputs("  image: ", out);
		print_string(out, s->image);
		fputc('\n', out);
	} else {
		fputs("  # image: none configured\n", out);
	}
	fprintf(out, "  hard_cap_seconds: %lld\n", (long long)s->hard_cap_seconds);
	fputs("  image_store: ", out);
	print_string(out, s->image_store ? s->image_store : "(unset)");
	fprintf(out, "\n  gvisor_platform: %s", airlock_gvisor_platform_name(s->gvisor_platform));
	fputs("\nlimits:\n", out);
	print_limits(out, "defaults", &s->defaults, false);
	print_limits(out, "ceilings", &s->ceilings, true);
	fputs("environment:\n", out);
	if (s->passthrough_file) {
		fputs("  passthrough_file: ", out);
		print_string(out, s->passthrough_file);
		fputc('\n', out);
		fputs("  # names read from it:", out);
		for (size_t i = 0; i < s->n_passthrough; i++)
			fprintf(out, " %s", s->passthrough[i]);
		fputc('\n', out);
	} else {
		fputs("  passthrough: [", out);
		for (size_t i = 0; i < s->n_passthrough; i++)
			fprintf(out, "%s%s", i ? ", " : "", s->passthrough[i]);
		fputs("]\n", out);
	}
	if (s->tier1_error) {
		char q[AIRLOCK_ERROR_MESSAGE_MAX + 256];
		fprintf(out, "  # tier-1 list error: %s\n",
		        quote(q, sizeof(q), s->tier1_error, strlen(s->tier1_error)));
	}
	fputs("service:\n", out);
	const struct {
		const char *key, *value;
	} strs[] = {
		{ "listen", s->service.listen },
		{ "socket_group", s->service.socket_group },
		{ "credential_file", s->service.credential_file },
		{ "metrics_listen", s->service.metrics_listen },
		{ "tls_cert_file", s->service.tls_cert_file },
		{ "tls_key_file", s->service.tls_key_file },
		{ "tls_client_ca_file", s->service.tls_client_ca_file },
		{ "policy_file", s->service.policy_file },
	};
	for (size_t i = 0; i < ARRAY_SIZE(strs); i++) {
		if (!strs[i].value)
			continue;
		fprintf(out, "  %s: ", strs[i].key);
		print_string(out, strs[i].value);
		fputc('\n', out);
	}
	fprintf(out, "  max_sandboxes: %lld\n", (long long)s->service.max_sandboxes);
	fprintf(out, "  max_connections: %lld\n", (long long)s->service.max_connections);
}

void airlock_settings_clear(airlock_settings *s)
{
	if (!s)
		return;
	free(s->auth_mode);
	free(s->image);
	free(s->image_store);
	names_free(s->passthrough, s->n_passthrough);
	free(s->passthrough_file);
	free(s->tier1_error);
	free(s->service.listen);
	free(s->service.socket_group);
	free(s->service.credential_file);
	free(s->service.metrics_listen);
	free(s->service.tls_cert_file);
	free(s->service.tls_key_file);
	free(s->service.tls_client_ca_file);
	free(s->service.policy_file);
	*s = (airlock_settings){ 0 };
}
