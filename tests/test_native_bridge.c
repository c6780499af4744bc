/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The orchestration bridge's service side (docs/bridge.md, exec/bridge.h):
 * a sandbox provisioned with spec.bridge finds a Unix socket at
 * socket_path that reaches service.bridge_address, where a connection
 * starts with the service's preface naming the environment; bytes go both
 * ways; at most AIRLOCK_SERVICE_BRIDGE_CONNECTIONS_MAX (8) connections at once; destroy with
 * a connection open returns and leaves no thread or descriptor; without a
 * bridge nothing is at the path; an unset bridge_address and a path the
 * mechanism cannot make are refused at provision.
 *
 * A thread of this test stands in for the worker's listener: it reads the
 * preface line, checks it, sends a first line ("HELLO") and echoes every
 * later byte uppercased until end of file.
 *
 * Compiled twice (tests/meson.build): test_native_bridge and, with
 * TEST_MECHANISM_GVISOR, test_gvisor_bridge.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "airlock/mechanisms.h"
#include "airlock/settings.h"
#include "airlock/tiers.h"
#include "sandbox_testlib.h"

#ifdef TEST_MECHANISM_GVISOR
#define BRIDGE gvisor_bridge
/* A file made in the bridge's mount: gVisor checks the directory's
 * permission (root's, 0755) before the mount's read-only flag; /run/lock
 * is 1777. */
#define NOT_WRITTEN "EACCES EROFS EACCES"
#else
#define BRIDGE native_bridge
#define NOT_WRITTEN "EROFS EROFS EROFS"
#endif

/* The path the worker sends. */
#define SOCKET_PATH AIRLOCK_BRIDGE_SOCKET_PATH
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define WORKER_CONNS_MAX 32

/* ---- the worker's stand-in ------------------------------------------------ */

typedef struct worker {
	char path[108];
	char want[128]; /* the preface it expects */
	int listen_fd, stop_fd;
	pthread_t thread;
	pthread_t conns[WORKER_CONNS_MAX];
	int conn_fds[WORKER_CONNS_MAX];
	size_t n_conns;
	atomic_int prefaces_ok, prefaces_bad, ended;
	atomic_long accepted; /* every connection accepted, those closed at once too */
} worker;

typedef struct worker_conn {
	worker *w;
	int fd;
} worker_conn;

static void *worker_conn_main(void *arg)
{
	worker_conn *c = arg;
	worker *w = c->w;
	int fd = c->fd;
	free(c);
	char line[256];
	size_t n = 0;
	while (n < sizeof(line) - 1) {
		ssize_t k = read(fd, line + n, 1);
		if (k <= 0)
			break;
		if (line[n++] == '\n')
			break;
	}
	line[n] = 0;
	if (strcmp(line, w->want) != 0) {
		atomic_fetch_add(&w->prefaces_bad, 1);
		shutdown(fd, SHUT_RDWR);
		atomic_fetch_add(&w->ended, 1);
		return NULL;
	}
	atomic_fetch_add(&w->prefaces_ok, 1);
	if (write(fd, "HELLO\n", 6) != 6) {
		atomic_fetch_add(&w->ended, 1);
		return NULL;
	}
	char buf[4096];
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = w->stop_fd, .events = POLLIN } };
		if (poll(p, 2, -1) < 0 || p[1].revents)
			break;
		ssize_t k = read(fd, buf, sizeof(buf));
		if (k <= 0)
			break;
		for (ssize_t i = 0; i < k; i++)
			buf[i] = (char)toupper((unsigned char)buf[i]);
		if (write(fd, buf, (size_t)k) != k)
			break;
	}
	shutdown(fd, SHUT_RDWR);
	atomic_fetch_add(&w->ended, 1);
	return NULL;
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	for (;;) {
		struct pollfd p[2] = { { .fd = w->listen_fd, .events = POLLIN },
			               { .fd = w->stop_fd, .events = POLLIN } };
		if (poll(p, 2, -1) < 0 || p[1].revents)
			break;
		int fd = accept4(w->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		atomic_fetch_add(&w->accepted, 1);
		worker_conn *c = malloc(sizeof(*c));
		if (!c || w->n_conns == WORKER_CONNS_MAX) {
			free(c);
			close(fd);
			continue;
		}
		c->w = w;
		c->fd = fd;
		w->conn_fds[w->n_conns] = fd;
		if (pthread_create(&w->conns[w->n_conns], NULL, worker_conn_main, c) != 0) {
			free(c);
			close(fd);
			continue;
		}
		w->n_conns++;
	}
	for (size_t i = 0; i < w->n_conns; i++) {
		pthread_join(w->conns[i], NULL);
		close(w->conn_fds[i]);
	}
	return NULL;
}

static void worker_start(worker *w)
{
	memset(w, 0, sizeof(*w));
	snprintf(w->path, sizeof(w->path), "/run/airlock/bridge-test-%d.sock", (int)getpid());
	mkdir("/run/airlock", 0700);
	unlink(w->path);
	w->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(w->listen_fd, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", w->path);
	cr_assert_eq(bind(w->listen_fd, (struct sockaddr *)&a, sizeof(a)), 0, "%s", strerror(errno));
	cr_assert_eq(listen(w->listen_fd, 64), 0);
	w->stop_fd = eventfd(0, EFD_CLOEXEC);
	cr_assert_geq(w->stop_fd, 0);
	cr_assert_eq(pthread_create(&w->thread, NULL, worker_main, w), 0);
}

static void worker_expect(worker *w, const char *environment_id)
{
	snprintf(w->want, sizeof(w->want), "AIRLOCK-BRIDGE/1 %s\n", environment_id);
}

static void worker_stop(worker *w)
{
	uint64_t one = 1;
	cr_assert_eq(write(w->stop_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	pthread_join(w->thread, NULL);
	close(w->listen_fd);
	close(w->stop_fd);
	unlink(w->path);
}

/* ---- the service ---------------------------------------------------------- */

static char address[128];

static int bridge_adapter(const airlock_egress_policy *policy, airlock_proxy *proxy, void **ret,
                          airlock_error *err)
{
	const char *addr = address[0] ? address : NULL;
#ifdef TEST_MECHANISM_GVISOR
	mkdir("/run/airlock", 0700);
	airlock_gvisor_config c = { .image_store = sandbox_test_store(),
		                    .state_dir = GVISOR_TEST_STATE_ROOT, .start_budget_seconds = 30,
		                    .egress_policy = policy, .egress_proxy = proxy,
		                    .bridge_address = addr };
	return airlock_gvisor_new(&c, (airlock_gvisor **)ret, err);
#else
	airlock_native_config c = { .image_store = sandbox_test_store(), .start_budget_seconds = 30,
		                    .egress_policy = policy, .egress_proxy = proxy,
		                    .bridge_address = addr };
	return airlock_native_new(&c, (airlock_native **)ret, err);
#endif
}

/* A service whose bridge_address is the worker's (NULL: unset). */
static airlock_exec *open_service(const worker *w, sandbox_test_adapter **ret_a)
{
	if (w)
		snprintf(address, sizeof(address), "unix:%s", w->path);
	else
		address[0] = 0;
	return sandbox_test_open_adapter(bridge_adapter, sandbox_test_ops(), NULL, NULL, NULL,
	                                 (void **)ret_a);
}

/* A spec for the default image with a bridge at socket_path (NULL: none),
 * tier 2 carrying its variables. */
static void bridge_spec(airlock_environment_spec *s, const char *digest, const char *socket_path)
{
	sandbox_test_spec(s, "tenant-bridge", digest, NULL);
	if (!socket_path)
		return;
	s->bridge = calloc(1, sizeof(*s->bridge));
	cr_assert_not_null(s->bridge);
	s->bridge->socket_path = strdup(socket_path);
	s->bridge->token = strdup("tok-bridge-test");
	airlock_env_clear(&s->environment);
	extern char **environ;
	airlock_envbuild_input in = { .parent = environ, .bridge = s->bridge };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_envbuild(&in, &s->environment, &err), 0, "%s", err.message);
}

static void run_py(airlock_exec *e, const airlock_environment_handle *h, const char *code,
                   airlock_execution_result *r)
{
	char *argv[] = { "python3", "-c", (char *)code, NULL };
	sandbox_test_run(e, h, argv, 60, NULL, r);
}

/* A worker's stand-in, a service relaying to it, and one sandbox with a
 * bridge at socket_path (NULL: none). */
typedef struct bridged {
	worker w;
	airlock_exec *e;
	sandbox_test_adapter *a;
	airlock_environment_spec spec;
	airlock_environment_handle h;
} bridged;

static void bridged_service(bridged *x)
{
	memset(x, 0, sizeof(*x));
	worker_start(&x->w);
	x->e = open_service(&x->w, &x->a);
}

static void bridged_provision(bridged *x, const char *digest, const char *socket_path)
{
	bridge_spec(&x->spec, digest, socket_path);
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(x->e, &x->spec, &x->h, &err), 0, "%s", err.message);
	worker_expect(&x->w, x->h.environment_id);
}

static void bridged_open(bridged *x, const char *socket_path)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	sandbox_test_require(digest);
	bridged_service(x);
	bridged_provision(x, digest, socket_path);
}

static void bridged_destroy(bridged *x)
{
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_destroy(x->e, &x->h, &err), 0, "%s", err.message);
	airlock_environment_handle_clear(&x->h);
	airlock_environment_spec_clear(&x->spec);
}

static void bridged_close(bridged *x)
{
	airlock_exec_free(x->e);
	worker_stop(&x->w);
}

/* Connect to the bridge, read the first line, send the token line and a
 * message, half-close, read the rest. */
static const char py_both_ways[] =
	"import os, socket, sys\n"
	"s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
	"s.connect(os.environ['AIRLOCK_BRIDGE_SOCKET'])\n"
	"f = s.makefile('rb')\n"
	"first = f.readline()\n"
	"s.sendall(os.environ['AIRLOCK_BRIDGE_TOKEN'].encode() + b'\\nhello bridge\\n')\n"
	"s.shutdown(socket.SHUT_WR)\n"
	"rest = f.read()\n"
	"st = os.stat(os.environ['AIRLOCK_BRIDGE_SOCKET'])\n"
	"sys.stdout.write(first.decode() + '|' + rest.decode() + '|%o %d' % (st.st_mode, st.st_uid))\n";

Test(BRIDGE, bytes_go_both_ways_with_the_preface_first, .timeout = 300)
{
	bridged x;
	bridged_open(&x, SOCKET_PATH);
	airlock_execution_result r;
	run_py(x.e, &x.h, py_both_ways, &r);
	cr_expect_eq(r.exit_code, 0, "%s", ERR(&r));
	cr_expect_str_eq(OUT(&r), "HELLO\n|TOK-BRIDGE-TEST\nHELLO BRIDGE\n|140600 1000", "%s",
	                 ERR(&r));
	cr_expect_eq(atomic_load(&x.w.prefaces_ok), 1);
	cr_expect_eq(atomic_load(&x.w.prefaces_bad), 0);
	airlock_execution_result_clear(&r);
	/* The socket's directory holds the socket alone, the directory the
	 * mount covers keeps what the image has there, and the sandbox can
	 * write nothing into either (the mount is read-only). */
	run_py(x.e, &x.h,
	       "import errno, os\n"
	       "def put(p):\n"
	       "    try: open(p, 'w'); return 'written'\n"
	       "    except OSError as e: return errno.errorcode[e.errno]\n"
	       "print(sorted(os.listdir('/run/airlock')), sorted(os.listdir('/run')),\n"
	       "      put('/run/airlock/x'), put('/run/lock/x'), put('/run/x'))\n",
	       &r);
	cr_expect_str_eq(OUT(&r), "['bridge.sock'] ['airlock', 'lock', 'mount'] " NOT_WRITTEN "\n",
	                 "%s", ERR(&r));
	airlock_execution_result_clear(&r);
	bridged_destroy(&x);
	bridged_close(&x);
}

/* Four MiB each way at once, past the relay's 64 KiB buffers many times
 * over: every byte arrives, in order (the worker's stand-in uppercases
 * them, and the sandbox compares). */
Test(BRIDGE, megabytes_go_both_ways_intact, .timeout = 300)
{
	bridged x;
	bridged_open(&x, SOCKET_PATH);
	airlock_execution_result r;
	run_py(x.e, &x.h,
	       "import hashlib, os, socket, threading\n"
	       "data = os.urandom(4 << 20)\n"
	       "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
	       "s.connect(os.environ['AIRLOCK_BRIDGE_SOCKET'])\n"
	       "def send():\n"
	       "    s.sendall(data); s.shutdown(socket.SHUT_WR)\n"
	       "t = threading.Thread(target=send); t.start()\n"
	       "got = bytearray()\n"
	       "while True:\n"
	       "    b = s.recv(1 << 16)\n"
	       "    if not b: break\n"
	       "    got += b\n"
	       "t.join()\n"
	       "want = b'HELLO\\n' + data.upper()\n"
	       "print(len(got), hashlib.sha256(got).digest() == hashlib.sha256(want).digest())\n",
	       &r);
	cr_expect_str_eq(OUT(&r), "4194310 True\n", "%s", ERR(&r));
	airlock_execution_result_clear(&r);
	bridged_destroy(&x);
	bridged_close(&x);
}

Test(BRIDGE, without_a_bridge_nothing_is_at_the_path, .timeout = 300)
{
	bridged x;
	bridged_open(&x, NULL);
	airlock_execution_result r;
	run_py(x.e, &x.h,
	       "import os\n"
	       "print(os.path.lexists('/run/airlock'), os.path.lexists('" SOCKET_PATH "'),\n"
	       "      'AIRLOCK_BRIDGE_SOCKET' in os.environ, 'AIRLOCK_BRIDGE_TOKEN' in os.environ)\n",
	       &r);
	cr_expect_str_eq(OUT(&r), "False False False False\n", "%s", ERR(&r));
	airlock_execution_result_clear(&r);
	cr_expect_eq(atomic_load(&x.w.prefaces_ok) + atomic_load(&x.w.prefaces_bad), 0);
	bridged_destroy(&x);
	bridged_close(&x);
}

/* Eight connections held open each get the worker's first line; the ninth
 * is accepted and closed; once one of the eight is closed, a new one is
 * relayed again (the cap is on connections at once). */
Test(BRIDGE, a_ninth_connection_at_once_is_closed, .timeout = 300)
{
	bridged x;
	bridged_open(&x, SOCKET_PATH);
	airlock_execution_result r;
	run_py(x.e, &x.h,
	       "import os, socket, time\n"
	       "P = os.environ['AIRLOCK_BRIDGE_SOCKET']\n"
	       "def first(s):\n"
	       "    s.settimeout(10)\n"
	       "    try: return s.recv(6).decode() or 'EOF'\n"
	       "    except ConnectionResetError: return 'EOF'\n"
	       "    except socket.timeout: return 'TIMEOUT'\n"
	       "def conn():\n"
	       "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(P); return s\n"
	       "held = [conn() for _ in range(8)]\n"
	       "out = [first(s) for s in held]\n"
	       "ninth = conn(); out.append(first(ninth)); ninth.close()\n"
	       "held.pop().close()\n"
	       "again = 'EOF'\n"
	       "for _ in range(50):\n"
	       "    s = conn(); again = first(s)\n"
	       "    if again != 'EOF': break\n"
	       "    s.close(); time.sleep(0.1)\n"
	       "out.append(again)\n"
	       "print(' '.join(x.strip() for x in out))\n",
	       &r);
	cr_expect_str_eq(OUT(&r), "HELLO HELLO HELLO HELLO HELLO HELLO HELLO HELLO EOF HELLO\n",
	                 "%s", ERR(&r));
	airlock_execution_result_clear(&r);
	bridged_destroy(&x);
	bridged_close(&x);
}

/* A script that connects and closes in a loop: what each connection
 * costs the service (an accept, a thread, a connection to the worker and
 * its preface) and the worker (a thread, a log line, a lookup) is not the
 * sandbox's CPU, so the service relays a sandbox's connections at a
 * bounded rate, whatever the script's. */
Test(BRIDGE, connecting_in_a_loop_reaches_the_worker_at_a_bounded_rate, .timeout = 300)
{
	/* The worker's stand-in writes to connections the relay has closed. */
	signal(SIGPIPE, SIG_IGN);
	bridged x;
	bridged_open(&x, SOCKET_PATH);
	airlock_execution_result r;
	run_py(x.e, &x.h,
	       "import os, socket, time\n"
	       "P = os.environ['AIRLOCK_BRIDGE_SOCKET']\n"
	       "n, t = 0, time.time()\n"
	       "while time.time() - t < 3:\n"
	       "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
	       "    s.settimeout(1)\n"
	       "    try: s.connect(P); n += 1\n"
	       "    except OSError: pass\n"
	       "    s.close()\n"
	       "print(n)\n",
	       &r);
	cr_expect_eq(r.exit_code, 0, "%s", ERR(&r) ? ERR(&r) : "");
	long tried = OUT(&r) ? strtol(OUT(&r), NULL, 10) : -1;
	airlock_execution_result_clear(&r);
	long reached = atomic_load(&x.w.accepted);
	cr_expect_leq(reached, 300,
	              "%ld connections of the script's %ld in 3 s reached the worker", reached,
	              tried);
	bridged_destroy(&x);
	bridged_close(&x);
}

static long count_dir(const char *path)
{
	return leak_count_dir(path, NULL);
}

typedef struct exec_in_thread {
	airlock_exec *e;
	const airlock_environment_handle *h;
	airlock_execution_result r;
	int rc;
} exec_in_thread;

static void *execute_main(void *arg)
{
	exec_in_thread *x = arg;
	char *argv[] = { "python3", "-c",
		         "import os, socket, time\n"
		         "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
		         "s.connect(os.environ['AIRLOCK_BRIDGE_SOCKET'])\n"
		         "s.recv(6)\n"
		         "time.sleep(120)\n",
		         NULL };
	airlock_execution_command cmd = test_command(argv);
	cmd.timeout_seconds = 200;
	airlock_exec_call call = { .tenant_id = x->h->tenant_id,
		                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	airlock_error err = { 0 };
	x->rc = airlock_exec_execute(x->e, &call, x->h, &cmd, &x->r, &err);
	return NULL;
}

/* Destroy while a command holds a relayed connection: it returns, the
 * worker's end is closed, and the service holds no more threads or
 * descriptors than before the sandbox, and nothing of it on the host. */
Test(BRIDGE, destroy_with_a_connection_open_leaves_nothing, .timeout = 300)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	sandbox_test_require(digest);
	bridged x;
	bridged_service(&x);
	/* A warm-up sandbox, so what a service keeps for its life (the
	 * image's mount) is in the baseline. */
	bridged_provision(&x, digest, SOCKET_PATH);
	bridged_destroy(&x);
	leak_counts before = leak_measure();
	long threads = count_dir("/proc/self/task");

	bridged_provision(&x, digest, SOCKET_PATH);
	exec_in_thread run = { .e = x.e, .h = &x.h };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, execute_main, &run), 0);
	for (int i = 0; i < 600 && atomic_load(&x.w.prefaces_ok) < 1; i++)
		usleep(50 * 1000);
	cr_assert_eq(atomic_load(&x.w.prefaces_ok), 1, "the command's connection reached the worker");
	bridged_destroy(&x);
	pthread_join(t, NULL);
	cr_expect_eq(run.rc, 0);
	airlock_execution_result_clear(&run.r);
	for (int i = 0; i < 100 && atomic_load(&x.w.ended) < 1; i++)
		usleep(50 * 1000);
	cr_expect_eq(atomic_load(&x.w.ended), 1, "the worker's end was closed");

	leak_counts after = leak_measure();
	cr_expect_eq(count_dir("/proc/self/task"), threads, "threads");
	/* The worker's stand-in holds its side's descriptor until it stops. */
	cr_expect_eq(after.fds, before.fds + 1, "descriptors %ld -> %ld (+1: the worker's)",
	             before.fds, after.fds);
	cr_expect_eq(after.mounts, before.mounts, "mounts %ld -> %ld", before.mounts, after.mounts);
	cr_expect_eq(after.gvisor_state, before.gvisor_state, "state entries %ld -> %ld",
	             before.gvisor_state, after.gvisor_state);
	cr_expect_eq(after.p.sandbox_tasks, 0, "sandbox processes left");
	bridged_close(&x);
}

/* A service without service.bridge_address refuses a spec with a bridge at
 * provision, naming the setting; nothing is provisioned. */
Test(BRIDGE, an_unset_bridge_address_is_refused_naming_it, .timeout = 120)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	sandbox_test_require(digest);
	sandbox_test_adapter *a = NULL;
	airlock_exec *e = open_service(NULL, &a);
	airlock_environment_spec spec;
	bridge_spec(&spec, digest, SOCKET_PATH);
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	cr_expect_eq(airlock_exec_provision(e, &spec, &h, &err),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "%s", err.message);
	cr_expect(strstr(err.message, "service.bridge_address is unset"), "%s", err.message);
	cr_expect_eq(sandbox_test_live_count(a), 0);
	airlock_environment_spec_clear(&spec);
	airlock_exec_free(e);
}

/* Paths the mechanism cannot make are refused at provision, naming
 * EnvironmentSpec.bridge.socket_path and why; a good one after them works
 * on the same service (nothing was left half made). */
Test(BRIDGE, a_socket_path_that_cannot_be_made_is_refused, .timeout = 300)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	sandbox_test_require(digest);
	bridged x;
	bridged_service(&x);
	const struct {
		const char *path, *why;
	} bad[] = {
		{ "/bridge.sock", "needs a directory of its own below /" },
		{ "/etc/bridge.sock", "the image's /etc holds" },
		{ "/usr/lib/bridge-test/bridge.sock", "the image's /usr/lib holds" },
		{ "/tmp/bridge.sock", "below /tmp" },
		{ "/workspace/b/bridge.sock", "below /workspace" },
		{ "/run/../etc/bridge.sock", "normalized" },
		{ "/nowhere/x/bridge.sock", "top directory is missing" },
		{ "/bin/bridge.sock", "not a directory in the image" }, /* /bin is a symlink */
		{ "/run/airlock/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.sock",
		  "shorter than 108 bytes" },
	};
	for (size_t i = 0; i < N_OF(bad); i++) {
		airlock_environment_spec spec;
		bridge_spec(&spec, digest, bad[i].path);
		airlock_environment_handle h = { 0 };
		airlock_error err = { 0 };
		cr_expect_eq(airlock_exec_provision(x.e, &spec, &h, &err),
		             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "%s: %s", bad[i].path,
		             err.message);
		cr_expect(strstr(err.message, "EnvironmentSpec.bridge.socket_path="), "%s",
		          err.message);
		cr_expect(strstr(err.message, bad[i].why), "%s: want \"%s\": %s", bad[i].path,
		          bad[i].why, err.message);
		cr_expect_eq(sandbox_test_live_count(x.a), 0);
		airlock_environment_spec_clear(&spec);
	}
	/* A directory the image has, empty: the socket's directory goes over
	 * it (/mnt in the default image). */
	bridged_provision(&x, digest, "/mnt/b.sock");
	airlock_execution_result r;
	run_py(x.e, &x.h, py_both_ways, &r);
	cr_expect_str_eq(OUT(&r), "HELLO\n|TOK-BRIDGE-TEST\nHELLO BRIDGE\n|140600 1000", "%s",
	                 ERR(&r));
	airlock_execution_result_clear(&r);
	bridged_destroy(&x);
	bridged_close(&x);
}

#ifndef TEST_MECHANISM_GVISOR
/* The settings' service.bridge_address (here from its environment
 * variable) reaches the mechanism the registry opens: a sandbox of that
 * service reaches the worker. (Native only: the registry's gvisor would use
 * the real state directory.) */
Test(BRIDGE, the_setting_reaches_the_mechanism_from_the_settings, .timeout = 120)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	sandbox_test_require(digest);
	worker w;
	worker_start(&w);
	airlock_settings st;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_settings_default(&st, &err), 0, "%s", err.message);
	char var[160];
	snprintf(var, sizeof(var), "AIRLOCK_SERVICE_BRIDGE_ADDRESS=unix:%s", w.path);
	char *envp[] = { var, NULL };
	cr_assert_eq(airlock_settings_apply_env(&st, envp, &err), 0, "%s", err.message);
	st.mechanism = AIRLOCK_MECHANISM_NATIVE;
	free(st.image_store);
	st.image_store = strdup(sandbox_test_store());
	airlock_exec *e = NULL;
	cr_assert_eq(airlock_exec_open(&st, &e, &err), 0, "%s", err.message);
	airlock_environment_spec spec;
	bridge_spec(&spec, digest, SOCKET_PATH);
	airlock_environment_handle h = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "%s", err.message);
	worker_expect(&w, h.environment_id);
	airlock_execution_result r;
	run_py(e, &h, py_both_ways, &r);
	cr_expect_str_eq(OUT(&r), "HELLO\n|TOK-BRIDGE-TEST\nHELLO BRIDGE\n|140600 1000", "%s",
	                 ERR(&r));
	airlock_execution_result_clear(&r);
	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	airlock_environment_handle_clear(&h);
	airlock_environment_spec_clear(&spec);
	airlock_exec_free(e);
	airlock_settings_clear(&st);
	worker_stop(&w);
}
#endif
