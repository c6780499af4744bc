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
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sandbox_testlib.h"

#define MiB (1ll << 20)

static const airlock_resource_limits small = {
	.cpu_millicores = 1000, .memory_bytes = 64 * MiB, .pids_max = 64,
	.workspace_bytes = 64 * MiB, .inodes_max = 2000, .wall_clock_seconds = 120,
};

TestSuite(kobjects, .timeout = 180);


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

/* ---- a host-wide counter, sampled while a command runs ---------------------------- */

/* Reads one number from the host; < 0 when it cannot. */
typedef long long (*host_reader)(void);

typedef struct sampler {
	host_reader read;
	atomic_bool stop;
	long long before, peak;
	pthread_t thread;
} sampler;

static void *sampler_main(void *arg)
{
	sampler *s = arg;
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	while (!atomic_load(&s->stop)) {
		long long v = s->read();
		if (v > s->peak)
			s->peak = v;
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void sampler_start(sampler *s, host_reader read)
{
	memset(s, 0, sizeof(*s));
	s->read = read;
	s->before = read();
	cr_assert_geq(s->before, 0, "cannot read the host counter");
	s->peak = s->before;
	cr_assert_eq(pthread_create(&s->thread, NULL, sampler_main, s), 0);
}

/* The counter's rise over its value at the start. */
static long long sampler_rise(sampler *s)
{
	atomic_store(&s->stop, true);
	pthread_join(s->thread, NULL);
	return s->peak - s->before;
}

/* The pages of a protocol's line in /proc/net/sockstat ("TCP: ... mem N"),
 * a count the kernel keeps for the whole host, in bytes. */
static long long sockstat_mem(const char *proto)
{
	FILE *f = fopen("/proc/net/sockstat", "re");
	if (!f)
		return -1;
	char line[512];
	long long v = -1;
	size_t plen = strlen(proto);
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, proto, plen) != 0 || line[plen] != ':')
			continue;
		const char *m = strstr(line, " mem ");
		if (m)
			v = atoll(m + 5) * sysconf(_SC_PAGESIZE);
	}
	fclose(f);
	return v;
}

static long long tcp_mem(void) { return sockstat_mem("TCP"); }
static long long udp_mem(void) { return sockstat_mem("UDP"); }

static long long aio_nr(void)
{
	FILE *f = fopen("/proc/sys/fs/aio-nr", "re");
	if (!f)
		return -1;
	long long v = -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
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
	box b;
	box_open(&b, "tenant-netlink", &small);
	airlock_execution_result r;
	py(&b, netlink, 60, &r);
	cr_assert_eq(r.exit_code, 0, "stdout=%.300s stderr=%.600s", OUT(&r), ERR(&r));
	cr_expect(strstr(OUT(&r), "route:socket:97 usersock:socket:97 sock_diag:socket:97 "
	                          "kobject_uevent:socket:97\n"),
	          "want EAFNOSUPPORT (97) from every netlink socket; got %.300s", OUT(&r));
	cr_expect(strstr(OUT(&r), "resolved True\n"), "getaddrinfo: %.300s %.300s", OUT(&r),
	          ERR(&r));
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* ---- socket buffers ---------------------------------------------------------------- */

/* 200 loopback connections, each written to until the kernel stops taking
 * more (at most 8 MiB each), never read. Prints the bytes queued in the
 * kernel: unsent and unacknowledged on the writers, unread on the readers.
 * Before the cap this was 780 MB under a 64 MiB limit. */
static const char tcp_pin[] =
	"import fcntl, socket, struct, termios\n"
	"l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(512)\n"
	"socks = []\n"
	"chunk = b'x' * 65536\n"
	"for i in range(200):\n"
	"    c = socket.create_connection(l.getsockname()); a, _ = l.accept()\n"
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

Test(kobjects, tcp_buffers_are_capped, .timeout = 180)
{
	box b;
	box_open(&b, "tenant-tcp", &small);
	airlock_execution_result r;
	sampler s;
	sampler_start(&s, tcp_mem);
	py(&b, tcp_pin, 60, &r);
	long long rise = sampler_rise(&s);
	long long queued = ran_and_printed(&r);
	fprintf(stderr, "tcp: %lld bytes queued, host TCP memory rose by %lld bytes\n", queued,
	        rise);
	/* The cap is a quarter of the limit (16 MiB), and the kernel lets
	 * each socket go a few pages past it; 48 MiB is far below what an
	 * uncapped sandbox queues and far above what a capped one can. The
	 * host's count also carries other processes' traffic. */
	cr_expect_lt(queued, 48 * MiB, "%lld bytes queued in TCP sockets under a 64 MiB limit",
	             queued);
	cr_expect_lt(rise, 96 * MiB, "host TCP memory rose by %lld bytes", rise);
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* 450 receivers (900 descriptors), each sent five 60000-byte datagrams it
 * never reads; then every receiver is drained and the payload that had
 * been queued is counted. Uncapped, a receive buffer holds four of them:
 * 108 MB in all. */
static const char udp_pin[] =
	"import socket\n"
	"rs = []\n"
	"tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
	"msg = b'x' * 60000\n"
	"for i in range(450):\n"
	"    r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); r.bind(('127.0.0.1', 0))\n"
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
	box b;
	box_open(&b, "tenant-udp", &small);
	airlock_execution_result r;
	sampler s;
	sampler_start(&s, udp_mem);
	py(&b, udp_pin, 60, &r);
	long long rise = sampler_rise(&s);
	long long queued = ran_and_printed(&r);
	fprintf(stderr, "udp: %lld bytes queued, host UDP memory rose by %lld bytes\n", queued,
	        rise);
	/* 16 MiB of buffers hold about 15 MB of these datagrams. */
	cr_expect_lt(queued, 24 * MiB, "%lld bytes queued in UDP sockets under a 64 MiB limit",
	             queued);
	cr_expect_lt(rise, 64 * MiB, "host UDP memory rose by %lld bytes", rise);
	airlock_execution_result_clear(&r);
	box_close(&b);
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
	"    a, b = socket.socketpair(); ps += [a, b]\n"
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
	box b;
	box_open(&b, "tenant-inflight", &small);
	airlock_execution_result r;
	py(&b, inflight, 60, &r);
	cr_assert_eq(r.exit_code, 0, "stdout=%.300s stderr=%.600s", OUT(&r), ERR(&r));
	long long sent, e;
	cr_assert_eq(sscanf(OUT(&r), "%lld %lld", &sent, &e), 2, "stdout=%.300s", OUT(&r));
	fprintf(stderr, "inflight: %lld descriptors in flight, then errno %lld\n", sent, e);
	/* The kernel refuses a message once the count is past the limit, so
	 * one message's worth (SCM_MAX_FD, 253) may go over. */
	cr_expect_leq(sent, 1024 + 253, "%lld descriptors in flight", sent);
	cr_expect_eq(e, 109, "stopped by errno %lld, want ETOOMANYREFS (109)", e);
	airlock_execution_result_clear(&r);
	box_close(&b);
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
	box b;
	box_open(&b, "tenant-aio", &small);
	airlock_execution_result r;
	sampler s;
	sampler_start(&s, aio_nr);
	py(&b, aio, 60, &r);
	long long rise = sampler_rise(&s);
	long long e = ran_and_printed(&r);
	cr_expect_eq(e, 38, "io_setup in the sandbox: errno %lld, want ENOSYS (38)", e);
	cr_expect_leq(rise, 0, "the host's fs.aio-nr rose by %lld", rise);
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* The descriptor limit: 1024 soft and hard, not raisable, and ten
 * processes each stop at it, holding their descriptors at the same time. */
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

Test(kobjects, descriptors_are_bounded_per_process, .timeout = 120)
{
	box b;
	box_open(&b, "tenant-nofile", &small);
	airlock_execution_result r;
	py(&b, nofile, 60, &r);
	cr_assert_eq(r.exit_code, 0, "stdout=%.300s stderr=%.600s", OUT(&r), ERR(&r));
	long long soft, hard, raised, most, sum, n;
	cr_assert_eq(sscanf(OUT(&r), "%lld %lld %lld %lld %lld %lld", &soft, &hard, &raised, &most,
	                    &sum, &n),
	             6, "stdout=%.300s", OUT(&r));
	fprintf(stderr, "nofile: soft %lld hard %lld; 10 processes held %lld files (most %lld)\n",
	        soft, hard, sum, most);
	cr_expect_eq(soft, 1024);
	cr_expect_eq(hard, 1024);
	cr_expect_eq(raised, 0, "the hard limit was raised from inside");
	cr_expect_eq(n, 10);
	cr_expect_leq(most, 1024, "one process opened %lld files", most);
	cr_expect_gt(most, 1000, "the limit should be reachable, not hit early: %lld", most);
	cr_expect_leq(sum, 10 * 1024);
	airlock_execution_result_clear(&r);
	box_close(&b);
}

