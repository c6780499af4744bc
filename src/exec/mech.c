/* SPDX-License-Identifier: Apache-2.0 */
#include "exec/mech.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

void exec_mech_init(exec_mech *m)
{
	*m = (exec_mech){ .volume_dir_fd = -1, .shutdown_efd = -1 };
	pthread_mutex_init(&m->lock, NULL);
	exec_boxes_init(&m->boxes);
}

int exec_mech_open(exec_mech *m, const char *who, const char *image_store,
                   const char *volume_dir, airlock_error *err)
{
	int r = airlock_image_store_open(image_store, &m->images, err);
	if (r < 0)
		return r;
	/* The volumes' backing files are unnamed (O_TMPFILE): the directory
	 * only picks the filesystem they live on. It must still be root's
	 * alone: a user who could write there could fill that filesystem
	 * under the sandboxes' reservations. O_NOFOLLOW and the fstat of
	 * what was opened leave no window between the check and the use. */
	if (mkdir(volume_dir, 0700) < 0 && errno != EEXIST)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "%s: the volume directory %s", who, volume_dir);
	m->volume_dir_fd = open(volume_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (m->volume_dir_fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "%s: the volume directory %s", who, volume_dir);
	struct stat st;
	if (fstat(m->volume_dir_fd, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "%s: the volume directory %s", who, volume_dir);
	if (st.st_uid != 0 || (st.st_mode & 077))
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "%s: the volume directory %s is owned by uid %u with mode "
		                         "%04o: it must be owned by root with mode 0700",
		                         who, volume_dir, (unsigned)st.st_uid,
		                         (unsigned)(st.st_mode & 07777));
	m->shutdown_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (m->shutdown_efd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "%s: the shutdown eventfd", who);
	return 0;
}

void exec_mech_fini(exec_mech *m)
{
	host_image_cache_clear(&m->imgs);
	airlock_image_store_free(m->images);
	m->images = NULL;
	if (m->volume_dir_fd >= 0)
		close(m->volume_dir_fd);
	if (m->shutdown_efd >= 0)
		close(m->shutdown_efd);
	m->volume_dir_fd = m->shutdown_efd = -1;
	pthread_mutex_destroy(&m->lock);
	exec_boxes_fini(&m->boxes);
}
