"""The examples run as a newcomer would run them."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import run_example


def test_quickstart_runs_on_sqlite(tmp_path: Path) -> None:
    out = run_example("quickstart.py", QUICKSTART_DB=str(tmp_path / "q.db"))
    assert "emailing ada@example.com about order 1" in out
    assert "bob@example.com" not in out.split("scheduled executions:")[1]
    assert "still scheduled: ['order-3']" in out
