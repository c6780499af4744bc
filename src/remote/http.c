/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The remote adapter's transport: one HTTP/1.1 call to the execution
 * service over libcurl, on a Unix socket or HTTPS (docs/service-api.md).
 *
 * Every call runs on its own easy handle inside its own multi handle, so
 * any number of threads call at once (the core runs executes from several
 * threads) with nothing shared but the connection cache, which lives in a
 * share object behind a lock: a call reuses an idle connection another call
 * left, the way one long-lived client would, instead of paying a connect
 * (and on TCP a TLS handshake) per call. The multi handle is what lets a
 * call watch descriptors of its own while the transfer runs (the cancel
 * token, the adapter's shutdown): curl_multi_poll waits on both.
 *
 * The credential is the Authorization header's bytes, built once, held
 * only here and wiped when the adapter is freed. Nothing this file writes
 * into an error message contains it: messages name the address.
 */
#include "remote/remote_internal.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "airlock/json.h"
#include "util/fault.h"

/* A message's lead: "what: ", or nothing for the port's verbs (what NULL),
 * whose name the core's wrapper already puts above the message
 * ("provision (remote): "). */
#define WHAT(what) (what) ? (what) : "", (what) ? ": " : ""

struct remote_http {
	const char *peer; /* whom messages name: "the execution service", "the worker" */
	char *address;   /* as configured, for messages */
	char *unix_path; /* "unix:" addresses */
	char *base_url;  /* "http://localhost" or "https://HOST:PORT" */
	char *auth;      /* "Authorization: Bearer <credential>" or NULL; wiped on free */
	size_t auth_len;
	char *tls_ca, *tls_cert, *tls_key;
	int64_t connect_timeout_ms;
	CURLSH *share;
	pthread_mutex_t share_lock[CURL_LOCK_DATA_LAST];
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_global_rc = CURLE_FAILED_INIT;

/* curl_global_init is not safe to run twice at once; once per process. */
static void curl_global(void)
{
	curl_global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void share_lock(CURL *handle, curl_lock_data data, curl_lock_access access, void *arg)
{
	(void)handle;
	(void)access;
	remote_http *h = arg;
	pthread_mutex_lock(&h->share_lock[data]);
}

static void share_unlock(CURL *handle, curl_lock_data data, void *arg)
{
	(void)handle;
	remote_http *h = arg;
	pthread_mutex_unlock(&h->share_lock[data]);
}

const char *remote_http_address(const remote_http *h)
{
	return h->address;
}

/* HOST:PORT, HOST a name, an IPv4 literal or a bracketed IPv6 literal; the
 * characters a URL authority could misread (a path, a user, a query) are
 * refused rather than passed to curl. */
static bool host_port_valid(const char *a)
{
	const char *colon = strrchr(a, ':');
	if (!colon || colon == a || !colon[1])
		return false;
	int64_t port;
	if (!util_parse_i64(colon + 1, &port) || port < 1 || port > 65535)
		return false;
	for (const char *p = a; p < colon; p++)
		if (!(*p == '.' || *p == '-' || *p == '[' || *p == ']' || *p == ':' ||
		      (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
			return false;
	return true;
}

static const remote_peer service_peer = {
	.who = "remote adapter", .peer = "the execution service", .credential = "service credential",
	.credential_required = true,
};

int remote_http_new(const airlock_remote_config *cfg, remote_http **ret, airlock_error *err)
{
	return remote_http_new_peer(cfg, &service_peer, ret, err);
}

int remote_http_new_peer(const airlock_remote_config *cfg, const remote_peer *pr,
                         remote_http **ret, airlock_error *err)
{
	if (!cfg || !cfg->address || !*cfg->address)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "%s: no %s address (unix:PATH or HOST:PORT)", pr->who,
		                         pr->peer + 4);
	/* The token goes into a header line: a byte that is not visible ASCII
	 * (a newline above all) would end the header and start another. */
	bool none = !cfg->credential || cfg->credential_len == 0;
	if ((none && pr->credential_required) || cfg->credential_len > 4096)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "%s: the %s must be 1 to 4096 bytes", pr->who, pr->credential);
	const unsigned char *cred = cfg->credential;
	for (size_t i = 0; !none && i < cfg->credential_len; i++)
		if (cred[i] < 0x21 || cred[i] > 0x7e)
			return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                         "%s: the %s holds a byte that is not visible ASCII "
			                         "(at offset %zu)",
			                         pr->who, pr->credential, i);
	pthread_once(&curl_once, curl_global);
	if (curl_global_rc != CURLE_OK)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s: libcurl", pr->who);

	remote_http *h = calloc(1, sizeof(*h));
	if (!h)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", pr->who);
	h->peer = pr->peer;
	for (size_t i = 0; i < ARRAY_SIZE(h->share_lock); i++)
		pthread_mutex_init(&h->share_lock[i], NULL);
	h->connect_timeout_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 5000;
	int r = 0;
	h->address = strdup(cfg->address);
	if (!h->address)
		goto nomem;
	if (strncmp(cfg->address, "unix:", 5) == 0) {
		if (cfg->address[5] != '/') {
			r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                      "%s: %s: a unix: address takes an absolute path", pr->who,
			                      cfg->address);
			goto fail;
		}
		h->unix_path = strdup(cfg->address + 5);
		/* The host name is not looked up on a Unix socket; it is only
		 * the Host header. */
		h->base_url = strdup("http://localhost");
		if (!h->unix_path || !h->base_url)
			goto nomem;
	} else {
		/* A HOST:PORT never holds '@': one that does carries user
		 * information (a token pasted as tok@host:port), so it is not
		 * echoed. */
		if (strchr(cfg->address, '@')) {
			r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                      "%s: the %s address holds '@': an address is unix:PATH or "
			                      "HOST:PORT, and the credential goes in the credential file, "
			                      "never in the address",
			                      pr->who, pr->peer + 4);
			goto fail;
		}
		if (!host_port_valid(cfg->address)) {
			r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                      "%s: %s is neither unix:PATH nor HOST:PORT", pr->who,
			                      cfg->address);
			goto fail;
		}
		/* TCP is always TLS: the credential never crosses a network in
		 * the clear. */
		if (asprintf(&h->base_url, "https://%s", cfg->address) < 0) {
			h->base_url = NULL;
			goto nomem;
		}
		if ((cfg->tls_ca_file && !(h->tls_ca = strdup(cfg->tls_ca_file))) ||
		    (cfg->tls_cert_file && !(h->tls_cert = strdup(cfg->tls_cert_file))) ||
		    (cfg->tls_key_file && !(h->tls_key = strdup(cfg->tls_key_file))))
			goto nomem;
	}
	static const char prefix[] = "Authorization: Bearer ";
	if (!none) {
		h->auth_len = sizeof(prefix) - 1 + cfg->credential_len;
		h->auth = malloc(h->auth_len + 1);
		if (!h->auth)
			goto nomem;
		memcpy(h->auth, prefix, sizeof(prefix) - 1);
		memcpy(h->auth + sizeof(prefix) - 1, cfg->credential, cfg->credential_len);
		h->auth[h->auth_len] = 0;
	}

	h->share = curl_share_init();
	if (!h->share)
		goto nomem;
	if (curl_share_setopt(h->share, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
	    curl_share_setopt(h->share, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
	    curl_share_setopt(h->share, CURLSHOPT_USERDATA, h) != CURLSHE_OK ||
	    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK ||
	    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK) {
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s: libcurl connection sharing",
		                      pr->who);
		goto fail;
	}
	*ret = h;
	return 0;
nomem:
	r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", pr->who);
fail:
	remote_http_free(h);
	return r;
}

void remote_http_free(remote_http *h)
{
	if (!h)
		return;
	if (h->share)
		curl_share_cleanup(h->share);
	if (h->auth) {
		explicit_bzero(h->auth, h->auth_len);
		free(h->auth);
	}
	free(h->address);
	free(h->unix_path);
	free(h->base_url);
	free(h->tls_ca);
	free(h->tls_cert);
	free(h->tls_key);
	for (size_t i = 0; i < ARRAY_SIZE(h->share_lock); i++)
		pthread_mutex_destroy(&h->share_lock[i]);
	free(h);
}

void remote_response_clear(remote_response *r)
{
	util_buf_clear(&r->body);
	memset(r, 0, sizeof(*r));
}

/* ---- one call ------------------------------------------------------------ */

typedef struct transfer {
	const remote_call *c;
	remote_response *resp;
	CURL *easy;
	bool started;    /* the status is known */
	bool to_sink;    /* a 2xx with a sink */
	int sink_rc;     /* a sink's abort */
	airlock_error *err;
	size_t upload_off;
	uint64_t source_off; /* bytes a streamed body's source gave */
	int source_rc;       /* a source's abort */
} transfer;

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	transfer *t = arg;
	size_t len = size * n;
	if (!t->started) {
		long status = 0;
		curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
		t->resp->status = status;
		bool ok = status >= 200 && status < 300;
		t->to_sink = ok && t->c->sink;
		/* Every body has a cap set before its first byte: the caller's
		 * for a success, the error shape's for anything else. */
		util_buf_init(&t->resp->body, ok ? t->c->max_body : REMOTE_ERROR_BODY_MAX);
		t->started = true;
	}
	if (t->to_sink) {
		int r = t->c->sink(t->c->sink_arg, data, len, t->err);
		if (r < 0) {
			t->sink_rc = r;
			return 0;
		}
		return len;
	}
	int r = util_buf_append(&t->resp->body, data, len);
	if (r != 0) {
		/* Past the cap (or out of memory): stop reading rather than
		 * keep a body this size. */
		t->resp->over_cap = true;
		return 0;
	}
	return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
	transfer *t = arg;
	t->c->on_header(t->c->header_arg, data, size * n);
	return size * n;
}

static size_t on_upload(char *buf, size_t size, size_t n, void *arg)
{
	transfer *t = arg;
	size_t room = size * n, left = t->c->body_len - t->upload_off;
	size_t k = left < room ? left : room;
	if (k)
		memcpy(buf, (const char *)t->c->body + t->upload_off, k);
	t->upload_off += k;
	return k;
}

static size_t on_source(char *buf, size_t size, size_t n, void *arg)
{
	transfer *t = arg;
	uint64_t left = t->c->source_len - t->source_off;
	size_t room = size * n;
	if (room > left)
		room = (size_t)left;
	if (room == 0)
		return 0;
	ssize_t k = t->c->source(t->c->source_arg, buf, room, t->err);
	if (k < 0) {
		t->source_rc = (int)k;
		return CURL_READFUNC_ABORT;
	}
	if (k == 0) {
		/* Short of the announced length: the body would end early and
		 * the peer wait for the rest; abort instead. */
		t->source_rc = airlock_error_set(t->err, AIRLOCK_ERR_SYSTEM, EIO,
		                                 "the request body ended at %llu of %llu bytes",
		                                 (unsigned long long)t->source_off,
		                                 (unsigned long long)t->c->source_len);
		return CURL_READFUNC_ABORT;
	}
	t->source_off += (uint64_t)k;
	return (size_t)k;
}

/* An extra header line: visible ASCII and spaces, "Name: value". Nothing
 * that could end the line and start another. */
static bool header_line_valid(const char *s)
{
	const char *colon = strchr(s, ':');
	if (!colon || colon == s || strlen(s) >= 4096)
		return false;
	for (const char *p = s; *p; p++)
		if ((*p < 0x20 || *p > 0x7e) || (p < colon && *p == ' '))
			return false;
	return true;
}

static int transport_error(remote_http *h, const remote_call *c, CURLcode rc, const char *detail,
                           long os_errno, airlock_error *err)
{
	/* On a Unix socket curl's own detail names "localhost port 80" (the
	 * Host header it was given) and repeats its reason: the socket's path
	 * (the address) and the system's reason say it. */
	if (h->unix_path && rc == CURLE_COULDNT_CONNECT)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, (int)os_errno,
		                         "%s at %s is unreachable; retry later", h->peer, h->address);
	if (rc == CURLE_OPERATION_TIMEDOUT && c->low_speed_s > 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "%s at %s: %s %.64s stalled or passed its %lld ms (%s); "
		                         "retry later",
		                         h->peer, h->address, c->method, c->path,
		                         (long long)c->timeout_ms, detail ? detail : "");
	if (rc == CURLE_OPERATION_TIMEDOUT)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "%s at %s did not answer %s %.64s within %lld ms; retry later",
		                         h->peer, h->address, c->method, c->path,
		                         (long long)c->timeout_ms);
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
	                         "%s at %s is unreachable or not answering as %s (%s%s%s); retry "
	                         "later",
	                         h->peer, h->address, h->peer, curl_easy_strerror(rc),
	                         detail && *detail ? ": " : "",
	                         detail ? detail : "");
}

static int setup(remote_http *h, const remote_call *c, transfer *t, struct curl_slist **hdrs,
                 char *errbuf, airlock_error *err)
{
	CURL *e = t->easy;
	_cleanup_free_ char *url = NULL;
	if (asprintf(&url, "%s%s", h->base_url, c->path) < 0) {
		url = NULL;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "remote call");
	}
	struct curl_slist *l = NULL, *n;
	/* No Expect: 100-continue: the service reads or refuses a body at
	 * once, and waiting for a 100 that a server may not send is a second
	 * of every large write. */
	/* No credential (the worker's dev mode): no Authorization line. */
	const char *fixed[] = { "Expect:", "Accept: application/json, application/x-ndjson", h->auth };
	for (size_t i = 0; i < ARRAY_SIZE(fixed) - !h->auth; i++) {
		if (!(n = curl_slist_append(l, fixed[i])))
			goto nomem;
		l = n;
	}
	char line[4096];
	if (c->handle_b64) {
		if ((size_t)snprintf(line, sizeof(line), "Airlock-Handle: %s", c->handle_b64) >=
		    sizeof(line)) {
			curl_slist_free_all(l);
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "remote call: the environment handle is over 4 KiB");
		}
		if (!(n = curl_slist_append(l, line)))
			goto nomem;
		l = n;
	}
	if (c->extra_header) {
		if (!header_line_valid(c->extra_header)) {
			curl_slist_free_all(l);
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                         "remote call: an extra header is not one line of "
			                         "\"Name: value\" in visible ASCII");
		}
		if (!(n = curl_slist_append(l, c->extra_header)))
			goto nomem;
		l = n;
	}
	if (c->has_body || c->source) {
		snprintf(line, sizeof(line), "Content-Type: %s",
		         c->content_type ? c->content_type : "application/json");
		if (!(n = curl_slist_append(l, line)))
			goto nomem;
		l = n;
	}
	*hdrs = l;

	bool ok = curl_easy_setopt(e, CURLOPT_URL, url) == CURLE_OK &&
	          curl_easy_setopt(e, CURLOPT_HTTPHEADER, l) == CURLE_OK &&
	          curl_easy_setopt(e, CURLOPT_SHARE, h->share) == CURLE_OK &&
	          /* Threads: no SIGALRM for timeouts. */
	          curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
	          curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf) == CURLE_OK &&
	          curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)h->connect_timeout_ms) == CURLE_OK &&
	          curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms) == CURLE_OK &&
	          curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK &&
	          curl_easy_setopt(e, CURLOPT_WRITEDATA, t) == CURLE_OK &&
	          /* The service answers; it never redirects: a Location is
	           * not followed, so the credential goes nowhere else. */
	          curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
	          curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, h->unix_path ? "http" : "https") == CURLE_OK;
	if (ok && c->on_header)
		ok = curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK &&
		     curl_easy_setopt(e, CURLOPT_HEADERDATA, t) == CURLE_OK;
	if (ok && c->low_speed_s > 0)
		ok = curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, c->low_speed_bytes) == CURLE_OK &&
		     curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, c->low_speed_s) == CURLE_OK;
	if (ok && c->buffer_size)
		ok = curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)c->buffer_size) == CURLE_OK;
	if (ok && h->unix_path)
		ok = curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, h->unix_path) == CURLE_OK;
	if (ok && !h->unix_path) {
		ok = curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L) == CURLE_OK &&
		     curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L) == CURLE_OK &&
		     (!h->tls_ca || curl_easy_setopt(e, CURLOPT_CAINFO, h->tls_ca) == CURLE_OK) &&
		     (!h->tls_cert || curl_easy_setopt(e, CURLOPT_SSLCERT, h->tls_cert) == CURLE_OK) &&
		     (!h->tls_key || curl_easy_setopt(e, CURLOPT_SSLKEY, h->tls_key) == CURLE_OK);
	}
	if (ok) {
		if (strcmp(c->method, "POST") == 0 && c->source)
			/* Streamed from the source as libcurl asks: the size is
			 * announced (Content-Length), the bytes never held. */
			ok = curl_easy_setopt(e, CURLOPT_POST, 1L) == CURLE_OK &&
			     curl_easy_setopt(e, CURLOPT_READFUNCTION, on_source) == CURLE_OK &&
			     curl_easy_setopt(e, CURLOPT_READDATA, t) == CURLE_OK &&
			     curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
			                      (curl_off_t)c->source_len) == CURLE_OK;
		else if (strcmp(c->method, "POST") == 0)
			ok = curl_easy_setopt(e, CURLOPT_POST, 1L) == CURLE_OK &&
			     curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
			                      (curl_off_t)(c->has_body ? c->body_len : 0)) == CURLE_OK &&
			     curl_easy_setopt(e, CURLOPT_POSTFIELDS,
			                      c->has_body && c->body ? c->body : "") == CURLE_OK;
		else if (strcmp(c->method, "PUT") == 0)
			/* Streamed from the caller's buffer, never copied whole. */
			ok = curl_easy_setopt(e, CURLOPT_UPLOAD, 1L) == CURLE_OK &&
			     curl_easy_setopt(e, CURLOPT_READFUNCTION, on_upload) == CURLE_OK &&
			     curl_easy_setopt(e, CURLOPT_READDATA, t) == CURLE_OK &&
			     curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)c->body_len) == CURLE_OK;
		else if (strcmp(c->method, "DELETE") == 0)
			ok = curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE") == CURLE_OK;
		else
			ok = curl_easy_setopt(e, CURLOPT_HTTPGET, 1L) == CURLE_OK;
	}
	if (!ok)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "remote call: libcurl options");
	return 0;
nomem:
	curl_slist_free_all(l);
	return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "remote call");
}

int remote_http_perform(remote_http *h, const remote_call *c, remote_response *resp,
                        airlock_error *err)
{
	memset(resp, 0, sizeof(*resp));
	util_buf_init(&resp->body, REMOTE_ERROR_BODY_MAX);
	if (util_fault("remote.request"))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, EIO, "%s at %s",
		                         h->peer, h->address);
	transfer t = { .c = c, .resp = resp, .err = err };
	t.easy = curl_easy_init();
	CURLM *m = curl_multi_init();
	if (!t.easy || !m) {
		curl_easy_cleanup(t.easy);
		curl_multi_cleanup(m);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "remote call: libcurl");
	}
	char errbuf[CURL_ERROR_SIZE] = { 0 };
	struct curl_slist *hdrs = NULL;
	int r = setup(h, c, &t, &hdrs, errbuf, err);
	if (r == 0 && curl_multi_add_handle(m, t.easy) != CURLM_OK)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "remote call: libcurl");
	bool added = r == 0;
	bool fired[2] = { false, false };
	int64_t next_tick = c->tick_ms > 0 ? util_monotonic_ms() + c->tick_ms : 0;
	CURLcode rc = CURLE_OK;
	while (r == 0) {
		int running = 0;
		CURLMcode mc = curl_multi_perform(m, &running);
		if (mc != CURLM_OK) {
			r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0, "%s at %s: %s",
			                      h->peer, h->address, curl_multi_strerror(mc));
			break;
		}
		if (!running) {
			int left = 0;
			CURLMsg *msg;
			while ((msg = curl_multi_info_read(m, &left)))
				if (msg->msg == CURLMSG_DONE)
					rc = msg->data.result;
			break;
		}
		struct curl_waitfd w[2];
		int idx[2];
		unsigned nw = 0;
		for (int i = 0; i < 2; i++)
			if (c->watch_fds[i] >= 0 && !fired[i]) {
				w[nw] = (struct curl_waitfd){ .fd = c->watch_fds[i], .events = CURL_WAIT_POLLIN };
				idx[nw++] = i;
			}
		int wait_ms = 1000;
		if (next_tick) {
			int64_t d = next_tick - util_monotonic_ms();
			wait_ms = d < 0 ? 0 : d < wait_ms ? (int)d : wait_ms;
		}
		mc = curl_multi_poll(m, nw ? w : NULL, nw, wait_ms, NULL);
		if (mc != CURLM_OK) {
			r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0, "%s at %s: %s",
			                      h->peer, h->address, curl_multi_strerror(mc));
			break;
		}
		for (unsigned i = 0; i < nw; i++)
			if (w[i].revents & (CURL_WAIT_POLLIN | POLLERR | POLLHUP)) {
				/* An eventfd stays readable once fired: watch it
				 * once, or the loop would spin. */
				fired[idx[i]] = true;
				if (c->on_watch)
					c->on_watch(c->watch_arg, w[i].fd);
				if (c->watch_aborts)
					r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, ECANCELED,
					                      "the call to %s at %s was cancelled",
					                      h->peer, h->address);
			}
		if (r < 0)
			break;
		if (next_tick && util_monotonic_ms() >= next_tick) {
			c->on_watch(c->watch_arg, -1);
			next_tick = util_monotonic_ms() + c->tick_ms;
		}
	}
	if (r == 0 && t.started == false)
		curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &resp->status);
	if (r == 0) {
		if (t.sink_rc < 0)
			r = t.sink_rc; /* the sink set err */
		else if (t.source_rc < 0)
			r = t.source_rc; /* the source set err */
		else if (rc == CURLE_WRITE_ERROR && resp->over_cap)
			r = 0; /* answered; the caller sees over_cap */
		else if (rc != CURLE_OK) {
			long os_errno = 0;
			curl_easy_getinfo(t.easy, CURLINFO_OS_ERRNO, &os_errno);
			r = transport_error(h, c, rc, errbuf, os_errno, err);
		} else if (resp->status == 0) {
			r = transport_error(h, c, CURLE_GOT_NOTHING, errbuf, 0, err);
		}
	}
	if (added)
		curl_multi_remove_handle(m, t.easy);
	curl_easy_cleanup(t.easy);
	curl_multi_cleanup(m);
	curl_slist_free_all(hdrs);
	return r;
}

/* ---- answers ------------------------------------------------------------- */

/*
 * The workspace port's failures that are plain errnos (a missing file, a
 * parent that is not a directory, a full volume) are SystemError with the
 * errno: the caller tells "not there" from "not a directory" by the code,
 * and a retry does not change either. They cross as the error shape with
 * one more member, "errno", the symbolic name from this table (a number
 * would differ between the two sides' architectures). Only these names
 * are read; any other is not a code this port returns.
 */

/* A SystemError body with an "errno" member: the code and the message,
 * without a second strerror. 0 when the body is not that. */
static int errno_error(const remote_http *h, const remote_response *resp, airlock_error *err)
{
	if (resp->over_cap || resp->body.len == 0)
		return 0;
	json_t *o = json_loadb((const char *)resp->body.data, resp->body.len,
	                       JSON_REJECT_DUPLICATES, NULL);
	const char *name = json_string_value(json_object_get(o, "errno"));
	int value = airlock_errno_wire_value(name);
	if (!value) {
		json_decref(o);
		return 0;
	}
	json_object_del(o, "errno");
	_cleanup_free_ char *rest = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	airlock_error e = { 0 };
	if (!rest || airlock_error_from_json(rest, strlen(rest), &e, NULL) < 0 ||
	    e.cls != AIRLOCK_ERR_SYSTEM)
		return 0;
	e.errnum = value;
	/* The service's message already ends in its reason: the address is
	 * added above it, and errnum goes on unsaid. */
	airlock_error_wrap(err, AIRLOCK_ERR_SYSTEM, &e, "the execution service at %s",
	                   remote_http_address(h));
	return -value;
}

int remote_http_status_error(remote_http *h, const char *what, const remote_response *resp,
                             airlock_error *err)
{
	int er = errno_error(h, resp, err);
	if (er < 0)
		return er;
	if (resp->status == 401)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "%s%sthe execution service at %s refused the service "
		                         "credential (401)",
		                         WHAT(what), h->address);
	airlock_error e = { 0 };
	bool decoded = !resp->over_cap && resp->body.len > 0 &&
	               airlock_error_from_json((const char *)resp->body.data, resp->body.len, &e,
	                                       NULL) == 0;
	if (resp->status == 503 || resp->status == 502 || resp->status == 504) {
		/* Capacity, shutting down, a mechanism failure: retriable,
		 * whatever class the body names, but for an escape: that is an
		 * alert whatever status came with it (a proxy's, a server's
		 * shutting down), never the one class a caller retries. */
		if (decoded && e.cls == AIRLOCK_ERR_SANDBOX_ESCAPE_SUSPECTED)
			return airlock_error_wrap(err, e.cls, &e, "the execution service at %s",
			                          h->address);
		if (decoded)
			return airlock_error_wrap(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, &e,
			                          "the execution service at %s", h->address);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "%s%sthe execution service at %s is unavailable (HTTP %ld); "
		                         "retry later",
		                         WHAT(what), h->address, resp->status);
	}
	if (!decoded && (resp->status == 413 || resp->status == 414 || resp->status == 431))
		/* The request itself is too large for the server (a body, a
		 * URL, a head), said by something in front of it in its own
		 * words: sending it again cannot succeed, so not the retriable
		 * class. */
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
		                         "%s%sthe execution service at %s refused the request as too "
		                         "large (HTTP %ld)",
		                         WHAT(what), h->address, resp->status);
	if (!decoded || e.cls == AIRLOCK_ERR_INVALID)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "%s%sthe execution service at %s answered HTTP %ld with a body "
		                         "that is not the error shape; retry later",
		                         WHAT(what), h->address, resp->status);
	/* The class crosses as it is; the message is the service's, which
	 * names the field or rule and no host path, under the address. */
	return airlock_error_wrap(err, e.cls, &e, "the execution service at %s", h->address);
}

int remote_http_protocol_error(remote_http *h, const char *what, const airlock_error *why,
                               airlock_error *err)
{
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
	                         "%s%sthe execution service at %s answered with a body that does "
	                         "not decode (%s)",
	                         WHAT(what), h->address, why ? why->message : "not a JSON object");
}

int remote_http_json(remote_http *h, const char *what, const remote_call *c, long want,
                     void **ret_json, airlock_error *err)
{
	remote_response resp;
	int r = remote_http_perform(h, c, &resp, err);
	if (r < 0) {
		remote_response_clear(&resp);
		return r;
	}
	if (resp.status != want) {
		r = resp.status >= 200 && resp.status < 300
		            ? airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                                "%s%sthe execution service at %s answered HTTP %ld "
		                                "where %ld was expected",
		                                WHAT(what), h->address, resp.status, want)
		            : remote_http_status_error(h, what, &resp, err);
		remote_response_clear(&resp);
		return r;
	}
	if (resp.over_cap) {
		remote_response_clear(&resp);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "%s%sthe execution service at %s answered with a body over "
		                         "the %zu-byte cap",
		                         WHAT(what), h->address, c->max_body);
	}
	if (!ret_json) {
		remote_response_clear(&resp);
		return 0;
	}
	json_error_t je;
	/* A fault-injection build may lose the answer here: a body that does
	 * not decode, after the service did what was asked. */
	bool lost = util_fault("remote.answer");
	json_t *o = lost ? NULL
	                 : json_loadb((const char *)resp.body.data, resp.body.len,
	                              JSON_REJECT_DUPLICATES, &je);
	if (lost)
		snprintf(je.text, sizeof(je.text), "%s", "the answer was lost");
	remote_response_clear(&resp);
	if (!o || !json_is_object(o)) {
		json_decref(o);
		airlock_error why = { 0 };
		airlock_error_set(&why, AIRLOCK_ERR_DECODE, 0, "%s", o ? "not a JSON object" : je.text);
		return remote_http_protocol_error(h, what, &why, err);
	}
	*ret_json = o;
	return 0;
}

/* ---- a workspace stream's header and trailer ------------------------------- */

/* "Name: value" with name matched without case; the value without its
 * surrounding blanks and CRLF, or NULL. */
static const char *header_value(const char *line, size_t len, const char *name, size_t *ret_len)
{
	size_t nl = strlen(name);
	if (len <= nl || line[nl] != ':' || strncasecmp(line, name, nl) != 0)
		return NULL;
	const char *v = line + nl + 1, *end = line + len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*ret_len = (size_t)(end - v);
	return v;
}

/* The blank line ends the header block: what follows is the trailer. */
static bool block_end(const char *line, size_t len)
{
	return len == 0 || (len <= 2 && (line[0] == '\r' || line[0] == '\n'));
}

void remote_stream_meta_line(remote_stream_meta *m, const char *line, size_t len)
{
	if (block_end(line, len)) {
		m->in_trailers = true;
		return;
	}
	size_t vl = 0;
	const char *v;
	if (!m->in_trailers && (v = header_value(line, len, "Airlock-Size", &vl))) {
		/* Digits only, at most 19 of them (below 2^63): no sign, no
		 * blank inside, nothing strtoll would also take. */
		bool ok = !m->have_size && vl > 0 && vl <= 19;
		uint64_t n = 0;
		for (size_t i = 0; ok && i < vl; i++) {
			ok = v[i] >= '0' && v[i] <= '9';
			n = n * 10 + (uint64_t)(v[i] - '0');
		}
		m->bad_size |= !ok;
		m->have_size = true;
		m->size = ok ? n : 0;
	} else if (m->in_trailers && (v = header_value(line, len, "Airlock-Sha256", &vl))) {
		/* 64 lowercase hex characters, as the service writes it; any
		 * other byte (a NUL above all) makes it no digest at all. */
		bool ok = !m->have_digest && vl == AIRLOCK_SHA256_HEX_LEN;
		for (size_t i = 0; ok && i < vl; i++)
			ok = (v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f');
		if (ok)
			memcpy(m->digest, v, vl);
		else
			memset(m->digest, 0, sizeof(m->digest));
		m->bad_digest |= !ok;
		m->have_digest = true;
	}
}

void remote_etag_line(remote_etag *e, const char *line, size_t len)
{
	size_t vl = 0;
	const char *v;
	e->in_trailers |= block_end(line, len);
	if (e->in_trailers || !(v = header_value(line, len, "ETag", &vl)))
		return;
	/* Visible ASCII only: the value is compared, and may be named in a
	 * message; nothing else in it is the worker's tag. */
	bool ok = !e->have && vl <= AIRLOCK_WORKER_CLIENT_ETAG_MAX;
	for (size_t i = 0; ok && i < vl; i++)
		ok = v[i] > 0x20 && v[i] < 0x7f;
	memset(e->value, 0, sizeof(e->value));
	if (ok)
		memcpy(e->value, v, vl);
	e->bad |= !ok;
	e->have = true;
}

/* ---- encodings ----------------------------------------------------------- */

char *remote_query_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1), *p = out;
	if (!out)
		return NULL;
	for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
		unsigned char c = *q;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			*p++ = (char)c;
		} else {
			*p++ = '%';
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		}
	}
	*p = 0;
	return out;
}

char *remote_handle_header(const airlock_environment_handle *hd, airlock_error *err)
{
	_cleanup_free_ char *json = airlock_environment_handle_to_json(hd, err);
	if (!json)
		return NULL;
	char *b = util_base64_encode(json, strlen(json));
	if (!b) {
		airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "environment handle");
		return NULL;
	}
	/* RFC 4648 section 5: the URL- and header-safe alphabet, no padding. */
	char *w = b;
	for (char *p = b; *p; p++) {
		if (*p == '=')
			continue;
		*w++ = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	}
	*w = 0;
	return b;
}
