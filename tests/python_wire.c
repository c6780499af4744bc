/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The C side of the Python package's JSON test (python/tests/test_types.py):
 * reads one JSON text of type TYPE from stdin, decodes it with the C
 * decoder, and writes the C encoding of what it decoded to stdout (exit 0),
 * or the decoder's error as {"error": CLASS, "message": ...} (exit 1).
 * Usage: python_wire TYPE
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/json.h"
#include "airlock/types.h"

#define INPUT_MAX (AIRLOCK_JSON_INPUT_MAX + 1u)

#define ROUND_TRIP(NAME, CTYPE, FROM, TO, CLEAR)                                                  \
	if (strcmp(type, NAME) == 0) {                                                             \
		CTYPE v;                                                                           \
		memset(&v, 0, sizeof(v));                                                          \
		if (FROM(buf, len, &v, &err) < 0) {                                                \
			rc = fail(&err);                                                           \
			break;                                                                     \
		}                                                                                  \
		char *s = TO(&v, &err);                                                            \
		CLEAR(&v);                                                                         \
		if (!s) {                                                                          \
			rc = fail(&err);                                                           \
			break;                                                                     \
		}                                                                                  \
		fputs(s, stdout);                                                                  \
		free(s);                                                                           \
		rc = 0;                                                                            \
		break;                                                                             \
	}

static int fail(const airlock_error *e)
{
	airlock_error err = { 0 };
	char *s = airlock_error_to_json(e, &err);
	fputs(s ? s : "{\"error\":\"Error\",\"message\":\"the error did not encode\"}", stdout);
	free(s);
	return 1;
}

static void bridge_clear(airlock_bridge_endpoint *b)
{
	free(b->socket_path);
	free(b->token);
}

static void no_clear(void *p)
{
	(void)p;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: python_wire TYPE < JSON\n");
		return 64;
	}
	const char *type = argv[1];
	char *buf = malloc(INPUT_MAX);
	if (!buf)
		return 70;
	size_t len = fread(buf, 1, INPUT_MAX, stdin);
	airlock_error err = { 0 };
	int rc = 64;
	do {
		ROUND_TRIP("ResourceLimits", airlock_resource_limits, airlock_resource_limits_from_json,
		           airlock_resource_limits_to_json, no_clear)
		ROUND_TRIP("EgressPolicy", airlock_egress_policy, airlock_egress_policy_from_json,
		           airlock_egress_policy_to_json, airlock_egress_policy_clear)
		ROUND_TRIP("BridgeEndpoint", airlock_bridge_endpoint, airlock_bridge_endpoint_from_json,
		           airlock_bridge_endpoint_to_json, bridge_clear)
		ROUND_TRIP("EnvironmentSpec", airlock_environment_spec, airlock_environment_spec_from_json,
		           airlock_environment_spec_to_json, airlock_environment_spec_clear)
		ROUND_TRIP("EnvironmentHandle", airlock_environment_handle,
		           airlock_environment_handle_from_json, airlock_environment_handle_to_json,
		           airlock_environment_handle_clear)
		ROUND_TRIP("ExecutionCommand", airlock_execution_command,
		           airlock_execution_command_from_json, airlock_execution_command_to_json,
		           airlock_execution_command_clear)
		ROUND_TRIP("FileChange", airlock_file_change, airlock_file_change_from_json,
		           airlock_file_change_to_json, airlock_file_change_clear)
		ROUND_TRIP("ExecutionResult", airlock_execution_result, airlock_execution_result_from_json,
		           airlock_execution_result_to_json, airlock_execution_result_clear)
		ROUND_TRIP("ArtifactMetadata", airlock_artifact_metadata, airlock_artifact_metadata_from_json,
		           airlock_artifact_metadata_to_json, airlock_artifact_metadata_clear)
		ROUND_TRIP("ArtifactRef", airlock_artifact_ref, airlock_artifact_ref_from_json,
		           airlock_artifact_ref_to_json, airlock_artifact_ref_clear)
		ROUND_TRIP("Error", airlock_error, airlock_error_from_json, airlock_error_to_json, no_clear)
		fprintf(stderr, "python_wire: unknown type %s\n", type);
	} while (0);
	free(buf);
	return rc;
}
