/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the containment function: raw bytes go to
 * airlock_workspace_check_string and airlock_workspace_resolve (a local
 * workspace over a directory planted with symlinks once per process, and the
 * memory workspace). The property is gate.sandbox.workspace_containment's,
 * judged by the same independent oracle (tests/workspace_oracle.h): 0 with
 * "/workspace/" + input and a path the oracle finds beneath the root, or
 * exactly WorkspaceEscape. Any other outcome aborts.
 *
 * Corpus seeds in fuzz/corpus/fuzz_resolve/ name the planted links, so the
 * fuzzer starts from the interesting shapes.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airlock/port/workspace.h"
#include "../tests/workspace_oracle.h"

#define ESCAPE airlock_errcode(AIRLOCK_ERR_WORKSPACE_ESCAPE)
/* Rule 4 rejects anything over 4085 bytes by length alone; longer inputs are
 * still fed to the string check, but the oracle's buffers stop here. */
#define FUZZ_ORACLE_MAX 8192

static oracle_tree fuzz_tree;
static airlock_workspace *fuzz_local;
static airlock_workspace *fuzz_memory;

static void fuzz_cleanup(void)
{
	airlock_workspace_free(fuzz_local);
	airlock_workspace_free(fuzz_memory);
	fuzz_local = fuzz_memory = NULL;
	oracle_tree_destroy(&fuzz_tree);
}

static void fuzz_setup(void)
{
	if (fuzz_local)
		return;
	if (oracle_tree_create(&fuzz_tree, "fuzz-resolve") < 0) {
		perror("fuzz_resolve: planting the tree");
		abort();
	}
	int fd = open(fuzz_tree.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	airlock_error e = { 0 };
	if (fd < 0 || airlock_workspace_local_new(fd, AIRLOCK_PROVENANCE_UNKNOWN, &fuzz_local, &e) < 0 ||
	    airlock_workspace_memory_new(&fuzz_memory, &e) < 0) {
		fprintf(stderr, "fuzz_resolve: workspace: %s\n", e.message);
		oracle_tree_destroy(&fuzz_tree);
		abort();
	}
	atexit(fuzz_cleanup);
}

static void fuzz_violation(const char *adapter, const uint8_t *in, size_t len, const char *what,
                           const airlock_error *e)
{
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	fprintf(stderr, "fuzz_resolve: containment property violated [%s] input=%s: %s (%s)\n",
	        adapter, airlock_workspace_quote(in, len, q), what, e ? e->message : "");
	abort();
}

static void fuzz_check_result(const char *adapter, const uint8_t *in, size_t len, int r,
                              const char *out, const airlock_error *e)
{
	if (r != 0 && r != ESCAPE)
		fuzz_violation(adapter, in, len, "neither 0 nor WorkspaceEscape", e);
	if (r == ESCAPE) {
		if (out || e->cls != AIRLOCK_ERR_WORKSPACE_ESCAPE)
			fuzz_violation(adapter, in, len, "inconsistent rejection", e);
		return;
	}
	if (!out || strncmp(out, "/workspace/", 11) != 0 || strlen(out) != 11 + len ||
	    memcmp(out + 11, in, len) != 0 || strlen(out) > 4096)
		fuzz_violation(adapter, in, len, "result is not /workspace/ + input", e);
	if (!oracle_string_ok(in, len))
		fuzz_violation(adapter, in, len, "accepted a string-rule violation", e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char nul_free[FUZZ_ORACLE_MAX + 1];
	fuzz_setup();

	const char *in = (const char *)data;
	bool sok = oracle_string_ok(data, size);

	/* The string rules alone. */
	char *rel = NULL;
	airlock_error e = { 0 };
	int r = airlock_workspace_check_string(in, size, &rel, &e);
	if (r != 0 && r != ESCAPE)
		fuzz_violation("check_string", data, size, "neither 0 nor WorkspaceEscape", &e);
	if ((r == 0) != sok)
		fuzz_violation("check_string", data, size,
		               r == 0 ? "accepted a bad path" : "rejected a good path", &e);
	if (r == 0 && (strlen(rel) != size || memcmp(rel, data, size) != 0))
		fuzz_violation("check_string", data, size, "copy differs from input", &e);
	free(rel);

	/* The local directory: rule 3 on a real tree. */
	char *out = NULL;
	e = (airlock_error){ 0 };
	r = airlock_workspace_resolve(fuzz_local, in, size, &out, &e);
	fuzz_check_result("local", data, size, r, out, &e);
	free(out);
	if (sok && size <= FUZZ_ORACLE_MAX) {
		char why[128];
		memcpy(nul_free, data, size);
		nul_free[size] = 0;
		oracle_verdict v = oracle_walk(fuzz_tree.root_real, nul_free, why, sizeof(why));
		if (v == ORACLE_ERROR)
			fuzz_violation("oracle", data, size, why, &e);
		if (r == 0 && v != ORACLE_INSIDE)
			fuzz_violation("local", data, size, "accepted a path resolving outside", &e);
		if (r == 0 && !oracle_realpath_inside(fuzz_tree.root_real, nul_free))
			fuzz_violation("local", data, size, "accepted; realpath prefix outside", &e);
		if (r != 0 && v == ORACLE_INSIDE)
			fuzz_violation("local", data, size, "rejected a path beneath the root", &e);
	}

	/* The memory workspace: the string rules decide alone. */
	out = NULL;
	e = (airlock_error){ 0 };
	r = airlock_workspace_resolve(fuzz_memory, in, size, &out, &e);
	fuzz_check_result("memory", data, size, r, out, &e);
	free(out);
	if ((r == 0) != sok)
		fuzz_violation("memory", data, size, "disagrees with the string rules", &e);
	return 0;
}
