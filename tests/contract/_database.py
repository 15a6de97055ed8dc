"""One test's database for the contract suite: its engine, its ``Backend`` and statements,
and a few ways to put rows in and read them back that go around the operations tested.

Plain module (the fixture that makes one is in ``conftest.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

import pytest
from sqlalchemy import Connection, Engine, Table, create_engine, insert, make_url, select

from sqla_scheduler._dialects import Backend, backend_for, known_backend
from sqla_scheduler._statements import Statements, statements_for
from sqla_scheduler.models import table_for

__all__ = [
    "CUT_SHORT",
    "DATABASES",
    "NOW",
    "NO_WAITING",
    "Database",
    "backend_named",
    "databases",
    "later",
    "row",
]

T = TypeVar("T")

#: The time every test pretends it is: microseconds included, so that a database that
#: keeps whole seconds shows.
NOW = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)

#: The databases every contract test runs on, unless it says otherwise (``databases``).
DATABASES = ("postgresql", "sqlite", "mariadb")

#: How a session's lock waits end in an error rather than go on, for a test that expects
#: none: at once, or as soon as the database can tell. MariaDB's least is a second: at 0,
#: its SKIP LOCKED fails ("Got error 1 during COMMIT") though nothing waits.
NO_WAITING = {
    "postgresql": "SET lock_timeout = '1ms'",
    "mariadb": "SET SESSION innodb_lock_wait_timeout = 1",
    "sqlite": "PRAGMA busy_timeout = 0",
}
#: How a session's statements that wait for a lock fail soon, for a test that expects
#: each of them to wait: on MariaDB any statement is cut short after 0.2 s.
CUT_SHORT = {**NO_WAITING, "mariadb": "SET SESSION max_statement_time = 0.2"}


def backend_named(name: str) -> Backend:
    """The ``Backend`` of the database ``name`` (one of ``DATABASES``), unconnected."""
    found = known_backend(make_url(f"{name}://"))
    assert found is not None, name
    return found


def databases(
    where: Callable[[Backend], object] = lambda backend: True,
    why: str = "",
    *,
    xfail: Mapping[str, str] | None = None,
) -> pytest.MarkDecorator:
    """Run a test on the databases whose ``Backend`` is ``where``: the others are skipped
    saying ``why``, before a database is made for them; those named in ``xfail`` are
    expected to fail (strictly) for the reason given."""
    params = []
    for name in DATABASES:
        marks: list[pytest.MarkDecorator] = []
        if not where(backend_named(name)):
            marks.append(pytest.mark.skip(reason=f"{name}: {why}"))
        if xfail and name in xfail:
            marks.append(pytest.mark.xfail(strict=True, reason=xfail[name]))
        params.append(pytest.param(name, marks=marks, id=name))
    return pytest.mark.parametrize("database", params, indirect=True)


def row(task: str, instance: str, at: datetime = NOW, **values: Any) -> dict[str, Any]:
    """A row of the scheduler's table: ``task``/``instance`` due ``at``, unpicked, with
    ``values`` over the defaults."""
    return {
        "task_name": task,
        "task_instance": instance,
        "task_data": None,
        "execution_time": at,
        "priority": 0,
        "schedule": None,
        "trace_context": None,
        "payload_version": 1,
        **values,
    }


@dataclass
class Database:
    """A fresh, migrated database of one kind (``name``) for one test."""

    name: str
    url: str
    engine: Engine
    backend: Backend = field(init=False)
    #: The scheduler's table, as ``Scheduler`` builds it by default.
    table: Table = field(init=False)
    statements: Statements = field(init=False)
    _engines: list[Engine] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.backend = backend_for(self.engine.dialect)
        self.table = table_for()
        self.statements = statements_for(self.table, self.backend)

    def connect(self) -> Connection:
        """A connection as the scheduler's own units of work have it (the backend's
        isolation level: ``_bridge``). Close it (``with``)."""
        conn = self.engine.connect()
        if self.backend.isolation_level is not None:
            conn.execution_options(isolation_level=self.backend.isolation_level)
        return conn

    def no_waiting(self, conn: Connection, settings: Mapping[str, str] = NO_WAITING) -> Connection:
        """``conn``, its lock waits failing rather than waiting (``NO_WAITING``, or
        ``CUT_SHORT``)."""
        conn.exec_driver_sql(settings[self.name])
        conn.commit()
        return conn

    def other_engine(self, **connect_args: Any) -> Engine:
        """Another engine on this database (with driver arguments ``connect_args``),
        disposed with the test's."""
        engine = create_engine(self.url, connect_args=connect_args)
        self._engines.append(engine)
        return engine

    def run(self, fn: Callable[[Connection], T]) -> T:
        """``fn`` as one of the scheduler's units of work (``Backend.unit_of_work``) on a
        connection of its own, committed."""
        with self.connect() as conn:
            result = self.backend.unit_of_work(fn)(conn)
            conn.commit()
        return result

    @contextmanager
    def unit(self, conn: Connection) -> Iterator[Connection]:
        """A unit of work opened on ``conn`` (``Backend.begin``), left open for the test
        to commit or roll back: for interleaving two connections' transactions."""
        yield self.backend.unit_of_work(lambda c: c)(conn)

    def put(self, *rows: dict[str, Any]) -> None:
        """Insert ``rows`` into the scheduler's table with plain INSERTs, committed."""
        with self.engine.begin() as conn:
            for values in rows:  # one by one: each names its own columns
                conn.execute(insert(self.table), values)

    def raw(self, sql: str, **params: Any) -> None:
        """Run ``sql`` (the database's own dialect) and commit: for values the scheduler
        would never write."""
        with self.engine.begin() as conn:
            conn.exec_driver_sql(sql, params) if params else conn.exec_driver_sql(sql)

    def rows(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Every row of the scheduler's table as the model types it, by key."""
        with self.engine.connect() as conn:
            found = conn.execute(select(self.table)).mappings().all()
        return {(r["task_name"], r["task_instance"]): dict(r) for r in found}

    def one(self, task: str, instance: str) -> dict[str, Any]:
        return self.rows()[task, instance]

    def picked(self) -> set[tuple[str, str]]:
        """The keys of the picked rows."""
        return {key for key, values in self.rows().items() if values["picked"]}

    def checked_out(self) -> int:
        return int(self.engine.pool.checkedout())  # type: ignore[attr-defined]

    def dispose(self) -> None:
        for engine in [self.engine, *self._engines]:
            engine.dispose()


def later(seconds: float) -> datetime:
    """``NOW`` plus ``seconds``."""
    return NOW + timedelta(seconds=seconds)
