/* SPDX-License-Identifier: Apache-2.0 */
#include "airlock/types.h"
#include "airlock/egress.h"

#include <errno.h>
#include <string.h>

#include "util/util.h"

/* ---- closed vocabularies ------------------------------------------------
 * One table per enum, indexed by value; index 0 (the invalid value) has no
 * name, so parse can never return it for a real string and name() returns
 * NULL for it. Matching is exact and case-sensitive: the wire spellings are
 * the specification's, and a second accepted spelling is a second
 * vocabulary. */

static const char *const kill_reason_names[AIRLOCK_KILL__MAX] = {
	[AIRLOCK_KILL_TIMEOUT] = "TIMEOUT",
	[AIRLOCK_KILL_MEMORY] = "MEMORY",
	[AIRLOCK_KILL_OUTPUT_LIMIT] = "OUTPUT_LIMIT",
	[AIRLOCK_KILL_PIDS] = "PIDS",
	[AIRLOCK_KILL_DISK] = "DISK",
	[AIRLOCK_KILL_CANCELLED] = "CANCELLED",
	[AIRLOCK_KILL_EXPIRED] = "EXPIRED",
	[AIRLOCK_KILL_SERVICE_SHUTDOWN] = "SERVICE_SHUTDOWN",
};

static const char *const change_kind_names[AIRLOCK_CHANGE__MAX] = {
	[AIRLOCK_CHANGE_CREATED] = "CREATED",
	[AIRLOCK_CHANGE_MODIFIED] = "MODIFIED",
	[AIRLOCK_CHANGE_DELETED] = "DELETED",
};

static const char *const file_kind_names[AIRLOCK_FILE__MAX] = {
	[AIRLOCK_FILE_REGULAR] = "FILE",
	[AIRLOCK_FILE_SYMLINK] = "SYMLINK",
	[AIRLOCK_FILE_FIFO] = "FIFO",
	[AIRLOCK_FILE_SOCKET] = "SOCKET",
	[AIRLOCK_FILE_CHAR_DEVICE] = "CHAR_DEVICE",
	[AIRLOCK_FILE_BLOCK_DEVICE] = "BLOCK_DEVICE",
};

static const char *const provenance_names[AIRLOCK_PROVENANCE__MAX] = {
	[AIRLOCK_PROVENANCE_UNKNOWN] = "unknown",
	[AIRLOCK_PROVENANCE_TOOL_WRITTEN] = "tool_written",
	[AIRLOCK_PROVENANCE_SANDBOX_WRITTEN] = "sandbox_written",
};

static const char *const origin_names[AIRLOCK_ORIGIN__MAX] = {
	[AIRLOCK_ORIGIN_SANDBOX_EXPORT] = "SANDBOX_EXPORT",
	[AIRLOCK_ORIGIN_TOOL_OUTPUT] = "TOOL_OUTPUT",
	[AIRLOCK_ORIGIN_MODEL_OUTPUT] = "MODEL_OUTPUT",
	[AIRLOCK_ORIGIN_UPLOAD] = "UPLOAD",
	[AIRLOCK_ORIGIN_TRAJECTORY_EXPORT] = "TRAJECTORY_EXPORT",
	[AIRLOCK_ORIGIN_KNOWLEDGE_SOURCE] = "KNOWLEDGE_SOURCE",
};

static const char *const trust_names[AIRLOCK_TRUST__MAX] = {
	[AIRLOCK_TRUST_INTERNAL_TOOL] = "INTERNAL_TOOL",
	[AIRLOCK_TRUST_USER_SUPPLIED] = "USER_SUPPLIED",
	[AIRLOCK_TRUST_EXTERNAL_UNTRUSTED] = "EXTERNAL_UNTRUSTED",
};

static const char *const egress_mode_names[AIRLOCK_EGRESS__MAX] = {
	[AIRLOCK_EGRESS_DENY] = "deny",
	[AIRLOCK_EGRESS_ALLOWLIST] = "allowlist",
};

static const char *table_name(const char *const *table, size_t n, unsigned v)
{
	return v < n ? table[v] : NULL;
}

/* 0 (the invalid value of every enum here) when s is not a name. */
static unsigned table_parse(const char *const *table, size_t n, const char *s)
{
	if (!s)
		return 0;
	for (size_t i = 1; i < n; i++)
		if (table[i] && strcmp(table[i], s) == 0)
			return (unsigned)i;
	return 0;
}

#define DEFINE_ENUM_TABLE(fn, type, table)                                                         \
	const char *airlock_##fn##_name(type v)                                                    \
	{                                                                                          \
		return table_name(table, ARRAY_SIZE(table), (unsigned)v);                          \
	}                                                                                          \
	type airlock_##fn##_parse(const char *s)                                                   \
	{                                                                                          \
		return (type)table_parse(table, ARRAY_SIZE(table), s);                             \
	}

DEFINE_ENUM_TABLE(kill_reason, airlock_kill_reason, kill_reason_names)
DEFINE_ENUM_TABLE(change_kind, airlock_change_kind, change_kind_names)
DEFINE_ENUM_TABLE(file_kind, airlock_file_kind, file_kind_names)
DEFINE_ENUM_TABLE(provenance, airlock_provenance, provenance_names)
DEFINE_ENUM_TABLE(artifact_origin, airlock_artifact_origin, origin_names)
DEFINE_ENUM_TABLE(trust_level, airlock_trust_level, trust_names)
DEFINE_ENUM_TABLE(egress_mode, airlock_egress_mode, egress_mode_names)

/* ---- shapes -------------------------------------------------------------- */

bool airlock_id_valid(const char *id)
{
	if (!id)
		return false;
	size_t n = 0;
	for (const char *p = id; *p; p++, n++) {
		char c = *p;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		          c == '_' || c == '-';
		if (!ok || n >= AIRLOCK_ID_MAX)
			return false;
	}
	return n > 0;
}

bool airlock_sha256_hex_valid(const char *hex)
{
	if (!hex)
		return false;
	size_t i = 0;
	for (; hex[i]; i++) {
		char c = hex[i];
		if (i >= AIRLOCK_SHA256_HEX_LEN || !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
	}
	return i == AIRLOCK_SHA256_HEX_LEN;
}

/* RFC 6838's restricted-name: a first letter or digit, then up to 126 of
 * letters, digits and !#$&-^_.+ */
static size_t restricted_name(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++) {
		char c = s[n];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (!alnum && (n == 0 || !strchr("!#$&-^_.+", c)))
			break;
		if (n >= 127)
			return 0;
	}
	return n;
}

bool airlock_media_type_valid(const char *media_type)
{
	/* type/subtype and nothing else: a parameter (charset=...) or a space
	 * is refused rather than passed on, since the value is sent back as a
	 * response's Content-Type. */
	if (!media_type)
		return false;
	size_t t = restricted_name(media_type);
	if (t == 0 || media_type[t] != '/')
		return false;
	const char *sub = media_type + t + 1;
	size_t u = restricted_name(sub);
	return u > 0 && sub[u] == 0;
}

bool airlock_image_digest_valid(const char *digest)
{
	/* A digest, never a tag: a tag is a mutable pointer (spec, EnvironmentSpec). */
	static const char prefix[] = "sha256:";
	if (!digest || strncmp(digest, prefix, sizeof(prefix) - 1) != 0)
		return false;
	return airlock_sha256_hex_valid(digest + sizeof(prefix) - 1);
}

static bool env_name_shape(const char *name)
{
	if (!name || !*name)
		return false;
	for (const char *p = name; *p; p++) {
		char c = *p;
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
		if (!alpha && !(p != name && c >= '0' && c <= '9'))
			return false;
	}
	return true;
}

/* ---- validation ----------------------------------------------------------
 * The internal forms take the name the caller knows the value by, so a limit
 * reached through a spec is reported as "EnvironmentSpec.limits.pids_max"
 * and the same limit on its own as "ResourceLimits.pids_max". */

static int limits_check(const airlock_resource_limits *l, const char *what, airlock_error *err)
{
	const struct {
		const char *name;
		int64_t v;
	} f[] = {
		{ "cpu_millicores", l->cpu_millicores },   { "memory_bytes", l->memory_bytes },
		{ "pids_max", l->pids_max },               { "workspace_bytes", l->workspace_bytes },
		{ "inodes_max", l->inodes_max },           { "wall_clock_seconds", l->wall_clock_seconds },
	};
	/* A zero is what a forgotten field looks like, and a forgotten limit must
	 * not mean unlimited (spec, ResourceLimits). */
	for (size_t i = 0; i < ARRAY_SIZE(f); i++)
		if (f[i].v <= 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "%s.%s: must be > 0 (got %lld)", what, f[i].name,
			                         (long long)f[i].v);
	if (l->memory_bytes < AIRLOCK_LIMIT_MEMORY_BYTES_MIN)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "%s.memory_bytes: %lld is below the %lld bytes (8 MiB) a "
		                         "sandbox needs to start",
		                         what, (long long)l->memory_bytes,
		                         (long long)AIRLOCK_LIMIT_MEMORY_BYTES_MIN);
	if (l->pids_max < AIRLOCK_LIMIT_PIDS_MIN)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "%s.pids_max: %lld is below the %lld processes a sandbox "
		                         "needs to start a command",
		                         what, (long long)l->pids_max, (long long)AIRLOCK_LIMIT_PIDS_MIN);
	return 0;
}

int airlock_resource_limits_validate(const airlock_resource_limits *l, airlock_error *err)
{
	if (!l)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0, "ResourceLimits: missing");
	return limits_check(l, "ResourceLimits", err);
}

static int egress_check(const airlock_egress_policy *p, const char *what, airlock_errclass cls,
                        airlock_error *err)
{
	if (!airlock_egress_mode_name(p->mode))
		return airlock_error_set(err, cls, 0, "%s.mode: invalid value %d", what, (int)p->mode);
	if (p->n_destinations > 0 && !p->destinations)
		return airlock_error_set(err, cls, 0, "%s.destinations: missing", what);
	/* Destinations under deny would be a policy that reads as if it allowed
	 * something; refusing it keeps the file honest about what it does. */
	if (p->mode == AIRLOCK_EGRESS_DENY && p->n_destinations > 0)
		return airlock_error_set(err, cls, 0,
		                         "%s.destinations: must be empty when mode is deny", what);
	for (size_t i = 0; i < p->n_destinations; i++) {
		const airlock_egress_destination *d = &p->destinations[i];
		if (!d->host || !*d->host)
			return airlock_error_set(err, cls, 0, "%s.destinations[%zu].host: must not be empty",
			                         what, i);
		/* No default port: the destination that matters is the one on a
		 * port nobody wrote down (spec, "The allowlist grammar"). */
		if (d->n_ports == 0 || !d->ports)
			return airlock_error_set(err, cls, 0,
			                         "%s.destinations[%zu].ports: at least one port is required",
			                         what, i);
		for (size_t j = 0; j < d->n_ports; j++)
			if (d->ports[j] == 0)
				return airlock_error_set(err, cls, 0,
				                         "%s.destinations[%zu].ports[%zu]: must be 1..65535",
				                         what, i, j);
	}
	/* Then the grammar's own rules for its destinations (host names,
	 * normalized form, no host or port twice, the count): one function for
	 * every door, the YAML parser's too, so a policy built in code, encoded
	 * or carried in a spec is held to what the operator's file is. An
	 * allowlist with no destination stays valid here (it reaches nothing);
	 * the grammar refuses it as written text, and so does the decoder. */
	if (p->n_destinations == 0)
		return 0;
	int r = airlock_egress_policy_check(p, what, err);
	if (r < 0 && err) {
		err->cls = cls;
		r = airlock_errcode(cls);
	}
	return r;
}

int airlock_egress_policy_validate(const airlock_egress_policy *p, airlock_error *err)
{
	if (!p)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "EgressPolicy: missing");
	return egress_check(p, "EgressPolicy", AIRLOCK_ERR_DECODE, err);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int env_check(const airlock_env *e, const char *what, airlock_error *err)
{
	if (e->n > 0 && !e->vars)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0, "%s: missing", what);
	for (size_t i = 0; i < e->n; i++) {
		const airlock_env_var *v = &e->vars[i];
		if (!env_name_shape(v->name))
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "%s[%zu].name: invalid variable name \"%.64s\"", what, i,
			                         v->name ? v->name : "");
		if (!v->value)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "%s.%s: missing value", what, v->name);
	}
	/* A duplicate would leave which value the process sees up to the
	 * adapter. The mapping is usually a few dozen names, but a decoded spec
	 * can carry as many as the input limit allows, so the check sorts
	 * rather than comparing every pair. */
	if (e->n < 2)
		return 0;
	_cleanup_free_ const char **names = calloc(e->n, sizeof(*names));
	if (!names)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", what);
	for (size_t i = 0; i < e->n; i++)
		names[i] = e->vars[i].name;
	qsort(names, e->n, sizeof(*names), cmp_str);
	for (size_t i = 1; i < e->n; i++)
		if (strcmp(names[i - 1], names[i]) == 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "%s.%s: duplicate name", what, names[i]);
	return 0;
}

int airlock_environment_spec_validate(const airlock_environment_spec *s, airlock_error *err)
{
	const airlock_errclass cls = AIRLOCK_ERR_EXECUTION_REJECTED;
	if (!s)
		return airlock_error_set(err, cls, 0, "EnvironmentSpec: missing");
	if (!airlock_id_valid(s->tenant_id))
		return airlock_error_set(err, cls, 0,
		                         "EnvironmentSpec.tenant_id: must be 1..%d of [A-Za-z0-9_-]",
		                         AIRLOCK_ID_MAX);
	if (!airlock_id_valid(s->run_id))
		return airlock_error_set(err, cls, 0,
		                         "EnvironmentSpec.run_id: must be 1..%d of [A-Za-z0-9_-]",
		                         AIRLOCK_ID_MAX);
	if (s->lease_epoch < 0)
		return airlock_error_set(err, cls, 0, "EnvironmentSpec.lease_epoch: must be >= 0 (got %lld)",
		                         (long long)s->lease_epoch);
	if (!airlock_image_digest_valid(s->image_digest))
		return airlock_error_set(err, cls, 0,
		                         "EnvironmentSpec.image_digest: must be \"sha256:\" and 64 lowercase hex digits, never a tag");
	int r = limits_check(&s->limits, "EnvironmentSpec.limits", err);
	if (r < 0)
		return r;
	r = egress_check(&s->egress, "EnvironmentSpec.egress", cls, err);
	if (r < 0)
		return r;
	r = env_check(&s->environment, "EnvironmentSpec.environment", err);
	if (r < 0)
		return r;
	if (s->bridge) {
		const airlock_bridge_endpoint *b = s->bridge;
		/* The socket path is one inside the sandbox; relative would mean
		 * "relative to wherever the adapter happens to be". */
		if (!b->socket_path || b->socket_path[0] != '/')
			return airlock_error_set(err, cls, 0,
			                         "EnvironmentSpec.bridge.socket_path: must be an absolute path inside the sandbox");
		if (!b->token || !*b->token)
			return airlock_error_set(err, cls, 0, "EnvironmentSpec.bridge.token: must not be empty");
	}
	return 0;
}

/* ---- release ------------------------------------------------------------- */

int airlock_egress_policy_copy(airlock_egress_policy *dst, const airlock_egress_policy *src)
{
	airlock_egress_policy p = { .mode = src->mode };
	if (src->n_destinations > 0) {
		p.destinations = calloc(src->n_destinations, sizeof(*p.destinations));
		if (!p.destinations)
			return -ENOMEM;
	}
	for (size_t i = 0; i < src->n_destinations; i++, p.n_destinations++) {
		const airlock_egress_destination *s = &src->destinations[i];
		airlock_egress_destination *d = &p.destinations[i];
		d->host = util_strdup0(s->host);
		d->ports = s->n_ports ? malloc(s->n_ports * sizeof(*d->ports)) : NULL;
		if ((s->host && !d->host) || (s->n_ports && !d->ports)) {
			p.n_destinations++; /* so the clear frees this one's halves */
			airlock_egress_policy_clear(&p);
			return -ENOMEM;
		}
		if (s->n_ports)
			memcpy(d->ports, s->ports, s->n_ports * sizeof(*d->ports));
		d->n_ports = s->n_ports;
	}
	*dst = p;
	return 0;
}

void airlock_egress_policy_clear(airlock_egress_policy *p)
{
	if (!p)
		return;
	for (size_t i = 0; p->destinations && i < p->n_destinations; i++) {
		free(p->destinations[i].host);
		free(p->destinations[i].ports);
	}
	free(p->destinations);
	*p = (airlock_egress_policy){ 0 };
}

void airlock_bridge_endpoint_free(airlock_bridge_endpoint *b)
{
	if (!b)
		return;
	free(b->socket_path);
	if (b->token) {
		/* The one-time token is a bearer credential for one turn; do not
		 * leave it in freed heap for the next allocation to inherit. */
		explicit_bzero(b->token, strlen(b->token));
		free(b->token);
	}
	free(b);
}

void airlock_env_clear(airlock_env *e)
{
	if (!e)
		return;
	for (size_t i = 0; e->vars && i < e->n; i++) {
		free(e->vars[i].name);
		/* A value may be the bridge's one-time token (tier 2): wiped
		 * like the endpoint's own copy. */
		if (e->vars[i].value)
			explicit_bzero(e->vars[i].value, strlen(e->vars[i].value));
		free(e->vars[i].value);
	}
	free(e->vars);
	*e = (airlock_env){ 0 };
}

void airlock_environment_spec_clear(airlock_environment_spec *s)
{
	if (!s)
		return;
	free(s->tenant_id);
	free(s->run_id);
	free(s->image_digest);
	airlock_egress_policy_clear(&s->egress);
	airlock_env_clear(&s->environment);
	airlock_bridge_endpoint_free(s->bridge);
	*s = (airlock_environment_spec){ 0 };
}

void airlock_environment_handle_clear(airlock_environment_handle *h)
{
	if (!h)
		return;
	free(h->tenant_id);
	free(h->run_id);
	*h = (airlock_environment_handle){ 0 };
}

void airlock_execution_command_clear(airlock_execution_command *c)
{
	if (!c)
		return;
	for (size_t i = 0; c->argv && i < c->argc; i++)
		free(c->argv[i]);
	free(c->argv);
	free(c->working_directory);
	free(c->stdin_data);
	*c = (airlock_execution_command){ 0 };
}

void airlock_file_change_clear(airlock_file_change *f)
{
	if (!f)
		return;
	free(f->path);
	*f = (airlock_file_change){ 0 };
}

void airlock_execution_result_clear(airlock_execution_result *r)
{
	if (!r)
		return;
	free(r->stdout_data);
	free(r->stderr_data);
	for (size_t i = 0; r->files_changed && i < r->n_files_changed; i++)
		airlock_file_change_clear(&r->files_changed[i]);
	free(r->files_changed);
	*r = (airlock_execution_result){ 0 };
}

void airlock_artifact_metadata_clear(airlock_artifact_metadata *m)
{
	if (!m)
		return;
	free(m->tenant_id);
	free(m->run_id);
	free(m->filename);
	free(m->media_type);
	*m = (airlock_artifact_metadata){ 0 };
}

void airlock_artifact_ref_clear(airlock_artifact_ref *r)
{
	if (!r)
		return;
	free(r->media_type);
	*r = (airlock_artifact_ref){ 0 };
}

/* ---- copies -------------------------------------------------------------- */

/* dst is an output: its previous contents are overwritten, not freed, so the
 * caller passes a zeroed or already-cleared handle. */
int airlock_environment_handle_copy(airlock_environment_handle *dst, const airlock_environment_handle *src)
{
	if (!dst || !src)
		return -EINVAL;
	_cleanup_free_ char *tenant = util_strdup0(src->tenant_id);
	_cleanup_free_ char *run = util_strdup0(src->run_id);
	if ((src->tenant_id && !tenant) || (src->run_id && !run))
		return -ENOMEM;
	airlock_environment_handle h = *src;
	/* environment_id is an inline array: the struct copy took it, and the
	 * forced terminator keeps an unterminated source from reading past it. */
	h.environment_id[AIRLOCK_ENVIRONMENT_ID_MAX - 1] = 0;
	h.tenant_id = TAKE_PTR(tenant);
	h.run_id = TAKE_PTR(run);
	*dst = h;
	return 0;
}

int airlock_env_add(airlock_env *e, const char *name, const char *value)
{
	if (!e || !name || !value)
		return -EINVAL;
	_cleanup_free_ char *v = strdup(value);
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < e->n; i++)
		if (e->vars[i].name && strcmp(e->vars[i].name, name) == 0) {
			free(e->vars[i].value);
			e->vars[i].value = TAKE_PTR(v);
			return 0;
		}
	_cleanup_free_ char *n = strdup(name);
	if (!n)
		return -ENOMEM;
	/* Grow by one: the mapping is built once and is a few dozen entries, so
	 * amortized growth would be bookkeeping with nothing to save. */
	airlock_env_var *vars = reallocarray(e->vars, e->n + 1, sizeof(*vars));
	if (!vars)
		return -ENOMEM;
	e->vars = vars;
	e->vars[e->n++] = (airlock_env_var){ .name = TAKE_PTR(n), .value = TAKE_PTR(v) };
	return 0;
}

const char *airlock_env_get(const airlock_env *e, const char *name)
{
	if (!e || !name)
		return NULL;
	for (size_t i = 0; i < e->n; i++)
		if (e->vars[i].name && strcmp(e->vars[i].name, name) == 0)
			return e->vars[i].value;
	return NULL;
}
