/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Model Context Protocol with no I/O (cli/mcp.h): lines, messages and
 * the session's own answers. Every byte here is the client's: a line is
 * capped before it is kept, its JSON values are counted before a tree is
 * built, and nothing it names is trusted until checked (fuzz/fuzz_mcp.c).
 */
#include "cli/mcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "airlock/tools.h"

#define MCP_STR_(x) #x
#define MCP_STR(x) MCP_STR_(x)

/* ---- lines --------------------------------------------------------------- */

static void hand_over(mcp_reader *r, mcp_line_fn fn, void *arg)
{
	size_t n = r->len;
	if (n > 0 && r->buf[n - 1] == '\r')
		n--;
	size_t blank = 0;
	while (blank < n && (r->buf[blank] == ' ' || r->buf[blank] == '\t' ||
	                     r->buf[blank] == '\r'))
		blank++;
	if (blank < n)
		fn(arg, r->buf, n, false);
	r->len = 0;
}

int mcp_reader_feed(mcp_reader *r, const char *data, size_t n, mcp_line_fn fn, void *arg)
{
	while (n > 0) {
		const char *nl = memchr(data, '\n', n);
		size_t take = nl ? (size_t)(nl - data) : n;
		if (r->draining) {
			/* The rest of an oversize line: read, never kept. */
			if (nl) {
				r->draining = false;
				fn(arg, NULL, 0, true);
			}
		} else if (r->len + take > AIRLOCK_MCP_LINE_MAX) {
			r->len = 0;
			r->draining = true;
			if (nl) {
				r->draining = false;
				fn(arg, NULL, 0, true);
			}
		} else {
			if (r->len + take + 1 > r->cap) {
				/* Doubling from 64 KiB, never past the cap and its NUL. */
				size_t cap = r->cap ? r->cap : 64u << 10;
				while (cap < r->len + take + 1)
					cap *= 2;
				if (cap > (size_t)AIRLOCK_MCP_LINE_MAX + 1)
					cap = (size_t)AIRLOCK_MCP_LINE_MAX + 1;
				char *b = realloc(r->buf, cap);
				if (!b)
					return -ENOMEM;
				r->buf = b;
				r->cap = cap;
			}
			memcpy(r->buf + r->len, data, take);
			r->len += take;
			r->buf[r->len] = 0;
			if (nl)
				hand_over(r, fn, arg);
		}
		size_t used = nl ? take + 1 : take;
		data += used;
		n -= used;
	}
	return 0;
}

void mcp_reader_end(mcp_reader *r, mcp_line_fn fn, void *arg)
{
	if (r->draining)
		fn(arg, NULL, 0, true);
	else if (r->len > 0)
		hand_over(r, fn, arg);
	r->draining = false;
	r->len = 0;
}

void mcp_reader_free(mcp_reader *r)
{
	free(r->buf);
	*r = (mcp_reader){ 0 };
}

size_t mcp_json_values(const char *s, size_t n)
{
	size_t v = 1;
	bool in_string = false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (in_string) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		} else if (c == '"') {
			in_string = true;
		} else if (c == '[' || c == '{' || c == ',') {
			v++;
		}
	}
	return v;
}

/* ---- messages -------------------------------------------------------------- */

/* A JSON string's text when it holds no NUL, else NULL. Messages are
 * parsed with JSON_ALLOW_NUL (so a "\u0000" in a tool's argument is the
 * tool's validation error, answered to its id, not a parse error with
 * none), and every string this file compares goes through here: a C
 * comparison would stop at the NUL and take "ping\u0000x" for "ping". */
static const char *str_plain(const json_t *v)
{
	const char *t = json_string_value(v);
	return t && strlen(t) == json_string_length(v) ? t : NULL;
}

static void invalid(mcp_msg *m, int code, const char *message)
{
	m->kind = MCP_MSG_INVALID;
	m->code = code;
	snprintf(m->message, sizeof(m->message), "%s", message);
}

void mcp_msg_parse(const char *line, size_t len, mcp_msg *ret)
{
	*ret = (mcp_msg){ 0 };
	if (mcp_json_values(line, len) > AIRLOCK_MCP_VALUES_MAX) {
		char msg[160];
		snprintf(msg, sizeof(msg), "Parse error: more than %u JSON values in one message",
		         AIRLOCK_MCP_VALUES_MAX);
		invalid(ret, MCP_PARSE_ERROR, msg);
		return;
	}
	json_error_t jerr;
	/* Duplicate members are refused: two "id"s or two "method"s would
	 * make the message mean what the last one says, which another reader
	 * of the same line may take differently. */
	json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL,
	                          &jerr);
	if (!root) {
		/* jansson's text quotes the bytes near the error, which may be
		 * a cut or invalid UTF-8 sequence: cleaned, or the answer could
		 * not be encoded at all. */
		char near[3 * 40 + 1], msg[160];
		size_t used = 0, n = strnlen(jerr.text, 40);
		near[mcp_utf8_clean((const unsigned char *)jerr.text, n, true, near, &used)] = 0;
		snprintf(msg, sizeof(msg), "Parse error: %s (column %d)", near, jerr.column);
		invalid(ret, MCP_PARSE_ERROR, msg);
		return;
	}
	ret->root = root;
	if (json_is_array(root)) {
		/* JSON-RPC batches: gone from MCP in 2025-06-18. */
		invalid(ret, MCP_INVALID_REQUEST, "Invalid Request: batches are not accepted; send "
		                                  "one message per line");
		return;
	}
	if (!json_is_object(root)) {
		invalid(ret, MCP_INVALID_REQUEST, "Invalid Request: a message is a JSON object");
		return;
	}
	json_t *v = json_object_get(root, "jsonrpc"), *id = json_object_get(root, "id");
	json_t *method = json_object_get(root, "method"), *params = json_object_get(root, "params");
	/* MCP's ids are strings or integers, never null. */
	bool id_ok = id && (json_is_string(id) || json_is_integer(id));
	ret->id = id_ok ? id : NULL;
	const char *version = str_plain(v);
	if (!version || strcmp(version, "2.0") != 0) {
		invalid(ret, MCP_INVALID_REQUEST, "Invalid Request: \"jsonrpc\" must be \"2.0\"");
		return;
	}
	if (!method) {
		if (id_ok && (json_object_get(root, "result") || json_object_get(root, "error"))) {
			ret->kind = MCP_MSG_RESPONSE;
			return;
		}
		invalid(ret, MCP_INVALID_REQUEST, "Invalid Request: no \"method\"");
		return;
	}
	if (!str_plain(method)) {
		invalid(ret, MCP_INVALID_REQUEST, "Invalid Request: \"method\" must be a string "
		                                  "(without NUL)");
		return;
	}
	if (id && !id_ok) {
		invalid(ret, MCP_INVALID_REQUEST,
		        "Invalid Request: \"id\" must be a string or an integer");
		return;
	}
	if (params && !json_is_object(params)) {
		/* A notification is never answered, a malformed one included:
		 * it is taken without its params, which makes it mean nothing. */
		if (!id) {
			ret->method = str_plain(method);
			ret->kind = MCP_MSG_NOTIFICATION;
			return;
		}
		invalid(ret, MCP_INVALID_PARAMS, "Invalid params: \"params\" must be an object");
		return;
	}
	ret->method = json_string_value(method);
	ret->params = params;
	ret->kind = id ? MCP_MSG_REQUEST : MCP_MSG_NOTIFICATION;
}

void mcp_msg_clear(mcp_msg *m)
{
	json_decref(m->root);
	*m = (mcp_msg){ 0 };
}

json_t *mcp_result(json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

json_t *mcp_error(json_t *id, int code, const char *message)
{
	return json_pack("{s:s, s:O?, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
	                 code, "message", message);
}

/* ---- the session ------------------------------------------------------------ */

/* The versions this server speaks, newest first. 2025-03-26 and
 * 2024-11-05 have no structuredContent or outputSchema: a session of one
 * of those gets the result as text only. */
static const char *const versions[] = { MCP_PROTOCOL_LATEST, "2025-03-26", "2024-11-05" };

bool mcp_session_structured(const mcp_session *s)
{
	return strcmp(s->version, MCP_PROTOCOL_LATEST) == 0;
}

/* tools/list's result: each tool the worker declares, its description and
 * input schema as the worker serves them (airlock/tools.h), its result's
 * schema as outputSchema, and the rest of its declaration (classification,
 * timeout_s, max_output_bytes, allow_parallel) under _meta. */
static json_t *tools_result(bool structured)
{
	char *text = airlock_tools_json();
	json_t *decl = text ? json_loads(text, 0, NULL) : NULL;
	free(text);
	json_t *list = json_array(), *tools = json_object_get(decl, "tools");
	size_t i;
	json_t *t;
	json_array_foreach(tools, i, t) {
		const char *name = json_string_value(json_object_get(t, "name"));
		json_t *meta = json_deep_copy(t);
		json_object_del(meta, "name");
		json_object_del(meta, "description");
		json_object_del(meta, "input_schema");
		json_t *tool = json_pack("{s:s, s:O, s:O, s:{s:o}}", "name", name, "description",
		                         json_object_get(t, "description"), "inputSchema",
		                         json_object_get(t, "input_schema"), "_meta",
		                         "airlock/declaration", meta);
		char *schema = structured ? airlock_tool_output_schema_json(name) : NULL;
		if (tool && schema)
			json_object_set_new(tool, "outputSchema", json_loads(schema, 0, NULL));
		free(schema);
		if (!tool || json_array_append_new(list, tool) < 0) {
			json_decref(list);
			list = NULL;
			break;
		}
	}
	json_decref(decl);
	return list ? json_pack("{s:o}", "tools", list) : NULL;
}

static int initialize(mcp_session *s, const mcp_msg *m, json_t **ret)
{
	const char *v = str_plain(json_object_get(m->params, "protocolVersion"));
	if (!v) {
		*ret = mcp_error(m->id, MCP_INVALID_PARAMS,
		                 "Invalid params: initialize needs \"protocolVersion\" (a string)");
		return *ret ? 0 : -ENOMEM;
	}
	if (s->initialized) {
		*ret = mcp_error(m->id, MCP_INVALID_REQUEST,
		                 "Invalid Request: the session is already initialized");
		return *ret ? 0 : -ENOMEM;
	}
	/* The client's version when this server speaks it, else our newest
	 * (the client then decides whether it can go on). */
	const char *chosen = MCP_PROTOCOL_LATEST;
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		if (strcmp(v, versions[i]) == 0)
			chosen = versions[i];
	snprintf(s->version, sizeof(s->version), "%s", chosen);
	json_decref(s->tools);
	s->tools = tools_result(mcp_session_structured(s));
	if (!s->tools)
		return -ENOMEM;
	s->initialized = true;
	*ret = mcp_result(
		m->id,
		json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", chosen,
		          "capabilities", "tools", "listChanged", 0, "serverInfo", "name", "airlock",
		          "title", "airlock sandboxes", "version", AIRLOCK_MCP_SERVER_VERSION,
		          "instructions",
		          "sandbox.run_command runs an argument vector in this session's sandbox, a "
		          "Linux machine with a /workspace directory kept between calls; "
		          "artifact.export hands a workspace file or text to the user."));
	return *ret ? 0 : -ENOMEM;
}

static int tools_call(const mcp_msg *m, json_t **ret, mcp_action *act)
{
	json_t *name = json_object_get(m->params, "name");
	json_t *args = json_object_get(m->params, "arguments");
	json_t *meta = json_object_get(m->params, "_meta");
	json_t *token = meta ? json_object_get(meta, "progressToken") : NULL;
	const char *n = str_plain(name);
	const char *bad =
		!m->params ? "Invalid params: tools/call needs {\"name\", \"arguments\"}"
		: !n ? "Invalid params: \"name\" must be a string, the tool's name"
		: strcmp(n, AIRLOCK_TOOL_RUN_COMMAND) && strcmp(n, AIRLOCK_TOOL_EXPORT)
			? "Invalid params: unknown tool (tools/list names sandbox.run_command and "
			  "artifact.export)"
		: args && !json_is_object(args) ? "Invalid params: \"arguments\" must be an object"
		: meta && !json_is_object(meta) ? "Invalid params: \"_meta\" must be an object"
		: token && !json_is_string(token) && !json_is_integer(token)
			? "Invalid params: \"_meta.progressToken\" must be a string or an integer"
		: json_string_length(token) > AIRLOCK_MCP_PROGRESS_TOKEN_MAX
			? "Invalid params: \"_meta.progressToken\" is longer than "
			  MCP_STR(AIRLOCK_MCP_PROGRESS_TOKEN_MAX) " bytes (it is repeated in "
			  "every progress notification)"
			: NULL;
	if (bad) {
		*ret = mcp_error(m->id, MCP_INVALID_PARAMS, bad);
		return *ret ? 0 : -ENOMEM;
	}
	*act = (mcp_action){ .kind = MCP_ACT_CALL,
		             .id = m->id,
		             .tool = strcmp(n, AIRLOCK_TOOL_RUN_COMMAND) == 0 ? AIRLOCK_TOOL_RUN_COMMAND
		                                                             : AIRLOCK_TOOL_EXPORT,
		             .arguments = args,
		             .progress_token = token };
	return 0;
}

int mcp_session_handle(mcp_session *s, const mcp_msg *m, json_t **ret_reply,
                       mcp_action *ret_action)
{
	*ret_reply = NULL;
	*ret_action = (mcp_action){ 0 };
	if (m->kind == MCP_MSG_INVALID) {
		*ret_reply = mcp_error(m->id, m->code, m->message);
		return *ret_reply ? 0 : -ENOMEM;
	}
	if (m->kind == MCP_MSG_RESPONSE)
		return 0; /* this server sends no requests: nothing to match */
	const char *method = m->method;
	if (m->kind == MCP_MSG_NOTIFICATION) {
		/* A notification is never answered, not even with an error. */
		json_t *rid = json_object_get(m->params, "requestId");
		if (strcmp(method, "notifications/cancelled") == 0 && rid &&
		    (json_is_string(rid) || json_is_integer(rid)))
			*ret_action = (mcp_action){ .kind = MCP_ACT_CANCEL, .request_id = rid };
		return 0;
	}
	if (strcmp(method, "initialize") == 0)
		return initialize(s, m, ret_reply);
	if (strcmp(method, "ping") == 0)
		*ret_reply = mcp_result(m->id, json_object());
	else if (!s->initialized)
		*ret_reply = mcp_error(m->id, MCP_NOT_INITIALIZED,
		                       "the session is not initialized: send initialize first");
	else if (strcmp(method, "tools/list") == 0)
		/* One page: two tools. A cursor names no page of ours. */
		*ret_reply = json_object_get(m->params, "cursor")
		                     ? mcp_error(m->id, MCP_INVALID_PARAMS,
		                                 "Invalid params: tools/list has one page (no cursor)")
		                     : mcp_result(m->id, json_deep_copy(s->tools));
	else if (strcmp(method, "tools/call") == 0)
		return tools_call(m, ret_reply, ret_action);
	else
		*ret_reply = mcp_error(m->id, MCP_METHOD_NOT_FOUND,
		                       "Method not found (this server has initialize, ping, "
		                       "tools/list and tools/call)");
	return *ret_reply ? 0 : -ENOMEM;
}

void mcp_session_clear(mcp_session *s)
{
	json_decref(s->tools);
	*s = (mcp_session){ 0 };
}

json_t *mcp_tool_result(const mcp_session *s, const char *result_json)
{
	/* The result is our own encoding; a command's output may hold NUL
	 * (encoded \u0000), which the structured content must keep. */
	json_t *structured =
		mcp_session_structured(s) ? json_loads(result_json, JSON_ALLOW_NUL, NULL) : NULL;
	json_t *o = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
	                      result_json, "isError", 0);
	if (o && structured)
		json_object_set_new(o, "structuredContent", structured);
	else
		json_decref(structured);
	return o;
}

json_t *mcp_tool_error(const airlock_error *err)
{
	char text[sizeof(err->message) + 64];
	int n = snprintf(text, sizeof(text), "%s: %s", airlock_errclass_name(err->cls),
	                 err->message[0] ? err->message : "(no message)");
	size_t len = n < 0 ? 0 : (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1;
	/* The message is the library's words around the client's bytes (a
	 * path, a name): the encoder escapes it, and invalid UTF-8, which
	 * would make the answer unencodable, is replaced first. */
	char clean[3 * sizeof(text) + 1];
	size_t used = 0;
	size_t cl = mcp_utf8_clean((const unsigned char *)text, len, true, clean, &used);
	return json_pack("{s:[{s:s, s:s%}], s:b}", "content", "type", "text", "text", clean, cl,
	                 "isError", 1);
}

/* The length of the UTF-8 sequence at p (n bytes there): 1 to 4; 0 when
 * it is not one; -k when its first k bytes are a valid start that the
 * input ends in. */
static int utf8_seq(const unsigned char *p, size_t n)
{
	unsigned c = p[0];
	int len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
	        : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
	for (int i = 1; i < len; i++) {
		if ((size_t)i >= n)
			return -i;
		unsigned b = p[i];
		if ((b & 0xC0) != 0x80)
			return 0;
		/* Overlong forms, surrogates and past U+10FFFF are not UTF-8. */
		if (i == 1 && ((c == 0xE0 && b < 0xA0) || (c == 0xED && b > 0x9F) ||
		               (c == 0xF0 && b < 0x90) || (c == 0xF4 && b > 0x8F)))
			return 0;
	}
	return len;
}

size_t mcp_utf8_clean(const unsigned char *in, size_t n, bool final, char *out,
                      size_t *ret_used)
{
	size_t o = 0, i = 0;
	while (i < n) {
		int k = utf8_seq(in + i, n - i);
		if (k < 0 && !final)
			break;
		if (k <= 0) {
			memcpy(out + o, "\xEF\xBF\xBD", 3);
			o += 3;
			i++;
		} else {
			memcpy(out + o, in + i, (size_t)k);
			o += (size_t)k;
			i += (size_t)k;
		}
	}
	out[o] = 0;
	*ret_used = i;
	return o;
}
