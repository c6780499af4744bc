/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock run: provision a sandbox, execute one command, destroy it, print
 * the result. The sandbox is destroyed on every path out, including errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "airlock/egress.h"
#include "airlock/json.h"
#include "airlock/mechanisms.h"
#include "airlock/credential_file.h"
#include "airlock/remote.h"
#include "airlock/run_command.h"
#include "airlock/tiers.h"
#include "cli/common.h"
#include "util/util.h"

extern char **environ;

static void run_usage(FILE *out)
{
	fprintf(out,
	        "usage: airlock run [OPTIONS] -- ARGV...\n\n"
	        "Provision a sandbox, run ARGV once in it, destroy it, and print the result.\n"
	        "ARGV is an argument vector, never a shell string: write -- bash -lc 'a && b'\n"
	        "to use a shell.\n\n"
	        "options:\n"
	        "  --mechanism NAME      fake, native, gvisor, microvm (default: settings)\n"
	        "  --config FILE         settings file (default: the embedded defaults)\n"
	        "  --json                print the result object as JSON\n"
	        "  --cpu MILLICORES      cpu_millicores\n"
	        "  --memory BYTES        memory_bytes (K, M, G suffixes)\n"
	        "  --pids N              pids_max\n"
	        "  --workspace-bytes B   workspace_bytes (K, M, G suffixes)\n"
	        "  --inodes N            inodes_max\n"
	        "  --timeout SECONDS     wall clock for the sandbox and the command (clamped to\n"
	        "                        sandbox.run_command's 300 s, like the model's value)\n"
	        "  --output-limit BYTES  maximum_output_bytes per stream (default 1M)\n"
	        "  --stdin FILE|-        the command's standard input: a file, a pipe or FIFO\n"
	        "                        (read until closed, within the start budget), or - for\n"
	        "                        airlock run's own standard input; /dev/null is empty\n"
	        "  --cwd DIR             working directory, relative to /workspace\n"
	        "  --env NAME            pass NAME from this environment (tier 1; repeatable;\n"
	        "                        credentials are refused)\n"
	        "  --tenant ID           tenant id (default: local)\n"
	        "  --policy FILE         the operator's egress policy (YAML; see airlock egress)\n"
	        "  --network             this call's yes to network: with an allowlist --policy,\n"
	        "                        the sandbox reaches its destinations through the egress\n"
	        "                        proxy (HTTP_PROXY/HTTPS_PROXY); nothing else is reachable\n"
	        "  --dns ADDR[:PORT],..  the proxy's resolver (default: /etc/resolv.conf)\n"
	        "  --proxy-log FILE      append the proxy's JSON decision lines here (default: stderr)\n"
	        "  --service ADDRESS     run in an execution service (airlock serve) at unix:PATH\n"
	        "                        or HOST:PORT (TLS) instead of in this process; the\n"
	        "                        service holds the mechanism, the operator's egress\n"
	        "                        policy and the proxy (--network sends the allowlist)\n"
	        "  --credential-file F   the service credential (0600, one token); with --service\n"
	        "  --tls-ca FILE         PEM the service's certificate must chain to (HOST:PORT)\n"
	        "  --tls-cert FILE       client certificate (PEM), when the service asks for one\n"
	        "  --tls-key FILE        its key (PEM)\n"
	        "Without --json: the command's stdout and stderr as they arrive, then one\n"
	        "summary line on stderr. Exit status: the command's own, 137 when it was killed, or one of the\n"
	        "codes in the README.\n");
}

enum {
	OPT_MECHANISM = 256, OPT_CONFIG, OPT_JSON, OPT_CPU, OPT_MEMORY, OPT_PIDS, OPT_WSBYTES,
	OPT_INODES, OPT_TIMEOUT, OPT_OUTPUT, OPT_STDIN, OPT_CWD, OPT_ENV, OPT_TENANT, OPT_HELP,
	OPT_POLICY, OPT_NETWORK, OPT_DNS, OPT_PROXY_LOG, OPT_SERVICE, OPT_CREDENTIAL_FILE, OPT_TLS_CA,
	OPT_TLS_CERT, OPT_TLS_KEY,
};

static const struct option run_options[] = {
	{ "mechanism", required_argument, NULL, OPT_MECHANISM },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "cpu", required_argument, NULL, OPT_CPU },
	{ "memory", required_argument, NULL, OPT_MEMORY },
	{ "pids", required_argument, NULL, OPT_PIDS },
	{ "workspace-bytes", required_argument, NULL, OPT_WSBYTES },
	{ "inodes", required_argument, NULL, OPT_INODES },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "output-limit", required_argument, NULL, OPT_OUTPUT },
	{ "stdin", required_argument, NULL, OPT_STDIN },
	{ "cwd", required_argument, NULL, OPT_CWD },
	{ "env", required_argument, NULL, OPT_ENV },
	{ "tenant", required_argument, NULL, OPT_TENANT },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "policy", required_argument, NULL, OPT_POLICY },
	{ "network", no_argument, NULL, OPT_NETWORK },
	{ "dns", required_argument, NULL, OPT_DNS },
	{ "proxy-log", required_argument, NULL, OPT_PROXY_LOG },
	{ "service", required_argument, NULL, OPT_SERVICE },
	{ "credential-file", required_argument, NULL, OPT_CREDENTIAL_FILE },
	{ "tls-ca", required_argument, NULL, OPT_TLS_CA },
	{ "tls-cert", required_argument, NULL, OPT_TLS_CERT },
	{ "tls-key", required_argument, NULL, OPT_TLS_KEY },
	{ 0 },
};

typedef struct run_flags {
	const char *mechanism, *config, *stdin_file, *cwd, *tenant;
	const char *policy, *dns, *proxy_log;
	const char *service, *credential_file, *tls_ca, *tls_cert, *tls_key;
	bool json, network;
	/* limit overrides, -1 when not given */
	int64_t cpu, memory, pids, wsbytes, inodes, timeout, output;
	const char *env[AIRLOCK_RUN_ENV_FLAGS_MAX];
	size_t n_env;
} run_flags;

/* A positive integer flag, with K/M/G suffixes when bytes is set. */
static int parse_flag(const char *flag, const char *value, bool bytes, int64_t *ret)
{
	airlock_error err = { 0 };
	int64_t v = 0;
	if (bytes) {
		if (airlock_parse_bytes(value, flag, &v, &err) < 0) {
			fprintf(stderr, "airlock run: %s\n", err.message);
			return -1;
		}
	} else if (!util_parse_i64(value, &v)) {
		fprintf(stderr, "airlock run: %s %s: not an integer\n", flag, value);
		return -1;
	}
	if (v <= 0) {
		fprintf(stderr, "airlock run: %s %s: must be positive\n", flag, value);
		return -1;
	}
	*ret = v;
	return 0;
}

static void stdin_error(const char *path, const char *why)
{
	fputs("airlock run: --stdin ", stderr);
	cli_fputs_escaped(stderr, path);
	fprintf(stderr, ": %s\n", why);
}

/* Apply the flags over the settings' defaults. The operator's ceilings are
 * checked where every caller meets them: provision rejects a limit above
 * its ceiling, naming the field. */
static void build_limits(const airlock_settings *s, const run_flags *f, airlock_resource_limits *ret)
{
	airlock_resource_limits l = s->defaults.limits;
	const struct {
		int64_t given;
		int64_t *field;
	} rows[] = {
		{ f->cpu, &l.cpu_millicores },     { f->memory, &l.memory_bytes },
		{ f->pids, &l.pids_max },          { f->wsbytes, &l.workspace_bytes },
		{ f->inodes, &l.inodes_max },      { f->timeout, &l.wall_clock_seconds },
	};
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
		if (rows[i].given > 0)
			*rows[i].field = rows[i].given;
	*ret = l;
}

static void print_summary(const airlock_execution_result *res, const char *mechanism)
{
	char what[64];
	if (res->has_exit_code)
		snprintf(what, sizeof(what), "exit %d", res->exit_code);
	else
		snprintf(what, sizeof(what), "killed: %s", airlock_kill_reason_name(res->killed_by));
	fprintf(stderr, "airlock: %s · %lld ms · %zu file%s changed%s%s%s%s\n", what,
	        (long long)res->duration_ms, res->n_files_changed,
	        res->n_files_changed == 1 ? "" : "s",
	        res->files_changed_truncated ? " (listing truncated)" : "",
	        res->stdout_truncated ? " · stdout truncated" : "",
	        res->stderr_truncated ? " · stderr truncated" : "",
	        strcmp(mechanism, "fake") == 0 ? " · fake mechanism: nothing was executed" : "");
	/* The names are the sandbox's: a name made of terminal controls must
	 * not rewrite the line above (the real exit status) or fake one. */
	for (size_t i = 0; i < res->n_files_changed; i++) {
		const char *path = res->files_changed[i].path;
		fprintf(stderr, "airlock:   %-8s ",
		        airlock_change_kind_name(res->files_changed[i].change));
		airlock_fput_escaped(stderr, path, strlen(path), true);
		fprintf(stderr, " (%lld bytes)\n", (long long)res->files_changed[i].size_bytes);
	}
}

/* ---- signals ---------------------------------------------------------------
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT are blocked from the start and read from a
 * signalfd by a thread of their own, so they arrive as events rather than
 * killing the process between two steps: the watcher asks the execution
 * service to stop (the command in flight ends with SERVICE_SHUTDOWN and its
 * partial output), and the main thread prints that result and destroys the
 * sandbox as on every other path. The mask is reset in every process the
 * service starts, so the command never inherits it. */
typedef struct run_signals {
	int sfd, stop_efd;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	airlock_exec *exec; /* set while it may be shut down; under lock */
	int signo;          /* the first signal received; under lock */
} run_signals;

static void *signal_watch(void *arg)
{
	run_signals *rs = arg;
	for (;;) {
		struct pollfd p[2] = { { .fd = rs->sfd, .events = POLLIN },
			               { .fd = rs->stop_efd, .events = POLLIN } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		struct signalfd_siginfo si;
		if (!(p[0].revents & POLLIN) || read(rs->sfd, &si, sizeof(si)) != sizeof(si))
			continue;
		pthread_mutex_lock(&rs->lock);
		bool first = rs->signo == 0;
		if (first)
			rs->signo = (int)si.ssi_signo;
		if (rs->exec)
			airlock_exec_shutdown(rs->exec);
		pthread_mutex_unlock(&rs->lock);
		if (first)
			fprintf(stderr, "airlock run: %s: ending the command (SERVICE_SHUTDOWN) and "
			                "destroying the sandbox\n", strsignal((int)si.ssi_signo));
	}
}

static int signals_start(run_signals *rs)
{
	*rs = (run_signals){ .sfd = -1, .stop_efd = -1 };
	pthread_mutex_init(&rs->lock, NULL);
	/* SIGQUIT too: the quit key would kill us with no result. A signal
	 * whose disposition is SIG_IGN when we start (SIGHUP under nohup,
	 * SIGINT in a shell's background job) stays ignored: blocking it would
	 * queue it for the signalfd, which the caller asked not to happen. */
	static const int watched[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < ARRAY_SIZE(watched); i++) {
		struct sigaction cur;
		if (sigaction(watched[i], NULL, &cur) == 0 && cur.sa_handler == SIG_IGN)
			continue;
		sigaddset(&set, watched[i]);
	}
	/* Blocked before any thread exists, so every thread inherits it and
	 * none is chosen to die of a signal instead of the watcher reading it. */
	int e = pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (e != 0) {
		errno = e; /* the pthread calls return their error, errno is left alone */
		return -1;
	}
	rs->sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	rs->stop_efd = eventfd(0, EFD_CLOEXEC);
	if (rs->sfd < 0 || rs->stop_efd < 0)
		return -1;
	return 0;
}

/* The watcher itself, started once the egress proxy (a fork of this
 * process, until it is an executable of its own) exists: a fork taken
 * while another thread runs can hand the child a lock that thread held
 * (seen under ASan: the proxy's first thread hung). A signal that comes
 * before it waits, blocked, and is read first. */
static int signals_run(run_signals *rs)
{
	int e = pthread_create(&rs->thread, NULL, signal_watch, rs);
	if (e != 0) {
		errno = e;
		return -1;
	}
	rs->started = true;
	return 0;
}

/* Arm (exec) or disarm (NULL) the shutdown; a signal that came before the
 * service existed stops it at once. */
static void signals_set_exec(run_signals *rs, airlock_exec *exec)
{
	pthread_mutex_lock(&rs->lock);
	rs->exec = exec;
	if (exec && rs->signo)
		airlock_exec_shutdown(exec);
	pthread_mutex_unlock(&rs->lock);
}

static int signals_received(run_signals *rs)
{
	pthread_mutex_lock(&rs->lock);
	int s = rs->signo;
	pthread_mutex_unlock(&rs->lock);
	return s;
}

/* The mask stays blocked: a signal after this is not acted on, and the
 * process is about to exit with the status already decided. */
static void signals_stop(run_signals *rs)
{
	if (rs->started) {
		uint64_t one = 1;
		ssize_t w = write(rs->stop_efd, &one, sizeof(one));
		(void)w;
		pthread_join(rs->thread, NULL);
	}
	if (rs->sfd >= 0)
		close(rs->sfd);
	if (rs->stop_efd >= 0)
		close(rs->stop_efd);
	pthread_mutex_destroy(&rs->lock);
}

/* ---- --stdin ---------------------------------------------------------------- */

/* The outcome of reading --stdin. */
typedef enum stdin_read {
	STDIN_READ_OK,
	STDIN_READ_REFUSED, /* said on stderr: the input cannot be used */
	STDIN_READ_SIGNAL,  /* a watched signal came while waiting (rs->signo) */
} stdin_read;

/* Read a pipe or a FIFO until every writer has closed it, within
 * deadline_ms (monotonic) and the stdin cap, or until one of the watched
 * signals arrives on sfd. The writer is another program: it may never close
 * (`sleep inf | airlock run ...`), so nothing here blocks without a bound.
 * poll says when the pipe has bytes or has lost its writers; a FIFO opened
 * before its writer does not report the hang-up of a writer it never had
 * (the kernel suppresses it), so a FIFO nobody has opened yet is waited on,
 * not taken as empty. Each read is non-blocking per call (RWF_NOWAIT), so a
 * reader that shares our stdin and takes the bytes first cannot make it
 * block, and the description we share with the shell is left as it is.
 * Returns 0, -EFBIG past the cap, -ETIME past the deadline, -EINTR for a
 * signal, or -errno. */
static int read_pipe_capped(int fd, int sfd, int64_t deadline_ms, unsigned char **ret,
                            size_t *ret_len)
{
	util_buf b;
	util_buf_init(&b, AIRLOCK_RUN_STDIN_MAX);
	char chunk[65536];
	bool nowait = true;
	int r = 0;
	for (;;) {
		int64_t left = deadline_ms - util_monotonic_ms();
		if (left <= 0) {
			r = -ETIME;
			break;
		}
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
		int n = poll(p, sfd >= 0 ? 2 : 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0)
			continue; /* the deadline, checked above */
		if (sfd >= 0 && (p[1].revents & POLLIN)) {
			r = -EINTR;
			break;
		}
		if (p[0].revents & POLLNVAL) {
			r = -EBADF;
			break;
		}
		if (!p[0].revents)
			continue;
		struct iovec iov = { .iov_base = chunk, .iov_len = sizeof(chunk) };
		ssize_t got = nowait ? preadv2(fd, &iov, 1, -1, RWF_NOWAIT) : -1;
		if (nowait && got < 0 && errno == EOPNOTSUPP)
			nowait = false;
		/* Without RWF_NOWAIT (a kernel whose pipes lack it) the read
		 * follows a poll that saw bytes or the hang-up: it returns at
		 * once unless another reader of the same pipe took them. */
		if (!nowait)
			got = read(fd, chunk, sizeof(chunk));
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (got < 0) {
			r = -errno;
			break;
		}
		if (got == 0)
			break; /* poll saw the hang-up: no writer is left */
		int a = util_buf_append(&b, chunk, (size_t)got);
		if (a != 0) {
			r = a > 0 ? -EFBIG : a;
			break;
		}
	}
	if (r < 0) {
		util_buf_clear(&b);
		return r;
	}
	size_t len = 0;
	unsigned char *data = util_buf_steal(&b, &len);
	if (!data)
		return -ENOMEM;
	*ret = data;
	*ret_len = len;
	return 0;
}

/* --stdin PATH, or - for airlock run's own standard input: a regular file
 * (its end is known: read whole) or a pipe or FIFO (`producer | airlock run
 * --stdin - ...`, `--stdin <(producer)`, a named FIFO), read until its
 * writers close it. Either way the cap is AIRLOCK_RUN_STDIN_MAX, and more is
 * refused, never cut: a command given part of its input would run on
 * something nobody wrote. A pipe must close within the start budget
 * (budget_s, limits.defaults.start_budget_seconds): the input is read
 * before any sandbox exists, and a writer that never closes is an error
 * naming the budget rather than an airlock run that waits forever. The
 * null device (`--stdin /dev/null`, `--stdin - </dev/null`) is an empty
 * input: it is known by its device number (1:3 on Linux), not its name,
 * so no other device passes for it. Any other device, a directory, a
 * terminal or a socket is refused. The open is non-blocking, so a FIFO
 * with no writer does not hang the open itself. */
static stdin_read read_stdin(const char *path, int64_t budget_s, run_signals *rs,
                             unsigned char **ret, size_t *ret_len)
{
	bool own_stdin = strcmp(path, "-") == 0;
	_cleanup_close_ int opened = -1;
	if (!own_stdin) {
		opened = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		if (opened < 0) {
			stdin_error(path, strerror(errno));
			return STDIN_READ_REFUSED;
		}
	}
	int fd = own_stdin ? STDIN_FILENO : opened;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		stdin_error(path, strerror(errno));
		return STDIN_READ_REFUSED;
	}
	int r;
	if (S_ISREG(st.st_mode)) {
		char *data = NULL;
		r = util_read_capped(fd, AIRLOCK_RUN_STDIN_MAX, &data, ret_len);
		if (r == 0)
			*ret = (unsigned char *)data;
	} else if (S_ISFIFO(st.st_mode)) {
		r = read_pipe_capped(fd, rs->sfd, util_monotonic_ms() + budget_s * 1000, ret, ret_len);
	} else if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) {
		*ret = calloc(1, 1);
		*ret_len = 0;
		r = *ret ? 0 : -ENOMEM;
	} else {
		stdin_error(path, S_ISDIR(st.st_mode) ? "a directory, not a regular file or a pipe"
		                  : isatty(fd)         ? "a terminal, not a regular file or a pipe"
		                                       : "not a regular file or a pipe (a device or a socket)");
		return STDIN_READ_REFUSED;
	}
	if (r == -EINTR) {
		struct signalfd_siginfo si;
		if (read(rs->sfd, &si, sizeof(si)) == sizeof(si)) {
			pthread_mutex_lock(&rs->lock);
			if (rs->signo == 0)
				rs->signo = (int)si.ssi_signo;
			pthread_mutex_unlock(&rs->lock);
		}
		return STDIN_READ_SIGNAL;
	}
	if (r == -ETIME) {
		char why[192];
		snprintf(why, sizeof(why),
		         "the pipe was not closed within the start budget of %lld s "
		         "(limits.defaults.start_budget_seconds): its writer must finish first",
		         (long long)budget_s);
		stdin_error(path, why);
		return STDIN_READ_REFUSED;
	}
	if (r < 0) {
		stdin_error(path, r == -EFBIG ? "larger than the 16 MiB cap" : strerror(-r));
		return STDIN_READ_REFUSED;
	}
	return STDIN_READ_OK;
}

/* ---- the service ------------------------------------------------------------
 * With --service the adapter is the remote one: every step below (the
 * validation, the spec, the result, the exit codes, the signals) is the
 * same; only who runs the sandbox differs. The service's mechanism is
 * asked first (its health): the image a spec names depends on it, and an
 * unreachable service is reported before anything else is built. */
static int open_service(const run_flags *f, airlock_settings *s, airlock_exec **ret,
                        airlock_error *err)
{
	unsigned char *cred = NULL;
	size_t cred_len = 0;
	int r = airlock_credential_file_read(f->credential_file, &cred, &cred_len, err);
	if (r < 0)
		return r;
	int64_t budget = s->ceilings.start_budget_seconds > 0 ? s->ceilings.start_budget_seconds
	                                                      : s->defaults.start_budget_seconds;
	airlock_remote_config rc = { .address = f->service, .credential = cred,
		                     .credential_len = cred_len, .tls_ca_file = f->tls_ca,
		                     .tls_cert_file = f->tls_cert, .tls_key_file = f->tls_key,
		                     .start_budget_seconds = budget };
	airlock_remote *rm = NULL;
	r = airlock_remote_new(&rc, &rm, err);
	/* The adapter holds its own copy; this one goes now. */
	explicit_bzero(cred, cred_len);
	free(cred);
	if (r < 0)
		return r;
	airlock_remote_status st;
	r = airlock_remote_health(rm, &st, err);
	if (r == 0 && st.shutting_down)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "the execution service at %s is shutting down; retry later",
		                      f->service);
	airlock_mechanism m = r == 0 ? airlock_mechanism_parse(st.mechanism) : AIRLOCK_MECHANISM_INVALID;
	if (r == 0 && m == AIRLOCK_MECHANISM_INVALID)
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                      "the execution service at %s runs a mechanism this client does "
		                      "not know (%.32s)",
		                      f->service, st.mechanism);
	if (r < 0) {
		airlock_remote_ops()->free(rm);
		return r;
	}
	s->mechanism = m;
	/* This side's core checks every handle and applies the same numbers
	 * as the service's. */
	airlock_exec_config cfg;
	airlock_exec_config_from_settings(s, &cfg);
	return airlock_exec_new(airlock_remote_ops(), rm, &cfg, ret, err);
}

/* Output as it arrives: without --json the command's bytes are written as
 * the observer receives them, the same bytes the result holds. A stream
 * whose reader went away is not written again (its error is kept). */
typedef struct run_output {
	int out_r, err_r;
} run_output;

static void run_on_output(void *arg, airlock_output_stream stream, const void *data, size_t len)
{
	run_output *o = arg;
	bool out = stream == AIRLOCK_OUTPUT_STDOUT;
	int *r = out ? &o->out_r : &o->err_r;
	if (*r == 0)
		*r = util_write_all(out ? STDOUT_FILENO : STDERR_FILENO, data, len);
}

static int run_parse(int argc, char **argv, run_flags *f, int *ret_first_arg)
{
	*f = (run_flags){ .cpu = -1, .memory = -1, .pids = -1, .wsbytes = -1, .inodes = -1,
		          .timeout = -1, .output = -1, .tenant = "local" };
	optind = 1;
	opterr = 1;
	int c;
	while ((c = getopt_long(argc, argv, "+h", run_options, NULL)) != -1) {
		int r = 0;
		switch (c) {
		case OPT_MECHANISM: f->mechanism = optarg; break;
		case OPT_CONFIG: f->config = optarg; break;
		case OPT_JSON: f->json = true; break;
		case OPT_CPU: r = parse_flag("--cpu", optarg, false, &f->cpu); break;
		case OPT_MEMORY: r = parse_flag("--memory", optarg, true, &f->memory); break;
		case OPT_PIDS: r = parse_flag("--pids", optarg, false, &f->pids); break;
		case OPT_WSBYTES: r = parse_flag("--workspace-bytes", optarg, true, &f->wsbytes); break;
		case OPT_INODES: r = parse_flag("--inodes", optarg, false, &f->inodes); break;
		case OPT_TIMEOUT: r = parse_flag("--timeout", optarg, false, &f->timeout); break;
		case OPT_OUTPUT: r = parse_flag("--output-limit", optarg, true, &f->output); break;
		case OPT_STDIN: f->stdin_file = optarg; break;
		case OPT_CWD: f->cwd = optarg; break;
		case OPT_TENANT: f->tenant = optarg; break;
		case OPT_POLICY: f->policy = optarg; break;
		case OPT_NETWORK: f->network = true; break;
		case OPT_DNS: f->dns = optarg; break;
		case OPT_PROXY_LOG: f->proxy_log = optarg; break;
		case OPT_SERVICE: f->service = optarg; break;
		case OPT_CREDENTIAL_FILE: f->credential_file = optarg; break;
		case OPT_TLS_CA: f->tls_ca = optarg; break;
		case OPT_TLS_CERT: f->tls_cert = optarg; break;
		case OPT_TLS_KEY: f->tls_key = optarg; break;
		case OPT_ENV:
			if (f->n_env == AIRLOCK_RUN_ENV_FLAGS_MAX) {
				fprintf(stderr, "airlock run: more than %d --env flags\n", AIRLOCK_RUN_ENV_FLAGS_MAX);
				return CLI_EXIT_USAGE;
			}
			f->env[f->n_env++] = optarg;
			break;
		case OPT_HELP:
		case 'h':
			run_usage(stdout);
			return 0;
		default:
			run_usage(stderr);
			return CLI_EXIT_USAGE;
		}
		if (r < 0)
			return CLI_EXIT_USAGE;
	}
	/* The floors and the ceiling every door checks (types.h), said here
	 * with the flag's name; a spec from elsewhere meets the same numbers
	 * in the port. */
	if (f->memory > 0 && f->memory < AIRLOCK_LIMIT_MEMORY_BYTES_MIN) {
		fprintf(stderr, "airlock run: --memory %lld: below the minimum of 8M (%lld bytes) a "
		                "sandbox needs to start\n",
		        (long long)f->memory, (long long)AIRLOCK_LIMIT_MEMORY_BYTES_MIN);
		return CLI_EXIT_USAGE;
	}
	if (f->pids > 0 && f->pids < AIRLOCK_LIMIT_PIDS_MIN) {
		fprintf(stderr, "airlock run: --pids %lld: below the minimum of %lld (init, the command "
		                "starter and the command need one each)\n",
		        (long long)f->pids, (long long)AIRLOCK_LIMIT_PIDS_MIN);
		return CLI_EXIT_USAGE;
	}
	if (f->output > AIRLOCK_OUTPUT_BYTES_MAX) {
		fprintf(stderr, "airlock run: --output-limit %lld: above the ceiling of 16M (%lld bytes) "
		                "per stream\n",
		        (long long)f->output, (long long)AIRLOCK_OUTPUT_BYTES_MAX);
		return CLI_EXIT_USAGE;
	}
	if (optind >= argc) {
		fprintf(stderr, "airlock run: no command: give it after --, e.g. airlock run -- python3 -c 'print(1)'\n");
		return CLI_EXIT_USAGE;
	}
	if (f->network && !f->policy) {
		fprintf(stderr, "airlock run: --network needs --policy FILE: egress is denied by default, "
		                "and the destinations are the operator's allowlist\n");
		return CLI_EXIT_USAGE;
	}
	if ((f->dns || f->proxy_log) && !f->network) {
		fprintf(stderr, "airlock run: --dns and --proxy-log configure the egress proxy, which "
		                "runs only with --network\n");
		return CLI_EXIT_USAGE;
	}
	if (f->service && !f->credential_file) {
		fprintf(stderr, "airlock run: --service needs --credential-file FILE: every call to "
		                "the service carries its credential\n");
		return CLI_EXIT_USAGE;
	}
	if (!f->service && (f->credential_file || f->tls_ca || f->tls_cert || f->tls_key)) {
		fprintf(stderr, "airlock run: --credential-file and --tls-* are for --service\n");
		return CLI_EXIT_USAGE;
	}
	/* The service runs its own mechanism and its own proxy. */
	if (!f->tls_cert != !f->tls_key) {
		fprintf(stderr, "airlock run: --tls-cert and --tls-key go together\n");
		return CLI_EXIT_USAGE;
	}
	if (f->service && f->mechanism) {
		fprintf(stderr, "airlock run: --mechanism is the service's with --service\n");
		return CLI_EXIT_USAGE;
	}
	if (f->service && (f->dns || f->proxy_log)) {
		fprintf(stderr, "airlock run: --dns and --proxy-log configure a local egress proxy; "
		                "with --service the service holds the proxy\n");
		return CLI_EXIT_USAGE;
	}
	*ret_first_arg = optind;
	return -1; /* go on */
}

int cli_run(int argc, char **argv)
{
	run_flags f;
	int first = 0;
	int pr = run_parse(argc, argv, &f, &first);
	if (pr >= 0)
		return pr;

	airlock_error err = { 0 };
	airlock_settings s = { 0 };
	airlock_exec *exec = NULL;
	airlock_environment_spec spec = { 0 };
	airlock_environment_handle handle = { 0 };
	airlock_execution_result res = { 0 };
	unsigned char *stdin_data = NULL;
	size_t stdin_len = 0;
	bool provisioned = false, destroy_failed = false;
	int exit_code = CLI_EXIT_SOFTWARE;
	airlock_egress_policy policy = { .mode = AIRLOCK_EGRESS_DENY };
	airlock_proxy *proxy = NULL;
	_cleanup_close_ int proxy_log = -1;
	run_signals sig;
	int r;

	if (signals_start(&sig) < 0) {
		fprintf(stderr, "airlock run: cannot watch for signals: %s\n", strerror(errno));
		signals_stop(&sig);
		return CLI_EXIT_SOFTWARE;
	}
	r = cli_load_settings(f.config, f.mechanism, &s, &err);
	if (r < 0)
		goto fail;
	if (f.stdin_file) {
		stdin_read sr = read_stdin(f.stdin_file, s.defaults.start_budget_seconds, &sig,
		                           &stdin_data, &stdin_len);
		if (sr != STDIN_READ_OK) {
			/* A signal: 128 + it, below; before any sandbox. */
			exit_code = sr == STDIN_READ_SIGNAL ? CLI_EXIT_OK : CLI_EXIT_USAGE;
			goto out;
		}
	}

	/* The operator's yes: the policy file. The call's yes: --network. Only
	 * both together start a proxy and give the sandbox its allowlist. */
	if (f.policy) {
		r = airlock_egress_policy_load(f.policy, &policy, &err);
		if (r < 0)
			goto fail;
	}
	bool egress = f.network && policy.mode == AIRLOCK_EGRESS_ALLOWLIST;
	if (f.network && !egress) {
		fputs("airlock: ", stderr);
		cli_fputs_escaped(stderr, f.policy);
		fputs(" is mode deny: the sandbox has no network\n", stderr);
	}
	else if (f.policy && !f.network && policy.mode == AIRLOCK_EGRESS_ALLOWLIST)
		fprintf(stderr, "airlock: without --network the sandbox has no network "
		                "(the policy's destinations need both yeses)\n");
	if (egress && !f.service) {
		if (f.proxy_log) {
			proxy_log = open(f.proxy_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
			if (proxy_log < 0) {
				r = airlock_error_set(&err, AIRLOCK_ERR_CONFIG, errno, "--proxy-log %s",
				                      f.proxy_log);
				goto fail;
			}
		}
		/* A bad --dns is found here, before any sandbox exists. */
		r = cli_proxy_start(f.dns, proxy_log, &proxy, &err);
		if (r < 0)
			goto fail;
	}
	if (signals_run(&sig) < 0) {
		fprintf(stderr, "airlock run: cannot watch for signals: %s\n", strerror(errno));
		goto out;
	}

	/* The mechanism first: one this build cannot run says so before anything
	 * else is asked of the user. */
	airlock_exec_egress ee = { .policy = &policy, .proxy = proxy };
	if (f.service)
		r = open_service(&f, &s, &exec, &err);
	else
		r = airlock_exec_open_egress(&s, egress ? &ee : NULL, &exec, &err);
	if (r < 0)
		goto fail;
	signals_set_exec(&sig, exec);

	/* The command is validated before anything is provisioned, as the
	 * specification orders: a bad vector or an escaping working directory
	 * never costs a sandbox. */
	const char *cwd = f.cwd ? f.cwd : ".";
	airlock_run_command_request req = {
		.argv = argv + first,
		.argc = (size_t)(argc - first),
		.working_directory = cwd,
		.timeout_seconds = f.timeout,
		.has_stdin = stdin_data != NULL,
		.stdin_data = stdin_data,
		.stdin_len = stdin_len,
		.maximum_output_bytes = f.output,
	};
	airlock_execution_command cmd;
	r = airlock_run_command_prepare(&req, &s, &cmd, &err);
	if (r < 0)
		goto fail;

	/* The spec the worker would send (airlock_run_command_spec): the
	 * store's default image, which only the CLI can look up (it opens the
	 * store), the limits with the flags over the settings', the allowlist
	 * only with --network, and the names --env adds to tier 1. */
	char default_image[72] = { 0 };
	if (!s.image && airlock_mechanism_runs_store_images(s.mechanism) &&
	    s.deployment_mode != AIRLOCK_DEPLOYMENT_PRODUCTION) {
		r = cli_default_image(&s, default_image, &err);
		if (r < 0)
			goto fail;
	}
	/* The names --env gave, checked on their own first: a refusal names
	 * the flag, not the settings' list it joins. */
	r = airlock_tier1_check(f.env, f.n_env, &err);
	if (r < 0) {
		airlock_error_prefix(&err, "--env: ");
		goto fail;
	}
	airlock_resource_limits limits;
	build_limits(&s, &f, &limits);
	airlock_run_command_spec_input sin = {
		.settings = &s,
		.tenant_id = f.tenant,
		.store_default = default_image[0] ? default_image : NULL,
		.egress = egress ? &policy : NULL,
		.limits = &limits,
		.extra_tier1 = f.env,
		.n_extra_tier1 = f.n_env,
		.parent = environ,
		.working_directory = cwd,
	};
	int64_t inodes_asked = 0;
	r = airlock_run_command_spec(&sin, &spec, &inodes_asked, &err);
	if (r < 0)
		goto fail;
	/* A limit is a maximum: the spec says what is provisioned, and so does
	 * this line. */
	if (inodes_asked)
		fprintf(stderr, "airlock: a %lld-byte workspace holds %lld inodes: provisioning "
		                "inodes_max=%lld (asked %lld)\n",
		        (long long)spec.limits.workspace_bytes, (long long)spec.limits.inodes_max,
		        (long long)spec.limits.inodes_max, (long long)inodes_asked);

	if (signals_received(&sig)) {
		exit_code = CLI_EXIT_OK; /* replaced by 128 + signal below */
		goto out;                /* before any sandbox: nothing to clean up */
	}
	r = airlock_exec_provision(exec, &spec, &handle, &err);
	if (r < 0)
		goto fail;
	provisioned = true;
	if (signals_received(&sig)) {
		exit_code = CLI_EXIT_OK; /* replaced by 128 + signal below */
		goto out;                /* the command never started; the sandbox goes below */
	}

	if (cmd.timeout_seconds > AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS &&
	    f.timeout > AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS)
		fprintf(stderr, "airlock: --timeout %lld is clamped to sandbox.run_command's %d s\n",
		        (long long)f.timeout, AIRLOCK_RUN_COMMAND_TIMEOUT_SECONDS);
	run_output shown = { 0 };
	airlock_exec_call call = { .tenant_id = spec.tenant_id,
		                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE,
		                   .on_output = f.json ? NULL : run_on_output, .output_arg = &shown };
	fflush(stdout);
	r = airlock_exec_execute(exec, &call, &handle, &cmd, &res, &err);
	if (r < 0)
		goto fail;

	/* A reader that goes away (airlock run ... | head) is not a reason to
	 * die: SIGPIPE is ignored (main), the failed write stops the output,
	 * the sandbox is still destroyed below, and the status says so. */
	int out_r = 0, err_r = 0;
	if (f.json) {
		_cleanup_free_ char *json = airlock_result_to_tool_json(&res, &err);
		if (!json) {
			r = err.cls ? airlock_errcode(err.cls) : -ENOMEM;
			goto fail;
		}
		size_t jl = strlen(json);
		json[jl] = '\n'; /* written with its newline, in place of the NUL */
		fflush(stdout);
		out_r = util_write_all(STDOUT_FILENO, json, jl + 1);
		json[jl] = 0;
	} else {
		/* The bytes went out as they arrived (run_on_output); the
		 * summary stays last. */
		out_r = shown.out_r;
		err_r = shown.err_r;
		/* With --service the mechanism is the service's (its health
		 * named it); airlock_exec_name would say "remote". */
		print_summary(&res, f.service ? airlock_mechanism_name(s.mechanism)
		                              : airlock_exec_name(exec));
	}
	exit_code = res.has_exit_code ? (res.exit_code & 0xff) : CLI_EXIT_KILLED;
	/* stderr is unbuffered: a failed fprintf shows only in its error flag. */
	if (out_r < 0 || err_r < 0 || fflush(stderr) != 0 || ferror(stderr)) {
		fprintf(stderr, "airlock run: %s: %s: the result was not fully printed "
		                "(the sandbox is destroyed)\n",
		        out_r < 0 ? "stdout" : "stderr", strerror(out_r < 0 ? -out_r : err_r < 0 ? -err_r : EIO));
		exit_code = CLI_EXIT_IOERR;
	}
	goto out;
fail:
	cli_error("run", &err);
	exit_code = cli_exit_for(&err);
out:
	if (provisioned) {
		airlock_error derr = { 0 };
		if (airlock_exec_destroy(exec, &handle, &derr) < 0) {
			cli_error("run: destroy", &derr);
			exit_code = cli_exit_for(&derr);
			destroy_failed = true;
		}
	}
	signals_set_exec(&sig, NULL);
	airlock_exec_free(exec);
	/* After the sandboxes: each detached from the proxy as it went. */
	airlock_proxy_free(proxy);
	airlock_egress_policy_clear(&policy);
	airlock_execution_result_clear(&res);
	airlock_environment_handle_clear(&handle);
	airlock_environment_spec_clear(&spec);
	airlock_settings_clear(&s);
	free(stdin_data);
	int signo = signals_received(&sig);
	signals_stop(&sig);
	if (signo) {
		/* The shell's convention for a process ended by a signal; the
		 * result (killed: SERVICE_SHUTDOWN) was printed above. A failed
		 * destroy still wins: it is the one that needs attention. */
		if (!destroy_failed)
			exit_code = 128 + signo;
		fprintf(stderr, "airlock run: stopped by %s%s\n", strsignal(signo),
		        !provisioned ? "" : destroy_failed ? "; destroying the sandbox failed (above)"
		                                           : "; the sandbox is destroyed");
	}
	return exit_code;
}
