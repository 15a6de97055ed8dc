"""What each database can do, as far as the scheduler cares: a ``Backend`` apiece.

Capabilities are named for what they mean, and where the SQL itself differs a ``Backend``
holds one strategy per operation (``insert``, ``raw_row_json``, ...), so that a third
database is one more ``Backend`` here and one more line in ``urls.SUPPORTED``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar

from sqlalchemy import URL, Connection, Table, Text, cast, func, literal, type_coerce
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.elements import ColumnElement

from sqla_scheduler._dialects.urls import unsupported

__all__ = ["POSTGRESQL", "SQLITE", "Backend", "backend_for", "known_backend"]

T = TypeVar("T")

_MIN_SQLITE = (3, 35, 0)


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

    #: An INSERT for a table that supports ``on_conflict_do_nothing`` and
    #: ``on_conflict_do_update``.
    insert: Callable[[Table], Any]
    #: A row's every column as text in one JSON object (a string), whatever its values.
    raw_row_json: Callable[[Table], ColumnElement[Any]]
    #: The file a URL names that connecting would create, were it missing: ``None`` when
    #: connecting creates nothing or the URL names no file (in memory, a URI), so that the
    #: command line fails on a missing file rather than create an empty one.
    missing_database_file: Callable[[URL], str | None]

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


def _raw_pairs(table: Table, as_text: Callable[[Any], Any]) -> list[Any]:
    """``name, value as text`` for each column, for a JSON object of the raw row."""
    pairs: list[Any] = []
    for column in table.c:
        pairs += [cast(literal(column.name), Text), as_text(type_coerce(column, Text))]
    return pairs


def _raw_row_json_object(table: Table) -> ColumnElement[Any]:
    pairs = _raw_pairs(table, lambda value: cast(value, Text))
    return cast(func.json_build_object(*pairs), Text)


def _raw_row_quoted(table: Table) -> ColumnElement[Any]:
    # quote() writes any value, a blob too, as an SQL literal
    return func.json_object(*_raw_pairs(table, func.quote))


def _no_file(url: URL) -> str | None:
    return None


def _sqlite_file(url: URL) -> str | None:
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:") or url.query.get("uri"):
        return None
    return database


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
    insert=postgresql.insert,
    raw_row_json=_raw_row_json_object,
    missing_database_file=_no_file,
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
    insert=sqlite.insert,
    raw_row_json=_raw_row_quoted,
    missing_database_file=_sqlite_file,
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
    raise NotImplementedError(unsupported(dialect.name))
