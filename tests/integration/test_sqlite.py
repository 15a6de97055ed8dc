"""What SQLite needs that PostgreSQL does not: write locks taken up front, engine settings.

The behaviour both databases share is tested through the ``db`` harness everywhere else;
the multi-process test is in ``tests/concurrency``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import Connection, Engine, create_engine, event, update
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from sqla_scheduler import ManualClock, Scheduler, SchedulerConfig, configure_sqlite, one_time
from tests.support import NOW, sqlite_file_url, wait_for

pytestmark = pytest.mark.anyio


@pytest.fixture
def url(sqlite_template: Path, tmp_path: Path) -> str:
    return sqlite_file_url(sqlite_template, tmp_path)


def _sync(engine: Engine | AsyncEngine) -> Engine:
    return engine.sync_engine if isinstance(engine, AsyncEngine) else engine


def make_engine(url: str, mode: str, **kwargs: Any) -> Engine | AsyncEngine:
    path = url.split("///", 1)[1]
    if mode == "async":
        return create_async_engine(f"sqlite+aiosqlite:///{path}", **kwargs)
    return create_engine(f"sqlite:///{path}", **kwargs)


@pytest.fixture(params=["sync", "async"])
async def engine(request: pytest.FixtureRequest, url: str) -> AsyncIterator[Engine | AsyncEngine]:
    made = make_engine(url, request.param)
    try:
        yield made
    finally:
        if isinstance(made, AsyncEngine):
            await made.dispose()
        else:
            made.dispose()


class Transactions:
    """The statements an engine sent, grouped by the transaction they ran in."""

    def __init__(self, engine: Engine | AsyncEngine) -> None:
        self.closed: list[list[str]] = []
        self._open: list[str] = []
        sync_engine = _sync(engine)
        event.listen(sync_engine, "before_cursor_execute", self._statement)
        event.listen(sync_engine, "commit", self._end)
        event.listen(sync_engine, "rollback", self._end)

    def _statement(self, conn: Connection, cursor: Any, statement: str, *args: Any) -> None:
        self._open.append(" ".join(statement.split())[:40])

    def _end(self, conn: Connection) -> None:
        if self._open:
            self.closed.append(self._open)
        self._open = []

    def writing(self) -> list[list[str]]:
        """The transactions that changed something."""
        verbs = ("INSERT", "UPDATE", "DELETE", "WITH")
        return [t for t in self.closed if any(s.upper().startswith(verbs) for s in t)]


def task_and_scheduler(engine: Engine | AsyncEngine, ran: list[str]) -> tuple[Any, Scheduler]:
    task = one_time("job")(lambda ctx: ran.append(ctx.instance_id))
    return task, Scheduler(engine, [task], clock=ManualClock(NOW))


async def schedule(scheduler: Scheduler, engine: Engine | AsyncEngine, *instances: Any) -> None:
    """The first instance through ``schedule``, the others through ``schedule_batch``."""
    first, *others = instances
    one = scheduler.schedule(engine, first)
    assert (one if isinstance(one, bool) else await one) is True
    result = scheduler.schedule_batch(engine, others)
    assert (result if isinstance(result, int) else await result) == len(others)


async def test_every_unit_of_work_of_the_scheduler_begins_immediate(
    engine: Engine | AsyncEngine,
) -> None:
    ran: list[str] = []
    task, scheduler = task_and_scheduler(engine, ran)
    await schedule(scheduler, engine, *(task.instance(f"j{i}") for i in range(3)))
    transactions = Transactions(engine)
    assert await scheduler.run_due() == 3
    await scheduler.revive_dead_executions()
    await scheduler.delete_orphans()
    assert sorted(ran) == ["j0", "j1", "j2"]
    writing = transactions.writing()
    assert len(writing) >= 4  # pick, completions, revive, orphans
    for statements in writing:
        assert statements[0] == "BEGIN IMMEDIATE", statements


async def test_a_unit_of_work_waits_for_another_writer(
    url: str, engine: Engine | AsyncEngine
) -> None:
    ran: list[str] = []
    task, scheduler = task_and_scheduler(engine, ran)
    await schedule(scheduler, engine, task.instance("waits"))
    path = url.split("///", 1)[1]
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    released = threading.Event()

    def release_soon() -> None:
        released.wait(0.3)
        other.execute("COMMIT")
        other.close()

    thread = threading.Thread(target=release_soon)
    thread.start()
    try:
        with anyio.fail_after(10):
            assert await scheduler.run_due() == 1  # waited (busy timeout) instead of failing
    finally:
        released.set()
        thread.join()
    assert ran == ["waits"]


def _begin_recipe(engine: Engine) -> None:
    """SQLAlchemy's documented recipe: the driver leaves BEGIN to SQLAlchemy."""

    @event.listens_for(engine, "connect")
    def do_connect(dbapi_connection: Any, connection_record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def do_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN")


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("setup", ["begin-recipe", "autocommit"])
async def test_the_applications_transaction_settings_are_respected(
    url: str, mode: str, setup: str
) -> None:
    kwargs = {"isolation_level": "AUTOCOMMIT"} if setup == "autocommit" else {}
    engine = make_engine(url, mode, **kwargs)
    if setup == "begin-recipe":
        _begin_recipe(_sync(engine))
    try:
        ran: list[str] = []
        task, scheduler = task_and_scheduler(engine, ran)
        await schedule(scheduler, engine, task.instance("a"), task.instance("b"))
        transactions = Transactions(engine)
        assert await scheduler.run_due() == 2
        assert sorted(ran) == ["a", "b"]
        # With the recipe, its BEGIN opens a transaction that is ended at once, unused.
        prelude = ["BEGIN", "ROLLBACK"] if setup == "begin-recipe" else []
        writing = transactions.writing()
        assert writing
        for statements in writing:
            assert statements[: len(prelude) + 1] == [*prelude, "BEGIN IMMEDIATE"], statements
        left = scheduler.executions(engine)
        assert (left if isinstance(left, list) else await left) == []
    finally:
        if isinstance(engine, AsyncEngine):
            await engine.dispose()
        else:
            engine.dispose()


def _pragmas(conn: Connection) -> tuple[str, int]:
    mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar_one()
    timeout = conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one()
    return mode, timeout


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_configure_sqlite_sets_wal_and_busy_timeout(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "fresh.db"
    sqlite3.connect(path).close()
    url = f"sqlite:///{path}"
    engine = make_engine(url, mode)
    assert configure_sqlite(engine, busy_timeout=timedelta(seconds=12)) is engine
    try:
        if isinstance(engine, AsyncEngine):
            async with engine.connect() as conn:
                found = await conn.run_sync(_pragmas)
        else:
            with engine.connect() as sync_conn:
                found = _pragmas(sync_conn)
        assert found == ("wal", 12_000)
    finally:
        if isinstance(engine, AsyncEngine):
            await engine.dispose()
        else:
            engine.dispose()
    # WAL is a property of the file: a plain connection sees it too.
    with sqlite3.connect(path) as plain:
        assert plain.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    plain.close()


def test_configure_sqlite_leaves_other_databases_alone() -> None:
    engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    before = len(engine.pool.dispatch.connect)
    assert configure_sqlite(engine) is engine
    assert len(engine.pool.dispatch.connect) == before
    engine.dispose()


def test_configure_sqlite_refuses_a_negative_timeout() -> None:
    engine = create_engine("sqlite://")
    with pytest.raises(ValueError, match="busy_timeout"):
        configure_sqlite(engine, busy_timeout=timedelta(seconds=-1))
    engine.dispose()


async def test_reviving_dead_executions_a_thousand_keys_at_a_time(
    engine: Engine | AsyncEngine,
) -> None:
    ran: list[str] = []
    task, scheduler = task_and_scheduler(engine, ran)
    await schedule(scheduler, engine, *(task.instance(f"d{i}") for i in range(2500)))
    table = scheduler.table
    with _sync_engine_for(engine).begin() as conn:
        conn.execute(
            update(table).values(
                picked=True, picked_by="crashed", last_heartbeat=NOW - timedelta(hours=1)
            )
        )
    revived = await scheduler.revive_dead_executions()
    assert len(revived) == 2500
    assert {(e.picked, e.picked_by, e.last_heartbeat) for e in revived} == {
        (True, "crashed", NOW - timedelta(hours=1))
    }
    assert {e.version for e in revived} == {2}
    assert {e.instance_id for e in revived} == {f"d{i}" for i in range(2500)}


def _sync_engine_for(engine: Engine | AsyncEngine) -> Engine:
    """A separate sync engine on ``engine``'s file, to arrange rows the way a test wants."""
    path = str(engine.url.database)
    return create_engine(f"sqlite:///{path}", poolclass=NullPool)


async def test_a_long_lived_connection_keeps_one_commit_listener(url: str) -> None:
    """Each commit wakes the running scheduler; the connection gains no listener per call."""
    engine = create_engine(url)
    ran: list[str] = []
    task = one_time("job")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = Scheduler(engine, [task], SchedulerConfig(polling_interval=timedelta(minutes=5)))
    try:
        async with scheduler:
            with engine.connect() as conn:
                for i in range(5):
                    assert scheduler.schedule(conn, task.instance(f"c{i}")) is True
                    conn.commit()
                    await wait_for(lambda i=i: len(ran) == i + 1, deadline=10)  # woken
                scheduler.schedule(conn, task.instance("rolled-back"))
                conn.rollback()
                assert (len(conn.dispatch.commit), len(conn.dispatch.rollback)) == (1, 1)
    finally:
        engine.dispose()
    assert sorted(ran) == [f"c{i}" for i in range(5)]
