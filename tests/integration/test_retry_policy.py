"""A task's retry policy end to end, on every database: each rule gives up or retries as
it says, the abandon's history entry names the rule, a recurring run given up waits for its
next run, and a ``should_retry`` that raises is a failure of that attempt, not the loop's
end."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from sqla_scheduler import FixedDelay, HistoryEntry, ManualClock, Scheduler, one_time, recurring
from tests.support import Harness
from tests.support.clocks import NOW

pytestmark = pytest.mark.anyio

BASE = timedelta(seconds=10)


class CardDeclined(Exception):
    """Not worth retrying."""


class GatewayDown(Exception):
    """Worth retrying."""


def _raise(ctx: Any) -> None:
    """Raise the error the instance is named after."""
    errors: dict[str, type[Exception]] = {
        "declined": CardDeclined,
        "down": GatewayDown,
        "other": KeyError,
    }
    raise errors[ctx.instance_id.split("-")[0]](ctx.instance_id)


def _raise_key_error(ctx: Any) -> None:
    raise KeyError("missing")


async def _abandoned(db: Harness, scheduler: Scheduler) -> dict[str, str]:
    """The error's last line of each abandoned execution's history entry, by instance."""
    entries: list[HistoryEntry] = await db.resolve(
        scheduler.history(db.engine, outcome="abandoned")
    )
    return {e.instance_id: (e.error or "").splitlines()[-1] for e in entries}


async def _schedule(db: Harness, scheduler: Scheduler, task: Any, *instances: str) -> None:
    for instance in instances:
        await db.resolve(scheduler.schedule(db.engine, task.instance(instance)))


async def test_each_rule_gives_up_or_retries_and_the_abandon_names_it(
    db: Harness, clock: ManualClock
) -> None:
    abandoned: list[str] = []

    def on_abandon(ctx: Any, session: Any) -> None:
        abandoned.append(ctx.instance_id)

    asked: list[int] = []

    def should_retry(error: BaseException, attempt: int) -> bool | timedelta:
        asked.append(attempt)
        return timedelta(minutes=7) if attempt == 1 else False

    options: dict[str, Any] = {"on_abandon": on_abandon, "max_retries": 1}
    give_up = one_time("give_up", give_up_on=CardDeclined, **options)(_raise)
    only = one_time("only", retry_on=(GatewayDown,), **options)(_raise)
    asks = one_time("asks", should_retry=should_retry, **options)(_raise)
    limited = one_time("limited", **options)(_raise)
    scheduler = db.scheduler([give_up, only, asks, limited], clock, retry_base_delay=BASE)
    await _schedule(db, scheduler, give_up, "declined-1", "down-1")
    await _schedule(db, scheduler, only, "other-2", "down-2")
    await _schedule(db, scheduler, asks, "down-3")
    await _schedule(db, scheduler, limited, "declined-4")

    assert await scheduler.run_due() == 6
    assert await _abandoned(db, scheduler) == {
        "declined-1": "(given up: give_up_on CardDeclined)",
        "other-2": "(not in retry_on)",
    }
    assert sorted(abandoned) == ["declined-1", "other-2"], "on_abandon ran for each"
    for task, instance in [("give_up", "down-1"), ("only", "down-2"), ("limited", "declined-4")]:
        row = db.row(task, instance)
        assert row is not None
        assert (row["execution_time"], row["consecutive_failures"]) == (NOW + BASE, 1)
    row = db.row("asks", "down-3")
    assert row is not None
    assert row["execution_time"] == NOW + timedelta(minutes=7), "should_retry's delay"

    clock.advance(timedelta(minutes=7))
    assert await scheduler.run_due() == 4
    assert asked == [1, 2]
    assert await _abandoned(db, scheduler) == {
        "declined-1": "(given up: give_up_on CardDeclined)",
        "other-2": "(not in retry_on)",
        "down-1": "(retry limit 1)",
        "down-2": "(retry limit 1)",
        "down-3": "(should_retry said no)",
        "declined-4": "(retry limit 1)",
    }
    assert len(abandoned) == 6


async def test_a_should_retry_that_raises_is_a_failure_of_the_attempt(
    db: Harness, clock: ManualClock
) -> None:
    def should_retry(error: BaseException, attempt: int) -> bool:
        raise KeyboardInterrupt("the rule is broken")

    flaky = one_time("flaky", should_retry=should_retry, max_retries=1)(_raise)
    scheduler = db.scheduler([flaky], clock, retry_base_delay=BASE)
    await _schedule(db, scheduler, flaky, "down-1")
    assert await scheduler.run_due() == 1
    row = db.row("flaky", "down-1")
    assert row is not None, "the default rule: retried"
    assert (row["execution_time"], row["consecutive_failures"]) == (NOW + BASE, 1)
    clock.advance(BASE)
    assert await scheduler.run_due() == 1, "the loop goes on"
    assert await _abandoned(db, scheduler) == {"down-1": "(retry limit 1)"}


async def test_a_recurring_run_given_up_waits_for_its_next_run(
    db: Harness, clock: ManualClock
) -> None:
    hourly = recurring(
        "hourly",
        FixedDelay(timedelta(hours=1)),
        give_up_on=KeyError,
        retry_base_delay=timedelta(seconds=5),
    )(_raise_key_error)
    scheduler = db.scheduler([hourly], clock)
    assert await scheduler.run_due() == 1
    row = db.row("hourly", "recurring")
    assert row is not None, "a recurring task is never abandoned"
    assert row["execution_time"] == NOW + timedelta(hours=1), "its next run, no retry"
    assert row["consecutive_failures"] == 1
    assert row["last_error"].endswith("\n(given up: give_up_on KeyError)")
    assert await _abandoned(db, scheduler) == {}


async def test_a_tasks_own_backoff_and_jitter_place_the_retry(
    db: Harness, clock: ManualClock
) -> None:
    spread = one_time("spread", retry_base_delay=timedelta(minutes=1), retry_jitter=0.5)(_raise)
    scheduler = db.scheduler([spread], clock)
    await _schedule(db, scheduler, spread, *(f"down-{n}" for n in range(10)))
    assert await scheduler.run_due() == 10
    times = {db.row("spread", f"down-{n}")["execution_time"] for n in range(10)}  # type: ignore[index]
    assert len(times) > 5, "spread out"
    assert all(NOW + timedelta(seconds=30) <= t <= NOW + timedelta(minutes=1) for t in times)
