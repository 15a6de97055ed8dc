"""How the scheduler's units of work begin (``begin``, ``unit_of_work``), the database's
clock (``clock_query``), a replica's lag (``replica_lag_query``) and the file a URL names
(``missing_database_file``)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, create_engine, event, text
from sqlalchemy.exc import DBAPIError

from sqla_scheduler._dialects import replica_lag
from tests.contract._database import Database, databases, row

#: How each database with a shared clock waits on the server (``clock_query``).
SERVER_SLEEP = {"postgresql": "SELECT pg_sleep(0.02)", "mariadb": "DO SLEEP(0.02)"}
#: How a session is put in a time zone far from UTC, which the clock must not follow.
SESSION_ZONE = {
    "postgresql": "SET TIME ZONE 'Asia/Kathmandu'",
    "mariadb": "SET time_zone = '+05:45'",
}


def test_a_unit_of_work_is_one_transaction_its_caller_ends(database: Database) -> None:
    """``unit_of_work(fn)`` runs ``fn`` in one transaction and returns what it returns;
    the caller commits or rolls back, and the library never does."""
    db = database
    insert = db.statements.scheduling.insert

    def schedule(conn: Connection) -> str:
        conn.execute(insert, [row("t", "a")])
        conn.execute(insert, [row("t", "b")])
        return "done"

    with db.connect() as conn:
        assert db.backend.unit_of_work(schedule)(conn) == "done"
        conn.rollback()
        assert db.rows() == {}
        db.backend.unit_of_work(schedule)(conn)
        conn.commit()
    assert set(db.rows()) == {("t", "a"), ("t", "b")}


def _cannot_write(db: Database) -> bool:
    """Whether another connection, not waiting, fails to write now (too ``busy``)."""
    refused: DBAPIError | None = None
    with db.no_waiting(db.engine.connect()) as other:
        try:
            other.execute(db.statements.scheduling.insert, [row("other", "x")])
        except DBAPIError as exc:
            refused = exc
        other.rollback()
    assert refused is None or db.backend.busy(refused), refused
    return refused is not None


_BEGINS = databases(
    lambda backend: backend.begin is not None, "units begin as the driver does: rows are locked"
)


@_BEGINS
def test_a_unit_of_work_takes_the_write_lock_before_its_first_statement(
    database: Database,
) -> None:
    """Where ``begin`` opens units (SQLite's ``BEGIN IMMEDIATE``), a unit that has only
    read holds the database's write lock: it never fails to write later because another
    wrote first."""
    db = database
    with db.connect() as conn:
        db.backend.unit_of_work(lambda c: c.execute(text("SELECT 1")).all())(conn)
        assert _cannot_write(db)
        conn.commit()
    assert not _cannot_write(db)


@_BEGINS
def test_a_unit_of_work_opens_its_own_on_an_engine_that_begins_for_itself(
    database: Database,
) -> None:
    """An application's engine that emits its own BEGIN (SQLAlchemy's recipe for
    pysqlite's transactions): the unit ends that one and opens its own."""
    db = database
    engine = db.other_engine()

    @event.listens_for(engine, "connect")
    def no_implicit_begin(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN")

    with engine.connect() as conn:
        db.backend.unit_of_work(lambda c: c.execute(text("SELECT 1")).all())(conn)
        assert _cannot_write(db)
        conn.execute(db.statements.scheduling.insert, [row("t", "a")])
        conn.commit()
    assert set(db.rows()) == {("t", "a")}


def _reading(db: Database, conn: Connection, query: str) -> datetime:
    """The clock as ``query`` reads it: aware, or naive UTC where ``naive_timestamps``."""
    reading = conn.exec_driver_sql(query).scalar()
    assert isinstance(reading, datetime)
    assert (reading.tzinfo is None) is db.backend.naive_timestamps
    return reading if reading.tzinfo else reading.replace(tzinfo=timezone.utc)


@databases(lambda backend: backend.clock_query is not None, "no clock that schedulers share")
def test_the_clock_query_reads_the_servers_clock_as_it_runs(database: Database) -> None:
    """``clock_query``: the server's time as the query runs (not as its transaction
    began), to the microsecond, aware or naive UTC (``naive_timestamps``), whatever the
    session's time zone."""
    db = database
    query = db.backend.clock_query
    assert query is not None
    with db.engine.connect() as conn:
        conn.exec_driver_sql(SESSION_ZONE[db.name])
        before = datetime.now(timezone.utc)
        first = _reading(db, conn, query)
        conn.exec_driver_sql(SERVER_SLEEP[db.name])
        second = _reading(db, conn, query)
        after = datetime.now(timezone.utc)
        conn.rollback()
    assert second - first >= timedelta(milliseconds=20)
    # the server runs on this machine: its clock is this one's
    assert before - timedelta(seconds=1) <= first < second <= after + timedelta(seconds=1)
    assert first.microsecond or second.microsecond


def test_a_primary_has_no_replica_lag(database: Database) -> None:
    with database.engine.connect() as conn:
        assert replica_lag(conn) is None
        conn.rollback()


def test_only_a_file_that_connecting_would_create_is_named(
    database: Database, tmp_path: Path
) -> None:
    """``missing_database_file``: the test's own database is no missing file; where a URL
    names a file, one that is missing is named, and connecting would indeed create it."""
    db = database
    url = db.engine.url
    named = db.backend.missing_database_file(url)
    if named is None:
        assert db.backend.missing_database_file(url.set(database="nowhere")) is None
        return
    assert Path(named).exists()
    missing = tmp_path / "missing.db"
    assert db.backend.missing_database_file(url.set(database=str(missing))) == str(missing)
    engine = create_engine(url.set(database=str(missing)))
    try:
        engine.connect().close()
    finally:
        engine.dispose()
    assert missing.exists()
