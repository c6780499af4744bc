/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_TESTS_EGRESS_WORLD_H
#define AIRLOCK_TESTS_EGRESS_WORLD_H

/*
 * A small "internet" for the egress tests, with no internet and without
 * touching the machine's own network namespaces.
 *
 * egress_world_up() moves the CALLING PROCESS into a new network namespace
 * (unshare(CLONE_NEWNET): call it from a Criterion test body, which runs in
 * its own process; strictly it moves the calling thread and the threads it
 * starts afterwards), brings lo up there, and creates a veth pair to a second
 * namespace held by a child process running tests/egress/testhost.py. Only
 * 198.51.100.0/24 is ever assigned or routed (docs/design-notes.md, "Egress":
 * never 192.0.2.0/24, 203.0.113.0/24 or 10.255.255.0/24):
 *
 *   this side (the "service" namespace)   198.51.100.1/24 on veth al0
 *   public host A                          198.51.100.2
 *   public host B                          198.51.100.3
 *   DNS server (dnsmasq, port 53)          198.51.100.53
 *   rebinding DNS server (port 53)         198.51.100.54
 *
 * On A and on B:
 *   TCP 9000  echo: echoes every byte; after the client's half-close
 *             (FIN) it writes "bye\n", then closes. Proves half-close both ways.
 *   TCP 9001  sink: reads to EOF, then writes the decimal byte count + "\n"
 *             and closes.
 *   TCP 80    HTTP/1.1 (keep-alive): GET / -> 200 "hello from <a|b>\n";
 *             GET /redirect?to=URL (URL percent-encoded) -> 302 Location:
 *             URL with an empty body; anything else 404.
 *   TCP 443   HTTPS, same routes, certificate for a.example.com /
 *             b.example.com signed by the test CA at w->ca_path.
 *   TCP 8080  HTTP, same routes (an unlisted-port target).
 *
 * dnsmasq (authoritative for these names only, no upstream, no /etc/hosts):
 *   a.example.com        A 198.51.100.2
 *   b.example.com        A 198.51.100.3
 *   private.example.com  A 10.0.0.5
 *   mixed.example.com    A 198.51.100.2 and A 10.0.0.5
 *   metadata.example.com A 169.254.169.254
 *   loop.example.com     A 127.0.0.1
 *   v6.example.com       AAAA ::ffff:169.254.169.254
 *   (no AAAA records otherwise, and no A for v6: NOERROR with no answer;
 *   other names NXDOMAIN, except example.com itself, which as the parent
 *   of these names answers NOERROR with no records; every answer TTL 0)
 *
 * Rebinding DNS server (tests/egress/testhost.py, hand-written, UDP):
 *   rebind.example.com   the FIRST A query answers 198.51.100.2 (TTL 0),
 *                        every later one 10.0.0.5; AAAA: no records
 *   other names          NXDOMAIN
 *   counts every query by (name, qtype); egress_world_dns_queries reads it.
 *   (The readiness check asks it for ready.invalid; that is counted under
 *   its own name, never under a test's.)
 *
 * Readiness: testhost.py reports ready on a pipe only after every TCP server
 * accepted a connection and both DNS servers answered a query; then
 * egress_world_up() connects to A's sink across the veth pair from the
 * calling namespace before it returns.
 *
 * Nothing is left behind: egress_world_down() ends the host process (and
 * with it dnsmasq and its namespace, which takes the veth pair) and removes
 * the directory; the calling process's namespace goes when the process
 * exits. A test process that dies without egress_world_down() closes the
 * host's lifeline (and the kernel signals the host): the host then ends
 * dnsmasq and removes the directory itself.
 *
 * For shell tests, tests/egress/world.sh CMD [ARGS...] runs CMD in a fresh
 * namespace in place of "this side", with the same world (EGRESS_WORLD_DIR
 * names its directory), and exits with CMD's status.
 */

#include <stdbool.h>
#include <sys/types.h>

#define EGRESS_WORLD_SELF "198.51.100.1"
#define EGRESS_WORLD_A "198.51.100.2"
#define EGRESS_WORLD_B "198.51.100.3"
#define EGRESS_WORLD_DNS "198.51.100.53"
#define EGRESS_WORLD_REBIND_DNS "198.51.100.54"

typedef struct egress_world {
	pid_t host_pid;        /* testhost.py */
	int life_fd;           /* the host's lifeline: it exits when this closes */
	char dir[64];          /* a temporary directory for the CA, certs, logs */
	char ca_path[128];     /* dir/ca.pem */
	char dns_log[128];     /* dir/rebind-queries.log: one "name qtype" line per query */
	char dnsmasq_log[128]; /* dnsmasq's --log-queries output */
} egress_world;

/* 0, or -1 with a message on stderr (the caller cr_asserts). Waits until
 * every server answers (bounded: 20 s). */
int egress_world_up(egress_world *w);
void egress_world_down(egress_world *w);

/* How many queries the rebinding server has seen for (name, qtype), qtype 1
 * (A) or 28 (AAAA). */
unsigned egress_world_dns_queries(const egress_world *w, const char *name, int qtype);

/* A TCP client helper for tests: connect to addr:port (numeric IPv4) from
 * the calling process's namespace, within timeout_ms; fd or -errno. */
int egress_world_connect(const char *addr, int port, int timeout_ms);

#endif
