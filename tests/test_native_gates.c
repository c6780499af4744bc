/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The security gates against the native mechanism (sandbox-isolation.md,
 * "Hard gates"): limits_enforced, no_credential_reaches, network_denied,
 * workspace_isolated, escape_denied. Every probe is a real program running
 * in a real sandbox; isolation gates never run against fake.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <sys/inotify.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "native_testlib.h"

static const airlock_resource_limits small = {
	.cpu_millicores = 1000, .memory_bytes = 128ll << 20, .pids_max = 64,
	.workspace_bytes = 64ll << 20, .inodes_max = 2000, .wall_clock_seconds = 120,
};

typedef struct box {
	airlock_exec *e;
	airlock_environment_spec spec;
	airlock_environment_handle h;
} box;

static void box_open(box *b, const char *tenant, const airlock_resource_limits *l)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	native_test_require(digest);
	memset(b, 0, sizeof(*b));
	b->e = native_test_open(NULL);
	native_test_spec(&b->spec, tenant, digest, l);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(b->e, &b->spec, &b->h, &err), 0, "%s", err.message);
}

static void box_close(box *b)
{
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_destroy(b->e, &b->h, &err), 0, "%s", err.message);
	airlock_exec_free(b->e);
	airlock_environment_handle_clear(&b->h);
	airlock_environment_spec_clear(&b->spec);
}

static void py(box *b, const char *code, int timeout_s, airlock_execution_result *r)
{
	char *argv[] = { "python3", "-c", (char *)code, NULL };
	native_test_run(b->e, &b->h, argv, timeout_s, NULL, r);
}

/* ---- gate.sandbox.limits_enforced ---------------------------------------- */

static void expect_kill(airlock_execution_result *r, airlock_kill_reason want, const char *partial)
{
	cr_assert_eq(r->killed_by, want, "killed_by=%s, want %s; exit=%d stdout=%.200s stderr=%.400s",
	             r->killed_by ? airlock_kill_reason_name(r->killed_by) : "null",
	             airlock_kill_reason_name(want), r->exit_code, OUT(r), ERR(r));
	cr_assert_not(r->has_exit_code, "exit_code is absent when killed_by is set");
	cr_assert_eq(r->timed_out, want == AIRLOCK_KILL_TIMEOUT);
	cr_assert(strstr(OUT(r), partial), "partial output is returned: got %.200s", OUT(r));
}

static const char spin[] = "print('spinning', flush=True)\nwhile True: pass\n";
static const char allocate[] =
	"import sys\nchunks = []\nprint('allocating', flush=True)\n"
	"while True:\n    chunks.append(bytearray(16 << 20))\n";
static const char forkbomb[] =
	"import os, time\nprint('forking', flush=True)\n"
	"while True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n";
static const char diskfill[] =
	"print('filling', flush=True)\nf = open('/workspace/fill', 'wb')\n"
	"block = b'x' * (1 << 20)\nwhile True:\n    f.write(block)\n    f.flush()\n";
static const char filecount[] =
	"import os\nprint('creating', flush=True)\nos.makedirs('/workspace/many', exist_ok=True)\n"
	"i = 0\nwhile True:\n    open('/workspace/many/f%d' % i, 'w').close()\n    i += 1\n";

Test(gate_sandbox_limits_enforced, small_limits, .timeout = 300)
{
	box b;
	box_open(&b, "tenant-limits", &small);
	airlock_execution_result r;

	py(&b, spin, 2, &r);
	expect_kill(&r, AIRLOCK_KILL_TIMEOUT, "spinning");
	cr_assert(r.duration_ms >= 1900 && r.duration_ms < 30000, "duration %lld", (long long)r.duration_ms);
	airlock_execution_result_clear(&r);

	py(&b, allocate, 60, &r);
	expect_kill(&r, AIRLOCK_KILL_MEMORY, "allocating");
	airlock_execution_result_clear(&r);

	py(&b, forkbomb, 60, &r);
	expect_kill(&r, AIRLOCK_KILL_PIDS, "forking");
	airlock_execution_result_clear(&r);

	py(&b, diskfill, 60, &r);
	expect_kill(&r, AIRLOCK_KILL_DISK, "filling");
	airlock_execution_result_clear(&r);
	char *rm[] = { "rm", "-f", "/workspace/fill", NULL };
	native_test_run(b.e, &b.h, rm, 30, NULL, &r);
	cr_assert_eq(r.exit_code, 0, "%s", ERR(&r));
	airlock_execution_result_clear(&r);

	py(&b, filecount, 60, &r);
	expect_kill(&r, AIRLOCK_KILL_DISK, "creating");
	airlock_execution_result_clear(&r);

	/* After all that the sandbox still works: nothing was left running. */
	char *ps[] = { "sh", "-c", "ls /proc | grep -c '^[0-9]'", NULL };
	native_test_run(b.e, &b.h, ps, 30, NULL, &r);
	cr_assert_eq(r.exit_code, 0);
	/* init, sh, ls, grep at most: no survivor of an earlier command. */
	cr_assert(atoi(OUT(&r)) <= 4, "processes left behind: %s", OUT(&r));
	airlock_execution_result_clear(&r);
	box_close(&b);
}

Test(gate_sandbox_limits_enforced, default_limits, .timeout = 900)
{
	/* The specification's defaults: memory 2 GiB, workspace 4 GiB. The disk
	 * filler must end as DISK, not MEMORY: the workspace is not RAM. */
	airlock_resource_limits d = {
		.cpu_millicores = 2000, .memory_bytes = 2ll << 30, .pids_max = 512,
		.workspace_bytes = 4ll << 30, .inodes_max = 100000, .wall_clock_seconds = 300,
	};
	box b;
	box_open(&b, "tenant-defaults", &d);
	airlock_execution_result r;
	py(&b, spin, 2, &r);
	expect_kill(&r, AIRLOCK_KILL_TIMEOUT, "spinning");
	airlock_execution_result_clear(&r);
	py(&b, allocate, 120, &r);
	expect_kill(&r, AIRLOCK_KILL_MEMORY, "allocating");
	airlock_execution_result_clear(&r);
	py(&b, diskfill, 280, &r);
	expect_kill(&r, AIRLOCK_KILL_DISK, "filling");
	airlock_execution_result_clear(&r);
	box_close(&b);
}

Test(gate_sandbox_limits_enforced, output_limit_kills_and_keeps_the_head)
{
	box b;
	box_open(&b, "tenant-output", &small);
	char *argv[] = { "sh", "-c", "yes airlock", NULL };
	airlock_execution_command cmd = test_command(argv);
	cmd.maximum_output_bytes = 4096;
	cmd.timeout_seconds = 30;
	airlock_exec_call call = { .tenant_id = "tenant-output", .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_execute(b.e, &call, &b.h, &cmd, &r, &err), 0, "%s", err.message);
	expect_kill(&r, AIRLOCK_KILL_OUTPUT_LIMIT, "airlock\nairlock\n");
	cr_assert(r.stdout_truncated);
	cr_assert_eq(r.stdout_len, 4096);
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* ---- gate.sandbox.no_credential_reaches ----------------------------------- */

/* Realistic credentials in the worker's environment. */
static const char *const creds[][2] = {
	{ "DATABASE_URL", "postgres://airlock:Sup3rS3cretPw@db.internal:5432/platform" },
	{ "AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE" },
	{ "AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY" },
	{ "AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLETOKENdGhpcyBpcyBub3QgcmVhbA" },
	{ "OPENAI_API_KEY", "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD" },
	{ "ANTHROPIC_API_KEY", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789" },
	{ "GITHUB_TOKEN", "ghp_abcdefghijklmnopqrstuvwxyz0123456789" },
	{ "AIRLOCK_SERVICE_TOKEN", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ3b3JrZXIifQ.c2lnbmF0dXJl" },
	{ "OBJECT_STORE_SECRET_KEY", "minio-secret-key-0123456789abcdef" },
};

/* Dump the environment, then read every file the sandbox can reach
 * (bounded per file), and print it all. */
static const char dump_everything[] =
	"import os, sys\n"
	"out = sys.stdout.buffer\n"
	"for k, v in os.environ.items():\n"
	"    out.write(('%s=%s\\n' % (k, v)).encode())\n"
	"seen = 0\n"
	"for root, dirs, files in os.walk('/', followlinks=False):\n"
	"    for name in files:\n"
	"        p = os.path.join(root, name)\n"
	"        try:\n"
	"            with open(p, 'rb') as f:\n"
	"                data = f.read(1 << 16)\n"
	"        except Exception:\n"
	"            continue\n"
	"        seen += 1\n"
	"        out.write(data)\n"
	"out.write(b'\\nFILES_READ=%d\\n' % seen)\n";

static bool contains(const airlock_execution_result *r, const char *needle)
{
	return memmem(r->stdout_data, r->stdout_len, needle, strlen(needle)) ||
	       memmem(r->stderr_data, r->stderr_len, needle, strlen(needle));
}

/* The first match of an extended regex in stdout or stderr, scanning the
 * NUL-free runs of the binary output; NULL when there is none. The returned
 * text is in a static buffer. */
static const char *scan(const airlock_execution_result *r, const char *pattern)
{
	regex_t re;
	cr_assert_eq(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0, "%s", pattern);
	static char hit[128];
	const char *found = NULL;
	const unsigned char *bufs[] = { r->stdout_data, r->stderr_data };
	size_t lens[] = { r->stdout_len, r->stderr_len };
	for (int k = 0; k < 2 && !found; k++) {
		size_t i = 0;
		while (i < lens[k] && !found) {
			const unsigned char *nul = memchr(bufs[k] + i, 0, lens[k] - i);
			size_t end = nul ? (size_t)(nul - bufs[k]) : lens[k];
			char *run = strndup((const char *)bufs[k] + i, end - i);
			cr_assert_not_null(run);
			if (regexec(&re, run, 0, NULL, 0) == 0) {
				snprintf(hit, sizeof(hit), "%s", run);
				found = hit;
			}
			free(run);
			i = end + 1;
		}
	}
	regfree(&re);
	return found;
}

Test(gate_sandbox_no_credential_reaches, environment_and_every_reachable_file, .timeout = 300)
{
	for (size_t i = 0; i < sizeof(creds) / sizeof(creds[0]); i++)
		setenv(creds[i][0], creds[i][1], 1);
	box b;
	box_open(&b, "tenant-creds", &small);
	airlock_execution_command cmd;
	char *argv[] = { "python3", "-c", (char *)dump_everything, NULL };
	cmd = test_command(argv);
	cmd.maximum_output_bytes = AIRLOCK_OUTPUT_BYTES_MAX;
	cmd.timeout_seconds = 240;
	airlock_exec_call call = { .tenant_id = "tenant-creds", .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_execute(b.e, &call, &b.h, &cmd, &r, &err), 0, "%s", err.message);
	cr_assert_eq(r.exit_code, 0, "%.400s", ERR(&r));
	cr_assert(contains(&r, "HOME=/workspace"), "the dump ran");
	cr_assert(contains(&r, "FILES_READ="), "the walk finished");
	for (size_t i = 0; i < sizeof(creds) / sizeof(creds[0]); i++) {
		cr_assert_not(contains(&r, creds[i][0]), "tier-0 name %s reached the sandbox", creds[i][0]);
		cr_assert_not(contains(&r, creds[i][1]), "the value of %s reached the sandbox", creds[i][0]);
	}
	/* The secret-scanner patterns, independent of the values planted: the
	 * shapes of real credentials, not bare prefixes (the image's Basque
	 * message catalogues contain the letters AKIA). */
	static const char *const patterns[] = {
		"AKIA[0-9A-Z]{16}",                             /* AWS access key id */
		"sk-(ant|proj)-[A-Za-z0-9_-]{20,}",             /* provider API keys */
		"ghp_[A-Za-z0-9]{36}",                          /* GitHub token */
		"postgres(ql)?://[^:/@ ]+:[^@/ ]+@",            /* URL with a password */
		"-----BEGIN ([A-Z]+ )?PRIVATE KEY-----",        /* a private key */
		"eyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.", /* a JWT */
	};
	for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
		const char *where = scan(&r, patterns[i]);
		cr_assert_null(where, "secret pattern /%s/ found in the sandbox: %.80s", patterns[i], where);
	}
	airlock_execution_result_clear(&r);
	box_close(&b);
	for (size_t i = 0; i < sizeof(creds) / sizeof(creds[0]); i++)
		unsetenv(creds[i][0]);
}

/* ---- gate.sandbox.network_denied ------------------------------------------ */

static const char network_probe[] =
	"import socket, errno\n"
	"def tcp(host, port):\n"
	"    s = socket.socket()\n"
	"    s.settimeout(3)\n"
	"    try:\n"
	"        s.connect((host, port)); return 'CONNECTED'\n"
	"    except OSError as e:\n"
	"        return errno.errorcode.get(e.errno, str(e))\n"
	"print('public', tcp('198.51.100.7', 80))\n"
	"print('metadata', tcp('169.254.169.254', 80))\n"
	"try:\n"
	"    socket.getaddrinfo('example.com', 443)\n"
	"    print('dns RESOLVED')\n"
	"except OSError as e:\n"
	"    print('dns', type(e).__name__)\n"
	"u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
	"try:\n"
	"    u.sendto(b'x', ('8.8.8.8', 53)); print('udp SENT')\n"
	"except OSError as e:\n"
	"    print('udp', errno.errorcode.get(e.errno, str(e)))\n"
	"print('ifaces', sorted(n for _, n in socket.if_nameindex()))\n"
	"try:\n"
	"    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); print('vsock OPEN')\n"
	"except OSError as e:\n"
	"    print('vsock', errno.errorcode.get(e.errno, str(e)))\n";

Test(gate_sandbox_network_denied, tcp_dns_and_metadata_fail_at_the_namespace, .timeout = 120)
{
	box b;
	box_open(&b, "tenant-net", &small);
	airlock_execution_result r;
	py(&b, network_probe, 60, &r);
	cr_assert_eq(r.exit_code, 0, "%s", ERR(&r));
	/* ENETUNREACH: there is no route at all, not a refusal by anyone. */
	cr_assert(strstr(OUT(&r), "public ENETUNREACH"), "%s", OUT(&r));
	cr_assert(strstr(OUT(&r), "metadata ENETUNREACH"), "%s", OUT(&r));
	cr_assert(strstr(OUT(&r), "dns gaierror"), "%s", OUT(&r));
	cr_assert(strstr(OUT(&r), "udp ENETUNREACH"), "%s", OUT(&r));
	cr_assert(strstr(OUT(&r), "ifaces ['lo']"), "only lo exists: %s", OUT(&r));
	/* vsock ignores network namespaces: the family itself is refused. */
	cr_assert(strstr(OUT(&r), "vsock EAFNOSUPPORT"), "%s", OUT(&r));
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* ---- gate.sandbox.workspace_isolated ---------------------------------------- */

static const char plant[] =
	"import os\n"
	"open('/workspace/secret.txt', 'w').write('TENANT-A-SECRET-%s' % os.getpid())\n"
	"os.symlink('/workspace/secret.txt', '/workspace/link')\n"
	"print(os.stat('/workspace/secret.txt').st_ino)\n";

static const char hunt[] =
	"import os, sys, subprocess\n"
	"found = []\n"
	"for root, dirs, files in os.walk('/', followlinks=False):\n"
	"    if root.startswith('/proc'):\n"
	"        continue\n"
	"    for n in files:\n"
	"        p = os.path.join(root, n)\n"
	"        try:\n"
	"            if b'TENANT-A-SECRET' in open(p, 'rb').read(1 << 16): found.append(p)\n"
	"        except Exception: pass\n"
	"for pid in os.listdir('/proc'):\n"
	"    if not pid.isdigit(): continue\n"
	"    for sub in ('root/workspace/secret.txt', 'cwd/secret.txt'):\n"
	"        try:\n"
	"            open('/proc/%s/%s' % (pid, sub)).read(); found.append(pid + sub)\n"
	"        except Exception: pass\n"
	"try:\n"
	"    open('/workspace/link').read(); found.append('planted symlink')\n"
	"except Exception: pass\n"
	"print('FOUND', found)\n"
	"print('PIDS', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n";

static void *run_sleeper(void *arg)
{
	box *a = arg;
	char *argv[] = { "sh", "-c", "cd /workspace && sleep 3", NULL };
	airlock_execution_command cmd = test_command(argv);
	airlock_exec_call call = { .tenant_id = a->h.tenant_id, .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_execution_result r = { 0 };
	airlock_error err = { 0 };
	airlock_exec_execute(a->e, &call, &a->h, &cmd, &r, &err);
	airlock_execution_result_clear(&r);
	return NULL;
}

static void isolation_between(const char *tenant_a, const char *tenant_b)
{
	box a, b;
	box_open(&a, tenant_a, &small);
	box_open(&b, tenant_b, &small);
	airlock_execution_result r;
	py(&a, plant, 30, &r);
	cr_assert_eq(r.exit_code, 0, "%s", ERR(&r));
	airlock_execution_result_clear(&r);
	/* A runs a process in its workspace while B hunts: the two sandboxes
	 * are live at once. */
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, run_sleeper, &a), 0);
	py(&b, hunt, 120, &r);
	cr_assert_eq(r.exit_code, 0, "%s", ERR(&r));
	cr_assert(strstr(OUT(&r), "FOUND []"), "B reached A's workspace: %s", OUT(&r));
	airlock_execution_result_clear(&r);
	pthread_join(t, NULL);
	/* A's own view still has its file: the hunt was not blind. */
	py(&a, "print(open('/workspace/secret.txt').read())", 30, &r);
	cr_assert(strstr(OUT(&r), "TENANT-A-SECRET"), "%s", OUT(&r));
	airlock_execution_result_clear(&r);
	box_close(&b);
	box_close(&a);
}

Test(gate_sandbox_workspace_isolated, two_tenants, .timeout = 300)
{
	isolation_between("tenant-a", "tenant-b");
}

Test(gate_sandbox_workspace_isolated, same_tenant, .timeout = 300)
{
	isolation_between("tenant-a", "tenant-a");
}

/* ---- gate.sandbox.escape_denied -------------------------------------------- */

/* Each known path out, tried for real; each prints OK (the attempt failed)
 * or ESCAPED with what happened. Raw system calls go through ctypes so the
 * libc wrappers cannot hide anything. */
static const char escape_probe[] =
	"import ctypes, ctypes.util, errno, os, socket, json\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"res = {}\n"
	"def sc(name, nr, *args):\n"
	"    r = libc.syscall(nr, *args)\n"
	"    res[name] = 'ESCAPED' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), '?')\n"
	"def attempt(name, fn):\n"
	"    try:\n"
	"        fn(); res[name] = 'ESCAPED'\n"
	"    except Exception as e:\n"
	"        res[name] = type(e).__name__ + ':' + str(getattr(e, 'errno', ''))\n"
	"def docker():\n"
	"    s = socket.socket(socket.AF_UNIX); s.connect('/var/run/docker.sock')\n"
	"attempt('docker_socket', docker)\n"
	"attempt('docker_socket_run', lambda: socket.socket(socket.AF_UNIX).connect('/run/docker.sock'))\n"
	"attempt('proc_self_exe_write', lambda: open('/proc/self/exe', 'r+b'))\n"
	"attempt('root_write', lambda: open('/usr/bin/escape', 'w'))\n"
	"sc('mount', 165, b'none', b'/tmp', b'tmpfs', 0, 0)\n"
	"sc('umount', 166, b'/workspace', 2)\n"
	"sc('unshare_user', 272, 0x10000000)\n"
	"sc('unshare_mount', 272, 0x00020000)\n"
	"sc('setns', 308, 0, 0)\n"
	"sc('clone_newuser', 56, 0x10000000 | 17, 0, 0, 0, 0)\n"
	"sc('clone3', 435, 0, 0)\n"
	"sc('fsopen', 430, b'tmpfs', 0)\n"
	"sc('open_tree', 428, -100, b'/', 1)\n"
	"sc('move_mount', 429, -100, b'/tmp', -100, b'/workspace', 0)\n"
	"sc('pivot_root', 155, b'/tmp', b'/tmp')\n"
	"sc('chroot', 161, b'/tmp')\n"
	"sc('ptrace_attach_init', 101, 16, 1, 0, 0)\n"
	"sc('ptrace_traceme', 101, 0, 0, 0, 0)\n"
	"sc('init_module', 175, 0, 0, b'')\n"
	"sc('finit_module', 313, 0, b'', 0)\n"
	"sc('delete_module', 176, b'ext4', 0)\n"
	"sc('kexec_load', 246, 0, 0, 0, 0)\n"
	"sc('io_uring_setup', 425, 8, ctypes.create_string_buffer(120))\n"
	"sc('bpf', 321, 0, ctypes.create_string_buffer(64), 64)\n"
	"sc('keyctl', 250, 0, 0, 0, 0, 0)\n"
	"sc('add_key', 248, b'user', b'x', b'y', 1, -4)\n"
	"sc('perf_event_open', 298, ctypes.create_string_buffer(128), 0, -1, -1, 0)\n"
	"sc('open_by_handle_at', 304, -100, ctypes.create_string_buffer(64), 0)\n"
	"sc('userfaultfd', 323, 0)\n"
	"sc('mknod', 133, b'/tmp/sda', 0o60600, (8 << 8) | 0)\n"
	"sc('setuid0', 105, 0)\n"
	"attempt('proc_sys_write', lambda: open('/proc/sys/kernel/hostname', 'w').write('x'))\n"
	"attempt('sys_write', lambda: open('/sys/kernel/uevent_helper', 'w').write('x'))\n"
	"attempt('dev_mem', lambda: open('/dev/mem', 'rb').read(1))\n"
	"attempt('dev_sda', lambda: open('/dev/sda', 'rb').read(1))\n"
	"def kill_host():\n"
	"    for pid in range(2, 400):\n"
	"        try:\n"
	"            os.kill(pid, 0)\n"
	"            if pid not in [int(p) for p in os.listdir('/proc') if p.isdigit()]: raise RuntimeError('host pid %d' % pid)\n"
	"        except ProcessLookupError: pass\n"
	"    raise PermissionError(1, 'no host process visible')\n"
	"attempt('host_pid_namespace', kill_host)\n"
	"caps = open('/proc/self/status').read()\n"
	"res['capeff'] = 'OK' if 'CapEff:\\t0000000000000000' in caps and 'CapBnd:\\t0000000000000000' in caps else 'ESCAPED ' + caps\n"
	"res['no_new_privs'] = 'OK' if 'NoNewPrivs:\\t1' in caps else 'ESCAPED'\n"
	"res['seccomp'] = 'OK' if 'Seccomp:\\t2' in caps else 'ESCAPED'\n"
	"res['uid'] = 'OK' if os.getuid() == 1000 and os.geteuid() == 1000 else 'ESCAPED %d' % os.getuid()\n"
	"res['proc_sys_visible'] = 'OK' if not os.path.exists('/proc/sys') else 'ESCAPED'\n"
	"print(json.dumps(res))\n";

Test(gate_sandbox_escape_denied, known_escape_paths_fail, .timeout = 120)
{
	box b;
	box_open(&b, "tenant-escape", &small);
	airlock_execution_result r;
	py(&b, escape_probe, 60, &r);
	cr_assert_eq(r.exit_code, 0, "probe failed: %s", ERR(&r));
	cr_assert_gt(r.stdout_len, 100, "%s", OUT(&r));
	cr_assert_null(strstr(OUT(&r), "ESCAPED"), "an escape path was open: %s", OUT(&r));
	/* The setuid binaries of the image do not elevate either. */
	airlock_execution_result_clear(&r);
	char *su[] = { "sh", "-c", "for b in /usr/bin/su /bin/su /usr/bin/passwd /usr/bin/newgrp; do "
	                          "[ -e $b ] && $b -c id root </dev/null 2>&1; done; id -u", NULL };
	native_test_run(b.e, &b.h, su, 30, NULL, &r);
	cr_assert(strstr(OUT(&r), "1000"), "%s", OUT(&r));
	cr_assert_null(strstr(OUT(&r), "uid=0"), "a setuid binary elevated: %s", OUT(&r));
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* Holes cost nothing to make and everything to hash: no file may be larger
 * than the workspace, and files_changed hashes at most the workspace's size
 * before it truncates the listing. */
Test(gate_sandbox_limits_enforced, sparse_files_cannot_stall_the_service, .timeout = 300)
{
	box b;
	box_open(&b, "tenant-sparse", &small);
	airlock_execution_result r;
	py(&b,
	   "import os, errno\n"
	   "try:\n"
	   "    os.truncate(open('/workspace/huge', 'wb').name, 20 << 30)\n"
	   "    print('huge ALLOWED')\n"
	   "except OSError as e:\n"
	   "    print('huge', errno.errorcode[e.errno])\n"
	   "for i in range(200):\n"
	   "    with open('/workspace/s%03d' % i, 'wb') as f:\n"
	   "        f.truncate((64 << 20) - 4096)\n"
	   "print('made 200 sparse files')\n",
	   120, &r);
	cr_assert_eq(r.exit_code, 0, "%s", ERR(&r));
	cr_assert(strstr(OUT(&r), "huge EFBIG"), "a file larger than the workspace: %s", OUT(&r));
	cr_assert(strstr(OUT(&r), "made 200 sparse files"), "%s", OUT(&r));
	cr_assert(r.files_changed_truncated, "200 x 64 MiB of holes were not all hashed");
	int64_t hashed = 0;
	for (size_t i = 0; i < r.n_files_changed; i++)
		hashed += r.files_changed[i].size_bytes;
	cr_assert_leq(hashed, small.workspace_bytes, "hashed %lld bytes", (long long)hashed);
	airlock_execution_result_clear(&r);
	box_close(&b);
}

/* A sandbox's per-user kernel counts (inotify instances here; pending
 * signals, message queues, fanotify groups likewise) are charged to its own
 * host id: exhausting them inside does not starve host root. */
typedef struct holder {
	box *b;
	airlock_execution_result r;
} holder;

static void *hold_inotify(void *arg)
{
	holder *h = arg;
	py(h->b,
	   "import ctypes, time\n"
	   "libc = ctypes.CDLL(None, use_errno=True)\n"
	   "fds = []\n"
	   "while len(fds) < 4096:\n"
	   "    fd = libc.inotify_init1(0)\n"
	   "    if fd < 0: break\n"
	   "    fds.append(fd)\n"
	   "print('instances', len(fds), flush=True)\n"
	   "time.sleep(4)\n",
	   60, &h->r);
	return NULL;
}

Test(gate_sandbox_escape_denied, kernel_counts_are_charged_to_the_sandbox, .timeout = 120)
{
	box b;
	box_open(&b, "tenant-counts", &small);
	holder h = { .b = &b };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, hold_inotify, &h), 0);
	struct timespec ts = { .tv_sec = 2, .tv_nsec = 0 };
	nanosleep(&ts, NULL);
	/* While the sandbox holds every inotify instance it can get, host root
	 * still gets one. */
	int fd = inotify_init1(IN_CLOEXEC);
	int e = errno;
	pthread_join(t, NULL);
	cr_assert(fd >= 0, "host root's inotify_init1 failed while a sandbox held its instances: %s",
	          strerror(e));
	close(fd);
	cr_assert(strstr(OUT(&h.r), "instances "), "%s %s", OUT(&h.r), ERR(&h.r));
	cr_assert_geq(atoi(strstr(OUT(&h.r), "instances ") + 10), 100,
	              "the sandbox did exhaust its own limit: %s", OUT(&h.r));
	airlock_execution_result_clear(&h.r);
	box_close(&b);
}
