/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_CLI_MCP_H
#define AIRLOCK_CLI_MCP_H

/*
 * airlock mcp (docs/mcp.md): the worker's two tools over the Model
 * Context Protocol, newline-delimited JSON-RPC 2.0 on stdin and stdout.
 *
 *   mcp_proto.c   the protocol with no I/O: the line reader (capped, an
 *                 oversize line drained to its newline), a message's
 *                 classification, the session's answers to initialize,
 *                 ping, tools/list and everything it refuses, and the
 *                 tool result's shape (fuzzed: fuzz/fuzz_mcp.c);
 *   mcp.c         the verb: flags, the loop that reads stdin while a call
 *                 runs, the call thread, signals, the writer;
 *   mcp_embedded.c the embedded backend: one run, its sandbox provisioned
 *                 at the first sandbox call, artifacts in a local store;
 *   mcp_worker.c  the backend that calls a worker's API.
 *
 * Only these files include this header.
 */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/error.h"
#include "airlock/port/exec.h"

/* ---- the protocol (mcp_proto.c) ---------------------------------------- */

/* The newest version this server speaks (mcp_proto.c lists the older
 * ones it accepts), and what serverInfo says it is. */
#define MCP_PROTOCOL_LATEST "2025-06-18"
#define AIRLOCK_MCP_SERVER_VERSION "0.1.0"

/* JSON-RPC 2.0's codes, and the one this server adds. */
enum {
	MCP_PARSE_ERROR = -32700,
	MCP_INVALID_REQUEST = -32600,
	MCP_METHOD_NOT_FOUND = -32601,
	MCP_INVALID_PARAMS = -32602,
	MCP_INTERNAL_ERROR = -32603,
	/* A request other than initialize and ping before initialize (the
	 * Language Server Protocol's ServerNotInitialized, which MCP took its
	 * lifecycle from). */
	MCP_NOT_INITIALIZED = -32002,
};

/* Lines out of a byte stream, each at most AIRLOCK_MCP_LINE_MAX bytes. */
typedef struct mcp_reader {
	char *buf;
	size_t len, cap;
	bool draining; /* an oversize line's rest is being read and dropped */
} mcp_reader;

/* A line without its '\n' (and a '\r' before it); oversize: the line was
 * longer than the cap, line is NULL. Blank lines are not handed over. */
typedef void (*mcp_line_fn)(void *arg, const char *line, size_t len, bool oversize);

/* Feed n bytes; fn for each line they complete. 0, or -ENOMEM. */
int mcp_reader_feed(mcp_reader *r, const char *data, size_t n, mcp_line_fn fn, void *arg);
/* The input ended: a last line without its newline is handed over. */
void mcp_reader_end(mcp_reader *r, mcp_line_fn fn, void *arg);
void mcp_reader_free(mcp_reader *r);

/* JSON values in s as the parser would build them: every '[', '{' and ','
 * outside a string, plus one. Bounds the tree before it is built. */
size_t mcp_json_values(const char *s, size_t n);

typedef enum mcp_msg_kind {
	MCP_MSG_INVALID = 0, /* answer code/message to id (null when unknown) */
	MCP_MSG_REQUEST,
	MCP_MSG_NOTIFICATION,
	MCP_MSG_RESPONSE, /* an answer to a request of ours: we send none */
} mcp_msg_kind;

typedef struct mcp_msg {
	mcp_msg_kind kind;
	json_t *root;       /* owned */
	json_t *id;         /* borrowed from root; NULL: none (or unusable) */
	const char *method; /* borrowed */
	json_t *params;     /* borrowed; NULL when absent */
	int code;           /* MCP_MSG_INVALID */
	char message[160];
} mcp_msg;

/* Classify one line (len <= AIRLOCK_MCP_LINE_MAX). Never fails: what is
 * not a message is MCP_MSG_INVALID with the code and message to answer. */
void mcp_msg_parse(const char *line, size_t len, mcp_msg *ret);
void mcp_msg_clear(mcp_msg *m);

/* {"jsonrpc": "2.0", "id": id, "result": result} (takes result);
 * {"jsonrpc": "2.0", "id": id or null, "error": {"code", "message"}}. */
json_t *mcp_result(json_t *id, json_t *result);
json_t *mcp_error(json_t *id, int code, const char *message);

/* The session's protocol state. */
typedef struct mcp_session {
	bool initialized;
	char version[16]; /* the negotiated protocol version */
	json_t *tools;    /* tools/list's result, built at initialize */
} mcp_session;

typedef enum mcp_action_kind {
	MCP_ACT_NONE = 0, /* *ret_reply (may be NULL: nothing to answer) is the whole answer */
	MCP_ACT_CALL,     /* a tools/call for the caller to run */
	MCP_ACT_CANCEL,   /* notifications/cancelled naming request_id */
} mcp_action_kind;

typedef struct mcp_action {
	mcp_action_kind kind;
	json_t *id;             /* MCP_ACT_CALL: the request's id (borrowed) */
	const char *tool;       /* MCP_ACT_CALL: a tool the session serves */
	json_t *arguments;      /* MCP_ACT_CALL: an object, or NULL (borrowed) */
	json_t *progress_token; /* MCP_ACT_CALL: _meta.progressToken or NULL (borrowed) */
	json_t *request_id;     /* MCP_ACT_CANCEL (borrowed) */
} mcp_action;

/* Handle one message: the protocol's own methods are answered in
 * *ret_reply (NULL when a notification needs no answer); a tool call or a
 * cancellation is returned as an action for the caller. 0, or -ENOMEM. */
int mcp_session_handle(mcp_session *s, const mcp_msg *m, json_t **ret_reply,
                       mcp_action *ret_action);
void mcp_session_clear(mcp_session *s);

/* Whether the negotiated version has structuredContent and outputSchema
 * (2025-06-18 on). */
bool mcp_session_structured(const mcp_session *s);

/* Bytes as UTF-8 text for a JSON string: each byte of an invalid sequence
 * becomes U+FFFD. out has room for 3 * n + 1 bytes; its length is
 * returned. Unless final, an incomplete sequence at the end is left for
 * the next piece: *ret_used is the bytes taken. */
size_t mcp_utf8_clean(const unsigned char *in, size_t n, bool final, char *out,
                      size_t *ret_used);

/* A tools/call result: the tool's result object (JSON text) as
 * structuredContent (when the version has it) and as text content; or a
 * tool failure, isError with the error's class and message as text. */
json_t *mcp_tool_result(const mcp_session *s, const char *result_json);
json_t *mcp_tool_error(const airlock_error *err);

/* ---- stdout (mcp_out.c) ---------------------------------------------------- */

/* The client's stdout: a writer thread and a bounded queue. Nothing that
 * queues a message waits for the client. */
typedef struct mcp_out mcp_out;

/* Start the writer on fd; a client that takes no byte for stall_s while
 * answers wait is gone. 0, or a negative errno. */
int mcp_out_start(int fd, int stall_s, mcp_out **ret);
/* Queue one message (taken; NULL is an encoding failure, said on
 * stderr). droppable (progress): dropped while the queue is long. true
 * when queued. Thread-safe. */
bool mcp_out_send(mcp_out *o, json_t *msg, bool droppable);
/* More than AIRLOCK_MCP_OUT_MAX bytes wait: read no more requests. */
bool mcp_out_full(mcp_out *o);
/* The client is gone: a write failed, its pipe closed, or it stalled. */
bool mcp_out_gone(mcp_out *o);
/* Readable when the client went or the queue fell under its cap; cleared
 * by mcp_out_event_clear. */
int mcp_out_event_fd(mcp_out *o);
void mcp_out_event_clear(mcp_out *o);
/* Give what is queued flush_s seconds (less if stop_fd becomes
 * readable), stop the writer, free. false: the writer is stuck in a write
 * and was left (with the descriptor, which must stay open). */
bool mcp_out_end(mcp_out *o, int flush_s, int stop_fd);

/* ---- the backends --------------------------------------------------------- */

/* What a call gets beside its arguments. */
typedef struct mcp_call_io {
	airlock_cancel *cancel;      /* fired by notifications/cancelled or the client leaving */
	airlock_output_fn on_output; /* NULL: no progress was asked for */
	void *output_arg;
} mcp_call_io;

typedef struct mcp_backend {
	const char *name; /* "embedded", "worker" */
	/* Run tool with arguments (JSON text of an object): 0 with *ret_json
	 * the tool's result object, or a negative code with err set (a tool
	 * failure: answered isError). */
	int (*call)(void *ctx, const char *tool, const char *arguments, size_t len,
	            const mcp_call_io *io, char **ret_json, airlock_error *err);
	/* The process is stopping on a signal: a command in flight ends now
	 * (SERVICE_SHUTDOWN); thread-safe, never blocks. May be NULL. */
	void (*shutdown)(void *ctx);
	/* The session is over: everything it made goes (the sandbox, a lease
	 * this process claimed). 0, or the failure (said on stderr). */
	int (*end)(void *ctx);
	void (*free)(void *ctx);
} mcp_backend;

typedef struct mcp_embedded_flags {
	const char *config, *mechanism, *tenant, *artifacts_dir;
} mcp_embedded_flags;
int mcp_embedded_open(const mcp_embedded_flags *f, const mcp_backend **ret_ops, void **ret_ctx,
                      airlock_error *err);

typedef struct mcp_worker_flags {
	const char *worker, *token_file, *tls_ca_file, *config;
	const char *run, *tenant;
	int64_t epoch; /* -1: not given */
	int64_t claim_ttl; /* > 0: claim the lease with this TTL, renew it, release it at the end */
} mcp_worker_flags;
int mcp_worker_open(const mcp_worker_flags *f, const mcp_backend **ret_ops, void **ret_ctx,
                    airlock_error *err);

#endif
