/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EXEC_KILL_H
#define AIRLOCK_EXEC_KILL_H

/*
 * Why a command was killed, decided from what execute observed and nothing
 * else: a pure function, so the order between the reasons is written once
 * (here) and tested without root (tests/test_native_kill.c). Execute fills
 * the observations each time round its poll loop while no reason is set
 * yet, and once more after every process is gone (the rule at exit); the
 * first reason found wins, and later ones are consequences of the kill.
 */

#include <stdbool.h>
#include <stdint.h>

#include "airlock/types.h"

/* How long the workspace must stay full while the command runs before it
 * is killed with DISK (docs/native.md, "Kill reasons"): a filler that keeps trying
 * is killed, one that stops at ENOSPC exits first and the rule at its exit
 * decides, whatever the 20 ms sampling caught. */
#define EXEC_DISK_HOLD_MS 500

typedef struct exec_observed {
	/* While it runs (one round of the poll loop). */
	bool output_cap_hit; /* stdout or stderr reached maximum_output_bytes */
	bool exited;         /* the command itself has exited */
	int64_t now;         /* monotonic ms of this round */
	int64_t expiry_at;   /* the environment's lease ends (monotonic ms) */
	int64_t timeout_at;  /* the command's own timeout (monotonic ms) */
	bool oom_killed;     /* the memory cgroup's oom_kill count moved */
	bool pids_hit;       /* the pids cgroup's max events count moved */
	bool disk_full;      /* the workspace volume is full now */
	bool disk_moved;     /* it was not full, or its counts moved, at some sample */
	int64_t disk_full_since; /* first of the full samples now running (monotonic ms) */
	bool cancelled;      /* the caller cancelled */
	/* The sandbox was destroyed under the command (a destroy's kill):
	 * CANCELLED even when the command has exited by then, since it
	 * exited of that kill. */
	bool destroyed;
	bool shutdown;       /* the service is stopping */
	/* After every process is gone (the rule at exit). */
	bool finished;       /* set: this is the decision at exit, not in the loop */
	bool never_ran;      /* the starter reported the command was never executed */
	bool exit_failed;    /* it exited non-zero or by a signal */
	bool full_after;     /* the volume is full after it */
	bool changed;        /* the workspace differs from the walk before */
} exec_observed;

/* The reason, or AIRLOCK_KILL_NONE. */
airlock_kill_reason exec_kill_decide(const exec_observed *o);

#endif
