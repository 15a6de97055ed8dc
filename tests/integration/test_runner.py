"""The execution loop's rules, run through ``run_due`` and the real loop."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import anyio
import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from sqla_scheduler import (
    Cron,
    FixedDelay,
    ManualClock,
    NextAt,
    Scheduler,
    SchedulerConfig,
    custom,
    one_time,
    recurring,
)
from sqla_scheduler.listeners import SchedulerListener
from tests.support import NOW, Harness, wait_for

# the core of scheduling and running also runs through PgBouncer in transaction mode
# (the sync-pgbouncer case, given nothing but the bouncer's URL), not every module again
pytestmark = [pytest.mark.anyio, pytest.mark.databases(pgbouncer=True)]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every case on asyncio, and the sync-engine cases on trio too."""
    return str(request.param)


dead_letters = Table(
    "dead_letters",
    MetaData(),
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance", String(255)),
)


def dead_letter_count(db: Harness) -> int:
    with db.sync_engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(dead_letters)) or 0)


class Recorder(SchedulerListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_start(self, context: Any) -> None:
        self.events.append(("start", context.instance_id))

    def on_success(self, context: Any, duration: Any) -> None:
        self.events.append(("success", context.instance_id))

    def on_failure(self, context: Any, error: BaseException, duration: Any) -> None:
        self.events.append(("failure", context.instance_id))

    def on_abandon(self, context: Any, error: BaseException | None) -> None:
        self.events.append(("abandon", context.instance_id))

    def on_dead_execution(self, execution: Any) -> None:
        self.events.append(("dead", execution.instance_id))


@pytest.mark.parametrize("handler_kind", ["sync", "async"])
async def test_one_time_runs_once_and_is_removed(
    db: Harness, clock: ManualClock, handler_kind: str
):
    seen: list[Any] = []
    if handler_kind == "sync":

        def handler(ctx: Any) -> None:
            seen.append((ctx.payload, ctx.instance_id, ctx.consecutive_failures))
    else:

        async def handler(ctx: Any) -> None:
            seen.append((ctx.payload, ctx.instance_id, ctx.consecutive_failures))

    task = one_time("email")(handler)
    recorder = Recorder()
    scheduler = Scheduler(db.engine, [task], clock=clock, listeners=[recorder])
    await db.resolve(scheduler.schedule(db.engine, task.instance("e-1", {"to": "x"})))
    await db.resolve(
        scheduler.schedule(db.engine, task.instance("later", at=NOW + timedelta(hours=1)))
    )
    assert await scheduler.run_due() == 1
    assert seen == [({"to": "x"}, "e-1", 0)]
    assert db.row("email", "e-1") is None
    assert db.row("email", "later") is not None
    assert recorder.events == [("start", "e-1"), ("success", "e-1")]
    clock.advance(timedelta(hours=1))
    assert await scheduler.run_due() == 1
    assert db.count() == 0


async def test_recurring_is_registered_and_rescheduled(db: Harness, clock: ManualClock):
    payloads: list[Any] = []

    @recurring("tick", FixedDelay(timedelta(minutes=5)), initial_payload={"n": 0})
    def tick(ctx: Any) -> Any:
        payloads.append(ctx.payload)
        return {"n": ctx.payload["n"] + 1} if ctx.payload["n"] < 1 else None

    scheduler = db.scheduler([tick], clock)
    assert await scheduler.run_due() == 1
    first = db.row("tick", "recurring")
    assert first is not None
    assert first["execution_time"] == NOW + timedelta(minutes=5)
    assert first["task_data"] == {"n": 1}
    assert first["last_success"] == NOW
    assert first["picked"] is False
    assert await scheduler.run_due() == 0
    for _ in range(2):
        clock.advance(timedelta(minutes=5))
        assert await scheduler.run_due() == 1
    assert payloads == [{"n": 0}, {"n": 1}, {"n": 1}]  # None kept the payload
    assert db.row("tick", "recurring")["task_data"] == {"n": 1}  # type: ignore[index]


async def test_custom_task_reschedules_itself_until_it_returns_none(
    db: Harness, clock: ManualClock
):
    @custom("poll")
    def poll(ctx: Any) -> NextAt[Any] | None:
        count = ctx.payload["count"]
        return (
            NextAt(clock.now() + timedelta(seconds=10), {"count": count + 1}) if count < 2 else None
        )

    scheduler = db.scheduler([poll], clock)
    await db.resolve(scheduler.schedule(db.engine, poll.instance("p", {"count": 0})))
    assert await scheduler.run_due() == 1
    assert db.row("poll", "p")["task_data"] == {"count": 1}  # type: ignore[index]
    assert db.row("poll", "p")["execution_time"] == NOW + timedelta(seconds=10)  # type: ignore[index]
    clock.advance(timedelta(seconds=10))
    assert await scheduler.run_due() == 1
    clock.advance(timedelta(seconds=10))
    assert await scheduler.run_due() == 1
    assert db.row("poll", "p") is None


async def test_custom_task_returning_garbage_fails_clearly(
    db: Harness, clock: ManualClock, caplog: pytest.LogCaptureFixture
):
    bad = custom("bad")(lambda ctx: 42)
    scheduler = db.scheduler([bad], clock)
    await db.resolve(scheduler.schedule(db.engine, bad.instance("b")))
    with caplog.at_level(logging.ERROR, logger="sqla_scheduler"):
        await scheduler.run_due()
    assert "custom task 'bad' returned 42" in caplog.text
    assert db.row("bad", "b")["consecutive_failures"] == 1  # type: ignore[index]


async def test_failures_back_off(db: Harness, clock: ManualClock, caplog: pytest.LogCaptureFixture):
    calls: list[int] = []

    @one_time("flaky")
    def flaky(ctx: Any) -> None:
        calls.append(ctx.consecutive_failures)
        raise RuntimeError("boom")

    scheduler = db.scheduler([flaky], clock)
    await db.resolve(scheduler.schedule(db.engine, flaky.instance("f")))
    with caplog.at_level(logging.ERROR, logger="sqla_scheduler"):
        await scheduler.run_due()
    failed = db.row("flaky", "f")
    assert failed is not None
    assert (failed["consecutive_failures"], failed["last_failure"], failed["picked"]) == (
        1,
        NOW,
        False,
    )
    assert failed["execution_time"] == NOW + timedelta(seconds=30)
    assert "execution flaky/f failed (consecutive failures: 1)" in caplog.text
    assert "RuntimeError: boom" in caplog.text  # the traceback is in the same record
    clock.advance(timedelta(seconds=30))
    await scheduler.run_due()
    assert db.row("flaky", "f")["execution_time"] == clock.now() + timedelta(seconds=45)  # type: ignore[index]
    assert calls == [0, 1]


@pytest.mark.parametrize(
    ("task_retries", "global_retries", "runs"), [(2, None, 3), (None, 1, 2), (0, 5, 1)]
)
async def test_max_retries_and_on_abandon_commit_together(
    db: Harness, clock: ManualClock, task_retries: int | None, global_retries: int | None, runs: int
):
    with db.sync_engine.begin() as conn:
        dead_letters.create(conn)
    calls: list[int] = []

    def on_abandon(ctx: Any, session: Any) -> Any:
        statement = insert(dead_letters).values(instance=ctx.instance_id)
        expected = AsyncSession if db.is_async else __import__("sqlalchemy.orm").orm.Session
        assert isinstance(session, expected)
        return session.execute(statement)  # awaited by the scheduler on an AsyncSession

    @one_time("doomed", max_retries=task_retries, on_abandon=on_abandon)
    def doomed(ctx: Any) -> None:
        calls.append(1)
        raise ValueError("never works")

    recorder = Recorder()
    scheduler = Scheduler(
        db.engine,
        [doomed],
        SchedulerConfig(max_retries=global_retries, retry_base_delay=timedelta(seconds=1)),
        clock=clock,
        listeners=[recorder],
    )
    await db.resolve(scheduler.schedule(db.engine, doomed.instance("d")))
    for _ in range(10):
        await scheduler.run_due()
        clock.advance(timedelta(minutes=5))
    assert len(calls) == runs
    assert db.row("doomed", "d") is None
    with db.sync_engine.connect() as conn:
        assert conn.scalars(select(dead_letters.c.instance)).all() == ["d"]
    assert recorder.events[-1] == ("abandon", "d")


async def test_failing_abandon_hook_keeps_the_row_and_retries_the_drop(
    db: Harness, clock: ManualClock
):
    with db.sync_engine.begin() as conn:
        dead_letters.create(conn)
    hook_fails = [True]
    calls: list[int] = []

    def write_or_fail() -> None:
        if hook_fails[0]:
            raise RuntimeError("dead-letter store is down")

    if db.is_async:

        async def on_abandon(ctx: Any, session: Any) -> None:
            await session.execute(insert(dead_letters).values(instance=ctx.instance_id))
            write_or_fail()
    else:

        def on_abandon(ctx: Any, session: Any) -> None:
            session.execute(insert(dead_letters).values(instance=ctx.instance_id))
            write_or_fail()

    @one_time("doomed", max_retries=0, on_abandon=on_abandon)
    def doomed(ctx: Any) -> None:
        calls.append(1)
        raise ValueError("never works")

    scheduler = db.scheduler([doomed], clock, retry_base_delay=timedelta(seconds=1))
    await db.resolve(scheduler.schedule(db.engine, doomed.instance("d")))
    await scheduler.run_due()
    kept = db.row("doomed", "d")
    assert kept is not None
    assert kept["picked"] is False
    assert kept["consecutive_failures"] == 2  # the failed drop counts, so retries back off
    assert dead_letter_count(db) == 0
    hook_fails[0] = False
    clock.advance(timedelta(minutes=1))
    await scheduler.run_due()
    assert calls == [1], "the handler ran again instead of only retrying the drop"
    assert db.row("doomed", "d") is None
    assert dead_letter_count(db) == 1


async def test_recurring_failure_retries_no_later_than_its_next_run(
    db: Harness, clock: ManualClock
):
    @recurring("every-10s", FixedDelay(timedelta(seconds=10)))
    def failing(ctx: Any) -> None:
        raise RuntimeError("nope")

    scheduler = db.scheduler([failing], clock, max_retries=0)
    await scheduler.run_due()
    kept = db.row("every-10s", "recurring")
    assert kept is not None, "a recurring task is never abandoned"
    assert kept["execution_time"] == NOW + timedelta(seconds=10)  # min(30s backoff, next run)


async def test_version_mismatch_is_logged_and_harmless(
    db: Harness, clock: ManualClock, caplog: pytest.LogCaptureFixture
):
    def steal(ctx: Any) -> None:
        # Another scheduler revives this execution while it runs.
        t = db.table
        with db.sync_engine.begin() as conn:
            conn.execute(
                update(t).values(
                    version=t.c.version + 10, picked=False, execution_time=NOW + timedelta(hours=1)
                )
            )

    task = one_time("stolen")(steal)
    scheduler = db.scheduler([task], clock)
    await db.resolve(scheduler.schedule(db.engine, task.instance("s")))
    with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
        await scheduler.run_due()
    assert "version mismatch: remove of stolen/s (version 2) not recorded" in caplog.text
    kept = db.row("stolen", "s")
    assert kept is not None
    assert kept["version"] == 12
    assert kept["picked"] is False


async def test_dead_executions_are_revived(db: Harness, clock: ManualClock):
    task = one_time("work")(lambda ctx: None)
    recorder = Recorder()
    scheduler = Scheduler(
        db.engine,
        [task],
        SchedulerConfig(heartbeat_interval=timedelta(seconds=10)),
        clock=clock,
        listeners=[recorder],
    )
    await db.resolve(
        scheduler.schedule_batch(
            db.engine, [task.instance(i) for i in ("dead", "alive", "waiting")]
        )
    )
    t = db.table
    with db.sync_engine.begin() as conn:
        conn.execute(
            update(t).values(
                picked=True,
                picked_by="crashed",
                last_heartbeat=NOW - timedelta(seconds=61),
                started_at=NOW - timedelta(seconds=70),
                version=5,
            )
        )
        conn.execute(
            update(t)
            .where(t.c.task_instance == "alive")
            .values(last_heartbeat=NOW - timedelta(seconds=59))
        )
        # picked by the crashed process but still queued there: its handler never started
        conn.execute(update(t).where(t.c.task_instance == "waiting").values(started_at=None))
    revived = await scheduler.revive_dead_executions()
    assert sorted(e.instance_id for e in revived) == ["dead", "waiting"]
    waiting = db.row("work", "waiting")
    assert waiting is not None
    assert (waiting["picked"], waiting["consecutive_failures"]) == (False, 0), (
        "a queued execution's revival counts no failure"
    )
    revived = [e for e in revived if e.instance_id == "dead"]
    # reported as found: who had it and when it last beat
    assert (revived[0].picked, revived[0].picked_by) == (True, "crashed")
    assert revived[0].last_heartbeat == NOW - timedelta(seconds=61)
    dead = db.row("work", "dead")
    assert dead is not None
    assert (dead["picked"], dead["picked_by"], dead["execution_time"]) == (False, None, NOW)
    assert (dead["consecutive_failures"], dead["version"]) == (1, 6)
    assert db.row("work", "alive")["picked"] is True  # type: ignore[index]
    assert sorted(recorder.events) == [("dead", "dead"), ("dead", "waiting")]
    assert await scheduler.run_due() == 2


async def test_orphans_are_left_alone_then_deleted(db: Harness, clock: ManualClock):
    known = one_time("known")(lambda ctx: None)
    scheduler = db.scheduler([known], clock, delete_unresolved_after=timedelta(days=14))
    for instance, age in (("old", 15), ("young", 13)):
        db.put(
            task_name="retired", task_instance=instance, execution_time=NOW - timedelta(days=age)
        )
    assert await scheduler.run_due() == 0
    assert [
        e.instance_id for e in await db.resolve(scheduler.executions(db.engine, "orphaned"))
    ] == [
        "old",
        "young",
    ]
    deleted = await scheduler.delete_orphans()
    assert [(name, instance) for name, instance, _ in deleted] == [("retired", "old")]
    assert db.row("retired", "young") is not None


async def test_undecodable_payload_is_removed_with_its_raw_payload_logged(
    db: Harness, clock: ManualClock, caplog: pytest.LogCaptureFixture
):
    import dataclasses

    @dataclasses.dataclass
    class Point:
        x: int

    task = one_time("typed", payload_type=Point)(lambda ctx: None)
    scheduler = db.scheduler([task], clock)
    db.put(task_name="typed", task_instance="bad", task_data={"y": "oops"}, execution_time=NOW)
    with caplog.at_level(logging.ERROR, logger="sqla_scheduler"):
        await scheduler.run_due()
    assert db.row("typed", "bad") is None
    assert "took typed/bad out of the table" in caplog.text
    assert "its payload does not decode" in caplog.text
    assert "{'y': 'oops'}" in caplog.text


async def test_recurring_upsert_at_start_up(db: Harness, clock: ManualClock):
    def noop(ctx: Any) -> None:
        pass

    v1 = [
        recurring("cron", Cron("0 0 * * * ?"), priority=1)(noop),
        recurring("delay", FixedDelay(timedelta(hours=1)))(noop),
        recurring("busy", Cron("0 0 * * * ?"))(noop),
        recurring("retired", FixedDelay(timedelta(hours=1)))(noop),
    ]
    await db.scheduler(v1, clock).run_due()  # registers; nothing is due yet
    with db.sync_engine.begin() as conn:
        conn.execute(update(db.table).where(db.table.c.task_name == "busy").values(picked=True))
    before = {name: db.row(name, "recurring") for name in ("cron", "delay", "busy")}
    clock.advance(timedelta(minutes=10))
    v2 = [
        recurring("cron", Cron("0 30 * * * ?"), priority=7)(noop),  # deterministic change
        recurring("delay", FixedDelay(timedelta(minutes=5)), priority=3)(noop),
        recurring("busy", Cron("0 30 * * * ?"), priority=9)(noop),
        recurring("retired", "-")(noop),
    ]
    await db.scheduler(v2, clock).run_due()
    cron, delay, busy = (db.row(n, "recurring") for n in ("cron", "delay", "busy"))
    assert cron is not None
    assert delay is not None
    assert busy is not None
    assert (cron["priority"], cron["schedule"]) == (7, "CRON|0 30 * * * ?")
    assert cron["execution_time"] == datetime(2030, 5, 17, 12, 30, tzinfo=timezone.utc)
    assert (delay["priority"], delay["schedule"]) == (3, "FIXED_DELAY|5m")
    assert delay["execution_time"] == before["delay"]["execution_time"]  # type: ignore[index]
    assert busy == before["busy"], "a picked row is not touched"
    assert db.row("retired", "recurring") is None


async def test_handler_scheduled_work_commits_with_success_only(db: Harness, clock: ManualClock):
    child = one_time("child")(lambda ctx: None)

    @one_time("parent")
    def parent(ctx: Any) -> None:
        ctx.schedule(child.instance(f"of-{ctx.instance_id}", at=NOW + timedelta(days=1)))
        if ctx.instance_id == "bad":
            raise RuntimeError("fails after scheduling")

    scheduler = db.scheduler([parent, child], clock)
    await db.resolve(
        scheduler.schedule_batch(db.engine, [parent.instance("good"), parent.instance("bad")])
    )
    await scheduler.run_due()
    assert db.row("child", "of-good") is not None
    assert db.row("child", "of-bad") is None


async def test_handler_scheduled_work_is_dropped_with_an_outcome_taken_over(
    db: Harness, clock: ManualClock
):
    child = one_time("child")(lambda ctx: None)

    @one_time("parent")
    def parent(ctx: Any) -> None:
        ctx.schedule(child.instance("of-taken", at=NOW + timedelta(days=1)))
        # Another scheduler revives this execution while it runs: the success is not ours
        # to record, and neither is what the handler scheduled.
        with db.sync_engine.begin() as conn:
            conn.execute(update(db.table).values(version=db.table.c.version + 10))

    scheduler = db.scheduler([parent, child], clock)
    await db.resolve(scheduler.schedule(db.engine, parent.instance("taken")))
    await scheduler.run_due()
    assert db.row("parent", "taken") is not None  # not removed: its version moved
    assert db.row("child", "of-taken") is None


# --- the real loop --------------------------------------------------------------------


async def test_priorities_with_concurrency_one(db: Harness):
    order: list[str] = []
    task = one_time("job")(lambda ctx: order.append(ctx.instance_id))
    scheduler = db.scheduler([task], concurrency=1, polling_interval=timedelta(milliseconds=50))
    await db.resolve(
        scheduler.schedule_batch(
            db.engine,
            [task.instance(f"low-{i}", priority=0) for i in range(5)]
            + [task.instance(f"high-{i}", priority=10) for i in range(5)],
        )
    )
    async with scheduler:
        await wait_for(lambda: len(order) == 10)
    assert all(name.startswith("high") for name in order[:5]), order


async def test_priorities_across_tasks_with_future_and_foreign_rows(db: Harness):
    """Picks follow priority across the scheduler's tasks; a future execution at a higher
    priority waits for its time, and rows of a task it does not know stay untouched."""
    order: list[str] = []
    first = one_time("first")(lambda ctx: order.append(ctx.instance_id))
    second = one_time("second")(lambda ctx: order.append(ctx.instance_id))
    foreign = one_time("foreign")(lambda ctx: None)
    scheduler = db.scheduler(
        [first, second], concurrency=1, polling_interval=timedelta(milliseconds=50)
    )
    now = scheduler.clock.now()
    later = now + timedelta(hours=1)
    instances = [
        first.instance("high-1", priority=5),
        second.instance("high-2", priority=5),
        second.instance("high-3", priority=5),
        first.instance("mid-1", priority=0, at=now - timedelta(minutes=5)),
        second.instance("mid-2", priority=0),
        second.instance("low-1", priority=-3, at=now - timedelta(days=1)),
        first.instance("future", priority=9, at=later),
    ]
    client = db.scheduler([first, second, foreign])
    await db.resolve(client.schedule_batch(db.engine, instances))
    await db.resolve(
        client.schedule_batch(
            db.engine, [foreign.instance(f"f-{i}", priority=10) for i in range(3)]
        )
    )
    async with scheduler:
        await wait_for(lambda: len(order) == 6)
    assert {name.split("-")[0] for name in order[:3]} == {"high"}, order
    assert {name.split("-")[0] for name in order[3:5]} == {"mid"}, order
    assert order[5] == "low-1", order
    assert db.row("first", "future") is not None
    assert db.count() == 4  # the future execution and the three foreign ones


async def test_run_in_a_task_group_picks_new_work_and_stops(db: Harness):
    done = threading.Event()
    task = one_time("job")(lambda ctx: done.set())
    scheduler = db.scheduler([task], polling_interval=timedelta(milliseconds=20))
    async with anyio.create_task_group() as tg:
        tg.start_soon(scheduler.run)
        await wait_for(lambda: scheduler.running)
        await db.resolve(scheduler.schedule(db.engine, task.instance("j")))
        await wait_for(done.is_set)
        scheduler.request_stop()
    assert not scheduler.running
    await wait_for(lambda: db.count() == 0)


async def test_stop_releases_what_is_still_running(db: Harness):
    started = threading.Event()
    polite_started = threading.Event()
    polite_done = threading.Event()

    def stubborn(ctx: Any) -> None:
        started.set()
        threading.Event().wait(2)  # ignores the shutdown signal

    def polite(ctx: Any) -> None:
        polite_started.set()
        ctx.shutdown.wait(30)
        polite_done.set()

    tasks = [one_time("stubborn")(stubborn), one_time("polite")(polite)]
    scheduler = db.scheduler(
        tasks,
        polling_interval=timedelta(milliseconds=20),
        shutdown_max_wait=timedelta(milliseconds=300),
    )
    await db.resolve(
        scheduler.schedule_batch(db.engine, [tasks[0].instance("s"), tasks[1].instance("p")])
    )
    async with scheduler:
        # both handlers running: one picked and not yet started would be handed back
        await wait_for(lambda: started.is_set() and polite_started.is_set())
    assert polite_done.is_set()
    assert db.row("polite", "p") is None, "a handler that returned on shutdown completes"
    released = db.row("stubborn", "s")
    assert released is not None
    assert (released["picked"], released["picked_by"]) == (False, None)
    assert db.count("picked") == 0


async def test_start_and_stop_on_a_background_thread(db: Harness):
    if db.is_async:
        pytest.skip("start()/stop() serve sync applications; the async engine case is run()")
    done = threading.Event()
    task = one_time("job")(lambda ctx: done.set())
    scheduler = db.scheduler([task], polling_interval=timedelta(milliseconds=20))

    def sync_app() -> None:
        scheduler.start()
        try:
            scheduler.schedule(db.engine, task.instance("j"))
            assert done.wait(20)
        finally:
            scheduler.stop()

    await anyio.to_thread.run_sync(sync_app)
    assert not scheduler.running
    await wait_for(lambda: db.count() == 0)


async def test_recurring_task_survives_revivals_past_the_global_retry_cap(
    db: Harness, clock: ManualClock
):
    ran: list[int] = []
    tick = recurring("tick", FixedDelay(timedelta(minutes=1)))(lambda ctx: ran.append(1))
    scheduler = db.scheduler([tick], clock, max_retries=1)
    await scheduler.run_due()
    with db.sync_engine.begin() as conn:  # as if revived after three crashes
        conn.execute(update(db.table).values(consecutive_failures=3))
    clock.advance(timedelta(minutes=1))
    assert await scheduler.run_due() == 1
    assert ran == [1, 1]
    assert db.row("tick", "recurring")["consecutive_failures"] == 0  # type: ignore[index]


async def test_a_scheduler_without_tasks_refuses_to_delete_orphans(db: Harness):
    with pytest.raises(RuntimeError, match="registers no tasks"):
        await Scheduler(db.engine, []).delete_orphans()


@pytest.mark.postgres_only("prepared_statements=False turns off psycopg's server-side prepares")
async def test_the_loop_runs_without_prepared_statements(db: Harness):
    done: list[str] = []
    task = one_time("job")(lambda ctx: done.append(ctx.instance_id))
    scheduler = db.scheduler(
        [task], prepared_statements=False, polling_interval=timedelta(milliseconds=20)
    )
    await db.resolve(
        scheduler.schedule_batch(db.engine, [task.instance(f"j{i}") for i in range(40)])
    )
    async with scheduler:
        await wait_for(lambda: len(done) == 40)
    assert sorted(done) == sorted(f"j{i}" for i in range(40))


async def test_a_scheduler_without_tasks_revives_and_deletes_no_orphans(
    db: Harness, clock: ManualClock, caplog: pytest.LogCaptureFixture
):
    """A process that only revives: with no tasks, every row would look orphaned."""
    task = one_time("work")(lambda ctx: None)
    client = Scheduler(db.engine, [task], clock=clock)
    await db.resolve(client.schedule(db.engine, task.instance("dead")))
    with db.sync_engine.begin() as conn:
        conn.execute(
            update(db.table).values(
                picked=True, picked_by="crashed", last_heartbeat=NOW - timedelta(hours=1)
            )
        )
    reviver = Scheduler(db.engine, [], clock=clock)
    with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
        async with reviver:
            await wait_for(lambda: db.row("work", "dead")["picked"] is False)  # type: ignore[index]
    assert not [r for r in caplog.records if "maintenance failed" in r.getMessage()]
    assert db.row("work", "dead") is not None  # revived, not deleted as an orphan
