"""Stop a running execution, on every database: ``cancel`` from another engine (as another
process would) reaches the running loop within a second of its commit (NOTIFY on
PostgreSQL, the loop's own read elsewhere); an async handler is cancelled, a sync one sees
``ctx.cancelled`` (``ctx.raise_if_cancelled()`` raises); a transactional handler's writes
are rolled back; the execution ends ``cancelled`` in history, in its kept result and in
its group's counts, and no ``on_abandon`` runs. A handler that ignores the request is
recorded ``cancelled`` after ``cancel_grace`` and what it returns later is discarded. The
handlers are held by events; the tests wait for what they observe, never for a time."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import anyio
import pytest
from sqlalchemy import String, func, select, text, update
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from sqla_scheduler import ExecutionCancelled, HistoryEntry, ManualClock, Scheduler, one_time
from sqla_scheduler.testing import build_context
from tests.support import Harness, wait_for
from tests.support.clocks import NOW

pytestmark = pytest.mark.anyio

#: How soon a stop must reach the handler after the request's commit.
WITHIN = 1.0


class Base(DeclarativeBase):
    pass


class Note(Base):
    """A row of the application's own, written by a transactional handler."""

    __tablename__ = "stop_notes"
    key: Mapped[str] = mapped_column(String(100), primary_key=True)


@pytest.fixture
def app(db: Harness) -> Iterator[Harness]:
    Base.metadata.create_all(db.sync_engine)
    yield db
    Base.metadata.drop_all(db.sync_engine)


class Seen:
    """What the handlers saw, from whichever thread they ran in."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        #: When each handler stopped (``time.monotonic``), and how.
        self.stopped: dict[str, tuple[float, str]] = {}
        self.abandoned: list[str] = []

    def stop(self, instance_id: str, how: str) -> None:
        self.stopped.setdefault(instance_id, (time.monotonic(), how))


def stoppable(seen: Seen, kind: str, name: str = "long", **options: Any) -> Any:
    """A task whose handler runs until it is stopped: an async one waits to be cancelled,
    a sync one polls ``ctx.cancelled`` and raises with ``raise_if_cancelled``."""

    async def wait_async(ctx: Any) -> None:
        seen.started.set()
        try:
            await anyio.sleep(120)
        except anyio.get_cancelled_exc_class():
            seen.stop(ctx.instance_id, "cancelled")
            raise

    def wait_sync(ctx: Any) -> None:
        seen.started.set()
        deadline = time.monotonic() + 120
        while not ctx.cancelled.wait(0.005) and time.monotonic() < deadline:
            pass
        seen.stop(ctx.instance_id, "saw ctx.cancelled")
        ctx.raise_if_cancelled()

    def on_abandon(ctx: Any, session: Any) -> None:
        seen.abandoned.append(ctx.instance_id)

    handler = wait_async if kind == "async" else wait_sync
    return one_time(name, on_abandon=on_abandon, **options)(handler)


async def cancel_elsewhere(db: Harness, task_name: str, instance_id: str) -> float:
    """``cancel`` through another engine, as another process would; returns when its
    transaction committed (``time.monotonic``)."""
    other = Scheduler(db.sync_engine)
    assert await anyio.to_thread.run_sync(other.cancel, db.sync_engine, task_name, instance_id)
    return time.monotonic()


async def history(db: Harness, scheduler: Scheduler, task_name: str) -> list[HistoryEntry]:
    found: list[HistoryEntry] = await db.resolve(scheduler.history(db.engine, task_name=task_name))
    return found


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_running_handler_stops_within_a_second_of_a_cancel_from_elsewhere(
    db: Harness, kind: str
) -> None:
    seen = Seen()
    task = stoppable(seen, kind, max_retries=3)
    scheduler = db.scheduler([task], polling_interval=timedelta(milliseconds=50))
    await db.resolve(scheduler.schedule(db.engine, task.instance("a")))
    async with scheduler:
        await wait_for(seen.started.is_set)
        committed = await cancel_elsewhere(db, "long", "a")
        await wait_for(lambda: "a" in seen.stopped)
        await wait_for(lambda: db.row("long", "a") is None)
    stopped_at, how = seen.stopped["a"]
    assert how == ("cancelled" if kind == "async" else "saw ctx.cancelled")
    assert stopped_at - committed < WITHIN
    [entry] = await history(db, scheduler, "long")
    assert entry.outcome == "cancelled"
    assert entry.started_at is not None
    assert (entry.error or "").startswith("cancelled")
    assert seen.abandoned == []


@pytest.mark.parametrize("history_setting", ["failures", "all", "none"])
async def test_a_stop_is_no_failure_and_no_abandon_whatever_the_history(
    db: Harness, history_setting: str
) -> None:
    """A stopped execution with retries spent (``max_retries=0``) is not abandoned: the
    stop is no failure of the attempt."""
    seen = Seen()
    task = stoppable(seen, "async" if db.is_async else "sync", max_retries=0)
    scheduler = db.scheduler([task], history=history_setting)
    await db.resolve(scheduler.schedule(db.engine, task.instance("a")))
    async with scheduler:
        await wait_for(seen.started.is_set)
        await cancel_elsewhere(db, "long", "a")
        await wait_for(lambda: db.row("long", "a") is None)
    outcomes = [e.outcome for e in await history(db, scheduler, "long")]
    assert outcomes == ([] if history_setting == "none" else ["cancelled"])
    assert seen.abandoned == []


async def test_a_transactional_handler_is_rolled_back(app: Harness) -> None:
    """On PostgreSQL and MariaDB from another engine; on SQLite, whose running
    transactional handler holds the one write lock a cancel from elsewhere would wait for,
    the loop's own process asks (the request reaches the handler as it starts)."""
    db = app
    seen = Seen()

    async def note_async(ctx: Any) -> None:
        try:  # asked to stop as it starts (SQLite), it is cancelled at its first wait
            ctx.session.add(Note(key=ctx.instance_id))
            await ctx.session.flush()
            seen.started.set()
            await anyio.sleep(120)
        except anyio.get_cancelled_exc_class():
            seen.stop(ctx.instance_id, "cancelled")
            raise

    def note_sync(ctx: Any) -> None:
        ctx.session.add(Note(key=ctx.instance_id))
        ctx.session.flush()
        seen.started.set()
        while not ctx.cancelled.wait(0.005):
            pass
        seen.stop(ctx.instance_id, "saw ctx.cancelled")
        # it returns as if it succeeded: a stopped execution commits nothing all the same

    handler = note_async if db.is_async else note_sync
    task = one_time("note", transactional=True)(handler)
    scheduler = db.scheduler([task], polling_interval=timedelta(milliseconds=50))
    await db.resolve(scheduler.schedule(db.engine, task.instance("n1")))
    if db.is_sqlite:
        assert await _run_due_stopping(db, scheduler, ("note", "n1")) == 1
    else:
        async with scheduler:
            await wait_for(seen.started.is_set)
            await cancel_elsewhere(db, "note", "n1")
            await wait_for(lambda: db.row("note", "n1") is None)
    assert "n1" in seen.stopped
    with db.sync_engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(Note)) == 0
    assert [e.outcome for e in await history(db, scheduler, "note")] == ["cancelled"]


async def _run_due_stopping(db: Harness, scheduler: Scheduler, key: tuple[str, str]) -> int:
    """``run_due`` with a stop request for ``key`` as its handler starts."""
    ran: int = await scheduler._make_runner().run_due(stop={key})
    return ran


async def test_the_kept_result_and_the_group_count_the_stop_as_cancelled(db: Harness) -> None:
    seen = Seen()
    kind = "async" if db.is_async else "sync"
    long = stoppable(seen, kind, keep_result=True)
    quick = one_time("quick", keep_result=True)(lambda ctx: {"done": ctx.instance_id})
    callback_saw: dict[str, str] = {}

    @one_time("then")
    def then(ctx: Any) -> None:
        assert ctx.group is not None
        callback_saw.update({m.instance_id: m.outcome for m in ctx.group.members})

    scheduler = db.scheduler([long, quick, then], polling_interval=timedelta(milliseconds=50))
    group = await db.resolve(
        scheduler.schedule_group(
            db.engine, [long.instance("a"), quick.instance("b")], then=then.instance("t")
        )
    )
    async with scheduler:
        await wait_for(seen.started.is_set)
        await cancel_elsewhere(db, "long", "a")
        await wait_for(lambda: callback_saw != {})
    assert callback_saw == {"a": "cancelled", "b": "succeeded"}
    result = await db.resolve(scheduler.result(db.engine, "long", "a"))
    assert result is not None
    assert result.outcome == "cancelled"
    assert result.value is None
    counted = await db.resolve(scheduler.group(db.engine, group.id))
    assert counted is not None
    assert dict(counted.outcomes) == {"cancelled": 1, "succeeded": 1}
    assert counted.remaining == 0
    assert seen.abandoned == []


async def test_a_recurring_instance_leaves_the_table(db: Harness) -> None:
    from sqla_scheduler import FixedDelay, recurring

    seen = Seen()

    @recurring("tick", FixedDelay(timedelta(hours=1)))
    async def tick(ctx: Any) -> None:
        seen.started.set()
        await anyio.sleep(120)

    scheduler = db.scheduler([tick], polling_interval=timedelta(milliseconds=50))
    async with scheduler:
        await wait_for(seen.started.is_set)
        await cancel_elsewhere(db, "tick", "recurring")
        await wait_for(lambda: db.row("tick", "recurring") is None)
    assert [e.outcome for e in await history(db, scheduler, "tick")] == ["cancelled"]


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_handler_that_ignores_the_stop_is_recorded_cancelled_after_the_grace(
    db: Harness, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """It is recorded ``cancelled`` while it runs on, named in the log; a sync one's worker
    is free at once (another execution runs meanwhile, with ``concurrency=1``); what the
    handler returns at last is discarded."""
    seen = Seen()
    ran: list[str] = []

    async def deaf_async(ctx: Any) -> str:
        seen.started.set()
        with anyio.CancelScope(shield=True):  # ignores its cancellation
            await anyio.to_thread.run_sync(seen.release.wait, 60)
        seen.stop(ctx.instance_id, "returned")
        return "too late"

    def deaf_sync(ctx: Any) -> str:
        seen.started.set()
        seen.release.wait(60)  # looks at nothing
        seen.stop(ctx.instance_id, "returned")
        return "too late"

    deaf = one_time("deaf", keep_result=True)(deaf_async if kind == "async" else deaf_sync)
    other = one_time("other")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler(
        [deaf, other],
        concurrency=1 if kind == "sync" else 2,
        cancel_grace=timedelta(milliseconds=300),
        polling_interval=timedelta(milliseconds=50),
    )
    await db.resolve(scheduler.schedule(db.engine, deaf.instance("d")))
    caplog.set_level(logging.INFO, logger="sqla_scheduler")
    try:
        async with scheduler:
            await wait_for(seen.started.is_set)
            await cancel_elsewhere(db, "deaf", "d")
            await wait_for(lambda: db.row("deaf", "d") is None)
            assert "d" not in seen.stopped, "recorded while the handler still runs"
            await db.resolve(scheduler.schedule(db.engine, other.instance("o")))
            await wait_for(lambda: ran == ["o"])
            seen.release.set()
            await wait_for(lambda: "d" in seen.stopped)
            if kind == "async":  # its worker waited for it (a sync one's left it at once)
                await wait_for(lambda: "ended after it was recorded cancelled" in caplog.text)
    finally:
        seen.release.set()
    assert "deaf/d: its handler still runs 300ms after cancel asked it to stop" in caplog.text
    assert "version mismatch" not in caplog.text
    result = await db.resolve(scheduler.result(db.engine, "deaf", "d"))
    assert result is not None
    assert (result.outcome, result.value) == ("cancelled", None)
    [entry] = await history(db, scheduler, "deaf")
    assert entry.outcome == "cancelled"
    assert "cancel_grace" in (entry.error or "")


async def test_a_stop_racing_the_finish_records_exactly_one_outcome(db: Harness) -> None:
    """Each handler returns about when its stop is asked for: each execution ends once,
    succeeded or cancelled, never both and never neither."""
    count = 12
    started = {str(i): threading.Event() for i in range(count)}

    async def brief_async(ctx: Any) -> str:
        started[ctx.instance_id].set()
        await anyio.sleep(0.001 * (int(ctx.instance_id) % 4))
        return "done"

    def brief_sync(ctx: Any) -> str:
        started[ctx.instance_id].set()
        time.sleep(0.001 * (int(ctx.instance_id) % 4))
        return "done"

    task = one_time("brief", keep_result=True)(brief_async if db.is_async else brief_sync)
    scheduler = db.scheduler([task], concurrency=count, history="all")
    await db.resolve(scheduler.schedule_batch(db.engine, [task.instance(i) for i in started]))
    async with scheduler:
        for instance_id, event in started.items():
            await wait_for(event.is_set)
            await cancel_elsewhere_if_there(db, "brief", instance_id)
        await wait_for(lambda: db.count() == 0)
    outcomes: dict[str, list[str]] = {}
    for entry in await history(db, scheduler, "brief"):
        outcomes.setdefault(entry.instance_id, []).append(entry.outcome)
    assert sorted(outcomes) == sorted(started)
    assert all(len(o) == 1 and o[0] in ("succeeded", "cancelled") for o in outcomes.values())
    with db.sync_engine.connect() as conn:
        kept = conn.execute(
            text("SELECT task_instance, outcome FROM scheduled_tasks_results")
        ).all()
    assert sorted(kept) == sorted((i, o[0]) for i, o in outcomes.items())


async def cancel_elsewhere_if_there(db: Harness, task_name: str, instance_id: str) -> None:
    """``cancel`` through another engine, of an execution that may have finished."""
    other = Scheduler(db.sync_engine)
    await anyio.to_thread.run_sync(other.cancel, db.sync_engine, task_name, instance_id)


async def test_a_cancel_in_the_loops_own_process_reaches_it_on_commit(db: Harness) -> None:
    """Through the scheduler whose loop runs, the request is heard as its transaction
    commits: at once, on every database (no read, no NOTIFY needed)."""
    seen = Seen()
    task = stoppable(seen, "async" if db.is_async else "sync")
    scheduler = db.scheduler([task], listen=False)
    await db.resolve(scheduler.schedule(db.engine, task.instance("a")))
    async with scheduler:
        await wait_for(seen.started.is_set)
        reads = scheduler._loop.runner.stops.reads if scheduler._loop.runner else 0
        async with db.session() as session:
            assert await db.resolve(scheduler.cancel(session, "long", "a")) is True
            await db.commit(session)
        committed = time.monotonic()
        await wait_for(lambda: "a" in seen.stopped)
        runner = scheduler._loop.runner
        assert runner is not None
        assert seen.stopped["a"][0] - committed < 0.5
        assert runner.stops.reads - reads <= 1  # heard, not read (a read may be under way)
        await wait_for(lambda: db.row("long", "a") is None)


async def test_a_rolled_back_cancel_stops_nothing(db: Harness) -> None:
    seen = Seen()
    task = stoppable(seen, "async" if db.is_async else "sync")
    scheduler = db.scheduler([task])
    await db.resolve(scheduler.schedule(db.engine, task.instance("a")))
    async with scheduler:
        await wait_for(seen.started.is_set)
        async with db.session() as session:
            assert await db.resolve(scheduler.cancel(session, "long", "a")) is True
            await db.rollback(session)
        runner = scheduler._loop.runner
        assert runner is not None
        reads = runner.stops.reads
        # two reads where no NOTIFY comes (a NOTIFY of a rolled-back transaction is never sent)
        await wait_for(lambda: runner.stops.reads >= reads + 2 or db.notifies)
        assert "a" not in seen.stopped
        row = db.row("long", "a")
        assert row is not None
        assert row["stop_requested_at"] is None
        await cancel_elsewhere(db, "long", "a")
        await wait_for(lambda: db.row("long", "a") is None)


async def test_raise_if_cancelled_raises_only_once_asked(db: Harness) -> None:
    checks: list[bool] = []

    def check(ctx: Any) -> None:
        ctx.raise_if_cancelled()  # not asked: returns
        checks.append(bool(ctx.cancelled.is_set()))

    task = one_time("check")(check)
    scheduler = db.scheduler([task])
    await db.resolve(scheduler.schedule(db.engine, task.instance("a")))
    assert await scheduler.run_due() == 1
    assert checks == [False]
    asked = build_context(task, instance_id="b", cancelled=True)
    with pytest.raises(ExecutionCancelled, match="check/b was cancelled"):
        check(asked)


async def test_a_revived_execution_whose_stop_was_asked_does_not_run_again(
    db: Harness, clock: ManualClock
) -> None:
    """Its process died before it stopped: the revival makes it due, and the next pick
    records it ``cancelled`` without running its handler (nor telling ``on_start``)."""
    ran: list[str] = []
    task = one_time("gone", keep_result=True)(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler([task], clock, heartbeat_interval=timedelta(seconds=1))
    await db.resolve(scheduler.schedule(db.engine, task.instance("a")))
    with db.sync_engine.begin() as conn:
        old = NOW - timedelta(hours=1)
        conn.execute(
            update(db.table).values(
                picked=True, picked_by="dead", last_heartbeat=old, started_at=old
            )
        )
    assert await db.resolve(Scheduler(db.sync_engine).cancel(db.sync_engine, "gone", "a"))
    assert [e.instance_id for e in await scheduler.revive_dead_executions()] == ["a"]
    row = db.row("gone", "a")
    assert row is not None
    assert row["stop_requested_at"] is not None
    assert await scheduler.run_due() == 1
    assert ran == []
    assert db.row("gone", "a") is None
    result = await db.resolve(scheduler.result(db.engine, "gone", "a"))
    assert result is not None
    assert result.outcome == "cancelled"
    outcomes = [e.outcome for e in await history(db, scheduler, "gone")]
    assert outcomes == ["cancelled", "dead"]
