"""examples/trio_script.py: the scheduler under trio with a sync engine, as a script."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import run_example


def test_trio_script_runs_until_its_work_is_done(tmp_path: Path) -> None:
    out = run_example("trio_script.py", TRIO_DB=str(tmp_path / "trio.db"))
    assert "done under trio: ['ada', 'bob', 'cy']" in out
    for name in ("ada", "bob", "cy"):
        assert f"hello, {name}" in out
