/* SPDX-License-Identifier: Apache-2.0 */
#include "core/yaml_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"
#include "util/yaml.h"

int config_yaml_open(airlock_yaml_reader *r, const char *name, const char *what, const char *buf,
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

void config_yaml_close(airlock_yaml_reader *r)
{
	if (r->have_ev)
		yaml_event_delete(&r->ev);
	r->have_ev = false;
	yaml_parser_delete(&r->parser);
}

int config_yaml_fail(airlock_yaml_reader *r, size_t line, const char *fmt, ...)
{
	char msg[AIRLOCK_ERROR_MESSAGE_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return airlock_error_set(r->err, AIRLOCK_ERR_CONFIG, 0, "%s:%zu: %s", r->name, line, msg);
}

size_t config_yaml_line(const airlock_yaml_reader *r)
{
	return r->ev.start_mark.line + 1;
}

const char *config_yaml_kind(const airlock_yaml_reader *r)
{
	switch (r->ev.type) {
	case YAML_MAPPING_START_EVENT:
		return "a mapping";
	case YAML_SEQUENCE_START_EVENT:
		return "a list";
	case YAML_SCALAR_EVENT:
		return "a single value";
	case YAML_NO_EVENT:
	case YAML_STREAM_START_EVENT:
	case YAML_STREAM_END_EVENT:
	case YAML_DOCUMENT_START_EVENT:
	case YAML_DOCUMENT_END_EVENT:
	case YAML_ALIAS_EVENT:
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
	default:
		return "nothing";
	}
}

int config_yaml_next(airlock_yaml_reader *r)
{
	size_t line = 0;
	char msg[300];
	switch (util_yaml_next(&r->parser, &r->ev, &r->have_ev, &line, msg, sizeof(msg))) {
	case UTIL_YAML_OK:
		return 0;
	case UTIL_YAML_NOMEM:
		return airlock_error_set(r->err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", r->name);
	case UTIL_YAML_SYNTAX:
		return config_yaml_fail(r, line, "not valid YAML: %s", msg);
	case UTIL_YAML_ALIAS:
		return config_yaml_fail(r, line, "aliases are not allowed in %s", r->what);
	case UTIL_YAML_ANCHOR:
		return config_yaml_fail(r, line, "anchors are not allowed in %s", r->what);
	case UTIL_YAML_TAG:
		return config_yaml_fail(r, line, "explicit tags are not allowed in %s", r->what);
	}
	return config_yaml_fail(r, line, "not valid YAML");
}

/* Read a whole regular file of at most cap bytes. The message names the
 * path: these are operator configuration files, never workspace paths. */
int config_read(const char *path, size_t cap, char **ret, size_t *ret_len,
                       airlock_error *err)
{
	char q[AIRLOCK_YAML_NAME_MAX];
	util_escape(q, sizeof(q), path, strlen(path));
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno, "%s: cannot open", q);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno, "%s: cannot stat", q);
	/* A FIFO or a device could feed us forever or block; configuration is a
	 * regular file. */
	if (!S_ISREG(st.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: not a regular file", q);
	if ((uint64_t)st.st_size > cap)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: larger than %zu bytes",
		                         q, cap);
	/* Read against the cap regardless of st_size: the file may grow between
	 * the fstat and the read, and the cap is what holds. */
	int r = util_read_capped(fd, cap, ret, ret_len);
	if (r == -EFBIG)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: larger than %zu bytes",
		                         q, cap);
	if (r == -ENOMEM)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", q);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, -r, "%s: cannot read", q);
	return 0;
}
