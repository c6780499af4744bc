/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress grammar's rules (the specification, "The allowlist grammar"):
 * the IP-literal detector, the host-name normalizer, the one host matcher
 * and the rules over a whole policy. Every door a policy comes through
 * (the operator's YAML, src/egress/policy.c; a spec's JSON,
 * src/core/json.c) reads its own syntax and then runs these, so a policy
 * refused at one door is refused at every door.
 */
#include "core/egress_rules.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libpsl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "util/util.h"

#define QUOTE_MAX 96
#define STR_(x) #x
#define STR(x) STR_(x)

/* ---- IP literals -------------------------------------------------------- */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/*
 * The WHATWG URL parser's "ends in a number" test, which is also the
 * superset of what inet_aton(3) accepts: a host whose last label (after
 * dropping one empty label from a trailing dot) is decimal digits, or "0x"
 * followed by hex digits, is handed to the IPv4 parser and is never looked
 * up as a name. Every inet_aton spelling (1 to 4 parts, each decimal, octal
 * with a leading 0, or hex with 0x) ends in such a label, so one test covers
 * 127.0.0.1, 127.1, 2130706433, 0x7f000001, 0177.0.0.1 and 0x7f.1, and also
 * the forms neither parser accepts (1.2.3.4.5, foo.123), which no resolver
 * treats as a plain name either.
 */
static bool ends_in_number(const char *s, size_t len)
{
	if (len > 0 && s[len - 1] == '.')
		len--;
	if (len == 0)
		return false;
	size_t start = len;
	while (start > 0 && s[start - 1] != '.')
		start--;
	const char *l = s + start;
	size_t n = len - start;
	if (n == 0)
		return false;
	if (n >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X')) {
		for (size_t i = 2; i < n; i++)
			if (!is_hex(l[i]))
				return false;
		return true;
	}
	for (size_t i = 0; i < n; i++)
		if (!is_digit(l[i]))
			return false;
	return true;
}

/* IPv6 text as inet_pton reads it, with an optional zone ("%eth0", or the
 * URL form "%25eth0") that getaddrinfo and URL parsers accept. */
static bool ipv6_text(const char *s, size_t len)
{
	char buf[INET6_ADDRSTRLEN + 1];
	const char *pct = memchr(s, '%', len);
	if (pct) {
		if ((size_t)(pct - s) + 1 >= len)
			return false; /* an empty zone */
		len = (size_t)(pct - s);
	}
	if (len == 0 || len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = 0;
	struct in6_addr a;
	return inet_pton(AF_INET6, buf, &a) == 1;
}

bool airlock_ip_literal(const char *s, size_t len)
{
	if (!s || len == 0 || memchr(s, 0, len))
		return false;
	if (s[0] == '[')
		return len >= 2 && s[len - 1] == ']' && ipv6_text(s + 1, len - 2);
	if (memchr(s, ':', len))
		return ipv6_text(s, len);
	/* glibc's inet_aton stops at the first whitespace and accepts what came
	 * before it ("127.0.0.1 x" is 127.0.0.1), so judge that prefix. */
	size_t n = 0;
	while (n < len && !is_space(s[n]))
		n++;
	return ends_in_number(s, n);
}

/* ---- host names ----------------------------------------------------------- */

/*
 * The Public Suffix List (libpsl, Debian's libpsl5 and publicsuffix). A
 * wildcard is "every host under this name", which is only one operator's
 * hosts when the name is a registrable domain: over a public suffix it is
 * every registrant's. Counting labels cannot tell "*.example.com" from
 * "*.co.uk"; the list can.
 *
 * Which entries count: all of them, the private section included. A private
 * entry such as github.io, blogspot.com or s3.amazonaws.com is a suffix
 * under which unrelated tenants get names, so "*.github.io" is every GitHub
 * Pages site: exactly the wildcard the rule exists to refuse. The implicit
 * "*" rule is kept too, so an unlisted top-level label ("*.internal",
 * "*.zz") is a public suffix as well, as single labels always were here.
 *
 * Which list: psl_latest(NULL), the newer of the list built into libpsl and
 * the one the publicsuffix package installs (/usr/share/publicsuffix/
 * public_suffix_list.dafsa). The packaged file is updated with the
 * distribution, independently of the library, and new private suffixes are
 * added to the list all the time: a stale list is the failure that matters
 * (a new shared suffix would pass), so the newest one available wins. It is
 * loaded once per process, on first use, and never changes after (a
 * policy's validity does not change under a running process); without any
 * list, every wildcard is refused rather than judged by label counting.
 *
 * An exact host that is itself a public suffix ("github.io", "co.uk") is
 * allowed: an exact name matches only itself, so it grants one host and no
 * registrant's names under it, and several are real hosts (github.io serves
 * a redirect).
 */
static const psl_ctx_t *psl_list;
static pthread_once_t psl_once = PTHREAD_ONCE_INIT;

static void psl_load(void)
{
	/* Never freed: the list lives as long as the process, read-only and
	 * shared by every thread once loaded. */
	const psl_ctx_t *l = psl_latest(NULL);
	psl_list = l ? l : psl_builtin();
}

/* 1 when name (normalized, no wildcard) is a public suffix, 0 when not, -1
 * when there is no list to ask. */
static int public_suffix(const char *name)
{
	pthread_once(&psl_once, psl_load);
	if (!psl_list)
		return -1;
	return psl_is_public_suffix2(psl_list, name, PSL_TYPE_ANY) ? 1 : 0;
}

/*
 * Check and normalize one host name (the header's rules). Returns NULL and
 * fills out, or the rule broken, in words, for the parser's message; out is
 * then untouched.
 *
 * A wildcard over a public suffix ("*.com", "*.co.uk", "*.github.io") is
 * refused: it would match every registrant's hosts under that suffix, which
 * is an open mode with extra steps (see public_suffix above).
 */
static const char *host_problem(const char *in, size_t len, bool allow_wildcard,
                                char out[AIRLOCK_HOSTNAME_MAX + 1])
{
	char buf[AIRLOCK_HOSTNAME_MAX + 1];

	if (!in || len == 0)
		return "a host name must not be empty";
	if (memchr(in, 0, len))
		return "a host name must not contain a NUL byte";
	/* One trailing dot is the root label written out; it names the same
	 * host, so it is dropped. A second one is an empty label. */
	if (in[len - 1] == '.')
		len--;
	if (len == 0)
		return "a host name must not be empty";
	if (in[len - 1] == '.')
		return "a host name may end in at most one dot (found an empty label)";
	if (len > AIRLOCK_HOSTNAME_MAX)
		return "a host name is at most 253 bytes";

	size_t i = 0;
	if (in[0] == '*') {
		if (!allow_wildcard)
			return "a wildcard is not a host name";
		if (len <= 2 || in[1] != '.')
			return "a wildcard is exactly \"*.\" followed by a name: the star is one whole leftmost label";
		buf[0] = '*';
		buf[1] = '.';
		i = 2;
	}
	if (airlock_ip_literal(in + i, len - i) || ends_in_number(in + i, len - i))
		return "an IP address is not a destination; name the host (a name whose last label is a number is read as an IPv4 address)";

	size_t label_len = 0;
	for (; i < len; i++) {
		char c = in[i];
		if (c == '.') {
			if (label_len == 0)
				return "a host name has no empty labels (two dots in a row, or a leading dot)";
			if (in[i - 1] == '-')
				return "a label must not start or end with '-'";
			label_len = 0;
			buf[i] = c;
			continue;
		}
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c == '*')
			return "a wildcard is only the whole leftmost label (\"*.example.com\"); '*' may not appear anywhere else";
		if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-'))
			return "a host name has only letters, digits, '-' and '.' (no scheme, port, path, user or spaces)";
		if (c == '-' && label_len == 0)
			return "a label must not start or end with '-'";
		if (++label_len > AIRLOCK_DNS_LABEL_MAX)
			return "a label is at most 63 bytes";
		buf[i] = c;
	}
	if (label_len == 0)
		return "a host name has no empty labels (two dots in a row, or a leading dot)";
	if (in[len - 1] == '-')
		return "a label must not start or end with '-'";
	buf[len] = 0;
	if (buf[0] == '*') {
		int ps = public_suffix(buf + 2);
		if (ps < 0)
			return "a wildcard cannot be checked: no Public Suffix List could be loaded (install the publicsuffix package); name the hosts exactly";
		if (ps > 0)
			return "a wildcard over a public suffix (a name on the Public Suffix List: a top-level domain such as com, or a shared suffix such as co.uk or github.io) would match every registrant's hosts under it; write a registrable domain after \"*.\" (\"*.example.co.uk\")";
	}
	memcpy(out, buf, len + 1);
	return NULL;
}

bool airlock_hostname_normalize(const char *in, size_t len, bool allow_wildcard,
                                char out[AIRLOCK_HOSTNAME_MAX + 1])
{
	if (!out)
		return false;
	return host_problem(in, len, allow_wildcard, out) == NULL;
}

bool airlock_egress_host_matches(const char *pattern, const char *host)
{
	if (!pattern || !host || !*host || strchr(host, '*'))
		return false;
	if (pattern[0] != '*')
		return strcmp(pattern, host) == 0;
	if (pattern[1] != '.' || pattern[2] == 0)
		return false;
	/* "*.example.com" matches exactly one more label in front of
	 * ".example.com": never example.com itself, never a.b.example.com, and
	 * never evilexample.com (the suffix carries its leading dot, so the
	 * comparison is on a label boundary). */
	const char *suffix = pattern + 1;
	size_t sl = strlen(suffix), hl = strlen(host);
	if (hl <= sl || strcmp(host + hl - sl, suffix) != 0)
		return false;
	return memchr(host, '.', hl - sl) == NULL;
}

/* ---- the rules every door runs ------------------------------------------------
 *
 * A policy reaches the service and the proxy through two doors: the
 * operator's YAML file (airlock_egress_policy_parse) and JSON, as a spec
 * carries it (airlock_egress_policy_from_json, src/core/json.c). Each door
 * reads its own syntax (YAML scalars, JSON values); the rules over what was
 * read are these functions, and both doors call them: the YAML reader per
 * destination as it goes (so its message has the line), the JSON decoder
 * through airlock_egress_policy_rules. A second copy of any rule is a
 * defect: it is how a policy refused in one door came in through the other.
 */

static bool violation(airlock_egress_violation *v, airlock_egress_rule rule, size_t dest,
                      size_t port, size_t first, const char *why)
{
	*v = (airlock_egress_violation){
		.rule = rule, .dest = dest, .port = port, .first = first, .why = why
	};
	return true;
}

/* all[idx] against itself and all[0..idx): true and *v when a rule is broken.
 * host_ruled: the host's own rule (egress_host_rule) already ran on the text the
 * door read and d->host is the name it normalized, as the YAML reader does
 * in parse_host (it must: the rule names a mistake in what the operator
 * wrote, which normalizing would hide). The rule is then not run a second
 * time on its own output; every other rule here still runs for every door. */
bool egress_destination_rules(const airlock_egress_destination *all, size_t idx, bool host_ruled,
                              airlock_egress_violation *v)
{
	const airlock_egress_destination *d = &all[idx];
	char norm[AIRLOCK_HOSTNAME_MAX + 1];

	if (!d->host || !*d->host)
		return violation(v, AIRLOCK_EGRESS_RULE_HOST, idx, 0, 0,
		                 "a host name is required");
	const char *why = host_ruled ? NULL : egress_host_rule(d->host, strlen(d->host), norm);
	if (why)
		return violation(v, AIRLOCK_EGRESS_RULE_HOST, idx, 0, 0, why);
	/* What a door stores is the normalized name (the matcher compares
	 * normalized names only): the YAML reader stores what it normalized;
	 * a decoded name that is not already normalized would never match. */
	if (!host_ruled && strcmp(norm, d->host) != 0)
		return violation(v, AIRLOCK_EGRESS_RULE_HOST, idx, 0, 0,
		                 "not in normalized form (lowercase, without a trailing dot)");
	/* The same host twice would leave which ports apply to a reading of
	 * the policy; one entry per host, with all its ports. */
	for (size_t i = 0; i < idx; i++)
		if (all[i].host && strcmp(all[i].host, d->host) == 0)
			return violation(v, AIRLOCK_EGRESS_RULE_HOST_TWICE, idx, 0, i,
			                 "list each host once with all its ports");
	/* No default port: the destination that matters is the one on a port
	 * nobody wrote down. */
	if (d->n_ports == 0 || !d->ports)
		return violation(v, AIRLOCK_EGRESS_RULE_PORTS_EMPTY, idx, 0, 0,
		                 "must list at least one port (there is no default port)");
	/* One bit per port: duplicates are found in one pass however long the
	 * list is. */
	uint8_t seen[65536 / 8];
	memset(seen, 0, sizeof(seen));
	for (size_t j = 0; j < d->n_ports; j++) {
		uint16_t port = d->ports[j];
		if (port == 0)
			return violation(v, AIRLOCK_EGRESS_RULE_PORT, idx, j, 0, "is not a port (1..65535)");
		if (seen[port / 8] & (1u << (port % 8))) {
			size_t first = 0;
			while (d->ports[first] != port)
				first++;
			return violation(v, AIRLOCK_EGRESS_RULE_PORT_TWICE, idx, j, first, "is listed twice");
		}
		seen[port / 8] |= (uint8_t)(1u << (port % 8));
	}
	return false;
}

/* The policy-wide rules: true and *v when one is broken. A policy that says
 * two things is refused rather than read one way: whichever way we read it,
 * the operator meant the other. */
bool egress_mode_rules(const airlock_egress_policy *p, airlock_egress_violation *v)
{
	if (p->mode != AIRLOCK_EGRESS_DENY && p->mode != AIRLOCK_EGRESS_ALLOWLIST)
		return violation(v, AIRLOCK_EGRESS_RULE_MODE, 0, 0, 0, "must be deny or allowlist");
	if (p->n_destinations > AIRLOCK_EGRESS_DESTINATIONS_MAX)
		return violation(v, AIRLOCK_EGRESS_RULE_TOO_MANY, 0, 0, 0,
		                 "more than " STR(AIRLOCK_EGRESS_DESTINATIONS_MAX) " destinations");
	if (p->mode == AIRLOCK_EGRESS_DENY && p->n_destinations > 0)
		return violation(v, AIRLOCK_EGRESS_RULE_DENY_LISTS, 0, 0, 0,
		                 "which denies everything; set mode: allowlist or remove them");
	if (p->mode == AIRLOCK_EGRESS_ALLOWLIST && p->n_destinations == 0)
		return violation(v, AIRLOCK_EGRESS_RULE_ALLOWLIST_EMPTY, 0, 0, 0,
		                 "allowlist with no destinations allows nothing; list at least one destination or use mode: deny");
	return false;
}

bool airlock_egress_policy_rules(const airlock_egress_policy *p, airlock_egress_violation *ret)
{
	airlock_egress_violation v;
	if (!p || !ret)
		return false;
	if (p->n_destinations > 0 && !p->destinations)
		return violation(ret, AIRLOCK_EGRESS_RULE_MODE, 0, 0, 0, "destinations missing");
	/* The count first: the duplicate check is quadratic in it. */
	if (egress_mode_rules(p, &v) && v.rule == AIRLOCK_EGRESS_RULE_TOO_MANY)
		return *ret = v, true;
	for (size_t i = 0; i < p->n_destinations; i++)
		if (egress_destination_rules(p->destinations, i, false, &v))
			return *ret = v, true;
	if (egress_mode_rules(p, &v))
		return *ret = v, true;
	return false;
}

int airlock_egress_policy_check(const airlock_egress_policy *p, const char *what,
                                airlock_error *err)
{
	airlock_egress_violation v;
	char q[QUOTE_MAX];
	if (!what)
		what = "EgressPolicy";
	if (!p)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: missing", what);
	if (!airlock_egress_policy_rules(p, &v))
		return 0;
	const airlock_egress_destination *d =
		p->destinations && v.dest < p->n_destinations ? &p->destinations[v.dest] : NULL;
	const char *h = d && d->host ? d->host : "";
	switch (v.rule) {
	case AIRLOCK_EGRESS_RULE_HOST:
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s.destinations[%zu].host: \"%s\": %s",
		                         what, v.dest, util_escape(q, sizeof(q), h, strlen(h)), v.why);
	case AIRLOCK_EGRESS_RULE_HOST_TWICE:
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "%s.destinations[%zu].host: \"%s\" is already destinations[%zu]; %s",
		                         what, v.dest, util_escape(q, sizeof(q), h, strlen(h)), v.first, v.why);
	case AIRLOCK_EGRESS_RULE_PORTS_EMPTY:
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s.destinations[%zu].ports: %s", what,
		                         v.dest, v.why);
	case AIRLOCK_EGRESS_RULE_PORT:
	case AIRLOCK_EGRESS_RULE_PORT_TWICE:
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s.destinations[%zu].ports[%zu]: port %u %s",
		                         what, v.dest, v.port, (unsigned)d->ports[v.port], v.why);
	case AIRLOCK_EGRESS_RULE_DENY_LISTS:
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "%s.destinations: listed while mode is deny, %s", what, v.why);
	case AIRLOCK_EGRESS_RULE_TOO_MANY:
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s.destinations: %s", what, v.why);
	case AIRLOCK_EGRESS_RULE_MODE:
	case AIRLOCK_EGRESS_RULE_ALLOWLIST_EMPTY:
	default:
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s.mode: %s", what, v.why);
	}
}

/* The host rule, in the order an operator's mistake is most usefully named:
 * a URL first, then an address, then a port, then the name's own shape. */
const char *egress_host_rule(const char *v, size_t len, char out[AIRLOCK_HOSTNAME_MAX + 1])
{
	const char *colon = memchr(v, ':', len);
	if (len >= 3 && colon && (size_t)(colon - v) + 2 < len && colon[1] == '/' && colon[2] == '/')
		return "a destination has no scheme: the proxy sees CONNECT host:port, so a scheme would look enforced and not be; write the bare host name";
	if (memchr(v, '@', len))
		return "a destination has no user information ('@'); write the bare host name";
	if (memchr(v, '/', len) || memchr(v, '?', len) || memchr(v, '#', len))
		return "a destination has no path, query or fragment; write the bare host name";
	if (airlock_ip_literal(v, len))
		return "an IP address is not a destination; name the host";
	if (v[0] == '[') {
		const char *close = memchr(v, ']', len);
		if (close && airlock_ip_literal(v, (size_t)(close - v) + 1))
			return "an IP address is not a destination; name the host";
	}
	if (colon) {
		if (memchr(colon + 1, ':', len - (size_t)(colon - v) - 1) == NULL &&
		    airlock_ip_literal(v, (size_t)(colon - v)))
			return "an IP address is not a destination; name the host";
		return "a destination's host has no port; list ports under ports";
	}
	return host_problem(v, len, true, out);
}
