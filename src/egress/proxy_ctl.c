/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's side of the egress proxy: starting the process and handing
 * it listeners over the control channel (src/egress/proxy_internal.h).
 */
#include "airlock/proxy.h"

#include <errno.h>
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
#include "egress/proxy_internal.h"
#include "util/syscalls.h"
#include "util/util.h"

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

/* ---- frames --------------------------------------------------------------- */

int proxy_frame_send(int sock, const char *body, size_t len, int fd)
{
	if (len > AIRLOCK_PROXY_FRAME_MAX)
		return -EMSGSIZE;
	uint32_t hdr = (uint32_t)len;
	struct iovec iov[2] = {
		{ .iov_base = &hdr, .iov_len = sizeof(hdr) },
		{ .iov_base = (void *)(uintptr_t)body, .iov_len = len },
	};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	size_t total = sizeof(hdr) + len, sent = 0;
	while (sent < total) {
		ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		sent += (size_t)n;
		/* The descriptor went with the first byte; the rest is plain. */
		msg.msg_control = NULL;
		msg.msg_controllen = 0;
		size_t skip = (size_t)n;
		while (msg.msg_iovlen > 0 && skip >= msg.msg_iov[0].iov_len) {
			skip -= msg.msg_iov[0].iov_len;
			msg.msg_iov++;
			msg.msg_iovlen--;
		}
		if (msg.msg_iovlen > 0) {
			msg.msg_iov[0].iov_base = (char *)msg.msg_iov[0].iov_base + skip;
			msg.msg_iov[0].iov_len -= skip;
		}
	}
	return 0;
}

static int wait_readable(int sock, int64_t deadline)
{
	for (;;) {
		int t = -1;
		if (deadline >= 0) {
			int64_t left = deadline - util_monotonic_ms();
			if (left <= 0)
				return -ETIMEDOUT;
			t = left > 60000 ? 60000 : (int)left;
		}
		struct pollfd p = { .fd = sock, .events = POLLIN };
		int r = poll(&p, 1, t);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

/* Read exactly len bytes; the first read may carry a descriptor. */
static int read_full(int sock, void *buf, size_t len, int64_t deadline, int *ret_fd)
{
	size_t got = 0;
	while (got < len) {
		int r = wait_readable(sock, deadline);
		if (r < 0)
			return r;
		struct iovec iov = { .iov_base = (char *)buf + got, .iov_len = len - got };
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
		if (ret_fd) {
			msg.msg_control = u.b;
			msg.msg_controllen = sizeof(u.b);
		}
		ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		if (ret_fd) {
			for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
				if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
				    c->cmsg_len == CMSG_LEN(sizeof(int))) {
					int fd;
					memcpy(&fd, CMSG_DATA(c), sizeof(int));
					if (*ret_fd >= 0)
						close(fd); /* one descriptor per frame */
					else
						*ret_fd = fd;
				}
			if (msg.msg_flags & MSG_CTRUNC)
				return -EPROTO;
		}
		got += (size_t)n;
	}
	return 0;
}

int proxy_frame_recv(int sock, int64_t timeout_ms, char **ret, size_t *ret_len, int *ret_fd)
{
	int64_t deadline = timeout_ms < 0 ? -1 : util_monotonic_ms() + timeout_ms;
	int fd = -1;
	uint32_t hdr;
	int r = read_full(sock, &hdr, sizeof(hdr), deadline, &fd);
	if (r == 0 && hdr > AIRLOCK_PROXY_FRAME_MAX)
		r = -EMSGSIZE;
	if (r == 0 && fd >= 0 && !ret_fd)
		r = -EPROTO;
	char *body = NULL;
	if (r == 0 && !(body = malloc((size_t)hdr + 1)))
		r = -ENOMEM;
	if (r == 0)
		r = read_full(sock, body, hdr, deadline, NULL);
	if (r < 0) {
		free(body);
		if (fd >= 0)
			close(fd);
		return r;
	}
	body[hdr] = '\0';
	*ret = body;
	*ret_len = hdr;
	if (ret_fd)
		*ret_fd = fd;
	return 0;
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
	_cleanup_close_pair_ int sv[2] = { -1, -1 };
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		int e = errno;
		free(p);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "proxy spawn: socketpair");
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		free(p);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "proxy spawn: fork");
	}
	if (pid == 0) {
		close(TAKE_FD(sv[0]));
		proxy_process_main(sv[1], cfg);
	}
	close(TAKE_FD(sv[1]));
	p->pid = pid;
	p->pidfd = sys_pidfd_open(pid, 0);
	p->ctl = TAKE_FD(sv[0]);
	pthread_mutex_init(&p->lock, NULL);
	/* Its own stop waits for checks in flight, each bounded by the
	 * resolver's and the dial's timeouts. */
	p->stop_wait_ms = AIRLOCK_EGRESS_RESOLVE_TIMEOUT_MS + cfg->connect_timeout_ms + 2000;
	/* A send that cannot finish in time is a dead channel, not a service
	 * blocked forever with the lock held. */
	struct timeval tv = { .tv_sec = PROXY_ANSWER_TIMEOUT_MS / 1000 };
	setsockopt(p->ctl, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));

	/* The proxy says hello once it has dropped its privileges and set up
	 * its loop, so a proxy that cannot start fails here, not at the first
	 * sandbox. */
	char *hello = NULL;
	size_t len;
	int r = proxy_frame_recv(p->ctl, PROXY_ANSWER_TIMEOUT_MS, &hello, &len, NULL);
	json_t *o = r == 0 ? json_loadb(hello, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
	bool ok = o && json_is_true(json_object_get(o, "ok"));
	if (!ok) {
		const char *why = o ? json_string_value(json_object_get(o, "error")) : NULL;
		r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, r < 0 ? -r : 0,
		                      "egress proxy did not start: %s",
		                      why ? why : r < 0 ? "no answer" : "bad answer");
		json_decref(o);
		free(hello);
		airlock_proxy_free(p);
		return r;
	}
	json_decref(o);
	free(hello);
	*ret = p;
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
static int ask(airlock_proxy *p, json_t *req, int fd, const char *what, airlock_error *err)
{
	char *body = json_dumps(req, JSON_COMPACT);
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
	json_t *o = json_loadb(answer, len, JSON_REJECT_DUPLICATES, NULL);
	free(answer);
	if (o && json_is_true(json_object_get(o, "ok"))) {
		json_decref(o);
		return 0;
	}
	const char *why = o ? json_string_value(json_object_get(o, "error")) : NULL;
	r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0, "%s: %s", what,
	                      why ? why : "bad answer from the egress proxy");
	json_decref(o);
	return r;
}

static int attach(airlock_proxy *p, int listen_fd, const airlock_proxy_owner *owner,
                  airlock_egress_transport t, const airlock_egress_policy *policy,
                  airlock_error *err)
{
	if (!p || listen_fd < 0 || !owner || !owner->environment_id || !owner->tenant_id ||
	    !owner->run_id)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL, "proxy attach");
	json_t *pol = NULL;
	if (policy) {
		/* The policy travels in the codec every other spec type uses,
		 * which validates it on both ends. */
		char *s = airlock_egress_policy_to_json(policy, err);
		if (!s) {
			airlock_error_prefix(err, "egress proxy attach: ");
			return airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED);
		}
		pol = json_loads(s, 0, NULL);
		free(s);
		if (!pol)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "proxy attach");
	}
	json_t *req = json_pack("{s:s, s:s, s:s, s:s, s:s}", "op", "attach", "run",
	                        owner->run_id, "tenant", owner->tenant_id, "environment",
	                        owner->environment_id, "transport",
	                        airlock_egress_transport_name(t));
	if (!req || (pol && json_object_set_new(req, "policy", pol) < 0)) {
		json_decref(req);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "proxy attach");
	}
	int r = ask(p, req, listen_fd, "egress proxy attach", err);
	json_decref(req);
	return r;
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
	if (!req)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "proxy detach");
	int r = ask(p, req, -1, "egress proxy detach", err);
	json_decref(req);
	return r;
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
