/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock mcp: the worker's tools over the Model Context Protocol on
 * stdio (docs/mcp.md). stdout carries protocol messages and nothing else
 * (one JSON object a line, written whole under one lock); everything a
 * person reads goes to stderr.
 *
 * Threads: the main thread reads stdin and answers the protocol's own
 * methods at once, so a ping, a tools/list or a notifications/cancelled is
 * read and acted on while a tool call runs; a tool call runs on a thread
 * of its own, one at a time (the tools declare allow_parallel no). The
 * main thread also watches the signals (signalfd) and the call's end.
 *
 * The end: stdin's EOF (the client went away) cancels the call in flight
 * (CANCELLED), SIGTERM, SIGINT or SIGHUP ends it (SERVICE_SHUTDOWN); either
 * way the call answers if it still can, and then the backend's end
 * destroys what the session made (the sandbox; a lease this process
 * claimed) before the process exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "airlock/tools.h"
#include "cli/common.h"
#include "cli/mcp.h"

/* One tools/call, queued or running. */
typedef struct mcp_call {
	json_t *id;             /* owned copy */
	json_t *progress_token; /* owned copy, or NULL */
	const char *tool;
	char *arguments;
	airlock_cancel *cancel;
	bool cancelled_by_client; /* notifications/cancelled: no answer is sent */
} mcp_call;

typedef struct mcp_server {
	mcp_session session;
	const mcp_backend *ops;
	void *ctx;
	mcp_reader reader;

	int in_fd, out_fd;        /* the client's stdin and stdout, private (cli_mcp) */
	pthread_mutex_t out_lock; /* out_fd: one whole message at a time */
	bool out_gone;            /* a write failed: the client is gone */

	/* The call running on its thread, and the calls waiting their turn
	 * (the tools declare allow_parallel no: one at a time, in order). lock
	 * guards running->cancelled_by_client, which the call thread reads. */
	pthread_mutex_t lock;
	mcp_call *running;
	pthread_t thread;
	mcp_call *queue[AIRLOCK_MCP_PENDING_MAX];
	size_t n_queue;
	int done_efd; /* the call thread's end */
	/* Progress of the running call: bytes of output sent so far, and each
	 * stream's incomplete UTF-8 sequence held for its next piece. */
	int64_t progress;
	unsigned char carry[2][4];
	size_t carry_len[2];
	int failed; /* -ENOMEM from the reader or a reply */
} mcp_server;

/* ---- stdout ---------------------------------------------------------------- */

static void send_msg(mcp_server *s, json_t *msg)
{
	char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	if (!text) {
		fputs("airlock mcp: an answer could not be encoded (out of memory)\n", stderr);
		return;
	}
	size_t n = strlen(text);
	text[n] = '\n'; /* json_dumps's NUL: the line's end takes its place */
	pthread_mutex_lock(&s->out_lock);
	size_t off = 0;
	while (!s->out_gone && off < n + 1) {
		ssize_t w = write(s->out_fd, text + off, n + 1 - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			s->out_gone = true; /* EPIPE: nobody reads our answers any more */
		else
			off += (size_t)w;
	}
	pthread_mutex_unlock(&s->out_lock);
	free(text);
}

/* ---- progress ---------------------------------------------------------------- */

static void send_progress(mcp_server *s, airlock_output_stream stream, const char *text,
                          size_t len, size_t raw)
{
	s->progress += (int64_t)raw;
	json_t *msg = json_pack("{s:s, s:s, s:{s:O, s:I, s:s%, s:{s:s}}}", "jsonrpc", "2.0",
	                        "method", "notifications/progress", "params", "progressToken",
	                        s->running->progress_token, "progress", (json_int_t)s->progress, "message",
	                        text, len, "_meta", "airlock/stream",
	                        airlock_output_stream_name(stream));
	send_msg(s, msg);
}

/* The command's output as it arrives (the execute's thread): pieces of
 * at most AIRLOCK_MCP_PROGRESS_CHUNK bytes, each valid UTF-8 (a sequence
 * cut by a piece's end waits for the next). progress is the count of
 * output bytes so far: it only grows, as the protocol requires. */
static void on_output(void *arg, airlock_output_stream stream, const void *data, size_t len)
{
	mcp_server *s = arg;
	int k = stream == AIRLOCK_OUTPUT_STDERR ? 1 : 0;
	const unsigned char *p = data;
	static __thread char clean[3 * (AIRLOCK_MCP_PROGRESS_CHUNK + 4) + 1];
	unsigned char piece[AIRLOCK_MCP_PROGRESS_CHUNK + 4];
	while (len > 0 && !s->out_gone) {
		size_t held = s->carry_len[k];
		size_t take = len < AIRLOCK_MCP_PROGRESS_CHUNK ? len : AIRLOCK_MCP_PROGRESS_CHUNK;
		memcpy(piece, s->carry[k], held);
		memcpy(piece + held, p, take);
		size_t used = 0;
		size_t cl = mcp_utf8_clean(piece, held + take, false, clean, &used);
		size_t rest = held + take - used; /* at most 3: an incomplete sequence */
		memcpy(s->carry[k], piece + used, rest);
		s->carry_len[k] = rest;
		if (cl > 0)
			send_progress(s, stream, clean, cl, used > held ? used - held : 0);
		p += take;
		len -= take;
	}
}

/* ---- the calls -------------------------------------------------------------------- */

static void call_free(mcp_call *c)
{
	if (!c)
		return;
	json_decref(c->id);
	json_decref(c->progress_token);
	free(c->arguments);
	airlock_cancel_free(c->cancel);
	free(c);
}

static void *call_main(void *arg)
{
	mcp_server *s = arg;
	mcp_call *c = s->running;
	mcp_call_io io = { .cancel = c->cancel,
		           .on_output = c->progress_token ? on_output : NULL,
		           .output_arg = s };
	char *json = NULL;
	airlock_error err = { 0 };
	int r = s->ops->call(s->ctx, c->tool, c->arguments, strlen(c->arguments), &io, &json, &err);
	json_t *result = r == 0 ? mcp_tool_result(&s->session, json) : mcp_tool_error(&err);
	free(json);
	pthread_mutex_lock(&s->lock);
	bool quiet = c->cancelled_by_client;
	pthread_mutex_unlock(&s->lock);
	/* A request the client cancelled is not answered (the protocol's
	 * rule); its command is over either way. */
	if (quiet || !result)
		json_decref(result);
	else
		send_msg(s, mcp_result(c->id, result));
	uint64_t one = 1;
	ssize_t w = write(s->done_efd, &one, sizeof(one));
	(void)w;
	return NULL;
}

/* Start the next queued call, if none runs. */
static void call_next(mcp_server *s)
{
	while (!s->running && s->n_queue > 0) {
		mcp_call *c = s->queue[0];
		memmove(s->queue, s->queue + 1, --s->n_queue * sizeof(s->queue[0]));
		s->running = c;
		s->progress = 0;
		s->carry_len[0] = s->carry_len[1] = 0;
		int e = pthread_create(&s->thread, NULL, call_main, s);
		if (e == 0)
			return;
		s->running = NULL;
		airlock_error err = { 0 };
		airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, e, "the tool call's thread");
		send_msg(s, mcp_result(c->id, mcp_tool_error(&err)));
		call_free(c);
	}
}

/* The running call's thread ended: join it, then the next. */
static void call_reap(mcp_server *s)
{
	uint64_t v;
	ssize_t n = read(s->done_efd, &v, sizeof(v));
	(void)n;
	if (!s->running)
		return;
	pthread_join(s->thread, NULL);
	call_free(s->running);
	s->running = NULL;
	call_next(s);
}

static void call_queue(mcp_server *s, const mcp_action *a)
{
	airlock_error err = { 0 };
	if (s->n_queue == AIRLOCK_MCP_PENDING_MAX) {
		airlock_error_set(&err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                  "%d tool calls are already waiting in this session (the tools run "
		                  "one at a time: allow_parallel no); call again when they have "
		                  "answered",
		                  AIRLOCK_MCP_PENDING_MAX);
		send_msg(s, mcp_result(a->id, mcp_tool_error(&err)));
		return;
	}
	mcp_call *c = calloc(1, sizeof(*c));
	json_t *args = a->arguments ? json_incref(a->arguments) : json_object();
	if (c) {
		c->arguments = args ? json_dumps(args, JSON_COMPACT) : NULL;
		c->id = json_deep_copy(a->id);
		c->progress_token = a->progress_token ? json_deep_copy(a->progress_token) : NULL;
		c->tool = a->tool;
	}
	json_decref(args);
	if (!c || !c->arguments || !c->id || (a->progress_token && !c->progress_token) ||
	    airlock_cancel_new(&c->cancel, &err) < 0) {
		airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, ENOMEM, "a tool call");
		send_msg(s, mcp_result(a->id, mcp_tool_error(&err)));
		call_free(c);
		return;
	}
	s->queue[s->n_queue++] = c;
	call_next(s);
}

/* notifications/cancelled: the running call's command is cancelled and
 * its answer withheld; a waiting call is dropped unanswered. Another id
 * (one already answered, one never sent) is ignored, as the protocol
 * says. */
static void call_cancel(mcp_server *s, json_t *request_id)
{
	if (s->running && json_equal(request_id, s->running->id)) {
		pthread_mutex_lock(&s->lock);
		s->running->cancelled_by_client = true;
		pthread_mutex_unlock(&s->lock);
		airlock_cancel_fire(s->running->cancel);
		return;
	}
	for (size_t i = 0; i < s->n_queue; i++)
		if (json_equal(request_id, s->queue[i]->id)) {
			call_free(s->queue[i]);
			memmove(s->queue + i, s->queue + i + 1, (s->n_queue - i - 1) * sizeof(s->queue[0]));
			s->n_queue--;
			return;
		}
}

/* ---- lines in ------------------------------------------------------------------ */

static void on_line(void *arg, const char *line, size_t len, bool oversize)
{
	mcp_server *s = arg;
	if (oversize) {
		char msg[128];
		snprintf(msg, sizeof(msg), "Invalid Request: a line longer than %u bytes was read "
		                           "and dropped",
		         AIRLOCK_MCP_LINE_MAX);
		send_msg(s, mcp_error(NULL, MCP_INVALID_REQUEST, msg));
		return;
	}
	mcp_msg m;
	mcp_msg_parse(line, len, &m);
	json_t *reply = NULL;
	mcp_action a;
	if (mcp_session_handle(&s->session, &m, &reply, &a) < 0) {
		s->failed = -ENOMEM;
		send_msg(s, mcp_error(m.id, MCP_INTERNAL_ERROR, "Internal error: out of memory"));
	} else if (reply) {
		send_msg(s, reply);
	} else if (a.kind == MCP_ACT_CALL) {
		call_queue(s, &a);
	} else if (a.kind == MCP_ACT_CANCEL) {
		call_cancel(s, a.request_id);
	}
	mcp_msg_clear(&m);
}

/* ---- the verb ---------------------------------------------------------------------- */

static void mcp_usage(FILE *out)
{
	fprintf(out,
	        "usage: airlock mcp [--config FILE] [--mechanism NAME] [--tenant T]\n"
	        "                   [--artifacts-dir DIR]\n"
	        "       airlock mcp --worker ADDRESS [--token-file FILE] [--tls-ca-file FILE]\n"
	        "                   --run RUN --epoch N [--claim [--ttl SECONDS]] [--tenant T]\n\n"
	        "Serve the worker's tools (sandbox.run_command, artifact.export) to an MCP client\n"
	        "over stdio: newline-delimited JSON-RPC 2.0 on stdin and stdout, logs on stderr\n"
	        "(docs/mcp.md).\n\n"
	        "Embedded (no --worker): the session is one run. Its sandbox is provisioned at\n"
	        "the first sandbox.run_command with the settings' mechanism (as airlock run does),\n"
	        "kept for the session's later calls, and destroyed when stdin ends or on SIGTERM,\n"
	        "SIGINT or SIGHUP. artifact.export writes the artifact into --artifacts-dir\n"
	        "(default: the settings' worker.state_dir/mcp-artifacts, made 0700), at\n"
	        "DIR/TENANT/<first two of id>/ID, and answers its ArtifactRef. --tenant names\n"
	        "the run's tenant (default: local).\n\n"
	        "Against a worker (--worker): each tools/call is the worker's tool route for RUN\n"
	        "at epoch N. Without --claim the platform holds RUN's lease; with --claim this\n"
	        "process claims it (TTL --ttl, default 60 s), renews it at a third of its TTL and\n"
	        "releases it when the session ends, which destroys the run's sandbox. --token-file\n"
	        "is a token of the worker's tokens_file (none: the worker's dev mode); a token of\n"
	        "every tenant needs --tenant.\n\n"
	        "Exit status: 0 when stdin ended, 128+N after signal N, 64 bad usage, 65-79 when\n"
	        "the session could not start or its end failed (README, \"Exit codes\").\n");
}

enum {
	OPT_CONFIG = 256, OPT_MECHANISM, OPT_TENANT, OPT_ARTIFACTS, OPT_WORKER, OPT_TOKEN,
	OPT_TLS_CA, OPT_RUN, OPT_EPOCH, OPT_CLAIM, OPT_TTL, OPT_HELP
};

static const struct option mcp_options[] = {
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "mechanism", required_argument, NULL, OPT_MECHANISM },
	{ "tenant", required_argument, NULL, OPT_TENANT },
	{ "artifacts-dir", required_argument, NULL, OPT_ARTIFACTS },
	{ "worker", required_argument, NULL, OPT_WORKER },
	{ "token-file", required_argument, NULL, OPT_TOKEN },
	{ "tls-ca-file", required_argument, NULL, OPT_TLS_CA },
	{ "run", required_argument, NULL, OPT_RUN },
	{ "epoch", required_argument, NULL, OPT_EPOCH },
	{ "claim", no_argument, NULL, OPT_CLAIM },
	{ "ttl", required_argument, NULL, OPT_TTL },
	{ "help", no_argument, NULL, OPT_HELP },
	{ 0 },
};

/* -1 to go on with the backend open; else the exit status. */
static int mcp_parse(int argc, char **argv, mcp_embedded_flags *ef, mcp_worker_flags *wf)
{
	*ef = (mcp_embedded_flags){ .tenant = "local" };
	*wf = (mcp_worker_flags){ .epoch = -1 };
	bool claim = false, ttl = false, embedded_only = false;
	int64_t ttl_s = 60;
	optind = 1;
	opterr = 1;
	int c;
	while ((c = getopt_long(argc, argv, "h", mcp_options, NULL)) != -1) {
		switch (c) {
		case OPT_CONFIG: ef->config = wf->config = optarg; break;
		case OPT_MECHANISM: ef->mechanism = optarg; embedded_only = true; break;
		case OPT_TENANT: ef->tenant = wf->tenant = optarg; break;
		case OPT_ARTIFACTS: ef->artifacts_dir = optarg; embedded_only = true; break;
		case OPT_WORKER: wf->worker = optarg; break;
		case OPT_TOKEN: wf->token_file = optarg; break;
		case OPT_TLS_CA: wf->tls_ca_file = optarg; break;
		case OPT_RUN: wf->run = optarg; break;
		case OPT_CLAIM: claim = true; break;
		case OPT_EPOCH:
			if (!cli_flag_i64("mcp", "--epoch", optarg, 0, INT64_MAX, &wf->epoch))
				return CLI_EXIT_USAGE;
			break;
		case OPT_TTL:
			if (!cli_flag_i64("mcp", "--ttl", optarg, 3, 86400, &ttl_s))
				return CLI_EXIT_USAGE;
			ttl = true;
			break;
		case OPT_HELP:
		case 'h':
			mcp_usage(stdout);
			return CLI_EXIT_OK;
		default:
			mcp_usage(stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fputs("airlock mcp: no arguments are taken (the client speaks on stdin)\n", stderr);
		return CLI_EXIT_USAGE;
	}
	const char *bad = NULL;
	if (wf->worker) {
		bad = embedded_only ? "--mechanism and --artifacts-dir are the embedded mode's (no "
		                      "--worker): the worker has its own"
		      : !wf->run || wf->epoch < 0 ? "--worker needs --run RUN and --epoch N"
		      : ttl && !claim             ? "--ttl is the lease --claim takes"
		                                  : NULL;
		wf->claim_ttl = claim ? ttl_s : 0;
	} else if (wf->run || wf->epoch >= 0 || claim || ttl || wf->token_file || wf->tls_ca_file) {
		bad = "--run, --epoch, --claim, --ttl, --token-file and --tls-ca-file need --worker";
	}
	if (bad) {
		fprintf(stderr, "airlock mcp: %s\n", bad);
		return CLI_EXIT_USAGE;
	}
	return -1;
}

/* The loop: stdin, the signals and the call's end, until stdin ends or
 * a signal comes. Returns the signal's number, or 0. */
static int serve(mcp_server *s, int sfd)
{
	bool eof = false;
	int signo = 0;
	char buf[64 << 10];
	while (!eof && !signo && !s->failed) {
		struct pollfd p[3] = { { .fd = s->in_fd, .events = POLLIN },
			               { .fd = sfd, .events = POLLIN },
			               { .fd = s->done_efd, .events = POLLIN } };
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "airlock mcp: poll: %s\n", strerror(errno));
			break;
		}
		if (p[2].revents)
			call_reap(s);
		if (p[1].revents) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				signo = (int)si.ssi_signo;
		}
		if (p[0].revents && !signo) {
			ssize_t n = read(s->in_fd, buf, sizeof(buf));
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0) {
				eof = true;
				mcp_reader_end(&s->reader, on_line, s);
			} else if (mcp_reader_feed(&s->reader, buf, (size_t)n, on_line, s) < 0) {
				s->failed = -ENOMEM;
			}
		}
		/* A client whose end of stdout is closed is gone as well. */
		if (s->out_gone)
			eof = true;
	}
	/* Calls still waiting are dropped unanswered: the session is over. */
	for (size_t i = 0; i < s->n_queue; i++)
		call_free(s->queue[i]);
	s->n_queue = 0;
	if (s->running) {
		/* The client left: its command is cancelled. A signal: the
		 * command ends as a service's does when it stops. */
		if (signo && s->ops->shutdown)
			s->ops->shutdown(s->ctx);
		else
			airlock_cancel_fire(s->running->cancel);
		call_reap(s);
	}
	return signo;
}

int cli_mcp(int argc, char **argv)
{
	mcp_embedded_flags ef;
	mcp_worker_flags wf;
	int pr = mcp_parse(argc, argv, &ef, &wf);
	if (pr >= 0)
		return pr;

	/* The protocol's descriptors are moved out of 0 and 1, and 0 and 1
	 * become /dev/null and stderr, before anything else runs: a library
	 * line or a child process (an image build's tools) that writes to
	 * stdout lands on stderr, and none can read the client's messages.
	 * stdout carries protocol messages only, by construction. */
	int in_fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
	int out_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (in_fd < 0 || out_fd < 0 || null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 ||
	    dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
		fprintf(stderr, "airlock mcp: stdin and stdout: %s\n", strerror(errno));
		int fds[] = { in_fd, out_fd, null_fd };
		for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
			if (fds[i] >= 0)
				close(fds[i]);
		return CLI_EXIT_SOFTWARE;
	}
	close(null_fd);

	/* The signals become events before any thread or child exists, so
	 * none of them takes one by its default action mid-call. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) {
		fputs("airlock mcp: cannot block the signals it watches\n", stderr);
		close(in_fd);
		close(out_fd);
		return CLI_EXIT_SOFTWARE;
	}
	int sfd = signalfd(-1, &set, SFD_CLOEXEC);
	mcp_server s = { .in_fd = in_fd, .out_fd = out_fd, .out_lock = PTHREAD_MUTEX_INITIALIZER,
		         .lock = PTHREAD_MUTEX_INITIALIZER, .done_efd = eventfd(0, EFD_CLOEXEC) };
	if (sfd < 0 || s.done_efd < 0) {
		fprintf(stderr, "airlock mcp: signalfd/eventfd: %s\n", strerror(errno));
		if (sfd >= 0)
			close(sfd);
		if (s.done_efd >= 0)
			close(s.done_efd);
		close(in_fd);
		close(out_fd);
		return CLI_EXIT_SOFTWARE;
	}
	airlock_error err = { 0 };
	int r = wf.worker ? mcp_worker_open(&wf, &s.ops, &s.ctx, &err)
	                  : mcp_embedded_open(&ef, &s.ops, &s.ctx, &err);
	int code = CLI_EXIT_OK;
	if (r < 0) {
		cli_error("mcp", &err);
		code = cli_exit_for(&err);
	} else {
		fprintf(stderr, "airlock mcp: serving %s's tools over stdio (%s)\n",
		        s.ops->name, MCP_PROTOCOL_LATEST);
		int signo = serve(&s, sfd);
		if (s.ops->end(s.ctx) < 0)
			code = CLI_EXIT_SOFTWARE;
		else if (signo)
			code = 128 + signo;
		else if (s.failed)
			code = CLI_EXIT_SOFTWARE;
		s.ops->free(s.ctx);
		if (signo)
			fprintf(stderr, "airlock mcp: stopped by %s\n", strsignal(signo));
	}
	mcp_reader_free(&s.reader);
	mcp_session_clear(&s.session);
	close(s.done_efd);
	close(sfd);
	close(in_fd);
	close(out_fd);
	return code;
}
