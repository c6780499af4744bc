/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock artifact: the worker's artifact store by hand
 * (docs/worker-api.md, "Artifacts"), through the worker library's client
 * (airlock/worker_client.h), which hashes an upload before it sends it
 * and checks a download's bytes against the metadata and the ETag.
 *
 * A download to a file never leaves a half-written or unverified file
 * where the name was: the bytes go to an unnamed file in the target's
 * directory (O_TMPFILE; a named mkstemp file, removed on every failure,
 * where the filesystem has none), are fsynced once verified and only then
 * renamed over the name. What the worker sends (names, messages) is
 * untrusted: JSON goes out re-encoded by the library, messages escaped.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "airlock/worker_client.h"
#include "cli/common.h"

/* The metadata, a listing's page, a delete: answered from the database. */
#define ARTIFACT_SHORT_TIMEOUT_MS 30000

static void artifact_usage(FILE *out)
{
	fprintf(out,
	        "usage: airlock artifact put FILE [--filename NAME] [--media-type TYPE] [--tenant T]\n"
	        "                            [OPTIONS]\n"
	        "       airlock artifact get ID [-o FILE] [OPTIONS]\n"
	        "       airlock artifact ls [--run RUN] [--tenant T] [--after ID] [--limit N] [OPTIONS]\n"
	        "       airlock artifact rm ID [OPTIONS]\n\n"
	        "The worker's artifact store (docs/worker-api.md, \"Artifacts\"). put uploads FILE\n"
	        "(a regular file, hashed first, then streamed with its SHA-256) under NAME (FILE's\n"
	        "base name unless --filename) and prints its ArtifactRef; get writes artifact ID\n"
	        "to FILE (replaced only by the whole, verified artifact) or to stdout when it is\n"
	        "not a terminal (the bytes go out before the verdict: the exit status is it) and\n"
	        "checks its SHA-256 against the metadata and the ETag; ls prints the artifacts of\n"
	        "the token's tenant (of RUN with --run), every page, at most N with --limit; rm\n"
	        "removes one.\n\n"
	        "OPTIONS: --worker ADDRESS (unix:/path, or HOST:PORT over TLS; default the\n"
	        "settings' worker.listen), --token-file FILE (a bearer token of the worker's\n"
	        "tokens_file, read as a credential: mode 0600; none: the worker's dev mode),\n"
	        "--tls-ca-file FILE (the CA of a HOST:PORT worker), --config FILE.\n\n"
	        "Exit status: 0 done; on the worker's refusal a line naming the worker, the\n"
	        "status, the class and the message, and 65 (400, 401, 403, 404, 409, 413),\n"
	        "69 (503, or the worker not reachable), 70 (ArtifactIntegrityError: a digest\n"
	        "that differs, named with the other); 64 bad usage; 74 stdout failed.\n");
}

enum {
	OPT_WORKER = 256, OPT_TOKEN, OPT_TLS_CA, OPT_CONFIG, OPT_FILENAME, OPT_MEDIA, OPT_TENANT,
	OPT_RUN, OPT_AFTER, OPT_LIMIT, OPT_HELP
};

static const struct option artifact_options[] = {
	{ "worker", required_argument, NULL, OPT_WORKER },
	{ "token-file", required_argument, NULL, OPT_TOKEN },
	{ "tls-ca-file", required_argument, NULL, OPT_TLS_CA },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "filename", required_argument, NULL, OPT_FILENAME },
	{ "media-type", required_argument, NULL, OPT_MEDIA },
	{ "tenant", required_argument, NULL, OPT_TENANT },
	{ "run", required_argument, NULL, OPT_RUN },
	{ "after", required_argument, NULL, OPT_AFTER },
	{ "limit", required_argument, NULL, OPT_LIMIT },
	{ "output", required_argument, NULL, 'o' },
	{ "help", no_argument, NULL, OPT_HELP },
	{ 0 },
};

typedef struct artifact_flags {
	cli_worker_flags w;
	const char *filename, *media_type, *tenant, *run, *after, *output;
	int64_t limit;
	char *args[2];
	int nargs;
} artifact_flags;

/* -1 to go on, or the exit status. */
static int artifact_parse(const char *sub, int argc, char **argv, artifact_flags *f)
{
	*f = (artifact_flags){ 0 };
	optind = 1;
	opterr = 1;
	int c;
	while ((c = getopt_long(argc, argv, "ho:", artifact_options, NULL)) != -1) {
		switch (c) {
		case OPT_WORKER: f->w.worker = optarg; break;
		case OPT_TOKEN: f->w.token_file = optarg; break;
		case OPT_TLS_CA: f->w.tls_ca_file = optarg; break;
		case OPT_CONFIG: f->w.config = optarg; break;
		case OPT_FILENAME: f->filename = optarg; break;
		case OPT_MEDIA: f->media_type = optarg; break;
		case OPT_TENANT: f->tenant = optarg; break;
		case OPT_RUN: f->run = optarg; break;
		case OPT_AFTER: f->after = optarg; break;
		case 'o': f->output = optarg; break;
		case OPT_LIMIT: {
			char *end = NULL;
			errno = 0;
			long long n = strtoll(optarg, &end, 10);
			if (errno || end == optarg || *end || n < 1 || n > INT32_MAX) {
				fprintf(stderr, "airlock artifact %s: --limit ", sub);
				cli_fputs_escaped(stderr, optarg);
				fprintf(stderr, ": not an integer from 1 to %d\n", INT32_MAX);
				return CLI_EXIT_USAGE;
			}
			f->limit = n;
			break;
		}
		case OPT_HELP:
		case 'h':
			artifact_usage(stdout);
			return CLI_EXIT_OK;
		default:
			artifact_usage(stderr);
			return CLI_EXIT_USAGE;
		}
	}
	while (optind < argc) {
		if (f->nargs == (int)(sizeof(f->args) / sizeof(f->args[0]))) {
			fprintf(stderr, "airlock artifact %s: too many arguments\n", sub);
			return CLI_EXIT_USAGE;
		}
		f->args[f->nargs++] = argv[optind++];
	}
	return -1;
}

/* A library error: the line, and its exit status. */
static int failed(const char *verb, const airlock_error *err)
{
	cli_error(verb, err);
	return cli_exit_for(err);
}

static int artifact_put(const artifact_flags *f, const airlock_worker_client_config *cfg)
{
	if (f->nargs != 1 || f->output || f->run || f->after || f->limit) {
		fprintf(stderr, "usage: airlock artifact put FILE [--filename NAME] [--media-type "
		                "TYPE] [--tenant T] [OPTIONS]\n");
		return CLI_EXIT_USAGE;
	}
	if (f->filename && !*f->filename) {
		fprintf(stderr, "airlock artifact put: --filename: an empty name\n");
		return CLI_EXIT_USAGE;
	}
	const char *file = f->args[0];
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		fputs("airlock artifact put: ", stderr);
		cli_fputs_escaped(stderr, file);
		fprintf(stderr, ": %s\n", strerror(errno));
		return CLI_EXIT_REJECTED;
	}
	const char *name = f->filename;
	if (!name) {
		const char *slash = strrchr(file, '/');
		name = slash && slash[1] ? slash + 1 : file;
	}
	airlock_worker_artifact_upload req = { .fd = fd, .filename = name,
		                               .media_type = f->media_type, .tenant_id = f->tenant };
	airlock_worker_answer a = { 0 };
	airlock_error err = { 0 };
	int r = airlock_worker_client_artifact_put(cfg, &req, &a, &err);
	close(fd);
	if (r < 0) {
		if (err.cls == AIRLOCK_ERR_SYSTEM)
			airlock_error_prefix(&err, "%s: ", file);
		return failed("artifact put", &err);
	}
	int code = cli_print_worker_answer("artifact put", cfg->address, &a, NULL);
	airlock_worker_answer_clear(&a);
	return code;
}

/* An unnamed file in dir (O_TMPFILE), or a named one made by mkstemp where
 * the filesystem has none (*named set to its path). 0600 either way. */
static int temp_in(const char *dir, char named[PATH_MAX], airlock_error *err)
{
	named[0] = 0;
	int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "a temporary file in %s",
		                         dir);
	if ((size_t)snprintf(named, PATH_MAX, "%s/.airlock-get-XXXXXX", dir) >= PATH_MAX)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENAMETOOLONG, "%s", dir);
	fd = mkostemp(named, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		named[0] = 0;
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "a temporary file in %s", dir);
	}
	return fd;
}

/* The verified file fd under the name target: fsync, a name in the same
 * directory (the unnamed file linked under a fresh one), then rename over
 * target, then the directory's fsync. */
static int place(int fd, const char *dir, char named[PATH_MAX], const char *target,
                 airlock_error *err)
{
	if (fsync(fd) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "fsync of the download");
	char tmp[PATH_MAX];
	if (named[0]) {
		snprintf(tmp, sizeof(tmp), "%s", named);
	} else {
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		for (int tries = 0;; tries++) {
			unsigned char rnd[6];
			if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "getrandom");
			if ((size_t)snprintf(tmp, sizeof(tmp), "%s/.airlock-get-%02x%02x%02x%02x%02x%02x",
			                     dir, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
			                     rnd[5]) >= sizeof(tmp))
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENAMETOOLONG, "%s", dir);
			if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0)
				break;
			if (errno != EEXIST || tries == 16)
				return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno,
				                         "naming the download in %s", dir);
		}
	}
	if (rename(tmp, target) < 0) {
		int e = errno;
		unlink(tmp);
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "renaming the download to %s",
		                         target);
	}
	named[0] = 0; /* it is target now: nothing to remove */
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		/* The rename is durable once the directory is. */
		int r = fsync(dfd);
		int e = errno;
		close(dfd);
		if (r < 0)
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, e, "fsync of %s", dir);
	}
	return 0;
}

static int artifact_get(const artifact_flags *f, const airlock_worker_client_config *cfg)
{
	if (f->nargs != 1 || f->filename || f->media_type || f->tenant || f->run || f->after ||
	    f->limit) {
		fprintf(stderr, "usage: airlock artifact get ID [-o FILE] [OPTIONS]\n");
		return CLI_EXIT_USAGE;
	}
	const char *id = f->args[0];
	airlock_worker_answer a = { 0 };
	airlock_error err = { 0 };
	if (!f->output) {
		if (isatty(STDOUT_FILENO)) {
			fprintf(stderr, "airlock artifact get: stdout is a terminal: write the artifact "
			                "to a file (-o FILE) or a pipe (| less)\n");
			return CLI_EXIT_USAGE;
		}
		if (airlock_worker_client_artifact_get(cfg, id, STDOUT_FILENO, &a, &err) < 0) {
			/* What went to stdout is not the artifact: said, with the
			 * status. */
			airlock_error_prefix(&err, "the bytes written to stdout are not the artifact: ");
			return err.cls == AIRLOCK_ERR_SYSTEM && err.errnum == EPIPE
			               ? (cli_error("artifact get", &err), CLI_EXIT_IOERR)
			               : failed("artifact get", &err);
		}
		free(a.json); /* the metadata: stdout holds the content */
		a.json = NULL;
		int code = cli_print_worker_answer("artifact get", cfg->address, &a,
		                                   "no such artifact of this tenant: airlock artifact ls");
		airlock_worker_answer_clear(&a);
		return code;
	}
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", f->output) >= (int)sizeof(buf)) {
		fprintf(stderr, "airlock artifact get: -o: the path is over %d bytes\n", PATH_MAX);
		return CLI_EXIT_USAGE;
	}
	const char *dir = dirname(buf);
	char named[PATH_MAX];
	int fd = temp_in(dir, named, &err);
	if (fd < 0)
		return failed("artifact get", &err);
	int r = airlock_worker_client_artifact_get(cfg, id, fd, &a, &err);
	if (r == 0 && a.status == 200)
		r = place(fd, dir, named, f->output, &err);
	/* Whatever did not become FILE goes (an unnamed file with its
	 * descriptor). */
	if (named[0])
		unlink(named);
	close(fd);
	if (r < 0) {
		airlock_worker_answer_clear(&a);
		return failed("artifact get", &err);
	}
	int code = cli_print_worker_answer("artifact get", cfg->address, &a,
	                                   "no such artifact of this tenant: airlock artifact ls");
	airlock_worker_answer_clear(&a);
	return code;
}

typedef struct list_out {
	size_t n;
} list_out;

static int list_item(void *arg, const char *json, airlock_error *err)
{
	list_out *o = arg;
	if (printf("%s\n    %s", o->n ? "," : "", json) < 0)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "stdout");
	o->n++;
	return 0;
}

static int artifact_ls(const artifact_flags *f, const airlock_worker_client_config *cfg)
{
	if (f->nargs != 0 || f->filename || f->media_type || f->output) {
		fprintf(stderr, "usage: airlock artifact ls [--run RUN] [--tenant T] [--after ID] "
		                "[--limit N] [OPTIONS]\n");
		return CLI_EXIT_USAGE;
	}
	airlock_worker_artifact_query q = { .run_id = f->run, .tenant_id = f->tenant,
		                            .after = f->after, .limit = f->limit };
	list_out o = { 0 };
	airlock_worker_answer a = { 0 };
	airlock_error err = { 0 };
	fputs("{\n  \"artifacts\": [", stdout);
	int r = airlock_worker_client_artifact_list(cfg, &q, list_item, &o, &a, &err);
	if (r == 0 && a.status == 200) {
		fputs(o.n ? "\n  ]\n}\n" : "]\n}\n", stdout);
		if (fflush(stdout) != 0 || ferror(stdout)) {
			fprintf(stderr, "airlock artifact ls: stdout: %s\n", strerror(errno));
			return CLI_EXIT_IOERR;
		}
		return CLI_EXIT_OK;
	}
	/* The listing is cut: what stdout holds is not JSON; the line says
	 * why. */
	fputc('\n', stdout);
	fflush(stdout);
	if (r < 0)
		return err.cls == AIRLOCK_ERR_SYSTEM ? (cli_error("artifact ls", &err), CLI_EXIT_IOERR)
		                                     : failed("artifact ls", &err);
	int code = cli_print_worker_answer("artifact ls", cfg->address, &a, NULL);
	airlock_worker_answer_clear(&a);
	return code;
}

static int artifact_rm(const artifact_flags *f, const airlock_worker_client_config *cfg)
{
	if (f->nargs != 1 || f->filename || f->media_type || f->tenant || f->run || f->after ||
	    f->limit || f->output) {
		fprintf(stderr, "usage: airlock artifact rm ID [OPTIONS]\n");
		return CLI_EXIT_USAGE;
	}
	const char *id = f->args[0];
	size_t n = strlen(id);
	if (n < 1 || n > 64 ||
	    strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-") != n) {
		fputs("airlock artifact rm: ID '", stderr);
		cli_fputs_escaped(stderr, id);
		fputs("': 1 to 64 of A-Z, a-z, 0-9 and '-'\n", stderr);
		return CLI_EXIT_USAGE;
	}
	char path[96];
	snprintf(path, sizeof(path), "/v1/artifacts/%s", id);
	airlock_worker_answer a = { 0 };
	airlock_error err = { 0 };
	if (airlock_worker_client_call(cfg, "DELETE", path, NULL, &a, &err) < 0)
		return failed("artifact rm", &err);
	int code = cli_print_worker_answer("artifact rm", cfg->address, &a,
	                                   "no such artifact of this tenant: airlock artifact ls");
	if (code == CLI_EXIT_OK)
		fprintf(stderr, "airlock artifact rm: %s removed\n", id);
	airlock_worker_answer_clear(&a);
	return code;
}

int cli_artifact(int argc, char **argv)
{
	if (argc < 2 || cli_is_help(argv[1])) {
		artifact_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
	}
	static const struct {
		const char *name;
		int (*fn)(const artifact_flags *f, const airlock_worker_client_config *cfg);
	} subs[] = {
		{ "put", artifact_put },
		{ "get", artifact_get },
		{ "ls", artifact_ls },
		{ "rm", artifact_rm },
	};
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		if (strcmp(argv[1], subs[i].name) != 0)
			continue;
		artifact_flags f;
		int code = artifact_parse(subs[i].name, argc - 1, argv + 1, &f);
		if (code >= 0)
			return code;
		char verb[32];
		snprintf(verb, sizeof(verb), "artifact %s", subs[i].name);
		airlock_settings s = { 0 };
		airlock_worker_client_config cfg;
		/* put and get stretch this by the transfer's size (the
		 * library: a second per 64 KiB, the worker's own rule). */
		code = cli_worker_config(verb, &f.w, ARTIFACT_SHORT_TIMEOUT_MS, &s, &cfg);
		if (code < 0)
			code = subs[i].fn(&f, &cfg);
		airlock_settings_clear(&s);
		return code;
	}
	fputs("airlock artifact: unknown subcommand '", stderr);
	cli_fputs_escaped(stderr, argv[1]);
	fputs("'\n", stderr);
	artifact_usage(stderr);
	return CLI_EXIT_USAGE;
}
