/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's end of the orchestration bridge (exec/bridge.h): the plan
 * of where the socket goes, the listener, and the relay threads.
 */
#include "exec/bridge.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/relay.h"
#include "util/util.h"

#define T_PATH "EnvironmentSpec.bridge.socket_path"

/* A connection the service relays is one the worker takes. */
_Static_assert(AIRLOCK_SERVICE_BRIDGE_CONNECTIONS_MAX <= AIRLOCK_WORKER_BRIDGE_PER_ENVIRONMENT_MAX,
               "the service relays more connections of a sandbox than the worker takes");

/* ---- the plan ------------------------------------------------------------- */

/* The mounts every sandbox has: a directory of the bridge's there would be
 * hidden by them, or hide them. */
static const char *const own_mounts[] = { "proc", "dev", "sys", "tmp", "workspace" };

static int refuse(airlock_error *err, const char *path, const char *why)
{
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0, T_PATH "=%s: %s", path, why);
}

/* Whether the directory at dir/name (no symlink followed) is an empty
 * directory; its mode in *mode. */
static bool empty_dir_at(int dir, const char *name, mode_t *mode)
{
	int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return false;
	}
	*mode = st.st_mode & 07777;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return false;
	}
	bool empty = true;
	struct dirent *de;
	while (empty && (de = readdir(d)))
		empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
	closedir(d);
	return empty;
}

/* What the directory at fd (A, or D when last) holds, checked: D must be
 * empty; A may hold only empty directories, kept in p. */
static int plan_entries(int fd, bool last, const char *path, exec_bridge_plan *p,
                        airlock_error *err)
{
	int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "reading the image's %s", p->mount_at);
	}
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		mode_t mode = 0;
		if (last || p->n_keep == AIRLOCK_SERVICE_BRIDGE_KEEP_MAX ||
		    !empty_dir_at(dirfd(d), de->d_name, &mode)) {
			char why[PATH_MAX + NAME_MAX + 200];
			snprintf(why, sizeof(why),
			         "the image's %s holds %s, which the socket's mount there would hide "
			         "(the socket's directory must be missing from the image or empty, "
			         "below one holding only empty directories)",
			         p->mount_at, de->d_name);
			r = refuse(err, path, why);
			break;
		}
		snprintf(p->keep[p->n_keep], sizeof(p->keep[0]), "%s", de->d_name);
		p->keep_mode[p->n_keep++] = mode;
	}
	closedir(d);
	return r;
}

int exec_bridge_plan_make(int image_root, const char *path, exec_bridge_plan *p,
                          airlock_error *err)
{
	memset(p, 0, sizeof(*p));
	size_t len = strlen(path);
	if (path[0] != '/' || len >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return refuse(err, path, "must be an absolute path shorter than 108 bytes");
	char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];
	memcpy(buf, path, len + 1);
	char *comp[sizeof(buf) / 2];
	size_t n = 0;
	for (char *s = buf + 1;; s++) {
		char *slash = strchr(s, '/');
		if (slash)
			*slash = 0;
		if (!*s || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
			return refuse(err, path, "must be a normalized path (no empty, . or .. part)");
		comp[n++] = s;
		if (!slash)
			break;
		s = slash;
	}
	if (n < 2)
		return refuse(err, path, "needs a directory of its own below /");
	for (size_t i = 0; i < ARRAY_SIZE(own_mounts); i++)
		if (strcmp(comp[0], own_mounts[i]) == 0) {
			char why[96];
			snprintf(why, sizeof(why), "is below /%s, a mount every sandbox has", comp[0]);
			return refuse(err, path, why);
		}
	snprintf(p->name, sizeof(p->name), "%s", comp[n - 1]);

	/* The deepest directory of the socket's that the image has: k parts,
	 * each opened without following a symlink (one in the image could
	 * point the mount anywhere in the sandbox's tree). */
	_cleanup_close_ int fd = openat(image_root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "opening the image's root");
	size_t k = 0;
	for (; k < n - 1; k++) {
		int next = openat(fd, comp[k], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT)
			break;
		if (next < 0) {
			char why[PATH_MAX];
			snprintf(why, sizeof(why), "its part %s is not a directory in the image (%s)",
			         comp[k], strerror(errno));
			return refuse(err, path, why);
		}
		close(fd);
		fd = next;
	}
	if (k == 0)
		return refuse(err, path,
		              "its top directory is missing from the image, and / cannot be mounted over");
	size_t at = 0;
	for (size_t i = 0; i < k; i++)
		at += (size_t)snprintf(p->mount_at + at, sizeof(p->mount_at) - at, "/%s", comp[i]);
	at = 0;
	for (size_t i = k; i < n - 1; i++)
		at += (size_t)snprintf(p->sub + at, sizeof(p->sub) - at, "%s%s", i > k ? "/" : "",
		                       comp[i]);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "reading the image's %s", p->mount_at);
	p->mode = st.st_mode & 07777;
	return plan_entries(fd, k == n - 1, path, p, err);
}

int exec_bridge_address_check(const char *address, airlock_error *err)
{
	if (address)
		return 0;
	return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_REJECTED, 0,
	                         "EnvironmentSpec.bridge: service.bridge_address is unset, so this "
	                         "service relays no bridge (set it to the worker tier's "
	                         "worker.bridge_listen, or provision without a bridge)");
}

/* ---- the listener ----------------------------------------------------------- */

/* The name the socket is bound at first: /proc/self/fd/N/ and the spec's
 * name may not fit a socket address, this does; then it is renamed. */
#define BIND_NAME ".b"

int exec_bridge_listen(int dir_fd, const char *name, uid_t uid, gid_t gid, int *ret_fd,
                       airlock_error *err)
{
	_cleanup_close_ int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "its socket");
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d/" BIND_NAME, dir_fd);
	/* The directory is root's alone until the mount or the bundle shows
	 * it to the sandbox, so the socket is reachable by no one between its
	 * bind and its chown. */
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "binding its socket");
	if (renameat(dir_fd, BIND_NAME, dir_fd, name) < 0 ||
	    fchownat(dir_fd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fchmodat(dir_fd, name, 0600, 0) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "its socket's name and owner");
	if (listen(s, AIRLOCK_SERVICE_BRIDGE_BACKLOG) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "listening on its socket");
	*ret_fd = TAKE_FD(s);
	return 0;
}

int exec_bridge_tree_make(int root_fd, const exec_bridge_plan *pl, uid_t uid, gid_t gid,
                          int *ret_fd, airlock_error *err)
{
	/* mkdirat's mode passes through the umask: each mode is set after. */
	for (size_t i = 0; i < pl->n_keep; i++)
		if (mkdirat(root_fd, pl->keep[i], 0700) < 0 ||
		    fchmodat(root_fd, pl->keep[i], pl->keep_mode[i], 0) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
			                         "the directories its mount hides");
	char sub[sizeof(pl->sub)];
	snprintf(sub, sizeof(sub), "%s", pl->sub);
	for (char *s = sub; *s;) {
		char *slash = strchr(s, '/');
		if (slash)
			*slash = 0;
		if (mkdirat(root_fd, sub, 0700) < 0 || fchmodat(root_fd, sub, 0755, 0) < 0)
			return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
			                         "its directory");
		if (!slash)
			break;
		*slash = '/';
		s = slash + 1;
	}
	_cleanup_close_ int dir = openat(root_fd, pl->sub[0] ? pl->sub : ".",
	                                 O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno,
		                         "its directory");
	return exec_bridge_listen(dir, pl->name, uid, gid, ret_fd, err);
}

/* ---- the relay ---------------------------------------------------------------- */

typedef struct bridge_conn {
	exec_bridge *br;
	pthread_t thread;
	int sandbox_fd;   /* the accepted connection: the thread's, which closes it */
	bool running;     /* a thread is started and not yet joined (the acceptor's) */
	atomic_bool done; /* the thread has closed both ends and is returning */
} bridge_conn;

struct exec_bridge {
	int listen_fd;
	int stop_fd; /* eventfd: readable once stopping, for good */
	struct sockaddr_un to;
	char preface[sizeof(EXEC_BRIDGE_PREFACE) + AIRLOCK_ENVIRONMENT_ID_MAX + 1];
	size_t preface_len;
	pthread_t acceptor;
	bridge_conn conns[AIRLOCK_SERVICE_BRIDGE_CONNECTIONS_MAX];
	/* The connect rate's token bucket (the acceptor's alone): tokens in
	 * thousandths, refilled from the monotonic clock. */
	int64_t tokens_milli, refilled_ms;
};

#define BUCKET_MILLI ((int64_t)AIRLOCK_SERVICE_BRIDGE_CONNECTIONS_MAX * 1000)

/* The milliseconds until the next connection may be accepted: 0 when one
 * may now (its token taken by accept_one). */
static int bucket_wait_ms(exec_bridge *br)
{
	int64_t now = util_monotonic_ms();
	br->tokens_milli += (now - br->refilled_ms) * AIRLOCK_SERVICE_BRIDGE_CONNECTS_PER_SECOND;
	if (br->tokens_milli > BUCKET_MILLI)
		br->tokens_milli = BUCKET_MILLI;
	br->refilled_ms = now;
	if (br->tokens_milli >= 1000)
		return 0;
	int64_t need = 1000 - br->tokens_milli;
	return (int)((need + AIRLOCK_SERVICE_BRIDGE_CONNECTS_PER_SECOND - 1) /
	             AIRLOCK_SERVICE_BRIDGE_CONNECTS_PER_SECOND);
}

/* One connection: the worker's end, the preface, then the bytes. */
static void *conn_main(void *arg)
{
	bridge_conn *c = arg;
	exec_bridge *br = c->br;
	/* Nonblocking: a listener whose queue is full refuses at once
	 * (EAGAIN) instead of holding this thread, and destroy, past the
	 * relay's stop. */
	int w = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (w >= 0 && connect(w, (struct sockaddr *)&br->to, sizeof(br->to)) == 0 &&
	    send(w, br->preface, br->preface_len, MSG_NOSIGNAL | MSG_DONTWAIT) ==
	            (ssize_t)br->preface_len)
		util_relay(c->sandbox_fd, w, br->stop_fd, NULL, 0);
	if (w >= 0)
		close(w);
	close(c->sandbox_fd);
	c->sandbox_fd = -1;
	atomic_store(&c->done, true);
	return NULL;
}

static void conns_reap(exec_bridge *br, bool all)
{
	for (size_t i = 0; i < AIRLOCK_SERVICE_BRIDGE_CONNECTIONS_MAX; i++) {
		bridge_conn *c = &br->conns[i];
		if (c->running && (all || atomic_load(&c->done))) {
			pthread_join(c->thread, NULL);
			c->running = false;
		}
	}
}

static void accept_one(exec_bridge *br)
{
	int fd = accept4(br->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0)
		br->tokens_milli -= 1000; /* every accepted one, one closed at once too */
	if (fd < 0) {
		/* A descriptor or memory shortage would spin the poll: wait a
		 * little, or for the stop. */
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			poll(&(struct pollfd){ .fd = br->stop_fd, .events = POLLIN }, 1, 100);
		return;
	}
	conns_reap(br, false);
	bridge_conn *c = NULL;
	for (size_t i = 0; i < AIRLOCK_SERVICE_BRIDGE_CONNECTIONS_MAX && !c; i++)
		if (!br->conns[i].running)
			c = &br->conns[i];
	if (!c) {
		close(fd); /* past the cap: accepted and closed */
		return;
	}
	c->br = br;
	c->sandbox_fd = fd;
	atomic_store(&c->done, false);
	if (pthread_create(&c->thread, NULL, conn_main, c) != 0) {
		close(fd);
		c->sandbox_fd = -1;
		return;
	}
	c->running = true;
}

static void *accept_main(void *arg)
{
	exec_bridge *br = arg;
	for (;;) {
		/* With no token the listener is not polled: its backlog
		 * (AIRLOCK_SERVICE_BRIDGE_BACKLOG) fills and the sandbox's next
		 * connect waits in the sandbox until a token comes. */
		int wait = bucket_wait_ms(br);
		struct pollfd p[2] = { { .fd = br->stop_fd, .events = POLLIN },
			               { .fd = br->listen_fd, .events = POLLIN } };
		if (poll(p, wait ? 1 : 2, wait ? wait : -1) < 0)
			continue;
		if (wait) {
			if (p[0].revents)
				break;
			continue;
		}
		if (p[0].revents)
			break;
		if (p[1].revents)
			accept_one(br);
	}
	/* Every connection's relay sees the stop and closes its ends. */
	conns_reap(br, true);
	return NULL;
}

int exec_bridge_start(int listen_fd, const char *address, const char *environment_id,
                      exec_bridge **ret, airlock_error *err)
{
	_cleanup_close_ int lfd = listen_fd;
	const char *path = address && strncmp(address, "unix:", 5) == 0 ? address + 5 : NULL;
	if (!path || path[0] != '/' || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service.bridge_address: expected unix:/absolute/path shorter "
		                         "than 108 bytes");
	exec_bridge *br = calloc(1, sizeof(*br));
	if (!br)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the relay");
	br->to.sun_family = AF_UNIX;
	snprintf(br->to.sun_path, sizeof(br->to.sun_path), "%s", path);
	br->preface_len = (size_t)snprintf(br->preface, sizeof(br->preface),
	                                   EXEC_BRIDGE_PREFACE "%s\n", environment_id);
	br->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (br->stop_fd < 0) {
		int e = errno;
		free(br);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "the relay's eventfd");
	}
	br->listen_fd = lfd;
	br->tokens_milli = BUCKET_MILLI;
	br->refilled_ms = util_monotonic_ms();
	int e = pthread_create(&br->acceptor, NULL, accept_main, br);
	if (e != 0) {
		close(br->stop_fd);
		free(br);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "the relay's thread");
	}
	lfd = -1;
	*ret = br;
	return 0;
}

void exec_bridge_stop(exec_bridge *br)
{
	if (!br)
		return;
	uint64_t one = 1;
	ssize_t n = write(br->stop_fd, &one, sizeof(one));
	(void)n;
	pthread_join(br->acceptor, NULL);
	close(br->listen_fd);
	close(br->stop_fd);
	free(br);
}
