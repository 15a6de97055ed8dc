"""A pause reaches executions already picked and not yet started: the running scheduler
hands them back (unpicked, no failure counted) and starts none of them until the resume,
whether it paused itself (at once) or another scheduler did (through NOTIFY on
PostgreSQL, at its next poll on SQLite). Across real processes: tests/concurrency."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from sqla_scheduler import one_time
from tests.support import Harness, wait_for

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("by", ["itself", "another"])
async def test_a_pause_hands_back_what_is_held_and_starts_none_of_it(db: Harness, by: str) -> None:
    finish = threading.Event()
    started: list[str] = []

    def block(ctx: Any) -> None:
        started.append(ctx.instance_id)
        finish.wait(30)

    task = one_time("block")(block)
    # two run, more are held (pick_upper_fraction 3 x concurrency 2, or a boost of that)
    scheduler = db.scheduler(
        [task],
        concurrency=2,
        polling_interval=timedelta(milliseconds=50),
        shutdown_max_wait=timedelta(seconds=1),
    )
    operator = scheduler if by == "itself" else db.scheduler([], scheduler_name="operator")
    await db.resolve(
        scheduler.schedule_batch(db.engine, [task.instance(f"b{i}") for i in range(8)])
    )
    async with scheduler:
        try:
            await wait_for(lambda: len(started) == 2 and db.count("picked") >= 6)
            assert await db.resolve(operator.pause(db.engine, "block")) is True
            await wait_for(lambda: db.count("picked") == 2, deadline=5)  # the held handed back
            finish.set()
            await wait_for(lambda: db.count("picked") == 0 and db.count() == 6, deadline=5)
            assert len(started) == 2, started  # nothing held was started after the pause
            assert db.count("consecutive_failures = 0 and last_failure is null") == 6

            assert await db.resolve(operator.resume(db.engine, "block")) is True
            await wait_for(lambda: db.count() == 0, deadline=5)
        finally:
            finish.set()
    assert sorted(started) == sorted(f"b{i}" for i in range(8))
