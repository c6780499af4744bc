/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The storage key (the specification, "The storage key is derived, never
 * composed"): storage_key = f"{tenant_id}/{artifact_id[:2]}/{artifact_id}".
 *
 * This file holds the key function and nothing else, so that
 * gate.sandbox.artifact_key_opaque (tests/check_artifact_key_opaque.py)
 * can hold its whole module to the rule: the function's parameters are
 * exactly (tenant_id, artifact_id), both platform-generated, and no value
 * a caller supplies in ArtifactMetadata (a filename, a media type, a run)
 * is named here at all. A filename of "../../etc/passwd" therefore has
 * no way into a key; the check is structural because a list of bad
 * filenames is always missing one.
 */
#include "airlock/port/artifact.h"

#include <string.h>

#include "airlock/ids.h"
#include "util/util.h"

int airlock_artifact_storage_key(const char *tenant_id, const char *artifact_id,
                                 char out[AIRLOCK_ARTIFACT_KEY_MAX], airlock_error *err)
{
	char q[96];
	/* The id rule's closed charset ([A-Za-z0-9_-], no '/', '.' or NUL
	 * inside the bound) is what makes the tenant one path component that
	 * is never "." or "..". */
	if (!airlock_id_valid(tenant_id))
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "artifact storage key: tenant_id %s must be 1..%d of [A-Za-z0-9_-]",
		                         tenant_id ? util_escape(q, sizeof(q), tenant_id, strlen(tenant_id))
		                                   : "(null)",
		                         AIRLOCK_ID_MAX);
	/* Lowercase canonical only: one spelling per id, so one key per id. */
	if (!airlock_uuidv7_valid(artifact_id))
		return airlock_error_set(
			err, AIRLOCK_ERR_DECODE, 0,
			"artifact storage key: artifact_id %s is not a lowercase canonical UUIDv7",
			artifact_id ? util_escape(q, sizeof(q), artifact_id, strlen(artifact_id)) : "(null)");
	size_t t = strlen(tenant_id);
	/* Bounded by the two checks: t <= AIRLOCK_ID_MAX and the UUID is
	 * AIRLOCK_UUID_STR_LEN, which AIRLOCK_ARTIFACT_KEY_MAX is sized for. */
	char *o = out;
	memcpy(o, tenant_id, t);
	o += t;
	*o++ = '/';
	memcpy(o, artifact_id, 2);
	o += 2;
	*o++ = '/';
	memcpy(o, artifact_id, AIRLOCK_UUID_STR_LEN);
	o += AIRLOCK_UUID_STR_LEN;
	*o = 0;
	return 0;
}
