/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An allocation countdown over the pure decoders (curl's torture mode): the
 * JSON decoder of every type (src/core/json.c), the settings parser
 * (src/core/settings_*.c) and the egress policy parser (src/egress/policy.c),
 * each on a realistic input, with its Nth allocation failing for N = 1, 2,
 * ... until a run makes fewer than N allocations. Every failing run must
 * return an error (the class the decoder's contract gives: below), leave
 * nothing allocated and not crash; the last run must succeed and decode
 * exactly what a run without faults decodes.
 *
 * How the allocations are reached: this executable is linked with
 * -Wl,--wrap for malloc, calloc, realloc, reallocarray, strdup, strndup and
 * free (tests/meson.build), which rebinds those calls in every object of the
 * link: the test, the static libairlock and a static libyaml (libyaml-dev
 * ships one), so libyaml's own allocations count too. jansson is a shared library, out of the
 * linker's reach: json_set_alloc_funcs hands it the same counter. In the
 * ASan build __real_malloc is ASan's, so its checks and LeakSanitizer still
 * see every block.
 *
 * Leaks are counted here as well, so the normal build checks them too:
 * every block allocated through the wrappers during a run is recorded, and
 * each free removes its block; a run must end with none recorded.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <yaml.h>

#include "airlock/egress.h"
#include "airlock/json.h"
#include "airlock/port/workspace.h"
#include "airlock/settings.h"
#include "airlock/tools.h"
#include "airlock/types.h"
#include "core/json_internal.h"
#include "egress/proxy_internal.h"
#include "service/metrics.h"
#include "service/server_internal.h"

/* ---- the counting allocator ----------------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_reallocarray(void *p, size_t n, size_t size);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void __real_free(void *p);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_reallocarray(void *p, size_t n, size_t size);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
void __wrap_free(void *p);

/* Blocks live during a run: an open-addressed set of pointers (the
 * allocator cannot allocate its own bookkeeping). */
#define LIVE_SLOTS (1u << 16)
#define TOMBSTONE ((void *)1)

static struct {
	bool on;       /* a run is being counted */
	unsigned nth;  /* the allocation to fail (1-based); 0 fails none */
	unsigned seen; /* allocations since the run began */
	bool fired;
	void *where[32]; /* the failed allocation's call stack */
	int n_where;
	size_t live;
	void *slots[LIVE_SLOTS];
} ac;

static size_t slot_of(const void *p)
{
	uintptr_t x = (uintptr_t)p;
	x ^= x >> 17;
	x *= 0xed5ad4bbu;
	x ^= x >> 11;
	return x & (LIVE_SLOTS - 1);
}

static void live_add(void *p)
{
	if (!p || !ac.on)
		return;
	size_t i = slot_of(p);
	while (ac.slots[i] && ac.slots[i] != TOMBSTONE)
		i = (i + 1) & (LIVE_SLOTS - 1);
	ac.slots[i] = p;
	ac.live++;
}

/* Blocks from before the run, or from an allocator not wrapped, are not
 * in the set and are let go. */
static void live_remove(void *p)
{
	if (!p || ac.live == 0)
		return;
	for (size_t i = slot_of(p), k = 0; ac.slots[i] && k < LIVE_SLOTS;
	     i = (i + 1) & (LIVE_SLOTS - 1), k++)
		if (ac.slots[i] == p) {
			ac.slots[i] = TOMBSTONE;
			ac.live--;
			return;
		}
}

/* True when this allocation is the one to fail. */
static bool alloc_fails(void)
{
	if (!ac.on)
		return false;
	if (++ac.seen != ac.nth)
		return false;
	ac.fired = true;
	/* backtrace() allocates only on its first call, made by the test's
	 * init (use_counter_for_jansson). */
	ac.on = false;
	ac.n_where = backtrace(ac.where, 32);
	ac.on = true;
	errno = ENOMEM;
	return true;
}

/* Where the failed allocation was made, for a countdown that fails. */
static void print_where(const char *what, unsigned nth)
{
	fprintf(stderr, "%s: allocation %u was failed here:\n", what, nth);
	backtrace_symbols_fd(ac.where, ac.n_where, 2);
}

void *__wrap_malloc(size_t n)
{
	if (alloc_fails())
		return NULL;
	void *p = __real_malloc(n);
	live_add(p);
	return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
	if (alloc_fails())
		return NULL;
	void *p = __real_calloc(n, size);
	live_add(p);
	return p;
}

void *__wrap_realloc(void *p, size_t n)
{
	if (alloc_fails())
		return NULL; /* p is untouched, as a failed realloc leaves it */
	void *q = __real_realloc(p, n);
	if (q || n == 0) {
		live_remove(p);
		live_add(q);
	}
	return q;
}

void *__wrap_reallocarray(void *p, size_t n, size_t size)
{
	if (alloc_fails())
		return NULL;
	void *q = __real_reallocarray(p, n, size);
	if (q) {
		live_remove(p);
		live_add(q);
	}
	return q;
}

char *__wrap_strdup(const char *s)
{
	if (alloc_fails())
		return NULL;
	char *p = __real_strdup(s);
	live_add(p);
	return p;
}

char *__wrap_strndup(const char *s, size_t n)
{
	if (alloc_fails())
		return NULL;
	char *p = __real_strndup(s, n);
	live_add(p);
	return p;
}

void __wrap_free(void *p)
{
	live_remove(p);
	__real_free(p);
}

static void run_begin(unsigned nth)
{
	memset(ac.slots, 0, sizeof(ac.slots));
	ac.live = 0;
	ac.seen = 0;
	ac.fired = false;
	ac.nth = nth;
	ac.on = true;
}

static void run_end(void) { ac.on = false; }

/*
 * jansson's allocations through the same bookkeeping, set before any JSON
 * is decoded (a block jansson took from plain malloc goes back to plain
 * free: __wrap_free forwards what it does not know). Its blocks are always
 * recorded, so a tree json.c forgets to release is a leak here; they are
 * failed in the countdown only with FAULT_ALLOC_JANSSON=1 set, because
 * jansson 2.14 does not survive a failed allocation inside json_loadb: it
 * aborts (an assert in lex_scan_string, load.c:442) or returns a document
 * whose string lost a byte (a failed append to its token buffer is
 * ignored), so a failure there says nothing about json.c and can pass a
 * changed value on. The report of this work says what json.c could do.
 */
static bool jansson_fails;

static void *jansson_malloc(size_t n)
{
	if (jansson_fails)
		return __wrap_malloc(n);
	void *p = __real_malloc(n);
	live_add(p);
	return p;
}

static void use_counter_for_jansson(void)
{
	const char *v = getenv("FAULT_ALLOC_JANSSON");
	jansson_fails = v && *v == '1';
	json_set_alloc_funcs(jansson_malloc, __wrap_free);
	void *warm[1];
	backtrace(warm, 1);
}

/* ---- one decoder under the countdown --------------------------------------- */

/*
 * A decoder as the countdown runs it: decode buf, and on success render
 * what was decoded as text (*ret_text, malloc'd: the form two runs are
 * compared in) and free the decoded value. Rendering happens with the
 * counter off, so the countdown covers decoding and clearing alone.
 */
typedef int (*decode_fn)(const char *buf, size_t len, char **ret_text, airlock_error *err);

/* Every decoder answers an allocation failure with ENOMEM
 * (AIRLOCK_ERR_SYSTEM, errnum ENOMEM): json.c, settings_*.c and policy.c
 * each report a failed allocation of their own so, and libyaml's memory
 * error becomes the same through util_yaml_next. (With jansson's
 * allocations failed too, FAULT_ALLOC_JANSSON=1, json.c's load() answers
 * AIRLOCK_ERR_DECODE, "invalid JSON", for them: jansson reports its own
 * out-of-memory as a parse error.) */
typedef struct decoder {
	const char *name;
	decode_fn fn;
	const char *input; /* a file under the source root, or NULL */
	const char *text;  /* or the input itself */
	bool jansson;      /* parsed by jansson: the DECODE answer above */
} decoder;

static char *read_source_file(const char *rel, size_t *len)
{
	const char *root = getenv("AIRLOCK_TEST_SOURCE_ROOT");
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", root && *root ? root : ".", rel);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	char *buf = malloc(1 << 20);
	cr_assert_not_null(buf);
	*len = fread(buf, 1, (1 << 20) - 1, f);
	buf[*len] = 0;
	fclose(f);
	return buf;
}

/* Decode with the Nth allocation failing; returns the allocations made. */
static unsigned countdown_run(const decoder *d, const char *buf, size_t len, unsigned nth,
                              int *ret_rc, airlock_error *err, char **ret_text)
{
	run_begin(nth);
	*ret_rc = d->fn(buf, len, ret_text, err);
	unsigned seen = ac.seen;
	size_t live = ac.live;
	run_end();
	cr_assert_eq(live, 0, "%s: N=%u: %zu blocks left allocated (rc %d: %s)", d->name, nth, live,
	             *ret_rc, err->message);
	return seen;
}

static void countdown(const decoder *d)
{
	size_t len = 0;
	char *buf = d->input ? read_source_file(d->input, &len) : strdup(d->text);
	if (!d->input)
		len = strlen(buf);

	/* The run without faults: what every later success must equal. */
	airlock_error err = { 0 };
	char *want = NULL;
	int rc = 0;
	unsigned total = countdown_run(d, buf, len, 0, &rc, &err, &want);
	cr_assert_eq(rc, 0, "%s: the input does not decode: %s", d->name, err.message);
	/* Decoding a type with no string to copy allocates only in jansson. */
	cr_assert(total > 0 || (d->jansson && !jansson_fails), "%s: no allocation to fail", d->name);

	unsigned n = 1, as_decode = 0;
	for (;; n++) {
		char *got = NULL;
		memset(&err, 0, sizeof(err));
		unsigned seen = countdown_run(d, buf, len, n, &rc, &err, &got);
		if (seen < n) {
			cr_assert_eq(rc, 0, "%s: N=%u: no fault and still an error: %s", d->name, n,
			             err.message);
			cr_assert_str_eq(got, want, "%s: N=%u: decoded something else", d->name, n);
			free(got);
			break;
		}
		cr_assert(ac.fired);
		bool jansson_decode = jansson_fails && d->jansson &&
		                      rc == airlock_errcode(AIRLOCK_ERR_DECODE);
		if (rc >= 0 || (rc != -ENOMEM && !jansson_decode))
			print_where(d->name, n);
		if (rc >= 0)
			fprintf(stderr, "%s: N=%u decoded\n  %s\nwhere the run without faults decoded\n  %s\n",
			        d->name, n, got, want);
		else if (rc != -ENOMEM && getenv("FAULT_ALLOC_VERBOSE"))
			fprintf(stderr, "%s: N=%u: %s\n", d->name, n, err.message);
		cr_assert_lt(rc, 0, "%s: N=%u: allocation %u failed and the decoder succeeded",
		             d->name, n, n);
		cr_assert_null(got);
		if (rc == -ENOMEM) {
			cr_assert_eq(err.cls, AIRLOCK_ERR_SYSTEM, "%s: N=%u: %s", d->name, n,
			             err.message);
			cr_assert_eq(err.errnum, ENOMEM);
		} else {
			cr_assert(jansson_decode,
			          "%s: N=%u: allocation failure answered with rc %d (%s): %s", d->name,
			          n, rc, airlock_errclass_name(err.cls), err.message);
			as_decode++;
		}
	}
	cr_assert_eq(n, total + 1, "%s: the runs made %u allocations, the first %u", d->name, n - 1,
	             total);
	if (total == 0)
		fprintf(stderr, "fault_alloc %s: no allocation outside jansson\n", d->name);
	else
		fprintf(stderr, "fault_alloc %s: %u allocations, each failed in turn%s\n", d->name,
		        total, as_decode ? " (some of jansson's answered as a decode error)" : "");
	free(want);
	free(buf);
}

/* ---- the decoders ---------------------------------------------------------- */

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define LIMITS_JSON                                                                                \
	"{\"cpu_millicores\":2000,\"memory_bytes\":2147483648,\"pids_max\":512,"                   \
	"\"workspace_bytes\":4294967296,\"inodes_max\":100000,\"wall_clock_seconds\":300}"
#define EGRESS_JSON                                                                                \
	"{\"mode\":\"allowlist\",\"destinations\":[{\"host\":\"pypi.org\",\"ports\":[443]},"       \
	"{\"host\":\"*.pythonhosted.org\",\"ports\":[80,443]}]}"
#define BRIDGE_JSON "{\"socket_path\":\"/run/airlock/bridge.sock\",\"token\":\"tok-1\"}"
#define FC_JSON                                                                                    \
	"{\"path\":\"out/data.csv\",\"change\":\"CREATED\",\"kind\":\"FILE\",\"size_bytes\":1204,"  \
	"\"sha256\":\"" HEX64 "\"}"
#define FC_DELETED_JSON                                                                            \
	"{\"path\":\"old\xef\xbf\xbd" "ff.txt\",\"change\":\"DELETED\",\"kind\":\"SYMLINK\","       \
	"\"size_bytes\":0,\"sha256\":null}"
#define FC_MODIFIED_JSON                                                                           \
	"{\"path\":\"src/deep/\xc3\xa9t\xc3\xa9.py\",\"change\":\"MODIFIED\",\"kind\":\"FILE\","    \
	"\"size_bytes\":77,\"sha256\":\"" HEX64 "\"}"

/* A full ExecutionResult: binary output in both streams, every kind of
 * change, a nested and an escaped path. */
static const char result_json[] =
	"{\"exit_code\":2,\"stdout\":\"b2sA//4AwygKAA==\",\"stderr\":\"VHJhY2ViYWNrOiBib29tCg==\","
	"\"stdout_truncated\":true,\"stderr_truncated\":false,\"timed_out\":false,"
	"\"killed_by\":null,\"files_changed\":[" FC_JSON "," FC_DELETED_JSON "," FC_MODIFIED_JSON
	"],\"files_changed_truncated\":true,\"duration_ms\":1840}";

#define SPEC_JSON                                                                                  \
	"{\"tenant_id\":\"tenant-1\",\"run_id\":\"run-1\",\"lease_epoch\":3,"                   \
	"\"image_digest\":\"sha256:" HEX64 "\",\"limits\":" LIMITS_JSON ",\"egress\":" EGRESS_JSON  \
	",\"environment\":{\"HOME\":\"/workspace\",\"LANG\":\"C.UTF-8\",\"PATH\":\"/usr/bin:/bin\"}," \
	"\"bridge\":" BRIDGE_JSON "}"
static const char spec_json[] = SPEC_JSON;

static const char handle_json[] =
	"{\"environment_id\":\"env_0123456789abcdef0123456789abcdef\",\"tenant_id\":\"tenant-1\","
	"\"run_id\":\"run-1\",\"lease_epoch\":3,\"created_at\":\"2026-11-29T23:34:04.123Z\","
	"\"expires_at\":\"2026-11-30T00:04:04.123Z\"}";

#define COMMAND_JSON                                                                               \
	"{\"argv\":[\"python3\",\"-c\",\"print(1)\",\"--flag\"],\"working_directory\":\"src/pkg\"," \
	"\"timeout_seconds\":30,\"stdin\":\"AP8KaGVsbG8=\",\"maximum_output_bytes\":1048576}"
static const char command_json[] = COMMAND_JSON;

/* The service's request bodies (src/service/decode.c). */
static const char provision_body[] =
	"{\"spec\":" SPEC_JSON ",\"environment_id\":\"env_0123456789abcdef0123456789abcdef\"}";
static const char execute_body[] =
	"{\"command\":" COMMAND_JSON ",\"remaining_budget_ms\":5000,\"stream\":true}";

static const char metadata_json[] =
	"{\"tenant_id\":\"tenant-1\",\"run_id\":\"run-1\",\"origin\":\"SANDBOX_EXPORT\","
	"\"filename\":\"../../etc/passwd\",\"media_type\":\"text/plain\",\"size_bytes\":12,"
	"\"sha256\":\"" HEX64 "\",\"trust\":\"EXTERNAL_UNTRUSTED\","
	"\"created_at\":\"2026-11-29T23:34:04.123Z\",\"expires_at\":\"2026-12-29T23:34:04.123Z\"}";

static const char ref_json[] =
	"{\"artifact_id\":\"0192d3f5-8e1a-7abc-8def-0123456789ab\",\"sha256\":\"" HEX64 "\","
	"\"size_bytes\":12,\"media_type\":\"text/plain\"}";

static const char error_json[] =
	"{\"error\":\"ExecutionRejected\",\"message\":\"EnvironmentSpec.image_digest: bad\"}";

/* Render with the counter off; NULL for "could not" (a test failure). */
#define RENDER(text_expr)                                                                          \
	do {                                                                                       \
		bool on_ = ac.on;                                                                  \
		ac.on = false;                                                                     \
		airlock_error rerr_ = { 0 };                                                       \
		(void)rerr_;                                                                       \
		*ret_text = (text_expr);                                                           \
		ac.on = on_;                                                                       \
		cr_assert_not_null(*ret_text, "render: %s", rerr_.message);                        \
	} while (0)

/* One JSON type: decode, render by its own encoder, clear. */
#define JSON_DECODER(prefix, ctype, clear)                                                         \
	static int dec_##prefix(const char *buf, size_t len, char **ret_text, airlock_error *err)  \
	{                                                                                          \
		ctype v;                                                                           \
		memset(&v, 0, sizeof(v));                                                          \
		int r = airlock_##prefix##_from_json(buf, len, &v, err);                           \
		if (r < 0)                                                                         \
			return r;                                                                  \
		RENDER(airlock_##prefix##_to_json(&v, &rerr_));                                    \
		clear(&v);                                                                         \
		return 0;                                                                          \
	}

static void no_clear(void *p) { (void)p; }
static void bridge_clear(airlock_bridge_endpoint *b)
{
	free(b->socket_path);
	free(b->token);
}

JSON_DECODER(resource_limits, airlock_resource_limits, no_clear)
JSON_DECODER(egress_policy, airlock_egress_policy, airlock_egress_policy_clear)
JSON_DECODER(bridge_endpoint, airlock_bridge_endpoint, bridge_clear)
JSON_DECODER(environment_spec, airlock_environment_spec, airlock_environment_spec_clear)
JSON_DECODER(environment_handle, airlock_environment_handle, airlock_environment_handle_clear)
JSON_DECODER(execution_command, airlock_execution_command, airlock_execution_command_clear)
JSON_DECODER(file_change, airlock_file_change, airlock_file_change_clear)
JSON_DECODER(execution_result, airlock_execution_result, airlock_execution_result_clear)
JSON_DECODER(artifact_metadata, airlock_artifact_metadata, airlock_artifact_metadata_clear)
JSON_DECODER(artifact_ref, airlock_artifact_ref, airlock_artifact_ref_clear)
JSON_DECODER(error, airlock_error, no_clear)

static int dec_svc_provision(const char *buf, size_t len, char **ret_text, airlock_error *err)
{
	svc_provision p;
	memset(&p, 0, sizeof(p));
	int r = svc_provision_decode(buf, len, &p, err);
	if (r < 0)
		return r;
	RENDER(airlock_environment_spec_to_json(&p.spec, &rerr_));
	airlock_environment_spec_clear(&p.spec);
	return 0;
}

static int dec_svc_execute(const char *buf, size_t len, char **ret_text, airlock_error *err)
{
	svc_execute x;
	memset(&x, 0, sizeof(x));
	int r = svc_execute_decode(buf, len, &x, err);
	if (r < 0)
		return r;
	RENDER(airlock_execution_command_to_json(&x.command, &rerr_));
	airlock_execution_command_clear(&x.command);
	return 0;
}

/* The tools' arguments as every door decodes them (airlock/tools.h: the
 * worker's routes and airlock mcp). Rendered as the fields decoded. */
static char *run_args_text(const airlock_run_command_arguments *a)
{
	char *t = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&t, &n);
	if (!f)
		return NULL;
	for (size_t i = 0; i < a->argc; i++)
		fprintf(f, "[%s]", a->argv[i]);
	fprintf(f, " wd=%s timeout=%lld", a->working_directory ? a->working_directory : "-",
	        (long long)a->timeout_seconds);
	fclose(f);
	return t;
}

static int dec_run_args(const char *buf, size_t len, char **ret_text, airlock_error *err)
{
	airlock_run_command_arguments a;
	int r = airlock_run_command_arguments_decode(buf, len, &a, err);
	if (r < 0)
		return r;
	RENDER(run_args_text(&a));
	airlock_run_command_arguments_clear(&a);
	return 0;
}

static char *export_args_text(const airlock_export_arguments *a)
{
	char *t = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&t, &n);
	if (!f)
		return NULL;
	fprintf(f, "path=%.*s text=%.*s filename=%.*s media_type=%s", (int)a->path_len,
	        a->path ? a->path : "", (int)a->text_len, a->text ? a->text : "",
	        (int)a->filename_len, a->filename ? a->filename : "", a->media_type);
	fclose(f);
	return t;
}

static int dec_export_args(const char *buf, size_t len, char **ret_text, airlock_error *err)
{
	airlock_export_arguments a;
	int r = airlock_export_arguments_decode(buf, len, &a, err);
	if (r < 0)
		return r;
	RENDER(export_args_text(&a));
	airlock_export_arguments_clear(&a);
	return 0;
}

/* The service's two other parses of another process's JSON: the egress
 * proxy's answers (src/egress/proxy_ctl.c) and its decision lines
 * (src/service/metrics.c). Rendered as what the caller acts on. */
static char *proxy_answer_text(bool ok, const char *why)
{
	char *t = NULL;
	return asprintf(&t, "ok=%d why=%s", ok, why) < 0 ? NULL : t;
}

static int dec_proxy_answer(const char *buf, size_t len, char **ret_text, airlock_error *err)
{
	bool ok = false;
	char why[200];
	int r = proxy_answer_decode(buf, len, &ok, why, sizeof(why), err);
	if (r < 0)
		return r;
	RENDER(proxy_answer_text(ok, why));
	return 0;
}

static char *egress_line_text(const service_egress_line *l)
{
	char *t = NULL;
	return asprintf(&t, "kind=%d outcome=%d reason=%zu count=%llu", (int)l->kind, l->outcome,
	                l->reason, (unsigned long long)l->count) < 0
	               ? NULL
	               : t;
}

static int dec_egress_line(const char *buf, size_t len, char **ret_text, airlock_error *err)
{
	service_egress_line l;
	memset(&l, 0, sizeof(l));
	int r = service_metrics_egress_line_decode(buf, len, &l, err);
	if (r < 0)
		return r;
	RENDER(egress_line_text(&l));
	return 0;
}

static char *settings_text(const airlock_settings *s)
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);
	if (!f)
		return NULL;
	airlock_settings_print(s, f);
	fclose(f);
	return text;
}

static int dec_settings(const char *buf, size_t len, char **ret_text, airlock_error *err)
{
	airlock_settings s;
	int r = airlock_settings_parse("airlock.example.yaml", buf, len, &s, err);
	if (r < 0)
		return r;
	RENDER(settings_text(&s));
	airlock_settings_clear(&s);
	return 0;
}

/* The example with every environment override applied over it. */
static int dec_settings_env(const char *buf, size_t len, char **ret_text, airlock_error *err)
{
	static char vars[][96] = {
		"AIRLOCK_DEPLOYMENT_MODE=development",
		"AIRLOCK_AUTH_MODE=dev",
		"AIRLOCK_SANDBOX_MECHANISM=fake",
		"AIRLOCK_SANDBOX_IMAGE=sha256:" HEX64,
		"AIRLOCK_HARD_CAP_SECONDS=900",
		"AIRLOCK_IMAGE_STORE=/srv/airlock/images",
	};
	char *const envp[] = { vars[0], vars[1], vars[2], vars[3], vars[4], vars[5], NULL };
	airlock_settings s;
	int r = airlock_settings_parse("airlock.example.yaml", buf, len, &s, err);
	if (r < 0)
		return r;
	r = airlock_settings_apply_env(&s, envp, err);
	if (r < 0) {
		airlock_settings_clear(&s);
		return r;
	}
	RENDER(settings_text(&s));
	airlock_settings_clear(&s);
	return 0;
}

static char *policy_text(const airlock_egress_policy *p)
{
	char *text = NULL;
	airlock_error err = { 0 };
	return airlock_egress_policy_format(p, &text, &err) == 0 ? text : NULL;
}

static int dec_policy(const char *buf, size_t len, char **ret_text, airlock_error *err)
{
	airlock_egress_policy p = { 0 };
	int r = airlock_egress_policy_parse("policy.yaml", buf, len, &p, err);
	if (r < 0)
		return r;
	RENDER(policy_text(&p));
	airlock_egress_policy_clear(&p);
	return 0;
}

#define RESULT_KILLED_JSON                                                                         \
	"{\"exit_code\":null,\"stdout\":\"c3RhcnRlZA==\",\"stderr\":\"AP8=\",\"stdout_truncated\":false," \
	"\"stderr_truncated\":false,\"timed_out\":true,\"killed_by\":\"TIMEOUT\","                 \
	"\"files_changed\":[" FC_JSON "],\"files_changed_truncated\":false,\"duration_ms\":30000}"
#define META_NULLS_JSON                                                                            \
	"{\"tenant_id\":\"tenant-1\",\"run_id\":null,\"origin\":\"UPLOAD\","                        \
	"\"filename\":\"report.pdf\",\"media_type\":\"application/pdf\",\"size_bytes\":0,"        \
	"\"sha256\":\"" HEX64 "\",\"trust\":\"USER_SUPPLIED\","                                    \
	"\"created_at\":\"1970-01-01T00:00:00.000Z\",\"expires_at\":null}"
#define CMD_NOSTDIN_JSON                                                                           \
	"{\"argv\":[\"true\"],\"working_directory\":\".\",\"timeout_seconds\":1,"                  \
	"\"stdin\":null,\"maximum_output_bytes\":1}"

/* One test per decoder and input: a name, the decoder, then a file under
 * the source root or the text itself, and whether jansson parses it. */
#define COUNTDOWN(tname, ...)                                                                      \
	Test(fault_alloc, tname, .init = use_counter_for_jansson)                                  \
	{                                                                                          \
		static const decoder d = { __VA_ARGS__ };                                          \
		countdown(&d);                                                                     \
	}

COUNTDOWN(json_resource_limits, "json ResourceLimits", dec_resource_limits, NULL, LIMITS_JSON, true)
COUNTDOWN(json_egress_policy, "json EgressPolicy", dec_egress_policy, NULL, EGRESS_JSON, true)
COUNTDOWN(json_bridge_endpoint, "json BridgeEndpoint", dec_bridge_endpoint, NULL, BRIDGE_JSON, true)
COUNTDOWN(json_environment_spec, "json EnvironmentSpec", dec_environment_spec, NULL, spec_json, true)
COUNTDOWN(json_environment_handle, "json EnvironmentHandle", dec_environment_handle, NULL,
          handle_json, true)
COUNTDOWN(json_execution_command, "json ExecutionCommand", dec_execution_command, NULL,
          command_json, true)
COUNTDOWN(json_execution_command_no_stdin, "json ExecutionCommand (stdin null)",
          dec_execution_command, NULL, CMD_NOSTDIN_JSON, true)
COUNTDOWN(json_file_change, "json FileChange", dec_file_change, NULL, FC_JSON, true)
COUNTDOWN(json_file_change_deleted_escaped, "json FileChange (deleted, escaped path)",
          dec_file_change, NULL, FC_DELETED_JSON, true)
COUNTDOWN(json_execution_result, "json ExecutionResult", dec_execution_result, NULL, result_json,
          true)
COUNTDOWN(json_execution_result_killed, "json ExecutionResult (killed)", dec_execution_result,
          NULL, RESULT_KILLED_JSON, true)
COUNTDOWN(json_artifact_metadata, "json ArtifactMetadata", dec_artifact_metadata, NULL,
          metadata_json, true)
COUNTDOWN(json_artifact_metadata_nulls, "json ArtifactMetadata (nulls)", dec_artifact_metadata,
          NULL, META_NULLS_JSON, true)
COUNTDOWN(json_artifact_ref, "json ArtifactRef", dec_artifact_ref, NULL, ref_json, true)
COUNTDOWN(json_error, "json Error", dec_error, NULL, error_json, true)
/* The same decoders with the library's own jansson allocator:
 * every block jansson takes then comes from the decode's arena, whose
 * chunks are the library's mallocs, so the countdown fails each of them in
 * turn, inside json_loadb. Each must be ENOMEM, with nothing left
 * allocated and the process alive: out of memory inside jansson fails the
 * decode, never the process (src/core/json_decode.c). */
static void use_the_library_allocator(void)
{
	/* In this executable the library's malloc is the wrapper, so its
	 * load-time check did not recognise jansson's default as malloc. */
	core_json_allocator_use();
	void *warm[1];
	backtrace(warm, 1);
}

#define COUNTDOWN_ARENA(tname, ...)                                                                \
	Test(fault_alloc, tname, .init = use_the_library_allocator)                                \
	{                                                                                          \
		static const decoder d = { __VA_ARGS__ };                                          \
		countdown(&d);                                                                     \
	}

COUNTDOWN_ARENA(arena_environment_spec, "json EnvironmentSpec (arena)", dec_environment_spec,
                NULL, spec_json, false)
COUNTDOWN_ARENA(arena_execution_command, "json ExecutionCommand (arena)", dec_execution_command,
                NULL, command_json, false)
COUNTDOWN_ARENA(arena_execution_result, "json ExecutionResult (arena)", dec_execution_result,
                NULL, result_json, false)
COUNTDOWN_ARENA(arena_service_provision, "service provision body (arena)", dec_svc_provision,
                NULL, provision_body, false)
COUNTDOWN_ARENA(arena_service_execute, "service execute body (arena)", dec_svc_execute, NULL,
                execute_body, false)
COUNTDOWN_ARENA(arena_proxy_answer_refused, "egress proxy answer (arena)", dec_proxy_answer, NULL,
                "{\"ok\":false,\"error\":\"attach: environment already attached\"}", false)
COUNTDOWN_ARENA(arena_run_command_arguments, "sandbox.run_command arguments (arena)", dec_run_args,
                NULL,
                "{\"command\":[\"python3\",\"-c\",\"print(1)\",\"a\",\"b\",\"c\"],"
                "\"working_directory\":\"src/x\",\"timeout_seconds\":900}",
                false)
COUNTDOWN_ARENA(arena_export_arguments, "artifact.export arguments (arena)", dec_export_args, NULL,
                "{\"path\":\"out/report.csv\",\"filename\":\"r\\u00e9port.csv\","
                "\"media_type\":\"text/csv\"}",
                false)
COUNTDOWN_ARENA(arena_export_text_arguments, "artifact.export text arguments (arena)",
                dec_export_args, NULL, "{\"text\":\"# Summary\\nline\"}", false)
/* Past the arena's first chunk: a long reason (jansson's token buffer
 * doubles into blocks of their own) and many members (more chunks). */
static char long_answer[64 * 1024];
static char long_line[60 * 1024];

static void fill_long_inputs(void)
{
	size_t o = (size_t)snprintf(long_answer, sizeof(long_answer), "{\"ok\":false,\"error\":\"");
	memset(long_answer + o, 'e', 40000);
	o += 40000;
	o += (size_t)snprintf(long_answer + o, sizeof(long_answer) - o, "\"");
	for (int i = 0; i < 300; i++)
		o += (size_t)snprintf(long_answer + o, sizeof(long_answer) - o, ",\"k%d\":[%d]", i, i);
	snprintf(long_answer + o, sizeof(long_answer) - o, "}");
	o = (size_t)snprintf(long_line, sizeof(long_line),
	                     "{\"outcome\":\"refused\",\"reason\":\"PORT_NOT_ALLOWED\",\"detail\":\"");
	memset(long_line + o, 'd', 30000);
	o += 30000;
	o += (size_t)snprintf(long_line + o, sizeof(long_line) - o, "\",\"addresses\":[");
	for (int i = 0; i < 400; i++)
		o += (size_t)snprintf(long_line + o, sizeof(long_line) - o, "%s\"198.51.100.%d\"",
		                      i ? "," : "", i % 250);
	snprintf(long_line + o, sizeof(long_line) - o, "]}");
	use_the_library_allocator();
}

Test(fault_alloc, arena_proxy_answer_long, .init = fill_long_inputs)
{
	static const decoder d = { "egress proxy answer, 40 KB reason (arena)", dec_proxy_answer,
		                   NULL, long_answer, false };
	countdown(&d);
}

Test(fault_alloc, arena_egress_line_long, .init = fill_long_inputs)
{
	static const decoder d = { "egress decision line, 38 KB (arena)", dec_egress_line, NULL,
		                   long_line, false };
	countdown(&d);
}

/* The service's own entry for a decision line: whatever allocation fails
 * while it decodes one (the metrics' own are made before), the service
 * goes on and the line is counted as malformed; the run with no fault
 * counts the decision. */
static uint64_t scraped(service_metrics *m, const char *name)
{
	size_t n = 0;
	char *text = service_metrics_render(m, 0, &n);
	cr_assert_not_null(text);
	char key[128];
	snprintf(key, sizeof(key), "\n%s ", name);
	const char *at = strstr(text, key);
	cr_assert_not_null(at, "%s is not exposed", name);
	uint64_t v = strtoull(at + strlen(key), NULL, 10);
	free(text);
	return v;
}

Test(fault_alloc, arena_egress_line_counted, .init = fill_long_inputs)
{
	service_metrics *m = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(service_metrics_new(-1, &m, &err), 0, "%s", err.message);
	size_t len = strlen(long_line);
	unsigned n = 1;
	for (;; n++) {
		uint64_t before = scraped(m, "airlock_egress_lines_malformed_total");
		run_begin(n);
		service_metrics_egress_line(m, long_line, len);
		unsigned seen = ac.seen;
		size_t live = ac.live;
		run_end();
		cr_assert_eq(live, 0, "N=%u: %zu blocks left allocated", n, live);
		uint64_t after = scraped(m, "airlock_egress_lines_malformed_total");
		if (seen < n) {
			cr_assert_eq(after, before, "N=%u: no fault and still malformed", n);
			break;
		}
		cr_assert_eq(after, before + 1, "N=%u: a line whose decode failed is not counted", n);
	}
	cr_assert_gt(n, 2, "the countdown failed no allocation");
	fprintf(stderr, "fault_alloc egress decision line counted: %u allocations, each failed in turn\n",
	        n - 1);
	service_metrics_free(m);
}
COUNTDOWN_ARENA(arena_proxy_answer_ok, "egress proxy answer ok (arena)", dec_proxy_answer, NULL,
                "{\"ok\":true}", false)
COUNTDOWN_ARENA(arena_egress_decision_line, "egress decision line (arena)", dec_egress_line,
                NULL,
                "{\"ts_ms\":1764640000000,\"event\":\"egress\",\"environment\":\"env-1\","
                "\"tenant\":\"tenant-a\",\"run\":\"run-1\",\"host\":\"pypi.org\","
                "\"port\":8080,\"addresses\":[\"198.51.100.7\"],\"dial\":null,"
                "\"outcome\":\"refused\",\"reason\":\"PORT_NOT_ALLOWED\",\"detail\":null}",
                false)
COUNTDOWN_ARENA(arena_egress_delayed_line, "egress delayed line (arena)", dec_egress_line, NULL,
                "{\"outcome\":\"delayed\",\"reason\":\"RATE_LIMITED\",\"count\":12}",
                false)

COUNTDOWN(settings_example, "settings etc/airlock.example.yaml", dec_settings,
          "etc/airlock.example.yaml", NULL, false)
COUNTDOWN(settings_example_with_environment,
          "settings etc/airlock.example.yaml with AIRLOCK_* overrides", dec_settings_env,
          "etc/airlock.example.yaml", NULL, false)
COUNTDOWN(settings_full, "settings fuzz/corpus/fuzz_settings/valid_full.yaml", dec_settings,
          "fuzz/corpus/fuzz_settings/valid_full.yaml", NULL, false)
COUNTDOWN(settings_flow, "settings fuzz/corpus/fuzz_settings/valid_flow.yaml", dec_settings,
          "fuzz/corpus/fuzz_settings/valid_flow.yaml", NULL, false)
COUNTDOWN(settings_passthrough_file,
          "settings fuzz/corpus/fuzz_settings/valid_passthrough_file.yaml", dec_settings,
          "fuzz/corpus/fuzz_settings/valid_passthrough_file.yaml", NULL, false)
COUNTDOWN(policy_spec_example, "policy fuzz/corpus/fuzz_egress_policy/spec_example.yaml",
          dec_policy, "fuzz/corpus/fuzz_egress_policy/spec_example.yaml", NULL, false)
COUNTDOWN(policy_flow, "policy fuzz/corpus/fuzz_egress_policy/flow.yaml", dec_policy,
          "fuzz/corpus/fuzz_egress_policy/flow.yaml", NULL, false)
COUNTDOWN(policy_block_ports, "policy fuzz/corpus/fuzz_egress_policy/block_ports.yaml",
          dec_policy, "fuzz/corpus/fuzz_egress_policy/block_ports.yaml", NULL, false)
COUNTDOWN(policy_quoted_names, "policy fuzz/corpus/fuzz_egress_policy/quoted_names.yaml",
          dec_policy, "fuzz/corpus/fuzz_egress_policy/quoted_names.yaml", NULL, false)
COUNTDOWN(policy_deny, "policy fuzz/corpus/fuzz_egress_policy/deny.yaml", dec_policy,
          "fuzz/corpus/fuzz_egress_policy/deny.yaml", NULL, false)

/* The wrappers reach the static library's calls, libyaml's and jansson's
 * (a countdown that counts nothing would pass everything). */
Test(fault_alloc, the_wrappers_see_the_library, .init = use_counter_for_jansson)
{
	run_begin(0);
	char *rel = NULL;
	int r = airlock_workspace_check_string("a/b", 3, &rel, NULL);
	unsigned seen = ac.seen;
	free(rel);
	run_end();
	cr_assert_eq(r, 0);
	cr_assert_eq(seen, 1, "libairlock's malloc is not counted");

	yaml_parser_t parser;
	run_begin(0);
	r = yaml_parser_initialize(&parser);
	seen = ac.seen;
	yaml_parser_delete(&parser);
	size_t live = ac.live;
	run_end();
	cr_assert_eq(r, 1);
	if (FAULT_ALLOC_YAML_STATIC)
		cr_assert_gt(seen, 0, "libyaml's allocations are not counted");
	else
		fprintf(stderr, "fault_alloc: no static libyaml here: its own allocations are not counted\n");
	cr_assert_eq(live, 0);

	run_begin(0);
	json_t *o = json_object();
	live = ac.live;
	json_decref(o);
	cr_assert_gt(live, 0, "jansson's allocations are not recorded");
	cr_assert_eq(ac.live, 0);
	run_end();
}
