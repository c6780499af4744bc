/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_SERVICE_SERVER_INTERNAL_H
#define AIRLOCK_SERVICE_SERVER_INTERNAL_H

/*
 * The pieces of the service's server that are plain functions of their
 * input (no daemon, no socket): the request line's route, the query
 * string and the handle header (the bearer token is the server core's:
 * http_bearer_ok in src/http/http.h). Kept apart so each
 * decoder is one function a fuzz harness or a unit test can call alone.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "airlock/error.h"
#include "airlock/types.h"

typedef enum svc_verb {
	SVC_NONE = 0,
	SVC_HEALTH,
	SVC_LIST,
	SVC_PROVISION,
	SVC_EXECUTE,
	SVC_CANCEL,
	SVC_DESTROY,
	SVC_CONTAIN,
	SVC_READ,
	SVC_WRITE,
	SVC_LISTDIR,
	SVC_PROVENANCE,
	SVC_STREAM,
} svc_verb;

/* The route of a raw request target ("/v1/..." with its query, never
 * unescaped) and a method: 0 with *ret_verb and the path's environment id
 * (empty for verbs without one), 404 for an unknown path, 405 for a known
 * path with another method. *ret_query points into target after the '?'
 * (NULL when there is none). */
int svc_route(const char *target, size_t target_len, const char *method, svc_verb *ret_verb,
              char ret_id[AIRLOCK_ENVIRONMENT_ID_MAX], const char **ret_query,
              size_t *ret_query_len);

/* The value of key in a query string, percent-decoded with its length (any
 * byte, NUL included). 1 when found (*ret malloc'd, NUL-terminated past
 * *ret_len), 0 when absent, ToolValidationError naming the key for a bad
 * escape or a key given twice. '+' is a plus sign (RFC 3986), not a space. */
int svc_query_value(const char *query, size_t query_len, const char *key, char **ret,
                    size_t *ret_len, airlock_error *err);

/* The Airlock-Handle header: base64url (no padding) of the handle's JSON,
 * decoded with the strict decoder. ToolValidationError naming the header. */
int svc_handle_decode(const char *value, size_t value_len, airlock_environment_handle *ret,
                      airlock_error *err);

/* The provision and execute bodies (docs/service-api.md), parsed once under
 * the decode's memory budget (src/core/json_internal.h): the envelope's
 * fields, then the spec or the command by its type's strict decoder.
 * ToolValidationError naming the field, or SYSTEM/ENOMEM; *ret untouched on
 * failure. */
typedef struct svc_provision {
	airlock_environment_spec spec;
	char environment_id[AIRLOCK_ENVIRONMENT_ID_MAX];
	bool has_environment_id;
} svc_provision;
int svc_provision_decode(const void *body, size_t len, svc_provision *ret, airlock_error *err);

typedef struct svc_execute {
	airlock_execution_command command;
	int64_t budget_ms; /* AIRLOCK_BUDGET_NONE when null or absent */
	bool stream;
} svc_execute;
int svc_execute_decode(const void *body, size_t len, svc_execute *ret, airlock_error *err);


#endif
