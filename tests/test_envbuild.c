/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The environment a sandbox sees is built, not filtered
 * (the specification, "The environment a sandbox sees, and the three
 * tiers"). Example tests pin tier 2, the bridge, and tier-1 copying; the
 * property test runs the builder over thousands of random configurations
 * with a worker environment full of realistic credentials and checks the
 * result against an independent oracle.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "airlock/envbuild.h"
#include "airlock/settings.h"

static const char *get(const airlock_env *e, const char *name)
{
	return airlock_env_get(e, name);
}

static void expect_tier2(const airlock_env *e, const char *pwd)
{
	cr_expect_str_eq(get(e, "HOME"), "/workspace");
	cr_expect_str_eq(get(e, "PWD"), pwd);
	cr_expect_str_eq(get(e, "PATH"), AIRLOCK_SANDBOX_PATH);
	cr_expect_str_eq(get(e, "TMPDIR"), "/tmp");
	cr_expect_str_eq(get(e, "LANG"), "C.UTF-8");
}

static char *parent_env[] = {
	(char *)"HOME=/root",
	(char *)"PATH=/usr/local/bin:/usr/bin:/home/worker/bin",
	(char *)"LANG=en_US.UTF-8",
	(char *)"HTTP_PROXY=http://proxy.corp.example:3128",
	(char *)"NO_PROXY=localhost,127.0.0.1",
	(char *)"TZ=UTC",
	(char *)"TZ=Europe/Paris", /* a second occurrence: getenv would not see it */
	(char *)"TZX=not-tz",
	(char *)"NOEQUALS",
	(char *)"DATABASE_URL=postgres://app:hunter2hunter2@db.internal/prod",
	(char *)"OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
	NULL,
};

/* ---- tier 2 ------------------------------------------------------------- */

Test(envbuild, tier2_exact_contents)
{
	airlock_envbuild_input in = { .parent = parent_env };
	airlock_env e = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_envbuild(&in, &e, &err), 0, "%s", err.message);
	cr_expect_eq(e.n, 5, "tier 2 alone is five variables, got %zu", e.n);
	expect_tier2(&e, "/workspace");
	cr_expect_null(get(&e, AIRLOCK_BRIDGE_SOCKET_VAR));
	cr_expect_null(get(&e, AIRLOCK_BRIDGE_TOKEN_VAR));
	airlock_env_clear(&e);

	/* Not even a NULL parent changes tier 2. */
	airlock_envbuild_input empty = { 0 };
	cr_assert_eq(airlock_envbuild(&empty, &e, &err), 0, "%s", err.message);
	cr_expect_eq(e.n, 5);
	expect_tier2(&e, "/workspace");
	airlock_env_clear(&e);
}

Test(envbuild, working_directory)
{
	static const struct {
		const char *in, *pwd;
	} ok[] = {
		{ NULL, "/workspace" },
		{ ".", "/workspace" },
		{ "/workspace", "/workspace" },
		{ "/workspace/src", "/workspace/src" },
		{ "/workspace/a/b", "/workspace/a/b" },
		{ "src/app", "/workspace/src/app" },
		{ "..data", "/workspace/..data" },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		airlock_envbuild_input in = { .working_directory = ok[i].in };
		airlock_env e = { 0 };
		airlock_error err = { 0 };
		cr_assert_eq(airlock_envbuild(&in, &e, &err), 0, "[%s] %s", ok[i].in, err.message);
		cr_expect_str_eq(get(&e, "PWD"), ok[i].pwd);
		airlock_env_clear(&e);
	}
	static const char *const bad[] = { "/etc", "/workspacex", "/workspace/../etc", "..", "a/../../b",
		                           "/", "/tmp/workspace" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		airlock_envbuild_input in = { .working_directory = bad[i] };
		airlock_env e = { 0 };
		airlock_error err = { 0 };
		cr_expect_eq(airlock_envbuild(&in, &e, &err), airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED),
		             "[%s]", bad[i]);
		cr_expect_eq(e.n, 0);
		cr_expect_null(e.vars);
	}
}

Test(envbuild, bridge_vars_only_with_bridge)
{
	airlock_bridge_endpoint bridge = { .socket_path = (char *)"/run/airlock/bridge.sock",
		                           .token = (char *)"one-time-0123456789" };
	airlock_envbuild_input in = { .parent = parent_env, .bridge = &bridge };
	airlock_env e = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_envbuild(&in, &e, &err), 0, "%s", err.message);
	cr_expect_eq(e.n, 7);
	expect_tier2(&e, "/workspace");
	cr_expect_str_eq(get(&e, AIRLOCK_BRIDGE_SOCKET_VAR), "/run/airlock/bridge.sock");
	cr_expect_str_eq(get(&e, AIRLOCK_BRIDGE_TOKEN_VAR), "one-time-0123456789");
	airlock_env_clear(&e);

	/* A worker that happens to have bridge variables of its own does not
	 * pass them on: without a bridge the names are absent. */
	char *with_bridge_vars[] = { (char *)"AIRLOCK_BRIDGE_TOKEN=worker-side-token",
		                     (char *)"AIRLOCK_BRIDGE_SOCKET=/host/sock", NULL };
	airlock_envbuild_input nob = { .parent = with_bridge_vars };
	cr_assert_eq(airlock_envbuild(&nob, &e, &err), 0);
	cr_expect_null(get(&e, AIRLOCK_BRIDGE_SOCKET_VAR));
	cr_expect_null(get(&e, AIRLOCK_BRIDGE_TOKEN_VAR));
	airlock_env_clear(&e);

	/* A bridge with a part missing is refused rather than half-present. */
	airlock_bridge_endpoint half = { .socket_path = (char *)"/run/airlock/bridge.sock" };
	in.bridge = &half;
	cr_expect_eq(airlock_envbuild(&in, &e, &err), airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
	cr_expect_eq(e.n, 0);
}

/* ---- tier 1 ------------------------------------------------------------- */

Test(envbuild, tier1_copies_only_listed_names)
{
	const char *tier1[] = { "HTTP_PROXY", "TZ", "NOT_IN_PARENT", "NOEQUALS" };
	airlock_envbuild_input in = { .tier1 = tier1, .n_tier1 = 4, .parent = parent_env };
	airlock_env e = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_envbuild(&in, &e, &err), 0, "%s", err.message);
	cr_expect_str_eq(get(&e, "HTTP_PROXY"), "http://proxy.corp.example:3128");
	cr_expect_str_eq(get(&e, "TZ"), "UTC", "first occurrence wins");
	cr_expect_null(get(&e, "NOT_IN_PARENT"));
	cr_expect_null(get(&e, "NOEQUALS"), "an entry without '=' is not a variable");
	cr_expect_null(get(&e, "NO_PROXY"), "not listed, not copied");
	cr_expect_null(get(&e, "TZX"));
	cr_expect_null(get(&e, "DATABASE_URL"));
	cr_expect_null(get(&e, "OPENAI_API_KEY"));
	cr_expect_eq(e.n, 5 + 2);
	airlock_env_clear(&e);
}

Test(envbuild, tier2_overrides_tier1)
{
	const char *tier1[] = { "HOME", "PATH", "LANG", "PWD", "TMPDIR", "TZ" };
	char *parent[] = { (char *)"HOME=/root", (char *)"PATH=/opt/evil/bin", (char *)"LANG=fr_FR",
		           (char *)"PWD=/home/worker", (char *)"TMPDIR=/var/tmp", (char *)"TZ=UTC", NULL };
	airlock_envbuild_input in = { .tier1 = tier1, .n_tier1 = 6, .parent = parent,
		                      .working_directory = "/workspace/w" };
	airlock_env e = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_envbuild(&in, &e, &err), 0, "%s", err.message);
	expect_tier2(&e, "/workspace/w");
	cr_expect_str_eq(get(&e, "TZ"), "UTC");
	cr_expect_eq(e.n, 6, "no duplicates: %zu", e.n);
	for (size_t i = 0; i < e.n; i++)
		for (size_t j = 0; j < i; j++)
			cr_expect_str_neq(e.vars[i].name, e.vars[j].name);
	airlock_env_clear(&e);
}

Test(envbuild, tier0_in_tier1_refused)
{
	const char *const *named = airlock_tier0_names();
	size_t count = 0;
	for (const char *const *n = named; *n; n++, count++) {
		const char *tier1[] = { "TZ", *n };
		airlock_envbuild_input in = { .tier1 = tier1, .n_tier1 = 2, .parent = parent_env };
		airlock_env e = { 0 };
		airlock_error err = { 0 };
		cr_expect_eq(airlock_envbuild(&in, &e, &err), airlock_errcode(AIRLOCK_ERR_CONFIG), "[%s]", *n);
		cr_expect(strstr(err.message, *n) != NULL, "%s", err.message);
		cr_expect_eq(e.n, 0);
		cr_expect_null(e.vars);
	}
	cr_expect_geq(count, 26);

	/* Invalid names are refused the same way. */
	static const char *const invalid[] = { "", "1ABC", "A-B", "A=B", "A B", "\xc3\xa9" };
	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
		const char *tier1[] = { invalid[i] };
		airlock_envbuild_input in = { .tier1 = tier1, .n_tier1 = 1, .parent = parent_env };
		airlock_env e = { 0 };
		airlock_error err = { 0 };
		cr_expect_eq(airlock_envbuild(&in, &e, &err), airlock_errcode(AIRLOCK_ERR_CONFIG), "[%s]", invalid[i]);
	}
	const char *nul[] = { NULL };
	airlock_envbuild_input in = { .tier1 = nul, .n_tier1 = 1 };
	airlock_env e = { 0 };
	cr_expect_eq(airlock_envbuild(&in, &e, NULL), airlock_errcode(AIRLOCK_ERR_CONFIG));
}

Test(envbuild, tier0_names_and_shapes)
{
	/* The brief's named list, every one. */
	static const char *const must[] = {
		"DATABASE_URL", "PGPASSWORD", "REDIS_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
		"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "MISTRAL_API_KEY", "COHERE_API_KEY",
		"HF_TOKEN", "GITHUB_TOKEN", "S3_ACCESS_KEY", "S3_SECRET_KEY", "AIRLOCK_SERVICE_TOKEN",
		"AIRLOCK_API_TOKEN", "API_AUTH_TOKEN", "SSH_AUTH_SOCK", "KUBECONFIG", "VAULT_TOKEN",
	};
	for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++) {
		cr_expect(airlock_tier0_name(must[i]), "%s", must[i]);
		bool listed = false;
		for (const char *const *n = airlock_tier0_names(); *n; n++)
			listed = listed || strcmp(*n, must[i]) == 0;
		cr_expect(listed, "%s is not on the named list", must[i]);
	}
	/* Shapes, in any case. */
	static const char *const shaped[] = {
		"GROQ_API_KEY", "MY_APIKEY", "STRIPE_SECRET", "DJANGO_SECRET_KEY", "SLACK_BOT_TOKEN",
		"SMTP_PASSWORD", "LDAP_PASSWD", "DB_PASS", "SERVICE_CREDENTIALS", "JWT_PRIVATE_KEY",
		"SIGNING_KEY", "SENTRY_DSN", "ANALYTICS_DATABASE_URL", "SLACK_WEBHOOK_URL",
		"CLIENT_SECRET_VALUE", "PASSWORD", "TOKEN", "openai_api_key", "Github_Token",
		"OBJECT_STORE_BUCKET", "AIRLOCK_ANYTHING", "MY_ACCESS_KEY_ID", "X_CREDENTIAL_FILE",
	};
	for (size_t i = 0; i < sizeof(shaped) / sizeof(shaped[0]); i++)
		cr_expect(airlock_tier0_name(shaped[i]), "%s should be tier 0", shaped[i]);
	/* Ordinary configuration is not. */
	static const char *const benign[] = {
		"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "LANG", "LC_ALL", "TZ", "TERM", "HOME", "PATH",
		"PYTHONUNBUFFERED", "PIP_INDEX_URL", "PGHOST", "PGUSER", "PGDATABASE", "AWS_REGION",
		"AWS_DEFAULT_REGION", "CI", "DEBIAN_FRONTEND", "NODE_ENV", "RUST_LOG", "KEYBOARD",
		"MONKEY", "BYPASS_CACHE",
	};
	for (size_t i = 0; i < sizeof(benign) / sizeof(benign[0]); i++)
		cr_expect_not(airlock_tier0_name(benign[i]), "%s should not be tier 0", benign[i]);
	cr_expect_not(airlock_tier0_name(NULL));
}

Test(envbuild, env_name_valid)
{
	cr_expect(airlock_env_name_valid("A"));
	cr_expect(airlock_env_name_valid("_"));
	cr_expect(airlock_env_name_valid("a_b9"));
	char max[129];
	memset(max, 'A', 128);
	max[128] = 0;
	cr_expect(airlock_env_name_valid(max));
	char over[130];
	memset(over, 'A', 129);
	over[129] = 0;
	cr_expect_not(airlock_env_name_valid(over));
	cr_expect_not(airlock_env_name_valid(""));
	cr_expect_not(airlock_env_name_valid(NULL));
	cr_expect_not(airlock_env_name_valid("9A"));
	cr_expect_not(airlock_env_name_valid("A-B"));
	cr_expect_not(airlock_env_name_valid("A=B"));
	cr_expect_not(airlock_env_name_valid("A.B"));
	cr_expect_not(airlock_env_name_valid("A\nB"));
}

Test(envbuild, tier1_check)
{
	const char *ok[] = { "TZ", "HTTP_PROXY" };
	cr_expect_eq(airlock_tier1_check(ok, 2, NULL), 0);
	cr_expect_eq(airlock_tier1_check(NULL, 0, NULL), 0);
	const char *bad[] = { "TZ", "VAULT_TOKEN" };
	airlock_error err = { 0 };
	cr_expect_eq(airlock_tier1_check(bad, 2, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_expect(strstr(err.message, "VAULT_TOKEN") != NULL);
	cr_expect_eq(airlock_tier1_check(NULL, 1, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
}

/* ---- the property --------------------------------------------------------------- */

/* splitmix64: small, good enough, and reproducible from one seed. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}
static size_t rndn(size_t n)
{
	return (size_t)(rnd() % n);
}

static void rand_chars(char *out, size_t n, const char *alphabet)
{
	size_t al = strlen(alphabet);
	for (size_t i = 0; i < n; i++)
		out[i] = alphabet[rndn(al)];
	out[n] = 0;
}

#define ALNUM "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
#define B64 ALNUM "+/"
#define B64URL ALNUM "-_"
#define LOWER "abcdefghijklmnopqrstuvwxyz"

/* One realistic-looking credential value. None contains ',' or '~', which
 * every random benign value does at least every four characters: so no
 * window of nine characters can be shared by accident. */
static char *make_credential(void)
{
	char a[128], b[128], c[128];
	char *v = NULL;
	int r = -1;
	switch (rndn(12)) {
	case 0:
		rand_chars(a, 6, LOWER);
		rand_chars(b, 18, ALNUM "!#$%^&*");
		rand_chars(c, 6, LOWER);
		r = asprintf(&v, "postgres://%s:%s@db%zu.internal:5432/%s?sslmode=require", a, b, rndn(10), c);
		break;
	case 1:
		rand_chars(a, 24, ALNUM);
		r = asprintf(&v, "redis://:%s@cache%zu.internal:6379/0", a, rndn(10));
		break;
	case 2:
		rand_chars(a, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567");
		r = asprintf(&v, "AKIA%s", a);
		break;
	case 3:
		rand_chars(a, 40, B64);
		r = asprintf(&v, "%s", a);
		break;
	case 4:
		rand_chars(a, 48, ALNUM);
		r = asprintf(&v, "sk-%s", a);
		break;
	case 5:
		rand_chars(a, 93, B64URL);
		r = asprintf(&v, "sk-ant-api03-%sAA", a);
		break;
	case 6:
		rand_chars(a, 64, B64URL);
		r = asprintf(&v, "sk-proj-%s", a);
		break;
	case 7:
		rand_chars(a, 36, ALNUM);
		r = asprintf(&v, "ghp_%s", a);
		break;
	case 8:
		rand_chars(a, 43, B64URL);
		r = asprintf(&v, "Bearer %s", a);
		break;
	case 9:
		rand_chars(a, 90, B64URL);
		rand_chars(b, 43, B64URL);
		r = asprintf(&v, "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.%s.%s", a, b);
		break;
	case 10: {
		char body[8 * 65 + 1];
		for (int l = 0; l < 8; l++) {
			rand_chars(body + l * 65, 64, B64);
			body[l * 65 + 64] = '\n';
		}
		body[8 * 65] = 0;
		r = asprintf(&v, "-----BEGIN %sPRIVATE KEY-----\n%s-----END %sPRIVATE KEY-----\n",
		             rndn(2) ? "RSA " : "", body, rndn(2) ? "RSA " : "");
		break;
	}
	default:
		rand_chars(a, 28, ALNUM);
		r = asprintf(&v, "hvs.%s", a);
		break;
	}
	cr_assert_geq(r, 0);
	return v;
}

static void make_name(char *out, size_t max_len)
{
	/* [A-Za-z_][A-Za-z0-9_]*: mostly upper case, as real names are. */
	size_t n = 1 + rndn(max_len);
	bool lower = rndn(8) == 0;
	const char *first = lower ? LOWER "_" : "ABCDEFGHIJKLMNOPQRSTUVWXYZ_";
	const char *rest = lower ? LOWER "0123456789_" : "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
	rand_chars(out, 1, first);
	rand_chars(out + 1, n - 1, rest);
}

static const char *const benign_names[] = {
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "LANG", "LC_ALL", "TZ", "TERM", "PYTHONUNBUFFERED",
	"PIP_INDEX_URL", "PGHOST", "PGUSER", "AWS_REGION", "CI", "DEBIAN_FRONTEND", "NODE_ENV", "RUST_LOG",
	"HOME", "PATH", "PWD", "TMPDIR", "USER", "SHELL", "EDITOR", "PAGER",
};

static const char *const benign_values[] = {
	"http://proxy.corp.example:3128", "localhost,127.0.0.1,.corp.example", "UTC", "en_US.UTF-8",
	"xterm-256color", "1", "noninteractive", "production", "info,hyper=warn", "/bin/bash", "",
};

static char *make_benign_value(void)
{
	if (rndn(3) == 0)
		return strdup(benign_values[rndn(sizeof(benign_values) / sizeof(benign_values[0]))]);
	size_t n = 1 + rndn(40);
	char *v = malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		v[i] = (i % 4 == 3) ? ",~"[rndn(2)] : LOWER "0123456789./:-"[rndn(40)];
	v[n] = 0;
	return v;
}

typedef struct pool {
	char **names;  /* tier-0 names */
	char **values; /* their credentials */
	size_t n;
	/* 9-byte windows of every credential, hashed, for the substring check. */
	uint64_t *grams;
	size_t gram_cap;
} pool;

#define WINDOW 9 /* "no substring longer than 8 characters" */

static uint64_t gram_hash(const char *p)
{
	uint64_t h = 1469598103934665603ULL;
	for (int i = 0; i < WINDOW; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
	return h | 1; /* 0 marks an empty slot */
}

static void gram_add(pool *p, uint64_t h)
{
	size_t i = h & (p->gram_cap - 1);
	while (p->grams[i] && p->grams[i] != h)
		i = (i + 1) & (p->gram_cap - 1);
	p->grams[i] = h;
}

static bool gram_has(const pool *p, uint64_t h)
{
	size_t i = h & (p->gram_cap - 1);
	while (p->grams[i]) {
		if (p->grams[i] == h)
			return true;
		i = (i + 1) & (p->gram_cap - 1);
	}
	return false;
}

static void pool_add(pool *p, char *name, char *value)
{
	cr_assert(airlock_tier0_name(name), "test bug: %s is not tier 0", name);
	p->names[p->n] = name;
	p->values[p->n] = value;
	p->n++;
	size_t len = strlen(value);
	for (size_t i = 0; i + WINDOW <= len; i++)
		gram_add(p, gram_hash(value + i));
}

static const char *const shape_suffixes[] = { "_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD",
	                                      "_PRIVATE_KEY", "_CREDENTIALS", "_SECRET_KEY", "_PASSWD" };

static void pool_fill(pool *p)
{
	size_t named = 0;
	for (const char *const *n = airlock_tier0_names(); *n; n++)
		named++;
	size_t cap = named + 32;
	p->names = calloc(cap, sizeof(char *));
	p->values = calloc(cap, sizeof(char *));
	p->n = 0;
	p->gram_cap = 1 << 16;
	p->grams = calloc(p->gram_cap, sizeof(uint64_t));
	for (const char *const *n = airlock_tier0_names(); *n; n++)
		pool_add(p, strdup(*n), make_credential());
	/* Names that are tier 0 by shape only, some in lower case. */
	for (int i = 0; i < 24; i++) {
		char base[16], name[64];
		rand_chars(base, 3 + rndn(8), "ABCDEFGHIJKLMNOPQRSTUVWXYZ");
		snprintf(name, sizeof(name), "%s%s", base,
		         shape_suffixes[rndn(sizeof(shape_suffixes) / sizeof(shape_suffixes[0]))]);
		if (rndn(4) == 0)
			for (char *c = name; *c; c++)
				*c = (char)((*c >= 'A' && *c <= 'Z') ? *c + 32 : *c);
		pool_add(p, strdup(name), make_credential());
	}
	/* The worker's own idea of the bridge names: tier 0 by prefix, and
	 * never what the sandbox's tier-2 bridge variables carry. */
	pool_add(p, strdup(AIRLOCK_BRIDGE_TOKEN_VAR), make_credential());
	pool_add(p, strdup(AIRLOCK_BRIDGE_SOCKET_VAR), make_credential());
}

static void pool_clear(pool *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->names[i]);
		free(p->values[i]);
	}
	free(p->names);
	free(p->values);
	free(p->grams);
	memset(p, 0, sizeof(*p));
}

/* The first credential sharing a window with s, or NULL. */
static const char *leaked_window(const pool *p, const char *s)
{
	size_t len = strlen(s);
	for (size_t i = 0; i + WINDOW <= len; i++) {
		if (!gram_has(p, gram_hash(s + i)))
			continue;
		/* Confirm against the real bytes: the hash may collide. */
		for (size_t k = 0; k < p->n; k++)
			if (memmem(p->values[k], strlen(p->values[k]), s + i, WINDOW))
				return p->values[k];
	}
	return NULL;
}

static uint64_t test_seed(void)
{
	const char *env = getenv("AIRLOCK_TEST_SEED");
	if (env && *env)
		return strtoull(env, NULL, 0);
	uint64_t s = 0;
	if (getrandom(&s, sizeof(s), 0) != sizeof(s))
		s = (uint64_t)time(NULL);
	return s;
}

#define ITERATIONS 12000
#define POOL_EVERY 64

Test(envbuild, property_no_credential_reaches_the_sandbox, .timeout = 110)
{
	uint64_t seed = test_seed();
	rng_state = seed;
	fprintf(stderr, "envbuild property: seed %" PRIu64 " (replay with AIRLOCK_TEST_SEED=%" PRIu64 ")\n",
	        seed, seed);

	pool p = { 0 };
	size_t built = 0, refused = 0, copied = 0;
	for (int it = 0; it < ITERATIONS; it++) {
		if (it % POOL_EVERY == 0) {
			pool_clear(&p);
			pool_fill(&p);
		}

		/* The worker's environment: every credential, plus benign noise,
		 * in a random order, some names twice. */
		size_t n_benign = rndn(40);
		size_t total = p.n + n_benign;
		char **parent = calloc(total + 1, sizeof(char *));
		char **benign_name = calloc(n_benign + 1, sizeof(char *));
		for (size_t i = 0; i < p.n; i++)
			cr_assert_geq(asprintf(&parent[i], "%s=%s", p.names[i], p.values[i]), 0);
		for (size_t i = 0; i < n_benign; i++) {
			char name[48];
			do {
				if (rndn(2))
					snprintf(name, sizeof(name), "%s",
					         benign_names[rndn(sizeof(benign_names) / sizeof(benign_names[0]))]);
				else
					make_name(name, 24);
			} while (airlock_tier0_name(name));
			benign_name[i] = strdup(name);
			char *value = make_benign_value();
			cr_assert_geq(asprintf(&parent[p.n + i], "%s=%s", name, value), 0);
			free(value);
		}
		for (size_t i = total; i > 1; i--) {
			size_t j = rndn(i);
			char *t = parent[i - 1];
			parent[i - 1] = parent[j];
			parent[j] = t;
		}

		/* The operator's tier-1 list: benign names the worker has, names
		 * it does not, random valid names; never tier 0, except in the
		 * iterations that check the refusal. */
		size_t n_tier1 = rndn(12);
		const char **tier1 = calloc(n_tier1 + 2, sizeof(char *));
		char (*scratch)[48] = calloc(n_tier1 + 2, sizeof(*scratch));
		for (size_t i = 0; i < n_tier1; i++) {
			switch (rndn(3)) {
			case 0:
				if (n_benign) {
					tier1[i] = benign_name[rndn(n_benign)];
					break;
				}
				/* fallthrough */
			case 1:
				tier1[i] = benign_names[rndn(sizeof(benign_names) / sizeof(benign_names[0]))];
				break;
			default:
				do
					make_name(scratch[i], 24);
				while (airlock_tier0_name(scratch[i]));
				tier1[i] = scratch[i];
				break;
			}
		}
		bool inject_tier0 = rndn(10) == 0;
		if (inject_tier0) {
			size_t at = rndn(n_tier1 + 1);
			tier1[n_tier1] = tier1[at];
			tier1[at] = p.names[rndn(p.n)];
			n_tier1++;
		}

		airlock_bridge_endpoint bridge = { 0 };
		char btoken[40];
		bool with_bridge = rndn(2);
		if (with_bridge) {
			rand_chars(btoken, 32, "0123456789abcdef");
			bridge.socket_path = (char *)"/run/airlock/bridge.sock";
			bridge.token = btoken;
		}
		static const char *const wds[] = { NULL, ".", "/workspace", "/workspace/src", "build/out" };
		const char *wd = wds[rndn(sizeof(wds) / sizeof(wds[0]))];

		airlock_envbuild_input in = {
			.tier1 = tier1, .n_tier1 = n_tier1, .parent = parent,
			.working_directory = wd, .bridge = with_bridge ? &bridge : NULL,
		};
		airlock_env e = { 0 };
		airlock_error err = { 0 };
		int r = airlock_envbuild(&in, &e, &err);

		if (inject_tier0) {
			cr_assert_eq(r, airlock_errcode(AIRLOCK_ERR_CONFIG),
			             "seed %" PRIu64 " iteration %d: a tier-0 name in tier 1 was accepted", seed, it);
			cr_assert_eq(e.n, 0);
			cr_assert_null(e.vars);
			cr_assert_null(leaked_window(&p, err.message), "a credential in the error message");
			refused++;
		} else {
			cr_assert_eq(r, 0, "seed %" PRIu64 " iteration %d: %s", seed, it, err.message);
			built++;
			for (size_t k = 0; k < e.n; k++) {
				const char *name = e.vars[k].name, *value = e.vars[k].value;
				/* The only tier-0 names a sandbox sees are the two
				 * bridge variables tier 2 synthesizes, carrying the
				 * turn's own values. */
				if (airlock_tier0_name(name)) {
					bool bridge_var = with_bridge &&
					                  ((strcmp(name, AIRLOCK_BRIDGE_TOKEN_VAR) == 0 &&
					                    strcmp(value, btoken) == 0) ||
					                   (strcmp(name, AIRLOCK_BRIDGE_SOCKET_VAR) == 0 &&
					                    strcmp(value, bridge.socket_path) == 0));
					cr_assert(bridge_var, "seed %" PRIu64 " iteration %d: tier-0 name %s built",
					          seed, it, name);
				}
				const char *leak = leaked_window(&p, name);
				cr_assert_null(leak, "seed %" PRIu64 " iteration %d: credential in a name", seed, it);
				leak = leaked_window(&p, value);
				cr_assert_null(leak, "seed %" PRIu64 " iteration %d: credential text in %s=%s (from %s)", seed,
				               it, name, value, leak);
			}
			/* And the oracle: exactly tier 2, plus listed names the parent
			 * has (first occurrence), tier 2 winning. */
			static const char *const t2[] = { "HOME", "PWD", "PATH", "TMPDIR", "LANG" };
			size_t want = 5 + (with_bridge ? 2 : 0);
			for (size_t i = 0; i < n_tier1; i++) {
				bool dup = false, is_t2 = false;
				for (size_t j = 0; j < i; j++)
					dup = dup || strcmp(tier1[i], tier1[j]) == 0;
				for (size_t j = 0; j < 5; j++)
					is_t2 = is_t2 || strcmp(tier1[i], t2[j]) == 0;
				if (dup || is_t2)
					continue;
				const char *pv = NULL;
				size_t nl = strlen(tier1[i]);
				for (char **q = parent; *q && !pv; q++)
					if (strncmp(*q, tier1[i], nl) == 0 && (*q)[nl] == '=')
						pv = *q + nl + 1;
				const char *got = airlock_env_get(&e, tier1[i]);
				if (pv) {
					want++;
					copied++;
					cr_assert_not_null(got, "listed %s missing", tier1[i]);
					cr_assert_str_eq(got, pv);
				} else {
					cr_assert_null(got, "%s built from nowhere", tier1[i]);
				}
			}
			cr_assert_eq(e.n, want, "seed %" PRIu64 " iteration %d: %zu variables, want %zu", seed,
			             it, e.n, want);
			cr_assert_str_eq(airlock_env_get(&e, "HOME"), "/workspace");
			cr_assert_str_eq(airlock_env_get(&e, "PATH"), AIRLOCK_SANDBOX_PATH);
		}
		airlock_env_clear(&e);

		for (size_t i = 0; i < total; i++)
			free(parent[i]);
		free(parent);
		for (size_t i = 0; i < n_benign; i++)
			free(benign_name[i]);
		free(benign_name);
		free(tier1);
		free(scratch);
	}
	pool_clear(&p);
	fprintf(stderr, "envbuild property: %zu built, %zu refused, %zu tier-1 copies checked\n", built,
	        refused, copied);
	cr_expect_geq(built + refused, 10000);
	cr_expect_gt(refused, 0);
	cr_expect_gt(copied, 0);
}
