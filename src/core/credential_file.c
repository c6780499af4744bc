/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service credential's file, read the same way by both sides of the
 * internal API (airlock serve and the remote adapter's callers).
 *
 * Why each check:
 *   - opened O_NONBLOCK and then required to be a regular file: a FIFO or a
 *     device put at the path must not hang startup or be read forever;
 *   - owned by this user and no group or other permission bit: a token
 *     another account can read is not this service's secret any more
 *     (systemd's LoadCredential and Kubernetes secrets both give 0400/0600
 *     files; a symlink to one is followed, its target is what is checked);
 *   - at most AIRLOCK_CREDENTIAL_FILE_MAX bytes, and one token of printable
 *     ASCII without spaces (a final newline is dropped): it travels in an
 *     HTTP header, where a control byte would split or forge a header;
 *   - at least AIRLOCK_CREDENTIAL_MIN_BYTES: a short token is guessable
 *     whatever the comparison costs.
 * Messages name the file and the rule, never a byte of the content.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/caps.h"
#include "airlock/credential_file.h"
#include "util/util.h"

int airlock_credential_file_read_text(const char *path, const char *what, size_t max,
                                      char **ret, size_t *ret_len, airlock_error *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno, "%s %s", what, path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, errno, "%s %s", what, path);
	if (!S_ISREG(st.st_mode))
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s %s is not a regular file",
		                         what, path);
	if (st.st_uid != geteuid())
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "%s %s is owned by uid %u, not by this process's uid %u", what,
		                         path, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & 077)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "%s %s has mode %04o: group and others must have no access "
		                         "(chmod 600)",
		                         what, path, (unsigned)(st.st_mode & 07777));
	char *buf = NULL;
	size_t len = 0;
	int r = util_read_secret(fd, max, &buf, &len);
	if (r == -EFBIG)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "%s %s is over %zu bytes", what,
		                         path, max);
	if (r < 0)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, -r, "%s %s", what, path);
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len > 0 && buf[len - 1] == '\r')
		len--;
	buf[len] = 0;
	*ret = buf;
	*ret_len = len;
	return 0;
}

int airlock_credential_file_read(const char *path, unsigned char **ret, size_t *ret_len,
                                 airlock_error *err)
{
	if (!path || !*path)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
		                         "service credential: no credential file is configured "
		                         "(--credential-file or service.credential_file)");
	char *buf = NULL;
	size_t len = 0;
	int r = airlock_credential_file_read_text(path, "service credential file",
	                                          AIRLOCK_CREDENTIAL_FILE_MAX, &buf, &len, err);
	if (r < 0)
		return r;
	const char *bad = NULL;
	for (size_t i = 0; i < len && !bad; i++)
		if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] >= 0x7f)
			bad = "holds a byte that is not printable ASCII (a space, a control byte, a "
			      "second line or non-ASCII): the token is one header-safe word";
	if (!bad && len < AIRLOCK_CREDENTIAL_MIN_BYTES)
		bad = "holds a token under 16 bytes (generate one: head -c 32 /dev/urandom | base64)";
	_Static_assert(AIRLOCK_CREDENTIAL_MIN_BYTES == 16, "the message above names the minimum");
	if (bad) {
		explicit_bzero(buf, len);
		free(buf);
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "service credential file %s %s",
		                         path, bad);
	}
	*ret = (unsigned char *)buf;
	*ret_len = len;
	return 0;
}
