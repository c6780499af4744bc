/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_IMAGE_BUILD_H
#define AIRLOCK_IMAGE_BUILD_H

/*
 * Building sandbox images from Debian packages into an image store
 * (airlock/image_store.h), and finding the mirror apt's sources name. This
 * is the builder: what `airlock image build` runs. A mechanism needs only
 * the store.
 *
 * Errors follow airlock/error.h, as for the store.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "airlock/image_store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The Debian suite images are built from. */
#define AIRLOCK_IMAGE_SUITE "bookworm"
/* The version of what a build does to the tree beyond installing packages.
 * An image recorded with an older recipe is not reused as "the default":
 * 2 added the mount points the native mechanism needs (/workspace); 3 replaced
 * the build host's /etc/resolv.conf, /etc/hostname, /etc/hosts and apt
 * sources with neutral ones; 4 added airlock's guest files (airlock/guest.h:
 * the guest program, the statx shim and the /etc/ld.so.preload naming it)
 * and python3-pip to the default packages. */
#define AIRLOCK_IMAGE_RECIPE 4u

/* The default image's packages, on top of debootstrap's minbase: what the
 * issue names as the minimum for running model-written code, plus curl (the
 * client the egress gate drives through the proxy), python3-pip (the
 * gvisor mechanism's "real programs" list runs `pip --version`) and
 * python3-venv (`python3 -m venv` needs ensurepip, which Debian ships there,
 * with the pip and setuptools wheels it installs from
 * /usr/share/python-wheels: a venv is made without the network). Sorted,
 * comma separated: the form debootstrap's --include takes and the form
 * recorded in the .packages sidecar. */
#define AIRLOCK_IMAGE_DEFAULT_PACKAGES                                                             \
	"bash,ca-certificates,coreutils,curl,findutils,git,grep,gzip,python3,python3-pip,"        \
	"python3-venv,sed,tar"

/* The keyring debootstrap checks the suite's Release signature with (Debian
 * package debian-archive-keyring). The build refuses to run unverified. */
#define AIRLOCK_IMAGE_KEYRING "/usr/share/keyrings/debian-archive-keyring.gpg"

/* Bounds on what a build accepts (extra packages, a name's length):
 * AIRLOCK_IMAGE_EXTRA_PACKAGES_MAX and AIRLOCK_IMAGE_PACKAGE_NAME_MAX in
 * airlock/caps.h. */

/* Default time limits of a build's steps. */
#define AIRLOCK_IMAGE_DEBOOTSTRAP_TIMEOUT_SECONDS 1800
#define AIRLOCK_IMAGE_MKFS_TIMEOUT_SECONDS 900

/* A progress line from a build ("mkfs.erofs", "sha256", ...), without a
 * newline. Called on the building thread; line is valid only for the call. */
typedef void (*airlock_image_progress_fn)(void *ctx, const char *line);

typedef struct airlock_image_build_options {
	/* Packages added to AIRLOCK_IMAGE_DEFAULT_PACKAGES; Debian package names
	 * ([a-z0-9][a-z0-9+.-]+). May be NULL when n_extra_packages is 0. */
	const char *const *extra_packages;
	size_t n_extra_packages;
	/* The Debian mirror (http://, https:// or file:///...). NULL: the one the
	 * machine's apt sources name for AIRLOCK_IMAGE_SUITE. */
	const char *mirror;
	/* Limit on debootstrap's run, seconds; 0 for the default. */
	int64_t debootstrap_timeout_seconds;
	/* Where apt's sources live; NULL for "/etc/apt" (tests point it
	 * elsewhere). */
	const char *apt_dir;
} airlock_image_build_options;

/*
 * Build an image from Debian packages and store it under its digest.
 *
 * Steps, each announced through progress (may be NULL): find the mirror;
 * debootstrap --variant=minbase AIRLOCK_IMAGE_SUITE with the package list
 * into a private tree under the store's tmp/, checking the Release signature
 * against AIRLOCK_IMAGE_KEYRING; clean the tree (apt lists and caches, logs,
 * temporary files, device nodes and setuid/setgid bits removed, machine-id
 * emptied); write airlock's guest files (airlock/guest.h); mkfs.erofs
 * (lz4hc, every timestamp 0, every file root-owned, a fixed UUID) into a
 * file under tmp/; fsync; SHA-256; link it to its digest
 * name (an image already stored under that name is kept); write the
 * .packages sidecar (recipe, suite, packages, the guest files' SHA-256). The private tree and every temporary file are removed
 * on every path out.
 *
 * Needs root (debootstrap creates device nodes and chroots). debootstrap and
 * mkfs.erofs run without a shell, from a fixed PATH, with stdin from
 * /dev/null, a minimal environment and a time limit; on failure the message
 * carries the tail of their output. debootstrap runs in a private mount
 * namespace so that the /proc and /sys it mounts in the tree cannot outlive
 * it on the host.
 *
 * Errors: AIRLOCK_ERR_DECODE for a malformed package name or mirror;
 * AIRLOCK_ERR_CONFIG when no mirror is found (naming the files read);
 * AIRLOCK_ERR_EXECUTION_UNAVAILABLE when a tool or the keyring is missing, a
 * tool fails or times out, or the caller is not root; AIRLOCK_ERR_SYSTEM for
 * system call failures. On success ret_digest holds "sha256:<hex>".
 *
 * Thread safety: safe to run concurrently with any other call on the store,
 * including another build.
 */
int airlock_image_build(airlock_image_store *store, const airlock_image_build_options *opts,
                        airlock_image_progress_fn progress, void *progress_ctx,
                        char ret_digest[AIRLOCK_IMAGE_DIGEST_SIZE], airlock_error *err);

/*
 * Find the newest stored image that `build` made from the default package
 * list and AIRLOCK_IMAGE_SUITE with this AIRLOCK_IMAGE_RECIPE and this
 * airlock's guest files (airlock/guest.h; by its .packages sidecar, which
 * records their SHA-256), for reuse instead of a rebuild. Returns 1 and fills ret_digest when there is one, 0 (ret_digest
 * untouched) when there is none, negative on error. The image is not hashed
 * here: open it with airlock_image_open_verified.
 */
int airlock_image_find_default(airlock_image_store *store,
                               char ret_digest[AIRLOCK_IMAGE_DIGEST_SIZE], airlock_error *err);

/* The same for an arbitrary build's options (extra packages); mirror and
 * timeouts do not matter to what is found. */
int airlock_image_find_built(airlock_image_store *store, const airlock_image_build_options *opts,
                             char ret_digest[AIRLOCK_IMAGE_DIGEST_SIZE], airlock_error *err);

/* ---- apt sources: which mirror serves the suite ------------------------- */

typedef enum airlock_apt_format {
	AIRLOCK_APT_FORMAT_INVALID = 0,
	AIRLOCK_APT_FORMAT_DEB822,   /* sources.list.d/NAME.sources */
	AIRLOCK_APT_FORMAT_ONE_LINE, /* sources.list, sources.list.d/NAME.list */
	AIRLOCK_APT_FORMAT__MAX
} airlock_apt_format;

/*
 * Find the mirror URI that serves `suite` with type "deb" in one apt sources
 * document (buf, len bytes; NUL bytes make it malformed). name is used in
 * error messages only.
 *
 * Deb822: the first stanza that is not "Enabled: no", whose Types include
 * deb and whose Suites include suite exactly ("bookworm" does not match
 * "bookworm-updates"); its first URI with an http, https or file scheme.
 * One-line: the first "deb [options] URI SUITE COMPONENT..." line with that
 * suite and such a URI. Comments are skipped. A trailing slash is removed.
 *
 * Returns 1 and a malloc'd URI in *ret_uri when found, 0 when the document
 * names no such mirror (ret_uri untouched), negative on error (ENOMEM,
 * AIRLOCK_ERR_DECODE for a document with a NUL byte).
 */
int airlock_image_mirror_parse(const char *name, const char *buf, size_t len,
                               airlock_apt_format format, const char *suite, char **ret_uri,
                               airlock_error *err);

/*
 * Look through apt_dir (NULL for "/etc/apt"): sources.list.d/ *.sources in
 * name order, then sources.list, then sources.list.d/ *.list in name order;
 * the first mirror found for suite wins. On success *ret_uri (malloc'd) and,
 * when ret_source is not NULL, *ret_source (malloc'd: the file it came
 * from). None found: AIRLOCK_ERR_CONFIG naming every file read.
 */
int airlock_image_find_mirror(const char *apt_dir, const char *suite, char **ret_uri,
                              char **ret_source, airlock_error *err);

#ifdef __cplusplus
}
#endif
#endif
