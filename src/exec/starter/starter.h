/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EXEC_STARTER_H
#define AIRLOCK_EXEC_STARTER_H

/*
 * The command's starter (starter.c): a tiny static program, embedded in the
 * service and held in a sealed memfd, that the service's forked child
 * executes as its last step before the command. Its only job is to execute
 * the command; what it exists for is what the child's /proc/self/exe then
 * names. Without it the child is a copy of the service until the command's
 * execve, so a command whose path (or script interpreter, or ELF loader) is
 * /proc/self/exe would execute the host's airlock binary inside the sandbox
 * (runc's CVE-2019-5736 has the same shape). With it, /proc/self/exe is the
 * starter itself: not a host file, unwritable (sealed, mode 0555, owned by
 * host root), and when anything but the service starts it, it refuses.
 *
 * The protocol: argv = { NATIVE_STARTER_ARGV0, command argv... }, envp the
 * command's environment, fd 3 the exec-error pipe (not close-on-exec; the
 * starter marks it). The starter finds argv[1] on the image's fixed PATH and
 * executes it; if that fails it writes (NATIVE_STEP_EXEC, errno) to fd 3 and
 * exits 127. Run with any other argv[0] it prints NATIVE_STARTER_REFUSAL to
 * stderr and exits 127. Nothing it does needs a privilege: run by a tenant
 * with the right argv[0] (a symlink can give one), it executes what the
 * tenant could have executed itself.
 *
 * The same program has two more modes, for the processes that live beside a
 * sandbox for its whole life and so must not be a copy of the service (whose
 * memory holds its credential and TLS keys: nothing of the service's
 * secrets reaches what a sandbox can touch):
 *
 * init (native): argv = { NATIVE_INIT_ARGV0 }, an empty envp, fd 3 the
 * lifeline's read end, fd 4 the sync socket, nothing else open. Executed by
 * the sandbox's init (child.c) once it has built the sandbox and become the
 * sandbox user under the filter, so what stays as the pid namespace's pid 1
 * is this program. It blocks SIGCHLD into a signalfd, sends NATIVE_MSG_READY
 * on fd 4 and closes it (on a failure first: NATIVE_MSG_FAILED with
 * NATIVE_STEP_INIT and the errno, exit 126), then reaps every child that
 * comes to it until fd 3 hangs up (the service is gone), and exits 0.
 *
 * keeper (gvisor): argv = { NATIVE_KEEPER_ARGV0, runtime argv... }, envp the
 * runtime's, fd 0-2 the runtime's stdio, fd 3 /dev/null. Becomes a child
 * subreaper, starts the runtime as its child, puts /dev/null on its own 0-2,
 * reaps everything that comes to it, and exits with the runtime's status
 * (its exit code, or 128 + the signal) once nothing is left; 126 when it
 * cannot start.
 */

#include "airlock/error.h"

#define NATIVE_STARTER_ARGV0 "airlock-starter"
#define NATIVE_INIT_ARGV0 "airlock-init"
#define NATIVE_KEEPER_ARGV0 "airlock-keeper"
#define NATIVE_STARTER_REFUSAL                                                                     \
	"airlock-starter: refused: this is the sandbox's command starter, reached through "        \
	"/proc/self/exe or a link to it; it starts commands only for the service\n"

/* A sealed, read-only, executable memfd holding the program
 * (F_SEAL_SEAL|F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_WRITE, and F_SEAL_EXEC where
 * the kernel has it; mode 0555). O_CLOEXEC. Returns 0 or -errno. */
int exec_starter_open(int *ret_fd, airlock_error *err);

#endif
