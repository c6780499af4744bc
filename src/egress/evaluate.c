/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one evaluation function (sandbox-isolation.md, "The egress boundary",
 * "What the proxy does on CONNECT"). The proxy and the worker's outbound
 * guard both call this; neither has a second copy of any step.
 */
#include "airlock/egress.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <sys/socket.h>

#include "util/util.h"

static const char *const reason_names[AIRLOCK_EGRESS_REASON__MAX] = {
	[AIRLOCK_EGRESS_REASON_INVALID] = "INVALID",
	[AIRLOCK_EGRESS_ALLOWED] = "ALLOWED",
	[AIRLOCK_EGRESS_MODE_DENY] = "MODE_DENY",
	[AIRLOCK_EGRESS_NOT_ALLOWLISTED] = "NOT_ALLOWLISTED",
	[AIRLOCK_EGRESS_PORT_NOT_ALLOWED] = "PORT_NOT_ALLOWED",
	[AIRLOCK_EGRESS_IP_LITERAL] = "IP_LITERAL",
	[AIRLOCK_EGRESS_BAD_HOSTNAME] = "BAD_HOSTNAME",
	[AIRLOCK_EGRESS_DNS_FAILURE] = "DNS_FAILURE",
	[AIRLOCK_EGRESS_DENIED_ADDRESS] = "DENIED_ADDRESS",
	[AIRLOCK_EGRESS_METADATA_ADDRESS] = "METADATA_ADDRESS",
};

const char *airlock_egress_reason_name(airlock_egress_reason r)
{
	if ((unsigned)r >= AIRLOCK_EGRESS_REASON__MAX)
		return reason_names[AIRLOCK_EGRESS_REASON_INVALID];
	return reason_names[r];
}

/* Longer than any name with its trailing dot or any address with brackets
 * and a zone: past this the input is refused without being looked at. */
#define HOST_INPUT_MAX 1024

static int refuse(airlock_egress_decision *d, airlock_egress_reason reason)
{
	d->allow = false;
	d->has_dial = false;
	d->reason = reason;
	return 0;
}

/* Which destinations name host, and whether one of them lists port. */
static airlock_egress_reason match(const airlock_egress_policy *p, const char *host, uint16_t port)
{
	bool host_listed = false;

	for (size_t i = 0; i < p->n_destinations; i++) {
		const airlock_egress_destination *dst = &p->destinations[i];
		if (!dst->host || !airlock_egress_host_matches(dst->host, host))
			continue;
		host_listed = true;
		for (size_t j = 0; j < dst->n_ports; j++)
			if (dst->ports[j] == port)
				return AIRLOCK_EGRESS_ALLOWED;
	}
	return host_listed ? AIRLOCK_EGRESS_PORT_NOT_ALLOWED : AIRLOCK_EGRESS_NOT_ALLOWLISTED;
}

int airlock_egress_evaluate(const airlock_egress_policy *p, const char *host, uint16_t port,
                            airlock_egress_resolve_fn resolve, void *resolve_ctx,
                            airlock_egress_decision *ret, airlock_error *err)
{
	if (!p || !host || !resolve || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "egress evaluate");
	if (p->n_destinations > 0 && !p->destinations)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "egress evaluate: policy");

	memset(ret, 0, sizeof(*ret));
	ret->port = port;

	/* Until the name is normalized, the decision carries the input rendered
	 * safe for a log line: it came from the sandbox. */
	size_t len = strnlen(host, HOST_INPUT_MAX + 1);
	util_escape(ret->host, sizeof(ret->host), host, len);
	if (len > HOST_INPUT_MAX)
		return refuse(ret, AIRLOCK_EGRESS_BAD_HOSTNAME);

	/* An address is never a destination ("There is no IP-address destination
	 * form"): checked before the name rules, so the refusal says why. */
	if (airlock_ip_literal(host, len))
		return refuse(ret, AIRLOCK_EGRESS_IP_LITERAL);
	char name[AIRLOCK_HOSTNAME_MAX + 1];
	if (!airlock_hostname_normalize(host, len, false, name))
		return refuse(ret, AIRLOCK_EGRESS_BAD_HOSTNAME);
	memcpy(ret->host, name, sizeof(name));

	/* Anything but an explicit allowlist denies: deny is the default and
	 * there is no allow mode. */
	if (p->mode != AIRLOCK_EGRESS_ALLOWLIST)
		return refuse(ret, AIRLOCK_EGRESS_MODE_DENY);

	airlock_egress_reason m = match(p, name, port);
	if (m != AIRLOCK_EGRESS_ALLOWED)
		return refuse(ret, m);

	/* One resolution. Every address it returned is checked, and the address
	 * dialed is one of them: the caller never looks the name up again (DNS
	 * rebinding). */
	size_t n = 0;
	int r = resolve(resolve_ctx, name, ret->addresses, AIRLOCK_EGRESS_ADDRESSES_MAX, &n);
	if (r < 0 || n == 0)
		return refuse(ret, AIRLOCK_EGRESS_DNS_FAILURE);
	if (n > AIRLOCK_EGRESS_ADDRESSES_MAX) {
		/* A resolver that claims more than it could hand over has answers
		 * nobody checked: fail closed. */
		ret->n_addresses = 0;
		return refuse(ret, AIRLOCK_EGRESS_DNS_FAILURE);
	}
	ret->n_addresses = n;

	/* One bad address refuses the whole destination; a name resolving to a
	 * public and a private address is refused, not partly allowed. The
	 * metadata address wins over any other, so the refusal names it. */
	bool bad = false;
	for (size_t i = 0; i < n; i++) {
		airlock_addr_class c = airlock_addr_classify(&ret->addresses[i]);
		if (c == AIRLOCK_ADDR_PUBLIC)
			continue;
		if (c == AIRLOCK_ADDR_METADATA) {
			ret->denied = ret->addresses[i];
			return refuse(ret, AIRLOCK_EGRESS_METADATA_ADDRESS);
		}
		if (!bad) {
			bad = true;
			ret->denied = ret->addresses[i];
		}
	}
	if (bad)
		return refuse(ret, AIRLOCK_EGRESS_DENIED_ADDRESS);

	ret->allow = true;
	ret->reason = AIRLOCK_EGRESS_ALLOWED;
	ret->has_dial = true;
	ret->dial = ret->addresses[0];
	return 0;
}

static int put_new(json_t *o, const char *key, json_t *v)
{
	/* json_object_set_new takes v even when it fails. */
	return v && json_object_set_new(o, key, v) == 0 ? 0 : -ENOMEM;
}

char *airlock_egress_decision_to_json(const airlock_egress_decision *d, airlock_error *err)
{
	if (!d || d->n_addresses > AIRLOCK_EGRESS_ADDRESSES_MAX) {
		airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "egress decision");
		return NULL;
	}

	json_t *o = json_object();
	json_t *addrs = json_array();
	char buf[46];
	int r = o && addrs ? 0 : -ENOMEM;

	for (size_t i = 0; r == 0 && i < d->n_addresses; i++) {
		airlock_addr_format(&d->addresses[i], buf);
		if (json_array_append_new(addrs, json_string(buf)) < 0)
			r = -ENOMEM;
	}
	/* host is either a normalized name or the input escaped to printable
	 * ASCII: valid UTF-8 either way. */
	if (r == 0)
		r = put_new(o, "decision", json_string(d->allow ? "allow" : "deny"));
	if (r == 0)
		r = put_new(o, "reason", json_string(airlock_egress_reason_name(d->reason)));
	if (r == 0)
		r = put_new(o, "host", json_string(d->host));
	if (r == 0)
		r = put_new(o, "port", json_integer(d->port));
	if (r == 0) {
		r = put_new(o, "addresses", addrs);
		addrs = NULL;
	}
	if (r == 0) {
		if (d->has_dial) {
			airlock_addr_format(&d->dial, buf);
			r = put_new(o, "dial", json_string(buf));
		} else {
			r = put_new(o, "dial", json_null());
		}
	}

	char *s = r == 0 ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(addrs);
	json_decref(o);
	if (!s)
		airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "egress decision");
	return s;
}
