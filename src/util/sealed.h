/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_UTIL_SEALED_H
#define AIRLOCK_UTIL_SEALED_H

/*
 * An executable embedded in the library, held in a sealed memfd so that it
 * can be executed (execveat(fd, "", ..., AT_EMPTY_PATH)) without trusting
 * any installed file: the sandbox's small programs (exec/starter/starter.h)
 * and the egress proxy (egress/proxy_internal.h). The memfd is written
 * once, made read-only and executable for everyone (a sandbox's uid may
 * execute it; host root owns it) and sealed (F_SEAL_SEAL, SHRINK, GROW,
 * WRITE, and EXEC where the kernel has it; mode 0555), so no one, root
 * included, can change its bytes or its size while it may be executed.
 */

#include <stddef.h>

/* The sealed memfd of len bytes (O_CLOEXEC), or -errno: -EACCES or -EPERM
 * when vm.memfd_noexec forbids an executable memfd. */
int util_sealed_exec_memfd(const char *name, const unsigned char *bytes, size_t len);

#endif
