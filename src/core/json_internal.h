/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_CORE_JSON_INTERNAL_H
#define AIRLOCK_CORE_JSON_INTERNAL_H

/*
 * Decoding under a memory budget (src/core/json_decode.c says how), for the
 * decoders of a document that holds one of the specification's types as a
 * member: the service's request envelopes (src/service/decode.c); and for
 * the service's other parses of another process's JSON: the egress proxy's
 * answers (src/egress/proxy_ctl.c) and its decision lines
 * (src/service/metrics.c).
 */

#include <jansson.h>
#include <stddef.h>

#include "airlock/error.h"
#include "airlock/types.h"

/* Reads the tree; allocates nothing with jansson; keeps no pointer into it. */
typedef int (*core_json_decode_fn)(json_t *root, void *ctx, airlock_error *err);

/* Parse buf (len bytes, at most max_len) into a tree whose memory is at
 * most core_json_decode_budget(len), and call fn with it; the tree is gone
 * when this returns. fn's answer, or: DECODE naming type for input over
 * max_len, invalid JSON or a tree over the budget; SYSTEM/ENOMEM when
 * malloc failed. No failure inside jansson ever aborts the process. */
int core_json_decode(const char *buf, size_t len, size_t max_len, const char *type,
                     core_json_decode_fn fn, void *ctx, airlock_error *err);

/* The budget of a decode of n bytes (caps.h, AIRLOCK_JSON_DECODE_*). */
size_t core_json_decode_budget(size_t n);

/* The most the last decode on this thread held at once, in bytes (the
 * arena's chunks and blocks): what the tests compare with the budget. */
size_t core_json_decode_last_peak(void);

/* Make the library's allocator jansson's, whatever it holds now (the
 * library does so when it loads, if jansson still holds malloc and free).
 * For tests/test_fault_alloc.c, whose wrapped malloc is not the one jansson
 * started with. */
void core_json_allocator_use(void);

/* Values the service puts into answers of its own making, built as the
 * codecs build them, so it never parses its own output again: an error's
 * object ({"error", "message"}, to which a member may be added) and a
 * path's lossless text form (FileChange.path's). NULL on failure (err
 * says why; the path's only on ENOMEM). */
json_t *core_json_error_value(const airlock_error *e, airlock_error *err);
json_t *core_json_path_value(const char *path);

/* o is an object whose every key is one of fields; DECODE naming type and
 * the (escaped) unknown field otherwise. */
int core_json_expect_object(json_t *o, const char *type, const char *const *fields, size_t n,
                            airlock_error *err);

/* A member of a decoded tree as the type's strict decoder reads it; *ret is
 * untouched on failure. */
int core_json_spec_from_value(json_t *v, airlock_environment_spec *ret, airlock_error *err);
int core_json_command_from_value(json_t *v, airlock_execution_command *ret, airlock_error *err);

#endif
