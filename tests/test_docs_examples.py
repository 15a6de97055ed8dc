"""The documentation's runnable examples run, as written, against a fresh SQLite file.

Convention: a fenced ``python`` block directly preceded by ``<!-- test: GROUP... -->`` (at
the same indentation, e.g. inside a tab) belongs to each named group. The blocks of one
group on one page are joined in page order into a script, which runs in a directory
holding ``app.db``, a SQLite file already migrated (``sqla-scheduler db upgrade``). A
script that exits non-zero fails the test.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sqla_scheduler import migrate
from tests._cli import ROOT, cli_env

DOCS = ROOT / "docs"
MARKER = re.compile(r"^(?P<indent>[ \t]*)<!-- test: (?P<groups>[\w\- ]+) -->\s*$")


def runnable_examples() -> dict[tuple[str, str], str]:
    """``(page, group)`` -> the group's script."""
    scripts: dict[tuple[str, str], list[str]] = {}
    for page in sorted(DOCS.rglob("*.md")):
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines):
            marker = MARKER.match(line)
            if marker is None:
                continue
            indent = marker["indent"]
            fence = lines[number + 1] if number + 1 < len(lines) else ""
            if fence != f"{indent}```python":
                raise AssertionError(f"{page.name}:{number + 1}: marker not before ```python")
            end = lines.index(f"{indent}```", number + 2)
            body = textwrap.dedent("\n".join(lines[number + 2 : end]))
            for group in marker["groups"].split():
                scripts.setdefault((page.name, group), []).append(body)
    return {key: "\n\n".join(parts) + "\n" for key, parts in scripts.items()}


EXAMPLES = runnable_examples()


def test_the_getting_started_examples_are_runnable() -> None:
    assert ("getting-started.md", "sync") in EXAMPLES
    assert ("getting-started.md", "async") in EXAMPLES


@pytest.mark.parametrize(
    "key", sorted(EXAMPLES), ids=[f"{page}:{group}" for page, group in sorted(EXAMPLES)]
)
def test_docs_example_runs(key: tuple[str, str], tmp_path: Path) -> None:
    migrate.upgrade(f"sqlite:///{tmp_path / 'app.db'}")
    script = tmp_path / "example.py"
    script.write_text(EXAMPLES[key])
    run = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, f"{key}:\n{run.stdout}\n{run.stderr}"
