"""History: one entry per finished attempt, written in the outcome's own transaction, as
the ``history`` setting says; ``Scheduler.history`` lists them, ``requeue`` brings back an
abandoned or undecodable execution with its payload, pruning keeps the table bounded."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, insert, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler import FixedDelay, HistoryEntry, ManualClock, one_time, recurring
from sqla_scheduler._runner.maintenance import PRUNE_BATCH
from sqla_scheduler.models import history_table
from tests.support import NOW, Harness

# the core of scheduling and running also runs through PgBouncer in transaction mode
# (the sync-pgbouncer case, given nothing but the bouncer's URL), not every module again
pytestmark = [pytest.mark.anyio, pytest.mark.databases(pgbouncer=True)]


class Declined(Exception):
    """The handler's own error."""


def _decline(ctx: Any) -> None:
    raise Declined(f"declined {ctx.instance_id}")


async def _history(db: Harness, scheduler: Any, **filters: Any) -> list[HistoryEntry]:
    return await db.resolve(scheduler.history(db.engine, **filters))  # type: ignore[no-any-return]


async def test_by_default_failures_are_kept_and_successes_are_not(
    db: Harness, clock: ManualClock
) -> None:
    charge = one_time("charge", max_retries=3)(_decline)
    ok = one_time("ok")(lambda ctx: None)
    scheduler = db.scheduler([charge, ok], clock, retry_base_delay=timedelta(seconds=10))
    await db.resolve(scheduler.schedule(db.engine, charge.instance("c1", {"amount": 5})))
    await db.resolve(scheduler.schedule(db.engine, ok.instance("o1")))
    assert await scheduler.run_due() == 2
    clock.advance(timedelta(seconds=11))
    assert await scheduler.run_due() == 1

    entries = await _history(db, scheduler)
    assert [(e.task_name, e.instance_id, e.outcome, e.attempt) for e in entries] == [
        ("charge", "c1", "failed", 2),
        ("charge", "c1", "failed", 1),
    ]
    second, first = entries
    assert first.picked_by == second.picked_by == "test-worker"
    assert first.execution_time == NOW
    assert first.started_at == first.finished_at == NOW  # the manual clock stood still
    assert first.duration == timedelta(0)
    assert second.finished_at == NOW + timedelta(seconds=11)
    assert first.error is not None
    assert first.error.splitlines()[0] == f"{__name__}.Declined: declined c1"
    assert first.data is None  # the execution is still in the table, with its payload
    assert second.id > first.id


async def test_all_keeps_successes_of_every_kind(db: Harness, clock: ManualClock) -> None:
    once = one_time("once")(lambda ctx: None)
    hourly = recurring("hourly", FixedDelay(timedelta(hours=1)))(lambda ctx: None)
    scheduler = db.scheduler([once, hourly], clock, history="all")
    await db.resolve(scheduler.schedule(db.engine, once.instance("a")))
    assert await scheduler.run_due() == 2
    entries = await _history(db, scheduler, outcome="succeeded")
    assert sorted((e.task_name, e.instance_id) for e in entries) == [
        ("hourly", "recurring"),
        ("once", "a"),
    ]
    assert all(e.error is None and e.started_at == NOW for e in entries)
    assert [e.instance_id for e in await _history(db, scheduler, task_name="once")] == ["a"]


async def test_none_keeps_nothing_and_abandons_still_remove(
    db: Harness, clock: ManualClock
) -> None:
    charge = one_time("charge", max_retries=0)(_decline)
    scheduler = db.scheduler([charge], clock, history="none")
    await db.resolve(scheduler.schedule(db.engine, charge.instance("c1")))
    await scheduler.run_due()
    assert db.row("charge", "c1") is None
    assert await _history(db, scheduler) == []


async def test_an_abandoned_execution_keeps_its_payload_and_can_be_requeued(
    db: Harness, clock: ManualClock
) -> None:
    runs: list[Any] = []
    fail = True

    @one_time("charge", max_retries=1)
    def charge(ctx: Any) -> None:
        runs.append(ctx.payload)
        if fail:
            raise Declined("card declined")

    scheduler = db.scheduler([charge], clock, retry_base_delay=timedelta(seconds=1))
    payload = {"amount": 12.5, "n": 3, "tags": ["a", None]}
    await db.resolve(scheduler.schedule(db.engine, charge.instance("c1", payload, priority=4)))
    await scheduler.run_due()
    clock.advance(timedelta(seconds=2))
    await scheduler.run_due()
    assert db.row("charge", "c1") is None

    abandoned, failed = await _history(db, scheduler)
    assert (abandoned.outcome, failed.outcome) == ("abandoned", "failed")
    assert abandoned.attempt == 2
    assert abandoned.data == payload
    assert abandoned.priority == 4
    assert abandoned.started_at == NOW + timedelta(seconds=2)
    assert abandoned.error is not None
    assert abandoned.error.startswith(f"{__name__}.Declined: card declined")

    assert await db.resolve(scheduler.requeue(db.engine, failed.id)) is False  # still here
    assert await db.resolve(scheduler.requeue(db.engine, 10**9)) is False  # no such entry
    clock.advance(timedelta(minutes=5))
    assert await db.resolve(scheduler.requeue(db.engine, abandoned.id)) is True
    assert await db.resolve(scheduler.requeue(db.engine, abandoned.id)) is False  # exists
    row = db.row("charge", "c1")
    assert row is not None
    assert (row["execution_time"], row["priority"], row["consecutive_failures"]) == (
        NOW + timedelta(minutes=5, seconds=2),
        4,
        0,
    )
    fail = False
    runs.clear()
    assert await scheduler.run_due() == 1
    assert runs == [payload]
    assert type(runs[0]["amount"]) is float
    assert db.row("charge", "c1") is None


async def test_requeue_joins_the_callers_transaction(db: Harness, clock: ManualClock) -> None:
    charge = one_time("charge", max_retries=0)(_decline)
    scheduler = db.scheduler([charge], clock)
    await db.resolve(scheduler.schedule(db.engine, charge.instance("c1")))
    await scheduler.run_due()
    (entry,) = await _history(db, scheduler, outcome="abandoned")
    async with db.session() as session:
        assert await db.resolve(scheduler.requeue(session, entry.id)) is True
        await db.rollback(session)
    assert db.row("charge", "c1") is None
    async with db.session() as session:
        assert await db.resolve(scheduler.requeue(session, entry.id)) is True
        await db.commit(session)
    assert db.row("charge", "c1") is not None


@dataclasses.dataclass
class Point:
    x: int


async def test_an_undecodable_payload_goes_to_history_and_comes_back_after_a_fix(
    db: Harness, clock: ManualClock
) -> None:
    strict = one_time("typed", payload_type=Point)(lambda ctx: None)
    scheduler = db.scheduler([strict], clock)
    db.put(task_name="typed", task_instance="bad", task_data={"y": "oops"}, execution_time=NOW)
    assert await scheduler.run_due() == 1
    assert db.row("typed", "bad") is None
    (entry,) = await _history(db, scheduler)
    assert (entry.outcome, entry.data, entry.started_at, entry.attempt) == (
        "undecodable",
        {"y": "oops"},
        None,
        1,
    )
    assert entry.error is not None
    assert "PayloadError" in entry.error.splitlines()[0]

    seen: list[Any] = []
    fixed = one_time("typed")(lambda ctx: seen.append(ctx.payload))
    after_the_fix = db.scheduler([fixed], clock)
    assert await db.resolve(after_the_fix.requeue(db.engine, entry.id)) is True
    assert await after_the_fix.run_due() == 1
    assert seen == [{"y": "oops"}]


async def test_a_dead_attempt_is_recorded_when_it_is_revived(
    db: Harness, clock: ManualClock
) -> None:
    job = one_time("job")(lambda ctx: None)
    scheduler = db.scheduler([job], clock)
    await db.resolve(scheduler.schedule(db.engine, job.instance("started")))
    await db.resolve(scheduler.schedule(db.engine, job.instance("queued")))
    stale = NOW - scheduler.config.dead_after - timedelta(minutes=1)
    with db.sync_engine.begin() as conn:  # what a process killed mid-run leaves behind
        conn.execute(
            update(db.table).values(
                picked=True,
                picked_by="gone-1",
                last_heartbeat=stale,
                version=db.table.c.version + 1,
            )
        )
        conn.execute(
            update(db.table).where(db.table.c.task_instance == "started").values(started_at=stale)
        )
    revived = await scheduler.revive_dead_executions()
    assert sorted(e.instance_id for e in revived) == ["queued", "started"]
    entries = sorted(await _history(db, scheduler), key=lambda entry: entry.instance_id)
    assert [(e.instance_id, e.outcome, e.picked_by) for e in entries] == [
        ("queued", "dead", "gone-1"),
        ("started", "dead", "gone-1"),
    ]
    queued, started = entries
    assert (started.started_at, started.finished_at, started.attempt) == (stale, NOW, 1)
    assert started.error is not None
    assert "no heartbeat from 'gone-1'" in started.error
    # A first attempt's start is not recorded: its handler may have run before the kill.
    assert (queued.started_at, queued.finished_at, queued.attempt) == (None, NOW, 1)
    assert queued.error is not None
    assert "no heartbeat from 'gone-1'" in queued.error
    assert "start was not recorded, so its handler may have run" in queued.error
    # Only the recorded start counts as a failure.
    assert {e.instance_id: e.consecutive_failures for e in revived} == {
        "queued": 0,
        "started": 1,
    }


async def test_an_entry_commits_with_its_outcome_or_not_at_all(
    db: Harness, clock: ManualClock
) -> None:
    """With the history table unwritable, the failure's record cannot commit either: the
    execution stays picked by the version it had, for a revival to hand back."""
    charge = one_time("charge", max_retries=3)(_decline)
    scheduler = db.scheduler(
        [charge], clock, heartbeat_interval=timedelta(milliseconds=50), missed_heartbeat_limit=1
    )
    await db.resolve(scheduler.schedule(db.engine, charge.instance("c1")))
    with db.sync_engine.begin() as conn:
        conn.execute(text("alter table scheduled_tasks_history rename to history_away"))
    try:
        await scheduler.run_due()
    finally:
        with db.sync_engine.begin() as conn:
            conn.execute(text("alter table history_away rename to scheduled_tasks_history"))
    row = db.row("charge", "c1")
    assert row is not None
    assert (row["picked"], row["consecutive_failures"], row["last_error"]) == (True, 0, None)
    assert await _history(db, scheduler) == []


async def test_listing_filters_and_orders_newest_first(db: Harness, clock: ManualClock) -> None:
    a = one_time("a", max_retries=5)(_decline)
    b = one_time("b", max_retries=0)(_decline)
    scheduler = db.scheduler([a, b], clock, retry_base_delay=timedelta(seconds=1))
    await db.resolve(
        scheduler.schedule_batch(db.engine, [a.instance("a1"), a.instance("a2"), b.instance("b1")])
    )
    await scheduler.run_due()
    clock.advance(timedelta(seconds=5))
    await scheduler.run_due()
    everything = await _history(db, scheduler)
    assert [e.id for e in everything] == sorted((e.id for e in everything), reverse=True)
    assert len(everything) == 5
    assert {e.instance_id for e in await _history(db, scheduler, task_name="a")} == {"a1", "a2"}
    assert len(await _history(db, scheduler, instance_id="a1")) == 2
    assert [e.instance_id for e in await _history(db, scheduler, outcome="abandoned")] == ["b1"]
    later = await _history(db, scheduler, since=NOW + timedelta(seconds=5))
    assert sorted(e.instance_id for e in later) == ["a1", "a2"]
    assert len(await _history(db, scheduler, limit=2)) == 2
    with pytest.raises(ValueError, match="unknown outcome 'lost'"):
        scheduler.history(db.engine, outcome="lost")  # type: ignore[call-overload]
    with pytest.raises(
        ValueError, match="limit must be an int from 0 to 9223372036854775807, got -1"
    ):
        scheduler.history(db.engine, limit=-1)
    with pytest.raises(ValueError, match="since"):
        scheduler.history(db.engine, since=datetime(2030, 1, 1))


def _old_entries(db: Harness, count: int) -> None:
    """``count`` entries eight days old, then one of now (``new``)."""
    table = history_table(db.table)
    old = NOW - timedelta(days=8)
    entry = {"task_name": "t", "outcome": "failed", "finished_at": old, "attempt": 1}
    with db.sync_engine.begin() as conn:
        conn.execute(insert(table), [{**entry, "task_instance": f"i{n}"} for n in range(count)])
        conn.execute(insert(table), [{**entry, "task_instance": "new", "finished_at": NOW}])


async def test_pruning_deletes_every_old_entry_in_bounded_batches(
    db: Harness, clock: ManualClock
) -> None:
    """A pass deletes batch after batch until none is left (ten batches and more: the
    rate entries are written at does not outrun it), each batch a statement of its own."""
    scheduler = db.scheduler([], clock, history_retention=timedelta(days=7))
    backlog = PRUNE_BATCH * 12 + 5
    _old_entries(db, backlog)
    deletes: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE"):
            deletes.append(statement)

    engine = db.engine.sync_engine if isinstance(db.engine, AsyncEngine) else db.engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        assert await scheduler.prune_history() == backlog
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert len(deletes) == 13  # twelve full batches, then the five left
    assert await scheduler.prune_history() == 0
    assert [e.instance_id for e in await _history(db, scheduler)] == ["new"]


async def test_a_pass_prunes_for_half_its_interval_at_most(db: Harness, clock: ManualClock) -> None:
    """With a revive interval of 2 ms a pass prunes for 1 ms: its first batch, then it
    stops; the next passes take the rest."""
    scheduler = db.scheduler(
        [], clock, history_retention=timedelta(days=7), heartbeat_interval=timedelta(milliseconds=1)
    )
    backlog = PRUNE_BATCH * 3 + 5
    _old_entries(db, backlog)
    first = await scheduler.prune_history()
    assert 0 < first < backlog
    assert first % PRUNE_BATCH == 0
    pruned = first
    while pruned < backlog:
        done = await scheduler.prune_history()
        assert done > 0
        pruned += done
    assert pruned == backlog
    assert [e.instance_id for e in await _history(db, scheduler)] == ["new"]
