"""Checked by mypy (``make lint``), never run: the sync/async overloads resolve as documented."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import Session
from typing_extensions import assert_type

from sqla_scheduler import (
    CustomTask,
    Execution,
    ExecutionContext,
    HistoryEntry,
    Node,
    OneTimeTask,
    RecurringTask,
    Scheduler,
    TaskInstance,
    custom,
    one_time,
    recurring,
)


def sync_calls(
    scheduler: Scheduler,
    session: Session,
    conn: Connection,
    engine: Engine,
    inst: TaskInstance[Any],
) -> None:
    assert_type(scheduler.schedule(session, inst), bool)
    assert_type(scheduler.schedule(conn, inst), bool)
    assert_type(scheduler.schedule(engine, inst), bool)
    assert_type(scheduler.schedule_batch(session, [inst]), int)
    assert_type(scheduler.cancel(session, "t", "i"), bool)
    assert_type(scheduler.executions(session, "due"), list[Execution])
    assert_type(scheduler.get_execution(conn, "t", "i"), Execution | None)
    assert_type(scheduler.history(engine, outcome="abandoned"), list[HistoryEntry])
    assert_type(scheduler.requeue(session, 7), bool)
    assert_type(scheduler.nodes(engine), list[Node])


async def async_calls(
    scheduler: Scheduler,
    session: AsyncSession,
    conn: AsyncConnection,
    engine: AsyncEngine,
    inst: TaskInstance[Any],
) -> None:
    pending = scheduler.schedule(session, inst)
    assert_type(pending, Coroutine[Any, Any, bool])  # type: ignore[unused-coroutine]
    await pending
    assert_type(await scheduler.schedule(conn, inst), bool)
    assert_type(await scheduler.schedule(engine, inst), bool)
    assert_type(await scheduler.schedule_batch(session, [inst]), int)
    assert_type(await scheduler.reschedule(session, "t", "i", at=_now()), bool)
    assert_type(await scheduler.executions(engine), list[Execution])
    assert_type(await scheduler.history(conn, task_name="t"), list[HistoryEntry])
    assert_type(await scheduler.requeue(session, 7), bool)
    assert_type(await scheduler.nodes(session), list[Node])


def task_decorators(
    untyped: Callable[[ExecutionContext[Any]], None], typed: Callable[[ExecutionContext[int]], None]
) -> None:
    """Each decorator takes its options as keywords and types its task by ``payload_type``."""
    assert_type(
        one_time("o", payload_type=int, max_retries=3, retry_jitter=0.1, keep_result=True)(typed),
        OneTimeTask[int],
    )
    assert_type(one_time("o", timeout=2.5, rate_limit="5/s")(untyped), OneTimeTask[Any])
    assert_type(custom("c", payload_type=int, on_abandon=None)(typed), CustomTask[int])
    assert_type(custom("c", upcasters=None)(untyped), CustomTask[Any])
    assert_type(
        recurring("r", "-", payload_type=int, initial_payload=1, priority=2)(typed),
        RecurringTask[int],
    )
    assert_type(recurring("r", give_up_on=ValueError)(untyped), RecurringTask[Any])


def _now() -> Any:
    raise NotImplementedError
