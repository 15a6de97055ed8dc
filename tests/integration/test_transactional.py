"""Transactional handlers: ``ctx.session`` shares the transaction that records the outcome,
so the handler's writes commit if and only if its success is recorded. Crashes (``kill
-9`` between the write and the commit) are in tests/faults/test_transactional_crashes.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import anyio
import pytest
from sqlalchemy import String, create_engine, func, select, update
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

from sqla_scheduler import (
    ManualClock,
    OneTimeTask,
    Scheduler,
    SchedulerConfig,
    TaskDefinitionError,
    configure_sqlite,
    custom,
    one_time,
)
from sqla_scheduler.tasks import NextAt
from tests.support import NOW, Harness, services, wait_for

pytestmark = pytest.mark.anyio


class Base(DeclarativeBase):
    pass


class Effect(Base):
    """A row of the application's own, written by handlers."""

    __tablename__ = "effects"
    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    note: Mapped[str] = mapped_column(String(100), default="")


@pytest.fixture
def app(db: Harness) -> Iterator[Harness]:
    Base.metadata.create_all(db.sync_engine)
    yield db
    Base.metadata.drop_all(db.sync_engine)


def effects(db: Harness) -> list[str]:
    with db.sync_engine.connect() as conn:
        return sorted(conn.scalars(select(Effect.key)))


def writer(db: Harness, fail: bool = False, wait: anyio.Event | None = None) -> Any:
    """A handler of the engine's kind that adds an ``Effect`` through ``ctx.session``."""

    def add(ctx: Any) -> None:
        ctx.session.add(Effect(key=ctx.instance_id, note=ctx.session.info.get("note", "")))
        if fail:
            raise RuntimeError("boom")

    if not db.is_async:
        return add

    async def handler(ctx: Any) -> None:
        await ctx.session.flush()  # the session is an AsyncSession: awaited I/O works
        add(ctx)
        if wait is not None:
            await wait.wait()

    return handler


async def _rolled_back(
    app: Harness, clock: ManualClock, task: OneTimeTask[Any]
) -> tuple[int, dict[str, Any]]:
    """Run ``task``'s instance ``a`` once, and assert its writes were rolled back and its
    row is still in the table: how many executions ran, and that row."""
    scheduler = app.scheduler([task], clock)
    await app.resolve(scheduler.schedule(app.engine, task.instance("a")))
    ran = await scheduler.run_due()
    assert effects(app) == []
    row = app.row(task.name, "a")
    assert row is not None
    return ran, row


async def test_the_writes_commit_with_the_recorded_success(app: Harness, clock: ManualClock):
    task = one_time("charge", transactional=True)(writer(app))
    scheduler = app.scheduler([task], clock)
    await app.resolve(
        scheduler.schedule_batch(app.engine, [task.instance("a"), task.instance("b")])
    )
    assert await scheduler.run_due() == 2
    assert effects(app) == ["a", "b"]
    assert app.count() == 0  # and the executions are done: both committed together


async def test_a_failure_rolls_the_writes_back_and_retries(app: Harness, clock: ManualClock):
    failing = one_time("charge", transactional=True)(writer(app, fail=True))
    ran, row = await _rolled_back(app, clock, failing)
    assert ran == 1
    assert row["consecutive_failures"] == 1
    assert "RuntimeError: boom" in row["last_error"]

    # the next attempt succeeds: the effect exists once
    fixed = one_time("charge", transactional=True)(writer(app))
    clock.advance(timedelta(hours=1))
    assert await app.scheduler([fixed], clock).run_due() == 1
    assert effects(app) == ["a"]
    assert app.count() == 0


async def test_follow_ups_and_a_new_payload_commit_in_the_same_transaction(
    app: Harness, clock: ManualClock
):
    follow = one_time("follow")(lambda ctx: None)
    base = writer(app)

    def again(ctx: Any) -> Any:
        ctx.schedule(follow.instance(f"after-{ctx.instance_id}"))
        return NextAt(NOW + timedelta(days=1), {"round": 2})

    if app.is_async:

        async def handler(ctx: Any) -> Any:
            await base(ctx)
            return again(ctx)
    else:

        def handler(ctx: Any) -> Any:
            base(ctx)
            return again(ctx)

    task = custom("poll", transactional=True)(handler)
    scheduler = app.scheduler([task, follow], clock)
    await app.resolve(scheduler.schedule(app.engine, task.instance("p", {"round": 1})))
    assert await scheduler.run_due() == 2  # the poll, then the follow-up it scheduled
    assert effects(app) == ["p"]
    row = app.row("poll", "p")
    assert row is not None
    assert row["execution_time"] == NOW + timedelta(days=1)
    assert row["task_data"] == {"round": 2}


async def test_the_applications_session_factory_makes_the_session(app: Harness, clock: ManualClock):
    task = one_time("charge", transactional=True)(writer(app))
    factory: Any = (async_sessionmaker if app.is_async else sessionmaker)(info={"note": "mine"})
    scheduler = Scheduler(
        app.engine,
        [task],
        SchedulerConfig(scheduler_name="test-worker"),
        clock=clock,
        session_factory=factory,
    )
    await app.resolve(scheduler.schedule(app.engine, task.instance("a")))
    assert await scheduler.run_due() == 1
    with app.sync_engine.connect() as conn:
        assert conn.scalar(select(Effect.note)) == "mine"


async def test_a_commit_by_the_handler_only_flushes(app: Harness, clock: ManualClock):
    """The outcome's transaction is the scheduler's: a handler's own commit cannot let its
    writes out before its success is recorded."""

    def commit_then_fail(ctx: Any) -> Any:
        ctx.session.add(Effect(key=ctx.instance_id))
        result = ctx.session.commit()
        if app.is_async:

            async def then() -> None:
                await result
                raise RuntimeError("after the commit")

            return then()
        raise RuntimeError("after the commit")

    if app.is_async:

        async def handler(ctx: Any) -> None:
            await commit_then_fail(ctx)
    else:
        handler = commit_then_fail  # type: ignore[assignment]

    task = one_time("charge", transactional=True)(handler)
    _, row = await _rolled_back(app, clock, task)
    assert row["consecutive_failures"] == 1


async def test_a_taken_over_execution_rolls_the_writes_back(app: Harness, clock: ManualClock):
    if app.is_sqlite:
        pytest.skip(
            "on SQLite the handler's transaction holds the write lock: no one can take its "
            "execution over until it ends"
        )

    def take_over(ctx: Any) -> None:
        # another scheduler revives the execution and runs it: its version moves on
        with app.sync_engine.begin() as conn:
            conn.execute(update(app.table).values(version=app.table.c.version + 1))

    if app.is_async:
        base = writer(app)

        async def handler(ctx: Any) -> None:
            await base(ctx)
            await anyio.to_thread.run_sync(take_over, ctx)
    else:

        def handler(ctx: Any) -> None:
            writer(app)(ctx)
            take_over(ctx)

    task = one_time("charge", transactional=True)(handler)
    # the owner now is the other scheduler: its run counts; this one recorded nothing
    await _rolled_back(app, clock, task)


async def test_a_timeout_rolls_the_writes_back(app: Harness, clock: ManualClock):
    if not app.is_async:
        pytest.skip(
            "a sync handler's timeout is a signal it polls: tests/integration/test_timeout.py"
        )
    never = anyio.Event()
    task = one_time("charge", transactional=True, timeout=0.2)(writer(app, wait=never))
    _, row = await _rolled_back(app, clock, task)
    assert "timed out" in row["last_error"]


def test_a_pairing_that_cannot_work_is_refused_when_the_scheduler_is_built() -> None:
    sync_engine = create_engine("sqlite://")
    async_engine = create_async_engine("sqlite+aiosqlite://")

    async def async_handler(ctx: Any) -> None: ...

    sync_task = one_time("sync-tx", transactional=True)(lambda ctx: None)
    async_task = one_time("async-tx", transactional=True)(async_handler)
    with pytest.raises(
        TaskDefinitionError,
        match=r"task 'sync-tx': transactional=True pairs a sync handler with a sync Engine .* "
        r"this task has a sync handler and the scheduler an AsyncEngine",
    ):
        Scheduler(async_engine, [sync_task])
    with pytest.raises(
        TaskDefinitionError,
        match=r"task 'async-tx': .* this task has an async handler and the scheduler a sync Engine",
    ):
        Scheduler(sync_engine, [async_task])
    with pytest.raises(
        TypeError, match=r"session_factory must be a async_sessionmaker with an AsyncEngine"
    ):
        Scheduler(async_engine, [async_task], session_factory=sessionmaker())  # type: ignore[arg-type]
    with pytest.raises(
        TaskDefinitionError, match=r"task 'x': transactional must be True or False, got 'yes'"
    ):
        one_time("x", transactional="yes")(lambda ctx: None)  # type: ignore[arg-type]
    # the pairings that work
    Scheduler(sync_engine, [sync_task], session_factory=sessionmaker())
    Scheduler(async_engine, [async_task], session_factory=async_sessionmaker())
    # a task without transactional=True pairs with either
    Scheduler(async_engine, [one_time("plain")(lambda ctx: None)])
    sync_engine.dispose()


async def test_a_stop_rolls_the_writes_of_an_unfinished_handler_back(app: Harness):
    """The handler is still running when the stop's grace is up: its transaction ends
    without a commit and its execution is released for another run. A sync handler cannot
    be stopped: its thread closes the transaction when it returns, not the loop meanwhile."""
    if app.is_sqlite and not app.is_async:
        pytest.skip("the release waits for the SQLite write lock the running handler holds")
    wrote = threading.Event()
    let_go = threading.Event()
    still: list[int] = []

    def stubborn(ctx: Any) -> None:
        ctx.session.add(Effect(key=ctx.instance_id))
        ctx.session.flush()
        wrote.set()
        let_go.wait(30)  # ignores ctx.shutdown
        # its session is still its own: nobody closed it under it
        still.append(ctx.session.scalar(select(func.count()).select_from(Effect)))

    async def stubborn_async(ctx: Any) -> None:
        ctx.session.add(Effect(key=ctx.instance_id))
        await ctx.session.flush()
        wrote.set()
        await anyio.Event().wait()  # until cancelled

    task = one_time("charge", transactional=True)(stubborn_async if app.is_async else stubborn)
    scheduler = app.scheduler(
        [task],
        polling_interval=timedelta(milliseconds=20),
        shutdown_max_wait=timedelta(milliseconds=300),
    )
    await app.resolve(scheduler.schedule(app.engine, task.instance("a")))
    async with scheduler:
        await wait_for(wrote.is_set)
    released = app.row("charge", "a")
    assert released is not None
    assert (released["picked"], released["picked_by"]) == (False, None)
    let_go.set()
    await wait_for(lambda: app.checked_out() == 0)  # the thread closed the transaction
    assert effects(app) == []
    assert still == ([] if app.is_async else [1])


async def test_a_transaction_that_cannot_begin_hands_the_execution_back(
    sqlite: Harness, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Its handler never ran: the execution is handed back (no failure counted) to run
    again, not left picked until it is revived as dead (issue 46: under a burst on a busy
    machine, SQLite's write lock was not to be had within the busy timeout; a BEGIN waits
    for that lock on SQLite alone)."""
    app = sqlite
    Base.metadata.create_all(app.sync_engine)
    engine = configure_sqlite(create_engine(app.url), busy_timeout=timedelta(milliseconds=100))
    task = one_time("charge", transactional=True)(writer(app))
    scheduler = Scheduler(engine, [task], SchedulerConfig(scheduler_name="w"), clock=clock)
    scheduler.schedule(engine, task.instance("a"))
    try:
        async with services(scheduler) as runner:
            [held] = await runner.picker.run_once()
            with app.sync_engine.connect() as holder:
                holder.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock, held
                outcome = await runner.executor.run_once(held)
                holder.rollback()
            assert outcome.decision is not None
            assert outcome.decision.kind == "release"
            runner.completer.submit(outcome)
            await runner.completer.run_once()
        row = app.row("charge", "a")
        assert row is not None
        assert (row["picked"], row["consecutive_failures"]) == (False, 0)
        assert "charge/a: its transaction could not begin" in caplog.text
        assert await scheduler.run_due() == 1
        assert effects(app) == ["a"]
    finally:
        engine.dispose()
