/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's budget of inet sockets (sockbudget.h), as four small cgroup
 * BPF programs sharing two maps:
 *
 *   socks  BPF_MAP_TYPE_HASH, key the socket's cookie, max_entries the
 *          budget: a socket counts while its cookie is in it, and the
 *          kernel refuses an insert into a full map, so no socket() of the
 *          group passes the budget whatever the order of events.
 *   count  BPF_MAP_TYPE_ARRAY of one u64: how many cookies socks holds
 *          (kept by the programs beside each successful insert and
 *          delete), for the one program that must know whether socks is
 *          full without inserting.
 *
 *   create   (BPF_CGROUP_INET_SOCK_CREATE) every socket(AF_INET*) of the
 *            group inserts its cookie; a full map refuses the socket
 *            (socket() fails with EPERM).
 *   release  (BPF_CGROUP_INET_SOCK_RELEASE) deletes it when the kernel
 *            releases the socket: the last reference to its file, so a
 *            socket held by a memory mapping (tcp_mmap) after its
 *            descriptor is closed counts until the mapping goes.
 *   sockops  (BPF_CGROUP_SOCK_OPS) counts a connection a listener of the
 *            group completes (BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB, the
 *            child socket, made by the kernel without socket() and so
 *            unseen by create). Once accepted, release deletes it like any
 *            other socket.
 *   ingress  (BPF_CGROUP_INET_INGRESS) drops a packet to a listener of the
 *            group while socks is full: a listener receives only
 *            handshakes (a SYN, the ACK that would make the child), and the
 *            peer retransmits as when a backlog is full. The check and the
 *            sockops insert are not one step: two handshakes that complete
 *            at once on two CPUs with one place left both pass, and the
 *            second child is made uncounted (sockops cannot refuse it).
 *            Measured from Python: about 3% of such races won, each an
 *            uncounted socket for as long as it lives; the bound on what
 *            each then holds is the namespace's receive buffer (16 KiB,
 *            SO_RCVBUF and SO_RCVLOWAT without effect). Closing it for good
 *            needs the reservation made in the ingress program itself
 *            (an atomic count taken before the ACK passes).
 *
 * A child still unaccepted when its listener closes is freed by the kernel
 * with no hook a cgroup program sees (no release: it never had a file),
 * so its entry stays, and the sandbox's budget is that much smaller until
 * the sandbox ends. Deleting it when it reaches TCP_CLOSE instead (a
 * BPF_SOCK_OPS_STATE_CB) was tried and is wrong: a child reset by its peer
 * reaches TCP_CLOSE too and stays in the accept queue with what it
 * received, or, accepted, stays held by its descriptor or a mapping, so
 * clients that reset their connections (SO_LINGER 0) left any number of
 * uncounted children (80 behind a budget of 16). Losing budget is the
 * sandbox's own loss; an uncounted socket is the host's.
 *
 * Cookies are never reused while the host runs, so a delete can never take
 * another socket's entry; a delete of a cookie never inserted (a socket
 * refused) does nothing.
 *
 * Why hand-written instructions and not BPF C compiled by clang and loaded
 * with libbpf: the four programs are under 100 instructions together, with no
 * loops and no structures beyond a few context fields, and loading them
 * takes three bpf(2) commands; a clang build step, an embedded object and
 * a new library would be more code to trust than what they replace. The
 * verifier checks these exactly as it would compiled ones.
 *
 * The programs are attached without BPF_F_ALLOW_OVERRIDE or
 * BPF_F_ALLOW_MULTI, so nothing can be attached below them (the sandbox
 * could not anyway: it has no cgroupfs and no CAP_BPF on the host), and the
 * descriptors are closed once they are attached: the cgroup holds the
 * programs, the programs hold the maps, and removing the group frees all.
 */
#include "host/sockbudget.h"

#include <errno.h>
#include <linux/bpf.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "host/cgroup/cgroup.h"
#include "util/syscalls.h"
#include "util/util.h"

/* ---- instructions ----------------------------------------------------------- */

#define I(c, d, s, o, i)                                                                   \
	((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) })
#define MOV_REG(d, s) I(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV_IMM(d, i) I(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define ADD_IMM(d, i) I(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, i)
#define LDX(sz, d, s, o) I(BPF_LDX | (sz) | BPF_MEM, d, s, o, 0)
#define STX(sz, d, s, o) I(BPF_STX | (sz) | BPF_MEM, d, s, o, 0)
#define ST_IMM(sz, d, o, i) I(BPF_ST | (sz) | BPF_MEM, d, 0, o, i)
#define XADD_DW(d, s, o) I(BPF_STX | BPF_DW | BPF_ATOMIC, d, s, o, BPF_ADD)
#define JEQ_IMM(d, i, o) I(BPF_JMP | BPF_JEQ | BPF_K, d, 0, o, i)
#define JNE_IMM(d, i, o) I(BPF_JMP | BPF_JNE | BPF_K, d, 0, o, i)
#define JGE_IMM(d, i, o) I(BPF_JMP | BPF_JGE | BPF_K, d, 0, o, i)
#define JA(o) I(BPF_JMP | BPF_JA, 0, 0, o, 0)
#define CALL(f) I(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define EXIT() I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
/* A map's descriptor into d: two instruction slots. */
#define LD_MAP0(d, fd) I(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd)
#define LD_MAP1() I(0, 0, 0, 0, 0)

#define SB_INSNS_MAX 64

/* A program under construction; labels are resolved by hand below, each
 * jump's offset counted in the comment beside it. */
typedef struct sb_prog {
	struct bpf_insn v[SB_INSNS_MAX];
	unsigned n;
} sb_prog;

static void sb_emit(sb_prog *p, struct bpf_insn insn)
{
	/* The programs are fixed; a bound past SB_INSNS_MAX is a bug here
	 * that the load then reports (the program is cut short). */
	if (p->n < SB_INSNS_MAX)
		p->v[p->n++] = insn;
}

/* Stack slots (r10 is the frame pointer). */
#define SB_KEY_OFF (-8)    /* the cookie: the socks key */
#define SB_VALUE_OFF (-16) /* socks' value: unused, zero */
#define SB_INDEX_OFF (-20) /* count's key: 0 */

/* r0 = the cookie of the socket in ctx r6, stored at SB_KEY_OFF. */
static void sb_cookie(sb_prog *p)
{
	sb_emit(p, MOV_REG(BPF_REG_1, BPF_REG_6));
	sb_emit(p, CALL(BPF_FUNC_get_socket_cookie));
	sb_emit(p, STX(BPF_DW, BPF_REG_10, BPF_REG_0, SB_KEY_OFF));
}

/* r0 = count's element (or NULL). 6 instructions. */
static void sb_count_lookup(sb_prog *p, int count_fd)
{
	sb_emit(p, ST_IMM(BPF_W, BPF_REG_10, SB_INDEX_OFF, 0));
	sb_emit(p, LD_MAP0(BPF_REG_1, count_fd));
	sb_emit(p, LD_MAP1());
	sb_emit(p, MOV_REG(BPF_REG_2, BPF_REG_10));
	sb_emit(p, ADD_IMM(BPF_REG_2, SB_INDEX_OFF));
	sb_emit(p, CALL(BPF_FUNC_map_lookup_elem));
}

/* count += delta. 9 instructions. */
static void sb_count_add(sb_prog *p, int count_fd, int delta)
{
	sb_count_lookup(p, count_fd);
	sb_emit(p, JEQ_IMM(BPF_REG_0, 0, 2)); /* no element: skip the add */
	sb_emit(p, MOV_IMM(BPF_REG_1, delta));
	sb_emit(p, XADD_DW(BPF_REG_0, BPF_REG_1, 0));
}
#define SB_COUNT_ADD_LEN 9

/* Insert the cookie at SB_KEY_OFF into socks (BPF_NOEXIST); r0 = 0 when
 * inserted. 9 instructions. */
static void sb_insert(sb_prog *p, int socks_fd)
{
	sb_emit(p, ST_IMM(BPF_DW, BPF_REG_10, SB_VALUE_OFF, 0));
	sb_emit(p, LD_MAP0(BPF_REG_1, socks_fd));
	sb_emit(p, LD_MAP1());
	sb_emit(p, MOV_REG(BPF_REG_2, BPF_REG_10));
	sb_emit(p, ADD_IMM(BPF_REG_2, SB_KEY_OFF));
	sb_emit(p, MOV_REG(BPF_REG_3, BPF_REG_10));
	sb_emit(p, ADD_IMM(BPF_REG_3, SB_VALUE_OFF));
	sb_emit(p, MOV_IMM(BPF_REG_4, BPF_NOEXIST));
	sb_emit(p, CALL(BPF_FUNC_map_update_elem));
}

/* Delete the cookie at SB_KEY_OFF from socks; r0 = 0 when it was there.
 * 5 instructions. */
static void sb_delete(sb_prog *p, int socks_fd)
{
	sb_emit(p, LD_MAP0(BPF_REG_1, socks_fd));
	sb_emit(p, LD_MAP1());
	sb_emit(p, MOV_REG(BPF_REG_2, BPF_REG_10));
	sb_emit(p, ADD_IMM(BPF_REG_2, SB_KEY_OFF));
	sb_emit(p, CALL(BPF_FUNC_map_delete_elem));
}

/* create: 1 (allow) when the socket's cookie went in, else 0 (EPERM). */
static void sb_build_create(sb_prog *p, int socks_fd, int count_fd)
{
	sb_emit(p, MOV_REG(BPF_REG_6, BPF_REG_1));
	sb_cookie(p);
	sb_insert(p, socks_fd);
	sb_emit(p, JEQ_IMM(BPF_REG_0, 0, 2)); /* inserted: to the count */
	sb_emit(p, MOV_IMM(BPF_REG_0, 0));
	sb_emit(p, EXIT());
	sb_count_add(p, count_fd, 1);
	sb_emit(p, MOV_IMM(BPF_REG_0, 1));
	sb_emit(p, EXIT());
}

/* release: delete the cookie; the count follows a delete that took one. */
static void sb_build_release(sb_prog *p, int socks_fd, int count_fd)
{
	sb_emit(p, MOV_REG(BPF_REG_6, BPF_REG_1));
	sb_cookie(p);
	sb_delete(p, socks_fd);
	sb_emit(p, JNE_IMM(BPF_REG_0, 0, SB_COUNT_ADD_LEN)); /* not there: past the count */
	sb_count_add(p, count_fd, -1);
	sb_emit(p, MOV_IMM(BPF_REG_0, 1));
	sb_emit(p, EXIT());
}

/* sockops: insert a passive child at PASSIVE_ESTABLISHED. Always 1. */
static void sb_build_sockops(sb_prog *p, int socks_fd, int count_fd)
{
	sb_emit(p, MOV_REG(BPF_REG_6, BPF_REG_1));
	sb_emit(p, LDX(BPF_W, BPF_REG_7, BPF_REG_6, offsetof(struct bpf_sock_ops, op)));
	sb_emit(p, JNE_IMM(BPF_REG_7, BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB,
	                   3 + 9 + 1 + SB_COUNT_ADD_LEN)); /* to out */
	sb_cookie(p);                                     /* 3 */
	sb_insert(p, socks_fd);                           /* 9 */
	sb_emit(p, JNE_IMM(BPF_REG_0, 0, SB_COUNT_ADD_LEN)); /* 1: not inserted, to out */
	sb_count_add(p, count_fd, 1);
	sb_emit(p, MOV_IMM(BPF_REG_0, 1)); /* out */
	sb_emit(p, EXIT());
}

/* ingress: 0 (drop) for a packet to a listening socket while count is at
 * the budget; 1 for everything else. */
static void sb_build_ingress(sb_prog *p, int count_fd, uint32_t budget)
{
	sb_emit(p, LDX(BPF_DW, BPF_REG_1, BPF_REG_1, offsetof(struct __sk_buff, sk)));
	sb_emit(p, JEQ_IMM(BPF_REG_1, 0, 16)); /* no socket: to pass */
	sb_emit(p, CALL(BPF_FUNC_sk_fullsock));
	sb_emit(p, JEQ_IMM(BPF_REG_0, 0, 14)); /* to pass */
	sb_emit(p, LDX(BPF_W, BPF_REG_1, BPF_REG_0, offsetof(struct bpf_sock, state)));
	sb_emit(p, JNE_IMM(BPF_REG_1, TCP_LISTEN, 12)); /* to pass */
	sb_count_lookup(p, count_fd);
	sb_emit(p, JEQ_IMM(BPF_REG_0, 0, 5)); /* to pass */
	sb_emit(p, LDX(BPF_DW, BPF_REG_1, BPF_REG_0, 0));
	/* count can dip below zero only transiently (a delete's decrement
	 * before the insert's increment); as unsigned it is then huge, and a
	 * handshake dropped in that instant is retransmitted. */
	sb_emit(p, JGE_IMM(BPF_REG_1, (int32_t)budget, 1)); /* to drop */
	sb_emit(p, JA(2));                                  /* to pass */
	sb_emit(p, MOV_IMM(BPF_REG_0, 0));
	sb_emit(p, EXIT());
	sb_emit(p, MOV_IMM(BPF_REG_0, 1)); /* pass */
	sb_emit(p, EXIT());
}

/* ---- loading ------------------------------------------------------------------ */

static int sb_map_create(unsigned type, unsigned key_size, unsigned value_size,
                         unsigned max_entries, unsigned flags, const char *name)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_type = type;
	a.key_size = key_size;
	a.value_size = value_size;
	a.max_entries = max_entries;
	a.map_flags = flags;
	snprintf(a.map_name, sizeof(a.map_name), "%s", name);
	return sys_bpf(BPF_MAP_CREATE, &a, sizeof(a));
}

static int sb_prog_load(unsigned type, unsigned expected, const sb_prog *p, const char *name)
{
	if (p->n >= SB_INSNS_MAX) {
		errno = E2BIG;
		return -1;
	}
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.prog_type = type;
	a.expected_attach_type = expected;
	a.insns = (uint64_t)(uintptr_t)p->v;
	a.insn_cnt = p->n;
	a.license = (uint64_t)(uintptr_t) "GPL";
	snprintf(a.prog_name, sizeof(a.prog_name), "%s", name);
	return sys_bpf(BPF_PROG_LOAD, &a, sizeof(a));
}

static int sb_attach(int cgroup_fd, int prog_fd, unsigned type)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.target_fd = (uint32_t)cgroup_fd;
	a.attach_bpf_fd = (uint32_t)prog_fd;
	a.attach_type = type;
	return sys_bpf(BPF_PROG_ATTACH, &a, sizeof(a));
}

/* Make the maps and load the programs; attach each to cgroup_fd unless it
 * is -1 (the probe: what the kernel accepts, without a group). */
static int sb_setup(int cgroup_fd, uint32_t budget, airlock_error *err)
{
	/* No preallocation: an entry's memory is taken when a socket is made,
	 * not the budget's worth up front for every sandbox. */
	_cleanup_close_ int socks = sb_map_create(BPF_MAP_TYPE_HASH, sizeof(uint64_t),
	                                          sizeof(uint64_t), budget, BPF_F_NO_PREALLOC,
	                                          "airlock_socks");
	if (socks < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "socket budget: creating its BPF map (is BPF available?)");
	_cleanup_close_ int count =
		sb_map_create(BPF_MAP_TYPE_ARRAY, sizeof(uint32_t), sizeof(uint64_t), 1, 0, "airlock_nsock");
	if (count < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "socket budget: creating its BPF map");

	static const struct {
		const char *name;
		unsigned type, attach;
	} progs[] = {
		{ "airlock_sk_new", BPF_PROG_TYPE_CGROUP_SOCK, BPF_CGROUP_INET_SOCK_CREATE },
		{ "airlock_sk_rel", BPF_PROG_TYPE_CGROUP_SOCK, BPF_CGROUP_INET_SOCK_RELEASE },
		{ "airlock_sk_ops", BPF_PROG_TYPE_SOCK_OPS, BPF_CGROUP_SOCK_OPS },
		{ "airlock_sk_syn", BPF_PROG_TYPE_CGROUP_SKB, BPF_CGROUP_INET_INGRESS },
	};
	/* The release, sockops and ingress programs first: from the moment
	 * create is attached every insert has its delete. */
	static const int order[] = { 1, 2, 3, 0 };
	for (size_t k = 0; k < ARRAY_SIZE(order); k++) {
		int i = order[k];
		sb_prog p = { .n = 0 };
		switch (i) {
		case 0: sb_build_create(&p, socks, count); break;
		case 1: sb_build_release(&p, socks, count); break;
		case 2: sb_build_sockops(&p, socks, count); break;
		default: sb_build_ingress(&p, count, budget); break;
		}
		_cleanup_close_ int fd = sb_prog_load(progs[i].type, progs[i].attach, &p, progs[i].name);
		if (fd < 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
			                         "socket budget: the kernel refused its BPF program %s "
			                         "(cgroup BPF, kernel 5.9 or later, is needed)",
			                         progs[i].name);
		if (cgroup_fd >= 0 && sb_attach(cgroup_fd, fd, progs[i].attach) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
			                         "socket budget: attaching %s to the sandbox's cgroup2 "
			                         "group",
			                         progs[i].name);
	}
	return 0;
}

int host_sock_budget_attach(int cgroup_fd, uint32_t budget, airlock_error *err)
{
	if (cgroup_fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "socket budget: no cgroup2 hierarchy to attach it to (mount "
		                         "cgroup2, e.g. at /sys/fs/cgroup/unified)");
	if (budget == 0 || budget > INT32_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, EINVAL,
		                         "socket budget: %u is out of range", budget);
	return sb_setup(cgroup_fd, budget, err);
}

int host_sock_budget_probe(airlock_error *err)
{
	int r = host_cgroup_v2_check(err);
	return r < 0 ? r : sb_setup(-1, AIRLOCK_SANDBOX_SOCKETS_MIN, err);
}
