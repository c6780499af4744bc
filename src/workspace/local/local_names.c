/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bounded heap of names behind a local workspace's listdir
 * (local_names.h has the bounds).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "workspace/local/local_names.h"

static size_t local_name_cost(const local_names *h, const char *name)
{
	return h->prefix + strlen(name) + 1;
}

void local_names_clear(local_names *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->v[i]);
	free(h->v);
	*h = (local_names){ 0 };
}

static void local_names_sift_down(local_names *h, size_t i)
{
	for (;;) {
		size_t big = i, a = 2 * i + 1, b = 2 * i + 2;
		if (a < h->n && strcmp(h->v[a], h->v[big]) > 0)
			big = a;
		if (b < h->n && strcmp(h->v[b], h->v[big]) > 0)
			big = b;
		if (big == i)
			return;
		char *t = h->v[i];
		h->v[i] = h->v[big];
		h->v[big] = t;
		i = big;
	}
}

/* Drop the largest names while the ones held cost more than the limit. */
static void local_names_fit(local_names *h)
{
	if (h->bytes <= h->limit)
		return;
	while (h->n > 0 && h->bytes > h->limit) {
		h->bytes -= local_name_cost(h, h->v[0]);
		free(h->v[0]);
		h->v[0] = h->v[--h->n];
		local_names_sift_down(h, 0);
	}
	h->cap = h->n;
}

/* 0, or -ENOMEM. */
int local_names_offer(local_names *h, const char *name)
{
	if (h->cap == 0)
		return 0;
	if (h->n == h->cap) {
		if (strcmp(name, h->v[0]) >= 0)
			return 0;
		char *s = strdup(name);
		if (!s)
			return -ENOMEM;
		h->bytes -= local_name_cost(h, h->v[0]);
		free(h->v[0]);
		h->v[0] = s;
		h->bytes += local_name_cost(h, s);
		local_names_sift_down(h, 0);
		local_names_fit(h);
		return 0;
	}
	if (h->n == h->alloc) {
		size_t n = h->alloc ? h->alloc * 2 : 64;
		if (n > h->cap)
			n = h->cap;
		char **p = reallocarray(h->v, n, sizeof(*p));
		if (!p)
			return -ENOMEM;
		h->v = p;
		h->alloc = n;
	}
	char *s = strdup(name);
	if (!s)
		return -ENOMEM;
	size_t i = h->n++;
	h->v[i] = s;
	h->bytes += local_name_cost(h, s);
	while (i > 0) {
		size_t up = (i - 1) / 2;
		if (strcmp(h->v[up], h->v[i]) >= 0)
			break;
		char *t = h->v[i];
		h->v[i] = h->v[up];
		h->v[up] = t;
		i = up;
	}
	local_names_fit(h);
	return 0;
}

int local_names_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}
