"""Helpers for testing an application's tasks; part of the public API.

- [`ManualClock`][] pins time; pass it as ``Scheduler(..., clock=clock)``.
- [`build_context`][] makes the context a handler would get, payload round-tripped
  through the task's JSON codec, so a handler can be called inline.
- [`run_due`][] runs every due execution to completion, with no loop and no waiting
  (``await scheduler.run_due()`` is the async form); ``stop=`` drives a stop request
  (``cancel`` of a running execution) into the handlers it names.
- [`ScheduledExecutions`][] lists what a scheduler's table holds and asserts that an
  execution was scheduled (or was not), from sync and async tests alike, and reads the
  result an execution of a task with ``keep_result`` kept.

The pytest plugin (installed with the package) offers these as fixtures: see the testing
guide.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from functools import partial
from types import MappingProxyType
from typing import Any, TypeVar

import anyio
from sqlalchemy import Engine, create_engine
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler._execution import Execution
from sqla_scheduler.clock import ManualClock
from sqla_scheduler.context import ExecutionContext, ShutdownSignal
from sqla_scheduler.groups import Group
from sqla_scheduler.results import Result
from sqla_scheduler.scheduler import Scheduler
from sqla_scheduler.tasks import RECURRING_INSTANCE_ID, RecurringTask, Task

__all__ = ["ManualClock", "ScheduledExecutions", "build_context", "run_due"]

P = TypeVar("P")


def build_context(
    task: Task[P],
    payload: P | None = None,
    *,
    instance_id: str | None = None,
    execution_time: datetime | None = None,
    consecutive_failures: int = 0,
    last_error: str | None = None,
    snoozes: int = 0,
    priority: int | None = None,
    group: Group | Sequence[Result] | None = None,
    cancelled: bool = False,
) -> ExecutionContext[P]:
    """The [`ExecutionContext`][] the scheduler would hand ``task``'s handler.

    The payload is encoded and decoded as it would be through the table, so a payload
    that would not survive storage fails here too.

    ``group`` is what a group's callback finds in ``ctx.group``: a [`Group`][] as it
    stands, or its members' [`Result`][]s in the order they finished, which make a
    finished group of that many members (its outcomes counted from them).

    ``cancelled``: as if ``cancel`` had asked the execution to stop, ``ctx.cancelled`` is
    set (and ``ctx.raise_if_cancelled()`` raises).
    """
    if instance_id is None:
        instance_id = RECURRING_INSTANCE_ID if isinstance(task, RecurringTask) else "test"
    execution_time = execution_time or datetime.now(timezone.utc)
    if group is not None and not isinstance(group, Group):
        group = _finished_group(task, instance_id, execution_time, group)
    if payload is None and isinstance(task, RecurringTask):
        data: Any = task.initial_data
    else:
        data = task.codec.encode(payload)  # type: ignore[arg-type]
    signal = ShutdownSignal()
    if cancelled:
        signal.set()
    return ExecutionContext(
        payload=task.codec.decode(data),
        task_name=task.name,
        instance_id=instance_id,
        execution_time=execution_time,
        consecutive_failures=consecutive_failures,
        last_error=last_error,
        snoozes=snoozes,
        priority=task.priority if priority is None else priority,
        group=group,
        cancelled=signal,
    )


def _finished_group(
    task: Task[Any], instance_id: str, at: datetime, members: Sequence[Result]
) -> Group:
    """A group whose ``members`` have all finished, ``task``'s callback waiting for it."""
    for member in members:
        if not isinstance(member, Result):
            raise TypeError(
                f"build_context(group=...) takes a Group or a sequence of Result, got an item "
                f"of type {type(member).__name__}: {member!r}"
            )
    return Group(
        id=1,
        task_name=task.name,
        instance_id=instance_id,
        total=len(members),
        remaining=0,
        created_at=at,
        finished_at=at,
        outcomes=MappingProxyType(dict(Counter(m.outcome for m in members))),
        members=tuple(members),
    )


def run_due(scheduler: Scheduler, *, stop: Iterable[tuple[Task[Any] | str, str]] = ()) -> int:
    """Run every due execution to completion, synchronously; return how many ran.

    ``stop`` names executions (task, instance id) to stop as ``cancel`` stops a running
    one, the request arriving as each handler starts: a sync handler finds
    ``ctx.cancelled`` set (``ctx.raise_if_cancelled()`` raises), an async one is
    cancelled at its first wait, a transactional one's writes are rolled back, and the
    execution ends ``cancelled``.

    For a scheduler on a sync engine, outside any event loop. With an ``AsyncEngine`` (or
    inside an async test) use ``await scheduler.run_due()``.
    """
    if isinstance(scheduler.engine, AsyncEngine):
        raise TypeError("this scheduler has an AsyncEngine: use `await scheduler.run_due()`")
    keys = frozenset(
        (task.name if isinstance(task, Task) else task, instance_id) for task, instance_id in stop
    )
    if not keys:
        return anyio.run(scheduler.run_due)
    return anyio.run(partial(scheduler._make_runner().run_due, stop=keys))


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()


class ScheduledExecutions:
    """The executions in ``scheduler``'s table, for assertions in tests.

    It reads through a sync engine of its own on the scheduler's database (the
    scheduler's engine when that is sync), so the same calls work in sync and async tests
    and with either kind of engine. Call
    [`close`][sqla_scheduler.testing.ScheduledExecutions.close] (or use it as a context
    manager) to dispose of that engine.
    """

    def __init__(self, scheduler: Scheduler) -> None:
        from sqla_scheduler._dialects import sync_url

        self.scheduler = scheduler
        engine = scheduler.engine
        self._own_engine = isinstance(engine, AsyncEngine)
        self._engine: Engine = (
            create_engine(sync_url(engine.url)) if isinstance(engine, AsyncEngine) else engine
        )

    def __call__(self, task: Task[Any] | str | None = None) -> list[Execution]:
        """Every execution in the table (of ``task`` only, given one), in pick order."""
        task_name = task.name if isinstance(task, Task) else task
        return self.scheduler.executions(self._engine, "all", task_name=task_name)

    def get(self, task: Task[Any] | str, instance_id: str) -> Execution | None:
        """The execution of ``task`` with ``instance_id``, or ``None``."""
        name = task.name if isinstance(task, Task) else task
        return self.scheduler.get_execution(self._engine, name, instance_id)

    def result(self, task: Task[Any] | str, instance_id: str) -> Result | None:
        """The result kept by the execution of ``task`` with ``instance_id``, as
        ``Scheduler.result`` reads it; ``None`` while it has not run (or was scheduled
        again since), or when its task does not keep results (``keep_result=True``) and
        it was no group's member."""
        name = task.name if isinstance(task, Task) else task
        return self.scheduler.result(self._engine, name, instance_id)

    def assert_scheduled(
        self,
        task: Task[Any] | str,
        instance_id: str,
        *,
        at: datetime | None = None,
        payload: object = _UNSET,
    ) -> Execution:
        """Assert that an execution of ``task`` with ``instance_id`` is in the table; return it.

        With ``at``, its execution time must be exactly ``at``; with ``payload``, its
        stored payload must be what ``payload`` encodes to with the task's codec (``task``
        must then be the task itself, or a name registered with the scheduler).
        """
        name = task.name if isinstance(task, Task) else task
        found = self.get(name, instance_id)
        if found is None:
            others = [e.instance_id for e in self(name)]
            raise AssertionError(
                f"no execution of {name!r} with instance id {instance_id!r} is scheduled "
                f"(instances of {name!r}: {others})"
            )
        if at is not None and found.execution_time != at:
            raise AssertionError(
                f"{name!r}/{instance_id!r} is scheduled at {found.execution_time.isoformat()}, "
                f"not at {at.isoformat()}"
            )
        if payload is not _UNSET:
            definition = task if isinstance(task, Task) else self.scheduler.task(name)
            expected = definition.codec.encode(payload)
            if found.data != expected:
                raise AssertionError(
                    f"{name!r}/{instance_id!r} has the payload {found.data!r}, not {expected!r}"
                )
        return found

    def assert_not_scheduled(self, task: Task[Any] | str, instance_id: str | None = None) -> None:
        """Assert that no execution of ``task`` (with ``instance_id``, given one) is in the
        table."""
        name = task.name if isinstance(task, Task) else task
        found = [e.instance_id for e in self(name) if instance_id in (None, e.instance_id)]
        if found:
            raise AssertionError(f"{name!r} has scheduled executions: {found}")

    def close(self) -> None:
        """Dispose of the engine this made (nothing when it reads through the scheduler's)."""
        if self._own_engine:
            self._engine.dispose()

    def __enter__(self) -> ScheduledExecutions:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
