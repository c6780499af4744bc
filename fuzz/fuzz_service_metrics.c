/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's metrics module (src/service/metrics.h) on hostile input.
 * The first byte picks the path:
 *   even: the rest is one egress proxy log line, counted or counted as
 *         malformed; the exposition rendered after it must still be text
 *         of the format's shape (every line a comment or "name[{...}] N",
 *         no byte outside printable ASCII), and a line that is not a
 *         decision must not have moved a decision counter;
 *   odd:  the rest, split at the first two NULs, is a tenant id, a run id
 *         and an error message of a failed provision; the lifecycle line
 *         written for it must be exactly one line of valid JSON, at most
 *         PIPE_BUF bytes, holding the tenant as given when it is valid
 *         UTF-8 and short.
 */
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "service/metrics.h"

static void check_exposition(const char *t, size_t len)
{
	if (!t || len == 0 || t[len - 1] != '\n' || strlen(t) != len)
		abort();
	for (const char *p = t; *p; p++)
		if ((*p < 0x20 || *p > 0x7e) && *p != '\n')
			abort();
	for (const char *p = t; *p;) {
		const char *eol = strchr(p, '\n');
		if (*p != '#') {
			const char *sp = memrchr(p, ' ', (size_t)(eol - p));
			if (!sp || sp + 1 == eol)
				abort();
			char *end;
			strtod(sp + 1, &end);
			if (end != eol)
				abort();
		}
		p = eol + 1;
	}
}

/* The sum of the values of every airlock_egress_decisions_total series. */
static unsigned long long decisions(const char *t)
{
	unsigned long long n = 0;
	static const char key[] = "\nairlock_egress_decisions_total{";
	for (const char *p = t; (p = strstr(p, key)); p += sizeof(key) - 1) {
		const char *eol = strchr(p + 1, '\n');
		const char *sp = memrchr(p, ' ', (size_t)(eol - p));
		n += strtoull(sp + 1, NULL, 10);
	}
	return n;
}

static void egress(const char *data, size_t size)
{
	service_metrics *m = NULL;
	if (service_metrics_new(-1, &m, NULL) < 0)
		return;
	service_metrics_egress_line(m, data, size);
	size_t len = 0;
	char *t = service_metrics_render(m, 0, &len);
	check_exposition(t, len);
	unsigned long long d = decisions(t);
	bool malformed = strstr(t, "\nairlock_egress_lines_malformed_total 1\n") != NULL;
	/* Exactly one of: a decision, a malformed line, or a count line
	 * (delayed or dropped), which moves neither. */
	if (d > 1 || (d == 1 && malformed))
		abort();
	free(t);
	service_metrics_free(m);
}

static void lifecycle(const char *data, size_t size)
{
	/* Three NUL-terminated strings out of the input. */
	char *buf = malloc(size + 3);
	if (!buf)
		return;
	memcpy(buf, data, size);
	buf[size] = buf[size + 1] = buf[size + 2] = 0;
	const char *tenant = buf;
	const char *run = tenant + strlen(tenant) + 1;
	if (run > buf + size)
		run = buf + size + 1;
	const char *msg = run + strlen(run) + 1;
	if (msg > buf + size + 1)
		msg = buf + size + 2;

	int fd = memfd_create("fuzz-log", MFD_CLOEXEC);
	service_metrics *m = NULL;
	if (fd < 0 || service_metrics_new(fd, &m, NULL) < 0) {
		if (fd >= 0)
			close(fd);
		free(buf);
		return;
	}
	airlock_error err = { .cls = AIRLOCK_ERR_EXECUTION_REJECTED };
	snprintf(err.message, sizeof(err.message), "%s", msg);
	airlock_exec_event ev = { .kind = AIRLOCK_EXEC_EVENT_PROVISION_FAILED,
		                  .mechanism = "native", .environment_id = run,
		                  .tenant_id = tenant, .run_id = run, .lease_epoch = 1,
		                  .error = &err };
	service_metrics_observer()->event(m, &ev);
	service_metrics_free(m);

	char line[PIPE_BUF + 1];
	ssize_t n = pread(fd, line, sizeof(line), 0);
	close(fd);
	if (n <= 0 || n > PIPE_BUF || line[n - 1] != '\n' || memchr(line, '\n', (size_t)n - 1))
		abort();
	json_t *o = json_loadb(line, (size_t)n - 1, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(o))
		abort();
	const char *t = json_string_value(json_object_get(o, "tenant"));
	if (!t)
		abort();
	/* Valid UTF-8 and short: kept as it is (jansson's own check decides). */
	json_t *probe = strlen(tenant) <= 16 ? json_string(tenant) : NULL;
	if (probe && strcmp(t, tenant) != 0)
		abort();
	json_decref(probe);
	json_decref(o);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] % 2 == 0)
		egress((const char *)data + 1, size - 1);
	else
		lifecycle((const char *)data + 1, size - 1);
	return 0;
}
