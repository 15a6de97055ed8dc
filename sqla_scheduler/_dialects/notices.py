"""The LISTEN/NOTIFY channel that wakes a table's schedulers, and the payloads sent on it
(written in Python, or in SQL by a statement that sends them: ``sql_notice_of_later``,
``sql_notice_of_result``, in PostgreSQL's JSON functions, the one database with NOTIFY)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, Table, Text, case, cast, func

__all__ = [
    "MAX_NOTICE_BYTES",
    "ResultNotice",
    "notice_of_check",
    "notice_of_later",
    "notice_of_pause",
    "notice_of_stop",
    "notify_channel",
    "read_check_notice",
    "read_notice",
    "read_pause_notice",
    "read_result_notice",
    "read_stop_notice",
    "result_channel",
    "sql_notice_of_later",
    "sql_notice_of_result",
]

#: The longest NOTIFY payload PostgreSQL takes is 7999 bytes; a result's announcement
#: carries the whole result only up to this many.
MAX_NOTICE_BYTES = 7900

_MAX_CHANNEL = 63  # PostgreSQL identifiers (and so channel names) are at most 63 bytes


class ResultNotice(NamedTuple):
    """The announcement of a recorded result: its key, and the result itself when it fit
    in the NOTIFY (``outcome``, ``value`` as JSON text, ``error``, ``finished_at``)."""

    task_name: str
    instance_id: str
    fields: tuple[str, str | None, str | None, datetime] | None = None


def notify_channel(table: Table) -> str:
    """The LISTEN/NOTIFY channel on which schedulers of ``table`` are woken."""
    return _channel("sqla_scheduler", table)


def result_channel(table: Table) -> str:
    """The LISTEN/NOTIFY channel on which the results of ``table``'s executions are
    announced (``Scheduler.wait``), apart from the schedulers' wake-ups."""
    return _channel("sqla_scheduler_result", table)


def _channel(prefix: str, table: Table) -> str:
    """``prefix.`` and ``table``'s qualified name, or a digest of that name where the
    channel would be longer than PostgreSQL's identifiers."""
    qualified = f"{table.schema}.{table.name}" if table.schema else table.name
    channel = f"{prefix}.{qualified}"
    if len(channel.encode()) > _MAX_CHANNEL:
        digest = hashlib.sha1(qualified.encode()).hexdigest()[:16]
        channel = f"{prefix}.{digest}"
    return channel


def read_result_notice(payload: str) -> ResultNotice | None:
    """What a NOTIFY on the results' channel announces (the JSON array the INSERT that
    records a result sends, as PostgreSQL writes it: compared as values, not as text);
    ``None`` for any other payload."""
    try:
        notice = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(notice, list) or len(notice) not in (2, 6):
        return None
    task_name, instance_id, *rest = notice
    if not isinstance(task_name, str) or not isinstance(instance_id, str):
        return None
    if not rest:
        return ResultNotice(task_name, instance_id)
    outcome, value, error, finished_at = rest
    if not (
        isinstance(outcome, str)
        and isinstance(value, str | None)
        and isinstance(error, str | None)
        and isinstance(finished_at, str)
    ):
        return None
    try:
        at = datetime.fromisoformat(finished_at).astimezone(timezone.utc)
    except ValueError:
        return None
    return ResultNotice(task_name, instance_id, (outcome, value, error, at))


def notice_of_later(task_name: str, at: datetime) -> str:
    """The NOTIFY payload for an execution of ``task_name`` due later, at ``at``.

    A NOTIFY for work due now carries the bare task name; one for later work carries this
    JSON object, so that listeners can wait for its time (``sql_notice_of_later`` writes
    the same in SQL).
    """
    return json.dumps({"task": task_name, "at": at.isoformat()})


def sql_notice_of_later(
    task_name: ColumnElement[str], at: ColumnElement[Any], now: ColumnElement[Any]
) -> ColumnElement[Any]:
    """In SQL, the NOTIFY payload for an execution of ``task_name`` at ``at``: the bare
    name when it is due by ``now``, else the JSON object of ``notice_of_later``."""
    later = cast(func.json_build_object("task", task_name, "at", at), Text)
    return case((at <= now, task_name), else_=later)


def sql_notice_of_result(results: Table) -> ColumnElement[Any]:
    """In SQL, the announcement of a row of ``results`` as it is written: the result itself
    as a JSON array, ``[task_name, task_instance, outcome, value, error, finished_at]``,
    or ``[task_name, task_instance]`` alone when that would not fit in a NOTIFY (see
    ``read_result_notice``)."""
    r = results.c
    whole = cast(
        func.json_build_array(
            r.task_name, r.task_instance, r.outcome, r.value, r.error, r.finished_at
        ),
        Text,
    )
    key = cast(func.json_build_array(r.task_name, r.task_instance), Text)
    return case((func.octet_length(whole) <= MAX_NOTICE_BYTES, whole), else_=key)


def read_notice(payload: str) -> tuple[str, datetime | None]:
    """The task a NOTIFY ``payload`` announces an execution of, and when that is due
    (``None``: now)."""
    if payload.startswith("{"):
        try:
            notice = json.loads(payload)
            task, at = notice["task"], datetime.fromisoformat(notice["at"])
        except (ValueError, KeyError, TypeError):
            pass  # a task named like a JSON object: due now
        else:
            if isinstance(task, str) and at.tzinfo is not None:
                return task, at
    return payload, None


def notice_of_pause(task_name: str, paused: bool) -> str:
    """The NOTIFY payload that tells running schedulers ``task_name`` was paused or (with
    ``paused`` false) resumed: a JSON object, like ``notice_of_later``'s."""
    return json.dumps({"task": task_name, "paused": paused})


def read_pause_notice(payload: str) -> tuple[str, bool] | None:
    """The task a ``notice_of_pause`` payload names and whether it was paused; ``None``
    for any other payload."""
    if not payload.startswith("{") or '"paused"' not in payload:
        return None
    try:
        notice = json.loads(payload)
        task, paused = notice["task"], notice["paused"]
    except (ValueError, KeyError, TypeError):
        return None
    if isinstance(task, str) and isinstance(paused, bool):
        return task, paused
    return None


def notice_of_stop(task_name: str, instance_id: str) -> str:
    """The NOTIFY payload that tells running schedulers ``cancel`` asked them to stop the
    execution ``task_name``/``instance_id``: a JSON object, like ``notice_of_pause``'s."""
    return json.dumps({"task": task_name, "stop": instance_id})


def read_stop_notice(payload: str) -> tuple[str, str] | None:
    """The execution (task, instance) a ``notice_of_stop`` payload names; ``None`` for any
    other payload."""
    if not payload.startswith("{") or '"stop"' not in payload:
        return None
    try:
        notice = json.loads(payload)
        task, instance = notice["task"], notice["stop"]
    except (ValueError, KeyError, TypeError):
        return None
    if isinstance(task, str) and isinstance(instance, str):
        return task, instance
    return None


def notice_of_check(token: str) -> str:
    """The NOTIFY payload a listener sends itself to check that notifications reach it
    (``Listener``): a JSON object no other listener reads as news of a task."""
    return json.dumps({"check": token})


def read_check_notice(payload: str) -> str | None:
    """The token of a ``notice_of_check`` payload; ``None`` for any other payload."""
    if not payload.startswith('{"check"'):
        return None
    try:
        token = json.loads(payload)["check"]
    except (ValueError, KeyError, TypeError):
        return None
    return token if isinstance(token, str) else None
