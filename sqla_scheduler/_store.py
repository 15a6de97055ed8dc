"""Database operations, each written once as a sync function over a ``Connection``.

Sync callers run these directly; async callers reach them through SQLAlchemy's
``run_sync`` (see ``_bridge``). Nothing here commits: the caller owns the transaction.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

from sqlalchemy import Connection, RowMapping, Table, inspect
from sqlalchemy.engine import URL

from sqla_scheduler import _group_store, _history_store, _rate_store, _result_store
from sqla_scheduler._dialects import backend_for, known_backend, notice_of_later
from sqla_scheduler._execution import (
    KEEP,
    RECURRING_INSTANCE_ID,
    Execution,
    ExecutionState,
    GroupPlan,
    TaskInstance,
    instance_values,
)
from sqla_scheduler._history_entry import HistorySetting, Outcome, keeps
from sqla_scheduler._statements import Scheduling, Statements, statements_for
from sqla_scheduler._statements.finding import NOTHING, Finding
from sqla_scheduler._statements.shapes import Shapes
from sqla_scheduler._types import dumps_payload
from sqla_scheduler.exceptions import MissingTableError
from sqla_scheduler.schedules import parse_schedule

if TYPE_CHECKING:
    from sqla_scheduler.tasks import RateLimit

Key = tuple[str, str]
T = TypeVar("T")

#: Rows inserted, or keys bound, in one statement: well under SQLite's 32,766 bound
#: parameters (an inserted row binds seven).
PER_STATEMENT = 1000

__all__ = [
    "LimitedPick",
    "Recurring",
    "TaskLimits",
    "cancel",
    "cancel_shown",
    "check_sqlite_file",
    "check_table",
    "count_executions",
    "get_execution",
    "insert_instances",
    "list_executions",
    "one_insert",
    "recurring_executions",
    "reschedule",
    "seen_task_names",
    "state_counts",
    "task_counts",
]

log = logging.getLogger("sqla_scheduler")


def _statements(conn: Connection, table: Table) -> Statements:
    return statements_for(table, backend_for(conn.dialect))


def _chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    """``items`` in slices of at most ``PER_STATEMENT``, one for each statement."""
    for start in range(0, len(items), PER_STATEMENT):
        yield items[start : start + PER_STATEMENT]


def one_insert(instances: Sized) -> bool:
    """Whether ``insert_instances`` writes ``instances`` with one statement (or none)."""
    return len(instances) <= PER_STATEMENT


def _notify(
    conn: Connection, stmts: Scheduling, task_names: set[str], at: datetime | None = None
) -> None:
    """NOTIFY in the caller's transaction: delivered on commit, dropped on rollback.

    The payload is the task name for work due now, else the task and its time (see
    ``notice_of_later``), so a scheduler can wait for it. For the UPDATEs that move an
    execution (reschedule, a recurring task's upsert); an INSERT sends its NOTIFYs from
    within its own statement.
    """
    if stmts.notify is not None:
        for name in sorted(task_names):
            payload = name if at is None else notice_of_later(name, at)
            conn.execute(stmts.notify, {"channel": stmts.channel, "payload": payload})


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
    table: Table,
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
    stmts = _statements(conn, table).scheduling
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
    if stmts.backend.inserts_return:
        times = [execution_time for _, execution_time in result]
        inserted = len(times)
    else:  # counted; the wake-up is for the earliest time asked (early is harmless)
        inserted = result.rowcount
        times = [i.execution_time or now for i in instances] if inserted else []
    if times and on_inserted is not None:
        on_inserted(min(times))
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
    table: Table,
    task_name: str,
    instance_id: str,
    *,
    shown_version: int | None = None,
    now: datetime | None = None,
    keep_result: bool = False,
) -> bool:
    """Delete an execution that is not running (and, given ``shown_version``, is still at
    that version); return whether one was deleted. With ``keep_result`` (its task keeps
    results) its result is kept as ``cancelled`` at ``now``; so is a group member's,
    whose group counts it as finished. A link of a chain that has not run takes the
    links after it with it: they waited for it."""
    stmts = _statements(conn, table).scheduling
    group_id, awaits = _group_store.forget_member(conn, table, task_name, instance_id)
    stmt = stmts.cancel(shown=shown_version is not None)
    deleted = conn.execute(stmt, _key(task_name, instance_id, shown_version)).rowcount == 1
    if not deleted or (not keep_result and group_id is None):
        return deleted
    now = now if now is not None else datetime.now(timezone.utc)
    kept = _result_store.Kept(
        task_name=task_name,
        instance_id=instance_id,
        outcome="cancelled",
        finished_at=now,
        group_id=group_id,
    )
    _result_store.record(conn, table, [kept])
    if group_id is not None and (
        awaits is not None or _group_store.is_chain(conn, table, group_id)
    ):  # a link of a chain: the rest with it
        _group_store.cancel_chain(conn, table, group_id, now)
    elif group_id is not None:
        _group_store.finished(conn, table, {group_id: 1}, now)
    return deleted


def reschedule(
    conn: Connection,
    table: Table,
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
    stmts = _statements(conn, table).scheduling
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


def get_execution(
    conn: Connection, table: Table, task_name: str, instance_id: str
) -> Execution | None:
    """One execution by key, or ``None``."""
    stmts = _statements(conn, table).scheduling
    row = (
        conn.execute(stmts.get, {"key_task": task_name, "key_instance": instance_id})
        .mappings()
        .one_or_none()
    )
    return None if row is None else Execution.from_row(row)


def list_executions(
    conn: Connection,
    table: Table,
    *,
    state: ExecutionState,
    task_name: str | None,
    known_tasks: frozenset[str],
    limit: int | None,
    offset: int,
    now: datetime,
    instance_contains: str | None = None,
) -> list[Execution]:
    """Executions in ``state``, highest priority and earliest first (failing: latest first).

    ``instance_contains`` keeps those whose instance id contains that text.
    """
    rows = _listing_rows(
        conn, table, state, task_name, known_tasks, limit, offset, now, instance_contains, None
    )
    return [Execution.from_row(row) for row in rows]


def list_previews(
    conn: Connection,
    table: Table,
    *,
    state: ExecutionState,
    task_name: str | None,
    known_tasks: frozenset[str],
    limit: int | None,
    offset: int,
    now: datetime,
    preview: int,
    instance_contains: str | None = None,
    finding: Finding = NOTHING,
) -> list[tuple[Execution, str | None, str | None]]:
    """``list_executions`` without the payloads and errors: each execution (its ``data``
    and ``last_error`` ``None``) with the first ``preview`` characters of its payload's
    JSON text and of its last error; ``finding`` filters and orders them further."""
    rows = _listing_rows(
        conn,
        table,
        state,
        task_name,
        known_tasks,
        limit,
        offset,
        now,
        instance_contains,
        preview,
        finding,
    )
    return [
        (Execution.from_row(row), row["task_data_preview"], row["last_error_preview"])
        for row in rows
    ]


def _listing_rows(
    conn: Connection,
    table: Table,
    state: ExecutionState,
    task_name: str | None,
    known_tasks: frozenset[str],
    limit: int | None,
    offset: int,
    now: datetime,
    instance_contains: str | None,
    preview: int | None,
    finding: Finding = NOTHING,
) -> Iterable[RowMapping]:
    """The rows of one listing (see ``Listing.list_executions``)."""
    query = _statements(conn, table).listing.list_executions(
        state=state,
        task_name=task_name,
        known_tasks=known_tasks,
        limit=limit,
        offset=offset,
        instance_contains=instance_contains,
        preview=preview,
        finding=finding,
    )
    return conn.execute(query, {"now": now} if state == "due" else {}).mappings()


def count_executions(
    conn: Connection,
    table: Table,
    *,
    state: ExecutionState,
    task_name: str | None,
    instance_contains: str | None,
    known_tasks: frozenset[str],
    now: datetime,
    finding: Finding = NOTHING,
) -> int:
    """How many executions ``list_executions`` lists with the same filters."""
    stmts = _statements(conn, table).listing
    query = stmts.count_executions(
        state=state,
        task_name=task_name,
        instance_contains=instance_contains,
        known_tasks=known_tasks,
        finding=finding,
    )
    params = {"now": now} if state == "due" else {}
    return int(conn.execute(query, params).scalar_one())


def seen_task_names(conn: Connection, table: Table, *, limit: int) -> list[str]:
    """Up to ``limit`` task names that have executions in ``table``, in order."""
    query = _statements(conn, table).listing.seen_task_names(limit)
    return list(conn.execute(query).scalars())


def state_counts(
    conn: Connection, table: Table, *, known_tasks: frozenset[str], now: datetime
) -> dict[str, int]:
    """How many executions are in each state (keys as in ``ExecutionState``), counted in
    one statement; executions of tasks not in ``known_tasks`` are orphaned."""
    stmts = _statements(conn, table).listing
    params = {"names": sorted(known_tasks), "now": now}
    return dict(conn.execute(stmts.state_counts, params).mappings().one())


def counts_by_task(conn: Connection, table: Table, *, now: datetime) -> dict[str, dict[str, int]]:
    """For every task name that has executions, registered or not, how many are in each
    state but ``orphaned`` (see ``state_totals``): one pass over the table."""
    stmts = _statements(conn, table).listing
    rows = conn.execute(stmts.counts_by_task, {"now": now}).mappings()
    return {row["task_name"]: {k: v for k, v in row.items() if k != "task_name"} for row in rows}


def state_totals(
    by_task: Mapping[str, Mapping[str, int]], known_tasks: frozenset[str]
) -> dict[str, int]:
    """What ``state_counts`` counts, from ``counts_by_task``'s counts: each state summed
    over the tasks, and the executions of tasks not in ``known_tasks`` as orphaned."""
    totals = dict.fromkeys(("all", "scheduled", "due", "running", "failing"), 0)
    orphaned = 0
    for name, counts in by_task.items():
        for state in totals:
            totals[state] += counts[state]
        if name not in known_tasks:
            orphaned += counts["all"]
    return {**totals, "orphaned": orphaned}


def task_counts(
    conn: Connection, table: Table, *, names: Sequence[str], now: datetime
) -> dict[str, dict[str, int]]:
    """For each of the tasks ``names`` that has executions, how many are in each state."""
    if not names:
        return {}
    stmts = _statements(conn, table).listing
    rows = conn.execute(stmts.task_counts, {"names": list(names), "now": now}).mappings()
    return {row["task_name"]: {k: v for k, v in row.items() if k != "task_name"} for row in rows}


def recurring_executions(
    conn: Connection, table: Table, *, names: Sequence[str], instance_id: str
) -> dict[str, Execution]:
    """The row of each recurring task of ``names`` that has one, by task name."""
    if not names:
        return {}
    stmts = _statements(conn, table).listing
    rows = conn.execute(stmts.recurring, {"names": list(names), "instance": instance_id})
    return {e.task_name: e for e in map(Execution.from_row, rows.mappings())}


def cancel_shown(
    conn: Connection,
    table: Table,
    *,
    task_name: str,
    instance_id: str,
    shown_version: int,
    now: datetime,
    keep_result: bool,
) -> bool:
    """Delete an execution if no scheduler holds it and it is still at ``shown_version``,
    as ``cancel`` does: with ``keep_result`` (its task keeps results) its result is kept
    as ``cancelled`` at ``now``, so that whoever waits for it is answered at once rather
    than at their timeout; so is a group member's, at the same ``now``."""
    return cancel(
        conn,
        table,
        task_name,
        instance_id,
        shown_version=shown_version,
        now=now,
        keep_result=keep_result,
    )


# --- the runner's operations ---------------------------------------------------------


def pick(
    conn: Connection,
    table: Table,
    *,
    names: Sequence[str],
    limit: int,
    picker: str,
    now: datetime,
) -> list[Execution]:
    """Pick up to ``limit`` due executions of ``names``, highest priority and oldest first."""
    if limit <= 0 or not names:
        return []
    stmts = _statements(conn, table).running
    rows = stmts.pick.run(
        conn, {"names": list(names), "limit": limit, "picker": picker, "now": now}
    )
    picked = [Execution.from_row(row._mapping) for row in rows]
    picked.sort(key=lambda e: (-e.priority, e.execution_time, e.task_name, e.instance_id))
    return picked


class TaskLimits(NamedTuple):
    """A limited task: the most of its executions picked at once (``max_concurrency``) and
    its ``rate_limit``, each ``None`` when it has none."""

    name: str
    most: int | None = None
    rate: RateLimit | None = None


class LimitedPick(NamedTuple):
    """What ``pick_limited`` took, and whether it took all that was due: every task had
    room for more than it found (so only new work, or time, can give it more to pick).

    And what the pick of each rate-limited task came to (``rated``: see
    ``_rate_store.Rated``)."""

    executions: list[Execution]
    drained: bool
    rated: dict[str, _rate_store.Rated]


def pick_limited(
    conn: Connection,
    table: Table,
    *,
    limits: Sequence[TaskLimits],
    limit: int,
    picker: str,
    now: datetime,
    prompt: int | None = None,
    clock: Callable[[], datetime] | None = None,
) -> LimitedPick:
    """Pick up to ``limit`` due executions of the tasks in ``limits``, none beyond its
    task's most at once nor its rate limit: in the caller's transaction, each task's picks
    counted under its lock (PostgreSQL; SQLite lets one writer in at a time), so that
    concurrent pickers in any number of processes never exceed it together.

    A rate-limited task's picks are counted with the time ``clock()`` reads under its lock
    (default ``now``; see ``_rate_store``). Of the executions picked, the first ``prompt``
    (default all) can start at once (free workers); the others wait for a worker, so they
    are only picked while the task's window keeps room to spare beyond them.
    """
    every = _statements(conn, table)
    stmts = every.running
    picked: list[Execution] = []
    drained = True
    rated: dict[str, _rate_store.Rated] = {}
    at_once = limit if prompt is None else prompt
    for name, most, rate in sorted(limits, key=lambda task: task.name):
        room = limit - len(picked)
        if room <= 0:
            return LimitedPick(picked, False, rated)
        if stmts.lock_task is not None:
            conn.execute(stmts.lock_task, {"lock_key": _lock_key(table, name)})
        allowed = room
        if most is not None:
            running = int(conn.execute(stmts.count_picked, {"name": name}).scalar_one())
            allowed = min(room, most - running)
            if allowed <= 0:
                drained = False  # full: what is due waits for a place
                continue
        if rate is None:
            found = pick(conn, table, names=[name], limit=allowed, picker=picker, now=now)
            drained = drained and len(found) < allowed
            picked += found
            continue
        rated[name] = _rate_store.pick(
            conn,
            every.rates,
            name,
            rate,
            allowed=allowed,
            at_once=at_once - len(picked),
            concurrent=most is not None,
            now=now,
            clock=clock,
            take=partial(pick, conn, table, names=[name], picker=picker, now=now),
        )
        picked += rated[name].found
        drained = drained and rated[name].drained
    return LimitedPick(picked, drained, rated)


def _lock_key(table: Table, task_name: str) -> int:
    """A signed 64-bit advisory lock key for ``task_name`` on ``table``."""
    digest = hashlib.blake2b(f"{table.fullname}\x00{task_name}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def heartbeat(
    conn: Connection, table: Table, held: Sequence[tuple[str, str, int]], now: datetime
) -> set[Key]:
    """Refresh the heartbeat of each held (task, instance, version); return those refreshed."""
    return _stamp(conn, table, held, now, started=False)


def mark_started(
    conn: Connection, table: Table, held: Sequence[tuple[str, str, int]], now: datetime
) -> set[Key]:
    """Record that the handlers of held (task, instance, version) start now; return the
    ones still held (the others were taken over and must not run)."""
    return _stamp(conn, table, held, now, started=True)


def _stamp(
    conn: Connection,
    table: Table,
    held: Sequence[tuple[str, str, int]],
    now: datetime,
    *,
    started: bool,
) -> set[Key]:
    """Set the start time (``started``) or the heartbeat of each held (task, instance,
    version) to ``now``; return those still held."""
    if not held:
        return set()
    stmts = _statements(conn, table).running
    stmt = stmts.mark_started if started else stmts.heartbeat
    rows = stmt.run(conn, {**_key_lists(stmts, held), "now": now})
    return {(row.task_name, row.task_instance) for row in rows}


def _key_lists(stmts: Shapes, keys: Sequence[tuple[str, str, int]]) -> dict[str, Any]:
    """Bind (task, instance, version) keys the way ``Shapes.held_keys`` expects."""
    if stmts.backend.binds_arrays:
        return {
            "names": [k[0] for k in keys],
            "instances": [k[1] for k in keys],
            "versions": [k[2] for k in keys],
        }
    if stmts.backend.json_rows is not None:
        return {"keys": json.dumps([list(k) for k in keys])}
    return {"keys": list(keys)}


def _key_params(execution: Execution) -> dict[str, Any]:
    return {
        "key_task": execution.task_name,
        "key_instance": execution.instance_id,
        "seen_version": execution.version,
    }


def remove(conn: Connection, table: Table, execution: Execution) -> bool:
    """Delete a held execution; ``False`` when its version moved (someone else owns it)."""
    stmts = _statements(conn, table).running
    return conn.execute(stmts.remove, _key_params(execution)).rowcount == 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """The outcome of one held execution, to commit with others in one transaction.

    ``remove`` deletes the row; ``succeed`` and ``fail`` hand it back to run at ``at``
    (``fail`` with ``error``, the attempt's error text; ``succeed`` clears it);
    ``release`` hands it back untouched; ``quarantine`` takes it out of rotation into
    history as ``undecodable`` with its payload (deletes it when history is off).
    ``scheduled`` are inserted only if the outcome was recorded (the execution was still
    ours). ``outcome`` is what the history table calls it (``None``: nothing to record).
    ``payload_version`` is the version ``succeed``'s ``data`` was written with (``None``:
    the execution's own, for the payload it kept).
    """

    execution: Execution
    kind: Literal["remove", "succeed", "fail", "release", "quarantine"]
    now: datetime
    at: datetime | None = None
    data: Any = None
    failures: int = 0
    error: str | None = None
    scheduled: Sequence[TaskInstance[Any]] = ()
    outcome: Outcome | None = None
    #: When the handler started, for its history entry.
    started_at: datetime | None = None
    payload_version: int | None = None
    #: The final outcome to keep (a task with ``keep_result``), if the outcome is recorded.
    result: _result_store.Kept | None = None
    #: Groups and chains the handler scheduled, scheduled if the outcome is recorded.
    plans: Sequence[GroupPlan] = ()

    def entry(self) -> _history_store.Entry:
        """The history entry of this outcome (``outcome`` must be set)."""
        assert self.outcome is not None
        e = self.execution
        attempt = self.failures if self.kind == "fail" else max(e.consecutive_failures, 0) + 1
        return _history_store.Entry(
            execution=e,
            outcome=self.outcome,
            finished_at=self.now,
            started_at=self.started_at,
            attempt=max(attempt, 1),
            error=self.error,
        )

    def recorded_alone(self, history: HistorySetting) -> bool:
        """Whether committing this outcome is one statement with nothing beside it (a
        removal with no entry to keep and nothing scheduled), so needs no transaction."""
        if self.kind != "remove" or self.scheduled or self.plans or self.result is not None:
            return False
        return self.outcome is None or not keeps(history, self.outcome)


def complete(
    conn: Connection,
    table: Table,
    batch: Sequence[Completion],
    history: HistorySetting,
    notify: frozenset[str] = frozenset(),
) -> list[bool]:
    """Commit a batch of outcomes; return, for each, whether it was recorded.

    All removals go in one statement, the history entries that ``history`` keeps in
    another; the other outcomes one statement each. The recorded outcomes of tasks in
    ``notify`` (those with a ``max_concurrency``) wake the schedulers on commit: a place
    they may be waiting for is free.
    """
    stmts = _statements(conn, table).running
    removes = [c.execution for c in batch if c.kind == "remove"]
    removed: set[Key] = set()
    if removes:
        keys = [(e.task_name, e.instance_id, e.version) for e in removes]
        rows = stmts.remove_many.run(conn, _key_lists(stmts, keys))
        removed = {(row.task_name, row.task_instance) for row in rows}
    hand_back = {"succeed": stmts.succeed, "fail": stmts.fail, "release": stmts.release}
    recorded: list[bool] = []
    entries: list[_history_store.Entry] = []
    kept: list[_result_store.Kept] = []
    finished: dict[int, int] = {}  # members of groups that finished, by group
    for c in batch:
        e = c.execution
        if c.kind == "remove":
            ok = (e.task_name, e.instance_id) in removed
        elif c.kind == "quarantine":
            if history == "none":
                ok = conn.execute(stmts.remove, _key_params(e)).rowcount == 1
            else:
                ok = _history_store.move(conn, table, c.entry())
        else:
            # Each statement binds the parameters it names and ignores the others.
            params = {
                **_key_params(e),
                "now": c.now,
                "new_time": c.at,
                "new_data": c.data,
                "new_payload_version": (
                    e.payload_version if c.payload_version is None else c.payload_version
                ),
                "failures": c.failures,
                "new_error": c.error,
            }
            ok = conn.execute(hand_back[c.kind], params).rowcount == 1
        if ok and c.scheduled:
            insert_instances(conn, table, c.scheduled, c.now)
        if ok:
            for plan in c.plans:
                _schedule_plan(conn, table, plan, c)
        if ok and c.outcome is not None and c.kind != "quarantine" and keeps(history, c.outcome):
            entries.append(c.entry())
        if ok and c.result is not None:
            kept.append(c.result)
        if ok and e.group_id is not None and c.kind in ("remove", "quarantine"):
            finished[e.group_id] = finished.get(e.group_id, 0) + 1
        recorded.append(ok)
    _history_store.record(conn, table, history, entries)
    _result_store.record(conn, table, kept)
    if finished:
        _group_store.finished(conn, table, finished, batch[0].now)
    if notify:
        freed = {c.execution.task_name for c, ok in zip(batch, recorded, strict=True) if ok}
        _notify(conn, _statements(conn, table).scheduling, freed & notify)
    return recorded


def _schedule_plan(conn: Connection, table: Table, plan: GroupPlan, by: Completion) -> None:
    if _group_store.schedule(conn, table, plan, by.now) is None and not plan.whole:
        e = by.execution
        log.warning(
            "%s/%s scheduled a group whose callback's key is taken (%s); it was not scheduled",
            e.task_name,
            e.instance_id,
            ", ".join(f"{c.task_name}/{c.instance_id}" for c in plan.then),
        )


def abandon(
    conn: Connection,
    table: Table,
    execution: Execution,
    *,
    now: datetime,
    failures: int,
    error: str | None,
    history: HistorySetting,
    keep_result: bool = False,
) -> bool:
    """Take a held execution out of the table for good: into history as ``abandoned``
    with its payload and ``error`` (deleted when history is off), and, ``keep_result``,
    into the results. ``False`` when its version moved (someone else owns it)."""
    if history == "none":
        removed = remove(conn, table, execution)
    else:
        entry = _history_store.Entry(
            execution=execution,
            outcome="abandoned",
            finished_at=now,
            started_at=execution.started_at,
            attempt=max(failures, 1),
            error=error,
        )
        removed = _history_store.move(conn, table, entry)
    if removed and keep_result:
        kept = _result_store.Kept(
            task_name=execution.task_name,
            instance_id=execution.instance_id,
            outcome="abandoned",
            finished_at=now,
            error=error,
            group_id=execution.group_id,
        )
        _result_store.record(conn, table, [kept])
    if removed and execution.group_id is not None:
        _group_store.finished(conn, table, {execution.group_id: 1}, now)
    return removed


def revive(
    conn: Connection,
    table: Table,
    *,
    threshold: datetime,
    now: datetime,
    history: HistorySetting = "none",
) -> list[Execution]:
    """Make executions whose heartbeat is older than ``threshold`` due again; return them
    as found (who had picked them, their last heartbeat and start). Each is recorded in
    history as ``dead``, as ``history`` allows: its start, where it was recorded, and
    otherwise an error text saying that its handler may have run."""
    stmts = _statements(conn, table).running
    params = {"threshold": threshold, "now": now}
    revived: list[Execution] = []
    if stmts.revive is not None:
        found_rows = conn.execute(stmts.revive, params).mappings()
        revived = [Execution.from_row(row) for row in found_rows]
    else:
        # Two statements; the version in each key makes the second revive only rows the
        # first found, unchanged since.
        found = {
            (name, instance): (version, picked_by, last_heartbeat, started_at)
            for name, instance, version, picked_by, last_heartbeat, started_at in conn.execute(
                stmts.find_dead, params
            )
        }
        keys = [(name, instance, version) for (name, instance), (version, *_) in found.items()]
        for chunk in _chunks(keys):
            rows = stmts.revive_found.run(conn, {**params, **_key_lists(stmts, chunk)})
            for row in rows:
                execution = Execution.from_row(row._mapping)
                _, picked_by, beat, started_at = found[(execution.task_name, execution.instance_id)]
                revived.append(
                    replace(
                        execution,
                        picked=True,
                        picked_by=picked_by,
                        last_heartbeat=beat,
                        started_at=started_at,
                    )
                )
    _history_store.record(
        conn,
        table,
        history,
        [
            _history_store.Entry(
                execution=e,
                outcome="dead",
                finished_at=now,
                started_at=e.started_at,
                # a recorded start was counted as a failure by the revival; an unrecorded
                # one was not, so its attempt is the one after the failures so far
                attempt=(
                    max(e.consecutive_failures, 1)
                    if e.started_at is not None
                    else max(e.consecutive_failures, 0) + 1
                ),
                error=_dead_error(e),
            )
            for e in revived
        ],
    )
    return revived


def _dead_error(execution: Execution) -> str:
    beat = execution.last_heartbeat
    since = f"no heartbeat from {execution.picked_by!r} since " + (
        beat.isoformat() if beat is not None else "the pick"
    )
    if execution.started_at is not None:
        return (
            f"{since}: its scheduler died or lost the database while the handler ran; the "
            "execution was made due again"
        )
    # A first attempt's start is not recorded (for speed): it may have been held in a
    # queue, or its handler may have run in part or in full.
    return (
        f"{since}: its scheduler died or lost the database while it held the execution; "
        "its start was not recorded, so its handler may have run, in part or in full; the "
        "execution was made due again"
    )


def find_unreadable(
    conn: Connection, table: Table, *, now: datetime, limit: int
) -> list[tuple[Any, Any, list[str]]]:
    """Rows due or picked that no scheduler can load, at most ``limit``: each one's task
    name, instance id and the columns whose values cannot be read."""
    stmts = _statements(conn, table).running
    rows = conn.execute(stmts.find_unreadable, {"now": now, "limit": limit}).mappings()
    return [
        (row["task_name"], row["task_instance"], [n for n in stmts.readable if not row[f"ok_{n}"]])
        for row in rows
    ]


def next_due(
    conn: Connection, table: Table, *, names: Sequence[str], now: datetime
) -> datetime | None:
    """The earliest execution time after ``now`` among the unpicked rows of ``names``."""
    if not names:
        return None
    stmts = _statements(conn, table).running
    found: datetime | None = conn.execute(
        stmts.next_due, {"names": list(names), "now": now}
    ).scalar()
    return found


def delete_orphans(
    conn: Connection, table: Table, *, known: Sequence[str], threshold: datetime
) -> list[tuple[str, str, Any]]:
    """Delete unpicked rows of unknown tasks due before ``threshold``; return what went."""
    stmts = _statements(conn, table).running
    rows = stmts.delete_orphans.run(conn, {"names": list(known), "threshold": threshold})
    return [(row.task_name, row.task_instance, row.task_data) for row in rows]


@dataclass(frozen=True, slots=True)
class Recurring:
    """A recurring task as registered: its first instance, or ``None`` when disabled."""

    task_name: str
    first: TaskInstance[Any] | None
    #: Whether the schedule gives the same times wherever it is computed (cron, daily):
    #: then a changed schedule moves the row's time to the new first one.
    deterministic: bool


def register_recurring(
    conn: Connection, table: Table, tasks: Sequence[Recurring], now: datetime
) -> None:
    """Create or refresh each recurring task's row (see ``Scheduling.upsert_recurring``),
    or remove it when its schedule is disabled; in the caller's transaction."""
    stmts = _statements(conn, table).scheduling
    due: set[str] = set()
    for task in tasks:
        instance = task.first
        if instance is None:
            cancel(conn, table, task.task_name, RECURRING_INSTANCE_ID)
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
