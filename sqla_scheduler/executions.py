"""Read-only views of scheduled executions.

[`Execution`][] is a snapshot of one row, as ``Scheduler.executions`` lists them.
[`list_executions`][] lists them from outside the application, given a database URL and
optionally the application's scheduler: it is what ``sqla-scheduler executions`` prints:

```python
from sqla_scheduler.executions import list_executions

for execution in list_executions("sqlite:///app.db", "failing", limit=20):
    print(execution.task_name, execution.instance_id, execution.consecutive_failures)
```
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import Engine, Table, create_engine
from sqlalchemy.engine import URL, RowMapping
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler.exceptions import MissingTableError

if TYPE_CHECKING:
    from sqla_scheduler.scheduler import Scheduler

__all__ = ["Execution", "ExecutionState", "ExecutionStatus", "list_executions"]

ExecutionState = Literal["all", "scheduled", "due", "running", "failing", "orphaned"]
"""Which executions to list: ``scheduled`` (every unpicked row), ``due`` (unpicked and due
now), ``running`` (picked), ``failing`` (one or more consecutive failures),
``orphaned`` (task names this scheduler does not know), or ``all``.
"""

ExecutionStatus = Literal["running", "orphaned", "failing", "due", "scheduled"]
"""What one execution is doing, as ``Execution.status`` tells it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Execution:
    """A snapshot of one row of the scheduler's table."""

    task_name: str
    instance_id: str
    data: Any
    """The stored payload in its JSON form (not decoded)."""
    execution_time: datetime
    picked: bool
    picked_by: str | None
    last_heartbeat: datetime | None
    last_success: datetime | None
    last_failure: datetime | None
    consecutive_failures: int
    version: int
    priority: int
    schedule: str | None
    trace_context: dict[str, str] | None = None
    """The trace context captured when the execution was scheduled (W3C ``traceparent``
    and ``tracestate``), when an interceptor captured one.
    """
    started_at: datetime | None = None
    """When the handler of this picked execution started; ``None`` while it waits."""

    @classmethod
    def from_row(cls, row: RowMapping) -> Execution:
        """Build from a result row of the scheduler's table."""
        return cls(
            task_name=row["task_name"],
            instance_id=row["task_instance"],
            data=row["task_data"],
            execution_time=row["execution_time"],
            picked=row["picked"],
            picked_by=row["picked_by"],
            last_heartbeat=row["last_heartbeat"],
            last_success=row["last_success"],
            last_failure=row["last_failure"],
            consecutive_failures=row["consecutive_failures"],
            version=row["version"],
            priority=row["priority"],
            schedule=row["schedule"],
            trace_context=row.get("trace_context"),
            started_at=row.get("started_at"),
        )

    def status(self, now: datetime, known_tasks: Collection[str] | None = None) -> ExecutionStatus:
        """One word for what this execution is doing at ``now``.

        ``running`` when a scheduler has picked it; ``orphaned`` when ``known_tasks`` is
        given and does not name its task; ``failing`` when its last attempt failed (it
        waits for a retry); ``due`` when its time has come; ``scheduled`` otherwise.
        """
        if self.picked:
            return "running"
        if known_tasks is not None and self.task_name not in known_tasks:
            return "orphaned"
        if self.consecutive_failures > 0:
            return "failing"
        if self.execution_time <= now:
            return "due"
        return "scheduled"

    def to_json(self) -> dict[str, Any]:
        """Every field in a JSON-ready dict: timestamps in ISO 8601 UTC, the payload as stored."""
        return {f.name: _json_value(getattr(self, f.name)) for f in dataclasses.fields(Execution)}


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).isoformat()
    return value


def list_executions(
    url: str | URL | Engine | AsyncEngine | None = None,
    state: ExecutionState = "all",
    *,
    scheduler: Scheduler | None = None,
    task_name: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> list[Execution]:
    """List executions in ``state`` straight from the database at ``url``.

    ``url`` is a database URL or an engine (default: ``scheduler``'s engine). Without
    ``scheduler`` the default table ``scheduled_tasks`` is read; with it, its table and its
    registered tasks, which ``state="orphaned"`` needs (without them no execution can be
    told to be an orphan: ``ValueError``). Ordering, ``limit`` and ``offset`` are
    those of ``Scheduler.executions``.

    The table is looked up first: [`MissingTableError`][] when it is not there (nor, for a
    SQLite file that does not exist, is the file created). Database failures raise
    SQLAlchemy's own errors.
    """
    from sqla_scheduler import _store
    from sqla_scheduler.migrate import sync_url
    from sqla_scheduler.scheduler import Scheduler

    if state == "orphaned" and scheduler is None:
        raise ValueError(
            "listing orphaned executions needs the application's scheduler: without its "
            "registered tasks no execution can be told to be an orphan"
        )
    if url is None:
        if scheduler is None:
            raise TypeError("list_executions needs a database URL, an engine or a scheduler")
        url = scheduler.engine
    if isinstance(url, Engine):
        engine, owned = url, False
    else:
        # Async engines are read through a sync twin: this is a one-off, blocking call.
        engine = create_engine(sync_url(url.url if isinstance(url, AsyncEngine) else url))
        owned = True
    try:
        client = scheduler if scheduler is not None else Scheduler(engine)
        _check_sqlite_file(engine.url, client.table)
        with engine.connect() as conn:
            _store.check_table(conn, client.table)
            return client.executions(conn, state, task_name=task_name, limit=limit, offset=offset)
    finally:
        if owned:
            engine.dispose()


def _check_sqlite_file(url: URL, table: Table) -> None:
    """Fail on a SQLite file that does not exist, rather than create an empty one."""
    if url.get_backend_name() != "sqlite":
        return
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:") or url.query.get("uri"):
        return
    if not os.path.exists(database):
        shown = url.render_as_string(hide_password=True)
        raise MissingTableError(
            f"the SQLite database {database!r} does not exist, nor then does the table "
            f"{table.fullname!r}: create both with `sqla-scheduler db upgrade --url {shown}`"
        )
