/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock mcp's protocol side (src/cli/mcp_proto.c): the client's bytes,
 * fed to the line reader in pieces whose size the input's first byte
 * chooses, each line classified and answered by a session (initialize,
 * ping, tools/list, tools/call's checks, notifications, everything
 * refused), and the UTF-8 cleaner that text for a JSON string goes
 * through. Every answer must encode as one line of JSON; a tool call's
 * arguments go through the worker's decoders, as the backends take them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/tools.h"
#include "cli/mcp.h"

typedef struct fuzz_state {
	mcp_session session;
} fuzz_state;

static void check_line(json_t *reply)
{
	char *text = json_dumps(reply, JSON_COMPACT);
	/* An answer is one line: the encoder escapes every newline. */
	if (!text || strchr(text, '\n'))
		abort();
	free(text);
	json_decref(reply);
}

static void on_line(void *arg, const char *line, size_t len, bool oversize)
{
	fuzz_state *st = arg;
	if (oversize) {
		check_line(mcp_error(NULL, MCP_INVALID_REQUEST, "oversize"));
		return;
	}
	if (!line || len > AIRLOCK_MCP_LINE_MAX || memchr(line, '\n', len))
		abort();
	mcp_msg m;
	mcp_msg_parse(line, len, &m);
	json_t *reply = NULL;
	mcp_action a;
	/* Only allocation can fail here, and the fuzzer's allocations do
	 * not: a failure is a bug. A notification is never answered. */
	if (mcp_session_handle(&st->session, &m, &reply, &a) < 0 ||
	    (m.kind == MCP_MSG_NOTIFICATION && reply))
		abort();
	{
		if (reply)
			check_line(reply);
		if (a.kind == MCP_ACT_CALL) {
			if (!a.id || !a.tool)
				abort();
			char *args = a.arguments ? json_dumps(a.arguments, JSON_COMPACT) : strdup("{}");
			airlock_error err = { 0 };
			if (args && strcmp(a.tool, AIRLOCK_TOOL_RUN_COMMAND) == 0) {
				airlock_run_command_arguments ra;
				if (airlock_run_command_arguments_decode(args, strlen(args), &ra, &err) == 0)
					airlock_run_command_arguments_clear(&ra);
				else
					check_line(mcp_tool_error(&err));
			} else if (args) {
				airlock_export_arguments xa;
				if (airlock_export_arguments_decode(args, strlen(args), &xa, &err) == 0)
					airlock_export_arguments_clear(&xa);
				else
					check_line(mcp_tool_error(&err));
			}
			free(args);
		}
	}
	mcp_msg_clear(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	size_t piece = (size_t)data[0] % 64 + 1;
	data++;
	size--;
	fuzz_state st = { 0 };
	mcp_reader r = { 0 };
	for (size_t off = 0; off < size; off += piece) {
		size_t n = size - off < piece ? size - off : piece;
		if (mcp_reader_feed(&r, (const char *)data + off, n, on_line, &st) < 0)
			abort(); /* only allocation fails, as above */
	}
	mcp_reader_end(&r, on_line, &st);
	mcp_reader_free(&r);
	mcp_session_clear(&st.session);

	/* The cleaner: whatever the bytes, its text is valid UTF-8, as a JSON
	 * string needs, and a final pass takes every byte. */
	char *out = malloc(3 * size + 1);
	if (out) {
		size_t used = 0;
		size_t n = mcp_utf8_clean(data, size, true, out, &used);
		json_t *s = json_stringn(out, n);
		if (!s || used != size)
			abort();
		json_decref(s);
		n = mcp_utf8_clean(data, size, false, out, &used);
		if (size - used > 3)
			abort();
		free(out);
	}
	return 0;
}
