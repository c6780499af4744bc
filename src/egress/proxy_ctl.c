/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's side of the egress proxy: starting the process (a fork that
 * executes the embedded proxy program at once) and handing it listeners
 * over the control channel (src/egress/proxy_internal.h).
 */
#include "airlock/proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "airlock/json.h"
#include "core/json_internal.h"
#include "egress/proxy_internal.h"
#include "util/sealed.h"
#include "util/spawn.h"
#include "util/syscalls.h"
#include "util/util.h"
#include "util/fault.h"

/* The proxy's program, generated at build time (meson.build). */
extern const unsigned char egress_proxy_blob[];
extern const size_t egress_proxy_blob_len;

/* How long the service waits for the proxy to answer a request: it answers
 * from its event loop, which never blocks, so this is only reached when the
 * proxy is wedged or gone. */
#define PROXY_ANSWER_TIMEOUT_MS 10000

struct airlock_proxy {
	pid_t pid;
	int pidfd;            /* readable once the proxy has exited */
	int ctl;
	pthread_mutex_t lock; /* one request and its answer at a time */
	/* A request without its answer (a timeout, a send that failed) leaves
	 * the channel out of step: the next answer read would be this one's.
	 * The proxy is then killed (which closes every listener it holds) and
	 * the handle refuses every later request. */
	bool dead;
	char why[128];
	int64_t stop_wait_ms; /* how long the proxy may take to stop */
};

void airlock_proxy_config_default(airlock_proxy_config *cfg)
{
	*cfg = (airlock_proxy_config){
		.dns_servers = NULL,
		.log_fd = STDERR_FILENO,
		.uid = AIRLOCK_PROXY_UID,
		.gid = AIRLOCK_PROXY_UID,
		.request_timeout_ms = 10000,
		.connect_timeout_ms = 10000,
		.idle_timeout_ms = 300000,
		.total_timeout_ms = 3600000,
		.max_connections = 4096,
		.max_pending = 64,
		.max_connections_per_listener = 256,
		.max_pending_per_listener = 8,
		.accept_rate_per_listener = 100,
		.log_queue_max = 4096,
	};
}

/* ---- the handle ------------------------------------------------------------ */

int airlock_proxy_spawn(const airlock_proxy_config *cfg, airlock_proxy **ret, airlock_error *err)
{
	if (!cfg || !ret || cfg->log_fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "proxy spawn");
	/* One sandbox's share must leave room for the others: a per-sandbox
	 * cap at or above the global one lets one sandbox fill the proxy. */
	if (cfg->max_connections_per_listener < 1 ||
	    cfg->max_connections_per_listener >= cfg->max_connections)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "egress proxy: max_connections_per_listener (%u) must be at "
		                         "least 1 and below max_connections (%u)",
		                         cfg->max_connections_per_listener, cfg->max_connections);
	if (cfg->max_pending_per_listener < 1 || cfg->max_pending_per_listener >= cfg->max_pending)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "egress proxy: max_pending_per_listener (%u) must be at least "
		                         "1 and below max_pending (%u)",
		                         cfg->max_pending_per_listener, cfg->max_pending);
	if (cfg->accept_rate_per_listener < 1)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "egress proxy: accept_rate_per_listener must be at least 1");
	airlock_proxy *p = calloc(1, sizeof(*p));
	if (!p)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "proxy spawn");
	/* Everything the child needs is made before the fork: between fork and
	 * exec a copy of a multithreaded service may only make system calls.
	 * The program from its sealed memfd, so no installed file has to be
	 * trusted to be the proxy (and the library's users, test programs
	 * among them, have no path to one). */
	_cleanup_close_ int prog = UTIL_FAULT_RET(
		"proxy.program",
		util_sealed_exec_memfd("airlock-proxy", egress_proxy_blob, egress_proxy_blob_len));
	if (prog < 0) {
		free(p);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -prog,
		                         "egress proxy: its program needs an executable memfd%s",
		                         prog == -EACCES || prog == -EPERM ?
		                                 ", and vm.memfd_noexec forbids it (set it to 0 or 1)" :
		                                 "");
	}
	_cleanup_free_ char *config = proxy_config_encode(cfg);
	if (!config) {
		free(p);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "proxy spawn");
	}
	_cleanup_close_pair_ int sv[2] = { -1, -1 };
	if (UTIL_FAULT_CALL("proxy.channel", socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) <
	    0) {
		int e = errno;
		free(p);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "proxy spawn: socketpair");
	}
	static char argv0[] = PROXY_EXEC_ARGV0;
	char *const argv[] = { argv0, NULL };
	/* An empty environment: the service's may hold what the proxy must
	 * not (the service refuses secrets in its own, but the proxy needs
	 * none of it either way). */
	char *const envp[] = { NULL };
	/* The control socket on 3, the log on 4, the service's stderr on 2
	 * (a proxy that cannot run says why where the operator reads), stdin
	 * and stdout /dev/null (stdout is the service's lifecycle log), nothing
	 * else (util/spawn.h). */
	const spawn_fd fds[] = { { sv[1], PROXY_EXEC_CTL_FD },
		                 { cfg->log_fd, PROXY_EXEC_LOG_FD },
		                 { STDERR_FILENO, STDERR_FILENO } };
	const spawn_options so = { .exec_fd = prog, .argv = argv, .envp = envp,
		                   .fds = fds, .n_fds = ARRAY_SIZE(fds) };
	spawn_child child;
	spawn_failure sf = { .step = SPAWN_STEP_NONE };
	int sr = UTIL_FAULT_RET("proxy.spawn", spawn_start(&so, &child, &sf));
	if (sr < 0) {
		free(p);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -sr,
		                         "egress proxy did not start: %s", spawn_failure_step(&sf, NULL));
	}
	close(TAKE_FD(sv[1]));
	p->pid = child.pid;
	p->pidfd = child.pidfd;
	p->ctl = TAKE_FD(sv[0]);
	pthread_mutex_init(&p->lock, NULL);
	/* Its own stop waits for checks in flight, each bounded by the
	 * resolver's and the dial's timeouts. */
	p->stop_wait_ms = AIRLOCK_EGRESS_RESOLVE_TIMEOUT_MS + cfg->connect_timeout_ms + 2000;
	/* A send that cannot finish in time is a dead channel, not a service
	 * blocked forever with the lock held. */
	struct timeval tv = { .tv_sec = PROXY_ANSWER_TIMEOUT_MS / 1000 };
	setsockopt(p->ctl, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));

	/* Its configuration, the channel's first frame (proxy_internal.h).
	 * The proxy says hello once it has dropped its privileges and set up
	 * its loop, so a proxy that cannot start fails here, not at the first
	 * sandbox. */
	char *hello = NULL;
	size_t len;
	int r = UTIL_FAULT_RET("proxy.config", proxy_frame_send(p->ctl, config, strlen(config), -1));
	if (r == 0)
		r = UTIL_FAULT_RET("proxy.hello", proxy_frame_recv(p->ctl, PROXY_ANSWER_TIMEOUT_MS,
		                                                   &hello, &len, NULL));
	bool ok = false;
	char why[200] = "";
	airlock_error derr = { 0 };
	int dr = r == 0 ? proxy_answer_decode(hello, len, &ok, why, sizeof(why), &derr) : 0;
	free(hello);
	if (r < 0 || dr < 0 || !ok) {
		r = dr < 0 ? airlock_error_wrap(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, &derr,
		                                "egress proxy did not start")
		           : airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, r < 0 ? -r : 0,
		                               "egress proxy did not start: %s",
		                               why[0] ? why : r < 0 ? "no answer" : "bad answer");
		airlock_proxy_free(p);
		return r;
	}
	*ret = p;
	return 0;
}

typedef struct answer_read {
	bool ok;
	char *why;
	size_t why_size;
} answer_read;

/* Reads the tree, allocates nothing with jansson, keeps no pointer into it. */
static int answer_from(json_t *o, void *arg, airlock_error *err)
{
	(void)err;
	answer_read *a = arg;
	a->ok = json_is_true(json_object_get(o, "ok"));
	json_t *w = json_object_get(o, "error");
	if (json_is_string(w))
		util_escape(a->why, a->why_size, json_string_value(w), json_string_length(w));
	return 0;
}

int proxy_answer_decode(const char *answer, size_t len, bool *ret_ok, char *why, size_t why_size,
                        airlock_error *err)
{
	*ret_ok = false;
	why[0] = 0;
	answer_read a = { .why = why, .why_size = why_size };
	int r = core_json_decode(answer, len, AIRLOCK_PROXY_FRAME_MAX, "the egress proxy's answer",
	                         answer_from, &a, err);
	if (r < 0)
		return r;
	*ret_ok = a.ok;
	return 0;
}

pid_t airlock_proxy_pid(const airlock_proxy *p)
{
	return p ? p->pid : -1;
}

/* Kill the proxy and mark the handle dead. Caller holds the lock. */
static void mark_dead(airlock_proxy *p, const char *why)
{
	if (p->dead)
		return;
	p->dead = true;
	snprintf(p->why, sizeof(p->why), "%s", why);
	if (p->pidfd >= 0)
		sys_pidfd_send_signal(p->pidfd, SIGKILL, NULL, 0);
	else if (p->pid > 0)
		kill(p->pid, SIGKILL);
}

/* One request and its answer. */
static int ask(airlock_proxy *p, char *body, int fd, const char *what, airlock_error *err)
{
	if (!body)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "%s", what);
	pthread_mutex_lock(&p->lock);
	/* A proxy that exited (a crash, a kill) is noticed here, by its pidfd,
	 * and said plainly. */
	struct pollfd pf = { .fd = p->pidfd, .events = POLLIN };
	if (!p->dead && p->pidfd >= 0 && poll(&pf, 1, 0) > 0)
		mark_dead(p, "the egress proxy process exited");
	int r = p->dead ? -EPIPE : proxy_frame_send(p->ctl, body, strlen(body), fd);
	char *answer = NULL;
	size_t len = 0;
	if (r == 0)
		r = proxy_frame_recv(p->ctl, PROXY_ANSWER_TIMEOUT_MS, &answer, &len, NULL);
	if (r < 0)
		mark_dead(p, r == -ETIMEDOUT || r == -EAGAIN ? "the egress proxy stopped answering" :
		                                               "the egress proxy's channel broke");
	char dead_why[sizeof(p->why)];
	snprintf(dead_why, sizeof(dead_why), "%s", p->why);
	pthread_mutex_unlock(&p->lock);
	free(body);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0, "%s: %s", what,
		                         dead_why);
	/* An answer that does not decode (invalid, over its memory budget, or
	 * out of memory) still was one frame: the channel stays in step. */
	bool ok = false;
	char why[200];
	airlock_error derr = { 0 };
	r = proxy_answer_decode(answer, len, &ok, why, sizeof(why), &derr);
	free(answer);
	if (r < 0)
		return airlock_error_wrap(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, &derr, "%s", what);
	if (ok)
		return 0;
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0, "%s: %s", what,
	                         why[0] ? why : "bad answer from the egress proxy");
}

static int attach(airlock_proxy *p, int listen_fd, const airlock_proxy_owner *owner,
                  airlock_egress_transport t, const airlock_egress_policy *policy,
                  airlock_error *err)
{
	if (!p || listen_fd < 0 || !owner || !owner->environment_id || !owner->tenant_id ||
	    !owner->run_id)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "proxy attach");
	_cleanup_free_ char *pol = NULL;
	if (policy) {
		/* The policy travels in the codec every other spec type uses,
		 * which validates it on both ends. */
		pol = airlock_egress_policy_to_json(policy, err);
		if (!pol) {
			airlock_error_prefix(err, "egress proxy attach: ");
			return airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED);
		}
	}
	json_t *req = json_pack("{s:s, s:s, s:s, s:s, s:s}", "op", "attach", "run",
	                        owner->run_id, "tenant", owner->tenant_id, "environment",
	                        owner->environment_id, "transport",
	                        airlock_egress_transport_name(t));
	_cleanup_free_ char *head = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	/* The policy's encoding is spliced in as the last member rather than
	 * parsed back into a tree: the request is {head's members,"policy":P}. */
	char *body = NULL;
	if (head && pol) {
		size_t n = strlen(head);
		if (asprintf(&body, "%.*s,\"policy\":%s}", (int)(n - 1), head, pol) < 0)
			body = NULL;
	} else if (head) {
		body = TAKE_PTR(head);
	}
	return ask(p, body, listen_fd, "egress proxy attach", err);
}

int airlock_proxy_attach(airlock_proxy *p, int listen_fd, const airlock_proxy_owner *owner,
                         const airlock_egress_policy *policy, airlock_error *err)
{
	if (!policy)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "proxy attach");
	return attach(p, listen_fd, owner, AIRLOCK_EGRESS_TRANSPORT_POLICY, policy, err);
}

int airlock_proxy_attach_transport(airlock_proxy *p, int listen_fd,
                                   const airlock_proxy_owner *owner,
                                   airlock_egress_transport transport, airlock_error *err)
{
	if (transport <= AIRLOCK_EGRESS_TRANSPORT_POLICY || transport >= AIRLOCK_EGRESS_TRANSPORT__MAX)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "proxy attach: transport");
	return attach(p, listen_fd, owner, transport, NULL, err);
}

int airlock_proxy_detach(airlock_proxy *p, const char *environment_id, airlock_error *err)
{
	if (!p || !environment_id)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "proxy detach");
	json_t *req = json_pack("{s:s, s:s}", "op", "detach", "environment", environment_id);
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	return ask(p, body, -1, "egress proxy detach", err);
}

bool airlock_proxy_dead(airlock_proxy *p)
{
	pthread_mutex_lock(&p->lock);
	bool dead = p->dead;
	pthread_mutex_unlock(&p->lock);
	return dead;
}

void airlock_proxy_free(airlock_proxy *p)
{
	if (!p)
		return;
	/* Closing the channel is the stop signal: the proxy ends every tunnel,
	 * logs them, and exits. Bounded: it is killed if it does not. */
	if (p->ctl >= 0)
		close(p->ctl);
	if (p->pid > 0) {
		int64_t deadline = util_monotonic_ms() + p->stop_wait_ms;
		for (;;) {
			pid_t w = waitpid(p->pid, NULL, WNOHANG);
			if (w == p->pid || (w < 0 && errno != EINTR))
				break;
			if (util_monotonic_ms() > deadline) {
				util_kill_reapp(&p->pid);
				break;
			}
			usleep(2000);
		}
	}
	if (p->pidfd >= 0)
		close(p->pidfd);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int airlock_proxy_start(const char *dns_servers, int log_fd, airlock_proxy **ret, airlock_error *err)
{
	/* The resolver's servers are checked here, where the message can name
	 * them, not by a proxy that would exit on them. */
	airlock_egress_resolver *check = NULL;
	int r = airlock_egress_resolver_new(dns_servers, &check, err);
	airlock_egress_resolver_free(check);
	if (r < 0)
		return r;
	airlock_proxy_config pc;
	airlock_proxy_config_default(&pc);
	pc.dns_servers = dns_servers;
	if (log_fd >= 0)
		pc.log_fd = log_fd;
	return airlock_proxy_spawn(&pc, ret, err);
}
