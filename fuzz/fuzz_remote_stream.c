/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The remote adapter's reading of a workspace stream's header block and
 * trailer (src/remote/remote_internal.h, remote_stream_meta_line) on
 * hostile lines from the service: the input cut after each '\n', each
 * piece one line as libcurl hands it over. It must never read outside a
 * line; a digest is kept only after the header block ended (a blank line)
 * and only as 64 lowercase hex characters, terminated; a size is kept only
 * when the value is plain digits; and the same lines read again give the
 * same account. The same lines go to the download's ETag reader
 * (remote_etag_line): a value kept is at most its cap of visible ASCII,
 * terminated, and none is kept once it is bad.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "remote/remote_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void feed(remote_stream_meta *m, remote_etag *e, const uint8_t *data, size_t size,
                 bool *ret_blank)
{
	size_t i = 0;
	*ret_blank = false;
	while (i < size) {
		const uint8_t *nl = memchr(data + i, '\n', size - i);
		size_t n = nl ? (size_t)(nl - (data + i)) + 1 : size - i;
		/* Exactly n bytes, so a read past them is the sanitizer's to see. */
		char *line = malloc(n ? n : 1);
		if (!line)
			abort();
		memcpy(line, data + i, n);
		if (n <= 2 && (n == 0 || line[0] == '\r' || line[0] == '\n'))
			*ret_blank = true;
		remote_stream_meta_line(m, line, n);
		remote_etag_line(e, line, n);
		free(line);
		i += n;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 65536)
		return 0;
	remote_stream_meta a, b;
	remote_etag ea, eb;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&ea, 0, sizeof(ea));
	memset(&eb, 0, sizeof(eb));
	bool blank = false, blank2 = false;
	feed(&a, &ea, data, size, &blank);
	feed(&b, &eb, data, size, &blank2);
	if (memcmp(&a, &b, sizeof(a)) != 0 || memcmp(&ea, &eb, sizeof(ea)) != 0)
		abort();
	if (ea.value[AIRLOCK_WORKER_CLIENT_ETAG_MAX] != 0 || (ea.bad && ea.value[0]) ||
	    (ea.value[0] && !ea.have))
		abort();
	for (size_t i = 0; ea.value[i]; i++)
		if (ea.value[i] <= 0x20 || ea.value[i] >= 0x7f)
			abort();
	if (a.have_digest && !blank)
		abort();
	if (a.digest[AIRLOCK_SHA256_HEX_LEN] != 0 || strlen(a.digest) > AIRLOCK_SHA256_HEX_LEN)
		abort();
	if (a.have_digest && !a.bad_digest) {
		if (strlen(a.digest) != AIRLOCK_SHA256_HEX_LEN)
			abort();
		for (size_t i = 0; i < AIRLOCK_SHA256_HEX_LEN; i++)
			if (!((a.digest[i] >= '0' && a.digest[i] <= '9') ||
			      (a.digest[i] >= 'a' && a.digest[i] <= 'f')))
				abort();
	}
	if (a.bad_size && a.size != 0)
		abort();
	if (!a.have_size && (a.bad_size || a.size != 0))
		abort();
	return 0;
}
