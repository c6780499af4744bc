/* SPDX-License-Identifier: Apache-2.0 */
/* environment_id and UUIDv7 (RFC 9562 section 5.7): shape, version and
 * variant bits, uniqueness, strict ordering within one process, time. */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/ids.h"
#include "util/util.h"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* ---- environment_id ------------------------------------------------------ */

Test(environment_id, format)
{
	for (int i = 0; i < 1000; i++) {
		char id[AIRLOCK_ENVIRONMENT_ID_MAX];
		memset(id, 'Z', sizeof(id));
		cr_assert_eq(airlock_environment_id_new(id, NULL), 0);
		cr_assert_eq(strlen(id), 36, "%s", id);
		cr_assert(strncmp(id, "env_", 4) == 0, "%s", id);
		for (int k = 4; k < 36; k++)
			cr_assert_geq(hexval(id[k]), 0, "non-hex in %s", id);
		cr_assert(airlock_environment_id_valid(id), "%s", id);
		/* usable wherever a tenant-style identifier is required */
		cr_assert(airlock_id_valid(id), "%s", id);
	}
}

Test(environment_id, valid_rejects)
{
	const char *bad[] = {
		"",
		"env_",
		"env_0123456789abcdef0123456789abcde",   /* 31 */
		"env_0123456789abcdef0123456789abcdef0", /* 33 */
		"env_0123456789ABCDEF0123456789abcdef",  /* uppercase */
		"ENV_0123456789abcdef0123456789abcdef",
		"vm_0123456789abcdef0123456789abcdef",
		"env-0123456789abcdef0123456789abcdef",
		"env_0123456789abcdef0123456789abcdeg",
		"env_0123456789abcdef/123456789abcdef",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_not(airlock_environment_id_valid(bad[i]), "accepted %s", bad[i]);
	cr_assert_not(airlock_environment_id_valid(NULL));
	cr_assert(airlock_environment_id_valid("env_0123456789abcdef0123456789abcdef"));
}

Test(environment_id, unique)
{
	enum { N = 10000 };
	char **ids = calloc(N, sizeof(char *));
	for (int i = 0; i < N; i++) {
		ids[i] = malloc(AIRLOCK_ENVIRONMENT_ID_MAX);
		cr_assert_eq(airlock_environment_id_new(ids[i], NULL), 0);
	}
	qsort(ids, N, sizeof(char *), cmp_str);
	for (int i = 1; i < N; i++)
		cr_assert_str_neq(ids[i - 1], ids[i], "duplicate %s", ids[i]);
	for (int i = 0; i < N; i++)
		free(ids[i]);
	free(ids);
}

/* ---- UUIDv7 --------------------------------------------------------------- */

static void check_uuid_shape(const char *u)
{
	cr_assert_eq(strlen(u), AIRLOCK_UUID_STR_LEN, "%s", u);
	for (int i = 0; i < AIRLOCK_UUID_STR_LEN; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23)
			cr_assert_eq(u[i], '-', "%s", u);
		else
			cr_assert_geq(hexval(u[i]), 0, "not lowercase hex at %d: %s", i, u);
	}
	/* version: the high nibble of octet 6 */
	cr_assert_eq(u[14], '7', "version in %s", u);
	/* variant: the two high bits of octet 8 are 10 */
	cr_assert_eq(hexval(u[19]) >> 2, 2, "variant in %s", u);
	cr_assert(airlock_uuidv7_valid(u), "%s", u);
}

Test(uuidv7, format_version_variant)
{
	for (int i = 0; i < 10000; i++) {
		char u[AIRLOCK_UUID_STR_LEN + 1];
		cr_assert_eq(airlock_uuidv7_new(u, NULL), 0);
		check_uuid_shape(u);
	}
}

Test(uuidv7, random_bits_vary)
{
	/* rand_b is 62 random bits: over many ids every hex position after the
	 * variant nibble takes more than one value, and the variant nibble
	 * itself takes all four of 8, 9, a, b. */
	enum { N = 2000 };
	char seen[AIRLOCK_UUID_STR_LEN][16] = { { 0 } };
	for (int i = 0; i < N; i++) {
		char u[AIRLOCK_UUID_STR_LEN + 1];
		cr_assert_eq(airlock_uuidv7_new(u, NULL), 0);
		for (int k = 0; k < AIRLOCK_UUID_STR_LEN; k++)
			if (u[k] != '-')
				seen[k][hexval(u[k])] = 1;
	}
	for (int k = 20; k < AIRLOCK_UUID_STR_LEN; k++) {
		if (k == 23)
			continue;
		int distinct = 0;
		for (int v = 0; v < 16; v++)
			distinct += seen[k][v];
		cr_assert_geq(distinct, 8, "position %d looks constant (%d values)", k, distinct);
	}
	int variants = seen[19][8] + seen[19][9] + seen[19][10] + seen[19][11];
	cr_assert_eq(variants, 4);
	for (int v = 0; v < 8; v++)
		cr_assert_eq(seen[19][v], 0);
	for (int v = 12; v < 16; v++)
		cr_assert_eq(seen[19][v], 0);
}

Test(uuidv7, unique_10k)
{
	enum { N = 10000 };
	char (*ids)[AIRLOCK_UUID_STR_LEN + 1] = calloc(N, sizeof(*ids));
	char **p = calloc(N, sizeof(char *));
	for (int i = 0; i < N; i++) {
		cr_assert_eq(airlock_uuidv7_new(ids[i], NULL), 0);
		p[i] = ids[i];
	}
	qsort(p, N, sizeof(char *), cmp_str);
	for (int i = 1; i < N; i++)
		cr_assert_str_neq(p[i - 1], p[i], "duplicate %s", p[i]);
	free(p);
	free(ids);
}

Test(uuidv7, strictly_increasing_100k_tight_loop)
{
	enum { N = 100000 };
	char prev[AIRLOCK_UUID_STR_LEN + 1], cur[AIRLOCK_UUID_STR_LEN + 1];
	cr_assert_eq(airlock_uuidv7_new(prev, NULL), 0);
	int64_t start = util_now_ms();
	int same_ms = 0;
	for (int i = 1; i < N; i++) {
		cr_assert_eq(airlock_uuidv7_new(cur, NULL), 0);
		/* String order is byte order is time-then-counter order. */
		cr_assert_gt(strcmp(cur, prev), 0, "not increasing at %d: %s then %s", i, prev, cur);
		if (airlock_uuidv7_time_ms(cur) == airlock_uuidv7_time_ms(prev))
			same_ms++;
		memcpy(prev, cur, sizeof(cur));
	}
	int64_t end = util_now_ms();
	/* The loop must actually have exercised the in-millisecond counter. */
	cr_assert_gt(same_ms, 0);
	/* Borrowing milliseconds on counter overflow must stay bounded: the last
	 * timestamp is not far ahead of the clock. */
	cr_assert_leq(airlock_uuidv7_time_ms(prev), end + 100, "timestamp ran ahead of the clock");
	cr_assert_geq(airlock_uuidv7_time_ms(prev), start);
}

typedef struct thread_arg {
	int n;
	char (*ids)[AIRLOCK_UUID_STR_LEN + 1];
} thread_arg;

static void *gen_thread(void *p)
{
	thread_arg *a = p;
	for (int i = 0; i < a->n; i++)
		if (airlock_uuidv7_new(a->ids[i], NULL) < 0)
			return (void *)1;
	return NULL;
}

Test(uuidv7, threads_unique_and_each_increasing)
{
	enum { T = 8, N = 5000 };
	pthread_t th[T];
	thread_arg args[T];
	for (int t = 0; t < T; t++) {
		args[t] = (thread_arg){ .n = N, .ids = calloc(N, sizeof(*args[t].ids)) };
		cr_assert_eq(pthread_create(&th[t], NULL, gen_thread, &args[t]), 0);
	}
	char **all = calloc(T * N, sizeof(char *));
	for (int t = 0; t < T; t++) {
		void *ret;
		pthread_join(th[t], &ret);
		cr_assert_null(ret);
		for (int i = 0; i < N; i++) {
			if (i > 0)
				cr_assert_gt(strcmp(args[t].ids[i], args[t].ids[i - 1]), 0);
			all[t * N + i] = args[t].ids[i];
		}
	}
	qsort(all, T * N, sizeof(char *), cmp_str);
	for (int i = 1; i < T * N; i++)
		cr_assert_str_neq(all[i - 1], all[i], "duplicate across threads");
	free(all);
	for (int t = 0; t < T; t++)
		free(args[t].ids);
}

Test(uuidv7, time_extraction)
{
	const int64_t times[] = { 0, 1, 1764459244123, (INT64_C(1) << 48) - 1, 0x0123456789ab };
	for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
		char u[AIRLOCK_UUID_STR_LEN + 1];
		cr_assert_eq(airlock_uuidv7_at(times[i], u, NULL), 0);
		check_uuid_shape(u);
		cr_assert_eq(airlock_uuidv7_time_ms(u), times[i], "%s", u);
	}
	char u[AIRLOCK_UUID_STR_LEN + 1];
	cr_assert_eq(airlock_uuidv7_at(0x0123456789ab, u, NULL), 0);
	cr_assert(strncmp(u, "01234567-89ab-7", 15) == 0, "big-endian timestamp layout: %s", u);

	int64_t before = util_now_ms();
	cr_assert_eq(airlock_uuidv7_new(u, NULL), 0);
	int64_t after = util_now_ms();
	int64_t t = airlock_uuidv7_time_ms(u);
	cr_assert(t >= before && t <= after, "%lld not in [%lld, %lld]", (long long)t, (long long)before,
		  (long long)after);

	cr_assert_lt(airlock_uuidv7_at(-1, u, NULL), 0);
	cr_assert_lt(airlock_uuidv7_at(INT64_C(1) << 48, u, NULL), 0);
	cr_assert_eq(airlock_uuidv7_time_ms("not a uuid"), -1);
	cr_assert_eq(airlock_uuidv7_time_ms(NULL), -1);
}

Test(uuidv7, at_orders_within_and_across_milliseconds)
{
	char prev[AIRLOCK_UUID_STR_LEN + 1], cur[AIRLOCK_UUID_STR_LEN + 1];
	cr_assert_eq(airlock_uuidv7_at(1000, prev, NULL), 0);
	for (int i = 0; i < 1000; i++) {
		cr_assert_eq(airlock_uuidv7_at(1000, cur, NULL), 0);
		cr_assert_gt(strcmp(cur, prev), 0, "same ms: %s then %s", prev, cur);
		memcpy(prev, cur, sizeof(cur));
	}
	cr_assert_eq(airlock_uuidv7_at(1001, cur, NULL), 0);
	cr_assert_gt(strcmp(cur, prev), 0);
	/* An explicit time does not drag the clock-driven ids with it. */
	cr_assert_eq(airlock_uuidv7_at((INT64_C(1) << 48) - 1, cur, NULL), 0);
	cr_assert_eq(airlock_uuidv7_new(cur, NULL), 0);
	cr_assert_lt(airlock_uuidv7_time_ms(cur), util_now_ms() + 1000);
}

Test(uuidv7, valid_rejects)
{
	const char *good = "0192d3f5-8e1a-7abc-8def-0123456789ab";
	cr_assert(airlock_uuidv7_valid(good));
	cr_assert(airlock_uuidv7_valid("0192d3f5-8e1a-7abc-bdef-0123456789ab"));
	const char *bad[] = {
		"0192D3F5-8E1A-7ABC-8DEF-0123456789AB",  /* uppercase */
		"0192d3f5-8e1a-4abc-8def-0123456789ab",  /* version 4 */
		"0192d3f5-8e1a-8abc-8def-0123456789ab",  /* version 8 */
		"0192d3f5-8e1a-7abc-cdef-0123456789ab",  /* variant 110 */
		"0192d3f5-8e1a-7abc-7def-0123456789ab",  /* variant 0 */
		"0192d3f58e1a7abc8def0123456789ab",      /* no hyphens */
		"{0192d3f5-8e1a-7abc-8def-0123456789ab}",
		"0192d3f5-8e1a-7abc-8def-0123456789a",   /* short */
		"0192d3f5-8e1a-7abc-8def-0123456789abc", /* long */
		"0192d3f5_8e1a-7abc-8def-0123456789ab",
		"0192d3f5-8e1a-7abc-8def-0123456789ag",
		"",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_not(airlock_uuidv7_valid(bad[i]), "accepted %s", bad[i]);
	cr_assert_not(airlock_uuidv7_valid(NULL));
}
