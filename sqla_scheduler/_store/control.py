"""Database operations of control: pause, resume, run now. Sync functions over a
``Connection``, in the caller's transaction (like ``_store``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Connection, Table, delete, select

from sqla_scheduler._dialects import backend_for, notice_of_pause
from sqla_scheduler._execution import KEEP
from sqla_scheduler._statements import statements_for
from sqla_scheduler._store import scheduling as _store
from sqla_scheduler.models import paused_table

__all__ = ["pause", "paused", "resume", "run_now"]


def pause(conn: Connection, table: Table, task_name: str, now: datetime) -> bool:
    """Pause ``task_name``; ``False`` when it was paused already. The running schedulers
    hear of it when the transaction commits (PostgreSQL), and hand back what of it they
    hold."""
    paused_tasks = paused_table(table)
    backend = backend_for(conn.dialect)
    statement = backend.insert_ignoring(paused_tasks).values(task_name=task_name, paused_at=now)
    if backend.inserts_return:  # psycopg's row count of an INSERT can be -1 (unknown)
        inserted = conn.execute(statement.returning(paused_tasks.c.task_name)).first() is not None
    else:  # counted: MySQL has no RETURNING
        inserted = conn.execute(statement).rowcount > 0
    if not inserted:
        return False
    _notify(conn, table, notice_of_pause(task_name, True))
    return True


def resume(conn: Connection, table: Table, task_name: str) -> bool:
    """Resume ``task_name``; ``False`` when it was not paused. The running schedulers hear
    of it, and wake for its due executions, when the transaction commits (PostgreSQL)."""
    paused_tasks = paused_table(table)
    statement = delete(paused_tasks).where(paused_tasks.c.task_name == task_name)
    if conn.execute(statement).rowcount == 0:
        return False
    _notify(conn, table, notice_of_pause(task_name, False))
    return True


def _notify(conn: Connection, table: Table, payload: str) -> None:
    """NOTIFY the running schedulers of ``table`` (PostgreSQL; nothing elsewhere)."""
    scheduling = statements_for(table, backend_for(conn.dialect)).scheduling
    if scheduling.notify is not None:
        conn.execute(scheduling.notify, {"channel": scheduling.channel, "payload": payload})


def paused(conn: Connection, table: Table) -> frozenset[str]:
    """The paused task names."""
    paused_tasks = paused_table(table)
    return frozenset(conn.execute(select(paused_tasks.c.task_name)).scalars())


def run_now(
    conn: Connection,
    table: Table,
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
        table,
        task_name,
        instance_id,
        now,
        KEEP,
        now,
        shown_version=shown_version,
        on_moved=on_moved,
    )
