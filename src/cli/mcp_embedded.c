/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock mcp, embedded (docs/mcp.md): the session is one run. Its
 * sandbox is provisioned at the first sandbox.run_command with the
 * settings' mechanism, as `airlock run` provisions one (the same request
 * decoding as the worker's, airlock/tools.h; the same prepare and spec,
 * airlock/run_command.h), reused by the session's later calls, and
 * destroyed at the session's end. artifact.export writes into a local
 * artifact store (the filesystem adapter, airlock/port/artifact.h: the
 * bytes hashed on the way and compared with the workspace's own digest
 * before the object is committed) and answers its ArtifactRef.
 *
 * Calls come one at a time (cli/mcp.c runs one call thread); shutdown is
 * the only entry another thread makes, and the core's is thread-safe.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "airlock/ids.h"
#include "airlock/json.h"
#include "airlock/mechanisms.h"
#include "airlock/port/artifact.h"
#include "airlock/run_command.h"
#include "airlock/tools.h"
#include "cli/common.h"
#include "cli/mcp.h"

extern char **environ;

/* One artifact.export's outcome, kept so the same export answers the same
 * ArtifactRef (the tool is IDEMPOTENT, as the worker's is). */
typedef struct kept_export {
	char *filename;
	size_t filename_len;
	char media_type[256];
	airlock_artifact_ref ref;
} kept_export;

typedef struct embedded {
	airlock_settings s;
	airlock_exec *exec;
	airlock_artifact_store *store;
	char *artifacts_dir;
	char tenant[AIRLOCK_ID_MAX + 1];
	char run_id[AIRLOCK_UUID_STR_LEN + 1];
	char default_image[72];
	bool has_sandbox;
	airlock_environment_handle handle;
	kept_export *kept;
	size_t n_kept;
} embedded;

/* One artifact a session keeps at most this many exports' answers for
 * (an export past it is stored, only not matched again). */
#define KEPT_EXPORTS_MAX 1024

/* ---- the artifact store ---------------------------------------------------------- */

static int64_t size_cap(const embedded *e)
{
	int64_t v = e->s.worker.artifact_size_max;
	return v > 0 ? v : (int64_t)512 << 20;
}

static void log_artifact(const embedded *e, const char *origin, const airlock_artifact_ref *ref,
                         const char *filename, size_t filename_len)
{
	/* The name is the model's text: logged as JSON (the encoder escapes
	 * every control), invalid UTF-8 replaced, never used as a path. */
	size_t cap = filename_len > 256 ? 256 : filename_len, used = 0;
	char clean[3 * 256 + 1];
	size_t cl = mcp_utf8_clean((const unsigned char *)filename, cap, true, clean, &used);
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s%, s:s}", "event",
	                      "artifact.created", "artifact_id", ref->artifact_id, "origin", origin,
	                      "tenant_id", e->tenant, "size_bytes", (json_int_t)ref->size_bytes,
	                      "sha256", ref->sha256, "media_type", ref->media_type, "filename",
	                      clean, cl, "run_id", e->run_id);
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	if (text)
		fprintf(stderr, "%s\n", text);
	free(text);
	json_decref(o);
}

/* A put under a new artifact id. */
static int put_begin(embedded *e, char id[AIRLOCK_UUID_STR_LEN + 1], airlock_artifact_put **ret,
                     airlock_error *err)
{
	int r = airlock_uuidv7_new(id, err);
	return r < 0 ? r : airlock_artifact_put_begin(e->store, e->tenant, id, size_cap(e), ret, err);
}

static const kept_export *kept_find(const embedded *e, const char *sha, int64_t size,
                                    const char *filename, size_t filename_len,
                                    const char *media_type)
{
	for (size_t i = 0; i < e->n_kept; i++) {
		const kept_export *k = &e->kept[i];
		if (k->ref.size_bytes == size && strcmp(k->ref.sha256, sha) == 0 &&
		    k->filename_len == filename_len && memcmp(k->filename, filename, filename_len) == 0 &&
		    strcmp(k->media_type, media_type) == 0)
			return k;
	}
	return NULL;
}

static void kept_add(embedded *e, const airlock_artifact_ref *ref, const char *filename,
                     size_t filename_len, const char *media_type)
{
	if (e->n_kept >= KEPT_EXPORTS_MAX)
		return;
	kept_export *v = reallocarray(e->kept, e->n_kept + 1, sizeof(*v));
	if (!v)
		return;
	e->kept = v;
	kept_export *k = &v[e->n_kept];
	*k = (kept_export){ .filename = malloc(filename_len ? filename_len : 1),
		            .filename_len = filename_len };
	char *mt = strdup(ref->media_type);
	if (!k->filename || !mt) {
		free(k->filename);
		free(mt);
		return;
	}
	memcpy(k->filename, filename, filename_len);
	snprintf(k->media_type, sizeof(k->media_type), "%s", media_type);
	k->ref = *ref;
	k->ref.media_type = mt;
	e->n_kept++;
}

/* Seal p (against expected when not NULL), then commit it, or answer the
 * equal export already kept and drop p. */
static int put_finish(embedded *e, airlock_artifact_put *p, const char *id, const char *expected,
                      const char *media_type, const char *filename, size_t filename_len,
                      bool reuse, airlock_artifact_ref *ret, bool *ret_new, airlock_error *err)
{
	char sha[AIRLOCK_SHA256_HEX_LEN + 1];
	int64_t size = 0;
	int r = airlock_artifact_put_seal(p, expected, sha, &size, err);
	if (r < 0)
		return r;
	const kept_export *k = reuse ? kept_find(e, sha, size, filename, filename_len, media_type)
	                             : NULL;
	*ret_new = !k;
	if (!k && (r = airlock_artifact_put_commit(p, err)) < 0)
		return r;
	char *mt = strdup(media_type);
	if (!mt)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "an ArtifactRef");
	/* The caller's from here: it clears the reference. */
	*ret = (airlock_artifact_ref){ .size_bytes = size, .media_type = mt };
	snprintf(ret->artifact_id, sizeof(ret->artifact_id), "%s", k ? k->ref.artifact_id : id);
	snprintf(ret->sha256, sizeof(ret->sha256), "%s", sha);
	return 0;
}

/* Bytes this process holds, whole (a stream's output, text the model
 * wrote). */
static int store_bytes(embedded *e, const void *data, size_t len, const char *media_type,
                       const char *filename, size_t filename_len, bool reuse,
                       airlock_artifact_ref *ret, bool *ret_new, airlock_error *err)
{
	char id[AIRLOCK_UUID_STR_LEN + 1];
	airlock_artifact_put *p = NULL;
	int r = put_begin(e, id, &p, err);
	if (r == 0 && len > 0)
		r = airlock_artifact_put_write(p, data, len, err);
	if (r == 0)
		r = put_finish(e, p, id, NULL, media_type, filename, filename_len, reuse, ret, ret_new,
		               err);
	airlock_artifact_put_free(p);
	return r;
}

/* The output rule's keeper (airlock/tools.h): a stream past the tool's
 * limit, whole, as a TOOL_OUTPUT artifact of the run. */
static int keep_output(void *arg, const char *stream, const unsigned char *data, size_t len,
                       airlock_artifact_ref *ret, airlock_error *err)
{
	embedded *e = arg;
	bool fresh = true;
	int r = store_bytes(e, data, len, "text/plain", stream, strlen(stream), false, ret, &fresh,
	                    err);
	if (r == 0)
		log_artifact(e, "TOOL_OUTPUT", ret, stream, strlen(stream));
	return r;
}

/* ---- the sandbox ------------------------------------------------------------------ */

static int provision(embedded *e, const char *working_directory, airlock_error *err)
{
	/* The store's default image, built on its first use, as airlock run
	 * finds it (only a mechanism that runs the store's images needs it). */
	if (!e->s.image && !e->default_image[0] && airlock_mechanism_runs_store_images(e->s.mechanism) &&
	    e->s.deployment_mode != AIRLOCK_DEPLOYMENT_PRODUCTION) {
		int r = cli_default_image(&e->s, e->default_image, err);
		if (r < 0)
			return r;
	}
	airlock_run_command_spec_input in = {
		.settings = &e->s,
		.tenant_id = e->tenant,
		.run_id = e->run_id,
		.store_default = e->default_image[0] ? e->default_image : NULL,
		.parent = environ,
		.working_directory = working_directory,
	};
	airlock_environment_spec spec;
	int r = airlock_run_command_spec(&in, &spec, NULL, err);
	if (r < 0)
		return r;
	r = airlock_exec_provision(e->exec, &spec, &e->handle, err);
	airlock_environment_spec_clear(&spec);
	if (r < 0)
		return r;
	e->has_sandbox = true;
	fprintf(stderr, "airlock mcp: run %s: sandbox %s provisioned (%s)\n", e->run_id,
	        e->handle.environment_id, airlock_exec_name(e->exec));
	return 0;
}

static int sandbox_end(embedded *e, airlock_error *err)
{
	if (!e->has_sandbox)
		return 0;
	int r = airlock_exec_destroy(e->exec, &e->handle, err);
	if (r == 0) {
		fprintf(stderr, "airlock mcp: run %s: sandbox %s destroyed\n", e->run_id,
		        e->handle.environment_id);
		airlock_environment_handle_clear(&e->handle);
		e->has_sandbox = false;
	}
	return r;
}

static int run_command(embedded *e, const char *args, size_t len, const mcp_call_io *io,
                       char **ret_json, airlock_error *err)
{
	airlock_run_command_arguments a;
	int r = airlock_run_command_arguments_decode(args, len, &a, err);
	if (r < 0)
		return r;
	/* The worker's call: the service captures four times what the model
	 * is shown, and the rest is kept as an artifact (the output rule). */
	airlock_run_command_request req = { .argv = a.argv,
		                            .argc = a.argc,
		                            .working_directory = a.working_directory,
		                            .timeout_seconds = a.timeout_seconds,
		                            .maximum_output_bytes = AIRLOCK_TOOL_OUTPUT_CEILING };
	airlock_execution_command cmd;
	airlock_execution_result res = { 0 };
	airlock_artifact_ref refs[2] = { { { 0 } } };
	bool has_ref[2] = { false, false };
	/* Validated before anything is provisioned: a bad vector or an
	 * escaping directory never costs a sandbox. */
	r = airlock_run_command_prepare(&req, &e->s, &cmd, err);
	if (r == 0 && !e->has_sandbox)
		r = provision(e, a.working_directory, err);
	if (r == 0) {
		airlock_exec_call call = { .tenant_id = e->tenant,
			                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE,
			                   .cancel = io->cancel,
			                   .on_output = io->on_output,
			                   .output_arg = io->output_arg };
		r = airlock_exec_execute(e->exec, &call, &e->handle, &cmd, &res, err);
		if (r < 0 && err->cls == AIRLOCK_ERR_EXECUTION_REJECTED) {
			/* The sandbox is gone (it expired): the next call
			 * provisions another, as the worker's claim does. */
			airlock_error derr = { 0 };
			sandbox_end(e, &derr);
		}
	}
	if (r == 0 && airlock_tool_output_apply(&res, keep_output, e, refs, has_ref) < 0)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the result's output excerpt");
	if (r == 0 && !(*ret_json = airlock_result_to_tool_json_refs(
				&res, has_ref[0] ? &refs[0] : NULL, has_ref[1] ? &refs[1] : NULL, err)))
		r = -EINVAL;
	for (int i = 0; i < 2; i++)
		if (has_ref[i])
			airlock_artifact_ref_clear(&refs[i]);
	airlock_execution_result_clear(&res);
	airlock_run_command_arguments_clear(&a);
	return r;
}

static int export_sink(void *arg, const void *buf, size_t len, airlock_error *err)
{
	return airlock_artifact_put_write(arg, buf, len, err);
}

/* A workspace file streamed into the store: the workspace's digest of
 * what it read is the expected digest at the seal, so a byte changed on
 * the way is ArtifactIntegrityError and nothing is kept. */
static int export_path(embedded *e, const airlock_export_arguments *a, const char *media_type,
                       const char *filename, size_t filename_len, airlock_artifact_ref *ref,
                       bool *ret_new, airlock_error *err)
{
	if (memchr(a->path, 0, a->path_len))
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "artifact.export.arguments.path: contains a NUL byte");
	/* An export never provisions: a run without a sandbox has no
	 * workspace yet. */
	if (!e->has_sandbox)
		return airlock_error_set(err, AIRLOCK_ERR_TOOL_VALIDATION, 0,
		                         "artifact.export.arguments.path: no such file: this run has "
		                         "no workspace yet (it is made by the run's first "
		                         "sandbox.run_command)");
	airlock_workspace *ws = NULL;
	airlock_exec_call call = { .tenant_id = e->tenant, .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	int r = airlock_exec_workspace(e->exec, &call, &e->handle, &ws, err);
	char id[AIRLOCK_UUID_STR_LEN + 1];
	airlock_artifact_put *p = NULL;
	if (r == 0)
		r = put_begin(e, id, &p, err);
	char source_sha[AIRLOCK_SHA256_HEX_LEN + 1];
	uint64_t size = 0;
	if (r == 0) {
		r = airlock_workspace_read_stream(ws, a->path, (uint64_t)size_cap(e), export_sink, p,
		                                  &size, source_sha, err);
		/* A file that is not there (or not a file) is the model's
		 * mistake, said as the path's, as the worker says it. */
		if (r < 0 && err->cls == AIRLOCK_ERR_SYSTEM &&
		    (err->errnum == ENOENT || err->errnum == ENOTDIR || err->errnum == EISDIR))
			airlock_error_wrap(err, AIRLOCK_ERR_TOOL_VALIDATION, err,
			                   "artifact.export.arguments.path");
	}
	if (r == 0)
		r = put_finish(e, p, id, source_sha, media_type, filename, filename_len, true, ref,
		               ret_new, err);
	airlock_artifact_put_free(p);
	airlock_workspace_release(ws);
	return r;
}

static int artifact_export(embedded *e, const char *args, size_t len, char **ret_json,
                           airlock_error *err)
{
	airlock_export_arguments a;
	int r = airlock_export_arguments_decode(args, len, &a, err);
	if (r < 0)
		return r;
	const char *name;
	size_t name_len;
	airlock_export_filename(&a, &name, &name_len);
	const char *media = a.media_type[0] ? a.media_type
	                    : a.path        ? "application/octet-stream"
	                                    : "text/plain";
	airlock_artifact_ref ref = { { 0 } };
	bool fresh = false;
	r = a.path ? export_path(e, &a, media, name, name_len, &ref, &fresh, err)
	           : store_bytes(e, a.text, a.text_len, media, name, name_len, true, &ref, &fresh,
	                         err);
	if (r == 0 && fresh) {
		log_artifact(e, a.path ? "SANDBOX_EXPORT" : "MODEL_OUTPUT", &ref, name, name_len);
		kept_add(e, &ref, name, name_len, media);
	}
	if (r == 0 && !(*ret_json = airlock_artifact_ref_to_json(&ref, err)))
		r = -EINVAL;
	if (r == 0)
		airlock_artifact_ref_clear(&ref);
	airlock_export_arguments_clear(&a);
	return r;
}

/* ---- the backend ------------------------------------------------------------------ */

static int embedded_call(void *ctx, const char *tool, const char *args, size_t len,
                         const mcp_call_io *io, char **ret_json, airlock_error *err)
{
	embedded *e = ctx;
	*ret_json = NULL;
	if (strcmp(tool, AIRLOCK_TOOL_RUN_COMMAND) == 0)
		return run_command(e, args, len, io, ret_json, err);
	return artifact_export(e, args, len, ret_json, err);
}

static void embedded_shutdown(void *ctx)
{
	embedded *e = ctx;
	airlock_exec_shutdown(e->exec);
}

static int embedded_end(void *ctx)
{
	embedded *e = ctx;
	airlock_error err = { 0 };
	int r = sandbox_end(e, &err);
	if (r < 0)
		cli_error("mcp: destroy", &err);
	return r;
}

static void embedded_free(void *ctx)
{
	embedded *e = ctx;
	if (!e)
		return;
	/* A sandbox still held (a destroy that failed) is tried once more by
	 * the core's free. */
	airlock_exec_free(e->exec);
	airlock_environment_handle_clear(&e->handle);
	airlock_artifact_store_free(e->store);
	for (size_t i = 0; i < e->n_kept; i++) {
		free(e->kept[i].filename);
		airlock_artifact_ref_clear(&e->kept[i].ref);
	}
	free(e->kept);
	free(e->artifacts_dir);
	airlock_settings_clear(&e->s);
	free(e);
}

static const mcp_backend embedded_ops = {
	.name = "embedded",
	.call = embedded_call,
	.shutdown = embedded_shutdown,
	.end = embedded_end,
	.free = embedded_free,
};

/* The default artifacts directory, state_dir/mcp-artifacts: made 0700
 * with any missing parent (an operator's existing directory is used as it
 * is; the store's open refuses one that is not 0700 and ours). */
static int default_artifacts_dir(const airlock_settings *s, char **ret, airlock_error *err)
{
	const char *state = s->worker.state_dir ? s->worker.state_dir : "/var/lib/airlock/worker";
	char *dir = NULL;
	if (asprintf(&dir, "%s/mcp-artifacts", state) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "--artifacts-dir");
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int k = mkdir(dir, 0700);
		*p = '/';
		if (k < 0 && errno != EEXIST) {
			int e = errno;
			airlock_error_set(err, AIRLOCK_ERR_CONFIG, e,
			                  "the artifacts directory %s (worker.state_dir, or --artifacts-dir)",
			                  dir);
			free(dir);
			return -e;
		}
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		int e = errno;
		airlock_error_set(err, AIRLOCK_ERR_CONFIG, e,
		                  "the artifacts directory %s (worker.state_dir, or --artifacts-dir)", dir);
		free(dir);
		return -e;
	}
	*ret = dir;
	return 0;
}

int mcp_embedded_open(const mcp_embedded_flags *f, const mcp_backend **ret_ops, void **ret_ctx,
                      airlock_error *err)
{
	embedded *e = calloc(1, sizeof(*e));
	if (!e)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "airlock mcp");
	size_t tl = strlen(f->tenant);
	int r = tl >= 1 && tl <= AIRLOCK_ID_MAX &&
	                        strspn(f->tenant, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuv"
	                                          "wxyz0123456789_-") == tl
	                ? 0
	                : airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0,
	                                    "--tenant: 1 to 128 of A-Z, a-z, 0-9, '_' and '-'");
	if (r == 0) {
		snprintf(e->tenant, sizeof(e->tenant), "%s", f->tenant);
		r = cli_load_settings(f->config, f->mechanism, &e->s, err);
	}
	if (r == 0)
		r = airlock_uuidv7_new(e->run_id, err);
	/* The store first: a directory it refuses is said before a mechanism
	 * is opened. */
	if (r == 0) {
		if (f->artifacts_dir)
			e->artifacts_dir = strdup(f->artifacts_dir);
		else
			r = default_artifacts_dir(&e->s, &e->artifacts_dir, err);
		if (r == 0 && !e->artifacts_dir)
			r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "--artifacts-dir");
	}
	if (r == 0)
		r = airlock_artifact_store_fs_open(e->artifacts_dir, &e->store, err);
	/* No egress: the session's sandbox has only lo (docs/mcp.md). */
	if (r == 0)
		r = airlock_exec_open_egress(&e->s, NULL, &e->exec, err);
	if (r < 0) {
		embedded_free(e);
		return r;
	}
	fprintf(stderr, "airlock mcp: embedded, mechanism %s, tenant %s, run %s, artifacts in ",
	        airlock_exec_name(e->exec), e->tenant, e->run_id);
	cli_fputs_escaped(stderr, e->artifacts_dir);
	fputc('\n', stderr);
	*ret_ops = &embedded_ops;
	*ret_ctx = e;
	return 0;
}
