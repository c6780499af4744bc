/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proxy's configuration frame (src/egress/proxy_config.c): what the
 * service sends its exec'd proxy program is all it is told, so every field
 * must arrive as it was, and a frame with a field missing, unknown or out
 * of range must be refused rather than run with a zero.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "egress/proxy_internal.h"

static airlock_proxy_config sample(void)
{
	airlock_proxy_config c;
	airlock_proxy_config_default(&c);
	/* Every field away from its default, each a different value, so a
	 * field decoded into another's place shows. */
	c.dns_servers = "198.51.100.53:53,198.51.100.54";
	c.log_fd = 9;
	c.uid = 4000000001u;
	c.gid = 4000000002u;
	c.request_timeout_ms = 11;
	c.connect_timeout_ms = 12;
	c.idle_timeout_ms = 13;
	c.total_timeout_ms = 14;
	c.max_connections = 15;
	c.max_pending = 16;
	c.max_connections_per_listener = 7;
	c.max_pending_per_listener = 8;
	c.accept_rate_per_listener = 19;
	c.log_queue_max = 20;
	return c;
}

static const char *decode(const char *text, airlock_proxy_config *out, json_t **keep)
{
	*keep = NULL;
	return proxy_config_decode(text, strlen(text), out, keep);
}

Test(proxy_config, every_field_arrives_as_sent)
{
	airlock_proxy_config in = sample(), out;
	char *text = proxy_config_encode(&in);
	cr_assert(text);
	json_t *keep;
	const char *why = decode(text, &out, &keep);
	cr_assert_null(why, "%s", why);
	cr_assert_str_eq(out.dns_servers, in.dns_servers);
	cr_assert_eq(out.log_fd, -1, "the log is a descriptor of the exec, not a field");
	cr_assert_eq(out.uid, in.uid);
	cr_assert_eq(out.gid, in.gid);
	cr_assert_eq(out.request_timeout_ms, in.request_timeout_ms);
	cr_assert_eq(out.connect_timeout_ms, in.connect_timeout_ms);
	cr_assert_eq(out.idle_timeout_ms, in.idle_timeout_ms);
	cr_assert_eq(out.total_timeout_ms, in.total_timeout_ms);
	cr_assert_eq(out.max_connections, in.max_connections);
	cr_assert_eq(out.max_pending, in.max_pending);
	cr_assert_eq(out.max_connections_per_listener, in.max_connections_per_listener);
	cr_assert_eq(out.max_pending_per_listener, in.max_pending_per_listener);
	cr_assert_eq(out.accept_rate_per_listener, in.accept_rate_per_listener);
	cr_assert_eq(out.log_queue_max, in.log_queue_max);
	json_decref(keep);
	free(text);
}

Test(proxy_config, no_dns_servers_stays_null)
{
	airlock_proxy_config in = sample(), out;
	in.dns_servers = NULL;
	char *text = proxy_config_encode(&in);
	cr_assert(text);
	json_t *keep;
	cr_assert_null(decode(text, &out, &keep));
	cr_assert_null(out.dns_servers);
	json_decref(keep);
	free(text);
}

/* The encoded sample with one change made to its object. */
static char *altered(void (*change)(json_t *o))
{
	airlock_proxy_config in = sample();
	char *text = proxy_config_encode(&in);
	cr_assert(text);
	json_t *o = json_loads(text, 0, NULL);
	cr_assert(o);
	free(text);
	change(o);
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	cr_assert(text);
	return text;
}

static void drop_uid(json_t *o) { json_object_del(o, "uid"); }
static void add_field(json_t *o) { json_object_set_new(o, "log_fd", json_integer(2)); }
static void big_uid(json_t *o) { json_object_set_new(o, "uid", json_integer(1ll << 32)); }
static void negative_cap(json_t *o) { json_object_set_new(o, "max_pending", json_integer(-1)); }
static void negative_timeout(json_t *o)
{
	json_object_set_new(o, "idle_timeout_ms", json_integer(-5));
}
static void dns_number(json_t *o) { json_object_set_new(o, "dns_servers", json_integer(53)); }
static void timeout_string(json_t *o)
{
	json_object_set_new(o, "connect_timeout_ms", json_string("10"));
}

Test(proxy_config, a_frame_not_exactly_the_configuration_is_refused)
{
	void (*changes[])(json_t *) = { drop_uid, add_field, big_uid, negative_cap,
		                        negative_timeout, dns_number, timeout_string };
	for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++) {
		char *text = altered(changes[i]);
		airlock_proxy_config out;
		json_t *keep;
		const char *why = decode(text, &out, &keep);
		cr_expect_not_null(why, "accepted: %s", text);
		cr_expect_null(keep);
		free(text);
	}
	airlock_proxy_config out;
	json_t *keep;
	cr_expect_not_null(decode("{\"uid\": 1", &out, &keep), "not JSON");
	cr_expect_not_null(decode("[]", &out, &keep), "not an object");
	cr_expect_not_null(decode("{\"uid\": 1, \"uid\": 2}", &out, &keep), "a duplicate key");
}
