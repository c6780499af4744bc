/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the execution service's request decoding (src/service/decode.c)
 * with arbitrary bytes: the route of a request target and a method, a query
 * value, the bearer token and the Airlock-Handle header. The first byte
 * picks the decoder. Properties: nothing crashes or reads past its length;
 * a route is 0, 404 or 405, with a verb exactly when 0 and an id that fits
 * its buffer and is [A-Za-z0-9_-]; a decoded query value is never longer
 * than its encoding; a token is accepted only when it is exactly the
 * credential; a handle that decodes re-encodes and decodes to itself.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/json.h"
#include "service/server_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
	if (!ok)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	unsigned sel = data[0] % 4;
	const char *in = (const char *)data + 1;
	size_t len = size - 1;
	airlock_error err = { 0 };
	switch (sel) {
	case 0: {
		static const char *const methods[] = { "GET", "POST", "PUT", "DELETE", "HEAD" };
		const char *m = methods[len ? (unsigned char)in[0] % 5 : 0];
		svc_verb v;
		char id[AIRLOCK_ENVIRONMENT_ID_MAX];
		const char *q = NULL;
		size_t ql = 0;
		int r = svc_route(in, len, m, &v, id, &q, &ql);
		check(r == 0 || r == 404 || r == 405);
		check((r == 0) == (v != SVC_NONE));
		check(strlen(id) < sizeof(id));
		for (const char *p = id; *p; p++)
			check((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-');
		check(!q || (q >= in && q + ql <= in + len));
		break;
	}
	case 1: {
		char *v = NULL;
		size_t vl = 0;
		int r = svc_query_value(in, len, "path", &v, &vl, &err);
		check(r <= 1);
		if (r == 1) {
			check(vl <= len);
			check(v[vl] == 0);
		}
		free(v);
		break;
	}
	case 2: {
		static const char want[] = "fuzz-credential-0123456789";
		bool ok = svc_bearer_ok(in, len, want, sizeof(want) - 1);
		check(!ok || (len == 7 + sizeof(want) - 1 && memcmp(in + 7, want, sizeof(want) - 1) == 0));
		break;
	}
	case 3: {
		airlock_environment_handle h = { 0 };
		if (svc_handle_decode(in, len, &h, &err) == 0) {
			char *j = airlock_environment_handle_to_json(&h, &err);
			check(j != NULL);
			airlock_environment_handle h2 = { 0 };
			check(airlock_environment_handle_from_json(j, strlen(j), &h2, &err) == 0);
			check(strcmp(h.environment_id, h2.environment_id) == 0 && h.lease_epoch == h2.lease_epoch);
			airlock_environment_handle_clear(&h2);
			free(j);
			airlock_environment_handle_clear(&h);
		}
		break;
	}
	default:
		break;
	}
	return 0;
}
