"""Recurring instances with schedules of their own (``recurring(name)`` without a
schedule): each row carries its schedule, runs by it, and changes it with ``reschedule``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import create_engine, select, update

from sqla_scheduler import (
    Cron,
    FixedDelay,
    FixedRate,
    InvalidScheduleError,
    ManualClock,
    Scheduler,
    TaskDefinitionError,
    recurring,
)
from sqla_scheduler.history import HistoryEntry
from tests.support import NOW, Harness

pytestmark = pytest.mark.anyio


def report_task(runs: list[tuple[str, Any, datetime]]) -> Any:
    @recurring("report")
    def report(ctx: Any) -> Any:
        runs.append((ctx.instance_id, ctx.payload, ctx.execution_time))
        return None

    return report


async def times(db: Harness, scheduler: Any) -> dict[str, datetime]:
    listed = await db.resolve(scheduler.executions(db.engine, task_name="report"))
    return {e.instance_id: e.execution_time for e in listed}


async def test_each_instance_runs_by_its_own_schedule(db: Harness, clock: ManualClock) -> None:
    runs: list[tuple[str, Any, datetime]] = []
    report = report_task(runs)
    scheduler = db.scheduler([report], clock)
    # no row at start-up: the instances are the application's
    assert await scheduler.run_due() == 0
    assert await times(db, scheduler) == {}

    hourly = report.instance("acme", {"tenant": "acme"}, schedule=Cron("0 0 * * * ?"))
    every_5m = report.instance("globex", {"tenant": "globex"}, schedule="FIXED_RATE|5m")
    assert await db.resolve(scheduler.schedule_batch(db.engine, [hourly, every_5m])) == 2
    # the first run is the schedule's first, by the scheduler's clock
    assert await times(db, scheduler) == {"acme": NOW + timedelta(hours=1), "globex": NOW}

    assert await scheduler.run_due() == 1
    assert runs == [("globex", {"tenant": "globex"}, NOW)]
    assert await times(db, scheduler) == {
        "acme": NOW + timedelta(hours=1),
        "globex": NOW + timedelta(minutes=5),
    }
    listed = await db.resolve(scheduler.executions(db.engine, task_name="report"))
    assert {e.instance_id: e.schedule for e in listed} == {
        "acme": "CRON|0 0 * * * ?",
        "globex": "FIXED_RATE|5m",
    }

    clock.advance(timedelta(hours=1))
    assert await scheduler.run_due() == 2
    assert sorted(r[0] for r in runs[1:]) == ["acme", "globex"]
    after = await times(db, scheduler)
    assert after["acme"] == NOW + timedelta(hours=2)  # its own: hourly
    assert after["globex"] == NOW + timedelta(hours=1, minutes=5)  # its own: no backlog


async def test_reschedule_changes_an_instances_schedule(db: Harness, clock: ManualClock) -> None:
    runs: list[tuple[str, Any, datetime]] = []
    report = report_task(runs)
    scheduler = db.scheduler([report], clock)
    await db.resolve(
        scheduler.schedule(db.engine, report.instance("acme", schedule="FIXED_RATE|1h"))
    )
    await scheduler.run_due()
    assert await times(db, scheduler) == {"acme": NOW + timedelta(hours=1)}

    # a new schedule without a time: runs when the new schedule first says
    moved = scheduler.reschedule(
        db.engine,
        "report",
        "acme",
        schedule=FixedDelay(timedelta(minutes=10), initial_delay=timedelta(minutes=2)),
    )
    assert await db.resolve(moved) is True
    assert await times(db, scheduler) == {"acme": NOW + timedelta(minutes=2)}
    # the row is the source of truth from now on
    clock.advance(timedelta(minutes=2))
    assert await scheduler.run_due() == 1
    assert await times(db, scheduler) == {"acme": NOW + timedelta(minutes=12)}

    # with a time and a schedule: that time, then the schedule
    at = NOW + timedelta(days=1)
    assert await db.resolve(
        scheduler.reschedule(db.engine, "report", "acme", at, schedule="DAILY|09:00")
    )
    clock.set(at)
    assert await scheduler.run_due() == 1
    assert await times(db, scheduler) == {"acme": datetime(2030, 5, 19, 9, 0, tzinfo=timezone.utc)}

    # cancel ends the instance
    assert await db.resolve(scheduler.cancel(db.engine, "report", "acme")) is True
    assert await times(db, scheduler) == {}


async def test_a_failed_run_retries_no_later_than_its_own_next_run(
    db: Harness, clock: ManualClock
) -> None:
    @recurring("flaky")
    def flaky(ctx: Any) -> None:
        raise RuntimeError("boom")

    scheduler = db.scheduler([flaky], clock)
    await db.resolve(scheduler.schedule(db.engine, flaky.instance("a", schedule="FIXED_RATE|10s")))
    assert await scheduler.run_due() == 1
    [row] = await db.resolve(scheduler.executions(db.engine, task_name="flaky"))
    assert row.consecutive_failures == 1
    assert row.execution_time == NOW + timedelta(seconds=10)  # sooner than the retry delay
    assert row.schedule == "FIXED_RATE|10s"  # a failure keeps the instance and its schedule


async def test_a_row_whose_schedule_does_not_read_is_taken_out(
    db: Harness, clock: ManualClock
) -> None:
    runs: list[tuple[str, Any, datetime]] = []
    report = report_task(runs)
    scheduler = db.scheduler([report], clock)
    await db.resolve(
        scheduler.schedule(db.engine, report.instance("bad", schedule="FIXED_RATE|1m"))
    )
    with db.sync_engine.begin() as conn:
        table = scheduler.table
        conn.execute(update(table).values(schedule="CRON|not a cron"))
        assert conn.scalar(select(table.c.schedule)) == "CRON|not a cron"
    await scheduler.run_due()
    assert runs == []  # never ran: nothing could follow its run
    assert await times(db, scheduler) == {}
    entries: list[HistoryEntry] = await db.resolve(scheduler.history(db.engine))
    [entry] = entries
    assert (entry.instance_id, entry.outcome) == ("bad", "undecodable")
    assert entry.error is not None
    assert "task 'report': schedule" in entry.error


def test_instances_and_reschedules_refuse_bad_schedules() -> None:
    report = report_task([])
    with pytest.raises(InvalidScheduleError, match=r"task 'report': schedule: .*CRON\|nope"):
        report.instance("a", schedule="CRON|nope")
    with pytest.raises(
        InvalidScheduleError, match=r"task 'report': schedule: .*cannot be disabled"
    ):
        report.instance("a", schedule="-")
    with pytest.raises(InvalidScheduleError, match=r"task 'report': schedule must be a Schedule"):
        report.instance("a", schedule=30)  # type: ignore[arg-type]
    tick = recurring("tick", FixedRate(timedelta(minutes=1)))(lambda ctx: None)
    with pytest.raises(TaskDefinitionError, match=r"task 'tick' has a schedule of its own"):
        tick.instance("a", schedule="FIXED_RATE|1m")  # type: ignore[call-arg]
    with pytest.raises(TaskDefinitionError, match=r"task 'report': initial_payload"):
        recurring("report", initial_payload={"a": 1})(lambda ctx: None)

    # refused before any database work: no table is needed
    scheduler = Scheduler(create_engine("sqlite://"), [report, tick])
    with pytest.raises(TaskDefinitionError, match=r"task 'tick': schedule= is for"):
        scheduler.reschedule(scheduler.engine, "tick", "a", schedule="FIXED_RATE|1m")
    with pytest.raises(InvalidScheduleError, match=r"task 'report': schedule: "):
        scheduler.reschedule(scheduler.engine, "report", "a", schedule="DAILY|25:00")
    with pytest.raises(TypeError, match=r"task 'report': reschedule needs at, schedule or both"):
        scheduler.reschedule(scheduler.engine, "report", "a")
