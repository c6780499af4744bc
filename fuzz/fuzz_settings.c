/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the settings parser: arbitrary bytes as a settings file, then the
 * startup checks and the printer over whatever parsed. The parser must
 * return 0 or a negative code and never crash, leak or read past the input;
 * the checks must accept or refuse without touching anything unset.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "airlock/settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *sink;
	if (!sink)
		sink = fopen("/dev/null", "we");

	airlock_settings s;
	airlock_error err = { 0 };
	if (airlock_settings_parse("fuzz.yaml", (const char *)data, size, &s, &err) < 0)
		return 0;
	(void)airlock_settings_check(&s, &err);
	if (sink)
		airlock_settings_print(&s, sink);
	airlock_settings_clear(&s);
	return 0;
}
