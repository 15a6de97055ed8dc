"""Database operations of control: pause, resume, run now. Sync functions over a
``Connection``, in the caller's transaction (like ``_store``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Connection, delete, select

from sqla_scheduler._dialects import notice_of_pause
from sqla_scheduler._execution import KEEP
from sqla_scheduler._statements import Statements
from sqla_scheduler._store import scheduling as _store
from sqla_scheduler.models import paused_table

__all__ = ["pause", "paused", "resume", "run_now"]


def pause(conn: Connection, statements: Statements, task_name: str, now: datetime) -> bool:
    """Pause ``task_name``; ``False`` when it was paused already. The running schedulers
    hear of it when the transaction commits (PostgreSQL), and hand back what of it they
    hold."""
    paused_tasks = paused_table(statements.table)
    backend = statements.backend
    statement = backend.insert_ignoring(paused_tasks).values(task_name=task_name, paused_at=now)
    # returned where it can be: psycopg's row count of an INSERT can be -1 (unknown)
    returning = backend.returning_inserted(statement, paused_tasks.c.task_name)
    inserted, _ = backend.inserted(conn.execute(returning))
    if not inserted:
        return False
    _notify(conn, statements, notice_of_pause(task_name, True))
    return True


def resume(conn: Connection, statements: Statements, task_name: str) -> bool:
    """Resume ``task_name``; ``False`` when it was not paused. The running schedulers hear
    of it, and wake for its due executions, when the transaction commits (PostgreSQL)."""
    paused_tasks = paused_table(statements.table)
    statement = delete(paused_tasks).where(paused_tasks.c.task_name == task_name)
    if conn.execute(statement).rowcount == 0:
        return False
    _notify(conn, statements, notice_of_pause(task_name, False))
    return True


def _notify(conn: Connection, statements: Statements, payload: str) -> None:
    """NOTIFY the running schedulers of ``table`` (PostgreSQL; nothing elsewhere)."""
    scheduling = statements.scheduling
    if scheduling.notify is not None:
        conn.execute(scheduling.notify, {"channel": scheduling.channel, "payload": payload})


def paused(conn: Connection, statements: Statements) -> frozenset[str]:
    """The paused task names."""
    paused_tasks = paused_table(statements.table)
    return frozenset(conn.execute(select(paused_tasks.c.task_name)).scalars())


def run_now(
    conn: Connection,
    statements: Statements,
    task_name: str,
    instance_id: str,
    now: datetime,
    shown_version: int | None = None,
    on_moved: Callable[[datetime], None] | None = None,
) -> bool:
    """Make an execution that is not running due ``now``, keeping its payload and schedule
    (and, with ``shown_version``, only if it is still at that version); ``False`` when
    there is none or a scheduler holds it."""
    return _store.reschedule(
        conn,
        statements,
        task_name,
        instance_id,
        now,
        KEEP,
        now,
        shown_version=shown_version,
        on_moved=on_moved,
    )
