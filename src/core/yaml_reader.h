/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_CORE_YAML_READER_H
#define AIRLOCK_CORE_YAML_READER_H

/*
 * The scaffolding every operator-configuration parser shares (settings,
 * egress policy): a libyaml event reader over a buffer that refuses
 * aliases, anchors and tags (util_yaml_next), and errors of the form
 * "NAME:LINE: message" with the name escaped once.
 */

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

#include "airlock/error.h"

#define AIRLOCK_YAML_NAME_MAX 160

typedef struct airlock_yaml_reader {
	yaml_parser_t parser;
	yaml_event_t ev;
	bool have_ev;
	char name[AIRLOCK_YAML_NAME_MAX]; /* escaped, for messages */
	const char *what;                 /* "settings", "an egress policy" */
	airlock_error *err;
} airlock_yaml_reader;

/* Start reading buf (len bytes; NULL with 0 is an empty document). */
int config_yaml_open(airlock_yaml_reader *r, const char *name, const char *what, const char *buf,
                     size_t len, airlock_error *err);
void config_yaml_close(airlock_yaml_reader *r);

/* The next event; a refusal is AIRLOCK_ERR_CONFIG naming the line. */
int config_yaml_next(airlock_yaml_reader *r);
/* The current event's 1-based line. */
size_t config_yaml_line(const airlock_yaml_reader *r);
/* "a mapping", "a list", "a single value" or "nothing", for messages. */
const char *config_yaml_kind(const airlock_yaml_reader *r);

/* Read a whole operator configuration file (a regular file, never a FIFO
 * or a device) of at most cap bytes into *ret (malloc'd, NUL-terminated).
 * AIRLOCK_ERR_CONFIG naming the path: cannot open, not a regular file,
 * larger than cap (also when it grows while being read). */
int config_read(const char *path, size_t cap, char **ret, size_t *ret_len,
                airlock_error *err);

/* AIRLOCK_ERR_CONFIG "NAME:LINE: message". */
__attribute__((format(printf, 3, 4)))
int config_yaml_fail(airlock_yaml_reader *r, size_t line, const char *fmt, ...);

#endif
