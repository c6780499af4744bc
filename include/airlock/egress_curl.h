/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EGRESS_CURL_H
#define AIRLOCK_EGRESS_CURL_H

/*
 * The worker's outbound guard for HTTP clients built on libcurl
 * (the specification, "The egress boundary": any URL the platform dials on
 * behalf of a tenant is checked against the same policy before the
 * connection is made). A separate header so only callers that use libcurl
 * pull it in.
 *
 * The address curl connects to is the address the evaluation function
 * checked: each hop's host and port are evaluated (one resolution), curl is
 * told that name:port is that address (CURLOPT_RESOLVE), and an open-socket
 * callback refuses any socket whose destination is not exactly the checked
 * address and port. Redirects are never followed by curl: each Location is
 * turned into the next hop and evaluated again from the start.
 */

#include <curl/curl.h>

#include "airlock/caps.h"
#include "airlock/egress.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct airlock_egress_curl_result {
	long status;                       /* the last response's HTTP status; 0 if none */
	unsigned hops;                     /* requests made (1 + redirects followed) */
	airlock_egress_decision decision;  /* the last hop's decision */
	char url[AIRLOCK_EGRESS_CURL_URL_MAX]; /* the last hop's URL */
} airlock_egress_curl_result;

/*
 * Perform a request on h (which the caller configured: method, body, write
 * callbacks, timeouts) to url, following at most max_redirects redirects
 * (3xx with a Location), each hop checked by airlock_egress_evaluate under p.
 * Only http and https URLs are accepted; no proxy from the environment is
 * used. The guard owns CURLOPT_URL, CURLOPT_RESOLVE, CURLOPT_CONNECT_TO,
 * CURLOPT_FOLLOWLOCATION, CURLOPT_PROXY, CURLOPT_PROTOCOLS_STR,
 * CURLOPT_REDIR_PROTOCOLS_STR, CURLOPT_FRESH_CONNECT (every hop opens its own
 * connection: a connection kept alive from an earlier request was never
 * checked against this hop's decision) and CURLOPT_OPENSOCKETFUNCTION/DATA
 * on h; it leaves them cleared (CURLOPT_RESOLVE, CURLOPT_OPENSOCKETFUNCTION,
 * CURLOPT_FRESH_CONNECT) when it returns.
 *
 * Redirects behave as curl's own following does: a 303, or a 301/302
 * answering a POST, is re-requested as GET; a hop to another origin clears
 * CURLOPT_USERPWD, CURLOPT_XOAUTH2_BEARER and CURLOPT_COOKIE on h. Two
 * limits the caller owns: credentials put in CURLOPT_HTTPHEADER go to every
 * hop (curl cannot read them back), and each redirect response's body reaches
 * the caller's write callback.
 *
 * Returns 0 when every hop was allowed and the last response arrived
 * (ret->status says what it was: a redirect past max_redirects is returned
 * as that 3xx); 0 with ret->decision.allow false when a hop was refused (no
 * connection was made for that hop); AIRLOCK_ERR_TOOL_VALIDATION for a URL
 * that is not http(s) or does not parse; AIRLOCK_ERR_EXECUTION_UNAVAILABLE
 * when curl failed (the message carries curl's error).
 */
int airlock_egress_curl_perform(CURL *h, const char *url, const airlock_egress_policy *p,
                                airlock_egress_resolve_fn resolve, void *resolve_ctx,
                                unsigned max_redirects, airlock_egress_curl_result *ret,
                                airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
