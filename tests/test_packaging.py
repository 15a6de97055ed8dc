"""The wheel a user installs: built from this checkout, installed in a fresh virtualenv.

Slow-ish (it installs the dependencies from the package index into a new virtualenv) but
part of the default suite: a wheel missing its migrations or templates is a broken release.
The virtualenv is made without pip of its own (``--without-pip``: seconds of ``ensurepip``
saved) and the tests' pip installs into it (``pip --python``): the wheel and the
dependencies it declares still come into an environment that has nothing else, so an
undeclared dependency still fails the installed command.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import sqla_scheduler
from tests.support.cli import ROOT


def run(*args: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "DATABASE_URL"}}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.slow
def test_the_wheel_installs_migrates_and_runs_the_demo(tmp_path: Path) -> None:
    """Slow by nature: it builds the wheel, installs it into a new virtual environment
    and runs the installed command, as a user's first install does."""
    dist = tmp_path / "dist"
    built = run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, ROOT, cwd=tmp_path
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("sqla_scheduler-*.whl")
    assert wheel.name.startswith(f"sqla_scheduler-{sqla_scheduler.__version__}-")

    names = set(zipfile.ZipFile(wheel).namelist())
    migrations = {n for n in names if n.startswith("sqla_scheduler/migrations/versions/")}
    assert any(n.endswith(".py") for n in migrations), sorted(names)
    for needed in (
        "sqla_scheduler/py.typed",
        "sqla_scheduler/admin/templates/base.html",
        "sqla_scheduler/admin/templates/overview.html",
        "sqla_scheduler/admin/static/admin.css",
        "sqla_scheduler/admin/static/admin.js",
    ):
        assert needed in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    # the pytest plugin: a module beside the package, named by the entry point
    assert "sqla_scheduler_pytest.py" in names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "[pytest11]\nsqla_scheduler = sqla_scheduler_pytest" in (
        zipfile.ZipFile(wheel).read(entry_points).decode()
    )
    assert not any(n.startswith(("tests/", "examples/", "docs/")) for n in names)

    venv = tmp_path / "venv"
    created = run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    python = venv / "bin" / "python"
    installed = run(
        sys.executable, "-m", "pip", "--python", python, "install", "-q", wheel, cwd=tmp_path
    )
    assert installed.returncode == 0, installed.stderr

    # cwd is tmp_path: the checkout is not importable, only the installed wheel
    where = run(python, "-c", "import sqla_scheduler; print(sqla_scheduler.__file__)", cwd=tmp_path)
    assert str(venv) in where.stdout, where.stdout + where.stderr

    script = venv / "bin" / "sqla-scheduler"
    url = f"sqlite:///{tmp_path / 'installed.db'}"
    upgraded = run(script, "db", "upgrade", "--url", url, cwd=tmp_path, timeout=120)
    assert upgraded.returncode == 0, upgraded.stdout + upgraded.stderr
    demo = run(script, "demo", "--duration", "3", cwd=tmp_path, timeout=120)
    assert demo.returncode == 0, demo.stdout + demo.stderr
