"""A scheduling call made with an async session or connection but never awaited does not
let the business transaction commit quietly without the work it asked for.

With an ``AsyncSession`` or ``AsyncConnection``, ``schedule`` and the other calls that write
return a coroutine, and nothing is written until it is awaited. Forgetting ``await`` used to
commit the business write alone, the only sign a warning about ``AsyncSession.run_sync``.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable, Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from sqla_scheduler import FixedDelay, ManualClock, NotAwaitedError, Scheduler, one_time, recurring
from tests.support import NOW, async_mariadb_url, sqlite_file_url

pytestmark = pytest.mark.anyio

FORGOT = "did you forget await"

orders = Table("orders", MetaData(), Column("id", Integer, primary_key=True))


@one_time("send-email")
def send_email(ctx: Any) -> None:
    pass


@recurring("report", FixedDelay(timedelta(hours=1)))
def report(ctx: Any) -> None:
    pass


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """An async engine on a migrated database with an ``orders`` table for business writes."""
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_url").replace("+psycopg:", "+psycopg_async:")
    elif request.param == "mariadb":
        url = async_mariadb_url(request.getfixturevalue("mariadb_url"))
    else:
        url = sqlite_file_url(request.getfixturevalue("sqlite_template"), tmp_path, "aiosqlite")
    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.run_sync(orders.metadata.create_all)
    try:
        yield engine
    finally:
        async with engine.begin() as conn:
            await conn.run_sync(orders.metadata.drop_all)
        await engine.dispose()


def scheduler_on(engine: AsyncEngine) -> Scheduler:
    return Scheduler(engine, [send_email, report], clock=ManualClock(NOW))


async def counts(engine: AsyncEngine) -> tuple[int, int]:
    """How many orders and executions of send-email are committed."""
    scheduler = scheduler_on(engine)
    async with engine.connect() as conn:
        n_orders = await conn.scalar(select(func.count()).select_from(orders))
        n_runs = await conn.scalar(
            select(func.count())
            .select_from(scheduler.table)
            .where(scheduler.table.c.task_name == "send-email")
        )
    return int(n_orders or 0), int(n_runs or 0)


async def test_a_session_that_commits_without_awaiting_schedule_raises_and_writes_nothing(
    engine: AsyncEngine,
) -> None:
    scheduler = scheduler_on(engine)
    async with AsyncSession(engine) as session:
        await session.execute(orders.insert().values(id=1))
        pending = scheduler.schedule(session, send_email.instance("u1"))  # no await
        with pytest.raises(
            RuntimeError, match=rf"schedule\(task 'send-email', instance 'u1'\).*{FORGOT}"
        ):
            await session.commit()
        also = scheduler.cancel(session, "send-email", "u0")
        with pytest.raises(NotAwaitedError, match=rf"{FORGOT}.*\(and 1 more call not awaited\)"):
            await session.commit()  # a second try does not slip through
        await session.rollback()
        pending.close()
        also.close()
        assert await counts(engine) == (0, 0)
        # the transaction that ended took the refusal with it: the next one commits
        later = scheduler.schedule(session, send_email.instance("u2"))
        await session.execute(orders.insert().values(id=2))
        assert await later is True  # awaited before the commit, however late
        await session.commit()
    assert await counts(engine) == (1, 1)


async def test_a_session_begin_block_rolls_back_when_a_call_was_not_awaited(
    engine: AsyncEngine,
) -> None:
    scheduler = scheduler_on(engine)
    pending: list[Coroutine[Any, Any, Any]] = []

    async def order_and_forget() -> None:
        async with AsyncSession(engine) as session, session.begin():
            await session.execute(orders.insert().values(id=1))
            batch = [send_email.instance("a"), send_email.instance("b")]
            pending.append(scheduler.schedule_batch(session, batch))

    with pytest.raises(NotAwaitedError, match=rf"schedule_batch\(task 'send-email'.*{FORGOT}"):
        await order_and_forget()
    pending[0].close()
    assert await counts(engine) == (0, 0)


async def test_a_connection_that_commits_without_awaiting_a_call_raises_and_writes_nothing(
    engine: AsyncEngine,
) -> None:
    scheduler = scheduler_on(engine)
    pending: list[Coroutine[Any, Any, Any]] = []

    async def order_and_forget() -> None:
        async with engine.begin() as conn:
            await conn.execute(orders.insert().values(id=1))
            pending.append(scheduler.schedule(conn, send_email.instance("u1")))

    with pytest.raises(NotAwaitedError, match=rf"schedule\(task 'send-email'.*{FORGOT}"):
        await order_and_forget()
    pending[0].close()
    assert await counts(engine) == (0, 0)
    # a rollback takes the refusal with it; awaited, the call commits with the order
    async with engine.connect() as conn:
        await conn.execute(orders.insert().values(id=2))
        forgotten = scheduler.schedule(conn, send_email.instance("u2"))
        await conn.rollback()
        forgotten.close()
        await conn.execute(orders.insert().values(id=3))
        assert await scheduler.schedule(conn, send_email.instance("u3")) is True
        await conn.commit()
    assert await counts(engine) == (1, 1)


CALLS: dict[str, Callable[[Scheduler, Any], Any]] = {
    "schedule": lambda s, t: s.schedule(t, send_email.instance("x")),
    "schedule_batch": lambda s, t: s.schedule_batch(t, [send_email.instance("x")]),
    "cancel": lambda s, t: s.cancel(t, "send-email", "x"),
    "reschedule": lambda s, t: s.reschedule(t, "send-email", "x", at=NOW),
    "run_now": lambda s, t: s.run_now(t, "report"),
    "pause": lambda s, t: s.pause(t, "send-email"),
    "resume": lambda s, t: s.resume(t, "send-email"),
    "requeue": lambda s, t: s.requeue(t, 1),
}


async def test_every_call_that_writes_refuses_the_commit_until_awaited(
    sqlite_template: Path, tmp_path: Path
) -> None:
    """Each call that writes, on SQLite alone: the path is the same on every database."""
    engine = create_async_engine(sqlite_file_url(sqlite_template, tmp_path, "aiosqlite"))
    scheduler = scheduler_on(engine)
    try:
        for name, call in CALLS.items():
            async with AsyncSession(engine) as session:
                pending = call(scheduler, session)
                with pytest.raises(NotAwaitedError, match=rf"without {name}\(.*{FORGOT}"):
                    await session.commit()
                await session.rollback()
                pending.close()
                # awaited, the same call lets the transaction commit
                await call(scheduler, session)
                await session.commit()
    finally:
        await engine.dispose()


async def test_a_call_never_awaited_is_named_when_python_warns_of_it(tmp_path: Path) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'warn.db'}")
    try:
        async with AsyncSession(engine) as session:
            scheduler = scheduler_on(engine)

            def forget() -> None:
                scheduler.schedule(session, send_email.instance("u1"))  # type: ignore[unused-coroutine]
                scheduler.schedule(engine, send_email.instance("u2"))  # type: ignore[unused-coroutine]
                gc.collect()

            with pytest.warns(
                RuntimeWarning, match="coroutine 'Scheduler.schedule' was never"
            ) as seen:
                forget()
            never = "coroutine 'Scheduler.schedule' was never awaited"
            assert [str(w.message) for w in seen] == [never, never]  # a session's, an engine's
    finally:
        await engine.dispose()
