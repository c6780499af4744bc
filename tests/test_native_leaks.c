/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CYCLES provision/execute/destroy cycles (500; 200 for gvisor) leave the
 * counts of mounts, cgroups, loop devices, namespaces, descriptors and
 * processes where they started (issue "The native mechanism", the leak
 * test).
 *
 * Compiled twice (tests/meson.build): test_native_leaks against native,
 * test_gvisor_leaks with TEST_MECHANISM_GVISOR against gvisor, which also
 * counts what gVisor can leave: its runtime's processes (runsc, the sentry,
 * the gofer), zombies, the entries of its state directory (bundles, mount
 * points, runsc's state) and the mounts under it (issue "The gVisor
 * mechanism", the leak test).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <string.h>

#include "sandbox_testlib.h"

#ifdef TEST_MECHANISM_GVISOR
/* A gvisor cycle takes 0.5 to 1 s here (a runsc create, start, exec and
 * delete) against native's 50 ms: 200 cycles keep the suite within its
 * time while every count is still a count of 200 sandboxes. */
#define CYCLES 200
#define LEAKS gvisor_leaks
#else
#define CYCLES 500
#define LEAKS native_leaks
#endif

/* The counts only gvisor has. */
static void expect_no_runtime_leftovers(const leak_counts *before, const leak_counts *after)
{
#ifdef TEST_MECHANISM_GVISOR
	cr_assert_eq(after->p.runtime, 0, "runtime processes left: %ld", after->p.runtime);
	cr_assert_eq(after->p.zombies, 0, "zombies left: %ld", after->p.zombies);
	cr_assert_eq(after->gvisor_state, before->gvisor_state, "entries of %s %ld -> %ld",
	             GVISOR_TEST_STATE_ROOT, before->gvisor_state, after->gvisor_state);
	cr_assert_eq(after->gvisor_mounts, before->gvisor_mounts, "mounts under %s %ld -> %ld",
	             GVISOR_TEST_STATE_ROOT, before->gvisor_mounts, after->gvisor_mounts);
#else
	(void)before;
	(void)after;
#endif
}

Test(LEAKS, cycles_leave_nothing, .timeout = 1500)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	sandbox_test_require(digest);
	airlock_exec *e = sandbox_test_open(NULL);
	/* One warm-up cycle, so the image's shared loop device (kept for the
	 * service's life by design) is in the baseline. */
	airlock_environment_spec spec;
	sandbox_test_spec(&spec, "tenant-leak", digest, NULL);
	spec.limits.workspace_bytes = 16ll << 20;
	spec.limits.inodes_max = 1000;
	airlock_error err = { 0 };
	airlock_environment_handle h = { 0 };
	cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "%s", err.message);
	cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "%s", err.message);
	airlock_environment_handle_clear(&h);

	/* An earlier sandbox's BPF objects the kernel has yet to free are
	 * not in the baseline (bounded wait). */
	leak_wait_bpf(0);
	leak_counts before = leak_measure();
	for (int i = 0; i < CYCLES; i++) {
		cr_assert_eq(airlock_exec_provision(e, &spec, &h, &err), 0, "cycle %d: %s", i, err.message);
		char *argv[] = { "/bin/true", NULL };
		airlock_execution_result r;
		sandbox_test_run(e, &h, argv, 30, NULL, &r);
		cr_assert_eq(r.exit_code, 0, "cycle %d: %s", i, ERR(&r));
		airlock_execution_result_clear(&r);
		cr_assert_eq(airlock_exec_destroy(e, &h, &err), 0, "cycle %d: %s", i, err.message);
		airlock_environment_handle_clear(&h);
	}
	leak_counts after = leak_measure();
	cr_assert_eq(after.mounts, before.mounts, "mounts %ld -> %ld", before.mounts, after.mounts);
	cr_assert_eq(after.cgroups, before.cgroups, "cgroups %ld -> %ld", before.cgroups, after.cgroups);
	cr_assert_eq(after.loops, before.loops, "loop devices %ld -> %ld", before.loops, after.loops);
	cr_assert_eq(after.fds, before.fds, "descriptors %ld -> %ld", before.fds, after.fds);
	/* The kernel frees a removed group's programs and maps a moment later. */
	long bpf = leak_wait_bpf(before.bpf);
	cr_assert_leq(bpf, before.bpf, "socket budget BPF objects %ld -> %ld", before.bpf, bpf);
	cr_assert_eq(after.p.sandbox_tasks, 0, "sandbox processes left: %ld", after.p.sandbox_tasks);
	cr_assert_eq(after.p.sandbox_mntns, 0, "sandbox mount namespaces left: %ld", after.p.sandbox_mntns);
	cr_assert_eq(after.p.children, before.p.children, "children %ld -> %ld", before.p.children,
	             after.p.children);
	expect_no_runtime_leftovers(&before, &after);
	airlock_environment_spec_clear(&spec);
	airlock_exec_free(e);
	/* And freeing the service releases the image's loop device too: the
	 * kernel detaches an autoclear loop device when its last user goes,
	 * which a loaded machine can take a moment to get to (bounded, 5 s). */
	leak_counts end = leak_measure();
	for (int i = 0; i < 50 && !(end.loops < after.loops || after.loops == 0); i++) {
		usleep(100 * 1000);
		end = leak_measure();
	}
	cr_assert(end.loops < after.loops || after.loops == 0, "loop devices after free: %ld (%ld before)",
	          end.loops, after.loops);
}

/* A service that dies without cleaning up: its sandbox ends by itself
 * (init's lifeline), and the next service's start finds the cgroups by
 * their unlocked state and removes them (issue: "On start, the mechanism
 * finds and removes anything a previous crashed run of it left behind"). */
Test(LEAKS, a_crashed_service_is_cleaned_up_at_the_next_start, .timeout = 300)
{
	char digest[AIRLOCK_IMAGE_DIGEST_SIZE];
	sandbox_test_require(digest);
#ifdef TEST_MECHANISM_GVISOR
	/* The doomed service and the next one share the state directory, as a
	 * service and its restart do. A start sweeps what an earlier run left
	 * there: the baseline is clean. */
	airlock_exec_free(sandbox_test_open(NULL));
#endif
	/* An earlier sandbox's BPF objects the kernel has yet to free are
	 * not in the baseline (bounded wait). */
	leak_wait_bpf(0);
	leak_counts before = leak_measure();
	int pfd[2];
	cr_assert_eq(pipe(pfd), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		/* The doomed service: provision, start a long command's sandbox
		 * state, and die without destroy or free. */
		close(pfd[0]);
		airlock_exec *e = NULL;
		airlock_error err = { 0 };
		airlock_environment_spec spec;
		airlock_environment_handle h = { 0 };
		if (sandbox_test_service_new(&e, &err) < 0)
			_exit(2);
		memset(&spec, 0, sizeof(spec));
		spec.tenant_id = "tenant-crash";
		spec.run_id = "run-1";
		spec.lease_epoch = 1;
		spec.image_digest = digest;
		spec.limits = (airlock_resource_limits){ .cpu_millicores = 500, .memory_bytes = 64ll << 20,
			                                 .pids_max = 16, .workspace_bytes = 16ll << 20,
			                                 .inodes_max = 100, .wall_clock_seconds = 60 };
		spec.egress.mode = AIRLOCK_EGRESS_DENY;
		if (airlock_exec_provision(e, &spec, &h, &err) < 0)
			_exit(3);
		ssize_t w = write(pfd[1], "R", 1);
		(void)w;
		_exit(0);
	}
	close(pfd[1]);
	char c = 0;
	cr_assert_eq(read(pfd[0], &c, 1), 1, "the doomed service provisioned");
	close(pfd[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

#ifndef TEST_MECHANISM_GVISOR
	/* The lifeline: the dead service's sandbox ends by itself, at once,
	 * without waiting for anyone to start again. Native's: a gvisor
	 * sandbox is runsc's processes, which the next start's sweep ends. */
	leak_counts orphaned = leak_measure();
	for (int i = 0; i < 100 && orphaned.p.sandbox_tasks > 0; i++) {
		usleep(50 * 1000);
		orphaned = leak_measure();
	}
	cr_assert_eq(orphaned.p.sandbox_tasks, 0, "the crashed service's sandbox is still running");
	cr_assert_gt(orphaned.cgroups, before.cgroups, "its cgroups wait for the next start");
	cr_assert_gt(orphaned.bpf, before.bpf, "its socket budget waits with its cgroups");
#else
	/* No lifeline is asserted: the crashed service's runtime may outlive
	 * it (runsc and its sandbox under the keeper); its bundle, mounts and
	 * cgroups, and the runtime if it lives, wait for the next start. */
	leak_counts orphaned = leak_measure();
	fprintf(stderr, "a_crashed_service: %ld runtime processes outlive the crashed service\n",
	        orphaned.p.runtime);
	cr_assert_gt(orphaned.gvisor_state, before.gvisor_state,
	             "the crashed service's state waits for the next start");
#endif

	/* The next start sweeps. */
	airlock_exec *e = sandbox_test_open(NULL);
	leak_counts after = leak_measure();
#ifdef TEST_MECHANISM_GVISOR
	cr_assert_eq(after.p.runtime, 0, "the next start left the crashed runtime running: %ld",
	             after.p.runtime);
	/* What it left is gone, and the new service leaves nothing either. */
	airlock_exec_free(e);
	e = NULL;
	after = leak_measure();
	cr_assert_eq(after.p.children, before.p.children, "children %ld -> %ld", before.p.children,
	             after.p.children);
	expect_no_runtime_leftovers(&before, &after);
#endif
	cr_assert_eq(after.p.sandbox_tasks, 0, "sandbox processes left: %ld", after.p.sandbox_tasks);
	cr_assert_eq(after.cgroups, before.cgroups, "cgroups %ld -> %ld", before.cgroups, after.cgroups);
	/* The swept groups' programs and maps go with them. */
	long bpf = leak_wait_bpf(before.bpf);
	cr_assert_leq(bpf, before.bpf, "socket budget BPF objects %ld -> %ld", before.bpf, bpf);
	airlock_exec_free(e);
	/* The volume's loop device goes with the last holder of its mount. */
	long loops = -1;
	for (int i = 0; i < 50; i++) {
		loops = leak_count_dir("/sys/block", leak_is_loop);
		if (loops <= before.loops)
			break;
		usleep(100 * 1000);
	}
	cr_assert_leq(loops, before.loops, "loop devices %ld -> %ld", before.loops, loops);
}
