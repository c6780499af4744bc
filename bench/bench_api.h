/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_BENCH_API_H
#define AIRLOCK_BENCH_API_H

/*
 * What the service benchmarks (bench_service.c, bench_service_exec.c)
 * share: an execution service in this process in front of a core the
 * benchmark opened, the remote adapter through it over a Unix socket, and
 * the execute pair (/bin/true through the API beside the same core in
 * process, interleaved, the side that goes first alternating). Include
 * after bench_sandbox.h, with bench_prog set.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "airlock/remote.h"
#include "airlock/service.h"

typedef struct bench_api {
	airlock_exec *local;  /* the core, called in process (the benchmark's) */
	airlock_exec *remote; /* the same core through the API */
	airlock_service *svc;
	char dir[64];
	char sock[96];
} bench_api;

/* The API in front of c->local (already open), with credential. */
static inline int bench_api_open(bench_api *c, const char *credential)
{
	airlock_error err = { 0 };
	snprintf(c->dir, sizeof(c->dir), "/tmp/airlock-bench-XXXXXX");
	if (!mkdtemp(c->dir)) {
		fprintf(stderr, "%s: mkdtemp: %s\n", bench_prog, strerror(errno));
		c->dir[0] = 0;
		return -1;
	}
	snprintf(c->sock, sizeof(c->sock), "%s/api.sock", c->dir);
	char listen[128];
	snprintf(listen, sizeof(listen), "unix:%s", c->sock);
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.listen = listen;
	sc.credential = credential;
	sc.credential_len = strlen(credential);
	if (airlock_service_new(&sc, c->local, &c->svc, &err) < 0) {
		fprintf(stderr, "%s: %s\n", bench_prog, err.message);
		return -1;
	}
	airlock_remote_config rc = { .address = listen, .credential = credential,
		                     .credential_len = strlen(credential) };
	airlock_remote *rm = NULL;
	if (airlock_remote_new(&rc, &rm, &err) < 0 ||
	    airlock_exec_new(airlock_remote_ops(), rm, NULL, &c->remote, &err) < 0) {
		fprintf(stderr, "%s: %s\n", bench_prog, err.message);
		return -1;
	}
	return 0;
}

/* The client, the service, then the core; the socket and its directory. */
static inline void bench_api_close(bench_api *c)
{
	airlock_exec_free(c->remote);
	airlock_service_free(c->svc);
	airlock_exec_free(c->local);
	c->remote = c->local = NULL;
	c->svc = NULL;
	if (c->sock[0])
		unlink(c->sock);
	if (c->dir[0])
		rmdir(c->dir);
	c->sock[0] = c->dir[0] = 0;
}

/* /bin/true execs times on each side in one live sandbox of spec each,
 * after a warm-up; prints both sides' p50 and p99, what the API adds at
 * each and the ratio, and whether the API adds under aim_ms at p50. */
static inline int bench_api_execute_pair(bench_api *c, const airlock_environment_spec *spec,
                                         const char *mech, size_t execs, double aim_ms)
{
	int rc = -1;
	int64_t *api = calloc(execs, sizeof(int64_t)), *local = calloc(execs, sizeof(int64_t));
	int64_t scratch = 0;
	airlock_environment_handle ha = { 0 }, hl = { 0 };
	bool la = false, ll = false;
	if (!api || !local)
		goto out;
	if (bench_provision(c->remote, spec, &ha, &scratch) < 0)
		goto out;
	la = true;
	if (bench_provision(c->local, spec, &hl, &scratch) < 0)
		goto out;
	ll = true;
	for (int i = 0; i < BENCH_WARMUP * 4; i++)
		if (bench_execute(c->remote, &ha, &scratch) < 0 ||
		    bench_execute(c->local, &hl, &scratch) < 0)
			goto out;
	size_t ka = 0, kl = 0;
	for (int r = 0; r < BENCH_ROUNDS; r++) {
		size_t n = bench_share(execs, r);
		for (int side = 0; side < 2; side++) {
			bool remote = (side == 0) == (r % 2 == 0);
			for (size_t i = 0; i < n; i++)
				if (remote ? bench_execute(c->remote, &ha, &api[ka++]) < 0
				           : bench_execute(c->local, &hl, &local[kl++]) < 0)
					goto out;
		}
	}
	bench_stat a = bench_stats(api, execs), l = bench_stats(local, execs);
	char in_process[64];
	snprintf(in_process, sizeof(in_process), "in process (%s)", mech);
	printf("execute /bin/true in one live sandbox, %s, %zu runs each, %d interleaved rounds:\n",
	       mech, execs, BENCH_ROUNDS);
	printf("  %-34s p50 %8.3f ms   p99 %8.3f ms\n", "through the API (remote)", a.p50_ms,
	       a.p99_ms);
	printf("  %-34s p50 %8.3f ms   p99 %8.3f ms\n", in_process, l.p50_ms, l.p99_ms);
	printf("  %-34s p50 %+8.3f ms   p99 %+8.3f ms\n", "the API adds", a.p50_ms - l.p50_ms,
	       a.p99_ms - l.p99_ms);
	printf("  %-34s p50 %8.3fx     p99 %8.3fx\n", "ratio (API / in process)", a.p50_ms / l.p50_ms,
	       a.p99_ms / l.p99_ms);
	printf("  aim: the API adds under %.1f ms at p50: %s (%+.3f ms)\n", aim_ms,
	       a.p50_ms - l.p50_ms < aim_ms ? "met" : "NOT met", a.p50_ms - l.p50_ms);
	rc = 0;
out:
	if (la && bench_destroy(c->remote, &ha, &scratch) < 0)
		rc = -1;
	if (ll && bench_destroy(c->local, &hl, &scratch) < 0)
		rc = -1;
	free(api);
	free(local);
	return rc;
}

#endif
