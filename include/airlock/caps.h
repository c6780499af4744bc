/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_CAPS_H
#define AIRLOCK_CAPS_H

/*
 * Every cap on a buffer that untrusted input fills, in one table (curl's
 * dynbuf.h keeps its caps the same way), so a reviewer audits them in one
 * place: each is a number, the input it bounds, and why it is that number.
 * Past a cap the input is refused (or, where its comment says so, cut),
 * never grown into.
 *
 * Why here, under include/ and not beside the code: several of these are
 * part of the public contract (a caller sizes a path buffer with
 * AIRLOCK_PATH_MAX, every door checks AIRLOCK_OUTPUT_BYTES_MAX, a client
 * keeps a CONNECT head under AIRLOCK_CONNECT_REQUEST_MAX), and a public
 * header cannot include one under src/. The ones only the library reads sit
 * in the same table, in the sections marked "internal": a caller may read
 * them, but they are not a promise and may change.
 */

#include <stddef.h>
#include <stdint.h>

/* ---- workspace paths (the port's rules 1 and 4) ---------------------------- */
/* One path component: the kernel's NAME_MAX. */
#define AIRLOCK_PATH_COMPONENT_MAX 255
/* The resolved result, "/workspace/...": the kernel's PATH_MAX. */
#define AIRLOCK_PATH_MAX 4096
/* FileChange.path: a workspace path's whole length (the same bound). */
#define AIRLOCK_FC_PATH_MAX AIRLOCK_PATH_MAX
/* A listing's path text (airlock_workspace_listdir, every adapter): the sum
 * over its entries of strlen(path) + 1. The entries are the sorted prefix
 * that fits both this and max_entries, and "truncated" says there was more.
 * A count alone does not bound it: 100,000 entries under a 4,000-byte
 * directory are 400 MB of paths (the service's answer of them was 405 MB,
 * built at +1.6 GiB). With this, the service's JSON answer is at most
 * 5 * 2 MiB of path text (the lossless text form spends at most 5 bytes on
 * a byte) plus 64 bytes of framing on each of at most
 * AIRLOCK_SERVICE_LISTDIR_MAX entries (6.1 MiB): 16.1 MiB, inside the
 * 64 MiB a client decodes (AIRLOCK_JSON_INPUT_MAX). 2 MiB still lists
 * 100,000 names of 20 bytes at the root whole, or 500 of the longest
 * paths. */
#define AIRLOCK_WORKSPACE_LISTDIR_BYTES_MAX ((size_t)2 << 20)
/* One piece of a streamed workspace file (airlock_workspace_read_stream,
 * airlock_workspace_stream_read): the most any adapter hands a sink at once
 * and the one buffer a stream holds, whatever the file's size. 128 KiB: a
 * few hundred of them in flight cost tens of MiB at most, and a piece that
 * size already amortizes the read, hash and send of each over enough bytes
 * that the export runs near the disk's and SHA-256's speed (bench_export). */
#define AIRLOCK_WORKSPACE_STREAM_CHUNK ((size_t)128 << 10)

/* ---- identifiers ------------------------------------------------------------- */
/* tenant_id and run_id: they end up in storage keys and log lines. */
#define AIRLOCK_ID_MAX 128

/* ---- sandbox.run_command: the request and its result ------------------------ */
/* The whole argument vector (the specification's default). */
#define AIRLOCK_RUN_COMMAND_ARGV_MAX_BYTES ((size_t)64 * 1024)
/* The ceiling of maximum_output_bytes, checked at the port for every door.
 * Output is held in memory and costs about ten times its size on its way
 * to a JSON result (escaping and the encoder's copies), so without it one
 * request could take gigabytes of the service (200 MiB took 4 GB). */
#define AIRLOCK_OUTPUT_BYTES_MAX (16LL << 20)

/* ---- JSON ---------------------------------------------------------------------- */
/* One document given to a decoder: jansson builds the whole tree in memory,
 * so this bounds what one input can make the service allocate. */
#define AIRLOCK_JSON_INPUT_MAX (64u * 1024u * 1024u)
/* The memory one decode of n bytes may hold (src/core/json_decode.c: jansson's
 * tree is built in an arena charged against this; past it the decode is
 * refused, never aborted):
 *   BASE + DENSE_FACTOR * min(n, DENSE_BYTES) + FACTOR * (n - that).
 * Why these: jansson's tree of empty objects ("[{},{},...]") costs about
 * 80 times its text (a hashtable and its buckets each), while strings,
 * the bulk of any large document we accept (stdin in base64), cost at
 * most 3 times theirs (the token buffer doubling, then the copy). A small
 * document may be dense (limits, a policy of short host names): the first
 * MiB may cost 32 times, every byte after it 4. So a provision body at its
 * cap (260 KiB) holds at most 9.1 MiB while it decodes, and an execute
 * body at 64 MiB 285 MiB (4.5 times). Measured (tests/test_service.c,
 * dense_*): 260 KiB of empty objects in a provision raised the service's
 * peak by 9.8 MiB, refused (41.8 MiB before the budget, when the spec was
 * parsed, dumped and parsed again); 8 MiB in an execute by 69 MiB (650
 * MiB before); an execute with 8 MiB of stdin (11 MiB of body) by 44 MiB,
 * the client's copies included. */
#define AIRLOCK_JSON_DECODE_BASE ((size_t)1 << 20)
#define AIRLOCK_JSON_DECODE_DENSE_BYTES ((size_t)1 << 20)
#define AIRLOCK_JSON_DECODE_DENSE_FACTOR 32u
#define AIRLOCK_JSON_DECODE_FACTOR 4u
/* An EnvironmentSpec's JSON, both ways (the encoder refuses to write a
 * longer one, the decoder to read it): what a spec legitimately holds is
 * ids, a digest, six limits, an egress policy and an environment mapping.
 * A policy of 1,024 destinations (AIRLOCK_EGRESS_DESTINATIONS_MAX) with
 * 100-byte names and a few ports each is about 130 KiB; an environment of
 * a few dozen variables a few KiB. 256 KiB holds both with room, and keeps
 * a provision's decode at a few MiB. A larger environment is refused at
 * the door that encodes it, naming this limit. */
#define AIRLOCK_SPEC_JSON_MAX (256u * 1024u)

/* ---- the service credential (airlock_credential_file_read) ------------------ */
/* The file is one bearer token; anything larger is not one. */
#define AIRLOCK_CREDENTIAL_FILE_MAX 4096
/* A shorter token is guessable whatever the comparison costs. */
#define AIRLOCK_CREDENTIAL_MIN_BYTES 16

/* ---- files_changed: the walk of a tree the command shaped ------------------- */
/* Directory nesting the walk enters; deeper sets truncated. */
#define AIRLOCK_SNAPSHOT_DEPTH_MAX 256
/* The max_path_bytes for a service's walks: 16 MiB of path text bounds one
 * snapshot's strings (entries add ~48 bytes each, bounded by max_entries)
 * and is 4000 paths of the longest kind or 500k of 32 bytes. */
#define AIRLOCK_SNAPSHOT_PATH_BYTES_MAX ((size_t)16 << 20)
/* A result's listing, in bytes of its JSON. The core cuts every adapter's
 * result to it where the result leaves the adapter (src/core/exec.c, the
 * wrapper every mechanism's execute goes through, the remote adapter's
 * too): the entries kept are the sorted prefix that fits both this and
 * files_changed_max, and files_changed_truncated says there were more, as
 * it does for the count. An entry is charged AIRLOCK_FC_JSON_ENTRY_OVERHEAD
 * plus AIRLOCK_FC_JSON_PATH_FACTOR bytes per byte of its path: the path's
 * lossless text form spends at most five bytes on a byte (a byte that is
 * not text is U+FFFD and two hex digits; a '"' or a backslash is two), and
 * the rest of an entry is at most 163 bytes ({"path":"","change":
 * "MODIFIED","kind":"BLOCK_DEVICE","size_bytes":<19 digits>,"sha256":
 * "<64 hex digits>"} and its comma; tests/test_json.c measures it).
 * Why a byte bound: files_changed_max may be set up to 10,000 (the spec's
 * ceiling), and 10,000 paths of 4,085 bytes that are not text are 196 MiB
 * of JSON; past ~1,090 of them the result no longer fit the decoders' cap,
 * the service could not answer it, and the command's result was lost
 * (ExecutionUnavailable) though every cap held. With it, the whole result
 * is at most AIRLOCK_RESULT_JSON_WORST:
 *   both streams as base64, 2 * (16 MiB / 3 + 1) * 4     42.7 MiB
 *   the listing                                          20   MiB
 *   the rest (exit code, flags, killed_by, duration, and
 *   the stream's {"event":"result","result":} around it)  < 4 KiB
 * = 62.7 MiB, under AIRLOCK_JSON_INPUT_MAX (64 MiB), which src/core/exec.c
 * asserts. 20 MiB keeps the default files_changed_max (1,000) whole at any
 * names: 1,000 of the longest paths charged as above are 19.7 MiB. */
/* files_changed_max, a listing's count cap, is at most this on both sides
 * of the service (the specification's ceiling): the settings refuse more
 * (limits.defaults and limits.ceilings), and a core accepts a listing of up
 * to this many from any adapter, then cuts it to its own files_changed_max
 * and marks it truncated. The remote adapter's listing is cut by the
 * service's own setting, which its client cannot see: a client whose cap
 * was lower than the service's refused every longer listing as an adapter
 * bug, and the command's result was lost. */
#define AIRLOCK_FILES_CHANGED_MAX 10000
#define AIRLOCK_FC_JSON_ENTRY_OVERHEAD 192u
#define AIRLOCK_FC_JSON_PATH_FACTOR 5u
#define AIRLOCK_FILES_CHANGED_JSON_MAX ((size_t)20 << 20)
#define AIRLOCK_RESULT_JSON_REST_MAX 4096u
#define AIRLOCK_RESULT_JSON_WORST                                                                  \
	(2 * ((size_t)AIRLOCK_OUTPUT_BYTES_MAX / 3 + 1) * 4 + AIRLOCK_FILES_CHANGED_JSON_MAX +      \
	 AIRLOCK_RESULT_JSON_REST_MAX)

/* ---- egress policy and host names ------------------------------------------- */
/* A policy file: bounds what libyaml is asked to tokenize. */
#define AIRLOCK_EGRESS_POLICY_INPUT_MAX (1u << 20)
/* Destinations in one policy: an allowlist, not a copy of the internet. */
#define AIRLOCK_EGRESS_DESTINATIONS_MAX 1024
/* A host name: RFC 1035's 253 characters without the trailing dot. */
#define AIRLOCK_HOSTNAME_MAX 253
/* Addresses one name may resolve to: a resolver that claims more has
 * answers nobody checked, and the evaluation fails closed. */
#define AIRLOCK_EGRESS_ADDRESSES_MAX 32
/* A URL given to the curl door, each hop (longer is ToolValidationError). */
#define AIRLOCK_EGRESS_CURL_URL_MAX 8192

/* ---- the CONNECT request a sandbox sends the proxy --------------------------- */
/* The whole head, terminator included: what the proxy holds per tunnel of
 * sandbox bytes before the policy has answered. */
#define AIRLOCK_CONNECT_REQUEST_MAX 8192
/* Header fields read past (the proxy needs none of them). */
#define AIRLOCK_CONNECT_FIELDS_MAX 64
/* The authority's host, [A-Za-z0-9.-]{1,255} or a bracketed literal (kept
 * with its brackets so the evaluation sees and refuses it). */
#define AIRLOCK_CONNECT_HOST_MAX 255

/* ---- image builds: the request ---------------------------------------------- */
/* Bounds on what a build accepts (airlock/image_build.h): extra packages on
 * top of the defaults, and the length of one package's name. */
#define AIRLOCK_IMAGE_EXTRA_PACKAGES_MAX 256
#define AIRLOCK_IMAGE_PACKAGE_NAME_MAX 128

/* ---- the execution service's API (docs/service-api.md) ---------------------- */
/* libmicrohttpd's connection memory limit: the request line and the header
 * block live in it (with the read buffer), so a client cannot make one
 * connection hold more. A handle header is a few hundred bytes. */
#define AIRLOCK_SERVICE_HEADER_MAX (32u * 1024u)
/* A workspace write's body when the service is configured with none: the
 * body is held whole, since nothing is written unless all of it arrived. */
#define AIRLOCK_SERVICE_WRITE_MAX_DEFAULT ((size_t)64 << 20)
/* A workspace read's max_bytes: the file is held whole to set
 * Content-Length, so this bounds what one read can make the service hold. */
#define AIRLOCK_SERVICE_READ_MAX ((size_t)64 << 20)
/* A listdir's max_entries. */
#define AIRLOCK_SERVICE_LISTDIR_MAX 100000
/* A workspace stream's max_bytes (GET .../workspace/stream): the file is
 * never held (one AIRLOCK_WORKSPACE_STREAM_CHUNK at a time), so this bounds
 * only how long one answer may take: 64 GiB, past any workspace volume. */
#define AIRLOCK_SERVICE_STREAM_FILE_MAX ((uint64_t)64 << 30)
/* A workspace stream's slowest honest reader, bytes per second: the answer
 * must be taken within the request timeout plus its size at this rate, so
 * a client that trickles holds its connection (and the file's descriptor)
 * for a bounded time. 1 MiB/s is far below any worker on the service's
 * network and still cuts a 256 MiB trickle after about 4 minutes. */
#define AIRLOCK_SERVICE_STREAM_MIN_RATE ((uint64_t)1 << 20)
/* The output events a streamed execute holds for a client that is not
 * reading (base64 lines): past it, output is counted in a "dropped" event
 * instead (the result still holds every byte). */
#define AIRLOCK_SERVICE_STREAM_BUFFER_MAX ((size_t)1 << 20)
/* One output event's data before base64: a large chunk is split so no line
 * is much bigger than a pipe's worth. */
#define AIRLOCK_SERVICE_EVENT_CHUNK (48u * 1024u)
/* Output is coalesced into events, not sent one per pipe read: a read of
 * one byte is ~51 bytes of event, so 2.7 M one-byte writes made a 134 MiB
 * stream, over the remote adapter's cap, and the command's result was lost.
 * An event is made when a stream's pending bytes fill a chunk, when the
 * oldest pending byte has waited AIRLOCK_SERVICE_STREAM_FLUSH_MS (the
 * latency a watcher sees), and at the command's end. Events made before
 * their chunk was full are budgeted: past AIRLOCK_SERVICE_STREAM_SMALL_
 * EVENTS_MAX, output waits for a full chunk or the end (at a flush every
 * 20 ms on both streams the budget lasts 2,621 s, longer than the
 * 1,800 s wall-clock ceiling of the strictest profile). */
#define AIRLOCK_SERVICE_STREAM_FLUSH_MS 20
#define AIRLOCK_SERVICE_STREAM_SMALL_EVENTS_MAX ((size_t)262144)
/* The largest a streamed execute can be when its result is within its caps,
 * which the remote adapter's cap on a whole stream (REMOTE_STREAM_BODY_MAX,
 * 128 MiB, checked against this where it is defined) must hold:
 *   - output events: at most 51 bytes of framing and padding each
 *     ({"event":"output","stream":"stdout","data":""} and a newline, 47,
 *     and base64's rounding, at most 4) around 4/3 of their bytes; the
 *     bytes are at most maximum_output_bytes per stream (the mechanism's
 *     capped buffer is what is delivered), so 2 * 16 MiB * 4/3 = 42.7 MiB;
 *     the events are the small ones (the budget), the full chunks
 *     (32 MiB / 48 KiB = 683) and one of the other stream's before each
 *     full chunk, and the two at the end: 262,144 + 1,368 events * 51 B =
 *     12.8 MiB;
 *   - started, dropped (two) and the last line's framing: under 512 bytes;
 *   - the result line: at most AIRLOCK_RESULT_JSON_WORST (62.7 MiB: both
 *     streams as base64 and a listing cut to AIRLOCK_FILES_CHANGED_JSON_MAX
 *     at any files_changed_max), under the decoders' cap,
 *     AIRLOCK_JSON_INPUT_MAX (64 MiB), which is counted here.
 * In all 119.5 MiB. */
#define AIRLOCK_SERVICE_EVENT_OVERHEAD_MAX 51u
#define AIRLOCK_SERVICE_STREAM_WORST_BYTES                                                         \
	((AIRLOCK_SERVICE_STREAM_SMALL_EVENTS_MAX +                                                \
	  2 * (2 * (size_t)AIRLOCK_OUTPUT_BYTES_MAX / AIRLOCK_SERVICE_EVENT_CHUNK + 1) + 2) *      \
	         AIRLOCK_SERVICE_EVENT_OVERHEAD_MAX +                                              \
	 2 * ((size_t)AIRLOCK_OUTPUT_BYTES_MAX / 3 + 1) * 4 + 512 + (size_t)AIRLOCK_JSON_INPUT_MAX)
/* A provision's body: {"spec": ..., "environment_id": ...}, the spec at
 * most AIRLOCK_SPEC_JSON_MAX and the envelope (an id of 64 bytes, the
 * names, whitespace) well under 4 KiB. Past it: 413 (AIRLOCK_SERVICE_OVERSIZE_DRAIN_MAX says when). */
#define AIRLOCK_SERVICE_PROVISION_BODY_MAX (AIRLOCK_SPEC_JSON_MAX + 4096u)
/* An execute's body: the command's stdin travels in it as base64, so it is
 * the JSON input limit (48 MiB of stdin); its decode is budgeted at 4.5
 * times its size (AIRLOCK_JSON_DECODE_*). */
#define AIRLOCK_SERVICE_EXECUTE_BODY_MAX AIRLOCK_JSON_INPUT_MAX
/* A request that carries no body (GET, DELETE, cancel) may still send a
 * small one ("{}"); it is read and ignored up to this. */
#define AIRLOCK_SERVICE_EMPTY_BODY_MAX 4096u
/* A body over its route's cap. With Content-Length it is answered 413 at
 * once (a client that sent only its head reads the answer without
 * sending the body), and then up to the declared length, at most this
 * much, is read and dropped within AIRLOCK_SERVICE_OVERSIZE_DRAIN_MS
 * before the connection closes: a close with unread bytes resets the
 * connection (or fails the client's send on a Unix socket) while a client
 * that sends its body whole is still sending, and it would never read the
 * answer. A chunked body is discarded as it comes, up to this much past
 * the cap, and answered 413 when it ends; past that its connection is
 * closed. Constant work per byte, nothing kept; only a client with the
 * credential gets here. */
#define AIRLOCK_SERVICE_OVERSIZE_DRAIN_MAX (16u << 20)
#define AIRLOCK_SERVICE_OVERSIZE_DRAIN_MS 3000
/* A PEM file given to the TLS listener (certificate chain, key, client CA). */
#define AIRLOCK_SERVICE_PEM_MAX (1u << 20)

/* ---- the reaper's question to the worker tier (docs/reaper.md) -------------- */
/* Sandboxes named in one POST /v1/reaper/stale: a pass over more live
 * sandboxes asks several times. 1024 entries of the largest ids (an
 * environment id's 63 bytes, a run id's 128, both of characters JSON
 * never escapes: airlock_id_valid), an epoch of 20 digits and the member
 * names, about 260 bytes each, are 0.26 MiB, under the worker's 1 MiB
 * body cap; the worker's database looks up at most
 * AIRLOCK_WORKER_DB_STALE_MAX in one call. */
#define AIRLOCK_REAPER_BATCH_MAX 1024
/* The worker tier's answer as the reaper reads it, headers and body
 * together: the stale ids of one batch are well under it (1024 ids of
 * 63 bytes, 0.07 MiB); past it the answer is refused, not grown. */
#define AIRLOCK_REAPER_ANSWER_MAX ((size_t)1 << 20)
/* The status line and header block of that answer. */
#define AIRLOCK_REAPER_HEADER_MAX 16384u
/* Connecting (and the TLS handshake) gives up after this; the whole
 * request, after min(service.reaper_interval_seconds,
 * AIRLOCK_REAPER_REQUEST_TIMEOUT_MS). */
#define AIRLOCK_REAPER_CONNECT_TIMEOUT_MS 5000
#define AIRLOCK_REAPER_REQUEST_TIMEOUT_MS 30000

/* ---- artifacts (include/airlock/port/artifact.h, docs/artifacts.md) ------------ */
/* One artifact's bytes, the default of every put's size_cap (the
 * specification's "default 512 MiB", "ArtifactStore"): a guard against a
 * runaway export filling the store's disk, not a product decision. A put
 * past its cap is abandoned mid-write and its temporary object removed;
 * the operator's configuration may set another cap per put. */
#define AIRLOCK_ARTIFACT_SIZE_CAP_DEFAULT ((int64_t)512 << 20)
/* The one buffer airlock_artifact_store_put pulls a stream through and a
 * reader is filled from: the object is never held in memory, so a put's
 * memory is this buffer whatever the object's size. 256 KiB: a larger one
 * measured no faster here (SHA-256 and the page cache set the pace), and
 * a concurrent put costs this much each. */
#define AIRLOCK_ARTIFACT_STREAM_BUF_BYTES ((size_t)256 << 10)

/* ---- internal: egress ------------------------------------------------------- */
/* One DNS label: RFC 1035. */
#define AIRLOCK_DNS_LABEL_MAX 63
/* A host as given to the evaluator: longer than any name with its trailing
 * dot or any address with brackets and a zone; past this the input is
 * refused without being looked at. */
#define AIRLOCK_EGRESS_HOST_INPUT_MAX 1024
/* DNS servers configured for the resolver ("ADDR[:PORT],..."). */
#define AIRLOCK_EGRESS_SERVERS_MAX 16
/* A frame on the proxy's control channel (the proxy parses sandbox bytes, so
 * the service reads its frames as untrusted): a policy of 1024 destinations
 * with long names and many ports fits. */
#define AIRLOCK_PROXY_FRAME_MAX (4u << 20)

/* ---- internal: settings, environment, credentials ------------------------------ */
/* The settings file: a real one is a few hundred bytes; the cap bounds what
 * libyaml is asked to tokenize. */
#define AIRLOCK_SETTINGS_INPUT_MAX (1u << 20)
/* The tier-1 list file: 256 names of at most 128 bytes, with room for
 * comments. */
#define AIRLOCK_TIER1_FILE_MAX (64u * 1024u)
/* The longest scalar accepted for any settings key (paths, digests, modes). */
#define AIRLOCK_SETTINGS_STRING_MAX 4096
/* auth_mode is a short word (dev, token, oidc). */
#define AIRLOCK_AUTH_MODE_MAX 64
/* An environment variable's name passed into a sandbox. */
#define AIRLOCK_ENV_NAME_MAX 128
/* An environment variable's value: the kernel refuses a single environment
 * string longer than MAX_ARG_STRLEN (32 pages) at execve; refusing here
 * names the variable instead of failing the start with E2BIG. */
#define AIRLOCK_ENV_VALUE_MAX (128u * 1024u)
/* The working directory put into PWD: the kernel's PATH_MAX. */
#define AIRLOCK_WORKDIR_MAX 4096
/* A credential reference is a name, not a payload. */
#define AIRLOCK_CREDENTIAL_REFERENCE_MAX 256
/* The static broker holds what a composition root configured: a handful of
 * entries. The cap keeps it a map and not a store. */
#define AIRLOCK_STATIC_CREDENTIALS_MAX 1024
/* A secret: credentials are short (a PEM private key is a few KiB); the cap
 * bounds what a broker can be asked to map. */
#define AIRLOCK_SECRET_MAX (1u << 20)

/* ---- internal: workspaces ------------------------------------------------------- */
/* The local workspace's provenance map (one per sandbox on native and
 * gvisor, held by the service): past either bound a write is refused rather
 * than the map growing without limit. A record costs its path, a NUL and
 * about 96 bytes (the record, the search tree's node, two allocations'
 * headers); the count alone let 100,000 records of 4-7 KB each hold
 * ~0.65 GiB per sandbox. 8 MiB holds ~1,900 records of the longest path
 * or ~54,000 of 60 bytes, and a service at max_sandboxes 64 holds at most
 * 512 MiB of them. A record whose file was deleted or replaced never
 * matches again: it is dropped when provenance() sees that, and a full map
 * is swept of every such record before a write is refused. */
#define AIRLOCK_LOCAL_RECORDS_MAX 100000
#define AIRLOCK_LOCAL_RECORDS_BYTES_MAX ((size_t)8 << 20)
/* The memory workspace (the fake's): ceilings that hold even when the fake
 * sets no limits: the workspace is host memory, and a runaway must not take
 * the host with it. */
#define AIRLOCK_MEMWS_FILES_HARD ((size_t)1000000)
#define AIRLOCK_MEMWS_BYTES_HARD ((size_t)1 << 30)
/* Its table of paths (each with its NUL), which the bytes above do not
 * count: a million files of 4,000-byte paths would be 4 GB. 64 MiB is
 * ~16,700 of the longest paths, or the million files at 66 bytes each. */
#define AIRLOCK_MEMWS_PATH_BYTES_HARD ((size_t)64 << 20)

/* ---- internal: the command line ------------------------------------------------- */
/* airlock run's standard input, held whole to hand the command. */
#define AIRLOCK_RUN_STDIN_MAX (16u * 1024u * 1024u)
/* airlock run's --env flags. */
#define AIRLOCK_RUN_ENV_FLAGS_MAX 64
/* airlock egress check's --resolve entries. */
#define AIRLOCK_CHECK_RESOLVE_MAX 64

/* ---- internal: the host (src/host/) ----------------------------------------- */
/* pids.max takes at most PID_MAX_LIMIT (4M on 64-bit); above it "max" says
 * the same thing, since no more pids than that can exist. */
#define AIRLOCK_CG_PIDS_LIMIT_MAX 4194304
/* Bounds for walking groups: the sandbox makes none of its own (it has no
 * write access to cgroupfs), so anything deeper is refused rather than
 * followed. */
#define AIRLOCK_CG_MAX_DEPTH 8
#define AIRLOCK_CG_MAX_ENTRIES 65536
/* Pids signalled per pass of the cgroup.procs fallback (a fork bomb makes
 * the file long; the rest waits for the next pass). */
#define AIRLOCK_CG_KILL_BATCH 256
/* A cgroupfs control file read whole (cgroup.controllers, *.events): none
 * read this way is near 4 KiB; one that does not fit is -EFBIG. */
#define AIRLOCK_CG_SMALL_FILE 4096
/* How deep a tree walk goes before it refuses (-ELOOP). */
#define AIRLOCK_HOST_TREE_DEPTH_MAX 256
/* An image's .packages sidecar: the recipe, the suite and a package list of
 * the defaults and at most AIRLOCK_IMAGE_EXTRA_PACKAGES_MAX names (about
 * 33 KiB) fit. */
#define AIRLOCK_IMAGE_SIDECAR_MAX (64u * 1024u)
/* The tail of mkfs.ext4's output kept for the error when it fails. */
#define AIRLOCK_VOLUME_MKFS_OUTPUT_MAX 4096
/* Bigger formatted images (very large volumes carry more bitmaps) are not
 * kept; they fall back to mkfs every time. */
#define AIRLOCK_VOLUME_IMAGE_MAX ((size_t)4 << 20)
#define AIRLOCK_VOLUME_IMAGE_EXTENTS_MAX 4096
/* The kernel's explanation of a failed fsconfig, read from the filesystem
 * context: its first message, cut to this for the error. */
#define AIRLOCK_VOLUME_FS_LOG_MAX 200

/* ---- internal: the image builder (src/image/) ------------------------------- */
/* The tail of debootstrap's and mkfs.erofs's output kept while they run. */
#define AIRLOCK_IMAGE_OUTPUT_TAIL_MAX 8192
/* Of that tail, what goes into the error message. */
#define AIRLOCK_IMAGE_OUTPUT_IN_MESSAGE 240
/* Of debootstrap.log's end (twice this is read), what goes into the error. */
#define AIRLOCK_IMAGE_LOG_IN_MESSAGE 160
/* The environment a build's programs get: a few fixed variables and the
 * proxy settings passed on from ours; a value too long to keep whole is left
 * out, never cut short. */
#define AIRLOCK_IMAGE_PROG_ENV_MAX 16
#define AIRLOCK_IMAGE_PROG_ENV_VALUE_MAX 2048
/* The host's apt sources read to find the mirror: one file, one deb822
 * field (Types, URIs, Suites; Enabled is yes or no), the files of
 * sources.list.d read, and a mirror URI. */
#define AIRLOCK_APT_FILE_MAX (1u << 20)
#define AIRLOCK_APT_FIELD_MAX 8192
#define AIRLOCK_APT_ENABLED_FIELD_MAX 64
#define AIRLOCK_APT_FILES_MAX 64
#define AIRLOCK_APT_MIRROR_MAX 1024
/* The start of /proc/self/uid_map read to tell the initial user namespace:
 * only its first line, three numbers, is parsed. */
#define AIRLOCK_IMAGE_UID_MAP_READ_MAX 256

/* ---- internal: the worker's database (src/worker/db.h) -------------------- */
/* The reaper's question: sandboxes named in one call. The service asks about
 * its live sandboxes, at most service.max_sandboxes; this bounds what one
 * question can make the worker look up in one transaction. */
#define AIRLOCK_WORKER_DB_STALE_MAX 65536
/* Ended claims' sandboxes returned by one call (the caller destroys them and
 * asks again): bounds the answer, not the table. */
#define AIRLOCK_WORKER_DB_ENDED_MAX 1024
/* The PostgreSQL connection string's file: one line of key=value pairs or a
 * URI; libpq's own longest useful strings are far below this. */
#define AIRLOCK_WORKER_DB_CONNINFO_MAX 4096
/* An artifact's filename as given (metadata, never a path): bytes of any
 * value, kept as they came and sanitized only where a download is named.
 * Above any filesystem's name (255) and the 10,000 bytes a hostile client
 * tries, and small enough that a listing of AIRLOCK_WORKER_DB_ARTIFACTS_MAX
 * rows stays in a few MiB. */
#define AIRLOCK_ARTIFACT_FILENAME_MAX 16384
/* What an artifact is charged against its tenant's byte cap
 * (worker.artifact_tenant_bytes_max): its size rounded up to whole blocks
 * (what the filesystem allocates), one block more for what every artifact
 * costs whatever its size (the object's inode and directory entry, its row
 * and the row's index entries), and its filename twice (kept hex-encoded
 * in the row). Without the fixed part, empty artifacts would be free:
 * 2,000 of them held 68 MB of database and 2,000 inodes while the cap read
 * zero. */
#define AIRLOCK_ARTIFACT_CHARGE_BLOCK 4096
/* The largest values the worker's artifact settings take: one artifact
 * 1 TiB, a tenant 1 PiB (the database's own bound, WORKER_DB_ARTIFACT_BYTES_MAX). */
#define AIRLOCK_ARTIFACT_SIZE_SETTING_MAX (INT64_C(1) << 40)
#define AIRLOCK_ARTIFACT_TENANT_BYTES_SETTING_MAX (INT64_C(1) << 50)
/* Artifact rows one call returns (a listing's page, the sweeper's batch):
 * bounds the answer, not the table. */
#define AIRLOCK_WORKER_DB_ARTIFACTS_MAX 1000

/* ---- internal: the worker's API (src/worker/worker.h) --------------------- */
/* A lease request's body: three members, a tenant id of at most 128 bytes
 * and two integers fit many times over. */
#define AIRLOCK_WORKER_LEASE_BODY_MAX 4096
/* A tool call's body: the argument vector's 64 KiB written as JSON, where
 * an escape takes up to six bytes a byte, and the call's few members. */
#define AIRLOCK_WORKER_TOOL_BODY_MAX (512u << 10)
/* artifact.export's text the model wrote: what one tool result can carry
 * (the tool's max_output_bytes). */
#define AIRLOCK_WORKER_EXPORT_TEXT_MAX (1u << 20)
/* artifact.export's body: that text written as JSON (an escape is at most
 * six bytes a byte), a path, a filename and the call's members. */
#define AIRLOCK_WORKER_EXPORT_BODY_MAX (7u << 20)
/* The reaper's question as the worker takes it: the service's batch (one
 * number for both sides) and the body's bytes (an entry is under 300
 * bytes). */
#define AIRLOCK_WORKER_REAPER_ENTRIES_MAX AIRLOCK_REAPER_BATCH_MAX
#define AIRLOCK_WORKER_REAPER_BODY_MAX (1u << 20)
/* Runs with a tool call or a sandbox in this worker at once. */
#define AIRLOCK_WORKER_CLAIMS_MAX 4096
/* The release's query string (epoch=N&tenant_id=T). */
#define AIRLOCK_WORKER_QUERY_MAX 512
/* The tokens file: its bytes, its lines with a token, and a token's length
 * (the shortest refuses a guessable one). */
#define AIRLOCK_WORKER_TOKENS_FILE_MAX (256u << 10)
#define AIRLOCK_WORKER_TOKENS_MAX 1024
#define AIRLOCK_WORKER_TOKEN_MIN 16
#define AIRLOCK_WORKER_TOKEN_MAX 256
/* The orchestration bridge's listener (src/worker/bridge.c): each of a
 * connection's first two lines (the service's preface, the sandbox's
 * token) with its '\n' (an environment id or a 43-byte token fit many
 * times over); connections at once, each a thread; of them, those naming
 * one environment (the service relays at most as many per sandbox). */
#define AIRLOCK_WORKER_BRIDGE_LINE_MAX 256
#define AIRLOCK_WORKER_BRIDGE_CONNECTIONS_MAX 64
#define AIRLOCK_WORKER_BRIDGE_PER_ENVIRONMENT_MAX 8
/* Connections whose environments belong to one tenant, at once: a quarter
 * of the worker's, so a tenant holding connections open (idle while a
 * bridged call waits for an approval, or never authenticating) leaves
 * room for the others. */
#define AIRLOCK_WORKER_BRIDGE_PER_TENANT_MAX (AIRLOCK_WORKER_BRIDGE_CONNECTIONS_MAX / 4)
/* A download's Content-Disposition (src/http/http.h): the ASCII fallback
 * filename="..." at most FALLBACK bytes (every system's name fits; a
 * longer name is cut, its whole bytes stay in the metadata), and the RFC
 * 8187 filename*= value at most STAR bytes percent-encoded (a prefix of
 * whole characters when longer): the header must fit in the connection's
 * memory (AIRLOCK_WORKER_HEADER_MAX) beside the request's head, and a
 * 16 KiB name encoded three to one would not. MAX is the whole value with
 * its fixed parts and the NUL. */
#define AIRLOCK_HTTP_DISPOSITION_FALLBACK_MAX 128
#define AIRLOCK_HTTP_DISPOSITION_STAR_MAX 2048
#define AIRLOCK_HTTP_DISPOSITION_MAX                                                               \
	(sizeof("attachment; filename=\"\"; filename*=UTF-8''") +                                    \
	 AIRLOCK_HTTP_DISPOSITION_FALLBACK_MAX + AIRLOCK_HTTP_DISPOSITION_STAR_MAX)
/* An upload's or a listing's query (POST /v1/artifacts?tenant_id=T&
 * filename=F&media_type=M): the filename percent-encoded is most of it,
 * and the request's head (AIRLOCK_WORKER_HEADER_MAX) bounds it anyway; a
 * name longer than that encoded comes from an export, not an upload. */
#define AIRLOCK_WORKER_ARTIFACT_QUERY_MAX AIRLOCK_WORKER_HEADER_MAX
/* The ETag a download's answer carries, as the worker client reads it:
 * the worker's is "sha256:<64 hex>" quoted (74 bytes); a longer one is no
 * tag of the worker's and is refused, not kept. */
#define AIRLOCK_WORKER_CLIENT_ETAG_MAX 128
/* The attach body ({"tenant_id": T}): one id fits many times over. */
#define AIRLOCK_WORKER_ATTACH_BODY_MAX 4096
/* The worker API's header block and connections (its HTTP core). */
#define AIRLOCK_WORKER_HEADER_MAX 16384
#define AIRLOCK_WORKER_CONNECTIONS_MAX 256

/* Open descriptors per sandbox process (RLIMIT_NOFILE, soft and hard, on
 * every mechanism; the hard limit equal, so it cannot be raised back):
 * memory_bytes / (pids_max * AIRLOCK_SANDBOX_FILE_COST), at most
 * AIRLOCK_SANDBOX_NOFILE and at least AIRLOCK_SANDBOX_NOFILE_MIN
 * (exec/kobjects.h computes it). The limit is per process, so a sandbox's
 * total is this times pids_max: the quotient makes that total
 * memory_bytes / AIRLOCK_SANDBOX_FILE_COST, whatever pids_max is.
 *
 * Why a total derived from the memory limit. Every open file's kernel
 * objects are charged to the sandbox's memory cgroup, but two things a
 * descriptor holds are not: its entry in the host's file table
 * (fs.file-max, shared by every tenant: past it only host root opens
 * files, and every provision fails), and, for a TCP socket, the buffers
 * the kernel force-charges past the cgroup's TCP cap to the host-wide
 * tcp_memory_allocated (a stream socket's send is forced when its queue is
 * at its sndbuf; a receive is forced when the queue is empty), and the
 * receive queue of a connection still in a listener's accept queue, which
 * belongs to no cgroup until it is accepted. At a flat 1024 per process one
 * sandbox at the default limits (512 pids, 2 GiB) held 520,809 host files,
 * and with 18k connections 2.4 GiB of host TCP memory past tcp_mem[2].
 *
 * The cost per descriptor is bounded by the sandbox's network namespace
 * (host/netns.h, host_netns_harden: lo's MTU and GSO size
 * AIRLOCK_SANDBOX_LO_MTU, tcp_rmem's default AIRLOCK_SANDBOX_TCP_RMEM_DEFAULT)
 * and by SO_RCVBUF being a no-op on native (seccomp.c): measured with 3,600
 * sockets under a 64 MiB limit, both ends of each connection sending and
 * never reading, 11 KiB of host TCP memory per socket past the cgroup's cap
 * (73 KiB at lo's default 64 KiB MTU), and 12.5 KiB per connecting
 * descriptor left unaccepted (with a listener's SO_RCVBUF raised, up to the
 * 8 MiB it allows: 400 such connections held 1.5 GiB).
 * AIRLOCK_SANDBOX_FILE_COST is 16 KiB of that per descriptor, so:
 *
 *   host TCP memory <= memory_bytes / 4          (the cgroup's TCP cap, v1)
 *                    + memory_bytes / 16 KiB * 12.5 KiB  (~0.78 x the limit)
 *   host files      <= memory_bytes / 16 KiB     (2 GiB: 131,072, 5% of
 *                                                 fs.file-max here)
 *
 * The TCP bound above counts descriptors, and two kinds of socket hold
 * none: a connection in a listener's accept queue whose client has closed
 * (about 13 KiB each), and a TCP socket mapped with mmap (tcp_mmap) whose
 * descriptor was then closed (3,000 connections held with 5 descriptors,
 * 85 MB of host TCP memory under 64 MiB). Sockets are therefore also
 * counted by the kernel itself, per sandbox, whatever holds them: see
 * AIRLOCK_SANDBOX_SOCKET_COST. A file mapped with mmap keeps its host
 * file-table entry too (about 400 bytes charged to the sandbox's memory
 * cgroup each: 60,000 held with 4 descriptors open under 64 MiB); that is
 * bounded by the memory limit alone (and by vm.max_map_count per process),
 * not by the arithmetic above: a provision is admitted only when the
 * host's file table has room for memory_bytes / AIRLOCK_HOST_FILE_CHARGE
 * more entries (below).
 *
 * What programs get: 2 GiB and 512 pids (the defaults): 256 per process;
 * 2 GiB and 64 pids: 1024; 256 MiB and 64 pids: 256; 64 MiB and 64 pids:
 * 64. Below AIRLOCK_SANDBOX_NOFILE_MIN the floor holds instead (a process
 * needs its standard streams, libraries and a few sockets), and the total
 * is then pids_max * AIRLOCK_SANDBOX_NOFILE_MIN: the bounds above hold
 * whenever memory_bytes >= pids_max * 512 KiB.
 *
 * The per-process limit also caps what one sandbox user can have in flight
 * in SCM_RIGHTS messages (the kernel compares that count with
 * RLIMIT_NOFILE). */
#define AIRLOCK_SANDBOX_NOFILE 1024
#define AIRLOCK_SANDBOX_NOFILE_MIN 32
#define AIRLOCK_SANDBOX_FILE_COST ((int64_t)16 << 10)

/* The inet sockets one sandbox can hold at once, all its processes
 * together: memory_bytes / AIRLOCK_SANDBOX_SOCKET_COST, at least
 * AIRLOCK_SANDBOX_SOCKETS_MIN and at most AIRLOCK_SANDBOX_SOCKETS_MAX
 * (exec/kobjects.h computes it; host/sockbudget.c keeps it). A socket
 * counts from its creation until the kernel releases it and, for a TCP
 * connection or listener, until it also reached TCP_CLOSE: a descriptor, a
 * memory mapping of it (tcp_mmap), a message in flight, a listener's
 * accept queue holding it, or a closed connection still sending what it
 * queued (an orphan) all keep it counted, and every connection a
 * listener of the sandbox completes counts as one more socket (until it is
 * accepted and released; one still unaccepted when its listener closes
 * keeps its place until the sandbox ends, since the kernel frees it with
 * no hook to see: host/sockbudget.c says why that is the safe side). Past
 * the budget socket() fails with EPERM and the sandbox's listeners drop
 * handshakes (the client retries, as when a backlog is full).
 *
 * Why 32 KiB, twice the descriptor cost: a socket that no descriptor
 * holds still holds its buffers, and what those take of the host's TCP
 * memory past the cgroup's cap was measured at 20 KiB per socket for
 * mapped connections whose two ends sent until the kernel stopped taking
 * more (1,023 connections, 2,046 sockets: 41 MB under 64 MiB), and 26 KiB
 * per connection left unaccepted after its client sent 16 KiB and closed
 * or reset it (4,087: 93-105 MB under 128 MiB, the closed clients
 * lingering as orphans with their unsent data, counted since). At 16 KiB a
 * 64 MiB sandbox could map
 * 2,047 connections, and 2,047 held 81-82 MB (measured under 128 MiB),
 * past its limit; at 32 KiB what they hold measured 0.6-0.8 x
 * memory_bytes. The same budget on every mechanism: on
 * gvisor it counts the host sockets the runtime opens for the sandbox
 * (egress mode, hostinet: the sentry refuses to map a socket, ENODEV, but
 * its unaccepted connections count); without egress the sandbox's
 * sockets are the sentry's own netstack, in its memory, and the budget
 * counts the runtime's few host sockets only.
 *
 * 64 MiB: 2,048 sockets; 2 GiB (the default): 65,536. The floor keeps a
 * tiny sandbox able to run a client and a server; the ceiling (8 GiB's
 * worth) bounds the budget's own bookkeeping (the kernel's hash element
 * for an 8-byte key and value, under 100 bytes, per live socket, charged
 * to the service's memory cgroup, since the map is the service's): about
 * 25 MiB at most per sandbox. */
#define AIRLOCK_SANDBOX_SOCKET_COST ((int64_t)32 << 10)
#define AIRLOCK_SANDBOX_SOCKETS_MIN 64
#define AIRLOCK_SANDBOX_SOCKETS_MAX 262144

/* The host's file table (fs.file-max) must have this many free entries for
 * a provision to start (host/filetable.h), besides the entries the sandbox
 * itself can hold (AIRLOCK_HOST_FILE_CHARGE): a sandbox's start opens a few
 * dozen (gvisor's runtime a few hundred), and past the table's end every
 * open on the host fails, so starting one more tenant there would only
 * fail in some later step, or take the last entries host daemons need. */
#define AIRLOCK_HOST_FILES_FREE_MIN 4096

/* The least a sandbox's memory cgroup is charged for one host file-table
 * entry it holds, whatever holds it: a provision needs
 * memory_bytes / AIRLOCK_HOST_FILE_CHARGE free entries in the table
 * (host/filetable.h), so one sandbox can never fill it.
 *
 * The cheapest holder is a mapping whose descriptor was closed: the same
 * file opened, mapped (one page, never touched) and closed again and again
 * leaves a struct file and a VMA, both from SLAB_ACCOUNT caches (filp and
 * vm_area_struct, 192 bytes each on this 6.18 kernel), and no descriptor,
 * so RLIMIT_NOFILE does not count it. Measured here (cgroup v1, kernel
 * memory charged to memory.usage_in_bytes): 397.9 bytes per entry over
 * 20,000 and 50,000 entries in a bare memory cgroup (the rest is maple-tree
 * nodes); a native sandbox under a 64 MiB limit, four processes mapping
 * until stopped, was killed MEMORY after the host's fs.file-nr had risen
 * by about 148,500, below 64 MiB / 384 = 174,762. Under gvisor the guest's
 * mappings are the sentry's, not host files (110,000 of them raised the
 * host's count by under 1,000): the same bound holds with room to spare.
 *
 * 384, the two objects alone, is below every measurement, so the bound
 * errs toward refusing. At the default 2 GiB it is 5,592,405 entries,
 * above this host's fs.file-max of 2,466,170 (the kernel's default, about
 * RAM / 10 KiB): such a host must raise fs.file-max (scripts/setup.sh sets
 * LONG_MAX, as systemd does at boot) or every default provision is
 * refused. */
#define AIRLOCK_HOST_FILE_CHARGE ((int64_t)384)

/* lo's MTU and GSO size in a sandbox's own network namespace: the largest
 * packet, and so the largest buffer one forced charge holds (at the 64 KiB
 * default each socket past the cap held 73 KiB, at 4 KiB 16 KiB, at 1500
 * 11 KiB). 4 KiB keeps loopback transfers (the egress proxy's tunnel is
 * one) at page-sized packets. */
#define AIRLOCK_SANDBOX_LO_MTU 4096
/* tcp_rmem's middle value (a new socket's receive buffer) in a sandbox's
 * network namespace, instead of 128 KiB: what a connection waiting
 * unaccepted in a listener's queue can take, since nothing reads it and so
 * autotuning never grows it; a socket that is read grows as before, to
 * tcp_rmem's maximum. */
#define AIRLOCK_SANDBOX_TCP_RMEM_DEFAULT 16384

/* ---- internal: the gvisor mechanism (src/exec/gvisor/) ----------------------- */
/* What is kept of a runsc housekeeping call's output (the tail): runsc's
 * JSON for `events --stats` and `list` is well under it; what a sandbox can
 * make runsc print (its logs on error) is cut, never grown. */
#define AIRLOCK_GVISOR_RUNSC_OUTPUT_MAX ((size_t)64 << 10)
/* What is read of runsc run's output while waiting for the guest's ready
 * line: its tail is kept, so warnings before it cannot hide it. */
#define AIRLOCK_GVISOR_READY_READ_MAX 4096
/* The sentry's pid file, read once per provision. */
#define AIRLOCK_GVISOR_PID_FILE_MAX 32

/* ---- internal: the bridge's service end (src/exec/bridge.c) ----------------- */
/* Relayed connections one sandbox holds at once: each is a thread, two
 * descriptors and two buffers of UTIL_RELAY_BUFFER of the service's, and a
 * script needs one or two; the one past it is accepted and closed. The
 * worker takes as many naming one environment
 * (AIRLOCK_WORKER_BRIDGE_PER_ENVIRONMENT_MAX). */
#define AIRLOCK_SERVICE_BRIDGE_CONNECTIONS_MAX 8
/* New bridge connections one sandbox may open per second (the listener is
 * not accepted from past it: the backlog fills and the sandbox's connect
 * waits, which costs the host nothing). Each connection costs the service
 * a thread and a connection to the worker, and the worker a database
 * lookup, none of it charged to the sandbox's CPU: measured without the
 * bound, one script made 65,000 connections to the worker in 3 s. A
 * bridged tool call is one connection, so 20 a second is far above any
 * orchestration script's need. The burst is the cap of connections at
 * once. */
#define AIRLOCK_SERVICE_BRIDGE_CONNECTS_PER_SECOND 20
/* The sandbox's listener's accept queue: a connection waiting in it is
 * charged to no sandbox, so it is short. */
#define AIRLOCK_SERVICE_BRIDGE_BACKLOG 8
/* Entries of the image's directory the socket's mount goes over (empty
 * directories, made again in the mount: the default image's /run holds
 * two); a directory holding more is refused. */
#define AIRLOCK_SERVICE_BRIDGE_KEEP_MAX 16

/* ---- internal: the native mechanism (src/exec/native/) ----------------------- */
/* Kept fanotify groups, in this process (see native_kept_arm, kept.c): they
 * count against host root's fs.fanotify.max_user_groups (128 by default),
 * which every root daemon shares. */
#define AIRLOCK_NATIVE_KEPT_GROUPS_MAX 32
/* A kept snapshot stays in the service while the sandbox is idle, one per
 * sandbox: only one of at most this many bytes is kept (entries and path
 * text; 8 MiB is ~60,000 entries of 100-byte paths). A larger workspace
 * is walked twice, as before. */
#define AIRLOCK_NATIVE_KEPT_BYTES_MAX ((size_t)8 << 20)
/* Reads of the drain that arms the kept group, each of
 * AIRLOCK_KEPT_DRAIN_READ_BYTES: more than the 16384 events a queue holds;
 * the events read are dropped. */
#define AIRLOCK_KEPT_DRAIN_READS_MAX 4096
#define AIRLOCK_KEPT_DRAIN_READ_BYTES 4096
/* The read that asks whether any fanotify event is queued: any event at
 * all, or any error but "none queued", is a change. */
#define AIRLOCK_KEPT_PROBE_READ_BYTES 256
/* The starter's candidate path for the command's argv[0], a directory of
 * the image's fixed PATH joined with the name: the kernel's PATH_MAX; a
 * longer candidate is skipped, as if not found there. */
#define AIRLOCK_STARTER_EXEC_PATH_MAX 4096

/* ---- airlock mcp (src/cli/mcp*.c, docs/mcp.md) --------------------------------- */
/* One JSON-RPC message, a line of the client's stdin: the largest request
 * a tool takes (artifact.export's body, its 1 MiB of text written as JSON)
 * and 64 KiB for the JSON-RPC envelope around it. A longer line is read to
 * its newline without being kept and answered Invalid Request. */
#define AIRLOCK_MCP_LINE_MAX (AIRLOCK_WORKER_EXPORT_BODY_MAX + (64u << 10))
/* JSON values in one message, counted before it is parsed (every '[',
 * '{' and ',' outside a string starts one): the tree jansson builds is
 * bounded by this, not by the line's length alone (a 7 MiB line of
 * "[0,0,0,..." is 3.6 million values). The largest argument vector the
 * tool takes (64 KiB of one-byte strings: 32,768 elements) fits with
 * room for the rest of the message. */
#define AIRLOCK_MCP_VALUES_MAX (1u << 17)
/* tools/call requests waiting while one runs (the tools declare
 * allow_parallel no, so a session runs them one at a time, in order); one
 * more is answered isError at once. A client that pipelines does not hold
 * unbounded memory here. */
#define AIRLOCK_MCP_PENDING_MAX 16
/* A progress notification's message: at most this many bytes of a
 * command's output each (a larger piece is sent in several). Output is
 * held until this much has come or AIRLOCK_MCP_PROGRESS_INTERVAL_MS has
 * passed since the last notification, so a command writing a byte at a
 * time costs at most ten notifications a second, not one a byte. */
#define AIRLOCK_MCP_PROGRESS_CHUNK (16u << 10)
#define AIRLOCK_MCP_PROGRESS_INTERVAL_MS 100
/* A progressToken is echoed in every notification of its call: a longer
 * one is refused (Invalid params) rather than repeated per 16 KiB. */
#define AIRLOCK_MCP_PROGRESS_TOKEN_MAX 256
/* Bytes queued for a client that reads slowly (src/cli/mcp_out.c): over
 * AIRLOCK_MCP_OUT_MAX the client's requests are not read until it takes
 * some (each request makes at most one answer, so the queue stays within
 * this and one answer, whose size the tools' output ceiling bounds); over
 * AIRLOCK_MCP_OUT_PROGRESS_MAX progress is dropped (the result carries
 * the output). */
#define AIRLOCK_MCP_OUT_MAX (16u << 20)
#define AIRLOCK_MCP_OUT_PROGRESS_MAX (1u << 20)
/* A client that reads no byte for this long while answers wait is
 * treated as gone (its command cancelled, its sandbox destroyed): the
 * default of --stall-timeout, and its range. */
#define AIRLOCK_MCP_STALL_DEFAULT_S 60
#define AIRLOCK_MCP_STALL_MAX_S 3600
/* At the session's end, the answers still queued get this long to reach
 * the client before the process exits. */
#define AIRLOCK_MCP_FLUSH_S 5

#endif
