/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The main of every Criterion suite (linked into each one by
 * tests/meson.build). Criterion's own main counts a skipped test as nothing
 * at all: a suite whose every test skipped exits 0 and meson shows it as OK,
 * with "Tested: 0" only in the log. This one
 *   - prints one line per skipped test, "SKIP suite::test: reason", which
 *     scripts/test.sh collects into its summary, and
 *   - exits 77, meson's SKIP, when tests were selected and every one of
 *     them skipped.
 * Tests that --filter deselected are not skips (Criterion marks them
 * disabled) and are not reported.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdio.h>

/* The exit status meson reads as "skipped". */
#define MESON_SKIP 77

static size_t suite_ran, suite_skipped;

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	for (struct criterion_suite_stats *s = stats->suites; s; s = s->next) {
		for (struct criterion_test_stats *t = s->tests; t; t = t->next) {
			if (t->test_status != CR_STATUS_SKIPPED) {
				suite_ran++;
				continue;
			}
			if (t->test->data && t->test->data->disabled)
				continue;
			suite_skipped++;
			fprintf(stderr, "SKIP %s::%s: %s\n", t->test->category, t->test->name,
			        t->message && *t->message ? t->message : "(no reason given)");
		}
	}
	fflush(stderr);
}

int main(int argc, char *argv[])
{
	struct criterion_test_set *tests = criterion_initialize();
	int status = 0;
	int r = criterion_handle_args(argc, argv, true);
	if (r > 0)
		status = criterion_run_all_tests(tests) ? 0 : 1;
	else
		status = r < 0 ? 1 : 0; /* --help, --list and the like end here */
	criterion_finalize(tests);
	if (status == 0 && suite_ran == 0 && suite_skipped > 0) {
		fprintf(stderr, "every selected test skipped (%zu): reported as SKIP, not as a pass\n",
		        suite_skipped);
		return MESON_SKIP;
	}
	return status;
}
