/* SPDX-License-Identifier: Apache-2.0 */
/*
 * airlock image: build, list and import sandbox images, named by digest
 * (include/airlock/image.h). The store comes from the settings
 * (sandbox.image_store, or AIRLOCK_IMAGE_STORE).
 *
 * Output contract: `build` and `import` print the digest alone on stdout so
 * a script can capture it; progress and errors go to stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "airlock/image.h"
#include "cli/common.h"
#include "util/cleanup.h"

static void image_usage(FILE *out)
{
	fprintf(out,
	        "usage: airlock image SUBCOMMAND [OPTIONS]\n\n"
	        "Sandbox images are read-only EROFS file systems named by their SHA-256\n"
	        "digest (sha256:...), never by a tag.\n\n"
	        "subcommands:\n"
	        "  build    build the default image from Debian packages and print its digest\n"
	        "  ls       list the stored images\n"
	        "  import   store an existing image file under its digest\n\n"
	        "'airlock image SUBCOMMAND --help' describes a subcommand.\n");
}

static void build_usage(FILE *out)
{
	fprintf(out,
	        "usage: airlock image build [--packages A,B,C] [--mirror URL] [--config FILE]\n\n"
	        "Build an image with debootstrap (Debian %s, minbase, plus\n"
	        "%s\n"
	        "and the packages given), store it under its digest, and print the digest\n"
	        "(sha256:...) alone on stdout. Progress goes to stderr, one line per step.\n"
	        "Needs root and network access to the mirror; takes a few minutes.\n\n"
	        "options:\n"
	        "  --packages LIST   more Debian packages, comma separated (repeatable)\n"
	        "  --mirror URL      the Debian mirror (default: the one apt's sources name\n"
	        "                    for %s)\n"
	        "  --config FILE     settings file (sandbox.image_store is the store)\n"
	        "  --if-missing      when the store already holds an image built from the\n"
	        "                    same packages and recipe, print its digest, build nothing\n",
	        AIRLOCK_IMAGE_SUITE, AIRLOCK_IMAGE_DEFAULT_PACKAGES, AIRLOCK_IMAGE_SUITE);
}

static void ls_usage(FILE *out)
{
	fprintf(out, "usage: airlock image ls [--config FILE]\n\n"
	             "List the stored images, newest first: digest, size in MiB, when it was\n"
	             "stored (UTC), and for a built image its suite and whether it is the\n"
	             "default package list. Listing does not verify content; provisioning does.\n\n"
	             "options:\n"
	             "  --config FILE     settings file (sandbox.image_store is the store)\n");
}

static void import_usage(FILE *out)
{
	fprintf(out, "usage: airlock image import [--config FILE] FILE\n\n"
	             "Store the bytes of FILE (an EROFS image) under their digest and print the\n"
	             "digest alone on stdout.\n\n"
	             "options:\n"
	             "  --config FILE     settings file (sandbox.image_store is the store)\n");
}

enum { OPT_CONFIG = 256, OPT_PACKAGES, OPT_MIRROR, OPT_IF_MISSING, OPT_HELP };

static const struct option image_options[] = {
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "packages", required_argument, NULL, OPT_PACKAGES },
	{ "mirror", required_argument, NULL, OPT_MIRROR },
	{ "if-missing", no_argument, NULL, OPT_IF_MISSING },
	{ "help", no_argument, NULL, OPT_HELP },
	{ 0 },
};

typedef struct image_flags {
	const char *config, *mirror;
	bool if_missing;
	char *packages[AIRLOCK_IMAGE_EXTRA_PACKAGES_MAX];
	size_t n_packages;
	char *lists[AIRLOCK_IMAGE_EXTRA_PACKAGES_MAX]; /* the --packages values, split in place */
	size_t n_lists;
} image_flags;

static void image_flags_clear(image_flags *f)
{
	for (size_t i = 0; i < f->n_lists; i++)
		free(f->lists[i]);
	f->n_lists = f->n_packages = 0;
}

/* "a,b,c" into f->packages. Names are checked by the library. */
static int add_packages(image_flags *f, const char *value)
{
	if (f->n_lists == ARRAY_SIZE(f->lists)) {
		fprintf(stderr, "airlock image build: too many --packages flags\n");
		return -1;
	}
	char *copy = strdup(value);
	if (!copy) {
		fprintf(stderr, "airlock image build: out of memory\n");
		return -1;
	}
	f->lists[f->n_lists++] = copy;
	char *p = copy;
	for (;;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = 0;
		if (f->n_packages == ARRAY_SIZE(f->packages)) {
			fprintf(stderr, "airlock image build: more than %d packages given\n",
			        AIRLOCK_IMAGE_EXTRA_PACKAGES_MAX);
			return -1;
		}
		f->packages[f->n_packages++] = p;
		if (!comma)
			break;
		p = comma + 1;
	}
	return 0;
}

/* Parse the subcommand's flags. Returns -1 when parsing went on, or the
 * exit code to return now (help printed, or a usage error). */
static int image_parse(const char *sub, int argc, char **argv, bool allow_build_flags,
                       void (*usage)(FILE *), image_flags *f, int *ret_first)
{
	optind = 1;
	opterr = 1;
	int c;
	while ((c = getopt_long(argc, argv, "+h", image_options, NULL)) != -1) {
		switch (c) {
		case OPT_CONFIG:
			f->config = optarg;
			break;
		case OPT_PACKAGES:
		case OPT_MIRROR:
		case OPT_IF_MISSING:
			if (!allow_build_flags) {
				fprintf(stderr, "airlock image %s: --%s is an option of 'image build'\n", sub,
				        c == OPT_PACKAGES ? "packages" : c == OPT_MIRROR ? "mirror" : "if-missing");
				usage(stderr);
				return CLI_EXIT_USAGE;
			}
			if (c == OPT_IF_MISSING)
				f->if_missing = true;
			else if (c == OPT_MIRROR)
				f->mirror = optarg;
			else if (add_packages(f, optarg) < 0)
				return CLI_EXIT_USAGE;
			break;
		case OPT_HELP:
		case 'h':
			usage(stdout);
			return CLI_EXIT_OK;
		default:
			usage(stderr);
			return CLI_EXIT_USAGE;
		}
	}
	*ret_first = optind;
	return -1;
}

static int open_store(const char *verb, const char *config, airlock_image_store **ret,
                      char **ret_configured)
{
	airlock_error err = { 0 };
	airlock_settings s = { 0 };
	int r = cli_load_settings(config, NULL, &s, &err);
	if (r < 0) {
		cli_error(verb, &err);
		return cli_exit_for(&err);
	}
	r = airlock_image_store_open(s.image_store, ret, &err);
	if (r == 0 && ret_configured)
		*ret_configured = TAKE_PTR(s.image);
	airlock_settings_clear(&s);
	if (r < 0) {
		cli_error(verb, &err);
		return cli_exit_for(&err);
	}
	return CLI_EXIT_OK;
}

typedef struct progress_state {
	int64_t start_ms;
} progress_state;

static void on_progress(void *ctx, const char *line)
{
	const progress_state *p = ctx;
	int64_t s = (cli_monotonic_ms() - p->start_ms) / 1000;
	fprintf(stderr, "airlock image build: [%3lld:%02lld] %s\n", (long long)(s / 60),
	        (long long)(s % 60), line);
	fflush(stderr);
}

static int image_build(int argc, char **argv)
{
	image_flags f = { 0 };
	int first = 0;
	int pr = image_parse("build", argc, argv, true, build_usage, &f, &first);
	if (pr >= 0) {
		image_flags_clear(&f);
		return pr;
	}
	if (first < argc) {
		fputs("airlock image build: unexpected argument '", stderr);
		cli_fputs_escaped(stderr, argv[first]);
		fputs("'\n", stderr);
		build_usage(stderr);
		image_flags_clear(&f);
		return CLI_EXIT_USAGE;
	}
	airlock_image_store *store = NULL;
	int rc = open_store("image build", f.config, &store, NULL);
	if (rc != CLI_EXIT_OK) {
		image_flags_clear(&f);
		return rc;
	}
	airlock_image_build_options opts = {
		.extra_packages = (const char *const *)f.packages,
		.n_extra_packages = f.n_packages,
		.mirror = f.mirror,
	};
	progress_state p = { .start_ms = cli_monotonic_ms() };
	airlock_error err = { 0 };
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	fprintf(stderr, "airlock image build: store %s\n", airlock_image_store_path(store));
	int r = 0;
	if (f.if_missing) {
		r = airlock_image_find_built(store, &opts, digest, &err);
		if (r > 0)
			fprintf(stderr, "airlock image build: already stored, nothing built\n");
	}
	if (r == 0)
		r = airlock_image_build(store, &opts, on_progress, &p, digest, &err);
	airlock_image_store_free(store);
	image_flags_clear(&f);
	if (r < 0) {
		cli_error("image build", &err);
		return cli_exit_for(&err);
	}
	printf("%s\n", digest);
	return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_SOFTWARE;
}

static int image_ls(int argc, char **argv)
{
	image_flags f = { 0 };
	int first = 0;
	int pr = image_parse("ls", argc, argv, false, ls_usage, &f, &first);
	if (pr >= 0)
		return pr;
	if (first < argc) {
		fputs("airlock image ls: unexpected argument '", stderr);
		cli_fputs_escaped(stderr, argv[first]);
		fputs("'\n", stderr);
		ls_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	airlock_image_store *store = NULL;
	_cleanup_free_ char *configured = NULL;
	int rc = open_store("image ls", f.config, &store, &configured);
	if (rc != CLI_EXIT_OK)
		return rc;
	airlock_error err = { 0 };
	airlock_image_info *infos = NULL;
	size_t n = 0;
	int r = airlock_image_list(store, &infos, &n, &err);
	if (r < 0) {
		cli_error("image ls", &err);
		airlock_image_store_free(store);
		return cli_exit_for(&err);
	}
	for (size_t i = 0; i < n; i++) {
		const airlock_image_info *info = &infos[i];
		time_t t = (time_t)(info->mtime_ms / 1000);
		struct tm tm;
		char when[32] = "?";
		if (gmtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%SZ", &tm);
		char what[256] = "imported";
		if (info->suite && info->packages) {
			/* The sidecar records the sorted, unique list: for the default
			 * build that is the header's constant as written. */
			if (strcmp(info->packages, AIRLOCK_IMAGE_DEFAULT_PACKAGES) == 0)
				snprintf(what, sizeof(what), "%s default", info->suite);
			else
				snprintf(what, sizeof(what), "%s %.200s", info->suite, info->packages);
		}
		printf("%s  %8.1f MiB  %s  %s%s\n", info->digest,
		       (double)info->size_bytes / (1024.0 * 1024.0), when, what,
		       configured && strcmp(configured, info->digest) == 0 ? "  (configured)" : "");
	}
	if (n == 0)
		fprintf(stderr, "airlock image ls: no images in %s; build one with 'airlock image build'\n",
		        airlock_image_store_path(store));
	airlock_image_list_free(infos, n);
	airlock_image_store_free(store);
	return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_SOFTWARE;
}

static int image_import(int argc, char **argv)
{
	image_flags f = { 0 };
	int first = 0;
	int pr = image_parse("import", argc, argv, false, import_usage, &f, &first);
	if (pr >= 0)
		return pr;
	if (argc - first != 1) {
		fprintf(stderr, "airlock image import: give exactly one FILE\n");
		import_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	const char *path = argv[first];
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		fprintf(stderr, "airlock image import: %s: %s\n", path, strerror(errno));
		return CLI_EXIT_USAGE;
	}
	airlock_image_store *store = NULL;
	int rc = open_store("image import", f.config, &store, NULL);
	if (rc != CLI_EXIT_OK)
		return rc;
	airlock_error err = { 0 };
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	int r = airlock_image_import(store, fd, digest, &err);
	airlock_image_store_free(store);
	if (r < 0) {
		cli_error("image import", &err);
		return cli_exit_for(&err);
	}
	printf("%s\n", digest);
	return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_SOFTWARE;
}

int cli_image(int argc, char **argv)
{
	if (argc < 2) {
		image_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	if (cli_is_help(argv[1])) {
		image_usage(stdout);
		return CLI_EXIT_OK;
	}
	static const struct {
		const char *name;
		int (*fn)(int argc, char **argv);
	} subs[] = { { "build", image_build }, { "ls", image_ls }, { "import", image_import } };
	for (size_t i = 0; i < ARRAY_SIZE(subs); i++)
		if (strcmp(argv[1], subs[i].name) == 0)
			return subs[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "airlock image: unknown subcommand '%s'\n\n", argv[1]);
	image_usage(stderr);
	return CLI_EXIT_USAGE;
}
