/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_NATIVE_TESTLIB_H
#define AIRLOCK_NATIVE_TESTLIB_H

/*
 * What the native suites share: the default image (scripts/test.sh builds it
 * into the store once; AIRLOCK_TEST_IMAGE_STORE points elsewhere), a native
 * service, and a sandbox to run Python in. A host that cannot run the
 * mechanism skips with the reason; it never passes silently.
 */

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/envbuild.h"
#include "airlock/image.h"
#include "airlock/native.h"
#include "airlock/port/exec.h"
#include "testlib.h"

#define NATIVE_TEST_STORE_DEFAULT "/var/lib/airlock/images"

static inline const char *native_test_store(void)
{
	const char *s = getenv("AIRLOCK_TEST_IMAGE_STORE");
	return s && *s ? s : NATIVE_TEST_STORE_DEFAULT;
}

/* Skip (with the reason) unless the host can run native and the default
 * image is in the store; fills digest. */
static inline void native_test_require(char digest[AIRLOCK_IMAGE_DIGEST_SIZE])
{
	char why[256];
	if (airlock_native_probe(why, sizeof(why)) < 0)
		cr_skip_test("native mechanism unavailable here: %s", why);
	airlock_image_store *store = NULL;
	airlock_error err = { 0 };
	if (airlock_image_store_open(native_test_store(), &store, &err) < 0)
		cr_skip_test("image store %s: %s", native_test_store(), err.message);
	int r = airlock_image_find_default(store, digest, &err);
	airlock_image_store_free(store);
	if (r <= 0)
		cr_skip_test("no default image in %s: run ./build/airlock image build (scripts/test.sh does)",
		             native_test_store());
}

/* A native service with cfg (NULL: defaults); *ret_n (when not NULL) is
 * its adapter, owned by the service, for airlock_native_live_count. */
static inline airlock_exec *native_test_open_with(const airlock_exec_config *cfg,
                                                  airlock_native **ret_n)
{
	airlock_native_config nc = { .image_store = native_test_store(), .start_budget_seconds = 30 };
	airlock_native *n = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_native_new(&nc, &n, &err), 0, "%s", err.message);
	airlock_exec *e = NULL;
	cr_assert_eq(airlock_exec_new(airlock_native_ops(), n, cfg, &e, &err), 0, "%s", err.message);
	if (ret_n)
		*ret_n = n;
	return e;
}

static inline airlock_exec *native_test_open(const airlock_exec_config *cfg)
{
	return native_test_open_with(cfg, NULL);
}

/* A spec for the default image with a built environment (tier 2 only). */
static inline void native_test_spec(airlock_environment_spec *s, const char *tenant,
                                    const char *digest, const airlock_resource_limits *limits)
{
	test_spec(s, tenant, "run-1");
	free(s->image_digest);
	s->image_digest = strdup(digest);
	if (limits)
		s->limits = *limits;
	airlock_env_clear(&s->environment);
	extern char **environ;
	airlock_envbuild_input in = { .parent = environ };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_envbuild(&in, &s->environment, &err), 0, "%s", err.message);
}

/* Run argv in the sandbox; asserts the call itself succeeded. */
static inline void native_test_run(airlock_exec *e, const airlock_environment_handle *h,
                                   char **argv, int timeout_s, const char *stdin_text,
                                   airlock_execution_result *r)
{
	airlock_execution_command cmd = test_command(argv);
	cmd.timeout_seconds = timeout_s;
	if (stdin_text) {
		cmd.has_stdin = true;
		cmd.stdin_data = (unsigned char *)stdin_text;
		cmd.stdin_len = strlen(stdin_text);
	}
	airlock_exec_call call = { .tenant_id = h->tenant_id,
		                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_error err = { 0 };
	memset(r, 0, sizeof(*r));
	cr_assert_eq(airlock_exec_execute(e, &call, h, &cmd, r, &err), 0, "%s", err.message);
}

/* One sandbox of one service, for a test: opened (provisioned) and closed
 * (destroyed, the service freed) with assertions. */
typedef struct box {
	airlock_exec *e;
	airlock_environment_spec spec;
	airlock_environment_handle h;
} box;

static inline void box_open(box *b, const char *tenant, const airlock_resource_limits *l)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	native_test_require(digest);
	memset(b, 0, sizeof(*b));
	b->e = native_test_open(NULL);
	native_test_spec(&b->spec, tenant, digest, l);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(b->e, &b->spec, &b->h, &err), 0, "%s", err.message);
}

static inline void box_close(box *b)
{
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_destroy(b->e, &b->h, &err), 0, "%s", err.message);
	airlock_exec_free(b->e);
	airlock_environment_handle_clear(&b->h);
	airlock_environment_spec_clear(&b->spec);
}

/* Python code in the box, with a timeout. */
static inline void py(box *b, const char *code, int timeout_s, airlock_execution_result *r)
{
	char *argv[] = { "python3", "-c", (char *)code, NULL };
	native_test_run(b->e, &b->h, argv, timeout_s, NULL, r);
}

/* stdout as a NUL-terminated string (the result's buffers are). */
#define OUT(r) ((const char *)(r)->stdout_data)
#define ERR(r) ((const char *)(r)->stderr_data)

#endif
