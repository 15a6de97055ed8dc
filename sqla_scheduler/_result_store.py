"""Database operations on the kept results, each a sync function over a ``Connection``.

Like ``_store``: nothing here commits; a result is written in the transaction that
records the outcome it keeps, and on PostgreSQL announced on the results' channel when
that commits (``Scheduler.wait`` listens there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table

from sqla_scheduler._dialects import backend_for, notice_of_result
from sqla_scheduler._statements import statements_for
from sqla_scheduler.results import Result, ResultOutcome, decode_result

__all__ = ["Kept", "get", "prune", "record"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Kept:
    """A final outcome to keep: ``value`` is the JSON text of what the handler returned."""

    task_name: str
    instance_id: str
    outcome: ResultOutcome
    finished_at: datetime
    value: str | None = None
    error: str | None = None
    #: The group the execution was a member of, whose callback sees it.
    group_id: int | None = None

    def values(self) -> dict[str, Any]:
        return {
            "task_name": self.task_name,
            "task_instance": self.instance_id,
            "outcome": self.outcome,
            "value": self.value,
            "error": self.error,
            "finished_at": self.finished_at,
            "group_id": self.group_id,
        }


def record(conn: Connection, table: Table, kept: Sequence[Kept]) -> None:
    """Write ``kept`` in one statement, and announce each on commit (PostgreSQL)."""
    if not kept:
        return
    every = statements_for(table, backend_for(conn.dialect))
    conn.execute(every.results.record, [k.values() for k in kept])
    notify = every.scheduling.notify
    if notify is not None:
        channel = every.results.result_channel
        for k in kept:
            payload = notice_of_result(k.task_name, k.instance_id)
            conn.execute(notify, {"channel": channel, "payload": payload})


def get(conn: Connection, table: Table, task_name: str, instance_id: str) -> Result | None:
    """The newest result of ``task_name``/``instance_id``; ``None`` when there is none or
    an execution with that key is scheduled (again) and has not finished."""
    stmts = statements_for(table, backend_for(conn.dialect)).results
    params = {"key_task": task_name, "key_instance": instance_id}
    row = conn.execute(stmts.get, params).first()
    if row is None:
        return None
    return Result(
        task_name=row.task_name,
        instance_id=row.task_instance,
        outcome=row.outcome,
        value=decode_result(row.value),
        error=row.error,
        finished_at=row.finished_at,
    )


def prune(conn: Connection, table: Table, *, threshold: datetime, limit: int) -> int:
    """Delete up to ``limit`` results that finished before ``threshold``; return how many."""
    stmts = statements_for(table, backend_for(conn.dialect)).results
    return conn.execute(stmts.prune, {"threshold": threshold, "limit": limit}).rowcount
