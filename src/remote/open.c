/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Opening the execution service from a client: one call for `airlock run
 * --service` and the worker alike.
 */
#include "airlock/remote.h"

#include <stdlib.h>
#include <string.h>

#include "airlock/credential_file.h"
#include "airlock/settings.h"

int airlock_remote_open(const airlock_remote_open_config *c, airlock_settings *s,
                        airlock_exec **ret, airlock_error *err)
{
	airlock_remote *rm = NULL;
	return airlock_remote_open_adapter(c, s, ret, &rm, err);
}

int airlock_remote_open_adapter(const airlock_remote_open_config *c, airlock_settings *s,
                                airlock_exec **ret, airlock_remote **ret_remote,
                                airlock_error *err)
{
	if (!c || !c->address || !c->credential_file || !s || !ret || !ret_remote)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, 0,
		                         "remote: an address, a credential file and settings are "
		                         "required");
	unsigned char *cred = NULL;
	size_t cred_len = 0;
	int r = airlock_credential_file_read(c->credential_file, &cred, &cred_len, err);
	if (r < 0)
		return r;
	int64_t budget = s->ceilings.start_budget_seconds > 0 ? s->ceilings.start_budget_seconds
	                                                      : s->defaults.start_budget_seconds;
	airlock_remote_config rc = { .address = c->address, .credential = cred,
		                     .credential_len = cred_len, .tls_ca_file = c->tls_ca_file,
		                     .tls_cert_file = c->tls_cert_file, .tls_key_file = c->tls_key_file,
		                     .start_budget_seconds = budget };
	airlock_remote *rm = NULL;
	r = airlock_remote_new(&rc, &rm, err);
	/* The adapter holds its own copy; this one goes now. */
	explicit_bzero(cred, cred_len);
	free(cred);
	if (r < 0)
		return r;
	airlock_remote_status st;
	r = airlock_remote_health(rm, &st, err);
	if (r == 0 && st.shutting_down)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "the execution service at %s is shutting down; retry later",
		                      c->address);
	airlock_mechanism m = r == 0 ? airlock_mechanism_parse(st.mechanism) : AIRLOCK_MECHANISM_INVALID;
	if (r == 0 && m == AIRLOCK_MECHANISM_INVALID)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "the execution service at %s runs a mechanism this client does "
		                      "not know (%.32s)",
		                      c->address, st.mechanism);
	if (r < 0) {
		airlock_remote_ops()->free(rm);
		return r;
	}
	s->mechanism = m;
	/* This side's core checks every handle and applies the same numbers
	 * as the service's. */
	airlock_exec_config cfg;
	airlock_exec_config_from_settings(s, &cfg);
	if (c->uncapped)
		cfg.max_sandboxes = 0;
	r = airlock_exec_new(airlock_remote_ops(), rm, &cfg, ret, err);
	if (r == 0 && ret_remote)
		*ret_remote = rm;
	return r;
}
