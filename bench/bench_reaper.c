/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What one reaper pass (src/service/reaper.h) costs the service: a pass
 * over 1,000 live fake sandboxes against a worker tier double on a Unix
 * socket in this process (its own thread, whose CPU is not counted), in
 * two shapes:
 *
 *   current  none stale: the listing, one question of 1,000 entries
 *            (1024 is the batch), the answer's parse (the steady state);
 *   stale    every one stale: the same and 1,000 destroys through the
 *            core (re-provisioned between passes, not timed).
 *
 * The service's CPU is the pass's thread's (CLOCK_THREAD_CPUTIME_ID: the
 * pass runs on the caller's thread, as on the reaper's own), printed at p50
 * and max beside the wall time and as a share of the default interval
 * (60 s). No time is asserted; it exits non-zero when a pass failed.
 *
 *   bench_reaper [passes]   (default 20; the suite runs 3)
 */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "airlock/fake.h"
#include "airlock/port/exec.h"
#include "service/reaper.h"

#include "bench_util.h"

#define LIVE 1000
#define INTERVAL_MS 60000
#define TOKEN "bench-reaper-token-0123456789abcdef"

typedef struct worker {
	int lfd, stop;
	int64_t stale_below; /* epochs below this are stale */
} worker;

static void put_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* One question, answered by epoch; whatever goes wrong closes it (the
 * pass then fails, and the benchmark with it). */
static void serve_one(worker *w, int fd)
{
	size_t cap = 2u << 20, have = 0, body_off = 0, clen = 0;
	char *buf = malloc(cap + 1);
	int head = 0;
	while (buf && have < cap) {
		ssize_t n = recv(fd, buf + have, cap - have, 0);
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = 0;
		if (!head) {
			char *e = strstr(buf, "\r\n\r\n");
			if (!e)
				continue;
			head = 1;
			body_off = (size_t)(e - buf) + 4;
			char *cl = strcasestr(buf, "\r\ncontent-length:");
			clen = cl ? strtoul(cl + 17, NULL, 10) : 0;
		}
		if (have - body_off < clen)
			continue;
		json_t *root = json_loadb(buf + body_off, clen, 0, NULL);
		json_t *stale = json_array(), *el;
		size_t i;
		json_array_foreach(json_object_get(root, "sandboxes"), i, el)
			if (json_integer_value(json_object_get(el, "lease_epoch")) < w->stale_below)
				json_array_append(stale, json_object_get(el, "environment_id"));
		json_t *o = json_pack("{s:o}", "stale", stale);
		char *ans = json_dumps(o, JSON_COMPACT);
		char hdr[128];
		snprintf(hdr, sizeof(hdr), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n",
		         ans ? strlen(ans) : 0);
		put_all(fd, hdr, strlen(hdr));
		if (ans)
			put_all(fd, ans, strlen(ans));
		free(ans);
		json_decref(o);
		json_decref(root);
		break;
	}
	free(buf);
	close(fd);
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	for (;;) {
		struct pollfd p[2] = { { .fd = w->lfd, .events = POLLIN },
			               { .fd = w->stop, .events = POLLIN } };
		if (poll(p, 2, -1) < 0 || p[1].revents)
			return NULL;
		int fd = accept4(w->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			serve_one(w, fd);
	}
}

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int provision_n(airlock_exec *e, size_t n, int64_t epoch)
{
	char tenant[] = "bench-tenant", run[] = "bench-run",
	     image[] = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
	airlock_environment_spec s = { 0 };
	s.tenant_id = tenant;
	s.run_id = run;
	s.lease_epoch = epoch;
	s.image_digest = image;
	s.limits = (airlock_resource_limits){ .cpu_millicores = 1000, .memory_bytes = 256ll << 20,
		                              .pids_max = 64, .workspace_bytes = 64ll << 20,
		                              .inodes_max = 10000, .wall_clock_seconds = 60 };
	s.egress.mode = AIRLOCK_EGRESS_DENY;
	for (size_t i = 0; i < n; i++) {
		airlock_environment_handle h = { 0 };
		airlock_error err = { 0 };
		if (airlock_exec_provision(e, &s, &h, &err) < 0) {
			fprintf(stderr, "bench_reaper: provision: %s\n", err.message);
			return -1;
		}
		airlock_environment_handle_clear(&h);
	}
	return 0;
}

static int run_shape(const char *name, svc_reaper *r, airlock_exec *e, worker *w, bool stale,
                     int passes)
{
	int64_t *cpu = calloc((size_t)passes, sizeof(*cpu));
	int64_t *wall = calloc((size_t)passes, sizeof(*wall));
	int bad = !cpu || !wall;
	w->stale_below = stale ? 2 : 0;
	for (int i = 0; !bad && i < passes; i++) {
		size_t have = airlock_exec_live(e);
		if (have < LIVE && provision_n(e, LIVE - have, 1) < 0) {
			bad = 1;
			break;
		}
		svc_reaper_pass_stats st;
		int64_t c0 = thread_cpu_ns(), t0 = bench_now_ns();
		svc_reaper_pass(r, &st);
		cpu[i] = thread_cpu_ns() - c0;
		wall[i] = bench_now_ns() - t0;
		size_t want = stale ? LIVE : 0;
		if (st.error || st.live != LIVE || st.asked != LIVE || st.destroyed != want) {
			fprintf(stderr,
			        "bench_reaper: %s pass %d: error %d, live %zu, asked %zu, destroyed %zu\n",
			        name, i, st.error, st.live, st.asked, st.destroyed);
			bad = 1;
		}
	}
	if (!bad) {
		int64_t cmax = 0;
		for (int i = 0; i < passes; i++)
			cmax = cpu[i] > cmax ? cpu[i] : cmax;
		int64_t c50 = bench_pct(cpu, (size_t)passes, 50);
		int64_t w50 = bench_pct(wall, (size_t)passes, 50);
		printf("%-8s %5d live  cpu p50 %7.2f ms  max %7.2f ms  wall p50 %7.2f ms  "
		       "cpu/interval (60 s) %.5f%%\n",
		       name, LIVE, bench_ms(c50), bench_ms(cmax), bench_ms(w50),
		       100.0 * bench_ms(c50) / INTERVAL_MS);
	}
	free(cpu);
	free(wall);
	return bad;
}

int main(int argc, char **argv)
{
	int passes = argc > 1 ? atoi(argv[1]) : 20;
	if (passes <= 0) {
		fprintf(stderr, "usage: bench_reaper [passes]\n");
		return 2;
	}
	char dir[] = "/tmp/airlock-bench-reaper-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("bench_reaper: mkdtemp");
		return 1;
	}
	worker w = { .lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0),
		     .stop = eventfd(0, EFD_CLOEXEC) };
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/w.sock", dir);
	char addr[160];
	snprintf(addr, sizeof(addr), "unix:%s", sun.sun_path);
	pthread_t th;
	if (w.lfd < 0 || w.stop < 0 || bind(w.lfd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    listen(w.lfd, 16) < 0 || pthread_create(&th, NULL, worker_main, &w) != 0) {
		perror("bench_reaper: the worker double");
		return 1;
	}
	airlock_error err = { 0 };
	airlock_fake *f = NULL;
	airlock_exec *e = NULL;
	svc_reaper *r = NULL;
	airlock_exec_config cfg;
	airlock_exec_config_default(&cfg);
	svc_reaper_config rc = { .address = addr, .credential = TOKEN,
		                 .credential_len = strlen(TOKEN), .interval_ms = INTERVAL_MS,
		                 .alert_after = 3 };
	if (airlock_fake_new(&f, &err) < 0 ||
	    airlock_exec_new(airlock_fake_ops(), f, &cfg, &e, &err) < 0 ||
	    svc_reaper_new(e, &rc, &r, &err) < 0) {
		fprintf(stderr, "bench_reaper: %s\n", err.message);
		return 1;
	}
	printf("one reaper pass, %d passes each (the service's CPU: the pass's thread)\n", passes);
	int bad = run_shape("current", r, e, &w, false, passes);
	bad |= run_shape("stale", r, e, &w, true, passes);
	svc_reaper_free(r);
	airlock_exec_free(e);
	uint64_t one = 1;
	if (write(w.stop, &one, sizeof(one)) < 0)
		bad = 1;
	pthread_join(th, NULL);
	close(w.lfd);
	close(w.stop);
	unlink(sun.sun_path);
	rmdir(dir);
	return bad ? 1 : 0;
}
