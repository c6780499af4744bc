/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_UTIL_SYSCALLS_H
#define AIRLOCK_UTIL_SYSCALLS_H

/*
 * The one home for raw system-call wrappers (crun's syscalls.h does the
 * same). Every call glibc 2.36 either lacks or wraps in a way we do not want
 * goes through here, named sys_*, so there is one copy of each and a
 * reviewer finds every use with one grep. They return what the kernel does:
 * -1 with errno set on failure.
 *
 * Why raw and not glibc's: setres[ug]id and setgroups are called in a
 * clone()d child that shares no threads with glibc's view, where glibc's
 * wrappers would broadcast the change to threads that do not exist there
 * (its setxid signal handshake); the mount API and the pidfd calls are raw
 * because Debian 12's glibc headers and the kernel's <linux/mount.h> cannot
 * both be included, and one set of names avoids mixing the two.
 */

#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- processes ---------------------------------------------------------- */
static inline int sys_pidfd_open(pid_t pid, unsigned int flags)
{
	return (int)syscall(SYS_pidfd_open, pid, flags);
}
static inline int sys_pidfd_send_signal(int pidfd, int sig, siginfo_t *info, unsigned int flags)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, info, flags);
}
static inline pid_t sys_clone3(struct clone_args *args, size_t size)
{
	return (pid_t)syscall(SYS_clone3, args, size);
}
/* clone with no new stack (the child continues on a copy of the caller's,
 * as fork does) and no tls or tid pointers: the flags alone, e.g.
 * CLONE_PARENT, which fork cannot ask for. With every pointer zero the
 * argument order, which differs between architectures, does not matter. */
static inline pid_t sys_clone(unsigned long flags)
{
	return (pid_t)syscall(SYS_clone, flags, 0, NULL, NULL, 0);
}
static inline int sys_close_range(unsigned int first, unsigned int last, unsigned int flags)
{
	return (int)syscall(SYS_close_range, first, last, flags);
}
static inline int sys_execveat(int dirfd, const char *path, char *const argv[],
			       char *const envp[], int flags)
{
	return (int)syscall(SYS_execveat, dirfd, path, argv, envp, flags);
}

/* seccomp(2): glibc 2.36 has no wrapper. */
static inline int sys_seccomp(unsigned int op, unsigned int flags, void *args)
{
	return (int)syscall(SYS_seccomp, op, flags, args);
}

/* bpf(2): glibc has no wrapper; attr is a union bpf_attr of size bytes. */
static inline int sys_bpf(int cmd, void *attr, unsigned int size)
{
	return (int)syscall(SYS_bpf, cmd, attr, size);
}

/* ---- credentials (see above for why raw) --------------------------------- */
static inline int sys_setresuid(uid_t r, uid_t e, uid_t s)
{
	return (int)syscall(SYS_setresuid, r, e, s);
}
static inline int sys_setresgid(gid_t r, gid_t e, gid_t s)
{
	return (int)syscall(SYS_setresgid, r, e, s);
}
static inline int sys_setgroups(size_t n, const gid_t *list)
{
	return (int)syscall(SYS_setgroups, n, list);
}
/* capset/capget take the kernel's header and data structs (linux/capability.h). */
static inline int sys_capset(void *hdr, const void *data)
{
	return (int)syscall(SYS_capset, hdr, data);
}
static inline int sys_capget(void *hdr, void *data)
{
	return (int)syscall(SYS_capget, hdr, data);
}

/* ---- files and mounts ------------------------------------------------------ */
static inline int sys_openat2(int dirfd, const char *path, struct open_how *how)
{
	return (int)syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
}
static inline int sys_fsopen(const char *fstype, unsigned int flags)
{
	return (int)syscall(SYS_fsopen, fstype, flags);
}
static inline int sys_fsconfig(int fsfd, unsigned int cmd, const char *key, const void *value,
			       int aux)
{
	return (int)syscall(SYS_fsconfig, fsfd, cmd, key, value, aux);
}
static inline int sys_fsmount(int fsfd, unsigned int flags, unsigned int attr_flags)
{
	return (int)syscall(SYS_fsmount, fsfd, flags, attr_flags);
}
static inline int sys_move_mount(int from_dirfd, const char *from_path, int to_dirfd,
				 const char *to_path, unsigned int flags)
{
	return (int)syscall(SYS_move_mount, from_dirfd, from_path, to_dirfd, to_path, flags);
}
static inline int sys_open_tree(int dirfd, const char *path, unsigned int flags)
{
	return (int)syscall(SYS_open_tree, dirfd, path, flags);
}
static inline int sys_pivot_root(const char *new_root, const char *put_old)
{
	return (int)syscall(SYS_pivot_root, new_root, put_old);
}

#endif
