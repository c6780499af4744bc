/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_EXEC_MECH_H
#define AIRLOCK_EXEC_MECH_H

/*
 * What every mechanism that runs sandboxes on this host holds the same
 * way, opened and freed once here: its lock, the live-sandbox table, the
 * image store and the images mounted from it, the directory that picks the
 * workspace volumes' filesystem, and the eventfd that says the service is
 * stopping. A mechanism's adapter struct has one as its member `m`; what
 * it holds beyond that (native's host-id slots, gVisor's state directory)
 * is its own.
 */

#include <pthread.h>

#include "airlock/error.h"
#include "airlock/image_store.h"
#include "exec/boxes.h"
#include "host/image_mount.h"

typedef struct exec_mech {
	pthread_mutex_t lock;        /* the mechanism's own state, and imgs */
	exec_boxes boxes;            /* the live sandboxes, with their own lock */
	airlock_image_store *images; /* the verified store every image comes from */
	host_image_cache imgs;       /* the images mounted so far; under lock */
	int volume_dir_fd;           /* where the volumes' unnamed backing files live */
	int shutdown_efd;            /* readable once the service is stopping */
} exec_mech;

/* Nothing open yet (every descriptor -1): exec_mech_fini is safe after it. */
void exec_mech_init(exec_mech *m);

/* Open the image store at image_store and the volume directory (made 0700
 * when missing; refused unless it is a directory owned by root with no
 * access for anyone else), and make the shutdown eventfd. who names the
 * mechanism in errors ("native"). */
int exec_mech_open(exec_mech *m, const char *who, const char *image_store,
                   const char *volume_dir, airlock_error *err);

/* After the mechanism released every sandbox (exec_boxes_release_all): the
 * image mounts, the store, the descriptors, the lock and the table. */
void exec_mech_fini(exec_mech *m);

#endif
