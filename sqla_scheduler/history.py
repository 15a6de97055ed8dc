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

from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler._checks import check_filters, check_number
from sqla_scheduler._history_entry import OUTCOMES, HistoryEntry, HistorySetting, Outcome, keeps

if TYPE_CHECKING:
    from sqla_scheduler.scheduler import Scheduler

__all__ = [
    "OUTCOMES",
    "HistoryEntry",
    "HistorySetting",
    "Outcome",
    "keeps",
    "list_history",
    "requeue",
]


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

    check_filters(task_name, instance_id)
    check_number("limit", limit, 0)
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
    from sqla_scheduler import _store
    from sqla_scheduler._statements import statements_on
    from sqla_scheduler.executions import connected

    check_number("history_id", history_id, 1)
    with connected(url, scheduler) as (client, conn):
        entry = _store.history.get(conn, statements_on(conn, client.table), history_id)
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
