/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SecretValue and the CredentialResolver port (the specification,
 * "CredentialResolver"): the printable form is always the redaction marker,
 * serialization refuses, the sandbox resolver refuses every reference, and
 * the worker-side broker resolves what it was given and nothing else.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/port/credentials.h"
#include "airlock/secret.h"

static const char pem[] = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n";

Test(secret, str_is_redacted)
{
	airlock_secret *s = NULL;
	cr_assert_eq(airlock_secret_new("sk-ant-api03-abcdef", 19, &s, NULL), 0);
	cr_expect_str_eq(airlock_secret_str(s), "[REDACTED]");
	cr_expect_str_eq(airlock_secret_str(s), AIRLOCK_SECRET_REDACTED);
	cr_expect_str_eq(airlock_secret_str(NULL), AIRLOCK_SECRET_REDACTED);
	/* What a careless log line would print. */
	char line[128];
	snprintf(line, sizeof(line), "key=%s", airlock_secret_str(s));
	cr_expect(strstr(line, "sk-ant") == NULL);
	airlock_secret_free(s);
}

Test(secret, to_json_refuses)
{
	airlock_secret *s = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_secret_new("hunter2", 7, &s, NULL), 0);
	cr_expect_null(airlock_secret_to_json(s, &err));
	cr_expect_eq(err.cls, AIRLOCK_ERR_EXECUTION_REJECTED);
	cr_expect_str_eq(err.message, "a SecretValue cannot be serialized");
	cr_expect(strstr(err.message, "hunter2") == NULL);
	airlock_error_clear(&err);
	cr_expect_null(airlock_secret_to_json(NULL, &err));
	cr_expect_eq(err.cls, AIRLOCK_ERR_EXECUTION_REJECTED);
	airlock_secret_free(s);
}

Test(secret, reveal_returns_bytes)
{
	/* Binary bytes, an embedded NUL included, come back exactly. */
	const unsigned char raw[] = { 0x00, 0x01, 'a', 0xff, 0x00, 'z' };
	airlock_secret *s = NULL;
	cr_assert_eq(airlock_secret_new(raw, sizeof(raw), &s, NULL), 0);
	size_t len = 0;
	const unsigned char *p = airlock_secret_reveal(s, &len);
	cr_assert_not_null(p);
	cr_expect_eq(len, sizeof(raw));
	cr_expect_eq(memcmp(p, raw, sizeof(raw)), 0);
	airlock_secret_free(s);

	cr_assert_eq(airlock_secret_new(pem, strlen(pem), &s, NULL), 0);
	p = airlock_secret_reveal(s, &len);
	cr_expect_eq(len, strlen(pem));
	cr_expect_str_eq((const char *)p, pem); /* NUL-terminated for convenience */
	airlock_secret_free(s);

	cr_assert_eq(airlock_secret_new(NULL, 0, &s, NULL), 0);
	p = airlock_secret_reveal(s, &len);
	cr_expect_eq(len, 0);
	cr_expect_not_null(p);
	airlock_secret_free(s);

	cr_expect_null(airlock_secret_reveal(NULL, &len));
	cr_expect_eq(len, 0);
	airlock_secret_free(NULL);
}

Test(secret, bad_inputs)
{
	airlock_secret *s = (airlock_secret *)0x1;
	airlock_error err = { 0 };
	cr_expect_lt(airlock_secret_new(NULL, 5, &s, &err), 0);
	cr_expect_eq(s, (airlock_secret *)0x1, "ret written on failure");
	static char big[(1u << 20) + 1];
	cr_expect_eq(airlock_secret_new(big, sizeof(big), &s, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED));
}

/* Best effort, but where the kernel has MADV_WIPEONFORK a forked child must
 * not see the bytes. */
Test(secret, child_does_not_inherit_bytes)
{
	airlock_secret *s = NULL;
	cr_assert_eq(airlock_secret_new("AKIAIOSFODNN7EXAMPLE", 20, &s, NULL), 0);
	size_t len;
	const char *p = airlock_secret_reveal(s, &len);
	pid_t pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0)
		_exit(memcmp(p, "AKIA", 4) == 0 ? 1 : 0);
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st));
	if (WEXITSTATUS(st) != 0)
		cr_log_warn("kernel lacks MADV_WIPEONFORK: a forked child saw the secret");
	cr_expect_eq(memcmp(p, "AKIA", 4), 0, "the parent keeps its bytes");
	airlock_secret_free(s);
}

/* ---- resolvers ------------------------------------------------------------- */

static const char *const references[] = {
	"database", "openai", "tenant/42/github", "s3:artifacts", "", "x", "../../etc/passwd",
	"DATABASE_URL", "a reference with spaces", "\x01\x02 ctrl \xff",
};

Test(credentials, sandbox_refuses_everything)
{
	airlock_credentials *c = airlock_credentials_sandbox();
	cr_assert_not_null(c);
	cr_expect_str_eq(airlock_credentials_name(c), "sandbox");
	for (size_t i = 0; i < sizeof(references) / sizeof(references[0]); i++) {
		airlock_secret *s = NULL;
		airlock_error err = { 0 };
		int r = airlock_credentials_resolve(c, references[i], &s, &err);
		cr_expect_lt(r, 0);
		cr_expect_null(s);
		if (references[i][0] == 0) {
			/* An empty reference is a malformed request, refused first. */
			cr_expect_eq(err.cls, AIRLOCK_ERR_TOOL_VALIDATION);
			continue;
		}
		cr_expect_eq(r, airlock_errcode(AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE), "[%s]", references[i]);
		cr_expect_eq(err.cls, AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE);
		cr_expect(strstr(err.message, "never resolved for sandbox-target tools") != NULL, "%s",
		          err.message);
		if (strcmp(references[i], "database") == 0)
			cr_expect(strstr(err.message, "\"database\"") != NULL, "%s", err.message);
		/* Control bytes never reach the message raw. */
		for (const char *m = err.message; *m; m++)
			cr_expect((unsigned char)*m >= 0x20 && (unsigned char)*m < 0x7f, "%s", err.message);
	}
	/* Free is a no-op on the static object; using it again still works. */
	airlock_credentials_free(c);
	airlock_secret *s = NULL;
	cr_expect_eq(airlock_credentials_resolve(airlock_credentials_sandbox(), "database", &s, NULL),
	             airlock_errcode(AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE));
}

/* The sandbox resolver's refusal contains no value, even when the worker
 * holds one under the very reference asked for. */
Test(credentials, sandbox_message_has_no_value)
{
	airlock_credentials *broker = NULL;
	cr_assert_eq(airlock_credentials_static_new(&broker, NULL), 0);
	const char *value = "postgres://app:s3cr3t-pa55@db.internal/prod";
	cr_assert_eq(airlock_credentials_static_add(broker, "database", value, strlen(value), NULL), 0);
	airlock_secret *s = NULL;
	airlock_error err = { 0 };
	cr_expect_eq(airlock_credentials_resolve(airlock_credentials_sandbox(), "database", &s, &err),
	             airlock_errcode(AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE));
	cr_expect(strstr(err.message, "s3cr3t") == NULL);
	cr_expect(strstr(err.message, "postgres://") == NULL);
	airlock_credentials_free(broker);
}

Test(credentials, null_reference_is_validation)
{
	airlock_secret *s = NULL;
	airlock_error err = { 0 };
	cr_expect_eq(airlock_credentials_resolve(airlock_credentials_sandbox(), NULL, &s, &err),
	             airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION));
	cr_expect_eq(err.cls, AIRLOCK_ERR_TOOL_VALIDATION);
	char longref[300];
	memset(longref, 'r', sizeof(longref) - 1);
	longref[sizeof(longref) - 1] = 0;
	cr_expect_eq(airlock_credentials_resolve(airlock_credentials_sandbox(), longref, &s, &err),
	             airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION));
	/* No resolver at all: unavailable, not a crash. */
	cr_expect_eq(airlock_credentials_resolve(NULL, "database", &s, &err),
	             airlock_errcode(AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE));
	cr_expect_null(s);
}

/* Like the other two ports, an adapter's ops are checked for their version
 * and for a resolve, and the adapter's context is released on a refusal. */
static int freed;
static void count_free(void *ctx)
{
	(void)ctx;
	freed++;
}
static int never_resolve(void *ctx, const char *reference, airlock_secret **ret, airlock_error *err)
{
	(void)ctx;
	(void)reference;
	(void)ret;
	return airlock_error_set(err, AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE, 0, "none");
}

Test(credentials, an_adapter_is_checked_for_its_version)
{
	airlock_credentials_ops ops = { .version = AIRLOCK_CREDENTIALS_OPS_VERSION + 1,
		                        .name = "future",
		                        .resolve = never_resolve,
		                        .free = count_free };
	airlock_credentials *c = NULL;
	airlock_error err = { 0 };
	freed = 0;
	cr_expect_eq(airlock_credentials_new(&ops, &ops, &c, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_expect_null(c);
	cr_expect(strstr(err.message, "version") != NULL, "%s", err.message);
	cr_expect_eq(freed, 1, "the context is the port's once given, released on a refusal");
	ops.version = AIRLOCK_CREDENTIALS_OPS_VERSION;
	ops.resolve = NULL;
	cr_expect_eq(airlock_credentials_new(&ops, &ops, &c, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_expect_eq(freed, 2);
	ops.resolve = never_resolve;
	cr_assert_eq(airlock_credentials_new(&ops, &ops, &c, &err), 0, "%s", err.message);
	cr_expect_str_eq(airlock_credentials_name(c), "future");
	airlock_secret *s = NULL;
	cr_expect_eq(airlock_credentials_resolve(c, "database", &s, &err),
	             airlock_errcode(AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE));
	airlock_credentials_free(c);
	cr_expect_eq(freed, 3);
}

Test(credentials, static_broker)
{
	airlock_credentials *c = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_credentials_static_new(&c, &err), 0);
	cr_expect_str_eq(airlock_credentials_name(c), "static");

	char value[] = "sk-proj-0123456789abcdefghijklmnop";
	cr_assert_eq(airlock_credentials_static_add(c, "openai", value, strlen(value), &err), 0);
	cr_assert_eq(airlock_credentials_static_add(c, "pem", pem, strlen(pem), &err), 0);
	/* The broker copied the value: changing the caller's buffer does not
	 * change what it resolves. */
	value[0] = 'X';

	airlock_secret *s = NULL;
	cr_assert_eq(airlock_credentials_resolve(c, "openai", &s, &err), 0, "%s", err.message);
	size_t len;
	const char *p = airlock_secret_reveal(s, &len);
	cr_expect_eq(len, strlen(value));
	cr_expect_eq(memcmp(p, "sk-proj-0123456789abcdefghijklmnop", len), 0);
	cr_expect_str_eq(airlock_secret_str(s), "[REDACTED]");
	airlock_secret *s2 = NULL;
	cr_assert_eq(airlock_credentials_resolve(c, "openai", &s2, &err), 0);
	cr_expect_neq(s, s2, "each resolve hands out its own copy");
	airlock_secret_free(s);
	airlock_secret_free(s2);

	cr_assert_eq(airlock_credentials_resolve(c, "pem", &s, &err), 0);
	p = airlock_secret_reveal(s, &len);
	cr_expect_eq(len, strlen(pem));
	airlock_secret_free(s);

	s = NULL;
	cr_expect_eq(airlock_credentials_resolve(c, "anthropic", &s, &err),
	             airlock_errcode(AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE));
	cr_expect_null(s);
	cr_expect(strstr(err.message, "anthropic") != NULL);
	cr_expect(strstr(err.message, "sk-") == NULL);
	/* References are exact. */
	cr_expect_eq(airlock_credentials_resolve(c, "OpenAI", &s, &err),
	             airlock_errcode(AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE));
	cr_expect_eq(airlock_credentials_resolve(c, "openai ", &s, &err),
	             airlock_errcode(AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE));

	/* Configured twice is a composition mistake. */
	cr_expect_eq(airlock_credentials_static_add(c, "openai", "x", 1, &err),
	             airlock_errcode(AIRLOCK_ERR_CONFIG));
	/* The sandbox resolver is not a broker one can add to. */
	cr_expect_eq(airlock_credentials_static_add(airlock_credentials_sandbox(), "x", "y", 1, &err),
	             airlock_errcode(AIRLOCK_ERR_CONFIG));
	airlock_credentials_free(c);
}

Test(credentials, static_broker_is_bounded)
{
	airlock_credentials *c = NULL;
	cr_assert_eq(airlock_credentials_static_new(&c, NULL), 0);
	airlock_error err = { 0 };
	int r = 0;
	size_t added = 0;
	for (size_t i = 0; i < 5000; i++) {
		char ref[32];
		snprintf(ref, sizeof(ref), "ref-%zu", i);
		r = airlock_credentials_static_add(c, ref, "v", 1, &err);
		if (r < 0)
			break;
		added++;
	}
	cr_expect_eq(r, airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_expect_lt(added, 5000);
	cr_expect_geq(added, 64);
	airlock_credentials_free(c);
}
