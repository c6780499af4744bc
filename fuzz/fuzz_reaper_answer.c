/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reaper's reading of the worker tier's answer (src/service/reaper.h,
 * reaper_answer_frame) on hostile bytes. The first byte's low bit says
 * whether the peer closed; the rest is the answer read so far (at most
 * AIRLOCK_REAPER_ANSWER_MAX). It must never read or write outside the
 * buffer; a whole answer's body must lie inside what was read, its status
 * be three digits; an incomplete answer at end of file is never whole;
 * and an answer whole before the close is whole after it too, with the
 * same status (the bytes are framed once, not twice).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/caps.h"
#include "service/reaper.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size - 1 > AIRLOCK_REAPER_ANSWER_MAX)
		return 0;
	bool eof = data[0] & 1;
	size_t n = size - 1;
	/* Exactly n bytes, so a read past them is the sanitizer's to see. */
	char *buf = malloc(n ? n : 1);
	char *again = malloc(n ? n : 1);
	if (!buf || !again)
		abort();
	memcpy(buf, data + 1, n);
	memcpy(again, data + 1, n);
	reaper_frame f = { 0 };
	int r = reaper_answer_frame(buf, n, eof, &f);
	if (r < -1 || r > 1 || (eof && r == 0))
		abort();
	if (r == 1 && (f.status < 100 || f.status > 999 || f.body_off > n ||
	               f.body_len > n - f.body_off))
		abort();
	if (r == 1 && !eof) {
		reaper_frame g = { 0 };
		if (reaper_answer_frame(again, n, true, &g) != 1 || g.status != f.status ||
		    g.body_len != f.body_len)
			abort();
	}
	free(buf);
	free(again);
	return 0;
}
