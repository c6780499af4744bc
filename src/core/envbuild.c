/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The environment a sandbox sees is built, not filtered (the specification,
 * "The environment a sandbox sees, and the three tiers"). The builder starts
 * from nothing; the only bytes that come from the worker's environment are
 * the values of names an operator listed, and a listed name that looks like
 * a credential is refused before it is looked up.
 */
#include "airlock/envbuild.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "airlock/settings.h"
#include "airlock/caps.h"
#include "util/util.h"

/* Its caps (a name, a value, the working directory) are in airlock/caps.h; the
 * tiers' names are src/core/tiers.c. */

/* ---- the builder ---------------------------------------------------------------- */

/* The first "NAME=value" for name in a NULL-terminated list, as getenv(3)
 * would find it. Exact match on the name and the '=' so that PATH does not
 * match PATHEXT. */
static const char *parent_lookup(char *const *parent, const char *name)
{
	if (!parent)
		return NULL;
	size_t len = strlen(name);
	for (char *const *e = parent; *e; e++)
		if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
			return *e + len + 1;
	return NULL;
}

/* PWD for the sandbox: "/workspace", "/workspace/<rel>" as given, or a
 * relative path (ExecutionCommand's form) joined under /workspace. PWD is
 * informational (the adapter sets the real working directory), but it must
 * still never name a place outside the workspace. */
static int workdir_value(const char *wd, char **ret, airlock_error *err)
{
	static const char root[] = AIRLOCK_WORKSPACE_ROOT;
	const size_t rl = sizeof(root) - 1;
	const char *rel;

	if (!wd || strcmp(wd, ".") == 0 || strcmp(wd, root) == 0) {
		*ret = strdup(root);
		goto done;
	}
	if (strlen(wd) > AIRLOCK_WORKDIR_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "working_directory: longer than %d bytes", AIRLOCK_WORKDIR_MAX);
	if (wd[0] == '/') {
		if (strncmp(wd, root, rl) != 0 || wd[rl] != '/')
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "working_directory: must be under %s", root);
		rel = wd + rl + 1;
	} else {
		rel = wd;
	}
	/* Reject dot-dot components rather than normalizing them: normalizing
	 * is where traversal bugs come from (spec, WorkspaceHandle.resolve). */
	for (const char *c = rel; *c;) {
		const char *slash = strchr(c, '/');
		size_t cl = slash ? (size_t)(slash - c) : strlen(c);
		if (cl == 2 && c[0] == '.' && c[1] == '.')
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "working_directory: \"..\" is not allowed");
		c += cl;
		if (*c == '/')
			c++;
	}
	if (asprintf(ret, "%s/%s", root, rel) < 0)
		*ret = NULL;
done:
	if (!*ret)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "environment: PWD");
	return 0;
}

static int env_put(airlock_env *e, const char *name, const char *value, airlock_error *err)
{
	int r = airlock_env_add(e, name, value);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "environment: %s", name);
	return 0;
}

int airlock_envbuild(const airlock_envbuild_input *in, airlock_env *ret, airlock_error *err)
{
	if (!in || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0, "envbuild: missing input");

	/* Refused before anything is looked up: a tier-0 name in the list must
	 * not reach the parent lookup even once. */
	int r = airlock_tier1_check(in->tier1, in->n_tier1, err);
	if (r < 0)
		return r;
	if (in->bridge && (!in->bridge->socket_path || !*in->bridge->socket_path ||
	                   !in->bridge->token || !*in->bridge->token))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "bridge: the socket path and the token are both required");

	_cleanup_free_ char *pwd = NULL;
	r = workdir_value(in->working_directory, &pwd, err);
	if (r < 0)
		return r;

	/* Start empty. Nothing below reads the parent except through the tier-1
	 * names that just passed the check. */
	airlock_env e = { 0 };

	/* Tier 1: only names the operator listed; a listed name the worker does
	 * not have is simply absent. */
	for (size_t i = 0; i < in->n_tier1; i++) {
		const char *v = parent_lookup(in->parent, in->tier1[i]);
		if (!v)
			continue;
		if (strlen(v) > AIRLOCK_ENV_VALUE_MAX) {
			/* The message names the variable and never its value. */
			r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                      "tier-1 variable %s: value longer than %u bytes",
			                      in->tier1[i], AIRLOCK_ENV_VALUE_MAX);
			goto fail;
		}
		r = env_put(&e, in->tier1[i], v, err);
		if (r < 0)
			goto fail;
	}

	/* Tier 2, synthesized; added last so that it replaces a tier-1 value of
	 * the same name (airlock_env_add overwrites). */
	const struct {
		const char *name, *value;
	} tier2[] = {
		{ "HOME", AIRLOCK_WORKSPACE_ROOT },
		{ "PWD", pwd },
		{ "PATH", AIRLOCK_SANDBOX_PATH },
		{ "TMPDIR", "/tmp" },
		{ "LANG", "C.UTF-8" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(tier2); i++) {
		r = env_put(&e, tier2[i].name, tier2[i].value, err);
		if (r < 0)
			goto fail;
	}
	/* The bridge token is the one bearer token a sandbox may hold: it
	 * authorizes one orchestration turn against the worker and nothing else
	 * (spec, "Where the boundary is"). */
	if (in->bridge) {
		r = env_put(&e, AIRLOCK_BRIDGE_SOCKET_VAR, in->bridge->socket_path, err);
		if (r < 0)
			goto fail;
		r = env_put(&e, AIRLOCK_BRIDGE_TOKEN_VAR, in->bridge->token, err);
		if (r < 0)
			goto fail;
	}

	*ret = e;
	return 0;
fail:
	airlock_env_clear(&e);
	return r;
}
