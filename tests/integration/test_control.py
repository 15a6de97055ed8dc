"""Pause and resume (cluster-wide, persistent), and run now, through the public API on
every database; the pause across real processes is in tests/concurrency."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from sqla_scheduler import (
    FixedRate,
    ManualClock,
    TaskDefinitionError,
    one_time,
    recurring,
)
from tests.support import NOW, Harness

# the core of scheduling and running also runs through PgBouncer in transaction mode
# (the sync-pgbouncer case, given nothing but the bouncer's URL), not every module again
pytestmark = [pytest.mark.anyio, pytest.mark.databases(pgbouncer=True)]


def _tasks(ran: list[str]) -> list[Any]:
    return [
        one_time("mail")(lambda ctx: ran.append(f"mail/{ctx.instance_id}")),
        one_time("sms")(lambda ctx: ran.append(f"sms/{ctx.instance_id}")),
    ]


async def test_a_paused_task_is_not_picked_until_it_is_resumed(
    db: Harness, clock: ManualClock
) -> None:
    ran: list[str] = []
    mail, sms = _tasks(ran)
    scheduler = db.scheduler([mail, sms], clock)
    assert await db.resolve(scheduler.pause(db.engine, "mail")) is True
    assert await db.resolve(scheduler.pause(db.engine, "mail")) is False  # already
    assert await db.resolve(scheduler.paused_tasks(db.engine)) == frozenset({"mail"})
    # scheduling still works; only picking stops
    assert await db.resolve(scheduler.schedule(db.engine, mail.instance("m1")))
    assert await db.resolve(scheduler.schedule(db.engine, sms.instance("s1")))
    assert await scheduler.run_due() == 1
    assert ran == ["sms/s1"]
    # another scheduler on the same table sees the pause: it is in the database
    other = db.scheduler([mail], clock, scheduler_name="other")
    assert await other.run_due() == 0

    assert await db.resolve(scheduler.resume(db.engine, "mail")) is True
    assert await db.resolve(scheduler.resume(db.engine, "mail")) is False  # not paused
    assert await db.resolve(scheduler.paused_tasks(db.engine)) == frozenset()
    assert await other.run_due() == 1
    assert ran == ["sms/s1", "mail/m1"]


async def test_a_pause_joins_the_callers_transaction(db: Harness, clock: ManualClock) -> None:
    scheduler = db.scheduler(_tasks([]), clock)
    async with db.session() as session:
        assert await db.resolve(scheduler.pause(session, "mail")) is True
        await db.rollback(session)
    assert await db.resolve(scheduler.paused_tasks(db.engine)) == frozenset()


async def test_a_recurring_run_missed_while_paused_runs_once_on_resume(
    db: Harness, clock: ManualClock
) -> None:
    runs: list[datetime] = []
    tick = recurring("tick", FixedRate(timedelta(minutes=1)))(
        lambda ctx: runs.append(ctx.execution_time)
    )
    scheduler = db.scheduler([tick], clock)
    assert await scheduler.run_due() == 1  # the first run, due at registration
    await db.resolve(scheduler.pause(db.engine, "tick"))
    clock.advance(timedelta(minutes=10))  # ten runs missed
    assert await scheduler.run_due() == 0
    await db.resolve(scheduler.resume(db.engine, "tick"))
    assert await scheduler.run_due() == 1  # once, not once per missed slot
    assert await scheduler.run_due() == 0
    row = db.row("tick", "recurring")
    assert row is not None
    assert row["execution_time"] == NOW + timedelta(minutes=11)  # the schedule goes on
    assert len(runs) == 2


async def test_pause_names_must_be_task_names(db: Harness, clock: ManualClock) -> None:
    scheduler = db.scheduler([], clock)
    with pytest.raises(TaskDefinitionError, match="task name"):
        scheduler.pause(db.engine, "")
    with pytest.raises(TaskDefinitionError, match="task name"):
        scheduler.resume(db.engine, "x" * 101)


async def test_run_now_makes_an_execution_due_keeping_its_schedule(
    db: Harness, clock: ManualClock
) -> None:
    payloads: list[Any] = []
    hourly = recurring("hourly", "CRON|0 0 * * * ?")(lambda ctx: payloads.append(ctx.payload))
    later = one_time("later")(lambda ctx: payloads.append(ctx.payload))
    scheduler = db.scheduler([hourly, later], clock)
    clock.advance(timedelta(minutes=10))
    await scheduler.run_due()  # registers hourly, due at 13:00; nothing runs
    assert payloads == []
    at = NOW + timedelta(days=1)
    await db.resolve(scheduler.schedule(db.engine, later.instance("l1", {"n": 1}, at=at)))

    assert await db.resolve(scheduler.run_now(db.engine, "hourly")) is True
    assert await db.resolve(scheduler.run_now(db.engine, "later", "l1")) is True
    assert await scheduler.run_due() == 2
    assert sorted(payloads, key=str) == [None, {"n": 1}]
    row = db.row("hourly", "recurring")
    assert row is not None
    assert row["execution_time"] == NOW + timedelta(hours=1)  # its next regular run

    assert await db.resolve(scheduler.run_now(db.engine, "later", "l1")) is False  # gone
    assert await db.resolve(scheduler.run_now(db.engine, "nothing")) is False
    with db.sync_engine.begin() as conn:  # a scheduler holds it
        conn.execute(update(db.table).values(picked=True, picked_by="elsewhere"))
    assert await db.resolve(scheduler.run_now(db.engine, "hourly")) is False


async def test_control_needs_no_registered_task(db: Harness, clock: ManualClock) -> None:
    """An operator's client pauses a task that only the workers register."""
    ran: list[str] = []
    operator = db.scheduler([], clock, scheduler_name="operator")
    assert await db.resolve(operator.pause(db.engine, "mail"))
    worker = db.scheduler(_tasks(ran), clock, scheduler_name="worker")
    await db.resolve(worker.schedule(db.engine, worker.task("mail").instance("m1")))
    assert await worker.run_due() == 0
    assert await db.resolve(operator.resume(db.engine, "mail"))
    assert await worker.run_due() == 1
