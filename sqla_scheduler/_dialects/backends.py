"""What each database can do, as far as the scheduler cares: a ``Backend`` apiece.

Capabilities are named for what they mean, and where the SQL itself differs a ``Backend``
holds the operation (``insert_ignoring``, ``held_keys``, ``move``, ``change``, ...; their
SQL is in ``operations``) and the statement builders call it rather than ask which
database they build for, so that a third database is one more ``Backend`` here and one
more line in ``urls.SUPPORTED``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal, TypeVar

from sqlalchemy import (
    URL,
    BindParameter,
    Column,
    Connection,
    CursorResult,
    Insert,
    Select,
    Table,
    Update,
    literal_column,
)
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import ArgumentError
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.expression import Executable
from sqlalchemy.types import TypeEngine

from sqla_scheduler._dialects import operations as op
from sqla_scheduler._dialects import readable, walks
from sqla_scheduler._dialects.marking import Marking
from sqla_scheduler._dialects.operations import (
    HeldKey,
    Move,
    Moving,
    Notify,
    Overwrite,
    RowsFromJSON,
)
from sqla_scheduler._dialects.urls import sync_url, unsupported
from sqla_scheduler._dialects.walks import Due

__all__ = [
    "MARIADB",
    "POSTGRESQL",
    "SQLITE",
    "Backend",
    "backend_for",
    "known_backend",
    "listen_url_problem",
    "replica_lag",
]

T = TypeVar("T")

_MIN_SQLITE = (3, 35, 0)
_MIN_MARIADB = (10, 6)
_MIN_MYSQL = (8, 0)


@dataclass(frozen=True, slots=True)
class Backend:
    """What one database can do, as far as the scheduler cares."""

    name: str
    supports_notify: bool
    #: The RETURNING of an ``UPDATE ... FROM`` can name the FROM list's columns
    #: (PostgreSQL). SQLite's RETURNING sees only the updated row, as updated.
    returning_sees_from: bool
    #: What opens each of the scheduler's own units of work, given its connection before
    #: the first statement, or ``None`` when the driver's implicit BEGIN will do (see
    #: ``unit_of_work``).
    begin: Callable[[Connection], None] | None
    #: The isolation level of the scheduler's own transactions, set on each connection
    #: it takes from the pool and reset by SQLAlchemy when it goes back, or ``None``
    #: for the engine's. MariaDB's READ COMMITTED: its default, REPEATABLE READ, takes
    #: gap locks that make concurrent picks and inserts wait for each other and deadlock.
    #: A connection at this level is never in autocommit mode: a pick's locks must last
    #: until its transaction commits (``marking``).
    isolation_level: str | None
    #: The system column that addresses a row directly (PostgreSQL's ``ctid``, SQLite's
    #: ``rowid``); valid within a statement that holds the row. ``None`` on MariaDB,
    #: where picks lock and mark rows by their key.
    row_locator: str | None
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
    #: ``json_rows(name, columns)``: the rows of the JSON array bound as ``name``, each
    #: element an array of values for ``columns`` (of the scheduler's tables), as a table
    #: to join whose columns have theirs' names (MariaDB's ``JSON_TABLE``); ``None``
    #: where lists of keys bind otherwise (arrays, or an IN list of tuples). MariaDB's
    #: optimizer spends time quadratic in the length of an IN list of tuples: 100 ms for
    #: 500 keys, where the join takes 2 ms.
    json_rows: Callable[[str, Sequence[Column[Any]]], Any] | None
    #: ``rows_from_json(rows, columns, name)``: the JSON array of objects bound as ``rows``
    #: as a table ``name`` with ``columns`` (``jsonb_to_recordset``), so that a batch of
    #: executions is inserted by one statement; ``None`` where a JSON parameter cannot
    #: become rows that way.
    rows_from_json: RowsFromJSON | None
    #: ``due_rows(due, where, address, limit)``: the ``address`` of up to ``limit`` rows
    #: ``due`` and ``where`` select, in priority order, locked (skipping rows others
    #: hold): walking the due index one task and priority at a time (a recursive CTE of
    #: the bands, then LATERAL: ``walks.due_by_band``), or as one range.
    due_rows: Callable[
        [Due, Sequence[ColumnElement[bool]], Sequence[ColumnElement[Any]], BindParameter[int]],
        Select[Any],
    ]
    #: ``next_due(due, where)``: the earliest execution time among the rows ``due`` and
    #: ``where`` select, walked as ``due_rows`` walks them.
    next_due: Callable[[Due, Sequence[ColumnElement[bool]]], Select[Any]]
    #: How picks of a task with a concurrency limit take turns, so that each counts what
    #: the others picked: by a transaction-scoped advisory lock of the task
    #: (``pg_advisory_xact_lock``), by the database's one writer at a time (SQLite), or
    #: by a lock on the row of the tables' migration record (MariaDB: all such picks
    #: take turns).
    task_lock: Literal["advisory", "one_writer", "record_row"]
    #: The database's clock is the cluster's (``DatabaseClock``); without it the
    #: schedulers share the machine's clock.
    shared_clock: bool
    #: The query that reads the database's clock as it runs (not the transaction's
    #: start), for ``DatabaseClock``: aware, or naive UTC where ``naive_timestamps``.
    clock_query: str | None
    #: The query that reads, on a read replica, how far it lags behind its primary (an
    #: interval; zero when it has replayed all it received, NULL on a primary), or
    #: ``None`` where the scheduler knows of no replicas.
    replica_lag_query: str | None
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
    #: ``UPDATE ... RETURNING`` exists. Without it (MariaDB, MySQL) an update whose rows the
    #: caller reads back locks them first, then updates and reads them by key, in one
    #: transaction (``marking``).
    updates_return: bool
    #: The scheduler's INSERTs return the rows they inserted (PostgreSQL, SQLite: psycopg
    #: can give -1, unknown, as an INSERT's row count). Otherwise the driver's row count
    #: says how many were, and the scheduler's own wake-up takes the earliest time asked
    #: for: MySQL has no RETURNING, and on MariaDB reading a batch's rows back costs a
    #: third of its time.
    inserts_return: bool

    #: ``conflicted(error)``: the driver's ``error`` says the transaction lost a conflict
    #: with another one (a deadlock, a lock wait that timed out, a serialization
    #: failure), so that running it again may succeed.
    conflicted: Callable[[BaseException], bool]
    #: ``busy(error)``: the driver's ``error`` says the database was too busy to take the
    #: unit (SQLite's write lock held past the busy timeout, or a lost conflict): work
    #: that can wait (housekeeping) retries without a word, unless it lasts.
    busy: Callable[[BaseException], bool]
    #: ``prepared_lost(error)``: the driver's ``error`` says the server lost a statement
    #: the driver prepared, or had one of that name already: what a pooler in transaction
    #: mode does to prepared statements (then the scheduler stops preparing).
    prepared_lost: Callable[[BaseException], bool]
    #: The dialect's own INSERT of a table, for ``upsert`` (``postgresql.insert``, ...).
    insert: Callable[[Table], Insert]
    #: An INSERT of a table that skips each row whose key exists (``ON CONFLICT DO
    #: NOTHING``; MariaDB's ``INSERT IGNORE``, which returns the rows inserted only).
    insert_ignoring: Callable[[Table], Insert]
    #: ``upsert(insert, overwrite, where)``: ``insert`` (of one table, its values given)
    #: updating the row whose key exists instead, with the values ``overwrite`` gives,
    #: only where ``where`` holds (``None``: always). On MariaDB the values are assigned
    #: in order, each seeing those before it: a value that reads another column comes
    #: first.
    upsert: Callable[[Insert, Overwrite, ColumnElement[bool] | None], Insert]
    #: A row's every column as text in one JSON object (a string), whatever its values.
    raw_row_json: Callable[[Table], ColumnElement[Any]]
    #: The file a URL names that connecting would create, were it missing: ``None`` when
    #: connecting creates nothing or the URL names no file (in memory, a URI), so that the
    #: command line fails on a missing file rather than create an empty one.
    missing_database_file: Callable[[URL], str | None]
    #: ``json_text(column)``: a JSON column's value as its JSON text.
    json_text: Callable[[ColumnElement[Any]], ColumnElement[Any]]
    #: ``text_json(text)``: JSON text as a JSON column stores it.
    text_json: Callable[[ColumnElement[Any]], ColumnElement[Any]]
    #: ``one_of(column, name, item)``: ``column`` is one of the list bound as ``name``
    #: (``= ANY(array)`` where ``binds_arrays``: one statement text whatever the list's
    #: length, so it can be prepared; elsewhere an expanding ``IN``).
    one_of: Callable[[ColumnElement[Any], str, TypeEngine[Any]], ColumnElement[bool]]
    #: ``locator_in(row, rows)``: the row locator ``row`` is among those ``rows`` selects.
    locator_in: Callable[[ColumnElement[Any], Select[Any]], ColumnElement[bool]]
    #: ``held_keys(columns)``: the rows whose ``columns`` (task, instance, version) are
    #: among the bound keys: the parallel arrays ``names``, ``instances`` and ``versions``
    #: (PostgreSQL), one JSON array of arrays ``keys`` (MariaDB, ``json_rows``), or one
    #: expanding list of tuples ``keys`` (SQLite).
    held_keys: Callable[[Sequence[Column[Any]]], tuple[ColumnElement[bool], ...]]
    #: ``bind_held_keys(keys)``: the parameters that bind ``keys`` (task, instance,
    #: version) as ``held_keys`` takes them.
    bind_held_keys: Callable[[Sequence[HeldKey]], dict[str, Any]]
    #: ``lock_task(record)``: the statement that waits for a task's turn (``task_lock``),
    #: given the tables' migration record; ``None`` where writers take turns.
    lock_task: Callable[[Table], Executable | None]
    #: ``move(what)``: the row ``what`` names moved into another table (``Move``): one
    #: INSERT that deletes the row and returns the new row's id (a data-modifying CTE), or
    #: an INSERT that copies the row, locked, and the DELETE to run after it (its row
    #: count says whether it copied).
    move: Callable[[Move], Moving]
    #: ``commit_without_waiting()``: conditions, always true, that let a statement's own
    #: transaction commit without waiting for the disk (``synchronous_commit`` off for
    #: that transaction); none where the database cannot.
    commit_without_waiting: Callable[[], tuple[ColumnElement[bool], ...]]
    #: ``readable(table, earliest, latest)``: for each column of ``table`` that can hold a
    #: value no scheduler can load, the condition that it does not (timestamps between
    #: ``earliest`` and ``latest``), so that such a row is left out of picks, revivals and
    #: listings instead of failing them (``readable``).
    readable: Callable[[Table, datetime, datetime], dict[str, ColumnElement[bool]]]
    #: ``notify(channel, payload)``: the NOTIFY of ``payload`` on ``channel`` as a value
    #: a statement can select (``pg_notify``); ``None`` without NOTIFY.
    notify: Notify | None

    def unit_of_work(self, fn: Callable[[Connection], T]) -> Callable[[Connection], T]:
        """``fn`` as one of the scheduler's own units of work, opened by ``begin``.

        On SQLite that is ``BEGIN IMMEDIATE`` (``_begin_immediate``).
        """
        if self.begin is None:
            return fn
        return partial(_begun, self.begin, fn)

    def returning_inserted(self, insert: Insert, *columns: ColumnElement[Any]) -> Insert:
        """``insert`` returning ``columns`` of each row it inserted where ``inserts_return``,
        else returning nothing (its row count counts them)."""
        return insert.returning(*(columns if self.inserts_return else ()))

    def inserted(
        self, result: CursorResult[Any], asked: Sequence[Sequence[Any]] = ()
    ) -> tuple[int, Sequence[Sequence[Any]]]:
        """How many rows an INSERT built with ``returning_inserted`` inserted, and the
        columns it returned of each. Where an INSERT returns nothing (``inserts_return``),
        its row count counts them, and ``asked`` (the same columns of the rows it was asked
        to insert, or nothing) stands for what it inserted if it inserted any: a wake-up
        for a time asked is early at worst, which is harmless."""
        if self.inserts_return:
            rows = result.all()
            return len(rows), rows
        return result.rowcount, asked if result.rowcount else ()

    def returning_updated(self, update: Update, *columns: ColumnElement[Any]) -> Update | None:
        """``update`` returning ``columns`` of each row as updated, or ``None`` where an
        UPDATE returns nothing (``updates_return``): run it, then read."""
        return update.returning(*columns) if self.updates_return else None

    def change(
        self,
        table: Table,
        *,
        where: Iterable[ColumnElement[bool]],
        values: Mapping[str, Any],
        returning: Sequence[ColumnElement[Any]],
    ) -> Marking:
        """The update of ``values`` on the rows of ``table`` that ``where`` selects,
        returning ``returning`` of each as updated: one ``UPDATE ... RETURNING`` where
        ``updates_return``, else the rows locked, updated and read back (``Marking``)."""
        return Marking.build(
            table,
            one_statement=self.updates_return,
            where=where,
            values=values,
            returning=returning,
            json_rows=self.json_rows,
        )

    def removal(
        self,
        table: Table,
        *,
        where: Iterable[ColumnElement[bool]],
        returning: Sequence[ColumnElement[Any]] = (),
        joins_keys: bool = False,
    ) -> Marking:
        """The deletion of the rows of ``table`` that ``where`` selects, returning
        ``returning`` (default their keys): one ``DELETE ... RETURNING`` where
        ``updates_return``, else the rows locked, read, then deleted by their keys
        (``Marking``). ``joins_keys``: ``where`` joins the bound keys (``held_keys``), which
        MariaDB then reads first, and the rows are deleted one task at a time."""
        return Marking.removal(
            table,
            one_statement=self.updates_return,
            where=where,
            returning=returning,
            json_rows=self.json_rows if joins_keys else None,
        )

    def address(self, table: Table) -> list[ColumnElement[Any]]:
        """What a statement that picks rows of ``table`` selects to address each: the row
        locator (``row_locator``), valid while the statement holds the row, else its key."""
        if self.row_locator is None:
            return list(table.primary_key)
        return [literal_column(self.row_locator)]

    def mark_found(
        self,
        table: Table,
        found: Select[Any],
        *,
        values: Mapping[str, Any],
        returning: Sequence[ColumnElement[Any]],
    ) -> Marking:
        """The update of ``values`` on the rows of ``table`` whose addresses ``found``
        selects (``address``, locked), returning ``returning`` of each as updated: one
        statement that updates each row by its locator (a direct fetch per row rather
        than a join with the table), committing without waiting for the disk where the
        database can; without a locator (MariaDB) the keys found, then the rows updated and
        read back (``Marking``)."""
        if self.row_locator is None:
            return Marking.build(
                table,
                one_statement=False,
                where=(),
                values=values,
                returning=returning,
                find=found,
                json_rows=self.json_rows,
            )
        row: ColumnElement[Any] = literal_column(self.row_locator)
        return Marking.build(
            table,
            one_statement=True,
            where=[self.locator_in(row, found), *self.commit_without_waiting()],
            values=values,
            returning=returning,
        )


def _begun(
    begin: Callable[[Connection], None], fn: Callable[[Connection], T], conn: Connection
) -> T:
    begin(conn)
    return fn(conn)


def _begin_immediate(conn: Connection) -> None:
    """Take SQLite's write lock before the unit's first statement, waiting up to the busy
    timeout for it, instead of starting as a reader and failing with "database is locked"
    when it is time to write after another process wrote first. With one writer at a
    time, a pick is a plain ``UPDATE ... RETURNING`` that no other process can interleave
    with."""
    if not conn.in_transaction():
        conn.begin()  # runs the engine's ``begin`` hooks now, so we see what they open
    if conn.connection.driver_connection.in_transaction:  # type: ignore[union-attr]
        # The application's engine opened the driver's transaction already (a ``begin``
        # hook emitting BEGIN, or sqlite3's ``autocommit=False``) and nothing ran in it:
        # end it and open ours.
        conn.exec_driver_sql("ROLLBACK")
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def _sqlstate_conflict(error: BaseException) -> bool:
    # serialization_failure, deadlock_detected, lock_not_available (a lock wait past the
    # lock_timeout an application's engine may set)
    return getattr(getattr(error, "orig", None), "sqlstate", None) in ("40001", "40P01", "55P03")


def _mysql_conflict(error: BaseException) -> bool:
    # ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK
    args: tuple[Any, ...] = getattr(getattr(error, "orig", None), "args", ())
    return bool(args) and args[0] in (1205, 1213)


def _sqlstate_prepared_lost(error: BaseException) -> bool:
    orig = getattr(error, "orig", None)
    state = getattr(orig, "sqlstate", None)
    if state == "08P01":  # protocol_violation: "bind message supplies 2 parameters, but
        # prepared statement "_pg3_4" requires 1", another client's statement of that name
        return "prepared statement" in str(orig)
    # duplicate_prepared_statement, invalid_sql_statement_name
    return state in ("42P05", "26000")


def _sqlite_busy(error: BaseException) -> bool:
    # SQLITE_BUSY, SQLITE_LOCKED (the codes from Python 3.11, the message before)
    orig = getattr(error, "orig", None)
    code = getattr(orig, "sqlite_errorcode", None)
    return code in (5, 6) if code is not None else "database is locked" in str(orig)


def _never(error: BaseException) -> bool:
    return False  # no prepared statements: nothing to lose


def _no_conflict(error: BaseException) -> bool:
    return False  # SQLite: writers take turns, waiting up to the busy timeout


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
    isolation_level=None,
    row_locator="ctid",
    json_storage="jsonb",
    naive_timestamps=False,
    typed_columns=True,
    binds_arrays=True,
    json_rows=None,
    rows_from_json=op.jsonb_to_recordset,
    due_rows=walks.due_by_band,
    next_due=walks.next_by_band,
    task_lock="advisory",
    shared_clock=True,
    clock_query="SELECT clock_timestamp()",
    replica_lag_query=(
        "SELECT CASE WHEN NOT pg_is_in_recovery() THEN NULL"
        " WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN interval '0'"
        " ELSE greatest(now() - pg_last_xact_replay_timestamp(), interval '0') END"
    ),
    autocommit_statements=True,
    plans_once=True,
    table_storage_settings=True,
    busy_timeout=False,
    updates_return=True,
    inserts_return=True,
    conflicted=_sqlstate_conflict,
    busy=_sqlstate_conflict,
    prepared_lost=_sqlstate_prepared_lost,
    insert=postgresql.insert,
    insert_ignoring=op.skip_conflicts(postgresql.insert),
    upsert=op.on_conflict_update,
    raw_row_json=op.raw_row_json_object,
    missing_database_file=_no_file,
    json_text=op.cast_text,
    text_json=op.cast_jsonb,
    one_of=op.any_of_array,
    locator_in=op.any_of_subquery,
    held_keys=op.keys_as_arrays,
    bind_held_keys=op.keys_in_arrays,
    lock_task=op.lock_advisory,
    move=op.delete_into_insert,
    commit_without_waiting=op.synchronous_commit_off,
    readable=readable.typed_zoned,
    notify=op.pg_notify,
)
SQLITE = Backend(
    "sqlite",
    supports_notify=False,
    returning_sees_from=False,
    begin=_begin_immediate,
    isolation_level=None,
    row_locator="rowid",
    json_storage="text",
    naive_timestamps=True,
    typed_columns=False,
    binds_arrays=False,
    json_rows=None,
    rows_from_json=None,
    due_rows=walks.due_by_range,
    next_due=walks.next_by_range,
    task_lock="one_writer",
    shared_clock=False,
    clock_query=None,
    replica_lag_query=None,
    autocommit_statements=False,
    plans_once=False,
    table_storage_settings=False,
    busy_timeout=True,
    updates_return=True,
    inserts_return=True,
    conflicted=_no_conflict,
    busy=_sqlite_busy,
    prepared_lost=_never,
    insert=sqlite.insert,
    insert_ignoring=op.skip_conflicts(sqlite.insert),
    upsert=op.on_conflict_update,
    raw_row_json=op.raw_row_quoted,
    missing_database_file=_sqlite_file,
    json_text=op.coerce_text,
    text_json=op.coerce_text,
    one_of=op.in_list,
    locator_in=op.in_subquery,
    held_keys=op.keys_as_tuples,
    bind_held_keys=op.keys_in_tuples,
    lock_task=op.lock_none,
    move=op.copy_then_delete,
    commit_without_waiting=op.no_condition,
    readable=readable.dynamic,
    notify=None,
)
MARIADB = Backend(
    "mariadb",
    supports_notify=False,
    returning_sees_from=False,
    begin=None,
    isolation_level="READ COMMITTED",
    row_locator=None,
    json_storage="text",
    naive_timestamps=True,
    typed_columns=True,
    binds_arrays=False,
    json_rows=op.json_table,
    rows_from_json=None,
    due_rows=walks.due_by_range,
    next_due=walks.next_by_range,
    task_lock="record_row",
    shared_clock=True,
    clock_query="SELECT UTC_TIMESTAMP(6)",
    replica_lag_query=None,
    autocommit_statements=False,
    plans_once=False,
    table_storage_settings=False,
    busy_timeout=False,
    updates_return=False,
    inserts_return=False,
    conflicted=_mysql_conflict,
    busy=_mysql_conflict,
    prepared_lost=_never,
    insert=mysql.insert,
    insert_ignoring=op.insert_ignore,
    upsert=op.on_duplicate_key_update,
    raw_row_json=op.raw_row_json_text,
    missing_database_file=_no_file,
    json_text=op.coerce_text,
    text_json=op.coerce_text,
    one_of=op.in_list,
    locator_in=op.in_subquery,
    held_keys=op.keys_as_json,
    bind_held_keys=op.keys_in_json,
    lock_task=op.lock_record_row,
    move=op.copy_then_delete,
    commit_without_waiting=op.no_condition,
    readable=readable.typed_naive,
    notify=None,
)
#: By SQLAlchemy's dialect name: ``mysql://`` URLs reach MariaDB through the MySQL dialect,
#: and MySQL 8 runs MariaDB's statements (none of them has a RETURNING clause).
_BACKENDS = {"postgresql": POSTGRESQL, "sqlite": SQLITE, "mysql": MARIADB, "mariadb": MARIADB}


def known_backend(of: Dialect | URL) -> Backend | None:
    """The ``Backend`` of a dialect's or a URL's database, or ``None`` for a database the
    scheduler does not run on (a type compiled for another dialect, a URL not yet checked).
    Unlike ``backend_for`` it checks nothing and never raises."""
    return _BACKENDS.get(of.get_backend_name() if isinstance(of, URL) else of.name)


def replica_lag(conn: Connection) -> timedelta | None:
    """How far the replica ``conn`` reads lags behind its primary; ``None`` on a primary,
    or where the scheduler cannot tell (``Backend.replica_lag_query``)."""
    backend = known_backend(conn.dialect)
    query = None if backend is None else backend.replica_lag_query
    if query is None:
        return None
    lag = conn.exec_driver_sql(query).scalar()
    return lag if isinstance(lag, timedelta) else None


def listen_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as a ``listen_url`` (a URL of a database with LISTEN),
    or ``None``."""
    try:
        parsed = sync_url(url)
    except ArgumentError as exc:
        return str(exc)
    backend = known_backend(parsed)
    if backend is None or not backend.supports_notify:
        return "is not a PostgreSQL URL: only PostgreSQL has LISTEN"
    return None


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
    if dialect.name in ("mysql", "mariadb"):
        _check_mysql_server(dialect)
        return MARIADB
    raise NotImplementedError(unsupported(dialect.name))


def _check_mysql_server(dialect: Dialect) -> None:
    """Fail on a MariaDB older than 10.6 or a MySQL older than 8.0 (``SKIP LOCKED``,
    ``JSON_TABLE``), once the dialect has connected and knows which it talks to."""
    version = getattr(dialect, "server_version_info", None)
    if version is None:
        return  # not connected yet: checked again when the scheduler's engine connects
    name, least = (
        ("MariaDB", _MIN_MARIADB)
        if getattr(dialect, "is_mariadb", False)
        else ("MySQL", _MIN_MYSQL)
    )
    if tuple(version[:2]) < least:
        raise NotImplementedError(
            f"sqla-scheduler needs {name} {'.'.join(map(str, least))} or newer (for SKIP "
            f"LOCKED); this server is {name} {'.'.join(map(str, version[:3]))}"
        )
