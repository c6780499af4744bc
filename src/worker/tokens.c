/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's bearer tokens (auth_mode: tokens; worker.h): a credential
 * file of "TOKEN TENANT" lines, each token scoped to one tenant or to all
 * ("*"). A request's tenant is its token's: the platform never names a
 * tenant the token does not carry.
 */
#include "worker/worker.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/credential_file.h"
#include "airlock/ids.h"
#include "http/http.h"
#include "util/util.h"

typedef struct worker_token {
	char *token; /* wiped at free */
	size_t len;
	char tenant[AIRLOCK_ID_MAX + 1]; /* "*": every tenant */
} worker_token;

struct worker_tokens {
	worker_token *v;
	size_t n;
};

void worker_tokens_free(worker_tokens *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++) {
		OPENSSL_cleanse(t->v[i].token, t->v[i].len);
		free(t->v[i].token);
	}
	free(t->v);
	free(t);
}

static bool token_byte(char c)
{
	return c > 0x20 && c < 0x7f;
}

static int bad_line(airlock_error *err, size_t line, const char *why)
{
	return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "worker tokens file, line %zu: %s",
	                         line, why);
}

/* One line (without its newline) into t; a blank or comment line adds
 * nothing. */
static int parse_line(worker_tokens *t, const char *s, size_t n, size_t line, airlock_error *err)
{
	size_t i = 0;
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i == n || s[i] == '#')
		return 0;
	size_t ts = i;
	while (i < n && token_byte(s[i]))
		i++;
	size_t tl = i - ts;
	if (i < n && s[i] != ' ' && s[i] != '\t')
		return bad_line(err, line, "a token is printable ASCII without spaces");
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	size_t ns = i;
	while (i < n && token_byte(s[i]))
		i++;
	size_t nl = i - ns;
	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
		i++;
	if (i != n || nl == 0)
		return bad_line(err, line, "expected \"TOKEN TENANT\" or \"TOKEN *\"");
	if (tl < AIRLOCK_WORKER_TOKEN_MIN || tl > AIRLOCK_WORKER_TOKEN_MAX)
		return bad_line(err, line, "a token is 16 to 256 bytes");
	worker_token k = { .len = tl };
	bool all = nl == 1 && s[ns] == '*';
	if (!all) {
		if (nl > AIRLOCK_ID_MAX)
			return bad_line(err, line, "the tenant must be 1..128 of [A-Za-z0-9_-] or *");
		memcpy(k.tenant, s + ns, nl);
		k.tenant[nl] = 0;
		if (!airlock_id_valid(k.tenant))
			return bad_line(err, line, "the tenant must be 1..128 of [A-Za-z0-9_-] or *");
	} else {
		k.tenant[0] = '*';
	}
	for (size_t j = 0; j < t->n; j++)
		if (t->v[j].len == tl && memcmp(t->v[j].token, s + ts, tl) == 0)
			return bad_line(err, line, "a token appears twice (each token is one tenant's)");
	if (t->n == AIRLOCK_WORKER_TOKENS_MAX)
		return bad_line(err, line, "more than 1024 tokens");
	worker_token *nv = realloc(t->v, (t->n + 1) * sizeof(*nv));
	if (!nv)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker tokens file");
	t->v = nv;
	k.token = malloc(tl);
	if (!k.token)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker tokens file");
	memcpy(k.token, s + ts, tl);
	t->v[t->n++] = k;
	return 0;
}

_Static_assert(AIRLOCK_WORKER_TOKEN_MIN == 16 && AIRLOCK_WORKER_TOKEN_MAX == 256 &&
                       AIRLOCK_WORKER_TOKENS_MAX == 1024,
               "the messages name the caps");

int worker_tokens_parse(const char *text, size_t len, worker_tokens **ret, airlock_error *err)
{
	if (len > AIRLOCK_WORKER_TOKENS_FILE_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "worker tokens file: too large");
	worker_tokens *t = calloc(1, sizeof(*t));
	if (!t)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "worker tokens file");
	size_t line = 0;
	for (const char *p = text, *end = text + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *stop = nl ? nl : end;
		if (memchr(p, 0, (size_t)(stop - p))) {
			worker_tokens_free(t);
			return bad_line(err, line + 1, "a NUL byte");
		}
		int r = parse_line(t, p, (size_t)(stop - p), ++line, err);
		if (r < 0) {
			worker_tokens_free(t);
			return r;
		}
		p = nl ? nl + 1 : end;
	}
	if (t->n == 0) {
		worker_tokens_free(t);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "worker tokens file: no token (auth_mode tokens would admit nobody)");
	}
	*ret = t;
	return 0;
}

int worker_tokens_load(const char *path, worker_tokens **ret, airlock_error *err)
{
	char *text = NULL;
	size_t len = 0;
	int r = airlock_credential_file_read_text(path, "worker tokens file",
	                                          AIRLOCK_WORKER_TOKENS_FILE_MAX, &text, &len, err);
	if (r < 0)
		return r;
	r = worker_tokens_parse(text, len, ret, err);
	OPENSSL_cleanse(text, len);
	free(text);
	if (r < 0)
		airlock_error_prefix(err, "worker.tokens_file: ");
	return r;
}

bool worker_tokens_lookup(const worker_tokens *t, const char *value, size_t value_len,
                          char ret_tenant[AIRLOCK_ID_MAX + 1])
{
	if (!value)
		return false;
	/* Every token is compared, the last match kept: the time spent does
	 * not depend on which token matched, or whether one did. */
	size_t found = SIZE_MAX;
	for (size_t i = 0; i < t->n; i++)
		if (http_bearer_ok(value, value_len, t->v[i].token, t->v[i].len))
			found = i;
	if (found == SIZE_MAX)
		return false;
	memcpy(ret_tenant, t->v[found].tenant, sizeof(t->v[found].tenant));
	return true;
}
