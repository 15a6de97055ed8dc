"""A scheduler whose clock steps (SQLite's default clock is the machine's, which steps with
it): it revives nothing until the live holders have beaten on the new time, and then
only what is dead (SPEC, "Running on time")."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import anyio
import pytest
from sqlalchemy import update

from sqla_scheduler import SystemClock, one_time
from tests.support import Harness, services

pytestmark = pytest.mark.anyio


class SteppedClock(SystemClock):
    """The machine's clock, moved ``step`` by NTP or someone setting the date."""

    def __init__(self) -> None:
        self.step = timedelta(0)

    def now(self) -> datetime:
        return super().now() + self.step


@pytest.mark.parametrize("step", [timedelta(hours=1), timedelta(hours=-1)], ids=["ahead", "back"])
async def test_after_a_clock_step_only_the_dead_are_revived(
    db: Harness, step: timedelta, caplog: pytest.LogCaptureFixture
) -> None:
    clock = SteppedClock()
    job = one_time("job")(lambda ctx: None)
    # dead after two missed heartbeats of 200 ms: a window a loaded machine's start-up of
    # the services and first revival fit in
    scheduler = db.scheduler(
        [job], clock, heartbeat_interval=timedelta(milliseconds=200), missed_heartbeat_limit=2
    )
    for instance in ("live", "dead"):
        await db.resolve(scheduler.schedule(db.engine, job.instance(instance)))

    def beat(*instances: str) -> None:
        """What the holder, another process on this machine, writes as it beats."""
        t = db.table
        with db.sync_engine.begin() as conn:
            conn.execute(
                update(t)
                .where(t.c.task_instance.in_(instances))
                .values(picked=True, picked_by="holder", last_heartbeat=clock.now())
            )

    async with services(scheduler) as runner:
        beat("live", "dead")  # the holder beats for both, up to now
        assert await runner.maintenance.revive_once() == []
        clock.step = step  # the holder's clock steps too: one machine
        with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
            assert await runner.maintenance.revive_once() == []
        assert "this scheduler's clock stepped by" in caplog.text
        # The holder beats for "live" and has died holding "dead": once the live one has
        # beaten on the new time, the dead one is revived, and it alone.
        with anyio.fail_after(10):
            while True:
                beat("live")
                revived = await runner.maintenance.revive_once()
                if revived or step < timedelta(0):
                    break
                await anyio.sleep(0.01)
    if step > timedelta(0):
        assert [e.instance_id for e in revived] == ["dead"]
    else:  # its heartbeat lies in the future: it waits for the clock to get there
        assert revived == []
