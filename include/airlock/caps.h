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

/* ---- files_changed: the walk of a tree the command shaped ------------------- */
/* Directory nesting the walk enters; deeper sets truncated. */
#define AIRLOCK_SNAPSHOT_DEPTH_MAX 256
/* The max_path_bytes for a service's walks: 16 MiB of path text bounds one
 * snapshot's strings (entries add ~48 bytes each, bounded by max_entries)
 * and is 4000 paths of the longest kind or 500k of 32 bytes. */
#define AIRLOCK_SNAPSHOT_PATH_BYTES_MAX ((size_t)16 << 20)

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
/* The local workspace's provenance map: past this a write is refused rather
 * than the map growing without limit. */
#define AIRLOCK_LOCAL_RECORDS_MAX 100000
/* The memory workspace (the fake's): ceilings that hold even when the fake
 * sets no limits: the workspace is host memory, and a runaway must not take
 * the host with it. */
#define AIRLOCK_MEMWS_FILES_HARD ((size_t)1000000)
#define AIRLOCK_MEMWS_BYTES_HARD ((size_t)1 << 30)

/* ---- internal: the command line ------------------------------------------------- */
/* airlock run's standard input, held whole to hand the command. */
#define AIRLOCK_RUN_STDIN_MAX (16u * 1024u * 1024u)
/* airlock run's --env flags. */
#define AIRLOCK_RUN_ENV_FLAGS_MAX 64
/* airlock egress check's --resolve entries. */
#define AIRLOCK_CHECK_RESOLVE_MAX 64

/* ---- reserved: the native mechanism, the image store, the host ----------------
 * Caps that live today in src/exec/native/, src/image/ and src/host/ (owned
 * by other work in progress) move here when those files settle; until then
 * they are defined where they are used:
 *   NATIVE_KEPT_GROUPS_MAX, NATIVE_KEPT_BYTES_MAX, KEPT_DRAIN_READS_MAX
 *     (src/exec/native/native.c),
 *   VOLUME_MKFS_OUTPUT_MAX, VOLUME_IMAGE_MAX, VOLUME_IMAGE_EXTENTS_MAX
 *     (src/exec/native/volume.c),
 *   CG_PIDS_LIMIT_MAX (src/exec/native/cgroup.c),
 *   OUTPUT_TAIL_MAX, APT_FILE_MAX, APT_FIELD_MAX, APT_FILES_MAX, SIDECAR_MAX,
 *   MIRROR_MAX, TREE_DEPTH_MAX, PROG_ENV_MAX, PROG_ENV_VALUE_MAX
 *     (src/image/image.c),
 *   AIRLOCK_IMAGE_EXTRA_PACKAGES_MAX, AIRLOCK_IMAGE_PACKAGE_NAME_MAX
 *     (include/airlock/image.h).
 */

#endif
