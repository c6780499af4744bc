/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_GUEST_H
#define AIRLOCK_GUEST_H

/*
 * What airlock puts inside an image for mechanisms whose commands run under
 * a kernel of their own (gvisor now, microvm later): the contract between
 * the image builder, which writes these files into every image it builds,
 * and the adapters, which run them. Nothing here holds a secret or a host
 * path: these files are in what the sandbox runs, readable by the tenant.
 *
 * AIRLOCK_GUEST_PROGRAM (src/guest/guest.c, a static executable):
 *   guest init            pid 1 of the sandbox: writes AIRLOCK_GUEST_READY
 *                         to its stdout once (the service's sign that the
 *                         sandbox runs), then reaps every process that is
 *                         reparented to it, forever; never exits by itself.
 *   guest exec --seccomp HEX -- ARGV
 *                         one command, run as the sandbox user (it refuses
 *                         root and CAP_KILL: its last act kills every
 *                         process it may signal): becomes non-dumpable (the
 *                         command, same uid, can neither trace it nor read
 *                         its memory) and a child subreaper where the kernel has one
 *                         (gVisor 20221219 answers EINVAL: there pid 1 reaps
 *                         the orphans), starts ARGV (argv[0] resolved
 *                         against AIRLOCK_SANDBOX_PATH only, like the native
 *                         starter) under the seccomp program HEX (the
 *                         sandbox's filter, exec/native/seccomp.h: the
 *                         service's classic BPF program, struct sock_filter
 *                         in the host's byte order, as lowercase hex),
 *                         installed after no_new_privs as the child's last
 *                         act before the exec; a HEX that is not whole
 *                         instructions (1 to AIRLOCK_GUEST_SECCOMP_MAX_INSNS)
 *                         is refused (127 and a message), and a filter the
 *                         kernel refuses ends the command with 127 and a
 *                         message: no command starts unconfined. It waits
 *                         for the command, then kills (SIGKILL) every
 *                         process of its uid but itself until a pass finds
 *                         none (bounded; the kernel's permission check, as
 *                         the uid, picks them: never /proc's text, where
 *                         gVisor prints a process's chosen name unescaped)
 *                         before it exits with
 *                         the command's status: the exit code, or 128 + the
 *                         signal. When ARGV cannot be executed it writes
 *                         "airlock: cannot execute NAME: REASON" to stderr
 *                         (NAME with bytes outside printable ASCII as \xNN,
 *                         cut at 200 bytes; native quotes it instead) and
 *                         exits 127, like the native mechanism.
 *   guest kill UID        kills (SIGKILL) every process whose real or saved
 *                         uid is UID (not 0), except pid 1, until none is
 *                         left: exit 0, or 1 when some survived its bound.
 *                         Run as root with CAP_SETUID by the service to end
 *                         a command: it forks killers that become UID with
 *                         no capability, and forks another when the command
 *                         kills one.
 * AIRLOCK_GUEST_STATX_SHIM: a preloaded shared object (listed in
 *   AIRLOCK_GUEST_PRELOAD) that clears AT_NO_AUTOMOUNT in the flags of
 *   statx and fstatat before calling the kernel: gVisor 20221219 rejects
 *   the flag with EINVAL, which breaks GNU ls -l, stat and find. On Linux
 *   the flag changes nothing inside a sandbox (no automount points), so the
 *   shim is harmless under native. Static binaries do not load it.
 */

#define AIRLOCK_GUEST_DIR "/usr/lib/airlock"
#define AIRLOCK_GUEST_PROGRAM AIRLOCK_GUEST_DIR "/guest"
#define AIRLOCK_GUEST_STATX_SHIM AIRLOCK_GUEST_DIR "/statx-shim.so"
#define AIRLOCK_GUEST_PRELOAD "/etc/ld.so.preload"

/* What guest init writes to its stdout once it runs. */
#define AIRLOCK_GUEST_READY "airlock-guest: ready\n"

/* guest exec's option naming the seccomp program, and the most
 * instructions it takes (the kernel's BPF_MAXINSNS). */
#define AIRLOCK_GUEST_SECCOMP_OPTION "--seccomp"
#define AIRLOCK_GUEST_SECCOMP_MAX_INSNS 4096

/* The exit status guest exec uses when ARGV cannot be executed. */
#define AIRLOCK_GUEST_EXEC_FAILED 127

#endif
