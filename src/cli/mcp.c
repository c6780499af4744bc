/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock mcp: the worker's tools over the Model Context Protocol on
 * stdio (docs/mcp.md). stdout carries protocol messages and nothing else
 * (one JSON object a line, queued whole to the writer thread of
 * mcp_out.c, so no thread here waits on the client); everything a person
 * reads goes to stderr.
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
#include <time.h>
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

	int in_fd;   /* the client's stdin, private (cli_mcp) */
	mcp_out *out; /* the client's stdout */

	/* The call running on its thread, and the calls waiting their turn
	 * (the tools declare allow_parallel no: one at a time, in order). lock
	 * guards running->cancelled_by_client, which the call thread reads. */
	pthread_mutex_t lock;
	mcp_call *running;
	pthread_t thread;
	mcp_call *queue[AIRLOCK_MCP_PENDING_MAX];
	size_t n_queue;
	int done_efd; /* the call thread's end */
	int tick_efd; /* held progress output: the main thread's timer is needed */
	int failed;   /* -ENOMEM from the reader */

	/* Progress of the running call (plock: the command's output reader
	 * adds, the main thread's timer and the call's end flush). Output is
	 * held per stream until a chunk is full or the interval has passed;
	 * progress is the count of output bytes sent so far. */
	pthread_mutex_t plock;
	bool progress_open;     /* the running call asked for progress */
	json_t *progress_token; /* the running call's, borrowed */
	int64_t progress;       /* bytes of output sent as progress so far */
	int64_t progress_at_ms; /* when the last notification went */
	unsigned char pend[2][AIRLOCK_MCP_PROGRESS_CHUNK];
	size_t pend_len[2];
	bool pend_fresh[2]; /* bytes came since the stream's last flush */
	char clean[3 * AIRLOCK_MCP_PROGRESS_CHUNK + 1];
} mcp_server;

static void efd_post(int fd)
{
	uint64_t one = 1;
	ssize_t w = write(fd, &one, sizeof(one));
	(void)w; /* a counter at its maximum is still readable */
}

static void efd_drain(int fd)
{
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));
	(void)r;
}

/* ---- stdout ---------------------------------------------------------------- */

static void send_msg(mcp_server *s, json_t *msg)
{
	mcp_out_send(s->out, msg, false);
}

/* A request's answer: result (taken), or, when it could not be built, an
 * Internal error the client can match to its request rather than an
 * answer that never comes. */
static void send_reply(mcp_server *s, json_t *id, json_t *result)
{
	json_t *msg = result ? mcp_result(id, result) : NULL;
	if (!msg)
		msg = mcp_error(id, MCP_INTERNAL_ERROR, "Internal error: the answer could not be "
		                                        "built (out of memory)");
	send_msg(s, msg);
}

/* ---- progress ---------------------------------------------------------------- */

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Send stream k's held output as one notification, each piece valid
 * UTF-8: unless final, a sequence cut by the end waits for its next
 * bytes. progress counts the raw bytes sent (a held byte is counted when
 * it goes), so it grows with every notification, as the protocol
 * requires, and ends at the output's length. With plock. */
static void progress_flush_stream(mcp_server *s, int k, bool final)
{
	size_t used = 0;
	s->pend_fresh[k] = false;
	size_t cl = mcp_utf8_clean(s->pend[k], s->pend_len[k], final, s->clean, &used);
	memmove(s->pend[k], s->pend[k] + used, s->pend_len[k] - used);
	s->pend_len[k] -= used;
	if (used == 0)
		return;
	s->progress += (int64_t)used;
	s->progress_at_ms = mono_ms();
	json_t *msg = json_pack("{s:s, s:s, s:{s:O, s:I, s:s%, s:{s:s}}}", "jsonrpc", "2.0",
	                        "method", "notifications/progress", "params", "progressToken",
	                        s->progress_token, "progress", (json_int_t)s->progress, "message",
	                        s->clean, cl, "_meta", "airlock/stream",
	                        airlock_output_stream_name(k ? AIRLOCK_OUTPUT_STDERR
	                                                     : AIRLOCK_OUTPUT_STDOUT));
	/* Dropped while the client is slow to read: the result has it all. */
	mcp_out_send(s->out, msg, true);
}

static void progress_flush(mcp_server *s, bool final)
{
	for (int k = 0; k < 2; k++)
		if (s->pend_len[k] > 0)
			progress_flush_stream(s, k, final);
}

/* The command's output as it arrives (the execute's thread): held, and
 * sent as a chunk fills or the interval passes. The work is constant
 * per byte: a byte is copied in once and cleaned once. */
static void on_output(void *arg, airlock_output_stream stream, const void *data, size_t len)
{
	mcp_server *s = arg;
	int k = stream == AIRLOCK_OUTPUT_STDERR ? 1 : 0;
	const unsigned char *p = data;
	pthread_mutex_lock(&s->plock);
	while (s->progress_open && len > 0) {
		size_t room = sizeof(s->pend[k]) - s->pend_len[k];
		size_t take = len < room ? len : room;
		memcpy(s->pend[k] + s->pend_len[k], p, take);
		s->pend_len[k] += take;
		if (!s->pend_fresh[0] && !s->pend_fresh[1])
			efd_post(s->tick_efd); /* the main thread's timer starts */
		s->pend_fresh[k] = true;
		p += take;
		len -= take;
		if (s->pend_len[k] == sizeof(s->pend[k]))
			progress_flush_stream(s, k, false);
	}
	if (s->progress_open && mono_ms() - s->progress_at_ms >= AIRLOCK_MCP_PROGRESS_INTERVAL_MS)
		progress_flush(s, false);
	pthread_mutex_unlock(&s->plock);
}

/* The main thread's timer: output held past the interval goes now (a
 * command that writes a line and then waits is not held up by it).
 * Returns the poll timeout until the next such moment, or -1. */
static int progress_tick(mcp_server *s)
{
	pthread_mutex_lock(&s->plock);
	int timeout = -1;
	if (s->progress_open && (s->pend_fresh[0] || s->pend_fresh[1])) {
		int64_t wait = s->progress_at_ms + AIRLOCK_MCP_PROGRESS_INTERVAL_MS - mono_ms();
		if (wait <= 0)
			progress_flush(s, false);
		/* After a flush only an incomplete UTF-8 sequence can be left
		 * (not fresh): it waits for its bytes, not for the timer. */
		else
			timeout = (int)wait;
	}
	pthread_mutex_unlock(&s->plock);
	return timeout;
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
	/* The output still held goes before the answer, a cut UTF-8
	 * sequence at its end included (as U+FFFD): the progress a client
	 * saw adds up to the output. */
	pthread_mutex_lock(&s->plock);
	if (!quiet)
		progress_flush(s, true);
	s->progress_open = false;
	pthread_mutex_unlock(&s->plock);
	/* A request the client cancelled is not answered (the protocol's
	 * rule); its command is over either way. */
	if (quiet)
		json_decref(result);
	else
		send_reply(s, c->id, result);
	efd_post(s->done_efd);
	return NULL;
}

/* Start the next queued call, if none runs. */
static void call_next(mcp_server *s)
{
	while (!s->running && s->n_queue > 0) {
		mcp_call *c = s->queue[0];
		memmove(s->queue, s->queue + 1, --s->n_queue * sizeof(s->queue[0]));
		s->running = c;
		pthread_mutex_lock(&s->plock);
		s->progress_open = c->progress_token != NULL;
		s->progress_token = c->progress_token;
		s->progress = 0;
		s->progress_at_ms = mono_ms();
		s->pend_len[0] = s->pend_len[1] = 0;
		s->pend_fresh[0] = s->pend_fresh[1] = false;
		pthread_mutex_unlock(&s->plock);
		int e = pthread_create(&s->thread, NULL, call_main, s);
		if (e == 0)
			return;
		s->running = NULL;
		airlock_error err = { 0 };
		airlock_error_set(&err, AIRLOCK_ERR_SYSTEM, e, "the tool call's thread");
		pthread_mutex_lock(&s->plock);
		s->progress_open = false;
		pthread_mutex_unlock(&s->plock);
		send_reply(s, c->id, mcp_tool_error(&err));
		call_free(c);
	}
}

/* The running call's thread ended: join it, then the next. */
static void call_reap(mcp_server *s)
{
	efd_drain(s->done_efd);
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
		send_reply(s, a->id, mcp_tool_error(&err));
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
		send_reply(s, a->id, mcp_tool_error(&err));
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
	        "                   [--artifacts-dir DIR] [--stall-timeout SECONDS]\n"
	        "       airlock mcp --worker ADDRESS [--token-file FILE] [--tls-ca-file FILE]\n"
	        "                   --run RUN --epoch N [--claim [--ttl SECONDS]] [--tenant T]\n"
	        "                   [--stall-timeout SECONDS]\n\n"
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
	        "A client that reads nothing for --stall-timeout seconds (default %d, at most\n"
	        "%d) while answers wait for it is treated as gone, as when stdin ends.\n\n"
	        "Exit status: 0 when stdin ended, 128+N after signal N, 64 bad usage, 65-79 when\n"
	        "the session could not start or its end failed (README, \"Exit codes\").\n",
	        AIRLOCK_MCP_STALL_DEFAULT_S, AIRLOCK_MCP_STALL_MAX_S);
}

enum {
	OPT_CONFIG = 256, OPT_MECHANISM, OPT_TENANT, OPT_ARTIFACTS, OPT_WORKER, OPT_TOKEN,
	OPT_TLS_CA, OPT_RUN, OPT_EPOCH, OPT_CLAIM, OPT_TTL, OPT_STALL, OPT_HELP
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
	{ "stall-timeout", required_argument, NULL, OPT_STALL },
	{ "help", no_argument, NULL, OPT_HELP },
	{ 0 },
};

/* -1 to go on with the backend open; else the exit status. */
static int mcp_parse(int argc, char **argv, mcp_embedded_flags *ef, mcp_worker_flags *wf,
                     int *ret_stall_s)
{
	int64_t stall_s = AIRLOCK_MCP_STALL_DEFAULT_S;
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
		case OPT_STALL:
			if (!cli_flag_i64("mcp", "--stall-timeout", optarg, 1, AIRLOCK_MCP_STALL_MAX_S,
			                  &stall_s))
				return CLI_EXIT_USAGE;
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
	*ret_stall_s = (int)stall_s;
	return -1;
}

/* The loop: stdin, the signals, the call's end, the writer's news and
 * the progress timer, until stdin ends, the client's stdout goes or a
 * signal comes. Returns the signal's number, or 0. No step here waits on
 * the client: stdin is read only while the answers queued for it are
 * under their cap. */
static int serve(mcp_server *s, int sfd)
{
	bool eof = false;
	int signo = 0;
	char buf[64 << 10];
	while (!eof && !signo && !s->failed) {
		int timeout = progress_tick(s);
		bool full = mcp_out_full(s->out);
		struct pollfd p[5] = { { .fd = sfd, .events = POLLIN },
			               { .fd = s->done_efd, .events = POLLIN },
			               { .fd = mcp_out_event_fd(s->out), .events = POLLIN },
			               { .fd = s->tick_efd, .events = POLLIN },
			               { .fd = full ? -1 : s->in_fd, .events = POLLIN } };
		if (poll(p, 5, timeout) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "airlock mcp: poll: %s\n", strerror(errno));
			break;
		}
		if (p[0].revents) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				signo = (int)si.ssi_signo;
		}
		if (p[1].revents)
			call_reap(s);
		if (p[2].revents)
			mcp_out_event_clear(s->out);
		if (p[3].revents)
			efd_drain(s->tick_efd);
		if (p[4].revents && !signo) {
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
		/* A client whose stdout is closed, or who stopped reading it,
		 * is gone as well. */
		if (mcp_out_gone(s->out))
			eof = true;
	}
	/* Calls still waiting are dropped unanswered: the session is over. */
	for (size_t i = 0; i < s->n_queue; i++)
		call_free(s->queue[i]);
	s->n_queue = 0;
	if (s->running) {
		/* The client left: its command is cancelled. A signal: the
		 * command ends as a service's does when it stops. Neither
		 * waits on the client: the call's answer is only queued. */
		if (signo && s->ops->shutdown)
			s->ops->shutdown(s->ctx);
		else
			airlock_cancel_fire(s->running->cancel);
		call_reap(s); /* waits for the call thread's end */
	}
	return signo;
}

int cli_mcp(int argc, char **argv)
{
	mcp_embedded_flags ef;
	mcp_worker_flags wf;
	int stall_s = AIRLOCK_MCP_STALL_DEFAULT_S;
	int pr = mcp_parse(argc, argv, &ef, &wf, &stall_s);
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
	/* The server holds the progress buffers (some 80 KiB): on the heap. */
	mcp_server *s = calloc(1, sizeof(*s));
	int e = !s || sfd < 0 ? errno : mcp_out_start(out_fd, stall_s, &s->out) < 0 ? errno : 0;
	if (s) {
		s->in_fd = in_fd;
		s->done_efd = eventfd(0, EFD_CLOEXEC);
		s->tick_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (!e && (s->done_efd < 0 || s->tick_efd < 0))
			e = errno;
	}
	if (!e && s)
		e = pthread_mutex_init(&s->lock, NULL);
	if (!e && s && (e = pthread_mutex_init(&s->plock, NULL)) != 0)
		pthread_mutex_destroy(&s->lock);
	if (e || !s) {
		fprintf(stderr, "airlock mcp: its threads and descriptors: %s\n", strerror(e ? e : ENOMEM));
		if (s) {
			mcp_out_end(s->out, 0, -1);
			if (s->done_efd >= 0)
				close(s->done_efd);
			if (s->tick_efd >= 0)
				close(s->tick_efd);
			free(s);
		}
		if (sfd >= 0)
			close(sfd);
		close(in_fd);
		close(out_fd);
		return CLI_EXIT_SOFTWARE;
	}
	airlock_error err = { 0 };
	int r = wf.worker ? mcp_worker_open(&wf, &s->ops, &s->ctx, &err)
	                  : mcp_embedded_open(&ef, &s->ops, &s->ctx, &err);
	int code = CLI_EXIT_OK;
	if (r < 0) {
		cli_error("mcp", &err);
		code = cli_exit_for(&err);
	} else {
		fprintf(stderr, "airlock mcp: serving %s's tools over stdio (%s)\n",
		        s->ops->name, MCP_PROTOCOL_LATEST);
		int signo = serve(s, sfd);
		if (s->ops->end(s->ctx) < 0)
			code = CLI_EXIT_SOFTWARE;
		else if (signo)
			code = 128 + signo;
		else if (s->failed)
			code = CLI_EXIT_SOFTWARE;
		s->ops->free(s->ctx);
		if (signo)
			fprintf(stderr, "airlock mcp: stopped by %s\n", strsignal(signo));
	}
	/* The last answers (a cancelled call's, a signal's) get a bounded
	 * time to reach the client; a second signal does not wait for it. */
	bool out_closed = mcp_out_end(s->out, AIRLOCK_MCP_FLUSH_S, sfd);
	mcp_reader_free(&s->reader);
	mcp_session_clear(&s->session);
	pthread_mutex_destroy(&s->plock);
	pthread_mutex_destroy(&s->lock);
	close(s->done_efd);
	close(s->tick_efd);
	free(s);
	close(sfd);
	close(in_fd);
	if (out_closed)
		close(out_fd);
	return code;
}
