/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_UTIL_YAML_H
#define AIRLOCK_UTIL_YAML_H

/*
 * One strict step of libyaml's event API, shared by every parser of a YAML
 * document we accept (settings, egress policy): operator configuration has
 * no use for aliases, anchors or tags, and an alias is how a small document
 * becomes a large one.
 */

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

typedef enum util_yaml_status {
	UTIL_YAML_OK = 0,
	UTIL_YAML_NOMEM,
	UTIL_YAML_SYNTAX, /* *ret_message holds libyaml's problem and context */
	UTIL_YAML_ALIAS,
	UTIL_YAML_ANCHOR,
	UTIL_YAML_TAG,
} util_yaml_status;

/*
 * Delete the previous event (when *have) and read the next into *ev. On a
 * refusal *ret_line is the 1-based line, and for UTIL_YAML_SYNTAX
 * ret_message (size bytes) receives libyaml's words, escaped for a message.
 * *have says whether *ev holds an event that must be deleted.
 */
util_yaml_status util_yaml_next(yaml_parser_t *parser, yaml_event_t *ev, bool *have,
                                size_t *ret_line, char *ret_message, size_t size);

#endif
