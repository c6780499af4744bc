/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The program airlock puts in every image for the mechanisms whose commands
 * run under a kernel of their own (include/airlock/guest.h has the
 * contract): `guest init`, `guest exec -- ARGV...`, `guest kill UID`.
 *
 * Built by the custom target in meson.build as a static executable against
 * glibc's libc.a, with none of the project's flags: it runs inside the
 * sandbox, where the image's libraries are whatever the image holds and
 * nothing of the build host's (a sanitizer runtime, libairlock) exists.
 * Static also means the image's /etc/ld.so.preload (the statx shim) never
 * loads into it, and LD_PRELOAD or LD_LIBRARY_PATH from the command's
 * environment cannot put code into the wrapper. It allocates nothing and
 * keeps no state beyond the stack.
 *
 * Why the command cannot tamper with `guest exec`, though both run as the
 * same uid: the wrapper makes itself non-dumpable before it forks, which
 * keeps a process of the same uid from ptrace-attaching to it and from
 * opening its /proc/PID/mem (both need PTRACE_MODE_ATTACH, which a
 * non-dumpable target refuses to anyone without CAP_SYS_PTRACE, and the
 * command has no capabilities). What it can still do is send the wrapper a
 * signal: every signal it may catch is ignored here, and SIGKILL or SIGSTOP
 * cannot be. A SIGKILL shows to the service as the wrapper's signal status,
 * never as an exit code the command chose, and the service answers it by
 * running `guest kill UID` with CAP_KILL, which ends whatever the wrapper
 * did not get to kill.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "airlock/tiers.h"
#include "airlock/guest.h"

/* How long `guest exec` keeps killing and reaping the command's processes
 * after the command itself ended. The loop stops as soon as no child is
 * left; the bound is for a process that somehow does not die (a kernel that
 * is itself stuck): the wrapper's status is the command's either way, and
 * the service's `guest kill` is the backstop. */
#define GUEST_REAP_MS 5000
/* Between two rounds of kill(-1) when children remain that have not died
 * yet: short, because SIGKILL takes effect at once and the command's result
 * waits for this. */
#define GUEST_REAP_PAUSE_NS 1000000L
/* `guest kill`: passes over /proc and the pause between them. A process
 * that forks as fast as it can is outrun by a pass that kills every process
 * of the uid it sees, so a few passes end any tree; five seconds of trying
 * before the service is told some survived. Then the zombies, for at most
 * two seconds: see kill_as. Both within the service's 10 s bound on the
 * call (GV_RUNSC_CALL_MS). */
#define GUEST_KILL_MS 5000
#define GUEST_KILL_ZOMBIE_MS 2000
#define GUEST_KILL_PAUSE_NS 5000000L
/* argv[0] in the exec failure message: at most this many bytes of it. */
#define GUEST_NAME_SHOWN_MAX 200
/* A command name resolved against AIRLOCK_SANDBOX_PATH: longer names
 * cannot be executed (ENAMETOOLONG from the kernel past PATH_MAX anyway). */
#define GUEST_EXEC_PATH_MAX 4096
/* A number macro's value as a string literal. */
#define GUEST_STR_(x) #x
#define GUEST_STR(x) GUEST_STR_(x)

static const char usage_text[] =
        "usage: guest init | guest exec " AIRLOCK_GUEST_SECCOMP_OPTION
        " HEX -- PROGRAM [ARG...] | guest kill UID\n";

/* ---- output without stdio --------------------------------------------------- */

/* A line being composed on the stack; a line that does not fit is cut, never
 * overrun. */
typedef struct line {
	char buf[GUEST_NAME_SHOWN_MAX * 4 + 256];
	size_t len;
} line;

static void line_add(line *l, const char *s, size_t n)
{
	for (size_t i = 0; i < n && l->len < sizeof(l->buf); i++)
		l->buf[l->len++] = s[i];
}

static void line_str(line *l, const char *s)
{
	line_add(l, s, strlen(s));
}

static void line_uint(line *l, unsigned long long v)
{
	char d[24];
	size_t n = 0;
	do {
		d[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		line_add(l, &d[--n], 1);
}

/* The bytes of an untrusted name: printable ASCII but the backslash as it
 * is, every other byte as \xNN (lowercase hex), so a name cannot put a
 * terminal escape or a line break of its own into the service's output. A
 * name longer than GUEST_NAME_SHOWN_MAX is cut there and its length shown,
 * so the message stays one short line whatever the tenant passed. */
static void line_name(line *l, const char *name)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = strlen(name);
	size_t shown = n > GUEST_NAME_SHOWN_MAX ? GUEST_NAME_SHOWN_MAX : n;
	for (size_t i = 0; i < shown; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c >= 0x20 && c <= 0x7e && c != '\\') {
			line_add(l, (const char *)&c, 1);
		} else {
			char e[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };
			line_add(l, e, sizeof(e));
		}
	}
	if (n > shown) {
		line_str(l, "...(");
		line_uint(l, n);
		line_str(l, " bytes)");
	}
}

/* Write the line to stderr; a failed or short write is not retried beyond
 * EINTR: there is nobody else to tell. */
static void line_emit(const line *l)
{
	size_t off = 0;
	while (off < l->len) {
		ssize_t w = write(STDERR_FILENO, l->buf + off, l->len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		off += (size_t)w;
	}
}

static void say(const char *what, int e)
{
	line l = { .len = 0 };
	line_str(&l, "airlock: guest: ");
	line_str(&l, what);
	if (e) {
		line_str(&l, ": ");
		line_str(&l, strerror(e));
	}
	line_str(&l, "\n");
	line_emit(&l);
}

/* ---- shared pieces ------------------------------------------------------------ */

/* Ignore the signals a terminal, a shell or a same-uid process would send
 * to end or interrupt us: the wrapper's life and its status belong to the
 * command's, and init's to the sandbox's. SIGKILL and SIGSTOP cannot be
 * ignored, which is why `guest kill` and the service's view of a signal
 * status exist. */
static int ignore_signals(void)
{
	static const int sigs[] = { SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGPIPE };
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigaction(sigs[i], &sa, NULL) < 0)
			return -errno;
	return 0;
}

static void pause_ns(long ns)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = ns };
	/* An interrupted pause is only a shorter one. */
	nanosleep(&ts, NULL);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- guest init ----------------------------------------------------------------- */

/* pid 1 of the sandbox. Every process whose parent dies is reparented to
 * it (unless a subreaper such as `guest exec` is nearer), and one that is
 * never waited for stays a zombie that counts against the sandbox's process
 * limit: so it reaps, and does nothing else. SIGCHLD stays blocked and is
 * taken with sigwaitinfo, so there is no handler and no race: a child that
 * exits between the last waitpid and the wait leaves SIGCHLD pending, and
 * the wait returns at once. It never exits: pid 1's exit ends the sandbox,
 * which is the runtime's to decide. */
static _Noreturn void guest_init(void)
{
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	/* Failures here leave a pid 1 that still reaps (waitpid below is
	 * correct without them), only less quietly; exiting would end the
	 * sandbox. */
	sigprocmask(SIG_BLOCK, &chld, NULL);
	ignore_signals();
	/* The service's sign that the sandbox runs (guest.h); a failed write
	 * only makes provision time out, which the service reports. */
	static const char ready[] = AIRLOCK_GUEST_READY;
	ssize_t w = write(1, ready, sizeof(ready) - 1);
	(void)w;
	for (;;) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		/* EINTR or nothing to wait for: loop and look again. */
		sigwaitinfo(&chld, NULL);
	}
}

/* ---- the processes of a uid (guest exec and guest kill) ---------------------------- */

/* A decimal number of at most 10 digits and at most max, whole string. */
static bool parse_uint(const char *s, unsigned long max, unsigned long *ret)
{
	unsigned long v = 0;
	size_t n = 0;
	for (; s[n]; n++) {
		if (s[n] < '0' || s[n] > '9' || n >= 10)
			return false;
		v = v * 10 + (unsigned long)(s[n] - '0');
	}
	if (n == 0 || v > max)
		return false;
	*ret = v;
	return true;
}

/* Whether pid is a zombie (or being torn down), from the state field of
 * /proc/PID/stat. That file holds one text the process chooses, its name,
 * between "(" and ")", and gVisor prints it unescaped (a name may hold a
 * newline, a ")" or a forged field): the state is the field after the
 * LAST ")", since every field after the name is a number the kernel
 * writes. Anything that does not parse is "not a zombie", which only makes
 * the caller keep killing it. */
static bool is_zombie(int proc_fd, const char *pid)
{
	char path[32];
	size_t plen = strlen(pid);
	if (plen + sizeof("/stat") > sizeof(path))
		return false;
	memcpy(path, pid, plen);
	memcpy(path + plen, "/stat", sizeof("/stat"));
	int fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	/* Linux caps the name at 64 bytes and gVisor at 16: the state is
	 * within the first kilobyte; a line cut there has no ")" after the
	 * name's and reads as not a zombie. */
	char buf[1024];
	size_t len = 0;
	ssize_t k;
	while (len < sizeof(buf) && (k = read(fd, buf + len, sizeof(buf) - len)) != 0) {
		if (k < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		len += (size_t)k;
	}
	close(fd);
	const char *close_paren = NULL;
	for (size_t i = 0; i < len; i++)
		if (buf[i] == ')')
			close_paren = buf + i;
	if (!close_paren || (size_t)(close_paren - buf) + 2 >= len || close_paren[1] != ' ')
		return false;
	return close_paren[2] == 'Z' || close_paren[2] == 'X';
}

/* One pass: SIGKILL to every process this process may signal but pid 1
 * and itself. Run as the sandbox's uid without capabilities, so the
 * kernel's own permission check is what says which processes are the
 * uid's (a target whose real or saved uid is ours): nothing a process
 * writes (its name, which gVisor prints unescaped into /proc/PID/status,
 * forging lines there) decides it. kill(-1) first, which reaches all of
 * them in one call; then each pid /proc lists, the directory's names being
 * the kernel's: a kill that succeeds is a process of the uid, one that
 * fails with EPERM is not ours, ESRCH is gone. Returns how many live ones
 * were found (and signalled), or -errno when /proc cannot be read;
 * *ret_zombies (NULL ok) counts the uid's zombies not yet reaped. The
 * directory is read with getdents64 into a stack buffer from offset 0 each
 * pass: no allocation, and the same descriptor serves every pass. */
static int kill_pass(int proc_fd, pid_t self, int *ret_zombies)
{
	if (ret_zombies)
		*ret_zombies = 0;
	/* ESRCH (none left) is the answer we want; the pass below counts. */
	kill(-1, SIGKILL);
	if (lseek(proc_fd, 0, SEEK_SET) < 0)
		return -errno;
	int found = 0;
	char buf[8192] __attribute__((aligned(8)));
	for (;;) {
		ssize_t n = getdents64(proc_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return found;
		for (ssize_t off = 0; off < n;) {
			const struct dirent64 *de = (const struct dirent64 *)(buf + off);
			off += de->d_reclen;
			unsigned long pid;
			/* Numeric entries are processes; pid 1 is init, whose end
			 * would end the sandbox; this process is the one doing the
			 * killing. */
			if (!parse_uint(de->d_name, (unsigned long)INT32_MAX, &pid) || pid == 1 ||
			    (pid_t)pid == self)
				continue;
			if (kill((pid_t)pid, SIGKILL) < 0)
				continue;
			/* A zombie is dead already, and a kill cannot hurry its
			 * parent's wait; but it still counts against the uid's
			 * RLIMIT_NPROC until it is reaped (pid 1 reaps orphans), so
			 * the next command could not fork: the caller waits for
			 * it. A live one is counted so that the next pass looks
			 * again (it may have forked meanwhile). */
			if (is_zombie(proc_fd, de->d_name)) {
				if (ret_zombies)
					(*ret_zombies)++;
			} else {
				found++;
			}
		}
	}
}

/* ---- guest exec ----------------------------------------------------------------- */

/* Whether CAP_KILL is in this process's effective set (or cannot be told:
 * then it is assumed, and exec refuses). A non-root uid with CAP_KILL could
 * signal every process, as root can. */
static bool has_cap_kill(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) < 0)
		return true;
	return (data[CAP_KILL / 32].effective & (1u << (CAP_KILL % 32))) != 0;
}

/* execve's failure as a positive errno. */
static int exec_path(const char *path, char *const *argv, char *const *envp)
{
	execve(path, argv, envp);
	return errno ? errno : EIO;
}

/* argv[0] resolved exactly as the native mechanism's starter does
 * (src/exec/starter/starter.c): a name with a slash is used as it is;
 * otherwise each directory of AIRLOCK_SANDBOX_PATH in order, never the
 * environment's PATH, so a file dropped in the workspace cannot shadow a
 * tool and the command's own PATH decides nothing. An error other than
 * "not there" (ENOENT, ENOTDIR) is the one reported, as a shell does for a
 * file it found but could not run (the last such one, as the starter does,
 * so both mechanisms say the same); ENOENT when there is none. */
static int exec_command(char *const *argv, char *const *envp)
{
	const char *name = argv[0];
	if (strchr(name, '/'))
		return exec_path(name, argv, envp);
	static const char path[] = AIRLOCK_SANDBOX_PATH;
	char buf[GUEST_EXEC_PATH_MAX];
	size_t nlen = strlen(name);
	int saved = ENOENT;
	const char *p = path;
	for (;;) {
		const char *end = strchr(p, ':');
		if (!end)
			end = p + strlen(p);
		size_t dlen = (size_t)(end - p);
		if (dlen + 1 + nlen + 1 <= sizeof(buf)) {
			memcpy(buf, p, dlen);
			buf[dlen] = '/';
			memcpy(buf + dlen + 1, name, nlen + 1);
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

/* ---- the sandbox's seccomp filter ------------------------------------------- */

/* The classic BPF program `guest exec` installs in the command (guest.h,
 * AIRLOCK_GUEST_SECCOMP_OPTION): decoded from the service's hex onto the
 * wrapper's stack before the fork, installed by the child. */
typedef struct guest_filter {
	struct sock_filter insns[AIRLOCK_GUEST_SECCOMP_MAX_INSNS];
	unsigned short len;
} guest_filter;

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* hex: the program's bytes as the service holds them (struct sock_filter
 * in this machine's byte order), two lowercase hex digits each. Whole
 * instructions only, at least one and at most the kernel's BPF_MAXINSNS;
 * anything else is refused, never installed in part. */
static bool filter_parse(const char *hex, guest_filter *f)
{
	size_t n = strlen(hex);
	size_t insn_hex = 2 * sizeof(struct sock_filter);
	if (n == 0 || n % insn_hex != 0 || n / insn_hex > AIRLOCK_GUEST_SECCOMP_MAX_INSNS)
		return false;
	unsigned char *out = (unsigned char *)f->insns;
	for (size_t i = 0; i < n; i += 2) {
		int hi = hex_value(hex[i]), lo = hex_value(hex[i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out[i / 2] = (unsigned char)(hi << 4 | lo);
	}
	f->len = (unsigned short)(n / insn_hex);
	return true;
}

/* The child, between fork and exec: it dies on any failure (there is
 * nothing to return to), after telling the parent why through the pipe. */
static _Noreturn void exec_child(int report_fd, char *const *argv, char *const *envp,
                                 const guest_filter *filter)
{
	/* Every disposition back to the default and the mask emptied: the
	 * command starts as a program started by a plain shell would, not with
	 * the wrapper's ignored signals (an ignored disposition survives
	 * execve). sigaction fails for SIGKILL, SIGSTOP and the two signals
	 * glibc reserves; those are default already. */
	struct sigaction sa = { .sa_handler = SIG_DFL };
	sigemptyset(&sa.sa_mask);
	for (int s = 1; s < NSIG; s++)
		sigaction(s, &sa, NULL);
	sigset_t none;
	sigemptyset(&none);
	int e = 0;
	if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		e = errno;
	/* The command leads a session and process group of its own, as on
	 * native: its job control and its kill(0, ...) reach what it started,
	 * never the wrapper. */
	if (!e && setsid() < 0)
		e = errno;
	/* No exec of the command's may gain privileges (a setuid file, file
	 * capabilities): the image has none, and this holds if one ever got
	 * in. */
	if (!e && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		e = errno;
	/* The sandbox's seccomp filter, last before the exec (it needs
	 * no_new_privs, and nothing above is a call it would refuse): the
	 * command and everything it starts run under it, and the kernel (the
	 * sentry, under gVisor) answers each call it denies with the errno the
	 * service's policy names. A failure ends the child with a message of
	 * its own and AIRLOCK_GUEST_EXEC_FAILED, never an unconfined exec. */
	if (!e) {
		struct sock_fprog prog = { .len = filter->len,
			                   .filter = (struct sock_filter *)filter->insns };
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0) {
			say("exec: installing the sandbox's seccomp filter", errno);
			_exit(AIRLOCK_GUEST_EXEC_FAILED);
		}
	}
	if (!e)
		e = exec_command(argv, envp);
	int v = e ? e : EIO;
	/* A write of 4 bytes to a pipe is atomic; if it fails the parent sees
	 * EOF and reports the command's status 127 as an exit. */
	while (write(report_fd, &v, sizeof(v)) < 0 && errno == EINTR)
		;
	_exit(AIRLOCK_GUEST_EXEC_FAILED);
}

/* After the command: kill every process of this uid and reap every child
 * until none is left. kill_pass, as this unprivileged uid, reaches every
 * process of the uid in the sandbox except pid 1 and the caller, so a
 * daemon the command started (`sleep 100 &`, a double fork, a process that
 * renamed itself) ends with it. Where this is a child subreaper (Linux) the
 * command's orphans are reparented here and reaped here; where it cannot be
 * (gVisor 20221219 answers PR_SET_CHILD_SUBREAPER with EINVAL) they go to
 * pid 1, `guest init`, which reaps them. Either way the loop ends only when
 * no child is left to wait for and a pass finds no live process of the uid
 * but this one (proc_fd; -1 when /proc could not be opened, then kill(-1)
 * goes out and the children alone decide): a process forked between two
 * rounds is caught by the next. Bounded by GUEST_REAP_MS.
 *
 * It reaches the uid's processes that are not the command's too (another
 * `guest exec` of the same uid, which guest.h's contract names: every
 * process of its uid but itself), so an adapter that runs two commands at
 * once in one sandbox must give them different uids. */
static void kill_and_reap(int proc_fd)
{
	int64_t deadline = now_ms() + GUEST_REAP_MS;
	pid_t self = getpid();
	for (;;) {
		int left = 0;
		if (proc_fd >= 0)
			left = kill_pass(proc_fd, self, NULL);
		else
			kill(-1, SIGKILL);
		pid_t w;
		while ((w = waitpid(-1, NULL, WNOHANG)) > 0)
			;
		bool children = !(w < 0 && errno == ECHILD);
		/* A /proc that cannot be read counts as "none seen": kill(-1)
		 * went out regardless. */
		if (!children && left <= 0)
			return;
		if (now_ms() >= deadline)
			return;
		pause_ns(GUEST_REAP_PAUSE_NS);
	}
}

static int guest_exec(const char *filter_hex, char **argv, char **envp)
{
	/* The filter first: a command never starts without it. */
	guest_filter filter;
	if (!filter_parse(filter_hex, &filter)) {
		say("exec: " AIRLOCK_GUEST_SECCOMP_OPTION
		    " takes a seccomp program as lowercase hex, whole instructions, at most "
		    GUEST_STR(AIRLOCK_GUEST_SECCOMP_MAX_INSNS),
		    0);
		return AIRLOCK_GUEST_EXEC_FAILED;
	}
	/* Never as root, in no uid namespace: kill(-1, SIGKILL) from a process
	 * with CAP_KILL reaches every process it can see but pid 1, which in
	 * the sandbox is the service's own (`guest kill`, an adapter's exec)
	 * and on a host, where someone ran this by hand, is every process of
	 * the machine. The caller gives the command the sandbox's uid. */
	if (getuid() == 0 || geteuid() == 0 || has_cap_kill()) {
		say("exec: refusing to run as root or with CAP_KILL (it kills every process it may signal when the command ends)",
		    0);
		return AIRLOCK_GUEST_EXEC_FAILED;
	}
	/* Non-dumpable first, before anything of the command's exists: the
	 * command runs as this uid and would otherwise be able to ptrace the
	 * wrapper or write its memory through /proc/PID/mem and choose the
	 * status the service sees. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
		say("exec: prctl(PR_SET_DUMPABLE)", errno);
		return AIRLOCK_GUEST_EXEC_FAILED;
	}
	/* A subreaper: the command's orphans are reparented here, not to pid
	 * 1, so this process can reap every one. gVisor 20221219 does not
	 * implement it (EINVAL): there pid 1 (`guest init`) reaps them, and
	 * kill_and_reap's pass over /proc is what tells that none is left. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0 && errno != EINVAL) {
		say("exec: prctl(PR_SET_CHILD_SUBREAPER)", errno);
		return AIRLOCK_GUEST_EXEC_FAILED;
	}
	/* /proc for kill_and_reap, opened once before the command exists (the
	 * command cannot replace what this descriptor names); -1 leaves the
	 * children alone to decide when the reaping is done. */
	int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = ignore_signals();
	if (r < 0) {
		say("exec: sigaction", -r);
		return AIRLOCK_GUEST_EXEC_FAILED;
	}
	/* The exec-error pipe: close-on-exec, so a successful execve closes
	 * the child's end and the parent reads EOF; a failure arrives as the
	 * errno. The same protocol as the native starter's. */
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		say("exec: pipe2", errno);
		return AIRLOCK_GUEST_EXEC_FAILED;
	}
	pid_t pid = fork();
	if (pid < 0) {
		say("exec: fork", errno);
		return AIRLOCK_GUEST_EXEC_FAILED;
	}
	if (pid == 0) {
		close(p[0]);
		exec_child(p[1], argv, envp, &filter);
	}
	close(p[1]);
	int exec_errno = 0, v = 0;
	ssize_t n;
	while ((n = read(p[0], &v, sizeof(v))) < 0 && errno == EINTR)
		;
	if (n == (ssize_t)sizeof(v))
		exec_errno = v;
	close(p[0]);

	int status = 0;
	pid_t w;
	while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	kill_and_reap(proc_fd);
	if (proc_fd >= 0)
		close(proc_fd);
	if (exec_errno) {
		line l = { .len = 0 };
		line_str(&l, "airlock: cannot execute ");
		line_name(&l, argv[0]);
		line_str(&l, ": ");
		line_str(&l, strerror(exec_errno));
		line_str(&l, "\n");
		line_emit(&l);
		return AIRLOCK_GUEST_EXEC_FAILED;
	}
	if (w < 0) {
		say("exec: waitpid", errno);
		return AIRLOCK_GUEST_EXEC_FAILED;
	}
	/* Like a shell: the exit code, or 128 + the signal that ended it. */
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

/* ---- guest kill ----------------------------------------------------------------- */

/* The killer: a child of `guest kill` that has become uid (no capability
 * left, non-dumpable), so that kill_pass's kernel permission check is what
 * picks the uid's processes. Passes GUEST_KILL_PAUSE_NS apart until one
 * finds none alive (each kills every process of the uid it sees; a
 * process forked during a pass is seen by the next), then waits, bounded by
 * GUEST_KILL_ZOMBIE_MS, for the uid's zombies to be reaped: they still
 * count against its RLIMIT_NPROC (pid 1 reaps them at once in a sandbox),
 * and the next command could not fork. Exit 0 when none is alive, 1 when
 * some survived until live_deadline, 3 when it could not become uid. */
static _Noreturn void kill_as(unsigned long uid, int proc_fd, int64_t live_deadline)
{
	/* Non-dumpable before the uid changes, so no process of the uid can
	 * ptrace this one or write its memory at any moment (a change of uid
	 * makes a process non-dumpable too). */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ||
	    setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) < 0) {
		say("kill: becoming the uid", errno);
		_exit(3);
	}
	/* From uid 0 to a nonzero uid in every slot drops every capability:
	 * with CAP_KILL left, a kill would succeed on any process and kill_pass
	 * would not be the uid's alone. */
	if (has_cap_kill() || getuid() == 0 || geteuid() == 0) {
		say("kill: CAP_KILL remained after becoming the uid", 0);
		_exit(3);
	}
	pid_t self = getpid();
	int64_t zombies_since = 0;
	for (;;) {
		int zombies = 0;
		int found = kill_pass(proc_fd, self, &zombies);
		if (found < 0) {
			say("kill: reading /proc", -found);
			_exit(1);
		}
		int64_t now = now_ms();
		if (found == 0) {
			/* None alive; the zombies are waited for a bounded while
			 * (their parent may be one that never waits: then it is its
			 * own limit it fills). */
			if (zombies == 0)
				_exit(0);
			if (!zombies_since)
				zombies_since = now;
			if (now - zombies_since > GUEST_KILL_ZOMBIE_MS)
				_exit(0);
		} else if (now >= live_deadline) {
			_exit(1);
		}
		pause_ns(GUEST_KILL_PAUSE_NS);
	}
}

/* Run by the service as guest root with CAP_SETUID, to end a command whose
 * wrapper could not (it was killed, or the command outlived it). It kills
 * nothing itself: each killer it forks becomes the uid (kill_as). A killer
 * is a process of the uid, so a command's process can SIGKILL or SIGSTOP
 * it; this parent, root, it cannot: a killer that died of a signal or was
 * stopped is replaced by a new one until GUEST_KILL_MS. */
static int guest_kill(const char *uid_text)
{
	unsigned long uid;
	/* Not 0: root keeps its capabilities and would kill every process.
	 * (uid_t)-1 is no uid: the "unchanged" value of setresuid. */
	if (!parse_uint(uid_text, 4294967294UL, &uid) || uid == 0) {
		say("kill: UID must be a nonzero decimal uid", 0);
		return 2;
	}
	int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (proc_fd < 0) {
		say("kill: /proc", errno);
		return 1;
	}
	int64_t live_deadline = now_ms() + GUEST_KILL_MS;
	for (;;) {
		pid_t pid = fork();
		if (pid < 0) {
			say("kill: fork", errno);
			close(proc_fd);
			return 1;
		}
		if (pid == 0)
			kill_as(uid, proc_fd, live_deadline);
		/* WUNTRACED: a process of the uid can stop a killer as well as
		 * kill it; a stopped one is killed here and replaced. */
		int status = 0;
		while (waitpid(pid, &status, WUNTRACED) < 0 && errno == EINTR)
			;
		if (WIFSTOPPED(status)) {
			kill(pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
		} else if (WIFEXITED(status)) {
			close(proc_fd);
			if (WEXITSTATUS(status) == 1)
				say("kill: processes of the uid remain after every pass", 0);
			return WEXITSTATUS(status) == 0 ? 0 : 1;
		}
		/* Killed or stopped by a process of the uid: another killer,
		 * unless the time is up. */
		if (now_ms() >= live_deadline) {
			close(proc_fd);
			say("kill: every killer was killed", 0);
			return 1;
		}
	}
}

int main(int argc, char **argv, char **envp)
{
	if (argc == 2 && strcmp(argv[1], "init") == 0)
		guest_init();
	if (argc >= 6 && strcmp(argv[1], "exec") == 0 &&
	    strcmp(argv[2], AIRLOCK_GUEST_SECCOMP_OPTION) == 0 && strcmp(argv[4], "--") == 0)
		return guest_exec(argv[3], argv + 5, envp);
	if (argc == 3 && strcmp(argv[1], "kill") == 0)
		return guest_kill(argv[2]);
	/* Anything else, including a tenant running it by hand with arguments
	 * it does not know: say how it is used, do nothing. */
	if (write(STDERR_FILENO, usage_text, sizeof(usage_text) - 1) < 0)
		return 2;
	return 2;
}
