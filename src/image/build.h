/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_IMAGE_BUILD_INTERNAL_H
#define AIRLOCK_IMAGE_BUILD_INTERNAL_H

/*
 * Inside the image builder (include/airlock/image_build.h has the
 * contract): what its files share. build.c runs the build, packages.c
 * names what it installs, apt.c finds the mirror, clean.c cleans the tree,
 * guest_files.c adds airlock's own files (airlock/guest.h).
 * The builder uses the store's internals (host/image_store.h); the store
 * uses nothing of the builder's.
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "airlock/error.h"
#include "airlock/image_build.h"
#include "airlock/types.h"
#include "host/tree.h"

/* qsort's comparison of two char pointers, by strcmp. */
int image_str_cmp(const void *a, const void *b);
/* s is longer than suffix and ends with it. */
bool image_has_suffix(const char *s, const char *suffix);

/* Write the files of airlock/guest.h into the tree at rootfd: the guest
 * program, the statx shim and the ld.so.preload that names it
 * (guest_files.c). */
int image_install_guest(int rootfd, airlock_error *err);

/* SHA-256 (hex) over the guest files image_install_guest writes: the
 * sidecar records it ("guest: HEX"), and an image is reused as the default
 * only when it carries this airlock's guest files (guest_files.c). */
int image_guest_fingerprint(char out[AIRLOCK_SHA256_HEX_LEN + 1]);
/* The sidecar line that records it, before the hex. */
#define SIDECAR_GUEST_KEY "guest: "

/* The default packages plus opts' extras, sorted, joined with commas
 * (packages.c). */
int image_package_list(const airlock_image_build_options *opts, char **ret, airlock_error *err);

/* s[0..n) as a mirror URI debootstrap can fetch from, malloc'd, or NULL
 * (unusable, or ENOMEM with *oom set) (apt.c). */
char *image_usable_uri(const char *s, size_t n, bool *oom);

/* The directory rel (no leading slash) beneath root, never through a
 * symlink nor out of root's mount (clean.c): a descriptor or -errno. */
int image_open_beneath(int root, const char *rel, const host_tree_id *id);

/* Replace root/dir/name (dir without a leading slash, reached beneath
 * root) with a new regular file of len bytes, mode mode (clean.c): 0 or
 * -errno. */
int image_write_file(int root, const char *dir, const char *name, const void *data, size_t len,
                     mode_t mode, const host_tree_id *id);

/* Remove from the tree at rootfd what an image should not carry (clean.c). */
int image_clean_tree(int rootfd, airlock_error *err);

#endif
