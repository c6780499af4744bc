/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's budget of inet sockets (sockbudget.h), as four small cgroup
 * BPF programs sharing three maps:
 *
 *   count  BPF_MAP_TYPE_ARRAY of one u64: the places taken, never more
 *          than the budget. A place is taken by one atomic fetch-and-add
 *          that reads what count was: at the budget already, the add is
 *          undone and the place refused. The add is the check, so two
 *          programs on two CPUs can never both take the last place.
 *   socks  BPF_MAP_TYPE_HASH, key the socket's cookie: the sockets that
 *          hold a place, so that each gives back exactly one; the value
 *          marks which ends of a TCP socket's life have come (below).
 *   held   BPF_MAP_TYPE_PERCPU_ARRAY of one u64 per CPU: 1 while a place
 *          is reserved on that CPU for a handshake's child (below).
 *
 *   create   (BPF_CGROUP_INET_SOCK_CREATE) every socket(AF_INET*) of the
 *            group takes a place and inserts its cookie; without a place
 *            socket() fails with EPERM.
 *   release  (BPF_CGROUP_INET_SOCK_RELEASE) runs when the kernel releases
 *            the socket's file: its last reference, so a socket held by a
 *            memory mapping (tcp_mmap) after its descriptor is closed
 *            counts until the mapping goes. A socket that is not TCP, or a
 *            TCP socket already in TCP_CLOSE, gives its place back then.
 *            A TCP connection or listener still open outlives its file:
 *            an orphan goes on sending what was queued (FIN_WAIT1 for as
 *            long as its peer does not read, holding its send queue), a
 *            listener closes after. It keeps its place until it reaches
 *            TCP_CLOSE: the entry is marked released, and whichever of the
 *            two ends comes second (each marks it with one atomic
 *            fetch-or, so exactly one sees the other's mark) gives the
 *            place back. A TIME_WAIT connection is a small socket of its
 *            own, bounded by the namespace's tw_buckets, not counted.
 *   ingress  (BPF_CGROUP_INET_INGRESS) lets a packet reach a listener of
 *            the group only with a place reserved: this CPU's held flag if
 *            set, else a place taken now and the flag set. Without one the
 *            packet is dropped and the peer retransmits, as when a backlog
 *            is full. A listener receives only handshakes (a SYN, the ACK
 *            that makes the child).
 *   sockops  (BPF_CGROUP_SOCK_OPS) asks for the state changes of every
 *            socket that connects or listens (TCP_CONNECT_CB,
 *            TCP_LISTEN_CB; a close it reached before, a failed connect,
 *            is forgotten), marks the entry closed at TCP_CLOSE
 *            (STATE_CB), and at BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB, for
 *            the child a listener's handshake made (by the kernel, without
 *            socket(), so unseen by create), swaps this CPU's held flag to
 *            0: if it was 1 the reserved place becomes the child's, else
 *            the child takes a place of its own. Its cookie goes in, and
 *            it ends like any TCP socket.
 *
 * Why the reservation is per CPU: the ACK that completes a handshake
 * passes the listener's ingress program and makes the child in one run of
 * the receive path (tcp_v4_rcv and tcp_v6_rcv, for the request socket's
 * listener; no lock, no wait), in softirq on one CPU, which nothing else on
 * that CPU interleaves with but a hardware interrupt. So the flag the
 * ingress program sets is the one the child's sockops program finds, with
 * no other handshake's packet between them. A packet that passes and makes
 * no child (a SYN, a stray ACK) leaves its place held for the next
 * handshake on that CPU: at most one place per CPU is held so, out of the
 * sandbox's own budget. The sockops program swaps the flag atomically, as
 * it may also run in process context (below), where a softirq can
 * interrupt it. The kernel is assumed not PREEMPT_RT (softirqs there can be
 * preempted).
 *
 * A child made elsewhere may find no reservation, and with the budget full
 * it is made uncounted (sockops cannot refuse it): a SYN cookie's child is
 * made from the listener's backlog when the listener is locked (later, in
 * process context, on any CPU), and a Fast Open child when its SYN comes.
 * host/netns.c turns both off in every sandbox's network namespace
 * (tcp_syncookies 0, tcp_fastopen 1), which the sandbox cannot change.
 * Test: test_native_cgroup racing_handshakes_never_pass_the_socket_budget
 * (two CPUs, one place left, 400 rounds; a check at the listener that was
 * not one step with the count let about 3 rounds in 100 make two children).
 *
 * An insert into socks that fails (memory: the map is not preallocated)
 * keeps its place taken with no cookie to give it back: that socket counts
 * until the sandbox ends, the sandbox's loss and not the host's.
 *
 * A child still unaccepted when its listener closes is freed by the kernel
 * with no release (it never had a file), so its entry stays marked closed
 * and not released, and the sandbox's budget is that much smaller until the
 * sandbox ends. TCP_CLOSE alone cannot give a place back: a child reset by
 * its peer reaches it too and stays in the accept queue with what it
 * received, or, accepted, stays held by its descriptor or a mapping
 * (clients that reset their connections, SO_LINGER 0, would leave any
 * number of uncounted children). Losing budget is the sandbox's own loss;
 * an uncounted socket is the host's.
 *
 * Cookies are never reused while the host runs, so a delete can never take
 * another socket's entry; a delete of a cookie never inserted (a socket
 * refused) does nothing.
 *
 * Why hand-written instructions and not BPF C compiled by clang and loaded
 * with libbpf: the four programs are under 90 instructions each, with no
 * loops and no structures beyond a few context fields, their jumps resolved
 * from named labels (sb_resolve), and loading them takes three bpf(2)
 * commands; a clang build step, an embedded object and
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
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "host/cgroup/cgroup.h"
#include "util/syscalls.h"
#include "util/util.h"
#include "util/fault.h"

/* ---- instructions ----------------------------------------------------------- */

#define I(c, d, s, o, i)                                                                   \
	((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) })
#define MOV_REG(d, s) I(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV_IMM(d, i) I(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define ADD_IMM(d, i) I(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, i)
#define LDX(sz, d, s, o) I(BPF_LDX | (sz) | BPF_MEM, d, s, o, 0)
#define STX(sz, d, s, o) I(BPF_STX | (sz) | BPF_MEM, d, s, o, 0)
#define ST_IMM(sz, d, o, i) I(BPF_ST | (sz) | BPF_MEM, d, 0, o, i)
/* *(u64 *)(d + o) += s, atomically. */
#define ATOMIC_ADD(d, s, o) I(BPF_STX | BPF_DW | BPF_ATOMIC, d, s, o, BPF_ADD)
/* The same, s = the value before. */
#define ATOMIC_FETCH_ADD(d, s, o) I(BPF_STX | BPF_DW | BPF_ATOMIC, d, s, o, BPF_ADD | BPF_FETCH)
/* s = *(u64 *)(d + o), *(u64 *)(d + o) = s before, atomically. */
#define ATOMIC_XCHG(d, s, o) I(BPF_STX | BPF_DW | BPF_ATOMIC, d, s, o, BPF_XCHG)
/* s = *(u64 *)(d + o), then *(u64 *)(d + o) |= s before, atomically. */
#define ATOMIC_FETCH_OR(d, s, o) I(BPF_STX | BPF_DW | BPF_ATOMIC, d, s, o, BPF_OR | BPF_FETCH)
/* *(u64 *)(d + o) &= s, atomically. */
#define ATOMIC_AND(d, s, o) I(BPF_STX | BPF_DW | BPF_ATOMIC, d, s, o, BPF_AND)
#define AND_IMM(d, i) I(BPF_ALU64 | BPF_AND | BPF_K, d, 0, 0, i)
#define OR_IMM(d, i) I(BPF_ALU64 | BPF_OR | BPF_K, d, 0, 0, i)
#define JEQ_IMM(d, i, o) I(BPF_JMP | BPF_JEQ | BPF_K, d, 0, o, i)
#define JNE_IMM(d, i, o) I(BPF_JMP | BPF_JNE | BPF_K, d, 0, o, i)
#define JLT_IMM(d, i, o) I(BPF_JMP | BPF_JLT | BPF_K, d, 0, o, i)
#define JA(o) I(BPF_JMP | BPF_JA, 0, 0, o, 0)
#define CALL(f) I(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define EXIT() I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
/* A map's descriptor into d: two instruction slots. */
#define LD_MAP0(d, fd) I(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd)
#define LD_MAP1() I(0, 0, 0, 0, 0)

#define SB_INSNS_MAX 128

/* The places a program jumps to by name; sb_resolve turns each jump's
 * label into its offset, so no offset is counted by hand. */
enum sb_label {
	SB_ALLOW,
	SB_DENY,
	SB_INSERT,
	SB_NO_PLACE,
	SB_FREE,
	SB_WATCH,
	SB_PASSIVE,
	SB_STATE,
	SB_REOPEN,
	SB_LABELS
};

/* A program under construction. */
typedef struct sb_prog {
	struct bpf_insn v[SB_INSNS_MAX];
	unsigned n;
	int at[SB_LABELS];         /* each label's instruction, -1 until placed */
	signed char to[SB_INSNS_MAX]; /* each jump's label, -1 for other instructions */
} sb_prog;

static void sb_init(sb_prog *p)
{
	p->n = 0;
	for (int i = 0; i < SB_LABELS; i++)
		p->at[i] = -1;
	memset(p->to, -1, sizeof(p->to));
}

static void sb_emit(sb_prog *p, struct bpf_insn insn)
{
	/* The programs are fixed; a bound past SB_INSNS_MAX is a bug here
	 * that the load then reports (sb_prog_load refuses a full program). */
	if (p->n < SB_INSNS_MAX)
		p->v[p->n++] = insn;
	else
		p->n = SB_INSNS_MAX + 1;
}

/* A conditional or plain jump (its offset 0) to a label. */
static void sb_jump(sb_prog *p, struct bpf_insn insn, enum sb_label to)
{
	if (p->n < SB_INSNS_MAX)
		p->to[p->n] = (signed char)to;
	sb_emit(p, insn);
}

static void sb_place(sb_prog *p, enum sb_label label)
{
	p->at[label] = (int)p->n;
}

/* Every jump's offset from its label; false (the program is not loaded)
 * when a jump names a label never placed. */
static bool sb_resolve(sb_prog *p)
{
	for (unsigned i = 0; i < p->n && i < SB_INSNS_MAX; i++) {
		if (p->to[i] < 0)
			continue;
		if (p->at[p->to[i]] < 0)
			return false;
		p->v[i].off = (int16_t)(p->at[p->to[i]] - (int)i - 1);
	}
	return true;
}

/* Stack slots (r10 is the frame pointer). */
#define SB_KEY_OFF (-8)    /* the cookie: the socks key */
#define SB_VALUE_OFF (-16) /* socks' value: unused, zero */
#define SB_INDEX_OFF (-20) /* an array map's key: 0 */

/* The cookie of the socket in ctx r6, stored at SB_KEY_OFF. */
static void sb_cookie(sb_prog *p)
{
	sb_emit(p, MOV_REG(BPF_REG_1, BPF_REG_6));
	sb_emit(p, CALL(BPF_FUNC_get_socket_cookie));
	sb_emit(p, STX(BPF_DW, BPF_REG_10, BPF_REG_0, SB_KEY_OFF));
}

/* r0 = element 0 of the array map fd (this CPU's, for a per-CPU one). Its
 * absence cannot happen (an array has all its elements), and each caller
 * takes the side that counts no socket unseen. */
static void sb_lookup0(sb_prog *p, int fd)
{
	sb_emit(p, ST_IMM(BPF_W, BPF_REG_10, SB_INDEX_OFF, 0));
	sb_emit(p, LD_MAP0(BPF_REG_1, fd));
	sb_emit(p, LD_MAP1());
	sb_emit(p, MOV_REG(BPF_REG_2, BPF_REG_10));
	sb_emit(p, ADD_IMM(BPF_REG_2, SB_INDEX_OFF));
	sb_emit(p, CALL(BPF_FUNC_map_lookup_elem));
}

/* Take one of the budget's places: r7 = count's element, count += 1 in one
 * atomic step that also reads what it was; if that was already the budget,
 * give it back and go to full. Two programs on two CPUs can never both
 * take the last place: the add is the check. */
static void sb_take_place(sb_prog *p, int count_fd, uint32_t budget, enum sb_label full)
{
	sb_lookup0(p, count_fd);
	sb_jump(p, JEQ_IMM(BPF_REG_0, 0, 0), full);
	sb_emit(p, MOV_REG(BPF_REG_7, BPF_REG_0));
	sb_emit(p, MOV_IMM(BPF_REG_1, 1));
	sb_emit(p, ATOMIC_FETCH_ADD(BPF_REG_7, BPF_REG_1, 0));
	sb_emit(p, JLT_IMM(BPF_REG_1, (int32_t)budget, 3)); /* taken: past the give-back */
	sb_emit(p, MOV_IMM(BPF_REG_1, -1));
	sb_emit(p, ATOMIC_ADD(BPF_REG_7, BPF_REG_1, 0));
	sb_jump(p, JA(0), full);
}

/* Give back the place counted at r7. */
static void sb_give_back(sb_prog *p)
{
	sb_emit(p, MOV_IMM(BPF_REG_1, -1));
	sb_emit(p, ATOMIC_ADD(BPF_REG_7, BPF_REG_1, 0));
}

/* Insert the cookie at SB_KEY_OFF into socks (BPF_NOEXIST); r0 = 0 when
 * inserted. */
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

static bool sb_jumps_to(const sb_prog *p, enum sb_label label)
{
	for (unsigned i = 0; i < p->n && i < SB_INSNS_MAX; i++)
		if (p->to[i] == (signed char)label)
			return true;
	return false;
}

/* The program's ends, each reached only by a jump: r0 = 0 at SB_DENY, r0
 * = 1 at SB_ALLOW. An end no jump names is left out, as the verifier
 * refuses an instruction it cannot reach. */
static void sb_ends(sb_prog *p)
{
	if (sb_jumps_to(p, SB_DENY)) {
		sb_place(p, SB_DENY);
		sb_emit(p, MOV_IMM(BPF_REG_0, 0));
		sb_emit(p, EXIT());
	}
	sb_place(p, SB_ALLOW);
	sb_emit(p, MOV_IMM(BPF_REG_0, 1));
	sb_emit(p, EXIT());
}

/* create: take a place, then insert the cookie; 1 (allow) when both
 * happened, else 0 (socket() fails with EPERM) with the place given back. */
static void sb_build_create(sb_prog *p, int socks_fd, int count_fd, int held_fd, uint32_t budget)
{
	(void)held_fd;
	sb_emit(p, MOV_REG(BPF_REG_6, BPF_REG_1));
	sb_take_place(p, count_fd, budget, SB_DENY);
	sb_cookie(p);
	sb_insert(p, socks_fd);
	sb_jump(p, JEQ_IMM(BPF_REG_0, 0, 0), SB_ALLOW);
	sb_give_back(p);
	sb_jump(p, JA(0), SB_DENY);
	sb_ends(p);
}

/* An entry's value: which of the two ends of a TCP socket's life have
 * come. Its place is given back at the second. */
#define SB_RELEASED 1 /* its file is gone (release) */
#define SB_CLOSED 2   /* it reached TCP_CLOSE (sockops, STATE_CB) */

/* r0 = the socks entry of the cookie at SB_KEY_OFF, or NULL. */
static void sb_entry(sb_prog *p, int socks_fd)
{
	sb_emit(p, LD_MAP0(BPF_REG_1, socks_fd));
	sb_emit(p, LD_MAP1());
	sb_emit(p, MOV_REG(BPF_REG_2, BPF_REG_10));
	sb_emit(p, ADD_IMM(BPF_REG_2, SB_KEY_OFF));
	sb_emit(p, CALL(BPF_FUNC_map_lookup_elem));
}

/* Mark the entry at r0 (not NULL) with one end (bit), atomically; unless
 * the other end (other) had come already, go to SB_ALLOW, else fall
 * through to SB_FREE. Exactly one of the two ends sees the other's mark. */
static void sb_mark(sb_prog *p, int bit, int other)
{
	sb_emit(p, MOV_IMM(BPF_REG_1, bit));
	sb_emit(p, ATOMIC_FETCH_OR(BPF_REG_0, BPF_REG_1, 0));
	sb_emit(p, AND_IMM(BPF_REG_1, other));
	sb_jump(p, JEQ_IMM(BPF_REG_1, 0, 0), SB_ALLOW);
}

/* SB_FREE: delete the cookie's entry; the delete that took it gives its
 * place back. Then SB_ALLOW. */
static void sb_free(sb_prog *p, int socks_fd, int count_fd)
{
	sb_place(p, SB_FREE);
	sb_emit(p, LD_MAP0(BPF_REG_1, socks_fd));
	sb_emit(p, LD_MAP1());
	sb_emit(p, MOV_REG(BPF_REG_2, BPF_REG_10));
	sb_emit(p, ADD_IMM(BPF_REG_2, SB_KEY_OFF));
	sb_emit(p, CALL(BPF_FUNC_map_delete_elem));
	sb_jump(p, JNE_IMM(BPF_REG_0, 0, 0), SB_ALLOW); /* not there: nothing to give back */
	sb_lookup0(p, count_fd);
	sb_jump(p, JEQ_IMM(BPF_REG_0, 0, 0), SB_ALLOW);
	sb_emit(p, MOV_REG(BPF_REG_7, BPF_REG_0));
	sb_give_back(p);
	sb_jump(p, JA(0), SB_ALLOW);
}

/* release: the socket's file is gone. A socket that is not TCP, or a TCP
 * socket already closed (never connected, or its connection over), gives
 * its place back now. A TCP connection or listener still open lives on
 * without a file (an orphan sending what was queued, a listener's close),
 * and keeps its place until it reaches TCP_CLOSE (sockops). Always 1. */
static void sb_build_release(sb_prog *p, int socks_fd, int count_fd, int held_fd, uint32_t budget)
{
	(void)held_fd, (void)budget;
	sb_emit(p, MOV_REG(BPF_REG_6, BPF_REG_1));
	sb_cookie(p);
	sb_emit(p, LDX(BPF_W, BPF_REG_1, BPF_REG_6, offsetof(struct bpf_sock, protocol)));
	sb_jump(p, JNE_IMM(BPF_REG_1, IPPROTO_TCP, 0), SB_FREE);
	sb_emit(p, LDX(BPF_W, BPF_REG_1, BPF_REG_6, offsetof(struct bpf_sock, state)));
	sb_jump(p, JEQ_IMM(BPF_REG_1, TCP_CLOSE, 0), SB_FREE);
	sb_entry(p, socks_fd);
	sb_jump(p, JEQ_IMM(BPF_REG_0, 0, 0), SB_ALLOW);
	sb_mark(p, SB_RELEASED, SB_CLOSED);
	sb_free(p, socks_fd, count_fd);
	sb_ends(p);
}

/* Ask for the socket's state changes (BPF_SOCK_OPS_STATE_CB), keeping its
 * other callbacks. */
static void sb_watch_states(sb_prog *p)
{
	sb_emit(p, LDX(BPF_W, BPF_REG_2, BPF_REG_6,
	               offsetof(struct bpf_sock_ops, bpf_sock_ops_cb_flags)));
	sb_emit(p, OR_IMM(BPF_REG_2, BPF_SOCK_OPS_STATE_CB_FLAG));
	sb_emit(p, MOV_REG(BPF_REG_1, BPF_REG_6));
	sb_emit(p, CALL(BPF_FUNC_sock_ops_cb_flags_set));
}

/* sockops, for the group's TCP sockets:
 *   TCP_CONNECT_CB, TCP_LISTEN_CB: a socket that may outlive its file;
 *     its state changes are asked for, and a close it reached before (a
 *     failed connect) is forgotten.
 *   PASSIVE_ESTABLISHED_CB: a socket counted already (a simultaneous
 *     open) takes nothing more; a listener's child takes the place its
 *     handshake's packet reserved on this CPU (held, swapped to 0 in one
 *     step), else a place of its own; either way its cookie goes in and its
 *     state changes are asked for. Without a place (no reservation, and
 *     the budget full) the child is made uncounted, as sockops cannot
 *     refuse it: the netns settings that keep every child on the reserved
 *     path are in host/netns.c. An insert that fails (memory) keeps its
 *     place taken: the socket counts until the sandbox ends.
 *   STATE_CB to TCP_CLOSE: the connection is over; if its file is gone
 *     too, its place is given back.
 * Always 1. */
static void sb_build_sockops(sb_prog *p, int socks_fd, int count_fd, int held_fd, uint32_t budget)
{
	sb_emit(p, MOV_REG(BPF_REG_6, BPF_REG_1));
	sb_emit(p, LDX(BPF_W, BPF_REG_1, BPF_REG_6, offsetof(struct bpf_sock_ops, op)));
	sb_jump(p, JEQ_IMM(BPF_REG_1, BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB, 0), SB_PASSIVE);
	sb_jump(p, JEQ_IMM(BPF_REG_1, BPF_SOCK_OPS_STATE_CB, 0), SB_STATE);
	sb_jump(p, JEQ_IMM(BPF_REG_1, BPF_SOCK_OPS_TCP_CONNECT_CB, 0), SB_WATCH);
	sb_jump(p, JEQ_IMM(BPF_REG_1, BPF_SOCK_OPS_TCP_LISTEN_CB, 0), SB_WATCH);
	sb_jump(p, JA(0), SB_ALLOW);

	sb_place(p, SB_WATCH);
	sb_watch_states(p);
	sb_cookie(p);
	sb_entry(p, socks_fd);
	sb_jump(p, JEQ_IMM(BPF_REG_0, 0, 0), SB_ALLOW);
	sb_place(p, SB_REOPEN); /* r0: the entry of a socket open again */
	sb_emit(p, MOV_IMM(BPF_REG_1, ~SB_CLOSED));
	sb_emit(p, ATOMIC_AND(BPF_REG_0, BPF_REG_1, 0));
	sb_jump(p, JA(0), SB_ALLOW);

	sb_place(p, SB_STATE);
	sb_emit(p, LDX(BPF_W, BPF_REG_1, BPF_REG_6,
	               offsetof(struct bpf_sock_ops, args) + sizeof(__u32))); /* the new state */
	sb_jump(p, JNE_IMM(BPF_REG_1, TCP_CLOSE, 0), SB_ALLOW);
	sb_cookie(p);
	sb_entry(p, socks_fd);
	sb_jump(p, JEQ_IMM(BPF_REG_0, 0, 0), SB_ALLOW);
	sb_mark(p, SB_CLOSED, SB_RELEASED);
	sb_free(p, socks_fd, count_fd);

	sb_place(p, SB_PASSIVE);
	sb_watch_states(p);
	/* A socket of the group that is counted already (a simultaneous open:
	 * its own connect met a SYN, as a socket connecting to itself does)
	 * takes no second place. */
	sb_cookie(p);
	sb_entry(p, socks_fd);
	sb_jump(p, JNE_IMM(BPF_REG_0, 0, 0), SB_REOPEN);
	sb_lookup0(p, held_fd);
	sb_jump(p, JEQ_IMM(BPF_REG_0, 0, 0), SB_NO_PLACE);
	sb_emit(p, MOV_IMM(BPF_REG_1, 0));
	sb_emit(p, ATOMIC_XCHG(BPF_REG_0, BPF_REG_1, 0));
	sb_jump(p, JNE_IMM(BPF_REG_1, 0, 0), SB_INSERT); /* the reserved place */
	sb_place(p, SB_NO_PLACE);
	sb_take_place(p, count_fd, budget, SB_ALLOW);
	sb_place(p, SB_INSERT);
	sb_insert(p, socks_fd); /* the cookie is at SB_KEY_OFF */
	sb_jump(p, JA(0), SB_ALLOW);
	sb_ends(p);
}

/* ingress: a packet to a listening socket of the group passes only with a
 * place reserved for the child it may complete: this CPU's held flag when
 * set (an earlier packet's place, not yet used), else a place taken now
 * and held. 0 (drop) when there is none: the peer retransmits as when a
 * backlog is full. Every other packet passes. */
static void sb_build_ingress(sb_prog *p, int socks_fd, int count_fd, int held_fd, uint32_t budget)
{
	(void)socks_fd;
	sb_emit(p, LDX(BPF_DW, BPF_REG_1, BPF_REG_1, offsetof(struct __sk_buff, sk)));
	sb_jump(p, JEQ_IMM(BPF_REG_1, 0, 0), SB_ALLOW);
	sb_emit(p, CALL(BPF_FUNC_sk_fullsock));
	sb_jump(p, JEQ_IMM(BPF_REG_0, 0, 0), SB_ALLOW);
	sb_emit(p, LDX(BPF_W, BPF_REG_1, BPF_REG_0, offsetof(struct bpf_sock, state)));
	sb_jump(p, JNE_IMM(BPF_REG_1, TCP_LISTEN, 0), SB_ALLOW);
	sb_lookup0(p, held_fd);
	sb_jump(p, JEQ_IMM(BPF_REG_0, 0, 0), SB_DENY);
	sb_emit(p, MOV_REG(BPF_REG_8, BPF_REG_0));
	sb_emit(p, LDX(BPF_DW, BPF_REG_1, BPF_REG_8, 0));
	sb_jump(p, JNE_IMM(BPF_REG_1, 0, 0), SB_ALLOW); /* a place held already */
	sb_take_place(p, count_fd, budget, SB_DENY);
	sb_emit(p, ST_IMM(BPF_DW, BPF_REG_8, 0, 1));
	sb_jump(p, JA(0), SB_ALLOW);
	sb_ends(p);
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
	return UTIL_FAULT_CALL("sockbudget.map", sys_bpf(BPF_MAP_CREATE, &a, sizeof(a)));
}

static int sb_prog_load(unsigned type, unsigned expected, sb_prog *p, const char *name)
{
	if (p->n > SB_INSNS_MAX) {
		errno = E2BIG;
		return -1;
	}
	if (!sb_resolve(p)) {
		errno = EINVAL;
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
	return UTIL_FAULT_CALL("sockbudget.attach", sys_bpf(BPF_PROG_ATTACH, &a, sizeof(a)));
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
	_cleanup_close_ int held = sb_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, sizeof(uint32_t),
	                                         sizeof(uint64_t), 1, 0, "airlock_held");
	if (held < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "socket budget: creating its BPF map");

	static const struct {
		const char *name;
		unsigned type, attach;
		void (*build)(sb_prog *p, int socks, int count, int held, uint32_t budget);
	} progs[] = {
		{ "airlock_sk_new", BPF_PROG_TYPE_CGROUP_SOCK, BPF_CGROUP_INET_SOCK_CREATE,
		  sb_build_create },
		{ "airlock_sk_rel", BPF_PROG_TYPE_CGROUP_SOCK, BPF_CGROUP_INET_SOCK_RELEASE,
		  sb_build_release },
		{ "airlock_sk_ops", BPF_PROG_TYPE_SOCK_OPS, BPF_CGROUP_SOCK_OPS, sb_build_sockops },
		{ "airlock_sk_syn", BPF_PROG_TYPE_CGROUP_SKB, BPF_CGROUP_INET_INGRESS,
		  sb_build_ingress },
	};
	/* The release, sockops and ingress programs first: from the moment
	 * create is attached every insert has its delete. */
	static const int order[] = { 1, 2, 3, 0 };
	for (size_t k = 0; k < ARRAY_SIZE(order); k++) {
		int i = order[k];
		sb_prog p;
		sb_init(&p);
		progs[i].build(&p, socks, count, held, budget);
		_cleanup_close_ int fd = sb_prog_load(progs[i].type, progs[i].attach, &p, progs[i].name);
		if (fd < 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
			                         "socket budget: the kernel refused its BPF program %s "
			                         "(cgroup BPF with atomic fetch, kernel 5.12 or later, is needed)",
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
