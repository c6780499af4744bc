/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host-wide counters a test samples while a sandbox's command runs (the
 * kernel objects suites): a thread reads one number every 20 ms and keeps
 * its peak; the rise is the peak over the value at the start. The counters
 * are the whole host's, so other processes' traffic is in them too.
 */
#ifndef AIRLOCK_TESTS_HOST_COUNTERS_H
#define AIRLOCK_TESTS_HOST_COUNTERS_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sandbox_testlib.h"

/* Reads one number from the host; < 0 when it cannot. */
typedef long long (*host_reader)(void);

typedef struct sampler {
	host_reader read;
	atomic_bool stop;
	long long before, peak;
	pthread_t thread;
} sampler;

static inline void *sampler_main(void *arg)
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

static inline void sampler_start(sampler *s, host_reader read)
{
	memset(s, 0, sizeof(*s));
	s->read = read;
	s->before = read();
	cr_assert_geq(s->before, 0, "cannot read the host counter");
	s->peak = s->before;
	cr_assert_eq(pthread_create(&s->thread, NULL, sampler_main, s), 0);
}

/* Waits, at most 10 s, until the counter has stopped falling: what an
 * earlier test's sockets held is freed after its sandbox is gone, and a
 * start taken while it drains hides the rise that follows. */
static inline void host_counter_settle(host_reader read)
{
	struct timespec ts = { 0, 250 * 1000 * 1000 };
	long long last = read();
	for (int i = 0; i < 40; i++) {
		nanosleep(&ts, NULL);
		long long v = read();
		if (v >= last)
			return;
		last = v;
	}
}

/* The counter's rise over its value at the start. */
static inline long long sampler_rise(sampler *s)
{
	atomic_store(&s->stop, true);
	pthread_join(s->thread, NULL);
	return s->peak - s->before;
}

/* Code (python3) in a new sandbox with limits l, the host counter read
 * sampled while it runs (after it has settled): the counter's rise, and
 * the command's result in *r. The sandbox is gone on return. */
static inline long long sandbox_sampled_run(const char *tenant, const airlock_resource_limits *l,
                                            const char *code, int timeout_s, host_reader read,
                                            airlock_execution_result *r)
{
	box b;
	box_open(&b, tenant, l);
	host_counter_settle(read);
	sampler s;
	sampler_start(&s, read);
	py(&b, code, timeout_s, r);
	long long rise = sampler_rise(&s);
	box_close(&b);
	return rise;
}

/* The first number in a file of /proc (fs.aio-nr; fs.file-nr, whose first
 * is the file-table entries allocated); -1 when it cannot be read. */
static inline long long proc_first_number(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	long long v = -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* The pages of a protocol's line in /proc/net/sockstat ("TCP: ... mem N"),
 * a count the kernel keeps for the whole host, in bytes. */
static inline long long sockstat_mem(const char *proto)
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

static inline long long tcp_mem(void) { return sockstat_mem("TCP"); }
static inline long long udp_mem(void) { return sockstat_mem("UDP"); }

/* Many connections, both ends sending and never reading: past the cgroup's
 * TCP cap the kernel still force-charges each socket one packet on the
 * sending side and one on the receiving side, to the host-wide count
 * only. Prints the connections each process made. 8 processes of up to 250
 * connections each: 4,000 sockets. */
#define HOST_COUNTERS_TCP_MANY \
	"import os, socket, time\n" \
	"l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(1024)\n" \
	"rep_r, rep_w = os.pipe()\n" \
	"kids = []\n" \
	"for p in range(8):\n" \
	"    pid = os.fork()\n" \
	"    if pid == 0:\n" \
	"        socks = []; n = 0; chunk = b'x' * 65536\n" \
	"        for i in range(250):\n" \
	"            try:\n" \
	"                c = socket.create_connection(l.getsockname()); a, _ = l.accept()\n" \
	"            except OSError:\n" \
	"                break\n" \
	"            socks += [c, a]; n += 1\n" \
	"            for s in (c, a):\n" \
	"                s.setblocking(False)\n" \
	"                for k in range(64):\n" \
	"                    try:\n" \
	"                        s.send(chunk)\n" \
	"                    except BlockingIOError:\n" \
	"                        break\n" \
	"        os.write(rep_w, b'%d ' % n)\n" \
	"        time.sleep(1)\n" \
	"        os._exit(0)\n" \
	"    kids.append(pid)\n" \
	"for k in kids: os.waitpid(k, 0)\n" \
	"os.close(rep_w)\n" \
	"print(sum(int(x) for x in os.read(rep_r, 4096).split()))\n"

/* Connections left in a listener's accept queue belong to no memory cgroup
 * until they are accepted, and take the listener's receive buffer. The
 * listener asks for 4 MiB with SO_RCVBUF and with SO_RCVBUFFORCE (33;
 * refused without CAP_NET_ADMIN on native, taken by gvisor's sentry), each
 * of 100 clients asks SO_SNDBUF 4 MiB and sends until the kernel stops
 * taking more, nothing is accepted. Prints the connections made, the
 * listener's SO_RCVBUF as read back, and what SO_RCVBUFFORCE answered
 * ("taken" or "refused"). */
#define HOST_COUNTERS_TCP_UNACCEPTED \
	"import socket\n" \
	"l = socket.socket()\n" \
	"l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)\n" \
	"try:\n" \
	"    l.setsockopt(socket.SOL_SOCKET, 33, 4 << 20)\n" \
	"    force = 'taken'\n" \
	"except OSError:\n" \
	"    force = 'refused'\n" \
	"l.bind(('127.0.0.1', 0)); l.listen(1024)\n" \
	"cs = []; chunk = b'x' * 65536\n" \
	"for i in range(100):\n" \
	"    try:\n" \
	"        c = socket.socket()\n" \
	"        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)\n" \
	"        c.settimeout(5); c.connect(l.getsockname())\n" \
	"    except OSError:\n" \
	"        break\n" \
	"    c.setblocking(False); cs.append(c)\n" \
	"    for k in range(128):\n" \
	"        try:\n" \
	"            c.send(chunk)\n" \
	"        except BlockingIOError:\n" \
	"            break\n" \
	"print(len(cs), l.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF), force)\n"

/* TCP sockets held by memory mappings alone: each connection's two ends
 * send until the kernel stops taking more, are mapped (mmap of a TCP
 * socket, PROT_READ, through libc so that no descriptor is kept: Python's
 * mmap module keeps a duplicate) and closed. Up to 3,000 connections, with
 * a handful of descriptors open at any time. Prints the connections held
 * and why it stopped: "done", the exception and errno of the connect, or
 * "mmap:<errno>" when the mapping was refused. */
#define HOST_COUNTERS_TCP_MAPPED \
	"import ctypes, socket\n" \
	"libc = ctypes.CDLL(None, use_errno=True)\n" \
	"libc.mmap.restype = ctypes.c_void_p\n" \
	"libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,\n" \
	"                      ctypes.c_int, ctypes.c_long]\n" \
	"l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(64)\n" \
	"n = 0; why = 'done'; chunk = b'x' * 65536\n" \
	"for i in range(3000):\n" \
	"    try:\n" \
	"        c = socket.create_connection(l.getsockname(), timeout=2); a, _ = l.accept()\n" \
	"    except OSError as e:\n" \
	"        why = '%s:%s' % (type(e).__name__, e.errno); break\n" \
	"    held = 0\n" \
	"    for s in (c, a):\n" \
	"        s.setblocking(False)\n" \
	"        for k in range(64):\n" \
	"            try:\n" \
	"                s.send(chunk)\n" \
	"            except OSError:\n" \
	"                break\n" \
	"        p = libc.mmap(None, 4096, 1, 1, s.fileno(), 0)\n" \
	"        if p is None or p == 2**64 - 1:\n" \
	"            why = 'mmap:%d' % ctypes.get_errno()\n" \
	"        else:\n" \
	"            held += 1\n" \
	"        s.close()\n" \
	"    if held < 2:\n" \
	"        break\n" \
	"    n += 1\n" \
	"print(n, why)\n"

/* Connections whose client has closed, left in their listeners' accept
 * queues: 8 listeners, up to 1,000 clients each, every client sending
 * what the kernel takes at once of 16 KiB (what the peer's receive buffer
 * holds) and closing, every other one with a reset (SO_LINGER 0: the
 * unaccepted end is then in TCP_CLOSE, still queued with what it
 * received), nothing accepted. The unaccepted ends keep no
 * descriptor and belong to no memory cgroup. Prints the connections made
 * and why the last listener's run stopped ("done", or the exception and
 * errno of the connect). */
#define HOST_COUNTERS_TCP_ABANDONED \
	"import socket, struct\n" \
	"ls = []\n" \
	"for i in range(8):\n" \
	"    l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(1024); ls.append(l)\n" \
	"n = 0; why = 'done'; chunk = b'x' * 16384\n" \
	"for l in ls:\n" \
	"    for k in range(1000):\n" \
	"        try:\n" \
	"            c = socket.create_connection(l.getsockname(), timeout=1)\n" \
	"            c.setblocking(False); c.send(chunk)\n" \
	"            if k % 2:\n" \
	"                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))\n" \
	"            c.close()\n" \
	"        except OSError as e:\n" \
	"            why = '%s:%s' % (type(e).__name__, e.errno); break\n" \
	"        n += 1\n" \
	"print(n, why)\n"

#endif
