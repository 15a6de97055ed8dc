"""Executions start at their time, not at the next poll: with the default 10 s
``polling_interval``, a delayed, a recurring, a retried and a rescheduled execution each
start within a fraction of a second of their ``execution_time`` (issue 14).

The waits are bounded (``wait_for``), and each start is checked against its due time: never
before it, and well within the poll that used to decide it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import anyio
import pytest
from sqlalchemy import create_engine, event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sqla_scheduler import Scheduler, SchedulerConfig, one_time, recurring
from sqla_scheduler._runner.due_times import DUE_READ_INTERVAL
from tests.support import Harness, wait_for

# starts at their times: the timer, the probe and the wake-ups are the runner's own,
# whichever engine; test_wakeups keeps every async case (commit hooks)
pytestmark = [pytest.mark.anyio, pytest.mark.databases(async_on=["postgresql"])]

AHEAD = timedelta(milliseconds=600)
#: How late a start may be: far less than the 10 s poll, with room for a loaded CI box.
LATE = timedelta(milliseconds=1500)
#: How early a start may seem: the scheduler's clock (on PostgreSQL, the database's) and
#: the handler's ``datetime.now`` may differ by this much.
EARLY = timedelta(milliseconds=50)


def recorder() -> tuple[list[tuple[str, datetime]], Any]:
    starts: list[tuple[str, datetime]] = []

    def handler(ctx: Any) -> None:
        starts.append((ctx.instance_id, datetime.now(timezone.utc)))

    return starts, handler


@asynccontextmanager
async def another_process(db: Harness, task: Any) -> AsyncIterator[tuple[Scheduler, Any]]:
    """A scheduler that does not run, on an engine of its own: another process, as far as
    a running scheduler can tell (no commit of it wakes that one)."""
    other_engine = create_async_engine(db.url) if db.is_async else create_engine(db.url)
    try:
        yield (
            Scheduler(other_engine, [task], SchedulerConfig(scheduler_name="client")),
            other_engine,
        )
    finally:
        await db.resolve(other_engine.dispose())


def assert_on_time(start: datetime, due: datetime) -> None:
    assert due - EARLY <= start < due + LATE, f"started {start - due} after its time"


async def test_a_delayed_execution_starts_at_its_time(db: Harness) -> None:
    starts, handler = recorder()
    task = one_time("job")(handler)
    scheduler = db.scheduler([task])
    assert scheduler.config.polling_interval == timedelta(seconds=10)
    before = scheduler.clock.now() + AHEAD  # known when the loop starts
    await db.resolve(scheduler.schedule(db.engine, task.instance("before", at=before)))
    async with scheduler:
        await wait_for(lambda: len(starts) == 1)
        during = scheduler.clock.now() + AHEAD  # told by this process's own commit
        await db.resolve(scheduler.schedule(db.engine, task.instance("during", at=during)))
        await wait_for(lambda: len(starts) == 2)
    assert [i for i, _ in starts] == ["before", "during"]
    assert_on_time(starts[0][1], before)
    assert_on_time(starts[1][1], during)


async def test_executions_picked_ahead_of_their_time_start_on_it_not_before(
    db: Harness,
) -> None:
    """The picker wakes a little before a time it knows of and picks what is due by then;
    each execution still starts no earlier than its time, by the scheduler's own clock."""
    starts: dict[str, tuple[datetime, datetime]] = {}
    scheduler: Scheduler

    def handler(ctx: Any) -> None:
        starts[ctx.instance_id] = (scheduler.clock.now(), ctx.execution_time)

    task = one_time("job")(handler)
    scheduler = db.scheduler([task])
    async with scheduler:
        base = scheduler.clock.now() + AHEAD
        batch = [task.instance(f"j{i}", at=base + timedelta(milliseconds=3 * i)) for i in range(6)]
        await db.resolve(scheduler.schedule_batch(db.engine, batch))
        await wait_for(lambda: len(starts) == len(batch))
    for instance, (start, due) in starts.items():
        assert due <= start < due + LATE, f"{instance} started {start - due} after its time"


async def test_a_batch_of_later_executions_each_start_at_their_time(db: Harness) -> None:
    starts, handler = recorder()
    task = one_time("job")(handler)
    scheduler = db.scheduler([task])
    async with scheduler:
        base = scheduler.clock.now()
        due = {f"j{i}": base + AHEAD + timedelta(milliseconds=200 * i) for i in range(5)}
        batch = [task.instance(i, at=at) for i, at in due.items()]
        await db.resolve(scheduler.schedule_batch(db.engine, batch))
        await wait_for(lambda: len(starts) == len(due))
    for instance, start in starts:
        assert_on_time(start, due[instance])


async def test_a_recurring_task_runs_at_each_of_its_times(db: Harness) -> None:
    starts, handler = recorder()
    tick = recurring("tick", "FIXED_DELAY|300ms")(handler)
    scheduler = db.scheduler([tick])
    async with scheduler:
        await wait_for(lambda: len(starts) >= 4)
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(starts)]
    assert all(timedelta(milliseconds=300) - EARLY <= gap < LATE for gap in gaps[:3]), gaps


async def test_a_retry_starts_at_its_time(db: Harness) -> None:
    starts, record = recorder()

    def fail_once(ctx: Any) -> None:
        record(ctx)
        if len(starts) == 1:
            raise RuntimeError("first attempt fails")

    task = one_time("job", max_retries=2)(fail_once)
    scheduler = db.scheduler([task], retry_base_delay=AHEAD)
    async with scheduler:
        await db.resolve(scheduler.schedule(db.engine, task.instance("j")))
        await wait_for(lambda: len(starts) == 2)
    assert_on_time(starts[1][1], starts[0][1] + AHEAD)


async def test_a_rescheduled_execution_starts_at_its_new_time(db: Harness) -> None:
    starts, handler = recorder()
    task = one_time("job")(handler)
    scheduler = db.scheduler([task])
    later = scheduler.clock.now() + timedelta(hours=1)
    await db.resolve(scheduler.schedule(db.engine, task.instance("j", at=later)))
    async with scheduler:
        sooner = scheduler.clock.now() + AHEAD
        assert await db.resolve(scheduler.reschedule(db.engine, "job", "j", sooner))
        await wait_for(lambda: len(starts) == 1)
    assert_on_time(starts[0][1], sooner)


async def test_another_schedulers_later_execution_starts_at_its_time(db: Harness) -> None:
    """Scheduled by a scheduler that does not run (another process, as far as the running
    one can tell): on PostgreSQL its NOTIFY carries the time; elsewhere the due-time read
    finds it within a second, before its time."""
    starts, handler = recorder()
    task = one_time("job")(handler)
    scheduler = db.scheduler([task])
    async with another_process(db, task) as (client, other_engine), scheduler:
        await wait_for(lambda: scheduler.running)
        one = client.clock.now() + AHEAD
        await db.resolve(client.schedule(other_engine, task.instance("one", at=one)))
        await wait_for(lambda: len(starts) == 1)
        base = client.clock.now()
        due = {f"b{i}": base + AHEAD + timedelta(milliseconds=150 * i) for i in range(3)}
        batch = [task.instance(i, at=at) for i, at in due.items()]
        await db.resolve(client.schedule_batch(other_engine, batch))
        await wait_for(lambda: len(starts) == 4)
    assert_on_time(starts[0][1], one)
    for instance, start in starts[1:]:
        assert_on_time(start, due[instance])


async def test_work_due_while_every_slot_is_busy_starts_when_one_frees(db: Harness) -> None:
    """Due while the only slot runs a long handler: it starts as soon as that handler's
    outcome is recorded, not at the next poll (and the picker does not spin meanwhile)."""
    starts, record = recorder()
    finished: list[datetime] = []

    async def slow(ctx: Any) -> None:
        await anyio.sleep(1.0)
        finished.append(datetime.now(timezone.utc))

    slow_task = one_time("slow", priority=1)(slow)
    quick = one_time("quick")(record)
    scheduler = db.scheduler([slow_task, quick], concurrency=1, pick_upper_fraction=1.0)
    async with scheduler:
        await db.resolve(scheduler.schedule(db.engine, slow_task.instance("s")))
        due = scheduler.clock.now() + timedelta(milliseconds=300)
        await db.resolve(scheduler.schedule(db.engine, quick.instance("q", at=due)))
        await wait_for(lambda: len(starts) == 1)
    assert finished, "the slow handler ran first"
    assert_on_time(starts[0][1], finished[0])


async def test_another_processs_work_due_now_starts_within_the_probe_interval(
    db: Harness,
) -> None:
    """Without NOTIFY (MariaDB, SQLite) the idle scheduler reads the earliest due time
    once a second: work committed by another process starts within about a second, not
    at the 10 s poll (on PostgreSQL the NOTIFY wakes it at once)."""
    starts, handler = recorder()
    task = one_time("job")(handler)
    scheduler = db.scheduler([task])
    async with another_process(db, task) as (client, other_engine), scheduler:
        await wait_for(lambda: scheduler.running)
        for i in range(3):
            committed = datetime.now(timezone.utc)
            await db.resolve(client.schedule(other_engine, task.instance(f"n{i}")))
            await wait_for(lambda: len(starts) == i + 1, deadline=5)  # noqa: B023
            lag = starts[i][1] - committed
            assert lag < DUE_READ_INTERVAL + timedelta(milliseconds=700), lag


async def test_an_idle_scheduler_probes_once_a_second_at_most(db: Harness) -> None:
    """The probe's cost, as the docs state it: one query a second while idle, no more."""
    if db.notifies:
        pytest.skip("PostgreSQL's schedulers listen for NOTIFY and do not probe")
    probes: list[float] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT MIN("):  # ``Running.next_due``
            probes.append(time.monotonic())

    sync_engine = db.engine.sync_engine if isinstance(db.engine, AsyncEngine) else db.engine
    event.listen(sync_engine, "before_cursor_execute", seen)
    task = one_time("job")(lambda ctx: None)
    scheduler = db.scheduler([task])  # the default 10 s poll: no pick in the meantime
    async with scheduler:
        await wait_for(lambda: scheduler.running)
        await wait_for(lambda: len(probes) >= 3, deadline=10)
    # the first may be the picker's own look at the table as it starts
    gaps = [later - earlier for earlier, later in itertools.pairwise(probes[1:3])]
    assert all(0.9 <= gap < 3.0 for gap in gaps), gaps  # seconds: once a second
