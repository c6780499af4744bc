/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gate.sandbox.spec_has_no_host_path (structural, M6).
 *
 * "A structural check over the declared types asserts that EnvironmentSpec,
 * EnvironmentHandle, ExecutionResult, and FileChange carry no field holding a
 * host filesystem path" (the specification, Hard gates).
 *
 * The check reads include/airlock/types.h as text at test time, extracts the
 * member names of those four structs and of every airlock_* struct they
 * contain (followed transitively), and fails on any member whose name
 * contains a host-path-like word unless the member is on the allowlist below
 * with its reason. ExecutionCommand is deliberately not a root: its
 * working_directory is relative to /workspace and never leaves the worker
 * unresolved (spec, ExecutionCommand).
 *
 * The extractor is tested on synthetic text as well, so a parser that
 * silently finds nothing cannot pass the gate.
 */
#include <criterion/criterion.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const char *const roots[] = {
	"airlock_environment_spec",
	"airlock_environment_handle",
	"airlock_execution_result",
	"airlock_file_change",
};

/* Words that suggest a member holds (or leads to) a place on the host. */
static const char *const banned[] = {
	"path", "dir", "host", "mount", "root", "socket", "file",
	"volume", "container", "pid", "device", "loop",
};

typedef struct allowed {
	const char *member; /* "struct.member" */
	const char *reason;
} allowed;

static const allowed allowlist[] = {
	{ "airlock_file_change.path",
	  "relative to /workspace and never absolute; the decoders refuse an absolute one" },
	{ "airlock_execution_result.files_changed", "a listing of FileChange entries, not a path" },
	{ "airlock_execution_result.n_files_changed", "the length of that listing" },
	{ "airlock_execution_result.files_changed_truncated", "a flag on that listing" },
	{ "airlock_bridge_endpoint.socket_path",
	  "a path inside the sandbox (tool-system's bridge socket), never a host path" },
	{ "airlock_egress_destination.host", "a DNS name on the egress allowlist, not a filesystem location" },
	{ "airlock_resource_limits.pids_max", "a count (cgroup pids.max), not a host process id" },
};

/* ---- the extractor ------------------------------------------------------- */

#define NAME_MAX_LEN 96
#define MEMBERS_MAX 64

typedef struct member {
	char type[NAME_MAX_LEN];
	char name[NAME_MAX_LEN];
} member;

typedef struct structdef {
	member m[MEMBERS_MAX];
	size_t n;
} structdef;

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (len + 1 == cap) {
			char *p = realloc(buf, cap *= 2);
			if (!p) {
				free(buf);
				buf = NULL;
			}
			buf = p;
		}
	}
	fclose(f);
	if (buf)
		buf[len] = 0;
	return buf;
}

/* Comments become spaces, so a comment that says "host" is not a member and
 * a member hidden after a comment is still seen. */
static char *strip_comments(const char *src)
{
	char *out = strdup(src);
	cr_assert_not_null(out);
	for (char *p = out; *p;) {
		if (p[0] == '/' && p[1] == '*') {
			char *end = strstr(p + 2, "*/");
			char *stop = end ? end + 2 : p + strlen(p);
			memset(p, ' ', (size_t)(stop - p));
			p = stop;
		} else if (p[0] == '/' && p[1] == '/') {
			while (*p && *p != '\n')
				*p++ = ' ';
		} else {
			p++;
		}
	}
	return out;
}

static bool ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* The body of "struct NAME {...}" in src (comments already stripped), as a
 * new string; NULL when there is no such definition. */
static char *struct_body(const char *src, const char *name)
{
	size_t nl = strlen(name);
	for (const char *p = src; (p = strstr(p, "struct")) != NULL; p += 6) {
		if (p > src && ident_char(p[-1]))
			continue;
		const char *q = p + 6;
		while (isspace((unsigned char)*q))
			q++;
		if (strncmp(q, name, nl) != 0 || ident_char(q[nl]))
			continue;
		q += nl;
		while (isspace((unsigned char)*q))
			q++;
		if (*q != '{')
			continue; /* a use, not the definition */
		const char *start = ++q;
		int depth = 1;
		for (; *q && depth; q++)
			depth += *q == '{' ? 1 : *q == '}' ? -1 : 0;
		if (depth)
			return NULL;
		return strndup(start, (size_t)(q - 1 - start));
	}
	return NULL;
}

static const char *const skip_words[] = { "const", "volatile", "struct", "enum", "union",
					  "unsigned", "signed", "static" };

static bool is_skip_word(const char *w)
{
	for (size_t i = 0; i < NELEM(skip_words); i++)
		if (strcmp(w, skip_words[i]) == 0)
			return true;
	return false;
}

/* Members of one declaration list "T a; U *b, c[4]; int (*fn)(void);". */
static void parse_members(const char *body, structdef *out)
{
	out->n = 0;
	char *copy = strdup(body);
	char *save = NULL;
	for (char *decl = strtok_r(copy, ";", &save); decl; decl = strtok_r(NULL, ";", &save)) {
		/* Array sizes and function parameter lists are not names. */
		char clean[512];
		size_t k = 0;
		int bracket = 0, paren = 0;
		bool fnptr = false;
		char fnname[NAME_MAX_LEN] = "";
		for (const char *p = decl; *p && k + 1 < sizeof(clean); p++) {
			if (*p == '[')
				bracket++;
			else if (*p == ']')
				bracket--;
			else if (*p == '(') {
				/* "(*name)" names a function pointer member */
				const char *s = p + 1;
				while (isspace((unsigned char)*s))
					s++;
				if (*s == '*' && !fnptr && paren == 0) {
					s++;
					while (isspace((unsigned char)*s))
						s++;
					size_t n = 0;
					while (ident_char(s[n]) && n + 1 < sizeof(fnname))
						n++;
					memcpy(fnname, s, n);
					fnname[n] = 0;
					fnptr = n > 0;
				}
				paren++;
			} else if (*p == ')')
				paren--;
			else if (!bracket && !paren)
				clean[k++] = *p;
		}
		clean[k] = 0;

		/* Words of the declaration: the first non-qualifier is the type, and
		 * each comma-separated declarator ends in a name. */
		char type[NAME_MAX_LEN] = "";
		char *dsave = NULL;
		bool first_declarator = true;
		for (char *d = strtok_r(clean, ",", &dsave); d; d = strtok_r(NULL, ",", &dsave)) {
			char last[NAME_MAX_LEN] = "";
			for (char *p = d; *p;) {
				if (!ident_char(*p)) {
					p++;
					continue;
				}
				size_t n = 0;
				while (ident_char(p[n]))
					n++;
				char w[NAME_MAX_LEN];
				snprintf(w, sizeof(w), "%.*s", (int)n, p);
				p += n;
				if (first_declarator && !type[0] && !is_skip_word(w)) {
					snprintf(type, sizeof(type), "%s", w);
					continue;
				}
				if (!is_skip_word(w))
					snprintf(last, sizeof(last), "%s", w);
			}
			first_declarator = false;
			const char *name = fnptr ? fnname : last;
			if (name[0] && out->n < MEMBERS_MAX) {
				snprintf(out->m[out->n].type, NAME_MAX_LEN, "%s", type);
				snprintf(out->m[out->n].name, NAME_MAX_LEN, "%s", name);
				out->n++;
			}
			if (fnptr)
				break;
		}
	}
	free(copy);
}

static bool extract(const char *src, const char *name, structdef *out)
{
	char *body = struct_body(src, name);
	if (!body)
		return false;
	parse_members(body, out);
	free(body);
	return true;
}

/* ---- the check ----------------------------------------------------------- */

typedef struct report {
	char violations[64][2 * NAME_MAX_LEN + 40];
	size_t n_violations;
	char visited[32][NAME_MAX_LEN];
	size_t n_visited;
	bool allow_used[NELEM(allowlist)];
	char missing_root[NAME_MAX_LEN];
} report;

static bool contains_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (; *hay; hay++)
		if (strncasecmp(hay, needle, n) == 0)
			return true;
	return false;
}

static bool visited(const report *r, const char *name)
{
	for (size_t i = 0; i < r->n_visited; i++)
		if (strcmp(r->visited[i], name) == 0)
			return true;
	return false;
}

static void walk(const char *src, const char *name, report *r)
{
	if (visited(r, name) || r->n_visited >= NELEM(r->visited))
		return;
	snprintf(r->visited[r->n_visited++], NAME_MAX_LEN, "%s", name);
	structdef sd;
	if (!extract(src, name, &sd))
		return;
	for (size_t i = 0; i < sd.n; i++) {
		const member *m = &sd.m[i];
		char full[2 * NAME_MAX_LEN + 2];
		snprintf(full, sizeof(full), "%s.%s", name, m->name);
		for (size_t b = 0; b < NELEM(banned); b++) {
			if (!contains_ci(m->name, banned[b]))
				continue;
			bool ok = false;
			for (size_t a = 0; a < NELEM(allowlist); a++)
				if (strcmp(allowlist[a].member, full) == 0) {
					ok = true;
					r->allow_used[a] = true;
				}
			if (!ok && r->n_violations < NELEM(r->violations))
				snprintf(r->violations[r->n_violations++], sizeof(r->violations[0]),
					 "%s (contains \"%s\")", full, banned[b]);
			break;
		}
		/* Follow a contained project struct: a host path one level down
		 * crosses the port just the same. */
		if (strncmp(m->type, "airlock_", 8) == 0)
			walk(src, m->type, r);
	}
}

static void check(const char *header, report *r)
{
	memset(r, 0, sizeof(*r));
	char *src = strip_comments(header);
	for (size_t i = 0; i < NELEM(roots); i++) {
		structdef sd;
		if (!extract(src, roots[i], &sd) || sd.n == 0) {
			snprintf(r->missing_root, sizeof(r->missing_root), "%s", roots[i]);
			break;
		}
		walk(src, roots[i], r);
	}
	free(src);
}

static char *types_h(void)
{
	const char *root = getenv("AIRLOCK_TEST_SOURCE_ROOT");
	cr_assert_not_null(root, "AIRLOCK_TEST_SOURCE_ROOT is not set (tests/meson.build sets it); "
				 "the gate cannot pass without reading the header");
	char path[4096];
	snprintf(path, sizeof(path), "%s/include/airlock/types.h", root);
	char *s = read_file(path);
	cr_assert_not_null(s, "cannot read %s: %s", path, strerror(errno));
	return s;
}

/* header with text inserted right after "struct NAME {". */
static char *inject(const char *header, const char *name, const char *text)
{
	char pat[128];
	snprintf(pat, sizeof(pat), "struct %s {", name);
	const char *p = strstr(header, pat);
	cr_assert_not_null(p, "no \"%s\" in the header", pat);
	size_t off = (size_t)(p - header) + strlen(pat);
	size_t n = strlen(header) + strlen(text) + 1;
	char *out = malloc(n);
	snprintf(out, n, "%.*s%s%s", (int)off, header, text, header + off);
	return out;
}

static void print_report(const report *r)
{
	for (size_t i = 0; i < r->n_violations; i++)
		cr_log_error("host-path-like member: %s", r->violations[i]);
}

/* ---- the gate ------------------------------------------------------------- */

Test(gate_sandbox_spec_has_no_host_path, declared_types_carry_no_host_path)
{
	char *h = types_h();
	report r;
	check(h, &r);
	cr_assert_eq(r.missing_root[0], 0, "struct %s not found in types.h: the gate cannot check it",
		     r.missing_root);
	print_report(&r);
	cr_assert_eq(r.n_violations, 0, "%zu host-path-like member(s), first: %s", r.n_violations,
		     r.n_violations ? r.violations[0] : "");
	free(h);
}

Test(gate_sandbox_spec_has_no_host_path, extractor_sees_the_real_structs)
{
	char *h = types_h();
	char *src = strip_comments(h);
	const struct {
		const char *type;
		const char *member;
	} expect[] = {
		{ "airlock_environment_spec", "tenant_id" },       { "airlock_environment_spec", "image_digest" },
		{ "airlock_environment_spec", "bridge" },          { "airlock_environment_spec", "environment" },
		{ "airlock_environment_handle", "environment_id" }, { "airlock_environment_handle", "expires_at_ms" },
		{ "airlock_execution_result", "exit_code" },       { "airlock_execution_result", "files_changed" },
		{ "airlock_execution_result", "duration_ms" },     { "airlock_file_change", "path" },
		{ "airlock_file_change", "sha256" },               { "airlock_bridge_endpoint", "socket_path" },
		{ "airlock_egress_destination", "host" },          { "airlock_resource_limits", "pids_max" },
	};
	for (size_t i = 0; i < NELEM(expect); i++) {
		structdef sd;
		cr_assert(extract(src, expect[i].type, &sd), "no struct %s", expect[i].type);
		bool found = false;
		for (size_t k = 0; k < sd.n; k++)
			found |= strcmp(sd.m[k].name, expect[i].member) == 0;
		cr_assert(found, "%s.%s not extracted", expect[i].type, expect[i].member);
	}
	/* The walk reaches the nested types and not ExecutionCommand. */
	report r;
	check(h, &r);
	const char *reached[] = { "airlock_bridge_endpoint", "airlock_egress_policy", "airlock_egress_destination",
				  "airlock_resource_limits", "airlock_env", "airlock_env_var" };
	for (size_t i = 0; i < NELEM(reached); i++)
		cr_assert(visited(&r, reached[i]), "walk did not reach %s", reached[i]);
	cr_assert_not(visited(&r, "airlock_execution_command"));
	free(src);
	free(h);
}

Test(gate_sandbox_spec_has_no_host_path, every_allowlist_entry_is_needed)
{
	/* An entry that matches nothing is an exemption waiting for a field. */
	char *h = types_h();
	report r;
	check(h, &r);
	for (size_t a = 0; a < NELEM(allowlist); a++) {
		cr_assert(r.allow_used[a], "allowlist entry %s matches no member; remove it",
			  allowlist[a].member);
		cr_assert_gt(strlen(allowlist[a].reason), 10, "entry %s has no reason", allowlist[a].member);
	}
	free(h);
}

Test(gate_sandbox_spec_has_no_host_path, fails_when_a_root_gains_a_host_path)
{
	char *h = types_h();
	for (size_t i = 0; i < NELEM(roots); i++) {
		char *bad = inject(h, roots[i], "\n\tchar *host_path;\n");
		report r;
		check(bad, &r);
		cr_assert_eq(r.n_violations, 1, "%s: host_path not caught", roots[i]);
		char want[160];
		snprintf(want, sizeof(want), "%s.host_path", roots[i]);
		cr_assert(strncmp(r.violations[0], want, strlen(want)) == 0, "%s", r.violations[0]);
		free(bad);
	}
	free(h);
}

Test(gate_sandbox_spec_has_no_host_path, fails_for_every_banned_word)
{
	char *h = types_h();
	for (size_t b = 0; b < NELEM(banned); b++) {
		char text[128];
		snprintf(text, sizeof(text), " int64_t x_%s_y[4], other; ", banned[b]);
		char *bad = inject(h, "airlock_environment_handle", text);
		report r;
		check(bad, &r);
		cr_assert_eq(r.n_violations, 1, "word %s not caught", banned[b]);
		free(bad);
	}
	/* case does not hide a word */
	char *bad = inject(h, "airlock_execution_result", " char *WorkDir; ");
	report r;
	check(bad, &r);
	cr_assert_eq(r.n_violations, 1);
	free(bad);
	free(h);
}

Test(gate_sandbox_spec_has_no_host_path, follows_nested_and_new_struct_types)
{
	char *h = types_h();
	/* into an existing nested type */
	char *bad = inject(h, "airlock_bridge_endpoint", " char *mount_point; ");
	report r;
	check(bad, &r);
	cr_assert_eq(r.n_violations, 1);
	cr_assert(strncmp(r.violations[0], "airlock_bridge_endpoint.mount_point", 35) == 0, "%s", r.violations[0]);
	free(bad);

	/* through a brand-new struct type reached by an innocent member name */
	char *tmp = inject(h, "airlock_environment_handle", " struct airlock_runtime_info *info; ");
	size_t n = strlen(tmp) + 200;
	bad = malloc(n);
	snprintf(bad, n, "typedef struct airlock_runtime_info {\n\tchar *container_id; /* the runtime's */\n"
			 "\tint x;\n} airlock_runtime_info;\n%s", tmp);
	check(bad, &r);
	cr_assert_eq(r.n_violations, 1, "nested struct not followed");
	cr_assert(strncmp(r.violations[0], "airlock_runtime_info.container_id", 33) == 0, "%s", r.violations[0]);
	free(bad);
	free(tmp);

	/* a function pointer member is a member too */
	bad = inject(h, "airlock_file_change", " int (*open_host_fd)(const char *p, int flags); ");
	check(bad, &r);
	cr_assert_eq(r.n_violations, 1, "function-pointer member not seen");
	free(bad);
	free(h);
}

Test(gate_sandbox_spec_has_no_host_path, allowlist_is_per_struct)
{
	/* "path" is allowed on FileChange only; the same name elsewhere fails. */
	char *h = types_h();
	char *bad = inject(h, "airlock_environment_handle", " char *path; ");
	report r;
	check(bad, &r);
	cr_assert_eq(r.n_violations, 1);
	free(bad);
	free(h);
}

Test(gate_sandbox_spec_has_no_host_path, extractor_on_synthetic_text)
{
	const char *src = "/* struct airlock_environment_spec { char *host_path; } in a comment */\n"
			  "typedef struct airlock_environment_spec {\n"
			  "\tchar name[AIRLOCK_X + 1]; // a trailing comment naming a host\n"
			  "\tconst struct airlock_y *const y;\n"
			  "\tunsigned long long a, *b, c[3];\n"
			  "\tint (*cb)(void *ctx, int n);\n"
			  "\tairlock_env environment;\n"
			  "} airlock_environment_spec;\n";
	char *clean = strip_comments(src);
	structdef sd;
	cr_assert(extract(clean, "airlock_environment_spec", &sd));
	const char *want_names[] = { "name", "y", "a", "b", "c", "cb", "environment" };
	const char *want_types[] = { "char", "airlock_y", "long", "long", "long", "int", "airlock_env" };
	cr_assert_eq(sd.n, NELEM(want_names), "got %zu members", sd.n);
	for (size_t i = 0; i < NELEM(want_names); i++) {
		cr_assert_str_eq(sd.m[i].name, want_names[i]);
		cr_assert_str_eq(sd.m[i].type, want_types[i]);
	}
	cr_assert_not(extract(clean, "airlock_missing", &sd));
	free(clean);

	/* A header where a root is missing is a failure, not a pass. */
	report r;
	check("typedef struct airlock_file_change { char *x; } airlock_file_change;", &r);
	cr_assert_neq(r.missing_root[0], 0);
}
