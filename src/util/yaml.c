/* SPDX-License-Identifier: Apache-2.0 */
#include "util/yaml.h"

#include <stdio.h>
#include <string.h>

#include "util/util.h"

util_yaml_status util_yaml_next(yaml_parser_t *parser, yaml_event_t *ev, bool *have,
                                size_t *ret_line, char *ret_message, size_t size)
{
	if (*have) {
		yaml_event_delete(ev);
		*have = false;
	}
	if (!yaml_parser_parse(parser, ev)) {
		if (parser->error == YAML_MEMORY_ERROR)
			return UTIL_YAML_NOMEM;
		const char *problem = parser->problem ? parser->problem : "invalid YAML";
		const char *context = parser->context ? parser->context : "";
		char q1[128], q2[128];
		snprintf(ret_message, size, "%s%s%s", util_escape(q1, sizeof(q1), problem, strlen(problem)),
		         *context ? " " : "", util_escape(q2, sizeof(q2), context, strlen(context)));
		*ret_line = parser->problem_mark.line + 1;
		return UTIL_YAML_SYNTAX;
	}
	*have = true;
	*ret_line = ev->start_mark.line + 1;

	const yaml_char_t *anchor = NULL, *tag = NULL;
	switch (ev->type) {
	case YAML_ALIAS_EVENT:
		return UTIL_YAML_ALIAS;
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
		break;
	case YAML_NO_EVENT:
	case YAML_STREAM_START_EVENT:
	case YAML_STREAM_END_EVENT:
	case YAML_DOCUMENT_START_EVENT:
	case YAML_DOCUMENT_END_EVENT:
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
	default: /* carries no anchor and no tag */
		break;
	}
	if (anchor)
		return UTIL_YAML_ANCHOR;
	if (tag)
		return UTIL_YAML_TAG;
	return UTIL_YAML_OK;
}
