/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Everyday programs of the default image, as model-written code uses them,
 * on the mechanism this suite is compiled for (native here; test_gvisor_programs
 * is this file with TEST_MECHANISM_GVISOR: tests/meson.build). A sandbox has
 * no network, so whatever a program needs from the image must be in it.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sandbox_testlib.h"

/* Room for a venv (pip and setuptools: about 20 MB in 2,500 files) and a
 * package installed into it. */
static const airlock_resource_limits roomy = {
	.cpu_millicores = 1000, .memory_bytes = 512ll << 20, .pids_max = 64,
	.workspace_bytes = 256ll << 20, .inodes_max = 20000, .wall_clock_seconds = 300,
};

/*
 * `python3 -m venv` runs ensurepip, which Debian ships in python3-venv with
 * the pip and setuptools wheels it installs from the image
 * (/usr/share/python-wheels): without the package the venv is refused
 * ("ensurepip is not available"). The venv's interpreter is its own, its pip
 * runs, and it installs a package from the workspace with no index (the
 * sandbox has no network), which then imports.
 */
static const char venv_script[] =
	"set -e\n"
	"python3 -m venv /workspace/v\n"
	"/workspace/v/bin/python -c 'import sys; print(\"venv\", sys.prefix, sys.prefix != "
	"sys.base_prefix)'\n"
	"/workspace/v/bin/pip --version\n"
	"mkdir -p pkg/hello_airlock\n"
	"printf 'def hi():\\n    return \"hi from a package\"\\n' > pkg/hello_airlock/__init__.py\n"
	"printf 'from setuptools import setup\\nsetup(name=\"hello-airlock\", version=\"1.0\", "
	"packages=[\"hello_airlock\"])\\n' > pkg/setup.py\n"
	"/workspace/v/bin/pip install -q --no-index --no-build-isolation --no-cache-dir "
	"--disable-pip-version-check ./pkg\n"
	"/workspace/v/bin/python -c 'import hello_airlock; print(hello_airlock.hi())'\n";

Test(sandbox_programs, python_venv_and_pip_without_the_network, .timeout = 600)
{
	box b;
	box_open(&b, "tenant-programs", &roomy);
	char *argv[] = { "bash", "-c", (char *)venv_script, NULL };
	airlock_execution_result r;
	sandbox_test_run(b.e, &b.h, argv, 300, NULL, &r);
	cr_expect(r.has_exit_code && r.exit_code == 0,
	          "exit %d%s (killed by %s)\nstdout: %.2000s\nstderr: %.4000s", r.exit_code,
	          r.has_exit_code ? "" : " (no exit code)",
	          r.killed_by ? airlock_kill_reason_name(r.killed_by) : "nothing",
	          OUT(&r), ERR(&r));
	cr_expect(strstr(OUT(&r), "venv /workspace/v True") != NULL,
	          "the venv's python is not its own: %.2000s", OUT(&r));
	cr_expect(strstr(OUT(&r), "(python 3.") != NULL && strstr(OUT(&r), "/workspace/v/lib/") != NULL,
	          "the venv's pip did not run from the venv: %.2000s", OUT(&r));
	cr_expect(strstr(OUT(&r), "hi from a package") != NULL,
	          "the package installed without the network does not import: %.2000s\n%.2000s",
	          OUT(&r), ERR(&r));
	airlock_execution_result_clear(&r);
	box_close(&b);
}
