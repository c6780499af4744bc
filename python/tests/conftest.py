"""Where the suites find the programs they start: meson passes their paths
(tests/meson.build); run by hand, the build directory beside python/."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_DEFAULTS = {
    "python_wire": ROOT / "build" / "tests" / "python_wire",
    "airlock": ROOT / "build" / "airlock",
    "airlock-worker": ROOT / "build" / "airlock-worker",
    "bench_service_py": ROOT / "build" / "bench" / "bench_service_py",
}
_ENV = {
    "python_wire": "AIRLOCK_TEST_PYTHON_WIRE",
    "airlock": "AIRLOCK_TEST_AIRLOCK",
    "airlock-worker": "AIRLOCK_TEST_WORKER",
    "bench_service_py": "AIRLOCK_TEST_BENCH_REMOTE",
}


def binary(name: str) -> str:
    return os.environ.get(_ENV[name]) or str(_DEFAULTS[name])


def pytest_configure(config: "pytest.Config") -> None:
    config.addinivalue_line("markers", "native: starts native sandboxes (root, the default image, the sandbox lock)")


def pytest_collection_modifyitems(items: "list[pytest.Item]") -> None:
    # A test is native when a native service is among its fixtures (the
    # parametrized "stack" fixture's native instance included), so
    # `-m "not native"` runs what starts no sandbox.
    for item in items:
        names = getattr(item, "fixturenames", ())
        callspec = getattr(item, "callspec", None)
        if "native" in names or (callspec is not None and callspec.params.get("stack") == "native"):
            item.add_marker(pytest.mark.native)


def pytest_runtest_logreport(report: "pytest.TestReport") -> None:
    # scripts/test.sh collects "SKIP name: reason" lines from the test log.
    if report.skipped and report.when in ("setup", "call"):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        print(f"\nSKIP python::{report.nodeid}: {reason.removeprefix('Skipped: ')}", flush=True)
