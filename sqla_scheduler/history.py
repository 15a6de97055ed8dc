"""What happened: the history table's entries.

Each finished attempt can leave a [`HistoryEntry`][] in ``<table_name>_history``, written in
the transaction that records its outcome. Which ones are kept is the ``history`` setting:
``"failures"`` (the default: every outcome but ``succeeded``), ``"all"`` or ``"none"``.
Entries of executions that left the scheduler's table (``abandoned``, ``undecodable``) keep
the payload, and ``Scheduler.requeue`` schedules them again:

```python
for entry in scheduler.history(engine, outcome="abandoned", limit=20):
    print(entry.id, entry.task_name, entry.instance_id, entry.error)
scheduler.requeue(engine, entry.id)
```
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, get_args

from sqlalchemy import Engine, RowMapping
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler._types import load_json

if TYPE_CHECKING:
    from sqla_scheduler.scheduler import Scheduler

__all__ = ["HistoryEntry", "HistorySetting", "Outcome", "keeps", "list_history", "requeue"]

Outcome = Literal["succeeded", "failed", "abandoned", "dead", "undecodable"]
"""How a finished attempt ended: its handler returned (``succeeded``) or raised
(``failed``, to be retried); it failed for the last time (``abandoned``: the execution left
the table); its scheduler died while it ran (``dead``: revived elsewhere); or its payload
could not be decoded (``undecodable``: the execution left the table)."""

OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)

HistorySetting = Literal["failures", "all", "none"]


def keeps(setting: HistorySetting, outcome: Outcome) -> bool:
    """Whether the ``history`` setting ``setting`` records an entry for ``outcome``."""
    if setting == "none":
        return False
    return setting == "all" or outcome != "succeeded"


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryEntry:
    """One finished attempt, as the history table keeps it."""

    id: int
    """The entry's number; later entries have larger ones. ``requeue`` takes it."""
    task_name: str
    instance_id: str
    outcome: Outcome
    execution_time: datetime | None
    """When the execution was due."""
    started_at: datetime | None
    """When its handler started; ``None`` for an execution that never ran (undecodable,
    or abandoned before it ran again)."""
    finished_at: datetime
    """When the outcome was recorded (for ``dead``: when the death was noticed)."""
    picked_by: str | None
    """The scheduler that ran it."""
    attempt: int
    """Which attempt in a row this was: 1, then one more for each failure before it."""
    error: str | None
    """The error's type and message, then its traceback (cut to a few KB), or what was
    wrong; ``None`` for a success."""
    data: Any
    """The payload as stored (its JSON form, not decoded) where the execution left the
    table (``abandoned``, ``undecodable``); ``None`` otherwise."""
    priority: int = 0

    @property
    def duration(self) -> timedelta | None:
        """How long the attempt ran, from its start to its outcome; ``None`` without a start."""
        if self.started_at is None:
            return None
        return self.finished_at - self.started_at

    @classmethod
    def from_row(cls, row: RowMapping) -> HistoryEntry:
        """Build from a row of the history table."""
        return cls(
            id=row["id"],
            task_name=row["task_name"],
            instance_id=row["task_instance"],
            outcome=row["outcome"],
            execution_time=row["execution_time"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            picked_by=row["picked_by"],
            attempt=row["attempt"],
            error=row["error"],
            data=load_json(row["task_data"]),
            priority=row["priority"],
        )


def list_history(
    url: str | URL | Engine | AsyncEngine | None = None,
    *,
    scheduler: Scheduler | None = None,
    task_name: str | None = None,
    instance_id: str | None = None,
    outcome: Outcome | None = None,
    since: datetime | None = None,
    limit: int = 100,
) -> list[HistoryEntry]:
    """List history entries straight from the database at ``url``, as
    ``Scheduler.history`` does: what ``sqla-scheduler history`` prints.

    ``url`` and ``scheduler`` are those of
    [`list_executions`][sqla_scheduler.executions.list_executions]: without a scheduler
    the default table's history is read.
    """
    from sqla_scheduler.executions import connected

    with connected(url, scheduler) as (client, conn):
        return client.history(
            conn,
            task_name=task_name,
            instance_id=instance_id,
            outcome=outcome,
            since=since,
            limit=limit,
        )


def requeue(
    url: str | URL | Engine | AsyncEngine | None,
    history_id: int,
    *,
    scheduler: Scheduler | None = None,
) -> HistoryEntry:
    """Schedule the execution of history entry ``history_id`` again, due now, from outside
    the application (``sqla-scheduler requeue``); return the entry.

    Raises ``LookupError`` with the reason when it cannot be: there is no such entry, it
    is not ``abandoned`` or ``undecodable``, or an execution with its key exists.
    """
    from sqla_scheduler import _history_store
    from sqla_scheduler.executions import connected

    with connected(url, scheduler) as (client, conn):
        entry = _history_store.get(conn, client.table, history_id)
        if entry is None:
            raise LookupError(f"there is no history entry {history_id}")
        if entry.outcome not in ("abandoned", "undecodable"):
            raise LookupError(
                f"history entry {history_id} ({entry.task_name}/{entry.instance_id}) is "
                f"{entry.outcome}: only abandoned and undecodable entries left the table "
                "and can be requeued"
            )
        if not client.requeue(conn, history_id):
            raise LookupError(
                f"an execution {entry.task_name}/{entry.instance_id} is already scheduled; "
                f"cancel it first to requeue history entry {history_id}"
            )
    return entry
