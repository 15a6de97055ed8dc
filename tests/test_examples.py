"""The examples run as a newcomer would run them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_quickstart_runs_on_sqlite(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=120,
        # PYTHONPATH: this checkout's package, even where the environment installed another
        env={**os.environ, "QUICKSTART_DB": str(tmp_path / "q.db"), "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "emailing ada@example.com about order 1" in out
    assert "bob@example.com" not in out.split("scheduled executions:")[1]
    assert "still scheduled: ['order-3']" in out
