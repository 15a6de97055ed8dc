"""Rows whose counters sit at their column's limit, or outside the range the scheduler
writes, affect only themselves: picks, outcomes and revivals of every other row go on,
and the row itself is run, recorded and revived like any other (issue 13, defects 1 and 4).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from sqla_scheduler import FixedDelay, ManualClock, one_time, recurring
from sqla_scheduler.models import BIGINT_MAX, INT_MAX
from tests.support import NOW, Harness

pytestmark = pytest.mark.anyio


def set_row(db: Harness, task: str, instance: str, **values: Any) -> None:
    t = db.table
    with db.sync_engine.begin() as conn:
        conn.execute(
            update(t).where(t.c.task_name == task, t.c.task_instance == instance).values(values)
        )


async def test_a_row_at_the_version_limit_does_not_stop_picks(db: Harness, clock: ManualClock):
    ran: list[str] = []
    task = one_time("job")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler([task], clock)
    ids = ["at-limit"] + [f"ok-{i}" for i in range(20)]
    await db.resolve(scheduler.schedule_batch(db.engine, [task.instance(i) for i in ids]))
    set_row(db, "job", "at-limit", version=BIGINT_MAX)
    assert await scheduler.run_due() == 21
    assert sorted(ran) == sorted(ids)
    assert db.count() == 0


async def test_outcomes_of_a_row_at_its_limits_are_recorded(db: Harness, clock: ManualClock):
    """A failure at the failure counter's limit is recorded (the counter stays there), so
    the handler does not run again before its retry."""
    calls: list[int] = []

    def fail(ctx: Any) -> None:
        calls.append(ctx.consecutive_failures)
        raise RuntimeError("still failing")

    tick = recurring("tick", FixedDelay(timedelta(hours=1)))(fail)
    scheduler = db.scheduler([tick], clock)
    await scheduler.run_due()
    assert calls == [0]
    clock.advance(timedelta(hours=1))
    set_row(db, "tick", "recurring", consecutive_failures=INT_MAX, version=BIGINT_MAX)
    assert await scheduler.run_due() == 1
    row = db.row("tick", "recurring")
    assert row is not None
    assert (row["picked"], row["consecutive_failures"]) == (False, INT_MAX)
    assert row["execution_time"] > NOW + timedelta(hours=1)
    assert await scheduler.run_due() == 0, "the recorded failure waits for its retry"
    assert calls == [0, INT_MAX]


async def test_a_negative_failure_count_counts_from_zero(db: Harness, clock: ManualClock):
    def fail(ctx: Any) -> None:
        raise RuntimeError("fails")

    task = one_time("job", max_retries=3)(fail)
    scheduler = db.scheduler([task], clock)
    await db.resolve(scheduler.schedule(db.engine, task.instance("j")))
    set_row(db, "job", "j", consecutive_failures=-1)
    assert await scheduler.run_due() == 1
    row = db.row("job", "j")
    assert row is not None
    assert (row["picked"], row["consecutive_failures"]) == (False, 1)


async def test_one_row_at_its_limits_does_not_stop_revivals(db: Harness, clock: ManualClock):
    task = one_time("work")(lambda ctx: None)
    scheduler = db.scheduler([task], clock, heartbeat_interval=timedelta(seconds=10))
    names = ("at-limits", "negative", "no-heartbeat", "plain")
    await db.resolve(scheduler.schedule_batch(db.engine, [task.instance(i) for i in names]))
    dead = {
        "picked": True,
        "picked_by": "crashed",
        "last_heartbeat": NOW - timedelta(hours=1),
        "started_at": NOW - timedelta(hours=1),
    }
    for name in names:
        set_row(db, "work", name, **dead)
    set_row(db, "work", "at-limits", consecutive_failures=INT_MAX, version=BIGINT_MAX)
    set_row(db, "work", "negative", consecutive_failures=-1)
    set_row(db, "work", "no-heartbeat", last_heartbeat=None)

    revived = await scheduler.revive_dead_executions()
    assert sorted(e.instance_id for e in revived) == sorted(names)
    failures = {}
    for name in names:
        row = db.row("work", name)
        assert row is not None
        assert (row["picked"], row["picked_by"]) == (False, None), name
        failures[name] = row["consecutive_failures"]
    assert failures == {"at-limits": INT_MAX, "negative": 1, "no-heartbeat": 1, "plain": 1}
