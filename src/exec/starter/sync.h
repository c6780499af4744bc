/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EXEC_STARTER_SYNC_H
#define AIRLOCK_EXEC_STARTER_SYNC_H

/*
 * The sync protocol between the service and the first processes of a
 * native sandbox (init, each command's launcher, and the sealed starter in
 * its init and command modes): fixed-size messages over a SOCK_SEQPACKET
 * pair. A failure is (step, errno): init and the launcher report theirs on
 * util/spawn's failure pipe, as every child spawn starts does (the step a
 * NATIVE_STEP_*); the sealed program, once executed, has no such pipe and
 * sends NATIVE_MSG_FAILED here. The starter speaks this protocol too,
 * which is why it lives beside the starter and not inside the mechanism.
 */

#include <stdint.h>

/* Sync messages between the service and a child (SOCK_SEQPACKET). */
enum {
	NATIVE_MSG_GO = 1,     /* service -> child: proceed */
	NATIVE_MSG_MAP,        /* init -> service: my user namespace exists; map it */
	NATIVE_MSG_MAPPED,     /* service -> init: uid_map and gid_map written */
	NATIVE_MSG_READY,      /* init -> service: the sandbox is up */
	NATIVE_MSG_PID,        /* cmd helper -> service: the command's pid is `value` */
	NATIVE_MSG_FAILED,     /* starter -> service: `step` failed with errno `value` */
};

typedef struct native_msg {
	int32_t kind;
	int32_t step;
	int32_t value;
} native_msg;

/* Steps, for messages that name where setup failed. */
enum {
	NATIVE_STEP_SYNC = 1,
	NATIVE_STEP_PRIVATE,
	NATIVE_STEP_CGROUPNS,
	NATIVE_STEP_STAGING,
	NATIVE_STEP_ROOT,
	NATIVE_STEP_PROC,
	NATIVE_STEP_DEV,
	NATIVE_STEP_SHM,
	NATIVE_STEP_TMP,
	NATIVE_STEP_WORKSPACE,
	NATIVE_STEP_PIVOT,
	NATIVE_STEP_LOOPBACK,
	NATIVE_STEP_HOSTNAME,
	NATIVE_STEP_USERNS,
	NATIVE_STEP_DROP,
	NATIVE_STEP_SECCOMP,
	NATIVE_STEP_SETNS,
	NATIVE_STEP_FORK,
	NATIVE_STEP_STDIO,
	NATIVE_STEP_CWD,
	NATIVE_STEP_EXEC,
	NATIVE_STEP_INIT, /* init's own program (starter.h) */
	NATIVE_STEP_BRIDGE, /* the bridge socket's mount (exec/bridge.h) */
	NATIVE_STEP__MAX,
};

#endif
