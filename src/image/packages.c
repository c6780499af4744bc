/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The package list a build installs, and finding an image a build already
 * made from the same list (include/airlock/image_build.h).
 */
#include "image/build.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/image_store.h"
#include "util/util.h"

/* Debian policy 5.6.1: lowercase letters, digits, + - ., at least two
 * characters, starting with an alphanumeric. Nothing here can start with a
 * dash (an option to debootstrap) or carry a comma (a second package). */
static bool package_name_valid(const char *p)
{
	size_t n = strnlen(p, AIRLOCK_IMAGE_PACKAGE_NAME_MAX + 1);
	if (n < 2 || n > AIRLOCK_IMAGE_PACKAGE_NAME_MAX)
		return false;
	if (!((p[0] >= 'a' && p[0] <= 'z') || (p[0] >= '0' && p[0] <= '9')))
		return false;
	for (size_t i = 1; i < n; i++) {
		char c = p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' ||
		      c == '.'))
			return false;
	}
	return true;
}

int image_str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The default packages plus the extras, sorted and without repeats, joined
 * with commas: the --include argument and the sidecar's record. */
int image_package_list(const airlock_image_build_options *opts, char **ret, airlock_error *err)
{
	size_t n_extra = opts ? opts->n_extra_packages : 0;
	if (n_extra > AIRLOCK_IMAGE_EXTRA_PACKAGES_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
		                         "image build: %zu extra packages is more than the %d allowed",
		                         n_extra, AIRLOCK_IMAGE_EXTRA_PACKAGES_MAX);
	_cleanup_free_ char *defaults = strdup(AIRLOCK_IMAGE_DEFAULT_PACKAGES);
	_cleanup_free_ const char **names = calloc(n_extra + 64, sizeof(*names));
	if (!defaults || !names)
		return host_image_sys_error(err, ENOMEM, "image build");
	size_t n = 0;
	char *save = NULL;
	for (char *t = strtok_r(defaults, ",", &save); t && n < 64; t = strtok_r(NULL, ",", &save))
		names[n++] = t;
	for (size_t i = 0; i < n_extra; i++) {
		const char *p = opts->extra_packages[i];
		if (!p || !package_name_valid(p)) {
			char shown[64];
			size_t o = 0;
			for (size_t k = 0; p && p[k] && o + 1 < sizeof(shown); k++)
				shown[o++] = ((unsigned char)p[k] >= 0x20 && p[k] != 0x7f) ? p[k] : '?';
			shown[o] = 0;
			return airlock_error_set(err, AIRLOCK_ERR_DECODE, 0,
			                         "image build: \"%s\" is not a Debian package name (lowercase letters, digits, '+', '-', '.'; at least two characters, starting with a letter or digit)",
			                         shown);
		}
		names[n++] = p;
	}
	qsort(names, n, sizeof(*names), image_str_cmp);
	size_t total = 1;
	for (size_t i = 0; i < n; i++)
		total += strlen(names[i]) + 1;
	char *out = malloc(total);
	if (!out)
		return host_image_sys_error(err, ENOMEM, "image build");
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
			continue;
		if (o > 0)
			out[o++] = ',';
		size_t l = strlen(names[i]);
		memcpy(out + o, names[i], l);
		o += l;
	}
	out[o] = 0;
	*ret = out;
	return 0;
}

/* Whether sha256/<hex>.packages has the line "guest: <fingerprint>": the
 * image carries exactly the guest files this airlock writes. 1, 0 (no such
 * line, no sidecar, another fingerprint: an image built before recipe 4's
 * files changed, or by another airlock), or -errno. The store's own reader
 * (airlock_image_list) passes over the line; it is the builder's. */
static int sidecar_guest_matches(airlock_image_store *store, const char *hex,
                                 const char *fingerprint)
{
	char name[AIRLOCK_SHA256_HEX_LEN + sizeof(SIDECAR_SUFFIX)];
	snprintf(name, sizeof(name), "%s" SIDECAR_SUFFIX, hex);
	_cleanup_close_ int fd = openat(store->sha_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT || errno == ELOOP ? 0 : -errno;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = util_read_capped(fd, AIRLOCK_IMAGE_SIDECAR_MAX, &text, &len);
	if (r < 0)
		return r;
	if (memchr(text, 0, len))
		return 0;
	char want[sizeof(SIDECAR_GUEST_KEY) + AIRLOCK_SHA256_HEX_LEN];
	snprintf(want, sizeof(want), SIDECAR_GUEST_KEY "%s", fingerprint);
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (strcmp(line, want) == 0)
			return 1;
	return 0;
}

int airlock_image_find_built(airlock_image_store *store, const airlock_image_build_options *opts,
                             char ret_digest[AIRLOCK_IMAGE_DIGEST_SIZE], airlock_error *err)
{
	_cleanup_free_ char *packages = NULL;
	int r = image_package_list(opts, &packages, err);
	if (r < 0)
		return r;
	char guest[AIRLOCK_SHA256_HEX_LEN + 1];
	r = image_guest_fingerprint(guest);
	if (r < 0)
		return host_image_sys_error(err, -r, "image find: guest files");
	airlock_image_info *infos = NULL;
	size_t n = 0;
	r = airlock_image_list(store, &infos, &n, err);
	if (r < 0)
		return r;
	/* Newest first: the most recent build of this list wins. An image
	 * whose guest files are not this airlock's is not reused: the
	 * mechanisms that run them would run another version's wrapper. */
	int found = 0;
	for (size_t i = 0; i < n && found == 0; i++) {
		if (!infos[i].suite || !infos[i].packages || infos[i].recipe != AIRLOCK_IMAGE_RECIPE ||
		    strcmp(infos[i].suite, AIRLOCK_IMAGE_SUITE) != 0 ||
		    strcmp(infos[i].packages, packages) != 0)
			continue;
		const char *hex = infos[i].digest + sizeof("sha256:") - 1;
		int m = sidecar_guest_matches(store, hex, guest);
		if (m < 0) {
			found = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, -m,
			                          "image find: reading the record of %s", infos[i].digest);
		} else if (m > 0) {
			memcpy(ret_digest, infos[i].digest, AIRLOCK_IMAGE_DIGEST_SIZE);
			found = 1;
		}
	}
	airlock_image_list_free(infos, n);
	return found;
}

int airlock_image_find_default(airlock_image_store *store,
                               char ret_digest[AIRLOCK_IMAGE_DIGEST_SIZE], airlock_error *err)
{
	return airlock_image_find_built(store, NULL, ret_digest, err);
}
