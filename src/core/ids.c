/* SPDX-License-Identifier: Apache-2.0 */
#include "airlock/ids.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "util/util.h"

static const char hexdigits[] = "0123456789abcdef";

static void to_hex(const unsigned char *in, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hexdigits[in[i] >> 4];
		out[2 * i + 1] = hexdigits[in[i] & 15];
	}
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

#define ENV_ID_PREFIX "env_"
#define ENV_ID_RANDOM_BYTES 16

int airlock_environment_id_new(char ret[AIRLOCK_ENVIRONMENT_ID_MAX], airlock_error *err)
{
	unsigned char rnd[ENV_ID_RANDOM_BYTES];
	int r = util_random(rnd, sizeof(rnd));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "environment_id: getrandom");
	char id[sizeof(ENV_ID_PREFIX) - 1 + 2 * ENV_ID_RANDOM_BYTES + 1];
	memcpy(id, ENV_ID_PREFIX, sizeof(ENV_ID_PREFIX) - 1);
	to_hex(rnd, sizeof(rnd), id + sizeof(ENV_ID_PREFIX) - 1);
	id[sizeof(id) - 1] = 0;
	_Static_assert(sizeof(id) <= AIRLOCK_ENVIRONMENT_ID_MAX, "environment_id does not fit");
	memcpy(ret, id, sizeof(id));
	return 0;
}

bool airlock_environment_id_valid(const char *id)
{
	if (!id || strncmp(id, ENV_ID_PREFIX, sizeof(ENV_ID_PREFIX) - 1) != 0)
		return false;
	const char *p = id + sizeof(ENV_ID_PREFIX) - 1;
	size_t i = 0;
	for (; p[i]; i++)
		if (i >= 2 * ENV_ID_RANDOM_BYTES || hexval(p[i]) < 0)
			return false;
	return i == 2 * ENV_ID_RANDOM_BYTES;
}

/* ---- UUIDv7 (RFC 9562 section 5.7, counter per section 6.2 method 1) ------
 *
 *  0                   1                   2                   3
 *  |          unix_ts_ms (48)              |ver|  rand_a (12)  |
 *  |var|                 rand_b (62)                           |
 *
 * rand_a is a counter: reseeded at random when the millisecond advances and
 * incremented within one, so ids from one process sort strictly by their
 * text. The seed is drawn from the lower half of the range so that at least
 * 2048 ids fit in a millisecond before the counter runs out.
 */

#define UUID_MS_MAX ((INT64_C(1) << 48) - 1)
#define UUID_COUNTER_MAX 0xfff

typedef struct uuid_state {
	pthread_mutex_t lock;
	bool started;
	int64_t last_ms;
	unsigned counter;
} uuid_state;

/* Two states: the clock-driven one backs _new and must only move forward;
 * explicit times given to _at are arbitrary, and letting them move the clock
 * state would drag every later _new id to the caller's chosen time. */
static uuid_state clock_state = { .lock = PTHREAD_MUTEX_INITIALIZER };
static uuid_state explicit_state = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void uuid_format(int64_t ms, unsigned counter, const unsigned char rnd[8],
                        char ret[AIRLOCK_UUID_STR_LEN + 1])
{
	unsigned char b[16];
	for (int i = 0; i < 6; i++)
		b[i] = (unsigned char)((uint64_t)ms >> (8 * (5 - i)));
	b[6] = (unsigned char)(0x70 | ((counter >> 8) & 0x0f));
	b[7] = (unsigned char)(counter & 0xff);
	b[8] = (unsigned char)(0x80 | (rnd[0] & 0x3f));
	memcpy(b + 9, rnd + 1, 7);

	char *o = ret;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*o++ = '-';
		*o++ = hexdigits[b[i] >> 4];
		*o++ = hexdigits[b[i] & 15];
	}
	*o = 0;
}

typedef struct uuid_random {
	unsigned char tail[8]; /* variant byte's low 6 bits and rand_b */
	unsigned char seed[2]; /* a fresh counter, used when the ms advances */
} uuid_random;

static unsigned seed_counter(const uuid_random *rnd)
{
	return ((unsigned)rnd->seed[0] << 8 | rnd->seed[1]) & (UUID_COUNTER_MAX >> 1);
}

int airlock_uuidv7_new(char ret[AIRLOCK_UUID_STR_LEN + 1], airlock_error *err)
{
	uuid_random rnd;
	/* Drawn before taking the lock: getrandom can block early in boot, and
	 * holding the lock across it would stall every other caller. */
	int r = util_random(&rnd, sizeof(rnd));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "artifact_id: getrandom");

	int64_t now = util_now_ms();
	if (now < 0 || now > UUID_MS_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ERANGE,
		                         "artifact_id: clock outside the UUIDv7 range");

	uuid_state *st = &clock_state;
	pthread_mutex_lock(&st->lock);
	int64_t ms;
	unsigned counter;
	if (!st->started || now > st->last_ms) {
		ms = now;
		counter = seed_counter(&rnd);
	} else if (st->counter < UUID_COUNTER_MAX) {
		/* Same millisecond, or the wall clock stepped back: stay on the
		 * last timestamp so the order never reverses. */
		ms = st->last_ms;
		counter = st->counter + 1;
	} else {
		/* The counter is spent: borrow the next millisecond, which RFC 9562
		 * section 6.2 allows; the clock catches up as soon as the burst
		 * ends. */
		ms = st->last_ms + 1;
		counter = seed_counter(&rnd);
	}
	if (ms > UUID_MS_MAX) {
		pthread_mutex_unlock(&st->lock);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ERANGE,
		                         "artifact_id: timestamp outside the UUIDv7 range");
	}
	st->started = true;
	st->last_ms = ms;
	st->counter = counter;
	pthread_mutex_unlock(&st->lock);

	uuid_format(ms, counter, rnd.tail, ret);
	return 0;
}

int airlock_uuidv7_at(int64_t unix_ms, char ret[AIRLOCK_UUID_STR_LEN + 1], airlock_error *err)
{
	if (unix_ms < 0 || unix_ms > UUID_MS_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ERANGE,
		                         "artifact_id: time %lld is outside the 48-bit UUIDv7 range",
		                         (long long)unix_ms);
	uuid_random rnd;
	int r = util_random(&rnd, sizeof(rnd));
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "artifact_id: getrandom");

	/* The timestamp is exactly the one asked for. Ids at the same time as the
	 * previous call keep counting up; a later time reseeds; an earlier time
	 * gets a random counter and no ordering promise, since the caller asked
	 * to go back. */
	uuid_state *st = &explicit_state;
	unsigned counter;
	pthread_mutex_lock(&st->lock);
	if (st->started && unix_ms == st->last_ms) {
		if (st->counter >= UUID_COUNTER_MAX) {
			pthread_mutex_unlock(&st->lock);
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EOVERFLOW,
			                         "artifact_id: sub-millisecond counter exhausted at %lld",
			                         (long long)unix_ms);
		}
		counter = ++st->counter;
	} else if (!st->started || unix_ms > st->last_ms) {
		counter = seed_counter(&rnd);
		st->started = true;
		st->last_ms = unix_ms;
		st->counter = counter;
	} else {
		counter = ((unsigned)rnd.seed[0] << 8 | rnd.seed[1]) & UUID_COUNTER_MAX;
	}
	pthread_mutex_unlock(&st->lock);

	uuid_format(unix_ms, counter, rnd.tail, ret);
	return 0;
}

bool airlock_uuidv7_valid(const char *s)
{
	if (!s)
		return false;
	for (int i = 0; i < AIRLOCK_UUID_STR_LEN; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (hexval(s[i]) < 0) {
			/* Also stops at a NUL before the end, so a short string is
			 * never read past. Uppercase is refused: one canonical form
			 * keeps ids comparable as strings. */
			return false;
		}
	}
	if (s[AIRLOCK_UUID_STR_LEN] != 0)
		return false;
	if (s[14] != '7')
		return false;
	/* Variant 10: the top two bits of the clock_seq_hi byte are 1 and 0. */
	return s[19] == '8' || s[19] == '9' || s[19] == 'a' || s[19] == 'b';
}

int64_t airlock_uuidv7_time_ms(const char *s)
{
	if (!airlock_uuidv7_valid(s))
		return -1;
	int64_t ms = 0;
	for (int i = 0; i < 13; i++) {
		if (i == 8)
			continue;
		ms = ms << 4 | hexval(s[i]);
	}
	return ms;
}
