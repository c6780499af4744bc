"""Where the suites find the programs they start: meson passes their paths
(tests/meson.build); run by hand, the build directory beside python/."""

import os
from pathlib import Path

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
