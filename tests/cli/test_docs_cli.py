"""What the command line's pages show of it is what it prints (issue 46, item 8).

``tests/test_docs_examples.py`` parses and runs the pages' commands; this checks the
output they show, which it leaves alone. Step numbers in examples are illustrative (a new
version of the package adds steps): a shown line matches the real one with any numbers in
their places.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from sqla_scheduler import migrate
from sqla_scheduler._migration_steps import STEPS
from tests.cli.test_nodes_and_health import seed
from tests.support.cli import ROOT, cli_env, invoke, one_error_line

DOCS = ROOT / "docs"


def _section(page: str, heading: str) -> str:
    text = "\n" + (DOCS / page).read_text()
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _shown_output(section: str, command: str) -> Iterator[tuple[str, str]]:
    """Each ``$ COMMAND ...`` line of the console examples, with the output shown after it
    (up to the next command)."""
    for block in re.findall(r"```(?:text|console)\n(.*?)```", section, re.DOTALL):
        for example in re.split(r"^(?=\$ )", block, flags=re.MULTILINE):
            line, _, output = example.partition("\n")
            if line.startswith(f"$ {command}"):
                yield line, output.strip()


def _pattern(line: str, *, revisions: bool = False) -> re.Pattern[str]:
    """``line`` with each number (and with ``revisions``, each revision id) standing for
    any."""
    parts = re.split(r"(\b[0-9a-f]{12}\b|\d+)" if revisions else r"(\d+)", line)
    return re.compile(
        "".join(
            r"\d+" if part.isdigit() else "[0-9a-f]{12}" if at % 2 else re.escape(part)
            for at, part in enumerate(parts)
        )
    )


def test_the_health_examples_are_what_health_prints(tmp_path: Path) -> None:
    """They showed revision ids of steps 6 and 8 as the head's; health speaks of steps."""
    at_head = f"sqlite:///{tmp_path / 'head.db'}"
    behind = f"sqlite:///{tmp_path / 'behind.db'}"
    migrate.upgrade(at_head)
    migrate.upgrade(behind, STEPS[-5].revision)
    seed(at_head)
    printed = [
        done.stdout.strip() or done.stderr.strip()
        for done in (
            invoke("health", "--url", at_head),
            invoke("health", "--url", behind),
            invoke("health", "--url", at_head, "--name", "worker-1"),
            invoke("health", "--url", at_head, "--name", "worker-9"),
        )
    ]
    shown = list(_shown_output(_section("cli.md", "## `sqla-scheduler health`"), "sqla-scheduler"))
    assert len(shown) >= 5, shown
    as_json = json.loads(invoke("health", "--url", behind, "--json").stdout)
    for command, output in shown:
        if "--json" in command:
            example = json.loads(output)
            assert example.keys() == as_json.keys(), (example, as_json)
            assert _pattern(as_json["reason"]).fullmatch(example["reason"]), example
            continue
        assert any(_pattern(real).fullmatch(output) for real in printed), (output, printed)


def test_the_migrations_page_shows_what_db_current_prints(tmp_path: Path) -> None:
    """Its revision id is illustrative too, as long as it has the shape of one."""
    url = f"sqlite:///{tmp_path / 'app.db'}"
    migrate.upgrade(url)
    real = invoke("db", "current", "--url", url).stdout.strip()
    page = " ".join((DOCS / "migrations.md").read_text().split())
    shown = re.findall(r"`(step \d+ of \d+ [^`]*)`", page)
    assert shown, "the page shows what db current prints"
    for line in shown:
        if "managed by" in line:
            assert _pattern(real, revisions=True).fullmatch(line), (line, real)
            continue
        counts = re.fullmatch(r"step (\d+) of (\d+) \((?:up to date|(\d+) behind)\)", line)
        assert counts, line
        step, latest, behind = (int(n) if n else 0 for n in counts.groups())
        assert latest - step == behind, line


def test_the_migrations_page_states_no_count_that_goes_stale() -> None:
    """It said "1 to 14 today" with 16 steps shipped: it says how to see the count."""
    intro = _section("migrations.md", "# Migrations").split("\n## ", 1)[0]
    assert not re.search(r"\b1 to \d+\b|\d+ steps", intro), intro
    assert "sqla-scheduler db current" in intro


def test_the_migrations_page_warns_before_the_step_it_warns_about() -> None:
    """Adding the scheduler's metadata to ``target_metadata`` (step 1) makes autogenerate
    propose its tables until its revision is applied (step 2): the warning came after both."""
    section = _section(
        "migrations.md", "## In your application's own Alembic history (recommended)"
    )
    warning = re.search(r"alembic\s+revision\s+--autogenerate", section)
    assert warning, section
    assert warning.start() < section.index("\n1. "), section


def test_the_bad_value_examples_are_what_the_commands_print(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    migrate.upgrade(url)
    printed = {
        one_error_line(done.stderr)
        for done in (
            invoke("requeue", "abc", "--url", url),
            invoke("executions", "--limit", "x", "--url", url),
            invoke("worker", "myapp.tasks:scheduler", env=cli_env(SQLA_SCHEDULER_HEALTH_PORT="x")),
            invoke("db", "downgrade", "12", "--url", url),
        )
    }
    errors = _section("cli.md", "## Exit status and errors")
    shown = {
        line
        for block in re.findall(r"```text\n(.*?)```", errors, re.DOTALL)
        for line in block.splitlines()
        if re.match(r"sqla-scheduler: [a-z ]+ (--[a-z-]+|[A-Z]+): ", line)
    }
    assert shown == printed
