"""The loop's services, one ``run_once`` at a time, on a ``ManualClock``.

No loop runs here: each test drives the picker, executor, completer, heartbeater and
maintenance by hand, against the real database, and looks at the rows in between.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, update

from sqla_scheduler import ManualClock, Scheduler, one_time
from sqla_scheduler._runner import Runner
from sqla_scheduler._runner.held import Held, HeldSet
from sqla_scheduler._runner.outcomes import Outcome
from tests.support import NOW, Harness, services
from tests.support.builders import execution_at

pytestmark = pytest.mark.anyio


@contextlib.contextmanager
def statements(db: Harness) -> Any:
    """The SQL statements the code under test sends, as a list filled in as they go."""
    sent: list[str] = []
    engine = db.engine.sync_engine if db.is_async else db.engine

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement.lstrip().split(None, 1)[0].upper())

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


async def schedule(db: Harness, scheduler: Scheduler, task: Any, *ids: str) -> None:
    await db.resolve(scheduler.schedule_batch(db.engine, [task.instance(i) for i in ids]))


def run(held: HeldSet, executions: Iterable[Held]) -> None:
    """What workers do with ``executions``: start each and finish it (its outcome is not
    recorded: it stays held)."""
    for one in executions:
        held.start(one)
        held.finish(one)


# --- picker ---------------------------------------------------------------------------


@asynccontextmanager
async def _picking(db: Harness, clock: ManualClock, *, due: int) -> AsyncIterator[Runner]:
    """The services of a scheduler of one task, ``job``, with ``due`` executions due, that
    runs 4 at once and picks up to 4 outstanding once under 2 are."""
    task = one_time("job")(lambda ctx: None)
    scheduler = db.scheduler(
        [task], clock, concurrency=4, pick_lower_fraction=0.5, pick_upper_fraction=1.0
    )
    await schedule(db, scheduler, task, *(f"j{i:02}" for i in range(due)))
    async with services(scheduler) as runner:
        yield runner


async def test_a_pick_fills_up_to_the_upper_limit_and_waits_for_the_lower(
    db: Harness, clock: ManualClock
):
    async with _picking(db, clock, due=20) as runner:
        picker, held = runner.picker, runner.held
        # One is still queued (the workers did not starve): no backlog boost on this pick.
        held.hold(execution_at(NOW, instance_id="queued"))
        first = await picker.run_once()
        assert len(first) == 3, "up to the upper limit of 4 outstanding"
        assert held.outstanding == 4
        assert picker.boost == 1
        assert db.count("picked") == 3
        assert not picker.wants_work(), "4 outstanding is above the lower limit of 2"
        run(held, first[:2])  # two finished
        assert held.outstanding == 2
        assert picker.wants_work()
        assert picker.wants_more()
        second = await picker.run_once()
        assert len(second) == 2, "tops up to the upper limit, not by a whole pick"
        assert db.count("picked") == 5
        assert {h.key for h in first}.isdisjoint(h.key for h in second)


async def test_a_drained_queue_boosts_the_pick_until_one_comes_back_short(
    db: Harness, clock: ManualClock
):
    async with _picking(db, clock, due=30) as runner:
        picker = runner.picker
        # Nothing outstanding and a full pick: the workers starved between picks.
        picked = await picker.run_once()
        assert len(picked) == 4
        assert (picker.boost, picker.high, picker.low) == (2, 8, 4)
        run(runner.held, picked)
        picked = await picker.run_once()
        assert len(picked) == 8
        assert (picker.boost, picker.high) == (4, 16)
        run(runner.held, picked)
        picked = await picker.run_once()
        assert len(picked) == 16
        run(runner.held, picked)
        assert len(await picker.run_once()) == 2, "only 2 were left"
        assert (picker.boost, picker.more_due) == (1, False)


# --- executor and completer -----------------------------------------------------------


async def test_outcomes_wait_for_the_completer_and_commit_as_one_statement(
    db: Harness, clock: ManualClock
):
    ran: list[str] = []
    task = one_time("job")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler([task], clock)
    await schedule(db, scheduler, task, "a", "b", "c")
    async with services(scheduler) as runner:
        picked = await runner.picker.run_once()
        outcomes = [await runner.executor.run_once(held) for held in picked]
        assert sorted(ran) == ["a", "b", "c"]
        assert db.count("picked") == 3, "the executor records no outcome itself"
        for outcome in outcomes:
            runner.completer.submit(outcome)
        with statements(db) as sent:
            await runner.completer.run_once()
        assert sent.count("DELETE") == 1, sent
        assert db.count() == 0
        assert len(runner.held) == 0


async def test_a_failure_becomes_a_retry_recorded_by_the_completer(db: Harness, clock: ManualClock):
    def fail(ctx: Any) -> None:
        raise ValueError("nope")

    task = one_time("job")(fail)
    scheduler = db.scheduler([task], clock, retry_base_delay=timedelta(minutes=1))
    await schedule(db, scheduler, task, "j")
    async with services(scheduler) as runner:
        [held] = await runner.picker.run_once()
        outcome = await runner.executor.run_once(held)
        assert isinstance(outcome, Outcome)
        assert outcome.decision is not None
        runner.completer.submit(outcome)
        await runner.completer.run_once()
    row = db.row("job", "j")
    assert row is not None
    assert (row["picked"], row["consecutive_failures"]) == (False, 1)
    assert row["execution_time"] == NOW + timedelta(minutes=1)


# --- heartbeater ----------------------------------------------------------------------


async def test_heartbeats_refresh_what_is_held_and_flag_what_was_taken_over(
    db: Harness, clock: ManualClock, caplog: pytest.LogCaptureFixture
):
    task = one_time("long")(lambda ctx: None)
    config = {"heartbeat_interval": timedelta(seconds=10), "missed_heartbeat_limit": 6}
    scheduler = db.scheduler([task], clock, **config)
    other = db.scheduler([task], clock, scheduler_name="other", **config)
    await schedule(db, scheduler, task, "kept", "taken")
    async with services(scheduler) as runner, services(other) as reviver:
        await runner.picker.run_once()
        assert db.row("long", "kept")["last_heartbeat"] == NOW  # type: ignore[index]
        # Past dead_after (60 s) in all, but never 60 s without a beat: still ours.
        for _ in range(10):
            clock.advance(timedelta(seconds=10))
            assert await runner.heartbeater.run_once() == 2
            assert await reviver.maintenance.revive_once() == []
        kept = db.row("long", "kept")
        assert kept is not None
        assert (kept["picked_by"], kept["last_heartbeat"]) == ("test-worker", clock.now())

        with db.sync_engine.begin() as conn:  # revived and picked again elsewhere
            conn.execute(
                update(db.table)
                .where(db.table.c.task_instance == "taken")
                .values(version=db.table.c.version + 1, picked_by="other")
            )
        with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
            assert await runner.heartbeater.run_once() == 1
        lost = {h.execution.instance_id: h.lost for h in runner.held}
        assert lost == {"kept": False, "taken": True}
        assert "version mismatch: heartbeat of long/taken" in caplog.text
        assert await runner.heartbeater.run_once() == 1, "a lost execution gets no beat"


# --- maintenance ----------------------------------------------------------------------


async def test_maintenance_revives_what_stopped_beating_and_its_outcome_is_not_recorded(
    db: Harness, clock: ManualClock, caplog: pytest.LogCaptureFixture
):
    task = one_time("job")(lambda ctx: None)
    config = {"heartbeat_interval": timedelta(seconds=10), "missed_heartbeat_limit": 6}
    crashed = db.scheduler([task], clock, scheduler_name="crashed", **config)
    survivor = db.scheduler([task], clock, **config)
    await schedule(db, crashed, task, "j")
    async with services(crashed) as dead, services(survivor) as alive:
        [held] = await dead.picker.run_once()
        clock.advance(timedelta(seconds=59))
        await alive.maintenance.run_once()
        assert db.row("job", "j")["picked"] is True  # type: ignore[index]
        clock.advance(timedelta(seconds=2))
        await alive.maintenance.run_once()
        revived = db.row("job", "j")
        assert revived is not None
        assert (revived["picked"], revived["picked_by"]) == (False, None)
        assert revived["consecutive_failures"] == 0, "its handler never started"
        # The process that lost it comes back and finishes: nothing is recorded.
        outcome = await dead.executor.run_once(held)
        dead.completer.submit(outcome)
        with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
            await dead.completer.run_once()
    assert "version mismatch: remove of job/j" in caplog.text
    assert db.row("job", "j") is not None


async def test_maintenance_deletes_only_old_orphans(db: Harness, clock: ManualClock):
    task = one_time("known")(lambda ctx: None)
    scheduler = db.scheduler([task], clock, delete_unresolved_after=timedelta(days=14))
    for instance, age in (("old", timedelta(days=15)), ("young", timedelta(days=13))):
        db.put(
            task_name="gone",
            task_instance=instance,
            task_data=None,
            execution_time=NOW - age,
            picked=False,
            consecutive_failures=0,
            version=1,
            priority=0,
        )
    await schedule(db, scheduler, task, "mine")
    async with services(scheduler) as runner:
        await runner.maintenance.run_once()
    assert db.row("gone", "old") is None
    assert db.row("gone", "young") is not None
    assert db.row("known", "mine") is not None
