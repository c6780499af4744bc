/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gate.sandbox.workspace_containment, property (the specification, "The
 * workspace boundary holds against generated input"):
 *
 *   A property test over WorkspaceHandle.resolve with generated paths —
 *   separators, dot segments, encodings, NUL bytes, absolute forms, symlink
 *   chains, over-long components — asserts the result is under root or
 *   WorkspaceEscape is raised, and never anything else.
 *
 * Each run generates at least GATE_CASES paths from the grammar in
 * workspace_oracle.h against a local workspace over a directory planted with
 * symlinks (inside->inside, absolute and relative escapes, a chain of three
 * ending outside, loops, /proc magic links, an absolute link back inside),
 * and a share of them against the memory workspace. For every case:
 *
 *   - resolve returned 0, the result is exactly "/workspace/" + input, and
 *     the oracle (the specification's string rules restated, a user-space
 *     symlink walk, and realpath(3) of the longest existing prefix — none of
 *     it sharing code with the function under test) says the path stays
 *     beneath the root; or
 *   - resolve returned exactly the WorkspaceEscape code.
 *
 * Anything else fails with the seed, the case number and the input. The
 * seed is AIRLOCK_TEST_SEED when set, else derived from the clock; it is
 * printed as "seed=N" so a failure replays exactly.
 *
 * Beyond the gate, the same oracle also checks the converse (a path the
 * oracle finds harmless is accepted), so a resolve that rejected everything
 * could not pass; and the run asserts that both outcomes occurred often.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "airlock/port/workspace.h"
#include "workspace_oracle.h"

#define GATE_CASES 100000
#define GATE_MEMORY_SHARE 4 /* every 4th case also runs against memory */
#define GATE_INPUT_MAX 8192

#define ESCAPE airlock_errcode(AIRLOCK_ERR_WORKSPACE_ESCAPE)

static oracle_tree g_tree;
static airlock_workspace *g_local;
static airlock_workspace *g_memory;

static void gate_init(void)
{
	cr_assert_eq(oracle_tree_create(&g_tree, "gate"), 0, "planting the tree: %s",
	             strerror(errno));
	int fd = open(g_tree.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert(fd >= 0);
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_local_new(fd, AIRLOCK_PROVENANCE_UNKNOWN, &g_local, &e), 0,
	             "%s", e.message);
	cr_assert_eq(airlock_workspace_memory_new(&g_memory, &e), 0, "%s", e.message);
}

static void gate_fini(void)
{
	airlock_workspace_free(g_local);
	airlock_workspace_free(g_memory);
	g_local = g_memory = NULL;
	oracle_tree_destroy(&g_tree);
}

static uint64_t gate_seed(void)
{
	const char *env = getenv("AIRLOCK_TEST_SEED");
	if (env && *env) {
		char *end = NULL;
		errno = 0;
		unsigned long long v = strtoull(env, &end, 10);
		if (errno == 0 && end && *end == 0)
			return v;
		cr_log_warn("AIRLOCK_TEST_SEED=%s is not a number; using the clock", env);
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^
	       ((uint64_t)getpid() << 32);
}

static size_t gate_cases(void)
{
	const char *env = getenv("AIRLOCK_GATE_CASES");
	if (env && *env) {
		unsigned long long v = strtoull(env, NULL, 10);
		if (v > GATE_CASES)
			return (size_t)v;
	}
	return GATE_CASES;
}

typedef struct gate_stats {
	size_t cases;
	size_t accepted;
	size_t rejected_string;
	size_t rejected_fs;
	size_t memory_cases;
} gate_stats;

/* NULL when the case holds, else a description of what broke. */
static const char *gate_check_result(const unsigned char *in, size_t len, int r, const char *out,
                                     const airlock_error *e)
{
	if (r != 0 && r != ESCAPE)
		return "returned neither 0 nor WorkspaceEscape";
	if (r == ESCAPE) {
		if (e->cls != AIRLOCK_ERR_WORKSPACE_ESCAPE)
			return "WorkspaceEscape code with another error class";
		if (out)
			return "output set on rejection";
		if (!e->message[0])
			return "rejection without a message";
		return NULL;
	}
	if (!out)
		return "success without a result";
	if (strncmp(out, "/workspace/", 11) != 0)
		return "result does not start with /workspace/";
	if (strlen(out) != 11 + len || memcmp(out + 11, in, len) != 0)
		return "result is not /workspace/ + input (normalized, truncated or NUL inside)";
	if (strlen(out) > 4096)
		return "result longer than 4096 bytes";
	if (!oracle_string_ok(in, len))
		return "accepted a path that breaks a string rule";
	return NULL;
}

static void gate_fail(uint64_t seed, size_t i, const char *adapter, const unsigned char *in,
                      size_t len, const char *what, const airlock_error *e)
{
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	cr_assert_fail("seed=%" PRIu64 " case=%zu adapter=%s input=%s: %s (error: %s)", seed, i, adapter,
	         airlock_workspace_quote(in, len, q), what, e->message);
}

Test(gate_sandbox_workspace_containment, resolve_property, .init = gate_init, .fini = gate_fini,
     .timeout = 600)
{
	uint64_t seed = gate_seed();
	size_t n = gate_cases();
	fprintf(stderr,
	        "gate.sandbox.workspace_containment: seed=%" PRIu64 " cases=%zu "
	        "(replay: AIRLOCK_TEST_SEED=%" PRIu64 ")\n",
	        seed, n, seed);
	oracle_rng rng = { .s = seed };
	static unsigned char in[GATE_INPUT_MAX];
	static char nul_free[GATE_INPUT_MAX + 1];
	gate_stats st = { 0 };
	char why[128];

	for (size_t i = 0; i < n; i++) {
		size_t len = oracle_generate(&rng, &g_tree, in, sizeof(in));
		st.cases++;

		/* The local directory, where rule 3 is real. */
		char *out = NULL;
		airlock_error e = { 0 };
		int r = airlock_workspace_resolve(g_local, (const char *)in, len, &out, &e);
		const char *bad = gate_check_result(in, len, r, out, &e);
		if (bad) {
			free(out);
			gate_fail(seed, i, "local", in, len, bad, &e);
		}
		bool sok = oracle_string_ok(in, len);
		oracle_verdict v = ORACLE_ESCAPES;
		if (sok) {
			memcpy(nul_free, in, len);
			nul_free[len] = 0;
			v = oracle_walk(g_tree.root_real, nul_free, why, sizeof(why));
			if (v == ORACLE_ERROR) {
				free(out);
				gate_fail(seed, i, "local", in, len, why, &e);
			}
		}
		if (r == 0) {
			free(out);
			if (v != ORACLE_INSIDE)
				gate_fail(seed, i, "local", in, len,
				          v == ORACLE_LOOP ? "accepted a symlink loop"
				                           : "accepted a path that resolves outside the root",
				          &e);
			if (!oracle_realpath_inside(g_tree.root_real, nul_free))
				gate_fail(seed, i, "local", in, len,
				          "accepted a path whose existing prefix is outside (realpath)", &e);
			st.accepted++;
		} else {
			/* The converse, so an over-eager resolve cannot pass. */
			if (sok && v == ORACLE_INSIDE)
				gate_fail(seed, i, "local", in, len,
				          "rejected a path the oracle finds beneath the root", &e);
			if (sok)
				st.rejected_fs++;
			else
				st.rejected_string++;
		}

		/* The memory workspace: no symlinks, so the string rules decide. */
		if (i % GATE_MEMORY_SHARE == 0) {
			st.memory_cases++;
			char *mout = NULL;
			airlock_error me = { 0 };
			int mr = airlock_workspace_resolve(g_memory, (const char *)in, len, &mout, &me);
			const char *mbad = gate_check_result(in, len, mr, mout, &me);
			free(mout);
			if (mbad)
				gate_fail(seed, i, "memory", in, len, mbad, &me);
			if ((mr == 0) != sok)
				gate_fail(seed, i, "memory", in, len,
				          mr == 0 ? "accepted a bad path" : "rejected a good path", &me);
		}
	}

	fprintf(stderr,
	        "gate.sandbox.workspace_containment: %zu cases: %zu accepted, %zu rejected by the "
	        "string rules, %zu rejected by rule 3; %zu also against memory\n",
	        st.cases, st.accepted, st.rejected_string, st.rejected_fs, st.memory_cases);
	cr_assert_geq(st.cases, GATE_CASES);
	/* The grammar must exercise every outcome, or the gate proves little. */
	cr_assert_geq(st.accepted, st.cases / 20, "too few accepted cases: %zu", st.accepted);
	cr_assert_geq(st.rejected_string, st.cases / 20, "too few string rejections");
	cr_assert_geq(st.rejected_fs, st.cases / 100, "too few symlink rejections: %zu",
	              st.rejected_fs);
}

/* The named members of the grammar, checked on every run regardless of the
 * seed: each must come out the way the specification says. */
Test(gate_sandbox_workspace_containment, planted_links, .init = gate_init, .fini = gate_fini)
{
	static const struct {
		const char *path;
		bool accept;
	} cases[] = {
		{ "a/b/c", true },
		{ "in_rel", true },
		{ "in_rel/file2", true },
		{ "in_file", true },
		{ "a/up", true },
		{ "a/up/new", true },
		{ "a/back_in/file2", true },
		{ "inchain1", true },
		{ "inchain1/new", true },
		{ "a/b/c/top/a/b/c/top/top.txt", true },
		{ "dangling_in", true },
		{ "dangling_in/x", true },
		{ "dot_link/a", true },
		{ "top.txt/x", true },
		{ "fifo", true },
		{ "%2e%2e", true },
		{ "\xc0\xae", true },
		{ "back\\slash", true },
		{ "out_abs", false },
		{ "out_abs/secret", false },
		{ "out_rel", false },
		{ "out_rel/secret", false },
		{ "a/b/out_deep", false },
		{ "a/b/out_deep/x", false },
		{ "chain1", false },
		{ "chain1/secret", false },
		{ "loop1", false },
		{ "loop1/x", false },
		{ "self", false },
		{ "proc_root", false },
		{ "proc_root/etc/passwd", false },
		{ "proc_cwd", false },
		{ "proc_rel", false },
		{ "abs_inside", false },
		{ "abs_inside/b", false },
		{ "dangling_out", false },
		{ "dotdot_link", false },
		{ "dotdot_link/x", false },
		{ "a/../out_abs", false },
		{ "/etc/passwd", false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *p = cases[i].path;
		char *out = NULL;
		airlock_error e = { 0 };
		int r = airlock_workspace_resolve(g_local, p, strlen(p), &out, &e);
		char why[128];
		oracle_verdict v = oracle_string_ok((const unsigned char *)p, strlen(p))
		                           ? oracle_walk(g_tree.root_real, p, why, sizeof(why))
		                           : ORACLE_ESCAPES;
		if (cases[i].accept) {
			cr_expect_eq(r, 0, "%s should resolve: %s", p, e.message);
			cr_expect_eq(v, ORACLE_INSIDE, "oracle disagrees on %s", p);
		} else {
			cr_expect_eq(r, ESCAPE, "%s should be WorkspaceEscape, got %d", p, r);
			cr_expect_neq(v, ORACLE_INSIDE, "oracle disagrees on %s", p);
		}
		free(out);
	}
}
