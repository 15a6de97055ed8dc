"""``max_concurrency=N``: at most N executions of a task run at once, counted in the
database across every scheduler sharing the table; tasks without a limit are unaffected.
Real processes: tests/concurrency/test_limits_across_processes.py."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from sqla_scheduler import TaskDefinitionError, one_time, recurring
from sqla_scheduler._runner import picker
from tests.support import Harness, wait_for

pytestmark = pytest.mark.anyio


class Overlap:
    """Counts how many handlers run at once, and the most that ever did."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self.done: list[str] = []

    async def run(self, ctx: Any) -> None:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await anyio.sleep(0.02)  # the work: long enough for others to start beside it
        finally:
            self.now -= 1
            self.done.append(ctx.instance_id)


async def test_two_schedulers_run_at_most_the_limit_together(db: Harness) -> None:
    overlap = Overlap()
    free: list[str] = []
    limited = one_time("limited", max_concurrency=2)(overlap.run)
    unlimited = one_time("free")(lambda ctx: free.append(ctx.instance_id))
    first = db.scheduler([limited, unlimited], scheduler_name="first", concurrency=10)
    second = db.scheduler([limited, unlimited], scheduler_name="second", concurrency=10)
    await db.resolve(
        first.schedule_batch(db.engine, [limited.instance(f"l{i}") for i in range(12)])
    )
    await db.resolve(
        first.schedule_batch(db.engine, [unlimited.instance(f"f{i}") for i in range(12)])
    )
    async with first, second:
        await wait_for(lambda: len(overlap.done) == 12 and len(free) == 12)
    assert overlap.most == 2
    assert sorted(overlap.done) == sorted(f"l{i}" for i in range(12))


async def test_picked_executions_count_whether_running_or_waiting(db: Harness) -> None:
    """Rows picked by a scheduler that is gone hold their places until they are revived."""
    overlap = Overlap()
    limited = one_time("limited", max_concurrency=3)(overlap.run)
    scheduler = db.scheduler([limited], concurrency=10)
    await db.resolve(
        scheduler.schedule_batch(db.engine, [limited.instance(f"l{i}") for i in range(5)])
    )
    with db.sync_engine.begin() as conn:  # two places held elsewhere
        conn.execute(
            db.table.update()
            .where(db.table.c.task_instance.in_(["l0", "l1"]))
            .values(picked=True, picked_by="elsewhere")
        )
    assert await scheduler.run_due() == 3
    assert overlap.most == 1  # one place left: one at a time
    assert sorted(overlap.done) == ["l2", "l3", "l4"]


async def test_limited_work_scheduled_during_a_backlog_starts_before_it_ends(
    db: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a backlog of another task keeps the picker busy, it skips the limited tasks
    it found drained until it hears of work for them: news, not the time-based recheck
    (out of reach here), brings the limited execution in."""
    monkeypatch.setattr(picker, "_LIMITED_RECHECK", 3600.0)
    finished: list[str] = []

    async def work(ctx: Any) -> None:
        await anyio.sleep(0.003)  # the work: 3,000 of them keep 10 workers busy a while
        finished.append(ctx.instance_id)

    backlog = one_time("backlog")(work)
    started_with: list[int] = []  # how many of the backlog had finished when it started
    limited = one_time("limited", max_concurrency=1)(lambda ctx: started_with.append(len(finished)))
    scheduler = db.scheduler([backlog, limited], concurrency=10)
    size = 3000
    await db.resolve(
        scheduler.schedule_batch(db.engine, [backlog.instance(f"b{i}") for i in range(size)])
    )
    async with scheduler:
        await wait_for(lambda: len(finished) >= 100)  # well into the backlog
        await db.resolve(scheduler.schedule(db.engine, limited.instance("l")))
        await wait_for(lambda: bool(started_with))
        await wait_for(lambda: len(finished) == size)
    assert started_with[0] < size, "it started while the backlog lasted"


def test_bad_limits_name_the_task_and_field() -> None:
    for value in (0, -1, 1.5, True, "2"):
        with pytest.raises(TaskDefinitionError, match=r"task 'job': max_concurrency must be"):
            one_time("job", max_concurrency=value)(lambda ctx: None)  # type: ignore[arg-type]
    with pytest.raises(TaskDefinitionError, match=r"task 'tick': max_concurrency must be"):
        recurring("tick", "FIXED_DELAY|1m", max_concurrency=0)(lambda ctx: None)
