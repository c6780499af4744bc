"""The package as a user gets it: a fresh virtual environment, ``pip
install`` of a copy of ``python/`` offline (the README's two commands),
then the README's Python example, exactly as written, against a worker in
front of a fake ``airlock serve``."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import servers

PY = Path(__file__).resolve().parents[1]
README = PY.parent / "README.md"


def readme_blocks() -> tuple[list[str], str]:
    text = README.read_text()
    section = text.split("## The Python package (`python/`)", 1)[1].split("\n## ", 1)[0]
    sh = re.search(r"```sh\n(.*?)```", section, re.S)
    example = re.search(r"```python\n(.*?)```", section, re.S)
    assert sh and example, "the README's Python section lost its commands or its example"
    return sh.group(1).strip().splitlines(), example.group(1)


@pytest.fixture(scope="module")
def venv() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="airlock-venv-"))
    try:
        src = d / "python"
        shutil.copytree(PY, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info", ".mypy_cache"))
        commands, _ = readme_blocks()
        assert commands == [
            "python3 -m venv --system-site-packages .venv",
            ".venv/bin/pip install --no-build-isolation --no-index ./python",
        ]
        # The README's commands, with Debian's python3 named (a PATH may put
        # another first), in the copy's parent, with no network.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", ".venv"], cwd=d, check=True, env=env)
        p = subprocess.run([".venv/bin/pip", "install", "-q", "--no-build-isolation", "--no-index", "./python"],
                           cwd=d, env=env, capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_installed_package_is_the_venvs(venv: Path) -> None:
    p = subprocess.run([str(venv / ".venv/bin/python"), "-c", "import airlock; print(airlock.__file__)"],
                       cwd=venv, capture_output=True, text=True, check=True)
    assert p.stdout.startswith(str(venv / ".venv/lib/")), p.stdout
    typed = subprocess.run([str(venv / ".venv/bin/python"), "-c",
                            "import importlib.resources as r; print(r.files('airlock').joinpath('py.typed').is_file())"],
                           cwd=venv, capture_output=True, text=True, check=True)
    assert typed.stdout.strip() == "True"


def test_readme_example_runs_as_written(venv: Path) -> None:
    _, example = readme_blocks()
    assert len([l for l in example.splitlines() if l.strip()]) <= 11
    script = venv / "example.py"
    script.write_text(example)
    with servers.stack("fake", worker=True) as st:
        assert st.worker_address
        env = {"PATH": "/usr/bin:/bin", "AIRLOCK_WORKER": st.worker_address}
        p = subprocess.run([str(venv / ".venv/bin/python"), str(script)], cwd=venv, env=env,
                           capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    # The fake runs nothing: its result is exit 0 with no output.
    assert p.stdout == "exit 0 ", p.stdout
