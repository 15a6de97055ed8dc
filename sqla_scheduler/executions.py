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

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler._checks import check_filters, check_number
from sqla_scheduler._dialects import borrowed_engine
from sqla_scheduler._execution import Execution, ExecutionState, ExecutionStatus
from sqla_scheduler._progress import Progress

if TYPE_CHECKING:
    from sqla_scheduler.scheduler import Scheduler

__all__ = ["Execution", "ExecutionState", "ExecutionStatus", "Progress", "list_executions"]


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
    check_filters(task_name)
    if limit is not None:
        check_number("limit", limit, 0)
    check_number("offset", offset, 0)
    if state == "orphaned" and scheduler is None:
        raise ValueError(
            "listing orphaned executions needs the application's scheduler: without its "
            "registered tasks no execution can be told to be an orphan"
        )
    with connected(url, scheduler) as (client, conn):
        return client.executions(conn, state, task_name=task_name, limit=limit, offset=offset)


@contextmanager
def connected(
    url: str | URL | Engine | AsyncEngine | None, scheduler: Scheduler | None
) -> Iterator[tuple[Scheduler, Connection]]:
    """A client and a connection for a one-off call from outside the application.

    ``url`` is a database URL or an engine (default: ``scheduler``'s engine); the client is
    ``scheduler``, or one on the default table. The table is looked up first:
    [`MissingTableError`][] when it is not there (nor, for a SQLite file that does not
    exist, is the file created). The connection's transaction commits when the block ends
    without an error.
    """
    from sqla_scheduler import _store

    with _sync_engine(url, scheduler) as (client, engine), engine.begin() as conn:
        _store.check_table(conn, client.table)
        yield client, conn


@contextmanager
def reached(
    url: str | URL | Engine | AsyncEngine | None, scheduler: Scheduler | None
) -> Iterator[tuple[Scheduler, Engine]]:
    """A client and a sync engine for a one-off call that opens connections of its own,
    such as ``Scheduler.wait`` (no transaction is held open while it waits); ``url`` and
    ``scheduler`` as for [`connected`][], and the table looked up first as there."""
    from sqla_scheduler import _store

    with _sync_engine(url, scheduler) as (client, engine):
        with engine.connect() as conn:
            _store.check_table(conn, client.table)
        yield client, engine


@contextmanager
def _sync_engine(
    url: str | URL | Engine | AsyncEngine | None, scheduler: Scheduler | None
) -> Iterator[tuple[Scheduler, Engine]]:
    """The client and a sync engine on ``url``: disposed of after the block when made
    here (async engines are reached through a sync twin: a one-off call blocks)."""
    from sqla_scheduler import _store
    from sqla_scheduler.scheduler import Scheduler

    if url is None:
        if scheduler is None:
            raise TypeError("a database URL, an engine or a scheduler is needed")
        url = scheduler.engine
    with borrowed_engine(url.url if isinstance(url, AsyncEngine) else url) as engine:
        client = scheduler if scheduler is not None else Scheduler(engine)
        _store.check_sqlite_file(engine.url, client.table)
        yield client, engine
