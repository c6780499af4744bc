/* SPDX-License-Identifier: Apache-2.0 */
#include "core/yaml_reader.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"
#include "util/yaml.h"

int airlock_yaml_open(airlock_yaml_reader *r, const char *name, const char *what, const char *buf,
                      size_t len, airlock_error *err)
{
	memset(r, 0, sizeof(*r));
	r->what = what;
	r->err = err;
	/* The name is an operator's file path: escaped once, then used as is. */
	util_escape(r->name, sizeof(r->name), name ? name : "input", name ? strlen(name) : 5);
	if (!yaml_parser_initialize(&r->parser))
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", r->name);
	yaml_parser_set_input_string(&r->parser, (const unsigned char *)(buf ? buf : ""),
	                             buf ? len : 0);
	return 0;
}

void airlock_yaml_close(airlock_yaml_reader *r)
{
	if (r->have_ev)
		yaml_event_delete(&r->ev);
	r->have_ev = false;
	yaml_parser_delete(&r->parser);
}

int airlock_yaml_fail(airlock_yaml_reader *r, size_t line, const char *fmt, ...)
{
	char msg[AIRLOCK_ERROR_MESSAGE_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return airlock_error_set(r->err, AIRLOCK_ERR_CONFIG, 0, "%s:%zu: %s", r->name, line, msg);
}

size_t airlock_yaml_line(const airlock_yaml_reader *r)
{
	return r->ev.start_mark.line + 1;
}

const char *airlock_yaml_kind(const airlock_yaml_reader *r)
{
	switch (r->ev.type) {
	case YAML_MAPPING_START_EVENT:
		return "a mapping";
	case YAML_SEQUENCE_START_EVENT:
		return "a list";
	case YAML_SCALAR_EVENT:
		return "a single value";
	default:
		return "nothing";
	}
}

int airlock_yaml_next(airlock_yaml_reader *r)
{
	size_t line = 0;
	char msg[300];
	switch (util_yaml_next(&r->parser, &r->ev, &r->have_ev, &line, msg, sizeof(msg))) {
	case UTIL_YAML_OK:
		return 0;
	case UTIL_YAML_NOMEM:
		return airlock_error_set(r->err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", r->name);
	case UTIL_YAML_SYNTAX:
		return airlock_yaml_fail(r, line, "not valid YAML: %s", msg);
	case UTIL_YAML_ALIAS:
		return airlock_yaml_fail(r, line, "aliases are not allowed in %s", r->what);
	case UTIL_YAML_ANCHOR:
		return airlock_yaml_fail(r, line, "anchors are not allowed in %s", r->what);
	case UTIL_YAML_TAG:
		return airlock_yaml_fail(r, line, "explicit tags are not allowed in %s", r->what);
	}
	return airlock_yaml_fail(r, line, "not valid YAML");
}
