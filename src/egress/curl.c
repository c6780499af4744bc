/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The outbound guard for libcurl clients (include/airlock/egress_curl.h;
 * the specification, "The egress boundary"). Every hop of a request is
 * checked by the one evaluation function before curl may connect, and curl
 * connects only to the address that function checked:
 *
 *   - the hop's URL is parsed here with curl's own parser (CURLU), so the
 *     host and port checked are the ones curl will use, and curl is handed
 *     the URL as that parser serialized it;
 *   - CURLOPT_RESOLVE tells curl the name's address is the checked one, so
 *     curl never asks DNS itself (a second resolution could answer
 *     differently: DNS rebinding);
 *   - an open-socket callback refuses any socket whose destination is not
 *     exactly the checked address and port. CURLOPT_RESOLVE alone is not
 *     enough: curl keeps a DNS cache and a connection cache across
 *     transfers on a handle (and on a share), a caller can add its own
 *     RESOLVE or CONNECT_TO entries, a proxy or a Unix socket can be
 *     configured; whatever path curl takes to a socket, the callback sees it;
 *   - a fresh connection for every hop, so the callback does see it: a
 *     connection reused from an earlier transfer was opened for an earlier
 *     decision, possibly to another address;
 *   - curl never follows a redirect: each Location becomes the next hop,
 *     evaluated again from the start.
 */
#include "airlock/egress_curl.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "util/util.h"

/* What the open-socket callback lets through: one address and port. */
typedef struct socket_check {
	airlock_addr dial;
	uint16_t port;
	bool refused; /* curl asked for a socket to anything else */
} socket_check;

static bool sockaddr_is(const struct curl_sockaddr *a, const socket_check *c)
{
	struct sockaddr_storage ss;
	if (a->addrlen > sizeof(ss) || a->family != c->dial.family)
		return false;
	memset(&ss, 0, sizeof(ss));
	/* curl's struct ends in a struct sockaddr but carries addrlen bytes of
	 * the real address (sockaddr_in6 for IPv6). */
	memcpy(&ss, &a->addr, a->addrlen);
	if (a->family == AF_INET && a->addrlen >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)&ss;
		return sin->sin_family == AF_INET && ntohs(sin->sin_port) == c->port &&
		       sin->sin_addr.s_addr == c->dial.v4.s_addr;
	}
	if (a->family == AF_INET6 && a->addrlen >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&ss;
		return sin6->sin6_family == AF_INET6 && ntohs(sin6->sin6_port) == c->port &&
		       memcmp(&sin6->sin6_addr, &c->dial.v6, sizeof(c->dial.v6)) == 0;
	}
	return false;
}

static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *address)
{
	socket_check *c = clientp;

	/* Only an outgoing connection to exactly the checked address and port:
	 * not an accepted one (FTP's active mode), not a Unix socket, not a
	 * proxy, not another address of the name. */
	if (purpose != CURLSOCKTYPE_IPCXN || !address || !sockaddr_is(address, c) ||
	    address->socktype != SOCK_STREAM) {
		c->refused = true;
		return CURL_SOCKET_BAD;
	}
	/* Close-on-exec: a tool the worker starts must not inherit it. */
	int fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
	return fd < 0 ? CURL_SOCKET_BAD : fd;
}

/* One hop's URL as curl's parser sees it. */
typedef struct hop_url {
	char *url;  /* curl_free: the URL as CURLU serialized it */
	char *host; /* curl_free */
	uint16_t port;
	bool https;
} hop_url;

static void hop_url_clear(hop_url *u)
{
	curl_free(u->url);
	curl_free(u->host);
	memset(u, 0, sizeof(*u));
}

static int parse_hop(const char *url, unsigned hop, hop_url *ret, airlock_error *err)
{
	char shown[128];
	util_escape(shown, sizeof(shown), url, strnlen(url, AIRLOCK_EGRESS_CURL_URL_MAX));
	if (strnlen(url, AIRLOCK_EGRESS_CURL_URL_MAX) >= AIRLOCK_EGRESS_CURL_URL_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "egress: hop %u: URL longer than %u bytes", hop + 1,
		                         AIRLOCK_EGRESS_CURL_URL_MAX - 1);

	CURLU *u = curl_url();
	if (!u)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "egress: curl_url");
	char *scheme = NULL, *port = NULL;
	int r = 0;
	/* No scheme guessing and no default scheme: a URL says what it is. */
	CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, 0);
	if (uc != CURLUE_OK) {
		r = airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                      "egress: hop %u: URL \"%s\" does not parse: %s", hop + 1,
		                      shown, curl_url_strerror(uc));
		goto out;
	}
	if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
		r = airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                      "egress: hop %u: URL \"%s\" is not http or https", hop + 1,
		                      shown);
		goto out;
	}
	ret->https = strcmp(scheme, "https") == 0;
	/* The port the scheme implies when the URL names none: the evaluation
	 * checks the port curl will dial. */
	if (curl_url_get(u, CURLUPART_HOST, &ret->host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_URL, &ret->url, 0) != CURLUE_OK || !ret->host[0]) {
		r = airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                      "egress: hop %u: URL \"%s\" has no host", hop + 1, shown);
		goto out;
	}
	int64_t n;
	if (!util_parse_i64(port, &n) || n < 1 || n > 65535) {
		r = airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                      "egress: hop %u: URL \"%s\" has a bad port", hop + 1, shown);
		goto out;
	}
	ret->port = (uint16_t)n;
	if (strlen(ret->url) >= AIRLOCK_EGRESS_CURL_URL_MAX) {
		r = airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                      "egress: hop %u: URL longer than %u bytes", hop + 1,
		                      AIRLOCK_EGRESS_CURL_URL_MAX - 1);
		goto out;
	}
out:
	curl_free(scheme);
	curl_free(port);
	curl_url_cleanup(u);
	if (r < 0)
		hop_url_clear(ret);
	return r;
}

/* "HOST:PORT:ADDR" entries for the names curl may look this hop up by: the
 * URL's host as curl parsed it and the normalized name (they differ in case
 * or a trailing dot), both to the one checked address. */
static int resolve_list(const hop_url *u, const airlock_egress_decision *d,
                        struct curl_slist **ret, airlock_error *err)
{
	char addr[46], shown[50], entry[AIRLOCK_HOSTNAME_MAX + 64];
	airlock_addr_format(&d->dial, addr);
	/* An IPv6 address in brackets, as curl reads it. */
	if (d->dial.family == AF_INET6)
		snprintf(shown, sizeof(shown), "[%s]", addr);
	else
		snprintf(shown, sizeof(shown), "%s", addr);
	const char *names[2] = { d->host, u->host };
	struct curl_slist *list = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		if (i > 0 && strcmp(names[i], names[0]) == 0)
			continue;
		/* Both passed the name check, so neither holds ':' or ',': the
		 * entry cannot be read any other way. */
		int n = snprintf(entry, sizeof(entry), "%s:%u:%s", names[i], (unsigned)d->port, shown);
		if (n < 0 || (size_t)n >= sizeof(entry))
			continue; /* longer than any valid name: curl cannot ask for it */
		struct curl_slist *l = curl_slist_append(list, entry);
		if (!l) {
			curl_slist_free_all(list);
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "egress: resolve list");
		}
		list = l;
	}
	*ret = list;
	return 0;
}

/* The options the guard owns, set for one hop. */
static int set_hop_options(CURL *h, const hop_url *u, struct curl_slist *resolve,
                           socket_check *check)
{
	CURLcode c = CURLE_OK;
#define SET(opt, val)                                                                              \
	do {                                                                                       \
		if (c == CURLE_OK)                                                                 \
			c = curl_easy_setopt(h, opt, val);                                         \
	} while (0)
	SET(CURLOPT_URL, u->url);
	/* curl never follows a redirect: the next hop is checked here first. */
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	/* No proxy, from the options or the environment (http_proxy and
	 * friends): a proxy would be dialed instead of the checked address. */
	SET(CURLOPT_PROXY, "");
	SET(CURLOPT_NOPROXY, "*");
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	/* A caller's CONNECT_TO would send the connection elsewhere. */
	SET(CURLOPT_CONNECT_TO, (struct curl_slist *)NULL);
	/* The name's address is the checked one: curl does not resolve it. */
	SET(CURLOPT_RESOLVE, resolve);
	/* Every hop on a new connection, which the callback sees: a reused one
	 * was opened for an earlier decision. */
	SET(CURLOPT_FRESH_CONNECT, 1L);
	SET(CURLOPT_OPENSOCKETFUNCTION, open_socket);
	SET(CURLOPT_OPENSOCKETDATA, check);
#undef SET
	return c == CURLE_OK ? 0 : -1;
}

/* Leave the handle with nothing pointing at this call's memory. */
static void clear_options(CURL *h)
{
	curl_easy_setopt(h, CURLOPT_RESOLVE, (struct curl_slist *)NULL);
	curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, (curl_opensocket_callback)NULL);
	curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, (void *)NULL);
	curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 0L);
}

static bool same_origin(const hop_url *a, const hop_url *b)
{
	return a->https == b->https && a->port == b->port && strcasecmp(a->host, b->host) == 0;
}

/* Before a redirect is re-requested on the same handle: what curl itself
 * does when it follows one. A 303, and a 301 or 302 answering a POST, is
 * followed with GET (the body is not sent on); credentials the handle
 * carries are not sent to another origin. (Headers the caller put in
 * CURLOPT_HTTPHEADER cannot be read back and go to every hop: a caller that
 * puts a credential there passes max_redirects 0. Likewise each redirect's
 * own response body has gone to the caller's write callback, which curl
 * following by itself would have dropped.) */
static void prepare_redirect(CURL *h, long status, bool cross_origin)
{
	char *m = NULL;
	if (curl_easy_getinfo(h, CURLINFO_EFFECTIVE_METHOD, &m) != CURLE_OK)
		m = NULL;
	const char *method = m ? m : "GET";
	bool head = strcmp(method, "HEAD") == 0;
	if ((status == 303 && !head) ||
	    ((status == 301 || status == 302) && strcmp(method, "POST") == 0)) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, (char *)NULL);
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	}
	if (cross_origin) {
		curl_easy_setopt(h, CURLOPT_USERPWD, (char *)NULL);
		curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, (char *)NULL);
		curl_easy_setopt(h, CURLOPT_COOKIE, (char *)NULL);
	}
}

int airlock_egress_curl_perform(CURL *h, const char *url, const airlock_egress_policy *p,
                                airlock_egress_resolve_fn resolve, void *resolve_ctx,
                                unsigned max_redirects, airlock_egress_curl_result *ret,
                                airlock_error *err)
{
	if (!h || !url || !p || !resolve || !ret)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "egress: curl perform");
	memset(ret, 0, sizeof(*ret));

	char *next = strdup(url);
	if (!next)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "egress: curl perform");
	hop_url first = { 0 }, cur = { 0 };
	struct curl_slist *resolve_entries = NULL;
	int r = 0;

	for (unsigned hop = 0;; hop++) {
		hop_url_clear(&cur);
		r = parse_hop(next, hop, &cur, err);
		if (r < 0)
			break;
		snprintf(ret->url, sizeof(ret->url), "%s", cur.url);

		/* The one evaluation function, from the start, for every hop: a
		 * redirect target is a new destination. The host is the URL's
		 * host as curl parsed it (an IPv6 literal keeps its brackets, so it
		 * is refused as a literal). */
		r = airlock_egress_evaluate(p, cur.host, cur.port, resolve, resolve_ctx,
		                            &ret->decision, err);
		if (r < 0 || !ret->decision.allow)
			break; /* a refusal is an answer: nothing was dialed for it */

		curl_slist_free_all(resolve_entries);
		resolve_entries = NULL;
		r = resolve_list(&cur, &ret->decision, &resolve_entries, err);
		if (r < 0)
			break;
		socket_check check = { .dial = ret->decision.dial, .port = ret->decision.port };
		if (set_hop_options(h, &cur, resolve_entries, &check) < 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                      "egress: hop %u: curl refused an option", hop + 1);
			break;
		}

		ret->hops++;
		CURLcode cc = curl_easy_perform(h);
		/* The callback's data lives in this loop iteration only. */
		curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, (void *)NULL);
		curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, (curl_opensocket_callback)NULL);
		if (cc != CURLE_OK) {
			char addr[46];
			airlock_addr_format(&ret->decision.dial, addr);
			r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                      "egress: hop %u to %s port %u (%s): %s%s", hop + 1,
			                      ret->decision.host, (unsigned)ret->decision.port, addr,
			                      curl_easy_strerror(cc),
			                      check.refused ? " (refused a socket to an address "
			                                      "that was not checked)" :
			                                      "");
			break;
		}
		long status = 0;
		char *location = NULL;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		ret->status = status;
		if (status < 300 || status > 399 || hop >= max_redirects ||
		    curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &location) != CURLE_OK || !location)
			break; /* the last response: a redirect past the limit is returned as is */

		/* curl resolved the Location against this hop's URL; it belongs to
		 * the handle and changes with the next transfer. */
		char *loc = strdup(location);
		if (!loc) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "egress: redirect");
			break;
		}
		free(next);
		next = loc;
		if (hop == 0) {
			first = cur;
			memset(&cur, 0, sizeof(cur));
		}
		hop_url peek = { 0 };
		bool cross = true;
		if (parse_hop(next, hop + 1, &peek, NULL) == 0)
			cross = !same_origin(&first, &peek);
		hop_url_clear(&peek);
		prepare_redirect(h, status, cross);
	}

	clear_options(h);
	curl_slist_free_all(resolve_entries);
	hop_url_clear(&cur);
	hop_url_clear(&first);
	free(next);
	return r;
}
