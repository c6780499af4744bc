/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's small programs (starter.h has the contracts and the
 * reasons), one static executable without libc with three modes chosen by
 * argv[0]: the command's starter, the sandbox's init (native), and the
 * runtime's keeper (gvisor). Built that way because each runs where the
 * service's code must not: the starter and init inside the sandbox, whose
 * libraries are the image's, after the seccomp filter is in place; init and
 * the keeper for the sandbox's whole life, where a fork of the service
 * would keep a copy of the service's memory (its credential, its TLS keys)
 * for as long. One file and one embedded blob for the three rather than
 * three: they share the system call code and the sealed memfd, and each
 * mode is a few dozen lines. It reads nothing but its argv, envp and the
 * descriptors its mode names, and allocates nothing.
 *
 * Compiled by the custom target in meson.build with -ffreestanding -nostdlib
 * -static; the headers it includes contribute constants only.
 */
#include <asm/unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/prctl.h>
#include <linux/wait.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "airlock/caps.h"
#include "airlock/tiers.h"
#include "exec/starter/starter.h"
#include "exec/starter/sync.h"

#if defined(__x86_64__)
__asm__(".text\n"
        ".globl _start\n"
        ".type _start,@function\n"
        "_start:\n"
        "\txor %ebp, %ebp\n"
        "\tmov %rsp, %rdi\n"
        "\tand $-16, %rsp\n"
        "\tcall starter_main\n"
        "\thlt\n");

static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
	                 : "=a"(r)
	                 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
	                 : "rcx", "r11", "memory");
	return r;
}
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl _start\n"
        ".type _start,%function\n"
        "_start:\n"
        "\tmov x29, #0\n"
        "\tmov x30, #0\n"
        "\tmov x0, sp\n"
        "\tand sp, x0, #-16\n"
        "\tbl starter_main\n"
        "\tbrk #0\n");

static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc 0"
	                 : "+r"(x0)
	                 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
	                 : "memory");
	return x0;
}
#else
#error "the command starter has system call code for x86_64 and aarch64 only"
#endif

static long sys3(long n, long a, long b, long c)
{
	return sys6(n, a, b, c, 0, 0, 0);
}

_Noreturn void starter_main(long *sp);

_Noreturn static void sys_exit(int code)
{
	for (;;)
		sys3(__NR_exit_group, code, 0, 0);
}

static size_t str_len(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

static int str_eq(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

static int has_slash(const char *s)
{
	for (; *s; s++)
		if (*s == '/')
			return 1;
	return 0;
}

/* execve's result as a positive errno. */
static int exec_path(const char *path, char *const *argv, char *const *envp)
{
	long r = sys3(__NR_execve, (long)path, (long)argv, (long)envp);
	return r < 0 ? (int)-r : EIO;
}

/* argv[0] is resolved against the image's fixed PATH only, never against
 * the workspace or the command's environment, so a file dropped in the
 * workspace cannot shadow a tool. */
static int exec_command(char *const *argv, char *const *envp)
{
	const char *name = argv[0];
	if (has_slash(name))
		return exec_path(name, argv, envp);
	static const char path[] = AIRLOCK_SANDBOX_PATH;
	char buf[AIRLOCK_STARTER_EXEC_PATH_MAX];
	size_t nlen = str_len(name);
	int saved = ENOENT;
	const char *p = path;
	for (;;) {
		const char *end = p;
		while (*end && *end != ':')
			end++;
		size_t dlen = (size_t)(end - p);
		if (dlen + 1 + nlen + 1 <= sizeof(buf)) {
			for (size_t i = 0; i < dlen; i++)
				buf[i] = p[i];
			buf[dlen] = '/';
			for (size_t i = 0; i <= nlen; i++)
				buf[dlen + 1 + i] = name[i];
			int e = exec_path(buf, argv, envp);
			if (e != ENOENT && e != ENOTDIR)
				saved = e;
		}
		if (!*end)
			break;
		p = end + 1;
	}
	return saved;
}

/* ---- init (native) ------------------------------------------------------------
 * fd 3 the lifeline, fd 4 the sync socket (starter.h). */

/* One message on the sync socket, as native_child_send does: sendto with
 * MSG_NOSIGNAL, so a service already gone is an error here, not a SIGPIPE. */
static void init_send(int kind, int step, int value)
{
	native_msg m = { .kind = kind, .step = step, .value = value };
	long r;
	do
		r = sys6(__NR_sendto, 4, (long)&m, (long)sizeof(m), MSG_NOSIGNAL, 0, 0);
	while (r == -EINTR);
}

_Noreturn static void init_fail(long r)
{
	init_send(NATIVE_MSG_FAILED, NATIVE_STEP_INIT, r < 0 ? (int)-r : EIO);
	sys_exit(126);
}

_Noreturn static void init_main(void)
{
	/* Not dumpable, as the copy of the service was after its uid change
	 * (a credential change clears the flag; this exec, with none, sets it
	 * again). Dumpable, init would be open to every sandbox process of its
	 * uid: its /proc/1 entries visible through hidepid=invisible, its
	 * memory writable through /proc/1/mem, so a command could take over
	 * pid 1 and stop it watching the lifeline. Not dumpable, reaching it
	 * needs CAP_SYS_PTRACE in the sandbox's user namespace, which no
	 * sandbox process has. Before READY: no command runs yet. */
	long r = sys6(__NR_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0, 0);
	if (r < 0)
		init_fail(r);
	/* SIGCHLD is taken from a signalfd rather than by a handler: a handler
	 * needs a signal-return trampoline (SA_RESTORER) this program would
	 * have to write per architecture, and with the default disposition
	 * (ignore) a child's exit would not wake the poll at all. Blocked, it
	 * is queued for the signalfd. Nothing inherits the mask: init starts
	 * no process (commands are the service's children, CLONE_PARENT). */
	unsigned long set = 1UL << (SIGCHLD - 1);
	r = sys6(__NR_rt_sigprocmask, SIG_BLOCK, (long)&set, 0, sizeof(set), 0, 0);
	if (r < 0)
		init_fail(r);
	long sfd = sys6(__NR_signalfd4, -1, (long)&set, sizeof(set), O_CLOEXEC | O_NONBLOCK, 0, 0);
	if (sfd < 0)
		init_fail(sfd);
	/* Up: the service's provision waits for this, so a sandbox is never
	 * handed out before its init is this program. Then the sync socket
	 * goes: init keeps nothing of the service's but the lifeline. */
	init_send(NATIVE_MSG_READY, 0, 0);
	sys3(__NR_close, 4, 0, 0);
	/* Reap orphans; when the service goes away without destroying the
	 * sandbox, its end of the lifeline closes and init exits, which ends
	 * every process of the pid namespace: a sandbox never outlives the
	 * service that started it. (PR_SET_PDEATHSIG would follow the thread
	 * that cloned us, not the service.) */
	for (;;) {
		while (sys6(__NR_wait4, -1, 0, WNOHANG | __WALL, 0, 0, 0) > 0)
			;
		struct pollfd p[2] = { { .fd = 3, .events = POLLIN }, { .fd = (int)sfd, .events = POLLIN } };
		r = sys6(__NR_ppoll, (long)p, 2, 0, 0, 0, 0);
		if (r > 0 && (p[0].revents & (POLLHUP | POLLERR | POLLIN | POLLNVAL)))
			sys_exit(0);
		if (r > 0 && p[1].revents) {
			/* Drained; which children ended is what wait4 finds. */
			char buf[1024];
			while (sys3(__NR_read, sfd, (long)buf, sizeof(buf)) > 0)
				;
		}
	}
}

/* ---- the keeper (gvisor) --------------------------------------------------------
 * argv[1...] the runtime's argv, envp its environment, fd 3 /dev/null. */

_Noreturn static void keeper_main(char *const *argv, char *const *envp)
{
	/* A subreaper: runsc run leaves the sentry's and gofer's ends to
	 * whoever adopts them, and that must be this process, not the host's
	 * init. */
	if (sys6(__NR_prctl, PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0, 0) < 0)
		sys_exit(126);
	/* /dev/null is the keeper's own stdio once the runtime has started:
	 * the runtime does not get it. */
	if (sys3(__NR_fcntl, 3, F_SETFD, FD_CLOEXEC) < 0)
		sys_exit(126);
	/* clone with only SIGCHLD is fork (aarch64 has no fork call). */
	long c = sys6(__NR_clone, SIGCHLD, 0, 0, 0, 0, 0);
	if (c < 0)
		sys_exit(126);
	if (c == 0) {
		sys3(__NR_execve, (long)argv[0], (long)argv, (long)envp);
		sys_exit(127);
	}
	/* The keeper holds none of the pipes: they end with the runtime. */
	for (int i = 0; i < 3; i++)
		sys3(__NR_dup3, 3, i, 0);
	int main_status = 0, main_done = 0;
	for (;;) {
		int st = 0;
		long w = sys6(__NR_wait4, -1, (long)&st, 0, 0, 0, 0);
		if (w == -EINTR)
			continue;
		if (w < 0)
			break; /* ECHILD: everything is reaped */
		if (w == c) {
			main_status = st;
			main_done = 1;
		}
	}
	if (!main_done)
		sys_exit(126);
	/* The runtime's status, as the service's fork kept it: its exit code,
	 * or 128 + the signal that ended it. */
	if ((main_status & 0x7f) == 0)
		sys_exit((main_status >> 8) & 0xff);
	sys_exit(128 + (main_status & 0x7f));
}

__attribute__((used)) _Noreturn void starter_main(long *sp)
{
	long argc = sp[0];
	char **argv = (char **)(sp + 1);
	char **envp = argv + argc + 1;
	/* The other two modes. Neither needs a privilege, so neither refuses
	 * a tenant that reaches it with the right argv[0]: as init it reaps its
	 * own children and watches its own fd 3, as the keeper it starts what
	 * the tenant could have started itself. */
	if (argc == 1 && argv[0] && str_eq(argv[0], NATIVE_INIT_ARGV0))
		init_main();
	if (argc >= 2 && argv[0] && str_eq(argv[0], NATIVE_KEEPER_ARGV0))
		keeper_main(argv + 1, envp);
	/* Anything but the service's own call: the command named
	 * /proc/self/exe (or a script or loader that does), or a tenant
	 * started the starter by a /proc/<pid>/exe link. Executing argv again
	 * would only execute the starter again, forever. */
	if (argc < 2 || !argv[0] || !str_eq(argv[0], NATIVE_STARTER_ARGV0)) {
		static const char msg[] = NATIVE_STARTER_REFUSAL;
		sys3(__NR_write, 2, (long)msg, (long)(sizeof(msg) - 1));
		sys_exit(127);
	}
	/* The exec-error pipe closes when the command's execve succeeds: EOF
	 * is the service's sign that the command runs. */
	sys3(__NR_fcntl, 3, F_SETFD, FD_CLOEXEC);
	int e = exec_command(argv + 1, envp);
	int32_t v[2] = { NATIVE_STEP_EXEC, e ? e : EIO };
	sys3(__NR_write, 3, (long)v, (long)sizeof(v));
	sys_exit(127);
}
