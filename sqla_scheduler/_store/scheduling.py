"""The clients' writes: insert instances, cancel, reschedule, register recurring tasks.

Each is a sync function over a ``Connection`` in the caller's transaction.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence, Sized
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, TypeVar

from sqlalchemy import Connection, Table, inspect
from sqlalchemy.engine import URL

from sqla_scheduler._dialects import known_backend, notice_of_stop
from sqla_scheduler._execution import (
    KEEP,
    RECURRING_INSTANCE_ID,
    TaskInstance,
    instance_values,
)
from sqla_scheduler._statements import Scheduling, Statements
from sqla_scheduler._store import groups as group_store
from sqla_scheduler._store import results as result_store

#: Rows inserted, or keys bound, in one statement: well under SQLite's 32,766 bound
from sqla_scheduler._store._shared import PER_STATEMENT
from sqla_scheduler._store._shared import chunks as _chunks
from sqla_scheduler._store._shared import notify as _notify
from sqla_scheduler._types import dumps_payload
from sqla_scheduler.exceptions import MissingTableError
from sqla_scheduler.schedules import parse_schedule

Key = tuple[str, str]
T = TypeVar("T")

log = logging.getLogger("sqla_scheduler")


def one_insert(instances: Sized) -> bool:
    """Whether ``insert_instances`` writes ``instances`` with one statement (or none)."""
    return len(instances) <= PER_STATEMENT


def check_table(conn: Connection, table: Table) -> None:
    """Raise ``MissingTableError`` when ``table`` is not in the database."""
    if not inspect(conn).has_table(table.name, schema=table.schema):
        url = conn.engine.url.render_as_string(hide_password=True)
        raise MissingTableError(
            f"the table {table.fullname!r} does not exist in {url}: run `sqla-scheduler db "
            "upgrade` (or apply the scheduler's migrations with the application's Alembic)"
        )


def check_sqlite_file(url: URL, table: Table) -> None:
    """Fail on a SQLite file that does not exist, rather than create an empty one."""
    backend = known_backend(url)
    database = backend.missing_database_file(url) if backend is not None else None
    if database is not None and not os.path.exists(database):
        shown = url.render_as_string(hide_password=True)
        raise MissingTableError(
            f"the SQLite database {database!r} does not exist, nor then does the table "
            f"{table.fullname!r}: create both with `sqla-scheduler db upgrade --url {shown}`"
        )


def insert_instances(
    conn: Connection,
    statements: Statements,
    instances: Sequence[TaskInstance[Any]],
    now: datetime,
    trace_context: Mapping[str, str] | None = None,
    on_inserted: Callable[[datetime], None] | None = None,
) -> int:
    """Insert the executions that do not exist yet; return how many were inserted.

    One statement for each ``PER_STATEMENT`` of them (see ``one_insert``), all in the
    caller's transaction. ``trace_context`` (what the scheduler's interceptors captured, if
    anything) is stored with each of them. ``on_inserted`` is called with the earliest
    execution time of each statement that inserted anything. An instance with a schedule of
    its own and no time first runs when its schedule first says, as of ``now``.
    """
    stmts = statements.scheduling
    if any(i.execution_time is None and i.schedule is not None for i in instances):
        instances = [_at_first_run(i, now) for i in instances]
    inserted = 0
    for chunk in _chunks(instances):
        inserted += _insert_chunk(conn, stmts, chunk, now, trace_context, on_inserted)
    return inserted


def _at_first_run(instance: TaskInstance[Any], now: datetime) -> TaskInstance[Any]:
    if instance.execution_time is not None or instance.schedule is None:
        return instance
    return replace(instance, execution_time=parse_schedule(instance.schedule).first_run(now))


def _insert_chunk(
    conn: Connection,
    stmts: Scheduling,
    instances: Sequence[TaskInstance[Any]],
    now: datetime,
    trace_context: Mapping[str, str] | None,
    on_inserted: Callable[[datetime], None] | None,
) -> int:
    """``insert_instances`` for at most ``PER_STATEMENT`` instances, in one statement."""
    if stmts.insert_many is not None and len(instances) > 1:
        now_text = now.isoformat()
        rows = [_json_row(i, now_text, trace_context) for i in instances]
        params = {"rows": rows, "now": now, "channel": stmts.channel}
        inserted, _, earliest = conn.execute(stmts.insert_many, params).one()
        if earliest is not None and on_inserted is not None:
            on_inserted(earliest)
        return int(inserted)
    if len(instances) == 1 and stmts.insert_one is not None:
        params = {**instance_values(instances[0], now, trace_context), "now": now}
        sent = conn.execute(stmts.insert_one, {**params, "channel": stmts.channel}).all()
        if sent and on_inserted is not None:
            on_inserted(min(execution_time for _, execution_time in sent))
        return len(sent)
    if len(instances) > 1 and stmts.insert_rows is not None:
        as_json = _array_rows(instances, now, trace_context)
        result = conn.execute(stmts.insert_rows, {"rows": as_json})
    else:
        result = conn.execute(
            stmts.insert, [instance_values(i, now, trace_context) for i in instances]
        )
    # Only SQLite and MariaDB get here (PostgreSQL's statements above send their own
    # NOTIFYs), and they have no NOTIFY to send: ``on_inserted`` is their wake-up.
    asked = [(i.task_name, i.execution_time or now) for i in instances]
    inserted, found = stmts.backend.inserted(result, asked)
    if found and on_inserted is not None:
        on_inserted(min(execution_time for _, execution_time in found))
    return inserted


def _array_rows(
    instances: Sequence[TaskInstance[Any]],
    now: datetime,
    trace_context: Mapping[str, str] | None,
) -> str:
    """``insert_rows``' JSON: an array per execution, its values in ``JSON_ROW`` order,
    the payload and the trace context as their JSON text, the time as naive UTC text."""
    context = None if trace_context is None else json.dumps(trace_context)
    last_at, last_text = None, ""
    rows = []
    for i in instances:
        at = i.execution_time or now
        if at is not last_at:  # a batch mostly shares one time: written once
            last_at = at
            last_text = at.astimezone(timezone.utc).replace(tzinfo=None).isoformat(sep=" ")
        rows.append(
            [
                i.task_name,
                i.instance_id,
                dumps_payload(i.data),
                last_text,
                i.priority,
                i.schedule,
                context,
                i.payload_version,
            ]
        )
    return json.dumps(rows)


def _json_row(
    instance: TaskInstance[Any], now_text: str, trace_context: Mapping[str, str] | None
) -> dict[str, Any]:
    """One row of ``insert_many``'s JSON: times in ISO form, NULLs left out (a missing
    key reads as NULL)."""
    at = instance.execution_time
    row: dict[str, Any] = {
        "task_name": instance.task_name,
        "task_instance": instance.instance_id,
        "execution_time": now_text if at is None else at.isoformat(),
        "priority": instance.priority,
        "payload_version": instance.payload_version,
    }
    if instance.data is not None:
        row["task_data"] = instance.data
    if instance.schedule is not None:
        row["schedule"] = instance.schedule
    if trace_context is not None:
        row["trace_context"] = trace_context
    return row


def _key(task_name: str, instance_id: str, shown_version: int | None) -> dict[str, Any]:
    """Bind an execution's key, and the version the operator was shown if there is one."""
    params: dict[str, Any] = {"key_task": task_name, "key_instance": instance_id}
    if shown_version is not None:
        params["shown_version"] = shown_version
    return params


def cancel(
    conn: Connection,
    statements: Statements,
    task_name: str,
    instance_id: str,
    *,
    shown_version: int | None = None,
    now: datetime | None = None,
    keep_result: bool = False,
    stop: bool = False,
    on_stop: Callable[[str, str], None] | None = None,
) -> bool:
    """Delete an execution that is not running (and, given ``shown_version``, is still at
    that version); return whether one was deleted. With ``keep_result`` (its task keeps
    results) its result is kept as ``cancelled`` at ``now``; so is a group member's,
    whose group counts it as finished. A link of a chain that has not run takes the
    links after it with it: they waited for it.

    With ``stop``, an execution that is running is asked to stop instead
    (``request_stop``, which calls ``on_stop``): whether it was."""
    stmts = statements.scheduling
    group_id, awaits = group_store.forget_member(conn, statements, task_name, instance_id)
    stmt = stmts.cancel(shown=shown_version is not None)
    deleted = conn.execute(stmt, _key(task_name, instance_id, shown_version)).rowcount == 1
    now = now if now is not None else datetime.now(timezone.utc)
    if not deleted and stop:
        return request_stop(
            conn, statements, task_name, instance_id, now, shown_version, on_stop=on_stop
        )
    if not deleted or (not keep_result and group_id is None):
        return deleted
    result_store.record_cancelled(conn, statements, task_name, instance_id, now, group_id)
    if group_id is not None and (
        awaits is not None or group_store.is_chain(conn, statements, group_id)
    ):  # a link of a chain: the rest with it
        group_store.cancel_chain(conn, statements, group_id, now)
    elif group_id is not None:
        group_store.finished(conn, statements, {group_id: 1}, now)
    return deleted


def request_stop(
    conn: Connection,
    statements: Statements,
    task_name: str,
    instance_id: str,
    now: datetime,
    shown_version: int | None = None,
    *,
    on_stop: Callable[[str, str], None] | None = None,
) -> bool:
    """Ask the scheduler running ``task_name``/``instance_id`` to stop it (and, given
    ``shown_version``, only while it is still at that version): the stop request is
    recorded at ``now`` (an earlier one stays), and the running schedulers hear of it on
    commit (NOTIFY on PostgreSQL; elsewhere the scheduler holding it reads its own rows),
    as does this process's own (``on_stop``). ``False`` when no scheduler is running it."""
    stmts = statements.scheduling
    params = {**_key(task_name, instance_id, shown_version), "now": now}
    if conn.execute(stmts.request_stop(shown=shown_version is not None), params).rowcount != 1:
        return False
    if stmts.notify is not None:
        payload = notice_of_stop(task_name, instance_id)
        conn.execute(stmts.notify, {"channel": stmts.channel, "payload": payload})
    if on_stop is not None:
        on_stop(task_name, instance_id)
    return True


def reschedule(
    conn: Connection,
    statements: Statements,
    task_name: str,
    instance_id: str,
    at: datetime,
    data: Any,
    now: datetime,
    *,
    schedule: str | None = None,
    shown_version: int | None = None,
    on_moved: Callable[[datetime], None] | None = None,
    payload_version: int = 1,
) -> bool:
    """Move an execution that is not running (and, given ``shown_version``, is still at
    that version) to ``at``, with the payload ``data`` written at ``payload_version``
    unless it is KEEP, and the schedule text ``schedule`` unless it is ``None``; return
    whether it moved. Moved, it notifies the schedulers on commit (see ``_notify``) and
    calls ``on_moved`` with ``at``."""
    stmts = statements.scheduling
    params = {**_key(task_name, instance_id, shown_version), "new_time": at}
    if data is not KEEP:
        params["new_data"] = data
        params["new_payload_version"] = payload_version
    if schedule is not None:
        params["new_schedule"] = schedule
    stmt = stmts.reschedule(
        new_data=data is not KEEP,
        new_schedule=schedule is not None,
        shown=shown_version is not None,
    )
    moved = stmt.run(conn, params)
    if moved:
        _notify(conn, stmts, {task_name}, None if at <= now else at)
    if moved and on_moved is not None:
        on_moved(at)
    return bool(moved)


def cancel_shown(
    conn: Connection,
    statements: Statements,
    *,
    task_name: str,
    instance_id: str,
    shown_version: int,
    now: datetime,
    keep_result: bool,
    stop: bool = False,
    on_stop: Callable[[str, str], None] | None = None,
) -> bool:
    """Delete an execution if no scheduler holds it and it is still at ``shown_version``,
    as ``cancel`` does: with ``keep_result`` (its task keeps results) its result is kept
    as ``cancelled`` at ``now``, so that whoever waits for it is answered at once rather
    than at their timeout; so is a group member's, at the same ``now``. With ``stop``, one
    that is running is asked to stop instead (``request_stop``, which calls ``on_stop``)."""
    return cancel(
        conn,
        statements,
        task_name,
        instance_id,
        shown_version=shown_version,
        now=now,
        keep_result=keep_result,
        stop=stop,
        on_stop=on_stop,
    )


@dataclass(frozen=True, slots=True)
class Recurring:
    """A recurring task as registered: its first instance, or ``None`` when disabled."""

    task_name: str
    first: TaskInstance[Any] | None
    #: Whether the schedule gives the same times wherever it is computed (cron, daily):
    #: then a changed schedule moves the row's time to the new first one.
    deterministic: bool


def register_recurring(
    conn: Connection, statements: Statements, tasks: Sequence[Recurring], now: datetime
) -> None:
    """Create or refresh each recurring task's row (see ``Scheduling.upsert_recurring``),
    or remove it when its schedule is disabled; in the caller's transaction."""
    stmts = statements.scheduling
    due: set[str] = set()
    for task in tasks:
        instance = task.first
        if instance is None:
            cancel(conn, statements, task.task_name, RECURRING_INSTANCE_ID)
            continue
        at = instance.execution_time or now
        conn.execute(
            stmts.upsert_recurring,
            {
                "task_name": instance.task_name,
                "task_instance": instance.instance_id,
                "task_data": instance.data,
                "execution_time": at,
                "priority": instance.priority,
                "schedule": instance.schedule,
                "trace_context": None,
                "payload_version": instance.payload_version,
                "deterministic": task.deterministic,
            },
        )
        if at <= now:
            due.add(instance.task_name)
    _notify(conn, stmts, due)
