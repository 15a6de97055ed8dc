"""No burst stops the scheduler (issue 46, item 0): hundreds of executions failing, being
abandoned (with and without ``on_abandon``), timing out, found undecodable, succeeding
inside their transaction or being cancelled, all at once, drain like successes do, on a
scheduler with the default configuration and the smallest pool the docs allow
(``concurrency + 5``: SQLAlchemy's default pool of 5 plus 10 overflow, for the default
concurrency of 10). Before the fix, 200 abandons at once took every connection of the pool
and every thread waiting for one more: 10 were abandoned, then nothing, ever.

A pool too small for the configuration is refused at start, saying what to set.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import anyio
import pytest
from sqlalchemy import Engine, create_engine, func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sqla_scheduler import ConfigurationError, Scheduler, one_time
from sqla_scheduler._pool import SERVICE_CONNECTIONS
from tests.support import Harness, wait_for

# the bursts: how the pool and the threads are shared is the bridge's own, one path for
# both kinds of engine; the async drivers' units run everywhere else
pytestmark = [pytest.mark.anyio, pytest.mark.databases(async_on=["postgresql"])]

#: How many executions of each kind the burst has: 200 abandons with and without an
#: ``on_abandon`` hook, the burst users met; 50 of each other kind beside them.
SIZES = {"dropped": 200, "dead-lettered": 200}
OTHERS = 50


@dataclass
class Point:
    x: int
    y: int


class Seen:
    """What the handlers and hooks saw, from whichever thread they ran in."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def add(self, what: str) -> None:
        with self._lock:
            self.counts[what] = self.counts.get(what, 0) + 1


def burst_tasks(seen: Seen, is_async: bool) -> list[Any]:
    def sync_hook(ctx: Any, session: Any) -> None:
        session.execute(text("SELECT 1"))  # on the abandon's own transaction
        seen.add(f"hook:{ctx.task_name}")

    async def async_hook(ctx: Any, session: Any) -> None:
        await session.execute(text("SELECT 1"))
        seen.add(f"hook:{ctx.task_name}")

    hook: Any = async_hook if is_async else sync_hook  # its session is of the engine's kind

    @one_time("ok")
    def ok(ctx: Any) -> None:
        seen.add("ok")

    @one_time("retried", max_retries=1)
    def retried(ctx: Any) -> None:
        if ctx.consecutive_failures == 0:
            raise RuntimeError("the card processor is down")
        seen.add("retried")  # in a slow run, the retry (30 s later) comes due in the test

    @one_time("dropped", max_retries=0)
    def dropped(ctx: Any) -> None:
        raise RuntimeError("the card processor is down")

    @one_time("dead-lettered", max_retries=0, on_abandon=hook)
    async def dead_lettered(ctx: Any) -> None:
        raise RuntimeError("the card processor is down")

    @one_time("timed-out", max_retries=0, timeout=timedelta(milliseconds=10))
    async def timed_out(ctx: Any) -> None:
        await anyio.sleep(3600)

    @one_time("typed", payload_type=Point)
    def typed(ctx: Any) -> None:
        seen.add("typed")

    if is_async:  # a transactional handler is of its engine's kind

        @one_time("in-transaction", transactional=True)
        async def in_transaction(ctx: Any) -> None:
            await ctx.session.execute(text("SELECT 1"))
            seen.add("in-transaction")

        @one_time("transaction-failed", transactional=True, max_retries=0, on_abandon=hook)
        async def transaction_failed(ctx: Any) -> None:
            await ctx.session.execute(text("SELECT 1"))
            raise RuntimeError("rolled back")

    else:

        @one_time("in-transaction", transactional=True)
        def in_transaction(ctx: Any) -> None:
            ctx.session.execute(text("SELECT 1"))
            seen.add("in-transaction")

        @one_time("transaction-failed", transactional=True, max_retries=0, on_abandon=hook)
        def transaction_failed(ctx: Any) -> None:
            ctx.session.execute(text("SELECT 1"))
            raise RuntimeError("rolled back")

    @one_time("later")
    def later(ctx: Any) -> None:
        seen.add("later")  # cancelled before its time: never runs

    return [
        ok,
        retried,
        dropped,
        dead_lettered,
        timed_out,
        typed,
        in_transaction,
        transaction_failed,
        later,
    ]


def count(db: Harness, task_name: str) -> int:
    t = db.table
    with db.sync_engine.connect() as conn:
        return int(conn.scalar(select(func.count()).where(t.c.task_name == task_name)) or 0)


def history_count(db: Harness, outcome: str) -> int:
    with db.sync_engine.connect() as conn:
        return int(
            conn.scalar(
                text("SELECT count(*) FROM scheduled_tasks_history WHERE outcome = :o"),
                {"o": outcome},
            )
            or 0
        )


@pytest.mark.slow
async def test_a_burst_of_every_outcome_drains(db: Harness) -> None:
    """Slow: 750 executions through a real loop on each database, 200 abandons with and
    without a hook among them at once; only a burst of that size fills the pool and the
    threads as users meet it."""
    seen = Seen()
    tasks = burst_tasks(seen, db.is_async)
    scheduler = db.scheduler(tasks)  # the default configuration, the harness's default pool
    by_name = {t.name: t for t in tasks}

    # "typed" instances whose payload is no Point, scheduled by a scheduler that knows the
    # task without its payload type: undecodable for the one that runs them
    @one_time("typed")
    def loosely_typed(ctx: Any) -> None:
        pass

    loose = Scheduler(db.engine, [loosely_typed])
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    instances = [
        by_name[name].instance(f"{name}-{i}")
        for name in (
            "ok",
            "retried",
            "dropped",
            "dead-lettered",
            "timed-out",
            "in-transaction",
            "transaction-failed",
        )
        for i in range(SIZES.get(name, OTHERS))
    ]
    instances += [by_name["later"].instance(f"later-{i}", at=later) for i in range(OTHERS)]
    async with db.session() as session:
        await db.resolve(scheduler.schedule_batch(session, instances))
        await db.resolve(
            loose.schedule_batch(
                session, [loosely_typed.instance(f"typed-{i}", {"z": i}) for i in range(OTHERS)]
            )
        )
        await db.commit(session)

    async def cancel_all() -> None:
        cancels = [
            scheduler.cancel(db.engine, "later", f"later-{i}") for i in range(OTHERS)
        ]  # on an async engine, coroutines to await side by side
        if db.is_async:
            async with anyio.create_task_group() as group:
                for cancel in cancels:
                    group.start_soon(db.resolve, cancel)

    with anyio.fail_after(120):
        async with scheduler:
            if db.is_async:
                await cancel_all()
            else:  # each a sync call, side by side in threads, on the application's pool
                async with anyio.create_task_group() as group:
                    for i in range(OTHERS):
                        group.start_soon(
                            anyio.to_thread.run_sync,
                            scheduler.cancel,
                            db.engine,
                            "later",
                            f"later-{i}",
                        )
            await wait_for(
                lambda: sum(count(db, name) for name in by_name if name != "retried") == 0,
                deadline=100,
            )
            # each retried one failed once: waiting for its retry, or retried and gone
            await wait_for(lambda: count(db, "retried") == count_unpicked_retries(db), 20)

    assert seen.counts.get("ok") == OTHERS
    assert seen.counts.get("in-transaction") == OTHERS
    assert seen.counts.get("hook:dead-lettered") == SIZES["dead-lettered"]
    assert seen.counts.get("hook:transaction-failed") == OTHERS
    assert "later" not in seen.counts  # cancelled before its time
    assert "typed" not in seen.counts  # undecodable: never run
    # dropped, dead-lettered, timed-out and transaction-failed: each abandoned once
    assert history_count(db, "abandoned") == 400 + 2 * OTHERS
    assert history_count(db, "undecodable") == OTHERS
    assert history_count(db, "failed") == OTHERS  # the retried ones' first attempts


def count_unpicked_retries(db: Harness) -> int:
    """The ``retried`` executions whose failure is recorded: unpicked, due again later."""
    t = db.table
    with db.sync_engine.connect() as conn:
        return int(
            conn.scalar(
                select(func.count()).where(
                    t.c.task_name == "retried",
                    t.c.picked.is_(False),
                    t.c.consecutive_failures == 1,
                )
            )
            or 0
        )


def noop_for(db: Harness, ran: threading.Event | None = None) -> Any:
    """A handler of the harness's kind (a transactional one must be), setting ``ran``."""

    async def async_noop(ctx: Any) -> None:
        if ran is not None:
            ran.set()

    def sync_noop(ctx: Any) -> None:
        if ran is not None:
            ran.set()

    return async_noop if db.is_async else sync_noop


def small_engine(db: Harness, pool_size: int) -> Engine | AsyncEngine:
    if db.is_async:
        return create_async_engine(db.url, pool_size=pool_size, max_overflow=0)
    return create_engine(db.url, pool_size=pool_size, max_overflow=0)


@pytest.mark.parametrize(
    ("transactional", "pool_size", "needed"),
    [(False, SERVICE_CONNECTIONS - 1, SERVICE_CONNECTIONS), (True, 14, 15)],
    ids=["services", "transactional"],
)
async def test_a_pool_too_small_is_refused_at_start(
    db: Harness, transactional: bool, pool_size: int, needed: int
) -> None:
    engine = small_engine(db, pool_size)
    work = one_time("work", transactional=transactional)(noop_for(db))
    scheduler = Scheduler(engine, [work])
    try:
        with pytest.raises(ConfigurationError) as refused:
            async with scheduler:
                pass
    finally:
        await db.resolve(engine.dispose())
    message = str(refused.value)
    assert f"holds at most {pool_size} connection(s)" in message
    assert f"pool_size={needed}" in message
    if transactional:
        assert "concurrency=10 transactional handlers (work)" in message


async def test_the_smallest_pool_allowed_runs(db: Harness) -> None:
    """``concurrency + 5`` with a transactional task, ``5`` without one: accepted."""
    ran = threading.Event()
    work = one_time("work", transactional=True)(noop_for(db, ran))
    engine = small_engine(db, 15)
    scheduler = Scheduler(engine, [work])
    try:
        await db.resolve(scheduler.schedule(engine, work.instance("w")))
        with anyio.fail_after(20):
            async with scheduler:
                await wait_for(ran.is_set)
    finally:
        await db.resolve(engine.dispose())


#: How many running executions the stop burst cancels at once.
RUNNING = 200


async def test_two_hundred_running_executions_cancelled_at_once_drain(db: Harness) -> None:
    """200 handlers run at once (``concurrency=200``; the rest of the configuration and
    the harness's pool are the defaults) and one transaction elsewhere cancels them all:
    each handler stops (an async one cancelled, a sync one seeing ``ctx.cancelled``), and
    every execution ends ``cancelled``, none left behind, none abandoned."""
    started, stopped = Seen(), Seen()

    async def wait_async(ctx: Any) -> None:
        started.add("started")
        try:
            await anyio.sleep(120)
        except anyio.get_cancelled_exc_class():
            stopped.add("stopped")
            raise

    def wait_sync(ctx: Any) -> None:
        started.add("started")
        if ctx.cancelled.wait(120):
            stopped.add("stopped")
        ctx.raise_if_cancelled()

    long = one_time("long", max_retries=0)(wait_async if db.is_async else wait_sync)
    scheduler = db.scheduler([long], concurrency=RUNNING)
    await db.resolve(
        scheduler.schedule_batch(db.engine, [long.instance(f"l{i}") for i in range(RUNNING)])
    )
    other = Scheduler(db.sync_engine)
    with anyio.fail_after(60):
        async with scheduler:
            await wait_for(lambda: started.counts.get("started") == RUNNING, deadline=30)

            def cancel_all() -> None:
                with db.sync_engine.begin() as conn:
                    for i in range(RUNNING):
                        assert other.cancel(conn, "long", f"l{i}") is True

            await anyio.to_thread.run_sync(cancel_all)
            await wait_for(lambda: count(db, "long") == 0, deadline=15)
    assert stopped.counts.get("stopped") == RUNNING
    assert history_count(db, "cancelled") == RUNNING
    assert history_count(db, "abandoned") == 0
