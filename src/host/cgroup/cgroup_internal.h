/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_HOST_CGROUP_INTERNAL_H
#define AIRLOCK_HOST_CGROUP_INTERNAL_H

/*
 * Inside the cgroup driver (cgroup.h has the contract). The files:
 *
 *   files.c    reading and writing cgroupfs files, listing groups
 *   layout.c   where the service's cgroups are and which mode that is,
 *              read once per process
 *   group.c    a sandbox's groups: create, enter, destroy
 *   limits.c   writing a mode's limits table, reading the counters
 *   kill.c     killing what is in a group and waiting until it is empty
 *   reclaim.c  reclaiming kernel memory before the kernel kills for it
 *   sweep.c    removing what a crashed run left
 *   v1.c       the hybrid mode: v1 controllers, the v2 mount for kill
 *   v2.c       the pure v2 mode
 *
 * What differs between the modes is in a cg_driver each (v1.c, v2.c), found
 * through cg_drivers in layout.c; nothing outside those two files asks which
 * mode it is in. Dropping v1 one day is deleting v1.c and its entry there.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "airlock/types.h"
#include "host/cgroup/cgroup.h"

/* The leaf the service moves itself into on pure v2 (v2.c). It does not
 * start with HOST_CGROUP_PREFIX, so the sweep never touches it. */
#define CG_SERVICE_LEAF "airlockd"

/* A CFS period of 100 ms; the quota is cpu_millicores * 100 us of it. The
 * kernel's smallest quota is 1 ms, so fewer than 10 millicores round up. */
#define CG_CPU_PERIOD_US 100000
#define CG_CPU_QUOTA_MIN_US 1000

/* The caps on what is read from cgroupfs and on pids.max are in
 * airlock/caps.h (AIRLOCK_CG_*). */

/* How long the sweep waits for one leftover group to empty. */
#define CG_SWEEP_WAIT_MS 5000

enum cg_kind { CG_UNIFIED, CG_MEMORY, CG_PIDS, CG_CPU, CG__KIND_MAX };
extern const char *const cg_kind_name[CG__KIND_MAX];

enum cg_leaf { CG_INIT, CG_CMD, CG__LEAF_MAX };
extern const char *const cg_leaf_name[CG__LEAF_MAX];

/* Counter files: in the sandbox group and (on v1, where the kernel keeps
 * these counters only in the cgroup of the task concerned) in each leaf. */
enum cg_counter { CG_OOM, CG_PIDS_EVENTS, CG__COUNTER_MAX };
enum { CG_AT_SANDBOX, CG_AT_INIT, CG_AT_CMD, CG__AT_MAX };

/* Tests only (host_cgroup_testing_force_kill_fallback). */
extern bool cg_force_kill_fallback;

typedef struct cg_driver cg_driver;

/* Where the service sits: the directory of its own cgroup in each
 * hierarchy the mode uses (NULL where unused). */
typedef struct cg_layout {
	host_cgroup_mode mode;
	const cg_driver *drv;
	char *dir[CG__KIND_MAX];
} cg_layout;

/* What /proc/self/cgroup says, per hierarchy, before mountinfo places it. */
typedef struct cg_want {
	char *ctl;  /* v1: the hierarchy's controller list, "cpu,cpuacct"; v2: "" */
	char *path; /* the service's cgroup in it */
} cg_want;

typedef struct cg_hier {
	bool used;
	bool v2;      /* a cgroup2 hierarchy: cgroup.events, maybe cgroup.kill */
	bool created; /* we made the sandbox directory: ours to remove */
	int own_fd;
	int sandbox_fd; /* holds LOCK_EX for the group's lifetime */
	int leaf_fd[CG__LEAF_MAX];
} cg_hier;

struct host_cgroup {
	const cg_driver *drv; /* the host's mode */
	bool kill_file; /* the v2 groups have cgroup.kill */
	char name[sizeof(HOST_CGROUP_PREFIX) + AIRLOCK_ENVIRONMENT_ID_MAX];
	cg_hier h[CG__KIND_MAX];
	/* Kept open and read with pread: execute polls them on every event. */
	int counter_fd[CG__COUNTER_MAX][CG__AT_MAX];
	int cmd_events_fd; /* cmd's cgroup.events in the v2 hierarchy, or -1 */
	int64_t memory_bytes; /* the limit, for reclaim.c */
	uint64_t kmem_low;    /* reclaim.c: kernel memory's low since the last reclaim */
};

/* One limit file a mode writes (limits.c applies a mode's table in order). */
typedef struct cg_limit {
	int kind;         /* the controller; cg_ctl gives the hierarchy */
	const char *file; /* in the sandbox group */
	void (*value)(const airlock_resource_limits *lim, char *out, size_t size);
	bool in_leaves;   /* written in init and cmd too */
	bool optional;    /* a missing file is fine */
	/* A missing file: write absent_value to absent_file instead, or refuse
	 * (EXECUTION_UNAVAILABLE) with absent_refusal as the reason. */
	const char *absent_file;
	void (*absent_value)(const airlock_resource_limits *lim, char *out, size_t size);
	const char *absent_refusal;
} cg_limit;

/* What differs between the modes. */
struct cg_driver {
	host_cgroup_mode mode;
	/* From what /proc/self/cgroup and mountinfo said (l->dir filled where
	 * mounted): 1 when this is the host's mode (l may be adjusted), 0 when
	 * it is not, < 0 with a reason a person can act on when it should be
	 * and cannot. */
	int (*claim)(const cg_want want[CG__KIND_MAX], cg_layout *l, airlock_error *err);
	/* Whether hierarchy k holds the sandbox's groups. */
	bool (*kind_used)(const cg_layout *l, int k);
	/* Every controller's files are in the unified hierarchy. */
	bool controllers_in_unified;
	/* Run once the service's cgroups are open, before the sandbox's are
	 * made; NULL for nothing. */
	int (*prepare)(host_cgroup *cg, airlock_error *err);
	const cg_limit *limits;
	size_t n_limits;
	/* The counters' files, and whether the leaves keep their own. */
	const char *counter_file[CG__COUNTER_MAX];
	bool counters_in_leaves;
	/* Whether any process is in the subtree at dfd, for a hierarchy without
	 * cgroup.events; NULL when every hierarchy of the mode has it. */
	int (*walk_populated)(int dfd, int depth, bool *ret);
	/* reclaim.c, in the sandbox group: the memory in use, the kernel
	 * memory (a file holding one number, or the key in a keyed file), and
	 * the file whose write reclaims from outside (given the bytes wanted). */
	const char *usage_file;
	const char *kmem_file;
	const char *kmem_key;
	const char *reclaim_file;
};

extern const cg_driver cg_driver_hybrid; /* v1.c */
extern const cg_driver cg_driver_v2;     /* v2.c */

/* ---- files.c ---------------------------------------------------------------- */

bool cg_id_valid(const char *id);
void cg_close(int *fd);
int cg_open_dir(int dfd, const char *name);
int cg_flock(int fd, int op);
void cg_sleep_us(long us);
int cg_write(int dfd, const char *file, const char *value);
int cg_read(int dfd, const char *file, char *buf, size_t size);
int cg_keyed_fd(int fd, const char *key, uint64_t *ret);
bool cg_has_word(const char *list, const char *word, char sep);
int cg_pid_cmp(const void *a, const void *b);
int cg_procs_read(int dfd, size_t max, pid_t **ret, size_t *ret_n);

/* Subdirectory names of dfd (cgroups are directories; control files are
 * not), filtered by prefix when one is given. */
typedef struct cg_names {
	char **v;
	size_t n;
} cg_names;

void cg_names_clear(cg_names *l);
bool cg_names_has(const cg_names *l, const char *s);
int cg_names_add(cg_names *l, const char *s);
int cg_subdirs(int dfd, const char *prefix, cg_names *ret);

/* ---- layout.c --------------------------------------------------------------- */

/* The host's layout, read once per process (a forked child reads its own);
 * EXECUTION_UNAVAILABLE with a reason a person can act on (for `airlock
 * doctor`). A failure is not remembered: the next call reads again. */
int cg_layout_get(const cg_layout **ret, airlock_error *err);

/* ---- group.c ---------------------------------------------------------------- */

/* The hierarchy that holds a controller's files. */
cg_hier *cg_ctl(host_cgroup *cg, int kind);

/* ---- limits.c --------------------------------------------------------------- */

int cg_apply_limits(host_cgroup *cg, const airlock_resource_limits *lim, airlock_error *err);
int cg_open_counters(host_cgroup *cg, airlock_error *err);
void cg_value_zero(const airlock_resource_limits *lim, char *out, size_t size);
void cg_value_memory(const airlock_resource_limits *lim, char *out, size_t size);
void cg_value_pids(const airlock_resource_limits *lim, char *out, size_t size);
void cg_value_cpu_quota(const airlock_resource_limits *lim, char *out, size_t size);
void cg_value_cpu_period(const airlock_resource_limits *lim, char *out, size_t size);
void cg_value_cpu_max(const airlock_resource_limits *lim, char *out, size_t size);

/* ---- kill.c ----------------------------------------------------------------- */

int cg_kill_wait(int dfd, bool v2, bool use_kill_file, bool recurse,
                 int (*walk_populated)(int dfd, int depth, bool *ret), int64_t deadline,
                 bool *ret_empty);
int cg_remove_tree(int parent, const char *name, int depth, int64_t deadline);
int cg_teardown(host_cgroup *cg, int64_t deadline, airlock_error *err);

#endif
