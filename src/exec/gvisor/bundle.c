/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The OCI bundle of one sandbox: config.json, generated from the spec and
 * the host paths this mechanism owns (gvisor_internal.h), never from
 * anything the tenant names. The runtime is runsc 20221219 (OCI 1.0.2).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "airlock/tiers.h"
#include "airlock/guest.h"
#include "airlock/json.h"
#include "exec/gvisor/gvisor_internal.h"
#include "exec/io.h"
#include "exec/kobjects.h"
#include "util/util.h"

const char *const gv_bundle_files[3] = { "config.json", "sentry.pid", "exec.pid" };

static json_t *rlimit(const char *type, int64_t value)
{
	return json_pack("{s:s, s:I, s:I}", "type", type, "hard", (json_int_t)value, "soft",
	                 (json_int_t)value);
}

static json_t *mount_entry(const char *dest, const char *type, const char *source,
                           json_t *options)
{
	return json_pack("{s:s, s:s, s:s, s:o}", "destination", dest, "type", type, "source", source,
	                 "options", options);
}

int gv_bundle_write(const airlock_gvisor *g, gv_sandbox *b, const char *image_path,
                    const airlock_environment_spec *spec, airlock_error *err)
{
	(void)g;
	/* The command environment is the sandbox's: every command inherits it
	 * from the container (runsc exec merges its --env over it). */
	char **envp = NULL;
	size_t n_env = 0;
	int r = exec_env_build(&spec->environment, b->network_host, &envp, &n_env, err);
	json_t *env = json_array();
	for (size_t i = 0; r == 0 && env && i < n_env; i++)
		if (json_array_append_new(env, json_string(envp[i])) < 0)
			r = airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
			                      "an environment variable is not UTF-8 text");
	for (size_t i = 0; envp && i < n_env; i++)
		free(envp[i]);
	free(envp);
	if (r < 0) {
		json_decref(env);
		return r;
	}
	_cleanup_free_ char *ws_path = NULL;
	if (asprintf(&ws_path, "%s/workspace", b->dir) < 0)
		ws_path = NULL;
	const airlock_resource_limits *l = &spec->limits;
	/* No capability in any set, for init and (runsc exec copies the
	 * container's) for every command; no new privileges. */
	json_t *caps = json_pack("{s:[], s:[], s:[], s:[], s:[]}", "bounding", "effective",
	                         "inheritable", "permitted", "ambient");
	/* pids_max: RLIMIT_NPROC, which gVisor counts per uid over the
	 * sandbox's own processes and threads (measured: a fork loop as uid
	 * 1000 stops at exactly the limit); init is root's and not counted.
	 * One above pids_max: gVisor tells no one that a fork failed, so the
	 * service sees the limit met only by a count past it (execute.c,
	 * pids_reached). At pids_max the command holds what native allows it
	 * (there init is in the cgroup's count, here the wrapper is in the
	 * uid's) and runs on; the fork that native would refuse succeeds here
	 * and is what kills the command with PIDS, within GV_PIDS_ASK_MS.
	 * RLIMIT_FSIZE: no one file larger than the workspace, as on native.
	 * RLIMIT_NOFILE: the sandbox's share, as on native (exec_sandbox_nofile;
	 * airlock/caps.h says why): with the allowlist each socket is a host
	 * socket of the sentry's, whose count bounds the host TCP memory the
	 * sandbox holds past its cgroup's cap. */
	json_t *rlimits = json_pack("[o, o, o, o]", rlimit("RLIMIT_NPROC", l->pids_max + 1),
	                            rlimit("RLIMIT_FSIZE", l->workspace_bytes),
	                            rlimit("RLIMIT_NOFILE", (int64_t)exec_sandbox_nofile(l)),
	                            rlimit("RLIMIT_CORE", 0));
	json_t *process = json_pack(
		"{s:b, s:{s:i, s:i}, s:[s, s], s:o, s:s, s:o, s:o, s:b}", "terminal", 0, "user", "uid", 0,
		"gid", 0, "args", AIRLOCK_GUEST_PROGRAM, "init", "env", env, "cwd", "/", "capabilities",
		caps, "rlimits", rlimits, "noNewPrivileges", 1);
	/* /tmp and /dev/shm are gVisor's own tmpfs, in the sentry's memory:
	 * charged to the sandbox's memory cgroup. Each is bounded at
	 * memory_bytes and is 1777, as on native (exec/native/mounts.c), so
	 * that POSIX shared memory and semaphores (Python's multiprocessing
	 * Lock, Pool and shared_memory, sem_open, shm_open) work for the
	 * sandbox user: gVisor's own /dev/shm is a directory of its /dev,
	 * root's and 0755. /dev/shm is noexec, as on native. No /sys of the
	 * host's: gVisor mounts a synthetic one of its own (its CPUs, lo, an
	 * empty cgroup directory). The workspace is the volume, through the
	 * gofer. */
	char tmpfs_size[48];
	snprintf(tmpfs_size, sizeof(tmpfs_size), "size=%" PRId64, l->memory_bytes);
	json_t *mounts = json_pack(
		"[o, o, o, o]", mount_entry("/proc", "proc", "proc", json_pack("[s, s, s]", "nosuid", "noexec", "nodev")),
		mount_entry("/tmp", "tmpfs", "tmpfs",
		            json_pack("[s, s, s, s]", "nosuid", "nodev", "mode=1777", tmpfs_size)),
		mount_entry("/dev/shm", "tmpfs", "tmpfs",
		            json_pack("[s, s, s, s, s]", "nosuid", "nodev", "noexec", "mode=1777", tmpfs_size)),
		mount_entry(AIRLOCK_WORKSPACE_ROOT, "bind", ws_path ? ws_path : "",
		            json_pack("[s, s, s, s]", "rbind", "rw", "nosuid", "nodev")));
	/* The bridge's directory at the plan's target (exec/bridge.h,
	 * provision.c), read-only (connecting needs no write), last. */
	_cleanup_free_ char *bridge_src = NULL;
	if (mounts && b->bridge_at) {
		if (asprintf(&bridge_src, "%s/" GV_BRIDGE_DIR, b->dir) < 0)
			bridge_src = NULL;
		if (!bridge_src ||
		    json_array_append_new(mounts, mount_entry(b->bridge_at, "bind", bridge_src,
		                                              json_pack("[s, s, s, s, s]", "rbind",
		                                                        "ro", "nosuid", "nodev",
		                                                        "noexec"))) < 0) {
			json_decref(mounts);
			mounts = NULL;
		}
	}
	/* The network namespace entry only for deny: for the allowlist runsc
	 * runs inside the namespace the service made (setns before exec) with
	 * host networking, and an entry would make it create another. */
	json_t *ns = json_pack("[{s:s}, {s:s}, {s:s}, {s:s}]", "type", "pid", "type", "ipc", "type",
	                       "uts", "type", "mount");
	if (ns && !b->network_host)
		json_array_append_new(ns, json_pack("{s:s}", "type", "network"));
	json_t *cfg = json_pack(
		"{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:{s:o}}", "ociVersion", "1.0.2", "process", process,
		"root", "path", image_path, "readonly", 1, "hostname", "sandbox", "mounts", mounts,
		"linux", "namespaces", ns);
	_cleanup_free_ char *text = cfg && ws_path ? json_dumps(cfg, JSON_COMPACT) : NULL;
	json_decref(cfg);
	if (!text)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "its text");
	_cleanup_close_ int fd = openat(b->dir_fd, "config.json",
	                                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || util_write_all(fd, text, strlen(text)) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "writing config.json");
	return 0;
}
