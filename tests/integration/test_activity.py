"""The per-minute counts behind the admin page's charts (``<table>_stats``): what the
completer committed is counted by task and outcome, with start lags and durations, added
to the table every few seconds and as the loop stops, summed over processes when read,
and pruned after a day at least. They exist with the default ``history="failures"``,
which keeps no successes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import anyio
import pytest
from sqlalchemy import func, insert, select

from sqla_scheduler import ManualClock, SchedulerConfig, one_time
from sqla_scheduler._execution import Execution
from sqla_scheduler._runner import stats as stats_service
from sqla_scheduler._statements import statements_on
from sqla_scheduler._store.stats import activity, minute_of
from sqla_scheduler.models import STATS_BOUNDS_MS, STATS_COLUMNS, stats_table
from tests.support import Harness, services, wait_for
from tests.support.builders import execution_at

# what this module tests runs in the scheduler's own units of work, the same statements
# through run_sync as with a sync engine, and every async driver is run by the other
# modules: on SQLite and MariaDB the sync cases carry the database's differences
pytestmark = [pytest.mark.anyio, pytest.mark.databases(async_on=["postgresql"])]

NOW = datetime(2030, 5, 17, 12, 0, 30, tzinfo=timezone.utc)


def stats_rows(db: Harness) -> dict[tuple[str, str], dict[str, Any]]:
    """The stats table summed over minutes and nodes, by (task, outcome)."""
    s = stats_table(db.table)
    with db.sync_engine.connect() as conn:
        found = conn.execute(
            select(
                s.c.task_name, s.c.outcome, *(func.sum(s.c[n]).label(n) for n in STATS_COLUMNS)
            ).group_by(s.c.task_name, s.c.outcome)
        )
        return {
            (row.task_name, row.outcome): {n: int(row._mapping[n]) for n in STATS_COLUMNS}
            for row in found
        }


def bucket_of(ms: int) -> int:
    return next((i for i, bound in enumerate(STATS_BOUNDS_MS) if ms < bound), len(STATS_BOUNDS_MS))


async def test_a_drain_is_counted_by_task_and_outcome(db: Harness) -> None:
    """Successes (which ``history="failures"`` does not keep), failed attempts that are
    retried and abandons, each by its task, with lags and durations in their buckets."""
    clock = ManualClock(NOW)

    def work(ctx: Any) -> None:
        clock.advance(timedelta(milliseconds=30))  # the handler's duration

    def fail(ctx: Any) -> None:
        clock.advance(timedelta(milliseconds=300))
        raise RuntimeError("no")

    ok, bad = one_time("ok")(work), one_time("bad", max_retries=1)(fail)
    scheduler = db.scheduler([ok, bad], clock, retry_base_delay=timedelta(seconds=10))
    assert scheduler.config.history == "failures"
    due = NOW - timedelta(seconds=2)
    batch = [ok.instance(f"o{i}", at=due) for i in range(3)] + [
        bad.instance(f"b{i}", at=due) for i in range(2)
    ]
    await db.resolve(scheduler.schedule_batch(db.engine, batch))
    assert await scheduler.run_due() == 5
    clock.advance(timedelta(minutes=1))
    assert await scheduler.run_due() == 2  # the retries, abandoned after their 2nd failure
    rows = stats_rows(db)
    assert set(rows) == {("ok", "succeeded"), ("bad", "failed"), ("bad", "abandoned")}
    succeeded, failed, abandoned = (
        rows["ok", "succeeded"],
        rows["bad", "failed"],
        rows["bad", "abandoned"],
    )
    assert (succeeded["executions"], failed["executions"], abandoned["executions"]) == (3, 2, 2)
    assert succeeded["duration_ms"] == 3 * 30
    assert succeeded[f"duration_{bucket_of(30)}"] == 3
    assert failed[f"duration_{bucket_of(300)}"] == 2
    # the first attempts started late by 2 s and by the handlers before them in run_due
    assert all(succeeded[f"lag_{i}"] == 0 for i in range(bucket_of(2000)))
    assert sum(succeeded[f"lag_{i}"] for i in range(16)) == 3
    assert abandoned[f"duration_{bucket_of(300)}"] == 2  # the retry that failed last
    # the chart's read sums them per minute, for one task or all
    with db.sync_engine.connect() as conn:
        hour = activity(
            conn, statements_on(conn, db.table), now=clock.now(), step_minutes=1, points=60
        )
        one = activity(
            conn,
            statements_on(conn, db.table),
            now=clock.now(),
            step_minutes=1,
            points=60,
            task="ok",
        )
    assert len(hour.points) == 60
    assert hour.points[-1].start == datetime(2030, 5, 17, 12, 1, tzinfo=timezone.utc)
    assert hour.counts == {"succeeded": 3, "failed": 2, "abandoned": 2}
    assert hour.points[-2].counts == {"succeeded": 3, "failed": 2}
    assert hour.points[-1].counts == {"abandoned": 2}
    assert one.counts == {"succeeded": 3}
    assert one.duration.p50 is not None
    assert 20 <= one.duration.p50 < 50
    assert one.lag.p95 is not None
    assert 2000 <= one.lag.p95 < 5000


async def test_nothing_is_counted_with_stats_off(sqlite: Harness) -> None:
    clock = ManualClock(NOW)
    ok = one_time("ok")(lambda ctx: None)
    scheduler = sqlite.scheduler([ok], clock, stats=False)
    scheduler.schedule(sqlite.engine, ok.instance("a", at=NOW))
    assert await scheduler.run_due() == 1
    assert stats_rows(sqlite) == {}


async def test_the_loop_adds_its_counts_as_it_stops(
    db: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No flush comes during the run (an hour apart), so the counts in the table are those
    the stop added."""
    monkeypatch.setattr(stats_service, "FLUSH_INTERVAL", 3600.0)
    ok = one_time("ok")(lambda ctx: None)
    scheduler = db.scheduler([ok])
    await db.resolve(scheduler.schedule_batch(db.engine, [ok.instance(f"a{i}") for i in range(4)]))
    async with scheduler:
        await wait_for(lambda: db.count() == 0)
        assert stats_rows(db) == {}, "not flushed before the stop"
    assert stats_rows(db)[("ok", "succeeded")]["executions"] == 4


async def test_the_read_sums_processes_and_steps(db: Harness) -> None:
    """Rows of two nodes in the minutes of one 15-minute step read as one point (the
    modulo of the step is each database's own SQL)."""
    s = stats_table(db.table)
    start = minute_of(NOW) - minute_of(NOW) % 15
    zeros = dict.fromkeys(STATS_COLUMNS, 0)
    rows = [
        {**zeros, "minute": start + m, "task_name": "t", "node": node, "outcome": "succeeded",
         "executions": n, "duration_ms": 100 * n, "duration_8": n}
        for m, node, n in [(0, "a", 1), (7, "b", 2), (14, "a", 4), (15, "b", 8)]
    ]  # fmt: skip
    with db.sync_engine.begin() as conn:
        conn.execute(insert(s), rows)
    with db.sync_engine.connect() as conn:
        day = activity(
            conn,
            statements_on(conn, db.table),
            now=NOW + timedelta(minutes=15),
            step_minutes=15,
            points=96,
        )
    assert len(day.points) == 96
    assert [p.total for p in day.points[-2:]] == [7, 8]
    assert day.points[-2].start.minute % 15 == 0
    assert day.total == 15
    assert day.duration.mean == 100
    # all in the bucket from 200 to 500 ms: the median is interpolated within it
    assert day.duration.p50 == pytest.approx(200 + 300 * 0.5)


async def test_old_minutes_are_pruned_after_a_day_at_least(db: Harness) -> None:
    clock = ManualClock(NOW)
    scheduler = db.scheduler([], clock, history_retention=timedelta(hours=1))
    s = stats_table(db.table)
    zeros = dict.fromkeys(STATS_COLUMNS, 0)
    ages = [timedelta(days=3), timedelta(days=1, minutes=1), timedelta(hours=23)]
    rows = [
        {**zeros, "minute": minute_of(NOW - age) - i, "task_name": "t", "node": "n",
         "outcome": "succeeded", "executions": 1}
        for age in ages
        for i in range(3)
    ]  # fmt: skip
    with db.sync_engine.begin() as conn:
        conn.execute(insert(s), rows)
    async with services(scheduler) as runner:
        assert await runner.maintenance.prune_stats_once() == 6
    with db.sync_engine.connect() as conn:
        kept = sorted(conn.scalars(select(s.c.minute)))
    assert kept == sorted(minute_of(NOW - timedelta(hours=23)) - i for i in range(3))


async def test_a_failed_flush_keeps_its_counts(sqlite: Harness) -> None:
    clock = ManualClock(NOW)
    ok = one_time("ok")(lambda ctx: None)
    scheduler = sqlite.scheduler([ok], clock)
    async with services(scheduler) as runner:
        runner.stats.count(_execution("ok", NOW), "succeeded", NOW, NOW)
        with sqlite.sync_engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE scheduled_tasks_stats RENAME TO away")
        with pytest.raises(Exception, match="scheduled_tasks_stats"):
            await runner.stats.run_once()
        assert len(runner.stats) == 1
        with sqlite.sync_engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE away RENAME TO scheduled_tasks_stats")
        with anyio.fail_after(10):
            assert await runner.stats.run_once() == 1
    assert stats_rows(sqlite)[("ok", "succeeded")]["executions"] == 1


def _execution(task: str, due: datetime) -> Execution:
    return execution_at(due, task_name=task, instance_id="x", picked=True, picked_by="test-worker")


def test_the_setting_is_on_by_default() -> None:
    assert SchedulerConfig().stats is True
