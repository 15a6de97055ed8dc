"""The numbered steps: the branch's revisions run them, and the database records its step."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, inspect, text

from sqla_scheduler import _migration_steps, migrate


def recorded(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.scalars(text("select step from scheduled_tasks_schema")))


def test_each_step_is_its_branch_revision() -> None:
    """Step N is revision 000N: the branch's chain from its base, in order."""
    script = migrate.script_directory()
    chain = [revision.revision for revision in script.walk_revisions()][::-1]
    assert chain == [step.revision for step in _migration_steps.STEPS]
    assert [step.number for step in _migration_steps.STEPS] == list(range(1, 12))
    for number, revision in enumerate(chain, start=1):
        module = script.get_revision(revision).module
        assert number == module.STEP
    assert _migration_steps.LATEST == 11


def test_the_branch_records_its_step(engine: Engine) -> None:
    """Each revision records the step it brings the tables to, up and down; at base the
    record goes with the tables."""
    migrate.upgrade(engine, "d81f2b6a9c30")
    assert recorded(engine) == [4]
    migrate.upgrade(engine)
    assert recorded(engine) == [_migration_steps.LATEST]
    migrate.downgrade(engine, "d81f2b6a9c30")
    assert recorded(engine) == [4]
    migrate.downgrade(engine, "base")
    assert inspect(engine).get_table_names() == [migrate.VERSION_TABLE]
