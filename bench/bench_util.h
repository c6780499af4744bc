/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_BENCH_UTIL_H
#define AIRLOCK_BENCH_UTIL_H

/* Time and percentiles, shared by the benchmarks. */

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline int64_t bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline double bench_ms(int64_t ns)
{
	return (double)ns / 1e6;
}

static inline int bench_cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentile of n samples; sorts v. */
static inline int64_t bench_pct(int64_t *v, size_t n, unsigned pct)
{
	qsort(v, n, sizeof(*v), bench_cmp_i64);
	size_t rank = (n * pct + 99) / 100;
	return v[rank > 0 ? rank - 1 : 0];
}

#endif
