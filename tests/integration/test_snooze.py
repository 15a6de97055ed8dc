"""Snooze end to end, on every database: a handler that raises ``Snooze(delay)`` runs
again then with the same payload, and it is not a failure (no failure counted, no retry
spent); ``ctx.snoozes`` counts; history records ``snoozed`` with ``history="all"``; a
naive datetime or a negative delay is a failure naming the problem; a transactional
handler's writes are rolled back; a recurring task's run moves and its schedule stays.
Driven by the manual clock and ``run_due``: no sleeps."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import String, select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from sqla_scheduler import (
    Cron,
    HistoryEntry,
    ManualClock,
    NextAt,
    Scheduler,
    Snooze,
    custom,
    one_time,
    recurring,
)
from tests.support import Harness
from tests.support.clocks import NOW

pytestmark = pytest.mark.anyio

STEP = timedelta(seconds=5)
SNOOZES = 1000


class Base(DeclarativeBase):
    pass


class Note(Base):
    """A row of the application's own, written by a transactional handler."""

    __tablename__ = "snooze_notes"
    key: Mapped[str] = mapped_column(String(100), primary_key=True)


@pytest.fixture
def app(db: Harness) -> Iterator[Harness]:
    Base.metadata.create_all(db.sync_engine)
    yield db
    Base.metadata.drop_all(db.sync_engine)


async def _history(db: Harness, scheduler: Scheduler, **filters: Any) -> list[HistoryEntry]:
    found: list[HistoryEntry] = await db.resolve(
        scheduler.history(db.engine, limit=10 * SNOOZES, **filters)
    )
    return found


async def test_a_thousand_snoozes_in_a_row_count_no_failure_and_spend_no_retry(
    db: Harness, clock: ManualClock
) -> None:
    # A thousand on sync SQLite; a hundred on the other cases, which run the same
    # statements (each database's own) a hundred times: the suite's time budget.
    snoozes = SNOOZES if db.is_sqlite and not db.is_async else SNOOZES // 10
    seen: list[tuple[int, int, dict[str, int]]] = []

    def poll(ctx: Any) -> None:
        seen.append((ctx.snoozes, ctx.consecutive_failures, ctx.payload))
        if ctx.snoozes == snoozes // 2 and ctx.consecutive_failures == 0:
            raise RuntimeError("flaky")
        if ctx.snoozes < snoozes:
            # each form of the delay in turn: seconds, a timedelta, an aware time
            forms = (5, STEP, ctx.execution_time.astimezone(timezone(timedelta(hours=2))) + STEP)
            raise Snooze(forms[ctx.snoozes % 3])

    task = one_time("poll", max_retries=1)(poll)
    scheduler = db.scheduler([task], clock, history="all", retry_base_delay=STEP)
    await db.resolve(scheduler.schedule(db.engine, task.instance("a", {"n": 7})))
    row = db.row("poll", "a")
    assert row is not None
    version = row["version"]
    for n in range(snoozes + 1):
        assert await scheduler.run_due() == 1
        clock.advance(STEP)
        row = db.row("poll", "a")
        assert row is not None
        assert row["version"] == version + 2, "picked, then handed back"
        version = row["version"]
        failed = n >= snoozes // 2
        assert row["execution_time"] == clock.now()
        assert row["consecutive_failures"] == (1 if failed else 0)
        assert (row["last_error"] or "").startswith("RuntimeError: flaky" if failed else "")
        # the failed attempt (the handler saw snoozes // 2 snoozes) kept the count
        assert row["snoozes"] == (n + 1 if n < snoozes // 2 else max(n, snoozes // 2))
        assert row["task_data"] == {"n": 7}
    assert await scheduler.run_due() == 1, "the last snooze's run: it returns"
    assert db.row("poll", "a") is None, "done: the one retry was not spent by the snoozes"

    half = snoozes // 2
    assert [s for s, _, _ in seen] == [*range(half + 1), *range(half, snoozes + 1)]
    assert [f for _, f, _ in seen] == [0] * (half + 1) + [1] * (snoozes - half + 1)
    assert all(payload == {"n": 7} for _, _, payload in seen)
    entries = await _history(db, scheduler, task_name="poll")
    assert [e.outcome for e in entries].count("snoozed") == snoozes
    assert [(e.outcome, e.attempt) for e in entries if e.outcome != "snoozed"] == [
        ("succeeded", 2),
        ("failed", 1),
    ]
    snoozed = [e for e in entries if e.outcome == "snoozed"]
    assert all(e.error is None and e.started_at == e.finished_at for e in snoozed)
    assert {e.attempt for e in snoozed} == {1, 2}


@pytest.mark.parametrize(
    ("delay", "problem"),
    [
        (datetime(2030, 5, 17, 13, 0), "a naive datetime"),
        (timedelta(seconds=-1), "a negative delay"),
        (-0.5, "a negative delay"),
        ("5m", "not a delay"),
    ],
)
async def test_a_snooze_it_cannot_read_is_a_failure_naming_the_problem(
    db: Harness, clock: ManualClock, delay: Any, problem: str
) -> None:
    def nap(ctx: Any) -> None:
        raise Snooze(delay)

    task = one_time("nap")(nap)
    scheduler = db.scheduler([task], clock, retry_base_delay=STEP)
    await db.resolve(scheduler.schedule(db.engine, task.instance("a")))
    assert await scheduler.run_due() == 1
    row = db.row("nap", "a")
    assert row is not None
    assert (row["consecutive_failures"], row["snoozes"]) == (1, 0)
    assert row["execution_time"] == NOW + STEP, "retried as a failure"
    first_line = row["last_error"].splitlines()[0]
    assert "task 'nap'" in first_line
    assert problem in first_line


async def test_a_transactional_handlers_writes_are_rolled_back_by_a_snooze(
    app: Harness, clock: ManualClock
) -> None:
    def write(ctx: Any) -> None:
        ctx.session.add(Note(key=f"note-{ctx.snoozes}"))
        if ctx.snoozes == 0:
            raise Snooze(STEP)

    async def write_async(ctx: Any) -> None:
        write(ctx)

    task = one_time("write", transactional=True)(write_async if app.is_async else write)
    scheduler = app.scheduler([task], clock)
    await app.resolve(scheduler.schedule(app.engine, task.instance("a")))
    assert await scheduler.run_due() == 1
    with app.sync_engine.connect() as conn:
        assert list(conn.scalars(select(Note.key))) == [], "rolled back with the attempt"
    clock.advance(STEP)
    assert await scheduler.run_due() == 1
    with app.sync_engine.connect() as conn:
        assert list(conn.scalars(select(Note.key))) == ["note-1"], "committed with the success"
    assert app.row("write", "a") is None


async def test_a_recurring_tasks_snooze_moves_its_run_and_keeps_its_schedule(
    db: Harness, clock: ManualClock
) -> None:
    seen: list[tuple[datetime, int]] = []

    def hourly(ctx: Any) -> None:
        seen.append((clock.now(), ctx.snoozes))
        if ctx.snoozes < 2:
            raise Snooze(timedelta(minutes=10))

    task = recurring("hourly", Cron("0 0 * * * ?"))(hourly)
    scheduler = db.scheduler([task], clock, history="all")
    clock.set(NOW - timedelta(hours=1))
    assert await scheduler.run_due() == 0  # registers the task, first due at 12:00
    clock.set(NOW)
    for _ in range(3):
        assert await scheduler.run_due() == 1
        clock.advance(timedelta(minutes=10))
    assert seen == [
        (NOW, 0),
        (NOW + timedelta(minutes=10), 1),
        (NOW + timedelta(minutes=20), 2),
    ]
    row = db.row("hourly", "recurring")
    assert row is not None
    assert row["execution_time"] == NOW + timedelta(hours=1), "the schedule's next run"
    assert (row["snoozes"], row["consecutive_failures"]) == (0, 0), "a new run starts at 0"
    outcomes = [e.outcome for e in await _history(db, scheduler, task_name="hourly")]
    assert outcomes == ["succeeded", "snoozed", "snoozed"]


async def test_a_custom_task_snoozes_with_its_payload_and_its_next_run_starts_at_0(
    db: Harness, clock: ManualClock
) -> None:
    seen: list[tuple[Any, int]] = []

    def step(ctx: Any) -> NextAt[Any] | None:
        seen.append((ctx.payload, ctx.snoozes))
        if ctx.snoozes == 0 and ctx.payload["n"] == 1:
            raise Snooze(STEP)
        if ctx.payload["n"] == 1:
            return NextAt(clock.now() + STEP, {"n": 2})
        return None

    task = custom("step")(step)
    scheduler = db.scheduler([task], clock)
    await db.resolve(scheduler.schedule(db.engine, task.instance("a", {"n": 1})))
    for _ in range(3):
        assert await scheduler.run_due() == 1
        clock.advance(STEP)
    assert seen == [({"n": 1}, 0), ({"n": 1}, 1), ({"n": 2}, 0)]
    assert db.row("step", "a") is None


async def test_history_failures_keeps_no_snooze(db: Harness, clock: ManualClock) -> None:
    def nap(ctx: Any) -> None:
        if ctx.snoozes == 0:
            raise Snooze(0)

    task = one_time("nap")(nap)
    scheduler = db.scheduler([task], clock)  # history="failures", the default
    await db.resolve(scheduler.schedule(db.engine, task.instance("a")))
    assert await scheduler.run_due() == 2, "a zero delay: due again at once"
    assert await _history(db, scheduler) == []
