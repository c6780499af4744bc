/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EGRESS_RESOLVE_H
#define AIRLOCK_EGRESS_RESOLVE_H

/*
 * The production resolver's parts (src/egress/resolve.c), shared by the
 * blocking airlock_egress_resolver_resolve and the proxy's lookups driven
 * by its event loop (src/egress/proxy_resolve.c), so that both ask the same
 * queries with the same options and read the answers with the same rules.
 */

#include <ares.h>
#include <stdbool.h>
#include <stddef.h>

#include "airlock/egress.h"

/* One slot more than the caller can take, to notice an answer that would
 * not fit. */
#define EGRESS_ANSWERS_MAX (AIRLOCK_EGRESS_ADDRESSES_MAX + 1)

/* One name's two queries and what they answered. */
typedef struct egress_answers {
	airlock_addr out[2 * EGRESS_ANSWERS_MAX]; /* A answers first, then AAAA */
	size_t n;
	int pending; /* queries not yet answered: 2 when both are asked */
	int error;   /* first failure, as a negative errno */
	bool overflow;
} egress_answers;

/* A channel with the resolver's options (no search list, no aliases, no
 * /etc/hosts, one try per server, the resolve timeout) and servers
 * ("ADDR[:PORT],...", NULL for the system's). sock_cb, when not NULL, is
 * told of every socket the channel opens and closes (ARES_OPT_SOCK_STATE_CB),
 * for a caller that drives the channel from its own loop. 0, or the error
 * (AIRLOCK_ERR_CONFIG for a bad servers string). */
int egress_channel_new(const char *servers, ares_sock_state_cb sock_cb, void *sock_data,
                       ares_channel *ret, airlock_error *err);
/* Destroys the channel (its queries' callbacks run with ARES_EDESTRUCTION). */
void egress_channel_free(ares_channel channel);

/* The queries' callbacks (ares_callback); arg is the egress_answers. */
void egress_lookup_on_a(void *arg, int status, int timeouts, unsigned char *abuf, int alen);
void egress_lookup_on_aaaa(void *arg, int status, int timeouts, unsigned char *abuf, int alen);

/* The result once both queries are done, as airlock_egress_resolver_resolve
 * answers it: 0 with the addresses, or -ETIMEDOUT, -EIO, -E2BIG, -ENOENT,
 * -ENOMEM. */
int egress_answers_take(const egress_answers *l, airlock_addr *ret, size_t max, size_t *ret_n);

#endif
