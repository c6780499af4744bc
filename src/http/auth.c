/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server core's authentication: the bearer credential, compared in
 * constant time, and the client certificate when a client CA is set.
 */
#include <gnutls/gnutls.h>
#include <openssl/crypto.h>
#include <string.h>
#include <strings.h>

#include "http/http_internal.h"

bool http_bearer_ok(const char *value, size_t value_len, const void *want, size_t want_len)
{
	static const char scheme[] = "Bearer ";
	const size_t sl = sizeof(scheme) - 1;
	if (!value || !want || want_len == 0 || value_len <= sl ||
	    strncasecmp(value, scheme, sl) != 0)
		return false;
	const char *tok = value + sl;
	size_t tlen = value_len - sl;
	/* The length is not a secret worth hiding (the file's size is not
	 * either); the bytes are: compared with CRYPTO_memcmp, whose time does
	 * not depend on where they first differ. */
	if (tlen != want_len)
		return false;
	return CRYPTO_memcmp(tok, want, want_len) == 0;
}

/* With a client CA configured, the TLS handshake asked for a certificate
 * (libmicrohttpd requests, it does not require): one that chains to the
 * CA is required here, before anything else is looked at. */
static bool client_cert_ok(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (!ci || !ci->tls_session)
		return false;
	gnutls_session_t sess = (gnutls_session_t)ci->tls_session;
	unsigned int n = 0;
	if (!gnutls_certificate_get_peers(sess, &n) || n == 0)
		return false;
	unsigned int status = 0;
	return gnutls_certificate_verify_peers2(sess, &status) == 0 && status == 0;
}

/* Whether the request may go on: the client certificate, then the bearer
 * credential; the connection then counts as authenticated. */
bool http_authenticate(http_request *r)
{
	http_server *h = r->h;
	if (!h->credential)
		return true;
	if (h->client_ca && !client_cert_ok(r->c))
		return false;
	size_t len = 0;
	const char *auth = http_request_header(r, MHD_HTTP_HEADER_AUTHORIZATION, &len);
	if (!http_bearer_ok(auth, len, h->credential, h->credential_len))
		return false;
	http_conn_authenticated(r->conn);
	return true;
}
