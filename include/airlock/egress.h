/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EGRESS_H
#define AIRLOCK_EGRESS_H

/*
 * The egress boundary's policy (the specification, "The egress boundary",
 * "The allowlist grammar", "What the proxy does on CONNECT"): one policy
 * object, evaluated by one function, called from two places (the sandbox
 * proxy and the worker's outbound guard). A second implementation anywhere
 * is a defect.
 *
 * The policy is airlock_egress_policy (airlock/types.h). Host names in it
 * are normalized once at parse time: lowercase, no trailing dot, valid DNS
 * names (labels 1-63 of [a-z0-9-], not starting or ending with '-', total at
 * most 253), or "*." + such a name (a wildcard is exactly one leftmost
 * label). No destination is ever an IP address in any spelling.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "airlock/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the grammar ---------------------------------------------------------
 *
 *   egress:
 *     mode: deny            # deny | allowlist; deny is the default
 *     destinations:
 *       - host: pypi.org
 *         ports: [443]
 *       - host: "*.pythonhosted.org"
 *         ports: [443]
 *
 * Rules (each error names the file, the line and the rule broken):
 *   - the document is a mapping with exactly one key, `egress`;
 *   - `mode` is `deny` or `allowlist`; absent means deny; there is no allow;
 *   - `destinations` is a sequence of mappings with exactly the keys `host`
 *     and `ports`; `ports` is a required, non-empty sequence of integers in
 *     1..65535 (duplicates refused);
 *   - `host` has no scheme, no port, no path, no userinfo, and is not an IP
 *     address in any spelling (dotted, bracketed, IPv6, decimal, octal, hex,
 *     short forms like 127.1); it normalizes as above; a wildcard is not
 *     over a public suffix (the Public Suffix List, private section and the
 *     implicit "*" rule included: "*.com", "*.co.uk", "*.github.io" are
 *     refused; src/egress/policy.c says which list);
 *   - mode deny with destinations, or allowlist with none, is refused (a
 *     policy that says two things);
 *   - unknown keys, anchors, aliases and tags are refused.
 */
/* Its caps (input size, destinations, name length) are in airlock/caps.h. */

/* Parse a policy document. name is used in errors ("policy.yaml:7: ...").
 * AIRLOCK_ERR_CONFIG on any violation; *ret untouched on failure. */
int airlock_egress_policy_parse(const char *name, const char *buf, size_t len,
                                airlock_egress_policy *ret, airlock_error *err);
int airlock_egress_policy_load(const char *path, airlock_egress_policy *ret, airlock_error *err);

/* ---- one set of rules for every door ----------------------------------------
 * The grammar's rules over a policy already read, whichever door it came
 * through: the YAML parser runs them as it reads (so its message has the
 * line), the JSON decoder (airlock_egress_policy_from_json, and a spec's
 * egress) and the printer run them on the whole policy. The rules: mode is
 * deny or allowlist; deny lists nothing, allowlist lists 1 to
 * AIRLOCK_EGRESS_DESTINATIONS_MAX destinations; every host passes the host
 * rules above and is stored normalized; no host twice; every destination
 * has at least one port, each 1..65535, none twice. */
typedef enum airlock_egress_rule {
	AIRLOCK_EGRESS_RULE_MODE = 1,        /* mode is neither deny nor allowlist */
	AIRLOCK_EGRESS_RULE_DENY_LISTS,      /* mode deny with destinations */
	AIRLOCK_EGRESS_RULE_ALLOWLIST_EMPTY, /* mode allowlist with none */
	AIRLOCK_EGRESS_RULE_TOO_MANY,        /* more than AIRLOCK_EGRESS_DESTINATIONS_MAX */
	AIRLOCK_EGRESS_RULE_HOST,            /* destinations[dest].host breaks a host rule */
	AIRLOCK_EGRESS_RULE_HOST_TWICE,      /* ... is destinations[first]'s host again */
	AIRLOCK_EGRESS_RULE_PORTS_EMPTY,     /* destinations[dest] lists no port */
	AIRLOCK_EGRESS_RULE_PORT,            /* destinations[dest].ports[port] is 0 */
	AIRLOCK_EGRESS_RULE_PORT_TWICE,      /* ... is ports[first] again */
} airlock_egress_rule;

typedef struct airlock_egress_violation {
	airlock_egress_rule rule;
	size_t dest, port, first;
	const char *why; /* the rule, in words (static) */
} airlock_egress_violation;

/* True and *ret filled when p breaks a rule (the first one, in order). */
bool airlock_egress_policy_rules(const airlock_egress_policy *p, airlock_egress_violation *ret);
/* The same, as an error: 0, or AIRLOCK_ERR_DECODE "WHAT.destinations[1].host:
 * \"A.Example.COM\": not in normalized form ..." (what defaults to
 * "EgressPolicy"). */
int airlock_egress_policy_check(const airlock_egress_policy *p, const char *what,
                                airlock_error *err);

/* A port as text, the one rule for every door that reads one (the policy's
 * YAML, `airlock egress check` and the CONNECT parser all call it): 1-5
 * decimal digits, no sign, no leading zero, 1..65535. */
bool airlock_port_parse(const char *s, size_t len, uint16_t *ret);

/* Print the normalized policy as YAML that parses back to the same policy. */
int airlock_egress_policy_format(const airlock_egress_policy *p, char **ret, airlock_error *err);

/* Normalize a host name as the grammar does (lowercase, one trailing dot
 * removed) into out; false when it is not a valid DNS name (or, with
 * allow_wildcard, "*." + one). An IP literal is never a valid name. */
bool airlock_hostname_normalize(const char *in, size_t len, bool allow_wildcard,
                                char out[AIRLOCK_HOSTNAME_MAX + 1]);

/* The one host matcher (the proxy, the guard and the evaluation function all
 * call this; a second matcher is a defect). pattern is a destination's host
 * as the parser stored it; host is a requested name already normalized by
 * airlock_hostname_normalize(..., false, ...). An exact name matches itself
 * only; "*.example.com" matches exactly one more leftmost label:
 * a.example.com, never example.com, a.b.example.com or evilexample.com.
 * NULL, an empty host or a host containing '*' never matches. */
bool airlock_egress_host_matches(const char *pattern, const char *host);

/* True when s is an IP address in any spelling a resolver or a URL parser
 * would accept: dotted quad, fewer parts (127.1), decimal (2130706433), octal
 * (0177.0.0.1), hex (0x7f.1), bracketed or bare IPv6, with a zone. */
bool airlock_ip_literal(const char *s, size_t len);

/* ---- the address denylist --------------------------------------------------
 * Not configurable; applied in both modes. The specification's table plus
 * every block of the IANA IPv4 and IPv6 Special-Purpose Address Registries
 * that is not globally reachable (but 198.51.100.0/24, the test network:
 * src/egress/addr.c says why), the unspecified addresses, multicast,
 * broadcast, all IPv6 outside 2000::/3, and IPv4 embedded in IPv6 by any
 * standard form (IPv4-mapped ::ffff:0:0/96, IPv4-translated ::ffff:0:0:0/96,
 * NAT64 64:ff9b::/96, 6to4 2002::/16, IPv4-compatible ::/96), each
 * unwrapped and checked as IPv4. The cloud metadata and host-service
 * addresses are named (METADATA). */
typedef enum airlock_addr_class {
	AIRLOCK_ADDR_INVALID = 0,
	AIRLOCK_ADDR_PUBLIC,          /* allowed to dial */
	AIRLOCK_ADDR_METADATA,        /* 169.254.169.254, 168.63.129.16, fd00:ec2::254, ... */
	AIRLOCK_ADDR_THIS_NETWORK,    /* 0.0.0.0/8, :: */
	AIRLOCK_ADDR_PRIVATE,         /* 10/8, 172.16/12, 192.168/16, fc00::/7 */
	AIRLOCK_ADDR_LOOPBACK,        /* 127/8, ::1 */
	AIRLOCK_ADDR_LINK_LOCAL,      /* 169.254/16, fe80::/10 */
	AIRLOCK_ADDR_CGNAT,           /* 100.64/10 */
	AIRLOCK_ADDR_MULTICAST,       /* 224/4, ff00::/8 */
	AIRLOCK_ADDR_BROADCAST,       /* 255.255.255.255 (and 240/4 reserved) */
	/* the rest of the special-purpose registries: 192.0.0.0/24, 192.0.2.0/24,
	 * 192.88.99.0/24, 198.18.0.0/15, 203.0.113.0/24; IPv6 outside 2000::/3,
	 * 2001::/23 (but Teredo), 2001:db8::/32, 3fff::/20 */
	AIRLOCK_ADDR_RESERVED,
	AIRLOCK_ADDR__MAX
} airlock_addr_class;
const char *airlock_addr_class_name(airlock_addr_class c);

typedef struct airlock_addr {
	int family; /* AF_INET or AF_INET6 */
	union {
		struct in_addr v4;
		struct in6_addr v6;
	};
} airlock_addr;

airlock_addr_class airlock_addr_classify(const airlock_addr *a);
/* Whether a is one of this host's (this network namespace's) own addresses,
 * as the kernel's routing decision says at the time of the call (a UDP
 * connect, nothing sent; src/egress/addr.c says why not getifaddrs). 1 own,
 * 0 not (or no route), negative errno when it could not be asked. Works
 * unprivileged and under the proxy's seccomp filter. */
int airlock_addr_is_own(const airlock_addr *a);
/* Parse a numeric address (inet_pton forms only); false otherwise. */
bool airlock_addr_parse(const char *s, airlock_addr *ret);
/* Format into out (INET6_ADDRSTRLEN). */
void airlock_addr_format(const airlock_addr *a, char out[46]);

/* ---- the evaluation function --------------------------------------------- */

typedef enum airlock_egress_reason {
	AIRLOCK_EGRESS_REASON_INVALID = 0,
	AIRLOCK_EGRESS_ALLOWED,
	AIRLOCK_EGRESS_MODE_DENY,
	AIRLOCK_EGRESS_NOT_ALLOWLISTED,
	AIRLOCK_EGRESS_PORT_NOT_ALLOWED,
	AIRLOCK_EGRESS_IP_LITERAL,
	AIRLOCK_EGRESS_BAD_HOSTNAME,
	AIRLOCK_EGRESS_DNS_FAILURE,
	AIRLOCK_EGRESS_DENIED_ADDRESS,  /* a resolved address is on the denylist */
	AIRLOCK_EGRESS_METADATA_ADDRESS, /* ... and it is a cloud metadata or host-service address */
	/* The public-HTTPS transports' own refusals (the step that refused is
	 * the decision's detail), so each stays separately auditable. */
	AIRLOCK_EGRESS_BROWSER_RESOURCE_REFUSED,
	AIRLOCK_EGRESS_UNSUBSCRIBE_REFUSED,
	/* a resolved address is one of the host's own (airlock_addr_is_own), or
	 * could not be shown not to be: a service bound to 0.0.0.0 on the
	 * proxy's host would answer it */
	AIRLOCK_EGRESS_OWN_ADDRESS,
	AIRLOCK_EGRESS_REASON__MAX
} airlock_egress_reason;
const char *airlock_egress_reason_name(airlock_egress_reason r);

/* A resolver: every A and AAAA record of name, once. The production one is
 * c-ares with configurable servers; tests and `egress check --resolve` pass
 * their own. Returns 0 and fills up to max addresses, or a negative code
 * (the name does not resolve). */
typedef int (*airlock_egress_resolve_fn)(void *ctx, const char *name, airlock_addr *ret,
                                         size_t max, size_t *ret_n);

/* The production resolver (src/egress/resolve.c, c-ares). servers is
 * "ADDR[:PORT],..." (numeric addresses only; IPv6 bracketed when a port
 * follows; port 53 by default; at most 16) or NULL for the system's
 * (/etc/resolv.conf). It never reads /etc/hosts or applies a search list:
 * the name asked is the name checked. AIRLOCK_ERR_CONFIG for a bad servers
 * string; *ret untouched on failure. One resolver is used by one thread at a
 * time. */
#define AIRLOCK_EGRESS_RESOLVE_TIMEOUT_MS 5000
typedef struct airlock_egress_resolver airlock_egress_resolver;
int airlock_egress_resolver_new(const char *servers, airlock_egress_resolver **ret,
                                airlock_error *err);
void airlock_egress_resolver_free(airlock_egress_resolver *r);
/* An airlock_egress_resolve_fn; ctx is an airlock_egress_resolver. One A
 * and one AAAA query (each tried once per server), within
 * AIRLOCK_EGRESS_RESOLVE_TIMEOUT_MS in all; A answers come first. 0 with at
 * least one address; -ENOENT when the name has none (NXDOMAIN or no
 * records); -ETIMEDOUT, -EIO (a server failure on either query: a partial
 * answer is a failure), -E2BIG (more than max addresses: the rest would go
 * unchecked), -ENOMEM. ret and *ret_n untouched on failure. */
int airlock_egress_resolver_resolve(void *ctx, const char *name, airlock_addr *ret, size_t max,
                                    size_t *ret_n);

/* What a connection is checked against: the operator's policy, or one of
 * the public-HTTPS transports (the specification, "Public-HTTPS
 * transports"). A transport is constructed only in code for its named
 * internal caller; the policy grammar has no way to name one. */
typedef enum airlock_egress_transport {
	AIRLOCK_EGRESS_TRANSPORT_POLICY = 0,
	AIRLOCK_EGRESS_TRANSPORT_BROWSER_RESOURCES, /* a browser page's resources (ADR-0098) */
	AIRLOCK_EGRESS_TRANSPORT_UNSUBSCRIBE,       /* the one-click unsubscribe (ADR-0112) */
	AIRLOCK_EGRESS_TRANSPORT__MAX
} airlock_egress_transport;
const char *airlock_egress_transport_name(airlock_egress_transport t);

typedef struct airlock_egress_decision {
	bool allow;
	airlock_egress_reason reason;
	airlock_egress_reason detail; /* the step that decided; == reason under a policy */
	airlock_egress_transport transport;
	char host[AIRLOCK_HOSTNAME_MAX + 1]; /* normalized */
	uint16_t port;
	airlock_addr addresses[AIRLOCK_EGRESS_ADDRESSES_MAX]; /* every one resolved */
	size_t n_addresses;
	bool has_dial;
	airlock_addr dial; /* the one address to dial: checked, never re-resolved */
	airlock_addr denied; /* with DENIED/METADATA/OWN_ADDRESS: the address refused */
} airlock_egress_decision;

/*
 * The one evaluation function, in the order the specification writes it:
 * reject an IP literal or a bad name; mode deny refuses everything; match
 * the destination list (a miss is NOT_ALLOWLISTED, a host on the list with
 * another port PORT_NOT_ALLOWED); resolve the name once; check every
 * resolved address against the denylist (one bad address refuses the whole
 * destination), then against the host's own addresses (OWN_ADDRESS, asked
 * of the kernel in the caller's network namespace at this moment); choose
 * the address to dial. Never returns an error for a
 * refusal: *ret says why. Returns negative only for invalid arguments.
 */
int airlock_egress_evaluate(const airlock_egress_policy *p, const char *host, uint16_t port,
                            airlock_egress_resolve_fn resolve, void *resolve_ctx,
                            airlock_egress_decision *ret, airlock_error *err);

/*
 * The same sequence for a public-HTTPS transport, whose rule is not an
 * allowlist: port 443 only, a public host name (a valid DNS name of at least
 * two labels whose last label is not numeric and which is not under a
 * special-use or internal suffix: localhost, local, internal, test, invalid,
 * example, onion, arpa, home.arpa, lan, intranet, corp, home), one resolution with every
 * address checked against the same denylist, and the address to dial.
 * A refusal's reason is the transport's own (BROWSER_RESOURCE_REFUSED,
 * UNSUBSCRIBE_REFUSED); detail says which step refused (PORT_NOT_ALLOWED,
 * BAD_HOSTNAME, IP_LITERAL, DNS_FAILURE, DENIED_ADDRESS, METADATA_ADDRESS,
 * OWN_ADDRESS).
 * (The proxy adds the third rule, CONNECT only, for every transport.)
 */
int airlock_egress_evaluate_transport(airlock_egress_transport t, const char *host, uint16_t port,
                                      airlock_egress_resolve_fn resolve, void *resolve_ctx,
                                      airlock_egress_decision *ret, airlock_error *err);

/* Whether a sandbox's requested policy stays inside the operator's: every
 * destination of req names a host pattern the operator listed (the same
 * string) and only ports listed there. 0, or AIRLOCK_ERR_EXECUTION_REJECTED
 * naming the first destination or port the operator did not configure
 * ("an egress policy naming a host the operator did not configure").
 * A req in deny mode is always covered. */
int airlock_egress_policy_covers(const airlock_egress_policy *op, const airlock_egress_policy *req,
                                 airlock_error *err);

/* The decision as one JSON object: {"decision": "allow"|"deny", "reason":
 * ..., "host": ..., "port": ..., "addresses": [...], "dial": ...|null}. */
char *airlock_egress_decision_to_json(const airlock_egress_decision *d, airlock_error *err);

/* ---- the CONNECT request ------------------------------------------------
 * The proxy's parser of sandbox input (hand-written: the request line is
 * specific to this domain), in two forms with one answer: the proxy feeds
 * airlock_connect_parse_more byte by byte as they arrive; the one-shot
 * airlock_connect_parse is the reference the fuzz target holds it to on
 * every prefix. Accepted, and nothing else:
 *
 *   CONNECT SP host ":" port SP "HTTP/1.1" | "HTTP/1.0" CRLF
 *   *( field-name ":" OWS field-value OWS CRLF )
 *   CRLF
 *
 * host is [A-Za-z0-9.-]{1,255} or "[" [0-9A-Fa-f:.]{2,..} "]" (kept with
 * its brackets, so the evaluation function sees and refuses the literal);
 * port is 1-5 digits without a leading zero, 1..65535. field-name is an
 * RFC 9110 token; field-value is visible ASCII, SP and HTAB. Header fields
 * are read past and ignored (the proxy needs none of them). No obsolete line
 * folding, no bare CR or LF, no NUL, no byte >= 0x7f, at most
 * AIRLOCK_CONNECT_FIELDS_MAX fields, and the whole request (terminator
 * included) within AIRLOCK_CONNECT_REQUEST_MAX bytes. */
/* (Both caps are in airlock/caps.h.) */

typedef enum airlock_connect_status {
	AIRLOCK_CONNECT_INCOMPLETE = 0, /* no terminator yet and nothing wrong so far: read more */
	AIRLOCK_CONNECT_OK,             /* *ret filled */
	AIRLOCK_CONNECT_BAD_REQUEST,    /* 400: anything malformed */
	AIRLOCK_CONNECT_NOT_CONNECT,    /* 405: a well-formed request line with another method */
	AIRLOCK_CONNECT_BAD_VERSION,    /* 505: a version other than HTTP/1.0 or HTTP/1.1 */
	AIRLOCK_CONNECT_TOO_LARGE,      /* 431: no terminator within the cap, or too many fields */
} airlock_connect_status;

typedef struct airlock_connect_request {
	char host[AIRLOCK_CONNECT_HOST_MAX + 3]; /* as sent, NUL-terminated; "[v6]" keeps brackets */
	uint16_t port;
	size_t consumed; /* bytes up to and including the blank line's CRLF */
} airlock_connect_request;

/* Parse the first len bytes the client sent, all at once: the reference
 * (the proxy itself uses airlock_connect_parse_more below; this one stays
 * because fuzz/fuzz_connect.c holds that one to it). Pure: no allocation, no I/O,
 * reads only buf[0..len). Bytes after the terminator are not looked at
 * (the caller relays them: they are the client's first tunnel bytes). Returns
 * INCOMPLETE only while len < AIRLOCK_CONNECT_REQUEST_MAX and every complete
 * line so far is valid; a violation is reported as soon as it is seen.
 * *ret is written only for OK. */
airlock_connect_status airlock_connect_parse(const char *buf, size_t len,
                                             airlock_connect_request *ret);

/* The same grammar fed as the bytes arrive, at a constant cost per byte: a
 * client that sends its request one byte per segment costs the proxy one
 * step per byte, not a parse of everything so far. buf[0..len) is
 * everything received so far: the bytes of the earlier calls, unchanged
 * (the buffer may move), then the new ones. Each call looks at the new
 * bytes only (and, once, at the request line's target when that line
 * ends), keeps no pointer into buf, and answers exactly what
 * airlock_connect_parse(buf, len, ret) would (fuzz/fuzz_connect.c holds
 * the two to that on every prefix). An answer other than INCOMPLETE is
 * final: later calls repeat it. A len shorter than the last call's is a
 * caller's bug, answered BAD_REQUEST. *ret is written only for OK. The
 * fields are the parser's own; start from airlock_connect_parser_init. */
typedef struct airlock_connect_parser {
	size_t pos;        /* bytes looked at */
	size_t fields;     /* field lines completed */
	size_t method_len; /* the request line's parts: where they are in buf */
	size_t target, target_len, version;
	int state;
	bool request_line_done;
	bool blank;                   /* the CR just seen began the blank line */
	airlock_connect_status at_lf; /* the line's verdict, due when its LF comes */
	airlock_connect_status final; /* INCOMPLETE until decided */
	airlock_connect_request req;
} airlock_connect_parser;

void airlock_connect_parser_init(airlock_connect_parser *p);
airlock_connect_status airlock_connect_parse_more(airlock_connect_parser *p, const char *buf,
                                                  size_t len, airlock_connect_request *ret);

/* The HTTP status line's code for a status (200 for OK). */
int airlock_connect_status_code(airlock_connect_status s);

/* ---- the worker's outbound guard ------------------------------------------
 * For a host and port a tenant configured (an MCP server, a webhook, a
 * fetch): the same evaluation function, then one connection to the address
 * it checked. Returns 0 with *ret_fd a connected, blocking, close-on-exec TCP
 * socket when allowed; 0 with *ret_fd = -1 when refused (*ret_decision says
 * why: a refusal is an answer, not an error); AIRLOCK_ERR_EXECUTION_UNAVAILABLE
 * when allowed but the connection failed or timed out (timeout_ms > 0)
 * (*ret_decision still filled). Never resolves the name itself. */
int airlock_egress_guard_connect(const airlock_egress_policy *p, airlock_egress_resolve_fn resolve,
                                 void *resolve_ctx, const char *host, uint16_t port,
                                 int64_t timeout_ms, int *ret_fd,
                                 airlock_egress_decision *ret_decision, airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
