/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reclaiming a sandbox's kernel memory before the kernel kills for it
 * (host_cgroup_reclaim_kernel in cgroup.h).
 *
 * Why the kernel does not do it alone (measured on 6.18, docs/design-notes.md,
 * "Reclaimable kernel memory"): a loop creating and deleting files leaves
 * one negative dentry per name, charged to the group and reclaimable by the
 * dcache shrinker. When the charge that meets the limit is made under
 * GFP_NOFS (ext4 allocates a new inode inside a journal handle), the
 * group's reclaim may not enter filesystem shrinkers, frees nothing, and
 * the memory cgroup's OOM killer kills the command (the kernel spares
 * GFP_NOFS only from the global OOM killer, not from a cgroup's). So the
 * service reclaims from outside, in an ordinary GFP_KERNEL context, once
 * the group is within a quarter of its limit and its kernel memory has
 * grown by an eighth of the limit since the last time: then the command
 * meets the limit only with memory that reclaim cannot free, and MEMORY
 * still means the limit was reached.
 *
 * The reclaim write (v1 memory.force_empty, v2 memory.reclaim) can run as
 * long as the group keeps refilling what it frees, so it is made by a
 * child (util/spawn, a child_fn) that is killed after CG_RECLAIM_WAIT_MS:
 * the kernel stops both writes at a pending fatal signal.
 */
#include "host/cgroup/cgroup_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/spawn.h"
#include "util/util.h"

/* Reclaim starts when usage is within limit / CG_RECLAIM_HEADROOM_SHARE of
 * the limit, and again only after kernel memory has grown by half that
 * over its lowest reading since the last reclaim: the reclaim rate is bound
 * by the growth, and memory that cannot be reclaimed does not trigger it
 * again and again. At 20 MiB the headroom is 5 MiB, about 27,000 dentries:
 * the create/delete loop fills it in a few hundred milliseconds, many
 * polls of the execute loop (20 ms). */
#define CG_RECLAIM_HEADROOM_SHARE 4
/* How long one reclaim may take before its writer is killed. */
#define CG_RECLAIM_WAIT_MS 250

static int cg_read_u64(int dfd, const char *file, const char *key, uint64_t *ret)
{
	_cleanup_close_ int fd = openat(dfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (key)
		return cg_keyed_fd(fd, key, ret);
	char buf[32];
	int r = util_pread_small(fd, buf, sizeof(buf));
	if (r < 0)
		return r;
	buf[strcspn(buf, "\n")] = 0;
	int64_t v;
	if (!util_parse_i64(buf, &v) || v < 0)
		return -EPROTO;
	*ret = (uint64_t)v;
	return 0;
}

typedef struct bounded_write {
	int fd;
	const char *value;
	size_t len;
} bounded_write;

/* In the child (spawn's child_fn): the one write. Every signal stays
 * blocked (spawn blocks them across the fork and a child_fn keeps them
 * so): only the SIGKILL of cg_write_bounded ends it early. */
static int bounded_write_child(void *ctx, int report_fd)
{
	const bounded_write *w = ctx;
	ssize_t n = write(w->fd, w->value, w->len);
	if (n != (ssize_t)w->len)
		spawn_child_fail(report_fd, 1, n < 0 ? errno : EIO);
	return 0;
}

/* Write value to fd from a child killed after CG_RECLAIM_WAIT_MS. */
static int cg_write_bounded(int fd, const char *value)
{
	bounded_write w = { .fd = fd, .value = value, .len = strlen(value) };
	/* The child keeps the one descriptor it writes (spawn closes the rest). */
	const spawn_options so = { .child_fn = bounded_write_child, .child_fn_ctx = &w,
		                   .keep = &w.fd, .n_keep = 1, .async = true };
	_cleanup_spawn_child_ spawn_child c = SPAWN_CHILD_NONE;
	int r = spawn_start(&so, &c, NULL);
	if (r < 0)
		return r;
	/* Its pipe ends when it exits: 0 after the whole write, its errno
	 * after a short one, -ETIMEDOUT while it still writes; then it is
	 * killed (when still there) and reaped. */
	r = spawn_finish(&c, util_monotonic_ms() + CG_RECLAIM_WAIT_MS, NULL);
	return r == 0 ? 0 : -EAGAIN;
}

int host_cgroup_reclaim_kernel(host_cgroup *cg, airlock_error *err)
{
	if (!cg)
		return airlock_error_set(err, AIRLOCK_ERR_INVALID, EINVAL, "cgroup: reclaim");
	const cg_driver *d = cg->drv;
	int dfd = cg_ctl(cg, CG_MEMORY)->sandbox_fd;
	uint64_t usage, kmem;
	int r = cg_read_u64(dfd, d->usage_file, NULL, &usage);
	if (r >= 0)
		r = cg_read_u64(dfd, d->kmem_file, d->kmem_key, &kmem);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -r, "cgroup %s: reading %s", cg->name,
		                         d->usage_file);
	uint64_t limit = (uint64_t)cg->memory_bytes;
	uint64_t headroom = limit / CG_RECLAIM_HEADROOM_SHARE;
	if (kmem < cg->kmem_low)
		cg->kmem_low = kmem;
	if (usage + headroom < limit || kmem < cg->kmem_low + headroom / 2)
		return 0;
	_cleanup_close_ int fd = openat(dfd, d->reclaim_file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "cgroup %s: opening %s",
		                         cg->name, d->reclaim_file);
	char v[32];
	snprintf(v, sizeof(v), "%" PRIu64, usage + headroom - limit);
	/* Whether it freed all it was asked is no error: what it freed is
	 * read back below. */
	(void)cg_write_bounded(fd, v);
	if (cg_read_u64(dfd, d->kmem_file, d->kmem_key, &kmem) == 0)
		cg->kmem_low = kmem;
	return 1;
}
