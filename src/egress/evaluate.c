/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one evaluation function (the specification, "The egress boundary",
 * "What the proxy does on CONNECT"). The proxy and the worker's outbound
 * guard both call this; neither has a second copy of any step.
 */
#include "airlock/egress.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <sys/socket.h>

#include "airlock/caps.h"
#include "egress/evaluate.h"
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
	[AIRLOCK_EGRESS_BROWSER_RESOURCE_REFUSED] = "BROWSER_RESOURCE_REFUSED",
	[AIRLOCK_EGRESS_UNSUBSCRIBE_REFUSED] = "UNSUBSCRIBE_REFUSED",
	[AIRLOCK_EGRESS_OWN_ADDRESS] = "OWN_ADDRESS",
};

const char *airlock_egress_reason_name(airlock_egress_reason r)
{
	if ((unsigned)r >= AIRLOCK_EGRESS_REASON__MAX)
		return reason_names[AIRLOCK_EGRESS_REASON_INVALID];
	return reason_names[r];
}

static const char *const transport_names[AIRLOCK_EGRESS_TRANSPORT__MAX] = {
	[AIRLOCK_EGRESS_TRANSPORT_POLICY] = "policy",
	[AIRLOCK_EGRESS_TRANSPORT_BROWSER_RESOURCES] = "browser_resources",
	[AIRLOCK_EGRESS_TRANSPORT_UNSUBSCRIBE] = "unsubscribe",
};

const char *airlock_egress_transport_name(airlock_egress_transport t)
{
	if ((unsigned)t >= AIRLOCK_EGRESS_TRANSPORT__MAX)
		return "invalid";
	return transport_names[t];
}

/* The reason a refusal is logged under: the step itself under the
 * operator's policy, the transport's own reason otherwise (so browser and
 * unsubscribe refusals stay separately auditable), with the step as detail. */
static int refuse(airlock_egress_decision *d, airlock_egress_reason step)
{
	d->allow = false;
	d->has_dial = false;
	d->detail = step;
	switch (d->transport) {
	case AIRLOCK_EGRESS_TRANSPORT_BROWSER_RESOURCES:
		d->reason = AIRLOCK_EGRESS_BROWSER_RESOURCE_REFUSED;
		break;
	case AIRLOCK_EGRESS_TRANSPORT_UNSUBSCRIBE:
		d->reason = AIRLOCK_EGRESS_UNSUBSCRIBE_REFUSED;
		break;
	case AIRLOCK_EGRESS_TRANSPORT_POLICY:
	case AIRLOCK_EGRESS_TRANSPORT__MAX:
	default:
		d->reason = step;
		break;
	}
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

/* Suffixes that are never a public destination for a public-HTTPS
 * transport: special-use names (RFC 6761, 6762, 7686, 8375) and the names
 * internal networks commonly use. */
static const char *const internal_suffixes[] = {
	"localhost", "local", "internal", "test", "invalid", "example", "onion",
	"arpa", "lan", "intranet", "corp", "home",
};

/* True when name (normalized) has the public host-name shape. */
static bool public_hostname(const char *name)
{
	char norm[AIRLOCK_HOSTNAME_MAX + 1];
	if (!name || !airlock_hostname_normalize(name, strlen(name), false, norm) ||
	    strcmp(norm, name) != 0)
		return false;
	const char *last = strrchr(name, '.');
	if (!last)
		return false; /* one label: a name only a local resolver answers */
	last++;
	bool numeric = true;
	for (const char *c = last; *c; c++)
		if (*c < '0' || *c > '9')
			numeric = false;
	if (numeric)
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(internal_suffixes); i++)
		if (strcmp(last, internal_suffixes[i]) == 0)
			return false;
	return true;
}

/* The first steps, common to every rule: the input rendered safe for the
 * log (it came from a sandbox or a tenant), an address refused as such, the
 * name normalized into ret->host. False when refused. */
static bool check_name(const char *host, uint16_t port, airlock_egress_decision *ret)
{
	ret->port = port;
	size_t len = strnlen(host, AIRLOCK_EGRESS_HOST_INPUT_MAX + 1);
	util_escape(ret->host, sizeof(ret->host), host, len);
	if (len > AIRLOCK_EGRESS_HOST_INPUT_MAX)
		return refuse(ret, AIRLOCK_EGRESS_BAD_HOSTNAME), false;

	/* An address is never a destination ("There is no IP-address destination
	 * form"): checked before the name rules, so the refusal says why. */
	if (airlock_ip_literal(host, len))
		return refuse(ret, AIRLOCK_EGRESS_IP_LITERAL), false;
	char name[AIRLOCK_HOSTNAME_MAX + 1];
	if (!airlock_hostname_normalize(host, len, false, name))
		return refuse(ret, AIRLOCK_EGRESS_BAD_HOSTNAME), false;
	memcpy(ret->host, name, sizeof(name));
	return true;
}

/* The own-address question as the library asks it: of the kernel, now. */
static int own_now(void *ctx, const airlock_addr *a)
{
	(void)ctx;
	return airlock_addr_is_own(a);
}

/* The last steps, common to every rule: the one resolution's result (r and
 * n from the resolver, the addresses in ret->addresses); every address it
 * returned is checked, and the address dialed is one of them (the caller
 * never looks the name up again: DNS rebinding). */
void egress_evaluate_finish(airlock_egress_decision *ret, int r, size_t n, egress_own_fn own,
                            void *own_ctx)
{
	if (r < 0 || n == 0) {
		refuse(ret, AIRLOCK_EGRESS_DNS_FAILURE);
		return;
	}
	if (n > AIRLOCK_EGRESS_ADDRESSES_MAX) {
		/* A resolver that claims more than it could hand over has answers
		 * nobody checked: fail closed. */
		ret->n_addresses = 0;
		refuse(ret, AIRLOCK_EGRESS_DNS_FAILURE);
		return;
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
			refuse(ret, AIRLOCK_EGRESS_METADATA_ADDRESS);
			return;
		}
		if (!bad) {
			bad = true;
			ret->denied = ret->addresses[i];
		}
	}
	if (bad) {
		refuse(ret, AIRLOCK_EGRESS_DENIED_ADDRESS);
		return;
	}

	/* A public address can still be this host's own: a name that points at
	 * the proxy's (or the worker's) host reaches every service there bound
	 * to 0.0.0.0, which the denylist cannot know about. Asked of the kernel
	 * in this process's namespace (the proxy's, for the proxy; the proxy
	 * keeps the kernel's answers until its interfaces or routes change):
	 * one address that is own, or that cannot be shown not to be, refuses
	 * the destination. */
	for (size_t i = 0; i < n; i++) {
		if (own(own_ctx, &ret->addresses[i]) != 0) {
			ret->denied = ret->addresses[i];
			refuse(ret, AIRLOCK_EGRESS_OWN_ADDRESS);
			return;
		}
	}

	ret->allow = true;
	ret->reason = ret->detail = AIRLOCK_EGRESS_ALLOWED;
	ret->has_dial = true;
	ret->dial = ret->addresses[0];
}

/* The resolution between the first steps and the last, for a caller with a
 * resolve function that answers at once. */
static int resolve_and_check(airlock_egress_resolve_fn resolve, void *resolve_ctx,
                             airlock_egress_decision *ret)
{
	size_t n = 0;
	int r = resolve(resolve_ctx, ret->host, ret->addresses, AIRLOCK_EGRESS_ADDRESSES_MAX, &n);
	egress_evaluate_finish(ret, r, n, own_now, NULL);
	return 0;
}

int egress_evaluate_begin(const airlock_egress_policy *p, airlock_egress_transport t,
                          const char *host, uint16_t port, airlock_egress_decision *ret,
                          airlock_error *err)
{
	if (t == AIRLOCK_EGRESS_TRANSPORT_POLICY) {
		if (!p || !host || !ret)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "egress evaluate");
		if (p->n_destinations > 0 && !p->destinations)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
			                         "egress evaluate: policy");
	} else if (t <= AIRLOCK_EGRESS_TRANSPORT_POLICY || t >= AIRLOCK_EGRESS_TRANSPORT__MAX ||
	           !host || !ret) {
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "egress evaluate: transport");
	}

	memset(ret, 0, sizeof(*ret));
	ret->transport = t;
	if (!check_name(host, port, ret))
		return 0;

	if (t == AIRLOCK_EGRESS_TRANSPORT_POLICY) {
		/* Anything but an explicit allowlist denies: deny is the default
		 * and there is no allow mode. */
		if (p->mode != AIRLOCK_EGRESS_ALLOWLIST)
			return refuse(ret, AIRLOCK_EGRESS_MODE_DENY);

		airlock_egress_reason m = match(p, ret->host, port);
		if (m != AIRLOCK_EGRESS_ALLOWED)
			return refuse(ret, m);
		return 1;
	}
	/* The transport's rule in place of an allowlist: HTTPS's port and a
	 * name that can only be a public one. */
	if (port != 443)
		return refuse(ret, AIRLOCK_EGRESS_PORT_NOT_ALLOWED);
	if (!public_hostname(ret->host))
		return refuse(ret, AIRLOCK_EGRESS_BAD_HOSTNAME);
	return 1;
}

int airlock_egress_evaluate(const airlock_egress_policy *p, const char *host, uint16_t port,
                            airlock_egress_resolve_fn resolve, void *resolve_ctx,
                            airlock_egress_decision *ret, airlock_error *err)
{
	if (!resolve)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "egress evaluate");
	int r = egress_evaluate_begin(p, AIRLOCK_EGRESS_TRANSPORT_POLICY, host, port, ret, err);
	if (r <= 0)
		return r;
	return resolve_and_check(resolve, resolve_ctx, ret);
}

int airlock_egress_evaluate_transport(airlock_egress_transport t, const char *host, uint16_t port,
                                      airlock_egress_resolve_fn resolve, void *resolve_ctx,
                                      airlock_egress_decision *ret, airlock_error *err)
{
	if (t == AIRLOCK_EGRESS_TRANSPORT_POLICY || !resolve)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "egress evaluate: transport");
	int r = egress_evaluate_begin(NULL, t, host, port, ret, err);
	if (r <= 0)
		return r;
	return resolve_and_check(resolve, resolve_ctx, ret);
}

int airlock_egress_policy_covers(const airlock_egress_policy *op, const airlock_egress_policy *req,
                                 airlock_error *err)
{
	if (!op || !req)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "egress policy covers");
	if (req->mode != AIRLOCK_EGRESS_ALLOWLIST)
		return 0;
	if (op->mode != AIRLOCK_EGRESS_ALLOWLIST || op->n_destinations == 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "egress: the sandbox asks for an allowlist, but the operator's "
		                         "egress policy is mode deny");
	for (size_t i = 0; i < req->n_destinations; i++) {
		const airlock_egress_destination *rd = &req->destinations[i];
		const airlock_egress_destination *od = NULL;
		/* The same pattern string, not a match: a requested "*.a.com" is
		 * not inside an operator's "x.a.com", and "x.a.com" inside
		 * "*.a.com" would need the matcher's rules restated here. */
		for (size_t j = 0; !od && j < op->n_destinations; j++)
			if (rd->host && op->destinations[j].host &&
			    strcmp(rd->host, op->destinations[j].host) == 0)
				od = &op->destinations[j];
		if (!od)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "egress: destination %s is not in the operator's policy",
			                         rd->host ? rd->host : "(none)");
		for (size_t k = 0; k < rd->n_ports; k++) {
			bool listed = false;
			for (size_t m = 0; m < od->n_ports; m++)
				listed |= od->ports[m] == rd->ports[k];
			if (!listed)
				return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
				                         "egress: port %u of %s is not in the operator's policy",
				                         (unsigned)rd->ports[k], rd->host);
		}
	}
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
