/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Output past the tool's limit (output.h): the excerpt the model reads and
 * the artifact that keeps the whole.
 */
#include "worker/output.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/escape.h"

/* Back off a cut so it does not split a UTF-8 character: at most three
 * continuation bytes are skipped (a longer run is not UTF-8, and any cut
 * is as good as another). */
static size_t char_start(const unsigned char *data, size_t len, size_t at)
{
	for (int i = 0; i < 3 && at > 0 && at < len && (data[at] & 0xC0) == 0x80; i++)
		at--;
	return at;
}

/* The tail's cut moves the other way, forward past at most three
 * continuation bytes: moving it back would lengthen the tail and push the
 * excerpt past its limit. */
static size_t char_next(const unsigned char *data, size_t len, size_t at)
{
	for (int i = 0; i < 3 && at < len && (data[at] & 0xC0) == 0x80; i++)
		at++;
	return at;
}

int worker_output_excerpt(const unsigned char *data, size_t len, size_t limit, const char *note,
                          unsigned char **ret, size_t *ret_len)
{
	char marker[512];
	int m = snprintf(marker, sizeof(marker),
	                 "\n\n[... airlock: %zu bytes of this output were left out here; %.300s ...]\n\n",
	                 len, note ? note : "");
	if (m < 0 || (size_t)m >= limit || len <= limit)
		return -EINVAL;
	/* The count in the marker is of the bytes left out, which depends on
	 * the marker's own length: compute the split, then write the marker
	 * again with the real count (it can only get shorter or stay). */
	size_t room = limit - (size_t)m;
	size_t head = char_start(data, len, room / 2);
	size_t tail_from = char_next(data, len, len - (room - room / 2));
	if (tail_from < head)
		tail_from = head;
	size_t omitted = tail_from - head;
	m = snprintf(marker, sizeof(marker),
	             "\n\n[... airlock: %zu bytes of this output were left out here; %.300s ...]\n\n",
	             omitted, note ? note : "");
	if (m < 0)
		return -EINVAL;
	size_t n = head + (size_t)m + (len - tail_from);
	unsigned char *out = malloc(n);
	if (!out)
		return -ENOMEM;
	memcpy(out, data, head);
	memcpy(out + head, marker, (size_t)m);
	memcpy(out + head + (size_t)m, data + tail_from, len - tail_from);
	*ret = out;
	*ret_len = n;
	return 0;
}

static int cut_stream(airlock_tool_output_keep_fn keep, void *arg, const char *name,
                      unsigned char **data, size_t *len, bool *truncated,
                      airlock_artifact_ref *ref, bool *has_ref)
{
	*has_ref = false;
	if (*len <= (size_t)AIRLOCK_TOOL_OUTPUT_BYTES)
		return 0;
	char note[400];
	airlock_error err = { 0 };
	if (keep && keep(arg, name, *data, *len, ref, &err) == 0) {
		*has_ref = true;
		snprintf(note, sizeof(note),
		         "the whole output (%lld bytes%s) is artifact %s in this result's %s_artifact",
		         (long long)ref->size_bytes,
		         *truncated ? ", up to the 4 MiB the command could print" : "",
		         ref->artifact_id, name);
	} else {
		/* The reason is the store's or the database's words, never
		 * bytes of the output: escaped all the same, and bounded. */
		char why[200];
		const char *msg = err.message[0] ? err.message : "no artifact store";
		airlock_escape(why, sizeof(why), msg, strlen(msg));
		snprintf(note, sizeof(note), "the whole output could not be kept: %s", why);
	}
	unsigned char *cut = NULL;
	size_t cut_len = 0;
	int r = worker_output_excerpt(*data, *len, (size_t)AIRLOCK_TOOL_OUTPUT_BYTES, note, &cut,
	                              &cut_len);
	if (r < 0) {
		if (*has_ref)
			airlock_artifact_ref_clear(ref);
		*has_ref = false;
		return r;
	}
	free(*data);
	*data = cut;
	*len = cut_len;
	*truncated = true;
	return 0;
}

int airlock_tool_output_apply(airlock_execution_result *res, airlock_tool_output_keep_fn keep,
                              void *arg, airlock_artifact_ref refs[2], bool has_ref[2])
{
	int r = cut_stream(keep, arg, "stdout", &res->stdout_data, &res->stdout_len,
	                   &res->stdout_truncated, &refs[0], &has_ref[0]);
	if (r == 0)
		r = cut_stream(keep, arg, "stderr", &res->stderr_data, &res->stderr_len,
		               &res->stderr_truncated, &refs[1], &has_ref[1]);
	return r;
}

/* The worker's keeper: the run's ArtifactWriter. */
static int keep_in_store(void *arg, const char *stream, const unsigned char *data, size_t len,
                         airlock_artifact_ref *ret, airlock_error *err)
{
	const worker_artifact_writer *w = arg;
	return worker_artifact_create(w, stream, strlen(stream), "text/plain",
	                              AIRLOCK_TRUST_EXTERNAL_UNTRUSTED, data, len, ret, err);
}

int worker_output_apply(const worker_artifact_writer *w, airlock_execution_result *res,
                        airlock_artifact_ref refs[2], bool has_ref[2])
{
	return airlock_tool_output_apply(res, w && w->artifacts ? keep_in_store : NULL,
	                                 (void *)(uintptr_t)w, refs, has_ref);
}
