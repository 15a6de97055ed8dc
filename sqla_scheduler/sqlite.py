"""Settings that let several processes share one SQLite file safely and without errors.

The scheduler runs on a plain ``create_engine("sqlite:///app.db")`` (or
``create_async_engine("sqlite+aiosqlite:///app.db")``): its own transactions begin with
``BEGIN IMMEDIATE`` whatever the engine, taking the file's write lock before their first
statement. What the scheduler leaves alone is the journal mode and the lock timeout,
because the file and the engine are the application's: [`configure_sqlite`][] is the
one call that sets them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from sqlalchemy import Engine, event
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler._dialects import known_backend

__all__ = ["configure_sqlite"]

E = TypeVar("E", Engine, AsyncEngine)


def configure_sqlite(
    engine: E, *, busy_timeout: timedelta = timedelta(seconds=5), wal: bool = True
) -> E:
    """Set up every new connection of a SQLite ``engine`` for a scheduler; return it.

    - ``wal``: ``PRAGMA journal_mode = WAL``. Readers no longer block the writer nor the
      writer readers, so an application reading the table does not stall the scheduler.
      The mode is stored in the database file, so every process using the file gets it.
    - ``busy_timeout``: ``PRAGMA busy_timeout``. How long a connection waits for another
      process's write lock before failing with "database is locked"; this replaces the
      driver's ``timeout`` connect argument (sqlite3 and aiosqlite default to 5 seconds).

    Call it right after creating the engine, before its first connection. It adds a
    ``connect`` event listener and nothing else: the application's transactions behave as
    before. On an engine of another database it does nothing, so an application that runs
    on either SQLite or PostgreSQL can call it unconditionally.
    """
    sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    backend = known_backend(sync_engine.dialect)
    if backend is None or not backend.busy_timeout:
        return engine
    milliseconds = int(busy_timeout / timedelta(milliseconds=1))
    if milliseconds < 0:
        raise ValueError(f"busy_timeout must not be negative, got {busy_timeout}")

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            # First, so that switching the journal mode waits for other processes too.
            cursor.execute(f"PRAGMA busy_timeout = {milliseconds}")
            if wal:
                cursor.execute("PRAGMA journal_mode = WAL")
                cursor.fetchall()
        finally:
            cursor.close()

    event.listen(sync_engine, "connect", on_connect)
    return engine
