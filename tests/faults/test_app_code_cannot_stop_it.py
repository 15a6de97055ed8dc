"""Whatever any application code the scheduler calls raises, ``BaseException`` subclasses
included, is a failure of what it was called for, never the end of the scheduler: upcasters
and ``payload_type`` decoding (the row is undecodable), ``on_abandon`` (the row is kept for
a later retry), listeners (logged and ignored), interceptors (the execution fails) and
custom schedules (a failure of the run: retried at the backoff, a failure counted)
(issue 29, defect 2)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from sqla_scheduler import (
    ExecutionContext,
    ExecutionInterceptor,
    ManualClock,
    Schedule,
    Scheduler,
    SchedulerConfig,
    SchedulerListener,
    one_time,
    recurring,
)
from sqla_scheduler.interceptors import CallNext
from tests.support import NOW, Harness

pytestmark = pytest.mark.anyio


class Odd(BaseException):
    """Neither an Exception nor one of the interpreter's own."""


RAISES = [
    SystemExit(0),
    SystemExit("bye"),
    KeyboardInterrupt(),
    GeneratorExit(),
    Odd("odd"),
    asyncio.CancelledError("the code's own"),
    ValueError("plain"),
]

#: Each kind of application code, and what its execution comes to when it raises.
HOOKS = ["upcaster", "payload_type", "on_abandon", "listener", "interceptor", "schedule"]

#: The error each instance's code raises, by instance id (the code looks it up).
raising: dict[str, BaseException] = {}


def _raise_for(instance_id: str) -> None:
    error = raising.get(instance_id)
    if error is not None:
        raise error


def _upcast(data: Any) -> Any:
    _raise_for(data["id"])
    return data


@dataclass
class Typed:
    id: str

    def __post_init__(self) -> None:
        _raise_for(self.id)


class Raising(Schedule):
    """A schedule of the application's own whose ``next_run`` raises."""

    deterministic = False

    def first_run(self, now: datetime) -> datetime | None:
        return now

    def next_run(self, *, scheduled_at: datetime, completed_at: datetime) -> datetime:
        _raise_for("tick")
        return completed_at + timedelta(hours=1)

    @property
    def text(self) -> str:
        return "RAISING"


class Listener(SchedulerListener):
    def on_start(self, context: ExecutionContext[Any]) -> None:
        _raise_for(context.instance_id)

    def on_success(self, context: ExecutionContext[Any], duration: timedelta) -> None:
        _raise_for(context.instance_id)


class Interceptor(ExecutionInterceptor):
    async def intercept(self, context: ExecutionContext[Any], call_next: CallNext) -> Any:
        if context.task_name == "intercepted":
            _raise_for(context.instance_id)
        return await call_next()


def _on_abandon(ctx: ExecutionContext[Any], session: Any) -> None:
    _raise_for(ctx.instance_id)


def _fail(ctx: ExecutionContext[Any]) -> None:
    raise ValueError("out of retries at once")


ran: list[str] = []


def _run(ctx: ExecutionContext[Any]) -> None:
    ran.append(ctx.instance_id)


TASKS = {
    "upcaster": one_time("versioned", payload_version=2, upcasters={1: _upcast})(_run),
    "payload_type": one_time("typed", payload_type=Typed)(_run),
    "on_abandon": one_time("abandoned", max_retries=0, on_abandon=_on_abandon)(_fail),
    "listener": one_time("listened")(_run),
    "interceptor": one_time("intercepted")(_run),
    "schedule": recurring("ticking", Raising())(_run),
}
GOOD = one_time("good")(_run)
#: What the application wrote with the versions and types of before: version 1 rows, and
#: payloads as plain JSON (the ``payload_type`` decoding raises, not the encoding).
OLD = {"upcaster": one_time("versioned")(_run), "payload_type": one_time("typed")(_run)}


async def _run_due(scheduler: Scheduler) -> int:
    try:
        return await scheduler.run_due()
    except BaseException as exc:  # on a scheduler that application code can stop
        pytest.fail(f"run_due raised {exc!r}")


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    plans=st.lists(
        st.tuples(st.sampled_from(HOOKS), st.sampled_from(RAISES)),
        min_size=1,
        max_size=6,
        unique_by=lambda plan: plan[0],
    )
)
async def test_any_application_code_raising_anything_fails_only_its_own_work(
    sqlite: Harness, plans: list[tuple[str, BaseException]], caplog: pytest.LogCaptureFixture
) -> None:
    with sqlite.sync_engine.begin() as conn:
        conn.execute(text("delete from scheduled_tasks"))
        conn.execute(text("delete from scheduled_tasks_history"))
    ran.clear()
    raising.clear()
    caplog.clear()
    hooks = dict(plans)
    for hook, error in plans:
        raising["tick" if hook == "schedule" else hook] = error
    scheduler = Scheduler(
        sqlite.engine,
        [*(TASKS[hook] for hook in hooks), GOOD],
        SchedulerConfig(retry_base_delay=timedelta(minutes=1)),
        clock=ManualClock(NOW),
        interceptors=[Interceptor()],
    )
    scheduler.listeners = [Listener()]
    instances = [
        (OLD.get(hook) or TASKS[hook]).instance(hook, {"id": hook})
        for hook in hooks
        if hook != "schedule"  # the recurring task's row is registered by run_due
    ]
    await sqlite.resolve(scheduler.schedule_batch(sqlite.engine, [*instances, GOOD.instance("g")]))

    with caplog.at_level(logging.ERROR, logger="sqla_scheduler"):
        assert await _run_due(scheduler) == len(hooks) + 1
        assert "g" in ran, "the good execution ran"
        assert await _run_due(scheduler) == 0, "nothing runs again before its time"

    def row(hook: str) -> dict[str, Any] | None:
        task = TASKS[hook]
        return sqlite.row(task.name, "recurring" if hook == "schedule" else hook)

    for hook, error in hooks.items():
        found = row(hook)
        if hook in ("upcaster", "payload_type"):
            assert found is None, (hook, error)
            (entry,) = await sqlite.resolve(
                scheduler.history(sqlite.engine, task_name=TASKS[hook].name)
            )
            assert (entry.outcome, entry.data) == ("undecodable", {"id": hook})
            said = entry.error or ""
            assert type(error).__name__ in said or (
                isinstance(error, Exception) and str(error) in said
            )
            assert f"took {TASKS[hook].name}/{hook} out of the table" in caplog.text
        elif hook == "on_abandon":  # rolled back: kept, handed back, to be retried later
            assert found is not None, (hook, error)
            assert found["picked"] is False, (hook, error)
            assert f"on_abandon of abandoned/{hook} failed" in caplog.text
        elif hook == "listener":  # logged and ignored: the execution succeeded
            assert found is None, (hook, error)
            assert hook in ran
            assert "failed in on_start" in caplog.text
        elif hook == "interceptor":  # the execution failed, to be retried
            assert found is not None, (hook, error)
            assert (found["picked"], found["consecutive_failures"]) == (False, 1)
            assert hook not in ran
            assert "execution intercepted/interceptor failed" in caplog.text
        else:  # a schedule raising: the run failed, retried at the backoff, not left picked
            assert found is not None, (hook, error)
            assert (found["picked"], found["consecutive_failures"]) == (False, 1)
            assert found["execution_time"] > NOW
            assert "its schedule cannot tell the next run" in caplog.text
            assert type(error).__name__ in caplog.text


async def test_a_custom_schedule_raising_at_registration_is_an_error_not_an_exit(
    sqlite: Harness,
) -> None:
    class Broken(Raising):
        def first_run(self, now: datetime) -> datetime | None:
            raise SystemExit(3)

    task = recurring("broken", Broken())(_run)
    scheduler = Scheduler(sqlite.engine, [task], clock=ManualClock(NOW))
    raised: BaseException | None = None
    try:
        await scheduler.run_due()
    except BaseException as exc:  # on main: SystemExit, out of the test run
        raised = exc
    # start-up fails as it does for any error of the schedule's, with an Exception
    assert isinstance(raised, Exception), f"run_due raised {raised!r}"
    assert "task 'broken': schedule Broken raised SystemExit: 3" in str(raised)
