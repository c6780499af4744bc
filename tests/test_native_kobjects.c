/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel objects a sandbox can make in quantity (issue "Hardening the
 * native mechanism", items 1 and 2): each is charged to the sandbox's
 * memory limit, capped per sandbox, or refused, and host-wide tables are
 * left alone. Every test runs its attempt inside a real sandbox under a
 * 64 MiB limit, with bounded loops, and measures what the attempt got: the
 * bytes the kernel held for it (read by the attempt itself, from its own
 * sockets) and, where a host-wide counter shows it, that counter's peak
 * during the run, sampled from outside.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "host_counters.h"
#include "sandbox_testlib.h"

#define MiB (1ll << 20)

static const airlock_resource_limits small = {
	.cpu_millicores = 1000, .memory_bytes = 64 * MiB, .pids_max = 64,
	.workspace_bytes = 64 * MiB, .inodes_max = 2000, .wall_clock_seconds = 120,
};

TestSuite(kobjects, .timeout = 180);

/* small with another memory limit and pids_max. */
static airlock_resource_limits limits_at(int64_t memory_bytes, int64_t pids_max)
{
	airlock_resource_limits l = small;
	l.memory_bytes = memory_bytes;
	l.pids_max = pids_max;
	return l;
}


/* The command ran to the end and printed one integer. */
static long long ran_and_printed(const airlock_execution_result *r)
{
	cr_assert_eq(r->killed_by, AIRLOCK_KILL_NONE, "killed by %s: stdout=%.300s stderr=%.600s",
	             airlock_kill_reason_name(r->killed_by), OUT(r), ERR(r));
	cr_assert_eq(r->exit_code, 0, "exit %d: stdout=%.300s stderr=%.600s", r->exit_code, OUT(r),
	             ERR(r));
	long long v;
	cr_assert_eq(sscanf(OUT(r), "%lld", &v), 1, "stdout=%.300s", OUT(r));
	return v;
}

/* script run by python3 in a new sandbox of the small limits, which is
 * gone again when this returns: the command must have exited 0, and its
 * result is *r for the caller to check and clear. */
static void py_alone(const char *tenant, const char *script, airlock_execution_result *r)
{
	box b;
	box_open(&b, tenant, &small);
	py(&b, script, 60, r);
	box_close(&b);
	cr_assert_eq(r->exit_code, 0, "stdout=%.300s stderr=%.600s", OUT(r), ERR(r));
}

static long long aio_nr(void)
{
	return proc_first_number("/proc/sys/fs/aio-nr");
}

/* ---- netlink ---------------------------------------------------------------------- */

/* Every netlink protocol is refused at socket(), the uevent one included
 * (a bind to its multicast group received the host's device events). The
 * answer is EAFNOSUPPORT, what a kernel without the family says. */
static const char netlink[] =
	"import socket\n"
	"out = []\n"
	"for name, typ, proto in (('route', socket.SOCK_RAW, 0), ('usersock', socket.SOCK_RAW, 2),\n"
	"                         ('sock_diag', socket.SOCK_DGRAM, 4),\n"
	"                         ('kobject_uevent', socket.SOCK_DGRAM, 15)):\n"
	"    try:\n"
	"        s = socket.socket(socket.AF_NETLINK, typ, proto)\n"
	"    except OSError as e:\n"
	"        out.append('%s:socket:%d' % (name, e.errno))\n"
	"        continue\n"
	"    try:\n"
	"        s.bind((0, 1 if proto == 15 else 0))\n"
	"        out.append('%s:bound' % name)\n"
	"    except OSError as e:\n"
	"        out.append('%s:bind:%d' % (name, e.errno))\n"
	"print(' '.join(out))\n"
	/* What the refusal must not break: name resolution, which asks
	 * rtnetlink which families are configured (AI_ADDRCONFIG). */
	"a = socket.getaddrinfo('127.0.0.1', 80, 0, socket.SOCK_STREAM, 0, socket.AI_ADDRCONFIG)\n"
	"print('resolved', len(a) > 0)\n";

Test(kobjects, netlink_is_refused_uevent_included, .timeout = 120)
{
	airlock_execution_result r;
	py_alone("tenant-netlink", netlink, &r);
	cr_expect(strstr(OUT(&r), "route:socket:97 usersock:socket:97 sock_diag:socket:97 "
	                          "kobject_uevent:socket:97\n"),
	          "want EAFNOSUPPORT (97) from every netlink socket; got %.300s", OUT(&r));
	cr_expect(strstr(OUT(&r), "resolved True\n"), "getaddrinfo: %.300s %.300s", OUT(&r),
	          ERR(&r));
	airlock_execution_result_clear(&r);
}

/* ---- MPTCP ------------------------------------------------------------------------- */

/* MPTCP is off in the sandbox's network namespace (net.mptcp.enabled 0):
 * its sockets hold the host's TCP memory far past a TCP socket's share
 * (240 loopback connections, both ends written to and never read, held
 * 82 MB of the host's TCP memory under a 64 MiB limit, against 21 MB as
 * TCP), which the descriptor budget was sized for. A program asking for
 * it gets what a kernel with MPTCP disabled says (ENOPROTOOPT, 92) and
 * falls back to TCP, which still works. */
static const char mptcp[] =
	"import errno, socket\n"
	"try:\n"
	"    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)\n"
	"    print('mptcp:open')\n"
	"except OSError as e:\n"
	"    print('mptcp:%d' % e.errno)\n"
	"l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(1)\n"
	"c = socket.create_connection(l.getsockname()); a, _ = l.accept()\n"
	"c.sendall(b'ok'); print('tcp:' + a.recv(2).decode())\n";

Test(kobjects, mptcp_is_off, .timeout = 120)
{
	airlock_execution_result r;
	py_alone("tenant-mptcp", mptcp, &r);
	cr_expect(strstr(OUT(&r), "mptcp:92\n"), "want ENOPROTOOPT (92) from an MPTCP socket; got %.300s",
	          OUT(&r));
	cr_expect(strstr(OUT(&r), "tcp:ok\n"), "TCP on lo: %.300s %.300s", OUT(&r), ERR(&r));
	airlock_execution_result_clear(&r);
}

/* SO_RCVLOWAT succeeds and does nothing, like SO_RCVBUF: on TCP it would
 * raise a listener's receive buffer (8 MiB asked: 16 MiB), which every
 * connection waiting unaccepted inherits. */
static const char rcvlowat[] =
	"import socket\n"
	"l = socket.socket(); l.bind(('127.0.0.1', 0))\n"
	"before = l.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)\n"
	"l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 8 << 20)\n"
	"l.listen(16)\n"
	"print('rcvbuf', before, l.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))\n";

Test(kobjects, so_rcvlowat_does_not_grow_a_receive_buffer, .timeout = 120)
{
	airlock_execution_result r;
	py_alone("tenant-rcvlowat", rcvlowat, &r);
	long long before = 0, after = 0;
	cr_assert_eq(sscanf(OUT(&r), "rcvbuf %lld %lld", &before, &after), 2, "stdout=%.300s", OUT(&r));
	cr_expect_eq(after, before, "SO_RCVLOWAT grew the listener's buffer from %lld to %lld", before,
	             after);
	airlock_execution_result_clear(&r);
}

/* ---- the error queue ------------------------------------------------------------- */

/* What the kernel queues back on a socket's error queue is charged to no
 * memory cgroup, so nothing may fill it (exec/seccomp.c, host/netns.c):
 * SO_TIMESTAMPING and SO_ZEROCOPY are refused (ENOPROTOOPT, 92), a
 * transmit timestamp asked per call in a control message queues no copy
 * of the packet, and IP_RECVERR / IPV6_RECVERR succeed without queuing the
 * ICMP errors of datagrams sent to a closed port. Before, 8 timestamp
 * copies and 4 ICMP errors of each family were queued here, and a 64 MiB
 * sandbox's UDP sockets held 387 MB of host memory in such copies. */
static const char errqueue[] =
	"import errno, socket, struct, time\n"
	"SO_TIMESTAMPING = 37\n"
	"res = []\n"
	"s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
	"try:\n"
	"    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, (1 << 1) | (1 << 4))\n"
	"    res.append('setsockopt:ok')\n"
	"except OSError as e:\n"
	"    res.append('setsockopt:%d' % e.errno)\n"
	"z = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
	"try:\n"
	"    z.setsockopt(socket.SOL_SOCKET, 60, 1)\n"
	"    res.append('zerocopy:ok')\n"
	"except OSError as e:\n"
	"    res.append('zerocopy:%d' % e.errno)\n"
	"r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); r.bind(('127.0.0.1', 0))\n"
	"t = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
	"for i in range(8):\n"
	"    t.sendmsg([b'x' * 1000], [(socket.SOL_SOCKET, SO_TIMESTAMPING, struct.pack('I', 1 << 1))], 0,\n"
	"              r.getsockname())\n"
	"time.sleep(0.2)\n"
	"def errq(sock):\n"
	"    n = 0\n"
	"    while n < 1000:\n"
	"        try:\n"
	"            sock.recvmsg(2048, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)\n"
	"            n += 1\n"
	"        except BlockingIOError:\n"
	"            break\n"
	"    return n\n"
	"res.append('tstamp_queued:%d' % errq(t))\n"
	"u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
	"u.setsockopt(socket.SOL_IP, 11, 1)\n"
	"c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.bind(('127.0.0.1', 0)); port = c.getsockname()[1]; c.close()\n"
	"for i in range(8):\n"
	"    try: u.sendto(b'y' * 100, ('127.0.0.1', port))\n"
	"    except OSError: pass\n"
	"time.sleep(0.2)\n"
	"res.append('icmp_queued:%d' % errq(u))\n"
	"u6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
	"u6.setsockopt(socket.IPPROTO_IPV6, 25, 1)\n"
	"for i in range(8):\n"
	"    try: u6.sendto(b'y' * 100, ('::1', port))\n"
	"    except OSError: pass\n"
	"time.sleep(0.2)\n"
	"res.append('icmp6_queued:%d' % errq(u6))\n"
	"print(' '.join(res))\n";

Test(kobjects, nothing_is_queued_on_a_socket_error_queue, .timeout = 120)
{
	airlock_execution_result r;
	py_alone("tenant-errqueue", errqueue, &r);
	cr_expect(strstr(OUT(&r), "setsockopt:92 zerocopy:92 tstamp_queued:0 icmp_queued:0 "
	                          "icmp6_queued:0\n"),
	          "stdout=%.300s", OUT(&r));
	airlock_execution_result_clear(&r);
}

/* TCP_FASTOPEN_CONNECT is refused (ENOPROTOOPT, 92), as on a kernel
 * without it: its connect() sends nothing, so the socket budget never hears
 * of the connection, and one closed unused kept its place until the sandbox
 * ended (20 such closes lost 20 places). A plain connect still works. */
static const char fastopen_connect[] =
	"import socket\n"
	"s = socket.socket()\n"
	"try:\n"
	"    s.setsockopt(socket.IPPROTO_TCP, 30, 1)\n"
	"    print('fastopen_connect:ok')\n"
	"except OSError as e:\n"
	"    print('fastopen_connect:%d' % e.errno)\n"
	"l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(1)\n"
	"s.connect(l.getsockname()); a, _ = l.accept(); s.sendall(b'ok')\n"
	"print('tcp:' + a.recv(2).decode())\n";

Test(kobjects, tcp_fastopen_connect_is_refused, .timeout = 120)
{
	airlock_execution_result r;
	py_alone("tenant-tfo", fastopen_connect, &r);
	cr_expect(strstr(OUT(&r), "fastopen_connect:92\ntcp:ok\n"), "stdout=%.300s", OUT(&r));
	airlock_execution_result_clear(&r);
}

/* ---- socket buffers ---------------------------------------------------------------- */

/* 200 loopback connections (or as many as the descriptor limit allows),
 * each written to until the kernel stops taking more (at most 8 MiB each),
 * never read. Prints the bytes queued in the
 * kernel: unsent and unacknowledged on the writers, unread on the readers.
 * Before the cap this was 780 MB under a 64 MiB limit. */
static const char tcp_pin[] =
	"import fcntl, socket, struct, termios\n"
	"l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(512)\n"
	"socks = []\n"
	"chunk = b'x' * 65536\n"
	"for i in range(200):\n"
	"    try:\n"
	"        c = socket.create_connection(l.getsockname()); a, _ = l.accept()\n"
	"    except OSError:\n"
	"        break\n"
	"    socks += [c, a]\n"
	"    c.setblocking(False)\n"
	"    for k in range(128):\n"
	"        try:\n"
	"            c.send(chunk)\n"
	"        except BlockingIOError:\n"
	"            break\n"
	"q = 0\n"
	"for s in socks:\n"
	"    for req in (termios.TIOCOUTQ, termios.FIONREAD):\n"
	"        q += struct.unpack('i', fcntl.ioctl(s, req, b'\\0' * 4))[0]\n"
	"print(q)\n";

/* A pin script (which prints the bytes it got queued) in a sandbox under
 * small, proto's host-wide memory sampled: the bytes queued stay below
 * queued_max and the host's count rises less than rise_max. */
static void expect_pinned_below(const char *proto, const char *script, host_reader read,
                                long long queued_max, long long rise_max)
{
	char tenant[32];
	snprintf(tenant, sizeof(tenant), "tenant-%s", proto);
	airlock_execution_result r;
	long long rise = sandbox_sampled_run(tenant, &small, script, 60, read, &r);
	long long queued = ran_and_printed(&r);
	fprintf(stderr, "%s: %lld bytes queued, host %s memory rose by %lld bytes\n", proto, queued,
	        proto, rise);
	cr_expect_lt(queued, queued_max, "%lld bytes queued in %s sockets under a 64 MiB limit",
	             queued, proto);
	cr_expect_lt(rise, rise_max, "host %s memory rose by %lld bytes", proto, rise);
	airlock_execution_result_clear(&r);
}

Test(kobjects, tcp_buffers_are_capped, .timeout = 180)
{
	/* The cap is a quarter of the limit (16 MiB), and the kernel lets
	 * each socket go a few pages past it; 48 MiB is far below what an
	 * uncapped sandbox queues and far above what a capped one can. The
	 * host's count also carries other processes' traffic. */
	expect_pinned_below("tcp", tcp_pin, tcp_mem, 48 * MiB, 96 * MiB);
}

/* 450 receivers (or as many as the descriptor limit allows), each sent five 60000-byte datagrams it
 * never reads; then every receiver is drained and the payload that had
 * been queued is counted. Uncapped, a receive buffer holds four of them:
 * 108 MB in all. */
static const char udp_pin[] =
	"import socket\n"
	"rs = []\n"
	"tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
	"msg = b'x' * 60000\n"
	"for i in range(450):\n"
	"    try:\n"
	"        r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
	"    except OSError:\n"
	"        break\n"
	"    r.bind(('127.0.0.1', 0))\n"
	"    r.setblocking(False); rs.append(r)\n"
	"    for k in range(5):\n"
	"        try:\n"
	"            tx.sendto(msg, r.getsockname())\n"
	"        except OSError:\n"
	"            pass\n"
	"q = 0\n"
	"for r in rs:\n"
	"    for k in range(10):\n"
	"        try:\n"
	"            q += len(r.recv(65536))\n"
	"        except BlockingIOError:\n"
	"            break\n"
	"print(q)\n";

Test(kobjects, udp_buffers_are_capped, .timeout = 180)
{
	/* 16 MiB of buffers hold about 15 MB of these datagrams. */
	expect_pinned_below("udp", udp_pin, udp_mem, 24 * MiB, 64 * MiB);
}

/* ---- the host's TCP memory past the cgroup's cap --------------- */

Test(kobjects, many_tcp_connections_stay_within_the_memory_limit, .timeout = 180)
{
	/* 128 MiB and 16 pids: 512 descriptors per process, so the 8
	 * processes' 500 each are all allowed, and what is measured is each
	 * socket's forced charge. At lo's default 64 KiB packets 4,000
	 * sockets held ~73 KiB each, 285 MiB; bounded, ~11 KiB each. */
	airlock_resource_limits l = limits_at(128 * MiB, 16);
	airlock_execution_result r;
	long long rise = sandbox_sampled_run("tenant-tcp-many", &l, HOST_COUNTERS_TCP_MANY, 90, tcp_mem, &r);
	long long conns = ran_and_printed(&r);
	fprintf(stderr, "tcp many: %lld connections, host TCP memory rose by %lld bytes\n", conns,
	        rise);
	cr_expect_geq(conns, 1900, "%lld connections, want most of 2000", conns);
	cr_expect_lt(rise, l.memory_bytes, "host TCP memory rose by %lld bytes under a %lld limit",
	             rise, (long long)l.memory_bytes);
	airlock_execution_result_clear(&r);
}

Test(kobjects, unaccepted_connections_stay_within_the_memory_limit, .timeout = 180)
{
	/* 128 MiB and 8 pids: 1024 descriptors, so all 100 clients connect.
	 * The clients' own send buffers are the cgroup's (its TCP cap is a
	 * quarter of the limit, 32 MiB); the unaccepted ends are nobody's.
	 * With the listener's SO_RCVBUF honoured (twice the host's rmem_max)
	 * each unaccepted connection took up to its 8 MiB: 400 clients took
	 * 1.5 GiB, so this asks 100. */
	airlock_resource_limits l = limits_at(128 * MiB, 8);
	airlock_execution_result r;
	long long rise = sandbox_sampled_run("tenant-tcp-unaccepted", &l, HOST_COUNTERS_TCP_UNACCEPTED, 90, tcp_mem, &r);
	cr_assert_eq(r.exit_code, 0, "exit %d: stdout=%.300s stderr=%.600s", r.exit_code, OUT(&r),
	             ERR(&r));
	long long conns = 0, rcvbuf = 0;
	cr_assert_eq(sscanf(OUT(&r), "%lld %lld", &conns, &rcvbuf), 2, "stdout=%.300s", OUT(&r));
	fprintf(stderr, "tcp unaccepted: %lld connections, SO_RCVBUF %lld, host TCP memory rose "
	                "by %lld bytes\n",
	        conns, rcvbuf, rise);
	cr_expect_eq(conns, 100);
	cr_expect_lt(rcvbuf, 1 * MiB, "the listener's SO_RCVBUF is %lld", rcvbuf);
	cr_expect_lt(rise, l.memory_bytes * 3 / 4, "host TCP memory rose by %lld bytes", rise);
	airlock_execution_result_clear(&r);
}

/* ---- sockets no descriptor holds ----------------------- */

/* Runs script in the box and returns the rise of host TCP memory meanwhile,
 * from a settled start. */
static long long tcp_rise(box *b, const char *script, int timeout_s, airlock_execution_result *r)
{
	host_counter_settle(tcp_mem);
	sampler s;
	sampler_start(&s, tcp_mem);
	py(b, script, timeout_s, r);
	return sampler_rise(&s);
}

/* The connections held and why the script stopped ("%lld %63s"). */
static long long held_and_why(const airlock_execution_result *r, char why[64])
{
	cr_assert_eq(r->killed_by, AIRLOCK_KILL_NONE, "killed by %s: stdout=%.300s stderr=%.600s",
	             airlock_kill_reason_name(r->killed_by), OUT(r), ERR(r));
	cr_assert_eq(r->exit_code, 0, "exit %d: stdout=%.300s stderr=%.600s", r->exit_code, OUT(r),
	             ERR(r));
	long long n = 0;
	cr_assert_eq(sscanf(OUT(r), "%lld %63s", &n, why), 2, "stdout=%.300s", OUT(r));
	return n;
}

Test(kobjects, mapped_tcp_sockets_stay_within_the_socket_budget, .timeout = 180)
{
	/* A mapped TCP socket lives on after its descriptor is closed. The
	 * budget under 64 MiB is 2,048 sockets (AIRLOCK_SANDBOX_SOCKET_COST):
	 * the listener and 1,023 connections of two each. Without it, 3,000
	 * connections were held with 5 descriptors open, 85 MB of host TCP
	 * memory. */
	box b;
	box_open(&b, "tenant-tcp-mapped", &small);
	airlock_execution_result r;
	long long rise = tcp_rise(&b, HOST_COUNTERS_TCP_MAPPED, 120, &r);
	char why[64] = "";
	long long conns = held_and_why(&r, why);
	fprintf(stderr, "tcp mapped: %lld connections held by mappings (stopped: %s), host TCP "
	                "memory rose by %lld bytes\n",
	        conns, why, rise);
	cr_expect_leq(conns, 1023, "%lld mapped connections under 64 MiB (stopped: %s)", conns, why);
	cr_expect_geq(conns, 1000, "%lld mapped connections: the budget was not the bound (%s)",
	              conns, why);
	cr_expect(strncmp(why, "PermissionError:1", 17) == 0 || strncmp(why, "TimeoutError", 12) == 0,
	          "stopped by %s, want the budget's refusal", why);
	cr_expect_lt(rise, small.memory_bytes, "host TCP memory rose by %lld bytes under 64 MiB",
	             rise);
	airlock_execution_result_clear(&r);
	box_close(&b);
}

Test(kobjects, abandoned_unaccepted_connections_stay_within_the_memory_limit, .timeout = 240)
{
	/* Connections whose client closed (half of them with a reset),
	 * waiting in 8 listeners' queues, hold no descriptor: 8 x 1,000 held
	 * 188 MB of host TCP memory under 128 MiB. Now each counts in the
	 * budget (4,096 sockets under 128 MiB), and a listener drops
	 * handshakes past it. */
	airlock_resource_limits l = small;
	l.memory_bytes = 128 * MiB;
	l.pids_max = 8;
	box b;
	box_open(&b, "tenant-tcp-abandoned", &l);
	airlock_execution_result r;
	long long rise = tcp_rise(&b, HOST_COUNTERS_TCP_ABANDONED, 150, &r);
	char why[64] = "";
	long long conns = held_and_why(&r, why);
	fprintf(stderr, "tcp abandoned: %lld connections left unaccepted (stopped: %s), host TCP "
	                "memory rose by %lld bytes\n",
	        conns, why, rise);
	cr_expect_lt(conns, 4096, "%lld unaccepted connections under 128 MiB", conns);
	cr_expect_lt(rise, l.memory_bytes, "host TCP memory rose by %lld bytes under 128 MiB", rise);
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* A server as programs write one: a listener with a backlog, a burst of 200
 * clients connected before any is accepted, then 3,000 short connections
 * one after another (more than the budget holds at once, so each ended
 * connection must have left it), every one answered. Prints the answers. */
static const char short_connections[] =
	"import socket, threading\n"
	"l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(256)\n"
	"def serve(n):\n"
	"    for i in range(n):\n"
	"        a, _ = l.accept()\n"
	"        a.sendall(a.recv(16)); a.close()\n"
	"burst = [socket.create_connection(l.getsockname(), timeout=10) for i in range(200)]\n"
	"for c in burst: c.sendall(b'ping')\n"
	"t = threading.Thread(target=serve, args=(3200,)); t.start()\n"
	"ok = 0\n"
	"for c in burst:\n"
	"    ok += c.recv(16) == b'ping'; c.close()\n"
	"for i in range(3000):\n"
	"    c = socket.create_connection(l.getsockname(), timeout=10)\n"
	"    c.sendall(b'ping'); ok += c.recv(16) == b'ping'; c.close()\n"
	"t.join()\n"
	"print(ok)\n";

Test(kobjects, a_server_with_a_backlog_and_many_short_connections_works, .timeout = 180)
{
	/* 64 MiB: a budget of 2,048 sockets, which 3,200 connections pass
	 * through; 8 pids, so a process may have the burst's 200 descriptors
	 * (512 each). */
	airlock_resource_limits l = small;
	l.pids_max = 8;
	box b;
	box_open(&b, "tenant-tcp-server", &l);
	airlock_execution_result r;
	py(&b, short_connections, 120, &r);
	cr_expect_eq(ran_and_printed(&r), 3200, "stdout=%.300s stderr=%.600s", OUT(&r), ERR(&r));
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* ---- UDP at scale ---------------------------------------------- */

/* 1,000 receivers over 4 processes, each asking SO_RCVBUF for 4 MiB and
 * sent 60000-byte datagrams until the kernel drops them; then every
 * receiver is drained and the payload counted. Uncharged, each would hold
 * its receive buffer: 480 MB measured without the charge. */
static const char udp_many[] =
	"import os, socket\n"
	"rep_r, rep_w = os.pipe()\n"
	"for p in range(4):\n"
	"    if os.fork() == 0:\n"
	"        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
	"        msg = b'x' * 60000; rs = []\n"
	"        for i in range(250):\n"
	"            try:\n"
	"                r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
	"            except OSError:\n"
	"                break\n"
	"            r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)\n"
	"            r.bind(('127.0.0.1', 0)); r.setblocking(False); rs.append(r)\n"
	"            for k in range(80):\n"
	"                try:\n"
	"                    tx.sendto(msg, r.getsockname())\n"
	"                except OSError:\n"
	"                    break\n"
	"        q = 0\n"
	"        for r in rs:\n"
	"            while True:\n"
	"                try:\n"
	"                    q += len(r.recv(65536))\n"
	"                except BlockingIOError:\n"
	"                    break\n"
	"        os.write(rep_w, b'%d %d\\n' % (len(rs), q)); os._exit(0)\n"
	"os.close(rep_w)\n"
	"for p in range(4): os.wait()\n"
	"v = [int(x) for x in os.read(rep_r, 4096).split()]\n"
	"print(sum(v[1::2]), sum(v[0::2]))\n";

Test(kobjects, udp_buffers_are_capped_at_scale, .timeout = 180)
{
	airlock_resource_limits l = limits_at(128 * MiB, 16);
	airlock_execution_result r;
	long long rise = sandbox_sampled_run("tenant-udp-many", &l, udp_many, 90, udp_mem, &r);
	long long queued = ran_and_printed(&r);
	long long q2 = 0, socks = 0;
	cr_assert_eq(sscanf(OUT(&r), "%lld %lld", &q2, &socks), 2, "stdout=%.300s", OUT(&r));
	fprintf(stderr, "udp many: %lld sockets, %lld bytes queued, host UDP memory rose by %lld\n",
	        socks, queued, rise);
	cr_expect_eq(socks, 1000);
	/* The cap is a quarter of the limit, 32 MiB. */
	cr_expect_lt(queued, 48 * MiB, "%lld bytes queued in UDP sockets under a 128 MiB limit",
	             queued);
	cr_expect_lt(rise, 64 * MiB, "host UDP memory rose by %lld bytes", rise);
	airlock_execution_result_clear(&r);
}

/* Unix socket buffers are charged to the memory cgroup by the kernel
 * itself: 400 socket pairs filled and never read (up to 85 MB of send
 * buffers) end with the sandbox killed for MEMORY, or with less than the
 * limit queued. Not a fix: this guards the kernel behaviour the design
 * relies on. */
static const char unix_pin[] =
	"import socket\n"
	"print('pinning', flush=True)\n"
	"ps = []\n"
	"chunk = b'x' * 65536\n"
	"total = 0\n"
	"for i in range(400):\n"
	"    try:\n"
	"        a, b = socket.socketpair(); ps += [a, b]\n"
	"    except OSError:\n"
	"        break\n"
	"    a.setblocking(False)\n"
	"    for k in range(64):\n"
	"        try:\n"
	"            total += a.send(chunk)\n"
	"        except BlockingIOError:\n"
	"            break\n"
	"print(total)\n";

Test(kobjects, unix_buffers_are_charged, .timeout = 180)
{
	box b;
	box_open(&b, "tenant-unix", &small);
	airlock_execution_result r;
	py(&b, unix_pin, 60, &r);
	if (r.killed_by == AIRLOCK_KILL_NONE) {
		long long total = -1;
		const char *line = strchr(OUT(&r), '\n');
		cr_assert(line && sscanf(line + 1, "%lld", &total) == 1, "stdout=%.300s stderr=%.300s",
		          OUT(&r), ERR(&r));
		cr_expect_lt(total, 64 * MiB, "%lld bytes queued in unix sockets, not killed", total);
	} else {
		cr_expect_eq(r.killed_by, AIRLOCK_KILL_MEMORY, "killed by %s",
		             airlock_kill_reason_name(r.killed_by));
	}
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* Descriptors in flight in SCM_RIGHTS messages nobody receives: the kernel
 * counts them per user (the sandbox's own host id) against RLIMIT_NOFILE,
 * so they stop near 1024, not at the service's 20000. 200 descriptors per
 * message, at most 200 messages. Prints how many went and the errno that
 * stopped them. */
static const char inflight[] =
	"import os, socket\n"
	"a, b = socket.socketpair()\n"
	"fd = os.open('/dev/null', os.O_RDONLY)\n"
	"sent = 0; err = 0\n"
	"for i in range(200):\n"
	"    try:\n"
	"        socket.send_fds(a, [b'x'], [fd] * 200)\n"
	"        sent += 200\n"
	"    except OSError as e:\n"
	"        err = e.errno\n"
	"        break\n"
	"print(sent, err)\n";

Test(kobjects, descriptors_in_flight_are_bounded, .timeout = 120)
{
	airlock_execution_result r;
	py_alone("tenant-inflight", inflight, &r);
	long long sent, e;
	cr_assert_eq(sscanf(OUT(&r), "%lld %lld", &sent, &e), 2, "stdout=%.300s", OUT(&r));
	fprintf(stderr, "inflight: %lld descriptors in flight, then errno %lld\n", sent, e);
	/* The kernel refuses a message once the count is past the limit, so
	 * one message's worth (SCM_MAX_FD, 253) may go over. */
	cr_expect_leq(sent, 1024 + 253, "%lld descriptors in flight", sent);
	cr_expect_eq(e, 109, "stopped by errno %lld, want ETOOMANYREFS (109)", e);
	airlock_execution_result_clear(&r);
}

/* ---- host-wide tables ------------------------------------------------------------- */

/* io_setup for 4096 events, held for a second. Prints the errno (0 when it
 * succeeded). */
static const char aio[] =
	"import ctypes, os, platform, time\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"nr = {'x86_64': 206, 'aarch64': 0}[platform.machine()]\n"
	"ctx = ctypes.c_ulong(0)\n"
	"r = libc.syscall(ctypes.c_long(nr), ctypes.c_long(4096), ctypes.byref(ctx))\n"
	"print(0 if r == 0 else ctypes.get_errno(), flush=True)\n"
	"time.sleep(1)\n";

Test(kobjects, kernel_aio_is_refused_and_the_hosts_table_untouched, .timeout = 120)
{
	airlock_execution_result r;
	long long rise = sandbox_sampled_run("tenant-aio", &small, aio, 60, aio_nr, &r);
	long long e = ran_and_printed(&r);
	cr_expect_eq(e, 38, "io_setup in the sandbox: errno %lld, want ENOSYS (38)", e);
	cr_expect_leq(rise, 0, "the host's fs.aio-nr rose by %lld", rise);
	airlock_execution_result_clear(&r);
}

/* The descriptor limit: the sandbox's memory limit
 * divided among its pids (airlock/caps.h, AIRLOCK_SANDBOX_NOFILE), soft and
 * hard, not raisable; ten processes each stop at it, holding their
 * descriptors at the same time, and together hold at most the sandbox's
 * budget, memory_bytes / AIRLOCK_SANDBOX_FILE_COST. At a flat 1024 per
 * process they held 10,240 under 64 MiB (and one sandbox at the default
 * limits 520,809 of the host's files). */
static const char nofile[] =
	"import os, resource\n"
	"soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
	"try:\n"
	"    resource.setrlimit(resource.RLIMIT_NOFILE, (hard * 2, hard * 2)); raised = 1\n"
	"except (ValueError, OSError):\n"
	"    raised = 0\n"
	"rep_r, rep_w = os.pipe(); go_r, go_w = os.pipe()\n"
	"kids = []\n"
	"for i in range(10):\n"
	"    p = os.fork()\n"
	"    if p == 0:\n"
	"        os.close(rep_r); os.close(go_w)\n"
	"        n = 0\n"
	"        try:\n"
	"            for k in range(100000):\n"
	"                os.open('/dev/null', os.O_RDONLY); n += 1\n"
	"        except OSError:\n"
	"            pass\n"
	"        os.write(rep_w, b'%d\\n' % n)\n"
	"        os.read(go_r, 1)\n"
	"        os._exit(0)\n"
	"    kids.append(p)\n"
	"os.close(rep_w); os.close(go_r)\n"
	"data = b''\n"
	"while data.count(b'\\n') < 10:\n"
	"    chunk = os.read(rep_r, 4096)\n"
	"    if not chunk: break\n"
	"    data += chunk\n"
	"counts = [int(x) for x in data.split()]\n"
	"os.close(go_w)\n"
	"for p in kids: os.waitpid(p, 0)\n"
	"print(soft, hard, raised, max(counts), sum(counts), len(counts))\n";

Test(kobjects, descriptors_are_bounded_per_sandbox, .timeout = 120)
{
	airlock_execution_result r;
	py_alone("tenant-nofile", nofile, &r);
	long long soft, hard, raised, most, sum, n;
	cr_assert_eq(sscanf(OUT(&r), "%lld %lld %lld %lld %lld %lld", &soft, &hard, &raised, &most,
	                    &sum, &n),
	             6, "stdout=%.300s", OUT(&r));
	fprintf(stderr, "nofile: soft %lld hard %lld; 10 processes held %lld files (most %lld)\n",
	        soft, hard, sum, most);
	/* 64 MiB / (64 pids * 16 KiB) */
	cr_expect_eq(soft, 64);
	cr_expect_eq(hard, 64);
	cr_expect_eq(raised, 0, "the hard limit was raised from inside");
	cr_expect_eq(n, 10);
	cr_expect_leq(most, 64, "one process opened %lld files", most);
	cr_expect_gt(most, 56, "the limit should be reachable, not hit early: %lld", most);
	cr_expect_leq(sum * small.pids_max / 10, small.memory_bytes / AIRLOCK_SANDBOX_FILE_COST,
	              "10 processes held %lld files: all %lld pids would pass the budget", sum,
	              (long long)small.pids_max);
	airlock_execution_result_clear(&r);
}

/* At the default limits (2 GiB, 512 pids) a process gets 256; with fewer
 * pids for the same memory, more (1024 at 64); below the floor, 32. */
Test(kobjects, descriptors_at_the_default_limits, .timeout = 120)
{
	static const struct {
		int64_t memory, pids;
		long long want;
	} cases[] = { { 2048 * MiB, 512, 256 }, { 2048 * MiB, 64, 1024 }, { 32 * MiB, 256, 32 } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		airlock_resource_limits l = limits_at(cases[i].memory, cases[i].pids);
		box b;
		box_open(&b, "tenant-nofile-default", &l);
		airlock_execution_result r;
		py(&b, "import resource; print(*resource.getrlimit(resource.RLIMIT_NOFILE))", 60, &r);
		long long soft = -1, hard = -1;
		cr_assert_eq(sscanf(OUT(&r), "%lld %lld", &soft, &hard), 2, "stdout=%.300s stderr=%.300s",
		             OUT(&r), ERR(&r));
		cr_expect(soft == cases[i].want && hard == cases[i].want,
		          "memory %lld, pids %lld: RLIMIT_NOFILE %lld/%lld, want %lld",
		          (long long)cases[i].memory, (long long)cases[i].pids, soft, hard,
		          cases[i].want);
		airlock_execution_result_clear(&r);
		box_close(&b);
	}
}


/* ---- what a sandbox can still learn ---------------------------- */

/* docs/native.md lists the host's network counters under /proc/self/net as
 * visible: sockstat's memory column is the host's, not the namespace's.
 * The test holds 2 MiB unread in a TCP connection of its own on the host
 * (so the host's count is at least that) while the sandbox, whose own
 * namespace has no socket with anything queued, reads the column; and
 * protocols and softnet_stat are readable. */
static const char host_counters[] =
	"import os\n"
	"mem = -1\n"
	"for line in open('/proc/self/net/sockstat'):\n"
	"    if line.startswith('TCP:'):\n"
	"        f = line.split(); mem = int(f[f.index('mem') + 1])\n"
	"p = sum(1 for _ in open('/proc/self/net/protocols'))\n"
	"s = sum(1 for _ in open('/proc/self/net/softnet_stat'))\n"
	"print(mem * os.sysconf('SC_PAGE_SIZE'), p, s)\n";

Test(kobjects, the_hosts_network_counters_are_visible_as_listed, .timeout = 120)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	cr_assert(l >= 0 && bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 1) == 0 &&
	          getsockname(l, (struct sockaddr *)&sa, &len) == 0);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	cr_assert(c >= 0);
	connect(c, (struct sockaddr *)&sa, sizeof(sa));
	int a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	cr_assert(a >= 0);
	static char chunk[65536];
	long long queued = 0;
	for (int i = 0; i < 32; i++) {
		ssize_t n = send(c, chunk, sizeof(chunk), MSG_DONTWAIT);
		if (n <= 0)
			break;
		queued += n;
	}
	cr_assert_geq(queued, 2 * MiB, "queued only %lld bytes on the host", queued);
	airlock_execution_result r;
	py_alone("tenant-counters", host_counters, &r);
	long long mem = -1, protocols = -1, cpus = -1;
	cr_assert_eq(sscanf(OUT(&r), "%lld %lld %lld", &mem, &protocols, &cpus), 3, "stdout=%.300s",
	             OUT(&r));
	fprintf(stderr, "host counters seen inside: TCP mem %lld bytes, %lld protocol lines, "
	                "%lld CPUs\n",
	        mem, protocols, cpus);
	/* The sandbox's own namespace holds no TCP socket, so its own share
	 * would be near 0; the host's counter holds what this test queued.
	 * Half of it, not all: the kernel adds socket memory to that counter
	 * in per-CPU batches (up to a MiB each), so a reading can lag what is
	 * queued (seen here: 1.2 MiB read while 2 MiB were queued). */
	cr_expect_geq(mem, queued / 2, "the sandbox read TCP mem %lld with %lld queued on the host: "
	              "not the host's", mem, queued);
	cr_expect_gt(protocols, 1);
	cr_expect_geq(cpus, 1);
	airlock_execution_result_clear(&r);
	close(a);
	close(c);
	close(l);
}
