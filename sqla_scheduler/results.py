"""What a finished execution came to: kept results.

A one-time or custom task defined with ``keep_result=True`` keeps, when each of its
executions finishes, its final outcome and what its handler returned (JSON, at most
``max_result_size``) in ``<table_name>_results`` for ``result_retention``, whatever the
``history`` setting. ``Scheduler.result`` reads it; ``Scheduler.wait`` waits for it:

```python
scheduler.schedule(engine, render_report.instance("report-42", {"customer": 42}))
result = scheduler.wait(engine, "render-report", "report-42", timeout=30)
if result.succeeded:
    print(result.value["url"])
```

From outside the application, [`read_result`][] and [`wait_for_result`][] do the same
given a database URL: what ``sqla-scheduler result`` prints.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler._result import (
    DEFAULT_MAX_RESULT_SIZE,
    RESULT_OUTCOMES,
    Result,
    ResultOutcome,
    decode_result,
    encode_result,
)

if TYPE_CHECKING:
    from sqla_scheduler.scheduler import Scheduler

__all__ = [
    "DEFAULT_MAX_RESULT_SIZE",
    "RESULT_OUTCOMES",
    "Result",
    "ResultOutcome",
    "decode_result",
    "encode_result",
    "read_result",
    "wait_for_result",
]


def read_result(
    url: str | URL | Engine | AsyncEngine | None,
    task_name: str,
    instance_id: str,
    *,
    scheduler: Scheduler | None = None,
) -> Result | None:
    """The kept result of ``task_name``/``instance_id`` straight from the database at
    ``url``, as ``Scheduler.result`` reads it: ``None`` while it has not finished, when
    its task does not keep results (and it was no group's member), or when it was pruned.

    ``url`` and ``scheduler`` are those of
    [`list_executions`][sqla_scheduler.executions.list_executions]: without a scheduler
    the default table's results are read.
    """
    from sqla_scheduler._checks import check_key
    from sqla_scheduler.executions import connected

    check_key(task_name, instance_id)
    with connected(url, scheduler) as (client, conn):
        return client.result(conn, task_name, instance_id)


def wait_for_result(
    url: str | URL | Engine | AsyncEngine | None,
    task_name: str,
    instance_id: str,
    *,
    scheduler: Scheduler | None = None,
    timeout: float | timedelta | None,
) -> Result:
    """Wait for the kept result of ``task_name``/``instance_id`` in the database at
    ``url`` and return it, as ``Scheduler.wait`` does (``TimeoutError`` after
    ``timeout``); ``url`` and ``scheduler`` as for [`read_result`][].

    The table is looked up first, so a wrong URL fails at once rather than after the
    timeout; no transaction is held open while it waits.
    """
    from sqla_scheduler._checks import check_key
    from sqla_scheduler._store.waiting import check_timeout
    from sqla_scheduler.executions import reached

    check_key(task_name, instance_id)
    check_timeout(timeout)
    with reached(url, scheduler) as (client, engine):
        return client.wait(engine, task_name, instance_id, timeout=timeout)
