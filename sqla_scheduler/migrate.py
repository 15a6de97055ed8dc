"""Apply the scheduler's migrations without an Alembic project of your own.

Applications that already use Alembic should instead add
``sqla_scheduler:migrations/versions`` to their ``version_locations`` and run
``alembic upgrade heads``. The functions here keep their own version table,
``sqla_scheduler_alembic_version``, so they never disturb an application's
``alembic_version``. Pick one of the two ways per database.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.engine import URL

from sqla_scheduler._dialects import sync_url
from sqla_scheduler.models import metadata

__all__ = ["VERSION_TABLE", "current", "downgrade", "heads", "upgrade"]

VERSION_TABLE = "sqla_scheduler_alembic_version"
"""The version table used by these functions and ``sqla-scheduler db``."""

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
    engine = bind if isinstance(bind, Engine) else create_engine(sync_url(bind))
    try:
        with engine.begin() as conn:
            yield conn
    finally:
        if engine is not bind:
            engine.dispose()


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
