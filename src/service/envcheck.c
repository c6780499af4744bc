/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The execution service's refusal to hold anyone's secrets
 * (airlock_service_environment_check, service.h).
 */
#include "airlock/service.h"

#include <errno.h>
#include <regex.h>
#include <stdbool.h>
#include <string.h>

#include "airlock/caps.h"
#include "airlock/tiers.h"
#include "airlock/settings.h"
#include "util/util.h"

/*
 * The service holds no secret of anyone's; a credential in its environment
 * would be one, readable by anything that reads this process. The shapes
 * are the secret scanner's, the ones the isolation gate looks for in a
 * sandbox (tests/test_native_gates.c): credentials' real shapes, not bare
 * prefixes. */
static const char *const secret_shapes[] = {
	"AKIA[0-9A-Z]{16}",                               /* AWS access key id */
	"sk-(ant|proj)-[A-Za-z0-9_-]{20,}",               /* provider API keys */
	"ghp_[A-Za-z0-9]{36}",                            /* GitHub token */
	"postgres(ql)?://[^:/@ ]+:[^@/ ]+@",              /* URL with a password */
	"-----BEGIN ([A-Z]+ )?PRIVATE KEY-----",          /* a private key */
	"eyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.", /* a JWT */
	NULL,
};

const char *const *airlock_service_secret_patterns(void)
{
	return secret_shapes;
}

/* systemd's own variables whose names have a tier-0 shape: the
 * credentials directory is a path (LoadCredential puts the token in a
 * file there, which is the point), not a credential. */
static bool env_name_systemd(const char *name)
{
	return strcmp(name, "CREDENTIALS_DIRECTORY") == 0;
}

int airlock_service_environment_check(char *const *envp, airlock_error *err)
{
	regex_t re[ARRAY_SIZE(secret_shapes) - 1];
	size_t n_re = 0;
	int r = 0;
	for (; n_re < ARRAY_SIZE(secret_shapes) - 1; n_re++)
		if (regcomp(&re[n_re], secret_shapes[n_re], REG_EXTENDED | REG_NOSUB) != 0) {
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "environment check");
			goto out;
		}
	for (char *const *e = envp; e && *e && r == 0; e++) {
		const char *eq = strchr(*e, '=');
		size_t nl = eq ? (size_t)(eq - *e) : strlen(*e);
		char name[AIRLOCK_ENV_NAME_MAX + 1];
		/* A name too long to copy is shown cut: it is still named, and its
		 * value is never shown. */
		size_t cl = nl < sizeof(name) - 1 ? nl : sizeof(name) - 1;
		memcpy(name, *e, cl);
		name[cl] = 0;
		char shown[AIRLOCK_ENV_NAME_MAX * 4 + 1];
		util_escape(shown, sizeof(shown), name, cl);
		/* AIRLOCK_ is a tier-0 namespace for sandboxes because it holds
		 * the service's settings; those settings' own overrides are what
		 * the service reads, not a credential it holds. Their values are
		 * still scanned below. */
		if (airlock_tier0_name(name) && !(cl == nl && airlock_settings_env_name(name)) &&
		    !(cl == nl && env_name_systemd(name))) {
			r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
			                      "startup refused: the environment holds %s, a tier-0 (credential) "
			                      "name; the execution service holds no secret: start it without it",
			                      shown);
			break;
		}
		for (size_t i = 0; eq && i < n_re; i++)
			if (regexec(&re[i], eq + 1, 0, NULL, 0) == 0) {
				r = airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
				                      "startup refused: the value of %s looks like a credential "
				                      "(the secret scanner's pattern %zu); the execution service "
				                      "holds no secret: start it without it",
				                      shown, i + 1);
				break;
			}
	}
out:
	for (size_t i = 0; i < n_re; i++)
		regfree(&re[i]);
	return r;
}

