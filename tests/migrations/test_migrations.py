"""The shipped migrations: in an application's Alembic project, standalone, and vs the model,
on PostgreSQL and on SQLite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, MetaData, create_engine, inspect, select, text

from alembic import command
from sqla_scheduler import metadata, migrate
from tests._cli import INVOCATIONS, cli_env, one_error_line, run
from tests._postgres import PostgresCluster

ROOT = Path(__file__).resolve().parents[2]

APP_ENV = textwrap.dedent(
    """
    from alembic import context
    from sqlalchemy import Column, Integer, MetaData, Table, create_engine

    import sqla_scheduler

    app_metadata = MetaData()
    Table("orders", app_metadata, Column("id", Integer, primary_key=True))

    engine = create_engine(context.config.get_main_option("sqlalchemy.url"))
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=[app_metadata, sqla_scheduler.metadata],
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()
    """
)

APP_REVISION = textwrap.dedent(
    """
    import sqlalchemy as sa
    from alembic import op

    revision = "a1b2c3d4e5f6"
    down_revision = None
    branch_labels = ("app",)
    depends_on = None

    def upgrade():
        op.create_table("orders", sa.Column("id", sa.Integer, primary_key=True))

    def downgrade():
        op.drop_table("orders")
    """
)


@pytest.fixture(params=["postgresql", "sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def new_database(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> Iterator[Callable[[], str]]:
    """Makes empty databases of ``backend`` (dropped at teardown) and returns their URLs."""
    made: list[str] = []
    cluster: PostgresCluster | None = (
        request.getfixturevalue("pg_cluster") if backend == "postgresql" else None
    )

    def make() -> str:
        name = f"mig_{os.getpid()}_{len(made)}_{id(made)}"
        made.append(name)
        if cluster is None:
            return f"sqlite:///{tmp_path / name}.db"
        cluster.create_database(name)
        return cluster.url(name)

    try:
        yield make
    finally:
        if cluster is not None:
            for name in made:
                cluster.drop_database(name)


@pytest.fixture
def empty_db(new_database: Callable[[], str]) -> str:
    return new_database()


@pytest.fixture
def engine(empty_db: str) -> Iterator[Engine]:
    eng = create_engine(empty_db)
    try:
        yield eng
    finally:
        eng.dispose()


@pytest.fixture
def app_project(tmp_path: Path, empty_db: str) -> Config:
    """An application's own Alembic project that adds the scheduler's version location."""
    (tmp_path / "migrations" / "versions").mkdir(parents=True)
    (tmp_path / "migrations" / "env.py").write_text(APP_ENV)
    (tmp_path / "migrations" / "versions" / "a1b2c3d4e5f6_orders.py").write_text(APP_REVISION)
    (tmp_path / "alembic.ini").write_text(
        textwrap.dedent(
            f"""
            [alembic]
            script_location = %(here)s/migrations
            version_locations = %(here)s/migrations/versions sqla_scheduler:migrations/versions
            path_separator = space
            sqlalchemy.url = {empty_db}
            """
        )
    )
    return Config(str(tmp_path / "alembic.ini"))


def _schema(engine: Engine, table: str = "scheduled_tasks") -> dict[str, Any]:
    insp = inspect(engine)
    columns = {
        c["name"]: (str(c["type"]), c["nullable"], str(c.get("default")))
        for c in insp.get_columns(table)
    }
    indexes = {
        i["name"]: (
            tuple(i["column_names"]),
            # SQLite reflects a partial index's WHERE as a text() clause: compare its SQL
            {k: str(v) for k, v in (i.get("dialect_options") or {}).items()},
            i.get("column_sorting"),
        )
        for i in insp.get_indexes(table)
    }
    storage = None
    if engine.dialect.name == "postgresql":  # storage parameters are PostgreSQL's
        with engine.connect() as conn:
            storage = conn.scalar(
                text("select reloptions from pg_class where relname = :t"), {"t": table}
            )
    return {
        "columns": columns,
        "indexes": indexes,
        "pk": insp.get_pk_constraint(table),
        "storage": sorted(storage or []),
    }


def test_app_upgrade_heads_creates_the_table(app_project: Config, engine: Engine) -> None:
    command.upgrade(app_project, "heads")
    tables = set(inspect(engine).get_table_names())
    assert {"orders", "scheduled_tasks", "alembic_version"} <= tables
    with engine.connect() as conn:
        heads = set(MigrationContext.configure(conn).get_current_heads())
    assert heads == {"a1b2c3d4e5f6", *migrate.heads()}


def test_app_autogenerate_proposes_nothing(app_project: Config) -> None:
    command.upgrade(app_project, "heads")
    command.check(app_project)  # raises AutogenerateDiffsDetected on any difference


def test_app_alembic_cli_upgrades_and_checks(app_project: Config, tmp_path: Path) -> None:
    alembic = [sys.executable, "-m", "alembic", "-c", str(tmp_path / "alembic.ini")]
    for args in (["upgrade", "heads"], ["check"]):
        run = subprocess.run([*alembic, *args], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr


def test_migrated_schema_matches_the_model(engine: Engine) -> None:
    migrate.upgrade(engine)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"version_table": migrate.VERSION_TABLE})
        diff = compare_metadata(context, metadata)
    assert diff == []


def test_migrated_schema_equals_create_all(engine: Engine, new_database: Callable[[], str]) -> None:
    migrate.upgrade(engine)
    model_engine = create_engine(new_database())
    try:
        metadata.create_all(model_engine)
        assert _schema(engine) == _schema(model_engine)
    finally:
        model_engine.dispose()


def test_downgrade_then_upgrade_round_trips(engine: Engine) -> None:
    migrate.upgrade(engine)
    before = _schema(engine)
    assert migrate.current(engine) == migrate.heads()
    migrate.downgrade(engine, "base")
    assert "scheduled_tasks" not in inspect(engine).get_table_names()
    assert migrate.current(engine) == ()
    migrate.upgrade(engine)
    assert _schema(engine) == before


def test_standalone_upgrade_leaves_an_apps_version_table_alone(
    app_project: Config, engine: Engine
) -> None:
    command.upgrade(app_project, "app@head")
    migrate.upgrade(engine)
    with engine.connect() as conn:
        app_heads = MigrationContext.configure(conn).get_current_heads()
    assert app_heads == ("a1b2c3d4e5f6",)
    assert migrate.current(engine) == migrate.heads()


def test_health_reads_an_apps_version_table(
    app_project: Config, empty_db: str, engine: Engine
) -> None:
    """Migrated by the application's Alembic, the schema's revision is in alembic_version."""
    head = migrate.heads()[0]
    command.upgrade(app_project, "heads")
    done = run("health", "--url", empty_db)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"the schema is at the head revision {head} (alembic_version)\n"

    command.downgrade(app_project, "sqla_scheduler@-1")
    previous = migrate.script_directory().get_revision(head).down_revision
    done = run("health", "--url", empty_db)
    assert done.returncode == 1
    assert one_error_line(done.stderr) == (
        f"sqla-scheduler: the schema is behind: at revision {previous} (alembic_version), "
        f"the head is {head}: run `alembic upgrade heads`"
    )
    # A version table of another name is read when named.
    with engine.begin() as conn:
        Operations(MigrationContext.configure(conn)).rename_table("alembic_version", "app_versions")
    done = run("health", "--url", empty_db, "--version-table", "app_versions")
    assert done.returncode == 1
    assert "(app_versions), the head is" in one_error_line(done.stderr)


def test_metadata_has_a_naming_convention() -> None:
    assert isinstance(metadata, MetaData)
    assert metadata.naming_convention["pk"] == "pk_%(table_name)s"
    table = metadata.tables["scheduled_tasks"]
    assert {i.name for i in table.indexes} == {
        "ix_scheduled_tasks_due",
        "ix_scheduled_tasks_picked",
    }


@pytest.mark.parametrize("invocation", list(INVOCATIONS))
def test_db_upgrade_command(invocation: str, empty_db: str, engine: Engine) -> None:
    upgraded = run("db", "upgrade", "--url", empty_db, invocation=invocation, timeout=120)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "scheduled_tasks" in inspect(engine).get_table_names()
    current = run("db", "current", invocation=invocation, env=cli_env(DATABASE_URL=empty_db))
    assert current.returncode == 0, current.stderr
    assert current.stdout.strip() == f"{migrate.heads()[0]} (head)"


def test_db_upgrade_reports_an_unreachable_database() -> None:
    done = run(
        "db",
        "upgrade",
        "--url",
        "postgresql+psycopg://nobody@127.0.0.1:1/none",
        invocation="console-script",
    )
    assert done.returncode == 1
    assert one_error_line(done.stderr).startswith("sqla-scheduler: cannot reach the database")


def test_the_payload_revision_keeps_each_payload(engine: Engine) -> None:
    """Revision e5a0c4b8f1d2 rebuilds SQLite's payload column as TEXT: payloads stored
    before it read back as they did (numbers SQLite had already turned into numbers stay
    those numbers), and so they do after a downgrade; PostgreSQL is untouched."""
    migrate.upgrade(engine, "d81f2b6a9c30")
    payloads = ['{"a": [1, 2.5, "x"]}', '"text"', "1.0", "12", "1e400", "-1e400", "null"]
    with engine.begin() as conn:
        for i, payload in enumerate(payloads):
            conn.execute(
                text(
                    "insert into scheduled_tasks (task_name, task_instance, task_data, "
                    "execution_time, picked, consecutive_failures, version, priority) "
                    "values ('t', :i, :d, '2030-01-01 00:00:00', false, 0, 1, 0)"
                ),
                {"i": str(i), "d": payload},
            )
    table = metadata.tables["scheduled_tasks"]

    def stored() -> list[Any]:
        with engine.connect() as conn:
            # only the columns of that revision: later ones are not there after a downgrade
            query = select(table.c.task_data).order_by(table.c.task_instance)
            return list(conn.scalars(query))

    before = stored()
    if engine.dialect.name == "sqlite":  # the numbers as SQLite's numeric affinity made them
        assert before[2:6] == [1, 12, float("inf"), float("-inf")]
    assert before[:2] == [{"a": [1, 2.5, "x"]}, "text"]
    migrate.upgrade(engine)
    assert stored() == before
    migrate.downgrade(engine, "d81f2b6a9c30")
    assert stored() == before


def test_the_last_error_revision_adds_a_column_and_its_downgrade_drops_it(engine: Engine) -> None:
    """Revision 626b08d7d8ec adds the nullable ``last_error``; rows written before it read
    ``NULL`` there, and a downgrade drops the column and keeps the rows."""
    migrate.upgrade(engine, "f7b2d9e4a6c1")
    with engine.begin() as conn:
        conn.execute(
            text(
                "insert into scheduled_tasks (task_name, task_instance, execution_time, "
                "picked, consecutive_failures, version, priority) "
                "values ('t', 'old', '2030-01-01 00:00:00', false, 1, 1, 0)"
            )
        )
    migrate.upgrade(engine, "626b08d7d8ec")
    with engine.begin() as conn:
        assert conn.scalar(text("select last_error from scheduled_tasks")) is None
        conn.execute(text("update scheduled_tasks set last_error = 'ValueError: boom'"))
    migrate.downgrade(engine, "f7b2d9e4a6c1")
    columns = {c["name"] for c in inspect(engine).get_columns("scheduled_tasks")}
    assert "last_error" not in columns
    with engine.connect() as conn:
        assert conn.scalar(text("select task_instance from scheduled_tasks")) == "old"


def test_the_payload_version_revision_reads_old_rows_as_version_1(engine: Engine) -> None:
    """Revision 59fbd7ad3e6b adds ``payload_version`` to the table and its history: rows
    and entries written before it read as version 1; a downgrade drops both columns and
    keeps the rows, and an upgrade after it reads them as version 1 again."""
    migrate.upgrade(engine, "b8d2f4a61c37")
    with engine.begin() as conn:
        conn.execute(
            text(
                "insert into scheduled_tasks (task_name, task_instance, task_data, "
                "execution_time, picked, consecutive_failures, version, priority) "
                "values ('t', 'old', '{\"a\": 1}', '2030-01-01 00:00:00', false, 0, 1, 0)"
            )
        )
        conn.execute(
            text(
                "insert into scheduled_tasks_history (task_name, task_instance, outcome, "
                "finished_at, attempt, task_data, priority) "
                "values ('t', 'gone', 'undecodable', '2030-01-01 00:00:00', 1, '{\"a\": 1}', 0)"
            )
        )

    def versions() -> list[Any]:
        with engine.connect() as conn:
            return [
                conn.scalar(text(f"select payload_version from {table}"))
                for table in ("scheduled_tasks", "scheduled_tasks_history")
            ]

    migrate.upgrade(engine, "59fbd7ad3e6b")
    assert versions() == [1, 1]
    with engine.begin() as conn:
        conn.execute(text("update scheduled_tasks set payload_version = 3"))
    migrate.downgrade(engine, "b8d2f4a61c37")
    for table in ("scheduled_tasks", "scheduled_tasks_history"):
        assert "payload_version" not in {c["name"] for c in inspect(engine).get_columns(table)}
    with engine.connect() as conn:
        assert conn.scalar(text("select task_instance from scheduled_tasks")) == "old"
        assert conn.scalar(text("select task_instance from scheduled_tasks_history")) == "gone"
    migrate.upgrade(engine)
    assert versions() == [1, 1]


def test_the_node_interval_revision_leaves_old_rows_without_one(engine: Engine) -> None:
    """Revision 1ab727525351 adds the nodes' ``heartbeat_interval_ms``: a row written before
    it holds null (readers judge it by their own interval); a downgrade drops the column
    and keeps the rows."""
    migrate.upgrade(engine, "59fbd7ad3e6b")
    with engine.begin() as conn:
        conn.execute(
            text(
                "insert into scheduled_tasks_nodes (name, host, pid, started_at, last_seen, "
                "concurrency, running, version) values ('old', 'h', 1, '2030-01-01 00:00:00', "
                "'2030-01-01 00:00:00', 10, 0, '0.1')"
            )
        )
    migrate.upgrade(engine, "1ab727525351")
    with engine.connect() as conn:
        assert conn.scalar(text("select heartbeat_interval_ms from scheduled_tasks_nodes")) is None
    migrate.downgrade(engine, "59fbd7ad3e6b")
    columns = {c["name"] for c in inspect(engine).get_columns("scheduled_tasks_nodes")}
    assert "heartbeat_interval_ms" not in columns
    with engine.connect() as conn:
        assert conn.scalar(text("select name from scheduled_tasks_nodes")) == "old"
