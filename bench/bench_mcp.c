/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock mcp beside airlock run (docs/mcp.md, docs/performance.md): the
 * same command, /bin/true, in one run, interleaved (the side that goes
 * first alternates), three ways:
 *
 *   run    `airlock run -- /bin/true`, the process end to end: provision,
 *          execute, destroy, exit;
 *   cold   a new `airlock mcp` session end to end: initialize, the first
 *          tools/call (which provisions), stdin closed, the sandbox
 *          destroyed, exit: what an agent pays for a one-call session;
 *   warm   one tools/call round trip in a session whose sandbox exists
 *          (the agent's every call after its first), from the request's
 *          first byte written to the answer's newline read.
 *
 * It prints p50 and p99 of each and the ratios cold/run and warm/run. It
 * asserts no time; it exits 1 when a call failed (a result without
 * exit_code 0), 77 when the mechanism it asked for cannot run here.
 *
 *   bench_mcp [rounds [native|fake]]   (default 30; native when this
 *                                       process is root and the image
 *                                       store has a default image)
 *
 * AIRLOCK_BENCH_AIRLOCK names the program (default: the one built beside
 * this benchmark); AIRLOCK_IMAGE_STORE the store.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

#define ROUNDS_DEFAULT 30
#define ROUNDS_MAX 10000
#define WARM_PER_ROUND 5

static const char *airlock;
static const char *mechanism;
static char artifacts[64];

static const char init_line[] =
	"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
	"\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\",\"version\":\"1\"}}}\n"
	"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";

typedef struct session {
	pid_t pid;
	int in, out;
	char buf[65536];
	size_t len;
} session;

static pid_t spawn(const char *const argv[], int *ret_in, int *ret_out)
{
	int pin[2], pout[2];
	if (pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(pin[0], 0);
		dup2(pout[1], 1);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 2);
		/* execv takes char *const[] for history's sake; it writes none. */
		execv(argv[0], (char *const *)(uintptr_t)argv);
		_exit(127);
	}
	close(pin[0]);
	close(pout[1]);
	*ret_in = pin[1];
	*ret_out = pout[0];
	return pid;
}

static bool write_all(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, s, n);
		if (w <= 0)
			return false;
		s += w;
		n -= (size_t)w;
	}
	return true;
}

/* The next line into line (at most size); false at EOF or after 60 s. */
static bool read_line(session *s, char *line, size_t size)
{
	for (;;) {
		char *nl = memchr(s->buf, '\n', s->len);
		if (nl) {
			size_t n = (size_t)(nl - s->buf);
			snprintf(line, size, "%.*s", (int)n, s->buf);
			memmove(s->buf, nl + 1, s->len - n - 1);
			s->len -= n + 1;
			return true;
		}
		if (s->len == sizeof(s->buf))
			s->len = 0; /* a line longer than the buffer: not one of ours */
		struct pollfd p = { .fd = s->out, .events = POLLIN };
		if (poll(&p, 1, 60000) <= 0)
			return false;
		ssize_t r = read(s->out, s->buf + s->len, sizeof(s->buf) - s->len);
		if (r <= 0)
			return false;
		s->len += (size_t)r;
	}
}

static bool session_open(session *s)
{
	const char *const argv[] = { airlock, "mcp", "--mechanism", mechanism, "--artifacts-dir",
		                     artifacts, NULL };
	*s = (session){ 0 };
	s->pid = spawn(argv, &s->in, &s->out);
	char line[4096];
	return s->pid > 0 && write_all(s->in, init_line, sizeof(init_line) - 1) &&
	       read_line(s, line, sizeof(line)) && strstr(line, "\"protocolVersion\"");
}

/* One tools/call of /bin/true; true when it answered exit_code 0. */
static bool session_call(session *s, int id)
{
	char req[256], line[16384];
	int n = snprintf(req, sizeof(req),
	                 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
	                 "\"sandbox.run_command\",\"arguments\":{\"command\":[\"/bin/true\"]}}}\n",
	                 id);
	return write_all(s->in, req, (size_t)n) && read_line(s, line, sizeof(line)) &&
	       strstr(line, "\"exit_code\":0");
}

static bool session_close(session *s)
{
	close(s->in);
	int st = 0;
	waitpid(s->pid, &st, 0);
	close(s->out);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static bool run_once(void)
{
	const char *const argv[] = { airlock, "run", "--mechanism", mechanism, "--", "/bin/true",
		                     NULL };
	int in, out;
	pid_t pid = spawn(argv, &in, &out);
	if (pid < 0)
		return false;
	close(in);
	char sink[4096];
	while (read(out, sink, sizeof(sink)) > 0)
		;
	close(out);
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static bool cold_once(void)
{
	session s;
	bool ok = session_open(&s) && session_call(&s, 1);
	return session_close(&s) && ok;
}

static void report(const char *name, int64_t *v, size_t n, double *ret_p50)
{
	double p50 = bench_ms(bench_pct(v, n, 50)), p99 = bench_ms(bench_pct(v, n, 99));
	printf("  %-5s p50 %8.2f ms   p99 %8.2f ms   (%zu)\n", name, p50, p99, n);
	*ret_p50 = p50;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : ROUNDS_DEFAULT;
	if (rounds < 1 || rounds > ROUNDS_MAX) {
		fprintf(stderr, "usage: bench_mcp [rounds (1..%d) [native|fake]]\n", ROUNDS_MAX);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	static char self_airlock[4096];
	airlock = getenv("AIRLOCK_BENCH_AIRLOCK");
	if (!airlock) {
		ssize_t n = readlink("/proc/self/exe", self_airlock, sizeof(self_airlock) - 32);
		char *slash = n > 0 ? memrchr(self_airlock, '/', (size_t)n) : NULL;
		if (!slash)
			return 2;
		*slash = 0;
		slash = strrchr(self_airlock, '/'); /* build/bench -> build */
		if (slash)
			strcpy(slash, "/airlock");
		airlock = self_airlock;
	}
	const char *store = getenv("AIRLOCK_IMAGE_STORE") ? getenv("AIRLOCK_IMAGE_STORE")
	                                                   : "/var/lib/airlock/images";
	char probe[512];
	snprintf(probe, sizeof(probe), "AIRLOCK_IMAGE_STORE=%s '%s' image ls 2>/dev/null | grep -q ' default$'",
	         store, airlock);
	bool can_native = geteuid() == 0 && system(probe) == 0;
	mechanism = argc > 2 ? argv[2] : can_native ? "native" : "fake";
	if (strcmp(mechanism, "native") == 0 && !can_native) {
		printf("bench_mcp: native needs root and a default image in %s\n", store);
		return 77;
	}
	if (strcmp(mechanism, "native") && strcmp(mechanism, "fake")) {
		fprintf(stderr, "bench_mcp: native or fake\n");
		return 2;
	}
	setenv("AIRLOCK_IMAGE_STORE", store, 0);
	snprintf(artifacts, sizeof(artifacts), "/tmp/airlock-bench-mcp-XXXXXX");
	if (!mkdtemp(artifacts))
		return 1;

	int64_t *run = calloc((size_t)rounds, sizeof(int64_t));
	int64_t *cold = calloc((size_t)rounds, sizeof(int64_t));
	int64_t *warm = calloc((size_t)rounds * WARM_PER_ROUND, sizeof(int64_t));
	if (!run || !cold || !warm)
		return 1;
	session warm_s;
	bool ok = session_open(&warm_s) && session_call(&warm_s, 1); /* provisions */
	int id = 2;
	size_t nw = 0;
	for (long i = 0; ok && i < rounds; i++) {
		for (int side = 0; side < 3 && ok; side++) {
			int which = (int)((side + i) % 3); /* the first side alternates */
			int64_t t0 = bench_now_ns();
			if (which == 0) {
				ok = run_once();
				run[i] = bench_now_ns() - t0;
			} else if (which == 1) {
				ok = cold_once();
				cold[i] = bench_now_ns() - t0;
			} else {
				for (int k = 0; k < WARM_PER_ROUND && ok; k++) {
					int64_t t1 = bench_now_ns();
					ok = session_call(&warm_s, id++);
					warm[nw++] = bench_now_ns() - t1;
				}
			}
		}
	}
	ok = session_close(&warm_s) && ok;
	char rm[128];
	snprintf(rm, sizeof(rm), "rm -rf %s", artifacts);
	if (system(rm) != 0)
		ok = false;
	if (!ok) {
		fprintf(stderr, "bench_mcp: a call failed\n");
		return 1;
	}
	printf("bench_mcp: /bin/true, mechanism %s, %ld rounds, interleaved\n", mechanism, rounds);
	double p_run, p_cold, p_warm;
	report("run", run, (size_t)rounds, &p_run);
	report("cold", cold, (size_t)rounds, &p_cold);
	report("warm", warm, nw, &p_warm);
	printf("  ratio cold/run %.2f   warm/run %.3f   (p50)\n", p_cold / p_run, p_warm / p_run);
	free(run);
	free(cold);
	free(warm);
	return 0;
}
