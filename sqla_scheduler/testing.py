"""Helpers for testing an application's tasks; part of the public API.

- [`ManualClock`][] pins time; pass it as ``Scheduler(..., clock=clock)``.
- [`build_context`][] makes the context a handler would get, payload round-tripped
  through the task's JSON codec, so a handler can be called inline.
- [`run_due`][] runs every due execution to completion, with no loop and no waiting
  (``await scheduler.run_due()`` is the async form).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, TypeVar

import anyio
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler.clock import ManualClock
from sqla_scheduler.context import ExecutionContext
from sqla_scheduler.scheduler import Scheduler
from sqla_scheduler.tasks import RECURRING_INSTANCE_ID, RecurringTask, Task

__all__ = ["ManualClock", "build_context", "run_due"]

P = TypeVar("P")


def build_context(
    task: Task[P],
    payload: P | None = None,
    *,
    instance_id: str | None = None,
    execution_time: datetime | None = None,
    consecutive_failures: int = 0,
    last_error: str | None = None,
    priority: int | None = None,
) -> ExecutionContext[P]:
    """The [`ExecutionContext`][] the scheduler would hand ``task``'s handler.

    The payload is encoded and decoded as it would be through the table, so a payload
    that would not survive storage fails here too.
    """
    if instance_id is None:
        instance_id = RECURRING_INSTANCE_ID if isinstance(task, RecurringTask) else "test"
    if payload is None and isinstance(task, RecurringTask):
        data: Any = task.initial_data
    else:
        data = task.codec.encode(payload)  # type: ignore[arg-type]
    return ExecutionContext(
        payload=task.codec.decode(data),
        task_name=task.name,
        instance_id=instance_id,
        execution_time=execution_time or datetime.now(timezone.utc),
        consecutive_failures=consecutive_failures,
        last_error=last_error,
        priority=task.priority if priority is None else priority,
    )


def run_due(scheduler: Scheduler) -> int:
    """Run every due execution to completion, synchronously; return how many ran.

    For a scheduler on a sync engine, outside any event loop. With an ``AsyncEngine`` (or
    inside an async test) use ``await scheduler.run_due()``.
    """
    if isinstance(scheduler.engine, AsyncEngine):
        raise TypeError("this scheduler has an AsyncEngine: use `await scheduler.run_due()`")
    return anyio.run(scheduler.run_due)
