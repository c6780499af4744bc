/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a real program needs of a sandbox, the same on every mechanism:
 * Python's multiprocessing (POSIX semaphores and shared memory under
 * /dev/shm).
 *
 * Compiled twice (tests/meson.build): test_native_compat against native,
 * test_gvisor_compat with TEST_MECHANISM_GVISOR against gvisor. The
 * assertions are the same for both; a place where gVisor cannot match
 * native says why.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
