"""Handlers that misbehave at random (raise anything, return anything, block briefly)
beside handlers that behave: every execution comes to the outcome its behaviour calls for,
the good ones all run, and the scheduler goes on (issue 13, property tests)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete

from sqla_scheduler import ManualClock, NextAt, Scheduler, SchedulerConfig, custom, one_time
from tests.support import NOW, Harness

pytestmark = pytest.mark.anyio


class Odd(BaseException):
    """Neither an Exception nor one of the interpreter's own."""


RAISES = [
    ValueError("bad value"),
    RuntimeError("boom"),
    KeyError("k"),
    RecursionError("deep"),
    MemoryError(),
    SystemExit(0),
    SystemExit("bye"),
    KeyboardInterrupt(),
    GeneratorExit(),
    Odd("odd"),
    asyncio.CancelledError("the handler's own"),
]
LATER = NOW + timedelta(hours=1)
RETURNS = [None, 0, "text", [1, 2], {"a": object()}, NextAt(LATER), object(), b"bytes", 1e300]

#: One behaviour: ("raise", error) | ("return", value), run sync or async, after a pause.
behaviour = st.tuples(
    st.one_of(
        st.tuples(st.just("raise"), st.sampled_from(RAISES)),
        st.tuples(st.just("return"), st.sampled_from(RETURNS)),
    ),
    st.sampled_from(["sync", "async"]),
    st.sampled_from([0.0, 0.001, 0.005]),
)


def act(plan: tuple[tuple[str, Any], str, float]) -> Any:
    (what, value), _, _ = plan
    if what == "raise":
        raise value
    return value


def expected(kind: str, plan: tuple[tuple[str, Any], str, float]) -> str:
    """What the execution's row should come to: ``gone``, ``failed`` (kept, one failure)
    or ``later`` (a custom task's ``NextAt``: kept, no failure, at its new time)."""
    (what, value), _, _ = plan
    if what == "raise":
        return "failed"
    if kind == "one_time":
        return "failed" if isinstance(value, NextAt) else "gone"
    if isinstance(value, NextAt):
        return "later"
    return "gone" if value is None else "failed"  # custom: None ends it, anything else fails


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plans=st.lists(st.tuples(st.sampled_from(["one_time", "custom"]), behaviour), max_size=12))
async def test_every_execution_comes_to_the_outcome_its_handler_calls_for(
    db: Harness, plans: list[tuple[str, tuple[tuple[str, Any], str, float]]]
) -> None:
    with db.sync_engine.begin() as conn:
        conn.execute(delete(db.table))
    by_id = {f"{i}": plan for i, plan in enumerate(plans)}

    def sync_handler(ctx: Any) -> Any:
        plan = by_id[ctx.instance_id]
        time.sleep(plan[1][2])
        return act(plan[1])

    async def async_handler(ctx: Any) -> Any:
        plan = by_id[ctx.instance_id]
        await anyio.sleep(plan[1][2])
        return act(plan[1])

    def dispatching(ctx: Any) -> Any:
        if by_id[ctx.instance_id][1][1] == "async":
            return async_handler(ctx)
        return sync_handler(ctx)

    tasks = [
        one_time("one_time", max_retries=5)(dispatching),
        custom("custom", max_retries=5)(dispatching),
        one_time("good")(lambda ctx: None),
    ]
    scheduler = Scheduler(
        db.engine,
        tasks,
        SchedulerConfig(retry_base_delay=timedelta(minutes=1)),
        clock=ManualClock(NOW),
    )
    by_name = {t.name: t for t in tasks}
    instances = [by_name[kind].instance(i) for i, (kind, _) in zip(by_id, plans, strict=True)]
    instances.append(by_name["good"].instance("after"))
    await db.resolve(scheduler.schedule_batch(db.engine, instances))

    assert await scheduler.run_due() == len(plans) + 1
    assert db.row("good", "after") is None, "the good execution ran"
    for instance_id, (kind, plan) in by_id.items():
        row = db.row(kind, instance_id)
        outcome = expected(kind, plan)
        if outcome == "gone":
            assert row is None, (instance_id, plan)
            continue
        assert row is not None, (instance_id, plan)
        assert row["picked"] is False, (instance_id, plan)
        if outcome == "later":
            assert (row["consecutive_failures"], row["execution_time"]) == (0, LATER)
        else:
            assert row["consecutive_failures"] == 1, (instance_id, plan)
    assert db.count("picked") == 0
    assert await scheduler.run_due() == 0, "nothing runs again before its retry"
