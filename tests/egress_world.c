/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress tests' small internet (tests/egress_world.h): this process goes
 * into a new network namespace, a child holds a second one with the public
 * hosts and DNS servers (tests/egress/testhost.py), and a veth pair joins
 * them. Only 198.51.100.0/24 is assigned, and only in these two namespaces;
 * the machine's own namespace is never touched (the `ip` commands run after
 * this process has left it).
 *
 * Every wait is bounded, and the host cannot outlive the test: it exits when
 * its lifeline pipe closes (this process exiting closes it, however it
 * exits), and the kernel signals it when its parent dies.
 */
#include "egress_world.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORLD_UP_TIMEOUT_MS 20000
#define NS_TIMEOUT_MS 5000
#define IP_TIMEOUT_MS 10000
#define DOWN_TIMEOUT_MS 5000
#define PROBE_PORT 9001 /* A's sink: a connection there changes nothing */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int remaining_ms(int64_t deadline)
{
	int64_t left = deadline - now_ms();
	if (left < 0)
		return 0;
	return left > INT_MAX ? INT_MAX : (int)left;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Reap pid within timeout_ms: 0 (status in *ret_status), or -ETIMEDOUT. */
static int wait_pid(pid_t pid, int timeout_ms, int *ret_status)
{
	int64_t deadline = now_ms() + timeout_ms;
	for (;;) {
		int status;
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid) {
			if (ret_status)
				*ret_status = status;
			return 0;
		}
		if (r < 0 && errno != EINTR)
			return -errno;
		if (remaining_ms(deadline) == 0)
			return -ETIMEDOUT;
		sleep_ms(10);
	}
}

/* Reap pid, killing it if it does not exit within timeout_ms. */
static void end_pid(pid_t pid, int sig, int timeout_ms)
{
	if (sig)
		kill(pid, sig);
	if (wait_pid(pid, timeout_ms, NULL) == -ETIMEDOUT) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
}

/* Run ip(8) with argv (argv[0] "ip") in this process's namespace. */
static int run_ip(char *const argv[])
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execv("/usr/sbin/ip", argv);
		execv("/sbin/ip", argv);
		_exit(127);
	}
	int status = 0;
	if (wait_pid(pid, IP_TIMEOUT_MS, &status) < 0) {
		end_pid(pid, SIGKILL, 1000);
		fprintf(stderr, "egress world: ip %s: timed out\n", argv[1]);
		return -ETIMEDOUT;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "egress world: ip %s %s %s: failed (status %d)\n", argv[1],
		        argv[2] ? argv[2] : "", argv[2] && argv[3] ? argv[3] : "", status);
		return -EIO;
	}
	return 0;
}

static int link_up(const char *name)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	int r = ioctl(fd, SIOCGIFFLAGS, &ifr);
	if (r == 0) {
		ifr.ifr_flags |= IFF_UP;
		r = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	r = r < 0 ? -errno : 0;
	close(fd);
	return r;
}

/* testhost.py: under AIRLOCK_TEST_SOURCE_ROOT (meson sets it for every
 * test), else next to this file as the compiler saw it, else relative to
 * the usual working directories. */
static int find_testhost(char *buf, size_t size)
{
	const char *root = getenv("AIRLOCK_TEST_SOURCE_ROOT");
	if (root && *root) {
		snprintf(buf, size, "%s/tests/egress/testhost.py", root);
		if (access(buf, R_OK) == 0)
			return 0;
	}
	const char *file = __FILE__;
	const char *slash = strrchr(file, '/');
	int dirlen = slash ? (int)(slash - file) : 1;
	snprintf(buf, size, "%.*s/egress/testhost.py", dirlen, slash ? file : ".");
	if (access(buf, R_OK) == 0)
		return 0;
	static const char *const rel[] = { "tests/egress/testhost.py", "../tests/egress/testhost.py" };
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(buf, size, "%s", rel[i]);
		if (access(buf, R_OK) == 0)
			return 0;
	}
	fprintf(stderr, "egress world: tests/egress/testhost.py not found "
	                "(set AIRLOCK_TEST_SOURCE_ROOT)\n");
	return -ENOENT;
}

/* Read exactly len bytes (or up to EOF) from fd by deadline. */
static ssize_t read_by(int fd, char *buf, size_t len, int64_t deadline)
{
	size_t got = 0;
	while (got < len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int r = poll(&pfd, 1, remaining_ms(deadline));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		ssize_t n = read(fd, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static void close_pair(int fds[2])
{
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}

/* In the forked child: only async-signal-safe calls until exec. */
static void __attribute__((noreturn))
host_child(pid_t parent, int ns_w, int go_r, int ready_w, int life_r, char *const argv[])
{
	char c;

	/* The host must not outlive the test process, however that ends. */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
		_exit(1);
	if (unshare(CLONE_NEWNET) < 0)
		_exit(1);
	/* Tell the parent our namespace exists: only now may it move the veth
	 * peer here by our pid. */
	if (write(ns_w, "n", 1) != 1)
		_exit(1);
	if (read(go_r, &c, 1) != 1)
		_exit(1); /* the parent gave up */

	/* The host's two pipe ends as fds 3 and 4, nothing else inherited (a
	 * stray copy of a test framework's pipe would outlive the test). */
	int ready = fcntl(ready_w, F_DUPFD, 10);
	int life = fcntl(life_r, F_DUPFD, 10);
	if (ready < 0 || life < 0 || dup2(ready, 3) < 0 || dup2(life, 4) < 0)
		_exit(1);
	if (close_range(5, ~0u, 0) < 0)
		for (int fd = 5; fd < 1024; fd++)
			close(fd);
	execv("/usr/bin/python3", argv);
	execvp("python3", argv);
	_exit(127);
}

int egress_world_up(egress_world *w)
{
	int ns_pipe[2] = { -1, -1 }, go[2] = { -1, -1 }, ready_pipe[2] = { -1, -1 },
	    life_pipe[2] = { -1, -1 };
	char script[PATH_MAX], pidbuf[32], parentbuf[32];
	int64_t deadline = now_ms() + WORLD_UP_TIMEOUT_MS;

	memset(w, 0, sizeof(*w));
	w->host_pid = -1;
	w->life_fd = -1;
	if (find_testhost(script, sizeof(script)) < 0)
		return -1;

	snprintf(w->dir, sizeof(w->dir), "/tmp/egress-world.XXXXXX");
	if (!mkdtemp(w->dir)) {
		fprintf(stderr, "egress world: mkdtemp: %s\n", strerror(errno));
		w->dir[0] = 0;
		return -1;
	}
	snprintf(w->ca_path, sizeof(w->ca_path), "%s/ca.pem", w->dir);
	snprintf(w->dns_log, sizeof(w->dns_log), "%s/rebind-queries.log", w->dir);
	snprintf(w->dnsmasq_log, sizeof(w->dnsmasq_log), "%s/dnsmasq.log", w->dir);

	/* Leave the machine's namespace before anything is configured. */
	if (unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr, "egress world: unshare(CLONE_NEWNET): %s\n", strerror(errno));
		goto fail;
	}
	if (link_up("lo") < 0) {
		fprintf(stderr, "egress world: lo up: %s\n", strerror(errno));
		goto fail;
	}

	/* go is a socket pair so a write to a child that already died is an
	 * error, not a SIGPIPE. */
	if (pipe2(ns_pipe, O_CLOEXEC) < 0 || pipe2(ready_pipe, O_CLOEXEC) < 0 ||
	    pipe2(life_pipe, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) < 0) {
		fprintf(stderr, "egress world: pipe: %s\n", strerror(errno));
		goto fail;
	}

	pid_t parent = getpid();
	snprintf(parentbuf, sizeof(parentbuf), "%d", (int)parent);
	char *const host_argv[] = {
		"python3", script, "--dir", w->dir, "--ready-fd", "3", "--life-fd", "4",
		"--parent-pid", parentbuf, NULL,
	};
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "egress world: fork: %s\n", strerror(errno));
		goto fail;
	}
	if (pid == 0)
		host_child(parent, ns_pipe[1], go[1], ready_pipe[1], life_pipe[0], host_argv);
	w->host_pid = pid;
	w->life_fd = life_pipe[1];
	life_pipe[1] = -1;
	close(ns_pipe[1]);
	ns_pipe[1] = -1;
	close(ready_pipe[1]);
	ready_pipe[1] = -1;
	close(life_pipe[0]);
	life_pipe[0] = -1;

	char c;
	ssize_t n = read_by(ns_pipe[0], &c, 1, now_ms() + NS_TIMEOUT_MS);
	if (n != 1) {
		fprintf(stderr, "egress world: the host did not make its namespace\n");
		goto fail;
	}

	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
	char *const veth[] = { "ip", "link", "add", "al0", "type", "veth", "peer", "name",
		               "al1", "netns", pidbuf, NULL };
	char *const addr[] = { "ip", "addr", "add", EGRESS_WORLD_SELF "/24", "dev", "al0", NULL };
	char *const up[] = { "ip", "link", "set", "al0", "up", NULL };
	if (run_ip(veth) < 0 || run_ip(addr) < 0 || run_ip(up) < 0)
		goto fail;
	if (send(go[0], "g", 1, MSG_NOSIGNAL) != 1) {
		fprintf(stderr, "egress world: the host went away\n");
		goto fail;
	}
	close_pair(go);

	/* The host says "ready\n" only after each of its servers answered. */
	char ready[7] = { 0 };
	n = read_by(ready_pipe[0], ready, 6, deadline);
	if (n != 6 || memcmp(ready, "ready\n", 6) != 0) {
		fprintf(stderr, "egress world: the host was not ready within %d ms (%s)\n",
		        WORLD_UP_TIMEOUT_MS, n == -ETIMEDOUT ? "timed out" : "it exited");
		goto fail;
	}
	close_pair(ready_pipe);
	close_pair(ns_pipe);

	/* And the path across the veth pair works from this side. */
	for (;;) {
		int fd = egress_world_connect(EGRESS_WORLD_A, PROBE_PORT, 500);
		if (fd >= 0) {
			close(fd);
			break;
		}
		if (remaining_ms(deadline) == 0) {
			fprintf(stderr, "egress world: %s:%d unreachable: %s\n", EGRESS_WORLD_A,
			        PROBE_PORT, strerror(-fd));
			goto fail;
		}
		sleep_ms(20);
	}
	return 0;

fail:
	close_pair(ns_pipe);
	close_pair(go);
	close_pair(ready_pipe);
	close_pair(life_pipe);
	egress_world_down(w);
	return -1;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	remove(path);
	return 0;
}

void egress_world_down(egress_world *w)
{
	/* The lifeline first: the host stops on its own when it closes. */
	if (w->life_fd >= 0) {
		close(w->life_fd);
		w->life_fd = -1;
	}
	if (w->host_pid > 0) {
		end_pid(w->host_pid, SIGTERM, DOWN_TIMEOUT_MS);
		w->host_pid = -1;
	}
	if (w->dir[0]) {
		nftw(w->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		w->dir[0] = 0;
	}
}

unsigned egress_world_dns_queries(const egress_world *w, const char *name, int qtype)
{
	FILE *f = fopen(w->dns_log, "re");
	if (!f)
		return 0;
	char want[300];
	snprintf(want, sizeof(want), "%s %d\n", name, qtype);
	char *line = NULL;
	size_t cap = 0;
	unsigned n = 0;
	while (getline(&line, &cap, f) > 0)
		if (strcmp(line, want) == 0)
			n++;
	free(line);
	fclose(f);
	return n;
}

int egress_world_connect(const char *addr, int port, int timeout_ms)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (port <= 0 || port > 65535 || inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
		return -EINVAL;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	int r = 0;
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		if (errno != EINPROGRESS) {
			r = -errno;
			goto out;
		}
		int64_t deadline = now_ms() + timeout_ms;
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		int p;
		while ((p = poll(&pfd, 1, remaining_ms(deadline))) < 0 && errno == EINTR)
			;
		if (p <= 0) {
			r = p == 0 ? -ETIMEDOUT : -errno;
			goto out;
		}
		int soerr = 0;
		socklen_t len = sizeof(soerr);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
			soerr = errno;
		if (soerr) {
			r = -soerr;
			goto out;
		}
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		r = -errno;
out:
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}
