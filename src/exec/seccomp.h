/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EXEC_SECCOMP_H
#define AIRLOCK_EXEC_SECCOMP_H

/*
 * The sandbox's seccomp filter (libseccomp), the one syscall policy of
 * every mechanism. Built once in the service, exported as classic BPF, and
 * installed by the child between fork and exec with a single seccomp(2)
 * call: nothing in the child allocates. The gvisor mechanism builds the
 * same program and hands it, as hex, to the guest's `guest exec`, which
 * installs it in each command the same way (airlock/guest.h); gVisor's
 * kernel runs it.
 *
 * Seccomp is mandatory (docs/design-notes.md, "Seccomp is mandatory"):
 * without it an unprivileged process can create a user namespace and reach the new mount API. The filter denies at
 * least: unshare, setns, clone with any namespace flag, clone3 (ENOSYS, so
 * libc falls back to clone, whose flags can be inspected), mount, umount2,
 * pivot_root, chroot, the new mount API (fsopen, fsconfig, fsmount, fspick,
 * move_mount, open_tree, mount_setattr), io_uring_*, bpf, ptrace,
 * process_vm_readv/writev, keyctl, add_key, request_key, kexec_*, module
 * loading, open_by_handle_at, name_to_handle_at, perf_event_open,
 * userfaultfd, and other architectures (a foreign-arch or x32 syscall kills
 * the process). Socket families other than unix, inet and inet6 get
 * EAFNOSUPPORT (vsock ignores network namespaces; netlink queues memory no
 * cgroup is charged for). Kernel AIO (io_setup, io_submit, io_getevents,
 * io_pgetevents, io_cancel, io_destroy) gets ENOSYS: its contexts draw on
 * the host-wide fs.aio-max-nr. System call numbers
 * newer than the last one reviewed get ENOSYS until someone reviews them.
 * Denied calls return EPERM unless noted.
 */

#include <stddef.h>

#include "airlock/error.h"

typedef struct exec_seccomp {
	void *filter; /* struct sock_filter[] */
	unsigned short len;
} exec_seccomp;

int exec_seccomp_build(exec_seccomp *ret, airlock_error *err);

/* The syscalls the filter refuses whatever their arguments, and the errno
 * each answers: the table the filter is built from, for the tests that
 * check every mechanism answers each call the same (the rules on
 * arguments, clone's namespace flags, socket families, ioctl requests and
 * personality values, and the range of numbers newer than the review, are
 * exec_seccomp_build's alone). */
typedef struct exec_seccomp_denial {
	const char *name;
	int nr;     /* used when name is NULL: a number libseccomp cannot resolve */
	int errno_; /* what the call returns */
} exec_seccomp_denial;
size_t exec_seccomp_denials(const exec_seccomp_denial **ret);
void exec_seccomp_clear(exec_seccomp *s);

/* The filter as `guest exec --seccomp` takes it (airlock/guest.h): the
 * program's bytes as lowercase hex, malloc'd; NULL on ENOMEM. The gvisor
 * mechanism hands it to every command, so one filter, built here, is the
 * policy of both mechanisms. */
char *exec_seccomp_hex(const exec_seccomp *s);

/* In the child, after PR_SET_NO_NEW_PRIVS: install the filter. Async-signal
 * safe: one syscall. Returns 0 or -errno. */
int exec_seccomp_install(const exec_seccomp *s);

#endif
