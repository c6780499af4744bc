/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The user namespace, both halves. The service's: a host id of the
 * sandbox's own (a slot in the host-wide lock file) and the id maps it
 * writes once init has made the namespace. The child's: init becomes that
 * host id and makes the namespace; init and every command then drop to the
 * sandbox user with no capabilities and the seccomp filter. The child's half
 * runs between fork and exec: system calls only, no allocation
 * (native_internal.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "exec/native/native_internal.h"
#include "exec/native/service.h"
#include "util/syscalls.h"
#include "util/util.h"

/* ---- the service's half ---------------------------------------------------- */

/* A slot is ours when our bitmap says it is free (our own locks never
 * conflict with each other) and the host-wide lock on its byte is granted
 * (no other service holds it). */
int native_user_slot_take(airlock_native *n, uint32_t *ret)
{
	uint32_t start = 0;
	util_random(&start, sizeof(start));
	for (uint32_t i = 0; i < NATIVE_HOST_ID_SLOTS; i++) {
		uint32_t s = (start + i) % NATIVE_HOST_ID_SLOTS;
		if (n->slots[s / 8] & (1u << (s % 8)))
			continue;
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = s, .l_len = 1 };
		if (fcntl(n->id_lock_fd, F_OFD_SETLK, &fl) < 0) {
			if (errno == EAGAIN || errno == EACCES || errno == EINTR)
				continue; /* another service's sandbox has it */
			return -errno;
		}
		n->slots[s / 8] |= (unsigned char)(1u << (s % 8));
		*ret = s;
		return 0;
	}
	return -EAGAIN;
}

void native_user_slot_release(airlock_native *n, uint32_t slot)
{
	struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = slot, .l_len = 1 };
	(void)fcntl(n->id_lock_fd, F_OFD_SETLK, &fl);
	n->slots[slot / 8] &= (unsigned char)~(1u << (slot % 8));
}

static int write_file_at(int dirfd, const char *name, const char *data)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(data);
	ssize_t n = write(fd, data, len);
	int e = n == (ssize_t)len ? 0 : (n < 0 ? errno : EIO);
	close(fd);
	return -e;
}

int native_user_write_id_maps(pid_t pid, uid_t host_id, airlock_error *err)
{
	char dir[64], map[64];
	snprintf(dir, sizeof(dir), "/proc/%d", (int)pid);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno, "user namespace");
	/* One id each way: the sandbox user and nothing else. Root inside is
	 * unmapped, and setgroups is denied for good. */
	snprintf(map, sizeof(map), "%u %u 1\n", NATIVE_SANDBOX_UID, (unsigned)host_id);
	int r = write_file_at(dfd, "setgroups", "deny");
	if (r == 0)
		r = write_file_at(dfd, "uid_map", map);
	snprintf(map, sizeof(map), "%u %u 1\n", NATIVE_SANDBOX_GID, (unsigned)host_id);
	if (r == 0)
		r = write_file_at(dfd, "gid_map", map);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, -r,
		                         "user namespace: id maps");
	return 0;
}

/* ---- the child's half -------------------------------------------------------- */

int native_user_enter(int sync_fd, uid_t host_id, uint64_t nofile)
{
	/* Become the sandbox's own host id before creating the user namespace:
	 * the namespace's per-user counts (pending signals, message queues,
	 * inotify and fanotify instances, processes) are then charged to this
	 * sandbox's id, not to host root's, which every sandbox and every root
	 * daemon share. The limits set first become the namespace's ceilings. */
	const struct {
		int resource;
		rlim_t value;
	} ceilings[] = {
		{ RLIMIT_SIGPENDING, 4096 },
		{ RLIMIT_MSGQUEUE, 819200 },
		{ RLIMIT_MEMLOCK, 8u << 20 },
		{ RLIMIT_NOFILE, nofile },
	};
	for (size_t i = 0; i < ARRAY_SIZE(ceilings); i++) {
		struct rlimit rl = { ceilings[i].value, ceilings[i].value };
		if (setrlimit(ceilings[i].resource, &rl) < 0)
			return NATIVE_STEP_USERNS;
	}
	if (sys_setgroups(0, NULL) < 0 || sys_setresgid(host_id, host_id, host_id) < 0 ||
	    sys_setresuid(host_id, host_id, host_id) < 0)
		return NATIVE_STEP_USERNS;

	/* The user namespace comes last: every mount and the network namespace
	 * stay owned by the host's user namespace, so nothing inside can change
	 * them even with a capability in its own namespace. */
	if (unshare(CLONE_NEWUSER) < 0)
		return NATIVE_STEP_USERNS;
	native_child_send(sync_fd, NATIVE_MSG_MAP, 0, 0);
	if (!native_child_recv(sync_fd, NATIVE_MSG_MAPPED))
		return NATIVE_STEP_SYNC;
	return 0;
}

int native_become_sandbox_user(const exec_seccomp *s, int last_cap)
{
	/* The bounding set first, while CAP_SETPCAP is still held: after it no
	 * execve can give a capability back. */
	for (int cap = 0; cap <= last_cap; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return NATIVE_STEP_DROP;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return NATIVE_STEP_DROP;
	/* Raw system calls: glibc's wrappers broadcast the change to every
	 * thread the service had, which a clone3 child does not have, and
	 * could wait for them forever. */
	if (sys_setresgid(NATIVE_SANDBOX_GID, NATIVE_SANDBOX_GID, NATIVE_SANDBOX_GID) < 0 ||
	    sys_setresuid(NATIVE_SANDBOX_UID, NATIVE_SANDBOX_UID, NATIVE_SANDBOX_UID) < 0)
		return NATIVE_STEP_DROP;
	/* A uid change inside a user namespace whose uid 0 is unmapped does not
	 * clear capabilities by itself (the kernel compares with the namespace's
	 * root), so every set is emptied explicitly. */
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof(data));
	if (sys_capset(&hdr, data) < 0)
		return NATIVE_STEP_DROP;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return NATIVE_STEP_DROP;
	if (exec_seccomp_install(s) < 0)
		return NATIVE_STEP_SECCOMP;
	return 0;
}
