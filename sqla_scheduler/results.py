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

import dataclasses
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import Engine
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler._limits import DEFAULT_MAX_RESULT_SIZE
from sqla_scheduler._payload import normalize_json
from sqla_scheduler._types import dumps_payload
from sqla_scheduler.exceptions import PayloadError

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

ResultOutcome = Literal["succeeded", "abandoned", "undecodable", "cancelled"]
RESULT_OUTCOMES: tuple[ResultOutcome, ...] = ("succeeded", "abandoned", "undecodable", "cancelled")
"""How an execution can finish, as ``Result.outcome`` spells it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """The final outcome of one execution of a task with ``keep_result``, or of a group's
    member.

    ``value`` is what the handler returned, as JSON gives it back (a dataclass or a
    pydantic model comes back as a dict), on success; ``None`` otherwise. ``error`` is
    the last failed attempt's error text where there is one (an abandoned execution's,
    an undecodable payload's reason).
    """

    task_name: str
    instance_id: str
    outcome: ResultOutcome
    value: Any
    error: str | None
    finished_at: datetime

    @property
    def succeeded(self) -> bool:
        """Whether the handler finished without an error."""
        return self.outcome == "succeeded"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``finished_at`` in ISO 8601), as the CLI prints it."""
        return {
            "task_name": self.task_name,
            "instance_id": self.instance_id,
            "outcome": self.outcome,
            "value": self.value,
            "error": self.error,
            "finished_at": self.finished_at.isoformat(),
        }


def encode_result(task_name: str, value: Any, max_size: int = DEFAULT_MAX_RESULT_SIZE) -> str:
    """The JSON text of ``value``, the result of a handler of ``task_name``, to keep.

    A dataclass or a pydantic model is kept as its JSON form. Raises ``PayloadError``
    naming the task when there is no JSON form that a database stores exactly (see
    ``_payload.normalize_json``) or when the text is longer than ``max_size`` bytes: the
    attempt then fails, and its retry policy applies.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    elif hasattr(value, "model_dump") and not isinstance(value, type):
        value = value.model_dump(mode="json")
    try:
        text = dumps_payload(normalize_json(task_name, value))
    except PayloadError as exc:
        raise PayloadError(str(exc).replace(": payload", ": result", 1)) from exc
    size = len(text.encode())
    if size > max_size:
        raise PayloadError(
            f"task {task_name!r}: result is {size:,} bytes of JSON, more than "
            f"max_result_size ({max_size:,} bytes); keep a reference to it instead"
        )
    return text


def decode_result(text: str | None) -> Any:
    """The value kept as ``text`` (``None`` when nothing was)."""
    return None if text is None else json.loads(text)


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
    from sqla_scheduler._result_wait import check_timeout
    from sqla_scheduler.executions import reached

    check_key(task_name, instance_id)
    check_timeout(timeout)
    with reached(url, scheduler) as (client, engine):
        return client.wait(engine, task_name, instance_id, timeout=timeout)
