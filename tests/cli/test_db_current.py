"""``sqla-scheduler db current``: the step the scheduler's tables are at and which way
manages them, as a line or (``--json``) one JSON object."""

from __future__ import annotations

import json
from pathlib import Path

from sqla_scheduler import migrate
from sqla_scheduler._migration_steps import LATEST, STEPS
from tests.support.cli import invoke


def test_db_current_json_is_one_object(tmp_path: Path) -> None:
    """Issue 46, item 8: `db current --json`, for scripts, with the step, the newest step,
    the way and the revision recorded (and where)."""
    empty, behind, adopted = (f"sqlite:///{tmp_path / name}.db" for name in ("e", "b", "a"))
    migrate.upgrade(behind, STEPS[-2].revision)
    migrate.upgrade(adopted)
    migrate.adopt(adopted)
    runs = [invoke("db", "current", "--url", url, "--json") for url in (empty, behind, adopted)]
    assert [(done.returncode, done.stderr) for done in runs] == [(0, "")] * 3
    found = [json.loads(done.stdout) for done in runs]
    assert found == [
        {"step": 0, "latest": LATEST, "way": "none", "revision": None, "version_table": None},
        {
            "step": LATEST - 1,
            "latest": LATEST,
            "way": "standalone",
            "revision": STEPS[-2].revision,
            "version_table": migrate.VERSION_TABLE,
        },
        {
            "step": LATEST,
            "latest": LATEST,
            "way": "application",
            "revision": None,
            "version_table": None,
        },
    ]
    line = invoke("db", "current", "--url", behind)
    assert line.stdout.startswith(f"step {LATEST - 1} of {LATEST} (1 behind): managed by ")
