/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every step of provision failed in turn (SQLite's test_vfs.c, curl's
 * torture mode): for N = 1, 2, ... the
 * Nth fault-injection check fails, provision must fail with an error that
 * names the step, and the leak counters (sandbox_testlib.h) must stay where
 * they were: mounts, cgroups, loop devices, descriptors, processes, host-id
 * slots. The run that sees fewer than N checks provisioned: it is destroyed
 * and the walk ends. The same walk with the egress proxy reaches the egress
 * steps, and one over execute's phases in one sandbox checks that the
 * sandbox still runs the next command; a failure inside init or a
 * command's launcher is named by its step and errno. Built only with
 * -Dfault_injection=true.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "airlock/proxy.h"
#include "exec/native/service.h"
#include "host/filetable.h"
#include "fault_testlib.h"
#include "airlock/tiers.h"
#include "sandbox_testlib.h"
#include "util/fault.h"
#include "util/spawn.h"
#include "util/util.h"

/* The services' service.bridge_address: no listener is needed there, a
 * provision connects to it only when the sandbox does. */
#define FAULTS_BRIDGE_ADDRESS "unix:/run/airlock-test-faults-bridge.sock"

/* A lock file of this test's own, so the slot count is this service's. */
#define FAULTS_ID_LOCK "/run/airlock-test-faults-ids.lock"

/* Cgroups, loop devices and sandbox processes are counted host-wide, where
 * other services' sandboxes come and go meanwhile: what this one leaks is
 * a count above the baseline. The rest is this process's own and must be
 * equal (a sandbox process of ours is our child: init, or a command). */
static bool flat(const leak_counts *a, const leak_counts *b, long slots_a, long slots_b)
{
	return a->mounts == b->mounts && b->cgroups <= a->cgroups && b->loops <= a->loops &&
	       a->fds == b->fds && b->bpf <= a->bpf && b->p.sandbox_tasks <= a->p.sandbox_tasks &&
	       a->p.children == b->p.children && slots_a == slots_b;
}

/* lock: the service's host-id lock file, whose slots are counted; NULL:
 * none counted (slots_before is then -1). */
static void assert_flat(const leak_counts *before, const char *lock, long slots_before,
                        const char *point)
{
	/* A loop device detaches when the last reference to its mount goes,
	 * which the kernel finishes a moment after the sandbox's last process
	 * is reaped: a count is given a few seconds to settle. */
	leak_counts after = leak_measure();
	long slots = lock ? leak_count_id_slots(lock) : -1;
	for (int i = 0; i < 50 && !flat(before, &after, slots_before, slots); i++) {
		usleep(100 * 1000);
		after = leak_measure();
		slots = lock ? leak_count_id_slots(lock) : -1;
	}
	cr_assert_eq(after.mounts, before->mounts, "%s: mounts %ld -> %ld", point, before->mounts,
	             after.mounts);
	cr_assert_leq(after.cgroups, before->cgroups, "%s: cgroups %ld -> %ld", point,
	              before->cgroups, after.cgroups);
	cr_assert_leq(after.loops, before->loops, "%s: loop devices %ld -> %ld", point,
	              before->loops, after.loops);
	cr_assert_eq(after.fds, before->fds, "%s: descriptors %ld -> %ld", point, before->fds,
	             after.fds);
	cr_assert_leq(after.bpf, before->bpf, "%s: socket budget BPF objects %ld -> %ld", point,
	              before->bpf, after.bpf);
	cr_assert_leq(after.p.sandbox_tasks, before->p.sandbox_tasks,
	              "%s: sandbox processes %ld -> %ld", point, before->p.sandbox_tasks,
	              after.p.sandbox_tasks);
	cr_assert_eq(after.p.children, before->p.children, "%s: children %ld -> %ld", point,
	             before->p.children, after.p.children);
	cr_assert_eq(slots, slots_before, "%s: host-id slots %ld -> %ld", point, slots_before, slots);
}

/* A native service of (policy, proxy) with this test's host-id lock;
 * its adapter in *ret_n when ret_n is not NULL. */
static airlock_exec *open_service_n(const airlock_egress_policy *policy, airlock_proxy *proxy,
                                    airlock_native **ret_n)
{
	airlock_native_config nc = { .image_store = sandbox_test_store(), .start_budget_seconds = 30,
		                     .host_id_lock = FAULTS_ID_LOCK, .egress_policy = policy,
		                     .egress_proxy = proxy, .bridge_address = FAULTS_BRIDGE_ADDRESS };
	airlock_native *n = NULL;
	airlock_error err = { 0 };
	util_fault_arm(0);
	cr_assert_eq(airlock_native_new(&nc, &n, &err), 0, "%s", err.message);
	airlock_exec *e = NULL;
	cr_assert_eq(airlock_exec_new(airlock_native_ops(), n, NULL, &e, &err), 0, "%s", err.message);
	if (ret_n)
		*ret_n = n;
	return e;
}

static airlock_exec *open_service(const airlock_egress_policy *policy, airlock_proxy *proxy)
{
	return open_service_n(policy, proxy, NULL);
}

/* Fail each check of provision in turn with spec on the service of
 * (policy, proxy); at least min_checks must be seen. */
static void provision_walk(const airlock_egress_policy *policy, airlock_proxy *proxy,
                           airlock_environment_spec *spec, unsigned min_checks)
{
	airlock_exec *e = open_service(policy, proxy);
	airlock_error err = { 0 };
	airlock_environment_handle h = { 0 };
	/* The image's shared loop device is kept for the service's life. */
	fault_test_warm_up(e, spec);

	leak_counts before = leak_measure();
	long slots_before = leak_count_id_slots(FAULTS_ID_LOCK);
	char step[AIRLOCK_ERROR_MESSAGE_MAX] = "";
	unsigned nth;
	for (nth = 1;; nth++) {
		util_fault_arm(nth);
		memset(&err, 0, sizeof(err));
		int r = airlock_exec_provision(e, spec, &h, &err);
		unsigned hits = util_fault_hits();
		const char *fired = util_fault_fired();
		util_fault_arm(0);
		if (hits < nth) {
			/* Past the last check: nothing failed, provision succeeded. */
			cr_assert_eq(r, 0, "no fault at check %u, yet: %s", nth, err.message);
			cr_assert_null(fired);
			cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
			airlock_environment_handle_clear(&h);
			break;
		}
		cr_assert_lt(r, 0, "check %u failed, yet provision succeeded", nth);
		cr_assert_not_null(fired, "check %u", nth);
		cr_assert(strstr(err.message, fired), "check %u: the error names the step %s: %s", nth,
		          fired, err.message);
		sandbox_test_expect_said_once("native", fired, err.message, step, sizeof(step));
		airlock_environment_handle_clear(&h);
		assert_flat(&before, FAULTS_ID_LOCK, slots_before, fired);
	}
	cr_assert_geq(nth, min_checks + 1, "only %u checks were seen", nth - 1);
	assert_flat(&before, FAULTS_ID_LOCK, slots_before, "after the walk");
	airlock_exec_free(e);
	unlink(FAULTS_ID_LOCK);
}

/* Fail each check of a destroy in turn (the kill, each step of the
 * teardown, the cgroup facility's kill and rmdir in each hierarchy): the
 * destroy fails naming the point, the sandbox is not gone from the adapter
 * (what the step was to remove is kept), and a second destroy completes
 * it: nothing is left. At least min_checks must be seen. Last, one failed
 * teardown is left to the service's free, which must leave nothing too. */
static void teardown_walk(const airlock_egress_policy *policy, airlock_proxy *proxy,
                          airlock_environment_spec *spec, unsigned min_checks)
{
	/* Before the service: its free is checked against this. */
	leak_counts outer = leak_measure();
	airlock_native *n = NULL;
	airlock_exec *e = open_service_n(policy, proxy, &n);
	airlock_error err = { 0 };
	airlock_environment_handle h = { 0 };
	fault_test_warm_up(e, spec);

	leak_counts before = leak_measure();
	long slots_before = leak_count_id_slots(FAULTS_ID_LOCK);
	unsigned nth;
	for (nth = 1;; nth++) {
		cr_assert_eq(airlock_exec_provision(e, spec, &h, &err), 0, "%s", err.message);
		unsigned hits;
		const char *fired;
		int r = sandbox_test_destroy_failing(e, &h, nth, &err, &hits, &fired);
		if (hits < nth) {
			cr_assert_eq(r, 0, "no fault at check %u, yet: %s", nth, err.message);
			cr_assert_null(fired);
			airlock_environment_handle_clear(&h);
			break;
		}
		cr_assert_lt(r, 0, "check %u failed, yet destroy succeeded", nth);
		cr_assert_not_null(fired, "check %u", nth);
		cr_assert(strstr(err.message, fired), "check %u: the error names the step %s: %s", nth,
		          fired, err.message);
		/* A failed kill is followed by the whole teardown; any other
		 * failed step keeps the sandbox, with what the step was to
		 * remove, on the adapter. */
		if (strcmp(fired, "destroy.kill") != 0)
			cr_assert_eq(airlock_native_live_count(n), 1, "%s: the sandbox is gone", fired);
		memset(&err, 0, sizeof(err));
		cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s: the retry: %s", fired,
		             err.message);
		cr_assert_eq(airlock_native_live_count(n), 0, "%s: the retry left the sandbox", fired);
		airlock_environment_handle_clear(&h);
		assert_flat(&before, FAULTS_ID_LOCK, slots_before, fired);
	}
	cr_assert_geq(nth, min_checks + 1, "only %u checks were seen", nth - 1);
	cr_log_info("teardown: %u checks", nth - 1);

	/* The service's free is the other retry: the cgroup's removal fails
	 * and the service ends with the sandbox kept. */
	cr_assert_eq(airlock_exec_provision(e, spec, &h, &err), 0, "%s", err.message);
	unsigned rm;
	for (rm = 1; rm < nth; rm++) {
		unsigned hits;
		const char *fired;
		int r = sandbox_test_destroy_failing(e, &h, rm, &err, &hits, &fired);
		cr_assert_lt(r, 0, "check %u", rm);
		if (strcmp(fired, "cgroup.rmdir") == 0)
			break;
		cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
		airlock_environment_handle_clear(&h);
		cr_assert_eq(airlock_exec_provision(e, spec, &h, &err), 0, "%s", err.message);
	}
	cr_assert_lt(rm, nth, "no cgroup.rmdir check");
	cr_assert_eq(airlock_native_live_count(n), 1);
	airlock_environment_handle_clear(&h);
	airlock_exec_free(e);
	assert_flat(&outer, NULL, -1, "the service's free");
	unlink(FAULTS_ID_LOCK);
}

/* The walks' sandbox: the image, and a small workspace. */
static void walk_spec(airlock_environment_spec *spec)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	native_test_require(digest);
	sandbox_test_spec(spec, "tenant-faults", digest, NULL);
	spec->limits.workspace_bytes = 16ll << 20;
	spec->limits.inodes_max = 1000;
}

Test(native_faults, each_teardown_step_fails_and_a_retry_leaves_nothing, .timeout = 300)
{
	airlock_environment_spec spec;
	walk_spec(&spec);
	/* destroy.kill, teardown.init, a cgroup.kill and a cgroup.rmdir. */
	teardown_walk(NULL, NULL, &spec, 4);
	airlock_environment_spec_clear(&spec);
}

Test(native_faults, each_provision_step_fails_cleanly_and_leaks_nothing, .timeout = 300)
{
	airlock_environment_spec spec;
	walk_spec(&spec);
	/* Every step a denied-egress sandbox runs: all but the two of egress. */
	provision_walk(NULL, NULL, &spec, 14);
	airlock_environment_spec_clear(&spec);
}

/* With a bridge (exec/bridge.h) its step runs too: the socket's tmpfs
 * and the relay, which every later failure must undo (the descriptors
 * count the listener and the relay's eventfd). */
Test(native_faults, each_provision_step_of_a_bridged_sandbox_fails_cleanly, .timeout = 300)
{
	airlock_environment_spec spec;
	walk_spec(&spec);
	spec.bridge = calloc(1, sizeof(*spec.bridge));
	cr_assert_not_null(spec.bridge);
	spec.bridge->socket_path = strdup(AIRLOCK_BRIDGE_SOCKET_PATH);
	spec.bridge->token = strdup("tok-faults");
	provision_walk(NULL, NULL, &spec, 15);
	airlock_environment_spec_clear(&spec);
}

static const char allow[] = "egress:\n"
                            "  mode: allowlist\n"
                            "  destinations:\n"
                            "    - host: a.example.com\n"
                            "      ports: [443]\n";

static void parse_policy(airlock_egress_policy *p)
{
	airlock_error err = { 0 };
	memset(p, 0, sizeof(*p));
	cr_assert_eq(airlock_egress_policy_parse("test.yaml", allow, strlen(allow), p, &err), 0,
	             "%s", err.message);
}

/* The same with the egress proxy: the policy check and the planted
 * listener fail in turn too. The proxy is this test's child, started
 * before the baseline. */
Test(native_faults, each_provision_step_with_egress_fails_cleanly_and_leaks_nothing,
     .timeout = 300)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	native_test_require(digest);
	airlock_egress_policy op;
	parse_policy(&op);
	int log_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	cr_assert(log_fd >= 0);
	airlock_proxy_config pc;
	airlock_proxy_config_default(&pc);
	pc.log_fd = log_fd;
	airlock_proxy *proxy = NULL;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_proxy_spawn(&pc, &proxy, &err), 0, "%s", err.message);

	airlock_environment_spec spec;
	sandbox_test_spec(&spec, "tenant-faults", digest, NULL);
	spec.limits.workspace_bytes = 16ll << 20;
	spec.limits.inodes_max = 1000;
	airlock_egress_policy_clear(&spec.egress);
	parse_policy(&spec.egress);
	provision_walk(&op, proxy, &spec, 16);
	/* The teardown's proxy step (teardown.proxy) with the others. */
	teardown_walk(&op, proxy, &spec, 5);
	airlock_environment_spec_clear(&spec);
	airlock_proxy_free(proxy);
	close(log_fd);
	airlock_egress_policy_clear(&op);
}

/* Each phase of execute failed in turn in one sandbox: the call fails
 * naming the phase, nothing of the command is left behind, and the sandbox
 * still runs the next command. */
Test(native_faults, each_execute_phase_fails_cleanly_and_leaks_nothing, .timeout = 300)
{
	box b;
	util_fault_arm(0);
	box_open(&b, "tenant-faults", NULL);
	char *argv[] = { "/bin/sh", "-c", "echo hi > f; cat", NULL };
	airlock_execution_result res;
	sandbox_test_run(b.e, &b.h, argv, 30, "in", &res);
	airlock_execution_result_clear(&res);

	leak_counts before = leak_measure();
	unsigned nth;
	for (nth = 1;; nth++) {
		airlock_execution_command cmd = test_command(argv);
		cmd.timeout_seconds = 30;
		cmd.has_stdin = true;
		cmd.stdin_data = (unsigned char *)"in";
		cmd.stdin_len = 2;
		airlock_exec_call call = { .tenant_id = b.h.tenant_id,
			                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
		airlock_error err = { 0 };
		memset(&res, 0, sizeof(res));
		util_fault_arm(nth);
		int r = airlock_exec_execute(b.e, &call, &b.h, &cmd, &res, &err);
		unsigned hits = util_fault_hits();
		const char *fired = util_fault_fired();
		util_fault_arm(0);
		airlock_execution_result_clear(&res);
		if (hits < nth) {
			cr_assert_eq(r, 0, "no fault at check %u, yet: %s", nth, err.message);
			break;
		}
		cr_assert_lt(r, 0, "check %u failed, yet execute succeeded", nth);
		cr_assert_not_null(fired, "check %u", nth);
		cr_assert(strstr(err.message, fired), "check %u: the error names the phase %s: %s", nth,
		          fired, err.message);
		/* Nothing of the command is left, and the sandbox is intact:
		 * init still runs (in the baseline), and the next command works.
		 * (This service has the default lock file: no slot count.) */
		assert_flat(&before, NULL, -1, fired);
		char *ok_argv[] = { "/bin/true", NULL };
		sandbox_test_run(b.e, &b.h, ok_argv, 30, NULL, &res);
		cr_assert_eq(res.exit_code, 0, "after %s: %s", fired, ERR(&res));
		airlock_execution_result_clear(&res);
	}
	cr_assert_geq(nth, 9, "only %u checks were seen", nth - 1);
	box_close(&b);
}

/* A full host file table: the provision is
 * ExecutionUnavailable naming fs.file-max, before any step runs (the fault
 * point stands for the table: filling the real one would starve every
 * tenant on the machine), and a step that met ENFILE is explained the same
 * way. Before, five sandboxes filled the table and every provision failed
 * with a step's words ("Too many open files in system"). */
Test(native_faults, a_full_host_file_table_is_named, .timeout = 120)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	native_test_require(digest);
	airlock_environment_spec spec;
	sandbox_test_spec(&spec, "tenant-faults", digest, NULL);
	airlock_exec *e = open_service(NULL, NULL);
	util_fault_arm(1);
	sandbox_test_expect_file_table_refusal(e, &spec, "(fault injected at provision.host_files)");
	const char *fired = util_fault_fired();
	util_fault_arm(0);
	cr_expect(fired && strcmp(fired, "provision.host_files") == 0, "fired %s",
	          fired ? fired : "nothing");

	airlock_error step = { 0 };
	int r = airlock_error_set(&step, AIRLOCK_ERR_SYSTEM, ENFILE, "clone3");
	r = host_files_explain(r, &step);
	cr_expect_eq(r, airlock_errcode(AIRLOCK_ERR_EXECUTION_UNAVAILABLE), "%s", step.message);
	cr_expect(strstr(step.message, "the host's file table is full (fs.file-max ") &&
	                  strstr(step.message, "): clone3: Too many open files in system"),
	          "%s", step.message);
	cr_expect_eq(step.errnum, ENFILE, "the step's errno stays");
	airlock_error other = { 0 };
	r = airlock_error_set(&other, AIRLOCK_ERR_SYSTEM, EMFILE, "clone3");
	cr_expect_eq(host_files_explain(r, &other), -EMFILE, "%s", other.message);
	cr_expect_null(strstr(other.message, "fs.file-max"), "%s", other.message);

	airlock_exec_free(e);
	airlock_environment_spec_clear(&spec);
	unlink(FAULTS_ID_LOCK);
}

/* A step of init (or of a launcher) that fails is reported on spawn's pipe
 * as (step, errno); when the sync socket ends, the service's error names
 * that step and the system's reason, in the same form as a failure the
 * sealed program reports on the socket once executed. */
static int fails_at_pivot(void *ctx, int report_fd)
{
	(void)ctx; /* spawn closed both ends of the socket in the child: none is kept */
	spawn_child_fail(report_fd, NATIVE_STEP_PIVOT, EACCES);
}

Test(native_faults, a_childs_failing_step_is_named)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	const spawn_options o = { .clone_flags = CLONE_NEWNS | CLONE_NEWPID,
		                  .child_fn = fails_at_pivot,
		                  .async = true };
	_cleanup_spawn_child_ spawn_child c = SPAWN_CHILD_NONE;
	cr_assert_eq(spawn_start(&o, &c, NULL), 0);
	close(sv[1]);
	int64_t deadline = util_monotonic_ms() + 5000;
	native_msg m = { 0 };
	int r = native_recv_msg(sv[0], deadline, &m);
	cr_assert_eq(r, -EPIPE);
	airlock_error err = { 0 };
	native_child_error("provision: sandbox init", r, &m, &c, deadline, &err);
	char want[256];
	snprintf(want, sizeof(want), "provision: sandbox init: pivot_root: %s", strerror(EACCES));
	cr_assert(strstr(err.message, want), "%s", err.message);
	close(sv[0]);

	m = (native_msg){ .kind = NATIVE_MSG_FAILED, .step = NATIVE_STEP_INIT, .value = ENOEXEC };
	airlock_error started = { 0 };
	native_child_error("provision: sandbox init", 0, &m, &c, deadline, &started);
	snprintf(want, sizeof(want), "provision: sandbox init: start the sandbox's init program: %s",
	         strerror(ENOEXEC));
	cr_assert(strstr(started.message, want), "%s", started.message);
}
