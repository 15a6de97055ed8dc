"""Database operations, each written once as a sync function over a ``Connection``.

Sync callers run these directly; async callers reach them through SQLAlchemy's
``run_sync`` (see ``_bridge``). Nothing here commits: the caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table

from sqla_scheduler._dialects import backend_for
from sqla_scheduler._statements import Statements, statements_for
from sqla_scheduler.executions import Execution, ExecutionState
from sqla_scheduler.tasks import KEEP, TaskInstance

__all__ = [
    "cancel",
    "get_execution",
    "insert_instances",
    "list_executions",
    "reschedule",
]


def _statements(conn: Connection, table: Table) -> Statements:
    return statements_for(table, backend_for(conn.dialect))


def _wake(conn: Connection, stmts: Statements, task_names: set[str]) -> None:
    """NOTIFY in the caller's transaction: delivered on commit, dropped on rollback.

    The payload is the task name, so a scheduler can ignore tasks it does not run.
    """
    if stmts.notify is not None:
        for name in sorted(task_names):
            conn.execute(stmts.notify, {"channel": stmts.channel, "payload": name})


def insert_instances(
    conn: Connection, table: Table, instances: Sequence[TaskInstance[Any]], now: datetime
) -> int:
    """Insert the executions that do not exist yet; return how many were inserted."""
    if not instances:
        return 0
    stmts = _statements(conn, table)
    rows = [
        {
            "task_name": i.task_name,
            "task_instance": i.instance_id,
            "task_data": i.data,
            "execution_time": i.execution_time or now,
            "priority": i.priority,
            "schedule": i.schedule,
        }
        for i in instances
    ]
    inserted = conn.execute(stmts.insert, rows).all()
    due = {name for name, execution_time in inserted if execution_time <= now}
    if due:
        _wake(conn, stmts, due)
    return len(inserted)


def cancel(conn: Connection, table: Table, task_name: str, instance_id: str) -> bool:
    """Delete an execution that is not running; return whether one was deleted."""
    stmts = _statements(conn, table)
    result = conn.execute(stmts.cancel, {"key_task": task_name, "key_instance": instance_id})
    return result.rowcount == 1


def reschedule(
    conn: Connection,
    table: Table,
    task_name: str,
    instance_id: str,
    at: datetime,
    data: Any,
    now: datetime,
) -> bool:
    """Move an execution that is not running to ``at`` (and a new payload unless KEEP)."""
    stmts = _statements(conn, table)
    params: dict[str, Any] = {"key_task": task_name, "key_instance": instance_id, "new_time": at}
    if data is KEEP:
        stmt = stmts.reschedule
    else:
        stmt = stmts.reschedule_with_data
        params["new_data"] = data
    moved = conn.execute(stmt, params).scalars().all()
    if moved and at <= now:
        _wake(conn, stmts, {task_name})
    return bool(moved)


def get_execution(
    conn: Connection, table: Table, task_name: str, instance_id: str
) -> Execution | None:
    """One execution by key, or ``None``."""
    stmts = _statements(conn, table)
    row = (
        conn.execute(stmts.get, {"key_task": task_name, "key_instance": instance_id})
        .mappings()
        .one_or_none()
    )
    return None if row is None else Execution.from_row(row)


def list_executions(
    conn: Connection,
    table: Table,
    *,
    state: ExecutionState,
    task_name: str | None,
    known_tasks: frozenset[str],
    limit: int | None,
    offset: int,
    now: datetime,
) -> list[Execution]:
    """Executions in ``state``, highest priority and earliest first (failing: latest first)."""
    stmts = _statements(conn, table)
    query = stmts.list_executions(
        state=state, task_name=task_name, known_tasks=known_tasks, limit=limit, offset=offset
    )
    params = {"now": now} if state == "due" else {}
    return [Execution.from_row(row) for row in conn.execute(query, params).mappings()]
