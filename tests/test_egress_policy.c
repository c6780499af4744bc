/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress policy grammar (the specification, "The allowlist grammar"):
 * every rule, each refusal naming the file, the line and the rule; the
 * host-name normalizer; IP literals in every spelling a resolver or a URL
 * parser accepts; the one host matcher; print-then-parse round trips; and
 * the input and destination caps.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "airlock/egress.h"

static int parse(const char *doc, airlock_egress_policy *p, airlock_error *err)
{
	return airlock_egress_policy_parse("policy.yaml", doc, strlen(doc), p, err);
}

static void parse_ok(const char *doc, airlock_egress_policy *p)
{
	airlock_error err = { 0 };
	cr_assert_eq(parse(doc, p, &err), 0, "[%s]: %s", doc, err.message);
}

/* ---- refusals: file, line, rule -------------------------------------------- */

typedef struct bad_case {
	const char *doc;
	size_t line;
	const char *rule; /* a substring of the message that names the rule */
} bad_case;

#define HEAD "egress:\n  mode: allowlist\n  destinations:\n"
/* With HEAD, the first destination's host is on line 4, its ports on 5. */

static const bad_case bad_cases[] = {
	/* the document */
	{ "", 1, "the policy is empty" },
	{ "# only a comment\n", 1, "the policy is empty" },
	{ "- a\n- b\n", 1, "exactly one key, egress" },
	{ "just a string\n", 1, "exactly one key, egress" },
	{ "mode: allowlist\n", 1, "unknown key \"mode\" (the policy has exactly one key, egress)" },
	{ "egress:\n  mode: deny\nextra: 1\n", 3, "unknown key \"extra\"" },
	{ "egress:\n  mode: deny\negress:\n  mode: deny\n", 3, "duplicate key \"egress\" (first at line 1)" },
	{ "egress: [1]\n", 1, "egress: expected a mapping" },
	{ "egress:\n  mode: deny\n---\negress:\n  mode: deny\n", 3, "one YAML document" },
	{ "egress:\n  mode: \"deny\n", 3, "not valid YAML" },
	{ "egress:\n  mode: deny\n destinations: []\n", 3, "not valid YAML" },
	{ "egress: &a\n  mode: deny\n", 1, "anchors are not allowed" },
	{ "egress:\n  mode: *a\n", 2, "aliases are not allowed" },
	{ "egress:\n  mode: !!str deny\n", 2, "explicit tags are not allowed" },
	{ "egress:\n  mode: deny\n  ? [a]\n  : b\n", 3, "keys are plain names" },
	/* mode */
	{ "egress:\n  mode: allow\n", 2, "there is no allow mode" },
	{ "egress:\n  mode: Deny\n", 2, "unknown value \"Deny\" (expected deny or allowlist)" },
	{ "egress:\n  mode: open\n", 2, "expected deny or allowlist" },
	{ "egress:\n  mode:\n", 2, "mode: expected deny or allowlist, got null" },
	{ "egress:\n  mode: [deny]\n", 2, "mode: expected deny or allowlist, got a list" },
	{ "egress:\n  mode: deny\n  mode: deny\n", 3, "duplicate key \"mode\" (first at line 2)" },
	{ "egress:\n  mode: deny\n  allow: true\n", 3, "unknown key \"allow\" (known here: mode, destinations)" },
	/* the public-HTTPS transports exist only in code: no policy names one */
	{ "egress:\n  mode: deny\n  transport: browser_resources\n", 3, "unknown key \"transport\"" },
	{ "egress:\n  mode: browser_resources\n", 2, "mode: unknown value \"browser_resources\" (expected deny or allowlist)" },
	/* a policy that says two things */
	{ "egress:\n  mode: allowlist\n", 2, "allowlist with no destinations allows nothing" },
	{ "egress:\n  mode: allowlist\n  destinations: []\n", 3, "allowlist with no destinations" },
	{ "egress:\n  mode: deny\n  destinations:\n    - host: a.example.com\n      ports: [443]\n", 3,
	  "listed while mode is deny, which denies everything" },
	{ "egress:\n  destinations:\n    - host: a.example.com\n      ports: [443]\n", 2,
	  "listed while mode is deny (the default)" },
	/* destinations */
	{ "egress:\n  mode: allowlist\n  destinations: pypi.org\n", 3, "destinations: expected a list" },
	{ HEAD "    - pypi.org\n", 4, "destinations[0]: expected a mapping with host and ports" },
	{ HEAD "    - host: pypi.org\n", 4, "destinations[0]: ports is required (there is no default port)" },
	{ HEAD "    - ports: [443]\n", 4, "destinations[0]: host is required" },
	{ HEAD "    - host: pypi.org\n      ports: [443]\n      scheme: https\n", 6,
	  "destinations[0]: unknown key \"scheme\" (a destination has exactly host and ports)" },
	{ HEAD "    - host: pypi.org\n      host: pypi.org\n      ports: [443]\n", 5,
	  "destinations[0]: duplicate key \"host\" (first at line 4)" },
	{ HEAD "    - host: pypi.org\n      ports: [443]\n    - host: PyPI.org.\n      ports: [80]\n", 6,
	  "destinations[1].host: \"pypi.org\" is already destinations[0] (line 4)" },
	/* ports */
	{ HEAD "    - host: pypi.org\n      ports: []\n", 5, "destinations[0].ports: must list at least one port" },
	{ HEAD "    - host: pypi.org\n      ports:\n", 5, "a non-empty list of ports is required" },
	{ HEAD "    - host: pypi.org\n      ports: 443\n", 5, "expected a list such as [443]" },
	{ HEAD "    - host: pypi.org\n      ports: [0]\n", 5, "ports[0]: \"0\" is not a port" },
	{ HEAD "    - host: pypi.org\n      ports: [65536]\n", 5, "ports[0]: \"65536\" is not a port" },
	{ HEAD "    - host: pypi.org\n      ports: [443, -1]\n", 5, "ports[1]: \"-1\" is not a port" },
	{ HEAD "    - host: pypi.org\n      ports: [0443]\n", 5, "no leading zero" },
	{ HEAD "    - host: pypi.org\n      ports: [0x1bb]\n", 5, "is not a port" },
	{ HEAD "    - host: pypi.org\n      ports: [443.0]\n", 5, "is not a port" },
	{ HEAD "    - host: pypi.org\n      ports: [\"443\"]\n", 5, "is quoted; write a port as a number" },
	{ HEAD "    - host: pypi.org\n      ports: [~]\n", 5, "expected a port number 1..65535, got null" },
	{ HEAD "    - host: pypi.org\n      ports: [[443]]\n", 5, "got a list" },
	{ HEAD "    - host: pypi.org\n      ports:\n        - 443\n        - 80\n        - 443\n", 8,
	  "destinations[0].ports[2]: port 443 is listed twice" },
	/* host: no scheme, path, userinfo, port */
	{ HEAD "    - host: https://pypi.org\n      ports: [443]\n", 4, "destinations[0].host: \"https://pypi.org\": a destination has no scheme" },
	{ HEAD "    - host: pypi.org/simple\n      ports: [443]\n", 4, "no path, query or fragment" },
	{ HEAD "    - host: \"pypi.org?x\"\n      ports: [443]\n", 4, "no path, query or fragment" },
	{ HEAD "    - host: user@pypi.org\n      ports: [443]\n", 4, "no user information" },
	{ HEAD "    - host: pypi.org:443\n      ports: [443]\n", 4, "has no port; list ports under ports" },
	{ HEAD "    - host:\n      ports: [443]\n", 4, "a host name is required (got null)" },
	{ HEAD "    - host: [a]\n      ports: [443]\n", 4, "expected a host name, got a list" },
	/* host: name shape */
	{ HEAD "    - host: \"\"\n      ports: [443]\n", 4, "must not be empty" },
	{ HEAD "    - host: pypi.org..\n      ports: [443]\n", 4, "at most one dot" },
	{ HEAD "    - host: .pypi.org\n      ports: [443]\n", 4, "no empty labels" },
	{ HEAD "    - host: pypi..org\n      ports: [443]\n", 4, "no empty labels" },
	{ HEAD "    - host: -pypi.org\n      ports: [443]\n", 4, "must not start or end with '-'" },
	{ HEAD "    - host: pypi-.org\n      ports: [443]\n", 4, "must not start or end with '-'" },
	{ HEAD "    - host: pypi.org-\n      ports: [443]\n", 4, "must not start or end with '-'" },
	{ HEAD "    - host: py_pi.org\n      ports: [443]\n", 4, "only letters, digits, '-' and '.'" },
	{ HEAD "    - host: \"py pi.org\"\n      ports: [443]\n", 4, "only letters, digits" },
	{ HEAD "    - host: \"caf\xc3\xa9.example\"\n      ports: [443]\n", 4, "only letters, digits" },
	{ HEAD "    - host: \"a\\x00b.org\"\n      ports: [443]\n", 4, "NUL byte" },
	{ HEAD "    - host: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.org\n      ports: [443]\n", 4,
	  "a label is at most 63 bytes" },
	/* host: wildcards */
	{ HEAD "    - host: \"*\"\n      ports: [443]\n", 4, "a wildcard is exactly \"*.\" followed by a name" },
	{ HEAD "    - host: \"*.\"\n      ports: [443]\n", 4, "a wildcard is exactly" },
	{ HEAD "    - host: \"*foo.com\"\n      ports: [443]\n", 4, "a wildcard is exactly" },
	/* a wildcard over a public suffix: one rule, one reason, whatever the label count */
	{ HEAD "    - host: \"*.com\"\n      ports: [443]\n", 4, "a wildcard over a public suffix" },
	{ HEAD "    - host: \"*.co.uk\"\n      ports: [443]\n", 4, "a wildcard over a public suffix" },
	{ HEAD "    - host: \"*.com.au\"\n      ports: [443]\n", 4, "a wildcard over a public suffix" },
	{ HEAD "    - host: \"*.github.io\"\n      ports: [443]\n", 4, "a wildcard over a public suffix" },
	{ HEAD "    - host: \"a.*.example.com\"\n      ports: [443]\n", 4, "'*' may not appear anywhere else" },
	{ HEAD "    - host: \"*.*.example.com\"\n      ports: [443]\n", 4, "'*' may not appear anywhere else" },
	{ HEAD "    - host: \"foo*.example.com\"\n      ports: [443]\n", 4, "'*' may not appear anywhere else" },
	{ HEAD "    - host: \"example.*\"\n      ports: [443]\n", 4, "'*' may not appear anywhere else" },
	{ HEAD "    - host: \"*.10.0.0.1\"\n      ports: [443]\n", 4, "an IP address is not a destination" },
};

static void expect_bad(const bad_case *c)
{
	airlock_egress_policy p;
	memset(&p, 0xa5, sizeof(p));
	airlock_egress_policy before = p;
	airlock_error err = { 0 };
	int r = parse(c->doc, &p, &err);
	cr_expect_eq(r, airlock_errcode(AIRLOCK_ERR_CONFIG), "should fail: [%s] (rc %d)", c->doc, r);
	cr_expect_eq(memcmp(&p, &before, sizeof(p)), 0, "ret written on failure: [%s]", c->doc);
	if (r == 0) {
		airlock_egress_policy_clear(&p);
		return;
	}
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "policy.yaml:%zu: ", c->line);
	cr_expect(strncmp(err.message, prefix, strlen(prefix)) == 0,
	          "[%s]: message \"%s\" does not start with \"%s\"", c->doc, err.message, prefix);
	cr_expect(strstr(err.message, c->rule) != NULL, "[%s]: message \"%s\" lacks \"%s\"", c->doc,
	          err.message, c->rule);
}

Test(egress_policy, every_rule_names_file_line_and_rule)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++)
		expect_bad(&bad_cases[i]);
}

/* ---- IP literals in every spelling --------------------------------------------- */

static const char *const ip_spellings[] = {
	"127.0.0.1", "127.1", "127.0.1", "2130706433", "0x7f000001", "0X7F000001", "0177.0.0.1",
	"0177.1", "0x7f.1", "0x7f.0.0.1", "017700000001", "127.0.0.1.", "1.2.3.4.5", "0x",
	"169.254.169.254", "0xa9fea9fe", "2852039166", "0251.0376.0251.0376", "10.0.0.1", "0",
	"[::1]", "::1", "::", "[::]", "::ffff:127.0.0.1", "[::ffff:127.0.0.1]", "::ffff:7f00:1",
	"fe80::1%eth0", "[fe80::1%25eth0]", "fe80::1%25eth0", "2001:db8::1", "64:ff9b::7f00:1",
	"2002:7f00:1::", "FE80::1", "127.0.0.1 trailing", "127.0.0.1\tx", "foo.123", "foo.0x1f",
	"example.com.1",
};

Test(egress_policy, ip_literal_every_spelling)
{
	for (size_t i = 0; i < sizeof(ip_spellings) / sizeof(ip_spellings[0]); i++) {
		const char *s = ip_spellings[i];
		cr_expect(airlock_ip_literal(s, strlen(s)), "\"%s\" is an IP literal", s);
		char out[AIRLOCK_HOSTNAME_MAX + 1];
		cr_expect(!airlock_hostname_normalize(s, strlen(s), false, out),
		          "\"%s\" must not normalize as a name", s);
		cr_expect(!airlock_hostname_normalize(s, strlen(s), true, out),
		          "\"%s\" must not normalize as a name (wildcards allowed)", s);
	}
}

Test(egress_policy, ip_literal_refused_as_destination)
{
	static const char *const hosts[] = {
		"127.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "0x7f.1",
		"\"[::1]\"", "\"::1\"", "\"::ffff:127.0.0.1\"", "\"fe80::1%eth0\"", "169.254.169.254",
		"\"[::1]:443\"", "\"127.0.0.1:443\"", "127.0.0.1.", "1.2.3.4.5",
	};
	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		char doc[256];
		snprintf(doc, sizeof(doc), HEAD "    - host: %s\n      ports: [443]\n", hosts[i]);
		bad_case c = { doc, 4, "destinations[0].host: " };
		expect_bad(&c);
		c.rule = "an IP address is not a destination; name the host";
		expect_bad(&c);
	}
}

Test(egress_policy, not_ip_literals)
{
	static const char *const names[] = {
		"pypi.org", "1password.com", "123.example.com", "0x7f.example.com", "a.b", "localhost",
		"example.com.", "x1", "[pypi.org]", "pypi.org:443", "", "::g", "[::1", "fe80::1%",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		cr_expect(!airlock_ip_literal(names[i], strlen(names[i])), "\"%s\" is not an IP literal",
		          names[i]);
	cr_expect(!airlock_ip_literal(NULL, 3));
	cr_expect(!airlock_ip_literal("127.0.0.1\0x", 11), "an embedded NUL is not an address");
}

/* ---- the normalizer ------------------------------------------------------------------ */

typedef struct norm_case {
	const char *in;
	bool wildcard;
	const char *out; /* NULL: refused */
} norm_case;

static const norm_case norm_cases[] = {
	{ "pypi.org", false, "pypi.org" },
	{ "PyPI.ORG", false, "pypi.org" },
	{ "pypi.org.", false, "pypi.org" },
	{ "PYPI.ORG.", false, "pypi.org" },
	{ "pypi.org..", false, NULL },
	{ ".", false, NULL },
	{ "", false, NULL },
	{ ".pypi.org", false, NULL },
	{ "localhost", false, "localhost" },
	{ "xn--bcher-kva.example", false, "xn--bcher-kva.example" },
	{ "a-b.c-d.example", false, "a-b.c-d.example" },
	{ "a--b.example", false, "a--b.example" },
	{ "-a.example", false, NULL },
	{ "a-.example", false, NULL },
	{ "a_b.example", false, NULL },
	{ "a b.example", false, NULL },
	{ "a.example/", false, NULL },
	{ "*.example.com", false, NULL },
	{ "*.Example.COM.", true, "*.example.com" },
	{ "*.example.com", true, "*.example.com" },
	{ "*.com", true, NULL },
	{ "*.com.", true, NULL },
	{ "*.co.uk", true, NULL },
	{ "*.CO.UK.", true, NULL },
	{ "*.github.io", true, NULL },
	{ "*.example.co.uk", true, "*.example.co.uk" },
	{ "*.octocat.github.io", true, "*.octocat.github.io" },
	{ "co.uk", false, "co.uk" },
	{ "github.io", false, "github.io" },
	{ "*", true, NULL },
	{ "*.", true, NULL },
	{ "**.example.com", true, NULL },
	{ "*example.com", true, NULL },
	{ "a.*.example.com", true, NULL },
	{ "*.*.example.com", true, NULL },
	{ "example.123", false, NULL },
	{ "example.0x12", false, NULL },
	{ "123.example", false, "123.example" },
};

Test(egress_policy, normalize_table)
{
	for (size_t i = 0; i < sizeof(norm_cases) / sizeof(norm_cases[0]); i++) {
		const norm_case *c = &norm_cases[i];
		char out[AIRLOCK_HOSTNAME_MAX + 1] = "untouched";
		bool ok = airlock_hostname_normalize(c->in, strlen(c->in), c->wildcard, out);
		if (c->out) {
			cr_expect(ok, "\"%s\" should normalize", c->in);
			cr_expect_str_eq(out, c->out, "\"%s\"", c->in);
			/* idempotent */
			char again[AIRLOCK_HOSTNAME_MAX + 1];
			cr_expect(airlock_hostname_normalize(out, strlen(out), c->wildcard, again));
			cr_expect_str_eq(again, out);
		} else {
			cr_expect(!ok, "\"%s\" should be refused", c->in);
			cr_expect_str_eq(out, "untouched", "out written on refusal of \"%s\"", c->in);
		}
	}
}

/*
 * Wildcards against the Public Suffix List: the ICANN section (com, co.uk,
 * com.au, an IDN suffix in punycode, the "*.ck" wildcard rule and its
 * "!www.ck" exception), the private section (github.io, blogspot.com,
 * s3.amazonaws.com: shared by unrelated tenants, so refused too), and the
 * implicit "*" rule (an unlisted top-level label). An exact host that is a
 * public suffix names one host and is accepted.
 */
Test(egress_policy, wildcard_over_public_suffix)
{
	static const char *const refused[] = {
		"*.com", "*.uk", "*.co.uk", "*.com.au", "*.xn--p1ai", "*.xn--12c1fe0br.xn--o3cw4h",
		"*.foo.ck", "*.github.io", "*.blogspot.com", "*.s3.amazonaws.com", "*.appspot.com",
		"*.internal", "*.zz", "*.localhost",
	};
	static const char *const accepted[] = {
		"*.example.com", "*.example.co.uk", "*.example.com.au", "*.octocat.github.io",
		"*.www.ck", "*.pythonhosted.org", "*.a.b.internal", "*.corp.example",
	};
	static const char *const exact[] = { "co.uk", "github.io", "com.au", "blogspot.com" };
	char out[AIRLOCK_HOSTNAME_MAX + 1];
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		cr_expect(!airlock_hostname_normalize(refused[i], strlen(refused[i]), true, out),
		          "\"%s\" accepted", refused[i]);
		char doc[256];
		snprintf(doc, sizeof(doc), HEAD "    - host: \"%s\"\n      ports: [443]\n", refused[i]);
		bad_case c = { doc, 4, "a wildcard over a public suffix" };
		expect_bad(&c);
	}
	for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++)
		cr_expect(airlock_hostname_normalize(accepted[i], strlen(accepted[i]), true, out),
		          "\"%s\" refused", accepted[i]);
	for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++) {
		char doc[256];
		snprintf(doc, sizeof(doc), HEAD "    - host: \"%s\"\n      ports: [443]\n", exact[i]);
		airlock_egress_policy p;
		parse_ok(doc, &p);
		cr_expect_str_eq(p.destinations[0].host, exact[i]);
		airlock_egress_policy_clear(&p);
	}
}

Test(egress_policy, normalize_lengths)
{
	char in[400], out[AIRLOCK_HOSTNAME_MAX + 1];
	/* 63-byte label: allowed; 64: refused */
	memset(in, 'a', 63);
	strcpy(in + 63, ".org");
	cr_expect(airlock_hostname_normalize(in, strlen(in), false, out));
	memset(in, 'a', 64);
	strcpy(in + 64, ".org");
	cr_expect(!airlock_hostname_normalize(in, strlen(in), false, out));

	/* 253 bytes: allowed (plus one trailing dot: still allowed); 254 refused */
	size_t o = 0;
	while (o < 253) {
		size_t n = 253 - o >= 50 ? 49 : 253 - o;
		memset(in + o, 'b', n);
		o += n;
		if (o < 253)
			in[o++] = '.';
	}
	in[253] = 0;
	cr_assert_eq(strlen(in), 253);
	cr_expect(airlock_hostname_normalize(in, 253, false, out));
	cr_expect_eq(strlen(out), 253);
	in[253] = '.';
	in[254] = 0;
	cr_expect(airlock_hostname_normalize(in, 254, false, out));
	in[253] = 'c';
	cr_expect(!airlock_hostname_normalize(in, 254, false, out));
	/* a wildcard counts its "*." */
	in[0] = '*';
	in[1] = '.';
	cr_expect(airlock_hostname_normalize(in, 253, true, out));
	cr_expect(!airlock_hostname_normalize(in, 254, true, out));
}

/* ---- the matcher -------------------------------------------------------------------- */

typedef struct match_case {
	const char *pattern, *host;
	bool match;
} match_case;

static const match_case match_cases[] = {
	{ "*.example.com", "a.example.com", true },
	{ "*.example.com", "xn--a.example.com", true },
	{ "*.example.com", "example.com", false },
	{ "*.example.com", "a.b.example.com", false },
	{ "*.example.com", "evilexample.com", false },
	{ "*.example.com", "a.evilexample.com", false },
	{ "*.example.com", ".example.com", false },
	{ "*.example.com", "a.example.com.evil.net", false },
	{ "*.example.com", "a.example.co", false },
	{ "*.example.com", "*.example.com", false },
	{ "*.example.com", "", false },
	{ "example.com", "example.com", true },
	{ "example.com", "a.example.com", false },
	{ "example.com", "evilexample.com", false },
	{ "example.com", "example.com.evil.net", false },
	{ "example.com", "example.co", false },
	{ "api.example.com", "api.example.com", true },
	{ "*.pythonhosted.org", "files.pythonhosted.org", true },
	{ "*.pythonhosted.org", "pythonhosted.org", false },
};

Test(egress_policy, host_matches_table)
{
	for (size_t i = 0; i < sizeof(match_cases) / sizeof(match_cases[0]); i++) {
		const match_case *c = &match_cases[i];
		cr_expect_eq(airlock_egress_host_matches(c->pattern, c->host), c->match,
		             "%s vs %s: expected %s", c->pattern, c->host, c->match ? "match" : "no match");
	}
	cr_expect(!airlock_egress_host_matches(NULL, "a.example.com"));
	cr_expect(!airlock_egress_host_matches("*.example.com", NULL));
}

/* ---- good documents --------------------------------------------------------------- */

Test(egress_policy, the_spec_example)
{
	airlock_egress_policy p;
	parse_ok("egress:\n"
	         "  mode: allowlist\n"
	         "  destinations:\n"
	         "    - host: PyPI.org.\n"
	         "      ports: [443]\n"
	         "    - host: \"*.pythonhosted.org\"\n"
	         "      ports: [443, 8443]\n"
	         "    - host: api.example.com\n"
	         "      ports:\n"
	         "        - 443\n",
	         &p);
	cr_expect_eq(p.mode, AIRLOCK_EGRESS_ALLOWLIST);
	cr_assert_eq(p.n_destinations, 3);
	cr_expect_str_eq(p.destinations[0].host, "pypi.org");
	cr_expect_str_eq(p.destinations[1].host, "*.pythonhosted.org");
	cr_expect_str_eq(p.destinations[2].host, "api.example.com");
	cr_assert_eq(p.destinations[1].n_ports, 2);
	cr_expect_eq(p.destinations[1].ports[0], 443);
	cr_expect_eq(p.destinations[1].ports[1], 8443);
	airlock_error err = { 0 };
	cr_expect_eq(airlock_egress_policy_validate(&p, &err), 0, "%s", err.message);
	airlock_egress_policy_clear(&p);
}

Test(egress_policy, deny_forms)
{
	static const char *const docs[] = {
		"egress:\n",
		"egress: {}\n",
		"egress:\n  mode: deny\n",
		"egress:\n  mode: \"deny\"\n",
		"egress:\n  mode: deny\n  destinations: []\n",
		"egress:\n  mode: deny\n  destinations:\n",
		"---\negress:\n  mode: deny\n...\n",
	};
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		airlock_egress_policy p;
		parse_ok(docs[i], &p);
		cr_expect_eq(p.mode, AIRLOCK_EGRESS_DENY, "[%s]", docs[i]);
		cr_expect_eq(p.n_destinations, 0);
		airlock_egress_policy_clear(&p);
	}
}

Test(egress_policy, ports_edges)
{
	airlock_egress_policy p;
	parse_ok(HEAD "    - host: a.example\n      ports: [1, 65535, 80]\n", &p);
	cr_assert_eq(p.destinations[0].n_ports, 3);
	cr_expect_eq(p.destinations[0].ports[0], 1);
	cr_expect_eq(p.destinations[0].ports[1], 65535);
	cr_expect_eq(p.destinations[0].ports[2], 80);
	airlock_egress_policy_clear(&p);
}

/* ---- format then parse ------------------------------------------------------------ */

static bool policy_eq(const airlock_egress_policy *a, const airlock_egress_policy *b)
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

Test(egress_policy, format_round_trip)
{
	static const char *const docs[] = {
		"egress:\n",
		"egress:\n  mode: deny\n",
		HEAD "    - host: pypi.org\n      ports: [443]\n",
		HEAD "    - host: \"*.Pythonhosted.org.\"\n      ports: [443, 80, 8443]\n"
		     "    - host: localhost\n      ports: [3128]\n"
		     "    - host: null\n      ports: [1]\n"
		     "    - host: \"yes\"\n      ports: [2]\n",
	};
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		airlock_egress_policy a, b;
		airlock_error err = { 0 };
		int r = parse(docs[i], &a, &err);
		if (r < 0) {
			/* "host: null" is YAML's null: refused, which is right; the
			 * quoted form below covers the name "null". */
			cr_expect(strstr(err.message, "got null") != NULL, "[%s]: %s", docs[i], err.message);
			continue;
		}
		char *text = NULL;
		cr_assert_eq(airlock_egress_policy_format(&a, &text, &err), 0, "%s", err.message);
		cr_assert_eq(parse(text, &b, &err), 0, "[%s]: %s", text, err.message);
		cr_expect(policy_eq(&a, &b), "round trip changed the policy: [%s]", text);
		char *text2 = NULL;
		cr_assert_eq(airlock_egress_policy_format(&b, &text2, &err), 0, "%s", err.message);
		cr_expect_str_eq(text, text2);
		free(text);
		free(text2);
		airlock_egress_policy_clear(&a);
		airlock_egress_policy_clear(&b);
	}
}

Test(egress_policy, format_quotes_names_yaml_would_misread)
{
	airlock_egress_policy a, b;
	parse_ok(HEAD "    - host: \"null\"\n      ports: [1]\n    - host: \"yes\"\n      ports: [2]\n"
	              "    - host: \"*.on.example\"\n      ports: [3]\n",
	         &a);
	char *text = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_egress_policy_format(&a, &text, &err), 0, "%s", err.message);
	cr_assert_eq(parse(text, &b, &err), 0, "[%s]: %s", text, err.message);
	cr_expect(policy_eq(&a, &b));
	cr_expect_str_eq(b.destinations[0].host, "null");
	free(text);
	airlock_egress_policy_clear(&a);
	airlock_egress_policy_clear(&b);
}

Test(egress_policy, format_refuses_what_would_not_parse_back)
{
	uint16_t port = 443;
	airlock_egress_destination d = { .host = "Not.Normalized", .ports = &port, .n_ports = 1 };
	airlock_egress_policy p = { .mode = AIRLOCK_EGRESS_ALLOWLIST, .destinations = &d, .n_destinations = 1 };
	char *text = NULL;
	airlock_error err = { 0 };
	cr_expect_lt(airlock_egress_policy_format(&p, &text, &err), 0);
	cr_expect_null(text);
	d.host = "127.0.0.1";
	cr_expect_lt(airlock_egress_policy_format(&p, &text, &err), 0);
	d.host = "ok.example";
	p.mode = AIRLOCK_EGRESS_DENY;
	cr_expect_lt(airlock_egress_policy_format(&p, &text, &err), 0, "deny with destinations");
	p.mode = AIRLOCK_EGRESS_ALLOWLIST;
	p.n_destinations = 0;
	cr_expect_lt(airlock_egress_policy_format(&p, &text, &err), 0, "allowlist with none");
	cr_expect_null(text);
}

/* ---- limits --------------------------------------------------------------------- */

static char *many_destinations(size_t n)
{
	size_t cap = 64 + n * 64;
	char *doc = malloc(cap);
	cr_assert_not_null(doc);
	size_t o = (size_t)snprintf(doc, cap, "%s", HEAD);
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(doc + o, cap - o, "    - host: h%zu.example\n      ports: [443]\n", i);
	return doc;
}

Test(egress_policy, destinations_cap)
{
	airlock_egress_policy p;
	char *doc = many_destinations(AIRLOCK_EGRESS_DESTINATIONS_MAX);
	parse_ok(doc, &p);
	cr_expect_eq(p.n_destinations, AIRLOCK_EGRESS_DESTINATIONS_MAX);
	airlock_egress_policy_clear(&p);
	free(doc);

	doc = many_destinations(AIRLOCK_EGRESS_DESTINATIONS_MAX + 1);
	char rule[64];
	snprintf(rule, sizeof(rule), "more than %d destinations", AIRLOCK_EGRESS_DESTINATIONS_MAX);
	/* the one past the cap starts on line 4 + 2 * MAX */
	bad_case c = { doc, 4 + 2 * (size_t)AIRLOCK_EGRESS_DESTINATIONS_MAX, rule };
	expect_bad(&c);
	free(doc);
}

Test(egress_policy, input_cap)
{
	size_t len = AIRLOCK_EGRESS_POLICY_INPUT_MAX + 1;
	char *doc = malloc(len + 1);
	cr_assert_not_null(doc);
	memset(doc, '#', len);
	memcpy(doc, "egress:\n", 8);
	doc[8] = '#';
	doc[len] = 0;
	airlock_egress_policy p;
	airlock_error err = { 0 };
	cr_expect_eq(airlock_egress_policy_parse("big.yaml", doc, len, &p, &err),
	             airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_expect(strstr(err.message, "big.yaml") && strstr(err.message, "larger than"), "%s",
	          err.message);
	/* exactly at the cap: read (and valid: a comment after "egress:") */
	cr_expect_eq(airlock_egress_policy_parse("big.yaml", doc, len - 1, &p, &err), 0, "%s",
	             err.message);
	airlock_egress_policy_clear(&p);
	free(doc);
}

Test(egress_policy, alias_expansion_refused)
{
	/* The billion-laughs shape: refused at the first anchor. */
	bad_case c = { "egress:\n  mode: allowlist\n  destinations: &a [*a, *a, *a]\n", 3,
		       "anchors are not allowed" };
	expect_bad(&c);
}

/* ---- load ------------------------------------------------------------------------ */

Test(egress_policy, load_names_the_path)
{
	char path[] = "/tmp/egress-policy-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	const char *doc = "egress:\n  mode: allowlist\n  destinations:\n    - host: 10.0.0.1\n      ports: [443]\n";
	cr_assert_eq(write(fd, doc, strlen(doc)), (ssize_t)strlen(doc));
	close(fd);
	airlock_egress_policy p;
	airlock_error err = { 0 };
	cr_expect_eq(airlock_egress_policy_load(path, &p, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "%s:4: destinations[0].host", path);
	cr_expect(strncmp(err.message, prefix, strlen(prefix)) == 0, "%s", err.message);
	unlink(path);

	cr_expect_eq(airlock_egress_policy_load(path, &p, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_expect(strstr(err.message, path) && strstr(err.message, "cannot open"), "%s", err.message);
	cr_expect_eq(airlock_egress_policy_load("/tmp", &p, &err), airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_expect(strstr(err.message, "not a regular file"), "%s", err.message);
}

/* ---- one port rule for every door ------------------------------------------------- */

static bool connect_port(const char *text, uint16_t *ret)
{
	char req[128];
	int n = snprintf(req, sizeof(req), "CONNECT pypi.org:%s HTTP/1.1\r\n\r\n", text);
	cr_assert(n > 0 && (size_t)n < sizeof(req));
	airlock_connect_request r;
	if (airlock_connect_parse(req, (size_t)n, &r) != AIRLOCK_CONNECT_OK)
		return false;
	*ret = r.port;
	return true;
}

static void expect_same_port_rule(const char *text)
{
	uint16_t a = 0, b = 0;
	bool pa = airlock_port_parse(text, strlen(text), &a);
	bool pc = connect_port(text, &b);
	cr_expect_eq(pa, pc, "\"%s\": airlock_port_parse %s, the CONNECT parser %s", text,
	             pa ? "accepts" : "refuses", pc ? "accepts" : "refuses");
	if (pa && pc)
		cr_expect_eq(a, b, "\"%s\": %u vs %u", text, a, b);
}

/* `airlock egress check` and the policy read ports with airlock_port_parse;
 * the proxy with the CONNECT parser. Both over the same inputs: every number
 * 0..99999 written plainly and zero-padded, and the spellings that differ
 * between lenient parsers (sign, space, hex, exponent). */
Test(egress_policy, port_rule_is_the_connect_parsers)
{
	static const char *const odd[] = {
		"0443", "+443", "-443", " 443", "443 ", "4a3", "0x1bb", "1e3", "443.0", "00",
		"065535", "065536", "1_000", "",
	};
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		expect_same_port_rule(odd[i]);
		uint16_t p;
		cr_expect(!airlock_port_parse(odd[i], strlen(odd[i]), &p), "\"%s\" accepted", odd[i]);
	}
	char text[16];
	for (unsigned v = 0; v < 100000; v++) {
		snprintf(text, sizeof(text), "%u", v);
		expect_same_port_rule(text);
		snprintf(text, sizeof(text), "0%u", v);
		expect_same_port_rule(text);
	}
	uint16_t p = 0;
	cr_expect(airlock_port_parse("443", 3, &p) && p == 443);
	cr_expect(airlock_port_parse("65535", 5, &p) && p == 65535);
	cr_expect(!airlock_port_parse("65536", 5, &p));
	cr_expect(!airlock_port_parse("0", 1, &p));
}
