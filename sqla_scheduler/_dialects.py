"""The one seam where PostgreSQL and SQLite differ.

Everything dialect-specific the library does is decided here, as a ``Backend`` per
database: capabilities named for what they mean (whether ``NOTIFY`` exists, what RETURNING
can see, how JSON and timestamps are stored, whether lists bind as arrays, ...) and, where
the SQL itself differs, one method per operation (which INSERT construct gives ``ON
CONFLICT DO NOTHING``, how a raw row becomes JSON, how the scheduler's own transactions
begin). Nothing else asks which database it talks to, so a third database is one more
``Backend``. The channel name wake-ups use is here too. (``SKIP
LOCKED`` needs no flag: SQLAlchemy's SQLite compiler leaves ``FOR UPDATE`` out.) Which
databases are supported at all is here too, checked on a URL (``check_url``) before any
driver is imported, and on an engine's dialect (``backend_for``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Literal, TypeVar

from sqlalchemy import URL, Connection, Table, Text, cast, func, literal, make_url, type_coerce
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import ArgumentError
from sqlalchemy.sql.elements import ColumnElement

__all__ = [
    "Backend",
    "UnsupportedDatabaseError",
    "backend_for",
    "check_url",
    "known_backend",
    "notice_of_later",
    "notice_of_pause",
    "notify_channel",
    "read_notice",
    "read_pause_notice",
    "sync_url",
]

T = TypeVar("T")

_MIN_SQLITE = (3, 35, 0)
_ASYNC_TO_SYNC = {"aiosqlite": "pysqlite", "asyncpg": "psycopg", "psycopg_async": "psycopg"}
_MAX_CHANNEL = 63  # PostgreSQL identifiers (and so channel names) are at most 63 bytes

#: The databases the scheduler runs on, by SQLAlchemy's backend name, with an example URL
#: of each: the one list a URL or an engine is checked against.
SUPPORTED = {
    "postgresql": ("PostgreSQL", "postgresql+psycopg://user@host/db"),
    "sqlite": ("SQLite", "sqlite:///app.db"),
}
#: The driver a URL without one gets: the one the package depends on (SQLAlchemy 2.0's
#: default for ``postgresql://`` is psycopg2, which it does not install).
_DEFAULT_DRIVER = {"postgresql": "psycopg"}
#: Backend names SQLAlchemy does not know that mean a supported one (Heroku's and others'
#: ``postgres://``), with the name meant.
_MEANT = {"postgres": "postgresql", "postgis": "postgresql", "sqlite3": "sqlite"}


@dataclass(frozen=True, slots=True)
class Backend:
    """What one database can do, as far as the scheduler cares."""

    name: str
    supports_notify: bool
    #: The RETURNING of an ``UPDATE ... FROM`` can name the FROM list's columns
    #: (PostgreSQL). SQLite's RETURNING sees only the updated row, as updated.
    returning_sees_from: bool
    #: The statement that opens each of the scheduler's own units of work, or ``None``
    #: when the driver's implicit BEGIN will do.
    begin: str | None
    #: The system column that addresses a row directly (PostgreSQL's ``ctid``, SQLite's
    #: ``rowid``); valid within a statement that holds the row.
    row_locator: str
    #: How JSON is stored: ``jsonb`` (read as text through a CAST), or ``text``, JSON
    #: kept as text in a ``TEXT`` column (read as it is).
    json_storage: Literal["jsonb", "text"]
    #: Timestamps are stored without a zone, as naive UTC, and given theirs back on reading.
    naive_timestamps: bool
    #: A column holds only values of its declared type; with dynamic typing (SQLite) any
    #: value can sit in any column, so reading checks each one's type (``readable``).
    typed_columns: bool
    #: A list can be bound as one array parameter (``= ANY(:names)``, ``unnest``): one
    #: statement text whatever the list's length. Otherwise expanding ``IN`` lists.
    binds_arrays: bool
    #: A JSON parameter can become rows in a statement (``jsonb_to_recordset``): a batch of
    #: executions is inserted by one statement.
    rows_from_json: bool
    #: Picks and the next due time walk the due index one task and priority at a time
    #: (a recursive CTE of the bands, then LATERAL), rather than one range by time.
    picks_by_band: bool
    #: Transaction-scoped advisory locks exist (``pg_advisory_xact_lock``): picks of a
    #: task with a concurrency limit take turns by one. Without them writers take turns.
    advisory_locks: bool
    #: A statement can let its own transaction commit without waiting for the disk
    #: (``synchronous_commit`` off for that transaction).
    commit_without_waiting: bool
    #: A ``DELETE ... RETURNING`` can feed an INSERT in the same statement (a
    #: data-modifying CTE): a row moves to history in one statement, not two.
    deletes_into_insert: bool
    #: The database's clock is the cluster's (``DatabaseClock``); without it the
    #: schedulers share the machine's clock.
    shared_clock: bool
    #: One statement on the scheduler's own engine can run in autocommit, its own
    #: transaction, with no BEGIN/COMMIT round trips.
    autocommit_statements: bool
    #: Prepared statements can be told to plan once per connection (``plan_cache_mode``).
    plans_once: bool
    #: The table takes storage parameters (fillfactor, autovacuum) in a migration.
    table_storage_settings: bool
    #: Writers wait for the database's one write lock by a per-connection busy timeout
    #: (``sqla_scheduler.sqlite.configure``).
    busy_timeout: bool
    #: Connecting to a database that does not exist creates it (an empty file), so the
    #: command line checks it exists first (``missing_database_file``).
    creates_missing_database: bool

    def insert(self, table: Table) -> Any:
        """An INSERT for ``table`` that supports ``on_conflict_do_nothing`` and
        ``on_conflict_do_update``."""
        if self.name == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)

    def missing_database_file(self, url: URL) -> str | None:
        """The file ``url`` names that connecting would create, were it missing: ``None``
        when connecting creates nothing, or the URL names no file (in memory, a URI)."""
        database = url.database or ""
        if not self.creates_missing_database or database in ("", ":memory:"):
            return None
        if database.startswith("file:") or url.query.get("uri"):
            return None
        return database

    def raw_row_json(self, table: Table) -> ColumnElement[Any]:
        """The row's every column as text in one JSON object (a string), whatever the
        values: a blob too on SQLite, where ``quote()`` writes any value as an SQL literal."""
        pairs: list[Any] = []
        for column in table.c:
            value: Any = type_coerce(column, Text)
            value = cast(value, Text) if self.name == "postgresql" else func.quote(value)
            pairs += [cast(literal(column.name), Text), value]
        if self.name == "postgresql":
            return cast(func.json_build_object(*pairs), Text)
        return func.json_object(*pairs)

    def unit_of_work(self, fn: Callable[[Connection], T]) -> Callable[[Connection], T]:
        """``fn`` as one of the scheduler's own units of work, opened with ``begin``.

        On SQLite that is ``BEGIN IMMEDIATE``: the unit takes the database's write lock
        before its first statement, waiting up to the busy timeout for it, instead of
        starting as a reader and failing with "database is locked" when it is time to
        write after another process wrote first. With one writer at a time, a pick is a
        plain ``UPDATE ... RETURNING`` that no other process can interleave with.
        """
        if self.begin is None:
            return fn
        return partial(_begun, self.begin, fn)


def _begun(begin: str, fn: Callable[[Connection], T], conn: Connection) -> T:
    if not conn.in_transaction():
        conn.begin()  # runs the engine's ``begin`` hooks now, so we see what they open
    if conn.connection.driver_connection.in_transaction:  # type: ignore[union-attr]
        # The application's engine opened the driver's transaction already (a ``begin``
        # hook emitting BEGIN, or sqlite3's ``autocommit=False``) and nothing ran in it:
        # end it and open ours.
        conn.exec_driver_sql("ROLLBACK")
    conn.exec_driver_sql(begin)
    return fn(conn)


POSTGRESQL = Backend(
    "postgresql",
    supports_notify=True,
    returning_sees_from=True,
    begin=None,
    row_locator="ctid",
    json_storage="jsonb",
    naive_timestamps=False,
    typed_columns=True,
    binds_arrays=True,
    rows_from_json=True,
    picks_by_band=True,
    advisory_locks=True,
    commit_without_waiting=True,
    deletes_into_insert=True,
    shared_clock=True,
    autocommit_statements=True,
    plans_once=True,
    table_storage_settings=True,
    busy_timeout=False,
    creates_missing_database=False,
)
SQLITE = Backend(
    "sqlite",
    supports_notify=False,
    returning_sees_from=False,
    begin="BEGIN IMMEDIATE",
    row_locator="rowid",
    json_storage="text",
    naive_timestamps=True,
    typed_columns=False,
    binds_arrays=False,
    rows_from_json=False,
    picks_by_band=False,
    advisory_locks=False,
    commit_without_waiting=False,
    deletes_into_insert=False,
    shared_clock=False,
    autocommit_statements=False,
    plans_once=False,
    table_storage_settings=False,
    busy_timeout=True,
    creates_missing_database=True,
)
_BACKENDS = {backend.name: backend for backend in (POSTGRESQL, SQLITE)}


def known_backend(of: Dialect | URL) -> Backend | None:
    """The ``Backend`` of a dialect's or a URL's database, or ``None`` for a database the
    scheduler does not run on (a type compiled for another dialect, a URL not yet checked).
    Unlike ``backend_for`` it checks nothing and never raises."""
    return _BACKENDS.get(of.get_backend_name() if isinstance(of, URL) else of.name)


def backend_for(dialect: Dialect) -> Backend:
    """Return the ``Backend`` for a SQLAlchemy dialect, or fail naming it."""
    if dialect.name == "postgresql":
        return POSTGRESQL
    if dialect.name == "sqlite":
        import sqlite3  # here: a Python built without it still runs on PostgreSQL

        if sqlite3.sqlite_version_info < _MIN_SQLITE:
            raise NotImplementedError(
                f"sqla-scheduler needs SQLite {'.'.join(map(str, _MIN_SQLITE))} or newer "
                f"(for RETURNING); this Python's sqlite3 library is {sqlite3.sqlite_version}"
            )
        return SQLITE
    raise NotImplementedError(_unsupported(dialect.name))


class UnsupportedDatabaseError(ArgumentError, NotImplementedError):
    """A URL names a database the scheduler does not run on: a bad URL to the command line
    (``ArgumentError``), and what an engine on that database raises (``NotImplementedError``)."""


def _unsupported(name: str) -> str:
    names = [label for label, _ in SUPPORTED.values()]
    examples = ", ".join(example for _, example in SUPPORTED.values())
    return (
        f"sqla-scheduler supports {', '.join(names[:-1])} and {names[-1]}, not {name!r} "
        f"(URLs such as {examples})"
    )


def check_url(url: str | URL) -> URL:
    """``url`` parsed and checked before any driver is imported: a database the scheduler
    does not support raises [`UnsupportedDatabaseError`][] naming those it does, a misspelt one
    (``postgres://``) ``ArgumentError`` with the URL meant, and ``postgresql://`` without a
    driver gets the package's (psycopg).
    """
    parsed = make_url(url)
    backend, driver = parsed.get_backend_name(), parsed.drivername.partition("+")[2]
    if backend in _MEANT:
        meant = _MEANT[backend]
        fixed = parsed.set(drivername=f"{meant}+{driver or _DEFAULT_DRIVER.get(meant, '')}")
        shown = fixed.render_as_string(hide_password=True).replace("+:", ":")
        raise ArgumentError(
            f"SQLAlchemy calls {SUPPORTED[meant][0]} {meant!r}, not {backend!r}: "
            f"did you mean {shown}?"
        )
    if backend not in SUPPORTED:
        raise UnsupportedDatabaseError(_unsupported(backend))
    if not driver and backend in _DEFAULT_DRIVER:
        parsed = parsed.set(drivername=f"{backend}+{_DEFAULT_DRIVER[backend]}")
    return parsed


def notify_channel(table: Table) -> str:
    """The LISTEN/NOTIFY channel on which schedulers of ``table`` are woken."""
    qualified = f"{table.schema}.{table.name}" if table.schema else table.name
    channel = f"sqla_scheduler.{qualified}"
    if len(channel.encode()) > _MAX_CHANNEL:
        digest = hashlib.sha1(qualified.encode()).hexdigest()[:16]
        channel = f"sqla_scheduler.{digest}"
    return channel


def notice_of_later(task_name: str, at: datetime) -> str:
    """The NOTIFY payload for an execution of ``task_name`` due later, at ``at``.

    A NOTIFY for work due now carries the bare task name; one for later work carries this
    JSON object, so that listeners can wait for its time (``Shapes.notice`` writes the
    same in SQL).
    """
    return json.dumps({"task": task_name, "at": at.isoformat()})


def read_notice(payload: str) -> tuple[str, datetime | None]:
    """The task a NOTIFY ``payload`` announces an execution of, and when that is due
    (``None``: now)."""
    if payload.startswith("{"):
        try:
            notice = json.loads(payload)
            task, at = notice["task"], datetime.fromisoformat(notice["at"])
        except (ValueError, KeyError, TypeError):
            pass  # a task named like a JSON object: due now
        else:
            if isinstance(task, str) and at.tzinfo is not None:
                return task, at
    return payload, None


def notice_of_pause(task_name: str, paused: bool) -> str:
    """The NOTIFY payload that tells running schedulers ``task_name`` was paused or (with
    ``paused`` false) resumed: a JSON object, like ``notice_of_later``'s."""
    return json.dumps({"task": task_name, "paused": paused})


def read_pause_notice(payload: str) -> tuple[str, bool] | None:
    """The task a ``notice_of_pause`` payload names and whether it was paused; ``None``
    for any other payload."""
    if not payload.startswith("{") or '"paused"' not in payload:
        return None
    try:
        notice = json.loads(payload)
        task, paused = notice["task"], notice["paused"]
    except (ValueError, KeyError, TypeError):
        return None
    if isinstance(task, str) and isinstance(paused, bool):
        return task, paused
    return None


def sync_url(url: str | URL) -> URL:
    """``url``, checked (``check_url``), with an async driver swapped for its sync
    counterpart (migrations and one-off reads are sync)."""
    parsed = check_url(url)
    driver = parsed.get_driver_name()
    if driver in _ASYNC_TO_SYNC:
        parsed = parsed.set(drivername=f"{parsed.get_backend_name()}+{_ASYNC_TO_SYNC[driver]}")
    return parsed
