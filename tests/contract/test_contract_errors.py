"""Which errors the scheduler runs a unit again for: ``conflicted`` (a lost conflict),
``busy`` (too busy now, housekeeping waits) and ``prepared_lost`` (a pooler lost a
prepared statement), each on an error the real server raised.

The tables below say how each database is made to raise one; a database without an
entry where one is possible fails here, to be given one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text, update
from sqlalchemy.exc import DBAPIError, IntegrityError

from sqla_scheduler._dialects import Backend
from tests.contract._database import NO_WAITING, Database, databases, row

#: What each database's sessions set so that a deadlock is found at once; ``None`` where
#: none can happen.
DEADLOCKS = {
    "postgresql": "SET deadlock_timeout = '20ms'",
    "mariadb": "",  # InnoDB finds one as it forms
    "sqlite": None,  # one writer at a time, which waits for the write lock
}
#: How each database's session ends a lock wait that lasts; ``None`` where locks are the
#: database's one write lock (see the ``database is locked`` test).
LOCK_TIMEOUTS = {
    "postgresql": NO_WAITING["postgresql"],
    "mariadb": NO_WAITING["mariadb"],
    "sqlite": None,
}
#: The isolation level at which a concurrent update fails the transaction that read
#: before it; ``None`` where the scheduler's level never does.
SERIALIZATION = {"postgresql": "REPEATABLE READ", "mariadb": None, "sqlite": None}
#: The driver arguments that make it prepare every statement on the server at its first
#: run; ``None`` where the driver prepares none.
PREPARING = {"postgresql": {"prepare_threshold": 0}, "mariadb": None, "sqlite": None}


def _has(table: dict[str, Any]) -> Callable[[Backend], bool]:
    """Whether ``table`` has a way for a database: a database it has no entry for runs
    the test, and fails, to be given one."""
    return lambda backend: table.get(backend.name, "") is not None


def _set_priority(instance: str) -> Callable[[Database, Connection], None]:
    def run(db: Database, conn: Connection) -> None:
        t = db.table
        key = (t.c.task_name == "t") & (t.c.task_instance == instance)
        conn.execute(update(t).where(key).values(priority=t.c.priority + 1))

    return run


def _is_conflict(db: Database, error: BaseException) -> None:
    assert db.backend.conflicted(error), error
    assert db.backend.busy(error), error
    assert not db.backend.prepared_lost(error), error


@databases(_has(DEADLOCKS), "one writer at a time: no deadlock")
def test_a_deadlock_is_a_lost_conflict(database: Database) -> None:
    """Two units each update the row the other holds: the server aborts one of them."""
    db = database
    setting = DEADLOCKS[db.name]
    db.put(row("t", "x"), row("t", "y"))
    errors: list[BaseException] = []

    def attempt(conn: Connection, instance: str) -> None:
        try:
            _set_priority(instance)(db, conn)
            conn.commit()
        except DBAPIError as exc:
            errors.append(exc)
            conn.rollback()

    with db.connect() as first, db.connect() as second:
        for conn in (first, second):
            if setting:
                conn.exec_driver_sql(setting)
                conn.commit()
        _set_priority("x")(db, first)
        _set_priority("y")(db, second)
        thread = threading.Thread(target=attempt, args=(first, "y"))
        thread.start()
        attempt(second, "x")
        thread.join(10)
    assert len(errors) == 1
    _is_conflict(db, errors[0])


@databases(
    _has(LOCK_TIMEOUTS),
    "the only lock is the write lock ('database is locked')",
)
def test_a_lock_wait_that_times_out_is_a_lost_conflict(database: Database) -> None:
    db = database
    setting = LOCK_TIMEOUTS[db.name]
    assert setting is not None
    db.put(row("t", "x"))
    with db.connect() as holder, db.connect() as waiter:
        _set_priority("x")(db, holder)
        waiter.exec_driver_sql(setting)
        waiter.commit()
        with pytest.raises(DBAPIError) as raised:
            _set_priority("x")(db, waiter)
        waiter.rollback()
        holder.commit()
    _is_conflict(db, raised.value)


@databases(_has(SERIALIZATION), "no serialization failures at the scheduler's isolation level")
def test_a_serialization_failure_is_a_lost_conflict(database: Database) -> None:
    """A unit that read a row another then changed and committed, and updates it."""
    db = database
    level = SERIALIZATION[db.name]
    assert level is not None
    db.put(row("t", "x"))
    with db.engine.connect() as reader, db.connect() as writer:
        reader.execution_options(isolation_level=level)
        reader.execute(text("SELECT priority FROM scheduled_tasks")).all()
        _set_priority("x")(db, writer)
        writer.commit()
        with pytest.raises(DBAPIError) as raised:
            _set_priority("x")(db, reader)
        reader.rollback()
    _is_conflict(db, raised.value)


@databases(lambda backend: backend.busy_timeout, "no database-wide write lock")
def test_database_is_locked_is_busy_and_no_conflict(database: Database) -> None:
    """SQLite's write lock held past the busy timeout: too busy now, but not a conflict
    to run again at once (the busy timeout waited already)."""
    db = database
    with db.connect() as holder, db.no_waiting(db.connect()) as waiter:
        db.backend.unit_of_work(lambda conn: None)(holder)
        with pytest.raises(DBAPIError) as raised:
            db.backend.unit_of_work(lambda conn: None)(waiter)
        waiter.rollback()
        holder.rollback()
    assert "database is locked" in str(raised.value)
    assert db.backend.busy(raised.value)
    assert not db.backend.conflicted(raised.value)
    assert not db.backend.prepared_lost(raised.value)


def test_an_error_of_the_statement_itself_is_none_of_them(database: Database) -> None:
    """A key that exists: running the unit again would fail again."""
    db = database
    db.put(row("t", "x"))
    with pytest.raises(IntegrityError) as raised, db.engine.begin() as conn:
        conn.execute(db.backend.insert(db.table), row("t", "x"))
    error = raised.value
    assert not db.backend.conflicted(error)
    assert not db.backend.busy(error)
    assert not db.backend.prepared_lost(error)


# --- prepared statements lost to a pooler -------------------------------------------


_PREPARES = databases(_has(PREPARING), "its driver prepares no statements on the server")


def _preparing(db: Database) -> Engine:
    """An engine whose driver prepares every statement at its first run."""
    arguments = PREPARING[db.name]
    assert arguments is not None
    return db.other_engine(**arguments)


def _prepared(conn: Connection, containing: str = "") -> list[str]:
    """The names the driver gave the statements it prepared in ``conn``'s session (of
    those whose text has ``containing``), read around the driver, which would prepare
    this query too."""
    pgconn = conn.connection.driver_connection.pgconn  # type: ignore[union-attr]
    query = "SELECT name FROM pg_prepared_statements WHERE name LIKE '_pg3_%'"
    result = pgconn.exec_(f"{query} AND statement LIKE '%{containing}%'".encode())
    return [result.get_value(i, 0).decode() for i in range(result.ntuples)]


def _behind_the_drivers_back(conn: Connection, sql: str) -> None:
    """What another client of a pooler's server connection does: ``sql`` in this
    session, which the driver does not see."""
    pgconn = conn.connection.driver_connection.pgconn  # type: ignore[union-attr]
    assert pgconn.exec_(sql.encode()).status == 1  # COMMAND_OK


_MARKED = text("SELECT CAST(:n AS integer) AS contract_marked")


def _lost(conn: Connection, sql: Callable[[str], str]) -> DBAPIError:
    """Run the marked statement (prepared), do ``sql(its name)`` behind the driver's
    back, run it again: the error it fails with."""
    conn.execute(_MARKED, {"n": 1}).all()
    [name] = _prepared(conn, "contract_marked")
    _behind_the_drivers_back(conn, sql(name))
    with pytest.raises(DBAPIError) as raised:
        conn.execute(_MARKED, {"n": 2}).all()
    conn.rollback()
    return raised.value


@_PREPARES
@pytest.mark.parametrize(
    "sabotage",
    [
        pytest.param(lambda name: f'DEALLOCATE "{name}"', id="gone"),
        pytest.param(
            lambda name: f'DEALLOCATE "{name}"; PREPARE "{name}" AS SELECT $1::int, $2::int',
            id="another-statement-of-its-name",
        ),
    ],
)
def test_a_prepared_statement_the_server_lost_is_lost(
    database: Database, sabotage: Callable[[str], str]
) -> None:
    """The driver runs a statement it prepared, which the server no longer has (26000),
    or has as another statement with other parameters (08P01)."""
    engine = _preparing(database)
    with engine.connect() as conn:
        error = _lost(conn, sabotage)
    assert database.backend.prepared_lost(error), error
    assert not database.backend.conflicted(error)


@_PREPARES
def test_a_name_the_server_has_already_is_a_lost_prepared_statement(database: Database) -> None:
    """The driver prepares a statement under a name the session has already (42P05)."""
    engine = _preparing(database)
    with engine.connect() as conn:
        conn.execute(_MARKED, {"n": 1}).all()
        taken = max(int(name.removeprefix("_pg3_")) for name in _prepared(conn))
        _behind_the_drivers_back(conn, f'PREPARE "_pg3_{taken + 1}" AS SELECT 1')
        with pytest.raises(DBAPIError) as raised:
            conn.execute(text("SELECT 2 AS contract_new")).all()
        conn.rollback()
    assert database.backend.prepared_lost(raised.value), raised.value
    assert not database.backend.conflicted(raised.value)
