/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The listening sockets of every server on the HTTP core (the service's
 * and the worker's APIs, their operators' metrics listeners), all made
 * the same way: a Unix socket created safely, or TCP.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "http/http.h"
#include "util/util.h"

/* An existing socket file at path: refuse anything that is not a socket,
 * refuse a socket a live server answers on, remove a dead one's. */
static int unix_prepare(const char *path, airlock_error *err)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0
		                       : airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno,
		                                           "listen %s", path);
	if (!S_ISSOCK(st.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "listen %s: exists and is not a socket; not replacing it", path);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, path, strlen(path));
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno, "listen: socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "listen %s: another service answers on it", path);
	if (errno != ECONNREFUSED)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno, "listen %s", path);
	/* Nobody listens: the socket of a server that died. */
	if (unlink(path) < 0 && errno != ENOENT)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno,
		                         "listen %s: removing the stale socket", path);
	return 0;
}

static int listen_unix(http_listener *l, const char *path, unsigned mode_cfg, long gid,
                       airlock_error *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (path[0] != '/' || strlen(path) >= sizeof(sa.sun_path))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "listen unix:%s: must be an absolute path under %zu bytes", path,
		                         sizeof(sa.sun_path));
	int r = unix_prepare(path, err);
	if (r < 0)
		return r;
	memcpy(sa.sun_path, path, strlen(path));
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, errno, "listen: socket");
	/* Bound with only the owner's bits, so nobody can connect before the
	 * mode and group below are set; umask is process-wide, and this runs
	 * at start, before the server has threads that create files. */
	mode_t old = umask(0177);
	int b = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	int be = errno;
	umask(old);
	if (b < 0) {
		close(fd);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, be, "listen unix:%s", path);
	}
	struct stat st;
	unsigned mode = mode_cfg ? mode_cfg : 0660;
	if ((gid >= 0 && lchown(path, (uid_t)-1, (gid_t)gid) < 0) ||
	    chmod(path, (mode_t)(mode & 07777)) < 0 || lstat(path, &st) < 0 || listen(fd, 128) < 0) {
		int e = errno;
		unlink(path);
		close(fd);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, e, "listen unix:%s", path);
	}
	l->socket_path = strdup(path);
	l->socket_dev = st.st_dev;
	l->socket_ino = st.st_ino;
	l->fd = fd;
	l->address = NULL;
	if (!l->socket_path || asprintf(&l->address, "unix:%s", path) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "listen");
	return 0;
}

static int listen_tcp(http_listener *l, const char *spec, airlock_error *err)
{
	/* HOST:PORT, HOST a name or an address, [v6]:PORT. */
	_cleanup_free_ char *host = NULL;
	const char *port = NULL;
	if (spec[0] == '[') {
		const char *close_b = strchr(spec, ']');
		if (!close_b || close_b[1] != ':')
			goto bad;
		host = strndup(spec + 1, (size_t)(close_b - spec - 1));
		port = close_b + 2;
	} else {
		const char *colon = strrchr(spec, ':');
		if (!colon || strchr(spec, ':') != colon)
			goto bad;
		host = strndup(spec, (size_t)(colon - spec));
		port = colon + 1;
	}
	if (!host || !host[0] || !port[0])
		goto bad;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
		                  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	int g = getaddrinfo(host, port, &hints, &ai);
	if (g != 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "listen %s: %s", spec, gai_strerror(g));
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, e, "listen %s", spec);
	}
	freeaddrinfo(ai);
	l->fd = fd;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char h[NI_MAXHOST], p[NI_MAXSERV];
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ||
	    getnameinfo((struct sockaddr *)&ss, sl, h, sizeof(h), p, sizeof(p),
	                NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno, "listen %s: getsockname", spec);
	if (asprintf(&l->address, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h, p) < 0) {
		l->address = NULL;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "listen");
	}
	return 0;
bad:
	return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
	                         "listen %s: expected unix:PATH or HOST:PORT", spec);
}


int http_listen(const char *address, unsigned mode, long gid, http_listener *ret,
               airlock_error *err)
{
	http_listener l = { .fd = -1 };
	int r = strncmp(address, "unix:", 5) == 0 ? listen_unix(&l, address + 5, mode, gid, err)
	                                          : listen_tcp(&l, address, err);
	if (r < 0) {
		http_listener_close(&l);
		return r;
	}
	*ret = l;
	return 0;
}

void http_listener_close(http_listener *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	if (l->socket_path) {
		/* Only the socket this server made: a later one may have
		 * replaced it already. */
		struct stat st;
		if (lstat(l->socket_path, &st) == 0 && st.st_dev == l->socket_dev &&
		    st.st_ino == l->socket_ino)
			unlink(l->socket_path);
	}
	free(l->socket_path);
	free(l->address);
	l->socket_path = l->address = NULL;
}

int http_read_pem(const char *what, const char *path, bool secret, char **ret,
                  airlock_error *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno, "%s: cannot open it", what);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: not a regular file", what);
	/* A private key any local user can read lets them impersonate the
	 * server to its clients. Group access stays allowed, as PostgreSQL
	 * allows it for a key owned by root: a deployment may share the key
	 * with a group. */
	if (secret && (st.st_mode & 007))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "%s %s has mode %04o: others must have no access (chmod 600)",
		                         what, path, (unsigned)(st.st_mode & 07777));
	size_t len = 0;
	int r = util_read_secret(fd, AIRLOCK_SERVICE_PEM_MAX, ret, &len);
	if (r < 0)
		return r == -EFBIG ? airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s: larger than 1 MiB", what)
		                   : airlock_error_set(err, AIRLOCK_ERR_CONFIG, -r, "%s", what);
	return 0;
}
