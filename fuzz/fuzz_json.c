/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON decoders of every port type. The first byte picks the decoder,
 * the rest is the document. Whatever decodes must survive the round trip:
 * encode it, decode that, encode again, and the two encodings must be the
 * same text. The first encoding is not compared with the input, which may
 * legitimately differ (key order, whitespace, escapes, seconds-only times).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/json.h"
#include "airlock/types.h"

static void bridge_clear(airlock_bridge_endpoint *b)
{
	free(b->socket_path);
	free(b->token);
	memset(b, 0, sizeof(*b));
}

static void no_clear(void *p) { (void)p; }

/* Decode, and on success check the round trip; abort on any violation. */
#define ROUNDTRIP_CASE(prefix, ctype, clear)                                                       \
	static void fuzz_##prefix(const char *buf, size_t len)                                     \
	{                                                                                          \
		ctype a, b;                                                                        \
		memset(&a, 0, sizeof(a));                                                          \
		memset(&b, 0, sizeof(b));                                                          \
		airlock_error err = { 0 };                                                         \
		if (airlock_##prefix##_from_json(buf, len, &a, &err) < 0)                          \
			return;                                                                    \
		char *j1 = airlock_##prefix##_to_json(&a, &err);                                   \
		if (!j1) {                                                                         \
			fprintf(stderr, #prefix ": decoded value does not encode: %s\n", err.message); \
			abort();                                                                   \
		}                                                                                  \
		if (airlock_##prefix##_from_json(j1, strlen(j1), &b, &err) < 0) {                  \
			fprintf(stderr, #prefix ": own encoding does not decode: %s\n%s\n",        \
				err.message, j1);                                                  \
			abort();                                                                   \
		}                                                                                  \
		char *j2 = airlock_##prefix##_to_json(&b, &err);                                   \
		if (!j2 || strcmp(j1, j2) != 0) {                                                  \
			fprintf(stderr, #prefix ": re-encoding differs:\n%s\n%s\n", j1,            \
				j2 ? j2 : err.message);                                            \
			abort();                                                                   \
		}                                                                                  \
		extra_##prefix(&a);                                                                \
		free(j1);                                                                          \
		free(j2);                                                                          \
		clear(&a);                                                                         \
		clear(&b);                                                                         \
	}

#define NO_EXTRA(prefix, ctype)                                                                    \
	static void extra_##prefix(const ctype *v) { (void)v; }

NO_EXTRA(resource_limits, airlock_resource_limits)
NO_EXTRA(egress_policy, airlock_egress_policy)
NO_EXTRA(bridge_endpoint, airlock_bridge_endpoint)
NO_EXTRA(environment_handle, airlock_environment_handle)
NO_EXTRA(execution_command, airlock_execution_command)
NO_EXTRA(file_change, airlock_file_change)
NO_EXTRA(artifact_metadata, airlock_artifact_metadata)
NO_EXTRA(artifact_ref, airlock_artifact_ref)
NO_EXTRA(error, airlock_error)

/* A decoded spec also passes the validation the port applies. */
static void extra_environment_spec(const airlock_environment_spec *s)
{
	if (airlock_environment_spec_validate(s, NULL) < 0)
		abort();
}

/* The tool rendering accepts every decoded result and yields valid JSON. */
static void extra_execution_result(const airlock_execution_result *r)
{
	char *t = airlock_result_to_tool_json(r, NULL);
	if (!t)
		abort();
	free(t);
}

ROUNDTRIP_CASE(resource_limits, airlock_resource_limits, no_clear)
ROUNDTRIP_CASE(egress_policy, airlock_egress_policy, airlock_egress_policy_clear)
ROUNDTRIP_CASE(bridge_endpoint, airlock_bridge_endpoint, bridge_clear)
ROUNDTRIP_CASE(environment_spec, airlock_environment_spec, airlock_environment_spec_clear)
ROUNDTRIP_CASE(environment_handle, airlock_environment_handle, airlock_environment_handle_clear)
ROUNDTRIP_CASE(execution_command, airlock_execution_command, airlock_execution_command_clear)
ROUNDTRIP_CASE(file_change, airlock_file_change, airlock_file_change_clear)
ROUNDTRIP_CASE(execution_result, airlock_execution_result, airlock_execution_result_clear)
ROUNDTRIP_CASE(artifact_metadata, airlock_artifact_metadata, airlock_artifact_metadata_clear)
ROUNDTRIP_CASE(artifact_ref, airlock_artifact_ref, airlock_artifact_ref_clear)
ROUNDTRIP_CASE(error, airlock_error, no_clear)

/* Selector values (first byte mod 11); the corpus file names start with
 * the decoder's name so a reader can tell which one each seed exercises. */
static void (*const decoders[])(const char *, size_t) = {
	fuzz_resource_limits,   /* 0 */
	fuzz_egress_policy,     /* 1 */
	fuzz_bridge_endpoint,   /* 2 */
	fuzz_environment_spec,  /* 3 */
	fuzz_environment_handle, /* 4 */
	fuzz_execution_command, /* 5 */
	fuzz_file_change,       /* 6 */
	fuzz_execution_result,  /* 7 */
	fuzz_artifact_metadata, /* 8 */
	fuzz_artifact_ref,      /* 9 */
	fuzz_error,             /* 10 */
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t which = data[0] % (sizeof(decoders) / sizeof(decoders[0]));
	decoders[which]((const char *)data + 1, size - 1);
	return 0;
}
