"""Apply the scheduler's migrations without an Alembic project of your own.

Applications that already use Alembic should instead call ``sqla_scheduler.alembic``
from their own revisions (``sqla-scheduler alembic revision`` writes them), or add the
``sqla_scheduler:migrations/versions`` branch to their ``version_locations``. The functions
here keep their own version table, ``sqla_scheduler_alembic_version``, so they never
disturb an application's ``alembic_version``; each way runs the same numbered steps, and
[`status`][] says which one manages a database. Pick one way per database.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL

from sqla_scheduler._dialects import borrowed_engine
from sqla_scheduler._migration_steps import APP_VERSION_TABLE, STANDALONE_VERSION_TABLE
from sqla_scheduler.models import metadata

__all__ = [
    "APP_VERSION_TABLE",
    "VERSION_TABLE",
    "Status",
    "adopt",
    "current",
    "downgrade",
    "heads",
    "status",
    "upgrade",
]

VERSION_TABLE = STANDALONE_VERSION_TABLE
"""The version table used by these functions and ``sqla-scheduler db``."""

Way: TypeAlias = Literal["none", "standalone", "branch", "application"]

_SCRIPT_LOCATION = "sqla_scheduler:migrations"


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", _SCRIPT_LOCATION)
    return config


def script_directory() -> ScriptDirectory:
    """The Alembic script directory of the migrations shipped in the package."""
    return ScriptDirectory.from_config(_config())


def heads() -> tuple[str, ...]:
    """The head revision(s) the package ships."""
    return tuple(script_directory().get_heads())


@contextmanager
def _connection(bind: str | URL | Engine | Connection) -> Iterator[Connection]:
    if isinstance(bind, Connection):
        yield bind
        return
    with borrowed_engine(bind) as engine, engine.begin() as conn:
        yield conn


def _run(bind: str | URL | Engine | Connection, destination: str, *, down: bool) -> None:
    script = script_directory()

    def step(rev: Any, _context: MigrationContext) -> Any:
        if down:
            return script._downgrade_revs(destination, rev)
        return script._upgrade_revs(destination, rev)

    with (
        _connection(bind) as conn,
        EnvironmentContext(_config(), script, fn=step, destination_rev=destination) as env,
    ):
        env.configure(connection=conn, target_metadata=metadata, version_table=VERSION_TABLE)
        with env.begin_transaction():
            env.run_migrations()


def upgrade(bind: str | URL | Engine | Connection, revision: str = "heads") -> None:
    """Upgrade the scheduler's table at ``bind`` (a URL, engine or connection) to ``revision``."""
    _run(bind, revision, down=False)


def downgrade(bind: str | URL | Engine | Connection, revision: str) -> None:
    """Downgrade the scheduler's table to ``revision`` (``"base"`` removes it)."""
    _run(bind, revision, down=True)


def current(
    bind: str | URL | Engine | Connection, *, version_table: str = VERSION_TABLE
) -> tuple[str, ...]:
    """The revision(s) the database is at, per ``sqla_scheduler_alembic_version``.

    With ``version_table`` (say ``"alembic_version"``), those recorded in another version
    table, such as an application's own Alembic project's: its revisions as well as the
    scheduler's. Empty when the table is not there.
    """
    with _connection(bind) as conn:
        context = MigrationContext.configure(conn, opts={"version_table": version_table})
        return tuple(context.get_current_heads())


@dataclass(frozen=True, slots=True)
class Status:
    """The step the scheduler's tables are at and which way of migrating manages them."""

    #: The step of the package's migrations they are at (0: none of the tables is there).
    step: int
    #: ``"standalone"`` (this module, ``sqla-scheduler db upgrade``), ``"branch"`` (the
    #: ``sqla_scheduler`` branch in an application's Alembic project), ``"application"``
    #: (an application's own revisions calling ``sqla_scheduler.alembic``), or ``"none"``.
    way: Way
    #: The branch's revision recorded for ``"standalone"`` and ``"branch"``, else ``None``.
    revision: str | None = None

    @property
    def latest(self) -> int:
        """The package's newest step."""
        from sqla_scheduler._migration_steps import LATEST

        return LATEST

    def describe(self, version_table: str = APP_VERSION_TABLE) -> str:
        """One line for people: the step, and what manages the tables and upgrades them."""
        behind = self.latest - self.step
        where = f"step {self.step} of {self.latest}"
        if self.way == "none":
            return (
                f"{where}: the scheduler's tables are not created (create them with "
                "sqla-scheduler alembic revision and alembic upgrade head in your Alembic "
                "project, or with sqla-scheduler db upgrade)"
            )
        where += " (up to date)" if behind == 0 else f" ({behind} behind)" if behind > 0 else ""
        if self.way == "standalone":
            return (
                f"{where}: managed by sqla-scheduler db upgrade (revision {self.revision} in "
                f"{VERSION_TABLE})"
            )
        if self.way == "branch":
            return (
                f"{where}: managed by the sqla_scheduler branch of your Alembic project "
                f"(revision {self.revision} in {version_table}); upgrade with alembic "
                "upgrade heads"
            )
        return (
            f"{where}: managed by your application's own Alembic history (its revisions "
            "call sqla_scheduler.alembic.upgrade); upgrade with sqla-scheduler alembic "
            "revision, then alembic upgrade head"
        )


def status(
    bind: str | URL | Engine | Connection, *, version_table: str = APP_VERSION_TABLE
) -> Status:
    """Where the scheduler's tables (the default names) are and which way manages them.

    The step is [`sqla_scheduler.alembic.current_step`][]'s; the way is read from the
    version tables: the branch's revision in ``sqla_scheduler_alembic_version`` is this
    module's, in ``version_table`` (the application's) the branch's; tables at a step with
    neither are the application's own history's. Raises
    [`UnknownStepError`][sqla_scheduler.exceptions.UnknownStepError] for tables no step
    is known for.
    """
    from sqla_scheduler._migration_steps import STEP_OF_REVISION
    from sqla_scheduler.alembic import current_step

    def branch_revision(conn: Connection, table: str) -> str | None:
        context = MigrationContext.configure(conn, opts={"version_table": table})
        found = [r for r in context.get_current_heads() if r in STEP_OF_REVISION]
        return max(found, key=STEP_OF_REVISION.__getitem__) if found else None

    with _connection(bind) as conn:
        step = current_step(conn, version_table=version_table)
        standalone = branch_revision(conn, VERSION_TABLE)
        branch = branch_revision(conn, version_table) if version_table != VERSION_TABLE else None
    if standalone is not None:
        return Status(step, "standalone", standalone)
    if branch is not None:
        return Status(step, "branch", branch)
    return Status(step, "application" if step > 0 else "none")


def adopt(
    bind: str | URL | Engine | Connection, *, version_table: str = APP_VERSION_TABLE
) -> tuple[Status, Status]:
    """Hand the scheduler's tables over to the application's own Alembic history, from
    ``sqla-scheduler db upgrade`` or the ``sqla_scheduler`` branch, keeping every row.

    In one transaction: the step the tables are at is recorded beside them (where a
    version of the package that did not record it left none), and the branch's revisions
    are taken out of the version tables (``sqla_scheduler_alembic_version`` is dropped, the
    application's ``version_table`` keeps its own revisions). The tables are not touched.
    The application's next revision calling ``sqla_scheduler.alembic.upgrade`` then starts
    from that step. Returns the status before and after; a database the application's
    history manages already, or with none of the tables, is left as it is.
    """
    from alembic.operations import Operations
    from sqlalchemy import Column, MetaData, String, Table, column, delete, inspect, table
    from sqlalchemy.schema import DropTable

    from sqla_scheduler._migration_steps import DEFAULT_NAMES, STEP_OF_REVISION, record

    with _connection(bind) as conn:
        before = status(conn, version_table=version_table)
        if before.way not in ("standalone", "branch"):
            return before, before
        record(Operations(MigrationContext.configure(conn)), DEFAULT_NAMES, before.step)
        for versions in (VERSION_TABLE, version_table):
            if inspect(conn).has_table(versions):
                version_num = column("version_num", String())
                conn.execute(
                    delete(table(versions, version_num)).where(
                        version_num.in_(list(STEP_OF_REVISION))
                    )
                )
        own = Table(VERSION_TABLE, MetaData(), Column("version_num", String(32)))
        conn.execute(DropTable(own, if_exists=True))
        after = status(conn, version_table=version_table)
    return before, after
