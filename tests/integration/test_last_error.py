"""The error of an execution's last failed attempt: on its row, in ``Execution.last_error``,
handed to the next attempt as ``ctx.last_error`` and to ``on_abandon``; a success clears it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from sqla_scheduler import (
    FixedDelay,
    ManualClock,
    Scheduler,
    SchedulerConfig,
    one_time,
    recurring,
)
from sqla_scheduler.listeners import SchedulerListener
from tests.support import Harness

pytestmark = pytest.mark.anyio

#: The most characters of error text a row keeps.
CAP = 4096


class CardDeclined(Exception):
    """A handler's own exception type."""


def _charge(ctx: Any) -> None:
    raise CardDeclined(f"card declined for {ctx.instance_id}")


async def _stored(db: Harness, scheduler: Scheduler, task: str, instance: str) -> str | None:
    """The error text as the row holds it, checked against ``get_execution``'s."""
    row = db.row(task, instance)
    assert row is not None
    execution = await db.resolve(scheduler.get_execution(db.engine, task, instance))
    assert execution is not None
    assert execution.last_error == row["last_error"]
    return row["last_error"]  # type: ignore[no-any-return]


async def test_a_failure_keeps_type_message_and_traceback(db: Harness, clock: ManualClock):
    charge = one_time("charge")(_charge)
    scheduler = db.scheduler([charge], clock)
    await db.resolve(scheduler.schedule(db.engine, charge.instance("order-7")))
    assert await scheduler.run_due() == 1
    error = await _stored(db, scheduler, "charge", "order-7")
    assert error is not None
    first, *rest = error.splitlines()
    assert first == f"{__name__}.CardDeclined: card declined for order-7"
    assert rest[0] == "Traceback (most recent call last):"
    assert any("in _charge" in line for line in rest)
    assert rest[-1].strip() == 'raise CardDeclined(f"card declined for {ctx.instance_id}")'
    listed = await db.resolve(scheduler.executions(db.engine, "failing"))
    assert [e.last_error for e in listed] == [error]


async def test_the_next_attempt_gets_the_previous_error(db: Harness, clock: ManualClock):
    seen: list[str | None] = []

    @one_time("flaky", max_retries=5)
    def flaky(ctx: Any) -> None:
        seen.append(ctx.last_error)
        raise RuntimeError(f"attempt {len(seen)}")

    scheduler = db.scheduler([flaky], clock, retry_base_delay=timedelta(seconds=1))
    await db.resolve(scheduler.schedule(db.engine, flaky.instance("f")))
    await scheduler.run_due()
    after_first = await _stored(db, scheduler, "flaky", "f")
    clock.advance(timedelta(minutes=1))
    await scheduler.run_due()
    assert seen[0] is None
    assert seen[1] == after_first
    assert after_first is not None
    assert after_first.startswith("RuntimeError: attempt 1\n")
    assert (await _stored(db, scheduler, "flaky", "f") or "").startswith("RuntimeError: attempt 2")


async def test_a_success_clears_the_error(db: Harness, clock: ManualClock):
    seen: list[str | None] = []

    @recurring("sweep", FixedDelay(timedelta(minutes=5)))
    def sweep(ctx: Any) -> None:
        seen.append(ctx.last_error)
        if len(seen) == 1:
            raise OSError("disk full")

    scheduler = db.scheduler([sweep], clock, retry_base_delay=timedelta(seconds=1))
    await scheduler.run_due()
    failed = db.row("sweep", "recurring")
    assert failed is not None
    assert failed["last_error"].startswith("OSError: disk full")
    clock.advance(timedelta(minutes=5))
    await scheduler.run_due()
    assert seen == [None, failed["last_error"]]
    succeeded = db.row("sweep", "recurring")
    assert succeeded is not None
    assert succeeded["last_error"] is None
    assert succeeded["consecutive_failures"] == 0
    assert succeeded["last_failure"] == failed["last_failure"], "the time of it stays"
    clock.advance(timedelta(minutes=5))
    await scheduler.run_due()
    assert seen[2] is None


def _raise_chained(links: int, message: str) -> None:
    """Raise ``ValueError(message)`` from a chain of ``links`` causes, each one with its
    own traceback (a recursion's repeated frames would be folded into one line)."""
    cause: BaseException | None = None
    for link in range(links):
        try:
            raise KeyError(f"link {link}") from cause
        except KeyError as exc:
            cause = exc
    raise ValueError(message) from cause


@pytest.mark.parametrize(
    ("links", "message"),
    [(100, "deep down"), (0, "x" * 100_000), (100, "y" * 100_000)],
    ids=["long-traceback", "long-message", "both"],
)
async def test_a_long_error_is_cut_to_the_cap(
    db: Harness, clock: ManualClock, links: int, message: str
):
    @one_time("deep")
    def deep(ctx: Any) -> None:
        _raise_chained(links, message)

    scheduler = db.scheduler([deep], clock)
    await db.resolve(scheduler.schedule(db.engine, deep.instance("d")))
    await scheduler.run_due()
    error = await _stored(db, scheduler, "deep", "d")
    assert error is not None
    assert len(error) <= CAP
    lines = error.splitlines()
    assert lines[0].startswith(f"ValueError: {message[:500]}")
    assert "characters cut" in error
    assert "Traceback (most recent call last):" in lines
    if links:  # the first cause, and the last exception's traceback from the handler on
        assert "KeyError: 'link 0'" in lines
        assert "KeyError: 'link 99'" in lines
    assert any("in deep" in line for line in lines)
    assert lines[-1].strip() == "raise ValueError(message) from cause"


#: Messages no text column can hold as they are, by instance id.
ODD_TEXTS = {"nul": "a\x00b", "surrogate": "c\udcffd", "plain": "ok"}


async def test_nul_and_lone_surrogates_are_stored_escaped(db: Harness, clock: ManualClock):
    @one_time("odd")
    def odd(ctx: Any) -> None:
        raise ValueError(ODD_TEXTS[ctx.instance_id])  # no payload can carry them either

    scheduler = db.scheduler([odd], clock)
    # In one batch: the bad text must not fail the others' outcomes.
    for name in ODD_TEXTS:
        await db.resolve(scheduler.schedule(db.engine, odd.instance(name)))
    assert await scheduler.run_due() == 3
    errors = {name: await _stored(db, scheduler, "odd", name) or "" for name in ODD_TEXTS}
    assert errors["plain"].startswith("ValueError: ok\n")
    assert errors["nul"].startswith("ValueError: a\\x00b\n")
    assert errors["surrogate"].startswith("ValueError: c\\udcffd\n")
    for name in ODD_TEXTS:
        row = db.row("odd", name)
        assert row is not None
        assert row["consecutive_failures"] == 1


async def test_on_abandon_sees_the_final_error(db: Harness, clock: ManualClock):
    hooked: list[str | None] = []
    heard: list[tuple[str | None, str]] = []
    hook_fails = [True]

    def on_abandon(ctx: Any, session: Any) -> None:
        hooked.append(ctx.last_error)
        if hook_fails[0]:
            hook_fails[0] = False
            raise RuntimeError("dead-letter store is down")

    class Listener(SchedulerListener):
        def on_abandon(self, context: Any, error: BaseException | None) -> None:
            heard.append((context.last_error, repr(error)))

    calls: list[int] = []

    @one_time("doomed", max_retries=1, on_abandon=on_abandon)
    def doomed(ctx: Any) -> None:
        calls.append(1)
        raise ValueError(f"attempt {len(calls)}")

    scheduler = Scheduler(
        db.engine,
        [doomed],
        SchedulerConfig(retry_base_delay=timedelta(seconds=1), scheduler_name="test-worker"),
        clock=clock,
        listeners=[Listener()],
    )
    await db.resolve(scheduler.schedule(db.engine, doomed.instance("d")))
    for _ in range(4):
        await scheduler.run_due()
        clock.advance(timedelta(minutes=5))
    assert calls == [1, 1]
    assert db.row("doomed", "d") is None
    # the failed hook kept the row with the handler's final error, and saw it again
    assert len(hooked) == 2
    assert all(e is not None and e.startswith("ValueError: attempt 2\n") for e in hooked)
    # the retried abandon is of a spent execution: no exception, the error text still there
    assert heard == [(hooked[1], "None")]
