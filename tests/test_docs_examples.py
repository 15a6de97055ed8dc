"""The documentation's examples run, as written, against a fresh SQLite file.

Python examples. A fenced ``python`` block directly preceded by ``<!-- test: GROUP... -->``
(at the same indentation, e.g. inside a tab or a list item) belongs to each named group.
The blocks of one group on one page are joined in page order into a script, which runs in
a directory holding ``app.db``, a SQLite file already migrated (``sqla-scheduler db
upgrade``), with warnings as errors as in the rest of the suite. A script that exits
non-zero fails the test.

Fixtures. What a page's reader already has, and what shows that an example did what the
page says, lives in ``tests/docs_fixtures/PAGE/`` (PAGE: the page's file name without
``.md``), so the page itself shows only what a reader would write:

- the directory is copied into the script's directory first, so a package in it imports
  the way the page's code expects (``myapp/jobs.py`` for ``from myapp.jobs import
  scheduler``);
- ``GROUP.setup.py`` is put before the group's blocks and ``GROUP.check.py`` after them,
  in the same script: the setup completes a fragment (its imports, the engine or the
  session it uses), the check asserts the outcome. They share the script's globals, so
  ruff lets them use names the page defines.

Files. ``<!-- test: GROUP file=PATH -->`` writes the block, in any language, to PATH in the
script's directory instead of into the script: a module the page shows whole
(``myapp/tasks.py``), an ``alembic.ini`` the check hands to Alembic, text the check
compares with what the library does.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sqla_scheduler import migrate
from tests._cli import ROOT, cli_env

DOCS = ROOT / "docs"
FIXTURES = ROOT / "tests" / "docs_fixtures"
MARKER = re.compile(r"^(?P<indent>[ \t]*)<!-- test: (?P<spec>[^>]*?) -->\s*$")
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)\s*$")


@dataclass(frozen=True, kw_only=True, slots=True)
class Block:
    """A fenced block of a page, with the groups and file its marker names (if any)."""

    page: str
    line: int
    lang: str
    body: str
    groups: tuple[str, ...] = ()
    file: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: Path) -> Iterator[Block]:
    """Every fenced block of ``page``, in page order."""
    lines = page.read_text().splitlines()
    number = 0
    while number < len(lines):
        fence = FENCE.match(lines[number])  # outside a block, any fence opens one
        if fence is None:
            following = lines[number + 1] if number + 1 < len(lines) else ""
            if MARKER.match(lines[number]) and not FENCE.match(following):
                raise AssertionError(f"{page.name}:{number + 1}: marker not before a block")
            number += 1
            continue
        indent = fence["indent"]
        end = lines.index(f"{indent}```", number + 1)
        marker = MARKER.match(lines[number - 1]) if number else None
        groups: list[str] = []
        file = None
        if marker is not None:
            if marker["indent"] != indent:
                raise AssertionError(f"{page.name}:{number}: marker not at its block's indent")
            for word in marker["spec"].split():
                if word.startswith("file="):
                    file = word.removeprefix("file=")
                else:
                    groups.append(word)
        block = Block(
            page=page.name,
            line=number + 1,
            lang=fence["lang"],
            body=textwrap.dedent("\n".join(lines[number + 1 : end])) + "\n",
            groups=tuple(groups),
            file=file,
        )
        if marker is not None and block.lang != "python" and block.file is None:
            raise AssertionError(f"{block.where}: only a python block runs without file=")
        yield block
        number = end + 1


BLOCKS = [block for page in sorted(DOCS.rglob("*.md")) for block in blocks(page)]


@dataclass(kw_only=True, slots=True)
class Example:
    """One group of one page: its script and the files written beside it."""

    page: str
    group: str
    parts: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)

    @property
    def fixtures(self) -> Path:
        return FIXTURES / self.page.removesuffix(".md")

    def script(self) -> str:
        setup = self.fixtures / f"{self.group}.setup.py"
        check = self.fixtures / f"{self.group}.check.py"
        parts = [
            *([setup.read_text()] if setup.exists() else []),
            *self.parts,
            *([check.read_text()] if check.exists() else []),
        ]
        return "\n\n".join(parts)


def runnable_examples() -> dict[tuple[str, str], Example]:
    """``(page, group)`` -> the group's example."""
    examples: dict[tuple[str, str], Example] = {}
    for block in BLOCKS:
        for group in block.groups:
            example = examples.setdefault(
                (block.page, group), Example(page=block.page, group=group)
            )
            if block.file is None:
                example.parts.append(block.body)
            else:
                example.files[block.file] = example.files.get(block.file, "") + block.body
    return examples


EXAMPLES = runnable_examples()


def test_the_getting_started_examples_are_runnable() -> None:
    assert ("getting-started.md", "sync") in EXAMPLES
    assert ("getting-started.md", "async") in EXAMPLES


def test_every_fixture_belongs_to_a_group() -> None:
    groups = {(page.removesuffix(".md"), group) for page, group in EXAMPLES}
    for path in sorted(FIXTURES.glob("*/*.py")):
        name, dot, role = path.stem.rpartition(".")
        if dot and role in {"setup", "check"}:
            assert (path.parent.name, name) in groups, f"{path}: no such group on the page"


@pytest.mark.parametrize(
    "key", sorted(EXAMPLES), ids=[f"{page}:{group}" for page, group in sorted(EXAMPLES)]
)
def test_docs_example_runs(key: tuple[str, str], tmp_path: Path) -> None:
    example = EXAMPLES[key]
    if example.fixtures.is_dir():
        shutil.copytree(example.fixtures, tmp_path, dirs_exist_ok=True)
    for name, text in example.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    migrate.upgrade(f"sqlite:///{tmp_path / 'app.db'}")
    script = tmp_path / "example.py"
    script.write_text(example.script())
    run = subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, f"{key}:\n{run.stdout}\n{run.stderr}"
