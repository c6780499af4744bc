/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The three tiers' names (the specification, "The environment a sandbox
 * sees, and the three tiers"): the tier-0 list and shapes, the check of an
 * operator's tier-1 list, a variable name's validity and the proxy's
 * tier-2 names. The core's: the settings, the mechanisms and the service
 * check names with them; the builder (envbuild.c) uses them.
 */
#include "airlock/tiers.h"

#include <string.h>
#include <strings.h>

#include "airlock/caps.h"
#include "util/util.h"

/* ---- tier 0 ------------------------------------------------------------------
 * The named list. Matching is case-insensitive: a lower-case
 * "openai_api_key" is the same secret to the program that reads it. Each
 * group says why it is here. Because the environment is built, nothing here
 * is needed to keep these names out; the list exists so tests can assert
 * that none of them is ever in a built environment, and so an operator who
 * lists one in tier 1 gets a startup error instead of a silent drop. */
static const char *const tier0_named[] = {
	/* The platform's database (spec: "the database URL"). PGPASSFILE and
	 * PGSERVICEFILE point libpq at files holding the password; PGUSER and
	 * PGHOST are not credentials and are not here. */
	"DATABASE_URL",
	"PGPASSWORD",
	"PGPASSFILE",
	"PGSERVICEFILE",
	"REDIS_URL",
	"MONGODB_URI",
	"MONGO_URL",
	"AMQP_URL",
	"CELERY_BROKER_URL",
	/* Cloud instance and object-store credentials (spec: "the object store
	 * credentials", "cloud instance credentials"). The container and
	 * web-identity variables hand out a role's credentials to whoever can
	 * read them; the file variables name where a credential lives. */
	"AWS_ACCESS_KEY_ID",
	"AWS_SECRET_ACCESS_KEY",
	"AWS_SESSION_TOKEN",
	"AWS_SECURITY_TOKEN",
	"AWS_WEB_IDENTITY_TOKEN_FILE",
	"AWS_ROLE_ARN",
	"AWS_CONTAINER_CREDENTIALS_FULL_URI",
	"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
	"AWS_CONTAINER_AUTHORIZATION_TOKEN",
	"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
	"AWS_SHARED_CREDENTIALS_FILE",
	"GOOGLE_APPLICATION_CREDENTIALS",
	"GOOGLE_API_KEY",
	"CLOUDSDK_AUTH_ACCESS_TOKEN_FILE",
	"AZURE_CLIENT_SECRET",
	"AZURE_CLIENT_CERTIFICATE_PATH",
	"AZURE_CLIENT_CERTIFICATE_PASSWORD",
	"AZURE_FEDERATED_TOKEN_FILE",
	"AZURE_STORAGE_KEY",
	"AZURE_STORAGE_CONNECTION_STRING",
	"S3_ACCESS_KEY",
	"S3_SECRET_KEY",
	/* Model provider keys (spec: "every model provider key"). The shape
	 * rules catch any *_API_KEY; these are named so the list documents the
	 * providers the platform talks to. */
	"OPENAI_API_KEY",
	"ANTHROPIC_API_KEY",
	"GEMINI_API_KEY",
	"MISTRAL_API_KEY",
	"COHERE_API_KEY",
	"HF_TOKEN",
	"HUGGING_FACE_HUB_TOKEN",
	/* Source hosts and package registries: a token here pushes code. */
	"GITHUB_TOKEN",
	"GH_TOKEN",
	"GITLAB_TOKEN",
	"NPM_TOKEN",
	"PYPI_TOKEN",
	/* The platform's own service credentials (spec: "the API auth token",
	 * "the service credential the worker uses to reach the execution
	 * service"). Every AIRLOCK_ name is also caught by the prefix rule. */
	"AIRLOCK_SERVICE_TOKEN",
	"AIRLOCK_API_TOKEN",
	"API_AUTH_TOKEN",
	/* Things that are not secrets but grant one: an agent socket signs with
	 * the worker's keys, a kubeconfig or Docker endpoint drives a cluster or
	 * the host's engine (Section 28 rejects the Docker socket outright), a
	 * Kerberos cache is a live ticket. */
	"SSH_AUTH_SOCK",
	"GPG_AGENT_INFO",
	"KRB5CCNAME",
	"KUBECONFIG",
	"DOCKER_HOST",
	"DOCKER_CONFIG",
	"DOCKER_AUTH_CONFIG",
	"NETRC",
	"VAULT_TOKEN",
	"VAULT_ADDR",
	NULL,
};

/* Whole namespaces that belong to the platform. AIRLOCK_ holds the
 * service's own settings and credentials; the only AIRLOCK_ names a sandbox
 * sees are the bridge variables tier 2 synthesizes. OBJECT_STORE_ is the
 * artifact store's configuration, which the execution service itself is not
 * allowed to hold (spec, "The execution service holds nothing worth
 * stealing"). */
static const char *const tier0_prefixes[] = {
	"AIRLOCK_",
	"OBJECT_STORE_",
};

/* Shapes that mark a credential whatever the product in front of it.
 * _KEY is broad on purpose: in an environment a *_KEY is almost always a
 * key to something, and the cost of a false positive is a startup error an
 * operator reads, while the cost of a false negative is a leaked key.
 * _DSN carries a key inside it (Sentry), a *_WEBHOOK_URL is its own
 * credential, and _PASS is the short spelling of _PASSWORD. */
static const char *const tier0_suffixes[] = {
	"_API_KEY",       "_APIKEY",   "_SECRET",       "_SECRET_KEY",        "_TOKEN",
	"_PASSWORD",      "_PASSWD",   "_PASS",         "_CREDENTIALS",       "_PRIVATE_KEY",
	"_KEY",           "_DSN",      "_DATABASE_URL", "_CONNECTION_STRING", "_WEBHOOK_URL",
};

/* Anywhere in the name. TOKEN also matches TOKENIZERS_PARALLELISM, which is
 * benign; a refused benign name is a startup error with the name in it, and
 * that trade is the right way round. */
static const char *const tier0_infixes[] = {
	"SECRET", "PASSWORD", "PASSWD", "TOKEN", "CREDENTIAL", "PRIVATE_KEY", "API_KEY", "APIKEY",
	"ACCESS_KEY",
};

const char *const *airlock_tier0_names(void)
{
	return tier0_named;
}

bool airlock_tier0_name(const char *name)
{
	if (!name)
		return false;
	size_t len = strlen(name);
	for (const char *const *n = tier0_named; *n; n++)
		if (strcasecmp(*n, name) == 0)
			return true;
	for (size_t i = 0; i < ARRAY_SIZE(tier0_prefixes); i++)
		if (strncasecmp(name, tier0_prefixes[i], strlen(tier0_prefixes[i])) == 0)
			return true;
	for (size_t i = 0; i < ARRAY_SIZE(tier0_suffixes); i++) {
		size_t sl = strlen(tier0_suffixes[i]);
		if (len >= sl && strcasecmp(name + len - sl, tier0_suffixes[i]) == 0)
			return true;
	}
	for (size_t i = 0; i < ARRAY_SIZE(tier0_infixes); i++)
		if (strcasestr(name, tier0_infixes[i]))
			return true;
	return false;
}

const char *const airlock_sandbox_proxy_vars[AIRLOCK_SANDBOX_PROXY_VARS_N] = {
	"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
};

bool airlock_sandbox_proxy_var(const char *name)
{
	for (size_t i = 0; i < AIRLOCK_SANDBOX_PROXY_VARS_N; i++)
		if (strcmp(name, airlock_sandbox_proxy_vars[i]) == 0)
			return true;
	return false;
}

bool airlock_env_name_valid(const char *name)
{
	if (!name)
		return false;
	size_t n = 0;
	for (const char *p = name; *p; p++, n++) {
		char c = *p;
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
		bool digit = c >= '0' && c <= '9';
		if (n >= AIRLOCK_ENV_NAME_MAX || !(alpha || (n > 0 && digit)))
			return false;
	}
	return n > 0;
}

/* A name for a message: a valid one as is, anything else escaped and cut,
 * because an invalid name can hold any bytes at all. */
static const char *name_for_message(char *buf, size_t size, const char *name)
{
	if (!name)
		return "(null)";
	return util_escape(buf, size, name, strlen(name));
}

int airlock_tier1_check(const char *const *names, size_t n, airlock_error *err)
{
	char q[96];
	if (n > 0 && !names)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "tier-1 list: missing");
	if (n > AIRLOCK_TIER1_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "tier-1 list: more than %d names",
		                         AIRLOCK_TIER1_MAX);
	for (size_t i = 0; i < n; i++) {
		if (!airlock_env_name_valid(names[i]))
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "tier-1 name \"%s\" is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*, at most %d)",
			                         name_for_message(q, sizeof(q), names[i]), AIRLOCK_ENV_NAME_MAX);
		if (airlock_tier0_name(names[i]))
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "tier-1 name \"%s\" is a tier-0 (credential) name: platform and provider credentials never reach a sandbox, so it cannot be passed through",
			                         names[i]);
	}
	return 0;
}

