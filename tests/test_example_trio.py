"""examples/trio_script.py: the scheduler under trio with a sync engine, as a script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.cli import ROOT, cli_env


def test_trio_script_runs_until_its_work_is_done(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trio_script.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(TRIO_DB=str(tmp_path / "trio.db")),
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "done under trio: ['ada', 'bob', 'cy']" in run.stdout
    for name in ("ada", "bob", "cy"):
        assert f"hello, {name}" in run.stdout
