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

#define AIRLOCK_WORKSPACE_OPS_VERSION 2

/* Where a stream's bytes go, piece by piece (at most
 * AIRLOCK_WORKSPACE_STREAM_CHUNK each): 0 to go on, or a negative code with
 * err set to stop the stream (that error is the stream's). */
typedef int (*airlock_workspace_sink)(void *arg, const void *buf, size_t len, airlock_error *err);

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

	/* ---- version 2: streaming a file out (airlock_workspace_read_stream) ----
	 * An adapter streams either by pull (stream_open, stream_read,
	 * stream_close: the in-process adapters, whose bytes a server hands to
	 * its own transport) or by push (read_stream: the remote adapter,
	 * whose transport delivers the bytes as they arrive); the table has
	 * one set or the other, checked at airlock_workspace_new. */

	/* Open a regular file for streaming: containment as read, no symbolic
	 * link followed anywhere on the path (the bytes that leave are the
	 * ones at exactly the path named, never a file a link swapped in
	 * points to), a symlink, a directory or anything not regular
	 * refused as read refuses it (a symlink: ToolValidationError). A file
	 * over max_bytes: ToolValidationError naming the cap, nothing opened.
	 * *ret_reader is the adapter's; *ret_size the file's size at the
	 * open, exactly the bytes the reader hands out. */
	int (*stream_open)(void *ctx, const char *rel, uint64_t max_bytes, void **ret_reader,
	                   uint64_t *ret_size, airlock_error *err);
	/* The next at most max bytes into buf; *ret_n 0 once all *ret_size
	 * bytes were read AND the file was found to be the one opened,
	 * unchanged (a file changed while it was read is an error, never a
	 * mixture of two versions). Runs inside the core's call bracket, so
	 * ctx is alive. */
	int (*stream_read)(void *ctx, void *reader, void *buf, size_t max, size_t *ret_n,
	                   airlock_error *err);
	/* End a reader; needs nothing of ctx (it may run after the owner's
	 * end freed ctx). */
	void (*stream_close)(void *reader);

	/* Push: the whole stream of rel into sink through the adapter's own
	 * transport, same rules as stream_open. On success *ret_size is the
	 * byte count and ret_source_sha256 the digest the bytes' source
	 * computed over what it read (for the remote adapter, the service's);
	 * the core compares it with its own over what the sink received. */
	int (*read_stream)(void *ctx, const char *rel, uint64_t max_bytes, airlock_workspace_sink sink,
	                   void *arg, uint64_t *ret_size,
	                   char ret_source_sha256[AIRLOCK_SHA256_HEX_LEN + 1], airlock_error *err);
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

/*
 * Stream a regular file (not through a symlink; containment as read) to
 * sink in pieces of at most AIRLOCK_WORKSPACE_STREAM_CHUNK bytes, never
 * holding it whole. At most max_bytes (a larger file: ToolValidationError
 * naming the cap, as read, before any byte). The wrapper hashes what it
 * hands the sink. On success *ret_size is the byte count and
 * ret_source_sha256 is the digest THE SOURCE computed over what it read:
 * for an in-process adapter that is the wrapper's own digest; for the
 * remote adapter it is the service's, carried across the API
 * (docs/service-api.md, "workspace stream"), and the wrapper compares it
 * with its own over the bytes received: a difference, or a byte count
 * other than the one the service announced, is ArtifactIntegrityError.
 * A file changed while it was read fails the stream (the service cuts the
 * connection before its digest). A sink returning < 0 stops the stream
 * and its error is returned. On failure the outputs are untouched and the
 * sink may have received a prefix: the caller (the artifact store's
 * streaming put) discards what it took, which is why the digest is handed
 * over only at the end, to be the expected digest at the store's seal.
 *
 * Why a stream is a port operation when the specification's
 * WorkspaceHandle has read, write and listdir: an export must carry a
 * file of any size out of the sandbox with its digest compared across
 * both hops (docs/spec-mapping.md).
 */
int airlock_workspace_read_stream(airlock_workspace *w, const char *path, uint64_t max_bytes,
                                  airlock_workspace_sink sink, void *arg, uint64_t *ret_size,
                                  char ret_source_sha256[AIRLOCK_SHA256_HEX_LEN + 1],
                                  airlock_error *err);

/*
 * The same stream into a sink that hashes what it takes itself (the
 * artifact store's put does, for its own seal): once the bytes are in,
 * sink_digest(arg) answers the SHA-256 of every byte the sink was handed,
 * and the wrapper compares the source's digest with that one instead of a
 * hash of its own. The comparison stays here, structural; what goes is a
 * second SHA-256 over the same bytes on the receiving thread. A
 * sink_digest that fails fails the stream with its error.
 */
typedef int (*airlock_workspace_sink_digest)(void *arg, char ret[AIRLOCK_SHA256_HEX_LEN + 1],
                                             airlock_error *err);
int airlock_workspace_read_stream_hashed(airlock_workspace *w, const char *path,
                                         uint64_t max_bytes, airlock_workspace_sink sink,
                                         airlock_workspace_sink_digest sink_digest, void *arg,
                                         uint64_t *ret_size,
                                         char ret_source_sha256[AIRLOCK_SHA256_HEX_LEN + 1],
                                         airlock_error *err);

/*
 * The pull side of the same stream, for a server that hands the bytes to
 * a transport of its own (the service's HTTP core reads a piece whenever
 * the client's socket takes one). Only an adapter that streams by pull
 * has it: the remote adapter's stream is push-only and open fails with
 * NotImplemented saying so.
 *
 * open: as airlock_workspace_read_stream's rules; *ret_size is the file's
 * size, exactly the bytes read will hand out. The stream holds a
 * reference to the workspace but no call bracket between reads, so the
 * owner's end (destroy) never waits for a slow reader: a read after it
 * fails with ExecutionRejected. read: the next at most max bytes, hashed;
 * *ret_n 0 at the end, only once the file was found unchanged. digest:
 * after read reached the end, the SHA-256 of every byte read. close:
 * anything, NULL included, at any point. None of them is thread-safe on
 * one stream.
 */
typedef struct airlock_workspace_stream airlock_workspace_stream;
int airlock_workspace_stream_open(airlock_workspace *w, const char *path, uint64_t max_bytes,
                                  airlock_workspace_stream **ret, uint64_t *ret_size,
                                  airlock_error *err);
int airlock_workspace_stream_read(airlock_workspace_stream *s, void *buf, size_t max,
                                  size_t *ret_n, airlock_error *err);
int airlock_workspace_stream_digest(airlock_workspace_stream *s,
                                    char ret[AIRLOCK_SHA256_HEX_LEN + 1], airlock_error *err);
void airlock_workspace_stream_close(airlock_workspace_stream *s);

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
