/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's outbound guard (include/airlock/egress.h,
 * airlock_egress_guard_connect; include/airlock/egress_curl.h), against
 * real servers and real DNS: every test brings up its own small internet
 * (tests/egress_world.h) in its own network namespace, and resolves with the
 * production c-ares resolver pointed at the world's dnsmasq (or at its
 * rebinding server). Refusals are checked by their reason, which names the
 * step that refused; allowed connections by what the far end says, which
 * names the host that answered.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "airlock/egress.h"
#include "airlock/egress_curl.h"
#include "egress_world.h"

static egress_world world;
static bool world_started;
static airlock_egress_resolver *resolver;
static airlock_egress_policy policy;
static bool policy_parsed;

/* Bring up this test's world, a resolver pointed at dns, and a policy. */
static void up(const char *dns, const char *yaml)
{
	airlock_error err = { 0 };
	cr_assert_eq(egress_world_up(&world), 0, "the egress world did not come up");
	world_started = true;
	cr_assert_eq(airlock_egress_resolver_new(dns, &resolver, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_egress_policy_parse("policy.yaml", yaml, strlen(yaml), &policy, &err), 0,
	             "%s", err.message);
	policy_parsed = true;
}

static void down(void)
{
	if (resolver)
		airlock_egress_resolver_free(resolver);
	resolver = NULL;
	if (policy_parsed)
		airlock_egress_policy_clear(&policy);
	policy_parsed = false;
	if (world_started)
		egress_world_down(&world);
	world_started = false;
}

TestSuite(egress_guard, .fini = down, .timeout = 60);

#define POLICY                                                                                     \
	"egress:\n"                                                                                \
	"  mode: allowlist\n"                                                                      \
	"  destinations:\n"                                                                        \
	"    - host: a.example.com\n"                                                              \
	"      ports: [80, 443, 9000, 9001, 9002]\n"                                               \
	"    - host: private.example.com\n"                                                        \
	"      ports: [80, 9000]\n"                                                                \
	"    - host: mixed.example.com\n"                                                          \
	"      ports: [9000]\n"                                                                    \
	"    - host: metadata.example.com\n"                                                       \
	"      ports: [9000]\n"                                                                    \
	"    - host: loop.example.com\n"                                                           \
	"      ports: [9000]\n"                                                                    \
	"    - host: v6.example.com\n"                                                             \
	"      ports: [9000]\n"                                                                    \
	"    - host: rebind.example.com\n"                                                         \
	"      ports: [9000]\n"

/* The same, and b.example.com too. */
#define POLICY_WITH_B                                                                              \
	POLICY "    - host: b.example.com\n"                                                       \
	       "      ports: [80]\n"

static void addr_is(const airlock_addr *a, const char *want)
{
	char buf[46];
	airlock_addr_format(a, buf);
	cr_assert_str_eq(buf, want);
}

static void write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		cr_assert_gt(n, 0, "write: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

/* Read to EOF (bounded by the socket's timeout). */
static size_t read_all(int fd, char *buf, size_t size)
{
	struct timeval tv = { .tv_sec = 10 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	size_t got = 0;
	for (;;) {
		cr_assert_lt(got, size - 1, "more than expected");
		ssize_t n = read(fd, buf + got, size - 1 - got);
		cr_assert_geq(n, 0, "read: %s", strerror(errno));
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = 0;
	return got;
}

/* ---- the guard -------------------------------------------------------------- */

Test(egress_guard, allowed_host_connects_to_the_checked_address_with_half_close)
{
	up(EGRESS_WORLD_DNS, POLICY);
	airlock_egress_decision d;
	airlock_error err = { 0 };
	int fd = -2;

	cr_assert_eq(airlock_egress_guard_connect(&policy, airlock_egress_resolver_resolve,
	                                          resolver, "a.example.com", 9000, 5000, &fd, &d,
	                                          &err),
	             0, "%s", err.message);
	cr_assert(d.allow);
	cr_assert_eq(d.reason, AIRLOCK_EGRESS_ALLOWED);
	cr_assert(d.has_dial);
	addr_is(&d.dial, EGRESS_WORLD_A);
	cr_assert_geq(fd, 0);

	/* Close-on-exec and blocking, as the contract says. */
	cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	cr_assert_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);

	/* It is connected to exactly the checked address and port. */
	struct sockaddr_in peer;
	socklen_t len = sizeof(peer);
	cr_assert_eq(getpeername(fd, (struct sockaddr *)&peer, &len), 0);
	char buf[64];
	cr_assert_str_eq(inet_ntop(AF_INET, &peer.sin_addr, buf, sizeof(buf)), EGRESS_WORLD_A);
	cr_assert_eq(ntohs(peer.sin_port), 9000);

	/* An echo round trip, then our FIN, then the server's "bye" and FIN. */
	write_all(fd, "ping", 4);
	char got[5] = { 0 };
	size_t n = 0;
	while (n < 4) {
		ssize_t r = read(fd, got + n, 4 - n);
		cr_assert_gt(r, 0);
		n += (size_t)r;
	}
	cr_assert_str_eq(got, "ping");
	cr_assert_eq(shutdown(fd, SHUT_WR), 0);
	read_all(fd, buf, sizeof(buf));
	cr_assert_str_eq(buf, "bye\n");
	close(fd);
}

Test(egress_guard, allowed_connection_carries_every_byte)
{
	up(EGRESS_WORLD_DNS, POLICY);
	airlock_egress_decision d;
	airlock_error err = { 0 };
	int fd = -2;

	cr_assert_eq(airlock_egress_guard_connect(&policy, airlock_egress_resolver_resolve,
	                                          resolver, "A.Example.COM.", 9001, 5000, &fd, &d,
	                                          &err),
	             0, "%s", err.message);
	cr_assert_geq(fd, 0);
	cr_assert_str_eq(d.host, "a.example.com");
	static char data[300000];
	memset(data, 'x', sizeof(data));
	write_all(fd, data, sizeof(data));
	cr_assert_eq(shutdown(fd, SHUT_WR), 0);
	char buf[32];
	read_all(fd, buf, sizeof(buf));
	cr_assert_str_eq(buf, "300000\n");
	close(fd);
}

Test(egress_guard, unlisted_host_is_refused_before_any_lookup)
{
	up(EGRESS_WORLD_DNS, POLICY);
	airlock_egress_decision d;
	airlock_error err = { 0 };
	int fd = -2;

	cr_assert_eq(airlock_egress_guard_connect(&policy, airlock_egress_resolver_resolve,
	                                          resolver, "b.example.com", 9000, 5000, &fd, &d,
	                                          &err),
	             0, "%s", err.message);
	cr_assert_eq(fd, -1);
	cr_assert_not(d.allow);
	cr_assert_eq(d.reason, AIRLOCK_EGRESS_NOT_ALLOWLISTED, "%s",
	             airlock_egress_reason_name(d.reason));
	cr_assert_not(d.has_dial);
	cr_assert_eq(d.n_addresses, 0);

	/* Nothing was asked of DNS either (dnsmasq logs each query it gets;
	 * a lookup that did happen has been logged by the time it answered,
	 * and a.example.com's proves the log is written). */
	cr_assert_eq(airlock_egress_guard_connect(&policy, airlock_egress_resolver_resolve,
	                                          resolver, "a.example.com", 9000, 5000, &fd, &d,
	                                          &err),
	             0, "%s", err.message);
	cr_assert_geq(fd, 0);
	close(fd);
	char log[8192] = { 0 };
	FILE *f = NULL;
	for (int i = 0; i < 100; i++) {
		f = fopen(world.dnsmasq_log, "re");
		cr_assert_not_null(f);
		size_t n = fread(log, 1, sizeof(log) - 1, f);
		log[n] = 0;
		fclose(f);
		if (strstr(log, "query[A] a.example.com from " EGRESS_WORLD_SELF))
			break;
		usleep(20000);
	}
	cr_assert_not_null(strstr(log, "query[A] a.example.com from " EGRESS_WORLD_SELF), "%s", log);
	cr_assert_null(strstr(log, "b.example.com"), "%s", log);
}

Test(egress_guard, listed_host_on_an_unlisted_port_is_refused)
{
	up(EGRESS_WORLD_DNS, POLICY);
	airlock_egress_decision d;
	airlock_error err = { 0 };
	int fd = -2;

	/* 8080 has a server on A: the refusal is the policy's, not the net's. */
	cr_assert_eq(airlock_egress_guard_connect(&policy, airlock_egress_resolver_resolve,
	                                          resolver, "a.example.com", 8080, 5000, &fd, &d,
	                                          &err),
	             0, "%s", err.message);
	cr_assert_eq(fd, -1);
	cr_assert_eq(d.reason, AIRLOCK_EGRESS_PORT_NOT_ALLOWED, "%s",
	             airlock_egress_reason_name(d.reason));
}

typedef struct {
	const char *host;
	airlock_egress_reason reason;
	const char *denied;
	size_t n_addresses;
} denied_row;

Test(egress_guard, listed_names_that_resolve_to_denied_addresses_are_refused)
{
	static const denied_row rows[] = {
		{ "private.example.com", AIRLOCK_EGRESS_DENIED_ADDRESS, "10.0.0.5", 1 },
		/* one bad address refuses the whole name, the public one too */
		{ "mixed.example.com", AIRLOCK_EGRESS_DENIED_ADDRESS, "10.0.0.5", 2 },
		{ "metadata.example.com", AIRLOCK_EGRESS_METADATA_ADDRESS, "169.254.169.254", 1 },
		{ "loop.example.com", AIRLOCK_EGRESS_DENIED_ADDRESS, "127.0.0.1", 1 },
		/* the metadata address wrapped in an IPv4-mapped AAAA record */
		{ "v6.example.com", AIRLOCK_EGRESS_METADATA_ADDRESS, "::ffff:169.254.169.254", 1 },
	};
	up(EGRESS_WORLD_DNS, POLICY);

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		airlock_egress_decision d;
		airlock_error err = { 0 };
		int fd = -2;
		cr_assert_eq(airlock_egress_guard_connect(&policy, airlock_egress_resolver_resolve,
		                                          resolver, rows[i].host, 9000, 5000, &fd,
		                                          &d, &err),
		             0, "%s: %s", rows[i].host, err.message);
		cr_assert_eq(fd, -1, "%s", rows[i].host);
		cr_assert_not(d.allow, "%s", rows[i].host);
		cr_assert_not(d.has_dial, "%s", rows[i].host);
		cr_assert_eq(d.reason, rows[i].reason, "%s: %s", rows[i].host,
		             airlock_egress_reason_name(d.reason));
		cr_assert_eq(d.n_addresses, rows[i].n_addresses, "%s", rows[i].host);
		addr_is(&d.denied, rows[i].denied);
	}
}

Test(egress_guard, allowed_but_unreachable_is_unavailable_not_refused)
{
	up(EGRESS_WORLD_DNS, POLICY);
	airlock_egress_decision d;
	airlock_error err = { 0 };
	int fd = -2;

	/* 9002 is listed, and nothing listens there. */
	int r = airlock_egress_guard_connect(&policy, airlock_egress_resolver_resolve, resolver,
	                                     "a.example.com", 9002, 5000, &fd, &d, &err);
	cr_assert_eq(r, airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE), "%d %s", r,
	             err.message);
	cr_assert_eq(fd, -1);
	cr_assert(d.allow);
	addr_is(&d.dial, EGRESS_WORLD_A);
	cr_assert_not_null(strstr(err.message, EGRESS_WORLD_A), "%s", err.message);
}

Test(egress_guard, rebinding_name_is_looked_up_once_and_dialed_as_checked)
{
	up(EGRESS_WORLD_REBIND_DNS, POLICY);
	airlock_egress_decision d;
	airlock_error err = { 0 };
	int fd = -2;

	/* The first answer is public: allowed, and the connection goes to it. */
	cr_assert_eq(airlock_egress_guard_connect(&policy, airlock_egress_resolver_resolve,
	                                          resolver, "rebind.example.com", 9000, 5000, &fd,
	                                          &d, &err),
	             0, "%s", err.message);
	cr_assert(d.allow, "%s", airlock_egress_reason_name(d.reason));
	addr_is(&d.dial, EGRESS_WORLD_A);
	cr_assert_geq(fd, 0);
	struct sockaddr_in peer;
	socklen_t len = sizeof(peer);
	cr_assert_eq(getpeername(fd, (struct sockaddr *)&peer, &len), 0);
	cr_assert_eq(peer.sin_addr.s_addr, inet_addr(EGRESS_WORLD_A));
	close(fd);
	/* One A query: the guard never asked again before it dialed. */
	cr_assert_eq(egress_world_dns_queries(&world, "rebind.example.com", 1), 1);
	cr_assert_eq(egress_world_dns_queries(&world, "rebind.example.com", 28), 1);

	/* The name now says 10.0.0.5: refused, without a connection. */
	fd = -2;
	cr_assert_eq(airlock_egress_guard_connect(&policy, airlock_egress_resolver_resolve,
	                                          resolver, "rebind.example.com", 9000, 5000, &fd,
	                                          &d, &err),
	             0, "%s", err.message);
	cr_assert_eq(fd, -1);
	cr_assert_eq(d.reason, AIRLOCK_EGRESS_DENIED_ADDRESS, "%s",
	             airlock_egress_reason_name(d.reason));
	addr_is(&d.denied, "10.0.0.5");
	cr_assert_eq(egress_world_dns_queries(&world, "rebind.example.com", 1), 2);
}

Test(egress_guard, ip_literals_are_refused_as_such)
{
	up(EGRESS_WORLD_DNS, POLICY);
	static const char *const hosts[] = { EGRESS_WORLD_A, "[::ffff:198.51.100.2]",
		                             "3325256706", "0xc6.0x33.0x64.2" };
	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		airlock_egress_decision d;
		airlock_error err = { 0 };
		int fd = -2;
		cr_assert_eq(airlock_egress_guard_connect(&policy, airlock_egress_resolver_resolve,
		                                          resolver, hosts[i], 9000, 5000, &fd, &d,
		                                          &err),
		             0, "%s", err.message);
		cr_assert_eq(fd, -1);
		cr_assert_eq(d.reason, AIRLOCK_EGRESS_IP_LITERAL, "%s: %s", hosts[i],
		             airlock_egress_reason_name(d.reason));
	}
}

/* ---- the curl guard ---------------------------------------------------------- */

typedef struct {
	char data[4096];
	size_t len;
} body;

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	body *b = userdata;
	size_t n = size * nmemb;
	if (n > sizeof(b->data) - 1 - b->len)
		return 0; /* more than any test expects: fail the transfer */
	memcpy(b->data + b->len, ptr, n);
	b->len += n;
	b->data[b->len] = 0;
	return n;
}

static CURL *handle(body *b)
{
	cr_assert_eq(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
	CURL *h = curl_easy_init();
	cr_assert_not_null(h);
	memset(b, 0, sizeof(*b));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	return h;
}

static void handle_free(CURL *h)
{
	curl_easy_cleanup(h);
	curl_global_cleanup();
}

static int get(CURL *h, const char *url, unsigned max_redirects, airlock_egress_curl_result *res,
               airlock_error *err)
{
	return airlock_egress_curl_perform(h, url, &policy, airlock_egress_resolver_resolve, resolver,
	                                   max_redirects, res, err);
}

static const char *primary_ip(CURL *h)
{
	char *ip = NULL;
	cr_assert_eq(curl_easy_getinfo(h, CURLINFO_PRIMARY_IP, &ip), CURLE_OK);
	return ip ? ip : "";
}

Test(egress_guard, curl_http_get)
{
	up(EGRESS_WORLD_DNS, POLICY);
	body b;
	CURL *h = handle(&b);
	static airlock_egress_curl_result res;
	airlock_error err = { 0 };

	cr_assert_eq(get(h, "http://a.example.com/", 5, &res, &err), 0, "%s", err.message);
	cr_assert(res.decision.allow);
	cr_assert_eq(res.status, 200);
	cr_assert_eq(res.hops, 1);
	cr_assert_str_eq(b.data, "hello from a\n");
	cr_assert_str_eq(res.url, "http://a.example.com/");
	addr_is(&res.decision.dial, EGRESS_WORLD_A);
	cr_assert_str_eq(primary_ip(h), EGRESS_WORLD_A);

	/* Case and a trailing dot: the name curl looks up is the checked one. */
	memset(&b, 0, sizeof(b));
	cr_assert_eq(get(h, "HTTP://A.Example.COM./", 5, &res, &err), 0, "%s", err.message);
	cr_assert_eq(res.status, 200);
	cr_assert_str_eq(b.data, "hello from a\n");
	cr_assert_str_eq(primary_ip(h), EGRESS_WORLD_A);

	/* The guard left no callback or list behind: the handle is the
	 * caller's again (an address URL, so no lookup is involved). */
	memset(&b, 0, sizeof(b));
	curl_easy_setopt(h, CURLOPT_URL, "http://" EGRESS_WORLD_B "/");
	cr_assert_eq(curl_easy_perform(h), CURLE_OK);
	cr_assert_str_eq(b.data, "hello from b\n");
	handle_free(h);
}

Test(egress_guard, curl_https_get_verifies_against_the_world_ca)
{
	up(EGRESS_WORLD_DNS, POLICY);
	body b;
	CURL *h = handle(&b);
	static airlock_egress_curl_result res;
	airlock_error err = { 0 };

	curl_easy_setopt(h, CURLOPT_CAINFO, world.ca_path);
	cr_assert_eq(get(h, "https://a.example.com/", 5, &res, &err), 0, "%s", err.message);
	cr_assert_eq(res.status, 200);
	cr_assert_eq(res.hops, 1);
	cr_assert_eq(res.decision.port, 443);
	cr_assert_str_eq(b.data, "hello from a\n");
	handle_free(h);
}

/* http://a.example.com/redirect?to=<to, percent-encoded> */
static void redirect_url(char *buf, size_t size, const char *to)
{
	CURL *h = curl_easy_init();
	cr_assert_not_null(h);
	char *esc = curl_easy_escape(h, to, 0);
	cr_assert_not_null(esc);
	snprintf(buf, size, "http://a.example.com/redirect?to=%s", esc);
	curl_free(esc);
	curl_easy_cleanup(h);
}

Test(egress_guard, curl_redirect_to_a_listed_private_name_is_refused_on_its_hop)
{
	up(EGRESS_WORLD_DNS, POLICY);
	body b;
	CURL *h = handle(&b);
	static airlock_egress_curl_result res;
	airlock_error err = { 0 };
	char url[512];

	/* private.example.com is on the allowlist: only the redirect hop's own
	 * evaluation (its resolution to 10.0.0.5) can refuse it. */
	redirect_url(url, sizeof(url), "http://private.example.com/");
	cr_assert_eq(get(h, url, 5, &res, &err), 0, "%s", err.message);
	cr_assert_not(res.decision.allow);
	cr_assert_eq(res.decision.reason, AIRLOCK_EGRESS_DENIED_ADDRESS, "%s",
	             airlock_egress_reason_name(res.decision.reason));
	cr_assert_str_eq(res.decision.host, "private.example.com");
	addr_is(&res.decision.denied, "10.0.0.5");
	cr_assert_eq(res.hops, 1);
	cr_assert_eq(res.status, 302);
	cr_assert_str_eq(res.url, "http://private.example.com/");
	handle_free(h);
}

Test(egress_guard, curl_redirect_to_an_address_is_refused_as_a_literal)
{
	up(EGRESS_WORLD_DNS, POLICY);
	body b;
	CURL *h = handle(&b);
	static airlock_egress_curl_result res;
	airlock_error err = { 0 };
	char url[512];

	redirect_url(url, sizeof(url), "http://10.0.0.5/");
	cr_assert_eq(get(h, url, 5, &res, &err), 0, "%s", err.message);
	cr_assert_not(res.decision.allow);
	cr_assert_eq(res.decision.reason, AIRLOCK_EGRESS_IP_LITERAL, "%s",
	             airlock_egress_reason_name(res.decision.reason));
	cr_assert_eq(res.hops, 1);

	/* And an IPv6 literal, bracketed, given directly. */
	cr_assert_eq(get(h, "http://[::ffff:10.0.0.5]:80/", 5, &res, &err), 0, "%s", err.message);
	cr_assert_eq(res.decision.reason, AIRLOCK_EGRESS_IP_LITERAL, "%s",
	             airlock_egress_reason_name(res.decision.reason));
	cr_assert_eq(res.hops, 0);
	handle_free(h);
}

Test(egress_guard, curl_redirect_to_an_allowed_host_is_followed_and_checked)
{
	up(EGRESS_WORLD_DNS, POLICY_WITH_B);
	body b;
	CURL *h = handle(&b);
	static airlock_egress_curl_result res;
	airlock_error err = { 0 };
	char url[512];

	redirect_url(url, sizeof(url), "http://b.example.com/");
	cr_assert_eq(get(h, url, 5, &res, &err), 0, "%s", err.message);
	cr_assert(res.decision.allow);
	cr_assert_eq(res.status, 200);
	cr_assert_eq(res.hops, 2);
	cr_assert_str_eq(b.data, "hello from b\n");
	cr_assert_str_eq(res.decision.host, "b.example.com");
	addr_is(&res.decision.dial, EGRESS_WORLD_B);
	cr_assert_str_eq(res.url, "http://b.example.com/");
	cr_assert_str_eq(primary_ip(h), EGRESS_WORLD_B);

	/* No redirects allowed: the 302 is the answer. */
	memset(&b, 0, sizeof(b));
	cr_assert_eq(get(h, url, 0, &res, &err), 0, "%s", err.message);
	cr_assert_eq(res.status, 302);
	cr_assert_eq(res.hops, 1);
	cr_assert_str_eq(b.data, "");
	handle_free(h);
}

Test(egress_guard, curl_refuses_urls_that_are_not_http)
{
	up(EGRESS_WORLD_DNS, POLICY);
	body b;
	CURL *h = handle(&b);
	static airlock_egress_curl_result res;
	static const char *const urls[] = {
		"ftp://a.example.com/", "file:///etc/passwd", "a.example.com/", "gopher://a.example.com/",
		"http://a.example.com:0/", "",
	};

	for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
		airlock_error err = { 0 };
		int r = get(h, urls[i], 5, &res, &err);
		cr_assert_eq(r, airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION), "%s: %d %s", urls[i], r,
		             err.message);
		cr_assert_eq(res.hops, 0, "%s", urls[i]);
	}
	/* Nor as a redirect target. */
	char url[512];
	airlock_error err = { 0 };
	redirect_url(url, sizeof(url), "ftp://a.example.com/");
	cr_assert_eq(get(h, url, 5, &res, &err), airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION), "%s",
	             err.message);
	cr_assert_eq(res.hops, 1);
	handle_free(h);
}

/* A resolver that answers one fixed address for every name. */
static int fixed_resolve(void *ctx, const char *name, airlock_addr *ret, size_t max, size_t *ret_n)
{
	if (max < 1 || !airlock_addr_parse(ctx, &ret[0]))
		return -EIO;
	*ret_n = 1;
	return 0;
}

Test(egress_guard, curl_connects_only_to_the_checked_address)
{
	up(EGRESS_WORLD_DNS, POLICY);
	body b;
	CURL *h = handle(&b);
	static airlock_egress_curl_result res;
	airlock_error err = { 0 };

	/* The handle already believes a.example.com:80 is B, in its DNS cache,
	 * with a live connection to B in its connection cache. */
	struct curl_slist *seed = curl_slist_append(NULL, "a.example.com:80:" EGRESS_WORLD_B);
	cr_assert_not_null(seed);
	curl_easy_setopt(h, CURLOPT_RESOLVE, seed);
	curl_easy_setopt(h, CURLOPT_URL, "http://a.example.com/");
	cr_assert_eq(curl_easy_perform(h), CURLE_OK);
	cr_assert_str_eq(b.data, "hello from b\n");

	/* The check says A: the guard's request goes to A. */
	memset(&b, 0, sizeof(b));
	cr_assert_eq(airlock_egress_curl_perform(h, "http://a.example.com/", &policy, fixed_resolve,
	                                         (void *)EGRESS_WORLD_A, 0, &res, &err),
	             0, "%s", err.message);
	cr_assert_eq(res.status, 200);
	cr_assert_str_eq(b.data, "hello from a\n");
	cr_assert_str_eq(primary_ip(h), EGRESS_WORLD_A);

	/* A caller's CONNECT_TO cannot send it elsewhere either. */
	struct curl_slist *to = curl_slist_append(NULL, "a.example.com:80:" EGRESS_WORLD_B ":80");
	cr_assert_not_null(to);
	curl_easy_setopt(h, CURLOPT_CONNECT_TO, to);
	memset(&b, 0, sizeof(b));
	cr_assert_eq(airlock_egress_curl_perform(h, "http://a.example.com/", &policy, fixed_resolve,
	                                         (void *)EGRESS_WORLD_A, 0, &res, &err),
	             0, "%s", err.message);
	cr_assert_str_eq(b.data, "hello from a\n");
	cr_assert_str_eq(primary_ip(h), EGRESS_WORLD_A);

	handle_free(h);
	curl_slist_free_all(seed);
	curl_slist_free_all(to);
}

Test(egress_guard, curl_socket_to_anything_but_the_checked_address_is_refused)
{
	up(EGRESS_WORLD_DNS, POLICY);
	body b;
	CURL *h = handle(&b);
	static airlock_egress_curl_result res;
	airlock_error err = { 0 };

	/* A Unix socket the caller configured is a destination nobody checked:
	 * the open-socket check refuses it, and it never sees a connection. */
	char dir[] = "/tmp/egress-guard.XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/s", dir);
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	cr_assert_geq(l, 0);
	cr_assert_eq(bind(l, (struct sockaddr *)&sun, sizeof(sun)), 0);
	cr_assert_eq(listen(l, 4), 0);
	curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, sun.sun_path);

	int r = get(h, "http://a.example.com/", 0, &res, &err);
	int a = accept(l, NULL, NULL);
	int accept_errno = errno;
	close(l);
	unlink(sun.sun_path);
	rmdir(dir);

	cr_assert_eq(r, airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE), "%d %s", r,
	             err.message);
	cr_assert_not_null(strstr(err.message, "not checked"), "%s", err.message);
	cr_assert(res.decision.allow);
	cr_assert_eq(res.status, 0);
	cr_assert_eq(a, -1);
	cr_assert_eq(accept_errno, EAGAIN);
	handle_free(h);
}
