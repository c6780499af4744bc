/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a sandbox is the same on every mechanism: what a real program
 * needs of it (Python's multiprocessing: POSIX semaphores and shared
 * memory under /dev/shm), and the one syscall policy (the seccomp filter
 * of exec/native/seccomp.h: every call it refuses answers the same errno).
 *
 * Compiled twice (tests/meson.build): test_native_compat against native,
 * test_gvisor_compat with TEST_MECHANISM_GVISOR against gvisor. The
 * assertions are the same for both; a place where gVisor cannot match
 * native says why.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <seccomp.h>
#include <signal.h>
#include <string.h>

#include "exec/seccomp.h"
#include "sandbox_testlib.h"

/* gVisor's runtime takes memory of its own from the sandbox's limit
 * (tests/test_native_gates.c, SMALL_MEMORY): a Pool of two forked Pythons
 * needs more there than on native. */
#ifdef TEST_MECHANISM_GVISOR
#define COMPAT_MEMORY (512ll << 20)
#else
#define COMPAT_MEMORY (256ll << 20)
#endif
static const airlock_resource_limits compat_limits = {
	.cpu_millicores = 1000, .memory_bytes = COMPAT_MEMORY, .pids_max = 64,
	.workspace_bytes = 64ll << 20, .inodes_max = 2000, .wall_clock_seconds = 120,
};

/* ---- /dev/shm: Python's multiprocessing ------------------------------------ */

/*
 * The three uses of /dev/shm a Python program makes: a Lock (sem_open, a
 * file under /dev/shm), a Pool (its queues take locks) mapping over two
 * workers, and a SharedMemory segment (shm_open) written by a child and
 * read by the parent. Then what /dev/shm is: a tmpfs of its own (not the
 * root's, not /tmp's), mode 1777, bounded (its size is at most the
 * sandbox's memory limit) and writable by the sandbox user, who owns what
 * it makes there.
 */
static const char shm_probe[] =
	"import json, multiprocessing as mp, os, stat\n"
	"from multiprocessing import shared_memory\n"
	"out = {}\n"
	"def attempt(key, fn):\n"
	"    try: out[key] = fn()\n"
	"    except Exception as e: out[key] = 'FAILED %s: %s' % (type(e).__name__, e)\n"
	"def lock():\n"
	"    l = mp.Lock()\n"
	"    with l: pass\n"
	"    return 'ok'\n"
	"attempt('lock', lock)\n"
	"def square(x): return x * x\n"
	"def pool():\n"
	"    with mp.Pool(2) as p: return p.map(square, range(8))\n"
	"attempt('pool', pool)\n"
	"def child(name):\n"
	"    s = shared_memory.SharedMemory(name=name)\n"
	"    s.buf[:5] = b'hello'\n"
	"    s.close()\n"
	"def shm():\n"
	"    s = shared_memory.SharedMemory(create=True, size=1 << 20)\n"
	"    try:\n"
	"        p = mp.Process(target=child, args=(s.name,))\n"
	"        p.start(); p.join()\n"
	"        st = os.stat('/dev/shm/' + s.name)\n"
	"        return {'read': bytes(s.buf[:5]).decode(), 'uid': st.st_uid, 'size': st.st_size}\n"
	"    finally:\n"
	"        s.close(); s.unlink()\n"
	"attempt('shared_memory', shm)\n"
	"st = os.stat('/dev/shm')\n"
	"out['mode'] = oct(stat.S_IMODE(st.st_mode))\n"
	"out['own_fs'] = st.st_dev != os.stat('/').st_dev and st.st_dev != os.stat('/tmp').st_dev\n"
	"fs = os.statvfs('/dev/shm')\n"
	"out['size'] = fs.f_blocks * fs.f_frsize\n"
	"out['fstype'] = [l.split(' - ')[1].split()[0] for l in open('/proc/self/mountinfo')\n"
	"                 if l.split()[4] == '/dev/shm']\n"
	"out['uid'] = os.getuid()\n"
	"print(json.dumps(out))\n";

Test(sandbox_compat, python_multiprocessing_uses_dev_shm, .timeout = 300)
{
	box b;
	box_open(&b, "tenant-compat", &compat_limits);
	airlock_execution_result r;
	json_t *out = py_json(&b, shm_probe, 120, &r);

	cr_expect_str_eq(json_str(out, "lock"), "ok", "multiprocessing.Lock()");
	json_t *pool = json_object_get(out, "pool");
	char *pool_text = json_dumps(pool, JSON_COMPACT | JSON_ENCODE_ANY);
	cr_expect_str_eq(pool_text, "[0,1,4,9,16,25,36,49]", "Pool(2).map: %s", pool_text);
	free(pool_text);
	json_t *shm = json_object_get(out, "shared_memory");
	cr_expect(json_is_object(shm), "SharedMemory(create=True): %s",
	          json_is_string(shm) ? json_string_value(shm) : "?");
	cr_expect_str_eq(json_str(shm, "read"), "hello", "a child's write through shared memory");
	cr_expect_eq(json_integer_value(json_object_get(shm, "uid")), 1000,
	             "the segment is the sandbox user's");
	cr_expect_eq(json_integer_value(json_object_get(shm, "size")), 1 << 20);

	cr_expect_str_eq(json_str(out, "mode"), "0o1777", "/dev/shm's mode");
	cr_expect(json_is_true(json_object_get(out, "own_fs")),
	          "/dev/shm is a file system of its own, not the root's or /tmp's");
	json_t *fstype = json_object_get(out, "fstype");
	cr_expect_eq(json_array_size(fstype), 1, "one mount at /dev/shm");
	cr_expect_str_eq(json_string_value(json_array_get(fstype, 0)), "tmpfs");
	json_int_t size = json_integer_value(json_object_get(out, "size"));
	cr_expect(size > 0 && size <= COMPAT_MEMORY,
	          "/dev/shm is bounded by the sandbox's memory: %lld bytes, limit %lld",
	          (long long)size, (long long)COMPAT_MEMORY);
	cr_expect_eq(json_integer_value(json_object_get(out, "uid")), 1000);
	json_decref(out);
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* ---- one syscall policy ------------------------------------------------------ */

/*
 * Every call the sandbox's filter refuses, tried from inside, on both
 * mechanisms, with the same expected answer: each entry of the filter's
 * deny table (exec_seccomp_denials, so a rule added there is probed
 * here too) and the rules on arguments (clone's namespace flags, socket
 * families, terminal injection, personality, a number newer than the
 * review).
 *
 * Two passes, each call in a forked child, as the escape gate does
 * (tests/test_native_gates.c): the call itself, then the call under a
 * filter of the probe's own answering SECCOMP_RET_TRACE to every probed
 * number. The kernel (and gVisor's sentry, which runs a sandbox's filters
 * the same way) takes the action of highest precedence, and ERRNO ranks
 * above TRACE, so a call the sandbox's filter denies still gets its errno
 * while one the filter lets through gets TRACE, which with no tracer
 * skips the call and answers ENOSYS: an EPERM of the filter is told from
 * an EPERM of the kernel without running the call. For the calls the
 * filter answers ENOSYS (kernel AIO, clone3, the unreviewed range) the
 * first pass tells: their arguments make a call that ran answer something
 * else (EINVAL, EFAULT, or success).
 *
 * Answers are errno numbers, 0 for a call that succeeded, "SIGn" for a
 * child that died of signal n.
 */
static const char policy_probe[] =
	"import ctypes, json, os, signal, struct\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"libc.syscall.restype = ctypes.c_long\n"
	"def sc(nr, args):\n"
	"    ctypes.set_errno(0)\n"
	"    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])\n"
	/* A clone that went through: its child leaves at once. */
	"    if nr == CLONE_NR and r == 0: os._exit(0)\n"
	"    return 0 if r >= 0 else ctypes.get_errno()\n"
	SANDBOX_TEST_PY_FORKED
	"out = {'direct': {}, 'filter': None}\n"
	"for label, nr, args in CALLS:\n"
	"    out['direct'][label] = forked(lambda: sc(nr, args))\n"
	/* A call whose answer is the child's death is not asked twice: it
	 * would end the backstop's child with it. */
	"BACKSTOP = [c for c in CALLS if c[0] not in DIRECT_ONLY]\n"
	"def backstop():\n"
	"    nrs = sorted({nr for _, nr, _ in BACKSTOP})\n"
	"    prog = [(0x20, 0, 0, 4), (0x15, 1, 0, AUDIT_ARCH), (0x06, 0, 0, 0x7fff0000), (0x20, 0, 0, 0)]\n"
	"    prog += [(0x15, len(nrs) - i, 0, nr) for i, nr in enumerate(nrs)]\n"
	"    prog += [(0x06, 0, 0, 0x7fff0000), (0x06, 0, 0, 0x7ff00000)]\n"
	"    code = ctypes.create_string_buffer(b''.join(struct.pack('=HBBI', *i) for i in prog))\n"
	"    class Fprog(ctypes.Structure):\n"
	"        _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_void_p)]\n"
	"    fp = Fprog(len(prog), ctypes.cast(code, ctypes.c_void_p))\n"
	"    if libc.prctl(22, 2, ctypes.byref(fp), 0, 0) != 0:\n"
	"        return 'PROBE-ERROR prctl(PR_SET_SECCOMP): %d' % ctypes.get_errno()\n"
	"    return {label: sc(nr, args) for label, nr, args in BACKSTOP}\n"
	"out['filter'] = forked(backstop)\n"
	"print(json.dumps(out))\n";

/* One probed call: its label, number, arguments and the answer both
 * mechanisms must give. */
typedef struct policy_call {
	char label[64];
	long nr;
	char args[160]; /* a Python tuple */
	int want;       /* errno; 0: the child dies of want_signal */
	int want_signal;
} policy_call;

#define POLICY_CALLS_MAX 160

static size_t policy_add(policy_call *calls, size_t n, const char *label, long nr,
                         const char *args, int want)
{
	cr_assert_lt(n, POLICY_CALLS_MAX);
	snprintf(calls[n].label, sizeof(calls[n].label), "%s", label);
	calls[n].nr = nr;
	snprintf(calls[n].args, sizeof(calls[n].args), "%s", args);
	calls[n].want = want;
	return n + 1;
}

static long policy_nr(const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);
	cr_assert_neq(nr, __NR_SCMP_ERROR, "libseccomp does not know %s", name);
	return nr;
}

/* The calls: the filter's deny table with zero arguments (which under the
 * backstop never run; where the filter's answer is ENOSYS they make a call
 * that ran answer otherwise: io_setup(0, NULL) is EINVAL), then the rules
 * on arguments, each with arguments a call that ran would accept. */
static size_t policy_calls(policy_call *calls)
{
	const exec_seccomp_denial *d = NULL;
	size_t nd = exec_seccomp_denials(&d), n = 0;
	cr_assert_gt(nd, 40, "the filter's deny table has %zu entries", nd);
	for (size_t i = 0; i < nd; i++) {
		char label[64];
		long nr = d[i].name ? policy_nr(d[i].name) : d[i].nr;
		snprintf(label, sizeof(label), "%s", d[i].name ? d[i].name : "");
		if (!d[i].name)
			snprintf(label, sizeof(label), "syscall %ld", nr);
		n = policy_add(calls, n, label, nr, "(0, 0, 0, 0, 0, 0)", d[i].errno_);
	}
	long clone_nr = policy_nr("clone"), socket_nr = policy_nr("socket");
	long socketpair_nr = policy_nr("socketpair"), ioctl_nr = policy_nr("ioctl");
	long personality_nr = policy_nr("personality"), clone3_nr = policy_nr("clone3");
	/* clone with each namespace flag (and SIGCHLD): a clone that ran
	 * would make a child, which leaves at once. */
	static const struct {
		const char *name;
		long flag;
	} ns[] = { { "NEWNS", 0x00020000 },     { "NEWCGROUP", 0x02000000 },
		   { "NEWUTS", 0x04000000 },    { "NEWIPC", 0x08000000 },
		   { "NEWUSER", 0x10000000 },   { "NEWPID", 0x20000000 },
		   { "NEWNET", 0x40000000 } };
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		char label[64], args[64];
		snprintf(label, sizeof(label), "clone(CLONE_%s)", ns[i].name);
		snprintf(args, sizeof(args), "(%ld, 0, 0, 0, 0)", ns[i].flag | 17);
		n = policy_add(calls, n, label, clone_nr, args, EPERM);
	}
	/* clone3's flags are out of BPF's reach: ENOSYS, and libc falls back
	 * to clone. A clone3 that ran would answer EFAULT for a NULL struct. */
	n = policy_add(calls, n, "clone3", clone3_nr, "(0, 88)", ENOSYS);
	/* Address families: netlink, packet, alg, vsock; and inet with junk
	 * in the upper half of the domain, which the kernel would ignore. */
	n = policy_add(calls, n, "socket(AF_NETLINK)", socket_nr, "(16, 3, 0)", EAFNOSUPPORT);
	n = policy_add(calls, n, "socket(AF_PACKET)", socket_nr, "(17, 3, 0)", EAFNOSUPPORT);
	n = policy_add(calls, n, "socket(AF_ALG)", socket_nr, "(38, 5, 0)", EAFNOSUPPORT);
	n = policy_add(calls, n, "socket(AF_VSOCK)", socket_nr, "(40, 1, 0)", EAFNOSUPPORT);
	n = policy_add(calls, n, "socket(AF_INET | 1 << 32)", socket_nr, "((1 << 32) | 2, 1, 0)",
	               EAFNOSUPPORT);
	n = policy_add(calls, n, "socketpair(AF_NETLINK)", socketpair_nr, "(16, 3, 0, 0)",
	               EAFNOSUPPORT);
	/* Terminal injection on stdin, with junk in the request's upper half
	 * too. A TIOCSTI that ran on a pipe would answer ENOTTY. */
	n = policy_add(calls, n, "ioctl(TIOCSTI)", ioctl_nr, "(0, 0x5412, 0)", EPERM);
	n = policy_add(calls, n, "ioctl(TIOCSTI | 1 << 32)", ioctl_nr, "(0, (1 << 32) | 0x5412, 0)",
	               EPERM);
	n = policy_add(calls, n, "ioctl(TIOCLINUX)", ioctl_nr, "(0, 0x541c, 0)", EPERM);
	/* personality(ADDR_NO_RANDOMIZE): ASLR off for later execs. */
	n = policy_add(calls, n, "personality(ADDR_NO_RANDOMIZE)", personality_nr, "(0x0040000,)",
	               EPERM);
	/* A number past the review: ENOSYS until someone reads what it does. */
	n = policy_add(calls, n, "syscall 470", 470, "(0, 0, 0, 0, 0, 0)", ENOSYS);
#if defined(__x86_64__)
	/* An x32 call (getpid with bit 30): another ABI, whose numbers no
	 * rule covers, kills the process (SIGSYS). Without the filter gVisor
	 * would answer ENOSYS (it has no x32). */
	n = policy_add(calls, n, "x32 getpid", 0x40000000L | 39, "()", 0);
	calls[n - 1].want_signal = SIGSYS;
#endif
	return n;
}

Test(sandbox_compat, every_call_the_filter_refuses_answers_the_same, .timeout = 300)
{
	static policy_call calls[POLICY_CALLS_MAX];
	size_t n = policy_calls(calls);
	size_t cap = sizeof(policy_probe) + n * 300 + 256;
	char *code = malloc(cap);
	cr_assert_not_null(code);
	int len = snprintf(code, cap, "CLONE_NR = %ld\nAUDIT_ARCH = %u\nDIRECT_ONLY = [",
	                   (long)policy_nr("clone"), (unsigned)seccomp_arch_native());
	for (size_t i = 0; i < n; i++)
		if (calls[i].want_signal)
			len += snprintf(code + len, cap - (size_t)len, "'%s', ", calls[i].label);
	len += snprintf(code + len, cap - (size_t)len, "]\nCALLS = [\n");
	for (size_t i = 0; i < n; i++)
		len += snprintf(code + len, cap - (size_t)len, " ('%s', %ld, %s),\n", calls[i].label,
		                calls[i].nr, calls[i].args);
	len += snprintf(code + len, cap - (size_t)len, "]\n%s", policy_probe);
	cr_assert_lt((size_t)len, cap);

	box b;
	box_open(&b, "tenant-policy", &compat_limits);
	airlock_execution_result r;
	json_t *out = py_json(&b, code, 180, &r);
	free(code);
	json_t *direct = json_object_get(out, "direct"), *filt = json_object_get(out, "filter");
	cr_assert(json_is_object(filt), "the backstop pass did not run: %s", OUT(&r));
	char fails[8192] = "";
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		const char *label = calls[i].label;
		json_t *dv = json_object_get(direct, label), *fv = json_object_get(filt, label);
		char dtext[64], ftext[64];
		snprintf(dtext, sizeof(dtext), "%s",
		         json_is_integer(dv) ? "" : (json_is_string(dv) ? json_string_value(dv) : "?"));
		snprintf(ftext, sizeof(ftext), "%s",
		         json_is_integer(fv) ? "" : (json_is_string(fv) ? json_string_value(fv) : "?"));
		if (calls[i].want_signal) {
			char want[16];
			snprintf(want, sizeof(want), "SIG%d", calls[i].want_signal);
			if (strcmp(dtext, want) != 0 && used < sizeof(fails) - 200)
				used += (size_t)snprintf(fails + used, sizeof(fails) - used,
				                         "%s: %s%lld, want the child killed by %s; ",
				                         label, dtext, (long long)json_integer_value(dv),
				                         want);
			continue;
		}
		bool ok_direct = json_is_integer(dv) && json_integer_value(dv) == calls[i].want;
		bool ok_filter = json_is_integer(fv) && json_integer_value(fv) == calls[i].want;
		if ((!ok_direct || !ok_filter) && used < sizeof(fails) - 200)
			used += (size_t)snprintf(fails + used, sizeof(fails) - used,
			                         "%s: %s%lld then %s%lld under TRACE, want %s; ", label,
			                         dtext, (long long)json_integer_value(dv), ftext,
			                         (long long)json_integer_value(fv),
			                         strerrorname_np(calls[i].want));
	}
	cr_expect_str_empty(fails, "on %s, calls the policy refuses answered otherwise: %s",
	                    SANDBOX_TEST_MECHANISM, fails);
	json_decref(out);
	airlock_execution_result_clear(&r);
	box_close(&b);
}
