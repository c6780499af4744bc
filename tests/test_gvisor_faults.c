/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every step of the gvisor mechanism's provision, and every phase of its
 * execute, failed in turn, as test_native_faults does for native: for N =
 * 1, 2, ... the Nth fault-injection check fails; the call must fail with an
 * error naming the step, and nothing may be left: no bundle, no runsc
 * state, no mount of a sandbox, no runtime process, no cgroup, no
 * descriptor, no child. After a failed execute phase the same sandbox runs
 * the next command. Built only with -Dfault_injection=true.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "airlock/gvisor.h"
#include "airlock/image.h"
#include "airlock/port/exec.h"
#include "fault_testlib.h"
#include "airlock/tiers.h"
#include "sandbox_testlib.h"

/* Each test's state directory has a fixed name, not one per process: a
 * run that fails mid-test leaves its image mounts there, and the next
 * run's adapter sweeps them at start (gv_sweep: no live service holds
 * them), where a per-process name would leave them for good. */
#define STATE_DIR "/run/airlock/gvisor-test-faults"
#include "util/fault.h"

static const char *store_path(void)
{
	return sandbox_test_store();
}

static long count_dir(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	long n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && (!prefix || strncmp(de->d_name, prefix, strlen(prefix)) == 0))
			n++;
	closedir(d);
	return n;
}

/* The sandbox groups (airlock-*) under this process's memory cgroup. */
static long count_cgroups(void)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	cr_assert_not_null(f);
	char line[4096], dir[4400] = "";
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = 0;
		if (strstr(c1 + 1, "memory"))
			snprintf(dir, sizeof(dir), "/sys/fs/cgroup/memory%s", c2 + 1);
		else if (!dir[0] && c1[1] == 0 && line[0] == '0')
			snprintf(dir, sizeof(dir), "/sys/fs/cgroup%s", c2 + 1);
	}
	fclose(f);
	return count_dir(dir, "airlock-");
}

typedef struct counts {
	long mounts, cgroups, fds, bpf, children, bundles, states;
} counts;

static counts measure(const char *state)
{
	char p[4096], kids[64];
	counts c = { 0 };
	/* Mounts are the host's (other suites' come and go): this service's
	 * are those under its state directory. */
	c.mounts = leak_count_lines_matching("/proc/self/mountinfo", state);
	c.cgroups = count_cgroups();
	c.fds = count_dir("/proc/self/fd", NULL);
	c.bpf = leak_count_bpf();
	snprintf(kids, sizeof(kids), "/proc/%d/task/%d/children", (int)getpid(), (int)getpid());
	FILE *f = fopen(kids, "re");
	int ch, prev = ' ';
	while (f && (ch = fgetc(f)) != EOF) {
		if (ch != ' ' && prev == ' ')
			c.children++;
		prev = ch;
	}
	if (f)
		fclose(f);
	snprintf(p, sizeof(p), "%s/sandboxes", state);
	c.bundles = count_dir(p, NULL);
	snprintf(p, sizeof(p), "%s/runsc", state);
	c.states = count_dir(p, NULL);
	return c;
}

static bool same(const counts *a, const counts *b)
{
	return a->mounts == b->mounts && a->cgroups == b->cgroups && a->fds == b->fds &&
	       b->bpf <= a->bpf && a->children == b->children && a->bundles == b->bundles &&
	       a->states == b->states;
}

/* A killed runtime takes a moment to be reaped: a few seconds to settle. */
static void assert_same(const counts *before, const char *state, const char *point)
{
	counts now = measure(state);
	for (int i = 0; i < 50 && !same(before, &now); i++) {
		usleep(100 * 1000);
		now = measure(state);
	}
	cr_assert_eq(now.mounts, before->mounts, "%s: mounts %ld -> %ld", point, before->mounts,
	             now.mounts);
	cr_assert_eq(now.cgroups, before->cgroups, "%s: cgroups %ld -> %ld", point, before->cgroups,
	             now.cgroups);
	cr_assert_eq(now.fds, before->fds, "%s: descriptors %ld -> %ld", point, before->fds, now.fds);
	/* Host-wide, freed by the kernel a moment after a group goes: an
	 * earlier sandbox's may still be counted in the baseline. */
	cr_assert_leq(now.bpf, before->bpf, "%s: socket budget BPF objects %ld -> %ld", point,
	              before->bpf, now.bpf);
	cr_assert_eq(now.children, before->children, "%s: children %ld -> %ld", point,
	             before->children, now.children);
	cr_assert_eq(now.bundles, before->bundles, "%s: bundles %ld -> %ld", point, before->bundles,
	             now.bundles);
	cr_assert_eq(now.states, before->states, "%s: runsc state %ld -> %ld", point, before->states,
	             now.states);
}

/* The services' service.bridge_address: no listener is needed there, a
 * provision connects to it only when the sandbox does. */
#define FAULTS_BRIDGE_ADDRESS "unix:/run/airlock-test-faults-bridge.sock"

/* A gvisor service on state; its adapter in *ret_g when ret_g is not NULL. */
static airlock_exec *open_service_g(const char *state, char digest[AIRLOCK_IMAGE_DIGEST_SIZE],
                                    airlock_gvisor **ret_g)
{
	gvisor_test_require(digest);
	airlock_error err = { 0 };
	util_fault_arm(0);
	airlock_gvisor_config gc = { .image_store = store_path(), .state_dir = state,
		                     .start_budget_seconds = 30,
		                     .bridge_address = FAULTS_BRIDGE_ADDRESS };
	airlock_gvisor *g = NULL;
	cr_assert_eq(airlock_gvisor_new(&gc, &g, &err), 0, "%s", err.message);
	airlock_exec *e = NULL;
	cr_assert_eq(airlock_exec_new(airlock_gvisor_ops(), g, NULL, &e, &err), 0, "%s", err.message);
	if (ret_g)
		*ret_g = g;
	return e;
}

static airlock_exec *open_service(const char *state, char digest[AIRLOCK_IMAGE_DIGEST_SIZE])
{
	return open_service_g(state, digest, NULL);
}

static void remove_state(const char *state)
{
	const char *subs[] = { "sandboxes", "runsc", "images" };
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		char p[4096];
		snprintf(p, sizeof(p), "%s/%s", state, subs[i]);
		if (rmdir(p) < 0)
			unlink(p);
	}
	rmdir(state);
}

static void spec_for(airlock_environment_spec *s, const char *digest)
{
	test_spec(s, "tenant-faults", "run-1");
	free(s->image_digest);
	s->image_digest = strdup(digest);
	s->limits.workspace_bytes = 16ll << 20;
	s->limits.inodes_max = 1000;
}

/* Fail each check of provision in turn; with a bridge (exec/bridge.h) its
 * step makes the socket's tree and starts the relay, which every later
 * failure must undo. */
static void provision_walk(bool bridge, unsigned min_checks)
{
	char state[128], digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	snprintf(state, sizeof(state), "%s", STATE_DIR);
	airlock_exec *e = open_service(state, digest);
	airlock_environment_spec spec;
	spec_for(&spec, digest);
	if (bridge) {
		spec.bridge = calloc(1, sizeof(*spec.bridge));
		cr_assert_not_null(spec.bridge);
		spec.bridge->socket_path = strdup(AIRLOCK_BRIDGE_SOCKET_PATH);
		spec.bridge->token = strdup("tok-faults");
	}
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	/* The image's mount is kept for the service's life. */
	fault_test_warm_up(e, &spec);
	counts before = measure(state);
	char step[AIRLOCK_ERROR_MESSAGE_MAX] = "";
	unsigned nth;
	for (nth = 1;; nth++) {
		util_fault_arm(nth);
		memset(&err, 0, sizeof(err));
		int r = airlock_exec_provision(e, &spec, &h, &err);
		unsigned hits = util_fault_hits();
		const char *fired = util_fault_fired();
		util_fault_arm(0);
		if (hits < nth) {
			cr_assert_eq(r, 0, "no fault at check %u, yet: %s", nth, err.message);
			cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
			airlock_environment_handle_clear(&h);
			break;
		}
		cr_assert_lt(r, 0, "check %u failed, yet provision succeeded", nth);
		cr_assert_not_null(fired);
		cr_assert(strstr(err.message, fired), "check %u: the error names the step %s: %s", nth,
		          fired, err.message);
		cr_assert(strstr(err.message, state) == NULL, "a host path in: %s", err.message);
		sandbox_test_expect_said_once("gvisor", fired, err.message, step, sizeof(step));
		airlock_environment_handle_clear(&h);
		assert_same(&before, state, fired);
	}
	cr_assert_geq(nth, min_checks + 1, "only %u checks were seen", nth - 1);
	assert_same(&before, state, "after the walk");
	airlock_environment_spec_clear(&spec);
	airlock_exec_free(e);
	remove_state(state);
}

Test(gvisor_faults, each_provision_step_fails_cleanly_and_leaks_nothing, .timeout = 300)
{
	provision_walk(false, 12);
}

Test(gvisor_faults, each_provision_step_of_a_bridged_sandbox_fails_cleanly, .timeout = 300)
{
	provision_walk(true, 13);
}

/* Each check of a destroy failed in turn (the kill, the wait for the
 * runtime, the cgroup facility's kill and rmdir in each hierarchy, the
 * bundle's unmount): the destroy fails naming the point, the sandbox stays
 * on the adapter with what the step was to remove, and a second destroy
 * leaves nothing. Last, a failed teardown is left to the service's free. */
Test(gvisor_faults, each_teardown_step_fails_and_a_retry_leaves_nothing, .timeout = 300)
{
	char state[128], digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	snprintf(state, sizeof(state), "%s", STATE_DIR "-t");
	counts bare = measure(state); /* before the service: its free leaves this */
	airlock_gvisor *g = NULL;
	airlock_exec *e = open_service_g(state, digest, &g);
	airlock_environment_spec spec;
	spec_for(&spec, digest);
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	fault_test_warm_up(e, &spec);
	counts before = measure(state);
	unsigned nth;
	bool freed_kept = false;
	for (nth = 1;; nth++) {
		cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "%s", err.message);
		unsigned hits;
		const char *fired;
		int r = sandbox_test_destroy_failing(e, &h, nth, &err, &hits, &fired);
		if (hits < nth) {
			cr_assert_eq(r, 0, "no fault at check %u, yet: %s", nth, err.message);
			airlock_environment_handle_clear(&h);
			break;
		}
		cr_assert_lt(r, 0, "check %u failed, yet destroy succeeded", nth);
		cr_assert(strstr(err.message, fired), "check %u: the error names the step %s: %s", nth,
		          fired, err.message);
		cr_assert(strstr(err.message, state) == NULL, "a host path in: %s", err.message);
		if (strcmp(fired, "destroy.kill") != 0)
			cr_assert_eq(airlock_gvisor_live_count(g), 1, "%s: the sandbox is gone", fired);
		if (strcmp(fired, "teardown.unmount") == 0) {
			/* The service's free is the other retry: it ends with
			 * this sandbox kept (its bundle mounted), on a fresh
			 * service, so the walk goes on. */
			airlock_environment_handle_clear(&h);
			airlock_exec_free(e);
			assert_same(&bare, state, "the service's free");
			e = open_service_g(state, digest, &g);
			freed_kept = true;
			continue;
		}
		memset(&err, 0, sizeof(err));
		cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s: the retry: %s", fired,
		             err.message);
		cr_assert_eq(airlock_gvisor_live_count(g), 0, "%s: the retry left the sandbox", fired);
		airlock_environment_handle_clear(&h);
		assert_same(&before, state, fired);
	}
	cr_assert_geq(nth, 4 + 1, "only %u checks were seen", nth - 1);
	cr_log_info("teardown: %u checks", nth - 1);
	cr_assert(freed_kept, "no teardown.unmount check");
	airlock_environment_spec_clear(&spec);
	airlock_exec_free(e);
	remove_state(state);
}

Test(gvisor_faults, each_execute_phase_fails_cleanly_and_the_sandbox_runs_on, .timeout = 300)
{
	char state[128], digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	snprintf(state, sizeof(state), "%s", STATE_DIR "-x");
	airlock_exec *e = open_service(state, digest);
	airlock_environment_spec spec;
	spec_for(&spec, digest);
	airlock_environment_handle h = { 0 };
	airlock_error err = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "%s", err.message);
	char *argv[] = { "/bin/sh", "-c", "echo hi > f; cat", NULL };
	airlock_exec_call call = { .tenant_id = h.tenant_id, .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	counts before = measure(state);
	unsigned nth;
	for (nth = 1;; nth++) {
		airlock_execution_command cmd = test_command(argv);
		cmd.has_stdin = true;
		cmd.stdin_data = (unsigned char *)"in";
		cmd.stdin_len = 2;
		airlock_execution_result res;
		memset(&res, 0, sizeof(res));
		memset(&err, 0, sizeof(err));
		util_fault_arm(nth);
		int r = airlock_exec_execute(e, &call, &h, &cmd, &res, &err);
		unsigned hits = util_fault_hits();
		const char *fired = util_fault_fired();
		util_fault_arm(0);
		airlock_execution_result_clear(&res);
		if (hits < nth) {
			cr_assert_eq(r, 0, "no fault at check %u, yet: %s", nth, err.message);
			break;
		}
		cr_assert_lt(r, 0, "check %u failed, yet execute succeeded", nth);
		cr_assert(strstr(err.message, fired), "check %u: the error names the phase %s: %s", nth,
		          fired, err.message);
		assert_same(&before, state, fired);
		char *ok[] = { "/bin/true", NULL };
		airlock_execution_command okc = test_command(ok);
		memset(&res, 0, sizeof(res));
		cr_assert_eq(airlock_exec_execute(e, &call, &h, &okc, &res, &err), 0, "after %s: %s",
		             fired, err.message);
		cr_assert_eq(res.exit_code, 0, "after %s", fired);
		airlock_execution_result_clear(&res);
	}
	cr_assert_geq(nth, 7 + 1, "only %u checks were seen", nth - 1);
	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	airlock_environment_handle_clear(&h);
	airlock_environment_spec_clear(&spec);
	airlock_exec_free(e);
	remove_state(state);
}

/* A full host file table: ExecutionUnavailable naming
 * fs.file-max, not "runsc run exited with status 128". The fault point
 * stands for the table: filling the real one would starve every tenant. */
Test(gvisor_faults, a_full_host_file_table_is_named, .timeout = 120)
{
	char state[128], digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	snprintf(state, sizeof(state), "%s", STATE_DIR);
	airlock_exec *e = open_service(state, digest);
	airlock_environment_spec spec;
	spec_for(&spec, digest);
	util_fault_arm(1);
	sandbox_test_expect_file_table_refusal(e, &spec, "(fault injected at provision.host_files)");
	const char *fired = util_fault_fired();
	util_fault_arm(0);
	cr_expect(fired && strcmp(fired, "provision.host_files") == 0, "fired %s",
	          fired ? fired : "nothing");
	airlock_environment_spec_clear(&spec);
	airlock_exec_free(e);
	remove_state(state);
}
