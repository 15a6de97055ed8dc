"""Interceptors: run in order around the handler, see its result and its exception."""

from __future__ import annotations

from typing import Any

import pytest

from sqla_scheduler import (
    ExecutionContext,
    ExecutionInterceptor,
    ManualClock,
    NextAt,
    Scheduler,
    Task,
    custom,
    one_time,
)
from sqla_scheduler.interceptors import CallNext
from sqla_scheduler.listeners import SchedulerListener
from tests.support import NOW, Harness

pytestmark = pytest.mark.anyio


class Recording(ExecutionInterceptor):
    def __init__(self, name: str, log: list[Any]) -> None:
        self.name = name
        self.log = log

    async def intercept(self, context: ExecutionContext[Any], call_next: CallNext) -> Any:
        self.log.append((self.name, "before", context.instance_id))
        try:
            result = await call_next()
        except Exception as exc:
            self.log.append((self.name, "raised", repr(exc)))
            raise
        self.log.append((self.name, "returned", result))
        return result


class Listener(SchedulerListener):
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def on_start(self, context: Any) -> None:
        self.log.append(("listener", "start"))

    def on_success(self, context: Any, duration: Any) -> None:
        self.log.append(("listener", "success"))

    def on_failure(self, context: Any, error: BaseException, duration: Any) -> None:
        self.log.append(("listener", "failure"))


def _recording(db: Harness, task: Task[Any], log: list[Any]) -> Scheduler:
    """A scheduler of ``task`` that records into ``log``: through its listener, and two
    interceptors, ``outer`` around ``inner``."""
    return Scheduler(
        db.engine,
        [task],
        clock=ManualClock(NOW),
        listeners=[Listener(log)],
        interceptors=[Recording("outer", log), Recording("inner", log)],
    )


@pytest.mark.parametrize("handler_kind", ["sync", "async"])
async def test_interceptors_run_in_order_around_the_handler(db: Harness, handler_kind: str):
    log: list[Any] = []
    if handler_kind == "sync":

        def handler(ctx: Any) -> None:
            log.append(("handler", ctx.payload))
    else:

        async def handler(ctx: Any) -> None:
            log.append(("handler", ctx.payload))

    task = one_time("email")(handler)
    scheduler = _recording(db, task, log)
    await db.resolve(scheduler.schedule(db.engine, task.instance("e-1", 7)))
    assert await scheduler.run_due() == 1
    assert log == [
        ("listener", "start"),
        ("outer", "before", "e-1"),
        ("inner", "before", "e-1"),
        ("handler", 7),
        ("inner", "returned", None),
        ("outer", "returned", None),
        ("listener", "success"),
    ]
    assert db.count() == 0


@pytest.mark.parametrize("handler_kind", ["sync", "async"])
async def test_exceptions_propagate_through_interceptors(db: Harness, handler_kind: str):
    log: list[Any] = []
    if handler_kind == "sync":

        def handler(ctx: Any) -> None:
            raise ValueError("boom")
    else:

        async def handler(ctx: Any) -> None:
            raise ValueError("boom")

    task = one_time("email")(handler)
    scheduler = _recording(db, task, log)
    await db.resolve(scheduler.schedule(db.engine, task.instance("e-1")))
    assert await scheduler.run_due() == 1
    assert log == [
        ("listener", "start"),
        ("outer", "before", "e-1"),
        ("inner", "before", "e-1"),
        ("inner", "raised", "ValueError('boom')"),
        ("outer", "raised", "ValueError('boom')"),
        ("listener", "failure"),  # reported once, by the listener
    ]
    execution = await db.resolve(scheduler.get_execution(db.engine, "email", "e-1"))
    assert execution.consecutive_failures == 1


async def test_the_result_passes_through_and_an_interceptor_may_replace_it(db: Harness):
    clock = ManualClock(NOW)
    seen: list[Any] = []

    @custom("poll")
    async def poll(ctx: Any) -> NextAt | None:
        return NextAt(NOW, {"round": ctx.payload["round"] + 1})

    class Stop(ExecutionInterceptor):
        async def intercept(self, context: ExecutionContext[Any], call_next: CallNext) -> Any:
            result = await call_next()
            seen.append(result)
            return None if result.payload["round"] >= 2 else result

    scheduler = Scheduler(db.engine, [poll], clock=clock, interceptors=[Stop()])
    await db.resolve(scheduler.schedule(db.engine, poll.instance("p", {"round": 0})))
    assert await scheduler.run_due() == 2
    assert [r.payload for r in seen] == [{"round": 1}, {"round": 2}]
    assert db.count() == 0


async def test_a_plain_interceptor_changes_nothing_and_captures_nothing(db: Harness):
    ran: list[str] = []

    @one_time("t")
    def task(ctx: Any) -> None:
        ran.append(ctx.instance_id)
        assert ctx.trace_context is None

    scheduler = Scheduler(
        db.engine, [task], clock=ManualClock(NOW), interceptors=[ExecutionInterceptor()]
    )
    await db.resolve(scheduler.schedule_batch(db.engine, [task.instance("a"), task.instance("b")]))
    assert db.count("trace_context is null") == 2
    assert await scheduler.run_due() == 2
    assert ran == ["a", "b"]


@pytest.mark.parametrize("batch", [1, 3])
async def test_captured_contexts_are_stored_and_handed_to_the_execution(db: Harness, batch: int):
    contexts: list[Any] = []

    class Capturing(ExecutionInterceptor):
        def __init__(self, key: str) -> None:
            self.key = key

        def capture_context(self) -> dict[str, str]:
            return {self.key: "v"}

    @one_time("t")
    def task(ctx: Any) -> None:
        contexts.append(ctx.trace_context)

    scheduler = Scheduler(
        db.engine,
        [task],
        clock=ManualClock(NOW),
        interceptors=[Capturing("traceparent"), Capturing("tracestate")],
    )
    instances = [task.instance(f"i-{n}") for n in range(batch)]
    if batch == 1:
        await db.resolve(scheduler.schedule(db.engine, instances[0]))
    else:
        await db.resolve(scheduler.schedule_batch(db.engine, instances))
    assert await scheduler.run_due() == batch
    assert contexts == [{"traceparent": "v", "tracestate": "v"}] * batch
