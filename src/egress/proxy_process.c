/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proxy process itself: what it keeps of what it inherited, its
 * descriptor budget, its privileges and the seccomp filter, its loop's
 * start and stop, and proxy_exec_main, its program's entry.
 *
 * The process holds no privileges: started by root it becomes
 * AIRLOCK_PROXY_UID with no capabilities, no_new_privs, not dumpable, and
 * keeps only its control socket and the log. It never creates a socket in
 * a sandbox's namespace; it accepts on what the service hands it.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/proxy_internal.h"
#include "egress/proxy_loop.h"
#include "util/syscalls.h"
#include "util/util.h"

extern char **environ;

/* No privileges: a process that parses sandbox bytes holds nothing a bug
 * in it could hand over. */
static const char *drop_privileges(const airlock_proxy_config *cfg)
{
	if (prctl(PR_SET_DUMPABLE, 0) < 0)
		return "PR_SET_DUMPABLE";
	if (geteuid() == 0) {
		for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
			if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
				return "PR_CAPBSET_DROP";
		if (setgroups(0, NULL) < 0)
			return "setgroups";
		if (setresgid(cfg->gid, cfg->gid, cfg->gid) < 0)
			return "setresgid";
		/* From root to a non-zero uid with no keep-caps bit: the kernel
		 * clears the permitted and effective sets. */
		if (setresuid(cfg->uid, cfg->uid, cfg->uid) < 0)
			return "setresuid";
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return "PR_CAP_AMBIENT";
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { 0 };
	if (sys_capset(&h, d) < 0)
		return "capset";
	if (sys_capget(&h, d) < 0 || d[0].permitted || d[1].permitted || d[0].effective ||
	    d[1].effective)
		return "capabilities remain";
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return "PR_SET_NO_NEW_PRIVS";
	if (geteuid() == 0 || getegid() == 0)
		return "still root";
	return NULL;
}

/* What this process never does, refused by the kernel so that a bug in the
 * request parser cannot become any of it: start programs, look into or
 * write other processes, change namespaces or mounts, load kernel code,
 * or open sockets of families other than IP and unix. It cannot take away
 * what matters most (the proxy dials from the host's network, which is why
 * it holds no privilege and parses with a strict, fuzzed parser), but it
 * keeps a compromised proxy from becoming a compromised host. */
static const char *const denied_syscalls[] = {
	"execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "mount",
	"umount2", "pivot_root", "chroot", "setns", "unshare", "fsopen", "fsmount", "fsconfig",
	"move_mount", "open_tree", "mount_setattr", "bpf", "perf_event_open", "io_uring_setup",
	"io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"userfaultfd", "personality", "acct", "swapon", "swapoff", "reboot", "syslog",
	"iopl", "ioperm", "quotactl", "pidfd_getfd", "open_by_handle_at", "name_to_handle_at",
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
	"capset",
};

static const char *install_filter(void)
{
	scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
	if (!f)
		return "seccomp_init";
	int r = 0;
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(denied_syscalls); i++) {
		int nr = seccomp_syscall_resolve_name(denied_syscalls[i]);
		if (nr != __NR_SCMP_ERROR)
			r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), nr, 0);
	}
	/* Socket families: unix (the control channel), inet and inet6 (the
	 * dial and the resolver). Everything else, netlink and packet sockets
	 * above all, is refused. */
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
		                     SCMP_A0(SCMP_CMP_GT, AF_INET6));
	for (int fam = 0; r == 0 && fam < AF_INET6; fam++)
		if (fam != AF_UNIX && fam != AF_INET)
			r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
			                     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam));
	/* New namespaces (a user namespace needs no privilege): clone's flags
	 * are checked; clone3 hides them in memory a filter cannot read, so it
	 * answers ENOSYS and the C library falls back to clone. */
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	static const unsigned long ns_flags[] = { CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC,
		                                  CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
		                                  CLONE_NEWCGROUP };
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(ns_flags); i++)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
		                     SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
	/* No typing into a terminal, should one ever be reachable. */
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
		                     SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)TIOCSTI));
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
		                     SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)TIOCLINUX));
	/* A foreign architecture's syscall numbers mean something else. */
	if (r == 0)
		r = seccomp_attr_set(f, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r == 0)
		r = seccomp_load(f);
	seccomp_release(f);
	return r == 0 ? NULL : "seccomp";
}

_Noreturn static void proxy_process_main(int ctl, const airlock_proxy_config *cfg_in)
{
	proxy px = { .cfg = *cfg_in, .ctl = -1, .log_fd = -1 };
	const char *why = NULL;

	/* Keep the control socket and the log; close everything else this
	 * process inherited from the service (sandbox descriptors above all). */
	int c2 = fcntl(ctl, F_DUPFD_CLOEXEC, 100);
	int l2 = fcntl(cfg_in->log_fd, F_DUPFD_CLOEXEC, 100);
	if (c2 < 0 || l2 < 0)
		_exit(70);
	if (dup3(c2, 3, O_CLOEXEC) < 0 || dup3(l2, 4, O_CLOEXEC) < 0)
		_exit(70);
	if (sys_close_range(5U, ~0U, 0) < 0)
		_exit(70);
	/* Nothing of the operator's terminal: a session of its own (no
	 * controlling tty, no Ctrl-C from the service's terminal) and
	 * /dev/null on 0-2, so a compromised proxy has no tty to type into. */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || setsid() < 0)
		_exit(70);
	for (int fd = 0; fd <= 2; fd++)
		if (dup2(null, fd) < 0)
			_exit(70);
	if (null > 2)
		close(null);
	/* And none of the service's environment: the service executes this
	 * program with an empty one; should any be there all the same, the
	 * strings are wiped (clearenv alone only drops the pointers). */
	for (char **e = environ; e && *e; e++)
		explicit_bzero(*e, strlen(*e));
	clearenv();
	px.ctl = 3;
	px.log_fd = 4;
	px.cfg.log_fd = 4;

	/* A fresh signal state: the service may block or handle signals this
	 * process must not inherit (`airlock proxy` blocks SIGINT and SIGTERM
	 * before the fork, to take them synchronously, so they arrive blocked
	 * here). SIGPIPE is answered by EPIPE, so it alone is ignored again
	 * afterwards: what differs from a child about to exec a program, this
	 * process goes on running our code and writes to sockets.
	 * util_signals_reset puts the dispositions back before it empties the
	 * mask (the copy here did the two the other way round), so a signal the
	 * service had blocked reaches the default action, never a handler of
	 * the service's that the fork copied. */
	util_signals_reset();
	signal(SIGPIPE, SIG_IGN);

	/* Six descriptors per tunnel (two sockets, two pipes): take the hard
	 * limit while we may. */
	static char budget_why[256];
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
		/* A connection past what the descriptors allow would fail
		 * halfway (no pipe for its relay): refuse it at accept instead,
		 * with PROXY_FULL. 64 are kept for the loop, the resolver and
		 * the dials in flight. */
		rlim_t fit = rl.rlim_cur > 64 + 6 ? (rl.rlim_cur - 64) / 6 : 0;
		if (fit < px.cfg.max_connections) {
			/* Fewer connections in all: each sandbox's share shrinks by
			 * the same factor, so as many sandboxes fit at their cap as
			 * configured, and one sandbox never holds what all of them
			 * may (ulimit -n 1024 left 160 in all, and one sandbox's
			 * 256 would have been all of it). */
			unsigned per = (unsigned)((uint64_t)px.cfg.max_connections_per_listener * fit /
			                          px.cfg.max_connections);
			px.cfg.max_connections = (unsigned)fit;
			px.cfg.max_connections_per_listener = per;
		}
		if (px.cfg.max_connections_per_listener < 1 ||
		    px.cfg.max_connections_per_listener >= px.cfg.max_connections) {
			snprintf(budget_why, sizeof(budget_why),
			         "RLIMIT_NOFILE %llu leaves room for %u connections, too few to give each "
			         "sandbox a share below all of them (%u): raise the descriptor limit "
			         "(ulimit -n) to at least %llu",
			         (unsigned long long)rl.rlim_cur, px.cfg.max_connections,
			         px.cfg.max_connections_per_listener,
			         (unsigned long long)(64 + 6 * (((uint64_t)cfg_in->max_connections +
			                                         cfg_in->max_connections_per_listener - 1) /
			                                        cfg_in->max_connections_per_listener)));
			why = budget_why;
		}
	}

	if (!why)
		why = drop_privileges(&px.cfg);
	/* The rtnetlink socket of the own-address cache, before the filter
	 * that refuses netlink sockets (without it, nothing is cached). */
	if (!why)
		proxy_own_open(&px.own);
	if (!why)
		why = install_filter();
	if (!why && !(px.base = event_base_new()))
		why = "event_base_new";
	if (!why) {
		px.ctl_ev = event_new(px.base, px.ctl, EV_READ | EV_PERSIST, proxy_ctl_cb, &px);
		if (!px.ctl_ev || event_add(px.ctl_ev, NULL) < 0)
			why = "event_new";
	}
	if (!why && px.own.nl >= 0) {
		px.own.ev = event_new(px.base, px.own.nl, EV_READ | EV_PERSIST, proxy_own_cb, &px.own);
		if (!px.own.ev || event_add(px.own.ev, NULL) < 0)
			why = "event_new";
	}
	px.log.fd = px.log_fd;
	px.log.max = px.cfg.log_queue_max > 16 ? px.cfg.log_queue_max : 16;
	pthread_mutex_init(&px.log.lock, NULL);
	pthread_cond_init(&px.log.more, NULL);
	if (!why && pthread_create(&px.log.writer, NULL, proxy_log_writer, &px.log) != 0)
		why = "the log writer thread";
	px.log.started = !why;
	if (proxy_reply(&px, why ? why : NULL) < 0 || why)
		_exit(70);

	event_base_dispatch(px.base);

	/* Stopping: every tunnel ends and is logged, every check in flight
	 * with it (its lookup and dial end with the connection). */
	px.stopping = true;
	while (px.listeners)
		proxy_listener_detach(px.listeners);
	proxy_lookup_cancel(px.spare);
	px.spare = NULL;
	proxy_own_close(&px.own);
	/* Every line queued reaches the log before the process ends. */
	pthread_mutex_lock(&px.log.lock);
	px.log.closing = true;
	pthread_cond_signal(&px.log.more);
	pthread_mutex_unlock(&px.log.lock);
	pthread_join(px.log.writer, NULL);
	_exit(0);
}

_Noreturn void proxy_exec_main(void)
{
	/* The configuration is the channel's first frame: nothing of it is
	 * inherited (this is its own program, started by exec), so nothing the
	 * service holds reaches this process unless it is written here. A
	 * configuration that does not decode is answered like any failure to
	 * start, in place of the hello, and the process ends. */
	char *text = NULL;
	size_t len = 0;
	int r = proxy_frame_recv(PROXY_EXEC_CTL_FD, PROXY_CONFIG_TIMEOUT_MS, &text, &len, NULL);
	if (r < 0)
		_exit(70);
	airlock_proxy_config cfg;
	json_t *keep = NULL;
	const char *why = proxy_config_decode(text, len, &cfg, &keep);
	free(text);
	if (why) {
		proxy_reply_on(PROXY_EXEC_CTL_FD, why);
		_exit(70);
	}
	cfg.log_fd = PROXY_EXEC_LOG_FD;
	/* keep holds cfg.dns_servers for the process's life. */
	proxy_process_main(PROXY_EXEC_CTL_FD, &cfg);
}
