/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress policy grammar (the specification, "The allowlist grammar"):
 * the YAML reader, the host-name normalizer, the IP-literal detector, the
 * one host matcher, and the printer.
 *
 * The document is read with libyaml's event API, descending only where the
 * grammar has a mapping or a list (four levels: root, egress, a destination,
 * its ports), so the nesting an input can make us follow is the grammar's,
 * not the input's. Anchors, aliases and explicit tags are refused: aliases
 * are how a small document expands into a large one, and a policy has no
 * use for any of them.
 *
 * Every error is "NAME:LINE: where: the rule broken", with the offending
 * value escaped (util_escape): a policy file may hold any bytes, and the
 * message ends up on a terminal or in a log.
 */
#include "airlock/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libpsl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "airlock/caps.h"
#include "util/util.h"
#include "core/yaml_reader.h"

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

static const char *host_rule(const char *v, size_t len, char out[AIRLOCK_HOSTNAME_MAX + 1]);

static bool violation(airlock_egress_violation *v, airlock_egress_rule rule, size_t dest,
                      size_t port, size_t first, const char *why)
{
	*v = (airlock_egress_violation){
		.rule = rule, .dest = dest, .port = port, .first = first, .why = why
	};
	return true;
}

/* all[idx] against itself and all[0..idx): true and *v when a rule is broken.
 * host_ruled: the host's own rule (host_rule) already ran on the text the
 * door read and d->host is the name it normalized, as the YAML reader does
 * in parse_host (it must: the rule names a mistake in what the operator
 * wrote, which normalizing would hide). The rule is then not run a second
 * time on its own output; every other rule here still runs for every door. */
static bool destination_rules(const airlock_egress_destination *all, size_t idx, bool host_ruled,
                              airlock_egress_violation *v)
{
	const airlock_egress_destination *d = &all[idx];
	char norm[AIRLOCK_HOSTNAME_MAX + 1];

	if (!d->host || !*d->host)
		return violation(v, AIRLOCK_EGRESS_RULE_HOST, idx, 0, 0,
		                 "a host name is required");
	const char *why = host_ruled ? NULL : host_rule(d->host, strlen(d->host), norm);
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
static bool mode_rules(const airlock_egress_policy *p, airlock_egress_violation *v)
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
	if (mode_rules(p, &v) && v.rule == AIRLOCK_EGRESS_RULE_TOO_MANY)
		return *ret = v, true;
	for (size_t i = 0; i < p->n_destinations; i++)
		if (destination_rules(p->destinations, i, false, &v))
			return *ret = v, true;
	if (mode_rules(p, &v))
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

/* ---- the YAML walk ---------------------------------------------------------- */

/* The policy parser reads through the shared reader. */
typedef airlock_yaml_reader pp;




static const char *pp_text(const pp *p)
{
	return (const char *)p->ev.data.scalar.value;
}

static size_t pp_len(const pp *p)
{
	return p->ev.data.scalar.length;
}

static const char *pp_quote(const pp *p, char *buf, size_t size)
{
	return util_escape(buf, size, pp_text(p), pp_len(p));
}

/* A plain empty, "~" or "null" scalar: YAML's null. */
static bool pp_null(const pp *p)
{
	if (p->ev.type != YAML_SCALAR_EVENT || p->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *v = pp_text(p);
	return pp_len(p) == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
	       strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

static bool pp_key_is(const pp *p, const char *key)
{
	return pp_len(p) == strlen(key) && memcmp(pp_text(p), key, pp_len(p)) == 0;
}

/* The next event, with the YAML features a policy has no use for refused. */

/* With a key scalar current: refuse anything but a plain name. */
static int pp_key(pp *p, const char *where)
{
	if (p->ev.type != YAML_SCALAR_EVENT)
		return config_yaml_fail(p, config_yaml_line(p), "%s: keys are plain names, got %s", where, config_yaml_kind(p));
	if (strnlen(pp_text(p), pp_len(p)) != pp_len(p))
		return config_yaml_fail(p, config_yaml_line(p), "%s: a key contains a NUL byte", where);
	return 0;
}

/* ---- destinations ----------------------------------------------------------- */

/* Strict decimal port: digits only, no sign, no leading zero (YAML 1.1 reads
 * 0443 as octal; a port written that way is a mistake), 1..65535. The same
 * rule as the CONNECT parser's (src/egress/connect.c), so that `airlock
 * egress check HOST 0443` refuses what the proxy answers 400 to;
 * tests/test_egress_policy.c runs both over the same inputs. */
bool airlock_port_parse(const char *s, size_t len, uint16_t *ret)
{
	if (!s || !ret || len == 0 || len > 5 || s[0] == '0')
		return false;
	unsigned v = 0;
	for (size_t i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v < 1 || v > 65535)
		return false;
	*ret = (uint16_t)v;
	return true;
}

/* The ports list as written: each a plain decimal scalar (the text rules
 * are this door's). Its rules as a list (not empty, no port twice) are
 * destination_rules', run on the destination once it is read; the line of
 * each port is kept in *ret_lines for that message. */
static int parse_ports(pp *p, size_t idx, airlock_egress_destination *d, size_t **ret_lines)
{
	char q[QUOTE_MAX];
	size_t line = config_yaml_line(p);

	if (pp_null(p))
		return config_yaml_fail(p, line,
		               "destinations[%zu].ports: a non-empty list of ports is required (there is no default port)",
		               idx);
	if (p->ev.type != YAML_SEQUENCE_START_EVENT)
		return config_yaml_fail(p, line, "destinations[%zu].ports: expected a list such as [443], got %s",
		               idx, config_yaml_kind(p));

	_cleanup_free_ uint16_t *ports = NULL;
	_cleanup_free_ size_t *lines = NULL;
	size_t n = 0, alloc = 0;
	for (;;) {
		int r = config_yaml_next(p);
		if (r < 0)
			return r;
		if (p->ev.type == YAML_SEQUENCE_END_EVENT)
			break;
		if (p->ev.type != YAML_SCALAR_EVENT || pp_null(p))
			return config_yaml_fail(p, config_yaml_line(p),
			               "destinations[%zu].ports[%zu]: expected a port number 1..65535, got %s",
			               idx, n, pp_null(p) ? "null" : config_yaml_kind(p));
		uint16_t port;
		if (p->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
			return config_yaml_fail(p, config_yaml_line(p),
			               "destinations[%zu].ports[%zu]: \"%s\" is quoted; write a port as a number",
			               idx, n, pp_quote(p, q, sizeof(q)));
		if (!airlock_port_parse(pp_text(p), pp_len(p), &port))
			return config_yaml_fail(p, config_yaml_line(p),
			               "destinations[%zu].ports[%zu]: \"%s\" is not a port (a decimal integer 1..65535, no leading zero)",
			               idx, n, pp_quote(p, q, sizeof(q)));
		/* No cap of its own: the input cap (AIRLOCK_EGRESS_POLICY_INPUT_MAX)
		 * bounds the list, at two bytes a port at least. */
		if (n == alloc) {
			size_t na = alloc ? alloc * 2 : 4;
			uint16_t *np = realloc(ports, na * sizeof(*ports));
			if (!np)
				return airlock_error_set(p->err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", p->name);
			ports = np;
			size_t *nl = realloc(lines, na * sizeof(*lines));
			if (!nl)
				return airlock_error_set(p->err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", p->name);
			lines = nl;
			alloc = na;
		}
		lines[n] = config_yaml_line(p);
		ports[n++] = port;
	}
	free(d->ports);
	d->ports = TAKE_PTR(ports);
	d->n_ports = n;
	free(*ret_lines);
	*ret_lines = TAKE_PTR(lines);
	return 0;
}

/* The host rule, in the order an operator's mistake is most usefully named:
 * a URL first, then an address, then a port, then the name's own shape. */
static const char *host_rule(const char *v, size_t len, char out[AIRLOCK_HOSTNAME_MAX + 1])
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

static int parse_host(pp *p, size_t idx, airlock_egress_destination *d)
{
	char q[QUOTE_MAX], norm[AIRLOCK_HOSTNAME_MAX + 1];

	if (p->ev.type != YAML_SCALAR_EVENT)
		return config_yaml_fail(p, config_yaml_line(p), "destinations[%zu].host: expected a host name, got %s", idx,
		               config_yaml_kind(p));
	if (pp_null(p))
		return config_yaml_fail(p, config_yaml_line(p), "destinations[%zu].host: a host name is required (got null)",
		               idx);
	const char *why = host_rule(pp_text(p), pp_len(p), norm);
	if (why)
		return config_yaml_fail(p, config_yaml_line(p), "destinations[%zu].host: \"%s\": %s", idx,
		               pp_quote(p, q, sizeof(q)), why);
	char *h = strdup(norm);
	if (!h)
		return airlock_error_set(p->err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", p->name);
	free(d->host);
	d->host = h;
	return 0;
}

/* Called with the destination's MAPPING_START current; returns with its
 * MAPPING_END current. d is filled; the caller frees it either way. */
typedef struct dest_lines {
	size_t host, ports;
	size_t *port; /* one per port */
} dest_lines;

static int parse_destination(pp *p, size_t idx, airlock_egress_destination *d, dest_lines *ret_lines)
{
	char q[QUOTE_MAX];
	size_t start = config_yaml_line(p), host_line = 0, ports_line = 0;

	for (;;) {
		int r = config_yaml_next(p);
		if (r < 0)
			return r;
		if (p->ev.type == YAML_MAPPING_END_EVENT)
			break;
		char where[48];
		snprintf(where, sizeof(where), "destinations[%zu]", idx);
		r = pp_key(p, where);
		if (r < 0)
			return r;
		size_t line = config_yaml_line(p);
		size_t *seen;
		bool host;
		if (pp_key_is(p, "host")) {
			seen = &host_line;
			host = true;
		} else if (pp_key_is(p, "ports")) {
			seen = &ports_line;
			host = false;
		} else {
			return config_yaml_fail(p, line,
			               "destinations[%zu]: unknown key \"%s\" (a destination has exactly host and ports)",
			               idx, pp_quote(p, q, sizeof(q)));
		}
		/* Two values for one key means someone believes the other one is
		 * in force: refused rather than last-wins. */
		if (*seen)
			return config_yaml_fail(p, line, "destinations[%zu]: duplicate key \"%s\" (first at line %zu)",
			               idx, host ? "host" : "ports", *seen);
		*seen = line;
		r = config_yaml_next(p);
		if (r < 0)
			return r;
		r = host ? parse_host(p, idx, d) : parse_ports(p, idx, d, &ret_lines->port);
		if (r < 0)
			return r;
	}
	if (!host_line)
		return config_yaml_fail(p, start, "destinations[%zu]: host is required", idx);
	if (!ports_line)
		return config_yaml_fail(p, start,
		               "destinations[%zu]: ports is required (there is no default port)", idx);
	ret_lines->host = host_line;
	ret_lines->ports = ports_line;
	return 0;
}

static void destination_clear(airlock_egress_destination *d)
{
	free(d->host);
	free(d->ports);
	*d = (airlock_egress_destination){ 0 };
}

/* A rule broken, said with this door's locations: the file's lines. */
static int yaml_violation(pp *p, const airlock_egress_policy *pol, const airlock_egress_violation *v,
                          const size_t *host_lines, const dest_lines *dl)
{
	char q[QUOTE_MAX];
	const airlock_egress_destination *d = &pol->destinations[v->dest];
	const char *h = d->host ? d->host : "";
	switch (v->rule) {
	case AIRLOCK_EGRESS_RULE_HOST_TWICE:
		return config_yaml_fail(p, dl->host,
		            "destinations[%zu].host: \"%s\" is already destinations[%zu] (line %zu); %s",
		            v->dest, util_escape(q, sizeof(q), h, strlen(h)), v->first,
		            host_lines[v->first], v->why);
	case AIRLOCK_EGRESS_RULE_PORTS_EMPTY:
		return config_yaml_fail(p, dl->ports, "destinations[%zu].ports: %s", v->dest, v->why);
	case AIRLOCK_EGRESS_RULE_PORT:
	case AIRLOCK_EGRESS_RULE_PORT_TWICE:
		return config_yaml_fail(p, dl->port ? dl->port[v->port] : dl->ports,
		            "destinations[%zu].ports[%zu]: port %u %s", v->dest, v->port,
		            (unsigned)d->ports[v->port], v->why);
	case AIRLOCK_EGRESS_RULE_HOST:
	case AIRLOCK_EGRESS_RULE_MODE:
	case AIRLOCK_EGRESS_RULE_DENY_LISTS:
	case AIRLOCK_EGRESS_RULE_ALLOWLIST_EMPTY:
	case AIRLOCK_EGRESS_RULE_TOO_MANY:
	default: /* the host's own rules */
		return config_yaml_fail(p, dl->host, "destinations[%zu].host: \"%s\": %s", v->dest,
		            util_escape(q, sizeof(q), h, strlen(h)), v->why);
	}
}

/* Called with the list's SEQUENCE_START current. */
static int parse_destinations(pp *p, airlock_egress_policy *pol)
{
	_cleanup_free_ size_t *host_lines = NULL;
	size_t alloc = 0;

	for (;;) {
		int r = config_yaml_next(p);
		if (r < 0)
			return r;
		if (p->ev.type == YAML_SEQUENCE_END_EVENT)
			return 0;
		size_t idx = pol->n_destinations;
		if (p->ev.type != YAML_MAPPING_START_EVENT)
			return config_yaml_fail(p, config_yaml_line(p),
			               "destinations[%zu]: expected a mapping with host and ports, got %s",
			               idx, config_yaml_kind(p));
		/* The destination cap is also a rule (policy_rules), but the reader
		 * has to stop here, before it allocates for the next one. */
		if (idx >= AIRLOCK_EGRESS_DESTINATIONS_MAX)
			return config_yaml_fail(p, config_yaml_line(p), "destinations: more than %d destinations",
			               AIRLOCK_EGRESS_DESTINATIONS_MAX);
		if (idx == alloc) {
			size_t na = alloc ? alloc * 2 : 8;
			airlock_egress_destination *nd =
				realloc(pol->destinations, na * sizeof(*nd));
			if (!nd)
				return airlock_error_set(p->err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", p->name);
			pol->destinations = nd;
			size_t *nl = realloc(host_lines, na * sizeof(*nl));
			if (!nl)
				return airlock_error_set(p->err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", p->name);
			host_lines = nl;
			alloc = na;
		}
		airlock_egress_destination d = { 0 };
		dest_lines dl = { 0 };
		r = parse_destination(p, idx, &d, &dl);
		if (r == 0) {
			/* The rules every door runs (the JSON decoder calls the same
			 * function through airlock_egress_policy_rules), on this
			 * destination against the ones before it; parse_host ran the
			 * host's own rule on the text read. */
			airlock_egress_violation v;
			pol->destinations[idx] = d;
			if (destination_rules(pol->destinations, idx, true, &v))
				r = yaml_violation(p, pol, &v, host_lines, &dl);
		}
		free(dl.port);
		if (r < 0) {
			destination_clear(&d);
			return r;
		}
		host_lines[idx] = dl.host;
		pol->n_destinations++;
	}
}

/* Called with the egress mapping's MAPPING_START current (or a null). */
static int parse_egress(pp *p, airlock_egress_policy *pol, size_t egress_line)
{
	char q[QUOTE_MAX];
	size_t mode_line = 0, dest_line = 0;

	pol->mode = AIRLOCK_EGRESS_DENY;
	if (pp_null(p))
		goto check; /* "egress:" and nothing else: the default, deny */
	if (p->ev.type != YAML_MAPPING_START_EVENT)
		return config_yaml_fail(p, config_yaml_line(p), "egress: expected a mapping with mode and destinations, got %s",
		               config_yaml_kind(p));
	for (;;) {
		int r = config_yaml_next(p);
		if (r < 0)
			return r;
		if (p->ev.type == YAML_MAPPING_END_EVENT)
			break;
		r = pp_key(p, "egress");
		if (r < 0)
			return r;
		size_t line = config_yaml_line(p);
		if (pp_key_is(p, "mode")) {
			if (mode_line)
				return config_yaml_fail(p, line, "egress: duplicate key \"mode\" (first at line %zu)",
				               mode_line);
			mode_line = line;
			r = config_yaml_next(p);
			if (r < 0)
				return r;
			if (p->ev.type != YAML_SCALAR_EVENT || pp_null(p))
				return config_yaml_fail(p, config_yaml_line(p), "mode: expected deny or allowlist, got %s",
				               pp_null(p) ? "null" : config_yaml_kind(p));
			airlock_egress_mode m = AIRLOCK_EGRESS_INVALID;
			if (strnlen(pp_text(p), pp_len(p)) == pp_len(p))
				m = airlock_egress_mode_parse(pp_text(p));
			if (m == AIRLOCK_EGRESS_INVALID && pp_key_is(p, "allow"))
				return config_yaml_fail(p, config_yaml_line(p),
				               "mode: there is no allow mode (an open mode is one typo from being selected); use allowlist and list the destinations");
			if (m == AIRLOCK_EGRESS_INVALID)
				return config_yaml_fail(p, config_yaml_line(p), "mode: unknown value \"%s\" (expected deny or allowlist)",
				               pp_quote(p, q, sizeof(q)));
			pol->mode = m;
		} else if (pp_key_is(p, "destinations")) {
			if (dest_line)
				return config_yaml_fail(p, line,
				               "egress: duplicate key \"destinations\" (first at line %zu)",
				               dest_line);
			dest_line = line;
			r = config_yaml_next(p);
			if (r < 0)
				return r;
			if (pp_null(p))
				continue; /* "destinations:" with nothing under it: none */
			if (p->ev.type != YAML_SEQUENCE_START_EVENT)
				return config_yaml_fail(p, config_yaml_line(p), "destinations: expected a list of destinations, got %s",
				               config_yaml_kind(p));
			r = parse_destinations(p, pol);
			if (r < 0)
				return r;
		} else {
			return config_yaml_fail(p, line, "egress: unknown key \"%s\" (known here: mode, destinations)",
			               pp_quote(p, q, sizeof(q)));
		}
	}
check:;
	/* The policy-wide rules every door runs (policy_rules). */
	airlock_egress_violation v;
	if (!mode_rules(pol, &v))
		return 0;
	switch (v.rule) {
	case AIRLOCK_EGRESS_RULE_DENY_LISTS:
		return config_yaml_fail(p, dest_line, "destinations: listed while mode is deny%s, %s",
		               mode_line ? "" : " (the default)", v.why);
	case AIRLOCK_EGRESS_RULE_TOO_MANY:
		return config_yaml_fail(p, dest_line, "destinations: %s", v.why);
	case AIRLOCK_EGRESS_RULE_MODE:
	case AIRLOCK_EGRESS_RULE_ALLOWLIST_EMPTY:
	case AIRLOCK_EGRESS_RULE_HOST:
	case AIRLOCK_EGRESS_RULE_HOST_TWICE:
	case AIRLOCK_EGRESS_RULE_PORTS_EMPTY:
	case AIRLOCK_EGRESS_RULE_PORT:
	case AIRLOCK_EGRESS_RULE_PORT_TWICE:
	default:
		return config_yaml_fail(p, dest_line ? dest_line : mode_line ? mode_line : egress_line,
		               "mode: %s", v.why);
	}
}

static int parse_document(pp *p, airlock_egress_policy *pol)
{
	char q[QUOTE_MAX];
	int r = config_yaml_next(p); /* STREAM_START */
	if (r < 0)
		return r;
	r = config_yaml_next(p);
	if (r < 0)
		return r;
	if (p->ev.type == YAML_STREAM_END_EVENT)
		return config_yaml_fail(p, 1, "the policy is empty: it is a mapping with exactly one key, egress");
	r = config_yaml_next(p); /* the root node after DOCUMENT_START */
	if (r < 0)
		return r;
	size_t root_line = config_yaml_line(p);
	if (p->ev.type != YAML_MAPPING_START_EVENT)
		return config_yaml_fail(p, root_line,
		               "the policy is a mapping with exactly one key, egress; got %s",
		               pp_null(p) ? "an empty document" : config_yaml_kind(p));
	size_t egress_line = 0;
	for (;;) {
		r = config_yaml_next(p);
		if (r < 0)
			return r;
		if (p->ev.type == YAML_MAPPING_END_EVENT)
			break;
		r = pp_key(p, "the policy");
		if (r < 0)
			return r;
		size_t line = config_yaml_line(p);
		if (!pp_key_is(p, "egress"))
			return config_yaml_fail(p, line,
			               "unknown key \"%s\" (the policy has exactly one key, egress)",
			               pp_quote(p, q, sizeof(q)));
		if (egress_line)
			return config_yaml_fail(p, line, "duplicate key \"egress\" (first at line %zu)", egress_line);
		egress_line = line;
		r = config_yaml_next(p);
		if (r < 0)
			return r;
		r = parse_egress(p, pol, egress_line);
		if (r < 0)
			return r;
	}
	if (!egress_line)
		return config_yaml_fail(p, root_line, "the policy has no egress key");
	r = config_yaml_next(p); /* DOCUMENT_END */
	if (r < 0)
		return r;
	r = config_yaml_next(p);
	if (r < 0)
		return r;
	if (p->ev.type != YAML_STREAM_END_EVENT)
		return config_yaml_fail(p, config_yaml_line(p), "a policy file holds one YAML document");
	return 0;
}

int airlock_egress_policy_parse(const char *name, const char *buf, size_t len,
                                airlock_egress_policy *ret, airlock_error *err)
{
	pp p;
	if (!name)
		name = "policy";
	int r = config_yaml_open(&p, name, "an egress policy", buf, len, err);
	if (r < 0)
		return r;
	if (!ret || (!buf && len) || len > AIRLOCK_EGRESS_POLICY_INPUT_MAX) {
		r = !ret        ? airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                                    "%s: nowhere to put the policy", p.name)
		    : !buf      ? airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: no input", p.name)
		                : airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                                    "%s: larger than %u bytes; an egress policy is a short list",
		                                    p.name, AIRLOCK_EGRESS_POLICY_INPUT_MAX);
		config_yaml_close(&p);
		return r;
	}

	airlock_egress_policy pol = { 0 };
	r = parse_document(&p, &pol);
	config_yaml_close(&p);
	if (r < 0) {
		airlock_egress_policy_clear(&pol);
		return r;
	}
	*ret = pol;
	return 0;
}

int airlock_egress_policy_load(const char *path, airlock_egress_policy *ret, airlock_error *err)
{
	if (!path)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "egress policy: no path given");
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r = config_read(path, AIRLOCK_EGRESS_POLICY_INPUT_MAX, &buf, &len, err);
	if (r < 0)
		return r;
	return airlock_egress_policy_parse(path, buf, len, ret, err);
}

/* ---- printing ------------------------------------------------------------------ */

int airlock_egress_policy_format(const airlock_egress_policy *p, char **ret, airlock_error *err)
{
	if (!ret)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "EgressPolicy: nowhere to print");
	/* Print only what parses back to the same policy: the rules every
	 * door runs. */
	int r = airlock_egress_policy_check(p, "EgressPolicy", err);
	if (r < 0)
		return r;

	_cleanup_free_ char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);
	if (!f)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "EgressPolicy: print");
	fprintf(f, "egress:\n  mode: %s\n", airlock_egress_mode_name(p->mode));
	if (p->n_destinations)
		fputs("  destinations:\n", f);
	for (size_t i = 0; i < p->n_destinations; i++) {
		const airlock_egress_destination *d = &p->destinations[i];
		/* Quoted always: "*" starts an alias in YAML, and a host like
		 * "null" or "yes" must not be read as anything but a name. */
		fprintf(f, "    - host: \"%s\"\n      ports: [", d->host);
		for (size_t j = 0; j < d->n_ports; j++)
			fprintf(f, "%s%u", j ? ", " : "", (unsigned)d->ports[j]);
		fputs("]\n", f);
	}
	if (fclose(f) != 0 || !text)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "EgressPolicy: print");
	*ret = TAKE_PTR(text);
	return 0;
}
