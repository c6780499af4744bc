/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The command's starter (starter.h has the contract and the reason). Built
 * as its own static executable without libc: it runs inside the sandbox,
 * whose libraries are the image's, after the seccomp filter is in place,
 * and it must be small enough to copy and execute per command cheaply. It
 * makes four kinds of system call (fcntl, execve, write, exit_group), reads
 * nothing but its argv and envp, and allocates nothing.
 *
 * Compiled by the custom target in meson.build with -ffreestanding -nostdlib
 * -static; the headers it includes contribute constants only.
 */
#include <asm/unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/caps.h"
#include "airlock/envbuild.h"
#include "exec/native/native_internal.h"
#include "exec/native/starter.h"

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

static long sys3(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall"
	                 : "=a"(r)
	                 : "a"(n), "D"(a), "S"(b), "d"(c)
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

static long sys3(long n, long a, long b, long c)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	return x0;
}
#else
#error "the command starter has system call code for x86_64 and aarch64 only"
#endif

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

__attribute__((used)) _Noreturn void starter_main(long *sp)
{
	long argc = sp[0];
	char **argv = (char **)(sp + 1);
	char **envp = argv + argc + 1;
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
