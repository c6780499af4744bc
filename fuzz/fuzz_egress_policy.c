/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the egress policy parser: arbitrary bytes as a policy file. It must
 * return 0 or a negative code and never crash, leak or read past the input.
 * Whatever parses must print, and the printed text must parse back to the
 * same policy and print to the same text: the normalized form is a fixed
 * point, so `airlock egress validate` output is itself a valid policy.
 * And the other door: whatever parses passes the shared rules, encodes to
 * JSON, and decodes from JSON to the same policy (one grammar for every
 * door).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/egress.h"
#include "airlock/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same(const airlock_egress_policy *a, const airlock_egress_policy *b)
{
	if (a->mode != b->mode || a->n_destinations != b->n_destinations)
		return false;
	for (size_t i = 0; i < a->n_destinations; i++) {
		const airlock_egress_destination *x = &a->destinations[i], *y = &b->destinations[i];
		if (strcmp(x->host, y->host) != 0 || x->n_ports != y->n_ports ||
		    memcmp(x->ports, y->ports, x->n_ports * sizeof(*x->ports)) != 0)
			return false;
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	airlock_egress_policy a, b;
	airlock_error err = { 0 };
	if (airlock_egress_policy_parse("fuzz.yaml", (const char *)data, size, &a, &err) < 0)
		return 0;
	/* Every stored host is one the grammar produced. */
	for (size_t i = 0; i < a.n_destinations; i++) {
		const char *h = a.destinations[i].host;
		char norm[AIRLOCK_HOSTNAME_MAX + 1];
		if (!airlock_hostname_normalize(h, strlen(h), true, norm) || strcmp(norm, h) != 0 ||
		    airlock_ip_literal(h, strlen(h)))
			abort();
	}
	airlock_egress_violation v;
	if (airlock_egress_policy_rules(&a, &v))
		abort();
	char *json = airlock_egress_policy_to_json(&a, &err);
	airlock_egress_policy c;
	if (!json || airlock_egress_policy_from_json(json, strlen(json), &c, &err) < 0)
		abort();
	if (!same(&a, &c))
		abort();
	free(json);
	airlock_egress_policy_clear(&c);
	char *text = NULL, *text2 = NULL;
	if (airlock_egress_policy_format(&a, &text, &err) < 0)
		abort();
	if (airlock_egress_policy_parse("printed.yaml", text, strlen(text), &b, &err) < 0)
		abort();
	if (!same(&a, &b))
		abort();
	if (airlock_egress_policy_format(&b, &text2, &err) < 0 || strcmp(text, text2) != 0)
		abort();
	free(text);
	free(text2);
	airlock_egress_policy_clear(&a);
	airlock_egress_policy_clear(&b);
	return 0;
}
