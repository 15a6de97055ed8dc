"""A payload comes back to the handler exactly as it was given, on both databases: an int
stays an int of the same value, a float a float (issue 13, defect 9).

SQLite gave a top-level number of a column declared JSON its own numeric type (``1.0``
came back ``1``, ``2**63 + 1`` a float); PostgreSQL's jsonb stores numbers as ``numeric``
and wrote ``1e20`` back as an integer.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from sqla_scheduler import ManualClock, RecurringTask, one_time, recurring
from tests.support import NOW, Harness

pytestmark = pytest.mark.anyio


PAYLOADS: list[Any] = [
    1.0,
    1,
    2**63 + 1,
    -(2**64),
    10**400,
    1e20,
    -1.5e300,
    1.7976931348623157e308,
    1e16,
    123456789012345678.0,
    0.1,
    1e-20,
    5e-324,
    "1.0",
    "e+20",
    True,
    None,
    [1.0, 1e20, 2**64, [2.5e22]],
    {"a": 1e20, "b": 1, "c": {"d": 3.0}, "e+": "1e+20"},
]
IDS = [f"{i}:{v!r}"[:30] for i, v in enumerate(PAYLOADS)]


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (``1 == 1.0`` is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def keeper() -> tuple[Any, dict[str, Any]]:
    seen: dict[str, Any] = {}

    def handler(ctx: Any) -> None:
        seen[ctx.instance_id] = ctx.payload

    return one_time("keep")(handler), seen


async def test_payloads_come_back_exactly_from_schedule(db: Harness, clock: ManualClock) -> None:
    task, seen = keeper()
    scheduler = db.scheduler([task], clock)
    for i, payload in enumerate(PAYLOADS):
        await db.resolve(scheduler.schedule(db.engine, task.instance(f"p{i}", payload)))
    assert await scheduler.run_due() == len(PAYLOADS)
    wrong = [(p, seen[f"p{i}"]) for i, p in enumerate(PAYLOADS) if not same(p, seen[f"p{i}"])]
    assert wrong == []


async def test_payloads_come_back_exactly_from_schedule_batch(
    db: Harness, clock: ManualClock
) -> None:
    task, seen = keeper()
    scheduler = db.scheduler([task], clock)
    batch = [task.instance(f"p{i}", payload) for i, payload in enumerate(PAYLOADS)]
    assert await db.resolve(scheduler.schedule_batch(db.engine, batch)) == len(PAYLOADS)
    assert await scheduler.run_due() == len(PAYLOADS)
    wrong = [(p, seen[f"p{i}"]) for i, p in enumerate(PAYLOADS) if not same(p, seen[f"p{i}"])]
    assert wrong == []


async def test_payloads_come_back_exactly_from_reschedule(db: Harness, clock: ManualClock) -> None:
    task, seen = keeper()
    scheduler = db.scheduler([task], clock)
    later = NOW + timedelta(hours=1)
    for i, payload in enumerate(PAYLOADS):
        await db.resolve(scheduler.schedule(db.engine, task.instance(f"p{i}", "old", at=later)))
        moved = scheduler.reschedule(db.engine, "keep", f"p{i}", NOW, payload)
        assert await db.resolve(moved)
    assert await scheduler.run_due() == len(PAYLOADS)
    wrong = [(p, seen[f"p{i}"]) for i, p in enumerate(PAYLOADS) if not same(p, seen[f"p{i}"])]
    assert wrong == []


async def test_a_recurring_tasks_new_payload_comes_back_exactly(
    db: Harness, clock: ManualClock
) -> None:
    """What a recurring handler returns is its next payload, stored by the outcome (a
    ``None`` keeps the payload, so it is left out here)."""
    payloads = [p for p in PAYLOADS if p is not None]
    runs: list[Any] = []

    def step(ctx: Any) -> Any:
        runs.append(ctx.payload)
        return payloads[len(runs) % len(payloads)]

    task: RecurringTask[Any] = recurring("step", "FIXED_DELAY|1s", initial_payload=payloads[0])(
        step
    )
    scheduler = db.scheduler([task], clock)
    for _ in payloads:
        assert await scheduler.run_due() == 1
        clock.advance(timedelta(seconds=1))
    wrong = [(p, r) for p, r in zip(payloads, runs, strict=True) if not same(p, r)]
    assert wrong == []
