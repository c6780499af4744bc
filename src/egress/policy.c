/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress policy's YAML door and its printer (the specification, "The
 * allowlist grammar"). The rules every door runs (the host-name
 * normalizer, the IP-literal detector, the one host matcher, the policy's
 * rules) are the core's: src/core/egress_rules.c.
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

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "airlock/caps.h"
#include "util/util.h"
#include "core/egress_rules.h"
#include "core/yaml_reader.h"

#define QUOTE_MAX 96
#define STR_(x) #x
#define STR(x) STR_(x)

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
		if (s[i] < '0' || s[i] > '9')
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
 * egress_destination_rules', run on the destination once it is read; the line of
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

static int parse_host(pp *p, size_t idx, airlock_egress_destination *d)
{
	char q[QUOTE_MAX], norm[AIRLOCK_HOSTNAME_MAX + 1];

	if (p->ev.type != YAML_SCALAR_EVENT)
		return config_yaml_fail(p, config_yaml_line(p), "destinations[%zu].host: expected a host name, got %s", idx,
		               config_yaml_kind(p));
	if (pp_null(p))
		return config_yaml_fail(p, config_yaml_line(p), "destinations[%zu].host: a host name is required (got null)",
		               idx);
	const char *why = egress_host_rule(pp_text(p), pp_len(p), norm);
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
			if (egress_destination_rules(pol->destinations, idx, true, &v))
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
	if (!egress_mode_rules(pol, &v))
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
