/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress proxy's costs beside a direct TCP connection and beside
 * tinyproxy (Debian's package, a small CONNECT-capable proxy), measured side
 * by side in one run:
 *
 *   throughput  bytes through an established tunnel each way (upload:
 *               client -> sink; download: source -> client), 64 KiB writes
 *               and reads, every byte count checked, through a direct
 *               connection, the airlock proxy and tinyproxy;
 *   setup       connect() to the proxy until its "200" response head is
 *               read, p50/p99, beside a direct connect() plus one
 *               request/reply exchange with the sink;
 *   idle        N concurrent idle tunnels through each proxy: the proxy's
 *               resident memory (VmRSS) and open descriptors before and
 *               after, per tunnel;
 *   half-close  whether the sink's reply, sent after the client's FIN,
 *               reaches the client through each proxy.
 *
 * Throughput and setup are interleaved in rounds (the side that goes first
 * rotates), so a burst of noise on the machine lands on every side alike.
 * Times are CLOCK_MONOTONIC. The program prints figures and ratios and
 * asserts no time.
 *
 * Everything happens in two network namespaces this program creates for
 * itself (unshare(CLONE_NEWNET), see bench_namespace); the machine's own is
 * never touched, and
 * only 198.51.100.0/24 is assigned:
 *
 *   198.51.100.2/24       (a second namespace, over a veth pair from
 *                         198.51.100.1 in the first) the bench's servers: 9000 hold (accepts and keeps
 *                         connections open), 9001 sink ("N\n" then N bytes,
 *                         or "-\n" then bytes to EOF; replies the count and
 *                         closes), 9002 source ("N\n": N bytes, then close)
 *   lo 198.51.100.53/32   dnsmasq: sink.example.com A 198.51.100.2
 *   127.0.0.1:<ephemeral> the airlock proxy's listener and tinyproxy's
 *
 * The airlock proxy is given the name sink.example.com and resolves it
 * through dnsmasq on every CONNECT (its one resolution, A and AAAA).
 * tinyproxy would resolve through the machine's /etc/resolv.conf, which
 * this bench does not change, so it is given the numeric 198.51.100.2:
 * per setup the airlock proxy does strictly more work.
 *
 *   bench_proxy [MiB [connects [idle]]]   (default 512 MiB each way per
 *                                          path, 500 setups, 1000 tunnels)
 *   bench_proxy --short                    (8 MiB, 20 setups, 50 tunnels: the
 *                                          test suite's run, which only has
 *                                          to complete; its figures are noise)
 *
 * The airlock proxy runs with its per-sandbox caps lifted for the bench's
 * one listener (connections: the idle tunnels and some; accept rate: none
 * to speak of), so that it measures the proxy's cost and not its limits.
 *
 * Needs root (a network namespace, and tinyproxy's and dnsmasq's sockets in
 * it), ip(8), dnsmasq and tinyproxy; without them it prints why and exits 77
 * (skipped): it never prints a figure it did not measure. Children die with
 * it (PR_SET_PDEATHSIG) and its namespace goes when it exits.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "airlock/egress.h"
#include "airlock/proxy.h"

#include "bench_util.h"

#define BENCH_MIB_DEFAULT 512
#define BENCH_CONNECTS_DEFAULT 500
#define BENCH_IDLE_DEFAULT 1000
#define BENCH_MIB_MAX 65536L
#define BENCH_CONNECTS_MAX 1000000L
#define BENCH_IDLE_MAX 100000L
#define BENCH_TP_ROUNDS 3
#define BENCH_LAT_ROUNDS 10
#define BENCH_WARMUP 5
#define BENCH_WARMUP_BYTES (8u << 20)
#define BENCH_CHUNK 65536
#define BENCH_SKIP 77
/* The aims (issue 23): tunnel throughput at least this much of a direct
 * connection's, each way; CONNECT setup p50 at most this times tinyproxy's
 * while airlock still resolves the name and tinyproxy is given a number. */
#define BENCH_AIM_DIRECT 0.95
#define BENCH_AIM_SETUP 1.2

#define BENCH_SINK_ADDR "198.51.100.2"
#define BENCH_DNS_ADDR "198.51.100.53"
#define BENCH_PROXY_NS_ADDR "198.51.100.1" /* the proxies' end of the veth pair */
#define BENCH_HOST "sink.example.com"
#define BENCH_PORT_HOLD 9000
#define BENCH_PORT_SINK 9001
#define BENCH_PORT_SOURCE 9002

/* Every socket read and write of the bench and its servers is bounded by
 * this, so a wedged proxy ends the run with an error instead of hanging. */
#define BENCH_IO_TIMEOUT_S 30
/* How long the half-close check waits for the sink's reply: it comes at
 * once or not at all. */
#define BENCH_HALF_CLOSE_WAIT_S 5
/* Starting a helper (dnsmasq answering, tinyproxy accepting) and waiting
 * for the hold server to see every tunnel open or closed. */
#define BENCH_READY_MS 10000
#define BENCH_CHILD_EXIT_MS 3000

static const char *const ip_paths[] = { "/usr/sbin/ip", "/sbin/ip", "/bin/ip", NULL };
static const char *const dnsmasq_paths[] = { "/usr/sbin/dnsmasq", "/sbin/dnsmasq", NULL };
static const char *const tinyproxy_paths[] = { "/usr/bin/tinyproxy", "/usr/sbin/tinyproxy",
	                                       NULL };

static const char bench_policy[] = "egress:\n"
                                   "  mode: allowlist\n"
                                   "  destinations:\n"
                                   "    - host: " BENCH_HOST "\n"
                                   "      ports: [9000, 9001, 9002]\n";

enum { P_DIRECT, P_AIRLOCK, P_TINY, P__N };
static const char *const path_names[P__N] = { "direct", "airlock", "tinyproxy" };

enum { D_UP, D_DOWN, D__N };
static const char *const dir_names[D__N] = { "upload", "download" };

/* ---- time and statistics ---------------------------------------------------- */
/* How many of n items round r of rounds takes. */
static uint64_t bench_share(uint64_t n, int r, int rounds)
{
	return n / (uint64_t)rounds + ((uint64_t)r < n % (uint64_t)rounds ? 1 : 0);
}

static double bench_mib_s(uint64_t bytes, int64_t ns)
{
	return ns > 0 ? (double)bytes / 1048576.0 / ((double)ns / 1e9) : 0.0;
}

/* ---- the bench's state --------------------------------------------------------- */

typedef struct bench_server {
	int lfd;
	int stop_fd;
	pthread_t thread;
	bool running;
	atomic_int live; /* the hold server: connections it holds now */
	int max_fd;      /* the hold server: the size of its table */
} bench_server;

typedef struct bench {
	char dir[64]; /* the temporary directory; empty when none */
	char tiny_conf[128], tiny_log[128], dns_log[128];
	pid_t dnsmasq, tinyproxy;
	airlock_proxy *proxy;
	uint16_t airlock_port, tiny_port;
	int stop_r, stop_w;
	bench_server hold, sink, source;
	char *buf; /* the client's 64 KiB buffer */
	const char *ip, *dnsmasq_path, *tinyproxy_path;
	int ns_proxy, ns_servers; /* the two network namespaces (bench_namespace) */
} bench;

/* ---- children ------------------------------------------------------------------ */

static const char *bench_find(const char *const *paths)
{
	for (size_t i = 0; paths[i]; i++)
		if (access(paths[i], X_OK) == 0)
			return paths[i];
	return NULL;
}

static void bench_free_argv(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

/* A writable copy of args for execv, made before fork: nothing is
 * allocated between fork and exec. */
static char **bench_argv(const char *const *args)
{
	size_t n = 0;
	while (args[n])
		n++;
	char **v = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; v && i < n; i++)
		if (!(v[i] = strdup(args[i]))) {
			bench_free_argv(v);
			return NULL;
		}
	return v;
}

/* fork + execv(path, args), stdin from /dev/null, stdout and stderr to
 * out_fd. The child dies with this process (PR_SET_PDEATHSIG) and inherits
 * none of its descriptors, so a crashed bench leaves nothing running and a
 * child's descriptor count is its own. */
static pid_t bench_start(const char *path, const char *const *args, int out_fd)
{
	char **argv = bench_argv(args);
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (!argv || devnull < 0) {
		fprintf(stderr, "bench_proxy: %s: cannot prepare: %s\n", path, strerror(errno));
		bench_free_argv(argv);
		if (devnull >= 0)
			close(devnull);
		return -1;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(127);
		if (dup2(devnull, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)
			_exit(127);
		if (syscall(SYS_close_range, 3U, ~0U, 0) < 0)
			_exit(127);
		/* The bench ignores SIGPIPE; an ignored signal survives exec,
		 * and the helpers should run as they would on their own. */
		signal(SIGPIPE, SIG_DFL);
		execv(path, argv);
		_exit(127);
	}
	int e = errno;
	bench_free_argv(argv);
	close(devnull);
	if (pid < 0)
		fprintf(stderr, "bench_proxy: fork for %s: %s\n", path, strerror(e));
	return pid;
}

/* Wait up to timeout_ms for pid to exit; 0 with its status, -ETIMEDOUT. */
static int bench_wait(pid_t pid, int timeout_ms, int *ret_status)
{
	int64_t deadline = bench_now_ns() + (int64_t)timeout_ms * 1000000;
	for (;;) {
		int status = 0;
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid) {
			if (ret_status)
				*ret_status = status;
			return 0;
		}
		if (w < 0 && errno != EINTR)
			return -errno;
		if (bench_now_ns() > deadline)
			return -ETIMEDOUT;
		usleep(10000);
	}
}

/* End a child of this process: SIGTERM, then SIGKILL if it lingers. */
static void bench_stop_child(pid_t *pid)
{
	if (*pid <= 0)
		return;
	kill(*pid, SIGTERM);
	if (bench_wait(*pid, BENCH_CHILD_EXIT_MS, NULL) == -ETIMEDOUT) {
		kill(*pid, SIGKILL);
		while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	*pid = -1;
}

/* True while pid (a child) has not exited; reaps it when it has. */
static bool bench_alive(pid_t *pid)
{
	if (*pid <= 0)
		return false;
	int status = 0;
	if (waitpid(*pid, &status, WNOHANG) == *pid) {
		fprintf(stderr, "bench_proxy: child %d exited (status %d)\n", (int)*pid, status);
		*pid = -1;
		return false;
	}
	return true;
}

/* Show what a helper said before it failed. */
static void bench_dump(const char *what, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		buf[n] = '\0';
		fprintf(stderr, "bench_proxy: %s said:\n%s\n", what, buf);
	}
}

static int bench_run_ip(bench *b, const char *const *args)
{
	pid_t pid = bench_start(b->ip, args, STDERR_FILENO);
	if (pid < 0)
		return -1;
	int status = 0;
	if (bench_wait(pid, BENCH_READY_MS, &status) < 0) {
		pid_t p = pid;
		bench_stop_child(&p);
		fprintf(stderr, "bench_proxy: ip %s %s: timed out\n", args[1], args[2]);
		return -1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "bench_proxy: ip %s %s %s: failed (status %d)\n", args[1], args[2],
		        args[3] ? args[3] : "", status);
		return -1;
	}
	return 0;
}

/* ---- sockets ------------------------------------------------------------------- */

static void bench_timeouts(int fd, int secs)
{
	struct timeval tv = { .tv_sec = secs };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static void bench_sockaddr(struct sockaddr_in *sa, const char *addr, uint16_t port)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	inet_pton(AF_INET, addr, &sa->sin_addr);
}

/* A blocking client socket whose connect, reads and writes are bounded
 * (SO_SNDTIMEO bounds connect on Linux). */
static int bench_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "bench_proxy: socket: %s\n", strerror(errno));
		return -1;
	}
	bench_timeouts(fd, BENCH_IO_TIMEOUT_S);
	return fd;
}

static int bench_connect(int fd, const char *addr, uint16_t port)
{
	struct sockaddr_in sa;
	bench_sockaddr(&sa, addr, port);
	while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno == EINTR)
			continue;
		fprintf(stderr, "bench_proxy: connect %s:%u: %s\n", addr, port, strerror(errno));
		return -1;
	}
	return 0;
}

static int bench_listen(const char *addr, uint16_t port, uint16_t *ret_port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	struct sockaddr_in sa;
	bench_sockaddr(&sa, addr, port);
	socklen_t sl = sizeof(sa);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4096) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		fprintf(stderr, "bench_proxy: listen %s:%u: %s\n", addr, port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (ret_port)
		*ret_port = ntohs(sa.sin_port);
	return fd;
}

static int bench_write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read until a '\n' arrives (within the first 32 bytes). *ret_got is every
 * byte read (the line and whatever followed it), *ret_line the line's
 * length without the '\n'. -1 and errno (0 for EOF) otherwise. */
static int bench_read_line(int fd, char *buf, size_t cap, size_t *ret_got, size_t *ret_line)
{
	size_t got = 0;
	while (got < cap) {
		ssize_t n = recv(fd, buf + got, cap - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = 0;
			return -1;
		}
		char *nl = memchr(buf + got, '\n', (size_t)n);
		got += (size_t)n;
		if (nl) {
			*ret_got = got;
			*ret_line = (size_t)(nl - buf);
			return 0;
		}
		if (got > 32)
			break;
	}
	errno = EPROTO;
	return -1;
}

/* A decimal count line; false when it is not one. */
static bool bench_parse_count(const char *line, size_t len, uint64_t *ret)
{
	char tmp[32];
	if (len == 0 || len >= sizeof(tmp))
		return false;
	memcpy(tmp, line, len);
	tmp[len] = '\0';
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(tmp, &end, 10);
	if (errno || !end || *end || tmp[0] < '0' || tmp[0] > '9')
		return false;
	*ret = v;
	return true;
}

/* ---- the servers (threads of the bench, on 198.51.100.2) -------------------------- */

/* The next connection, or -1 once the bench says stop. */
static int server_accept(bench_server *s)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = s->lfd, .events = POLLIN },
			               { .fd = s->stop_fd, .events = POLLIN } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (p[1].revents)
			return -1;
		if (!(p[0].revents & POLLIN))
			continue;
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0) {
			bench_timeouts(fd, BENCH_IO_TIMEOUT_S);
			return fd;
		}
		/* Out of descriptors or a connection aborted in the backlog:
		 * the stop signal still ends the loop. */
		if (errno != EINTR && errno != ECONNABORTED)
			usleep(10000);
	}
}

/* "N\n" then N bytes, or "-\n" then bytes to EOF: reply the count. */
static void sink_serve(int fd, char *buf)
{
	size_t got = 0, line = 0;
	if (bench_read_line(fd, buf, BENCH_CHUNK, &got, &line) < 0)
		return; /* a setup-latency probe: closed without a request */
	bool to_eof = line == 1 && buf[0] == '-';
	uint64_t want = 0;
	if (!to_eof && !bench_parse_count(buf, line, &want))
		return;
	uint64_t have = got - line - 1;
	while (to_eof || have < want) {
		size_t ask = BENCH_CHUNK;
		if (!to_eof && want - have < ask)
			ask = (size_t)(want - have);
		ssize_t n = recv(fd, buf, ask, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 && to_eof)
			break;
		if (n <= 0)
			return;
		have += (uint64_t)n;
	}
	char reply[32];
	int len = snprintf(reply, sizeof(reply), "%" PRIu64 "\n", have);
	(void)bench_write_all(fd, reply, (size_t)len);
}

/* "N\n": write N bytes, then close. */
static void source_serve(int fd, char *buf)
{
	size_t got = 0, line = 0;
	uint64_t want = 0;
	if (bench_read_line(fd, buf, 64, &got, &line) < 0 || !bench_parse_count(buf, line, &want))
		return;
	while (want > 0) {
		size_t n = want < BENCH_CHUNK ? (size_t)want : BENCH_CHUNK;
		if (bench_write_all(fd, buf, n) < 0)
			return;
		want -= n;
	}
}

/* One connection at a time: each throughput run is the only traffic, and
 * a setup probe is over in microseconds (the backlog holds the next). */
static void *server_main(bench_server *s, void (*serve)(int, char *))
{
	char *buf = calloc(1, BENCH_CHUNK);
	if (!buf)
		return NULL;
	int fd;
	while ((fd = server_accept(s)) >= 0) {
		serve(fd, buf);
		close(fd);
	}
	free(buf);
	return NULL;
}

static void *sink_main(void *arg)
{
	return server_main(arg, sink_serve);
}

static void *source_main(void *arg)
{
	return server_main(arg, source_serve);
}

/* Accept and hold: every connection stays open until its peer closes it or
 * the bench stops. One epoll loop, so a thousand idle tunnels cost the
 * bench a thousand descriptors and no threads. */
static void *hold_main(void *arg)
{
	bench_server *s = arg;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	bool *held = calloc((size_t)s->max_fd, sizeof(bool));
	struct epoll_event ev = { .events = EPOLLIN };
	ev.data.fd = s->lfd;
	if (ep < 0 || !held || epoll_ctl(ep, EPOLL_CTL_ADD, s->lfd, &ev) < 0)
		goto out;
	ev.data.fd = s->stop_fd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, s->stop_fd, &ev) < 0)
		goto out;
	for (bool stop = false; !stop;) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == s->stop_fd) {
				stop = true;
			} else if (fd == s->lfd) {
				/* The listener is non-blocking: take all that wait. */
				int cfd;
				while ((cfd = accept4(s->lfd, NULL, NULL,
				                      SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
					struct epoll_event cev = { .events = EPOLLIN };
					cev.data.fd = cfd;
					if (cfd >= s->max_fd ||
					    epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &cev) < 0) {
						close(cfd);
						continue;
					}
					held[cfd] = true;
					atomic_fetch_add(&s->live, 1);
				}
			} else {
				char b[256];
				ssize_t r = recv(fd, b, sizeof(b), 0);
				if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR)))
					continue;
				epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
				close(fd);
				held[fd] = false;
				atomic_fetch_sub(&s->live, 1);
			}
		}
	}
out:
	for (int fd = 0; held && fd < s->max_fd; fd++)
		if (held[fd])
			close(fd);
	free(held);
	if (ep >= 0)
		close(ep);
	return NULL;
}

static int bench_server_start(bench *b, bench_server *s, uint16_t port, void *(*fn)(void *),
                              bool nonblocking, int max_fd)
{
	/* The listening socket is made in the servers' namespace and stays
	 * there; the bench's thread goes back to the proxies'. */
	if (setns(b->ns_servers, CLONE_NEWNET) < 0)
		return -1;
	s->lfd = bench_listen(BENCH_SINK_ADDR, port, NULL);
	if (setns(b->ns_proxy, CLONE_NEWNET) < 0)
		return -1;
	if (s->lfd < 0)
		return -1;
	if (nonblocking && fcntl(s->lfd, F_SETFL, O_NONBLOCK) < 0)
		return -1;
	s->stop_fd = b->stop_r;
	s->max_fd = max_fd;
	atomic_init(&s->live, 0);
	int r = pthread_create(&s->thread, NULL, fn, s);
	if (r != 0) {
		fprintf(stderr, "bench_proxy: pthread_create: %s\n", strerror(r));
		return -1;
	}
	s->running = true;
	return 0;
}

static void bench_server_join(bench_server *s)
{
	if (s->running)
		pthread_join(s->thread, NULL);
	s->running = false;
	if (s->lfd >= 0)
		close(s->lfd);
	s->lfd = -1;
}

/* Wait (bounded) until the hold server holds exactly want connections. */
static int bench_hold_wait(bench *b, int want)
{
	int64_t deadline = bench_now_ns() + (int64_t)BENCH_READY_MS * 1000000;
	while (atomic_load(&b->hold.live) != want) {
		if (bench_now_ns() > deadline) {
			fprintf(stderr, "bench_proxy: the hold server holds %d connections, "
			                "not %d\n",
			        atomic_load(&b->hold.live), want);
			return -1;
		}
		usleep(2000);
	}
	return 0;
}

/* ---- the client: paths and transfers -------------------------------------------- */

/* Send a CONNECT request and read the response head; 0 when it is a 200
 * and nothing followed it (none of the servers speaks first). */
static int bench_connect_request(int fd, const char *path, const char *host, uint16_t port)
{
	char req[512];
	int n = snprintf(req, sizeof(req), "CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n\r\n", host,
	                 port, host, port);
	if (bench_write_all(fd, req, (size_t)n) < 0) {
		fprintf(stderr, "bench_proxy: %s: sending CONNECT: %s\n", path, strerror(errno));
		return -1;
	}
	char head[1024];
	size_t got = 0;
	while (got < sizeof(head) - 1) {
		ssize_t r = recv(fd, head + got, sizeof(head) - 1 - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr, "bench_proxy: %s: CONNECT %s:%u: %s before the "
			                "response head\n",
			        path, host, port, r == 0 ? "closed" : strerror(errno));
			return -1;
		}
		got += (size_t)r;
		head[got] = '\0';
		char *end = strstr(head, "\r\n\r\n");
		if (!end)
			continue;
		if (strncmp(head, "HTTP/1.", 7) != 0 || strncmp(head + 8, " 200", 4) != 0) {
			char *eol = strchr(head, '\r');
			fprintf(stderr, "bench_proxy: %s: CONNECT %s:%u answered: %.*s\n", path,
			        host, port, (int)(eol ? eol - head : 64), head);
			return -1;
		}
		if ((size_t)(end + 4 - head) != got) {
			fprintf(stderr, "bench_proxy: %s: bytes after the response head\n", path);
			return -1;
		}
		return 0;
	}
	fprintf(stderr, "bench_proxy: %s: response head too large\n", path);
	return -1;
}

/* A connection to 198.51.100.2:port through a path: direct, or a CONNECT
 * tunnel (the airlock proxy gets the name, tinyproxy the address). */
static int bench_open(bench *b, int path, uint16_t port)
{
	int fd = bench_socket();
	if (fd < 0)
		return -1;
	int r;
	switch (path) {
	case P_DIRECT:
		r = bench_connect(fd, BENCH_SINK_ADDR, port);
		break;
	case P_AIRLOCK:
		r = bench_connect(fd, "127.0.0.1", b->airlock_port);
		if (r == 0)
			r = bench_connect_request(fd, path_names[path], BENCH_HOST, port);
		break;
	default:
		r = bench_connect(fd, "127.0.0.1", b->tiny_port);
		if (r == 0)
			r = bench_connect_request(fd, path_names[path], BENCH_SINK_ADDR, port);
		break;
	}
	if (r < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Read a count line and check it against want. */
static int bench_expect_count(int fd, const char *what, uint64_t want)
{
	char line[64];
	size_t got = 0, len = 0;
	uint64_t v = 0;
	if (bench_read_line(fd, line, sizeof(line), &got, &len) < 0) {
		fprintf(stderr, "bench_proxy: %s: no count reply: %s\n", what,
		        errno ? strerror(errno) : "closed");
		return -1;
	}
	if (!bench_parse_count(line, len, &v) || v != want || got != len + 1) {
		fprintf(stderr, "bench_proxy: %s: the sink counted %.*s bytes, not %" PRIu64 "\n",
		        what, (int)len, line, want);
		return -1;
	}
	return 0;
}

/* client -> sink: the time from the first byte written to the count read
 * back (every byte has then arrived). */
static int bench_upload(bench *b, int path, uint64_t bytes, int64_t *ret_ns)
{
	int fd = bench_open(b, path, BENCH_PORT_SINK);
	if (fd < 0)
		return -1;
	char line[32];
	int n = snprintf(line, sizeof(line), "%" PRIu64 "\n", bytes);
	int rc = -1;
	int64_t t0 = bench_now_ns();
	if (bench_write_all(fd, line, (size_t)n) < 0)
		goto fail;
	for (uint64_t left = bytes; left > 0;) {
		size_t k = left < BENCH_CHUNK ? (size_t)left : BENCH_CHUNK;
		if (bench_write_all(fd, b->buf, k) < 0)
			goto fail;
		left -= k;
	}
	if (bench_expect_count(fd, path_names[path], bytes) < 0)
		goto out;
	*ret_ns = bench_now_ns() - t0;
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "bench_proxy: %s: upload: %s\n", path_names[path], strerror(errno));
out:
	close(fd);
	return rc;
}

/* source -> client: the time from the request to the source's EOF. */
static int bench_download(bench *b, int path, uint64_t bytes, int64_t *ret_ns)
{
	int fd = bench_open(b, path, BENCH_PORT_SOURCE);
	if (fd < 0)
		return -1;
	char line[32];
	int n = snprintf(line, sizeof(line), "%" PRIu64 "\n", bytes);
	int rc = -1;
	uint64_t got = 0;
	int64_t t0 = bench_now_ns();
	if (bench_write_all(fd, line, (size_t)n) < 0)
		goto fail;
	for (;;) {
		ssize_t r = recv(fd, b->buf, BENCH_CHUNK, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto fail;
		if (r == 0)
			break;
		got += (uint64_t)r;
	}
	int64_t t1 = bench_now_ns();
	if (got != bytes) {
		fprintf(stderr, "bench_proxy: %s: download: %" PRIu64 " bytes, not %" PRIu64 "\n",
		        path_names[path], got, bytes);
		goto out;
	}
	*ret_ns = t1 - t0;
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "bench_proxy: %s: download: %s\n", path_names[path], strerror(errno));
out:
	close(fd);
	return rc;
}

static int bench_transfer(bench *b, int dir, int path, uint64_t bytes, int64_t *ret_ns)
{
	return dir == D_UP ? bench_upload(b, path, bytes, ret_ns) :
	                     bench_download(b, path, bytes, ret_ns);
}

/* ---- /proc ---------------------------------------------------------------------- */

static long bench_vmrss_kib(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	long kib = -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "VmRSS:", 6) == 0) {
			kib = strtol(line + 6, NULL, 10);
			break;
		}
	fclose(f);
	return kib;
}

static long bench_fd_count(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	long n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* The fields of /proc/PID/stat after "(comm)": comm may hold anything but
 * the last ')'. 0 with the text in buf, or -1. */
static int bench_stat_fields(pid_t pid, char *buf, size_t cap, const char **ret)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, cap - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *rp = strrchr(buf, ')');
	if (!rp)
		return -1;
	*ret = rp + 1;
	return 0;
}

static pid_t bench_ppid(pid_t pid)
{
	char buf[1024];
	const char *f = NULL;
	int ppid = -1;
	if (bench_stat_fields(pid, buf, sizeof(buf), &f) < 0 || sscanf(f, " %*c %d", &ppid) != 1)
		return -1;
	return (pid_t)ppid;
}

/* User + system CPU time of a process, every thread it ever had included
 * (an exited thread's time stays with the process), in seconds. */
static double bench_proc_cpu_s(pid_t pid)
{
	char buf[1024];
	const char *f = NULL;
	unsigned long ut = 0, st = 0;
	if (bench_stat_fields(pid, buf, sizeof(buf), &f) < 0 ||
	    sscanf(f, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1.0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

#define BENCH_TREE_MAX 256

/* root and its descendants (processes, not threads: threads share the
 * process's memory and descriptor table). Bounded passes over /proc. */
static size_t bench_tree(pid_t root, pid_t *pids)
{
	size_t n = 0;
	pids[n++] = root;
	for (int pass = 0; pass < 8; pass++) {
		bool added = false;
		DIR *d = opendir("/proc");
		if (!d)
			break;
		struct dirent *e;
		while ((e = readdir(d)) && n < BENCH_TREE_MAX) {
			char *end = NULL;
			long v = strtol(e->d_name, &end, 10);
			if (!end || *end || v <= 0)
				continue;
			bool known = false;
			for (size_t i = 0; i < n && !known; i++)
				known = pids[i] == (pid_t)v;
			if (known)
				continue;
			pid_t pp = bench_ppid((pid_t)v);
			for (size_t i = 0; i < n; i++)
				if (pids[i] == pp) {
					pids[n++] = (pid_t)v;
					added = true;
					break;
				}
		}
		closedir(d);
		if (!added)
			break;
	}
	return n;
}

/* ---- throughput --------------------------------------------------------------------- */

/* The bench's own CPU time (client and servers: the two endpoints), in
 * seconds. */
static double bench_self_cpu_s(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return -1.0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* The proxy process a path goes through, or -1 for direct. */
static pid_t bench_path_pid(const bench *b, int path)
{
	return path == P_AIRLOCK ? airlock_proxy_pid(b->proxy) :
	       path == P_TINY    ? b->tinyproxy :
	                           -1;
}

/*
 * Besides the rate, the CPU time each transfer cost, per GiB moved: the
 * endpoints' (this process) and the proxy's. On a machine with few cores a
 * proxy competes with both endpoints for them, so the CPU a path burns
 * explains a rate that wall time alone does not.
 */
static int bench_throughput(bench *b, uint64_t total)
{
	uint64_t bytes[D__N][P__N] = { { 0 } };
	int64_t ns[D__N][P__N] = { { 0 } };
	double rate[D__N][P__N][BENCH_TP_ROUNDS];
	double cpu_ends[D__N][P__N] = { { 0 } }, cpu_proxy[D__N][P__N] = { { 0 } };
	int64_t scratch = 0;

	/* The first tunnels through each path pay for page faults and socket
	 * buffers growing; not in the samples. */
	for (int d = 0; d < D__N; d++)
		for (int p = 0; p < P__N; p++)
			if (bench_transfer(b, d, p, BENCH_WARMUP_BYTES, &scratch) < 0)
				return -1;

	for (int r = 0; r < BENCH_TP_ROUNDS; r++) {
		uint64_t share = bench_share(total, r, BENCH_TP_ROUNDS);
		for (int d = 0; d < D__N; d++)
			for (int i = 0; i < P__N; i++) {
				int p = (r + i) % P__N; /* who goes first rotates */
				int64_t t = 0;
				pid_t pid = bench_path_pid(b, p);
				double e0 = bench_self_cpu_s();
				double p0 = pid > 0 ? bench_proc_cpu_s(pid) : 0.0;
				if (bench_transfer(b, d, p, share, &t) < 0)
					return -1;
				cpu_ends[d][p] += bench_self_cpu_s() - e0;
				cpu_proxy[d][p] += (pid > 0 ? bench_proc_cpu_s(pid) : 0.0) - p0;
				bytes[d][p] += share;
				ns[d][p] += t;
				rate[d][p][r] = bench_mib_s(share, t);
			}
	}

	printf("tunnel throughput, %" PRIu64 " MiB each way per path, %d interleaved rounds, "
	       "64 KiB writes/reads, byte counts verified (tunnel setup not timed; CPU from "
	       "getrusage and /proc/PID/stat, %ld ticks/s):\n",
	       total >> 20, BENCH_TP_ROUNDS, sysconf(_SC_CLK_TCK));
	bool aim_direct = true, aim_tiny = true;
	for (int d = 0; d < D__N; d++) {
		double mib[P__N];
		for (int p = 0; p < P__N; p++) {
			double lo = rate[d][p][0], hi = rate[d][p][0];
			for (int r = 1; r < BENCH_TP_ROUNDS; r++) {
				lo = rate[d][p][r] < lo ? rate[d][p][r] : lo;
				hi = rate[d][p][r] > hi ? rate[d][p][r] : hi;
			}
			mib[p] = bench_mib_s(bytes[d][p], ns[d][p]);
			double gib = (double)bytes[d][p] / 1073741824.0;
			printf("  %-8s %-10s %9.1f MiB/s   (rounds %.1f .. %.1f)   CPU s per GiB: "
			       "endpoints %.3f, proxy %.3f\n",
			       dir_names[d], path_names[p], mib[p], lo, hi, cpu_ends[d][p] / gib,
			       cpu_proxy[d][p] / gib);
		}
		double vs_direct = mib[P_AIRLOCK] / mib[P_DIRECT];
		double vs_tiny = mib[P_AIRLOCK] / mib[P_TINY];
		printf("  %-8s ratio airlock/direct %.3fx, airlock/tinyproxy %.3fx\n", dir_names[d],
		       vs_direct, vs_tiny);
		aim_direct = aim_direct && vs_direct >= BENCH_AIM_DIRECT;
		aim_tiny = aim_tiny && vs_tiny > 1.0;
	}
	printf("  aim: airlock >= %.2fx direct both ways: %s; ahead of tinyproxy both ways: %s\n",
	       BENCH_AIM_DIRECT, aim_direct ? "met" : "NOT met", aim_tiny ? "met" : "NOT met");
	return 0;
}

/* ---- setup latency ----------------------------------------------------------------- */

/* One setup. A proxy: connect() to it until its 200 head is read. Direct:
 * connect() to the sink, "0\n", until its "0\n" reply is read (one round
 * trip after the handshake, as a CONNECT exchange is). */
static int bench_setup_sample(bench *b, int path, int64_t *ret_ns)
{
	int fd = bench_socket();
	if (fd < 0)
		return -1;
	int r;
	int64_t t0 = bench_now_ns();
	if (path == P_DIRECT) {
		r = bench_connect(fd, BENCH_SINK_ADDR, BENCH_PORT_SINK);
		if (r == 0 && (r = bench_write_all(fd, "0\n", 2)) < 0)
			fprintf(stderr, "bench_proxy: direct: %s\n", strerror(errno));
		if (r == 0)
			r = bench_expect_count(fd, "direct", 0);
	} else {
		r = bench_connect(fd, "127.0.0.1",
		                  path == P_AIRLOCK ? b->airlock_port : b->tiny_port);
		if (r == 0)
			r = bench_connect_request(fd, path_names[path],
			                          path == P_AIRLOCK ? BENCH_HOST : BENCH_SINK_ADDR,
			                          BENCH_PORT_SINK);
	}
	int64_t t1 = bench_now_ns();
	close(fd);
	if (r < 0)
		return -1;
	*ret_ns = t1 - t0;
	return 0;
}

/* The kinds of setup sample: the three paths, and the airlock proxy's
 * resolution step alone. */
#define K_RESOLVE P__N
#define K__N (P__N + 1)

/* What the proxy's checking thread does for the name on each CONNECT:
 * a resolver made for it, A and AAAA asked of dnsmasq, the resolver freed.
 * Timed alone, it says how much of the airlock setup is DNS. */
static int bench_resolve_sample(int64_t *ret_ns)
{
	airlock_egress_resolver *res = NULL;
	airlock_error err = { 0 };
	airlock_addr a[AIRLOCK_EGRESS_ADDRESSES_MAX];
	size_t n = 0;
	char s[46] = "";
	int64_t t0 = bench_now_ns();
	int r = airlock_egress_resolver_new(BENCH_DNS_ADDR, &res, &err);
	if (r == 0)
		r = airlock_egress_resolver_resolve(res, BENCH_HOST, a,
		                                    AIRLOCK_EGRESS_ADDRESSES_MAX, &n);
	airlock_egress_resolver_free(res);
	int64_t t1 = bench_now_ns();
	if (r == 0)
		airlock_addr_format(&a[0], s);
	if (r < 0 || n != 1 || strcmp(s, BENCH_SINK_ADDR) != 0) {
		fprintf(stderr, "bench_proxy: resolving %s: %s\n", BENCH_HOST,
		        r < 0 ? (err.message[0] ? err.message : strerror(-r)) : "wrong answer");
		return -1;
	}
	*ret_ns = t1 - t0;
	return 0;
}

static int bench_setup_kind(bench *b, int kind, int64_t *ret_ns)
{
	return kind == K_RESOLVE ? bench_resolve_sample(ret_ns) :
	                           bench_setup_sample(b, kind, ret_ns);
}

static int bench_setup(bench *b, size_t runs)
{
	int rc = -1;
	int64_t *s[K__N] = { NULL };
	size_t k[K__N] = { 0 };
	int64_t scratch = 0;
	for (int p = 0; p < K__N; p++)
		if (!(s[p] = calloc(runs, sizeof(int64_t)))) {
			fprintf(stderr, "bench_proxy: out of memory\n");
			goto out;
		}
	for (int i = 0; i < BENCH_WARMUP; i++)
		for (int p = 0; p < K__N; p++)
			if (bench_setup_kind(b, p, &scratch) < 0)
				goto out;
	for (int r = 0; r < BENCH_LAT_ROUNDS; r++) {
		size_t n = (size_t)bench_share(runs, r, BENCH_LAT_ROUNDS);
		for (int i = 0; i < K__N; i++) {
			int p = (r + i) % K__N;
			for (size_t j = 0; j < n; j++, k[p]++)
				if (bench_setup_kind(b, p, &s[p][k[p]]) < 0)
					goto out;
		}
	}
	double p50[K__N], p99[K__N];
	for (int p = 0; p < K__N; p++) {
		p50[p] = bench_ms(bench_pct(s[p], runs, 50));
		p99[p] = bench_ms(bench_pct(s[p], runs, 99));
	}
	printf("CONNECT setup latency, %zu runs each, %d interleaved rounds "
	       "(connect() until the 200 head is read):\n",
	       runs, BENCH_LAT_ROUNDS);
	printf("  %-44s p50 %8.3f ms   p99 %8.3f ms\n", "airlock (name, resolved via dnsmasq)",
	       p50[P_AIRLOCK], p99[P_AIRLOCK]);
	printf("  %-44s p50 %8.3f ms   p99 %8.3f ms\n", "tinyproxy (numeric target)", p50[P_TINY],
	       p99[P_TINY]);
	printf("  %-44s p50 %8.3f ms   p99 %8.3f ms\n", "direct connect() + first reply byte",
	       p50[P_DIRECT], p99[P_DIRECT]);
	printf("  %-44s p50 %8.3f ms   p99 %8.3f ms\n",
	       "  airlock's resolution step alone (in-bench)", p50[K_RESOLVE], p99[K_RESOLVE]);
	printf("  %-44s p50 %8.2fx     p99 %8.2fx\n", "ratio airlock/tinyproxy",
	       p50[P_AIRLOCK] / p50[P_TINY], p99[P_AIRLOCK] / p99[P_TINY]);
	printf("  aim: airlock p50 <= %.1fx tinyproxy's, resolving: %s\n", BENCH_AIM_SETUP,
	       p50[P_AIRLOCK] <= BENCH_AIM_SETUP * p50[P_TINY] ? "met" : "NOT met");
	rc = 0;
out:
	for (int p = 0; p < K__N; p++)
		free(s[p]);
	return rc;
}

/* ---- half-close ------------------------------------------------------------------- */

/* Through a path: "-\n" + 64 KiB, shutdown(SHUT_WR), then the sink's count.
 * 1 when it arrived, 0 when it was lost (*ret_why says how), -1 when the
 * tunnel could not be opened. */
static int bench_half_close(bench *b, int path, const char **ret_why)
{
	int fd = bench_open(b, path, BENCH_PORT_SINK);
	if (fd < 0)
		return -1;
	bench_timeouts(fd, BENCH_HALF_CLOSE_WAIT_S);
	int ok = 0;
	*ret_why = "reply lost";
	if (bench_write_all(fd, "-\n", 2) < 0 || bench_write_all(fd, b->buf, BENCH_CHUNK) < 0 ||
	    shutdown(fd, SHUT_WR) < 0) {
		*ret_why = "reply lost (the write failed)";
		goto out;
	}
	char line[64];
	size_t got = 0, len = 0;
	uint64_t v = 0;
	if (bench_read_line(fd, line, sizeof(line), &got, &len) < 0) {
		*ret_why = errno == 0              ? "reply lost (closed)" :
		           errno == ECONNRESET     ? "reply lost (reset)" :
		           errno == EAGAIN         ? "reply lost (no reply within 5 s)" :
		                                     "reply lost";
		goto out;
	}
	if (!bench_parse_count(line, len, &v) || v != BENCH_CHUNK) {
		*ret_why = "wrong count";
		goto out;
	}
	ok = 1;
	*ret_why = "ok";
out:
	close(fd);
	return ok;
}

static int bench_half_close_all(bench *b)
{
	const char *why[P__N] = { NULL };
	for (int p = 0; p < P__N; p++)
		if (bench_half_close(b, p, &why[p]) < 0)
			return -1;
	/* Direct is the control: if it fails, the bench is wrong, not a proxy. */
	if (strcmp(why[P_DIRECT], "ok") != 0) {
		fprintf(stderr, "bench_proxy: half-close failed on a direct connection: %s\n",
		        why[P_DIRECT]);
		return -1;
	}
	printf("half-close: airlock %s, tinyproxy %s\n", why[P_AIRLOCK], why[P_TINY]);
	return 0;
}

/* ---- idle tunnels: memory and descriptors ----------------------------------------- */

typedef struct bench_usage {
	long rss_kib;
	long fds;
	size_t procs;
} bench_usage;

static int bench_measure(pid_t pid, bool tree, bench_usage *u)
{
	pid_t pids[BENCH_TREE_MAX];
	size_t n = tree ? bench_tree(pid, pids) : 1;
	pids[0] = pid;
	*u = (bench_usage){ .procs = n };
	for (size_t i = 0; i < n; i++) {
		long rss = bench_vmrss_kib(pids[i]), fds = bench_fd_count(pids[i]);
		if (rss < 0 || fds < 0) {
			fprintf(stderr, "bench_proxy: cannot read /proc/%d\n", (int)pids[i]);
			return -1;
		}
		u->rss_kib += rss;
		u->fds += fds;
	}
	return 0;
}

static int bench_idle(bench *b, int path, size_t n, pid_t pid, bool tree)
{
	int rc = -1;
	int *fds = malloc(n * sizeof(int));
	size_t open_n = 0;
	bench_usage before, after;
	if (!fds) {
		fprintf(stderr, "bench_proxy: out of memory\n");
		return -1;
	}
	if (bench_hold_wait(b, 0) < 0 || bench_measure(pid, tree, &before) < 0)
		goto out;
	for (; open_n < n; open_n++)
		if ((fds[open_n] = bench_open(b, path, BENCH_PORT_HOLD)) < 0) {
			fprintf(stderr, "bench_proxy: %s: idle tunnel %zu of %zu failed\n",
			        path_names[path], open_n + 1, n);
			goto out;
		}
	/* Every tunnel answered 200; the hold server seeing each one proves it
	 * reaches the far end. */
	if (bench_hold_wait(b, (int)n) < 0 || bench_measure(pid, tree, &after) < 0)
		goto out;
	printf("  %-10s %zu tunnels: VmRSS %ld -> %ld KiB (%.2f KiB per tunnel); "
	       "fds %ld -> %ld (%.2f per tunnel)%s\n",
	       path_names[path], n, before.rss_kib, after.rss_kib,
	       (double)(after.rss_kib - before.rss_kib) / (double)n, before.fds, after.fds,
	       (double)(after.fds - before.fds) / (double)n,
	       tree ? (after.procs == 1 ? "; process tree: 1 process (it uses threads)" :
	                                  "; summed over its process tree") :
	              "");
	if (tree && after.procs > 1)
		printf("  %-10s process tree: %zu processes\n", "", after.procs);
	rc = 0;
out:
	for (size_t i = 0; i < open_n; i++)
		close(fds[i]);
	free(fds);
	/* Both proxies see their clients go, close upstream, and the hold
	 * server closes its side: the next measurement starts from nothing. */
	if (bench_hold_wait(b, 0) < 0)
		rc = -1;
	return rc;
}

static int bench_idle_all(bench *b, size_t n)
{
	printf("%zu concurrent idle tunnels through each proxy (to the hold server), the proxy's "
	       "VmRSS and open fds before -> after:\n",
	       n);
	int r = bench_idle(b, P_AIRLOCK, n, airlock_proxy_pid(b->proxy), false);
	if (r == 0)
		r = bench_idle(b, P_TINY, n, b->tinyproxy, true);
	if (r == 0)
		printf("  (VmRSS is user-space memory only: socket buffers and pipes are kernel "
		       "memory and not in it)\n");
	return r;
}

/* ---- setup and teardown ------------------------------------------------------------- */

/* Two network namespaces of the bench's own, joined by a veth pair: the
 * proxies, the clients and dnsmasq in the first (the bench's thread stays
 * there), the servers' listening sockets in the second. The servers cannot
 * sit on the proxy's own addresses: the proxy refuses to dial those
 * (OWN_ADDRESS), as it must in production. Every path, direct included,
 * crosses the same veth. */
static int bench_namespace(bench *b)
{
	b->ns_proxy = b->ns_servers = -1;
	if (unshare(CLONE_NEWNET) < 0)
		return -1;
	b->ns_proxy = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (b->ns_proxy < 0 || unshare(CLONE_NEWNET) < 0)
		return -2;
	b->ns_servers = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (b->ns_servers < 0)
		return -2;
	char peer_ns[64];
	snprintf(peer_ns, sizeof(peer_ns), "/proc/%ld/fd/%d", (long)getpid(), b->ns_proxy);
	const char *const lo_up[] = { "ip", "link", "set", "lo", "up", NULL };
	const char *const veth[] = { "ip",   "link", "add",     "bsrv",  "type",  "veth",
		                     "peer", "name", "bprx",    "netns", peer_ns, NULL };
	const char *const addr_s[] = { "ip", "addr", "add", BENCH_SINK_ADDR "/24", "dev", "bsrv", NULL };
	const char *const up_s[] = { "ip", "link", "set", "bsrv", "up", NULL };
	if (bench_run_ip(b, lo_up) < 0 || bench_run_ip(b, veth) < 0 ||
	    bench_run_ip(b, addr_s) < 0 || bench_run_ip(b, up_s) < 0)
		return -2;
	if (setns(b->ns_proxy, CLONE_NEWNET) < 0)
		return -2;
	const char *const addr_p[] = { "ip", "addr", "add", BENCH_PROXY_NS_ADDR "/24", "dev", "bprx", NULL };
	const char *const up_p[] = { "ip", "link", "set", "bprx", "up", NULL };
	const char *const addr_d[] = { "ip",  "addr", "add", BENCH_DNS_ADDR "/32",
		                       "dev", "lo",   NULL };
	if (bench_run_ip(b, lo_up) < 0 || bench_run_ip(b, addr_p) < 0 ||
	    bench_run_ip(b, up_p) < 0 || bench_run_ip(b, addr_d) < 0)
		return -2;
	return 0;
}

static int bench_open_log(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		fprintf(stderr, "bench_proxy: %s: %s\n", path, strerror(errno));
	return fd;
}

/* dnsmasq in the foreground, answering only for sink.example.com
 * (--address=/#/ makes every other name NXDOMAIN, with no upstream). Ready
 * when the project's own resolver gets the address from it. */
static int bench_dnsmasq(bench *b)
{
	const char *const args[] = { "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null",
		                     "--no-resolv", "--no-hosts",
		                     "--listen-address=" BENCH_DNS_ADDR, "--bind-interfaces",
		                     "--port=53", "--host-record=" BENCH_HOST "," BENCH_SINK_ADDR,
		                     "--address=/#/", "--pid-file=", "--user=root",
		                     /* its log to our temporary file, not the machine's syslog */
		                     "--log-facility=-", NULL };
	int out = bench_open_log(b->dns_log);
	if (out < 0)
		return -1;
	b->dnsmasq = bench_start(b->dnsmasq_path, args, out);
	close(out);
	if (b->dnsmasq < 0)
		return -1;

	airlock_egress_resolver *res = NULL;
	airlock_error err = { 0 };
	if (airlock_egress_resolver_new(BENCH_DNS_ADDR, &res, &err) < 0) {
		fprintf(stderr, "bench_proxy: resolver: %s\n", err.message);
		return -1;
	}
	int rc = -1;
	int64_t deadline = bench_now_ns() + (int64_t)BENCH_READY_MS * 1000000;
	while (bench_now_ns() < deadline && bench_alive(&b->dnsmasq)) {
		airlock_addr a[AIRLOCK_EGRESS_ADDRESSES_MAX];
		size_t n = 0;
		char s[46];
		if (airlock_egress_resolver_resolve(res, BENCH_HOST, a,
		                                    AIRLOCK_EGRESS_ADDRESSES_MAX, &n) == 0) {
			airlock_addr_format(&a[0], s);
			rc = n == 1 && strcmp(s, BENCH_SINK_ADDR) == 0 ? 0 : -1;
			if (rc < 0)
				fprintf(stderr, "bench_proxy: dnsmasq answered %s (%zu "
				                "addresses)\n",
				        s, n);
			break;
		}
		usleep(50000);
	}
	airlock_egress_resolver_free(res);
	if (rc < 0) {
		fprintf(stderr, "bench_proxy: dnsmasq did not answer for %s\n", BENCH_HOST);
		bench_dump("dnsmasq", b->dns_log);
	}
	return rc;
}

/* A free port on 127.0.0.1 for tinyproxy: nothing else runs in this
 * namespace, so it stays free until tinyproxy binds it. */
static int bench_free_port(uint16_t *ret)
{
	int fd = bench_listen("127.0.0.1", 0, ret);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* tinyproxy 1.11 (Debian 12): one thread per client, MaxClients of them
 * (StartServers and the spare-server options are gone). No User line: it
 * stays root here, which changes nothing it measures. */
static int bench_tinyproxy_start(bench *b, size_t idle)
{
	if (bench_free_port(&b->tiny_port) < 0)
		return -1;
	FILE *f = fopen(b->tiny_conf, "we");
	if (!f) {
		fprintf(stderr, "bench_proxy: %s: %s\n", b->tiny_conf, strerror(errno));
		return -1;
	}
	fprintf(f,
	        "Port %u\n"
	        "Listen 127.0.0.1\n"
	        "Timeout 600\n"
	        "MaxClients %zu\n"
	        "Allow 127.0.0.1\n"
	        "ConnectPort %d\n"
	        "ConnectPort %d\n"
	        "ConnectPort %d\n"
	        "LogLevel Critical\n",
	        b->tiny_port, idle + 100, BENCH_PORT_HOLD, BENCH_PORT_SINK, BENCH_PORT_SOURCE);
	if (fclose(f) != 0) {
		fprintf(stderr, "bench_proxy: %s: %s\n", b->tiny_conf, strerror(errno));
		return -1;
	}
	const char *const args[] = { "tinyproxy", "-d", "-c", b->tiny_conf, NULL };
	int out = bench_open_log(b->tiny_log);
	if (out < 0)
		return -1;
	b->tinyproxy = bench_start(b->tinyproxy_path, args, out);
	close(out);
	return b->tinyproxy < 0 ? -1 : 0;
}

/* Ready when it accepts a connection (bounded). */
static int bench_tinyproxy_ready(bench *b)
{
	int64_t deadline = bench_now_ns() + (int64_t)BENCH_READY_MS * 1000000;
	while (bench_now_ns() < deadline && bench_alive(&b->tinyproxy)) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in sa;
		bench_sockaddr(&sa, "127.0.0.1", b->tiny_port);
		int r = fd >= 0 ? connect(fd, (struct sockaddr *)&sa, sizeof(sa)) : -1;
		if (fd >= 0)
			close(fd);
		if (r == 0)
			return 0;
		usleep(20000);
	}
	fprintf(stderr, "bench_proxy: tinyproxy did not start listening on 127.0.0.1:%u\n",
	        b->tiny_port);
	bench_dump("tinyproxy", b->tiny_log);
	return -1;
}

/* The airlock proxy: forked (no exec) from this process, so it is spawned
 * before the server threads exist and runs in this namespace. Its log goes
 * to /dev/null: one write(2) per tunnel, as in production, with nothing
 * kept. */
static int bench_airlock_start(bench *b, size_t idle)
{
	airlock_proxy_config cfg;
	airlock_proxy_config_default(&cfg);
	cfg.dns_servers = BENCH_DNS_ADDR;
	/* One listener carries every tunnel and every setup of the bench: its
	 * share must hold the idle tunnels, and its accept rate must not pace
	 * the setups (past the rate connections wait for the next second, and
	 * the figures would be the rate's, not the proxy's). The limits
	 * themselves are tests/test_proxy.c's to prove. */
	cfg.max_connections = (unsigned)(idle + 200);
	cfg.max_connections_per_listener = (unsigned)(idle + 100);
	cfg.accept_rate_per_listener = 1000000;
	int log_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (log_fd < 0) {
		fprintf(stderr, "bench_proxy: /dev/null: %s\n", strerror(errno));
		return -1;
	}
	cfg.log_fd = log_fd;
	airlock_error err = { 0 };
	int r = airlock_proxy_spawn(&cfg, &b->proxy, &err);
	close(log_fd);
	if (r < 0) {
		fprintf(stderr, "bench_proxy: airlock proxy: %s\n", err.message);
		return -1;
	}

	airlock_egress_policy pol;
	memset(&pol, 0, sizeof(pol));
	if (airlock_egress_policy_parse("bench-policy", bench_policy, strlen(bench_policy), &pol,
	                                &err) < 0) {
		fprintf(stderr, "bench_proxy: policy: %s\n", err.message);
		return -1;
	}
	int lfd = bench_listen("127.0.0.1", 0, &b->airlock_port);
	airlock_proxy_owner owner = { .run_id = "bench-run", .tenant_id = "bench",
		                      .environment_id = "bench-env" };
	r = lfd < 0 ? -1 : airlock_proxy_attach(b->proxy, lfd, &owner, &pol, &err);
	if (lfd >= 0 && r < 0)
		fprintf(stderr, "bench_proxy: attach: %s\n", err.message);
	/* The proxy keeps its own copy of the listener. */
	if (lfd >= 0)
		close(lfd);
	airlock_egress_policy_clear(&pol);
	return r < 0 ? -1 : 0;
}

static void bench_teardown(bench *b)
{
	airlock_proxy_free(b->proxy);
	b->proxy = NULL;
	bench_stop_child(&b->tinyproxy);
	if (b->stop_w >= 0)
		(void)!write(b->stop_w, "x", 1);
	bench_server_join(&b->hold);
	bench_server_join(&b->sink);
	bench_server_join(&b->source);
	bench_stop_child(&b->dnsmasq);
	if (b->stop_r >= 0)
		close(b->stop_r);
	if (b->ns_servers >= 0)
		close(b->ns_servers);
	if (b->ns_proxy >= 0)
		close(b->ns_proxy);
	if (b->stop_w >= 0)
		close(b->stop_w);
	if (b->dir[0]) {
		unlink(b->tiny_conf);
		unlink(b->tiny_log);
		unlink(b->dns_log);
		if (rmdir(b->dir) < 0)
			fprintf(stderr, "bench_proxy: rmdir %s: %s\n", b->dir, strerror(errno));
	}
	free(b->buf);
}

static long bench_parse(const char *s, long lo, long hi)
{
	char *end = NULL;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || !end || *end || v < lo || v > hi)
		return -1;
	return v;
}

int main(int argc, char **argv)
{
	long mib = BENCH_MIB_DEFAULT, connects = BENCH_CONNECTS_DEFAULT, idle = BENCH_IDLE_DEFAULT;
	bool short_run = argc == 2 && strcmp(argv[1], "--short") == 0;
	if (short_run) {
		mib = 8;
		connects = 20;
		idle = 50;
	} else if (argc > 4 ||
	    (argc > 1 && (mib = bench_parse(argv[1], BENCH_TP_ROUNDS, BENCH_MIB_MAX)) < 0) ||
	    (argc > 2 &&
	     (connects = bench_parse(argv[2], BENCH_LAT_ROUNDS, BENCH_CONNECTS_MAX)) < 0) ||
	    (argc > 3 && (idle = bench_parse(argv[3], 1, BENCH_IDLE_MAX)) < 0)) {
		fprintf(stderr,
		        "usage: %s [MiB [connects [idle]]] | --short   (MiB %d..%ld, connects %d..%ld, "
		        "idle 1..%ld)\n",
		        argv[0], BENCH_TP_ROUNDS, BENCH_MIB_MAX, BENCH_LAT_ROUNDS,
		        BENCH_CONNECTS_MAX, BENCH_IDLE_MAX);
		return 2;
	}

	bench b = { .dnsmasq = -1, .tinyproxy = -1, .stop_r = -1, .stop_w = -1,
	           .ns_proxy = -1, .ns_servers = -1 };
	b.hold.lfd = b.sink.lfd = b.source.lfd = -1;
	if (geteuid() != 0) {
		fprintf(stderr, "bench_proxy: skipped: needs root (a network namespace of its own, "
		                "dnsmasq on port 53)\n");
		return BENCH_SKIP;
	}
	b.ip = bench_find(ip_paths);
	b.dnsmasq_path = bench_find(dnsmasq_paths);
	b.tinyproxy_path = bench_find(tinyproxy_paths);
	if (!b.ip || !b.dnsmasq_path || !b.tinyproxy_path) {
		fprintf(stderr, "bench_proxy: skipped: %s not found: apt-get install %s\n",
		        !b.ip ? "ip" : !b.dnsmasq_path ? "dnsmasq" : "tinyproxy",
		        !b.ip ? "iproute2" : !b.dnsmasq_path ? "dnsmasq-base" : "tinyproxy");
		return BENCH_SKIP;
	}

	/* Each idle tunnel costs this process two descriptors (the client's
	 * and the hold server's); tinyproxy inherits the limit. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* The airlock proxy inherits it too: six descriptors a tunnel and 64
	 * of its own, or it would lower its caps below the idle tunnels. */
	rlim_t need = (rlim_t)(2 * idle + 256);
	if (need < (rlim_t)(64 + 6 * (idle + 200)))
		need = (rlim_t)(64 + 6 * (idle + 200));
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < need) {
		fprintf(stderr,
		        "bench_proxy: RLIMIT_NOFILE %llu is too low for %ld idle tunnels (needs %llu: "
		        "ulimit -n)\n",
		        (unsigned long long)rl.rlim_cur, idle, (unsigned long long)need);
		return 2;
	}
	int max_fd = rl.rlim_cur > 1048576 ? 1048576 : (int)rl.rlim_cur;
	signal(SIGPIPE, SIG_IGN);

	int ns = bench_namespace(&b);
	if (ns == -1) {
		fprintf(stderr, "bench_proxy: skipped: unshare(CLONE_NEWNET): %s\n",
		        strerror(errno));
		return BENCH_SKIP;
	}
	int rc = 1;
	if (ns < 0)
		goto out;

	snprintf(b.dir, sizeof(b.dir), "/tmp/bench_proxy.XXXXXX");
	if (!mkdtemp(b.dir)) {
		fprintf(stderr, "bench_proxy: mkdtemp: %s\n", strerror(errno));
		b.dir[0] = '\0';
		goto out;
	}
	snprintf(b.tiny_conf, sizeof(b.tiny_conf), "%s/tinyproxy.conf", b.dir);
	snprintf(b.tiny_log, sizeof(b.tiny_log), "%s/tinyproxy.log", b.dir);
	snprintf(b.dns_log, sizeof(b.dns_log), "%s/dnsmasq.log", b.dir);
	int sp[2];
	if (pipe2(sp, O_CLOEXEC) < 0 || !(b.buf = calloc(1, BENCH_CHUNK))) {
		fprintf(stderr, "bench_proxy: setup: %s\n", strerror(errno));
		goto out;
	}
	b.stop_r = sp[0];
	b.stop_w = sp[1];
	memset(b.buf, 'x', BENCH_CHUNK);

	/* Every fork happens before the first thread. */
	if (bench_dnsmasq(&b) < 0 || bench_tinyproxy_start(&b, (size_t)idle) < 0 ||
	    bench_airlock_start(&b, (size_t)idle) < 0)
		goto out;
	if (bench_server_start(&b, &b.hold, BENCH_PORT_HOLD, hold_main, true, max_fd) < 0 ||
	    bench_server_start(&b, &b.sink, BENCH_PORT_SINK, sink_main, false, 0) < 0 ||
	    bench_server_start(&b, &b.source, BENCH_PORT_SOURCE, source_main, false, 0) < 0)
		goto out;
	if (bench_tinyproxy_ready(&b) < 0)
		goto out;

	double load[3] = { -1, -1, -1 };
	if (getloadavg(load, 3) != 3)
		load[0] = load[1] = load[2] = -1;
	printf("bench_proxy: nproc %ld, load average %.2f %.2f %.2f; %s, %s; own network "
	       "namespaces joined by a veth, 198.51.100.2 (servers) and 198.51.100.1 + lo 198.51.100.53 (proxies, dnsmasq)\n",
	       sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2], b.tinyproxy_path,
	       b.dnsmasq_path);
	printf("  airlock proxy: this bench's listener may hold %ld connections and accept "
	       "without a rate (the per-sandbox caps are lifted: the bench measures cost, not "
	       "limits)%s\n",
	       idle + 100, short_run ? "; --short: a run that only has to complete" : "");
	printf("  airlock CONNECTs %s (resolved via dnsmasq on every CONNECT); tinyproxy "
	       "CONNECTs %s (numeric: it would resolve via the machine's resolv.conf, which this "
	       "bench leaves alone), so airlock does strictly more work per setup\n",
	       BENCH_HOST, BENCH_SINK_ADDR);
	fflush(stdout);

	if (bench_throughput(&b, (uint64_t)mib << 20) < 0)
		goto out;
	fflush(stdout);
	if (bench_half_close_all(&b) < 0)
		goto out;
	fflush(stdout);
	if (bench_setup(&b, (size_t)connects) < 0)
		goto out;
	fflush(stdout);
	if (bench_idle_all(&b, (size_t)idle) < 0)
		goto out;
	if (getloadavg(load, 3) == 3)
		printf("bench_proxy: load average at the end %.2f %.2f %.2f\n", load[0], load[1],
		       load[2]);
	rc = 0;
out:
	fflush(stdout);
	bench_teardown(&b);
	if (rc != 0)
		fprintf(stderr, "bench_proxy: no figures: the run did not complete\n");
	return rc;
}
