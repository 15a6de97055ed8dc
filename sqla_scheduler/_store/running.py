"""The runner's operations: pick, stamp, complete, abandon, revive and find.

Completing applies the row changes; what else an outcome records beside its row (history,
results, groups, what its handler scheduled, NOTIFY) is the recorders' (``completion``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import Connection, Table

from sqla_scheduler._execution import Execution
from sqla_scheduler._history_entry import HistorySetting
from sqla_scheduler._statements import Statements
from sqla_scheduler._store import completion
from sqla_scheduler._store import history as history_store
from sqla_scheduler._store import rates as rate_store
from sqla_scheduler._store import results as result_store
from sqla_scheduler._store._shared import chunks as _chunks
from sqla_scheduler._store.completion import Applied, Completion

if TYPE_CHECKING:
    from sqla_scheduler.tasks import RateLimit

__all__ = [
    "LimitedPick",
    "TaskLimits",
    "abandon",
    "complete",
    "delete_orphans",
    "find_unreadable",
    "heartbeat",
    "mark_started",
    "next_due",
    "pick",
    "pick_limited",
    "remove",
    "report_progress",
    "revive",
    "stop_requests",
]

Key = tuple[str, str]


def pick(
    conn: Connection,
    statements: Statements,
    *,
    names: Sequence[str],
    limit: int,
    picker: str,
    now: datetime,
) -> list[Execution]:
    """Pick up to ``limit`` due executions of ``names``, highest priority and oldest first."""
    if limit <= 0 or not names:
        return []
    stmts = statements.running
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
    ``_store.rates.Rated``)."""

    executions: list[Execution]
    drained: bool
    rated: dict[str, rate_store.Rated]


def pick_limited(
    conn: Connection,
    statements: Statements,
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
    (default ``now``; see ``_store.rates``). Of the executions picked, the first ``prompt``
    (default all) can start at once (free workers); the others wait for a worker, so they
    are only picked while the task's window keeps room to spare beyond them.
    """
    stmts = statements.running
    picked: list[Execution] = []
    drained = True
    rated: dict[str, rate_store.Rated] = {}
    at_once = limit if prompt is None else prompt
    for name, most, rate in sorted(limits, key=lambda task: task.name):
        room = limit - len(picked)
        if room <= 0:
            return LimitedPick(picked, False, rated)
        if stmts.lock_task is not None:
            conn.execute(stmts.lock_task, {"lock_key": _lock_key(statements.table, name)})
        allowed = room
        if most is not None:
            running = int(conn.execute(stmts.count_picked, {"name": name}).scalar_one())
            allowed = min(room, most - running)
            if allowed <= 0:
                drained = False  # full: what is due waits for a place
                continue
        if rate is None:
            found = pick(conn, statements, names=[name], limit=allowed, picker=picker, now=now)
            drained = drained and len(found) < allowed
            picked += found
            continue
        rated[name] = rate_store.pick(
            conn,
            statements.rates,
            name,
            rate,
            allowed=allowed,
            at_once=at_once - len(picked),
            concurrent=most is not None,
            now=now,
            clock=clock,
            take=partial(pick, conn, statements, names=[name], picker=picker, now=now),
        )
        picked += rated[name].found
        drained = drained and rated[name].drained
    return LimitedPick(picked, drained, rated)


def _lock_key(table: Table, task_name: str) -> int:
    """A signed 64-bit advisory lock key for ``task_name`` on ``table``."""
    digest = hashlib.blake2b(f"{table.fullname}\x00{task_name}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def heartbeat(
    conn: Connection, statements: Statements, held: Sequence[tuple[str, str, int]], now: datetime
) -> set[Key]:
    """Refresh the heartbeat of each held (task, instance, version); return those refreshed."""
    return _stamp(conn, statements, held, now, started=False)


def mark_started(
    conn: Connection, statements: Statements, held: Sequence[tuple[str, str, int]], now: datetime
) -> set[Key]:
    """Record that the handlers of held (task, instance, version) start now; return the
    ones still held (the others were taken over and must not run)."""
    return _stamp(conn, statements, held, now, started=True)


def _stamp(
    conn: Connection,
    statements: Statements,
    held: Sequence[tuple[str, str, int]],
    now: datetime,
    *,
    started: bool,
) -> set[Key]:
    """Set the start time (``started``) or the heartbeat of each held (task, instance,
    version) to ``now``; return those still held."""
    if not held:
        return set()
    stmts = statements.running
    stmt = stmts.mark_started if started else stmts.heartbeat
    rows = stmt.run(conn, {**stmts.backend.bind_held_keys(held), "now": now})
    return {(row.task_name, row.task_instance) for row in rows}


def report_progress(
    conn: Connection,
    statements: Statements,
    reports: Sequence[tuple[Execution, float | None, str | None]],
    now: datetime,
) -> None:
    """Write each held execution's latest progress (fraction, message), at ``now``, in
    one statement; an execution whose version moved (another process holds it now) is
    left as it is."""
    if not reports:
        return
    params = [
        {**_key_params(execution), "new_progress": fraction, "new_message": message, "now": now}
        for execution, fraction, message in reports
    ]
    conn.execute(statements.running.report_progress, params)


def stop_requests(
    conn: Connection, statements: Statements, *, picker: str
) -> list[tuple[str, str, int]]:
    """The executions ``picker`` holds whose stop ``cancel`` requested: (task, instance,
    version) of each."""
    rows = conn.execute(statements.running.stop_requests, {"picker": picker})
    return [(task, instance, version) for task, instance, version in rows]


def _key_params(execution: Execution) -> dict[str, Any]:
    return {
        "key_task": execution.task_name,
        "key_instance": execution.instance_id,
        "seen_version": execution.version,
    }


def remove(conn: Connection, statements: Statements, execution: Execution) -> bool:
    """Delete a held execution; ``False`` when its version moved (someone else owns it)."""
    stmts = statements.running
    return conn.execute(stmts.remove, _key_params(execution)).rowcount == 1


def complete(
    conn: Connection,
    statements: Statements,
    batch: Sequence[Completion],
    history: HistorySetting,
    notify: frozenset[str] = frozenset(),
) -> list[bool]:
    """Commit a batch of outcomes; return, for each, whether it was recorded.

    The rows change first (``_apply``): all removals in one statement, the other outcomes
    one statement each. Then the recorders of ``_store.completion`` record what else the
    recorded outcomes come to, a statement per feature: what their handlers scheduled,
    the history entries that ``history`` keeps, the kept results, the groups they
    finished. The recorded outcomes of tasks in ``notify`` (those with a
    ``max_concurrency``) wake the schedulers on commit: a place they may be waiting for
    is free.
    """
    recorded = _apply(conn, statements, batch, history)
    applied = [c for c, ok in zip(batch, recorded, strict=True) if ok]
    if applied:
        completion.record(conn, statements, Applied(applied, batch[0].now, history, notify))
    return recorded


def _apply(
    conn: Connection, statements: Statements, batch: Sequence[Completion], history: HistorySetting
) -> list[bool]:
    """Change the row of each outcome in ``batch``; whether each changed (its version had
    not moved)."""
    stmts = statements.running
    removed: set[Key] = set()
    removes = [c.execution for c in batch if c.kind == "remove"]
    if removes:
        keys = [(e.task_name, e.instance_id, e.version) for e in removes]
        rows = stmts.remove_many.run(conn, stmts.backend.bind_held_keys(keys))
        removed = {(row.task_name, row.task_instance) for row in rows}
    hand_back = {
        "succeed": stmts.succeed,
        "fail": stmts.fail,
        "snooze": stmts.snooze,
        "release": stmts.release,
    }
    recorded: list[bool] = []
    for c in batch:
        e = c.execution
        if c.kind == "remove":
            recorded.append((e.task_name, e.instance_id) in removed)
        elif c.moves:
            recorded.append(_take_out(conn, statements, c, history))
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
                "new_snoozes": c.snoozes,
            }
            recorded.append(conn.execute(hand_back[c.kind], params).rowcount == 1)
    return recorded


def _take_out(
    conn: Connection, statements: Statements, c: Completion, history: HistorySetting
) -> bool:
    """Move the row of ``c`` into history with its entry and payload; delete it when
    history is off. ``False`` when its version moved."""
    if history == "none":
        return remove(conn, statements, c.execution)
    return history_store.move(conn, statements, c.entry())


def abandon(
    conn: Connection,
    statements: Statements,
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
    into the results; its group, if any, counts it as finished. ``False`` when its
    version moved (someone else owns it)."""
    kept = result_store.kept(execution, "abandoned", now, error=error) if keep_result else None
    abandoned = Completion(
        execution=execution,
        kind="abandon",
        now=now,
        failures=failures,
        error=error,
        outcome="abandoned",
        started_at=execution.started_at,
        result=kept,
    )
    [removed] = complete(conn, statements, [abandoned], history)
    return removed


def revive(
    conn: Connection,
    statements: Statements,
    *,
    threshold: datetime,
    now: datetime,
    history: HistorySetting = "none",
) -> list[Execution]:
    """Make executions whose heartbeat is older than ``threshold`` due again; return them
    as found (who had picked them, their last heartbeat and start). Each is recorded in
    history as ``dead``, as ``history`` allows: its start, where it was recorded, and
    otherwise an error text saying that its handler may have run."""
    stmts = statements.running
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
            rows = stmts.revive_found.run(conn, {**params, **stmts.backend.bind_held_keys(chunk)})
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
    history_store.record(
        conn,
        statements,
        history,
        [
            history_store.Entry(
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
    conn: Connection, statements: Statements, *, now: datetime, limit: int
) -> list[tuple[Any, Any, list[str]]]:
    """Rows due or picked that no scheduler can load, at most ``limit``: each one's task
    name, instance id and the columns whose values cannot be read."""
    stmts = statements.running
    rows = conn.execute(stmts.find_unreadable, {"now": now, "limit": limit}).mappings()
    return [
        (row["task_name"], row["task_instance"], [n for n in stmts.readable if not row[f"ok_{n}"]])
        for row in rows
    ]


def next_due(
    conn: Connection, statements: Statements, *, names: Sequence[str], now: datetime
) -> datetime | None:
    """The earliest execution time after ``now`` among the unpicked rows of ``names``."""
    if not names:
        return None
    stmts = statements.running
    found: datetime | None = conn.execute(
        stmts.next_due, {"names": list(names), "now": now}
    ).scalar()
    return found


def delete_orphans(
    conn: Connection, statements: Statements, *, known: Sequence[str], threshold: datetime
) -> list[tuple[str, str, Any]]:
    """Delete unpicked rows of unknown tasks due before ``threshold``; return what went."""
    stmts = statements.running
    rows = stmts.delete_orphans.run(conn, {"names": list(known), "threshold": threshold})
    return [(row.task_name, row.task_instance, row.task_data) for row in rows]
