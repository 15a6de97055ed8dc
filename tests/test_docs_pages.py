"""What the README and the documentation's pages say about the project stays true of it.

Examples and shell commands are run by ``test_docs_examples``; these are the statements a
new user reads first and trips over when they go stale: the command list, the changelog's
shape, where the API reference starts, and what a page promises about SQLite's lock.
"""

from __future__ import annotations

import re
from pathlib import Path

from sqla_scheduler import Scheduler
from sqla_scheduler.cli import cli

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def test_the_readme_names_every_command_of_the_help() -> None:
    """Every command ``sqla-scheduler --help`` lists, in the README's list of them."""
    readme = (ROOT / "README.md").read_text()
    listed = re.search(r"the command line \(([^)]*)\)", readme)
    assert listed, "the README's Status says which commands there are"
    named = set(re.findall(r"`([a-z-]+)`", listed[1]))
    assert named == set(cli.commands), f"missing {set(cli.commands) - named}"


def test_the_changelog_has_one_unreleased_section_first() -> None:
    sections = re.findall(r"^## (.*)$", (DOCS / "changelog.md").read_text(), re.MULTILINE)
    unreleased = [s for s in sections if "unreleased" in s.lower()]
    assert unreleased == ["Unreleased"], sections
    assert sections[0] == "Unreleased", sections


def scheduler_members() -> list[str]:
    """The ``members:`` list of the Scheduler's reference page, in its order."""
    page = (DOCS / "reference" / "scheduler.md").read_text()
    options = page.split("::: sqla_scheduler.Scheduler\n", 1)[1]
    # without this, mkdocstrings puts the attributes first, whatever the list's order
    assert re.search(r"^      group_by_category: false$", options, re.MULTILINE), options
    listed = re.search(r"^      members:\n((?:        (?:- \w+|#.*)\n)+)", options, re.MULTILINE)
    assert listed, options
    return re.findall(r"^        - (\w+)$", listed[1], re.MULTILINE)


def test_the_scheduler_reference_leads_with_the_entry_points() -> None:
    members = scheduler_members()
    assert members[:2] == ["schedule", "schedule_batch"], members
    assert set(members[:7]) >= {"run", "start", "stop"}, members


def test_the_scheduler_reference_lists_every_public_member() -> None:
    """A list of members leaves out what it does not name: a new method must be placed."""
    public = {name for name in dir(Scheduler) if not name.startswith("_")}
    members = scheduler_members()
    assert public <= set(members), f"not in the reference: {sorted(public - set(members))}"
    assert len(members) == len(set(members)), members


def test_the_sqlite_pages_say_a_transactional_handler_holds_the_write_lock() -> None:
    """The behaviour itself: ``tests/integration/test_sqlite_write_lock.py``."""
    for page in ("transactional-handlers.md", "choosing-a-database.md"):
        text = " ".join((DOCS / page).read_text().split())
        assert "database is locked" in text, page
        assert re.search(
            r"holds? the (file's |database's )?write lock for the handler's whole run", text
        ), page
        # the workarounds: short handlers, long work outside, a longer busy timeout, PostgreSQL
        for workaround in ("short", "not transactional", "ctx.schedule", "busy timeout"):
            assert workaround in text, (page, workaround)
        assert "PostgreSQL" in text, page
