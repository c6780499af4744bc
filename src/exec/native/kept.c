/* SPDX-License-Identifier: Apache-2.0 */
/* files_changed's kept snapshot (service.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/fanotify.h>
#include <unistd.h>

#include "exec/native/service.h"

#include "airlock/caps.h"

atomic_int native_kept_groups;

/* ---- files_changed's kept snapshot ------------------------------------------
 * Between two commands nothing runs in the sandbox (every process of a
 * command is killed before its result is computed), so the volume can
 * change only through the service's workspace handle (a tool's write).
 * The walk after one command is therefore the walk before the next one,
 * unless something wrote in between: a fanotify group with a mark on the
 * volume's filesystem (the superblock: every mount of it, every path)
 * is armed before the after-walk, and any event it holds at the next
 * command's start, or an overflow, or any doubt, means walk again. The
 * walk itself only reads, and reads are not in the mask. The group reports
 * file handles (FAN_REPORT_FID), never open descriptors, lives as long as
 * the sandbox and is drained before each after-walk (native_kept_arm).
 * Groups count against host root's fs.fanotify.max_user_groups (128 by default),
 * which every root daemon shares, so one service keeps at most
 * AIRLOCK_NATIVE_KEPT_GROUPS_MAX of them; past that, and where fanotify is
 * missing, both walks are made, as before. */

#define KEPT_FAN_MASK                                                                              \
	(FAN_MODIFY | FAN_ATTRIB | FAN_CLOSE_WRITE | FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM |    \
	 FAN_MOVED_TO | FAN_DELETE_SELF | FAN_MOVE_SELF | FAN_ONDIR)

/* Arm the sandbox's group just before an after-walk: made at the first
 * command, then kept for the sandbox's life and drained instead, because
 * closing a fanotify group waits for the kernel's notification grace
 * period (measured here: 0.3 ms per make and close on average, 16 ms at
 * worst), which every execute would pay. The command's processes are all
 * gone by now and fanotify queues an event synchronously with the write
 * that makes it, so what remains in the queue after the drain is a change
 * made after this point. False when it cannot be armed (no fanotify, or a
 * queue that does not empty within AIRLOCK_KEPT_DRAIN_READS_MAX reads,
 * airlock/caps.h): the next command walks twice. */

bool native_kept_arm(sandbox *b, int rootfd)
{
	if (b->kept_fan < 0) {
		if (atomic_fetch_add(&native_kept_groups, 1) >= AIRLOCK_NATIVE_KEPT_GROUPS_MAX) {
			atomic_fetch_sub(&native_kept_groups, 1);
			return false;
		}
		int fan = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_CLOEXEC | FAN_NONBLOCK,
		                        O_RDONLY | O_CLOEXEC);
		if (fan < 0) {
			atomic_fetch_sub(&native_kept_groups, 1);
			return false;
		}
		/* "." beneath the root: the root descriptor is O_PATH, which
		 * fanotify_mark refuses as the object itself (EBADF). */
		if (fanotify_mark(fan, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, KEPT_FAN_MASK, rootfd,
		                  ".") < 0) {
			close(fan);
			atomic_fetch_sub(&native_kept_groups, 1);
			return false;
		}
		b->kept_fan = fan;
		return true;
	}
	char buf[AIRLOCK_KEPT_DRAIN_READ_BYTES];
	for (int i = 0; i < AIRLOCK_KEPT_DRAIN_READS_MAX; i++) {
		ssize_t got = read(b->kept_fan, buf, sizeof(buf));
		if (got < 0 && errno == EAGAIN)
			return true;
		if (got <= 0 && errno != EINTR)
			return false;
	}
	return false;
}

/* Take the kept snapshot if the volume has not changed since it was made;
 * false (and nothing taken) otherwise. */
bool native_kept_take(airlock_native *n, sandbox *b, airlock_snapshot *ret)
{
	pthread_mutex_lock(&n->m.lock);
	airlock_snapshot s = b->kept;
	bool valid = b->kept_valid;
	b->kept = (airlock_snapshot){ 0 };
	b->kept_valid = false;
	pthread_mutex_unlock(&n->m.lock);
	if (!valid || b->kept_fan < 0) {
		snapshot_clear(&s);
		return false;
	}
	/* Any event at all, or any error but "none queued", is a change (the
	 * read consumes some events; the next arm drains the rest). */
	char buf[AIRLOCK_KEPT_PROBE_READ_BYTES];
	ssize_t got = read(b->kept_fan, buf, sizeof(buf));
	bool clean = got < 0 && errno == EAGAIN;
	if (!clean) {
		snapshot_clear(&s);
		return false;
	}
	*ret = s;
	return true;
}

/* A kept snapshot stays in the service while the sandbox is idle, one per
 * sandbox, of at most AIRLOCK_NATIVE_KEPT_BYTES_MAX (airlock/caps.h says
 * why). */

void native_kept_store(airlock_native *n, sandbox *b, airlock_snapshot *s)
{
	size_t bytes = s->alloc * sizeof(*s->entries);
	for (size_t i = 0; i < s->n && bytes <= AIRLOCK_NATIVE_KEPT_BYTES_MAX; i++)
		bytes += strlen(s->entries[i].path) + 1;
	if (bytes > AIRLOCK_NATIVE_KEPT_BYTES_MAX)
		return; /* the caller clears s */
	pthread_mutex_lock(&n->m.lock);
	airlock_snapshot old = b->kept;
	b->kept = *s;
	b->kept_valid = true;
	pthread_mutex_unlock(&n->m.lock);
	*s = (airlock_snapshot){ 0 };
	snapshot_clear(&old);
}
