/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Whether another tenant's artifact is told apart from a missing one by
 * time (issue 21, "Downloads and uploads": "Another tenant's artifact id
 * is 404, the same answer as a missing one, in the same time";
 * docs/artifacts.md). The answers themselves are one body and one set of
 * headers (test_worker_artifacts_api); this measures what a tenant could
 * still learn from the clock.
 *
 * The real airlock-worker (auth_mode tokens, tenants a and b, SQLite in a
 * temporary state directory) holds one artifact of tenant a. Tenant b then
 * asks, interleaved in random order on one keep-alive connection:
 *
 *   other     GET /v1/artifacts/{a's id} and .../content: a row that exists,
 *             of another tenant;
 *   missing   the same for a UUIDv7 no row has;
 *   malformed the same for an id that is not a UUIDv7;
 *
 * and tenant a its own (200) as the reference of a found row. It prints
 * p50 and p99 of each and other/missing at p50 and p99. A ratio near 1.00
 * means the clock says nothing the answer does not; it asserts no time,
 * and exits 1 only when an answer was not the one expected.
 *
 *   bench_artifact_404 [rounds]   (default 4000; the suite's short mode 200)
 *
 * AIRLOCK_BENCH_WORKER names the airlock-worker program (default: the one
 * built beside this benchmark).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "airlock/ids.h"
#include "util/util.h"

#include "bench_util.h"
#include "bench_worker_proc.h"

#define TOKEN_A "bench-token-of-tenant-a-0123456789"
#define TOKEN_B "bench-token-of-tenant-b-0123456789"

enum { K_OTHER, K_MISSING, K_MALFORMED, K_OWN, K__MAX };
static const char *const k_name[K__MAX] = { "other tenant's", "missing", "malformed",
	                                    "own (200)" };

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp_double);
	size_t i = (size_t)(p * (double)(n - 1));
	return v[i];
}

/* tenant a's upload of a small artifact: its id into id, 0; or -1. */
static int upload(bw_conn *c, char id[AIRLOCK_UUID_STR_LEN + 1])
{
	static const char body[] = "an artifact of tenant a\n";
	char sha[65], head[512], buf[4096];
	if (util_sha256_hex(body, sizeof(body) - 1, sha) < 0 || bw_conn_ready(c) < 0)
		return -1;
	int n = snprintf(head, sizeof(head),
	                 "POST /v1/artifacts?filename=a.txt&media_type=text%%2Fplain HTTP/1.1\r\n"
	                 "Host: airlock\r\nAuthorization: Bearer " TOKEN_A "\r\n"
	                 "Airlock-Content-SHA256: %s\r\nContent-Length: %zu\r\n\r\n",
	                 sha, sizeof(body) - 1);
	if (n < 0 || (size_t)n >= sizeof(head) || util_write_all(c->fd, head, (size_t)n) < 0 ||
	    util_write_all(c->fd, body, sizeof(body) - 1) < 0)
		return -1;
	int status = 0;
	const char *answer = "";
	bool closing = false;
	const char *why = bw_read_answer(c->fd, buf, sizeof(buf), &status, &answer, &closing);
	if (closing)
		bw_conn_close(c);
	const char *p = why ? NULL : strstr(answer, "\"artifact_id\":\"");
	if (why || status != 201 || !p) {
		fprintf(stderr, "%s: upload: %s %d %.200s\n", bw_prog, why ? why : "", status, answer);
		return -1;
	}
	snprintf(id, AIRLOCK_UUID_STR_LEN + 1, "%s", p + 15);
	return airlock_uuidv7_valid(id) ? 0 : -1;
}

int main(int argc, char **argv)
{
	bw_prog = "bench_artifact_404";
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 4000;
	if (rounds < 10 || rounds > 1000000) {
		fprintf(stderr, "usage: bench_artifact_404 [rounds, 10..1000000]\n");
		return 2;
	}
	char dir[96], sock[160], config[160], tokens[160], log[160], text[1024];
	char prog_buf[PATH_MAX + 32];
	const char *prog =
		bw_program("AIRLOCK_BENCH_WORKER", "airlock-worker", prog_buf, sizeof(prog_buf));
	if (bw_make_dir(dir, sizeof(dir), "b404") < 0)
		return 1;
	snprintf(sock, sizeof(sock), "%s/w.sock", dir);
	snprintf(config, sizeof(config), "%s/airlock.yaml", dir);
	snprintf(tokens, sizeof(tokens), "%s/tokens", dir);
	/* Beside the directory, not in it: kept when the run fails. */
	snprintf(log, sizeof(log), "%s.log", dir);
	snprintf(text, sizeof(text),
	         "worker:\n  listen: unix:%s\n  state_dir: %s\n  auth_mode: tokens\n"
	         "  tokens_file: %s\n",
	         sock, dir, tokens);
	bool failed = bw_write_file(tokens, TOKEN_A " tenant-a\n" TOKEN_B " tenant-b\n") < 0 ||
	              bw_write_file(config, text) < 0;
	char *wargv[] = { "airlock-worker", "--config", config, NULL };
	pid_t worker = failed ? -1 : bw_start(prog, wargv, log, sock);
	failed = failed || worker < 0;
	bw_conn c = { .sock = sock, .fd = -1 };
	char id[AIRLOCK_UUID_STR_LEN + 1] = "", missing[AIRLOCK_UUID_STR_LEN + 1] = "";
	airlock_error err = { 0 };
	failed = failed || upload(&c, id) < 0 || airlock_uuidv7_new(missing, &err) < 0;
	/* per kind, the metadata and the content route: 2 * rounds samples */
	double *t[K__MAX] = { 0 };
	size_t n[K__MAX] = { 0 };
	for (int k = 0; k < K__MAX && !failed; k++)
		failed = !(t[k] = calloc(2 * (size_t)rounds, sizeof(double)));
	char buf[8192], target[128];
	for (long r = 0; r < rounds && !failed; r++) {
		int order[K__MAX] = { K_OTHER, K_MISSING, K_MALFORMED, K_OWN };
		unsigned char rnd[K__MAX];
		failed = util_random(rnd, sizeof(rnd)) < 0;
		for (int i = K__MAX - 1; i > 0 && !failed; i--) {
			int j = rnd[i] % (i + 1), x = order[i];
			order[i] = order[j];
			order[j] = x;
		}
		for (int i = 0; i < K__MAX && !failed; i++) {
			int k = order[i];
			const char *which = k == K_MISSING ? missing
			                    : k == K_MALFORMED ? "0192d3f5-not-a-uuid"
			                                       : id;
			for (int content = 0; content < 2 && !failed; content++) {
				snprintf(target, sizeof(target), "/v1/artifacts/%s%s", which,
				         content ? "/content" : "");
				/* Connected before the clock starts: bw_call connects
				 * only when the last answer closed the connection. */
				failed = bw_conn_ready(&c) < 0;
				int64_t t0 = bench_now_ns();
				failed = failed || bw_expect(&c, "GET", target,
				                             k == K_OWN ? TOKEN_A : TOKEN_B, NULL,
				                             k == K_OWN ? 200 : 404, NULL, buf,
				                             sizeof(buf)) < 0;
				t[k][n[k]++] = (double)(bench_now_ns() - t0) / 1000.0;
			}
		}
	}
	bw_conn_close(&c);
	if (!failed) {
		printf("bench_artifact_404: %ld rounds, metadata and content each, one keep-alive "
		       "connection, order shuffled per round; nproc %ld\n",
		       rounds, sysconf(_SC_NPROCESSORS_ONLN));
		double p50[K__MAX], p99[K__MAX];
		for (int k = 0; k < K__MAX; k++) {
			p50[k] = pct(t[k], n[k], 0.50);
			p99[k] = pct(t[k], n[k], 0.99);
			printf("  %-16s p50 %8.1f us   p99 %8.1f us\n", k_name[k], p50[k], p99[k]);
		}
		printf("  another tenant's id over a missing one: p50 %.2fx, p99 %.2fx\n",
		       p50[K_OTHER] / p50[K_MISSING], p99[K_OTHER] / p99[K_MISSING]);
	}
	for (int k = 0; k < K__MAX; k++)
		free(t[k]);
	failed = !bw_stop_clean(worker, "airlock-worker") || failed;
	failed = !bw_remove(dir, log, failed) || failed;
	return failed ? 1 : 0;
}
