"""The numbered steps through ``sqla_scheduler.alembic`` (an application's own revisions),
against the branch's revisions (``migrate``), on PostgreSQL and on SQLite: the same schema
either way, the step recorded, idempotent calls, other names, and Alembic's --sql mode."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, Engine, MetaData, create_engine, event, inspect, text

import sqla_scheduler.alembic as steps
from sqla_scheduler import _migration_steps, metadata, migrate
from sqla_scheduler.exceptions import UnknownStepError
from sqla_scheduler.models import QUEUE_STORAGE, metadata_for
from tests.support.servers.postgres import PostgresCluster

TABLES = (
    "",
    "_groups",
    "_history",
    "_nodes",
    "_paused",
    "_rates",
    "_results",
    "_schema",
    "_stats",
)


@contextmanager
def operations(engine: Engine) -> Iterator[Operations]:
    """What an application's revision gets as ``op``, on a connection of ``engine``."""
    with engine.begin() as conn:
        yield Operations(MigrationContext.configure(conn))


def recorded(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.scalars(text("select step from scheduled_tasks_schema")))


def step_of(engine: Engine, **names: Any) -> int:
    with engine.connect() as conn:
        return steps.current_step(conn, **names)


def schema_of(engine: Engine, table: str = "scheduled_tasks", schema: str | None = None) -> Any:
    """What each of the scheduler's tables is made of: columns (type, nullability,
    default), indexes (with their WHERE), primary keys and PostgreSQL storage settings."""
    insp = inspect(engine)
    found: dict[str, Any] = {}
    for suffix in TABLES:
        name = table + suffix
        if not insp.has_table(name, schema=schema):
            continue
        columns = [
            (c["name"], str(c["type"]), c["nullable"], str(c.get("default")))
            for c in insp.get_columns(name, schema=schema)
        ]
        indexes = sorted(
            (
                i["name"] or "",
                tuple(i["column_names"]),
                str(sorted((k, str(v)) for k, v in (i.get("dialect_options") or {}).items())),
                str(i.get("column_sorting")),
            )
            for i in insp.get_indexes(name, schema=schema)
        )
        storage = None
        if engine.dialect.name == "postgresql":
            with engine.connect() as conn:
                storage = conn.scalar(
                    text(
                        "select reloptions from pg_class where oid = "
                        "cast(cast(:t as regclass) as oid)"
                    ),
                    {"t": name if schema is None else f"{schema}.{name}"},
                )
        found[suffix or "table"] = (
            columns,
            indexes,
            insp.get_pk_constraint(name, schema=schema),
            sorted(storage or []),
        )
    return found


def proposed(
    engine: Engine,
    target: MetaData,
    *,
    schemas: bool = False,
    version_table: str = migrate.VERSION_TABLE,
) -> list[Any]:
    """What autogenerate would propose to bring ``engine``'s database to ``target``."""
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"version_table": version_table, "include_schemas": schemas}
        )
        return list(compare_metadata(context, target))


@pytest.fixture(scope="module")
def branch_schemas() -> dict[str, Any]:
    """Each backend's ``branch_schema``, read once."""
    return {}


@pytest.fixture
def branch_schema(
    backend: str, new_database: Callable[[], str], branch_schemas: dict[str, Any]
) -> Any:
    """The schema the branch's revisions (``sqla-scheduler db upgrade``) give a database."""
    if backend not in branch_schemas:
        engine = create_engine(new_database())
        try:
            migrate.upgrade(engine)
            assert step_of(engine) == steps.LATEST
            branch_schemas[backend] = schema_of(engine)
        finally:
            engine.dispose()
    return branch_schemas[backend]


def insert_row(engine: Engine, table: str = "scheduled_tasks") -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                f"insert into {table} (task_name, task_instance, task_data, execution_time, "
                "picked, consecutive_failures, version, priority) "
                "values ('t', 'kept', '{\"a\": 1}', '2030-01-01 00:00:00', false, 0, 1, 0)"
            )
        )


def kept_rows(engine: Engine, table: str = "scheduled_tasks") -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(text(f"select task_instance, task_data from {table}")))


def test_upgrade_gives_the_branchs_schema_and_again_does_nothing(
    engine: Engine, branch_schema: Any
) -> None:
    with operations(engine) as op:
        steps.upgrade(op)
    assert schema_of(engine) == branch_schema
    assert proposed(engine, metadata) == []
    assert step_of(engine) == steps.LATEST

    statements: list[str] = []

    def seen(_conn: Connection, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    with operations(engine) as op:
        steps.upgrade(op)
        steps.upgrade(op, version=5)  # beyond it already
    event.remove(engine, "before_cursor_execute", seen)
    reads = ("SELECT", "PRAGMA", "DESCRIBE")  # DESCRIBE: how MariaDB's dialect finds a table
    writes = [s for s in statements if not s.lstrip().upper().startswith(reads)]
    assert writes == []
    assert schema_of(engine) == branch_schema


def test_upgrade_in_two_calls_equals_one(engine: Engine, branch_schema: Any) -> None:
    with operations(engine) as op:
        steps.upgrade(op, version=5)
    assert step_of(engine) == 5
    with operations(engine) as op:
        steps.upgrade(op, version=steps.LATEST)
    assert schema_of(engine) == branch_schema


def test_downgrade_to_each_step_and_back_keeps_the_rows(engine: Engine, branch_schema: Any) -> None:
    with operations(engine) as op:
        steps.upgrade(op)
    insert_row(engine)
    rows = kept_rows(engine)
    for version in reversed(range(1, steps.LATEST)):
        with operations(engine) as op:
            steps.downgrade(op, version)
            steps.downgrade(op, version)  # already there: nothing to do
        assert step_of(engine) == version
        assert kept_rows(engine) == rows
        with operations(engine) as op:
            steps.upgrade(op)
        assert kept_rows(engine) == rows
        assert schema_of(engine) == branch_schema
    with operations(engine) as op:
        steps.downgrade(op, 0)
    assert inspect(engine).get_table_names() == []
    assert step_of(engine) == 0


def test_other_names_get_the_same_steps(engine: Engine, backend: str) -> None:
    """A table name of the application's, and on PostgreSQL a schema (SQLite has none):
    what autogenerate compares with ``metadata_for`` those names is all there, down to 0
    leaves nothing, and the default names are left alone."""
    names: dict[str, Any] = {"table_name": "jobs"}
    if backend == "postgresql":
        names["schema"] = "queue"
        with engine.begin() as conn:
            conn.execute(text("create schema queue"))
    with operations(engine) as op:
        steps.upgrade(op, version=4, **names)
    jobs = "queue.jobs" if backend == "postgresql" else "jobs"
    insert_row(engine, jobs)
    rows = kept_rows(engine, jobs)
    with operations(engine) as op:
        steps.upgrade(op, **names)
    assert kept_rows(engine, jobs) == rows
    assert step_of(engine, **names) == steps.LATEST
    assert step_of(engine) == 0
    target = metadata_for(**names)
    assert proposed(engine, target, schemas=backend == "postgresql") == []
    assert [t.name for t in target.sorted_tables] == sorted(f"jobs{suffix}" for suffix in TABLES)
    schema = names.get("schema")
    shape = schema_of(engine, "jobs", schema)
    storage = sorted(f"{key}={value}" for key, value in QUEUE_STORAGE.items())
    # step 2's storage settings reach the table under its own name
    assert shape["table"][3] == (storage if backend == "postgresql" else [])
    with operations(engine) as op:
        steps.downgrade(op, 0, **names)
    assert inspect(engine).get_table_names(schema=schema) == []


def test_a_step_not_recorded_is_inferred_from_the_branchs_revision(engine: Engine) -> None:
    """A database upgraded by a version that recorded no step has it read from the
    branch's revision in a version table (``sqla-scheduler db upgrade``'s, else the
    application's), and the next call records it."""
    assert step_of(engine) == 0
    migrate.upgrade(engine)
    assert step_of(engine) == steps.LATEST
    drop_record = text("drop table scheduled_tasks_schema")  # as an older version left it
    with engine.begin() as conn:
        conn.execute(drop_record)
    assert step_of(engine) == steps.LATEST
    migrate.downgrade(engine, "d81f2b6a9c30")
    with engine.begin() as conn:
        conn.execute(drop_record)
    assert step_of(engine) == 4
    with engine.begin() as conn:  # as an application's `alembic upgrade heads` left it
        Operations(MigrationContext.configure(conn)).rename_table(
            migrate.VERSION_TABLE, "alembic_version"
        )
    assert step_of(engine) == 4
    with engine.connect() as conn, pytest.raises(UnknownStepError):
        steps.current_step(conn, version_table="app_versions")  # not where it is
    with operations(engine) as op:
        steps.upgrade(op, version=4)  # nothing to run: the step is recorded all the same
    assert recorded(engine) == [4]
    with operations(engine) as op:
        steps.upgrade(op)
    assert step_of(engine) == steps.LATEST
    assert proposed(engine, metadata, version_table="alembic_version") == []


def test_tables_without_a_step_are_refused_until_start_says_it(engine: Engine) -> None:
    metadata.create_all(engine)  # the tables of the latest step, the record table empty
    message = (
        "the scheduler's table 'scheduled_tasks' is there, but no migration step is recorded "
        "for it ('scheduled_tasks_schema') nor a sqla_scheduler revision in "
        "'sqla_scheduler_alembic_version' or 'alembic_version': pass start=N to "
        "sqla_scheduler.alembic.upgrade, N the step its tables are at, to record it"
    )
    with pytest.raises(UnknownStepError) as refused:
        step_of(engine)
    assert str(refused.value) == message
    with operations(engine) as op, pytest.raises(UnknownStepError):
        steps.upgrade(op)
    with operations(engine) as op:
        steps.upgrade(op, start=steps.LATEST)
    assert step_of(engine) == steps.LATEST
    # online, what the database records wins over start: a revision written for a
    # database at step 0 does nothing on one that got its tables another way
    with operations(engine) as op:
        steps.upgrade(op, start=3)
        steps.downgrade(op, 3, start=0)
    assert step_of(engine) == 3


def offline(dialect: str = "postgresql") -> tuple[Operations, io.StringIO]:
    """An ``op`` as ``alembic upgrade --sql`` gives one, and where its SQL is written."""
    buffer = io.StringIO()
    context = MigrationContext.configure(
        dialect_name=dialect, opts={"as_sql": True, "output_buffer": buffer}
    )
    return Operations(context), buffer


def apply_sql(cluster: PostgresCluster, database: str, sql: str, tmp_path: Path) -> None:
    """Run ``sql`` as an operator would: with psql when there is one."""
    psql = cluster.bin_dir / "psql"
    found = str(psql) if psql.exists() else shutil.which("psql")
    if found is None:
        with cluster.connect(database) as conn:
            conn.execute(sql.encode())
        return
    script = tmp_path / "offline.sql"
    script.write_text(sql)
    done = subprocess.run(
        [found, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", cluster.dsn(database), "-f", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("backend", ["postgresql"])
def test_offline_sql_applies_to_the_same_schema(
    pg_cluster: PostgresCluster, engine: Engine, branch_schema: Any, tmp_path: Path
) -> None:
    op, buffer = offline()
    with pytest.raises(ValueError, match=r"^start is required in Alembic's offline \(--sql\)"):
        steps.upgrade(op)
    steps.upgrade(op, version=steps.LATEST, start=0)
    database = engine.url.database
    assert database is not None
    apply_sql(pg_cluster, database, buffer.getvalue(), tmp_path)
    assert schema_of(engine) == branch_schema
    assert proposed(engine, metadata) == []
    assert step_of(engine) == steps.LATEST

    op, buffer = offline()
    steps.downgrade(op, 0, start=steps.LATEST)
    apply_sql(pg_cluster, database, buffer.getvalue(), tmp_path)
    assert inspect(engine).get_table_names() == []


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda op: steps.upgrade(op, version=-1), "version must be a step from 0 to 20, got -1"),
        (lambda op: steps.upgrade(op, version=21), "version must be a step from 0 to 20, got 21"),
        (lambda op: steps.downgrade(op, True), "version must be a step from 0 to 20, got True"),
        (lambda op: steps.upgrade(op, start=99), "start must be a step from 0 to 20, got 99"),
        (
            lambda op: steps.upgrade(op, table_name="1jobs", start=0),
            "table_name is not an identifier (use letters, digits and underscores, not "
            "starting with a digit), got '1jobs'",
        ),
        (
            lambda op: steps.downgrade(op, 0, table_name="j" * 56, start=0),
            f"table_name is longer than 55 characters, got {'j' * 56!r}",
        ),
        (
            lambda op: steps.upgrade(op, schema="a-b", start=0),
            "schema is not an identifier (use letters, digits and underscores, not "
            "starting with a digit), got 'a-b'",
        ),
        (lambda op: metadata_for("a b"), "table_name is not an identifier"),
    ],
)
def test_bad_arguments_are_refused_by_name(
    call: Callable[[Operations], None], message: str
) -> None:
    op, buffer = offline()
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        call(op)
    assert buffer.getvalue() == ""


def test_each_step_is_its_branch_revision() -> None:
    """Step N is revision 000N: the branch's chain from its base, in order."""
    script = migrate.script_directory()
    chain = [revision.revision for revision in script.walk_revisions()][::-1]
    assert chain == [step.revision for step in _migration_steps.STEPS]
    assert [step.number for step in _migration_steps.STEPS] == list(range(1, 21))
    for number, revision in enumerate(chain, start=1):
        module = script.get_revision(revision).module
        assert number == module.STEP
    assert steps.LATEST == _migration_steps.LATEST == 20


def test_the_branch_records_its_step(engine: Engine) -> None:
    """Each revision records the step it brings the tables to, up and down; at base the
    record goes with the tables."""
    migrate.upgrade(engine, "d81f2b6a9c30")
    assert recorded(engine) == [4]
    migrate.upgrade(engine)
    assert recorded(engine) == [steps.LATEST]
    migrate.downgrade(engine, "d81f2b6a9c30")
    assert recorded(engine) == [4]
    migrate.downgrade(engine, "base")
    assert inspect(engine).get_table_names() == [migrate.VERSION_TABLE]
