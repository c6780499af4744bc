/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_PORT_WORKSPACE_H
#define AIRLOCK_PORT_WORKSPACE_H

/*
 * The WorkspaceHandle port (the specification, "WorkspaceHandle"): root,
 * resolve, read, write, listdir, provenance. A narrow port over one workspace:
 * a holder can read and write files and nothing else; it cannot run anything.
 *
 * Every path a caller passes is relative to /workspace and goes through the
 * containment function first (airlock_workspace_resolve's rules), in the core,
 * before an adapter sees it:
 *   1. reject an empty, "." or ".." component before joining (never
 *      normalize);
 *   2. reject absolute input and input containing a NUL byte;
 *   3. the joined result must stay under root after symlink resolution: the
 *      adapter's contain() decides, on a directory descriptor, never with a
 *      string prefix test;
 *   4. reject a component over 255 bytes and a result over 4096;
 *   5. every rejection is WorkspaceEscape.
 * Adapters receive the already-checked relative path and must open it with a
 * resolution that cannot leave the root (openat2 RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS) so that a symlink swapped in after the check fails
 * at use rather than escaping.
 *
 * Provenance is written by write() in the same operation as the bytes and by
 * nothing else; a path write() never wrote is UNKNOWN (or SANDBOX_WRITTEN on an
 * adapter whose volume a sandbox writes).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airlock/caps.h"
#include "airlock/error.h"
#include "airlock/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A listing has no change kind and hashing every file to list a directory
 * would read the whole workspace, so listdir returns entries rather than the
 * specification's FileChange shape (docs/spec-mapping.md says why). */
typedef enum airlock_entry_type {
	AIRLOCK_ENTRY_INVALID = 0,
	AIRLOCK_ENTRY_FILE,
	AIRLOCK_ENTRY_DIRECTORY,
	AIRLOCK_ENTRY_SYMLINK,
	AIRLOCK_ENTRY_OTHER,
	AIRLOCK_ENTRY__MAX
} airlock_entry_type;
const char *airlock_entry_type_name(airlock_entry_type t);

typedef struct airlock_dir_entry {
	char *path; /* relative to /workspace */
	airlock_entry_type type;
	int64_t size_bytes;
} airlock_dir_entry;

typedef struct airlock_dir_listing {
	airlock_dir_entry *entries; /* sorted by path */
	size_t n;
	bool truncated; /* more entries than max_entries */
} airlock_dir_listing;
void airlock_dir_listing_clear(airlock_dir_listing *l);

#define AIRLOCK_WORKSPACE_OPS_VERSION 1

typedef struct airlock_workspace_ops {
	unsigned version; /* AIRLOCK_WORKSPACE_OPS_VERSION */
	const char *name;

	/* Rule 3 for a string-checked relative path ("" is the root itself):
	 * 0 when resolving it (following symlinks) stays under root, including
	 * when the leaf or a directory on the way does not exist yet;
	 * WorkspaceEscape otherwise. */
	int (*contain)(void *ctx, const char *rel, airlock_error *err);

	/* Read a regular file whole. More than max_bytes: AIRLOCK_ERR_TOOL_VALIDATION
	 * and nothing returned. *ret_data is malloc'd, owned by the caller. */
	int (*read)(void *ctx, const char *rel, size_t max_bytes, unsigned char **ret_data,
	            size_t *ret_len, airlock_error *err);

	/* Create or replace a regular file (not through a symlink) and record
	 * TOOL_WRITTEN for it in the same operation. Parents must exist. */
	int (*write)(void *ctx, const char *rel, const void *data, size_t len, airlock_error *err);

	/* List one directory ("" is the root): the entries sorted by path
	 * that fit both max_entries and AIRLOCK_WORKSPACE_LISTDIR_BYTES_MAX
	 * (the sum of strlen(path) + 1), truncated set when any entry was left
	 * out. The byte bound holds while the listing is built: memory is
	 * bounded by it, not by the directory's size. The core checks the
	 * answer and cuts one over either bound (a remote adapter's comes from
	 * elsewhere). */
	int (*listdir)(void *ctx, const char *rel, size_t max_entries, airlock_dir_listing *ret,
	               airlock_error *err);

	int (*provenance)(void *ctx, const char *rel, airlock_provenance *ret, airlock_error *err);

	void (*free)(void *ctx);
} airlock_workspace_ops;

typedef struct airlock_workspace_life airlock_workspace_life;

typedef struct airlock_workspace {
	const airlock_workspace_ops *ops;
	void *ctx;
	airlock_workspace_life *life; /* references and calls in flight; workspace.c's */
} airlock_workspace;

/* Wrap an adapter; takes ctx (freed through ops->free), also on failure.
 * The creator holds the first reference.
 *
 * Lifetime. A workspace is shared between its owner (the sandbox) and the
 * callers it hands out references to (airlock_exec_workspace). The owner
 * ends it with airlock_workspace_free: that waits for the calls in flight,
 * frees the adapter's ctx, and from then on every call fails with
 * ExecutionRejected ("destroyed"); the struct itself goes with the last
 * reference, so a caller's pointer never dangles. */
int airlock_workspace_new(const airlock_workspace_ops *ops, void *ctx, airlock_workspace **ret,
                          airlock_error *err);
/* The owner's end (above), then its reference released. */
void airlock_workspace_free(airlock_workspace *w);
/* Another reference; returns w. Thread-safe. */
airlock_workspace *airlock_workspace_ref(airlock_workspace *w);
/* Release a reference from airlock_workspace_ref or airlock_exec_workspace;
 * NULL is a no-op. Thread-safe. */
void airlock_workspace_release(airlock_workspace *w);

/* Always "/workspace". */
const char *airlock_workspace_root(const airlock_workspace *w);

/* Rules 1, 2 and 4 on raw bytes (input may contain NUL; len is its length).
 * On success *ret_rel (if not NULL) receives a malloc'd copy of the relative
 * path. No filesystem access. */
int airlock_workspace_check_string(const char *input, size_t len, char **ret_rel, airlock_error *err);

/* Quote untrusted path bytes for an error message, for the core and every
 * adapter alike: printable ASCII is kept, '"', '\\' and every other byte
 * become \xHH, at most AIRLOCK_WORKSPACE_QUOTE_SHOW input bytes are shown and
 * a longer input ends in "...(N bytes)". out is always NUL-terminated and
 * fits in AIRLOCK_WORKSPACE_QUOTE_MAX bytes; returns out. */
#define AIRLOCK_WORKSPACE_QUOTE_SHOW 64
#define AIRLOCK_WORKSPACE_QUOTE_MAX 320
const char *airlock_workspace_quote(const void *in, size_t len, char out[AIRLOCK_WORKSPACE_QUOTE_MAX]);

/* The containment function: rules 1-5. On success *ret is malloc'd
 * "/workspace/<input>". On failure WorkspaceEscape and *ret untouched. */
int airlock_workspace_resolve(airlock_workspace *w, const char *input, size_t len, char **ret,
                              airlock_error *err);

int airlock_workspace_read(airlock_workspace *w, const char *path, size_t max_bytes,
                           unsigned char **ret_data, size_t *ret_len, airlock_error *err);
int airlock_workspace_write(airlock_workspace *w, const char *path, const void *data, size_t len,
                            airlock_error *err);
/* path "." or "" lists the root. */
int airlock_workspace_listdir(airlock_workspace *w, const char *path, size_t max_entries,
                              airlock_dir_listing *ret, airlock_error *err);
int airlock_workspace_provenance(airlock_workspace *w, const char *path, airlock_provenance *ret,
                                 airlock_error *err);

/* ---- adapters ------------------------------------------------------------ */

/* A local directory held by descriptor. dirfd is
 * taken (closed on failure too). foreign is the provenance of a file write()
 * did not produce: UNKNOWN for a plain directory, SANDBOX_WRITTEN for a
 * volume a sandbox writes. Files write() creates are owned by the owner of
 * the directory, so on a sandbox's volume the sandbox can change them. */
int airlock_workspace_local_new(int dirfd, airlock_provenance foreign, airlock_workspace **ret,
                                airlock_error *err);

/* The in-memory workspace the fake mechanism uses. */
typedef struct airlock_memws airlock_memws;
int airlock_workspace_memory_new(airlock_workspace **ret, airlock_error *err);
/* The memory adapter's state behind a workspace it created (for the fake
 * mechanism to play a sandbox's writes and take snapshots); NULL otherwise. */
airlock_memws *airlock_workspace_memory_state(airlock_workspace *w);

#ifdef __cplusplus
}
#endif
#endif
