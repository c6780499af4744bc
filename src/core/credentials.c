/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CredentialResolver port (the specification, "CredentialResolver"):
 * the thin wrapper every caller goes through, the resolver handed to
 * sandbox-target tools (refuses everything), and a worker-side static map.
 *
 * Messages from this file name the reference and never a value. A
 * reference comes from the model, so it is escaped and cut before it is
 * put in a message.
 */
#include "airlock/port/credentials.h"

#include <errno.h>
#include <string.h>

#include "airlock/caps.h"
#include "util/util.h"

/* Its caps (a reference, the static broker's entries) are in airlock/caps.h. */

struct airlock_credentials {
	const airlock_credentials_ops *ops;
	void *ctx;
};

int airlock_credentials_new(const airlock_credentials_ops *ops, void *ctx,
                            airlock_credentials **ret, airlock_error *err)
{
	/* An adapter built against another version of the ops has another
	 * layout: calling through it would jump to whatever is there. */
	if (!ops || ops->version != AIRLOCK_CREDENTIALS_OPS_VERSION || !ops->resolve || !ret) {
		if (ops && ops->free)
			ops->free(ctx);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "credentials: the adapter's ops are not version %d with a resolve",
		                         AIRLOCK_CREDENTIALS_OPS_VERSION);
	}
	airlock_credentials *c = calloc(1, sizeof(*c));
	if (!c) {
		if (ops->free)
			ops->free(ctx);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "credentials");
	}
	c->ops = ops;
	c->ctx = ctx;
	*ret = c;
	return 0;
}

static const char *reference_for_message(char *buf, size_t size, const char *ref)
{
	return util_escape(buf, size, ref, strlen(ref));
}

#define REF_QUOTE_MAX 96

static int reference_check(const char *reference, airlock_error *err)
{
	if (!reference)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "credential reference: missing");
	size_t len = strnlen(reference, AIRLOCK_CREDENTIAL_REFERENCE_MAX + 1);
	if (len == 0 || len > AIRLOCK_CREDENTIAL_REFERENCE_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "credential reference: must be 1..%d bytes", AIRLOCK_CREDENTIAL_REFERENCE_MAX);
	return 0;
}

int airlock_credentials_resolve(airlock_credentials *c, const char *reference,
                                airlock_secret **ret, airlock_error *err)
{
	char q[REF_QUOTE_MAX];
	int r = reference_check(reference, err);
	if (r < 0)
		return r;
	if (!ret)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "credential reference \"%s\": no place for the result",
		                         reference_for_message(q, sizeof(q), reference));
	/* No resolver at all is the same answer as a resolver that has nothing:
	 * the credential is unavailable here. */
	if (!c || !c->ops || !c->ops->resolve)
		return airlock_error_set(err, AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE, 0,
		                         "credential reference \"%s\" is unavailable: no credential resolver is configured",
		                         reference_for_message(q, sizeof(q), reference));
	airlock_secret *s = NULL;
	r = c->ops->resolve(c->ctx, reference, &s, err);
	if (r < 0) {
		airlock_secret_free(s);
		return r;
	}
	if (!s)
		return airlock_error_set(err, AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE, 0,
		                         "credential reference \"%s\" is unavailable: the resolver returned nothing",
		                         reference_for_message(q, sizeof(q), reference));
	*ret = s;
	return 0;
}

static airlock_credentials sandbox_resolver;

const char *airlock_credentials_name(const airlock_credentials *c)
{
	return c && c->ops && c->ops->name ? c->ops->name : "";
}

void airlock_credentials_free(airlock_credentials *c)
{
	/* The sandbox resolver is a static object: nothing to free. */
	if (!c || c == &sandbox_resolver)
		return;
	if (c->ops && c->ops->free)
		c->ops->free(c->ctx);
	free(c);
}

/* ---- the sandbox resolver ------------------------------------------------------
 * A credential resolved inside a sandbox is a credential inside a sandbox no
 * matter how it got there, so this resolver has no state to consult and
 * nothing it could return. */

static int sandbox_resolve(void *ctx, const char *reference, airlock_secret **ret, airlock_error *err)
{
	char q[REF_QUOTE_MAX];
	(void)ctx;
	(void)ret;
	return airlock_error_set(err, AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE, 0,
	                         "credential reference \"%s\" is unavailable: credentials are never resolved for sandbox-target tools",
	                         reference ? reference_for_message(q, sizeof(q), reference) : "");
}

static const airlock_credentials_ops sandbox_ops = {
	.version = AIRLOCK_CREDENTIALS_OPS_VERSION,
	.name = "sandbox",
	.resolve = sandbox_resolve,
	.free = NULL,
};

/* Immutable in practice: the wrapper never writes through it, and
 * airlock_credentials_free knows it. */
static airlock_credentials sandbox_resolver = { .ops = &sandbox_ops, .ctx = NULL };

airlock_credentials *airlock_credentials_sandbox(void)
{
	return &sandbox_resolver;
}

/* ---- the static broker ------------------------------------------------------------
 * Filled by the composition root before any tool runs and read-only after
 * that: resolve from several threads is safe once adding has stopped. */

typedef struct static_entry {
	char *reference;
	airlock_secret *value;
} static_entry;

typedef struct static_broker {
	static_entry *entries;
	size_t n;
} static_broker;

static int static_resolve(void *ctx, const char *reference, airlock_secret **ret, airlock_error *err)
{
	static_broker *b = ctx;
	char q[REF_QUOTE_MAX];
	for (size_t i = 0; i < b->n; i++) {
		if (strcmp(b->entries[i].reference, reference) != 0)
			continue;
		size_t len = 0;
		const void *v = airlock_secret_reveal(b->entries[i].value, &len);
		/* A fresh copy per call: the caller owns and frees what it gets,
		 * and the broker's copy outlives it. */
		return airlock_secret_new(v, len, ret, err);
	}
	return airlock_error_set(err, AIRLOCK_ERR_CREDENTIAL_UNAVAILABLE, 0,
	                         "credential reference \"%s\" is unavailable: the broker has no such credential",
	                         reference_for_message(q, sizeof(q), reference));
}

static void static_free(void *ctx)
{
	static_broker *b = ctx;
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++) {
		free(b->entries[i].reference);
		airlock_secret_free(b->entries[i].value);
	}
	free(b->entries);
	free(b);
}

static const airlock_credentials_ops static_ops = {
	.version = AIRLOCK_CREDENTIALS_OPS_VERSION,
	.name = "static",
	.resolve = static_resolve,
	.free = static_free,
};

int airlock_credentials_static_new(airlock_credentials **ret, airlock_error *err)
{
	if (!ret)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "credentials: no place for the result");
	static_broker *b = calloc(1, sizeof(*b));
	if (!b)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "credentials");
	return airlock_credentials_new(&static_ops, b, ret, err);
}

int airlock_credentials_static_add(airlock_credentials *c, const char *reference,
                                   const void *value, size_t len, airlock_error *err)
{
	char q[REF_QUOTE_MAX];
	if (!c || c->ops != &static_ops)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "credentials: not a static broker");
	int r = reference_check(reference, err);
	if (r < 0)
		return r;
	static_broker *b = c->ctx;
	for (size_t i = 0; i < b->n; i++)
		if (strcmp(b->entries[i].reference, reference) == 0)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "credential reference \"%s\" is configured twice",
			                         reference_for_message(q, sizeof(q), reference));
	if (b->n >= AIRLOCK_STATIC_CREDENTIALS_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "credentials: more than %d references", AIRLOCK_STATIC_CREDENTIALS_MAX);

	_cleanup_free_ char *ref = strdup(reference);
	if (!ref)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "credentials");
	airlock_secret *s = NULL;
	r = airlock_secret_new(value, len, &s, err);
	if (r < 0)
		return r;
	static_entry *e = reallocarray(b->entries, b->n + 1, sizeof(*e));
	if (!e) {
		airlock_secret_free(s);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "credentials");
	}
	b->entries = e;
	b->entries[b->n++] = (static_entry){ .reference = TAKE_PTR(ref), .value = s };
	return 0;
}
