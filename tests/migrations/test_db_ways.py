"""``sqla-scheduler db current`` names the step and the way that manages the scheduler's
tables (``db upgrade``, the ``sqla_scheduler`` branch, the application's own history),
and ``db upgrade``/``db downgrade`` refuse, in one line, tables an Alembic project manages
(issue 30)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, insert, inspect, text

import sqla_scheduler.alembic as steps
from sqla_scheduler import metadata, migrate
from sqla_scheduler.models import table_for
from tests.support.cli import invoke

#: The time of the row a move must keep.
KEPT_AT = datetime(2030, 1, 1, tzinfo=timezone.utc)

LATEST = steps.LATEST


def _through_the_applications_history(engine: Engine) -> None:
    with engine.begin() as conn:
        steps.upgrade(Operations(MigrationContext.configure(conn)), version=LATEST)


def test_not_created(empty_db: str) -> None:
    done = invoke("db", "current", "--url", empty_db)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"step 0 of {LATEST}: the scheduler's tables are not created")


def test_standalone(empty_db: str) -> None:
    assert invoke("db", "upgrade", "--url", empty_db).returncode == 0
    done = invoke("db", "current", "--url", empty_db)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"step {LATEST} of {LATEST} (up to date): managed by sqla-scheduler db upgrade "
        f"(revision {migrate.heads()[0]} in sqla_scheduler_alembic_version)"
    )
    assert migrate.status(empty_db) == migrate.Status(LATEST, "standalone", migrate.heads()[0])


def test_the_applications_own_history(empty_db: str, engine: Engine) -> None:
    _through_the_applications_history(engine)
    done = invoke("db", "current", "--url", empty_db)
    assert done.returncode == 0, done.stderr
    assert "managed by your application's own Alembic history" in done.stdout
    assert done.stdout.startswith(f"step {LATEST} of {LATEST} (up to date)")
    for verb in ("upgrade", "downgrade"):
        refused = invoke("db", verb, "--url", empty_db, *([] if verb == "upgrade" else ["base"]))
        assert refused.returncode == 1, refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        assert "through your application's own Alembic history" in line
        assert f"not with sqla-scheduler db {verb}" in line
    assert "sqla_scheduler_alembic_version" not in inspect(engine).get_table_names()


def test_the_branch(empty_db: str, engine: Engine) -> None:
    """A database the branch upgraded: the scheduler's revision in the app's table."""
    migrate.upgrade(engine)
    with engine.begin() as conn:
        Operations(MigrationContext.configure(conn)).rename_table(
            migrate.VERSION_TABLE, "app_versions"
        )
    done = invoke("db", "current", "--url", empty_db, "--version-table", "app_versions")
    assert done.returncode == 0, done.stderr
    assert "managed by the sqla_scheduler branch of your Alembic project" in done.stdout
    assert f"revision {migrate.heads()[0]} in app_versions" in done.stdout
    refused = invoke("db", "upgrade", "--url", empty_db, "--version-table", "app_versions")
    assert refused.returncode == 1, refused.stderr
    assert "alembic upgrade heads" in refused.stderr
    assert "already exists" not in refused.stderr


def test_tables_of_no_known_step(empty_db: str, engine: Engine) -> None:
    tables = [t for name, t in metadata.tables.items() if not name.endswith("_schema")]
    metadata.create_all(engine, tables=tables)
    for argv in (("db", "current"), ("db", "upgrade")):
        done = invoke(*argv, "--url", empty_db)
        assert done.returncode == 1, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert "no migration step is recorded" in line, line


@pytest.mark.parametrize("step", [4, LATEST - 1])
def test_behind(empty_db: str, engine: Engine, step: int) -> None:
    with engine.begin() as conn:
        steps.upgrade(Operations(MigrationContext.configure(conn)), version=step)
    done = invoke("db", "current", "--url", empty_db)
    assert done.stdout.startswith(f"step {step} of {LATEST} ({LATEST - step} behind)")


@pytest.mark.parametrize("way", ["standalone", "branch"])
def test_adopt_hands_the_tables_to_the_applications_history(
    empty_db: str, engine: Engine, way: str
) -> None:
    """A database of either other way, as a version that recorded no step left it, moves
    to the application's history in one command, its rows kept; the application's revision
    then does nothing there."""
    migrate.upgrade(engine)
    versions = migrate.VERSION_TABLE
    with engine.begin() as conn:
        conn.execute(text("drop table scheduled_tasks_schema"))  # as an older version left it
        conn.execute(
            insert(table_for()).values(task_name="kept", task_instance="k1", execution_time=KEPT_AT)
        )
        if way == "branch":
            op = Operations(MigrationContext.configure(conn))
            op.rename_table(versions, "app_versions")
            conn.execute(text("insert into app_versions (version_num) values ('app0001')"))
            versions = "app_versions"
    done = invoke("db", "adopt", "--url", empty_db, "--version-table", "app_versions")
    assert done.returncode == 0, done.stderr
    assert f"was step {LATEST} of {LATEST} (up to date): managed by" in done.stdout
    assert "now step" in done.stdout
    assert "your application's own Alembic history" in done.stdout
    assert migrate.status(engine, version_table="app_versions") == migrate.Status(
        LATEST, "application"
    )
    names = inspect(engine).get_table_names()
    assert migrate.VERSION_TABLE not in names
    if way == "branch":
        assert migrate.current(engine, version_table="app_versions") == ("app0001",)
    _through_the_applications_history(engine)  # the app's revision: nothing to do
    with engine.connect() as conn:
        assert conn.scalar(text("select count(*) from scheduled_tasks")) == 1
    again = invoke("db", "adopt", "--url", empty_db, "--version-table", "app_versions")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("nothing to hand over: ")
