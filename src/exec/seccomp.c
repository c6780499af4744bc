/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's seccomp filter (docs/design-notes.md, "Seccomp is
 * mandatory"). Built with libseccomp in the service, exported as
 * classic BPF into memory, and installed by the child with one seccomp(2)
 * call, so the child neither allocates nor calls into libseccomp.
 *
 * The filter is a deny list over a default of ALLOW: the sandbox runs
 * arbitrary programs (python3, git, compilers) whose syscall set we do not
 * control, and the calls that matter are the ones that reach kernel attack
 * surface or change what the sandbox can see (namespaces, mounts, BPF,
 * io_uring, keys, modules, tracing), and the ones that let a sandbox hold
 * kernel memory no limit of its own covers, or take from a table the whole
 * host shares (netlink queues, kernel AIO contexts). The namespaces, the
 * dropped capabilities and the unprivileged uid do the rest.
 */
#include "exec/seccomp.h"

#include <errno.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/syscalls.h"
#include "util/util.h"

/* The kernel's numbers (linux/in.h, linux/in6.h, asm-generic/socket.h),
 * for C libraries whose headers predate them. */
#ifndef IP_RECVERR_RFC4884
#define IP_RECVERR_RFC4884 26
#endif
#ifndef IPV6_RECVERR_RFC4884
#define IPV6_RECVERR_RFC4884 31
#endif
#ifndef SO_TIMESTAMPING_OLD
#define SO_TIMESTAMPING_OLD 37
#endif
#ifndef SO_TIMESTAMPING_NEW
#define SO_TIMESTAMPING_NEW 65
#endif
#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef TCP_FASTOPEN_CONNECT
#define TCP_FASTOPEN_CONNECT 30
#endif

/* Syscalls the kernel here (6.18) has but libseccomp 2.5.4 cannot name.
 * Since Linux 5.1 new syscalls get one number on every architecture that
 * uses the generic table, and x86_64 follows it, so the number is the same
 * on x86_64 and aarch64. open_tree_attr (6.15) is open_tree with mount
 * attributes: part of the new mount API, denied with the rest of it. */
#define NATIVE_NR_OPEN_TREE_ATTR 467

/* The highest syscall number this filter was reviewed against. Every number
 * above it, up to NATIVE_NR_GUARD_MAX, returns ENOSYS: a syscall added by a
 * newer kernel is refused until someone reads what it does and moves this
 * line, and ENOSYS is what a program sees on an older kernel, so libc and
 * runtimes take their fallback paths. Sources for the numbers, since the
 * installed headers (linux-libc-dev) stop at 450 set_mempolicy_home_node
 * and libseccomp 2.5.4 here names up to 456 futex_requeue: the kernel's
 * arch/x86/entry/syscalls/syscall_64.tbl (v6.19), and probing this 6.18
 * kernel (every number 451..469 except 453 map_shadow_stack, a config
 * option, answers something other than ENOSYS; 470 answers ENOSYS).
 *   457 statmount, 458 listmount: the caller's own mount table, which
 *       /proc/self/mountinfo shows anyway; other namespaces need
 *       CAP_SYS_ADMIN over them. Allowed.
 *   459 lsm_get_self_attr, 460 lsm_set_self_attr, 461 lsm_list_modules:
 *       the caller's own LSM attributes, as /proc/self/attr. Allowed.
 *   462 mseal: seals the caller's own mappings. Allowed.
 *   463..466 setxattrat, getxattrat, listxattrat, removexattrat: the xattr
 *       calls relative to a directory descriptor. Allowed.
 *   467 open_tree_attr: denied (native_denied).
 *   468 file_getattr, 469 file_setattr (6.17): the FS_IOC_FSGETXATTR and
 *       FS_IOC_FSSETXATTR ioctls as calls, which ioctl allows. Allowed.
 *   470 listns (6.19, not on this 6.18 kernel): lists namespaces by id,
 *       not reviewed, so ENOSYS.
 * 335 uretprobe and 336 uprobe (x86_64 only, below this range; libseccomp
 * cannot name them either) act only when called from the kernel's uprobe
 * trampoline and fail otherwise; the kernel exempts them from seccomp. */
#define NATIVE_NR_REVIEWED_MAX 469
/* The last number the guard covers. x86_64 keeps 512..547 for x32 (reached
 * only with the x32 bit, whose calls are killed) and the kernel returns
 * ENOSYS for any number past its table, so this covers every number a new
 * syscall can take until the common table reaches 511; after that x86_64
 * continues at 548 and this bound must move. One rule per number: the
 * binary tree keeps the cost logarithmic. */
#define NATIVE_NR_GUARD_MAX 511

/* Denied outright with EPERM, or refused with the errno an entry names.
 * Each entry cites why. */
static const exec_seccomp_denial native_denied[] = {
	/* Namespaces: a new user namespace gives back every capability inside
	 * it and with it the mount API (docs/design-notes.md, "Seccomp is
	 * mandatory"). clone's flags are checked separately below; clone3's flags live in memory that BPF cannot read,
	 * so clone3 gets ENOSYS (below) and libc falls back to clone. */
	{ "unshare", 0, EPERM },
	{ "setns", 0, EPERM },
	/* Mounts, old and new API. */
	{ "mount", 0, EPERM },
	{ "umount2", 0, EPERM },
	{ "pivot_root", 0, EPERM },
	{ "chroot", 0, EPERM },
	{ "fsopen", 0, EPERM },
	{ "fsconfig", 0, EPERM },
	{ "fsmount", 0, EPERM },
	{ "fspick", 0, EPERM },
	{ "move_mount", 0, EPERM },
	{ "open_tree", 0, EPERM },
	{ "mount_setattr", 0, EPERM },
	{ NULL, NATIVE_NR_OPEN_TREE_ATTR, EPERM },
	/* io_uring runs operations from kernel workers that seccomp never
	 * sees, and has been a steady source of kernel bugs. */
	{ "io_uring_setup", 0, EPERM },
	{ "io_uring_enter", 0, EPERM },
	{ "io_uring_register", 0, EPERM },
	/* BPF programs, tracing and reading or writing other processes. */
	{ "bpf", 0, EPERM },
	{ "ptrace", 0, EPERM },
	{ "process_vm_readv", 0, EPERM },
	{ "process_vm_writev", 0, EPERM },
	{ "perf_event_open", 0, EPERM },
	/* The kernel keyring is not namespaced. */
	{ "keyctl", 0, EPERM },
	{ "add_key", 0, EPERM },
	{ "request_key", 0, EPERM },
	/* Replacing or extending the kernel. */
	{ "kexec_load", 0, EPERM },
	{ "kexec_file_load", 0, EPERM },
	{ "init_module", 0, EPERM },
	{ "finit_module", 0, EPERM },
	{ "delete_module", 0, EPERM },
	/* File handles bypass path lookup, and so the mount namespace. */
	{ "open_by_handle_at", 0, EPERM },
	{ "name_to_handle_at", 0, EPERM },
	/* userfaultfd stalls kernel threads at will: a classic race widener. */
	{ "userfaultfd", 0, EPERM },
#if defined(__x86_64__)
	/* x86 only: aarch64 has none of these. LDT segments: old attack
	 * surface, needed only by 16-bit code. */
	{ "modify_ldt", 0, EPERM },
	/* I/O port access: direct hardware. */
	{ "iopl", 0, EPERM },
	{ "ioperm", 0, EPERM },
#endif
	/* fanotify groups and marks are charged per user, across sandboxes. */
	{ "fanotify_init", 0, EPERM },
	/* sync flushes every filesystem on the host; syncfs and fsync stay. */
	{ "sync", 0, EPERM },
	/* Process accounting is host-wide. */
	{ "acct", 0, EPERM },
	/* Swap is host-wide. */
	{ "swapon", 0, EPERM },
	{ "swapoff", 0, EPERM },
	/* Rebooting the host, or (in a pid namespace) ending its init. */
	{ "reboot", 0, EPERM },
	/* The clocks are not namespaced (time namespaces only offset
	 * CLOCK_MONOTONIC and CLOCK_BOOTTIME for reading). */
	{ "settimeofday", 0, EPERM },
	{ "clock_settime", 0, EPERM },
	{ "clock_adjtime", 0, EPERM },
	{ "adjtimex", 0, EPERM },
	/* The kernel log buffer is host-wide and can leak kernel addresses. */
	{ "syslog", 0, EPERM },
	/* Disk quotas belong to the host's filesystems; quotactl_fd is the
	 * same call by descriptor. */
	{ "quotactl", 0, EPERM },
	{ "quotactl_fd", 0, EPERM },
	/* Hangs up the controlling terminal, which may be the host's. */
	{ "vhangup", 0, EPERM },
	/* Oprofile leftover (ENOSYS since 6.10) that resolved kernel paths. */
	{ "lookup_dcookie", 0, EPERM },
	/* Takes a copy of a descriptor out of another process. */
	{ "pidfd_getfd", 0, EPERM },
	/* Refused with ENOSYS, what a kernel built without them answers, so that
	 * programs take their fallback paths.
	 *
	 * Kernel AIO (io_setup and the calls on its contexts): every context
	 * reserves events from the host-wide fs.aio-max-nr (65536 by default),
	 * which no cgroup or namespace divides. One sandbox reserved all of them
	 * and the host's own io_setup then failed with EAGAIN. glibc's POSIX aio
	 * uses threads, not these calls; libaio users (databases) fall back to
	 * synchronous I/O on ENOSYS. io_uring, the other asynchronous I/O
	 * interface, is denied above. */
	{ "io_setup", 0, ENOSYS },
	{ "io_destroy", 0, ENOSYS },
	{ "io_submit", 0, ENOSYS },
	{ "io_cancel", 0, ENOSYS },
	{ "io_getevents", 0, ENOSYS },
	{ "io_pgetevents", 0, ENOSYS },
};


/* Address families socket and socketpair may use, in ascending order. Any
 * other family (AF_VSOCK reaches the hypervisor and other guests' sandboxes
 * whatever the network namespace; AF_PACKET, AF_BLUETOOTH, AF_ALG and the
 * rest are attack surface no build needs) gets EAFNOSUPPORT, what a kernel
 * without that family answers.
 *
 * AF_NETLINK is refused too, every protocol of it. The kernel does not
 * charge a netlink socket's receive queue to the memory cgroup, and a
 * sandbox fills it at will: with NETLINK_USERSOCK a sandbox under a 64 MiB
 * limit queued 900 MB between its own sockets; even NETLINK_ROUTE, which
 * only the kernel writes to, queues a full receive buffer (212 KiB here,
 * net.core.rmem_default) of replies to requests whose answers are never
 * read, for each socket: descriptors times processes, gigabytes for one
 * sandbox, none of it in its limit. NETLINK_KOBJECT_UEVENT also broadcast
 * the host's device events, other tenants' loop devices included, into
 * every network namespace. What a sandbox loses: rtnetlink, so getifaddrs
 * fails (with EAFNOSUPPORT) and `ip` does not work; the interfaces it would
 * list are lo only. glibc's getaddrinfo, which asks rtnetlink which
 * address families are configured (AI_ADDRCONFIG), treats a refused socket
 * as "both are" and resolves as before. */
static const int native_socket_families[] = { AF_UNIX, AF_INET, AF_INET6 };

/* Namespace flags of clone(2). CLONE_NEWTIME is left out on purpose: its
 * bit (0x80) lies in clone's CSIGNAL byte, where it is part of the exit
 * signal, and clone cannot create a time namespace (only unshare, which is
 * denied outright, and clone3, which returns ENOSYS). */
static const uint64_t native_clone_ns_flags[] = {
	CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
	CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
};

static int exec_seccomp_rule(scmp_filter_ctx ctx, uint32_t action, int nr, const char *what,
                               unsigned n_cmp, const struct scmp_arg_cmp *cmp, airlock_error *err)
{
	int r = seccomp_rule_add_array(ctx, action, nr, n_cmp, cmp);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "seccomp: rule for %s", what);
	return 0;
}

static int exec_seccomp_rules(scmp_filter_ctx ctx, airlock_error *err)
{
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(native_denied); i++) {
		int nr = native_denied[i].nr;
		if (native_denied[i].name) {
			nr = seccomp_syscall_resolve_name(native_denied[i].name);
			if (nr == __NR_SCMP_ERROR)
				return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
				                         "seccomp: libseccomp does not know %s",
				                         native_denied[i].name);
		}
		r = exec_seccomp_rule(ctx, SCMP_ACT_ERRNO((uint32_t)native_denied[i].errno_), nr,
		                        native_denied[i].name ? native_denied[i].name : "a new syscall",
		                        0, NULL, err);
		if (r < 0)
			return r;
	}

	/* socket and socketpair outside native_socket_families. Rules for the
	 * same syscall and action are ORed and each may test arg0 once, so the
	 * complement of the list is spelled out: one equality per value in the
	 * gaps below the highest allowed family, and "greater than" it. The
	 * compare is on all 64 bits: the kernel reads the domain as an int and
	 * ignores the upper half, but a domain with anything there is greater
	 * than every allowed family and is refused, so junk cannot turn a
	 * refused family into an allowed one. libc passes the int
	 * sign-extended, and no allowed family is negative. */
	static const char *const socket_calls[] = { "socket", "socketpair" };
	for (size_t k = 0; k < ARRAY_SIZE(socket_calls); k++) {
		int nr = seccomp_syscall_resolve_name(socket_calls[k]);
		if (nr == __NR_SCMP_ERROR)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
			                         "seccomp: libseccomp does not know %s",
			                         socket_calls[k]);
		uint64_t lowest = 0; /* the lowest value no rule has decided yet */
		for (size_t i = 0; i < ARRAY_SIZE(native_socket_families); i++) {
			uint64_t family = (uint64_t)native_socket_families[i];
			if (family < lowest)
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
				                         "seccomp: socket families out of order");
			for (uint64_t v = lowest; v < family; v++) {
				struct scmp_arg_cmp c = SCMP_A0_64(SCMP_CMP_EQ, v);
				r = exec_seccomp_rule(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), nr,
				                        socket_calls[k], 1, &c, err);
				if (r < 0)
					return r;
			}
			lowest = family + 1;
		}
		struct scmp_arg_cmp c = SCMP_A0_64(SCMP_CMP_GT, lowest - 1);
		r = exec_seccomp_rule(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), nr, socket_calls[k], 1,
		                        &c, err);
		if (r < 0)
			return r;
	}

	/* Syscalls newer than the review (NATIVE_NR_REVIEWED_MAX). libseccomp
	 * has no "number greater than" rule, so one rule per number; it takes
	 * raw numbers it cannot name for the native architecture, as for
	 * open_tree_attr above. */
	for (int nr = NATIVE_NR_REVIEWED_MAX + 1; nr <= NATIVE_NR_GUARD_MAX; nr++) {
		r = exec_seccomp_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, "an unreviewed syscall", 0,
		                        NULL, err);
		if (r < 0)
			return r;
	}

	/* clone with any namespace flag. One rule per flag: rules for the same
	 * syscall and action are ORed, and a masked compare of one bit is the
	 * "is this flag set" test. The kernel reads only the low 32 bits of
	 * clone's flags, and every mask lies there. */
	for (size_t i = 0; i < ARRAY_SIZE(native_clone_ns_flags); i++) {
		struct scmp_arg_cmp c = SCMP_A0_64(SCMP_CMP_MASKED_EQ, native_clone_ns_flags[i],
		                                   native_clone_ns_flags[i]);
		r = exec_seccomp_rule(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), "clone", 1, &c,
		                        err);
		if (r < 0)
			return r;
	}

	/* clone3 passes its flags in a struct the filter cannot read: say the
	 * call does not exist, and glibc (pthread_create, posix_spawn, fork)
	 * falls back to clone, whose flags the rules above inspect. */
	r = exec_seccomp_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), "clone3", 0, NULL,
	                        err);
	if (r < 0)
		return r;

	/* Terminal injection: TIOCSTI pushes bytes into a terminal's input
	 * queue and TIOCLINUX can paste the console selection, both of which
	 * would type commands into whatever reads the terminal outside. The
	 * kernel takes ioctl's request as an unsigned int, so only the low 32
	 * bits are compared: garbage in the upper half cannot slip past. */
	static const uint32_t tty_requests[] = { TIOCSTI, TIOCLINUX };
	for (size_t i = 0; i < ARRAY_SIZE(tty_requests); i++) {
		struct scmp_arg_cmp c = SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xffffffffu, tty_requests[i]);
		r = exec_seccomp_rule(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), "ioctl", 1, &c,
		                        err);
		if (r < 0)
			return r;
	}

	/* setsockopt(SOL_SOCKET, SO_RCVBUF) succeeds and does nothing. The
	 * size is the host's net.core.rmem_max (4 MiB here; read-only in a
	 * network namespace of ours) times two, and a listener's receive buffer
	 * is inherited by every connection waiting in its accept queue, which
	 * belongs to no memory cgroup until accepted: 400 such connections
	 * held 1.5 GiB of host TCP memory under a 128 MiB limit. Without it a
	 * socket's buffer is the namespace's tcp_rmem (or rmem_default), grown
	 * by autotuning as it is read, and charged to the cgroup once it is. A
	 * program cannot rely on the size it asked for anyway (the kernel
	 * clamps it silently), so success is what it already copes with; a
	 * refusal would fail programs that set it. Both arguments are ints: the
	 * low 32 bits are compared. */
	/* setsockopt(SOL_SOCKET, SO_RCVLOWAT) likewise: on TCP it raises the
	 * receive buffer to fit the mark, up to the namespace's tcp_rmem
	 * maximum (32 MiB here), and so reaches the same unaccepted
	 * connections: 20 of them held 210 MB under a 64 MiB limit. A low
	 * mark of 1 (the default) is what a program that asked for more
	 * already copes with: each read returns what there is. */
	/* The error queue (MSG_ERRQUEUE) holds what the kernel reports back
	 * about a socket's own packets, charged to the socket's receive
	 * buffer count but to no memory cgroup (sock_queue_err_skb), so each
	 * socket can pin up to its receive buffer there: a 64 MiB sandbox's
	 * UDP sockets held 387 MB of host memory in transmit timestamps (each
	 * a clone sharing the packet's pages), 12 TCP sockets 465 MB (their
	 * buffers grown by autotuning). What fills it, each closed here:
	 *   IP_RECVERR, IPV6_RECVERR (and their RFC 4884 forms): an ICMP
	 *     error per datagram to a closed port. They succeed and do
	 *     nothing, like SO_RCVBUF: a connected socket still gets
	 *     ECONNREFUSED from the next call, and a program that reads its
	 *     error queue finds it empty.
	 *   SO_TIMESTAMPING (both numbers): a clone of every packet sent.
	 *     Refused with ENOPROTOOPT, as where the kernel lacks it, so a
	 *     program that wants timestamps knows it has none. The same
	 *     request made per call in a control message (SCM_TIMESTAMPING,
	 *     which a filter cannot read) queues nothing either: the
	 *     sandbox's network namespace has net.core.tstamp_allow_data 0
	 *     (host/netns.c), under which only CAP_NET_RAW of the host may
	 *     have packets back, and the timestamp-only option that would
	 *     still queue small ones is this setsockopt's.
	 *   SO_ZEROCOPY: a completion notice per MSG_ZEROCOPY send, and the
	 *     sender's pages pinned until then. Refused with ENOPROTOOPT;
	 *     without it MSG_ZEROCOPY is ignored and the send copies.
	 * And TCP_FASTOPEN_CONNECT, refused with ENOPROTOOPT (as a kernel
	 * without it): its connect() returns at once and sends nothing, so
	 * the socket-budget program that follows a connection's life
	 * (host/sockbudget.c) never hears of it, and one closed unused would
	 * keep its place until the sandbox ends. A program falls back to a
	 * plain connect; Fast Open by sendto(MSG_FASTOPEN) still works. */
	static const struct {
		int level, opt, errnum;
	} sockopts[] = {
		{ SOL_SOCKET, SO_RCVBUF, 0 },
		{ SOL_SOCKET, SO_RCVLOWAT, 0 },
		{ SOL_IP, IP_RECVERR, 0 },
		{ SOL_IP, IP_RECVERR_RFC4884, 0 },
		{ SOL_IPV6, IPV6_RECVERR, 0 },
		{ SOL_IPV6, IPV6_RECVERR_RFC4884, 0 },
		{ SOL_SOCKET, SO_TIMESTAMPING_OLD, ENOPROTOOPT },
		{ SOL_SOCKET, SO_TIMESTAMPING_NEW, ENOPROTOOPT },
		{ SOL_SOCKET, SO_ZEROCOPY, ENOPROTOOPT },
		{ IPPROTO_TCP, TCP_FASTOPEN_CONNECT, ENOPROTOOPT },
	};
	for (size_t i = 0; i < ARRAY_SIZE(sockopts); i++) {
		struct scmp_arg_cmp c[2] = {
			SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint64_t)sockopts[i].level),
			SCMP_A2_64(SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint64_t)sockopts[i].opt),
		};
		r = exec_seccomp_rule(ctx, SCMP_ACT_ERRNO(sockopts[i].errnum), SCMP_SYS(setsockopt),
		                      "setsockopt", 2, c, err);
		if (r < 0)
			return r;
	}

	/* personality: only PER_LINUX (0) and the 0xffffffff query. Other
	 * values switch off ASLR (ADDR_NO_RANDOMIZE), make reads executable or
	 * change the syscall ABI seen by later execs. The kernel reads an
	 * unsigned int, so the test is on the low 32 bits: deny when they hold
	 * both a 1 and a 0. libseccomp compares an argument at most once per
	 * rule, so "some 1 and some 0" is written as "some bit i is 1 while bit
	 * i+1 (mod 32) is 0": a 32-bit ring holding both values has such a
	 * 1-then-0 step somewhere, and 0 and 0xffffffff have none. */
	for (unsigned i = 0; i < 32; i++) {
		uint64_t one = 1ull << i;
		uint64_t next = 1ull << ((i + 1) % 32);
		struct scmp_arg_cmp c = SCMP_A0_64(SCMP_CMP_MASKED_EQ, one | next, one);
		r = exec_seccomp_rule(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality),
		                        "personality", 1, &c, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static void exec_seccomp_releasep(scmp_filter_ctx *ctx)
{
	if (*ctx)
		seccomp_release(*ctx);
}

int exec_seccomp_build(exec_seccomp *ret, airlock_error *err)
{
	__attribute__((cleanup(exec_seccomp_releasep))) scmp_filter_ctx ctx = NULL;
	_cleanup_close_ int mfd = -1;
	_cleanup_free_ struct sock_filter *prog = NULL;
	int r;

	/* seccomp_init adds only the native architecture (x86_64 or aarch64).
	 * Any other audit arch (i386 through int 0x80, arm32 compat) hits the
	 * bad-arch action and the whole process dies: a foreign ABI has its
	 * own syscall numbers, and none of the rules above would apply to it.
	 * On x86_64 libseccomp also sends x32 numbers (bit 30 set) to the
	 * bad-arch action when x32 is not in the filter; the tests check it. */
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "seccomp: init");
	r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "seccomp: bad-arch action");
	/* A binary tree over the syscall number instead of a linear list: the
	 * filter runs on every system call of every sandboxed process, and a
	 * shorter path is also cheaper for the kernel to prepare at install. */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "seccomp: optimize");
	r = exec_seccomp_rules(ctx, err);
	if (r < 0)
		return r;

	/* libseccomp 2.5 exports only to a descriptor; a memfd keeps the
	 * program off any filesystem. */
	mfd = memfd_create("airlock-seccomp", MFD_CLOEXEC);
	if (mfd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "seccomp: memfd_create");
	r = seccomp_export_bpf(ctx, mfd);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "seccomp: export");
	struct stat st;
	if (fstat(mfd, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "seccomp: fstat");
	size_t size = (size_t)st.st_size;
	size_t n = size / sizeof(struct sock_filter);
	/* The kernel caps a program at BPF_MAXINSNS; the prog length is an
	 * unsigned short. A remainder would mean a torn export. */
	if (n == 0 || n > BPF_MAXINSNS || size % sizeof(struct sock_filter) != 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EINVAL,
		                         "seccomp: exported program has %zu bytes", size);
	prog = malloc(size);
	if (!prog)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "seccomp: program");
	size_t off = 0;
	while (off < size) {
		ssize_t k = pread(mfd, (char *)prog + off, size - off, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "seccomp: read back");
		if (k == 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, EIO, "seccomp: short read");
		off += (size_t)k;
	}

	ret->filter = TAKE_PTR(prog);
	ret->len = (unsigned short)n;
	return 0;
}

size_t exec_seccomp_denials(const exec_seccomp_denial **ret)
{
	*ret = native_denied;
	return ARRAY_SIZE(native_denied);
}

char *exec_seccomp_hex(const exec_seccomp *s)
{
	if (!s || !s->filter || s->len == 0)
		return NULL;
	size_t bytes = (size_t)s->len * sizeof(struct sock_filter);
	char *hex = malloc(2 * bytes + 1);
	if (hex)
		util_hex(s->filter, bytes, hex);
	return hex;
}

void exec_seccomp_clear(exec_seccomp *s)
{
	if (!s)
		return;
	free(s->filter);
	s->filter = NULL;
	s->len = 0;
}

int exec_seccomp_install(const exec_seccomp *s)
{
	if (!s || !s->filter || s->len == 0)
		return -EINVAL;
	/* The caller must already have set no_new_privs. As root with
	 * CAP_SYS_ADMIN the kernel would accept the filter without it, and an
	 * exec of a setuid binary could then gain privilege the filter was
	 * built assuming away; refuse rather than rely on the caller's order. */
	int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	if (nnp < 0)
		return -errno;
	if (nnp != 1)
		return -EACCES;
	struct sock_fprog prog = {
		.len = s->len,
		.filter = s->filter,
	};
	/* No TSYNC: the children that install this are single-threaded copies
	 * made by fork. The filter is inherited by everything they start. */
	if (sys_seccomp(SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return -errno;
	return 0;
}
