/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decoding JSON from another trust domain under a memory budget: jansson's
 * process-wide allocator, the arena each decode parses into, and
 * core_json_decode, through which every strict decoder (json.c, the
 * service's request envelopes, the proxy's answers and decision lines)
 * parses its input. One copy per process: the allocator is installed once
 * and the budget holds only in the copy that installed it, so the service
 * and worker libraries call this one (src/libairlock-core.sym).
 */
#include <errno.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <jansson.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "core/json_internal.h"

/* ---- jansson's allocator ---------------------------------------------------
 * jansson 2.14 is not safe when an allocation fails: the allocation
 * countdown (tests/test_fault_alloc.c, FAULT_ALLOC_JANSSON=1) saw it write
 * out of bounds inside json_loadb, free twice, and, worst, return success
 * with a string missing a byte ("/run/airlock/bridge.sock" decoded as
 * "/run/airlock/bidge.sock"), which would pass validation as another value.
 * It also reports the failure as a syntax error, never as out of memory. So
 * jansson is never handed NULL.
 *
 * Decoding, where the input is another trust domain's, runs under a
 * budget (decode_budget, caps.h's AIRLOCK_JSON_DECODE_*): every block
 * jansson asks for while json_loadb runs comes from an arena of this
 * decode, charged against the budget. When the budget is spent, or malloc
 * fails, the arena does not return: it longjmps out of jansson back to
 * decode_parse, and the whole arena (the partial tree, jansson's token
 * buffers) is released at once. No jansson frame is ever resumed, so
 * none of its failure paths runs, and nothing jansson holds outlives the
 * arena (it keeps no global state across a parse; the hashtable seed is
 * set at load, below). The decode fails with a message naming the
 * budget, or ENOMEM; the process goes on. Memory per decode is the
 * budget, a stated multiple of the input's length.
 *
 * Outside a decode (encoding our own values, the callers that parse with
 * jansson directly) a failed allocation still aborts: those inputs are
 * bounded by the caps on what is encoded, not chosen by a client.
 *
 * jansson has one process-wide hook. It is set when the library is loaded
 * (a constructor, so no encode or decode anywhere in the library, the
 * proxy's frames included, runs before it), and only while it still holds
 * the defaults: an allocator another library installed first is kept, since
 * freeing its blocks with ours would corrupt the heap. A program that sets
 * its own later replaces ours; decoding then runs without the arena (and
 * without its budget). include/airlock/json.h says so. */
static void *json_malloc_or_abort(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		static const char msg[] = "airlock: out of memory inside the JSON library; aborting\n";
		(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
		abort();
	}
	return p;
}

/* Every block the arena hands out follows a header: blocks too large for a
 * chunk are malloc'd one by one and released when jansson frees them (a
 * growing token buffer is freed as it doubles: held, the arena would cost
 * twice the largest string); the rest are carved from chunks and released
 * with the arena. */
#define ARENA_BIG 4096u
#define ARENA_CHUNK_MIN ((size_t)16 << 10)
#define ARENA_CHUNK_MAX ((size_t)1 << 20)

typedef struct arena_hdr {
	uint64_t magic;
	struct arena_big *big; /* NULL for a block carved from a chunk */
} arena_hdr;

typedef struct arena_big {
	struct arena_big *prev, *next;
	size_t size;
	size_t pad_; /* keeps the header, and so the block, 16-aligned */
	arena_hdr h;
} arena_big;

typedef struct arena_chunk {
	struct arena_chunk *next;
	size_t size, used;
	size_t pad_;
	unsigned char data[];
} arena_chunk;

typedef struct json_arena {
	arena_chunk *chunks;
	arena_big *bigs;
	size_t next_chunk;
	size_t spent, peak, budget;
	uint64_t magic;
	bool armed;   /* inside json_loadb: a failure jumps to jb */
	int failed;   /* 0, or -ENOMEM, or -E2BIG (the budget) */
	jmp_buf jb;
} json_arena;

static _Thread_local json_arena *tl_arena;
/* Tells the arena's blocks from anything else freed during a decode (a
 * bug check, not a defence: every input is parsed into the arena). */
#define ARENA_MAGIC UINT64_C(0x61726c6b6a736f6e)
static _Thread_local size_t tl_last_peak;

_Static_assert(sizeof(arena_hdr) == 16 && sizeof(arena_big) % 16 == 0 &&
               offsetof(arena_chunk, data) % 16 == 0, "arena alignment");

static bool arena_charge(json_arena *a, size_t n)
{
	if (a->armed && (n > a->budget || a->spent > a->budget - n)) {
		a->failed = -E2BIG;
		return false;
	}
	a->spent += n;
	if (a->spent > a->peak)
		a->peak = a->spent;
	return true;
}

static void *arena_alloc(json_arena *a, size_t n)
{
	if (n > SIZE_MAX / 2)
		goto nomem;
	size_t rounded = (n + 15) & ~(size_t)15;
	if (rounded > ARENA_BIG) {
		size_t total = sizeof(arena_big) + rounded;
		if (!arena_charge(a, total))
			return NULL;
		arena_big *b = malloc(total);
		if (!b) {
			a->spent -= total;
			goto nomem;
		}
		*b = (arena_big){ .next = a->bigs, .size = total, .h = { a->magic, b } };
		if (a->bigs)
			a->bigs->prev = b;
		a->bigs = b;
		return b + 1;
	}
	size_t need = sizeof(arena_hdr) + rounded;
	arena_chunk *c = a->chunks;
	if (!c || c->size - c->used < need) {
		size_t size = a->next_chunk;
		if (!arena_charge(a, sizeof(*c) + size))
			return NULL;
		c = malloc(sizeof(*c) + size);
		if (!c) {
			a->spent -= sizeof(*c) + size;
			goto nomem;
		}
		c->next = a->chunks;
		c->size = size;
		c->used = 0;
		a->chunks = c;
		if (a->next_chunk < ARENA_CHUNK_MAX)
			a->next_chunk *= 2;
	}
	arena_hdr *h = (arena_hdr *)(c->data + c->used);
	c->used += need;
	*h = (arena_hdr){ a->magic, NULL };
	return h + 1;
nomem:
	a->failed = -ENOMEM;
	return NULL;
}

static void arena_free(json_arena *a, void *p)
{
	arena_hdr *h = (arena_hdr *)p - 1;
	if (h->magic != a->magic) {
		/* Only the tree of this decode is freed while it runs (decode
		 * hands the tree to its callback and nowhere else): anything
		 * else is a bug here, not an input. */
		static const char msg[] = "airlock: a block freed during a JSON decode is not the decode's; aborting\n";
		(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
		abort();
	}
	arena_big *b = h->big;
	if (!b)
		return; /* carved from a chunk: released with the arena */
	if (b->prev)
		b->prev->next = b->next;
	else
		a->bigs = b->next;
	if (b->next)
		b->next->prev = b->prev;
	a->spent -= b->size;
	free(b);
}

static void arena_release(json_arena *a)
{
	for (arena_chunk *c = a->chunks, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	for (arena_big *b = a->bigs, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	a->chunks = NULL;
	a->bigs = NULL;
}

static void *json_alloc(size_t n)
{
	json_arena *a = tl_arena;
	if (!a)
		return json_malloc_or_abort(n);
	void *p = arena_alloc(a, n ? n : 1);
	if (p)
		return p;
	if (a->armed)
		longjmp(a->jb, 1);
	/* Past json_loadb (the callback reads the tree; it allocates nothing
	 * with jansson, and charges no budget if it did): only malloc can
	 * fail here, and jansson is never handed NULL. */
	static const char msg[] = "airlock: out of memory inside the JSON library; aborting\n";
	(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
	abort();
}

static void json_release(void *p)
{
	if (!p)
		return;
	json_arena *a = tl_arena;
	if (a)
		arena_free(a, p);
	else
		free(p);
}

void core_json_allocator_use(void)
{
	json_set_alloc_funcs(json_alloc, json_release);
}

__attribute__((constructor)) static void json_allocator_install(void)
{
	json_malloc_t m = NULL;
	json_free_t f = NULL;
	json_get_alloc_funcs(&m, &f);
	if (m == malloc && f == free)
		core_json_allocator_use();
	/* The seed is set once, here, rather than by the first json_object()
	 * (which may be inside an arena's parse). */
	json_object_seed(0);
}

size_t core_json_decode_budget(size_t n)
{
	size_t dense = n < AIRLOCK_JSON_DECODE_DENSE_BYTES ? n : AIRLOCK_JSON_DECODE_DENSE_BYTES;
	return AIRLOCK_JSON_DECODE_BASE + AIRLOCK_JSON_DECODE_DENSE_FACTOR * dense +
	       AIRLOCK_JSON_DECODE_FACTOR * (n - dense);
}

size_t core_json_decode_last_peak(void)
{
	return tl_last_peak;
}

/* json_loadb inside the arena; the only frame a failure jumps to. Nothing
 * here is modified between setjmp and the jump that is read after it. */
static json_t *arena_parse(json_arena *a, const char *buf, size_t len, json_error_t *je)
{
	tl_arena = a;
	if (setjmp(a->jb) != 0) {
		a->armed = false;
		tl_arena = NULL;
		return NULL;
	}
	a->armed = true;
	/* No JSON_ALLOW_NUL: a C string with a NUL inside is a string that
	 * means two different things to two readers. No JSON_DECODE_ANY:
	 * every message is an object. */
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, je);
	a->armed = false;
	tl_arena = NULL;
	return root;
}

int core_json_decode(const char *buf, size_t len, size_t max_len, const char *type,
                        core_json_decode_fn fn, void *ctx, airlock_error *err)
{
	if (!buf && len > 0)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0, "%s: no input", type);
	if (len > max_len)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "%s: input of %zu bytes is over the %zu byte limit", type, len,
		                         max_len);
	if (!buf)
		buf = "";
	json_error_t je;
	json_malloc_t m = NULL;
	json_free_t f = NULL;
	json_get_alloc_funcs(&m, &f);
	if (m != json_alloc || tl_arena) {
		/* Another allocator is jansson's (or a decode inside a decode's
		 * callback): no arena, no budget. */
		json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
		if (!root)
			return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
			                         "%s: invalid JSON at line %d column %d: %s", type, je.line,
			                         je.column, je.text);
		int r = fn(root, ctx, err);
		json_decref(root);
		return r;
	}
	json_arena a = {
		.budget = core_json_decode_budget(len),
		.next_chunk = ARENA_CHUNK_MIN,
		.magic = ARENA_MAGIC ^ (uint64_t)(uintptr_t)&a,
	};
	json_t *root = arena_parse(&a, buf, len, &je);
	int r;
	if (!root) {
		tl_last_peak = a.peak;
		arena_release(&a);
		if (a.failed == -E2BIG)
			return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
			                         "%s: decoding these %zu bytes needs more than their memory budget of %zu bytes (caps.h, AIRLOCK_JSON_DECODE_*): too many values for their size",
			                         type, len, a.budget);
		if (a.failed)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM,
			                         "%s: out of memory decoding %zu bytes", type, len);
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "%s: invalid JSON at line %d column %d: %s", type, je.line,
		                         je.column, je.text);
	}
	/* The callback reads the tree while the arena is current (its frees
	 * are the arena's); the tree is never decref'd after: the arena is
	 * released whole. */
	tl_arena = &a;
	r = fn(root, ctx, err);
	tl_arena = NULL;
	tl_last_peak = a.peak;
	arena_release(&a);
	return r;
}
