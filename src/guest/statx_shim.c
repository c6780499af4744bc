/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The statx shim (include/airlock/guest.h): a shared object the image's
 * /etc/ld.so.preload loads into every dynamically linked program of the
 * sandbox. Each wrapper clears AT_NO_AUTOMOUNT (0x800) from the flags and
 * makes the system call itself.
 *
 * Why: runsc 20221219 rejects AT_NO_AUTOMOUNT with EINVAL, in statx (GNU ls
 * -l and stat pass 0x900: AT_NO_AUTOMOUNT | AT_SYMLINK_NOFOLLOW, as
 * `runsc --strace` shows) and in newfstatat (0x800, what glibc falls back
 * to and what gnulib's fstatat callers such as find pass). Linux ignores
 * the flag for the stat family everywhere but on an automount point, and a
 * sandbox has none (its mounts are the image, /proc, /dev, /tmp and the
 * workspace), so clearing it changes no answer under the native mechanism
 * either.
 *
 * Why these five symbols: glibc 2.36 exports statx, fstatat and fstatat64
 * (GLIBC_2.33) and still __fxstatat and __fxstatat64 (GLIBC_2.4), which
 * binaries built against glibc before 2.33 call for fstatat; stat, lstat
 * and fstat never take the flag. Calls inside libc itself (its stat() on
 * top of fstatat) do not go through these symbols, and pass no
 * AT_NO_AUTOMOUNT. Static binaries do not load the shim at all and keep the
 * bug (docs/guest.md).
 *
 * Built by the custom target in meson.build with -shared -fPIC and none of
 * the project's flags (no sanitizer runtime exists in the image); it uses
 * nothing but libc's syscall().
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel's stat layout is glibc's struct stat on the 64-bit targets
 * the project builds for (x86_64, aarch64), so newfstatat fills it
 * directly; elsewhere this shim would need a conversion it does not have. */
#if !defined(__x86_64__) && !defined(__aarch64__)
#error "the statx shim passes struct stat to newfstatat: x86_64 and aarch64 only"
#endif

/* glibc's "version" arguments of the old __fxstatat ABI: 0 (the kernel's
 * layout) and, on x86_64, 1 (_STAT_VER_LINUX), both the kernel's struct
 * stat; glibc refuses any other with EINVAL, and so does this. */
#define SHIM_STAT_VER_KERNEL 0
#define SHIM_STAT_VER_LINUX 1

static int shim_flags(int flags)
{
	return flags & ~AT_NO_AUTOMOUNT;
}

/* The ones the five wrappers share: newfstatat without the flag, -1 and
 * errno on failure as libc's functions report. */
static int shim_fstatat(int dirfd, const char *path, struct stat *buf, int flags)
{
	return (int)syscall(SYS_newfstatat, dirfd, path, buf, shim_flags(flags));
}

static int shim_fxstatat(int ver, int dirfd, const char *path, struct stat *buf, int flags)
{
	if (ver != SHIM_STAT_VER_KERNEL && ver != SHIM_STAT_VER_LINUX) {
		errno = EINVAL;
		return -1;
	}
	return shim_fstatat(dirfd, path, buf, flags);
}

/* Exported by name, default visibility: these are what the dynamic linker
 * binds the programs' calls to, ahead of libc's. Declared here because
 * glibc's headers declare some of them only under other feature macros. */
int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf);
int fstatat(int dirfd, const char *path, struct stat *buf, int flags);
int fstatat64(int dirfd, const char *path, struct stat64 *buf, int flags);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *buf, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *buf, int flags);

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf)
{
	return (int)syscall(SYS_statx, dirfd, path, shim_flags(flags), mask, buf);
}

int fstatat(int dirfd, const char *path, struct stat *buf, int flags)
{
	return shim_fstatat(dirfd, path, buf, flags);
}

/* struct stat64 is struct stat on 64-bit targets. */
int fstatat64(int dirfd, const char *path, struct stat64 *buf, int flags)
{
	return shim_fstatat(dirfd, path, (struct stat *)buf, flags);
}

int __fxstatat(int ver, int dirfd, const char *path, struct stat *buf, int flags)
{
	return shim_fxstatat(ver, dirfd, path, buf, flags);
}

int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *buf, int flags)
{
	return shim_fxstatat(ver, dirfd, path, (struct stat *)buf, flags);
}
